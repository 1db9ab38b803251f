package tune

import (
	"os"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// TestState: a state file written is read back; a missing one is not found, without an
// error; a malformed one is an error naming it; the directory is made 0700.
func TestState(t *testing.T) {
	t.Parallel()
	root := hostfs.Root(t.TempDir())
	const rel = "/var/lib/nfstune/test.json"
	var v struct{ N int }
	if found, err := ReadState(root, rel, 1<<10, &v); found || err != nil {
		t.Fatalf("missing file: found %v, %v", found, err)
	}
	if err := WriteState(root, rel, struct{ N int }{7}); err != nil {
		t.Fatal(err)
	}
	if found, err := ReadState(root, rel, 1<<10, &v); !found || err != nil || v.N != 7 {
		t.Fatalf("read back: found %v, %+v, %v", found, v, err)
	}
	if fi, err := os.Stat(root.Path("/var/lib/nfstune")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v, %v", fi, err)
	}
	if err := os.WriteFile(root.Path(rel), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadState(root, rel, 1<<10, &v); err == nil || !strings.Contains(err.Error(), rel) {
		t.Errorf("malformed file: %v, want an error naming %s", err, rel)
	}
}
