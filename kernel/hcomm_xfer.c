// SPDX-License-Identifier: GPL-2.0
/*
 * The transfer engine and the operations that may complete after their
 * command returns: XFER, FENCE and DB_WAIT.
 *
 * A transfer copies bytes between two registered regions by walking both
 * VAT->PAT tables extent by extent: one copy, no bounce buffer.  Up to
 * max_inline bytes are copied in the submitting call.  Larger transfers
 * are queued on their context and copied in chunk_size pieces; which
 * context's chunk goes next is the QoS scheduler's choice (hcomm_qos.c).
 *
 * Who copies.  The engine has a fixed number of slots (the workers module
 * parameter, one per online CPU by default): a slot is one chunk being
 * copied.  A free slot goes to the context the scheduler names, and that
 * context's own worker threads copy it.  A context's workers are kernel
 * threads started by its first queued transfer, from the submitting task,
 * and attached to that task's cgroups (cpu, cpuset, ...), the way vhost
 * attaches its workers to its owner's; so the CPU time of every copy is
 * charged to the cgroup of the process that asked for it, and its cpuset
 * and cpu.max apply.  A context starts one worker and grows to as many as
 * there are slots while its chunks wait for one.
 *
 * Shares are of bytes: a slot goes to the context with the smallest
 * virtual time, whoever's chunk was slow.  A slot whose chunk took longer
 * than slot_slow_ms (a worker throttled by its cgroup's cpu.max, or
 * confined to a busy cpuset) marks its context slow for a second; a slow
 * context holds at most its share of the slots, rounded up, and never all
 * of them (hcomm_slot_cap()), so the slots of a throttled context stand
 * still while the others keep going to the other contexts.  A dma-buf region is copied through the
 * exporter's kernel mapping, bracketed by begin/end_cpu_access and after
 * its fences.  No transfer is copied by a dmaengine channel:
 * the machines hcomm targets have none for memory-to-memory copies, so
 * the CPU copies (the uapi keeps no dmaengine feature bit or counter).
 *
 * Submission takes no engine-wide lock: a transfer is pushed on its
 * context's lock-free list, and only a context that was idle takes the
 * engine lock to join the active set.  A worker takes the engine lock
 * once per chunk to take its slot, and once to account for the chunk and
 * hand the slot on.
 *
 * Every pending operation holds a reference on its context and a
 * transfer holds references on both regions, so DEREG or the owner's exit
 * during a transfer only drops the table's reference: the pages stay
 * pinned until the transfer ends.  Operations end exactly once, through
 * hcomm_op_deliver(): io_uring commands complete in the submitter's task
 * work, ioctl callers are woken.  Cancellation (CANCEL, IO_URING_F_CANCEL,
 * or the exit of the owning process) marks an operation; a transfer stops
 * handing out chunks and ends once the chunks being copied have landed.
 *
 * Lock order: ctx->op_lock, then the engine lock; ctx->db_lock is taken
 * alone.
 */
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/highmem.h>
#include <linux/sched/signal.h>
#include <linux/overflow.h>
#include <linux/uaccess.h>
#include <linux/ktime.h>
#include <linux/hrtimer.h>
#include <linux/jiffies.h>
#include <linux/workqueue.h>
#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/nospec.h>
#include <linux/kthread.h>
#include <linux/sched/task.h>
#include <linux/cgroup.h>
#include <linux/wait.h>

#include "hcomm.h"
#include "hcomm_compat.h"

enum hcomm_op_kind {
	HCOMM_OP_XFER,
	HCOMM_OP_FENCE,
	HCOMM_OP_WAIT,
};

/**
 * struct hcomm_op - an operation that completes asynchronously.
 * @kind:      HCOMM_OP_*.
 * @cancelled: cancellation was asked.
 * @ctx:       submitting context (a reference until delivery).
 * @node:      entry in ctx->pending, ctx->fences or ctx->waiters[] (under
 *             ctx->op_lock or ctx->db_lock).  Ownership rule: a parked
 *             FENCE or DB_WAIT belongs to whoever unlinks @node under that
 *             lock (list_del_init(), then @node is empty); only that path
 *             may end it.  An empty @node means someone else owns it.
 * @claimed:   entry in the private list of the path that claimed the
 *             operation and is about to end it; never on a shared list.
 * @ioucmd:    the io_uring command, or NULL for ioctl.
 * @done:      ioctl: completed at delivery.
 * @res:       result (0 or -errno).
 * @res2:      transfers: bytes copied; DB_WAIT: the doorbell value;
 *             DB_WAIT_ANY: the bits of the doorbells that hold.
 * @tag:       user tag for CANCEL.
 * @seq:       transfers: submission order; fences: last transfer covered.
 * @x:         transfer state; the engine lock protects @x.next,
 *             @x.inflight, @x.finishing, @x.err and @x.qnode; ctx->op_lock
 *             @x.ended.  @x.src_rev and @x.dst_rev (the access revisions
 *             the regions were last checked against) belong to the chunk
 *             being copied: chunks of one transfer may run on several
 *             workers, so each chunk checks against its own copy.
 * @w:         DB_WAIT and DB_WAIT_ANY state (DB_WAIT: @w.count 1).
 */
struct hcomm_op {
	enum hcomm_op_kind kind;
	bool cancelled;
	struct hcomm_ctx *ctx;
	struct list_head node;
	struct list_head claimed;
	struct io_uring_cmd *ioucmd;
	struct completion done;
	int res;
	u64 res2;
	u64 tag;
	u64 seq;
	union {
		struct {
			struct llist_node llnode;
			struct list_head qnode;
			struct hcomm_region *src;
			struct hcomm_region *dst;
			struct hcomm_ctx *db_ctx;
			kuid_t euid;
			u32 src_rev;
			u32 dst_rev;
			int err;
			u64 src_off;
			u64 dst_off;
			u64 len;
			u64 next;
			u64 landed;
			unsigned int inflight;
			bool finishing;
			bool ended;
			u32 flags;
			u32 db_index;
			u64 db_value;
		} x;
		struct {
			u32 count;		/* doorbells named */
			bool any;		/* DB_WAIT_ANY: res2 is a mask */
			u32 index[HCOMM_DB_WAIT_ANY_MAX];
			u64 value[HCOMM_DB_WAIT_ANY_MAX];
			ktime_t deadline;	/* KTIME_MAX: none */
			u64 slack;		/* the waiter's timer slack */
			struct hrtimer timer;	/* fires at @deadline */
			struct work_struct timeout;	/* queued by @timer */
		} w;
	};
};

/* What an io_uring command carries in its pdu while it is pending. */
struct hcomm_pdu {
	struct hcomm_op *op;
};

/*
 * One engine slot: a chunk handed to a context, owned by the engine while
 * on free_slots, by the context while on its ready list, and by the
 * worker that took it off that list until it gives it back.
 */
struct hcomm_slot {
	struct list_head node;
	struct hcomm_op *op;
	u64 off;
	u64 n;
	unsigned long start;	/* jiffies when handed out */
};

/*
 * A chunk slower than slot_slow_ms (module parameter; 0: never) marks its
 * context slow for HCOMM_SLOW_FOR.
 */
#define HCOMM_SLOT_SLOW_MAX_MS	10000
#define HCOMM_SLOW_FOR		HZ

static struct hcomm_engine {
	spinlock_t lock;		/* sched, reap, free_slots, slots */
	struct hcomm_qos_sched sched;
	struct list_head reap;		/* cancelled transfers to end */
	struct list_head free_slots;
	struct hcomm_slot *slots;
	unsigned int nr_slots;		/* set at init */
	struct workqueue_struct *wq;	/* reap_work */
	struct work_struct reap_work;
	struct workqueue_struct *timer_wq;	/* DB_WAIT timeouts */
} hcomm_engine;

static struct hcomm_pdu *hcomm_pdu(struct io_uring_cmd *ioucmd)
{
	BUILD_BUG_ON(sizeof(struct hcomm_pdu) > sizeof(ioucmd->pdu));
	return (struct hcomm_pdu *)ioucmd->pdu;
}

/* ------------------------------------------------------------------ */
/* delivery                                                            */
/* ------------------------------------------------------------------ */

/*
 * Claim parked @op for the caller, who holds the lock of the list it is
 * parked on: unlinked now, so a timeout, a signal or a cancel that comes
 * later finds @node empty and leaves it alone.  The caller ends it after
 * dropping the lock, from @out.
 */
static void hcomm_op_claim(struct hcomm_op *op, struct list_head *out)
{
	list_del_init(&op->node);
	list_add_tail(&op->claimed, out);
}

static void hcomm_xfer_retire(struct hcomm_op *op);

static void hcomm_op_tw(struct io_uring_cmd *ioucmd, unsigned int issue_flags)
{
	struct hcomm_op *op = hcomm_pdu(ioucmd)->op;
	struct hcomm_ctx *ctx = op->ctx;

	hcomm_uring_cmd_done(ioucmd, op->res, op->res2, issue_flags);
	/* Only now, with its CQE posted, may a later FENCE complete. */
	if (op->kind == HCOMM_OP_XFER)
		hcomm_xfer_retire(op);
	kfree(op);
	hcomm_ctx_put(ctx);
}

/*
 * Hand a finished operation to its waiter; after this @op belongs to the
 * waiter.  An io_uring command completes in its task's task work, which
 * drops the context reference; an ioctl caller holds the file (and so the
 * context) itself, so the reference goes first.
 */
static void hcomm_op_deliver(struct hcomm_op *op)
{
	if (op->ioucmd) {
		io_uring_cmd_complete_in_task(op->ioucmd, hcomm_op_tw);
	} else {
		hcomm_ctx_put(op->ctx);
		complete(&op->done);
	}
}

static struct hcomm_op *hcomm_op_alloc(struct hcomm_ctx *ctx,
				       enum hcomm_op_kind kind, u64 tag,
				       const struct hcomm_cmd_io *io)
{
	struct hcomm_op *op = kzalloc(sizeof(*op), GFP_KERNEL_ACCOUNT);

	if (!op)
		return NULL;
	op->kind = kind;
	op->tag = tag;
	INIT_LIST_HEAD(&op->node);
	INIT_LIST_HEAD(&op->claimed);
	init_completion(&op->done);
	hcomm_ctx_get(ctx);
	op->ctx = ctx;
	if (io->ioucmd) {
		op->ioucmd = io->ioucmd;
		hcomm_pdu(io->ioucmd)->op = op;
	}
	return op;
}

/* An operation that never started: nothing else saw it. */
static void hcomm_op_discard(struct hcomm_op *op)
{
	hcomm_ctx_put(op->ctx);
	kfree(op);
}

/*
 * Park @op as pending on its io_uring command: it may now be cancelled by
 * io_uring (kernels with IO_URING_F_CANCEL).  Must precede anything that
 * can complete it.  Where io_uring cannot cancel, the caller kicks the
 * sweep (hcomm_sweep_kick()) once @op is on its list.
 */
static int hcomm_op_queued(struct hcomm_op *op, const struct hcomm_cmd_io *io)
{
	hcomm_uring_mark_cancelable(io->ioucmd, io->issue_flags);
	return -EIOCBQUEUED;
}

/*
 * ioctl callers wait here.  A fatal signal (or any signal, for
 * @interruptible waits) cancels the operation; it then ends promptly,
 * once the chunk being copied has landed.
 */
static int hcomm_op_wait(struct hcomm_op *op, bool interruptible,
			 void (*cancel)(struct hcomm_op *op))
{
	int ret;

	if (interruptible)
		ret = wait_for_completion_interruptible(&op->done);
	else
		ret = wait_for_completion_killable(&op->done);
	if (ret) {
		cancel(op);
		wait_for_completion(&op->done);
		if (op->res == -ECANCELED)
			return -EINTR;
	}
	return op->res;
}

/* ------------------------------------------------------------------ */
/* copying                                                             */
/* ------------------------------------------------------------------ */

/*
 * One side of a copy: a host region walked extent by extent, or a dma-buf
 * region through the exporter's kernel mapping (@kva, linear).
 */
struct hcomm_cursor {
	const struct hcomm_vat *vat;
	u64 idx;	/* extent */
	u64 off;	/* byte offset within the extent */
	u8 *kva;	/* dma-buf: next byte */
};

static void hcomm_cursor_init(struct hcomm_cursor *c,
			      const struct hcomm_region *r, u64 pos)
{
	const struct hcomm_vat_extent *e;
	u64 base;

	if (r->type == HCOMM_REGION_DMABUF) {
		c->vat = NULL;
		c->kva = (u8 *)r->vmap.vaddr + r->addr + pos;
		return;
	}
	c->kva = NULL;
	c->vat = hcomm_region_vat(r, &base);
	pos += base;
	e = hcomm_vat_lookup(c->vat, pos >> PAGE_SHIFT);
	/* pos < region length was checked at submission */
	c->idx = e - c->vat->ext;
	c->off = pos - (e->pgoff << PAGE_SHIFT);
}

/*
 * Map at most @n bytes at the cursor; returns the kernel address and sets
 * *@n to what is contiguous there (the rest of the extent, or of the page
 * on CONFIG_HIGHMEM).  Undo with hcomm_cursor_unmap().
 */
static void *hcomm_cursor_map(const struct hcomm_cursor *c, u64 *n)
{
	const struct hcomm_vat_extent *e;
	phys_addr_t pa;
	u64 left;

	if (c->kva)
		return c->kva;
	e = &c->vat->ext[c->idx];
	pa = e->addr + c->off;
	left = (e->npages << PAGE_SHIFT) - c->off;
#ifdef CONFIG_HIGHMEM
	left = min_t(u64, left, PAGE_SIZE - offset_in_page(pa));
	*n = min(*n, left);
	return kmap_local_page(pfn_to_page(PHYS_PFN(pa))) + offset_in_page(pa);
#else
	/* Pinned pages are in the direct map, and a run is contiguous there. */
	*n = min(*n, left);
	return page_address(pfn_to_page(PHYS_PFN(pa))) + offset_in_page(pa);
#endif
}

static void hcomm_cursor_unmap(const struct hcomm_cursor *c, void *va)
{
#ifdef CONFIG_HIGHMEM
	if (!c->kva)
		kunmap_local(va);
#endif
}

static void hcomm_cursor_advance(struct hcomm_cursor *c, u64 n)
{
	if (c->kva) {
		c->kva += n;
		return;
	}
	c->off += n;
	if (c->off == c->vat->ext[c->idx].npages << PAGE_SHIFT) {
		c->idx++;
		c->off = 0;
	}
}

/* Bracket CPU access to a dma-buf region for the exporter's caches. */
static void hcomm_cpu_access(const struct hcomm_region *r,
			     enum dma_data_direction dir, bool begin)
{
	if (r->type != HCOMM_REGION_DMABUF)
		return;
	if (begin)
		dma_buf_begin_cpu_access(r->dmabuf, dir);
	else
		dma_buf_end_cpu_access(r->dmabuf, dir);
}

/* Copy [src_pos, src_pos + n) of @src to @dst at @dst_pos. */
static void hcomm_copy(const struct hcomm_region *dst, u64 dst_pos,
		       const struct hcomm_region *src, u64 src_pos, u64 n)
{
	struct hcomm_cursor d, s;

	if (!n)
		return;
	hcomm_cpu_access(src, DMA_FROM_DEVICE, true);
	hcomm_cpu_access(dst, DMA_TO_DEVICE, true);
	hcomm_cursor_init(&d, dst, dst_pos);
	hcomm_cursor_init(&s, src, src_pos);
	while (n) {
		u64 k = n;
		void *dva = hcomm_cursor_map(&d, &k);
		void *sva = hcomm_cursor_map(&s, &k);

		/* k shrank to the shorter run; the first map is still valid */
		memcpy(dva, sva, k);
		hcomm_cursor_unmap(&s, sva);
		hcomm_cursor_unmap(&d, dva);
		hcomm_cursor_advance(&d, k);
		hcomm_cursor_advance(&s, k);
		n -= k;
	}
	hcomm_cpu_access(dst, DMA_TO_DEVICE, false);
	hcomm_cpu_access(src, DMA_FROM_DEVICE, false);
}

/* ------------------------------------------------------------------ */
/* transfers                                                           */
/* ------------------------------------------------------------------ */

/*
 * Complete fences that no longer wait for anything.  op_lock held.  An
 * io_uring fence waits until the transfers before it are retired (their
 * CQEs posted); an ioctl fence only until they ended: the ioctl caller may
 * be the very thread whose task work would post those CQEs.
 */
static void hcomm_fences_ready(struct hcomm_ctx *ctx, struct list_head *out)
{
	u64 oldest = U64_MAX, oldest_live = U64_MAX;
	struct hcomm_op *op, *tmp;

	lockdep_assert_held(&ctx->op_lock);
	list_for_each_entry(op, &ctx->pending, node) {
		if (oldest == U64_MAX)
			oldest = op->seq;
		if (!op->x.ended) {
			oldest_live = op->seq;
			break;
		}
	}
	list_for_each_entry_safe(op, tmp, &ctx->fences, node)
		if (op->seq < (op->ioucmd ? oldest : oldest_live))
			hcomm_op_claim(op, out);
}

/* Deliver the operations claimed on @list (by hcomm_op_claim()). */
static void hcomm_deliver_list(struct list_head *list)
{
	struct hcomm_op *op, *tmp;

	list_for_each_entry_safe(op, tmp, list, claimed) {
		list_del(&op->claimed);
		hcomm_op_deliver(op);
	}
}

/*
 * Take a completed transfer off its context's pending list and complete
 * the fences that waited only for it.  For io_uring transfers this runs
 * after the transfer's CQE was posted, so a fence's CQE always follows
 * the CQEs of the transfers before it.
 */
static void hcomm_xfer_retire(struct hcomm_op *op)
{
	struct hcomm_ctx *ctx = op->ctx;
	LIST_HEAD(ready);

	spin_lock(&ctx->op_lock);
	list_del_init(&op->node);
	hcomm_fences_ready(ctx, &ready);
	spin_unlock(&ctx->op_lock);
	hcomm_deliver_list(&ready);
}

/*
 * A transfer has no chunk in flight and will get no more: signal its
 * doorbell, release its regions, deliver.  Process context.
 */
static void hcomm_xfer_end(struct hcomm_op *op)
{
	if (op->x.landed == op->x.len) {
		op->res = 0;
		if (op->x.flags & (HCOMM_XFER_DB_ADD | HCOMM_XFER_DB_SET))
			hcomm_db_signal(op->x.db_ctx, op->x.db_index,
					op->x.db_value,
					op->x.flags & HCOMM_XFER_DB_SET);
	} else if (op->x.err) {
		op->res = op->x.err;
		atomic64_inc(&hcomm_stats.xfer_failed);
	} else {
		op->res = -ECANCELED;
		atomic64_inc(&hcomm_stats.xfer_cancelled);
	}
	op->res2 = op->x.landed;
	hcomm_region_put(op->x.src);
	hcomm_region_put(op->x.dst);
	if (op->x.db_ctx)
		hcomm_ctx_put(op->x.db_ctx);
	atomic64_dec(&hcomm_stats.xfers_active);
	atomic_dec(&op->ctx->xfers);

	if (!op->ioucmd) {
		hcomm_xfer_retire(op);
	} else {
		LIST_HEAD(ready);

		spin_lock(&op->ctx->op_lock);
		op->x.ended = true;
		hcomm_fences_ready(op->ctx, &ready);
		spin_unlock(&op->ctx->op_lock);
		hcomm_deliver_list(&ready);
	}
	hcomm_op_deliver(op);
}

/* Move submitted transfers of @ctx to its queue, in order.  Engine lock. */
static void hcomm_ctx_drain(struct hcomm_ctx *ctx)
{
	struct llist_node *list = llist_del_all(&ctx->incoming);
	struct hcomm_op *op, *tmp;

	lockdep_assert_held(&hcomm_engine.lock);
	list = llist_reverse_order(list);
	llist_for_each_entry_safe(op, tmp, list, x.llnode) {
		if (op->cancelled) {
			list_add_tail(&op->x.qnode, &hcomm_engine.reap);
			queue_work(hcomm_engine.wq, &hcomm_engine.reap_work);
		} else {
			list_add_tail(&op->x.qnode, &ctx->xq);
		}
	}
}

/*
 * Has @slot been out longer than slot_slow_ms?  The parameter is read once
 * (it may change at any time), clamped to HCOMM_SLOT_SLOW_MAX_MS; 0 turns
 * the rule off.
 */
static bool hcomm_slot_stalled(struct hcomm_slot *slot)
{
	unsigned int ms = min(READ_ONCE(hcomm_slot_slow_ms),
			      HCOMM_SLOT_SLOW_MAX_MS);

	return slot && ms && time_after(jiffies, slot->start +
					msecs_to_jiffies(ms));
}

/*
 * Is @ctx slow: did a chunk of it take too long in the last
 * HCOMM_SLOW_FOR, or is one taking too long now?  Engine lock.
 */
static bool hcomm_ctx_slow(struct hcomm_ctx *ctx)
{
	struct hcomm_slot *run, *ready;

	run = list_first_entry_or_null(&ctx->running, struct hcomm_slot, node);
	ready = list_first_entry_or_null(&ctx->ready, struct hcomm_slot, node);
	if (hcomm_slot_stalled(run) || hcomm_slot_stalled(ready))
		ctx->slow_until = jiffies + HCOMM_SLOW_FOR;
	return time_before(jiffies, ctx->slow_until);
}

/*
 * The most slots @ctx may hold: all of them, or while it is slow its share
 * of them, rounded up, but never all (with two or more), at least one.
 * Not all: the share is of the moment, and another context that is idle
 * between two of its transfers must find a slot when it comes back.
 * Engine lock; the share is current right after hcomm_qos_pick().
 */
static unsigned int hcomm_slot_cap(struct hcomm_ctx *ctx)
{
	u64 n = hcomm_engine.nr_slots;

	if (!hcomm_ctx_slow(ctx))
		return n;
	n = DIV_ROUND_UP_ULL(n * ctx->qos.share, HCOMM_QOS_SCALE);
	return clamp_t(u64, n, 1, max(hcomm_engine.nr_slots - 1, 1U));
}

/*
 * Pick the next chunk: the QoS scheduler names the context, its oldest
 * transfer gives the bytes.  Engine lock held.
 */
static struct hcomm_op *hcomm_engine_next(u64 *off, u64 *n)
{
	struct hcomm_engine *eng = &hcomm_engine;
	u64 chunk = hcomm_chunk_now();
	struct hcomm_qos_class *c;
	struct hcomm_ctx *ctx;
	struct hcomm_op *op;

	while ((c = hcomm_qos_pick(&eng->sched))) {
		ctx = container_of(c, struct hcomm_ctx, qos);
		hcomm_ctx_drain(ctx);
		if (list_empty(&ctx->xq)) {
			/* Idle: leave the active set unless work raced in. */
			hcomm_qos_deactivate(&eng->sched, c);
			clear_bit(0, &ctx->queued);
			/* Clear before the re-check; pairs with llist_add(). */
			smp_mb__after_atomic();
			if (!llist_empty(&ctx->incoming) &&
			    !test_and_set_bit(0, &ctx->queued))
				hcomm_qos_activate(&eng->sched, c);
			continue;
		}
		/* at its cap: passed over until it gives a slot back */
		if (ctx->slots_held >= hcomm_slot_cap(ctx)) {
			c->held = true;
			continue;
		}
		op = list_first_entry(&ctx->xq, struct hcomm_op, x.qnode);
		*off = op->x.next;
		*n = min(chunk, op->x.len - op->x.next);
		op->x.next += *n;
		op->x.inflight++;
		if (op->x.next == op->x.len)
			list_del_init(&op->x.qnode);
		hcomm_qos_charge(&eng->sched, c, *n);
		if (++ctx->slots_held >= hcomm_slot_cap(ctx))
			c->held = true;
		return op;
	}
	return NULL;
}

/*
 * May the next chunk of @op touch its regions?  Rights of another
 * context's region are checked again when they changed since the last
 * chunk (GRANT, DEREG, close); the chunk is counted until
 * hcomm_xfer_exit(), so a revoker waits for it.  *@srev and *@drev are
 * the revisions this chunk holds.
 */
static int hcomm_xfer_enter(struct hcomm_op *op, u32 *srev, u32 *drev)
{
	int ret;

	*srev = READ_ONCE(op->x.src_rev);
	*drev = READ_ONCE(op->x.dst_rev);
	ret = hcomm_region_enter(op->x.src, op->ctx, op->x.euid,
				 HCOMM_ACCESS_REMOTE_READ, srev);
	if (ret)
		return ret;
	ret = hcomm_region_enter(op->x.dst, op->ctx, op->x.euid,
				 HCOMM_ACCESS_LOCAL_WRITE, drev);
	if (ret) {
		hcomm_region_exit(op->x.src, op->ctx, *srev);
		return ret;
	}
	/* later chunks start from what this one found */
	WRITE_ONCE(op->x.src_rev, *srev);
	WRITE_ONCE(op->x.dst_rev, *drev);
	return 0;
}

static void hcomm_xfer_exit(struct hcomm_op *op, u32 srev, u32 drev)
{
	hcomm_region_exit(op->x.dst, op->ctx, drev);
	hcomm_region_exit(op->x.src, op->ctx, srev);
}

/*
 * Hand the free slots to the contexts the scheduler names and wake a
 * worker of each.  Engine lock.
 */
static void hcomm_engine_dispatch(void)
{
	struct hcomm_engine *eng = &hcomm_engine;
	struct hcomm_slot *slot;
	struct hcomm_op *op;

	lockdep_assert_held(&eng->lock);
	while ((slot = list_first_entry_or_null(&eng->free_slots,
						struct hcomm_slot, node))) {
		op = hcomm_engine_next(&slot->off, &slot->n);
		if (!op)
			break;
		slot->op = op;
		slot->start = jiffies;
		list_move_tail(&slot->node, &op->ctx->ready);
		wake_up(&op->ctx->worker_wait);
	}
}

/*
 * Copy the chunk of @slot, account for it, give the slot back and hand the
 * free slots on; the last chunk of a transfer ends it.  A chunk whose
 * rights were withdrawn (hcomm_xfer_enter()) copies nothing, and its
 * transfer gets no further chunk and ends with that error once the chunks
 * in flight have landed.
 */
static void hcomm_slot_run(struct hcomm_ctx *ctx, struct hcomm_slot *slot)
{
	struct hcomm_engine *eng = &hcomm_engine;
	struct hcomm_op *op = slot->op;
	u64 off = slot->off, n = slot->n, landed = 0;
	u32 srev, drev;
	bool end;
	int err;

	err = hcomm_xfer_enter(op, &srev, &drev);
	if (!err) {
		ktime_t t0 = ktime_get();

		hcomm_copy(op->x.dst, op->x.dst_off + off, op->x.src,
			   op->x.src_off + off, n);
		atomic64_add(ktime_to_ns(ktime_sub(ktime_get(), t0)),
			     &hcomm_stats.engine_busy_ns);
		hcomm_xfer_exit(op, srev, drev);
		atomic64_inc(&hcomm_stats.xfer_chunks);
		atomic64_add(n, &hcomm_stats.xfer_bytes);
		atomic64_add(n, &ctx->served);
		landed = n;
	}

	spin_lock(&eng->lock);
	if (err) {
		if (!op->x.err)
			op->x.err = err;
		op->cancelled = true;
		list_del_init(&op->x.qnode);
	}
	op->x.inflight--;
	op->x.landed += landed;
	end = !op->x.inflight && list_empty(&op->x.qnode) &&
	      (op->x.next == op->x.len || op->cancelled) && !op->x.finishing;
	if (end)
		op->x.finishing = true;
	if (hcomm_slot_stalled(slot))
		ctx->slow_until = jiffies + HCOMM_SLOW_FOR;
	slot->op = NULL;
	list_move(&slot->node, &eng->free_slots);
	ctx->busy--;
	ctx->slots_held--;
	ctx->qos.held = false;
	hcomm_engine_dispatch();
	spin_unlock(&eng->lock);
	if (end)
		hcomm_xfer_end(op);
}

/* End the cancelled transfers that have no chunk in flight. */
static void hcomm_reap_fn(struct work_struct *work)
{
	struct hcomm_engine *eng = &hcomm_engine;
	struct hcomm_op *op;

	for (;;) {
		spin_lock(&eng->lock);
		op = list_first_entry_or_null(&eng->reap, struct hcomm_op,
					      x.qnode);
		if (op) {
			list_del_init(&op->x.qnode);
			op->x.finishing = true;
		}
		spin_unlock(&eng->lock);
		if (!op)
			break;
		hcomm_xfer_end(op);
	}
}

static int hcomm_worker_fn(void *data);

/*
 * Start a worker of @ctx in the cgroups of @from: the submitter of the
 * first queued transfer, or a worker of @ctx that found more chunks
 * waiting than @ctx has workers (@grow).  A context that cannot grow goes
 * on with the workers it has.
 */
static int hcomm_worker_start(struct hcomm_ctx *ctx, bool grow,
			      struct task_struct *from)
{
	struct task_struct *t;
	int ret = 0;

	mutex_lock(&ctx->worker_lock);
	if (ctx->workers_stopping || (!grow && ctx->nr_workers) ||
	    ctx->nr_workers >= hcomm_engine.nr_slots)
		goto out;
	if (!ctx->workers) {
		ctx->workers = kcalloc(hcomm_engine.nr_slots,
				       sizeof(*ctx->workers),
				       GFP_KERNEL_ACCOUNT);
		if (!ctx->workers) {
			ret = -ENOMEM;
			goto out;
		}
	}
	t = kthread_create(hcomm_worker_fn, ctx, "hcomm-%d", ctx->pid);
	if (IS_ERR(t)) {
		ret = PTR_ERR(t);
		goto out;
	}
	/* A new kthread is in the root cgroups; moving costs an RCU sync. */
	if (!hcomm_same_cgroups(from, t)) {
		ret = cgroup_attach_task_all(from, t);
		if (ret) {
			kthread_stop(t);
			goto out;
		}
	}
	spin_lock(&hcomm_engine.lock);
	ctx->workers[ctx->nr_workers++] = t;
	spin_unlock(&hcomm_engine.lock);
	atomic64_inc(&hcomm_stats.workers);
	wake_up_process(t);
out:
	mutex_unlock(&ctx->worker_lock);
	return ret;
}

/*
 * A worker of a context: copies the chunks of the slots handed to the
 * context, until the context is released (hcomm_ctx_engine_release()),
 * when it has none left.  It holds no reference on the context: release
 * stops it before the context can go.
 */
static int hcomm_worker_fn(void *data)
{
	struct hcomm_engine *eng = &hcomm_engine;
	struct hcomm_ctx *ctx = data;
	struct hcomm_slot *slot;
	bool grow;

	for (;;) {
		wait_event_idle_exclusive(ctx->worker_wait,
					  !list_empty_careful(&ctx->ready) ||
					  kthread_should_stop());
		if (kthread_should_stop())
			break;
		spin_lock(&eng->lock);
		slot = list_first_entry_or_null(&ctx->ready, struct hcomm_slot,
						node);
		grow = false;
		if (slot) {
			list_move_tail(&slot->node, &ctx->running);
			ctx->busy++;
			/* more chunks wait than this context has workers */
			if (!list_empty(&ctx->ready) && !ctx->spawning &&
			    ctx->busy == ctx->nr_workers &&
			    ctx->nr_workers < eng->nr_slots) {
				ctx->spawning = true;
				grow = true;
			}
		}
		spin_unlock(&eng->lock);
		if (!slot)
			continue;
		if (grow) {
			int ret = hcomm_worker_start(ctx, true, current);

			if (ret)
				pr_warn_ratelimited("hcomm: no extra worker for pid %d: %d\n",
						    ctx->pid, ret);
			spin_lock(&eng->lock);
			ctx->spawning = false;
			spin_unlock(&eng->lock);
		}
		hcomm_slot_run(ctx, slot);
		cond_resched();
	}
	WARN_ON_ONCE(!list_empty(&ctx->ready) || !list_empty(&ctx->running));
	return 0;
}

#define HCOMM_START_RETRY	msecs_to_jiffies(100)

/*
 * The first worker of a context whose first transfer came through
 * io_uring's non-blocking issue, where no thread can be started: it is
 * started here, in the submitter's cgroups, while the transfer waits on
 * the queue in its place (punting it to io-wq would let later transfers
 * start before it).  Holds a reference on the context and on the task.
 * A thread that cannot be created is tried again; one that cannot join
 * the submitter's cgroups copies from the root cgroup (logged), so that
 * the queued transfers always end.
 */
static void hcomm_worker_start_fn(struct work_struct *work)
{
	struct hcomm_ctx *ctx = container_of(to_delayed_work(work),
					     struct hcomm_ctx, worker_start);
	struct task_struct *from = ctx->start_from;
	int ret;

	ret = hcomm_worker_start(ctx, false, from);
	if (ret && ret != -ENOMEM && ret != -EAGAIN && ret != -EINTR) {
		pr_warn_ratelimited("hcomm: pid %d: copy thread outside the submitter's cgroups: %d\n",
				    ctx->pid, ret);
		ret = hcomm_worker_start(ctx, false, current);
	}
	if (ret) {
		queue_delayed_work(hcomm_engine.wq, &ctx->worker_start,
				   HCOMM_START_RETRY);
		return;
	}
	ctx->start_from = NULL;
	put_task_struct(from);
	hcomm_ctx_put(ctx);
}

/*
 * Make sure @ctx has, or will have, a worker before its first transfer is
 * queued.  Started here unless in io_uring's non-blocking issue, where
 * starting a thread would sleep: hcomm_worker_start_fn() does it then.
 */
static int hcomm_ctx_workers_ready(struct hcomm_ctx *ctx,
				   const struct hcomm_cmd_io *io)
{
	if (READ_ONCE(ctx->nr_workers))
		return 0;
	if (!io->ioucmd || !(io->issue_flags & IO_URING_F_NONBLOCK))
		return hcomm_worker_start(ctx, false, current);
	if (!test_and_set_bit(0, &ctx->start_pending)) {
		hcomm_ctx_get(ctx);
		get_task_struct(current);
		ctx->start_from = current;
		queue_delayed_work(hcomm_engine.wq, &ctx->worker_start, 0);
	}
	return 0;
}

/* Queue @op on its context; the context joins the active set if idle. */
static void hcomm_xfer_queue(struct hcomm_op *op)
{
	struct hcomm_ctx *ctx = op->ctx;

	llist_add(&op->x.llnode, &ctx->incoming);
	/*
	 * Only a context joining the active set dispatches: while it is
	 * active it holds a slot or is next in line for one (slots stay free
	 * only when no context is active), and the dispatch that deactivates
	 * it re-checks @incoming after clearing the bit, so this transfer is
	 * seen either way.
	 */
	if (!test_and_set_bit(0, &ctx->queued)) {
		spin_lock(&hcomm_engine.lock);
		hcomm_qos_activate(&hcomm_engine.sched, &ctx->qos);
		hcomm_engine_dispatch();
		spin_unlock(&hcomm_engine.lock);
	}
}

/*
 * Cancel transfer @op: it gets no more chunks; it ends now if none is in
 * flight (through a worker, which may drop the last region references),
 * else when the last one lands.  ctx->op_lock held, so @op cannot end
 * under us; returns whether it was still cancellable.
 */
static bool hcomm_xfer_cancel_locked(struct hcomm_op *op)
{
	struct hcomm_engine *eng = &hcomm_engine;
	bool reap = false, ret = false;

	lockdep_assert_held(&op->ctx->op_lock);
	spin_lock(&eng->lock);
	hcomm_ctx_drain(op->ctx);
	if (!op->cancelled && !op->x.finishing) {
		op->cancelled = true;
		ret = true;
		if (!list_empty(&op->x.qnode)) {
			list_del_init(&op->x.qnode);
			reap = !op->x.inflight;
		}
		/* reaped by hcomm_ctx_drain() already: in eng->reap */
		if (reap) {
			list_add_tail(&op->x.qnode, &eng->reap);
			queue_work(eng->wq, &eng->reap_work);
		}
	}
	spin_unlock(&eng->lock);
	return ret;
}

static void hcomm_xfer_cancel(struct hcomm_op *op)
{
	struct hcomm_ctx *ctx = op->ctx;

	spin_lock(&ctx->op_lock);
	if (!list_empty(&op->node))
		hcomm_xfer_cancel_locked(op);
	spin_unlock(&ctx->op_lock);
}

static int hcomm_xfer_check(const struct hcomm_xfer *arg)
{
	const u32 db = HCOMM_XFER_DB_ADD | HCOMM_XFER_DB_SET;
	const u32 known = db | HCOMM_XFER_DB_REMOTE | HCOMM_XFER_NO_INLINE;

	if (arg->reserved0 || arg->reserved[0] || arg->reserved[1])
		return -EINVAL;
	if (arg->flags & ~known)
		return -EINVAL;
	if ((arg->flags & db) == db)
		return -EINVAL;
	if (!(arg->flags & db) && (arg->db_index || arg->db_value ||
				   (arg->flags & HCOMM_XFER_DB_REMOTE)))
		return -EINVAL;
	return 0;
}

/*
 * Is [off, off + len) inside @r and is @r copyable by the CPU?  For a
 * dma-buf, wait for the exporter's fences: writers before we read,
 * everyone before we write (implicit synchronisation).  io_uring's
 * non-blocking issue never sleeps here: a dma-buf not yet mapped or still
 * fenced answers -EAGAIN and the command is reissued from io-wq.  A signal
 * while an ioctl waits for fences restarts the call (nothing was copied
 * yet); an io-wq worker reports -EINTR.
 */
static int hcomm_xfer_range(struct hcomm_region *r, u64 off, u64 len,
			    bool write, const struct hcomm_cmd_io *io)
{
	enum dma_resv_usage usage = write ? DMA_RESV_USAGE_READ :
					    DMA_RESV_USAGE_WRITE;
	bool nonblock = io->ioucmd && (io->issue_flags & IO_URING_F_NONBLOCK);
	u64 end;
	long t;

	if (check_add_overflow(off, len, &end) || end > r->len)
		return -ERANGE;
	if (r->type == HCOMM_REGION_HOST)
		return 0;
	if (nonblock) {
		/* Pairs with hcomm_region_vmap()'s release. */
		if (!smp_load_acquire(&r->vmapped))
			return -EAGAIN;
	} else {
		t = hcomm_region_vmap(r);
		if (t)
			return t;
	}
	if (READ_ONCE(r->state) != HCOMM_STATE_ACTIVE)
		return -ESTALE;
	if (nonblock)
		return dma_resv_test_signaled(r->dmabuf->resv, usage) ? 0 :
								       -EAGAIN;
	t = dma_resv_wait_timeout(r->dmabuf->resv, usage, true,
				  MAX_SCHEDULE_TIMEOUT);
	if (t == -ERESTARTSYS)
		return io->ioucmd ? -EINTR : -ERESTARTSYS;
	return t < 0 ? t : 0;
}

static int hcomm_xfer_reply(void __user *uarg, struct hcomm_xfer *arg,
			    u64 done, u32 engine)
{
	if (!uarg)
		return 0;
	arg->done = done;
	arg->engine = engine;
	return copy_to_user(uarg, arg, sizeof(*arg)) ? -EFAULT : 0;
}

/*
 * The last checks before @arg may copy: its ranges inside @src and @dst,
 * and its doorbell, whose owner goes to *db_ctx (NULL: no signal).
 */
static int hcomm_xfer_prepare(struct hcomm_ctx *ctx,
			      const struct hcomm_xfer *arg,
			      struct hcomm_region *src, struct hcomm_region *dst,
			      const struct hcomm_cmd_io *io,
			      struct hcomm_ctx **db_ctx)
{
	int ret;

	*db_ctx = NULL;
	ret = hcomm_xfer_range(src, arg->src_off, arg->len, false, io);
	if (!ret)
		ret = hcomm_xfer_range(dst, arg->dst_off, arg->len, true, io);
	if (ret || !(arg->flags & (HCOMM_XFER_DB_ADD | HCOMM_XFER_DB_SET)))
		return ret;
	*db_ctx = (arg->flags & HCOMM_XFER_DB_REMOTE) ? dst->ctx : ctx;
	return hcomm_db_check(*db_ctx, arg->db_index);
}

/*
 * Copy @arg in the caller's thread (the inline path): enter both regions
 * under the revisions in *srev and *drev, copy, leave them, then ring
 * @db_ctx's doorbell if not NULL.
 */
static int hcomm_xfer_inline(struct hcomm_ctx *ctx,
			     const struct hcomm_xfer *arg,
			     struct hcomm_region *src, struct hcomm_region *dst,
			     kuid_t euid, u32 *srev, u32 *drev,
			     struct hcomm_ctx *db_ctx)
{
	int ret;

	ret = hcomm_region_enter(src, ctx, euid, HCOMM_ACCESS_REMOTE_READ, srev);
	if (ret)
		return ret;
	ret = hcomm_region_enter(dst, ctx, euid, HCOMM_ACCESS_LOCAL_WRITE, drev);
	if (ret) {
		hcomm_region_exit(src, ctx, *srev);
		return ret;
	}
	hcomm_copy(dst, arg->dst_off, src, arg->src_off, arg->len);
	hcomm_region_exit(dst, ctx, *drev);
	hcomm_region_exit(src, ctx, *srev);
	if (db_ctx)
		hcomm_db_signal(db_ctx, arg->db_index, arg->db_value,
				arg->flags & HCOMM_XFER_DB_SET);
	return 0;
}

/**
 * hcomm_xfer() - HCOMM_CMD_XFER.
 * @ctx:  the caller's context.
 * @arg:  copy of the user's argument.
 * @io:   how the command arrived.
 * @uarg: the user's argument (for done/engine), ioctl only.
 *
 * Return: 0, -EIOCBQUEUED (io_uring, completes later) or -errno.
 */
int hcomm_xfer(struct hcomm_ctx *ctx, struct hcomm_xfer *arg,
	       const struct hcomm_cmd_io *io, void __user *uarg)
{
	struct hcomm_region *src, *dst;
	struct hcomm_ctx *db_ctx;
	struct hcomm_op *op;
	u32 srev, drev, inline_max;
	kuid_t euid = current_euid();
	int ret;

	ret = hcomm_xfer_check(arg);
	if (ret)
		return ret;
	if (current->mm != ctx->mm)
		return -EPERM;
	src = hcomm_key_lookup(ctx, arg->src_key, HCOMM_ACCESS_REMOTE_READ,
			       &srev);
	if (IS_ERR(src))
		return PTR_ERR(src);
	dst = hcomm_key_lookup(ctx, arg->dst_key, HCOMM_ACCESS_LOCAL_WRITE,
			       &drev);
	if (IS_ERR(dst)) {
		ret = PTR_ERR(dst);
		goto out_src;
	}
	ret = hcomm_xfer_prepare(ctx, arg, src, dst, io, &db_ctx);
	if (ret)
		goto out_dst;

	inline_max = min_t(u32, READ_ONCE(ctx->max_inline),
			   HCOMM_MAX_INLINE_CAP);
	if (arg->len <= inline_max && !(arg->flags & HCOMM_XFER_NO_INLINE)) {
		ret = hcomm_xfer_inline(ctx, arg, src, dst, euid, &srev, &drev,
					db_ctx);
		if (ret)
			goto out_dst;
		atomic64_inc(&hcomm_stats.xfer_inline);
		atomic64_add(arg->len, &hcomm_stats.xfer_bytes);
		hcomm_region_put(dst);
		hcomm_region_put(src);
		if (io->ioucmd) {
			/* Post the CQE here so that CQE32 rings get the count. */
			hcomm_uring_cmd_done(io->ioucmd, 0, arg->len, io->issue_flags);
			return -EIOCBQUEUED;
		}
		return hcomm_xfer_reply(uarg, arg, arg->len,
					HCOMM_ENGINE_INLINE);
	}

	if (arg->len) {
		ret = hcomm_ctx_workers_ready(ctx, io);
		if (ret)
			goto out_dst;
	}
	op = hcomm_op_alloc(ctx, HCOMM_OP_XFER, arg->tag, io);
	if (!op) {
		ret = -ENOMEM;
		goto out_dst;
	}
	INIT_LIST_HEAD(&op->x.qnode);
	op->x.src = src;
	op->x.dst = dst;
	op->x.src_off = arg->src_off;
	op->x.dst_off = arg->dst_off;
	op->x.len = arg->len;
	op->x.flags = arg->flags;
	op->x.db_index = arg->db_index;
	op->x.db_value = arg->db_value;
	op->x.euid = euid;
	op->x.src_rev = srev;
	op->x.dst_rev = drev;
	if (db_ctx) {
		hcomm_ctx_get(db_ctx);
		op->x.db_ctx = db_ctx;
	}
	if (io->ioucmd) {
		ret = hcomm_op_queued(op, io);
		if (ret != -EIOCBQUEUED) {
			hcomm_op_discard(op);
			if (db_ctx)
				hcomm_ctx_put(db_ctx);
			goto out_dst;
		}
	}
	atomic64_inc(&hcomm_stats.xfer_async);
	atomic64_inc(&hcomm_stats.xfers_active);
	atomic_inc(&ctx->xfers);
	spin_lock(&ctx->op_lock);
	op->seq = ++ctx->seq;
	list_add_tail(&op->node, &ctx->pending);
	spin_unlock(&ctx->op_lock);
	if (io->ioucmd)
		hcomm_sweep_kick();
	/* A zero-length signal has nothing to copy: end it at once. */
	if (!arg->len) {
		spin_lock(&hcomm_engine.lock);
		op->x.finishing = true;
		spin_unlock(&hcomm_engine.lock);
		hcomm_xfer_end(op);
	} else {
		hcomm_xfer_queue(op);
	}
	if (io->ioucmd)
		return ret;

	ret = hcomm_op_wait(op, false, hcomm_xfer_cancel);
	if (ret != -EINTR) {
		int r2 = hcomm_xfer_reply(uarg, arg, op->res2, HCOMM_ENGINE_CPU);

		ret = ret ? ret : r2;
	}
	kfree(op);
	return ret;

out_dst:
	hcomm_region_put(dst);
out_src:
	hcomm_region_put(src);
	return ret;
}

/*
 * One region named by the descriptors of a batch: the last key looked up
 * for that role (source or destination), with its reference.  Owned by
 * the batch's submitting thread, on its stack, for the batch's length.
 */
struct hcomm_batch_slot {
	struct hcomm_region *r;
	u64 key;
	u32 rev;
};

/*
 * The region of @key for @need, looked up again only when the key
 * differs from the last one in @slot.  A kept region that was revoked
 * since answers -ENOENT, as a new lookup would; the rights of another
 * context's region are checked again by hcomm_region_enter() when its
 * revision moved.
 */
static struct hcomm_region *hcomm_batch_region(struct hcomm_ctx *ctx,
					       struct hcomm_batch_slot *slot,
					       u64 key, u32 need)
{
	struct hcomm_region *r;
	u32 rev;

	if (slot->r && slot->key == key)
		return READ_ONCE(slot->r->revoked) ? ERR_PTR(-ENOENT) : slot->r;
	r = hcomm_key_lookup(ctx, key, need, &rev);
	if (IS_ERR(r))
		return r;
	if (slot->r)
		hcomm_region_put(slot->r);
	slot->r = r;
	slot->key = key;
	slot->rev = rev;
	return r;
}

/* One descriptor of a batch, as XFER's inline path would carry it out. */
static int hcomm_batch_one(struct hcomm_ctx *ctx, const struct hcomm_xfer *d,
			   struct hcomm_batch_slot *ss,
			   struct hcomm_batch_slot *ds, u32 inline_max,
			   kuid_t euid, const struct hcomm_cmd_io *io)
{
	struct hcomm_region *src, *dst;
	struct hcomm_ctx *db_ctx;
	int ret;

	ret = hcomm_xfer_check(d);
	if (ret)
		return ret;
	if (d->tag || d->len > inline_max || (d->flags & HCOMM_XFER_NO_INLINE))
		return -EINVAL;
	src = hcomm_batch_region(ctx, ss, d->src_key, HCOMM_ACCESS_REMOTE_READ);
	if (IS_ERR(src))
		return PTR_ERR(src);
	dst = hcomm_batch_region(ctx, ds, d->dst_key, HCOMM_ACCESS_LOCAL_WRITE);
	if (IS_ERR(dst))
		return PTR_ERR(dst);
	if (src->type != HCOMM_REGION_HOST || dst->type != HCOMM_REGION_HOST)
		return -EOPNOTSUPP;
	ret = hcomm_xfer_prepare(ctx, d, src, dst, io, &db_ctx);
	if (ret)
		return ret;
	return hcomm_xfer_inline(ctx, d, src, dst, euid, &ss->rev, &ds->rev,
				 db_ctx);
}

/* Descriptors copied in from the user's array at a time. */
#define HCOMM_BATCH_CHUNK	8

/**
 * hcomm_xfer_batch() - HCOMM_CMD_XFER_BATCH.
 * @ctx:  the caller's context.
 * @arg:  copy of the user's argument; @arg->done is set.
 * @io:   how the command arrived.
 *
 * Carries out the descriptors in order, each as an inline XFER, until the
 * first that fails.  The caller reports @arg->done (ioctl: copied out;
 * io_uring: the CQE's second word).
 *
 * Return: 0 or the failing descriptor's -errno.
 */
int hcomm_xfer_batch(struct hcomm_ctx *ctx, struct hcomm_xfer_batch *arg,
		     const struct hcomm_cmd_io *io)
{
	const struct hcomm_xfer __user *udesc = u64_to_user_ptr(arg->descs);
	struct hcomm_xfer buf[HCOMM_BATCH_CHUNK];
	struct hcomm_batch_slot ss = {}, ds = {};
	kuid_t euid = current_euid();
	u64 bytes = 0;
	u32 i = 0, k, n, inline_max;
	int ret = 0;

	arg->done = 0;
	if (arg->flags || arg->reserved0 || arg->reserved[0] ||
	    arg->reserved[1])
		return -EINVAL;
	if (!arg->count || arg->count > HCOMM_BATCH_MAX ||
	    !IS_ALIGNED(arg->descs, 8))
		return -EINVAL;
	inline_max = min_t(u32, READ_ONCE(ctx->max_inline),
			   HCOMM_MAX_INLINE_CAP);
	while (i < arg->count) {
		n = min_t(u32, arg->count - i, HCOMM_BATCH_CHUNK);
		if (copy_from_user(buf, udesc + i, n * sizeof(buf[0]))) {
			ret = -EFAULT;
			break;
		}
		for (k = 0; k < n; k++) {
			ret = hcomm_batch_one(ctx, &buf[k], &ss, &ds,
					      inline_max, euid, io);
			if (ret)
				break;
			bytes += buf[k].len;
		}
		i += k;
		if (ret)
			break;
		/* Long batches: let others run, and let a dying task go. */
		if (i < arg->count && !(i % (4 * HCOMM_BATCH_CHUNK))) {
			if (fatal_signal_pending(current)) {
				ret = -EINTR;
				break;
			}
			cond_resched();
		}
	}
	if (ss.r)
		hcomm_region_put(ss.r);
	if (ds.r)
		hcomm_region_put(ds.r);
	atomic64_add(i, &hcomm_stats.xfer_inline);
	atomic64_add(bytes, &hcomm_stats.xfer_bytes);
	arg->done = i;
	return ret;
}

/* ------------------------------------------------------------------ */
/* fences                                                              */
/* ------------------------------------------------------------------ */

/* Take @op off the list it is parked on, if it still is; under @lock. */
static bool hcomm_op_take(struct hcomm_op *op, spinlock_t *lock)
{
	bool mine = false;

	spin_lock(lock);
	if (!list_empty(&op->node)) {
		list_del_init(&op->node);
		mine = true;
	}
	spin_unlock(lock);
	return mine;
}

static void hcomm_fence_cancel(struct hcomm_op *op)
{
	if (hcomm_op_take(op, &op->ctx->op_lock)) {
		op->res = -ECANCELED;
		hcomm_op_deliver(op);
	}
}

/**
 * hcomm_fence() - HCOMM_CMD_FENCE.
 * @ctx: the caller's context.
 * @arg: copy of the user's argument.
 * @io:  how the command arrived.
 *
 * Return: 0, -EIOCBQUEUED or -errno.
 */
int hcomm_fence(struct hcomm_ctx *ctx, struct hcomm_fence *arg,
		const struct hcomm_cmd_io *io)
{
	struct hcomm_op *op, *f, *tmp;
	bool mine = false;
	LIST_HEAD(ready);
	int ret = 0;

	if (arg->flags || arg->reserved0 || arg->reserved[0] ||
	    arg->reserved[1])
		return -EINVAL;
	if (current->mm != ctx->mm)
		return -EPERM;
	op = hcomm_op_alloc(ctx, HCOMM_OP_FENCE, arg->tag, io);
	if (!op)
		return -ENOMEM;
	if (io->ioucmd) {
		ret = hcomm_op_queued(op, io);
		if (ret != -EIOCBQUEUED) {
			hcomm_op_discard(op);
			return ret;
		}
	}
	spin_lock(&ctx->op_lock);
	op->seq = ctx->seq;
	list_add_tail(&op->node, &ctx->fences);
	hcomm_fences_ready(ctx, &ready);
	spin_unlock(&ctx->op_lock);
	if (io->ioucmd)
		hcomm_sweep_kick();
	list_for_each_entry_safe(f, tmp, &ready, claimed) {
		list_del(&f->claimed);
		if (f == op)
			mine = true;
		else
			hcomm_op_deliver(f);
	}
	if (mine) {
		if (!io->ioucmd) {
			hcomm_op_discard(op);
			return 0;
		}
		/* already marked: complete through the normal path */
		hcomm_op_deliver(op);
	}
	if (io->ioucmd)
		return ret;

	ret = hcomm_op_wait(op, false, hcomm_fence_cancel);
	kfree(op);
	return ret;
}

/* ------------------------------------------------------------------ */
/* doorbell waits                                                      */
/* ------------------------------------------------------------------ */

static struct list_head *hcomm_wait_bucket(struct hcomm_ctx *ctx, u32 index)
{
	return &ctx->waiters[index % HCOMM_WAIT_BUCKETS];
}

/* The list a wait parks on: its doorbell's bucket, or the shared last. */
static struct list_head *hcomm_wait_list(struct hcomm_op *op)
{
	struct hcomm_ctx *ctx = op->ctx;

	if (op->w.count == 1)
		return hcomm_wait_bucket(ctx, op->w.index[0]);
	return &ctx->waiters[HCOMM_WAIT_BUCKETS];
}

static u64 hcomm_db_read(struct hcomm_ctx *ctx, u32 index)
{
	return atomic64_read_acquire(&ctx->db[array_index_nospec(index,
								 ctx->nr_db)]);
}

/* Bit i for each doorbell of @op that reached its value. */
static u32 hcomm_wait_ready(struct hcomm_op *op)
{
	u32 i, ready = 0;

	for (i = 0; i < op->w.count; i++)
		if (hcomm_db_read(op->ctx, op->w.index[i]) >= op->w.value[i])
			ready |= BIT(i);
	return ready;
}

/* What a wait reports besides its result: a value, or DB_WAIT_ANY's bits. */
static u64 hcomm_wait_out(struct hcomm_op *op)
{
	if (op->w.any)
		return hcomm_wait_ready(op);
	return hcomm_db_read(op->ctx, op->w.index[0]);
}

/*
 * End a wait taken off ctx->waiters by the caller: @sync_timer unless the
 * caller is the wait's own timeout work.  The timer is stopped first (it
 * queues the work), and is done with before the operation is freed.
 */
static void hcomm_wait_end(struct hcomm_op *op, int res, bool sync_timer)
{
	hrtimer_cancel(&op->w.timer);
	if (sync_timer)
		cancel_work_sync(&op->w.timeout);
	op->res = res;
	op->res2 = hcomm_wait_out(op);
	atomic64_dec(&hcomm_stats.waits_pending);
	hcomm_op_deliver(op);
}

/**
 * hcomm_db_wake() - complete the waits on doorbell @index that now hold.
 * @ctx:   context owning the doorbell.
 * @index: the doorbell just signalled.
 *
 * The waits on one doorbell are in its bucket; those on several
 * (DB_WAIT_ANY) all in the last list, looked at only when it is not empty.
 */
void hcomm_db_wake(struct hcomm_ctx *ctx, u32 index)
{
	struct list_head *any = &ctx->waiters[HCOMM_WAIT_BUCKETS];
	struct hcomm_op *op, *tmp;
	LIST_HEAD(ready);

	spin_lock(&ctx->db_lock);
	list_for_each_entry_safe(op, tmp, hcomm_wait_bucket(ctx, index), node) {
		if (op->w.index[0] == index && hcomm_wait_ready(op))
			hcomm_op_claim(op, &ready);
	}
	list_for_each_entry_safe(op, tmp, any, node) {
		if (hcomm_wait_ready(op))
			hcomm_op_claim(op, &ready);
	}
	spin_unlock(&ctx->db_lock);
	list_for_each_entry_safe(op, tmp, &ready, claimed) {
		list_del(&op->claimed);
		atomic64_inc(&hcomm_stats.db_wakeups);
		hcomm_wait_end(op, 0, true);
	}
}

/*
 * Arm the timeout of a parked wait at its deadline (CLOCK_MONOTONIC, as
 * ktime_get()): a high-resolution timer, so that a timeout of 100 us
 * ends after about 100 us, not at the next timer tick (4 ms with
 * HZ=250), within the waiter's timer slack as nanosleep() would be (so
 * that many waits share an interrupt).  It runs in hard interrupt context
 * and only queues the timeout's work, which ends the wait under db_lock.
 * A deadline already past (a 1 ns timeout) fires at once.  db_lock held.
 */
static void hcomm_wait_arm(struct hcomm_op *op)
{
	lockdep_assert_held(&op->ctx->db_lock);
	hrtimer_start_range_ns(&op->w.timer, op->w.deadline, op->w.slack,
			       HRTIMER_MODE_ABS);
}

static enum hrtimer_restart hcomm_wait_timer(struct hrtimer *t)
{
	struct hcomm_op *op = container_of(t, struct hcomm_op, w.timer);

	queue_work(hcomm_engine.timer_wq, &op->w.timeout);
	return HRTIMER_NORESTART;
}

static void hcomm_wait_timeout(struct work_struct *work)
{
	struct hcomm_op *op = container_of(work, struct hcomm_op, w.timeout);
	bool mine = false;

	spin_lock(&op->ctx->db_lock);
	if (!list_empty(&op->node)) {
		if (ktime_before(ktime_get(), op->w.deadline)) {
			hcomm_wait_arm(op);	/* not reached: never early */
		} else {
			list_del_init(&op->node);
			mine = true;
		}
	}
	spin_unlock(&op->ctx->db_lock);
	if (mine)
		hcomm_wait_end(op, -ETIME, false);
}

/*
 * The absolute deadline of a wait of @timeout_ns from @now; KTIME_MAX
 * (never) for 0 and for anything that would overflow ktime_t.
 */
static ktime_t hcomm_wait_deadline(ktime_t now, u64 timeout_ns)
{
	if (!timeout_ns || timeout_ns >= (u64)(KTIME_MAX - now))
		return KTIME_MAX;
	return ktime_add_ns(now, timeout_ns);
}

static void hcomm_wait_cancel(struct hcomm_op *op)
{
	if (hcomm_op_take(op, &op->ctx->db_lock))
		hcomm_wait_end(op, -ECANCELED, true);
}

/*
 * Run the wait @op (its doorbells and deadline filled in): it completes at
 * once when a doorbell holds already, else parks; an ioctl sleeps until it
 * ends.  *@out is what the wait reports (hcomm_wait_out()).  *@copy says
 * whether the caller writes its argument back (ioctl): after a wait that
 * ended, and with the time left in *@timeout_ns when a signal interrupted
 * a finite one (-ERESTARTSYS).  Consumes @op.
 *
 * Return: 0, -EIOCBQUEUED (parked through io_uring) or -errno.
 */
static int hcomm_wait_run(struct hcomm_ctx *ctx, struct hcomm_op *op,
			  const struct hcomm_cmd_io *io, u64 *timeout_ns,
			  u64 *out, bool *copy)
{
	u32 first = op->w.index[0];	/* @op may be gone once parked */
	ktime_t deadline;
	int ret = 0;

	*copy = false;
	op->w.slack = current->timer_slack_ns;
	hrtimer_init(&op->w.timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS);
	op->w.timer.function = hcomm_wait_timer;
	INIT_WORK(&op->w.timeout, hcomm_wait_timeout);

	spin_lock(&ctx->db_lock);
	if (hcomm_wait_ready(op)) {
		spin_unlock(&ctx->db_lock);
		*out = hcomm_wait_out(op);
		*copy = true;
		hcomm_op_discard(op);
		return 0;
	}
	spin_unlock(&ctx->db_lock);
	if (io->ioucmd) {
		ret = hcomm_op_queued(op, io);
		if (ret != -EIOCBQUEUED) {
			hcomm_op_discard(op);
			return ret;
		}
	}
	atomic64_inc(&hcomm_stats.waits_pending);
	spin_lock(&ctx->db_lock);
	list_add_tail(&op->node, hcomm_wait_list(op));
	if (op->w.deadline != KTIME_MAX)
		hcomm_wait_arm(op);
	spin_unlock(&ctx->db_lock);
	if (io->ioucmd)
		hcomm_sweep_kick();
	/*
	 * A signal between the check and the parking must not be lost (one
	 * wake covers them all: it looks at the whole of a DB_WAIT_ANY).
	 */
	hcomm_db_wake(ctx, first);
	if (io->ioucmd)
		return ret;

	deadline = op->w.deadline;
	ret = hcomm_op_wait(op, true, hcomm_wait_cancel);
	*out = op->res2;
	kfree(op);
	if (ret == -EINTR) {
		/*
		 * A signal, or only io_uring task work of this thread: let
		 * the syscall be restarted (transparently when no handler
		 * runs) with the time that is left, as select(2) does.
		 */
		if (deadline != KTIME_MAX) {
			s64 left = ktime_to_ns(ktime_sub(deadline, ktime_get()));

			if (left <= 0)
				return -ETIME;
			*timeout_ns = left;
			*copy = true;
		}
		return -ERESTARTSYS;
	}
	*copy = true;
	return ret;
}

/**
 * hcomm_db_wait() - HCOMM_CMD_DB_WAIT.
 * @ctx:  the caller's context.
 * @arg:  copy of the user's argument.
 * @io:   how the command arrived.
 * @uarg: the user's argument (for current_value), ioctl only.
 *
 * Return: 0, -EIOCBQUEUED or -errno.
 */
int hcomm_db_wait(struct hcomm_ctx *ctx, struct hcomm_db_wait *arg,
		  const struct hcomm_cmd_io *io, void __user *uarg)
{
	struct hcomm_op *op;
	bool copy;
	int ret;

	if (arg->flags || arg->reserved[0] || arg->reserved[1])
		return -EINVAL;
	if (current->mm != ctx->mm)
		return -EPERM;
	ret = hcomm_db_check(ctx, arg->index);
	if (ret)
		return ret;
	op = hcomm_op_alloc(ctx, HCOMM_OP_WAIT, arg->tag, io);
	if (!op)
		return -ENOMEM;
	op->w.count = 1;
	op->w.index[0] = arg->index;
	op->w.value[0] = arg->value;
	op->w.deadline = hcomm_wait_deadline(ktime_get(), arg->timeout_ns);
	ret = hcomm_wait_run(ctx, op, io, &arg->timeout_ns,
			     &arg->current_value, &copy);
	if (copy && uarg && copy_to_user(uarg, arg, sizeof(*arg)))
		return -EFAULT;
	return ret;
}

/**
 * hcomm_db_wait_any() - HCOMM_CMD_DB_WAIT_ANY.
 * @ctx:  the caller's context.
 * @arg:  copy of the user's argument; @arg->ready is set when it ended.
 * @io:   how the command arrived.
 * @uarg: the user's argument (for ready), ioctl only.
 *
 * Return: 0, -EIOCBQUEUED or -errno.
 */
int hcomm_db_wait_any(struct hcomm_ctx *ctx, struct hcomm_db_wait_any *arg,
		      const struct hcomm_cmd_io *io, void __user *uarg)
{
	struct hcomm_op *op;
	u64 ready = 0;
	bool copy;
	u32 i;
	int ret;

	arg->ready = 0;
	if (arg->flags || arg->reserved0 || arg->reserved[0] ||
	    arg->reserved[1])
		return -EINVAL;
	if (!arg->count || arg->count > HCOMM_DB_WAIT_ANY_MAX)
		return -EINVAL;
	for (i = arg->count; i < HCOMM_DB_WAIT_ANY_MAX; i++)
		if (arg->index[i] || arg->value[i])
			return -EINVAL;
	if (current->mm != ctx->mm)
		return -EPERM;
	for (i = 0; i < arg->count; i++) {
		ret = hcomm_db_check(ctx, arg->index[i]);
		if (ret)
			return ret;
	}
	op = hcomm_op_alloc(ctx, HCOMM_OP_WAIT, arg->tag, io);
	if (!op)
		return -ENOMEM;
	op->w.count = arg->count;
	op->w.any = true;
	memcpy(op->w.index, arg->index, sizeof(op->w.index));
	memcpy(op->w.value, arg->value, sizeof(op->w.value));
	op->w.deadline = hcomm_wait_deadline(ktime_get(), arg->timeout_ns);
	ret = hcomm_wait_run(ctx, op, io, &arg->timeout_ns, &ready, &copy);
	arg->ready = ready;
	if (copy && uarg && copy_to_user(uarg, arg, sizeof(*arg)))
		return -EFAULT;
	return ret;
}

/* ------------------------------------------------------------------ */
/* cancellation                                                        */
/* ------------------------------------------------------------------ */

/*
 * Which operations a cancel ends: those with @tag, every one (@all), or
 * (@orphans) the io_uring commands whose ring or task is going away, in
 * which case @left counts the io_uring commands left parked.
 */
struct hcomm_cancel_sel {
	u64 tag;
	bool all;
	bool orphans;
	unsigned int left;
};

static bool hcomm_cancel_wants(struct hcomm_op *op,
			       struct hcomm_cancel_sel *sel)
{
	if (!sel->orphans)
		return sel->all || op->tag == sel->tag;
	if (!op->ioucmd)
		return false;
	if (hcomm_uring_orphaned(op->ioucmd))
		return true;
	sel->left++;
	return false;
}

/* Cancel the operations of @ctx that @sel names; returns how many. */
static unsigned int hcomm_cancel_select(struct hcomm_ctx *ctx,
					struct hcomm_cancel_sel *sel)
{
	struct hcomm_op *op, *tmp;
	unsigned int count = 0, i;
	LIST_HEAD(fences);
	LIST_HEAD(waits);

	spin_lock(&ctx->op_lock);
	list_for_each_entry(op, &ctx->pending, node)
		if (hcomm_cancel_wants(op, sel) && hcomm_xfer_cancel_locked(op))
			count++;
	list_for_each_entry_safe(op, tmp, &ctx->fences, node)
		if (hcomm_cancel_wants(op, sel))
			hcomm_op_claim(op, &fences);
	spin_unlock(&ctx->op_lock);

	spin_lock(&ctx->db_lock);
	for (i = 0; i < ARRAY_SIZE(ctx->waiters); i++)
		list_for_each_entry_safe(op, tmp, &ctx->waiters[i], node)
			if (hcomm_cancel_wants(op, sel))
				hcomm_op_claim(op, &waits);
	spin_unlock(&ctx->db_lock);

	list_for_each_entry_safe(op, tmp, &fences, claimed) {
		list_del(&op->claimed);
		op->res = -ECANCELED;
		hcomm_op_deliver(op);
		count++;
	}
	list_for_each_entry_safe(op, tmp, &waits, claimed) {
		list_del(&op->claimed);
		hcomm_wait_end(op, -ECANCELED, true);
		count++;
	}
	return count;
}

/**
 * hcomm_ctx_cancel_orphans() - end the io_uring commands of @ctx whose ring
 * is going away or whose task cancels its requests.
 * @ctx: a context (on hcomm_ctx_list).
 *
 * Only for kernels without IO_URING_F_CANCEL (see hcomm_uring_orphaned()).
 *
 * Return: io_uring commands of @ctx still parked.
 */
unsigned int hcomm_ctx_cancel_orphans(struct hcomm_ctx *ctx)
{
	struct hcomm_cancel_sel sel = { .orphans = true };

	hcomm_cancel_select(ctx, &sel);
	return sel.left;
}

/**
 * hcomm_cancel() - HCOMM_CMD_CANCEL.
 * @ctx: the caller's context.
 * @tag: tag to match.
 * @all: cancel everything pending.
 *
 * Return: the number of operations cancelled.
 */
int hcomm_cancel(struct hcomm_ctx *ctx, u64 tag, bool all)
{
	struct hcomm_cancel_sel sel = { .tag = tag, .all = all };

	return hcomm_cancel_select(ctx, &sel);
}

/**
 * hcomm_ctx_cancel_all() - end every pending operation of @ctx.
 * @ctx: a context whose process is exiting.
 */
void hcomm_ctx_cancel_all(struct hcomm_ctx *ctx)
{
	hcomm_cancel(ctx, 0, true);
}

/**
 * hcomm_uring_cancel() - io_uring asks to cancel a pending command
 * (IO_URING_F_CANCEL: the ring or the task is going away).
 * @ioucmd: a command this driver returned -EIOCBQUEUED for and marked
 *          cancelable; it is still pending, so its operation is alive.
 */
void hcomm_uring_cancel(struct io_uring_cmd *ioucmd)
{
	struct hcomm_op *op = hcomm_pdu(ioucmd)->op;

	switch (op->kind) {
	case HCOMM_OP_XFER:
		hcomm_xfer_cancel(op);
		break;
	case HCOMM_OP_FENCE:
		hcomm_fence_cancel(op);
		break;
	case HCOMM_OP_WAIT:
		hcomm_wait_cancel(op);
		break;
	}
}

/* ------------------------------------------------------------------ */
/* QoS and the engine's lifetime                                       */
/* ------------------------------------------------------------------ */

/**
 * hcomm_set_qos() - HCOMM_CMD_SET_QOS.
 * @ctx: the caller's context.
 * @arg: copy of the user's argument.
 *
 * Return: 0, -EINVAL, -EPERM or -ENOSPC.
 */
int hcomm_set_qos(struct hcomm_ctx *ctx, struct hcomm_qos *arg)
{
	struct hcomm_engine *eng = &hcomm_engine;
	u32 limit;
	int ret;

	if (arg->flags || arg->reserved[0] || arg->reserved[1])
		return -EINVAL;
	ret = hcomm_qos_validate(arg->min_rate, arg->max_rate, arg->priority);
	if (ret)
		return ret;
	/*
	 * Raising a priority above what the administrator allows every user
	 * (module parameter qos_user_priority, default 0) holds other users
	 * back: CAP_SYS_NICE, as for nice(2).  Lowering one's own is never
	 * refused.
	 */
	if (arg->priority > READ_ONCE(hcomm_qos_user_priority) &&
	    arg->priority > READ_ONCE(ctx->qos.priority) &&
	    !capable(CAP_SYS_NICE))
		return -EPERM;
	/*
	 * Guarantees likewise: the min_rates of one user's contexts together
	 * stay within qos_user_min_rate unless the caller has CAP_SYS_NICE,
	 * those of everybody within 100, and lowering is never refused
	 * (hcomm_qos_admit()).
	 */
	limit = READ_ONCE(hcomm_qos_user_min_rate);
again:
	spin_lock(&eng->lock);
	ret = hcomm_qos_admit(&eng->sched, &ctx->qos, arg->min_rate, limit);
	if (!ret)
		hcomm_qos_set(&eng->sched, &ctx->qos, arg->min_rate,
			      arg->max_rate, arg->priority);
	spin_unlock(&eng->lock);
	if (ret == -EPERM && limit < 100 && capable(CAP_SYS_NICE)) {
		limit = 100;
		goto again;
	}
	return ret;
}

/**
 * hcomm_ctx_qos_info() - QoS settings of @ctx and the share it gets now.
 * @ctx:   context.
 * @out:   min_rate, max_rate and priority are filled.
 * @share: percent of the engine it receives now (0 when idle).
 * @eng:   its slots, copy threads and whether it counts as slow now.
 */
void hcomm_ctx_qos_info(struct hcomm_ctx *ctx, struct hcomm_qos *out,
			u32 *share, struct hcomm_ctx_engine_info *eng)
{
	spin_lock(&hcomm_engine.lock);
	out->min_rate = ctx->qos.min_rate;
	out->max_rate = ctx->qos.max_rate;
	out->priority = ctx->qos.priority;
	*share = hcomm_qos_share(&hcomm_engine.sched, &ctx->qos);
	eng->slots = ctx->slots_held;
	eng->workers = ctx->nr_workers;
	eng->slow = time_before(jiffies, ctx->slow_until);
	spin_unlock(&hcomm_engine.lock);
}

/**
 * hcomm_ctx_engine_init() - engine state of a new context.
 * @ctx: the context.
 *
 * The context joins the QoS user of the caller's effective uid, which is
 * created with its first context and freed with its last.
 *
 * Return: 0 or -ENOMEM.
 */
int hcomm_ctx_engine_init(struct hcomm_ctx *ctx)
{
	struct hcomm_qos_user *spare;
	unsigned int i;

	spare = hcomm_qos_user_alloc(current_euid(), GFP_KERNEL_ACCOUNT);
	if (!spare)
		return -ENOMEM;
	spin_lock_init(&ctx->op_lock);
	spin_lock_init(&ctx->db_lock);
	mutex_init(&ctx->db_mutex);
	INIT_LIST_HEAD(&ctx->pending);
	INIT_LIST_HEAD(&ctx->fences);
	for (i = 0; i < ARRAY_SIZE(ctx->waiters); i++)
		INIT_LIST_HEAD(&ctx->waiters[i]);
	INIT_LIST_HEAD(&ctx->xq);
	init_llist_head(&ctx->incoming);
	mutex_init(&ctx->worker_lock);
	init_waitqueue_head(&ctx->worker_wait);
	INIT_DELAYED_WORK(&ctx->worker_start, hcomm_worker_start_fn);
	ctx->slow_until = jiffies;
	INIT_LIST_HEAD(&ctx->ready);
	INIT_LIST_HEAD(&ctx->running);
	hcomm_qos_class_init(&ctx->qos);
	ctx->max_inline = hcomm_max_inline_now();
	spin_lock(&hcomm_engine.lock);
	hcomm_qos_attach(&hcomm_engine.sched, &ctx->qos, &spare);
	spin_unlock(&hcomm_engine.lock);
	hcomm_qos_user_free(spare);	/* the user existed already */
	return 0;
}

/**
 * hcomm_ctx_engine_release() - leave the engine for good.
 * @ctx: a context with no operation left (its file is being released).
 */
void hcomm_ctx_engine_release(struct hcomm_ctx *ctx)
{
	struct hcomm_engine *eng = &hcomm_engine;
	struct hcomm_qos_user *gone;
	unsigned int i, n;

	spin_lock(&eng->lock);
	clear_bit(0, &ctx->queued);
	/* deactivates, gives the min_rate back, drops the user */
	gone = hcomm_qos_detach(&eng->sched, &ctx->qos);
	spin_unlock(&eng->lock);
	hcomm_qos_user_free(gone);
	WARN_ON_ONCE(!list_empty(&ctx->pending) || !list_empty(&ctx->xq) ||
		     !list_empty(&ctx->fences));
	for (i = 0; i < ARRAY_SIZE(ctx->waiters); i++)
		WARN_ON_ONCE(!list_empty(&ctx->waiters[i]));

	/*
	 * No operation is left, so no slot is handed to us any more; a worker
	 * may still be returning one.  A start still pending (only after
	 * failures: its transfers were all cancelled) is called off.  No
	 * worker is added after this.
	 */
	cancel_delayed_work_sync(&ctx->worker_start);
	if (ctx->start_from) {
		put_task_struct(ctx->start_from);
		ctx->start_from = NULL;
		hcomm_ctx_put(ctx);	/* the file still holds one */
	}
	mutex_lock(&ctx->worker_lock);
	ctx->workers_stopping = true;
	n = ctx->nr_workers;
	mutex_unlock(&ctx->worker_lock);
	for (i = 0; i < n; i++) {
		kthread_stop(ctx->workers[i]);
		atomic64_dec(&hcomm_stats.workers);
	}
	kfree(ctx->workers);
	ctx->workers = NULL;
	mutex_destroy(&ctx->worker_lock);
}

/**
 * hcomm_engine_init() - set up the engine's slots and workqueues.
 *
 * Return: 0 or -ENOMEM.
 */
int hcomm_engine_init(void)
{
	struct hcomm_engine *eng = &hcomm_engine;
	unsigned int i, n = READ_ONCE(hcomm_workers);

	if (!n)
		n = num_online_cpus();
	n = clamp_t(unsigned int, n, 1, 64);
	spin_lock_init(&eng->lock);
	hcomm_qos_sched_init(&eng->sched);
	INIT_LIST_HEAD(&eng->reap);
	INIT_LIST_HEAD(&eng->free_slots);
	INIT_WORK(&eng->reap_work, hcomm_reap_fn);
	eng->slots = kcalloc(n, sizeof(*eng->slots), GFP_KERNEL);
	if (!eng->slots)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		list_add_tail(&eng->slots[i].node, &eng->free_slots);
	eng->wq = alloc_workqueue("hcomm_engine", WQ_UNBOUND, 1);
	if (!eng->wq)
		goto err_free;
	/* Timeouts have a queue of their own: destroying it waits for them. */
	eng->timer_wq = alloc_workqueue("hcomm_wait", 0, 0);
	if (!eng->timer_wq)
		goto err_destroy;
	eng->nr_slots = n;
	hcomm_workers = n;
	return 0;

err_destroy:
	destroy_workqueue(eng->wq);
err_free:
	kfree(eng->slots);
	return -ENOMEM;
}

/**
 * hcomm_engine_exit() - stop the engine; no context exists any more.
 */
void hcomm_engine_exit(void)
{
	destroy_workqueue(hcomm_engine.timer_wq);
	destroy_workqueue(hcomm_engine.wq);
	kfree(hcomm_engine.slots);
}
