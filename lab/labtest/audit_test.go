//go:build lab

package labtest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// auditReport is the JSON contract of `nfstune audit -o json`, only the fields the lab
// tests check.
type auditReport struct {
	Mounts []struct {
		Device      string            `json:"device"`
		MountPoints []string          `json:"mountpoints"`
		Server      string            `json:"server"`
		Export      string            `json:"export"`
		FSType      string            `json:"fstype"`
		Version     string            `json:"version"`
		ReadAheadKB *int              `json:"read_ahead_kb"`
		NConnect    int               `json:"nconnect"`
		Connections int               `json:"connections"`
		RSize       int               `json:"rsize"`
		WSize       int               `json:"wsize"`
		Options     map[string]string `json:"options"`
		ClientGroup string            `json:"client_group"`
	} `json:"mounts"`
	Findings []struct {
		ID          string   `json:"id"`
		Severity    string   `json:"severity"`
		Device      string   `json:"device"`
		MountPoints []string `json:"mountpoints"`
		Message     string   `json:"message"`
		Expected    string   `json:"expected"`
		Actual      string   `json:"actual"`
		Fix         string   `json:"fix"`
		Evidence    []string `json:"evidence"`
	} `json:"findings"`
	Warnings []string `json:"warnings"`
}

func audit(t *testing.T, args ...string) (auditReport, Result) {
	t.Helper()
	r := RunNfstune(t, append([]string{"audit", "-o", "json"}, args...)...)
	// Exit 1 means findings; 2 is a usage or read error.
	if r.Code != 0 && r.Code != 1 {
		t.Fatalf("nfstune audit exited %d\nstderr:\n%s", r.Code, r.Stderr)
	}
	var rep auditReport
	if err := json.Unmarshal(r.Stdout, &rep); err != nil {
		t.Fatalf("decoding audit JSON: %v\nstdout:\n%s", err, r.Stdout)
	}
	return rep, r
}

// scenarioMountPoints are the mounts lab/guest/lib.sh lab_scenario makes.
var scenarioMountPoints = []string{
	"/mnt/lab/v3", "/mnt/lab/v41", "/mnt/lab/v42", "/mnt/lab/v41-nconnect2",
	"/mnt/lab/rsize-1m", "/mnt/lab/with space", "/mnt/lab/server2",
}

// TestAuditListsEveryMount compares the audit with the kernel's own files, read here:
// every NFS superblock in mountinfo and nfsfs/volumes appears once with all its mount
// points, its xprt count from mountstats, its nconnect option and its bdi read-ahead.
func TestAuditListsEveryMount(t *testing.T) {
	RequireGuest(t)
	kernelMPs := map[string][]string{} // device -> mount points
	kernelOpts := map[string]map[string]string{}
	for _, e := range NFSMounts(t) {
		kernelMPs[e.Device] = append(kernelMPs[e.Device], e.MountPoint)
		kernelOpts[e.Device] = e.Options
	}
	for _, mp := range scenarioMountPoints {
		found := false
		for _, mps := range kernelMPs {
			found = found || slices.Contains(mps, mp)
		}
		if !found {
			t.Fatalf("scenario mount %q is not in /proc/self/mountinfo: the lab set-up failed", mp)
		}
	}
	volumes := NFSVolumes(t)
	xprts := Transports(t)

	rep, _ := audit(t)
	got := map[string]int{}
	for i, m := range rep.Mounts {
		got[m.Device] = i
	}
	for dev, mps := range kernelMPs {
		i, ok := got[dev]
		if !ok {
			t.Errorf("device %s (%q) is mounted but missing from the audit", dev, mps)
			continue
		}
		m := rep.Mounts[i]
		slices.Sort(mps)
		gotMPs := slices.Sorted(slices.Values(m.MountPoints))
		if !slices.Equal(gotMPs, mps) {
			t.Errorf("device %s: mountpoints = %q, mountinfo has %q", dev, gotMPs, mps)
		}
		if !slices.Contains(volumes, dev) {
			t.Errorf("device %s is in mountinfo but not in /proc/fs/nfsfs/volumes %q", dev, volumes)
		}
		if want := xprts[mps[0]]; m.Connections != want {
			t.Errorf("device %s (%s): connections = %d, mountstats has %d xprt lines", dev, mps[0], m.Connections, want)
		}
		wantNC := 0
		if v, ok := kernelOpts[dev]["nconnect"]; ok {
			wantNC = atoi(t, v)
		}
		if m.NConnect != wantNC {
			t.Errorf("device %s (%s): nconnect = %d, mountinfo shows %d", dev, mps[0], m.NConnect, wantNC)
		}
		if ra := ReadAheadKB(t, dev); m.ReadAheadKB == nil || *m.ReadAheadKB != ra {
			t.Errorf("device %s (%s): read_ahead_kb = %v, sysfs has %d", dev, mps[0], deref(m.ReadAheadKB), ra)
		}
		if want := atoi(t, kernelOpts[dev]["rsize"]); m.RSize != want {
			t.Errorf("device %s (%s): rsize = %d, mountinfo shows %d", dev, mps[0], m.RSize, want)
		}
	}
	if len(rep.Mounts) != len(kernelMPs) {
		t.Errorf("audit lists %d mounts, the kernel has %d NFS superblocks", len(rep.Mounts), len(kernelMPs))
	}
	// The scenario's tricky cases, as the kernel resolved them.
	for _, m := range rep.Mounts {
		if slices.Contains(m.MountPoints, "/mnt/lab/rsize-1m") && m.RSize >= 1048576 {
			t.Logf("the server granted rsize=%d (1 MiB asked): the lab no longer shows a capped rsize", m.RSize)
		}
	}
}

// TestAuditReportsInheritedNConnect: the scenario's /mnt/lab/v41-nconnect2 asks for
// nconnect=2 in /etc/fstab but shares its kernel client with /mnt/lab/v41 (nconnect=4), so
// the kernel shows and uses 4. The audit must say so for that mount.
func TestAuditReportsInheritedNConnect(t *testing.T) {
	RequireGuest(t)
	const mp = "/mnt/lab/v41-nconnect2"
	var dev string
	for _, e := range NFSMounts(t) {
		if e.MountPoint == mp {
			dev = e.Device
			if e.Options["nconnect"] != "4" {
				t.Logf("kernel shows nconnect=%s on %s (the lab expected the shared client's 4)", e.Options["nconnect"], mp)
			}
		}
	}
	if dev == "" {
		t.Fatalf("%s is not mounted", mp)
	}
	if n := Transports(t)[mp]; n != 4 {
		t.Logf("%s has %d transports", mp, n)
	}
	rep, _ := audit(t)
	for _, f := range rep.Findings {
		if f.Device == dev && strings.Contains(f.Expected+f.Actual, "nconnect") {
			t.Logf("%s %s: %s (expected %s, actual %s)", f.ID, f.Severity, f.Message, f.Expected, f.Actual)
			if !strings.Contains(f.Expected, "2") || !strings.Contains(f.Actual, "4") {
				t.Errorf("finding %s for %s: expected %q, actual %q; want nconnect 2 asked and 4 in effect", f.ID, mp, f.Expected, f.Actual)
			}
			return
		}
	}
	t.Errorf("no nconnect finding for %s (device %s); findings: %+v", mp, dev, rep.Findings)
}

func findingsFor(rep auditReport, dev string) []string {
	var out []string
	for _, f := range rep.Findings {
		if f.Device == dev {
			out = append(out, f.ID+": "+f.Message)
		}
	}
	return out
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
