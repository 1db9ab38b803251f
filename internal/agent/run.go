package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/kubelet"
	"github.com/nfstune/nfstune/internal/metrics"
	"github.com/nfstune/nfstune/internal/podio"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/status"
)

// Options are what `nfstune agent` asks for.
type Options struct {
	// Root, PID, Resync and Exact are as in Config.
	Root   hostfs.Root
	PID    int
	Resync time.Duration
	Exact  bool
	// Listen is the address /metrics, /healthz and /readyz are served on.
	Listen string
	// PolicyFile is the policy (YAML) loaded with policy.Load; empty for the built-in
	// profiles. A change of its size or modification time, or SIGHUP, reloads it.
	PolicyFile string
	// PolicyName names the policy in /status: the chart's node group.
	PolicyName string
	// Observe forces observe mode on every mount, whatever the policy says.
	Observe bool
	// Node is Config.Node: the node's name (--node-name, the pod's NODE_NAME), also the
	// host name the node's NFSv4 clients present, as the agent's own UTS namespace has the
	// pod's host name. Empty reads it from /proc.
	Node string
	// PodUID and KubeletRoot are as in Config: the agent's own pod (--pod-uid, the
	// chart's POD_UID) and kubelet's root directory (--kubelet-root-dir).
	PodUID      string
	KubeletRoot string
	// Tier is the metrics tier /metrics exports (metrics.ParseTier).
	Tier metrics.Tier
	// MaxSeries caps the per-mount and per-group series of one scrape; 0 for no cap.
	MaxSeries int
	// MinScrapeInterval is HandlerOptions.MinScrapeInterval.
	MinScrapeInterval time.Duration
	// MemoryLimit is the soft limit of the Go heap in bytes (runtime/debug.SetMemoryLimit,
	// unless GOMEMLIMIT is set); above 0 it also returns the memory of each scrape and
	// reconcile to the system (Config.ReleaseMemory).
	MemoryLimit int64
	// PodIO loads the per-pod NFS I/O collector (podio.NewSource): eBPF programs that need
	// BTF, CAP_BPF and CAP_PERFMON; without them the agent logs why once and runs on.
	PodIO  bool
	Logger *slog.Logger
}

// Run runs the agent as the DaemonSet does until ctx ends: it listens on opts.Listen,
// serves the handler, reconciles (Agent.Run), and reloads the policy on SIGHUP or when
// the file changes. It returns the first error of the reconcile loop or the server.
func Run(ctx context.Context, opts Options) error {
	if opts.PID < 0 {
		return fmt.Errorf("invalid --pid %d", opts.PID)
	}
	if r := opts.KubeletRoot; r != "" && (!path.IsAbs(r) || path.Clean(r) != r || r == "/") {
		return fmt.Errorf("invalid --kubelet-root-dir %q: want an absolute, clean path other than /", r)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.MemoryLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(opts.MemoryLimit)
	}
	release := opts.MemoryLimit > 0
	root, pid := opts.Root, opts.PID
	cfgWatch := &fileWatch{path: opts.PolicyFile}
	var podIO func(time.Time) podio.Snapshot
	if opts.PodIO {
		src := podio.NewSource(root, logger)
		defer src.Close()
		podIO = src.Read
	}
	a, err := New(Config{
		Root:   root,
		PID:    pid,
		Resync: opts.Resync,
		Read: func(context.Context) (*inventory.Inventory, error) {
			return inventory.Read(root, inventory.ReadOptions{PID: pid, Hostname: opts.Node})
		},
		ReconcileRead: NewMountTable(root, pid).Read,
		StatisticsRead: func(context.Context) (*inventory.Inventory, error) {
			return inventory.Read(root, inventory.ReadOptions{PID: pid, StatisticsOnly: true})
		},
		Load: func() (*Policy, error) {
			cfgWatch.changed() // remember the version being loaded
			return LoadPolicy(opts.PolicyFile, opts.PolicyName, opts.Observe)
		},
		PolicyChanged: cfgWatch.changed,
		Exact:         opts.Exact,
		ReleaseMemory: release,
		Node:          opts.Node,
		PodUID:        opts.PodUID,
		KubeletRoot:   kubelet.Root(opts.KubeletRoot),
		PodIO:         podIO,
		Logger:        logger,
	})
	if err != nil {
		return err
	}
	h, err := a.Handler(HandlerOptions{
		Tier: opts.Tier, MaxSeries: opts.MaxSeries, MinScrapeInterval: opts.MinScrapeInterval, ReleaseMemory: release,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", opts.Listen, err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reload := reloadOnHangup(ctx)

	var wg sync.WaitGroup
	var serveErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		if serveErr = Serve(ctx, ln, h, logger); serveErr != nil {
			cancel()
		}
	}()
	runErr := a.Run(ctx, reload)
	cancel()
	wg.Wait()
	if runErr != nil {
		return runErr
	}
	if serveErr != nil {
		return serveErr
	}
	logger.Info("agent stopped")
	return nil
}

// reloadOnHangup returns a channel that receives a value for each SIGHUP until ctx ends;
// signals that arrive while one is pending are merged into it.
func reloadOnHangup(ctx context.Context) <-chan struct{} {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := make(chan struct{}, 1)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				select {
				case reload <- struct{}{}:
				default:
				}
			}
		}
	}()
	return reload
}

// LoadPolicy loads the policy file (the built-in profiles when path is empty; see
// policy.Load) and adapts it for the agent: Resolve gives each mount's read-ahead and
// mode, Audit runs audit.Run, and Info names it (name, file and the SHA-256 of the bytes
// loaded), Recovery the recovery rules. observe forces observe mode on every mount and on
// recovery.
func LoadPolicy(path, name string, observe bool) (*Policy, error) {
	pol := policy.Default()
	info := status.Policy{Name: name}
	if path != "" {
		b, err := readPolicyFile(path)
		if err != nil {
			return nil, err
		}
		if pol, err = policy.Parse(path, b); err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		info.File, info.SHA256 = path, hex.EncodeToString(sum[:])
	}
	mode := pol.Mode
	if observe {
		mode = policy.ModeObserve
	}
	recovery := pol.Recovery
	if observe {
		recovery.Mode = policy.ModeObserve
	}
	return &Policy{
		Resolve: func(m *inventory.Mount) Desired {
			r := pol.Resolve(m)
			d := Desired{ReadAheadKB: r.ReadAheadKB, Mode: r.Mode, ReadAheadRSizes: r.ReadAheadRSizes, ReadAheadExact: r.ReadAheadExact, ReadAheadBy: r.ReadAheadBy,
				Adaptive: r.Adaptive}
			if observe {
				d.Mode = policy.ModeObserve
			}
			return d
		},
		Audit: func(inv *inventory.Inventory, opts audit.Options) audit.Report {
			return audit.RunWith(inv, pol, opts)
		},
		Limits: func(inv *inventory.Inventory) []metrics.ServiceLimit {
			return ServiceLimits(inv, pol.Resolve)
		},
		Recovery:         recovery,
		Info:             info,
		Mode:             mode,
		AdaptiveInterval: pol.AdaptiveInterval(),
	}, nil
}

// readPolicyFile reads the policy file as policy.Load does: a regular file of at most
// policy.MaxConfigSize bytes (hostfs.ReadFile).
func readPolicyFile(path string) ([]byte, error) {
	b, err := hostfs.ReadFile(path, policy.MaxConfigSize)
	if err != nil {
		return nil, fmt.Errorf("reading policy: %w", err)
	}
	return b, nil
}

// fileWatch tells whether a file's size or modification time changed since the last call.
// The policy file lives on local disk (or a ConfigMap volume), never on NFS.
type fileWatch struct {
	path string
	mu   sync.Mutex
	last string
}

func (w *fileWatch) changed() bool {
	if w.path == "" {
		return false
	}
	var sig string
	if st, err := os.Stat(w.path); err == nil {
		sig = fmt.Sprint(st.Size(), st.ModTime().UnixNano())
	} else {
		sig = "error: " + err.Error()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := sig != w.last
	w.last = sig
	return ch
}
