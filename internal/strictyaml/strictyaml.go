// Package strictyaml decodes the YAML and JSON files a user gives nfstune (the policy, Helm
// values, price lists, bench results) with keys that must match exactly. encoding/json, and
// sigs.k8s.io/yaml over it, match a key to a field ignoring case, so a mis-cased key
// (policymode for policyMode) would silently set the field; and yaml.v3's KnownFields
// reports neither the file nor the key the user meant. Check walks the document against the
// Go type and reports every key that names no field, with the file, the line and the
// nearest valid key.
package strictyaml

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
	k8syaml "sigs.k8s.io/yaml"
)

// Codec says which struct tags name a type's keys, and which decoder fills it in.
type Codec int

const (
	// YAML is gopkg.in/yaml.v3: yaml tags (an untagged field is its name in lower case).
	YAML Codec = iota
	// JSON is encoding/json, through sigs.k8s.io/yaml for YAML input: json tags, as the
	// Kubernetes API types carry (an untagged field is its Go name).
	JSON
)

// Decode checks b's keys against v's type (Check), then decodes b into v, a pointer, with
// the codec's decoder. name is the file, for error messages.
func Decode(name string, b []byte, v any, c Codec) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("%s: decoding into %T: want a non-nil pointer", name, v)
	}
	if err := Check(name, b, rv.Type().Elem(), c); err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	switch c {
	case YAML:
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(v); err != nil {
			return located(name, err)
		}
		return nil
	case JSON:
		if err := k8syaml.UnmarshalStrict(b, v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("%s: unknown codec %d", name, c)
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// located rewrites yaml.v3's "line N: msg" errors as "name:N: msg", one per problem.
func located(name string, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		errs := make([]error, 0, len(te.Errors))
		for _, e := range te.Errors {
			errs = append(errs, locatedOne(name, e))
		}
		return errors.Join(errs...)
	}
	return locatedOne(name, err.Error())
}

func locatedOne(name, msg string) error {
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s:%s: %s", name, m[1], strings.TrimPrefix(msg, m[0]))
	}
	return fmt.Errorf("%s: %s", name, strings.TrimPrefix(msg, "yaml: "))
}

// Check parses b as one YAML (or JSON) document and checks that every key of every mapping
// the type t reads as a struct names one of its fields exactly, and that no mapping has a
// key twice. Maps, interfaces and types that decode themselves (an UnmarshalJSON,
// UnmarshalYAML or UnmarshalText method) take any key. Every problem is reported, as
// "name:line: path: message", joined in one error; values of the wrong type are left to the
// decoder. An empty document passes.
func Check(name string, b []byte, t reflect.Type, c Codec) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return located(name, err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		if err != nil {
			return located(name, err)
		}
		return fmt.Errorf("%s:%d: more than one YAML document (want one per file)", name, more.Line)
	}
	w := walker{file: name, codec: c}
	w.walk(&doc, t, "")
	return errors.Join(w.errs...)
}

type walker struct {
	file    string
	codec   Codec
	errs    []error
	inAlias map[*yaml.Node]bool // the aliased nodes being walked
	visits  int
}

func (w *walker) errorf(n *yaml.Node, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	w.errs = append(w.errs, fmt.Errorf("%s:%d: %s", w.file, n.Line, msg))
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// opaque reports whether t decodes itself, so its keys are its own business.
func (w *walker) opaque(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	if p.Implements(textUnmarshaler) {
		return true
	}
	if w.codec == JSON {
		return p.Implements(jsonUnmarshaler)
	}
	return p.Implements(yamlUnmarshaler)
}

// maxVisits bounds the nodes walked: aliases repeat a node wherever they name it, so a
// small file could name millions (yaml.v3 refuses such excessive aliasing when decoding).
const maxVisits = 1 << 20

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) {
	if w.visits++; w.visits == maxVisits {
		w.errorf(n, path, "more than %d values through aliases", maxVisits)
	}
	if w.visits >= maxVisits {
		return
	}
	if n.Kind == yaml.AliasNode {
		// An alias inside the node it names would be walked for ever: each is walked once
		// per path through it, and not again inside itself.
		if n.Alias == nil || w.inAlias[n.Alias] {
			return
		}
		if w.inAlias == nil {
			w.inAlias = map[*yaml.Node]bool{}
		}
		w.inAlias[n.Alias] = true
		defer delete(w.inAlias, n.Alias)
		n = n.Alias
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			w.walk(c, t, path)
		}
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if w.opaque(t) {
		return
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		w.mapping(n, path, w.fields(t))
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		w.mapping(n, path, fields{open: t.Elem()})
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && n.Kind == yaml.SequenceNode:
		for i, c := range n.Content {
			w.walk(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

// fields are the keys a mapping may have and the type of each value; open, when set, is
// the value type of any other key (a map, or yaml.v3's inline map).
type fields struct {
	known map[string]reflect.Type
	open  reflect.Type
}

func (w *walker) mapping(n *yaml.Node, path string, f fields) {
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		if k.Tag == "!!merge" {
			// A merge key (<<: *defaults) brings the keys of another mapping here.
			for _, m := range mergedMappings(v) {
				w.mapping(m, path, f)
			}
			continue
		}
		at := join(path, key)
		if line, dup := seen[key]; dup {
			w.errorf(k, at, "duplicate key (first at line %d)", line)
			continue
		}
		seen[key] = k.Line
		t, ok := f.known[key]
		switch {
		case ok:
			w.walk(v, t, at)
		case f.open != nil:
			w.walk(v, f.open, at)
		default:
			w.errorf(k, at, "unknown key (did you mean %q?)", Nearest(key, slices.Sorted(maps.Keys(f.known))))
		}
	}
}

// mergedMappings returns the mappings a merge key's value names: one, or a list.
func mergedMappings(v *yaml.Node) []*yaml.Node {
	for v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	if v.Kind == yaml.MappingNode {
		return []*yaml.Node{v}
	}
	var out []*yaml.Node
	if v.Kind == yaml.SequenceNode {
		for _, c := range v.Content {
			out = append(out, mergedMappings(c)...)
		}
	}
	return out
}

// fields lists a struct's keys as the codec's decoder reads them: the tag's name, or the
// field's name (lower-cased by yaml.v3); "-" leaves a field out; an embedded struct without
// a name (encoding/json) or marked ",inline" (yaml.v3) brings its own keys.
func (w *walker) fields(t reflect.Type) fields {
	f := fields{known: map[string]reflect.Type{}}
	tagName := "yaml"
	if w.codec == JSON {
		tagName = "json"
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, opts, _ := strings.Cut(sf.Tag.Get(tagName), ",")
		if tag == "-" && opts == "" {
			continue
		}
		inline := w.codec == YAML && slices.Contains(strings.Split(opts, ","), "inline") ||
			w.codec == JSON && sf.Anonymous && tag == ""
		if inline {
			ft := sf.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Struct:
				inner := w.fields(ft)
				maps.Copy(f.known, inner.known)
				if inner.open != nil {
					f.open = inner.open
				}
				continue
			case reflect.Map:
				f.open = ft.Elem()
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if tag == "" {
			tag = sf.Name
			if w.codec == YAML {
				tag = strings.ToLower(tag)
			}
		}
		f.known[tag] = sf.Type
	}
	return f
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Nearest returns the key of valid closest to key: one that differs only in case, else the
// one with the fewest single-character edits (Levenshtein distance), the first in valid's
// order on a tie; "" when valid is empty.
func Nearest(key string, valid []string) string {
	best, bestDist := "", -1
	for _, v := range valid {
		if strings.EqualFold(v, key) {
			return v
		}
		if d := distance(strings.ToLower(key), strings.ToLower(v)); bestDist < 0 || d < bestDist {
			best, bestDist = v, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b, by runes.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
