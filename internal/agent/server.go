package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/nfstune/nfstune/internal/metrics"
	"github.com/nfstune/nfstune/internal/status"
)

// DefaultListen is where the agent serves by default: loopback only. A DaemonSet that lets
// Prometheus scrape the node passes the node address with --listen.
const DefaultListen = "127.0.0.1:9477"

// MaxScrapesInFlight is how many /metrics requests are served at once; more get 503 at
// once. Each holds one gathered copy of the metrics while its body is written (overlapping
// scrapes, and those within DefaultMinScrapeInterval, share one), so this, with
// WriteTimeout, bounds the memory scrapes can hold whatever the clients do. One client
// address holds at most one of them (MaxScrapesPerClient), so a pair of Prometheus
// servers still scrapes while two other clients hold a slot each and never read.
const MaxScrapesInFlight = 4

// MaxScrapesPerClient is how many /metrics requests one client address has in flight; a
// second concurrent one gets 503. A Prometheus server scrapes a target one request at a
// time.
const MaxScrapesPerClient = 1

// MaxConnections caps the open connections of the HTTP server; past it (and the probes'
// reserve, ProbeConnections) new connections wait in the kernel's accept queue. Each costs
// a goroutine and its buffers (about 20 KiB idle), so it bounds what idle clients can pin:
// 5,000 idle keep-alive connections took the agent from 19 to 115 MiB before. Prometheus,
// kubelet's probes and a few people with curl need far fewer.
const MaxConnections = 64

// WriteTimeout bounds the writing of one response, /metrics included: a client that stops
// reading is cut off after it and frees its scrape slot. Encoding a large host on a busy
// CPU takes seconds, so it is well above a scrape's usual duration.
const WriteTimeout = 30 * time.Second

// IdleTimeout closes a keep-alive connection that sends no request for that long, and
// ReadTimeout bounds the reading of a request (headers included: no request to the agent
// has a body), so a connection that sends nothing does not keep its place below
// MaxConnections. Prometheus reconnects for each scrape when its interval is longer,
// which costs a TCP handshake.
const (
	IdleTimeout = 5 * time.Second
	ReadTimeout = 5 * time.Second
)

// DefaultMinScrapeInterval is how long the metrics of one gather are served to every
// scrape (HandlerOptions.MinScrapeInterval): a client scraping in a loop reads the host,
// audits and gathers once per interval, not once per request.
const DefaultMinScrapeInterval = 5 * time.Second

// HandlerOptions configure the HTTP handler.
type HandlerOptions struct {
	// Tier is the set of per-mount series to export; empty means metrics.TierDefault.
	Tier metrics.Tier
	// MaxSeries caps the per-mount series of one scrape; 0 means no cap.
	MaxSeries int
	// ScrapeTimeout bounds the inventory read of one scrape; 0 means 800 ms, so that a
	// scrape answers within a second whatever happens.
	ScrapeTimeout time.Duration
	// MinScrapeInterval is how long one gather of the metrics answers every scrape: the
	// host is read, audited and gathered at most once per interval whatever the clients
	// do. 0 gathers for every scrape.
	MinScrapeInterval time.Duration
	// ReleaseMemory returns the memory a scrape used to the system once it is no longer
	// served (runtime/debug.FreeOSMemory): right after the scrape, or when its gather
	// expires after MinScrapeInterval. One extra garbage collection per gather keeps the
	// resident size of an idle agent near its live heap instead of its scrape peak.
	ReleaseMemory bool
}

// MaxStatusInFlight is how many /status and /audit requests are served at once; more get
// 503 at once.
const MaxStatusInFlight = 4

// Handler returns the agent's HTTP handler: /metrics (the NFS collector, the agent's own
// metrics and the Go and process collectors), /healthz, /readyz, and the JSON documents
// /status and /audit (package status).
func (a *Agent) Handler(opts HandlerOptions) (http.Handler, error) {
	if opts.ScrapeTimeout <= 0 {
		opts.ScrapeTimeout = 800 * time.Millisecond
	}
	reg := prometheus.NewRegistry()
	if err := a.cfg.Metrics.Register(reg); err != nil {
		return nil, fmt.Errorf("registering agent metrics: %w", err)
	}
	read := boundedSource(a.read, opts.MinScrapeInterval)
	snapshot := func(ctx context.Context) (metrics.Snapshot, error) {
		v, err := read(ctx)
		if err != nil {
			return metrics.Snapshot{}, err
		}
		return v.snap, nil
	}
	nfs := metrics.NewCollector(snapshot, a.cfg.Logger.With("collector", "nfs"),
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
	gatherer := prometheus.ToTransactionalGatherer(reg)
	release := opts.ReleaseMemory
	if opts.MinScrapeInterval > 0 {
		gatherer = newCachedGatherer(reg, opts.MinScrapeInterval, release)
		release = false // the cache releases when its gather expires
	}
	scrapeHandler := promhttp.HandlerForTransactional(gatherer, promhttp.HandlerOpts{
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
	if release {
		inner := scrapeHandler
		scrapeHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner.ServeHTTP(w, r)
			debug.FreeOSMemory()
		})
	}
	mux.Handle("GET /metrics", onePerClient(firstWriteError(scrapeHandler), MaxScrapesPerClient))
	mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		if err := a.Healthy(time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET "+ReadyPath, func(w http.ResponseWriter, _ *http.Request) {
		if !a.Ready() {
			http.Error(w, "first reconcile not done", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	// /status and /audit share the reads of /metrics and hold slots of their own: through
	// the API server's pod proxy every user comes from the API server's address, so a
	// per-address limit would be one for the whole cluster.
	slots := make(chan struct{}, MaxStatusInFlight)
	readFor := func(r *http.Request) (*view, error) {
		ctx, cancel := context.WithTimeout(r.Context(), opts.ScrapeTimeout)
		defer cancel()
		return read(ctx)
	}
	mux.Handle("GET "+status.StatusPath, limitInFlight(slots, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := readFor(r)
		writeJSON(w, a.status(v, err, time.Now()))
	})))
	mux.Handle("GET "+status.AuditPath, limitInFlight(slots, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := readFor(r)
		if err != nil {
			http.Error(w, "reading NFS inventory: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, a.audit(v))
	})))
	return mux, nil
}

// cachedGatherer answers every Gather within interval of the last one that ran with that
// one's metrics. Gathers that arrive while one runs wait for it (as promhttp's
// CoalesceGather does). When the metrics expire they are dropped, and with release their
// memory is returned to the system.
type cachedGatherer struct {
	g        prometheus.Gatherer
	interval time.Duration
	release  bool

	mu  sync.Mutex
	gen int // counts gathers, so that an old expiry leaves a newer gather alone
	mfs []*dto.MetricFamily
	err error
	ok  bool // mfs and err are a gather younger than interval
}

func newCachedGatherer(g prometheus.Gatherer, interval time.Duration, release bool) *cachedGatherer {
	return &cachedGatherer{g: g, interval: interval, release: release}
}

// Gather implements prometheus.TransactionalGatherer. The families are shared between
// scrapes and must not be changed (promhttp only reads them); each caller gets its own
// slice.
func (c *cachedGatherer) Gather() ([]*dto.MetricFamily, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ok {
		c.mfs, c.err = c.g.Gather()
		c.ok = true
		c.gen++
		gen := c.gen
		time.AfterFunc(c.interval, func() { c.expire(gen) })
	}
	return slices.Clone(c.mfs), func() {}, c.err
}

func (c *cachedGatherer) expire(gen int) {
	c.mu.Lock()
	if c.gen != gen {
		c.mu.Unlock()
		return
	}
	c.mfs, c.err, c.ok = nil, nil, false
	c.mu.Unlock()
	if c.release {
		debug.FreeOSMemory()
	}
}

// limitInFlight answers 503 to a request while every slot is taken.
func limitInFlight(slots chan struct{}, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
		default:
			http.Error(w, "too many requests in flight, try again later", http.StatusServiceUnavailable)
			return
		}
		defer func() { <-slots }()
		h.ServeHTTP(w, r)
	})
}

// writeJSON writes v as indented JSON; an encoding error can only be the client's
// connection, which the server's deadlines already cut.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// onePerClient answers 503 to a request while limit requests of the same client address
// are in flight, so that a few clients that never read cannot hold every scrape slot.
func onePerClient(h http.Handler, limit int) http.Handler {
	var mu sync.Mutex
	inFlight := map[string]int{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			client = r.RemoteAddr
		}
		mu.Lock()
		if inFlight[client] >= limit {
			mu.Unlock()
			http.Error(w, "a scrape from this address is in flight, try again later", http.StatusServiceUnavailable)
			return
		}
		inFlight[client]++
		mu.Unlock()
		defer func() {
			mu.Lock()
			if inFlight[client]--; inFlight[client] == 0 {
				delete(inFlight, client)
			}
			mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
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
// hold a scrape. Then the last good result is served instead, with its error logged by
// the collector only if there is none. At most one read runs at a time; a request arriving
// while one is still running gets the last result at once instead of piling up goroutines.
// A result younger than fresh is served again without a read, so that /metrics, /status
// and /audit within the minimum scrape interval share one read of the host.
func boundedSource[T any](src func(context.Context) (T, error), fresh time.Duration) func(context.Context) (T, error) {
	busy := make(chan struct{}, 1)
	var mu sync.Mutex
	var last *T
	var lastAt time.Time
	type result struct {
		v   T
		err error
	}
	stale := func(err error) (T, error) {
		mu.Lock()
		defer mu.Unlock()
		if last != nil {
			return *last, nil
		}
		var zero T
		return zero, err
	}
	return func(ctx context.Context) (T, error) {
		if fresh > 0 {
			mu.Lock()
			if last != nil && time.Since(lastAt) < fresh {
				v := *last
				mu.Unlock()
				return v, nil
			}
			mu.Unlock()
		}
		select {
		case busy <- struct{}{}:
		default:
			return stale(errors.New("previous inventory read still running"))
		}
		done := make(chan result, 1)
		go func() {
			// Fresh from when the read began, as the gather cache of /metrics counts.
			start := time.Now()
			v, err := src(ctx)
			if err == nil {
				mu.Lock()
				last, lastAt = &v, start
				mu.Unlock()
			}
			// Free before the result is delivered: the caller's next read, back to back,
			// must not find this one still running.
			<-busy
			done <- result{v, err}
		}()
		select {
		case r := <-done:
			return r.v, r.err
		case <-ctx.Done():
			return stale(fmt.Errorf("reading inventory: %w", ctx.Err()))
		}
	}
}

// Serve serves h on ln, at most MaxConnections connections at a time and ProbeConnections
// more for /healthz and /readyz alone, until ctx ends, then shuts down, giving open
// requests 5 s.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger) error {
	srv := newServer(probesOnReserve(h), logger)
	srv.ConnContext = connContext
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(newLimitListener(ln, MaxConnections, ProbeConnections)) }()
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
// client that sends slowly, reads slowly, not at all, or idles is cut off.
func newServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}
