//go:build lab

package labtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// forwarder is a local TCP proxy as efs-utils and AZNFS run one: it accepts on 127.0.0.1
// and copies each connection to nfsd on 127.0.0.1:2049, counting the bytes each way.
type forwarder struct {
	ln                 net.Listener
	toServer, toClient atomic.Int64
}

func startForwarder(t *testing.T) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.pipe(c)
		}
	}()
	// Registered before any mount, so it runs after their unmounts (cleanups run last
	// registered first).
	t.Cleanup(func() { ln.Close() })
	return f
}

func (f *forwarder) port() int { return f.ln.Addr().(*net.TCPAddr).Port }

func (f *forwarder) pipe(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", "127.0.0.1:2049")
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn, n *atomic.Int64) {
		_, _ = io.Copy(countingWriter{dst, n}, src) // ends when either side closes or fails
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(s, c, &f.toServer)
	go cp(c, s, &f.toClient)
	<-done
	<-done
}

// sent is the bytes the forwarder has passed from the kernel client to nfsd so far.
func (f *forwarder) sent() int64 { return f.toServer.Load() }

// countingWriter counts what it writes as it goes: a connection lives as long as the mount.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// proxiedReport is what the test reads of `nfstune audit -o json` for proxied mounts.
type proxiedReport struct {
	Mounts []struct {
		Device      string `json:"device"`
		Server      string `json:"server"`
		Backend     string `json:"backend"`
		ClientGroup string `json:"client_group"`
		Proxy       *struct {
			Kind         string `json:"kind"`
			Port         int    `json:"port"`
			FileSystemID string `json:"file_system_id"`
			ReadAheadKB  int    `json:"read_ahead_kb"`
		} `json:"proxy"`
	} `json:"mounts"`
	Desired map[string]struct {
		ReadAheadKB int    `json:"read_ahead_kb"`
		ReadAheadBy string `json:"read_ahead_by"`
	} `json:"desired"`
	Findings []struct {
		ID     string `json:"id"`
		Device string `json:"device"`
	} `json:"findings"`
}

func auditProxied(t *testing.T) proxiedReport {
	t.Helper()
	_, r := audit(t, "--stall-window", "0")
	var rep proxiedReport
	if err := json.Unmarshal(r.Stdout, &rep); err != nil {
		t.Fatalf("decoding audit JSON: %v", err)
	}
	return rep
}

func (r proxiedReport) has(dev, id string) bool {
	for _, f := range r.Findings {
		if f.Device == dev && f.ID == id {
			return true
		}
	}
	return false
}

// TestProxiedMountKernelView mounts the lab's nfsd through a local TCP forwarder on
// 127.0.0.1, with port=, as efs-utils and AZNFS do, and checks what nfstune relies on
// against the real kernel: mountinfo shows the loopback server and port=, the kernel NFS
// client and its transport are on the forwarder's port (nfsfs, xprt_info dst_port), the
// traffic goes through the forwarder, nfstune reports a loopback proxy in a client group
// of its own (NFS081, never NFS080), and with an efs-utils state file written for the
// mount it attributes the mount to EFS and keeps the read-ahead efs-utils would write
// (15 x its 1 MiB rsize option) without a finding, even with apply --exact.
//
// NFSv4.0: the scenario mounts 127.0.0.1 over NFSv3, 4.1 and 4.2 only, so no client of the
// same server and minor version exists that the kernel's trunking detection could hand
// this mount instead (nfs4_discover_server_trunking): as on a host where each proxied file
// system is its own server.
func TestProxiedMountKernelView(t *testing.T) {
	RequireGuest(t)
	fw := startForwarder(t)
	port := fw.port()
	v4 := Mount(t, MountSpec{Version: "4.0", Options: "rsize=1048576,port=" + strconv.Itoa(port)})
	for _, e := range MountInfo(t) {
		if e.Device != v4.Device {
			continue
		}
		t.Logf("mountinfo %s %s: %s", e.Device, e.Source, optionsLine(e.Options))
		if !strings.HasPrefix(e.Source, "127.0.0.1:") || e.Options["port"] != strconv.Itoa(port) || e.Options["addr"] != "127.0.0.1" {
			t.Errorf("mountinfo %s: source %s port=%q addr=%q; want 127.0.0.1 with port=%d", e.Device, e.Source, e.Options["port"], e.Options["addr"], port)
		}
	}
	if p := nfsfsPort(t, v4.Device); p != port {
		t.Errorf("/proc/fs/nfsfs/volumes: %s on port %d, want the forwarder's %d", v4.Device, p, port)
	}
	writeDirect(t, filepath.Join(v4.Dir, "through-forwarder"), 1)
	if got := fw.sent(); got < 1<<20 {
		t.Errorf("%d bytes went to nfsd through the forwarder after a 1 MiB O_DIRECT write, want at least 1 MiB", got)
	}

	// xprt_info's dst_port, which nfstune keys stalls by, is in Linux 6.1 and later.
	if ports := xprtDstPorts(t); kernelAtLeast(t, 6, 1) && !slices.Contains(ports, port) {
		t.Errorf("no sunrpc transport with dst_port %d: %v", port, ports)
	}
	rep := auditProxied(t)
	seen := 0
	for _, m := range rep.Mounts {
		if m.Device != v4.Device {
			continue
		}
		seen++
		if m.Proxy == nil || m.Proxy.Kind != "loopback" || m.Proxy.Port != port || m.Backend != "generic" {
			t.Errorf("%s: proxy %+v backend %s; want loopback on %d, generic", m.Device, m.Proxy, m.Backend, port)
		}
		if want := fmt.Sprintf("tcp://127.0.0.1:%d/v4.0", port); m.ClientGroup != want {
			t.Errorf("%s: client group %s, want %s", m.Device, m.ClientGroup, want)
		}
		if !rep.has(m.Device, "NFS081") || rep.has(m.Device, "NFS080") {
			t.Errorf("%s: want NFS081 and no NFS080", m.Device)
		}
	}
	if seen != 1 {
		t.Fatalf("audit does not list the proxied mount %s", v4.Device)
	}

	// efs-utils' state for the NFSv4.1 mount, as proxy.py write_tunnel_state_file writes it.
	dir := "/run/efs"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("fs-0123456789abcdef0.%s.%d", strings.ReplaceAll(strings.TrimPrefix(v4.Dir, "/"), "/", "."), port)
	state := fmt.Sprintf(`{"pid": %d, "cmd": ["/usr/bin/efs-proxy", "%s/stunnel-config.%s", "--tls"], "files": ["%s/stunnel-config.%s"], "mountpoint": %q, "fsId": "fs-0123456789abcdef0"}`,
		os.Getpid(), dir, name, dir, name, v4.Dir)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join(dir, name)) })
	// What optimize_readahead_window writes: 15 x the rsize option / 1024.
	setReadAhead(t, v4.Device, 15*1048576/1024)

	rep = auditProxied(t)
	for _, m := range rep.Mounts {
		if m.Device != v4.Device {
			continue
		}
		if m.Proxy == nil || m.Proxy.Kind != "efs-proxy" || m.Proxy.FileSystemID != "fs-0123456789abcdef0" || m.Backend != "aws-efs" {
			t.Errorf("%s with efs-utils state: proxy %+v backend %s; want efs-proxy to fs-0123456789abcdef0, aws-efs", m.Device, m.Proxy, m.Backend)
		}
		d := rep.Desired[m.Device]
		t.Logf("%s: efs-utils target %d KiB (effective rsize), bdi at 15360", m.Device, d.ReadAheadKB)
		if d.ReadAheadBy != "efs-utils" {
			t.Errorf("%s: read-ahead target by %q, want efs-utils", m.Device, d.ReadAheadBy)
		}
		for _, id := range []string{"NFS001", "NFS050", "NFS081"} {
			if rep.has(m.Device, id) {
				t.Errorf("%s: %s for a mount efs-utils tunes", m.Device, id)
			}
		}
	}
	// efs-utils' value is above the target from the effective rsize: even --exact keeps it.
	r := RunNfstune(t, "apply", "--dry-run", "--exact", "--persist", "none", "-o", "json")
	var plan struct {
		Plan struct {
			Actions []struct {
				Device string `json:"device"`
				New    string `json:"new"`
			} `json:"actions"`
		} `json:"plan"`
	}
	if err := json.Unmarshal(r.Stdout, &plan); err != nil {
		t.Fatalf("decoding apply --dry-run JSON: %v\n%s", err, r.Stdout)
	}
	for _, a := range plan.Plan.Actions {
		if a.Device == v4.Device {
			t.Errorf("apply --exact would change efs-utils' read-ahead of %s to %s", v4.Device, a.New)
		}
	}
}

// nfsfsPort returns the PORT column (hex) of dev's row in /proc/fs/nfsfs/volumes.
func nfsfsPort(t *testing.T, dev string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/fs/nfsfs/volumes")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[3] == dev {
			n, err := strconv.ParseInt(f[2], 16, 32)
			if err != nil {
				t.Fatalf("nfsfs port %q: %v", f[2], err)
			}
			return int(n)
		}
	}
	t.Fatalf("%s not in /proc/fs/nfsfs/volumes", dev)
	return 0
}

// xprtDstPorts returns the dst_port of every transport under /sys/kernel/sunrpc.
func xprtDstPorts(t *testing.T) []int {
	t.Helper()
	files, err := filepath.Glob("/sys/kernel/sunrpc/xprt-switches/switch-*/xprt-*/xprt_info")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a transport going away
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "dst_port="); ok {
				if n, err := strconv.Atoi(v); err == nil {
					out = append(out, n)
				}
			}
		}
	}
	return out
}

func setReadAhead(t *testing.T, dev string, kb int) {
	t.Helper()
	p := filepath.Join("/sys/class/bdi", dev, "read_ahead_kb")
	if err := os.WriteFile(p, []byte(strconv.Itoa(kb)), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

func optionsLine(o map[string]string) string {
	var parts []string
	for _, k := range []string{"vers", "rsize", "proto", "port", "addr", "clientaddr", "nconnect"} {
		if v, ok := o[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ",")
}

// TestProxiedMountTrunking mounts over NFSv4.1 through a forwarder, with nosharecache so
// that it gets a superblock of its own, while the scenario already mounts the same nfsd
// over NFSv4.1 on 127.0.0.1:2049 with nconnect=4. The kernel's trunking detection may
// hand the new mount that client (same server owner) or keep its own on the forwarder's
// port; /proc/fs/nfsfs/volumes says which, nfstune's client group must follow it, and
// NFS082 must say when the mount's requests do not go through the forwarder.
func TestProxiedMountTrunking(t *testing.T) {
	RequireGuest(t)
	fw := startForwarder(t)
	port := fw.port()
	m := Mount(t, MountSpec{Version: "4.1", Options: "nosharecache,port=" + strconv.Itoa(port)})
	var opts map[string]string
	for _, e := range MountInfo(t) {
		if e.Device == m.Device {
			opts = e.Options
			t.Logf("mountinfo %s %s: %s", e.Device, e.Source, optionsLine(e.Options))
		}
	}
	if opts["port"] != strconv.Itoa(port) {
		t.Errorf("mountinfo %s: port=%q, want %d", m.Device, opts["port"], port)
	}
	used := nfsfsPort(t, m.Device)
	before := fw.sent()
	writeDirect(t, filepath.Join(m.Dir, "trunking"), 1)
	t.Logf("nfsfs: %s uses the client on port %d; %d bytes of a 1 MiB write went through the forwarder on %d", m.Device, used, fw.sent()-before, port)

	_, r := audit(t, "--stall-window", "0")
	var rep struct {
		Mounts []struct {
			Device      string `json:"device"`
			ClientGroup string `json:"client_group"`
			NConnect    int    `json:"nconnect"`
		} `json:"mounts"`
		Findings []struct {
			ID     string `json:"id"`
			Device string `json:"device"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(r.Stdout, &rep); err != nil {
		t.Fatal(err)
	}
	bypassed := false
	for _, f := range rep.Findings {
		bypassed = bypassed || f.Device == m.Device && f.ID == "NFS082"
	}
	if bypassed != (used != port) {
		t.Errorf("NFS082 reported = %v, but the mount uses the client on port %d and asked %d", bypassed, used, port)
	}
	want := "tcp://127.0.0.1/v4.1"
	if used != 2049 {
		want = fmt.Sprintf("tcp://127.0.0.1:%d/v4.1", used)
	}
	for _, mm := range rep.Mounts {
		if mm.Device == m.Device {
			t.Logf("nfstune: %s in client group %s, nconnect=%d", mm.Device, mm.ClientGroup, mm.NConnect)
			if mm.ClientGroup != want {
				t.Errorf("%s: client group %s, want %s (the client nfsfs names)", mm.Device, mm.ClientGroup, want)
			}
			return
		}
	}
	t.Errorf("audit does not list %s", m.Device)
}
