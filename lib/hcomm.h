/* SPDX-License-Identifier: MIT */
/*
 * libhcomm: userspace access to hcomm.ko (/dev/hcomm).
 *
 * Every function returns 0 (or a count) on success and a negated
 * enum hcomm_err code on failure; none exits, aborts or prints.
 * The raw errno behind the last failure of the calling thread is
 * hcomm_errno(), a one-line explanation is hcomm_errmsg().
 *
 * Commands go through io_uring (IORING_OP_URING_CMD) when the kernel and
 * the module allow it, else through ioctl(); both give the same results.
 *
 * Threads: a context may be shared by threads.  ioctl submission needs no
 * lock; the io_uring of a context is guarded by a mutex, so commands of
 * one context are serialised on the ring.  Use one context per thread for
 * parallel registration.  hcomm_close() must not race with other calls on
 * the same context, and an mr must not be used by two threads while one of
 * them deregisters it.
 */
#ifndef LIBHCOMM_H
#define LIBHCOMM_H

#include <stddef.h>
#include <stdint.h>
#include <linux/hcomm.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HCOMM_LIB_VERSION_MAJOR	1
#define HCOMM_LIB_VERSION_MINOR	0

/* Default device node; the environment variable HCOMM_DEVICE overrides it. */
#define HCOMM_DEVICE_PATH	"/dev/hcomm"

/*
 * Error codes, returned negated (-HCOMM_ERR_x).  errno mapping:
 *
 *  HCOMM_ERR_NODEV    ENOENT, ENODEV, ENXIO from open(): the module is not
 *                     loaded (modprobe hcomm / insmod hcomm.ko) or
 *                     HCOMM_DEVICE names no device; ENODEV from a command.
 *  HCOMM_ERR_MMAP     ENOMEM from REG_MEM while RLIMIT_MEMLOCK is finite:
 *                     the pinned pages exceed the memlock limit; raise it
 *                     (ulimit -l, limits.conf "memlock") or give the
 *                     process CAP_IPC_LOCK.
 *  HCOMM_ERR_ACCESS   EACCES, EROFS; EPERM (also: REG_MEM from a process
 *                     other than the one that opened the context, e.g.
 *                     after fork); EFAULT (the buffer is not mapped, or
 *                     mapped read-only while LOCAL_WRITE asked).
 *  HCOMM_ERR_INVAL    EINVAL, EBADF, EOVERFLOW, ERANGE; bad arguments
 *                     caught by the library.
 *  HCOMM_ERR_NOMEM    ENOMEM elsewhere (including REG_MEM with unlimited
 *                     memlock); malloc failure in the library.
 *  HCOMM_ERR_ABI      the module reports another HCOMM_ABI_VERSION; ENOTTY
 *                     from a command (the module does not know it).
 *  HCOMM_ERR_BUSY     EBUSY, EAGAIN, EINTR: retry.
 *  HCOMM_ERR_IO       EIO and any errno not listed here.
 *  HCOMM_ERR_TIMEOUT  ETIMEDOUT, ETIME (alias HCOMM_TIMEOUT).
 *  HCOMM_ERR_NOTSUP   EOPNOTSUPP, ENOSYS; a feature the module lacks
 *                     (e.g. REG_DMABUF without HCOMM_FEAT_DMABUF).
 *  HCOMM_ERR_NOENT    ENOENT from a command: no such region.
 *  HCOMM_ERR_LIMIT    ENOSPC, E2BIG, EDQUOT, EMFILE, ENFILE: too many
 *                     regions (max_regions), region too large
 *                     (max_region_size), or out of file descriptors.
 *  HCOMM_ERR_NOTHCOMM ENOTTY from GET_INFO in hcomm_open(): the file is not
 *                     an hcomm device.
 */
enum hcomm_err {
	HCOMM_OK = 0,
	HCOMM_ERR_NODEV,
	HCOMM_ERR_MMAP,
	HCOMM_ERR_ACCESS,
	HCOMM_ERR_INVAL,
	HCOMM_ERR_NOMEM,
	HCOMM_ERR_ABI,
	HCOMM_ERR_BUSY,
	HCOMM_ERR_IO,
	HCOMM_ERR_TIMEOUT,
	HCOMM_TIMEOUT = HCOMM_ERR_TIMEOUT,
	HCOMM_ERR_NOTSUP,
	HCOMM_ERR_NOENT,
	HCOMM_ERR_LIMIT,
	HCOMM_ERR_NOTHCOMM,
	HCOMM_ERR__MAX			/* not a code; one past the last */
};

/* hcomm_open() flags. */
#define HCOMM_OPEN_NO_URING	(1U << 0)	/* use ioctl() only */

struct hcomm_ctx;

/* A registered region.  Read-only for the caller; freed by hcomm_dereg(). */
struct hcomm_mr {
	struct hcomm_ctx *ctx;
	uint32_t region;	/* region id, never 0 */
	uint32_t type;		/* HCOMM_REGION_HOST or HCOMM_REGION_DMABUF */
	uint64_t key;		/* key naming the region */
	void *addr;		/* host: first byte; dma-buf: NULL */
	size_t len;		/* bytes registered */
	uint64_t offset;	/* dma-buf: offset into the dma-buf; host: 0 */
	int dmabuf_fd;		/* dma-buf: fd as passed (not owned); host: -1 */
	unsigned access;	/* HCOMM_ACCESS_* */
};

/*
 * Open HCOMM_DEVICE or /dev/hcomm, check HCOMM_CMD_GET_INFO's ABI version,
 * and set up a queue-depth-8 io_uring for commands unless flags has
 * HCOMM_OPEN_NO_URING, the environment has HCOMM_NO_URING=1, or the kernel
 * or module cannot do uring_cmd (then ioctl() is used, silently).
 */
int hcomm_open(struct hcomm_ctx **ctx, unsigned flags);
/* Close the device (the module drops every region) and free remaining mrs. */
void hcomm_close(struct hcomm_ctx *ctx);
/* 1 when commands go through io_uring, 0 when through ioctl(). */
int hcomm_uses_uring(const struct hcomm_ctx *ctx);
/* Device fd (for poll/diagnostics); owned by the context. */
int hcomm_fd(const struct hcomm_ctx *ctx);

/* HCOMM_CMD_GET_INFO, fresh from the module. */
int hcomm_get_info(struct hcomm_ctx *ctx, struct hcomm_info *out);

/* Pin and register [addr, addr + size) of this process; any alignment. */
int hcomm_reg_mem(struct hcomm_ctx *ctx, void *addr, size_t size,
		  unsigned access, struct hcomm_mr **mr);
/* Import [offset, offset + len) of dma-buf fd (offset page aligned). */
int hcomm_reg_dmabuf(struct hcomm_ctx *ctx, int fd, uint64_t offset,
		     size_t len, unsigned access, struct hcomm_mr **mr);
/*
 * Deregister and free mr.  On failure mr is kept (the call may be
 * retried); hcomm_close() frees it in any case.
 */
int hcomm_dereg(struct hcomm_mr *mr);
/*
 * HCOMM_CMD_QUERY: fill *q and the first min(max_ext, q->nr_extents)
 * entries of ext (may be NULL when max_ext is 0).
 */
int hcomm_query(struct hcomm_mr *mr, struct hcomm_query *q,
		struct hcomm_extent *ext, unsigned max_ext);

/* Message for an hcomm_err code (sign ignored); never NULL or empty. */
const char *hcomm_strerror(int err);
/* errno behind the calling thread's last failure (0: none or local). */
int hcomm_errno(void);
/* One-line detail of the calling thread's last failure ("" if none). */
const char *hcomm_errmsg(void);

#ifdef __cplusplus
}
#endif

#endif /* LIBHCOMM_H */
