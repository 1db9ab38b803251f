package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesSymlinkInExport: a symbolic link planted below the mount point, to a
// local directory, must not make fio write there under the NFS mount's name.
func TestRunRefusesSymlinkInExport(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, link, mount string }{
		{"the benchmark path", "data", "data"},
		{"a directory on the way", "data", "data/sub"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHost(t, "nfs4")
			local := t.TempDir()
			if err := os.MkdirAll(filepath.Join(local, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(local, filepath.Join(h.mount, tt.link)); err != nil {
				t.Fatal(err)
			}
			_, err := h.runner().Run(context.Background(), RunOptions{Mount: filepath.Join(h.mount, tt.mount), Profile: "seq-read", Repeat: 1, Size: 1 << 20})
			if !errors.Is(err, errEscape) || !strings.Contains(err.Error(), "symbolic link") {
				t.Fatalf("err = %v, want a refusal naming the link", err)
			}
			if len(h.calls) != 0 {
				t.Errorf("fio ran %d times", len(h.calls))
			}
			for _, d := range []string{local, filepath.Join(local, "sub")} {
				entries, _ := os.ReadDir(d)
				for _, e := range entries {
					if strings.HasPrefix(e.Name(), DirPrefix) {
						t.Errorf("created %s in %s, behind the link", e.Name(), d)
					}
				}
			}
		})
	}
	// A real subdirectory of the mount is fine.
	h := newFakeHost(t, "nfs4")
	sub := filepath.Join(h.mount, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := h.runner().Run(context.Background(), RunOptions{Mount: sub, Profile: "seq-read", Repeat: 1, Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if len(h.dirsSeen) == 0 || !strings.HasPrefix(h.dirsSeen[0], sub+"/"+DirPrefix) {
		t.Errorf("fio ran in %v, want below %s", h.dirsSeen, sub)
	}
}
