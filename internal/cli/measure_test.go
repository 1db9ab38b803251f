package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/readahead"
)

// TestApplyMeasure: apply --measure judges each read-ahead change on the traffic before and
// after it, prints the verdicts and keeps them in the journal, where audit -o json shows
// them until revert. A fixture tree has no traffic: too_little_traffic.
func TestApplyMeasure(t *testing.T) {
	t.Parallel()
	dir := copyTree(t)
	common := []string{"--root", dir, "--udev-program", "/usr/local/bin/nfstune"}
	if _, err := runTuneCLI(t, append([]string{"apply", "--dry-run", "--measure", "1s"}, common...)...); err == nil {
		t.Error("apply --dry-run --measure: no error")
	}
	out, err := runTuneCLI(t, append([]string{"apply", "--measure", "10ms"}, common...)...)
	if err != nil {
		t.Fatalf("apply --measure: %v\n%s", err, out)
	}
	for _, want := range []string{"Read-ahead verdicts", "/mnt/share1 (0:53): 128 -> ", "too_little_traffic: application reads 0.0 MiB before"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply --measure output lacks %q:\n%s", want, out)
		}
	}
	audit := func() []readahead.Change {
		out, _, _ := runVerb(t, "audit", "--root", dir, "-o", "json", "--fail-on", "none")
		var doc struct {
			Verdicts []readahead.Change `json:"readahead_verdicts"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("audit -o json: %v\n%s", err, out)
		}
		return doc.Verdicts
	}
	got := audit()
	if len(got) == 0 || got[0].Verdict != readahead.TooLittleTraffic || got[0].ToKB <= got[0].FromKB || got[0].Device == "" {
		t.Errorf("audit's read-ahead verdicts after apply --measure = %+v", got)
	}
	if _, err := runTuneCLI(t, "revert", "--root", dir); err != nil {
		t.Fatal(err)
	}
	if got := audit(); len(got) != 0 {
		t.Errorf("verdicts after revert = %+v, want none", got)
	}
}
