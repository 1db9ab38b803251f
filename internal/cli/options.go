package cli

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/shell"
)

// Formats of nfstune options: the options as a mount command line, an /etc/fstab line or
// an nfsmount.conf section, or the resolved profile as JSON or YAML.
const (
	formatMount        = "mount"
	formatFstab        = "fstab"
	formatNFSMountConf = "nfsmount.conf"
)

var optionsFormats = []string{formatMount, formatFstab, formatNFSMountConf, OutputJSON, OutputYAML}

type optionsFlags struct {
	backend    string
	workload   string
	config     string
	format     string
	server     string
	export     string
	mountpoint string
}

func newOptionsCommand(streams IOStreams) *cobra.Command {
	flags := &optionsFlags{}
	c := &cobra.Command{
		Use:   "options",
		Short: "Print the recommended NFS mount options for a backend and workload",
		Long: `options prints the mount options nfstune recommends for a backend and workload: as mount -o
options, as an /etc/fstab line, or as an /etc/nfsmount.conf section. With --config, the first rule
matching --server, --export and --mountpoint applies (its backend and workload unless given here,
and its overrides). Read-ahead is not a mount option; it is printed as a comment in the fstab and
nfsmount.conf formats.`,
		Example: `  nfstune options --backend azure-files --workload sequential-read
  nfstune options --backend azure-netapp-files --workload static-tools -o fstab \
      --server 10.0.0.4 --export /tools --mountpoint /tools
  nfstune options --backend aws-efs -o nfsmount.conf --server fs-0123abcd.efs.us-east-1.amazonaws.com
  nfstune options --backend azure-files --workload sequential-read -o json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runOptions(c.Context(), streams, flags)
		},
	}
	f := c.Flags()
	addBackendFlag(c, &flags.backend, "backend", "backend: "+backendNames()+" (default: from --server or the config, else generic)")
	f.StringVar(&flags.workload, "workload", "", "workload: "+strings.Join(policy.Workloads(), ", ")+" (default: the config's, else general)")
	f.StringVar(&flags.config, "config", "", "nfstune policy file (default: built-in profiles)")
	addOutputFlag(c, &flags.format, optionsFormats, "json and yaml: the resolved profile")
	deprecatedAlias(c, "format", "output")
	f.StringVar(&flags.server, "server", "", "NFS server name or address")
	f.StringVar(&flags.export, "export", "", "exported path on the server")
	f.StringVar(&flags.mountpoint, "mountpoint", "", "local mount point")
	_ = c.RegisterFlagCompletionFunc("workload", cobra.FixedCompletions(policy.Workloads(), cobra.ShellCompDirectiveNoFileComp))
	return c
}

func runOptions(_ context.Context, streams IOStreams, flags *optionsFlags) error {
	usage := func(format string, args ...any) error {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf(format, args...)}
	}
	if flags.workload != "" && !slices.Contains(policy.Workloads(), flags.workload) {
		return usage("unknown --workload %q (want one of %s)", flags.workload, strings.Join(policy.Workloads(), ", "))
	}
	if flags.server != "" && !policy.ValidServer(flags.server) {
		return usage("--server %q is not a host name or an IP address", flags.server)
	}
	if flags.export != "" && !strings.HasPrefix(flags.export, "/") {
		return usage("--export %q must be an absolute path", flags.export)
	}
	if flags.mountpoint != "" && !strings.HasPrefix(flags.mountpoint, "/") {
		return usage("--mountpoint %q must be an absolute path", flags.mountpoint)
	}
	if flags.format == formatNFSMountConf && strings.ContainsFunc(flags.mountpoint, func(r rune) bool { return r == '"' || unicode.IsControl(r) }) {
		return usage("--mountpoint %q: an nfsmount.conf section name cannot hold a quote or a control character", flags.mountpoint)
	}
	pol, err := policy.Load(flags.config)
	if err != nil {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("loading policy: %w", err)}
	}
	// A mount as the inventory would see it, so that config rules can match it.
	m := inventory.Mount{Server: flags.server, Export: flags.export, Backend: inventory.DetectBackend(flags.server)}
	if a, err := netip.ParseAddr(strings.Trim(flags.server, "[]")); err == nil {
		m.ServerAddr = a.String()
	}
	if flags.mountpoint != "" {
		m.MountPoints = []string{flags.mountpoint}
	}
	res := pol.ResolveAs(&m, flags.backend, flags.workload)
	if flags.format == OutputJSON || flags.format == OutputYAML {
		out := optionsOutput{Resolved: res, Options: res.Mount.List()}
		if out.Options == nil {
			out.Options = []string{}
		}
		return writeStructured(streams.Out, flags.format, out)
	}
	if err := writeOptions(streams.Out, flags, res); err != nil {
		return fmt.Errorf("writing options: %w", err)
	}
	return nil
}

// optionsOutput is the -o json|yaml document: the resolved profile, and its mount options
// as mount -o takes them.
type optionsOutput struct {
	policy.Resolved
	Options []string `json:"options"`
}

func writeOptions(w io.Writer, flags *optionsFlags, res policy.Resolved) error {
	opts := res.Mount.List()
	server, export, mp := placeholder(flags.server, "<server>"), placeholder(flags.export, "<export>"), placeholder(flags.mountpoint, "<mountpoint>")
	if strings.Contains(server, ":") && !strings.HasPrefix(server, "[") {
		server = "[" + server + "]"
	}
	var b strings.Builder
	switch flags.format {
	case formatMount:
		o := strings.Join(opts, ",")
		if o == "" {
			o = "defaults"
		}
		if flags.server != "" && flags.export != "" && flags.mountpoint != "" {
			fmt.Fprintf(&b, "%s\n", shell.Join("mount", "-t", "nfs", "-o", o, server+":"+flags.export, flags.mountpoint))
		} else {
			fmt.Fprintf(&b, "-o %s\n", o)
		}
	case formatFstab:
		writeComment(&b, res)
		o := strings.Join(opts, ",")
		if o == "" {
			o = "defaults"
		}
		fmt.Fprintf(&b, "%s:%s %s nfs %s 0 0\n", server, fstabEscape(export), fstabEscape(mp), o)
	case formatNFSMountConf:
		writeComment(&b, res)
		switch {
		case flags.server != "":
			fmt.Fprintf(&b, "[ Server \"%s\" ]\n", flags.server)
		case flags.mountpoint != "":
			fmt.Fprintf(&b, "[ MountPoint \"%s\" ]\n", flags.mountpoint)
		default:
			b.WriteString("[ NFSMount_Global_Options ]\n")
		}
		for _, o := range opts {
			b.WriteString(nfsmountConfLine(o) + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeComment(b *strings.Builder, res policy.Resolved) {
	fmt.Fprintf(b, "# nfstune %s/%s (%s)\n", res.Backend, res.Workload, res.Rule)
	switch {
	case res.Adaptive != nil:
		fmt.Fprintf(b, "# read_ahead_kb is adaptive, %d to %d, and not a mount option: nfstune apply sets the floor with a udev rule, the nfstune agent moves it\n",
			res.Adaptive.MinKB, res.Adaptive.MaxKB)
	case res.ReadAheadRSizes > 0:
		fmt.Fprintf(b, "# read_ahead_kb %d x rsize (%d at rsize %d KiB) is not a mount option: nfstune apply sets it with a udev rule\n",
			res.ReadAheadRSizes, res.ReadAheadKB, res.ReadAheadKB/res.ReadAheadRSizes)
	case res.ReadAheadKB > 0:
		fmt.Fprintf(b, "# read_ahead_kb %d is not a mount option: nfstune apply sets it with a udev rule\n", res.ReadAheadKB)
	}
}

// nfsmountConfLine writes one mount option in nfsmount.conf(5) syntax: "key=value" as
// "Key=value", a flag as "Flag=True", and a "noflag" as "Flag=False".
func nfsmountConfLine(opt string) string {
	k, v, ok := strings.Cut(opt, "=")
	switch {
	case k == "vers":
		return "Nfsvers=" + v
	case ok:
		return capitalize(k) + "=" + v
	case k == "soft" || k == "hard":
		return capitalize(k) + "=True"
	case strings.HasPrefix(k, "no") && len(k) > 2:
		return capitalize(k[2:]) + "=False"
	}
	return capitalize(k) + "=True"
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func placeholder(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// fstabEscape octal-escapes white space and backslashes, as fstab(5) requires.
func fstabEscape(s string) string {
	return strings.NewReplacer(" ", `\040`, "\t", `\011`, "\n", `\012`, `\`, `\134`).Replace(s)
}
