package inventory

import (
	"path/filepath"
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
	want := Transport{Pending: intp(1), Backlog: intp(0), Sending: intp(0), LastUsed: u64p(4294939163)}
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
		{Addr: "10.0.0.1", Transports: []string{"switch-3/xprt-3-tcp"}, Waiting: 1, Window: time.Second},
		{Addr: "10.0.0.4", Transports: []string{"switch-7/xprt-10-tcp"}, Waiting: 0, Window: time.Second},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := Stalls(nil, after, time.Second); len(got) != 0 {
		t.Errorf("with no first sample: %+v, want none", got)
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
