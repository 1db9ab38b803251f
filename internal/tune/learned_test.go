package tune

import (
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// TestLearnedVolumes: a volume is its server and export, or through a local proxy the file
// system or server the proxy forwards to; a loopback mount on a proxy's port that the
// attribution does not name learns nothing (its 127.0.0.1:/ could be any volume), while one
// on NFS's port is a local server's volume. The store keeps what it was given,
// across a save and a load.
func TestLearnedVolumes(t *testing.T) {
	t.Parallel()
	root := hostfs.Root(t.TempDir())
	l, err := LoadLearned(root)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	nfs := &inventory.Mount{Server: "filer.example.com", ServerAddr: "10.0.0.5", Export: "/data"}
	efsA := &inventory.Mount{Server: "127.0.0.1", ServerAddr: "127.0.0.1", Export: "/", Proxy: &inventory.Proxy{Kind: inventory.ProxyEFS, FileSystemID: "fs-0a"}}
	efsB := &inventory.Mount{Server: "127.0.0.1", ServerAddr: "127.0.0.1", Export: "/", Proxy: &inventory.Proxy{Kind: inventory.ProxyEFS, FileSystemID: "fs-0b"}}
	loopback := &inventory.Mount{Server: "127.0.0.1", ServerAddr: "127.0.0.1", Export: "/", Options: map[string]string{"port": "20049"}}
	local := &inventory.Mount{Server: "127.0.0.1", ServerAddr: "127.0.0.1", Export: "/srv/tmp", Options: map[string]string{}}
	for m, kb := range map[*inventory.Mount]int{nfs: 4096, efsA: 2048, efsB: 8192, local: 1024} {
		if _, changed := l.Set(m, kb, now); !changed {
			t.Errorf("%+v: not learned", m)
		}
	}
	if _, changed := l.Set(loopback, 1024, now); changed {
		t.Error("an unattributed loopback mount was learned")
	}
	if _, changed := l.Set(nfs, 4096, now); changed {
		t.Error("the same value again counts as a change")
	}
	if err := l.Save(); err != nil {
		t.Fatal(err)
	}
	again, err := LoadLearned(root)
	if err != nil {
		t.Fatal(err)
	}
	for m, want := range map[*inventory.Mount]int{nfs: 4096, efsA: 2048, efsB: 8192, local: 1024} {
		if kb, ok := again.Get(m); !ok || kb != want {
			t.Errorf("%+v after a reload: %d, %v; want %d", m, kb, ok, want)
		}
	}
	if _, ok := again.Get(loopback); ok {
		t.Error("a loopback mount found a value")
	}
}
