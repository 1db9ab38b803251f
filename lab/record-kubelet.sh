#!/usr/bin/env bash
# Record the lab guest's files with NFS mounted the way kubelet mounts it (pod volumes, a CSI
# staging mount, bind mounts and a subPath) into internal/metrics/testdata/lab-<kernel>-kubelet/,
# for the pod attribution tests.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/vm.sh" -- bash lab/guest/record-kubelet.sh
