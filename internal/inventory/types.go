// Package inventory tells what is mounted over NFS, as the kernel sees it. It reads
// mountinfo, mountstats, /proc/fs/nfsfs and the bdi attributes under a hostfs.Root, joins
// them per superblock (device number), and never touches a mount point.
package inventory

import (
	"time"

	"github.com/prometheus/procfs"
)

// Mount is one NFS superblock. Several mount points may show it (bind mounts, the same
// export mounted twice with identical options); they are listed together.
type Mount struct {
	// Device is the superblock's anonymous device "major:minor", as in mountinfo field 3,
	// the DEV column of /proc/fs/nfsfs/volumes, and the name of /sys/class/bdi/<device>.
	Device string `json:"device"`
	// MountPoints are every mount point showing this superblock, octal escapes decoded.
	MountPoints []string `json:"mountpoints"`
	// Server is the host part of the mount source as the user gave it (name or address).
	Server string `json:"server"`
	// ServerAddr is the addr= option: the address the kernel client actually uses.
	ServerAddr string `json:"server_addr,omitempty"`
	// Export is the path part of the mount source.
	Export string `json:"export"`
	// FSType is "nfs" or "nfs4".
	FSType string `json:"fstype"`
	// Version is the effective NFS version: "3", "4.0", "4.1" or "4.2".
	Version string `json:"version"`
	// ReadAheadKB is /sys/class/bdi/<device>/read_ahead_kb in KiB; nil when unreadable.
	ReadAheadKB *int `json:"read_ahead_kb"`
	// NConnect is the nconnect= option the kernel shows (shared by the client group);
	// 0 when the option is absent.
	NConnect int `json:"nconnect"`
	// Connections is the effective number of transports: the xprt: lines in mountstats.
	// 0 when mountstats had no entry for the mount.
	Connections int `json:"connections"`
	// RSize and WSize are the effective transfer sizes in bytes.
	RSize int `json:"rsize"`
	WSize int `json:"wsize"`
	// Backend is the service behind the server: azure-files, azure-blob-nfs,
	// azure-netapp-files, aws-efs, gcp-filestore or generic.
	Backend string `json:"backend"`
	// Options are the effective mount options from mountinfo's super options (and the
	// per-mount options), keyed by name; flags such as "hard" have an empty value.
	Options map[string]string `json:"options"`
	// Requested are the options asked for in /etc/fstab or /etc/nfsmount.conf, when known.
	Requested *Requested `json:"requested,omitempty"`
	// ClientGroup is the key of the kernel NFS client this superblock uses; see Group.
	ClientGroup string `json:"client_group"`
	// Stats are the mountstats counters for this superblock; nil when the entry was
	// missing or dropped as malformed.
	Stats *Stats `json:"-"`
}

// Requested is what the configuration asked for, to compare with what is in effect.
type Requested struct {
	// Source names where the options come from, e.g. "/etc/fstab:12".
	Source  string            `json:"source"`
	Options map[string]string `json:"options"`
}

// Group is a kernel NFS client (struct nfs_client): every mount with the same server
// address, port, NFS version, minor version and transport shares it, and with it the
// transports that nconnect created. The first mount of the group fixed nconnect.
type Group struct {
	Key         string   `json:"key"`
	ServerAddr  string   `json:"server_addr"`
	Version     string   `json:"version"`
	Proto       string   `json:"proto"`
	Devices     []string `json:"devices"`
	NConnect    int      `json:"nconnect"`
	Connections int      `json:"connections"`
	// SetBy is the device of the mount that most likely fixed nconnect (the oldest, by
	// mountstats age), empty when unknown.
	SetBy string `json:"set_by,omitempty"`
}

// Stats are one superblock's mountstats counters, as parsed by prometheus/procfs.
type Stats struct {
	// StatVersion is the statvers= of the device line, e.g. "1.1".
	StatVersion string
	// Age is how long the superblock has been mounted.
	Age        time.Duration
	Bytes      procfs.NFSBytesStats
	Events     procfs.NFSEventsStats
	Operations []procfs.NFSOperationStats
	// Transports has one entry per xprt: line, shared by the whole client group.
	Transports []procfs.NFSTransportStats
}
