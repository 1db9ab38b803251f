package policy

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/inventory"
)

// configTests covers every testdata file: valid ones must parse, invalid ones must report
// each listed problem (file:line: key: message fragment), all at once.
var configTests = []struct {
	file    string
	wantErr []string
}{
	{file: "valid-minimal.yaml"},
	{file: "valid-full.yaml"},
	{file: docsExample},
	{file: "invalid-unknown-key.yaml", wantErr: []string{
		`invalid-unknown-key.yaml:6: rules[1].match.host: unknown key`,
		`invalid-unknown-key.yaml:7: rules[1].readahead: unknown key (did you mean "readAheadKB"?`,
	}},
	// Keys match exactly: a mis-cased key is refused with the key meant.
	{file: "invalid-miscased-key.yaml", wantErr: []string{
		`invalid-miscased-key.yaml:4: defaults.Mode: unknown key (did you mean "mode"?`,
		`invalid-miscased-key.yaml:6: rules[1].match.mountPoint: unknown key (did you mean "mountpoint"?`,
		`invalid-miscased-key.yaml:7: rules[1].readAheadKb: unknown key (did you mean "readAheadKB"?`,
	}},
	{file: "invalid-values.yaml", wantErr: []string{
		`invalid-values.yaml:5: rules[1].match.server: bad glob "nfs[1"`,
		`invalid-values.yaml:6: rules[1].match.cidr: bad CIDR "10.0.0.0/33"`,
		`invalid-values.yaml:7: rules[1].backend: unknown backend "ontap"`,
		`invalid-values.yaml:8: rules[1].workload: unknown workload "batch"`,
		`invalid-values.yaml:9: rules[1].readAheadKB: must not be negative, got -1`,
		`invalid-values.yaml:11: rules[1].mountOptions.nconnect: 0 is out of range 1..16`,
		`invalid-values.yaml:12: rules[1].mountOptions.rsize: 2097152 is above the Linux client's maximum`,
		`invalid-values.yaml:13: rules[1].mountOptions.wsize: 1000 is not a multiple of 4096`,
		`invalid-values.yaml:15: rules[2].mountOptions.nconnect: 17 is out of range 1..16`,
		`invalid-values.yaml:16: rules[2].mountOptions.extra: "noatime" has no effect on NFS mounts`,
		`invalid-values.yaml:17: rules[2].mode: unknown mode "sometimes"`,
	}},
	{file: "invalid-header.yaml", wantErr: []string{
		`invalid-header.yaml:1: apiVersion: unsupported version "nfstune.io/v2"`,
		`invalid-header.yaml:2: rules: want a list, got a mapping`,
		`invalid-header.yaml:1: kind: missing`,
	}},
	{file: "invalid-types.yaml", wantErr: []string{
		`invalid-types.yaml:4: rules[1].static: want true or false, got "yes"`,
		`invalid-types.yaml:6: rules[1].mountOptions.nconnect: want an integer, got "4"`,
		`invalid-types.yaml:7: rules[1].mountOptions.hard: want true or false, got "1"`,
		`invalid-types.yaml:8: rules[1].mountOptions.vers: unknown NFS version "5"`,
		`invalid-types.yaml:10: rules[1].sysctls.NotASysctl: not a sysctl nfstune sets`,
		`invalid-types.yaml:11: rules[1].sysctls.net.core.rmem_max: -5 is out of range`,
	}},
	{file: "invalid-recovery.yaml", wantErr: []string{
		`invalid-recovery.yaml:5: recovery.window: must be positive, got 0s`,
		`invalid-recovery.yaml:6: recovery.action: unknown action "umount" (want shutdown or report)`,
		`invalid-recovery.yaml:7: recovery.mode: unknown mode "always"`,
		`invalid-recovery.yaml:9: recovery.servers[0]: bad CIDR "nfs://10.0.0.5"`,
		`invalid-recovery.yaml:10: recovery.servers[1]: bad CIDR "10.0.0.0/33"`,
		`invalid-recovery.yaml:11: recovery.servers[2]: bad glob "nfs[1"`,
		`invalid-recovery.yaml:12: recovery.servers[3]: "share server" matches no server: " " is in no host name or address`,
	}},
	{file: "invalid-recovery-window.yaml", wantErr: []string{
		`invalid-recovery-window.yaml:5: recovery.window: must be positive, got -5m`,
		`invalid-recovery-window.yaml:6: recovery.servers: want a list, got "nfs.example.com"`,
	}},
	{file: "invalid-recovery-short.yaml", wantErr: []string{
		`invalid-recovery-short.yaml:4: recovery.window: 10s is shorter than 30s`,
		`invalid-recovery-short.yaml:5: recovery.enabled: want true or false, got "yes"`,
	}},
	{file: "invalid-syntax.yaml", wantErr: []string{`invalid-syntax.yaml: yaml: line 4`}},
}

// docsExample names the first yaml block of docs/policy.md, so the documented example is
// always a valid config.
const docsExample = "../../docs/policy.md"

// readConfig reads a testdata file, or the example out of the docs.
func readConfig(file string) ([]byte, error) {
	if file != docsExample {
		return os.ReadFile(filepath.Join("testdata", file))
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\n")
	if !ok {
		return nil, fmt.Errorf("%s: no yaml example", file)
	}
	example, _, ok := strings.Cut(rest, "```")
	if !ok {
		return nil, fmt.Errorf("%s: unterminated yaml example", file)
	}
	return []byte(example), nil
}

func TestParseFiles(t *testing.T) {
	t.Parallel()
	for _, tt := range configTests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			t.Parallel()
			b, err := readConfig(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Parse(filepath.Base(tt.file), b)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if p == nil || p.cat == nil {
					t.Fatal("Parse returned no policy")
				}
				return
			}
			if err == nil {
				t.Fatal("Parse succeeded, want errors")
			}
			msg := err.Error()
			for _, want := range tt.wantErr {
				if !strings.Contains(msg, want) {
					t.Errorf("error lacks %q; got:\n%s", want, msg)
				}
			}
			if got, want := strings.Count(msg, "\n")+1, len(tt.wantErr); got != want {
				t.Errorf("got %d problems, want %d:\n%s", got, want, msg)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	p, err := Load("testdata/valid-full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Workload != WorkloadSmallRandom || p.Mode != ModeObserve || len(p.Rules) != 3 {
		t.Errorf("defaults/rules not decoded: workload %q mode %q rules %d", p.Workload, p.Mode, len(p.Rules))
	}
	want := Match{CIDR: netip.MustParsePrefix("10.0.0.0/24"), Export: "/sasdata*"}
	if diff := cmp.Diff(want, p.Rules[0].Match, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("rule 1 match (-want +got):\n%s", diff)
	}
	if _, err := Load("testdata/does-not-exist.yaml"); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}

// TestLoadNoFile: no --config is the built-in policy; a blank name is a file name like any
// other, so a mistyped flag fails instead of tuning with the built-in profiles.
func TestLoadNoFile(t *testing.T) {
	t.Parallel()
	p, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if p.File != "" || p.Workload != WorkloadGeneral || p.Mode != ModeEnforce || len(p.Rules) != 0 {
		t.Errorf("Load(\"\") = file %q workload %q mode %q, %d rules; want the built-in policy", p.File, p.Workload, p.Mode, len(p.Rules))
	}
	if _, err := Load(" "); err == nil {
		t.Error(`Load(" ") succeeded, want an error reading the file " "`)
	}
}

func boolp(b bool) *bool { return &b }

func TestResolve(t *testing.T) {
	t.Parallel()
	full, err := Load("testdata/valid-full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		pol    *Policy
		mount  inventory.Mount
		rule   string
		want   Profile
		mode   Mode
		static bool
		// maxKB is the default adaptive read-ahead's cap (the profile's value; 0: fixed).
		maxKB int
	}{
		{
			name:  "built-in by inventory backend",
			pol:   Default(),
			mount: inventory.Mount{Server: "acct.file.core.windows.net", Export: "/acct/share", Backend: BackendAzureFiles, MountPoints: []string{"/mnt/a"}},
			rule:  RuleBuiltIn,
			mode:  ModeEnforce,
			// Adaptive by default: from one rsize (rsize unknown: 1 MiB) up to the profile's 15360.
			want: Profile{Backend: BackendAzureFiles, Workload: WorkloadGeneral, ReadAheadKB: 1024, Mount: MountOptions{
				Vers: "4.1", Proto: "tcp", NConnect: 4, RSize: 1 << 20, WSize: 1 << 20, Hard: boolp(true), ACTimeo: 30,
				Extra: []string{"noresvport", "sec=sys"},
			}},
			maxKB: 15360,
		},
		{
			name:  "unknown backend falls back to generic",
			pol:   Default(),
			mount: inventory.Mount{Server: "filer", Export: "/x", Backend: "mystery", RSize: 262144},
			rule:  RuleBuiltIn,
			mode:  ModeEnforce,
			// One rsize of 256 KiB up to 15 x it.
			want: Profile{Backend: BackendGeneric, Workload: WorkloadGeneral, ReadAheadKB: 256,
				Mount: MountOptions{Proto: "tcp", Hard: boolp(true)}},
			maxKB: 3840,
		},
		{
			// A policy without the default adaptive read-ahead (defaults.readAheadAdaptive: false).
			name:  "generic sequential-read keeps the workload's fixed value",
			pol:   &Policy{Workload: WorkloadSequentialRead, Mode: ModeEnforce, cat: Default().cat},
			mount: inventory.Mount{Server: "10.1.2.3", Export: "/x", Backend: BackendGeneric, RSize: 65536},
			rule:  RuleBuiltIn,
			mode:  ModeEnforce,
			want:  Profile{Backend: BackendGeneric, Workload: WorkloadSequentialRead, ReadAheadKB: 15360, Mount: MountOptions{Proto: "tcp", Hard: boolp(true)}},
		},
		{
			name:  "cidr and export rule sets backend, workload and overrides",
			pol:   full,
			mount: inventory.Mount{Server: "10.0.0.4", ServerAddr: "10.0.0.4", Export: "/sasdata1", Backend: BackendGeneric},
			rule:  "valid-full.yaml rule 1 (sas data)",
			mode:  ModeEnforce,
			want: Profile{Backend: BackendAzureNetAppFiles, Workload: WorkloadSequentialRead, ReadAheadKB: 16384,
				Mount:      MountOptions{Vers: "3", Proto: "tcp", NConnect: 8, RSize: 262144, WSize: 262144, Hard: boolp(true), Timeo: 600, Retrans: 2},
				Sysctls:    map[string]int64{"sunrpc.tcp_slot_table_entries": 128},
				SysctlsMax: map[string]int64{"sunrpc.tcp_max_slot_table_entries": 128},
			},
		},
		{
			name:   "server glob and mountpoint glob, static",
			pol:    full,
			mount:  inventory.Mount{Server: "ACCT.file.core.windows.net", Export: "/acct/tools", Backend: BackendAzureFiles, MountPoints: []string{"/srv/x", "/mnt/tools/eda"}},
			rule:   "valid-full.yaml rule 2",
			mode:   ModeObserve,
			static: true,
			want: Profile{Backend: BackendAzureFiles, Workload: WorkloadStaticTools, ReadAheadKB: 1024, Mount: MountOptions{
				Vers: "4.1", Proto: "tcp", NConnect: 4, RSize: 1 << 20, WSize: 1 << 20, Hard: boolp(true), ACTimeo: 300, NoCTO: true,
				Extra: []string{"noresvport"},
			}},
			maxKB: 15360,
		},
		{
			name:  "address outside the cidr falls through to the catch-all rule",
			pol:   full,
			mount: inventory.Mount{Server: "10.0.1.4", ServerAddr: "10.0.1.4", Export: "/sasdata1", Backend: BackendGeneric},
			rule:  "valid-full.yaml rule 3",
			mode:  ModeObserve,
			// rsize unknown: 1 MiB up to 15 x 1 MiB.
			want: Profile{Backend: BackendGeneric, Workload: WorkloadSmallRandom, ReadAheadKB: 1024,
				Mount:      MountOptions{Proto: "tcp", Hard: boolp(true)},
				SysctlsMax: map[string]int64{"sunrpc.tcp_max_slot_table_entries": 128}},
			maxKB: 15360,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.pol.Resolve(&tt.mount)
			if got.Rule != tt.rule || got.Mode != tt.mode || got.Static != tt.static {
				t.Errorf("rule %q mode %q static %v, want %q %q %v", got.Rule, got.Mode, got.Static, tt.rule, tt.mode, tt.static)
			}
			if diff := cmp.Diff(tt.want, got.Profile); diff != "" {
				t.Errorf("profile (-want +got):\n%s", diff)
			}
			switch {
			case tt.maxKB == 0 && got.Adaptive != nil:
				t.Errorf("adaptive read-ahead %+v, want the fixed value", got.Adaptive)
			case tt.maxKB > 0 && (got.Adaptive == nil || got.Adaptive.MinKB != tt.want.ReadAheadKB || got.Adaptive.MaxKB != tt.maxKB):
				t.Errorf("adaptive read-ahead %+v, want %d..%d KiB", got.Adaptive, tt.want.ReadAheadKB, tt.maxKB)
			}
		})
	}
}

// TestReadAheadRules: a config rule's readAheadKB replaces the derived target and
// readAheadRSizes replaces a fixed one; readAheadExact is carried to the profile.
func TestReadAheadRules(t *testing.T) {
	t.Parallel()
	pol, err := Parse("ra.yaml", []byte(`apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {export: /swept}
    readAheadKB: 1024
    readAheadExact: true
  - match: {export: /anf}
    backend: azure-netapp-files
    readAheadRSizes: 4
  - match: {export: /fixed}
    readAheadKB: 2048
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		export    string
		wantKB    int
		wantRS    int
		wantExact bool
	}{
		{"/swept", 1024, 0, true},
		{"/anf", 4 * 256, 4, false},
		{"/fixed", 2048, 0, false},
		{"/other", 256, 0, false}, // no read-ahead of its own: the default adaptive's floor, one rsize
	}
	for _, tt := range tests {
		got := pol.Resolve(&inventory.Mount{Server: "10.0.0.1", Export: tt.export, RSize: 262144})
		if got.ReadAheadKB != tt.wantKB || got.ReadAheadRSizes != tt.wantRS || got.ReadAheadExact != tt.wantExact {
			t.Errorf("%s: read-ahead %d KiB, rsizes %d, exact %v; want %d, %d, %v", tt.export,
				got.ReadAheadKB, got.ReadAheadRSizes, got.ReadAheadExact, tt.wantKB, tt.wantRS, tt.wantExact)
		}
	}
	if _, err := Parse("bad.yaml", []byte("apiVersion: nfstune.io/v1alpha1\nkind: Policy\nrules:\n  - readAheadRSizes: 0\n")); err == nil ||
		!strings.Contains(err.Error(), "readAheadRSizes") {
		t.Errorf("readAheadRSizes: 0 accepted or badly reported: %v", err)
	}
}

func TestReadAheadFor(t *testing.T) {
	t.Parallel()
	p := Profile{ReadAheadRSizes: 15}
	for rsize, want := range map[int]int{1 << 20: 15360, 262144: 3840, 65536: 960, 0: 15360} {
		if got := p.ReadAheadFor(rsize); got != want {
			t.Errorf("15 x rsize %d = %d KiB, want %d", rsize, got, want)
		}
	}
	p.Mount.RSize = 65536
	if got := p.ReadAheadFor(0); got != 960 {
		t.Errorf("unknown rsize with a profile rsize of 64 KiB: %d KiB, want 960", got)
	}
	// One rsize of 1 or 2 KiB is less than a page, which the kernel would store as 0.
	for rsize, want := range map[int]int{1024: 4, 2048: 4, 4096: 4} {
		if got := (Profile{ReadAheadRSizes: 1}).ReadAheadFor(rsize); got != want {
			t.Errorf("1 x rsize %d = %d KiB, want %d (one page)", rsize, got, want)
		}
	}
	if got := (Profile{ReadAheadKB: 4096}).ReadAheadFor(65536); got != 4096 {
		t.Errorf("fixed read-ahead: %d, want 4096", got)
	}
}

func TestReadAheadChange(t *testing.T) {
	t.Parallel()
	fixed := Profile{ReadAheadKB: 15360}
	derived := Profile{ReadAheadKB: 15360, ReadAheadRSizes: 15}
	swept := Profile{ReadAheadKB: 1024, ReadAheadExact: true}
	const rsize = 1 << 20
	tests := []struct {
		name  string
		p     Profile
		cur   int
		exact bool
		want  bool
	}{
		{"no opinion", Profile{}, 128, false, false},
		{"already there", fixed, 15360, false, false},
		{"fixed raises any lower value", fixed, 1024, false, true},
		{"fixed keeps a higher value", fixed, 16384, false, false},
		{"fixed lowers with --exact", fixed, 16384, true, true},
		{"derived raises the kernel default", derived, 128, false, true},
		{"derived raises less than one rsize", derived, 512, false, true},
		{"derived keeps a chosen value", derived, 1024, false, false},
		{"derived raises a chosen value with --exact", derived, 1024, true, true},
		{"derived keeps a higher value", derived, 16384, false, false},
		{"exact profile lowers", swept, 15360, false, true},
		{"exact profile raises", swept, 128, false, true},
		{"exact profile already there", swept, 1024, false, false},
	}
	for _, tt := range tests {
		if got := tt.p.ReadAheadChange(tt.cur, rsize, tt.exact); got != tt.want {
			t.Errorf("%s: ReadAheadChange(%d) = %v, want %v", tt.name, tt.cur, got, tt.want)
		}
	}
	// rsize unknown: only the kernel default counts as unchosen.
	if !derived.ReadAheadChange(128, 0, false) || derived.ReadAheadChange(512, 0, false) {
		t.Error("with rsize unknown, want 128 raised and 512 kept")
	}
}

func TestCatalogComplete(t *testing.T) {
	t.Parallel()
	p := Default()
	for _, b := range Backends() {
		info, ok := p.Backend(b)
		if !ok || info.Source == "" || info.Description == "" || info.MaxNConnect < 1 || info.MaxNConnect > MaxNConnect {
			t.Errorf("backend %q: incomplete facts %+v", b, info)
		}
		for _, w := range Workloads() {
			prof, err := p.Profile(b, w)
			if err != nil {
				t.Fatalf("Profile(%s, %s): %v", b, w, err)
			}
			if prof.Mount.NConnect > info.MaxNConnect {
				t.Errorf("%s/%s: nconnect %d above the backend's useful maximum %d", b, w, prof.Mount.NConnect, info.MaxNConnect)
			}
			if info.MaxRSize > 0 && (prof.Mount.RSize > info.MaxRSize || prof.Mount.WSize > info.MaxRSize) {
				t.Errorf("%s/%s: rsize/wsize above the backend's maximum", b, w)
			}
			if len(info.Versions) > 0 && prof.Mount.Vers != "" && !contains(info.Versions, prof.Mount.Vers) {
				t.Errorf("%s/%s: vers %s not supported by the backend %v", b, w, prof.Mount.Vers, info.Versions)
			}
			if w == WorkloadSequentialRead && prof.ReadAheadKB < 15360 {
				t.Errorf("%s/%s: read-ahead %d below 15360", b, w, prof.ReadAheadKB)
			}
		}
	}
	if _, err := p.Profile("nope", WorkloadGeneral); err == nil {
		t.Error("unknown backend accepted")
	}
	if _, err := p.Profile(BackendGeneric, "nope"); err == nil {
		t.Error("unknown workload accepted")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestMountOptionsList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   MountOptions
		want []string
	}{
		{name: "empty", in: MountOptions{}, want: nil},
		{name: "soft", in: MountOptions{Hard: boolp(false), Timeo: 100}, want: []string{"soft", "timeo=100"}},
		{name: "all in order", in: MountOptions{
			Extra: []string{"noresvport"}, NoLock: true, NoCTO: true, ACTimeo: 600, Retrans: 2, Timeo: 600, Hard: boolp(true),
			WSize: 65536, RSize: 65536, NConnect: 8, Proto: "tcp", Vers: "3",
		}, want: []string{"vers=3", "proto=tcp", "nconnect=8", "rsize=65536", "wsize=65536", "hard", "timeo=600", "retrans=2", "actimeo=600", "nocto", "nolock", "noresvport"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, tt.in.List()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSysctls(t *testing.T) {
	t.Parallel()
	pol, err := Parse("c.yaml", []byte(`apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {server: big}
    sysctls: {sunrpc.tcp_slot_table_entries: 256}
    sysctlsMax: {sunrpc.tcp_max_slot_table_entries: 64}
`))
	if err != nil {
		t.Fatal(err)
	}
	inv := &inventory.Inventory{Mounts: []inventory.Mount{
		{Server: "10.1.1.1", Backend: BackendAzureNetAppFiles, Export: "/a"},
		{Server: "big", Backend: BackendAzureNetAppFiles, Export: "/b"},
		{Server: "x.file.core.windows.net", Backend: BackendAzureFiles, Export: "/c"},
	}}
	if diff := cmp.Diff(map[string]int64{"sunrpc.tcp_slot_table_entries": 256}, pol.Sysctls(inv)); diff != "" {
		t.Errorf("Sysctls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{"sunrpc.tcp_max_slot_table_entries": 64}, pol.SysctlsMax(inv)); diff != "" {
		t.Errorf("SysctlsMax (-want +got):\n%s", diff)
	}
	if got := Default().Sysctls(&inventory.Inventory{}); len(got) != 0 {
		t.Errorf("no mounts, got sysctls %v", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, tt := range configTests {
		if b, err := readConfig(tt.file); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse("fuzz.yaml", b)
		if err == nil {
			p.Resolve(&inventory.Mount{Server: "10.0.0.1", ServerAddr: "10.0.0.1", Export: "/x", MountPoints: []string{"/mnt/x"}})
		}
	})
}

func TestResolveAs(t *testing.T) {
	t.Parallel()
	pol, err := Parse("c.yaml", []byte(`apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {server: "10.0.0.*"}
    backend: azure-netapp-files
    workload: static-tools
    mode: observe
    mountOptions: {nconnect: 4}
`))
	if err != nil {
		t.Fatal(err)
	}
	m := &inventory.Mount{Server: "10.0.0.9", Export: "/x"}
	got := pol.ResolveAs(m, "", WorkloadSequentialRead)
	if got.Backend != BackendAzureNetAppFiles || got.Workload != WorkloadSequentialRead || got.Mode != ModeObserve {
		t.Errorf("forced workload: got %s/%s mode %s", got.Backend, got.Workload, got.Mode)
	}
	if got.Mount.NConnect != 4 || got.Mount.NoCTO || got.Static {
		t.Errorf("rule overrides must still apply and static must follow the forced workload: %+v static %v", got.Mount, got.Static)
	}
	if got := pol.ResolveAs(m, BackendAWSEFS, ""); got.Backend != BackendAWSEFS || got.Workload != WorkloadStaticTools || got.Mount.Vers != "4.1" {
		t.Errorf("forced backend: got %s/%s vers %q", got.Backend, got.Workload, got.Mount.Vers)
	}
	if got := pol.Resolve(&inventory.Mount{Server: "10.0.1.9"}); got.Rule != RuleBuiltIn || got.Backend != BackendGeneric {
		t.Errorf("no rule: got %s %s", got.Rule, got.Backend)
	}
}

// ruleConfig is a config with one rule whose body is given, indented under "rules: - ".
func ruleConfig(body string) string {
	return "apiVersion: nfstune.io/v1alpha1\nkind: Policy\nrules:\n  - " + strings.ReplaceAll(strings.TrimSpace(body), "\n", "\n    ") + "\n"
}

// TestParseRejectsUnsafeValues covers values that would corrupt what apply writes (fstab,
// sysctls) or exceed what nfstune measures: each must fail with a clear message.
func TestParseRejectsUnsafeValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, config, wantErr string
	}{
		{"newline in option", ruleConfig(`mountOptions: {extra: ["noresvport\nnfsvers=2"]}`), `"noresvport\nnfsvers=2" is not a single mount option`},
		{"comma in option", ruleConfig(`mountOptions: {extra: ["a,b"]}`), `"a,b" is not a single mount option`},
		{"hash in option", ruleConfig(`mountOptions: {extra: ["a#b"]}`), `"a#b" is not a single mount option`},
		{"quote in option", ruleConfig(`mountOptions: {extra: ["sec='sys'"]}`), `is not a single mount option`},
		{"double quote in option", ruleConfig(`mountOptions: {extra: ["a\"b"]}`), `is not a single mount option`},
		{"control byte in option", ruleConfig(`mountOptions: {extra: ["a\x01b"]}`), `"a\x01b" is not a single mount option`},
		{"nbsp in option", ruleConfig(`mountOptions: {extra: ["a\u00a0b"]}`), `is not a single mount option`},
		{"empty value", ruleConfig(`mountOptions: {extra: ["sec="]}`), `"sec=" is not a single mount option`},
		{"read-ahead above bench's cap", ruleConfig(`readAheadKB: 2147483647`), `readAheadKB: 2147483647 is out of range 0..1048576`},
		{"read-ahead below one page", ruleConfig(`readAheadKB: 2`), `readAheadKB: 2 is below one page (4 KiB)`},
		{"sysctl not about NFS", ruleConfig(`sysctls: {kernel.panic: 1}`), `sysctls.kernel.panic: not a sysctl nfstune sets`},
		{"sysctl max not about NFS", ruleConfig(`sysctlsMax: {vm.drop_caches: 3}`), `sysctlsMax.vm.drop_caches: not a sysctl nfstune sets`},
		{"sysrq", ruleConfig(`sysctls: {kernel.sysrq: 1}`), `not a sysctl nfstune sets`},
		{"slot table too large", ruleConfig(`sysctls: {sunrpc.tcp_slot_table_entries: 65537}`), `65537 is out of range 2..65536`},
		{"slot table too small", ruleConfig(`sysctlsMax: {sunrpc.tcp_max_slot_table_entries: 1}`), `1 is out of range 2..65536`},
		{"socket buffer too large", ruleConfig(`sysctls: {net.core.rmem_max: 4294967296}`), `4294967296 is out of range`},
		{"second document", ruleConfig(`name: a`) + "---\napiVersion: nfstune.io/v1alpha1\nkind: Policy\n", `more than one YAML document`},
		{"too large", ruleConfig(`name: a`) + "# " + strings.Repeat("x", MaxConfigSize) + "\n", `larger than`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tt.config))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Parse:\n%s\nerror %v, want %q", tt.config, err, tt.wantErr)
			}
		})
	}
	// The same options without the unsafe bytes are accepted.
	if _, err := Parse("c.yaml", []byte(ruleConfig(`mountOptions: {extra: [noresvport, sec=sys, "x-systemd.automount", "lookupcache=pos"]}`))); err != nil {
		t.Errorf("safe options rejected: %v", err)
	}
	// Every sysctl the allow-list names is accepted at both ends of its range.
	for _, name := range KnownSysctls() {
		r, _ := SysctlLimit(name)
		for _, v := range []int64{r.Min, r.Max} {
			if _, err := Parse("c.yaml", []byte(ruleConfig(fmt.Sprintf("sysctls: {%s: %d}", name, v)))); err != nil {
				t.Errorf("%s = %d rejected: %v", name, v, err)
			}
		}
	}
}

// TestTransportSecurityRule: a rule's transportSecurity reaches the resolved profile of the
// mounts it matches, tls or mtls only; any other value, "none" included, is an error at its
// line.
func TestTransportSecurityRule(t *testing.T) {
	t.Parallel()
	pol, err := Parse("tls.yaml", []byte(`apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {export: /secure}
    transportSecurity: tls
  - match: {export: /mutual}
    transportSecurity: mtls
`))
	if err != nil {
		t.Fatal(err)
	}
	for export, want := range map[string]string{"/secure": "tls", "/mutual": "mtls", "/other": ""} {
		if got := pol.Resolve(&inventory.Mount{Server: "10.0.0.1", Export: export}).TransportSecurity; got != want {
			t.Errorf("%s: transport security %q, want %q", export, got, want)
		}
	}
	for _, bad := range []string{"none", "ssl", "TLS", "true"} {
		_, err := Parse("bad.yaml", []byte("apiVersion: nfstune.io/v1alpha1\nkind: Policy\nrules:\n  - transportSecurity: "+bad+"\n"))
		if err == nil || !strings.Contains(err.Error(), "bad.yaml:4: rules[1].transportSecurity: unknown transport security") {
			t.Errorf("transportSecurity: %s accepted or badly reported: %v", bad, err)
		}
	}
}
