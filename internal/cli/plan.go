package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/plan"
	"github.com/nfstune/nfstune/internal/printer"
)

type planFlags struct {
	Throughput string
	Capacity   string
	IOPS       string
	Clients    string
	ClientNIC  string
	Access     string
	Prices     []string
	Output     string
}

type planShowFlags struct {
	planFlags
	Service string
	Tier    string
}

func newPlanCommand(streams IOStreams) *cobra.Command {
	flags := &planFlags{}
	c := &cobra.Command{
		Use:   "plan",
		Short: "Size cloud NFS shares for a throughput, capacity and IOPS need, clients included",
		Long: `plan sizes every tier of Azure Files, Azure NetApp Files, Azure Blob NFS, Amazon EFS and
Google Filestore from their published performance models and lists the options that meet the
need: what to provision, the throughput and IOPS it gives, how many clients it takes to drive
it with one connection and with nconnect, and what limits it. Options are ranked by monthly
cost where a price is known, otherwise by provisioned capacity. Prices come from the
built-in price list (each price with its source and the date it was read; a tier without a
sourced price has none), or, with --prices, from your files instead.

Sizes are in GiB and 1 TiB = 1024 GiB, as Azure meters shares and volumes. Units are strict: GiB and GB, MiB/s, MB/s
and Mbps are different things. Exit code 1 when no option meets the need.`,
		Example: `  nfstune plan --throughput 2GiB/s --capacity 10TiB --client-nic 12.5Gbps
  nfstune plan --throughput 500MiB/s --iops 20000 --clients 4 --prices prices.yaml -o json
  nfstune plan show --service azure-files --capacity 4000GiB`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runPlan(streams, flags)
		},
	}
	addPlanFlags(c, flags)
	c.Flags().StringVar(&flags.Throughput, "throughput", "", "aggregate throughput needed, e.g. 2GiB/s, 800MB/s, 10Gbps")
	c.Flags().StringVar(&flags.Capacity, "capacity", "", "data to hold, e.g. 10TiB or 500GiB")
	c.Flags().StringVar(&flags.IOPS, "iops", "", "aggregate IOPS needed")
	c.Flags().StringVar(&flags.Clients, "clients", "", "client machines available to drive the load")
	c.AddCommand(newPlanShowCommand(streams))
	return c
}

func addPlanFlags(c *cobra.Command, flags *planFlags) {
	c.Flags().StringVar(&flags.ClientNIC, "client-nic", "", "network bandwidth of one client, e.g. 12.5Gbps")
	c.Flags().StringVar(&flags.Access, "access", string(plan.Read), "read or write: EFS, Blob NFS and Filestore publish different limits")
	c.Flags().StringArrayVar(&flags.Prices, "prices", nil, "price file (YAML kind PriceList) used instead of the built-in price list; repeat to layer files, later entries win")
	addOutputFlag(c, &flags.Output, printer.Formats, "")
}

func newPlanShowCommand(streams IOStreams) *cobra.Command {
	flags := &planShowFlags{}
	c := &cobra.Command{
		Use:   "show",
		Short: "Show what a service's tiers deliver at a given capacity",
		Example: `  nfstune plan show --service azure-files --tier provisioned-v1 --capacity 4000GiB
  nfstune plan show --service anf --capacity 4TiB --client-nic 25Gbps`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runPlanShow(streams, flags)
		},
	}
	addPlanFlags(c, &flags.planFlags)
	addServiceFlag(c, &flags.Service, "the service, by its backend name or an alias")
	c.Flags().StringVar(&flags.Tier, "tier", "", "one tier of the service (default all)")
	c.Flags().StringVar(&flags.Capacity, "capacity", "", "capacity to describe, e.g. 4000GiB")
	return c
}

func planUsageErr(err error) error { return &ExitError{Code: ExitError2, Err: err} }

// need turns the flags into a plan.Need, returning every parse error at once.
func (f *planFlags) need() (plan.Need, error) {
	n := plan.Need{Access: plan.Access(f.Access)}
	var errs []error
	if f.Throughput != "" {
		v, err := plan.ParseRate(f.Throughput)
		errs = append(errs, planFlagErr("--throughput", err))
		n.Throughput = v
	}
	if f.Capacity != "" {
		v, err := plan.ParseSize(f.Capacity)
		errs = append(errs, planFlagErr("--capacity", err))
		n.Capacity = v
	}
	if f.IOPS != "" {
		v, err := plan.ParseCount(f.IOPS)
		errs = append(errs, planFlagErr("--iops", err))
		n.IOPS = v
	}
	if f.Clients != "" {
		v, err := plan.ParseCount(f.Clients)
		if err == nil && (v < 1 || v > 1_000_000) {
			err = fmt.Errorf("want 1 to 1000000 clients, got %d", v)
		}
		errs = append(errs, planFlagErr("--clients", err))
		n.Clients = int(v)
	}
	if f.ClientNIC != "" {
		v, err := plan.ParseRate(f.ClientNIC)
		errs = append(errs, planFlagErr("--client-nic", err))
		n.ClientNIC = v
	}
	if n.Access != plan.Read && n.Access != plan.Write {
		errs = append(errs, fmt.Errorf("--access: want read or write, got %q", f.Access))
	}
	return n, errors.Join(errs...)
}

func planFlagErr(flag string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", flag, err)
}

func loadPlanInputs(f *planFlags) (*plan.Catalog, *plan.Prices, plan.Need, error) {
	n, err := f.need()
	if err != nil {
		return nil, nil, n, planUsageErr(err)
	}
	c, err := plan.LoadCatalog()
	if err != nil {
		return nil, nil, n, err
	}
	// The user's price files replace the built-in list: one currency, one set of dates.
	var ps *plan.Prices
	if len(f.Prices) > 0 {
		if ps, err = plan.LoadPrices(c, f.Prices...); err != nil {
			return nil, nil, n, planUsageErr(err)
		}
	} else if ps, err = plan.DefaultPrices(c); err != nil {
		return nil, nil, n, err
	}
	return c, ps, n, nil
}

func runPlan(streams IOStreams, f *planFlags) error {
	c, ps, n, err := loadPlanInputs(f)
	if err != nil {
		return err
	}
	if n.Throughput <= 0 && n.Capacity <= 0 && n.IOPS <= 0 {
		return planUsageErr(errors.New("give at least one of --throughput, --capacity, --iops"))
	}
	r, err := plan.Plan(c, ps, n)
	if err != nil {
		return planUsageErr(fmt.Errorf("planning: %w", err))
	}
	if err := writePlan(streams.Out, f.Output, r, false); err != nil {
		return err
	}
	if len(r.Options) == 0 {
		return &ExitError{Code: ExitIssues, Err: errors.New("no service tier meets the need (reasons in the output)")}
	}
	return nil
}

func runPlanShow(streams IOStreams, f *planShowFlags) error {
	c, ps, n, err := loadPlanInputs(&f.planFlags)
	if err != nil {
		return err
	}
	if f.Service == "" || f.Capacity == "" {
		return planUsageErr(errors.New("plan show needs --service and --capacity"))
	}
	r, err := plan.Show(c, ps, f.Service, f.Tier, n.Capacity, n)
	if err != nil {
		return planUsageErr(err)
	}
	if err := writePlan(streams.Out, f.Output, r, true); err != nil {
		return err
	}
	if len(r.Options) == 0 {
		return &ExitError{Code: ExitIssues, Err: fmt.Errorf("no tier of %s can be provisioned at %s (reasons in the output)", f.Service, f.Capacity)}
	}
	return nil
}

func writePlan(w io.Writer, format string, r *plan.Result, show bool) error {
	switch {
	case format != OutputTable:
		return writeStructured(w, format, r)
	case show:
		return plan.WriteShowTable(w, r)
	}
	return plan.WriteTable(w, r)
}

// addServiceFlag adds the --service flag of a command that takes its limits from plan's
// models. Its help lists the services modelled, which takes decoding the embedded catalog:
// that is done when help is shown, not at each start of the binary (the udev helper starts
// it at every NFS mount).
func addServiceFlag(c *cobra.Command, p *string, usage string) {
	addBackendFlag(c, p, "service", usage)
	c.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		if f := c.Flags().Lookup("service"); f != nil {
			f.Usage = usage + ": " + planServices()
		}
		inheritedHelp(c)(cmd, args)
	})
}

// inheritedHelp is the help function c would have without its own: its parent's, else
// cobra's default.
func inheritedHelp(c *cobra.Command) func(*cobra.Command, []string) {
	if c.HasParent() {
		return c.Parent().HelpFunc()
	}
	return (&cobra.Command{}).HelpFunc()
}

// planServices lists the services nfstune plan models, by canonical name.
func planServices() string {
	c, err := plan.LoadCatalog()
	if err != nil {
		return err.Error() // the catalog is compiled in and checked by plan's tests
	}
	var names []string
	for _, s := range c.Services {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}
