// Package parallel runs one loop over independent elements on every CPU: the audit's rules
// and the parse of mountstats on nodes with thousands of mounts. Each call splits the
// elements into contiguous ranges, so that results written by index keep their order
// without a lock.
package parallel

import (
	"iter"
	"runtime"
	"sync"
)

// Ranges splits [0, n) into at most workers contiguous ranges of at least least elements
// each (one range when n is smaller), in order.
func Ranges(n, workers, least int) iter.Seq2[int, int] {
	parts := max(min(workers, n/max(least, 1)), 1)
	return func(yield func(int, int) bool) {
		for p := range parts {
			lo, hi := n*p/parts, n*(p+1)/parts
			if lo < hi && !yield(lo, hi) {
				return
			}
		}
	}
}

// Do calls f on the ranges of Ranges(n, workers, least), each in a goroutine of its own,
// and returns when all have returned. workers below 1 means one per CPU (GOMAXPROCS).
func Do(n, workers, least int, f func(lo, hi int)) {
	Gather(n, workers, least, func(lo, hi int) struct{} {
		f(lo, hi)
		return struct{}{}
	})
}

// Gather is Do for work that returns a result: it returns f's results in the ranges'
// order (so a sequence cut into ranges comes back whole in its order).
func Gather[T any](n, workers, least int, f func(lo, hi int) T) []T {
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	type span struct{ lo, hi int }
	var spans []span
	for lo, hi := range Ranges(n, workers, least) {
		spans = append(spans, span{lo, hi})
	}
	out := make([]T, len(spans))
	var wg sync.WaitGroup
	for i, s := range spans {
		wg.Go(func() { out[i] = f(s.lo, s.hi) })
	}
	wg.Wait()
	return out
}
