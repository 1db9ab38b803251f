package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/golden"
	"github.com/nfstune/nfstune/internal/plan"
)

// Set UPDATE_GOLDEN=1 to rewrite testdata/plan/*.golden from the current output.
var planGoldenTests = []struct {
	name     string
	args     []string
	wantCode int
}{
	{name: "plan-2gibps", args: []string{"plan", "--throughput", "2GiB/s", "--capacity", "10TiB", "--client-nic", "12.5Gbps"}},
	{name: "plan-2gibps-json", args: []string{"plan", "--throughput", "2GiB/s", "--capacity", "10TiB", "--client-nic", "12.5Gbps", "-o", "json"}},
	{name: "plan-priced", args: []string{"plan", "--throughput", "1000MiB/s", "--capacity", "2TiB", "--iops", "20000",
		"--clients", "1", "--prices", "testdata/plan/prices.yaml"}},
	{name: "plan-write", args: []string{"plan", "--throughput", "3GiB/s", "--access", "write", "--client-nic", "25Gbps"}},
	{name: "plan-nothing-fits", args: []string{"plan", "--throughput", "100GiB/s"}, wantCode: ExitIssues},
	{name: "plan-nothing-fits-json", args: []string{"plan", "--throughput", "30GiB/s", "--capacity", "2PiB", "-o", "json"}, wantCode: ExitIssues},
	{name: "show-azure-files-4000", args: []string{"plan", "show", "--service", "azure-files", "--tier", "provisioned-v1", "--capacity", "4000GiB"}},
	{name: "show-anf-4000", args: []string{"plan", "show", "--service", "anf", "--capacity", "4000GiB", "--client-nic", "25Gbps"}},
	{name: "show-anf-4000-json", args: []string{"plan", "show", "--service", "anf", "--tier", "premium", "--capacity", "4000GiB", "-o", "json"}},
	{name: "show-below-minimum", args: []string{"plan", "show", "--service", "afs", "--capacity", "20GiB"}, wantCode: ExitIssues},
}

func runPlanCLI(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRoot(IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	root.SetArgs(args)
	err = root.ExecuteContext(context.Background())
	return out.String(), err
}

func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var exit *ExitError
	if errors.As(err, &exit) {
		return exit.Code
	}
	return -1
}

func TestPlanGolden(t *testing.T) {
	t.Parallel()
	for _, tt := range planGoldenTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := runPlanCLI(t, tt.args...)
			if got := exitCode(err); got != tt.wantCode {
				t.Fatalf("exit code %d (%v), want %d", got, err, tt.wantCode)
			}
			golden.Check(t, filepath.Join("testdata", "plan", tt.name+".golden"), []byte(out))
			if strings.HasSuffix(tt.name, "-json") && !json.Valid([]byte(out)) {
				t.Errorf("output is not valid JSON")
			}
		})
	}
}

// The golden outputs carry the published numbers, not only whatever the code printed.
func TestPlanGoldenFacts(t *testing.T) {
	t.Parallel()
	facts := map[string][]string{
		"show-azure-files-4000": {"share 4,000 GiB", "500 MiB/s", "7,000 (12,000)"},
		"show-anf-4000":         {"62.5 MiB/s", "250 MiB/s", "500 MiB/s", "pool 4 TiB, volume 4,000 GiB"},
		// Azure NetApp Files Premium: a 32 TiB pool at 0.000403 USD per GiB-hour, 730 hours a month.
		"plan-2gibps": {"share 19,467 GiB", "4/2 (nconnect=4)", "Ranked by monthly cost, then provisioned capacity",
			"9,640.02 USD", "prices in USD per month from nfstune built-in price list"},
		"plan-priced":       {"Ranked by monthly cost, then provisioned capacity", "USD", "one client needs nconnect=4", "aws-efs/provisioned: 1 client reaches 500 MiB/s at most"},
		"plan-nothing-fits": {"azure-files/provisioned-v1: needs 102,400 MiB/s, the largest share", "aws-efs/elastic: needs 102,400 MiB/s, a file system gives 20,480 MiB/s"},
	}
	for name, want := range facts {
		b, err := os.ReadFile(filepath.Join("testdata", "plan", name+".golden"))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s.golden lacks %q", name, w)
			}
		}
	}
}

func TestPlanErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "ambiguous size", args: []string{"plan", "--throughput", "1GiB/s", "--capacity", "10T"}, want: "write TiB (powers of 1024) or TB"},
		{name: "ambiguous rate", args: []string{"plan", "--throughput", "2G/s"}, want: "--throughput: ambiguous unit"},
		{name: "size as rate", args: []string{"plan", "--throughput", "2GiB"}, want: "not a throughput"},
		{name: "bits ambiguity", args: []string{"plan", "--throughput", "1GiB/s", "--client-nic", "10Gb/s"}, want: "lower-case b means bits"},
		{name: "two errors at once", args: []string{"plan", "--throughput", "fast", "--iops", "lots"}, want: "--iops: invalid count"},
		{name: "zero clients", args: []string{"plan", "--throughput", "1GiB/s", "--clients", "0"}, want: "want 1 to 1000000 clients"},
		{name: "bad access", args: []string{"plan", "--throughput", "1GiB/s", "--access", "both"}, want: "--access: want read or write"},
		{name: "nothing asked", args: []string{"plan"}, want: "give at least one of"},
		{name: "bad output", args: []string{"plan", "--throughput", "1GiB/s", "-o", "csv"}, want: `invalid argument "csv" for "-o, --output" flag`},
		{name: "price file line", args: []string{"plan", "--throughput", "1GiB/s", "--prices", "testdata/plan/bad-prices.yaml"},
			want: `testdata/plan/bad-prices.yaml:8: prices[0].perTBMonth: unknown key (did you mean "perGiBMonth"?)`},
		{name: "missing price file", args: []string{"plan", "--throughput", "1GiB/s", "--prices", "testdata/plan/none.yaml"}, want: "no such file"},
		{name: "show needs service", args: []string{"plan", "show", "--capacity", "1TiB"}, want: "needs --service and --capacity"},
		{name: "show unknown service", args: []string{"plan", "show", "--service", "s3", "--capacity", "1TiB"}, want: "want one of azure-files"},
		{name: "show unknown tier", args: []string{"plan", "show", "--service", "efs", "--tier", "bursting", "--capacity", "1TiB"}, want: "want one of elastic, provisioned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := runPlanCLI(t, tt.args...)
			if got := exitCode(err); got != ExitError2 {
				t.Fatalf("exit code %d (%v), want %d", got, err, ExitError2)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// Every "$ nfstune plan ..." example in docs/plan.md shows the command's real output.
func TestPlanDocsExamples(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/plan.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(doc), "```\n$ nfstune ")
	if len(blocks) < 6 {
		t.Fatalf("found %d examples in docs/plan.md, want at least 5", len(blocks)-1)
	}
	for _, b := range blocks[1:] {
		b, _, _ = strings.Cut(b, "```")
		cmdLine, want, _ := strings.Cut(b, "\n")
		t.Run(cmdLine, func(t *testing.T) {
			t.Parallel()
			args := strings.Fields(cmdLine)
			for i, a := range args {
				if a == "prices.yaml" {
					args[i] = "../plan/testdata/example-prices.yaml"
				}
			}
			got, err := runPlanCLI(t, args...)
			if err != nil {
				got += "nfstune: " + err.Error() + "\n"
			}
			if got != want {
				t.Errorf("docs/plan.md output differs:\n--- got\n%s\n--- docs\n%s", got, want)
			}
		})
	}
}

// TestPlanPriceLists: without --prices the built-in list is used and named with its date;
// a price file replaces it, so a file in another currency is no clash.
func TestPlanPriceLists(t *testing.T) {
	t.Parallel()
	out, errOut, code := runVerb(t, "plan", "--throughput", "1GiB/s", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		PriceNote  string `json:"priceNote"`
		PriceLists []struct{ Source, Date, Currency string }
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.PriceLists) != 1 || r.PriceLists[0].Source != "nfstune built-in price list" || r.PriceLists[0].Date == "" ||
		!strings.Contains(r.PriceNote, r.PriceLists[0].Date) {
		t.Errorf("default price lists = %+v, note %q; want the dated built-in list", r.PriceLists, r.PriceNote)
	}
	eur := filepath.Join(t.TempDir(), "eur.yaml")
	if err := os.WriteFile(eur, []byte("apiVersion: nfstune.io/v1alpha1\nkind: PriceList\ncurrency: EUR\ndate: \"2026-11-01\"\nsource: contract\nprices:\n  - {service: afs, tier: provisioned-v1, perGiBMonth: 0.2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runVerb(t, "plan", "--throughput", "1GiB/s", "--prices", eur)
	if code != ExitOK || !strings.Contains(out, "EUR") || strings.Contains(out, "built-in") {
		t.Errorf("with an EUR file: exit %d (%s)\n%s", code, errOut, out)
	}
}

// TestServiceHelpListsCatalog checks that the help of each command with --service lists
// every service plan models, though the catalog is decoded only when help is shown.
func TestServiceHelpListsCatalog(t *testing.T) {
	cat, err := plan.LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"plan", "show", "--help"}, {"help", "bench", "report"}, {"bench", "report", "-h"}} {
		root := NewRoot(IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
		cmd, _, err := root.Find(args[:len(args)-1])
		if args[0] == "help" {
			cmd, _, err = root.Find(args[1:])
		}
		if err != nil {
			t.Fatal(err)
		}
		if f := cmd.Flags().Lookup("service"); f == nil || strings.Contains(f.Usage, cat.Services[0].Name) {
			t.Fatalf("%v: --service's help is made before help is asked for: %+v", args, f)
		}
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		line := ""
		for l := range strings.Lines(out.String()) {
			if strings.Contains(l, "--service") && strings.Contains(l, "backend") {
				line = l
			}
		}
		for _, s := range cat.Services {
			if !strings.Contains(line, s.Name) {
				t.Errorf("%v: --service help %q lacks %s", args, line, s.Name)
			}
		}
	}
}
