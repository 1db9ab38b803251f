package strictyaml

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

type inner struct {
	PolicyMode string `json:"policyMode" yaml:"policyMode"`
	Resync     string `json:"resync" yaml:"resync"`
}

type Embedded struct {
	Shared string `json:"shared"`
}

type doc struct {
	Embedded
	Name     string            `json:"name" yaml:"name"`
	Agent    inner             `json:"agent" yaml:"agent"`
	Items    []inner           `json:"items" yaml:"items"`
	Labels   map[string]string `json:"labels" yaml:"labels"`
	ByName   map[string]inner  `json:"byName" yaml:"byName"`
	Quantity resource.Quantity `json:"quantity" yaml:"-"`
	Any      map[string]any    `json:"any" yaml:"any"`
	Skipped  string            `json:"-" yaml:"-"`
	Untagged string
}

type yamlInline struct {
	inner `yaml:",inline"`
	Extra map[string]int `yaml:",inline"`
}

// laughs names 64^4 mappings through four levels of aliases in a few kilobytes.
var laughs = func() string {
	var b strings.Builder
	b.WriteString("a: &a [{resync: x}, {resync: y}]\n")
	for i, name := range []string{"b", "c", "d", "e"} {
		prev := string(rune('a' + i))
		b.WriteString(name + ": &" + name + " [" + strings.Repeat("*"+prev+", ", 63) + "*" + prev + "]\n")
	}
	return b.String()
}()

var checkTests = []struct {
	name  string
	codec Codec
	t     reflect.Type
	in    string
	want  []string // substrings of the error, each; none: no error
}{
	{name: "exact keys", codec: JSON, t: reflect.TypeFor[doc](), in: "name: a\nshared: s\nagent: {policyMode: enforce}\nitems: [{resync: 1s}]\nlabels: {Any-Key: x}\nbyName: {x: {resync: 2s}}\nquantity: 1Gi\nany: {whatever: {deep: 1}}\nUntagged: u\n"},
	{name: "mis-cased key", codec: JSON, t: reflect.TypeFor[doc](), in: "agent:\n  policymode: enforce\n",
		want: []string{`values.yaml:2: agent.policymode: unknown key (did you mean "policyMode"?)`}},
	{name: "mis-cased in a list", codec: JSON, t: reflect.TypeFor[doc](), in: "items:\n  - resync: 1s\n  - Resync: 2s\n",
		want: []string{`values.yaml:3: items[1].Resync: unknown key (did you mean "resync"?)`}},
	{name: "mis-cased in a map's value", codec: JSON, t: reflect.TypeFor[doc](), in: "byName:\n  x: {PolicyMode: a}\n",
		want: []string{`values.yaml:2: byName.x.PolicyMode: unknown key (did you mean "policyMode"?)`}},
	{name: "misspelt", codec: JSON, t: reflect.TypeFor[doc](), in: "agent: {polcyMode: enforce}\n",
		want: []string{`agent.polcyMode: unknown key (did you mean "policyMode"?)`}},
	{name: "every problem", codec: JSON, t: reflect.TypeFor[doc](), in: "Name: a\nagent: {resyncs: 1s}\n",
		want: []string{`values.yaml:1: Name: unknown key (did you mean "name"?)`, `values.yaml:2: agent.resyncs: unknown key (did you mean "resync"?)`}},
	{name: "untagged field by its Go name", codec: JSON, t: reflect.TypeFor[doc](), in: "untagged: u\n",
		want: []string{`untagged: unknown key (did you mean "Untagged"?)`}},
	{name: "left-out field", codec: JSON, t: reflect.TypeFor[doc](), in: "Skipped: s\n", want: []string{`Skipped: unknown key`}},
	{name: "duplicate key", codec: JSON, t: reflect.TypeFor[doc](), in: "name: a\nname: b\n", want: []string{`values.yaml:2: name: duplicate key (first at line 1)`}},
	{name: "duplicate map key", codec: JSON, t: reflect.TypeFor[doc](), in: "labels:\n  a: x\n  a: y\n", want: []string{`labels.a: duplicate key`}},
	{name: "JSON input", codec: JSON, t: reflect.TypeFor[doc](), in: "{\"agent\": {\n\"policymode\": \"enforce\"}}\n",
		want: []string{`values.yaml:2: agent.policymode: unknown key (did you mean "policyMode"?)`}},
	{name: "merge key", codec: JSON, t: reflect.TypeFor[doc](), in: "base: &b {Resync: 1s}\n",
		want: []string{`base: unknown key`}},
	{name: "merged keys checked", codec: YAML, t: reflect.TypeFor[map[string]inner](), in: "a: &b {resync: 1s}\nc:\n  <<: *b\n  policymode: x\n",
		want: []string{`c.policymode: unknown key (did you mean "policyMode"?)`}},
	{name: "yaml inline", codec: YAML, t: reflect.TypeFor[yamlInline](), in: "policyMode: a\nanything: 1\n"},
	{name: "two documents", codec: YAML, t: reflect.TypeFor[inner](), in: "resync: a\n---\nresync: b\n", want: []string{`values.yaml:2: more than one YAML document`}},
	{name: "alias of its own parent", codec: JSON, t: reflect.TypeFor[doc](), in: "byName: &x\n  a: *x\n", want: []string{"values.yaml"}},
	{name: "aliases that multiply", codec: JSON, t: reflect.TypeFor[map[string][][][][]inner](), in: laughs, want: []string{"through aliases"}},
	{name: "empty", codec: YAML, t: reflect.TypeFor[inner](), in: ""},
	{name: "syntax", codec: YAML, t: reflect.TypeFor[inner](), in: "resync: [\n", want: []string{`values.yaml:1: did not find expected node content`}},
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tt := range checkTests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check("values.yaml", []byte(tt.in), tt.t, tt.codec)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check = nil, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check = %v\nwant %q in it", err, w)
				}
			}
		})
	}
}

// TestDecode: the key check comes first, so a mis-cased key never reaches encoding/json,
// which would take it for the field.
func TestDecode(t *testing.T) {
	t.Parallel()
	var v inner
	if err := Decode("v.yaml", []byte("policymode: enforce\n"), &v, JSON); err == nil || v.PolicyMode != "" {
		t.Errorf("mis-cased key: %+v, %v; want an error and nothing set", v, err)
	}
	if err := Decode("v.yaml", []byte("policyMode: enforce\n"), &v, JSON); err != nil || v.PolicyMode != "enforce" {
		t.Errorf("JSON codec: %+v, %v", v, err)
	}
	var y inner
	if err := Decode("v.yaml", []byte("policyMode: enforce\nresync: 1s\n"), &y, YAML); err != nil || y != (inner{"enforce", "1s"}) {
		t.Errorf("YAML codec: %+v, %v", y, err)
	}
	if err := Decode("v.yaml", []byte("resync: [1]\n"), &y, YAML); err == nil || !strings.HasPrefix(err.Error(), "v.yaml:1: cannot unmarshal") {
		t.Errorf("wrong type: %v, want an error naming the file and line", err)
	}
	if err := Decode("v.yaml", []byte("x: 1\n"), y, YAML); err == nil {
		t.Error("decoding into a value, not a pointer: no error")
	}
}

func TestNearest(t *testing.T) {
	t.Parallel()
	valid := []string{"mode", "policyMode", "resync", "logLevel"}
	for key, want := range map[string]string{
		"policymode": "policyMode", "POLICYMODE": "policyMode", "polcyMode": "policyMode",
		"Mode": "mode", "resynk": "resync", "loglevel": "logLevel", "zzzzzzzzzzzz": "mode",
	} {
		if got := Nearest(key, valid); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", key, got, want)
		}
	}
	if got := Nearest("a", nil); got != "" {
		t.Errorf("Nearest with no keys = %q", got)
	}
}

func FuzzCheck(f *testing.F) {
	for _, tt := range checkTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = Check("f.yaml", []byte(s), reflect.TypeFor[doc](), JSON) // must never panic
		_ = Check("f.yaml", []byte(s), reflect.TypeFor[yamlInline](), YAML)
	})
}
