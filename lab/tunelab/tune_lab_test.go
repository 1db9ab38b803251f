//go:build lab

// Package tunelab runs nfstune apply and revert against real NFS mounts of the lab's nfsd,
// with the guest's udevd, inside the lab guest (Debian 12 kernel under qemu). Build on the
// host, run in the guest:
//
//	CGO_ENABLED=0 go test -c -tags lab -o lab/.cache/tunelab.test ./lab/tunelab
//	lab/vm.sh -- lab/.cache/tunelab.test -test.v
//
// The test binary is also the nfstune binary: run through a symlink named "nfstune" it
// executes the command line, which is how the udev rule apply writes calls it.
package tunelab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/nfstune/nfstune/internal/app"
)

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "nfstune" {
		os.Exit(app.Main())
	}
	os.Exit(m.Run())
}

const mntBase = "/mnt/lab/tune"

// policyYAML gives each export its own read-ahead: per-mount values that nfs-utils'
// nfsrahead (one value per file system type) cannot express.
const policyYAML = `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - name: scratch
    match:
      export: /tmp
    readAheadKB: 16384
    sysctls:
      sunrpc.tcp_slot_table_entries: 128
  - name: data disk
    match:
      export: /disk
    readAheadKB: 4096
  - name: v3 tools
    match:
      mountpoint: ` + mntBase + `/v3*
    readAheadKB: 2048
`

// lab holds the nfstune symlink and the policy file.
type lab struct {
	bin, config string
}

func setup(t *testing.T) *lab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the lab tests run as root inside the lab guest")
	}
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{bin: filepath.Join(dir, "nfstune"), config: filepath.Join(dir, "policy.yaml")}
	if err := os.Symlink(exe, l.bin); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.config, []byte(policyYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.run(t, nil, "revert") })
	return l
}

// run executes nfstune with args and returns its stdout and exit code.
func (l *lab) run(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.bin, args...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("nfstune %v: %v", args, err)
	}
	t.Logf("$ nfstune %s  (exit %d)\n%s%s", strings.Join(args, " "), code, out, stderr.String())
	return string(out), code
}

// udevWait is the udev helper's bound in the lab. The guest's CPU is emulated (TCG), tens of
// times slower than hardware: a mount takes 2-12 s here, and its mountinfo entry can appear
// more than the default second after its bdi.
const udevWait = "5s"

func (l *lab) apply(t *testing.T, env []string, extra ...string) (string, int) {
	return l.run(t, env, append([]string{"apply", "--config", l.config, "--udev-program", l.bin, "--udev-wait", udevWait}, extra...)...)
}

// mount mounts an export of the lab's nfsd and returns the superblock's bdi name.
func mount(t *testing.T, source, dir, opts string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mount", "-t", "nfs", "-o", opts, source, dir)
	cmd.WaitDelay = 5 * time.Second // a helper mount.nfs starts may keep the output pipe open
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mount %s %s: %v\n%s", source, dir, err, out)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	dev := deviceOf(t, dir)
	if dev == "" {
		t.Fatalf("%s is not in mountinfo", dir)
	}
	t.Logf("mounted %s on %s (%s, bdi %s) in %v", source, dir, opts, dev, time.Since(start).Round(time.Millisecond))
	return dev
}

// deviceOf finds a mount point's superblock in mountinfo (never stat'ing the mount point).
func deviceOf(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	dev := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == dir {
			dev = f[2]
		}
	}
	return dev
}

func readAhead(t *testing.T, dev string) int {
	t.Helper()
	b, err := os.ReadFile("/sys/class/bdi/" + dev + "/read_ahead_kb")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// state is every value and file apply may touch, for before/after comparisons.
func state(t *testing.T, devs []string) map[string]string {
	t.Helper()
	s := map[string]string{}
	for _, dev := range devs {
		s["bdi "+dev] = strconv.Itoa(readAhead(t, dev))
	}
	for _, p := range []string{"/proc/sys/sunrpc/tcp_slot_table_entries", "/proc/sys/net/core/rmem_max", "/proc/sys/net/core/wmem_max", "/etc/fstab"} {
		b, err := os.ReadFile(p)
		s[p] = string(b)
		if err != nil {
			s[p] = "error: " + err.Error()
		}
	}
	for _, dir := range []string{"/etc/udev/rules.d", "/etc/sysctl.d", "/etc/nfs.conf.d", "/var/lib/nfstune"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				s[p] = "absent"
				return nil
			}
			if d.IsDir() {
				s[p+"/"] = ""
				return nil
			}
			b, err := os.ReadFile(p)
			fi, _ := d.Info()
			s[p] = fmt.Sprintf("%v %s", fi.Mode(), b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// waitReadAhead polls a bdi until it has want, for up to ten seconds: udev handles the
// bdi's add event asynchronously, and the mount command returns before it is done.
func waitReadAhead(t *testing.T, dev string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := readAhead(t, dev)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("bdi %s read_ahead_kb = %d, want %d", dev, got, want)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestApplyUdevRevert: apply sets live read-ahead on every NFS mount, per-mount values
// differ as the policy says, a mount made after apply gets its value through the persisted
// udev rule, a second apply changes nothing, and revert restores every value and file.
func TestApplyUdevRevert(t *testing.T) {
	l := setup(t)
	devs := []string{
		mount(t, "127.0.0.1:/tmp", mntBase+"/scratch", "vers=4.2"),
		mount(t, "127.0.0.1:/disk", mntBase+"/data", "vers=4.2"),
		mount(t, "127.0.0.1:/srv/tmp", mntBase+"/v3", "vers=3,nolock"),
	}
	want := map[string]int{devs[0]: 16384, devs[1]: 4096, devs[2]: 2048}
	before := state(t, devs)
	for _, dev := range devs {
		if readAhead(t, dev) == want[dev] {
			t.Fatalf("bdi %s already has %d before apply", dev, want[dev])
		}
	}

	out, code := l.apply(t, nil, "--dry-run")
	if code != 0 || !strings.Contains(out, "Plan (dry run, nothing changed)") {
		t.Fatalf("dry run: exit %d", code)
	}
	if diff := cmp.Diff(before, state(t, devs)); diff != "" {
		t.Fatalf("dry run changed the host:\n%s", diff)
	}

	out, code = l.apply(t, nil)
	if code != 0 {
		t.Fatalf("apply: exit %d", code)
	}
	for _, dev := range devs {
		if got := readAhead(t, dev); got != want[dev] {
			t.Errorf("after apply, bdi %s read_ahead_kb = %d, want %d", dev, got, want[dev])
		}
	}
	if !strings.Contains(out, "Read-ahead applies to files opened after the change") {
		t.Error("apply does not say that only newly opened files see the change")
	}
	if b, err := os.ReadFile("/proc/sys/sunrpc/tcp_slot_table_entries"); err != nil || strings.TrimSpace(string(b)) != "128" {
		t.Errorf("sunrpc.tcp_slot_table_entries = %q, %v; want 128", b, err)
	}

	out, code = l.apply(t, nil)
	if code != 0 || !strings.Contains(out, "Nothing to change") {
		t.Errorf("second apply: exit %d, want nothing to change", code)
	}

	// udevd looks for changed rule files at most every 3 seconds.
	time.Sleep(4 * time.Second)
	rule, err := os.ReadFile("/etc/udev/rules.d/99-zz-nfstune-readahead.rules")
	if err != nil || !strings.Contains(string(rule), "--wait "+udevWait+" %k") {
		t.Fatalf("udev rule: %v\n%s", err, rule)
	}
	newDevs := map[string]int{
		mount(t, "127.0.0.1:/tmp", mntBase+"/scratch-new", "vers=4.2,nosharecache"): 16384,
		mount(t, "127.0.0.1:/disk", mntBase+"/data-new", "vers=4.2,nosharecache"):   4096,
		mount(t, "127.0.0.1:/srv/tmp", mntBase+"/v3-new", "vers=3,nolock,nosharecache"):    2048,
	}
	for dev, kb := range newDevs {
		if slices.Contains(devs, dev) {
			t.Fatalf("new mount shares superblock %s", dev)
		}
		waitReadAhead(t, dev, kb)
	}
	for _, dir := range []string{"scratch-new", "data-new", "v3-new"} {
		if err := unix.Unmount(mntBase+"/"+dir, 0); err != nil {
			t.Fatal(err)
		}
	}

	if _, code := l.run(t, nil, "revert"); code != 0 {
		t.Fatalf("revert: exit %d", code)
	}
	if diff := cmp.Diff(before, state(t, devs)); diff != "" {
		t.Errorf("revert did not restore the host (-before +after):\n%s", diff)
	}
	if out, code := l.run(t, nil, "revert"); code != 0 || !strings.Contains(out, "Nothing to revert") {
		t.Errorf("second revert: exit %d", code)
	}
}

// TestKillDuringApply: apply is killed with SIGKILL after its first change; revert then
// restores everything.
func TestKillDuringApply(t *testing.T) {
	l := setup(t)
	devs := []string{
		mount(t, "127.0.0.1:/tmp", mntBase+"/kill-scratch", "vers=4.2"),
		mount(t, "127.0.0.1:/disk", mntBase+"/kill-data", "vers=4.2"),
	}
	before := state(t, devs)

	cmd := exec.Command(l.bin, "apply", "--config", l.config, "--udev-program", l.bin, "--udev-wait", udevWait)
	cmd.Env = append(os.Environ(), "NFSTUNE_TEST_ACTION_DELAY=700ms")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the journal shows one change done, then kill.
	deadline := time.Now().Add(30 * time.Second)
	done := 0
	for done == 0 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no change journaled within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
		done, _ = journalDone(t)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("apply was not killed: %v", err)
	}
	done, total := journalDone(t)
	t.Logf("killed with %d of %d journaled changes done", done, total)
	if done >= total {
		t.Fatalf("apply finished (%d of %d) before it was killed", done, total)
	}
	if diff := cmp.Diff(before, state(t, devs)); diff == "" {
		t.Fatal("nothing changed before the kill")
	}

	if _, code := l.run(t, nil, "revert"); code != 0 {
		t.Fatalf("revert: exit %d", code)
	}
	if diff := cmp.Diff(before, state(t, devs)); diff != "" {
		t.Errorf("revert after kill -9 did not restore the host (-before +after):\n%s", diff)
	}
}

// journalDone counts the journal's entries and those marked done.
func journalDone(t *testing.T) (done, total int) {
	t.Helper()
	b, err := os.ReadFile("/var/lib/nfstune/journal.json")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Entries []struct {
			Kind string `json:"kind"`
			Done bool   `json:"done"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatalf("journal: %v", err)
	}
	for _, e := range j.Entries {
		if e.Kind == "dir" {
			continue
		}
		total++
		if e.Done {
			done++
		}
	}
	return done, total
}
