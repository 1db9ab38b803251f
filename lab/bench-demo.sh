#!/usr/bin/env bash
# Inside the lab guest: buffered sequential read over an emulated cloud link, default
# read-ahead against tuned, each the median of 5 runs in one boot, and the same read with
# no added delay as the ceiling. Run from the host:
#
#   lab/vm.sh -- lab/bench-demo.sh OUTDIR [NFSTUNE]
#
# OUTDIR is relative to the repository (the guest sees it at /lab). The link is netem on lo:
# BENCH_RATE (default 100mbit, below what the emulated machine can move, so the ceiling is
# the link's) and BENCH_DELAY per direction (default 40ms, an 80 ms round trip: a
# bandwidth-delay product of 12.5 MB/s x 0.08 s = 1 MB, 7.6 x the 128 KiB default
# read-ahead window; BENCH_DELAY=26ms makes it 5 x). docs/benchmarks.md has the figures.
set -euo pipefail
out=${1:?usage: bench-demo.sh OUTDIR [NFSTUNE]}
bin=${2:-/lab/bin/nfstune}
rate=${BENCH_RATE:-100mbit}
nic=${BENCH_NIC:-100Mbps} # the same rate, as nfstune spells it
delay=${BENCH_DELAY:-40ms}
repeat=${BENCH_REPEAT:-5}
size=${BENCH_SIZE:-64M}
mnt=/mnt/lab/bench

mkdir -p "$out"
# The tmpfs export over NFSv4.1: the server's disk never limits the read.
labctl mount 127.0.0.1:/tmp "$mnt" vers=4.1
sweep=("$bin" bench sweep --mount "$mnt" --profile seq-read --readahead "128,15360"
	--repeat "$repeat" --size "$size" --runtime 120s --log-level warn)

echo "== no added delay: link rate $rate only"
labctl link "rate=$rate"
"${sweep[@]}" --out "$out/no-delay.json"

echo "== emulated cloud link: rate $rate, delay $delay each way"
labctl link "rate=$rate" "delay=$delay"
"${sweep[@]}" --out "$out/cloud-link.json"
labctl link

echo "== tuned on the cloud link against tuned with no added delay"
"$bin" bench compare "$out/no-delay.json" "$out/cloud-link.json"
"$bin" bench report "$out/no-delay.json" "$out/cloud-link.json" --out "$out/report" --client-nic "$nic"
umount "$mnt"
