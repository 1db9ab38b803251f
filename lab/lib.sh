# shellcheck shell=bash disable=SC2034 # the settings are used by the scripts that source this file
# Shared settings for the lab scripts. Sourced, never run.

# The cache lives outside the clone so that a fresh checkout (CI) reuses the guest root.
LAB_CACHE=${NFSTUNE_LAB_CACHE:-/var/cache/nfstune-lab}
LAB_VENV="$LAB_CACHE/venv"             # virtme-ng, installed with pip into a venv
LAB_VNG="$LAB_VENV/bin/vng"
LAB_KERNELS="$LAB_CACHE/kernels"       # other kernel lines, one directory each (lab_kernel_dir)

# Pinned versions: change them and the next lab-setup rebuilds what depends on them.
LAB_VIRTME_NG_VERSION=1.42
LAB_SUITE=bookworm
LAB_ROOT_KERNEL_LINE=6.1 # the kernel line of LAB_SUITE's own linux-image-amd64
LAB_GUEST_PACKAGES=linux-image-amd64,nfs-kernel-server,nfs-common,fio,udev,iproute2,kmod,procps,util-linux,e2fsprogs,iputils-ping
# The Kubernetes node's packages (make k8s-e2e): the container runtime, CNI plugins and the
# AppArmor userspace containerd loads its default profile with.
LAB_K8S_PACKAGES=containerd,runc,containernetworking-plugins,apparmor,iptables

# The NFS-over-TLS guest's packages (make lab-tls): the NFS lab's with the TLS handshake
# daemon, tlshd, which Debian ships from trixie on (bookworm has none).
LAB_TLS_PACKAGES=$LAB_GUEST_PACKAGES,ktls-utils

# The arm64 guest's packages (make lab-arm64): the NFS lab's with Debian's arm64 kernel, and a
# static busybox of the guest's architecture for virtme-ng's initramfs (the host's is amd64).
LAB_ARM64_PACKAGES=${LAB_GUEST_PACKAGES/linux-image-amd64/linux-image-arm64},busybox-static

# The guest root: NFSTUNE_LAB_GUEST=nfs (the default) is the NFS lab's root; k8s is a root of
# its own with the Kubernetes node's packages added, so that the NFS lab's root, shared by
# every lab run, stays as it is and is not rebuilt when a Kubernetes run needs more; tls is a
# trixie root (Debian 13, kernel 6.12) with tlshd, for NFS over TLS; arm64 is an arm64 root
# with its kernel, booted under qemu-system-aarch64. LAB_ARCH is the root's Debian
# architecture.
LAB_GUEST=${NFSTUNE_LAB_GUEST:-nfs}
LAB_ARCH=amd64
case $LAB_GUEST in
nfs)
	LAB_ROOT="$LAB_CACHE/root"        # the guest's self-contained root filesystem
	LAB_STAMP="$LAB_CACHE/root.stamp" # written last: what the root was built from
	LAB_ROOT_PACKAGES=$LAB_GUEST_PACKAGES
	;;
k8s)
	LAB_ROOT="$LAB_CACHE/k8s-root"
	LAB_STAMP="$LAB_CACHE/k8s-root.stamp"
	LAB_ROOT_PACKAGES=$LAB_GUEST_PACKAGES,$LAB_K8S_PACKAGES
	;;
tls)
	LAB_ROOT="$LAB_CACHE/tls-root"
	LAB_STAMP="$LAB_CACHE/tls-root.stamp"
	LAB_ROOT_PACKAGES=$LAB_TLS_PACKAGES
	LAB_SUITE=trixie
	LAB_ROOT_KERNEL_LINE=6.12
	;;
arm64)
	LAB_ROOT="$LAB_CACHE/arm64-root"
	LAB_STAMP="$LAB_CACHE/arm64-root.stamp"
	LAB_ROOT_PACKAGES=$LAB_ARM64_PACKAGES
	LAB_ARCH=arm64
	;;
*) printf 'lab: error: NFSTUNE_LAB_GUEST=%s: want nfs, k8s, tls or arm64\n' "$LAB_GUEST" >&2; exit 1 ;;
esac

# The guest kernel: a Debian kernel line, by default the root's own (6.1 for the bookworm
# roots). The others come from their suite's linux-image-amd64 and boot with the same root.
LAB_KERNEL_LINE=${NFSTUNE_LAB_KERNEL:-$LAB_ROOT_KERNEL_LINE}
LAB_KERNEL_LINES="5.10 6.1 6.12 7.2"

# Guest size: 2 GiB and 2 vCPUs (the host has 2 cores; TCG uses one host thread per vCPU).
LAB_MEMORY=${NFSTUNE_LAB_MEMORY:-2G}
LAB_CPUS=${NFSTUNE_LAB_CPUS:-2}
# Whole-boot time limit, seconds; a guest that has not finished by then is killed.
LAB_TIMEOUT=${NFSTUNE_LAB_TIMEOUT:-900}
# A CPU stuck in a soft lockup this long, seconds, means a hung kernel: lab/vm.sh stops the
# guest and boots once more.
LAB_LOCKUP=${NFSTUNE_LAB_LOCKUP:-120}

lab_log() { printf 'lab: %s\n' "$*" >&2; }
lab_die() {
	printf 'lab: error: %s\n' "$*" >&2
	exit 1
}

# lab_mirror prints the Debian mirror the host's apt uses, so the guest root comes from the
# same place as the host's packages (deb822 .sources files and one-line .list files).
lab_mirror() {
	local m
	m=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk '{print $2}' | grep -v -- '-security' | grep -m1 debian || true)
	if [[ -z $m ]]; then
		m=$(grep -hsE '^deb\s' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
			awk '{for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' |
			grep -v -- '-security' | grep -m1 debian || true)
	fi
	printf '%s\n' "${m:-http://deb.debian.org/debian}"
}

# lab_kernel_suite prints the Debian suite that serves a kernel line, and fails for a line
# the lab does not know.
lab_kernel_suite() {
	case $1 in
	5.10) echo bullseye ;;
	6.1) echo bookworm ;;
	6.12) echo trixie ;;
	7.2) echo forky ;;
	*) lab_die "NFSTUNE_LAB_KERNEL=$1: not one of $LAB_KERNEL_LINES" ;;
	esac
}

# lab_kernel_dir prints where lab-setup unpacks a kernel line other than the root's: root/ holds the
# packages' files, release the kernel release (uname -r), stamp what they were fetched from.
lab_kernel_dir() { printf '%s/%s\n' "$LAB_KERNELS" "$1"; }

# lab_newest prints the last, in version order, of the paths given that exist (a glob that
# matched nothing stays as it was written, and is left out).
lab_newest() {
	local f
	for f in "$@"; do
		[[ -e $f ]] && printf '%s\n' "$f"
	done | sort -V | tail -n1
}

# lab_kernel prints the guest kernel image of $LAB_KERNEL_LINE: the cached root's own for its line,
# the unpacked package's for the others (boot/vmlinuz-RELEASE, or from 7.2 on
# usr/lib/modules/RELEASE/vmlinuz). Their modules are linked into the root's /lib/modules by
# lab-setup, where the guest's modprobe finds them.
lab_kernel() {
	local k dir
	lab_kernel_suite "$LAB_KERNEL_LINE" >/dev/null
	[[ $LAB_ARCH == amd64 || $LAB_KERNEL_LINE == "$LAB_ROOT_KERNEL_LINE" ]] ||
		lab_die "NFSTUNE_LAB_KERNEL=$LAB_KERNEL_LINE: the $LAB_ARCH guest boots its root's own kernel, $LAB_ROOT_KERNEL_LINE"
	if [[ $LAB_KERNEL_LINE == "$LAB_ROOT_KERNEL_LINE" ]]; then
		# Only /boot: the root's /lib/modules also holds the other lines' modules (and 7.2's
		# image).
		dir=$LAB_ROOT
		k=$(lab_newest "$dir"/boot/vmlinuz-*)
	else
		dir=$(lab_kernel_dir "$LAB_KERNEL_LINE")/root
		k=$(lab_newest "$dir"/boot/vmlinuz-* "$dir"/usr/lib/modules/*/vmlinuz)
	fi
	[[ -n $k ]] || lab_die "no $LAB_KERNEL_LINE kernel in $dir: run make lab-setup NFSTUNE_LAB_KERNEL=$LAB_KERNEL_LINE"
	printf '%s\n' "$k"
}
