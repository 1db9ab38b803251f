package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// fakeHost is a fixture root whose mountinfo shows dir as an NFS (or other) mount, an
// inventory whose mountstats counters grow with every read, and a fake fio that answers
// with recorded outputs.
type fakeHost struct {
	t     *testing.T
	root  hostfs.Root
	mount string
	dev   string

	mu       sync.Mutex
	reads    int
	calls    [][]string
	dirsSeen []string
	prepared []string    // jobs laid out with --create_only=1
	onRun    func(n int) // called before answering the n-th fio job run (1-based)
}

func newFakeHost(t *testing.T, fstype string) *fakeHost {
	t.Helper()
	h := &fakeHost{t: t, root: hostfs.Root(t.TempDir()), mount: t.TempDir(), dev: "0:53"}
	src := "nfs.example:/export"
	opts := "rw,vers=4.2,rsize=1048576,wsize=1048576,hard,proto=tcp,nconnect=4,addr=10.0.0.5"
	if !IsNFS(fstype) {
		src, opts, h.dev = "/dev/vda", "rw", "254:0"
	}
	mi := fmt.Sprintf("22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"+
		"36 22 %s / %s rw,relatime shared:9 - %s %s %s\n", h.dev, h.mount, fstype, src, opts)
	writeFile(t, h.root.Proc("self", "mountinfo"), mi)
	writeFile(t, h.root.Proc("sys", "kernel", "osrelease"), "6.1.0-28-amd64\n")
	writeFile(t, h.root.Proc("sys", "kernel", "hostname"), "client-1\n")
	return h
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (h *fakeHost) inventory() (*inventory.Inventory, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads++
	n := uint64(h.reads)
	ra := 128
	return &inventory.Inventory{
		KernelRelease: "6.1.0-28-amd64",
		Mounts: []inventory.Mount{{
			Device: h.dev, MountPoints: []string{h.mount}, Server: "nfs.example", Export: "/export",
			FSType: "nfs4", Version: "4.2", ReadAheadKB: &ra, NConnect: 4, Connections: 4,
			RSize: 1 << 20, WSize: 1 << 20, Backend: "generic",
			Options: map[string]string{"vers": "4.2", "nconnect": "4", "hard": ""},
			Stats: &inventory.Stats{
				Bytes: procfs.NFSBytesStats{ReadTotal: n << 20, WriteTotal: n << 10},
				Operations: []procfs.NFSOperationStats{
					// Each read of the inventory adds 100 READs, 102 transmissions and
					// 250 ms of RTT: 2 retransmissions and 2.5 ms per READ.
					{Operation: "READ", Requests: 100 * n, Transmissions: 102 * n, CumulativeTotalResponseMilliseconds: 250 * n, CumulativeTotalRequestMilliseconds: 300 * n},
					{Operation: "GETATTR", Requests: 7, Transmissions: 7},
				},
			},
		}},
	}, nil
}

func (h *fakeHost) exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	if len(args) == 1 && args[0] == "--version" {
		return []byte("fio-3.33\n"), nil
	}
	if contains(args, "--create_only=1") {
		h.mu.Lock()
		h.prepared = append(h.prepared, argMap(args)["name"])
		h.mu.Unlock()
		return nil, ctx.Err()
	}
	h.mu.Lock()
	h.calls = append(h.calls, append([]string{name}, args...))
	n := len(h.calls)
	h.mu.Unlock()
	var job, dir string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--name="); ok {
			job = v
		}
		if v, ok := strings.CutPrefix(a, "--directory="); ok {
			dir = v
		}
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("fio directory %q missing: %v", dir, err)
	}
	h.mu.Lock()
	h.dirsSeen = append(h.dirsSeen, dir)
	h.mu.Unlock()
	// fio would lay out files here; they must be removed with the directory.
	if err := os.WriteFile(filepath.Join(dir, job+".0"), []byte("data"), 0o600); err != nil {
		return nil, err
	}
	if h.onRun != nil {
		h.onRun(n)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join("testdata", "fio", job+".json"))
}

func (h *fakeHost) runner() *Runner {
	return &Runner{Root: h.root, Exec: h.exec, Inventory: h.inventory, Tool: "nfstune test", FSTimeout: 5 * time.Second}
}

func TestRunRecordsResultsTuningAndDelta(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t, "nfs4")
	var progress strings.Builder
	r := h.runner()
	r.Progress = &progress
	res, err := r.Run(context.Background(), RunOptions{Mount: h.mount, Profile: "copy", Repeat: 2, Size: 1 << 20, Runtime: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Runs); got != 4 {
		t.Fatalf("runs = %d, want 2 jobs x 2 repeats", got)
	}
	// The whole profile runs per repeat: read, write, read, write.
	var order []string
	for _, run := range res.Runs {
		order = append(order, fmt.Sprintf("%s#%d", run.Job, run.Repeat))
	}
	if want := "copy-read-1m#1 copy-write-1m#1 copy-read-1m#2 copy-write-1m#2"; strings.Join(order, " ") != want {
		t.Errorf("order = %v, want %s", order, want)
	}
	first := res.Runs[0]
	// copy-read-1m.json (recorded): bw_bytes 1016800969 -> 969.697 MiB/s.
	if first.ReadMiBs != 969.697 || first.WriteMiBs != 0 {
		t.Errorf("read MiB/s = %v, write %v", first.ReadMiBs, first.WriteMiBs)
	}
	if first.LatP99ms <= first.LatP50ms || first.LatP50ms <= 0 {
		t.Errorf("latency p50 %v p99 %v", first.LatP50ms, first.LatP99ms)
	}
	if first.Tuning == nil || first.Tuning.Connections != 4 || *first.Tuning.ReadAheadKB != 128 || first.Tuning.Backend != "generic" {
		t.Errorf("tuning = %+v", first.Tuning)
	}
	d := first.Mountstats
	if d == nil || len(d.Ops) != 1 || d.Ops[0].Op != "READ" || d.Ops[0].Requests != 100 || d.Retransmissions != 2 || d.Ops[0].AvgRTTms != 2.5 {
		t.Errorf("mountstats delta = %+v", d)
	}
	if d != nil && d.ServerReadBytes != 1<<20 {
		t.Errorf("server read bytes = %d", d.ServerReadBytes)
	}
	p := res.Provenance
	if p.FioVersion != "fio-3.33" || p.Kernel != "6.1.0-28-amd64" || p.Hostname != "client-1" || p.Profile != "copy" {
		t.Errorf("provenance = %+v", p)
	}
	if !strings.HasPrefix(filepath.Base(p.Directory), DirPrefix) || filepath.Dir(p.Directory) != h.mount {
		t.Errorf("directory = %q, want %s/%s*", p.Directory, h.mount, DirPrefix)
	}
	if _, err := os.Stat(p.Directory); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bench directory left behind: %v", err)
	}
	if want := "--directory=" + p.Directory; !contains(first.Command, want) || first.Command[0] != "fio" {
		t.Errorf("command %v lacks %s", first.Command, want)
	}
	// Only the reading job is laid out first, once.
	if strings.Join(h.prepared, " ") != "copy-read-1m" {
		t.Errorf("laid out %v, want copy-read-1m once", h.prepared)
	}
	if !strings.Contains(progress.String(), "job 4/4 copy-write-1m, repeat 2/2") {
		t.Errorf("progress output:\n%s", progress.String())
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestRunRefusesNonNFS(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t, "ext4")
	_, err := h.runner().Run(context.Background(), RunOptions{Mount: h.mount, Profile: "seq-read", Repeat: 1, Size: 1 << 20})
	if !errors.Is(err, ErrNotNFS) {
		t.Fatalf("err = %v, want ErrNotNFS", err)
	}
	if len(h.calls) != 0 {
		t.Errorf("fio ran %d times on a refused target", len(h.calls))
	}
	entries, _ := os.ReadDir(h.mount)
	if len(entries) != 0 {
		t.Errorf("refused run created %v", entries)
	}

	res, err := h.runner().Run(context.Background(), RunOptions{Mount: h.mount, Profile: "seq-read", Repeat: 1, Size: 1 << 20, AllowNonNFS: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 1 || res.Tuning.FSType != "ext4" || res.Runs[0].Mountstats != nil {
		t.Errorf("non-NFS result: %+v tuning %+v", res.Runs, res.Tuning)
	}
}

func TestRunChecksFreeSpace(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t, "nfs4")
	_, err := h.runner().Run(context.Background(), RunOptions{Mount: h.mount, Profile: "azure-files-random", Size: 1 << 46})
	if err == nil || !strings.Contains(err.Error(), "not enough space") {
		t.Fatalf("err = %v, want not enough space", err)
	}
	if entries, _ := os.ReadDir(h.mount); len(entries) != 0 {
		t.Errorf("created %v before the space check", entries)
	}
}

func TestRunCleansUpWhenInterrupted(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t, "nfs4")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.onRun = func(n int) {
		if n == 3 {
			cancel() // SIGINT arrives during the third fio run
		}
	}
	res, err := h.runner().Run(ctx, RunOptions{Mount: h.mount, Profile: "metadata", Repeat: 1, Size: 1 << 20})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if res == nil || !res.Provenance.Interrupted || len(res.Runs) != 2 {
		t.Fatalf("result = %+v, want 2 runs kept and interrupted set", res)
	}
	if _, err := os.Stat(res.Provenance.Directory); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bench directory left behind after interrupt: %v", err)
	}
}

func TestRunRejectsRelativeAndUnknown(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t, "nfs4")
	for _, o := range []RunOptions{
		{Mount: "relative/dir", Profile: "copy"},
		{Mount: h.mount, Profile: "spec-sfs"},
	} {
		if _, err := h.runner().Run(context.Background(), o); err == nil {
			t.Errorf("Run(%+v) succeeded", o)
		}
	}
}
