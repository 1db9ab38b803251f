package inventory

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/hostfs"
)

func u64p(n uint64) *uint64 { return &n }

func TestParseXprtInfo(t *testing.T) {
	// xprt_info as Linux 6.1 prints it for a connected transport with one READ waiting.
	in := "last_used=4294939163\ncur_cong=0\ncong_win=256\nmax_num_slots=65536\nmin_num_slots=2\n" +
		"num_reqs=2\nbinding_q_len=0\nsending_q_len=0\npending_q_len=1\nbacklog_q_len=0\n" +
		"main_xprt=1\nsrc_port=800\ntasks_queuelen=1\ndst_port=2049\n"
	var got Transport
	parseXprtInfo([]byte(in), &got)
	want := Transport{DstPort: 2049, Pending: intp(1), Backlog: intp(0), Sending: intp(0), LastUsed: u64p(4294939163)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	var closed Transport
	parseXprtInfo([]byte("<closed>\n"), &closed)
	if closed.Pending != nil || closed.LastUsed != nil {
		t.Errorf("a closed transport's info parsed to %+v, want nothing", closed)
	}
}

func TestParseXprtState(t *testing.T) {
	for in, want := range map[string][]string{
		"state= CONNECTED   BOUND        ": {"CONNECTED", "BOUND"},
		"state=  CONNECTING  BOUND":        {"CONNECTING", "BOUND"},
		"state=CLOSED":                     {"CLOSED"},
	} {
		if diff := cmp.Diff(want, parseXprtState(in)); diff != "" {
			t.Errorf("parseXprtState(%q) (-want +got):\n%s", in, diff)
		}
	}
}

func TestReadTransportsRecorded(t *testing.T) {
	// Recorded from the lab's 6.1 kernel after 10 s of 100% loss with a reader blocked.
	root := hostfs.Root(filepath.Join("testdata", "lab-6.1.0-50-amd64-server-gone"))
	got, warnings := ReadTransports(root)
	if len(warnings) != 0 {
		t.Errorf("warnings: %q", warnings)
	}
	var connecting, closed int
	for _, tr := range got {
		if tr.Has("CONNECTING") && !tr.Has("CONNECTED") {
			connecting++
		}
		if tr.Pending == nil {
			closed++
		}
	}
	if len(got) < 8 || connecting == 0 || closed == 0 {
		t.Errorf("read %d transports, %d connecting, %d without xprt_info; want >= 8, > 0, > 0: %+v", len(got), connecting, closed, got)
	}
	// switch-3 (nconnect=4, the blocked reader's client) holds 2 tasks, switch-1 none.
	for name, want := range map[string]int{"switch-3/xprt-3-tcp": 2, "switch-3/xprt-6-tcp": 2, "switch-1/xprt-2-tcp": 0} {
		i := slices.IndexFunc(got, func(tr Transport) bool { return tr.Name == name })
		if i < 0 || got[i].SwitchQueueLen == nil || *got[i].SwitchQueueLen != want {
			t.Errorf("%s: switch queue_len not %d: %+v", name, want, got)
		}
	}
}

func TestParseSwitchQueueLen(t *testing.T) {
	for in, want := range map[string]*int{
		"num_xprts=4\nnum_active=4\nnum_unique_destaddr=1\nqueue_len=2\n": intp(2),
		"num_xprts=1\nnum_active=1\nqueue_len=0\n":                        intp(0),
		"num_xprts=1\n":    nil,
		"queue_len=-1\n":   nil,
		"queue_len=many\n": nil,
	} {
		if diff := cmp.Diff(want, parseSwitchQueueLen([]byte(in))); diff != "" {
			t.Errorf("parseSwitchQueueLen(%q) (-want +got):\n%s", in, diff)
		}
	}
}

func TestStalls(t *testing.T) {
	conn := []string{"CONNECTED", "BOUND"}
	tr := func(name, addr string, state []string, pending int, last uint64) Transport {
		return Transport{Name: name, DstAddr: addr, State: state, Pending: intp(pending), Backlog: intp(0), Sending: intp(0), LastUsed: u64p(last)}
	}
	before := []Transport{
		tr("switch-3/xprt-3-tcp", "10.0.0.1", conn, 1, 100), // stuck: same last_used later
		tr("switch-3/xprt-4-tcp", "10.0.0.1", conn, 0, 100), // idle: not suspect
		tr("switch-5/xprt-8-tcp", "10.0.0.2", conn, 2, 100), // busy: last_used moves
		tr("switch-6/xprt-9-tcp", "10.0.0.3", conn, 1, 100), // answered in between
		{Name: "switch-7/xprt-10-tcp", DstAddr: "10.0.0.4", State: []string{"CONNECTING", "BOUND"}},
	}
	after := []Transport{
		tr("switch-3/xprt-3-tcp", "10.0.0.1", conn, 1, 100),
		tr("switch-3/xprt-4-tcp", "10.0.0.1", conn, 0, 100),
		tr("switch-5/xprt-8-tcp", "10.0.0.2", conn, 2, 180),
		tr("switch-6/xprt-9-tcp", "10.0.0.3", conn, 0, 150),
		{Name: "switch-7/xprt-10-tcp", DstAddr: "10.0.0.4", State: []string{"CONNECTING", "BOUND"}},
	}
	got := Stalls(before, after, time.Second)
	want := []StalledServer{
		// One stuck transport of two: the idle one is listed, not stuck.
		{Addr: "10.0.0.1", Transports: []string{"switch-3/xprt-3-tcp"}, Waiting: 1, Window: time.Second, Each: []TransportStatus{
			{Name: "switch-3/xprt-3-tcp", Queued: 1, Connected: true, Progressed: boolp(false), Stuck: true},
			{Name: "switch-3/xprt-4-tcp", Queued: 0, Connected: true, Progressed: boolp(false)},
		}},
		{Addr: "10.0.0.4", Transports: []string{"switch-7/xprt-10-tcp"}, Waiting: 0, Window: time.Second, Each: []TransportStatus{
			{Name: "switch-7/xprt-10-tcp", Stuck: true},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := Stalls(nil, after, time.Second); len(got) != 0 {
		t.Errorf("with no first sample: %+v, want none", got)
	}
}

// TestStallsByPort: two EFS file systems behind efs-proxy share 127.0.0.1 and differ by
// port; only the one whose transport is stuck is stalled, and only its mount is reached.
func TestStallsByPort(t *testing.T) {
	conn := []string{"CONNECTED", "BOUND"}
	tr := func(name string, port, pending int, last uint64) Transport {
		return Transport{Name: name, DstAddr: "127.0.0.1", DstPort: port, State: conn, Pending: intp(pending), Backlog: intp(0), Sending: intp(0), LastUsed: u64p(last)}
	}
	before := []Transport{tr("switch-1/xprt-2-tcp", 20049, 3, 100), tr("switch-2/xprt-3-tcp", 20050, 1, 100)}
	after := []Transport{tr("switch-1/xprt-2-tcp", 20049, 3, 100), tr("switch-2/xprt-3-tcp", 20050, 1, 140)}
	got := Stalls(before, after, time.Second)
	// The transport of the other file system, on another port, is not listed.
	want := []StalledServer{{Addr: "127.0.0.1", Port: 20049, Transports: []string{"switch-1/xprt-2-tcp"}, Waiting: 3, Window: time.Second, Each: []TransportStatus{
		{Name: "switch-1/xprt-2-tcp", Queued: 3, Connected: true, Progressed: boolp(false), Stuck: true},
	}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	mount := func(line string) *Mount {
		ms, _ := ParseMountInfo([]byte(line + "\n"))
		return &ms[0]
	}
	efsA := mount("101 22 0:60 / /mnt/a rw - nfs4 127.0.0.1:/ rw,vers=4.1,hard,proto=tcp,port=20049,addr=127.0.0.1")
	efsB := mount("102 22 0:61 / /mnt/b rw - nfs4 127.0.0.1:/ rw,vers=4.1,hard,proto=tcp,port=20050,addr=127.0.0.1")
	lab := mount("103 22 0:62 / /mnt/c rw - nfs4 127.0.0.1:/tmp rw,vers=4.1,hard,proto=tcp,addr=127.0.0.1")
	v3 := mount("104 22 0:63 / /mnt/d rw - nfs 127.0.0.1:/srv rw,vers=3,hard,proto=tcp,addr=127.0.0.1")
	for _, c := range []struct {
		m    *Mount
		s    StalledServer
		want bool
	}{
		{efsA, got[0], true},
		{efsB, got[0], false},
		{lab, got[0], false}, // NFSv4 without port= is on 2049
		{v3, got[0], true},   // NFSv3's port came from rpcbind: unknown
		{lab, StalledServer{Addr: "127.0.0.1", Port: 2049}, true},
		{efsB, StalledServer{Addr: "127.0.0.1"}, true}, // no dst_port (before 6.1): address only
		{efsA, StalledServer{Addr: "10.0.0.1"}, false},
	} {
		if r := c.s.Reaches(c.m); r != c.want {
			t.Errorf("%+v reaches %s (%s) = %v, want %v", c.s, c.m.Device, c.m.Options["port"], r, c.want)
		}
	}
}

// TestStallsRefused is a server that refuses connections (nfsd stopped): between connect
// attempts the transports are neither connected nor connecting and xprt_info is closed;
// only the switch's queue_len shows the tasks waiting.
func TestStallsRefused(t *testing.T) {
	closed := func(name, addr string, queued int, state ...string) Transport {
		return Transport{Name: name, DstAddr: addr, State: state, SwitchQueueLen: intp(queued)}
	}
	conn := func(name, addr string, queued, pending int, last uint64) Transport {
		return Transport{Name: name, DstAddr: addr, State: []string{"CONNECTED", "BOUND"}, SwitchQueueLen: intp(queued),
			Pending: intp(pending), Backlog: intp(0), Sending: intp(0), LastUsed: u64p(last)}
	}
	before := []Transport{
		closed("switch-3/xprt-3-tcp", "10.0.0.1", 2, "BOUND"), // refused: the whole switch closed, 2 tasks
		closed("switch-3/xprt-4-tcp", "10.0.0.1", 2, "BOUND"),
		closed("switch-4/xprt-7-tcp", "10.0.0.2", 0, "BOUND"),   // idle, closed: nothing waits
		conn("switch-5/xprt-8-tcp", "10.0.0.3", 1, 1, 100),      // busy and answered
		closed("switch-5/xprt-9-tcp", "10.0.0.3", 1, "BOUND"),   // closed next to a connected one
		closed("switch-6/xprt-10-tcp", "10.0.0.4", 1, "CLOSED"), // connects before the second look
		closed("switch-7/xprt-11-tcp", "10.0.0.5", 0, "BOUND"),  // a task arrives later
		conn("switch-8/xprt-12-tcp", "10.0.0.6", 3, 1, 100),     // stuck, connected: its own queue
		closed("switch-8/xprt-13-tcp", "10.0.0.6", 3, "CONNECTING", "BOUND"),
	}
	after := []Transport{
		closed("switch-3/xprt-3-tcp", "10.0.0.1", 2, "BOUND"),
		closed("switch-3/xprt-4-tcp", "10.0.0.1", 2, "CONNECTING", "BOUND"),
		closed("switch-4/xprt-7-tcp", "10.0.0.2", 0, "BOUND"),
		conn("switch-5/xprt-8-tcp", "10.0.0.3", 1, 1, 180),
		closed("switch-5/xprt-9-tcp", "10.0.0.3", 1, "BOUND"),
		conn("switch-6/xprt-10-tcp", "10.0.0.4", 1, 0, 150),
		closed("switch-7/xprt-11-tcp", "10.0.0.5", 1, "BOUND"),
		conn("switch-8/xprt-12-tcp", "10.0.0.6", 3, 1, 100),
		closed("switch-8/xprt-13-tcp", "10.0.0.6", 3, "CONNECTING", "BOUND"),
	}
	got := Stalls(before, after, time.Second)
	want := []StalledServer{
		{Addr: "10.0.0.1", Transports: []string{"switch-3/xprt-3-tcp", "switch-3/xprt-4-tcp"}, Waiting: 2, Window: time.Second, Each: []TransportStatus{
			{Name: "switch-3/xprt-3-tcp", Stuck: true},
			{Name: "switch-3/xprt-4-tcp", Stuck: true},
		}},
		// A switch with a connected transport counts that transport's queue, not queue_len.
		{Addr: "10.0.0.6", Transports: []string{"switch-8/xprt-12-tcp", "switch-8/xprt-13-tcp"}, Waiting: 1, Window: time.Second, Each: []TransportStatus{
			{Name: "switch-8/xprt-12-tcp", Queued: 1, Connected: true, Progressed: boolp(false), Stuck: true},
			{Name: "switch-8/xprt-13-tcp", Stuck: true},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestSampleStallsWindow: the window runs from the first sample, so time spent reading the
// inventory after it is not waited again, and a fresh sample waits the whole window.
func TestSampleStallsWindow(t *testing.T) {
	// Recorded with a reader blocked on a dead server: the same files read twice look stuck.
	root := hostfs.Root(filepath.Join("testdata", "lab-6.1.0-50-amd64-server-gone"))
	const window = 300 * time.Millisecond
	for _, tt := range []struct {
		name             string
		age              time.Duration // of the first sample
		minWait, maxWait time.Duration
	}{
		{name: "window already over", age: 2 * window, maxWait: window / 2},
		{name: "fresh first sample", age: 0, minWait: window, maxWait: 10 * window},
	} {
		t.Run(tt.name, func(t *testing.T) {
			first := SampleTransports(root)
			first.At = first.At.Add(-tt.age)
			inv := &Inventory{}
			start := time.Now()
			if err := SampleStalls(context.Background(), root, inv, first, window); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took < tt.minWait || took > tt.maxWait {
				t.Errorf("SampleStalls took %s, want %s to %s", took, tt.minWait, tt.maxWait)
			}
			if len(inv.Stalled) != 1 || inv.Stalled[0].Addr != "127.0.0.1" || inv.Stalled[0].Window != window {
				t.Errorf("stalled = %+v, want 127.0.0.1 over %s", inv.Stalled, window)
			}
		})
	}
}

func FuzzParseXprtInfo(f *testing.F) {
	f.Add("last_used=1\npending_q_len=1\n")
	f.Add("<closed>")
	f.Add("pending_q_len=-3\nlast_used=x")
	f.Fuzz(func(t *testing.T, s string) {
		var tr Transport
		parseXprtInfo([]byte(s), &tr)
		if tr.Pending != nil && *tr.Pending < 0 {
			t.Errorf("negative pending from %q", s)
		}
	})
}
