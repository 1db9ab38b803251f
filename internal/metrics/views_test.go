package metrics

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/inventory"
)

// loadSaved reads one of the inventory's saved mountstats files (testdata/saved/README.md).
func loadSaved(t *testing.T, name string) *inventory.Inventory {
	t.Helper()
	inv, err := inventory.ReadMountStatsFile("../inventory/testdata/saved/" + name + ".mountstats")
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// TestSavedStatsViews checks nfsiostat's -a, -d and -p figures against the differences
// worked out by hand in testdata/saved/README.md, over the 60 s between the two files.
func TestSavedStatsViews(t *testing.T) {
	t.Parallel()
	rep, err := SavedStats(loadSaved(t, "before"), loadSaved(t, "after"), StatsOptions{Views: Views()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Mounts) != 2 {
		t.Fatalf("got %d mounts, want the two stacked on /mnt/home", len(rep.Mounts))
	}
	v3 := rep.Mounts[0]
	if v3.Seconds != 60 || v3.Version != "3" || !rep.Time.IsZero() {
		t.Errorf("NFSv3 mount over %v s, version %s, time %v; want 60 s, 3, no time", v3.Seconds, v3.Version, rep.Time)
	}
	if diff := cmp.Diff(&AttrCache{VFSOpens: 100, InodeRevalidates: 100, DataInvalidates: 2, AttrInvalidates: 5, GETATTRs: 100, ACCESSes: 20}, v3.Attr); diff != "" {
		t.Errorf("attr (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&DirCache{VFSOpens: 100, DentryRevalidates: 25, VFSLookups: 30, LOOKUPs: 15, VFSGetdents: 12, READDIRs: 9}, v3.Dir); diff != "" {
		t.Errorf("dir (-want +got):\n%s", diff)
	}
	// 648 pages read: 8 by readpage, 640 in 20 read-ahead calls; 160 written in 10 calls.
	wantPage := &PageCache{ReadPageCalls: 8, ReadPagesCalls: 20, ReadPagesPages: 640, PagesPerReadPagesCall: 32,
		WritePagesCalls: 10, WritePagesPages: 160, PagesPerWritePagesCall: 16}
	if diff := cmp.Diff(wantPage, v3.Page); diff != "" {
		t.Errorf("page (-want +got):\n%s", diff)
	}
	// The stacked NFSv4.2 superblock is matched with its own earlier entry: 60 GETATTRs.
	if v4 := rep.Mounts[1]; v4.Version != "4.2" || v4.Seconds != 60 || v4.Attr.GETATTRs != 60 {
		t.Errorf("NFSv4.2 mount = version %s over %v s with %d GETATTRs; want 4.2, 60 s, 60", v4.Version, v4.Seconds, v4.Attr.GETATTRs)
	}
}

// TestSavedStatsSinceMount: one file alone is read since each mount, as mountstats -f
// shows it; so is a --since file that is newer (mountstats -S's rule).
func TestSavedStatsSinceMount(t *testing.T) {
	t.Parallel()
	after := loadSaved(t, "after")
	for name, prev := range map[string]*inventory.Inventory{"alone": nil, "since a newer file": after} {
		rep, err := SavedStats(prev, loadSaved(t, "before"), StatsOptions{Views: []View{ViewPage}, MountPoints: []string{"/mnt/home"}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m := rep.Mounts[0]
		// before: 261 pages read, 5 of them by readpage, 256 in 6 calls.
		if m.Seconds != 100 || m.Page == nil || m.Page.ReadPagesPages != 256 || m.Attr != nil || m.Dir != nil {
			t.Errorf("%s: %v s, page %+v, attr %v, dir %v; want 100 s, 256 pages, page view only", name, m.Seconds, m.Page, m.Attr, m.Dir)
		}
	}
	if _, err := SavedStats(after, after, StatsOptions{}); err == nil || !strings.Contains(err.Error(), "same sample twice") {
		t.Errorf("one file twice: err = %v", err)
	}
}

func TestParseViews(t *testing.T) {
	t.Parallel()
	got, err := ParseViews([]string{"page,attr", "attr"})
	if err != nil || !cmp.Equal(got, []View{ViewAttr, ViewPage}) {
		t.Errorf("ParseViews = %v, %v; want [attr page]", got, err)
	}
	if got, _ := ParseViews([]string{"all"}); !cmp.Equal(got, Views()) {
		t.Errorf("all = %v", got)
	}
	if _, err := ParseViews([]string{"cache"}); err == nil {
		t.Error("an unknown view was accepted")
	}
}

func TestWriteStatsTableViews(t *testing.T) {
	t.Parallel()
	rep, err := SavedStats(loadSaved(t, "before"), loadSaved(t, "after"), StatsOptions{Views: Views()})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteStatsTable(&out, rep.Mounts[:1]); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"10.0.0.7:/home mounted on /mnt/home (NFS 3, 1 connections, over 60.0 s):",
		"VFS opens  forced GETATTRs  GETATTR  ACCESS  page cache invalidations  attr cache invalidations",
		"      100              100      100      20                         2                         5",
		"VFS opens  dentry revalidates  VFS lookups  LOOKUP  getdents  READDIR(PLUS)",
		"      100                  25           30      15        12              9",
		"read                  8             20            640                    32.0",
		"write                  0             10            160                    16.0",
		"updatepage calls: 0, congestion waits: 0",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
