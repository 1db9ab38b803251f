package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/bench"
	"github.com/nfstune/nfstune/internal/golden"
	"github.com/nfstune/nfstune/internal/inventory"
)

func runBenchCLI(t *testing.T, deps benchDeps, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	g := &globals{logLevel: "error"}
	root := &cobra.Command{Use: "nfstune", SilenceUsage: true, SilenceErrors: true}
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &ExitError{Code: ExitError2, Err: err} })
	root.AddCommand(newBenchCommandWith(g, streams, deps))
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestBenchProfiles(t *testing.T) {
	out, _, err := runBenchCLI(t, defaultBenchDeps(), "bench", "profiles")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bench.Profiles() {
		if !strings.Contains(out, p.Name) {
			t.Errorf("profiles output lacks %s:\n%s", p.Name, out)
		}
	}
	out, _, err = runBenchCLI(t, defaultBenchDeps(), "bench", "profiles", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var views []profileView
	if err := json.Unmarshal([]byte(out), &views); err != nil || len(views) != len(bench.Profiles()) {
		t.Fatalf("json profiles: %v, %d entries", err, len(views))
	}
}

// localBench is a fixture root whose mountinfo shows a temporary directory as tmpfs, and
// a fake fio answering with a recorded output.
type localBench struct {
	root, dir string
	fioCalls  int
	deps      benchDeps
}

func newLocalBench(t *testing.T) *localBench {
	t.Helper()
	lb := &localBench{root: t.TempDir(), dir: t.TempDir()}
	mi := fmt.Sprintf("22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n36 22 0:40 / %s rw shared:2 - tmpfs tmpfs rw\n", lb.dir)
	for p, s := range map[string]string{"proc/self/mountinfo": mi, "proc/sys/kernel/osrelease": "6.1.0\n", "sys/class/bdi/0:40/read_ahead_kb": "512\n"} {
		if err := os.MkdirAll(filepath.Join(lb.root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(lb.root, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	recorded, err := os.ReadFile("../bench/testdata/fio/seqread-64k-buffered.json")
	if err != nil {
		t.Fatal(err)
	}
	lb.deps = benchDeps{
		exec: func(_ context.Context, name string, args ...string) ([]byte, error) {
			if len(args) == 1 && args[0] == "--version" {
				return []byte("fio-3.33\n"), nil
			}
			if args[len(args)-1] == "--create_only=1" {
				return nil, nil // laying out the files
			}
			lb.fioCalls++
			return recorded, nil
		},
		inventory: func(*globals) bench.InventoryFunc {
			return func() (*inventory.Inventory, error) { return &inventory.Inventory{}, nil }
		},
	}
	return lb
}

// TestBenchRunLocal runs a profile on a local directory with --allow-non-nfs.
func TestBenchRunLocal(t *testing.T) {
	lb := newLocalBench(t)
	root, dir, deps := lb.root, lb.dir, lb.deps
	resultFile := filepath.Join(t.TempDir(), "r.json")
	common := []string{"--root", root, "bench", "run", "--mount", dir, "--profile", "seq-read", "--repeat", "2", "--size", "1M", "--no-drop-caches"}

	_, _, err := runBenchCLI(t, deps, common...)
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != ExitError2 || !strings.Contains(err.Error(), "tmpfs") {
		t.Fatalf("without --allow-non-nfs: err = %v, want exit 2 naming tmpfs", err)
	}
	if lb.fioCalls != 0 {
		t.Fatalf("fio ran on a refused target")
	}

	out, stderr, err := runBenchCLI(t, deps, append(common, "--allow-non-nfs", "--out", resultFile)...)
	if err != nil {
		t.Fatalf("err = %v, stderr:\n%s", err, stderr)
	}
	if lb.fioCalls != 2 {
		t.Errorf("fio ran %d times, want 2", lb.fioCalls)
	}
	if !strings.Contains(out, "seqread-64k-buffered  2") || !strings.Contains(out, "(tmpfs)") {
		t.Errorf("table:\n%s", out)
	}
	if !strings.Contains(stderr, "job 2/2 seqread-64k-buffered, repeat 2/2") {
		t.Errorf("progress:\n%s", stderr)
	}
	res, err := bench.ReadResult(resultFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 2 || res.Runs[0].ReadMiBs <= 0 || res.Provenance.FioVersion != "fio-3.33" {
		t.Errorf("result file: %+v", res)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind %v", entries)
	}
}

func TestBenchCompare(t *testing.T) {
	out, _, err := runBenchCLI(t, defaultBenchDeps(), "bench", "compare", "testdata/bench/before.json", "testdata/bench/after.json")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "bench", "compare.golden"), []byte(out))
	_, _, err = runBenchCLI(t, defaultBenchDeps(), "bench", "compare", "testdata/bench/before.json", "missing.json")
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != ExitError2 {
		t.Errorf("missing file: err = %v, want exit 2", err)
	}
}

// TestBenchSweepLocal: --allow-non-nfs lets a sweep run on a local directory, but never
// lets it write the local disk's read_ahead_kb, which no journal would put back.
func TestBenchSweepLocal(t *testing.T) {
	lb := newLocalBench(t)
	_, stderr, err := runBenchCLI(t, lb.deps, "--root", lb.root, "bench", "sweep", "--mount", lb.dir, "--profile", "seq-read",
		"--repeat", "2", "--size", "1M", "--no-drop-caches", "--allow-non-nfs", "--readahead", "128,4096")
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != ExitError2 || !strings.Contains(err.Error(), "not NFS") {
		t.Fatalf("--readahead on tmpfs: err = %v, want exit 2 saying not NFS\n%s", err, stderr)
	}
	if lb.fioCalls != 0 {
		t.Errorf("fio ran %d times on a refused sweep", lb.fioCalls)
	}
	b, err := os.ReadFile(filepath.Join(lb.root, "sys/class/bdi/0:40/read_ahead_kb"))
	if err != nil || strings.TrimSpace(string(b)) != "512" {
		t.Errorf("read_ahead_kb after the refused sweep = %q, %v; want 512 untouched", b, err)
	}
	if entries, _ := os.ReadDir(lb.dir); len(entries) != 0 {
		t.Errorf("left behind %v", entries)
	}
	_, _, err = runBenchCLI(t, lb.deps, "--root", lb.root, "bench", "sweep", "--mount", lb.dir, "--profile", "seq-read", "--allow-non-nfs", "--nconnect", "4")
	if !errors.As(err, &exit) || exit.Code != ExitError2 || !strings.Contains(err.Error(), "--remount") {
		t.Errorf("nconnect without --remount: %v", err)
	}
}

// TestBenchReportServiceLimit takes the limit from the planner's model: Azure NetApp Files
// premium gives 64 MiB/s per TiB, 640 MiB/s at 10 TiB, and before.json's median of
// 477.6 MiB/s is 75% of it. A lower --client-nic wins.
func TestBenchReportServiceLimit(t *testing.T) {
	dir := t.TempDir()
	_, _, err := runBenchCLI(t, defaultBenchDeps(), "bench", "report", "testdata/bench/before.json",
		"-o", "html", "--out", dir, "--service", "anf", "--tier", "premium", "--capacity", "10TiB")
	if err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "<td>75%</td>") || !strings.Contains(string(html), "premium at 10TiB: 640.0 MiB/s") {
		t.Errorf("report lacks the share of the service's 640 MiB/s")
	}
	_, _, err = runBenchCLI(t, defaultBenchDeps(), "bench", "report", "testdata/bench/before.json",
		"-o", "html", "--out", dir, "--service", "anf", "--tier", "premium", "--capacity", "10TiB", "--client-nic", "4Gbps")
	if err != nil {
		t.Fatal(err)
	}
	if html, err = os.ReadFile(filepath.Join(dir, "report.html")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "4Gbps = 476.8 MiB/s") {
		t.Errorf("report does not use the lower NIC limit")
	}
	for _, bad := range [][]string{
		{"--service", "anf", "--capacity", "10TiB"},                             // several tiers
		{"--service", "anf", "--tier", "premium"},                               // no capacity
		{"--service", "s3", "--capacity", "1TiB"},                               // unknown service
		{"--service", "anf", "--tier", "premium", "--capacity", "lots"},         // bad size
		{"--service", "afs", "--tier", "provisioned-v1", "--capacity", "20GiB"}, // below the minimum
	} {
		args := append([]string{"bench", "report", "testdata/bench/before.json", "--out", dir}, bad...)
		_, _, err := runBenchCLI(t, defaultBenchDeps(), args...)
		var exit *ExitError
		if !errors.As(err, &exit) || exit.Code != ExitError2 {
			t.Errorf("%v: err = %v, want exit 2", bad, err)
		}
	}
}

func TestBenchReport(t *testing.T) {
	dir := t.TempDir()
	out, _, err := runBenchCLI(t, defaultBenchDeps(), "bench", "report", "testdata/bench/before.json", "testdata/bench/after.json",
		"-o", "html", "--out", dir, "--client-nic", "10Gbps")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.html", "throughput.svg", "iops.svg", "latency.svg"} {
		if !strings.Contains(out, filepath.Join(dir, f)) {
			t.Errorf("output does not list %s:\n%s", f, out)
		}
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	// before.json: median 477.6 MiB/s of 1192.1 MiB/s.
	if !strings.Contains(string(html), "<td>40%</td>") || !strings.Contains(string(html), "10Gbps = 1192.1 MiB/s") {
		t.Errorf("report lacks the NIC share")
	}
	_, _, err = runBenchCLI(t, defaultBenchDeps(), "bench", "report", "testdata/bench/before.json", "--out", dir, "--client-nic", "10 gigs")
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != ExitError2 {
		t.Errorf("bad --client-nic: err = %v, want exit 2", err)
	}
}

// curveDeps answers bench curve's steps with the recorded ones of internal/bench's
// testdata/curve (400, 1600, 6400 and 400000 ops/s offered; the fourth fell behind).
func curveDeps(lb *localBench) benchDeps {
	deps := lb.deps
	deps.exec = func(_ context.Context, _ string, args ...string) ([]byte, error) {
		if len(args) == 1 && args[0] == "--version" {
			return []byte("fio-3.33\n"), nil
		}
		for _, a := range args {
			if a == "--create_only=1" {
				return nil, nil
			}
		}
		lb.fioCalls++
		return os.ReadFile(fmt.Sprintf("../bench/testdata/curve/step%d.json", lb.fioCalls))
	}
	return deps
}

// TestBenchCurveLocal runs the load curve on a local directory with --allow-non-nfs: it
// stops after the step that fell behind, and writes the steps and the knee.
func TestBenchCurveLocal(t *testing.T) {
	lb := newLocalBench(t)
	deps := curveDeps(lb)
	resultFile := filepath.Join(t.TempDir(), "curve.json")
	common := []string{"--root", lb.root, "bench", "curve", "--mount", lb.dir, "--rates", "400,1600,6400,400000,800000", "--runtime", "2s", "--no-drop-caches"}

	_, _, err := runBenchCLI(t, deps, common...)
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != ExitError2 || !strings.Contains(err.Error(), "tmpfs") {
		t.Fatalf("without --allow-non-nfs: err = %v, want exit 2 naming tmpfs", err)
	}
	_, _, err = runBenchCLI(t, deps, append(common, "--allow-non-nfs", "--rates", "800,400")...)
	if !errors.As(err, &exit) || exit.Code != ExitError2 || !strings.Contains(err.Error(), "rising") {
		t.Fatalf("falling rates: err = %v, want exit 2", err)
	}
	_, _, err = runBenchCLI(t, deps, append(common, "--allow-non-nfs", "--profile", "metadata")...)
	if !errors.As(err, &exit) || exit.Code != ExitError2 || !strings.Contains(err.Error(), "eda-mix, eda-tools") {
		t.Fatalf("a profile that is not a mix: err = %v, want exit 2 naming the mixes", err)
	}
	if lb.fioCalls != 0 {
		t.Fatalf("fio ran on a refused curve")
	}

	out, stderr, err := runBenchCLI(t, deps, append(common, "--allow-non-nfs", "--out", resultFile)...)
	if err != nil {
		t.Fatalf("err = %v, stderr:\n%s", err, stderr)
	}
	if lb.fioCalls != 4 {
		t.Errorf("fio ran %d steps, want 4", lb.fioCalls)
	}
	if !strings.Contains(out, "knee at step 4") || !strings.Contains(out, "(tmpfs)") {
		t.Errorf("table:\n%s", out)
	}
	if !strings.Contains(stderr, "job 4/5 eda-mix [offered=400000/s]") {
		t.Errorf("progress:\n%s", stderr)
	}
	res, err := bench.ReadResult(resultFile)
	if err != nil {
		t.Fatal(err)
	}
	if res.Curve == nil || len(res.Curve.Steps) != 4 || res.Curve.Knee == nil || res.Curve.Knee.Step != 3 || res.Curve.LatencyBoundms != 50 {
		t.Errorf("curve in the result file: %+v", res.Curve)
	}
	if entries, _ := os.ReadDir(lb.dir); len(entries) != 0 {
		t.Errorf("left behind %v", entries)
	}

	lb.fioCalls = 0
	_, stderr, err = runBenchCLI(t, deps, append(common, "--allow-non-nfs", "--profile", "eda-tools", "--out", resultFile)...)
	if err != nil {
		t.Fatalf("eda-tools: err = %v, stderr:\n%s", err, stderr)
	}
	if res, err = bench.ReadResult(resultFile); err != nil {
		t.Fatal(err)
	}
	if res.Provenance.Profile != "eda-tools" || !strings.Contains(stderr, "eda-tools [offered=400/s]") {
		t.Errorf("eda-tools: result profile %q, progress:\n%s", res.Provenance.Profile, stderr)
	}
}

// TestBenchCompareCurves compares two curves recorded on a local directory with the real
// fio: A's knee is higher (147789 against 40391 ops/s), but within a p99 of 1 ms B
// achieved more (15976 against 6398 ops/s).
func TestBenchCompareCurves(t *testing.T) {
	a, b := "testdata/bench/curve-local-a.json", "testdata/bench/curve-local-b.json"
	out, _, err := runBenchCLI(t, defaultBenchDeps(), "bench", "compare", a, b, "--latency-bound", "1ms")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "bench", "compare-curve.golden"), []byte(out))
	out, _, err = runBenchCLI(t, defaultBenchDeps(), "bench", "compare", a, b, "--latency-bound", "5ms", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var cc bench.CurveComparison
	if err := json.Unmarshal([]byte(out), &cc); err != nil {
		t.Fatal(err)
	}
	// Within 5 ms every step counts, the knees too: A is better on both.
	if cc.Knee.Verdict != bench.VerdictWorse || cc.AtBound.Verdict != bench.VerdictWorse || cc.Summary != "A is better" || cc.LatencyBoundms != 5 {
		t.Errorf("at 5 ms: %+v", cc)
	}
	_, _, err = runBenchCLI(t, defaultBenchDeps(), "bench", "compare", a, "testdata/bench/after.json")
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != ExitError2 || !strings.Contains(err.Error(), "load curve") {
		t.Errorf("a curve against a run: err = %v, want exit 2", err)
	}
}

// TestBenchCurvePod runs one fleet pod's curve: its directory <dir>/<job>-<index> on the
// volume of its index, a ready line before the start time is known, one line per step,
// every rate run past the pod's own knee, and the directory removed; a start time already
// past fails the pod with an error line, its directory removed too.
func TestBenchCurvePod(t *testing.T) {
	lb := newLocalBench(t)
	deps := curveDeps(lb)
	if err := os.Mkdir(filepath.Join(lb.dir, "bench"), 0o755); err != nil {
		t.Fatal(err)
	}
	startFile := filepath.Join(t.TempDir(), "start")
	if err := os.WriteFile(startFile, []byte(time.Now().Add(500*time.Millisecond).UTC().Format(time.RFC3339Nano)), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--root", lb.root, "bench", "curve-pod", "--mounts", lb.dir + ",/volumes/1", "--volumes", "data-a,data-b",
		"--dir", "bench", "--job", "curve", "--index", "2", "--node", "node-a", "--start-file", startFile,
		"--rates", "400,1600", "--runtime", "1s", "--ramp", "0s", "--step-period", "1100ms", "--allow-non-nfs"}
	out, stderr, err := runBenchCLI(t, deps, common...)
	if err != nil {
		t.Fatalf("err = %v, stderr:\n%s", err, stderr)
	}
	lines := bench.ParseFleetLines(out)
	if len(lines) != 3 || lines[0].Event != bench.FleetReady || lines[1].Step != 1 || lines[2].Step != 2 {
		t.Fatalf("lines:\n%s", out)
	}
	for _, l := range lines {
		if l.Index != 2 || l.Volume != "data-a" || l.Node != "node-a" || l.Dir != "bench/curve-2" {
			t.Errorf("line %+v, want index 2 on data-a in bench/curve-2", l)
		}
	}
	if r := lines[2].Result; r == nil || r.OfferedIOPS != 1600 || lines[2].Tuning == nil || *lines[2].Tuning.ReadAheadKB != 512 {
		t.Errorf("step 2: %+v, tuning %+v", r, lines[2].Tuning)
	}
	if entries, _ := os.ReadDir(filepath.Join(lb.dir, "bench")); len(entries) != 0 {
		t.Errorf("left behind %v", entries)
	}

	if err := os.WriteFile(startFile, []byte(time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = runBenchCLI(t, deps, common...)
	lines = bench.ParseFleetLines(out)
	if err == nil || len(lines) != 2 || lines[1].Event != bench.FleetError || !strings.Contains(lines[1].Error, "passed") {
		t.Errorf("a start time already past: err %v, lines:\n%s", err, out)
	}
	if entries, _ := os.ReadDir(filepath.Join(lb.dir, "bench")); len(entries) != 0 {
		t.Errorf("left behind %v", entries)
	}

	_, _, err = runBenchCLI(t, deps, "bench", "curve-pod", "--mounts", lb.dir, "--dir", "..", "--job", "curve", "--index", "0",
		"--start-file", startFile, "--step-period", "1m", "--runtime", "1s")
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != ExitError2 || !strings.Contains(err.Error(), "want a subdirectory") {
		t.Errorf("--dir ..: err = %v, want exit 2", err)
	}
}
