package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestAppArmorProfileConfines reads apparmor/nfstune-agent, the profile for the agent with
// CAP_SYS_PTRACE, rule by rule: ptrace only to read, no file access through another
// process's /proc/<pid>/root or cwd (a disconnected path, refused without
// attach_disconnected), and no write but read_ahead_kb. Where apparmor_parser is
// installed it also compiles the profile without loading it.
// allowedWrites are the only paths the agent's profile may let it write: read-ahead, and for
// the policy's recovery shutdown a superblock's shutdown attribute and nfstune's journal.
var allowedWrites = []string{
	"/host/sys/class/bdi/*/read_ahead_kb",
	"/host/sys/fs/nfs/*/shutdown",
	"/host/var/lib/nfstune/**",
}

func TestAppArmorProfileConfines(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("apparmor/nfstune-agent")
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, line := range strings.Split(string(b), "\n") {
		if line, _, _ = strings.Cut(line, "#"); strings.TrimSpace(line) != "" {
			rules = append(rules, strings.TrimSpace(line))
		}
	}
	if len(rules) == 0 || !strings.Contains(strings.Join(rules, "\n"), "profile nfstune-agent flags=(mediate_deleted) {") {
		t.Fatalf("no profile nfstune-agent with only mediate_deleted in:\n%s", strings.Join(rules, "\n"))
	}
	// A file rule: path, then permissions of r, w, a, k, l, m, x variants.
	fileRule := regexp.MustCompile(`^(deny\s+)?(\S+)\s+([rwakmlixuUpPcC]+),$`)
	writes, ptrace := 0, false
	for _, r := range rules {
		switch {
		case strings.Contains(r, "attach_disconnected"):
			t.Errorf("%q: files reached through /proc/<pid>/root would be attached at / and allowed", r)
		case strings.HasPrefix(r, "ptrace"):
			ptrace = true
			if r != "ptrace (read)," {
				t.Errorf("%q: want ptrace (read) only", r)
			}
		case strings.HasPrefix(r, "capability"):
			if r != "capability sys_ptrace," {
				t.Errorf("%q: want capability sys_ptrace only", r)
			}
		case r == "file," || strings.HasPrefix(r, "/** ") || strings.HasPrefix(r, "/{"):
			t.Errorf("%q: allows files the agent does not read", r)
		}
		m := fileRule.FindStringSubmatch(r)
		if m == nil || m[1] != "" || !strings.ContainsAny(m[3], "wa") {
			continue
		}
		writes++
		if !slices.Contains(allowedWrites, m[2]) {
			t.Errorf("%q: a write other than read_ahead_kb, a superblock's shutdown attribute or the journal", r)
		}
	}
	if !ptrace || writes != len(allowedWrites) {
		t.Errorf("ptrace rule %v, %d write rules; want ptrace (read) and the writes %q", ptrace, writes, allowedWrites)
	}
	if parser, err := exec.LookPath("apparmor_parser"); err == nil {
		out, err := exec.Command(parser, "--skip-kernel-load", "--skip-cache", "--debug", "apparmor/nfstune-agent").CombinedOutput()
		if err != nil {
			t.Errorf("apparmor_parser: %v\n%s", err, out)
		}
	}
}
