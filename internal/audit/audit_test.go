package audit

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/procfs"

	"github.com/nfstune/nfstune/internal/golden"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/readahead"
	"github.com/nfstune/nfstune/internal/shell"
)

func intp(n int) *int { return &n }

// healthyAzureFiles is an Azure Files mount as the kernel shows it when it matches the
// built-in azure-files/general profile: every rule must stay quiet on it.
func healthyAzureFiles() inventory.Mount {
	return inventory.Mount{
		Device:      "0:53",
		MountPoints: []string{"/mnt/share1"},
		Server:      "nfsacct01.file.core.windows.net",
		ServerAddr:  "10.1.0.4",
		Export:      "/nfsacct01/share1",
		FSType:      "nfs4",
		Version:     "4.1",
		ReadAheadKB: intp(15360),
		NConnect:    4,
		Connections: 4,
		RSize:       1048576,
		WSize:       1048576,
		Backend:     policy.BackendAzureFiles,
		Options: map[string]string{
			"rw": "", "relatime": "", "vers": "4.1", "rsize": "1048576", "wsize": "1048576", "namlen": "255", "hard": "",
			"proto": "tcp", "nconnect": "4", "timeo": "600", "retrans": "2", "sec": "sys", "clientaddr": "10.1.0.10",
			"local_lock": "none", "addr": "10.1.0.4", "noresvport": "",
			"acregmin": "30", "acregmax": "30", "acdirmin": "30", "acdirmax": "30", // actimeo=30
		},
		ClientGroup: "tcp://10.1.0.4/v4.1",
		Stats:       &inventory.Stats{StatVersion: "1.1"},
	}
}

// healthyInventory wraps mounts with a modern kernel and a udev rule giving 16384 KiB.
func healthyInventory(mounts ...inventory.Mount) *inventory.Inventory {
	inv := &inventory.Inventory{
		KernelRelease: "6.1.0-28-amd64",
		Mounts:        mounts,
		Sysctls:       map[string]string{"sunrpc.tcp_slot_table_entries": "2", "sunrpc.tcp_max_slot_table_entries": "65536", "net.ipv4.tcp_rmem": "4096 131072 6291456"},
		ReadAhead: inventory.ReadAheadConfig{UdevRules: []inventory.UdevRule{{
			File: "/etc/udev/rules.d/99-nfs.rules", Line: 1, ReadAheadKB: intp(16384),
			Text: `SUBSYSTEM=="bdi", ACTION=="add", ATTR{read_ahead_kb}="16384"`,
		}}},
	}
	groups := map[string]*inventory.Group{}
	for _, m := range mounts {
		g := groups[m.ClientGroup]
		if g == nil {
			inv.Groups = append(inv.Groups, inventory.Group{Key: m.ClientGroup, ServerAddr: m.ServerAddr, Version: m.Version, Proto: "tcp"})
			g = &inv.Groups[len(inv.Groups)-1]
			groups[m.ClientGroup] = g
		}
		g.Devices = append(g.Devices, m.Device)
		g.NConnect = max(g.NConnect, m.NConnect)
		g.Connections = max(g.Connections, m.Connections)
	}
	return inv
}

func TestHealthyMountHasNoFindings(t *testing.T) {
	t.Parallel()
	rep := Run(healthyInventory(healthyAzureFiles()), policy.Default())
	if len(rep.Findings) != 0 {
		t.Fatalf("findings on a healthy mount: %+v", rep.Findings)
	}
	if rep.Mounts[0].Backend != policy.BackendAzureFiles || rep.Desired["0:53"].Rule != policy.RuleBuiltIn {
		t.Errorf("backend %q rule %q", rep.Mounts[0].Backend, rep.Desired["0:53"].Rule)
	}
}

// ruleCase changes the healthy inventory and says how many findings of the rule's ID it
// must produce, with what severity, and what their text must contain.
type ruleCase struct {
	name     string
	config   string // optional policy YAML
	mutate   func(inv *inventory.Inventory)
	want     int
	severity string
	contains []string // substrings of message + fix of the first finding
	absent   []string // substrings message + fix must not have
	// traffic is the first mount's evidence over a window of two samples (Options.Traffic).
	traffic *readahead.Evidence
	// classes is the first mount's pods' traffic classes (Options.Classes).
	classes []readahead.PodClass
	// mapped are the first mount's pods reading it through mmap (Options.MappedReaders).
	mapped []MappedReader
}

// podClasses is a mount's pods with these classes, by UID a, b, c...
func podClasses(classes ...readahead.Class) []readahead.PodClass {
	var out []readahead.PodClass
	for i, c := range classes {
		out = append(out, readahead.PodClass{UID: string(rune('a' + i)), Class: c, Why: "figures"})
	}
	return out
}

// unseenFaults gives pods, in order, the major faults their cgroups took that nothing
// places (PodClass.UnseenMajorFaults); pods past the last count take none.
func unseenFaults(pods []readahead.PodClass, faults ...uint64) []readahead.PodClass {
	for i, n := range faults {
		pods[i].UnseenMajorFaults = n
	}
	return pods
}

// readSinceMount sets the first mount's counters since its mount: app bytes read by
// applications (normal), server bytes of READ payload.
func readSinceMount(app, server uint64) func(inv *inventory.Inventory) {
	return func(inv *inventory.Inventory) {
		st := m0(inv).Stats
		st.Age = 10 * time.Minute
		st.Bytes.Read, st.Bytes.ReadTotal = app, server
	}
}

// windowBound is 10 s of a sequential reader of the healthy share (15360 KiB read-ahead,
// 1 MiB READs: 15 READs per window) with inFlight READs outstanding on average.
func windowBound(inFlight float64, reads uint64, overRead float64) *readahead.Evidence {
	return &readahead.Evidence{
		Seconds: 10, ReadAheadKB: 15360, RSize: 1048576, Reads: reads,
		ServerReadBytes: reads << 20, AppReadBytes: uint64(float64(reads<<20) / overRead),
		ReadRTTSeconds: 10 * inFlight, OverRead: overRead, AvgReadBytes: 1 << 20,
		InFlight: inFlight, WindowReads: 15, WindowBound: inFlight / 15,
	}
}

// section is an nfsmount.conf section of /etc/nfsmount.conf with one key.
func section(kind, arg, key, value string) inventory.MountSection {
	return inventory.MountSection{Kind: kind, Arg: arg, Headers: []string{"/etc/nfsmount.conf:1"},
		Options: []inventory.SectionOption{{Key: key, Value: value, From: "/etc/nfsmount.conf:1"}}}
}

// withSections gives the host these nfsmount.conf sections and a mount.nfs that reads
// drop-ins.
func withSections(secs ...inventory.MountSection) func(*inventory.Inventory) {
	return func(inv *inventory.Inventory) {
		inv.MountDefaults = &inventory.MountDefaults{
			Mounter:  &inventory.Mounter{Path: "/sbin/mount.nfs", ReadsConfig: true, ReadsDropIns: true},
			Files:    []string{"/etc/nfsmount.conf"},
			Sections: secs,
		}
	}
}

func strp(s string) *string { return &s }

// withIdentity sets the client identity as inventory would read it.
func withIdentity(host string, identifier, uniqueID *string) func(*inventory.Inventory) {
	return func(inv *inventory.Inventory) {
		c := &inventory.ClientIdentity{Hostname: host, Identifier: identifier, UniqueID: uniqueID, Source: inventory.IdentityHostname, Fingerprint: "0123abcd"}
		switch {
		case identifier != nil && *identifier != "":
			c.Source = inventory.IdentityIdentifier
		case uniqueID != nil && *uniqueID != "":
			c.Source = inventory.IdentityUniqueID
		}
		inv.ClientIdentity = c
	}
}

const observeConfig = `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {server: "*.file.core.windows.net"}
    mode: observe
`

// m0 returns the first mount, for mutations.
func m0(inv *inventory.Inventory) *inventory.Mount { return &inv.Mounts[0] }

func requested(m *inventory.Mount, kv ...string) {
	m.Requested = &inventory.Requested{Source: "/etc/fstab:3", Options: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Requested.Options[kv[i]] = kv[i+1]
	}
}

const anfConfig = `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {cidr: 10.1.0.0/24}
    backend: azure-netapp-files
`

// fixedConfig turns the default adaptive read-ahead off: every mount's target is its
// profile's fixed value.
const fixedConfig = `apiVersion: nfstune.io/v1alpha1
kind: Policy
defaults: {readAheadAdaptive: false}
`

// exactConfig is a rule as bench sweep writes it: a measured read-ahead, exact.
const exactConfig = `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - name: bench sweep seq-read
    match: {mountpoint: /mnt/share1}
    readAheadKB: 1024
    readAheadExact: true
`

// bareIP makes m a mount of the healthy share by its address alone (as through a private
// endpoint): the generic backend, with the given rsize.
func bareIP(m *inventory.Mount, rsize int) {
	m.Server, m.Backend = m.ServerAddr, policy.BackendGeneric
	m.RSize, m.Options["rsize"] = rsize, strconv.Itoa(rsize)
}

// longhornSoftErr makes the first mount a Longhorn RWX volume with Longhorn's default
// options, on kernel release.
func longhornSoftErr(release string) func(*inventory.Inventory) {
	return func(inv *inventory.Inventory) {
		inv.KernelRelease = release
		m := m0(inv)
		m.Server, m.ServerAddr, m.Export, m.Backend = "10.43.12.7", "10.43.12.7", "/pvc-3f1c2a9e-1b2d-4c5e-8f90-a1b2c3d4e5f6", policy.BackendLonghorn
		m.MountPoints = []string{"/var/lib/kubelet/plugins/kubernetes.io/csi/driver.longhorn.io/0f1e2d3c/globalmount"}
		delete(m.Options, "hard")
		m.Options["softerr"], m.Options["timeo"], m.Options["retrans"] = "", "600", "5"
	}
}

var ruleTests = map[string][]ruleCase{
	"NFS051": {
		{name: "a section for the address, the mount by name", mutate: withSections(section(inventory.SectionServer, "10.1.0.4", "nconnect", "4")),
			want: 1, severity: SeverityWarning, contains: []string{`[ Server "10.1.0.4" ] does not apply`, `add [ Server "nfsacct01.file.core.windows.net" ] with nconnect=4`}},
		{name: "a section for a name /etc/hosts gives the address of, the mount by address", mutate: func(inv *inventory.Inventory) {
			sec := section(inventory.SectionServer, "filer", "nconnect", "4")
			sec.Addrs = []string{"10.1.0.4"}
			withSections(sec)(inv)
			m0(inv).Server = "10.1.0.4"
		}, want: 1, severity: SeverityWarning, contains: []string{"which /etc/hosts gives 10.1.0.4"}},
		{name: "sections for both", mutate: withSections(section(inventory.SectionServer, "10.1.0.4", "nconnect", "4"), section(inventory.SectionServer, "NFSACCT01.file.core.windows.net", "nconnect", "4"))},
		{name: "a section for another server", mutate: withSections(section(inventory.SectionServer, "10.9.9.9", "nconnect", "4"))},
	},
	"NFS052": {
		{name: "a global soft", mutate: withSections(section(inventory.SectionGlobal, "", "soft", "True")),
			want: 1, severity: SeverityWarning, contains: []string{"gives every mount soft, against the profile's hard", "even after a mount's own hard", "remove soft from [ NFSMount_Global_Options ] at /etc/nfsmount.conf:1"}},
		{name: "a global nconnect below the profile", mutate: withSections(section(inventory.SectionGlobal, "", "nconnect", "2")), want: 1, severity: SeverityWarning},
		{name: "a server section sets it first", mutate: withSections(section(inventory.SectionGlobal, "", "nconnect", "2"), section(inventory.SectionServer, "nfsacct01.file.core.windows.net", "nconnect", "4"))},
		{name: "a global option the profile has no opinion on", mutate: withSections(section(inventory.SectionGlobal, "", "retrans", "3"))},
	},
	"NFS053": {
		{name: "a CSI mount without the section's options", mutate: func(inv *inventory.Inventory) {
			withSections(section(inventory.SectionServer, "nfsacct01.file.core.windows.net", "timeo", "150"))(inv)
			m0(inv).MountPoints = []string{"/var/lib/kubelet/pods/0b5c2d9e-1111-4a4a-8b8b-123456789abc/volumes/kubernetes.io~csi/pv-data/mount"}
		}, want: 1, severity: SeverityWarning, contains: []string{"CSI node plugin", "timeo=150 (/etc/nfsmount.conf:1)", "StorageClass"}},
		{name: "a CSI mount that has them (the plugin reads the host's files)", mutate: func(inv *inventory.Inventory) {
			withSections(section(inventory.SectionServer, "nfsacct01.file.core.windows.net", "timeo", "600"))(inv)
			m0(inv).MountPoints = []string{"/var/lib/kubelet/pods/0b5c2d9e-1111-4a4a-8b8b-123456789abc/volumes/kubernetes.io~csi/pv-data/mount"}
		}},
		{name: "drop-ins and a mount.nfs before 2.5.3", mutate: func(inv *inventory.Inventory) {
			sec := section(inventory.SectionServer, "nas", "nconnect", "4")
			sec.Headers = []string{"/etc/nfsmount.conf.d/50-nfstune.conf:6"}
			withSections(sec)(inv)
			inv.MountDefaults.Files = []string{"/etc/nfsmount.conf.d/50-nfstune.conf"}
			inv.MountDefaults.Mounter.ReadsDropIns = false
		}, want: 1, severity: SeverityWarning, contains: []string{"nfs-utils before 2.5.3", "not read: /etc/nfsmount.conf.d/50-nfstune.conf"}},
		{name: "drop-ins and a mount.nfs that reads them", mutate: func(inv *inventory.Inventory) {
			withSections(section(inventory.SectionServer, "nas", "nconnect", "4"))(inv)
			inv.MountDefaults.Files = []string{"/etc/nfsmount.conf.d/50-nfstune.conf"}
		}},
	},
	"NFS054": {
		{name: "a server section with less nconnect than the profile", mutate: func(inv *inventory.Inventory) {
			sec := section(inventory.SectionServer, "nfsacct01.file.core.windows.net", "nconnect", "2")
			sec.Headers = []string{"/etc/nfsmount.conf.d/90-local.conf:3"}
			sec.Options[0].From = sec.Headers[0]
			withSections(sec)(inv)
		}, want: 1, severity: SeverityWarning, contains: []string{
			`nfsmount.conf [ Server "nfsacct01.file.core.windows.net" ] gives the next mount nconnect=2, but the profile`,
			`in /etc/nfsmount.conf.d/90-local.conf, under [ Server "nfsacct01.file.core.windows.net" ], change nconnect=2 to nconnect=4`}},
		{name: "a mount point section against the profile's vers", mutate: withSections(section(inventory.SectionMountPoint, "/mnt/share1", "vers", "3")),
			want: 1, severity: SeverityWarning, contains: []string{`[ MountPoint "/mnt/share1" ]`, "change vers=3 to vers=4.1"}},
		{name: "more nconnect than the profile", mutate: withSections(section(inventory.SectionServer, "nfsacct01.file.core.windows.net", "nconnect", "8"))},
		{name: "the profile's own values", mutate: withSections(section(inventory.SectionServer, "nfsacct01.file.core.windows.net", "nconnect", "4"))},
		{name: "observe mode", config: observeConfig, mutate: withSections(section(inventory.SectionServer, "nfsacct01.file.core.windows.net", "nconnect", "2"))},
	},
	"NFS045": {
		{name: "the host name alone", mutate: withIdentity("node-17", nil, strp("")), want: 1, severity: SeverityWarning,
			contains: []string{`host name "node-17" alone`, "/sys/fs/nfs/net/nfs_client/identifier"}},
		{name: "an image's host name alone", mutate: withIdentity("debian", strp(""), nil), want: 1, severity: SeverityError, contains: []string{"image's default"}},
		{name: "an uninitialised machine-id as identifier", mutate: withIdentity("node-17", strp("uninitialized"), nil), want: 1, severity: SeverityWarning},
		{name: "an identifier", mutate: withIdentity("debian", strp("5e2a9c"), nil)},
		{name: "a module parameter", mutate: withIdentity("node-17", strp(""), strp("5e2a9c"))},
		{name: "unknown", mutate: func(inv *inventory.Inventory) { inv.ClientIdentity = nil }},
		{name: "no NFS mount on the node", mutate: func(inv *inventory.Inventory) {
			withIdentity("node-17", nil, strp(""))(inv)
			inv.Mounts = nil
		}},
	},
	"NFS003": {
		// 3.9 GiB from the server for 1 GiB read: 15360 / 3.9 = 3938 KiB, in whole READs 3072.
		{name: "3.9x over 3.9 GiB fires", mutate: readSinceMount(1<<30, 39<<30/10), want: 1, severity: SeverityWarning,
			contains: []string{"3.9x the bytes applications read", "echo 3072 > /sys/class/bdi/0:53/read_ahead_kb"}},
		{name: "1.2x is normal", mutate: readSinceMount(1<<30, 12<<30/10)},
		{name: "3.9x over 100 MiB is too little to tell", mutate: readSinceMount(100<<20*10/39, 100<<20)},
		{name: "no read(2) at all (mmap readers): NFS005's", mutate: readSinceMount(0, 1<<30)},
		{name: "12x over 1 GiB: NFS005's", mutate: readSinceMount(1<<30/12, 1<<30)},
		{name: "read-ahead already one READ: memory, not read-ahead", mutate: func(inv *inventory.Inventory) {
			readSinceMount(1<<30, 4<<30)(inv)
			m0(inv).ReadAheadKB = intp(1024)
		}, want: 1, severity: SeverityWarning, contains: []string{"more memory"}},
		{name: "no statistics", mutate: func(inv *inventory.Inventory) { m0(inv).Stats = nil }},
	},
	"NFS005": {
		{name: "no read(2) over 3 GiB fires", mutate: readSinceMount(0, 3<<30), want: 1, severity: SeverityInfo,
			contains: []string{"sent 3.00 GiB of READs and applications read 0.00 GiB with read(2)", "echo 128 > /sys/class/bdi/0:53/read_ahead_kb", "MADV_RANDOM"}},
		{name: "12x over 1 GiB fires", mutate: readSinceMount(1<<30/12, 1<<30), want: 1, severity: SeverityInfo},
		{name: "the per-pod collector names the mapping pods, busiest first", mutate: readSinceMount(0, 3<<30), mapped: []MappedReader{
			{PodUID: "p1", FaultBytesPerSecond: 30 << 20, MajorFaultsPerSecond: 480}, {PodUID: "p2", FaultBytesPerSecond: 1 << 20},
			{PodUID: "p3", FaultBytesPerSecond: 1 << 19}, {PodUID: "p4", FaultBytesPerSecond: 1 << 18}},
			want: 1, severity: SeverityInfo, contains: []string{"the pods reading it through mmap: pod p1 (30.0 MiB/s through page faults, 480 major faults/s), pod p2 (1.0 MiB/s", "pod p3", "and 1 more"}},
		{name: "9x over 1 GiB is read(2)'s waste (NFS003)", mutate: readSinceMount(1<<30/9, 1<<30)},
		{name: "no read(2) over 100 MiB is too little to tell", mutate: readSinceMount(0, 100<<20)},
		{name: "no statistics", mutate: func(inv *inventory.Inventory) { m0(inv).Stats = nil }},
	},
	"NFS006": {
		{name: "a streaming pod and a thrashing one", classes: podClasses(readahead.StreamingRead, readahead.Thrashing, readahead.StreamingRead),
			want: 1, severity: SeverityWarning, contains: []string{"pods a, c read files in order, pod b thrash", "nosharecache"}},
		{name: "a streaming pod and a mapped random reader", classes: podClasses(readahead.StreamingRead, readahead.MappedRandom),
			want: 1, severity: SeverityWarning, contains: []string{"pod a read files in order, pod b read a mapped file at random", "nosharecache", "MADV_RANDOM"}},
		{name: "a model load through mmap beside a thrashing pod", classes: podClasses(readahead.MappedSequential, readahead.Thrashing),
			want: 1, severity: SeverityWarning, contains: []string{"pod a read files in order, pod b thrash", "memory limit"}},
		{name: "pods alike", classes: podClasses(readahead.StreamingRead, readahead.StreamingRead)},
		{name: "mapped random readers alike", classes: podClasses(readahead.MappedRandom, readahead.MappedRandom)},
		{name: "thrashing beside random read(2)s, which no window changes", classes: podClasses(readahead.RandomRead, readahead.Thrashing)},
		{name: "a pod not seen is not assumed", classes: podClasses(readahead.StreamingRead, readahead.Unknown)},
		{name: "no classes"},
	},
	"NFS007": {
		{name: "a pod faulting where nothing places it", classes: unseenFaults(podClasses(readahead.StreamingRead, readahead.Unknown), 0, 412), want: 1, severity: SeverityInfo, contains: []string{"pod b took major faults", "agent.podIO",
			"with pod a, reading files in order", "nosharecache", "MADV_RANDOM"}},
		{name: "faulting pods alone on the superblock", classes: unseenFaults(podClasses(readahead.Unknown, readahead.Unknown, readahead.Thrashing), 40, 33), want: 1, severity: SeverityInfo, contains: []string{"pods a, b took major faults", "agent.podIO"},
			absent: []string{"reading files in order", "nosharecache"}},
		{name: "a mapped sequential reader beside the faults", classes: unseenFaults(podClasses(readahead.Unknown, readahead.MappedSequential, readahead.StreamingRead), 64), want: 1, severity: SeverityInfo, contains: []string{"pod a took major faults", "It shares the superblock", "with pods b, c, reading files in order"}},
		{name: "two faulting pods beside a streaming one", classes: unseenFaults(podClasses(readahead.Unknown, readahead.StreamingRead, readahead.Unknown), 64, 0, 48), want: 1, severity: SeverityInfo, contains: []string{"pods a, c took major faults", "They share the superblock", "with pod b, reading"}},
		{name: "no unplaced faults", classes: podClasses(readahead.StreamingRead, readahead.Unknown)},
		{name: "no classes"},
	},
	"NFS004": {
		// 12 READs in flight of the 15 one window holds: 0.8.
		{name: "window full fires", traffic: windowBound(12, 3000, 1.0), want: 1, severity: SeverityInfo,
			contains: []string{"12.0 READs were in flight on average, 80% of the 15.0 one window allows", "echo 30720 > /sys/class/bdi/0:53/read_ahead_kb"}},
		{name: "half the window", traffic: windowBound(7.5, 3000, 1.0)},
		{name: "window full but wasting (NFS003's case)", traffic: windowBound(12, 3000, 2.0)},
		{name: "window full over 50 READs", traffic: windowBound(12, 50, 1.0)},
		{name: "no second sample"},
	},
	"NFS001": {
		{name: "128 KiB fires", mutate: func(inv *inventory.Inventory) { m0(inv).ReadAheadKB = intp(128) }, want: 1, severity: SeverityWarning,
			contains: []string{"128 KiB", "below the 1024 KiB floor of adaptive read-ahead", "up to 15360 KiB", "echo 1024 > /sys/class/bdi/0:53/read_ahead_kb"}},
		{name: "128 KiB fires, fixed", config: fixedConfig, mutate: func(inv *inventory.Inventory) { m0(inv).ReadAheadKB = intp(128) }, want: 1, severity: SeverityWarning,
			contains: []string{"128 KiB", "echo 15360 > /sys/class/bdi/0:53/read_ahead_kb"}},
		{name: "inside the adaptive bounds is fine", mutate: func(inv *inventory.Inventory) { m0(inv).ReadAheadKB = intp(4096) }},
		{name: "the agent's window for mapped random readers", mutate: func(inv *inventory.Inventory) { m0(inv).ReadAheadKB = intp(128) },
			mapped: []MappedReader{{PodUID: "6a1b2c3d-0000-4000-8000-000000000001", FaultBytesPerSecond: 1 << 20}}},
		{name: "above profile is fine", mutate: func(inv *inventory.Inventory) { m0(inv).ReadAheadKB = intp(16384) }},
		{name: "unreadable is not guessed", mutate: func(inv *inventory.Inventory) { m0(inv).ReadAheadKB = nil }},
		{name: "generic at the kernel default: 15 x rsize", config: fixedConfig, mutate: func(inv *inventory.Inventory) {
			bareIP(m0(inv), 262144)
			m0(inv).ReadAheadKB = intp(128)
		}, want: 1, severity: SeverityWarning, contains: []string{"below the 3840 KiB the generic/general profile asks for (15 x rsize 256 KiB)", "echo 3840 >"}},
		{name: "generic below one rsize", config: fixedConfig, mutate: func(inv *inventory.Inventory) {
			bareIP(m0(inv), 1048576)
			m0(inv).ReadAheadKB = intp(512)
		}, want: 1, severity: SeverityWarning, contains: []string{"echo 15360 >"}},
		{name: "generic keeps a chosen value", config: fixedConfig, mutate: func(inv *inventory.Inventory) {
			bareIP(m0(inv), 1048576)
			m0(inv).ReadAheadKB = intp(1024)
		}, want: 1, severity: SeverityInfo, contains: []string{"kept as a deliberate choice", "readAheadKB: 1024"}},
		{name: "generic above the target is fine", mutate: func(inv *inventory.Inventory) {
			bareIP(m0(inv), 65536)
			m0(inv).ReadAheadKB = intp(1024)
		}},
		{name: "exact rule lowers", config: exactConfig, mutate: func(inv *inventory.Inventory) { m0(inv).ReadAheadKB = intp(15360) },
			want: 1, severity: SeverityWarning, contains: []string{"sets exactly 1024 KiB", "echo 1024 >"}},
		{name: "exact rule met", config: exactConfig, mutate: func(inv *inventory.Inventory) { m0(inv).ReadAheadKB = intp(1024) }},
	},
	"NFS033": {
		{name: "profile's noresvport missing", mutate: func(inv *inventory.Inventory) { delete(m0(inv).Options, "noresvport") }, want: 1, severity: SeverityInfo,
			contains: []string{"sets noresvport, the mount has no noresvport", "noresvport,proto=tcp"}},
		{name: "observe mode: apply changes nothing", config: `apiVersion: nfstune.io/v1alpha1
kind: Policy
defaults: {mode: observe}
`, mutate: func(inv *inventory.Inventory) { delete(m0(inv).Options, "noresvport") }},
		{name: "nconnect below the profile is NFS010's", mutate: func(inv *inventory.Inventory) {
			m0(inv).NConnect, m0(inv).Connections = 1, 1
			delete(m0(inv).Options, "nconnect")
		}},
		{name: "every option of the profile present"},
	},
	"NFS002": {
		{name: "128 KiB under rsize 1 MiB", mutate: func(inv *inventory.Inventory) { m0(inv).ReadAheadKB = intp(128) }, want: 1, severity: SeverityWarning,
			contains: []string{"read-ahead of 128 KiB is below the rsize of 1024 KiB", "echo 1024 > /sys/class/bdi/0:53/read_ahead_kb"}},
		{name: "profile below rsize names the rule", config: `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - name: low
    readAheadKB: 256
`, mutate: func(inv *inventory.Inventory) { m0(inv).ReadAheadKB = intp(256) }, want: 1, severity: SeverityWarning,
			contains: []string{"raise readAheadKB 256 of config.yaml rule 1 (low) to at least 1024"}},
		{name: "observe mode still warns", config: `apiVersion: nfstune.io/v1alpha1
kind: Policy
defaults: {mode: observe}
`, mutate: func(inv *inventory.Inventory) { m0(inv).ReadAheadKB = intp(128) }, want: 1, severity: SeverityWarning},
		{name: "equal to rsize is fine", mutate: func(inv *inventory.Inventory) { m0(inv).ReadAheadKB = intp(1024) }},
		{name: "an exact rule's value below rsize is its choice", config: `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - name: mapped at random
    readAheadKB: 128
    readAheadExact: true
`, mutate: func(inv *inventory.Inventory) { m0(inv).ReadAheadKB = intp(128) }},
		{name: "below an exact rule's value still warns", config: `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - name: mapped at random
    readAheadKB: 256
    readAheadExact: true
`, mutate: func(inv *inventory.Inventory) { m0(inv).ReadAheadKB = intp(128) }, want: 1, severity: SeverityWarning},
		{name: "rsize unknown", mutate: func(inv *inventory.Inventory) { m0(inv).ReadAheadKB, m0(inv).RSize = intp(128), 0 }},
	},
	"NFS080": {
		{name: "bare IP, /account/share over 4.1", mutate: func(inv *inventory.Inventory) { bareIP(m0(inv), 1048576) }, want: 1, severity: SeverityInfo,
			contains: []string{"as Azure Files does", `- {match: {server: "10.1.0.4", export: "/nfsacct01/*"}, backend: azure-files}`}},
		{name: "the proposed config line declares the backend", config: `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - {match: {server: "10.1.0.4", export: "/nfsacct01/*"}, backend: azure-files}
`, mutate: func(inv *inventory.Inventory) { bareIP(m0(inv), 1048576) }},
		{name: "not over 4.1", mutate: func(inv *inventory.Inventory) { bareIP(m0(inv), 1048576); m0(inv).Version = "4.2" }},
		{name: "deeper export", mutate: func(inv *inventory.Inventory) { bareIP(m0(inv), 1048576); m0(inv).Export = "/srv/nfs/share" }},
		{name: "a server name", mutate: func(inv *inventory.Inventory) { m0(inv).Backend = policy.BackendGeneric }},
		{name: "a config rule applies", config: anfConfig, mutate: func(inv *inventory.Inventory) { bareIP(m0(inv), 1048576) }},
	},
	"NFS010": {
		{name: "no nconnect on azure files", mutate: func(inv *inventory.Inventory) {
			delete(m0(inv).Options, "nconnect")
			m0(inv).NConnect, m0(inv).Connections = 0, 1
		}, want: 1, severity: SeverityWarning, contains: []string{"not used", "nconnect=4", "/mnt/share1 nfs4"}},
		{name: "generic backend does not ask", mutate: func(inv *inventory.Inventory) {
			m0(inv).Backend = policy.BackendGeneric
			m0(inv).NConnect, m0(inv).Connections = 0, 1
		}},
		{name: "not on a kernel without nconnect", mutate: func(inv *inventory.Inventory) {
			inv.KernelRelease = "4.19.0-21-amd64"
			m0(inv).NConnect, m0(inv).Connections = 0, 1
		}},
		{name: "below profile on anf", config: anfConfig, mutate: func(inv *inventory.Inventory) {
			m := m0(inv)
			m.Version, m.RSize, m.WSize = "3", 262144, 262144
			m.NConnect, m.Connections = 2, 2
		}, want: 1, severity: SeverityWarning, contains: []string{"fewer than the 8"}},
	},
	"NFS011": {
		{name: "nconnect 8 on azure files", mutate: func(inv *inventory.Inventory) { m0(inv).NConnect, m0(inv).Connections = 8, 8 },
			want: 1, severity: SeverityWarning, contains: []string{"above the 4", "nconnect=4"}},
		{name: "8 on anf is fine", config: anfConfig, mutate: func(inv *inventory.Inventory) {
			m := m0(inv)
			m.Version, m.RSize, m.WSize = "3", 262144, 262144
			m.NConnect, m.Connections = 8, 8
		}},
	},
	"NFS012": {
		{name: "another mount set it first", mutate: func(inv *inventory.Inventory) {
			first := healthyAzureFiles()
			first.Device, first.MountPoints, first.Export = "0:52", []string{"/mnt/first"}, "/nfsacct01/first"
			first.NConnect, first.Connections = 0, 1
			delete(first.Options, "nconnect")
			second := healthyAzureFiles()
			second.NConnect, second.Connections = 0, 1
			delete(second.Options, "nconnect")
			requested(&second, "nconnect", "4", "vers", "4.1")
			*inv = *healthyInventory(first, second)
			inv.Groups[0].SetBy = "0:52"
		}, want: 1, severity: SeverityWarning, contains: []string{"/mnt/first (0:52) mounted 10.1.0.4 first", "unmount every mount of client tcp://10.1.0.4/v4.1 (/mnt/first, /mnt/share1)"}},
		{name: "alone: dropped by the kernel or platform", mutate: func(inv *inventory.Inventory) {
			m := m0(inv)
			m.NConnect, m.Connections = 0, 1
			delete(m.Options, "nconnect")
			requested(m, "nconnect", "4")
		}, want: 1, severity: SeverityWarning, contains: []string{"dropped the option"}},
		{name: "requested and in effect", mutate: func(inv *inventory.Inventory) { requested(m0(inv), "nconnect", "4") }},
	},
	"NFS044": {
		{name: "asked over NFSv4, on the server's clear client", mutate: func(inv *inventory.Inventory) {
			m := m0(inv)
			m.TransportSecurity = inventory.XprtSecNone
			requested(m, "xprtsec", "tls")
		}, want: 1, severity: SeverityError, contains: []string{"xprtsec=tls is requested in /etc/fstab", "has xprtsec=none", "whatever xprtsec the mount asks for", "unmount the server's mounts without TLS first"}},
		{name: "asked over NFSv3", mutate: func(inv *inventory.Inventory) {
			m := m0(inv)
			m.Version, m.TransportSecurity = "3", inventory.XprtSecNone
			requested(m, "xprtsec", "tls")
		}, want: 1, severity: SeverityError, contains: []string{"check that tlshd runs and that the server exports with xprtsec=tls"}},
		{name: "mtls asked, tls in effect", mutate: func(inv *inventory.Inventory) {
			m := m0(inv)
			m.TransportSecurity = inventory.XprtSecTLS
			requested(m, "xprtsec", "mtls")
		}, want: 1, severity: SeverityError, contains: []string{"has xprtsec=tls"}},
		{name: "asked and in effect", mutate: func(inv *inventory.Inventory) {
			m := m0(inv)
			m.TransportSecurity = inventory.XprtSecTLS
			requested(m, "xprtsec", "tls")
		}},
		{name: "none asked", mutate: func(inv *inventory.Inventory) {
			m := m0(inv)
			m.TransportSecurity = inventory.XprtSecNone
			requested(m, "xprtsec", "none")
		}},
	},
	"NFS020": {
		{name: "server caps at 64K", mutate: func(inv *inventory.Inventory) {
			m := m0(inv)
			m.RSize, m.WSize = 65536, 65536
			requested(m, "rsize", "1048576", "wsize", "1048576")
		}, want: 1, severity: SeverityWarning, contains: []string{"rsize=1048576,wsize=1048576 requested", "rsize=65536,wsize=65536"}},
		{name: "client cap is not the server's", mutate: func(inv *inventory.Inventory) {
			requested(m0(inv), "rsize", "4194304")
		}},
		{name: "no request", mutate: func(inv *inventory.Inventory) { m0(inv).RSize = 65536 }},
	},
	"NFS021": {
		{name: "1M on anf", config: anfConfig, mutate: func(inv *inventory.Inventory) {
			m0(inv).Version = "3"
			m0(inv).NConnect, m0(inv).Connections = 8, 8
		}, want: 1, severity: SeverityWarning, contains: []string{"rsize=262144", "wsize=262144"}},
		{name: "1M on azure files is right"},
	},
	"NFS022": {
		{name: "64K on azure files", mutate: func(inv *inventory.Inventory) { m0(inv).RSize, m0(inv).WSize = 65536, 65536 },
			want: 1, severity: SeverityWarning, contains: []string{"rsize=65536,wsize=65536 is smaller", "rsize=1048576,wsize=1048576"}},
		{name: "server capped is NFS020", mutate: func(inv *inventory.Inventory) {
			m0(inv).RSize, m0(inv).WSize = 65536, 65536
			requested(m0(inv), "rsize", "1048576", "wsize", "1048576")
		}},
		{name: "generic has no size opinion", mutate: func(inv *inventory.Inventory) {
			m0(inv).Backend = policy.BackendGeneric
			m0(inv).RSize, m0(inv).WSize = 65536, 65536
		}},
	},
	"NFS032": {
		{name: "static tools without nocto", config: `apiVersion: nfstune.io/v1alpha1
kind: Policy
defaults: {workload: static-tools}
`, want: 1, severity: SeverityInfo, contains: []string{"lacks nocto,actimeo=600", "actimeo=600", "nocto"}},
		{name: "static tools tuned", config: `apiVersion: nfstune.io/v1alpha1
kind: Policy
defaults: {workload: static-tools}
`, mutate: func(inv *inventory.Inventory) {
			o := m0(inv).Options
			o["nocto"], o["acregmin"], o["acregmax"], o["acdirmin"], o["acdirmax"] = "", "600", "600", "600", "600"
		}},
		{name: "declared static without a caching profile", config: `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - static: true
`},
	},
	"NFS030": {
		{name: "soft rw", mutate: func(inv *inventory.Inventory) {
			delete(m0(inv).Options, "hard")
			m0(inv).Options["soft"] = ""
		}, want: 1, severity: SeverityError, contains: []string{"soft", "hard"}},
		{name: "softerr rw", mutate: func(inv *inventory.Inventory) { m0(inv).Options["softerr"] = "" }, want: 1, severity: SeverityError},
		{name: "soft read-only", mutate: func(inv *inventory.Inventory) {
			delete(m0(inv).Options, "rw")
			m0(inv).Options["ro"], m0(inv).Options["soft"] = "", ""
		}},
		// Longhorn's RWX default: the trade-off, not an error; on 6.6 and later, hard with
		// the recovery policy.
		{name: "longhorn softerr on 6.12", mutate: longhornSoftErr("6.12.107+deb13-amd64"), want: 1, severity: SeverityWarning,
			contains: []string{"Longhorn RWX volume mounted softerr (timeo=600, retrans=5)", "recovery policy"}},
		{name: "longhorn softerr on 6.1", mutate: longhornSoftErr("6.1.0-28-amd64"), want: 1, severity: SeverityWarning,
			contains: []string{"Longhorn", "keep softerr on this kernel"}},
	},
	"NFS031": {
		{name: "nocto and actimeo 600 not static", mutate: func(inv *inventory.Inventory) {
			o := m0(inv).Options
			o["nocto"], o["acregmin"], o["acregmax"], o["acdirmin"], o["acdirmax"] = "", "600", "600", "600", "600"
		}, want: 1, severity: SeverityWarning, contains: []string{"nocto,acregmin=600", "static: true"}},
		{name: "declared static", config: `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {mountpoint: /mnt/share1}
    static: true
`, mutate: func(inv *inventory.Inventory) { m0(inv).Options["nocto"] = "" }},
		{name: "static-tools workload", config: `apiVersion: nfstune.io/v1alpha1
kind: Policy
defaults: {workload: static-tools}
`, mutate: func(inv *inventory.Inventory) { m0(inv).Options["nocto"] = "" }},
		{name: "actimeo 60 is the default maximum", mutate: func(inv *inventory.Inventory) { m0(inv).Options["acregmax"] = "60" }},
	},
	"NFS040": {
		{name: "v3 on azure files", mutate: func(inv *inventory.Inventory) { m0(inv).Version = "3" }, want: 1, severity: SeverityError,
			contains: []string{"NFS version 3", "vers=4.1"}},
		{name: "blob without nolock", mutate: func(inv *inventory.Inventory) {
			m := m0(inv)
			m.Backend, m.Version, m.Server = policy.BackendAzureBlobNFS, "3", "acct.blob.core.windows.net"
			m.ReadAheadKB, m.NConnect, m.Connections = intp(16384), 0, 1
		}, want: 1, severity: SeverityError, contains: []string{"nolock"}},
		{name: "blob with nolock", mutate: func(inv *inventory.Inventory) {
			m := m0(inv)
			m.Backend, m.Version, m.Server = policy.BackendAzureBlobNFS, "3", "acct.blob.core.windows.net"
			m.ReadAheadKB, m.NConnect, m.Connections = intp(16384), 0, 1
			m.Options["nolock"] = ""
		}},
	},
	"NFS041": {
		{name: "nconnect on 4.19", mutate: func(inv *inventory.Inventory) { inv.KernelRelease = "4.19.0-21-amd64" }, want: 1, severity: SeverityError,
			contains: []string{"kernel 4.19.0-21-amd64", "5.3"}},
		{name: "krb5p with nconnect", mutate: func(inv *inventory.Inventory) { m0(inv).Options["sec"] = "krb5p" }, want: 1, severity: SeverityWarning},
		{name: "no nconnect on 4.19", mutate: func(inv *inventory.Inventory) {
			inv.KernelRelease = "4.19.0-21-amd64"
			m0(inv).NConnect, m0(inv).Connections = 0, 1
		}},
		{name: "unknown kernel", mutate: func(inv *inventory.Inventory) { inv.KernelRelease = "" }},
	},
	"NFS050": {
		{name: "packaged nfsrahead rule with default 128 wins", config: fixedConfig, mutate: func(inv *inventory.Inventory) {
			inv.ReadAhead.UdevRules = []inventory.UdevRule{
				{File: "/etc/udev/rules.d/90-aks.rules", Line: 1, ReadAheadKB: intp(15380)},
				{File: "/usr/lib/udev/rules.d/99-nfs.rules", Line: 1, Program: "/usr/libexec/nfsrahead"},
			}
		}, want: 1, severity: SeverityWarning, contains: []string{"128 KiB", "/usr/lib/udev/rules.d/99-nfs.rules:1 running nfsrahead", "overrides /etc/udev/rules.d/90-aks.rules:1", "nfsconf --set nfsrahead nfs4 15360"}},
		{name: "nfsrahead configured high enough", mutate: func(inv *inventory.Inventory) {
			inv.ReadAhead.UdevRules = []inventory.UdevRule{{File: "/usr/lib/udev/rules.d/99-nfs.rules", Line: 1, Program: "/usr/libexec/nfsrahead"}}
			inv.ReadAhead.NFSRahead = map[string]string{"nfs4": "16384", "default": "128"}
		}},
		{name: "nfsrahead value with a trailing comment", config: fixedConfig, mutate: func(inv *inventory.Inventory) {
			inv.ReadAhead.UdevRules = []inventory.UdevRule{{File: "/usr/lib/udev/rules.d/99-nfs.rules", Line: 1, Program: "/usr/libexec/nfsrahead"}}
			inv.ReadAhead.NFSRahead = map[string]string{"nfs4": "1024   # NFSv4.x"}
			inv.ReadAhead.NFSRaheadFrom = map[string]string{"nfs4": "/etc/nfs.conf:12"}
		}, want: 1, severity: SeverityWarning, contains: []string{"[nfsrahead] nfs4=1024 in /etc/nfs.conf:12"}},
		{name: "fixed low rule", config: fixedConfig, mutate: func(inv *inventory.Inventory) {
			inv.ReadAhead.UdevRules = []inventory.UdevRule{{File: "/etc/udev/rules.d/60-ra.rules", Line: 4, ReadAheadKB: intp(1024)}}
		}, want: 1, severity: SeverityWarning, contains: []string{"/etc/udev/rules.d/60-ra.rules:4", `"15360"`}},
		{name: "no rule: kernel default", mutate: func(inv *inventory.Inventory) { inv.ReadAhead.UdevRules = nil },
			want: 1, severity: SeverityInfo, contains: []string{"kernel default", "nfstune apply"}},
		{name: "nfstune's own rule", mutate: func(inv *inventory.Inventory) {
			inv.ReadAhead.UdevRules = []inventory.UdevRule{{File: "/etc/udev/rules.d/99-nfstune.rules", Line: 1, Program: "/usr/local/bin/nfstune"}}
		}},
	},
	"NFS060": {
		{name: "anf slot table below 128", config: anfConfig, mutate: func(inv *inventory.Inventory) {
			m0(inv).Version, m0(inv).RSize, m0(inv).WSize, m0(inv).NConnect, m0(inv).Connections = "3", 262144, 262144, 8, 8
		}, want: 2, severity: SeverityInfo, contains: []string{"sunrpc.tcp_max_slot_table_entries is 65536, above the 128"}},
		{name: "azure files asks for none"},
	},
	"NFS070": {
		{name: "noatime in fstab", mutate: func(inv *inventory.Inventory) {
			m0(inv).Options["noatime"] = ""
			requested(m0(inv), "noatime", "", "nodiratime", "")
		}, want: 1, severity: SeverityInfo, contains: []string{"noatime,nodiratime in /etc/fstab:3 has no effect"}},
		{name: "relatime shown by the kernel is not reported"},
	},
	"NFS091": {
		{name: "major timeouts", mutate: func(inv *inventory.Inventory) {
			m0(inv).Stats.Operations = []procfs.NFSOperationStats{
				{Operation: "READ", Requests: 1000, MajorTimeouts: 3},
				{Operation: "GETATTR", Requests: 500, MajorTimeouts: 1},
			}
		}, want: 1, severity: SeverityWarning, contains: []string{"4 of 1500 requests", "READ, 3", "nfstune shutdown 0:53 "}},
		{name: "answered in time", mutate: func(inv *inventory.Inventory) {
			m0(inv).Stats.Operations = []procfs.NFSOperationStats{{Operation: "READ", Requests: 1000}}
		}},
	},
	"NFS093": {
		{name: "server not answering", mutate: func(inv *inventory.Inventory) {
			inv.Stalled = []inventory.StalledServer{{Addr: m0(inv).ServerAddr, Transports: []string{"switch-3/xprt-3-tcp"}, Waiting: 1, Window: time.Second,
				Each: []inventory.TransportStatus{{Name: "switch-3/xprt-3-tcp", Queued: 1, Stuck: true}, {Name: "switch-3/xprt-4-tcp"}}}}
		}, want: 1, severity: SeverityError, contains: []string{"is not answering: 1 request(s) waiting on 1 of 2 transport(s)", "nfstune shutdown 0:53 "}},
		{name: "another server stalled", mutate: func(inv *inventory.Inventory) {
			inv.Stalled = []inventory.StalledServer{{Addr: "192.0.2.99", Transports: []string{"switch-9/xprt-9-tcp"}, Waiting: 2, Window: time.Second}}
		}},
	},
	"NFS090": {
		{name: "no mountstats entry", mutate: func(inv *inventory.Inventory) { m0(inv).Stats = nil }, want: 1, severity: SeverityWarning,
			contains: []string{"grep -A2 'mounted on /mnt/share1 ' /proc/self/mountstats"}},
	},
}

func TestRules(t *testing.T) {
	t.Parallel()
	for id, cases := range ruleTests {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					pol := policy.Default()
					if tc.config != "" {
						var err error
						if pol, err = policy.Parse("config.yaml", []byte(tc.config)); err != nil {
							t.Fatal(err)
						}
					}
					inv := healthyInventory(healthyAzureFiles())
					if tc.mutate != nil {
						tc.mutate(inv)
					}
					var opts Options
					if tc.mapped != nil {
						opts.MappedReaders = map[string][]MappedReader{m0(inv).Device: tc.mapped}
					}
					if tc.classes != nil {
						opts.Classes = map[string]readahead.Classification{m0(inv).Device: {Class: readahead.Mixed, Pods: tc.classes}}
					}
					if tc.traffic != nil {
						opts.Traffic = map[string]readahead.Evidence{m0(inv).Device: *tc.traffic}
					}
					// Each rule on its own: foldCauses is TestFoldCauses's.
					rep := run(inv, pol, opts, slices.Clone[[]Finding], 1)
					var got []Finding
					for _, f := range rep.Findings {
						if f.ID == id {
							got = append(got, f)
						}
					}
					if len(got) != tc.want {
						t.Fatalf("got %d %s findings, want %d: %+v", len(got), id, tc.want, got)
					}
					if tc.want == 0 {
						return
					}
					f := got[0]
					if f.Severity != tc.severity {
						t.Errorf("severity %q, want %q", f.Severity, tc.severity)
					}
					if f.Message == "" || f.Expected == "" || f.Actual == "" || f.Fix == "" || f.Reason == "" || f.Source == "" {
						t.Errorf("incomplete finding: %+v", f)
					}
					text := strings.Join([]string{got[len(got)-1].Message, f.Message, f.Fix}, "\n")
					for _, want := range tc.contains {
						if !strings.Contains(text, want) {
							t.Errorf("finding lacks %q:\n%s", want, text)
						}
					}
					for _, unwanted := range tc.absent {
						if strings.Contains(text, unwanted) {
							t.Errorf("finding has %q:\n%s", unwanted, text)
						}
					}
					for _, g := range got {
						if strings.Contains(g.Fix, "noatime") {
							t.Errorf("a fix proposes noatime: %s", g.Fix)
						}
					}
				})
			}
		})
	}
}

func TestSortFindings(t *testing.T) {
	t.Parallel()
	fs := []Finding{
		{ID: "NFS070", Severity: SeverityInfo, Device: "0:53"},
		{ID: "NFS001", Severity: SeverityWarning, Device: "0:100"},
		{ID: "NFS060", Severity: SeverityInfo},
		{ID: "NFS030", Severity: SeverityError, Device: "0:9"},
		{ID: "NFS001", Severity: SeverityWarning, Device: "0:53", Message: "first"},
		{ID: "NFS010", Severity: SeverityWarning, Device: "0:53"},
		{ID: "NFS001", Severity: SeverityWarning, Device: "0:53", Message: "second"},
	}
	SortFindings(fs)
	var got []string
	for _, f := range fs {
		got = append(got, strings.TrimSpace(f.Severity+" "+f.Device+" "+f.ID+" "+f.Message))
	}
	// Findings of one severity, device and ID keep their order.
	want := []string{"error 0:9 NFS030", "warning 0:53 NFS001 first", "warning 0:53 NFS001 second", "warning 0:53 NFS010",
		"warning 0:100 NFS001", "info  NFS060", "info 0:53 NFS070"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseKernel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in         string
		before53   bool
		wantKnown  bool
		wantString string
	}{
		{in: "6.1.0-28-amd64", wantKnown: true},
		{in: "5.3.0", wantKnown: true},
		{in: "5.2.21", before53: true, wantKnown: true},
		{in: "4.12.14-122.37-default", before53: true, wantKnown: true},
		{in: "", wantKnown: false},
		{in: "garbage", wantKnown: false},
		{in: "6.x", wantKnown: false},
	}
	for _, tt := range tests {
		k := parseKernel(tt.in)
		if k.known != tt.wantKnown || k.before(5, 3) != tt.before53 {
			t.Errorf("parseKernel(%q) = %+v, before(5,3) = %v", tt.in, k, k.before(5, 3))
		}
	}
}

func FuzzParseKernel(f *testing.F) {
	for _, s := range []string{"6.1.0-28-amd64", "5.2", "", "4.", ".5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { parseKernel(s) })
}

func TestFstabLine(t *testing.T) {
	t.Parallel()
	m := healthyAzureFiles()
	for _, k := range []string{"acregmin", "acregmax", "acdirmin", "acdirmax", "noresvport"} {
		delete(m.Options, k) // the lines below are a mount at the kernel's defaults
	}
	m.MountPoints = []string{"/mnt/with space"}
	requested(&m, "vers", "4.1", "noatime", "", "_netdev", "", "soft", "")
	got := fstabLine(&m, map[string]string{"hard": "", "nconnect": "4"})
	want := `nfsacct01.file.core.windows.net:/nfsacct01/share1 /mnt/with\040space nfs4 _netdev,hard,nconnect=4,vers=4.1 0 0`
	if got != want {
		t.Errorf("fstabLine:\n got %s\nwant %s", got, want)
	}
	// Without fstab, the mount's own options from mountinfo are the base, less the
	// addresses and values the kernel found: a user who copies the line keeps nconnect,
	// the sizes and every option the fix does not change.
	m.Requested = nil
	delete(m.Options, "rw")
	m.Options["ro"], m.Options["actimeo"] = "", "30"
	got = fstabLine(&m, map[string]string{"nconnect": "2"}, "actimeo")
	want = `nfsacct01.file.core.windows.net:/nfsacct01/share1 /mnt/with\040space nfs4 hard,local_lock=none,nconnect=2,proto=tcp,retrans=2,ro,rsize=1048576,sec=sys,timeo=600,vers=4.1,wsize=1048576 0 0`
	if got != want {
		t.Errorf("fstabLine from mountinfo:\n got %s\nwant %s", got, want)
	}
	// A generic profile asks only for hard and proto=tcp: the fix line for a soft mount
	// keeps vers, nconnect and the sizes it was mounted with.
	generic := inventory.Mount{
		Device: "0:60", MountPoints: []string{"/data"}, Server: "10.0.0.9", Export: "/data", FSType: "nfs4",
		Options: map[string]string{"rw": "", "relatime": "", "vers": "4.1", "rsize": "524288", "wsize": "524288", "namlen": "255",
			"soft": "", "proto": "tcp", "nconnect": "4", "timeo": "600", "retrans": "2", "sec": "sys", "clientaddr": "10.0.0.2",
			"local_lock": "none", "addr": "10.0.0.9"},
	}
	got = fstabLine(&generic, map[string]string{"hard": ""}, "soft", "softerr")
	want = `10.0.0.9:/data /data nfs4 hard,local_lock=none,nconnect=4,proto=tcp,retrans=2,rsize=524288,rw,sec=sys,timeo=600,vers=4.1,wsize=524288 0 0`
	if got != want {
		t.Errorf("fstabLine for a generic mount:\n got %s\nwant %s", got, want)
	}
}

// goldenInventory has one mount per kind of problem, for the table and JSON goldens.
func goldenInventory() *inventory.Inventory {
	af := healthyAzureFiles()
	af.ReadAheadKB = intp(128)
	requested(&af, "nconnect", "4", "noatime", "")

	second := healthyAzureFiles()
	second.Device, second.MountPoints, second.Export = "0:54", []string{"/mnt/with space"}, "/nfsacct01/share2"

	anf := inventory.Mount{
		Device: "0:60", MountPoints: []string{"/tools"}, Server: "10.0.0.6", ServerAddr: "10.0.0.6", Export: "/srv/tools",
		FSType: "nfs", Version: "3", ReadAheadKB: intp(128), Connections: 1, RSize: 1048576, WSize: 1048576, Backend: policy.BackendGeneric,
		Options:     map[string]string{"ro": "", "vers": "3", "rsize": "1048576", "wsize": "1048576", "soft": "", "nocto": "", "proto": "tcp", "sec": "sys", "addr": "10.0.0.6"},
		ClientGroup: "tcp://10.0.0.6/v3",
		Stats:       &inventory.Stats{StatVersion: "1.1"},
	}
	efs := inventory.Mount{
		Device: "0:61", MountPoints: []string{"/efs"}, Server: "fs-0123456789abcdef0.efs.us-east-1.amazonaws.com", ServerAddr: "172.31.5.5", Export: "/",
		FSType: "nfs4", Version: "4.1", ReadAheadKB: intp(15360), RSize: 1048576, WSize: 1048576, Backend: policy.BackendAWSEFS,
		Options:     map[string]string{"rw": "", "vers": "4.1", "soft": "", "acregmax": "120", "proto": "tcp", "sec": "sys"},
		ClientGroup: "tcp://172.31.5.5/v4.1",
	}
	inv := healthyInventory(af, second, anf, efs)
	inv.ReadAhead.UdevRules = []inventory.UdevRule{
		{File: "/etc/udev/rules.d/90-ra.rules", Line: 2, ReadAheadKB: intp(15380)},
		{File: "/usr/lib/udev/rules.d/99-nfs.rules", Line: 1, Program: "/usr/libexec/nfsrahead"},
	}
	inv.ReadAhead.NFSRahead = map[string]string{"nfs": "15360"}
	inv.ReadAhead.NFSRaheadFrom = map[string]string{"nfs": "/etc/nfs.conf:40"}
	return inv
}

const goldenConfig = `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - name: eda tools
    match: {cidr: 10.0.0.0/24, mountpoint: /tools}
    backend: azure-netapp-files
    workload: static-tools
`

func TestGolden(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse("config.yaml", []byte(goldenConfig))
	if err != nil {
		t.Fatal(err)
	}
	rep := Run(goldenInventory(), pol)
	var table bytes.Buffer
	if err := WriteTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "report.table.golden"), table.Bytes())
	golden.Check(t, filepath.Join("testdata", "report.json.golden"), js.Bytes())
}

// A mount point or export holding a newline or terminal escapes must not forge lines or
// reach the terminal raw.
func TestWriteTableEscapes(t *testing.T) {
	t.Parallel()
	m := healthyAzureFiles()
	m.ReadAheadKB = intp(128)
	m.MountPoints = []string{"/mnt/a\n0:99  forged:/x  (0:99)\x1b[2J"}
	m.Export = "/share\r\x1b]0;title\a"
	rep := Run(healthyInventory(m), policy.Default())
	var b bytes.Buffer
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "0:99") {
			t.Errorf("forged line %q", line)
		}
	}
	if strings.ContainsAny(out, "\x1b\r\a") {
		t.Errorf("control bytes in output:\n%q", out)
	}
	if !strings.Contains(out, `/mnt/a\n0:99  forged:/x  (0:99)\x1b[2J`) {
		t.Errorf("mount point not shown escaped:\n%s", out)
	}
}

// TestFixQuotesMountPoints: a fix is a command line to paste, so a mount point in it is one
// shell word (shell.Quote): /mnt/$(cmd) must not run cmd, and a quote must not end the word.
func TestFixQuotesMountPoints(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse("config.yaml", []byte(goldenConfig))
	if err != nil {
		t.Fatal(err)
	}
	inv := goldenInventory()
	const marker = "$(reboot)"
	var words, others []string
	for i := range inv.Mounts {
		for j, mp := range inv.Mounts[i].MountPoints {
			e := mp + "/" + marker + " `id`;x'y\"z"
			inv.Mounts[i].MountPoints[j] = e
			// A mount point as a word of its own, or in grep's pattern (NFS090).
			words = append(words, shell.Quote(e), shell.Quote("mounted on "+e+" "))
			// Not shell: an fstab line's field, a config rule's YAML string.
			others = append(others, escapeFstab(e)+" nfs", "{mountpoint: "+strconv.Quote(e)+"}")
		}
	}
	quoted := 0
	for _, f := range Run(inv, pol).Findings {
		// Every occurrence of the marker is inside a mount point quoted as one shell word,
		// or in an fstab line or a config snippet.
		n, o := 0, 0
		for _, q := range words {
			n += strings.Count(f.Fix, q)
		}
		for _, q := range others {
			o += strings.Count(f.Fix, q)
		}
		if m := strings.Count(f.Fix, marker); m != n+o {
			t.Errorf("%s fix has a mount point not quoted as one shell word (%d of %d quoted, %d elsewhere): %s", f.ID, n, m, o, f.Fix)
		}
		quoted += n
	}
	if quoted == 0 {
		t.Error("no fix names a mount point: the test proves nothing")
	}
}

// TestFoldCauses checks that a mount gets one finding per cause: the 128 KiB read-ahead of
// a 1 MiB rsize mount fires NFS001 and NFS002, which share the fix, and the audit keeps
// NFS001 with NFS002 as its evidence.
func TestFoldCauses(t *testing.T) {
	t.Parallel()
	inv := healthyInventory(healthyAzureFiles())
	m0(inv).ReadAheadKB = intp(128)
	rep := Run(inv, policy.Default())
	var ids []string
	var kept *Finding
	for i, f := range rep.Findings {
		if f.Device == m0(inv).Device {
			ids = append(ids, f.ID)
		}
		if f.ID == "NFS001" {
			kept = &rep.Findings[i]
		}
	}
	if slices.Contains(ids, "NFS002") || kept == nil {
		t.Fatalf("findings %v, want NFS001 without NFS002", ids)
	}
	if len(kept.Evidence) != 1 || !strings.HasPrefix(kept.Evidence[0], "NFS002: read-ahead of 128 KiB is below the rsize") {
		t.Errorf("NFS001 evidence %q, want NFS002's message", kept.Evidence)
	}
	if strings.Contains(kept.Evidence[0], "fix:") {
		t.Errorf("NFS002's fix is NFS001's, yet repeated: %q", kept.Evidence[0])
	}
}

// TestProfileConflictSpellings: an nfsmount.conf key the kernel parses as the profile's
// option is no conflict (NFS054), whichever of its spellings the file uses.
func TestProfileConflictSpellings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		want, opt string
		conflict  bool
	}{
		{"vers=4.1", "nfsvers=4.1", false},
		{"vers=4.1", "v4.1", false},
		{"vers=4.0", "nfsvers=4", false},
		{"vers=4.1", "nfsvers=3", true},
		{"vers=3", "v4.2", true},
		{"proto=tcp", "tcp", false},
		{"proto=tcp", "udp", true},
		{"nconnect=4", "nconnect=2", true},
		{"nconnect=4", "nconnect=8", false},
	} {
		if got := profileConflict(tc.want, tc.opt); got != tc.conflict {
			t.Errorf("profileConflict(%q, %q) = %v, want %v", tc.want, tc.opt, got, tc.conflict)
		}
	}
}

// TestRunWorkersAgree audits a synthetic host of 1,000 mounts in one goroutine and in
// several: the reports are the same, findings in the same order.
func TestRunWorkersAgree(t *testing.T) {
	t.Parallel()
	dir, pol := synthHost(t)
	inv, err := inventory.Read(hostfs.Root(dir), inventory.ReadOptions{SkipOperations: true})
	if err != nil {
		t.Fatal(err)
	}
	one := run(inv, pol, Options{}, foldCauses, 1)
	if len(one.Findings) < len(inv.Mounts) {
		t.Fatalf("%d findings for %d mounts: the synthetic host should give every mount some", len(one.Findings), len(inv.Mounts))
	}
	for _, workers := range []int{2, 7} {
		if diff := cmp.Diff(one, run(inv, pol, Options{}, foldCauses, workers)); diff != "" {
			t.Errorf("%d workers differ from one (-one +%d):\n%s", workers, workers, diff)
		}
	}
}
