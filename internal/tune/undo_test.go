package tune

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var undoTests = []struct {
	name, old, written, cur string
	want                    string
	inseparable             string // a part of the refusal; "" when the write is taken back
}{
	{
		name: "untouched since apply", old: "a\nb\nc\n", written: "a\nB\nc\n", cur: "a\nB\nc\n",
		want: "a\nb\nc\n",
	},
	{
		name: "line added after", old: "a\nb\n", written: "a\nB\n", cur: "a\nB\nmine\n",
		want: "a\nb\nmine\n",
	},
	{
		name: "line added before and between", old: "a\nb\nc\n", written: "a\nB\nC\n", cur: "first\na\nB\nmine\nC\n",
		want: "first\na\nb\nmine\nc\n",
	},
	{
		name: "other line edited", old: "a\nb\nc\n", written: "a\nB\nc\n", cur: "A2\nB\nc\n",
		want: "A2\nb\nc\n",
	},
	{
		name: "other line removed", old: "a\nb\nc\n", written: "a\nB\nc\n", cur: "B\nc\n",
		want: "b\nc\n",
	},
	{
		name: "block appended, line added inside and after", old: "x\n", written: "x\n[s]\nk=1\n", cur: "x\n[s]\nmine=2\nk=1\nafter\n",
		want: "x\nmine=2\nafter\n",
	},
	{
		name: "file created, line added", old: "", written: "# nfstune\nk=1\n", cur: "# nfstune\nk=1\nmine\n",
		want: "mine\n",
	},
	{
		name: "last line without newline, line appended", old: "a\nz", written: "a\nz\nblock\n", cur: "a\nz\nblock\nmine\n",
		want: "a\nz\nmine\n",
	},
	{
		name: "last line without newline, untouched", old: "a\nz", written: "a\nz\nblock\n", cur: "a\nz\nblock\n",
		want: "a\nz",
	},
	{
		name: "last written line without newline, line appended", old: "a\nb", written: "a\nB", cur: "a\nB\nmine\n",
		want: "a\nb\nmine\n",
	},
	{
		name: "replaced by more lines", old: "a\nold\nc\n", written: "a\nnew1\nnew2\nc\n", cur: "a\nnew1\nmine\nnew2\nc\n",
		want: "a\nold\nmine\nc\n",
	},
	{
		name: "lines removed go back after their line", old: "a\ngone\nc\n", written: "a\nc\n", cur: "a\nmine\nc\n",
		want: "a\ngone\nmine\nc\n",
	},
	{
		name: "put back by hand", old: "a\nb\n", written: "a\nB\n", cur: "a\nb\nmine\n",
		want: "a\nb\nmine\n",
	},
	{
		name: "nothing written", old: "a\n", written: "a\n", cur: "anything\n",
		want: "anything\n",
	},
	{
		name: "written line edited", old: "a\nb\nc\n", written: "a\nB\nC\n", cur: "a\nB\nC edited\n",
		inseparable: `line 3 of the file as apply wrote it, "C", is no longer there`,
	},
	{
		name: "written line removed", old: "x\n", written: "x\n[s]\nk=1\n", cur: "x\n[s]\n",
		inseparable: `line 3 of the file as apply wrote it, "k=1", is no longer there`,
	},
	{
		name: "written line edited, replaced line back", old: "a\nb\nc\n", written: "a\nB\nC\n", cur: "a\nb\nC2\n",
		inseparable: `line 2 of the file as apply wrote it, "B", is no longer there`,
	},
	{
		name: "file emptied", old: "a\n", written: "a\nB\n", cur: "",
		want: "",
	},
	{
		name: "original lines gone too", old: "a\nb\n", written: "a\nB\n", cur: "a\n",
		inseparable: `line 2 of the file as apply wrote it, "B", is no longer there`,
	},
}

func TestUndoWrite(t *testing.T) {
	t.Parallel()
	for _, tt := range undoTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := undoWrite(tt.cur, tt.old, tt.written)
			if tt.inseparable != "" {
				if !errors.Is(err, ErrInseparable) || !strings.Contains(err.Error(), tt.inseparable) {
					t.Fatalf("err = %v, want ErrInseparable with %q (result %q)", err, tt.inseparable, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzUndoWrite: whatever apply wrote over whatever file, taking the write back out of the
// file as apply left it gives the file as it was, byte for byte, and a line appended after
// apply stays.
func FuzzUndoWrite(f *testing.F) {
	for _, tt := range undoTests {
		f.Add(tt.old, tt.written)
	}
	f.Fuzz(func(t *testing.T, old, written string) {
		got, err := undoWrite(written, old, written)
		if err != nil {
			if errors.Is(err, ErrInseparable) {
				t.Fatalf("the file as apply wrote it is refused: %v", err)
			}
			return // too large to compare
		}
		if got != old {
			t.Fatalf("undo(%q -> %q) = %q", old, written, got)
		}
		mine := "mine: a line appended after apply\n"
		cur := written
		if cur != "" && !strings.HasSuffix(cur, "\n") {
			cur += "\n"
		}
		got, err = undoWrite(cur+mine, old, written)
		if err != nil {
			t.Fatalf("an appended line makes the file inseparable: %v", err)
		}
		if !strings.Contains(got, mine) {
			t.Fatalf("undo(%q -> %q) of %q dropped the appended line: %q", old, written, cur+mine, got)
		}
	})
}
