/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernels hcomm builds against (6.1 .. 6.12).
 *
 * Decided by feature probes in Kbuild (HCOMM_HAVE_*), not by version
 * numbers, because distributions backport.  Nothing else in hcomm may test
 * the kernel version.
 */
#ifndef _HCOMM_COMPAT_H
#define _HCOMM_COMPAT_H

#ifdef HCOMM_HAVE_IO_URING_CMD_H
#include <linux/io_uring/cmd.h>		/* 6.7+ */
#else
#include <linux/io_uring.h>
#endif

/*
 * The SQE payload of a passthrough command: 6.1 points at it directly
 * (ioucmd->cmd); later kernels keep the SQE and provide io_uring_sqe_cmd().
 */
static inline const void *hcomm_uring_payload(const struct io_uring_cmd *c)
{
#ifdef HCOMM_HAVE_IO_URING_SQE_CMD
	return io_uring_sqe_cmd(c->sqe);
#else
	return c->cmd;
#endif
}

/*
 * May a command that would sleep answer -EAGAIN to IO_URING_F_NONBLOCK?
 * io_uring then reissues it from io-wq and the payload is read again.
 * 6.1 points ioucmd->cmd at a private copy of the SQE before the reissue.
 * Kernels with io_uring_sqe_cmd() up to at least 6.12.118 copy the SQE on
 * -EAGAIN but leave ioucmd->sqe on the ring slot, which userspace may
 * already have refilled: there the command runs inline (it may block; the
 * submitter is in process context) rather than read a reused slot.
 */
static inline bool hcomm_uring_can_punt(void)
{
#ifdef HCOMM_HAVE_IO_URING_SQE_CMD
	return false;
#else
	return true;
#endif
}

/*
 * IO_URING_F_CANCEL (6.7+): a pending command marked cancelable is handed
 * back to ->uring_cmd() with this flag when its ring or task goes away.
 * Without it a pending command keeps the ring alive, and hcomm ends its
 * commands itself when the owning process exits (hcomm_main.c).
 */
#ifdef HCOMM_HAVE_URING_CANCEL
static inline bool hcomm_uring_can_cancel(void)
{
	return true;
}

static inline void hcomm_uring_mark_cancelable(struct io_uring_cmd *c,
					       unsigned int issue_flags)
{
	io_uring_cmd_mark_cancelable(c, issue_flags);
}

static inline bool hcomm_uring_is_cancel(unsigned int issue_flags)
{
	return issue_flags & IO_URING_F_CANCEL;
}
#else
static inline bool hcomm_uring_can_cancel(void)
{
	return false;
}

static inline void hcomm_uring_mark_cancelable(struct io_uring_cmd *c,
					       unsigned int issue_flags)
{
}

static inline bool hcomm_uring_is_cancel(unsigned int issue_flags)
{
	return false;
}
#endif

/* vm_flags became read-only behind accessors in 6.3. */
#include <linux/mm.h>
static inline void hcomm_vm_flags_set(struct vm_area_struct *vma,
				      vm_flags_t flags)
{
#ifdef HCOMM_HAVE_VM_FLAGS_SET
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

static inline void hcomm_vm_flags_mod(struct vm_area_struct *vma,
				      vm_flags_t set, vm_flags_t clear)
{
#ifdef HCOMM_HAVE_VM_FLAGS_SET
	vm_flags_mod(vma, set, clear);
#else
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
#endif
}

/*
 * Kernel mappings of a dma-buf: 6.2 moved dma_buf_vmap() under the
 * reservation lock and added dma_buf_vmap_unlocked() for callers that do
 * not hold it; before, dma_buf_vmap() locked internally.
 */
#include <linux/dma-buf.h>
static inline int hcomm_dmabuf_vmap(struct dma_buf *dmabuf,
				    struct iosys_map *map)
{
#ifdef HCOMM_HAVE_DMA_BUF_VMAP_UNLOCKED
	return dma_buf_vmap_unlocked(dmabuf, map);
#else
	return dma_buf_vmap(dmabuf, map);
#endif
}

static inline void hcomm_dmabuf_vunmap(struct dma_buf *dmabuf,
				       struct iosys_map *map)
{
#ifdef HCOMM_HAVE_DMA_BUF_VMAP_UNLOCKED
	dma_buf_vunmap_unlocked(dmabuf, map);
#else
	dma_buf_vunmap(dmabuf, map);
#endif
}

#endif /* _HCOMM_COMPAT_H */
