package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/version"
)

func newVersionCommand(streams IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the nfstune version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(streams.Out, "nfstune %s %s/%s %s\n", version.String(), runtime.GOOS, runtime.GOARCH, runtime.Version())
			return err
		},
	}
}
