package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

var mountInfoTests = []struct {
	name string
	in   string
	want []string // device|first mount point|server|export|fstype|version|mount points
}{
	{
		name: "nfs4 with nconnect",
		in:   "612 22 0:52 / /mnt/data rw,relatime shared:321 - nfs4 10.0.0.5:/export/data rw,vers=4.2,rsize=1048576,hard,proto=tcp,nconnect=4,addr=10.0.0.5\n",
		want: []string{"0:52|/mnt/data|10.0.0.5|/export/data|nfs4|4.2|1"},
	},
	{
		name: "bind mount of the same superblock and an escaped space",
		in: "612 22 0:52 / /mnt/data rw - nfs4 10.0.0.5:/export rw,vers=4.1,addr=10.0.0.5\n" +
			"613 22 0:52 /sub /srv/with\\040space rw - nfs4 10.0.0.5:/export/sub rw,vers=4.1,addr=10.0.0.5\n",
		want: []string{"0:52|/mnt/data|10.0.0.5|/export|nfs4|4.1|2"},
	},
	{
		name: "nfsv3 and an IPv6 server",
		in:   "655 22 0:54 / /mnt/home rw - nfs [fd00::6]:/home rw,vers=3,mountaddr=fd00::6,addr=fd00::6\n",
		// The server as inventory.Read, audit and apply name it, so that policy rules
		// matching on it resolve the same in the agent.
		want: []string{"0:54|/mnt/home|fd00::6|/home|nfs|3|1"},
	},
	{
		name: "other file systems and malformed lines skipped",
		in: "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n" +
			"23 22 0:21 / /proc rw - proc proc rw\n" +
			"612 22 0:52 / /mnt/x rw shared:1 nfs4 10.0.0.5:/x rw\n" +
			"612 22 bad / /mnt/y rw - nfs4 10.0.0.5:/y rw\n" +
			"612 22 0:53 / /mnt/z rw -\n",
		want: nil,
	},
}

func summary(ms []inventory.Mount) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Device+"|"+m.MountPoints[0]+"|"+m.Server+"|"+m.Export+"|"+m.FSType+"|"+m.Version+"|"+string(rune('0'+len(m.MountPoints))))
	}
	return out
}

// parseNFSMountInfo is the reconcile's view of a mountinfo file.
func parseNFSMountInfo(b []byte) []inventory.Mount {
	mounts, _ := inventory.ParseMountInfo(b)
	return mounts
}

func TestParseNFSMountInfo(t *testing.T) {
	t.Parallel()
	for _, tt := range mountInfoTests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, summary(parseNFSMountInfo([]byte(tt.in)))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	got := parseNFSMountInfo([]byte(mountInfoTests[1].in))
	if mp := got[0].MountPoints[1]; mp != "/srv/with space" {
		t.Errorf("second mount point = %q, want the space decoded", mp)
	}
}

// TestReadMountTableAgreesWithInventory checks that the reconcile's cheap read, with the
// read-ahead the reconcile reads itself, sees the fixture root's superblocks as
// inventory.Read does, in every field policy resolution uses.
func TestReadMountTableAgreesWithInventory(t *testing.T) {
	t.Parallel()
	root := hostfs.Root("testdata/root")
	full, err := inventory.Read(root, inventory.ReadOptions{PID: 1})
	if err != nil {
		t.Fatal(err)
	}
	light, err := ReadMountTable(root, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range light.Mounts {
		if light.Mounts[i].ReadAheadKB != nil {
			t.Fatalf("%s: ReadMountTable read read-ahead", light.Mounts[i].Device)
		}
		light.Mounts[i].ReadAheadKB = readReadAhead(root, light.Mounts[i].Device)
	}
	type view struct {
		Device, Server, ServerAddr, Export, FSType, Version, Backend string
		MountPoints                                                  []string
		ReadAheadKB                                                  int
	}
	pick := func(inv *inventory.Inventory) []view {
		var out []view
		for _, m := range inv.Mounts {
			v := view{m.Device, m.Server, m.ServerAddr, m.Export, m.FSType, m.Version, m.Backend, m.MountPoints, -1}
			if m.ReadAheadKB != nil {
				v.ReadAheadKB = *m.ReadAheadKB
			}
			out = append(out, v)
		}
		return out
	}
	if diff := cmp.Diff(pick(full), pick(light)); diff != "" {
		t.Errorf("ReadMountTable differs from inventory.Read (-inventory +ReadMountTable):\n%s", diff)
	}
	if len(light.Mounts) != 3 {
		t.Errorf("ReadMountTable found %d superblocks, want 3", len(light.Mounts))
	}
}
