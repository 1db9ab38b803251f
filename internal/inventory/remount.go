package inventory

// How to mount a mount again: the source, type and options a line for fstab or mount(8)
// needs so that it gives the same mount, through efs-utils' or AZNFS' helper where one made
// it. Audit's fix lines and tune's mount option changes start from RemountSpec and
// OwnOptions.

import (
	"maps"
	"strconv"
	"strings"
)

// MountSpec is how to mount a mount again: what to give mount(8).
type MountSpec struct {
	// Server is the server part of the source ("[v6addr]" bracketed); for a mount through
	// efs-utils or AZNFS the helper's own: the file system ID, the account's endpoint.
	Server string
	// Export is the path part of the source.
	Export string
	// FSType is nfs or nfs4, or the helper's type: efs (mount.efs), aznfs (mount.aznfs).
	FSType string
	// Set are options the line needs ("" for a flag): the helper's "tls" and "stunnel",
	// or port= for a forwarder no helper owns.
	Set map[string]string
	// Drop are options that must not be written: the port a helper picks at each mount.
	Drop []string
}

// Source is "server:export".
func (s MountSpec) Source() string { return s.Server + ":" + s.Export }

// kernelFoundOptions are options mountinfo shows that the kernel or mount.nfs found when
// the file system was mounted (the server's and the client's addresses, the mount
// daemon's port, the server's name length): a line that pinned them would break when they
// change.
var kernelFoundOptions = []string{"addr", "clientaddr", "mountaddr", "mountport", "namlen"}

// OwnOptions returns the options a line that mounts m again starts from: those fstab or
// nfsmount.conf requested (Requested), or when no file requested any, those mountinfo
// shows less the values the kernel found at mount time, so that a fix applied to them
// keeps every other option of the mount. The map is a copy.
func (m *Mount) OwnOptions() map[string]string {
	if m.Requested != nil {
		return maps.Clone(m.Requested.Options)
	}
	opts := maps.Clone(m.Options)
	if opts == nil {
		opts = map[string]string{}
	}
	for _, k := range kernelFoundOptions {
		delete(opts, k)
	}
	return opts
}

// RemountSpec returns how to mount m again. The options of a proxied mount go to its
// helper, which strips its own (tls, stunnel, ...) and adds port= before mount.nfs4.
func RemountSpec(m *Mount) MountSpec {
	server := m.Server
	if strings.Contains(server, ":") {
		server = "[" + server + "]"
	}
	s := MountSpec{Server: server, Export: m.Export, FSType: m.FSType, Set: map[string]string{}}
	if s.FSType == "" {
		s.FSType = "nfs"
	}
	p := m.Proxy
	switch {
	case p == nil:
	case (p.Kind == ProxyEFS || p.Kind == ProxyEFSStunnel) && p.FileSystemID != "":
		s.Server, s.FSType, s.Drop = p.FileSystemID, "efs", []string{"port"}
		if p.TLS != nil && *p.TLS {
			s.Set["tls"] = ""
		}
		if p.Kind == ProxyEFSStunnel {
			s.Set["stunnel"] = ""
		}
	case p.Kind == ProxyAZNFS && p.Upstream != "":
		s.Server, s.FSType, s.Drop = p.Upstream, "aznfs", []string{"port"}
	default:
		s.Set["port"] = strconv.Itoa(p.Port)
	}
	return s
}

// IsMountType reports whether an fstab or mount(8) type ends in an NFS mount of m: nfs
// and nfs4, and for a mount through efs-utils or AZNFS the helper's type.
func IsMountType(m *Mount, fstype string) bool {
	if isNFSType(fstype) {
		return true
	}
	return m.Proxy != nil && fstype == RemountSpec(m).FSType
}
