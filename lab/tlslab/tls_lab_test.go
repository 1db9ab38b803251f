//go:build lab

// Package tlslab checks nfstune on NFS over TLS with a real kernel and a real handshake
// daemon: the lab's trixie guest (make lab-tls), Debian 13's kernel 6.12 and its ktls-utils.
// Debian 12, the other guests' root, ships no tlshd.
package tlslab

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/bench"
	"github.com/nfstune/nfstune/internal/fio"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/lab/labtest"
)

// TestMountOverTLS mounts the lab's export from a server address of its own over NFSv3 in
// clear, with xprtsec=tls and with xprtsec=mtls, and checks what nfstune says of each: the
// mount's xprtsec, whether tlshd runs (NFS043 once it is stopped), and NFS042 on the clear
// mount under a policy that asks for TLS. A fourth mount, NFSv4.2 with xprtsec=tls through
// an fstab line, goes beside the scenario's clear NFSv4 mounts of 127.0.0.1: the kernel's
// trunking discovery finds that server's clear client and can put the mount on it, and
// nfstune must then report the xprtsec the kernel shows and NFS044. Last it reads a file
// through the clear and the TLS NFSv3 mounts with nfstune bench and logs what TLS costs.
func TestMountOverTLS(t *testing.T) {
	labtest.RequireGuest(t)
	dir := t.TempDir()
	conf := writeTLSConfig(t, dir)
	if out, err := exec.Command("modprobe", "tls").CombinedOutput(); err != nil {
		t.Fatalf("modprobe tls: %v: %s", err, out)
	}
	stopTlshd := startTlshd(t, conf)

	// xprtsec is part of what the kernel matches a client on (fs/nfs/client.c
	// nfs_match_client), so the TLS mount has a client and a superblock of its own.
	plain := labtest.Mount(t, labtest.MountSpec{Server: tlsServer, Version: "3"})
	before := tlsStat(t)
	tlsMount := labtest.Mount(t, labtest.MountSpec{Server: tlsServer, Version: "3", Options: "xprtsec=tls"})
	after := tlsStat(t)
	// The kernel's own account, independent of nfstune: the mount's socket does TLS in the
	// kernel (net/tls, /proc/net/tls_stat), and mountinfo shows the option.
	if after["TlsTxSw"]+after["TlsTxDevice"] <= before["TlsTxSw"]+before["TlsTxDevice"] {
		t.Fatalf("no kTLS session opened by the xprtsec=tls mount: tls_stat before %v, after %v", before, after)
	}
	if tlsMount.Device == plain.Device {
		t.Fatalf("the TLS mount shares the clear mount's superblock %s", plain.Device)
	}
	if got := kernelXprtSec(t, tlsMount.Dir); got != inventory.XprtSecTLS {
		t.Fatalf("mountinfo of the TLS mount shows xprtsec %q", got)
	}
	// mtls: the client presents the certificate tlshd's [authenticate.client] names.
	mtlsMount := labtest.Mount(t, labtest.MountSpec{Server: tlsServer, Version: "3", Options: "xprtsec=mtls"})
	if got := kernelXprtSec(t, mtlsMount.Dir); got != inventory.XprtSecMTLS || mtlsMount.Device == tlsMount.Device {
		t.Fatalf("mountinfo of the mtls mount (%s) shows xprtsec %q", mtlsMount.Device, got)
	}
	v4 := mountFromFstab(t, "127.0.0.1:"+labtest.ExportPath(labtest.ExportTmp, "4.2"), "vers=4.2,xprtsec=tls")
	v4Kernel := kernelXprtSec(t, v4.Dir)
	t.Logf("NFSv4.2 with xprtsec=tls beside the scenario's clear NFSv4 mounts of 127.0.0.1: superblock %s, mountinfo xprtsec %q", v4.Device, v4Kernel)

	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {cidr: 127.0.0.0/8}
    transportSecurity: tls
`), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := auditReport(t, "--config", policy)
	if hs := rep.TLSHandshake; hs == nil || !hs.Running || !hs.Complete {
		t.Errorf("tls_handshake = %+v, want tlshd found running", hs)
	}
	if m := mountOf(t, rep, tlsMount.Device); m.TransportSecurity != inventory.XprtSecTLS {
		t.Errorf("TLS mount %s: xprtsec %q, want tls", tlsMount.Device, m.TransportSecurity)
	}
	if m := mountOf(t, rep, plain.Device); m.TransportSecurity != inventory.XprtSecNone {
		t.Errorf("clear mount %s: xprtsec %q, want none", plain.Device, m.TransportSecurity)
	}
	if m := mountOf(t, rep, mtlsMount.Device); m.TransportSecurity != inventory.XprtSecMTLS || hasFinding(rep, "NFS042", mtlsMount.Device) {
		t.Errorf("mtls mount %s: xprtsec %q, NFS042 %v; want mtls, which meets a tls rule", mtlsMount.Device, m.TransportSecurity, hasFinding(rep, "NFS042", mtlsMount.Device))
	}
	if !hasFinding(rep, "NFS042", plain.Device) || hasFinding(rep, "NFS042", tlsMount.Device) {
		t.Errorf("NFS042 (a mount without the TLS its rule asks for) should name the clear mount, not the TLS one: %v", findingIDs(rep))
	}
	// The NFSv4.2 mount asked for TLS in fstab: NFS044 when the kernel gave it none.
	if m := mountOf(t, rep, v4.Device); m.TransportSecurity != v4Kernel || m.Requested == nil || m.Requested.Options["xprtsec"] != inventory.XprtSecTLS {
		t.Errorf("NFSv4.2 mount asked with TLS: nfstune says xprtsec %q, requested %+v; the kernel %q", m.TransportSecurity, m.Requested, v4Kernel)
	}
	for _, id := range []string{"NFS042", "NFS044"} {
		if hasFinding(rep, id, v4.Device) != (v4Kernel == inventory.XprtSecNone) {
			t.Errorf("NFSv4.2 mount asked with TLS, the kernel's xprtsec %q: %s %v", v4Kernel, id, hasFinding(rep, id, v4.Device))
		}
	}
	if hasFinding(rep, "NFS044", tlsMount.Device) || hasFinding(rep, "NFS044", plain.Device) {
		t.Errorf("NFS044 on a mount that asked for no TLS in fstab or has it: %v", findingIDs(rep))
	}
	if hasFinding(rep, "NFS043", tlsMount.Device) {
		t.Errorf("NFS043 with tlshd running: %v", findingIDs(rep))
	}

	measureTLSCost(t, plain, tlsMount)

	stopTlshd()
	rep = auditReport(t)
	if hs := rep.TLSHandshake; hs == nil || hs.Running {
		t.Errorf("tls_handshake = %+v after tlshd stopped, want not running", hs)
	}
	if !hasFinding(rep, "NFS043", tlsMount.Device) || !hasFinding(rep, "NFS043", mtlsMount.Device) || hasFinding(rep, "NFS043", plain.Device) {
		t.Errorf("NFS043 (a TLS mount and no tlshd) should name the TLS and mtls mounts only: %v", findingIDs(rep))
	}
}

// measureTLSCost reads a file through the clear mount and one through the TLS mount, in
// turns, with nfstune bench's sequential-read profile and a dropped page cache each time,
// and logs the rates. It asserts what each result says of its mount, not the rates: the
// guest's emulated CPU does the encryption, so the ratio is the lab's, not a server's.
func measureTLSCost(t *testing.T, plain, tlsMount labtest.Mounted) {
	t.Helper()
	root := hostfs.Root("/")
	runner := &bench.Runner{
		Root:       root,
		Exec:       fio.Exec,
		Inventory:  func() (*inventory.Inventory, error) { return inventory.Read(root, inventory.ReadOptions{}) },
		DropCaches: true,
		Tool:       "nfstune lab",
	}
	const size = 32 << 20
	rates := map[string][]float64{}
	for round := range 3 {
		for _, m := range []labtest.Mounted{plain, tlsMount} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			res, err := runner.Run(ctx, bench.RunOptions{Mount: m.Dir, Profile: "seq-read", Repeat: 1, Size: size, Runtime: 60 * time.Second})
			cancel()
			if err != nil {
				t.Fatalf("round %d, %s: %v", round, m.Dir, err)
			}
			for _, r := range res.Runs {
				want := inventory.XprtSecNone
				if m.Device == tlsMount.Device {
					want = inventory.XprtSecTLS
				}
				if r.Tuning == nil || r.Tuning.Device != m.Device || r.Tuning.TransportSecurity != want {
					t.Errorf("round %d: tuning %+v, want device %s with xprtsec %s", round, r.Tuning, m.Device, want)
				}
				if r.Mountstats == nil || r.Mountstats.ServerReadBytes < size {
					t.Errorf("round %d, %s: the file did not come from the server: %+v", round, want, r.Mountstats)
				}
				rates[want] = append(rates[want], r.ReadMiBs)
			}
		}
	}
	t.Logf("sequential read of %d MiB, MiB/s per round: clear %v, TLS %v", size>>20, rates[inventory.XprtSecNone], rates[inventory.XprtSecTLS])
}

// mountFromFstab mounts src with opts the way a node does, through a line of /etc/fstab,
// so that nfstune knows what was asked; the line and the mount go when the test ends.
func mountFromFstab(t *testing.T, src, opts string) labtest.Mounted {
	t.Helper()
	dir := labtest.MountDir(t)
	old, err := os.ReadFile("/etc/fstab")
	if err != nil {
		t.Fatal(err)
	}
	line := src + " " + dir + " nfs " + opts + " 0 0\n"
	if err := os.WriteFile("/etc/fstab", append(old, line...), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile("/etc/fstab", old, 0o644); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "mount", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount %s (fstab: %s): %v: %s", dir, strings.TrimSpace(line), err, out)
	}
	t.Cleanup(func() { labtest.Umount(t, dir) })
	for _, e := range labtest.MountInfo(t) {
		if e.MountPoint == dir {
			return labtest.Mounted{Dir: dir, Source: src, Device: e.Device}
		}
	}
	t.Fatalf("mounted %s on %s but mountinfo does not show it", src, dir)
	return labtest.Mounted{}
}

// tlsServer is the server address of the test's two NFSv3 mounts: one no other test uses,
// so that they have clients of their own.
const tlsServer = "127.0.0.5"

// kernelXprtSec is the xprtsec mountinfo shows for the mount on dir, none when it shows
// none (fs/nfs/super.c nfs_show_mount_options prints nothing for none).
func kernelXprtSec(t *testing.T, dir string) string {
	t.Helper()
	for _, e := range labtest.MountInfo(t) {
		if e.MountPoint == dir {
			if v, ok := e.Options["xprtsec"]; ok {
				return v
			}
			return inventory.XprtSecNone
		}
	}
	t.Fatalf("no mount on %s in mountinfo", dir)
	return ""
}

// writeTLSConfig makes a CA and a certificate for the lab's server names, 127.0.0.1 and
// tlsServer, and a tlshd configuration that serves the server side with it, presents it as
// the client's certificate too (for mtls), and trusts the CA on both sides. It returns the
// configuration's path.
func writeTLSConfig(t *testing.T, dir string) string {
	t.Helper()
	ca, err := labtest.NewCA("nfstune lab CA")
	if err != nil {
		t.Fatal(err)
	}
	srvDER, srvKey, err := ca.Issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(tlsServer)}, DNSNames: []string{"localhost"},
	})
	if err != nil {
		t.Fatal(err)
	}
	srvKeyDER, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, kind string, der []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.pem", "CERTIFICATE", ca.DER, 0o644)
	certFile := write("server.pem", "CERTIFICATE", srvDER, 0o644)
	keyFile := write("server.key", "PRIVATE KEY", srvKeyDER, 0o600)
	// tlshd releases before the x509.truststore option verify the server with the system's
	// trust store (GnuTLS: /etc/ssl/certs/ca-certificates.crt, which minbase lacks).
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); os.IsNotExist(err) {
		if err := os.MkdirAll("/etc/ssl/certs", 0o755); err == nil {
			b, _ := os.ReadFile(caFile)
			_ = os.WriteFile("/etc/ssl/certs/ca-certificates.crt", b, 0o644)
		}
	}
	conf := filepath.Join(dir, "tlshd.conf")
	text := "[main]\ndebug=1\n\n[authenticate.client]\nx509.truststore=" + caFile +
		"\nx509.certificate=" + certFile + "\nx509.private_key=" + keyFile +
		"\n\n[authenticate.server]\nx509.truststore=" + caFile + "\nx509.certificate=" + certFile +
		"\nx509.private_key=" + keyFile + "\n"
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}

// startTlshd runs tlshd with conf, its log on the test's stderr, and returns a function
// that stops it (also called when the test ends).
func startTlshd(t *testing.T, conf string) (stop func()) {
	t.Helper()
	cmd := exec.Command("tlshd", "-s", "-c", conf)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting tlshd: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		t.Fatalf("tlshd exited at start: %v", cmd.ProcessState)
	case <-time.After(2 * time.Second):
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// tlsStat reads the kernel's TLS counters (/proc/net/tls_stat, net/tls/tls_proc.c).
func tlsStat(t *testing.T) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tls_stat")
	if err != nil {
		t.Fatalf("reading the kernel's TLS counters: %v", err)
	}
	out := map[string]int64{}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 2 {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				out[f[0]] = n
			}
		}
	}
	return out
}

func auditReport(t *testing.T, args ...string) audit.Report {
	t.Helper()
	r := labtest.RunNfstune(t, append([]string{"audit", "--stall-window", "0", "--fail-on", "none", "-o", "json"}, args...)...)
	var rep audit.Report
	if err := json.NewDecoder(bytes.NewReader(r.Stdout)).Decode(&rep); err != nil {
		t.Fatalf("audit exit %d: %v\n%s\n%s", r.Code, err, r.Stdout, r.Stderr)
	}
	return rep
}

func mountOf(t *testing.T, rep audit.Report, dev string) inventory.Mount {
	t.Helper()
	for _, m := range rep.Mounts {
		if m.Device == dev {
			return m
		}
	}
	t.Fatalf("the audit lists no mount %s", dev)
	return inventory.Mount{}
}

func hasFinding(rep audit.Report, id, dev string) bool {
	for _, f := range rep.Findings {
		if f.ID == id && f.Device == dev {
			return true
		}
	}
	return false
}

func findingIDs(rep audit.Report) []string {
	var out []string
	for _, f := range rep.Findings {
		out = append(out, f.ID+"@"+f.Device)
	}
	return out
}
