//go:build lab

package labtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// applyPolicy gives each export its own read-ahead: per-mount values that nfs-utils'
// nfsrahead (one value per file system type) cannot express. The scenario's mounts of the
// same exports are tuned too, and must be restored by revert.
const applyPolicy = `apiVersion: nfstune.io/v1alpha1
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
      mountpoint: ` + MountBase + `/apply-v3*
    readAheadKB: 2048
`

// applyUdevWait is the udev helper's bound in the lab. The guest's CPU is emulated (TCG),
// tens of times slower than hardware: a mount takes 2 to 13 s here, and its mountinfo entry
// can appear more than the default second after its bdi.
const applyUdevWait = "5s"

func applyConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, []byte(applyPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	// Whatever happens, leave the guest as it was for the next test.
	t.Cleanup(func() { RunNfstune(t, "revert") })
	return p
}

// applyArgs is an apply command line; the udev rule runs the binary under test.
func applyArgs(t *testing.T, config string, extra ...string) []string {
	return append([]string{"apply", "--config", config, "--udev-program", Bin(t), "--udev-wait", applyUdevWait}, extra...)
}

func runApply(t *testing.T, config string, extra ...string) Result {
	t.Helper()
	r := RunNfstune(t, applyArgs(t, config, extra...)...)
	t.Logf("stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
	return r
}

// mountAt mounts spec on MountBase/name (a name the policy's mount point rule can match).
func mountAt(t *testing.T, name string, spec MountSpec) Mounted {
	t.Helper()
	spec.Dir = filepath.Join(MountBase, name)
	t.Cleanup(func() { os.Remove(spec.Dir) })
	start := time.Now()
	m := Mount(t, spec)
	t.Logf("mounted %s on %s (bdi %s) in %s", m.Source, m.Dir, m.Device, time.Since(start).Round(time.Millisecond))
	return m
}

// hostState is every value and file apply may touch, for before/after comparisons: the
// read-ahead of every NFS superblock, the sysctls, and nfstune's files and directories.
func hostState(t *testing.T) map[string]string {
	t.Helper()
	s := map[string]string{}
	for _, m := range NFSMounts(t) {
		s["bdi "+m.Device] = strconv.Itoa(ReadAheadKB(t, m.Device))
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

// waitReadAheadKB polls a bdi until it has want, for up to ten seconds: udev handles the
// bdi's add event asynchronously, and mount returns before it is done.
func waitReadAheadKB(t *testing.T, dev string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := ReadAheadKB(t, dev)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("bdi %s read_ahead_kb = %d, want %d (set by the udev rule)", dev, got, want)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestApplyReadAheadUdevRevert: apply sets live read-ahead on every NFS mount the policy
// covers, with per-mount values; a second apply changes nothing; mounts made after apply get
// their value through the persisted udev rule; revert restores every value and file.
func TestApplyReadAheadUdevRevert(t *testing.T) {
	RequireGuest(t)
	config := applyConfig(t)
	scratch := mountAt(t, "apply-scratch", MountSpec{Export: ExportTmp, Version: "4.2"})
	data := mountAt(t, "apply-data", MountSpec{Export: ExportDisk, Version: "4.2"})
	v3 := mountAt(t, "apply-v3", MountSpec{Export: ExportTmp, Version: "3", Options: "nolock"})
	want := map[string]int{scratch.Device: 16384, data.Device: 4096, v3.Device: 2048}
	before := hostState(t)
	for dev, kb := range want {
		if ReadAheadKB(t, dev) == kb {
			t.Fatalf("bdi %s already has %d before apply", dev, kb)
		}
	}

	r := runApply(t, config, "--dry-run")
	if r.Code != 0 || !strings.Contains(string(r.Stdout), "Plan (dry run, nothing changed)") {
		t.Fatalf("dry run: exit %d", r.Code)
	}
	if diff := cmp.Diff(before, hostState(t)); diff != "" {
		t.Fatalf("dry run changed the host:\n%s", diff)
	}

	r = runApply(t, config)
	if r.Code != 0 {
		t.Fatalf("apply: exit %d", r.Code)
	}
	for dev, kb := range want {
		if got := ReadAheadKB(t, dev); got != kb {
			t.Errorf("after apply, bdi %s read_ahead_kb = %d, want %d", dev, got, kb)
		}
	}
	// Every NFS superblock of the /tmp export (the scenario's too) got the scratch value.
	for _, m := range NFSMounts(t) {
		if strings.HasSuffix(m.Source, ":/tmp") && ReadAheadKB(t, m.Device) != 16384 {
			t.Errorf("%s (%s) read_ahead_kb = %d after apply, want 16384", m.MountPoint, m.Device, ReadAheadKB(t, m.Device))
		}
	}
	if !strings.Contains(string(r.Stdout), "Read-ahead applies to files opened after the change") {
		t.Error("apply does not say that only newly opened files see the change")
	}
	if b, err := os.ReadFile("/proc/sys/sunrpc/tcp_slot_table_entries"); err != nil || strings.TrimSpace(string(b)) != "128" {
		t.Errorf("sunrpc.tcp_slot_table_entries = %q, %v; want 128", b, err)
	}

	r = runApply(t, config)
	if r.Code != 0 || !strings.Contains(string(r.Stdout), "Nothing to change") {
		t.Errorf("second apply: exit %d, want nothing to change", r.Code)
	}

	// udevd looks for changed rule files at most every 3 seconds.
	time.Sleep(4 * time.Second)
	rule, err := os.ReadFile("/etc/udev/rules.d/99-zz-nfstune-readahead.rules")
	if err != nil || !strings.Contains(string(rule), "--wait "+applyUdevWait+" %k") {
		t.Fatalf("udev rule: %v\n%s", err, rule)
	}
	newMounts := map[string]int{
		mountAt(t, "apply-scratch-new", MountSpec{Export: ExportTmp, Version: "4.2", Options: "nosharecache"}).Device: 16384,
		mountAt(t, "apply-data-new", MountSpec{Export: ExportDisk, Version: "4.2", Options: "nosharecache"}).Device:   4096,
		mountAt(t, "apply-v3-new", MountSpec{Export: ExportTmp, Version: "3", Options: "nolock,nosharecache"}).Device: 2048,
	}
	for dev, kb := range newMounts {
		if _, ok := want[dev]; ok {
			t.Fatalf("a new mount shares superblock %s", dev)
		}
		waitReadAheadKB(t, dev, kb)
	}

	if r := RunNfstune(t, "revert"); r.Code != 0 {
		t.Fatalf("revert: exit %d\n%s", r.Code, r.Stderr)
	}
	after := hostState(t)
	for dev := range newMounts {
		delete(after, "bdi "+dev) // made after apply: not apply's to restore
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("revert did not restore the host (-before +after):\n%s", diff)
	}
	if r := RunNfstune(t, "revert"); r.Code != 0 || !strings.Contains(string(r.Stdout), "Nothing to revert") {
		t.Errorf("second revert: exit %d\n%s", r.Code, r.Stdout)
	}
}

// TestApplyKilledThenRevert: apply is killed with SIGKILL after its first change; revert
// then restores everything.
func TestApplyKilledThenRevert(t *testing.T) {
	RequireGuest(t)
	config := applyConfig(t)
	mountAt(t, "apply-kill-scratch", MountSpec{Export: ExportTmp, Version: "4.2"})
	mountAt(t, "apply-kill-data", MountSpec{Export: ExportDisk, Version: "4.2"})
	before := hostState(t)

	cmd := exec.Command(Bin(t), applyArgs(t, config)...)
	cmd.Env = append(os.Environ(), "NFSTUNE_TEST_ACTION_DELAY=700ms")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for done, _ := journalProgress(t); done == 0; done, _ = journalProgress(t) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait() // killed: the exit status says so
			t.Fatal("no change journaled within 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("apply was not killed: %v", err)
	}
	done, total := journalProgress(t)
	t.Logf("killed with %d of %d journaled changes done", done, total)
	if done >= total {
		t.Fatalf("apply finished (%d of %d) before it was killed", done, total)
	}
	if diff := cmp.Diff(before, hostState(t)); diff == "" {
		t.Fatal("nothing changed before the kill")
	}

	if r := RunNfstune(t, "revert"); r.Code != 0 {
		t.Fatalf("revert: exit %d\n%s", r.Code, r.Stderr)
	}
	if diff := cmp.Diff(before, hostState(t)); diff != "" {
		t.Errorf("revert after kill -9 did not restore the host (-before +after):\n%s", diff)
	}
}

// journalProgress counts the journal's value and file entries and those marked done.
func journalProgress(t *testing.T) (done, total int) {
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
