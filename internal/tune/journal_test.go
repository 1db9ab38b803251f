package tune

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// writeJournal puts a journal with the given entries and created dirs at JournalPath.
func writeJournal(t *testing.T, root hostfs.Root, entries []Entry, created []string) {
	t.Helper()
	b, err := json.Marshal(Journal{Version: journalVersion, Entries: entries, Created: created})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(root.Path(JournalPath)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root.Path(JournalPath), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRevertRefusesCraftedJournal: revert writes only what apply could have written. A
// journal naming another kind, another path, a path out of the root or a dangerous mode is
// refused as a whole, before anything is changed.
func TestRevertRefusesCraftedJournal(t *testing.T) {
	t.Parallel()
	good := Entry{Kind: KindUdevRule, Path: UdevRulePath, Absent: true, Done: true}
	tests := []struct {
		name    string
		entry   Entry
		created []string
		wantErr string
	}{
		{name: "unknown kind", entry: Entry{Kind: "exec", Path: UdevRulePath, Original: []byte("x")}, wantErr: `unknown kind "exec"`},
		{name: "file elsewhere", entry: Entry{Kind: KindUdevRule, Path: "/etc/cron.d/nfstune", Original: []byte("* * * * * root sh\n"), Mode: 0o644}, wantErr: `not a path nfstune writes`},
		{name: "escape from root", entry: Entry{Kind: KindFstab, Path: "/../../../tmp/evil", Original: []byte("x"), Mode: 0o644}, wantErr: `not a path nfstune writes`},
		{name: "fstab kind on backup path", entry: Entry{Kind: KindFstab, Path: FstabBackup, Original: []byte("x"), Mode: 0o644}, wantErr: `not a path nfstune writes`},
		{name: "world-writable", entry: Entry{Kind: KindSysctlFile, Path: SysctlFilePath, Original: []byte("x"), Mode: 0o777}, wantErr: `mode -rwxrwxrwx`},
		{name: "setuid", entry: Entry{Kind: KindSysctlFile, Path: SysctlFilePath, Original: []byte("x"), Mode: fs.ModeSetuid | 0o755}, wantErr: `mode urwxr-xr-x`},
		{name: "setgid", entry: Entry{Kind: KindNFSConf, Path: NFSConfPath, Original: []byte("x"), Mode: fs.ModeSetgid | 0o644}, wantErr: `mode grw-r--r--`},
		{name: "read-ahead of a block device", entry: Entry{Kind: KindReadAhead, Path: "/sys/class/bdi/8:0/read_ahead_kb", Original: []byte("1\n")}, wantErr: `not a path nfstune writes`},
		{name: "read-ahead escape", entry: Entry{Kind: KindReadAhead, Path: "/sys/class/bdi/0:53/../../../../proc/sys/kernel/panic", Original: []byte("1\n")}, wantErr: `not a path nfstune writes`},
		{name: "sysctl not allowed", entry: Entry{Kind: KindSysctl, Path: "/proc/sys/kernel/panic", Original: []byte("1\n")}, wantErr: `not a path nfstune writes`},
		{name: "dir elsewhere", entry: Entry{Kind: KindDir, Path: "/root", Absent: true}, wantErr: `not a path nfstune writes`},
		{name: "shutdown of a block device", entry: Entry{Kind: KindShutdown, Path: "/sys/fs/nfs/8:0/shutdown", Done: true}, wantErr: `not a path nfstune writes`},
		{name: "shutdown escape", entry: Entry{Kind: KindShutdown, Path: "/sys/fs/nfs/0:53/../../../../etc/passwd", Done: true}, wantErr: `not a path nfstune writes`},
		{name: "created dir elsewhere", entry: good, created: []string{"/etc"}, wantErr: `created directory "/etc"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := fixtureRoot(t)
			writeJournal(t, root, []Entry{good, tt.entry}, tt.created)
			before := snapshot(t, root)
			res, err := Revert(root)
			if err == nil || errors.Is(err, ErrPartial) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want a refusal containing %q", err, tt.wantErr)
			}
			if res != nil && len(res.Items) != 0 {
				t.Errorf("items = %+v, want none", res.Items)
			}
			if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
				t.Errorf("revert changed the root (-before +after):\n%s", diff)
			}
		})
	}
}

func TestRevertRefusesHugeJournal(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	writeJournal(t, root, nil, nil)
	f, err := os.OpenFile(root.Path(JournalPath), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(strings.Repeat(" ", MaxJournalSize))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := Revert(root); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("err = %v, want the size cap", err)
	}
}

// Apply checks its actions against the same allow-list before it changes anything.
func TestApplyRefusesUnknownTarget(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	before := snapshot(t, root)
	p := plan(t, root)
	p.Actions = append(p.Actions, Action{Kind: KindUdevRule, Path: "/etc/passwd", New: "x"})
	if _, err := Apply(context.Background(), root, p, ApplyOptions{}); err == nil || errors.Is(err, ErrPartial) {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("apply changed the root (-before +after):\n%s", diff)
	}
}

// A file apply would record with a mode revert refuses is left alone, so that every
// journal apply writes can be reverted.
func TestApplyLeavesWorldWritableFile(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	if err := os.Chmod(root.Path(FstabPath), 0o666); err != nil {
		t.Fatal(err)
	}
	res, err := Apply(context.Background(), root, plan(t, root), ApplyOptions{})
	if !errors.Is(err, ErrPartial) {
		t.Fatalf("err = %v, want a partial apply", err)
	}
	for _, it := range res.Items {
		if it.Action.Kind == KindFstab && (it.Status != StatusFailed || !strings.Contains(it.Error, "world-writable")) {
			t.Errorf("fstab item = %+v, want failed", it)
		}
	}
	if got := readFixture(t, root, FstabPath); got != fixtureFstab {
		t.Errorf("fstab changed:\n%s", got)
	}
	if _, err := Revert(root); err != nil {
		t.Errorf("revert: %v", err)
	}
}

// FuzzDecodeJournal: whatever the bytes, a journal that decodes names only what apply
// writes, with safe modes, and survives a save and a load unchanged.
func FuzzDecodeJournal(f *testing.F) {
	seed := func(entries []Entry, created []string) {
		b, err := json.Marshal(Journal{Version: journalVersion, Entries: entries, Created: created})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed([]Entry{
		{Kind: KindDir, Path: "/etc/udev/rules.d", Absent: true},
		{Kind: KindUdevRule, Path: UdevRulePath, Absent: true, Done: true},
		{Kind: KindReadAhead, Path: "/sys/class/bdi/0:53/read_ahead_kb", Original: []byte("128\n"), Done: true},
		{Kind: KindSysctl, Path: "/proc/sys/sunrpc/tcp_slot_table_entries", Original: []byte("2\n")},
		{Kind: KindFstab, Path: FstabPath, Original: []byte(fixtureFstab), Mode: 0o644, Writes: []Write{{Old: []byte(fixtureFstab), New: []byte("x\n"), Done: true}}},
	}, []string{"/var/lib/nfstune"})
	seed([]Entry{{Kind: KindFstab, Path: "/../etc/shadow", Mode: 0o777}}, []string{"/etc"})
	seed([]Entry{{Kind: "exec", Path: "/bin/sh", Mode: fs.ModeSetuid | 0o755}}, nil)
	f.Add([]byte(`{"version":1,"entries":[{"kind":"readahead","path":"/sys/class/bdi/0:53/../../x"}]}`))
	f.Add([]byte(`{"version":1,"entries":[{"kind":"fstab","path":"/etc/fstab","original":"eAo=","mode":420,"done":true}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := decodeJournal(b)
		if err != nil {
			return
		}
		for _, e := range j.Entries {
			if err := checkTarget(e.Kind, e.Path); err != nil {
				t.Fatalf("decoded entry %+v: %v", e, err)
			}
			if strings.Contains(e.Path, "..") {
				t.Fatalf("decoded path %q", e.Path)
			}
			if !e.Kind.Live() && e.Kind != KindDir && (e.Mode&^fs.ModePerm != 0 || e.Mode&0o002 != 0) {
				t.Fatalf("decoded mode %s", e.Mode)
			}
		}
		again, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		j2, err := decodeJournal(again)
		if err != nil {
			t.Fatalf("a decoded journal does not decode again: %v", err)
		}
		if diff := cmp.Diff(j, j2, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
