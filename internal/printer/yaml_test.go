package printer

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestWriteYAMLAsSigsYAML: WriteYAML writes the bytes sigs.k8s.io/yaml.Marshal writes, for
// values of every shape (an object with lists, nested lists and objects, empty ones, keys
// go-yaml quotes or sorts by their digits, numbers of every Go type, strings go-yaml quotes
// or folds, and values that are not objects) and for random trees of them.
func TestWriteYAMLAsSigsYAML(t *testing.T) {
	type mount struct {
		Device   string            `json:"device"`
		Options  map[string]string `json:"options,omitempty"`
		Findings []string          `json:"findings"`
		KB       int               `json:"read_ahead_kb"`
		Bytes    uint64            `json:"bytes"`
		Rate     float64           `json:"rate"`
		Stalled  *bool             `json:"stalled"`
	}
	type report struct {
		Mounts  []mount        `json:"mounts"`
		Summary map[string]int `json:"summary"`
		Empty   []mount        `json:"empty"`
		None    []mount        `json:"none"`
		Host    string         `json:"host"`
	}
	yes := true
	long := strings.Repeat("a fix that reads ", 12)
	cases := map[string]any{
		"report": report{
			Mounts: []mount{
				{Device: "0:63", Options: map[string]string{"vers": "4.2", "on": "yes", "nconnect": "4"}, Findings: []string{"NFS003", long}, KB: 15360, Bytes: math.MaxUint64, Rate: 1.5e-7, Stalled: &yes},
				{Device: "0:64", KB: 128, Rate: 1e21},
				{Device: "with: colon", Findings: []string{}, Rate: math.Copysign(0, -1)},
			},
			Summary: map[string]int{"mount10": 1, "mount9": 2, "Mount": 3, "_x": 4, "9": 5, "true": 6},
			Empty:   []mount{},
			Host:    "node-1\n<&>",
		},
		"list":               []any{map[string]any{"a": []any{1, []any{}, map[string]any{}}}, "x", 2.5},
		"scalar":             "yes",
		"nil":                nil,
		"empty object":       map[string]any{},
		"key needing quotes": map[string]any{"on": []any{1, 2}, "a: b": []any{"c"}, "- x": 1, "": []any{true}},
		"big ints":           map[string]any{"max": int64(math.MaxInt64), "min": int64(math.MinInt64), "u": uint64(math.MaxUint64)},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		cases[fmt.Sprintf("random %d", i)] = randomTree(r, 4)
	}
	for name, v := range cases {
		want, err := yaml.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got bytes.Buffer
		if err := WriteYAML(&got, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: WriteYAML wrote\n%s\nsigs.k8s.io/yaml writes\n%s", name, got.Bytes(), want)
		}
	}
}

// randomTree is a random JSON-like value at most depth deep, an object at the top.
func randomTree(r *rand.Rand, depth int) any {
	words := []string{"a", "b10", "b9", "on", "null", "x y", "k: v", "1", "01", "-1", "1e3", "ü", "", "#c", "'q'", "\"d\""}
	var value func(d int) any
	value = func(d int) any {
		switch k := r.IntN(9); {
		case d == 0 || k < 3:
			switch r.IntN(7) {
			case 0:
				return r.IntN(2000) - 1000
			case 1:
				return r.Float64() * math.Pow(10, float64(r.IntN(40)-20))
			case 2:
				return r.Uint64()
			case 3:
				return r.IntN(2) == 0
			case 4:
				return nil
			default:
				return words[r.IntN(len(words))] + strings.Repeat(" w", r.IntN(50))
			}
		case k < 6:
			l := make([]any, r.IntN(4))
			for i := range l {
				l[i] = value(d - 1)
			}
			return l
		default:
			m := map[string]any{}
			for range r.IntN(5) {
				m[words[r.IntN(len(words))]] = value(d - 1)
			}
			return m
		}
	}
	top := map[string]any{}
	for range r.IntN(6) {
		top[words[r.IntN(len(words))]] = value(depth)
	}
	return top
}
