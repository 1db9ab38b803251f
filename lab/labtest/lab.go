//go:build lab

package labtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Environment set by lab/guest/run.sh and the lab-test target.
const (
	// EnvBin is the path of the nfstune binary under test.
	EnvBin = "NFSTUNE_BIN"
	// EnvRun is the per-boot run directory, shared with the host.
	EnvRun = "LAB_RUN"
	// EnvBaseBin is the path of a binary built from an earlier tree, EnvBaseRef the tree's
	// name: lab/sidebyside.sh builds it and passes both, for the tests that run the two side
	// by side in one boot (lab/sidebyside, the read-ahead table's base arm).
	EnvBaseBin = "NFSTUNE_LAB_BASE_BIN"
	EnvBaseRef = "NFSTUNE_LAB_BASE_REF"
)

// Paths inside the guest. They mirror lab/guest/lib.sh.
const (
	// MountBase is the tmpfs holding the scenario's mount points and MountDir's.
	MountBase = "/mnt/lab"
	// ExportRoot is the NFSv4 pseudo root (fsid=0); NFSv4 paths are relative to it.
	ExportRoot = "/srv"
	// ExportTmp is a tmpfs export (fsid=1); ExportDisk an ext4 image export (fsid=2)
	// for large files.
	ExportTmp  = "/srv/tmp"
	ExportDisk = "/srv/disk"
)

// labctl is lab/guest/labctl, the guest's control script.
func labctl(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command("labctl", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("labctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// RequireGuest stops the test when it is not running inside the lab guest.
func RequireGuest(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvRun) == "" {
		t.Fatalf("%s is unset: lab tests run inside the lab guest; use make lab-test", EnvRun)
	}
}

// Bin returns the nfstune binary under test.
func Bin(t testing.TB) string {
	t.Helper()
	b := os.Getenv(EnvBin)
	if b == "" {
		t.Fatalf("%s is unset: make lab-test passes the freshly built binary", EnvBin)
	}
	return b
}

// ExportPath is the path a client mounts export (ExportTmp or ExportDisk) by with NFS
// version vers: the server path for NFSv3, the path below the pseudo root for NFSv4.
func ExportPath(export, vers string) string {
	if vers == "3" {
		return export
	}
	return strings.TrimPrefix(export, ExportRoot)
}

// MountDir makes a fresh empty directory on the guest's mount-point tmpfs and removes it
// when the test ends.
func MountDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp(MountBase, strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())+".")
	if err != nil {
		t.Fatalf("making a mount point: %v", err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	return dir
}

// MountSpec describes one NFS mount for Mount.
type MountSpec struct {
	// Server is the server address; default 127.0.0.1 (127.0.0.2 is the same nfsd).
	Server string
	// Export is ExportTmp or ExportDisk; default ExportTmp.
	Export string
	// Version is the NFS version: "3", "4.0", "4.1" or "4.2"; default "4.2".
	Version string
	// Options are more mount options, comma-separated, e.g. "nconnect=4,rsize=1048576".
	Options string
	// Dir is the mount point; default a fresh MountDir.
	Dir string
}

// Mounted is a mount made by Mount.
type Mounted struct {
	Dir    string
	Source string
	// Device is the superblock's "major:minor" from /proc/self/mountinfo.
	Device string
}

// Mount mounts spec, waits at most 2 minutes, and unmounts when the test ends.
func Mount(t testing.TB, spec MountSpec) Mounted {
	t.Helper()
	if spec.Server == "" {
		spec.Server = "127.0.0.1"
	}
	if spec.Export == "" {
		spec.Export = ExportTmp
	}
	if spec.Version == "" {
		spec.Version = "4.2"
	}
	if spec.Dir == "" {
		spec.Dir = MountDir(t)
	}
	opts := "vers=" + spec.Version
	if spec.Options != "" {
		opts += "," + spec.Options
	}
	src := spec.Server + ":" + ExportPath(spec.Export, spec.Version)
	labctl(t, "mount", src, spec.Dir, opts)
	t.Cleanup(func() { Umount(t, spec.Dir) })
	m := Mounted{Dir: spec.Dir, Source: src}
	for _, e := range MountInfo(t) {
		if e.MountPoint == spec.Dir {
			m.Device = e.Device
		}
	}
	if m.Device == "" {
		t.Fatalf("mounted %s on %s but /proc/self/mountinfo does not show it", src, spec.Dir)
	}
	return m
}

// EnvCount returns the whole number of at least 1 in the environment variable name, def
// when it is unset, and ends the test on any other value.
func EnvCount(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a whole number of at least 1", name, v)
	}
	return n
}

// WaitUdev waits until udev has handled its queued events. A test that writes read_ahead_kb
// of a new mount waits first: nfs-common's rule (99-nfs.rules, nfsrahead) writes its own
// value to each new bdi, and on a busy guest that can come seconds after the mount, over
// the test's.
func WaitUdev(t testing.TB) {
	t.Helper()
	if out, err := exec.Command("udevadm", "settle", "--timeout=60").CombinedOutput(); err != nil {
		t.Fatalf("udevadm settle: %v: %s", err, out)
	}
}

// Umount unmounts dir, lazily and with force if a plain umount does not finish in 30 s
// (a hung server). A dir the test unmounted itself is left alone.
func Umount(t testing.TB, dir string) {
	t.Helper()
	if !slices.ContainsFunc(MountInfo(t), func(e MountInfoEntry) bool { return e.MountPoint == dir }) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "umount", dir).CombinedOutput(); err != nil {
		if out2, err2 := exec.Command("umount", "-f", "-l", dir).CombinedOutput(); err2 != nil {
			t.Errorf("umount %s: %v: %s; umount -f -l: %v: %s", dir, err, out, err2, out2)
		}
	}
}

// Link emulates a network link on the guest's loopback with netem until the test ends:
// delay each way (the round trip is 2 x delay), rate ("1gbit", "140mbit", "" for none) and
// loss in percent.
func Link(t testing.TB, delay time.Duration, rate string, loss float64) {
	t.Helper()
	var args []string
	if delay > 0 {
		args = append(args, fmt.Sprintf("delay=%dus", delay.Microseconds()))
	}
	if rate != "" {
		args = append(args, "rate="+rate)
	}
	if loss > 0 {
		args = append(args, "loss="+strconv.FormatFloat(loss, 'f', -1, 64)+"%")
	}
	labctl(t, append([]string{"link"}, args...)...)
	t.Cleanup(func() { labctl(t, "link") })
}

// How a server goes away in ServerGone.
const (
	// GoneLoss drops every packet on the link: hard mounts hang, nfsd keeps running.
	GoneLoss = "loss"
	// GoneStop stops nfsd: connections are refused.
	GoneStop = "stop"
)

// ServerGone makes the lab's server unreachable (GoneLoss or GoneStop) until ServerBack or
// the end of the test.
func ServerGone(t testing.TB, how string) {
	t.Helper()
	labctl(t, "server-gone", how)
	t.Cleanup(func() { ServerBack(t) })
}

// AddrGone drops every packet to and from addr (such as 127.0.0.2, the lab's nfsd under a
// second address) until ServerBack or the end of the test: the mounts of that address hang,
// the others keep working.
func AddrGone(t testing.TB, addr string) {
	t.Helper()
	labctl(t, "server-gone", GoneLoss, addr)
	t.Cleanup(func() { ServerBack(t) })
}

// ServerBack undoes ServerGone; calling it twice is harmless.
func ServerBack(t testing.TB) {
	t.Helper()
	labctl(t, "server-back")
}

// Result is one nfstune run.
type Result struct {
	Stdout, Stderr []byte
	Code           int
	Elapsed        time.Duration
}

// RunNfstune runs the nfstune binary under test with args and a 60 s limit. A run that
// could not start or was killed fails the test; a non-zero exit code is returned.
func RunNfstune(t testing.TB, args ...string) Result {
	t.Helper()
	return RunNfstuneFor(t, 60*time.Second, args...)
}

// RunNfstuneFor is RunNfstune with another limit, for commands that watch traffic.
func RunNfstuneFor(t testing.TB, limit time.Duration, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, Bin(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Elapsed: time.Since(start)}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr) && exitErr.Exited():
		r.Code = exitErr.ExitCode()
	default:
		t.Fatalf("nfstune %s: %v after %s\nstderr:\n%s", strings.Join(args, " "), err, r.Elapsed, r.Stderr)
	}
	t.Logf("nfstune %s: exit %d in %s", strings.Join(args, " "), r.Code, r.Elapsed.Round(time.Millisecond))
	return r
}

// ReadAheadKB reads /sys/class/bdi/<dev>/read_ahead_kb.
func ReadAheadKB(t testing.TB, dev string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/class/bdi", dev, "read_ahead_kb"))
	if err != nil {
		t.Fatalf("reading read-ahead of %s: %v", dev, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("read-ahead of %s: %v", dev, err)
	}
	return n
}

// MountInfoEntry is one line of /proc/self/mountinfo, as the tests read it themselves
// (independently of nfstune's parser).
type MountInfoEntry struct {
	Device     string
	MountPoint string // octal escapes decoded
	FSType     string
	Source     string
	// Options are the per-mount and super options merged.
	Options map[string]string
}

// MountInfo reads /proc/self/mountinfo; see proc(5).
func MountInfo(t testing.TB) []MountInfoEntry {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatalf("reading mountinfo: %v", err)
	}
	var out []MountInfoEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 6 || len(g) < 3 {
			t.Fatalf("malformed mountinfo line %q", sc.Text())
		}
		e := MountInfoEntry{Device: f[2], MountPoint: unescapeOctal(f[4]), FSType: g[0], Source: g[1], Options: map[string]string{}}
		for _, o := range strings.Split(f[5]+","+g[2], ",") {
			k, v, _ := strings.Cut(o, "=")
			e.Options[k] = v
		}
		out = append(out, e)
	}
	return out
}

// NFSMounts are the mountinfo entries of type nfs and nfs4.
func NFSMounts(t testing.TB) []MountInfoEntry {
	t.Helper()
	var out []MountInfoEntry
	for _, e := range MountInfo(t) {
		if e.FSType == "nfs" || e.FSType == "nfs4" {
			out = append(out, e)
		}
	}
	return out
}

// unescapeOctal decodes the \ooo escapes the kernel writes for space, tab, newline and
// backslash in mountinfo.
func unescapeOctal(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// NFSVolumes returns the DEV column of /proc/fs/nfsfs/volumes: one row per superblock.
func NFSVolumes(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/fs/nfsfs/volumes")
	if err != nil {
		t.Fatalf("reading nfsfs volumes: %v", err)
	}
	var devs []string
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 4 { // header: NV SERVER PORT DEV FSID FSC
			continue
		}
		devs = append(devs, f[3])
	}
	return devs
}

// Transports counts the xprt: lines of each mountstats device entry, keyed by mount point
// (octal escapes decoded). With nconnect there is one line per connection.
func Transports(t testing.TB) map[string]int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountstats")
	if err != nil {
		t.Fatalf("reading mountstats: %v", err)
	}
	out := map[string]int{}
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "device ") {
			// device SOURCE mounted on MOUNTPOINT with fstype TYPE [statvers=...]
			f := strings.Fields(line)
			cur = ""
			if len(f) >= 8 && (f[7] == "nfs" || f[7] == "nfs4") {
				cur = unescapeOctal(f[4])
				out[cur] = 0
			}
			continue
		}
		if cur != "" && strings.HasPrefix(strings.TrimSpace(line), "xprt:") {
			out[cur]++
		}
	}
	return out
}

// ReadBytes returns the application and server read bytes of the mount at dir since it was
// mounted, from its bytes: line in /proc/self/mountstats (fs/nfs/iostat.h: normal and
// direct read bytes, fields 1 and 3; the READ payload, field 5), read independently of
// nfstune.
func ReadBytes(t *testing.T, dir string) (app, server uint64) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountstats")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "device ") {
			in = strings.Contains(line, " mounted on "+dir+" with fstype nfs")
			continue
		}
		if f := strings.Fields(line); in && len(f) >= 6 && f[0] == "bytes:" {
			n := func(i int) uint64 {
				v, err := strconv.ParseUint(f[i], 10, 64)
				if err != nil {
					t.Fatalf("mountstats %q: %v", line, err)
				}
				return v
			}
			return n(1) + n(3), n(5)
		}
	}
	t.Fatalf("no bytes: line for %s in mountstats", dir)
	return 0, 0
}
