package inventory

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// TestReadUdevRulesPrecedence builds a root where /etc overrides a packaged rule by name,
// /run masks another, /lib is the merged-/usr link to usr/lib, and file names from all
// directories interleave in lexical order.
func TestReadUdevRulesPrecedence(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const nfsrahead = `SUBSYSTEM=="bdi", ACTION=="add", PROGRAM="/usr/libexec/nfsrahead %k", ATTR{read_ahead_kb}="%c"` + "\n"
	const fixed = `SUBSYSTEM=="bdi", ACTION=="add", ATTR{read_ahead_kb}="16384"` + "\n"
	write("usr/lib/udev/rules.d/99-nfs.rules", nfsrahead)
	write("usr/lib/udev/rules.d/50-cloud-nfs.rules", fixed)
	write("etc/udev/rules.d/99-nfs.rules", "# local override\n"+fixed)
	const own = `SUBSYSTEM=="bdi", ACTION=="add", KERNEL=="0:*", PROGRAM="/usr/local/bin/nfstune udev-readahead %k", ATTR{read_ahead_kb}="%c"`
	write("etc/udev/rules.d/10-early.rules", own+"\n"+`SUBSYSTEM=="bdi", RUN+="/usr/bin/logger bdi %k"`+"\n")
	write("etc/udev/rules.d/README", fixed)
	if err := os.MkdirAll(filepath.Join(root, "run/udev/rules.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/null", filepath.Join(root, "run/udev/rules.d/50-cloud-nfs.rules")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/lib", filepath.Join(root, "lib")); err != nil {
		t.Fatal(err)
	}

	rules, masked, warnings := readUdevRules(hostfs.Root(root))
	if len(warnings) > 0 {
		t.Errorf("warnings: %q", warnings)
	}
	want := []UdevRule{
		{File: "/etc/udev/rules.d/10-early.rules", Line: 1, Text: own, Program: "/usr/local/bin/nfstune"},
		{File: "/etc/udev/rules.d/99-nfs.rules", Line: 2, Text: `SUBSYSTEM=="bdi", ACTION=="add", ATTR{read_ahead_kb}="16384"`, ReadAheadKB: intp(16384), Hides: "/usr/lib/udev/rules.d/99-nfs.rules"},
	}
	if diff := cmp.Diff(want, rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/usr/lib/udev/rules.d/50-cloud-nfs.rules"}, masked); diff != "" {
		t.Errorf("masked (-want +got):\n%s", diff)
	}
}
