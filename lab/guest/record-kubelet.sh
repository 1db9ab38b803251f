#!/usr/bin/env bash
# Guest side of lab/record-kubelet.sh: NFS superblocks mounted the way kubelet mounts them,
# recorded into internal/metrics/testdata/lab-<kernel>-kubelet. The guest's / is read-only,
# so kubelet's root directory is /mnt/var/lib/kubelet (on the /mnt tmpfs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
out=/lab/internal/metrics/testdata/lab-$(uname -r)-kubelet
k=/mnt/var/lib/kubelet
uid_a=6f1b3a52-8c4d-4e0a-9b7e-2d5c1f0a3e71
uid_b=a04c9e1d-5b27-4f38-8e6a-7c2b9d1e4f05
uid_c=c3d2e1f0-a9b8-4c7d-8e6f-5a4b3c2d1e0f
static=9d3c1e5f7a2b4c6d8e0f1a3b5c7d9e1f

bind() { # bind SRC DIR
	mkdir -p "$2"
	mount --bind "$1" "$2"
}

lab_step "mount kubelet-shaped"
# A CSI driver that stages: one global mount per node, bind-mounted into each pod; pod B
# also mounts a subPath of it.
global=$k/plugins/kubernetes.io/csi/file.csi.azure.com/$(printf '%s' "127.0.0.1#tmp" | sha256sum | cut -d' ' -f1)/globalmount
lab_mount "127.0.0.1:${LAB_EXPORT_TMP#"$LAB_EXPORT_ROOT"}" "$global" vers=4.1
mkdir -p "$global/app"
bind "$global" "$k/pods/$uid_a/volumes/kubernetes.io~csi/pv-tmp/mount"
bind "$global" "$k/pods/$uid_b/volumes/kubernetes.io~csi/pv-tmp/mount"
bind "$global/app" "$k/pods/$uid_b/volume-subpaths/tmp/app/0"
# kubelet's in-tree NFS plugin, pod A's volume "disk".
lab_mount "127.0.0.1:$LAB_EXPORT_DISK" "$k/pods/$uid_a/volumes/kubernetes.io~nfs/disk" vers=3
# A CSI driver that mounts into each pod directly (NFS CSI): the same export and options
# twice, one superblock.
for uid in "$uid_c" "$static"; do
	lab_mount "127.0.0.2:${LAB_EXPORT_DISK#"$LAB_EXPORT_ROOT"}" "$k/pods/$uid/volumes/kubernetes.io~csi/pvc-5e0c7a1d/mount" vers=4.2
done

LAB_RECORD_CMD="bash lab/record-kubelet.sh" "$here/record.sh" "$out" "NFS mounted as kubelet mounts it, under /mnt/var/lib/kubelet: 127.0.0.1:/tmp (NFSv4.1) staged by CSI driver file.csi.azure.com and bind-mounted into pods $uid_a and $uid_b as PV pv-tmp, with a subPath (volume tmp) in the second; 127.0.0.1:/srv/disk (NFSv3) as in-tree NFS volume disk of pod $uid_a; 127.0.0.2:/disk (NFSv4.2) mounted directly as PV pvc-5e0c7a1d by pod $uid_c and static pod $static."
