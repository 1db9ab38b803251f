package metrics

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// TestCollectorProxied reads the EFS tree (efs-proxy, efs-utils' stunnel, an unknown
// loopback forwarder): nfstune_mount_info names the helper and the server behind it, the
// server label of an EFS mount is its file system (the same on every node, so sums by
// server and export never add up two file systems behind 127.0.0.1), the backend label is
// the service, and each proxied file system is its own client group.
func TestCollectorProxied(t *testing.T) {
	t.Parallel()
	inv, err := inventory.Read(hostfs.Root("../inventory/testdata/synthetic-efs-proxy"), inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCollector(Snapshot{Inventory: inv}, nil, Options{})
	out, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, "nfstune_mount_info", "nfstune_client_group_connections")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`nfstune_mount_info{backend="aws-efs",client_group="tcp://127.0.0.1:20049/v4.1",device="0:60",export="/",fstype="nfs4",mountpoint="/mnt/efs",mountpoints="1",proxy="efs-proxy",server="fs-0123456789abcdef0",upstream="us-east-1a.fs-0123456789abcdef0.efs.us-east-1.amazonaws.com",version="4.1",xprtsec="none"} 1`,
		`nfstune_mount_info{backend="aws-efs",client_group="tcp://127.0.0.1:20050/v4.1",device="0:61",export="/",fstype="nfs4",mountpoint="/mnt/efs-legacy",mountpoints="1",proxy="efs-stunnel",server="fs-0fedcba987654321f",upstream="fs-0fedcba987654321f.efs.eu-west-1.amazonaws.com",version="4.1",xprtsec="none"} 1`,
		`nfstune_mount_info{backend="generic",client_group="tcp://127.0.0.1:30049/v4.1",device="0:62",export="/data",fstype="nfs4",mountpoint="/mnt/forwarded",mountpoints="1",proxy="loopback",server="127.0.0.1",upstream="",version="4.1",xprtsec="none"} 1`,
		`nfstune_client_group_connections{client_group="tcp://127.0.0.1:20049/v4.1",proto="tcp",server_addr="127.0.0.1",version="4.1"} 1`,
		`nfstune_client_group_connections{client_group="tcp://127.0.0.1:20050/v4.1",proto="tcp",server_addr="127.0.0.1",version="4.1"} 1`,
	} {
		if !bytes.Contains(out, []byte(line)) {
			t.Errorf("missing %q in\n%s", line, out)
		}
	}
	// The proxy label takes only the fixed kinds.
	for _, line := range strings.Split(string(out), "\n") {
		_, rest, ok := strings.Cut(line, `proxy="`)
		if !ok {
			continue
		}
		kind, _, _ := strings.Cut(rest, `"`)
		if kind != "" && !slices.Contains(inventory.ProxyKinds, kind) {
			t.Errorf("proxy label %q is not one of %v", kind, inventory.ProxyKinds)
		}
	}
}

// TestRatesProxiedServer: nfstune stats names the file system behind efs-proxy, not
// 127.0.0.1, as the metrics do.
func TestRatesProxiedServer(t *testing.T) {
	t.Parallel()
	inv, err := inventory.Read(hostfs.Root("../inventory/testdata/synthetic-efs-proxy"), inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]string{}
	for _, r := range Rates(inv, inv, time.Second) {
		servers[r.Device] = r.Server
	}
	want := map[string]string{"0:60": "fs-0123456789abcdef0", "0:61": "fs-0fedcba987654321f", "0:62": "127.0.0.1"}
	for dev, w := range want {
		if servers[dev] != w {
			t.Errorf("%s: server %q, want %q", dev, servers[dev], w)
		}
	}
}
