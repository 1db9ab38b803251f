// Package status is what a node's agent says about itself and its NFS mounts: the documents
// it serves as JSON at /status (Status: readiness, version, mode, policy, counts) and
// /audit (Audit: the full audit of the node, as `nfstune audit -o json` reports it), which
// kubectl nfstune reads through the API server's pod proxy. Fields are only ever added, so
// that a newer plugin reads an older agent and the other way round.
package status

import (
	"time"

	"github.com/nfstune/nfstune/internal/audit"
)

// APIVersion and the kinds of the two documents.
const (
	APIVersion = "nfstune.io/v1alpha1"
	KindStatus = "AgentStatus"
	KindAudit  = "AgentAudit"
)

// Paths the agent serves the documents at, next to /metrics.
const (
	StatusPath = "/status"
	AuditPath  = "/audit"
)

// MaxListed is how many untuned mounts, stalled servers and recovery actions a Status lists
// at most; the counts cover them all.
const MaxListed = 20

// Status is one agent's report of itself and its node.
type Status struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Node is the node the agent runs on (the pod's spec.nodeName); empty outside a pod.
	Node string `json:"node,omitempty"`
	// Version is the nfstune version of the agent.
	Version string `json:"version"`
	// Ready is true once the agent's first reconcile is done (its /readyz).
	Ready bool `json:"ready"`
	// Unhealthy is why the agent's liveness check (/healthz) fails; empty while it passes.
	Unhealthy string `json:"unhealthy,omitempty"`
	// Mode is observe when the agent writes nothing (--observe, or the policy's default
	// mode), else enforce; a policy rule may still observe some mounts.
	Mode string `json:"mode"`
	// Policy names the policy in force.
	Policy Policy `json:"policy"`
	// GatheredAt is when the host was read. Reads are shared with /metrics: it is at most
	// the agent's --min-scrape-interval old, unless a read failed (ReadError).
	GatheredAt time.Time `json:"gatheredAt"`
	// ReadError is why the host could not be read; the counts are then those of the last
	// good read, or zero.
	ReadError string `json:"readError,omitempty"`
	// Mounts counts the NFS superblocks; Tuned those whose read-ahead is what the policy
	// wants (or above it, where profile values are minimums).
	Mounts int `json:"mounts"`
	Tuned  int `json:"tuned"`
	// Untuned lists the first MaxListed mounts that are not tuned.
	Untuned []Mount `json:"untuned,omitempty"`
	// Findings counts the audit's findings by severity.
	Findings Findings `json:"findings"`
	// Stalled lists the first MaxListed servers that stopped answering (NFS093).
	Stalled []Server `json:"stalled,omitempty"`
	// Recovery lists the first MaxListed actions the agent took or would take on the
	// mounts of dead servers; empty where the agent has no recovery.
	Recovery []RecoveryAction `json:"recovery,omitempty"`
	// Learned lists the read-ahead the agent's adaptive controllers settled on, per volume
	// (the agent's learned.json), sorted by server and export.
	Learned []Learned `json:"learned,omitempty"`
	// PodIO is the per-pod NFS I/O collector's view (agent --pod-io); nil when it is off.
	PodIO *PodIO `json:"podIO,omitempty"`
	// TrafficClasses lists the first MaxListed superblocks the agent classified over its
	// last interval with a class other than unknown, by device, each with why and its pods'
	// own classes: what the adaptive controller and NFS006 go by.
	TrafficClasses []TrafficClass `json:"trafficClasses,omitempty"`
}

// TrafficClass is how a superblock was read over the agent's last classified interval
// (docs/agent.md, Read traffic classes), and how each pod that uses it read.
type TrafficClass struct {
	Device     string     `json:"device"`
	MountPoint string     `json:"mountpoint,omitempty"`
	Class      string     `json:"class"`
	Why        string     `json:"why"`
	Pods       []PodClass `json:"pods,omitempty"`
}

// PodClass is one pod's class on a superblock, from its own counters.
type PodClass struct {
	PodUID string `json:"podUID"`
	Class  string `json:"class"`
	Why    string `json:"why"`
}

// PodIO is what an agent's per-pod NFS I/O collector sees: whether it runs, and the pods'
// traffic on each superblock over its last interval, busiest first.
type PodIO struct {
	Loaded bool `json:"loaded"`
	// Why says why the collector does not run, or which of its parts are missing.
	Why string `json:"why,omitempty"`
	// Pods lists the first MaxListed pairs of a pod and a superblock with traffic in the
	// last interval, by READ payload and then bytes read.
	Pods []PodTraffic `json:"pods,omitempty"`
}

// PodTraffic is one pod's NFS traffic on one superblock, per second over the agent's last
// interval. PodUID is empty for the node's own tasks (no pod's cgroup).
type PodTraffic struct {
	PodUID     string `json:"podUID"`
	Device     string `json:"device"`
	MountPoint string `json:"mountpoint,omitempty"`
	Server     string `json:"server,omitempty"`
	Export     string `json:"export,omitempty"`
	// ReadBytes is what read(2) returned, ServerReadBytes the READ payload of the READs
	// the pod started, FaultReadBytes the part of it started by page faults (mmap).
	ReadBytes       float64 `json:"readBytesPerSecond"`
	ServerReadBytes float64 `json:"serverReadBytesPerSecond"`
	FaultReadBytes  float64 `json:"faultReadBytesPerSecond"`
	WriteBytes      float64 `json:"writeBytesPerSecond"`
	MajorFaults     float64 `json:"majorFaultsPerSecond"`
	// ReadLatency is the mean time of the pod's READs, in seconds; 0 without READs.
	ReadLatency float64 `json:"readLatencySeconds"`
}

// Learned is the read-ahead an agent's adaptive controller settled on for a volume: an
// export of a server, as the node's mounts name them.
type Learned struct {
	Server      string    `json:"server"`
	Export      string    `json:"export"`
	ReadAheadKB int       `json:"readAheadKB"`
	At          time.Time `json:"at"`
}

// Policy identifies the policy an agent runs.
type Policy struct {
	// Name is the agent's --policy-name: the chart's node group, "default" for the nodes
	// of no group.
	Name string `json:"name,omitempty"`
	// File is the policy file; empty for the built-in profiles.
	File string `json:"file,omitempty"`
	// SHA256 is the hex SHA-256 of the file's bytes as loaded; empty for the built-in
	// profiles. Agents whose hashes differ run different policies.
	SHA256 string `json:"sha256,omitempty"`
	// LoadedAt is when the policy was last loaded.
	LoadedAt time.Time `json:"loadedAt,omitzero"`
}

// Mount is an NFS superblock whose read-ahead is not what the policy wants.
type Mount struct {
	Device     string `json:"device"`
	MountPoint string `json:"mountpoint"`
	Server     string `json:"server"`
	Export     string `json:"export"`
	// ReadAheadKB is the current read-ahead, WantKB the policy's, in KiB.
	ReadAheadKB int `json:"readAheadKB"`
	WantKB      int `json:"wantKB"`
	// Mode is the mount's policy mode: observe leaves it as it is.
	Mode string `json:"mode"`
}

// Findings counts findings by severity.
type Findings struct {
	Error   int `json:"error"`
	Warning int `json:"warning"`
	Info    int `json:"info"`
}

// Add counts one finding of severity.
func (f *Findings) Add(severity string) {
	switch severity {
	case audit.SeverityError:
		f.Error++
	case audit.SeverityWarning:
		f.Warning++
	case audit.SeverityInfo:
		f.Info++
	}
}

// AtLeast counts the findings at or above severity (audit.SeverityRank).
func (f Findings) AtLeast(severity string) int {
	n := 0
	for s, c := range map[string]int{audit.SeverityError: f.Error, audit.SeverityWarning: f.Warning, audit.SeverityInfo: f.Info} {
		if audit.SeverityRank(s) >= audit.SeverityRank(severity) {
			n += c
		}
	}
	return n
}

// Server is a server that stopped answering.
type Server struct {
	// Addr and Port are the transports' destination.
	Addr string `json:"addr"`
	Port int    `json:"port,omitempty"`
	// Waiting is the number of requests queued on its transports.
	Waiting int `json:"waiting"`
	// Mounts counts the superblocks using it; BlockedProcesses the processes the agent
	// found using them.
	Mounts           int `json:"mounts"`
	BlockedProcesses int `json:"blockedProcesses"`
}

// RecoveryAction is something the agent did, or in observe mode would do, to free the
// mounts of a dead server.
type RecoveryAction struct {
	Device string `json:"device,omitempty"`
	Server string `json:"server,omitempty"`
	// Action is what was or would be done (e.g. shutdown, report).
	Action string `json:"action"`
	// Mode is observe (reported only) or enforce.
	Mode string `json:"mode,omitempty"`
	// Outcome is how it ended: done, failed, skipped, pending.
	Outcome string    `json:"outcome,omitempty"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at,omitzero"`
}

// Audit is the full audit of one node, as the agent ran it on its last read.
type Audit struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Node       string    `json:"node,omitempty"`
	GatheredAt time.Time `json:"gatheredAt"`
	// Report holds the mounts, the policy resolved for each, the findings, and the
	// stalled servers with the processes using their mounts.
	audit.Report
	// Warnings are what the inventory could not read.
	Warnings []string `json:"warnings"`
}
