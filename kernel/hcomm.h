/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hcomm internal interfaces shared by the files of hcomm.ko.
 *
 * Object model: a struct hcomm_ctx per open() of /dev/hcomm owns the
 * regions it registered (ctx->regions).  A region is reference counted;
 * every lookup that hands out a region pointer takes a reference, and the
 * pages or the dma-buf mapping are released only when the last one drops.
 */
#ifndef _HCOMM_H
#define _HCOMM_H

#include <linux/types.h>
#include <linux/kref.h>
#include <linux/xarray.h>
#include <linux/mm_types.h>
#include <linux/hashtable.h>
#include <linux/atomic.h>

#include <uapi/linux/hcomm.h>

/* Number of commands: HCOMM_CMD_* numbers are 0 .. HCOMM_NR_CMDS - 1. */
#define HCOMM_NR_CMDS	12

struct dma_buf;
struct dma_buf_attachment;
struct sg_table;
struct device;
struct file;
struct io_uring_cmd;

/**
 * struct hcomm_vat_extent - one run of the VAT->PAT table.
 * @pgoff:  index of the first page of the run within the region.
 * @npages: pages in the run.
 * @addr:   physical (host) or DMA (dma-buf) address of the first page.
 */
struct hcomm_vat_extent {
	u64 pgoff;
	u64 npages;
	u64 addr;
};

/**
 * struct hcomm_vat - VAT->PAT table of a region: sorted, gap-free extents.
 * @ext:    extent array (kvmalloc), sorted by @pgoff.
 * @nr:     extents in use.
 * @cap:    extents allocated.
 * @npages: pages covered, i.e. the end of the last extent.
 *
 * Built once while a region is registered, read-only afterwards, so
 * lookups need no lock.
 */
struct hcomm_vat {
	struct hcomm_vat_extent *ext;
	u64 nr;
	u64 cap;
	u64 npages;
};

void hcomm_vat_init(struct hcomm_vat *vat);
int hcomm_vat_append(struct hcomm_vat *vat, u64 addr, u64 npages);
const struct hcomm_vat_extent *hcomm_vat_lookup(const struct hcomm_vat *vat,
						u64 pgoff);
void hcomm_vat_free(struct hcomm_vat *vat);

int hcomm_range_check(u64 addr, u64 len, u64 max_len, u64 *first_page,
		      u64 *npages, u32 *offset);

/**
 * struct hcomm_stats - module-wide counters shown in debugfs.
 *
 * The gauges (contexts .. cache_bytes) return to zero when every context
 * is closed; the command counters only grow.
 */
struct hcomm_stats {
	atomic64_t contexts;
	atomic64_t regions;
	atomic64_t host_regions;
	atomic64_t dmabuf_regions;
	atomic64_t pinned_pages;
	atomic64_t memlock_pages;
	atomic64_t xfers_active;
	atomic64_t waits_pending;
	atomic64_t umems;
	atomic64_t cache_bytes;
	atomic64_t cmd[HCOMM_NR_CMDS];
	atomic64_t cmd_errors;
	atomic64_t uring_cmds;
	atomic64_t ioctls;
	atomic64_t xfer_inline;
	atomic64_t xfer_async;
	atomic64_t xfer_dma;
	atomic64_t xfer_bytes;
	atomic64_t xfer_chunks;
	atomic64_t xfer_cancelled;
	atomic64_t xfer_failed;
	atomic64_t db_signals;
	atomic64_t db_wakeups;
	atomic64_t cache_hits;
	atomic64_t cache_misses;
	atomic64_t cache_evictions;
	atomic64_t cache_invalidations;
	atomic64_t engine_busy_ns;
};

extern struct hcomm_stats hcomm_stats;

/**
 * struct hcomm_ctx - one open() of /dev/hcomm.
 * @regions: region id -> struct hcomm_region; the xarray lock also
 *           serialises taking a reference against removal.
 * @mm:      address space of the opener (mmgrab-ed); only this mm may
 *           register host memory, and its pinned_vm is charged.
 * @dev:     device used for dma-buf attachments.
 * @nr_regions:   regions in @regions.
 * @pinned_pages: host pages those regions pin.
 */
struct hcomm_ctx {
	struct xarray regions;
	struct mm_struct *mm;
	struct device *dev;
	atomic_t nr_regions;
	atomic64_t pinned_pages;
};

/**
 * struct hcomm_region - a registered range of host or device memory.
 * @ref:      lifetime; the context's table holds one reference.
 * @key_node: entry in the global key table.
 * @nr_pages: pages spanned; for host regions, pages charged to @mm.
 * @mm:       for host regions, the mm whose pinned_vm was charged.
 * @user:     for host regions, the user whose locked_vm was charged.
 * @sgt:      dma-buf mapping; NULL once move_notify invalidated it
 *            (protected by the dma-buf's reservation lock).
 */
struct hcomm_region {
	struct kref ref;
	struct hlist_node key_node;
	u32 id;
	u32 type;
	u32 access;
	u32 state;
	u64 key;
	u64 addr;
	u64 len;
	u32 offset;
	u64 nr_pages;
	struct hcomm_vat vat;
	struct mm_struct *mm;
	struct user_struct *user;
	struct dma_buf *dmabuf;
	struct dma_buf_attachment *attach;
	struct sg_table *sgt;
};

/* hcomm_mr.c */
int hcomm_reg_mem(struct hcomm_ctx *ctx, struct hcomm_reg_mem *arg,
		  struct hcomm_region **out);
int hcomm_reg_dmabuf(struct hcomm_ctx *ctx, struct hcomm_reg_dmabuf *arg,
		     struct hcomm_region **out);
void hcomm_region_undo(struct hcomm_ctx *ctx, struct hcomm_region *r);
int hcomm_dereg(struct hcomm_ctx *ctx, u32 id);
struct hcomm_region *hcomm_region_get(struct hcomm_ctx *ctx, u32 id);
void hcomm_region_put(struct hcomm_region *r);
void hcomm_ctx_release_regions(struct hcomm_ctx *ctx);

/* hcomm_key.c */
u64 hcomm_key_new(void);
void hcomm_key_publish(struct hcomm_region *r);
void hcomm_key_revoke(struct hcomm_region *r);

/* hcomm_cmd.c */
long hcomm_ioctl(struct file *file, unsigned int cmd, unsigned long arg);
int hcomm_uring_cmd(struct io_uring_cmd *ioucmd, unsigned int issue_flags);

/* hcomm_debugfs.c */
void hcomm_debugfs_init(void);
void hcomm_debugfs_exit(void);

/* module parameters (hcomm_main.c) */
extern unsigned long hcomm_max_region_size;
extern unsigned int hcomm_max_regions;

#endif /* _HCOMM_H */
