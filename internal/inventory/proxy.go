package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// Proxy kinds: the local helper a proxied mount goes through. The kernel sees only the
// loopback address and the helper's port; the helper's state files name the server.
const (
	// ProxyEFS is efs-utils' efs-proxy (efs-utils 2.0 and later, TLS or not).
	ProxyEFS = "efs-proxy"
	// ProxyEFSStunnel is efs-utils' stunnel mode (efs-utils before 2.0, or the stunnel
	// mount option): a TLS tunnel.
	ProxyEFSStunnel = "efs-stunnel"
	// ProxyAZNFS is AZNFS' stunnel for Azure Files NFSv4.1 encryption in transit.
	ProxyAZNFS = "aznfs-stunnel"
	// ProxyLoopback is a server on a loopback address with a port other than 2049 that no
	// helper's state names: some local forwarder, service unknown.
	ProxyLoopback = "loopback"
)

// ProxyKinds are the values Proxy.Kind takes, for bounded metric labels.
var ProxyKinds = []string{ProxyEFS, ProxyEFSStunnel, ProxyAZNFS, ProxyLoopback}

// Proxy is the local helper between the kernel NFS client and the real server.
type Proxy struct {
	// Kind is one of ProxyKinds.
	Kind string `json:"kind"`
	// Port is the local port the kernel connects to (the port= mount option).
	Port int `json:"port"`
	// Upstream is the server the helper forwards to, as its state names it: the EFS mount
	// target's DNS name or address, the storage account's endpoint. Empty when unknown.
	Upstream string `json:"upstream,omitempty"`
	// FileSystemID is the EFS file system ("fs-0123abcd"); empty for other helpers.
	FileSystemID string `json:"file_system_id,omitempty"`
	// TLS is true when the helper encrypts the traffic, nil when unknown.
	TLS *bool `json:"tls,omitempty"`
	// State is the helper file the attribution comes from (its host path).
	State string `json:"state,omitempty"`
	// ReadAheadKB is what the helper itself writes to read_ahead_kb after the mount (efs-utils
	// optimize_readahead: 15 x rsize); 0 when it writes nothing or it is not known.
	ReadAheadKB int `json:"read_ahead_kb,omitempty"`
	// BypassPort is set when /proc/fs/nfsfs/volumes shows that the superblock uses a kernel
	// NFS client on another port than the proxy's: NFSv4.1 trunking detection gave it an
	// existing client of the same server, and its requests do not go through the proxy.
	BypassPort int `json:"bypass_port,omitempty"`
}

// Where the helpers keep their state (sources: aws/efs-utils src/efs_utils_common/constants.py
// STATE_FILE_DIR and CONFIG_FILE; Azure/AZNFS-mount src/nfsv4mountscript.sh STUNNELDIR).
// /var/run is a link to /run on current distributions, so /run/efs is tried first: an
// absolute link would leave the root when the host is mounted below /host.
var (
	efsStateDirs  = [][]string{{"run", "efs"}, {"var", "run", "efs"}}
	efsConfig     = []string{"etc", "amazon", "efs", "efs-utils.conf"}
	aznfsStunnels = []string{"etc", "stunnel", "microsoft", "aznfs", "nfsv4_fileShare"}
)

// ProxyStateDirs are the host directories AttributeProxies reads, as absolute host paths:
// what a container must see below its root for proxied mounts to be attributed (the
// agent's hostPath volumes in package render).
func ProxyStateDirs() []string {
	var dirs []string
	efsConfigDir := efsConfig[:len(efsConfig)-1]
	for _, d := range append(slices.Clone(efsStateDirs), efsConfigDir, aznfsStunnels) {
		dirs = append(dirs, "/"+path.Join(d...))
	}
	return dirs
}

const (
	// maxStateFile caps a helper state or configuration file: they are a few hundred bytes.
	maxStateFile = 64 << 10
	// maxStateEntries caps how many directory entries of a state directory are looked at.
	maxStateEntries = 4096
	// nfsPort is the NFS port a mount uses when it names none (RFC 7530 section 3.1).
	nfsPort = 2049
)

// loopbackPort returns the port of a mount that reaches its server through a local
// forwarder: a loopback server address and a port= other than 2049, as fs/nfs/super.c
// nfs_show_mount_options prints it. 0 for any other mount: the lab's and most test
// servers listen on 127.0.0.1:2049 and are not proxied.
func loopbackPort(m *Mount) int {
	a, err := netip.ParseAddr(strings.Trim(m.serverAddr(), "[]"))
	if err != nil || !a.Unmap().IsLoopback() {
		return 0
	}
	p, err := strconv.Atoi(m.Options["port"])
	if err != nil || p <= 0 || p > 65535 || p == nfsPort {
		return 0
	}
	return p
}

// AttributeProxies finds, for every mount that ParseMountInfo marked as going through a
// loopback proxy, the helper that owns the port and the server behind it: efs-utils'
// state files (/var/run/efs/fs-<id>.<mountpoint>.<port>, JSON, and the tunnel's
// stunnel-config.<same name>) and AZNFS' stunnel configurations (/etc/stunnel/microsoft/aznfs/
// nfsv4_fileShare/stunnel_<account>.conf). A recognised mount gets the real backend
// (aws-efs or azure-files). Only those directories are read, each file with a size cap and
// without following a final symbolic link; never a mount point. What cannot be read leaves
// the mount as ProxyLoopback and adds a warning, except a helper that is not installed.
func AttributeProxies(root hostfs.Root, mounts []Mount) []string {
	var proxied []*Mount
	for i := range mounts {
		if mounts[i].Proxy != nil {
			proxied = append(proxied, &mounts[i])
		}
	}
	if len(proxied) == 0 {
		return nil
	}
	var warnings []string
	efs, w := readEFSStates(root)
	warnings = append(warnings, w...)
	var efsReadAhead *bool
	az, w := readAZNFSTunnels(root)
	warnings = append(warnings, w...)
	for _, m := range proxied {
		if s := efs.match(m.Proxy.Port, m.MountPoints); s != nil {
			if efsReadAhead == nil {
				on, w := efsOptimizesReadAhead(root)
				warnings = append(warnings, w...)
				efsReadAhead = &on
			}
			*m.Proxy = s.proxy
			if *efsReadAhead && m.RSize > 0 {
				// mount_utils.optimize_readahead_window: DEFAULT_NFS_MAX_READAHEAD_MULTIPLIER
				// (15) x the rsize option / 1024. efs-utils passes rsize=1048576 unless the
				// user gives one, and EFS grants 1 MiB, so the effective rsize is the same.
				// Before Linux 5.4 efs-utils writes nothing, but the kernel's own default
				// is that same 15 x rsize.
				m.Proxy.ReadAheadKB = 15 * m.RSize / 1024
			}
			m.Backend = backendAWSEFS
			continue
		}
		if t, ok := az[m.Proxy.Port]; ok {
			*m.Proxy = t
			m.Backend = backendAzureFiles
		}
	}
	return warnings
}

// efsState is one efs-utils state file: the tunnel it describes (proxy.Port is the port
// its name ends in) and the mount point it was made for.
type efsState struct {
	proxy      Proxy
	mountpoint string
}

type efsStates []efsState

// match returns the state of the tunnel on port: the one whose mount point is one of mps,
// else the only one on that port. efs-utils skips a port that a state file already names
// (proxy.py find_existing_mount_using_tls_port), so two files name one port only while a
// stale one waits for the watchdog; then the mount point decides, or nothing does.
func (ss efsStates) match(port int, mps []string) *efsState {
	var found *efsState
	n := 0
	for i := range ss {
		s := &ss[i]
		if s.proxy.Port != port {
			continue
		}
		if slices.Contains(mps, s.mountpoint) {
			return s
		}
		found = s
		n++
	}
	if n == 1 {
		return found
	}
	return nil
}

// efsStateFile is what efs-utils writes (src/efs_utils_common/proxy.py
// write_tunnel_state_file): the tunnel's command line, its configuration files and the
// mount point; fsId is added for TLS mounts (cert_details).
type efsStateFile struct {
	Cmd        []string `json:"cmd"`
	Files      []string `json:"files"`
	Mountpoint string   `json:"mountpoint"`
	FSID       string   `json:"fsId"`
}

// readEFSStates reads efs-utils' state directory. A state file is named
// "<fs-id>.<mount point with / as .>.<port>" (proxy.py get_mount_specific_filename),
// "stunnel-config." prefixes the tunnel's configuration and a "+" suffix the directory of
// its certificate. A "~" prefix marks a mount in progress: efs-utils renames the file when
// mount.nfs4 has returned, after the kernel created the superblock and udev saw its bdi,
// so the udev helper finds only that one.
func readEFSStates(root hostfs.Root) (efsStates, []string) {
	dir, shown, names, err := readStateDir(root, efsStateDirs...)
	if err != nil {
		return nil, []string{fmt.Sprintf("reading efs-utils state: %v", err)}
	}
	var out efsStates
	var warnings []string
	for _, name := range names {
		base := strings.TrimPrefix(name, "~")
		if !strings.HasPrefix(base, "fs-") || strings.HasSuffix(base, "+") {
			continue
		}
		dot := strings.LastIndexByte(base, '.')
		port, err := strconv.Atoi(base[dot+1:])
		if dot < 0 || err != nil || port <= 0 || port > 65535 {
			continue
		}
		fsID, _, _ := strings.Cut(base, ".")
		b, err := readStateFile(filepath.Join(dir, name))
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("reading efs-utils state %s: %v", name, err))
			continue
		}
		var st efsStateFile
		if err := json.Unmarshal(b, &st); err != nil {
			warnings = append(warnings, fmt.Sprintf("efs-utils state %s dropped: %v", name, err))
			continue
		}
		s := efsState{mountpoint: st.Mountpoint, proxy: Proxy{
			Kind:         efsKind(st.Cmd),
			Port:         port,
			FileSystemID: fsID,
			State:        path.Join(shown, name),
		}}
		if st.FSID != "" {
			s.proxy.FileSystemID = st.FSID
		}
		tls := s.proxy.Kind == ProxyEFSStunnel || slices.Contains(st.Cmd, "--tls")
		s.proxy.TLS = &tls
		// The tunnel's configuration is "stunnel-config.<state file name>" in the same
		// directory (proxy.py write_stunnel_config_file); only that name is read, whatever
		// the state's "files" says.
		if b, err := readStateFile(filepath.Join(dir, "stunnel-config."+base)); err == nil {
			s.proxy.Upstream = tunnelConnect(b)
		}
		out = append(out, s)
	}
	return out, warnings
}

// efsKind tells efs-proxy from stunnel by the tunnel's command line (proxy.py
// bootstrap_proxy: [efs-proxy, config, --tls?] or [stunnel, config], after "nsenter
// --net=..." with netns).
func efsKind(cmd []string) string {
	for _, c := range cmd {
		if b := path.Base(c); b == "stunnel" || b == "stunnel5" {
			return ProxyEFSStunnel
		}
	}
	return ProxyEFS
}

// efsOptimizesReadAhead reads optimize_readahead in the [mount] section of
// /etc/amazon/efs/efs-utils.conf (mount_utils.should_revise_readahead). efs-utils ships it
// true, and the EFS CSI driver writes it true; when the file cannot be read (the host's
// /etc is not visible) it is taken as on. A readable file without the key means off, as
// efs-utils reads it (default_value=False).
func efsOptimizesReadAhead(root hostfs.Root) (bool, []string) {
	b, err := readStateFile(root.Path(efsConfig...))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return true, nil
		}
		return true, []string{fmt.Sprintf("reading efs-utils.conf: %v", err)}
	}
	v, ok := iniValue(b, "mount", "optimize_readahead")
	if !ok {
		return false, nil
	}
	switch strings.ToLower(v) {
	case "true", "yes", "on", "1":
		return true, nil
	}
	return false, nil
}

// readAZNFSTunnels reads AZNFS' stunnel configurations for Azure Files NFSv4.1, one per
// storage account (nfsv4mountscript.sh add_stunnel_configuration): a "[<endpoint>]" service
// with "accept = 127.0.0.1:<port>" and "connect = <endpoint>:2049". The result is keyed by
// the accept port.
func readAZNFSTunnels(root hostfs.Root) (map[int]Proxy, []string) {
	dir, shown, names, err := readStateDir(root, aznfsStunnels)
	if err != nil {
		return nil, []string{fmt.Sprintf("reading AZNFS stunnel configuration: %v", err)}
	}
	out := map[int]Proxy{}
	var warnings []string
	for _, name := range names {
		if !strings.HasPrefix(name, "stunnel_") || !strings.HasSuffix(name, ".conf") {
			continue
		}
		b, err := readStateFile(filepath.Join(dir, name))
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("reading AZNFS %s: %v", name, err))
			continue
		}
		port := tunnelAcceptPort(b)
		if port == 0 {
			continue
		}
		tls := true
		out[port] = Proxy{
			Kind:     ProxyAZNFS,
			Port:     port,
			Upstream: tunnelConnect(b),
			TLS:      &tls,
			State:    path.Join(shown, name),
		}
	}
	return out, warnings
}

// readStateDir lists the first of dirs (each a path below root) that exists: its path
// below root, its host path as shown to the user, and at most maxStateEntries names,
// sorted. A missing helper is not an error: it returns no names.
func readStateDir(root hostfs.Root, dirs ...[]string) (dir, shown string, names []string, err error) {
	for _, d := range dirs {
		p := root.Path(d...)
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_DIRECTORY, 0) // a FIFO fails, not blocks
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", "", nil, err
		}
		names, err := f.Readdirnames(maxStateEntries)
		f.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			return "", "", nil, err
		}
		slices.Sort(names)
		return p, "/" + path.Join(d...), names, nil
	}
	return "", "", nil, nil
}

// readStateFile reads a helper's file: a regular file (a final symbolic link is refused,
// a FIFO does not block) of at most maxStateFile bytes.
func readStateFile(p string) ([]byte, error) {
	return hostfs.ReadFileNoFollow(p, maxStateFile)
}

// tunnelConnect returns the host of the first "connect = host:port" line of a stunnel-style
// configuration (stunnel(8); efs-proxy reads the same file).
func tunnelConnect(b []byte) string {
	v, ok := iniValue(b, "", "connect")
	if !ok {
		return ""
	}
	if host, _, err := net.SplitHostPort(v); err == nil {
		return host
	}
	return v
}

// tunnelAcceptPort returns the port of the first "accept = [host:]port" line, 0 if none.
func tunnelAcceptPort(b []byte) int {
	v, ok := iniValue(b, "", "accept")
	if !ok {
		return 0
	}
	if _, p, err := net.SplitHostPort(v); err == nil {
		v = p
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > 65535 {
		return 0
	}
	return n
}

// iniValue returns the first "key = value" of an INI-style file, in section when it is
// not empty (in any section otherwise). Keys compare case-insensitively. b is a whole
// file, already read and capped: its lines are split in memory, with no line limit at
// which a scan could stop short.
func iniValue(b []byte, section, key string) (string, bool) {
	cur := ""
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			cur = strings.TrimSpace(line[1 : len(line)-1])
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), key) {
			continue
		}
		if section != "" && !strings.EqualFold(cur, section) {
			continue
		}
		return strings.TrimSpace(v), true
	}
	return "", false
}

// ServerName is the server a mount's data lives on, for what must read the same on every
// client of it (the server label of metrics, service limits): the server as mounted, or,
// for a mount through a local proxy whose helper names it, the server behind it. For EFS
// that is the file system ID, which every node shares whatever mount target it reaches;
// for AZNFS the storage account's endpoint. An unattributed proxy stays 127.0.0.1.
func (m *Mount) ServerName() string {
	switch p := m.Proxy; {
	case p == nil:
	case p.FileSystemID != "":
		return p.FileSystemID
	case p.Upstream != "":
		return p.Upstream
	}
	return m.Server
}
