//go:build lab

package ratable

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/lab/labtest"
)

// arm is one way the table runs nfstune against the fixed values: `nfstune agent` with no
// --config, so the built-in policy decides every mount, as on a node given no policy.
type arm struct {
	// name is NFSTUNE_LAB_ARMS's and the results' name; label the table's.
	name, label string
	// podIO adds --pod-io: the per-pod eBPF collector (internal/podio), whose fault
	// figures let the controller tell mapped random readers from sequential ones.
	podIO bool
	// base runs the binary built from an earlier tree (NFSTUNE_LAB_BASE_BIN, which
	// lab/sidebyside.sh builds and passes) instead of the one under test, so that a change
	// of the controller is measured against the tree before it in the same boot.
	base bool
}

var arms = []arm{
	{name: "default", label: "default"},
	{name: "podio", label: "default+podio", podIO: true},
	{name: "base", label: "base", base: true},
}

// selectArms returns the arms NFSTUNE_LAB_ARMS names (e.g. "base,default"); unset, the
// tree under test's arms, default and podio. The base arm is labelled with the tree it was
// built from (NFSTUNE_LAB_BASE_REF).
func selectArms(t *testing.T) []arm {
	t.Helper()
	v := os.Getenv("NFSTUNE_LAB_ARMS")
	if v == "" {
		return slices.DeleteFunc(slices.Clone(arms), func(a arm) bool { return a.base })
	}
	var out []arm
	for _, name := range strings.Split(v, ",") {
		i := slices.IndexFunc(arms, func(a arm) bool { return a.name == name })
		if i < 0 {
			t.Fatalf("NFSTUNE_LAB_ARMS=%q: unknown arm %q (want default, podio, base)", v, name)
		}
		a := arms[i]
		if a.base {
			if os.Getenv(labtest.EnvBaseBin) == "" {
				t.Fatalf("NFSTUNE_LAB_ARMS=%q: the base arm needs %s: run the table through lab/sidebyside.sh REF", v, labtest.EnvBaseBin)
			}
			if ref := os.Getenv(labtest.EnvBaseRef); ref != "" {
				a.label = "base " + ref
			}
		}
		out = append(out, a)
	}
	t.Logf("arms %s only (NFSTUNE_LAB_ARMS)", v)
	return out
}

// startArm starts the agent of arm a, waits until it has reconciled the mounts once, and
// checks that it runs the built-in policy; it returns the agent's log.
func startArm(t *testing.T, bin string, a arm) string {
	t.Helper()
	args := a.collectorArgs()
	logPath := startAgent(t, bin, args...)
	waitReady(t)
	if a.podIO {
		waitCollector(t)
	}
	var st struct {
		Mode   string `json:"mode"`
		Policy struct {
			File string `json:"file"`
		} `json:"policy"`
	}
	getJSON(t, "/status", &st)
	if st.Policy.File != "" {
		t.Errorf("the %s agent runs the policy file %s, want the built-in policy", a.name, st.Policy.File)
	}
	t.Logf("the %s agent %v: built-in policy, mode %s", a.name, args, st.Mode)
	return logPath
}

// fixedUnderAgent returns the setup of a fixed value's run: kb written to the mount, and
// `nfstune agent --observe` started with no configuration, which reads and decides as the
// arms' agent does but writes nothing. The agent shares the guest's two emulated CPUs with
// the readers, so every row pays for it, as every node that runs it does.
func fixedUnderAgent(t *testing.T, bin string, m labtest.Mounted, kb int, args ...string) func() {
	return func() {
		setReadAhead(t, m.Device, kb)
		startAgent(t, bin, append([]string{"--observe"}, args...)...)
	}
}

// collectorArgs are the agent's arguments for a's collectors, without which it decides:
// an observing agent with them costs the node what the arm's agent costs it to watch.
func (a arm) collectorArgs() []string {
	if a.podIO {
		return []string{"--pod-io"}
	}
	return nil
}

// startAgent runs `nfstune agent` with no --config (the built-in policy: no file in the
// guest is read) and args, logging JSON to a file whose path it returns.
func startAgent(t *testing.T, bin string, args ...string) string {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "agent.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"agent", "--pid", "0", "--listen", agentListen, "--log-format", "json", "--log-level", "debug"}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	running = append(running, agentProc{cmd: cmd, log: logPath, started: time.Now()})
	t.Cleanup(func() { stopAgents(t); logFile.Close() })
	return logPath
}

// waitReady waits, up to two minutes, for the agent's first reconcile (/readyz).
func waitReady(t *testing.T) {
	t.Helper()
	start := time.Now()
	for {
		resp, err := http.Get("http://" + agentListen + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("the agent was not ready within two minutes: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitCollector waits, up to two minutes, for the agent's per-pod collector to load, and
// then for one adaptive interval more, so that the readers start under an agent whose
// controller has the collector's figures, as on a node where the agent ran before the pod.
// Under emulation the eBPF programs take seconds to load: without the wait the readers'
// first interval would be decided without the faults of the mapped readers among them.
func waitCollector(t *testing.T) {
	t.Helper()
	start := time.Now()
	for {
		var st struct {
			PodIO *struct {
				Loaded bool   `json:"loaded"`
				Why    string `json:"why"`
			} `json:"podIO"`
		}
		getJSON(t, "/status", &st)
		if st.PodIO != nil && st.PodIO.Loaded {
			break
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("the per-pod collector did not load within two minutes: %+v", st.PodIO)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(policy.DefaultAdaptiveInterval)
	t.Logf("the per-pod collector loaded %.1f s after the agent was ready; readers start one adaptive interval (%s) later",
		time.Since(start).Seconds()-policy.DefaultAdaptiveInterval.Seconds(), policy.DefaultAdaptiveInterval)
}

// getJSON decodes the agent's answer at path into v (nil: read and drop it).
func getJSON(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + agentListen + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v: %s", path, resp.Status, err, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
}

// intoBounds waits for the agent just started to take the mount from the 128 KiB of a
// fresh mount to its policy's value (or an adaptive rule's bounds), as it does at once for a
// mount that appears while it runs (a pod's volume is tuned before its first process): the
// readers start after that, and the arm's times count from them. Started together, the
// readers opened their first files at 128 KiB while the agent started, and read them so for
// 20 to 40 s. A policy that leaves the mount at 128 KiB is logged, not waited for.
func intoBounds(t *testing.T, dev string) {
	t.Helper()
	start := time.Now()
	for readAhead(t, dev) == untunedKB {
		if time.Since(start) > 30*time.Second {
			t.Logf("the agent left %s at %d KiB for %s after its first reconcile", dev, untunedKB, time.Since(start).Round(time.Second))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the agent took %s to %d KiB %.1f s after its first reconcile", dev, readAhead(t, dev), time.Since(start).Seconds())
}

// learnedPath is the agent's learned read-ahead per volume (internal/agent.LearnedPath):
// the next mount of a volume starts at the value learned on it.
const learnedPath = "/var/lib/nfstune/learned.json"

// keepLearned puts back, at the end of the test, the learned values there were before it
// (none: the file removed).
func keepLearned(t *testing.T) {
	t.Helper()
	old, err := os.ReadFile(learnedPath)
	t.Cleanup(func() {
		if err != nil {
			os.Remove(learnedPath)
			return
		}
		if err := os.WriteFile(learnedPath, old, 0o600); err != nil {
			t.Errorf("putting %s back: %v", learnedPath, err)
		}
	})
}

// forgetLearned removes the values an earlier arm's agent learned, logging them: each arm's
// run starts as on a node that has not seen the volume.
func forgetLearned(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(learnedPath)
	if err != nil {
		return
	}
	t.Logf("forgetting the learned values of the last run: %s", bytes.TrimSpace(b))
	if err := os.Remove(learnedPath); err != nil {
		t.Fatal(err)
	}
}

// inMemory copies the binary at path to a tmpfs, as a node has its agent on a local disk.
// The guest's own files are the host's, over 9p: while 16 readers in a 64 MiB cgroup fault
// their programs back in through it, the agent's first page faults from there waited for
// more than the whole 90 s run (Linux 6.12: state D, not one line logged).
func inMemory(t *testing.T, path string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=128m", "ratable-bin", dir).CombinedOutput(); err != nil {
		t.Fatalf("mounting a tmpfs for the agent: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// agentProc is an agent the table started, with its log.
type agentProc struct {
	cmd     *exec.Cmd
	log     string
	started time.Time
}

var running []agentProc

// stopAgents stops the agents. One that has logged nothing yet is described first (its
// state, wait channel and kernel stack, the load) and asked for its goroutines (SIGQUIT).
func stopAgents(t *testing.T) {
	for _, a := range running {
		if fi, err := os.Stat(a.log); err == nil && fi.Size() == 0 {
			pid := a.cmd.Process.Pid
			var b strings.Builder
			for _, f := range []string{fmt.Sprintf("/proc/%d/status", pid), fmt.Sprintf("/proc/%d/wchan", pid), fmt.Sprintf("/proc/%d/stack", pid), "/proc/loadavg", "/proc/pressure/cpu", "/proc/pressure/memory"} {
				c, err := os.ReadFile(f)
				fmt.Fprintf(&b, "%s: %s%v\n", f, c, err)
			}
			t.Logf("agent %d logged nothing:\n%s", pid, b.String())
			_ = a.cmd.Process.Signal(syscall.SIGQUIT)
			time.Sleep(2 * time.Second)
		}
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		_ = a.cmd.Wait()
		// The agent shares the guest's emulated CPUs with the readers it measures: its
		// cost is a part of every row (fixedUnderAgent).
		wall, cpu := time.Since(a.started), a.cmd.ProcessState.UserTime()+a.cmd.ProcessState.SystemTime()
		t.Logf("agent %d: %.1f s of CPU in %s (%.1f %% of one CPU)", a.cmd.Process.Pid, cpu.Seconds(), wall.Round(time.Second), 100*cpu.Seconds()/wall.Seconds())
	}
	running = nil
}

// stopAgentAndRevert stops the agent and runs `nfstune revert`, which puts back the values
// from before the adaptive read-ahead's first changes (journaled). The built-in policy's
// writes of a profile's value are not journaled (docs/agent.md), so revert leaves them: every
// bdi's read_ahead_kb that differs from before (bdiValues) is put back here, logged, for the
// next run and for the tests after the table.
func stopAgentAndRevert(t *testing.T, before map[string]string) {
	t.Helper()
	stopAgents(t)
	r := labtest.RunNfstune(t, "revert")
	if r.Code != 0 {
		t.Fatalf("nfstune revert: exit %d: %s", r.Code, r.Stderr)
	}
	var left []string
	for bdi, old := range before {
		file := filepath.Join("/sys/class/bdi", bdi, "read_ahead_kb")
		b, err := os.ReadFile(file)
		if err != nil || strings.TrimSpace(string(b)) == old {
			continue // gone, or as before
		}
		left = append(left, fmt.Sprintf("%s %s", bdi, strings.TrimSpace(string(b))))
		if err := os.WriteFile(file, []byte(old), 0o644); err != nil {
			t.Errorf("putting back %s: %v", file, err)
		}
	}
	if len(left) > 0 {
		slices.Sort(left)
		t.Logf("revert left read_ahead_kb (KiB) %s; put back as before the agent", strings.Join(left, ", "))
	}
}

// bdiValues reads read_ahead_kb of every bdi, by name.
func bdiValues(t *testing.T) map[string]string {
	t.Helper()
	dirs, err := filepath.Glob("/sys/class/bdi/*")
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(dirs))
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "read_ahead_kb")); err == nil {
			out[filepath.Base(d)] = strings.TrimSpace(string(b))
		}
	}
	return out
}

// agentChanges reads the agent's "adaptive read-ahead changed" lines.
func agentChanges(t *testing.T, logPath string, r result) []change {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []change
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			Time   time.Time `json:"time"`
			Level  string    `json:"level"`
			Msg    string    `json:"msg"`
			From   int       `json:"from_kb"`
			To     int       `json:"to_kb"`
			Reason string    `json:"reason"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			t.Logf("agent: %s", sc.Text()) // not a log record: a panic's trace, say
			continue
		}
		if strings.HasPrefix(l.Msg, "adaptive read-ahead") || strings.Contains(l.Msg, "per-pod") || l.Level == "WARN" || l.Level == "ERROR" {
			t.Logf("agent: %s", sc.Text())
		}
		if l.Msg == "adaptive read-ahead changed" {
			out = append(out, change{at: l.Time.Sub(r.begin), fromKB: l.From, toKB: l.To, reason: l.Reason})
		}
	}
	if len(out) == 0 {
		// Not one change: the whole log, to say why.
		t.Logf("agent made no change; its log:\n%s", b)
	}
	return out
}

// httpGet returns the body of the agent's answer at path.
func httpGet(path string) (string, error) {
	resp, err := http.Get("http://" + agentListen + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", resp.Status, b)
	}
	return string(b), err
}
