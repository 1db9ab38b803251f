package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nfstune/nfstune/internal/golden"
)

// TestLabTreesGolden runs nfstune audit and nfstune stats on every tree recorded from the
// lab's kernels (../inventory/testdata/lab-*, make lab-record) and compares what they print,
// warnings included, with testdata/lab/<tree>.<verb>.golden. UPDATE_GOLDEN=1 rewrites them.
func TestLabTreesGolden(t *testing.T) {
	t.Parallel()
	dirs, err := filepath.Glob(filepath.Join("..", "inventory", "testdata", "lab-*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no ../inventory/testdata/lab-* trees")
	}
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		tree := filepath.Base(dir)
		for _, verb := range []struct {
			name string
			args []string
			code int
		}{
			// A recorded tree does not change between the two reads of the stall sampling: the
			// transports with requests queued in a server-gone tree are reported (NFS093).
			{name: "audit", args: []string{"audit", "--stall-window", "1ms", "--fail-on", "none"}},
			{name: "stats", args: []string{"stats"}},
		} {
			t.Run(tree+"/"+verb.name, func(t *testing.T) {
				t.Parallel()
				out, errOut, code := runVerb(t, append([]string{"--root", dir}, verb.args...)...)
				if code != verb.code {
					t.Fatalf("exit code %d, want %d; stderr:\n%s", code, verb.code, errOut)
				}
				got := out
				if errOut != "" {
					got += "--- stderr\n" + errOut
				}
				golden.Check(t, filepath.Join("testdata", "lab", tree+"."+verb.name+".golden"), []byte(got))
			})
		}
	}
}
