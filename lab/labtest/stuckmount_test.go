//go:build lab

package labtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/inventory"
)

// stuckMountListen is where TestStuckMountListed's agent serves /metrics.
const stuckMountListen = "127.0.0.1:19110"

// TestStuckMountListed: with 127.0.0.2 unreachable, `mount -t nfs4` of it hangs in
// mount.nfs4, which has no superblock yet. First alone: whether the audit sees the server
// stalled from the mount's own transport is logged. Then with a reader blocked on an
// NFSv3 mount of 127.0.0.2 made before, so that the server is stalled: `nfstune audit -o
// json` lists the mount under mounting[] with its server, export and target, once (the
// helper, not mount(8) waiting for it), and `nfstune agent` exports
// nfstune_server_blocked_mounts{server_addr="127.0.0.2"} 1.
func TestStuckMountListed(t *testing.T) {
	RequireGuest(t)
	held := Mount(t, MountSpec{Server: "127.0.0.2", Version: "3", Options: "hard,nosharecache"})
	if err := os.WriteFile(held.Dir+"/data", make([]byte, 4<<20), 0o644); err != nil {
		t.Fatalf("writing test data: %v", err)
	}
	if out, err := exec.Command("dd", "if="+held.Dir+"/data", "iflag=nocache", "count=0", "status=none").CombinedOutput(); err != nil {
		t.Fatalf("dropping cached pages: %v: %s", err, out)
	}
	data, err := os.Open(held.Dir + "/data")
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()

	AddrGone(t, "127.0.0.2")
	target := MountDir(t)
	t.Cleanup(func() { Umount(t, target) })
	mount := exec.Command("mount", "-t", "nfs4", "-o", "vers=4.2", "127.0.0.2:/tmp", target)
	var mountOut bytes.Buffer
	mount.Stdout, mount.Stderr = &mountOut, &mountOut
	// A process group of its own, to stop mount.nfs4 with it.
	mount.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := mount.Start(); err != nil {
		t.Fatal(err)
	}
	mountStart := time.Now()
	mountDone := make(chan error, 1)
	go func() { mountDone <- mount.Wait() }()
	t.Cleanup(func() {
		ServerBack(t)
		_ = syscall.Kill(-mount.Process.Pid, syscall.SIGKILL)
		select {
		case <-mountDone: //nolint:errcheck // killed above: the exit status says so
		case <-time.After(60 * time.Second):
			t.Errorf("mount %d did not end within 60 s of the server's return", mount.Process.Pid)
		}
	})
	time.Sleep(3 * time.Second)
	select {
	case err := <-mountDone:
		t.Fatalf("mount of the unreachable 127.0.0.2 ended: %v: %s", err, mountOut.Bytes())
	default:
	}

	alone, r := mountingAudit(t)
	t.Logf("mount.nfs4 alone, no request of an established mount waiting: %d stalled server(s) %+v, mounting %+v", len(alone.Stalled), alone.Stalled, alone.Mounting)

	reader := exec.Command("cat")
	reader.Stdin = data
	if err := reader.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ServerBack(t); _ = reader.Process.Kill(); _ = reader.Wait() })
	// Past inventory.SlowMount, so that the mount counts as stuck in whatever state.
	time.Sleep(max(2*time.Second, time.Until(mountStart.Add(inventory.SlowMount+time.Second))))

	rep, r := mountingAudit(t)
	var got []inventory.MountProgram
	for _, p := range rep.Mounting {
		if p.Program == inventory.ProgramMount {
			got = append(got, p)
		}
	}
	t.Logf("with a reader blocked on %s: stalled %+v\nmounting %+v", held.Dir, rep.Stalled, rep.Mounting)
	if len(got) != 1 {
		t.Fatalf("mounts in progress listed: %+v; want the one mount.nfs4 of 127.0.0.2:/tmp on %s\n%s", got, target, r.Stdout)
	}
	if p := got[0]; p.Server != "127.0.0.2" || p.Export != "/tmp" || p.Target != target || p.Comm != "mount.nfs4" || !p.Stuck() {
		t.Errorf("mount in progress %+v; want mount.nfs4 of 127.0.0.2:/tmp on %s, stuck", p, target)
	}
	table := RunNfstune(t, "audit", "--fail-on", "none")
	if !slices.ContainsFunc(strings.Split(string(table.Stdout), "\n"), func(l string) bool {
		f := strings.Fields(l)
		return len(f) > 6 && f[3] == "mount.nfs4" && f[4] == "127.0.0.2" && f[5] == "/tmp" && f[6] == target
	}) {
		t.Errorf("the audit table does not list mount.nfs4 of 127.0.0.2 /tmp on %s:\n%s", target, table.Stdout)
	}
	if _, view, ok := strings.Cut(string(table.Stdout), "\nstalled servers\n"); ok {
		t.Logf("nfstune audit, its stuck-server view:\nstalled servers\n%s", view)
	}

	StartAgent(t, "--listen", stuckMountListen, "--resync", "30s")
	var blocked float64
	deadline := time.Now().Add(30 * time.Second)
	for blocked != 1 && time.Now().Before(deadline) {
		time.Sleep(1500 * time.Millisecond)
		blocked = scrapeSeries(t, "http://"+stuckMountListen+"/metrics", `nfstune_server_blocked_mounts{server_addr="127.0.0.2"}`)
	}
	if blocked != 1 {
		t.Errorf(`nfstune_server_blocked_mounts{server_addr="127.0.0.2"} = %v after 30 s of scrapes, want 1`, blocked)
	}
}

// mountingReport is the part of `nfstune audit -o json` about stuck mounts.
type mountingReport struct {
	Stalled  []inventory.StalledServer `json:"stalled"`
	Mounting []inventory.MountProgram  `json:"mounting"`
}

func mountingAudit(t *testing.T) (mountingReport, Result) {
	t.Helper()
	r := RunNfstune(t, "audit", "-o", "json", "--fail-on", "none")
	if r.Code != 0 {
		t.Fatalf("nfstune audit exited %d\nstderr:\n%s", r.Code, r.Stderr)
	}
	var rep mountingReport
	if err := json.Unmarshal(r.Stdout, &rep); err != nil {
		t.Fatalf("decoding audit JSON: %v\n%s", err, r.Stdout)
	}
	return rep, r
}

// scrapeSeries returns the value of one series at url; -1 when the scrape fails or the
// series is absent.
func scrapeSeries(t *testing.T, url, series string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return -1
}
