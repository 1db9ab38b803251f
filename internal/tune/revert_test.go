package tune

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// editRootFile replaces the first old in the file at p with new, in place, as an editor
// would; old must be there.
func editRootFile(t *testing.T, root hostfs.Root, p, old, new string) {
	t.Helper()
	b, err := os.ReadFile(root.Path(p))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s does not hold %q:\n%s", p, old, b)
	}
	if err := os.WriteFile(root.Path(p), []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func applyPlan(t *testing.T, root hostfs.Root, p *Plan) {
	t.Helper()
	if res, err := Apply(context.Background(), root, p, ApplyOptions{}); err != nil {
		t.Fatalf("apply: %v (%+v)", err, res)
	}
}

// item returns the result of the entry for path p.
func item(t *testing.T, res *Result, p string) ItemResult {
	t.Helper()
	for _, it := range res.Items {
		if it.Action.Path == p {
			return it
		}
	}
	t.Fatalf("no item for %s in %+v", p, res.Items)
	return ItemResult{}
}

// A line someone adds to fstab, or to a file nfstune created, after apply stays through
// revert; nfstune's own lines go back to what they replaced, and everything else is
// reverted as before.
func TestRevertKeepsLinesAddedSinceApply(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	before := snapshot(t, root)
	applyPlan(t, root, plan(t, root))
	const home = "192.168.122.80:/export/home /home nfs4 _netdev 0 0\n"
	editRootFile(t, root, FstabPath, "this line is not understood by anyone\n", "this line is not understood by anyone\n"+home)
	const swappiness = "vm.swappiness = 10\n"
	editRootFile(t, root, SysctlFilePath, "net.ipv4.tcp_rmem", swappiness+"net.ipv4.tcp_rmem")

	res, err := Revert(root)
	if err != nil {
		t.Fatalf("revert: %v", err)
	}
	want := maps.Clone(before)
	want["etc/fstab"] = "-rw-r--r-- " + fixtureFstab + home
	want["etc/sysctl.d/"] = ""
	want["etc/sysctl.d/90-nfstune.conf"] = "-rw-r--r-- " + swappiness
	if diff := cmp.Diff(want, snapshot(t, root)); diff != "" {
		t.Errorf("after revert (-want +got):\n%s", diff)
	}
	if it := item(t, res, FstabPath); it.Status != StatusDone || it.Kept != 1 {
		t.Errorf("fstab item = %+v, want done with 1 line kept", it)
	}
	if ok, err := Pending(root); ok || err != nil {
		t.Errorf("journal left: %v, %v", ok, err)
	}
}

// A line nfstune wrote that was edited since cannot be told apart from nfstune's change:
// that file is refused, named and left as it is, the rest is reverted, and the entry stays
// for a revert once the line reads as apply wrote it again.
func TestRevertRefusesEditedFstabLine(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	before := snapshot(t, root)
	applyPlan(t, root, plan(t, root))
	const written = "/mnt/tools\tnfs\trsize=1048576,wsize=1048576,hard\t0"
	const edited = "/mnt/tools\tnfs\trsize=1048576,wsize=1048576,hard,noatime\t0"
	editRootFile(t, root, FstabPath, written, edited)
	fstab := readFixture(t, root, FstabPath)

	res, err := Revert(root)
	if !errors.Is(err, ErrPartial) || !errors.Is(err, ErrInseparable) {
		t.Fatalf("err = %v, want a partial revert refusing a file", err)
	}
	it := item(t, res, FstabPath)
	if it.Status != StatusRefused || !strings.Contains(it.Error, "/etc/fstab left as it is") || !strings.Contains(it.Error, `line 5 of the file as apply wrote it, "192.168.122.72:/export/tools`) {
		t.Errorf("fstab item = %+v, want refused naming the file and the line", it)
	}
	if res.Failed() != 1 {
		t.Errorf("%d items failed or refused, want 1: %+v", res.Failed(), res.Items)
	}
	after := snapshot(t, root)
	if got := after["etc/fstab"]; got != "-rw-r--r-- "+fstab {
		t.Errorf("the refused fstab was changed:\n%s", got)
	}
	for p, v := range before {
		if p != "etc/fstab" && after[p] != v {
			t.Errorf("%s not reverted: %q, want %q", p, after[p], v)
		}
	}
	j, err := loadJournal(root)
	if err != nil || j == nil || len(j.Entries) != 1 || j.Entries[0].Path != FstabPath {
		t.Fatalf("journal after a refusal = %+v, %v; want only the fstab entry", j, err)
	}

	// The line put back as apply wrote it, revert takes the rest.
	editRootFile(t, root, FstabPath, edited, written)
	if _, err := Revert(root); err != nil {
		t.Fatalf("second revert: %v", err)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("second revert (-before +after):\n%s", diff)
	}
}

// nfsmount.conf where mount.nfs reads no drop-in: nfstune's block goes, the site's lines
// added around it stay; an edited line of the block refuses the file.
func TestRevertNFSMountConf(t *testing.T) {
	t.Parallel()
	const own = "# the site's own defaults\n[ NFSMount_Global_Options ]\nretrans=3" // no final newline
	setup := func(t *testing.T) (hostfs.Root, map[string]string) {
		root := fixtureRoot(t)
		writeRootFile(t, root, "sbin/mount.nfs", mountNFSOld)
		writeRootFile(t, root, NFSMountConfPath, own)
		before := snapshot(t, root)
		p, err := NewPlan(root, fixtureInventory(), nfsmountWant(), Options{Persist: PersistNone, NFSMountConf: true})
		if err != nil {
			t.Fatal(err)
		}
		applyPlan(t, root, p)
		return root, before
	}
	t.Run("lines added", func(t *testing.T) {
		t.Parallel()
		root, before := setup(t)
		editRootFile(t, root, NFSMountConfPath, "retrans=3\n", "retrans=3\ntimeo=600\n")
		editRootFile(t, root, NFSMountConfPath, nfsmountBlockEnd+"\n", nfsmountBlockEnd+"\n[ Server \"backup\" ]\nvers=3\n")
		if _, err := Revert(root); err != nil {
			t.Fatalf("revert: %v", err)
		}
		want := maps.Clone(before)
		want["etc/nfsmount.conf"] = "-rw-r--r-- " + own + "\ntimeo=600\n[ Server \"backup\" ]\nvers=3\n"
		if diff := cmp.Diff(want, snapshot(t, root)); diff != "" {
			t.Errorf("after revert (-want +got):\n%s", diff)
		}
	})
	t.Run("line of the block edited", func(t *testing.T) {
		t.Parallel()
		root, before := setup(t)
		editRootFile(t, root, NFSMountConfPath, "actimeo=30\n", "actimeo=60\n")
		conf := readFixture(t, root, NFSMountConfPath)
		res, err := Revert(root)
		if !errors.Is(err, ErrPartial) {
			t.Fatalf("err = %v, want a partial revert", err)
		}
		if it := item(t, res, NFSMountConfPath); it.Status != StatusRefused || !strings.Contains(it.Error, NFSMountConfPath+" left as it is") || !strings.Contains(it.Error, `"actimeo=30"`) {
			t.Errorf("nfsmount.conf item = %+v, want refused", it)
		}
		after := snapshot(t, root)
		if got := readFixture(t, root, NFSMountConfPath); got != conf {
			t.Errorf("the refused file was changed:\n%s", got)
		}
		for p, v := range before {
			if p != "etc/nfsmount.conf" && after[p] != v {
				t.Errorf("%s not reverted: %q, want %q", p, after[p], v)
			}
		}
	})
}

// The drop-in nfstune created: a section someone adds to it stays, in the file, once
// nfstune's lines are gone; an edited line of nfstune's refuses it.
func TestRevertNFSMountDropIn(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (hostfs.Root, map[string]string) {
		root := fixtureRoot(t)
		writeRootFile(t, root, "sbin/mount.nfs", mountNFSDropIns)
		before := snapshot(t, root)
		p, err := NewPlan(root, fixtureInventory(), nfsmountWant(), Options{Persist: PersistNone, NFSMountConf: true})
		if err != nil {
			t.Fatal(err)
		}
		applyPlan(t, root, p)
		return root, before
	}
	t.Run("section added", func(t *testing.T) {
		t.Parallel()
		root, before := setup(t)
		const mine = "\n[ Server \"backup\" ]\nvers=3\n"
		editRootFile(t, root, NFSMountDropInPath, "cto=False\n", "cto=False\n"+mine)
		res, err := Revert(root)
		if err != nil {
			t.Fatalf("revert: %v", err)
		}
		want := maps.Clone(before)
		want["etc/nfsmount.conf.d/"] = ""
		want["etc/"+strings.TrimPrefix(NFSMountDropInPath, "/etc/")] = "-rw-r--r-- " + mine
		if diff := cmp.Diff(want, snapshot(t, root)); diff != "" {
			t.Errorf("after revert (-want +got):\n%s", diff)
		}
		if it := item(t, res, NFSMountDropInPath); it.Status != StatusDone || it.Kept != 3 {
			t.Errorf("drop-in item = %+v, want done with 3 lines kept", it)
		}
	})
	t.Run("line edited", func(t *testing.T) {
		t.Parallel()
		root, _ := setup(t)
		editRootFile(t, root, NFSMountDropInPath, "nconnect=4\n", "nconnect=8\n")
		dropIn := readFixture(t, root, NFSMountDropInPath)
		res, err := Revert(root)
		if !errors.Is(err, ErrPartial) {
			t.Fatalf("err = %v, want a partial revert", err)
		}
		if it := item(t, res, NFSMountDropInPath); it.Status != StatusRefused || !strings.Contains(it.Error, NFSMountDropInPath+" left as it is") {
			t.Errorf("drop-in item = %+v, want refused", it)
		}
		if got := readFixture(t, root, NFSMountDropInPath); got != dropIn {
			t.Errorf("the refused drop-in was changed:\n%s", got)
		}
		// Its directory stays journaled, to go with the file.
		j, err := loadJournal(root)
		if err != nil || j == nil || j.find("/etc/nfsmount.conf.d") < 0 || j.find(NFSMountDropInPath) < 0 {
			t.Errorf("journal = %+v, %v; want the drop-in and its directory", j, err)
		}
	})
}

// A second apply over lines someone added: revert takes back both applies and keeps them.
func TestRevertAfterSecondApply(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	before := snapshot(t, root)
	applyPlan(t, root, plan(t, root))
	const home = "192.168.122.80:/export/home /home nfs4 _netdev 0 0\n"
	editRootFile(t, root, FstabPath, "# tools share", home+"# tools share")

	want := fixtureWant()
	base := want.Resolve
	want.Resolve = func(m *inventory.Mount) Desired {
		d := base(m)
		if m.Server == "192.168.122.72" {
			d.Profile.Mount.WSize = 524288
		}
		return d
	}
	p, err := NewPlan(root, fixtureInventory(), want, fullOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got := briefs(p); len(got) != 2 || got[0].Kind != string(KindBackup) || got[1].Kind != string(KindFstab) {
		t.Fatalf("second plan = %+v, want the backup and fstab", got)
	}
	applyPlan(t, root, p)
	if !strings.Contains(readFixture(t, root, FstabPath), "wsize=524288") {
		t.Fatalf("second apply did not rewrite fstab:\n%s", readFixture(t, root, FstabPath))
	}

	if _, err := Revert(root); err != nil {
		t.Fatalf("revert: %v", err)
	}
	wantTree := maps.Clone(before)
	wantTree["etc/fstab"] = "-rw-r--r-- " + strings.Replace(fixtureFstab, "# tools share", home+"# tools share", 1)
	if diff := cmp.Diff(wantTree, snapshot(t, root)); diff != "" {
		t.Errorf("after revert (-want +got):\n%s", diff)
	}
}

// writeOldJournal rewrites the journal as the earlier nfstune wrote it: version 1, file
// entries with their original only.
func writeOldJournal(t *testing.T, root hostfs.Root) {
	t.Helper()
	b, err := os.ReadFile(root.Path(JournalPath))
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	j["version"] = 1
	for _, e := range j["entries"].([]any) {
		delete(e.(map[string]any), "writes")
	}
	if b, err = json.Marshal(j); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root.Path(JournalPath), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A journal of the earlier nfstune does not say what apply wrote: each file it changed is
// refused and left alone (values are reverted), unless it already is the original, and
// --restore-original puts one back byte for byte as that version did.
func TestRevertOldJournal(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	before := snapshot(t, root)
	applyPlan(t, root, plan(t, root))
	writeOldJournal(t, root)
	const home = "192.168.122.80:/export/home /home nfs4 _netdev 0 0\n"
	editRootFile(t, root, FstabPath, "# tools share", home+"# tools share")
	tuned := snapshot(t, root)

	res, err := Revert(root)
	if !errors.Is(err, ErrPartial) {
		t.Fatalf("err = %v, want a partial revert", err)
	}
	files := []string{FstabPath, FstabBackup, UdevRulePath, SysctlFilePath}
	for _, p := range files {
		if it := item(t, res, p); it.Status != StatusRefused || !strings.Contains(it.Error, "an earlier nfstune") || !strings.Contains(it.Error, "--restore-original "+p) {
			t.Errorf("%s item = %+v, want refused as of an earlier journal", p, it)
		}
	}
	after := snapshot(t, root)
	for p, v := range tuned {
		if strings.HasPrefix(p, "etc/") && after[p] != v {
			t.Errorf("refused %s changed: %q", p, after[p])
		}
	}
	for _, p := range []string{"sys/devices/virtual/bdi/0:53/read_ahead_kb", "proc/sys/net/ipv4/tcp_rmem"} {
		if after[p] != before[p] {
			t.Errorf("%s = %q not reverted, want %q", p, after[p], before[p])
		}
	}

	// A file already back to its original is done with; the others are restored on request.
	if err := os.WriteFile(root.Path(FstabPath), []byte(fixtureFstab), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Revert(root, "/etc/passwd"); err == nil || errors.Is(err, ErrPartial) || !strings.Contains(err.Error(), "not a file in the journal") {
		t.Errorf("err = %v, want a refusal of a file not journaled", err)
	}
	if _, err := Revert(root, FstabBackup, UdevRulePath, SysctlFilePath); err != nil {
		t.Fatalf("revert --restore-original: %v", err)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("after revert (-before +after):\n%s", diff)
	}
}
