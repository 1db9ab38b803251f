// Package display makes text that comes from the host (mount points, exports, mountinfo
// lines, file contents) or from a config file safe to print for people: a newline in a
// mount point must not forge a line of output, and no control byte may reach the terminal.
package display

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text returns s with every rune that is not printable escaped as in a Go string literal
// (\n, \t, \x1b, \u202e; a byte that is not UTF-8 as \xff). Printable text, spaces and
// backslashes stay as they are, so ordinary names read unchanged.
func Text(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' {
			ascii = false
			break
		}
	}
	if ascii {
		return s // printable ASCII, the common case: nothing to escape
	}
	clean := true
	for _, r := range s {
		if !printable(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case printable(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

func printable(r rune) bool { return r != utf8.RuneError && unicode.IsPrint(r) }

// Args returns printf arguments with Text applied to every string, []string, error and
// fmt.Stringer, and to values of named string types; other values are kept. When Text
// changes nothing, the common case, it returns args itself: a copy per call would be an
// allocation per printed line.
func Args(args []any) []any {
	var out []any
	for i, a := range args {
		v, changed := displayArg(a)
		if out == nil && !changed {
			continue
		}
		if out == nil {
			out = make([]any, len(args))
			copy(out, args[:i])
		}
		out[i] = v
	}
	if out == nil {
		return args
	}
	return out
}

// displayArg is a with Text applied, and whether that changed it. (Values such as a
// []string cannot be compared with ==, so the answer is given rather than found.)
func displayArg(a any) (any, bool) {
	switch v := a.(type) {
	case string:
		// The argument itself when Text changed nothing: a new interface value for the
		// same string would be an allocation per argument.
		if t := Text(v); t != v {
			return t, true
		}
		return a, false
	case []string:
		if !slices.ContainsFunc(v, func(s string) bool { return Text(s) != s }) {
			return a, false
		}
		s := make([]string, len(v))
		for j := range v {
			s[j] = Text(v[j])
		}
		return s, true
	case error:
		return Text(v.Error()), true
	case fmt.Stringer:
		return Text(v.String()), true
	}
	if rv := reflect.ValueOf(a); rv.Kind() == reflect.String {
		return Text(rv.String()), true
	}
	return a, false
}

// Error returns err's text with Text applied, keeping the line breaks of errors.Join (one
// problem a line, as a config file's errors are listed): a break inside a message, such as
// a newline in a mount point the error quotes, is escaped like any other control byte.
func Error(err error) string {
	return strings.Join(errorLines(err), "\n")
}

// errorLines splits err at the joins in its tree: a join whose text is its errors' texts
// one a line, and a wrapper that only adds a prefix to such a join.
func errorLines(err error) []string {
	msg := err.Error()
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		errs := u.Unwrap()
		texts := make([]string, len(errs))
		for i, e := range errs {
			texts[i] = e.Error()
		}
		if len(errs) > 0 && msg == strings.Join(texts, "\n") {
			var lines []string
			for _, e := range errs {
				lines = append(lines, errorLines(e)...)
			}
			return lines
		}
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil && strings.HasSuffix(msg, inner.Error()) {
			lines := errorLines(inner)
			lines[0] = Text(strings.TrimSuffix(msg, inner.Error())) + lines[0]
			return lines
		}
	}
	return []string{Text(msg)}
}
