/* SPDX-License-Identifier: MIT */
/*
 * libhcomm: the communicator - ranks, windows, one-sided operations,
 * requests and their completion.  Moving bytes is the transport's
 * (hcomm_xport.h); this file checks arguments, counts what is in flight,
 * and delivers completions:
 *
 *  - a request without callback is marked done (release store) by the
 *    thread that reaps its completion;
 *  - a request with a callback belongs to the library until its callback
 *    has returned: done is stored (release) only then, so hcomm_wait,
 *    hcomm_test and a poll of done report completion after the callback;
 *  - a reaper completes everything it took (status, bytes) before any
 *    callback runs.  HCOMM_CB_INLINE: the completed requests go on the
 *    reaping thread's pending list, run after the reap (hcomm_progress,
 *    hcomm_wait, hcomm_test, hcomm_flush, or an issuing call once it has
 *    issued everything), never with a library lock held.  A callback that
 *    waits for, tests or flushes requests of the same reap drains the
 *    list further (nested), so it cannot wait on a callback queued behind
 *    itself;
 *  - HCOMM_CB_THREAD / _LOCKED: a library progress thread reaps; requests
 *    with a callback go to a dispatcher thread through the lock-free MPSC
 *    queue (or a mutex+condvar list); the dispatcher moves them to its
 *    own pending list and runs them the same way.  Threads calling
 *    hcomm_progress/hcomm_wait reap too and feed the same queue.
 *
 * c->inflight counts operations issued and not completed; c->cb_pending
 * completed ones whose callback has not returned.  Collectives (init,
 * destroy, barrier, allgather, win_create, win_free) are made by one
 * thread per rank in the same order everywhere; a local failure inside a
 * collective is exchanged so that every rank fails it together.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include "hcomm_comm_int.h"

/*
 * Busy progress before a waiter blocks, chosen on the development host
 * (2 vCPUs, tcp over loopback, hcomm_tcp_zc's blocking put, medians of
 * 2000): an 8-byte put took 61 us sleeping at once, 44 us with any spin
 * from 50 us to 1 ms (47 us with 20); 64 KiB 76 us / 61 us with 50 /
 * 70 us with 200; 256 KiB 159 / 149 / 126 us.  50 us is on the plateau
 * for small operations and keeps a waiter of a long one off the CPU (on
 * 2 CPUs a spinner competes with the threads that finish its operation).
 * (Under qemu TCG, where everything is ~10x slower, 200 us had read
 * 1.5-2x faster for 64-256 KiB puts: the emulated test bed is no guide.)
 */
#ifndef SPIN_NS
#define SPIN_NS		50000
#endif
#define BLOCK_US	1000		/* one blocking wait */
#define BATCH_CHUNK	64		/* requests per half of a blocking batch */
/*
 * HCOMM_CB_THREAD: how long the dispatcher polls its empty queue before it
 * sleeps (HCOMM_CB_SPIN_US; none on a one-CPU thread unless set).
 */
#ifndef CB_SPIN_NS
#define CB_SPIN_NS	50000
#endif
#define DISPATCH_MAX	64

static const struct hcomm_xport_ops *const xport_by_id[HCOMM_XP_MAX] = {
	[HCOMM_XP_KERNEL] = &hcomm__xport_kernel,
	[HCOMM_XP_RDMA] = &hcomm__xport_rdma,
	[HCOMM_XP_TCP] = &hcomm__xport_tcp,
};

/* Every transport the communicator uses, by id. */
#define for_each_xo(c, i) \
	for ((i) = 0; (i) < HCOMM_XP_MAX; (i)++) \
		if ((c)->xo[i])

/* Completions reaped from every transport. */
static int xo_progress(struct hcomm_comm *c)
{
	int i, n = 0;

	for_each_xo(c, i)
		n += c->xo[i]->progress(c);
	return n;
}

/*
 * Block for a completion: on req's transport, or with several transports
 * and no request, on each in turn for a slice (none of them can wake the
 * others' waits).
 */
static void xo_block(struct hcomm_comm *c, struct hcomm_request *req,
		     int64_t timeout_us)
{
	int64_t slice = timeout_us < 0 || timeout_us > 2000 ? 2000 : timeout_us;
	int i;

	if (req && c->xo[hcomm__req_priv(req)->xport]) {
		c->xo[hcomm__req_priv(req)->xport]->block(c, req, timeout_us);
		return;
	}
	if (c->nxo == 1) {
		for_each_xo(c, i)
			c->xo[i]->block(c, req, timeout_us);
		return;
	}
	for_each_xo(c, i)
		if (c->xo[i]->block(c, NULL, slice / c->nxo) > 0)
			return;
}

static __thread int t_cb_depth;			/* > 0 inside a callback */
static __thread struct hcomm_comm *t_dispatcher; /* this thread's comm */
/* Completed requests whose callback this thread runs (oldest first). */
static __thread struct hcomm_request *t_pend_head, *t_pend_tail;
static __thread int t_issuing;			/* > 0 inside issue() */
static __thread int t_cb_foreign;		/* a library thread: its
						 * inline callbacks go to
						 * the communicator's orphans */

/* The callbacks running on this thread, innermost first. */
struct cb_frame {
	struct hcomm_request *req;
	struct cb_frame *up;
};
static __thread struct cb_frame *t_cb_top;

/* ------------------------------------------------------------------ */
/* completion and callbacks                                            */
/* ------------------------------------------------------------------ */

static struct hcomm_request *node_req(struct hcomm_mpsc_node *n)
{
	return (struct hcomm_request *)(void *)((char *)n -
		offsetof(struct hcomm_request, priv) -
		offsetof(struct hcomm_req_priv, q));
}

/*
 * Run the callback (req->cb and req->cb_arg, which the caller may have
 * read from elsewhere), then mark done; req belongs to the user
 * afterwards.
 */
static void run_cb_fn(struct hcomm_comm *c, struct hcomm_request *req,
		      hcomm_cb_fn cb, void *arg)
{
	struct cb_frame f = { req, t_cb_top };

	t_cb_top = &f;
	t_cb_depth++;
	cb(req, arg);
	t_cb_depth--;
	t_cb_top = f.up;
	/* After this store the request is the user's: no more access. */
	__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
	__atomic_sub_fetch(&c->cb_pending, 1, __ATOMIC_RELEASE);
}

/* 1 when req's callback is running on this thread (at any depth). */
static int in_own_cb(const struct hcomm_request *req)
{
	const struct cb_frame *f;

	for (f = t_cb_top; f; f = f->up)
		if (f->req == req)
			return 1;
	return 0;
}

static void run_cb(struct hcomm_comm *c, struct hcomm_request *req)
{
	run_cb_fn(c, req, req->cb, req->cb_arg);
}

static void pend_push(struct hcomm_request *req)
{
	hcomm__req_priv(req)->pend = NULL;
	if (t_pend_tail)
		hcomm__req_priv(t_pend_tail)->pend = req;
	else
		t_pend_head = req;
	t_pend_tail = req;
}

int hcomm__run_pending(void)
{
	struct hcomm_request *req;
	int n = 0;

	if (t_issuing)
		return 0;
	while ((req = t_pend_head)) {
		t_pend_head = hcomm__req_priv(req)->pend;
		if (!t_pend_head)
			t_pend_tail = NULL;
		run_cb(hcomm__req_priv(req)->comm, req);
		n++;
	}
	return n;
}

static void set_result(struct hcomm_request *req, int status, int err,
		       uint64_t bytes)
{
	req->status = status;
	hcomm__req_priv(req)->err = err;
	req->bytes = bytes;
	req->t_complete_ns = hcomm__now_ns();
}

/*
 * Out of inflight: without a callback req is done (1: the user's from
 * then on), else it counts in cb_pending until its callback ran (0).
 */
static int hand_over(struct hcomm_comm *c, struct hcomm_request *req)
{
	if (!req->cb) {
		/* After this store the request is the user's: no more access. */
		__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
		__atomic_sub_fetch(&c->inflight, 1, __ATOMIC_RELEASE);
		return 1;
	}
	__atomic_add_fetch(&c->cb_pending, 1, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&c->inflight, 1, __ATOMIC_RELEASE);
	return 0;
}

void hcomm__complete(struct hcomm_comm *c, struct hcomm_request *req,
		     int err, uint64_t bytes)
{
	struct hcomm_req_priv *rp = hcomm__req_priv(req);
	int mode;

	set_result(req, err ? -hcomm__err_code(HCOMM_CMD_XFER, err) : 0, err,
		   bytes);
	if (rp->target == HCOMM_TGT_INTERNAL) {
		__atomic_sub_fetch(&c->inflight, 1, __ATOMIC_RELEASE);
		req->cb(req, req->cb_arg);
		return;
	}
	if (hand_over(c, req))
		return;
	mode = __atomic_load_n(&c->cb_mode, __ATOMIC_ACQUIRE);
	if (mode == HCOMM_CB_THREAD) {
		struct hcomm_ring_item it = { req, (void (*)(void))req->cb,
					      req->cb_arg };

		/* the ring, unless full or the queue holds some already */
		hcomm_rq_push(c->ring, &c->q, &c->q_spill, &it, &rp->q.node);
		hcomm_ec_notify(&c->ec);
	} else if (mode == HCOMM_CB_THREAD_LOCKED) {
		rp->q.next = NULL;
		pthread_mutex_lock(&c->lq_lock);
		if (c->lq_tail)
			hcomm__req_priv(c->lq_tail)->q.next = req;
		else
			c->lq_head = req;
		c->lq_tail = req;
		pthread_cond_signal(&c->lq_cond);
		pthread_mutex_unlock(&c->lq_lock);
	} else if (t_cb_foreign) {
		/* an application thread runs it (orphans_take) */
		rp->q.next = NULL;
		pthread_mutex_lock(&c->lq_lock);
		if (c->orph_tail)
			hcomm__req_priv(c->orph_tail)->q.next = req;
		else
			c->orph_head = req;
		c->orph_tail = req;
		pthread_mutex_unlock(&c->lq_lock);
	} else {
		pend_push(req);
	}
}

/*
 * HCOMM_CB_INLINE: the callbacks of requests that a library thread
 * completed (rdma's failover) run on the next application thread that
 * progresses: moved to its pending list here.
 */
static void orphans_take(struct hcomm_comm *c)
{
	struct hcomm_request *req, *next;

	if (!__atomic_load_n(&c->orph_head, __ATOMIC_ACQUIRE) ||
	    t_cb_foreign)
		return;
	pthread_mutex_lock(&c->lq_lock);
	req = c->orph_head;
	c->orph_head = c->orph_tail = NULL;
	pthread_mutex_unlock(&c->lq_lock);
	for (; req; req = next) {
		next = hcomm__req_priv(req)->q.next;
		pend_push(req);
	}
}

/*
 * Dispatcher thread only: move up to max queued requests (all, in
 * THREAD_LOCKED mode) to this thread's pending list, then run it.
 */
static int dispatch_some(struct hcomm_comm *c, int max)
{
	struct hcomm_mpsc_node *node;
	struct hcomm_request *req, *next;
	struct hcomm_ring_item it;
	int n = 0, ran = 0;

	if (__atomic_load_n(&c->cb_mode, __ATOMIC_ACQUIRE) == HCOMM_CB_THREAD) {
		/*
		 * The ring, then the queue, in each thread's order
		 * (hcomm_rq_pop; -1: a slot being filled holds the next,
		 * the caller polls again).  Nothing pending on this thread:
		 * a ring item runs at once, with the callback and the
		 * argument from the slot's line (no other line before it).
		 */
		for (; n < max; n++) {
			int got = hcomm_rq_pop(&c->q_cons, c->ring, &c->q,
					       &c->q_spill, &it, &node);

			if (got <= 0)
				break;
			if (got == 2) {
				pend_push(node_req(node));
				continue;
			}
			req = it.a;
			if (!t_pend_head && !t_issuing) {
				run_cb_fn(c, req, (hcomm_cb_fn)it.fn, it.b);
				ran++;
			} else {
				pend_push(req);
			}
		}
		return ran + hcomm__run_pending();
	} else {
		pthread_mutex_lock(&c->lq_lock);
		req = c->lq_head;
		c->lq_head = c->lq_tail = NULL;
		pthread_mutex_unlock(&c->lq_lock);
		for (; req; req = next) {
			next = hcomm__req_priv(req)->q.next;
			pend_push(req);
		}
	}
	return hcomm__run_pending();
}

/* Dispatcher only: nothing in the ring or the queue (seq_cst loads). */
static int cbq_empty(struct hcomm_comm *c)
{
	return hcomm_rq_empty(&c->q_cons, c->ring, &c->q);
}

static void *dispatcher_main(void *arg)
{
	struct hcomm_comm *c = arg;
	uint64_t spin_ns;
	unsigned int polls;
	uint32_t key;

	t_dispatcher = c;
	if (c->cb_mode == HCOMM_CB_THREAD_LOCKED) {
		for (;;) {
			pthread_mutex_lock(&c->lq_lock);
			while (!c->lq_head && !c->disp_stop)
				pthread_cond_wait(&c->lq_cond, &c->lq_lock);
			if (!c->lq_head && c->disp_stop) {
				pthread_mutex_unlock(&c->lq_lock);
				return NULL;
			}
			pthread_mutex_unlock(&c->lq_lock);
			dispatch_some(c, DISPATCH_MAX);
		}
	}
	spin_ns = c->cb_spin_ns >= 0 ? (uint64_t)c->cb_spin_ns :
		  hcomm__can_spin() ? CB_SPIN_NS : 0;
	for (;;) {
		struct hcomm_spin spin;

		if (dispatch_some(c, DISPATCH_MAX))
			continue;
		/*
		 * Poll before sleeping: a completion pushed meanwhile is
		 * taken a cache miss after the push instead of a futex
		 * wake-up later (microseconds).
		 */
		/*
		 * The poll reads the ring's next slot alone (the line a
		 * completion's publication moves), the queue and the stop
		 * flag every 64th time: lines that producers write, so that
		 * polling them would slow each completion down.
		 */
		hcomm__spin_init(&spin, hcomm__now_ns(), spin_ns, 256);
		polls = 0;
		while (spin_ns && hcomm_ring_empty(c->ring) &&
		       ((++polls & 63) || (cbq_empty(c) &&
			!__atomic_load_n(&c->disp_stop, __ATOMIC_RELAXED))) &&
		       hcomm__spin(&spin))
			;
		if (!cbq_empty(c))
			continue;
		key = hcomm_ec_prepare(&c->ec);
		if (!cbq_empty(c))
			continue;	/* a push landed or is half done */
		if (__atomic_load_n(&c->disp_stop, __ATOMIC_ACQUIRE))
			return NULL;
		hcomm_ec_wait(&c->ec, key, 100);
	}
}

static void *progress_main(void *arg)
{
	struct hcomm_comm *c = arg;

	while (!__atomic_load_n(&c->prog_stop, __ATOMIC_ACQUIRE)) {
		if (xo_progress(c) > 0)
			continue;
		xo_block(c, NULL, 100000);
	}
	return NULL;
}

/* comm->lock held.  Stop the callback threads after the queue drained. */
static void threads_stop(struct hcomm_comm *c)
{
	int i;

	if (!c->threads)
		return;
	__atomic_store_n(&c->prog_stop, 1, __ATOMIC_RELEASE);
	for_each_xo(c, i)
		c->xo[i]->wake(c);
	pthread_join(c->prog_thr, NULL);
	pthread_mutex_lock(&c->lq_lock);
	__atomic_store_n(&c->disp_stop, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&c->lq_cond);
	pthread_mutex_unlock(&c->lq_lock);
	hcomm_ec_notify(&c->ec);
	pthread_join(c->disp_thr, NULL);
	__atomic_store_n(&c->threads, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&c->cb_mode, HCOMM_CB_INLINE, __ATOMIC_RELEASE);
}

/* comm->lock held. */
static int threads_start(struct hcomm_comm *c, enum hcomm_cb_mode mode)
{
	int ret = 0, i;

	for_each_xo(c, i)
		if (!ret)
			ret = c->xo[i]->wake_enable(c);
	if (ret)
		return ret;
	if (!c->ring)
		c->ring = hcomm_ring_new();
	if (!c->ring)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "callback ring");
	hcomm_ring_init(c->ring);
	c->q_spill = 0;
	c->q_cons.held = NULL;
	hcomm_mpsc_init(&c->q);
	hcomm_ec_init(&c->ec);
	c->lq_head = c->lq_tail = NULL;
	c->prog_stop = 0;
	c->disp_stop = 0;
	__atomic_store_n(&c->cb_mode, mode, __ATOMIC_RELEASE);
	ret = pthread_create(&c->disp_thr, NULL, dispatcher_main, c);
	if (ret)
		goto err;
	ret = pthread_create(&c->prog_thr, NULL, progress_main, c);
	if (ret) {
		pthread_mutex_lock(&c->lq_lock);
		__atomic_store_n(&c->disp_stop, 1, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&c->lq_cond);
		pthread_mutex_unlock(&c->lq_lock);
		hcomm_ec_notify(&c->ec);
		pthread_join(c->disp_thr, NULL);
		goto err;
	}
	__atomic_store_n(&c->threads, 1, __ATOMIC_RELEASE);
	return 0;
err:
	__atomic_store_n(&c->cb_mode, HCOMM_CB_INLINE, __ATOMIC_RELEASE);
	return hcomm__fail(ret == EAGAIN ? HCOMM_ERR_LIMIT : HCOMM_ERR_NOMEM,
			   ret, "starting the callback threads");
}

HCOMM_EXPORT int hcomm_comm_set_cb_mode(struct hcomm_comm *c,
					enum hcomm_cb_mode mode)
{
	int ret = 0;

	if (!c || (mode != HCOMM_CB_INLINE && mode != HCOMM_CB_THREAD &&
		   mode != HCOMM_CB_THREAD_LOCKED))
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_comm_set_cb_mode: mode %d", (int)mode);
	if (t_cb_depth)
		return hcomm__fail(HCOMM_ERR_BUSY, EBUSY, "hcomm_comm_set_cb_mode "
				   "from a callback");
	pthread_mutex_lock(&c->lock);
	if (mode == (enum hcomm_cb_mode)c->cb_mode)
		goto out;
	if (__atomic_load_n(&c->inflight, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&c->cb_pending, __ATOMIC_ACQUIRE)) {
		ret = hcomm__fail(HCOMM_ERR_BUSY, EBUSY, "hcomm_comm_set_cb_mode: "
				  "operations in flight (hcomm_flush first)");
		goto out;
	}
	threads_stop(c);
	if (mode != HCOMM_CB_INLINE)
		ret = threads_start(c, mode);
out:
	pthread_mutex_unlock(&c->lock);
	return ret;
}

/* ------------------------------------------------------------------ */
/* progress, waiting                                                   */
/* ------------------------------------------------------------------ */

/*
 * How long a wait of c polls before it sleeps: HCOMM_SPIN_US when set,
 * else def_ns, or none where this thread has one CPU (hcomm__can_spin()).
 */
uint64_t hcomm__spin_ns(const struct hcomm_comm *c, uint64_t def_ns)
{
	if (c->spin_ns >= 0)
		return (uint64_t)c->spin_ns;
	return hcomm__can_spin() ? def_ns : 0;
}

/* Spin with progress for hcomm__spin_ns(SPIN_NS), then block in short waits. */
struct idle {
	int started;
	struct hcomm_spin spin;
};

static void idle_step(struct hcomm_comm *c, struct hcomm_request *req,
		      struct idle *st)
{
	if (!st->started) {
		st->started = 1;
		hcomm__spin_init(&st->spin, hcomm__now_ns(),
				 hcomm__spin_ns(c, SPIN_NS), 16);
	} else if (!hcomm__spin(&st->spin)) {
		xo_block(c, req, BLOCK_US);
	}
}

/* Callbacks this thread owes first, then the transport's completions. */
static int progress_once(struct hcomm_comm *c)
{
	int n;

	orphans_take(c);
	n = hcomm__run_pending();

	if (t_dispatcher == c)
		n += dispatch_some(c, DISPATCH_MAX);
	return n + xo_progress(c);
}

HCOMM_EXPORT int hcomm_progress(struct hcomm_comm *c)
{
	if (!c)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_progress");
	orphans_take(c);
	hcomm__run_pending();
	if (t_dispatcher == c)
		dispatch_some(c, DISPATCH_MAX);
	return xo_progress(c);
}

HCOMM_EXPORT int hcomm_test(struct hcomm_request *req)
{
	struct hcomm_comm *c;

	if (!req)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_test");
	if (__atomic_load_n(&req->done, __ATOMIC_ACQUIRE))
		return 1;
	/* From its own callback: complete, as far as the callback can tell. */
	if (in_own_cb(req))
		return 1;
	c = hcomm__req_priv(req)->comm;
	if (c)
		progress_once(c);
	return __atomic_load_n(&req->done, __ATOMIC_ACQUIRE);
}

HCOMM_EXPORT int hcomm_wait(struct hcomm_request *req)
{
	struct hcomm_req_priv *rp;
	struct idle st = { 0 };
	struct hcomm_comm *c;

	if (!req)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_wait");
	rp = hcomm__req_priv(req);
	c = rp->comm;
	if (c && rp->target == HCOMM_TGT_COLL)
		return in_own_cb(req) ? req->status : hcomm__coll_wait(c, req);
	while (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE)) {
		/* Waiting for itself from its own callback: it completed. */
		if (in_own_cb(req))
			break;
		if (!c)
			return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
					   "hcomm_wait: request never issued");
		if (progress_once(c) > 0)
			st.started = 0;
		else
			idle_step(c, req, &st);
	}
	if (req->status && rp->target != 0xffff)
		return hcomm__fail(-req->status, rp->err, "operation on rank "
				   "%u failed", rp->target);
	if (req->status)
		return hcomm__fail(-req->status, rp->err, "operation failed");
	return 0;
}

static int check_reqs_free(const struct hcomm_request *reqs, unsigned int n);

/* A request the library takes: results cleared, priv for c and target. */
static void req_init(struct hcomm_comm *c, struct hcomm_request *req,
		     uint16_t target)
{
	struct hcomm_req_priv *rp = hcomm__req_priv(req);

	req->status = 0;
	req->done = 0;
	req->bytes = 0;
	req->t_complete_ns = 0;
	memset(rp, 0, sizeof(*rp));
	rp->comm = c;
	rp->target = target;
}

int hcomm__req_start(struct hcomm_comm *c, struct hcomm_request *req,
		     uint16_t target)
{
	int ret = check_reqs_free(req, 1);

	if (ret)
		return ret;
	req_init(c, req, target);
	__atomic_add_fetch(&c->inflight, 1, __ATOMIC_RELAXED);
	return 0;
}

void hcomm__complete_here(struct hcomm_comm *c, struct hcomm_request *req,
			  int status, int err, uint64_t bytes)
{
	set_result(req, status, err, bytes);
	if (!hand_over(c, req))
		run_cb(c, req);
}

/* Progress once on behalf of a waiter for a collective's request. */
int hcomm__progress_once(struct hcomm_comm *c)
{
	return progress_once(c);
}

int hcomm__drain(struct hcomm_comm *c)
{
	struct idle st = { 0 };

	/*
	 * A callback may issue operations: it counts them in inflight before
	 * its cb_pending decrement (release), so once cb_pending reads 0 a
	 * re-read of inflight sees them.
	 */
	for (;;) {
		/* the queued collectives this thread holds up: not waited for */
		while (__atomic_load_n(&c->inflight, __ATOMIC_ACQUIRE) >
		       hcomm__coll_excluded(c)) {
			if (progress_once(c) > 0)
				st.started = 0;
			else
				idle_step(c, NULL, &st);
		}
		if (t_cb_depth) {
			/*
			 * Inside a callback: the callbacks running on this
			 * thread (and maybe on others, waiting for this one)
			 * cannot return before it does.  Run the ones queued
			 * here; they may issue more.
			 */
			if (hcomm__run_pending() ||
			    (t_dispatcher == c && dispatch_some(c, DISPATCH_MAX)))
				continue;
			return 0;
		}
		while (__atomic_load_n(&c->cb_pending, __ATOMIC_ACQUIRE)) {
			if (!progress_once(c))
				sched_yield();
		}
		if (__atomic_load_n(&c->inflight, __ATOMIC_ACQUIRE) <=
		    hcomm__coll_excluded(c))
			return 0;
	}
}

HCOMM_EXPORT int hcomm_flush(struct hcomm_comm *c)
{
	if (!c)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_flush");
	return c->nxo == 1 ? c->xo[c->sig_xp]->flush(c) : hcomm__drain(c);
}

HCOMM_EXPORT int hcomm_fence(struct hcomm_comm *c)
{
	if (!c)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_fence");
	/*
	 * One transport orders its own operations; across several, what was
	 * issued before completes first (a drain).
	 */
	return c->nxo == 1 ? c->xo[c->sig_xp]->fence(c) : hcomm__drain(c);
}

/* ------------------------------------------------------------------ */
/* one-sided operations                                                */
/* ------------------------------------------------------------------ */

static const char *op_name(uint32_t op)
{
	switch (op) {
	case HCOMM_OP_PUT:
		return "put";
	case HCOMM_OP_GET:
		return "get";
	case HCOMM_OP_PUT_SIGNAL:
		return "put_signal";
	default:
		return "?";
	}
}

/*
 * The transport of a checked descriptor: its target's route for its
 * size (every route has a transport for every size: init made sure).
 */
static int route_of(const struct hcomm_comm *c,
		    const struct hcomm_xfer_desc *d)
{
	return hcomm__route_xp(&c->routes[d->target], d->len);
}

void hcomm__cb_foreign(void)
{
	t_cb_foreign = 1;
}

int hcomm__post_internal(struct hcomm_comm *c, struct hcomm_win *w, int xp,
			 const struct hcomm_xfer_desc *d,
			 struct hcomm_request *req)
{
	struct hcomm_req_priv *rp = hcomm__req_priv(req);
	int ret;

	if (!c->xo[xp])
		return -HCOMM_ERR_NOTSUP;
	req_init(c, req, HCOMM_TGT_INTERNAL);
	rp->xport = (uint8_t)xp;
	__atomic_add_fetch(&c->inflight, 1, __ATOMIC_RELAXED);
	t_issuing++;
	ret = c->xo[xp]->post(c, w, d, 1, req);
	t_issuing--;
	if (ret)
		__atomic_sub_fetch(&c->inflight, 1, __ATOMIC_RELEASE);
	return ret;
}

static int check_desc(const struct hcomm_win *w,
		      const struct hcomm_xfer_desc *d, unsigned int i)
{
	const struct hcomm_comm *c = w->comm;
	const struct hcomm_win_peer *p;

	if (d->op < HCOMM_OP_PUT || d->op > HCOMM_OP_PUT_SIGNAL || d->reserved)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "descriptor %u: op %u "
				   "reserved %u", i, d->op, d->reserved);
	if (d->target < 0 || d->target >= c->size)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "descriptor %u: %s to "
				   "rank %d of %d", i, op_name(d->op),
				   d->target, c->size);
	if (d->len && (!d->local || d->local + d->len < d->local))
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "descriptor %u: %s of "
				   "%llu bytes at local address %#llx", i,
				   op_name(d->op), (unsigned long long)d->len,
				   (unsigned long long)d->local);
	p = &w->peers[d->target].x[c->sig_xp];
	if (d->target_off > p->len || d->len > p->len - d->target_off)
		return hcomm__fail(HCOMM_ERR_INVAL, ERANGE, "descriptor %u: %s "
				   "of %llu bytes at offset %llu of rank %d's "
				   "%llu-byte window", i, op_name(d->op),
				   (unsigned long long)d->len,
				   (unsigned long long)d->target_off, d->target,
				   (unsigned long long)p->len);
	if (d->op != HCOMM_OP_PUT_SIGNAL)
		return 0;
	if (d->sig >= c->xo[c->sig_xp]->signal_count(c))
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "descriptor %u: "
				   "signal %u of %u", i, d->sig,
				   c->xo[c->sig_xp]->signal_count(c));
	if (!p->len)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "descriptor %u: rank "
				   "%d exposes no memory in this window, which a "
				   "signal needs", i, d->target);
	return 0;
}

/*
 * A request whose callback is running on this thread is still the
 * library's: issuing it again would be overwritten when the callback
 * returns.  (Another thread's running callback cannot be seen; the rule
 * is the same.)
 */
static int check_reqs_free(const struct hcomm_request *reqs, unsigned int n)
{
	unsigned int i;

	for (i = 0; t_cb_top && i < n; i++)
		if (in_own_cb(&reqs[i]))
			return hcomm__fail(HCOMM_ERR_BUSY, EBUSY, "request %u is "
					   "still the library's: its callback "
					   "is running (issue another request)",
					   i);
	return 0;
}

/* Issue n checked descriptors; on failure every request reads done. */
static int issue(struct hcomm_win *w, const struct hcomm_xfer_desc *d,
		 unsigned int n, struct hcomm_request *reqs)
{
	struct hcomm_comm *c = w->comm;
	unsigned int i, k, run = 0;
	int ret;

	ret = check_reqs_free(reqs, n);
	if (ret)
		return ret;

	for (i = 0; i < n; i++)
		req_init(c, &reqs[i], (uint16_t)d[i].target);
	__atomic_add_fetch(&c->inflight, n, __ATOMIC_RELAXED);
	/*
	 * Callbacks of what completes meanwhile (a full ring reaped, the
	 * ioctl path completing inside post) run once all n are issued.
	 * Runs of consecutive descriptors for one transport go out together.
	 * When the first run fails nothing was issued: the call fails and
	 * no callback runs.  When a later one fails, the runs before it are
	 * on their way: it and the rest complete with the error (callbacks
	 * included) and the call returns 0, so that every request of a call
	 * that returned 0 completes exactly once through its callback.
	 */
	t_issuing++;
	for (i = 0, ret = 0; i < n && !ret; i += run) {
		int xp = route_of(c, &d[i]);

		for (run = 1; i + run < n && route_of(c, &d[i + run]) == xp;
		     run++)
			;
		for (k = i; k < i + run; k++)
			hcomm__req_priv(&reqs[k])->xport = (uint8_t)xp;
		ret = c->xo[xp]->post(c, w, d + i, run, reqs + i);
	}
	t_issuing--;
	if (ret) {
		i -= run;
		if (i) {
			int err = hcomm_errno() ? hcomm_errno() : EIO;

			for (; i < n; i++)
				hcomm__complete(c, &reqs[i], err, 0);
			ret = 0;
		} else {
			__atomic_sub_fetch(&c->inflight, n, __ATOMIC_RELEASE);
			for (; i < n; i++) {
				reqs[i].status = ret;
				__atomic_store_n(&reqs[i].done, 1,
						 __ATOMIC_RELEASE);
			}
		}
	}
	hcomm__run_pending();
	return ret;
}

static void fail_reqs(struct hcomm_request *reqs, unsigned int n, int ret)
{
	unsigned int i;

	for (i = 0; reqs && i < n; i++) {
		memset(reqs[i].priv, 0, sizeof(reqs[i].priv));
		reqs[i].status = ret;
		reqs[i].bytes = 0;
		__atomic_store_n(&reqs[i].done, 1, __ATOMIC_RELEASE);
	}
}

static int op_nb(struct hcomm_win *w, const struct hcomm_xfer_desc *d,
		 struct hcomm_request *req)
{
	int ret;

	if (!w || !req)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_%s_nb: %s",
				   op_name(d->op), w ? "no request" : "no window");
	ret = check_desc(w, d, 0);
	if (ret) {
		fail_reqs(req, 1, ret);
		return ret;
	}
	return issue(w, d, 1, req);
}

static int op_blocking(struct hcomm_win *w, const struct hcomm_xfer_desc *d)
{
	struct hcomm_request req;
	int ret;

	if (!w)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_%s: no window",
				   op_name(d->op));
	ret = check_desc(w, d, 0);
	if (ret)
		return ret;
	memset(&req, 0, sizeof(req));
	ret = issue(w, d, 1, &req);
	if (ret)
		return ret;
	if (hcomm_wait(&req))
		return hcomm__fail(-req.status, hcomm__req_priv(&req)->err,
				   "hcomm_%s: rank %d offset %llu, %llu bytes",
				   op_name(d->op), d->target,
				   (unsigned long long)d->target_off,
				   (unsigned long long)d->len);
	return 0;
}

#define DESC(o, t, off, l, n, s, v) ((struct hcomm_xfer_desc) {	\
	.op = (o), .target = (t), .target_off = (off),			\
	.local = (uintptr_t)(l), .len = (n), .sig = (s), .value = (v) })

HCOMM_EXPORT int hcomm_put(struct hcomm_win *win, int target,
			   uint64_t target_off, const void *src, size_t len)
{
	return op_blocking(win, &DESC(HCOMM_OP_PUT, target, target_off, src,
				      len, 0, 0));
}

HCOMM_EXPORT int hcomm_get(struct hcomm_win *win, int target,
			   uint64_t target_off, void *dst, size_t len)
{
	return op_blocking(win, &DESC(HCOMM_OP_GET, target, target_off, dst,
				      len, 0, 0));
}

HCOMM_EXPORT int hcomm_put_signal(struct hcomm_win *win, int target,
				  uint64_t target_off, const void *src,
				  size_t len, uint32_t sig, uint64_t value)
{
	return op_blocking(win, &DESC(HCOMM_OP_PUT_SIGNAL, target, target_off,
				      src, len, sig, value));
}

HCOMM_EXPORT int hcomm_put_nb(struct hcomm_win *win, int target,
			      uint64_t target_off, const void *src, size_t len,
			      struct hcomm_request *req)
{
	return op_nb(win, &DESC(HCOMM_OP_PUT, target, target_off, src, len,
				0, 0), req);
}

HCOMM_EXPORT int hcomm_get_nb(struct hcomm_win *win, int target,
			      uint64_t target_off, void *dst, size_t len,
			      struct hcomm_request *req)
{
	return op_nb(win, &DESC(HCOMM_OP_GET, target, target_off, dst, len,
				0, 0), req);
}

HCOMM_EXPORT int hcomm_put_signal_nb(struct hcomm_win *win, int target,
				     uint64_t target_off, const void *src,
				     size_t len, uint32_t sig, uint64_t value,
				     struct hcomm_request *req)
{
	return op_nb(win, &DESC(HCOMM_OP_PUT_SIGNAL, target, target_off, src,
				len, sig, value), req);
}

/* Wait for reqs[0 .. n); keep the first failure in *err / *errnum. */
static void wait_all(struct hcomm_request *reqs, unsigned int n, int *err,
		     int *errnum)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (hcomm_wait(&reqs[i]) && !*err) {
			*err = reqs[i].status;
			*errnum = hcomm__req_priv(&reqs[i])->err;
		}
	}
}

/*
 * reqs NULL: two halves of BATCH_CHUNK requests on the stack; a half is
 * reissued once its previous operations completed, so the ring never
 * runs dry while we wait.
 */
static int batch_blocking(struct hcomm_win *w, const struct hcomm_xfer_desc *d,
			  unsigned int n)
{
	struct hcomm_request rq[2][BATCH_CHUNK];
	unsigned int cnt[2] = { 0, 0 }, off = 0, m, half = 0;
	int err = 0, errnum = 0, ret = 0;

	while (off < n) {
		m = n - off < BATCH_CHUNK ? n - off : BATCH_CHUNK;
		wait_all(rq[half], cnt[half], &err, &errnum);
		cnt[half] = 0;
		memset(rq[half], 0, m * sizeof(rq[half][0]));
		ret = issue(w, d + off, m, rq[half]);
		if (ret)
			break;
		cnt[half] = m;
		off += m;
		half ^= 1;
	}
	wait_all(rq[0], cnt[0], &err, &errnum);
	wait_all(rq[1], cnt[1], &err, &errnum);
	if (ret)
		return ret;
	if (err)
		return hcomm__fail(-err, errnum, "hcomm_batch: an operation "
				   "failed");
	return 0;
}

HCOMM_EXPORT int hcomm_batch(struct hcomm_win *win,
			     const struct hcomm_xfer_desc *d, unsigned int n,
			     struct hcomm_request *reqs)
{
	unsigned int i;
	int ret;

	if (!win || (n && !d))
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_batch");
	for (i = 0; i < n; i++) {
		ret = check_desc(win, &d[i], i);
		if (ret) {
			fail_reqs(reqs, n, ret);
			return ret;
		}
	}
	if (!n)
		return 0;
	if (!reqs)
		return batch_blocking(win, d, n);
	return issue(win, d, n, reqs);
}

/* ------------------------------------------------------------------ */
/* signals                                                             */
/* ------------------------------------------------------------------ */

/*
 * With several transports a signal may still sit in another transport's
 * queue (an RDMA completion nobody reaped, one with @signal_apply): reap
 * everything, then look at the owner's value, then sleep in the owner's
 * wait, which cannot see such a queue: for SIG_SLICE_MIN_NS, then twice
 * as long each time up to SIG_SLICE_MAX_NS, so that a signal that comes
 * soon is seen soon and a long wait costs few wake-ups.  Transports that
 * hand their signals over themselves (tcp's service thread) wake the
 * owner's wait: without another kind the owner waits the whole time.
 */
#define SIG_SLICE_MIN_NS	100000ULL
#define SIG_SLICE_MAX_NS	2000000ULL

/* Every signal another transport holds, into the owner (signal_apply). */
static void signals_apply(struct hcomm_comm *c)
{
	int i;

	for_each_xo(c, i)
		if (i != c->sig_xp && c->xo[i]->signal_apply)
			c->xo[i]->signal_apply(c);
}

/*
 * Until one of n signals (valid numbers) reaches its value: the first
 * such i, -HCOMM_ERR_TIMEOUT (not recorded) or another error.  One
 * transport waits itself; with several, a signal may sit in another's
 * queue, so each slice reaps and applies them all first.
 */
static int wait_any(struct hcomm_comm *c, const uint32_t *sig,
		    const uint64_t *val, int n, int timeout_ms)
{
	const struct hcomm_xport_ops *o = c->xo[c->sig_xp];
	uint64_t deadline = UINT64_MAX, slice = 0, t;
	int64_t w;
	int i;

	if (c->nxo == 1)
		return o->signal_wait_any(c, sig, val, n, timeout_ms < 0 ? -1 :
					  (int64_t)timeout_ms * 1000000);
	for_each_xo(c, i)
		if (i != c->sig_xp && c->xo[i]->signal_apply)
			slice = SIG_SLICE_MIN_NS;
	if (timeout_ms >= 0)
		deadline = hcomm__now_ns() + (uint64_t)timeout_ms * 1000000ULL;
	for (;;) {
		hcomm__run_pending();
		xo_progress(c);
		signals_apply(c);
		for (i = 0; i < n; i++)
			if (o->signal_read(c, sig[i]) >= val[i])
				return i;
		t = hcomm__now_ns();
		if (t >= deadline)
			return -HCOMM_ERR_TIMEOUT;
		w = deadline == UINT64_MAX ? -1 : (int64_t)(deadline - t);
		if (slice)
			w = hcomm__slice(w, &slice, SIG_SLICE_MAX_NS);
		i = o->signal_wait_any(c, sig, val, n, w);
		if (i != -HCOMM_ERR_TIMEOUT)
			return i;
	}
}

/* Signal numbers of this communicator: 0, or the error recorded. */
static int sigs_valid(struct hcomm_comm *c, const char *fn,
		      const uint32_t *sig, int n)
{
	uint32_t count = c->xo[c->sig_xp]->signal_count(c);
	int i;

	for (i = 0; i < n; i++)
		if (sig[i] >= count)
			return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "%s: signal "
					   "%u of %u", fn, sig[i], count);
	return 0;
}

/*
 * Wait up to timeout_ms for one of n (1 .. HCOMM_SIGNAL_WAIT_ANY_MAX)
 * signals to reach its value:
 * the first such i, -HCOMM_ERR_TIMEOUT (not recorded) or another error.
 * The collectives wait so for a message and a credit at once: waiting
 * for one of them only, a rank whose send waited for the credit that
 * came while it slept slept on until the message came or the wait's
 * slice ended, and its neighbour, waiting for that send, likewise.
 */
int hcomm__signal_wait_any(struct hcomm_comm *c, const uint32_t *sig,
			   const uint64_t *val, int n, int timeout_ms)
{
	int ret;

	if (n < 1 || n > HCOMM_SIGNAL_WAIT_ANY_MAX)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "%d signals", n);
	ret = sigs_valid(c, "signal_wait_any", sig, n);
	return ret ? ret : wait_any(c, sig, val, n, timeout_ms);
}

HCOMM_EXPORT int64_t hcomm_signal_wait(struct hcomm_comm *c, uint32_t sig,
				       uint64_t value, int timeout_ms)
{
	int ret;

	if (!c)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_signal_wait");
	ret = sigs_valid(c, "hcomm_signal_wait", &sig, 1);
	if (!ret)
		ret = wait_any(c, &sig, &value, 1, timeout_ms);
	if (!ret)
		return (int64_t)c->xo[c->sig_xp]->signal_read(c, sig);
	if (ret != -HCOMM_ERR_TIMEOUT)
		return ret;
	return hcomm__fail(HCOMM_ERR_TIMEOUT, ETIME, "hcomm_signal_wait: "
			   "signal %u stayed at %llu < %llu for %d ms", sig,
			   (unsigned long long)c->xo[c->sig_xp]->
			   signal_read(c, sig), (unsigned long long)value,
			   timeout_ms);
}

HCOMM_EXPORT int hcomm_signal_wait_any(struct hcomm_comm *c,
					const uint32_t *sig,
					const uint64_t *value, int n,
					int timeout_ms)
{
	int ret;

	if (!c || !sig || !value)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_signal_wait_any: NULL");
	ret = hcomm__signal_wait_any(c, sig, value, n, timeout_ms);
	if (ret != -HCOMM_ERR_TIMEOUT)
		return ret;
	return hcomm__fail(HCOMM_ERR_TIMEOUT, ETIME, "hcomm_signal_wait_any: "
			   "none of %d signals (the first %u at %llu < %llu) "
			   "reached its value in %d ms", n, sig[0],
			   (unsigned long long)c->xo[c->sig_xp]->
			   signal_read(c, sig[0]),
			   (unsigned long long)value[0], timeout_ms);
}

HCOMM_EXPORT uint64_t hcomm_signal_read(struct hcomm_comm *c, uint32_t sig)
{
	if (!c)
		return 0;
	if (c->nxo > 1) {
		xo_progress(c);
		signals_apply(c);
	}
	return c->xo[c->sig_xp]->signal_read(c, sig);
}

HCOMM_EXPORT uint32_t hcomm_signal_count(const struct hcomm_comm *c)
{
	return c ? c->xo[c->sig_xp]->signal_count(c) : 0;
}

/* ------------------------------------------------------------------ */
/* windows                                                             */
/* ------------------------------------------------------------------ */

/*
 * After a collective step where rank r may have failed locally (peer err
 * fields, stride bytes apart): 0 when nobody did, else the error this
 * rank returns (its own, or the first other rank's).
 */
static int collective_err(struct hcomm_comm *c, const void *base,
			  size_t stride, size_t err_off, int local,
			  const char *what)
{
	int r, e;

	if (local)
		return local;
	for (r = 0; r < c->size; r++) {
		memcpy(&e, (const char *)base + r * stride + err_off, sizeof(e));
		if (e)
			return hcomm__fail(e > 0 && e < HCOMM_ERR__MAX ? e :
					   HCOMM_ERR_IO, 0, "%s failed on rank "
					   "%d: %s", what, r,
					   hcomm_strerror(e));
	}
	return 0;
}

static void win_unlink(struct hcomm_win *w)
{
	struct hcomm_comm *c = w->comm;

	pthread_mutex_lock(&c->lock);
	if (w->prev)
		w->prev->next = w->next;
	else
		c->wins = w->next;
	if (w->next)
		w->next->prev = w->prev;
	pthread_mutex_unlock(&c->lock);
}

/* Undo the win_create of every transport before @upto (ids below it). */
static void win_free_upto(struct hcomm_comm *c, struct hcomm_win *w, int upto)
{
	int i;

	for (i = 0; i < upto; i++)
		if (c->xo[i])
			(void)c->xo[i]->win_free(c, w);
}

HCOMM_EXPORT int hcomm_win_create(struct hcomm_comm *c, void *base,
				  size_t len, struct hcomm_win **winp)
{
	struct hcomm_win_peers self;
	struct hcomm_win *w;
	int ret, local = 0, i, made = 0;

	if (!c || !winp)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_win_create");
	*winp = NULL;
	w = calloc(1, sizeof(*w));
	if (w)
		w->peers = calloc(c->size, sizeof(*w->peers));
	if (!w || !w->peers) {
		free(w);
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "hcomm_win_create");
	}
	w->comm = c;
	w->base = base;
	w->len = len;
	memset(&self, 0, sizeof(self));
	if (len && !base)
		local = hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_win_create: "
				    "%zu bytes at NULL", len);
	for (i = 0; i < HCOMM_XP_MAX && !local; i++) {
		if (!c->xo[i])
			continue;
		local = c->xo[i]->win_create(c, w, base, len, &self.x[i]);
		made = i + 1;
		if (local)
			made = i;	/* this one undid itself */
	}
	if (local)
		win_free_upto(c, w, made);
	/* every entry says how long the part is and whether it failed */
	for (i = 0; i < HCOMM_XP_MAX; i++) {
		self.x[i].len = len;
		self.x[i].err = -local;
	}
	ret = hcomm__boot_allgather(c->boot, &self, w->peers, sizeof(self));
	if (!ret)
		ret = collective_err(c, w->peers, sizeof(self),
				     offsetof(struct hcomm_win_peer, err),
				     local, "hcomm_win_create");
	if (!ret)
		ret = hcomm__boot_barrier(c->boot);
	if (local)
		ret = local;
	if (ret) {
		if (!local)
			win_free_upto(c, w, HCOMM_XP_MAX);
		free(w->peers);
		free(w);
		return ret;
	}
	pthread_mutex_lock(&c->lock);
	w->next = c->wins;
	if (c->wins)
		c->wins->prev = w;
	c->wins = w;
	pthread_mutex_unlock(&c->lock);
	*winp = w;
	return 0;
}

/* win_free of every transport: the first error. */
static int win_free_all(struct hcomm_comm *c, struct hcomm_win *w)
{
	int ret = 0, r, i;

	for_each_xo(c, i) {
		r = c->xo[i]->win_free(c, w);
		ret = ret ? ret : r;
	}
	return ret;
}

HCOMM_EXPORT int hcomm_win_free(struct hcomm_win *w)
{
	struct hcomm_comm *c;
	int ret, r;

	if (!w)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_win_free");
	c = w->comm;
	ret = hcomm_flush(c);
	/* Nobody reaches this rank's part after the barrier. */
	r = hcomm__boot_barrier(c->boot);
	ret = ret ? ret : r;
	r = win_free_all(c, w);
	ret = ret ? ret : r;
	r = hcomm__boot_barrier(c->boot);
	ret = ret ? ret : r;
	win_unlink(w);
	free(w->peers);
	free(w);
	return ret;
}

HCOMM_EXPORT size_t hcomm_win_size(const struct hcomm_win *w, int rank)
{
	if (!w || rank < 0 || rank >= w->comm->size)
		return 0;
	return w->peers[rank].x[0].len;
}

/* ------------------------------------------------------------------ */
/* communicator                                                        */
/* ------------------------------------------------------------------ */

static int check_cfg(const struct hcomm_config *cfg)
{
	if (cfg->num_qps < 1 || cfg->num_qps > 64)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "num_qps %u: not in "
				   "1 .. 64", cfg->num_qps);
	if (cfg->queue_depth < 8 || cfg->queue_depth > 32768)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "queue_depth %u: not "
				   "in 8 .. 32768", cfg->queue_depth);
	if (cfg->timeout_ms < 1)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "timeout_ms 0");
	return 0;
}

/* ------------------------------------------------------------------ */
/* Per-peer counters and the peers file                                */
/* ------------------------------------------------------------------ */

_Static_assert((int)HCOMM_XPORT_KERNEL == HCOMM_XP_KERNEL &&
	       (int)HCOMM_XPORT_RDMA == HCOMM_XP_RDMA &&
	       (int)HCOMM_XPORT_TCP == HCOMM_XP_TCP &&
	       HCOMM_XP_MAX <= HCOMM_PEER_XPORTS &&
	       HCOMM_ROUTE_MAX <= HCOMM_PEER_RANGES,
	       "struct hcomm_peer_stats mirrors the transports and routes");
_Static_assert(sizeof(((struct hcomm_route *)0)->why) ==
	       sizeof(((struct hcomm_peer_stats *)0)->why),
	       "hcomm_peer_stats.why holds hcomm_route.why");

/* The names of the common ibv_wc_status values (the JSON's keys). */
static const char *const wc_names[HCOMM_PEER_WC_STATUS] = {
	[IBV_WC_SUCCESS] = "SUCCESS",
	[IBV_WC_LOC_LEN_ERR] = "LOC_LEN_ERR",
	[IBV_WC_LOC_QP_OP_ERR] = "LOC_QP_OP_ERR",
	[IBV_WC_LOC_EEC_OP_ERR] = "LOC_EEC_OP_ERR",
	[IBV_WC_LOC_PROT_ERR] = "LOC_PROT_ERR",
	[IBV_WC_WR_FLUSH_ERR] = "WR_FLUSH_ERR",
	[IBV_WC_MW_BIND_ERR] = "MW_BIND_ERR",
	[IBV_WC_BAD_RESP_ERR] = "BAD_RESP_ERR",
	[IBV_WC_LOC_ACCESS_ERR] = "LOC_ACCESS_ERR",
	[IBV_WC_REM_INV_REQ_ERR] = "REM_INV_REQ_ERR",
	[IBV_WC_REM_ACCESS_ERR] = "REM_ACCESS_ERR",
	[IBV_WC_REM_OP_ERR] = "REM_OP_ERR",
	[IBV_WC_RETRY_EXC_ERR] = "RETRY_EXC_ERR",
	[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR_RETRY_EXC_ERR",
	[IBV_WC_LOC_RDD_VIOL_ERR] = "LOC_RDD_VIOL_ERR",
	[IBV_WC_REM_INV_RD_REQ_ERR] = "REM_INV_RD_REQ_ERR",
	[IBV_WC_REM_ABORT_ERR] = "REM_ABORT_ERR",
	[IBV_WC_INV_EECN_ERR] = "INV_EECN_ERR",
	[IBV_WC_INV_EEC_STATE_ERR] = "INV_EEC_STATE_ERR",
	[IBV_WC_FATAL_ERR] = "FATAL_ERR",
	[IBV_WC_RESP_TIMEOUT_ERR] = "RESP_TIMEOUT_ERR",
	[IBV_WC_GENERAL_ERR] = "GENERAL_ERR",
};

/* peer's route and every transport's counters; c->peers_lock held. */
static void peer_stats_get(struct hcomm_comm *c, int peer,
			   struct hcomm_peer_stats *st)
{
	const struct hcomm_route *rt = &c->routes[peer];
	const struct hcomm_link *l = &c->links[(size_t)peer * HCOMM_XP_MAX];
	unsigned int i;
	int x;

	memset(st, 0, sizeof(*st));
	st->size = sizeof(*st);
	st->version = HCOMM_PEER_STATS_VERSION;
	st->peer = peer;
	st->nranges = rt->n;
	for (i = 0; i < rt->n; i++) {
		st->range[i].upto = rt->upto[i];
		st->range[i].xport = rt->xp[i];
	}
	memcpy(st->why, rt->why, sizeof(st->why));
	for_each_xo(c, x)
		if (l[x].usable)
			c->xo[x]->peer_stats(c, peer, &st->xp[x]);
}

HCOMM_EXPORT int hcomm_comm_peer_lost(const struct hcomm_comm *c, int peer)
{
	if (!c || peer < 0 || peer >= c->size || peer == c->rank)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_comm_peer_lost: %s", !c ?
				   "comm is NULL" : peer == c->rank ?
				   "this rank" : "no such rank");
	return c->lost ? __atomic_load_n(&c->lost[peer], __ATOMIC_ACQUIRE) :
	       0;
}

HCOMM_EXPORT int hcomm_comm_peer_stats(struct hcomm_comm *c, int peer,
				       struct hcomm_peer_stats *st)
{
	struct hcomm_peer_stats t;

	if (!c || !st)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_comm_peer_stats: %s is NULL",
				   c ? "st" : "comm");
	if (st->size < sizeof(t))
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_comm_peer_stats: st->size %u: below "
				   "%zu (set it to sizeof(struct "
				   "hcomm_peer_stats))", st->size, sizeof(t));
	if (peer < 0 || peer >= c->size || peer == c->rank)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_comm_peer_stats: peer %d: %s", peer,
				   peer == c->rank ? "this rank" :
				   "no such rank");
	pthread_mutex_lock(&c->peers_lock);
	peer_stats_get(c, peer, &t);
	pthread_mutex_unlock(&c->peers_lock);
	memcpy(st, &t, sizeof(t));	/* st->size >= sizeof(t) */
	return 0;
}

/* The decision table as one JSON object (no newline); peers_lock held. */
static void table_json(struct hcomm_comm *c, FILE *f)
{
	int r, first = 1;

	fprintf(f, "{\"rank\": %d, \"size\": %d, \"transports\": \"%s\", "
		"\"peers\": [", c->rank, c->size, c->xname);
	for (r = 0; r < c->size; r++) {
		if (r == c->rank)
			continue;
		fputs(first ? "" : ", ", f);
		hcomm__route_json(f, r, &c->links[(size_t)r * HCOMM_XP_MAX],
				  &c->routes[r]);
		first = 0;
	}
	fputs("]}", f);
}

static void xport_json(FILE *f, const struct hcomm_peer_xport_stats *s)
{
	unsigned int i;
	int first = 1;

	fprintf(f, "{\"bytes_sent\": %llu, \"bytes_recv\": %llu, "
		"\"ops_sent\": %llu, \"ops_recv\": %llu, "
		"\"crc_errors\": %llu, \"refused\": %llu, "
		"\"conn_lost\": %llu, \"retransmits\": %llu, "
		"\"wc_errors\": %llu, \"wc_status\": {",
		(unsigned long long)s->bytes_sent,
		(unsigned long long)s->bytes_recv,
		(unsigned long long)s->ops_sent,
		(unsigned long long)s->ops_recv,
		(unsigned long long)s->crc_errors,
		(unsigned long long)s->refused,
		(unsigned long long)s->conn_lost,
		(unsigned long long)s->retransmits,
		(unsigned long long)s->wc_errors);
	for (i = 0; i < HCOMM_PEER_WC_STATUS; i++) {
		if (!s->wc_status[i])
			continue;
		fputs(first ? "\"" : ", \"", f);
		if (wc_names[i])
			fputs(wc_names[i], f);
		else
			fprintf(f, "STATUS_%u", i);
		fprintf(f, "\": %llu", (unsigned long long)s->wc_status[i]);
		first = 0;
	}
	fputs("}}", f);
}

/* The peers file's content; peers_lock held. */
static void peers_json(struct hcomm_comm *c, FILE *f)
{
	struct hcomm_peer_stats st;
	int r, x, first = 1;

	fprintf(f, "{\"version\": %d, \"pid\": %d, \"rank\": %d, "
		"\"size\": %d, \"table\": ", HCOMM_PEERS_JSON_VERSION,
		(int)getpid(), c->rank, c->size);
	table_json(c, f);
	fputs(", \"counters\": [", f);
	for (r = 0; r < c->size; r++) {
		if (r == c->rank)
			continue;
		peer_stats_get(c, r, &st);
		fprintf(f, "%s{\"peer\": %d", first ? "" : ", ", r);
		for (x = 0; x < HCOMM_XP_MAX; x++) {
			if (!st.xp[x].in_use)
				continue;
			fprintf(f, ", \"%s\": ", hcomm__xp_name(x));
			xport_json(f, &st.xp[x]);
		}
		fputc('}', f);
		first = 0;
	}
	fputs("]}\n", f);
}

/*
 * Write the peers file (temporary file, then rename) unless its content
 * is what was written last and !force; peers_lock held.  0 or -errno.
 */
static int peers_write(struct hcomm_comm *c, int force)
{
	char *buf = NULL, *tmp;
	size_t len = 0, n, off = 0;
	ssize_t w;
	FILE *f;
	int fd, err = 0;

	f = open_memstream(&buf, &len);
	if (!f)
		return -errno;
	peers_json(c, f);
	if (fclose(f)) {
		free(buf);
		return -ENOMEM;
	}
	if (!force && c->peers_last && c->peers_last_len == len &&
	    !memcmp(c->peers_last, buf, len)) {
		free(buf);
		return 0;
	}
	n = strlen(c->peers_path) + 5;
	tmp = malloc(n);
	if (!tmp) {
		free(buf);
		return -ENOMEM;
	}
	snprintf(tmp, n, "%s.tmp", c->peers_path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0)
		err = errno;
	while (!err && off < len) {
		w = write(fd, buf + off, len - off);
		if (w < 0 && errno != EINTR)
			err = errno;
		else if (w > 0)
			off += (size_t)w;
	}
	if (fd >= 0 && close(fd) && !err)
		err = errno;
	if (!err && rename(tmp, c->peers_path))
		err = errno;
	if (err && fd >= 0)
		unlink(tmp);
	free(tmp);
	if (err) {
		free(buf);
		return -err;
	}
	free(c->peers_last);
	c->peers_last = buf;
	c->peers_last_len = len;
	return 0;
}

/* Rewrite the peers file once a second while it changes. */
static void *peers_main(void *arg)
{
	struct hcomm_comm *c = arg;
	struct timespec ts;

	pthread_mutex_lock(&c->peers_lock);
	while (!c->peers_stop) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec++;
		(void)pthread_cond_timedwait(&c->peers_cond, &c->peers_lock,
					     &ts);
		if (!c->peers_stop && !c->probing)
			(void)peers_write(c, 0);	/* again next time */
	}
	pthread_mutex_unlock(&c->peers_lock);
	return NULL;
}

/* After hcomm_comm_probe(): the new table now. */
static void peers_refresh(struct hcomm_comm *c)
{
	pthread_mutex_lock(&c->peers_lock);
	if (c->peers_path)
		(void)peers_write(c, 0);	/* else the thread retries */
	pthread_mutex_unlock(&c->peers_lock);
}

/* The peers file next to the stats file, and its writer. */
static int peers_publish(struct hcomm_comm *c)
{
	size_t n = strlen(c->pub_path) + 16;
	sigset_t all, old;
	int err;

	c->peers_path = malloc(n);
	if (!c->peers_path)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "HCOMM_STATS_DIR");
	/* pub_path ends in ".stats" */
	snprintf(c->peers_path, n, "%.*s.peers.json",
		 (int)(strlen(c->pub_path) - 6), c->pub_path);
	pthread_mutex_lock(&c->peers_lock);
	err = -peers_write(c, 1);
	pthread_mutex_unlock(&c->peers_lock);
	if (!err) {
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		err = pthread_create(&c->peers_thr, NULL, peers_main, c);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (err)
			unlink(c->peers_path);
	}
	if (!err)
		return 0;
	hcomm__fail(hcomm__err_code(0, err), err, "HCOMM_STATS_DIR: %s",
		    c->peers_path);
	free(c->peers_path);
	c->peers_path = NULL;
	free(c->peers_last);
	c->peers_last = NULL;
	return -hcomm__err_code(0, err);
}

static void peers_unpublish(struct hcomm_comm *c)
{
	if (!c->peers_path)
		return;
	pthread_mutex_lock(&c->peers_lock);
	c->peers_stop = 1;
	pthread_cond_signal(&c->peers_cond);
	pthread_mutex_unlock(&c->peers_lock);
	pthread_join(c->peers_thr, NULL);
	unlink(c->peers_path);
	free(c->peers_path);
	c->peers_path = NULL;
	free(c->peers_last);
	c->peers_last = NULL;
}

static void stats_unpublish(struct hcomm_comm *c)
{
	int i;

	if (!c->pub)
		return;
	peers_unpublish(c);
	for_each_xo(c, i)
		c->xo[i]->publish(c, NULL);
	unlink(c->pub_path);
	munmap(c->pub, sizeof(*c->pub));
	c->pub = NULL;
	free(c->pub_path);
	c->pub_path = NULL;
}

/* HCOMM_STATS_DIR: create and map this communicator's stats file. */
static int stats_publish(struct hcomm_comm *c)
{
	static unsigned int seq;
	const char *dir = getenv("HCOMM_STATS_DIR");
	struct hcomm_stats_file *f;
	size_t n;
	int fd, err, i, ret;

	if (!dir || !*dir)
		return 0;
	n = strlen(dir) + 64;
	c->pub_path = malloc(n);
	if (!c->pub_path)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "HCOMM_STATS_DIR");
	snprintf(c->pub_path, n, "%s/hcomm-%d-%d-%u.stats", dir, (int)getpid(),
		 c->rank, __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
	fd = open(c->pub_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC |
		  O_NOFOLLOW, 0600);
	if (fd < 0 || ftruncate(fd, sizeof(*f))) {
		err = errno;
		if (fd >= 0) {
			close(fd);
			unlink(c->pub_path);
		}
		goto fail;
	}
	f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	err = errno;
	close(fd);
	if (f == MAP_FAILED) {
		unlink(c->pub_path);
		goto fail;
	}
	f->version = HCOMM_STATS_VERSION;
	f->size = sizeof(*f);
	f->pid = (int32_t)getpid();
	f->rank = c->rank;
	f->world_size = c->size;
	__atomic_store_n(&f->magic, HCOMM_STATS_MAGIC, __ATOMIC_RELEASE);
	c->pub = f;
	for_each_xo(c, i)
		c->xo[i]->publish(c, &f->st);
	ret = peers_publish(c);
	if (ret)
		stats_unpublish(c);	/* no peers file: the stats file goes */
	return ret;
fail:
	hcomm__fail(hcomm__err_code(0, err), err, "HCOMM_STATS_DIR: %s",
		    c->pub_path);
	free(c->pub_path);
	c->pub_path = NULL;
	return -hcomm__err_code(0, err);
}

HCOMM_EXPORT int hcomm_comm_get_stats(struct hcomm_comm *c,
				      struct hcomm_comm_stats *st)
{
	int i;

	if (!c || !st)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_comm_get_stats");
	memset(st, 0, sizeof(*st));
	for_each_xo(c, i)
		c->xo[i]->stats(c, st);
	return 0;
}

/*
 * Which transports this rank sets up, the same decision on every rank
 * for the ones whose set-up talks to the others (rdma, tcp):
 *   - HCOMM_TRANSPORT=kernel|rdma|tcp: that one alone, which every rank
 *     must be able to use (and kernel: one host);
 *   - auto: kernel on a rank that shares a host with another rank that
 *     can use it (or runs alone); rdma and tcp on every rank when some
 *     pair of ranks cannot use the kernel (other hosts, or no module),
 *     rdma only when every rank has a device.
 * caps[r]: bit id set when rank r's probe of transport id said yes.
 */
static int xports_plan(struct hcomm_comm *c, const uint32_t *caps,
		       int *use)
{
	const uint32_t k = 1u << HCOMM_XP_KERNEL;
	uint32_t all = ~0u;
	int r, r2, net = 0, mine_k = 0;

	for (r = 0; r < c->size; r++)
		all &= caps[r];
	memset(use, 0, HCOMM_XP_MAX * sizeof(*use));
	if (c->forced >= 0) {
		for (r = 0; r < c->size; r++)
			if (!(caps[r] & (1u << c->forced)))
				return hcomm__fail(HCOMM_ERR_NOTSUP, 0,
						   "HCOMM_TRANSPORT=%s: rank "
						   "%d cannot use it",
						   hcomm__xp_name(c->forced),
						   r);
		for (r = 0; c->forced == HCOMM_XP_KERNEL && r < c->size; r++)
			if (!hcomm__boot_same_host(c->boot, r))
				return hcomm__fail(HCOMM_ERR_NOTSUP, 0,
						   "HCOMM_TRANSPORT=kernel: "
						   "rank %d is on another host",
						   r);
		use[c->forced] = 1;
		return 0;
	}
	for (r = 0; r < c->size; r++)
		for (r2 = r + 1; r2 < c->size; r2++)
			if (!hcomm__boot_same_hosts(c->boot, r, r2) ||
			    !(caps[r] & caps[r2] & k))
				net = 1;
	for (r = 0; r < c->size; r++)
		if (r != c->rank && hcomm__boot_same_host(c->boot, r) &&
		    (caps[r] & k))
			mine_k = 1;
	use[HCOMM_XP_KERNEL] = (caps[c->rank] & k) && (mine_k || !net);
	use[HCOMM_XP_TCP] = net && (all & (1u << HCOMM_XP_TCP));
	use[HCOMM_XP_RDMA] = net && (all & (1u << HCOMM_XP_RDMA));
	if (net && !use[HCOMM_XP_TCP] && !use[HCOMM_XP_RDMA])
		return hcomm__fail(HCOMM_ERR_NOTSUP, 0, "no network transport "
				   "reaches every rank");
	if (!net && !use[HCOMM_XP_KERNEL])
		return hcomm__fail(HCOMM_ERR_NOTSUP, 0, "no transport: "
				   "/dev/hcomm cannot be used here");
	return 0;
}

/*
 * Routes: every peer gets the cheapest transport per size among those
 * that reach it (hcomm_probe.h: measured when probed, else the order of
 * preference kernel, rdma, tcp).  The kernel reaches this rank and the
 * ranks of its host that can use it.
 */
static int routes_choose(struct hcomm_comm *c, const uint32_t *caps)
{
	int r, i;

	c->links = calloc((size_t)c->size * HCOMM_XP_MAX, sizeof(*c->links));
	c->routes = calloc(c->size, sizeof(*c->routes));
	c->lost = calloc(c->size, 1);
	if (!c->links || !c->routes || !c->lost)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "hcomm_comm_init");
	for (r = 0; r < c->size; r++) {
		struct hcomm_link *l = &c->links[(size_t)r * HCOMM_XP_MAX];

		for_each_xo(c, i)
			l[i].usable = i != HCOMM_XP_KERNEL || r == c->rank ||
				      (hcomm__boot_same_host(c->boot, r) &&
				       (caps[r] & (1u << HCOMM_XP_KERNEL)));
		hcomm__route_choose(l, c->forced, &c->routes[r]);
		if (!c->routes[r].n)
			return hcomm__fail(HCOMM_ERR_NOTSUP, 0, "no transport "
					   "reaches rank %d: %s", r,
					   c->routes[r].why);
	}
	return 0;
}

/* Set up the transports of use[], in id order; undo them on failure. */
static int xports_init(struct hcomm_comm *c, const int *use)
{
	int ret = 0, i, n;

	for (i = 0; i < HCOMM_XP_MAX; i++)
		if (use[i])
			c->xp_use |= 1u << i;
	for (i = 0; i < HCOMM_XP_MAX && !ret; i++) {
		if (!use[i])
			continue;
		ret = xport_by_id[i]->init(c);
		if (!ret) {
			c->xo[i] = xport_by_id[i];
			c->nxo++;
		}
	}
	if (ret) {
		for_each_xo(c, i)
			c->xo[i]->fini(c);
		memset(c->xo, 0, sizeof(c->xo));
		c->nxo = 0;
		return ret;
	}
	c->sig_xp = c->xo[HCOMM_XP_KERNEL] ? HCOMM_XP_KERNEL :
		    c->xo[HCOMM_XP_RDMA] ? HCOMM_XP_RDMA : HCOMM_XP_TCP;
	n = 0;
	for_each_xo(c, i)
		n += snprintf(c->xname + n, sizeof(c->xname) - n, "%s%s",
			      n ? "+" : "", c->xo[i]->name);
	return 0;
}

static void xports_fini(struct hcomm_comm *c)
{
	int i;

	for_each_xo(c, i)
		c->xo[i]->fini(c);
	memset(c->xo, 0, sizeof(c->xo));
	c->nxo = 0;
}

int hcomm__signal_deliver(struct hcomm_comm *c, int from_xp, uint32_t sig,
			  uint64_t v)
{
	int ret, tries = 0;

	if (c->sig_xp == from_xp || !c->xo[c->sig_xp])
		return 0;
	while ((ret = c->xo[c->sig_xp]->signal_add(c, sig, v)) &&
	       ++tries < 100)
		sched_yield();
	if (ret)	/* the signal is lost: say so, nobody else will */
		fprintf(stderr, "hcomm: rank %d: signal %u += %llu from %s "
			"lost: %s\n", c->rank, sig, (unsigned long long)v,
			hcomm__xp_name(from_xp), hcomm_errmsg());
	return 1;
}

/* ------------------------------------------------------------------ */
/* probing                                                            */
/* ------------------------------------------------------------------ */

/*
 * Probing measures every network transport towards every rank of another
 * host: ranks meet in pairs (a round-robin schedule, one partner per
 * round, everyone in step), and in each pair the lower rank pings: 8-byte
 * put_signal round trips for the latency, then bw_bytes of puts of
 * bw_size and a put_signal answered by the partner for the bandwidth.
 * The two highest signals carry the pings (their values afterwards are
 * not 0).  The pinger's figures go to every rank (an allgather), and
 * every rank chooses its routes from them (hcomm__route_choose()).
 */
struct probe_row {
	double lat_us;
	double bw_mbps;
	int32_t probed;
	int32_t errors;
};

/*
 * Partner of rank x in round r (0 .. n - 2) of n ranks (n even), the
 * circle method: x < n - 1 pairs with (2r - x) mod (n - 1), and the rank
 * that would pair with itself (x = r) pairs with n - 1.
 */
static int probe_partner(int x, int r, int n)
{
	int m = n - 1, p;

	if (x == m)
		return r;
	p = (int)(((2L * r - x) % m + m) % m);
	return p == x ? m : p;
}

/* Route every size of peer over xp alone (probing). */
static void route_force(struct hcomm_route *rt, int xp)
{
	memset(rt, 0, sizeof(*rt));
	rt->n = 1;
	rt->upto[0] = UINT64_MAX;
	rt->xp[0] = xp;
}

/*
 * One pair, one transport.  *a and *b: the values of this rank's two
 * probe signals before the partner's first increment (read before the
 * round's barrier, so no ping can have come yet); on success they move
 * past what the partner sent.
 */
static int probe_pair(struct hcomm_comm *c, struct hcomm_win *w, char *buf,
		      int peer, int xp, const struct hcomm_probe_budget *b,
		      uint64_t *a, uint64_t *bb, struct probe_row *out)
{
	uint32_t sa = hcomm_signal_count(c) - 1, sb = sa - 1;
	uint64_t a0 = *a, b0 = *bb;
	int ping = c->rank < peer, ret = 0, tmo = (int)c->cfg.timeout_ms;
	double *rtt = calloc(b->rtts ? b->rtts : 1, sizeof(*rtt));
	struct hcomm_route save = c->routes[peer];
	unsigned int i, n = (unsigned int)(b->bw_bytes / b->bw_size);
	uint64_t t0;

	if (!rtt)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "probe");
	route_force(&c->routes[peer], xp);
	for (i = 0; i < b->rtts && !ret; i++) {
		t0 = hcomm__now_ns();
		if (ping) {
			ret = hcomm_put_signal(w, peer, 0, buf, 8, sa, 1);
			if (!ret && hcomm_signal_wait(c, sb, b0 + i + 1,
						      tmo) < 0)
				ret = -hcomm_errno();
		} else {
			if (hcomm_signal_wait(c, sa, a0 + i + 1, tmo) < 0)
				ret = -hcomm_errno();
			if (!ret)
				ret = hcomm_put_signal(w, peer, 0, buf, 8, sb,
						       1);
		}
		rtt[i] = (hcomm__now_ns() - t0) / 1000.0;
	}
	if (!ret && ping) {
		struct hcomm_xfer_desc *d = calloc(n ? n : 1, sizeof(*d));

		if (!d) {
			free(rtt);
			c->routes[peer] = save;
			return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "probe");
		}
		for (i = 0; i < n; i++)
			d[i] = (struct hcomm_xfer_desc){ .op = HCOMM_OP_PUT,
				.target = peer, .local = (uintptr_t)buf,
				.len = b->bw_size };
		t0 = hcomm__now_ns();
		/* all in flight at once: a bandwidth, not n latencies */
		ret = n ? hcomm_batch(w, d, n, NULL) : 0;
		free(d);
		if (!ret)
			ret = hcomm_put_signal(w, peer, 0, buf, 8, sa, 1);
		if (!ret && hcomm_signal_wait(c, sb, b0 + b->rtts + 1,
					      tmo) < 0)
			ret = -hcomm_errno();
		if (!ret) {
			out->lat_us = hcomm__median(rtt, b->rtts) / 2;
			out->bw_mbps = (double)n * b->bw_size /
				       ((hcomm__now_ns() - t0) / 1000.0);
			out->probed = 1;
		}
	} else if (!ret) {
		if (hcomm_signal_wait(c, sa, a0 + b->rtts + 1, tmo) < 0)
			ret = -hcomm_errno();
		if (!ret)
			ret = hcomm_put_signal(w, peer, 0, buf, 8, sb, 1);
	}
	if (ret)
		out->errors++;
	else if (ping)
		*bb += b->rtts + 1;
	else
		*a += b->rtts + 1;
	c->routes[peer] = save;
	free(rtt);
	return ret;
}

/* The peers file's writer leaves the routes alone while v is 1. */
static void probing_set(struct hcomm_comm *c, int v)
{
	pthread_mutex_lock(&c->peers_lock);
	c->probing = v;
	pthread_mutex_unlock(&c->peers_lock);
}

/* Collective: measure, share, choose.  A failed probe leaves the link
 * unprobed with its error counted (so it is used only as a last resort). */
static int comm_probe(struct hcomm_comm *c, const struct hcomm_probe_budget *b)
{
	size_t nrow = (size_t)c->size * HCOMM_XP_MAX;
	struct probe_row *mine = NULL, *all = NULL;
	int n = c->size + (c->size & 1), r, x, peer, ret, want = 0;
	struct hcomm_win *w = NULL;
	uint32_t sa;
	char *buf = NULL;

	if (b->mode == HCOMM_PROBE_OFF || c->forced >= 0 || c->size > 64 ||
	    (!c->xo[HCOMM_XP_RDMA] || !c->xo[HCOMM_XP_TCP]))
		return 0;	/* nothing to compare */
	probing_set(c, 1);
	for (r = 0; r < c->size; r++)
		if (!hcomm__boot_same_host(c->boot, r))
			want = 1;
	mine = calloc(nrow, sizeof(*mine));
	all = calloc(nrow * c->size, sizeof(*all));
	buf = calloc(1, b->bw_size);
	if (!mine || !all || !buf) {
		ret = hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "probe");
		goto out;
	}
	ret = hcomm_win_create(c, buf, b->bw_size, &w);
	sa = hcomm_signal_count(c) - 1;
	for (r = 0; !ret && r < n - 1; r++) {
		uint64_t a = hcomm_signal_read(c, sa);
		uint64_t bb = hcomm_signal_read(c, sa - 1);

		ret = hcomm__boot_barrier(c->boot);
		peer = probe_partner(c->rank, r, n);
		if (ret || !want || peer >= c->size ||
		    hcomm__boot_same_host(c->boot, peer))
			continue;
		for (x = 0; x < HCOMM_XP_MAX; x++)
			if (x != HCOMM_XP_KERNEL && c->xo[x] &&
			    probe_pair(c, w, buf, peer, x, b, &a, &bb,
				       &mine[(size_t)peer * HCOMM_XP_MAX + x]))
				break;	/* the counts are lost for this round */
	}
	if (!ret)
		ret = hcomm__boot_barrier(c->boot);
	if (w) {
		int r2 = hcomm_win_free(w);

		ret = ret ? ret : r2;
	}
	if (!ret)
		ret = hcomm__boot_allgather(c->boot, mine, all,
					    nrow * sizeof(*mine));
	if (ret)
		goto out;
	pthread_mutex_lock(&c->peers_lock);
	for (peer = 0; peer < c->size; peer++) {
		struct hcomm_link *l = &c->links[(size_t)peer * HCOMM_XP_MAX];
		/* the pinger measured: the lower rank of the pair */
		int lo = peer < c->rank ? peer : c->rank;
		int hi = peer < c->rank ? c->rank : peer;
		const struct probe_row *row =
			&all[(size_t)lo * nrow + (size_t)hi * HCOMM_XP_MAX];

		if (peer == c->rank)
			continue;
		for (x = 0; x < HCOMM_XP_MAX; x++) {
			if (!l[x].usable || x == HCOMM_XP_KERNEL)
				continue;
			l[x].probed = row[x].probed;
			l[x].lat_us = row[x].lat_us;
			l[x].bw_mbps = row[x].bw_mbps;
			l[x].errors = (uint64_t)row[x].errors;
		}
		hcomm__route_choose(l, c->forced, &c->routes[peer]);
	}
	pthread_mutex_unlock(&c->peers_lock);
out:
	probing_set(c, 0);
	free(mine);
	free(all);
	free(buf);
	return ret;
}

/* HCOMM_LOG=info (or debug): the decision table on stderr at init. */
static void routes_log(struct hcomm_comm *c)
{
	const char *log = getenv("HCOMM_LOG");
	int r;

	if (!log || (strcmp(log, "info") && strcmp(log, "debug")))
		return;
	for (r = 0; r < c->size; r++)
		if (r != c->rank)
			hcomm__route_print(stderr, c->rank, r,
					   &c->links[(size_t)r * HCOMM_XP_MAX],
					   &c->routes[r]);
}

HCOMM_EXPORT int hcomm_comm_probe(struct hcomm_comm *c)
{
	struct hcomm_probe_budget b;
	int forced, ret;

	if (!c)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_comm_probe");
	ret = hcomm__probe_env(&b, &forced);
	if (ret)
		return ret;
	if (b.mode == HCOMM_PROBE_OFF)
		b = (struct hcomm_probe_budget){ HCOMM_PROBE_QUICK, 64,
						 256 << 10, 2 << 20 };
	ret = comm_probe(c, &b);
	if (!ret) {
		routes_log(c);
		peers_refresh(c);
	}
	return ret;
}

HCOMM_EXPORT int hcomm_comm_print_peers(struct hcomm_comm *c, FILE *f,
					int json)
{
	int r;

	if (!c || !f)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_comm_print_peers");
	pthread_mutex_lock(&c->peers_lock);
	if (json) {
		table_json(c, f);
		fputc('\n', f);
	}
	for (r = 0; !json && r < c->size; r++)
		if (r != c->rank)
			hcomm__route_print(f, c->rank, r,
					   &c->links[(size_t)r * HCOMM_XP_MAX],
					   &c->routes[r]);
	pthread_mutex_unlock(&c->peers_lock);
	return ferror(f) ? hcomm__fail(HCOMM_ERR_IO, EIO, "print peers") : 0;
}

/*
 * The failover window (collective): rdma's failover tells the peer over
 * tcp what it applied of the peer's work requests by a put into it
 * (Documentation/failover.rst).  Every rank uses rdma and tcp alike.
 */
static int fo_win_create(struct hcomm_comm *c)
{
	size_t len = (size_t)c->size * HCOMM_FO_SLOT;
	struct hcomm_win *w;
	int ret;

	if (!c->xo[HCOMM_XP_RDMA] || !c->xo[HCOMM_XP_TCP])
		return 0;
	c->fo_mem = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	if (c->fo_mem)
		memset(c->fo_mem, 0, len);
	/* a NULL base for len bytes fails every rank's collective alike */
	ret = hcomm_win_create(c, c->fo_mem, c->fo_mem ? len : 1, &w);
	if (ret)
		return ret;
	__atomic_store_n(&c->fo_win, w, __ATOMIC_RELEASE);
	return 0;
}

static void comm_free(struct hcomm_comm *c)
{
	free(c->links);
	free(c->routes);
	free(c->lost);
	pthread_cond_destroy(&c->lq_cond);
	pthread_mutex_destroy(&c->lq_lock);
	pthread_cond_destroy(&c->peers_cond);
	pthread_mutex_destroy(&c->peers_lock);
	pthread_mutex_destroy(&c->lock);
	hcomm__events_fini(c);
	free(c->fo_mem);
	free(c->ring);
	free(c);
}

HCOMM_EXPORT int hcomm_comm_init(struct hcomm_comm **out,
				 const struct hcomm_config *cfg)
{
	struct hcomm_probe_budget budget;
	int use[HCOMM_XP_MAX];
	pthread_condattr_t ca;
	struct hcomm_comm *c;
	int32_t *st = NULL, mine;
	uint32_t *caps = NULL, mycaps = 0;
	int64_t coll_ms;
	int ret, local, i;

	if (!out)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_comm_init");
	*out = NULL;
	/* on a cache-line boundary: its hot members have lines of their own */
	c = aligned_alloc(64, (sizeof(*c) + 63) & ~(size_t)63);
	if (!c)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "hcomm_comm_init");
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->lq_lock, NULL);
	pthread_cond_init(&c->lq_cond, NULL);
	pthread_mutex_init(&c->peers_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->peers_cond, &ca);
	pthread_condattr_destroy(&ca);
	hcomm__events_init(c);
	if (cfg) {
		c->cfg = *cfg;
	} else {
		hcomm_config_default(&c->cfg);
		ret = hcomm_config_from_env(&c->cfg);
		if (ret)
			goto err;
	}
	ret = check_cfg(&c->cfg);
	if (ret)
		goto err;
	c->spin_ns = -1;
	ret = hcomm__us_from_env("HCOMM_SPIN_US", &c->spin_ns);
	if (ret)
		goto err;
	c->cb_spin_ns = -1;
	ret = hcomm__us_from_env("HCOMM_CB_SPIN_US", &c->cb_spin_ns);
	if (ret)
		goto err;
	coll_ms = c->cfg.timeout_ms;
	if (!cfg) {
		ret = hcomm__coll_timeout_from_env(&coll_ms);
		if (ret)
			goto err;
	}
	ret = hcomm__rankinfo_detect(&c->cfg, &c->ri);
	if (ret)
		goto err;
	c->cfg.rank_table = NULL;	/* the caller's string: not kept */
	c->rank = c->ri.rank;
	c->size = c->ri.size;
	ret = hcomm__probe_env(&budget, &c->forced);
	if (ret)
		goto err;
	st = calloc(c->size, sizeof(*st));
	caps = calloc(c->size, sizeof(*caps));
	if (!st || !caps) {
		ret = hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "hcomm_comm_init");
		goto err;
	}
	ret = hcomm__boot_init(&c->ri, c->cfg.timeout_ms, &c->boot);
	if (ret)
		goto err;
	(void)hcomm__boot_set_timeout(c->boot, coll_ms);	/* in range */
	/* What every rank can use, then the same plan everywhere. */
	for (i = 0; i < HCOMM_XP_MAX; i++)
		if (xport_by_id[i]->probe(&c->ri))
			mycaps |= 1u << i;
	ret = hcomm__boot_allgather(c->boot, &mycaps, caps, sizeof(*caps));
	if (ret)
		goto err_boot;
	local = xports_plan(c, caps, use);
	/* Every rank learns whether every other one got its transports up. */
	if (!local)
		local = xports_init(c, use);
	if (!local) {
		local = routes_choose(c, caps);
		if (!local)
			local = stats_publish(c);
		if (local)
			xports_fini(c);
	}
	mine = -local;
	ret = hcomm__boot_allgather(c->boot, &mine, st, sizeof(*st));
	if (!ret)
		ret = collective_err(c, st, sizeof(*st), 0, local,
				     "hcomm_comm_init");
	if (local)
		ret = local;
	if (ret) {
		if (!local) {
			stats_unpublish(c);
			xports_fini(c);
		}
		goto err_boot;
	}
	free(st);
	free(caps);
	ret = fo_win_create(c);
	if (!ret)
		ret = comm_probe(c, &budget);
	if (ret) {
		/* every rank failed it alike: the channel is out of step */
		hcomm_comm_destroy(c);
		return ret;
	}
	routes_log(c);
	peers_refresh(c);
	/* from here on the rdma keep-alive gives verdicts (failover ready) */
	__atomic_store_n(&c->ready, 1, __ATOMIC_RELEASE);
	*out = c;
	return 0;
err_boot:
	hcomm__boot_fini(c->boot);
err:
	free(st);
	free(caps);
	comm_free(c);
	return ret;
}

HCOMM_EXPORT int hcomm_comm_destroy(struct hcomm_comm *c)
{
	struct hcomm_win *w, *next;
	int ret, r;

	if (!c)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_comm_destroy");
	if (hcomm__in_event_cb(c))
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_comm_destroy: "
				   "called from the communicator's event "
				   "callback");
	if (t_cb_depth || hcomm__coll_here(c))
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_comm_destroy: "
				   "called from a callback or from inside one "
				   "of its collectives (the library still uses "
				   "the communicator there)");
	ret = hcomm_flush(c);
	/* No failover from here on: a link that fails now fails. */
	if (c->xo[HCOMM_XP_RDMA])
		hcomm__rdma_fo_stop(c);
	/* The peers' connections close from here on: that is no event. */
	hcomm__events_stop(c);
	pthread_mutex_lock(&c->lock);
	threads_stop(c);
	pthread_mutex_unlock(&c->lock);
	r = hcomm__boot_barrier(c->boot);
	ret = ret ? ret : r;
	for (w = c->wins; w; w = next) {
		next = w->next;
		r = win_free_all(c, w);
		ret = ret ? ret : r;
		free(w->peers);
		free(w);
	}
	c->wins = NULL;
	hcomm__coll_free(c);
	stats_unpublish(c);
	xports_fini(c);
	hcomm__boot_fini(c->boot);
	comm_free(c);
	return ret;
}

HCOMM_EXPORT int hcomm_comm_rank(const struct hcomm_comm *c)
{
	return c ? c->rank : -HCOMM_ERR_INVAL;
}

HCOMM_EXPORT int hcomm_comm_size(const struct hcomm_comm *c)
{
	return c ? c->size : -HCOMM_ERR_INVAL;
}

HCOMM_EXPORT enum hcomm_launcher hcomm_comm_launcher(const struct hcomm_comm *c)
{
	return c ? c->ri.launcher : (enum hcomm_launcher)0;
}

HCOMM_EXPORT struct hcomm_ctx *hcomm_comm_ctx(struct hcomm_comm *c)
{
	return c ? c->ctx : NULL;
}

HCOMM_EXPORT const char *hcomm_comm_transport(const struct hcomm_comm *c)
{
	return c && c->nxo ? c->xname : "none";
}

HCOMM_EXPORT int hcomm_comm_set_coll_timeout(struct hcomm_comm *c,
					    int timeout_ms)
{
	if (!c)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_comm_set_coll_timeout");
	return hcomm__boot_set_timeout(c->boot, timeout_ms);
}

HCOMM_EXPORT int hcomm_boot_barrier(struct hcomm_comm *c)
{
	if (!c)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_boot_barrier");
	return hcomm__boot_barrier(c->boot);
}

HCOMM_EXPORT int hcomm_boot_allgather(struct hcomm_comm *c, const void *send,
				      void *recv, size_t len)
{
	if (!c || (len && (!send || !recv)))
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_boot_allgather");
	return hcomm__boot_allgather(c->boot, send, recv, len);
}
