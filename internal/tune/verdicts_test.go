package tune

import (
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/readahead"
)

// TestRecordVerdicts keeps the last verdict per device in the journal, and nothing without
// a journal.
func TestRecordVerdicts(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	v := func(dev string, verdict readahead.Verdict) readahead.Change {
		return readahead.Change{Device: dev, FromKB: 128, ToKB: 1024, At: at, Verdict: verdict}
	}
	if err := RecordVerdicts(root, []readahead.Change{v("0:53", readahead.Helped)}); err != nil {
		t.Fatal(err)
	}
	if got, err := Verdicts(root); err != nil || len(got) != 0 {
		t.Fatalf("without a journal: %+v, %v; want none", got, err)
	}
	j := &Journal{Version: journalVersion}
	if err := j.save(root); err != nil {
		t.Fatal(err)
	}
	for _, batch := range [][]readahead.Change{
		{v("0:53", readahead.Helped), v("0:54", readahead.NoChange)},
		{v("0:53", readahead.Hurt)},
	} {
		if err := RecordVerdicts(root, batch); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Verdicts(root)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]readahead.Verdict{"0:53": readahead.Hurt, "0:54": readahead.NoChange}
	if len(got) != len(want) {
		t.Fatalf("verdicts = %+v, want %v", got, want)
	}
	for _, c := range got {
		if want[c.Device] != c.Verdict {
			t.Errorf("%s: %s, want %s", c.Device, c.Verdict, want[c.Device])
		}
	}
}
