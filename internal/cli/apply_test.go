package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/tune"
)

func runTuneCLI(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRoot(IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	root.SetArgs(args)
	err = root.ExecuteContext(context.Background())
	return out.String(), err
}

// copyTree copies the inventory's "mixed" fixture host (real kernel formats) into a temp dir.
func copyTree(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(filepath.Join("..", "inventory", "testdata", "mixed"))); err != nil {
		t.Fatal(err)
	}
	return dst
}

func treeSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			out[p+"/"] = ""
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestApplyRevertCommands(t *testing.T) {
	t.Parallel()
	dir := copyTree(t)
	before := treeSnapshot(t, dir)
	common := []string{"--root", dir, "--udev-program", "/usr/local/bin/nfstune"}

	out, err := runTuneCLI(t, append([]string{"apply", "--dry-run"}, common...)...)
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	for _, want := range []string{
		"Plan (dry run, nothing changed)",
		"readahead /sys/class/bdi/0:53/read_ahead_kb: 128 -> ",
		"Read-ahead applies to files opened after the change",
		`PROGRAM="/usr/local/bin/nfstune udev-readahead %k"`,
		`unmount together`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry-run output lacks %q:\n%s", want, out)
		}
	}
	if diff := cmp.Diff(before, treeSnapshot(t, dir)); diff != "" {
		t.Fatalf("dry run changed the host:\n%s", diff)
	}

	out, err = runTuneCLI(t, append([]string{"apply", "-o", "json"}, common...)...)
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	var rep struct {
		Plan   tune.Plan   `json:"plan"`
		Result tune.Result `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("apply -o json: %v\n%s", err, out)
	}
	if len(rep.Plan.Actions) == 0 || len(rep.Result.Items) != len(rep.Plan.Actions) || rep.Result.Failed() != 0 {
		t.Fatalf("apply result = %+v", rep.Result)
	}
	for _, it := range rep.Result.Items {
		if it.Action.Kind == tune.KindReadAhead && it.Value != it.Action.New {
			t.Errorf("%s read back %q, want %q", it.Action.Path, it.Value, it.Action.New)
		}
	}

	out, err = runTuneCLI(t, append([]string{"apply"}, common...)...)
	if err != nil || !strings.Contains(out, "Nothing to change") {
		t.Errorf("second apply: %v\n%s", err, out)
	}

	out, err = runTuneCLI(t, "revert", "--root", dir)
	if err != nil {
		t.Fatalf("revert: %v\n%s", err, out)
	}
	if diff := cmp.Diff(before, treeSnapshot(t, dir)); diff != "" {
		t.Errorf("revert did not restore the host (-before +after):\n%s", diff)
	}
	out, err = runTuneCLI(t, "revert", "--root", dir)
	if err != nil || !strings.Contains(out, "Nothing to revert") {
		t.Errorf("second revert: %v\n%s", err, out)
	}
}

func TestApplyPartialExitCode(t *testing.T) {
	t.Parallel()
	dir := copyTree(t)
	// The attribute is a symlink out of /sys: readable for the plan, but apply opens bdi
	// paths inside /sys only, so this one item fails and the others go ahead.
	outside := filepath.Join(t.TempDir(), "read_ahead_kb")
	if err := os.WriteFile(outside, []byte("128\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	attr := filepath.Join(dir, "sys/class/bdi/0:53/read_ahead_kb")
	if err := os.Remove(attr); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, attr); err != nil {
		t.Fatal(err)
	}
	out, err := runTuneCLI(t, "apply", "--root", dir, "--udev-program", "/usr/local/bin/nfstune")
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != ExitIssues {
		t.Fatalf("err = %v, want exit code %d\n%s", err, ExitIssues, out)
	}
	if !strings.Contains(out, "[done, read back ") || !strings.Contains(out, "[failed] readahead /sys/class/bdi/0:53/read_ahead_kb") {
		t.Errorf("want 0:53 failed and the other changes done:\n%s", out)
	}
	if b, _ := os.ReadFile(outside); string(b) != "128\n" {
		t.Errorf("apply wrote through a symlink out of /sys: %q", b)
	}
	if !regexp.MustCompile(`(?m)^Applied \d+ of \d+ changes, 1 failed \(journal `).MatchString(out) {
		t.Errorf("the header does not say that a change failed:\n%s", out)
	}
}

// A journal apply cannot read stops everything: the output must not claim any change.
func TestApplyCorruptJournal(t *testing.T) {
	t.Parallel()
	dir := copyTree(t)
	journal := filepath.Join(dir, tune.JournalPath)
	if err := os.MkdirAll(filepath.Dir(journal), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(journal, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runTuneCLI(t, "apply", "--root", dir, "--udev-program", "/usr/local/bin/nfstune")
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != ExitError2 {
		t.Fatalf("err = %v, want exit code %d\n%s", err, ExitError2, out)
	}
	if strings.Contains(out, "Applied") || !strings.Contains(out, "Nothing applied") || !strings.Contains(out, "[not run]") {
		t.Errorf("want nothing reported as applied:\n%s", out)
	}
}

func TestApplyBadFlags(t *testing.T) {
	t.Parallel()
	dir := copyTree(t)
	for _, args := range [][]string{
		{"apply", "--root", dir, "--persist", "cron"},
		{"apply", "--root", dir, "-o", "xml"},
		{"apply", "--root", dir, "--udev-program", "relative/nfstune"},
		{"apply", "--root", dir, "--udev-program", "/usr/bin/nfstune", "--udev-wait", "30s"},
	} {
		_, err := runTuneCLI(t, args...)
		var exit *ExitError
		if !errors.As(err, &exit) || exit.Code != ExitError2 {
			t.Errorf("%v: err = %v, want exit code 2", args, err)
		}
	}
}

func TestUdevReadAheadCommand(t *testing.T) {
	t.Parallel()
	dir := copyTree(t)
	out, err := runTuneCLI(t, "udev-readahead", "--root", dir, "0:53")
	if err != nil || out != "1024\n" {
		t.Errorf("0:53: %q, %v; want adaptive read-ahead's floor, one rsize of 1024", out, err)
	}
	// With a value the agent learned for the volume, the new superblock starts there.
	learned := filepath.Join(dir, "var", "lib", "nfstune", "learned.json")
	if err := os.MkdirAll(filepath.Dir(learned), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(learned, []byte(`{"volumes": [{"server": "nfsacct01.file.core.windows.net", "export": "/nfsacct01/share1", "readAheadKB": 4096, "at": "2026-12-01T00:00:00Z"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = runTuneCLI(t, "udev-readahead", "--root", dir, "0:53")
	if err != nil || out != "4096\n" {
		t.Errorf("0:53 with a learned value: %q, %v; want the learned 4096", out, err)
	}
	for _, dev := range []string{"8:0", "0:99"} {
		out, err := runTuneCLI(t, "udev-readahead", "--root", dir, "--wait", "30ms", dev)
		var exit *ExitError
		if out != "" || !errors.As(err, &exit) || exit.Code != ExitIssues {
			t.Errorf("%s: %q, %v; want no output and exit code 1", dev, out, err)
		}
	}
}

func TestApplyUdevRuleFlags(t *testing.T) {
	t.Parallel()
	dir := copyTree(t)
	out, err := runTuneCLI(t, "apply", "--dry-run", "--root", dir, "--udev-program", "/usr/bin/nfstune", "--exact", "--udev-wait", "2500ms", "--config", "/etc/nfstune/policy.yaml")
	if err == nil {
		t.Fatalf("a missing policy file was accepted:\n%s", out)
	}
	cfg := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: nfstune.io/v1alpha1\nkind: Policy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runTuneCLI(t, "apply", "--dry-run", "--root", dir, "--udev-program", "/usr/bin/nfstune", "--exact", "--udev-wait", "2500ms", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := `PROGRAM="/usr/bin/nfstune udev-readahead --config ` + cfg + ` --exact --wait 2.5s %k"`
	if !strings.Contains(out, want) {
		t.Errorf("rule lacks %s:\n%s", want, out)
	}
}
