package audit

import (
	"fmt"

	"github.com/nfstune/nfstune/internal/inventory"
)

// srcTLS is where NFS over TLS is specified and how a Linux client does it.
const srcTLS = "RFC 9289 (RPC-with-TLS); nfs(5) xprtsec; fs/nfs/super.c nfs_show_mount_options; fs/nfs/client.c nfs_match_client and fs/nfs/nfs4client.c nfs4_match_client; net/handshake and ktls-utils' tlshd"

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
// for; NFS044, a mount without the transport security its fstab line or nfsmount.conf asks
// for; and NFS043, a mount over TLS on a host where tlshd does not run.
func checkTLS(c *mountCtx) []Finding {
	var out []Finding
	if want, ok := requestedXprtSec(c.m); ok && !satisfiesTLS(c.m.TransportSecurity, want) {
		f := c.finding("NFS044", SeverityError)
		f.Message = fmt.Sprintf("xprtsec=%s is requested in %s and the mount has xprtsec=%s: its RPC traffic crosses the network in clear", want, c.m.Requested.Source, c.m.TransportSecurity)
		f.Expected = fmt.Sprintf("xprtsec=%s (requested in %s)", want, c.m.Requested.Source)
		f.Actual = "xprtsec=" + c.m.TransportSecurity
		f.Message += joinedClientNote(c.m)
		f.Fix = fmt.Sprintf("check that tlshd runs and that the server exports with xprtsec=%s, then %s%s", want, remountCmd(c.m.MountPoints), clearMountsFirst(c.m, want))
		f.Reason = "a mount asked for TLS and does not have it: the data it was meant to protect is sent in clear text, and nothing but the options in mountinfo shows it"
		f.Source = srcTLS
		out = append(out, f)
	}
	if want := c.res.TransportSecurity; !satisfiesTLS(c.m.TransportSecurity, want) {
		f := c.finding("NFS042", SeverityError)
		f.Message = fmt.Sprintf("the policy asks for NFS over TLS (xprtsec=%s) and the mount has xprtsec=%s: its RPC traffic is not protected as required", want, c.m.TransportSecurity)
		f.Expected = "xprtsec=" + want
		if want == inventory.XprtSecTLS {
			f.Expected = "xprtsec=tls or mtls"
		}
		f.Actual = "xprtsec=" + c.m.TransportSecurity
		f.Fix = fmt.Sprintf("with tlshd (ktls-utils) running and configured (a CA that signs the server's certificate; for mtls a client certificate and key in /etc/tlshd.conf), and a server that exports with xprtsec=%s: set in /etc/fstab: %s ; then %s%s",
			want, c.fstabLine(map[string]string{"xprtsec": want}), remountCmd(c.m.MountPoints), clearMountsFirst(c.m, want))
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

// requestedXprtSec is the xprtsec the mount's configuration asks for (its fstab line, or
// an nfsmount.conf section), when it asks for TLS.
func requestedXprtSec(m *inventory.Mount) (string, bool) {
	if m.Requested == nil {
		return "", false
	}
	v := m.Requested.Options["xprtsec"]
	return v, v == inventory.XprtSecTLS || v == inventory.XprtSecMTLS
}

// A new NFSv3 mount gets a kernel client of its own when it asks for another xprtsec
// (fs/nfs/client.c nfs_match_client). An NFSv4 mount does too, at first; then trunking
// discovery looks for a client the server already knows by its client ID and owner, not by
// xprtsec (fs/nfs/nfs4client.c nfs4_match_client, from nfs40_ and nfs41_walk_client_list),
// and the mount goes on the server's clear client: asked with xprtsec=tls, it has none
// (seen on Linux 6.12 in the lab's TLS guest, lab/tlslab).

// joinedClientNote says, for an NFSv4 mount, why it can lack the TLS it asked for.
func joinedClientNote(m *inventory.Mount) string {
	if m.Version == "3" {
		return ""
	}
	return fmt.Sprintf("; over NFSv4 the kernel puts a new mount on the client it already has of the server (client %s here), whatever xprtsec the mount asks for", m.ClientGroup)
}

// clearMountsFirst is what an NFSv4 TLS remount needs besides its own line: the server's
// mounts without TLS gone first, or mounted with it too.
func clearMountsFirst(m *inventory.Mount, want string) string {
	if m.Version == "3" {
		return ""
	}
	return fmt.Sprintf(" (over NFSv4 the new mount joins the kernel's client of %s if one is left: unmount the server's mounts without TLS first, or mount them with xprtsec=%s too)", m.Server, want)
}
