package printer

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

// encodingJSONIndent is encoding/json's own indentation of v, what WriteJSON must match.
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

func TestWriteJSONAsEncodingJSON(t *testing.T) {
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
		if err := WriteJSON(&got, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := encodingJSONIndent(t, v); !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: got\n%s\nwant\n%s", name, got.Bytes(), want)
		}
	}
	if err := WriteJSON(io.Discard, func() {}); err == nil {
		t.Error("a value JSON cannot encode gave no error")
	}
}
