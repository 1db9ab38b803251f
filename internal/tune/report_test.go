package tune

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFileLineDiff(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, old, new string
		want           []string
	}{
		{name: "new file", old: "", new: "a\nb\n", want: []string{"+ a", "+ b"}},
		{name: "same", old: "a\nb\n", new: "a\nb\n", want: nil},
		{name: "line changed", old: "a\nb\nc\n", new: "a\nB\nc\n", want: []string{"- b", "+ B"}},
		{name: "duplicate kept once", old: "x\nx\n", new: "x\n", want: []string{"- x"}},
		{name: "no trailing newline", old: "a", new: "a\nb", want: []string{"+ b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, fileLineDiff(tt.old, tt.new)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteReport(t *testing.T) {
	t.Parallel()
	plan := &Plan{Actions: []Action{
		{Kind: KindReadAhead, Path: "/sys/class/bdi/0:53/read_ahead_kb", MountPoints: []string{"/mnt/a\nforged"}, Old: "128", New: "15360", Reason: "profile azure-files"},
		{Kind: KindSysctlFile, Path: "/etc/sysctl.d/90-nfstune.conf", OldAbsent: true, New: "sunrpc.tcp_max_slot_table_entries = 128\n", Reason: "slots"},
	}}
	res := &Result{Journal: "/var/lib/nfstune/journal.json", Items: []ItemResult{
		{Action: plan.Actions[0], Status: StatusDone, Value: "15360"},
	}}
	var b strings.Builder
	if err := WriteReport(&b, &Report{Plan: plan, Result: res}); err != nil {
		t.Fatal(err)
	}
	want := `Applied 1 of 2 changes, 1 not run (journal /var/lib/nfstune/journal.json):
  [done, read back 15360] readahead /sys/class/bdi/0:53/read_ahead_kb: 128 -> 15360
        mounts: /mnt/a\nforged
        why: profile azure-files
  [not run] sysctl-file /etc/sysctl.d/90-nfstune.conf: absent -> new content:
        + sunrpc.tcp_max_slot_table_entries = 128
        why: slots
Read-ahead applies to files opened after the change: files already open keep the old value until reopened.
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	b.Reset()
	if err := WriteReport(&b, &Report{DryRun: true, Plan: &Plan{}}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "Nothing to change:") {
		t.Errorf("empty plan: %q", b.String())
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteReportKeepsWriteError(t *testing.T) {
	t.Parallel()
	err := WriteReport(failWriter{}, &Report{Plan: &Plan{}})
	if err == nil || err.Error() != "disk full" {
		t.Errorf("err = %v, want the write error", err)
	}
}

// The mounts to unmount together and their mount commands are words to paste: each mount
// point is one shell word (shell.Quote), whatever it holds.
func TestWriteReportQuotesMountPoints(t *testing.T) {
	t.Parallel()
	mps := []string{"/mnt/$(reboot)", `/mnt/a "b"`}
	p := &Plan{Remounts: []RemountGroup{{Key: "srv:2049/v3/tcp", UnmountTogether: mps}}}
	var b strings.Builder
	if err := WriteReport(&b, &Report{Plan: p, DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if want := `unmount together (these superblocks): '/mnt/$(reboot)' '/mnt/a "b"'` + "\n"; !strings.Contains(b.String(), want) {
		t.Errorf("report:\n%s\nwant %q", b.String(), want)
	}
}
