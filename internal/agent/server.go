package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nfstune/nfstune/internal/metrics"
)

// DefaultListen is where the agent serves by default: loopback only. A DaemonSet that lets
// Prometheus scrape the node passes the node address with --listen.
const DefaultListen = "127.0.0.1:9477"

// MaxScrapesInFlight is how many /metrics requests are served at once; more get 503 at
// once. Each holds one gathered copy of the metrics while its body is written (overlapping
// scrapes share one), so this, with WriteTimeout, bounds the memory scrapes can hold
// whatever the clients do. Two lets a pair of Prometheus servers scrape the same agent.
const MaxScrapesInFlight = 2

// WriteTimeout bounds the writing of one response, /metrics included: a client that stops
// reading is cut off after it and frees its scrape slot. Encoding a large host on a busy
// CPU takes seconds, so it is well above a scrape's usual duration.
const WriteTimeout = 30 * time.Second

// HandlerOptions configure the HTTP handler.
type HandlerOptions struct {
	// Tier is the set of per-mount series to export; empty means metrics.TierDefault.
	Tier metrics.Tier
	// MaxSeries caps the per-mount series of one scrape; 0 means no cap.
	MaxSeries int
	// ScrapeTimeout bounds the inventory read of one scrape; 0 means 800 ms, so that a
	// scrape answers within a second whatever happens.
	ScrapeTimeout time.Duration
	// ReleaseMemory returns the memory a scrape used to the system right after it
	// (runtime/debug.FreeOSMemory): one extra garbage collection per scrape keeps the
	// resident size of an idle agent near its live heap instead of its scrape peak.
	ReleaseMemory bool
}

// Handler returns the agent's HTTP handler: /metrics (the NFS collector, the agent's own
// metrics and the Go and process collectors), /healthz and /readyz.
func (a *Agent) Handler(opts HandlerOptions) (http.Handler, error) {
	if opts.ScrapeTimeout <= 0 {
		opts.ScrapeTimeout = 800 * time.Millisecond
	}
	reg := prometheus.NewRegistry()
	if err := a.cfg.Metrics.Register(reg); err != nil {
		return nil, fmt.Errorf("registering agent metrics: %w", err)
	}
	nfs := metrics.NewCollector(boundedSource(a.Snapshot), a.cfg.Logger.With("collector", "nfs"),
		metrics.Options{Tier: opts.Tier, MaxSeries: opts.MaxSeries, Timeout: opts.ScrapeTimeout})
	for _, c := range []prometheus.Collector{
		nfs,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering collector: %w", err)
		}
	}

	mux := http.NewServeMux()
	scrapeHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(a.cfg.Logger.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
		// The response is streamed to the client: a scrape holds its slot, and with it the
		// gathered metrics, until its body is written or Serve's WriteTimeout cuts the
		// connection. That bounds what scrapes and clients that never read can pin, which
		// promhttp's Timeout option would not: it buffers the whole body and frees the slot
		// before writing it. Scrapes that overlap share one gather.
		MaxRequestsInFlight: MaxScrapesInFlight,
		CoalesceGather:      true,
	})
	if opts.ReleaseMemory {
		inner := scrapeHandler
		scrapeHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner.ServeHTTP(w, r)
			debug.FreeOSMemory()
		})
	}
	mux.Handle("GET /metrics", firstWriteError(scrapeHandler))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := a.Healthy(time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.Ready() {
			http.Error(w, "first reconcile not done", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux, nil
}

// firstWriteError hands h a ResponseWriter that drops every write after the first one that
// fails: promhttp logs each metric family it cannot send, and a client that stopped reading
// would otherwise cost one log line per family once WriteTimeout passes.
func firstWriteError(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&stickyWriter{ResponseWriter: w}, r)
	})
}

type stickyWriter struct {
	http.ResponseWriter
	failed bool
}

func (w *stickyWriter) Write(p []byte) (int, error) {
	if w.failed {
		return len(p), nil
	}
	n, err := w.ResponseWriter.Write(p)
	w.failed = err != nil
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (w *stickyWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// boundedSource runs src in its own goroutine and gives up when ctx ends, so a read that
// hangs (it should not: it touches only /proc and /sys) or crawls on a saturated CPU cannot
// hold a scrape. Then the last good snapshot is exported instead, with its error logged by
// the collector only if there is none. At most one read runs at a time; a scrape arriving
// while one is still running gets the last snapshot at once instead of piling up goroutines.
func boundedSource(src metrics.Source) metrics.Source {
	busy := make(chan struct{}, 1)
	var mu sync.Mutex
	var last *metrics.Snapshot
	type result struct {
		snap metrics.Snapshot
		err  error
	}
	stale := func(err error) (metrics.Snapshot, error) {
		mu.Lock()
		defer mu.Unlock()
		if last != nil {
			return *last, nil
		}
		return metrics.Snapshot{}, err
	}
	return func(ctx context.Context) (metrics.Snapshot, error) {
		select {
		case busy <- struct{}{}:
		default:
			return stale(errors.New("previous inventory read still running"))
		}
		done := make(chan result, 1)
		go func() {
			defer func() { <-busy }()
			s, err := src(ctx)
			if err == nil {
				mu.Lock()
				last = &s
				mu.Unlock()
			}
			done <- result{s, err}
		}()
		select {
		case r := <-done:
			return r.snap, r.err
		case <-ctx.Done():
			return stale(fmt.Errorf("reading inventory: %w", ctx.Err()))
		}
	}
}

// Serve serves h on ln until ctx ends, then shuts down, giving open requests 5 s.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger) error {
	srv := newServer(h, logger)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("serving", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		return fmt.Errorf("shutting down HTTP server: %w", err)
	}
	return nil
}

// newServer is the agent's HTTP server: every phase of a connection has a deadline, so a
// client that sends slowly, reads slowly or not at all is cut off.
func newServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}
