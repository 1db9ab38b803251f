package printer

import "testing"

// A Format starts at its default, takes its formats and refuses others, keeping the last
// good one.
func TestFormat(t *testing.T) {
	t.Parallel()
	var out string
	f := NewFormat(&out, Table, Formats...)
	if out != Table || f.String() != Table {
		t.Fatalf("default %q, %q; want table", out, f.String())
	}
	if err := f.Set(YAML); err != nil || out != YAML {
		t.Errorf("Set(yaml) = %v, out %q", err, out)
	}
	if err := f.Set("xml"); err == nil || err.Error() != "want table, json, yaml" || out != YAML {
		t.Errorf("Set(xml) = %v, out %q; want an error naming the formats and yaml kept", err, out)
	}
}
