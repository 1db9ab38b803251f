package cli

import (
	"os"
	"runtime/debug"
)

// batchGCPercent is the garbage collector's target for a command that reads the host once
// and exits (audit): the heap may grow to three times what is live before a collection,
// rather than the runtime's twice. Such a command allocates many times what it keeps, and
// at twice the collections took about a third of an audit of 1,000 mounts
// (BenchmarkAuditCommand1000, docs/benchmarks.md). No memory limit goes with it: a soft
// limit below what a large host's audit keeps makes the collector run without pause.
const batchGCPercent = 200

// batchGC sets the collector for a one-shot command and returns the function that puts the
// earlier setting back. GOGC or GOMEMLIMIT in the environment are the user's choice: with
// either set, it changes nothing.
func batchGC() (restore func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	percent := debug.SetGCPercent(batchGCPercent)
	return func() { debug.SetGCPercent(percent) }
}
