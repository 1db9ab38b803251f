#!/usr/bin/env bash
# Copy the files nfstune reads from this (guest) kernel into a fixture tree:
#   record.sh DEST "scenario description"
# DEST gets proc/, sys/, etc/ (and usr/lib/udev/rules.d for rules touching read-ahead) as
# plain files, plus a README naming the kernel and the scenario. Pseudo-files are read with
# cat (their size is not their length); nothing below an NFS mount point is touched.
set -euo pipefail
dest=$1
what=$2
rm -rf "$dest"
mkdir -p "$dest"

copy() { # copy SRC...: each readable regular file to DEST/SRC, in one cp
	local f files=()
	for f in "$@"; do
		[[ -f $f && -r $f ]] && files+=("$f")
	done
	((${#files[@]})) || return 0
	# cp reads pseudo-files to their end whatever size they report; attributes that fail to
	# read (write-only, or gone meanwhile) are skipped.
	cp --parents -t "$dest" "${files[@]}" 2>/dev/null || true
}

# /proc/self is a symlink: record it as a directory, as the inventory reads it.
mkdir -p "$dest/proc/self"
cat /proc/self/mountinfo >"$dest/proc/self/mountinfo"
cat /proc/self/mountstats >"$dest/proc/self/mountstats"
copy /proc/fs/nfsfs/servers /proc/fs/nfsfs/volumes /proc/version
copy /proc/sys/sunrpc/* /proc/sys/fs/nfs/*
copy /proc/sys/net/core/{rmem_max,wmem_max,rmem_default,wmem_default,netdev_max_backlog}
copy /proc/sys/net/ipv4/{tcp_rmem,tcp_wmem}
# /sys/class/bdi/<dev> are symlinks into /sys/devices/virtual/bdi: recorded as directories.
for d in /sys/class/bdi/0:*; do
	mkdir -p "$dest$d"
	cat "$d/read_ahead_kb" >"$dest$d/read_ahead_kb"
done
mapfile -t attrs < <(find /sys/kernel/sunrpc -type f 2>/dev/null)
((${#attrs[@]})) && copy "${attrs[@]}"
copy /etc/fstab /etc/nfs.conf /etc/nfsmount.conf /etc/nfs.conf.d/*.conf
for dir in /usr/lib/udev/rules.d /run/udev/rules.d /etc/udev/rules.d; do
	for f in "$dir"/*.rules; do
		[[ -f $f ]] && grep -q read_ahead_kb "$f" && copy "$f"
	done
done
find "$dest" -type f -empty -delete
chmod -R u+w,go+rX "$dest"

cat >"$dest/README.md" <<README
# Recorded from the nfstune lab: $(uname -r)

Kernel: \`$(cat /proc/version)\`

Debian 12 guest under qemu (TCG), $(nproc) vCPUs, $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) MiB, recorded with \`${LAB_RECORD_CMD:-make lab-record}\` on
$(date -u +%Y-%m-%d). Server: the same guest's nfsd, exporting a tmpfs (/srv/tmp, fsid=1) and an
ext4 image (/srv/disk, fsid=2) below an NFSv4 pseudo root (/srv, fsid=0) to 127.0.0.0/8.

Scenario: $what

$(awk '!/^#/ && NF >= 4 {if (!n++) print "| mount point | asked (etc/fstab) |\n| --- | --- |"; printf "| %s | %s %s |\n", $2, $1, $4}' /etc/fstab)

What the kernel made of it (proc/self/mountinfo, proc/fs/nfsfs/volumes, xprt: lines in
proc/self/mountstats):

\`\`\`
$(cat /proc/fs/nfsfs/servers)
$(cat /proc/fs/nfsfs/volumes)
\`\`\`

$(awk '/^device / { if (mp != "") printf "- %s: %d transport(s)\n", mp, n; mp = ($8 == "nfs" || $8 == "nfs4") ? $5 : ""; n = 0; next }
	mp != "" && /xprt:/ { n++ }
	END { if (mp != "") printf "- %s: %d transport(s)\n", mp, n }' /proc/self/mountstats)

Files are plain copies (symlinks such as proc/self and sys/class/bdi/<dev> became
directories); empty and unreadable attributes were left out. The guest's own mounts (its 9p
root, overlays, tmpfs) are in mountinfo as the kernel showed them.
README
echo "recorded $(find "$dest" -type f | wc -l) files into $dest"
