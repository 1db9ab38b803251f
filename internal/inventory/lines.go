package inventory

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// maxLine caps one line of a host file: fstab, an INI file, a udev rule, an nfsfs row.
// Real lines are well under a page; a longer one is not a file these parsers understand.
const maxLine = 1 << 20

// ErrLineTooLong is returned by the line parsers when a line exceeds maxLine: they stop
// there, and what they parsed before it is not the whole file.
var ErrLineTooLong = errors.New("line longer than 1 MiB")

// scanLines calls fn with each line of r, numbered from 1, and returns the error that
// stopped it. bufio.Scanner stops silently at a line longer than its buffer (Err returns
// bufio.ErrTooLong, Scan only false); a caller that ignored it would act on the part of
// the file before that line as if it were the whole file.
func scanLines(r io.Reader, fn func(n int, line string)) error {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 4096), maxLine)
	n := 0
	for s.Scan() {
		n++
		fn(n, s.Text())
	}
	switch err := s.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		return fmt.Errorf("line %d: %w: the rest of the file was not read", n+1, ErrLineTooLong)
	case err != nil:
		return fmt.Errorf("line %d: %w", n+1, err)
	}
	return nil
}
