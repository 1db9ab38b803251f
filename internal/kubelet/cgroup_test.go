package kubelet

import "testing"

const (
	testUID = "8f3d2c1a-5b6e-4f70-9a81-2b3c4d5e6f70"
	testCID = "4b825dc642cb6eb9a060e54bf8d69288fbee4904a1b2c3d4e5f60718293a4b5c"
)

var cgroupTests = []struct {
	name, path string
	uid, cid   string
}{
	{name: "cgroupfs burstable", path: "/kubepods/burstable/pod" + testUID + "/" + testCID, uid: testUID, cid: testCID},
	{name: "cgroupfs guaranteed", path: "/kubepods/pod" + testUID + "/" + testCID, uid: testUID, cid: testCID},
	{name: "cgroupfs pod only", path: "/kubepods/besteffort/pod" + testUID, uid: testUID},
	{name: "systemd containerd", path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod8f3d2c1a_5b6e_4f70_9a81_2b3c4d5e6f70.slice/cri-containerd-" + testCID + ".scope", uid: testUID, cid: testCID},
	{name: "systemd guaranteed docker", path: "/kubepods.slice/kubepods-pod8f3d2c1a_5b6e_4f70_9a81_2b3c4d5e6f70.slice/docker-" + testCID + ".scope", uid: testUID, cid: testCID},
	{name: "systemd crio", path: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod8f3d2c1a_5b6e_4f70_9a81_2b3c4d5e6f70.slice/crio-" + testCID + ".scope", uid: testUID, cid: testCID},
	{name: "systemd conmon", path: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod8f3d2c1a_5b6e_4f70_9a81_2b3c4d5e6f70.slice/crio-conmon-" + testCID + ".scope", uid: testUID},
	{name: "nested under a kind node, seen from the host", path: "/system.slice/docker-abc.scope/kubelet.slice/kubepods.slice/kubepods-pod8f3d2c1a_5b6e_4f70_9a81_2b3c4d5e6f70.slice/cri-containerd-" + testCID + ".scope"},
	{name: "kubepods in a user's delegated subtree", path: "/user.slice/user-1000.slice/user@1000.service/kubepods/burstable/pod" + testUID + "/" + testCID},
	{name: "kubepods below a pod's container", path: "/kubepods/burstable/pod0123456789abcdef0123456789abcdef/" + testCID + "/kubepods/pod" + testUID + "/" + testCID,
		uid: "0123456789abcdef0123456789abcdef", cid: testCID},
	{name: "pod below a QoS class too deep", path: "/kubepods/burstable/extra/pod" + testUID + "/" + testCID},
	{name: "cgroup namespace, from the kubepods cgroup", path: "/../../kubepods-besteffort.slice/kubepods-besteffort-pod8f3d2c1a_5b6e_4f70_9a81_2b3c4d5e6f70.slice/cri-containerd-" + testCID + ".scope", uid: testUID, cid: testCID},
	{name: "cgroup namespace, from the QoS cgroup", path: "/../pod" + testUID + "/" + testCID, uid: testUID, cid: testCID},
	{name: "cgroup namespace, from the root", path: "/../../../../kubepods/burstable/pod" + testUID + "/" + testCID, uid: testUID, cid: testCID},
	{name: "cgroup namespace, a user's subtree", path: "/../../../user.slice/user-1000.slice/user@1000.service/kubepods/pod" + testUID + "/" + testCID},
	{name: "static pod hash", path: "/kubepods/burstable/pod0123456789abcdef0123456789abcdef/" + testCID, uid: "0123456789abcdef0123456789abcdef", cid: testCID},
	{name: "host process", path: "/system.slice/ssh.service"},
	{name: "root", path: "/"},
	{name: "qos slice only", path: "/kubepods.slice/kubepods-burstable.slice"},
	{name: "bad uid", path: "/kubepods/burstable/podnot-a-uid/" + testCID},
	{name: "short container id", path: "/kubepods/burstable/pod" + testUID + "/abc123", uid: testUID},
	{name: "no kubepods", path: "/user.slice/pod" + testUID + "/" + testCID},
}

func TestCgroupPod(t *testing.T) {
	for _, tt := range cgroupTests {
		t.Run(tt.name, func(t *testing.T) {
			uid, cid := CgroupPod(tt.path)
			if uid != tt.uid || cid != tt.cid {
				t.Errorf("CgroupPod(%q) = %q, %q; want %q, %q", tt.path, uid, cid, tt.uid, tt.cid)
			}
		})
	}
}

func FuzzCgroupPod(f *testing.F) {
	for _, tt := range cgroupTests {
		f.Add(tt.path)
	}
	f.Fuzz(func(t *testing.T, path string) {
		uid, cid := CgroupPod(path)
		if uid == "" && cid != "" {
			t.Errorf("container %q without a pod in %q", cid, path)
		}
		if uid != "" && !isPodUID(uid) {
			t.Errorf("pod UID %q of %q is not a UID", uid, path)
		}
	})
}

func TestShortContainerID(t *testing.T) {
	for id, want := range map[string]string{testCID: "4b825dc642cb", "4b825dc642cb": "4b825dc642cb", "abc": "abc", "": ""} {
		if got := ShortContainerID(id); got != want {
			t.Errorf("ShortContainerID(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestPodCgroupDirs checks that every directory PodCgroupDirs names is one CgroupPod reads
// back as the same pod, and that a UID kubelet would not use names nothing.
func TestPodCgroupDirs(t *testing.T) {
	const uid = "0f3c2a4e-1b2d-4c5e-8f90-a1b2c3d4e5f6"
	dirs := PodCgroupDirs(uid)
	if len(dirs) != 6 {
		t.Fatalf("PodCgroupDirs(%q) = %d directories, want 6 (3 QoS classes x 2 drivers)", uid, len(dirs))
	}
	for _, d := range dirs {
		if got, _ := CgroupPod("/" + d); got != uid {
			t.Errorf("CgroupPod(%q) = %q, want %q", d, got, uid)
		}
	}
	for _, bad := range []string{"", "../../etc", "0f3c2a4e/../..", "POD"} {
		if got := PodCgroupDirs(bad); got != nil {
			t.Errorf("PodCgroupDirs(%q) = %q, want nil", bad, got)
		}
	}
}

func TestOwnPodCgroup(t *testing.T) {
	for _, tt := range []struct {
		path              string
		ownContainer, sib bool
	}{
		{"/", true, false},
		{"/init", true, false},
		{"/a/b", true, false},
		{"/../" + testCID, false, true},
		{"/../cri-containerd-" + testCID + ".scope", false, true},
		{"/../crio-" + testCID + ".scope", false, true},
		// the pod's cgroup itself, a non-container sibling, and anything further up
		{"/..", false, false},
		{"/../crio-conmon-" + testCID + ".scope", false, false},
		{"/../abc", false, false},
		{"/../" + testCID + "/x", false, false},
		{"/../../pod" + testUID + "/" + testCID, false, false},
		{"/../../../../system.slice/kubelet.service", false, false},
		{"", false, false},
		{"relative", false, false},
		{"/a/../b", false, false},
	} {
		own, sib := OwnPodCgroup(tt.path)
		if own != tt.ownContainer || sib != tt.sib {
			t.Errorf("OwnPodCgroup(%q) = %v, %v; want %v, %v", tt.path, own, sib, tt.ownContainer, tt.sib)
		}
	}
}
