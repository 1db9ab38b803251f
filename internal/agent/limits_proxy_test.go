package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// TestServiceLimitsProxied: two EFS file systems behind efs-proxy both show 127.0.0.1:/;
// their limits are labelled with their file systems, as their mount series are, so the
// headroom rule (sum by server, export) compares each with its own limit.
func TestServiceLimitsProxied(t *testing.T) {
	t.Parallel()
	inv, err := inventory.Read(hostfs.Root("../inventory/testdata/synthetic-efs-proxy"), inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Parse("c.yaml", []byte(`apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {server: "*fs-0123456789abcdef0*"}
    service: {name: efs, tier: elastic, capacity: 1000GiB}
  - match: {server: "*fs-0fedcba987654321f*"}
    service: {name: efs, tier: provisioned, capacity: 1000GiB}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := ServiceLimits(inv, pol.Resolve)
	servers := map[string]string{}
	for _, l := range got {
		servers[l.Server+":"+l.Export] = l.Tier
	}
	want := map[string]string{"fs-0123456789abcdef0:/": "elastic", "fs-0fedcba987654321f:/": "provisioned"}
	if diff := cmp.Diff(want, servers); diff != "" {
		t.Errorf("limits by server:export (-want +got):\n%s\n%+v", diff, got)
	}
}
