package policy

import (
	"testing"

	"github.com/nfstune/nfstune/internal/inventory"
)

// A backend's alias (package backend) is accepted wherever a backend is named: a config
// rule, ResolveAs's forced backend and Profile, and each resolves to the canonical name.
func TestBackendAliases(t *testing.T) {
	t.Parallel()
	p, err := Parse("aliases.yaml", []byte(`apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {server: "10.9.*"}
    backend: amazon-efs
  - match: {server: "10.8.*"}
    backend: filestore
`))
	if err != nil {
		t.Fatal(err)
	}
	for server, want := range map[string]string{"10.9.0.1": BackendAWSEFS, "10.8.0.1": BackendGCPFilestore} {
		m := inventory.Mount{Server: server, ServerAddr: server, Backend: BackendGeneric}
		if got := p.Resolve(&m).Backend; got != want {
			t.Errorf("rule for %s: backend %q, want %q", server, got, want)
		}
	}
	m := inventory.Mount{Server: "nfs.example.com", Backend: BackendGeneric}
	if got := p.ResolveAs(&m, "anf", "").Backend; got != BackendAzureNetAppFiles {
		t.Errorf("ResolveAs(anf): backend %q, want %q", got, BackendAzureNetAppFiles)
	}
	prof, err := p.Profile("google-filestore", WorkloadGeneral)
	if err != nil || prof.Backend != BackendGCPFilestore {
		t.Errorf("Profile(google-filestore) = %q, %v; want %q", prof.Backend, err, BackendGCPFilestore)
	}
	if _, err := p.Profile("s3", WorkloadGeneral); err == nil {
		t.Error("Profile(s3): no error")
	}
}
