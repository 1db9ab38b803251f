package app

import (
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nfstune/nfstune/internal/backend"
	"github.com/nfstune/nfstune/internal/cli"
	"github.com/nfstune/nfstune/internal/plugin"
)

// The consistency rules of both programs' command lines, checked over every command of
// their cobra trees, so that a new verb or flag cannot bring back two names for one thing.

// commonFormats are what -o takes on every command that prints (printer.Formats).
var commonFormats = []string{"table", "json", "yaml"}

// documentFormats are the commands whose output is a document another program reads, and
// whose -o names that document's formats in place of a table.
var documentFormats = map[string][]string{
	"nfstune options":         {"mount", "fstab", "nfsmount.conf", "json", "yaml"}, // mount, fstab(5), nfsmount.conf(5)
	"nfstune k8s render":      {"yaml", "json"},                                    // manifests for kubectl apply
	"nfstune k8s volume":      {"yaml", "json"},
	"nfstune bench report":    {"md", "html"},                      // the report written into --out
	"kubectl nfstune learned": {"table", "json", "yaml", "policy"}, // and a policy file to pin
}

// silent are the commands that print no result to format: a server, a pause, the
// installer's init container, the udev helper, whose one line is udev's IMPORT{program}
// protocol, and a fleet curve's pod, whose JSON lines kubectl nfstune bench reads.
var silent = []string{"nfstune agent", "nfstune bench curve-pod", "nfstune k8s pause", "nfstune k8s install-node", "nfstune k8s revert-node", "nfstune udev-readahead"}

// synonyms are flag names that mean the same thing: only the first may be a visible flag,
// anywhere in either program; the others live on only as hidden deprecated aliases.
var synonyms = [][]string{
	{"output", "format"},
	{"client-nic", "nic-speed", "nic"},
	{"export", "share"},
	{"root", "host"},
}

// hostVerbs are the verbs that read or write the host, and so take --root; logVerbs those
// that log, and so take --log-level and --log-format; clusterVerbs the plugin's commands
// that ask the API server.
var (
	hostVerbs = []string{"nfstune audit", "nfstune apply", "nfstune revert", "nfstune shutdown", "nfstune stats",
		"nfstune agent", "nfstune udev-readahead", "nfstune bench run", "nfstune bench sweep", "nfstune bench curve", "nfstune bench curve-pod", "nfstune k8s install-node", "nfstune k8s revert-node"}
	logVerbs = []string{"nfstune agent", "nfstune audit", "nfstune bench run", "nfstune bench sweep", "nfstune bench curve", "nfstune bench curve-pod",
		"nfstune udev-readahead", "nfstune k8s install-node", "nfstune k8s revert-node"}
	clusterVerbs = []string{"kubectl nfstune status", "kubectl nfstune audit", "kubectl nfstune learned", "kubectl nfstune top", "kubectl nfstune bench"}
	// failOnVerbs are the plugin's commands that judge compliance.
	failOnVerbs = []string{"kubectl nfstune status", "kubectl nfstune audit"}
)

// backendFlags are the flags that name an NFS service.
var backendFlags = []string{"backend", "service"}

type program struct {
	name string // as usage lines must start
	root *cobra.Command
}

func programs() []program {
	return []program{
		{"nfstune", cli.NewRoot(cli.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})},
		{"kubectl nfstune", plugin.NewRoot(plugin.Streams{Out: io.Discard, ErrOut: io.Discard})},
	}
}

// commands returns c and every command below it.
func commands(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, sub := range c.Commands() {
		out = append(out, commands(sub)...)
	}
	return out
}

// isGroup reports whether c only groups other commands: its own flags are none.
func isGroup(c *cobra.Command) bool {
	return c.HasSubCommands() && !c.LocalNonPersistentFlags().HasFlags()
}

// deprecated reports whether f is a hidden alias kept for old command lines.
func deprecated(f *pflag.Flag) bool {
	return f.Hidden && (f.Deprecated != "" || len(f.Annotations[cli.DeprecatedAnnotation]) > 0)
}

func TestCommandLineConsistency(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, p := range programs() {
		for _, c := range commands(p.root) {
			path := c.CommandPath()
			seen[path] = true
			t.Run(path, func(t *testing.T) {
				if !strings.HasPrefix(c.UseLine(), p.name+" ") && c.UseLine() != p.name {
					t.Errorf("usage line %q does not start with %q", c.UseLine(), p.name)
				}
				if c.PersistentFlags().HasFlags() {
					c.PersistentFlags().VisitAll(func(f *pflag.Flag) {
						t.Errorf("persistent flag --%s: shown on every command below, used or not; declare it where it is used", f.Name)
					})
				}
				checkOutput(t, c, path)
				checkSynonyms(t, c)
				checkShared(t, c, path)
				checkBackends(t, c)
			})
		}
	}
	for _, list := range [][]string{slices.Collect(maps.Keys(documentFormats)), silent, hostVerbs, logVerbs, clusterVerbs, failOnVerbs} {
		for _, path := range list {
			if !seen[path] {
				t.Errorf("%s is named in this test but is no command", path)
			}
		}
	}
}

// checkOutput: a command that prints has -o/--output, whose value refuses what it does not
// take, and takes the common formats, or its document's.
func checkOutput(t *testing.T, c *cobra.Command, path string) {
	t.Helper()
	f := c.LocalFlags().Lookup("output")
	if !c.Runnable() || isGroup(c) || slices.Contains(silent, path) {
		if f != nil {
			t.Errorf("-o on a command listed as printing nothing")
		}
		return
	}
	if f == nil || f.Shorthand != "o" {
		t.Errorf("no -o/--output flag")
		return
	}
	want, ok := documentFormats[path]
	if !ok {
		want = commonFormats
	}
	complete, ok := c.GetFlagCompletionFunc("output")
	if !ok {
		t.Errorf("-o completes no formats")
		return
	}
	completions, _ := complete(c, nil, "")
	var got []string
	for _, s := range completions {
		got = append(got, string(s))
	}
	if !slices.Equal(got, want) {
		t.Errorf("-o takes %v, want %v", got, want)
	}
	for _, format := range want {
		if err := f.Value.Set(format); err != nil {
			t.Errorf("-o %s: %v", format, err)
		}
	}
	if err := f.Value.Set("xml"); err == nil {
		t.Errorf("-o xml accepted when the flag is set: a format must be checked there, not left to each command")
	}
	if def := f.DefValue; def != want[0] {
		t.Errorf("-o defaults to %q, want %q", def, want[0])
	}
}

// checkSynonyms: no command has two visible flags of one meaning, and no program names one
// meaning two ways.
func checkSynonyms(t *testing.T, c *cobra.Command) {
	t.Helper()
	for _, group := range synonyms {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if i := slices.Index(group, f.Name); i > 0 && !deprecated(f) {
				t.Errorf("--%s means --%s: rename it, keeping --%s as a hidden deprecated alias if scripts use it", f.Name, group[0], f.Name)
			}
		})
	}
}

// checkShared: --root exactly on the verbs that read the host, the log flags on those
// that log, the plugin's cluster flags on the commands that ask the API server.
func checkShared(t *testing.T, c *cobra.Command, path string) {
	t.Helper()
	for _, tt := range []struct {
		flags []string
		on    []string
	}{
		{[]string{"root"}, hostVerbs},
		{[]string{"log-level", "log-format"}, logVerbs},
		{[]string{"kubeconfig", "context", "namespace", "timeout", "request-timeout"}, clusterVerbs},
		{[]string{"fail-on"}, failOnVerbs},
	} {
		for _, name := range tt.flags {
			if strings.HasPrefix(path, "nfstune ") && name == "namespace" || strings.HasPrefix(path, "nfstune ") && name == "fail-on" {
				continue // nfstune's own --namespace (k8s) and --fail-on (audit) are other flags
			}
			has := c.Flags().Lookup(name) != nil || c.InheritedFlags().Lookup(name) != nil
			if want := slices.Contains(tt.on, path); has != want {
				t.Errorf("--%s: declared %v, want %v", name, has, want)
			}
		}
	}
}

// checkBackends: a flag that names a backend takes every name of package backend's table
// and keeps its canonical name; an unknown name is refused.
func checkBackends(t *testing.T, c *cobra.Command) {
	t.Helper()
	for _, name := range backendFlags {
		f := c.LocalFlags().Lookup(name)
		if f == nil {
			continue
		}
		for _, canonical := range backend.Names() {
			for _, n := range append([]string{canonical}, backend.Aliases(canonical)...) {
				if err := f.Value.Set(n); err != nil || f.Value.String() != canonical {
					t.Errorf("--%s %s: %q, %v; want %q", name, n, f.Value.String(), err, canonical)
				}
			}
		}
		if err := f.Value.Set("s3"); err == nil {
			t.Errorf("--%s s3 accepted", name)
		}
	}
}
