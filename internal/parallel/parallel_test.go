package parallel

import (
	"slices"
	"sync/atomic"
	"testing"
)

func TestRanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n, workers, least int
		want              [][2]int
	}{
		{0, 2, 64, nil},
		{10, 2, 64, [][2]int{{0, 10}}},
		{127, 2, 64, [][2]int{{0, 127}}},
		{128, 2, 64, [][2]int{{0, 64}, {64, 128}}},
		{1000, 3, 64, [][2]int{{0, 333}, {333, 666}, {666, 1000}}},
		{200, 8, 64, [][2]int{{0, 66}, {66, 133}, {133, 200}}},
		{5, 1, 0, [][2]int{{0, 5}}},
	} {
		var got [][2]int
		for lo, hi := range Ranges(tc.n, tc.workers, tc.least) {
			got = append(got, [2]int{lo, hi})
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Ranges(%d, %d, %d) = %v, want %v", tc.n, tc.workers, tc.least, got, tc.want)
		}
	}
}

// TestDo: every index is visited once, whatever the worker count.
func TestDo(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{0, 1, 3, 16} {
		seen := make([]atomic.Int32, 1000)
		Do(len(seen), workers, 10, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if n := seen[i].Load(); n != 1 {
				t.Fatalf("workers %d: index %d visited %d times", workers, i, n)
			}
		}
	}
}

func TestGather(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{0, 1, 3, 16} {
		parts := Gather(1000, workers, 10, func(lo, hi int) []int {
			var out []int
			for i := lo; i < hi; i++ {
				out = append(out, i)
			}
			return out
		})
		var got []int
		for _, p := range parts {
			got = append(got, p...)
		}
		if len(got) != 1000 || !slices.IsSorted(got) || got[0] != 0 || got[999] != 999 {
			t.Errorf("workers %d: %d ranges gave %d indexes, first %v; want 0..999 in order", workers, len(parts), len(got), got[:min(3, len(got))])
		}
	}
	if got := Gather(0, 2, 10, func(lo, hi int) int { return 1 }); len(got) != 0 {
		t.Errorf("Gather over nothing = %v, want no results", got)
	}
}
