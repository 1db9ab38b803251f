//go:build lab

package k8slab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dropInPolicy names the lab's nfsd as 127.0.0.4, which no other case mounts, in a rule of
// its own before the lab's: the installer writes its options as a [ Server "127.0.0.4" ]
// section. NFSv3, so that the mount has a client of its own (an NFSv4 mount of another
// loopback address may join 127.0.0.1's client and inherit its nconnect).
const dropInPolicy = `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - name: lab filer
    match: {server: 127.0.0.4}
    mode: enforce
    workload: sequential-read
    mountOptions:
      vers: "3"
      nolock: true
      nconnect: 4
      rsize: 262144
      wsize: 262144
      hard: true
      actimeo: 30
  - name: lab nfsd
    match:
      cidr: 127.0.0.0/8
    workload: sequential-read
`

const dropIn = "/etc/nfsmount.conf.d/50-nfstune.conf"

// TestInlineVolumeNFSMountConf: in installer mode with installer.nfsmountConf, a pod's
// inline nfs volume (no PV, so no mountOptions anywhere in Kubernetes) is mounted by
// kubelet's mount.nfs with the policy's options, from the node's drop-in alone. nfstune
// revert on the node removes the drop-in and the udev rule, and the next such pod mounts
// with the kernel's defaults.
func TestInlineVolumeNFSMountConf(t *testing.T) {
	requireCluster(t)
	if _, err := helm("uninstall", "nfstune", "--ignore-not-found", "--wait", "--timeout", "5m"); err != nil {
		t.Fatal(err)
	}
	_, dirErr := os.Stat(filepath.Dir(dropIn))
	if _, err := os.Stat(dropIn); err == nil {
		t.Fatalf("%s is there before the chart is installed", dropIn)
	}
	pf := filepath.Join(stateDir, "dropin-policy.yaml")
	if err := os.WriteFile(pf, []byte(dropInPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"install", "nfstune", registryChart}, chartValues(t, "installer", "enforce")...)
	args = append(args, "--set-file", "policy="+pf, "--set", "installer.nfsmountConf=true")
	if _, err := helm(args...); err != nil {
		t.Fatal(err)
	}
	pod := waitInstallerPod(t)
	logf("installer pod %s Running with installer.nfsmountConf", pod.Name)
	b, err := os.ReadFile(dropIn)
	if err != nil || !strings.Contains(string(b), `[ Server "127.0.0.4" ]`) {
		t.Fatalf("the installer's drop-in: %v\n%s", err, b)
	}
	logf("drop-in %s:\n%s", dropIn, b)

	vol := inlineNFS("dropin")
	vol.NFS.Server, vol.NFS.Path = "127.0.0.4", v3Path("dropin")
	r := startNFSPod(t, nfsPod("nfs-dropin", vol), bootTime(), false)
	opts := optionMap(r.mount.superOptions)
	// actimeo=30 sets the four timers; mountinfo leaves out acdirmin, whose default is 30.
	want := map[string]string{"vers": "3", "nconnect": "4", "rsize": "262144", "wsize": "262144", "hard": "",
		"nolock": "", "acregmin": "30", "acregmax": "30", "acdirmax": "30"}
	for k, v := range want {
		if got, ok := opts[k]; !ok || got != v {
			t.Errorf("inline volume %s (%s): %s = %q (present %v), want %q", r.mount.dev, r.mount.source, k, got, ok, v)
		}
	}
	summary.InlineDropInOptions = r.mount.superOptions
	logf("inline volume %s of %s mounted by kubelet with %s", r.mount.dev, r.mount.source, r.mount.superOptions)

	// The chart's uninstall leaves what the installer wrote, by design; nfstune revert on
	// the node, with the binary the installer put there, takes it back.
	uninstall(t)
	out, err := run(2*time.Minute, "/opt/nfstune/bin/nfstune", "revert")
	logf("nfstune revert on the node:\n%s", out)
	if err != nil {
		t.Fatalf("nfstune revert on the node: %v", err)
	}
	if _, err := os.Stat(dropIn); !os.IsNotExist(err) {
		t.Errorf("%s is still there after revert: %v", dropIn, err)
	}
	// The chart's hostPath volume (DirectoryOrCreate) makes the directory before nfstune
	// runs, so nfstune did not create it and leaves it: empty, which mount.nfs reads as
	// nothing (docs/kubernetes.md, What an uninstall leaves).
	left, err := os.ReadDir(filepath.Dir(dropIn))
	switch {
	case dirErr == nil && err != nil:
		t.Errorf("%s was there before the install and is gone after revert: %v", filepath.Dir(dropIn), err)
	case len(left) > 0:
		t.Errorf("%s holds %d entries after revert, want none", filepath.Dir(dropIn), len(left))
	}
	if _, err := os.Stat(installerRule); !os.IsNotExist(err) {
		t.Errorf("%s is still there after revert: %v", installerRule, err)
	}

	// The same server and export, now by NFSv4 (no drop-in says vers=3): the kernel's
	// defaults, no nconnect and no attribute-cache timers.
	vol = inlineNFS("dropin")
	vol.NFS.Server = "127.0.0.4"
	r = startNFSPod(t, nfsPod("nfs-dropin-after", vol), bootTime(), false)
	opts = optionMap(r.mount.superOptions)
	for _, k := range []string{"nconnect", "acregmin", "acregmax", "acdirmin", "acdirmax"} {
		if v, ok := opts[k]; ok {
			t.Errorf("after revert the next inline volume %s still has %s=%s", r.mount.dev, k, v)
		}
	}
	if opts["vers"] == "3" {
		t.Errorf("after revert the next inline volume %s is NFSv3, as only the drop-in asked", r.mount.dev)
	}
	logf("after revert: inline volume %s mounted with %s", r.mount.dev, r.mount.superOptions)
}

// optionMap splits mountinfo's super options; a flag maps to "".
func optionMap(s string) map[string]string {
	m := map[string]string{}
	for o := range strings.SplitSeq(s, ",") {
		k, v, _ := strings.Cut(o, "=")
		m[k] = v
	}
	return m
}
