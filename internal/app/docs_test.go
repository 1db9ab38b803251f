package app

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// README.md's budget: a reader sees what nfstune does, how to install it and a first audit
// in a few screens; figures and history belong in docs/.
const (
	readmeMaxLines     = 150
	readmeMaxLineChars = 200
)

func TestReadmeBudget(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) > readmeMaxLines {
		t.Errorf("README.md has %d lines, the budget is %d: move reference to docs/ and figures to docs/benchmarks.md", len(lines), readmeMaxLines)
	}
	for i, l := range lines {
		if n := len([]rune(l)); n > readmeMaxLineChars {
			t.Errorf("README.md:%d has %d characters, at most %d", i+1, n, readmeMaxLineChars)
		}
	}
}

// A documented command is a line "$ nfstune ..." in a fenced block that opens with ```sh,
// in README.md or a page under docs/ (not the lab notes, which keep history as it was).
// Such a command must run as shown, on a source build, with no cluster and no root: it reads
// a fixture tree (--root) or nothing of the host, and writes nothing. A "| ..." after it (a
// pipe into kubectl) is not run. A plain ``` block right after the ```sh block is the last
// command's sample output, trimmed: its lines must appear in the real output in order, a
// line ending in " ..." as the start of one, and a line "..." stands for any lines.
type docCommand struct {
	file   string
	line   int
	args   []string
	sample []string
}

// documentedCommands returns the marked commands of one Markdown file.
func documentedCommands(t *testing.T, path string) []docCommand {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []docCommand
	inSh, inFence, inSample := false, false, false
	afterSh := false // the last fence closed a ```sh block with a command, and only blank lines followed
	openedWith := 0  // len(cmds) when the current ```sh block opened
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			switch {
			case inFence:
				afterSh = inSh && len(cmds) > openedWith
				inFence, inSh, inSample = false, false, false
			default:
				inFence, inSh = true, trimmed == "```sh"
				inSample = afterSh && trimmed == "```"
				openedWith = len(cmds)
				afterSh = false
			}
			continue
		}
		if inSample {
			last := &cmds[len(cmds)-1]
			last.sample = append(last.sample, line)
			continue
		}
		if !inFence && trimmed != "" {
			afterSh = false
		}
		rest, ok := strings.CutPrefix(trimmed, "$ nfstune ")
		if !inSh || !ok {
			continue
		}
		rest, _, _ = strings.Cut(rest, " | ")
		args, err := splitArgs(rest)
		if err != nil {
			t.Errorf("%s:%d: %v", path, n, err)
			continue
		}
		cmds = append(cmds, docCommand{file: path, line: n, args: args})
	}
	return cmds
}

// splitArgs splits a command line into arguments as a shell would for plain words and
// single or double quotes; anything else a shell would interpret is refused.
func splitArgs(s string) ([]string, error) {
	if strings.ContainsAny(s, ";&<>`$\\|") {
		return nil, fmt.Errorf("%q: a documented command is one plain nfstune command", s)
	}
	var args []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%q: unterminated quote", s)
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args, nil
}

// safeDocCommand says why a documented command may not run in a test, or "" when it may:
// only verbs that write nothing, and those that read a host only from a fixture tree.
func safeDocCommand(args []string) string {
	has := func(flag string) bool {
		return slices.ContainsFunc(args, func(a string) bool { return a == flag || strings.HasPrefix(a, flag+"=") })
	}
	if len(args) == 0 {
		return "no verb"
	}
	switch args[0] {
	case "options", "plan", "version":
		return ""
	case "k8s":
		if len(args) > 1 && (args[1] == "render" || args[1] == "volume") {
			return ""
		}
	case "audit":
		if has("--root") {
			return ""
		}
		return "audit without --root reads this machine"
	case "apply":
		if has("--dry-run") && has("--root") {
			return ""
		}
		return "apply runs here only with --dry-run and --root"
	}
	return "not a command that is safe to run without a cluster and root"
}

// docFiles are README.md and the Markdown pages under docs/ but the lab notes.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(moduleRoot, "README.md")}
	err := filepath.WalkDir(filepath.Join(moduleRoot, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "lab-notes" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestDocumentedCommandsRun builds nfstune as a source build is (no release version) and
// runs every documented command from the repository root; each must exit 0.
func TestDocumentedCommandsRun(t *testing.T) {
	var cmds []docCommand
	readme := 0
	for _, f := range docFiles(t) {
		c := documentedCommands(t, f)
		if strings.HasSuffix(f, "/README.md") && filepath.Dir(f) == moduleRoot {
			readme = len(c)
		}
		cmds = append(cmds, c...)
	}
	if readme < 3 {
		t.Errorf("README.md has %d documented commands (\"$ nfstune ...\" in a ```sh block), want the install-free ones: k8s render, audit, options, apply --dry-run", readme)
	}
	bin := filepath.Join(t.TempDir(), "nfstune")
	build := exec.Command("go", "build", "-o", bin, "./cmd/nfstune")
	build.Dir = moduleRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, c := range cmds {
		name := fmt.Sprintf("%s:%d", strings.TrimPrefix(c.file, moduleRoot+"/"), c.line)
		t.Run(name, func(t *testing.T) {
			if why := safeDocCommand(c.args); why != "" {
				t.Fatalf("nfstune %s: %s; show it in a plain ``` block instead", strings.Join(c.args, " "), why)
			}
			cmd := exec.Command(bin, c.args...)
			cmd.Dir = moduleRoot
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("nfstune %s: %v\n%s%s", strings.Join(c.args, " "), err, out, stderr.Bytes())
			}
			if missing := missingSample(c.sample, strings.Split(string(out), "\n")); missing != "" {
				t.Errorf("nfstune %s: the sample output's line %q is not in the real output, in order:\n%s", strings.Join(c.args, " "), missing, out)
			}
		})
	}
}

// missingSample returns the first line of a trimmed sample output that the real output
// lacks, in order, or "" when every line is there (see docCommand).
func missingSample(sample, out []string) string {
	i := 0
	for _, want := range sample {
		if strings.TrimSpace(want) == "..." {
			continue
		}
		prefix, trimmed := strings.CutSuffix(want, " ...")
		for ; i < len(out); i++ {
			if out[i] == want || trimmed && strings.HasPrefix(out[i], prefix) {
				break
			}
		}
		if i == len(out) {
			return want
		}
		i++
	}
	return ""
}
