package tune

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// A file revert takes back only nfstune's own lines. Each write apply makes to a file is
// journaled as the file before it and the content written (Write); revert pairs the lines of
// the two to find the runs of lines the write put in and the lines each replaced, pairs the
// written content with the file as it is now to find those runs again, and swaps them back,
// leaving every other line where it is. A run that is no longer there as written means the
// change cannot be told apart from someone else's: that file is refused and left alone.

// maxCompareCells caps the table that pairs the differing lines of two versions of a file
// (four bytes a cell): 4 Mi cells compare, say, 2000 changed lines with 2000.
const maxCompareCells = 4 << 20

// ErrInseparable means a file changed since apply in a way revert cannot separate from
// nfstune's own change: revert leaves the file as it is and keeps its journal entry.
var ErrInseparable = errors.New("cannot separate nfstune's change from later edits")

// splitLines splits content into lines that keep their "\n", so that joining them gives the
// content back byte for byte, a last line without a newline included.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	l := strings.SplitAfter(s, "\n")
	if l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}

// joinLines joins lines, ending a line that lacks its newline when another follows it: a
// last line without one, put back before a line someone appended.
func joinLines(lines []string) string {
	var b strings.Builder
	for i, l := range lines {
		b.WriteString(l)
		if i < len(lines)-1 && !strings.HasSuffix(l, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// pairLines returns, for each line of a, the index of the line of b it is paired with in a
// longest common subsequence of the two, or -1.
func pairLines(a, b []string) ([]int, error) {
	pair := make([]int, len(a))
	for i := range pair {
		pair[i] = -1
	}
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pair[pre] = pre
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		pair[len(a)-1-suf] = len(b) - 1 - suf
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	n, m := len(ma), len(mb)
	if n == 0 || m == 0 {
		return pair, nil
	}
	if (n+1)*(m+1) > maxCompareCells {
		return nil, fmt.Errorf("%d and %d differing lines are more than revert compares", n, m)
	}
	// t[i*w+j] is the length of the longest common subsequence of ma[i:] and mb[j:].
	w := m + 1
	t := make([]int32, (n+1)*w)
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if ma[i] == mb[j] {
				t[i*w+j] = t[(i+1)*w+j+1] + 1
			} else {
				t[i*w+j] = max(t[(i+1)*w+j], t[i*w+j+1])
			}
		}
	}
	for i, j := 0, 0; i < n && j < m; {
		switch {
		case ma[i] == mb[j]:
			pair[pre+i] = pre + j
			i, j = i+1, j+1
		case t[(i+1)*w+j] >= t[i*w+j+1]:
			i++
		default:
			j++
		}
	}
	return pair, nil
}

// withoutNewlines returns the lines without their "\n", to pair lines of two files whatever
// their newline.
func withoutNewlines(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimSuffix(l, "\n")
	}
	return out
}

// change is one run of lines a write replaced: old[oldFrom:oldTo] became new[newFrom:newTo].
type change struct{ oldFrom, oldTo, newFrom, newTo int }

// changes lists the runs of unpaired lines between the paired ones (pair from pairLines).
func changes(pair []int, nOld, nNew int) []change {
	var out []change
	for i, j := 0, 0; i < nOld || j < nNew; {
		k := i
		for k < nOld && pair[k] < 0 {
			k++
		}
		next := nNew
		if k < nOld {
			next = pair[k]
		}
		if k > i || next > j {
			out = append(out, change{oldFrom: i, oldTo: k, newFrom: j, newTo: next})
		}
		i, j = k+1, next+1
	}
	return out
}

// undoWrite takes one write, old -> written, back out of cur, the file as it is now: each
// run of lines the write put in is replaced by the lines it replaced, line for line when
// the run kept its length, else with the old lines where the run's first line stands; the
// lines a write only removed go back after the line they followed. Every other line of cur
// stays, in place. A file that already holds none of the written lines and every line they
// replaced was put back by hand and is returned as it is. Otherwise a written line that is
// no longer there is an ErrInseparable naming it.
func undoWrite(cur, old, written string) (string, error) {
	o, n, c := splitLines(old), splitLines(written), splitLines(cur)
	on, err := pairLines(o, n)
	if err != nil {
		return "", err
	}
	chs := changes(on, len(o), len(n))
	if len(chs) == 0 {
		return cur, nil
	}
	// The written lines are found again whatever their newline: an editor that appends a
	// line ends a last line that had none.
	nc, err := pairLines(withoutNewlines(n), withoutNewlines(c))
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInseparable, err)
	}
	missing, present := -1, 0
	for _, ch := range chs {
		for i := ch.newFrom; i < ch.newTo; i++ {
			switch {
			case nc[i] >= 0:
				present++
			case missing < 0:
				missing = i
			}
		}
	}
	if missing >= 0 {
		if present == 0 && holdsReplaced(o, c, chs) {
			return cur, nil
		}
		return "", fmt.Errorf("%w: line %d of the file as apply wrote it, %q, is no longer there", ErrInseparable, missing+1, strings.TrimSuffix(n[missing], "\n"))
	}
	drop := make([]bool, len(c))
	replaced := make([]bool, len(c))
	with := make([]string, len(c))
	before := make([][]string, len(c)+1)
	for _, ch := range chs {
		oldLines := o[ch.oldFrom:ch.oldTo]
		switch put := ch.newTo - ch.newFrom; {
		case put == len(oldLines):
			for k, l := range oldLines {
				at := nc[ch.newFrom+k]
				replaced[at], with[at] = true, l
			}
		case put > 0:
			at := nc[ch.newFrom]
			before[at] = append(before[at], oldLines...)
			for i := ch.newFrom; i < ch.newTo; i++ {
				drop[nc[i]] = true
			}
		default:
			at := 0
			for p := ch.newFrom - 1; p >= 0; p-- {
				if nc[p] >= 0 {
					at = nc[p] + 1
					break
				}
			}
			before[at] = append(before[at], oldLines...)
		}
	}
	var out []string
	for k := range len(c) + 1 {
		out = append(out, before[k]...)
		switch {
		case k == len(c), drop[k]:
		case replaced[k]:
			out = append(out, with[k])
		default:
			out = append(out, c[k])
		}
	}
	return joinLines(out), nil
}

// holdsReplaced reports whether c still has every line the changes replaced.
func holdsReplaced(o, c []string, chs []change) bool {
	oc, err := pairLines(withoutNewlines(o), withoutNewlines(c))
	if err != nil {
		return false
	}
	for _, ch := range chs {
		for i := ch.oldFrom; i < ch.oldTo; i++ {
			if oc[i] < 0 {
				return false
			}
		}
	}
	return true
}

// keptLines counts the lines of cur that are not in written: those others added or changed
// since apply wrote it, which revert keeps.
func keptLines(written, cur string) int {
	c := splitLines(cur)
	cn, err := pairLines(c, splitLines(written))
	if err != nil {
		return len(c)
	}
	n := 0
	for _, p := range cn {
		if p < 0 {
			n++
		}
	}
	return n
}

// blank reports whether content has nothing but blank lines: what is left of a file apply
// created once its lines are taken out.
func blank(content string) bool { return strings.TrimSpace(content) == "" }

// revertFile takes apply's writes back out of the file of e, newest first, and writes the
// result atomically with the journaled mode; a file apply created is removed once nothing
// but blank lines is left of it. The status is StatusRefused, with the reason, when the file
// changed in a way revert cannot separate from nfstune's change: the file is not touched.
// kept counts the lines others added or changed since apply, which stay.
func revertFile(root hostfs.Root, e Entry) (status string, kept int, err error) {
	defer removeTemps(root, e.Path)
	now, absent, err := readFile(root, e.Path)
	if err != nil {
		return "", 0, err
	}
	content := now
	for _, w := range slices.Backward(e.Writes) {
		if !w.Done && content == string(w.Old) {
			continue // apply stopped before this write
		}
		if content, err = undoWrite(content, string(w.Old), string(w.New)); err != nil {
			return StatusRefused, 0, refusal(e.Path, err)
		}
	}
	if !e.writesFromOriginal() {
		// The journal of an earlier nfstune, which recorded only the original: what its
		// apply wrote is unknown, so only a file that is the original already is taken.
		if (e.Absent && !blank(content)) || (!e.Absent && content != string(e.Original)) {
			return StatusRefused, 0, refusal(e.Path, errLegacy)
		}
	}
	if n := len(e.Writes); n > 0 {
		kept = keptLines(string(e.Writes[n-1].New), now)
	}
	switch {
	case e.Absent && blank(content) && absent:
		return StatusUnchanged, kept, nil
	case e.Absent && blank(content):
		return StatusDone, kept, root.RemoveFile(e.Path)
	case absent && content == "":
		return StatusUnchanged, kept, nil // removed since apply, and nothing of the original to put back
	case !absent && content == now:
		if attr, err := root.Attr(e.Path); err == nil && attr.Perm == e.Mode {
			return StatusUnchanged, kept, nil
		}
	}
	return StatusDone, kept, root.ReplaceFile(e.Path, []byte(content), e.Mode)
}

// restoreFile puts the file of e back byte for byte as it was before the first apply, with
// its mode, or removes it if apply created it, whatever changed in it since.
func restoreFile(root hostfs.Root, e Entry) (status string, err error) {
	defer removeTemps(root, e.Path)
	content, absent, err := readFile(root, e.Path)
	if err != nil {
		return "", err
	}
	switch {
	case e.Absent && absent:
		return StatusUnchanged, nil
	case e.Absent:
		return StatusDone, root.RemoveFile(e.Path)
	case !absent && content == string(e.Original):
		if attr, err := root.Attr(e.Path); err == nil && attr.Perm == e.Mode {
			return StatusUnchanged, nil
		}
	}
	return StatusDone, root.ReplaceFile(e.Path, e.Original, e.Mode)
}

// errLegacy is the reason a file journaled by an earlier nfstune is refused.
var errLegacy = fmt.Errorf("%w: the journal was written by an earlier nfstune, which recorded the file as it was before apply but not what apply wrote", ErrInseparable)

// refusal says which file revert leaves alone, why, and the ways out.
func refusal(p string, err error) error {
	fix := "make nfstune's lines read as apply wrote them, or as they were before apply, and run nfstune revert again"
	if errors.Is(err, errLegacy) {
		fix = "make it what it was before apply (removed, if apply created it) and run nfstune revert again"
	}
	return fmt.Errorf("%s left as it is: %w; %s, or run nfstune revert --restore-original %s to put back the file as it was before apply, dropping every change made to it since", p, err, fix, p)
}

// writesFromOriginal reports whether the journaled writes start from the original, so that
// undoing them all gives it back; not so for an entry of an earlier nfstune's journal.
func (e Entry) writesFromOriginal() bool {
	return len(e.Writes) > 0 && e.Writes[0].OldAbsent == e.Absent && bytes.Equal(e.Writes[0].Old, e.Original)
}
