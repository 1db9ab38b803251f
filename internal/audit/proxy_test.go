package audit

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// readTree reads an inventory fixture tree of package inventory.
func readTree(t *testing.T, tree string) *inventory.Inventory {
	t.Helper()
	inv, err := inventory.Read(hostfs.Root(filepath.Join("..", "inventory", "testdata", tree)), inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// findingIDs returns the finding IDs per device.
func findingIDs(rep Report) map[string][]string {
	out := map[string][]string{}
	for _, f := range rep.Findings {
		out[f.Device] = append(out[f.Device], f.ID)
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

func findingOf(rep Report, dev, id string) *Finding {
	for i, f := range rep.Findings {
		if f.Device == dev && f.ID == id {
			return &rep.Findings[i]
		}
	}
	return nil
}

// TestProxiedEFS audits the EFS mounts efs-utils made through 127.0.0.1: no bare-IP guess,
// no read-ahead finding for the value efs-utils set (3840 KiB at rsize 256 KiB too), no
// udev finding (efs-utils writes after udev), and fixes written for mount.efs.
func TestProxiedEFS(t *testing.T) {
	t.Parallel()
	rep := Run(readTree(t, "synthetic-efs-proxy"), policy.Default())
	want := map[string][]string{
		"0:61": {"NFS022"},           // rsize 256 KiB asked in fstab: a real finding
		"0:62": {"NFS001", "NFS081"}, // NFS002 and NFS050 folded into NFS001 (foldCauses)
	}
	got := findingIDs(rep)
	for _, dev := range []string{"0:60", "0:61", "0:62"} {
		if !slices.Equal(got[dev], want[dev]) {
			t.Errorf("%s: findings %v, want %v", dev, got[dev], want[dev])
		}
	}
	if f := findingOf(rep, "0:61", "NFS022"); f != nil && !strings.HasPrefix(f.Fix, "set in /etc/fstab: fs-0fedcba987654321f:/ /mnt/efs-legacy efs ") ||
		f != nil && (strings.Contains(f.Fix, "port=") || !strings.Contains(f.Fix, "stunnel") || !strings.Contains(f.Fix, "_netdev")) {
		t.Errorf("NFS022 fix is not a mount.efs line keeping the fstab options: %s", f.Fix)
	}
	if f := findingOf(rep, "0:62", "NFS081"); f != nil {
		// The fix's rule, with a service filled in, must parse and select the mount.
		_, rule, _ := strings.Cut(f.Fix, ": - ")
		cfg := "apiVersion: nfstune.io/v1alpha1\nkind: Policy\nrules:\n  - " + strings.ReplaceAll(rule, "<service>", "aws-efs") + "\n"
		pol, err := policy.Parse("fix.yaml", []byte(cfg))
		if err != nil {
			t.Fatalf("NFS081 fix %q: %v", f.Fix, err)
		}
		m := rep.Mounts[slices.IndexFunc(rep.Mounts, func(m inventory.Mount) bool { return m.Device == "0:62" })]
		if res := pol.Resolve(&m); res.Backend != policy.BackendAWSEFS || !strings.Contains(rule, `"/mnt/forwarded"`) {
			t.Errorf("NFS081 fix %q resolves the mount to %s", f.Fix, res.Backend)
		}
	}
	for _, dev := range []string{"0:60", "0:61"} {
		if res := rep.Desired[dev]; res.ReadAheadBy != "efs-utils" || res.Backend != policy.BackendAWSEFS {
			t.Errorf("%s: desired %s, read-ahead by %q; want aws-efs by efs-utils", dev, res.Backend, res.ReadAheadBy)
		}
	}

	var table bytes.Buffer
	if err := WriteTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"proxy       efs-proxy :20049 TLS  server       us-east-1a.fs-0123456789abcdef0.efs.us-east-1.amazonaws.com",
		"proxy       efs-stunnel :20050 TLS  server       fs-0fedcba987654321f.efs.eu-west-1.amazonaws.com",
		"proxy       loopback :30049  server       -",
	} {
		if !strings.Contains(table.String(), line) {
			t.Errorf("table lacks %q:\n%s", line, table.String())
		}
	}
}

// TestProxiedEFSUdevResetIsRepaired: when a udev rule put the kernel default back after
// efs-utils (the Ubuntu 24 race efs-utils works around), nfstune asks for efs-utils' own
// value, not the workload's.
func TestProxiedEFSUdevResetIsRepaired(t *testing.T) {
	t.Parallel()
	inv := readTree(t, "synthetic-efs-proxy")
	inv.Mounts[1].ReadAheadKB = intp(128)
	pol, err := policy.Parse("seq.yaml", []byte("apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults: {workload: sequential-read}\n"))
	if err != nil {
		t.Fatal(err)
	}
	rep := Run(inv, pol)
	f := findingOf(rep, "0:61", "NFS001")
	if f == nil {
		t.Fatalf("no NFS001 for 128 KiB; findings %v", findingIDs(rep)["0:61"])
	}
	if f.Expected != "read_ahead_kb >= 3840" || !strings.Contains(f.Message, "efs-utils itself writes") {
		t.Errorf("NFS001 wants %q (%s), want efs-utils' 3840", f.Expected, f.Message)
	}
}

// TestProxiedStallByPort: a stalled transport to 127.0.0.1:20049 is one EFS file system;
// the other proxied mounts on 127.0.0.1 are not reported as waiting on it.
func TestProxiedStallByPort(t *testing.T) {
	t.Parallel()
	inv := readTree(t, "synthetic-efs-proxy")
	inv.Stalled = []inventory.StalledServer{{Addr: "127.0.0.1", Port: 20049, Transports: []string{"switch-1/xprt-2-tcp"}, Waiting: 3}}
	rep := Run(inv, policy.Default())
	var stalled []string
	for _, f := range rep.Findings {
		if f.ID == "NFS093" {
			stalled = append(stalled, f.Device)
			if !strings.Contains(f.Message, "127.0.0.1:20049 (efs-proxy to us-east-1a.fs-0123456789abcdef0") {
				t.Errorf("NFS093 does not name the proxy and the file system: %s", f.Message)
			}
		}
	}
	if !slices.Equal(stalled, []string{"0:60"}) {
		t.Errorf("NFS093 on %v, want only 0:60", stalled)
	}
}

// TestProxiedNConnectGroups: nconnect is fixed per kernel NFS client. Two EFS file systems
// behind different proxy ports are different clients, so a request on one never blames
// the other; two Azure Files shares of one account share AZNFS' stunnel port, hence one
// client, and the finding names the group.
func TestProxiedNConnectGroups(t *testing.T) {
	t.Parallel()
	efs := readTree(t, "synthetic-efs-proxy")
	efs.Mounts[0].NConnect, efs.Mounts[0].Connections = 2, 2
	requested(&efs.Mounts[1], "nconnect", "4")
	rep := Run(efs, policy.Default())
	f := findingOf(rep, "0:61", "NFS012")
	if f == nil {
		t.Fatalf("no NFS012 for an nconnect asked and not in effect; findings %v", findingIDs(rep))
	}
	if strings.Contains(f.Message, "0:60") || strings.Contains(f.Fix, "/mnt/efs,") || strings.Contains(f.Fix, "/mnt/efs ") {
		t.Errorf("NFS012 on 0:61 blames the other file system behind 127.0.0.1:\n%s\n%s", f.Message, f.Fix)
	}

	az := readTree(t, "synthetic-aznfs-stunnel")
	// The profile's actimeo=30, which apply plans for the next mount, is NFS033.
	if ids := findingIDs(Run(az, policy.Default())); !slices.Equal(ids["0:70"], []string{"NFS033", "NFS050"}) ||
		!slices.Equal(ids["0:71"], ids["0:70"]) || !slices.Equal(ids["0:72"], ids["0:70"]) {
		t.Errorf("Azure Files through AZNFS: findings %v, want only NFS033 and NFS050 on each", ids)
	}
	requested(&az.Mounts[1], "nconnect", "8")
	rep = Run(az, policy.Default())
	f = findingOf(rep, "0:71", "NFS012")
	if f == nil || !strings.Contains(f.Fix, "/mnt/share1") || strings.Contains(f.Fix, "/mnt/logs") {
		t.Errorf("NFS012 on share2 must name share1 (same stunnel, same client) and not logs: %+v", f)
	}
}

// TestProxiedBypassed: an EFS mount trunked onto another client of its server (nfsfs shows
// port 2049, not efs-proxy's 20049) gets NFS082; the others do not.
func TestProxiedBypassed(t *testing.T) {
	t.Parallel()
	inv := readTree(t, "synthetic-efs-proxy")
	if ids := findingIDs(Run(inv, policy.Default())); slices.Contains(ids["0:60"], "NFS082") || slices.Contains(ids["0:61"], "NFS082") {
		t.Fatalf("NFS082 without a bypass: %v", ids)
	}
	inv.Mounts[0].Proxy.BypassPort = 2049
	rep := Run(inv, policy.Default())
	f := findingOf(rep, "0:60", "NFS082")
	if f == nil {
		t.Fatalf("no NFS082 for a bypassed proxy; findings %v", findingIDs(rep))
	}
	if f.Severity != SeverityWarning || !strings.Contains(f.Message, "efs-proxy on port 20049") || !strings.Contains(f.Message, "port 2049") {
		t.Errorf("NFS082: %s %s", f.Severity, f.Message)
	}
	if slices.Contains(findingIDs(rep)["0:61"], "NFS082") {
		t.Error("NFS082 on a mount that uses its proxy")
	}
	// Trunked onto the client of another proxied mount (the same file system mounted twice
	// through efs-utils): its requests still go through a proxy.
	inv.Mounts[0].Proxy.BypassPort = inv.Mounts[1].Proxy.Port
	if ids := findingIDs(Run(inv, policy.Default())); slices.Contains(ids["0:60"], "NFS082") {
		t.Errorf("NFS082 for a mount whose client is another proxy's: %v", ids["0:60"])
	}
}
