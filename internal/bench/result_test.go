package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// TestReadResultKeysExact: a result file is compared as written; a key that only matches a
// field ignoring case (as encoding/json would take it) is refused with its line and the
// key meant, so a hand-edited file cannot put a figure in the wrong place silently.
func TestReadResultKeysExact(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, tt := range map[string]struct{ in, wantErr string }{
		"exact.json":     {in: `{"runs": [{"profile": "p", "job": "j", "read_mib_s": 100}]}`},
		"mis-cased.json": {in: "{\"runs\": [{\"profile\": \"p\", \"job\": \"j\",\n \"Read_MiB_s\": 100}]}", wantErr: `mis-cased.json:2: runs[0].Read_MiB_s: unknown key (did you mean "read_mib_s"?)`},
		"unknown.json":   {in: `{"runs": [{"profile": "p", "job": "j", "read_mbs": 100}]}`, wantErr: `unknown.json:1: runs[0].read_mbs: unknown key (did you mean "read_mib_s"?)`},
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(tt.in), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := ReadResult(path)
		if tt.wantErr == "" {
			if err != nil || r.Runs[0].ReadMiBs != 100 {
				t.Errorf("%s: %+v, %v", name, r, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: err = %v, want %q", name, err, tt.wantErr)
		}
	}
}

// TestTuningOfTLS: a result records the mount's transport security, so a run over TLS is
// told apart from one without.
func TestTuningOfTLS(t *testing.T) {
	t.Parallel()
	inv, err := inventory.Read(hostfs.Root("../inventory/testdata/synthetic-tls"), inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"0:70": "tls", "0:71": "mtls", "0:72": "none"}
	for i := range inv.Mounts {
		m := &inv.Mounts[i]
		tu := TuningOf(m, m.MountPoints[0])
		if tu.TransportSecurity != want[m.Device] {
			t.Errorf("%s: xprtsec %q, want %q", m.Device, tu.TransportSecurity, want[m.Device])
		}
		if d := tu.Describe(); strings.Contains(d, "xprtsec=") != (want[m.Device] != "none") {
			t.Errorf("%s: %q", m.Device, d)
		}
	}
}
