package backend

import (
	"slices"
	"testing"
)

func TestCanonical(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"aws-efs": AWSEFS, "amazon-efs": AWSEFS, "efs": AWSEFS,
		"gcp-filestore": GCPFilestore, "google-filestore": GCPFilestore, "filestore": GCPFilestore,
		"anf": AzureNetAppFiles, "afs": AzureFiles, "blob": AzureBlobNFS, "generic": Generic, "longhorn": Longhorn,
	} {
		if got, ok := Canonical(in); !ok || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "EFS", "s3", "aws"} {
		if got, ok := Canonical(in); ok {
			t.Errorf("Canonical(%q) = %q, want none", in, got)
		}
	}
}

// Every name, canonical or alias, names one backend.
func TestNamesUnique(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, c := range Names() {
		for _, n := range append([]string{c}, Aliases(c)...) {
			if prev, ok := seen[n]; ok {
				t.Errorf("%q names %s and %s", n, prev, c)
			}
			seen[n] = c
		}
	}
	if !slices.Contains(Names(), Generic) {
		t.Error("no generic backend")
	}
}
