package app

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/cli"
)

// The final error quotes what the user named: a config path with a terminal escape and a
// newline must reach stderr escaped, on one line.
func TestRunEscapesFinalError(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "p\x1b[2J\nnfstune: forged.yaml")
	var out, errOut bytes.Buffer
	code := Run(context.Background(), cli.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		[]string{"options", "--config", config})
	if code != cli.ExitError2 {
		t.Errorf("exit %d, want %d", code, cli.ExitError2)
	}
	got := errOut.String()
	if strings.ContainsAny(got, "\x1b") || strings.Count(got, "\n") != 1 || !strings.Contains(got, `p\x1b[2J\nnfstune: forged.yaml`) {
		t.Errorf("stderr = %q, want one line with the path escaped", got)
	}
}

// A mistyped verb prints cobra's suggestion on lines of its own, not as literal "\n"; the
// verb as typed stays escaped.
func TestRunUnknownCommand(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"audti"}, "nfstune: unknown command \"audti\" for \"nfstune\"\n\nDid you mean this?\n\taudit\n\nRun 'nfstune --help' for usage.\n"},
		{[]string{"bench", "rnu"}, "nfstune: unknown command \"rnu\" for \"nfstune bench\"\n\nDid you mean this?\n\trun\n\nRun 'nfstune bench --help' for usage.\n"},
		{[]string{"aud\x1b[2J\nit"}, "nfstune: unknown command \"aud\\x1b[2J\\nit\" for \"nfstune\"\n\nRun 'nfstune --help' for usage.\n"},
	} {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), cli.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, tt.args)
		if code != cli.ExitError2 || errOut.String() != tt.want || out.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr:\n%q\nwant:\n%q", tt.args, code, out.String(), errOut.String(), tt.want)
		}
	}
}
