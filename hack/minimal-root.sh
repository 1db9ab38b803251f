#!/usr/bin/env bash
# The minimal-root check: does a bare Debian 12 machine get through the README's commands with no
# step done by hand? It builds a Debian minbase root with only Go (the host's, bound read-only),
# make, git, python3 and ca-certificates, clones this repository's HEAD into it and runs, chrooted
# in a mount namespace of its own:
#
#   hack/minimal-root.sh           make check's version (make minimal-root-check), about 5 minutes:
#                                  the root really lacks kmod, binutils, file, qemu, debootstrap,
#                                  ShellCheck and prometheus; hack/deps.sh names them; lab-setup
#                                  installs them; make demo's first boot passes (a small file, one
#                                  run); a removed package is installed again by the next set-up;
#                                  with installing off, a removed package fails with one line naming
#                                  the command and its package. The Go and lab caches are the host's
#                                  (the lab's guest root is not what this checks).
#   hack/minimal-root.sh --full    CI=true bash .ci/run, then make demo, from empty Go and lab caches
#                                  inside the root; prints how long each took.
#
# Env: NFSTUNE_MINROOT_CACHE (where the minbase root is cached; default the lab cache's minroot/).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$repo/lab/lib.sh"

full=0
case ${1:-} in
--full) full=1 ;;
"") ;;
*) lab_die "usage: hack/minimal-root.sh [--full]" ;;
esac
[[ $(id -u) -eq 0 ]] || lab_die "the minimal-root check needs root (debootstrap, chroot, mounts)"
bash "$here/deps.sh" ensure lab
command -v unshare >/dev/null || lab_die "unshare missing: apt-get install util-linux"

# The packages the issue's bare machine has on top of minbase, and those it must not have: the
# check is meaningless if minbase ever brings one of them.
base_include=make,git,python3,ca-certificates
absent_packages="kmod binutils file qemu-system-x86 debootstrap shellcheck prometheus busybox-static"

cache=${NFSTUNE_MINROOT_CACHE:-$LAB_CACHE/minroot}
base=$cache/base
stamp=$cache/base.stamp
stamp_text() { printf 'suite=%s\nmirror=%s\ninclude=%s\n' "$LAB_SUITE" "$(lab_mirror)" "$base_include"; }

mkdir -p "$cache"
exec 8>"$cache/.lock"
flock 8
if [[ ! -d $base || $(cat "$stamp" 2>/dev/null) != "$(stamp_text)" ]]; then
	lab_log "minimal root: debootstrap minbase + $base_include"
	rm -rf "$base" "$base.tmp" "$stamp"
	debootstrap --variant=minbase --include="$base_include" "$LAB_SUITE" "$base.tmp" "$(lab_mirror)" \
		>"$cache/debootstrap.log" 2>&1 || { tail -n 30 "$cache/debootstrap.log" >&2; lab_die "debootstrap failed"; }
	rm -rf "$base.tmp"/var/cache/apt/archives/*.deb
	mv "$base.tmp" "$base"
	stamp_text >"$stamp"
fi
for p in $absent_packages; do
	if chroot "$base" dpkg-query -W -f="\${Status}" "$p" 2>/dev/null | grep -q 'install ok installed'; then
		lab_die "the minimal root has $p: the check would prove nothing (remove $cache and run again)"
	fi
done

# One run: an overlay on the cached base (or a copy), so every run starts bare.
run=$(mktemp -d "$cache/run.XXXXXX")
trap 'rm -rf "$run"' EXIT
mkdir -p "$run/upper" "$run/work" "$run/root"
goroot=$(go env GOROOT)
share_caches=$((1 - full))
gomodcache=$(go env GOMODCACHE)
gocache=$(go env GOCACHE)

mode=quick
((full)) && mode=full

lab_log "minimal root: $( ((full)) && echo 'CI=true bash .ci/run and make demo, empty caches' || echo 'set-up, make demo, a removed package') (root: $run/root)"
# shellcheck disable=SC2016 # expanded by the inner shell
unshare --mount --propagation private bash -euo pipefail -c '
	run=$1 base=$2 goroot=$3 repo=$4 share=$5 gomodcache=$6 gocache=$7 labcache=$8 mode=$9
	r=$run/root
	# An overlay where the filesystem allows one (not on an overlay, as inside this very check):
	# else a copy.
	mount -t overlay overlay -o "lowerdir=$base,upperdir=$run/upper,workdir=$run/work" "$r" 2>/dev/null ||
		cp -a "$base/." "$r/"
	mount -t proc proc "$r/proc"
	mount -t sysfs sysfs "$r/sys"
	mount --rbind /dev "$r/dev"
	mount -t tmpfs tmpfs "$r/tmp"
	mount -t tmpfs tmpfs "$r/run"
	mkdir -p "$r/usr/local/go" "$r/src"
	mount --bind -o ro "$goroot" "$r/usr/local/go"
	mount --bind -o ro "$repo" "$r/src"
	cp /etc/resolv.conf "$r/etc/resolv.conf"
	# The host'"'"'s local trust anchors (a site'"'"'s TLS-intercepting proxy): a machine of that site
	# has them before anything else, and HTTPS to the Go module proxy needs them.
	if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
		cp /usr/local/share/ca-certificates/*.crt "$r/usr/local/share/ca-certificates/"
		chroot "$r" update-ca-certificates >/dev/null 2>&1
	fi
	if ((share)); then
		mkdir -p "$r/root/go/pkg/mod" "$r/root/.cache/go-build" "$r/var/cache/nfstune-lab"
		mount --bind "$gomodcache" "$r/root/go/pkg/mod"
		mount --bind "$gocache" "$r/root/.cache/go-build"
		mount --bind "$labcache" "$r/var/cache/nfstune-lab"
	fi
	exec chroot "$r" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
		PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		bash -euo pipefail -c "
			git config --global --add safe.directory \"*\"
			git clone -q /src /work/nfstune
			cd /work/nfstune
			exec bash hack/minimal-root-inside.sh $mode"
' minimal-root "$run" "$base" "$goroot" "$repo" "$share_caches" "$gomodcache" "$gocache" "$LAB_CACHE" "$mode"
