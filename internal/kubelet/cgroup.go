package kubelet

import "strings"

// CgroupPod returns the pod UID and container ID that a process's cgroup path names, as
// kubelet and the container runtimes name cgroups; both are empty for a process outside
// a pod. path is the path field of one /proc/<pid>/cgroup line (cgroups(7)): the v2 line
// "0::<path>", or a v1 controller's. Both kubelet cgroup drivers are recognised:
//
//	cgroupfs: /kubepods/burstable/pod<uid>/<container id>
//	systemd:  /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid, "_" for "-">.slice/cri-containerd-<id>.scope
//
// with the runtime prefixes cri-containerd-, docker- and crio- (the id is 64 hex digits).
// A process in the pod's cgroup but no container's (a runtime's conmon, the pause
// container under some runtimes) gets the pod UID only.
//
// The match is anchored where kubelet puts pods: kubepods at the cgroup root, then the
// QoS class's cgroup (none for a Guaranteed pod), then the pod's. Anyone with a cgroup
// subtree of their own (a systemd user session, a container with cgroup delegation) can
// name cgroups "kubepods" and "pod<uid>" below it, so a pod cgroup anywhere else is not
// believed. A reader in a cgroup namespace of its own (an agent in a pod) sees other
// cgroups relative to its own, as "/../../<path>": after those "..", the path starts
// below a common ancestor, which for another pod's process is the kubepods or QoS cgroup,
// so there it may start at the QoS class's cgroup or the pod's too. Not recognised: a
// kubelet --cgroup-root other than "/", and pods of a node nested in a container (kind)
// as seen from the host.
func CgroupPod(path string) (podUID, containerID string) {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	up := 0
	for up < len(seg) && seg[up] == ".." {
		up++
	}
	seg = seg[up:]
	k := 0
	switch {
	case len(seg) > 0 && (seg[0] == "kubepods" || seg[0] == "kubepods.slice"):
		k = 1
	case up == 0:
		return "", "" // from the root, kubepods comes first
	}
	if k < len(seg) && isQoSSegment(seg[k]) {
		k++
	}
	if k >= len(seg) {
		return "", ""
	}
	uid, ok := podSegment(seg[k])
	if !ok {
		return "", ""
	}
	if k+1 < len(seg) {
		containerID = containerSegment(seg[k+1])
	}
	return uid, containerID
}

// isQoSSegment reports whether s is the cgroup of a QoS class below kubepods: "burstable"
// or "besteffort" (cgroupfs driver), "kubepods-burstable.slice" or
// "kubepods-besteffort.slice" (systemd driver).
func isQoSSegment(s string) bool {
	switch s {
	case "burstable", "besteffort", "kubepods-burstable.slice", "kubepods-besteffort.slice":
		return true
	}
	return false
}

// podSegment parses the pod's cgroup: "pod<uid>" (cgroupfs driver) or
// "kubepods[-<qos>]-pod<uid with _>.slice" (systemd driver).
func podSegment(s string) (string, bool) {
	if rest, ok := strings.CutSuffix(s, ".slice"); ok {
		i := strings.LastIndex(rest, "-pod")
		if i < 0 || !strings.HasPrefix(rest, "kubepods") {
			return "", false
		}
		uid := strings.ReplaceAll(rest[i+len("-pod"):], "_", "-")
		return uid, isPodUID(uid)
	}
	uid, ok := strings.CutPrefix(s, "pod")
	return uid, ok && isPodUID(uid)
}

// containerSegment returns the container ID of a container's cgroup: "<id>" (cgroupfs
// driver) or "<runtime>-<id>.scope" (systemd driver), "" for anything else.
func containerSegment(s string) string {
	if rest, ok := strings.CutSuffix(s, ".scope"); ok {
		for _, p := range []string{"cri-containerd-", "docker-", "crio-"} {
			if id, ok := strings.CutPrefix(rest, p); ok && isContainerID(id) {
				return id
			}
		}
		return ""
	}
	if isContainerID(s) {
		return s
	}
	return ""
}

// ShortContainerID is a container ID as crictl and kubectl print it: its first 12
// characters.
func ShortContainerID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// isContainerID accepts the 64 lower-case hex digits runtimes name containers with.
func isContainerID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// PodCgroupDirs returns the cgroup directories, relative to the cgroup v2 root, that
// kubelet may have named for the pod podUID: one per QoS class (Guaranteed pods sit
// directly below kubepods) and per cgroup driver, in the forms CgroupPod parses:
//
//	cgroupfs: kubepods/pod<uid>, kubepods/burstable/pod<uid>, kubepods/besteffort/pod<uid>
//	systemd:  kubepods.slice/kubepods-pod<uid, "_" for "-">.slice, and the burstable and
//	          besteffort slices below kubepods-<qos>.slice
//
// A pod's QoS class is not in its UID, so the caller tries each; exactly one exists for a
// running pod. A podUID kubelet would not name a cgroup with gives nil, so that nothing
// built from it leaves the kubepods tree.
func PodCgroupDirs(podUID string) []string {
	if !isPodUID(podUID) {
		return nil
	}
	systemd := strings.ReplaceAll(podUID, "-", "_")
	return []string{
		"kubepods/pod" + podUID,
		"kubepods/burstable/pod" + podUID,
		"kubepods/besteffort/pod" + podUID,
		"kubepods.slice/kubepods-pod" + systemd + ".slice",
		"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + systemd + ".slice",
		"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + systemd + ".slice",
	}
}

// OwnPodCgroup reports whether path, one /proc/<pid>/cgroup path read by a process at the
// root of a cgroup namespace of its own container (its own cgroup reads "/"), is in the
// reader's own pod, and how: ownContainer for the reader's container or a cgroup below it
// ("/", "/x"), and sibling for another container of the same pod ("/../<container>", in
// the forms containerSegment parses, such as the pod's sandbox).
//
// Runtimes give each container of a cgroup v2 host a cgroup namespace whose root is the
// container's cgroup (containerd and CRI-O since Kubernetes 1.25 made it the default on
// cgroup v2), so a process in a pod sees its own pod's cgroup only as "/..": no name, no
// UID. A sibling container named as a runtime names containers is what shows that the
// namespace's root is a container's cgroup and its parent a pod's; the caller, which
// knows its own pod UID from the downward API, may then count these processes as its
// pod's. Other pods' processes are below a common ancestor further up, and CgroupPod
// parses them.
func OwnPodCgroup(path string) (ownContainer, sibling bool) {
	if path == "" || path[0] != '/' {
		return false, false
	}
	seg := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case seg[0] == "":
		return true, false // "/"
	case seg[0] != "..":
		for _, s := range seg {
			if s == ".." {
				return false, false
			}
		}
		return true, false
	case len(seg) == 2 && containerSegment(seg[1]) != "":
		return false, true
	}
	return false, false
}
