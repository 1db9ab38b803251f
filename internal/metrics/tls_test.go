package metrics

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// TestCollectorTLS reads the TLS tree: nfstune_mount_info carries each mount's xprtsec,
// and nfstune_node_tlshd_running is 1 with tlshd, 0 without, and absent on a host without
// a TLS mount.
func TestCollectorTLS(t *testing.T) {
	t.Parallel()
	src := "../inventory/testdata/synthetic-tls"
	noTLSHD := t.TempDir()
	if err := os.CopyFS(noTLSHD, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(noTLSHD, "proc", "612")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		root  string
		lines []string
		none  string
	}{
		{src, []string{
			`client_group="tcp://10.20.0.10/v4.2/xprtsec=tls",device="0:70",`,
			`device="0:70",export="/projects",fstype="nfs4",mountpoint="/mnt/projects",mountpoints="1",proxy="",server="nfs.example.com",upstream="",version="4.2",xprtsec="tls"} 1`,
			`device="0:71",export="/home",fstype="nfs4",mountpoint="/mnt/home",mountpoints="1",proxy="",server="nfs.example.com",upstream="",version="4.2",xprtsec="mtls"} 1`,
			`device="0:72",export="/scratch",fstype="nfs4",mountpoint="/mnt/scratch",mountpoints="1",proxy="",server="nfs.example.com",upstream="",version="4.2",xprtsec="none"} 1`,
			"nfstune_node_tlshd_running 1",
		}, ""},
		{noTLSHD, []string{"nfstune_node_tlshd_running 0"}, ""},
		{"../inventory/testdata/mixed", nil, "nfstune_node_tlshd_running"},
	} {
		inv, err := inventory.Read(hostfs.Root(tt.root), inventory.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := newTestCollector(Snapshot{Inventory: inv}, nil, Options{})
		out, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, "nfstune_mount_info", "nfstune_node_tlshd_running")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range tt.lines {
			if !bytes.Contains(out, []byte(line)) {
				t.Errorf("%s: missing %q in\n%s", tt.root, line, out)
			}
		}
		if tt.none != "" && bytes.Contains(out, []byte(tt.none)) {
			t.Errorf("%s: %s exported without a TLS mount:\n%s", tt.root, tt.none, out)
		}
	}
}
