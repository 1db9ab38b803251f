//go:build lab

// Package sidebyside compares the nfstune binary under test with one built from an earlier
// tree (the base) in one boot of the lab guest: the two run alternately, base first (ABAB),
// on the same kernel, nfsd and load, so that a regression shows as a ratio of the two and
// not as a time bound that the load of the emulating host can swing. lab/sidebyside.sh
// builds the base binary from a git ref and runs this package.
package sidebyside

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nfstune/nfstune/lab/labtest"
)

// The side-by-side tests' settings; the base binary's path and tree come in
// labtest.EnvBaseBin and labtest.EnvBaseRef.
const (
	// EnvRounds overrides how many runs of each binary a test makes (3).
	EnvRounds = "NFSTUNE_LAB_ROUNDS"
	// EnvMaxRatio overrides maxRatio.
	EnvMaxRatio = "NFSTUNE_LAB_MAX_RATIO"
)

// maxRatio is the regression these tests fail on: the tree under test slower than the base
// by more than this factor on the figure compared (the maximum over all runs). Smaller
// differences are reported, not failed on: one slow step of the emulation can move a single
// run's maximum by half.
const maxRatio = 2.0

// tree is one binary of the comparison.
type tree struct {
	name, bin string
}

// trees returns the base and the binary under test, in the order each round runs them.
func trees(t *testing.T) []tree {
	t.Helper()
	labtest.RequireGuest(t)
	base := os.Getenv(labtest.EnvBaseBin)
	if base == "" {
		t.Fatalf("%s is unset: lab/sidebyside.sh builds the base binary and passes it", labtest.EnvBaseBin)
	}
	ref := os.Getenv(labtest.EnvBaseRef)
	if ref == "" {
		ref = "base"
	}
	return []tree{{name: ref, bin: base}, {name: "head", bin: labtest.Bin(t)}}
}

// limitRatio returns maxRatio, or EnvMaxRatio when set.
func limitRatio(t *testing.T) float64 {
	t.Helper()
	s := os.Getenv(EnvMaxRatio)
	if s == "" {
		return maxRatio
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || r <= 1 {
		t.Fatalf("%s=%q: want a number above 1", EnvMaxRatio, s)
	}
	return r
}

// summary is one tree's figures over its runs.
type summary struct {
	name     string
	p50, max time.Duration
	n        int
}

func summarize(name string, ds []time.Duration) summary {
	s := slices.Clone(ds)
	slices.Sort(s)
	return summary{name: name, p50: s[(len(s)-1)/2], max: s[len(s)-1], n: len(s)}
}

// ratio is head over base, as a factor.
func ratio(head, base time.Duration) float64 {
	return float64(max(head, time.Microsecond)) / float64(max(base, time.Microsecond))
}

// compare logs the table of base and head and fails when head's maximum is more than
// limitRatio times the base's.
func compare(t *testing.T, what string, base, head summary) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s, side by side in one boot:\n", what)
	fmt.Fprintf(&b, "| tree | samples | p50 | max |\n| --- | --- | --- | --- |\n")
	for _, s := range []summary{base, head} {
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", s.name, s.n, round(s.p50), round(s.max))
	}
	fmt.Fprintf(&b, "| head / %s | | %.2fx | %.2fx |", base.name, ratio(head.p50, base.p50), ratio(head.max, base.max))
	t.Log(b.String())
	if r, limit := ratio(head.max, base.max), limitRatio(t); r > limit {
		t.Errorf("%s: head's max %s is %.2fx the base's %s (%s), more than %.1fx", what, round(head.max), r, round(base.max), base.name, limit)
	}
}

func round(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(100 * time.Microsecond)
}

// fmtRun formats one run's samples, sorted, in milliseconds.
func fmtRun(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
	}
	return strings.Join(parts, " ")
}
