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
