package tune

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// installedHost is a node after the installer ran with the drop-in: its directories, the
// copies, the rule, the drop-in, the journal and the record.
func installedHost(t *testing.T) (string, NodeInstall) {
	t.Helper()
	host := t.TempDir()
	for _, d := range []string{"etc/udev/rules.d", "opt/nfstune/bin", "etc/nfstune", "var/lib/nfstune", "etc/nfsmount.conf.d", "sbin"} {
		if err := os.MkdirAll(filepath.Join(host, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(host, "sbin/mount.nfs"), []byte(mountNFSDropIns), 0o755); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	exe, pol := filepath.Join(src, "nfstune"), filepath.Join(src, "policy.yaml")
	if err := os.WriteFile(exe, []byte("\x7fELF one version"), 0o755); err != nil {
		t.Fatal(err)
	}
	policyText := "apiVersion: nfstune.io/v1alpha1\nkind: Policy\nrules:\n  - match: {server: filer.example.com}\n    mountOptions: {nconnect: 4, actimeo: 30}\n"
	if err := os.WriteFile(pol, []byte(policyText), 0o644); err != nil {
		t.Fatal(err)
	}
	in := NodeInstall{BinDir: "/opt/nfstune/bin", ConfigDir: "/etc/nfstune", PolicyFile: pol, Executable: exe, NFSMountConf: true}
	if err := InstallNode(context.Background(), hostfs.Root(host), in); err != nil {
		t.Fatal(err)
	}
	return host, in
}

// files lists the regular files and links below host, relative to it.
func files(t *testing.T, host string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(host, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(host, p)
			out = append(out, "/"+rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUninstallNode: after the installer (with an upgrade to a new binary) and the
// uninstall, no file of nfstune's is left on the node, and a file someone else put next to
// them is; a second run does nothing.
func TestUninstallNode(t *testing.T) {
	t.Parallel()
	host, in := installedHost(t)
	// An upgrade: another binary replaces the first.
	if err := os.WriteFile(in.Executable, []byte("\x7fELF the next version"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := InstallNode(context.Background(), hostfs.Root(host), in); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(host, "etc/nfstune/theirs.yaml")
	if err := os.WriteFile(theirs, []byte("x: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := files(t, host)
	for _, p := range []string{"/opt/nfstune/bin/nfstune", "/etc/nfstune/policy.yaml", UdevRulePath, NFSMountDropInPath, JournalPath, InstalledPath} {
		if !slices.Contains(before, p) {
			t.Fatalf("the installer did not write %s: %q", p, before)
		}
	}
	for run := 1; run <= 2; run++ {
		got, err := UninstallNode(hostfs.Root(host), nil)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if run == 1 && len(got.Removed) != 2 {
			t.Errorf("run 1 removed %q, want the binary and the policy", got.Removed)
		}
		if left := files(t, host); !slices.Equal(left, []string{"/etc/nfstune/theirs.yaml", "/sbin/mount.nfs"}) {
			t.Errorf("run %d: files left %q, want only the ones nfstune did not write", run, left)
		}
	}
}

// TestUninstallNodeKeepsChangedCopies: a copy that no longer holds what the installer wrote
// (replaced by hand, or a link) is kept and named, the record stays for it, and the rest is
// undone.
func TestUninstallNodeKeepsChangedCopies(t *testing.T) {
	t.Parallel()
	host, _ := installedHost(t)
	bin := filepath.Join(host, "opt/nfstune/bin/nfstune")
	if err := os.WriteFile(bin, []byte("\x7fELF someone's own build"), 0o755); err != nil {
		t.Fatal(err)
	}
	pol := filepath.Join(host, "etc/nfstune/policy.yaml")
	if err := os.Remove(pol); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", pol); err != nil {
		t.Fatal(err)
	}
	got, err := UninstallNode(hostfs.Root(host), nil)
	if !errors.Is(err, ErrPartial) || !errors.Is(err, ErrChangedSinceInstall) {
		t.Fatalf("err = %v, want a partial uninstall naming the changed binary", err)
	}
	if _, ok := got.Kept["/opt/nfstune/bin/nfstune"]; !ok || len(got.Kept) != 2 {
		t.Errorf("kept %v, want the binary and the policy link", got.Kept)
	}
	if b, err := os.ReadFile(bin); err != nil || string(b) != "\x7fELF someone's own build" {
		t.Errorf("the changed binary: %q, %v", b, err)
	}
	if _, err := os.Lstat(pol); err != nil {
		t.Errorf("the policy link: %v", err)
	}
	for _, p := range []string{UdevRulePath, NFSMountDropInPath} {
		if _, err := os.Stat(filepath.Join(host, p)); !os.IsNotExist(err) {
			t.Errorf("%s after the uninstall: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(host, InstalledPath)); err != nil {
		t.Errorf("the record went with copies left to remove: %v", err)
	}
}

// TestUninstallNodeKeepsCopiesWhenRevertFails: a rule that cannot be reverted may still run
// the binary, so no copy is removed.
func TestUninstallNodeKeepsCopiesWhenRevertFails(t *testing.T) {
	t.Parallel()
	host, _ := installedHost(t)
	rule := filepath.Join(host, UdevRulePath)
	b, err := os.ReadFile(rule)
	if err != nil {
		t.Fatal(err)
	}
	// nfstune's own line edited by hand: revert refuses the file.
	if err := os.WriteFile(rule, append([]byte("# edited\n"), b[:len(b)-2]...), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := UninstallNode(hostfs.Root(host), nil)
	if err == nil {
		t.Fatal("the uninstall succeeded with the rule refused")
	}
	if len(got.Removed) != 0 {
		t.Errorf("removed %q while the rule stays", got.Removed)
	}
	if _, err := os.Stat(filepath.Join(host, "opt/nfstune/bin/nfstune")); err != nil {
		t.Errorf("the binary: %v", err)
	}
}
