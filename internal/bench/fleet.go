package bench

import (
	"encoding/json"
	"strings"
	"time"
)

// A fleet curve is the load curve drawn by several pods at once (kubectl nfstune bench):
// every pod runs the curve's steps on its own directory, each step starting at the same
// time in every pod, and writes one JSON line per event on its standard output, which the
// command reads from the pods' logs and adds up.

// FleetEvent names a line of a fleet curve's pod.
type FleetEvent string

// The events of a fleet curve's pod, in the order a pod writes them.
const (
	// FleetReady: the pod's files are laid out; it waits for the common start.
	FleetReady FleetEvent = "ready"
	// FleetStep: one step measured.
	FleetStep FleetEvent = "step"
	// FleetError: the pod gave up; its directory has been removed.
	FleetError FleetEvent = "error"
)

// FleetLine is one line of a fleet curve's pod. Its first key marks it among the pod's
// other output (progress lines on stderr share the log).
type FleetLine struct {
	Event FleetEvent `json:"nfstune_fleet_curve"`
	// Index is the pod's completion index in the Job.
	Index int `json:"index"`
	// Pod is filled in by the reader of the log, from the pod's name.
	Pod    string `json:"pod,omitempty"`
	Node   string `json:"node,omitempty"`
	Volume string `json:"volume,omitempty"`
	// Dir is the pod's directory on its volume.
	Dir string `json:"dir,omitempty"`
	// Step counts from 1.
	Step   int        `json:"step,omitempty"`
	Result *CurveStep `json:"result,omitempty"`
	// Tuning is the pod's mount as the pod reads it: mountinfo and mountstats of its own
	// mount namespace, read_ahead_kb from /sys/class/bdi/<major:minor>.
	Tuning  *Tuning   `json:"tuning,omitempty"`
	Started time.Time `json:"started,omitzero"`
	Error   string    `json:"error,omitempty"`
}

const fleetLinePrefix = `{"nfstune_fleet_curve":`

// ParseFleetLines returns the fleet curve lines of a pod's log, skipping every other line.
func ParseFleetLines(log string) []FleetLine {
	var out []FleetLine
	for line := range strings.Lines(log) {
		if !strings.HasPrefix(line, fleetLinePrefix) {
			continue
		}
		var l FleetLine
		if json.Unmarshal([]byte(line), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// FleetSchedule is when each step of a fleet curve starts in every pod: step i (from 0)
// at Start plus i periods. A period is a step's ramp and runtime and a gap for fio to
// start and stop, so that one common start time is the only thing the pods are told.
type FleetSchedule struct {
	Start  time.Time
	Period time.Duration
}

// StepStart is when step i (from 0) starts.
func (s FleetSchedule) StepStart(i int) time.Time {
	return s.Start.Add(time.Duration(i) * s.Period)
}
