// SPDX-License-Identifier: GPL-2.0
/*
 * Memory registration: pinning host pages, importing dma-bufs, and the
 * lifetime of the resulting regions.
 *
 * Host memory is charged to the caller's RLIMIT_MEMLOCK (user->locked_vm,
 * and mm->pinned_vm for reporting) before anything is pinned, pinned with
 * FOLL_LONGTERM in batches of one page worth of page pointers, and recorded
 * only in the VAT->PAT table: unpinning walks the extents.  Every function here may sleep.
 */
#include <linux/mm.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
#include <linux/dma-direction.h>
#include <linux/scatterlist.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/sched/user.h>
#include <linux/overflow.h>
#include <linux/uaccess.h>

#include "hcomm.h"

static int hcomm_check_access(u32 access)
{
	if (access & ~HCOMM_ACCESS_ALL)
		return -EINVAL;
	if ((access & HCOMM_ACCESS_REMOTE_WRITE) &&
	    !(access & HCOMM_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	return 0;
}

static struct hcomm_region *hcomm_region_alloc(u32 type, u32 access)
{
	struct hcomm_region *r;

	r = kzalloc(sizeof(*r), GFP_KERNEL_ACCOUNT);
	if (!r)
		return NULL;
	kref_init(&r->ref);
	INIT_HLIST_NODE(&r->key_node);
	hcomm_vat_init(&r->vat);
	r->type = type;
	r->access = access;
	r->state = HCOMM_STATE_ACTIVE;
	r->key = hcomm_key_new();
	return r;
}

/*
 * Charge @r->nr_pages to RLIMIT_MEMLOCK.  The limit is enforced on the
 * caller's user (user->locked_vm, as io_uring does), not only on its mm:
 * a region outlives the mm that registered it when the file is passed on
 * or kept across exec, and a per-mm budget would then start afresh.
 * mm->pinned_vm is charged as well, as RDMA's ib_umem does, so the pages
 * show as VmPin in /proc/<pid>/status.  CAP_IPC_LOCK lifts the limit but
 * the pages are still counted.
 */
static int hcomm_memlock_charge(struct hcomm_region *r, struct mm_struct *mm)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	struct user_struct *user = current_user();
	unsigned long npages = r->nr_pages, cur, new;

	cur = atomic_long_read(&user->locked_vm);
	do {
		if (check_add_overflow(cur, npages, &new))
			return -ENOMEM;
		if (new > limit && !ns_capable_noaudit(&init_user_ns,
						       CAP_IPC_LOCK))
			return -ENOMEM;
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, new));

	r->user = get_uid(user);
	mmgrab(mm);
	r->mm = mm;
	atomic64_add(npages, &mm->pinned_vm);
	atomic64_add(npages, &hcomm_stats.memlock_pages);
	return 0;
}

static void hcomm_memlock_uncharge(struct hcomm_region *r)
{
	atomic_long_sub(r->nr_pages, &r->user->locked_vm);
	free_uid(r->user);
	atomic64_sub(r->nr_pages, &r->mm->pinned_vm);
	mmdrop(r->mm);
	atomic64_sub(r->nr_pages, &hcomm_stats.memlock_pages);
}

/* Unpin every page the VAT->PAT table records. */
static void hcomm_mr_unpin(struct hcomm_region *r)
{
	bool dirty = r->access & HCOMM_ACCESS_LOCAL_WRITE;
	u64 i;

	for (i = 0; i < r->vat.nr; i++) {
		const struct hcomm_vat_extent *e = &r->vat.ext[i];

		unpin_user_page_range_dirty_lock(pfn_to_page(PHYS_PFN(e->addr)),
						 e->npages, dirty);
		cond_resched();
	}
	atomic64_sub(r->vat.npages, &hcomm_stats.pinned_pages);
}

/* Record @n freshly pinned pages, coalescing physically contiguous runs. */
static int hcomm_mr_record(struct hcomm_region *r, struct page **pages, int n)
{
	int i = 0, j, ret;

	while (i < n) {
		unsigned long pfn = page_to_pfn(pages[i]);

		for (j = i + 1; j < n; j++)
			if (page_to_pfn(pages[j]) != pfn + (j - i))
				break;
		ret = hcomm_vat_append(&r->vat, PFN_PHYS(pfn), j - i);
		if (ret) {
			/* Pages before i are in the table; drop the rest. */
			unpin_user_pages(pages + i, n - i);
			atomic64_sub(n - i, &hcomm_stats.pinned_pages);
			return ret;
		}
		i = j;
	}
	return 0;
}

/*
 * Pin @npages pages from @start in batches.  On failure the pages pinned so
 * far are in r->vat and the caller unpins them with hcomm_mr_unpin().
 */
static int hcomm_mr_pin(struct hcomm_region *r, u64 start, u64 npages)
{
	unsigned int gup_flags = FOLL_LONGTERM;
	const int batch = PAGE_SIZE / sizeof(struct page *);
	struct page **pages;
	u64 done = 0;
	int ret = 0;

	if (r->access & HCOMM_ACCESS_LOCAL_WRITE)
		gup_flags |= FOLL_WRITE;
	pages = (struct page **)__get_free_page(GFP_KERNEL);
	if (!pages)
		return -ENOMEM;

	while (done < npages) {
		int n = min_t(u64, npages - done, batch);

		ret = pin_user_pages_fast(start + done * PAGE_SIZE, n,
					  gup_flags, pages);
		if (ret <= 0) {
			ret = ret ? ret : -EFAULT;
			break;
		}
		atomic64_add(ret, &hcomm_stats.pinned_pages);
		done += ret;
		ret = hcomm_mr_record(r, pages, ret);
		if (ret)
			break;
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			break;
		}
		cond_resched();
	}
	free_page((unsigned long)pages);
	return ret;
}

/*
 * Reserve a region id before any work is done, so that a context at
 * max_regions fails fast and a finished registration cannot fail to insert.
 * A reserved slot reads as NULL: lookups and DEREG do not see it.
 */
static int hcomm_region_reserve(struct hcomm_ctx *ctx, struct hcomm_region *r)
{
	int ret;

	ret = xa_alloc(&ctx->regions, &r->id, NULL,
		       XA_LIMIT(1, READ_ONCE(hcomm_max_regions)),
		       GFP_KERNEL_ACCOUNT);
	return ret == -EBUSY ? -ENOSPC : ret;
}

/*
 * Publish @r under its reserved id and key.  Fills @id and @key for
 * userspace and returns with a reference for the caller, who may still
 * need @r (to undo the registration) after a DEREG guessing the id.
 */
static void hcomm_region_commit(struct hcomm_ctx *ctx, struct hcomm_region *r,
				u32 *id, u64 *key)
{
	hcomm_key_publish(r);
	*id = r->id;
	*key = r->key;
	kref_get(&r->ref);
	atomic_inc(&ctx->nr_regions);
	if (r->type == HCOMM_REGION_HOST)
		atomic64_add(r->nr_pages, &ctx->pinned_pages);
	atomic64_inc(&hcomm_stats.regions);
	atomic64_inc(r->type == HCOMM_REGION_HOST ?
		     &hcomm_stats.host_regions : &hcomm_stats.dmabuf_regions);
	/* The slot is reserved: storing allocates nothing and cannot fail. */
	xa_store(&ctx->regions, r->id, r, GFP_KERNEL_ACCOUNT);
}

/*
 * Remove region @id from @ctx's table (only if it is @want, when given)
 * and revoke its key.  Returns the region, whose table reference the caller
 * now owns, or NULL.
 */
static struct hcomm_region *hcomm_region_unlink(struct hcomm_ctx *ctx, u32 id,
						struct hcomm_region *want)
{
	struct hcomm_region *r;

	xa_lock(&ctx->regions);
	r = xa_load(&ctx->regions, id);
	if (r && (!want || r == want))
		__xa_erase(&ctx->regions, id);
	else
		r = NULL;
	xa_unlock(&ctx->regions);
	if (!r)
		return NULL;
	atomic_dec(&ctx->nr_regions);
	if (r->type == HCOMM_REGION_HOST)
		atomic64_sub(r->nr_pages, &ctx->pinned_pages);
	hcomm_key_revoke(r);
	return r;
}

/**
 * hcomm_region_undo() - deregister @r if it is still in @ctx's table.
 * @ctx: context that registered @r.
 * @r:   region returned by hcomm_reg_mem() or hcomm_reg_dmabuf().
 *
 * Used when the answer cannot be copied to userspace.  Matching by pointer
 * (not by id) means a concurrent DEREG and re-registration of the same id
 * by another thread is never undone by mistake.
 */
void hcomm_region_undo(struct hcomm_ctx *ctx, struct hcomm_region *r)
{
	struct hcomm_region *found = hcomm_region_unlink(ctx, r->id, r);

	if (found)
		hcomm_region_put(found);
}

/**
 * hcomm_reg_mem() - pin a user range and register it in @ctx.
 * @ctx: the caller's context.
 * @arg: validated copy of the user's argument; region and key are filled.
 * @out: the new region, with a reference the caller must put.
 *
 * Return: 0 or -errno (see uapi/linux/hcomm.h); on error nothing stays
 * pinned or charged.
 */
int hcomm_reg_mem(struct hcomm_ctx *ctx, struct hcomm_reg_mem *arg,
		  struct hcomm_region **out)
{
	struct hcomm_region *r;
	u64 first, npages;
	u32 offset;
	int ret;

	if (arg->flags || arg->reserved0 || arg->reserved[0] ||
	    arg->reserved[1])
		return -EINVAL;
	ret = hcomm_check_access(arg->access);
	if (ret)
		return ret;
	ret = hcomm_range_check(arg->addr, arg->len,
				READ_ONCE(hcomm_max_region_size),
				&first, &npages, &offset);
	if (ret)
		return ret;
	if (!access_ok(u64_to_user_ptr(arg->addr), arg->len))
		return -EFAULT;
	if (current->mm != ctx->mm)
		return -EPERM;

	r = hcomm_region_alloc(HCOMM_REGION_HOST, arg->access);
	if (!r)
		return -ENOMEM;
	r->addr = arg->addr;
	r->len = arg->len;
	r->offset = offset;
	r->nr_pages = npages;

	ret = hcomm_region_reserve(ctx, r);
	if (ret)
		goto err_free;
	ret = hcomm_memlock_charge(r, ctx->mm);
	if (ret)
		goto err_release_id;

	ret = hcomm_mr_pin(r, first, npages);
	if (ret)
		goto err_unpin;
	hcomm_region_commit(ctx, r, &arg->region, &arg->key);
	*out = r;
	return 0;

err_unpin:
	hcomm_mr_unpin(r);
	hcomm_memlock_uncharge(r);
err_release_id:
	xa_release(&ctx->regions, r->id);
err_free:
	hcomm_vat_free(&r->vat);
	kfree(r);
	return ret;
}

static void hcomm_dmabuf_invalidate(struct dma_buf_attachment *attach)
{
	struct hcomm_region *r = attach->importer_priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (r->sgt) {
		dma_buf_unmap_attachment(attach, r->sgt, DMA_BIDIRECTIONAL);
		r->sgt = NULL;
	}
	WRITE_ONCE(r->state, HCOMM_STATE_INVALID);
}

static void hcomm_dmabuf_pinned_move(struct dma_buf_attachment *attach)
{
	/* A pinned attachment must never move; the exporter is broken. */
	pr_warn_ratelimited("hcomm: exporter moved a pinned dma-buf\n");
}

/* Dynamic attachment: the exporter may move the buffer; we invalidate. */
static const struct dma_buf_attach_ops hcomm_dmabuf_dynamic_ops = {
	.allow_peer2peer = true,
	.move_notify = hcomm_dmabuf_invalidate,
};

/* Pinned attachment, as RDMA's ib_umem_dmabuf_get_pinned() uses. */
static const struct dma_buf_attach_ops hcomm_dmabuf_pinned_ops = {
	.allow_peer2peer = true,
	.move_notify = hcomm_dmabuf_pinned_move,
};

static bool hcomm_dmabuf_dynamic(void)
{
	return IS_ENABLED(CONFIG_DMABUF_MOVE_NOTIFY);
}

/* Build the table from the DMA segments covering [offset, offset + len). */
static int hcomm_dmabuf_record(struct hcomm_region *r, u64 offset)
{
	u64 skip = offset, want = r->nr_pages << PAGE_SHIFT;
	struct scatterlist *sg;
	int i, ret;

	for_each_sgtable_dma_sg(r->sgt, sg, i) {
		u64 addr = sg_dma_address(sg), len = sg_dma_len(sg);

		if (!(i & 1023))
			cond_resched();

		if (skip >= len) {
			skip -= len;
			continue;
		}
		addr += skip;
		len = min(len - skip, want);
		skip = 0;
		if (!PAGE_ALIGNED(addr) || !PAGE_ALIGNED(len))
			return -EINVAL;
		ret = hcomm_vat_append(&r->vat, addr, len >> PAGE_SHIFT);
		if (ret)
			return ret;
		want -= len;
		if (!want)
			return 0;
	}
	return -EINVAL;
}

static int hcomm_dmabuf_map(struct hcomm_region *r, u64 offset)
{
	struct dma_buf_attachment *attach = r->attach;
	struct sg_table *sgt;
	long wait;
	int ret;

	dma_resv_lock(attach->dmabuf->resv, NULL);
	if (!hcomm_dmabuf_dynamic()) {
		ret = dma_buf_pin(attach);
		if (ret)
			goto out_unlock;
	}
	sgt = dma_buf_map_attachment(attach, DMA_BIDIRECTIONAL);
	if (IS_ERR(sgt)) {
		ret = PTR_ERR(sgt);
		goto err_unpin;
	}
	r->sgt = sgt;
	ret = hcomm_dmabuf_record(r, offset);
	if (ret)
		goto err_unmap;
	/* The exporter may still be moving the buffer into place. */
	wait = dma_resv_wait_timeout(attach->dmabuf->resv,
				     DMA_RESV_USAGE_KERNEL, true,
				     MAX_SCHEDULE_TIMEOUT);
	if (wait <= 0) {
		ret = wait ? wait : -ETIMEDOUT;
		goto err_unmap;
	}
	/* A move_notify between attach and map may have invalidated it. */
	WRITE_ONCE(r->state, HCOMM_STATE_ACTIVE);
	dma_resv_unlock(attach->dmabuf->resv);
	return 0;

err_unmap:
	dma_buf_unmap_attachment(attach, sgt, DMA_BIDIRECTIONAL);
	r->sgt = NULL;
err_unpin:
	if (!hcomm_dmabuf_dynamic())
		dma_buf_unpin(attach);
out_unlock:
	dma_resv_unlock(attach->dmabuf->resv);
	return ret;
}

static void hcomm_dmabuf_unmap(struct hcomm_region *r)
{
	struct dma_buf_attachment *attach = r->attach;

	dma_resv_lock(attach->dmabuf->resv, NULL);
	if (r->sgt)
		dma_buf_unmap_attachment(attach, r->sgt, DMA_BIDIRECTIONAL);
	r->sgt = NULL;
	if (!hcomm_dmabuf_dynamic())
		dma_buf_unpin(attach);
	dma_resv_unlock(attach->dmabuf->resv);
}

/**
 * hcomm_reg_dmabuf() - import a range of a dma-buf and register it.
 * @ctx: the caller's context.
 * @arg: validated copy of the user's argument; region and key are filled.
 * @out: the new region, with a reference the caller must put.
 *
 * With CONFIG_DMABUF_MOVE_NOTIFY the attachment is dynamic and a move
 * invalidates the region (state HCOMM_STATE_INVALID); otherwise the buffer
 * is pinned for the region's lifetime.
 *
 * Return: 0 or -errno (see uapi/linux/hcomm.h).
 */
int hcomm_reg_dmabuf(struct hcomm_ctx *ctx, struct hcomm_reg_dmabuf *arg,
		     struct hcomm_region **out)
{
	const struct dma_buf_attach_ops *ops;
	struct hcomm_region *r;
	struct dma_buf *dmabuf;
	u64 end;
	int ret;

	if (arg->flags || arg->reserved[0] || arg->reserved[1])
		return -EINVAL;
	ret = hcomm_check_access(arg->access);
	if (ret)
		return ret;
	if (!arg->len || !PAGE_ALIGNED(arg->offset))
		return -EINVAL;
	if (arg->len > READ_ONCE(hcomm_max_region_size))
		return -E2BIG;

	dmabuf = dma_buf_get(arg->fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	if (check_add_overflow(arg->offset, arg->len, &end) ||
	    end > dmabuf->size) {
		ret = -EINVAL;
		goto err_put;
	}

	r = hcomm_region_alloc(HCOMM_REGION_DMABUF, arg->access);
	if (!r) {
		ret = -ENOMEM;
		goto err_put;
	}
	r->addr = arg->offset;
	r->len = arg->len;
	r->nr_pages = DIV_ROUND_UP(arg->len, PAGE_SIZE);
	r->dmabuf = dmabuf;
	ret = hcomm_region_reserve(ctx, r);
	if (ret)
		goto err_free;

	ops = hcomm_dmabuf_dynamic() ? &hcomm_dmabuf_dynamic_ops :
				       &hcomm_dmabuf_pinned_ops;
	r->attach = dma_buf_dynamic_attach(dmabuf, ctx->dev, ops, r);
	if (IS_ERR(r->attach)) {
		ret = PTR_ERR(r->attach);
		goto err_release_id;
	}
	ret = hcomm_dmabuf_map(r, arg->offset);
	if (ret)
		goto err_detach;
	hcomm_region_commit(ctx, r, &arg->region, &arg->key);
	*out = r;
	return 0;

err_detach:
	dma_buf_detach(dmabuf, r->attach);
err_release_id:
	xa_release(&ctx->regions, r->id);
err_free:
	hcomm_vat_free(&r->vat);
	kfree(r);
err_put:
	dma_buf_put(dmabuf);
	return ret;
}

static void hcomm_region_release(struct kref *ref)
{
	struct hcomm_region *r = container_of(ref, struct hcomm_region, ref);

	hcomm_key_revoke(r);
	if (r->type == HCOMM_REGION_HOST) {
		hcomm_mr_unpin(r);
		hcomm_memlock_uncharge(r);
		atomic64_dec(&hcomm_stats.host_regions);
	} else {
		hcomm_dmabuf_unmap(r);
		dma_buf_detach(r->dmabuf, r->attach);
		dma_buf_put(r->dmabuf);
		atomic64_dec(&hcomm_stats.dmabuf_regions);
	}
	atomic64_dec(&hcomm_stats.regions);
	hcomm_vat_free(&r->vat);
	kfree(r);
}

/**
 * hcomm_region_get() - look up region @id of @ctx and take a reference.
 * @ctx: context.
 * @id:  region id.
 *
 * Return: the region (release with hcomm_region_put()) or NULL.
 */
struct hcomm_region *hcomm_region_get(struct hcomm_ctx *ctx, u32 id)
{
	struct hcomm_region *r;

	xa_lock(&ctx->regions);
	r = xa_load(&ctx->regions, id);
	if (r)
		kref_get(&r->ref);
	xa_unlock(&ctx->regions);
	return r;
}

/**
 * hcomm_region_put() - drop a reference; the last one releases the memory.
 * @r: region.  Must be called from process context.
 */
void hcomm_region_put(struct hcomm_region *r)
{
	might_sleep();
	kref_put(&r->ref, hcomm_region_release);
}

/**
 * hcomm_dereg() - remove region @id from @ctx and revoke its key.
 * @ctx: context.
 * @id:  region id.
 *
 * Return: 0, or -ENOENT when @ctx has no such region.
 */
int hcomm_dereg(struct hcomm_ctx *ctx, u32 id)
{
	struct hcomm_region *r = hcomm_region_unlink(ctx, id, NULL);

	if (!r)
		return -ENOENT;
	hcomm_region_put(r);
	return 0;
}

/**
 * hcomm_ctx_release_regions() - deregister everything @ctx still holds.
 * @ctx: a context being closed; no command can be running on it.
 */
void hcomm_ctx_release_regions(struct hcomm_ctx *ctx)
{
	struct hcomm_region *r;
	unsigned long id;

	xa_for_each(&ctx->regions, id, r) {
		r = hcomm_region_unlink(ctx, id, r);
		if (r)
			hcomm_region_put(r);
		cond_resched();
	}
	xa_destroy(&ctx->regions);
}
