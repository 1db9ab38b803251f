//go:build lab

package sidebyside

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nfstune/nfstune/lab/labtest"
)

// auditRounds is how many audits of each binary TestAuditServerGoneSideBySide times per
// way the server goes.
const auditRounds = 3

// TestAuditServerGoneSideBySide times `nfstune audit` of the base binary and the one under
// test, alternately, with a hard mount whose server is gone and a reader blocked on it
// (as lab/labtest's TestAuditWithServerGone sets up), both ways the server can go, and fails
// when the tree under test's slowest audit is more than maxRatio times the base's.
func TestAuditServerGoneSideBySide(t *testing.T) {
	ts := trees(t)
	got := make([][]time.Duration, len(ts))
	for _, how := range []string{labtest.GoneLoss, labtest.GoneStop} {
		t.Run(how, func(t *testing.T) {
			serverGoneWithReader(t, how)
			for n := range labtest.EnvCount(t, EnvRounds, auditRounds) {
				for i, tr := range ts {
					d, stages := timeAudit(t, tr.bin)
					got[i] = append(got[i], d)
					t.Logf("server gone (%s), round %d, %s: audit %s; its stages:\n%s", how, n+1, tr.name, round(d), stages)
				}
			}
		})
	}
	compare(t, fmt.Sprintf("audit with the server gone (both ways, %d runs each)", labtest.EnvCount(t, EnvRounds, auditRounds)),
		summarize(ts[0].name, got[0]), summarize(ts[1].name, got[1]))
}

// serverGoneWithReader mounts a hard NFSv4.1 superblock of its own, makes its server go
// (how), and leaves a reader blocked on it until the test ends.
func serverGoneWithReader(t *testing.T, how string) {
	t.Helper()
	m := labtest.Mount(t, labtest.MountSpec{Export: labtest.ExportTmp, Version: "4.1", Options: "hard,nosharecache"})
	if err := os.WriteFile(m.Dir+"/data", make([]byte, 4<<20), 0o644); err != nil {
		t.Fatalf("writing test data: %v", err)
	}
	// Drop the client's cached pages so the reader has to ask the server.
	if out, err := exec.Command("dd", "if="+m.Dir+"/data", "iflag=nocache", "count=0", "status=none").CombinedOutput(); err != nil {
		t.Fatalf("dropping cached pages: %v: %s", err, out)
	}
	labtest.ServerGone(t, how)
	reader := exec.Command("cat", m.Dir+"/data")
	if err := reader.Start(); err != nil {
		t.Fatalf("starting the reader: %v", err)
	}
	t.Cleanup(func() {
		labtest.ServerBack(t)
		done := make(chan error, 1)
		go func() { done <- reader.Wait() }()
		select {
		case <-done: //nolint:errcheck // the reader may fail by design; only its end matters
		case <-time.After(60 * time.Second):
			_ = reader.Process.Kill()
		}
	})
	time.Sleep(3 * time.Second)
	if st := labtest.ProcState(reader.Process.Pid); st == "" || st == "Z" {
		t.Fatalf("the reader of %s finished with the server gone (state %q): nothing was blocked", m.Dir, st)
	}
}

// timeAudit runs `bin audit -o json --log-level debug` and returns how long it took and
// its stage timings (the debug lines that carry an elapsed time).
func timeAudit(t *testing.T, bin string) (time.Duration, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "audit", "-o", "json", "--log-level", "debug")
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	// Exit 1 means findings; 2 is a usage or read error.
	var exitErr *exec.ExitError
	if err != nil && (!errors.As(err, &exitErr) || exitErr.ExitCode() != 1) {
		t.Fatalf("%s audit: %v after %s\n%s", bin, err, d, stderr.String())
	}
	var stages []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "elapsed") {
			stages = append(stages, line)
		}
	}
	return d, strings.Join(stages, "\n")
}
