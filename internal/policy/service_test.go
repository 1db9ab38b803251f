package policy

import (
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/inventory"
)

func TestRuleService(t *testing.T) {
	t.Parallel()
	p, err := Parse("config.yaml", []byte(`apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - name: anf-data
    match: {server: "10.2.0.4", export: "/data"}
    backend: azure-netapp-files
    service: {name: anf, tier: premium, capacity: 4000GiB}
  - match: {server: "10.2.0.4"}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := p.Resolve(&inventory.Mount{Server: "10.2.0.4", Export: "/data", Version: "3"})
	if r.Service == nil {
		t.Fatal("no service resolved for the rule's mount")
	}
	// 4,000 GiB at Premium: 64 MiB/s per TiB x 4000/1024 = 250 MiB/s (nfstune plan show).
	want := Service{Name: "azure-netapp-files", Tier: "premium", Capacity: "4000GiB",
		ReadBytesPerSecond: 250 << 20, WriteBytesPerSecond: 250 << 20}
	if *r.Service != want {
		t.Errorf("service = %+v, want %+v", *r.Service, want)
	}
	if r := p.Resolve(&inventory.Mount{Server: "10.2.0.4", Export: "/other", Version: "3"}); r.Service != nil {
		t.Errorf("rule 2 names no service, got %+v", *r.Service)
	}
}

func TestRuleServiceRejected(t *testing.T) {
	t.Parallel()
	for service, want := range map[string]string{
		`{name: anf, tier: premium}`:                          "want name and capacity",
		`{name: nas9000, capacity: 4TiB}`:                     "nas9000",
		`{name: anf, tier: premium, capacity: lots}`:          "rules[1].service.capacity",
		`{name: anf, capacity: 4TiB}`:                         "name one with --tier",
		`{name: anf, tier: premium, capacity: 4TiB, iops: 9}`: "rules[1].service.iops: unknown key",
		`azure-files`: "want a mapping",
	} {
		_, err := Parse("config.yaml", []byte("apiVersion: nfstune.io/v1alpha1\nkind: Policy\nrules:\n  - service: "+service+"\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("service: %s: err = %v, want it to contain %q", service, err, want)
		}
	}
}
