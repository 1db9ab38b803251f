package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Files the user names (a policy, chart values, price lists) and files under --root (the
// journal, mountinfo) are read only when they are regular files, and at most
// hostfs.MaxConfigSize bytes for the user's: a FIFO must not block the command forever,
// and /dev/zero or a huge file must not be read to the end.
func TestUserFilesRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.yaml")
	if err := os.WriteFile(huge, []byte(strings.Repeat("# padding\n", 30<<10)), 0o600); err != nil {
		t.Fatal(err)
	}
	fifoRoot := func(rel string) string {
		root := t.TempDir()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		return root
	}
	journalRoot, mountinfoRoot := fifoRoot("var/lib/nfstune/journal.json"), fifoRoot("proc/self/mountinfo")
	type command struct {
		name string
		args func(file string) []string
	}
	userCommands := []command{
		{"options --config", func(f string) []string { return []string{"options", "--config", f} }},
		{"plan --prices", func(f string) []string {
			return []string{"plan", "--throughput", "1GiB/s", "--capacity", "1TiB", "--prices", f}
		}},
		{"k8s render --config", func(f string) []string { return []string{"k8s", "render", "--config", f} }},
		{"k8s install-node --policy", func(f string) []string {
			return []string{"k8s", "install-node", "--root", t.TempDir(), "--policy", f}
		}},
	}
	type run struct {
		name string
		args []string
		want string
	}
	var runs []run
	for _, c := range userCommands {
		runs = append(runs,
			run{c.name + " FIFO", c.args(fifo), "not a regular file"},
			run{c.name + " /dev/zero", c.args("/dev/zero"), "not a regular file"},
			run{c.name + " huge", c.args(huge), "larger than"},
		)
	}
	runs = append(runs,
		run{"revert with a FIFO journal", []string{"--root", journalRoot, "revert"}, "not a regular file"},
		run{"audit with a FIFO mountinfo", []string{"--root", mountinfoRoot, "audit"}, "not a regular file"},
	)
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			done := make(chan struct{})
			var stderr string
			var code int
			go func() {
				defer close(done)
				_, stderr, code = runVerb(t, r.args...)
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("%v still running after 20 s", r.args)
			}
			if code != ExitError2 || !strings.Contains(stderr, r.want) {
				t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", r.args, code, stderr, ExitError2, r.want)
			}
		})
	}
}
