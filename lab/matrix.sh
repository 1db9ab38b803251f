#!/usr/bin/env bash
# Run the lab's smoke suite on each kernel line in turn, one boot per kernel (lab/README.md):
#   lab/matrix.sh [LINE...]       default: every line but 6.1, which make lab-test covers
# The suite: the audit of the scenario, apply and its exact revert, the kernel-version gates,
# the agent tuning new mounts, the audit with the server gone and the processes blocked on
# it, nfstune shutdown (refused before Linux 6.6), the per-pod NFS I/O collector loading and
# counting (TestPodIO), and the agent's recovery policy on a torn-down pod's volume: what
# depends on the kernel. The recovery case (two minutes a
# kernel) runs on the newest line only, the shutdown path; LAB_SMOKE=long runs it on every
# line (5.10: the report path of kernels before 6.6) and adds the stuck server's view and a
# stuck mount.nfs listed (make check-long). Every kernel runs even when one fails; the exit
# status is the first failure's, and a summary names each kernel's result and wall time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

smoke='TestAuditListsEveryMount|TestApplyReadAheadUdevRevert|TestKernelGates|TestAuditWithServerGone|TestShutdown|TestShutdownServerBack|TestNewMountsTuned|TestPodIO'
newest=${LAB_KERNEL_LINES##* }
case ${LAB_SMOKE:-} in
'') ;;
long) smoke+='|TestStuckServerView|TestStuckMountListed' ;;
*) lab_die "LAB_SMOKE=$LAB_SMOKE: want empty or long" ;;
esac
lines=("$@")
if ((${#lines[@]} == 0)); then
	for line in $LAB_KERNEL_LINES; do
		[[ $line == 6.1 ]] || lines+=("$line")
	done
fi

rc=0
summary=()
for line in "${lines[@]}"; do
	lab_kernel_suite "$line" >/dev/null
	cases=$smoke
	[[ ${LAB_SMOKE:-} != long && $line != "$newest" ]] || cases+='|TestRecovery'
	start=$(date +%s)
	s=0
	NFSTUNE_LAB_KERNEL=$line bash "$here/setup.sh" &&
		NFSTUNE_LAB_KERNEL=$line bash "$here/test.sh" -run "^($cases)\$" || s=$?
	summary+=("$line: $( ((s)) && echo "FAILED (exit $s)" || echo ok) in $(($(date +%s) - start)) s")
	((rc)) || rc=$s
done
lab_log "smoke suite per kernel:"
printf 'lab:   %s\n' "${summary[@]}" >&2
exit "$rc"
