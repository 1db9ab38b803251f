#!/usr/bin/env bash
# Prepare the lab on a Debian 12 host: host packages, virtme-ng in a venv, and a cached,
# self-contained guest root (Debian kernel, nfsd, NFS client, fio, udev, iproute2).
# Idempotent: each step checks what is there and skips itself; the guest root is built in a
# temporary directory and renamed into place, with a stamp written last, so an interrupted
# build is redone on the next run. Nothing is installed into the host's /lib/modules.
set -euo pipefail
cd "$(dirname "$0")"
. ./lib.sh

[[ $(id -u) -eq 0 ]] || lab_die "lab-setup needs root (apt-get, debootstrap)"

# step_host_packages installs the Debian packages of the host commands the lab calls, virtme-ng's
# included (hack/deps.sh lists them), and fails naming any command still missing.
step_host_packages() {
	local groups=(lab)
	[[ $LAB_ARCH == arm64 ]] && groups+=(arm64)
	bash ../hack/deps.sh ensure "${groups[@]}"
	lab_log "host commands present"
}

step_virtme_ng() {
	if [[ -x $LAB_VNG ]] && [[ $(cat "$LAB_VENV/.nfstune-version" 2>/dev/null) == "$LAB_VIRTME_NG_VERSION" ]]; then
		lab_log "virtme-ng $LAB_VIRTME_NG_VERSION present"
		return
	fi
	lab_log "installing virtme-ng $LAB_VIRTME_NG_VERSION into $LAB_VENV"
	rm -rf "$LAB_VENV"
	# Debian's python3 refuses a system-wide pip install (PEP 668): a venv is the clean way.
	local py=python3
	[[ -x /usr/bin/python3 ]] && py=/usr/bin/python3
	"$py" -m venv "$LAB_VENV"
	"$LAB_VENV/bin/pip" install -q --disable-pip-version-check "virtme-ng==$LAB_VIRTME_NG_VERSION"
	echo "$LAB_VIRTME_NG_VERSION" >"$LAB_VENV/.nfstune-version"
}

stamp_text() {
	printf 'suite=%s\nmirror=%s\npackages=%s\n' "$LAB_SUITE" "$(lab_mirror)" "$LAB_ROOT_PACKAGES"
	[[ $LAB_ARCH == amd64 ]] || printf 'arch=%s\n' "$LAB_ARCH"
}

# step_binfmt lets the host run the arm64 root's programs, as debootstrap does to configure its
# packages: qemu-user-static's aarch64 handler, registered with binfmt_misc from the rule the
# package ships (flag F: the interpreter is opened now, so it also works inside the chroot).
# A host with systemd-binfmt or binfmt-support has it already; a container may have neither,
# nor binfmt_misc mounted.
step_binfmt() {
	[[ $LAB_ARCH == arm64 ]] || return 0
	local bm=/proc/sys/fs/binfmt_misc rule=/usr/lib/binfmt.d/qemu-aarch64.conf
	[[ -f $bm/status ]] || mount -t binfmt_misc binfmt_misc "$bm" ||
		lab_die "cannot mount binfmt_misc on $bm: the arm64 root needs it (debootstrap runs arm64 programs)"
	if [[ ! -f $bm/qemu-aarch64 ]]; then
		[[ -f $rule ]] || lab_die "$rule is missing: install qemu-user-static"
		local line
		line=$(<"$rule")
		# Without F the kernel would look for the interpreter inside the chroot.
		[[ ${line##*:} == *F* ]] || line+=F
		printf '%s\n' "$line" >"$bm/register" || lab_die "registering $rule with binfmt_misc failed"
	fi
	grep -qx enabled "$bm/qemu-aarch64" || lab_die "the qemu-aarch64 binfmt handler is disabled ($bm/qemu-aarch64)"
	lab_log "arm64 programs run through $(sed -n 's/^interpreter //p' "$bm/qemu-aarch64")"
}

step_guest_root() {
	if [[ -d $LAB_ROOT ]] && [[ $(cat "$LAB_STAMP" 2>/dev/null) == "$(stamp_text)" ]]; then
		lab_log "guest root present ($LAB_ROOT, $(basename "$(LAB_KERNEL_LINE=$LAB_ROOT_KERNEL_LINE lab_kernel)"))"
		return
	fi
	local tmp="$LAB_ROOT.tmp.$$"
	rm -rf "$LAB_ROOT".tmp.* "$LAB_STAMP"
	local mirror
	mirror=$(lab_mirror)
	if [[ $LAB_ARCH == amd64 ]]; then
		lab_log "building guest root with debootstrap from $mirror (about 2 minutes)"
	else
		lab_log "building the $LAB_ARCH guest root with debootstrap from $mirror (its programs emulated: 15 minutes or more)"
	fi
	# virtme-ng makes its own initramfs: the kernel package's would only cost time, a quarter
	# of an hour for the emulated arm64 root (INITRD=No skips initramfs-tools' kernel hook).
	local initrd=()
	[[ $LAB_ARCH == amd64 ]] || initrd=(INITRD=No)
	if ! env "${initrd[@]}" debootstrap --arch="$LAB_ARCH" --variant=minbase --include="$LAB_ROOT_PACKAGES" \
		"$LAB_SUITE" "$tmp" "$mirror" >"$LAB_ROOT.debootstrap.log" 2>&1; then
		tail -n 40 "$LAB_ROOT.debootstrap.log" >&2
		rm -rf "$tmp"
		lab_die "debootstrap failed (log: $LAB_ROOT.debootstrap.log)"
	fi
	# Trim what the guest never needs: package caches, docs, man pages.
	rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/usr/share/doc/* "$tmp"/usr/share/man/*
	# The lab's own mount points inside the guest's read-only root.
	mkdir -p "$tmp/lab" "$tmp/srv/nfs"
	rm -rf "$LAB_ROOT"
	mv "$tmp" "$LAB_ROOT"
	stamp_text >"$LAB_STAMP"
	lab_log "guest root ready: $(du -sh "$LAB_ROOT" | cut -f1), $(basename "$(LAB_KERNEL_LINE=$LAB_ROOT_KERNEL_LINE lab_kernel)")"
}

# kernel_apt runs apt-get or apt-cache ($1) with a private configuration in DIR ($2): its own
# sources list, package lists and cache, so the host's apt is neither read nor changed.
kernel_apt() {
	local tool=$1 dir=$2
	shift 2
	# Check-Valid-Until=false: a testing suite's Release (forky's) is valid for a week, and a
	# mirror or proxy that serves an older copy is refused for it ("Release file ... is
	# expired"), though its signature, which apt still checks, holds. The lab fetches one
	# kernel; a stale index gives an older one, which the ABI check below still names.
	"$tool" -q -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" -o APT::Sandbox::User=root \
		-o Acquire::Check-Valid-Until=false \
		-o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false \
		-o Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false "$@"
}

# modules_dir prints ROOT's modules directory for ABI: lib/modules/ABI, or usr/lib/modules/ABI
# in packages built for a merged /usr.
modules_dir() {
	local d
	for d in "$1/lib/modules/$2" "$1/usr/lib/modules/$2"; do
		[[ -d $d ]] && { printf '%s\n' "$d"; return 0; }
	done
	return 1
}

kernel_stamp_text() {
	printf 'line=%s\nsuite=%s\nmirror=%s\n' "$LAB_KERNEL_LINE" "$(lab_kernel_suite "$LAB_KERNEL_LINE")" "$(lab_mirror)"
}

# step_kernel fetches a kernel line other than the root's own from its Debian suite: the
# package linux-image-amd64 depends on (linux-image-ABI, e.g. linux-image-5.10.0-32-amd64)
# and its linux-*-ABI dependencies (7.2 splits the image into binary, modules and base), all
# unpacked with dpkg -x into kernels/LINE/root, with modules.dep made by depmod. Then it links
# the modules into the guest root's /lib/modules/ABI (hard links: the root is rebuilt
# without them when its stamp changes, and this step links them again).
# step_k8s_dirs creates, in the k8s root, the node's state directories (lab/k8slab mounts a
# tmpfs on each: the guest cannot create them on its read-only 9p root).
step_k8s_dirs() {
	[[ $LAB_GUEST == k8s ]] || return 0
	local d
	for d in var/lib/containerd var/lib/kubelet var/lib/cni var/log/pods var/log/containers \
		etc/cni/net.d opt/nfstune etc/nfstune var/lib/nfstune; do
		mkdir -p "$LAB_ROOT/$d"
	done
}

step_kernel() {
	[[ $LAB_KERNEL_LINE == "$LAB_ROOT_KERNEL_LINE" ]] && return
	local dir suite mirror
	dir=$(lab_kernel_dir "$LAB_KERNEL_LINE")
	suite=$(lab_kernel_suite "$LAB_KERNEL_LINE")
	mirror=$(lab_mirror)
	if [[ -d $dir/root && $(cat "$dir/stamp" 2>/dev/null) == "$(kernel_stamp_text)" ]]; then
		lab_log "kernel $LAB_KERNEL_LINE present ($(cat "$dir/release"))"
	else
		local tmp="$dir.tmp.$$"
		rm -rf "$dir".tmp.* "$dir"
		mkdir -p "$tmp/apt/lists/partial" "$tmp/apt/cache/archives/partial" "$tmp/debs"
		printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
			"$mirror" "$suite" >"$tmp/apt/sources.list"
		lab_log "fetching the $LAB_KERNEL_LINE kernel from $suite ($mirror)"
		kernel_apt apt-get "$tmp/apt" update >"$tmp/apt.log" 2>&1 ||
			{ cat "$tmp/apt.log" >&2; lab_die "apt-get update for $suite failed"; }
		local abi
		abi=$(kernel_apt apt-cache "$tmp/apt" depends linux-image-amd64 |
			sed -n 's/^ *Depends: linux-image-\(.*\)$/\1/p' | head -n1)
		[[ -n $abi ]] || lab_die "$suite: linux-image-amd64 depends on no linux-image-ABI package"
		[[ $abi == "$LAB_KERNEL_LINE".* ]] ||
			lab_die "$suite now serves kernel $abi, not $LAB_KERNEL_LINE: update LAB_KERNEL_LINES and lab_kernel_suite in lab/lib.sh"
		local pkgs
		mapfile -t pkgs < <(printf 'linux-image-%s\n' "$abi"
			kernel_apt apt-cache "$tmp/apt" depends "linux-image-$abi" |
				sed -n "s/^ *Depends: \(linux-[a-z]*-$abi\)\$/\1/p")
		lab_log "downloading ${pkgs[*]}"
		(cd "$tmp/debs" && kernel_apt apt-get "$tmp/apt" download "${pkgs[@]}" >>"$tmp/apt.log" 2>&1) ||
			{ cat "$tmp/apt.log" >&2; lab_die "apt-get download failed"; }
		local deb
		for deb in "$tmp"/debs/*.deb; do
			dpkg -x "$deb" "$tmp/root"
		done
		local moddir
		moddir=$(modules_dir "$tmp/root" "$abi") || lab_die "the $abi packages hold no modules"
		depmod -a -b "${moddir%/lib/modules/*}" "$abi" || lab_die "depmod failed for $abi"
		(cd "$tmp/debs" && ls) >"$tmp/packages"
		echo "$abi" >"$tmp/release"
		rm -rf "$tmp/apt" "$tmp/debs"
		mv "$tmp" "$dir"
		kernel_stamp_text >"$dir/stamp"
		lab_log "kernel $LAB_KERNEL_LINE ready: $abi, $(du -sh "$dir" | cut -f1)"
	fi
	local abi src
	abi=$(cat "$dir/release")
	[[ -n $abi ]] || lab_die "$dir/release is empty: remove $dir and run lab-setup again"
	src=$(modules_dir "$dir/root" "$abi") || lab_die "no modules for $abi in $dir/root"
	if [[ ! -f $LAB_ROOT/lib/modules/$abi/modules.dep ]]; then
		lab_log "linking the $abi modules into $LAB_ROOT/lib/modules"
		rm -rf "$LAB_ROOT/lib/modules/$abi" "$LAB_ROOT/lib/modules/$abi.tmp"
		cp -al "$src" "$LAB_ROOT/lib/modules/$abi.tmp"
		mv "$LAB_ROOT/lib/modules/$abi.tmp" "$LAB_ROOT/lib/modules/$abi"
	fi
}

lab_kernel_suite "$LAB_KERNEL_LINE" >/dev/null
mkdir -p "$LAB_CACHE"
# One set-up at a time: several lab runs may start together on a fresh machine. What all
# guests share (host packages, virtme-ng, the kernel lines) is under one lock, each root under
# its own, so that building one root (the emulated arm64 one takes a quarter of an hour) does
# not hold up the others' runs. The root's lock is taken first, never while holding the
# shared one.
exec 9>"$LAB_CACHE/.setup.lock"
flock 9
step_host_packages
step_virtme_ng
flock -u 9
exec 8>"$LAB_CACHE/.setup.$LAB_GUEST.lock"
flock 8
step_binfmt
step_guest_root
flock 9
step_kernel
step_k8s_dirs
