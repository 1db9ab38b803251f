package tune

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// writeLive writes sysctls only: a read_ahead_kb path, even a valid one, is refused and
// left as it was (hostfs.SetReadAhead is the one sysfs writer).
func TestWriteLiveOnlySysctls(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	attrs := map[string]string{
		"sys/class/bdi/0:53/read_ahead_kb":       "128\n",
		"proc/sys/sunrpc/tcp_slot_table_entries": "2\n",
	}
	for p, v := range attrs {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := writeLive(hostfs.Root(root), "/sys/class/bdi/0:53/read_ahead_kb", "4096")
	if err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("read_ahead_kb through writeLive: err = %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "sys/class/bdi/0:53/read_ahead_kb")); string(b) != "128\n" {
		t.Errorf("read_ahead_kb = %q, want it untouched", b)
	}
	got, err := writeLive(hostfs.Root(root), "/proc/sys/sunrpc/tcp_slot_table_entries", "128")
	if err != nil || got != "128" {
		t.Errorf("sysctl: %q, %v; want 128 written", got, err)
	}
}
