package metrics

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nfstune/nfstune/internal/inventory"
)

// View is one of nfsiostat's evidence views (nfs-utils tools/nfs-iostat/nfs-iostat.py): the
// events: and bytes: counters behind the attribute cache (-a), directory (-d) and page
// cache (-p) figures, with the RPC operations each view is about.
type View string

// The views, in the order they are printed.
const (
	ViewAttr View = "attr" // nfsiostat -a: GETATTR, ACCESS and the attribute cache
	ViewDir  View = "dir"  // nfsiostat -d: LOOKUP, READDIR(PLUS) and the dentry cache
	ViewPage View = "page" // nfsiostat -p: READ, WRITE and the page cache
)

// Views lists every view.
func Views() []View { return []View{ViewAttr, ViewDir, ViewPage} }

// ParseViews reads view names (repeated or comma-separated; "all" is every view) and
// returns them in print order, each once.
func ParseViews(names []string) ([]View, error) {
	var out []View
	for _, n := range names {
		for _, s := range strings.Split(n, ",") {
			s = strings.TrimSpace(s)
			switch {
			case s == "all":
				out = append(out, Views()...)
			case slices.Contains(Views(), View(s)):
				out = append(out, View(s))
			default:
				return nil, fmt.Errorf("unknown view %q: want attr, dir, page or all", s)
			}
		}
	}
	slices.SortFunc(out, func(a, b View) int { return slices.Index(Views(), a) - slices.Index(Views(), b) })
	return slices.Compact(out), nil
}

// AttrCache is nfsiostat -a's evidence over an interval: how often the client went to the
// server for attributes, against how often files were opened. Many GETATTRs per open is
// close-to-open consistency and short attribute cache timeouts (actimeo, nocto) at work.
// Counts come from the events: line (fs/nfs/iostat.h, NFSIOS_*).
type AttrCache struct {
	// VFSOpens are open(2) calls on the mount (NFSIOS_VFSOPEN).
	VFSOpens uint64 `json:"vfs_opens"`
	// InodeRevalidates are attribute revalidations that went to the server, nfsiostat's
	// "inoderevalidates (forced GETATTRs)" (NFSIOS_INODEREVALIDATE).
	InodeRevalidates uint64 `json:"inode_revalidates"`
	// DataInvalidates are page cache invalidations: cached data dropped because the file
	// changed on the server (NFSIOS_DATAINVALIDATE).
	DataInvalidates uint64 `json:"page_cache_invalidations"`
	// AttrInvalidates are attribute cache invalidations (NFSIOS_ATTRINVALIDATE).
	AttrInvalidates uint64 `json:"attr_cache_invalidations"`
	// GETATTRs and ACCESSes are the operations sent (per-op statistics).
	GETATTRs uint64 `json:"getattr_ops"`
	ACCESSes uint64 `json:"access_ops"`
}

// DirCache is nfsiostat -d's evidence over an interval: path lookups and directory reads
// by applications against the LOOKUPs and READDIRs they caused on the wire.
type DirCache struct {
	// VFSOpens are open(2) calls, nfsiostat's "open operations (pathname lookups)".
	VFSOpens uint64 `json:"vfs_opens"`
	// DentryRevalidates are cached directory entries checked again (NFSIOS_DENTRYREVALIDATE).
	DentryRevalidates uint64 `json:"dentry_revalidates"`
	// VFSLookups are lookups the dentry cache did not answer (NFSIOS_VFSLOOKUP).
	VFSLookups uint64 `json:"vfs_lookups"`
	// LOOKUPs are the LOOKUP operations sent.
	LOOKUPs uint64 `json:"lookup_ops"`
	// VFSGetdents are getdents(2) calls (NFSIOS_VFSGETDENTS).
	VFSGetdents uint64 `json:"vfs_getdents"`
	// READDIRs are the READDIR and READDIRPLUS operations sent.
	READDIRs uint64 `json:"readdir_ops"`
}

// PageCache is nfsiostat -p's evidence over an interval: single-page reads and writes
// against the batched ones, from the events: and bytes: lines. The kernel counts calls
// of nfs_read_folio (formerly nfs_readpage) and nfs_readahead (formerly nfs_readpages),
// and the pages read and written; nfsiostat 2.6.2 labels them nfs_readpage() and
// nfs_readpages() and takes the pages of the batched calls as all pages read less one per
// single-page call, which can come out negative: it is kept signed to agree.
type PageCache struct {
	// ReadPageCalls are single-page reads, one page each (NFSIOS_VFSREADPAGE).
	ReadPageCalls uint64 `json:"readpage_calls"`
	// ReadPagesCalls are read-ahead calls (NFSIOS_VFSREADPAGES).
	ReadPagesCalls uint64 `json:"readpages_calls"`
	// ReadPagesPages are the pages read (NFSIOS_READPAGES) less ReadPageCalls.
	ReadPagesPages int64 `json:"readpages_pages"`
	// PagesPerReadPagesCall is ReadPagesPages / ReadPagesCalls; 0 without calls.
	PagesPerReadPagesCall float64 `json:"pages_per_readpages_call"`
	// UpdatePageCalls are writes into the page cache (NFSIOS_VFSUPDATEPAGE).
	UpdatePageCalls uint64 `json:"updatepage_calls"`
	// WritePageCalls are single-page writebacks (NFSIOS_VFSWRITEPAGE).
	WritePageCalls uint64 `json:"writepage_calls"`
	// WritePagesCalls are batched writebacks (NFSIOS_VFSWRITEPAGES).
	WritePagesCalls uint64 `json:"writepages_calls"`
	// WritePagesPages are the pages written (NFSIOS_WRITEPAGES) less WritePageCalls.
	WritePagesPages int64 `json:"writepages_pages"`
	// PagesPerWritePagesCall is WritePagesPages / WritePagesCalls; 0 without calls.
	PagesPerWritePagesCall float64 `json:"pages_per_writepages_call"`
	// CongestionWaits is NFSIOS_CONGESTIONWAIT (no longer counted by current kernels).
	CongestionWaits uint64 `json:"congestion_waits"`
}

// views computes every view's figures between prev and cur (prev zero: since mount).
func views(prev, cur *inventory.Stats, r *MountRates) {
	pe, ce := prev.Events, cur.Events
	ops := func(names ...string) uint64 {
		var n uint64
		for _, name := range names {
			n += opDelta(prev, cur, name)
		}
		return n
	}
	r.Attr = &AttrCache{
		VFSOpens:         delta(ce.VFSOpen, pe.VFSOpen),
		InodeRevalidates: delta(ce.InodeRevalidate, pe.InodeRevalidate),
		DataInvalidates:  delta(ce.DataInvalidate, pe.DataInvalidate),
		AttrInvalidates:  delta(ce.AttributeInvalidate, pe.AttributeInvalidate),
		GETATTRs:         ops("GETATTR"),
		ACCESSes:         ops("ACCESS"),
	}
	r.Dir = &DirCache{
		VFSOpens:          delta(ce.VFSOpen, pe.VFSOpen),
		DentryRevalidates: delta(ce.DnodeRevalidate, pe.DnodeRevalidate),
		VFSLookups:        delta(ce.VFSLookup, pe.VFSLookup),
		LOOKUPs:           ops("LOOKUP"),
		VFSGetdents:       delta(ce.VFSGetdents, pe.VFSGetdents),
		READDIRs:          ops("READDIR", "READDIRPLUS"),
	}
	p := &PageCache{
		ReadPageCalls:   delta(ce.VFSReadPage, pe.VFSReadPage),
		ReadPagesCalls:  delta(ce.VFSReadPages, pe.VFSReadPages),
		UpdatePageCalls: delta(ce.VFSUpdatePage, pe.VFSUpdatePage),
		WritePageCalls:  delta(ce.VFSWritePage, pe.VFSWritePage),
		WritePagesCalls: delta(ce.VFSWritePages, pe.VFSWritePages),
		CongestionWaits: delta(ce.CongestionWait, pe.CongestionWait),
	}
	p.ReadPagesPages = int64(delta(cur.Bytes.ReadPages, prev.Bytes.ReadPages)) - int64(p.ReadPageCalls)
	p.WritePagesPages = int64(delta(cur.Bytes.WritePages, prev.Bytes.WritePages)) - int64(p.WritePageCalls)
	if p.ReadPagesCalls > 0 {
		p.PagesPerReadPagesCall = float64(p.ReadPagesPages) / float64(p.ReadPagesCalls)
	}
	if p.WritePagesCalls > 0 {
		p.PagesPerWritePagesCall = float64(p.WritePagesPages) / float64(p.WritePagesCalls)
	}
	r.Page = p
}

// opDelta is the number of name operations between prev and cur.
func opDelta(prev, cur *inventory.Stats, name string) uint64 {
	var before, after uint64
	for _, op := range prev.Operations {
		if op.Operation == name {
			before = op.Requests
		}
	}
	for _, op := range cur.Operations {
		if op.Operation == name {
			after = op.Requests
		}
	}
	return delta(after, before)
}

// KeepViews leaves in each report only the views asked for; none asked leaves none, and
// the JSON of a report without views is what it was before views existed.
func KeepViews(rates []MountRates, want []View) {
	for i := range rates {
		r := &rates[i]
		if !slices.Contains(want, ViewAttr) {
			r.Attr = nil
		}
		if !slices.Contains(want, ViewDir) {
			r.Dir = nil
		}
		if !slices.Contains(want, ViewPage) {
			r.Page = nil
		}
	}
}
