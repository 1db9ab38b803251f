package plan

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/nfstune/nfstune/internal/printer"
)

// WriteTable writes a Result of Plan for people: the need, the options ranked, one line each,
// the tiers that do not meet the need and why, notes, and the conventions used.
func WriteTable(w io.Writer, r *Result) error { return writeTable(w, r, false) }

// WriteShowTable writes a Result of Show for people: what each tier delivers at the capacity,
// the tiers that cannot be provisioned at it and why, notes, and the conventions used.
func WriteShowTable(w io.Writer, r *Result) error { return writeTable(w, r, true) }

func writeTable(w io.Writer, r *Result, show bool) error {
	ew := printer.New(w)
	ew.Printf("Need: %s\n", needLine(r.Need, show))
	if !show {
		ew.Printf("Ranked by %s.\n", r.RankedBy)
	}
	if len(r.Options) > 0 {
		ew.Printf("\n")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		clientsHead := "CLIENTS 1 CONN/NCONNECT"
		if show {
			clientsHead = "CLIENTS TO SATURATE 1 CONN/NCONNECT"
		}
		fmt.Fprintf(tw, "#\tSERVICE/TIER\tPROVISION\tTHROUGHPUT\tIOPS (BURST)\tPER CLIENT 1 CONN/NCONNECT\t%s\tMONTHLY\tLIMITED BY\n", clientsHead)
		for i, o := range r.Options {
			fmt.Fprintf(tw, "%d\t%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, o.Service, o.Tier, o.Provision,
				FormatMiBps(o.MiBps), iopsCell(o), perClientCell(o), clientsCell(o), costCell(o, r.Currency),
				strings.Join(o.LimitedBy, "; "))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Rejected) > 0 {
		if show {
			ew.Printf("\nCannot be provisioned at this capacity:\n")
		} else {
			ew.Printf("\nDoes not meet the need:\n")
		}
		for _, rej := range r.Rejected {
			ew.Printf("  %s/%s: %s\n", rej.Service, rej.Tier, strings.Join(rej.Reasons, "; "))
			if rej.ScaleOut != nil {
				ew.Printf("    %s\n", rej.ScaleOut)
			}
		}
	}
	heading := true
	for i, o := range r.Options {
		for _, n := range o.Notes {
			if heading {
				ew.Printf("\nNotes:\n")
				heading = false
			}
			ew.Printf("  %d %s/%s: %s\n", i+1, o.Service, o.Tier, n)
		}
	}
	ew.Printf("\nSizes: %s.\nPrices: %s.\n", r.Convention, r.PriceNote)
	return ew.Err()
}

func needLine(n NeedSummary, show bool) string {
	var parts []string
	if show {
		parts = append(parts, "capacity "+FormatGiB(n.CapacityGiB))
	} else {
		if n.ThroughputMiBps > 0 {
			parts = append(parts, FormatMiBps(n.ThroughputMiBps))
		}
		if n.CapacityGiB > 0 {
			parts = append(parts, "capacity "+FormatGiB(n.CapacityGiB))
		}
		if n.IOPS > 0 {
			parts = append(parts, Group(float64(n.IOPS))+" IOPS")
		}
		if n.Clients > 0 {
			parts = append(parts, fmt.Sprintf("%d clients", n.Clients))
		}
	}
	parts = append(parts, string(n.Access)+"s")
	if n.ClientNICMiBps > 0 {
		parts = append(parts, "client NIC "+FormatMiBps(n.ClientNICMiBps))
	} else {
		parts = append(parts, "client NIC not given")
	}
	return strings.Join(parts, ", ")
}

func iopsCell(o Option) string {
	if o.IOPS == nil {
		return "not published"
	}
	s := Group(*o.IOPS)
	if o.BurstIOPS != nil && *o.BurstIOPS > *o.IOPS {
		s += " (" + Group(*o.BurstIOPS) + ")"
	}
	return s
}

func perClientCell(o Option) string {
	if o.ClientMiBps == 0 {
		return "-"
	}
	return Group(o.ClientMiBps) + "/" + Group(o.ClientNconnectMiBps) + " MiB/s"
}

func clientsCell(o Option) string {
	if o.ClientsNeeded == nil {
		return "-"
	}
	s := fmt.Sprintf("%d/%d", *o.ClientsNeeded, *o.ClientsNeededNconnect)
	if o.MultiConnection != "" {
		s += " (" + o.MultiConnection + ")"
	}
	return s
}

func costCell(o Option, currency string) string {
	if o.MonthlyCost == nil {
		return "-"
	}
	return Group(*o.MonthlyCost) + " " + currency
}
