package printer

import (
	"bytes"
	"errors"
	"testing"
)

// failAfter accepts n writes, then fails every write.
type failAfter struct {
	n   int
	buf bytes.Buffer
}

var errFull = errors.New("disk full")

func (f *failAfter) Write(b []byte) (int, error) {
	if f.n == 0 {
		return 0, errFull
	}
	f.n--
	return f.buf.Write(b)
}

func TestWriterKeepsFirstError(t *testing.T) {
	t.Parallel()
	dst := &failAfter{n: 1}
	p := New(dst)
	p.Printf("a %d\n", 1)
	if p.Err() != nil {
		t.Fatalf("Err after a good write = %v", p.Err())
	}
	p.Printf("b\n")
	dst.n = 5 // the destination recovers, but the report is already incomplete
	p.Printf("c\n")
	if _, err := p.Write([]byte("d\n")); !errors.Is(err, errFull) {
		t.Errorf("Write after a failure = %v, want %v", err, errFull)
	}
	if !errors.Is(p.Err(), errFull) {
		t.Errorf("Err = %v, want %v", p.Err(), errFull)
	}
	if got := dst.buf.String(); got != "a 1\n" {
		t.Errorf("written = %q, want only the line before the failure", got)
	}
}
