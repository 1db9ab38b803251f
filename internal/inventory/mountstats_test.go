package inventory

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// statsEntry builds one NFSv4.2 mountstats entry in the kernel 6.1 layout, with the given
// statvers, events, transport and READ lines substituted.
func statsEntry(mountPoint, statvers, events, xprt, read string) string {
	return "device srv:/data mounted on " + mountPoint + " with fstype nfs4 statvers=" + statvers + "\n" +
		"\topts:\trw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,acregmin=3,acregmax=60,acdirmin=30,acdirmax=60,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.0.10,local_lock=none\n" +
		"\tage:\t42\n" +
		"\timpl_id:\tname='',domain='',date='0,0'\n" +
		"\tcaps:\tcaps=0x3ffbffff,wtmult=512,dtsize=1048576,bsize=0,namlen=255\n" +
		"\tnfsv4:\tbm0=0xfdffbfff,bm1=0xf9be3e,bm2=0x68800,acl=0x3,sessions,pnfs=not configured,lease_time=90,lease_expired=0\n" +
		"\tsec:\tflavor=1,pseudoflavor=1\n" +
		"\tevents:\t" + events + "\n" +
		"\tbytes:\t4294967296 0 0 0 4295229440 0 1048640 0\n" +
		"\tRPC iostats version: 1.1  p/v: 100003/4 (nfs)\n" +
		xprt +
		"\tper-op statistics\n" +
		"\t        NULL: 1 1 0 44 24 0 0 0 0\n" +
		"\t        READ: " + read + "\n" +
		"\n"
}

const (
	goodEvents = "41 7362 3 12 260 147 1250 2 0 3918 0 0 52 0 3 0 0 260 0 0 0 0 0 0 0 0 0"
	goodRead   = "4096 4096 0 655360 4295229440 120 98000 99500 0"
	tcpLine    = "\txprt:\ttcp 875 0 1 0 12 90000 90000 0 270000 0 48 45000 22500\n"
	// oldEvents and tcpLine10 are the events: and xprt: lines of a kernel before 2.6.37
	// (statvers=1.0): no pNFS READ and WRITE counters, no slot and queue counters.
	oldEvents = "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25"
	tcpLine10 = "\txprt:\ttcp 875 0 1 0 12 90000 90000 0 270000 0\n"
)

var mountStatsTests = []struct {
	name string
	in   string
	// want maps mount point to the number of transports of the parsed entry.
	want     map[string]int
	warnings []string
}{
	{
		name: "good entries among other filesystems",
		in: "device /dev/vda1 mounted on / with fstype ext4\n" +
			statsEntry("/a", "1.1", goodEvents, tcpLine+tcpLine+tcpLine+tcpLine, goodRead) +
			statsEntry(`/with\040space`, "1.1", goodEvents, tcpLine, goodRead),
		want: map[string]int{"/a": 4, "/with space": 1},
	},
	{
		name:     "statvers 1.2 with a transport",
		in:       statsEntry("/a", "1.1", goodEvents, tcpLine, goodRead) + statsEntry("/new", "1.2", goodEvents, tcpLine, goodRead),
		want:     map[string]int{"/a": 1},
		warnings: []string{`mountstats entry for "/new" dropped: error parsing file: Unrecognized NFS transport stats version: "1.2", protocol: tcp`},
	},
	{
		name:     "xprt local",
		in:       statsEntry("/local", "1.1", goodEvents, "\txprt:\tlocal 0 1 0 0 2211 2211 0 6633 0 12 1105 552\n", goodRead) + statsEntry("/a", "1.1", goodEvents, tcpLine, goodRead),
		want:     map[string]int{"/a": 1},
		warnings: []string{`mountstats entry for "/local" dropped: error parsing file: invalid NFS protocol "local" in stats 1.1 statement: [0 1 0 0 2211 2211 0 6633 0 12 1105 552]`},
	},
	{
		name:     "truncated events",
		in:       statsEntry("/a", "1.1", goodEvents, tcpLine, goodRead) + statsEntry("/ev", "1.1", "41 7362 3", tcpLine, goodRead),
		want:     map[string]int{"/a": 1},
		warnings: []string{`mountstats entry for "/ev" dropped: error parsing file: invalid NFS events stats: [41 7362 3]`},
	},
	{
		name: "events from before Linux 2.6.37 (25 counters)",
		in:   statsEntry("/old", "1.0", oldEvents, tcpLine10, goodRead) + statsEntry("/a", "1.1", goodEvents, tcpLine, goodRead),
		want: map[string]int{"/old": 1, "/a": 1},
	},
	{
		name:     "26 events",
		in:       statsEntry("/a", "1.1", goodEvents, tcpLine, goodRead) + statsEntry("/ev", "1.1", oldEvents+" 26", tcpLine, goodRead),
		want:     map[string]int{"/a": 1},
		warnings: []string{`mountstats entry for "/ev" dropped: error parsing file: invalid NFS events stats: [1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26]`},
	},
	{
		name:     "truncated per-op line",
		in:       statsEntry("/op", "1.1", goodEvents, tcpLine, "4096 4096 0") + statsEntry("/a", "1.1", goodEvents, tcpLine, goodRead),
		want:     map[string]int{"/a": 1},
		warnings: []string{`mountstats entry for "/op" dropped: error parsing file: invalid NFS per-operations stats: [READ: 4096 4096 0]`},
	},
	{
		name:     "nfs mount without statistics",
		in:       "device srv:/x mounted on /x with fstype nfs4\n" + statsEntry("/a", "1.1", goodEvents, tcpLine, goodRead),
		want:     map[string]int{"/a": 1},
		warnings: []string{`mountstats entry for "/x" has no NFS statistics`},
	},
	{
		name:     "mangled device line",
		in:       "device srv:/x mounted\n" + statsEntry("/a", "1.1", goodEvents, tcpLine, goodRead),
		want:     map[string]int{"/a": 1},
		warnings: []string{`mountstats entry for "device srv:/x mounted" dropped: error parsing file: Invalid device ["device" "srv:/x" "mounted"]`},
	},
	{name: "empty", in: "", want: map[string]int{}},
}

func TestParseMountStats(t *testing.T) {
	t.Parallel()
	for _, tt := range mountStatsTests {
		t.Run(tt.name, func(t *testing.T) {
			stats, warnings := statsByMountPoint(strings.NewReader(tt.in))
			got := map[string]int{}
			for mp, s := range stats {
				got[mp] = len(s.Transports)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMountStatsValues(t *testing.T) {
	t.Parallel()
	stats, _ := statsByMountPoint(strings.NewReader(statsEntry("/a", "1.1", goodEvents, tcpLine+tcpLine, goodRead)))
	s := stats["/a"]
	if s == nil {
		t.Fatal("no stats for /a")
	}
	if s.Age != 42*time.Second || s.StatVersion != "1.1" || s.Bytes.Read != 4294967296 || s.Events.VFSReadPages != 3918 {
		t.Errorf("stats = age %v statvers %q bytes %d readpages %d", s.Age, s.StatVersion, s.Bytes.Read, s.Events.VFSReadPages)
	}
	if len(s.Operations) != 2 || s.Operations[1].Operation != "READ" || s.Operations[1].BytesReceived != 4295229440 {
		t.Errorf("operations = %+v", s.Operations)
	}
	if len(s.Transports) != 2 || s.Transports[0].Sends != 90000 || s.Transports[0].MaximumRPCSlotsUsed != 48 {
		t.Errorf("transports = %+v", s.Transports)
	}
}

// TestParseMountStatsOldEvents checks that a 25-counter events line keeps its counters in
// place and reads the two pNFS counters it lacks as 0.
func TestParseMountStatsOldEvents(t *testing.T) {
	t.Parallel()
	stats, warnings := statsByMountPoint(strings.NewReader(statsEntry("/old", "1.0", oldEvents, tcpLine10, goodRead)))
	if len(warnings) > 0 {
		t.Errorf("warnings = %q", warnings)
	}
	s := stats["/old"]
	if s == nil {
		t.Fatal("no stats for /old")
	}
	e := s.Events
	if e.InodeRevalidate != 1 || e.VFSReadPages != 10 || e.JukeboxDelay != 25 || e.PNFSRead != 0 || e.PNFSWrite != 0 {
		t.Errorf("events = %+v", e)
	}
	if s.Bytes.Read != 4294967296 || len(s.Operations) != 2 {
		t.Errorf("bytes %+v, %d operations: the rest of the entry was not read", s.Bytes, len(s.Operations))
	}
}

// TestParseMountStatsManyBad checks the bisection keeps every good entry whatever the
// position of the bad ones, and that the warnings name the bad ones in file order: with
// more entries than one worker parses (minEntriesPerWorker), the ranges are parsed apart.
func TestParseMountStatsManyBad(t *testing.T) {
	t.Parallel()
	const n = 2*minEntriesPerWorker + 45
	var b strings.Builder
	want := map[string]int{}
	var bad []string
	for i := range n {
		mp := fmt.Sprintf("/m%03d", i)
		if i%5 == 2 {
			b.WriteString(statsEntry(mp, "1.2", goodEvents, tcpLine, goodRead))
			bad = append(bad, mp)
			continue
		}
		b.WriteString(statsEntry(mp, "1.1", goodEvents, tcpLine, goodRead))
		want[mp] = 1
	}
	stats, warnings := statsByMountPoint(strings.NewReader(b.String()))
	got := map[string]int{}
	for mp, s := range stats {
		got[mp] = len(s.Transports)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(warnings) != len(bad) {
		t.Fatalf("%d warnings, want %d: %q", len(warnings), len(bad), warnings)
	}
	for i, mp := range bad {
		if !strings.HasPrefix(warnings[i], fmt.Sprintf("mountstats entry for %q dropped", mp)) {
			t.Errorf("warning %d = %q, want one for %s", i, warnings[i], mp)
		}
	}
}

func FuzzParseMountStats(f *testing.F) {
	for _, tt := range mountStatsTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		stripped, err := readStripped(strings.NewReader(s), 1<<20)
		if err != nil {
			t.Errorf("readStripped: %v", err)
		}
		// The same entries as the whole file has, in its order, each with its device line.
		whole := splitMountStats([]byte(s))
		if len(stripped) != len(whole) {
			t.Fatalf("readStripped: %d entries, the file %d", len(stripped), len(whole))
		}
		for i := range whole {
			if stripped[i].mountPoint != whole[i].mountPoint || stripped[i].source != whole[i].source ||
				stripped[i].xprtLines != whole[i].xprtLines {
				t.Errorf("entry %d: stripped %+v, whole %+v", i, stripped[i], whole[i])
			}
		}
		stats, _ := statsByMountPoint(strings.NewReader(s))
		for mp, st := range stats {
			if st == nil {
				t.Errorf("nil stats for %q", mp)
			}
		}
	})
}

func TestReadStripped(t *testing.T) {
	t.Parallel()
	in := statsEntry("/a", "1.1", goodEvents, tcpLine, goodRead) + "device proc mounted on /proc with fstype proc\n" +
		statsEntry("/b", "1.1", goodEvents, tcpLine, goodRead)
	chunks, err := readStripped(strings.NewReader("text before any device line\n"+in), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, c := range chunks {
		got.Write(c.text)
	}
	if len(chunks) != 3 || strings.Contains(got.String(), "READ:") || strings.Contains(got.String(), "before") ||
		strings.Contains(got.String(), "opts:") || !strings.Contains(got.String(), "xprt:") ||
		strings.Count(got.String(), "per-op statistics") != 2 || string(chunks[1].text) != "device proc mounted on /proc with fstype proc\n" {
		t.Errorf("%d entries, stripped:\n%s", len(chunks), got.String())
	}
	// The entries' statistics are the whole file's but for the per-op rows; their options
	// are mountinfo's business.
	entries, warnings := parseStatsChunks(chunks)
	whole, _ := parseMountStats([]byte(in))
	if len(warnings) != 0 || len(entries) != len(whole) {
		t.Fatalf("%d entries, warnings %q; the whole file has %d", len(entries), warnings, len(whole))
	}
	for i := range whole {
		if whole[i].Stats == nil {
			continue
		}
		w := *whole[i].Stats
		w.Operations = nil
		if diff := cmp.Diff(w, *entries[i].Stats, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("entry %d (-whole +stripped):\n%s", i, diff)
		}
	}
	if _, err := readStripped(strings.NewReader(in), 100); err == nil {
		t.Errorf("readStripped over the limit: want error")
	}
}

// statsByMountPoint parses a mountstats file with parseMountStats and keys the NFS
// statistics by mount point, for tests that look entries up by path. Of superblocks
// stacked on one mount point only the last is kept (Read pairs entries with mountinfo
// lines by order instead).
func statsByMountPoint(r io.Reader) (map[string]*Stats, []string) {
	b, err := io.ReadAll(r)
	if err != nil {
		return map[string]*Stats{}, []string{fmt.Sprintf("reading mountstats: %v", err)}
	}
	entries, warnings := parseMountStats(b)
	out := make(map[string]*Stats, len(entries))
	for _, e := range entries {
		if !isNFSType(e.FSType) {
			continue
		}
		if e.Stats == nil {
			continue
		}
		out[e.MountPoint] = e.Stats
	}
	return out, warnings
}
