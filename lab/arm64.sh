#!/usr/bin/env bash
# Run the lab's arm64 suite: Debian's arm64 kernel (bookworm's linux-image-arm64) on an arm64
# root under qemu-system-aarch64 (TCG), with nfstune and the lab tests built with
# GOARCH=arm64, in one boot (lab/README.md): the audit of the scenario, apply and its exact
# revert, read-ahead's page rounding, and the agent tuning new mounts. make lab-arm64 runs it.
#   lab/arm64.sh [-run REGEXP]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export NFSTUNE_LAB_GUEST=arm64
. "$here/lib.sh"

suite='^(TestAuditListsEveryMount|TestApplyReadAheadUdevRevert|TestReadAheadPageRounding|TestNewMountsTuned)$'
args=(-run "$suite")
[[ ${1:-} == -run ]] && args=(-run "$2")
# An emulated aarch64 CPU on x86 is several times slower than the amd64 guest.
export NFSTUNE_LAB_TIMEOUT=${NFSTUNE_LAB_TIMEOUT:-2400}
start=$(date +%s)
rc=0
bash "$here/setup.sh" && bash "$here/test.sh" "${args[@]}" -test.timeout=35m || rc=$?
lab_log "arm64 suite: $( ((rc)) && echo "FAILED (exit $rc)" || echo ok) in $(($(date +%s) - start)) s"
exit "$rc"
