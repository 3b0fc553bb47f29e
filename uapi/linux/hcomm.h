/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR MIT) */
/*
 * hcomm: memory registration and transfers for heterogeneous compute nodes.
 *
 * This header is the whole contract between hcomm.ko and userspace.
 *
 * Every command is reachable two ways with the same command number and the
 * same argument struct:
 *
 *  - ioctl(fd, HCOMM_CMD_x, &arg);
 *  - io_uring passthrough: an IORING_OP_URING_CMD SQE on the /dev/hcomm fd
 *    with sqe->cmd_op = HCOMM_CMD_x and the 16-byte payload
 *    struct hcomm_uring_cmd (below) in sqe->cmd pointing at &arg.
 *    The payload fits in a normal 64-byte SQE: no command needs
 *    IORING_SETUP_SQE128 (a ring created with it works too; the extra
 *    64 bytes of the SQE are ignored).  cqe->res is 0 or -errno, exactly
 *    what ioctl() would have returned; output fields are written to *arg
 *    before the CQE is posted.
 *
 * Structs use fixed-width types, are naturally aligned, and never change
 * layout once released: they grow only at the end, and the size is part of
 * the command number (_IOWR).  Every field documented "must be zero" is
 * checked; non-zero gives -EINVAL so that it can be given a meaning later.
 */
#ifndef _UAPI_LINUX_HCOMM_H
#define _UAPI_LINUX_HCOMM_H

#include <linux/const.h>
#include <linux/ioctl.h>
#include <linux/types.h>

/* ABI version reported by HCOMM_CMD_GET_INFO; bumped on incompatible change. */
#define HCOMM_ABI_VERSION	1

/* ioctl type byte of every hcomm command. */
#define HCOMM_IOC_MAGIC		0xC7

/**
 * struct hcomm_uring_cmd - io_uring passthrough payload (in sqe->cmd).
 * @addr:  user address of the command's argument struct.
 * @size:  size of that struct; must equal _IOC_SIZE(cmd_op).
 * @flags: must be zero.
 */
struct hcomm_uring_cmd {
	__u64 addr;
	__u32 size;
	__u32 flags;
};

/* Feature bits in hcomm_info.features. */
/* Commands accepted through IORING_OP_URING_CMD. */
#define HCOMM_FEAT_URING_CMD		_BITULL(0)
/* HCOMM_CMD_REG_DMABUF is available. */
#define HCOMM_FEAT_DMABUF		_BITULL(1)
/* dma-buf regions use a dynamic attachment (move_notify invalidates). */
#define HCOMM_FEAT_DMABUF_MOVE_NOTIFY	_BITULL(2)
/* Huge/compound pages collapse into one VAT->PAT extent. */
#define HCOMM_FEAT_HUGE_EXTENTS		_BITULL(3)

/**
 * struct hcomm_info - answer of HCOMM_CMD_GET_INFO.
 * @abi_version:     out: HCOMM_ABI_VERSION of the module.
 * @flags:           in: must be zero.
 * @features:        out: HCOMM_FEAT_* bits.
 * @max_region_size: out: largest region in bytes (module parameter).
 * @page_sizes:      out: bit n set when 2^n-byte pages can back a region.
 * @max_regions:     out: regions one context may hold (module parameter).
 * @nr_regions:      out: regions this context holds now.
 * @memlock_limit:   out: RLIMIT_MEMLOCK of the caller in bytes
 *                   (~0ULL when unlimited or when the caller has
 *                   CAP_IPC_LOCK).
 * @pinned_bytes:    out: bytes this context has charged to memlock.
 * @reserved:        must be zero; zeroed on output.
 */
struct hcomm_info {
	__u32 abi_version;
	__u32 flags;
	__u64 features;
	__u64 max_region_size;
	__u64 page_sizes;
	__u32 max_regions;
	__u32 nr_regions;
	__u64 memlock_limit;
	__u64 pinned_bytes;
	__u64 reserved[4];
};

/* Access flags of a region (hcomm_reg_mem.access, hcomm_reg_dmabuf.access). */
/* The owner may write the region (pages are pinned writable). */
#define HCOMM_ACCESS_LOCAL_WRITE	_BITUL(0)
/* Holders of the key may read the region. */
#define HCOMM_ACCESS_REMOTE_READ	_BITUL(1)
/* Holders of the key may write the region; requires LOCAL_WRITE. */
#define HCOMM_ACCESS_REMOTE_WRITE	_BITUL(2)
#define HCOMM_ACCESS_ALL	(HCOMM_ACCESS_LOCAL_WRITE | \
				 HCOMM_ACCESS_REMOTE_READ | \
				 HCOMM_ACCESS_REMOTE_WRITE)

/**
 * struct hcomm_reg_mem - argument of HCOMM_CMD_REG_MEM.
 * @addr:      in: user virtual address of the first byte; any alignment.
 * @len:       in: length in bytes, >= 1; addr + len must not overflow.
 * @access:    in: HCOMM_ACCESS_* bits.
 * @flags:     in: must be zero.
 * @region:    out: region id, unique within the context, never 0.
 * @reserved0: must be zero.
 * @key:       out: 64-bit unguessable key naming the region.
 * @reserved:  must be zero.
 *
 * Pins the pages of [addr, addr + len) with FOLL_LONGTERM (and FOLL_WRITE
 * when LOCAL_WRITE is asked) and charges them to the caller's
 * RLIMIT_MEMLOCK unless it has CAP_IPC_LOCK.
 */
struct hcomm_reg_mem {
	__u64 addr;
	__u64 len;
	__u32 access;
	__u32 flags;
	__u32 region;
	__u32 reserved0;
	__u64 key;
	__u64 reserved[2];
};

/**
 * struct hcomm_reg_dmabuf - argument of HCOMM_CMD_REG_DMABUF.
 * @fd:       in: dma-buf file descriptor.
 * @access:   in: HCOMM_ACCESS_* bits.
 * @offset:   in: byte offset into the dma-buf, page aligned.
 * @len:      in: length in bytes, >= 1; offset + len <= dma-buf size.
 * @flags:    in: must be zero.
 * @region:   out: region id, unique within the context, never 0.
 * @key:      out: 64-bit unguessable key naming the region.
 * @reserved: must be zero.
 */
struct hcomm_reg_dmabuf {
	__s32 fd;
	__u32 access;
	__u64 offset;
	__u64 len;
	__u32 flags;
	__u32 region;
	__u64 key;
	__u64 reserved[2];
};

/**
 * struct hcomm_dereg - argument of HCOMM_CMD_DEREG.
 * @region:   in: region id from REG_MEM or REG_DMABUF.
 * @flags:    in: must be zero.
 * @reserved: must be zero.
 */
struct hcomm_dereg {
	__u32 region;
	__u32 flags;
	__u64 reserved[2];
};

/* hcomm_query.type */
#define HCOMM_REGION_HOST	1	/* pinned host memory */
#define HCOMM_REGION_DMABUF	2	/* imported dma-buf */

/* hcomm_query.state */
#define HCOMM_STATE_ACTIVE	1	/* translation valid */
#define HCOMM_STATE_INVALID	2	/* invalidated (dma-buf moved) */

/**
 * struct hcomm_extent - one VAT->PAT extent.
 * @offset: byte offset of the extent from the start of the region's first
 *          page (always page aligned).
 * @len:    bytes covered (a multiple of the page size).
 * @phys:   physical (host) or DMA (dma-buf) address of the first byte;
 *          0 unless the caller has CAP_SYS_ADMIN.
 */
struct hcomm_extent {
	__u64 offset;
	__u64 len;
	__u64 phys;
};

/**
 * struct hcomm_query - argument of HCOMM_CMD_QUERY.
 * @region:      in: region id.
 * @flags:       in: must be zero.
 * @extents:     in: user pointer to an array of struct hcomm_extent, or 0
 *               for none.
 * @max_extents: in: entries the array holds; extents first_extent ..
 *               first_extent + max_extents - 1 (those that exist) are
 *               written, so a long table can be read in pages.
 * @type:        out: HCOMM_REGION_*.
 * @addr:        out: registered virtual address (host), or the offset
 *               into the dma-buf (dma-buf).
 * @len:         out: registered length in bytes.
 * @key:         out: the region's key.
 * @nr_pages:    out: pages spanned (PAGE_SIZE units).
 * @nr_extents:  out: VAT->PAT extents after coalescing.
 * @offset:      out: offset of the first byte within the first page.
 * @access:      out: HCOMM_ACCESS_* bits.
 * @state:       out: HCOMM_STATE_*.
 * @first_extent: in: index of the first extent to write to @extents.
 * @reserved:    must be zero; zeroed on output.
 */
struct hcomm_query {
	__u32 region;
	__u32 flags;
	__u64 extents;
	__u32 max_extents;
	__u32 type;
	__u64 addr;
	__u64 len;
	__u64 key;
	__u64 nr_pages;
	__u32 nr_extents;
	__u32 offset;
	__u32 access;
	__u32 state;
	__u64 first_extent;
	__u64 reserved;
};

/*
 * Commands: the same numbers serve ioctl() and IORING_OP_URING_CMD.
 *
 * Errors common to every command:
 *   ENOTTY     not an hcomm command number (ioctl and uring_cmd alike);
 *   EINVAL     a known command number with another size or direction (ABI
 *              version 1 accepts exactly these sizes), a uring payload whose
 *              size differs from _IOC_SIZE(cmd_op) or whose flags are set, a
 *              non-zero flags or reserved field, or an unknown bit;
 *   EFAULT     the argument struct (or QUERY's extent array) is not
 *              accessible.
 *
 * GET_INFO:    no other errors.
 * REG_MEM:     EINVAL    len == 0, unknown access bits, REMOTE_WRITE without
 *                        LOCAL_WRITE;
 *              EOVERFLOW addr + len wraps;
 *              E2BIG     len > max_region_size;
 *              EFAULT    part of the range is unmapped, or is read-only and
 *                        LOCAL_WRITE was asked;
 *              ENOMEM    RLIMIT_MEMLOCK of the caller's user would be
 *                        exceeded (nothing is left pinned), or the kernel
 *                        is out of memory;
 *              ENOSPC    the context already holds max_regions regions;
 *              EPERM     the caller's address space is not the opener's
 *                        (e.g. a forked child using the parent's fd);
 *              EINTR     a fatal signal arrived while pinning;
 *              other     errors of pin_user_pages_fast().
 * REG_DMABUF:  EBADF     fd is not an open file;
 *              EINVAL    fd is not a dma-buf, len == 0, offset not page
 *                        aligned, offset + len beyond the buffer, unknown
 *                        access bits, REMOTE_WRITE without LOCAL_WRITE, or
 *                        the exporter's mapping is not page aligned;
 *              E2BIG     len > max_region_size;
 *              ENOSPC    as for REG_MEM;
 *              ENOMEM    out of memory;
 *              EINTR     a signal arrived while waiting for the exporter's
 *                        fences;
 *              other     errors of the exporter's attach/map callbacks.
 * DEREG:       ENOENT    no region with this id in this context.
 * QUERY:       ENOENT    no region with this id in this context;
 *              EINTR     a fatal signal arrived while writing extents.
 *              The extents of an HCOMM_STATE_INVALID region are stale.
 */
#define HCOMM_CMD_GET_INFO	_IOWR(HCOMM_IOC_MAGIC, 0x00, struct hcomm_info)
#define HCOMM_CMD_REG_MEM	_IOWR(HCOMM_IOC_MAGIC, 0x01, struct hcomm_reg_mem)
#define HCOMM_CMD_REG_DMABUF	_IOWR(HCOMM_IOC_MAGIC, 0x02, struct hcomm_reg_dmabuf)
#define HCOMM_CMD_DEREG		_IOWR(HCOMM_IOC_MAGIC, 0x03, struct hcomm_dereg)
#define HCOMM_CMD_QUERY		_IOWR(HCOMM_IOC_MAGIC, 0x04, struct hcomm_query)

#endif /* _UAPI_LINUX_HCOMM_H */
