#!/usr/bin/env bash
# Guest side of make lab-record, part two: with no other NFS mount, two superblocks stacked
# on one mount point (lib.sh lab_stacked), recorded into lab-<kernel>-stacked.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=/lab/internal/inventory/testdata/lab-$(uname -r)-stacked

"$here/labctl" stacked
"$here/record.sh" "$out" "two NFS superblocks stacked on /mnt/lab/stacked: first NFSv3 of 127.0.0.1:/srv/tmp, 1 MiB written to it with O_DIRECT, then NFSv4.1 with nconnect=2 of 127.0.0.2:/disk mounted over it, 3 MiB written with O_DIRECT. No other NFS mount."
