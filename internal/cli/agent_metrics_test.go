package cli

import (
	"strings"
	"testing"
)

// TestAgentRejectsUnknownMetricsTier checks that a bad --metrics stops the agent before it
// reads or serves anything, with the usage exit code.
func TestAgentRejectsUnknownMetricsTier(t *testing.T) {
	t.Parallel()
	_, stderr, code := runVerb(t, "agent", "--root", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics", "all")
	if code != ExitError2 {
		t.Errorf("exit code = %d, want %d", code, ExitError2)
	}
	if !strings.Contains(stderr, `unknown metrics tier "all"`) {
		t.Errorf("stderr = %q, want the unknown tier named", stderr)
	}
}
