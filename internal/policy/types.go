// Package policy holds the desired state of NFS mounts: built-in profiles (backend x
// workload, embedded as YAML with the source of each number) and the user's config file,
// which maps servers, exports and mount points to a backend and workload and may override
// any value.
package policy

import "github.com/nfstune/nfstune/internal/backend"

// Backends nfstune knows, by their canonical names (package backend, which also holds
// their aliases). A mount whose server matches none is "generic".
const (
	BackendAzureFiles       = backend.AzureFiles
	BackendAzureBlobNFS     = backend.AzureBlobNFS
	BackendAzureNetAppFiles = backend.AzureNetAppFiles
	BackendAWSEFS           = backend.AWSEFS
	BackendGCPFilestore     = backend.GCPFilestore
	BackendLonghorn         = backend.Longhorn
	BackendGeneric          = backend.Generic
)

// Workloads nfstune knows.
const (
	WorkloadSequentialRead = "sequential-read" // analytics: SAS data steps, CAS loads
	WorkloadStaticTools    = "static-tools"    // EDA tool trees, read-mostly binaries
	WorkloadWebContent     = "web-content"
	WorkloadGeneral        = "general"
	WorkloadSmallRandom    = "small-random"
)

// Mode says whether nfstune changes a mount or only reports on it.
type Mode string

// The modes: enforce changes mounts to match the policy, observe only reports.
const (
	ModeEnforce Mode = "enforce"
	ModeObserve Mode = "observe"
)

// Profile is the desired state of one mount. Numeric values have "at least" semantics
// where raising is the point (read-ahead, nconnect, rsize/wsize, sysctls); zero means
// "no opinion".
type Profile struct {
	Backend  string `json:"backend"`
	Workload string `json:"workload"`
	// ReadAheadKB is the bdi read_ahead_kb the mount should have, in KiB. For a profile
	// with ReadAheadRSizes, Resolve fills it in from the mount's rsize.
	ReadAheadKB int `json:"read_ahead_kb"`
	// ReadAheadRSizes derives the read-ahead from the mount: that many times its effective
	// rsize (15, the kernel's own factor before Linux 5.4). A layer that sets ReadAheadKB
	// replaces it, and the other way round.
	ReadAheadRSizes int `json:"read_ahead_rsizes,omitempty"`
	// ReadAheadExact makes ReadAheadKB the value to set, not a minimum: read-ahead above it
	// is lowered too (a value measured by bench sweep).
	ReadAheadExact bool `json:"read_ahead_exact,omitempty"`
	// ReadAheadBy names the mount helper whose own read-ahead is the target ("efs-utils"):
	// it writes that value after every mount, so nfstune asks the same, as a minimum.
	// Empty when the profile's value is the target.
	ReadAheadBy string `json:"read_ahead_by,omitempty"`
	// Mount are the mount options that matter.
	Mount MountOptions `json:"mount_options"`
	// TransportSecurity is the RPC transport security the mount must have: "tls" (xprtsec=tls
	// or mtls) or "mtls" (xprtsec=mtls); empty asks for none. The audit reports a mount
	// without it; nothing adds xprtsec to a mount, since a TLS mount needs tlshd and a
	// certificate the server trusts, which nfstune cannot check.
	TransportSecurity string `json:"transport_security,omitempty"`
	// Sysctls are NFS-relevant sysctls by dotted name with their minimum values.
	Sysctls map[string]int64 `json:"sysctls,omitempty"`
	// SysctlsMax are sysctls with an upper bound, such as NetApp's cap of 128 on
	// sunrpc.tcp_max_slot_table_entries; a host value above the bound is reported.
	SysctlsMax map[string]int64 `json:"sysctls_max,omitempty"`
}

// MountOptions are the NFS mount options a profile has an opinion on.
type MountOptions struct {
	Vers     string `json:"vers,omitempty"`     // "3", "4.1", "4.2"
	Proto    string `json:"proto,omitempty"`    // "tcp"
	NConnect int    `json:"nconnect,omitempty"` // 1..16; the backend's useful maximum applies
	RSize    int    `json:"rsize,omitempty"`    // bytes
	WSize    int    `json:"wsize,omitempty"`    // bytes
	Hard     *bool  `json:"hard,omitempty"`     // hard (true) or soft (false)
	Timeo    int    `json:"timeo,omitempty"`    // tenths of a second
	Retrans  int    `json:"retrans,omitempty"`
	ACTimeo  int    `json:"actimeo,omitempty"` // seconds; sets all four ac* timers
	NoCTO    bool   `json:"nocto,omitempty"`
	NoLock   bool   `json:"nolock,omitempty"`
	// Extra are further options written as-is, e.g. "noresvport", "sec=sys".
	Extra []string `json:"extra,omitempty"`
}
