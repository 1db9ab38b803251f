package audit

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/readahead"
	"github.com/nfstune/nfstune/internal/shell"
)

// Sources cited by the rules.
const (
	srcReadAheadCommit = "Linux commit c128e575514c \"NFS: Optimise the default readahead size\" (v5.4); nfs-utils commit f86c4c90 (nfsrahead)"
	srcNConnectCommit  = "Linux commit 28cc5cd8c68f \"NFS: Add a mount option to specify number of TCP connections to use\" (v5.3)"
	srcClientSharing   = "fs/nfs/client.c nfs_match_client() does not compare nconnect; SUSE KB 000019933; Microsoft Learn, Azure NetApp Files mount options (nconnect)"
	srcNFSMan          = "nfs(5), nfs-utils utils/mount/nfs.man"
	srcANFMount        = "Microsoft Learn, Linux NFS mount options best practices for Azure NetApp Files (rsize/wsize)"
	srcANFCaching      = "Microsoft Learn, Azure NetApp Files mount options (nocto, actimeo); EDA workloads on Azure NetApp Files (2021)"
	srcUdev            = "udev(7) rules files order; nfs-utils tools/nfsrahead (99-nfs.rules, [nfsrahead] in nfs.conf, default 128)"
	srcSlots           = "NetApp NFSv3 slot tables; SUSE KB 000019281; EDA workloads on Azure NetApp Files (sysctl appendix)"
	srcSunrpcSysfs     = "Linux net/sunrpc/sysfs.c (/sys/kernel/sunrpc/xprt-switches/*/xprt-*/xprt_info, xprt_state; 5.14+)"
	srcMountstats      = "Linux fs/nfs/super.c nfs_show_stats (/proc/self/mountstats)"
)

// srcReadAheadOptimum is the evidence that read-ahead has an optimum, not only a floor.
const srcReadAheadOptimum = "buroa/home-ops#5862 (1024 KiB best for 64 KiB sequential reads, rsize 1 MiB); Azure/AKS#5743 (large read-ahead hurt random readers)"

// checkReadAhead is NFS001: read_ahead_kb below the profile, or not the exact value a
// rule asks for. A target derived from rsize meets a value someone chose with an info
// finding only (policy.Profile.ReadAheadChange).
func checkReadAhead(c *mountCtx) []Finding {
	want := c.res.ReadAheadKB
	if want == 0 || c.m.ReadAheadKB == nil || *c.m.ReadAheadKB == want {
		return nil
	}
	got := *c.m.ReadAheadKB
	adaptive := c.res.Adaptive
	if adaptive != nil && c.mapped != nil && got >= readahead.MappedFloorKB && got < want {
		// The agent lowers the window below one rsize for random readers of a mapped file
		// (readahead.ReasonMappedRandom); NFS005 names them.
		return nil
	}
	derived := c.res.ReadAheadRSizes > 0
	asks := fmt.Sprintf("the %s the %s/%s profile asks for", kib(want), c.res.Backend, c.res.Workload)
	switch {
	case c.res.ReadAheadBy != "":
		asks = fmt.Sprintf("the %s %s itself writes after each mount", kib(want), c.res.ReadAheadBy)
	case adaptive != nil:
		asks = fmt.Sprintf("the %s floor of adaptive read-ahead (one rsize; the agent moves it up to %s as the mount's traffic shows)", kib(want), kib(adaptive.MaxKB))
	}
	if derived {
		asks += fmt.Sprintf(" (%d x rsize %s)", c.res.ReadAheadRSizes, kib(c.m.RSize/1024))
	}
	set := c.readAheadFix(want)
	switch {
	case c.res.ReadAheadChange(got, c.m.RSize, false) && got > want:
		f := c.finding("NFS001", SeverityWarning)
		f.Message = fmt.Sprintf("read-ahead is %s; %s sets exactly %s", kib(got), c.res.Rule, kib(want))
		f.Expected = fmt.Sprintf("read_ahead_kb = %d", want)
		f.Actual = fmt.Sprintf("read_ahead_kb = %d", got)
		f.Fix = set
		f.Reason = "an exact read-ahead is a measured optimum (nfstune bench sweep): more read-ahead than that fetched data the workload did not use"
		f.Source = "nfstune bench sweep; " + srcReadAheadCommit
		f.Changes = c.readAheadChanges()
		return []Finding{f}
	case c.res.ReadAheadChange(got, c.m.RSize, false):
		f := c.finding("NFS001", SeverityWarning)
		f.Message = fmt.Sprintf("read-ahead is %s, below %s", kib(got), asks)
		f.Expected = fmt.Sprintf("read_ahead_kb >= %d", want)
		f.Actual = fmt.Sprintf("read_ahead_kb = %d", got)
		f.Fix = set
		f.Reason = "since Linux 5.4 an NFS mount starts with 128 KiB of read-ahead instead of 15 x rsize; sequential reads lose 30 % or more. Files opened before the change keep the old value."
		f.Source = srcReadAheadCommit + "; " + c.backend.Source
		f.Changes = c.readAheadChanges()
		return []Finding{f}
	case derived && got < want:
		f := c.finding("NFS001", SeverityInfo)
		f.Message = fmt.Sprintf("read-ahead is %s, below %s, but it is neither the kernel default nor less than one rsize: kept as a deliberate choice", kib(got), asks)
		f.Expected = fmt.Sprintf("read_ahead_kb >= %d, or a chosen value", want)
		f.Actual = fmt.Sprintf("read_ahead_kb = %d", got)
		f.Fix = fmt.Sprintf("to keep %d, write readAheadKB: %d in a config rule for this mount (readAheadExact: true to hold it there); to raise it: nfstune apply --exact", got, got)
		f.Reason = "read-ahead has an optimum, not only a floor: 1024 KiB gave 942 MB/s and 15360 KiB 380 MB/s on one mount (64 KiB reads), so nfstune does not replace a value someone set"
		f.Source = srcReadAheadOptimum
		return []Finding{f}
	}
	return nil
}

// readAheadFix is the fix that sets the mount's read-ahead to want now: under adaptive
// read-ahead want is the floor, which the agent moves from.
func (c *mountCtx) readAheadFix(want int) string {
	if c.res.Adaptive != nil {
		return fmt.Sprintf("echo %d > %s ; nfstune agent adapts it from there (nfstune apply sets the floor without the agent)", want, readAheadFile(c.m.Device))
	}
	return fmt.Sprintf("echo %d > %s ; nfstune apply makes it persistent", want, readAheadFile(c.m.Device))
}

// checkReadAheadRSize is NFS002: read-ahead smaller than one READ, whatever the
// profile says.
func checkReadAheadRSize(c *mountCtx) []Finding {
	if c.m.ReadAheadKB == nil || c.m.RSize < 1024 || *c.m.ReadAheadKB >= c.m.RSize/1024 {
		return nil
	}
	got, rsizeKB := *c.m.ReadAheadKB, c.m.RSize/1024
	if c.res.ReadAheadExact && c.res.ReadAheadKB == got {
		return nil // a rule's exact choice, e.g. for random readers of mapped files (NFS005)
	}
	f := c.finding("NFS002", SeverityWarning)
	f.Message = fmt.Sprintf("read-ahead of %s is below the rsize of %s: no sequential reader can fill one READ", kib(got), kib(rsizeKB))
	f.Expected = fmt.Sprintf("read_ahead_kb >= %d (rsize=%d)", rsizeKB, c.m.RSize)
	f.Actual = fmt.Sprintf("read_ahead_kb = %d, rsize=%d", got, c.m.RSize)
	switch want := c.res.ReadAheadKB; {
	case want >= rsizeKB:
		f.Fix = c.readAheadFix(want)
		if c.res.ReadAheadChange(got, c.m.RSize, false) {
			f.Changes = c.readAheadChanges() // NFS001's too: foldCauses keeps one of them
		}
	case want > 0:
		f.Fix = fmt.Sprintf("raise readAheadKB %d of %s to at least %d, then nfstune apply", want, c.res.Rule, rsizeKB)
	default:
		f.Fix = fmt.Sprintf("echo %d > %s (15 x rsize), or give this mount a readAheadKB in the config and run nfstune apply", 15*rsizeKB, readAheadFile(c.m.Device))
	}
	f.Reason = "the read-ahead window bounds how far ahead the page cache reads; a window smaller than rsize makes every READ of a sequential reader smaller than the size the client and server agreed on, so each round trip carries less than it could (the kernel only widens it to rsize for a single read(2) larger than the window)"
	f.Source = srcReadAheadCommit + "; Linux mm/readahead.c (bdi io_pages)"
	return []Finding{f}
}

// srcReadAheadEvidence is where the read-ahead evidence comes from.
const srcReadAheadEvidence = srcMountstats + " (bytes: normal, direct and server read bytes; READ row: operations, cumulative RTT); fs/nfs/iostat.h; Linux mm/readahead.c"

// checkOverRead is NFS003: since the mount, the server sent much more READ payload than
// applications read (readahead.Evidence.Wasteful): read-ahead fetched pages that were
// evicted before use or never read. When most of it was not read with read(2) at all
// (Mapped), it is NFS005 instead.
func checkOverRead(c *mountCtx) []Finding {
	if c.m.Stats == nil || c.m.ReadAheadKB == nil {
		return nil
	}
	e := readahead.Measure(c.m, nil, 0)
	if e.Mapped() {
		return mappedFinding(c, e)
	}
	if !e.Wasteful() {
		return nil
	}
	cur, rsizeKB := *c.m.ReadAheadKB, max(c.m.RSize/1024, 1)
	f := c.finding("NFS003", SeverityWarning)
	f.Message = fmt.Sprintf("since the mount the server sent %.1fx the bytes applications read (%s for %s): read-ahead of %s fetched pages that were evicted before use or never read",
		e.OverRead, gib(e.ServerReadBytes), gib(e.AppReadBytes), kib(cur))
	f.Expected = fmt.Sprintf("server READ bytes <= %.1f x application read bytes (over at least %s of READs)", readahead.WastefulOverRead, gib(readahead.MinWasteBytes))
	f.Actual = fmt.Sprintf("over-read %.2f over %.0f s: %d server READ bytes, %d application read bytes (normal + direct); read_ahead_kb = %d; %d single-page reads, %d read-ahead batches",
		e.OverRead, e.Seconds, e.ServerReadBytes, e.AppReadBytes, cur, e.ReadPageEvents, e.ReadaheadEvents)
	// The window that would have fetched what was read, in whole READs, at least one.
	lower := max(int(float64(cur)/e.OverRead)/rsizeKB*rsizeKB, rsizeKB)
	mp := mountPointArg(c.m)
	if lower < cur {
		f.Fix = fmt.Sprintf("echo %d > %s ; nfstune stats 10 %s shows the over-read of files opened from then on; to keep it: readAheadKB: %d and readAheadExact: true in a config rule for this mount, then nfstune apply --exact --measure 1m",
			lower, readAheadFile(c.m.Device), mp, lower)
	} else {
		f.Fix = fmt.Sprintf("read-ahead is already at most one READ (rsize %s): give the readers of %s more memory (their cgroup's memory.max, or the host's), or look for readers that map files (mmap) rather than read them", kib(rsizeKB), firstOr(c.m.MountPoints, "<mountpoint>"))
	}
	f.Reason = "read-ahead reads pages before the reader asks for them; when the readers' memory (their cgroup's memory.max, or the host's) cannot hold a window per stream until it is read, the pages are evicted and fetched again, so the server sends several times what is read and the readers slow down. Reads of mmap'd files count as server bytes but not as application bytes: a mount read through mmap shows over-read without waste"
	f.Source = srcReadAheadEvidence + "; " + srcReadAheadOptimum
	return []Finding{f}
}

// mappedFinding is NFS005: since the mount, most of the READ payload was not read with
// read(2) (readahead.Evidence.Mapped, e): the files are read through mmap, where what
// read-ahead costs the readers cannot be measured from mountstats.
func mappedFinding(c *mountCtx, e readahead.Evidence) []Finding {
	cur := *c.m.ReadAheadKB
	f := c.finding("NFS005", SeverityInfo)
	f.Message = fmt.Sprintf("since the mount the server sent %s of READs and applications read %s with read(2): the rest was read through mmap, which mountstats does not count, so nfstune cannot tell what read-ahead of %s costs the readers",
		gib(e.ServerReadBytes), gib(e.AppReadBytes), kib(cur))
	f.Expected = fmt.Sprintf("application read bytes >= 1/%d of server READ bytes (over at least %s of READs), so that over-read measures read-ahead (NFS003)", readahead.MappedOverRead, gib(readahead.MinWasteBytes))
	f.Actual = fmt.Sprintf("%d server READ bytes, %d application read bytes (normal + direct) over %.0f s; read_ahead_kb = %d; %d single-page reads, %d read-ahead batches",
		e.ServerReadBytes, e.AppReadBytes, e.Seconds, cur, e.ReadPageEvents, e.ReadaheadEvents)
	if len(c.mapped) > 0 {
		f.Message += "; the pods reading it through mmap: " + mappedPods(c.mapped)
	}
	f.Fix = fmt.Sprintf("if the mapped files are read at random (a database, a search index), lower the window: echo 128 > %s, and to keep it readAheadKB: 128 and readAheadExact: true in a config rule for this mount, then nfstune apply --exact; or have the readers advise MADV_RANDOM. Readers that map files and read them in order gain from the window as read(2) readers do: leave it",
		readAheadFile(c.m.Device))
	f.Reason = "a page fault on a mapped file reads the read-ahead window around the faulting page, and mountstats counts those pages as server READ bytes but not as application bytes. Four random 16 KiB readers of a mapped file in the lab (a 64 MiB memory cgroup) read 6.7 MiB/s at 128 KiB and 0.2 at 15360 KiB on Linux 6.1 (2.0 and 0.1 on 7.2), the server sending up to 726 times what they read. Programs and libraries run from the mount are mapped too"
	f.Source = srcReadAheadEvidence + "; Linux mm/filemap.c (do_sync_mmap_readahead); docs/benchmarks.md (scenario e)"
	return []Finding{f}
}

// mappedPods names at most MaxMappedPods of readers, busiest first, with their rates.
func mappedPods(readers []MappedReader) string {
	var parts []string
	for _, r := range readers[:min(len(readers), MaxMappedPods)] {
		parts = append(parts, fmt.Sprintf("pod %s (%.1f MiB/s through page faults, %.0f major faults/s)", r.PodUID, r.FaultBytesPerSecond/(1<<20), r.MajorFaultsPerSecond))
	}
	if n := len(readers) - MaxMappedPods; n > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", n))
	}
	return strings.Join(parts, ", ")
}

// MaxMappedPods is how many pods NFS005 names.
const MaxMappedPods = 3

// checkWindowBound is NFS004: over a window of two samples, the READs in flight filled
// what the read-ahead window allows (readahead.Evidence.Limiting): the window, not the
// server or the network, bounds the sequential readers.
func checkWindowBound(c *mountCtx) []Finding {
	e := c.traffic
	if e == nil || !e.Limiting() {
		return nil
	}
	cur := e.ReadAheadKB
	f := c.finding("NFS004", SeverityInfo)
	f.Message = fmt.Sprintf("read-ahead of %s bounds the readers: %.1f READs were in flight on average, %.0f%% of the %.1f one window allows", kib(cur), e.InFlight, 100*e.WindowBound, e.WindowReads)
	f.Expected = fmt.Sprintf("READs in flight below %.2f of a read-ahead window's", readahead.WindowBoundAt)
	f.Actual = fmt.Sprintf("window-bound %.2f over %.0f s: %d READs of %.0f KiB on average (rsize %s), RTT %.1f ms, over-read %.2f; read_ahead_kb = %d",
		e.WindowBound, e.Seconds, e.Reads, e.AvgReadBytes/1024, kib(e.RSize/1024), 1000*e.ReadRTTSeconds/float64(e.Reads), e.OverRead, cur)
	mp := mountPointArg(c.m)
	f.Fix = fmt.Sprintf("echo %d > %s ; nfstune stats 10 %s shows window-bound and application MB/s for files opened from then on; to keep it: readAheadKB: %d in a config rule for this mount, then nfstune apply --measure 1m",
		2*cur, readAheadFile(c.m.Device), mp, 2*cur)
	f.Reason = "a sequential reader has at most one read-ahead window of READs outstanding (mm/readahead.c); READs in flight are READs per second times their RTT, so when they fill the window, throughput is the window divided by the RTT, and a larger window raises it until the server, the network or memory bounds it (NFS003 then says so). Files already open keep the read-ahead they were opened with"
	f.Source = srcReadAheadEvidence
	return []Finding{f}
}

// The fixes for pods with opposite read-ahead needs on one superblock (NFS006, NFS007).
const (
	fixOwnSuperblock = "add nosharecache to the mount options of its PersistentVolume (or StorageClass), or mount another export path"
	fixMadvRandom    = "have the programs that read a mapped file at random call madvise(MADV_RANDOM) on the mapping (the kernel then reads no window around their faults)"
)

// readsInOrder reports whether a pod of class c reads files in order, which a larger window
// serves: the side of NFS006's conflict, and of the one NFS007 cannot confirm.
func readsInOrder(c readahead.Class) bool {
	return c == readahead.StreamingRead || c == readahead.MappedSequential
}

// checkSharedNeeds is NFS006: pods whose read traffic needs opposite read-ahead share the
// superblock, and with it one read_ahead_kb: one reads files in order (streaming_read, or
// mapped_sequential: a larger window serves it), another thrashes its page cache under its
// memory limit (what read-ahead brings in pushes out what it still needs) or reads a mapped
// file at random (each fault reads the whole window around it). No value serves both; a
// superblock for each does, or for mapped random readers madvise(MADV_RANDOM).
func checkSharedNeeds(c *mountCtx) []Finding {
	if c.classes == nil || c.m.ReadAheadKB == nil {
		return nil
	}
	var wantLarger, thrashing, mappedRandom []string
	for _, p := range c.classes.Pods {
		switch {
		case readsInOrder(p.Class):
			wantLarger = append(wantLarger, p.UID)
		case p.Class == readahead.Thrashing:
			thrashing = append(thrashing, p.UID)
		case p.Class == readahead.MappedRandom:
			mappedRandom = append(mappedRandom, p.UID)
		}
	}
	if len(wantLarger) == 0 || len(thrashing)+len(mappedRandom) == 0 {
		return nil
	}
	var smaller, fixes []string
	if len(thrashing) > 0 {
		smaller = append(smaller, podList(thrashing)+" thrash their page cache under their memory limit")
		fixes = append(fixes, "raise the thrashing pods' memory limit")
	}
	if len(mappedRandom) > 0 {
		smaller = append(smaller, podList(mappedRandom)+" read a mapped file at random")
		fixes = append(fixes, fixMadvRandom)
	}
	f := c.finding("NFS006", SeverityWarning)
	f.Message = fmt.Sprintf("pods with opposite read-ahead needs share this superblock: %s read files in order, %s; one read_ahead_kb cannot serve both",
		podList(wantLarger), strings.Join(smaller, ", "))
	f.Expected = "the pods of one superblock alike: streaming readers, or readers that a smaller window serves"
	var actual []string
	for _, p := range c.classes.Pods {
		actual = append(actual, fmt.Sprintf("pod %s: %s (%s)", p.UID, p.Class, p.Why))
	}
	f.Actual = strings.Join(actual, "; ") + fmt.Sprintf("; read_ahead_kb = %d", *c.m.ReadAheadKB)
	f.Fix = "give the volume of the pods a smaller window serves a superblock of its own, whose read-ahead nfstune then sets apart: " + fixOwnSuperblock + "; or " + strings.Join(fixes, "; or ") + ". Where the cluster relabels volumes with SELinux mount options (the SELinuxMount feature), pods with different SELinux contexts get superblocks of their own already"
	f.Reason = "read_ahead_kb belongs to the superblock (its bdi), and every pod that mounts the same export from the same server with the same options shares one superblock (nfs_compare_super): a window large enough for a streaming reader fills a memory-limited pod's cache with pages it never reads and makes each fault of a random reader of a mapped file read the whole window, and one small enough for those slows the streaming reader. The classes come from the agent's per-pod cgroup counters and, for reads through mmap, its per-pod collector (docs/agent.md, traffic classes)"
	f.Source = "Linux fs/nfs/super.c (nfs_compare_super, nosharecache), mm/readahead.c, mm/filemap.c (do_sync_mmap_readahead, VM_RAND_READ); docs/agent.md"
	return []Finding{f}
}

// checkUnseenFaults is NFS007: pods of the superblock take major faults that nothing places
// (readahead.PodClass.UnseenMajorFaults), the agent running without its per-pod collector.
// They read files through mmap, or swap; whether they read this superblock's files, and at
// random, where each fault reads the whole window around it, cannot be told from their
// cgroups or mountstats, so the agent holds the window from rising (docs/agent.md). Where
// other pods of the superblock read files in order, the finding names them too: if the
// faults are a random reader's of this superblock, the pods are NFS006's conflict, which the
// collector would confirm; the fixes that exist for it are the same. It stays information,
// since a model load beside a streaming reader faults as much and conflicts with nothing.
func checkUnseenFaults(c *mountCtx) []Finding {
	if c.classes == nil {
		return nil
	}
	var uids, inOrder, actual []string
	for _, p := range c.classes.Pods {
		switch {
		case p.UnseenMajorFaults > 0:
			uids = append(uids, p.UID)
			actual = append(actual, fmt.Sprintf("pod %s: %d major faults (its cgroup's memory.stat pgmajfault, from any file or swap)", p.UID, p.UnseenMajorFaults))
		case readsInOrder(p.Class):
			inOrder = append(inOrder, p.UID)
			actual = append(actual, fmt.Sprintf("pod %s: %s", p.UID, p.Class))
		}
	}
	if len(uids) == 0 {
		return nil
	}
	f := c.finding("NFS007", SeverityInfo)
	f.Message = fmt.Sprintf("%s took major faults over the agent's last interval that it cannot place: reads through mmap (of this superblock's files or others), or swapping; whether at random cannot be told without the per-pod collector, and the agent holds this superblock's read-ahead from rising meanwhile",
		podList(uids))
	f.Expected = "the pods' page faults placed by the agent's per-pod collector, or too few to matter"
	f.Actual = strings.Join(actual, "; ")
	f.Fix = "turn on the agent's per-pod collector (the Helm chart's agent.podIO, nfstune agent --pod-io): it counts each pod's faults on each superblock, and the agent then lowers the window for a reader of a mapped file at random (naming a conflict with other pods in NFS006) or lets it rise for the others"
	if len(inOrder) > 0 {
		subject := "It shares"
		if len(uids) > 1 {
			subject = "They share"
		}
		f.Message += fmt.Sprintf(". %s the superblock, and its one read_ahead_kb, with %s, reading files in order: if the faults are reads of this superblock's files at random, the pods need opposite windows (NFS006's conflict, which the collector would confirm)",
			subject, podList(inOrder))
		f.Fix += "; for such a conflict, give one volume a superblock of its own: " + fixOwnSuperblock + "; or " + fixMadvRandom
	}
	f.Reason = "a reader of a mapped file at random reads the whole read-ahead window around each fault that misses the page cache, so a window raised for a streaming pod of the same superblock costs it that window at every miss; its reads hide among the superblock's in mountstats, and its cgroup counts its faults on every file, not per superblock"
	f.Source = "Linux mm/filemap.c (filemap_fault, do_sync_mmap_readahead), fs/nfs/super.c (nfs_compare_super, nosharecache), Documentation/admin-guide/cgroup-v2.rst (memory.stat pgmajfault); docs/agent.md"
	return []Finding{f}
}

// podList names pods for a message: "pod a", "pods a, b".
func podList(uids []string) string {
	if len(uids) == 1 {
		return "pod " + uids[0]
	}
	return "pods " + strings.Join(uids, ", ")
}

// gib formats bytes in GiB.
func gib(b uint64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }

// azureFilesExport is how Azure Files exports a share: /<storage account>/<share>, the
// account 3 to 24 lowercase letters and digits.
var azureFilesExport = regexp.MustCompile(`^/[a-z0-9]{3,24}/[^/]+/?$`)

// checkLikelyBackend is NFS080: a server known only by its address whose export and NFS
// version look like a known service. nfstune never applies a guessed backend; the finding
// gives the config line that declares it.
func checkLikelyBackend(c *mountCtx) []Finding {
	if c.res.Backend != policy.BackendGeneric || c.res.Rule != policy.RuleBuiltIn || c.m.Proxy != nil {
		return nil
	}
	if _, err := netip.ParseAddr(strings.Trim(c.m.Server, "[]")); err != nil {
		return nil
	}
	if c.m.Version != "4.1" || !azureFilesExport.MatchString(c.m.Export) {
		return nil
	}
	account := strings.Split(c.m.Export, "/")[1]
	f := c.finding("NFS080", SeverityInfo)
	f.Message = fmt.Sprintf("%s exports %s over NFSv4.1 as Azure Files does (/<account>/<share>, e.g. through a private endpoint); nfstune treats it as a generic server until the config says otherwise", c.m.Server, c.m.Export)
	f.Expected = "backend declared in the config"
	f.Actual = "backend generic (the server is a bare IP address)"
	f.Fix = fmt.Sprintf("if this is Azure Files, add under rules: in the config: - {match: {server: %q, export: %q}, backend: %s}", c.m.Server, "/"+account+"/*", policy.BackendAzureFiles)
	f.Reason = "a bare IP tells nothing about the service; Azure Files serves NFS only over 4.1 and exports /<storage account>/<share>, so the export is a hint, never proof"
	f.Source = "kubernetes-sigs/azurefile-csi-driver pkg/azurefile (vers=4,minorversion=1; source <account>.file.core.windows.net:/<account>/<share>); Microsoft Learn, Azure Files NFS private endpoints"
	return []Finding{f}
}

// checkUnknownProxy is NFS081: a server on a loopback address with its own port, which no
// helper's state attributes. Every file system behind such forwarders shows the same
// address, so the server cannot tell the service; the mount point can.
func checkUnknownProxy(c *mountCtx) []Finding {
	if c.m.Proxy == nil || c.m.Proxy.Kind != inventory.ProxyLoopback || c.res.Rule != policy.RuleBuiltIn {
		return nil
	}
	f := c.finding("NFS081", SeverityInfo)
	f.Message = fmt.Sprintf("%s goes through a local forwarder on port %d that no efs-utils or AZNFS state names; nfstune treats it as a generic server until the config says otherwise", c.m.Server, c.m.Proxy.Port)
	f.Expected = "the service behind the forwarder known (helper state, or the config)"
	f.Actual = fmt.Sprintf("backend generic (server %s, port=%d)", c.m.Server, c.m.Proxy.Port)
	f.Fix = fmt.Sprintf("declare it under rules: in the config, by mount point (the address is shared by every forwarded mount): - {match: {mountpoint: %q}, backend: <service>}", firstOr(c.m.MountPoints, "<mountpoint>"))
	f.Reason = "efs-utils (efs-proxy, stunnel) and AZNFS (Azure Files encryption in transit) mount 127.0.0.1 with port= and keep state naming the real server; without it the address says nothing"
	f.Source = "aws/efs-utils src/efs_utils_common/mount_utils.py mount_nfs (127.0.0.1:<path>, port=<tlsport>); Azure/AZNFS-mount src/nfsv4mountscript.sh; Linux fs/nfs/super.c nfs_show_mount_options (port=)"
	return []Finding{f}
}

// checkProxyBypassed is NFS082: a mount made through a local proxy whose requests go over
// another kernel NFS client of the same server, not through the proxy. The kernel's
// NFSv4.1 trunking detection hands a new mount an existing client with the same server
// owner, whatever its port=; the proxy's TLS (and efs-proxy's connection scaling) then do
// not apply. Seen in the lab: mountinfo shows the proxy's port, nfsfs the other client's,
// and no byte of a write goes through the proxy.
func checkProxyBypassed(c *mountCtx) []Finding {
	p := c.m.Proxy
	if p == nil || p.BypassPort == 0 {
		return nil
	}
	for _, o := range c.byDev {
		if o.Proxy != nil && o.Proxy.Port == p.BypassPort && o.Proxy.BypassPort == 0 {
			// The same file system mounted twice through the helper (one proxy per mount
			// point): the requests go through the other mount's proxy.
			return nil
		}
	}
	f := c.finding("NFS082", SeverityWarning)
	f.Message = fmt.Sprintf("mounted through %s on port %d, but the kernel sends its requests over its client of the same server on port %d (NFSv4.1 trunking): they do not go through the proxy, so its TLS does not apply", p.Kind, p.Port, p.BypassPort)
	f.Expected = fmt.Sprintf("client on port %d (the proxy)", p.Port)
	f.Actual = fmt.Sprintf("client on port %d (/proc/fs/nfsfs/volumes), client group %s", p.BypassPort, c.m.ClientGroup)
	f.Fix = fmt.Sprintf("mount every file system of this server the same way: unmount the mounts of client %s that do not go through %s, then mount them and this one again through the helper", c.m.ClientGroup, p.Kind)
	f.Reason = "the kernel shares one NFSv4.1 client per server owner (nfs4_discover_server_trunking); a second connection through a proxy to the same server is dropped for the existing one"
	f.Source = "Linux fs/nfs/nfs4client.c nfs41_walk_client_list, fs/nfs/client.c nfs_volume_list_show; Azure/AZNFS-mount src/nfsv4mountscript.sh (TLS and notls mounts of one endpoint \"use the same connection\"); nfstune lab TestProxiedMountTrunking"
	return []Finding{f}
}

// checkNConnect is NFS010 (absent or below the profile where the backend gains from it),
// NFS011 (above the backend's useful maximum) and NFS012 (requested but not in effect).
func checkNConnect(c *mountCtx) []Finding {
	var out []Finding
	conns := connections(c.m)
	want := c.res.Mount.NConnect
	req, hasReq := requestedInt(c.m, "nconnect")

	if hasReq && req != conns {
		f := c.finding("NFS012", SeverityWarning)
		f.Expected = fmt.Sprintf("nconnect=%d (requested in %s)", req, c.m.Requested.Source)
		f.Actual = fmt.Sprintf("%d connection(s) (nconnect=%d shown by the kernel)", conns, c.m.NConnect)
		setBy := ""
		if c.group != nil && c.group.SetBy != "" && c.group.SetBy != c.m.Device {
			if o := c.byDev[c.group.SetBy]; o != nil {
				setBy = fmt.Sprintf("%s (%s)", strings.Join(o.MountPoints, ", "), o.Device)
			}
		}
		switch {
		case setBy != "":
			f.Message = fmt.Sprintf("nconnect=%d is requested but not in effect: %s mounted %s first and fixed nconnect for client %s", req, setBy, c.group.ServerAddr, c.m.ClientGroup)
		case c.group != nil && len(c.group.Devices) > 1:
			f.Message = fmt.Sprintf("nconnect=%d is requested but not in effect: another mount of client %s (devices %s) was mounted first and fixed nconnect", req, c.m.ClientGroup, strings.Join(c.group.Devices, ", "))
		default:
			f.Message = fmt.Sprintf("nconnect=%d is requested but not in effect: the kernel or the platform dropped the option", req)
		}
		f.Fix = c.remountGroup(c.fstabLine(map[string]string{"nconnect": strconv.Itoa(req)}))
		f.Reason = "nconnect belongs to the kernel NFS client shared by every mount with the same server address, port, version and transport; only the first mount's value counts"
		f.Source = srcClientSharing
		out = append(out, f)
	}

	krb := strings.HasPrefix(c.m.Options["sec"], "krb5")
	canRaise := !c.kernel.before(5, 3) && !krb && !(hasReq && req >= want)
	if c.backend.NConnectGain && want > 1 && conns < want && canRaise {
		f := c.finding("NFS010", SeverityWarning)
		if conns <= 1 {
			f.Message = fmt.Sprintf("nconnect is not used; %s gains from %d connections", c.res.Backend, want)
		} else {
			f.Message = fmt.Sprintf("nconnect gives %d connections, fewer than the %d the %s profile asks for", conns, want, c.res.Backend)
		}
		f.Expected = fmt.Sprintf("nconnect=%d", want)
		f.Actual = fmt.Sprintf("%d connection(s)", conns)
		f.Fix = c.remountGroup(c.fstabLine(map[string]string{"nconnect": strconv.Itoa(want)}))
		f.Reason = "one TCP connection limits a client's throughput; several connections spread RPCs over more flows and server queues"
		f.Source = c.backend.Source
		out = append(out, f)
	}

	if limit := c.backend.MaxNConnect; limit > 0 && limit < policy.MaxNConnect && max(conns, c.m.NConnect) > limit {
		n := max(conns, c.m.NConnect)
		f := c.finding("NFS011", SeverityWarning)
		f.Message = fmt.Sprintf("nconnect=%d is above the %d connections %s gains from; more may lower performance", n, limit, c.res.Backend)
		f.Expected = fmt.Sprintf("nconnect <= %d", limit)
		f.Actual = fmt.Sprintf("nconnect=%d", n)
		f.Fix = c.remountGroup(c.fstabLine(map[string]string{"nconnect": strconv.Itoa(limit)}))
		f.Reason = fmt.Sprintf("%s documents no gains beyond nconnect=%d", c.res.Backend, limit)
		f.Source = c.backend.Source
		out = append(out, f)
	}
	return out
}

// checkTransferSize is NFS020 (rsize/wsize requested but lowered by the server) and
// NFS021 (above 256 KiB on Azure NetApp Files).
func checkTransferSize(c *mountCtx) []Finding {
	var out []Finding
	var capped, expected, actual []string
	worse := false
	for _, k := range []struct {
		name string
		got  int
		want int
	}{{"rsize", c.m.RSize, c.res.Mount.RSize}, {"wsize", c.m.WSize, c.res.Mount.WSize}} {
		req, ok := requestedInt(c.m, k.name)
		if !ok || k.got <= 0 {
			continue
		}
		// What the client itself makes of the request: at most 1 MiB, page aligned.
		client := min(req, policy.MaxIOSize) &^ 4095
		if client > k.got {
			capped = append(capped, k.name)
			expected = append(expected, fmt.Sprintf("%s=%d", k.name, client))
			actual = append(actual, fmt.Sprintf("%s=%d", k.name, k.got))
			if k.want > 0 && k.got < k.want {
				worse = true
			}
		}
	}
	if len(capped) > 0 {
		sev := SeverityInfo
		if worse {
			sev = SeverityWarning
		}
		f := c.finding("NFS020", sev)
		f.Message = fmt.Sprintf("%s requested in %s but the server allows only %s", strings.Join(expected, ","), c.m.Requested.Source, strings.Join(actual, ","))
		f.Expected = strings.Join(expected, ",")
		f.Actual = strings.Join(actual, ",")
		f.Fix = "raise the server's maximum transfer size (Linux knfsd: /proc/fs/nfsd/max_block_size before nfsd starts), or write what is in effect in /etc/fstab: " +
			c.fstabLine(map[string]string{"rsize": strconv.Itoa(c.m.RSize), "wsize": strconv.Itoa(c.m.WSize)})
		f.Reason = "client and server negotiate the largest size both support; a requested size above the server's is silently lowered"
		f.Source = srcNFSMan
		out = append(out, f)
	}
	if limit := c.backend.MaxRSize; c.res.Backend == policy.BackendAzureNetAppFiles && limit > 0 && (c.m.RSize > limit || c.m.WSize > limit) {
		f := c.finding("NFS021", SeverityWarning)
		f.Message = fmt.Sprintf("rsize/wsize above %d bytes on Azure NetApp Files raise latency and lower throughput", limit)
		f.Expected = fmt.Sprintf("rsize<=%d,wsize<=%d", limit, limit)
		f.Actual = fmt.Sprintf("rsize=%d,wsize=%d", c.m.RSize, c.m.WSize)
		f.Fix = fmt.Sprintf("set in /etc/fstab: %s ; then %s", c.fstabLine(map[string]string{"rsize": strconv.Itoa(limit), "wsize": strconv.Itoa(limit)}), remountCmd(c.m.MountPoints))
		f.Reason = "Azure NetApp Files recommends rsize and wsize of 256 KiB or less for the best throughput and latency"
		f.Source = srcANFMount
		out = append(out, f)
	}
	// NFS022: smaller than the profile, and not because the server capped a request
	// (that is NFS020).
	wantR, wantW := c.res.Mount.RSize, c.res.Mount.WSize
	small := (wantR > 0 && c.m.RSize > 0 && c.m.RSize < wantR) || (wantW > 0 && c.m.WSize > 0 && c.m.WSize < wantW)
	if small && len(capped) == 0 {
		f := c.finding("NFS022", SeverityWarning)
		f.Message = fmt.Sprintf("rsize=%d,wsize=%d is smaller than the %s profile's rsize=%d,wsize=%d: more RPCs per byte and less read-ahead per request", c.m.RSize, c.m.WSize, c.res.Backend, wantR, wantW)
		f.Expected = fmt.Sprintf("rsize>=%d,wsize>=%d", wantR, wantW)
		f.Actual = fmt.Sprintf("rsize=%d,wsize=%d", c.m.RSize, c.m.WSize)
		f.Fix = fmt.Sprintf("set in /etc/fstab: %s ; then %s", c.fstabLine(map[string]string{"rsize": strconv.Itoa(wantR), "wsize": strconv.Itoa(wantW)}), remountCmd(c.m.MountPoints))
		f.Reason = "each READ or WRITE RPC carries at most rsize/wsize bytes; the backend's documented size moves the most data per round trip"
		f.Source = c.backend.Source
		out = append(out, f)
	}
	return out
}

// checkSoft is NFS030: a soft (or softerr) mount of writable data.
func checkSoft(c *mountCtx) []Finding {
	mode := ""
	switch {
	case hasOpt(c.m, "softerr"):
		mode = "softerr"
	case hasOpt(c.m, "soft"):
		mode = "soft"
	default:
		return nil
	}
	if hasOpt(c.m, "ro") {
		return nil
	}
	if c.res.Backend == policy.BackendLonghorn {
		return []Finding{c.longhornSoft(mode)}
	}
	f := c.finding("NFS030", SeverityError)
	f.Message = fmt.Sprintf("writable mount uses %s: a server that does not answer in time makes writes fail and can corrupt data silently", mode)
	f.Expected = "hard"
	f.Actual = mode
	f.Fix = fmt.Sprintf("set in /etc/fstab: %s ; then %s", c.fstabLine(map[string]string{"hard": ""}, "soft", "softerr"), remountCmd(c.m.MountPoints))
	f.Reason = "after retrans timeouts a soft mount returns EIO (softerr: ETIMEDOUT) to the application; data an application believed written may be lost"
	f.Source = srcNFSMan
	return []Finding{f}
}

// longhornSoft is NFS030 for a Longhorn RWX volume, which Longhorn mounts softerr on
// purpose (its nfsOptions default softerr,timeo=600,retrans=5): with hard, a share-manager
// pod that dies leaves every pod of the volume, and kubelet's unmount, hung until the node
// reboots. The trade-off is stated instead of an error; on Linux 6.6 and later, hard with
// nfstune's recovery policy keeps writes safe without the hang.
func (c *mountCtx) longhornSoft(mode string) Finding {
	f := c.finding("NFS030", SeverityWarning)
	f.Expected = "hard, with the agent's recovery policy (Linux 6.6 and later)"
	f.Actual = mode
	f.Source = "Longhorn docs, RWX nfsOptions (longhorn/longhorn#6655); " + srcNFSMan
	timeo, retrans := c.m.Options["timeo"], c.m.Options["retrans"]
	f.Message = fmt.Sprintf("Longhorn RWX volume mounted %s (timeo=%s, retrans=%s), as Longhorn does by default so that a dead share-manager does not hang the node: in exchange, a request unanswered past the retries fails with an error, and data an application believed written may be lost", mode, orDash(timeo), orDash(retrans))
	if c.kernel.before(6, 6) {
		f.Reason = fmt.Sprintf("on kernel %s a hard mount of a dead server can only be freed by umount -f and -l or a reboot, so %s is the lesser evil here; from Linux 6.6 on, hard plus nfstune's recovery policy frees a dead share-manager's superblock once its pods are torn down", c.inv.KernelRelease, mode)
		f.Fix = "keep " + mode + " on this kernel; on nodes with Linux 6.6 or later, set hard in the StorageClass's nfsOptions and enable the agent's recovery policy (docs/agent.md, Recovery)"
		return f
	}
	f.Reason = "this kernel has /sys/fs/nfs/<dev>/shutdown (Linux 6.6): with hard, nfstune's recovery policy shuts down the superblock of a dead share-manager once only pods being torn down use it, so writes never fail silently and nodes do not hang"
	f.Fix = "set hard in the StorageClass's nfsOptions (e.g. vers=4.1,noresvport,hard,timeo=600,retrans=5) and enable the agent's recovery policy (docs/agent.md, Recovery); new volumes get it, existing ones when their pods remount"
	return f
}

// acLimit is the longest attribute cache time, in seconds, that is still the kernel's
// default (acregmax and acdirmax are 60).
const acLimit = 60

// checkCaching is NFS031: nocto or long attribute caching on data not declared static.
func checkCaching(c *mountCtx) []Finding {
	if c.res.Static {
		return checkStaticCaching(c)
	}
	var found []string
	if hasOpt(c.m, "nocto") {
		found = append(found, "nocto")
	}
	for _, k := range []string{"actimeo", "acregmin", "acregmax", "acdirmin", "acdirmax"} {
		v, ok := c.m.Options[k]
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(v); err == nil && n > acLimit {
			found = append(found, fmt.Sprintf("%s=%d", k, n))
		}
	}
	if len(found) == 0 {
		return nil
	}
	f := c.finding("NFS031", SeverityWarning)
	f.Message = fmt.Sprintf("%s on data not declared static: other clients' changes may stay invisible for minutes", strings.Join(found, ","))
	f.Expected = fmt.Sprintf("cto, attribute cache <= %d s (or the data declared static)", acLimit)
	f.Actual = strings.Join(found, ",")
	mp := "<mountpoint>"
	if len(c.m.MountPoints) > 0 {
		mp = c.m.MountPoints[0]
	}
	f.Fix = fmt.Sprintf("if the data really changes rarely, declare it in the nfstune config: `- match: {mountpoint: %q}` with `static: true`; otherwise set in /etc/fstab: %s ; then %s",
		mp, c.fstabLine(nil, "nocto", "actimeo", "acregmin", "acregmax", "acdirmin", "acdirmax"), remountCmd(c.m.MountPoints))
	f.Reason = "nocto and long actimeo cut GETATTR traffic by skipping revalidation, which is safe only for data that does not change"
	f.Source = srcANFCaching
	return []Finding{f}
}

// checkStaticCaching is NFS032: data declared static that still revalidates on every open
// and caches attributes for the default 3-60 s, although the profile asks for nocto and a
// long actimeo.
func checkStaticCaching(c *mountCtx) []Finding {
	want := c.res.Mount
	var missing []string
	if want.NoCTO && !hasOpt(c.m, "nocto") {
		missing = append(missing, "nocto")
	}
	if want.ACTimeo > acLimit {
		short := false
		for _, k := range []string{"acregmin", "acregmax", "acdirmin", "acdirmax"} {
			n, err := strconv.Atoi(c.m.Options[k])
			if err != nil {
				// The kernel prints ac* only when they differ from the defaults (3, 60, 30, 60),
				// all of which are below any actimeo worth asking for.
				n = map[string]int{"acregmin": 3, "acregmax": 60, "acdirmin": 30, "acdirmax": 60}[k]
			}
			if n < want.ACTimeo {
				short = true
			}
		}
		if short {
			missing = append(missing, fmt.Sprintf("actimeo=%d", want.ACTimeo))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	f := c.finding("NFS032", SeverityInfo)
	f.Message = fmt.Sprintf("the data is declared static but the mount lacks %s: every open and stat still asks the server", strings.Join(missing, ","))
	f.Expected = strings.Join(missing, ",")
	f.Actual = "close-to-open consistency and default attribute cache times"
	set := map[string]string{}
	if want.NoCTO {
		set["nocto"] = ""
	}
	if want.ACTimeo > acLimit {
		set["actimeo"] = strconv.Itoa(want.ACTimeo)
	}
	f.Fix = fmt.Sprintf("set in /etc/fstab: %s ; then %s", c.fstabLine(set, "cto", "acregmin", "acregmax", "acdirmin", "acdirmax"), remountCmd(c.m.MountPoints))
	f.Reason = "for data that does not change, nocto removes 65-70 % of GETATTR/ACCESS calls and actimeo=600 another 20-25 % (EDA tools: 150k to 6k IOPS)"
	f.Source = srcANFCaching
	return []Finding{f}
}

// checkVersion is NFS040: an NFS version the backend does not support, or NFSv3 on Azure
// Blob without nolock.
func checkVersion(c *mountCtx) []Finding {
	var out []Finding
	if vs := c.backend.Versions; len(vs) > 0 && c.m.Version != "" && !slices.Contains(vs, c.m.Version) {
		want := c.res.Mount.Vers
		if want == "" {
			want = vs[0]
		}
		f := c.finding("NFS040", SeverityError)
		f.Message = fmt.Sprintf("NFS version %s is not one %s supports (%s)", c.m.Version, c.res.Backend, strings.Join(vs, ", "))
		f.Expected = "vers=" + strings.Join(vs, " or ")
		f.Actual = "vers=" + c.m.Version
		f.Fix = c.remountGroup(c.fstabLine(map[string]string{"vers": want}, "nfsvers", "minorversion"))
		f.Reason = fmt.Sprintf("%s serves only NFS %s", c.res.Backend, strings.Join(vs, " and "))
		f.Source = c.backend.Source
		out = append(out, f)
	}
	if c.backend.RequiresNoLock && c.m.Version == "3" && !hasOpt(c.m, "nolock") {
		f := c.finding("NFS040", SeverityError)
		f.Message = fmt.Sprintf("NFSv3 mount of %s without nolock: the service has no NLM lock manager, so file locks fail", c.res.Backend)
		f.Expected = "vers=3,nolock"
		f.Actual = "vers=3 with locking"
		f.Fix = fmt.Sprintf("set in /etc/fstab: %s ; then %s", c.fstabLine(map[string]string{"nolock": ""}, "lock"), remountCmd(c.m.MountPoints))
		f.Reason = "Blob NFS 3.0 does not implement the Network Lock Manager; blob-csi and AZNFS always mount with nolock"
		f.Source = c.backend.Source
		out = append(out, f)
	}
	return out
}

// checkNConnectKernel is NFS041: nconnect on a kernel older than 5.3, or with Kerberos.
func checkNConnectKernel(c *mountCtx) []Finding {
	req, hasReq := requestedInt(c.m, "nconnect")
	n := max(c.m.NConnect, connections(c.m))
	if hasReq {
		n = max(n, req)
	}
	if n <= 1 {
		return nil
	}
	var out []Finding
	if c.kernel.before(5, 3) {
		f := c.finding("NFS041", SeverityError)
		f.Message = fmt.Sprintf("nconnect=%d on kernel %s: nconnect needs Linux 5.3 (SUSE backported it to 4.12.14), older kernels refuse the mount", n, c.inv.KernelRelease)
		f.Expected = "kernel >= 5.3 for nconnect"
		f.Actual = "kernel " + c.inv.KernelRelease
		f.Fix = "upgrade the kernel to 5.3 or later, or remove nconnect: " + c.fstabLine(nil, "nconnect")
		f.Reason = "the nconnect mount option was added in Linux 5.3"
		f.Source = srcNConnectCommit
		out = append(out, f)
	}
	if sec := c.m.Options["sec"]; strings.HasPrefix(sec, "krb5") {
		f := c.finding("NFS041", SeverityWarning)
		f.Message = fmt.Sprintf("nconnect=%d with sec=%s: Kerberos with several connections is a documented source of failures", n, sec)
		f.Expected = "nconnect with sec=sys, or one connection with Kerberos"
		f.Actual = fmt.Sprintf("nconnect=%d,sec=%s", n, sec)
		f.Fix = c.remountGroup(c.fstabLine(nil, "nconnect"))
		f.Reason = "Azure NetApp Files warns against combining Kerberos and nconnect"
		f.Source = srcClientSharing
		out = append(out, f)
	}
	return out
}

// nfsraheadDefault is what nfsrahead prints when nfs.conf has no value (NFS_DEFAULT_READAHEAD).
const nfsraheadDefault = 128

// kernelDefaultRA is the read-ahead of a new NFS bdi since Linux 5.4 (VM_READAHEAD_PAGES).
const kernelDefaultRA = 128

// nextMountReadAhead tells what read_ahead_kb the next mount of m will get and from where.
// ok is false when a helper computes it and nfstune cannot tell the value.
func nextMountReadAhead(inv *inventory.Inventory, m *inventory.Mount, want int) (value int, from string, active bool, ok bool) {
	rules := inv.ReadAhead.UdevRules
	if len(rules) == 0 {
		return kernelDefaultRA, "the kernel default (no udev rule sets read_ahead_kb)", false, true
	}
	r := rules[len(rules)-1]
	where := fmt.Sprintf("%s:%d", r.File, r.Line)
	switch {
	case r.ReadAheadKB != nil:
		return *r.ReadAheadKB, "udev rule " + where, true, true
	case strings.Contains(r.Program, "nfsrahead"):
		key := m.FSType
		if v, ok := inv.ReadAhead.NFSRahead[key]; ok {
			if n, err := leadingInt(v); err == nil {
				return n, fmt.Sprintf("udev rule %s running nfsrahead, [nfsrahead] %s=%d in %s", where, key, n, inv.ReadAhead.NFSRaheadFrom[key]), true, true
			}
		}
		if v, ok := inv.ReadAhead.NFSRahead["default"]; ok {
			if n, err := leadingInt(v); err == nil {
				return n, fmt.Sprintf("udev rule %s running nfsrahead, [nfsrahead] default=%d in %s", where, n, inv.ReadAhead.NFSRaheadFrom["default"]), true, true
			}
		}
		return nfsraheadDefault, fmt.Sprintf("udev rule %s running nfsrahead with no [nfsrahead] %s= in nfs.conf (default 128)", where, key), true, true
	case strings.Contains(r.Program, "nfstune"):
		return want, "udev rule " + where + " running nfstune", true, true
	}
	return 0, "", true, false
}

// leadingInt parses the number at the start of an nfs.conf value, the way nfsrahead's
// strtol does: "15000      # NFSv3" is 15000.
func leadingInt(v string) (int, error) {
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0, strconv.ErrSyntax
	}
	return strconv.Atoi(f[0])
}

// checkReadAheadRules is NFS050: the udev rule or nfs.conf [nfsrahead] setting that sets
// read-ahead when the mount is next mounted gives less than the profile.
func checkReadAheadRules(c *mountCtx) []Finding {
	want := c.res.ReadAheadKB
	if want == 0 || c.res.ReadAheadBy != "" {
		// The mount helper writes read-ahead after the mount, over what udev set.
		return nil
	}
	got, from, active, ok := nextMountReadAhead(c.inv, c.m, want)
	if !ok || got >= want || !c.res.ReadAheadChange(got, c.m.RSize, false) {
		return nil
	}
	sev := SeverityInfo
	if active {
		sev = SeverityWarning
	}
	f := c.finding("NFS050", sev)
	f.Message = fmt.Sprintf("on the next mount read-ahead will be %s, set by %s", kib(got), from)
	if rules := c.inv.ReadAhead.UdevRules; len(rules) > 1 {
		var lost []string
		for _, r := range rules[:len(rules)-1] {
			lost = append(lost, fmt.Sprintf("%s:%d", r.File, r.Line))
		}
		f.Message += fmt.Sprintf("; it runs last and overrides %s", strings.Join(lost, ", "))
	}
	f.Expected = fmt.Sprintf("read_ahead_kb >= %d after mount", want)
	f.Actual = fmt.Sprintf("read_ahead_kb = %d after mount", got)
	key := c.m.FSType
	if key == "" {
		key = "nfs"
	}
	switch {
	case strings.Contains(from, "nfsrahead"):
		f.Fix = fmt.Sprintf("nfsconf --set nfsrahead %s %d (writes /etc/nfs.conf), or nfstune apply", key, want)
	case active:
		r := c.inv.ReadAhead.UdevRules[len(c.inv.ReadAhead.UdevRules)-1]
		f.Fix = fmt.Sprintf("change ATTR{read_ahead_kb} in %s:%d to \"%d\" (for a file under /usr/lib, put a copy with the same name in /etc/udev/rules.d), or nfstune apply", r.File, r.Line, want)
	default:
		f.Fix = fmt.Sprintf("nfstune apply (installs a udev rule), or with nfs-utils >= 2.6.2: nfsconf --set nfsrahead %s %d", key, want)
	}
	f.Reason = "udev runs rules files in name order across /etc, /run and /usr/lib (a file in /etc hides the same name in /usr/lib); the last rule that writes read_ahead_kb wins when the bdi appears, undoing a value set by hand"
	f.Source = srcUdev
	// apply installs its udev rule whatever the mode: the rule asks the policy per mount.
	f.Changes = []string{NextMountReadAheadChange}
	return []Finding{f}
}

// checkNoEffect is NFS070: atime options, which do nothing on NFS.
func checkNoEffect(c *mountCtx) []Finding {
	var found []string
	where := "mount options"
	for _, k := range []string{"noatime", "nodiratime"} {
		inReq := c.m.Requested != nil && hasKey(c.m.Requested.Options, k)
		if hasOpt(c.m, k) || inReq {
			found = append(found, k)
			if inReq {
				where = c.m.Requested.Source
			}
		}
	}
	if len(found) == 0 {
		return nil
	}
	f := c.finding("NFS070", SeverityInfo)
	f.Message = fmt.Sprintf("%s in %s has no effect on NFS; access times are kept by the server", strings.Join(found, ","), where)
	f.Expected = "no atime options"
	f.Actual = strings.Join(found, ",")
	f.Fix = "none needed; the option can be dropped from " + where
	f.Reason = "the atime/noatime, diratime/nodiratime, relatime and strictatime options have no effect on NFS mounts"
	f.Source = srcNFSMan
	return []Finding{f}
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// checkStats is NFS090 (no mountstats entry, so connections and counters are unknown)
// and NFS091 (the server has failed to answer requests in time since the mount).
func checkStats(c *mountCtx) []Finding {
	if c.m.Stats != nil {
		return checkTimeouts(c)
	}
	f := c.finding("NFS090", SeverityWarning)
	f.Message = "no usable /proc/self/mountstats entry: the connection count and I/O counters are unknown (entry missing, malformed, or the mount is in another namespace)"
	f.Expected = "a mountstats device entry"
	f.Actual = "none"
	f.Fix = fmt.Sprintf("grep -A2 %s /proc/self/mountstats ; run nfstune audit --pid 1 to read the host's mount namespace", shell.Quote("mounted on "+firstOr(c.m.MountPoints, "<mountpoint>")+" "))
	f.Reason = "nfstune counts transports and reads counters from mountstats; it never touches the mount point itself"
	f.Source = srcMountstats
	return []Finding{f}
}

// checkTimeouts is NFS091: major timeouts in mountstats, i.e. RPCs that got no reply after
// timeo and retrans retransmissions.
func checkTimeouts(c *mountCtx) []Finding {
	var timeouts, ops uint64
	var worst string
	var worstN uint64
	for _, op := range c.m.Stats.Operations {
		timeouts += op.MajorTimeouts
		ops += op.Requests
		if op.MajorTimeouts > worstN {
			worst, worstN = op.Operation, op.MajorTimeouts
		}
	}
	if timeouts == 0 {
		return nil
	}
	f := c.finding("NFS091", SeverityWarning)
	f.Message = fmt.Sprintf("the server left %d of %d requests unanswered past timeo and retrans since the mount (most: %s, %d): it has been unresponsive or unreachable", timeouts, ops, worst, worstN)
	f.Expected = "0 major timeouts"
	f.Actual = fmt.Sprintf("%d major timeouts", timeouts)
	addr := serverDesc(c.m)
	f.Fix = fmt.Sprintf("check the server and the network path to %s; watch it with nfstune stats %s ; if the server is gone for good (Linux >= 6.6): nfstune shutdown %s (the processes using it get EIO), then umount", addr, mountPointArg(c.m), shell.Quote(c.m.Device))
	f.Reason = "a major timeout is an RPC that got no reply after retrans retransmissions; on a hard mount the application blocks meanwhile, on a soft mount it gets an error"
	f.Source = srcMountstats + "; " + srcNFSMan + " (timeo, retrans)"
	return []Finding{f}
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

// checkSysctls is NFS060: host sysctls below the profile minimum (or above its maximum)
// for at least one mount; one finding per sysctl.
func checkSysctls(inv *inventory.Inventory, mounts []inventory.Mount, resolved []policy.Resolved) []Finding {
	type need struct {
		value int64
		isMax bool
		mps   []string
	}
	needs := map[string]*need{}
	for i, res := range resolved {
		for k, v := range res.Sysctls {
			n := needs[k]
			if n == nil {
				n = &need{value: v}
				needs[k] = n
			}
			n.value = max(n.value, v)
			n.mps = append(n.mps, mounts[i].MountPoints...)
		}
		for k, v := range res.SysctlsMax {
			key := k + "#max"
			n := needs[key]
			if n == nil {
				n = &need{value: v, isMax: true}
				needs[key] = n
			}
			n.value = min(n.value, v)
			n.mps = append(n.mps, mounts[i].MountPoints...)
		}
	}
	var out []Finding
	for _, key := range slices.Sorted(maps.Keys(needs)) {
		n := needs[key]
		name := strings.TrimSuffix(key, "#max")
		cur, err := strconv.ParseInt(strings.TrimSpace(inv.Sysctls[name]), 10, 64)
		if err != nil {
			continue // unreadable or multi-valued: nothing to compare
		}
		if (!n.isMax && cur >= n.value) || (n.isMax && cur <= n.value) {
			continue
		}
		f := Finding{ID: "NFS060", Severity: SeverityInfo, MountPoints: n.mps}
		if n.isMax {
			f.Message = fmt.Sprintf("%s is %d, above the %d the profile allows", name, cur, n.value)
			f.Expected = fmt.Sprintf("%s <= %d", name, n.value)
		} else {
			f.Message = fmt.Sprintf("%s is %d, below the %d the profile asks for", name, cur, n.value)
			f.Expected = fmt.Sprintf("%s >= %d", name, n.value)
		}
		f.Message += "; it matters for parallel, throughput-bound workloads and applies only to connections made after the change"
		f.Actual = fmt.Sprintf("%s = %d", name, cur)
		f.Fix = fmt.Sprintf("sysctl -w %s=%d and persist it in /etc/sysctl.d/90-nfstune.conf (or nfstune apply); then remount the NFS mounts", name, n.value)
		f.Reason = "RPC slot tables bound the requests in flight per connection and socket buffers bound the TCP window; both are host-wide and read when a transport is created"
		f.Source = srcSlots
		out = append(out, f)
	}
	return out
}

// checkStalled is NFS093: the transports to this mount's server hold requests that got no
// reply, with no activity over a sampling window (inventory.SampleStalls). Every mount of
// that server address and port is named: they all wait on the same server. Mounts behind
// local proxies share 127.0.0.1 and differ by port, so one stuck file system does not
// implicate the others.
func checkStalled(c *mountCtx) []Finding {
	addr := serverDesc(c.m)
	for _, s := range c.inv.Stalled {
		if !s.Reaches(c.m) {
			continue
		}
		f := c.finding("NFS093", SeverityError)
		state := fmt.Sprintf("%d request(s) waiting", s.Waiting)
		if s.Waiting == 0 {
			state = "reconnecting with requests held"
		}
		f.Message = fmt.Sprintf("server %s is not answering: %s on %d of %d transport(s) with no reply for at least %s; processes using %s block (hard) or fail (soft)",
			addr, state, len(s.Transports), max(len(s.Each), len(s.Transports)), s.Window, firstOr(c.m.MountPoints, "this mount"))
		f.Expected = "replies within the window"
		f.Actual = fmt.Sprintf("no progress on %s", strings.Join(s.Transports, ", "))
		f.Fix = fmt.Sprintf("check the server and the network path to %s; watch it with nfstune stats %s ; if the server is gone for good (Linux >= 6.6): nfstune shutdown %s (the processes using it get EIO), then umount", addr, mountPointArg(c.m), shell.Quote(c.m.Device))
		f.Reason = "/sys/kernel/sunrpc/xprt-switches shows the transport's queues now: requests pending with last_used unchanged means no reply and no new request went through"
		f.Source = srcSunrpcSysfs
		return []Finding{f}
	}
	return nil
}

// serverDesc names the server a mount talks to, for messages: its address, and for a
// mount through a local proxy the port, the helper and the server behind it.
func serverDesc(m *inventory.Mount) string {
	addr := m.ServerAddr
	if addr == "" {
		addr = m.Server
	}
	p := m.Proxy
	if p == nil {
		return addr
	}
	s := net.JoinHostPort(addr, strconv.Itoa(p.Port))
	switch {
	case p.Upstream != "":
		return fmt.Sprintf("%s (%s to %s)", s, p.Kind, p.Upstream)
	case p.FileSystemID != "":
		return fmt.Sprintf("%s (%s to %s)", s, p.Kind, p.FileSystemID)
	}
	return fmt.Sprintf("%s (%s)", s, p.Kind)
}
