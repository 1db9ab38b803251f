package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nfstune/nfstune/internal/metrics"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/readahead"
)

// Metrics are the agent's own series. Their label values are fixed sets, so they never
// grow with the number of mounts.
type Metrics struct {
	Reconciles *prometheus.CounterVec
	Repairs    *prometheus.CounterVec
	Drifts     prometheus.Counter
	Errors     *prometheus.CounterVec
	LastResync prometheus.Gauge
	Mounts     prometheus.Gauge
	Reaction   prometheus.Histogram
	// RecoveryActions counts the recovery rules' actions by action and result;
	// RecoverySuperblocks are the superblocks of stalled servers the rules select, by
	// state (RecoveryWaiting, RecoveryKept, RecoveryBlind, RecoveryEligible), at the last
	// run.
	RecoveryActions     *prometheus.CounterVec
	RecoverySuperblocks *prometheus.GaugeVec
	// AdaptiveChanges counts adaptive read-ahead changes by direction and reason.
	AdaptiveChanges *prometheus.CounterVec
}

// NewMetrics creates the agent's metrics; register them with Register.
func NewMetrics() *Metrics {
	const ns, sub = metrics.Namespace, "agent"
	return &Metrics{
		Reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "reconciles_total",
			Help: "Reconciles run, by trigger: start, mountinfo (a mount table change), settle (a re-check of new superblocks), resync or reload.",
		}, []string{"trigger"}),
		Repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "repairs_total",
			Help: "Read-ahead values written, by reason: new (a new superblock), drift (changed by someone else), policy (a reload raised the profile), retry.",
		}, []string{"reason"}),
		Drifts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "drifts_total",
			Help: "Read-ahead values found changed below the profile by someone else, in enforce and observe mode.",
		}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "errors_total",
			Help: "Errors, by stage: read (inventory), write (read-ahead), journal (the value before an adaptive change), policy (reload), watch (mount table).",
		}, []string{"stage"}),
		LastResync: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "last_resync_timestamp_seconds",
			Help: "Unix time of the last completed full resync.",
		}),
		Mounts: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "mounts",
			Help: "NFS superblocks the agent tracks.",
		}),
		Reaction: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "reaction_seconds",
			Help:    "Time from a mount table change to the new superblock's read-ahead being set.",
			Buckets: []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1, 5},
		}),
		RecoveryActions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "recovery", Name: "actions_total",
			Help: "Actions of the recovery policy on superblocks of a dead server that nobody needs, by action (shutdown, report) and result (done; observed: observe mode, nothing written; aborted: the last checks before the write said no; failed).",
		}, []string{"action", "result"}),
		RecoverySuperblocks: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: "recovery", Name: "superblocks",
			Help: "Superblocks of stalled servers that the recovery policy selects, at its last run, by state: waiting (stalled for less than the window), kept (someone may still need it), blind (the agent cannot see kubelet's root or pods' processes, so it cannot tell; never acted on), eligible.",
		}, []string{"state"}),
		AdaptiveChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "readahead_adaptive_changes_total",
			Help: "Adaptive read-ahead changes made, by direction (up, down) and reason: bounds (into the rule's bounds), over_read (halved: fetched much more than read), streaming (doubled: the READs are read-ahead's and what it fetches is read), probe (halved: a streaming mount that cannot grow tries a smaller window), hurt (undone: the change before made the mount slower or more wasteful), no_gain (undone: the probe before did not make the mount faster, or the rise before fetched more than was read without making it faster).",
		}, []string{"direction", "reason"}),
	}
}

// recoveryResults are the results each recovery action can have.
var recoveryResults = map[string][]string{
	policy.RecoveryShutdown: {ResultDone, ResultObserved, ResultAborted, ResultFailed},
	policy.RecoveryReport:   {ResultDone, ResultObserved},
}

// setRecoveryStates sets nfstune_recovery_superblocks from the last decisions.
func (m *Metrics) setRecoveryStates(ds []recoveryDecision) {
	n := map[string]int{}
	for _, d := range ds {
		n[d.State]++
	}
	for _, s := range []string{RecoveryWaiting, RecoveryKept, RecoveryBlind, RecoveryEligible} {
		m.RecoverySuperblocks.WithLabelValues(s).Set(float64(n[s]))
	}
}

// Register registers every agent metric with reg and pre-creates the labelled series so
// that rates work from the first scrape.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, t := range []Trigger{TriggerStart, TriggerMountinfo, TriggerResync, TriggerReload, TriggerSettle} {
		m.Reconciles.WithLabelValues(string(t))
	}
	for _, r := range []string{"new", "drift", "policy", "retry"} {
		m.Repairs.WithLabelValues(r)
	}
	for _, s := range []string{"read", "write", "journal", "policy", "watch"} {
		m.Errors.WithLabelValues(s)
	}
	for action, results := range recoveryResults {
		for _, r := range results {
			m.RecoveryActions.WithLabelValues(action, r)
		}
	}
	m.setRecoveryStates(nil)
	for _, c := range [][2]string{
		{readahead.Up, string(readahead.ReasonBounds)}, {readahead.Down, string(readahead.ReasonBounds)},
		{readahead.Down, string(readahead.ReasonOverRead)}, {readahead.Up, string(readahead.ReasonStreaming)},
		{readahead.Down, string(readahead.ReasonProbe)},
		{readahead.Up, string(readahead.ReasonNoGain)}, {readahead.Down, string(readahead.ReasonNoGain)},
		{readahead.Up, string(readahead.ReasonHurt)}, {readahead.Down, string(readahead.ReasonHurt)},
	} {
		m.AdaptiveChanges.WithLabelValues(c[0], c[1])
	}
	for _, c := range []prometheus.Collector{m.Reconciles, m.Repairs, m.Drifts, m.Errors, m.LastResync, m.Mounts, m.Reaction, m.RecoveryActions, m.RecoverySuperblocks, m.AdaptiveChanges} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
