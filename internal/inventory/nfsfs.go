package inventory

import (
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
// kernels. The header line is skipped; malformed rows are skipped with a warning. A line
// longer than 1 MiB is an error (ErrLineTooLong), and no server is returned.
func ParseNFSServers(r io.Reader) ([]NFSServer, []string, error) {
	var out []NFSServer
	var warnings []string
	err := forEachRow(r, func(n int, f []string) {
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
	if err != nil {
		return nil, warnings, fmt.Errorf("nfsfs servers: %w", err)
	}
	return out, warnings, nil
}

// ParseNFSVolumes parses /proc/fs/nfsfs/volumes (also /proc/<pid>/net/nfsfs/volumes):
// "NV SERVER PORT DEV FSID FSC" with the same white-space splitting as ParseNFSServers. A
// line longer than 1 MiB is an error (ErrLineTooLong), and no volume is returned.
func ParseNFSVolumes(r io.Reader) ([]NFSVolume, []string, error) {
	var out []NFSVolume
	var warnings []string
	err := forEachRow(r, func(n int, f []string) {
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
	if err != nil {
		return nil, warnings, fmt.Errorf("nfsfs volumes: %w", err)
	}
	return out, warnings, nil
}

// forEachRow calls fn with the fields of every non-empty line except the "NV ..." header,
// and returns scanLines' error.
func forEachRow(r io.Reader, fn func(line int, fields []string)) error {
	return scanLines(r, func(n int, line string) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "NV" {
			return
		}
		fn(n, f)
	})
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
// superblocks the kernel confirms as NFS, which are the only bdis nfstune ever writes. A
// file that cannot be parsed whole confirms no device (ReadVolumeDevices says why).
func VolumeDevices(b []byte) map[string]bool {
	devs, _ := volumeDevices(b)
	return devs
}

func volumeDevices(b []byte) (map[string]bool, error) {
	vols, _, err := ParseNFSVolumes(bytes.NewReader(b))
	if err != nil {
		return map[string]bool{}, err
	}
	devs := make(map[string]bool, len(vols))
	for _, v := range vols {
		if hostfs.ValidDevice(v.Device) {
			devs[v.Device] = true
		}
	}
	return devs, nil
}
