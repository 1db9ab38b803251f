package render

import (
	"errors"
	"fmt"
	"net"
	"path"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nfstune/nfstune/internal/policy"
)

// Volume drivers nfstune renders for.
const (
	// DriverAzureFile is kubernetes-sigs/azurefile-csi-driver, file.csi.azure.com, with
	// protocol nfs (Azure Files NFS 4.1).
	DriverAzureFile = "azurefile-csi"
	// DriverBlob is kubernetes-sigs/blob-csi-driver, blob.csi.azure.com, with protocol nfs
	// (Blob NFS 3.0).
	DriverBlob = "blob-csi"
	// DriverNFS is kubernetes-csi/csi-driver-nfs, nfs.csi.k8s.io, for any NFS server.
	DriverNFS = "nfs-csi"
	// DriverEFS is kubernetes-sigs/aws-efs-csi-driver, efs.csi.aws.com, which mounts with
	// efs-utils (mount -t efs) through efs-proxy.
	DriverEFS = "efs-csi"
	// DriverFilestore is kubernetes-sigs/gcp-filestore-csi-driver,
	// filestore.csi.storage.gke.io.
	DriverFilestore = "filestore-csi"
	// DriverInTree is the in-tree nfs volume of a PersistentVolume.
	DriverInTree = "in-tree"
)

// Drivers lists the drivers in the order help text shows them.
func Drivers() []string {
	return []string{DriverAzureFile, DriverBlob, DriverEFS, DriverFilestore, DriverNFS, DriverInTree}
}

// CSI driver names.
const (
	csiAzureFile = "file.csi.azure.com"
	csiBlob      = "blob.csi.azure.com"
	csiNFS       = "nfs.csi.k8s.io"
	csiEFS       = "efs.csi.aws.com"
	csiFilestore = "filestore.csi.storage.gke.io"
)

// efsDefaults are the options efs-utils adds to a mount that lacks them
// (efs_utils_common/mount_options.py get_nfs_mount_options; man mount.efs).
var efsDefaults = []string{"nfsvers=4.1", "rsize=1048576", "wsize=1048576", "hard", "timeo=600", "retrans=2", "noresvport"}

// efsFileSystemID is an EFS file system ID as the driver's volume handles and fileSystemId
// carry it.
var efsFileSystemID = regexp.MustCompile(`^fs-[0-9a-f]+$`)

// VolumeSpec describes the volume to render.
type VolumeSpec struct {
	// Name names the PersistentVolume and PersistentVolumeClaim, or the StorageClass.
	Name string
	// Namespace is the PersistentVolumeClaim's namespace.
	Namespace string
	Driver    string
	// Static renders a PersistentVolume bound to a PersistentVolumeClaim for an existing
	// share; otherwise a StorageClass that provisions shares.
	Static bool
	// Server is the NFS server (for Azure, the storage account's endpoint).
	Server string
	// Export is the exported path: /<account>/<share> on Azure Files, /<account>/<container>
	// on Blob NFS, any path elsewhere.
	Export string
	// Size is the capacity of a static volume, e.g. "100Gi".
	Size string
	// Options are the profile's mount options, as mount -o words.
	Options []string
	// ReadAheadKB is the profile's read-ahead; it is not a mount option.
	ReadAheadKB int
}

// optionKey is the name of a mount option: "vers" for "vers=4.1".
func optionKey(o string) string {
	k, _, _ := strings.Cut(o, "=")
	return k
}

func hasOption(opts []string, keys ...string) bool {
	return slices.ContainsFunc(opts, func(o string) bool { return slices.Contains(keys, optionKey(o)) })
}

// driverOptions returns the mount options worth writing for a driver and a warning for
// each option the driver forces, drops or adds by itself.
func driverOptions(driver string, opts []string) (kept, warnings []string) {
	drop := func(forced string, keys ...string) {
		for _, o := range opts {
			if slices.Contains(keys, optionKey(o)) {
				warnings = append(warnings, fmt.Sprintf("%s: dropped %q: the driver always mounts with %s and fails or overrides when it is given", driver, o, forced))
			} else {
				kept = append(kept, o)
			}
		}
	}
	switch driver {
	case DriverAzureFile:
		// azurefile-csi nodeserver.go joins vers=4,minorversion=1,sec=sys to every NFS mount;
		// a PV with nfsvers=4.1 broke on a driver upgrade (azurefile-csi-driver#1692).
		drop("vers=4,minorversion=1,sec=sys", "vers", "nfsvers", "minorversion", "sec")
		// appendDefaultNfsMountOptions, unless the node plugin's flags turn it off.
		if !hasOption(opts, "noresvport", "resvport") {
			warnings = append(warnings, driver+": the driver adds noresvport (node flag --append-noresvport-option, default true)")
		}
		if !hasOption(opts, "actimeo", "acregmin", "acregmax", "acdirmin", "acdirmax") {
			warnings = append(warnings, driver+": the driver adds actimeo=30 (node flag --append-actimeo-option, default true)")
		}
	case DriverBlob:
		// blob-csi nodeserver.go mounts sec=sys,vers=3,nolock.
		drop("sec=sys,vers=3,nolock", "vers", "nfsvers", "sec", "nolock", "lock")
		if hasOption(opts, "nconnect") {
			warnings = append(warnings, driver+": nconnect needs an Azure kernel with sunrpc enable_azure_nconnect; on nodes without it (Azure Linux) the aznfs mount fails")
		}
		for _, o := range opts {
			if k := optionKey(o); (k == "rsize" || k == "wsize") && o != k+"=1048576" {
				warnings = append(warnings, fmt.Sprintf("%s: %q: AZNFS rewrites rsize and wsize to 1048576", driver, o))
			}
		}
	case DriverEFS:
		kept = opts // passed to mount.efs, which hands them to mount.nfs
		for _, d := range efsDefaults {
			keys := []string{optionKey(d)}
			switch keys[0] {
			case "nfsvers":
				keys = append(keys, "vers")
			case "hard":
				keys = append(keys, "soft", "softerr")
			case "noresvport":
				keys = append(keys, "resvport")
			}
			if !hasOption(opts, keys...) {
				warnings = append(warnings, fmt.Sprintf("%s: efs-utils adds %s when it is not given", driver, d))
			}
		}
	case DriverFilestore:
		// gcp-filestore-csi-driver node.go NodeStageVolume mounts <ip>:/<volume> as nfs with
		// the volume's mount options and adds none.
		kept = opts
	case DriverNFS:
		kept = opts // passed through unchanged, no defaults added
		if hasOption(opts, "nconnect") {
			warnings = append(warnings, driver+": csi-driver-nfs removed nconnect from its examples after inconsistent directory listings (csi-driver-nfs#373); check READDIR-heavy workloads")
		}
	case DriverInTree:
		kept = opts
	}
	return kept, warnings
}

// Volume renders a static PersistentVolume and PersistentVolumeClaim, or a StorageClass,
// with the profile's mount options for the driver, and returns warnings about options the
// driver forces, drops or adds.
func Volume(s VolumeSpec) ([]Object, []string, error) {
	if err := s.validate(); err != nil {
		return nil, nil, err
	}
	opts, warnings := driverOptions(s.Driver, s.Options)
	switch {
	case s.ReadAheadKB > 0 && s.Driver == DriverEFS:
		// efs-utils' optimize_readahead, on by default in the driver's efs-utils.conf
		// (pkg/driver/efs_watch_dog.go): 15 x rsize after each mount on Linux >= 5.4.
		warnings = append(warnings, fmt.Sprintf("read_ahead_kb=%d is not a mount option: efs-utils writes 15 x rsize after each mount (optimize_readahead); run the nfstune agent (enforce) or installer on the nodes for another value", s.ReadAheadKB))
	case s.ReadAheadKB > 0:
		warnings = append(warnings, fmt.Sprintf("read_ahead_kb=%d is not a mount option: run the nfstune agent (enforce) or installer on the nodes to set it", s.ReadAheadKB))
	}
	if s.Driver == DriverAzureFile && s.Static {
		if q := resource.MustParse(s.Size); q.Cmp(resource.MustParse("100Gi")) < 0 {
			warnings = append(warnings, fmt.Sprintf("%s: %s is below 100Gi, the minimum premium (provisioned v1) NFS share; provisioned v2 allows 32Gi", s.Driver, s.Size))
		}
	}
	if s.Driver == DriverInTree {
		warnings = append(warnings, "in-tree: Pod inline nfs volumes cannot carry mount options: mount this claim instead")
	}
	if !s.Static {
		return []Object{s.storageClass(opts)}, warnings, nil
	}
	pv, pvc := s.persistentVolume(opts), s.claim()
	return []Object{pv, pvc}, warnings, nil
}

func (s VolumeSpec) validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	for _, msg := range validation.IsDNS1123Subdomain(s.Name) {
		add("name %q: %s", s.Name, msg)
	}
	for _, msg := range validation.IsDNS1123Label(s.Namespace) {
		add("namespace %q: %s", s.Namespace, msg)
	}
	if !slices.Contains(Drivers(), s.Driver) {
		add("driver %q: want one of %v", s.Driver, Drivers())
	}
	needServer := s.Static || s.Driver == DriverNFS || s.Driver == DriverEFS
	if needServer && s.Server == "" {
		add("a server is required for %s", map[bool]string{true: "a static volume", false: s.Driver}[s.Static])
	}
	if s.Driver == DriverEFS && s.Server != "" && !efsFileSystemID.MatchString(s.Server) {
		add("efs-csi: server %q: want the file system ID, e.g. fs-0123456789abcdef0", s.Server)
	}
	if s.Driver == DriverFilestore && s.Static && net.ParseIP(s.Server) == nil {
		// node.go validateVolumeAttributes: the ip attribute must be an IP address.
		add("filestore-csi: server %q: want the instance's IP address", s.Server)
	}
	if s.Server != "" && !policy.ValidServer(s.Server) {
		add("server %q: not a host name or an IP address", s.Server)
	}
	if (s.Static || s.Driver == DriverNFS) && !strings.HasPrefix(s.Export, "/") {
		add("export %q: want an absolute path", s.Export)
	}
	if s.Driver == DriverInTree && !s.Static {
		add("in-tree: Kubernetes has no in-tree NFS provisioner: use --static")
	}
	if (s.Driver == DriverAzureFile || s.Driver == DriverBlob) && s.Static {
		if parts := exportParts(s.Export); len(parts) == 0 || parts[len(parts)-1] == "" {
			add("export %q: want /<account>/<share or container>", s.Export)
		}
	}
	if s.Static {
		if q, err := resource.ParseQuantity(s.Size); err != nil || q.Sign() <= 0 {
			add("size %q: want a positive quantity such as 100Gi", s.Size)
		}
	}
	return errors.Join(errs...)
}

func exportParts(export string) []string {
	return strings.Split(strings.Trim(path.Clean("/"+export), "/"), "/")
}

// azureAccount is the storage account of an Azure export: the first element of
// /<account>/<share>, or the first label of the server name.
func (s VolumeSpec) azureAccount() (account, share string) {
	parts := exportParts(s.Export)
	share = parts[len(parts)-1]
	if len(parts) >= 2 {
		return parts[0], share
	}
	account, _, _ = strings.Cut(s.Server, ".")
	return account, share
}

func volumeLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": Name}
}

func (s VolumeSpec) storageClass(opts []string) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{
		TypeMeta:             metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta:           metav1.ObjectMeta{Name: s.Name, Labels: volumeLabels()},
		MountOptions:         opts,
		ReclaimPolicy:        new(corev1.PersistentVolumeReclaimDelete),
		AllowVolumeExpansion: new(true),
		VolumeBindingMode:    new(storagev1.VolumeBindingImmediate),
	}
	switch s.Driver {
	case DriverAzureFile:
		sc.Provisioner = csiAzureFile
		sc.Parameters = map[string]string{"protocol": "nfs", "skuName": "Premium_LRS"}
	case DriverBlob:
		sc.Provisioner = csiBlob
		sc.Parameters = map[string]string{"protocol": "nfs"}
	case DriverNFS:
		sc.Provisioner = csiNFS
		sc.Parameters = map[string]string{"server": s.Server, "share": s.Export}
	case DriverEFS:
		// Access point provisioning, the only dynamic mode (the driver's
		// examples/kubernetes/dynamic_provisioning).
		sc.Provisioner = csiEFS
		sc.Parameters = map[string]string{"provisioningMode": "efs-ap", "fileSystemId": s.Server, "directoryPerms": "700"}
	case DriverFilestore:
		// A new Filestore instance per volume, with the driver's default tier and network.
		sc.Provisioner = csiFilestore
	}
	if s.Server != "" && (s.Driver == DriverAzureFile || s.Driver == DriverBlob) {
		sc.Parameters["server"] = s.Server
	}
	return sc
}

func (s VolumeSpec) persistentVolume(opts []string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: volumeLabels()},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(s.Size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			// Empty: only the claim below, which names this volume, binds it.
			StorageClassName: "",
			MountOptions:     opts,
			ClaimRef:         &corev1.ObjectReference{Namespace: s.Namespace, Name: s.Name},
		},
	}
	csi := func(driver string, attrs map[string]string) {
		pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{
			Driver: driver,
			// Unique in the cluster; Azure drivers do not allow "#" in a chosen handle.
			VolumeHandle:     "nfstune-" + s.Name,
			VolumeAttributes: attrs,
		}
	}
	switch s.Driver {
	case DriverAzureFile:
		account, share := s.azureAccount()
		csi(csiAzureFile, map[string]string{"protocol": "nfs", "server": s.Server, "storageAccount": account, "shareName": share})
	case DriverBlob:
		account, container := s.azureAccount()
		csi(csiBlob, map[string]string{"protocol": "nfs", "server": s.Server, "storageAccount": account, "containerName": container})
	case DriverNFS:
		csi(csiNFS, map[string]string{"server": s.Server, "share": s.Export})
	case DriverEFS:
		// The handle is the file system ID, with ":<path>" for a directory below its root.
		csi(csiEFS, nil)
		if p := path.Clean("/" + s.Export); p != "/" {
			pv.Spec.CSI.VolumeHandle = s.Server + ":" + p
		} else {
			pv.Spec.CSI.VolumeHandle = s.Server
		}
	case DriverFilestore:
		// NodeStageVolume mounts <ip>:/<volume> from these attributes.
		csi(csiFilestore, map[string]string{"ip": s.Server, "volume": strings.Trim(path.Clean("/"+s.Export), "/")})
	case DriverInTree:
		pv.Spec.NFS = &corev1.NFSVolumeSource{Server: s.Server, Path: s.Export}
	}
	return pv
}

func (s VolumeSpec) claim() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: volumeLabels()},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: new(""),
			VolumeName:       s.Name,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(s.Size)},
			},
		},
	}
}
