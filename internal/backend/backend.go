// Package backend names the NFS services nfstune knows, once: each has one canonical name,
// which every command prints (options, audit, plan, k8s volume, bench report, metrics
// labels) and the policy and price files use, and aliases that every command and file
// also accepts for it (Canonical). The facts about each service live elsewhere: the
// profiles in package policy, the performance models in package plan, the server name
// patterns in package inventory.
package backend

import "slices"

// The canonical names.
const (
	AzureFiles       = "azure-files"
	AzureBlobNFS     = "azure-blob-nfs"
	AzureNetAppFiles = "azure-netapp-files"
	AWSEFS           = "aws-efs"
	GCPFilestore     = "gcp-filestore"
	Longhorn         = "longhorn"
	// Generic is any other NFS server.
	Generic = "generic"
)

// names is the one alias table: each backend's canonical name, then its aliases, in the
// order Names lists them. The aliases are the vendors' product names and their usual
// short forms.
var names = [][]string{
	{AzureFiles, "afs", "azurefiles"},
	{AzureBlobNFS, "blob", "blob-nfs"},
	{AzureNetAppFiles, "anf", "netapp"},
	{AWSEFS, "amazon-efs", "efs"},
	{GCPFilestore, "google-filestore", "filestore"},
	{Longhorn},
	{Generic},
}

// Names returns the canonical names, in a stable order.
func Names() []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n[0]
	}
	return out
}

// Aliases returns the other names of the backend called name (canonical or an alias),
// nil for an unknown name.
func Aliases(name string) []string {
	for _, n := range names {
		if slices.Contains(n, name) {
			return slices.Clone(n[1:])
		}
	}
	return nil
}

// Canonical returns the canonical name of the backend called name, its canonical name or
// an alias, and whether there is one.
func Canonical(name string) (string, bool) {
	for _, n := range names {
		if slices.Contains(n, name) {
			return n[0], true
		}
	}
	return "", false
}
