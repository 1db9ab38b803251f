package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func mustWrite(t *testing.T, p, content string, perm fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
}

func ownerOf(t *testing.T, p string) (uid, gid uint32, perm fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid, fi.Mode()
}

func TestReplaceFileKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a file's owner needs root")
	}
	root := Root(t.TempDir())
	p := root.Etc("fstab")
	mustWrite(t, p, "old\n", 0o640)
	if err := os.Chown(p, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if err := root.ReplaceFile("/etc/fstab", []byte("new\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new\n" {
		t.Errorf("content = %q", b)
	}
	if uid, gid, mode := ownerOf(t, p); uid != 1000 || gid != 1000 || mode != 0o640 {
		t.Errorf("owner %d:%d mode %v, want 1000:1000 -rw-r-----", uid, gid, mode)
	}
	// A backup takes the owner it is given.
	if err := root.ReplaceFileAttr("/etc/fstab.bak", []byte("old\n"), FileAttr{Perm: 0o640, UID: 1000, GID: 1000}); err != nil {
		t.Fatal(err)
	}
	if uid, gid, mode := ownerOf(t, root.Etc("fstab.bak")); uid != 1000 || gid != 1000 || mode != 0o640 {
		t.Errorf("backup owner %d:%d mode %v, want 1000:1000 -rw-r-----", uid, gid, mode)
	}
}

func TestReplaceFile(t *testing.T) {
	root := Root(t.TempDir())
	// Missing directories are created.
	if err := root.ReplaceFile("/etc/udev/rules.d/99-x.rules", []byte("rule\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := root.Etc("udev", "rules.d", "99-x.rules")
	if b, _ := os.ReadFile(p); string(b) != "rule\n" {
		t.Errorf("content = %q", b)
	}
	if _, _, mode := ownerOf(t, p); mode != 0o644 {
		t.Errorf("mode %v, want 0644", mode)
	}
	// The mode given wins over the old one, and no temporary file is left.
	if err := root.ReplaceFile("/etc/udev/rules.d/99-x.rules", []byte("rule 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, mode := ownerOf(t, p); mode != 0o600 {
		t.Errorf("mode %v, want 0600", mode)
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Errorf("directory holds %v, want only the rule", entries)
	}
	if err := root.RemoveFile("/etc/udev/rules.d/99-x.rules"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after RemoveFile: %v", err)
	}
	if err := root.RemoveFile("/etc/udev/rules.d/99-x.rules"); err != nil {
		t.Errorf("removing a missing file: %v", err)
	}
	if err := root.RemoveFile("/no/such/dir/file"); err != nil {
		t.Errorf("removing below a missing directory: %v", err)
	}
}

// TestReplaceFileRefusesSymlinks: a link as the file or as any directory on its way is
// refused with ErrSymlink, and nothing is written where it points.
func TestReplaceFileRefusesSymlinks(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, root Root, elsewhere string)
		path  string
	}{
		{"symlinked rules.d", func(t *testing.T, root Root, elsewhere string) {
			if err := os.MkdirAll(root.Etc("udev"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, root.Etc("udev", "rules.d")); err != nil {
				t.Fatal(err)
			}
		}, "/etc/udev/rules.d/99-x.rules"},
		{"symlinked journal directory", func(t *testing.T, root Root, elsewhere string) {
			if err := os.MkdirAll(root.Path("var", "lib"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, root.Path("var", "lib", "nfstune")); err != nil {
				t.Fatal(err)
			}
		}, "/var/lib/nfstune/journal.json"},
		{"symlinked /etc, relative", func(t *testing.T, root Root, elsewhere string) {
			if err := os.MkdirAll(root.Path("real-etc"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("real-etc", root.Path("etc")); err != nil {
				t.Fatal(err)
			}
		}, "/etc/fstab"},
		{"symlinked file", func(t *testing.T, root Root, elsewhere string) {
			mustWrite(t, filepath.Join(elsewhere, "fstab"), "theirs\n", 0o644)
			if err := os.MkdirAll(root.Etc(), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(elsewhere, "fstab"), root.Etc("fstab")); err != nil {
				t.Fatal(err)
			}
		}, "/etc/fstab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, elsewhere := Root(t.TempDir()), t.TempDir()
			tt.setup(t, root, elsewhere)
			before := listTree(t, elsewhere)
			err := root.ReplaceFile(tt.path, []byte("ours\n"), 0o644)
			if !errors.Is(err, ErrSymlink) || !strings.Contains(err.Error(), "symbolic link") {
				t.Fatalf("err = %v, want ErrSymlink", err)
			}
			if _, err := root.Attr(tt.path); !errors.Is(err, ErrSymlink) {
				t.Errorf("Attr: err = %v, want ErrSymlink", err)
			}
			if after := listTree(t, elsewhere); after != before {
				t.Errorf("wrote through the link:\nbefore %s\nafter  %s", before, after)
			}
			if b, _ := os.ReadFile(root.Path("real-etc", "fstab")); len(b) != 0 {
				t.Errorf("wrote through the relative link: %q", b)
			}
		})
	}
}

func listTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		c, _ := os.ReadFile(p)
		b.WriteString(p + "=" + string(c) + ";")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
