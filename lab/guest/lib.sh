# shellcheck shell=bash
# Guest-side lab functions: kernel modules, the NFS server, the scenario mounts and link
# emulation. Sourced by labctl, which runs them under `set -e`, inside the lab guest; never
# run on the host.

# nfsd exports only filesystems that can be exported: the guest's / (9p) and its overlays
# cannot, so the NFSv4 pseudo root is a tmpfs on /srv (fsid=0) and NFSv4 paths are relative
# to it: the same export is 127.0.0.1:/srv/tmp over NFSv3 and 127.0.0.1:/tmp over NFSv4.
LAB_EXPORT_ROOT=/srv            # tmpfs, fsid=0: the NFSv4 pseudo root
LAB_EXPORT_TMP=/srv/tmp         # tmpfs export, fsid=1
LAB_EXPORT_DISK=/srv/disk       # loop-mounted ext4 image export, fsid=2 (large files)
LAB_MNT=/mnt/lab                # mount points live on a tmpfs on /mnt (read-only in the guest)

lab_step() {
	# The host names the failed step from this file when the guest command does not finish.
	[[ -n ${LAB_RUN:-} ]] && printf '%s\n' "$1" >"$LAB_RUN/step"
	printf 'lab: %s\n' "$1" >&2
}

lab_modules() {
	lab_step "modprobe"
	local m
	for m in nfs nfsv3 nfsv4 nfsd sch_netem loop ext4; do
		modprobe "$m" || { echo "lab: modprobe $m failed" >&2; return 1; }
	done
}

# lab_nfsd_start starts the NFS server the way that works in this guest: nfsd's own
# filesystem, a tmpfs state directory with rpc_pipefs, rpcbind, statd (NFSv3 locking),
# mountd and 8 nfsd threads. Exports: a tmpfs and an ext4 image (nfsd refuses overlayfs).
lab_nfsd_start() {
	lab_step "nfsd start"
	local img=$1
	mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd
	# NFSv4 opens wait for the end of the server's grace period (90 s by default).
	# nfsdcld tells nfsd there are no clients to reclaim, which ends it at once; the
	# shortest grace time is the fallback.
	echo 10 >/proc/fs/nfsd/nfsv4gracetime
	mount -t tmpfs -o size=16m nfsstate /var/lib/nfs
	mkdir -p /var/lib/nfs/v4recovery /var/lib/nfs/rpc_pipefs /var/lib/nfs/sm /var/lib/nfs/sm.bak /var/lib/nfs/nfsdcld
	mount -t rpc_pipefs rpc_pipefs /var/lib/nfs/rpc_pipefs
	: >/var/lib/nfs/etab
	: >/var/lib/nfs/rmtab

	mount -t tmpfs -o size=1m,mode=755 labroot "$LAB_EXPORT_ROOT"
	mkdir -p "$LAB_EXPORT_TMP" "$LAB_EXPORT_DISK"
	# At least 1 GiB, and more when the guest has it: 2.5 GiB in make readahead-table's 5 GiB.
	local mem_kb size_mb
	mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
	size_mb=$((mem_kb / 2048))
	((size_mb < 1024)) && size_mb=1024
	mount -t tmpfs -o "size=${size_mb}m" labexport "$LAB_EXPORT_TMP"
	if [[ -n $img ]]; then
		mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 "$img"
		mount -o loop "$img" "$LAB_EXPORT_DISK"
	else
		mount -t tmpfs -o size=512m labdisk "$LAB_EXPORT_DISK"
	fi
	mount -t tmpfs -o size=16m,mode=755 labmnt /mnt
	mkdir -p "$LAB_MNT"
	echo hello >"$LAB_EXPORT_TMP/hello"
	cat >/etc/exports <<-EXPORTS
	$LAB_EXPORT_ROOT 127.0.0.0/8(rw,no_subtree_check,insecure,fsid=0)
	$LAB_EXPORT_TMP 127.0.0.0/8(rw,sync,no_subtree_check,no_root_squash,insecure,fsid=1)
	$LAB_EXPORT_DISK 127.0.0.0/8(rw,sync,no_subtree_check,no_root_squash,insecure,fsid=2)
	EXPORTS
	rpcbind -w
	rpc.statd --no-notify
	nfsdcld || echo "lab: nfsdcld did not start; NFSv4 waits for the grace period" >&2
	exportfs -ra
	rpc.mountd
	rpc.nfsd 8
	# 127.0.0.2 answers on lo like 127.0.0.1: a second name for the same server.
}

# lab_mount SOURCE MOUNTPOINT OPTIONS mounts one NFS export, creating the mount point.
# A mount that does not finish in LAB_MOUNT_TIMEOUT seconds (default 120) fails.
lab_mount() {
	local src=$1 dir=$2 opts=$3
	mkdir -p "$dir"
	if ! timeout -k 5 "${LAB_MOUNT_TIMEOUT:-120}" mount -t nfs -o "$opts" "$src" "$dir"; then
		echo "lab: mount -t nfs -o $opts $src '$dir' failed" >&2
		return 1
	fi
}

# lab_scenario mounts the tricky cases nfstune must report from /proc. The requests are
# written to /etc/fstab and mounted by mount point, as in production, so that nfstune can
# compare what was asked with what the kernel did.
lab_scenario() {
	lab_step "mount"
	local t3=$LAB_EXPORT_TMP d3=$LAB_EXPORT_DISK
	local t4=${LAB_EXPORT_TMP#"$LAB_EXPORT_ROOT"} d4=${LAB_EXPORT_DISK#"$LAB_EXPORT_ROOT"}
	cat >/etc/fstab <<-FSTAB
	# nfstune lab scenario (lab/guest/lib.sh)
	127.0.0.1:$t3 $LAB_MNT/v3 nfs vers=3 0 0
	127.0.0.1:$t4 $LAB_MNT/v41 nfs vers=4.1,nconnect=4 0 0
	127.0.0.1:$t4 $LAB_MNT/v42 nfs vers=4.2 0 0
	# Same server and version as v41, another nconnect: the kernel shares one client, so
	# this mount gets the 4 transports the first mount fixed.
	127.0.0.1:$d4 $LAB_MNT/v41-nconnect2 nfs vers=4.1,nconnect=2 0 0
	# 1 MiB asked; the server grants less (256 KiB in a 2 GiB guest).
	127.0.0.1:$d3 $LAB_MNT/rsize-1m nfs vers=3,rsize=1048576,wsize=1048576 0 0
	# A mount point with a space: octal-escaped (\040) here and in mountinfo.
	127.0.0.1:$d4 $LAB_MNT/with\040space nfs vers=4.2 0 0
	# A second server name for the same nfsd.
	127.0.0.2:$t4 $LAB_MNT/server2 nfs vers=4.1 0 0
	FSTAB
	local dir
	for dir in v3 v41 v42 v41-nconnect2 rsize-1m "with space" server2; do
		mkdir -p "$LAB_MNT/$dir"
		if ! timeout -k 5 "${LAB_MOUNT_TIMEOUT:-120}" mount "$LAB_MNT/$dir"; then
			echo "lab: mount '$LAB_MNT/$dir' (from /etc/fstab) failed" >&2
			return 1
		fi
	done
}

# lab_stacked mounts two NFS superblocks on one mount point, one over the other: NFSv3 of
# the tmpfs export from 127.0.0.1, then NFSv4.1 with nconnect=2 of the ext4 export from
# 127.0.0.2. Each gets its own O_DIRECT write before the next mount (1 MiB below, 3 MiB
# above), so that their counters and transports differ. Only the upper one is reachable
# through the path afterwards.
lab_stacked() {
	lab_step "mount stacked"
	local dir=$LAB_MNT/stacked
	lab_mount "127.0.0.1:$LAB_EXPORT_TMP" "$dir" vers=3
	dd if=/dev/zero of="$dir/lower" bs=1M count=1 oflag=direct status=none
	lab_mount "127.0.0.2:${LAB_EXPORT_DISK#"$LAB_EXPORT_ROOT"}" "$dir" vers=4.1,nconnect=2
	dd if=/dev/zero of="$dir/upper" bs=1M count=3 oflag=direct status=none
}

# lab_link delay=Dms rate=R loss=P emulates a network link on lo with netem. Every packet
# crosses lo once each way, so the round trip is 2 x delay. With no argument, it clears the
# emulation.
lab_link() {
	local args=() kv
	for kv in "$@"; do
		case $kv in
		delay=*) args+=(delay "${kv#delay=}") ;;
		rate=*) args+=(rate "${kv#rate=}") ;;
		loss=*) args+=(loss "${kv#loss=}") ;;
		limit=*) args+=(limit "${kv#limit=}") ;;
		*) echo "lab_link: unknown setting $kv (want delay=, rate=, loss=, limit=)" >&2; return 2 ;;
		esac
	done
	tc qdisc del dev lo root 2>/dev/null || true
	((${#args[@]} == 0)) && return 0
	# A deep queue so that a rate limit delays packets instead of dropping them.
	tc qdisc add dev lo root netem limit 100000 "${args[@]}"
}

# lab_server_gone makes the server unreachable the way a production outage does.
#   how=loss (default): every packet on lo is dropped; hard mounts hang, nfsd keeps running.
#   how=loss ADDR: only the packets to and from ADDR are dropped (127.0.0.2 is the same nfsd
#     under a second address), so that the mounts of the other addresses keep working.
#   how=stop: nfsd stops serving (rpc.nfsd 0); the TCP connections are refused or reset.
lab_server_gone() {
	case ${1:-loss} in
	loss) if [[ -n ${2:-} ]]; then lab_drop_addr "$2"; else lab_link loss=100%; fi ;;
	stop) rpc.nfsd 0 ;;
	*) echo "lab_server_gone: want loss or stop" >&2; return 2 ;;
	esac
}

# lab_drop_addr drops every packet on lo to or from ADDR: a prio qdisc whose third band is
# a netem with 100% loss, and u32 filters sending ADDR's packets there. lab_link (with no
# argument) removes it with the root qdisc.
lab_drop_addr() {
	local addr=$1
	tc qdisc del dev lo root 2>/dev/null || true
	tc qdisc add dev lo root handle 1: prio
	tc qdisc add dev lo parent 1:3 handle 30: netem limit 100000 loss 100%
	tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip dst "$addr/32" flowid 1:3
	tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip src "$addr/32" flowid 1:3
}

# lab_server_back undoes both kinds of lab_server_gone.
lab_server_back() {
	lab_link
	rpc.nfsd 8
}
