/* SPDX-License-Identifier: MIT */
/*
 * libhcomm: the "kernel" transport - every rank on this host, each with its
 * own /dev/hcomm context; a put or get is one HCOMM_CMD_XFER between the
 * caller's region and the target's window region (single copy, done by
 * the module, across address spaces through keys and grants).
 *
 * Queues: num_qps io_uring rings (IORING_SETUP_CQE32 when the kernel has
 * it: the byte count comes in big_cqe[0]), queue_depth entries each.  A
 * thread submits on ring (thread index % num_qps).  Each ring has:
 *
 *  - a submit lock (SQ side, slot allocation): held only while SQEs are
 *    prepared and io_uring_submit() runs, never while completing;
 *  - a reap lock (CQ side), taken with trylock: one thread reaps a ring at
 *    a time, others skip it.  CQEs are copied out under it; requests are
 *    completed after it is dropped, all of them before any callback runs;
 *  - slots[nslots]: the XFER/FENCE argument structs the kernel reads until
 *    the CQE (io-wq may reissue a command), each with its request and the
 *    registration-cache entry it holds.  At most nslots operations are in
 *    flight on a ring, which keeps the CQ ring (2 * nslots) from
 *    overflowing; a full ring is submitted and reaped until a slot frees,
 *    never dropped.
 *
 * Completions of asynchronous transfers are posted by the submitting
 * thread's io_uring task work (the kernel notifies it like a signal), so
 * any thread may reap them once they are posted.
 *
 * Without io_uring (HCOMM_NO_URING=1, or the module or kernel cannot do
 * uring_cmd) every operation is a blocking ioctl() and completes inside
 * the call that issued it; the callbacks of a batch run once every
 * descriptor of it has been executed.
 *
 * Signals are the context's doorbells, mapped; the generation page is
 * mapped for the registration cache.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "hcomm_comm_int.h"

#define KX_REAP_BATCH		64
#define KX_RCACHE_ENTRIES	256
#define KX_SPIN_NS		20000		/* signal_wait spin */
#define KX_ANY_SLICE_NS		100000		/* signal_wait_any's sleeps: */
#define KX_ANY_SLICE_MAX_NS	2000000		/* doubling up to this */
#define KX_BATCH_MIN		4		/* inline transfers in a row that */
#define KX_BATCH_MAX		64		/* go as one XFER_BATCH, at most */

enum { SLOT_XFER = 1, SLOT_FENCE, SLOT_NOP, SLOT_BATCH };

/*
 * struct kx_batch - a run of inline transfers carried by one
 * HCOMM_CMD_XFER_BATCH (a SLOT_BATCH slot owns it from preparation until
 * reaped, or the ioctl path for the call).
 */
struct kx_batch {
	struct hcomm_xfer_batch b;	/* b.descs = x */
	unsigned int n;
	struct hcomm_xfer x[KX_BATCH_MAX];
	struct hcomm_request *req[KX_BATCH_MAX];
	struct hcomm_rc_ent *ent[KX_BATCH_MAX];
	int target[KX_BATCH_MAX];
	uint8_t get[KX_BATCH_MAX];
};

/*
 * struct kx_slot - one operation in flight on a ring.
 * @arg:  what the SQE points at (valid until the CQE).
 * @batch: SLOT_BATCH: the run of transfers (its own requests and cache
 *        entries; @req and @ent are NULL).
 * @req:  its request.
 * @ent:  registration-cache entry of the local buffer, or NULL.
 * @len:  bytes asked (the count when the ring has no CQE32).
 * @busy: 1 from preparation until reaped (atomic; set under the submit
 *        lock, cleared by the reaper).
 * @kind: SLOT_*.
 */
struct kx_slot {
	union {
		struct hcomm_xfer x;
		struct hcomm_fence f;
	} arg;
	struct kx_batch *batch;
	struct hcomm_request *req;
	struct hcomm_rc_ent *ent;
	uint64_t len;
	int busy;
	int kind;
	int target;
	int get;
};

struct kx_ring {
	struct io_uring ring;
	pthread_mutex_t submit_lock;	/* SQ, cursor */
	pthread_mutex_t reap_lock;	/* CQ (trylock) */
	struct kx_slot *slots;
	unsigned int nslots;
	unsigned int cursor;
	unsigned int inflight;		/* atomic */
	int fixed;			/* the device is registered file 0 */
	int ready;
} __attribute__((aligned(64)));

/*
 * What this rank moved to or from one peer (relaxed atomic adds at
 * completion; the kernel copies, so nothing is "received": ops_recv 0).
 */
struct kx_pstat {
	uint64_t bytes_sent;		/* puts */
	uint64_t bytes_recv;		/* gets */
	uint64_t ops;			/* transfers completed, no error */
};

struct kx {
	struct hcomm_ctx *ctx;
	struct kx_pstat *pst;		/* [size] */
	int fd;
	struct hcomm_info info;
	int uring;
	int cqe32;
	int ext_arg;
	int batch;			/* runs go as HCOMM_CMD_XFER_BATCH */
	int wait_any;			/* HCOMM_CMD_DB_WAIT_ANY */
	unsigned int batch_max;		/* bytes a descriptor of one may move
					 * (the context's max_inline) */
	uint64_t *db;
	size_t db_len;
	uint32_t nr_db;
	const uint64_t *gen;
	struct kx_ring *rings;
	unsigned int nrings;
	struct hcomm_rcache *rc;
	int evfd;
	/*
	 * A page of its own registered for signals other transports
	 * receive (kx_signal_add): key, or 0 until first used; sig_lock
	 * guards its creation.
	 */
	pthread_mutex_t sig_lock;
	void *sig_page;
	uint64_t sig_key;
	uint32_t sig_region;
};

static struct kx *kx_of(const struct hcomm_comm *c)
{
	return c->xps[HCOMM_XP_KERNEL];
}

/* This thread's ring. */
static unsigned int kx_thread_ring(const struct kx *kx)
{
	return hcomm__thread_index() % kx->nrings;
}

/* ------------------------------------------------------------------ */
/* completions                                                         */
/* ------------------------------------------------------------------ */

/* A transfer to or from target moved bytes. */
static void kx_count(struct kx *kx, int target, int get, uint64_t bytes)
{
	struct kx_pstat *p = &kx->pst[target];

	__atomic_add_fetch(get ? &p->bytes_recv : &p->bytes_sent, bytes,
			   __ATOMIC_RELAXED);
	__atomic_add_fetch(&p->ops, 1, __ATOMIC_RELAXED);
}

struct kx_cqe {
	struct kx_slot *slot;
	int res;
	uint64_t big;
};

static void kx_batch_end(struct hcomm_comm *c, struct kx_batch *b, int res,
			 uint64_t done);

/*
 * Reap up to KX_REAP_BATCH CQEs of @r; wait up to wait_us for the first
 * when there is none (only where the kernel takes a timeout without an
 * SQE).  Completes every request of the grab after the reap lock is
 * dropped, and only then runs their callbacks (hcomm__run_pending), so a
 * callback that waits for another request of the same grab finds it
 * complete.
 */
static int kx_reap(struct hcomm_comm *c, struct kx_ring *r, int64_t wait_us)
{
	struct kx *kx = kx_of(c);
	struct kx_cqe got[KX_REAP_BATCH];
	struct io_uring_cqe *cqe;
	unsigned int head, n = 0, k;
	int done = 0;

	if (pthread_mutex_trylock(&r->reap_lock))
		return 0;
	if (wait_us && kx->ext_arg && !io_uring_cq_ready(&r->ring)) {
		struct __kernel_timespec ts = {
			.tv_sec = wait_us / 1000000,
			.tv_nsec = (wait_us % 1000000) * 1000,
		};

		/* -ETIME, -EINTR: nothing came; the CQ is read below. */
		(void)io_uring_wait_cqe_timeout(&r->ring, &cqe, &ts);
	}
	io_uring_for_each_cqe(&r->ring, head, cqe) {
		got[n].slot = (struct kx_slot *)(uintptr_t)cqe->user_data;
		got[n].res = cqe->res;
		got[n].big = kx->cqe32 ? cqe->big_cqe[0] : 0;
		if (++n == KX_REAP_BATCH)
			break;
	}
	io_uring_cq_advance(&r->ring, n);
	pthread_mutex_unlock(&r->reap_lock);

	for (k = 0; k < n; k++) {
		struct kx_slot *s = got[k].slot;
		struct hcomm_request *req;
		struct hcomm_rc_ent *ent;
		uint64_t bytes = 0;
		int res = got[k].res;

		if (!s)
			continue;
		/* Pairs with kx_slot_publish(): the slot and its request. */
		(void)__atomic_load_n(&s->busy, __ATOMIC_ACQUIRE);
		if (s->kind == SLOT_BATCH) {
			struct kx_batch *b = s->batch;

			s->batch = NULL;
			__atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
			__atomic_sub_fetch(&r->inflight, 1, __ATOMIC_RELEASE);
			kx_batch_end(c, b, res, got[k].big);
			done++;
			continue;
		}
		req = s->req;
		ent = s->ent;
		if (s->kind == SLOT_XFER) {
			bytes = kx->cqe32 ? got[k].big : (res ? 0 : s->len);
			if (res >= 0)
				kx_count(kx, s->target, s->get, bytes);
		}
		__atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
		__atomic_sub_fetch(&r->inflight, 1, __ATOMIC_RELEASE);
		hcomm__rcache_put(ent);
		hcomm__complete(c, req, res < 0 ? -res : 0, bytes);
		done++;
	}
	hcomm__run_pending();
	return done;
}

/* Drain @r as far as it goes now. */
static int kx_reap_all(struct hcomm_comm *c, struct kx_ring *r)
{
	int n, total = 0, rounds = 16;

	do {
		n = kx_reap(c, r, 0);
		total += n;
	} while (n == KX_REAP_BATCH && --rounds);
	return total;
}

static int kx_progress(struct hcomm_comm *c)
{
	struct kx *kx = kx_of(c);
	unsigned int i, first;
	int total = 0;

	if (!kx->uring)
		return 0;
	first = kx_thread_ring(kx);
	for (i = 0; i < kx->nrings; i++) {
		struct kx_ring *r = &kx->rings[(first + i) % kx->nrings];

		if (__atomic_load_n(&r->inflight, __ATOMIC_ACQUIRE))
			total += kx_reap_all(c, r);
	}
	return total;
}

/*
 * Wait on one ring: run this thread's task work (completions of what it
 * submitted), then wait for a CQE if nobody else is reaping the ring.
 */
static int kx_block_ring(struct hcomm_comm *c, struct kx_ring *r,
			 int64_t timeout_us)
{
	int n;

	(void)io_uring_get_events(&r->ring);
	n = kx_reap(c, r, timeout_us > 0 ? timeout_us : 1000);
	if (!n)
		sched_yield();
	return n;
}

static int kx_block(struct hcomm_comm *c, struct hcomm_request *req,
		    int64_t timeout_us)
{
	struct kx *kx = kx_of(c);
	struct pollfd pfd;
	unsigned int i, first;
	uint64_t v;
	int ret;

	if (req && kx->uring)
		return kx_block_ring(c, &kx->rings[hcomm__req_priv(req)->ring %
						  kx->nrings], timeout_us);
	if (kx->evfd >= 0) {
		/* The callback progress thread: any ring, or a wake-up. */
		pfd.fd = kx->evfd;
		pfd.events = POLLIN;
		ret = poll(&pfd, 1, timeout_us < 0 ? -1 :
				    (int)((timeout_us + 999) / 1000));
		if (ret > 0)
			(void)!read(kx->evfd, &v, sizeof(v));
		return kx_progress(c);
	}
	if (!kx->uring) {
		sched_yield();
		return 0;
	}
	first = kx_thread_ring(kx);
	for (i = 0; i < kx->nrings; i++) {
		struct kx_ring *r = &kx->rings[(first + i) % kx->nrings];

		if (__atomic_load_n(&r->inflight, __ATOMIC_ACQUIRE))
			return kx_block_ring(c, r, timeout_us);
	}
	sched_yield();
	return 0;
}

static int kx_wake_enable(struct hcomm_comm *c)
{
	struct kx *kx = kx_of(c);
	unsigned int i;
	int fd, ret;

	if (kx->evfd >= 0)
		return 0;
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0)
		return hcomm__fail(hcomm__err_code(HCOMM_CMD_XFER, errno), errno,
				   "eventfd for the callback thread");
	for (i = 0; i < kx->nrings && kx->uring; i++) {
		ret = io_uring_register_eventfd(&kx->rings[i].ring, fd);
		if (ret < 0) {
			while (i--)
				io_uring_unregister_eventfd(&kx->rings[i].ring);
			close(fd);
			return hcomm__fail(hcomm__err_code(HCOMM_CMD_XFER, -ret),
					   -ret, "IORING_REGISTER_EVENTFD");
		}
	}
	kx->evfd = fd;
	return 0;
}

static void kx_wake(struct hcomm_comm *c)
{
	struct kx *kx = kx_of(c);
	uint64_t one = 1;

	if (kx->evfd >= 0)
		(void)!write(kx->evfd, &one, sizeof(one));
}

/* ------------------------------------------------------------------ */
/* submission                                                          */
/* ------------------------------------------------------------------ */

/*
 * A free slot; the ring has fewer than nslots in flight.  Submit lock
 * held; the slot stays free until kx_slot_publish().
 */
static struct kx_slot *kx_slot_get(struct kx_ring *r)
{
	struct kx_slot *s;

	for (;;) {
		s = &r->slots[r->cursor];
		r->cursor = r->cursor + 1 == r->nslots ? 0 : r->cursor + 1;
		if (!__atomic_load_n(&s->busy, __ATOMIC_ACQUIRE))
			return s;
	}
}

/*
 * Mark s in flight and attach it to sqe.  The release store orders what
 * the submitter wrote (slot, request) before the reaper's acquire load:
 * the kernel orders them in practice (submission precedes the CQE), this
 * says so in the C memory model too.
 */
static void kx_slot_publish(struct kx_ring *r, struct kx_slot *s,
			    struct io_uring_sqe *sqe)
{
	io_uring_sqe_set_data(sqe, s);
	__atomic_store_n(&s->busy, 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&r->inflight, 1, __ATOMIC_RELEASE);
}

/*
 * Hand the prepared SQEs to the kernel.  Submit lock held.  Transient
 * failures (EINTR, EAGAIN, EBUSY) are retried after running task work; a
 * hard one leaves the SQEs queued for the next submission on the ring.
 */
static void kx_submit(struct kx_ring *r)
{
	int ret, tries = 0;

	while (io_uring_sq_ready(&r->ring)) {
		ret = io_uring_submit(&r->ring);
		if (ret > 0)
			continue;
		if ((ret != -EINTR && ret != -EAGAIN && ret != -EBUSY &&
		     ret != 0) || ++tries > 1000)
			return;
		(void)io_uring_get_events(&r->ring);
		sched_yield();
	}
}

/* Fill x for d: the local side is ent's (key, offset), if any. */
static void kx_fill(struct hcomm_xfer *x, const struct hcomm_xfer_desc *d,
		    const struct hcomm_win_peer *p,
		    const struct hcomm_rc_ent *ent)
{
	uint64_t lkey = ent ? ent->key : 0;
	uint64_t loff = ent ? d->local - ent->start : 0;

	memset(x, 0, sizeof(*x));
	x->len = d->len;
	if (d->op == HCOMM_OP_GET) {
		x->src_key = p->key;
		x->src_off = d->target_off;
		x->dst_key = lkey;
		x->dst_off = loff;
		return;
	}
	x->dst_key = p->key;
	x->dst_off = d->target_off;
	if (d->len) {
		x->src_key = lkey;
		x->src_off = loff;
	} else {
		/* A pure signal: the source must still name a region. */
		x->src_key = p->key;
		x->src_off = d->target_off;
	}
	if (d->op == HCOMM_OP_PUT_SIGNAL) {
		x->flags = HCOMM_XFER_DB_ADD | HCOMM_XFER_DB_REMOTE;
		x->db_index = d->sig;
		x->db_value = d->value;
	}
}

/* A descriptor that moves nothing and signals nothing: a NOP. */
static int kx_is_nop(const struct hcomm_xfer_desc *d)
{
	return !d->len && d->op != HCOMM_OP_PUT_SIGNAL;
}

/*
 * How many descriptors from d on go as one HCOMM_CMD_XFER_BATCH: a run
 * of at least KX_BATCH_MIN (at most KX_BATCH_MAX) that the module copies
 * inline anyway (kx_fill sets no tag and no NO_INLINE; windows and local
 * buffers are host memory), else 0.
 */
static unsigned int kx_batch_run(const struct kx *kx,
				 const struct hcomm_xfer_desc *d,
				 unsigned int n)
{
	unsigned int m = 0;

	if (!kx->batch)
		return 0;
	while (m < n && m < KX_BATCH_MAX && !kx_is_nop(&d[m]) &&
	       d[m].len <= kx->batch_max)
		m++;
	return m >= KX_BATCH_MIN ? m : 0;
}

/* A batch of the m descriptors at d, or NULL (no memory: one by one). */
static struct kx_batch *kx_batch_make(const struct hcomm_win *w,
				      const struct hcomm_xfer_desc *d,
				      unsigned int m,
				      struct hcomm_request *reqs)
{
	struct kx_batch *b = malloc(sizeof(*b));
	unsigned int i;

	if (!b)
		return NULL;
	memset(&b->b, 0, sizeof(b->b));
	b->b.descs = (uintptr_t)b->x;
	b->b.count = m;
	b->n = m;
	for (i = 0; i < m; i++) {
		struct hcomm_rc_ent *ent = (struct hcomm_rc_ent *)
			hcomm__req_priv(&reqs[i])->xp;

		kx_fill(&b->x[i], &d[i],
			&w->peers[d[i].target].x[HCOMM_XP_KERNEL], ent);
		b->req[i] = &reqs[i];
		b->ent[i] = ent;
		b->target[i] = d[i].target;
		b->get[i] = d[i].op == HCOMM_OP_GET;
	}
	return b;
}

/*
 * The batch's command ended with res (0 or -errno) after done
 * descriptors: those landed; on failure descriptor done failed with it
 * and the ones after it did nothing, so each of them is issued again on
 * its own (a blocking XFER, inline) and every request gets its own
 * outcome.  Completes every request and frees b.
 */
static void kx_batch_end(struct hcomm_comm *c, struct kx_batch *b, int res,
			 uint64_t done)
{
	struct kx *kx = kx_of(c);
	unsigned int i;

	if (!res || done > b->n)
		done = b->n;
	for (i = 0; i < b->n; i++) {
		int err = 0;

		if (i == done)
			err = -res;
		else if (i > done && ioctl(kx->fd, HCOMM_CMD_XFER, &b->x[i]) < 0)
			err = errno;
		if (!err)
			kx_count(kx, b->target[i], b->get[i], b->x[i].len);
		hcomm__rcache_put(b->ent[i]);
		hcomm__complete(c, b->req[i], err, err ? 0 : b->x[i].len);
	}
	free(b);
}

/* Resolve every local buffer first, so that a failure issues nothing. */
static int kx_resolve(struct kx *kx, const struct hcomm_xfer_desc *d,
		      unsigned int n, struct hcomm_request *reqs)
{
	struct hcomm_rc_ent *ent;
	uint64_t key, off;
	unsigned int i;
	int ret;

	for (i = 0; i < n; i++) {
		hcomm__req_priv(&reqs[i])->xp = 0;
		if (!d[i].len)
			continue;
		ret = hcomm__rcache_get(kx->rc, (const void *)(uintptr_t)d[i].local,
					d[i].len, d[i].op == HCOMM_OP_GET,
					&ent, &key, &off);
		if (ret) {
			while (i--)
				hcomm__rcache_put((struct hcomm_rc_ent *)
					hcomm__req_priv(&reqs[i])->xp);
			return ret;
		}
		hcomm__req_priv(&reqs[i])->xp = (uintptr_t)ent;
	}
	return 0;
}

/* Without io_uring: each descriptor is one blocking ioctl. */
static void kx_post_ioctl(struct hcomm_comm *c, struct hcomm_win *w,
			  const struct hcomm_xfer_desc *d, unsigned int n,
			  struct hcomm_request *reqs)
{
	struct kx *kx = kx_of(c);
	struct kx_batch *b;
	struct kx_slot s;
	unsigned int i, m;

	for (i = 0; i < n; i++) {
		struct hcomm_rc_ent *ent = (struct hcomm_rc_ent *)
			hcomm__req_priv(&reqs[i])->xp;
		int err = 0;

		m = kx_batch_run(kx, &d[i], n - i);
		b = m ? kx_batch_make(w, &d[i], m, &reqs[i]) : NULL;
		if (b) {
			err = ioctl(kx->fd, HCOMM_CMD_XFER_BATCH, &b->b) < 0 ?
			      errno : 0;
			kx_batch_end(c, b, -err, b->b.done);
			i += m - 1;
			continue;
		}

		if (!kx_is_nop(&d[i])) {
			kx_fill(&s.arg.x, &d[i],
				&w->peers[d[i].target].x[HCOMM_XP_KERNEL], ent);
			if (ioctl(kx->fd, HCOMM_CMD_XFER, &s.arg.x) < 0)
				err = errno;
			else
				kx_count(kx, d[i].target,
					 d[i].op == HCOMM_OP_GET, d[i].len);
		}
		hcomm__rcache_put(ent);
		hcomm__complete(c, &reqs[i], err, err ? 0 : d[i].len);
	}
}

static int kx_post(struct hcomm_comm *c, struct hcomm_win *w,
		   const struct hcomm_xfer_desc *d, unsigned int n,
		   struct hcomm_request *reqs)
{
	struct kx *kx = kx_of(c);
	unsigned int i = 0, ri, m, j;
	struct kx_batch *b;
	struct kx_ring *r;
	int ret;

	ret = kx_resolve(kx, d, n, reqs);
	if (ret)
		return ret;
	if (!kx->uring) {
		kx_post_ioctl(c, w, d, n, reqs);
		return 0;
	}
	ri = kx_thread_ring(kx);
	r = &kx->rings[ri];
	while (i < n) {
		pthread_mutex_lock(&r->submit_lock);
		while (i < n && __atomic_load_n(&r->inflight, __ATOMIC_ACQUIRE) <
				r->nslots) {
			struct hcomm_req_priv *rp = hcomm__req_priv(&reqs[i]);
			struct hcomm_rc_ent *ent = (struct hcomm_rc_ent *)rp->xp;
			struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
			struct kx_slot *s;

			if (!sqe)
				break;
			s = kx_slot_get(r);
			m = kx_batch_run(kx, &d[i], n - i);
			b = m ? kx_batch_make(w, &d[i], m, &reqs[i]) : NULL;
			if (b) {
				for (j = 0; j < m; j++)
					hcomm__req_priv(&reqs[i + j])->ring = ri;
				s->kind = SLOT_BATCH;
				s->batch = b;
				s->req = NULL;
				s->ent = NULL;
				s->len = 0;
				hcomm__prep_cmd(sqe, r->fixed ? 0 : kx->fd,
						HCOMM_CMD_XFER_BATCH, &b->b,
						sizeof(b->b));
				if (r->fixed)
					sqe->flags |= IOSQE_FIXED_FILE;
				kx_slot_publish(r, s, sqe);
				i += m;
				continue;
			}
			s->batch = NULL;
			s->req = &reqs[i];
			s->ent = ent;
			s->len = d[i].len;
			rp->ring = ri;
			if (kx_is_nop(&d[i])) {
				s->kind = SLOT_NOP;
				io_uring_prep_nop(sqe);
			} else {
				s->kind = SLOT_XFER;
				s->target = d[i].target;
				s->get = d[i].op == HCOMM_OP_GET;
				kx_fill(&s->arg.x, &d[i],
					&w->peers[d[i].target].x[HCOMM_XP_KERNEL],
					ent);
				hcomm__prep_cmd(sqe, r->fixed ? 0 : kx->fd,
						HCOMM_CMD_XFER, &s->arg.x,
						sizeof(s->arg.x));
				if (r->fixed)
					sqe->flags |= IOSQE_FIXED_FILE;
			}
			kx_slot_publish(r, s, sqe);
			i++;
		}
		kx_submit(r);
		pthread_mutex_unlock(&r->submit_lock);
		/*
		 * Full: make room, unlocked.  The callbacks of what completes
		 * run when the issuing call is done (hcomm_comm.c).
		 */
		if (i < n && !kx_reap_all(c, r))
			kx_block_ring(c, r, 200);
	}
	return 0;
}

static int kx_fence(struct hcomm_comm *c)
{
	struct kx *kx = kx_of(c);
	struct hcomm_request req;
	struct hcomm_req_priv *rp = hcomm__req_priv(&req);
	struct hcomm_fence f = { 0 };
	struct io_uring_sqe *sqe;
	struct kx_slot *s;
	struct kx_ring *r;
	unsigned int ri;

	if (!kx->uring) {
		if (ioctl(kx->fd, HCOMM_CMD_FENCE, &f) < 0)
			return hcomm__fail(hcomm__err_code(HCOMM_CMD_FENCE, errno),
					   errno, "HCOMM_CMD_FENCE");
		return 0;
	}
	memset(&req, 0, sizeof(req));
	rp->comm = c;
	rp->target = 0xffff;
	ri = kx_thread_ring(kx);
	r = &kx->rings[ri];
	rp->ring = (uint8_t)ri;
	__atomic_add_fetch(&c->inflight, 1, __ATOMIC_RELAXED);
	for (;;) {
		pthread_mutex_lock(&r->submit_lock);
		if (__atomic_load_n(&r->inflight, __ATOMIC_ACQUIRE) < r->nslots) {
			sqe = io_uring_get_sqe(&r->ring);
			if (sqe)
				break;
			kx_submit(r);
		}
		pthread_mutex_unlock(&r->submit_lock);
		if (!kx_reap_all(c, r))
			kx_block_ring(c, r, 200);
	}
	s = kx_slot_get(r);
	s->req = &req;
	s->ent = NULL;
	s->len = 0;
	s->kind = SLOT_FENCE;
	memset(&s->arg, 0, sizeof(s->arg));
	hcomm__prep_cmd(sqe, r->fixed ? 0 : kx->fd, HCOMM_CMD_FENCE, &s->arg.f,
			sizeof(s->arg.f));
	if (r->fixed)
		sqe->flags |= IOSQE_FIXED_FILE;
	kx_slot_publish(r, s, sqe);
	kx_submit(r);
	pthread_mutex_unlock(&r->submit_lock);
	if (hcomm_wait(&req))
		return hcomm__fail(-req.status, rp->err, "HCOMM_CMD_FENCE");
	return 0;
}

/* ------------------------------------------------------------------ */
/* signals                                                             */
/* ------------------------------------------------------------------ */

static uint32_t kx_signal_count(const struct hcomm_comm *c)
{
	return kx_of(c)->nr_db;
}

static uint64_t kx_signal_read(struct hcomm_comm *c, uint32_t sig)
{
	struct kx *kx = kx_of(c);

	if (sig >= kx->nr_db)
		return 0;
	return __atomic_load_n(&kx->db[sig], __ATOMIC_ACQUIRE);
}

/* The first i < n whose doorbell reached its value, else -1. */
static int kx_sig_any(struct kx *kx, const uint32_t *sig, const uint64_t *val,
		      int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (__atomic_load_n(&kx->db[sig[i]], __ATOMIC_ACQUIRE) >=
		    val[i])
			return i;
	return -1;
}

/*
 * One sleep in the module of at most timeout_ns (< 0: none) until one of n
 * doorbells reaches its value: on all of them (HCOMM_CMD_DB_WAIT_ANY), or
 * on sig[0] alone (HCOMM_CMD_DB_WAIT: a module without the other, or
 * HCOMM_NO_WAIT_ANY).  Returns 0 or -HCOMM_ERR_*; the caller looks at the
 * doorbells.
 */
static int kx_db_sleep(struct kx *kx, const uint32_t *sig,
		       const uint64_t *val, int n, int64_t timeout_ns)
{
	union {
		struct hcomm_db_wait one;
		struct hcomm_db_wait_any any;
	} arg;
	uint64_t tmo = timeout_ns < 0 ? 0 : (uint64_t)timeout_ns; /* 0: none */
	unsigned int cmd;
	int i;

	memset(&arg, 0, sizeof(arg));
	if (kx->wait_any) {
		cmd = HCOMM_CMD_DB_WAIT_ANY;
		arg.any.count = (uint32_t)n;
		for (i = 0; i < n; i++) {
			arg.any.index[i] = sig[i];
			arg.any.value[i] = val[i];
		}
		arg.any.timeout_ns = tmo;
	} else {
		cmd = HCOMM_CMD_DB_WAIT;
		arg.one.index = sig[0];
		arg.one.value = val[0];
		arg.one.timeout_ns = tmo;
	}
	if (ioctl(kx->fd, cmd, &arg) &&
	    errno != ETIME && errno != ETIMEDOUT && errno != EINTR)
		return hcomm__fail(hcomm__err_code(cmd, errno), errno,
				   "HCOMM_CMD_DB_WAIT%s of %d signals, first "
				   "%u >= %llu", kx->wait_any ? "_ANY" : "", n,
				   sig[0], (unsigned long long)val[0]);
	return 0;
}

/*
 * Until one of n doorbells reaches its value: spin, then sleep in the
 * module.  A module with HCOMM_FEAT_DB_WAIT_ANY sleeps on all of them
 * at once.  An older one (HCOMM_CMD_DB_WAIT) sleeps on one doorbell at a
 * time, so with more than one this sleeps on sig[0] for KX_ANY_SLICE_NS,
 * then twice as long each time up to KX_ANY_SLICE_MAX_NS, and looks at
 * the others in between: another doorbell that moves soon is seen soon,
 * and a long wait wakes seldom.
 */
static int kx_signal_wait_any(struct hcomm_comm *c, const uint32_t *sig,
			      const uint64_t *val, int n, int64_t timeout_ns)
{
	struct kx *kx = kx_of(c);
	uint64_t start = hcomm__now_ns(), deadline = UINT64_MAX, t;
	uint64_t slice = KX_ANY_SLICE_NS;
	struct hcomm_spin spin;
	int64_t left;
	int i, err;

	if (timeout_ns >= 0)
		deadline = start + (uint64_t)timeout_ns;
	hcomm__spin_init(&spin, start, hcomm__spin_cap(hcomm__spin_ns(c,
			 KX_SPIN_NS), timeout_ns), 64);
	do {
		i = kx_sig_any(kx, sig, val, n);
		if (i >= 0)
			return i;
	} while (hcomm__spin(&spin));
	for (;;) {
		t = hcomm__now_ns();
		if (t >= deadline)
			return -HCOMM_ERR_TIMEOUT;
		left = deadline == UINT64_MAX ? -1 : (int64_t)(deadline - t);
		if (n > 1 && !kx->wait_any)	/* sleeps on sig[0] only */
			left = hcomm__slice(left, &slice, KX_ANY_SLICE_MAX_NS);
		err = kx_db_sleep(kx, sig, val, n, left);
		if (err)
			return err;
		i = kx_sig_any(kx, sig, val, n);
		if (i >= 0)
			return i;
	}
}

/*
 * Add v to this rank's signal sig for another transport (a put_signal
 * that came over the network): a zero-length XFER within the context with
 * DB_ADD, so that the kernel wakes the DB_WAITs as for its own signals.
 * Its keys are a page registered for this on first use.
 */
static int kx_signal_add(struct hcomm_comm *c, uint32_t sig, uint64_t v)
{
	struct kx *kx = kx_of(c);
	struct hcomm_xfer x;
	int err;

	if (sig >= kx->nr_db)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "signal %u of %u",
				   sig, kx->nr_db);
	pthread_mutex_lock(&kx->sig_lock);
	if (!kx->sig_key) {
		struct hcomm_reg_mem reg = { .len = 4096,
			.access = HCOMM_ACCESS_LOCAL_WRITE };

		if (!kx->sig_page &&
		    posix_memalign(&kx->sig_page, 4096, 4096)) {
			kx->sig_page = NULL;
			pthread_mutex_unlock(&kx->sig_lock);
			return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "signal page");
		}
		reg.addr = (uintptr_t)kx->sig_page;
		if (ioctl(kx->fd, HCOMM_CMD_REG_MEM, &reg) < 0) {
			err = errno;
			pthread_mutex_unlock(&kx->sig_lock);
			return hcomm__fail(hcomm__reg_mem_code(kx->fd, err), err,
					   "signal page: HCOMM_CMD_REG_MEM");
		}
		kx->sig_region = reg.region;
		__atomic_store_n(&kx->sig_key, reg.key, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&kx->sig_lock);
	memset(&x, 0, sizeof(x));
	x.src_key = x.dst_key = kx->sig_key;
	x.flags = HCOMM_XFER_DB_ADD;
	x.db_index = sig;
	x.db_value = v;
	if (ioctl(kx->fd, HCOMM_CMD_XFER, &x) < 0) {
		err = errno;
		return hcomm__fail(hcomm__err_code(HCOMM_CMD_XFER, err), err,
				   "signal %u += %llu", sig,
				   (unsigned long long)v);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* windows                                                             */
/* ------------------------------------------------------------------ */

/*
 * A window is registered through the device directly, not with
 * hcomm_reg_mem(): its key is granted to every process of the user, and
 * hcomm_dereg() may keep a registration alive in the hot-buffer cache,
 * while hcomm_win_free() must revoke the key at once.
 */
static int kx_win_create(struct hcomm_comm *c, struct hcomm_win *w,
			 void *base, size_t len, struct hcomm_win_peer *self)
{
	struct kx *kx = kx_of(c);
	struct hcomm_reg_mem reg = {
		.addr = (uintptr_t)base,
		.len = len,
		.access = HCOMM_ACCESS_ALL,
	};
	struct hcomm_grant g = {
		.scope = HCOMM_GRANT_SAME_UID,
		.access = HCOMM_ACCESS_REMOTE_READ | HCOMM_ACCESS_REMOTE_WRITE,
	};
	struct hcomm_dereg d = { 0 };
	int err;

	memset(self, 0, sizeof(*self));
	self->addr = (uintptr_t)base;
	w->xps[HCOMM_XP_KERNEL] = NULL;
	if (!len)
		return 0;
	if (ioctl(kx->fd, HCOMM_CMD_REG_MEM, &reg) < 0) {
		err = errno;
		return hcomm__fail(hcomm__reg_mem_code(kx->fd, err), err,
				   "hcomm_win_create: HCOMM_CMD_REG_MEM %zu bytes "
				   "at %p", len, base);
	}
	g.region = reg.region;
	if (ioctl(kx->fd, HCOMM_CMD_GRANT, &g) < 0) {
		err = errno;
		d.region = reg.region;
		(void)ioctl(kx->fd, HCOMM_CMD_DEREG, &d);
		return hcomm__fail(hcomm__err_code(HCOMM_CMD_GRANT, err), err,
				   "hcomm_win_create: HCOMM_CMD_GRANT region %u",
				   g.region);
	}
	self->key = reg.key;
	self->len = len;
	w->xps[HCOMM_XP_KERNEL] = (void *)(uintptr_t)reg.region;
	return 0;
}

static int kx_win_free(struct hcomm_comm *c, struct hcomm_win *w)
{
	struct hcomm_dereg d = { .region = (uint32_t)(uintptr_t)w->xps[HCOMM_XP_KERNEL] };
	int err;

	if (!d.region)
		return 0;
	if (ioctl(kx_of(c)->fd, HCOMM_CMD_DEREG, &d) < 0) {
		err = errno;
		return hcomm__fail(hcomm__err_code(HCOMM_CMD_DEREG, err), err,
				   "hcomm_win_free: HCOMM_CMD_DEREG region %u",
				   d.region);
	}
	w->xps[HCOMM_XP_KERNEL] = NULL;
	return 0;
}

/* ------------------------------------------------------------------ */
/* setup                                                               */
/* ------------------------------------------------------------------ */

/* The device can be opened for reading and writing here. */
static int kx_probe(const struct hcomm_rankinfo *ri)
{
	(void)ri;
	return !access(HCOMM_DEVICE_PATH, R_OK | W_OK);
}

/* Create ring r; flags: what the first ring got (0: find out). */
static int kx_ring_init(struct kx *kx, struct kx_ring *r, unsigned int depth,
			unsigned int *flags)
{
	static const unsigned int try[] = {
		IORING_SETUP_CQE32 | IORING_SETUP_SUBMIT_ALL,
		IORING_SETUP_CQE32,
		IORING_SETUP_SUBMIT_ALL,
		0,
	};
	struct io_uring_params p;
	unsigned int k;
	int ret = -EINVAL;

	for (k = 0; k < sizeof(try) / sizeof(try[0]); k++) {
		if (*flags && try[k] != (*flags & ~IORING_SETUP_CLAMP))
			continue;
		memset(&p, 0, sizeof(p));
		p.flags = try[k] | IORING_SETUP_CLAMP;
		ret = io_uring_queue_init_params(depth, &r->ring, &p);
		if (ret != -EINVAL)
			break;
	}
	if (ret)
		return ret;
	*flags = p.flags;
	r->nslots = p.sq_entries;
	if (p.cq_entries < 2 * r->nslots)
		r->nslots = p.cq_entries / 2;
	r->slots = calloc(r->nslots, sizeof(*r->slots));
	if (!r->slots) {
		io_uring_queue_exit(&r->ring);
		return -ENOMEM;
	}
	kx->cqe32 = !!(p.flags & IORING_SETUP_CQE32);
	kx->ext_arg = !!(p.features & IORING_FEAT_EXT_ARG);
	r->fixed = io_uring_register_files(&r->ring, &kx->fd, 1) == 0;
	pthread_mutex_init(&r->submit_lock, NULL);
	pthread_mutex_init(&r->reap_lock, NULL);
	r->ready = 1;
	return 0;
}

static void kx_rings_fini(struct kx *kx)
{
	unsigned int i, j;

	for (i = 0; i < kx->nrings; i++) {
		struct kx_ring *r = &kx->rings[i];

		if (!r->ready)
			continue;
		io_uring_queue_exit(&r->ring);
		for (j = 0; j < r->nslots; j++)
			free(r->slots[j].batch);
		free(r->slots);
		pthread_mutex_destroy(&r->submit_lock);
		pthread_mutex_destroy(&r->reap_lock);
	}
	free(kx->rings);
	kx->rings = NULL;
}

static int kx_rings_init(struct hcomm_comm *c, struct kx *kx)
{
	unsigned int i, flags = 0;
	int ret;

	kx->nrings = c->cfg.num_qps;
	kx->rings = aligned_alloc(64, sizeof(*kx->rings) * kx->nrings);
	if (!kx->rings)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "%u rings",
				   kx->nrings);
	memset(kx->rings, 0, sizeof(*kx->rings) * kx->nrings);
	if (!hcomm_uses_uring(kx->ctx))
		return 0;	/* ioctl(): HCOMM_NO_URING or no uring_cmd */
	for (i = 0; i < kx->nrings; i++) {
		ret = kx_ring_init(kx, &kx->rings[i], c->cfg.queue_depth,
				   &flags);
		if (ret && !i && ret != -ENOMEM)
			return 0;	/* no io_uring here: ioctl() */
		if (ret) {
			kx_rings_fini(kx);
			return hcomm__fail(hcomm__err_code(HCOMM_CMD_XFER, -ret),
					   -ret, "io_uring ring %u of %u (%u "
					   "entries)", i, kx->nrings,
					   c->cfg.queue_depth);
		}
	}
	kx->uring = 1;
	return 0;
}

static void kx_fini(struct hcomm_comm *c)
{
	struct kx *kx = kx_of(c);

	if (!kx)
		return;
	if (kx->rings)
		kx_rings_fini(kx);
	if (kx->evfd >= 0)
		close(kx->evfd);
	hcomm__rcache_destroy(kx->rc);
	if (kx->sig_key) {
		struct hcomm_dereg d = { .region = kx->sig_region };

		(void)ioctl(kx->fd, HCOMM_CMD_DEREG, &d);
	}
	free(kx->sig_page);
	pthread_mutex_destroy(&kx->sig_lock);
	if (kx->gen)
		munmap((void *)kx->gen, 4096);
	if (kx->db)
		munmap(kx->db, kx->db_len);
	hcomm_close(kx->ctx);
	free(kx->pst);
	free(kx);
	c->xps[HCOMM_XP_KERNEL] = NULL;
	c->ctx = NULL;
}

static int kx_init(struct hcomm_comm *c)
{
	struct hcomm_ctx_opts opts = { 0 };
	long page = sysconf(_SC_PAGESIZE);
	const char *nb;
	struct kx *kx;
	void *p;
	int ret, err;

	kx = calloc(1, sizeof(*kx));
	if (kx)
		pthread_mutex_init(&kx->sig_lock, NULL);
	if (!kx)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "kernel transport");
	kx->evfd = -1;
	c->xps[HCOMM_XP_KERNEL] = kx;
	kx->pst = calloc(c->size, sizeof(*kx->pst));
	if (!kx->pst) {
		ret = hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "kernel transport");
		goto err;
	}
	ret = hcomm_open(&kx->ctx, 0);
	if (ret)
		goto err;
	c->ctx = kx->ctx;
	kx->fd = hcomm_fd(kx->ctx);
	ret = hcomm_get_info(kx->ctx, &kx->info);
	if (ret)
		goto err;
	if (!(kx->info.features & HCOMM_FEAT_XFER)) {
		ret = hcomm__fail(HCOMM_ERR_NOTSUP, 0, "hcomm.ko without "
				  "transfers (HCOMM_FEAT_XFER): update the module");
		goto err;
	}

	opts.mask = HCOMM_CTX_MAX_INLINE | HCOMM_CTX_CACHE_LIMIT;
	opts.max_inline = c->cfg.max_inline < kx->info.max_inline ?
			  c->cfg.max_inline : kx->info.max_inline;
	opts.cache_limit = c->cfg.cache_limit;
	if (ioctl(kx->fd, HCOMM_CMD_SET_CTX, &opts) < 0) {
		err = errno;
		ret = hcomm__fail(hcomm__err_code(HCOMM_CMD_SET_CTX, err), err,
				  "HCOMM_CMD_SET_CTX max_inline %u cache_limit %llu",
				  opts.max_inline,
				  (unsigned long long)opts.cache_limit);
		goto err;
	}

	kx->nr_db = kx->info.nr_doorbells;
	if (kx->nr_db) {
		if (page <= 0)
			page = 4096;
		kx->db_len = ((size_t)kx->nr_db * sizeof(uint64_t) + page - 1) &
			     ~((size_t)page - 1);
		p = mmap(NULL, kx->db_len, PROT_READ | PROT_WRITE, MAP_SHARED,
			 kx->fd, HCOMM_MMAP_DOORBELLS);
		if (p == MAP_FAILED) {
			err = errno;
			ret = hcomm__fail(hcomm__err_code(HCOMM_CMD_XFER, err),
					  err, "mmap of %u doorbells",
					  kx->nr_db);
			goto err;
		}
		kx->db = p;
	}
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, kx->fd,
		 HCOMM_MMAP_GENERATION);
	if (p == MAP_FAILED) {
		err = errno;
		ret = hcomm__fail(hcomm__err_code(HCOMM_CMD_XFER, err), err,
				  "mmap of the generation page");
		goto err;
	}
	kx->gen = p;

	ret = hcomm__rcache_create(kx->fd, kx->gen, c->cfg.cache_limit,
				   KX_RCACHE_ENTRIES, kx->info.max_region_size,
				   &kx->rc);
	if (ret)
		goto err;
	ret = kx_rings_init(c, kx);
	if (ret)
		goto err;
	/*
	 * Runs of small transfers go as one XFER_BATCH where the module has
	 * it and, through io_uring, the CQE carries how many landed (CQE32).
	 * HCOMM_NO_BATCH=1: one command each.  A wait for one of several
	 * signals sleeps on all of them where the module has DB_WAIT_ANY;
	 * HCOMM_NO_WAIT_ANY=1: as on an older module (slices of DB_WAIT).
	 */
	nb = getenv("HCOMM_NO_WAIT_ANY");
	kx->wait_any = (kx->info.features & HCOMM_FEAT_DB_WAIT_ANY) &&
		       !(nb && *nb && strcmp(nb, "0"));
	nb = getenv("HCOMM_NO_BATCH");
	kx->batch = (kx->info.features & HCOMM_FEAT_XFER_BATCH) &&
		    (!kx->uring || kx->cqe32) &&
		    !(nb && *nb && strcmp(nb, "0"));
	kx->batch_max = opts.max_inline;
	return 0;
err:
	kx_fini(c);
	return ret;
}

static int kx_flush(struct hcomm_comm *c)
{
	return hcomm__drain(c);
}

static void kx_stats(struct hcomm_comm *c, struct hcomm_comm_stats *st)
{
	struct hcomm_rcache_stats rs;

	hcomm__rcache_stats(kx_of(c)->rc, &rs);
	st->rcache_hits += rs.hits;
	st->rcache_misses += rs.misses;
	st->rcache_stale += rs.stale;
	st->rcache_evictions += rs.evictions;
	st->rcache_entries += rs.entries;
	st->rcache_bytes += rs.bytes;
	st->rcache_dead += rs.dead;
}

static void kx_publish(struct hcomm_comm *c, struct hcomm_comm_stats *st)
{
	hcomm__rcache_publish(kx_of(c)->rc, st);
}

static void kx_peer_stats(struct hcomm_comm *c, int peer,
			  struct hcomm_peer_xport_stats *st)
{
	const struct kx_pstat *p = &kx_of(c)->pst[peer];

	st->in_use = 1;
	st->bytes_sent = __atomic_load_n(&p->bytes_sent, __ATOMIC_RELAXED);
	st->bytes_recv = __atomic_load_n(&p->bytes_recv, __ATOMIC_RELAXED);
	st->ops_sent = __atomic_load_n(&p->ops, __ATOMIC_RELAXED);
}

const struct hcomm_xport_ops hcomm__xport_kernel = {
	.name = "kernel",
	.id = HCOMM_XP_KERNEL,
	.probe = kx_probe,
	.init = kx_init,
	.fini = kx_fini,
	.win_create = kx_win_create,
	.win_free = kx_win_free,
	.post = kx_post,
	.progress = kx_progress,
	.block = kx_block,
	.wake_enable = kx_wake_enable,
	.wake = kx_wake,
	.fence = kx_fence,
	.flush = kx_flush,
	.signal_count = kx_signal_count,
	.signal_read = kx_signal_read,
	.signal_wait_any = kx_signal_wait_any,
	.signal_add = kx_signal_add,
	.stats = kx_stats,
	.publish = kx_publish,
	.peer_stats = kx_peer_stats,
};
