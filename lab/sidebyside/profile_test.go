//go:build lab

package sidebyside

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/agent"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/metrics"
	"github.com/nfstune/nfstune/lab/labtest"
)

// TestReactionProfile runs the reaction case once with the agent of this tree in the test's
// own process, as `nfstune agent --resync 2s` runs it (agent.Run with the command's
// defaults), and writes its CPU and block profiles to the run directory the host shares
// (cpu-reaction.pprof, block-reaction.pprof): what the agent spends the 20 mounts on. It
// compares nothing; run it by name.
func TestReactionProfile(t *testing.T) {
	labtest.RequireGuest(t)
	dir := os.Getenv(labtest.EnvRun)
	logPath := filepath.Join(dir, "agent-profile.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cpu, err := os.Create(filepath.Join(dir, "cpu-reaction.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	runtime.SetBlockProfileRate(int(time.Millisecond.Nanoseconds() / 10))
	defer runtime.SetBlockProfileRate(0)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, agent.Options{
			Root: hostfs.Root("/"), PID: 1, Resync: 2 * time.Second, Listen: agentListen,
			Tier: metrics.TierDefault, MaxSeries: 100000, MinScrapeInterval: agent.DefaultMinScrapeInterval,
			MemoryLimit: 16 << 20,
			Logger:      slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !ready() {
		if time.Now().After(deadline) {
			t.Fatal("agent not ready after 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		t.Fatal(err)
	}
	base := labtest.MountDir(t)
	var reactions []time.Duration
	for i := range reactionMounts {
		d := filepath.Join(base, fmt.Sprintf("m%02d", i))
		mountV3(t, d)
		t.Cleanup(func() { labtest.Umount(t, d) })
		mounted := time.Now()
		dev := deviceOf(t, d)
		set, ok := waitAbove(dev, defaultKB, mounted.Add(reactionLimit))
		if !ok {
			t.Fatalf("%s (%s) not tuned %s after its mount", d, dev, reactionLimit)
		}
		reactions = append(reactions, max(0, set.Sub(mounted)))
	}
	pprof.StopCPUProfile()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("agent: %v", err)
	}
	block, err := os.Create(filepath.Join(dir, "block-reaction.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	defer block.Close()
	if err := pprof.Lookup("block").WriteTo(block, 0); err != nil {
		t.Fatal(err)
	}
	s := summarize("head", reactions)
	t.Logf("in-process agent: p50 %s, max %s; sorted (ms): %s; profiles and log in %s", round(s.p50), round(s.max), fmtRun(reactions), dir)
}
