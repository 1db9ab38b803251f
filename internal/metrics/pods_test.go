package metrics

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// TestPodInfoKubeletTree reads the hand-made kubelet tree (testdata/kubelet/README.md)
// through inventory.Read: one nfstune_mount_pod_info per superblock and pod, in both tiers.
func TestPodInfoKubeletTree(t *testing.T) {
	t.Parallel()
	inv, err := inventory.Read(hostfs.Root("testdata/kubelet"), inventory.ReadOptions{PID: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := `# HELP nfstune_mount_pod_info Pod using the superblock (value 1), one per pod, from kubelet's mount paths: pod UID, and the volume, PersistentVolume and driver where the paths name them.
# TYPE nfstune_mount_pod_info gauge
nfstune_mount_pod_info{backend="generic",device="0:52",driver="file.csi.azure.com",export="/export/data",mountpoint="/var/lib/kubelet/plugins/kubernetes.io/csi/file.csi.azure.com/4c1e0b9a7d3f5e2c8b6a4d0f1e3c5b7a9d2e4f6a8c0b1d3e5f7a9c2e4b6d8f0a/globalmount",pod_uid="6f1b3a52-8c4d-4e0a-9b7e-2d5c1f0a3e71",pv="pv-data",server="10.0.0.5",version="4.2",volume=""} 1
nfstune_mount_pod_info{backend="generic",device="0:52",driver="file.csi.azure.com",export="/export/data",mountpoint="/var/lib/kubelet/plugins/kubernetes.io/csi/file.csi.azure.com/4c1e0b9a7d3f5e2c8b6a4d0f1e3c5b7a9d2e4f6a8c0b1d3e5f7a9c2e4b6d8f0a/globalmount",pod_uid="a04c9e1d-5b27-4f38-8e6a-7c2b9d1e4f05",pv="pv-data",server="10.0.0.5",version="4.2",volume="data"} 1
nfstune_mount_pod_info{backend="generic",device="0:53",driver="",export="/export/scratch",mountpoint="/var/lib/kubelet/pods/9d3c1e5f7a2b4c6d8e0f1a3b5c7d9e1f/volumes/kubernetes.io~csi/pvc-5e0c7a1d/mount",pod_uid="9d3c1e5f7a2b4c6d8e0f1a3b5c7d9e1f",pv="pvc-5e0c7a1d",server="10.0.0.5",version="4.2",volume=""} 1
nfstune_mount_pod_info{backend="generic",device="0:53",driver="",export="/export/scratch",mountpoint="/var/lib/kubelet/pods/9d3c1e5f7a2b4c6d8e0f1a3b5c7d9e1f/volumes/kubernetes.io~csi/pvc-5e0c7a1d/mount",pod_uid="c3d2e1f0-a9b8-4c7d-8e6f-5a4b3c2d1e0f",pv="pvc-5e0c7a1d",server="10.0.0.5",version="4.2",volume=""} 1
nfstune_mount_pod_info{backend="generic",device="0:54",driver="kubernetes.io/nfs",export="/home",mountpoint="/mnt/home",pod_uid="6f1b3a52-8c4d-4e0a-9b7e-2d5c1f0a3e71",pv="",server="10.0.0.6",version="3",volume="home"} 1
`
	for _, tier := range []Tier{TierDefault, TierFull} {
		c := newTestCollector(Snapshot{Inventory: inv}, nil, Options{Tier: tier})
		if err := testutil.CollectAndCompare(c, strings.NewReader(want), "nfstune_mount_pod_info"); err != nil {
			t.Errorf("%s tier: %v", tier, err)
		}
	}
}

// TestPodInfoChurn scrapes one collector while pods come and go on a 20-superblock host:
// every scrape lists exactly the pods mounted then, however many have come before.
func TestPodInfoChurn(t *testing.T) {
	t.Parallel()
	inv := &inventory.Inventory{}
	for i := range 20 {
		inv.Mounts = append(inv.Mounts, inventory.Mount{
			Device: fmt.Sprintf("0:%d", 60+i), Server: "10.0.0.5", Export: fmt.Sprintf("/export/%d", i),
			FSType: "nfs4", Version: "4.1", Backend: "generic",
		})
	}
	snap := Snapshot{Inventory: inv}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newTestCollector(snap, nil, Options{}))
	pod := 0
	for round := range 30 {
		// Each round replaces every pod by new ones, 1 to 5 per superblock, each with its
		// volume mount and a subPath mount.
		want := 0
		for i := range inv.Mounts {
			m := &inv.Mounts[i]
			m.MountPoints = []string{"/mnt/host"}
			for range 1 + (round+i)%5 {
				uid := fmt.Sprintf("00000000-0000-4000-8000-%012d", pod)
				pod++
				want++
				m.MountPoints = append(m.MountPoints,
					"/var/lib/kubelet/pods/"+uid+"/volumes/kubernetes.io~csi/pv-"+m.Device+"/mount",
					"/var/lib/kubelet/pods/"+uid+"/volume-subpaths/data/app/0")
			}
		}
		if got := podInfoSeries(t, reg); got != want {
			t.Fatalf("round %d: %d pod_info series, want %d (the pods mounted now)", round, got, want)
		}
	}
}

func podInfoSeries(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "nfstune_mount_pod_info" {
			return len(mf.GetMetric())
		}
	}
	return 0
}

// TestPodInfoLabKubelet reads a tree recorded from the lab kernel with NFS mounted the way
// kubelet mounts it (lab/record-kubelet.sh; its README lists the mounts): a staged CSI
// superblock bind-mounted into two pods, one with a subPath; an in-tree NFS volume; and a
// CSI volume mounted directly by two pods, which the kernel gave one superblock.
func TestPodInfoLabKubelet(t *testing.T) {
	t.Parallel()
	inv, err := inventory.Read(hostfs.Root("testdata/lab-6.1.0-50-amd64-kubelet"), inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const k = "/mnt/var/lib/kubelet"
	want := `# HELP nfstune_mount_pod_info Pod using the superblock (value 1), one per pod, from kubelet's mount paths: pod UID, and the volume, PersistentVolume and driver where the paths name them.
# TYPE nfstune_mount_pod_info gauge
nfstune_mount_pod_info{backend="generic",device="0:63",driver="kubernetes.io/nfs",export="/srv/disk",mountpoint="` + k + `/pods/6f1b3a52-8c4d-4e0a-9b7e-2d5c1f0a3e71/volumes/kubernetes.io~nfs/disk",pod_uid="6f1b3a52-8c4d-4e0a-9b7e-2d5c1f0a3e71",pv="",server="127.0.0.1",version="3",volume="disk"} 1
nfstune_mount_pod_info{backend="generic",device="0:64",driver="file.csi.azure.com",export="/tmp",mountpoint="` + k + `/plugins/kubernetes.io/csi/file.csi.azure.com/0ba58900608f79910953a6e3f85c757fbba1d7f6d079951a39bb9003d2c6e505/globalmount",pod_uid="6f1b3a52-8c4d-4e0a-9b7e-2d5c1f0a3e71",pv="pv-tmp",server="127.0.0.1",version="4.1",volume=""} 1
nfstune_mount_pod_info{backend="generic",device="0:64",driver="file.csi.azure.com",export="/tmp",mountpoint="` + k + `/plugins/kubernetes.io/csi/file.csi.azure.com/0ba58900608f79910953a6e3f85c757fbba1d7f6d079951a39bb9003d2c6e505/globalmount",pod_uid="a04c9e1d-5b27-4f38-8e6a-7c2b9d1e4f05",pv="pv-tmp",server="127.0.0.1",version="4.1",volume="tmp"} 1
nfstune_mount_pod_info{backend="generic",device="0:66",driver="",export="/disk",mountpoint="` + k + `/pods/9d3c1e5f7a2b4c6d8e0f1a3b5c7d9e1f/volumes/kubernetes.io~csi/pvc-5e0c7a1d/mount",pod_uid="9d3c1e5f7a2b4c6d8e0f1a3b5c7d9e1f",pv="pvc-5e0c7a1d",server="127.0.0.2",version="4.2",volume=""} 1
nfstune_mount_pod_info{backend="generic",device="0:66",driver="",export="/disk",mountpoint="` + k + `/pods/9d3c1e5f7a2b4c6d8e0f1a3b5c7d9e1f/volumes/kubernetes.io~csi/pvc-5e0c7a1d/mount",pod_uid="c3d2e1f0-a9b8-4c7d-8e6f-5a4b3c2d1e0f",pv="pvc-5e0c7a1d",server="127.0.0.2",version="4.2",volume=""} 1
`
	c := newTestCollector(Snapshot{Inventory: inv}, nil, Options{})
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "nfstune_mount_pod_info"); err != nil {
		t.Error(err)
	}
}
