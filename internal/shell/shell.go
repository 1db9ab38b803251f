// Package shell writes the command lines nfstune prints for a person to paste (audit
// fixes, shutdown's next step, apply's mount commands): every word that comes from the host
// or the user, a mount point above all, is quoted so that the shell reads it as that one
// word and nothing else. A mount point such as /mnt/$(cmd) must not run cmd when pasted.
package shell

import "strings"

// Quote returns s as one POSIX shell word: bare when every byte is one that no shell
// treats specially (letters, digits and /._-:,=@+%), else in single quotes, inside which no
// character is special; a single quote in s ends the quoting, is written escaped (\') and
// the quoting begins again (POSIX.1-2017, Shell Command Language, 2.2.2 Single-Quotes). The
// empty string is two single quotes.
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !safe(r) }) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes each word (Quote) and joins them with spaces: one command line.
func Join(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Quote(w)
	}
	return strings.Join(q, " ")
}

// safe reports whether r stands for itself anywhere in a word: not a metacharacter,
// quote, expansion ($, `), glob ([, *, ?), tilde, comment, blank or newline.
func safe(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-:,=@+%", r)
}
