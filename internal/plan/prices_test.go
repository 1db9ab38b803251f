package plan

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
)

var priceFileTests = []struct {
	file    string
	wantErr string // "" for valid files; otherwise the "file:line: message" prefix expected
}{
	{file: "valid-prices.yaml"},
	{file: "valid-override.yaml"},
	{file: "example-prices.yaml"},
	{file: "invalid-unknown-field.yaml", wantErr: `invalid-unknown-field.yaml:7: prices[0].perGBMonth: unknown key (did you mean "perGiBMonth"?)`},
	{file: "invalid-miscased-key.yaml", wantErr: `invalid-miscased-key.yaml:3: Currency: unknown key (did you mean "currency"?)` + "\n" +
		`testdata/invalid-miscased-key.yaml:7: prices[0].perGiBmonth: unknown key (did you mean "perGiBMonth"?)`},
	{file: "invalid-service.yaml", wantErr: `invalid-service.yaml:8: unknown service "ceph"`},
	{file: "invalid-tier.yaml", wantErr: `invalid-tier.yaml:5: unknown tier "gold" of azure-netapp-files`},
	{file: "invalid-negative.yaml", wantErr: "invalid-negative.yaml:5: aws-efs/elastic: perGiBMonth must be a non-negative number"},
	{file: "invalid-duplicate.yaml", wantErr: "invalid-duplicate.yaml:8: azure-files/provisioned-v1 is priced twice (first at line 5)"},
	{file: "invalid-no-price.yaml", wantErr: "invalid-no-price.yaml:5: gcp-filestore/zonal: set at least one of"},
	{file: "invalid-type.yaml", wantErr: "invalid-type.yaml:7: cannot unmarshal !!str `cheap`"},
	{file: "invalid-apiversion.yaml", wantErr: "invalid-apiversion.yaml:1: apiVersion must be nfstune.io/v1alpha1"},
	{file: "invalid-no-currency.yaml", wantErr: "invalid-no-currency.yaml:1: currency is required"},
	{file: "invalid-syntax.yaml", wantErr: "invalid-syntax.yaml:4: did not find expected '-' indicator"},
}

func TestLoadPriceFiles(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	for _, tt := range priceFileTests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			_, err := LoadPrices(c, filepath.Join("testdata", tt.file))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), filepath.Join("testdata", tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// Every invalid-*.yaml in testdata is in the table, so that none is left untested.
func TestEveryPriceFixtureIsListed(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, tt := range priceFileTests {
		listed[tt.file] = true
	}
	for _, f := range files {
		if !listed[filepath.Base(f)] {
			t.Errorf("%s is not in priceFileTests", f)
		}
	}
}

func TestPricesOverrideAndRank(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	ps, err := LoadPrices(c, "testdata/valid-prices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := Need{Throughput: 1000 * MiB, Capacity: 2 * TiB, Access: Read}
	r := mustPlan(t, c, ps, n)
	if r.RankedBy != RankedByMixed {
		t.Errorf("rankedBy = %q, want %q", r.RankedBy, RankedByMixed)
	}
	// v1: 1000 MiB/s needs 8,984 GiB (100 + ceil(359.36) + ceil(539.04)) at 0.2 = 1,796.8.
	v1 := option(r, "azure-files", "provisioned-v1")
	if v1 == nil || v1.Provision.CapacityGiB != 8984 || v1.MonthlyCost == nil || !near(*v1.MonthlyCost, 1796.8) {
		t.Fatalf("v1 = %+v, want 8984 GiB costing 1796.8", v1)
	}
	// v2: 2,048 GiB x 0.1 + (5,048 - 3,000) IOPS x 0.01 + (1,000 - 100) MiB/s x 0.05 = 204.8 + 20.48 + 45.
	v2 := option(r, "azure-files", "provisioned-v2")
	if v2 == nil || v2.MonthlyCost == nil || !near(*v2.MonthlyCost, 270.28) {
		t.Fatalf("v2 = %+v, want cost 270.28", v2)
	}
	// ANF flexible: pool 2 TiB x 1024 x 0.15 + (1,000 - 128) x 0.1 = 307.2 + 87.2.
	flex := option(r, "azure-netapp-files", "flexible")
	if flex == nil || flex.MonthlyCost == nil || !near(*flex.MonthlyCost, 394.4) {
		t.Fatalf("flexible = %+v, want cost 394.4", flex)
	}
	for i, want := range []string{"azure-files/provisioned-v2", "azure-netapp-files/flexible", "azure-files/provisioned-v1"} {
		if got := r.Options[i].Service + "/" + r.Options[i].Tier; got != want {
			t.Errorf("rank %d = %s, want %s", i, got, want)
		}
	}
	if r.Options[3].MonthlyCost != nil {
		t.Errorf("unpriced options should follow priced ones, got %+v", r.Options[3])
	}

	ps, err = LoadPrices(c, "testdata/valid-prices.yaml", "testdata/valid-override.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r = mustPlan(t, c, ps, n)
	if got := r.Options[0].Service + "/" + r.Options[0].Tier; got != "azure-files/provisioned-v1" || !near(*r.Options[0].MonthlyCost, 89.84) {
		t.Errorf("after override first = %s costing %v, want azure-files/provisioned-v1 costing 89.84", got, *r.Options[0].MonthlyCost)
	}
	if !strings.Contains(r.PriceNote, "test fixture test-region 2026-11-01") {
		t.Errorf("price note = %q, want the source, region and date", r.PriceNote)
	}
}

// The price file shown in docs/plan.md is the tested example file.
func TestDocsPriceExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/plan.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok {
		t.Fatal("docs/plan.md has no yaml block")
	}
	want, err := os.ReadFile("testdata/example-prices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if block != string(want) {
		t.Errorf("docs/plan.md price example differs from testdata/example-prices.yaml:\n%s", block)
	}
}

func TestPricesCurrencyMismatch(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	eur := filepath.Join(t.TempDir(), "eur.yaml")
	b, err := os.ReadFile("testdata/valid-override.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(eur, []byte(strings.Replace(string(b), "USD", "EUR", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPrices(c, "testdata/valid-prices.yaml", eur); err == nil || !strings.Contains(err.Error(), "currency EUR differs") {
		t.Errorf("err = %v, want currency mismatch", err)
	}
}

func FuzzParsePriceList(f *testing.F) {
	for _, tt := range priceFileTests {
		b, err := os.ReadFile(filepath.Join("testdata", tt.file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	c, err := LoadCatalog()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := parsePriceList(c, "fuzz.yaml", b)
		if err == nil && l.Currency == "" {
			t.Error("accepted a price list without a currency")
		}
	})
}

// TestLoadPricesCapped: a price file is read like a policy, a regular file of at most
// hostfs.MaxConfigSize bytes; /dev/zero would otherwise be read until memory ran out.
func TestLoadPricesCapped(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", hostfs.MaxConfigSize)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]error{big: hostfs.ErrTooLarge, "/dev/zero": hostfs.ErrNotRegular} {
		if _, err := LoadPrices(c, file); !errors.Is(err, want) {
			t.Errorf("LoadPrices(%s) = %v, want %v", file, err, want)
		}
	}
}

// TestDefaultPrices: the built-in list parses, is dated, and refuses a price without its
// source or date.
func TestDefaultPrices(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	ps, err := DefaultPrices(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps.Lists) != 1 || ps.Lists[0].Date == "" || ps.Lists[0].Currency == "" {
		t.Errorf("built-in lists = %+v, want one, dated, with a currency", ps.Lists)
	}
	for key, p := range ps.ByTier {
		if p.Source == "" || p.Date == "" || p.From != BuiltinPrices {
			t.Errorf("%s: source %q, date %q, from %q", key, p.Source, p.Date, p.From)
		}
	}
	const head = "apiVersion: nfstune.io/v1alpha1\nkind: PriceList\ncurrency: USD\ndate: \"2026-11-27\"\nprices:\n"
	for _, tt := range []struct{ entry, want string }{
		{"  - {service: afs, tier: provisioned-v1, perGiBMonth: 0.1, date: \"2026-11-27\"}\n", "azure-files/provisioned-v1 (entry 1) has no source or no date"},
		{"  - {service: efs, tier: elastic, perGiBMonth: 0.1, source: https://example.com/efs}\n", "aws-efs/elastic (entry 1) has no source or no date"},
	} {
		if _, err := builtinPrices(c, []byte(head+tt.entry)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("builtinPrices(%q) = %v, want %q", tt.entry, err, tt.want)
		}
	}
	sourced := head + "  - {service: efs, tier: elastic, perGiBMonth: 0.1, source: https://example.com/efs, date: \"2026-11-27\"}\n"
	if ps, err := builtinPrices(c, []byte(sourced)); err != nil || ps.ByTier["aws-efs/elastic"].Source == "" {
		t.Errorf("a sourced, dated price: %v, %+v", err, ps)
	}
}

// TestPricesByUseNeedCapacity: a service billed by stored data has no cost when the need
// gives no capacity, rather than a cost of zero that would rank it first.
func TestPricesByUseNeedCapacity(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	list := "apiVersion: nfstune.io/v1alpha1\nkind: PriceList\ncurrency: USD\ndate: \"2026-11-26\"\nprices:\n" +
		"  - {service: efs, tier: elastic, perGiBMonth: 0.3, source: https://example.com/efs, date: \"2026-11-26\"}\n"
	ps, err := builtinPrices(c, []byte(list))
	if err != nil {
		t.Fatal(err)
	}
	r := mustPlan(t, c, ps, Need{Throughput: 1000 * MiB, Access: Read})
	efs := option(r, "aws-efs", "elastic")
	if efs == nil || efs.MonthlyCost != nil {
		t.Fatalf("without a capacity: %+v, want no monthly cost", efs)
	}
	if !slices.Contains(efs.Notes, "billed by stored data: give --capacity to price it") {
		t.Errorf("notes = %q, want the reason it has no price", efs.Notes)
	}
	if r.RankedBy != RankedByCapacity || strings.Contains(r.RankedBy, "no prices known") {
		t.Errorf("rankedBy = %q: prices are known, no option has one", r.RankedBy)
	}
	r = mustPlan(t, c, ps, Need{Throughput: 1000 * MiB, Capacity: 2 * TiB, Access: Read})
	if efs = option(r, "aws-efs", "elastic"); efs == nil || efs.MonthlyCost == nil || !near(*efs.MonthlyCost, 614.4) {
		t.Errorf("with 2 TiB: %+v, want 2,048 GiB x 0.3 = 614.4", efs)
	}
}
