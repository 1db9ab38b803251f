package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/inventory"
)

// auditRoot is the inventory's fixture tree: Azure Files with nconnect and a shared client,
// an escaped mount point, NFSv3 with nocto, EFS, and NFSv4.2 over IPv6.
const auditRoot = "../inventory/testdata/mixed"

// runVerb runs one nfstune command line with buffers and returns stdout, stderr and the
// exit code app.Run would give.
func runVerb(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRoot(IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	code := ExitOK
	if err != nil {
		code = ExitError2
		var exit *ExitError
		if errors.As(err, &exit) {
			code = exit.Code
		}
		if exit == nil || exit.Err != nil {
			errOut.WriteString(err.Error())
		}
	}
	return out.String(), errOut.String(), code
}

func writeTempFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAuditCommand(t *testing.T) {
	t.Parallel()
	staticTools := writeTempFile(t, "policy.yaml", `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {mountpoint: /tools}
    workload: static-tools
`)
	badPolicy := writeTempFile(t, "bad.yaml", `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {cidr: 10.0.0.0/33}
`)
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     []string // substrings
		notStdout  []string
		stderr     []string
		structured string // json or yaml: decode and check the document
	}{
		{
			name:   "table, warnings only: exit 0 at --fail-on error",
			args:   []string{"audit", "--root", auditRoot},
			code:   ExitOK,
			stdout: []string{"5 NFS mount(s)", "/mnt/share1, /srv/projects", "NFS001", "echo 1024 > /sys/class/bdi/0:53/read_ahead_kb", "NFS012 nconnect=8 is requested but not in effect: /mnt/share1, /srv/projects (0:53)", "/mnt/with\\040space", "[fd00::5]:/export", "NFS031"},
			stderr: []string{"warning: reading read_ahead_kb of 0:61"},
		},
		{
			name: "fail on warning",
			args: []string{"audit", "--root", auditRoot, "--fail-on", "warning"},
			code: ExitIssues,
		},
		{
			name: "fail on none",
			args: []string{"audit", "--root", auditRoot, "--fail-on", "none"},
			code: ExitOK,
		},
		{
			name:      "config declares the tools static",
			args:      []string{"audit", "--root", auditRoot, "--config", staticTools},
			code:      ExitOK,
			stdout:    []string{"generic/static-tools (policy.yaml rule 1)"},
			notStdout: []string{"NFS031"},
		},
		{name: "json", args: []string{"audit", "--root", auditRoot, "-o", "json"}, code: ExitOK, structured: "json"},
		{name: "yaml", args: []string{"audit", "--root", auditRoot, "-o", "yaml", "--fail-on", "warning"}, code: ExitIssues, structured: "yaml"},
		{name: "bad fail-on", args: []string{"audit", "--root", auditRoot, "--fail-on", "sometimes"}, code: ExitError2, stderr: []string{"unknown --fail-on"}},
		{name: "bad output", args: []string{"audit", "--root", auditRoot, "-o", "xml"}, code: ExitError2, stderr: []string{`invalid argument "xml" for "-o, --output" flag: want table, json, yaml`}},
		{name: "bad policy", args: []string{"audit", "--root", auditRoot, "--config", badPolicy}, code: ExitError2, stderr: []string{"bad.yaml:4: rules[1].match.cidr"}},
		{name: "missing root", args: []string{"audit", "--root", filepath.Join(t.TempDir(), "none")}, code: ExitError2, stderr: []string{"reading mounts"}},
		{name: "arguments refused", args: []string{"audit", "/mnt"}, code: ExitError2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runVerb(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tt.notStdout {
				if strings.Contains(stdout, s) {
					t.Errorf("stdout has %q:\n%s", s, stdout)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			if tt.structured != "" {
				checkAuditDocument(t, tt.structured, stdout, stderr)
			}
		})
	}
}

// checkAuditDocument decodes -o json|yaml output and checks the fields the issue promises.
func checkAuditDocument(t *testing.T, format, stdout, stderr string) {
	t.Helper()
	b := []byte(stdout)
	if format == "yaml" {
		var err error
		if b, err = yaml.YAMLToJSON(b); err != nil {
			t.Fatalf("output is not YAML: %v", err)
		}
	}
	var doc struct {
		Mounts   []map[string]any `json:"mounts"`
		Findings []map[string]any `json:"findings"`
		Warnings []string         `json:"warnings"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("decoding %s: %v\n%s", format, err, stdout)
	}
	if len(doc.Mounts) != 5 || len(doc.Findings) == 0 || len(doc.Warnings) == 0 {
		t.Fatalf("mounts %d findings %d warnings %d", len(doc.Mounts), len(doc.Findings), len(doc.Warnings))
	}
	if strings.Contains(stderr, "warning:") {
		t.Errorf("structured output also wrote warnings to stderr: %s", stderr)
	}
	for _, k := range []string{"device", "mountpoints", "server", "export", "fstype", "version", "read_ahead_kb", "nconnect", "rsize", "wsize", "backend", "options"} {
		if _, ok := doc.Mounts[0][k]; !ok {
			t.Errorf("mount lacks %q: %v", k, doc.Mounts[0])
		}
	}
	for _, k := range []string{"id", "severity", "device", "mountpoints", "message", "expected", "actual", "fix"} {
		if _, ok := doc.Findings[0][k]; !ok {
			t.Errorf("finding lacks %q: %v", k, doc.Findings[0])
		}
	}
}

// TestAuditOpStats copies the fixture tree, gives READ on /mnt/share1 four major timeouts,
// and checks that only --op-stats parses the per-op rows that reveal them.
func TestAuditOpStats(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(auditRoot)); err != nil {
		t.Fatal(err)
	}
	statsPath := filepath.Join(root, "proc", "self", "mountstats")
	b, err := os.ReadFile(statsPath)
	if err != nil {
		t.Fatal(err)
	}
	const from, to = "READ: 4166 4166 0 ", "READ: 4166 4170 4 "
	if !bytes.Contains(b, []byte(from)) {
		t.Fatalf("fixture lacks %q", from)
	}
	if err := os.WriteFile(statsPath, bytes.Replace(b, []byte(from), []byte(to), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runVerb(t, "audit", "--root", root, "--op-stats")
	if code != ExitOK || !strings.Contains(stdout, "NFS091 the server left 4 of") {
		t.Errorf("--op-stats: exit %d, no NFS091:\n%s\n%s", code, stdout, stderr)
	}
	stdout, _, _ = runVerb(t, "audit", "--root", root)
	if strings.Contains(stdout, "NFS091") {
		t.Errorf("NFS091 without --op-stats:\n%s", stdout)
	}
}

// TestAuditLabStacked wants each of two superblocks stacked on one mount point audited with
// its own transports: one for the NFSv3 mount below, two (nconnect=2) for NFSv4.1 above.
func TestAuditLabStacked(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := runVerb(t, "audit", "--root", stackedRoot, "--op-stats", "-o", "json", "--fail-on", "none")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var rep struct {
		Mounts []struct {
			Device      string `json:"device"`
			Version     string `json:"version"`
			ClientGroup string `json:"client_group"`
			Connections int    `json:"connections"`
			NConnect    int    `json:"nconnect"`
		} `json:"mounts"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range rep.Mounts {
		got = append(got, fmt.Sprintf("%s v%s %s connections=%d nconnect=%d", m.Device, m.Version, m.ClientGroup, m.Connections, m.NConnect))
	}
	want := []string{
		"0:63 v3 tcp://127.0.0.1/v3 connections=1 nconnect=0",
		"0:65 v4.1 tcp://127.0.0.2/v4.1 connections=2 nconnect=2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audited mounts (-want +got):\n%s", diff)
	}
}

// A mount point with an escaped newline (\012) and a malformed line with terminal escapes:
// neither may forge output lines or put control bytes on the terminal, in audit or apply.
func TestTablesEscapeHostText(t *testing.T) {
	t.Parallel()
	dir := copyTree(t)
	mi := filepath.Join(dir, "proc/self/mountinfo")
	b, err := os.ReadFile(mi)
	if err != nil {
		t.Fatal(err)
	}
	var f []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, " - nfs4 ") {
			f = strings.Fields(l)
			break
		}
	}
	f[4] = `/mnt/evil\0120:99\040forged`
	evil := strings.Join(f, " ") + "\n" + "77 22 \x1b[2J garbage\x07\n" + "78 22 0:98 / \x1b[2J\x07\n"
	if err := os.WriteFile(mi, append(b, evil...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"audit", "--root", dir},
		{"apply", "--dry-run", "--root", dir, "--udev-program", "/usr/local/bin/nfstune"},
	} {
		stdout, stderr, _ := runVerb(t, args...)
		for _, out := range []string{stdout, stderr} {
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "0:99 forged") {
					t.Errorf("%s: forged line %q", args[0], line)
				}
			}
			if strings.ContainsAny(out, "\x1b\x07") {
				t.Errorf("%s: control bytes in output:\n%q", args[0], out)
			}
		}
		if !strings.Contains(stdout, `/mnt/evil\n0:99 forged`) {
			t.Errorf("%s: mount point not shown escaped:\n%s", args[0], stdout)
		}
	}
}

// TestAuditDebugTimings: --log-level debug says how long each stage took, on stderr, so a
// slow audit shows where its time went; stdout stays the report alone.
func TestAuditDebugTimings(t *testing.T) {
	t.Parallel()
	out, errOut, code := runVerb(t, "--root", auditRoot, "--log-level", "debug", "--log-format", "json", "audit", "-o", "json", "--fail-on", "none")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !json.Valid([]byte(out)) {
		t.Errorf("stdout is not the JSON report alone:\n%s", out)
	}
	stages := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
		var rec struct {
			Stage   string `json:"stage"`
			Elapsed *int64 `json:"elapsed"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Elapsed == nil {
			t.Fatalf("not a timed log record: %q (%v)", line, err)
		}
		stages[rec.Stage] = true
	}
	for _, s := range []string{"first transport sample", "mountinfo", "mountstats", "udev rules and nfs.conf", "sunrpc transports", "inventory", "stall sample", "rules", "output"} {
		if !stages[s] {
			t.Errorf("no timing for stage %q; got %v", s, stages)
		}
	}
	_, errOut, _ = runVerb(t, "--root", auditRoot, "audit", "-o", "json", "--fail-on", "none")
	if errOut != "" {
		t.Errorf("stderr at the default log level: %q, want nothing", errOut)
	}
}

// TestAuditJSONStalled: -o json gives the stalled server with each of its transports and
// the mounts of that server with the processes using them (none in a recorded tree,
// which holds no process directories).
func TestAuditJSONStalled(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "inventory", "testdata", "lab-6.1.0-50-amd64-server-gone")
	out, errOut, code := runVerb(t, "--root", dir, "audit", "--stall-window", "1ms", "--fail-on", "none", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		Stalled []inventory.StalledServer `json:"stalled"`
		Blocked []inventory.BlockedMount  `json:"blocked"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Stalled) != 1 || doc.Stalled[0].Addr != "127.0.0.1" {
		t.Fatalf("stalled: %+v", doc.Stalled)
	}
	s := doc.Stalled[0]
	stuck := 0
	for _, x := range s.Each {
		if x.Stuck {
			stuck++
		}
	}
	if stuck != len(s.Transports) || len(s.Each) <= stuck {
		t.Errorf("each transport of %s: %d stuck of %d listed, %d named stuck; want the stuck ones and the others", s.Addr, stuck, len(s.Each), len(s.Transports))
	}
	if len(doc.Blocked) == 0 {
		t.Fatal("no mounts of the stalled server in blocked")
	}
	for _, b := range doc.Blocked {
		if b.ServerAddr != "127.0.0.1" || b.Holders == nil {
			t.Errorf("blocked %+v: want server 127.0.0.1 and a holders list", b)
		}
	}
}

// TestAuditNFSMountDropInDisagrees: on a node whose drop-ins and policy disagree, audit
// names the section that wins, the file and line, and the fix; and tells where the
// mount's nconnect came from.
func TestAuditNFSMountDropInDisagrees(t *testing.T) {
	const root = "testdata/nfsmount-dropin"
	stdout, stderr, code := runVerb(t, "audit", "--root", root, "--config", root+"/policy.yaml", "-o", "json", "--fail-on", "none")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		Findings      []audit.Finding                 `json:"findings"`
		OptionOrigins map[string][]audit.OptionOrigin `json:"option_origins"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	byID := map[string]audit.Finding{}
	for _, f := range out.Findings {
		byID[f.ID] = f
	}
	f, ok := byID["NFS054"]
	if !ok {
		t.Fatalf("no NFS054 in %+v", out.Findings)
	}
	for _, want := range []string{
		`[ Server "nas.example" ] gives the next mount nconnect=2, but the profile`,
		"wants nconnect=4",
	} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("NFS054 message lacks %q: %s", want, f.Message)
		}
	}
	if want := `in /etc/nfsmount.conf.d/90-local.conf, under [ Server "nas.example" ], change nconnect=2 to nconnect=4 or remove it`; !strings.Contains(f.Fix, want) {
		t.Errorf("NFS054 fix lacks %q: %s", want, f.Fix)
	}
	if f.Actual != "nconnect=2 at /etc/nfsmount.conf.d/90-local.conf:2" {
		t.Errorf("NFS054 actual %q", f.Actual)
	}
	if f, ok := byID["NFS051"]; !ok || !slices.Equal(f.MountPoints, []string{"/mnt/backup"}) || !strings.Contains(f.Fix, `add [ Server "10.0.0.6" ] with nconnect=4`) {
		t.Errorf("NFS051 for the mount by address: %+v", f)
	}
	if f, ok := byID["NFS045"]; !ok || !strings.Contains(f.Message, `"node-07" alone`) {
		t.Errorf("NFS045: %+v", f)
	}
	if !slices.Contains(out.OptionOrigins["0:53"], audit.OptionOrigin{Option: "nconnect=2", Source: `/etc/nfsmount.conf.d/90-local.conf:2 [ Server "nas.example" ]`}) {
		t.Errorf("origins of 0:53: %+v", out.OptionOrigins["0:53"])
	}
}

// TestAuditJSONTLSHandshake: -o json says whether tlshd runs, as the table does, when a
// mount uses TLS; with the daemon gone the TLS mounts carry NFS043.
func TestAuditJSONTLSHandshake(t *testing.T) {
	t.Parallel()
	src := filepath.Join("..", "inventory", "testdata", "synthetic-tls")
	gone := t.TempDir()
	if err := os.CopyFS(gone, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(gone, "proc", "612")); err != nil { // tlshd
		t.Fatal(err)
	}
	for _, tc := range []struct {
		root    string
		running bool
	}{{src, true}, {gone, false}} {
		out, errOut, code := runVerb(t, "--root", tc.root, "audit", "--stall-window", "0", "--fail-on", "none", "-o", "json")
		if code != ExitOK {
			t.Fatalf("%s: exit %d: %s", tc.root, code, errOut)
		}
		var doc struct {
			TLSHandshake *inventory.TLSHandshake `json:"tls_handshake"`
			Findings     []audit.Finding         `json:"findings"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		if hs := doc.TLSHandshake; hs == nil || hs.Running != tc.running || !hs.Complete {
			t.Errorf("%s: tls_handshake = %+v, want running %v", tc.root, hs, tc.running)
		}
		nfs043 := slices.ContainsFunc(doc.Findings, func(f audit.Finding) bool { return f.ID == "NFS043" })
		if nfs043 == tc.running {
			t.Errorf("%s: NFS043 %v with tlshd running %v", tc.root, nfs043, tc.running)
		}
	}
}
