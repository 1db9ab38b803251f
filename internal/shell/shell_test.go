package shell

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

var quoteTests = []struct{ in, want string }{
	{"/mnt/data", "/mnt/data"},
	{"0:53", "0:53"},
	{"vers=4.1,rsize=1048576", "vers=4.1,rsize=1048576"},
	{"server:/export", "server:/export"},
	{"", "''"},
	{"/mnt/$(touch pwned)", "'/mnt/$(touch pwned)'"},
	{"/mnt/$HOME", "'/mnt/$HOME'"},
	{"/mnt/`id`", "'/mnt/`id`'"},
	{"/mnt/it's", `'/mnt/it'\''s'`},
	{`/mnt/"x"`, `'/mnt/"x"'`},
	{"/mnt/a b", "'/mnt/a b'"},
	{"/mnt/a\nrm -rf /", "'/mnt/a\nrm -rf /'"},
	{"/mnt/a;id", "'/mnt/a;id'"},
	{"/mnt/a&&id|x>y<z", "'/mnt/a&&id|x>y<z'"},
	{"/mnt/[ab]*?", "'/mnt/[ab]*?'"},
	{"~root", "'~root'"},
	{"/mnt/#x", "'/mnt/#x'"},
	{"/mnt/\\x", `'/mnt/\x'`},
	{"/mnt/\tx", "'/mnt/\tx'"},
	{"/mnt/é", "'/mnt/é'"},
	{"'", `''\'''`},
}

func TestQuote(t *testing.T) {
	t.Parallel()
	for _, tt := range quoteTests {
		if got := Quote(tt.in); got != tt.want {
			t.Errorf("Quote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := Join("umount", "/mnt/a b", "/mnt/c"); got != "umount '/mnt/a b' /mnt/c" {
		t.Errorf("Join = %q", got)
	}
}

// TestQuoteShell pastes each quoted word into a real shell: it must come back as the same
// bytes, and nothing in it may run.
func TestQuoteShell(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("no sh to paste into: %v", err)
	}
	dir := t.TempDir()
	for _, tt := range quoteTests {
		out, err := exec.Command(sh, "-c", "printf '%s' "+Quote(tt.in)).Output()
		if err != nil {
			t.Errorf("sh -c printf %s: %v", Quote(tt.in), err)
			continue
		}
		if string(out) != tt.in {
			t.Errorf("sh read %q as %q", tt.in, out)
		}
	}
	marker := filepath.Join(dir, "ran")
	for _, in := range []string{"$(touch " + marker + ")", "`touch " + marker + "`", "a;touch " + marker, "a\ntouch " + marker, "x' ; touch " + marker + " ; '"} {
		if err := exec.Command(sh, "-c", "printf '%s' "+Quote(in)+" >/dev/null").Run(); err != nil {
			t.Errorf("sh: %v", err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("pasting %q ran a command", in)
		}
	}
}

func FuzzQuote(f *testing.F) {
	for _, tt := range quoteTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := Quote(s)
		if q == s {
			for _, r := range s {
				if !safe(r) {
					t.Fatalf("%q left bare", s)
				}
			}
		}
	})
}
