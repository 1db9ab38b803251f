package cli

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nfstune/nfstune/internal/version"
)

// An unknown --log-level or --log-format is bad input (exit 2) before the command runs,
// not a silent fall-back to info and text.
func TestLogFlagsRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-level", "bogus", "audit", "--root", auditRoot}, `--log-level "bogus": want debug, info, warn or error`},
		{[]string{"audit", "--root", auditRoot, "--log-level", "verbose"}, `--log-level "verbose"`},
		{[]string{"--log-format", "xml", "audit", "--root", auditRoot}, `--log-format "xml": want text or json`},
	} {
		stdout, stderr, code := runVerb(t, tt.args...)
		if code != ExitError2 || !strings.Contains(stderr, tt.want) || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", tt.args, code, stdout, stderr, ExitError2, tt.want)
		}
	}
	for _, level := range []string{"debug", "INFO", "warn", "error"} {
		if _, stderr, code := runVerb(t, "audit", "--root", auditRoot, "--fail-on", "none", "--log-level", level, "--log-format", "json"); code != ExitOK {
			t.Errorf("--log-level %s: exit %d: %s", level, code, stderr)
		}
	}
}

// A verb declares the shared flags it uses and no other: --root where it reads the host,
// the log flags where it logs. A flag given before the verb still reaches it.
func TestSharedFlagsOnlyWhereUsed(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"options", "--root", "/host"},
		{"plan", "--throughput", "1GiB/s", "--root", "/host"},
		{"version", "--log-level", "debug"},
		{"k8s", "render", "--root", "/host"},
	} {
		if _, stderr, code := runVerb(t, args...); code != ExitError2 || !strings.Contains(stderr, "unknown flag") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and an unknown flag", args, code, stderr)
		}
	}
	if _, stderr, code := runVerb(t, "--root", auditRoot, "audit", "--fail-on", "none"); code != ExitOK {
		t.Errorf("--root before audit: exit %d: %s", code, stderr)
	}
}

// nfstune --version and nfstune version -o json|yaml|table say the build's version.
func TestVersion(t *testing.T) {
	t.Parallel()
	want := version.Get()
	if out, stderr, code := runVerb(t, "--version"); code != ExitOK || out != "nfstune "+version.String()+"\n" {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	for _, format := range []string{"json", "yaml"} {
		out, stderr, code := runVerb(t, "version", "-o", format)
		if code != ExitOK {
			t.Fatalf("version -o %s: exit %d: %s", format, code, stderr)
		}
		var got version.Info
		b := []byte(out)
		if format == "yaml" {
			var err error
			if b, err = yaml.YAMLToJSON(b); err != nil {
				t.Fatal(err)
			}
		}
		if err := json.Unmarshal(b, &got); err != nil || got != want {
			t.Errorf("version -o %s = %+v (%v), want %+v", format, got, err, want)
		}
	}
	out, _, code := runVerb(t, "version")
	if code != ExitOK || !strings.HasPrefix(out, "nfstune "+want.Version+"\n") || !strings.Contains(out, "go: "+want.Go+"\n") {
		t.Errorf("version: exit %d, stdout %q", code, out)
	}
}

// A flag renamed for one name per meaning keeps its old name as a hidden alias: same
// output, and a warning on stderr, never on stdout.
func TestDeprecatedAliases(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ old, now []string }{
		{[]string{"options", "--backend", "generic", "--format", "fstab"}, []string{"options", "--backend", "generic", "-o", "fstab"}},
		{[]string{"k8s", "volume", "--backend", "generic", "--static", "--server", "nfs.example.com", "--share", "/tools"},
			[]string{"k8s", "volume", "--backend", "generic", "--static", "--server", "nfs.example.com", "--export", "/tools"}},
	} {
		oldOut, oldErr, oldCode := runVerb(t, tt.old...)
		nowOut, nowErr, nowCode := runVerb(t, tt.now...)
		if oldCode != ExitOK || nowCode != ExitOK || oldOut != nowOut {
			t.Errorf("%v: exit %d, stdout:\n%s\n%v: exit %d, stdout:\n%s", tt.old, oldCode, oldOut, tt.now, nowCode, nowOut)
		}
		if !strings.Contains(oldErr, "is deprecated, use --") || strings.Contains(nowErr, "deprecated") {
			t.Errorf("%v: stderr %q; %v: stderr %q", tt.old, oldErr, tt.now, nowErr)
		}
	}
}

// A mistyped verb is an UnknownCommandError with cobra's suggestions, from the root and
// from a group (bench, k8s), which would otherwise print its help and exit 0.
func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args    []string
		path    string
		suggest string
	}{
		{[]string{"audti"}, "nfstune", "audit"},
		{[]string{"bench", "rnu"}, "nfstune bench", "run"},
		{[]string{"k8s", "rendr"}, "nfstune k8s", "render"},
	} {
		root := NewRoot(IOStreams{In: strings.NewReader(""), Out: new(strings.Builder), ErrOut: new(strings.Builder)})
		root.SetArgs(tt.args)
		err := root.Execute()
		var unknown *UnknownCommandError
		if !errors.As(err, &unknown) || unknown.Path != tt.path || len(unknown.Suggestions) != 1 || unknown.Suggestions[0] != tt.suggest {
			t.Errorf("%v: err = %v (%+v), want an unknown command for %q suggesting %q", tt.args, err, unknown, tt.path, tt.suggest)
		}
	}
}

// BenchmarkNewRoot builds the command tree, which every start of the binary does before
// its command runs: the udev helper's at each NFS mount among them.
func BenchmarkNewRoot(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if root := NewRoot(IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}); !root.HasSubCommands() {
			b.Fatal("no commands")
		}
	}
}
