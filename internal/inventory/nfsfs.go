package inventory

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// NFSServer is one row of /proc/fs/nfsfs/servers: one kernel NFS client (struct nfs_client).
// See fs/nfs/client.c nfs_server_list_show.
type NFSServer struct {
	// Version is the NFS major version ("v3", "v4").
	Version string `json:"version"`
	// Addr is the server address decoded from the kernel's hex form; the raw hex when it
	// is neither an IPv4 nor an IPv6 address.
	Addr string `json:"addr"`
	// Port is the server port decoded from hex.
	Port int `json:"port"`
	// Use is the client's reference count (cl_count).
	Use      int    `json:"use"`
	Hostname string `json:"hostname"`
}

// NFSVolume is one row of /proc/fs/nfsfs/volumes: one NFS superblock.
// See fs/nfs/client.c nfs_volume_list_show.
type NFSVolume struct {
	Version string `json:"version"`
	Addr    string `json:"addr"`
	Port    int    `json:"port"`
	// Device is the superblock's "major:minor", the bdi name.
	Device string `json:"device"`
	// FSID is the server's filesystem id, "major:minor" in hex.
	FSID string `json:"fsid"`
	// FSC reports whether FS-Cache is enabled for the volume.
	FSC bool `json:"fsc"`
}

// ParseNFSServers parses /proc/fs/nfsfs/servers (also /proc/<pid>/net/nfsfs/servers).
// Columns are split on white space, not by width, because their widths changed between
// kernels. The header line is skipped; malformed rows are skipped with a warning.
func ParseNFSServers(r io.Reader) ([]NFSServer, []string) {
	var out []NFSServer
	var warnings []string
	forEachRow(r, func(n int, f []string) {
		if len(f) < 4 {
			warnings = append(warnings, fmt.Sprintf("nfsfs servers line %d: want at least 4 fields, got %d", n, len(f)))
			return
		}
		port, err1 := strconv.ParseUint(f[2], 16, 16)
		use, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil || !strings.HasPrefix(f[0], "v") {
			warnings = append(warnings, fmt.Sprintf("nfsfs servers line %d: malformed row %q", n, strings.Join(f, " ")))
			return
		}
		s := NFSServer{Version: f[0], Addr: decodeHexAddr(f[1]), Port: int(port), Use: use}
		if len(f) > 4 {
			s.Hostname = f[4]
		}
		out = append(out, s)
	})
	return out, warnings
}

// ParseNFSVolumes parses /proc/fs/nfsfs/volumes (also /proc/<pid>/net/nfsfs/volumes):
// "NV SERVER PORT DEV FSID FSC" with the same white-space splitting as ParseNFSServers.
func ParseNFSVolumes(r io.Reader) ([]NFSVolume, []string) {
	var out []NFSVolume
	var warnings []string
	forEachRow(r, func(n int, f []string) {
		if len(f) < 5 {
			warnings = append(warnings, fmt.Sprintf("nfsfs volumes line %d: want at least 5 fields, got %d", n, len(f)))
			return
		}
		port, err := strconv.ParseUint(f[2], 16, 16)
		if err != nil || !strings.HasPrefix(f[0], "v") || !hostfs.ValidDevice(f[3]) {
			warnings = append(warnings, fmt.Sprintf("nfsfs volumes line %d: malformed row %q", n, strings.Join(f, " ")))
			return
		}
		v := NFSVolume{Version: f[0], Addr: decodeHexAddr(f[1]), Port: int(port), Device: f[3], FSID: f[4]}
		if len(f) > 5 {
			v.FSC = f[5] == "yes"
		}
		out = append(out, v)
	})
	return out, warnings
}

// forEachRow calls fn with the fields of every non-empty line except the "NV ..." header.
func forEachRow(r io.Reader, fn func(line int, fields []string)) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; s.Scan(); n++ {
		f := strings.Fields(s.Text())
		if len(f) == 0 || f[0] == "NV" {
			continue
		}
		fn(n, f)
	}
}

// decodeHexAddr turns the kernel's RPC_DISPLAY_HEX_ADDR form into an address: 8 hex digits
// are an IPv4 address in network order ("c0a87a47" is 192.168.122.71), 32 are IPv6.
func decodeHexAddr(h string) string {
	b, err := hex.DecodeString(h)
	if err != nil {
		return h
	}
	if a, ok := netip.AddrFromSlice(b); ok && (len(b) == 4 || len(b) == 16) {
		return a.String()
	}
	return h
}

// VolumeDevices parses a /proc/fs/nfsfs/volumes file into the set of its devices: the
// superblocks the kernel confirms as NFS, which are the only bdis nfstune ever writes.
func VolumeDevices(b []byte) map[string]bool {
	vols, _ := ParseNFSVolumes(bytes.NewReader(b))
	devs := make(map[string]bool, len(vols))
	for _, v := range vols {
		if hostfs.ValidDevice(v.Device) {
			devs[v.Device] = true
		}
	}
	return devs
}
