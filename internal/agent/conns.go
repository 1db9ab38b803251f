package agent

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Probe paths: kubelet's liveness and readiness probes (the chart's DaemonSet).
const (
	HealthPath = "/healthz"
	ReadyPath  = "/readyz"
)

// ProbeConnections is how many connections the server accepts past MaxConnections, for
// /healthz and /readyz only: kubelet probes with a timeout of 2 s (the chart), and at the
// connection cap a probe would otherwise wait in the accept queue behind clients that
// take /metrics slowly (up to WriteTimeout), fail, and get the agent restarted for what its
// clients do. Any other request on one of these connections gets 503 at once.
const ProbeConnections = 4

// ProbeConnLifetime bounds a connection of the probe reserve from its accept: reading its
// request and writing its answer, which are a few hundred bytes. A client that holds one
// and sends nothing frees it after this, not after ReadTimeout.
const ProbeConnLifetime = time.Second

// limitListener accepts at most MaxConnections connections at a time, then at most
// ProbeConnections more for the probes (reserved ones); past both, Accept waits and new
// connections wait in the kernel's accept queue, as with netutil.LimitListener.
type limitListener struct {
	net.Listener
	slots, reserve chan struct{}
	done           chan struct{}
	closeOnce      sync.Once
}

func newLimitListener(ln net.Listener, max, reserve int) *limitListener {
	return &limitListener{
		Listener: ln,
		slots:    make(chan struct{}, max),
		reserve:  make(chan struct{}, reserve),
		done:     make(chan struct{}),
	}
}

// Accept takes a slot, a reserve slot when every slot is taken, then a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	var sem chan struct{}
	select {
	case l.slots <- struct{}{}:
		sem = l.slots
	default:
		select {
		case l.slots <- struct{}{}:
			sem = l.slots
		case l.reserve <- struct{}{}:
			sem = l.reserve
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-sem
		return nil, err
	}
	lc := &limitedConn{Conn: c, release: func() { <-sem }}
	if sem == l.reserve {
		lc.deadline = time.Now().Add(ProbeConnLifetime)
		// The server sets its own deadlines when it reads a request; these hold until then.
		_ = c.SetDeadline(lc.deadline)
	}
	return lc, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitedConn frees its slot when closed. A connection of the reserve has a deadline no
// deadline set later (by the server, per request) goes past.
type limitedConn struct {
	net.Conn
	deadline    time.Time // zero for a connection of the main slots
	releaseOnce sync.Once
	release     func()
}

func (c *limitedConn) reserved() bool { return !c.deadline.IsZero() }

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.releaseOnce.Do(c.release)
	return err
}

func (c *limitedConn) bound(t time.Time) time.Time {
	if c.reserved() && (t.IsZero() || t.After(c.deadline)) {
		return c.deadline
	}
	return t
}

func (c *limitedConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.bound(t)) }
func (c *limitedConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.bound(t)) }
func (c *limitedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.bound(t)) }

// reservedKey marks, in a request's context, a connection of the probe reserve.
type reservedKey struct{}

// connContext is the server's ConnContext: it marks the requests of reserved connections.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok && lc.reserved() {
		return context.WithValue(ctx, reservedKey{}, true)
	}
	return ctx
}

// probesOnReserve serves a reserved connection's /healthz or /readyz and closes it after;
// anything else on it gets 503, so that the reserve is never what /metrics, /status or
// /audit wait for.
func probesOnReserve(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reserved, _ := r.Context().Value(reservedKey{}).(bool); reserved {
			w.Header().Set("Connection", "close")
			if r.URL.Path != HealthPath && r.URL.Path != ReadyPath {
				http.Error(w, "connection limit reached", http.StatusServiceUnavailable)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
