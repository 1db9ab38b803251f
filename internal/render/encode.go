package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// Output formats.
const (
	FormatYAML = "yaml"
	FormatJSON = "json"
)

// Write encodes objs to w: YAML documents separated by "---", or one JSON v1 List, the
// shape `kubectl get -o json` prints and `kubectl apply -f` accepts.
func Write(w io.Writer, format string, objs []Object) error {
	items := make([]map[string]any, 0, len(objs))
	for _, o := range objs {
		m, err := manifest(o)
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
		items = append(items, m)
	}
	switch format {
	case FormatYAML:
		var buf bytes.Buffer
		for _, m := range items {
			b, err := yaml.Marshal(m)
			if err != nil {
				return err
			}
			buf.WriteString("---\n")
			buf.Write(b)
		}
		_, err := w.Write(buf.Bytes())
		return err
	case FormatJSON:
		list := struct {
			APIVersion string           `json:"apiVersion"`
			Kind       string           `json:"kind"`
			Items      []map[string]any `json:"items"`
		}{APIVersion: "v1", Kind: "List", Items: items}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	return fmt.Errorf("unsupported output format %q (want %s or %s)", format, FormatYAML, FormatJSON)
}

// manifest is o as a JSON object without what only the API server fills in: the status,
// an empty spec and a null creationTimestamp.
func manifest(o Object) (map[string]any, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if spec, ok := m["spec"].(map[string]any); ok && len(spec) == 0 {
		delete(m, "spec")
	}
	if md, ok := m["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp")
	}
	return m, nil
}
