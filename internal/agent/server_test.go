package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/inventory/inventorytest"
	"github.com/nfstune/nfstune/internal/metrics"
	"github.com/nfstune/nfstune/internal/policy"
)

// TestSlowReadersBounded opens ten connections that request /metrics and never read the
// answer, on a host whose exposition is far larger than what the kernel buffers for a
// connection. A scrape must hold its slot until its body is written, so the heap holds at
// most the gathered metrics of the scrapes in flight (not one whole body per client), the
// scrapes past MaxScrapesInFlight get 503, and the write deadline frees the slots, each
// cut-off scrape logging one error. Not parallel: it measures the process's heap.
func TestSlowReadersBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a 100-mount synthetic tree")
	}
	var logs syncBuffer
	root := hostfs.Root(t.TempDir())
	if err := inventorytest.GenerateTree(string(root), 100); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{
		Root: root, PID: 1,
		Read: func(context.Context) (*inventory.Inventory, error) {
			return inventory.Read(root, inventory.ReadOptions{PID: 1})
		},
		Load:   builtinPolicy(policy.ModeObserve),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	// A loaded machine may take seconds to read the tree; the test is about writing.
	h, err := a.Handler(HandlerOptions{Tier: metrics.TierFull, ScrapeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config = newServer(h, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if srv.Config.WriteTimeout <= 0 || srv.Config.ReadHeaderTimeout <= 0 {
		t.Fatalf("server without deadlines: write %v, read header %v", srv.Config.WriteTimeout, srv.Config.ReadHeaderTimeout)
	}
	// WriteTimeout, shortened for the test; a loaded machine still writes a scrape in it.
	const writeTimeout = 10 * time.Second
	srv.Config.WriteTimeout = writeTimeout
	srv.Start()
	defer srv.Close()

	scrape := func() (int, int64) {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, n
	}
	code, size := scrape()
	if code != http.StatusOK || size < 6<<20 {
		t.Fatalf("first scrape: %d, %d bytes; want 200 and more than 6 MiB", code, size)
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := heap()

	start := time.Now()
	for range 10 {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: agent\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	var peak uint64
	for time.Since(start) < writeTimeout*3/4 {
		peak = max(peak, heap())
		time.Sleep(250 * time.Millisecond)
	}
	// One gathered copy of the metrics takes about twice the text it encodes to; the bound
	// leaves room for two copies (scrapes that do not overlap), and is half of ten bodies.
	if grew := int64(peak) - int64(base); grew > 5*size {
		t.Errorf("heap grew by %.1f MiB with 10 clients that never read, want at most %.1f MiB (five %.1f MiB expositions)",
			float64(grew)/(1<<20), float64(5*size)/(1<<20), float64(size)/(1<<20))
	}
	if code, _ := scrape(); code != http.StatusServiceUnavailable {
		t.Errorf("scrape while %d scrapes wait on clients that never read: %d, want 503", MaxScrapesInFlight, code)
	}
	// Past the deadline the cut-off scrapes still encode the rest of the body into nothing,
	// which takes a loaded machine a few seconds; then their slots are free.
	time.Sleep(time.Until(start.Add(writeTimeout)))
	for code, _ := scrape(); code != http.StatusOK; code, _ = scrape() {
		if time.Since(start) > writeTimeout+20*time.Second {
			t.Fatalf("scrape 20 s after the write deadline: %d, want 200", code)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "error encoding and sending"); n == 0 || n > MaxScrapesInFlight {
		t.Errorf("%d write errors logged for %d cut-off scrapes, want one each:\n%s", n, MaxScrapesInFlight, logs.String())
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
