package fleet

import (
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/nfstune/nfstune/internal/printer"
	"github.com/nfstune/nfstune/internal/status"
)

// WriteTable writes one line per node, then the problems of the nodes that are not
// compliant, the untuned mounts, stalled servers and recovery actions the agents list,
// and a summary line.
func WriteTable(w io.Writer, f *Fleet) error {
	ew := printer.New(w)
	cols := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	tw := printer.New(cols)
	tw.Printf("NODE\tGROUP\tAGENT\tVERSION\tMODE\tPOLICY\tMOUNTS\tTUNED\tERRORS\tWARNINGS\tINFO\tSTALLED\tRECOVERY\tCOMPLIANT\n")
	for _, n := range f.Nodes {
		compliant := "yes"
		if !n.Compliant {
			compliant = "no"
		}
		if !n.Reachable {
			tw.Printf("%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t%s\n", n.Name, orDash(n.Group), "unreachable", compliant)
			continue
		}
		a := n.Agent
		tw.Printf("%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", n.Name, orDash(n.Group), agentState(a),
			orDash(a.Version), orDash(a.Mode), policyName(a.Policy), a.Mounts, a.Tuned,
			a.Findings.Error, a.Findings.Warning, a.Findings.Info, len(a.Stalled), len(a.Recovery), compliant)
	}
	if err := cols.Flush(); err != nil {
		return err
	}
	for _, n := range f.Nodes {
		writeDetails(ew, n)
	}
	s := f.Summary
	ew.Printf("\n%d nodes: %d compliant, %d not compliant (%d unreachable); %d mounts, %d tuned; %d errors, %d warnings, %d info; %d stalled servers\n",
		s.Nodes, s.Compliant, s.Nodes-s.Compliant, s.Unreachable, s.Mounts, s.Tuned,
		s.Findings.Error, s.Findings.Warning, s.Findings.Info, s.Stalled)
	return ew.Err()
}

// writeDetails writes what makes a node not compliant, and what its agent lists.
func writeDetails(ew *printer.Writer, n Node) {
	if n.Compliant && (n.Agent == nil || len(n.Agent.Stalled)+len(n.Agent.Recovery) == 0) {
		return
	}
	ew.Printf("\n%s:\n", n.Name)
	for _, p := range n.Problems {
		ew.Printf("  %s\n", p)
	}
	a := n.Agent
	if a == nil {
		return
	}
	for _, m := range a.Untuned {
		ew.Printf("  untuned %s %s:%s (%s): read-ahead %d KiB, policy %d KiB, %s\n", m.MountPoint, m.Server, m.Export, m.Device, m.ReadAheadKB, m.WantKB, m.Mode)
	}
	if more := a.Mounts - a.Tuned - len(a.Untuned); more > 0 {
		ew.Printf("  ... and %d more untuned (kubectl nfstune audit %s)\n", more, n.Name)
	}
	for _, s := range a.Stalled {
		ew.Printf("  stalled server %s: %d requests waiting, %d mounts, %d blocked processes\n", hostPort(s), s.Waiting, s.Mounts, s.BlockedProcesses)
	}
	for _, r := range a.Recovery {
		ew.Printf("  recovery %s %s on %s %s: %s %s\n", r.Action, r.Mode, r.Server, r.Device, orDash(r.Outcome), r.Message)
	}
}

func agentState(a *status.Status) string {
	switch {
	case a.ReadError != "":
		return "read-error"
	case a.Unhealthy != "":
		return "unhealthy"
	case !a.Ready:
		return "starting"
	}
	return "ready"
}

// policyName is name@<first 8 hex digits of the policy's hash>, "built-in" for the
// built-in profiles.
func policyName(p status.Policy) string {
	name := p.Name
	if name == "" {
		name = "-"
	}
	if p.SHA256 == "" {
		return name + "@built-in"
	}
	return name + "@" + p.SHA256[:min(8, len(p.SHA256))]
}

func hostPort(s status.Server) string {
	addr := s.Addr
	if strings.Contains(addr, ":") {
		addr = "[" + addr + "]"
	}
	if s.Port != 0 {
		return addr + ":" + strconv.Itoa(s.Port)
	}
	return addr
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteWarnings writes what an agent's inventory could not read, one line per warning,
// escaped as the table is: the warnings quote mount points and file contents from the node.
func WriteWarnings(w io.Writer, node string, warnings []string) error {
	ew := printer.New(w)
	for _, warn := range warnings {
		ew.Printf("warning: %s: %s\n", node, warn)
	}
	return ew.Err()
}
