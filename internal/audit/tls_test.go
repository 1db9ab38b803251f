package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nfstune/nfstune/internal/golden"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// tlsPolicy asks for tls on /projects (which has it), mtls on /home (which has it) and
// /scratch (which has none).
const tlsPolicy = `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {export: /projects}
    transportSecurity: tls
  - match: {export: /home}
    transportSecurity: mtls
  - match: {export: /scratch}
    transportSecurity: mtls
`

// readTLSTree reads the synthetic-tls fixture, with or without its tlshd process.
func readTLSTree(t *testing.T, tlshd bool) *inventory.Inventory {
	t.Helper()
	src := filepath.Join("..", "inventory", "testdata", "synthetic-tls")
	root := src
	if !tlshd {
		root = t.TempDir()
		if err := os.CopyFS(root, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(root, "proc", "612")); err != nil {
			t.Fatal(err)
		}
	}
	inv, err := inventory.Read(hostfs.Root(root), inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// TestTransportSecurity: NFS042 on the mount without the TLS its rule asks for, on an mtls
// requirement met by tls too, never on mtls for a tls requirement; NFS043 on each TLS mount
// when no tlshd runs, and neither under the built-in policy with tlshd running.
func TestTransportSecurity(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse("tls.yaml", []byte(tlsPolicy))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		tlshd bool
		pol   *policy.Policy
		want  map[string][]string
	}{
		{"built-in, tlshd running", true, policy.Default(), map[string][]string{}},
		{"rules, tlshd running", true, pol, map[string][]string{"0:72": {"NFS042"}}},
		{"rules, no tlshd", false, pol, map[string][]string{"0:70": {"NFS043"}, "0:71": {"NFS043"}, "0:72": {"NFS042"}}},
	}
	for _, tt := range tests {
		rep := Run(readTLSTree(t, tt.tlshd), tt.pol)
		got := map[string][]string{}
		for _, f := range rep.Findings {
			if f.ID == "NFS042" || f.ID == "NFS043" {
				got[f.Device] = append(got[f.Device], f.ID)
				if f.Severity != SeverityError {
					t.Errorf("%s: %s %s is %s, want error", tt.name, f.Device, f.ID, f.Severity)
				}
			}
		}
		if len(got) != len(tt.want) {
			t.Errorf("%s: findings %v, want %v", tt.name, got, tt.want)
			continue
		}
		for dev, ids := range tt.want {
			if !slices.Equal(got[dev], ids) {
				t.Errorf("%s: %s findings %v, want %v", tt.name, dev, got[dev], ids)
			}
		}
	}
}

// TestSatisfiesTLS is the requirement table: mtls meets tls, tls does not meet mtls.
func TestSatisfiesTLS(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		have, want string
		ok         bool
	}{
		{"none", "", true}, {"tls", "", true},
		{"none", "tls", false}, {"tls", "tls", true}, {"mtls", "tls", true},
		{"none", "mtls", false}, {"tls", "mtls", false}, {"mtls", "mtls", true},
	} {
		if got := satisfiesTLS(tt.have, tt.want); got != tt.ok {
			t.Errorf("satisfiesTLS(%q, %q) = %v, want %v", tt.have, tt.want, got, tt.ok)
		}
	}
}

// TestTLSGolden writes the audit table of the TLS host under the rules above, with tlshd
// and without, against testdata/tls*.table.golden.
func TestTLSGolden(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse("tls.yaml", []byte(tlsPolicy))
	if err != nil {
		t.Fatal(err)
	}
	for name, tlshd := range map[string]bool{"tls": true, "tls-no-tlshd": false} {
		var b bytes.Buffer
		if err := WriteTable(&b, Run(readTLSTree(t, tlshd), pol)); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", name+".table.golden"), b.Bytes())
	}
}
