package inventory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// Transport is one RPC transport as /sys/kernel/sunrpc/xprt-switches/switch-N/xprt-M-<proto>/
// shows it (kernel 5.14 and later; net/sunrpc/sysfs.c). Unlike the xprt: lines of
// mountstats, which are cumulative counters, these attributes are the transport's state
// now: whether it is connected and how many requests wait on it.
type Transport struct {
	// Name is "switch-N/xprt-M-tcp".
	Name string `json:"name"`
	// DstAddr is the server address the transport connects to.
	DstAddr string `json:"dst_addr"`
	// DstPort is xprt_info's dst_port (Linux 6.1 and later print it), 0 when unknown.
	// Mounts through a local proxy share the loopback address and differ only by port.
	DstPort int `json:"dst_port,omitempty"`
	// State are the flags of xprt_state: CONNECTED, CONNECTING, BOUND, CLOSING, ...
	State []string `json:"state"`
	// Pending, Backlog and Sending are the requests waiting for a reply, for a slot and to
	// be sent; nil when xprt_info is not readable (it reads "<closed>" while the socket is
	// closed).
	Pending *int `json:"pending,omitempty"`
	Backlog *int `json:"backlog,omitempty"`
	Sending *int `json:"sending,omitempty"`
	// LastUsed is xprt_info's last_used, in jiffies.
	LastUsed *uint64 `json:"last_used,omitempty"`
	// SwitchQueueLen is queue_len of the switch's xprt_switch_info: the RPC tasks bound to
	// any transport of the switch, counted whether or not one is connected; nil when
	// unreadable.
	SwitchQueueLen *int `json:"switch_queue_len,omitempty"`
}

// Has reports whether the transport's state includes flag (e.g. "CONNECTED").
func (t Transport) Has(flag string) bool {
	for _, s := range t.State {
		if s == flag {
			return true
		}
	}
	return false
}

// Waiting is the number of requests queued on the transport (pending + backlog +
// sending), 0 when unknown.
func (t Transport) Waiting() int {
	n := 0
	for _, p := range []*int{t.Pending, t.Backlog, t.Sending} {
		if p != nil {
			n += *p
		}
	}
	return n
}

// noSunrpcSysfs is the warning for a kernel without /sys/kernel/sunrpc (before 5.14): what
// the transports' state would have shown cannot be seen, so it is said, not assumed healthy.
const noSunrpcSysfs = "no /sys/kernel/sunrpc/xprt-switches (Linux 5.14 and later): transport state is not visible, so a server that stops answering is not reported (NFS093); audit --op-stats still reports unanswered requests from mountstats (NFS091)"

// readTransports reads every transport under /sys/kernel/sunrpc/xprt-switches. A kernel
// without that directory (before 5.14) gives none and the noSunrpcSysfs warning.
func readTransports(root hostfs.Root) ([]Transport, []string) {
	base := root.Sys("kernel", "sunrpc", "xprt-switches")
	switches, err := hostfs.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, []string{noSunrpcSysfs}
	}
	if err != nil {
		return nil, []string{fmt.Sprintf("reading sunrpc transports: %v", err)}
	}
	var out []Transport
	var warnings []string
	for _, sw := range switches {
		if !strings.HasPrefix(sw.Name(), "switch-") {
			continue
		}
		xprts, err := hostfs.ReadDir(root.Sys("kernel", "sunrpc", "xprt-switches", sw.Name()))
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("reading sunrpc %s: %v", sw.Name(), err))
			continue
		}
		var queued *int
		if b, err := hostfs.ReadSmall(root.Sys("kernel", "sunrpc", "xprt-switches", sw.Name(), "xprt_switch_info")); err == nil {
			queued = parseSwitchQueueLen(b)
		}
		for _, x := range xprts {
			if !strings.HasPrefix(x.Name(), "xprt-") {
				continue
			}
			dir := root.Sys("kernel", "sunrpc", "xprt-switches", sw.Name(), x.Name())
			t := Transport{Name: sw.Name() + "/" + x.Name(), SwitchQueueLen: queued}
			if s, err := hostfs.ReadString(dir + "/dstaddr"); err == nil {
				t.DstAddr = s
			}
			if s, err := hostfs.ReadString(dir + "/xprt_state"); err == nil {
				t.State = parseXprtState(s)
			}
			if b, err := hostfs.ReadSmall(dir + "/xprt_info"); err == nil {
				parseXprtInfo(b, &t)
			}
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, warnings
}

// parseXprtState parses "state= CONNECTED   BOUND" into its flags.
func parseXprtState(s string) []string {
	s = strings.TrimSpace(strings.TrimPrefix(s, "state="))
	return strings.Fields(s)
}

// parseXprtInfo parses the key=value lines of xprt_info; "<closed>" leaves t unchanged.
// The lines are split in memory (no bufio.Scanner line limit to stop at).
func parseXprtInfo(b []byte, t *Transport) {
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "pending_q_len", "backlog_q_len", "sending_q_len":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				continue
			}
			switch k {
			case "pending_q_len":
				t.Pending = &n
			case "backlog_q_len":
				t.Backlog = &n
			default:
				t.Sending = &n
			}
		case "last_used":
			if n, err := strconv.ParseUint(v, 10, 64); err == nil {
				t.LastUsed = &n
			}
		case "dst_port":
			if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 65535 {
				t.DstPort = n
			}
		}
	}
}

// parseSwitchQueueLen returns queue_len from xprt_switch_info ("num_xprts=4\nnum_active=4\n
// num_unique_destaddr=1\nqueue_len=2\n"), nil when it is missing or malformed.
func parseSwitchQueueLen(b []byte) *int {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "queue_len="); ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				return &n
			}
		}
	}
	return nil
}

// StalledServer is a server address (and port, when the kernel shows it) whose transports
// hold requests that got no reply and saw no activity over a sampling window: the server
// is not answering.
type StalledServer struct {
	Addr string `json:"addr"`
	// Port is the transports' dst_port, 0 when the kernel does not show it. Several file
	// systems behind local proxies share 127.0.0.1 and differ only by port.
	Port int `json:"port,omitempty"`
	// Transports are the names of the stalled transports.
	Transports []string `json:"transports"`
	// Waiting is the number of requests queued on them.
	Waiting int `json:"waiting"`
	// Window is how long the requests were seen waiting without progress.
	Window time.Duration `json:"window_ns"`
	// Each is every transport to the address in the second sample, stuck or not, by
	// name: one stuck connection among nconnect's shows as one stuck of eight.
	Each []TransportStatus `json:"each"`
}

// TransportStatus is one transport to a stalled server over the sampling window.
type TransportStatus struct {
	// Name is "switch-N/xprt-M-tcp".
	Name string `json:"name"`
	// Queued is the requests waiting on it at the end of the window (Transport.Waiting).
	Queued int `json:"queued"`
	// Connected is whether xprt_state shows CONNECTED at the end of the window.
	Connected bool `json:"connected"`
	// Progressed is whether last_used moved during the window: a request was sent or a
	// reply received. Nil when xprt_info was unreadable in either sample.
	Progressed *bool `json:"progressed,omitempty"`
	// Stuck is whether the transport is one of StalledServer.Transports.
	Stuck bool `json:"stuck"`
}

// ReadTransports reads the sunrpc transports under root (see Transport).
func ReadTransports(root hostfs.Root) ([]Transport, []string) { return readTransports(root) }

// switchOf is the switch part of a transport name ("switch-3" of "switch-3/xprt-4-tcp").
func switchOf(name string) string {
	sw, _, _ := strings.Cut(name, "/")
	return sw
}

// suspects returns the transports that may be stuck, by name: requests are queued on a
// connected one; or one is trying to connect without being connected (the kernel connects
// only when a request needs it); or none of its switch's transports is connected while
// RPC tasks wait on the switch. The last is how a server that refuses connections looks:
// between the attempts the transport is neither connected nor connecting and xprt_info
// reads "<closed>", but the switch's queue_len still counts the waiting tasks. A switch
// with a connected transport is left to that transport's own queues, so an idle
// connection closed next to busy ones is not taken for a stall.
func suspects(ts []Transport) map[string]bool {
	connected := connectedSwitches(ts)
	out := map[string]bool{}
	for _, t := range ts {
		switch {
		case t.Waiting() > 0,
			t.Has("CONNECTING") && !t.Has("CONNECTED"),
			!connected[switchOf(t.Name)] && t.SwitchQueueLen != nil && *t.SwitchQueueLen > 0:
			out[t.Name] = true
		}
	}
	return out
}

// connectedSwitches returns the switches with a connected transport.
func connectedSwitches(ts []Transport) map[string]bool {
	out := map[string]bool{}
	for _, t := range ts {
		if t.Has("CONNECTED") {
			out[switchOf(t.Name)] = true
		}
	}
	return out
}

// Stalls compares two samples of the transports taken window apart and returns, per
// server address and port, those that were suspect in both with no activity in between (last_used
// unchanged, when xprt_info shows it): requests sat unanswered for at least the window.
// A healthy server answers in milliseconds and every reply moves last_used, so this does
// not fire on a busy mount. Waiting counts the requests queued on the stalled transports
// and, for a switch with none connected, the tasks its queue_len holds.
func Stalls(before, after []Transport, window time.Duration) []StalledServer {
	prev := make(map[string]Transport, len(before))
	for _, t := range before {
		prev[t.Name] = t
	}
	wasSuspect, isSuspect := suspects(before), suspects(after)
	connected := connectedSwitches(after)
	type dst struct {
		addr string
		port int
	}
	byAddr := map[dst]*StalledServer{}
	switchCounted := map[string]bool{}
	for _, t := range after {
		p, ok := prev[t.Name]
		if !ok || !wasSuspect[t.Name] || !isSuspect[t.Name] || t.DstAddr == "" {
			continue
		}
		if p.LastUsed != nil && t.LastUsed != nil && *p.LastUsed != *t.LastUsed {
			continue
		}
		d := dst{t.DstAddr, t.DstPort}
		s := byAddr[d]
		if s == nil {
			s = &StalledServer{Addr: t.DstAddr, Port: t.DstPort, Window: window}
			byAddr[d] = s
		}
		s.Transports = append(s.Transports, t.Name)
		s.Waiting += t.Waiting()
		if sw := switchOf(t.Name); !connected[sw] && t.SwitchQueueLen != nil && !switchCounted[sw] {
			switchCounted[sw] = true
			s.Waiting += *t.SwitchQueueLen
		}
	}
	out := make([]StalledServer, 0, len(byAddr))
	for _, s := range byAddr {
		stuck := make(map[string]bool, len(s.Transports))
		for _, name := range s.Transports {
			stuck[name] = true
		}
		for _, t := range after {
			// Another port is another server behind the same address (a local proxy); a
			// transport that shows no port (closed, never connected) is counted with its
			// address.
			if t.DstAddr != s.Addr || (s.Port != 0 && t.DstPort != 0 && t.DstPort != s.Port) {
				continue
			}
			st := TransportStatus{Name: t.Name, Queued: t.Waiting(), Connected: t.Has("CONNECTED"), Stuck: stuck[t.Name]}
			if p, ok := prev[t.Name]; ok && p.LastUsed != nil && t.LastUsed != nil {
				moved := *p.LastUsed != *t.LastUsed
				st.Progressed = &moved
			}
			s.Each = append(s.Each, st)
		}
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Addr != out[j].Addr {
			return out[i].Addr < out[j].Addr
		}
		return out[i].Port < out[j].Port
	})
	return out
}

// Reaches reports whether the stalled transports are the ones mount m uses: the same
// server address and, when both are known, the same port. A mount without port= uses
// 2049 for NFSv4 and whatever rpcbind said for NFSv3, so only NFSv4 is compared then.
func (s StalledServer) Reaches(m *Mount) bool {
	if s.Addr != m.serverAddr() {
		return false
	}
	if s.Port == 0 {
		return true
	}
	if p, err := strconv.Atoi(m.Options["port"]); err == nil && p > 0 {
		return p == s.Port
	}
	if strings.HasPrefix(m.Version, "4") {
		return s.Port == nfsPort
	}
	return true
}

// DefaultStallWindow is how long SampleStalls watches queued requests for progress by
// default (nfstune audit --stall-window): about a hundred round trips across regions. A
// server whose transports made no progress at all over it is reported as not answering
// (NFS093).
const DefaultStallWindow = time.Second

// CheckStallWindow is the one check of a stall window a caller was given (nfstune audit
// and shutdown --stall-window, tune.PlanShutdown): 0 or more, 0 meaning no second look.
func CheckStallWindow(window time.Duration) error {
	if window < 0 {
		return fmt.Errorf("stall window %s: want 0 or more", window)
	}
	return nil
}

// TransportSample is the sunrpc transports as read at one moment.
type TransportSample struct {
	Transports []Transport
	At         time.Time
}

// SampleTransports reads the transports now (see Transport): the first sample of a stall
// window. Taken before Read, it lets the window run while Read reads the other sources.
// What cannot be read is left out without a warning: Read reads the same files and
// reports it.
func SampleTransports(root hostfs.Root) TransportSample {
	ts, _ := readTransports(root)
	return TransportSample{Transports: ts, At: time.Now()}
}

// SampleStalls fills inv.Stalled: when a transport in first looks stuck, it waits until
// window has passed since first was taken (or until ctx ends), reads the transports again
// and keeps what stayed stuck. Time spent since first, reading the inventory, counts
// towards the window, so an audit takes about the window, not the window on top of the
// read. A host with no queued requests pays nothing. Only sysfs is read.
//
// When ctx ends first, it returns ctx's error and leaves inv.Stalled as it was: an
// interrupted window says nothing about the server, and must not read as "none stalled".
func SampleStalls(ctx context.Context, root hostfs.Root, inv *Inventory, first TransportSample, window time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if window <= 0 || len(suspects(first.Transports)) == 0 {
		return nil
	}
	if wait := time.Until(first.At.Add(window)); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	after, w := readTransports(root)
	inv.Warnings = append(inv.Warnings, w...)
	inv.Stalled = Stalls(first.Transports, after, window)
	return nil
}
