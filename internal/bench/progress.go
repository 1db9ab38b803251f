package bench

import (
	"fmt"
	"io"
	"math"
	"sync"
	"time"
)

// progress prints "job i/n" lines with elapsed time and an ETA to stderr. The ETA scales
// the remaining jobs' estimates by how the finished ones compared with theirs.
type progress struct {
	w     io.Writer
	every time.Duration
	now   func() time.Time

	mu       sync.Mutex
	total    int
	estTotal time.Duration
	start    time.Time
	done     int
	estDone  time.Duration
	curLabel string
	curEst   time.Duration
	curStart time.Time
	stopTick chan struct{}
	tickerWG sync.WaitGroup
}

func newProgress(w io.Writer, every time.Duration, now func() time.Time, total int, est time.Duration) *progress {
	return &progress{w: w, every: every, now: now, total: total, estTotal: est, start: now()}
}

func (p *progress) begin(label string, rep, reps int, est time.Duration) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	p.curLabel = fmt.Sprintf("%s, repeat %d/%d", label, rep, reps)
	p.curEst = est
	p.curStart = p.now()
	p.printLocked("starting")
	p.mu.Unlock()
	if p.every > 0 {
		p.stopTick = make(chan struct{})
		p.tickerWG.Add(1)
		go p.tick(p.stopTick)
	}
}

func (p *progress) tick(stop chan struct{}) {
	defer p.tickerWG.Done()
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.printLocked("running")
			p.mu.Unlock()
		}
	}
}

func (p *progress) end() {
	if p == nil || p.w == nil {
		return
	}
	if p.stopTick != nil {
		close(p.stopTick)
		p.tickerWG.Wait()
		p.stopTick = nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.estDone += p.curEst
}

func (p *progress) printLocked(state string) {
	now := p.now()
	elapsed := now.Sub(p.start)
	remainingEst := p.estTotal - p.estDone
	scale := 1.0
	if p.done > 0 && p.estDone > 0 {
		scale = float64(now.Sub(p.start)-now.Sub(p.curStart)) / float64(p.estDone)
	}
	running := now.Sub(p.curStart)
	eta := time.Duration(math.Max(0, float64(remainingEst)*scale-float64(running)))
	fmt.Fprintf(p.w, "bench: job %d/%d %s: %s %s, elapsed %s, eta %s\n",
		p.done+1, p.total, p.curLabel, state, running.Round(time.Second), elapsed.Round(time.Second), eta.Round(time.Second))
}

func round(v float64, digits int) float64 {
	f := math.Pow(10, float64(digits))
	return math.Round(v*f) / f
}

// humanBytes formats n with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
