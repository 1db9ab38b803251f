package agent

import (
	"github.com/prometheus/procfs"

	"log/slog"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/readahead"
)

// readInv is one mount 0:60 whose applications and server have read app and server MiB.
func readInv(app, server uint64) *inventory.Inventory {
	ra := 15360
	return &inventory.Inventory{Mounts: []inventory.Mount{{
		Device: "0:60", MountPoints: []string{"/mnt/data"}, RSize: 1 << 20, ReadAheadKB: &ra,
		Stats: &inventory.Stats{Age: time.Hour, Bytes: inventoryBytes(app<<20, server<<20)},
	}}}
}

// TestVerdicts follows a write from the scrape before it to the scrape that closes its
// window after: 60 s at 100 MiB/s before, 60 s at 200 MiB/s after is "helped"; the same rate
// is "no_change"; a scrape too old to be a window before gives "too_little_traffic". The
// verdict goes with its superblock.
func TestVerdicts(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name      string
		lastAt    time.Time
		afterMiB  uint64
		want      readahead.Verdict
		wantEarly bool
	}{
		{name: "faster after", lastAt: t0.Add(-time.Minute), afterMiB: 12000, want: readahead.Helped},
		{name: "same rate", lastAt: t0.Add(-time.Minute), afterMiB: 6000, want: readahead.NoChange},
		{name: "no recent window before", lastAt: t0.Add(-time.Hour), afterMiB: 12000, want: readahead.TooLittleTraffic},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVerdicts(time.Minute, slog.New(slog.DiscardHandler))
			v.observe(readInv(10000, 10000), tt.lastAt) // the scrape before
			at := readInv(16000, 16000)                 // 6000 MiB read in the minute before the write
			v.started(at, t0, []written{{mount: &at.Mounts[0], from: 128, to: 15360}})
			if v.due(t0.Add(30*time.Second)) || len(v.latest()) != 0 {
				t.Fatal("judged before the window after closed")
			}
			v.observe(readInv(16000+tt.afterMiB, 16000+tt.afterMiB), t0.Add(time.Minute))
			if got := v.latest()["0:60"]; got != tt.want {
				t.Errorf("verdict = %q (%+v), want %q", got, v.judged["0:60"], tt.want)
			}
			v.observe(&inventory.Inventory{}, t0.Add(2*time.Minute))
			if len(v.latest()) != 0 {
				t.Errorf("verdict kept after the superblock went: %v", v.latest())
			}
		})
	}
}

func inventoryBytes(app, server uint64) procfs.NFSBytesStats {
	return procfs.NFSBytesStats{Read: app, ReadTotal: server}
}
