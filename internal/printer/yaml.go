package printer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	yaml "go.yaml.in/yaml/v2"
)

// WriteYAML writes v as YAML, byte for byte as sigs.k8s.io/yaml.Marshal writes it (as
// kubectl's -o yaml does: the JSON field names, each mapping's keys in go-yaml's order),
// with less memory. That marshals v to JSON, parses the JSON as YAML into one generic tree
// and writes the tree with go-yaml: for the audit of 10,000 mounts about 45 times the JSON's
// size at once (docs/lab-notes/2026-12-05-audit-10000.md). WriteYAML decodes the JSON with
// encoding/json, giving its numbers the Go types go-yaml's parser would (yamlNumber), and
// writes an object one key at a time, and a key's list one element at a time, each through
// go-yaml: a top-level mapping's entries and a block sequence's items start in the first
// column and do not depend on each other (TestWriteYAMLAsSigsYAML).
func WriteYAML(w io.Writer, v any) error {
	j, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if j[0] != '{' || json.Unmarshal(j, &fields) != nil || len(fields) == 0 {
		return writeYAMLValue(w, j)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	if keys, err = yamlKeyOrder(keys); err != nil {
		return err
	}
	for _, k := range keys {
		if err := writeYAMLField(w, k, fields[k]); err != nil {
			return err
		}
	}
	return nil
}

// writeYAMLField writes one entry of a top-level mapping: a list element by element, anything
// else whole.
func writeYAMLField(w io.Writer, key string, raw json.RawMessage) error {
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil || len(items) == 0 {
		value, err := decodeJSON(raw)
		if err != nil {
			return err
		}
		return writeYAMLOf(w, map[string]any{key: value})
	}
	// The key's line as go-yaml writes it (quoted if it must be): the first line of the
	// entry with a one-item list.
	head, err := yaml.Marshal(map[string]any{key: []any{0}})
	if err != nil {
		return err
	}
	if _, err := w.Write(head[:bytes.IndexByte(head, '\n')+1]); err != nil {
		return err
	}
	for _, item := range items {
		value, err := decodeJSON(item)
		if err != nil {
			return err
		}
		if err := writeYAMLOf(w, []any{value}); err != nil {
			return err
		}
	}
	return nil
}

// writeYAMLValue writes a JSON value that is not an object with keys whole.
func writeYAMLValue(w io.Writer, j []byte) error {
	value, err := decodeJSON(j)
	if err != nil {
		return err
	}
	return writeYAMLOf(w, value)
}

func writeYAMLOf(w io.Writer, value any) error {
	b, err := yaml.Marshal(value)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// yamlKeyOrder returns keys in the order go-yaml writes a mapping's keys in (its own sort,
// which reads digits as numbers): the order of the lines it writes for a map of them.
func yamlKeyOrder(keys []string) ([]string, error) {
	index := make(map[string]int, len(keys))
	for i, k := range keys {
		index[k] = i
	}
	b, err := yaml.Marshal(index)
	if err != nil {
		return nil, err
	}
	var lines yaml.MapSlice
	if err := yaml.Unmarshal(b, &lines); err != nil {
		return nil, err
	}
	if len(lines) != len(keys) {
		return nil, fmt.Errorf("yaml: %d of %d keys read back", len(lines), len(keys))
	}
	ordered := make([]string, len(lines))
	for i, l := range lines {
		ordered[i] = keys[l.Value.(int)]
	}
	return ordered, nil
}

// decodeJSON decodes one JSON value into the tree go-yaml's parser makes of it.
func decodeJSON(j []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return yamlNumbers(v), nil
}

// yamlNumbers replaces every json.Number in v, in place, with yamlNumber's value.
func yamlNumbers(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = yamlNumbers(x)
		}
	case []any:
		for i, x := range t {
			t[i] = yamlNumbers(x)
		}
	case json.Number:
		return yamlNumber(string(t))
	}
	return v
}

// yamlNumber is the value go-yaml's parser gives a JSON number (resolve in go-yaml v2's
// resolve.go), as go-yaml writes it: an integer (an int or int64 there, written alike) when
// it fits in 64 bits, else a float64.
func yamlNumber(s string) any {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return u
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s // not a number json.Marshal writes
	}
	return f
}
