package audit

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/kubelet"
	"github.com/nfstune/nfstune/internal/parallel"
	"github.com/nfstune/nfstune/internal/printer"
)

// WriteTable writes the report for people: one block per mount, mounts with the worst
// findings first, then host-wide findings.
func WriteTable(w io.Writer, rep Report) error {
	byDev := map[string][]Finding{}
	var host []Finding
	for _, f := range rep.Findings {
		if f.Device == "" {
			host = append(host, f)
			continue
		}
		byDev[f.Device] = append(byDev[f.Device], f)
	}
	worst := make(map[string]int, len(byDev))
	for dev, fs := range byDev {
		for _, f := range fs {
			worst[dev] = max(worst[dev], SeverityRank(f.Severity))
		}
	}
	order := make([]int, len(rep.Mounts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		da, db := rep.Mounts[a].Device, rep.Mounts[b].Device
		if c := cmp.Compare(worst[db], worst[da]); c != 0 {
			return c
		}
		return inventory.CompareDevices(da, db)
	})

	bw := bufio.NewWriterSize(w, 64<<10)
	ew := printer.New(bw)
	counts := map[string]int{}
	for _, f := range rep.Findings {
		counts[f.Severity]++
	}
	ew.Printf("%d NFS mount(s): %d error(s), %d warning(s), %d info\n", len(rep.Mounts), counts[SeverityError], counts[SeverityWarning], counts[SeverityInfo])
	// Each worker renders a contiguous range of the sorted mounts; in range order the
	// pieces are the table in that order.
	pieces := parallel.Gather(len(order), 0, minMountsPerWorker, func(lo, hi int) []byte {
		size := 0
		for _, i := range order[lo:hi] {
			size += blockBytes(byDev[rep.Mounts[i].Device])
		}
		var buf bytes.Buffer
		buf.Grow(size)
		pw := printer.New(&buf)
		var cols tabwriter.Writer
		for _, i := range order[lo:hi] {
			m := &rep.Mounts[i]
			writeMount(pw, &cols, rep, m, byDev[m.Device])
		}
		return buf.Bytes()
	})
	for _, p := range pieces {
		_, _ = ew.Write(p) // ew keeps the first error for ew.Err below
	}
	if len(host) > 0 {
		ew.Printf("\nhost\n")
		writeFindings(ew, host)
	}
	if err := writeStalled(ew, rep); err != nil {
		return err
	}
	writeMounting(ew, rep.Mounting)
	if err := ew.Err(); err != nil {
		return err
	}
	return bw.Flush()
}

// blockBytes is about the size of a mount's block in the table with findings fs, so that
// a range's buffer is allocated once: the header and settings, and each finding's texts
// with the labels writeFindings puts around them.
func blockBytes(fs []Finding) int {
	n := 512
	for _, f := range fs {
		n += 64 + len(f.ID) + len(f.Message) + len(f.Expected) + len(f.Actual) + len(f.Fix)
		for _, e := range f.Evidence {
			n += 16 + len(e)
		}
	}
	return n
}

// writeMount writes one mount's block: its header, its settings in columns (cols, reset
// here, so that one tabwriter serves a whole range) and its findings fs. A bytes.Buffer
// under ew cannot fail, so neither can the flush.
func writeMount(ew *printer.Writer, cols *tabwriter.Writer, rep Report, m *inventory.Mount, fs []Finding) {
	res := rep.Desired[m.Device]
	server := m.Server
	if strings.Contains(server, ":") {
		server = "[" + server + "]"
	}
	ew.Printf("\n%s  %s:%s  (%s)\n", strings.Join(m.MountPoints, ", "), server, m.Export, m.Device)
	cols.Init(ew, 0, 0, 2, ' ', 0)
	tw := printer.New(cols)
	tw.Printf("  version\t%s\trsize/wsize\t%s/%s\n", orDash(m.Version), size(m.RSize), size(m.WSize))
	tw.Printf("  nconnect\t%s\tconnections\t%s\n", num(m.NConnect), num(m.Connections))
	tw.Printf("  read-ahead\t%s\tprofile\t%s/%s (%s)\n", readAhead(m), orDash(res.Backend), orDash(res.Workload), orDash(res.Rule))
	if p := m.Proxy; p != nil {
		tw.Printf("  proxy\t%s\tserver\t%s\n", proxyKind(p), orDash(upstream(p)))
	}
	if m.UsesTLS() {
		tw.Printf("  xprtsec\t%s\ttlshd\t%s\n", m.TransportSecurity, tlshdState(rep.TLSHandshake))
	}
	_ = cols.Flush()
	if len(fs) == 0 {
		ew.Printf("  ok\n")
	}
	writeFindings(ew, fs)
}

func writeFindings(ew *printer.Writer, fs []Finding) {
	for _, f := range fs {
		ew.Printf("  %-7s %s %s\n", severityLabel(f.Severity), f.ID, f.Message)
		ew.Printf("          expected: %s; actual: %s\n", f.Expected, f.Actual)
		ew.Printf("          fix: %s\n", f.Fix)
		for _, e := range f.Evidence {
			ew.Printf("          also: %s\n", e)
		}
	}
}

// severityLabel is the severity as the table prints it: "WARNING".
func severityLabel(s string) string {
	switch s {
	case SeverityError:
		return "ERROR"
	case SeverityWarning:
		return "WARNING"
	case SeverityInfo:
		return "INFO"
	}
	return strings.ToUpper(s)
}

// proxyKind is the helper's kind, local port and whether it encrypts: "efs-proxy :20049 TLS".
func proxyKind(p *inventory.Proxy) string {
	s := fmt.Sprintf("%s :%d", p.Kind, p.Port)
	if p.TLS != nil && *p.TLS {
		s += " TLS"
	}
	return s
}

// upstream is the server behind a proxy, with the EFS file system when the name lacks it.
func upstream(p *inventory.Proxy) string {
	if p.FileSystemID != "" && !strings.Contains(p.Upstream, p.FileSystemID) {
		return strings.TrimSpace(p.FileSystemID + " " + p.Upstream)
	}
	return p.Upstream
}

func readAhead(m *inventory.Mount) string {
	if m.ReadAheadKB == nil {
		return "-"
	}
	return fmt.Sprintf("%d KiB", *m.ReadAheadKB)
}

func size(n int) string {
	switch {
	case n <= 0:
		return "-"
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprint(n)
}

func num(n int) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeStalled writes the servers that did not answer, each transport with its queue and
// whether it moved, and the processes using their superblocks.
func writeStalled(ew *printer.Writer, rep Report) error {
	if len(rep.Stalled) == 0 {
		return nil
	}
	ew.Printf("\nstalled servers\n")
	for _, s := range rep.Stalled {
		ew.Printf("  %s: %d of %d transport(s) stuck, no progress for at least %s\n", s.Addr, len(s.Transports), max(len(s.Each), len(s.Transports)), s.Window)
		cols := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		tw := printer.New(cols)
		tw.Printf("    TRANSPORT\tQUEUED\tCONNECTED\tPROGRESS\tSTUCK\n")
		for _, t := range s.Each {
			progress := "-"
			if t.Progressed != nil {
				progress = yesNo(*t.Progressed)
			}
			tw.Printf("    %s\t%d\t%s\t%s\t%s\n", t.Name, t.Queued, yesNo(t.Connected), progress, yesNo(t.Stuck))
		}
		if err := cols.Flush(); err != nil {
			return err
		}
	}
	ew.Printf("\nprocesses using the stalled mounts\n")
	switch {
	case len(rep.Blocked) == 0:
	case rep.Blocked[0].Uninspected > 0:
		ew.Printf("  (incomplete: %d processes could not be inspected or were left out, see the warnings: the lists below may miss some)\n", rep.Blocked[0].Uninspected)
	case rep.Blocked[0].Incomplete:
		ew.Printf("  (incomplete: some processes' open files were not all looked at, see the warnings: the lists below may miss some)\n")
	}
	for _, b := range rep.Blocked {
		ew.Printf("  %s (%s), server %s: ", strings.Join(b.MountPoints, ", "), b.Device, b.ServerAddr)
		if len(b.Holders) == 0 {
			ew.Printf("none found\n")
			continue
		}
		ew.Printf("%d\n", len(b.Holders))
		cols := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		tw := printer.New(cols)
		tw.Printf("    PID\tSTATE\tD-THREADS\tVIA\tCOMMAND\tPOD UID\tCONTAINER\n")
		for _, h := range b.Holders {
			tw.Printf("    %d\t%s\t%d\t%s\t%s\t%s\t%s\n", h.PID, h.State, h.BlockedThreads, strings.Join(h.Via, ","),
				h.Comm, orDash(h.PodUID), orDash(kubelet.ShortContainerID(h.ContainerID)))
		}
		if err := cols.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// writeMounting writes the NFS mounts stuck in progress, which have no superblock yet, and
// the unmounts waiting on the stalled mounts.
func writeMounting(ew *printer.Writer, progs []inventory.MountProgram) {
	if len(progs) == 0 {
		return
	}
	ew.Printf("\nmounts and unmounts in progress\n")
	cols := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	tw := printer.New(cols)
	tw.Printf("    PID\tSTATE\tRUNNING\tCOMMAND\tSERVER\tEXPORT\tTARGET\tVOLUME POD\tPOD UID\n")
	for _, p := range progs {
		tw.Printf("    %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.PID, p.State, p.Running.Round(time.Second), p.Comm,
			orDash(p.Server), orDash(p.Export), orDash(p.Target), orDash(p.VolumePod), orDash(p.PodUID))
	}
	_ = cols.Flush() // the writer keeps the first error
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// tlshdState says whether the TLS handshake daemon runs, as the scan found it.
func tlshdState(hs *inventory.TLSHandshake) string {
	switch {
	case hs == nil || !hs.Running && !hs.Complete:
		return "unknown"
	case hs.Running:
		return "running"
	}
	return "not running"
}
