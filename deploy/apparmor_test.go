package deploy

import (
	"fmt"
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
			// sys_ptrace for agent.blockedProcesses, bpf and perfmon for agent.podIO.
			if !slices.Contains([]string{"capability sys_ptrace,", "capability bpf,", "capability perfmon,"}, r) {
				t.Errorf("%q: want capability sys_ptrace, bpf or perfmon only", r)
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

// TestAppArmorProfileDeniesEnviron checks, with the profile's globs, that no process's
// environment is readable, the host's (/host/proc) or the container's (/proc), while the
// /proc files the agent reads stay readable (which also shows the matching works).
func TestAppArmorProfileDeniesEnviron(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("apparmor/nfstune-agent")
	if err != nil {
		t.Fatal(err)
	}
	p := parseFileRules(t, string(b))
	for _, path := range []string{
		"/host/proc/1/environ",
		"/host/proc/4242/environ",
		"/host/proc/4242/task/4243/environ",
		"/proc/1/environ",
		"/proc/4242/task/4242/environ",
	} {
		if p.readable(path) {
			t.Errorf("%s is readable under the profile", path)
		}
	}
	for _, path := range []string{
		"/host/proc/1/mountinfo",
		"/host/proc/4242/cmdline",
		"/host/proc/4242/fdinfo/3",
		"/host/proc/4242/task/4243/stat",
		"/host/proc/fs/nfsfs/volumes",
		"/proc/1/mountinfo",
	} {
		if !p.readable(path) {
			t.Errorf("%s is not readable under the profile; the agent reads it", path)
		}
	}
}

// fileRules are a profile's file rules as regular expressions, allowing and denying.
type fileRules struct {
	allowRead, denyRead []*regexp.Regexp
}

// readable reports whether a rule allows reading path and no deny rule refuses it: in
// AppArmor a deny rule wins over any allow rule.
func (p fileRules) readable(path string) bool {
	match := func(rs []*regexp.Regexp) bool {
		return slices.ContainsFunc(rs, func(r *regexp.Regexp) bool { return r.MatchString(path) })
	}
	return match(p.allowRead) && !match(p.denyRead)
}

// profileVars are the variables of the abstractions the profile uses (tunables/proc and
// tunables/kernelvars): @{PROC} is /proc/, @{pid} a process ID.
var profileVars = strings.NewReplacer("@{PROC}", "/proc/", "@{pid}", "[1-9]*")

// parseFileRules reads the file rules of a profile ("[deny] path perms,") whose
// permissions include r.
func parseFileRules(t *testing.T, profile string) fileRules {
	t.Helper()
	fileRule := regexp.MustCompile(`^(deny\s+)?([/@]\S*)\s+([rwakmlixuUpPcC]+),$`)
	var p fileRules
	for _, line := range strings.Split(profile, "\n") {
		line, _, _ = strings.Cut(line, "#")
		m := fileRule.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil || !strings.Contains(m[3], "r") {
			continue
		}
		re, err := globRegexp(profileVars.Replace(m[2]))
		if err != nil {
			t.Fatalf("rule %q: %v", line, err)
		}
		if m[1] != "" {
			p.denyRead = append(p.denyRead, re)
		} else {
			p.allowRead = append(p.allowRead, re)
		}
	}
	return p
}

// globRegexp turns an AppArmor path glob into a regular expression (apparmor.d(5), Globbing):
// ** matches across directories, * and ? within one, {a,b} alternatives, [...] a class.
// Repeated slashes count as one, as AppArmor's path names do.
func globRegexp(glob string) (*regexp.Regexp, error) {
	glob = regexp.MustCompile(`/+`).ReplaceAllString(glob, "/")
	var b strings.Builder
	b.WriteString("^")
	depth := 0
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; {
		case strings.HasPrefix(glob[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '{':
			b.WriteString("(?:")
			depth++
		case c == '}' && depth > 0:
			b.WriteString(")")
			depth--
		case c == ',' && depth > 0:
			b.WriteString("|")
		case c == '[':
			end := strings.IndexByte(glob[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unterminated class in %q", glob)
			}
			b.WriteString(glob[i : i+end+1])
			i += end
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}
