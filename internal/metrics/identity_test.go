package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nfstune/nfstune/internal/inventory"
)

// TestCollectorClientIdentity: one info series for the node's NFSv4 client identity, with
// its source and fingerprint and nothing that discloses the identity itself.
func TestCollectorClientIdentity(t *testing.T) {
	t.Parallel()
	empty := ""
	inv := &inventory.Inventory{ClientIdentity: &inventory.ClientIdentity{Source: inventory.IdentityHostname, Identifier: &empty, Hostname: "node-07", Fingerprint: "9f86d081"}}
	c := newTestCollector(Snapshot{Inventory: inv}, nil, Options{})
	want := `
# HELP nfstune_node_nfs_client_identity_info Where the node's NFSv4 client identity comes from (source: identifier, nfs4_unique_id or hostname) and its fingerprint, the first 8 hex digits of the SHA-256 of the uniquifier and host name (value 1). Nodes with the same fingerprint are one client to the server: count by (fingerprint) (nfstune_node_nfs_client_identity_info) > 1.
# TYPE nfstune_node_nfs_client_identity_info gauge
nfstune_node_nfs_client_identity_info{fingerprint="9f86d081",source="hostname"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "nfstune_node_nfs_client_identity_info"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(newTestCollector(Snapshot{Inventory: &inventory.Inventory{}}, nil, Options{}), "nfstune_node_nfs_client_identity_info"); n != 0 {
		t.Errorf("%d identity series without an identity", n)
	}
}
