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

// TestArgsKeepsTheSlice checks that printable arguments come back as the same slice (no
// copy per printed line) and that a changed argument leaves the caller's slice alone.
func TestArgsKeepsTheSlice(t *testing.T) {
	t.Parallel()
	clean := []any{"a", []string{"b"}, 42}
	if got := Args(clean); &got[0] != &clean[0] {
		t.Errorf("Args copied %v although nothing changed", clean)
	}
	dirty := []any{"a", "b\n", 42}
	got := Args(dirty)
	if &got[0] == &dirty[0] || dirty[1] != "b\n" || got[0] != "a" || got[1] != `b\n` || got[2] != 42 {
		t.Errorf("Args(%q) = %q; want a new slice with the second argument escaped and the input kept", dirty, got)
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

func TestError(t *testing.T) {
	t.Parallel()
	host := errors.New("open /mnt/a\x1b[2J\nforged: no such file")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"plain", errors.New("bad flag"), "bad flag"},
		{"host text", host, `open /mnt/a\x1b[2J\nforged: no such file`},
		{"wrapped host text", fmt.Errorf("reading config: %w", host), `reading config: open /mnt/a\x1b[2J\nforged: no such file`},
		{"join keeps its lines", errors.Join(errors.New("p.yaml:1: a"), host), "p.yaml:1: a\n" + `open /mnt/a\x1b[2J\nforged: no such file`},
		{"prefix of a join", fmt.Errorf("policy: %w", errors.Join(errors.New("a"), errors.New("b\rc"))), "policy: a\n" + `b\rc`},
		{"two wraps are not a join", fmt.Errorf("%w: %w", errors.New("a"), host), `a: open /mnt/a\x1b[2J\nforged: no such file`},
		{"prefix with a newline", fmt.Errorf("x\x1b\n%w", errors.New("a")), `x\x1b\na`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Error(tt.err); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}
