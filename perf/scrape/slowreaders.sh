#!/usr/bin/env bash
# Memory of nfstune agent under clients that request /metrics and never read the answer, on
# a synthetic host root with N NFS mounts: C connections each send one GET /metrics and keep
# the socket open without reading; the agent's RSS is sampled from /proc/<pid>/status until
# they are done, then one normal scrape checks that the agent still answers.
# Usage: perf/scrape/slowreaders.sh [N=400] [CLIENTS=10] [SECONDS=40]; NFSTUNE=path uses a
# built binary; OPS=typical keeps a dozen operations per mount, as footprint.sh does;
# METRICS=default runs the agent with the default metrics tier instead of the full one.
set -euo pipefail
[[ -z ${NFSTUNE:-} || $NFSTUNE == /* ]] || NFSTUNE=$PWD/$NFSTUNE
cd "$(dirname "$0")"
n=${1:-400}
clients=${2:-10}
secs=${3:-40}
# shellcheck source=perf/scrape/lib.sh
. ./lib.sh
start_agent "$n" error
# Scrape until one carries the mounts: on a loaded machine the inventory read may overrun
# its 800 ms, and then the scrape has only the agent's own metrics. Later scrapes export at
# least this snapshot.
for ((try = 0; ; try++)); do
	curl -sf -o "$tmp/metrics" "127.0.0.1:$port/metrics" || true
	grep -q '^nfstune_mount_read_ahead_bytes' "$tmp/metrics" 2>/dev/null && break
	((try < 10)) || { echo "no scrape with the mounts in 10 tries" >&2; exit 1; }
done
bytes=$(wc -c < "$tmp/metrics")
rm "$tmp/metrics"
kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$pid/status"; }
before=$(kib VmRSS)

# Each client is a file descriptor of this shell: bash's /dev/tcp connects, the request is
# written, and nothing is ever read from it.
fds=()
for ((i = 0; i < clients; i++)); do
	exec {fd}<>"/dev/tcp/127.0.0.1/$port"
	printf 'GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' >&"$fd"
	fds+=("$fd")
done
maxrss=0
end=$((SECONDS + secs))
while ((SECONDS < end)); do
	r=$(kib VmRSS)
	((r > maxrss)) && maxrss=$r
	sleep 0.2
done
ok=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "127.0.0.1:$port/metrics" || true)
for fd in "${fds[@]}"; do exec {fd}>&-; done
awk -v n="$n" -v c="$clients" -v s="$secs" -v b="$bytes" -v before="$before" -v max="$maxrss" -v hwm="$(kib VmHWM)" -v ok="$ok" -v ops="${OPS:-all}" \
	'BEGIN { printf "%d mounts (ops " ops ", %.1f MiB /metrics), %d clients that never read, %d s: RSS before %.1f MiB, max sampled %.1f MiB, peak (VmHWM) %.1f MiB; a scrape afterwards: HTTP %s\n", n, b/1048576, c, s, before/1024, max/1024, hwm/1024, ok }'
