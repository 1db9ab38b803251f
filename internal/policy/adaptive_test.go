package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// TestParseAdaptiveRefused: bounds inverted, below one page, above the 1 GiB cap, not whole
// pages, a bad interval or an unknown key refuse the whole policy, naming the line and key.
func TestParseAdaptiveRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, body, wantErr string
	}{
		{"inverted", `readAheadAdaptive: {minKB: 8192, maxKB: 1024}`, `c.yaml:5: rules[1].readAheadAdaptive.minKB: 8192 is above maxKB 1024`},
		{"below one page", `readAheadAdaptive: {minKB: 2}`, `rules[1].readAheadAdaptive.minKB: 2 is out of range 4..1048576`},
		{"zero", `readAheadAdaptive: {maxKB: 0}`, `rules[1].readAheadAdaptive.maxKB: 0 is out of range 4..1048576`},
		{"above the cap", `readAheadAdaptive: {maxKB: 2097152}`, `rules[1].readAheadAdaptive.maxKB: 2097152 is out of range 4..1048576`},
		{"negative", `readAheadAdaptive: {minKB: -4}`, `rules[1].readAheadAdaptive.minKB: must not be negative`},
		{"not whole pages", `readAheadAdaptive: {minKB: 1026}`, `rules[1].readAheadAdaptive.minKB: 1026 is not a multiple of 4`},
		{"interval too short", `readAheadAdaptive: {interval: 100ms}`, `rules[1].readAheadAdaptive.interval: "100ms" is not a duration from 1s to 10m0s`},
		{"interval not a duration", `readAheadAdaptive: {interval: 5}`, `rules[1].readAheadAdaptive.interval: "5" is not a duration`},
		{"unknown key", `readAheadAdaptive: {min_kb: 1024}`, `rules[1].readAheadAdaptive.min_kb: unknown key (did you mean "minKB"? want one of interval, maxKB, minKB, observe)`},
		{"not a mapping", `readAheadAdaptive: true`, `rules[1].readAheadAdaptive: want a mapping`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ruleConfig("match: {mountpoint: /data/*}\n" + tt.body)
			p, err := Parse("c.yaml", []byte(cfg))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Parse:\n%s\nerror %v, want %q", cfg, err, tt.wantErr)
			}
			if p != nil {
				t.Errorf("a policy was returned with the error: %+v", p)
			}
		})
	}
}

// TestResolveAdaptive: the bounds of each mount, from the rule and the mount's rsize.
func TestResolveAdaptive(t *testing.T) {
	t.Parallel()
	pol, err := Parse("c.yaml", []byte(`apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {mountpoint: /default/*}
    readAheadAdaptive: {}
  - match: {mountpoint: /set/*}
    readAheadAdaptive: {minKB: 2048, maxKB: 8192, interval: 10s, observe: true}
  - match: {mountpoint: /narrow/*}
    readAheadAdaptive: {minKB: 128, maxKB: 512}
  - match: {mountpoint: /efs/*}
    readAheadAdaptive: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	efs := &inventory.Proxy{Kind: inventory.ProxyEFS, ReadAheadKB: 3840}
	for _, tt := range []struct {
		name  string
		mount inventory.Mount
		want  AdaptiveReadAhead
	}{
		{"defaults, 1 MiB rsize", inventory.Mount{MountPoints: []string{"/default/a"}, RSize: 1 << 20},
			AdaptiveReadAhead{MinKB: 1024, MaxKB: 15360, Interval: DefaultAdaptiveInterval}},
		{"defaults, 256 KiB rsize", inventory.Mount{MountPoints: []string{"/default/a"}, RSize: 256 << 10},
			AdaptiveReadAhead{MinKB: 256, MaxKB: 3840, Interval: DefaultAdaptiveInterval}},
		{"set", inventory.Mount{MountPoints: []string{"/set/a"}, RSize: 1 << 20},
			AdaptiveReadAhead{MinKB: 2048, MaxKB: 8192, Interval: 10 * time.Second, Observe: true}},
		// Never below one rsize: a cap under it is raised to it.
		{"bounds under one rsize", inventory.Mount{MountPoints: []string{"/narrow/a"}, RSize: 1 << 20},
			AdaptiveReadAhead{MinKB: 1024, MaxKB: 1024, Interval: DefaultAdaptiveInterval}},
		{"bounds over one rsize", inventory.Mount{MountPoints: []string{"/narrow/a"}, RSize: 64 << 10},
			AdaptiveReadAhead{MinKB: 128, MaxKB: 512, Interval: DefaultAdaptiveInterval}},
		// Never below one page: one rsize of 1 KiB would be stored as 0, read-ahead off.
		{"defaults, 1 KiB rsize", inventory.Mount{MountPoints: []string{"/default/a"}, RSize: 1024},
			AdaptiveReadAhead{MinKB: hostfs.MinReadAheadKB, MaxKB: 15, Interval: DefaultAdaptiveInterval}},
		{"defaults, 2 KiB rsize", inventory.Mount{MountPoints: []string{"/default/a"}, RSize: 2048},
			AdaptiveReadAhead{MinKB: hostfs.MinReadAheadKB, MaxKB: 30, Interval: DefaultAdaptiveInterval}},
		// efs-utils writes 15 x rsize itself: never below it.
		{"efs-utils' value is the floor", inventory.Mount{MountPoints: []string{"/efs/a"}, RSize: 256 << 10, Proxy: efs},
			AdaptiveReadAhead{MinKB: 3840, MaxKB: 3840, Interval: DefaultAdaptiveInterval}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := pol.Resolve(&tt.mount)
			if r.Adaptive == nil || *r.Adaptive != tt.want {
				t.Fatalf("Adaptive = %+v, want %+v", r.Adaptive, tt.want)
			}
			// apply, the udev helper and the audit ask the floor, as a minimum.
			if r.ReadAheadKB != tt.want.MinKB || r.ReadAheadRSizes != 0 || r.ReadAheadExact {
				t.Errorf("profile read-ahead %d (rsizes %d, exact %v), want %d as a minimum", r.ReadAheadKB, r.ReadAheadRSizes, r.ReadAheadExact, tt.want.MinKB)
			}
		})
	}
	if got := pol.AdaptiveInterval(); got != DefaultAdaptiveInterval {
		t.Errorf("AdaptiveInterval = %s, want %s", got, DefaultAdaptiveInterval)
	}
}

// TestDefaultAdaptive: a mount no rule gives a read-ahead is adaptive from one rsize up to
// its profile's value, unless defaults.readAheadAdaptive is false; a rule's fixed
// read-ahead, or its exactness, wins; EFS keeps efs-utils' fixed value.
func TestDefaultAdaptive(t *testing.T) {
	t.Parallel()
	parse := func(body string) *Policy {
		t.Helper()
		p, err := Parse("c.yaml", []byte("apiVersion: nfstune.io/v1alpha1\nkind: Policy\n"+body))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	withRules := parse(`rules:
  - match: {export: /fixed}
    readAheadKB: 4096
  - match: {export: /exact}
    readAheadExact: true
  - match: {export: /options}
    mountOptions: {nconnect: 8}
`)
	off := parse("defaults:\n  readAheadAdaptive: false\n")
	bounded := parse("defaults:\n  readAheadAdaptive: {maxKB: 4096, interval: 10s}\n")
	mount := func(export string, backend string) *inventory.Mount {
		return &inventory.Mount{Server: "10.0.0.1", Export: export, Backend: backend, RSize: 1 << 20}
	}
	for _, tt := range []struct {
		name   string
		pol    *Policy
		mount  *inventory.Mount
		want   *AdaptiveReadAhead
		wantKB int // the profile's read-ahead: the floor when adaptive, else the fixed value
	}{
		{"built-in", Default(), mount("/x", BackendGeneric), &AdaptiveReadAhead{MinKB: 1024, MaxKB: 15360, Interval: DefaultAdaptiveInterval}, 1024},
		{"built-in, Azure NetApp Files' value as the cap", Default(), mount("/x", BackendAzureNetAppFiles), &AdaptiveReadAhead{MinKB: 1024, MaxKB: 15360, Interval: DefaultAdaptiveInterval}, 1024},
		{"EFS keeps efs-utils' value", Default(), mount("/x", BackendAWSEFS), nil, 15360},
		{"a rule without read-ahead", withRules, mount("/options", BackendGeneric), &AdaptiveReadAhead{MinKB: 1024, MaxKB: 15360, Interval: DefaultAdaptiveInterval}, 1024},
		{"a rule's readAheadKB wins", withRules, mount("/fixed", BackendGeneric), nil, 4096},
		{"a rule's readAheadExact wins", withRules, mount("/exact", BackendGeneric), nil, 15360},
		{"turned off", off, mount("/x", BackendGeneric), nil, 15360},
		{"bounds of the default", bounded, mount("/x", BackendGeneric), &AdaptiveReadAhead{MinKB: 1024, MaxKB: 4096, Interval: 10 * time.Second}, 1024},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.pol.Resolve(tt.mount)
			switch {
			case tt.want == nil && r.Adaptive != nil:
				t.Errorf("Adaptive = %+v, want a fixed value", r.Adaptive)
			case tt.want != nil && (r.Adaptive == nil || *r.Adaptive != *tt.want):
				t.Errorf("Adaptive = %+v, want %+v", r.Adaptive, tt.want)
			}
			if r.ReadAheadKB != tt.wantKB {
				t.Errorf("profile read-ahead %d KiB, want %d", r.ReadAheadKB, tt.wantKB)
			}
		})
	}
	if got := Default().AdaptiveInterval(); got != DefaultAdaptiveInterval {
		t.Errorf("built-in AdaptiveInterval = %s, want %s", got, DefaultAdaptiveInterval)
	}
	if got := off.AdaptiveInterval(); got != 0 {
		t.Errorf("AdaptiveInterval with the default off = %s, want 0", got)
	}
	if _, err := Parse("c.yaml", []byte("apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults:\n  readAheadAdaptive: sometimes\n")); err == nil ||
		!strings.Contains(err.Error(), "defaults.readAheadAdaptive") {
		t.Errorf("defaults.readAheadAdaptive: sometimes: error %v, want one naming the key", err)
	}
}

// TestAdaptiveWrites: only an adaptive read-ahead that may write (the default's or a
// rule's), in neither its own observe nor an observe mode, needs the journal.
func TestAdaptiveWrites(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, config string
		want         bool
	}{
		{"the default", ruleConfig("match: {mountpoint: /data/*}"), true},
		{"none", "apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults:\n  readAheadAdaptive: false\n", false},
		{"the default in its own observe", "apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults:\n  readAheadAdaptive: {observe: true}\n", false},
		{"adaptive", ruleConfig("match: {mountpoint: /data/*}\nreadAheadAdaptive: {}"), true},
		{"its own observe", "apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults:\n  readAheadAdaptive: false\nrules:\n  - match: {mountpoint: /data/*}\n    readAheadAdaptive: {observe: true}\n", false},
		{"rule in observe", "apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults:\n  readAheadAdaptive: false\nrules:\n  - match: {mountpoint: /data/*}\n    mode: observe\n    readAheadAdaptive: {}\n", false},
		{"a rule of the default's in enforce, the policy in observe", "apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults:\n  mode: observe\nrules:\n  - match: {mountpoint: /data/*}\n    mode: enforce\n", true},
		{"a pinned rule in enforce, the policy in observe", "apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults:\n  mode: observe\nrules:\n  - match: {mountpoint: /data/*}\n    mode: enforce\n    readAheadKB: 1024\n", false},
		{"policy in observe", "apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults:\n  mode: observe\nrules:\n  - match: {mountpoint: /data/*}\n    readAheadAdaptive: {}\n", false},
		{"rule enforces in an observe policy", "apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults:\n  mode: observe\nrules:\n  - match: {mountpoint: /data/*}\n    mode: enforce\n    readAheadAdaptive: {}\n", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("c.yaml", []byte(tt.config))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.AdaptiveWrites(); got != tt.want {
				t.Errorf("AdaptiveWrites() = %v, want %v\n%s", got, tt.want, tt.config)
			}
		})
	}
}
