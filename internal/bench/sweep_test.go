package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// fakeNFS is a client with NFS mounts that can be unmounted and mounted: mountinfo,
// /proc/fs/nfsfs/servers and the bdi read_ahead_kb files follow the fake mount and
// umount commands, and fake fio reads faster the larger the read-ahead is.
type fakeNFS struct {
	t    *testing.T
	root hostfs.Root

	mu       sync.Mutex
	mounts   []*fakeMount // in mount order
	nextDev  int
	commands []string
	fioSeen  []string // "ra=<kb> nconnect=<n>" at each fio run
	onFio    func(n int)
	// onLayout runs at each fio --create_only call, before the measured run.
	onLayout func()
	// pinned keeps the client listed in nfsfs/servers, as another mount would.
	pinned bool
	// udevPending are the bdis of new mounts whose udev event has not run: like
	// nfsrahead's rule, it writes udevReadAheadKB when udevadm settle waits for it, or
	// else late, at the next fio run.
	udevPending []string
}

const udevReadAheadKB = 96

type fakeMount struct {
	mp, dev string
	opts    map[string]string
}

var seqReadJSON = func() string {
	b, err := os.ReadFile(filepath.Join("testdata", "fio", "seqread-64k-buffered.json"))
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func newFakeNFS(t *testing.T, mountPoints ...string) *fakeNFS {
	f := &fakeNFS{t: t, root: hostfs.Root(t.TempDir()), nextDev: 60}
	for _, mp := range mountPoints {
		f.mount(mp, map[string]string{"vers": "4.2", "proto": "tcp", "hard": "", "nconnect": "2", "rsize": "1048576", "addr": "10.0.0.5", "clientaddr": "10.0.0.9"}, 512)
	}
	f.sync()
	return f
}

func (f *fakeNFS) mount(mp string, opts map[string]string, ra int) {
	dev := fmt.Sprintf("0:%d", f.nextDev)
	f.nextDev++
	f.mounts = append(f.mounts, &fakeMount{mp: mp, dev: dev, opts: opts})
	writeFile(f.t, f.root.Sys("class", "bdi", dev, "read_ahead_kb"), strconv.Itoa(ra)+"\n")
}

// sync writes mountinfo and nfsfs/servers from the mount table.
func (f *fakeNFS) sync() {
	var mi strings.Builder
	mi.WriteString("22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n")
	for i, m := range f.mounts {
		var o []string
		for k, v := range m.opts {
			if v == "" {
				o = append(o, k)
			} else {
				o = append(o, k+"="+v)
			}
		}
		fmt.Fprintf(&mi, "%d 22 %s / %s rw,relatime shared:%d - nfs4 nfs.example:/export %s\n", 40+i, m.dev, m.mp, 10+i, strings.Join(o, ","))
	}
	writeFile(f.t, f.root.Proc("self", "mountinfo"), mi.String())
	servers := "NV SERVER   PORT USE HOSTNAME\n"
	if len(f.mounts) > 0 || f.pinned {
		servers += "v4 0a000005  801   1 nfs.example\n"
	}
	writeFile(f.t, f.root.Proc("fs", "nfsfs", "servers"), servers)
	volumes := "NV SERVER   PORT DEV          FSID                              FSC\n"
	for _, m := range f.mounts {
		volumes += "v4 0a000005  801 " + m.dev + "         1f0b2c3d4e5f6071:8293a4b5c6d7e8f9  no\n"
	}
	writeFile(f.t, f.root.Proc("fs", "nfsfs", "volumes"), volumes)
}

func (f *fakeNFS) find(mp string) int {
	for i, m := range f.mounts {
		if m.mp == mp {
			return i
		}
	}
	return -1
}

func (f *fakeNFS) inventory() (*inventory.Inventory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	inv := &inventory.Inventory{KernelRelease: "6.1.0"}
	g := inventory.Group{Key: "tcp://10.0.0.5/v4.2", ServerAddr: "10.0.0.5", Version: "4.2", Proto: "tcp"}
	for _, m := range f.mounts {
		ra, err := hostfs.ReadInt(f.root.Sys("class", "bdi", m.dev, "read_ahead_kb"))
		if err != nil {
			return nil, err
		}
		kb := int(ra)
		nc, _ := strconv.Atoi(m.opts["nconnect"])
		rs, _ := strconv.Atoi(m.opts["rsize"])
		inv.Mounts = append(inv.Mounts, inventory.Mount{
			Device: m.dev, MountPoints: []string{m.mp}, Server: "nfs.example", ServerAddr: "10.0.0.5", Export: "/export",
			FSType: "nfs4", Version: "4.2", ReadAheadKB: &kb, NConnect: nc, Connections: max(nc, 1), RSize: rs,
			Options: m.opts, ClientGroup: g.Key, Backend: "generic",
		})
		g.Devices = append(g.Devices, m.dev)
	}
	if len(g.Devices) > 0 {
		inv.Groups = []inventory.Group{g}
	}
	return inv, nil
}

var bwRE = regexp.MustCompile(`"bw_bytes" : \d+`)

func (f *fakeNFS) exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case name == "fio" && len(args) == 1:
		return []byte("fio-3.33\n"), nil
	case name == "umount":
		f.commands = append(f.commands, "umount "+args[0])
		i := f.find(args[0])
		if i < 0 {
			return nil, fmt.Errorf("umount: %s: not mounted", args[0])
		}
		f.mounts = append(f.mounts[:i], f.mounts[i+1:]...)
		f.sync()
		return nil, nil
	case name == "mount":
		// mount -t nfs4 -o OPTS SOURCE MP
		f.commands = append(f.commands, "mount "+args[3]+" "+args[5]+" "+args[4])
		if f.find(args[5]) >= 0 {
			return nil, fmt.Errorf("mount: %s already mounted", args[5])
		}
		opts := map[string]string{}
		for _, o := range strings.Split(args[3], ",") {
			k, v, _ := strings.Cut(o, "=")
			opts[k] = v
		}
		// The first mount of a client fixes nconnect for the rest of the group.
		if len(f.mounts) > 0 {
			opts["nconnect"] = f.mounts[0].opts["nconnect"]
		}
		f.mount(args[5], opts, 128) // a new bdi starts at the kernel default
		f.udevPending = append(f.udevPending, f.mounts[len(f.mounts)-1].dev)
		f.sync()
		return nil, nil
	case name == "udevadm" && len(args) > 0 && args[0] == "settle":
		f.commands = append(f.commands, "udevadm settle")
		f.runUdev()
		return nil, nil
	case name == "fio" && contains(args, "--create_only=1"):
		if f.onLayout != nil {
			f.onLayout()
		}
		return nil, nil
	case name == "fio":
		m := argMap(args)
		dir := m["directory"]
		f.runUdev() // events nobody waited for run late, under the measured run
		tgt := f.mounts[0]
		ra, err := hostfs.ReadInt(f.root.Sys("class", "bdi", tgt.dev, "read_ahead_kb"))
		if err != nil {
			return nil, err
		}
		f.fioSeen = append(f.fioSeen, fmt.Sprintf("ra=%d nconnect=%s", ra, tgt.opts["nconnect"]))
		n := len(f.fioSeen)
		if _, err := os.Stat(dir); err != nil {
			return nil, err
		}
		if f.onFio != nil {
			f.onFio(n)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Throughput grows with read-ahead, with a little run-to-run noise.
		bw := ra*100_000 + int64(n%2)*1000
		return []byte(bwRE.ReplaceAllString(seqReadJSON, fmt.Sprintf(`"bw_bytes" : %d`, bw))), nil
	}
	return nil, fmt.Errorf("unexpected command %s %v", name, args)
}

// runUdev runs the pending udev events of mounted bdis.
func (f *fakeNFS) runUdev() {
	for _, dev := range f.udevPending {
		p := f.root.Sys("class", "bdi", dev, "read_ahead_kb")
		if _, err := os.Stat(p); err == nil {
			writeFile(f.t, p, strconv.Itoa(udevReadAheadKB)+"\n")
		}
	}
	f.udevPending = nil
}

func (f *fakeNFS) runner() *Runner {
	return &Runner{Root: f.root, Exec: f.exec, Inventory: f.inventory, FSTimeout: 5 * time.Second}
}

func TestSweepReadAhead(t *testing.T) {
	t.Parallel()
	mp := t.TempDir()
	f := newFakeNFS(t, mp)
	res, err := f.runner().Sweep(context.Background(), SweepOptions{
		RunOptions:  RunOptions{Mount: mp, Profile: "seq-read", Repeat: 2, Size: 1 << 20, Runtime: time.Second},
		ReadAheadKB: []int{128, 1024, 4096},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "ra=128 nconnect=2,ra=128 nconnect=2,ra=1024 nconnect=2,ra=1024 nconnect=2,ra=4096 nconnect=2,ra=4096 nconnect=2"
	if got := strings.Join(f.fioSeen, ","); got != want {
		t.Errorf("fio saw %s\nwant %s", got, want)
	}
	for _, r := range res.Runs {
		if r.Tuning == nil || r.Tuning.ReadAheadKB == nil || "ra="+strconv.Itoa(*r.Tuning.ReadAheadKB) != r.Variant {
			t.Errorf("run %s: tuning %+v", r.Variant, r.Tuning)
		}
	}
	if ra, _ := hostfs.ReadInt(f.root.Sys("class", "bdi", "0:60", "read_ahead_kb")); ra != 512 {
		t.Errorf("read_ahead_kb after sweep = %d, want the original 512", ra)
	}
	if len(res.Best) != 1 || res.Best[0].Variant != "ra=4096" || res.Best[0].Baseline != "ra=128" || res.Best[0].Verdict != VerdictBetter {
		t.Errorf("best = %+v", res.Best)
	}
	if len(f.commands) != 0 {
		t.Errorf("read-ahead sweep ran %v", f.commands)
	}
	p, err := policy.Parse("snippet.yaml", []byte(res.Policy))
	if err != nil {
		t.Fatalf("policy snippet does not parse: %v\n%s", err, res.Policy)
	}
	if !strings.Contains(res.Policy, "readAheadKB: 4096") || p == nil {
		t.Errorf("snippet:\n%s", res.Policy)
	}
	// The measured value is exact: the mount's larger read-ahead would be lowered to it.
	r := p.Resolve(&inventory.Mount{MountPoints: []string{mp}, Server: "10.0.0.1", RSize: 1 << 20})
	if r.ReadAheadKB != 4096 || !r.ReadAheadExact || !r.ReadAheadChange(15360, 1<<20, false) {
		t.Errorf("snippet resolves to %d KiB, exact %v; want 4096, exact", r.ReadAheadKB, r.ReadAheadExact)
	}
}

func TestSweepRestoresReadAheadOnInterrupt(t *testing.T) {
	t.Parallel()
	mp := t.TempDir()
	f := newFakeNFS(t, mp)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.onFio = func(n int) {
		if n == 2 {
			cancel()
		}
	}
	res, err := f.runner().Sweep(ctx, SweepOptions{
		RunOptions:  RunOptions{Mount: mp, Profile: "seq-read", Repeat: 1, Size: 1 << 20, Runtime: time.Second},
		ReadAheadKB: []int{1024, 4096, 15360},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if ra, _ := hostfs.ReadInt(f.root.Sys("class", "bdi", "0:60", "read_ahead_kb")); ra != 512 {
		t.Errorf("read_ahead_kb after interrupt = %d, want 512", ra)
	}
	if !res.Provenance.Interrupted || len(res.Runs) != 1 {
		t.Errorf("interrupted %v, runs %d", res.Provenance.Interrupted, len(res.Runs))
	}
	if _, err := os.Stat(res.Provenance.Directory); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bench directory left: %v", err)
	}
}

func TestSweepRemountsClientGroup(t *testing.T) {
	t.Parallel()
	mp, other := t.TempDir(), t.TempDir()
	f := newFakeNFS(t, mp, other)
	res, err := f.runner().Sweep(context.Background(), SweepOptions{
		RunOptions:  RunOptions{Mount: mp, Profile: "seq-read", Repeat: 1, Size: 1 << 20, Runtime: time.Second},
		ReadAheadKB: []int{4096},
		NConnect:    []int{1, 8},
		Remount:     true,
		Remountable: []string{mp, other},
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := func(nc int) string {
		return fmt.Sprintf("hard,nconnect=%d,proto=tcp,rsize=1048576,vers=4.2", nc)
	}
	want := []string{
		"umount " + other, "umount " + mp,
		"mount " + opts(1) + " " + mp + " nfs.example:/export", "mount " + opts(2) + " " + other + " nfs.example:/export", "udevadm settle",
		"umount " + other, "umount " + mp,
		"mount " + opts(8) + " " + mp + " nfs.example:/export", "mount " + opts(2) + " " + other + " nfs.example:/export", "udevadm settle",
		// back to the original options
		"umount " + other, "umount " + mp,
		"mount " + opts(2) + " " + mp + " nfs.example:/export", "mount " + opts(2) + " " + other + " nfs.example:/export",
		"udevadm settle",
	}
	if got := strings.Join(f.commands, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if got := strings.Join(f.fioSeen, ","); got != "ra=4096 nconnect=1,ra=4096 nconnect=8" {
		t.Errorf("fio saw %s", got)
	}
	// The restored mount has a new bdi; the original read-ahead is written to it.
	if ra, _ := hostfs.ReadInt(f.root.Sys("class", "bdi", f.mounts[0].dev, "read_ahead_kb")); ra != 512 {
		t.Errorf("read_ahead_kb of the restored mount = %d, want 512", ra)
	}
	if res.Runs[1].Tuning.NConnect != 8 || res.Runs[1].Variant != "ra=4096,nconnect=8" {
		t.Errorf("run 2 = %+v tuning %+v", res.Runs[1], res.Runs[1].Tuning)
	}
	if !strings.Contains(res.Policy, "nconnect: ") {
		t.Errorf("snippet lacks nconnect:\n%s", res.Policy)
	}
	if _, err := policy.Parse("snippet.yaml", []byte(res.Policy)); err != nil {
		t.Errorf("snippet: %v", err)
	}
}

func TestSweepRefusals(t *testing.T) {
	t.Parallel()
	mp, other := t.TempDir(), t.TempDir()
	run := RunOptions{Mount: mp, Profile: "seq-read", Repeat: 1, Size: 1 << 20, Runtime: time.Second}
	tests := []struct {
		name string
		opts SweepOptions
		want string
	}{
		{"no remount flag", SweepOptions{RunOptions: run, NConnect: []int{4}}, "need --remount"},
		{"group member not allowed", SweepOptions{RunOptions: run, NConnect: []int{4}, Remount: true, Remountable: []string{mp}}, "not in --remountable"},
		{"nothing", SweepOptions{RunOptions: run}, "nothing to sweep"},
		{"bad values", SweepOptions{RunOptions: run, ReadAheadKB: []int{0}, NConnect: []int{17}, Remount: true}, "nconnect 17"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNFS(t, mp, other)
			_, err := f.runner().Sweep(context.Background(), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if len(f.commands) != 0 || len(f.fioSeen) != 0 {
				t.Errorf("ran %v and %d fio jobs", f.commands, len(f.fioSeen))
			}
			if entries, _ := os.ReadDir(mp); len(entries) != 0 {
				t.Errorf("left %v", entries)
			}
		})
	}
}

func TestSweepWaitsForClient(t *testing.T) {
	t.Parallel()
	mp := t.TempDir()
	f := newFakeNFS(t, mp)
	f.pinned = true // something else holds the client
	_, err := f.runner().Sweep(context.Background(), SweepOptions{
		RunOptions: RunOptions{Mount: mp, Profile: "seq-read", Repeat: 1, Size: 1 << 20, Runtime: time.Second},
		NConnect:   []int{4}, Remount: true, Remountable: []string{mp}, ClientGoneTimeout: 300 * time.Millisecond,
	})
	if err == nil || !strings.Contains(err.Error(), "still lists the NFS client") {
		t.Fatalf("err = %v", err)
	}
	if len(f.fioSeen) != 0 {
		t.Errorf("fio ran with the old client")
	}
	// The mount is back with its original options.
	if len(f.mounts) != 1 || f.mounts[0].mp != mp || f.mounts[0].opts["nconnect"] != "2" {
		t.Errorf("mounts after the failed wait: %+v", f.mounts)
	}
	want := "umount " + mp + "\nmount hard,nconnect=2,proto=tcp,rsize=1048576,vers=4.2 " + mp + " nfs.example:/export"
	if got := strings.Join(f.commands, "\n"); got != want {
		t.Errorf("commands:\n%s\nwant:\n%s", got, want)
	}
}

func TestVariantsOrderAndNames(t *testing.T) {
	t.Parallel()
	o := SweepOptions{ReadAheadKB: []int{128, 4096}, NConnect: []int{1, 8}, RSize: []int{262144}}
	var got []string
	for _, v := range o.Variants() {
		got = append(got, v.Name)
	}
	// Mount options outermost: one remount per nconnect value.
	want := "ra=128,nconnect=1,rsize=262144 ra=4096,nconnect=1,rsize=262144 ra=128,nconnect=8,rsize=262144 ra=4096,nconnect=8,rsize=262144"
	if strings.Join(got, " ") != want {
		t.Errorf("variants = %v\nwant %s", got, want)
	}
}

func TestEscapeGlob(t *testing.T) {
	t.Parallel()
	for _, mp := range []string{"/mnt/data", "/mnt/a*b", "/mnt/[x]?", `/mnt/back\slash`} {
		ok, err := path.Match(escapeGlob(mp), mp)
		if err != nil || !ok {
			t.Errorf("escaped %q does not match itself: %v", mp, err)
		}
		if mp != "/mnt/data" {
			if ok, _ := path.Match(escapeGlob(mp), "/mnt/data"); ok {
				t.Errorf("escaped %q matches /mnt/data", mp)
			}
		}
	}
}

// A writer that sets its own read-ahead after the sweep did (udev's nfsrahead on a freshly
// mounted superblock) must not change what a run measures: the sweep writes the variant's
// value again right before each measured run.
func TestSweepHoldsReadAheadAgainstLateWriter(t *testing.T) {
	t.Parallel()
	mp := t.TempDir()
	f := newFakeNFS(t, mp)
	f.onLayout = func() { writeReadAhead(t, f, 128) }
	res, err := f.runner().Sweep(context.Background(), SweepOptions{
		RunOptions:  RunOptions{Mount: mp, Profile: "seq-read", Repeat: 1, Size: 1 << 20, Runtime: time.Second},
		ReadAheadKB: []int{1024, 4096},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(f.fioSeen, ","), "ra=1024 nconnect=2,ra=4096 nconnect=2"; got != want {
		t.Errorf("fio saw %s, want %s", got, want)
	}
	for _, r := range res.Runs {
		if r.Tuning == nil || r.Tuning.ReadAheadKB == nil || "ra="+strconv.Itoa(*r.Tuning.ReadAheadKB) != r.Variant {
			t.Errorf("run %s: tuning %+v", r.Variant, r.Tuning)
		}
	}
}

// A read-ahead changed while fio runs fails the sweep: the run's figures would be labelled
// with a value that did not hold.
func TestSweepFailsWhenReadAheadChangesDuringRun(t *testing.T) {
	t.Parallel()
	mp := t.TempDir()
	f := newFakeNFS(t, mp)
	f.onFio = func(int) { writeReadAhead(t, f, 128) }
	_, err := f.runner().Sweep(context.Background(), SweepOptions{
		RunOptions:  RunOptions{Mount: mp, Profile: "seq-read", Repeat: 1, Size: 1 << 20, Runtime: time.Second},
		ReadAheadKB: []int{1024},
	})
	if err == nil || !strings.Contains(err.Error(), "changed from 1024 to 128 KiB during the run") {
		t.Fatalf("err = %v, want the read-ahead change named", err)
	}
}

// writeReadAhead sets the fake target's read_ahead_kb behind the sweep's back.
func writeReadAhead(t *testing.T, f *fakeNFS, kb int) {
	t.Helper()
	p := f.root.Sys("class", "bdi", f.mounts[0].dev, "read_ahead_kb")
	if err := os.WriteFile(p, []byte(strconv.Itoa(kb)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
