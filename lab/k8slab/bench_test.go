//go:build lab

package k8slab

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nfstune/nfstune/internal/fleetbench"
)

// benchImage is nfstune with fio: the release image holds nfstune alone, so the lab builds
// this one from the nfstune binary and the guest's own fio with the libraries it loads
// (buildBenchImage), as a user adds fio to the release image.
const benchImage = "nfstune.test/nfstune-fio:lab"

// benchClaims are the volumes of the fleet curve, each an export of its own.
var benchClaims = []string{"bench-a", "bench-b"}

// benchArgs are kubectl nfstune bench's arguments in the lab: four pods on two claims, low
// rates (two emulated CPUs run the pods' 32 fio processes), a wide gap between steps for
// fio to start under emulation, and a start two minutes ahead for kubelet to deliver the
// ConfigMap's change (its sync period is a minute).
func benchArgs(job, rates string) []string {
	return []string{"bench", "-n", testNS, "--pvc", benchClaims[0], "--pvc", benchClaims[1], "--dir", "bench",
		"--pods", "4", "--name", job, "--image", benchImage, "--rates", rates, "--runtime", "5s", "--ramp", "0s",
		"--step-gap", "20s", "--start-delay", "2m", "--timeout", "15m", "--latency-bound", "10s"}
}

// TestFleetBench draws one fleet curve with an Indexed Job of four pods on two volumes, and
// checks that the report's totals are the sums of the pods' results and that nothing is
// left; then it interrupts a second run once every pod is ready, and checks that no pod,
// Job, ConfigMap or file is left.
func TestFleetBench(t *testing.T) {
	requireCluster(t)
	if err := addExportsSized(benchClaims, 300, "512m"); err != nil {
		t.Fatal(err)
	}
	for _, c := range benchClaims {
		dir := filepath.Join(v3Path(c), "bench")
		// The pods run as 65532: the directory the user names must be theirs to write.
		if err := os.Mkdir(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o1777); err != nil {
			t.Fatal(err)
		}
		createClaim(t, c)
	}
	buildBenchImage(t)

	r := runPlugin("admin", append(benchArgs("lab-bench", "16,32"), "-o", "json")...)
	logf("kubectl nfstune bench: exit %d after %s\n%s", r.code, r.took.Round(time.Second), r.errOut)
	if r.code != 0 {
		t.Fatalf("kubectl nfstune bench: exit %d\n%s\n%s", r.code, r.errOut, r.out)
	}
	var rep fleetbench.Report
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, r.out)
	}
	logf("fleet curve:\n%s", r.out)
	if len(rep.Steps) == 0 {
		t.Fatal("no step")
	}
	for _, s := range rep.Steps {
		var sum float64
		for _, p := range s.Pods {
			sum += p.IOPS
		}
		if len(s.Pods) != 4 || len(s.Volumes) != 2 || s.Volumes[0].Pods != 2 || s.Volumes[1].Pods != 2 {
			t.Errorf("step %d: %d pods, volumes %+v; want 4 pods, 2 on each volume", s.Step, len(s.Pods), s.Volumes)
		}
		if diff := s.OpsS - sum; diff > 0.05 || diff < -0.05 || s.OpsS == 0 {
			t.Errorf("step %d: total %v ops/s, the pods' sum %v", s.Step, s.OpsS, sum)
		}
		summary.FleetBenchTotals = append(summary.FleetBenchTotals, s.OpsS)
	}
	for _, tu := range rep.Tuning {
		if tu.Tuning == nil || tu.Tuning.ReadAheadKB == nil || tu.Tuning.FSType != "nfs4" {
			t.Errorf("pod %d reported no read-ahead of its NFS mount: %+v", tu.Index, tu.Tuning)
		}
	}
	checkBenchGone(t, "lab-bench")

	// Interrupted once every pod is ready: the pods' directories exist, then go.
	cmd := exec.Command(filepath.Join(binDir, "kubectl-nfstune"), append(benchArgs("lab-kill", "16,32,64"),
		"--kubeconfig", filepath.Join(stateDir, "admin.kubeconfig"))...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var progress strings.Builder
	sc := bufio.NewScanner(stderr)
	ready := false
	for sc.Scan() {
		progress.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "every pod ready") {
			ready = true
			break
		}
	}
	if !ready {
		_ = cmd.Wait()
		t.Fatalf("the second run never had every pod ready:\n%s", progress.String())
	}
	for i := range 4 {
		dir := filepath.Join(v3Path(benchClaims[i%2]), "bench", fmt.Sprintf("lab-kill-%d", i))
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("pod %d's directory: %v", i, err)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stderr)
	progress.Write(rest)
	err = cmd.Wait()
	logf("interrupted kubectl nfstune bench: %v\n%s", err, progress.String())
	if cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("interrupted: exit %d, want 1", cmd.ProcessState.ExitCode())
	}
	summary.FleetBenchKilledClean = checkBenchGone(t, "lab-kill")
}

// checkBenchGone checks that the Job, its pods and its ConfigMap are gone and that the
// exports' bench directories are empty.
func checkBenchGone(t *testing.T, job string) bool {
	t.Helper()
	ok := true
	pods, err := podsWithLabel(testNS, fleetbench.InstanceLabel+"="+job)
	if err != nil || len(pods) != 0 {
		t.Errorf("pods of %s left: %d (%v)", job, len(pods), err)
		ok = false
	}
	for _, path := range []string{"/apis/batch/v1/namespaces/" + testNS + "/jobs/" + job, "/api/v1/namespaces/" + testNS + "/configmaps/" + job} {
		if code, _, err := cluster.do("GET", path, nil); err != nil || code != 404 {
			t.Errorf("GET %s: %d (%v), want it gone", path, code, err)
			ok = false
		}
	}
	for _, c := range benchClaims {
		entries, err := os.ReadDir(filepath.Join(v3Path(c), "bench"))
		if err != nil || len(entries) != 0 {
			t.Errorf("export %s: left %v (%v)", c, entries, err)
			ok = false
		}
	}
	return ok
}

// createClaim creates a PersistentVolume of the export name and its claim, both
// ReadWriteMany, as a file service's volume is.
func createClaim(t *testing.T, name string) {
	t.Helper()
	fs := corev1.PersistentVolumeFilesystem
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	vol := &corev1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      size,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			VolumeMode:                    &fs,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "127.0.0.1", Path: v4Path(name)}},
		},
	}
	empty := ""
	claim := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &empty,
			VolumeName:       name,
			Resources:        corev1.VolumeResourceRequirements{Requests: size},
		},
	}
	if err := cluster.create("/api/v1/persistentvolumes", vol); err != nil {
		t.Fatal(err)
	}
	if err := cluster.create("/api/v1/namespaces/"+testNS+"/persistentvolumeclaims", claim); err != nil {
		t.Fatal(err)
	}
}

// buildBenchImage builds benchImage (entrypoint /nfstune, fio on its PATH) and imports it
// into containerd: one layer with the nfstune binary, the guest's fio, and every library
// ldd(1) lists for it at the path it lists.
func buildBenchImage(t *testing.T) {
	t.Helper()
	out, err := run(time.Minute, "ldd", "/usr/bin/fio")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"nfstune": filepath.Join(binDir, "nfstune"), "usr/bin/fio": "/usr/bin/fio"}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			files[strings.TrimPrefix(f[2], "/")] = f[2]
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			files[strings.TrimPrefix(f[0], "/")] = f[0]
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0).UTC()
	dirs := map[string]bool{"tmp": true}
	for p := range files {
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: mode, ModTime: epoch}); err != nil {
			t.Fatal(err)
		}
	}
	for p, src := range files {
		b, err := os.ReadFile(src) // follows links: ld.so and the libraries are links
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(b)), ModTime: epoch}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerBytes)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Entrypoint = []string{"/nfstune"}
	cfg.Config.Env = []string{"PATH=/usr/bin"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(benchImage)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(stateDir, "bench-image.tar")
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		t.Fatal(err)
	}
	if _, err := ctr(5*time.Minute, "images", "import", path); err != nil {
		t.Fatal(err)
	}
	logf("bench image %s: nfstune, fio and %d libraries", benchImage, len(files)-2)
}
