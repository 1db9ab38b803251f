package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/tune"
)

// shutdownTree is a host with one NFSv4.2 superblock (0:53) shown at two mount points, one
// of them a pod's volume, on a kernel with the shutdown knob.
func shutdownTree(t *testing.T, release string, knob bool) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"proc/version": "Linux version " + release + " (debian-kernel@lists.debian.org) #1 SMP\n",
		"proc/self/mountinfo": `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
52 22 0:53 / /mnt/data rw,relatime shared:45 - nfs4 10.0.0.7:/export/data rw,vers=4.2,hard,proto=tcp,timeo=600,retrans=2,sec=sys,addr=10.0.0.7
53 22 0:53 / /var/lib/kubelet/pods/7d0c4a6e-5b1f-4d6e-9a43-1f2e3d4c5b6a/volumes/kubernetes.io~nfs/data rw,relatime shared:45 - nfs4 10.0.0.7:/export/data rw,vers=4.2,hard,proto=tcp,timeo=600,retrans=2,sec=sys,addr=10.0.0.7
`,
		"proc/fs/nfsfs/volumes": "NV SERVER   PORT DEV          FSID                              FSC\nv4 0a000007  801 0:53         c10a1819257f4d4d:a0d6372e2f44b4e3 no\n",
	}
	if knob {
		files["sys/fs/nfs/0:53/shutdown"] = "0\n"
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestShutdownExitCodes(t *testing.T) {
	for _, tt := range []struct {
		name     string
		release  string
		knob     bool
		args     []string
		code     int
		contains []string
		down     bool
		already  bool
	}{
		{name: "not NFS", release: "6.12.1", knob: true, args: []string{"--yes", "--force", "/"}, code: ExitError2,
			contains: []string{"not an NFS superblock"}},
		{name: "no knob before 6.6", release: "6.1.0-28-amd64", args: []string{"--yes", "--force", "/mnt/data"}, code: ExitUnsupported,
			contains: []string{"needs Linux 6.6", "umount -f /mnt/data", "umount -l /mnt/data"}},
		{name: "not stalled", release: "6.12.1", knob: true, args: []string{"--yes", "/mnt/data"}, code: ExitRefused,
			contains: []string{"not seen stalled", "--force"}},
		{name: "no terminal without --yes", release: "6.12.1", knob: true, args: []string{"--force", "/mnt/data"}, code: ExitRefused,
			contains: []string{"stdin is not a terminal; add --yes", "mount  /mnt/data", "pod    7d0c4a6e-5b1f-4d6e-9a43-1f2e3d4c5b6a (volume data)"}},
		{name: "dry run", release: "6.12.1", knob: true, args: []string{"--dry-run", "--force", "0:53"}, code: ExitOK,
			contains: []string{"Dry run: nothing written", "cannot undo"}},
		{name: "forced", release: "6.12.1", knob: true, args: []string{"--yes", "--force", "/mnt/data"}, code: ExitOK, down: true,
			contains: []string{"Shut down: wrote 1 to /sys/fs/nfs/0:53/shutdown, read back 1", "Next: umount /mnt/data"}},
		{name: "already shut down", release: "6.12.1", knob: true, args: []string{"/mnt/data"}, code: ExitOK, down: true, already: true,
			contains: []string{"already shut down: /sys/fs/nfs/0:53/shutdown reads 1", "Already shut down: nothing written."}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := shutdownTree(t, tt.release, tt.knob)
			if tt.already {
				if err := os.WriteFile(filepath.Join(root, "sys/fs/nfs/0:53/shutdown"), []byte("1\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, errOut, code := runVerb(t, append([]string{"--root", root, "shutdown"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.code, out, errOut)
			}
			for _, s := range tt.contains {
				if !strings.Contains(out+errOut, s) {
					t.Errorf("output lacks %q; stdout:\n%s\nstderr:\n%s", s, out, errOut)
				}
			}
			b, _ := os.ReadFile(filepath.Join(root, "sys/fs/nfs/0:53/shutdown"))
			if down := string(b) == "1\n"; down != tt.down {
				t.Errorf("attribute = %q, want shut down: %v", b, tt.down)
			}
			_, err := os.Stat(filepath.Join(root, "var/lib/nfstune/journal.json"))
			if journaled := err == nil; journaled != (tt.down && !tt.already) {
				t.Errorf("journal written: %v, want %v", journaled, tt.down && !tt.already)
			}
		})
	}
}

func TestShutdownJSONThenRevert(t *testing.T) {
	root := shutdownTree(t, "7.2.12+deb14-amd64", true)
	out, errOut, code := runVerb(t, "--root", root, "shutdown", "--yes", "--force", "-o", "json", "/mnt/data")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Plan struct {
			Device   string
			Affected []struct{ Kind, Name string }
			Forced   bool
		}
		Result struct {
			ReadBack string `json:"read_back"`
			Journal  string
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rep.Plan.Device != "0:53" || len(rep.Plan.Affected) != 3 || !rep.Plan.Forced || rep.Result.ReadBack != "1" || rep.Result.Journal != "/var/lib/nfstune/journal.json" {
		t.Errorf("report = %+v", rep)
	}
	out, errOut, code = runVerb(t, "--root", root, "revert")
	if code != ExitOK || !strings.Contains(out, "[not reversible] shutdown    /sys/fs/nfs/0:53/shutdown: 10.0.0.7:/export/data (0:53) on /mnt/data") {
		t.Errorf("revert: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = runVerb(t, "--root", root, "revert")
	if code != ExitOK || !strings.Contains(out, "[not reversible] shutdown    /sys/fs/nfs/0:53/shutdown") {
		t.Errorf("second revert: exit %d, want the record kept and shown again\n%s", code, out)
	}
}

func TestShutdownConfirm(t *testing.T) {
	p := &tune.ShutdownPlan{Device: "0:53", Source: "10.0.0.7:/export/data"}
	for answer, ok := range map[string]bool{"y\n": true, "YES\n": true, " yes \n": true, "n\n": false, "\n": false, "": false, "yep\n": false} {
		var errOut bytes.Buffer
		err := confirm(context.Background(), IOStreams{In: strings.NewReader(answer), ErrOut: &errOut}, p)
		if (err == nil) != ok || (err != nil && !errors.Is(err, errNotConfirmed)) {
			t.Errorf("answer %q: err = %v, want confirmed: %v", answer, err, ok)
		}
		if !strings.Contains(errOut.String(), "Shut down 0:53 (10.0.0.7:/export/data) now? This cannot be undone. [y/N]") {
			t.Errorf("prompt = %q", errOut.String())
		}
	}
	// The source comes from mountinfo: an export with terminal escapes must not clear the
	// plan printed above the prompt.
	var errOut bytes.Buffer
	evil := &tune.ShutdownPlan{Device: "0:53", Source: "10.0.0.7:/export\x1b[2J\x1b[H\rdata"}
	_ = confirm(context.Background(), IOStreams{In: strings.NewReader("n\n"), ErrOut: &errOut}, evil)
	if got := errOut.String(); strings.ContainsAny(got, "\x1b\r") || !strings.Contains(got, `(10.0.0.7:/export\x1b[2J\x1b[H\rdata)`) {
		t.Errorf("prompt = %q, want the source escaped", got)
	}
	if isTerminal(strings.NewReader("")) {
		t.Error("a strings.Reader is not a terminal")
	}
}

// TestStallWindowValidated: audit and shutdown refuse a negative --stall-window the same
// way, with exit code 2 and the same message.
func TestStallWindowValidated(t *testing.T) {
	root := shutdownTree(t, "6.12.1", true)
	for _, args := range [][]string{
		{"audit", "--stall-window", "-1s"},
		{"shutdown", "--stall-window", "-1s", "--dry-run", "--force", "0:53"},
	} {
		out, errOut, code := runVerb(t, append([]string{"--root", root}, args...)...)
		if code != ExitError2 || !strings.Contains(errOut, "--stall-window: stall window -1s: want 0 or more") {
			t.Errorf("%s: exit code %d, stderr %q; want 2 and the window refused\n%s", args[0], code, errOut, out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "sys/fs/nfs/0:53/shutdown")); string(b) != "0\n" {
		t.Errorf("attribute = %q after a refused window", b)
	}
}

// runInterrupted runs one command line whose context is cancelled after delay as app.Main
// cancels it on SIGINT, and returns stdout, stderr and the exit code.
func runInterrupted(t *testing.T, delay time.Duration, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	time.AfterFunc(delay, func() { cancel(&Interrupted{Signal: syscall.SIGINT}) })
	var out, errOut bytes.Buffer
	root := NewRoot(IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var exit *ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("err = %v, want an exit code", err)
	}
	errOut.WriteString(err.Error())
	return out.String(), errOut.String(), exit.Code
}

// serverGoneTree is a copy of the 6.12 lab's tree with the server gone, with the shutdown
// attribute of /mnt/lab/v3 (0:65).
func serverGoneTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../inventory/testdata/lab-6.12.107+deb13-amd64-server-gone")); err != nil {
		t.Fatal(err)
	}
	knob := filepath.Join(dir, "sys/fs/nfs/0:65/shutdown")
	if err := os.MkdirAll(filepath.Dir(knob), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(knob, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAuditInterrupted: an audit of a host whose server is gone, interrupted during the
// stall window, exits 130 with no report rather than 0 with a clean one.
func TestAuditInterrupted(t *testing.T) {
	dir := serverGoneTree(t)
	out, errOut, code := runInterrupted(t, 100*time.Millisecond, "--root", dir, "audit", "--stall-window", "60s", "--fail-on", "error")
	if code != ExitInterrupted || out != "" || !strings.Contains(errOut, "interrupted by SIGINT") {
		t.Errorf("exit code %d, want %d and no report; stdout:\n%s\nstderr:\n%s", code, ExitInterrupted, out, errOut)
	}
}

// TestShutdownInterrupted: shutdown --yes --force interrupted during the stall window
// writes nothing, journals nothing and exits 130.
func TestShutdownInterrupted(t *testing.T) {
	dir := serverGoneTree(t)
	out, errOut, code := runInterrupted(t, 100*time.Millisecond, "--root", dir, "shutdown", "--yes", "--force", "--stall-window", "60s", "/mnt/lab/v3")
	if code != ExitInterrupted {
		t.Errorf("exit code %d, want %d; stdout:\n%s\nstderr:\n%s", code, ExitInterrupted, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sys/fs/nfs/0:65/shutdown")); string(b) != "0\n" {
		t.Errorf("attribute = %q, want 0", b)
	}
	if _, err := os.Stat(filepath.Join(dir, tune.JournalPath)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("journal: %v, want none", err)
	}
}
