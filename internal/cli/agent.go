package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/agent"
	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/metrics"
	"github.com/nfstune/nfstune/internal/policy"
)

type agentFlags struct {
	Listen    string
	Config    string
	PID       int
	Resync    time.Duration
	Observe   bool
	Exact     bool
	MaxSeries int
	Metrics   string
	MemLimit  int64
}

func newAgentCommand(g *globals, streams IOStreams) *cobra.Command {
	flags := &agentFlags{}
	c := &cobra.Command{
		Use:   "agent",
		Short: "Keep every NFS mount's read-ahead tuned and serve Prometheus metrics",
		Long: `agent watches the mount table (poll(2) on /proc/<pid>/mountinfo, plus a full resync),
gives every new NFS superblock its profile's read-ahead, restores values changed below the
profile by someone else, and serves /metrics, /healthz and /readyz. It reads only /proc and
/sys, never a mount point, and never changes mount options. SIGHUP reloads the policy file;
so does a change of the file. SIGTERM stops it cleanly.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runAgent(c.Context(), g, streams, flags)
		},
	}
	f := c.Flags()
	f.StringVar(&flags.Listen, "listen", agent.DefaultListen, "address to serve /metrics, /healthz and /readyz on (the node address to let Prometheus scrape)")
	f.StringVar(&flags.Config, "config", "", "policy file (YAML); empty for the built-in profiles")
	f.IntVar(&flags.PID, "pid", 1, "process whose mount and network namespace to follow under --root (/proc/<pid>/mountinfo, /proc/<pid>/net/nfsfs); 0 for self")
	f.DurationVar(&flags.Resync, "resync", 30*time.Second, "period of the full resync that catches drift")
	f.BoolVar(&flags.Observe, "observe", false, "never write read-ahead, whatever the policy's mode; only report")
	f.BoolVar(&flags.Exact, "exact", false, "also lower read-ahead that is above the profile (profile values are minimums by default)")
	f.StringVar(&flags.Metrics, "metrics", string(metrics.TierDefault), "per-mount series to export: default (at most 36 per mount, plus audit findings and pods: bytes, and requests, errors, RTT and execution time of READ, WRITE, GETATTR, LOOKUP, ACCESS and the others summed) or full (every counter of every operation in use)")
	f.IntVar(&flags.MaxSeries, "max-series", 100000, "cap on per-mount and per-group series in one scrape; 0 for no cap")
	f.Int64Var(&flags.MemLimit, "memory-limit", 16<<20, "soft limit for the Go heap in bytes (runtime/debug.SetMemoryLimit); memory a scrape or reconcile used is also returned to the system after it; 0 for neither; GOMEMLIMIT wins when set")
	return c
}

func runAgent(ctx context.Context, g *globals, streams IOStreams, flags *agentFlags) error {
	logger := g.Logger(streams.ErrOut)
	root := g.Root()
	if flags.PID < 0 {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("invalid --pid %d", flags.PID)}
	}
	tier, err := metrics.ParseTier(flags.Metrics)
	if err != nil {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("invalid --metrics: %w", err)}
	}
	if flags.MemLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(flags.MemLimit)
	}
	cfgWatch := &fileWatch{path: flags.Config}
	a, err := agent.New(agent.Config{
		Root:   root,
		PID:    flags.PID,
		Resync: flags.Resync,
		Read: func(context.Context) (*inventory.Inventory, error) {
			return inventory.Read(root, inventory.ReadOptions{PID: flags.PID})
		},
		ReconcileRead: func(context.Context) (*inventory.Inventory, error) {
			return agent.ReadMountTable(root, flags.PID)
		},
		Load: func() (*agent.Policy, error) {
			cfgWatch.changed() // remember the version being loaded
			return loadAgentPolicy(flags.Config, flags.Observe)
		},
		PolicyChanged: cfgWatch.changed,
		Exact:         flags.Exact,
		ReleaseMemory: flags.MemLimit > 0,
		Logger:        logger,
	})
	if err != nil {
		return err
	}
	h, err := a.Handler(agent.HandlerOptions{Tier: tier, MaxSeries: flags.MaxSeries, ReleaseMemory: flags.MemLimit > 0})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", flags.Listen)
	if err != nil {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("listening on %s: %w", flags.Listen, err)}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reload := make(chan struct{}, 1)
	go func() {
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

	var wg sync.WaitGroup
	var serveErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		if serveErr = agent.Serve(ctx, ln, h, logger); serveErr != nil {
			cancel()
		}
	}()
	runErr := a.Run(ctx, reload)
	cancel()
	wg.Wait()
	if runErr != nil {
		return &ExitError{Code: ExitError2, Err: runErr}
	}
	if serveErr != nil {
		return &ExitError{Code: ExitError2, Err: serveErr}
	}
	logger.Info("agent stopped")
	return nil
}

// loadAgentPolicy loads the policy file (or the built-in profiles) and adapts it for the
// agent; observe forces observe mode on every mount.
func loadAgentPolicy(path string, observe bool) (*agent.Policy, error) {
	pol, err := policy.Load(path)
	if err != nil {
		return nil, err
	}
	return &agent.Policy{
		Resolve: func(m *inventory.Mount) agent.Desired {
			r := pol.Resolve(m)
			d := agent.Desired{ReadAheadKB: r.ReadAheadKB, Mode: r.Mode, ReadAheadRSizes: r.ReadAheadRSizes, ReadAheadExact: r.ReadAheadExact}
			if observe {
				d.Mode = policy.ModeObserve
			}
			return d
		},
		Audit: func(inv *inventory.Inventory) []metrics.Finding {
			rep := audit.Run(inv, pol)
			out := make([]metrics.Finding, 0, len(rep.Findings))
			for _, f := range rep.Findings {
				out = append(out, metrics.Finding{Device: f.Device, Rule: f.ID, Severity: f.Severity})
			}
			return out
		},
		Limits: func(inv *inventory.Inventory) []metrics.ServiceLimit {
			return agent.ServiceLimits(inv, pol.Resolve)
		},
	}, nil
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
