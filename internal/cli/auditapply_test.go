package cli

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/tune"
)

// auditApplyTrees are every recorded host tree that audit and apply read as a whole host:
// the lab's kernels, the inventory's hand-made hosts and the CLI's own, each with the
// policy file it is tested with.
func auditApplyTrees(t *testing.T) map[string][]string {
	t.Helper()
	trees := map[string][]string{}
	for _, glob := range []string{"../inventory/testdata/*", "testdata/*"} {
		dirs, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range dirs {
			if _, err := os.Stat(filepath.Join(dir, "proc", "self", "mountinfo")); err != nil {
				continue // not a host tree (goldens, saved inventories, a kubelet's view)
			}
			var args []string
			if _, err := os.Stat(filepath.Join(dir, "policy.yaml")); err == nil {
				args = []string{"--config", filepath.Join(dir, "policy.yaml")}
			}
			trees[dir] = args
		}
	}
	if len(trees) < 10 {
		t.Fatalf("found %d host trees, want every lab tree and hand-made host", len(trees))
	}
	return trees
}

// TestAuditMatchesApply checks on every host tree that the audit and apply agree: each
// mount has at most one finding per change apply makes (one finding per cause), and the
// changes the findings name (Finding.Changes) are exactly the changes of apply --dry-run:
// the live read-ahead and sysctls, the udev rule for future mounts, and the mount options
// of the remount groups.
func TestAuditMatchesApply(t *testing.T) {
	t.Parallel()
	for dir, cfg := range auditApplyTrees(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runVerb(t, append([]string{"--root", dir, "audit", "--stall-window", "1ms", "--fail-on", "none", "-o", "json"}, cfg...)...)
			if code != ExitOK {
				t.Fatalf("audit: exit %d: %s", code, errOut)
			}
			var rep audit.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			reported := map[string]bool{}
			perMount := map[string]string{} // device and change -> finding ID
			for _, f := range rep.Findings {
				for _, c := range f.Changes {
					if id, dup := perMount[f.Device+" "+c]; dup {
						t.Errorf("%s: %s and %s report the same change %q", f.Device, id, f.ID, c)
					}
					perMount[f.Device+" "+c] = f.ID
					reported[c] = true
				}
			}

			out, errOut, code = runVerb(t, append([]string{"--root", dir, "apply", "--dry-run", "--udev-program", "/usr/local/bin/nfstune", "-o", "json"}, cfg...)...)
			if code != ExitOK {
				t.Fatalf("apply --dry-run: exit %d: %s", code, errOut)
			}
			var res struct {
				Plan tune.Plan `json:"plan"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatal(err)
			}
			planned := map[string]bool{}
			for _, a := range res.Plan.Actions {
				switch a.Kind {
				case tune.KindReadAhead:
					planned[audit.ReadAheadChange(a.Device)] = true
				case tune.KindUdevRule, tune.KindNFSConf:
					planned[audit.NextMountReadAheadChange] = true
				case tune.KindSysctl:
					name := strings.ReplaceAll(strings.TrimPrefix(a.Path, "/proc/sys/"), "/", ".")
					planned[audit.SysctlChange(name)] = true
				}
			}
			for _, g := range res.Plan.Remounts {
				for _, m := range g.Mounts {
					for _, c := range m.Changes {
						planned[audit.OptionChange(m.Device, c.Name)] = true
					}
				}
			}
			for _, c := range slices.Sorted(maps.Keys(planned)) {
				if !reported[c] {
					t.Errorf("apply plans %q, which no finding reports", c)
				}
			}
			for _, c := range slices.Sorted(maps.Keys(reported)) {
				if !planned[c] {
					t.Errorf("a finding reports %q, which apply does not plan", c)
				}
			}
		})
	}
}
