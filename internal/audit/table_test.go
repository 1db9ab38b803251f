package audit

import (
	"bytes"
	"cmp"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/printer"
)

// TestWriteTableManyMounts: a table long enough to be rendered in parallel ranges still
// lists every mount once, worst findings first and by device number within a severity,
// each block with its own findings.
func TestWriteTableManyMounts(t *testing.T) {
	t.Parallel()
	dir, pol := synthHostN(t, 3*minMountsPerWorker+5)
	inv, err := inventory.Read(hostfs.Root(dir), inventory.ReadOptions{SkipOperations: true})
	if err != nil {
		t.Fatal(err)
	}
	rep := Run(inv, pol)
	var out bytes.Buffer
	if err := WriteTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	worst := map[string]int{}
	want := map[string]int{}
	for _, f := range rep.Findings {
		worst[f.Device] = max(worst[f.Device], SeverityRank(f.Severity))
		want[f.Device]++
	}
	header := regexp.MustCompile(`^\S.*  \((\d+:\d+)\)$`)
	var devices []string
	got := map[string]int{}
	block := "" // the device whose block the line is in; "" in the summary and the host block
	for line := range strings.Lines(out.String()) {
		line = strings.TrimSuffix(line, "\n")
		switch m := header.FindStringSubmatch(line); {
		case m != nil:
			devices = append(devices, m[1])
			block = m[1]
		case line != "" && !strings.HasPrefix(line, " "):
			block = ""
		case strings.HasPrefix(line, "  WARNING ") || strings.HasPrefix(line, "  ERROR ") || strings.HasPrefix(line, "  INFO "):
			got[block]++
		}
	}
	if len(devices) != len(rep.Mounts) {
		t.Fatalf("%d mount blocks for %d mounts", len(devices), len(rep.Mounts))
	}
	sorted := slices.SortedFunc(slices.Values(devices), func(a, b string) int {
		if c := cmp.Compare(worst[b], worst[a]); c != 0 {
			return c
		}
		return inventory.CompareDevices(a, b)
	})
	if diff := gocmp.Diff(sorted, devices); diff != "" {
		t.Errorf("mount blocks out of order (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("findings per mount block (-want +got):\n%s", diff)
	}
	// Each block fits the size its range's buffer is allocated with.
	byDev := map[string][]Finding{}
	for _, f := range rep.Findings {
		byDev[f.Device] = append(byDev[f.Device], f)
	}
	var cols tabwriter.Writer
	for i := range rep.Mounts {
		m := &rep.Mounts[i]
		var b bytes.Buffer
		writeMount(printer.New(&b), &cols, rep, m, byDev[m.Device])
		if est := blockBytes(byDev[m.Device]); b.Len() > est {
			t.Errorf("block of %s: %d bytes, estimated %d", m.Device, b.Len(), est)
		}
	}
}

// TestWriteTableStalled: a stalled server shows each of its transports, so one stuck
// connection among several is visible, and its mounts list the processes using them.
func TestWriteTableStalled(t *testing.T) {
	no, yes := false, true
	rep := Report{
		Stalled: []inventory.StalledServer{{
			Addr: "10.0.0.1", Transports: []string{"switch-3/xprt-4-tcp"}, Waiting: 2, Window: time.Second,
			Each: []inventory.TransportStatus{
				{Name: "switch-3/xprt-3-tcp", Connected: true, Progressed: &yes},
				{Name: "switch-3/xprt-4-tcp", Queued: 2, Connected: true, Progressed: &no, Stuck: true},
				{Name: "switch-3/xprt-5-tcp"},
			},
		}},
		Blocked: []inventory.BlockedMount{
			{Device: "0:52", MountPoints: []string{"/mnt/data"}, ServerAddr: "10.0.0.1", Holders: []inventory.Holder{
				{PID: 4242, Comm: "cat\nforged", State: "D", BlockedThreads: 1, Via: []string{"fd", "cwd"}, FDs: 1,
					PodUID: "8f3d2c1a-5b6e-4f70-9a81-2b3c4d5e6f70", ContainerID: "4b825dc642cb6eb9a060e54bf8d69288fbee4904a1b2c3d4e5f60718293a4b5c"},
				{PID: 4300, Comm: "sh", State: "S", Via: []string{"cwd"}},
			}},
			{Device: "0:53", MountPoints: []string{"/mnt/idle"}, ServerAddr: "10.0.0.1", Holders: []inventory.Holder{}},
		},
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	_, got, _ := strings.Cut(b.String(), "\nstalled servers\n")
	want := `  10.0.0.1: 1 of 3 transport(s) stuck, no progress for at least 1s
    TRANSPORT            QUEUED  CONNECTED  PROGRESS  STUCK
    switch-3/xprt-3-tcp  0       yes        yes       no
    switch-3/xprt-4-tcp  2       yes        no        yes
    switch-3/xprt-5-tcp  0       no         -         no

processes using the stalled mounts
  /mnt/data (0:52), server 10.0.0.1: 2
    PID   STATE  D-THREADS  VIA     COMMAND      POD UID                               CONTAINER
    4242  D      1          fd,cwd  cat\nforged  8f3d2c1a-5b6e-4f70-9a81-2b3c4d5e6f70  4b825dc642cb
    4300  S      0          cwd     sh           -                                     -
  /mnt/idle (0:53), server 10.0.0.1: none found
`
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("stalled sections (-want +got):\n%s", diff)
	}
}

// TestWriteTableUninspected: when some processes could not be inspected, the list says it
// may be incomplete.
func TestWriteTableUninspected(t *testing.T) {
	rep := Report{
		Stalled: []inventory.StalledServer{{Addr: "10.0.0.1", Transports: []string{"switch-3/xprt-4-tcp"}}},
		Blocked: []inventory.BlockedMount{{Device: "0:52", MountPoints: []string{"/mnt/data"}, ServerAddr: "10.0.0.1", Holders: []inventory.Holder{}, Uninspected: 17}},
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "(incomplete: 17 processes could not be inspected or were left out, see the warnings: the lists below may miss some)") {
		t.Errorf("no word of the uninspected processes:\n%s", b.String())
	}
	rep.Blocked[0].Uninspected, rep.Blocked[0].Incomplete = 0, true
	b.Reset()
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "(incomplete: some processes' open files were not all looked at") {
		t.Errorf("no word of the incomplete scan:\n%s", b.String())
	}
}

// TestWriteTableMounting: a mount.nfs stuck on a stalled server that has no superblock, and
// kubelet's unmount of a pod volume, are listed after the stalled servers.
func TestWriteTableMounting(t *testing.T) {
	const pod = "5d7e4a12-0c3b-4e8f-9d21-6a7b8c9d0e1f"
	vol := "/var/lib/kubelet/pods/" + pod + "/volumes/kubernetes.io~nfs/pv-a"
	rep := Report{
		Stalled: []inventory.StalledServer{{Addr: "10.0.0.9", Transports: []string{"switch-7/xprt-7-tcp"}, Window: time.Second}},
		Mounting: []inventory.MountProgram{
			{PID: 10, Comm: "mount.nfs4", State: "D", Program: inventory.ProgramMount, Server: "10.0.0.9", Export: "/exports/a", Target: vol, Running: 95 * time.Second, VolumePod: pod},
			{PID: 14, Comm: "umount", State: "D", Program: inventory.ProgramUnmount, Target: "/mnt/x\tforged", Running: 3 * time.Second},
		},
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	_, got, _ := strings.Cut(b.String(), "\nmounts and unmounts in progress\n")
	want := `    PID  STATE  RUNNING  COMMAND     SERVER    EXPORT      TARGET                                                                                     VOLUME POD                            POD UID
    10   D      1m35s    mount.nfs4  10.0.0.9  /exports/a  /var/lib/kubelet/pods/` + pod + `/volumes/kubernetes.io~nfs/pv-a  ` + pod + `  -
    14   D      3s       umount      -         -           /mnt/x\tforged                                                                             -                                     -
`
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("mounting section (-want +got):\n%s", diff)
	}
}
