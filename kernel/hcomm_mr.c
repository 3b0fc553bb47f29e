// SPDX-License-Identifier: GPL-2.0
/*
 * Memory registration: pinning host pages, importing dma-bufs, and the
 * lifetime of the resulting regions.
 *
 * Host memory is charged to the caller's RLIMIT_MEMLOCK (user->locked_vm,
 * and mm->pinned_vm for reporting) before anything is pinned, pinned with
 * FOLL_LONGTERM in batches of one page worth of page pointers, and recorded
 * only in the VAT->PAT table: unpinning walks the extents.
 *
 * Pinned host ranges (struct hcomm_umem) are the registration cache of
 * their context: a registration inside a range the context holds with
 * enough access shares it, and a range whose last region goes stays
 * pinned in an LRU up to the context's cache_limit.  An mmu interval
 * notifier on every cacheable range marks it stale as soon as the mapping
 * changes, so the cache never hands out pages that are no longer mapped at
 * the address.  Every function here may sleep, except the notifier.
 */
#include <linux/mm.h>
#include <linux/backing-dev.h>
#include <linux/pagemap.h>
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
#include "hcomm_compat.h"

static int hcomm_check_access(u32 access)
{
	if (access & ~HCOMM_ACCESS_ALL)
		return -EINVAL;
	if ((access & HCOMM_ACCESS_REMOTE_WRITE) &&
	    !(access & HCOMM_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	return 0;
}

static struct hcomm_region *hcomm_region_alloc(struct hcomm_ctx *ctx,
					       u32 type, u32 access)
{
	struct hcomm_region *r;

	r = kzalloc(sizeof(*r), GFP_KERNEL_ACCOUNT);
	if (!r)
		return NULL;
	kref_init(&r->ref);
	INIT_LIST_HEAD(&r->umem_node);
	hcomm_vat_init(&r->vat);
	r->type = type;
	r->access = access;
	r->state = HCOMM_STATE_ACTIVE;
	r->key = hcomm_key_new();
	r->grant = hcomm_grant_word(HCOMM_GRANT_NONE, 0, GLOBAL_ROOT_UID);
	/* In the key table now (not yet found: @live), so commit cannot fail. */
	if (hcomm_key_publish(r)) {
		kfree(r);
		return NULL;
	}
	hcomm_ctx_get(ctx);
	r->ctx = ctx;
	return r;
}

static void hcomm_region_free(struct hcomm_region *r)
{
	hcomm_key_revoke(r);
	hcomm_vat_free(&r->vat);
	hcomm_ctx_put(r->ctx);
	/* A lockless key lookup may still be looking at it. */
	kfree_rcu(r, rcu);
}

/*
 * Charge @um->npages to RLIMIT_MEMLOCK.  The limit is enforced on the
 * caller's user (user->locked_vm, as io_uring does), not only on its mm:
 * a region outlives the mm that registered it when the file is passed on
 * or kept across exec, and a per-mm budget would then start afresh.
 * mm->pinned_vm is charged as well, as RDMA's ib_umem does, so the pages
 * show as VmPin in /proc/<pid>/status.  CAP_IPC_LOCK lifts the limit but
 * the pages are still counted.
 */
static int hcomm_memlock_charge(struct hcomm_umem *um, struct mm_struct *mm)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	struct user_struct *user = current_user();
	unsigned long npages = um->npages, cur, new;

	cur = atomic_long_read(&user->locked_vm);
	do {
		if (check_add_overflow(cur, npages, &new))
			return -ENOMEM;
		if (new > limit && !ns_capable_noaudit(&init_user_ns,
						       CAP_IPC_LOCK))
			return -ENOMEM;
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, new));

	um->user = get_uid(user);
	mmgrab(mm);
	um->mm = mm;
	atomic64_add(npages, &mm->pinned_vm);
	atomic64_add(npages, &hcomm_stats.memlock_pages);
	return 0;
}

static void hcomm_memlock_uncharge(struct hcomm_umem *um)
{
	atomic_long_sub(um->npages, &um->user->locked_vm);
	free_uid(um->user);
	atomic64_sub(um->npages, &um->mm->pinned_vm);
	mmdrop(um->mm);
	atomic64_sub(um->npages, &hcomm_stats.memlock_pages);
}

/* Unpin every page the VAT->PAT table records. */
static void hcomm_umem_unpin(struct hcomm_umem *um)
{
	u64 i;

	for (i = 0; i < um->vat.nr; i++) {
		const struct hcomm_vat_extent *e = &um->vat.ext[i];

		unpin_user_page_range_dirty_lock(pfn_to_page(PHYS_PFN(e->addr)),
						 e->npages, um->writable);
		cond_resched();
	}
	atomic64_sub(um->vat.npages, &hcomm_stats.pinned_pages);
}

/* Record @n freshly pinned pages, coalescing physically contiguous runs. */
static int hcomm_umem_record(struct hcomm_umem *um, struct page **pages, int n)
{
	int i = 0, j, ret;

	while (i < n) {
		unsigned long pfn = page_to_pfn(pages[i]);

		for (j = i + 1; j < n; j++)
			if (page_to_pfn(pages[j]) != pfn + (j - i))
				break;
		ret = hcomm_vat_append(&um->vat, PFN_PHYS(pfn), j - i);
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
 * Pin the pages of @um in batches.  On failure the pages pinned so far are
 * in um->vat and the caller unpins them with hcomm_umem_unpin().
 */
/*
 * Would writing through a long-term pin of @pages bypass the page cache's
 * dirty tracking?  True for file pages whose mapping writes back (ext4,
 * xfs, ...: a MAP_SHARED file mapping); anonymous, shmem/memfd, hugetlb
 * and ramfs pages are fine.  Checked on what was pinned, so no race with
 * a concurrent mmap() can slip a file page in.
 */
static bool hcomm_pages_need_writeback(struct page **pages, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		struct folio *folio = page_folio(pages[i]);
		struct address_space *mapping;

		if (folio_test_anon(folio))
			continue;
		mapping = folio_mapping(folio);
		if (mapping && mapping_can_writeback(mapping))
			return true;
	}
	return false;
}

/* Is @addr in a MAP_SHARED mapping of a file that writes back? */
static bool hcomm_addr_file_shared(unsigned long addr)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	bool ret = false;

	mmap_read_lock(mm);
	vma = vma_lookup(mm, addr);
	if (vma && vma->vm_file && (vma->vm_flags & VM_SHARED) &&
	    mapping_can_writeback(vma->vm_file->f_mapping))
		ret = true;
	mmap_read_unlock(mm);
	return ret;
}

static int hcomm_umem_pin(struct hcomm_umem *um)
{
	unsigned int gup_flags = FOLL_LONGTERM;
	const int batch = PAGE_SIZE / sizeof(struct page *);
	struct page **pages;
	u64 done = 0;
	int ret = 0;

	if (um->writable)
		gup_flags |= FOLL_WRITE;
	pages = (struct page **)__get_free_page(GFP_KERNEL);
	if (!pages)
		return -ENOMEM;

	while (done < um->npages) {
		int n = min_t(u64, um->npages - done, batch);

		ret = pin_user_pages_fast(um->start + done * PAGE_SIZE, n,
					  gup_flags, pages);
		if (ret <= 0) {
			ret = ret ? ret : -EFAULT;
			/* kernels whose GUP refuses these say EFAULT */
			if (ret == -EFAULT && um->writable &&
			    hcomm_addr_file_shared(um->start + done * PAGE_SIZE))
				ret = -EOPNOTSUPP;
			break;
		}
		/* What io_uring and newer GUP refuse: EOPNOTSUPP, as they do. */
		if (um->writable && hcomm_pages_need_writeback(pages, ret)) {
			unpin_user_pages(pages, ret);
			ret = -EOPNOTSUPP;
			break;
		}
		atomic64_add(ret, &hcomm_stats.pinned_pages);
		done += ret;
		ret = hcomm_umem_record(um, pages, ret);
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

/**
 * hcomm_gen_bump() - change generation slot @id of @ctx.
 * @ctx: context.
 * @id:  region id; the slot is @id % HCOMM_GEN_SLOTS.
 *
 * Caller holds ctx->inval_lock.
 */
void hcomm_gen_bump(struct hcomm_ctx *ctx, u32 id)
{
	u64 *slot = &ctx->gen[id % HCOMM_GEN_SLOTS];

	lockdep_assert_held(&ctx->inval_lock);
	WRITE_ONCE(*slot, *slot + 1);
}

/*
 * The mapping under a pinned range changed (munmap, mremap, madvise,
 * fork's write protection, ...): the pages we hold are no longer what the
 * address shows, so the range must never satisfy a registration again,
 * and the regions on it see their generation change.  May run in any
 * context the mm core invalidates from: only the spinlock is taken.
 */
static bool hcomm_umem_invalidate(struct mmu_interval_notifier *mni,
				  const struct mmu_notifier_range *range,
				  unsigned long cur_seq)
{
	struct hcomm_umem *um = container_of(mni, struct hcomm_umem, notifier);
	struct hcomm_ctx *ctx = um->ctx;
	struct hcomm_region *r;

	spin_lock(&ctx->inval_lock);
	mmu_interval_set_seq(mni, cur_seq);
	if (!um->stale) {
		WRITE_ONCE(um->stale, true);
		if (um->cacheable)
			atomic64_inc(&hcomm_stats.cache_invalidations);
		list_for_each_entry(r, &um->regions, umem_node)
			hcomm_gen_bump(ctx, r->id);
	}
	spin_unlock(&ctx->inval_lock);
	return true;
}

static const struct mmu_interval_notifier_ops hcomm_umem_mn_ops = {
	.invalidate = hcomm_umem_invalidate,
};

/* Release a range nobody uses and that is no longer in the cache. */
static void hcomm_umem_free(struct hcomm_umem *um)
{
	if (um->notifier_ok)
		mmu_interval_notifier_remove(&um->notifier);
	hcomm_umem_unpin(um);
	atomic64_sub(um->npages, &um->ctx->pinned_pages);
	hcomm_memlock_uncharge(um);
	hcomm_vat_free(&um->vat);
	atomic64_dec(&hcomm_stats.umems);
	kfree(um);
}

/* Take @um out of the tree and, when it is there, the LRU. */
static void hcomm_umem_unlink(struct hcomm_ctx *ctx, struct hcomm_umem *um)
{
	lockdep_assert_held(&ctx->cache_lock);
	interval_tree_remove(&um->it, &ctx->cache_tree);
	if (!list_empty(&um->lru)) {
		list_del_init(&um->lru);
		ctx->cache_bytes -= um->npages << PAGE_SHIFT;
		atomic64_sub(um->npages << PAGE_SHIFT, &hcomm_stats.cache_bytes);
	}
}

/*
 * Move LRU entries to @out until the LRU holds at most @limit bytes;
 * stale entries go first whatever the limit.
 */
static void hcomm_cache_trim(struct hcomm_ctx *ctx, u64 limit,
			     struct list_head *out, bool count)
{
	struct hcomm_umem *um, *tmp;

	lockdep_assert_held(&ctx->cache_lock);
	list_for_each_entry_safe(um, tmp, &ctx->lru, lru) {
		if (READ_ONCE(um->stale)) {
			hcomm_umem_unlink(ctx, um);
			list_add_tail(&um->lru, out);
		}
	}
	list_for_each_entry_safe(um, tmp, &ctx->lru, lru) {
		if (ctx->cache_bytes <= limit)
			break;
		hcomm_umem_unlink(ctx, um);
		list_add_tail(&um->lru, out);
		if (count)
			atomic64_inc(&hcomm_stats.cache_evictions);
	}
}

static void hcomm_umem_free_list(struct list_head *list)
{
	struct hcomm_umem *um, *tmp;

	list_for_each_entry_safe(um, tmp, list, lru) {
		list_del(&um->lru);
		hcomm_umem_free(um);
		cond_resched();
	}
}

/* A cached range covering [start, start + npages) with enough access. */
static struct hcomm_umem *hcomm_cache_find(struct hcomm_ctx *ctx, u64 start,
					   u64 npages, bool writable)
{
	u64 last = start + (npages << PAGE_SHIFT) - 1;
	struct interval_tree_node *it;

	lockdep_assert_held(&ctx->cache_lock);
	for (it = interval_tree_iter_first(&ctx->cache_tree, start, last); it;
	     it = interval_tree_iter_next(it, start, last)) {
		struct hcomm_umem *um = container_of(it, struct hcomm_umem, it);

		if (it->start <= start && it->last >= last && um->cacheable &&
		    !READ_ONCE(um->stale) && (um->writable || !writable))
			return um;
	}
	return NULL;
}

/* Cache lookup; on a hit the range gains a user and leaves the LRU. */
static struct hcomm_umem *hcomm_cache_get(struct hcomm_ctx *ctx, u64 start,
					  u64 npages, bool writable)
{
	struct hcomm_umem *um;
	LIST_HEAD(dead);

	mutex_lock(&ctx->cache_lock);
	hcomm_cache_trim(ctx, ctx->cache_bytes, &dead, false);
	um = hcomm_cache_find(ctx, start, npages, writable);
	if (um) {
		if (!list_empty(&um->lru)) {
			list_del_init(&um->lru);
			ctx->cache_bytes -= um->npages << PAGE_SHIFT;
			atomic64_sub(um->npages << PAGE_SHIFT,
				     &hcomm_stats.cache_bytes);
		}
		um->users++;
	}
	mutex_unlock(&ctx->cache_lock);
	hcomm_umem_free_list(&dead);
	return um;
}

/* Give back every cached range of @ctx (memlock pressure). */
static bool hcomm_cache_shrink(struct hcomm_ctx *ctx)
{
	LIST_HEAD(dead);

	mutex_lock(&ctx->cache_lock);
	hcomm_cache_trim(ctx, 0, &dead, true);
	mutex_unlock(&ctx->cache_lock);
	if (list_empty(&dead))
		return false;
	hcomm_umem_free_list(&dead);
	return true;
}

/* Pin a new range for @ctx and put it in the cache tree with one user. */
static int hcomm_umem_create(struct hcomm_ctx *ctx, u64 start, u64 npages,
			     bool writable, bool cacheable,
			     struct hcomm_umem **out)
{
	struct hcomm_umem *um;
	unsigned long seq = 0;
	int ret;

	um = kzalloc(sizeof(*um), GFP_KERNEL_ACCOUNT);
	if (!um)
		return -ENOMEM;
	um->ctx = ctx;
	um->start = start;
	um->npages = npages;
	um->writable = writable;
	um->cacheable = cacheable;
	um->users = 1;
	INIT_LIST_HEAD(&um->lru);
	INIT_LIST_HEAD(&um->regions);
	hcomm_vat_init(&um->vat);
	um->it.start = start;
	um->it.last = start + (npages << PAGE_SHIFT) - 1;

	ret = hcomm_memlock_charge(um, ctx->mm);
	if (ret == -ENOMEM && hcomm_cache_shrink(ctx))
		ret = hcomm_memlock_charge(um, ctx->mm);
	if (ret)
		goto err_free;

	/*
	 * Watch the range before pinning it: a change while pinning is seen
	 * by mmu_interval_read_retry() and keeps the range out of the cache.
	 * Every range is watched, NOCACHE ones too: the notifier is what bumps
	 * the generation slots when the mapping changes, and the uapi promises
	 * that for every region.  No watch, no registration.
	 */
	ret = mmu_interval_notifier_insert(&um->notifier, ctx->mm, start,
					   npages << PAGE_SHIFT,
					   &hcomm_umem_mn_ops);
	if (ret)
		goto err_uncharge;
	um->notifier_ok = true;
	seq = mmu_interval_read_begin(&um->notifier);
	ret = hcomm_umem_pin(um);
	if (ret)
		goto err_unpin;

	mutex_lock(&ctx->cache_lock);
	spin_lock(&ctx->inval_lock);
	if (um->notifier_ok && mmu_interval_read_retry(&um->notifier, seq))
		um->stale = true;
	spin_unlock(&ctx->inval_lock);
	interval_tree_insert(&um->it, &ctx->cache_tree);
	mutex_unlock(&ctx->cache_lock);
	atomic64_add(npages, &ctx->pinned_pages);
	atomic64_inc(&hcomm_stats.umems);
	*out = um;
	return 0;

err_unpin:
	mmu_interval_notifier_remove(&um->notifier);
	hcomm_umem_unpin(um);
err_uncharge:
	hcomm_memlock_uncharge(um);
err_free:
	hcomm_vat_free(&um->vat);
	kfree(um);
	return ret;
}

/*
 * A region stopped using @um.  The last user either parks it in the LRU
 * (the next registration of the range is a hit) or frees it.
 */
static void hcomm_umem_put(struct hcomm_umem *um, bool keep)
{
	struct hcomm_ctx *ctx = um->ctx;
	u64 bytes = um->npages << PAGE_SHIFT;
	LIST_HEAD(dead);

	mutex_lock(&ctx->cache_lock);
	if (--um->users) {
		mutex_unlock(&ctx->cache_lock);
		return;
	}
	if (keep && um->cacheable && !READ_ONCE(um->stale) && !ctx->closed &&
	    bytes <= ctx->cache_limit) {
		list_add_tail(&um->lru, &ctx->lru);
		ctx->cache_bytes += bytes;
		atomic64_add(bytes, &hcomm_stats.cache_bytes);
		hcomm_cache_trim(ctx, ctx->cache_limit, &dead, true);
	} else {
		hcomm_umem_unlink(ctx, um);
		list_add(&um->lru, &dead);
	}
	mutex_unlock(&ctx->cache_lock);
	hcomm_umem_free_list(&dead);
}

/**
 * hcomm_cache_set_limit() - change how much the LRU of @ctx may keep.
 * @ctx:   context.
 * @limit: bytes; lowering it evicts at once.
 *
 * Return: 0.
 */
int hcomm_cache_set_limit(struct hcomm_ctx *ctx, u64 limit)
{
	LIST_HEAD(dead);

	mutex_lock(&ctx->cache_lock);
	ctx->cache_limit = limit;
	hcomm_cache_trim(ctx, limit, &dead, true);
	mutex_unlock(&ctx->cache_lock);
	hcomm_umem_free_list(&dead);
	return 0;
}

/**
 * hcomm_cache_release() - empty the cache of a context being closed.
 * @ctx: context whose file was released; its regions are already unlinked.
 *
 * Ranges still used by regions that transfers of other contexts hold are
 * freed when those regions go.
 */
void hcomm_cache_release(struct hcomm_ctx *ctx)
{
	LIST_HEAD(dead);

	mutex_lock(&ctx->cache_lock);
	ctx->closed = true;
	hcomm_cache_trim(ctx, 0, &dead, false);
	mutex_unlock(&ctx->cache_lock);
	hcomm_umem_free_list(&dead);
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
 * Returns the region's generation.
 */
static u64 hcomm_region_commit(struct hcomm_ctx *ctx, struct hcomm_region *r,
			       u32 *id, u64 *key)
{
	u64 gen;

	hcomm_key_activate(r);
	*id = r->id;
	*key = r->key;
	kref_get(&r->ref);
	atomic_inc(&ctx->nr_regions);
	atomic64_inc(&hcomm_stats.regions);
	atomic64_inc(r->type == HCOMM_REGION_HOST ?
		     &hcomm_stats.host_regions : &hcomm_stats.dmabuf_regions);
	spin_lock(&ctx->inval_lock);
	if (r->umem)
		list_add(&r->umem_node, &r->umem->regions);
	hcomm_gen_bump(ctx, r->id);
	gen = ctx->gen[r->id % HCOMM_GEN_SLOTS];
	/* A change of the mapping since the pages were pinned shows now. */
	if (r->umem && READ_ONCE(r->umem->stale))
		hcomm_gen_bump(ctx, r->id);
	spin_unlock(&ctx->inval_lock);
	/* The slot is reserved: storing allocates nothing and cannot fail. */
	xa_store(&ctx->regions, r->id, r, GFP_KERNEL_ACCOUNT);
	return gen;
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
	hcomm_key_revoke(r);
	spin_lock(&ctx->inval_lock);
	hcomm_gen_bump(ctx, r->id);
	spin_unlock(&ctx->inval_lock);
	/* No other context's transfer touches it once this returns. */
	hcomm_region_revoke(r);
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

	if (found) {
		/* Never reported: nothing worth caching. */
		found->undone = true;
		hcomm_region_put(found);
	}
}

/**
 * hcomm_reg_mem() - register a user range in @ctx, pinning it unless the
 * context already holds it pinned.
 * @ctx: the caller's context.
 * @arg: validated copy of the user's argument; region, key, cache and
 *       generation are filled.
 * @out: the new region, with a reference the caller must put.
 *
 * Return: 0 or -errno (see uapi/linux/hcomm.h); on error nothing stays
 * pinned or charged.
 */
int hcomm_reg_mem(struct hcomm_ctx *ctx, struct hcomm_reg_mem *arg,
		  struct hcomm_region **out)
{
	bool writable = arg->access & HCOMM_ACCESS_LOCAL_WRITE;
	bool nocache = arg->flags & HCOMM_REG_NOCACHE;
	struct hcomm_umem *um = NULL;
	struct hcomm_region *r;
	u64 first, npages;
	u32 offset;
	int ret;

	if ((arg->flags & ~HCOMM_REG_NOCACHE) || arg->reserved)
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

	r = hcomm_region_alloc(ctx, HCOMM_REGION_HOST, arg->access);
	if (!r)
		return -ENOMEM;
	r->addr = arg->addr;
	r->len = arg->len;
	r->offset = offset;
	r->nr_pages = npages;

	ret = hcomm_region_reserve(ctx, r);
	if (ret)
		goto err_free;

	if (!nocache)
		um = hcomm_cache_get(ctx, first, npages, writable);
	if (um) {
		atomic64_inc(&hcomm_stats.cache_hits);
		arg->cache = HCOMM_REG_HIT;
	} else {
		atomic64_inc(&hcomm_stats.cache_misses);
		ret = hcomm_umem_create(ctx, first, npages, writable, !nocache,
					&um);
		if (ret)
			goto err_release_id;
		arg->cache = HCOMM_REG_MISS;
	}
	r->umem = um;
	r->base = arg->addr - um->start;
	arg->generation = hcomm_region_commit(ctx, r, &arg->region, &arg->key);
	*out = r;
	return 0;

err_release_id:
	xa_release(&ctx->regions, r->id);
err_free:
	hcomm_region_free(r);
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
	/* A buffer exported read-only (no O_RDWR / DRM_RDWR) is not written. */
	if ((arg->access & (HCOMM_ACCESS_LOCAL_WRITE |
			    HCOMM_ACCESS_REMOTE_WRITE)) &&
	    !(dmabuf->file->f_mode & FMODE_WRITE)) {
		ret = -EACCES;
		goto err_put;
	}
	if (check_add_overflow(arg->offset, arg->len, &end) ||
	    end > dmabuf->size) {
		ret = -EINVAL;
		goto err_put;
	}

	r = hcomm_region_alloc(ctx, HCOMM_REGION_DMABUF, arg->access);
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
	hcomm_region_free(r);
err_put:
	dma_buf_put(dmabuf);
	return ret;
}

static DEFINE_MUTEX(hcomm_vmap_lock);	/* serialises hcomm_region_vmap() */

/**
 * hcomm_region_vmap() - make a dma-buf region copyable by the CPU.
 * @r: dma-buf region.
 *
 * Takes the exporter's kernel mapping of the whole buffer on first use
 * (kept until the region is released).  Exporters without vmap, or whose
 * mapping is I/O memory, still register, but cannot be transferred.
 *
 * Return: 0, -EOPNOTSUPP, or the exporter's error (e.g. -ENOMEM).
 */
int hcomm_region_vmap(struct hcomm_region *r)
{
	struct iosys_map map;
	int ret = 0;

	/* Pairs with the release below: the mapping is complete. */
	if (smp_load_acquire(&r->vmapped))
		return 0;
	mutex_lock(&hcomm_vmap_lock);
	if (r->vmapped)
		goto out;
	ret = hcomm_dmabuf_vmap(r->dmabuf, &map);
	if (ret) {
		ret = ret == -EINVAL ? -EOPNOTSUPP : ret;
		goto out;
	}
	if (map.is_iomem) {
		hcomm_dmabuf_vunmap(r->dmabuf, &map);
		ret = -EOPNOTSUPP;
		goto out;
	}
	r->vmap = map;
	/* the mapping before the flag that lets readers skip the lock */
	smp_store_release(&r->vmapped, true);
out:
	mutex_unlock(&hcomm_vmap_lock);
	return ret;
}

static void hcomm_region_release(struct kref *ref)
{
	struct hcomm_region *r = container_of(ref, struct hcomm_region, ref);

	hcomm_key_revoke(r);
	if (r->type == HCOMM_REGION_HOST) {
		struct hcomm_ctx *ctx = r->ctx;

		spin_lock(&ctx->inval_lock);
		list_del(&r->umem_node);
		spin_unlock(&ctx->inval_lock);
		hcomm_umem_put(r->umem, !r->undone);
		atomic64_dec(&hcomm_stats.host_regions);
	} else {
		if (r->vmapped)
			hcomm_dmabuf_vunmap(r->dmabuf, &r->vmap);
		hcomm_dmabuf_unmap(r);
		dma_buf_detach(r->dmabuf, r->attach);
		dma_buf_put(r->dmabuf);
		atomic64_dec(&hcomm_stats.dmabuf_regions);
	}
	atomic64_dec(&hcomm_stats.regions);
	hcomm_region_free(r);
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
