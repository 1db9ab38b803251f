package printer

import (
	"fmt"
	"slices"
	"strings"
)

// The output formats of every command that prints a result (-o): a table for people, JSON
// and YAML for programs.
const (
	Table = "table"
	JSON  = "json"
	YAML  = "yaml"
)

// Formats are the formats -o accepts on every command whose human output is a table.
var Formats = []string{Table, JSON, YAML}

// Format is the value of an -o flag (a pflag.Value): one of its formats, checked when the
// flag is set, so that a command never starts with a format it cannot write.
type Format struct {
	p       *string
	formats []string
}

// NewFormat returns the value of an -o flag that stores into p, set to def, and accepts
// formats (def among them).
func NewFormat(p *string, def string, formats ...string) *Format {
	*p = def
	return &Format{p: p, formats: formats}
}

// Set sets the format, or says which formats there are.
func (f *Format) Set(s string) error {
	if !slices.Contains(f.formats, s) {
		return fmt.Errorf("want %s", strings.Join(f.formats, ", "))
	}
	*f.p = s
	return nil
}

// String returns the format.
func (f *Format) String() string { return *f.p }

// Type names the value in usage lines.
func (f *Format) Type() string { return "format" }
