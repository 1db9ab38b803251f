package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/inventory/inventorytest"
)

// encodingJSONIndent is what writeStructured wrote before it indented with tidwall/pretty:
// encoding/json's own indentation of the same value.
func encodingJSONIndent(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestWriteStructuredJSON(t *testing.T) {
	type inner struct {
		Name  string            `json:"name"`
		Empty []string          `json:"empty"`
		Nil   []string          `json:"nil"`
		Map   map[string]int    `json:"map"`
		None  map[string]string `json:"none"`
		Skip  string            `json:"skip,omitempty"`
	}
	values := map[string]any{
		"scalars":  []any{0, -1, 1.5e300, 12345678901234567, true, false, nil, ""},
		"strings":  []string{`a "quoted" \ back`, "tab\tnew\nline", "<fstab> & </fstab>", "ü ✓ \u2028 \u2029", "[{,:}]", "\x00\x1f"},
		"empty":    []any{[]int{}, map[string]int{}, struct{}{}, [][]int{{}, {}}},
		"nested":   map[string]any{"a": []any{map[string]any{"b": []any{[]any{1}, map[string]any{}}}}},
		"struct":   inner{Name: "x", Empty: []string{}, Map: map[string]int{"z": 1, "a": 2}},
		"top-nil":  nil,
		"top-str":  "just a string",
		"top-list": []inner{{}, {Name: "y"}},
	}
	for name, v := range values {
		var got bytes.Buffer
		if err := writeStructured(&got, OutputJSON, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := encodingJSONIndent(t, v); !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: got\n%s\nwant\n%s", name, got.Bytes(), want)
		}
	}
	if err := writeStructured(io.Discard, OutputJSON, func() {}); err == nil {
		t.Error("a value JSON cannot encode gave no error")
	}
}

// TestAuditJSONAsEncodingJSON checks a whole audit report, findings with fixes and fstab
// lines, against encoding/json's indentation of the same report.
func TestAuditJSONAsEncodingJSON(t *testing.T) {
	dir := t.TempDir()
	if err := inventorytest.GenerateTree(dir, 20); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	root := NewRoot(IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: io.Discard})
	root.SetArgs([]string{"audit", "--root", dir, "--stall-window", "0", "--fail-on", "none", "-o", "json"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	var compact, want bytes.Buffer
	if err := json.Compact(&compact, out.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := json.Indent(&want, compact.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	want.WriteByte('\n')
	if !bytes.Equal(out.Bytes(), want.Bytes()) {
		t.Errorf("audit -o json differs from encoding/json's indentation:\n%.600s", out.Bytes())
	}
	if !bytes.Contains(out.Bytes(), []byte("\n  \"findings\": [\n    {\n")) {
		t.Errorf("no indented findings: %.300s", out.Bytes())
	}
}
