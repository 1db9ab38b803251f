package inventory

import (
	"net/netip"
	"regexp"
	"strings"

	"github.com/nfstune/nfstune/internal/backend"
	"github.com/nfstune/nfstune/internal/kubelet"
)

// Backend names, the canonical ones of package backend.
const (
	backendAzureFiles   = backend.AzureFiles
	backendAzureBlobNFS = backend.AzureBlobNFS
	backendAWSEFS       = backend.AWSEFS
	backendLonghorn     = backend.Longhorn
	backendGeneric      = backend.Generic
)

// LonghornDriver is Longhorn's CSI driver: it stages an RWX volume, an NFS mount of the
// volume's share-manager, at kubelet's staging path before bind-mounting it into pods.
const LonghornDriver = "driver.longhorn.io"

// isLonghorn reports whether m is a Longhorn RWX volume: staged by Longhorn's CSI driver,
// or served by a share-manager Service (<volume>.longhorn-system.svc[.cluster.local]).
func isLonghorn(m *Mount) bool {
	s := strings.TrimSuffix(strings.ToLower(m.Server), ".")
	if strings.HasSuffix(s, ".longhorn-system.svc") || strings.HasSuffix(s, ".longhorn-system.svc.cluster.local") {
		return true
	}
	for _, mp := range m.MountPoints {
		if d, ok := kubelet.StagingDriver(mp); ok && d == LonghornDriver {
			return true
		}
	}
	return false
}

// reEFS matches an EFS file system's DNS name, "fs-0123abcd.efs.us-east-1.amazonaws.com",
// and its per-AZ mount target name "us-east-1a.fs-0123abcd.efs.us-east-1.amazonaws.com"
// (efs-utils mount_options; also amazonaws.com.cn in China regions).
var reEFS = regexp.MustCompile(`^(?:[a-z0-9-]+\.)?fs-[0-9a-f]{8,40}\.efs\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?$`)

// DetectBackend names the service behind an NFS server from its DNS name:
//
//   - azure-files: <account>.file.core.windows.net, including the private endpoint name
//     <account>.privatelink.file.core.windows.net and the sovereign clouds' file endpoints;
//   - azure-blob-nfs: <account>.blob.core.windows.net (and privatelink.blob);
//   - aws-efs: fs-<id>.efs.<region>.amazonaws.com and <az>.fs-<id>.efs.<region>.amazonaws.com.
//
// Anything else, including every bare IP address, is "generic": Azure NetApp Files and
// Google Filestore are reached by IP address (Filestore instances have no DNS name), so
// those backends come from the user's configuration, matched by address range.
func DetectBackend(server string) string {
	s := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(server)), ".")
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if s == "" {
		return backendGeneric
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return backendGeneric
	}
	for _, suffix := range []string{".core.windows.net", ".core.chinacloudapi.cn", ".core.usgovcloudapi.net"} {
		host, ok := strings.CutSuffix(s, suffix)
		if !ok {
			continue
		}
		switch {
		case strings.HasSuffix(host, ".file") && len(host) > len(".file"):
			return backendAzureFiles
		case strings.HasSuffix(host, ".blob") && len(host) > len(".blob"):
			return backendAzureBlobNFS
		}
	}
	if reEFS.MatchString(s) {
		return backendAWSEFS
	}
	return backendGeneric
}
