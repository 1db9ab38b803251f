package inventory

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/moby/sys/mountinfo"
	"github.com/prometheus/procfs"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/parallel"
)

// mountStatsEntry is one "device ..." entry of /proc/<pid>/mountstats.
type mountStatsEntry struct {
	// MountPoint is the mount point with octal escapes decoded.
	MountPoint string
	FSType     string
	// Source is the mount source of the device line, e.g. "server:/export".
	Source string
	// Options are the opts: line's options, nil when procfs did not parse the entry.
	Options map[string]string
	// Stats is nil when the entry has no NFS statistics or was dropped.
	Stats *Stats
	// XprtLines counts the "xprt:" lines of the raw entry, kept even when the entry was
	// dropped so that the connection count survives a malformed events line.
	XprtLines int
}

// parseMountStats is a tolerant wrapper around prometheus/procfs's mountstats parser.
//
// procfs parses the file as a whole and gives up on all of it when one entry has a shape
// it does not expect: a statvers other than 1.0/1.1 with an xprt line, an "xprt: local"
// transport, an events line that is not 27 counters, a per-op line with fewer than 8
// counters, a non-NFS mount with statistics. One odd mount must not hide every other, so:
//
//  1. The whole file goes through procfs once (the fast path: one parse, no copies beyond
//     the temporary file procfs reads from).
//  2. If procfs rejects it, the file is split into per-device chunks at each line that
//     starts with "device ", and the chunks are parsed by bisection: a half that procfs
//     accepts is kept, a half it rejects is split again, and a single rejected chunk is
//     dropped with a warning naming its mount point and procfs's reason. With k bad
//     entries among n this costs O(k log n) parses instead of n.
//
// Before any parse, the 25-counter events line of kernels before 2.6.37 is completed to 27
// (padOldEvents), so that those mounts are read rather than dropped.
//
// procfs only parses files it opens itself (Proc.MountStats), so the bytes are written to
// a private temporary proc tree (<tmp>/1/mountstats, in /dev/shm when it exists) for each
// parse. Read uses this path for a file without its per-op rows (readStripped), when procfs
// rejects the kernel file, or when /proc/self is not a link; otherwise procfs reads
// /proc/<pid>/mountstats directly.
func parseMountStats(b []byte) ([]mountStatsEntry, []string) {
	return parseStatsChunks(splitMountStats(b))
}

// parseStatsChunks is parseMountStats on a file already cut into its entries.
func parseStatsChunks(chunks []statsChunk) ([]mountStatsEntry, []string) {
	if len(chunks) == 0 {
		return nil, nil
	}
	for i := range chunks {
		chunks[i].text = padOldEvents(chunks[i].text)
	}
	// The entries are parsed in contiguous ranges, one per CPU, each through a temporary
	// proc tree of its own: on a node with thousands of mounts the parse is most of a read.
	type part struct {
		lo, hi   int
		proc     *tempProc
		warnings []string
	}
	var parts []part
	for lo, hi := range parallel.Ranges(len(chunks), runtime.GOMAXPROCS(0), minEntriesPerWorker) {
		p, err := newTempProc()
		if err != nil {
			for _, q := range parts {
				q.proc.close()
			}
			return rawEntries(chunks), []string{fmt.Sprintf("parsing mountstats: %v", err)}
		}
		parts = append(parts, part{lo: lo, hi: hi, proc: p})
	}
	entries := make([]mountStatsEntry, len(chunks))
	parseRange := func(q *part) {
		var parse func(lo, hi int)
		parse = func(lo, hi int) {
			mounts, err := q.proc.parse(chunks[lo:hi])
			if err == nil && len(mounts) == hi-lo {
				for i, m := range mounts {
					entries[lo+i] = entryFromProcfs(chunks[lo+i], m)
				}
				return
			}
			if err == nil {
				err = fmt.Errorf("procfs returned %d entries for %d", len(mounts), hi-lo)
			}
			if hi-lo == 1 {
				entries[lo] = chunks[lo].raw()
				q.warnings = append(q.warnings, fmt.Sprintf("mountstats entry for %q dropped: %s",
					chunks[lo].mountPoint, shorten(err.Error(), 200)))
				return
			}
			mid := (lo + hi) / 2
			parse(lo, mid)
			parse(mid, hi)
		}
		parse(q.lo, q.hi)
	}
	var wg sync.WaitGroup
	for i := range parts {
		wg.Go(func() {
			defer parts[i].proc.close()
			parseRange(&parts[i])
		})
	}
	wg.Wait()
	var warnings []string
	for _, q := range parts {
		warnings = append(warnings, q.warnings...)
	}
	for _, e := range entries {
		if isNFSType(e.FSType) && e.Stats == nil && !chunkDropped(warnings, e.MountPoint) {
			warnings = append(warnings, fmt.Sprintf("mountstats entry for %q has no NFS statistics", e.MountPoint))
		}
	}
	return entries, warnings
}

// minEntriesPerWorker is the fewest mountstats entries a worker of parseMountStats parses:
// below it, a second temporary proc tree costs more than it saves.
const minEntriesPerWorker = 128

func chunkDropped(warnings []string, mountPoint string) bool {
	prefix := fmt.Sprintf("mountstats entry for %q dropped", mountPoint)
	for _, w := range warnings {
		if strings.HasPrefix(w, prefix) {
			return true
		}
	}
	return false
}

// Events line lengths: Linux 2.6.37 added the pNFS READ and WRITE counters
// (NFSIOS_PNFS_READ, NFSIOS_PNFS_WRITE) after the 25 that older kernels print. procfs
// accepts only the 27.
const (
	oldEventsLen = 25
	eventsLen    = 27
)

// padOldEvents returns the entry text with a 25-counter events: line completed to 27 with
// zeros for the two pNFS counters, which did not exist on that kernel and so counted
// nothing; nfs-utils' mountstats reads missing trailing counters as 0 too. Any other text
// is returned unchanged.
func padOldEvents(text []byte) []byte {
	for off := 0; off < len(text); {
		end := len(text)
		if i := bytes.IndexByte(text[off:], '\n'); i >= 0 {
			end = off + i
		}
		line := text[off:end]
		if string(firstField(line)) == "events:" {
			f := bytes.Fields(line)
			if len(f)-1 != oldEventsLen {
				return text
			}
			out := make([]byte, 0, len(text)+4)
			out = append(out, text[:end]...)
			for range eventsLen - oldEventsLen {
				out = append(out, " 0"...)
			}
			return append(out, text[end:]...)
		}
		off = end + 1
	}
	return text
}

// statsChunk is the text of one mountstats entry: its device line and the lines after it
// up to the next device line.
type statsChunk struct {
	text       []byte
	source     string
	mountPoint string
	fsType     string
	xprtLines  int
}

func (c statsChunk) raw() mountStatsEntry {
	return mountStatsEntry{MountPoint: c.mountPoint, FSType: c.fsType, Source: c.source, XprtLines: c.xprtLines}
}

func rawEntries(chunks []statsChunk) []mountStatsEntry {
	out := make([]mountStatsEntry, len(chunks))
	for i, c := range chunks {
		out[i] = c.raw()
	}
	return out
}

// splitMountStats cuts the file at every line whose first field is "device". Text before
// the first device line is ignored, as procfs ignores it.
func splitMountStats(b []byte) []statsChunk {
	var chunks []statsChunk
	start := -1
	flush := func(end int) {
		if start >= 0 {
			chunks = append(chunks, newStatsChunk(b[start:end]))
		}
	}
	for off := 0; off < len(b); {
		end := bytes.IndexByte(b[off:], '\n')
		next := len(b)
		if end >= 0 {
			next = off + end + 1
		}
		line := b[off:next]
		if f := firstField(line); string(f) == "device" {
			flush(off)
			start = off
		}
		off = next
	}
	flush(len(b))
	return chunks
}

func firstField(line []byte) []byte {
	line = bytes.TrimLeft(line, " \t")
	if i := bytes.IndexAny(line, " \t\r\n"); i >= 0 {
		return line[:i]
	}
	return line
}

func newStatsChunk(text []byte) statsChunk {
	c := statsChunk{text: text}
	head, rest, _ := bytes.Cut(text, []byte("\n"))
	// device SOURCE mounted on MOUNTPOINT with fstype TYPE [statvers=X]
	f := strings.Fields(string(head))
	if len(f) >= 8 && f[2] == "mounted" && f[3] == "on" && f[5] == "with" && f[6] == "fstype" {
		c.source = f[1]
		c.mountPoint = UnescapeOctal(f[4])
		c.fsType = f[7]
	} else {
		c.mountPoint = shorten(string(head), 80)
	}
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		if string(firstField(line)) == "xprt:" {
			c.xprtLines++
		}
	}
	return c
}

func entryFromProcfs(c statsChunk, m *procfs.Mount) mountStatsEntry {
	e := mountStatsEntry{MountPoint: UnescapeOctal(m.Mount), FSType: m.Type, Source: m.Device, XprtLines: c.xprtLines}
	if s, ok := m.Stats.(*procfs.MountStatsNFS); ok && s != nil {
		e.Options = s.Opts
		e.Stats = &Stats{
			StatVersion: s.StatVersion,
			Age:         s.Age,
			Bytes:       s.Bytes,
			Events:      s.Events,
			Operations:  s.Operations,
			Transports:  s.Transport,
		}
	}
	return e
}

// tempProc is a private directory laid out as a proc tree with one process, so that
// procfs's Proc.MountStats can parse bytes that did not come from a real /proc file.
type tempProc struct {
	dir  string
	file string
	proc procfs.Proc
}

func newTempProc() (*tempProc, error) {
	// Prefer memory-backed /dev/shm: under I/O pressure a disk-backed temporary file can
	// stall the parse for seconds.
	dir, err := os.MkdirTemp("/dev/shm", "nfstune-mountstats-")
	if err != nil {
		dir, err = os.MkdirTemp("", "nfstune-mountstats-")
	}
	if err != nil {
		return nil, fmt.Errorf("creating temporary proc tree: %w", err)
	}
	p := &tempProc{dir: dir, file: filepath.Join(dir, "1", "mountstats")}
	if err := os.Mkdir(filepath.Join(dir, "1"), 0o700); err != nil {
		p.close()
		return nil, fmt.Errorf("creating temporary proc tree: %w", err)
	}
	fs, err := procfs.NewFS(dir)
	if err != nil {
		p.close()
		return nil, fmt.Errorf("opening temporary proc tree: %w", err)
	}
	if p.proc, err = fs.Proc(1); err != nil {
		p.close()
		return nil, fmt.Errorf("opening temporary proc tree: %w", err)
	}
	return p, nil
}

func (p *tempProc) parse(chunks []statsChunk) ([]*procfs.Mount, error) {
	f, err := os.Create(p.file)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	// The bufio.Writer keeps the first write error and Flush returns it.
	for _, c := range chunks {
		_, _ = w.Write(c.text)
		if n := len(c.text); n > 0 && c.text[n-1] != '\n' {
			_ = w.WriteByte('\n')
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return p.proc.MountStats()
}

func (p *tempProc) close() { os.RemoveAll(p.dir) }

func isNFSType(t string) bool { return t == "nfs" || t == "nfs4" }

// UnescapeOctal decodes the \ooo escapes the kernel uses for space, tab, newline and
// backslash in mount points (fs/proc_namespace.c mangle()), as fstab(5) does.
func UnescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			v := (int(s[i+1]-'0') << 6) | (int(s[i+2]-'0') << 3) | int(s[i+3]-'0')
			if v <= 0xff {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// readStripped reads a mountstats file and cuts it into its entries as splitMountStats
// does, without the rows after each "per-op statistics" line (up to the blank line that
// ends the entry) and the header lines Read does not use (unusedHeader), keeping the rest
// of the header so that procfs still sees a complete entry. Reading line by line keeps
// only the short result in memory. Finished entries are packed into blocks of stripBlock
// bytes: one buffer grown to the whole result would be copied at every growth into freshly
// faulted pages, which on a node with thousands of mounts cost more than reading the file.
func readStripped(r io.Reader, limit int64) ([]statsChunk, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, limit+1), 64<<10)
	var (
		chunks  []statsChunk
		entry   []byte // the kept lines of the entry being read
		block   []byte // where finished entries are packed
		n       int64
		inOps   bool
		inEntry bool // a device line has been seen
	)
	finish := func() {
		if !inEntry {
			return
		}
		if cap(block)-len(block) < len(entry) {
			block = make([]byte, 0, max(stripBlock, len(entry)))
		}
		start := len(block)
		block = append(block, entry...)
		chunks = append(chunks, newStatsChunk(block[start:len(block):len(block)]))
		entry = entry[:0]
	}
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// An over-long line: keep it whole, procfs will judge it.
			rest, err2 := br.ReadBytes('\n')
			line = append(append([]byte(nil), line...), rest...)
			err = err2
		}
		n += int64(len(line))
		if n > limit {
			return nil, fmt.Errorf("mountstats larger than %d bytes", limit)
		}
		keep := true
		switch {
		case inOps && opRow(line):
			keep = false
		case inOps:
			inOps = false
		case string(bytes.TrimSpace(line)) == "per-op statistics":
			inOps = true
		default:
			keep = !unusedHeader[string(firstField(line))]
		}
		if keep && string(firstField(line)) == "device" {
			finish()
			inEntry = true
		}
		if keep && inEntry {
			entry = append(entry, line...)
		}
		if err == io.EOF {
			finish()
			return chunks, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// unusedHeader are the lines of an entry's header that Read has no use for: procfs skips
// all but opts:, and Read takes a mount's options from mountinfo. opts: is the longest
// line of an entry, and procfs makes a map of it.
var unusedHeader = map[string]bool{"opts:": true, "impl_id:": true, "caps:": true, "nfsv4:": true, "sec:": true, "RPC": true}

// stripBlock is the size of the blocks readStripped packs entries into.
const stripBlock = 1 << 20

// opRow reports whether a line after "per-op statistics" is one of its rows, not the
// blank line or the next entry's device line that ends them. Rows are most of a node's
// mountstats and each starts, after its indent, with an operation's upper-case name
// (net/sunrpc/stats.c, rpc_clnt_show_stats), so they are told from the end in a byte or two.
func opRow(line []byte) bool {
	i := 0
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	if i < len(line) && line[i] >= 'A' && line[i] <= 'Z' {
		return true
	}
	return len(bytes.TrimSpace(line)) > 0 && string(firstField(line)) != "device"
}

// readMountStats returns the NFS entries of mountstats in the kernel's order, nil when the
// file is unreadable. The fast path hands the kernel file straight to procfs; if procfs
// rejects it (or /proc/self is not a link, as in a copied tree), the bytes go through the
// tolerant per-entry parser.
func readMountStats(root hostfs.Root, opts ReadOptions, procDir string) ([]mountStatsEntry, []string) {
	var entries []mountStatsEntry
	var warnings []string
	var mounts []*procfs.Mount
	err := errors.New("per-op rows skipped")
	if !opts.SkipOperations {
		mounts, err = procfsMountStats(root, opts.PID)
	}
	if err == nil {
		entries = make([]mountStatsEntry, 0, len(mounts))
		for _, m := range mounts {
			e := entryFromProcfs(statsChunk{}, m)
			if e.Stats != nil {
				e.XprtLines = len(e.Stats.Transports)
			}
			entries = append(entries, e)
			if isNFSType(e.FSType) && e.Stats == nil {
				warnings = append(warnings, fmt.Sprintf("mountstats entry for %q has no NFS statistics", e.MountPoint))
			}
		}
	} else {
		var chunks []statsChunk
		if opts.SkipOperations {
			chunks, err = readStrippedFile(root.Proc(procDir, "mountstats"))
		} else {
			var b []byte
			b, err = hostfs.ReadSmall(root.Proc(procDir, "mountstats"))
			chunks = splitMountStats(b)
		}
		if err != nil {
			return nil, []string{fmt.Sprintf("reading mountstats: %v", err)}
		}
		entries, warnings = parseStatsChunks(chunks)
	}
	nfs := make([]mountStatsEntry, 0, len(entries))
	for _, e := range entries {
		if isNFSType(e.FSType) {
			nfs = append(nfs, e)
		}
	}
	return nfs, warnings
}

// statsByDevice pairs the NFS lines of mountinfo with the NFS entries of mountstats and
// returns the entries by device; nil when mountstats was unreadable. The kernel prints both
// files from the same walk of the mount namespace (fs/proc_namespace.c, show_mountinfo and
// show_vfsstat), so they list mounts in the same order. Pairing by order, not by mount
// point, gives each of two superblocks stacked on one mount point its own entry. Each line
// takes the next unpaired entry with its mount point and type, so a mount made or removed
// between the two reads leaves only that mount without statistics.
func statsByDevice(infos []*mountinfo.Info, entries []mountStatsEntry) map[string]mountStatsEntry {
	if entries == nil {
		return nil
	}
	out := make(map[string]mountStatsEntry, len(infos))
	next := 0
	for _, in := range infos {
		for k := next; k < len(entries); k++ {
			e := entries[k]
			if e.MountPoint != in.Mountpoint || e.FSType != in.FSType {
				continue
			}
			// A superblock on several mount points prints the same statistics under each.
			dev := fmt.Sprintf("%d:%d", in.Major, in.Minor)
			if _, ok := out[dev]; !ok {
				out[dev] = e
			}
			next = k + 1
			break
		}
	}
	return out
}

func readStrippedFile(p string) ([]statsChunk, error) {
	f, err := hostfs.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readStripped(f, hostfs.MaxSmall)
}

func procfsMountStats(root hostfs.Root, pid int) ([]*procfs.Mount, error) {
	// procfs opens the file itself, blocking: check first that it is a regular file, not a
	// FIFO that would block the read forever.
	self := "self"
	if pid > 0 {
		self = strconv.Itoa(pid)
	}
	f, err := hostfs.Open(root.Proc(self, "mountstats"))
	if err != nil {
		return nil, err
	}
	f.Close()
	pfs, err := procfs.NewFS(root.Proc())
	if err != nil {
		return nil, err
	}
	var p procfs.Proc
	if pid > 0 {
		p, err = pfs.Proc(pid)
	} else {
		p, err = pfs.Self()
	}
	if err != nil {
		return nil, err
	}
	return p.MountStats()
}
