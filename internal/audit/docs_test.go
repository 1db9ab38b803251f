package audit

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// emittedIDs returns every finding ID this package's code can emit: each "NFSnnn" string
// literal in its non-test Go files.
func emittedIDs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	id := regexp.MustCompile(`"(NFS\d{3})"`)
	var ids []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range id.FindAllSubmatch(b, -1) {
			ids = append(ids, string(m[1]))
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// TestTroubleshootingCoversEveryFinding: docs/troubleshooting.md has a section
// ("### NFSnnn: ...") for every finding ID the audit can emit, and none for an ID it
// cannot, so the page cannot drift from the rules.
func TestTroubleshootingCoversEveryFinding(t *testing.T) {
	t.Parallel()
	emitted := emittedIDs(t)
	if len(emitted) < 20 {
		t.Fatalf("found %d finding IDs in the code, want the audit's whole set: %v", len(emitted), emitted)
	}
	doc, err := os.ReadFile("../../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile(`(?m)^### (NFS\d{3}): `).FindAllSubmatch(doc, -1) {
		id := string(m[1])
		if slices.Contains(documented, id) {
			t.Errorf("docs/troubleshooting.md has two sections for %s", id)
		}
		documented = append(documented, id)
	}
	for _, id := range emitted {
		if !slices.Contains(documented, id) {
			t.Errorf("docs/troubleshooting.md has no section \"### %s: ...\": add what it means and how to fix it", id)
		}
	}
	for _, id := range documented {
		if !slices.Contains(emitted, id) {
			t.Errorf("docs/troubleshooting.md documents %s, which the audit does not emit", id)
		}
	}
}
