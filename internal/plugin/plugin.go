// Package plugin is the command line of kubectl-nfstune, the kubectl plugin that shows
// every node's nfstune agent from a terminal: flags, kubeconfig loading (clientcmd, as
// kubectl does it), output formats and exit codes around package fleet. It is a program of
// its own so that the Kubernetes client stays out of the nfstune binary, which calls no
// API.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/fleet"
	"github.com/nfstune/nfstune/internal/printer"
	"github.com/nfstune/nfstune/internal/version"
)

// Exit codes.
const (
	// ExitCompliant: every node listed is compliant (status), or the node's audit has no
	// finding at --fail-on (audit).
	ExitCompliant = 0
	// ExitNotCompliant: some node is not compliant or its agent did not answer (status,
	// audit), or no agent that answered runs the per-pod I/O collector (top).
	ExitNotCompliant = 1
	// ExitError: bad input, or the API server could not be asked.
	ExitError = 2
)

// Streams are the plugin's standard streams; tests pass buffers.
type Streams struct {
	Out, ErrOut io.Writer
}

// exitError carries an exit code out of a command, with the error to print, if any.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func usageError(err error) error { return &exitError{code: ExitError, err: err} }

// Main runs the plugin with the process's arguments and returns the exit code; SIGINT and
// SIGTERM cancel the requests in flight.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, Streams{Out: os.Stdout, ErrOut: os.Stderr}, os.Args[1:])
}

// Run executes one command line and returns its exit code (ExitCompliant,
// ExitNotCompliant, ExitError); it is the one place that prints the final error.
func Run(ctx context.Context, streams Streams, args []string) int {
	root := NewRoot(streams)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitCompliant
	}
	var exit *exitError
	if errors.As(err, &exit) {
		if exit.err != nil {
			fmt.Fprintf(streams.ErrOut, "kubectl-nfstune: %v\n", exit.err)
		}
		return exit.code
	}
	fmt.Fprintf(streams.ErrOut, "kubectl-nfstune: %v\n", err)
	return ExitError
}

// globals are the flags the commands share: the cluster's (clusterFlags) on status and
// audit, -o on every command.
type globals struct {
	kubeconfig string
	context    string
	namespace  string
	timeout    time.Duration
	apiTimeout time.Duration
	output     string
	failOn     string
}

const exitCodes = `Exit status: 0 when every node listed is compliant (status) or the node's audit has no
finding at --fail-on (audit); 1 when a node is not compliant or its agent did not answer
within --timeout; 2 on bad input or when the API server cannot be asked.`

// NewRoot builds the plugin's command tree. kubectl runs the program kubectl-nfstune for
// "kubectl nfstune", which its usage lines say (cobra's display name annotation).
func NewRoot(streams Streams) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:         "kubectl-nfstune",
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl nfstune"},
		Version:     version.String(),
		Short:       "Show every node's nfstune agent: tuned mounts, findings, stalled servers",
		Long: `kubectl nfstune asks every node's nfstune agent for its state through the API server
(the agent pods' proxy subresource), with your kubeconfig's credentials. It needs get and list
on nodes, get and list on pods in the agents' namespace, and get on pods/proxy there; top
also lists pods in every namespace to name them (docs/kubernetes.md, kubectl nfstune).

` + exitCodes,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetVersionTemplate(`{{.DisplayName}} {{.Version}}` + "\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	root.AddCommand(newStatusCommand(g, streams), newAuditCommand(g, streams), newLearnedCommand(g, streams), newTopCommand(g, streams), newBenchCommand(g, streams), newVersionCommand(g, streams))
	return root
}

// clusterFlags declares on c, a command that asks the cluster, how to reach it and what
// makes a node compliant.
func (g *globals) clusterFlags(c *cobra.Command) {
	g.connectionFlags(c)
	c.Flags().StringVar(&g.failOn, "fail-on", audit.SeverityError, "a finding at or above this severity makes a node not compliant: error, warning, info or none")
	g.outputFlag(c)
}

// connectionFlags declares how to reach the API server and the agents.
func (g *globals) connectionFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&g.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&g.context, "context", "", "the kubeconfig context to use")
	f.StringVarP(&g.namespace, "namespace", "n", fleet.DefaultNamespace, "namespace of the nfstune agents")
	f.DurationVar(&g.timeout, "timeout", fleet.DefaultTimeout, "how long to wait for each agent")
	f.DurationVar(&g.apiTimeout, "request-timeout", 30*time.Second, "how long to wait for the API server's listings")
}

// outputFlag declares -o on c with nfstune's formats (printer.Formats), checked when set.
func (g *globals) outputFlag(c *cobra.Command) {
	c.Flags().VarP(printer.NewFormat(&g.output, printer.Table, printer.Formats...), "output", "o", "output format: "+strings.Join(printer.Formats, ", "))
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(printer.Formats, cobra.ShellCompDirectiveNoFileComp))
}

func newVersionCommand(g *globals, streams Streams) *cobra.Command {
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version, its commit and the Go release it was built with",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := version.Get()
			return g.write(streams.Out, v, func(w io.Writer) error {
				_, err := io.WriteString(w, v.Text("kubectl nfstune"))
				return err
			})
		},
	}
	g.outputFlag(c)
	return c
}

func newStatusCommand(g *globals, streams Streams) *cobra.Command {
	var selector string
	c := &cobra.Command{
		Use:   "status [NODE...]",
		Short: "List every node with its agent's state, mounts, findings and compliance",
		Long: `status lists every node (those of --selector, or the nodes named) with its agent's state
(ready, version, mode, node group and policy), its NFS mounts and how many are tuned, the
findings by severity, the stalled servers and the recovery actions the agent reports. A node is
compliant when its agent answers, is ready and healthy, every mount's read-ahead is what the
policy wants, and no finding is at or above --fail-on. A node with no agent pod, or whose agent
does not answer within --timeout, is shown as unreachable.

` + exitCodes,
		Example: `  kubectl nfstune status
  kubectl nfstune status -o json
  kubectl nfstune status node-a node-b --timeout 2s`,
		RunE: func(c *cobra.Command, nodes []string) error {
			if err := g.check(); err != nil {
				return err
			}
			client, err := newClient(g)
			if err != nil {
				return usageError(err)
			}
			f, err := fleet.Gather(c.Context(), client, fleet.Options{
				Namespace: g.namespace, NodeSelector: selector, Nodes: nodes,
				Timeout: g.timeout, APITimeout: g.apiTimeout, FailOn: g.failOnSeverity(),
			})
			if err != nil {
				return usageError(err)
			}
			if err := g.write(streams.Out, f, func(w io.Writer) error { return fleet.WriteTable(w, f) }); err != nil {
				return err
			}
			if !f.AllCompliant() {
				return &exitError{code: ExitNotCompliant}
			}
			return nil
		},
	}
	g.clusterFlags(c)
	c.Flags().StringVarP(&selector, "selector", "l", fleet.DefaultNodeSelector, "label selector of the nodes an agent is expected on (the chart's nodeSelector); empty for every node")
	return c
}

// formatPolicy is learned's -o that prints the learned values as a policy file.
const formatPolicy = "policy"

func newLearnedCommand(g *globals, streams Streams) *cobra.Command {
	var selector string
	c := &cobra.Command{
		Use:   "learned [NODE...]",
		Short: "List the read-ahead the agents' adaptive controllers settled on, per volume, across the fleet",
		Long: `learned lists, per volume (an export of a server), the read-ahead the agents' adaptive
read-ahead settled on (docs/agent.md, Learned per volume), with how many nodes learned it and
the others' values. The value shown is the one most nodes learned; of values as common, the
smallest. -o policy prints them as a policy file with one exact rule per volume, to pin the
values on every node, with or without the agent.

Exit codes: 0 listed (also when nothing was learned), 2 bad usage or the API server could not
be asked. An agent that does not answer adds nothing; its node is named on stderr.`,
		Example: `  kubectl nfstune learned
  kubectl nfstune learned -o policy > learned-policy.yaml`,
		RunE: func(c *cobra.Command, nodes []string) error {
			client, err := newClient(g)
			if err != nil {
				return usageError(err)
			}
			f, err := fleet.Gather(c.Context(), client, fleet.Options{
				Namespace: g.namespace, NodeSelector: selector, Nodes: nodes,
				Timeout: g.timeout, APITimeout: g.apiTimeout,
			})
			if err != nil {
				return usageError(err)
			}
			ew := printer.New(streams.ErrOut)
			for _, n := range f.Nodes {
				if !n.Reachable {
					ew.Printf("kubectl nfstune learned: node %s: %s\n", n.Name, n.Error)
				}
			}
			vols := fleet.Learned(f)
			if g.output == formatPolicy {
				return fleet.WriteLearnedPolicy(streams.Out, vols)
			}
			return g.write(streams.Out, vols, func(w io.Writer) error { return fleet.WriteLearnedTable(w, vols) })
		},
	}
	g.connectionFlags(c)
	formats := append(slices.Clone(printer.Formats), formatPolicy)
	c.Flags().VarP(printer.NewFormat(&g.output, printer.Table, formats...), "output", "o", "output format: "+strings.Join(formats, ", "))
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
	c.Flags().StringVarP(&selector, "selector", "l", fleet.DefaultNodeSelector, "label selector of the nodes an agent is expected on (the chart's nodeSelector); empty for every node")
	return c
}

func newTopCommand(g *globals, streams Streams) *cobra.Command {
	var (
		selector string
		sort     string
		limit    int
	)
	c := &cobra.Command{
		Use:   "top [NODE...]",
		Short: "List the pods by NFS traffic across the fleet, busiest first, from the agents' per-pod I/O collector",
		Long: `top lists the pods of every node (those of --selector, or the nodes named) by their NFS
traffic over their agent's last interval, busiest first: per pod and volume, what read(2)
returned, the READ payload the pod made the server send and the part of it started by page
faults (reads through mmap), what write(2) wrote, and the mean READ latency. It needs agents
started with --pod-io (nfstune agent); each lists its busiest pods by READ payload, which
--sort ranks across the fleet. "(node)" is the node's own tasks; a pod the API server no
longer lists shows as its UID. Pods are named from one listing of pods (of every namespace, or
of the one node involved): a user who may not list them gets the UIDs and a warning. Nodes
whose collector does not run, or whose agent does not answer, are named below the table.

Exit codes: 0 listed (also when no pod had NFS traffic), 1 no agent that answered runs the
per-pod I/O collector, 2 bad usage or the API server could not be asked.`,
		Example: `  kubectl nfstune top
  kubectl nfstune top node-a --sort mapped --limit 5
  kubectl nfstune top -o json`,
		RunE: func(c *cobra.Command, nodes []string) error {
			if !slices.Contains(fleet.SortKeys, sort) {
				return usageError(fmt.Errorf("unknown --sort %q (want %s)", sort, strings.Join(fleet.SortKeys, ", ")))
			}
			if limit < 0 {
				return usageError(fmt.Errorf("--limit %d: want 0 (every row) or more", limit))
			}
			if g.timeout <= 0 || g.apiTimeout <= 0 {
				return usageError(errors.New("--timeout and --request-timeout must be positive"))
			}
			client, err := newClient(g)
			if err != nil {
				return usageError(err)
			}
			opts := fleet.Options{Namespace: g.namespace, NodeSelector: selector, Nodes: nodes, Timeout: g.timeout, APITimeout: g.apiTimeout}
			f, err := fleet.Gather(c.Context(), client, opts)
			if err != nil {
				return usageError(err)
			}
			top, err := fleet.NewTop(f, sort, limit)
			if err != nil {
				return usageError(err)
			}
			if err := top.NamePods(c.Context(), client, opts); err != nil {
				ew := printer.New(streams.ErrOut)
				ew.Printf("kubectl nfstune top: pods shown by UID: %s\n", err.Error())
			}
			if err := g.write(streams.Out, top, func(w io.Writer) error { return fleet.WriteTopTable(w, top) }); err != nil {
				return err
			}
			if !top.Collecting() {
				return &exitError{code: ExitNotCompliant, err: errors.New("no agent that answered runs the per-pod NFS I/O collector (nfstune agent --pod-io)")}
			}
			return nil
		},
	}
	g.connectionFlags(c)
	g.outputFlag(c)
	c.Flags().StringVarP(&selector, "selector", "l", fleet.DefaultNodeSelector, "label selector of the nodes an agent is expected on (the chart's nodeSelector); empty for every node")
	c.Flags().StringVar(&sort, "sort", fleet.SortServer, "the rate to rank by: "+strings.Join(fleet.SortKeys, ", "))
	_ = c.RegisterFlagCompletionFunc("sort", cobra.FixedCompletions(fleet.SortKeys, cobra.ShellCompDirectiveNoFileComp))
	c.Flags().IntVar(&limit, "limit", fleet.DefaultTopLimit, "how many rows to list; 0 for every row")
	return c
}

func newAuditCommand(g *globals, streams Streams) *cobra.Command {
	c := &cobra.Command{
		Use:   "audit NODE",
		Short: "Show one node's full audit, as its agent ran it",
		Long: `audit shows the full audit of one node, as its agent ran it on its last read of the host:
every NFS mount with its read-ahead, options and profile, each finding with its evidence and
fix, and the stalled servers with the processes using their mounts (as nfstune audit on the
node prints them).

` + exitCodes,
		Example: `  kubectl nfstune audit node-a
  kubectl nfstune audit node-a -o yaml --fail-on warning`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := g.check(); err != nil {
				return err
			}
			client, err := newClient(g)
			if err != nil {
				return usageError(err)
			}
			doc, err := fleet.Audit(c.Context(), client, fleet.Options{Namespace: g.namespace, Timeout: g.timeout, APITimeout: g.apiTimeout}, args[0])
			var apiErr *fleet.APIError
			switch {
			case errors.As(err, &apiErr):
				return usageError(err)
			case err != nil:
				return &exitError{code: ExitNotCompliant, err: err}
			}
			err = g.write(streams.Out, doc, func(w io.Writer) error {
				if err := fleet.WriteWarnings(streams.ErrOut, args[0], doc.Warnings); err != nil {
					return err
				}
				return audit.WriteTable(w, doc.Report)
			})
			if err != nil {
				return err
			}
			if sev := g.failOnSeverity(); sev != "" {
				rank := audit.SeverityRank(sev)
				for _, f := range doc.Findings {
					if audit.SeverityRank(f.Severity) >= rank {
						return &exitError{code: ExitNotCompliant}
					}
				}
			}
			return nil
		},
	}
	g.clusterFlags(c)
	return c
}

func (g *globals) check() error {
	if g.failOn != "none" && audit.SeverityRank(g.failOn) == 0 {
		return usageError(fmt.Errorf("unknown --fail-on %q (want error, warning, info or none)", g.failOn))
	}
	if g.timeout <= 0 || g.apiTimeout <= 0 {
		return usageError(errors.New("--timeout and --request-timeout must be positive"))
	}
	return nil
}

func (g *globals) failOnSeverity() string {
	if g.failOn == "none" {
		return ""
	}
	return g.failOn
}

// write writes v as JSON or YAML, or calls table.
func (g *globals) write(w io.Writer, v any, table func(io.Writer) error) error {
	switch g.output {
	case "json":
		return printer.WriteJSON(w, v)
	case "yaml":
		return printer.WriteYAML(w, v)
	}
	return table(w)
}

// newClient loads the kubeconfig (newConfig) and returns a client of the core API group.
func newClient(g *globals) (corev1client.CoreV1Interface, error) {
	cfg, err := newConfig(g)
	if err != nil {
		return nil, err
	}
	return corev1client.NewForConfig(cfg)
}

// newConfig loads the kubeconfig as kubectl does ($KUBECONFIG, ~/.kube/config, or
// --kubeconfig; --context).
func newConfig(g *globals) (*rest.Config, error) {
	cfg, err := kubeconfig(g).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-nfstune/" + version.Version
	// The listings and every agent's request carry their own deadlines.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

func kubeconfig(g *globals) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = g.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: g.context})
}
