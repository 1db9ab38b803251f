package kubelet

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	uidA   = "6f1b3a52-8c4d-4e0a-9b7e-2d5c1f0a3e71"
	uidB   = "a04c9e1d-5b27-4f38-8e6a-7c2b9d1e4f05"
	static = "9d3c1e5f7a2b4c6d8e0f1a3b5c7d9e1f"
	hash   = "4c1e0b9a7d3f5e2c8b6a4d0f1e3c5b7a9d2e4f6a8c0b1d3e5f7a9c2e4b6d8f0a"
)

func TestPodVolumes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		mps  []string
		want []PodVolume
	}{
		{"host mount only", []string{"/mnt/data"}, []PodVolume{}},
		{"in-tree nfs", []string{"/mnt/home", "/var/lib/kubelet/pods/" + uidA + "/volumes/kubernetes.io~nfs/home"},
			[]PodVolume{{PodUID: uidA, Volume: "home", Driver: NFSDriver}}},
		{"csi without staging", []string{"/var/lib/kubelet/pods/" + uidA + "/volumes/kubernetes.io~csi/pvc-1/mount"},
			[]PodVolume{{PodUID: uidA, PV: "pvc-1"}}},
		{"csi staged, two pods, one with a subPath", []string{
			"/var/lib/kubelet/plugins/kubernetes.io/csi/file.csi.azure.com/" + hash + "/globalmount",
			"/var/lib/kubelet/pods/" + uidB + "/volumes/kubernetes.io~csi/pv-data/mount",
			"/var/lib/kubelet/pods/" + uidB + "/volume-subpaths/data/app/0",
			"/var/lib/kubelet/pods/" + uidA + "/volumes/kubernetes.io~csi/pv-data/mount",
		}, []PodVolume{
			{PodUID: uidA, PV: "pv-data", Driver: "file.csi.azure.com"},
			{PodUID: uidB, Volume: "data", PV: "pv-data", Driver: "file.csi.azure.com"},
		}},
		{"staged before 1.24: no driver in the path", []string{
			"/var/lib/kubelet/plugins/kubernetes.io/csi/pv/pv-data/globalmount",
			"/var/lib/kubelet/pods/" + uidA + "/volumes/kubernetes.io~csi/pv-data/mount",
		}, []PodVolume{{PodUID: uidA, PV: "pv-data"}}},
		{"static pod and another kubelet root", []string{
			"/var/lib/k0s/kubelet/pods/" + static + "/volumes/kubernetes.io~nfs/logs",
		}, []PodVolume{{PodUID: static, Volume: "logs", Driver: NFSDriver}}},
		{"one pod, two PVs on one superblock: the smallest, at every scrape", []string{
			"/var/lib/kubelet/pods/" + uidA + "/volumes/kubernetes.io~csi/pv-b/mount",
			"/var/lib/kubelet/pods/" + uidA + "/volumes/kubernetes.io~csi/pv-a/mount",
		}, []PodVolume{{PodUID: uidA, PV: "pv-a"}}},
		{"not kubelet's", []string{
			"/var/lib/kubelet/pods/not-a-uid/volumes/kubernetes.io~nfs/home",
			"/var/lib/kubelet/pods/" + uidA + "/volumes/kubernetes.io~nfs/home/below",
			"/var/lib/kubelet/pods/" + uidA + "/volumes/kubernetes.io~csi/pv-data",
			"/var/lib/kubelet/pods/" + uidA + "/volumes/kubernetes.io~empty-dir/cache",
			"/var/lib/kubelet/pods/" + "6F1B3A52-8C4D-4E0A-9B7E-2D5C1F0A3E71" + "/volumes/kubernetes.io~nfs/home",
			"/srv/pods/" + uidA + "/volumes/kubernetes.io~nfs/home",
			"/var/lib/kubelet/plugins/kubernetes.io/csi/file.csi.azure.com/" + hash,
		}, []PodVolume{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, PodVolumes(tt.mps)); diff != "" {
				t.Errorf("PodVolumes(%q) (-want +got):\n%s", tt.mps, diff)
			}
		})
	}
}

// TestPodVolumesOnePerPod mounts one superblock into 50 pods, each through its volume and
// two subPaths: 50 entries, one per pod.
func TestPodVolumesOnePerPod(t *testing.T) {
	t.Parallel()
	var mps []string
	for i := range 50 {
		uid := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		mps = append(mps,
			"/var/lib/kubelet/pods/"+uid+"/volumes/kubernetes.io~csi/pv-shared/mount",
			"/var/lib/kubelet/pods/"+uid+"/volume-subpaths/shared/app/0",
			"/var/lib/kubelet/pods/"+uid+"/volume-subpaths/shared/sidecar/1",
		)
	}
	got := PodVolumes(mps)
	if len(got) != 50 {
		t.Fatalf("%d entries for 50 pods", len(got))
	}
	for i, p := range got {
		want := PodVolume{PodUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Volume: "shared", PV: "pv-shared"}
		if p != want {
			t.Errorf("entry %d = %+v, want %+v", i, p, want)
		}
	}
}

func TestVolumePod(t *testing.T) {
	const uid = "0f3c6c9e-8d3a-4f7e-9a51-3a2f0e6b1c2d"
	for _, tt := range []struct {
		path    string
		want    string
		ok      bool
		staging bool
	}{
		{path: "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~nfs/data", want: uid, ok: true},
		{path: "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-1/mount", want: uid, ok: true},
		{path: "/var/lib/kubelet/pods/" + uid + "/volume-subpaths/data/app/0", want: uid, ok: true},
		{path: "/var/lib/kubelet/plugins/kubernetes.io/csi/nfs.csi.k8s.io/ab12/globalmount", staging: true},
		{path: "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~nfs"},
		{path: "/var/lib/kubelet/pods/not-a-uid/volumes/kubernetes.io~nfs/data"},
		{path: "/mnt/data"},
		{path: ""},
	} {
		got, ok := VolumePod(tt.path)
		if got != tt.want || ok != tt.ok {
			t.Errorf("VolumePod(%q) = %q, %v; want %q, %v", tt.path, got, ok, tt.want, tt.ok)
		}
		if s := IsStaging(tt.path); s != tt.staging {
			t.Errorf("IsStaging(%q) = %v, want %v", tt.path, s, tt.staging)
		}
	}
}

// TestRootVolumePod: only paths below the node's own kubelet root are pod volumes or
// staging paths; another directory named kubelet is not.
func TestRootVolumePod(t *testing.T) {
	const uid = "0f3c6c9e-8d3a-4f7e-9a51-3a2f0e6b1c2d"
	for _, tt := range []struct {
		root    Root
		path    string
		want    string
		staging bool
	}{
		{root: DefaultRoot, path: "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~nfs/data", want: uid},
		{root: DefaultRoot, path: "/var/lib/kubelet/plugins/kubernetes.io/csi/nfs.csi.k8s.io/ab12/globalmount", staging: true},
		{root: "/data/kubelet-root", path: "/data/kubelet-root/pods/" + uid + "/volume-subpaths/data/app/0", want: uid},
		{root: DefaultRoot, path: "/srv/kubelet/pods/" + uid + "/volumes/kubernetes.io~nfs/data"},
		{root: DefaultRoot, path: "/home/x/kubelet/plugins/kubernetes.io/csi/nfs.csi.k8s.io/ab12/globalmount"},
		{root: DefaultRoot, path: "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~nfs/data/kubelet/pods/" + uid + "/volumes/kubernetes.io~nfs/x"},
		{root: DefaultRoot, path: "/var/lib/kubelet/../kubelet/pods/" + uid + "/volumes/kubernetes.io~nfs/data"},
		{root: DefaultRoot, path: "/var/lib/kubeletx/pods/" + uid + "/volumes/kubernetes.io~nfs/data"},
		{root: "", path: "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~nfs/data"},
		{root: "/", path: "/pods/" + uid + "/volumes/kubernetes.io~nfs/data"},
		{root: "var/lib/kubelet", path: "var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~nfs/data"},
	} {
		got, ok := tt.root.VolumePod(tt.path)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("Root(%q).VolumePod(%q) = %q, %v; want %q", tt.root, tt.path, got, ok, tt.want)
		}
		if s := tt.root.IsStaging(tt.path); s != tt.staging {
			t.Errorf("Root(%q).IsStaging(%q) = %v, want %v", tt.root, tt.path, s, tt.staging)
		}
	}
}

func TestRootFromCommandLine(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want Root
		ok   bool
	}{
		{args: []string{"/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml"}, want: DefaultRoot, ok: true},
		{args: []string{"/usr/bin/kubelet", "--root-dir=/data/kubelet"}, want: "/data/kubelet", ok: true},
		{args: []string{"kubelet", "--root-dir", "/data/kubelet", "--v=2"}, want: "/data/kubelet", ok: true},
		{args: []string{"kubelet", "-root-dir=/a", "--root-dir=/b"}, want: "/b", ok: true},
		{args: []string{"kubelet", "--root-dir"}},
		{args: []string{"kubelet", "--root-dir=relative"}},
		{args: []string{"kubelet", "--root-dir=/data/../kubelet"}},
		{args: []string{"kubelet", "--root-dir=/"}},
		{args: []string{"kubelet", "--", "--root-dir=/x"}, want: DefaultRoot, ok: true},
	} {
		cmdline := []byte(strings.Join(tt.args, "\x00") + "\x00")
		got, ok := RootFromCommandLine(cmdline)
		if got != tt.want || ok != tt.ok {
			t.Errorf("RootFromCommandLine(%q) = %q, %v; want %q, %v", tt.args, got, ok, tt.want, tt.ok)
		}
	}
}
