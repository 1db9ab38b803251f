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

step_host_packages() {
	local want=(qemu-system-x86 debootstrap python3 python3-venv busybox-static)
	local missing=()
	for p in "${want[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if ((${#missing[@]} == 0)); then
		lab_log "host packages present"
		return
	fi
	lab_log "installing host packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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
	printf 'suite=%s\nmirror=%s\npackages=%s\n' "$LAB_SUITE" "$(lab_mirror)" "$LAB_GUEST_PACKAGES"
}

step_guest_root() {
	if [[ -d $LAB_ROOT ]] && [[ $(cat "$LAB_STAMP" 2>/dev/null) == "$(stamp_text)" ]]; then
		lab_log "guest root present ($LAB_ROOT, $(basename "$(lab_kernel)"))"
		return
	fi
	local tmp="$LAB_CACHE/root.tmp.$$"
	rm -rf "$LAB_CACHE"/root.tmp.* "$LAB_STAMP"
	local mirror
	mirror=$(lab_mirror)
	lab_log "building guest root with debootstrap from $mirror (about 2 minutes)"
	if ! debootstrap --variant=minbase --include="$LAB_GUEST_PACKAGES" \
		"$LAB_SUITE" "$tmp" "$mirror" >"$LAB_CACHE/debootstrap.log" 2>&1; then
		tail -n 40 "$LAB_CACHE/debootstrap.log" >&2
		rm -rf "$tmp"
		lab_die "debootstrap failed (log: $LAB_CACHE/debootstrap.log)"
	fi
	# Trim what the guest never needs: package caches, docs, man pages.
	rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/usr/share/doc/* "$tmp"/usr/share/man/*
	# The lab's own mount points inside the guest's read-only root.
	mkdir -p "$tmp/lab" "$tmp/srv/nfs"
	rm -rf "$LAB_ROOT"
	mv "$tmp" "$LAB_ROOT"
	stamp_text >"$LAB_STAMP"
	lab_log "guest root ready: $(du -sh "$LAB_ROOT" | cut -f1), $(basename "$(lab_kernel)")"
}

mkdir -p "$LAB_CACHE"
# One set-up at a time: several lab runs may start together on a fresh machine.
exec 9>"$LAB_CACHE/.setup.lock"
flock 9
step_host_packages
step_virtme_ng
step_guest_root
