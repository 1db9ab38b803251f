package agent

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/metrics"
	"github.com/nfstune/nfstune/internal/policy"
)

// TestScrapeStuckTransport: one of the four nconnect transports to 10.0.0.5 holds a
// request and does not move between two scrapes. The second scrape counts one stuck
// transport of four for that server, raises NFS093 on its mounts, and counts the process
// whose working directory is on /mnt/scratch; a scrape less than the stall window after
// the previous one keeps the result instead of comparing samples taken too close.
func TestScrapeStuckTransport(t *testing.T) {
	t.Parallel()
	root := copyTree(t, "testdata/root")
	info := root.Sys("kernel", "sunrpc", "xprt-switches", "switch-0", "xprt-2-tcp", "xprt_info")
	b, err := os.ReadFile(info)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(info, []byte(strings.Replace(string(b), "pending_q_len=0", "pending_q_len=1", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// A process of a pod, blocked with its working directory on 0:53.
	mountinfo, err := os.ReadFile(root.Proc("1", "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	const uid = "8f3d2c1a-5b6e-4f70-9a81-2b3c4d5e6f70"
	for _, d := range []string{"4242/ns", "4242/fdinfo", "4242/task/4242"} {
		if err := os.MkdirAll(root.Proc(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{
		"4242/stat":           "4242 (ls) D 1 4242 4242 0 -1\n",
		"4242/task/4242/stat": "4242 (ls) D 1 4242 4242 0 -1\n",
		"4242/mountinfo":      string(mountinfo),
		"4242/cgroup":         "0::/kubepods/besteffort/pod" + uid + "\n",
	} {
		if err := os.WriteFile(root.Proc(name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"4242/ns/mnt": "mnt:[4026531841]", "4242/root": "/", "4242/cwd": "/mnt/scratch/logs"} {
		if err := os.Symlink(target, root.Proc(name)); err != nil {
			t.Fatal(err)
		}
	}

	a, err := New(Config{
		Root: root, PID: 1,
		Read: func(context.Context) (*inventory.Inventory, error) {
			return inventory.Read(root, inventory.ReadOptions{PID: 1})
		},
		Load:   auditedPolicy(policy.ModeObserve),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.loadPolicy(); err != nil {
		t.Fatal(err)
	}
	// No scrape timeout to speak of: a read slower than the default 800 ms on a busy machine
	// would serve the previous scrape's result, which this test tells apart.
	h, err := a.Handler(HandlerOptions{Tier: metrics.TierDefault, ScrapeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	scrape := func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	const stuck = `nfstune_server_stuck_transports{server_addr="10.0.0.5"} 1`
	if body := scrape(); strings.Contains(body, stuck) || !strings.Contains(body, `nfstune_server_stuck_transports{server_addr="10.0.0.5"} 0`) {
		t.Errorf("first scrape, nothing to compare with, reports a stuck transport or none at all:\n%s", grep(body, "stuck"))
	}
	// Too soon: the previous sample stands.
	if body := scrape(); strings.Contains(body, stuck) {
		t.Errorf("a scrape right after the first compared samples taken too close:\n%s", grep(body, "stuck"))
	}
	a.mu.Lock()
	a.transports.At = a.transports.At.Add(-2 * inventory.DefaultStallWindow)
	a.mu.Unlock()
	body := scrape()
	for _, line := range []string{
		stuck,
		`nfstune_server_stuck_transports{server_addr="10.0.0.6"} 0`,
		`nfstune_server_transports{server_addr="10.0.0.5"} 4`,
		`nfstune_mount_blocked_processes{backend="generic",device="0:53",export="/export/scratch",mountpoint="/mnt/scratch",server="10.0.0.5",version="4.2"} 1`,
		`nfstune_mount_blocked_processes{backend="generic",device="0:52",export="/export/data",mountpoint="/mnt/data",server="10.0.0.5",version="4.2"} 0`,
		`nfstune_mount_findings{backend="generic",device="0:53",export="/export/scratch",mountpoint="/mnt/scratch",rule="NFS093",server="10.0.0.5",version="4.2",severity="error"} 1`,
	} {
		if !strings.Contains(body, line+"\n") && !containsSeries(body, line) {
			t.Errorf("/metrics lacks %s:\n%s", line, grep(body, "stuck|blocked|NFS093"))
		}
	}
	if strings.Contains(body, `nfstune_mount_blocked_processes{backend="generic",device="0:54"`) {
		t.Error("blocked processes exported for 0:54, whose server 10.0.0.6 answers")
	}
	// The next comparison, with the request answered, clears it.
	if err := os.WriteFile(info, b, 0o644); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.transports.At = time.Now().Add(-2 * inventory.DefaultStallWindow)
	a.mu.Unlock()
	if body := scrape(); strings.Contains(body, stuck) || strings.Contains(body, "nfstune_mount_blocked_processes{") {
		t.Errorf("the stall did not clear:\n%s", grep(body, "stuck|blocked"))
	}
}

// containsSeries reports whether the exposition has a series with the name, labels (in
// any order) and value of line.
func containsSeries(body, line string) bool {
	name, rest, _ := strings.Cut(line, "{")
	labels, value, _ := strings.Cut(rest, "} ")
	want := strings.Split(labels, ",")
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, name+"{") || !strings.HasSuffix(l, "} "+value) {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// grep returns the lines of body containing any of the |-separated words.
func grep(body, words string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		for _, w := range strings.Split(words, "|") {
			if strings.Contains(l, w) && !strings.HasPrefix(l, "#") {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
