#!/usr/bin/env bash
# Footprint of nfstune agent on a synthetic host root with N NFS mounts: RSS and CPU from
# /proc/<pid>/status and /proc/<pid>/stat, idle (no scrapes) and while scraped every 15 s.
# Usage: perf/scrape/footprint.sh [N=100] [SECONDS=120]; NFSTUNE=path uses a built binary.
# The synthetic tree has about 46 operations in use per mount (41,000 series for 100 mounts),
# far more than real mounts. OPS=typical zeroes the per-op rows other than the dozen a
# typical file-serving mount uses, as a real host's mountstats shows them. METRICS=default
# runs the agent with the default metrics tier instead of the full one.
set -euo pipefail
# NFSTUNE may be relative to where the script was started.
[[ -z ${NFSTUNE:-} || $NFSTUNE == /* ]] || NFSTUNE=$PWD/$NFSTUNE
cd "$(dirname "$0")"
n=${1:-100}
secs=${2:-120}
# shellcheck source=perf/scrape/lib.sh
. ./lib.sh
start_agent "$n" warn
curl -sf "127.0.0.1:$port/metrics" >/dev/null # first scrape, as Prometheus would do at start
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$pid/status"; }

measure() { # label, scrape every 15 s (1) or not (0)
	local t0 c0 t1 c1 end
	t0=$(date +%s.%N); c0=$(ticks)
	end=$((SECONDS + secs))
	while ((SECONDS < end)); do
		if (($2)); then curl -sf "127.0.0.1:$port/metrics" >/dev/null; fi
		sleep 15
	done
	t1=$(date +%s.%N); c1=$(ticks)
	awk -v l="$1" -v c="$((c1 - c0))" -v hz="$hz" -v t0="$t0" -v t1="$t1" -v rss="$(rss)" -v hwm="$(hwm)" -v n="$n" -v ops="${OPS:-all}" \
		'BEGIN { printf "%s: %d mounts (ops " ops "), %.0f s, CPU %.3f%% of a core, RSS %.1f MiB (peak %.1f MiB)\n", l, n, t1-t0, 100*c/hz/(t1-t0), rss/1024, hwm/1024 }'
}
measure idle 0
measure "scraped every 15 s" 1
