package tune

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
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
// first; revert shows it as not reversible, writes nothing and keeps the record.
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
	res, err := Shutdown(context.Background(), root, p, now)
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
	// The record outlives revert, and a second revert reports it again.
	j, err = loadJournal(root)
	if err != nil || j == nil || len(j.Entries) != 1 || j.Entries[0].Shutdown == nil || j.Entries[0].Shutdown.Device != "0:53" {
		t.Fatalf("journal after revert = %+v, %v; want the shutdown record kept", j, err)
	}
	rres, err = Revert(root)
	if err != nil || len(rres.Items) != 1 || rres.Items[0].Status != StatusIrreversible || rres.Journal != JournalPath {
		t.Errorf("second Revert = %+v, %v; want the record reported again", rres, err)
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
	rewriteRootFile(t, root, "proc/self/mountinfo", "192.168.122.71:/export/data", "192.168.122.99:/other")
	if _, err := Shutdown(context.Background(), root, p, time.Now()); !errors.Is(err, ErrSuperblockChanged) {
		t.Fatalf("Shutdown of a device that changed: err = %v, want ErrSuperblockChanged", err)
	}
	if got := readFixture(t, root, "/sys/fs/nfs/0:53/shutdown"); got != "0\n" {
		t.Errorf("attribute = %q, want 0", got)
	}
	if ok, _ := Pending(root); ok {
		t.Error("a refused shutdown wrote a journal")
	}
}

// rewriteRootFile replaces old, which must be there, with new in a file of the root.
func rewriteRootFile(t *testing.T, root hostfs.Root, p, old, new string) {
	t.Helper()
	b, err := os.ReadFile(root.Path(p))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", p, old)
	}
	writeRootFile(t, root, p, strings.Replace(string(b), old, new, 1))
}

// v3Line is the start of the mountinfo line of 0:65 in the 6.12 server-gone tree.
const v3Line = "80 79 0:65 / /mnt/lab/v3 rw,relatime - nfs 127.0.0.1:/srv/tmp rw,"

// TestShutdownSuperblockBinding: the stalled superblock 0:65 is planned; while the plan
// waits (a prompt), the device comes to show a new superblock of the same export. The write
// goes only to the superblock planned, and the journal records the mount points it has at
// the write.
func TestShutdownSuperblockBinding(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, root hostfs.Root)
		is     error
		mounts []string
	}{
		{name: "unchanged", mounts: []string{"/mnt/lab/v3"}},
		{name: "mounted again, another mount ID", is: ErrSuperblockChanged, change: func(t *testing.T, root hostfs.Root) {
			rewriteRootFile(t, root, "proc/self/mountinfo", v3Line, strings.Replace(v3Line, "80 79", "97 79", 1))
		}},
		{name: "mounted again on the freed mount ID, younger", is: ErrSuperblockChanged, change: func(t *testing.T, root hostfs.Root) {
			b, err := os.ReadFile(root.Proc("self", "mountstats"))
			if err != nil {
				t.Fatal(err)
			}
			s := string(b)
			i := strings.Index(s, "device 127.0.0.1:/srv/tmp mounted on /mnt/lab/v3 ")
			k := strings.Index(s[i:], "age:\t461")
			if i < 0 || k < 0 {
				t.Fatal("no age: 461 for /mnt/lab/v3 in the tree's mountstats")
			}
			writeRootFile(t, root, "proc/self/mountstats", s[:i+k]+"age:\t3"+s[i+k+len("age:\t461"):])
		}},
		{name: "bind-mounted meanwhile", mounts: []string{"/mnt/lab/v3", "/srv/v3"}, change: func(t *testing.T, root hostfs.Root) {
			bind := "98 79 0:65 / /srv/v3 rw,relatime - nfs 127.0.0.1:/srv/tmp rw,vers=3,addr=127.0.0.1\n"
			rewriteRootFile(t, root, "proc/self/mountinfo", v3Line, bind+v3Line)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := serverGoneRoot(t)
			p, err := PlanShutdown(context.Background(), root, "/mnt/lab/v3", ShutdownOptions{StallWindow: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if p.Identity.AgeSeconds == nil || *p.Identity.AgeSeconds != 461 || !slices.Equal(p.Identity.MountIDs, []int{80}) {
				t.Fatalf("identity = %+v, want mount ID 80 and age 461", p.Identity)
			}
			if tt.change != nil {
				tt.change(t, root)
			}
			res, err := Shutdown(context.Background(), root, p, time.Now())
			if tt.is != nil {
				if !errors.Is(err, tt.is) || res != nil {
					t.Errorf("Shutdown = %+v, %v; want %v", res, err, tt.is)
				}
				if got := readFixture(t, root, "/sys/fs/nfs/0:65/shutdown"); got != "0\n" {
					t.Errorf("attribute = %q, want 0", got)
				}
				if ok, _ := Pending(root); ok {
					t.Error("a refused shutdown wrote a journal")
				}
				return
			}
			if err != nil || !slices.Equal(res.MountPoints, tt.mounts) {
				t.Fatalf("Shutdown = %+v, %v; want mount points %v", res, err, tt.mounts)
			}
			j, err := loadJournal(root)
			if err != nil || j == nil || len(j.Entries) != 1 || !slices.Equal(j.Entries[0].Shutdown.MountPoints, tt.mounts) {
				t.Errorf("journal = %+v, %v; want the mount points %v", j, err, tt.mounts)
			}
		})
	}
}

// TestShutdownServerBack: the plan saw the server stalled; by the write its transports
// made progress, so Shutdown watches them again and refuses.
func TestShutdownServerBack(t *testing.T) {
	root := serverGoneRoot(t)
	p, err := PlanShutdown(context.Background(), root, "/mnt/lab/v3", ShutdownOptions{StallWindow: time.Millisecond})
	if err != nil || p.Stalled == nil {
		t.Fatalf("plan = %+v, %v; want the server stalled", p, err)
	}
	emptyQueues(t, root)
	if res, err := Shutdown(context.Background(), root, p, time.Now()); !errors.Is(err, ErrNotStalled) || res != nil {
		t.Errorf("Shutdown = %+v, %v; want ErrNotStalled", res, err)
	}
	if got := readFixture(t, root, "/sys/fs/nfs/0:65/shutdown"); got != "0\n" {
		t.Errorf("attribute = %q, want 0", got)
	}
}

// TestShutdownOldMajorTimeouts: the server of /mnt/lab/v3 left requests unanswered once
// (major timeouts in mountstats) and answers now (no request queued): the plan refuses it,
// since the count only grows and the server is back.
func TestShutdownOldMajorTimeouts(t *testing.T) {
	root := serverGoneRoot(t)
	addMajorTimeouts(t, root, "/mnt/lab/v3")
	emptyQueues(t, root)
	p, err := PlanShutdown(context.Background(), root, "/mnt/lab/v3", ShutdownOptions{StallWindow: time.Millisecond})
	if !errors.Is(err, ErrNotStalled) || p == nil || p.Stalled != nil || p.MajorTimeouts == 0 {
		t.Fatalf("plan = %+v, %v; want ErrNotStalled with the major timeouts counted and no stall", p, err)
	}
	if !strings.Contains(err.Error(), "history, not a stall") {
		t.Errorf("err = %v; want it to say the major timeouts are history", err)
	}
	if got := readFixture(t, root, "/sys/fs/nfs/0:65/shutdown"); got != "0\n" {
		t.Errorf("attribute = %q, want 0", got)
	}
}

// TestShutdownChecksStallWithoutSample: a plan that carries no stall sample, not forced
// (one resting on major timeouts, or built by a caller that did not sample), is still
// checked at the write: the server answers, so nothing is written or journaled.
func TestShutdownChecksStallWithoutSample(t *testing.T) {
	root := serverGoneRoot(t)
	addMajorTimeouts(t, root, "/mnt/lab/v3")
	p, err := PlanShutdown(context.Background(), root, "/mnt/lab/v3", ShutdownOptions{StallWindow: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p.Stalled = nil
	emptyQueues(t, root)
	if res, err := Shutdown(context.Background(), root, p, time.Now()); !errors.Is(err, ErrNotStalled) || res != nil {
		t.Errorf("Shutdown = %+v, %v; want ErrNotStalled", res, err)
	}
	if got := readFixture(t, root, "/sys/fs/nfs/0:65/shutdown"); got != "0\n" {
		t.Errorf("attribute = %q, want 0", got)
	}
	if ok, _ := Pending(root); ok {
		t.Error("a refused shutdown wrote a journal")
	}
}

// addMajorTimeouts gives the GETATTR row of the mount at mp in root's mountstats major
// timeouts (its third field, per-op statistics of mountstats).
func addMajorTimeouts(t *testing.T, root hostfs.Root, mp string) {
	t.Helper()
	b, err := os.ReadFile(root.Proc("self", "mountstats"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, " mounted on "+mp+" ")
	if i < 0 {
		t.Fatalf("no %s in mountstats", mp)
	}
	row := regexp.MustCompile(`GETATTR: ([0-9]+) ([0-9]+) 0 `)
	loc := row.FindStringIndex(s[i:])
	if loc == nil {
		t.Fatalf("no GETATTR row without major timeouts for %s", mp)
	}
	fixed := row.ReplaceAllString(s[i+loc[0]:i+loc[1]], "GETATTR: $1 ${2}0 3 ")
	writeRootFile(t, root, "proc/self/mountstats", s[:i+loc[0]]+fixed+s[i+loc[1]:])
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

// TestRevertKeepsShutdownAmongChanges: after an apply and a shutdown, revert puts apply's
// values back and keeps only the shutdown record.
func TestRevertKeepsShutdownAmongChanges(t *testing.T) {
	root := shutdownRoot(t)
	if _, err := Apply(context.Background(), root, plan(t, root), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := PlanShutdown(context.Background(), root, "0:53", ShutdownOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Shutdown(context.Background(), root, p, time.Now()); err != nil {
		t.Fatal(err)
	}
	res, err := Revert(root)
	if err != nil || res.Failed() != 0 {
		t.Fatalf("Revert = %+v, %v", res, err)
	}
	if got := readFixture(t, root, "sys/devices/virtual/bdi/0:54/read_ahead_kb"); got == "1024\n" {
		t.Errorf("read-ahead of 0:54 not reverted: %q", got)
	}
	j, err := loadJournal(root)
	if err != nil || j == nil || len(j.Entries) != 1 || j.Entries[0].Kind != KindShutdown {
		t.Errorf("journal after revert = %+v, %v; want the shutdown record alone", j, err)
	}
}

// serverGoneRoot is a copy of the tree recorded from the 6.12 lab with the server gone,
// with the shutdown attribute of 0:65 (/mnt/lab/v3, NFSv3 to 127.0.0.1).
func serverGoneRoot(t *testing.T) hostfs.Root {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../inventory/testdata/lab-6.12.107+deb13-amd64-server-gone")); err != nil {
		t.Fatal(err)
	}
	root := hostfs.Root(dir)
	writeRootFile(t, root, "sys/fs/nfs/0:65/shutdown", "0\n")
	return root
}

// TestShutdownInterrupted: a context cancelled during the stall window ends PlanShutdown
// with the context's error and no plan, even with Force; a cancelled context stops
// Shutdown of a plan made earlier. Nothing is written or journaled.
func TestShutdownInterrupted(t *testing.T) {
	root := serverGoneRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	p, err := PlanShutdown(ctx, root, "/mnt/lab/v3", ShutdownOptions{Force: true, StallWindow: time.Minute})
	if !errors.Is(err, context.Canceled) || p != nil {
		t.Errorf("PlanShutdown = %+v, %v; want no plan and context.Canceled", p, err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("PlanShutdown took %s after the cancel", took)
	}

	p, err = PlanShutdown(context.Background(), root, "/mnt/lab/v3", ShutdownOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Shutdown(ctx, root, p, time.Now())
	if !errors.Is(err, context.Canceled) || res != nil {
		t.Errorf("Shutdown = %+v, %v; want context.Canceled", res, err)
	}
	if got := readFixture(t, root, "/sys/fs/nfs/0:65/shutdown"); got != "0\n" {
		t.Errorf("attribute = %q, want 0", got)
	}
	if ok, _ := Pending(root); ok {
		t.Error("an interrupted shutdown wrote a journal")
	}
}

// emptyQueues rewrites every sunrpc transport and switch of root as holding no request, as
// once the server answers.
func emptyQueues(t *testing.T, root hostfs.Root) {
	t.Helper()
	queued := regexp.MustCompile(`(q_len|queue_len)=[0-9]+`)
	err := filepath.WalkDir(root.Sys("kernel", "sunrpc"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (d.Name() != "xprt_info" && d.Name() != "xprt_switch_info") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(p, queued.ReplaceAll(b, []byte("${1}=0")), 0o644)
	})
	if err != nil {
		t.Fatal(err)
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

// TestShutdownInHostNamespace: in a pod (the agent), this process's mount namespace is the
// container's, where the superblock is not mounted; ShutdownOptions.PID 1 plans and checks
// it in the host's, through /proc/1.
func TestShutdownInHostNamespace(t *testing.T) {
	root := shutdownRoot(t)
	for _, f := range []struct{ from, to string }{
		{"proc/self/mountinfo", "proc/1/mountinfo"},
		{"proc/fs/nfsfs", "proc/1/net/nfsfs"},
	} {
		if err := os.MkdirAll(filepath.Dir(root.Path(f.to)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(root.Path(f.from), root.Path(f.to)); err != nil {
			t.Fatal(err)
		}
	}
	writeRootFile(t, root, "proc/self/mountinfo", "900 880 0:70 / / rw,relatime - overlay overlay rw\n")
	if _, err := PlanShutdown(context.Background(), root, "0:53", ShutdownOptions{Force: true}); !errors.Is(err, inventory.ErrNotNFS) {
		t.Fatalf("PlanShutdown in the container's namespace: err = %v, want ErrNotNFS", err)
	}
	p, err := PlanShutdown(context.Background(), root, "0:53", ShutdownOptions{Force: true, PID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Shutdown(context.Background(), root, p, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := readFixture(t, root, "/sys/fs/nfs/0:53/shutdown"); got != "1\n" {
		t.Errorf("attribute = %q, want 1", got)
	}
}

// The next step is a command line to paste: each mount point is one shell word, so that
// /mnt/$(cmd) does not run cmd and a quote does not end the word (shell.Quote).
func TestShutdownNextStepQuoted(t *testing.T) {
	t.Parallel()
	mounts := []string{"/mnt/$(reboot)", "/mnt/it's here"}
	const want = `umount '/mnt/$(reboot)' '/mnt/it'\''s here'`
	p := &ShutdownPlan{Device: "0:53", Attribute: "/sys/fs/nfs/0:53/shutdown", Mounts: mounts, AlreadyShutDown: true}
	var b strings.Builder
	if err := WriteShutdownResult(&b, &ShutdownReport{Plan: p}); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.Contains(got, "Next: "+want+"\n") {
		t.Errorf("already shut down:\n%s\nwant Next: %s", got, want)
	}
	b.Reset()
	if err := WriteShutdownResult(&b, &ShutdownReport{Plan: &ShutdownPlan{Attribute: p.Attribute}, Result: &ShutdownResult{ReadBack: "1", Journal: "j", MountPoints: mounts}}); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.Contains(got, "Next: "+want+"\n") {
		t.Errorf("shut down:\n%s\nwant Next: %s", got, want)
	}
	err := noKnob(&ShutdownPlan{Attribute: p.Attribute, Mounts: mounts[1:], KernelRelease: "6.1.0-50-amd64"}, nil)
	if want := `umount -f '/mnt/it'\''s here' (`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("noKnob = %v, want %q", err, want)
	}
}
