package policy

import (
	"strings"
	"testing"
)

var serverTests = []struct {
	in string
	ok bool
}{
	{"10.0.0.5", true},
	{"files.example", true},
	{"fs-0123abcd.efs.us-east-1.amazonaws.com", true},
	{"account.blob.core.windows.net", true},
	{"nfs_server", true},
	{"fs-0123abcd", true},
	{"fd00::5", true},
	{"[fd00::5]", true},
	{"[fe80::1%eth0]", true},
	{"", false},
	{"[10.0.0.5]", false},
	{"[fd00::5", false},
	{"fd00::5]", false},
	{"srv /export /mnt nfs sec=none 0 0\nsrv", false},
	{`srv" ]` + "\n" + `[ NFSMount_Global_Options ]` + "\n" + `Sec=none`, false},
	{"srv:/export", false},
	{"srv,sec=none", false},
	{"srv#x", false},
	{"srv..example", false},
	{".srv", false},
	{"-srv", false},
	{"srv-.example", false},
	{"srv\x1b[2J", false},
	{"fe80::1%eth0 x", false},
	{strings.Repeat("a", 64), false},
	{strings.Repeat("a.", 127) + "a", false},
}

func TestValidServer(t *testing.T) {
	t.Parallel()
	for _, tt := range serverTests {
		if got := ValidServer(tt.in); got != tt.ok {
			t.Errorf("ValidServer(%q) = %v, want %v", tt.in, got, tt.ok)
		}
	}
}

func FuzzValidServer(f *testing.F) {
	for _, tt := range serverTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidServer(s) && strings.ContainsAny(s, " \t\n\r\",#=/\\'") {
			t.Fatalf("ValidServer(%q) accepts a separator", s)
		}
	})
}
