package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/nfstune/nfstune/internal/golden"
)

// The chart's README (helm/nfstune/README.md, packaged with the chart by `make chart`) is
// written from values.yaml, each key with the comment above it and its default, and from
// values.schema.json, what the key accepts. TestChartReadme regenerates it and fails when the
// committed file differs; `make chart-readme` (UPDATE_GOLDEN=1) rewrites it.

const chartReadmeIntro = `# The nfstune Helm chart

This chart runs ` + "`nfstune agent`" + ` on every Linux node (mode ` + "`agent`" + `), or installs nfstune's
udev rule on each node from an init container (mode ` + "`installer`" + `) and undoes that
before the release is uninstalled (mode ` + "`revert`" + `). The agent starts in
observe mode: it audits every NFS mount, exports metrics and logs what it would change, and
writes nothing until ` + "`agent.policyMode: enforce`" + `.

` + "```" + `
helm install nfstune deploy/helm/nfstune                                  # observe mode
helm upgrade nfstune deploy/helm/nfstune --set agent.policyMode=enforce   # then enforce
` + "```" + `

Do not pass ` + "`--create-namespace`" + `: the chart creates its namespace with the Pod Security
label the agent needs. ` + "`nfstune k8s render --config values.yaml`" + ` renders the same objects
without Helm. What each privilege is for, installer mode and node pools:
[docs/kubernetes.md](../../../docs/kubernetes.md).

This file is generated from values.yaml's comments and values.schema.json
(` + "`make chart-readme`" + `); edit those, not this.

## Values
`

// schemaNode is the part of values.schema.json the README shows.
type schemaNode struct {
	Type       any                    `json:"type"`
	Enum       []any                  `json:"enum"`
	Pattern    string                 `json:"pattern"`
	Properties map[string]*schemaNode `json:"properties"`
}

// accepts says what the schema allows for a key, or "" when it says nothing.
func (s *schemaNode) accepts() string {
	if s == nil {
		return ""
	}
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, v := range s.Enum {
			vals[i] = fmt.Sprintf("`%v`", v)
		}
		return "one of " + strings.Join(vals, ", ")
	}
	var types []string
	switch t := s.Type.(type) {
	case string:
		types = []string{t}
	case []any:
		for _, v := range t {
			types = append(types, fmt.Sprint(v))
		}
	}
	out := strings.Join(types, " or ")
	if s.Pattern != "" {
		out += fmt.Sprintf(" matching `%s`", s.Pattern)
	}
	return out
}

// commentText turns a YAML comment block into Markdown: prose lines joined into
// paragraphs, lines indented past the "# " (examples) into a code block.
func commentText(c string) string {
	var b strings.Builder
	inCode := false
	for line := range strings.SplitSeq(c, "\n") {
		line = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(line), "#"), " ")
		code := strings.HasPrefix(line, "  ")
		switch {
		case code && !inCode:
			b.WriteString("\n\n```yaml\n")
		case !code && inCode:
			b.WriteString("```\n\n")
		case !code && b.Len() > 0 && line != "":
			b.WriteString(" ")
		}
		inCode = code
		if code {
			b.WriteString(strings.TrimPrefix(line, "  ") + "\n")
		} else if line == "" {
			b.WriteString("\n\n")
		} else {
			b.WriteString(line)
		}
	}
	if inCode {
		b.WriteString("```\n")
	}
	return strings.TrimSpace(b.String())
}

// defaultText renders a key's default: a scalar inline, anything else as a YAML block.
func defaultText(v *yaml.Node) (inline, block string) {
	if v.Kind == yaml.ScalarNode && !strings.Contains(v.Value, "\n") {
		if v.Value == "" {
			return `""`, ""
		}
		return v.Value, ""
	}
	if v.Kind == yaml.ScalarNode {
		return "", v.Value
	}
	c := *v
	c.HeadComment, c.LineComment, c.FootComment = "", "", ""
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&c); err != nil {
		return "", err.Error()
	}
	if s := strings.TrimSuffix(out.String(), "\n"); !strings.Contains(s, "\n") {
		return s, ""
	}
	return "", out.String()
}

// writeValues writes one section per key of a values mapping, nested keys as dotted paths;
// a mapping whose keys all carry plain values is written key by key, under its own comment.
func writeValues(b *bytes.Buffer, prefix string, m *yaml.Node, schema *schemaNode) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		path := prefix + k.Value
		var sub *schemaNode
		if schema != nil {
			sub = schema.Properties[k.Value]
		}
		fmt.Fprintf(b, "\n### `%s`\n\n", path)
		comment := strings.TrimSpace(k.HeadComment + "\n" + v.LineComment)
		if v.Kind == yaml.MappingNode && len(v.Content) > 0 {
			if comment != "" {
				b.WriteString(commentText(comment) + "\n")
			} else {
				fmt.Fprintf(b, "The keys below `%s`.\n", path)
			}
			writeValues(b, path+".", v, sub)
			continue
		}
		inline, block := defaultText(v)
		if inline != "" {
			fmt.Fprintf(b, "Default: `%s`", inline)
		} else {
			b.WriteString("Default:\n\n```yaml\n" + strings.TrimRight(block, "\n") + "\n```\n")
		}
		if a := sub.accepts(); a != "" {
			if inline != "" {
				b.WriteString("; ")
			} else {
				b.WriteString("\n")
			}
			b.WriteString("accepts " + a + ".")
		} else if inline != "" {
			b.WriteString(".")
		}
		b.WriteString("\n")
		if comment != "" {
			b.WriteString("\n" + commentText(comment) + "\n")
		}
	}
}

// chartReadme generates the chart's README from its values and schema.
func chartReadme(values, schemaJSON []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(values, &doc); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("values.yaml: not a mapping")
	}
	var schema schemaNode
	if err := json.Unmarshal(schemaJSON, &schema); err != nil {
		return nil, fmt.Errorf("values.schema.json: %w", err)
	}
	var b bytes.Buffer
	b.WriteString(chartReadmeIntro)
	writeValues(&b, "", doc.Content[0], &schema)
	return b.Bytes(), nil
}

func TestChartReadme(t *testing.T) {
	values, err := os.ReadFile("helm/nfstune/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	schema, err := os.ReadFile("helm/nfstune/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := chartReadme(values, schema)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "helm/nfstune/README.md", got)
}
