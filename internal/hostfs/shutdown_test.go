package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// nfsRoot is a root with /sys/fs/nfs/0:53/shutdown = 0, as a working superblock shows it.
func nfsRoot(t *testing.T) Root {
	t.Helper()
	root := Root(t.TempDir())
	mustWrite(t, root.Sys("fs", "nfs", "0:53", "shutdown"), "0\n", 0o644)
	return root
}

func TestShutdownNFS(t *testing.T) {
	root := nfsRoot(t)
	if down, err := ReadNFSShutdown(root, "0:53"); err != nil || down {
		t.Fatalf("before: ReadNFSShutdown = %v, %v; want false", down, err)
	}
	if err := ShutdownNFS(root, "0:53"); err != nil {
		t.Fatalf("ShutdownNFS: %v", err)
	}
	if b, _ := os.ReadFile(root.Sys("fs", "nfs", "0:53", "shutdown")); string(b) != "1\n" {
		t.Errorf("shutdown = %q, want \"1\\n\"", b)
	}
	if down, err := ReadNFSShutdown(root, "0:53"); err != nil || !down {
		t.Errorf("after: ReadNFSShutdown = %v, %v; want true", down, err)
	}
}

func TestShutdownNFSRefuses(t *testing.T) {
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "shutdown"), "0\n", 0o644)
	tests := []struct {
		name  string
		dev   string
		setup func(t *testing.T, root Root)
		is    error
	}{
		{name: "no attribute (before Linux 6.6)", dev: "0:54", is: fs.ErrNotExist, setup: func(t *testing.T, root Root) {
			os.MkdirAll(root.Sys("fs", "nfs", "0:54"), 0o755)
		}},
		{name: "no superblock directory", dev: "0:62", is: fs.ErrNotExist, setup: func(*testing.T, Root) {}},
		{name: "directory linked out of /sys", dev: "0:60", setup: func(t *testing.T, root Root) {
			if err := os.Symlink(outside, root.Sys("fs", "nfs", "0:60")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "attribute is a link", dev: "0:61", is: ErrSymlink, setup: func(t *testing.T, root Root) {
			os.MkdirAll(root.Sys("fs", "nfs", "0:61"), 0o755)
			if err := os.Symlink("../0:53/shutdown", root.Sys("fs", "nfs", "0:61", "shutdown")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "crafted device", dev: "0:53/../../../../etc", setup: func(*testing.T, Root) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := nfsRoot(t)
			tt.setup(t, root)
			err := ShutdownNFS(root, tt.dev)
			if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("err = %v, want an error matching %v", err, tt.is)
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "shutdown")); string(b) != "0\n" {
				t.Errorf("file outside /sys = %q, want 0", b)
			}
			if b, _ := os.ReadFile(root.Sys("fs", "nfs", "0:53", "shutdown")); string(b) != "0\n" {
				t.Errorf("0:53 = %q, want 0", b)
			}
			if _, err := os.Lstat(root.Sys("fs", "nfs", "0:54", "shutdown")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("created an attribute: %v", err)
			}
		})
	}
}
