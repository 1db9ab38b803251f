// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// podio counts NFS I/O per (cgroup, superblock): what applications read and wrote with
// read(2)/write(2), the faults on NFS-backed mappings, and the READ and WRITE RPCs the
// kernel started in each cgroup's tasks, with their bytes and latency. The agent maps
// cgroups to pods and exports the sums (internal/podio, docs/agent.md "Per-pod NFS I/O").
//
// Hooks, chosen to exist on every kernel line from 5.10 (docs/kernels.md), each in two
// forms where the first needs the nfs module's own BTF (Linux 5.11 and later):
//   - nfs_file_read and nfs_file_write (fs/nfs/file.c, the read_iter/write_iter of every
//     NFS file): fexit, else a kprobe and a kretprobe;
//   - fentry/fexit on filemap_fault and fentry on filemap_map_pages (mm/filemap.c), the
//     .fault and .map_pages of nfs_file_vm_ops: only faults on files whose superblock is
//     NFS are counted;
//   - the tracepoints nfs:nfs_initiate_read, nfs:nfs_readpage_done, nfs:nfs_initiate_write
//     and nfs:nfs_writeback_done (fs/nfs/nfstrace.h): BTF-typed (tp_btf, their arguments:
//     the nfs_pgio_header), else the perf tracepoints, whose records' layout is the same
//     from 5.10 to 7.2 for the fields read here; the agent checks it against tracefs'
//     format files before it loads them (tracefs.go).
// The BTF forms attach without perf_event_open(2), which Debian's and Ubuntu's kernels
// refuse to all but CAP_SYS_ADMIN when kernel.perf_event_paranoid is above 2 (their
// default): a container with CAP_BPF and CAP_PERFMON loads them there.

#include "types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define NFS_SUPER_MAGIC 0x6969
#define VM_FAULT_MAJOR 0x0004 // include/linux/mm_types.h, enum vm_fault_reason

// The latency buckets' upper bounds in nanoseconds; the last bucket is everything above
// the last bound. Keep in step with LatencyBounds in podio.go.
#define NR_BUCKETS 7
#define B0 1000000ULL      // 1 ms
#define B1 2500000ULL      // 2.5 ms
#define B2 5000000ULL      // 5 ms
#define B3 10000000ULL     // 10 ms
#define B4 25000000ULL     // 25 ms
#define B5 100000000ULL    // 100 ms

struct key {
	__u64 cgroup; // bpf_get_current_cgroup_id of the task
	__u32 dev;    // the superblock's s_dev (kernel dev_t: major << 20 | minor)
	__u32 pad;
};

struct counters {
	__u64 read_bytes, reads;       // read(2) and friends: bytes returned, calls
	__u64 write_bytes, writes;     // write(2): bytes accepted, calls
	__u64 faults, major_faults;    // filemap_fault calls on NFS-backed mappings, and the major ones
	__u64 map_faults;              // filemap_map_pages calls: read faults served from the cache first
	__u64 read_rpcs, server_read_bytes, fault_read_bytes; // READs started here; of them, started in a fault
	__u64 write_rpcs, server_write_bytes;
	__u64 read_latency_ns, write_latency_ns; // sums
	__u64 read_buckets[NR_BUCKETS];
	__u64 write_buckets[NR_BUCKETS];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct key);
	__type(value, struct counters);
} stats SEC(".maps");

// dropped counts events that found stats full: the agent says so instead of undercounting
// silently.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dropped SEC(".maps");

// A task inside nfs_file_read/nfs_file_write, or inside filemap_fault on an NFS file: the
// superblock it works on.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); // pid_tgid
	__type(value, __u32);
} in_file_io SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u32);
} in_fault SEC(".maps");

// An RPC in flight, from its start in the issuing task to its completion in rpciod.
struct rpc_key {
	__u64 fileid;
	__s64 offset;
	__u32 dev;
	__u32 write;
};

struct rpc_start {
	__u64 cgroup;
	__u64 start_ns;
	__u32 fault;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct rpc_key);
	__type(value, struct rpc_start);
} in_flight SEC(".maps");

static __always_inline struct counters *counters_of(__u64 cgroup, __u32 dev)
{
	struct key k = {.cgroup = cgroup, .dev = dev};
	struct counters *c = bpf_map_lookup_elem(&stats, &k);
	if (c)
		return c;
	struct counters zero = {};
	bpf_map_update_elem(&stats, &k, &zero, BPF_NOEXIST);
	c = bpf_map_lookup_elem(&stats, &k);
	if (!c) {
		__u32 i = 0;
		__u64 *d = bpf_map_lookup_elem(&dropped, &i);
		if (d)
			__sync_fetch_and_add(d, 1);
	}
	return c;
}

static __always_inline int bucket(__u64 ns)
{
	if (ns <= B0) return 0;
	if (ns <= B1) return 1;
	if (ns <= B2) return 2;
	if (ns <= B3) return 3;
	if (ns <= B4) return 4;
	if (ns <= B5) return 5;
	return 6;
}

static __always_inline __u32 nfs_dev_of(struct file *f)
{
	struct super_block *sb = BPF_CORE_READ(f, f_inode, i_sb);
	if (!sb)
		return 0;
	if (BPF_CORE_READ(sb, s_magic) != NFS_SUPER_MAGIC)
		return 0;
	return BPF_CORE_READ(sb, s_dev);
}

static __always_inline int file_io_enter(struct kiocb *iocb)
{
	__u32 dev = nfs_dev_of(BPF_CORE_READ(iocb, ki_filp));
	if (!dev)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	bpf_map_update_elem(&in_file_io, &id, &dev, BPF_ANY);
	return 0;
}

static __always_inline int file_io_done(__u32 dev, long ret, int write)
{
	if (!dev)
		return 0;
	struct counters *c = counters_of(bpf_get_current_cgroup_id(), dev);
	if (!c)
		return 0;
	if (write) {
		__sync_fetch_and_add(&c->writes, 1);
		if (ret > 0)
			__sync_fetch_and_add(&c->write_bytes, ret);
	} else {
		__sync_fetch_and_add(&c->reads, 1);
		if (ret > 0)
			__sync_fetch_and_add(&c->read_bytes, ret);
	}
	return 0;
}

static __always_inline int file_io_exit(long ret, int write)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 *devp = bpf_map_lookup_elem(&in_file_io, &id);
	if (!devp)
		return 0;
	__u32 dev = *devp;
	bpf_map_delete_elem(&in_file_io, &id);
	return file_io_done(dev, ret, write);
}

SEC("fexit/nfs_file_read")
int BPF_PROG(nfs_file_read_fexit, struct kiocb *iocb, struct iov_iter *to, long ret)
{
	return file_io_done(nfs_dev_of(BPF_CORE_READ(iocb, ki_filp)), ret, 0);
}

SEC("fexit/nfs_file_write")
int BPF_PROG(nfs_file_write_fexit, struct kiocb *iocb, struct iov_iter *from, long ret)
{
	return file_io_done(nfs_dev_of(BPF_CORE_READ(iocb, ki_filp)), ret, 1);
}

SEC("kprobe/nfs_file_read")
int BPF_KPROBE(nfs_file_read_enter, struct kiocb *iocb)
{
	return file_io_enter(iocb);
}

SEC("kretprobe/nfs_file_read")
int BPF_KRETPROBE(nfs_file_read_exit, long ret)
{
	return file_io_exit(ret, 0);
}

SEC("kprobe/nfs_file_write")
int BPF_KPROBE(nfs_file_write_enter, struct kiocb *iocb)
{
	return file_io_enter(iocb);
}

SEC("kretprobe/nfs_file_write")
int BPF_KRETPROBE(nfs_file_write_exit, long ret)
{
	return file_io_exit(ret, 1);
}

SEC("fentry/filemap_fault")
int BPF_PROG(filemap_fault_enter, struct vm_fault *vmf)
{
	__u32 dev = nfs_dev_of(BPF_CORE_READ(vmf, vma, vm_file));
	if (!dev)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	bpf_map_update_elem(&in_fault, &id, &dev, BPF_ANY);
	return 0;
}

SEC("fexit/filemap_fault")
int BPF_PROG(filemap_fault_exit, struct vm_fault *vmf, unsigned int ret)
{
	__u32 dev = nfs_dev_of(BPF_CORE_READ(vmf, vma, vm_file));
	if (!dev)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	bpf_map_delete_elem(&in_fault, &id);
	struct counters *c = counters_of(bpf_get_current_cgroup_id(), dev);
	if (!c)
		return 0;
	__sync_fetch_and_add(&c->faults, 1);
	if (ret & VM_FAULT_MAJOR)
		__sync_fetch_and_add(&c->major_faults, 1);
	return 0;
}

// filemap_map_pages is the .map_pages of NFS mappings (fault-around, mm/memory.c
// do_fault_around): a read fault on a mapped file calls it first to map the pages around
// the faulting one that are in the page cache, and calls .fault only when that did not map
// the faulting page. Its calls count a mapped reader's faults, served from the cache or
// not: what the reader touched, against which the READs its faults started tell whether
// the read-ahead window fits its accesses.
SEC("fentry/filemap_map_pages")
int BPF_PROG(filemap_map_pages_enter, struct vm_fault *vmf)
{
	__u32 dev = nfs_dev_of(BPF_CORE_READ(vmf, vma, vm_file));
	if (!dev)
		return 0;
	struct counters *c = counters_of(bpf_get_current_cgroup_id(), dev);
	if (c)
		__sync_fetch_and_add(&c->map_faults, 1);
	return 0;
}

// The heads of the tracepoints' records (fs/nfs/nfstrace.h): nfs_initiate_read and
// nfs_initiate_write share rpc_initiate's fields, nfs_readpage_done and
// nfs_writeback_done rpc_done's.
struct rpc_initiate {
	__u64 common; // struct trace_entry
	__u32 dev;
	__u32 fhandle;
	__u64 fileid;
	__s64 offset;
	__u32 count;
};

struct rpc_done {
	__u64 common;
	__u32 dev;
	__u32 fhandle;
	__u64 fileid;
	__s64 offset;
	__u32 arg_count;
	__u32 res_count;
};


static __always_inline struct rpc_start rpc_started(__u32 write)
{
	struct rpc_start s = {.cgroup = bpf_get_current_cgroup_id(), .start_ns = bpf_ktime_get_ns()};
	__u64 id = bpf_get_current_pid_tgid();
	if (!write && bpf_map_lookup_elem(&in_fault, &id))
		s.fault = 1;
	return s;
}

static __always_inline int rpc_account(__u64 cgroup, __u64 start_ns, __u32 fault, __u32 dev, __u64 bytes, __u32 write)
{
	__u64 ns = bpf_ktime_get_ns() - start_ns;
	struct counters *c = counters_of(cgroup, dev);
	if (!c)
		return 0;
	int b = bucket(ns);
	if (write) {
		__sync_fetch_and_add(&c->write_rpcs, 1);
		__sync_fetch_and_add(&c->server_write_bytes, bytes);
		__sync_fetch_and_add(&c->write_latency_ns, ns);
		if (b >= 0 && b < NR_BUCKETS)
			__sync_fetch_and_add(&c->write_buckets[b], 1);
	} else {
		__sync_fetch_and_add(&c->read_rpcs, 1);
		__sync_fetch_and_add(&c->server_read_bytes, bytes);
		if (fault)
			__sync_fetch_and_add(&c->fault_read_bytes, bytes);
		__sync_fetch_and_add(&c->read_latency_ns, ns);
		if (b >= 0 && b < NR_BUCKETS)
			__sync_fetch_and_add(&c->read_buckets[b], 1);
	}
	return 0;
}

static __always_inline int rpc_initiate(struct rpc_initiate *rec, __u32 write)
{
	struct rpc_key k = {.fileid = rec->fileid, .offset = rec->offset, .dev = rec->dev, .write = write};
	struct rpc_start s = rpc_started(write);
	bpf_map_update_elem(&in_flight, &k, &s, BPF_ANY);
	return 0;
}

static __always_inline int rpc_done(struct rpc_done *rec, __u32 write)
{
	struct rpc_key k = {.fileid = rec->fileid, .offset = rec->offset, .dev = rec->dev, .write = write};
	struct rpc_start *s = bpf_map_lookup_elem(&in_flight, &k);
	if (!s)
		return 0; // started before the collector was loaded
	struct rpc_start v = *s;
	bpf_map_delete_elem(&in_flight, &k);
	return rpc_account(v.cgroup, v.start_ns, v.fault, rec->dev, rec->res_count, write);
}

// The BTF-typed tracepoints: an RPC is its nfs_pgio_header from start to reply.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); // the header's address
	__type(value, struct rpc_start);
} in_flight_hdr SEC(".maps");

static __always_inline int hdr_initiate(const struct nfs_pgio_header *hdr, __u32 write)
{
	__u64 k = (__u64)hdr;
	struct rpc_start s = rpc_started(write);
	bpf_map_update_elem(&in_flight_hdr, &k, &s, BPF_ANY);
	return 0;
}

static __always_inline int hdr_done(const struct nfs_pgio_header *hdr, __u32 write)
{
	__u64 k = (__u64)hdr;
	struct rpc_start *s = bpf_map_lookup_elem(&in_flight_hdr, &k);
	if (!s)
		return 0;
	struct rpc_start v = *s;
	bpf_map_delete_elem(&in_flight_hdr, &k);
	__u32 dev = BPF_CORE_READ(hdr, inode, i_sb, s_dev);
	__u64 bytes = BPF_CORE_READ(hdr, res.count);
	return rpc_account(v.cgroup, v.start_ns, v.fault, dev, bytes, write);
}

SEC("tp_btf/nfs_initiate_read")
int BPF_PROG(nfs_initiate_read_btf, const struct nfs_pgio_header *hdr)
{
	return hdr_initiate(hdr, 0);
}

SEC("tp_btf/nfs_readpage_done")
int BPF_PROG(nfs_readpage_done_btf, const struct rpc_task *task, const struct nfs_pgio_header *hdr)
{
	return hdr_done(hdr, 0);
}

SEC("tp_btf/nfs_initiate_write")
int BPF_PROG(nfs_initiate_write_btf, const struct nfs_pgio_header *hdr)
{
	return hdr_initiate(hdr, 1);
}

SEC("tp_btf/nfs_writeback_done")
int BPF_PROG(nfs_writeback_done_btf, const struct rpc_task *task, const struct nfs_pgio_header *hdr)
{
	return hdr_done(hdr, 1);
}

SEC("tracepoint/nfs/nfs_initiate_read")
int nfs_initiate_read(struct rpc_initiate *rec)
{
	return rpc_initiate(rec, 0);
}

SEC("tracepoint/nfs/nfs_readpage_done")
int nfs_readpage_done(struct rpc_done *rec)
{
	return rpc_done(rec, 0);
}

SEC("tracepoint/nfs/nfs_initiate_write")
int nfs_initiate_write(struct rpc_initiate *rec)
{
	return rpc_initiate(rec, 1);
}

SEC("tracepoint/nfs/nfs_writeback_done")
int nfs_writeback_done(struct rpc_done *rec)
{
	return rpc_done(rec, 1);
}
