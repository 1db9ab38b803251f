package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestK8sInstallNode runs the installer's init container against a host laid out as the
// installer DaemonSet mounts it, twice: the second run must change nothing.
func TestK8sInstallNode(t *testing.T) {
	t.Parallel()
	host := t.TempDir()
	if err := os.MkdirAll(filepath.Join(host, "etc/udev/rules.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"opt/nfstune/bin", "etc/nfstune", "var/lib/nfstune"} { // DirectoryOrCreate
		if err := os.MkdirAll(filepath.Join(host, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	polText := "apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults:\n  workload: sequential-read\n"
	if err := os.WriteFile(pol, []byte(polText), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"k8s", "install-node", "--root", host, "--policy", pol}
	for run := 1; run <= 2; run++ {
		_, stderr, err := runK8sCLI(t, "", args...)
		if err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, stderr)
		}
		if run == 2 && (strings.Contains(stderr, "changed=true") || !strings.Contains(stderr, "udev rule up to date")) {
			t.Errorf("second run changed something:\n%s", stderr)
		}
	}
	rule, err := os.ReadFile(filepath.Join(host, "etc/udev/rules.d/99-zz-nfstune-readahead.rules"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `PROGRAM="/opt/nfstune/bin/nfstune udev-readahead --config /etc/nfstune/policy.yaml %k"`; !strings.Contains(string(rule), want) {
		t.Errorf("rule lacks %s:\n%s", want, rule)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.ReadFile(exe)
	bin := filepath.Join(host, "opt/nfstune/bin/nfstune")
	got, err := os.ReadFile(bin)
	if err != nil || !bytes.Equal(got, self) {
		t.Errorf("installed binary differs from this executable (%v)", err)
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("binary mode: %v %v", fi, err)
	}
	if got, _ := os.ReadFile(filepath.Join(host, "etc/nfstune/policy.yaml")); string(got) != polText {
		t.Errorf("installed policy = %q", got)
	}
	if _, err := os.Stat(filepath.Join(host, "var/lib/nfstune/journal.json")); err != nil {
		t.Errorf("no journal for revert: %v", err)
	}

	// The chart's revert mode: nothing of the installer's stays, the directories kubelet
	// made for the volumes do (empty); a second run does nothing.
	for run := 1; run <= 2; run++ {
		if _, stderr, err := runK8sCLI(t, "", "k8s", "revert-node", "--root", host); err != nil {
			t.Fatalf("revert-node run %d: %v\n%s", run, err, stderr)
		}
	}
	for _, d := range []string{"opt/nfstune/bin", "etc/nfstune", "etc/udev/rules.d"} {
		if entries, err := os.ReadDir(filepath.Join(host, d)); err != nil || len(entries) != 0 {
			t.Errorf("%s after revert-node: %v, %v", d, entries, err)
		}
	}
	if _, err := os.Stat(filepath.Join(host, "var/lib/nfstune")); !os.IsNotExist(err) {
		t.Errorf("the emptied state directory stays: %v", err)
	}
	// A binary changed by hand is kept: exit 1.
	if _, stderr, err := runK8sCLI(t, "", args...); err != nil {
		t.Fatalf("install again: %v\n%s", err, stderr)
	}
	if err := os.WriteFile(bin, []byte("someone's own"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runK8sCLI(t, "", "k8s", "revert-node", "--root", host)
	if code := exitCode(err); code != ExitIssues || !strings.Contains(stderr+fmt.Sprint(err), "/opt/nfstune/bin/nfstune") {
		t.Errorf("revert-node with a changed binary: exit %d, %v\n%s", code, err, stderr)
	}
}

func TestK8sInstallNodeRejects(t *testing.T) {
	t.Parallel()
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte("kind: Nonsense\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--bin-dir", "relative"},
		{"--bin-dir", "/"},
		{"--config-dir", "/etc/with space"},
		{"--policy", pol}, // invalid policy
	} {
		_, _, err := runK8sCLI(t, "", append([]string{"k8s", "install-node", "--root", t.TempDir()}, args...)...)
		if err == nil {
			t.Errorf("install-node %v succeeded", args)
		}
	}
}

// TestK8sInstallNodeRefusesSymlinks: a bin or config directory that is a link on the host
// would put the program udev runs somewhere else; install-node refuses and writes nothing.
func TestK8sInstallNodeRefusesSymlinks(t *testing.T) {
	t.Parallel()
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte("apiVersion: nfstune.io/v1alpha1\nkind: Policy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, linked := range []string{"opt/nfstune/bin", "etc/nfstune"} {
		host, elsewhere := t.TempDir(), t.TempDir()
		for _, d := range []string{"opt/nfstune/bin", "etc/nfstune", "etc/udev/rules.d"} {
			if d == linked {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(host, d)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(elsewhere, filepath.Join(host, d)); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.MkdirAll(filepath.Join(host, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		_, _, err := runK8sCLI(t, "", "k8s", "install-node", "--root", host, "--policy", pol)
		if err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("%s linked: err = %v, want a refusal naming the link", linked, err)
		}
		if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
			t.Errorf("%s linked: wrote %v through the link", linked, entries)
		}
		if entries, _ := os.ReadDir(filepath.Join(host, "opt/nfstune/bin")); linked != "opt/nfstune/bin" && len(entries) != 0 {
			t.Errorf("%s linked: installed %v before refusing", linked, entries)
		}
		if _, err := os.Stat(filepath.Join(host, "etc/udev/rules.d/99-zz-nfstune-readahead.rules")); err == nil {
			t.Errorf("%s linked: the udev rule was written anyway", linked)
		}
	}
}
