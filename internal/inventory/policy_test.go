package inventory_test

import (
	"testing"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// TestBackendNamesMatchPolicy keeps the names DetectBackend returns equal to the policy
// package's backend constants, which the inventory cannot import.
func TestBackendNamesMatchPolicy(t *testing.T) {
	t.Parallel()
	for server, want := range map[string]string{
		"a.file.core.windows.net":                 policy.BackendAzureFiles,
		"a.blob.core.windows.net":                 policy.BackendAzureBlobNFS,
		"fs-0123abcd.efs.eu-west-1.amazonaws.com": policy.BackendAWSEFS,
		"10.0.0.1": policy.BackendGeneric,
	} {
		if got := inventory.DetectBackend(server); got != want {
			t.Errorf("DetectBackend(%q) = %q, want %q", server, got, want)
		}
	}
	inv, warnings := inventory.ParseMountInfo([]byte("30 22 0:60 / /mnt/rwx rw - nfs4 pvc-9a.longhorn-system.svc:/pvc-9a rw,vers=4.1\n"))
	if len(inv) != 1 || inv[0].Backend != policy.BackendLonghorn {
		t.Errorf("a share-manager's mount: %+v (%q); want backend %q", inv, warnings, policy.BackendLonghorn)
	}
}
