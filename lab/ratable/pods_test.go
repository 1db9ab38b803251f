//go:build lab

package ratable

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nfstune/nfstune/lab/labtest"
)

// sharedPods are scenario g's two pods on one superblock, laid out as kubelet lays them
// out, so that the agent names them: each in a cgroup kubepods/pod<uid> of the hierarchy
// at /sys/fs/cgroup (kubelet's cgroupfs driver, internal/kubelet.CgroupPod), with a 64 MiB
// memory.max, and each with its volume at <kubelet root>/pods/<uid>/volumes/kubernetes.io~nfs/<name>,
// a bind mount of the table's mount (internal/kubelet.PodVolumes). The agent's traffic
// classes read each pod's cgroup counters (internal/podcgroup) through its volume path.
type sharedPods struct {
	mount   labtest.Mounted
	uids    [2]string
	cgroups [2]string
	volumes [2]string
}

// podUIDs are g's pods: b's readers, then e's.
var podUIDs = [2]string{"5e1f0a2b-0000-4000-8000-00000000000b", "5e1f0a2b-0000-4000-8000-00000000000e"}

// minTrafficInterval is the shortest interval the agent classifies pods' traffic over
// (internal/agent.MinTrafficInterval): g's window must be at least as long.
const minTrafficInterval = 10 * time.Second

// prepare makes the pods' cgroups and volumes, removed at the end of the test.
func (p *sharedPods) prepare(t *testing.T) {
	t.Helper()
	labtest.HostCgroup(t)
	const cg = "/sys/fs/cgroup"
	if err := os.WriteFile(filepath.Join(cg, "cgroup.subtree_control"), []byte("+memory"), 0o644); err != nil {
		t.Fatalf("enabling the memory controller: %v", err)
	}
	base := labtest.MountDir(t)
	kubeletRoot := filepath.Join(base, "var", "lib", "kubelet")
	for i, uid := range podUIDs {
		p.uids[i] = uid
		p.cgroups[i] = labtest.PodCgroup(t, cg, "kubepods/pod"+uid)
		if i == 0 {
			if err := os.WriteFile(filepath.Join(cg, "kubepods", "cgroup.subtree_control"), []byte("+memory"), 0o644); err != nil {
				t.Fatalf("enabling the memory controller in kubepods: %v", err)
			}
		}
		if err := os.WriteFile(filepath.Join(p.cgroups[i], "memory.max"), []byte(cgroupMax), 0o644); err != nil {
			t.Fatal(err)
		}
		vol := filepath.Join(kubeletRoot, "pods", uid, "volumes", "kubernetes.io~nfs", "data")
		if err := os.MkdirAll(vol, 0o755); err != nil {
			t.Fatal(err)
		}
		// The directories, deepest first, with os.Remove: never a recursive removal of a
		// tree that may still hold the NFS mount.
		t.Cleanup(func() {
			for d := vol; d != base; d = filepath.Dir(d) {
				if os.Remove(d) != nil {
					return // another pod's, removed by its cleanup
				}
			}
		})
		if out, err := exec.Command("mount", "--bind", p.mount.Dir, vol).CombinedOutput(); err != nil {
			t.Fatalf("bind-mounting %s on %s: %v: %s", p.mount.Dir, vol, err, out)
		}
		t.Cleanup(func() { labtest.Umount(t, vol) })
		p.volumes[i] = vol
	}
	t.Logf("pods %s (b's readers) and %s (e's) in %s, volumes %s and %s", podUIDs[0], podUIDs[1], cg+"/kubepods", p.volumes[0], p.volumes[1])
}

// paths are files of the mount as pod i sees them: through its volume.
func (p *sharedPods) paths(files []string, i int) []string {
	out := make([]string, len(files))
	for j, f := range files {
		out[j] = filepath.Join(p.volumes[i], strings.TrimPrefix(f, p.mount.Dir))
	}
	return out
}

// auditFinding is what the table reads of a finding in the agent's /audit and in `nfstune
// audit -o json`.
type auditFinding struct {
	ID      string `json:"id"`
	Device  string `json:"device"`
	Message string `json:"message"`
	Actual  string `json:"actual"`
}

// audit reads the agent's audit at the window's start, which takes the agent's first sample
// of the pods' traffic, and returns the function that, at its end, reads it again (the
// agent classifies each pod over the time between two of its reads, at least
// minTrafficInterval apart), the pods' classes from /metrics and `nfstune audit -o json`,
// and says which pods NFS006 and NFS007 name in each.
//
// NFS006 needs each pod's traffic class over an interval (audit.Options.Classes), which
// only the agent keeps: it samples the pods' cgroup counters between its reads.
// `nfstune audit` is one read of the host and passes none (internal/cli/audit.go), so the
// command cannot report NFS006; the agent's /audit (what kubectl nfstune audit shows) can.
func (p *sharedPods) audit(t *testing.T) func() string {
	t.Helper()
	getJSON(t, "/audit", nil)
	return func() string {
		var doc struct {
			Findings []auditFinding `json:"findings"`
		}
		getJSON(t, "/audit", &doc)
		classes := p.classes(t)
		agentSays := p.podFindings(doc.Findings)
		p.logClasses(t)
		// Under the two pods' load one audit of the emulated guest has taken 50-60 s.
		r := labtest.RunNfstuneFor(t, 3*time.Minute, "audit", "-o", "json")
		var cli struct {
			Findings []auditFinding `json:"findings"`
		}
		cliSays := ""
		if err := json.Unmarshal([]byte(r.Stdout), &cli); err != nil || (r.Code != 0 && r.Code != 1) {
			cliSays = fmt.Sprintf("failed (exit %d, %v): %s", r.Code, err, r.Stderr)
		} else {
			cliSays = p.podFindings(cli.Findings)
		}
		t.Logf("g: the agent's /audit: %s; pods' classes (/metrics): %s; nfstune audit -o json: %s (the command keeps no pods' traffic classes, which NFS006 and NFS007 need)",
			agentSays, classes, cliSays)
		return fmt.Sprintf("agent /audit: %s (%s); nfstune audit: %s", agentSays, classes, cliSays)
	}
}

// logClasses logs why the agent classed the mount and each of its pods as it did, from
// /status.
func (p *sharedPods) logClasses(t *testing.T) {
	t.Helper()
	var st struct {
		TrafficClasses []struct {
			Device, Class, Why string
			Pods               []struct{ PodUID, Class, Why string }
		} `json:"trafficClasses"`
	}
	getJSON(t, "/status", &st)
	for _, c := range st.TrafficClasses {
		if c.Device != p.mount.Device {
			continue
		}
		t.Logf("g: the agent classed the mount %s: %s", c.Class, c.Why)
		for _, pod := range c.Pods {
			t.Logf("g: pod %s %s: %s", pod.PodUID, pod.Class, pod.Why)
		}
		return
	}
	t.Logf("g: /status lists no class for the mount (every class unknown)")
}

// podFindings says what the findings about the pods of the table's mount name: NFS006 (a
// conflict) and NFS007 (faults the agent cannot place without its per-pod collector).
func (p *sharedPods) podFindings(findings []auditFinding) string {
	return p.names(findings, "NFS006") + "; " + p.names(findings, "NFS007")
}

// names says which pods findings' id on the table's mount names: both, one, or none.
func (p *sharedPods) names(findings []auditFinding, id string) string {
	for _, f := range findings {
		if f.ID != id || f.Device != p.mount.Device {
			continue
		}
		var named []string
		for i, uid := range p.uids {
			if strings.Contains(f.Message, uid) {
				named = append(named, []string{"b", "e"}[i])
			}
		}
		switch len(named) {
		case 2:
			return id + " names both pods"
		case 1:
			return id + " names pod " + named[0] + " only: " + f.Message
		}
		return id + " names neither pod: " + f.Message
	}
	return "no " + id
}

// classLine matches a pod's class series in /metrics.
var classLine = regexp.MustCompile(`^nfstune_mount_pod_readahead_traffic_class\{.*pod_uid="([^"]+)".*\} 1$`)
var classLabel = regexp.MustCompile(`[{,]class="([^"]+)"`)

// classes are the pods' traffic classes the agent exports, e.g. "b thrashing, e unknown".
func (p *sharedPods) classes(t *testing.T) string {
	t.Helper()
	resp, err := httpGet("/metrics")
	if err != nil {
		return "no /metrics: " + err.Error()
	}
	byUID := map[string]string{}
	for _, l := range strings.Split(resp, "\n") {
		m := classLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if c := classLabel.FindStringSubmatch(l); c != nil {
			byUID[m[1]] = c[1]
		}
	}
	var parts []string
	for i, uid := range p.uids {
		c := byUID[uid]
		if c == "" {
			c = "none"
		}
		parts = append(parts, []string{"b", "e"}[i]+" "+c)
	}
	return strings.Join(parts, ", ")
}
