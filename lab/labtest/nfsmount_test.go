//go:build lab

package labtest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dropInDir is where mount.nfs (nfs-utils 2.5.3 and later; the guest has Debian 12's
// 2.6.2) reads its drop-ins.
const dropInDir = "/etc/nfsmount.conf.d"

// writeDropIn writes a drop-in of the test's own and removes it (and the directory, if the
// test made it) at the end.
func writeDropIn(t *testing.T, name, content string) {
	t.Helper()
	if _, err := os.Stat(dropInDir); os.IsNotExist(err) {
		if err := os.Mkdir(dropInDir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(dropInDir) })
	}
	p := filepath.Join(dropInDir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(p) })
}

// mountPlain runs mount.nfs as a tool that passes no options would (opts empty: no -o at
// all), and unmounts at the end; it returns the mountinfo entry.
func mountPlain(t *testing.T, src, opts string) MountInfoEntry {
	t.Helper()
	dir := MountDir(t)
	args := []string{"-t", "nfs"}
	if opts != "" {
		args = append(args, "-o", opts)
	}
	args = append(args, src, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "mount", args...).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v: %s", strings.Join(args, " "), err, out)
	}
	t.Cleanup(func() { Umount(t, dir) })
	for _, e := range MountInfo(t) {
		if e.MountPoint == dir {
			t.Logf("mount %s in %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), optionString(e.Options))
			return e
		}
	}
	t.Fatalf("mounted %s on %s but mountinfo does not show it", src, dir)
	return MountInfoEntry{}
}

func optionString(m map[string]string) string {
	var b strings.Builder
	for _, k := range []string{"vers", "nconnect", "rsize", "wsize", "hard", "soft", "timeo", "retrans", "acregmin", "acregmax", "acdirmin", "acdirmax"} {
		if v, ok := m[k]; ok {
			if v == "" {
				b.WriteString(k + " ")
			} else {
				b.WriteString(k + "=" + v + " ")
			}
		}
	}
	return b.String()
}

// withHostsLine adds a line to /etc/hosts and puts the file back byte for byte at the end.
func withHostsLine(t *testing.T, line string) {
	t.Helper()
	old, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile("/etc/hosts", old, 0o644); err != nil {
			t.Errorf("restoring /etc/hosts: %v", err)
		}
	})
	if err := os.WriteFile("/etc/hosts", append(old, []byte(line+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
}

type auditJSON struct {
	Findings []struct {
		ID          string   `json:"id"`
		Severity    string   `json:"severity"`
		MountPoints []string `json:"mountpoints"`
		Message     string   `json:"message"`
		Fix         string   `json:"fix"`
	} `json:"findings"`
	ClientIdentity *struct {
		Source      string `json:"source"`
		Fingerprint string `json:"fingerprint"`
	} `json:"client_identity"`
}

func auditJSONOf(t *testing.T, r Result) auditJSON {
	t.Helper()
	var out auditJSON
	if err := json.Unmarshal(r.Stdout, &out); err != nil {
		t.Fatalf("audit exit %d: %v\n%s\n%s", r.Code, err, r.Stdout, r.Stderr)
	}
	return out
}

// TestNFSMountConfPrecedence: what the real mount.nfs does with nfsmount.conf drop-ins.
// The command line wins over a [ Server ] section, which wins over the global section; a
// section's soft follows a command line's hard, and the kernel keeps the last; a section
// for a name does not apply to a mount by the name's address, which audit flags (NFS051).
func TestNFSMountConfPrecedence(t *testing.T) {
	RequireGuest(t)
	withHostsLine(t, "127.0.0.3 labnfs-by-name")
	softDir := MountDir(t)
	writeDropIn(t, "10-labtest.conf", `[ NFSMount_Global_Options ]
retrans=5
acregmin=7
timeo=300

[ Server "127.0.0.1" ]
timeo=200
retrans=3

[ Server "labnfs-by-name" ]
timeo=150

[ MountPoint "`+softDir+`" ]
soft=True
`)
	export := ExportPath(ExportTmp, "3")

	// Command line timeo, server retrans, global acregmin.
	e := mountPlain(t, "127.0.0.1:"+export, "vers=3,nolock,nosharecache,timeo=100")
	for k, want := range map[string]string{"timeo": "100", "retrans": "3", "acregmin": "7"} {
		if got := e.Options[k]; got != want {
			t.Errorf("%s = %q, want %q (command line > server section > global section)", k, got, want)
		}
	}

	// A mount point section's soft after a command line's hard: the kernel keeps soft.
	dir := softDir
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "mount", "-t", "nfs", "-o", "vers=3,nolock,nosharecache,hard", "127.0.0.1:"+export, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	t.Cleanup(func() { Umount(t, dir) })
	for _, m := range MountInfo(t) {
		if m.MountPoint == dir {
			_, soft := m.Options["soft"]
			_, hard := m.Options["hard"]
			t.Logf("command line hard, [ MountPoint ] soft=True: %s", optionString(m.Options))
			if !soft || hard {
				t.Errorf("a section's soft after a command line's hard: mountinfo shows %s, want soft (mount.nfs appends it, the kernel keeps the last)", optionString(m.Options))
			}
		}
	}

	// By address: the section for the name does not apply; by name it does.
	byAddr := mountPlain(t, "127.0.0.3:"+export, "vers=3,nolock,nosharecache")
	if byAddr.Options["timeo"] == "150" {
		t.Errorf("the mount by address got the name's section: timeo=150")
	}
	byName := mountPlain(t, "labnfs-by-name:"+export, "vers=3,nolock,nosharecache")
	if byName.Options["timeo"] != "150" {
		t.Errorf("the mount by name has timeo=%q, want the section's 150", byName.Options["timeo"])
	}
	rep := auditJSONOf(t, RunNfstune(t, "audit", "-o", "json", "--fail-on", "none"))
	flagged := false
	for _, f := range rep.Findings {
		if f.ID == "NFS051" && len(f.MountPoints) > 0 && f.MountPoints[0] == byAddr.MountPoint {
			flagged = true
			t.Logf("NFS051: %s\nfix: %s", f.Message, f.Fix)
			if !strings.Contains(f.Message, `[ Server "labnfs-by-name" ]`) {
				t.Errorf("NFS051 does not name the section: %s", f.Message)
			}
		}
		if f.ID == "NFS051" && len(f.MountPoints) > 0 && f.MountPoints[0] == byName.MountPoint {
			t.Errorf("NFS051 on the mount by name, which has its section")
		}
	}
	if !flagged {
		t.Errorf("audit does not flag the mount by address (NFS051)")
	}
}

// dropInPolicy enforces only 127.0.0.4, which nothing else mounts: the scenario's mounts are
// observed, so that apply writes nothing but the drop-in. NFSv3, so that the mount has a
// client of its own (an NFSv4.1 mount of another loopback address joins 127.0.0.1's).
const dropInPolicy = `apiVersion: nfstune.io/v1alpha1
kind: Policy
defaults:
  mode: observe
rules:
  - name: lab filer
    match: {server: 127.0.0.4}
    mode: enforce
    mountOptions:
      vers: "3"
      nolock: true
      nconnect: 4
      rsize: 262144
      wsize: 262144
      hard: true
      actimeo: 30
`

// TestNFSMountConfApplyRevert: apply --nfsmount-conf writes the drop-in; a mount with no
// options at all gets the profile's from it alone; revert removes it byte for byte, and
// the next mount has the kernel's defaults again.
func TestNFSMountConfApplyRevert(t *testing.T) {
	RequireGuest(t)
	config := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(config, []byte(dropInPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RunNfstune(t, "revert") })
	before := hostState(t)
	_, dirErr := os.Stat(dropInDir)

	r := RunNfstune(t, "apply", "--config", config, "--nfsmount-conf", "--persist", "none")
	t.Logf("apply:\n%s\n%s", r.Stdout, r.Stderr)
	if r.Code != 0 {
		t.Fatalf("apply exit %d", r.Code)
	}
	b, err := os.ReadFile(filepath.Join(dropInDir, "50-nfstune.conf"))
	if err != nil || !strings.Contains(string(b), `[ Server "127.0.0.4" ]`) {
		t.Fatalf("drop-in: %v\n%s", err, b)
	}
	t.Logf("drop-in:\n%s", b)

	src := "127.0.0.4:" + ExportPath(ExportTmp, "3")
	e := mountPlain(t, src, "")
	// actimeo=30 sets the four timers; mountinfo leaves out acdirmin, whose default is 30.
	want := map[string]string{"vers": "3", "nconnect": "4", "rsize": "262144", "wsize": "262144", "hard": "",
		"acregmin": "30", "acregmax": "30", "acdirmax": "30"}
	for k, v := range want {
		if got, ok := e.Options[k]; !ok || got != v {
			t.Errorf("with the drop-in: %s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	if v, ok := e.Options["acdirmin"]; ok && v != "30" {
		t.Errorf("with the drop-in: acdirmin=%s, want 30", v)
	}
	if _, ok := e.Options["nolock"]; !ok {
		t.Errorf("with the drop-in: no nolock")
	}
	if n := Transports(t)[e.MountPoint]; n != 4 {
		t.Errorf("with the drop-in: %d transports in mountstats, want 4", n)
	}
	Umount(t, e.MountPoint)

	if r := RunNfstune(t, "revert"); r.Code != 0 {
		t.Fatalf("revert exit %d: %s", r.Code, r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dropInDir, "50-nfstune.conf")); !os.IsNotExist(err) {
		t.Errorf("the drop-in is still there after revert: %v", err)
	}
	if _, err := os.Stat(dropInDir); (err == nil) != (dirErr == nil) {
		t.Errorf("%s: before apply %v, after revert %v", dropInDir, dirErr, err)
	}
	after := hostState(t)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("revert did not restore %s: %q, was %q", k, after[k], v)
		}
	}

	e = mountPlain(t, src, "vers=3,nolock")
	if _, ok := e.Options["nconnect"]; ok {
		t.Errorf("after revert the mount still has nconnect=%s", e.Options["nconnect"])
	}
	for _, k := range []string{"acregmin", "acregmax", "acdirmin", "acdirmax"} {
		if v, ok := e.Options[k]; ok {
			t.Errorf("after revert the mount still has %s=%s (mountinfo shows only timers off their default)", k, v)
		}
	}
}

// TestClientIdentityNetns: two network namespaces with no identifier present the same
// NFSv4 client string (the host name alone): audit in each flags NFS045 and reports the
// same fingerprint. With an identifier written in each, neither does, and the
// fingerprints differ. An NFS mount is made first: a node without one gets no NFS045.
func TestClientIdentityNetns(t *testing.T) {
	RequireGuest(t)
	Mount(t, MountSpec{Version: "4.2"})
	namespaces := []string{"nfstune-a", "nfstune-b"}
	for _, ns := range namespaces {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
		}
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", ns).Run() }) // gone with the guest anyway
	}
	auditIn := func(ns string) auditJSON {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, Bin(t), "audit", "-o", "json", "--fail-on", "none")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("audit in %s: %v", ns, err)
		}
		var rep auditJSON
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("audit in %s: %v\n%s", ns, err, out)
		}
		return rep
	}
	has045 := func(rep auditJSON) bool {
		for _, f := range rep.Findings {
			if f.ID == "NFS045" {
				return true
			}
		}
		return false
	}
	idFile := func(ns string) string {
		out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/sys/fs/nfs/net/nfs_client/identifier").CombinedOutput()
		if err != nil {
			t.Fatalf("reading the identifier in %s: %v: %s", ns, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	var prints []string
	for _, ns := range namespaces {
		t.Logf("%s: identifier %q", ns, idFile(ns))
		rep := auditIn(ns)
		if rep.ClientIdentity == nil || rep.ClientIdentity.Source != "hostname" {
			t.Fatalf("%s: client identity %+v, want the host name alone", ns, rep.ClientIdentity)
		}
		if !has045(rep) {
			t.Errorf("%s: no NFS045 with an empty identifier", ns)
		}
		prints = append(prints, rep.ClientIdentity.Fingerprint)
	}
	if prints[0] != prints[1] {
		t.Errorf("fingerprints %q and %q differ, but both clients present the host name alone", prints[0], prints[1])
	}

	for _, ns := range namespaces {
		if out, err := exec.Command("ip", "netns", "exec", ns, "sh", "-c", "echo lab-"+ns+" > /sys/fs/nfs/net/nfs_client/identifier").CombinedOutput(); err != nil {
			t.Fatalf("setting the identifier in %s: %v: %s", ns, err, out)
		}
	}
	prints = prints[:0]
	for _, ns := range namespaces {
		rep := auditIn(ns)
		if rep.ClientIdentity == nil || rep.ClientIdentity.Source != "identifier" {
			t.Errorf("%s: client identity %+v after writing the identifier", ns, rep.ClientIdentity)
			continue
		}
		if has045(rep) {
			t.Errorf("%s: NFS045 with the identifier set", ns)
		}
		prints = append(prints, rep.ClientIdentity.Fingerprint)
	}
	if len(prints) == 2 && prints[0] == prints[1] {
		t.Errorf("distinct identifiers, same fingerprint %q", prints[0])
	}
}
