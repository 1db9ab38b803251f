package inventory

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// The values of Mount.TransportSecurity: the xprtsec= mount option's words
// (fs/nfs/fs_context.c nfs_xprtsec_policies) for the kernel's RPC_XPRTSEC_NONE,
// RPC_XPRTSEC_TLS_ANON and RPC_XPRTSEC_TLS_X509 (include/linux/sunrpc/xprt.h
// enum xprtsec_policies).
const (
	XprtSecNone = "none"
	XprtSecTLS  = "tls"
	XprtSecMTLS = "mtls"
)

// transportSecurity is the xprtsec of a mount's effective options. The kernel prints
// ",xprtsec=tls" for RPC_XPRTSEC_TLS_ANON and ",xprtsec=mtls" for RPC_XPRTSEC_TLS_X509
// and nothing for RPC_XPRTSEC_NONE (fs/nfs/super.c nfs_show_mount_options), so an absent
// option is none, on kernels before 6.5 too, which have no TLS at all.
func transportSecurity(opts map[string]string) string {
	switch v := opts["xprtsec"]; v {
	case XprtSecTLS, XprtSecMTLS:
		return v
	case "", XprtSecNone:
		return XprtSecNone
	default:
		return v // a policy newer than nfstune: shown as the kernel names it
	}
}

// UsesTLS reports whether the mount's RPC transport is wrapped in TLS (xprtsec=tls or
// mtls): each new connection then needs a handshake by tlshd.
func (m *Mount) UsesTLS() bool {
	return m.TransportSecurity == XprtSecTLS || m.TransportSecurity == XprtSecMTLS
}

// TLSHandshakeDaemon is the command name of ktls-utils' handshake daemon. The kernel asks
// it, over the "handshake" generic netlink family, to do the TLS handshake on each new RPC
// transport of a TLS mount (net/handshake/netlink.c, net/sunrpc/xprtsock.c
// xs_tls_handshake_sync); without a listener the handshake cannot start and the transport
// does not connect, so a new mount fails and an existing mount hangs (hard) or fails
// (soft) at its next reconnect. /proc lists no generic netlink family, so the daemon is
// found by its process name.
const TLSHandshakeDaemon = "tlshd"

// TLSHandshake is what a scan of /proc found of the TLS handshake daemon.
type TLSHandshake struct {
	// Running is true when a process named tlshd was found.
	Running bool `json:"running"`
	// PIDs are its processes, sorted.
	PIDs []int `json:"pids,omitempty"`
	// Complete is false when the scan stopped at its limits before finding one: tlshd may
	// run unseen.
	Complete bool `json:"complete"`
}

// ReadTLSHandshake looks for the TLS handshake daemon: /proc/<pid>/comm of every process,
// nothing else, under limits (MaxProcesses, MaxReads, Timeout). It sees the processes of
// root's /proc: the agent's root has the host's /proc at /host/proc.
func ReadTLSHandshake(ctx context.Context, root hostfs.Root, limits HolderLimits) (TLSHandshake, []string) {
	l := limits.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	entries, err := hostfs.ReadDir(root.Proc())
	if err != nil {
		return TLSHandshake{}, []string{fmt.Sprintf("looking for %s: listing processes: %v", TLSHandshakeDaemon, err)}
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	out := TLSHandshake{Complete: true}
	for i, pid := range pids {
		if i >= l.MaxProcesses || i >= l.MaxReads || ctx.Err() != nil {
			out.Complete = false
			if !out.Running {
				return out, []string{fmt.Sprintf("looking for %s: the scan stopped with %d of %d processes looked at (limits: %d processes, %d reads, %s)", TLSHandshakeDaemon, i, len(pids), l.MaxProcesses, l.MaxReads, l.Timeout)}
			}
			break
		}
		b, err := hostfs.ReadSmall(root.Proc(strconv.Itoa(pid), "comm"))
		if err != nil {
			continue // exited
		}
		if strings.TrimSuffix(string(b), "\n") == TLSHandshakeDaemon {
			out.Running = true
			out.PIDs = append(out.PIDs, pid)
		}
	}
	return out, nil
}
