#!/usr/bin/env bash
# make demo: what read-ahead does on a cloud-like link, shown on a real kernel in the lab.
#   NFSTUNE_DEMO_SIZE_MB (256), NFSTUNE_DEMO_RUNS (3), NFSTUNE_DEMO_DELAY (2500us: 5 ms RTT)
# Six reads of the file under emulation take minutes, longer on a busy machine: the boot's
# time limit is an hour unless NFSTUNE_LAB_TIMEOUT says otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib.sh"
GO=${GO:-go}
export NFSTUNE_LAB_TIMEOUT=${NFSTUNE_LAB_TIMEOUT:-3600}

mkdir -p "$repo/lab/.cache"
bin=$(mktemp -d "$repo/lab/.cache/bin.XXXXXX")
trap 'rm -rf "$bin"' EXIT
(cd "$repo" && CGO_ENABLED=0 "$GO" build -trimpath -o "$bin/nfstune" ./cmd/nfstune)

size=${NFSTUNE_DEMO_SIZE_MB:-256}
"$here/vm.sh" -- env \
	NFSTUNE_BIN="/lab/${bin#"$repo"/}/nfstune" \
	NFSTUNE_DEMO_SIZE_MB="$size" \
	NFSTUNE_DEMO_RUNS="${NFSTUNE_DEMO_RUNS:-3}" \
	NFSTUNE_DEMO_DELAY="${NFSTUNE_DEMO_DELAY:-2500us}" \
	bash lab/guest/demo.sh
