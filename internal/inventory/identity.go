package inventory

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// Sources of the NFSv4 client identity, in the order the kernel tries them
// (fs/nfs/nfs4proc.c nfs4_get_uniquifier).
const (
	// IdentityIdentifier is /sys/fs/nfs/net/nfs_client/identifier, one per network
	// namespace (Linux 5.3; nfs-utils' udev rule or the container runtime sets it).
	IdentityIdentifier = "identifier"
	// IdentityUniqueID is the nfs module parameter nfs4_unique_id, one per kernel.
	IdentityUniqueID = "nfs4_unique_id"
	// IdentityHostname is neither: the client string carries only the node name.
	IdentityHostname = "hostname"
)

// ClientIdentity is what makes this node's NFSv4 client string (the co_ownerid of
// EXCHANGE_ID or SETCLIENTID) unique: "Linux NFSv4.x <uniquifier>/<nodename>...", the
// uniquifier taken from the network namespace's identifier, else the nfs4_unique_id module
// parameter, else empty. Two clients with the same string are one client to the server,
// and each one's lease renewal expires the other's state.
// See https://docs.kernel.org/filesystems/nfs/client-identifier.html.
type ClientIdentity struct {
	// Source is IdentityIdentifier, IdentityUniqueID or IdentityHostname.
	Source string `json:"source"`
	// Identifier and UniqueID are the two uniquifiers as read; nil when unreadable (the
	// nfs module not loaded, a kernel before 5.3 for the identifier).
	Identifier *string `json:"identifier,omitempty"`
	UniqueID   *string `json:"nfs4_unique_id,omitempty"`
	// Hostname is /proc/sys/kernel/hostname: the node name of this UTS namespace, which
	// the kernel puts in the client string of mounts made from it.
	Hostname string `json:"hostname"`
	// Fingerprint is the first 8 hex digits of the SHA-256 of the uniquifier and host
	// name: equal fingerprints on two nodes mean colliding clients, and it discloses
	// neither value.
	Fingerprint string `json:"fingerprint"`
}

// Effective is the part of the client string that tells this node apart: the uniquifier
// of Source (empty for IdentityHostname) and the host name.
func (c ClientIdentity) Effective() string {
	switch c.Source {
	case IdentityIdentifier:
		return *c.Identifier + "/" + c.Hostname
	case IdentityUniqueID:
		return *c.UniqueID + "/" + c.Hostname
	}
	return "/" + c.Hostname
}

// readClientIdentity reads the identifier of this network namespace, the module
// parameter and the host name (hostname when not empty); nil when the host name is
// unreadable.
func readClientIdentity(root hostfs.Root, hostname string) *ClientIdentity {
	host := hostname
	if host == "" {
		var err error
		if host, err = hostfs.ReadString(root.Proc("sys", "kernel", "hostname")); err != nil {
			return nil
		}
	}
	c := &ClientIdentity{Hostname: host, Source: IdentityHostname}
	read := func(p string) *string {
		v, err := hostfs.ReadString(p)
		if err != nil {
			return nil
		}
		if v == "(null)" {
			v = "" // an identifier never set prints as a NULL string (fs/nfs/sysfs.c)
		}
		return &v
	}
	c.Identifier = read(root.Sys("fs", "nfs", "net", "nfs_client", "identifier"))
	c.UniqueID = read(root.Sys("module", "nfs", "parameters", "nfs4_unique_id"))
	switch {
	case c.Identifier != nil && *c.Identifier != "":
		c.Source = IdentityIdentifier
	case c.UniqueID != nil && *c.UniqueID != "":
		c.Source = IdentityUniqueID
	}
	sum := sha256.Sum256([]byte(c.Effective()))
	c.Fingerprint = hex.EncodeToString(sum[:])[:8]
	return c
}
