package agent

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

func TestFileWatch(t *testing.T) {
	t.Parallel()
	if (&fileWatch{}).changed() {
		t.Error("no file: want never changed")
	}
	p := filepath.Join(t.TempDir(), "policy.yaml")
	w := &fileWatch{path: p}
	if !w.changed() {
		t.Error("first call (file missing): want changed")
	}
	if w.changed() {
		t.Error("still missing: want unchanged")
	}
	if err := os.WriteFile(p, []byte("kind: Policy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !w.changed() {
		t.Error("file created: want changed")
	}
	if w.changed() {
		t.Error("file untouched: want unchanged")
	}
	if err := os.WriteFile(p, []byte("kind: Policy\n# longer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !w.changed() {
		t.Error("file rewritten: want changed")
	}
}

func TestLoadPolicyObserve(t *testing.T) {
	t.Parallel()
	m := &inventory.Mount{Device: "0:53", FSType: "nfs4"}
	pol, err := LoadPolicy("", "", false)
	if err != nil {
		t.Fatal(err)
	}
	if got := pol.Resolve(m).Mode; got != policy.ModeEnforce {
		t.Errorf("built-in policy: mode %q, want %q", got, policy.ModeEnforce)
	}
	if pol, err = LoadPolicy("", "", true); err != nil {
		t.Fatal(err)
	}
	if got := pol.Resolve(m).Mode; got != policy.ModeObserve {
		t.Errorf("observe: mode %q, want %q", got, policy.ModeObserve)
	}
	if _, err := LoadPolicy(filepath.Join(t.TempDir(), "missing.yaml"), "", false); err == nil {
		t.Error("a missing policy file was accepted")
	}
}

func TestRunListenError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = Run(context.Background(), Options{Root: "testdata/root", PID: 0, Listen: ln.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "listening on "+ln.Addr().String()) {
		t.Errorf("err = %v, want the listen error", err)
	}
	if err := Run(context.Background(), Options{Root: "testdata/root", PID: -1}); err == nil {
		t.Error("a negative pid was accepted")
	}
}

func TestReloadOnHangup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reload := reloadOnHangup(ctx)
	for range 2 {
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		select {
		case <-reload:
		case <-time.After(5 * time.Second):
			t.Fatal("SIGHUP did not ask for a reload")
		}
	}
}
