//go:build lab

package labtest

// Adaptive read-ahead on the real kernel: `nfstune agent` with a readAheadAdaptive rule over
// every lab mount changes their read-ahead, journaled; `nfstune revert` afterwards puts every
// bdi back exactly.

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bdiValues reads read_ahead_kb of every bdi.
func bdiValues(t *testing.T) map[string]string {
	t.Helper()
	dirs, err := filepath.Glob("/sys/class/bdi/*")
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(dirs))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "read_ahead_kb"))
		if err != nil {
			continue // a bdi going away
		}
		out[filepath.Base(d)] = strings.TrimSpace(string(b))
	}
	return out
}

// TestAdaptiveRevert: the agent's adaptive read-ahead moves the lab's mounts into their
// bounds (from 128 KiB up to one rsize at least) and the test mount's under a sequential
// reader; the metrics count the changes; after the agent stops, `nfstune revert` restores
// every bdi's read_ahead_kb exactly as it was before the agent started.
func TestAdaptiveRevert(t *testing.T) {
	RequireGuest(t)
	m := Mount(t, MountSpec{Version: "4.2", Options: "rsize=1048576"})
	files := layout(t, m.Dir, 4, 32)
	setReadAheadKB(t, m.Device, 128)
	Link(t, 2*time.Millisecond, "", 0)
	before := bdiValues(t)

	cfg := filepath.Join(t.TempDir(), "policy.yaml")
	policy := "apiVersion: nfstune.io/v1alpha1\nkind: Policy\nrules:\n  - match: {mountpoint: \"" + MountBase + "/*\"}\n    readAheadAdaptive: {interval: 2s}\n"
	if err := os.WriteFile(cfg, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := StartAgent(t, "--config", cfg, "--listen", "127.0.0.1:9480", "--log-level", "debug")
	t.Cleanup(func() {
		stop()
		RunNfstune(t, "revert")
	})
	StartReaders(t, "", SeqReaderLoop(files))

	// Into the bounds at the first step, then at least one step on the reader's evidence
	// or its hold: wait for the test mount to leave 128 KiB and for 20 s of steps.
	deadline := time.Now().Add(2 * time.Minute)
	for ReadAheadKB(t, m.Device) == 128 {
		if time.Now().After(deadline) {
			t.Fatalf("read_ahead_kb of %s still 128 KiB after 2 min", m.Device)
		}
		time.Sleep(time.Second)
	}
	time.Sleep(20 * time.Second)
	// The rsize in effect: the 1 MiB asked for, or less when nfsd's maximum is smaller (it
	// depends on the guest's free memory when nfsd starts).
	if got, rsize := ReadAheadKB(t, m.Device), rsizeKB(t, m.Device); got < rsize {
		t.Errorf("read_ahead_kb of %s = %d under the adaptive rule, want at least one rsize (%d)", m.Device, got, rsize)
	}
	// A scrape bounds its read of the inventory (800 ms); under emulation the first ones
	// may export no mount at all.
	var body string
	target := `nfstune_mount_readahead_adaptive_target_bytes{backend="generic",device="` + m.Device + `"`
	for range 30 {
		if body = scrape(t, "http://127.0.0.1:9480/metrics"); strings.Contains(body, target) {
			break
		}
		time.Sleep(time.Second)
	}
	// The move into the bounds is the reconcile's start of the superblock (repairs, reason
	// new); the controller's own steps are adaptive changes.
	changes := 0.0
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, "nfstune_agent_readahead_adaptive_changes_total{") || strings.HasPrefix(line, `nfstune_agent_repairs_total{reason="new"}`) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			changes += v
		}
	}
	if changes == 0 {
		t.Errorf("no adaptive change nor start counted:\n%s", body)
	}
	if !strings.Contains(body, target) {
		t.Errorf("no adaptive target for %s in /metrics after 30 scrapes", m.Device)
	}
	stop()
	changed := bdiValues(t)
	n := 0
	for dev, v := range before {
		if changed[dev] != v {
			n++
			t.Logf("%s: %s -> %s KiB", dev, v, changed[dev])
		}
	}
	if n < 2 {
		t.Errorf("the agent changed %d bdis, want the test mount's and the scenario's", n)
	}
	r := RunNfstune(t, "revert")
	if r.Code != 0 {
		t.Fatalf("revert exited %d: %s", r.Code, r.Stderr)
	}
	after := bdiValues(t)
	for dev, v := range before {
		if after[dev] != v {
			t.Errorf("%s: read_ahead_kb %s after revert, want %s", dev, after[dev], v)
		}
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAdaptiveLearnedStart: with a value learned for a volume (the agent's learned.json),
// the agent starts the volume's superblocks there: one that exists when it starts, and one
// mounted while it runs, whose read-ahead goes from the kernel's 128 KiB to the learned
// value (4 rsizes) without passing the rule's bound (one rsize). `nfstune revert` puts both
// back.
func TestAdaptiveLearnedStart(t *testing.T) {
	RequireGuest(t)
	spec := MountSpec{Server: "127.0.0.2", Version: "4.2", Options: "rsize=1048576,nosharecache"}
	m := Mount(t, spec)
	setReadAheadKB(t, m.Device, 128)
	server, export, _ := strings.Cut(m.Source, ":")
	// Inside the rule's bounds (one rsize to 15 x rsize; nfsd may grant less than 1 MiB),
	// and neither bound.
	rsize := rsizeKB(t, m.Device)
	want := 4 * rsize
	const learned = "/var/lib/nfstune/learned.json"
	if err := os.MkdirAll(filepath.Dir(learned), 0o700); err != nil {
		t.Fatal(err)
	}
	doc := `{"volumes": [{"server": "` + server + `", "export": "` + export + `", "readAheadKB": ` + strconv.Itoa(want) + `, "at": "2026-12-01T00:00:00Z"}]}`
	if err := os.WriteFile(learned, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(learned) })

	cfg := filepath.Join(t.TempDir(), "policy.yaml")
	policy := "apiVersion: nfstune.io/v1alpha1\nkind: Policy\nrules:\n  - match: {server: \"" + server + "\"}\n    readAheadAdaptive: {interval: 2s}\n"
	if err := os.WriteFile(cfg, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := StartAgent(t, "--config", cfg, "--listen", "127.0.0.1:9481", "--log-level", "debug")
	t.Cleanup(func() {
		stop()
		RunNfstune(t, "revert")
	})

	// seen polls dev's read-ahead until it is want, for up to a minute, and returns the
	// values it went through.
	seen := func(dev string, want int) []int {
		var values []int
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			kb := ReadAheadKB(t, dev)
			if len(values) == 0 || values[len(values)-1] != kb {
				values = append(values, kb)
			}
			if kb == want {
				return values
			}
		}
		t.Fatalf("read_ahead_kb of %s went through %v in a minute, never %d KiB", dev, values, want)
		return nil
	}
	if v := seen(m.Device, want); len(v) != 2 || v[0] != 128 {
		t.Errorf("the superblock there at the start went through %v KiB, want 128 then the learned %d", v, want)
	}
	m2 := Mount(t, spec)
	if m2.Device == m.Device {
		t.Fatalf("nosharecache gave no superblock of its own: %s", m2.Device)
	}
	v2 := seen(m2.Device, want)
	if slices.Contains(v2, rsize) {
		t.Errorf("the new superblock went through %v KiB: the bound (%d) before the learned %d", v2, rsize, want)
	}
	stop()
	if r := RunNfstune(t, "revert"); r.Code != 0 {
		t.Fatalf("revert exited %d: %s", r.Code, r.Stderr)
	}
	// Both back at the kernel's 128 KiB: the agent journals a new superblock's start before
	// it writes it, often before this test's first look at the new one.
	for dev, want := range map[string]int{m.Device: 128, m2.Device: 128} {
		if kb := ReadAheadKB(t, dev); kb != want {
			t.Errorf("%s: read_ahead_kb %d after revert, want %d", dev, kb, want)
		}
	}
}
