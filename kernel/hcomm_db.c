// SPDX-License-Identifier: GPL-2.0
/*
 * Doorbells and the generation page: the memory a context shares with
 * userspace through mmap().
 *
 * Doorbells are an array of 64-bit counters per context (module parameter
 * doorbells), in pages allocated on first use (mmap, DB_WAIT, or a transfer that
 * signals into it) and freed with the context.  The engine updates one
 * with release ordering after the transfer's data is visible, then wakes
 * the DB_WAIT operations parked on that index; userspace may spin on the
 * counter with acquire loads instead.  Both mappings are VM_DONTCOPY: a
 * fork() child does not see them.
 */
#include <linux/mm.h>
#include <linux/vmalloc.h>
#include <linux/slab.h>
#include <linux/io.h>
#include <linux/fs.h>
#include <linux/nospec.h>

#include "hcomm.h"
#include "hcomm_compat.h"

/*
 * Doorbell pages are allocated one by one (no high-order allocation) and
 * without allocation-failure warnings: running out is an ordinary ENOMEM
 * for the caller.  The kernel reaches them through a vmap, userspace
 * through vm_insert_pages().
 */
static atomic64_t *hcomm_db_alloc(u32 nr, struct page ***pagesp,
				  unsigned int *npagesp)
{
	unsigned int i, np = PAGE_ALIGN((size_t)nr * sizeof(u64)) >> PAGE_SHIFT;
	const gfp_t gfp = GFP_KERNEL_ACCOUNT | __GFP_NOWARN;
	struct page **pages;
	void *db;

	pages = kcalloc(np, sizeof(*pages), gfp);
	if (!pages)
		return NULL;
	for (i = 0; i < np; i++) {
		pages[i] = alloc_page(gfp | __GFP_ZERO);
		if (!pages[i])
			goto err;
	}
	db = vmap(pages, np, VM_MAP, PAGE_KERNEL);
	if (!db)
		goto err;
	*pagesp = pages;
	*npagesp = np;
	return db;
err:
	while (i--)
		__free_page(pages[i]);
	kfree(pages);
	return NULL;
}

/**
 * hcomm_db_free() - free the doorbells of a context being freed.
 * @ctx: context.
 */
void hcomm_db_free(struct hcomm_ctx *ctx)
{
	unsigned int i;

	if (!ctx->db)
		return;
	vunmap(ctx->db);
	for (i = 0; i < ctx->db_npages; i++)
		__free_page(ctx->db_pages[i]);
	kfree(ctx->db_pages);
}

/**
 * hcomm_db_ensure() - allocate the doorbells of @ctx if not yet done.
 * @ctx: context.
 *
 * Return: 0 or -ENOMEM.
 */
int hcomm_db_ensure(struct hcomm_ctx *ctx)
{
	u32 nr = READ_ONCE(hcomm_nr_doorbells);
	atomic64_t *db;
	int ret = 0;

	/* Pairs with the release below: a non-NULL array is initialised. */
	if (smp_load_acquire(&ctx->db))
		return 0;
	mutex_lock(&ctx->db_mutex);
	if (!ctx->db) {
		nr = clamp_t(u32, nr, 1, SZ_1M);
		db = hcomm_db_alloc(nr, &ctx->db_pages, &ctx->db_npages);
		if (db) {
			ctx->nr_db = nr;
			/* nr_db before db: readers test db, then use nr_db */
			smp_store_release(&ctx->db, db);
		} else {
			ret = -ENOMEM;
		}
	}
	mutex_unlock(&ctx->db_mutex);
	return ret;
}

/**
 * hcomm_db_check() - validate doorbell @index of @ctx, allocating the array.
 * @ctx:   context owning the doorbells.
 * @index: doorbell index.
 *
 * Return: 0, -EINVAL for an index out of range, or -ENOMEM.
 */
int hcomm_db_check(struct hcomm_ctx *ctx, u32 index)
{
	int ret = hcomm_db_ensure(ctx);

	if (ret)
		return ret;
	return index < ctx->nr_db ? 0 : -EINVAL;
}

/**
 * hcomm_db_signal() - publish a transfer's completion in a doorbell.
 * @ctx:   context owning the doorbell (its array exists).
 * @index: validated index.
 * @value: value to add, or to store when @set.
 * @set:   store instead of add.
 *
 * Release ordering: a reader that observes the new value with an acquire
 * load also observes every byte the transfer wrote.
 */
void hcomm_db_signal(struct hcomm_ctx *ctx, u32 index, u64 value, bool set)
{
	atomic64_t *db = &ctx->db[array_index_nospec(index, ctx->nr_db)];

	if (set)
		atomic64_set_release(db, value);
	else
		atomic64_add_return_release(value, db);
	atomic64_inc(&hcomm_stats.db_signals);
	hcomm_db_wake(ctx, index);
}

static int hcomm_mmap_doorbells(struct hcomm_ctx *ctx,
				struct vm_area_struct *vma)
{
	unsigned long len = vma->vm_end - vma->vm_start;
	unsigned long num;
	int ret;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;

	ret = hcomm_db_ensure(ctx);
	if (ret)
		return ret;
	if (len > (unsigned long)ctx->db_npages << PAGE_SHIFT)
		return -EINVAL;
	/*
	 * VM_IO as well: madvise(MADV_DOFORK) refuses VM_IO mappings, so the
	 * doorbells really are never inherited by a fork() child; GUP refuses
	 * them too, so they cannot be registered as a region.
	 */
	hcomm_vm_flags_set(vma, VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP |
			   VM_IO);
	num = len >> PAGE_SHIFT;
	return vm_insert_pages(vma, vma->vm_start, ctx->db_pages, &num);
}

static int hcomm_mmap_generation(struct hcomm_ctx *ctx,
				 struct vm_area_struct *vma)
{
	if (vma->vm_end - vma->vm_start != PAGE_SIZE)
		return -EINVAL;
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (vma->vm_flags & VM_WRITE)
		return -EPERM;
	hcomm_vm_flags_mod(vma, VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP,
			   VM_MAYWRITE);
	return remap_pfn_range(vma, vma->vm_start,
			       virt_to_phys(ctx->gen) >> PAGE_SHIFT, PAGE_SIZE,
			       vma->vm_page_prot);
}

/**
 * hcomm_mmap() - map the doorbells or the generation page of a context.
 * @file: an open /dev/hcomm.
 * @vma:  the mapping; vm_pgoff selects HCOMM_MMAP_DOORBELLS or
 *        HCOMM_MMAP_GENERATION.
 *
 * Return: 0 or -errno: EINVAL for an unknown offset, a private mapping or
 * a length beyond the array; EPERM for a writable generation mapping;
 * EPERM when the caller is not in the opener's address space.
 */
int hcomm_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct hcomm_ctx *ctx = file->private_data;
	u64 off = (u64)vma->vm_pgoff << PAGE_SHIFT;

	if (current->mm != ctx->mm)
		return -EPERM;
	if (off == HCOMM_MMAP_DOORBELLS)
		return hcomm_mmap_doorbells(ctx, vma);
	if (off == HCOMM_MMAP_GENERATION)
		return hcomm_mmap_generation(ctx, vma);
	return -EINVAL;
}
