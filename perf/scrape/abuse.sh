#!/usr/bin/env bash
# What clients on the pod network can do to nfstune agent (perf/scrape/abuse): 5,000 idle
# keep-alive connections (RSS), two clients that request /metrics and never read while a
# real scrape runs every 2 s (its answers), and one client scraping in a loop (CPU), on a
# synthetic host root with N NFS mounts and the default metrics tier (the chart's).
# Usage: perf/scrape/abuse.sh [N=300]; NFSTUNE=path uses a built binary; METRICS=full for
# the full tier; ARGS adds agent flags.
set -euo pipefail
[[ -z ${NFSTUNE:-} || $NFSTUNE == /* ]] || NFSTUNE=$PWD/$NFSTUNE
cd "$(dirname "$0")"
n=${1:-300}
METRICS=${METRICS:-default}
ulimit -n 20000
# shellcheck source=perf/scrape/lib.sh
. ./lib.sh
start_agent "$n" error
go run ./abuse -addr "127.0.0.1:$port" -pid "$pid"
