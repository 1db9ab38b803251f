# shellcheck shell=bash disable=SC2034 # the settings are used by the scripts that source this file
# Shared settings for the lab scripts. Sourced, never run.

# The cache lives outside the clone so that a fresh checkout (CI) reuses the guest root.
LAB_CACHE=${NFSTUNE_LAB_CACHE:-/var/cache/nfstune-lab}
LAB_ROOT="$LAB_CACHE/root"             # the guest's self-contained root filesystem
LAB_STAMP="$LAB_CACHE/root.stamp"      # written last: what the root was built from
LAB_VENV="$LAB_CACHE/venv"             # virtme-ng, installed with pip into a venv
LAB_VNG="$LAB_VENV/bin/vng"

# Pinned versions: change them and the next lab-setup rebuilds what depends on them.
LAB_VIRTME_NG_VERSION=1.42
LAB_SUITE=bookworm
LAB_GUEST_PACKAGES=linux-image-amd64,nfs-kernel-server,nfs-common,fio,udev,iproute2,kmod,procps,util-linux,e2fsprogs,iputils-ping

# Guest size: 2 GiB and 2 vCPUs (the host has 2 cores; TCG uses one host thread per vCPU).
LAB_MEMORY=${NFSTUNE_LAB_MEMORY:-2G}
LAB_CPUS=${NFSTUNE_LAB_CPUS:-2}
# Whole-boot time limit, seconds; a guest that has not finished by then is killed.
LAB_TIMEOUT=${NFSTUNE_LAB_TIMEOUT:-900}

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

# lab_kernel prints the guest kernel image inside the cached root.
lab_kernel() {
	local k
	k=$(printf '%s\n' "$LAB_ROOT"/boot/vmlinuz-* | sort -V | tail -n1)
	[[ -e $k ]] || lab_die "no kernel in $LAB_ROOT/boot: run make lab-setup"
	printf '%s\n' "$k"
}
