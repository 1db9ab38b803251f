package cli

import (
	"strings"
	"testing"
)

// An unknown --log-level or --log-format is bad input (exit 2) before the command runs,
// not a silent fall-back to info and text.
func TestLogFlagsRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-level", "bogus", "version"}, `--log-level "bogus": want debug, info, warn or error`},
		{[]string{"options", "--log-level", "verbose"}, `--log-level "verbose"`},
		{[]string{"--log-format", "xml", "version"}, `--log-format "xml": want text or json`},
	} {
		stdout, stderr, code := runVerb(t, tt.args...)
		if code != ExitError2 || !strings.Contains(stderr, tt.want) || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", tt.args, code, stdout, stderr, ExitError2, tt.want)
		}
	}
	for _, level := range []string{"debug", "INFO", "warn", "error"} {
		if _, stderr, code := runVerb(t, "--log-level", level, "--log-format", "json", "version"); code != ExitOK {
			t.Errorf("--log-level %s: exit %d: %s", level, code, stderr)
		}
	}
}
