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

// shutdownNFS opens the attribute and writes it, as tune.Shutdown does.
func shutdownNFS(r Root, device string) error {
	k, err := OpenNFSShutdown(r, device)
	if err != nil {
		return err
	}
	return k.Shutdown()
}

func TestShutdownNFS(t *testing.T) {
	root := nfsRoot(t)
	if down, err := ReadNFSShutdown(root, "0:53"); err != nil || down {
		t.Fatalf("before: ReadNFSShutdown = %v, %v; want false", down, err)
	}
	if err := shutdownNFS(root, "0:53"); err != nil {
		t.Fatalf("shutdown: %v", err)
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
			if err := os.MkdirAll(root.Sys("fs", "nfs", "0:54"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "no superblock directory", dev: "0:62", is: fs.ErrNotExist, setup: func(*testing.T, Root) {}},
		{name: "directory linked out of /sys", dev: "0:60", setup: func(t *testing.T, root Root) {
			if err := os.Symlink(outside, root.Sys("fs", "nfs", "0:60")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "attribute is a link", dev: "0:61", is: ErrSymlink, setup: func(t *testing.T, root Root) {
			if err := os.MkdirAll(root.Sys("fs", "nfs", "0:61"), 0o755); err != nil {
				t.Fatal(err)
			}
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
			err := shutdownNFS(root, tt.dev)
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

// TestNFSShutdownKnobBound: a knob opened on one attribute writes that one, not the file
// found at the path by the time of the write.
func TestNFSShutdownKnobBound(t *testing.T) {
	root := nfsRoot(t)
	k, err := OpenNFSShutdown(root, "0:53")
	if err != nil {
		t.Fatal(err)
	}
	attr := root.Sys("fs", "nfs", "0:53", "shutdown")
	if err := os.Rename(attr, attr+".old"); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, attr, "0\n", 0o644)
	if err := k.Shutdown(); err == nil {
		t.Error("Shutdown: no error, want the read back of the new attribute to say 0")
	}
	if b, _ := os.ReadFile(attr); string(b) != "0\n" {
		t.Errorf("the new attribute = %q, want 0", b)
	}
	if b, _ := os.ReadFile(attr + ".old"); string(b) != "1\n" {
		t.Errorf("the attribute opened = %q, want 1", b)
	}
}
