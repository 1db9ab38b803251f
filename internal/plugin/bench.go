package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nfstune/nfstune/internal/bench"
	"github.com/nfstune/nfstune/internal/fleetbench"
)

func newBenchCommand(g *globals, streams Streams) *cobra.Command {
	o := fleetbench.Options{}
	// The command's own variables: g's carry the agents' namespace and timeout, which
	// declaring the flags again here would overwrite.
	var requestTimeout time.Duration
	c := &cobra.Command{
		Use:   "bench --pvc CLAIM [--pvc CLAIM...] --dir DIR",
		Short: "Draw one load curve with many pods: an Indexed Job spread across nodes, on one or more volumes",
		Long: `bench runs nfstune's load curve (nfstune bench curve: creates, stats, 16 KiB reads and
writes of small files at a rising offered load) in --pods pods at once, an Indexed Job spread
across the nodes, on the PersistentVolumeClaims named with --pvc (pod i uses claim i modulo
their number). Each pod works in <dir>/<job>-<index> on its volume and removes it when it
ends; --dir must name an existing subdirectory, writable by --run-as-user.

Every step starts at the same time in every pod: once each pod has laid out its files, the
command writes a start time into the Job's ConfigMap, which the pods mount, --start-delay ahead
(kubelet delivers a ConfigMap's change within its sync period, a minute by default); step i
starts i step periods later (ramp + runtime + --step-gap). The pods need no API access.

The report gives per step the sum of the pods' achieved ops/s (the totals are the pods' fio
results added up), the spread over the pods (min, median, max), the ops/s per volume and per
node, and each pod's read-ahead as the pod read it from /sys/class/bdi. The curve stops at the
first step past the knee of the totals (bench curve's rules, with the slowest pod's p99).

On SIGINT or SIGTERM, or when a pod fails, the command deletes the Job (foreground), its pods
and its ConfigMap and waits for the pods to go; the pods remove their directories on SIGTERM.

The pods run the image's nfstune with fio: the release image holds nfstune alone, so
--image must name an image that adds fio to it (docs/kubernetes.md, kubectl nfstune bench).
It needs create, update and delete on configmaps, create, get and delete on jobs, list and
deletecollection on pods, and get on pods/log, in --namespace.

Exit status: 0 when the curve was drawn; 1 when a pod failed or the command was
interrupted (the steps gathered so far are printed); 2 on bad input or when the API server
cannot be asked.`,
		Example: `  kubectl nfstune bench -n eda --pvc tools-a --pvc tools-b --dir nfstune-bench --pods 8 \
    --image registry.example/nfstune-fio:v0.1.0
  kubectl nfstune bench -n eda --pvc tools-a --dir bench --pods 4 --image registry.example/nfstune-fio:v0.1.0 -o json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if o.Dir == "" {
				return usageError(fleetbench.ErrNoDir)
			}
			cfg, err := newConfig(g)
			if err != nil {
				return usageError(err)
			}
			cfg.Timeout = requestTimeout
			if o.Namespace == "" {
				if o.Namespace, _, err = kubeconfig(g).Namespace(); err != nil {
					return usageError(err)
				}
			}
			core, err := corev1client.NewForConfig(cfg)
			if err != nil {
				return usageError(err)
			}
			batch, err := batchv1client.NewForConfig(cfg)
			if err != nil {
				return usageError(err)
			}
			return runBench(c.Context(), g, streams, fleetbench.Clients{Core: core, Batch: batch}, o)
		},
	}
	f := c.Flags()
	f.StringVar(&g.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&g.context, "context", "", "the kubeconfig context to use")
	// The claims' namespace, not the agents': o.Namespace, not g.namespace.
	f.StringVarP(&o.Namespace, "namespace", "n", "", "namespace of the claims, where the Job runs (default: the kubeconfig context's, as kubectl)")
	f.StringArrayVar(&o.PVCs, "pvc", nil, "a PersistentVolumeClaim to run on (repeat for more; pods are assigned round-robin)")
	f.StringVar(&o.Dir, "dir", "", "existing subdirectory of each volume for the pods' directories (required)")
	f.IntVar(&o.Pods, "pods", 4, "number of pods")
	f.StringVar(&o.Name, "name", "", "the Job's name (default nfstune-bench-<random>)")
	f.StringVar(&o.Image, "image", "", "image with nfstune as its entrypoint and fio on its PATH (required: the release image has no fio)")
	f.StringVar(&o.Profile, "profile", bench.CurveProfile, "operation mix: "+strings.Join(bench.CurveProfiles, " or ")+" (nfstune bench curve --help)")
	f.IntSliceVar(&o.Rates, "rates", []int{100, 200, 400, 800, 1600, 3200}, "offered loads of each pod in ops/s, rising")
	f.DurationVar(&o.Runtime, "runtime", bench.DefaultCurveRuntime, "measured time of each step")
	f.DurationVar(&o.Ramp, "ramp", bench.DefaultRamp, "warm-up of each step, not counted")
	f.DurationVar(&o.LatencyBound, "latency-bound", bench.DefaultLatencyBound, "slowest pod's p99 past which a step is past the knee")
	f.DurationVar(&o.StepGap, "step-gap", fleetbench.DefaultStepGap, "time between steps for fio to start and stop")
	f.DurationVar(&o.StartDelay, "start-delay", fleetbench.DefaultStartDelay, "how far ahead the first step starts once every pod is ready")
	f.DurationVar(&o.ReadyTimeout, "timeout", 10*time.Minute, "how long to wait for every pod to have laid out its files")
	f.DurationVar(&requestTimeout, "request-timeout", 30*time.Second, "how long to wait for each request to the API server")
	f.Int64Var(&o.RunAsUser, "run-as-user", fleetbench.DefaultRunAsUser, "user and group ID the pods run as (not root)")
	g.outputFlag(c)
	return c
}

// runBench runs the curve and writes its report, also the partial one of a failure.
func runBench(ctx context.Context, g *globals, streams Streams, c fleetbench.Clients, o fleetbench.Options) error {
	rep, err := fleetbench.Run(ctx, c, o, streams.ErrOut)
	if rep == nil {
		return usageError(err)
	}
	if werr := g.write(streams.Out, rep, func(w io.Writer) error { return fleetbench.WriteTable(w, rep) }); werr != nil {
		return errors.Join(err, werr)
	}
	if err != nil {
		if rep.Interrupted {
			err = fmt.Errorf("interrupted; the Job was deleted: %w", err)
		}
		return &exitError{code: ExitNotCompliant, err: err}
	}
	return nil
}
