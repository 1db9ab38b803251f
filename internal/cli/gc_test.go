package cli

import (
	"bytes"
	"context"
	"io"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/inventory/inventorytest"
)

// gcPercent reads the collector's percent without changing it.
func gcPercent() int {
	percent := debug.SetGCPercent(100)
	debug.SetGCPercent(percent)
	return percent
}

func TestBatchGC(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	percent := gcPercent()
	restore := batchGC()
	if p := gcPercent(); p != batchGCPercent {
		t.Errorf("during the command: GOGC %d, want %d", p, batchGCPercent)
	}
	restore()
	if p := gcPercent(); p != percent {
		t.Errorf("after it: GOGC %d, want the earlier %d", p, percent)
	}
}

// TestBatchGCLeavesTheUsersSetting: GOGC or GOMEMLIMIT in the environment, and the command
// changes nothing.
func TestBatchGCLeavesTheUsersSetting(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv("GOGC", "")
			t.Setenv("GOMEMLIMIT", "")
			t.Setenv(env, "200")
			percent := gcPercent()
			restore := batchGC()
			defer restore()
			if p := gcPercent(); p != percent {
				t.Errorf("%s set: GOGC %d changed from %d", env, p, percent)
			}
		})
	}
}

// BenchmarkAuditCommand1000 and BenchmarkAuditCommand10000 run `nfstune audit -o json` on a
// synthetic host of 1,000 and 10,000 NFS mounts (inventorytest.GenerateTree), in this
// process: what a user waits for, less the binary's start.
func BenchmarkAuditCommand1000(b *testing.B)  { benchAuditCommand(b, 1000) }
func BenchmarkAuditCommand10000(b *testing.B) { benchAuditCommand(b, 10000) }

func benchAuditCommand(b *testing.B, n int) {
	dir := b.TempDir()
	if err := inventorytest.GenerateTree(dir, n); err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	for b.Loop() {
		out.Reset()
		root := NewRoot(IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: io.Discard})
		root.SetArgs([]string{"audit", "--root", dir, "--stall-window", "0", "--fail-on", "none", "-o", "json"})
		if err := root.ExecuteContext(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	if !bytes.Contains(out.Bytes(), []byte(`"findings"`)) {
		b.Fatalf("no findings in the report: %.200s", out.String())
	}
}
