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
#include <linux/rhashtable-types.h>
#include <linux/atomic.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/llist.h>
#include <linux/completion.h>
#include <linux/workqueue.h>
#include <linux/uidgid.h>
#include <linux/mmu_notifier.h>
#include <linux/interval_tree.h>
#include <linux/iosys-map.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/minmax.h>

#include "hcomm_qos.h"

#include <uapi/linux/hcomm.h>

/* Parked DB_WAITs of a context are kept in this many lists. */
#define HCOMM_WAIT_BUCKETS	64

/* Number of commands: HCOMM_CMD_* numbers are 0 .. HCOMM_NR_CMDS - 1. */
#define HCOMM_NR_CMDS	14

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
 * The gauges (contexts .. workers) return to zero when every context
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
	atomic64_t workers;
	atomic64_t cmd[HCOMM_NR_CMDS];
	atomic64_t cmd_errors;
	atomic64_t uring_cmds;
	atomic64_t ioctls;
	atomic64_t xfer_inline;
	atomic64_t xfer_async;
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
 * @ref:     lifetime of the struct: the file holds one reference, every
 *           region and every pending operation one more, so a region
 *           kept alive by another process's transfer can still reach its
 *           owner's doorbells and cache.
 * @regions: region id -> struct hcomm_region; the xarray lock also
 *           serialises taking a reference against removal.
 * @mm:      address space of the opener (mmgrab-ed); only this mm may
 *           register host memory, and its pinned_vm is charged.
 * @dev:     device used for dma-buf attachments.
 * @nr_regions:   regions in @regions.
 * @pinned_pages: host pages this context's pinned ranges hold (live and
 *           cached).
 * @closed:  the file was released; nothing new may be cached.
 * @mn:      notifier on @mm: its release ends every pending operation
 *           when the process exits (kernels without IO_URING_F_CANCEL).
 * @mn_registered: @mn is registered (set in open, read in release).
 * @cache_lock:  protects @cache_tree, @lru, @cache_bytes and umem users.
 * @cache_tree:  pinned ranges (struct hcomm_umem) by user address.
 * @lru:         unused pinned ranges, oldest first.
 * @cache_bytes: bytes in @lru.
 * @cache_limit: most bytes @lru may hold.
 * @inval_lock:  taken by the mmu notifiers; protects umem->stale and the
 *           generation bumps of a umem's regions.
 * @gen:     generation page (HCOMM_GEN_SLOTS counters).
 * @db_lock: protects @waiters.
 * @db_mutex: serialises allocating @db.  Taken under mmap_lock (->mmap):
 *           nothing that takes mmap_lock or faults may run under it.
 * @db:      doorbell array (a vmap of @db_pages), NULL until first needed.
 * @db_pages: the pages of @db, mapped into userspace by mmap.
 * @db_npages: pages in @db_pages.
 * @nr_db:   doorbells in @db.
 * @waiters: parked DB_WAIT operations, by doorbell index modulo
 *           HCOMM_WAIT_BUCKETS: a signal looks at one bucket only; a
 *           DB_WAIT_ANY of several doorbells in the extra last list,
 *           which every signal looks at (while it is not empty).
 * @op_lock: protects @pending and @fences.
 * @pending: submitted transfers not yet completed, in submission order.
 * @fences:  parked FENCE operations, in submission order.
 * @seq:     submission counter of transfers (under @op_lock).
 * @incoming: transfers submitted but not yet seen by the engine.
 * @queued:  bit 0 set while the context is in the engine's active set.
 * @xq:      transfers with chunks left to hand out (engine lock).
 * @qos:     the context's QoS class (engine lock).
 * @max_inline: inline threshold of this context.
 * @node:    entry in the list of all contexts (debugfs "contexts").
 * @pid:     thread group of the opener.
 * @comm:    command name of the opener.
 * @xfers:   transfers of this context on the engine.
 * @served:  bytes the engine copied for this context.
 * @worker_lock: serialises starting and stopping @workers; taken with no
 *           other hcomm lock held.
 * @workers: the context's copy threads (hcomm_xfer.c), in its opener's
 *           cgroups: the engine copies a context's chunks only in these,
 *           so the CPU time is charged to the submitter.  Appended under
 *           @worker_lock and the engine lock, stopped at release.
 * @nr_workers: entries in @workers (written under both locks).
 * @workers_stopping: release began; no worker may be added (@worker_lock).
 * @worker_wait: idle workers sleep here for @ready.
 * @ready:   engine slots handed to this context, each one chunk, waiting
 *           for a worker (engine lock).
 * @running: slots being copied by a worker, oldest first (engine lock).
 * @slots_held: slots on @ready or @running (engine lock).
 * @busy:    workers copying a chunk now (engine lock).
 * @spawning: a worker is starting another one (engine lock).
 * @slow_until: jiffies until which the context counts as slow: it holds
 *           at most its share of the slots (engine lock).
 * @start_pending: bit 0: @worker_start was queued (set once).
 * @worker_start: starts the first worker for a transfer submitted where
 *           no thread can be started (io_uring non-blocking issue).
 * @start_from: the submitter whose cgroups it joins (a reference), owned
 *           by @worker_start while it is pending.
 */
struct hcomm_ctx {
	struct kref ref;
	struct xarray regions;
	struct mm_struct *mm;
	struct device *dev;
	atomic_t nr_regions;
	atomic64_t pinned_pages;
	bool closed;
	struct mmu_notifier mn;
	bool mn_registered;

	struct mutex cache_lock;	/* see @cache_lock above */
	struct rb_root_cached cache_tree;
	struct list_head lru;
	u64 cache_bytes;
	u64 cache_limit;
	spinlock_t inval_lock;		/* see @inval_lock above */
	u64 *gen;

	spinlock_t db_lock;		/* see @db_lock above */
	struct mutex db_mutex;		/* see @db_mutex above */
	atomic64_t *db;
	struct page **db_pages;
	unsigned int db_npages;
	u32 nr_db;
	struct list_head waiters[HCOMM_WAIT_BUCKETS + 1];

	spinlock_t op_lock;		/* see @op_lock above */
	struct list_head pending;
	struct list_head fences;
	u64 seq;

	struct llist_head incoming;
	unsigned long queued;
	struct list_head xq;
	struct hcomm_qos_class qos;
	u32 max_inline;

	struct list_head node;
	pid_t pid;
	char comm[TASK_COMM_LEN];
	atomic_t xfers;
	atomic64_t served;

	struct mutex worker_lock;	/* see @worker_lock above */
	struct task_struct **workers;
	unsigned int nr_workers;
	bool workers_stopping;
	wait_queue_head_t worker_wait;
	struct list_head ready;
	struct list_head running;
	unsigned int slots_held;
	unsigned int busy;
	bool spawning;
	unsigned long slow_until;
	unsigned long start_pending;
	struct delayed_work worker_start;
	struct task_struct *start_from;
};

/**
 * struct hcomm_umem - a pinned range of host memory, shared by the regions
 * registered on it and kept in the context's cache after the last of them
 * is gone.
 * @ctx:      context whose cache holds it (a reference).
 * @it:       node in ctx->cache_tree: [start, start + npages * PAGE_SIZE - 1].
 * @notifier: invalidates the range when the mapping changes.
 * @lru:      entry in ctx->lru while @users is 0.
 * @regions:  live regions on this range (for generation bumps;
 *            ctx->inval_lock).
 * @start:    page-aligned user address of the first page.
 * @npages:   pages pinned.
 * @writable: pinned with FOLL_WRITE.
 * @cacheable: may be found by later registrations (not NOCACHE).
 * @stale:    the mapping changed since pinning: never found again.
 * @users:    live regions using the range (ctx->cache_lock).
 * @vat:      VAT->PAT table.
 * @mm:       mm whose pinned_vm was charged.
 * @user:     user whose locked_vm was charged.
 */
struct hcomm_umem {
	struct hcomm_ctx *ctx;
	struct interval_tree_node it;
	struct mmu_interval_notifier notifier;
	struct list_head lru;
	struct list_head regions;
	u64 start;
	u64 npages;
	bool writable;
	bool cacheable;
	bool stale;
	bool notifier_ok;
	unsigned int users;
	struct hcomm_vat vat;
	struct mm_struct *mm;
	struct user_struct *user;
};

/**
 * struct hcomm_region - a registered range of host or device memory.
 * @ref:      lifetime; the context's table holds one reference, every
 *            transfer using it one more.
 * @key_node: entry in the global key table (an rhashtable, RCU lookups).
 * @key_hashed: @key_node is in the table (registration and release only).
 * @live:     registration finished: lookups by key may return it.
 * @rcu:      the struct is freed after a grace period (lockless lookups).
 * @ctx:      owner (a reference).
 * @umem_node: entry in umem->regions.
 * @umem:     host regions: the pinned range.
 * @base:     host regions: byte offset of the region's first byte from
 *            the first page of @umem.
 * @nr_pages: pages spanned.
 * @grant:    who besides the owner may use the key, as one word
 *            (hcomm_grant_word()): scope, access and uid are published and
 *            read together with WRITE_ONCE/READ_ONCE, never torn.
 * @undone:   the registration was undone before userspace saw it: its
 *            range is not kept in the cache.
 * @vat:      dma-buf regions: the table.
 * @sgt:      dma-buf mapping; NULL once move_notify invalidated it
 *            (protected by the dma-buf's reservation lock).
 * @vmap:     dma-buf regions: the exporter's kernel mapping of the whole
 *            buffer, taken by the first transfer (system memory only).
 * @vmapped:  @vmap is valid: transfers may copy with the CPU.
 * @revoked:  the region left its context's table (DEREG, close): other
 *            contexts' transfers stop at their next chunk.
 * @acc_rev:  revision of who may use the region: bumped (under
 *            hcomm_revoke_lock) by GRANT and by revocation.
 * @foreign:  chunks of other contexts being copied now, by the parity of
 *            the @acc_rev they were checked against (an SRCU-like pair):
 *            a revoker bumps @acc_rev and waits for the old parity to
 *            drain, so once DEREG or GRANT returns no transfer of another
 *            context touches the region under the old rights.
 */
struct hcomm_region {
	struct kref ref;
	struct rhash_head key_node;
	bool key_hashed;
	bool live;
	struct rcu_head rcu;
	struct hcomm_ctx *ctx;
	struct list_head umem_node;
	struct hcomm_umem *umem;
	u64 base;
	u32 id;
	u32 type;
	u32 access;
	u32 state;
	u64 key;
	u64 addr;
	u64 len;
	u32 offset;
	u64 nr_pages;
	u64 grant;
	bool undone;
	struct hcomm_vat vat;
	struct dma_buf *dmabuf;
	struct dma_buf_attachment *attach;
	struct sg_table *sgt;
	struct iosys_map vmap;
	bool vmapped;
	bool revoked;
	atomic_t acc_rev;
	atomic_t foreign[2];
};

/*
 * A grant as one word: bits 0-7 the HCOMM_GRANT_* scope, 8-15 the
 * HCOMM_ACCESS_REMOTE_* bits, 32-63 the kuid (init_user_ns value).
 */
static inline u64 hcomm_grant_word(u32 scope, u32 access, kuid_t uid)
{
	return (u64)(scope & 0xff) | (u64)(access & 0xff) << 8 |
	       (u64)__kuid_val(uid) << 32;
}

static inline u32 hcomm_grant_scope(u64 g)
{
	return g & 0xff;
}

static inline u32 hcomm_grant_access(u64 g)
{
	return (g >> 8) & 0xff;
}

static inline kuid_t hcomm_grant_uid(u64 g)
{
	return KUIDT_INIT((uid_t)(g >> 32));
}

/* Where a region's bytes live: its VAT->PAT table and the byte offset. */
static inline const struct hcomm_vat *
hcomm_region_vat(const struct hcomm_region *r, u64 *base)
{
	if (r->umem) {
		*base = r->base;
		return &r->umem->vat;
	}
	*base = r->offset;
	return &r->vat;
}

/* hcomm_mr.c */
int hcomm_reg_mem(struct hcomm_ctx *ctx, struct hcomm_reg_mem *arg,
		  struct hcomm_region **out);
int hcomm_reg_dmabuf(struct hcomm_ctx *ctx, struct hcomm_reg_dmabuf *arg,
		     struct hcomm_region **out);
void hcomm_region_undo(struct hcomm_ctx *ctx, struct hcomm_region *r);
int hcomm_dereg(struct hcomm_ctx *ctx, u32 id);
struct hcomm_region *hcomm_region_get(struct hcomm_ctx *ctx, u32 id);
void hcomm_region_put(struct hcomm_region *r);
int hcomm_region_vmap(struct hcomm_region *r);
void hcomm_ctx_release_regions(struct hcomm_ctx *ctx);
void hcomm_cache_release(struct hcomm_ctx *ctx);
int hcomm_cache_set_limit(struct hcomm_ctx *ctx, u64 limit);
void hcomm_gen_bump(struct hcomm_ctx *ctx, u32 id);

/* hcomm_main.c */
void hcomm_ctx_put(struct hcomm_ctx *ctx);
void hcomm_sweep_kick(void);
static inline void hcomm_ctx_get(struct hcomm_ctx *ctx)
{
	kref_get(&ctx->ref);
}

/* hcomm_key.c */
u64 hcomm_key_new(void);
int hcomm_keys_init(void);
void hcomm_keys_exit(void);
int hcomm_key_publish(struct hcomm_region *r);
void hcomm_key_activate(struct hcomm_region *r);
void hcomm_key_revoke(struct hcomm_region *r);
struct hcomm_region *hcomm_key_lookup(struct hcomm_ctx *ctx, u64 key,
				      u32 need, u32 *rev);
int hcomm_grant(struct hcomm_ctx *ctx, struct hcomm_grant *arg);
void hcomm_region_revoke(struct hcomm_region *r);
int hcomm_region_enter(struct hcomm_region *r, const struct hcomm_ctx *ctx,
		       kuid_t euid, u32 need, u32 *rev);
void hcomm_region_exit(struct hcomm_region *r, const struct hcomm_ctx *ctx,
		       u32 rev);

/* hcomm_db.c */
int hcomm_db_ensure(struct hcomm_ctx *ctx);
void hcomm_db_free(struct hcomm_ctx *ctx);
int hcomm_db_check(struct hcomm_ctx *ctx, u32 index);
void hcomm_db_signal(struct hcomm_ctx *ctx, u32 index, u64 value, bool set);
int hcomm_mmap(struct file *file, struct vm_area_struct *vma);

/* hcomm_xfer.c: the engine and the operations that complete later */
struct hcomm_cmd_io {
	struct io_uring_cmd *ioucmd;	/* NULL: ioctl */
	unsigned int issue_flags;
};

int hcomm_engine_init(void);
void hcomm_engine_exit(void);
int hcomm_ctx_engine_init(struct hcomm_ctx *ctx);
void hcomm_ctx_engine_release(struct hcomm_ctx *ctx);
void hcomm_ctx_cancel_all(struct hcomm_ctx *ctx);
unsigned int hcomm_ctx_cancel_orphans(struct hcomm_ctx *ctx);
int hcomm_xfer(struct hcomm_ctx *ctx, struct hcomm_xfer *arg,
	       const struct hcomm_cmd_io *io, void __user *uarg);
int hcomm_xfer_batch(struct hcomm_ctx *ctx, struct hcomm_xfer_batch *arg,
		     const struct hcomm_cmd_io *io);
int hcomm_fence(struct hcomm_ctx *ctx, struct hcomm_fence *arg,
		const struct hcomm_cmd_io *io);
int hcomm_db_wait(struct hcomm_ctx *ctx, struct hcomm_db_wait *arg,
		  const struct hcomm_cmd_io *io, void __user *uarg);
int hcomm_db_wait_any(struct hcomm_ctx *ctx, struct hcomm_db_wait_any *arg,
		      const struct hcomm_cmd_io *io, void __user *uarg);
int hcomm_cancel(struct hcomm_ctx *ctx, u64 tag, bool all);
void hcomm_uring_cancel(struct io_uring_cmd *ioucmd);
int hcomm_set_qos(struct hcomm_ctx *ctx, struct hcomm_qos *arg);
void hcomm_db_wake(struct hcomm_ctx *ctx, u32 index);
/**
 * struct hcomm_ctx_engine_info - a context's part of the engine now.
 * @slots:   engine slots it holds.
 * @workers: its copy threads.
 * @slow:    it counts as slow (holds at most its share of the slots).
 */
struct hcomm_ctx_engine_info {
	unsigned int slots;
	unsigned int workers;
	bool slow;
};

void hcomm_ctx_qos_info(struct hcomm_ctx *ctx, struct hcomm_qos *out,
			u32 *share, struct hcomm_ctx_engine_info *eng);

/* hcomm_main.c: every context, for debugfs */
extern struct list_head hcomm_ctx_list;
extern struct mutex hcomm_ctx_list_lock;

/* hcomm_cmd.c */
long hcomm_ioctl(struct file *file, unsigned int cmd, unsigned long arg);
int hcomm_uring_cmd(struct io_uring_cmd *ioucmd, unsigned int issue_flags);
u64 hcomm_memlock_limit(void);

/* hcomm_debugfs.c */
void hcomm_debugfs_init(void);
void hcomm_debugfs_exit(void);

/* module parameters (hcomm_main.c) */
extern unsigned long hcomm_max_region_size;
extern unsigned int hcomm_max_regions;
extern unsigned int hcomm_max_inline;
extern unsigned int hcomm_chunk_size;
extern unsigned int hcomm_nr_doorbells;
extern unsigned long hcomm_cache_limit;
extern unsigned int hcomm_workers;
extern unsigned int hcomm_slot_slow_ms;
extern unsigned int hcomm_qos_user_min_rate;
extern unsigned int hcomm_qos_user_priority;

/*
 * Module parameters are writable at run time (0644): clamp them where
 * they are used, not only at load.
 */
#define HCOMM_MAX_INLINE_CAP	SZ_64K
#define HCOMM_MAX_CHUNK		SZ_16M

static inline u32 hcomm_max_inline_now(void)
{
	return min_t(u32, READ_ONCE(hcomm_max_inline), HCOMM_MAX_INLINE_CAP);
}

static inline u64 hcomm_chunk_now(void)
{
	return clamp_t(u32, READ_ONCE(hcomm_chunk_size), PAGE_SIZE,
		       HCOMM_MAX_CHUNK);
}

#endif /* _HCOMM_H */
