#!/usr/bin/env bash
# Record the lab guest's /proc, /sys and /etc files that nfstune reads, from the real kernel,
# into internal/inventory/testdata/lab-<kernel>/ with the scenario mounted, and into
# lab-<kernel>-server-gone/ with the server unreachable and a reader blocked on a hard mount,
# and into lab-<kernel>-stacked/ with only two superblocks stacked on one mount point.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/vm.sh" --scenario -- bash lab/guest/record-all.sh
