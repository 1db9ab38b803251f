//go:build lab

package k8slab

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// readerEnv makes the test binary, run as a pod's /nfstune, read a file and then sleep:
// "read:PATH" with read(2), "mmap:PATH" through a mapping, one byte per page.
const readerEnv = "K8SLAB_READER"

// fileReader is the test binary in a reader pod: it reads what readerEnv names, prints
// "k8slab-read bytes=N", and sleeps, so that the pod's cgroup, and its series, stay.
func fileReader() int {
	how, path, _ := strings.Cut(os.Getenv(readerEnv), ":")
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stdout, "k8slab-read error:", err)
		return 1
	}
	var n int64
	switch how {
	case "read":
		n, err = io.CopyBuffer(io.Discard, f, make([]byte, 64<<10))
	case "mmap":
		var st os.FileInfo
		if st, err = f.Stat(); err == nil {
			var m []byte
			if m, err = syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED); err == nil {
				var sum byte
				for i := 0; i < len(m); i += os.Getpagesize() {
					sum += m[i]
				}
				n = int64(len(m)) + int64(sum) // sum is 0 for a file of zeros; it keeps the loop
			}
		}
	default:
		err = fmt.Errorf("unknown reader %q", how)
	}
	if err != nil {
		fmt.Fprintln(os.Stdout, "k8slab-read error:", err)
		return 1
	}
	fmt.Fprintf(os.Stdout, "k8slab-read bytes=%d\n", n)
	time.Sleep(time.Hour)
	return 0
}

// readerPod runs the test binary (bin, copied to the node) as a reader of the NFS volume vol.
func readerPod(name string, vol corev1.VolumeSource, bin, reader string) *corev1.Pod {
	p := nfsPod(name, vol)
	file := corev1.HostPathFile
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "reader", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: bin, Type: &file}}})
	c := &p.Spec.Containers[0]
	c.Command = []string{"/nfstune"}
	c.Env = []corev1.EnvVar{{Name: readerEnv, Value: reader}}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "reader", MountPath: "/nfstune", ReadOnly: true})
	p.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: map[string]string{"k8slab": "podio"}}
	return p
}

// mountReadBytes returns a superblock's application and server read bytes from the bytes:
// line of /proc/self/mountstats (fields 1 + 3 and 5), read independently of nfstune.
func mountReadBytes(t *testing.T, dev string) (app, server uint64) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var mp string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[2] == dev {
			mp = f[4]
			break
		}
	}
	stats, err := os.ReadFile("/proc/self/mountstats")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for _, line := range strings.Split(string(stats), "\n") {
		if strings.HasPrefix(line, "device ") {
			in = strings.Contains(line, " mounted on "+mp+" with fstype nfs")
			continue
		}
		if f := strings.Fields(line); in && len(f) >= 6 && f[0] == "bytes:" {
			n := func(i int) uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return v }
			return n(1) + n(3), n(5)
		}
	}
	t.Fatalf("no bytes: line for %s (%s) in mountstats", dev, mp)
	return 0, 0
}

func scrapeBody(url string) string {
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// seriesValue is the value of one series in an exposition; -1 when absent.
func seriesValue(body, series string) float64 {
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

func grepPrefix(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
