#!/usr/bin/env bash
# Guest entry point, started by lab/vm.sh: load modules, start nfsd, optionally mount the
# scenario, run the command, and write its exit status to $LAB_RUN/status. The host trusts
# only that file: no status file means the guest did not get that far.
#   run.sh RUNDIR [--scenario] -- CMD...
set -uo pipefail
LAB_RUN=$1
shift
export LAB_RUN
. "$(dirname "$0")/lib.sh"
PATH="$(cd "$(dirname "$0")" && pwd):$PATH"
export PATH
cd /lab || exit 1

scenario=0
while (($#)); do
	case $1 in
	--scenario) scenario=1; shift ;;
	--) shift; break ;;
	*) break ;;
	esac
done

# Kernel messages from here on go to the log, not the console the host streams, and as they
# come to kmsg.log in the run directory: a guest that dies without its status still leaves
# its last kernel messages on the host (an OOM kill of this script, say, which no panic
# reports on the console).
dmesg -n 1
stdbuf -oL dmesg --follow >"$LAB_RUN/kmsg.log" 2>&1 &
echo "nfstune-lab: guest up ($(uname -r), $(nproc) vCPUs, $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) MiB)"

fail() {
	echo "lab: guest step failed: $(cat "$LAB_RUN/step" 2>/dev/null)" >&2
	echo "$1" >"$LAB_RUN/status"
	exit "$1"
}

labctl modules || fail 1
img=
[[ -f $LAB_RUN/disk.img ]] && img=$LAB_RUN/disk.img
labctl nfsd-start "$img" || fail 1
if ((scenario)); then
	labctl scenario || fail 1
fi

lab_step "command: $*"
"$@"
rc=$?
echo "$rc" >"$LAB_RUN/status"
exit "$rc"
