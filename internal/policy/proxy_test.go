package policy

import (
	"testing"

	"github.com/nfstune/nfstune/internal/inventory"
)

// efsMount is an EFS file system mounted by efs-utils through efs-proxy, with the
// read-ahead efs-utils writes after the mount (15 x rsize).
func efsMount(rsize int) *inventory.Mount {
	return &inventory.Mount{
		Device: "0:60", MountPoints: []string{"/mnt/efs"}, Server: "127.0.0.1", ServerAddr: "127.0.0.1",
		Export: "/", FSType: "nfs4", Version: "4.1", RSize: rsize, WSize: rsize, Backend: BackendAWSEFS,
		Options: map[string]string{"port": "20049"},
		Proxy: &inventory.Proxy{Kind: inventory.ProxyEFS, Port: 20049, FileSystemID: "fs-0123456789abcdef0",
			Upstream: "us-east-1a.fs-0123456789abcdef0.efs.us-east-1.amazonaws.com", ReadAheadKB: 15 * rsize / 1024},
	}
}

// TestResolveNoFightWithEFSUtils: the read-ahead efs-utils sets is the target, whatever the
// workload asks, so neither nfstune (audit, apply, agent, udev helper: all decide with
// ReadAheadChange) nor efs-utils ever rewrites the other's value.
func TestResolveNoFightWithEFSUtils(t *testing.T) {
	t.Parallel()
	seq, err := Parse("seq.yaml", []byte("apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults: {workload: sequential-read}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		pol   *Policy
		rsize int
	}{
		{"general 1 MiB", Default(), 1 << 20},
		{"general 256 KiB", Default(), 256 << 10},
		{"sequential-read 256 KiB", seq, 256 << 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := efsMount(tt.rsize)
			set := m.Proxy.ReadAheadKB
			res := tt.pol.Resolve(m)
			if res.ReadAheadKB != set || res.ReadAheadBy != "efs-utils" {
				t.Fatalf("target %d KiB by %q, want efs-utils' %d", res.ReadAheadKB, res.ReadAheadBy, set)
			}
			for _, exact := range []bool{false, true} {
				if res.ReadAheadChange(set, m.RSize, exact) {
					t.Errorf("exact=%v: nfstune would rewrite efs-utils' %d KiB", exact, set)
				}
			}
			if !res.ReadAheadChange(KernelReadAheadKB, m.RSize, false) {
				t.Errorf("a udev rule's 128 KiB must be raised back to efs-utils' %d", set)
			}
			for _, exact := range []bool{false, true} {
				// efs-utils computes from the rsize option (default 1 MiB), nfstune from the
				// effective rsize: a larger value is efs-utils' and stays, even with --exact.
				if res.ReadAheadChange(set*2, m.RSize, exact) {
					t.Errorf("exact=%v: a larger value must stay (the helper's target is a minimum)", exact)
				}
			}
		})
	}
}

// TestResolveEFSProfileAgreesWithEFSUtils: without the helper's state (a DNS mount, or
// state not visible), the EFS profile asks what efs-utils writes: 15 x rsize.
func TestResolveEFSProfileAgreesWithEFSUtils(t *testing.T) {
	t.Parallel()
	for _, rsize := range []int{1 << 20, 256 << 10} {
		m := efsMount(rsize)
		m.Proxy = nil
		res := Default().Resolve(m)
		if want := 15 * rsize / 1024; res.ReadAheadKB != want || res.ReadAheadBy != "" {
			t.Errorf("rsize %d: target %d by %q, want %d from the profile", rsize, res.ReadAheadKB, res.ReadAheadBy, want)
		}
		if res.ReadAheadChange(15*rsize/1024, rsize, false) {
			t.Errorf("rsize %d: efs-utils' value would be rewritten", rsize)
		}
	}
}

// TestResolveProxiedRules: a rule's server glob matches the server behind the proxy, and a
// rule that sets read-ahead wins over the helper's value.
func TestResolveProxiedRules(t *testing.T) {
	t.Parallel()
	pol, err := Parse("c.yaml", []byte(ruleConfig(`match: {server: "*.fs-0123456789abcdef0.efs.*"}
readAheadKB: 8192
workload: static-tools`)))
	if err != nil {
		t.Fatal(err)
	}
	res := pol.Resolve(efsMount(1 << 20))
	if res.Rule == RuleBuiltIn || res.Workload != WorkloadStaticTools {
		t.Fatalf("rule on the upstream name did not match: %s %s", res.Rule, res.Workload)
	}
	if res.ReadAheadKB != 8192 || res.ReadAheadBy != "" {
		t.Errorf("target %d by %q, want the rule's 8192", res.ReadAheadKB, res.ReadAheadBy)
	}
	other := efsMount(1 << 20)
	other.Proxy.Upstream = "fs-0fedcba987654321f.efs.eu-west-1.amazonaws.com"
	if res := pol.Resolve(other); res.Rule != RuleBuiltIn {
		t.Errorf("another file system behind 127.0.0.1 matched %s", res.Rule)
	}
}
