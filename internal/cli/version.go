package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/printer"
	"github.com/nfstune/nfstune/internal/version"
)

func newVersionCommand(streams IOStreams) *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the nfstune version, its commit and the Go release it was built with",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return writeVersion(streams, output)
		},
	}
	addOutputFlag(c, &output, printer.Formats, "")
	return c
}

func writeVersion(streams IOStreams, output string) error {
	v := version.Get()
	if output != OutputTable {
		return writeStructured(streams.Out, output, v)
	}
	_, err := io.WriteString(streams.Out, v.Text("nfstune"))
	return err
}
