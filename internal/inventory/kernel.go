package inventory

import (
	"fmt"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// readKernelRelease returns the release field of /proc/version
// ("Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org) ..."), or
// /proc/sys/kernel/osrelease when /proc/version is missing or unparsable.
func readKernelRelease(root hostfs.Root) (string, []string) {
	s, err := hostfs.ReadString(root.Proc("version"))
	if err == nil {
		if r := parseKernelRelease(s); r != "" {
			return r, nil
		}
	}
	r, err2 := hostfs.ReadString(root.Proc("sys", "kernel", "osrelease"))
	if err2 == nil && r != "" {
		return r, nil
	}
	if err == nil {
		err = fmt.Errorf("unexpected /proc/version %q", shorten(s, 80))
	}
	return "", []string{fmt.Sprintf("reading kernel version: %v", err)}
}

func parseKernelRelease(s string) string {
	f := strings.Fields(s)
	if len(f) >= 3 && f[0] == "Linux" && f[1] == "version" {
		return f[2]
	}
	return ""
}
