#!/usr/bin/env bash
# The host commands that the build, the checks and the lab call, each with the Debian package
# that provides it, and the one place that installs them.
#
#   hack/deps.sh ensure GROUP...   install the packages of the missing commands, then check again
#   hack/deps.sh check GROUP...    only check; exit 1 naming each missing command and its package
#   hack/deps.sh list [GROUP...]   print the table
#
# Groups: ci (what .ci/run needs to start), verify (make verify, the unit tests and make release), bpf
# (make bpf, which regenerates the committed eBPF objects), lab (lab-setup,
# the lab's boots through virtme-ng, make demo, make k8s-e2e), arm64 (the arm64 guest of make
# lab-arm64, which lab-setup adds when NFSTUNE_LAB_GUEST=arm64). A command missing after the install
# is named on one line with its package, so a bare machine fails with the fix, not with a traceback
# from inside a tool. NFSTUNE_DEPS_NO_INSTALL=1 makes ensure behave as check.
#
# The table lists what a program calls by name, whether or not Debian's minbase has it: a command
# that moves to another package shows here first. `make minimal-root-check` proves the table
# complete: it runs the lab set-up and make demo's first boot in a Debian minbase root that has only
# Go, make, git, python3 and ca-certificates (hack/minimal-root.sh).
set -euo pipefail

# group  command  package  who calls it
# A command of the form "probe:NAME" is not a program on the PATH but a check done by probe_NAME
# below (a Python module, a static busybox).
table() {
	cat <<-'EOF'
	ci      make                 make             .ci/run, every make target
	ci      git                  git              .ci/run, the Makefile (version), go (VCS stamping)
	ci      apt-get              apt              this script
	ci      dpkg-query           dpkg             this script
	verify  gofmt                probe:go         make verify (comes with Go, not from Debian)
	verify  shellcheck           shellcheck       make verify
	verify  promtool             prometheus       make rules-test; Go tests of deploy, metrics, agent and render
	verify  pyflakes3            pyflakes3        make verify: the Python of hack/
	verify  apparmor_parser      apparmor         Go test of deploy: the agent's AppArmor profile compiles
	verify  sha256sum            coreutils        make release: SHA256SUMS, and its test (sha256sum --check)
	verify  sort                 coreutils        make release: SHA256SUMS in a fixed order
	verify  find                 findutils        make release: the files SHA256SUMS lists
	verify  xargs                findutils        make release: SHA256SUMS
	verify  tar                  tar              make release: the kubectl plugin's krew archives (hack/release-extras.sh)
	verify  gzip                 gzip             make release: the krew archives
	verify  awk                  mawk             make release: the release notes from CHANGELOG.md
	verify  setsid               util-linux       go test of internal/fio: a job that leaves fio's session
	bpf     clang-14             clang-14         make bpf: the per-pod NFS I/O collector's eBPF objects (hack/bpf-gen.sh)
	bpf     llvm-strip           llvm             make bpf: bpf2go strips the objects' DWARF
	bpf     probe:libbpf         libbpf-dev       make bpf: bpf_helpers.h, bpf_tracing.h, bpf_core_read.h
	lab     python3              python3          lab-setup (virtme-ng's venv), lab/k8s-e2e.sh
	lab     probe:venv           python3-venv     lab-setup: python3 -m venv
	lab     debootstrap          debootstrap      lab-setup: the guest root
	lab     gpgv                 gpgv             debootstrap and apt: signatures of the Debian archive
	lab     depmod               kmod             lab-setup (other kernel lines); virtme-ng
	lab     modprobe             kmod             virtme-ng: the guest's modules (virtme/modfinder.py)
	lab     qemu-system-x86_64   qemu-system-x86  virtme-ng: the guest
	lab     file                 file             virtme-ng: the kernel's version (virtme/commands/run.py)
	lab     strings              binutils         virtme-ng: the kernel's version when file cannot tell
	lab     probe:busybox        busybox-static   virtme-ng's initramfs; lab/k8slab/mkimages (/bin/busybox, static)
	lab     dpkg                 dpkg             lab-setup: dpkg -x of other kernel lines
	lab     apt-cache            apt              lab-setup: other kernel lines
	lab     flock                util-linux       lab-setup: one set-up at a time
	lab     timeout              coreutils        lab/vm.sh: the boot's time limit
	lab     mkfifo               coreutils        lab/vm.sh: the console pipe
	lab     truncate             coreutils        lab/vm.sh: the export's disk image
	lab     sed                  sed              lab scripts
	lab     grep                 grep             lab scripts
	lab     awk                  mawk             lab/lib.sh: the Debian mirror
	arm64   qemu-system-aarch64  qemu-system-arm  virtme-ng --arch arm64: the arm64 guest
	arm64   probe:qemu-aarch64   qemu-user-static lab-setup: debootstrap of the arm64 root runs its programs through binfmt_misc
	arm64   mount                mount            lab-setup: binfmt_misc
	EOF
}

# binfmt_misc's rule for aarch64 comes with the static qemu-user, registered by lab-setup.
probe_qemu-aarch64() { [[ -x /usr/bin/qemu-aarch64-static && -f /usr/lib/binfmt.d/qemu-aarch64.conf ]]; }
probe_libbpf() { [[ -f /usr/include/bpf/bpf_helpers.h && -f /usr/include/bpf/bpf_tracing.h ]]; }
probe_go() { command -v go >/dev/null 2>&1 && command -v gofmt >/dev/null 2>&1; }
probe_venv() { command -v python3 >/dev/null 2>&1 && python3 -c 'import ensurepip, venv' >/dev/null 2>&1; }
# virtme-ng copies the host's busybox into the guest's initramfs and the lab's test image
# carries /bin/busybox: both need the static build.
probe_busybox() {
	[[ -x /bin/busybox ]] && /bin/busybox true >/dev/null 2>&1 &&
		! { command -v ldd >/dev/null 2>&1 && ldd /bin/busybox >/dev/null 2>&1; }
}

# describe names a command, or what a probe looks for, in an error.
describe() {
	case $1 in
	probe:venv) echo "python3's venv module" ;;
	probe:busybox) echo "a static /bin/busybox" ;;
	probe:qemu-aarch64) echo "qemu-aarch64-static and its binfmt rule" ;;
	*) echo "command $1" ;;
	esac
}

have() {
	case $1 in
	probe:*) "probe_${1#probe:}" ;;
	*) command -v "$1" >/dev/null 2>&1 ;;
	esac
}

# rows prints the table's rows of the groups given (every group without one), and fails on a
# group the table does not know.
rows() {
	local g
	for g in "$@"; do
		table | awk -v g="$g" '$1 == g {found = 1} END {exit !found}' ||
			{ printf 'deps: unknown group %s (want ci, verify, bpf, lab or arm64)\n' "$g" >&2; exit 2; }
	done
	if (($# == 0)); then
		table
	else
		table | awk -v gs=" $* " 'index(gs, " " $1 " ")'
	fi
}

# missing prints "command package who" for each command of the groups that is not there.
missing() {
	local cmd pkg who
	while read -r _ cmd pkg who; do
		have "$cmd" || printf '%s %s %s\n' "$cmd" "$pkg" "$who"
	done < <(rows "$@")
}

report() {
	local cmd pkg who
	while read -r cmd pkg who; do
		case $pkg in
		probe:go) printf 'deps: missing command %s: install Go 1.26 or later (go.dev/doc/install; Debian 12 has none that new); needed by %s\n' "$cmd" "$who" ;;
		*) printf 'deps: missing %s: install the Debian package %s (apt-get install %s); needed by %s\n' "$(describe "$cmd")" "$pkg" "$pkg" "$who" ;;
		esac
	done
}

main() {
	local verb=${1:-}
	shift || true
	case $verb in
	list) rows "$@"; return ;;
	check | ensure) ;;
	*) printf 'usage: hack/deps.sh ensure|check|list GROUP...\n' >&2; exit 2 ;;
	esac
	(($#)) || { printf 'deps: name a group: ci, verify, bpf, lab or arm64\n' >&2; exit 2; }
	rows "$@" >/dev/null

	local absent
	absent=$(missing "$@")
	if [[ -n $absent && $verb == ensure && ${NFSTUNE_DEPS_NO_INSTALL:-0} != 1 ]]; then
		local pkgs
		pkgs=$(awk '$2 !~ /^probe:/ {print $2}' <<<"$absent" | sort -u | tr '\n' ' ')
		if [[ -n ${pkgs// /} ]]; then
			[[ $(id -u) -eq 0 ]] || { printf 'deps: installing %s needs root\n' "$pkgs" >&2; report <<<"$absent" >&2; exit 1; }
			printf 'deps: installing %s(for %s)\n' "$pkgs" "$(awk '{print $1}' <<<"$absent" | tr '\n' ' ' | sed 's/ $//')" >&2
			export DEBIAN_FRONTEND=noninteractive
			# shellcheck disable=SC2086 # one word per package
			{ apt-get update -qq && apt-get install -y -qq --no-install-recommends $pkgs >/dev/null; } ||
				printf 'deps: apt-get install %sfailed\n' "$pkgs" >&2
			hash -r
		fi
		absent=$(missing "$@")
	fi
	if [[ -n $absent ]]; then
		report <<<"$absent" >&2
		exit 1
	fi
}

main "$@"
