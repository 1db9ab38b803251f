package tune

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// mountNFS is enough of a mount.nfs for inventory.FindMounter: the strings nfs-utils 2.5.3
// and later compile in, or only the first for older ones.
const (
	mountNFSDropIns = "\x7fELF NFSMount_Global_Options conf_init_dir: scandir %s: %s"
	mountNFSOld     = "\x7fELF NFSMount_Global_Options"
)

// nfsmountWant is fixtureWant with one rule naming a server that is not mounted and one
// naming a mount point literally.
func nfsmountWant() Want {
	w := fixtureWant()
	base := w.Resolve
	w.Rules = []policy.Rule{
		{Index: 1, Name: "nas", Match: policy.Match{Server: "nas.example.com"}},
		{Index: 2, Name: "scratch", Match: policy.Match{MountPoint: "/scratch"}},
		{Index: 3, Name: "by pattern", Match: policy.Match{Server: "*.corp"}},
	}
	w.PolicyName = "policy.yaml"
	w.Resolve = func(m *inventory.Mount) Desired {
		switch {
		case m.Server == "nas.example.com":
			return Desired{Mode: policy.ModeEnforce, Rule: "policy.yaml rule 1 (nas)", Profile: policy.Profile{
				Mount: policy.MountOptions{NConnect: 4, RSize: 1048576, WSize: 1048576, Hard: boolp(true), ACTimeo: 30, Extra: []string{"noresvport"}},
			}}
		case len(m.MountPoints) == 1 && m.MountPoints[0] == "/scratch":
			return Desired{Mode: policy.ModeEnforce, Rule: "policy.yaml rule 2 (scratch)", Match: policy.Match{MountPoint: "/scratch"}, Profile: policy.Profile{
				Mount: policy.MountOptions{NoCTO: true, ACTimeo: 600},
			}}
		}
		return base(m)
	}
	return w
}

const wantDropIn = `# Written by nfstune apply from policy.yaml; nfstune revert removes it.
# mount.nfs adds these options to every NFS mount it makes (nfsmount.conf(5)). A mount's own
# options win over its [ MountPoint ] section, which wins over its [ Server ] section, for the
# same key. A [ Server ] section applies only to mounts made by exactly that name or address.

[ Server "192.168.122.71" ]
# for /mnt/data, /srv/data copy
vers=4.2
rsize=1048576

[ Server "192.168.122.72" ]
# for /mnt/tools
rsize=1048576
wsize=1048576

[ Server "nas.example.com" ]
# for rule 1 (nas)
nconnect=4
rsize=1048576
wsize=1048576
actimeo=30
resvport=False

[ MountPoint "/scratch" ]
# for rule 2 (scratch)
actimeo=600
cto=False
`

func TestPlanNFSMountDropInApplyRevert(t *testing.T) {
	root := fixtureRoot(t)
	writeRootFile(t, root, "sbin/mount.nfs", mountNFSDropIns)
	before := snapshot(t, root)
	p, err := NewPlan(root, fixtureInventory(), nfsmountWant(), Options{Persist: PersistNone, NFSMountConf: true})
	if err != nil {
		t.Fatal(err)
	}
	var a *Action
	for i := range p.Actions {
		if p.Actions[i].Kind == KindNFSMountDropIn {
			a = &p.Actions[i]
		}
	}
	if a == nil {
		t.Fatalf("no drop-in action in %+v", briefs(p))
	}
	if a.Path != NFSMountDropInPath || !a.OldAbsent {
		t.Errorf("action %s %s absent=%v", a.Kind, a.Path, a.OldAbsent)
	}
	if diff := cmp.Diff(wantDropIn, a.New); diff != "" {
		t.Errorf("drop-in (-want +got):\n%s", diff)
	}
	if !containsNote(p, "rule 3 (by pattern) matches by pattern") {
		t.Errorf("no note on the rule nfsmount.conf cannot express: %q", p.Notes)
	}
	// What mount.nfs would read back is what the plan wrote.
	res, err := Apply(context.Background(), root, p, ApplyOptions{})
	if err != nil {
		t.Fatalf("apply: %v (%+v)", err, res)
	}
	if got := readFixture(t, root, NFSMountDropInPath); got != wantDropIn {
		t.Errorf("written drop-in differs from the plan")
	}
	again, err := NewPlan(root, fixtureInventory(), nfsmountWant(), Options{Persist: PersistNone, NFSMountConf: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range again.Actions {
		if a.Kind == KindNFSMountDropIn {
			t.Errorf("a second plan rewrites the drop-in")
		}
	}
	if _, err := Revert(root); err != nil {
		t.Fatalf("revert: %v", err)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("revert did not restore the tree (-before +after):\n%s", diff)
	}
}

func TestPlanNFSMountConfFallback(t *testing.T) {
	root := fixtureRoot(t)
	writeRootFile(t, root, "sbin/mount.nfs", mountNFSOld)
	const own = "# the site's own defaults\n[ NFSMount_Global_Options ]\nretrans=3" // no final newline
	writeRootFile(t, root, NFSMountConfPath, own)
	before := snapshot(t, root)
	opts := Options{Persist: PersistNone, NFSMountConf: true}
	p, err := NewPlan(root, fixtureInventory(), nfsmountWant(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !containsNote(p, "nfs-utils before 2.5.3") {
		t.Errorf("no note on the old mount.nfs: %q", p.Notes)
	}
	var got string
	for _, a := range p.Actions {
		if a.Kind == KindNFSMountDropIn {
			t.Errorf("a drop-in planned for a mount.nfs that reads none")
		}
		if a.Kind == KindNFSMountConf {
			got = a.New
		}
	}
	want := own + "\n" + nfsmountBlockBegin + "\n" + wantDropIn + nfsmountBlockEnd + "\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("nfsmount.conf (-want +got):\n%s", diff)
	}
	if _, err := Apply(context.Background(), root, p, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	// The block is replaced, not appended again.
	if c, err := withBlock(want, "changed\n"); err != nil || strings.Count(c, nfsmountBlockBegin) != 1 || !strings.Contains(c, "changed\n"+nfsmountBlockEnd) || !strings.HasPrefix(c, own+"\n") {
		t.Errorf("withBlock replacing: %q, %v", c, err)
	}
	if again, err := NewPlan(root, fixtureInventory(), nfsmountWant(), opts); err != nil || !again.Empty() {
		t.Errorf("second plan: %v, %+v", err, again)
	}
	if _, err := Revert(root); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("revert did not restore the tree (-before +after):\n%s", diff)
	}
}

// TestPlanNFSMountRefuses: bad names and options, and a drop-in directory that is a
// symbolic link, are refused at planning with an error that says why, and nothing is
// written.
func TestPlanNFSMountRefuses(t *testing.T) {
	withRule := func(r policy.Rule, prof policy.MountOptions) func(*Want, *inventory.Inventory) {
		return func(w *Want, _ *inventory.Inventory) {
			w.Rules = []policy.Rule{r}
			base := w.Resolve
			w.Resolve = func(m *inventory.Mount) Desired {
				if m.Server == r.Match.Server && m.Server != "" {
					return Desired{Mode: policy.ModeEnforce, Profile: policy.Profile{Mount: prof}}
				}
				return base(m)
			}
		}
	}
	for _, tt := range []struct {
		name    string
		setup   func(t *testing.T, root hostfs.Root)
		change  func(*Want, *inventory.Inventory)
		wantErr string
	}{
		{
			name:    "an option with a newline",
			change:  withRule(policy.Rule{Index: 1, Match: policy.Match{Server: "nas"}}, policy.MountOptions{Extra: []string{"nconnect=4\n[ NFSMount_Global_Options ]"}}),
			wantErr: "is not a single mount option",
		},
		{
			name:    "an option with a comment character",
			change:  withRule(policy.Rule{Index: 1, Match: policy.Match{Server: "nas"}}, policy.MountOptions{Extra: []string{"sec=sys;soft"}}),
			wantErr: "is not a single mount option",
		},
		{
			name:    "a server name with a quote",
			change:  withRule(policy.Rule{Index: 1, Match: policy.Match{Server: `nas" ]`}}, policy.MountOptions{NConnect: 4}),
			wantErr: "cannot carry",
		},
		{
			name:    "a server name with a bracket",
			change:  withRule(policy.Rule{Index: 1, Match: policy.Match{Server: "nas]"}}, policy.MountOptions{NConnect: 4}),
			wantErr: "cannot carry",
		},
		{
			name: "a drop-in directory that is a symbolic link",
			setup: func(t *testing.T, root hostfs.Root) {
				if err := os.MkdirAll(root.Path("elsewhere"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("../elsewhere", root.Path("etc/nfsmount.conf.d")); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "symbolic link",
		},
		{
			name: "no mount.nfs",
			setup: func(t *testing.T, root hostfs.Root) {
				os.Remove(root.Path("sbin/mount.nfs"))
			},
			wantErr: "no mount.nfs on this node",
		},
		{
			name: "mount.nfs that is a FIFO",
			setup: func(t *testing.T, root hostfs.Root) {
				os.Remove(root.Path("sbin/mount.nfs"))
				if err := syscall.Mkfifo(root.Path("sbin/mount.nfs"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "not a regular file",
		},
		{
			name: "mount.nfs without mount configuration",
			setup: func(t *testing.T, root hostfs.Root) {
				writeRootFile(t, root, "sbin/mount.nfs", "\x7fELF")
			},
			wantErr: "reads no nfsmount.conf",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := fixtureRoot(t)
			writeRootFile(t, root, "sbin/mount.nfs", mountNFSDropIns)
			if tt.setup != nil {
				tt.setup(t, root)
			}
			want, inv := fixtureWant(), fixtureInventory()
			if tt.change != nil {
				tt.change(&want, inv)
			}
			before := snapshot(t, root)
			_, err := NewPlan(root, inv, want, Options{Persist: PersistNone, NFSMountConf: true})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
				t.Errorf("planning changed the tree:\n%s", diff)
			}
		})
	}
}

// TestPlanNFSMountSkipsHostileName gives one mount a name a section header cannot carry:
// that mount gets no section and a warning, which apply prints in its table and its JSON,
// and the other mounts and rules get theirs.
func TestPlanNFSMountSkipsHostileName(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*Want, *inventory.Inventory)
		gone   string // the section the hostile mount would have had by its address
	}{
		{
			name: "a mounted server name with a quote",
			change: func(w *Want, inv *inventory.Inventory) {
				inv.Mounts[1].Server = `tools" ]`
				base := w.Resolve
				w.Resolve = func(m *inventory.Mount) Desired {
					if m.ServerAddr == "192.168.122.72" {
						byAddr := *m
						byAddr.Server = m.ServerAddr
						return base(&byAddr) // the profile of the tools server
					}
					return base(m)
				}
			},
			gone: `[ Server "192.168.122.72" ]`,
		},
		{
			name: "a mount point with a bracket",
			change: func(w *Want, inv *inventory.Inventory) {
				inv.Mounts[1].MountPoints = []string{"/mnt/tools]"}
				base := w.Resolve
				w.Resolve = func(m *inventory.Mount) Desired {
					d := base(m)
					if m.Server == "192.168.122.72" {
						d.Match = policy.Match{MountPoint: "/mnt/*"}
					}
					return d
				}
			},
			gone: `[ Server "192.168.122.72" ]`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := fixtureRoot(t)
			writeRootFile(t, root, "sbin/mount.nfs", mountNFSDropIns)
			want, inv := nfsmountWant(), fixtureInventory()
			tt.change(&want, inv)
			p, err := NewPlan(root, inv, want, Options{Persist: PersistNone, NFSMountConf: true})
			if err != nil {
				t.Fatalf("one hostile mount failed the plan: %v", err)
			}
			var dropIn string
			for _, a := range p.Actions {
				if a.Kind == KindNFSMountDropIn {
					dropIn = a.New
				}
			}
			for _, s := range []string{`[ Server "192.168.122.71" ]`, `[ Server "nas.example.com" ]`, `[ MountPoint "/scratch" ]`} {
				if !strings.Contains(dropIn, s) {
					t.Errorf("drop-in lacks %s of the other mounts and rules:\n%s", s, dropIn)
				}
			}
			if strings.Contains(dropIn, tt.gone) || strings.Contains(dropIn, "tools") {
				t.Errorf("drop-in has a section of the hostile mount:\n%s", dropIn)
			}
			if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "cannot carry") {
				t.Fatalf("warnings = %q, want one on the hostile name", p.Warnings)
			}
			var table bytes.Buffer
			if err := WriteReport(&table, &Report{DryRun: true, Plan: p}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(table.String(), "Warnings:\n  - nfsmount.conf: no section for the mount of") {
				t.Errorf("apply's table does not show the warning:\n%s", table.String())
			}
			js, err := json.Marshal(Report{DryRun: true, Plan: p})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(js), `"warnings":["nfsmount.conf: no section for the mount of`) {
				t.Errorf("apply's JSON does not show the warning: %s", js)
			}
		})
	}
}

// TestPlanNFSMountConflict: two mounts of one server that want different options get no
// section for it, and the plan says why; a mount by name also gets a section for its
// address.
func TestPlanNFSMountConflict(t *testing.T) {
	root := fixtureRoot(t)
	writeRootFile(t, root, "sbin/mount.nfs", mountNFSDropIns)
	inv := fixtureInventory()
	inv.Mounts[0].Server = "data.example.com"
	inv.Mounts[1].Server = "data.example.com"
	w := fixtureWant()
	w.Resolve = func(m *inventory.Mount) Desired {
		n := 2
		if m.Device == "0:54" {
			n = 4
		}
		return Desired{Mode: policy.ModeEnforce, Profile: policy.Profile{Mount: policy.MountOptions{NConnect: n}}}
	}
	p, err := NewPlan(root, inv, w, Options{Persist: PersistNone, NFSMountConf: true})
	if err != nil {
		t.Fatal(err)
	}
	if !containsNote(p, `[ Server "data.example.com" ] not written`) {
		t.Errorf("no note on the conflict: %q", p.Notes)
	}
	var content string
	for _, a := range p.Actions {
		if a.Kind == KindNFSMountDropIn {
			content = a.New
		}
	}
	if strings.Contains(content, "data.example.com") {
		t.Errorf("a section for the conflicting name was written:\n%s", content)
	}
	for _, s := range []string{"[ Server \"192.168.122.71\" ]\n# for /mnt/data, /srv/data copy\nnconnect=2\n", "[ Server \"192.168.122.72\" ]\n# for /mnt/tools\nnconnect=4\n"} {
		if !strings.Contains(content, s) {
			t.Errorf("drop-in lacks the address section %q:\n%s", s, content)
		}
	}
}
