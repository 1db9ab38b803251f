package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/inventory/inventorytest"
)

// TestAuditJSONAsEncodingJSON checks a whole audit report, findings with fixes and fstab
// lines, against encoding/json's indentation of the same report.
func TestAuditJSONAsEncodingJSON(t *testing.T) {
	dir := t.TempDir()
	if err := inventorytest.GenerateTree(dir, 20); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	root := NewRoot(IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: io.Discard})
	root.SetArgs([]string{"audit", "--root", dir, "--stall-window", "0", "--fail-on", "none", "-o", "json"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	var compact, want bytes.Buffer
	if err := json.Compact(&compact, out.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := json.Indent(&want, compact.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	want.WriteByte('\n')
	if !bytes.Equal(out.Bytes(), want.Bytes()) {
		t.Errorf("audit -o json differs from encoding/json's indentation:\n%.600s", out.Bytes())
	}
	if !bytes.Contains(out.Bytes(), []byte("\n  \"findings\": [\n    {\n")) {
		t.Errorf("no indented findings: %.300s", out.Bytes())
	}
}
