package printer

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/tidwall/pretty"
)

// jsonIndent is encoding/json's layout with a two-space indent: every element of a
// non-empty array or object on a line of its own (Width 0 never joins a short one).
var jsonIndent = pretty.Options{Indent: "  "}

// WriteJSON writes v as indented JSON, as kubectl's -o json does, with <, > and & kept as
// they are (fixes and fstab lines carry them). encoding/json indents in a second pass that
// steps its scanner once per byte, the slowest part of writing a report of thousands of
// mounts; tidwall/pretty indents the compact encoding to the same bytes in one plain loop
// (TestWriteJSONAsEncodingJSON).
func WriteJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(pretty.PrettyOptions(buf.Bytes(), &jsonIndent))
	return err
}
