// Command abuse measures what clients on the pod network can do to a running nfstune agent
// (perf/scrape/abuse.sh): many idle keep-alive connections (the agent's RSS), clients that
// request /metrics and never read (does a real scrape still get 200?), and one client that
// scrapes in a loop (the agent's CPU). It reads the agent's RSS and CPU time from
// /proc/<pid>.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	addr := flag.String("addr", "", "the agent's host:port")
	pid := flag.Int("pid", 0, "the agent's process ID")
	idle := flag.Int("idle", 5000, "idle keep-alive connections")
	stalled := flag.Int("stalled", 2, "clients that request /metrics and never read")
	loop := flag.Duration("loop", 20*time.Second, "how long one client scrapes in a loop")
	flag.Parse()
	if *addr == "" || *pid == 0 {
		fmt.Fprintln(os.Stderr, "usage: abuse -addr host:port -pid PID")
		os.Exit(2)
	}
	a := agent{addr: *addr, pid: *pid}
	a.idleConnections(*idle)
	a.stalledScrapes(*stalled)
	a.scrapeLoop(*loop)
}

type agent struct {
	addr string
	pid  int
}

// idleConnections opens n connections that each send one GET /healthz and then stay open, and reports the agent's RSS before, its largest sample over 15 s,
// and how many connections the agent still held open at the end.
func (a agent) idleConnections(n int) {
	before := a.rssKiB()
	var conns []net.Conn
	opened := 0
	for range n {
		c, err := net.DialTimeout("tcp", a.addr, 2*time.Second)
		if err != nil {
			break
		}
		conns = append(conns, c)
		opened++
		// The answer is left unread in the socket: the agent has written it, and the
		// connection is idle on its side.
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n")
	}
	peak := before
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		peak = max(peak, a.rssKiB())
	}
	open := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := io.Copy(io.Discard, c); isTimeout(err) {
			open++ // the agent has not closed it
		}
		c.Close()
	}
	fmt.Printf("idle: %d keep-alive connections opened (of %d): RSS %.1f MiB before, at most %.1f MiB; %d still open after 15 s\n",
		opened, n, float64(before)/1024, float64(peak)/1024, open)
}

// stalledScrapes starts n clients that request /metrics and never read, each from its own
// loopback address (127.0.0.3, .4, ...: other pods), then scrapes as Prometheus would,
// from 127.0.0.2, at once and every 2 s for 20 s, and reports the answers.
func (a agent) stalledScrapes(n int) {
	var conns []net.Conn
	for i := range n {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(3+i))}}
		c, err := d.Dial("tcp", a.addr)
		if err != nil {
			fmt.Println("stalled: dial:", err)
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: agent\r\n\r\n")
		conns = append(conns, c)
	}
	time.Sleep(time.Second)
	codes := map[string]int{}
	var order []string
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Second) {
		code := a.scrapeFrom(net.IPv4(127, 0, 0, 2))
		if codes[code] == 0 {
			order = append(order, code)
		}
		codes[code]++
	}
	var parts []string
	for _, c := range order {
		parts = append(parts, fmt.Sprintf("%d x %s", codes[c], c))
	}
	fmt.Printf("stalled: %d clients that never read /metrics; real scrapes every 2 s for 20 s: %s\n", n, strings.Join(parts, ", "))
}

// scrapeLoop scrapes /metrics back to back for d and reports the agent's CPU use.
func (a agent) scrapeLoop(d time.Duration) {
	time.Sleep(2 * time.Second)
	c0, t0 := a.cpuTicks(), time.Now()
	scrapes := 0
	for time.Since(t0) < d {
		if a.scrape() == "200" {
			scrapes++
		}
	}
	cpu := float64(a.cpuTicks()-c0) / 100 / time.Since(t0).Seconds()
	fmt.Printf("loop: one client scraping back to back for %v: %d scrapes, agent CPU %.0f %% of a core\n", d, scrapes, cpu*100)
}

func (a agent) scrape() string { return a.scrapeFrom(nil) }

// scrapeFrom scrapes /metrics from the local address ip (nil: any).
func (a agent) scrapeFrom(ip net.IP) string {
	d := net.Dialer{}
	if ip != nil {
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	cl := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	resp, err := cl.Get("http://" + a.addr + "/metrics")
	if err != nil {
		return "error"
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return "cut"
	}
	return strconv.Itoa(resp.StatusCode)
}

func (a agent) rssKiB() int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}

// cpuTicks is utime+stime of /proc/<pid>/stat, in clock ticks (100 per second).
func (a agent) cpuTicks() int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", a.pid))
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
	u, _ := strconv.Atoi(f[11])
	k, _ := strconv.Atoi(f[12])
	return u + k
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
