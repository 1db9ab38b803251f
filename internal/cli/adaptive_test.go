package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestApplyRefusesBadAdaptiveBounds: a policy whose adaptive read-ahead bounds are inverted,
// or below one page, is refused with the file, line and key, exit code 2, and nothing on
// the host changes; the agent refuses to start on it.
func TestApplyRefusesBadAdaptiveBounds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ bounds, want string }{
		{"{minKB: 8192, maxKB: 1024}", "policy.yaml:6: rules[1].readAheadAdaptive.minKB: 8192 is above maxKB 1024"},
		{"{minKB: 2}", "policy.yaml:6: rules[1].readAheadAdaptive.minKB: 2 is out of range 4..1048576"},
		{"{maxKB: 4194304}", "policy.yaml:6: rules[1].readAheadAdaptive.maxKB: 4194304 is out of range 4..1048576"},
	} {
		t.Run(tt.bounds, func(t *testing.T) {
			t.Parallel()
			dir := copyTree(t)
			cfg := filepath.Join(t.TempDir(), "policy.yaml")
			policy := "apiVersion: nfstune.io/v1alpha1\nkind: Policy\nrules:\n  - match: {mountpoint: /mnt/*}\n    readAheadKB: 4096\n    readAheadAdaptive: " + tt.bounds + "\n"
			if err := os.WriteFile(cfg, []byte(policy), 0o600); err != nil {
				t.Fatal(err)
			}
			before := treeSnapshot(t, dir)
			for _, args := range [][]string{
				{"apply", "--root", dir, "--config", cfg, "--udev-program", "/usr/local/bin/nfstune"},
				{"agent", "--root", dir, "--config", cfg, "--listen", "127.0.0.1:0"},
			} {
				_, err := runTuneCLI(t, args...)
				var exit *ExitError
				if !errors.As(err, &exit) || exit.Code != ExitError2 || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("%s: err = %v, want exit code 2 and %q", args[0], err, tt.want)
				}
			}
			if diff := cmp.Diff(before, treeSnapshot(t, dir)); diff != "" {
				t.Errorf("a refused policy changed the host:\n%s", diff)
			}
		})
	}
}
