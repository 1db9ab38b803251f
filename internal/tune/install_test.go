package tune

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// TestInstallNode installs a given binary and policy twice: the second run changes nothing.
func TestInstallNode(t *testing.T) {
	t.Parallel()
	host := t.TempDir()
	for _, d := range []string{"etc/udev/rules.d", "opt/nfstune/bin", "etc/nfstune", "var/lib/nfstune"} {
		if err := os.MkdirAll(filepath.Join(host, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := t.TempDir()
	exe, pol := filepath.Join(src, "nfstune"), filepath.Join(src, "policy.yaml")
	if err := os.WriteFile(exe, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pol, []byte("apiVersion: nfstune.io/v1alpha1\nkind: Policy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := NodeInstall{BinDir: "/opt/nfstune/bin", ConfigDir: "/etc/nfstune", PolicyFile: pol, Executable: exe}
	for run := 1; run <= 2; run++ {
		if err := InstallNode(context.Background(), hostfs.Root(host), in); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(host, "opt/nfstune/bin/nfstune")); err != nil || string(b) != "\x7fELF not really" {
		t.Errorf("installed binary = %q, %v", b, err)
	}
	rule, err := os.ReadFile(filepath.Join(host, UdevRulePath))
	if err != nil {
		t.Fatal(err)
	}
	if want := `PROGRAM="/opt/nfstune/bin/nfstune udev-readahead --config /etc/nfstune/policy.yaml %k"`; !strings.Contains(string(rule), want) {
		t.Errorf("rule lacks %s:\n%s", want, rule)
	}
	j, err := loadJournal(hostfs.Root(host))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(j.Entries); n == 0 || j.Entries[n-1].Path != UdevRulePath {
		t.Errorf("journal after two runs = %+v; want the rule, journaled once", j.Entries)
	}
	for _, e := range j.Entries[:max(len(j.Entries)-1, 0)] {
		if e.Path == UdevRulePath {
			t.Errorf("the rule is journaled twice: %+v", j.Entries)
		}
	}

	bad := in
	bad.ConfigDir = "/etc/with space"
	if err := InstallNode(context.Background(), hostfs.Root(host), bad); err == nil || !strings.Contains(err.Error(), "--config-dir") {
		t.Errorf("config dir with a space: err = %v", err)
	}
}

// TestInstallNodeNFSMountConf: with NFSMountConf the installer also writes the drop-in for
// the servers the policy names, in the same journal, so that revert removes both.
func TestInstallNodeNFSMountConf(t *testing.T) {
	t.Parallel()
	host, _ := installedHost(t)
	b, err := os.ReadFile(filepath.Join(host, NFSMountDropInPath))
	if err != nil || !strings.Contains(string(b), "[ Server \"filer.example.com\" ]\n# for rule 1\nproto=tcp\nnconnect=4\nactimeo=30\n") {
		t.Fatalf("drop-in: %v\n%s", err, b)
	}
	if _, err := Revert(hostfs.Root(host)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{NFSMountDropInPath, UdevRulePath} {
		if _, err := os.Stat(filepath.Join(host, p)); !os.IsNotExist(err) {
			t.Errorf("%s after revert: %v", p, err)
		}
	}
}

// TestReplaceIfChangedStreams: comparing a large installed file with the new content reads it
// in chunks, not whole (a second copy of the binary took the installer's init container past
// its 64 MiB memory limit), and still tells equal from different content.
func TestReplaceIfChangedStreams(t *testing.T) {
	host := t.TempDir()
	root := hostfs.Root(host)
	data := bytes.Repeat([]byte("nfstune binary "), 16<<20/15) // 16 MiB
	if changed, err := replaceIfChanged(root, "/bin-file", data, 0o755); err != nil || !changed {
		t.Fatalf("first write: changed %v, %v", changed, err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	changed, err := replaceIfChanged(root, "/bin-file", data, 0o755)
	runtime.ReadMemStats(&after)
	if err != nil || changed {
		t.Fatalf("same content: changed %v, %v", changed, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("comparing a 16 MiB file allocated %d bytes, want under 1 MiB", alloc)
	}
	other := bytes.Clone(data)
	other[len(other)-1] = '!'
	if changed, err := replaceIfChanged(root, "/bin-file", other, 0o755); err != nil || !changed {
		t.Fatalf("last byte different: changed %v, %v", changed, err)
	}
	if changed, err := replaceIfChanged(root, "/bin-file", other[:len(other)-1], 0o755); err != nil || !changed {
		t.Fatalf("one byte shorter: changed %v, %v", changed, err)
	}
}
