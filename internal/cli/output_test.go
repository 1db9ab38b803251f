package cli

import (
	"bytes"
	"encoding/json"
	"testing"

	"sigs.k8s.io/yaml"
)

// -o yaml writes the same document as -o json on the verbs that lacked it: stats (one
// document per report, a YAML stream), bench profiles and version.
func TestYAMLMatchesJSON(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"stats", "--file", savedDir + "after.mountstats", "--since", savedDir + "before.mountstats"},
		{"bench", "profiles"},
		{"version"},
	} {
		jsonOut, stderr, code := runVerb(t, append(args, "-o", "json")...)
		if code != ExitOK {
			t.Fatalf("%v -o json: exit %d: %s", args, code, stderr)
		}
		yamlOut, stderr, code := runVerb(t, append(args, "-o", "yaml")...)
		if code != ExitOK {
			t.Fatalf("%v -o yaml: exit %d: %s", args, code, stderr)
		}
		fromYAML, err := yaml.YAMLToJSON(bytes.TrimPrefix([]byte(yamlOut), []byte("---\n")))
		if err != nil {
			t.Fatalf("%v -o yaml: %v\n%s", args, err, yamlOut)
		}
		var a, b any
		if err := json.Unmarshal([]byte(jsonOut), &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(fromYAML, &b); err != nil {
			t.Fatal(err)
		}
		aj, _ := json.Marshal(a)
		bj, _ := json.Marshal(b)
		if !bytes.Equal(aj, bj) {
			t.Errorf("%v: -o yaml differs from -o json:\n%s\n%s", args, bj, aj)
		}
	}
}
