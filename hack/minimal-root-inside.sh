#!/usr/bin/env bash
# Run by hack/minimal-root.sh inside the minimal root, from a clone of the repository, as root:
#   quick   the bare root names its missing commands; make demo's first boot from nothing;
#           make host-packages; a removed package is installed again; with installing off, one line names the command
#           and its package
#   full    CI=true bash .ci/run, then make demo, timed
set -euo pipefail

fail() {
	echo "minimal-root: FAILED: $*" >&2
	exit 1
}

quick() {
	local out line want
	# 1. The root is bare, and the table names what it lacks.
	if out=$(bash hack/deps.sh check lab 2>&1); then fail "hack/deps.sh check lab passed on a bare root"; fi
	for want in "command modprobe: install the Debian package kmod" \
		"command strings: install the Debian package binutils" \
		"command qemu-system-x86_64: install the Debian package qemu-system-x86"; do
		grep -qF "$want" <<<"$out" || fail "deps check did not say: $want; it said: $out"
	done
	# 2. The README's first command, from nothing: set-up and a small demo boot.
	NFSTUNE_DEMO_SIZE_MB=16 NFSTUNE_DEMO_RUNS=1 NFSTUNE_DEMO_DELAY=500us make demo
	bash hack/deps.sh check lab || fail "commands still missing after make demo"
	# make verify's and the tests' host commands come with make host-packages.
	make host-packages
	bash hack/deps.sh check ci verify lab || fail "commands still missing after make host-packages"
	# 3. Remove one package: the next set-up installs it again.
	dpkg -r --force-depends kmod >/dev/null 2>&1
	if command -v modprobe >/dev/null; then fail "modprobe still there after removing kmod"; fi
	make lab-setup
	command -v modprobe >/dev/null || fail "lab-setup did not install kmod again"
	# 4. Remove one with installing off: one line names the command and its package.
	dpkg -r --force-depends binutils >/dev/null 2>&1
	if out=$(NFSTUNE_DEPS_NO_INSTALL=1 make -s lab-setup 2>&1); then fail "lab-setup passed without strings"; fi
	line=$(grep '^deps: ' <<<"$out" || true)
	[[ $(grep -c . <<<"$line") == 1 ]] || fail "want one deps line, got: $out"
	grep -qF "missing command strings: install the Debian package binutils" <<<"$line" || fail "got: $line"
	echo "minimal-root: ok: the bare root named its missing commands, make demo passed, kmod was installed again; without binutils: $line"
}

full() {
	local start ci demo
	start=$(date +%s)
	CI=true bash .ci/run
	ci=$(($(date +%s) - start))
	start=$(date +%s)
	make demo
	demo=$(($(date +%s) - start))
	echo "minimal-root: CI=true bash .ci/run ${ci} s, make demo ${demo} s (empty Go and lab caches)"
}

case ${1:-} in
quick) quick ;;
full) full ;;
*) fail "usage: hack/minimal-root-inside.sh quick|full" ;;
esac
