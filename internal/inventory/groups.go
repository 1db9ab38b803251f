package inventory

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// groupKey names the kernel NFS client a mount uses: "<proto>://<addr>[:port]/v<version>",
// e.g. "tcp://10.0.0.5/v4.1" or "tcp://[fd00::5]:2049/v3". The port appears only when the
// mount names one, and "/xprtsec=tls" or "/xprtsec=mtls" only for a mount over TLS.
func groupKey(m *Mount) string { return groupKeyPort(m, m.Options["port"]) }

// groupKeyPort is groupKey with the port given ("" or "0": none).
func groupKeyPort(m *Mount, port string) string {
	proto := m.Options["proto"]
	if proto == "" {
		proto = "tcp"
	}
	addr := m.ServerAddr
	if addr == "" {
		addr = m.Server
	}
	host := addr
	if a, err := netip.ParseAddr(addr); err == nil && a.Is6() {
		host = "[" + addr + "]"
	}
	if port != "" && port != "0" {
		host = net.JoinHostPort(addr, port)
	}
	key := fmt.Sprintf("%s://%s/v%s", proto, host, m.Version)
	if m.UsesTLS() {
		// A mount with another xprtsec policy gets a client of its own
		// (fs/nfs/client.c nfs_match_client: "Match the xprt security policy").
		key += "/xprtsec=" + m.TransportSecurity
	}
	return key
}

func buildGroups(mounts []Mount) []Group {
	idx := map[string]int{}
	var groups []Group
	var ages []float64
	for _, m := range mounts {
		i, ok := idx[m.ClientGroup]
		if !ok {
			proto := m.Options["proto"]
			if proto == "" {
				proto = "tcp"
			}
			addr := m.ServerAddr
			if addr == "" {
				addr = m.Server
			}
			groups = append(groups, Group{Key: m.ClientGroup, ServerAddr: addr, Version: m.Version, Proto: proto})
			ages = append(ages, -1)
			i = len(groups) - 1
			idx[m.ClientGroup] = i
		}
		g := &groups[i]
		g.Devices = append(g.Devices, m.Device)
		g.NConnect = max(g.NConnect, m.NConnect)
		g.Connections = max(g.Connections, m.Connections)
		if m.Stats != nil && m.Stats.Age.Seconds() > ages[i] {
			ages[i] = m.Stats.Age.Seconds()
			g.SetBy = m.Device
		}
	}
	slices.SortFunc(groups, func(a, b Group) int { return cmp.Compare(a.Key, b.Key) })
	return groups
}

// CompareDevices orders "major:minor" numerically.
func CompareDevices(a, b string) int {
	amaj, amin := DeviceNumbers(a)
	bmaj, bmin := DeviceNumbers(b)
	return cmp.Or(cmp.Compare(amaj, bmaj), cmp.Compare(amin, bmin), cmp.Compare(a, b))
}

// DeviceNumbers are the major and minor numbers of a "major:minor" device, 0 for a part
// that is not a number: what CompareDevices compares first, for a sort that computes them
// once per element.
func DeviceNumbers(dev string) (major, minor int) {
	maj, min, _ := strings.Cut(dev, ":")
	return atoiOr0(maj), atoiOr0(min)
}

func atoiOr0(s string) int {
	if s == "" {
		// Most options are absent: no error value to build and drop.
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}
