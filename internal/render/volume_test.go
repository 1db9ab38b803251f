package render

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/nfstune/nfstune/internal/golden"
)

// profileOptions are mount options as a profile lists them (vers first, then the rest).
var profileOptions = []string{"vers=4.1", "proto=tcp", "nconnect=4", "rsize=1048576", "wsize=1048576", "hard", "sec=sys"}

var volumeTests = []struct {
	name         string
	spec         VolumeSpec
	wantOptions  []string // mount options on the PV or StorageClass
	wantWarnings []string // substrings, one warning each, in order
	wantErr      string
}{
	{
		name: "azurefile-static",
		spec: VolumeSpec{Name: "saswork", Namespace: "sas", Driver: DriverAzureFile, Static: true,
			Server: "acct.privatelink.file.core.windows.net", Export: "/acct/saswork", Size: "64Gi",
			Options: profileOptions, ReadAheadKB: 15360},
		wantOptions: []string{"proto=tcp", "nconnect=4", "rsize=1048576", "wsize=1048576", "hard"},
		wantWarnings: []string{`dropped "vers=4.1"`, `dropped "sec=sys"`, "adds noresvport", "adds actimeo=30",
			"read_ahead_kb=15360 is not a mount option", "64Gi is below 100Gi"},
	},
	{
		name: "blob-dynamic",
		spec: VolumeSpec{Name: "blob-nfs", Namespace: "default", Driver: DriverBlob,
			Options: []string{"vers=3", "nconnect=8", "rsize=262144", "nolock", "actimeo=30"}},
		wantOptions:  []string{"nconnect=8", "rsize=262144", "actimeo=30"},
		wantWarnings: []string{`dropped "vers=3"`, `dropped "nolock"`, "enable_azure_nconnect", `"rsize=262144": AZNFS rewrites`},
	},
	{
		name: "nfs-csi-dynamic",
		spec: VolumeSpec{Name: "tools", Namespace: "default", Driver: DriverNFS, Server: "nfs.example.com", Export: "/tools",
			Options: []string{"vers=4.2", "nconnect=8", "actimeo=600", "nocto"}},
		wantOptions:  []string{"vers=4.2", "nconnect=8", "actimeo=600", "nocto"},
		wantWarnings: []string{"csi-driver-nfs#373"},
	},
	{
		name: "in-tree-static",
		spec: VolumeSpec{Name: "web", Namespace: "www", Driver: DriverInTree, Static: true, Server: "10.0.0.4", Export: "/export/web", Size: "10Gi",
			Options: []string{"vers=3", "hard", "actimeo=60"}},
		wantOptions:  []string{"vers=3", "hard", "actimeo=60"},
		wantWarnings: []string{"Pod inline nfs volumes cannot carry mount options"},
	},
	{
		name: "efs-static",
		spec: VolumeSpec{Name: "models", Namespace: "ml", Driver: DriverEFS, Static: true, Server: "fs-0123456789abcdef0", Export: "/models", Size: "1Ti",
			Options: []string{"nfsvers=4.1", "rsize=1048576", "wsize=1048576", "hard", "timeo=600", "retrans=2"}, ReadAheadKB: 15360},
		wantOptions:  []string{"nfsvers=4.1", "rsize=1048576", "wsize=1048576", "hard", "timeo=600", "retrans=2"},
		wantWarnings: []string{"efs-utils adds noresvport", "efs-utils writes 15 x rsize"},
	},
	{
		name:         "efs-dynamic",
		spec:         VolumeSpec{Name: "efs-ap", Namespace: "default", Driver: DriverEFS, Server: "fs-0123456789abcdef0", Options: []string{"vers=4.1", "noresvport", "soft"}},
		wantOptions:  []string{"vers=4.1", "noresvport", "soft"},
		wantWarnings: []string{"adds rsize=1048576", "adds wsize=1048576", "adds timeo=600", "adds retrans=2"},
	},
	{
		name: "filestore-static",
		spec: VolumeSpec{Name: "shared", Namespace: "default", Driver: DriverFilestore, Static: true, Server: "10.20.30.40", Export: "/vol1", Size: "1Ti",
			Options: []string{"vers=3", "nconnect=2", "hard"}, ReadAheadKB: 15360},
		wantOptions:  []string{"vers=3", "nconnect=2", "hard"},
		wantWarnings: []string{"read_ahead_kb=15360 is not a mount option: run the nfstune agent"},
	},
	{name: "efs-needs-file-system-id", spec: VolumeSpec{Name: "x", Namespace: "d", Driver: DriverEFS, Server: "fs-0123.efs.us-east-1.amazonaws.com"}, wantErr: "want the file system ID"},
	{name: "filestore-static-needs-ip", spec: VolumeSpec{Name: "x", Namespace: "d", Driver: DriverFilestore, Static: true, Server: "filer.example", Export: "/vol1", Size: "1Ti"}, wantErr: "want the instance's IP address"},
	{name: "in-tree-dynamic", spec: VolumeSpec{Name: "x", Namespace: "d", Driver: DriverInTree, Server: "s", Export: "/e"}, wantErr: "no in-tree NFS provisioner"},
	{name: "static-needs-server", spec: VolumeSpec{Name: "x", Namespace: "d", Driver: DriverNFS, Static: true, Size: "1Gi", Export: "/e"}, wantErr: "a server is required"},
	{name: "bad-size", spec: VolumeSpec{Name: "x", Namespace: "d", Driver: DriverNFS, Static: true, Server: "s", Export: "/e", Size: "lots"}, wantErr: `size "lots"`},
	{name: "bad-server", spec: VolumeSpec{Name: "x", Namespace: "d", Driver: DriverNFS, Server: "srv,sec=none", Export: "/e"}, wantErr: `server "srv,sec=none": not a host name or an IP address`},
	{name: "bad-driver", spec: VolumeSpec{Name: "x", Namespace: "d", Driver: "smb-csi"}, wantErr: `driver "smb-csi"`},
	{name: "bad-name", spec: VolumeSpec{Name: "Bad_Name", Namespace: "d", Driver: DriverBlob}, wantErr: `name "Bad_Name"`},
}

func TestVolume(t *testing.T) {
	t.Parallel()
	for _, tt := range volumeTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			objs, warnings, err := Volume(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != len(tt.wantWarnings) {
				t.Errorf("warnings = %q, want %d", warnings, len(tt.wantWarnings))
			}
			for i, w := range tt.wantWarnings {
				if i < len(warnings) && !strings.Contains(warnings[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, warnings[i], w)
				}
			}
			var buf bytes.Buffer
			if err := Write(&buf, FormatYAML, objs); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "volume-"+tt.name+".golden.yaml"), buf.Bytes())
			decoded := decodeAll(t, buf.Bytes())
			var gotOptions []string
			switch o := decoded[0].(type) {
			case *storagev1.StorageClass:
				gotOptions = o.MountOptions
				if tt.spec.Static {
					t.Errorf("static volume rendered a StorageClass")
				}
			case *corev1.PersistentVolume:
				gotOptions = o.Spec.MountOptions
				pvc, ok := decoded[1].(*corev1.PersistentVolumeClaim)
				if !ok || pvc.Spec.VolumeName != o.Name || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "" {
					t.Errorf("claim does not bind the volume statically: %+v", decoded[1])
				}
			}
			if diff := cmp.Diff(tt.wantOptions, gotOptions); diff != "" {
				t.Errorf("mount options (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzDriverOptions(f *testing.F) {
	for _, tt := range volumeTests {
		f.Add(tt.spec.Driver, strings.Join(tt.spec.Options, ","))
	}
	f.Fuzz(func(t *testing.T, driver, opts string) {
		in := strings.Split(opts, ",")
		kept, warnings := driverOptions(driver, in)
		if !slices.Contains(Drivers(), driver) {
			return
		}
		// Every option is either kept or explained.
		dropped := 0
		for _, w := range warnings {
			if strings.Contains(w, ": dropped ") {
				dropped++
			}
		}
		if len(kept)+dropped != len(in) {
			t.Fatalf("driver %q: %d options in, %d kept, %d dropped", driver, len(in), len(kept), dropped)
		}
	})
}
