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
	// azure-netapp-files, aws-efs, gcp-filestore or generic. For a proxied mount it is the
	// service the helper forwards to (see Proxy).
	Backend string `json:"backend"`
	// Proxy is set when the kernel reaches the server through a local helper (a loopback
	// server address and a port other than 2049): efs-utils' efs-proxy or stunnel, AZNFS'
	// stunnel. Server and ServerAddr are then the loopback address; Proxy names what is
	// behind it.
	Proxy *Proxy `json:"proxy,omitempty"`
	// Options are the effective mount options from mountinfo's super options (and the
	// per-mount options), keyed by name; flags such as "hard" have an empty value.
	Options map[string]string `json:"options"`
	// TransportSecurity is the RPC transport's security, the xprtsec= option: "none",
	// "tls" (RPC-with-TLS, the server authenticated) or "mtls" (both sides authenticated
	// by X.509 certificates). The kernel shows xprtsec=tls or xprtsec=mtls in mountinfo and
	// mountstats' opts line and nothing for none (fs/nfs/super.c nfs_show_mount_options,
	// Linux 6.5 and later; RFC 9289).
	TransportSecurity string `json:"xprtsec"`
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

// Inventory is everything nfstune knows about a host's NFS client state.
type Inventory struct {
	// KernelRelease is the release from /proc/version, e.g. "6.1.0-28-amd64".
	KernelRelease string `json:"kernel_release"`
	// Mounts are the NFS superblocks, sorted by device.
	Mounts []Mount `json:"mounts"`
	// Groups are the kernel NFS clients the mounts share, sorted by key.
	Groups []Group `json:"groups"`
	// Sysctls are the NFS-relevant sysctls by dotted name ("sunrpc.tcp_slot_table_entries",
	// "net.core.rmem_max", ...), as read from /proc/sys; absent keys were unreadable.
	Sysctls map[string]string `json:"sysctls"`
	// ReadAhead is the host configuration that sets read-ahead on future NFS mounts.
	ReadAhead ReadAheadConfig `json:"readahead_config"`
	// MountDefaults is what mount.nfs adds to every mount's options (nfsmount.conf and its
	// drop-ins) and whether it reads them; nil when there is neither mount.nfs nor a file.
	MountDefaults *MountDefaults `json:"mount_defaults,omitempty"`
	// ClientIdentity is where the NFSv4 client's identity comes from; nil when unknown.
	ClientIdentity *ClientIdentity `json:"client_identity,omitempty"`
	// NFSServers and NFSVolumes are the rows of /proc/fs/nfsfs/servers and volumes (or
	// /proc/<pid>/net/nfsfs/...): the kernel NFS clients and superblocks of the namespace.
	NFSServers []NFSServer `json:"nfs_servers,omitempty"`
	NFSVolumes []NFSVolume `json:"nfs_volumes,omitempty"`
	// Transports are the sunrpc transports and their state now, from
	// /sys/kernel/sunrpc/xprt-switches (empty before Linux 5.14).
	Transports []Transport `json:"transports,omitempty"`
	// Stalled are the server addresses whose requests went unanswered over a sampling
	// window; filled by SampleStalls, not by Read.
	Stalled []StalledServer `json:"stalled,omitempty"`
	// Blocked are the superblocks of the stalled servers with the processes using them;
	// filled by ReadBlocked, not by Read.
	Blocked []BlockedMount `json:"blocked,omitempty"`
	// Mounting are the NFS mounts stuck in progress (mount.nfs on a server that does not
	// answer, which has no superblock yet) and the unmounts of the mounts above; filled by
	// ReadBlocked when a server is stalled, not by Read.
	Mounting []MountProgram `json:"mounting,omitempty"`
	// TLSHandshake tells whether the TLS handshake daemon runs; read only when a mount uses
	// xprtsec=tls or mtls (nil otherwise).
	TLSHandshake *TLSHandshake `json:"tls_handshake,omitempty"`
	// Warnings are entries that were dropped or could not be read; the rest of the
	// inventory is still valid.
	Warnings []string `json:"warnings,omitempty"`
}

// ReadAheadConfig is what will set read_ahead_kb on the next NFS mount: udev rules that
// write the bdi attribute (nfs-utils' 99-nfs.rules calling nfsrahead, cloud images' rules
// with a fixed value, nfstune's own) and the [nfsrahead] section of nfs.conf.
type ReadAheadConfig struct {
	// UdevRules are the effective rule lines touching bdi read_ahead_kb, in the order
	// udev runs them (files sorted by name across /usr/lib/udev/rules.d, /run/udev/rules.d
	// and /etc/udev/rules.d, a file in /etc hiding the same name in /usr/lib). The last
	// one that matches an NFS bdi wins.
	UdevRules []UdevRule `json:"udev_rules,omitempty"`
	// NFSRahead is the [nfsrahead] section merged from /etc/nfs.conf and /etc/nfs.conf.d/*.conf:
	// keys "nfs", "nfs4", "default" in KiB, as written.
	NFSRahead map[string]string `json:"nfsrahead,omitempty"`
	// NFSRaheadFrom names, for each NFSRahead key, the file that set it last and the line
	// of its [nfsrahead] header ("/etc/nfs.conf.d/local.conf:1").
	NFSRaheadFrom map[string]string `json:"nfsrahead_from,omitempty"`
	// Masked are udev rules files disabled by a same-named symlink to /dev/null in a
	// directory of higher precedence (usually /etc/udev/rules.d).
	Masked []string `json:"masked_udev_rules,omitempty"`
}

// UdevRule is one rule line that sets a bdi's read_ahead_kb.
type UdevRule struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Text string `json:"text"`
	// ReadAheadKB is the fixed value the rule assigns, nil when a program computes it.
	ReadAheadKB *int `json:"read_ahead_kb,omitempty"`
	// Program is the helper a rule runs to compute the value (nfsrahead, nfstune), if any.
	Program string `json:"program,omitempty"`
	// Hides is the path of a same-named rules file this one overrides, if any.
	Hides string `json:"hides,omitempty"`
}
