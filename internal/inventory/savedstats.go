package inventory

import (
	"fmt"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// ReadMountStatsFile builds an inventory from a saved copy of /proc/<pid>/mountstats alone
// (a sosreport's proc/self/mountstats, or `cat /proc/self/mountstats > FILE`), for reading a
// host's statistics offline. The file is read as every file the user names is
// (hostfs.ReadFile: a regular file, at most hostfs.MaxSmall bytes) and parsed as the live
// file is, by the tolerant per-entry parser.
//
// Without mountinfo the superblocks are unknown: each NFS entry of the file is one Mount,
// in the file's order, with an empty Device. A superblock shown on several mount points
// appears once per mount point, as nfs-utils' mountstats -f shows it. Its server, export,
// version, options and transfer sizes come from the entry's device and opts: lines;
// read-ahead and the proxy helpers are unknown.
func ReadMountStatsFile(path string) (*Inventory, error) {
	b, err := hostfs.ReadFile(path, hostfs.MaxSmall)
	if err != nil {
		return nil, fmt.Errorf("reading saved mountstats: %w", err)
	}
	entries, warnings := parseMountStats(b)
	inv := &Inventory{Sysctls: map[string]string{}, Warnings: warnings}
	for _, e := range entries {
		if !isNFSType(e.FSType) {
			continue
		}
		inv.Mounts = append(inv.Mounts, savedMount(e))
	}
	inv.Groups = buildGroups(inv.Mounts)
	return inv, nil
}

// savedMount is the Mount of one entry of a saved mountstats file.
func savedMount(e mountStatsEntry) Mount {
	m := Mount{MountPoints: []string{e.MountPoint}, FSType: e.FSType, Options: e.Options,
		Stats: e.Stats, Connections: e.XprtLines}
	if m.Options == nil {
		m.Options = map[string]string{}
	}
	m.Server, m.Export = splitSource(e.Source)
	m.ServerAddr = m.Options["addr"]
	m.Version = nfsVersion(m.FSType, m.Options)
	m.RSize = atoiOr0(m.Options["rsize"])
	m.WSize = atoiOr0(m.Options["wsize"])
	m.NConnect = atoiOr0(m.Options["nconnect"])
	// mountstats' opts: line shows xprtsec= as mountinfo does (nfs_show_mountstats calls
	// nfs_show_mount_options).
	m.TransportSecurity = transportSecurity(m.Options)
	m.Backend = DetectBackend(m.Server)
	m.ClientGroup = groupKey(&m)
	return m
}
