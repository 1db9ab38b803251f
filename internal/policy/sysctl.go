package policy

import (
	"maps"
	"slices"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// MaxConfigSize caps a config file. A policy is a few rules; 256 KiB holds thousands, and
// decoding the largest one allocates about 25 MiB.
const MaxConfigSize = hostfs.MaxConfigSize

// MaxReadAheadKB is the largest read-ahead a profile may ask for, 1 GiB: the top of what
// nfstune bench sweeps (and far above the 15-16 MiB the cloud documents recommend).
const MaxReadAheadKB = 1 << 20

// SysctlRange is the range of values a profile may give a sysctl.
type SysctlRange struct {
	Min, Max int64
}

// sysctlLimits are the only sysctls a profile may set, all NFS or network related, with the
// values accepted for each. For the triples net.ipv4.tcp_rmem and tcp_wmem ("min default
// max") the value is the maximum field. Sources:
//   - sunrpc slot tables: RPC_MIN_SLOT_TABLE (2) and RPC_MAX_SLOT_TABLE_LIMIT (65536) of
//     include/linux/sunrpc/xprt.h, the bounds net/sunrpc/xprtsock.c gives proc_dointvec_minmax;
//     NetApp recommends 128 (NetApp "NFSv3 slot tables", SUSE KB 000019281).
//   - socket buffers: from the kernel default of rmem_max and wmem_max (212992 bytes) up to
//     1 GiB, 16 times the 64 MiB Azure NetApp Files recommends for EDA clients (ANF-EDA).
//   - fs.nfs.nfs_congestion_kb: the kernel sizes it from RAM and caps it at 256 MiB
//     (fs/nfs/write.c, nfs_init_writepagecache); 1 MiB to 1 GiB is accepted.
var sysctlLimits = map[string]SysctlRange{
	"sunrpc.tcp_slot_table_entries":     {2, 65536},
	"sunrpc.tcp_max_slot_table_entries": {2, 65536},
	"net.core.rmem_max":                 {212992, 1 << 30},
	"net.core.wmem_max":                 {212992, 1 << 30},
	"net.core.rmem_default":             {212992, 1 << 30},
	"net.core.wmem_default":             {212992, 1 << 30},
	"net.ipv4.tcp_rmem":                 {212992, 1 << 30},
	"net.ipv4.tcp_wmem":                 {212992, 1 << 30},
	"fs.nfs.nfs_congestion_kb":          {1024, 1 << 20},
}

// SysctlLimit returns the range a profile may give the sysctl, and false when nfstune does
// not set it at all.
func SysctlLimit(name string) (SysctlRange, bool) {
	r, ok := sysctlLimits[name]
	return r, ok
}

// KnownSysctls returns the sorted names of the sysctls nfstune may set.
func KnownSysctls() []string { return slices.Sorted(maps.Keys(sysctlLimits)) }
