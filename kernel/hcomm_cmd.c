// SPDX-License-Identifier: GPL-2.0
/*
 * The command set and its two fronts: ioctl() and io_uring passthrough
 * (file_operations.uring_cmd).
 *
 * Both fronts resolve the command number to one descriptor and call the same
 * handler with a user pointer to the same argument struct, so the two paths
 * cannot drift apart.  Handlers copy the argument in once, validate it
 * completely, act, and copy the result out.
 *
 * The rule of io_uring's non-blocking issue (IO_URING_F_NONBLOCK, under the
 * ring's uring_lock): nothing sleeps there.  Commands that may sleep
 * (pinning, dma-buf import and mapping, unpinning, long extent copies,
 * SET_CTX's cache trim, GRANT and DEREG waiting for other contexts'
 * chunks in flight) answer -EAGAIN before reading their payload;
 * io_uring copies the SQE and reissues them from an io-wq worker, which may
 * block, and they complete synchronously there.  XFER answers -EAGAIN only
 * for a dma-buf not yet mapped or still fenced.  XFER, FENCE and DB_WAIT
 * otherwise park (-EIOCBQUEUED) and never wait inline.
 */
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/huge_mm.h>
#include <linux/uaccess.h>
#include <linux/capability.h>
#include <linux/nospec.h>
#include <linux/string.h>
#include <linux/sched/signal.h>

#include "hcomm.h"
#include "hcomm_compat.h"

/**
 * struct hcomm_cmd_desc - one command of the set.
 * @cmd:       full command number (type, nr, size, direction).
 * @may_sleep: the handler may block; punted to a worker under io_uring.
 * @fn:        handler; @uarg is the user's argument struct.
 */
struct hcomm_cmd_desc {
	unsigned int cmd;
	bool may_sleep;
	int (*fn)(struct hcomm_ctx *ctx, void __user *uarg,
		  const struct hcomm_cmd_io *io);
};

u64 hcomm_memlock_limit(void)
{
	unsigned long lim = rlimit(RLIMIT_MEMLOCK);

	if (lim == RLIM_INFINITY || ns_capable_noaudit(&init_user_ns, CAP_IPC_LOCK))
		return ~0ULL;
	return lim;
}

static int hcomm_cmd_get_info(struct hcomm_ctx *ctx, void __user *uarg,
			      const struct hcomm_cmd_io *io)
{
	struct hcomm_info info;

	if (copy_from_user(&info, uarg, sizeof(info)))
		return -EFAULT;
	if (info.flags || info.reserved0)
		return -EINVAL;

	memset(&info, 0, sizeof(info));
	info.abi_version = HCOMM_ABI_VERSION;
	info.features = HCOMM_FEAT_URING_CMD | HCOMM_FEAT_DMABUF |
			HCOMM_FEAT_HUGE_EXTENTS | HCOMM_FEAT_XFER |
			HCOMM_FEAT_REG_CACHE | HCOMM_FEAT_XFER_BATCH |
			HCOMM_FEAT_DB_WAIT_ANY;
	if (IS_ENABLED(CONFIG_DMABUF_MOVE_NOTIFY))
		info.features |= HCOMM_FEAT_DMABUF_MOVE_NOTIFY;
	info.max_region_size = READ_ONCE(hcomm_max_region_size);
	info.page_sizes = PAGE_SIZE;
#ifdef CONFIG_TRANSPARENT_HUGEPAGE
	if (has_transparent_hugepage())
		info.page_sizes |= HPAGE_PMD_SIZE;
#endif
	info.max_regions = READ_ONCE(hcomm_max_regions);
	info.nr_regions = atomic_read(&ctx->nr_regions);
	info.memlock_limit = hcomm_memlock_limit();
	info.pinned_bytes = atomic64_read(&ctx->pinned_pages) << PAGE_SHIFT;
	info.max_inline = READ_ONCE(ctx->max_inline);
	info.chunk_size = hcomm_chunk_now();
	info.nr_doorbells = ctx->db ? ctx->nr_db :
			    clamp_t(u32, READ_ONCE(hcomm_nr_doorbells), 1, SZ_1M);
	mutex_lock(&ctx->cache_lock);
	info.cache_limit = ctx->cache_limit;
	info.cache_bytes = ctx->cache_bytes;
	mutex_unlock(&ctx->cache_lock);
	return copy_to_user(uarg, &info, sizeof(info)) ? -EFAULT : 0;
}

/*
 * Copy a registration's answer to userspace and drop the caller's
 * reference; a registration that cannot be reported is undone.
 */
static int hcomm_reg_reply(struct hcomm_ctx *ctx, struct hcomm_region *r,
			   void __user *uarg, const void *arg, size_t size)
{
	int ret = 0;

	if (copy_to_user(uarg, arg, size)) {
		hcomm_region_undo(ctx, r);
		ret = -EFAULT;
	}
	hcomm_region_put(r);
	return ret;
}

static int hcomm_cmd_reg_mem(struct hcomm_ctx *ctx, void __user *uarg,
			     const struct hcomm_cmd_io *io)
{
	struct hcomm_reg_mem arg;
	struct hcomm_region *r;
	int ret;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	ret = hcomm_reg_mem(ctx, &arg, &r);
	if (ret)
		return ret;
	return hcomm_reg_reply(ctx, r, uarg, &arg, sizeof(arg));
}

static int hcomm_cmd_reg_dmabuf(struct hcomm_ctx *ctx, void __user *uarg,
				const struct hcomm_cmd_io *io)
{
	struct hcomm_reg_dmabuf arg;
	struct hcomm_region *r;
	int ret;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	ret = hcomm_reg_dmabuf(ctx, &arg, &r);
	if (ret)
		return ret;
	return hcomm_reg_reply(ctx, r, uarg, &arg, sizeof(arg));
}

static int hcomm_cmd_dereg(struct hcomm_ctx *ctx, void __user *uarg,
			   const struct hcomm_cmd_io *io)
{
	struct hcomm_dereg arg;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if (arg.flags || memchr_inv(arg.reserved, 0, sizeof(arg.reserved)))
		return -EINVAL;
	return hcomm_dereg(ctx, arg.region);
}

/*
 * The extents of @r: the part of its table covering the region's pages,
 * clipped to them (a region may share a larger pinned range).  *@first_idx
 * is the table index of the region's first extent, *@pg0 its first page.
 */
static u64 hcomm_region_extents(const struct hcomm_region *r,
				const struct hcomm_vat **vatp, u64 *first_idx,
				u64 *pg0)
{
	const struct hcomm_vat_extent *e0, *e1;
	const struct hcomm_vat *vat;
	u64 base;

	vat = hcomm_region_vat(r, &base);
	*vatp = vat;
	*pg0 = r->umem ? base >> PAGE_SHIFT : 0;
	e0 = hcomm_vat_lookup(vat, *pg0);
	e1 = hcomm_vat_lookup(vat, *pg0 + r->nr_pages - 1);
	if (!e0 || !e1)
		return 0;
	*first_idx = e0 - vat->ext;
	return e1 - e0 + 1;
}

/*
 * Copy up to @max extents of @r, starting at extent @first, to @uext.
 * Physical addresses are shown only to CAP_SYS_ADMIN, as in pagemap.
 */
static int hcomm_query_extents(const struct hcomm_region *r,
			       struct hcomm_extent __user *uext, u64 first,
			       u32 max)
{
	bool show_phys = ns_capable_noaudit(&init_user_ns, CAP_SYS_ADMIN);
	const struct hcomm_vat *vat;
	u64 i, n, nr, idx0, pg0, pg_end;

	nr = hcomm_region_extents(r, &vat, &idx0, &pg0);
	pg_end = pg0 + r->nr_pages;
	if (first >= nr)
		return 0;
	first = array_index_nospec(first, nr);
	n = min_t(u64, max, nr - first);
	for (i = 0; i < n; i++) {
		const struct hcomm_vat_extent *e = &vat->ext[idx0 + first + i];
		u64 s = max(e->pgoff, pg0);
		u64 end = min(e->pgoff + e->npages, pg_end);
		struct hcomm_extent out = {
			.offset = (s - pg0) << PAGE_SHIFT,
			.len = (end - s) << PAGE_SHIFT,
			.phys = show_phys ? e->addr +
				((s - e->pgoff) << PAGE_SHIFT) : 0,
		};

		if (copy_to_user(&uext[i], &out, sizeof(out)))
			return -EFAULT;
		if (!(i & 1023)) {
			if (fatal_signal_pending(current))
				return -EINTR;
			cond_resched();
		}
	}
	return 0;
}

static int hcomm_cmd_query(struct hcomm_ctx *ctx, void __user *uarg,
			   const struct hcomm_cmd_io *io)
{
	struct hcomm_region *r;
	struct hcomm_query q;
	int ret = 0;

	if (copy_from_user(&q, uarg, sizeof(q)))
		return -EFAULT;
	if (q.flags || q.reserved)
		return -EINVAL;
	r = hcomm_region_get(ctx, q.region);
	if (!r)
		return -ENOENT;

	q.type = r->type;
	q.addr = r->addr;
	q.len = r->len;
	q.key = r->key;
	q.nr_pages = r->nr_pages;
	{
		const struct hcomm_vat *vat;
		u64 idx0, pg0;

		q.nr_extents = min_t(u64, hcomm_region_extents(r, &vat, &idx0,
							       &pg0), U32_MAX);
	}
	q.offset = r->offset;
	q.access = r->access;
	q.state = READ_ONCE(r->state);
	if (q.extents && q.max_extents)
		ret = hcomm_query_extents(r, u64_to_user_ptr(q.extents),
					  q.first_extent, q.max_extents);
	hcomm_region_put(r);
	if (ret)
		return ret;
	return copy_to_user(uarg, &q, sizeof(q)) ? -EFAULT : 0;
}

static int hcomm_cmd_xfer(struct hcomm_ctx *ctx, void __user *uarg,
			  const struct hcomm_cmd_io *io)
{
	struct hcomm_xfer arg;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	return hcomm_xfer(ctx, &arg, io, io->ioucmd ? NULL : uarg);
}

/*
 * io_uring: complete the command now with @ret, @res2 in the second word of
 * a CQE32 ring's CQE; counted as an error here, since the caller then
 * returns -EIOCBQUEUED.
 */
static int hcomm_uring_done_now(const struct hcomm_cmd_io *io, int ret,
				u64 res2)
{
	if (ret)
		atomic64_inc(&hcomm_stats.cmd_errors);
	hcomm_uring_cmd_done(io->ioucmd, ret, res2, io->issue_flags);
	return -EIOCBQUEUED;
}

static int hcomm_cmd_xfer_batch(struct hcomm_ctx *ctx, void __user *uarg,
				const struct hcomm_cmd_io *io)
{
	struct hcomm_xfer_batch arg;
	int ret;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	ret = hcomm_xfer_batch(ctx, &arg, io);
	if (io->ioucmd)	/* the count in the second word */
		return hcomm_uring_done_now(io, ret, arg.done);
	/* after a failure too: done says how many landed */
	if (copy_to_user(uarg, &arg, sizeof(arg)))
		return -EFAULT;
	return ret;
}

static int hcomm_cmd_cancel(struct hcomm_ctx *ctx, void __user *uarg,
			    const struct hcomm_cmd_io *io)
{
	struct hcomm_cancel arg;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if ((arg.flags & ~HCOMM_CANCEL_ALL) || arg.reserved[0] ||
	    arg.reserved[1])
		return -EINVAL;
	arg.count = hcomm_cancel(ctx, arg.tag, arg.flags & HCOMM_CANCEL_ALL);
	return copy_to_user(uarg, &arg, sizeof(arg)) ? -EFAULT : 0;
}

static int hcomm_cmd_fence(struct hcomm_ctx *ctx, void __user *uarg,
			   const struct hcomm_cmd_io *io)
{
	struct hcomm_fence arg;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	return hcomm_fence(ctx, &arg, io);
}

static int hcomm_cmd_db_wait(struct hcomm_ctx *ctx, void __user *uarg,
			     const struct hcomm_cmd_io *io)
{
	struct hcomm_db_wait arg;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	return hcomm_db_wait(ctx, &arg, io, io->ioucmd ? NULL : uarg);
}

static int hcomm_cmd_db_wait_any(struct hcomm_ctx *ctx, void __user *uarg,
				 const struct hcomm_cmd_io *io)
{
	struct hcomm_db_wait_any arg;
	int ret;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	ret = hcomm_db_wait_any(ctx, &arg, io, io->ioucmd ? NULL : uarg);
	/* ended at once: the ready bits in the second word, as later */
	if (io->ioucmd && ret != -EIOCBQUEUED)
		return hcomm_uring_done_now(io, ret, arg.ready);
	return ret;
}

static int hcomm_cmd_grant(struct hcomm_ctx *ctx, void __user *uarg,
			   const struct hcomm_cmd_io *io)
{
	struct hcomm_grant arg;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	return hcomm_grant(ctx, &arg);
}

static int hcomm_cmd_set_qos(struct hcomm_ctx *ctx, void __user *uarg,
			     const struct hcomm_cmd_io *io)
{
	struct hcomm_qos arg;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	return hcomm_set_qos(ctx, &arg);
}

static int hcomm_cmd_set_ctx(struct hcomm_ctx *ctx, void __user *uarg,
			     const struct hcomm_cmd_io *io)
{
	const u32 known = HCOMM_CTX_MAX_INLINE | HCOMM_CTX_CACHE_LIMIT;
	struct hcomm_ctx_opts arg;

	if (copy_from_user(&arg, uarg, sizeof(arg)))
		return -EFAULT;
	if ((arg.mask & ~known) || arg.reserved[0] || arg.reserved[1])
		return -EINVAL;
	if ((arg.mask & HCOMM_CTX_MAX_INLINE) &&
	    arg.max_inline > hcomm_max_inline_now())
		return -EINVAL;
	if (arg.mask & HCOMM_CTX_MAX_INLINE)
		WRITE_ONCE(ctx->max_inline, arg.max_inline);
	if (arg.mask & HCOMM_CTX_CACHE_LIMIT)
		hcomm_cache_set_limit(ctx, arg.cache_limit);
	return 0;
}

static const struct hcomm_cmd_desc hcomm_cmds[HCOMM_NR_CMDS] = {
	[_IOC_NR(HCOMM_CMD_GET_INFO)] = {
		HCOMM_CMD_GET_INFO, false, hcomm_cmd_get_info },
	[_IOC_NR(HCOMM_CMD_REG_MEM)] = {
		HCOMM_CMD_REG_MEM, true, hcomm_cmd_reg_mem },
	[_IOC_NR(HCOMM_CMD_REG_DMABUF)] = {
		HCOMM_CMD_REG_DMABUF, true, hcomm_cmd_reg_dmabuf },
	[_IOC_NR(HCOMM_CMD_DEREG)] = {
		HCOMM_CMD_DEREG, true, hcomm_cmd_dereg },
	[_IOC_NR(HCOMM_CMD_QUERY)] = {
		HCOMM_CMD_QUERY, true, hcomm_cmd_query },
	[_IOC_NR(HCOMM_CMD_XFER)] = {
		HCOMM_CMD_XFER, false, hcomm_cmd_xfer },
	[_IOC_NR(HCOMM_CMD_CANCEL)] = {
		HCOMM_CMD_CANCEL, false, hcomm_cmd_cancel },
	[_IOC_NR(HCOMM_CMD_FENCE)] = {
		HCOMM_CMD_FENCE, false, hcomm_cmd_fence },
	[_IOC_NR(HCOMM_CMD_DB_WAIT)] = {
		HCOMM_CMD_DB_WAIT, false, hcomm_cmd_db_wait },
	[_IOC_NR(HCOMM_CMD_GRANT)] = {
		HCOMM_CMD_GRANT, true, hcomm_cmd_grant },
	[_IOC_NR(HCOMM_CMD_SET_QOS)] = {
		HCOMM_CMD_SET_QOS, false, hcomm_cmd_set_qos },
	[_IOC_NR(HCOMM_CMD_SET_CTX)] = {
		HCOMM_CMD_SET_CTX, true, hcomm_cmd_set_ctx },
	[_IOC_NR(HCOMM_CMD_XFER_BATCH)] = {
		HCOMM_CMD_XFER_BATCH, false, hcomm_cmd_xfer_batch },
	[_IOC_NR(HCOMM_CMD_DB_WAIT_ANY)] = {
		HCOMM_CMD_DB_WAIT_ANY, false, hcomm_cmd_db_wait_any },
};

/*
 * Resolve @cmd: -ENOTTY when it is not an hcomm command at all, -EINVAL when
 * the number is known but the size or direction bits disagree.
 */
static const struct hcomm_cmd_desc *hcomm_cmd_find(unsigned int cmd)
{
	unsigned int nr = _IOC_NR(cmd);

	if (_IOC_TYPE(cmd) != HCOMM_IOC_MAGIC || nr >= HCOMM_NR_CMDS)
		return ERR_PTR(-ENOTTY);
	nr = array_index_nospec(nr, HCOMM_NR_CMDS);
	if (cmd != hcomm_cmds[nr].cmd)
		return ERR_PTR(-EINVAL);
	return &hcomm_cmds[nr];
}

/*
 * A context belongs to the process that opened it: only threads sharing
 * the opener's address space may issue its commands (or mmap it).  A
 * fork() child, a process that received the fd over SCM_RIGHTS, or the
 * opener after exec() gets EPERM for every command, GET_INFO included.
 */
static int hcomm_cmd_run(struct hcomm_ctx *ctx,
			 const struct hcomm_cmd_desc *desc, void __user *uarg,
			 const struct hcomm_cmd_io *io)
{
	int ret = current->mm == ctx->mm ? desc->fn(ctx, uarg, io) : -EPERM;

	/* -EAGAIN: io_uring reissues it from a worker; counted then. */
	if (ret == -EAGAIN && io->ioucmd &&
	    (io->issue_flags & IO_URING_F_NONBLOCK))
		return ret;
	atomic64_inc(&hcomm_stats.cmd[_IOC_NR(desc->cmd)]);
	if (ret && ret != -EIOCBQUEUED)
		atomic64_inc(&hcomm_stats.cmd_errors);
	return ret;
}

static const struct hcomm_cmd_io hcomm_ioctl_io;

/**
 * hcomm_ioctl() - the ioctl front.
 * @file: an open /dev/hcomm.
 * @cmd:  HCOMM_CMD_*.
 * @arg:  user pointer to the command's argument struct.
 *
 * Return: 0 or -errno.
 */
long hcomm_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	const struct hcomm_cmd_desc *desc = hcomm_cmd_find(cmd);

	atomic64_inc(&hcomm_stats.ioctls);
	if (IS_ERR(desc)) {
		atomic64_inc(&hcomm_stats.cmd_errors);
		return PTR_ERR(desc);
	}
	return hcomm_cmd_run(file->private_data, desc, (void __user *)arg,
			     &hcomm_ioctl_io);
}

/**
 * hcomm_uring_cmd() - the io_uring passthrough front.
 * @ioucmd:      the command; its SQE payload is a struct hcomm_uring_cmd.
 * @issue_flags: IO_URING_F_*.
 *
 * Commands that complete synchronously return what becomes cqe->res;
 * XFER, FENCE, DB_WAIT and DB_WAIT_ANY may return -EIOCBQUEUED and complete later
 * through io_uring_cmd_done().  With IO_URING_F_CANCEL (the ring or the
 * task is going away) the pending command is cancelled instead.
 *
 * Return: 0, -errno, -EIOCBQUEUED, or -EAGAIN to be reissued from a
 * blocking worker.
 */
int hcomm_uring_cmd(struct io_uring_cmd *ioucmd, unsigned int issue_flags)
{
	const struct hcomm_uring_cmd *pl;
	const struct hcomm_cmd_desc *desc;
	struct hcomm_cmd_io io = { ioucmd, issue_flags };
	u64 addr;
	u32 size, flags;
	int ret;

	if (hcomm_uring_is_cancel(issue_flags)) {
		hcomm_uring_cancel(ioucmd);
		return 0;
	}
	desc = hcomm_cmd_find(ioucmd->cmd_op);

	/* Counted once per command: not on the -EAGAIN that io-wq reissues. */
	if (!IS_ERR(desc) && desc->may_sleep &&
	    (issue_flags & IO_URING_F_NONBLOCK))
		return -EAGAIN;
	pl = hcomm_uring_payload(ioucmd, issue_flags);
	atomic64_inc(&hcomm_stats.uring_cmds);
	if (IS_ERR(desc)) {
		atomic64_inc(&hcomm_stats.cmd_errors);
		return PTR_ERR(desc);
	}

	/* The SQE is shared with userspace: read each field exactly once. */
	addr = READ_ONCE(pl->addr);
	size = READ_ONCE(pl->size);
	flags = READ_ONCE(pl->flags);
	if (flags || size != _IOC_SIZE(desc->cmd)) {
		atomic64_inc(&hcomm_stats.cmd_errors);
		return -EINVAL;
	}
	ret = hcomm_cmd_run(ioucmd->file->private_data, desc,
			    u64_to_user_ptr(addr), &io);
	/* punted after all (a fenced dma-buf XFER): counted on reissue */
	if (ret == -EAGAIN && (issue_flags & IO_URING_F_NONBLOCK))
		atomic64_dec(&hcomm_stats.uring_cmds);
	return ret;
}
