#!/usr/bin/env bash
# Boot the lab guest (Debian kernel under qemu TCG via virtme-ng) on the cached root, with
# this repository at /lab inside the guest, start nfsd, and run one command there.
#
#   lab/vm.sh [--scenario] [--disk SIZE] [--keep] -- CMD [ARG...]
#   lab/vm.sh --shell [--scenario]      an interactive shell in the guest
#
# CMD runs from the repository root (/lab in the guest); lab/guest is on its PATH, so
# `labctl ...` works. The guest's console is saved to the run directory and streamed here
# without kernel log lines. The exit status is the guest command's, read from a status file
# the guest writes: no status file means the guest never finished, and this script fails
# naming the step that did not complete (qemu start, kernel boot, modprobe, nfsd start,
# mount, command) with the last 40 console lines. A failed command's Go test failures are
# printed last, each with the lines it logged (failed_tests). A kernel panic before the guest
# command starts is retried once (NFSTUNE_LAB_BOOT_RETRY=1 marks the second boot), and so is a
# kernel that stopped scheduling: a CPU held in a soft lockup for NFSTUNE_LAB_LOCKUP seconds
# (default 120) stops the guest there, and its first report is printed with its stack.
#
# Env: NFSTUNE_LAB_CACHE (guest root cache), NFSTUNE_LAB_TIMEOUT (seconds, default 900),
# NFSTUNE_LAB_LOCKUP (seconds a soft lockup may last before the guest is stopped, default 120),
# NFSTUNE_LAB_MEMORY (2G), NFSTUNE_LAB_CPUS (2), NFSTUNE_LAB_KERNEL (5.10, 6.1, 6.12 or 7.2;
# default 6.1), NFSTUNE_LAB_KVM=1 to try KVM (hangs on the project's machines; TCG is the
# default), NFSTUNE_LAB_GUEST (nfs, k8s or arm64: which cached root, lab/lib.sh; arm64 boots
# under qemu-system-aarch64),
# NFSTUNE_LAB_APPEND (kernel command-line arguments to add, e.g. "apparmor=1 security=apparmor").
set -euo pipefail
args=("$@")
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib.sh"

scenario=()
disk=2G
keep=0
shell=0
while (($#)); do
	case $1 in
	--shell) shell=1; shift ;;
	--scenario) scenario=(--scenario); shift ;;
	--disk) disk=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--) shift; break ;;
	-*) lab_die "unknown option $1" ;;
	*) break ;;
	esac
done
((shell)) && set -- bash -i
(($#)) || lab_die "usage: lab/vm.sh [--scenario] [--disk SIZE] [--keep] -- CMD [ARG...]"

[[ -x $LAB_VNG && -f $LAB_STAMP ]] || lab_die "the lab is not set up: run make lab-setup"
kernel=$(lab_kernel)

# One run directory per boot, inside the repository so the guest sees it at /lab/...; runs
# started at the same time by different people do not share anything.
mkdir -p "$repo/lab/.cache"
run=$(mktemp -d "$repo/lab/.cache/run.XXXXXX")
grun=/lab/${run#"$repo"/}
# A sparse image for the ext4 export: large test files live on the host's disk, not in
# the guest's memory.
truncate -s "$disk" "$run/disk.img"
console=$run/console.log

kvm=(--disable-kvm)
[[ ${NFSTUNE_LAB_KVM:-0} == 1 ]] && kvm=()
# A foreign root boots its own architecture's kernel on qemu's virt machine; virtme-ng takes
# the initramfs's busybox from the root (busybox-static, lab/lib.sh).
[[ $LAB_ARCH == amd64 ]] || kvm+=(--arch "$LAB_ARCH")
# One --append per word: vng adds each to the kernel command line.
append=()
for arg in ${NFSTUNE_LAB_APPEND:-}; do
	append+=(--append "$arg")
done

export PATH="$LAB_VENV/bin:$PATH"
step_name() { cat "$run/step" 2>/dev/null || true; }

# watch_lockup stops the guest once the console reports a CPU stuck in a soft lockup for
# LAB_LOCKUP seconds or more, and keeps that report's first line in $run/lockup. Under TCG
# both vCPUs have hung this way for half an hour while kubelet started (kubelet and
# systemd-udevd each "stuck for 2276s"): such a guest never finishes, and waiting for its
# whole-boot limit spent the rest of CI's time.
lockup_re='soft lockup - CPU#[0-9]+ stuck for [0-9]+s!'
watch_lockup() {
	local stuck
	while kill -0 "$tpid" 2>/dev/null; do
		sleep 5
		stuck=$(awk -v re="$lockup_re" '$0 ~ re { sub(/.* stuck for /, ""); print $0 + 0 }' "$console" |
			sort -n | tail -n 1)
		if [[ -n $stuck ]] && ((stuck >= LAB_LOCKUP)); then
			grep -m 1 -E "$lockup_re" "$console" | sed 's/\r$//' >"$run/lockup"
			kill -TERM -- -"$tpid" 2>/dev/null || kill -TERM "$tpid" 2>/dev/null || true
			return
		fi
	done
}

# first_lockup prints the console's first soft lockup report: the line and the registers and
# stack the kernel printed after it.
first_lockup() {
	sed 's/\r$//' "$console" | awk -v re="$lockup_re" '$0 ~ re && !seen { seen = 1 } seen && n++ < 60'
}

# kernel_messages prints the guest's last 40 kernel messages, which it streams to kmsg.log.
kernel_messages() {
	[[ -s $run/kmsg.log ]] || return 0
	lab_log "last kernel messages ($run/kmsg.log):"
	tail -n 40 "$run/kmsg.log" >&2
}

# failed_tests prints each failed Go test of the console with its last logged lines (go test
# -v: "=== RUN/CONT/NAME" says whose lines follow, "--- FAIL" ends a failed test). A failure's
# message sits among the lines the test logged, which a long run's tail no longer shows.
failed_tests() {
	sed 's/\r$//' "$console" | awk -v keep=25 '
		/^=== (RUN|CONT|NAME) / { cur = $3; next }
		/^ +[^ ]+\.go:[0-9]+: / && cur != "" { n[cur]++; line[cur, n[cur]] = $0; next }
		/^ *--- FAIL: / {
			t = $3; print "--- FAIL: " t
			from = n[t] > keep ? n[t] - keep + 1 : 1
			if (from > 1) print "    (" from - 1 " earlier lines in the console log)"
			for (i = from; i <= n[t]; i++) print line[t, i]
		}'
}

if ((shell)); then
	cd "$repo"
	"$LAB_VNG" "${kvm[@]}" "${append[@]}" --force-9p --verbose --root "$LAB_ROOT" -r "$kernel" \
		--memory "$LAB_MEMORY" --cpus "$LAB_CPUS" --rwdir="/lab=$repo" \
		--exec "/lab/lab/guest/run.sh $grun ${scenario[*]} -- bash -i" || true
	rm -rf "$run"
	exit 0
fi

lab_log "booting $LAB_KERNEL_LINE ($LAB_ARCH): ${kernel#"$LAB_CACHE"/} (TCG, ${LAB_CPUS} vCPUs, ${LAB_MEMORY}${NFSTUNE_LAB_APPEND:+, $NFSTUNE_LAB_APPEND}); console: $console"
start=$(date +%s)
# qemu reopens its stdout and stderr (/proc/self/fd/N) with O_TRUNC: give it a pipe, not a
# file. timeout runs in its own process group: stop it (and qemu) if this script is
# interrupted.
mkfifo "$run/console.fifo"
(
	cd "$repo"
	exec timeout -k 10 "$LAB_TIMEOUT" "$LAB_VNG" "${kvm[@]}" "${append[@]}" --force-9p --verbose \
		--root "$LAB_ROOT" -r "$kernel" --memory "$LAB_MEMORY" --cpus "$LAB_CPUS" \
		--rwdir="/lab=$repo" \
		--exec "/lab/lab/guest/run.sh $grun ${scenario[*]} -- $(printf '%q ' "$@")"
) </dev/null >"$run/console.fifo" 2>&1 &
tpid=$!
watch_lockup &
wpid=$!
trap 'kill -TERM -- -$tpid 2>/dev/null; kill -TERM $tpid 2>/dev/null; kill $wpid 2>/dev/null' INT TERM HUP
# GNU sed and grep, unbuffered: mawk would hold the stream back in blocks.
tee "$console" <"$run/console.fifo" |
	sed -u -n -e 's/\r$//' -e '/^nfstune-lab: guest up/,$p' |
	grep --line-buffered -v -E '^\[ *[0-9]+\.[0-9]+\]' || true
vng_rc=0
wait "$tpid" || vng_rc=$?
kill "$wpid" 2>/dev/null || true
wait "$wpid" 2>/dev/null || true
trap - INT TERM HUP
elapsed=$(($(date +%s) - start))

if [[ -f $run/status ]]; then
	rc=$(cat "$run/status")
	lab_log "guest command exited $rc after ${elapsed}s"
	if [[ $rc != 0 ]]; then
		kernel_messages
		if grep -q -- '--- FAIL: ' "$console"; then
			lab_log "failed tests, each with the last lines it logged:"
			failed_tests >&2
		fi
		keep=1
	fi
	if ((keep)); then
		lab_log "run directory kept: $run"
	else
		rm -rf "$run"
	fi
	exit "$rc"
fi

# No status: name the step that did not finish.
if ! grep -q 'Linux version' "$console"; then
	failed="qemu start (vng exit $vng_rc)"
elif [[ ! -f $run/step ]]; then
	failed="kernel boot (the guest never ran lab/guest/run.sh)"
else
	failed=$(step_name)
fi
[[ $vng_rc == 124 || $vng_rc == 137 ]] && failed="$failed; killed after ${LAB_TIMEOUT}s"
if [[ -s $run/lockup ]]; then
	failed="$failed; the kernel hung (a CPU in a soft lockup for ${LAB_LOCKUP}s or more)"
	lab_log "the guest kernel stopped scheduling; its first soft lockup report:"
	first_lockup >&2
fi
# A kernel that panics before the guest's first command says nothing about the code under
# test: under TCG a boot has now and then died in early kernel text patching (an int3 oops) or
# on the IO-APIC timer. Boot once more, and say so.
if [[ $failed == "kernel boot"* && ${NFSTUNE_LAB_BOOT_RETRY:-0} == 0 ]] && grep -q 'Kernel panic' "$console"; then
	lab_log "the kernel panicked before the guest command started (console: $console); booting once more"
	NFSTUNE_LAB_BOOT_RETRY=1 exec bash "$here/vm.sh" "${args[@]}"
fi
# A hung kernel's guest is killed whatever step it was at, and its command never finished:
# boot once more, and say so. The report above stays in this run's kept directory.
if [[ -s $run/lockup && ${NFSTUNE_LAB_BOOT_RETRY:-0} == 0 ]]; then
	lab_log "FAILED: $failed; run directory kept: $run; booting once more"
	NFSTUNE_LAB_BOOT_RETRY=1 exec bash "$here/vm.sh" "${args[@]}"
fi
lab_log "FAILED: the guest did not finish; failed step: $failed"
lab_log "last 40 console lines:"
tail -n 40 "$console" >&2
kernel_messages
lab_log "run directory kept: $run"
exit 1
