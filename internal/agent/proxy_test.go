package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// TestReconcileLeavesEFSUtilsReadAhead runs the agent with the built-in policy on a copy
// of the EFS tree: efs-utils set 15360 KiB (rsize 1 MiB) and 3840 KiB (rsize 256 KiB).
// The agent writes neither and counts no drift, also under a sequential-read policy that
// asks 15360 KiB; after a udev rule puts 128 KiB back, it restores efs-utils' own value,
// so neither side ever undoes the other.
func TestReconcileLeavesEFSUtilsReadAhead(t *testing.T) {
	t.Parallel()
	seq := filepath.Join(t.TempDir(), "seq.yaml")
	if err := os.WriteFile(seq, []byte("apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults: {workload: sequential-read}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, config := range map[string]string{"built-in": "", "sequential-read": seq} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := hostfs.Root(t.TempDir())
			if err := os.CopyFS(string(root), os.DirFS("../inventory/testdata/synthetic-efs-proxy")); err != nil {
				t.Fatal(err)
			}
			ra := func(dev string) int {
				t.Helper()
				n, err := hostfs.ReadInt(root.Sys("class", "bdi", dev, "read_ahead_kb"))
				if err != nil {
					t.Fatal(err)
				}
				return int(n)
			}
			a, err := New(Config{
				Root: root,
				Read: func(context.Context) (*inventory.Inventory, error) {
					return inventory.Read(root, inventory.ReadOptions{})
				},
				ReconcileRead: func(context.Context) (*inventory.Inventory, error) { return ReadMountTable(root, 0) },
				Load:          func() (*Policy, error) { return LoadPolicy(config, "", false) },
				Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.loadPolicy(); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			a.Reconcile(ctx, TriggerStart, time.Now())
			a.Reconcile(ctx, TriggerResync, time.Now())
			if got, got2 := ra("0:60"), ra("0:61"); got != 15360 || got2 != 3840 {
				t.Errorf("read_ahead_kb = %d, %d; want efs-utils' 15360, 3840 untouched", got, got2)
			}
			if n := testutil.ToFloat64(a.cfg.Metrics.Drifts); n != 0 {
				t.Errorf("drifts = %v, want 0", n)
			}
			// The one write: the forwarder no helper owns, at the kernel's 128 KiB.
			if n := testutil.ToFloat64(a.cfg.Metrics.Repairs.WithLabelValues("new")); n != 1 || ra("0:62") == 128 {
				t.Errorf("repairs{new} = %v, 0:62 at %d KiB; want one write, to 0:62", n, ra("0:62"))
			}
			for _, reason := range []string{"drift", "retry"} {
				if n := testutil.ToFloat64(a.cfg.Metrics.Repairs.WithLabelValues(reason)); n != 0 {
					t.Errorf("repairs{%s} = %v, want 0", reason, n)
				}
			}

			if err := os.WriteFile(root.Sys("class", "bdi", "0:61", "read_ahead_kb"), []byte("128\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			a.Reconcile(ctx, TriggerResync, time.Now())
			if got := ra("0:61"); got != 3840 {
				t.Errorf("after a udev reset: read_ahead_kb = %d, want efs-utils' 3840", got)
			}
			if n := testutil.ToFloat64(a.cfg.Metrics.Drifts); n != 1 {
				t.Errorf("drifts = %v, want 1 (the udev reset)", n)
			}
		})
	}
}
