package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// runCLI runs one nfstune command line with buffers for streams.
func runK8sCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRoot(IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	root.SetArgs(args)
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestK8sRenderFlags(t *testing.T) {
	t.Parallel()
	digest := "sha256:" + strings.Repeat("ab", 32)
	tests := []struct {
		name     string
		stdin    string
		args     []string
		want     []string // substrings of stdout
		wantCode int      // ExitError code, 0 for success
	}{
		{
			name: "digest pins the image",
			args: []string{"k8s", "render", "--image", "reg.example:5000/nfstune:v9", "--image-digest", digest},
			want: []string{"image: reg.example:5000/nfstune@" + digest},
		},
		{
			name: "tag from --image",
			args: []string{"k8s", "render", "--image", "reg.example:5000/team/nfstune:v9", "--namespace", "tuning"},
			want: []string{"image: reg.example:5000/team/nfstune:v9", "namespace: tuning"},
		},
		{
			name:  "values from stdin, flags override",
			stdin: "mode: installer\nnamespace: from-file\n",
			args:  []string{"k8s", "render", "--config", "-", "--namespace", "from-flag", "-o", "json"},
			want:  []string{`"kind": "List"`, `"name": "nfstune-installer"`, `"namespace": "from-flag"`},
		},
		{name: "bad digest", args: []string{"k8s", "render", "--image-digest", "sha256:xyz"}, wantCode: ExitError2},
		{name: "bad mode", args: []string{"k8s", "render", "--mode", "operator"}, wantCode: ExitError2},
		{name: "bad output", args: []string{"k8s", "render", "-o", "table"}, wantCode: ExitError2},
		{name: "unknown key", stdin: "privileged: true\n", args: []string{"k8s", "render", "--config", "-"}, wantCode: ExitError2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, _, err := runK8sCLI(t, tt.stdin, tt.args...)
			if tt.wantCode != 0 {
				var exit *ExitError
				if !errors.As(err, &exit) || exit.Code != tt.wantCode {
					t.Fatalf("err = %v, want exit code %d", err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestK8sPauseReturnsOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pause(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
