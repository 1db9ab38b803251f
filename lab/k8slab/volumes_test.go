//go:build lab

package k8slab

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Each volume of the cases is an export of its own: a tmpfs of its own under the lab's
// NFSv4 pseudo root (/srv), so that every pod's volume is a superblock of its own, as
// shares of different filesystems are. (Two addresses of one server would not do: the
// NFSv4.1 client detects trunking and shares the superblock.)
const (
	exportBase = "/srv/k8s"
	wantKB     = 15360
)

// sequential is how many pods TestSequentialPods starts one after another: runMain sets it
// from NFSTUNE_K8S_PODS (make k8s-e2e's K8S_PODS) when that is set.
var sequential = 5

// exportNames are the exports the cases mount, in order.
func exportNames() []string {
	names := []string{"pv", "inline", "observe", "installer", "fleet", "fleet-observe", "dropin", "apparmor"}
	for i := 1; i <= sequential; i++ {
		names = append(names, fmt.Sprintf("pod%02d", i))
	}
	return names
}

// v4Path is an export's path as NFSv4 names it (relative to the pseudo root), v3Path as
// NFSv3 does.
func v4Path(name string) string { return strings.TrimPrefix(exportBase, "/srv") + "/" + name }
func v3Path(name string) string { return exportBase + "/" + name }

func makeExports() error {
	logf("step nfs exports: %d tmpfs exports under %s", len(exportNames()), exportBase)
	return addExports(exportNames(), 100)
}

// addExports exports a tmpfs of its own for each name, under exportBase, with fsids from
// fsid on.
func addExports(names []string, fsid int) error { return addExportsSized(names, fsid, "16m") }

// addExportsSized is addExports with tmpfs of size (mount(8)'s size=).
func addExportsSized(names []string, fsid int, size string) error {
	var lines strings.Builder
	for i, name := range names {
		dir := v3Path(name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if _, err := run(10*time.Second, "mount", "-t", "tmpfs", "-o", "size="+size, "k8s-"+name, dir); err != nil {
			return err
		}
		fmt.Fprintf(&lines, "%s 127.0.0.0/8(rw,sync,no_subtree_check,no_root_squash,insecure,fsid=%d)\n", dir, fsid+i)
	}
	// Added to the lab's exports and loaded at once: one exportfs per export takes a
	// second each under emulation.
	f, err := os.OpenFile("/etc/exports", os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(lines.String()); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	_, err = run(time.Minute, "exportfs", "-ra")
	return err
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	dev, mountPoint, fsType, source, superOptions string
}

func readMounts() ([]mountEntry, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []mountEntry
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		out = append(out, mountEntry{dev: f[2], mountPoint: unescape(f[4]), fsType: g[0], source: g[1], superOptions: g[2]})
	}
	return out, nil
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
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

func isNFS(fsType string) bool { return fsType == "nfs" || fsType == "nfs4" }

// mountWatch timestamps each NFS superblock when it first appears in the node's mount
// table, independently of the agent: poll(2) on mountinfo wakes at each change.
type mountWatch struct {
	mu    sync.Mutex
	first map[string]time.Time // device -> first seen
	stop  chan struct{}
}

func watchMounts() (*mountWatch, error) {
	fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	w := &mountWatch{first: map[string]time.Time{}, stop: make(chan struct{})}
	w.scan(time.Now())
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			n, err := unix.Poll(fds, 100)
			if err != nil || n == 0 {
				continue
			}
			// poll itself re-arms the event: no read is needed.
			w.scan(time.Now())
		}
	}()
	return w, nil
}

func (w *mountWatch) scan(at time.Time) {
	ms, err := readMounts()
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range ms {
		if _, ok := w.first[m.dev]; !ok && isNFS(m.fsType) {
			w.first[m.dev] = at
		}
	}
}

func (w *mountWatch) seen(dev string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.first[dev]
	return t, ok
}

func (w *mountWatch) close() { close(w.stop) }

// readAhead is the bdi's read_ahead_kb, or -1.
func readAhead(dev string) int {
	b, err := os.ReadFile("/sys/class/bdi/" + dev + "/read_ahead_kb")
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}

// waitReadAhead polls until dev's read_ahead_kb is want, for at most limit.
func waitReadAhead(dev string, want int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		if readAhead(dev) == want {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// volumeMount finds the NFS mount kubelet made for a pod's volume: under the pod's
// directory, named after the volume (inline) or the PersistentVolume.
func volumeMount(podUID string) (mountEntry, bool) {
	ms, _ := readMounts()
	dir := "/pods/" + podUID + "/volumes/kubernetes.io~nfs/"
	for _, m := range ms {
		if isNFS(m.fsType) && strings.Contains(m.mountPoint, dir) {
			return m, true
		}
	}
	return mountEntry{}, false
}

// bootTime is the wall-clock time of boot, to turn /proc/uptime readings into times.
func bootTime() time.Time {
	b, err := os.ReadFile("/proc/uptime")
	now := time.Now()
	if err != nil {
		return time.Time{}
	}
	up, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return now.Add(-time.Duration(up * float64(time.Second)))
}
