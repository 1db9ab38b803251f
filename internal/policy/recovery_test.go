package policy

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/inventory"
)

func TestRecoveryDefaultsOff(t *testing.T) {
	p, err := Load(filepath.Join("testdata", "valid-minimal.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := p.Recovery
	if r.Enabled || r.Mode != ModeObserve || r.Action != RecoveryShutdown || r.Window != DefaultRecoveryWindow {
		t.Errorf("recovery of a policy without the section = %+v, want off, observe, shutdown, %s", r, DefaultRecoveryWindow)
	}
	if r.Selects(&inventory.Mount{Server: "nfs.example.com"}) {
		t.Error("recovery that is off selects a mount")
	}
}

func TestRecoverySelects(t *testing.T) {
	p, err := Load(filepath.Join("testdata", "valid-full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := p.Recovery
	if !r.Enabled || r.Mode != ModeEnforce || r.Window != 3*time.Minute || len(r.Servers) != 2 {
		t.Fatalf("recovery = %+v", r)
	}
	for _, tt := range []struct {
		name string
		m    inventory.Mount
		want bool
	}{
		{"glob on the name", inventory.Mount{Server: "share-manager-pvc-1.longhorn-system.svc.cluster.local", ServerAddr: "10.0.9.9"}, true},
		{"glob ignores case", inventory.Mount{Server: "NFS.Default.SVC.Cluster.Local"}, true},
		{"cidr on the address", inventory.Mount{Server: "nfs.example.com", ServerAddr: "10.100.0.7"}, true},
		{"cidr on an address source", inventory.Mount{Server: "10.96.1.1"}, true},
		{"neither", inventory.Mount{Server: "nfs.example.com", ServerAddr: "192.168.1.5"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Selects(&tt.m); got != tt.want {
				t.Errorf("Selects(%s, %s) = %v, want %v", tt.m.Server, tt.m.ServerAddr, got, tt.want)
			}
		})
	}
	r.Servers = nil
	if !r.Selects(&inventory.Mount{Server: "anything"}) {
		t.Error("recovery without server patterns should select every server")
	}
}
