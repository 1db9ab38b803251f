package inventory

import (
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// nfsSysctls are the sysctls that bound NFS client throughput: RPC slot tables (set before
// the first mount to a server) and TCP buffers and queues.
func nfsSysctls() []string {
	return []string{
		"sunrpc.tcp_slot_table_entries",
		"sunrpc.tcp_max_slot_table_entries",
		"sunrpc.udp_slot_table_entries",
		"net.core.rmem_max",
		"net.core.wmem_max",
		"net.core.rmem_default",
		"net.core.wmem_default",
		"net.ipv4.tcp_rmem",
		"net.ipv4.tcp_wmem",
		"net.core.netdev_max_backlog",
		"net.ipv4.tcp_window_scaling",
		"net.ipv4.tcp_timestamps",
		"net.ipv4.tcp_sack",
		"net.ipv4.tcp_slow_start_after_idle",
		"net.ipv4.tcp_congestion_control",
	}
}

// readSysctls reads each of nfsSysctls from /proc/sys; white space runs in multi-value
// sysctls ("4096\t131072\t6291456") become one space. Unreadable ones are left out.
func readSysctls(root hostfs.Root) map[string]string {
	out := map[string]string{}
	for _, name := range nfsSysctls() {
		s, err := hostfs.ReadString(root.Proc(append([]string{"sys"}, strings.Split(name, ".")...)...))
		if err != nil {
			continue
		}
		out[name] = strings.Join(strings.Fields(s), " ")
	}
	return out
}
