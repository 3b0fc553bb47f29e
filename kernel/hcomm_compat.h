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

#include <linux/io_uring_types.h>
#include <linux/percpu-refcount.h>

/*
 * The SQE payload of a passthrough command.  6.1 points ioucmd->cmd at it
 * and, before a command that answered -EAGAIN is reissued from io-wq, at a
 * private copy.  Kernels with io_uring_sqe_cmd() keep ioucmd->sqe instead;
 * up to at least 6.12.118 a reissue after -EAGAIN copies the SQE into the
 * request's async_data (struct uring_cache: the SQE comes first) but
 * leaves ioucmd->sqe on the ring slot, which userspace may have refilled.
 * So an issue without IO_URING_F_NONBLOCK (io-wq: a reissue, or a request
 * whose SQE was copied at prep because it was forced async) reads the
 * copy; an issue with it (the submitting call, SQPOLL, task work) reads
 * the slot, still valid then, except for a request linked behind another
 * (IOSQE_IO_LINK) on 6.8 .. 6.14, which those kernels issue after the
 * slot may have been reused: Documentation/uapi.rst forbids that.
 */
static inline const void *hcomm_uring_payload(const struct io_uring_cmd *c,
					      unsigned int issue_flags)
{
#ifdef HCOMM_HAVE_IO_URING_SQE_CMD
	const struct io_kiocb *req = cmd_to_io_kiocb((struct io_uring_cmd *)c);

	if (!(issue_flags & IO_URING_F_NONBLOCK) && req->async_data)
		return io_uring_sqe_cmd(req->async_data);
	return io_uring_sqe_cmd(c->sqe);
#else
	return c->cmd;
#endif
}

/* io_uring_cmd_done() without issue_flags: before 6.3 (and its backports). */
static inline void hcomm_uring_cmd_done(struct io_uring_cmd *c, ssize_t ret,
					u64 res2, unsigned int issue_flags)
{
#ifdef HCOMM_HAVE_URING_CMD_DONE_FLAGS
	io_uring_cmd_done(c, ret, res2, issue_flags);
#else
	io_uring_cmd_done(c, ret, res2);
#endif
}

/*
 * Is the ring of a pending command going away, or its task cancelling all
 * its requests (exit, exec)?  Kernels without IO_URING_F_CANCEL never tell
 * the driver: hcomm looks (hcomm_main.c's sweep) and ends such commands,
 * which io_uring is waiting for.
 */
static inline bool hcomm_uring_orphaned(struct io_uring_cmd *c)
{
	const struct io_kiocb *req = cmd_to_io_kiocb(c);
	const struct io_uring_task *tctx = req->task->io_uring;

	if (percpu_ref_is_dying(&req->ctx->refs))
		return true;
#ifdef HCOMM_HAVE_TCTX_IN_CANCEL
	return tctx && atomic_read(&tctx->in_cancel);
#else
	return tctx && atomic_read(&tctx->in_idle);
#endif
}

/*
 * IO_URING_F_CANCEL (6.7+): a pending command marked cancelable is handed
 * back to ->uring_cmd() with this flag when its ring or task goes away.
 * Without it a pending command keeps the ring alive, and hcomm ends its
 * commands itself: when the owning process exits (an mmu notifier on its
 * mm, registered at open) and when the ring dies or the task cancels its
 * requests (a sweep, hcomm_uring_orphaned()).  HCOMM_COMPAT_61=1 at build
 * time takes that path on a newer kernel too, so that the debug kernel's
 * lockdep and KASAN see it.
 */
#if defined(HCOMM_HAVE_URING_CANCEL) && !defined(HCOMM_COMPAT_61)
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

#include <linux/cgroup.h>

/*
 * Are @a and @b in the same cgroup of every hierarchy?  Always, in a
 * kernel built without cgroups (the debug kernel of the tests had none
 * before; a stock kernel always has them).
 */
static inline bool hcomm_same_cgroups(struct task_struct *a,
				      struct task_struct *b)
{
#ifdef CONFIG_CGROUPS
	bool same;

	rcu_read_lock();
	same = task_css_set(a) == task_css_set(b);
	rcu_read_unlock();
	return same;
#else
	return true;
#endif
}

#endif /* _HCOMM_COMPAT_H */
