//go:build lab

package labtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// kernelRelease is the guest kernel's uname -r, e.g. "5.10.0-32-amd64".
func kernelRelease(t testing.TB) string {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	return unix.ByteSliceToString(u.Release[:])
}

// kernelAtLeast reports whether the guest kernel is major.minor or later.
func kernelAtLeast(t testing.TB, major, minor int) bool {
	t.Helper()
	var a, b int
	if _, err := fmt.Sscanf(kernelRelease(t), "%d.%d", &a, &b); err != nil {
		t.Fatalf("kernel release %q: %v", kernelRelease(t), err)
	}
	return a > major || a == major && b >= minor
}

// noSunrpcSysfs starts the audit's warning for a kernel without /sys/kernel/sunrpc.
const noSunrpcSysfs = "no /sys/kernel/sunrpc/xprt-switches"

// TestKernelGates checks on the running kernel what nfstune gates on the kernel version
// (docs/kernels.md): nconnect (5.3), a 128 KiB read-ahead on a new NFS mount (5.4), the
// sunrpc transports in sysfs (5.14; before, the audit says it cannot see them) and the NFS
// client's per-superblock shutdown switch in sysfs (6.6).
func TestKernelGates(t *testing.T) {
	RequireGuest(t)
	t.Logf("kernel %s", kernelRelease(t))
	if got := Transports(t)["/mnt/lab/v41"]; got != 4 {
		t.Errorf("/mnt/lab/v41 (nconnect=4) has %d transports, want 4", got)
	}
	m := Mount(t, MountSpec{Version: "4.2", Options: "nosharecache"})
	if got := ReadAheadKB(t, m.Device); got != 128 {
		t.Errorf("a new NFS mount's read_ahead_kb = %d, want the 128 of Linux 5.4 and later", got)
	}

	_, err := os.Stat("/sys/kernel/sunrpc/xprt-switches")
	sunrpc := kernelAtLeast(t, 5, 14)
	if (err == nil) != sunrpc {
		t.Errorf("/sys/kernel/sunrpc/xprt-switches: %v; want it present: %v", err, sunrpc)
	}
	rep, _ := audit(t)
	warned := slices.ContainsFunc(rep.Warnings, func(w string) bool { return strings.HasPrefix(w, noSunrpcSysfs) })
	if warned == sunrpc {
		t.Errorf("audit warnings %q; want the missing sunrpc sysfs named: %v", rep.Warnings, !sunrpc)
	}

	shutdown := filepath.Join("/sys/fs/nfs", m.Device, "shutdown")
	_, err = os.Stat(shutdown)
	if want := kernelAtLeast(t, 6, 6); (err == nil) != want {
		t.Errorf("%s: %v; want it present: %v", shutdown, err, want)
	}
}
