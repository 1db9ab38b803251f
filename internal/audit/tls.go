package audit

import (
	"fmt"

	"github.com/nfstune/nfstune/internal/inventory"
)

// srcTLS is where NFS over TLS is specified and how a Linux client does it.
const srcTLS = "RFC 9289 (RPC-with-TLS); nfs(5) xprtsec; fs/nfs/super.c nfs_show_mount_options; net/handshake and ktls-utils' tlshd"

// satisfiesTLS reports whether a mount's transport security (inventory.XprtSec*) meets a
// policy's requirement: mtls is tls with a client certificate too, so it meets tls.
func satisfiesTLS(have, want string) bool {
	switch want {
	case "":
		return true
	case inventory.XprtSecTLS:
		return have == inventory.XprtSecTLS || have == inventory.XprtSecMTLS
	default:
		return have == want
	}
}

// checkTLS is NFS042, a mount without the transport security its policy asks
// for, and NFS043, a mount over TLS on a host where tlshd does not run.
func checkTLS(c *mountCtx) []Finding {
	var out []Finding
	if want := c.res.TransportSecurity; !satisfiesTLS(c.m.TransportSecurity, want) {
		f := c.finding("NFS042", SeverityError)
		f.Message = fmt.Sprintf("the policy asks for NFS over TLS (xprtsec=%s) and the mount has xprtsec=%s: its RPC traffic is not protected as required", want, c.m.TransportSecurity)
		f.Expected = "xprtsec=" + want
		if want == inventory.XprtSecTLS {
			f.Expected = "xprtsec=tls or mtls"
		}
		f.Actual = "xprtsec=" + c.m.TransportSecurity
		// xprtsec picks the kernel client (fs/nfs/client.c nfs_match_client), so the new
		// mount gets a client of its own: no other mount needs to go.
		f.Fix = fmt.Sprintf("with tlshd (ktls-utils) running and configured (a CA that signs the server's certificate; for mtls a client certificate and key in /etc/tlshd.conf), and a server that exports with xprtsec=%s: set in /etc/fstab: %s ; then %s",
			want, c.fstabLine(map[string]string{"xprtsec": want}), remountCmd(c.m.MountPoints))
		f.Reason = "a policy rule requires transportSecurity; without TLS, file data and credentials cross the network in clear text"
		f.Source = srcTLS
		out = append(out, f)
	}
	if hs := c.inv.TLSHandshake; c.m.UsesTLS() && hs != nil && hs.Complete && !hs.Running {
		f := c.finding("NFS043", SeverityError)
		f.Message = fmt.Sprintf("the mount uses xprtsec=%s and no %s process runs: the kernel's TLS handshake requests have no one to answer them, so a reconnect of this mount and every new TLS mount will fail", c.m.TransportSecurity, inventory.TLSHandshakeDaemon)
		f.Expected = inventory.TLSHandshakeDaemon + " running"
		f.Actual = "no " + inventory.TLSHandshakeDaemon + " process in /proc"
		f.Fix = "systemctl enable --now tlshd (Debian and Ubuntu: apt install ktls-utils); check its certificates in /etc/tlshd.conf"
		f.Reason = "the kernel does the TLS record layer (kTLS) but asks tlshd over the handshake netlink family to do each handshake (net/handshake, net/sunrpc/xprtsock.c xs_tls_handshake_sync)"
		f.Source = srcTLS
		out = append(out, f)
	}
	return out
}
