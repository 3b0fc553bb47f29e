// SPDX-License-Identifier: GPL-2.0
/*
 * VAT->PAT translation table: the virtual pages of a region mapped to
 * physical (host) or DMA (dma-buf) addresses, stored as coalesced extents.
 *
 * Pure bookkeeping: no locks, no page references.  The table is built once
 * while a region is registered and is read-only afterwards.  Runs of
 * physically contiguous pages (a transparent huge page, a contiguous
 * dma-buf segment) collapse into one extent, so a lookup is a binary search
 * over few entries.
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/overflow.h>
#include <kunit/visibility.h>

#include "hcomm.h"

/**
 * hcomm_vat_init() - prepare an empty table.
 * @vat: table to initialise.
 */
void hcomm_vat_init(struct hcomm_vat *vat)
{
	memset(vat, 0, sizeof(*vat));
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_vat_init);

static int hcomm_vat_grow(struct hcomm_vat *vat)
{
	struct hcomm_vat_extent *ext;
	u64 cap = vat->cap ? vat->cap * 2 : 16;

	/* kvmalloc() warns above INT_MAX bytes: refuse quietly instead. */
	if (cap > INT_MAX / sizeof(*ext))
		return -ENOMEM;
	/*
	 * The size follows the caller's region: a failure is the caller's
	 * -ENOMEM, not a kernel warning (a vmalloc fallback that fails
	 * would print one, with a call trace).
	 */
	ext = kvmalloc_array(cap, sizeof(*ext),
			     GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!ext)
		return -ENOMEM;
	if (vat->nr)
		memcpy(ext, vat->ext, vat->nr * sizeof(*ext));
	kvfree(vat->ext);
	vat->ext = ext;
	vat->cap = cap;
	return 0;
}

/**
 * hcomm_vat_append() - add @npages pages starting at address @addr.
 * @vat:    table to extend; the pages land at page offset @vat->npages.
 * @addr:   page-aligned physical or DMA address of the first page.
 * @npages: number of pages, at least one.
 *
 * Extends the last extent when @addr continues it physically.
 *
 * Return: 0, -EINVAL for a bad argument, -EOVERFLOW when the table would
 * cover more than U64_MAX bytes, or -ENOMEM.
 */
int hcomm_vat_append(struct hcomm_vat *vat, u64 addr, u64 npages)
{
	struct hcomm_vat_extent *last;
	u64 end, bytes;
	int ret;

	if (!npages || !PAGE_ALIGNED(addr))
		return -EINVAL;
	if (check_add_overflow(vat->npages, npages, &end) ||
	    check_shl_overflow(npages, PAGE_SHIFT, &bytes) ||
	    check_add_overflow(addr, bytes, &bytes))
		return -EOVERFLOW;

	if (vat->nr) {
		last = &vat->ext[vat->nr - 1];
		if (last->addr + (last->npages << PAGE_SHIFT) == addr) {
			last->npages += npages;
			vat->npages = end;
			return 0;
		}
	}
	if (vat->nr == vat->cap) {
		ret = hcomm_vat_grow(vat);
		if (ret)
			return ret;
	}
	vat->ext[vat->nr++] = (struct hcomm_vat_extent) {
		.pgoff = vat->npages,
		.npages = npages,
		.addr = addr,
	};
	vat->npages = end;
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_vat_append);

/**
 * hcomm_vat_lookup() - find the extent holding page @pgoff of a region.
 * @vat:   a built table.
 * @pgoff: page index within the region.
 *
 * O(log n) in the number of extents.
 *
 * Return: the extent, or NULL when @pgoff is past the end of the table.
 */
const struct hcomm_vat_extent *hcomm_vat_lookup(const struct hcomm_vat *vat,
						u64 pgoff)
{
	u64 lo = 0, hi = vat->nr;

	if (pgoff >= vat->npages)
		return NULL;
	/* Invariant: the answer is in [lo, hi). */
	while (hi - lo > 1) {
		u64 mid = lo + (hi - lo) / 2;

		if (vat->ext[mid].pgoff <= pgoff)
			lo = mid;
		else
			hi = mid;
	}
	return &vat->ext[lo];
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_vat_lookup);

/**
 * hcomm_vat_free() - release the extent array (not what it points to).
 * @vat: table to empty.
 */
void hcomm_vat_free(struct hcomm_vat *vat)
{
	kvfree(vat->ext);
	hcomm_vat_init(vat);
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_vat_free);

/**
 * hcomm_range_check() - validate a user byte range and compute its pages.
 * @addr:       first byte.
 * @len:        length in bytes.
 * @max_len:    largest length accepted.
 * @first_page: out: page-aligned address of the first page.
 * @npages:     out: pages spanned by [addr, addr + len).
 * @offset:     out: offset of @addr within its page.
 *
 * Return: 0; -EINVAL for a zero length; -EOVERFLOW when addr + len (or its
 * page-rounded end) wraps; -E2BIG when @len exceeds @max_len.
 */
int hcomm_range_check(u64 addr, u64 len, u64 max_len, u64 *first_page,
		      u64 *npages, u32 *offset)
{
	u64 end, last;

	if (!len)
		return -EINVAL;
	if (check_add_overflow(addr, len - 1, &last) ||
	    check_add_overflow(last, (u64)PAGE_SIZE, &end))
		return -EOVERFLOW;
	if (len > max_len)
		return -E2BIG;
	*first_page = addr & PAGE_MASK;
	*offset = addr & ~PAGE_MASK;
	*npages = ((last & PAGE_MASK) - *first_page) / PAGE_SIZE + 1;
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_range_check);
