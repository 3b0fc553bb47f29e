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
 *    before the CQE is posted.  The argument struct is read when the
 *    command is issued and written when it completes: it must stay valid,
 *    and unchanged, until the command's CQE has been reaped.  Outputs
 *    differ between the two paths only where a struct says "(ioctl)":
 *    XFER's done and engine, DB_WAIT's current_value and timeout_ns and
 *    DB_WAIT_ANY's ready and timeout_ns are written by ioctl() only;
 *    through io_uring, rings created with IORING_SETUP_CQE32 get XFER's
 *    bytes copied, DB_WAIT's doorbell value or DB_WAIT_ANY's ready bits
 *    in cqe->big_cqe[0].
 *  - Do not link an hcomm command (IOSQE_IO_LINK) behind another request
 *    on kernels 6.8 .. 6.14: they issue a linked request after its SQE
 *    slot may have been reused, and read the payload from the slot.
 *
 * Who may issue commands: a context belongs to the process that opened
 * it.  Only threads sharing the opener's address space may issue its
 * commands or mmap() it; any other process (a fork() child, a process
 * that received the fd over SCM_RIGHTS, the opener itself after exec())
 * gets -EPERM for every command, GET_INFO included.
 *
 * How the ABI grows: structs use fixed-width types, are naturally aligned,
 * and never change layout once released.  The struct size is part of the
 * command number (_IOWR) and a number is served for exactly its size, so
 * a struct is never extended in place: a command that needs more fields
 * gets a new command number with the larger struct, the old number keeps
 * its meaning, and a feature bit in GET_INFO says the new one exists.
 * Every field documented "must be zero" is checked; non-zero gives -EINVAL
 * so that it can be given a meaning later without a new number.
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
/* XFER, FENCE, CANCEL, DB_WAIT, GRANT, SET_QOS, SET_CTX and the mmaps. */
#define HCOMM_FEAT_XFER			_BITULL(4)
/* REG_MEM consults a registration cache with mmu-notifier invalidation. */
#define HCOMM_FEAT_REG_CACHE		_BITULL(5)
/* Bit 6 is reserved: it never meant anything (no dmaengine copies). */
/* HCOMM_CMD_XFER_BATCH is available. */
#define HCOMM_FEAT_XFER_BATCH		_BITULL(7)
/* HCOMM_CMD_DB_WAIT_ANY is available. */
#define HCOMM_FEAT_DB_WAIT_ANY		_BITULL(8)

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
 * @max_inline:      out: transfers up to this many bytes complete in the
 *                   submitting call (this context's setting).
 * @chunk_size:      out: bytes the engine copies per scheduling step.
 * @nr_doorbells:    out: 64-bit doorbells the context can map (module
 *                   parameter); mmap() offset HCOMM_MMAP_DOORBELLS.
 * @reserved0:       must be zero; zeroed on output.
 * @cache_limit:     out: bytes of deregistered, still pinned memory the
 *                   registration cache of this context may keep.
 * @cache_bytes:     out: bytes it keeps now.
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
	__u32 max_inline;
	__u32 chunk_size;
	__u32 nr_doorbells;
	__u32 reserved0;
	__u64 cache_limit;
	__u64 cache_bytes;
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

/* hcomm_reg_mem.flags */
/* Do not use or feed the registration cache: always pin afresh. */
#define HCOMM_REG_NOCACHE	_BITUL(0)

/* hcomm_reg_mem.cache (out) */
#define HCOMM_REG_MISS		0	/* pages were pinned by this call */
#define HCOMM_REG_HIT		1	/* pages already pinned by the context */

/**
 * struct hcomm_reg_mem - argument of HCOMM_CMD_REG_MEM.
 * @addr:      in: user virtual address of the first byte; any alignment.
 * @len:       in: length in bytes, >= 1; addr + len must not overflow.
 * @access:    in: HCOMM_ACCESS_* bits.
 * @flags:     in: HCOMM_REG_* bits.
 * @region:    out: region id, unique within the context, never 0.
 * @cache:     out: HCOMM_REG_HIT or HCOMM_REG_MISS.
 * @key:       out: 64-bit unguessable key naming the region.
 * @generation: out: value of the region's generation slot (entry
 *             region % HCOMM_GEN_SLOTS of the generation page) right after
 *             registration.  While the slot still reads this value the
 *             region exists and its pages are what is mapped at @addr.
 * @reserved:  must be zero.
 *
 * Pins the pages of [addr, addr + len) with FOLL_LONGTERM (and FOLL_WRITE
 * when LOCAL_WRITE is asked) and charges them to the caller's
 * RLIMIT_MEMLOCK unless it has CAP_IPC_LOCK.  When the context already
 * has the range pinned with at least this access (as a live region or in
 * its cache of deregistered regions) no page is pinned again.
 */
struct hcomm_reg_mem {
	__u64 addr;
	__u64 len;
	__u32 access;
	__u32 flags;
	__u32 region;
	__u32 cache;
	__u64 key;
	__u64 generation;
	__u64 reserved;
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

/* hcomm_xfer.flags */
/* On completion, add db_value to the doorbell db_index. */
#define HCOMM_XFER_DB_ADD	_BITUL(0)
/* On completion, store db_value in the doorbell db_index. */
#define HCOMM_XFER_DB_SET	_BITUL(1)
/* The doorbell is the destination region owner's, not the caller's. */
#define HCOMM_XFER_DB_REMOTE	_BITUL(2)
/* Never complete inline, even when len <= max_inline. */
#define HCOMM_XFER_NO_INLINE	_BITUL(3)

/* hcomm_xfer.engine (out, ioctl only) */
#define HCOMM_ENGINE_INLINE	1	/* copied by the CPU in the submitter */
#define HCOMM_ENGINE_CPU	2	/* copied by the CPU on engine workers */
/* 3 is reserved (never reported). */

/**
 * struct hcomm_xfer - argument of HCOMM_CMD_XFER.
 * @src_key:  in: key of the source region.
 * @src_off:  in: byte offset of the first byte within the source region.
 * @dst_key:  in: key of the destination region.
 * @dst_off:  in: byte offset within the destination region.
 * @len:      in: bytes to copy; 0 copies nothing (a pure signal).  Any
 *            alignment of offsets and length.
 * @tag:      in: caller's tag, matched by HCOMM_CMD_CANCEL.
 * @flags:    in: HCOMM_XFER_* bits; DB_ADD and DB_SET exclude each other.
 * @db_index: in: doorbell index when DB_ADD or DB_SET is set, else 0.
 * @db_value: in: value to add or store, else 0.
 * @done:     out (ioctl): bytes copied.  Through io_uring, rings created
 *            with IORING_SETUP_CQE32 get it in cqe->big_cqe[0].
 * @engine:   out (ioctl): HCOMM_ENGINE_* that copied the data (INLINE or
 *            CPU; no version of the module copies with a dmaengine).
 * @reserved0: must be zero.
 * @reserved: must be zero.
 *
 * Either region may belong to another context (another process) that
 * granted the caller access with HCOMM_CMD_GRANT.  The source must be
 * readable by the caller, the destination writable.  The doorbell, if any,
 * is updated with release ordering after every byte is visible.
 *
 * Revocation is a barrier: once the owner's DEREG or GRANT (or its close)
 * returns, no chunk of another context's transfer touches the region under
 * the rights it withdrew; such a transfer ends at its next chunk with
 * -ENOENT (region gone) or -EACCES (no longer granted), @done bytes (a
 * prefix) having landed.  A transfer of the owner itself keeps its region
 * pinned until it ends.  A transfer copies between the pages pinned at
 * registration, even if the range was since unmapped or remapped (RDMA
 * memory-region semantics; the generation page tells when that happened).
 *
 * Completion: ioctl() returns when the copy is complete.  Through
 * io_uring a transfer of at most max_inline bytes completes in the
 * submission (cqe->res 0); a larger one is split into chunk_size pieces
 * copied by the engine's workers and posts its CQE when the last piece
 * lands.  cqe->res is 0 when all @len bytes were copied, -ECANCELED when a
 * CANCEL, the ring's exit or the context's close stopped it (@done bytes,
 * a prefix of the range, landed), or -errno.
 */
struct hcomm_xfer {
	__u64 src_key;
	__u64 src_off;
	__u64 dst_key;
	__u64 dst_off;
	__u64 len;
	__u64 tag;
	__u32 flags;
	__u32 db_index;
	__u64 db_value;
	__u64 done;
	__u32 engine;
	__u32 reserved0;
	__u64 reserved[2];
};

/* Most descriptors one HCOMM_CMD_XFER_BATCH takes. */
#define HCOMM_BATCH_MAX		4096

/**
 * struct hcomm_xfer_batch - argument of HCOMM_CMD_XFER_BATCH.
 * @descs:    in: user address of an array of @count struct hcomm_xfer,
 *            8-byte aligned; read only, never written.
 * @count:    in: descriptors, 1 .. HCOMM_BATCH_MAX.
 * @flags:    in: must be zero.
 * @done:     out: descriptors completed (ioctl, also when it fails).
 *            Through io_uring, rings created with IORING_SETUP_CQE32 get
 *            it in cqe->big_cqe[0].
 * @reserved0: must be zero.
 * @reserved: must be zero.
 *
 * Small transfers, many per system call: the descriptors are checked and
 * carried out in array order, each as HCOMM_CMD_XFER would carry out an
 * inline transfer (the CPU copies it in the submission, then updates its
 * doorbell, if any, with release ordering), so one command costs one
 * submission and one completion for all of them.  Every descriptor must
 * qualify for the inline path: @len at most the context's max_inline
 * (GET_INFO), HCOMM_XFER_NO_INLINE clear, @tag 0 (a batch completes in the
 * submission: there is nothing to cancel), both regions host memory
 * (REG_MEM); a descriptor's done and engine fields are ignored.  Keys,
 * rights and ranges are checked per descriptor exactly as for XFER.
 *
 * The first descriptor that fails ends the batch: the ones before it
 * have landed (with their doorbells), it and the ones after it did
 * nothing; the command fails with its error and @done is its index.
 * Success: @done == @count, cqe->res 0.
 */
struct hcomm_xfer_batch {
	__u64 descs;
	__u32 count;
	__u32 flags;
	__u32 done;
	__u32 reserved0;
	__u64 reserved[2];
};

/* hcomm_cancel.flags */
/* Cancel every pending transfer and wait of the context; tag ignored. */
#define HCOMM_CANCEL_ALL	_BITUL(0)

/**
 * struct hcomm_cancel - argument of HCOMM_CMD_CANCEL.
 * @tag:      in: cancel this context's pending XFERs, FENCEs and DB_WAITs
 *            carrying this tag.
 * @flags:    in: HCOMM_CANCEL_* bits.
 * @count:    out: operations found pending and cancelled.  Each still
 *            posts its own completion (-ECANCELED).
 * @reserved: must be zero.
 */
struct hcomm_cancel {
	__u64 tag;
	__u32 flags;
	__u32 count;
	__u64 reserved[2];
};

/**
 * struct hcomm_fence - argument of HCOMM_CMD_FENCE.
 * @tag:      in: tag for HCOMM_CMD_CANCEL.
 * @flags:    in: must be zero.
 * @reserved0: must be zero.
 * @reserved: must be zero.
 *
 * Completes once every XFER this context submitted before it has
 * completed (successfully or not).  Through io_uring it posts its CQE
 * then; ioctl() blocks until then.
 */
struct hcomm_fence {
	__u64 tag;
	__u32 flags;
	__u32 reserved0;
	__u64 reserved[2];
};

/**
 * struct hcomm_db_wait - argument of HCOMM_CMD_DB_WAIT.
 * @index:      in: doorbell index, < nr_doorbells (GET_INFO).
 * @flags:      in: must be zero.
 * @value:      in: complete once doorbell >= value (unsigned compare).
 * @tag:        in: tag for HCOMM_CMD_CANCEL.
 * @timeout_ns: in: give up with -ETIME after this long; 0, or a value
 *              whose deadline does not fit a signed 64-bit nanosecond
 *              clock (about 292 years), waits forever.  -ETIME only once
 *              the time has passed (a high-resolution timer: soon
 *              after, not at a timer tick): never because of a signal.
 *              out (ioctl): when a signal interrupts a finite wait, the
 *              time left, so that the restarted call waits no longer in
 *              all (with SA_RESTART the restart is transparent).
 * @current_value: out (ioctl): doorbell value when the wait ended.
 * @reserved:   must be zero.
 *
 * Only updates made by XFER signals wake a waiter; a store to the mapped
 * page from userspace is seen at the next signal, CANCEL or timeout.
 */
struct hcomm_db_wait {
	__u32 index;
	__u32 flags;
	__u64 value;
	__u64 tag;
	__u64 timeout_ns;
	__u64 current_value;
	__u64 reserved[2];
};

/* Doorbells one HCOMM_CMD_DB_WAIT_ANY waits for, at most. */
#define HCOMM_DB_WAIT_ANY_MAX	4

/**
 * struct hcomm_db_wait_any - argument of HCOMM_CMD_DB_WAIT_ANY.
 * @count:      in: doorbells named, 1 .. HCOMM_DB_WAIT_ANY_MAX.
 * @flags:      in: must be zero.
 * @tag:        in: tag for HCOMM_CMD_CANCEL.
 * @timeout_ns: in/out: as in struct hcomm_db_wait.
 * @index:      in: doorbell indices, each < nr_doorbells (GET_INFO); the
 *              same index may appear twice.  Entries from @count on must
 *              be zero.
 * @value:      in: complete once, for some i < @count, doorbell @index[i]
 *              >= @value[i] (unsigned compare).  Entries from @count on
 *              must be zero.
 * @ready:      out (ioctl): bit i set for each i < @count whose doorbell
 *              held when the wait ended (0 after ETIME or ECANCELED,
 *              unless one reached its value meanwhile).
 * @reserved0:  must be zero.
 * @reserved:   must be zero.
 *
 * DB_WAIT for the first of several doorbells to reach its value, in one
 * sleep: a signal to any of them wakes the waiter.  Otherwise as DB_WAIT.
 * Through io_uring, @ready is the second word of an IORING_SETUP_CQE32
 * ring's CQE, whether the command parked or not.
 */
struct hcomm_db_wait_any {
	__u32 count;
	__u32 flags;
	__u64 tag;
	__u64 timeout_ns;
	__u32 index[HCOMM_DB_WAIT_ANY_MAX];
	__u64 value[HCOMM_DB_WAIT_ANY_MAX];
	__u32 ready;
	__u32 reserved0;
	__u64 reserved[2];
};

/* hcomm_grant.scope */
#define HCOMM_GRANT_NONE	0	/* revoke: only the owner */
#define HCOMM_GRANT_SAME_UID	1	/* callers whose euid is the owner's */
#define HCOMM_GRANT_UID		2	/* callers whose euid is @uid */
#define HCOMM_GRANT_ANY		3	/* any caller that holds the key */

/**
 * struct hcomm_grant - argument of HCOMM_CMD_GRANT.
 * @region:   in: region id in the caller's context.
 * @scope:    in: HCOMM_GRANT_*; replaces the previous grant.
 * @access:   in: HCOMM_ACCESS_REMOTE_READ and/or REMOTE_WRITE, a subset
 *            of the region's access; 0 with HCOMM_GRANT_NONE.
 * @uid:      in: user id (in the caller's user namespace) for
 *            HCOMM_GRANT_UID, else 0.
 * @flags:    in: must be zero.
 * @reserved0: must be zero.
 * @reserved: must be zero.
 *
 * Scope, access and uid take effect together (a transfer sees the old
 * grant or the new one, never a mix).  Returns once no transfer of
 * another context still copies under rights the new grant withdrew (see
 * struct hcomm_xfer).
 */
struct hcomm_grant {
	__u32 region;
	__u32 scope;
	__u32 access;
	__u32 uid;
	__u32 flags;
	__u32 reserved0;
	__u64 reserved[2];
};

/**
 * struct hcomm_qos - argument of HCOMM_CMD_SET_QOS.
 * @min_rate: in: share of the engine, in percent, this context receives at
 *            least whenever it has work (0 .. 100).  The min_rate of all
 *            contexts together may not exceed 100.
 * @max_rate: in: share it never exceeds while other contexts wait
 *            (1 .. 100, >= min_rate); 100 means no cap.
 * @priority: in: 0 (lowest) .. 7; among contexts equally behind their
 *            share the higher priority is served first.
 * @flags:    in: must be zero.
 * @reserved: must be zero.
 *
 * A new context starts with min_rate 0, max_rate 100, priority 0.
 */
struct hcomm_qos {
	__u32 min_rate;
	__u32 max_rate;
	__u32 priority;
	__u32 flags;
	__u64 reserved[2];
};

/* hcomm_ctx_opts.mask: which fields SET_CTX applies. */
#define HCOMM_CTX_MAX_INLINE	_BITUL(0)
#define HCOMM_CTX_CACHE_LIMIT	_BITUL(1)

/**
 * struct hcomm_ctx_opts - argument of HCOMM_CMD_SET_CTX.
 * @mask:        in: HCOMM_CTX_* bits naming the fields to set.
 * @max_inline:  in: inline threshold in bytes for this context (at most the
 *               module's max_inline parameter).
 * @cache_limit: in: bytes of deregistered memory the cache may keep
 *               pinned; 0 turns keeping off (live regions are still
 *               shared).  Lowering it evicts at once.
 * @reserved:    must be zero.
 *
 * GET_INFO reports the values in force.
 */
struct hcomm_ctx_opts {
	__u32 mask;
	__u32 max_inline;
	__u64 cache_limit;
	__u64 reserved[2];
};

/*
 * mmap() offsets of /dev/hcomm.
 *
 * HCOMM_MMAP_DOORBELLS: nr_doorbells __u64 counters, readable and writable,
 * zero at creation, the same pages for every mapping of the context.  The
 * length may be any multiple of the page size up to the whole array.  The
 * mapping is not inherited by fork() children, and madvise(MADV_DOFORK)
 * on it fails with EINVAL (the mapping is VM_IO).  Transfers publish with
 * release semantics: a reader that sees the new value with an acquire load
 * (__atomic_load_n(p, __ATOMIC_ACQUIRE)) also sees the transferred data.
 *
 * HCOMM_MMAP_GENERATION: HCOMM_GEN_SLOTS read-only __u64 counters (one
 * page of 4 KiB).  Slot (region % HCOMM_GEN_SLOTS) changes whenever a
 * region using it is registered, deregistered, or loses the pages it
 * registered from its address range (munmap, mremap, mprotect,
 * madvise(MADV_DONTNEED) ...).  This holds for every host region,
 * HCOMM_REG_NOCACHE ones included (a range that cannot be watched is not
 * registered); dma-buf regions report invalidation in QUERY's state.
 * Slots are shared, so a change may concern another region: re-check with
 * REG_MEM (a cache hit when nothing changed).
 */
#define HCOMM_MMAP_DOORBELLS	0x0ULL
#define HCOMM_MMAP_GENERATION	0x10000000ULL
#define HCOMM_GEN_SLOTS		512

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
 *              accessible;
 *   EPERM      the caller is not a thread of the process that opened the
 *              context (see "Who may issue commands" at the top).
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
 *              EOPNOTSUPP LOCAL_WRITE on a MAP_SHARED mapping of a file
 *                        whose page cache writes back (ext4, xfs, ...):
 *                        a writable long-term pin would bypass dirty
 *                        tracking.  Anonymous, shmem/memfd, hugetlb and
 *                        MAP_PRIVATE memory register;
 *              ENOMEM    also: the range could not be watched for
 *                        changes (mmu interval notifier);
 *              EINTR     a fatal signal arrived while pinning;
 *              other     errors of pin_user_pages_fast().
 * REG_DMABUF:  EBADF     fd is not an open file;
 *              EINVAL    fd is not a dma-buf, len == 0, offset not page
 *                        aligned, offset + len beyond the buffer, unknown
 *                        access bits, REMOTE_WRITE without LOCAL_WRITE, or
 *                        the exporter's mapping is not page aligned;
 *              E2BIG     len > max_region_size;
 *              EACCES    LOCAL_WRITE or REMOTE_WRITE on a dma-buf exported
 *                        read-only (no O_RDWR, e.g. PRIME without
 *                        DRM_RDWR);
 *              ENOSPC    as for REG_MEM;
 *              ENOMEM    out of memory;
 *              EINTR     a signal arrived while waiting for the exporter's
 *                        fences;
 *              other     errors of the exporter's attach/map callbacks.
 * DEREG:       ENOENT    no region with this id in this context.
 * QUERY:       ENOENT    no region with this id in this context;
 *              EINTR     a fatal signal arrived while writing extents.
 *              The extents of an HCOMM_STATE_INVALID region are stale.
 * XFER:        ENOENT    a key names no live region (never issued, or
 *                        deregistered: the two are indistinguishable), or
 *                        the other context's region was deregistered while
 *                        the transfer ran;
 *              EACCES    the region belongs to another context that did
 *                        not grant this caller the access needed (or
 *                        withdrew it while the transfer ran), or the
 *                        caller's own destination lacks LOCAL_WRITE;
 *              EINVAL    DB_ADD with DB_SET, a doorbell field without a
 *                        DB flag, a doorbell index >= nr_doorbells;
 *              ERANGE    off + len beyond a region (or wrapping);
 *              EOPNOTSUPP a dma-buf region whose exporter gives no kernel
 *                        mapping of system memory (the CPU cannot copy);
 *              ESTALE    a dma-buf region invalidated by move_notify;
 *              ECANCELED cancelled (see struct hcomm_xfer);
 *              EINTR     (ioctl) a fatal signal cancelled the copy, or
 *                        any signal interrupted the wait for a dma-buf's
 *                        fences and its handler does not restart system
 *                        calls (with SA_RESTART the call restarts: nothing
 *                        was copied yet);
 *              ENOMEM    out of memory.
 * XFER_BATCH:  EINVAL    count 0 or above HCOMM_BATCH_MAX, descs not
 *                        8-byte aligned; a descriptor that XFER refuses
 *                        with EINVAL, or with len above max_inline,
 *                        HCOMM_XFER_NO_INLINE or a tag;
 *              EOPNOTSUPP a descriptor naming a dma-buf region;
 *              EFAULT    the descriptor array is not readable;
 *              ENOENT, EACCES, ERANGE as for XFER, per descriptor;
 *              EINTR     a fatal signal stopped it between two
 *                        descriptors.
 *              A failed batch reports in done how many descriptors
 *              landed before the one that failed.
 * CANCEL:      no other errors; count may be 0.
 * FENCE:       ECANCELED, EINTR as for XFER.
 * DB_WAIT:     EINVAL    index >= nr_doorbells;
 *              ETIME     the timeout passed;
 *              ECANCELED cancelled, or the context or ring went away;
 *              EINTR     (ioctl) a signal arrived and its handler does
 *                        not restart system calls.
 * DB_WAIT_ANY: EINVAL    count 0 or above HCOMM_DB_WAIT_ANY_MAX, an index
 *                        >= nr_doorbells, a non-zero entry from count on;
 *              ETIME, ECANCELED, EINTR as for DB_WAIT.
 * GRANT:       ENOENT    no region with this id in this context;
 *              EINVAL    unknown scope, access bits outside the region's
 *                        REMOTE_* access, access 0 with a scope other
 *                        than NONE, uid set without HCOMM_GRANT_UID or not
 *                        mapped in the caller's user namespace.
 * SET_QOS:     EINVAL    min_rate > max_rate, max_rate 0 or > 100,
 *                        priority > 7;
 *              EPERM     without CAP_SYS_NICE: raising min_rate above the
 *                        module parameter qos_user_min_rate, or the
 *                        min_rate of all the user's contexts together
 *                        above it, or raising priority above
 *                        qos_user_priority (both 0 by default); lowering
 *                        one's own is never refused by these limits;
 *              ENOSPC    the contexts' min_rate would sum above 100.
 * SET_CTX:     EINVAL    unknown mask bit, max_inline above the module's.
 */
#define HCOMM_CMD_GET_INFO	_IOWR(HCOMM_IOC_MAGIC, 0x00, struct hcomm_info)
#define HCOMM_CMD_REG_MEM	_IOWR(HCOMM_IOC_MAGIC, 0x01, struct hcomm_reg_mem)
#define HCOMM_CMD_REG_DMABUF	_IOWR(HCOMM_IOC_MAGIC, 0x02, struct hcomm_reg_dmabuf)
#define HCOMM_CMD_DEREG		_IOWR(HCOMM_IOC_MAGIC, 0x03, struct hcomm_dereg)
#define HCOMM_CMD_QUERY		_IOWR(HCOMM_IOC_MAGIC, 0x04, struct hcomm_query)
#define HCOMM_CMD_XFER		_IOWR(HCOMM_IOC_MAGIC, 0x05, struct hcomm_xfer)
#define HCOMM_CMD_CANCEL	_IOWR(HCOMM_IOC_MAGIC, 0x06, struct hcomm_cancel)
#define HCOMM_CMD_FENCE		_IOWR(HCOMM_IOC_MAGIC, 0x07, struct hcomm_fence)
#define HCOMM_CMD_DB_WAIT	_IOWR(HCOMM_IOC_MAGIC, 0x08, struct hcomm_db_wait)
#define HCOMM_CMD_GRANT		_IOWR(HCOMM_IOC_MAGIC, 0x09, struct hcomm_grant)
#define HCOMM_CMD_SET_QOS	_IOWR(HCOMM_IOC_MAGIC, 0x0a, struct hcomm_qos)
#define HCOMM_CMD_SET_CTX	_IOWR(HCOMM_IOC_MAGIC, 0x0b, struct hcomm_ctx_opts)
#define HCOMM_CMD_XFER_BATCH	_IOWR(HCOMM_IOC_MAGIC, 0x0c, struct hcomm_xfer_batch)
#define HCOMM_CMD_DB_WAIT_ANY	_IOWR(HCOMM_IOC_MAGIC, 0x0d, struct hcomm_db_wait_any)

#endif /* _UAPI_LINUX_HCOMM_H */
