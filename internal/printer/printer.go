// Package printer writes reports: a Writer that keeps the first write error, so that
// code printing a table line by line checks for an error once, at the end, and that
// escapes every string argument (display.Text), since mount points, exports and messages
// come from the host and must not forge lines or reach a terminal raw; and WriteJSON, the
// -o json of every command.
package printer

import (
	"fmt"
	"io"

	"github.com/nfstune/nfstune/internal/display"
)

// Writer writes to an underlying writer until a write fails; after that it writes
// nothing and every Write returns the first error.
type Writer struct {
	w   io.Writer
	err error
}

// New returns a Writer that writes to w.
func New(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p unless an earlier write failed.
func (p *Writer) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.w.Write(b)
	p.err = err
	return n, err
}

// Printf formats to the writer with every string argument escaped (display.Args); a
// failure is kept for Err.
func (p *Writer) Printf(format string, args ...any) {
	fmt.Fprintf(p, format, display.Args(args)...)
}

// Err returns the first write error, or nil.
func (p *Writer) Err() error { return p.err }
