package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/agent"
	"github.com/nfstune/nfstune/internal/metrics"
)

type agentFlags struct {
	Listen string
	Config string
	// PolicyName is --policy-name; Node is --node-name.
	PolicyName string
	Node       string
	PID        int
	Resync     time.Duration
	Observe    bool
	Exact      bool
	MaxSeries  int
	Metrics    string
	MemLimit   int64
	// MinScrape is --min-scrape-interval.
	MinScrape time.Duration
	// PodUID is --pod-uid; KubeletRoot --kubelet-root-dir.
	PodUID      string
	KubeletRoot string
	// PodIO is --pod-io.
	PodIO bool
}

func newAgentCommand(g *globals, streams IOStreams) *cobra.Command {
	flags := &agentFlags{}
	c := &cobra.Command{
		Use:   "agent",
		Short: "Keep every NFS mount's read-ahead tuned and serve Prometheus metrics",
		Long: `agent watches the mount table (poll(2) on /proc/<pid>/mountinfo, plus a full resync),
gives every new NFS superblock its profile's read-ahead, restores values changed below the
profile by someone else, and serves /metrics, /healthz, /readyz, and its state and audit as
JSON at /status and /audit (what kubectl nfstune shows). It reads only /proc and
/sys, never a mount point, and never changes mount options. SIGHUP reloads the policy file;
so does a change of the file. SIGTERM stops it cleanly.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runAgent(c.Context(), g, streams, flags)
		},
	}
	g.hostFlags(c)
	g.logFlags(c)
	f := c.Flags()
	f.StringVar(&flags.Listen, "listen", agent.DefaultListen, "address to serve /metrics, /healthz, /readyz, /status and /audit on (the node address to let Prometheus scrape)")
	f.StringVar(&flags.Config, "config", "", "policy file (YAML); empty for the built-in profiles")
	f.StringVar(&flags.PolicyName, "policy-name", "", "name of the policy in /status (the chart passes its node group)")
	f.StringVar(&flags.Node, "node-name", os.Getenv("NODE_NAME"), "name of the node in /status (default $NODE_NAME, which the chart sets)")
	f.IntVar(&flags.PID, "pid", 1, "process whose mount and network namespace to follow under --root (/proc/<pid>/mountinfo, /proc/<pid>/net/nfsfs); 0 for self")
	f.DurationVar(&flags.Resync, "resync", 30*time.Second, "period of the full resync that catches drift")
	f.BoolVar(&flags.Observe, "observe", false, "never write read-ahead, whatever the policy's mode; only report")
	f.BoolVar(&flags.Exact, "exact", false, "also lower read-ahead that is above the profile (profile values are minimums by default)")
	f.StringVar(&flags.Metrics, "metrics", string(metrics.TierDefault), "per-mount series to export: default (at most 36 per mount, plus audit findings and pods: bytes, and requests, errors, RTT and execution time of READ, WRITE, GETATTR, LOOKUP, ACCESS and the others summed) or full (every counter of every operation in use)")
	f.IntVar(&flags.MaxSeries, "max-series", 100000, "cap on per-mount and per-group series in one scrape; 0 for no cap")
	f.DurationVar(&flags.MinScrape, "min-scrape-interval", agent.DefaultMinScrapeInterval, "serve the metrics of one read of the host to every scrape within this time of it, so that clients scraping in a loop cost one read, audit and gather per interval; 0 reads for every scrape")
	f.StringVar(&flags.PodUID, "pod-uid", os.Getenv("POD_UID"), "UID of the pod the agent runs in (default $POD_UID, which the chart sets): the recovery policy acts only once it has found this pod's processes through their cgroups")
	f.StringVar(&flags.KubeletRoot, "kubelet-root-dir", "", "kubelet's --root-dir, the only directory whose pods/ and plugins/ the recovery policy takes for pod volumes; empty reads it from kubelet's command line (/var/lib/kubelet when kubelet has no --root-dir)")
	f.BoolVar(&flags.PodIO, "pod-io", false, "count each pod's NFS I/O with eBPF (read(2) and write(2) bytes, reads through mmap, READ and WRITE latency) and export it per pod; needs BTF, CAP_BPF and CAP_PERFMON, and logs once why when it cannot run")
	f.Int64Var(&flags.MemLimit, "memory-limit", 16<<20, "soft limit for the Go heap in bytes (runtime/debug.SetMemoryLimit); memory a scrape or reconcile used is also returned to the system after it; 0 for neither; GOMEMLIMIT wins when set")
	return c
}

func runAgent(ctx context.Context, g *globals, streams IOStreams, flags *agentFlags) error {
	if flags.MinScrape < 0 {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("invalid --min-scrape-interval %v: want 0 or more", flags.MinScrape)}
	}
	tier, err := metrics.ParseTier(flags.Metrics)
	if err != nil {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("invalid --metrics: %w", err)}
	}
	err = agent.Run(ctx, agent.Options{
		Root:              g.Root(),
		PID:               flags.PID,
		Resync:            flags.Resync,
		Exact:             flags.Exact,
		Listen:            flags.Listen,
		PolicyFile:        flags.Config,
		PolicyName:        flags.PolicyName,
		Node:              flags.Node,
		PodUID:            flags.PodUID,
		KubeletRoot:       flags.KubeletRoot,
		Observe:           flags.Observe,
		Tier:              tier,
		MaxSeries:         flags.MaxSeries,
		MemoryLimit:       flags.MemLimit,
		MinScrapeInterval: flags.MinScrape,
		PodIO:             flags.PodIO,
		Logger:            g.Logger(streams.ErrOut),
	})
	if err != nil {
		return &ExitError{Code: ExitError2, Err: err}
	}
	return nil
}
