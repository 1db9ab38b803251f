#!/usr/bin/env bash
# Guest side of make demo (lab/demo.sh): read a large file over NFS on an emulated cloud
# link, before and after nfstune raises read-ahead, and explain the difference.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
# Run nfstune from the guest's memory: from the 9p share each run pages it in slowly.
nfstune=/tmp/nfstune
cp "${NFSTUNE_BIN:?}" "$nfstune"
size=${NFSTUNE_DEMO_SIZE_MB:-256}
runs=${NFSTUNE_DEMO_RUNS:-3}
delay=${NFSTUNE_DEMO_DELAY:-2500us}
mp=$LAB_MNT/demo

say() { printf '\n%s\n' "$*"; }

# measure LABEL OUT: nfstune bench runs its buffered sequential read profile (64 KiB reads,
# the page cache dropped and the file reopened before each run) $runs times, keeps the result
# with its tuning and provenance in OUT, and sets $median and $spread in MiB/s.
measure() {
	"$nfstune" bench run --mount "$mp" --profile seq-read --repeat "$runs" --size "${size}M" \
		--runtime 600s --log-level warn --out "$2" >/dev/null
	local all
	all=$(grep -o '"read_mib_s": [0-9.]*' "$2" | awk '{ print $2 }' | sort -n)
	local i=0 v
	while read -r v; do
		i=$((i + 1))
		printf '  %s, read %d of %d: %s MiB/s\n' "$1" "$i" "$runs" "$v"
	done < <(grep -o '"read_mib_s": [0-9.]*' "$2" | awk '{ print $2 }')
	median=$(awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }' <<<"$all")
	spread=$(awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo " to " hi }' <<<"$all")
}
out=${LAB_RUN:-/tmp}

say "== 1. A file server and a client"
echo "An NFS server in this virtual machine shares a directory; a client mounts it over NFSv4.1, the"
echo "way a cloud VM mounts a managed file share. nfstune bench writes one ${size} MiB file to it."
# The tmpfs export: its pages stay in memory when the benchmark drops caches, so the reads
# measure the network path, not this emulated machine's disk.
lab_mount "127.0.0.1:${LAB_EXPORT_TMP#"$LAB_EXPORT_ROOT"}" "$mp" vers=4.1
dev=$(awk -v mp="$mp" '$5 == mp { print $3 }' /proc/self/mountinfo)
ra_before=$(cat "/sys/class/bdi/$dev/read_ahead_kb")

say "== 2. A cloud-like network"
lab_link delay="$delay"
echo "Every packet now waits $delay on its way, in each direction: a request and its answer take"
echo "$(awk -v d="$delay" 'BEGIN { v = d + 0; if (d ~ /us$/) v /= 1000; printf "%.1f", 2 * v }') ms, like a VM talking to a file service in the same cloud region."
echo "Under emulation this machine moves roughly 70 to 140 MB/s, so such a link holds"
echo "several times 128 KiB in flight: the situation of a real cloud link (about 1 GB/s at"
echo "0.7 ms round trip holds about 700 KB)."

say "== 3. What nfstune finds"
# The share holds large files read from start to end: say so, so nfstune applies the
# sequential-read profile to it (a server at 127.0.0.1 is otherwise a generic NFS server).
policy=$(mktemp /tmp/nfstune-demo.XXXXXX.yaml)
cat >"$policy" <<POLICY
apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - name: demo share
    match:
      mountpoint: $mp
    workload: sequential-read
POLICY
echo "nfstune is told that $mp holds large files read from start to end (workload"
echo "sequential-read), and audits every NFS mount of this machine:"
"$nfstune" audit --config "$policy" --fail-on none || true

say "== 4. Reading the file with Linux's default read-ahead (${ra_before} KiB)"
echo "Read-ahead is how far Linux fetches ahead of a program reading a file from start to end."
echo "Over a network, each fetch waits a round trip, so a small window leaves the link idle."
measure "read-ahead ${ra_before} KiB" "$out/bench-before.json"
before=$median before_spread=$spread

say "== 5. Raising read-ahead with nfstune apply"
if "$nfstune" apply --config "$policy" --persist none; then
	:
else
	echo "(nfstune apply exited $?; continuing with what it set)"
fi
ra_after=$(cat "/sys/class/bdi/$dev/read_ahead_kb")
if ((ra_after <= ra_before)); then
	ra_after=16384
	echo "nfstune did not raise read-ahead for this mount: writing $ra_after KiB to"
	echo "/sys/class/bdi/$dev/read_ahead_kb by hand so the comparison can go on."
	echo "$ra_after" >"/sys/class/bdi/$dev/read_ahead_kb"
fi
echo "read-ahead of $mp is now $ra_after KiB (was $ra_before KiB)."

say "== 6. Reading the same file again"
measure "read-ahead ${ra_after} KiB" "$out/bench-after.json"
after=$median after_spread=$spread

lab_link
say "== Result"
printf '  read-ahead %6s KiB: %7s MiB/s (median of %d reads; %s)\n' "$ra_before" "$before" "$runs" "$before_spread"
printf '  read-ahead %6s KiB: %7s MiB/s (median of %d reads; %s)\n' "$ra_after" "$after" "$runs" "$after_spread"
echo
"$nfstune" bench compare "$out/bench-before.json" "$out/bench-after.json"
ratio=$(awk -v a="$after" -v b="$before" 'BEGIN { printf "%.2f", a / b }')
printf '  the same file, the same link: %sx as fast\n' "$ratio"
echo
echo "With a small read-ahead, the client asks for a little, waits a round trip, asks for a"
echo "little more: throughput is capped near window / round trip, whatever the bandwidth. A"
echo "larger window keeps enough requests in flight to fill the link. nfstune finds such"
echo "mounts (finding NFS001) and fixes them now and for future mounts."
echo "(The absolute MiB/s are those of an emulated machine; the ratio is what carries over.)"
