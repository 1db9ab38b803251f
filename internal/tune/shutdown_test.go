package tune

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// shutdownRoot is the fixture root on a 6.12 kernel, with the shutdown attribute of 0:53
// (nfs4, two mount points) and none for 0:54 (nfs, as a kernel whose NFS sysfs lacks it).
func shutdownRoot(t *testing.T) hostfs.Root {
	t.Helper()
	root := fixtureRoot(t)
	writeRootFile(t, root, "proc/version", "Linux version 6.12.107+deb13-amd64 (debian-kernel@lists.debian.org) #1 SMP\n")
	writeRootFile(t, root, "sys/fs/nfs/0:53/shutdown", "0\n")
	return root
}

func writeRootFile(t *testing.T, root hostfs.Root, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(root.Path(p)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root.Path(p), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPlanShutdownRefuses(t *testing.T) {
	root := shutdownRoot(t)
	old := fixtureRoot(t)
	writeRootFile(t, old, "proc/version", "Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org) #1 SMP\n")
	for _, tt := range []struct {
		name, target string
		root         hostfs.Root
		is           error
		contains     []string
		plan         bool
	}{
		{name: "relative path", target: "mnt/data", root: root, contains: []string{"want a device major:minor or the absolute path"}},
		{name: "nothing mounted", target: "/mnt/nothing", root: root, is: ErrNoMount},
		{name: "ext4", target: "/", root: root, is: inventory.ErrNotNFS},
		{name: "block device", target: "8:1", root: root, is: inventory.ErrNotNFS},
		{name: "unmounted device", target: "0:99", root: root, is: inventory.ErrNotNFS},
		{name: "kernel before 6.6", target: "/mnt/data", root: old, is: ErrNoShutdownKnob,
			contains: []string{"needs Linux 6.6 or later, and this kernel is 6.1.0-28-amd64", "umount -f /mnt/data", "umount -l /mnt/data"}},
		{name: "no attribute on 6.12", target: "/mnt/tools", root: root, is: ErrNoShutdownKnob,
			contains: []string{"kernel 6.12.107+deb13-amd64 should have it"}},
		{name: "not stalled", target: "/mnt/data", root: root, is: ErrNotStalled, plan: true,
			contains: []string{"--force"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlanShutdown(context.Background(), tt.root, tt.target, ShutdownOptions{StallWindow: time.Millisecond})
			if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("err = %v, want one matching %v", err, tt.is)
			}
			for _, s := range tt.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("err = %v, want it to say %q", err, s)
				}
			}
			if (p != nil) != tt.plan {
				t.Errorf("plan = %+v, want one: %v", p, tt.plan)
			}
		})
	}
	if b, _ := os.ReadFile(root.Sys("fs", "nfs", "0:53", "shutdown")); string(b) != "0\n" {
		t.Errorf("a refused shutdown wrote the attribute: %q", b)
	}
	if _, err := os.Stat(root.Path(JournalPath)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused shutdown wrote a journal: %v", err)
	}
}

// TestShutdownJournalRevert: a forced shutdown of a mount point names both mount points of
// the superblock and the other superblock of its client, writes 1, and journals the record
// first; revert shows it as not reversible, writes nothing and removes the journal.
func TestShutdownJournalRevert(t *testing.T) {
	root := shutdownRoot(t)
	p, err := PlanShutdown(context.Background(), root, "/srv/data copy", ShutdownOptions{Force: true, StallWindow: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want := []Holder{{Kind: HolderMount, Name: "/mnt/data"}, {Kind: HolderMount, Name: "/srv/data copy"}}
	if p.Device != "0:53" || !p.Forced || !slices.Equal(p.Affected, want) || p.KernelRelease != "6.12.107+deb13-amd64" {
		t.Fatalf("plan = %+v; want 0:53, forced, affecting %v", p, want)
	}
	now := time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)
	res, err := Shutdown(root, p, now)
	if err != nil || res.ReadBack != "1" {
		t.Fatalf("Shutdown = %+v, %v", res, err)
	}
	if got := readFixture(t, root, "/sys/fs/nfs/0:53/shutdown"); got != "1\n" {
		t.Errorf("attribute = %q, want 1", got)
	}
	j, err := loadJournal(root)
	if err != nil || j == nil || len(j.Entries) != 1 {
		t.Fatalf("journal = %+v, %v", j, err)
	}
	e := j.Entries[0]
	if e.Kind != KindShutdown || e.Path != "/sys/fs/nfs/0:53/shutdown" || !e.Done || e.Shutdown == nil ||
		!e.Shutdown.Forced || !e.Shutdown.Time.Equal(now) || e.Shutdown.Source != "192.168.122.71:/export/data" {
		t.Errorf("journal entry = %+v (%+v)", e, e.Shutdown)
	}

	rres, err := Revert(root)
	if err != nil || len(rres.Items) != 1 || rres.Failed() != 0 {
		t.Fatalf("Revert = %+v, %v", rres, err)
	}
	it := rres.Items[0]
	if it.Status != StatusIrreversible || !strings.Contains(it.Action.Reason, "cannot undo") || !strings.Contains(it.Action.Reason, "with --force") {
		t.Errorf("revert item = %+v; want not reversible, forced, and why", it)
	}
	if got := readFixture(t, root, "/sys/fs/nfs/0:53/shutdown"); got != "1\n" {
		t.Errorf("revert wrote the attribute: %q", got)
	}
	if ok, err := Pending(root); ok || err != nil {
		t.Errorf("journal still pending after revert: %v, %v", ok, err)
	}
}

// TestShutdownRefusesReusedDevice: between the plan and the write, the device came to show
// another export; nothing is written or journaled.
func TestShutdownRefusesReusedDevice(t *testing.T) {
	root := shutdownRoot(t)
	p, err := PlanShutdown(context.Background(), root, "0:53", ShutdownOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	p.Source = "192.168.122.99:/other"
	if _, err := Shutdown(root, p, time.Now()); err == nil {
		t.Fatal("Shutdown of a device that changed: no error")
	}
	if got := readFixture(t, root, "/sys/fs/nfs/0:53/shutdown"); got != "0\n" {
		t.Errorf("attribute = %q, want 0", got)
	}
	if ok, _ := Pending(root); ok {
		t.Error("a refused shutdown wrote a journal")
	}
}

// TestPlanShutdownStalled runs on a tree recorded from the 6.12 lab with the server gone:
// the transports to 127.0.0.1 hold requests and, the tree being still, make no progress
// over the window, so the server counts as stalled without --force.
func TestPlanShutdownStalled(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../inventory/testdata/lab-6.12.107+deb13-amd64-server-gone")); err != nil {
		t.Fatal(err)
	}
	root := hostfs.Root(dir)
	writeRootFile(t, root, "sys/fs/nfs/0:65/shutdown", "0\n")
	p, err := PlanShutdown(context.Background(), root, "/mnt/lab/v3", ShutdownOptions{StallWindow: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if p.Device != "0:65" || p.Stalled == nil || p.Stalled.Addr != "127.0.0.1" || p.Forced {
		t.Errorf("plan = %+v (stalled %+v); want 0:65 with 127.0.0.1 stalled", p, p.Stalled)
	}
	if !slices.ContainsFunc(p.SharedClient, func(s string) bool { return strings.HasPrefix(s, "0:66 /mnt/lab/rsize-1m") }) {
		t.Errorf("shared client = %q; want the other NFSv3 superblock of 127.0.0.1, 0:66", p.SharedClient)
	}
}

// TestPlanShutdownStalledOtherPort: the transports to 127.0.0.1:2049 are stuck, but the
// mount goes to 127.0.0.1 on another port (as through a local proxy), so its server is not
// seen stalled (inventory.StalledServer.Reaches).
func TestPlanShutdownStalledOtherPort(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../inventory/testdata/lab-6.12.107+deb13-amd64-server-gone")); err != nil {
		t.Fatal(err)
	}
	root := hostfs.Root(dir)
	writeRootFile(t, root, "sys/fs/nfs/0:65/shutdown", "0\n")
	b, err := os.ReadFile(root.Proc("self", "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	line := "/mnt/lab/v3 rw,relatime - nfs 127.0.0.1:/srv/tmp rw,vers=3,"
	if !strings.Contains(string(b), line) {
		t.Fatalf("fixture mountinfo has no %q", line)
	}
	writeRootFile(t, root, "proc/self/mountinfo", strings.Replace(string(b), line, line+"port=20049,", 1))
	p, err := PlanShutdown(context.Background(), root, "/mnt/lab/v3", ShutdownOptions{StallWindow: time.Millisecond})
	if !errors.Is(err, ErrNotStalled) || p == nil || p.Stalled != nil {
		t.Errorf("plan = %+v, err = %v; want ErrNotStalled and no stalled server", p, err)
	}
}

func TestDeviceAtStacked(t *testing.T) {
	b, err := os.ReadFile("../inventory/testdata/lab-6.1.0-50-amd64-stacked/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.Contains(l, " nfs") {
			last = f[4] + " " + f[2]
		}
	}
	mp, dev, _ := strings.Cut(last, " ")
	got, ok := inventory.DeviceAt(b, mp+"/")
	if !ok || got != dev {
		t.Errorf("DeviceAt(%s) = %q, %v; want the top mount %s", mp, got, ok, dev)
	}
}

// TestAffected: who gets errors lists every mount point, the pod of a kubelet path, and
// the processes holding the superblock with their state, how they hold it, pod and
// container.
func TestAffected(t *testing.T) {
	m := inventory.Mount{Device: "0:72", MountPoints: []string{
		"/mnt/data",
		"/var/lib/kubelet/pods/5f0c7a52-3d1e-4b8a-9c6d-7e8f90a1b2c3/volumes/kubernetes.io~nfs/data",
	}}
	procs := []inventory.Holder{
		{PID: 499, Comm: "cat", State: "D", Via: []string{inventory.ViaFD}, PodUID: "5f0c7a52-3d1e-4b8a-9c6d-7e8f90a1b2c3",
			ContainerID: "a3f1c2d4e5b60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"},
		{PID: 12, Comm: "sh", State: "S", Via: []string{inventory.ViaCwd, inventory.ViaRoot}},
	}
	got := Affected(m, procs)
	want := []Holder{
		{Kind: HolderMount, Name: "/mnt/data"},
		{Kind: HolderMount, Name: m.MountPoints[1]},
		{Kind: HolderPod, Name: "5f0c7a52-3d1e-4b8a-9c6d-7e8f90a1b2c3", Detail: "volume data"},
		{Kind: HolderProcess, Name: "499 cat", Detail: "state D, via fd, pod 5f0c7a52-3d1e-4b8a-9c6d-7e8f90a1b2c3, container a3f1c2d4e5b6"},
		{Kind: HolderProcess, Name: "12 sh", Detail: "state S, via cwd+root"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Affected =\n%+v\nwant\n%+v", got, want)
	}
}

// Every host string of the plan and the result (source, mount points, a process's command,
// warnings) is printed escaped: the plan is what the user confirms, and an export with
// terminal escapes must not wipe it off the screen.
func TestWriteShutdownPlanEscapes(t *testing.T) {
	t.Parallel()
	const evil = "\x1b[2J\x1b[H\r\n"
	p := &ShutdownPlan{
		Device: "0:53", Attribute: "/sys/fs/nfs/0:53/shutdown", Source: "srv:/export" + evil, FSType: "nfs4", Version: "4.2",
		Mounts: []string{"/mnt/a" + evil}, KernelRelease: "6.12" + evil,
		Stalled:      &inventory.StalledServer{Addr: "10.0.0.7" + evil, Transports: []string{"xprt" + evil}, Waiting: 1, Window: time.Second},
		Affected:     []Holder{{Kind: HolderProcess, Name: "42 cat" + evil, Detail: "via fd" + evil}},
		Warnings:     []string{"w" + evil},
		SharedClient: []string{"0:54 srv:/other" + evil},
	}
	var b strings.Builder
	if err := WriteShutdownPlan(&b, p); err != nil {
		t.Fatal(err)
	}
	rep := &ShutdownReport{Plan: p, Result: &ShutdownResult{ReadBack: "1" + evil, Journal: "/var/lib/nfstune/journal.json"}}
	if err := WriteShutdownResult(&b, rep); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.ContainsAny(out, "\x1b\r") || strings.Contains(out, "\n\n") {
		t.Errorf("host text printed raw:\n%q", out)
	}
}
