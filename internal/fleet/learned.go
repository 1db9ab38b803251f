package fleet

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/nfstune/nfstune/internal/printer"
)

// LearnedVolume is the read-ahead the agents of a fleet settled on for one volume, across
// the nodes that mount it.
type LearnedVolume struct {
	Server string `json:"server"`
	Export string `json:"export"`
	// ReadAheadKB is the value most nodes learned; of values learned by as many nodes, the
	// smallest: a window too small costs a streaming reader some speed, one too large can
	// cost a memory-limited or random reader most of it.
	ReadAheadKB int `json:"readAheadKB"`
	// Nodes is each node's value, by node name.
	Nodes []NodeLearned `json:"nodes"`
}

// NodeLearned is one node's learned value of a volume.
type NodeLearned struct {
	Node        string `json:"node"`
	ReadAheadKB int    `json:"readAheadKB"`
}

// Learned gathers the learned values the reachable agents of f list, one entry per volume,
// sorted by server and export.
func Learned(f *Fleet) []LearnedVolume {
	byVolume := map[[2]string]*LearnedVolume{}
	for _, n := range f.Nodes {
		if n.Agent == nil {
			continue
		}
		for _, l := range n.Agent.Learned {
			k := [2]string{l.Server, l.Export}
			v := byVolume[k]
			if v == nil {
				v = &LearnedVolume{Server: l.Server, Export: l.Export}
				byVolume[k] = v
			}
			v.Nodes = append(v.Nodes, NodeLearned{Node: n.Name, ReadAheadKB: l.ReadAheadKB})
		}
	}
	out := make([]LearnedVolume, 0, len(byVolume))
	for _, k := range slices.SortedFunc(maps.Keys(byVolume), func(a, b [2]string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	}) {
		v := byVolume[k]
		slices.SortFunc(v.Nodes, func(a, b NodeLearned) int { return strings.Compare(a.Node, b.Node) })
		count := map[int]int{}
		for _, n := range v.Nodes {
			count[n.ReadAheadKB]++
		}
		for kb, c := range count {
			if best := count[v.ReadAheadKB]; c > best || c == best && kb < v.ReadAheadKB || v.ReadAheadKB == 0 {
				v.ReadAheadKB = kb
			}
		}
		out = append(out, *v)
	}
	return out
}

// WriteLearnedTable writes one line per volume: its value and how many nodes learned it,
// with the others' values.
func WriteLearnedTable(w io.Writer, vols []LearnedVolume) error {
	ew := printer.New(w)
	if len(vols) == 0 {
		ew.Printf("no agent has learned a read-ahead: no adaptive rule has settled on a mount yet (docs/agent.md, Adaptive read-ahead)\n")
		return ew.Err()
	}
	cols := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	tw := printer.New(cols)
	tw.Printf("SERVER\tEXPORT\tREAD-AHEAD\tNODES\tOTHER VALUES\n")
	for _, v := range vols {
		same := 0
		var others []string
		for _, n := range v.Nodes {
			if n.ReadAheadKB == v.ReadAheadKB {
				same++
			} else {
				others = append(others, fmt.Sprintf("%s: %d KiB", n.Node, n.ReadAheadKB))
			}
		}
		tw.Printf("%s\t%s\t%d KiB\t%d of %d\t%s\n", v.Server, v.Export, v.ReadAheadKB, same, len(v.Nodes), orDash(strings.Join(others, ", ")))
	}
	if err := cols.Flush(); err != nil {
		return err
	}
	return ew.Err()
}

// learnedPolicy is the policy file LearnedPolicy writes.
type learnedPolicy struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Rules      []learnedRule `json:"rules"`
}

type learnedRule struct {
	Match          learnedMatch `json:"match"`
	ReadAheadKB    int          `json:"readAheadKB"`
	ReadAheadExact bool         `json:"readAheadExact"`
}

type learnedMatch struct {
	Server string `json:"server"`
	Export string `json:"export"`
}

// WriteLearnedPolicy writes vols as a policy an admin can pin: one rule per volume, its
// server and export matched literally (glob characters escaped), its value exact, so that
// apply, the udev helper and the agent set it from a mount's first second, on every node.
func WriteLearnedPolicy(w io.Writer, vols []LearnedVolume) error {
	p := learnedPolicy{APIVersion: "nfstune.io/v1alpha1", Kind: "Policy", Rules: []learnedRule{}}
	for _, v := range vols {
		p.Rules = append(p.Rules, learnedRule{Match: learnedMatch{Server: globLiteral(v.Server), Export: globLiteral(v.Export)},
			ReadAheadKB: v.ReadAheadKB, ReadAheadExact: true})
	}
	b, err := yaml.Marshal(p)
	if err != nil {
		return err
	}
	ew := printer.New(w)
	ew.Printf("# The read-ahead nfstune's agents settled on per volume (kubectl nfstune learned), pinned.\n")
	ew.Printf("# Rules match in order: put these before broader rules of your policy.\n")
	if _, err := ew.Write(b); err != nil {
		return err
	}
	return ew.Err()
}

// globLiteral escapes path.Match's special characters, so that the pattern matches s alone.
func globLiteral(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
