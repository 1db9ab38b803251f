#!/usr/bin/env bash
# Inside the lab guest: the agent on real NFS traffic, its /metrics saved every
# SCRAPE_INTERVAL seconds into OUTDIR (one file per scrape, named by its Unix time in
# milliseconds), for the dashboard picture (hack/dashboard). Run from the host:
#
#   lab/vm.sh -- lab/guest/dashboard-scrape.sh OUTDIR [NFSTUNE]
#
# OUTDIR is relative to the repository (the guest sees it at /lab). What happens, in
# phases of PHASE seconds (default 60):
#   - two superblocks, mounted the way kubelet mounts them under /mnt/var/lib/kubelet:
#     127.0.0.1:/tmp (NFSv4.2, nconnect=2, timeo=10) staged by a CSI driver for two pods,
#     named in the policy as Azure NetApp Files Premium at 512 GiB (32 MiB/s), and
#     127.0.0.1:/srv/disk (NFSv3, rsize=wsize=32768, which the audit flags) for one pod;
#   - phase 1: a direct 1 MiB read on the first, a paced write on the second, over a
#     240 Mbit/s link (30 MB/s, near the first one's limit);
#   - phase 2: a third pod uses the first superblock, and its read-ahead is lowered twice
#     behind the agent's back (drift, which the agent repairs);
#   - phase 3: the server's NFS port drops every packet for half a phase (a stall: major
#     timeouts), then comes back; phase 4: traffic as in phase 1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
out=${1:?usage: dashboard-scrape.sh OUTDIR [NFSTUNE]}
bin=${2:-/lab/bin/nfstune}
interval=${SCRAPE_INTERVAL:-5}
phase=${PHASE:-60}
k=/mnt/var/lib/kubelet
uid_a=6f1b3a52-8c4d-4e0a-9b7e-2d5c1f0a3e71
uid_b=a04c9e1d-5b27-4f38-8e6a-7c2b9d1e4f05
uid_c=c3d2e1f0-a9b8-4c7d-8e6f-5a4b3c2d1e0f
listen=127.0.0.1:9477

mkdir -p "$out"
rm -f "$out"/*.prom

lab_step "mount kubelet-shaped"
global=$k/plugins/kubernetes.io/csi/nfs.csi.k8s.io/$(printf '%s' "127.0.0.1#tmp" | sha256sum | cut -d' ' -f1)/globalmount
lab_mount "127.0.0.1:${LAB_EXPORT_TMP#"$LAB_EXPORT_ROOT"}" "$global" vers=4.2,nconnect=2,timeo=10,retrans=2
for uid in "$uid_a" "$uid_b"; do
	mkdir -p "$k/pods/$uid/volumes/kubernetes.io~csi/pv-tmp/mount"
	mount --bind "$global" "$k/pods/$uid/volumes/kubernetes.io~csi/pv-tmp/mount"
done
disk=$k/pods/$uid_a/volumes/kubernetes.io~nfs/disk
lab_mount "127.0.0.1:$LAB_EXPORT_DISK" "$disk" vers=3,rsize=32768,wsize=32768
dev=$(mountpoint -d "$global")

cat >/tmp/dashboard-policy.yaml <<-POLICY
apiVersion: nfstune.io/v1alpha1
kind: Policy
defaults:
  workload: sequential-read
rules:
  - match: {server: 127.0.0.1, export: /tmp}
    service: {name: anf, tier: premium, capacity: 512GiB}
POLICY

lab_step "agent"
"$bin" agent --config /tmp/dashboard-policy.yaml --listen "$listen" --resync 5s --log-level warn &
agent=$!
for _ in $(seq 100); do
	python3 -c "import urllib.request; urllib.request.urlopen('http://$listen/readyz', timeout=2)" 2>/dev/null && break
	sleep 0.2
done

# The scraper: one file per scrape, at a fixed interval whatever a scrape takes.
python3 - "$listen" "$out" "$interval" <<-'PY' &
import os, sys, time, urllib.request
listen, out, interval = sys.argv[1], sys.argv[2], float(sys.argv[3])
while True:
    t = time.time()
    try:
        body = urllib.request.urlopen("http://%s/metrics" % listen, timeout=interval).read()
        with open(os.path.join(out, "%d.prom" % (t * 1000)), "wb") as f:
            f.write(body)
    except OSError as e:
        print("scrape failed:", e, file=sys.stderr)
    time.sleep(interval - (time.time() - t) % interval)
PY
scraper=$!

traffic() { # traffic SECONDS: a direct read on the staged mount, a paced write on the other
	fio --name=read --directory="$global" --rw=read --bs=1M --size=128M --direct=1 \
		--ioengine=libaio --iodepth=4 --time_based --runtime="$1" --output=/dev/null &
	fio --name=write --directory="$disk" --rw=write --bs=256k --size=64M --direct=1 \
		--rate=4m --time_based --runtime="$1" --output=/dev/null
	wait "$!" || true
}

lab_step "phase 1: traffic"
labctl link rate=240mbit
sleep "$interval"
traffic "$phase"

lab_step "phase 2: a third pod, drift"
mkdir -p "$k/pods/$uid_c/volumes/kubernetes.io~csi/pv-tmp/mount"
mount --bind "$global" "$k/pods/$uid_c/volumes/kubernetes.io~csi/pv-tmp/mount"
traffic $((phase / 3))
echo 128 >"/sys/class/bdi/$dev/read_ahead_kb"
traffic $((phase / 3))
echo 64 >"/sys/class/bdi/$dev/read_ahead_kb"
traffic $((phase / 3))

lab_step "phase 3: stall"
# Every packet to or from the NFS port is dropped; the agent's own port stays reachable.
labctl link
tc qdisc add dev lo root handle 1: prio
tc qdisc add dev lo parent 1:3 handle 30: netem loss 100%
tc filter add dev lo parent 1:0 protocol ip u32 match ip dport 2049 0xffff flowid 1:3
tc filter add dev lo parent 1:0 protocol ip u32 match ip sport 2049 0xffff flowid 1:3
traffic "$phase" &
stalled=$!
sleep $((phase / 2))
labctl link rate=240mbit
wait "$stalled" || true

lab_step "phase 4: traffic"
traffic "$phase"
sleep $((2 * interval))

kill "$scraper" "$agent"
wait "$agent" || true
labctl link
scrapes=("$out"/*.prom)
echo "dashboard-scrape: ${#scrapes[@]} scrapes in $out"
