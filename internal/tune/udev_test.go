package tune

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

func TestUdevReadAhead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		dev     string
		edit    func(t *testing.T, root hostfs.Root)
		opts    UdevOptions
		want    int
		wantErr bool
	}{
		{name: "data export", dev: "0:53", want: 16384},
		{name: "tools export", dev: "0:54", want: 1024},
		{name: "block device", dev: "8:1", wantErr: true},
		{name: "crafted name", dev: "0:53/../../x", wantErr: true},
		{name: "already larger", dev: "0:54", wantErr: true, edit: func(t *testing.T, root hostfs.Root) {
			writeFile(t, root, "sys/devices/virtual/bdi/0:54/read_ahead_kb", "15360\n")
		}},
		{name: "exact lowers", dev: "0:54", want: 1024, opts: UdevOptions{Exact: true}, edit: func(t *testing.T, root hostfs.Root) {
			writeFile(t, root, "sys/devices/virtual/bdi/0:54/read_ahead_kb", "15360\n")
		}},
		{name: "not nfs in mountinfo", dev: "0:53", wantErr: true, edit: func(t *testing.T, root hostfs.Root) {
			writeFile(t, root, "proc/self/mountinfo", "60 22 0:53 / /mnt/fuse rw - fuse.sshfs host:/x rw\n")
		}},
		{name: "no mountinfo entry, nfsfs fallback by address", dev: "0:54", want: 1024, opts: UdevOptions{Wait: 50 * time.Millisecond}, edit: func(t *testing.T, root hostfs.Root) {
			writeFile(t, root, "proc/self/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n")
		}},
		{name: "unknown everywhere", dev: "0:77", wantErr: true, opts: UdevOptions{Wait: 50 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := fixtureRoot(t)
			if tt.edit != nil {
				tt.edit(t, root)
			}
			got, _, err := UdevReadAhead(context.Background(), root, tt.dev, fixtureWant().Resolve, tt.opts)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrNoReadAhead) {
				t.Errorf("err = %v, want ErrNoReadAhead", err)
			}
			if got != tt.want {
				t.Errorf("read_ahead_kb = %d, want %d", got, tt.want)
			}
		})
	}
}

// The bdi appears before its mountinfo entry: the helper waits for it, within its bound.
func TestUdevReadAheadWaitsForMountinfo(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	writeFile(t, root, "proc/self/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n")
	go func() {
		time.Sleep(100 * time.Millisecond)
		writeFile(t, root, "proc/self/mountinfo", fixtureMountinfo)
	}()
	seen := []string{}
	resolve := func(m *inventory.Mount) Desired {
		seen = append(seen, m.Export)
		return fixtureWant().Resolve(m)
	}
	start := time.Now()
	got, m, err := UdevReadAhead(context.Background(), root, "0:53", resolve, UdevOptions{Wait: time.Second})
	if err != nil || got != 16384 {
		t.Fatalf("got %d, %v", got, err)
	}
	// Generous upper bound: the build machine is often loaded.
	if d := time.Since(start); d < 80*time.Millisecond || d > 3*time.Second {
		t.Errorf("took %v: did not wait for, or waited past, the entry", d)
	}
	if diff := cmp.Diff([]string{"/mnt/data", "/srv/data copy"}, m.MountPoints); diff != "" {
		t.Errorf("mount points (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/export/data"}, seen); diff != "" {
		t.Errorf("resolved exports (-want +got):\n%s", diff)
	}
}

// The wait is bounded: a device that never shows up costs at most about opts.Wait.
func TestUdevReadAheadBounded(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	start := time.Now()
	_, _, err := UdevReadAhead(context.Background(), root, "0:88", fixtureWant().Resolve, UdevOptions{Wait: 200 * time.Millisecond})
	if !errors.Is(err, ErrNoReadAhead) {
		t.Fatalf("err = %v", err)
	}
	// Below the 1 s default, so that a wait ignoring opts.Wait fails, with room for a loaded
	// build machine.
	if d := time.Since(start); d < 190*time.Millisecond || d >= 950*time.Millisecond {
		t.Errorf("took %v, want about 200ms", d)
	}
}

func TestUdevReadAheadObserve(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	resolve := func(m *inventory.Mount) Desired {
		d := fixtureWant().Resolve(m)
		d.Mode = policy.ModeObserve
		return d
	}
	if _, _, err := UdevReadAhead(context.Background(), root, "0:53", resolve, UdevOptions{}); !errors.Is(err, ErrNoReadAhead) {
		t.Errorf("err = %v, want ErrNoReadAhead in observe mode", err)
	}
}

func writeFile(t *testing.T, root hostfs.Root, p, content string) {
	t.Helper()
	tmp := root.Path(p) + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, root.Path(p)); err != nil {
		t.Error(err)
	}
}

var mountinfoTests = []struct {
	name, in, dev string
	want          *inventory.Mount
}{
	{
		name: "nfs4 with bind mount",
		in:   fixtureMountinfo,
		dev:  "0:53",
		want: &inventory.Mount{Device: "0:53", MountPoints: []string{"/mnt/data", "/srv/data copy"}, FSType: "nfs4", Server: "192.168.122.71", Export: "/export/data", ServerAddr: "192.168.122.71", Version: "4.2"},
	},
	{
		name: "ipv6 source",
		in:   "70 22 0:65 / /mnt/v6 rw,relatime - nfs4 [fd00::5]:/export rw,vers=4.2,addr=fd00::5\n",
		dev:  "0:65",
		want: &inventory.Mount{Device: "0:65", MountPoints: []string{"/mnt/v6"}, FSType: "nfs4", Server: "fd00::5", Export: "/export", ServerAddr: "fd00::5", Version: "4.2"},
	},
	{name: "other device", in: fixtureMountinfo, dev: "0:99"},
	{name: "no separator", in: "70 22 0:65 / /mnt/v6 rw,relatime nfs4 srv:/x rw\n", dev: "0:65"},
	{name: "truncated after separator", in: "70 22 0:65 / /mnt/v6 rw,relatime - nfs4\n", dev: "0:65"},
	{name: "empty", in: "", dev: "0:65"},
}

func TestMountFromMountinfo(t *testing.T) {
	t.Parallel()
	for _, tt := range mountinfoTests {
		t.Run(tt.name, func(t *testing.T) {
			var got *inventory.Mount
			// The fields the udev helper's policy resolution reads.
			if m := inventory.MountOfDevice([]byte(tt.in), tt.dev); m != nil {
				got = &inventory.Mount{Device: m.Device, MountPoints: m.MountPoints, FSType: m.FSType,
					Server: m.Server, Export: m.Export, ServerAddr: m.ServerAddr, Version: m.Version}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestMountFromVolumes(t *testing.T) {
	t.Parallel()
	got := mountFromVolumes([]byte(fixtureVolumes), "0:54")
	want := &inventory.Mount{Device: "0:54", FSType: "nfs", Version: "3", Server: "192.168.122.72", ServerAddr: "192.168.122.72"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	v6 := "NV SERVER   PORT DEV          FSID                              FSC\nv4 fd000000000000000000000000000005  801 0:65         1:2 no\n"
	if m := mountFromVolumes([]byte(v6), "0:65"); m == nil || m.ServerAddr != "fd00::5" || m.FSType != "nfs4" {
		t.Errorf("ipv6 row: %+v", m)
	}
}

func FuzzParseVolumes(f *testing.F) {
	f.Add(fixtureVolumes)
	f.Add("v4 zz 801 0:1 x no\n")
	f.Fuzz(func(t *testing.T, in string) {
		for dev := range parseVolumes([]byte(in)) {
			if !hostfs.ValidDevice(dev) {
				t.Errorf("invalid device %q accepted", dev)
			}
		}
		mountFromVolumes([]byte(in), "0:1")
	})
}

// With no config file, the built-in generic profile gives each new superblock 15 x its
// rsize (from mountinfo), raises only read-ahead nobody chose, and holds an exact rule.
func TestUdevReadAheadBuiltIn(t *testing.T) {
	t.Parallel()
	swept, err := policy.Parse("swept.yaml", []byte("apiVersion: nfstune.io/v1alpha1\nkind: Policy\nrules:\n  - match: {export: /export/data}\n    readAheadKB: 1024\n    readAheadExact: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	fixed := policy.Default()
	fixed.Adaptive = nil // defaults.readAheadAdaptive: false
	tests := []struct {
		name    string
		pol     *policy.Policy
		learned int // the agent's learned value for 192.168.122.71:/export/data; 0: none
		dev, ra string
		want    int
	}{
		{"adaptive: rsize 1 MiB at the kernel default", policy.Default(), 0, "0:53", "128", 1024},
		{"adaptive: rsize 64 KiB, the kernel default is inside the bounds", policy.Default(), 0, "0:54", "128", 0},
		{"adaptive: inside the bounds", policy.Default(), 0, "0:53", "2048", 0},
		{"adaptive: the value learned on the volume", policy.Default(), 4096, "0:53", "128", 4096},
		{"adaptive: learned for mapped random readers, below one rsize", policy.Default(), 128, "0:53", "512", 0},
		{"adaptive: a learned value outside the bounds is not used", policy.Default(), 65536, "0:53", "128", 1024},
		{"fixed: rsize 1 MiB at the kernel default", fixed, 0, "0:53", "128", 15360},
		{"fixed: rsize 64 KiB at the kernel default", fixed, 0, "0:54", "128", 960},
		{"fixed: below one rsize", fixed, 0, "0:53", "512", 15360},
		{"fixed: set on purpose", fixed, 0, "0:53", "2048", 0},
		{"fixed: a learned value is not used", fixed, 4096, "0:53", "128", 15360},
		{"exact rule lowers", swept, 0, "0:53", "15360", 1024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := fixtureRoot(t)
			writeFile(t, root, "sys/devices/virtual/bdi/"+tt.dev+"/read_ahead_kb", tt.ra+"\n")
			learned, err := LoadLearned(root)
			if err != nil {
				t.Fatal(err)
			}
			if tt.learned > 0 {
				learned.Set(&inventory.Mount{Server: "192.168.122.71", Export: "/export/data"}, tt.learned, time.Unix(1_800_000_000, 0))
			}
			got, _, err := UdevReadAhead(context.Background(), root, tt.dev, PolicyResolver(tt.pol, learned), UdevOptions{})
			if tt.want == 0 {
				if !errors.Is(err, ErrNoReadAhead) {
					t.Errorf("got %d, %v; want ErrNoReadAhead", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// A target below one page is refused: the kernel would store it as 0, read-ahead off.
func TestUdevReadAheadBelowOnePage(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	resolve := func(m *inventory.Mount) Desired {
		d := fixtureWant().Resolve(m)
		d.Profile.ReadAheadKB = 2
		return d
	}
	// Exact: the bdi's 128 KiB would otherwise be kept as larger than the target.
	if got, _, err := UdevReadAhead(context.Background(), root, "0:53", resolve, UdevOptions{Exact: true}); !errors.Is(err, ErrNoReadAhead) || !strings.Contains(err.Error(), "below one page") {
		t.Errorf("got %d KiB, %v; want ErrNoReadAhead for 2 KiB, below one page", got, err)
	}
}
