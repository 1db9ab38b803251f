package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/podio"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/status"
)

func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode
	}
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("decoding %s: %v", url, err)
	}
	return resp.StatusCode
}

// TestStatusAndAudit: /status counts the mounts, the tuned ones and the findings, lists the
// untuned mount, and names the node, the mode and the policy; /audit carries the findings.
func TestStatusAndAudit(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	h.mount("0:50", true)
	h.mount("0:51", true)
	h.setRA("0:51", 4096)
	load := func() (*Policy, error) {
		p, err := fixedPolicy(1024, policy.ModeObserve)()
		if err != nil {
			return nil, err
		}
		p.Info = status.Policy{Name: "cas", File: "/etc/nfstune/policy.yaml", SHA256: "ab12"}
		p.Mode = policy.ModeObserve
		return p, nil
	}
	a, err := New(Config{Root: h.root, PID: 1, Read: h.read, Load: load, Node: "node-a",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.loadPolicy(); err != nil {
		t.Fatal(err)
	}
	a.Reconcile(context.Background(), TriggerStart, time.Now())
	hd, err := a.Handler(HandlerOptions{MinScrapeInterval: time.Hour, ScrapeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hd)
	defer srv.Close()

	var s status.Status
	if code := getJSON(t, srv.URL+status.StatusPath, &s); code != http.StatusOK {
		t.Fatalf("/status: %d", code)
	}
	if s.GatheredAt.IsZero() || s.Policy.LoadedAt.IsZero() {
		t.Errorf("gatheredAt %v, policy loadedAt %v: want both set", s.GatheredAt, s.Policy.LoadedAt)
	}
	s.GatheredAt, s.Policy.LoadedAt = time.Time{}, time.Time{}
	want := status.Status{
		APIVersion: status.APIVersion, Kind: status.KindStatus, Node: "node-a", Version: "dev",
		Ready: true, Mode: "observe",
		Policy:   status.Policy{Name: "cas", File: "/etc/nfstune/policy.yaml", SHA256: "ab12"},
		Mounts:   2,
		Tuned:    1,
		Untuned:  []status.Mount{{Device: "0:50", MountPoint: "/mnt/0:50", Server: "files.example", Export: "/x", ReadAheadKB: 128, WantKB: 1024, Mode: "observe"}},
		Findings: status.Findings{Warning: 1},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("/status (-want +got):\n%s", diff)
	}

	var doc status.Audit
	if code := getJSON(t, srv.URL+status.AuditPath, &doc); code != http.StatusOK {
		t.Fatalf("/audit: %d", code)
	}
	if doc.Kind != status.KindAudit || doc.Node != "node-a" || len(doc.Mounts) != 2 ||
		len(doc.Findings) != 1 || doc.Findings[0].Device != "0:50" {
		t.Errorf("/audit = %+v; want node-a, 2 mounts and the finding on 0:50", doc)
	}
}

// TestStatusSharesScrapeReads: /metrics, /status and /audit within the minimum scrape
// interval read the host once between them.
func TestStatusSharesScrapeReads(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	h.mount("0:50", true)
	var reads atomic.Int32
	a, err := New(Config{Root: h.root, PID: 1,
		Read: func(ctx context.Context) (*inventory.Inventory, error) {
			reads.Add(1)
			return h.read(ctx)
		},
		ReconcileRead: h.read,
		Load:          fixedPolicy(1024, policy.ModeObserve),
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.loadPolicy(); err != nil {
		t.Fatal(err)
	}
	hd, err := a.Handler(HandlerOptions{MinScrapeInterval: time.Hour, ScrapeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hd)
	defer srv.Close()
	for _, p := range []string{"/metrics", status.StatusPath, status.AuditPath, status.StatusPath} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", p, resp.StatusCode)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("%d reads of the host, want 1", n)
	}
}

// TestStatusReadError: a host that cannot be read still gets a /status, saying why, and a
// 503 for /audit.
func TestStatusReadError(t *testing.T) {
	t.Parallel()
	a, err := New(Config{PID: 1,
		Read: func(context.Context) (*inventory.Inventory, error) {
			return nil, os.ErrPermission
		},
		Load:   fixedPolicy(1024, policy.ModeEnforce),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hd, err := a.Handler(HandlerOptions{ScrapeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hd)
	defer srv.Close()
	var s status.Status
	if code := getJSON(t, srv.URL+status.StatusPath, &s); code != http.StatusOK {
		t.Fatalf("/status: %d", code)
	}
	if s.ReadError == "" || s.Ready || s.Mode != "enforce" {
		t.Errorf("/status = %+v; want a read error, not ready, enforce", s)
	}
	if code := getJSON(t, srv.URL+status.AuditPath, &status.Audit{}); code != http.StatusServiceUnavailable {
		t.Errorf("/audit: %d, want 503", code)
	}
}

// TestLimitInFlight: past the slots, requests get 503 at once.
func TestLimitInFlight(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, MaxStatusInFlight)
	h := limitInFlight(make(chan struct{}, MaxStatusInFlight), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		started <- struct{}{}
		<-release
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	done := make(chan struct{})
	for range MaxStatusInFlight {
		go func() {
			if resp, err := http.Get(srv.URL); err == nil {
				resp.Body.Close()
			}
			done <- struct{}{}
		}()
	}
	for range MaxStatusInFlight {
		<-started
	}
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("request past the slots: %d, want 503", resp.StatusCode)
	}
	close(release)
	for range MaxStatusInFlight {
		<-done
	}
}

// TestLoadPolicyInfo: the policy's name, file and the SHA-256 of its bytes are reported, and
// the policy's own default mode.
func TestLoadPolicyInfo(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	body := "apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults:\n  mode: observe\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(path, "cas", false)
	if err != nil {
		t.Fatal(err)
	}
	// sha256sum of body.
	const sum = "22483bbd24d29230d3fdba52c4744773d3e25a8401bf20adc68225cacb179c12"
	if p.Info.Name != "cas" || p.Info.File != path || p.Info.SHA256 != sum || p.Mode != policy.ModeObserve {
		t.Errorf("info %+v, mode %s; want cas, %s, %s, observe", p.Info, p.Mode, path, sum)
	}
	if p, err = LoadPolicy("", "", false); err != nil || p.Info.SHA256 != "" || p.Mode != policy.ModeEnforce {
		t.Errorf("built-in: %+v, %s, %v; want no hash, enforce", p.Info, p.Mode, err)
	}
}

// TestPodTrafficAndMappedReaders: /status lists the pairs with traffic in the last
// interval, busiest first, with the mount's names, and says which parts are missing; the
// audit's mapped readers are the pods with fault reads, busiest first, without the node.
func TestPodTrafficAndMappedReaders(t *testing.T) {
	inv := &inventory.Inventory{Mounts: []inventory.Mount{{Device: "0:66", MountPoints: []string{"/mnt/a"}, Server: "nas", Export: "/a"}}}
	snap := &podio.Snapshot{Loaded: true, Missing: map[podio.Part]string{podio.PartFaults: "no trampolines"}, Rates: map[podio.PodKey]podio.Rates{
		{PodUID: "quiet", Device: "0:66"}:  {},
		{PodUID: "reader", Device: "0:66"}: {ReadBytes: 5 << 20, ServerReadBytes: 5 << 20},
		{PodUID: "mapper", Device: "0:66"}: {ServerReadBytes: 40 << 20, FaultReadBytes: 40 << 20, MajorFaults: 600},
		{PodUID: "small", Device: "0:66"}:  {ServerReadBytes: 1 << 20, FaultReadBytes: 1 << 20},
		{PodUID: "", Device: "0:66"}:       {ServerReadBytes: 9 << 20, FaultReadBytes: 9 << 20},
	}}
	st := podTraffic(snap, inv)
	if st.Why != "faults not loaded: no trampolines" {
		t.Errorf("why %q", st.Why)
	}
	var order []string
	for _, p := range st.Pods {
		order = append(order, p.PodUID)
		if p.MountPoint != "/mnt/a" || p.Server != "nas" {
			t.Errorf("pod %q: mount %q on %q, want /mnt/a on nas", p.PodUID, p.MountPoint, p.Server)
		}
	}
	if want := []string{"mapper", "", "reader", "small"}; !slices.Equal(order, want) {
		t.Errorf("pods %q, want %q (busiest first, the quiet one left out)", order, want)
	}
	readers := mappedReaders(snap)["0:66"]
	if len(readers) != 2 || readers[0].PodUID != "mapper" || readers[1].PodUID != "small" || readers[0].MajorFaultsPerSecond != 600 {
		t.Errorf("mapped readers %+v, want mapper then small, not the node", readers)
	}
	if podTraffic(nil, inv) != nil || mappedReaders(nil) != nil {
		t.Error("without the collector: a status or readers")
	}
}
