package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/inventory/inventorytest"
	"github.com/nfstune/nfstune/internal/metrics"
	"github.com/nfstune/nfstune/internal/policy"
)

// TestScrapesWithinIntervalReadOnce scrapes in a loop: the host is read once per
// MinScrapeInterval, not once per scrape, and again once the interval has passed.
func TestScrapesWithinIntervalReadOnce(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		interval  time.Duration
		pause     time.Duration // between the two halves of the scrapes
		wantReads int32
	}{
		{interval: time.Minute, wantReads: 1},
		{interval: 200 * time.Millisecond, pause: 500 * time.Millisecond, wantReads: 2},
		{interval: 0, wantReads: 20}, // no cache: a read per scrape
	} {
		var reads atomic.Int32
		a, err := New(Config{
			Root: hostfs.Root(t.TempDir()), PID: 1,
			Read: func(context.Context) (*inventory.Inventory, error) {
				reads.Add(1)
				return &inventory.Inventory{}, nil
			},
			Load: builtinPolicy(policy.ModeObserve),
		})
		if err != nil {
			t.Fatal(err)
		}
		h, err := a.Handler(HandlerOptions{MinScrapeInterval: tt.interval})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if i == 10 {
				time.Sleep(tt.pause)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("scrape: %d", rec.Code)
			}
		}
		if n := reads.Load(); n != tt.wantReads {
			t.Errorf("interval %v: 20 scrapes, %v apart in the middle, read the host %d times, want %d", tt.interval, tt.pause, n, tt.wantReads)
		}
	}
}

// TestClientsThatNeverReadLeavePrometheusASlot: two clients on other addresses request
// /metrics and never read, and a third connection from one of them is refused at once;
// Prometheus, on its own address, still gets its scrape.
func TestClientsThatNeverReadLeavePrometheusASlot(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a 100-mount synthetic tree")
	}
	root := hostfs.Root(t.TempDir())
	if err := inventorytest.GenerateTree(string(root), 100); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{
		Root: root, PID: 1,
		Read: func(context.Context) (*inventory.Inventory, error) {
			return inventory.Read(root, inventory.ReadOptions{PID: 1})
		},
		Load: builtinPolicy(policy.ModeObserve),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The full tier: a body far larger than what loopback buffers, so a client that does
	// not read keeps its scrape in flight.
	h, err := a.Handler(HandlerOptions{Tier: metrics.TierFull, ScrapeTimeout: time.Minute, MinScrapeInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = Serve(ctx, ln, h, slog.New(slog.DiscardHandler)) }()
	addr := ln.Addr().String()

	get := func(from string) string {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		cl := http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: d.DialContext}}
		resp, err := cl.Get("http://" + addr + "/metrics")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err.Error()
		}
		return fmt.Sprint(resp.StatusCode)
	}
	if got := get("127.0.0.2"); got != "200" {
		t.Fatalf("first scrape: %s", got)
	}
	stall := func(from string) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: agent\r\n\r\n")
	}
	stall("127.0.0.1")
	stall("127.0.0.3")
	time.Sleep(time.Second) // their scrapes start and fill the buffers
	if got := get("127.0.0.1"); got != "503" {
		t.Errorf("second scrape from an address with one in flight: %s, want 503", got)
	}
	if got := get("127.0.0.2"); got != "200" {
		t.Errorf("Prometheus's scrape while two other clients never read: %s, want 200", got)
	}
}

// TestServeBoundsConnections holds MaxConnections connections and the probes' reserve
// that send nothing: the next client waits, and is served once a deadline has closed one
// of them (a reserved connection's, ProbeConnLifetime).
func TestServeBoundsConnections(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = Serve(ctx, ln, h, slog.New(slog.DiscardHandler)) }()
	for range MaxConnections + ProbeConnections {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	time.Sleep(200 * time.Millisecond) // accepted
	start := time.Now()
	cl := http.Client{Timeout: ReadTimeout + 10*time.Second}
	resp, err := cl.Get("http://" + ln.Addr().String() + HealthPath)
	if err != nil {
		t.Fatalf("request after the idle connections were cut: %v", err)
	}
	resp.Body.Close()
	if waited := time.Since(start); waited < ProbeConnLifetime/2 {
		t.Errorf("served after %v with %d connections open, want it to wait for a reserved connection's deadline (%v)", waited, MaxConnections+ProbeConnections, ProbeConnLifetime)
	}
}

// TestProbesAnswerAtConnectionCap fills the connection cap with /metrics clients that hold
// their connections (the handler waits until the test ends, as a client reading slowly
// keeps its response unwritten): /healthz and /readyz still answer, on the probes' reserve,
// while those clients hold every slot, and anything else there gets 503 at once. Without
// the reserve a probe waits in the accept queue until a slot frees, here never, and fails.
func TestProbesAnswerAtConnectionCap(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var held atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		held.Add(1)
		<-release
		fmt.Fprintln(w, "metrics")
	})
	for _, p := range []string{HealthPath, ReadyPath} {
		mux.HandleFunc("GET "+p, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	t.Cleanup(func() { close(release) }) // runs first
	go func() { _ = Serve(ctx, ln, mux, slog.New(slog.DiscardHandler)) }()
	addr := ln.Addr().String()
	for range MaxConnections {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: agent\r\n\r\n")
	}
	for deadline := time.Now().Add(30 * time.Second); held.Load() < MaxConnections; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d /metrics requests started", held.Load(), MaxConnections)
		}
	}
	// A generous bound: the point is that the probe is answered at all while the slots are
	// held, not how fast.
	cl := http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(p string) string {
		resp, err := cl.Get("http://" + addr + p)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		return fmt.Sprint(resp.StatusCode)
	}
	for _, p := range []string{HealthPath, ReadyPath, HealthPath} {
		if got := get(p); got != "200" {
			t.Errorf("%s with every slot held by /metrics: %s, want 200", p, got)
		}
	}
	if got := get("/metrics"); got != "503" {
		t.Errorf("/metrics on the probes' reserve: %s, want 503", got)
	}
	if n := held.Load(); n != MaxConnections {
		t.Errorf("%d /metrics requests served, want the %d of the slots only", n, MaxConnections)
	}
}

// TestServerClosesIdleConnections: a keep-alive connection that sends nothing more is
// closed after IdleTimeout, which is short.
func TestServerClosesIdleConnections(t *testing.T) {
	t.Parallel()
	srv := newServer(http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	if srv.IdleTimeout <= 0 || srv.IdleTimeout > 10*time.Second || srv.ReadTimeout <= 0 || srv.ReadTimeout > 10*time.Second {
		t.Errorf("idle timeout %v, read timeout %v; want both set and at most 10 s", srv.IdleTimeout, srv.ReadTimeout)
	}
}
