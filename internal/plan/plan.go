package plan

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Convention is printed with every plan: the planner's size unit and why.
const Convention = "GiB, and 1 TiB = 1024 GiB, as Azure meters shares and volumes " +
	"(Azure NetApp Files: 100 GiB at Premium = 6.25 MiB/s = 64 x 100/1024); " +
	"tables that read 4,000 GB as 4 TB overstate per-TiB throughput by 2.4%"

// Need is what the workload requires. Zero fields are not constrained.
type Need struct {
	Throughput Rate   // aggregate throughput
	Capacity   Size   // data to hold
	IOPS       int64  // aggregate operations per second
	Clients    int    // client machines available to generate the load
	ClientNIC  Rate   // network bandwidth of one client
	Access     Access // read or write; services with asymmetric limits are sized for it
}

func (n Need) validate() error {
	var errs []error
	if n.Throughput < 0 || n.Capacity < 0 || n.IOPS < 0 || n.Clients < 0 || n.ClientNIC < 0 {
		errs = append(errs, errors.New("need values must not be negative"))
	}
	if n.Access != Read && n.Access != Write {
		errs = append(errs, fmt.Errorf("access must be read or write, got %q", n.Access))
	}
	return errors.Join(errs...)
}

// NeedSummary is the need in the units of the output.
type NeedSummary struct {
	ThroughputMiBps float64 `json:"throughputMiBps"`
	CapacityGiB     float64 `json:"capacityGiB,omitempty"`
	IOPS            int64   `json:"iops,omitempty"`
	Clients         int     `json:"clients,omitempty"`
	ClientNICMiBps  float64 `json:"clientNicMiBps,omitempty"`
	Access          Access  `json:"access"`
}

// Option is one service tier sized for the need, or described at a given size.
type Option struct {
	Service   string    `json:"service"`
	Tier      string    `json:"tier"`
	Title     string    `json:"title"`
	Provision Provision `json:"provision"`

	MiBps     float64  `json:"throughputMiBps"`
	IOPS      *float64 `json:"iops"`
	BurstIOPS *float64 `json:"burstIops,omitempty"`

	// ClientMiBps is what one client can drive with one connection and
	// ClientNconnectMiBps with nconnect (or efs-proxy): the lower of the service's
	// published per-client limit and the NIC; zero when neither is known.
	ClientMiBps         float64 `json:"clientMiBps,omitempty"`
	ClientNconnectMiBps float64 `json:"clientNconnectMiBps,omitempty"`
	Nconnect            int     `json:"nconnect,omitempty"`
	// MultiConnection names how a client opens several connections: "nconnect=N" or "efs-proxy".
	MultiConnection string `json:"multiConnection,omitempty"`
	// ClientsNeeded is how many clients it takes to reach the target throughput
	// (the need for a plan, the service throughput for show); nil when unknown.
	ClientsNeeded         *int `json:"clientsNeeded"`
	ClientsNeededNconnect *int `json:"clientsNeededNconnect"`

	// LimitedBy names what caps the service (share, volume, account) and what caps one
	// client (per-client limit or NIC).
	LimitedBy   []string `json:"limitedBy"`
	MonthlyCost *float64 `json:"monthlyCost,omitempty"`
	Notes       []string `json:"notes,omitempty"`
}

// Rejection says why a tier cannot meet the need.
type Rejection struct {
	Service string   `json:"service"`
	Tier    string   `json:"tier"`
	Reasons []string `json:"reasons"`
	// ScaleOut is set when the throughput is over what one unit of the tier gives, and says
	// how many of the largest units would reach it together.
	ScaleOut *ScaleOut `json:"scaleOut,omitempty"`
}

// ScaleOut is a number of the largest units of a tier that together meet a need, with the
// data and load split between them.
type ScaleOut struct {
	Count     int     `json:"count"`
	Units     string  `json:"units"`
	EachMiBps float64 `json:"eachMiBps"`
}

func (s *ScaleOut) String() string {
	return fmt.Sprintf("%d %s, %s each, would together meet the need with the data split between them",
		s.Count, s.Units, fmtMiBps(s.EachMiBps))
}

// maxScaleOut bounds the hint: beyond it, splitting is not a plan.
const maxScaleOut = 64

// scaleOut returns how many of the tier's largest units together meet n, or nil when one
// unit would do, when the split is too wide, or when the tier has no size to scale by.
func scaleOut(t *Tier, m modelKind, n Need) *ScaleOut {
	maxGiB, sizeGiB := 0.0, 0.0
	if m.largest != "" {
		maxGiB = t.p(m.largest)
	}
	if m.grows {
		sizeGiB = maxGiB
	}
	p, err := m.at(t, sizeGiB, n.Access)
	if err != nil {
		return nil
	}
	perf := m.deliver(t, p, n.Access)
	if perf.MiBps <= 0 {
		return nil
	}
	k := ceil(n.Throughput.MiBps() / perf.MiBps)
	if maxGiB > 0 {
		k = math.Max(k, ceil(n.Capacity.GiB()/maxGiB))
	}
	if perf.IOPS != nil && *perf.IOPS > 0 {
		k = math.Max(k, ceil(float64(n.IOPS) / *perf.IOPS))
	}
	if k <= 1 || k > maxScaleOut {
		return nil
	}
	return &ScaleOut{Count: int(k), Units: m.several, EachMiBps: perf.MiBps}
}

// Result is a ranked plan.
type Result struct {
	Need       NeedSummary `json:"need"`
	Convention string      `json:"convention"`
	RankedBy   string      `json:"rankedBy"`
	Currency   string      `json:"currency,omitempty"`
	PriceNote  string      `json:"priceNote"`
	// PriceLists are the price lists read, with their dates: the built-in one, or the
	// user's files.
	PriceLists []PriceList `json:"priceLists,omitempty"`
	Options    []Option    `json:"options"`
	Rejected   []Rejection `json:"rejected"`
}

// Ranking orders.
const (
	RankedByCost     = "monthly cost"
	RankedByCapacity = "provisioned capacity (no option has a price)"
	RankedByMixed    = "monthly cost, then provisioned capacity for tiers without a price"
)

// Plan sizes every tier of every service for n and ranks the options that meet it,
// cheapest first, or by provisioned capacity when prices are unknown. prices may be nil.
func Plan(c *Catalog, prices *Prices, n Need) (*Result, error) {
	if err := n.validate(); err != nil {
		return nil, err
	}
	if n.Throughput <= 0 && n.Capacity <= 0 && n.IOPS <= 0 {
		return nil, errors.New("nothing to plan for: give a throughput, capacity or IOPS")
	}
	r := &Result{Need: summarize(n), Convention: Convention, Options: []Option{}, Rejected: []Rejection{}}
	for si := range c.Services {
		svc := &c.Services[si]
		for ti := range svc.Tiers {
			t := &svc.Tiers[ti]
			m, _ := kindOf(t.Model)
			p, why := m.solve(t, n)
			if len(why) > 0 {
				r.Rejected = append(r.Rejected, Rejection{Service: svc.Name, Tier: t.Name, Reasons: why,
					ScaleOut: scaleOut(t, m, n)})
				continue
			}
			o := describe(svc, t, p, m.deliver(t, p, n.Access), n, n.Throughput.MiBps())
			if why := clientShortfall(&o, n); len(why) > 0 {
				r.Rejected = append(r.Rejected, Rejection{Service: svc.Name, Tier: t.Name, Reasons: why})
				continue
			}
			r.Options = append(r.Options, o)
		}
	}
	price(r, prices)
	rank(r)
	return r, nil
}

// Show describes what each tier of a service (or one tier) delivers at a capacity.
func Show(c *Catalog, prices *Prices, service, tier string, capacity Size, n Need) (*Result, error) {
	if err := n.validate(); err != nil {
		return nil, err
	}
	svc, err := c.Service(service)
	if err != nil {
		return nil, err
	}
	tiers := svc.Tiers
	if tier != "" {
		t, err := svc.Tier(tier)
		if err != nil {
			return nil, err
		}
		tiers = []Tier{*t}
	}
	n.Capacity = capacity
	r := &Result{Need: summarize(n), Convention: Convention, RankedBy: "tier", Options: []Option{}, Rejected: []Rejection{}}
	for i := range tiers {
		t := &tiers[i]
		m, _ := kindOf(t.Model)
		p, err := m.at(t, capacity.GiB(), n.Access)
		if err != nil {
			r.Rejected = append(r.Rejected, Rejection{Service: svc.Name, Tier: t.Name, Reasons: []string{err.Error()}})
			continue
		}
		perf := m.deliver(t, p, n.Access)
		r.Options = append(r.Options, describe(svc, t, p, perf, n, perf.MiBps))
	}
	price(r, prices)
	return r, nil
}

// TierAt is what one tier of a service delivers at a provisioned capacity, the limit a
// benchmark of that tier can reach. With tier empty the service must have exactly one tier
// that can be provisioned at capacity; the errors say which tiers can be, or why none can.
func TierAt(c *Catalog, service, tier string, capacity Size, access Access) (Option, error) {
	r, err := Show(c, nil, service, tier, capacity, Need{Access: access})
	if err != nil {
		return Option{}, err
	}
	switch {
	case len(r.Options) == 1:
		return r.Options[0], nil
	case len(r.Options) > 1:
		var tiers []string
		for _, o := range r.Options {
			tiers = append(tiers, o.Tier)
		}
		return Option{}, fmt.Errorf("tiers %s can be provisioned: name one with --tier", strings.Join(tiers, ", "))
	}
	var why []string
	for _, rej := range r.Rejected {
		why = append(why, rej.Reasons...)
	}
	return Option{}, errors.New(strings.Join(why, "; "))
}

func summarize(n Need) NeedSummary {
	return NeedSummary{
		ThroughputMiBps: n.Throughput.MiBps(), CapacityGiB: n.Capacity.GiB(), IOPS: n.IOPS,
		Clients: n.Clients, ClientNICMiBps: n.ClientNIC.MiBps(), Access: n.Access,
	}
}

// describe builds an option and counts the clients needed to reach target MiB/s.
func describe(svc *Service, t *Tier, p Provision, perf Perf, n Need, target float64) Option {
	o := Option{
		Service: svc.Name, Tier: t.Name, Title: svc.Title + ", " + t.Title, Provision: p,
		MiBps: perf.MiBps, IOPS: perf.IOPS, BurstIOPS: perf.BurstIOPS, Nconnect: perf.Nconnect,
		LimitedBy: []string{perf.Limit}, Notes: slices.Clone(perf.Notes), MultiConnection: perf.Multi,
	}
	if o.MultiConnection == "" && o.Nconnect > 0 {
		o.MultiConnection = fmt.Sprintf("nconnect=%d", o.Nconnect)
	}
	nic := n.ClientNIC.MiBps()
	o.ClientMiBps, o.ClientNconnectMiBps = lowest(perf.ClientMiBps, nic), lowest(perf.ClientNconnectMiBps, nic)
	if o.ClientNconnectMiBps == 0 {
		o.ClientNconnectMiBps = o.ClientMiBps
	}
	switch {
	case o.ClientMiBps == 0:
		o.Notes = append(o.Notes, "no published per-client limit; give --client-nic to count clients")
	case nic > 0 && nic <= perf.ClientMiBps:
		o.LimitedBy = append(o.LimitedBy, "client NIC")
	case nic > 0 && nic <= perf.ClientNconnectMiBps:
		o.LimitedBy = append(o.LimitedBy, "per-client; NIC with "+o.MultiConnection)
	case perf.ClientMiBps > 0:
		o.LimitedBy = append(o.LimitedBy, "per-client")
	default:
		o.LimitedBy = append(o.LimitedBy, "client NIC")
	}
	if target > 0 {
		o.ClientsNeeded = clients(target, o.ClientMiBps)
		o.ClientsNeededNconnect = clients(target, o.ClientNconnectMiBps)
	}
	if n.IOPS > 0 && o.IOPS == nil {
		o.Notes = append(o.Notes, fmt.Sprintf("%s IOPS not checked: no published IOPS model", group(float64(n.IOPS))))
	}
	return o
}

// lowest returns the smaller positive value; zero means unknown.
func lowest(a, b float64) float64 {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return math.Min(a, b)
}

func clients(target, perClient float64) *int {
	if perClient <= 0 {
		return nil
	}
	c := int(ceil(target / perClient))
	return &c
}

// clientShortfall checks that the clients available can drive the need.
func clientShortfall(o *Option, n Need) []string {
	if n.Clients <= 0 || o.ClientNconnectMiBps <= 0 {
		return nil
	}
	need := n.Throughput.MiBps()
	if got := float64(n.Clients) * o.ClientNconnectMiBps; got < need {
		verb := "clients reach"
		if n.Clients == 1 {
			verb = "client reaches"
		}
		return []string{fmt.Sprintf("%d %s %s at most (%s each with nconnect), short of %s",
			n.Clients, verb, fmtMiBps(got), fmtMiBps(o.ClientNconnectMiBps), fmtMiBps(need))}
	}
	if float64(n.Clients)*o.ClientMiBps < need && o.MultiConnection != "" {
		who := fmt.Sprintf("%d clients need", n.Clients)
		if n.Clients == 1 {
			who = "one client needs"
		}
		o.Notes = append(o.Notes, fmt.Sprintf("%s %s to reach the throughput", who, o.MultiConnection))
	}
	return nil
}

func price(r *Result, ps *Prices) {
	r.PriceNote = "no prices known: pass --prices FILE with your list or contract prices"
	if ps == nil || len(ps.Lists) == 0 {
		return
	}
	r.PriceLists = ps.Lists
	var from []string
	for _, l := range ps.Lists {
		from = append(from, strings.Join(slices.DeleteFunc([]string{l.Source, l.Region, l.Date}, func(s string) bool { return s == "" }), " "))
	}
	if len(ps.ByTier) == 0 {
		r.PriceNote = "no prices known: " + strings.Join(from, "; ") + " has no sourced price for any tier; pass --prices FILE with your list or contract prices"
		return
	}
	r.Currency = ps.Lists[0].Currency
	r.PriceNote = "prices in " + r.Currency + " per month from " + strings.Join(from, "; ")
	for i := range r.Options {
		o := &r.Options[i]
		p, ok := ps.ByTier[o.Service+"/"+o.Tier]
		if !ok {
			continue
		}
		if o.Provision.ByUse && o.Provision.CapacityGiB == 0 {
			// Priced by the data stored, which the need does not give: a cost of 0
			// would rank it first.
			o.Notes = append(o.Notes, "billed by stored data: give --capacity to price it")
			continue
		}
		o.MonthlyCost = ptr(math.Round(p.monthly(o.Provision)*100) / 100)
		if o.Provision.ByUse {
			o.Notes = append(o.Notes, "billed by use: the cost counts the capacity given, not transfers or requests")
		}
		if p.Note != "" {
			o.Notes = append(o.Notes, "price: "+p.Note)
		}
	}
}

// rank orders options by monthly cost when known, then by provisioned capacity.
func rank(r *Result) {
	priced := 0
	for _, o := range r.Options {
		if o.MonthlyCost != nil {
			priced++
		}
	}
	switch {
	case priced == 0:
		r.RankedBy = RankedByCapacity
	case priced == len(r.Options):
		r.RankedBy = RankedByCost
	default:
		r.RankedBy = RankedByMixed
	}
	slices.SortStableFunc(r.Options, func(a, b Option) int {
		switch {
		case a.MonthlyCost != nil && b.MonthlyCost != nil:
			if c := cmp.Compare(*a.MonthlyCost, *b.MonthlyCost); c != 0 {
				return c
			}
		case a.MonthlyCost != nil:
			return -1
		case b.MonthlyCost != nil:
			return 1
		}
		if c := cmp.Compare(a.Provision.CapacityGiB, b.Provision.CapacityGiB); c != 0 {
			return c
		}
		return cmp.Compare(a.Service+"/"+a.Tier, b.Service+"/"+b.Tier)
	})
}

// fmtGiB formats a capacity in GiB, adding TiB from 1 TiB up.
func fmtGiB(g float64) string {
	s := group(g) + " GiB"
	if g >= 1024 {
		s += " (" + strconv.FormatFloat(math.Round(g/1024*100)/100, 'f', -1, 64) + " TiB)"
	}
	return s
}

// fmtMiBps formats a throughput in MiB/s.
func fmtMiBps(m float64) string { return group(m) + " MiB/s" }

// group formats v with thousands separators and at most two decimals.
func group(v float64) string {
	s := strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
	intPart, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	var b strings.Builder
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	out := b.String()
	if neg {
		out = "-" + out
	}
	if frac != "" {
		out += "." + frac
	}
	return out
}

// Group formats v with thousands separators and at most two decimals, for tables.
func Group(v float64) string { return group(v) }
