// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// The few kernel types podio.c reads, declared with only the fields it uses. CO-RE
// (preserve_access_index) relocates each access against the running kernel's BTF, so the
// fields' offsets here do not matter, only their names and types.

#ifndef PODIO_TYPES_H
#define PODIO_TYPES_H

// What a generated vmlinux.h defines: bpf_tracing.h then names the kernel's pt_regs fields
// (di, ax), not the user-space ones (rdi, rax).
#define __VMLINUX_H__

typedef unsigned char __u8;
typedef short int __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u32 dev_t;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_LRU_HASH = 9,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};

// The registers a kprobe sees (bpf_tracing.h's PT_REGS_PARM1 and PT_REGS_RC).
#if defined(__TARGET_ARCH_x86)
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
} __attribute__((preserve_access_index));
#elif defined(__TARGET_ARCH_arm64)
struct user_pt_regs {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
};
struct pt_regs;
#else
#error "podio: unsupported architecture"
#endif

struct super_block {
	unsigned long s_magic;
	dev_t s_dev;
} __attribute__((preserve_access_index));

struct inode {
	struct super_block *i_sb;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct kiocb {
	struct file *ki_filp;
} __attribute__((preserve_access_index));

struct vm_area_struct {
	struct file *vm_file;
} __attribute__((preserve_access_index));

struct vm_fault {
	struct vm_area_struct *vma;
} __attribute__((preserve_access_index));

struct iov_iter;
struct rpc_task;

struct nfs_pgio_res {
	__u64 count;
} __attribute__((preserve_access_index));

struct nfs_pgio_header {
	struct inode *inode;
	struct nfs_pgio_res res;
} __attribute__((preserve_access_index));

#endif
