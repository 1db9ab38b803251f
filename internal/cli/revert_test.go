package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// editTreeFile replaces old in the file at rel below dir with new; old must be there.
func editTreeFile(t *testing.T, dir, rel, old, new string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s does not hold %q:\n%s", rel, old, b)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The line apply's note asks for, added to fstab after apply, stays through revert.
const projectsLine = "nfsacct01.file.core.windows.net:/nfsacct01/share1 /srv/projects nfs4 _netdev,hard 0 0\n"

func TestRevertKeepsAddedFstabLine(t *testing.T) {
	t.Parallel()
	dir := copyTree(t)
	before := treeSnapshot(t, dir)
	if out, err := runTuneCLI(t, "apply", "--root", dir, "--udev-program", "/usr/local/bin/nfstune", "--fstab"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	editTreeFile(t, dir, "etc/fstab", "10.0.0.6:/srv/tools", projectsLine+"10.0.0.6:/srv/tools")

	out, errOut, code := runVerb(t, "--root", dir, "revert")
	if code != ExitOK || !strings.Contains(out, "[done] fstab       /etc/fstab: nfstune's lines taken out; lines changed since apply, kept: 1") {
		t.Errorf("revert: exit %d\n%s%s", code, out, errOut)
	}
	want := before
	fstab := filepath.Join(dir, "etc/fstab")
	want[fstab] = strings.Replace(want[fstab], "10.0.0.6:/srv/tools", projectsLine+"10.0.0.6:/srv/tools", 1)
	if diff := cmp.Diff(want, treeSnapshot(t, dir)); diff != "" {
		t.Errorf("after revert (-want +got):\n%s", diff)
	}
}

// A line of apply's edited since: revert names the file, leaves it as it is, reverts the
// rest and exits 1; --restore-original then puts the file back as it was before apply.
func TestRevertRefusesEditedLine(t *testing.T) {
	t.Parallel()
	dir := copyTree(t)
	before := treeSnapshot(t, dir)
	if out, err := runTuneCLI(t, "apply", "--root", dir, "--udev-program", "/usr/local/bin/nfstune", "--fstab"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	editTreeFile(t, dir, "etc/fstab", "actimeo=30,noresvport 0 0", "actimeo=30,noresvport,noatime 0 0")
	edited := treeSnapshot(t, dir)[filepath.Join(dir, "etc/fstab")]

	out, errOut, code := runVerb(t, "--root", dir, "revert")
	if code != ExitIssues {
		t.Errorf("revert: exit %d, want %d\n%s%s", code, ExitIssues, out, errOut)
	}
	for _, want := range []string{
		"[refused] fstab       /etc/fstab: refused, left as it is",
		"error: /etc/fstab left as it is: cannot separate nfstune's change from later edits: line 3 of the file as apply wrote it",
		"nfstune revert --restore-original /etc/fstab",
		"[done] readahead   /sys/class/bdi/0:53/read_ahead_kb: restored to 128",
		"[done] udev-rule   /etc/udev/rules.d/99-zz-nfstune-readahead.rules: removed (apply created it)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("revert output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "1 items could not be restored or were refused") {
		t.Errorf("stderr: %q", errOut)
	}
	after := treeSnapshot(t, dir)
	for p, v := range before {
		switch {
		case p == filepath.Join(dir, "etc/fstab"):
			if after[p] != edited {
				t.Errorf("the refused fstab was changed:\n%s", after[p])
			}
		case after[p] != v:
			t.Errorf("%s not reverted: %q, want %q", p, after[p], v)
		}
	}

	out, errOut, code = runVerb(t, "--root", dir, "revert", "--restore-original", "/etc/fstab")
	if code != ExitOK || !strings.Contains(out, "[done] fstab       /etc/fstab: restored") {
		t.Fatalf("revert --restore-original: exit %d\n%s%s", code, out, errOut)
	}
	if diff := cmp.Diff(before, treeSnapshot(t, dir)); diff != "" {
		t.Errorf("after revert --restore-original (-before +after):\n%s", diff)
	}
}
