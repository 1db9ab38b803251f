//go:build lab

package labtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// journalPath is where nfstune keeps its journal (tune.JournalPath).
const journalPath = "/var/lib/nfstune/journal.json"

// TestShutdown: nfstune shutdown refuses a device that is not NFS (tmpfs); on a kernel
// without /sys/fs/nfs/<dev>/shutdown (before Linux 6.6) it refuses with exit code 4,
// naming Linux 6.6 and the umount -f and -l alternatives, and writes no journal entry.
// From Linux 6.6 on, with two mounts (one from 127.0.0.2, the server that goes, one from
// 127.0.0.1, which stays): it refuses the first while its server answers (exit 3) and
// without --yes when stdin is not a terminal; with 127.0.0.2 gone and a reader blocked on
// it, a dry run shows who would get errors (and, apart, another NFSv3 superblock of
// 127.0.0.2's client) and changes nothing; the shutdown makes the reader fail with EIO, and
// a new read too, the attribute reads 1 and refuses 0, a plain unmount (neither forced nor
// lazy) succeeds, the other mount still reads and writes, and so does the superblock
// sharing the client once 127.0.0.2 is back; the journal holds the record, and nfstune
// revert shows it as not reversible.
func TestShutdown(t *testing.T) {
	RequireGuest(t)
	t.Logf("kernel %s", kernelRelease(t))

	r := RunNfstune(t, "shutdown", "--yes", ExportTmp)
	if r.Code != 2 || !strings.Contains(string(r.Stderr), "not an NFS superblock") {
		t.Errorf("shutdown of the tmpfs %s: exit %d, stderr %q; want 2 and \"not an NFS superblock\"", ExportTmp, r.Code, r.Stderr)
	}

	keep := Mount(t, MountSpec{Version: "4.2", Options: "hard,nosharecache"})
	// NFSv3: an NFSv4 mount of 127.0.0.2 would join the client of 127.0.0.1 (the same
	// server, found by trunking detection) and its requests would not go to 127.0.0.2.
	gone := Mount(t, MountSpec{Server: "127.0.0.2", Version: "3", Options: "hard,nosharecache"})
	attr := filepath.Join("/sys/fs/nfs", gone.Device, "shutdown")

	if !kernelAtLeast(t, 6, 6) {
		r := RunNfstune(t, "shutdown", "--yes", "--force", gone.Dir)
		t.Logf("nfstune shutdown --yes --force %s:\n%s%s", gone.Dir, r.Stdout, r.Stderr)
		for _, want := range []string{"needs Linux 6.6", "umount -f " + gone.Dir, "umount -l " + gone.Dir} {
			if !strings.Contains(string(r.Stderr), want) {
				t.Errorf("shutdown on kernel %s: stderr %q, want %q", kernelRelease(t), r.Stderr, want)
			}
		}
		if r.Code != 4 {
			t.Errorf("shutdown on kernel %s: exit %d, want 4 (no shutdown knob)", kernelRelease(t), r.Code)
		}
		if recs := shutdownRecords(t); len(recs) > 0 {
			t.Errorf("a refused shutdown left journal records: %+v", recs)
		}
		return
	}

	// Another superblock of the same kernel NFS client (same address, version and
	// transport): listed apart, and not shut down.
	sibling := Mount(t, MountSpec{Server: "127.0.0.2", Export: ExportDisk, Version: "3", Options: "hard,nosharecache"})

	r = RunNfstune(t, "shutdown", "--yes", gone.Dir)
	t.Logf("nfstune shutdown --yes %s, the server answering:\n%s%s", gone.Dir, r.Stdout, r.Stderr)
	if r.Code != 3 || !strings.Contains(string(r.Stderr), "--force") {
		t.Errorf("shutdown with the server answering: exit %d, stderr %q; want 3 and a hint at --force", r.Code, r.Stderr)
	}
	if v := readAttr(t, attr); v != "0" {
		t.Fatalf("%s = %q after a refused shutdown, want 0", attr, v)
	}

	if err := os.WriteFile(gone.Dir+"/data", make([]byte, 4<<20), 0o644); err != nil {
		t.Fatalf("writing test data: %v", err)
	}
	if out, err := exec.Command("dd", "if="+gone.Dir+"/data", "iflag=nocache", "count=0", "status=none").CombinedOutput(); err != nil {
		t.Fatalf("dropping cached pages: %v: %s", err, out)
	}
	// A shell whose working directory is on the mount, entered while the server answers:
	// the plan must name it among the processes that get errors (inventory.ReadHolders).
	// It leaves before the unmount, which it would keep busy.
	holder := exec.Command("sh", "-c", "cd "+ShellQuote(gone.Dir)+" && exec sleep 600")
	if err := holder.Start(); err != nil {
		t.Fatalf("starting a shell in %s: %v", gone.Dir, err)
	}
	holderDone := make(chan error, 1)
	go func() { holderDone <- holder.Wait() }()
	t.Cleanup(func() { _ = holder.Process.Kill(); <-holderDone }) //nolint:errcheck // killed: the exit status says so
	time.Sleep(500 * time.Millisecond)
	AddrGone(t, "127.0.0.2")
	var readerErr bytes.Buffer
	reader := exec.Command("cat", gone.Dir+"/data")
	reader.Stdout, reader.Stderr = nil, &readerErr
	if err := reader.Start(); err != nil {
		t.Fatalf("starting the reader: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- reader.Wait() }()
	t.Cleanup(func() {
		select {
		case <-done: //nolint:errcheck // the test checks the reader's end itself
		default:
			_ = reader.Process.Kill()
		}
	})
	time.Sleep(3 * time.Second)
	if st := ProcState(reader.Process.Pid); st == "" || st == "Z" {
		t.Fatalf("the reader of %s finished with 127.0.0.2 gone (state %q): nothing was blocked", gone.Dir, st)
	}

	r = RunNfstune(t, "shutdown", gone.Dir) // stdin is not a terminal
	if r.Code != 3 || !strings.Contains(string(r.Stderr), "--yes") {
		t.Errorf("shutdown without --yes and without a terminal: exit %d, stderr %q; want 3 and a hint at --yes", r.Code, r.Stderr)
	}
	r = RunNfstune(t, "shutdown", "--dry-run", "-o", "json", gone.Dir)
	var dry struct {
		Plan struct {
			Device   string `json:"device"`
			Stalled  *struct{ Addr string }
			Affected []struct{ Kind, Name string }
			Shared   []string `json:"shared_client"`
		} `json:"plan"`
	}
	if err := json.Unmarshal(r.Stdout, &dry); err != nil || r.Code != 0 {
		t.Fatalf("dry run: exit %d, %v; stdout:\n%s\nstderr:\n%s", r.Code, err, r.Stdout, r.Stderr)
	}
	if dry.Plan.Device != gone.Device || dry.Plan.Stalled == nil || dry.Plan.Stalled.Addr != "127.0.0.2" ||
		!slices.ContainsFunc(dry.Plan.Affected, func(h struct{ Kind, Name string }) bool { return h.Kind == "mount" && h.Name == gone.Dir }) {
		t.Errorf("dry run plan = %+v; want device %s, server 127.0.0.2 stalled, mount %s affected", dry.Plan, gone.Device, gone.Dir)
	}
	holderName := fmt.Sprintf("%d sleep", holder.Process.Pid)
	if !slices.ContainsFunc(dry.Plan.Affected, func(h struct{ Kind, Name string }) bool { return h.Kind == "process" && h.Name == holderName }) {
		t.Errorf("dry run: affected %+v; want the process %q, whose working directory is on %s", dry.Plan.Affected, holderName, gone.Dir)
	}
	if !slices.ContainsFunc(dry.Plan.Shared, func(s string) bool { return strings.HasPrefix(s, sibling.Device+" ") }) {
		t.Errorf("dry run: superblocks sharing the client %q, want %s (%s) among them", dry.Plan.Shared, sibling.Device, sibling.Dir)
	}
	if v := readAttr(t, attr); v != "0" {
		t.Fatalf("%s = %q after a dry run, want 0", attr, v)
	}

	r = RunNfstune(t, "shutdown", "--yes", gone.Dir)
	t.Logf("nfstune shutdown --yes %s:\n%s%s", gone.Dir, r.Stdout, r.Stderr)
	if r.Code != 0 {
		t.Fatalf("shutdown: exit %d; stderr:\n%s", r.Code, r.Stderr)
	}
	for _, want := range []string{"not answering", "mount  " + gone.Dir, "Shut down: wrote 1 to " + attr} {
		if !strings.Contains(string(r.Stdout), want) {
			t.Errorf("shutdown output lacks %q", want)
		}
	}
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || !strings.Contains(readerErr.String(), "Input/output error") {
			t.Errorf("the reader ended with %v, stderr %q; want a failure with EIO (Input/output error)", err, readerErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the reader of %s is still blocked 30 s after the shutdown (state %q)", gone.Dir, ProcState(reader.Process.Pid))
	}
	if v := readAttr(t, attr); v != "1" {
		t.Errorf("%s = %q after the shutdown, want 1", attr, v)
	}
	if err := os.WriteFile(attr, []byte("0\n"), 0o644); !errors.Is(err, unix.EINVAL) {
		t.Errorf("writing 0 to %s: %v; want EINVAL (the kernel cannot undo a shutdown)", attr, err)
	}
	// A request made after the shutdown fails at once too.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "cat", gone.Dir+"/data").CombinedOutput(); err == nil || !strings.Contains(string(out), "Input/output error") {
		t.Errorf("a new read of %s after the shutdown: %v, %q; want EIO", gone.Dir, err, out)
	}

	_ = holder.Process.Kill()
	<-holderDone      //nolint:errcheck // killed: the exit status says so
	holderDone <- nil // for the cleanup

	// The kernel's unmount, neither forced nor lazy. umount(8) would first have
	// umount.nfs send UMNT to 127.0.0.2's mountd, which is gone as well.
	start := time.Now()
	if err := unix.Unmount(gone.Dir, 0); err != nil {
		t.Errorf("unmounting %s after the shutdown: %v", gone.Dir, err)
	}
	t.Logf("umount2(%s, 0) after the shutdown: %s", gone.Dir, time.Since(start).Round(time.Millisecond))

	if out, err := writeRead(keep.Dir, 30*time.Second); err != nil {
		t.Errorf("the other mount %s after the shutdown: %v, %q; want it to write and read", keep.Dir, err, out)
	}
	// Once 127.0.0.2 is back, the other superblock of its client works: the shutdown
	// stopped one superblock, not the client.
	ServerBack(t)
	if out, err := writeRead(sibling.Dir, 60*time.Second); err != nil {
		t.Errorf("%s (%s), sharing the client of the superblock shut down, with the server back: %v, %q; want it to write and read", sibling.Dir, sibling.Device, err, out)
	}

	recs := shutdownRecords(t)
	if !slices.ContainsFunc(recs, func(e journalRecord) bool {
		return e.Path == attr && e.Done && e.Shutdown.Device == gone.Device && !e.Shutdown.Forced &&
			e.Shutdown.KernelRelease == kernelRelease(t) && slices.Contains(e.Shutdown.MountPoints, gone.Dir)
	}) {
		t.Errorf("journal shutdown records %+v; want one done for %s (%s) on %s, not forced", recs, gone.Device, gone.Dir, kernelRelease(t))
	}
	r = RunNfstune(t, "revert")
	if r.Code != 0 || !strings.Contains(string(r.Stdout), "[not reversible] shutdown ") {
		t.Errorf("revert: exit %d, stdout %q; want 0 and the shutdown shown as not reversible", r.Code, r.Stdout)
	}
	t.Logf("nfstune revert:\n%s", r.Stdout)
}

// writeRead writes a file in dir and reads it back, within limit.
func writeRead(dir string, limit time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	f := dir + "/after-shutdown"
	out, err := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf("echo still here > %q && cat %q", f, f)).CombinedOutput()
	if err == nil && string(out) != "still here\n" {
		err = fmt.Errorf("read back %q", out)
	}
	return out, err
}

// journalRecord is a journal entry as the lab test reads it.
type journalRecord struct {
	Kind     string `json:"kind"`
	Path     string `json:"path"`
	Done     bool   `json:"done"`
	Shutdown struct {
		Device        string   `json:"device"`
		MountPoints   []string `json:"mountpoints"`
		Forced        bool     `json:"forced"`
		KernelRelease string   `json:"kernel_release"`
	} `json:"shutdown"`
}

// shutdownRecords returns the shutdown entries of nfstune's journal, none without one.
func shutdownRecords(t *testing.T) []journalRecord {
	t.Helper()
	b, err := os.ReadFile(journalPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var j struct{ Entries []journalRecord }
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatalf("journal: %v", err)
	}
	var out []journalRecord
	for _, e := range j.Entries {
		if e.Kind == "shutdown" {
			out = append(out, e)
		}
	}
	return out
}

// readAttr reads a sysfs attribute, trimmed.
func readAttr(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("reading %s: %v", p, err)
	}
	return strings.TrimSpace(string(b))
}
