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
func CgroupPod(path string) (podUID, containerID string) {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	k := -1
	for i, s := range seg {
		if s == "kubepods" || s == "kubepods.slice" {
			k = i
			break
		}
	}
	if k < 0 {
		return "", ""
	}
	for i := k + 1; i < len(seg); i++ {
		uid, ok := podSegment(seg[i])
		if !ok {
			continue
		}
		if i+1 < len(seg) {
			containerID = containerSegment(seg[i+1])
		}
		return uid, containerID
	}
	return "", ""
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
