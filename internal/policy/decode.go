package policy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nfstune/nfstune/internal/strictyaml"
)

// decoder walks a yaml.v3 node tree strictly: every key must be known, every value must have
// the expected type, and every problem is recorded with the file, line and key instead of
// stopping at the first one.
type decoder struct {
	file string
	errs []error
}

// errorf records a problem at node n for the dotted key path.
func (d *decoder) errorf(n *yaml.Node, key, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	msg := fmt.Sprintf(format, args...)
	if key == "" {
		d.errs = append(d.errs, fmt.Errorf("%s:%d: %s", d.file, line, msg))
		return
	}
	d.errs = append(d.errs, fmt.Errorf("%s:%d: %s: %s", d.file, line, key, msg))
}

func (d *decoder) err() error { return errors.Join(d.errs...) }

// join builds a dotted key path.
func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// fields walks a mapping node and calls the handler registered for each key. Unknown and
// duplicate keys are errors. It returns false when n is not a mapping.
func (d *decoder) fields(n *yaml.Node, path string, handlers map[string]func(v *yaml.Node, key string)) bool {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping, got %s", kindName(n))
		return false
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := join(path, k.Value)
		if seen[k.Value] {
			d.errorf(k, key, "duplicate key")
			continue
		}
		seen[k.Value] = true
		h, ok := handlers[k.Value]
		if !ok {
			known := knownKeys(handlers)
			d.errorf(k, key, "unknown key (did you mean %q? want one of %s)", strictyaml.Nearest(k.Value, known), strings.Join(known, ", "))
			continue
		}
		h(v, key)
	}
	return true
}

func knownKeys(handlers map[string]func(*yaml.Node, string)) []string {
	return slices.Sorted(maps.Keys(handlers))
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "an unexpected node"
}

func (d *decoder) scalar(n *yaml.Node, key string) bool {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.errorf(n, key, "want a value, got %s", kindName(n))
		return false
	}
	return true
}

// str decodes a string scalar.
func (d *decoder) str(n *yaml.Node, key string) (string, bool) {
	if !d.scalar(n, key) {
		return "", false
	}
	return n.Value, true
}

// integer decodes an integer scalar.
func (d *decoder) integer(n *yaml.Node, key string) (int64, bool) {
	if !d.scalar(n, key) {
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if n.Tag != "!!int" || err != nil {
		d.errorf(n, key, "want an integer, got %q", n.Value)
		return 0, false
	}
	return v, true
}

// size decodes a non-negative integer that must fit an int.
func (d *decoder) size(n *yaml.Node, key string) (int, bool) {
	v, ok := d.integer(n, key)
	if !ok {
		return 0, false
	}
	if v < 0 {
		d.errorf(n, key, "must not be negative, got %d", v)
		return 0, false
	}
	if v > 1<<31-1 {
		d.errorf(n, key, "%d is too large", v)
		return 0, false
	}
	return int(v), true
}

// boolean decodes a true/false scalar.
func (d *decoder) boolean(n *yaml.Node, key string) (bool, bool) {
	if !d.scalar(n, key) {
		return false, false
	}
	if n.Tag != "!!bool" {
		d.errorf(n, key, "want true or false, got %q", n.Value)
		return false, false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		d.errorf(n, key, "want true or false, got %q", n.Value)
		return false, false
	}
	return b, true
}

// strings decodes a list of string scalars.
func (d *decoder) strings(n *yaml.Node, key string) ([]string, bool) {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, key, "want a list, got %s", kindName(n))
		return nil, false
	}
	out := make([]string, 0, len(n.Content))
	ok := true
	for i, c := range n.Content {
		s, good := d.str(c, fmt.Sprintf("%s[%d]", key, i))
		if !good {
			ok = false
			continue
		}
		out = append(out, s)
	}
	return out, ok
}
