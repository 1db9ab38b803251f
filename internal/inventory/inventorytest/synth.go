// Package inventorytest writes synthetic host trees for tests and benchmarks of the packages
// that read the inventory, as net/http/httptest serves them a server: test support, not
// part of the binary.
package inventorytest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// nfs4Ops and nfs3Ops are the per-op rows the kernel prints in mountstats for NFSv4.x
// (fs/nfs/nfs4xdr.c nfs4_procedures) and NFSv3 (fs/nfs/nfs3xdr.c nfs3_procedures).
func nfs4Ops() []string {
	return strings.Fields(`NULL READ WRITE COMMIT OPEN OPEN_CONFIRM OPEN_NOATTR OPEN_DOWNGRADE CLOSE
		SETATTR FSINFO RENEW SETCLIENTID SETCLIENTID_CONFIRM LOCK LOCKT LOCKU ACCESS GETATTR LOOKUP
		LOOKUP_ROOT REMOVE RENAME LINK SYMLINK CREATE PATHCONF STATFS READLINK READDIR SERVER_CAPS
		DELEGRETURN GETACL SETACL FS_LOCATIONS RELEASE_LOCKOWNER SECINFO FSID_PRESENT EXCHANGE_ID
		CREATE_SESSION DESTROY_SESSION SEQUENCE GET_LEASE_TIME RECLAIM_COMPLETE LAYOUTGET
		GETDEVICEINFO LAYOUTCOMMIT LAYOUTRETURN SECINFO_NO_NAME TEST_STATEID FREE_STATEID
		GETDEVICELIST BIND_CONN_TO_SESSION DESTROY_CLIENTID SEEK ALLOCATE DEALLOCATE LAYOUTSTATS
		CLONE COPY OFFLOAD_CANCEL LOOKUPP LAYOUTERROR COPY_NOTIFY GETXATTR SETXATTR LISTXATTRS
		REMOVEXATTR READ_PLUS`)
}

func nfs3Ops() []string {
	return strings.Fields(`NULL GETATTR SETATTR LOOKUP ACCESS READLINK READ WRITE CREATE MKDIR SYMLINK
		MKNOD REMOVE RMDIR RENAME LINK READDIR READDIRPLUS FSSTAT FSINFO PATHCONF COMMIT`)
}

// GenerateTree writes a synthetic host root with n NFS mounts under dir, in the same
// kernel formats as the fixture trees: proc/1/{mountinfo,mountstats} with proc/self a
// link to 1, proc/fs/nfsfs/{servers,volumes}, sys/class/bdi/0:N/read_ahead_kb,
// proc/version, the sunrpc sysctls and an etc/fstab naming every mount.
//
// Mount i uses device 0:(100+i) and mount point /mnt/nfs/vol<i>. Every fourth mount is
// NFSv3 (one transport); the rest are NFSv4.1 with nconnect=4 (four xprt lines). Mounts
// spread over n/50+1 servers per version, so client groups hold many superblocks, as on a
// busy analytics host. Benchmarks of other packages use it through Read.
func GenerateTree(dir string, n int) error {
	if n < 0 {
		return fmt.Errorf("generating tree: negative mount count %d", n)
	}
	servers := n/50 + 1
	var files []genFile
	add := func(path string, fill func(w *bufio.Writer)) { files = append(files, genFile{path, fill}) }

	add("proc/version", func(w *bufio.Writer) {
		writeString(w, "Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)\n")
	})
	for name, v := range map[string]string{
		"sys/sunrpc/tcp_slot_table_entries":     "2",
		"sys/sunrpc/tcp_max_slot_table_entries": "65536",
		"sys/net/core/rmem_max":                 "212992",
		"sys/net/core/wmem_max":                 "212992",
		"sys/net/ipv4/tcp_rmem":                 "4096\t131072\t6291456",
	} {
		add("proc/"+name, func(w *bufio.Writer) { writeString(w, v+"\n") })
	}
	add("proc/1/mountinfo", func(w *bufio.Writer) {
		writeString(w, "21 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro\n")
		writeString(w, "23 21 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n")
		for i := range n {
			s := synthMount(i, servers)
			fmt.Fprintf(w, "%d 21 0:%d / %s rw,relatime shared:%d - %s %s:%s %s,addr=%s\n",
				100+i, 100+i, s.mountPoint, 100+i, s.fstype, s.server, s.export, s.options, s.addr)
		}
	})
	add("proc/1/mountstats", func(w *bufio.Writer) {
		writeString(w, "device /dev/vda1 mounted on / with fstype ext4\n")
		writeString(w, "device proc mounted on /proc with fstype proc\n")
		for i := range n {
			writeSynthStats(w, synthMount(i, servers), i)
		}
	})
	add("proc/fs/nfsfs/servers", func(w *bufio.Writer) {
		writeString(w, "NV SERVER   PORT USE HOSTNAME\n")
		for _, v := range []string{"v3", "v4"} {
			for s := range servers {
				fmt.Fprintf(w, "%s %08x  801 %3d 10.20.%d.%d\n", v, 0x0a140000|s, n/servers/2, s>>8, s&0xff)
			}
		}
	})
	add("proc/fs/nfsfs/volumes", func(w *bufio.Writer) {
		writeString(w, "NV SERVER   PORT DEV          FSID                              FSC\n")
		for i := range n {
			s := synthMount(i, servers)
			v := "v4"
			if s.fstype == "nfs" {
				v = "v3"
			}
			fmt.Fprintf(w, "%s %08x  801 %-12s %-33s no \n", v, 0x0a140000|s.serverIdx, fmt.Sprintf("0:%d", 100+i),
				fmt.Sprintf("%016x:%x", 0x5d41402abc4b2a76+uint64(s.serverIdx), i))
		}
	})
	add("etc/fstab", func(w *bufio.Writer) {
		writeString(w, "UUID=5f1c2c2e-9f5a-4e43-9b57-1d2b3f4a5c6d / ext4 errors=remount-ro 0 1\n")
		for i := range n {
			s := synthMount(i, servers)
			fmt.Fprintf(w, "%s:%s %s %s %s,_netdev 0 0\n", s.server, s.export, s.mountPoint, s.fstype, s.requested)
		}
	})
	for i := range n {
		add(fmt.Sprintf("sys/class/bdi/0:%d/read_ahead_kb", 100+i), func(w *bufio.Writer) { writeString(w, "128\n") })
	}

	for _, f := range files {
		if err := f.write(dir); err != nil {
			return err
		}
	}
	if err := os.Symlink("1", filepath.Join(dir, "proc", "self")); err != nil {
		return fmt.Errorf("generating tree: %w", err)
	}
	// The sunrpc sysfs directory of a 5.14+ kernel, with no transports in it.
	if err := os.MkdirAll(filepath.Join(dir, "sys", "kernel", "sunrpc", "xprt-switches"), 0o755); err != nil {
		return fmt.Errorf("generating tree: %w", err)
	}
	return nil
}

// writeString writes s to a fixture file's buffer. A bufio.Writer keeps its first error and
// returns it from every later write and from Flush, which genFile.write checks, so the fill
// functions need not check each write.
func writeString(w *bufio.Writer, s string) { _, _ = w.WriteString(s) }

type genFile struct {
	path string
	fill func(w *bufio.Writer)
}

func (f genFile) write(dir string) error {
	p := filepath.Join(dir, filepath.FromSlash(f.path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("generating tree: %w", err)
	}
	fh, err := os.Create(p)
	if err != nil {
		return fmt.Errorf("generating tree: %w", err)
	}
	w := bufio.NewWriter(fh)
	f.fill(w)
	if err := w.Flush(); err != nil {
		fh.Close()
		return fmt.Errorf("generating tree: writing %s: %w", p, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("generating tree: writing %s: %w", p, err)
	}
	return nil
}

type synthSpec struct {
	serverIdx                                int
	server, addr, export, mountPoint, fstype string
	options, statsOptions, requested         string
	nconnect                                 int
	v4                                       bool
}

func synthMount(i, servers int) synthSpec {
	s := synthSpec{serverIdx: i % servers}
	s.addr = fmt.Sprintf("10.20.%d.%d", s.serverIdx>>8, s.serverIdx&0xff)
	s.server = s.addr
	s.export = fmt.Sprintf("/export/vol%d", i)
	s.mountPoint = fmt.Sprintf("/mnt/nfs/vol%d", i)
	if i%4 == 3 {
		s.fstype = "nfs"
		s.nconnect = 1
		s.options = fmt.Sprintf("rw,vers=3,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,mountaddr=%s,mountvers=3,mountport=20048,mountproto=udp,local_lock=none", s.addr)
		s.statsOptions = strings.Replace(s.options, "namlen=255,", "namlen=255,acregmin=3,acregmax=60,acdirmin=30,acdirmax=60,", 1)
		s.requested = "vers=3,hard"
		return s
	}
	s.v4 = true
	s.fstype = "nfs4"
	s.nconnect = 4
	s.options = "rw,vers=4.1,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,nconnect=4,timeo=600,retrans=2,sec=sys,clientaddr=10.20.255.10,local_lock=none"
	s.statsOptions = strings.Replace(s.options, "namlen=255,", "namlen=255,acregmin=3,acregmax=60,acdirmin=30,acdirmax=60,", 1)
	s.requested = "vers=4.1,nconnect=4,hard"
	return s
}

func writeSynthStats(w *bufio.Writer, s synthSpec, i int) {
	fmt.Fprintf(w, "device %s:%s mounted on %s with fstype %s statvers=1.1\n", s.server, s.export, s.mountPoint, s.fstype)
	fmt.Fprintf(w, "\topts:\t%s\n", s.statsOptions)
	fmt.Fprintf(w, "\tage:\t%d\n", 100000-i)
	ops := nfs3Ops()
	vers := 3
	if s.v4 {
		ops = nfs4Ops()
		vers = 4
		writeString(w, "\timpl_id:\tname='',domain='',date='0,0'\n")
	}
	writeString(w, "\tcaps:\tcaps=0x3ffbffff,wtmult=512,dtsize=1048576,bsize=0,namlen=255\n")
	if s.v4 {
		writeString(w, "\tnfsv4:\tbm0=0xfdffbfff,bm1=0xf9be3e,bm2=0x68800,acl=0x3,sessions,pnfs=not configured,lease_time=90,lease_expired=0\n")
	}
	writeString(w, "\tsec:\tflavor=1,pseudoflavor=1\n")
	fmt.Fprintf(w, "\tevents:\t%d 7362 3 12 260 147 1250 2 0 3918 0 0 52 0 3 0 0 260 0 0 0 0 0 0 0 0 0\n", 40+i)
	fmt.Fprintf(w, "\tbytes:\t%d 0 0 0 %d 0 1048640 0\n", 4294967296+i, 4295229440+i)
	fmt.Fprintf(w, "\tRPC iostats version: 1.1  p/v: 100003/%d (nfs)\n", vers)
	for x := range s.nconnect {
		fmt.Fprintf(w, "\txprt:\ttcp %d 0 1 0 12 %d %d 0 %d 0 48 %d %d\n", 700+x, 90000+x, 90000+x, 270000+x, 45000+x, 22500+x)
	}
	writeString(w, "\tper-op statistics\n")
	for k, op := range ops {
		c := (i + k) % 5
		fmt.Fprintf(w, "\t%12s: %d %d 0 %d %d 0 %d %d 0\n", op, c, c, c*180, c*140, c, c)
	}
	writeString(w, "\n")
}
