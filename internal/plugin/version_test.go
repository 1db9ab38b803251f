package plugin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/version"
)

// kubectl nfstune --version and kubectl nfstune version -o json say the build's version;
// usage and help name the plugin as kubectl runs it, "kubectl nfstune".
func TestVersionAndUsage(t *testing.T) {
	t.Parallel()
	if code, out, errOut := run(t, "--version"); code != ExitCompliant || out != "kubectl nfstune "+version.String()+"\n" {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut := run(t, "version", "-o", "json")
	var got version.Info
	if err := json.Unmarshal([]byte(out), &got); code != ExitCompliant || err != nil || got != version.Get() {
		t.Errorf("version -o json: exit %d, %+v (%v), stderr %q; want %+v", code, got, err, errOut, version.Get())
	}
	if _, out, _ := run(t, "status", "--help"); !strings.Contains(out, "\n  kubectl nfstune status [NODE...] [flags]\n") || strings.Contains(out, "kubectl-nfstune") {
		t.Errorf("status --help:\n%s\nwant the usage line kubectl nfstune status [NODE...] [flags]", out)
	}
	// The cluster's flags are on the commands that ask it, not on version.
	if code, _, errOut := run(t, "version", "--kubeconfig", "x"); code != ExitError || !strings.Contains(errOut, "unknown flag: --kubeconfig") {
		t.Errorf("version --kubeconfig: exit %d, stderr %q", code, errOut)
	}
}
