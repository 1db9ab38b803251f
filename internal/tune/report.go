package tune

import (
	"fmt"
	"io"
	"strings"

	"github.com/nfstune/nfstune/internal/printer"
	"github.com/nfstune/nfstune/internal/readahead"
	"github.com/nfstune/nfstune/internal/shell"
)

// Report is what apply prints: the plan and, unless it was a dry run, the result.
type Report struct {
	DryRun bool    `json:"dry_run"`
	Plan   *Plan   `json:"plan"`
	Result *Result `json:"result,omitempty"`
	Error  string  `json:"error,omitempty"`
	// Verdicts judge each read-ahead change on the mount's traffic before and after it
	// (apply --measure).
	Verdicts []readahead.Change `json:"readahead_verdicts,omitempty"`
}

// WriteReport writes apply's text report: the plan, old -> new for every value and file,
// and with a result what happened to each change; then the mounts to unmount together for
// new options, and the plan's warnings and notes. Paths, mount points and file lines come from the host
// and are escaped (printer).
func WriteReport(w io.Writer, rep *Report) error {
	p := rep.Plan
	ew := printer.New(w)
	status := map[int]ItemResult{}
	if rep.Result != nil {
		for i, it := range rep.Result.Items {
			status[i] = it
		}
	}
	switch {
	case p.Empty():
		ew.Printf("Nothing to change: read-ahead, persistence and sysctls already match the policy.\n")
	case rep.DryRun:
		ew.Printf("Plan (dry run, nothing changed): %d changes\n", len(p.Actions))
	default:
		ew.Printf("%s\n", applyHeader(rep))
	}
	readAhead := false
	for i, a := range p.Actions {
		mark := ""
		if it, ok := status[i]; ok {
			mark = "[" + it.Status + "] "
			if it.Status == StatusDone && it.Value != "" {
				mark = "[done, read back " + it.Value + "] "
			}
		} else if rep.Result != nil {
			mark = "[not run] "
		}
		if a.Kind == KindReadAhead {
			readAhead = true
		}
		if a.Kind.Live() {
			ew.Printf("  %s%-9s %s: %s -> %s\n", mark, a.Kind, a.Path, a.Old, a.New)
		} else {
			old := "existing file"
			if a.OldAbsent {
				old = "absent"
			}
			ew.Printf("  %s%-9s %s: %s -> new content:\n", mark, a.Kind, a.Path, old)
			for _, l := range fileLineDiff(a.Old, a.New) {
				ew.Printf("        %s\n", l)
			}
		}
		if len(a.MountPoints) > 0 {
			ew.Printf("        mounts: %s\n", strings.Join(a.MountPoints, ", "))
		}
		ew.Printf("        why: %s\n", a.Reason)
		if it, ok := status[i]; ok && it.Error != "" {
			ew.Printf("        error: %s\n", it.Error)
		}
	}
	if readAhead {
		ew.Printf("Read-ahead applies to files opened after the change: files already open keep the old value until reopened.\n")
	}
	if len(rep.Verdicts) > 0 {
		ew.Printf("\nRead-ahead verdicts (the mount's traffic over %.0f s before and after):\n", rep.Verdicts[0].Before.Seconds)
		for _, v := range rep.Verdicts {
			ew.Printf("  %s (%s): %d -> %d KiB: %s: %s\n", v.MountPoint, v.Device, v.FromKB, v.ToKB, v.Verdict, v.Reason)
		}
	}
	if len(p.Remounts) > 0 {
		ew.Printf("\nMount options (apply never remounts; unmount each group together, then mount again):\n")
		for _, g := range p.Remounts {
			why := "these superblocks"
			if g.ClientWide {
				why = "every mount of this NFS client, since the first mount fixed nconnect/vers/proto"
			}
			ew.Printf("  client %s: unmount together (%s): %s\n", g.Key, why, shell.Join(g.UnmountTogether...))
			for _, m := range g.Mounts {
				var ch []string
				for _, c := range m.Changes {
					have := c.Have
					if have == "" {
						have = "unset"
					}
					ch = append(ch, fmt.Sprintf("%s: %s -> %s", c.Name, have, c.Want))
				}
				ew.Printf("    %s (%s): %s\n", strings.Join(m.MountPoints, ", "), m.Device, strings.Join(ch, "; "))
				for _, l := range m.FstabLines {
					ew.Printf("      fstab: %s\n", l)
				}
				for _, c := range m.Commands {
					ew.Printf("      mount: %s\n", c)
				}
			}
		}
	}
	if len(p.Warnings) > 0 {
		ew.Printf("\nWarnings:\n")
		for _, w := range p.Warnings {
			ew.Printf("  - %s\n", w)
		}
	}
	if len(p.Notes) > 0 {
		ew.Printf("\nNotes:\n")
		for _, n := range p.Notes {
			ew.Printf("  - %s\n", n)
		}
	}
	return ew.Err()
}

// applyHeader says what apply really did: every change, some of them, or none.
func applyHeader(rep *Report) string {
	total := len(rep.Plan.Actions)
	done, failed := 0, 0
	if rep.Result != nil {
		failed = rep.Result.Failed()
		done = len(rep.Result.Items) - failed
	}
	journal := ""
	if rep.Result != nil && rep.Result.Journal != "" {
		journal = " (journal " + rep.Result.Journal + ")"
	}
	switch {
	case done == 0 && failed == 0 && rep.Error != "":
		return fmt.Sprintf("Nothing applied (%d changes planned, none made; the error follows):", total)
	case done == total:
		return fmt.Sprintf("Applied %d changes%s:", total, journal)
	}
	msg := fmt.Sprintf("Applied %d of %d changes", done, total)
	if failed > 0 {
		msg += fmt.Sprintf(", %d failed", failed)
	}
	if notRun := total - done - failed; notRun > 0 {
		msg += fmt.Sprintf(", %d not run", notRun)
	}
	return msg + journal + ":"
}

// fileLineDiff shows a file change as the lines removed (-) and added (+).
func fileLineDiff(old, new string) []string {
	oldLines := strings.Split(strings.TrimSuffix(old, "\n"), "\n")
	newLines := strings.Split(strings.TrimSuffix(new, "\n"), "\n")
	if old == "" {
		oldLines = nil
	}
	count := map[string]int{}
	for _, l := range newLines {
		count[l]++
	}
	var out []string
	for _, l := range oldLines {
		if count[l] > 0 {
			count[l]--
			continue
		}
		out = append(out, "- "+l)
	}
	count = map[string]int{}
	for _, l := range oldLines {
		count[l]++
	}
	for _, l := range newLines {
		if count[l] > 0 {
			count[l]--
			continue
		}
		out = append(out, "+ "+l)
	}
	return out
}
