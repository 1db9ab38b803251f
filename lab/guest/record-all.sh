#!/usr/bin/env bash
# Guest side of make lab-record (lab/record.sh): the scenario as mounted, then the same with
# the server gone.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
out=/lab/internal/inventory/testdata/lab-$(uname -r)

"$here/record.sh" "$out" "the lab scenario (lab/README.md): NFSv3, v4.1 with nconnect=4, v4.2, a second v4.1 mount asking nconnect=2 on the same client, rsize=1 MiB asked, a mount point with a space, a second server address (127.0.0.2)."

# Server gone: a reader blocked on a hard mount, then every packet on lo dropped.
head -c 4194304 /dev/zero >"$LAB_EXPORT_TMP/data"
dd if="$LAB_MNT/v41/data" iflag=nocache count=0 status=none
lab_server_gone loss
cat "$LAB_MNT/v41/data" >/dev/null &
reader=$!
sleep 10
"$here/record.sh" "$out-server-gone" "the lab scenario, then the server unreachable: 100% loss on lo (netem) for 10 s, with a reader blocked reading /mnt/lab/v41/data (hard mount) since then."
lab_server_back
wait "$reader"

# Stacked superblocks, recorded alone: the scenario is unmounted first.
umount -a -t nfs,nfs4
"$here/record-stacked.sh"
