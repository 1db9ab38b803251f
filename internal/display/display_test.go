package display

import (
	"errors"
	"fmt"
	"testing"
)

func TestText(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"plain", "/mnt/data", "/mnt/data"},
		{"space and unicode kept", "/mnt/with space/données", "/mnt/with space/données"},
		{"octal escape kept", `/srv/data\040copy`, `/srv/data\040copy`},
		{"newline", "/mnt/a\n0:99 forged", `/mnt/a\n0:99 forged`},
		{"carriage return and tab", "a\rb\tc", `a\rb\tc`},
		{"terminal escape", "\x1b[2J\x1b]0;title\a", `\x1b[2J\x1b]0;title\a`},
		{"delete and C1", "a\x7fb\u009bc", `a\x7fb\u009bc`},
		{"bidi override", "abc\u202edcba", `abc\u202edcba`},
		{"invalid UTF-8", "a\xffb", `a\xffb`},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.in); got != tt.want {
				t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

type kind string

type stringer struct{}

func (stringer) String() string { return "s\nt" }

func TestArgs(t *testing.T) {
	t.Parallel()
	got := fmt.Sprintf("%s %v %s %s %s %d %v", Args([]any{"a\nb", []string{"c\x1b", "d"}, errors.New("e\rf"), kind("g\nh"), stringer{}, 42, 1.5})...)
	want := `a\nb [c\x1b d] e\rf g\nh s\nt 42 1.5`
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func FuzzText(f *testing.F) {
	for _, s := range []string{"/mnt/a\n", "\x1b[2J", "a\xffb", "\u202e", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Text(s)
		for _, r := range got {
			if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				t.Fatalf("Text(%q) = %q keeps control rune %U", s, got, r)
			}
		}
	})
}
