/* SPDX-License-Identifier: MIT */
/*
 * The dynamic phase: worker threads with work-stealing deques.
 *
 * Each worker owns a Chase-Lev deque (deque.h) and an inbox (a lock-free
 * MPSC queue) through which other threads hand it tiles: the transport's
 * completion thread, and workers that make a tile of another device ready.
 * A worker drains its inbox into its deque, runs tiles from the bottom of
 * its deque, and when that is empty steals from the top of others', its own
 * device's workers first, then random victims.  Idle workers park on an
 * event count; producers pay one fence and one load when nobody sleeps.
 *
 * Transfer tiles are not executed by a worker: the descriptors of every
 * transfer tile a worker takes (or makes ready itself) go into the worker's
 * current round, and the round goes to the transport as one batch (one
 * hcomm_batch: one io_uring_submit) before the worker runs anything else
 * or looks for work elsewhere.  Each descriptor completes through the
 * transport's callback; the last one of a tile releases its consumers.  A
 * tile with a failed descriptor is issued again (max_retries times).
 *
 * A round holds its descriptors' requests, which belong to the transport
 * until each one's done reads 1 - after its callback returned (libhcomm's
 * rule) - so no callback frees its round: the last one hands the round
 * back to the worker that filled it (an MPSC queue), and that worker frees
 * it (or keeps one for its next round) once every request reads done,
 * when it next starts a round; pypto_run() frees the rest at its end.
 *
 * The transfer cap (prefetch_depth, double_buffering): a device has
 * (double_buffering ? prefetch_depth + 1 : 1) slots, the count of buffer
 * sets the GEMM builder gives it, and a transfer tile goes out only
 * holding one (from issue to its completion, re-issues included); ready
 * transfer tiles beyond that wait in the device's FIFO queue and the
 * completions hand their slots on.  Only completions free slots, and a
 * completion waits for nothing else, so the cap cannot deadlock a graph.
 *
 * Allreduce tiles are not executed by a worker either: the thread that
 * makes one ready (a worker, or libhcomm's thread that completed its last
 * input) issues it with hcomm_allreduce_nb(), which only queues it, and
 * its request's callback, on libhcomm's collective thread, completes it.
 * Collectives must be issued in the same order on every rank, so they go
 * out in the order of their ids (struct pypto_coll's seq): a tile that is
 * ready before the one ahead of it was issued waits (marked ready) and
 * is issued by the thread that issues the one ahead.  Validation has
 * refused graphs in which that could wait for ever.  Without libhcomm an
 * allreduce is over one rank: the copy is made when it is issued, and a
 * worker completes it.
 *
 * No lock is taken on any of these paths, except the device's queue of
 * transfer tiles waiting for a slot: a mutex, taken only while tiles wait
 * or when a slot is not free; and the allreduce issue lock, taken when an
 * allreduce tile becomes ready.  Lock order: ar_lock, then libhcomm's
 * (hcomm_allreduce_nb); libhcomm runs the callbacks under none of its
 * locks, so a callback may take ar_lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#include "deque.h"
#include "pypto_int.h"

/* ---- event count for parking workers --------------------------------- */

/*
 * Waiter: waiters++ (seq_cst RMW), read epoch, look for work once more,
 * sleep while epoch is unchanged.  Producer: publish work, seq_cst fence,
 * read waiters; if anyone waits, bump epoch and wake.  In the total order
 * of the seq_cst operations either the waiter's second look sees the work
 * or the producer sees the waiter (Dekker).
 */
struct evcount {
	_Atomic uint32_t epoch;
	char pad1[PYPTO_CACHELINE - sizeof(uint32_t)];
	_Atomic uint32_t waiters;
	char pad2[PYPTO_CACHELINE - sizeof(uint32_t)];
};

static uint32_t ec_prepare(struct evcount *ec)
{
	atomic_fetch_add_explicit(&ec->waiters, 1, memory_order_seq_cst);
	return atomic_load_explicit(&ec->epoch, memory_order_seq_cst);
}

static void ec_cancel(struct evcount *ec)
{
	atomic_fetch_sub_explicit(&ec->waiters, 1, memory_order_relaxed);
}

static void ec_wait(struct evcount *ec, uint32_t key)
{
	if (atomic_load_explicit(&ec->epoch, memory_order_acquire) == key)
		syscall(SYS_futex, &ec->epoch, FUTEX_WAIT_PRIVATE, key, NULL,
			NULL, 0);
	atomic_fetch_sub_explicit(&ec->waiters, 1, memory_order_relaxed);
}

static void ec_notify(struct evcount *ec, int nr)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load_explicit(&ec->waiters, memory_order_relaxed))
		return;
	atomic_fetch_add_explicit(&ec->epoch, 1, memory_order_seq_cst);
	syscall(SYS_futex, &ec->epoch, FUTEX_WAKE_PRIVATE, nr, NULL, NULL, 0);
}

/* ---- run state --------------------------------------------------------- */

struct sched;

/*
 * One batch of descriptors.  The callback of its last one to complete
 * pushes it to its owner's retired queue; the owner frees it once every
 * request reads done (the transport no longer touches them).
 */
struct round {
	_Atomic uint32_t left;
	uint32_t n, cap;
	uint32_t checked;		/* requests seen done (owner) */
	struct sched *s;
	struct worker *owner;		/* the worker that filled it */
	struct hcomm_mpsc_node node;	/* in owner->retired */
	struct round *next;		/* in owner->pend */
	struct pypto_tile **tile;	/* per descriptor */
	struct hcomm_xfer_desc *d;
	struct hcomm_request *hr;
};

struct worker {
	struct pypto_deque dq;
	struct hcomm_mpsc inbox;
	struct sched *s;
	uint32_t id;
	int32_t device;
	atomic_bool idle;		/* parked or about to park */
	/*
	 * The tile this worker runs next, made ready by the one it just ran
	 * (this worker only): no deque round trip and no wake-up for a
	 * successor it takes itself.
	 */
	struct pypto_tile *next;
	/*
	 * Profile off: the tiles this worker runs back to back, all of one
	 * kind (burst_kind, 0: none), are timed as one stretch from
	 * burst_t0; burst_close() adds it up.
	 */
	uint64_t burst_t0;
	int burst_kind;
	struct pypto_evbuf *eb;
	struct round *round;		/* being filled */
	struct round *pend;		/* retired, some request not done yet */
	struct round *spare;		/* retired and done: the next round */
	uint64_t rng;
	/* Counters (this worker only). */
	uint64_t steals, steal_attempts, parks, rounds, descs;
	uint64_t compute_ns, host_ns, busy_ns;
	uint64_t n_compute, n_host, n_transfer;
	uint32_t ndone;			/* tiles done by this worker */
	/* Rounds whose last callback returned (pushed by any thread). */
	struct hcomm_mpsc retired;
} __attribute__((aligned(PYPTO_CACHELINE)));

/*
 * One allreduce tile in a run, s->ar[its seq].  state: AR_WAITING until
 * its inputs are done, AR_READY (changed under ar_lock) until it is
 * issued, AR_ISSUED (under ar_lock) from then on.  The issuer owns req
 * until it hands it to libhcomm (on_hcomm), and libhcomm owns it until
 * its done reads 1 (after ar_cb returned).
 */
enum { AR_WAITING, AR_READY, AR_ISSUED };

struct ar_op {
	struct hcomm_request req;
	struct sched *s;
	struct pypto_tile *t;
	uint64_t t_issue_ns;
	uint16_t issue_worker;		/* or PYPTO_NO_WORKER */
	_Atomic uint8_t state;		/* AR_* */
	bool on_hcomm;			/* req was issued (cleared by
					 * pypto_run once done reads 1) */
};

/* A device's transfer slots and its queue of tiles waiting for one. */
struct devq {
	_Atomic uint32_t used;		/* slots held */
	char pad1[PYPTO_CACHELINE - sizeof(uint32_t)];
	_Atomic uint32_t nwait;		/* tiles queued (changed under lock) */
	pthread_mutex_t lock;		/* the queue */
	struct pypto_tile *head, *tail;
} __attribute__((aligned(PYPTO_CACHELINE)));

struct sched {
	struct pypto_graph *g;
	struct pypto_run *r;
	struct pypto_xport *x;
	const struct pypto_config *cfg;
	struct worker *w;
	uint32_t nw, ndev;
	_Atomic uint32_t *dev_rr;	/* round-robin cursor per device */
	struct devq *dq;		/* transfer slots per device */
	uint32_t ndq;			/* initialised */
	uint32_t cap;			/* slots per device */
	struct evcount ec;
	uint64_t spin_ns;		/* idle_spin()'s budget (0: none) */
	/*
	 * Tiles done: by workers in their own counters (w->ndone), by other
	 * threads (transport and collective callbacks) here.  The run is
	 * over when every sink (tile without consumers) is done: each tile
	 * is a sink or has a path to one, so the sinks finish last; one
	 * shared counter per sink instead of per tile.
	 */
	_Atomic uint32_t ndone_ext;
	_Atomic uint32_t sinks_done;
	atomic_bool finished;		/* all tiles done, or aborted */
	_Atomic int status;		/* first failure */
	char errmsg[256];		/* its message (set by the winner) */
	_Atomic uint64_t inflight;	/* descriptors whose callback did not
					 * finish touching the run */
	_Atomic uint64_t xfer_ns, xfer_bytes, retries, failures, waits;
	_Atomic uint64_t delayed;	/* delayed transfer tiles completed */
	/* Allreduce tiles, by seq (issue order); ar_next is the next to
	 * issue (ar_lock). */
	struct ar_op *ar;
	uint32_t nar;
	uint32_t ar_next;
	bool ar_lock_init;
	pthread_mutex_t ar_lock;
	_Atomic uint64_t ar_done, ar_ns, ar_bytes;
	/* Link events: the listener, and lost ranks.
	 * comm is also the allreduces' communicator (NULL: one rank). */
	struct hcomm_comm *comm;
	int listen_id;
	atomic_bool peer_lost;		/* some rank the run uses was lost */
	char lost_why[160];		/* r->lev_lock; fixed once peer_lost */
	int lost_first;			/* the rank lost_why is about */
	/*
	 * Ranks (a run over libhcomm with transfer tiles): a bit per rank of
	 * the communicator.  uses: the ranks the run's transfers may reach
	 * (the tiles' ranks and their mirrors), written before the workers
	 * start, read-only after.  lost: set once per rank (note_lost, under
	 * r->lev_lock), read anywhere.
	 */
	uint64_t *uses;
	_Atomic uint64_t *lost;
	uint32_t nranks;
	_Atomic uint32_t nlost;
	_Atomic uint64_t replaced;	/* tiles re-placed on a mirror */
};

static __thread struct worker *cur_worker;

/* ---- ranks: where a transfer goes, lost ranks, mirrors ------------------ */

static bool bit_test(const uint64_t *set, uint32_t n, int rank)
{
	return set && rank >= 0 && (uint32_t)rank < n &&
	       (set[rank / 64] >> (rank % 64)) & 1;
}

/* rank is in lost (n ranks; NULL: none is); lost may change meanwhile. */
static bool lost_test(const _Atomic uint64_t *lost, uint32_t n, int rank)
{
	return lost && rank >= 0 && (uint32_t)rank < n &&
	       (atomic_load_explicit(&lost[rank / 64],
				     memory_order_acquire) >> (rank % 64)) & 1;
}

static bool rank_lost(const struct sched *s, int rank)
{
	return lost_test(s->lost, s->nranks, rank);
}

/* Why rank was lost, for a message (lost_why is fixed once set). */
static const char *lost_why(const struct sched *s, int rank)
{
	return rank == s->lost_first ? s->lost_why :
	       "libhcomm reports it lost";
}

/* The rank a transfer tile names (its own, or x's target). */
static int tile_rank_of(const struct pypto_xport *x,
			const struct pypto_tile *t)
{
	return t->rank == PYPTO_RANK_TARGET ? x->target : t->rank;
}

static int tile_rank(const struct sched *s, const struct pypto_tile *t)
{
	return tile_rank_of(s->x, t);
}

/*
 * Where a transfer to rank goes with the ranks of lost (n ranks) gone:
 * rank while it lives, else the first live rank along its chain of x's
 * mirrors; -1 if there is none (a chain of lost ranks, or a cycle).
 */
static int live_rank_of(const struct pypto_xport *x,
			const _Atomic uint64_t *lost, uint32_t n, int rank)
{
	unsigned int hops;

	for (hops = 0; hops <= PYPTO_MIRRORS_MAX && rank >= 0; hops++) {
		if (!lost_test(lost, n, rank))
			return rank;
		rank = pypto__xport_mirror(x, rank);
	}
	return -1;
}

static int live_rank(const struct sched *s, int rank)
{
	return live_rank_of(s->x, s->lost, s->nranks, rank);
}

/*
 * Transfer tile t names rank, which was lost, and no live rank holds its
 * data: the run fails, naming both.
 */
static void fail_stranded(struct sched *s, const struct pypto_tile *t,
			  int rank);

/*
 * How long an idle worker polls before it parks: PYPTO_SPIN_US (0 ..
 * 1000000), else 50 us - none when the run has more workers than this
 * thread may use CPUs (polling would take a CPU from a working thread).
 */
static int idle_spin_ns(uint32_t workers, uint64_t *out)
{
	const char *e = getenv("PYPTO_SPIN_US");
	cpu_set_t set;
	char *end;
	unsigned long v;

	if (e) {
		errno = 0;
		v = strtoul(e, &end, 10);
		if (errno || !*e || *end || *e == '-' || v > 1000000)
			return pypto__fail(PYPTO_ERR_INVAL,
					   "PYPTO_SPIN_US=\"%s\": microseconds, 0 .. 1000000",
					   e);
		*out = (uint64_t)v * 1000;
		return 0;
	}
	*out = 0;
	if (sched_getaffinity(0, sizeof(set), &set) ||
	    (uint32_t)CPU_COUNT(&set) < workers)
		return 0;
	*out = 50000;
	return 0;
}

/*
 * Record the run's first failure; err comes from pypto__fail() in this
 * thread, whose message is thread-local: keep a copy for pypto_run()'s
 * caller.
 */
static void sched_fail(struct sched *s, int err)
{
	int zero = 0;

	if (atomic_compare_exchange_strong(&s->status, &zero, err))
		snprintf(s->errmsg, sizeof(s->errmsg), "%s", pypto_errmsg());
	atomic_store_explicit(&s->finished, true, memory_order_release);
	ec_notify(&s->ec, INT_MAX);
}

static uint64_t xorshift(uint64_t *st)
{
	uint64_t v = *st;

	v ^= v << 13;
	v ^= v >> 7;
	v ^= v << 17;
	*st = v;
	return v;
}

static inline uint32_t tile_id(struct sched *s, struct pypto_tile *t)
{
	return (uint32_t)(t - s->g->tiles);
}

/* Workers of device dev: w[dev], w[dev + ndev], w[dev + 2 * ndev], ... */
static inline uint32_t dev_nworkers(const struct sched *s, int32_t dev)
{
	return (s->nw - (uint32_t)dev + s->ndev - 1) / s->ndev;
}

/* A worker of the tile's device, preferring one that is idle. */
static struct worker *pick_worker(struct sched *s, int32_t dev)
{
	uint32_t per = dev_nworkers(s, dev);
	uint32_t start = atomic_fetch_add_explicit(&s->dev_rr[dev], 1,
						   memory_order_relaxed);
	uint32_t k;

	for (k = 0; k < per; k++) {
		struct worker *w = &s->w[dev + ((start + k) % per) * s->ndev];

		if (atomic_load_explicit(&w->idle, memory_order_relaxed))
			return w;
	}
	return &s->w[dev + (start % per) * s->ndev];
}

static void xfer_issue(struct worker *w, struct pypto_tile *t);
static void ar_ready(struct sched *s, struct worker *self,
		     struct pypto_tile *t);
static void queue_tile(struct sched *s, struct worker *self,
		       struct pypto_tile *t);

/*
 * t's inputs are all done.  A worker keeps tiles of its own device (in
 * its deque; transfers straight into its round), others go to an inbox of
 * their device; then a sleeping worker may take or steal it.  Allreduce
 * tiles are issued (in their order) by whoever made them ready.
 */
static void make_ready(struct sched *s, struct worker *self,
		       struct pypto_tile *t)
{
	if (t->kind == PYPTO_ALLREDUCE) {
		ar_ready(s, self, t);
		return;
	}
	if (self && t->kind == PYPTO_TRANSFER) {
		xfer_issue(self, t);
		return;
	}
	queue_tile(s, self, t);
}

/* t goes to a worker: self's deque when self serves its device, else an
 * inbox of its device. */
static void queue_tile(struct sched *s, struct worker *self,
		       struct pypto_tile *t)
{
	if (self && t->device == self->device) {
		if (pypto_deque_push(&self->dq, tile_id(s, t))) {
			sched_fail(s, pypto__fail(PYPTO_ERR_NOMEM,
						  "deque of worker %u",
						  self->id));
			return;
		}
		ec_notify(&s->ec, 1);
		return;
	}
	{
		struct worker *w = pick_worker(s, t->device);

		hcomm_mpsc_push(&w->inbox, &t->qnode);
		/*
		 * Wake everyone: only w can take it out of its inbox, and a
		 * single wake-up might go to another sleeper.
		 */
		ec_notify(&s->ec, INT_MAX);
	}
}

/*
 * A tile that releases at least this many consumers deals them out to its
 * device's workers instead of letting them steal one at a time.
 */
#define SPREAD_MIN	16

/* A run of ready tiles for one worker's inbox (tile_done's dealing). */
struct deal {
	struct hcomm_mpsc_node *first, *last;
	uint32_t k;			/* 1 .. per-1: which worker */
};

static void deal_flush(struct sched *s, struct worker *self,
		       struct deal *d, uint32_t per)
{
	struct worker *w;

	if (!d->first)
		return;
	/* Worker k after self among its device's workers. */
	w = &s->w[(uint32_t)self->device +
		  ((self->id / s->ndev + d->k) % per) * s->ndev];
	hcomm_mpsc_push_list(&w->inbox, d->first, d->last);
	d->first = d->last = NULL;
}

/*
 * t is done: release its consumers.  A worker keeps the first compute or
 * host consumer of its own device that t made ready as its next tile
 * (what it would have pushed and taken back at once, LIFO).  When t has
 * many consumers, the other such tiles are dealt out in contiguous shares
 * to the device's workers (their inboxes, one exchange per share) and
 * this worker's own share goes into its deque, with one wake-up at the
 * end; otherwise, and for the rest, make_ready() says where each goes.
 */
static void tile_done(struct sched *s, struct worker *self,
		      struct pypto_tile *t)
{
	uint32_t i, per = 0;
	struct deal d = { NULL, NULL, 0 };
	bool dealt = false;

	if (self && t->nconsumers >= SPREAD_MIN)
		per = dev_nworkers(s, self->device);
	for (i = 0; i < t->nconsumers; i++) {
		struct pypto_tile *c = &s->g->tiles[t->consumers[i]];
		uint32_t k;

		if (atomic_fetch_sub_explicit(&c->input_deps, 1,
					      memory_order_acq_rel) != 1)
			continue;
		/* Ready: nothing decrements it again in this run; the next
		 * run finds it as it began (g->rt_clean). */
		atomic_store_explicit(&c->input_deps, c->ndeps,
				      memory_order_relaxed);
		if (!self || c->device != self->device ||
		    (c->kind != PYPTO_COMPUTE && c->kind != PYPTO_HOST)) {
			make_ready(s, self, c);
			continue;
		}
		if (!self->next) {
			self->next = c;
			continue;
		}
		if (per < 2) {
			make_ready(s, self, c);
			continue;
		}
		k = (uint32_t)((uint64_t)i * per / t->nconsumers);
		if (!k) {
			if (pypto_deque_push(&self->dq, tile_id(s, c)))
				sched_fail(s, pypto__fail(PYPTO_ERR_NOMEM,
							  "deque of worker %u",
							  self->id));
			dealt = true;
			continue;
		}
		if (k != d.k)
			deal_flush(s, self, &d, per);
		d.k = k;
		if (d.last)
			atomic_store_explicit(&d.last->next, &c->qnode,
					      memory_order_relaxed);
		else
			d.first = &c->qnode;
		d.last = &c->qnode;
		dealt = true;
	}
	deal_flush(s, self, &d, per);
	if (dealt)
		ec_notify(&s->ec, INT_MAX);
	if (self)
		self->ndone++;
	else
		atomic_fetch_add_explicit(&s->ndone_ext, 1,
					  memory_order_relaxed);
	if (!t->nconsumers &&
	    atomic_fetch_add_explicit(&s->sinks_done, 1,
				      memory_order_acq_rel) + 1 ==
	    s->g->nsinks) {
		atomic_store_explicit(&s->finished, true, memory_order_release);
		ec_notify(&s->ec, INT_MAX);
	}
}

/* ---- transfers ---------------------------------------------------------- */

/* 1 once the transport is done with every request of rd (owner only). */
static bool round_idle(struct round *rd)
{
	while (rd->checked < rd->n &&
	       __atomic_load_n(&rd->hr[rd->checked].done, __ATOMIC_ACQUIRE))
		rd->checked++;
	return rd->checked == rd->n;
}

/*
 * Take w's retired rounds in; free those whose requests all read done
 * (keeping one as w->spare).  Never waits: a round whose last done store
 * is still to come stays on w->pend for the next call.
 */
static void round_reclaim(struct worker *w)
{
	struct hcomm_mpsc_node *n;
	struct round **pp, *rd;

	while ((n = hcomm_mpsc_pop(&w->retired))) {
		rd = (struct round *)(void *)((char *)n -
					       offsetof(struct round, node));
		rd->next = w->pend;
		w->pend = rd;
	}
	for (pp = &w->pend; (rd = *pp);) {
		if (!round_idle(rd)) {
			pp = &rd->next;
			continue;
		}
		*pp = rd->next;
		if (!w->spare)
			w->spare = rd;
		else
			free(rd);
	}
}

static struct round *round_new(struct worker *w)
{
	struct sched *s = w->s;
	uint32_t cap = s->cfg->batch_max;
	struct round *rd;
	size_t sz = sizeof(*rd) + cap * (sizeof(struct pypto_tile *) +
					 sizeof(struct hcomm_xfer_desc) +
					 sizeof(struct hcomm_request));

	round_reclaim(w);
	rd = w->spare;
	if (rd)
		w->spare = NULL;
	else
		rd = malloc(sz);
	if (!rd)
		return NULL;
	rd->n = 0;
	rd->cap = cap;
	rd->checked = 0;
	rd->s = s;
	rd->owner = w;
	rd->next = NULL;
	/* Requests first: they hold 64-bit fields; descriptors are 48 B. */
	rd->hr = (struct hcomm_request *)(rd + 1);
	rd->d = (struct hcomm_xfer_desc *)(rd->hr + cap);
	rd->tile = (struct pypto_tile **)(rd->d + cap);
	return rd;
}

static void xfer_cb(struct hcomm_request *req, void *arg);

/*
 * Complete descriptor i of rd with status st (the transport failed it),
 * as a transport does: the callback, then done.
 */
static void round_fail_desc(struct round *rd, uint32_t i, int st)
{
	struct hcomm_request *req = &rd->hr[i];

	req->status = st;
	req->bytes = 0;
	xfer_cb(req, rd);
	__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
}

/* Send the worker's round, if any, as one batch. */
static void round_flush(struct worker *w)
{
	struct round *rd = w->round;
	struct sched *s = w->s;
	uint32_t i, n;
	int rc;

	if (!rd || !rd->n)
		return;
	w->round = NULL;
	n = rd->n;
	atomic_store_explicit(&rd->left, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->inflight, n, memory_order_relaxed);
	w->rounds++;
	w->descs += n;
	rc = s->x->ops->submit(s->x, rd->d, n, rd->hr);
	if (rc < 0) {
		/* Nothing went out: every descriptor fails (and may retry). */
		for (i = 0; i < n; i++)
			round_fail_desc(rd, i, -HCOMM_ERR_IO);
	}
}

/* Append the descriptors of transfer tile t (all rows) to w's round. */
static void round_add_tile(struct worker *w, struct pypto_tile *t)
{
	struct sched *s = w->s;
	uint64_t now = pypto__now_ns();
	int rank = tile_rank(s, t);
	uint32_t i, r;

	/* A lost rank's tile goes to its first live mirror. */
	if (atomic_load_explicit(&s->peer_lost, memory_order_acquire)) {
		int to = live_rank(s, rank);

		if (to < 0) {
			fail_stranded(s, t, rank);
			return;
		}
		if (to != rank &&
		    !atomic_exchange_explicit(&t->replaced, 1,
					      memory_order_relaxed))
			atomic_fetch_add_explicit(&s->replaced, 1,
						  memory_order_relaxed);
		rank = to;
	}
	atomic_store_explicit(&t->issued_rank, rank, memory_order_relaxed);
	if (!t->attempt)
		w->n_transfer++;	/* re-issues count in xfer_retries */
	t->t_issue_ns = now;
	t->issue_worker = (uint16_t)w->id;
	atomic_store_explicit(&t->xfer_failed, 0, memory_order_relaxed);
	atomic_store_explicit(&t->xfer_pending, t->ndesc,
			      memory_order_relaxed);
	for (i = 0; i < t->nxf; i++) {
		const struct pypto_xfer *xf = &t->xf[i];

		for (r = 0; r < xf->rows; r++) {
			struct hcomm_xfer_desc *d;
			struct hcomm_request *req;
			struct round *rd = w->round;

			if (rd && rd->n == rd->cap) {
				round_flush(w);
				rd = NULL;
			}
			if (!rd) {
				rd = round_new(w);
				if (!rd) {
					sched_fail(s, pypto__fail(PYPTO_ERR_NOMEM,
								  "transfer round"));
					return;
				}
				w->round = rd;
			}
			d = &rd->d[rd->n];
			req = &rd->hr[rd->n];
			rd->tile[rd->n] = t;
			rd->n++;
			d->op = xf->op == PYPTO_GET ? HCOMM_OP_GET :
						      HCOMM_OP_PUT;
			d->target = rank;
			d->target_off = xf->win_off + r * xf->win_stride;
			d->local = (uint64_t)(uintptr_t)xf->local +
				   r * xf->local_stride;
			d->len = xf->row_bytes;
			d->sig = 0;
			d->reserved = 0;
			d->value = 0;
			memset(req, 0, sizeof(*req));
			req->cb = xfer_cb;
			req->cb_arg = rd;
		}
	}
}

/* ---- the transfer cap ---------------------------------------------------- */

/*
 * A slot of q, if one is free.  seq_cst: a releaser decrements used and
 * then reads nwait, a queuing tile raises nwait and then reads used (here):
 * one of the two sees the other (see slot_release).
 */
static bool slot_try(struct sched *s, struct devq *q)
{
	uint32_t n = atomic_load_explicit(&q->used, memory_order_seq_cst);

	while (n < s->cap)
		if (atomic_compare_exchange_weak_explicit(&q->used, &n, n + 1,
							  memory_order_seq_cst,
							  memory_order_seq_cst))
			return true;
	return false;
}

/* Under q->lock: free slots go to the queue's first tiles, returned as a
 * list (wnext) for slot_dispatch. */
static struct pypto_tile *slot_drain(struct sched *s, struct devq *q)
{
	struct pypto_tile *out = NULL, **tail = &out;

	while (q->head && slot_try(s, q)) {
		struct pypto_tile *t = q->head;

		q->head = t->wnext;
		if (!q->head)
			q->tail = NULL;
		atomic_fetch_sub_explicit(&q->nwait, 1, memory_order_seq_cst);
		t->wnext = NULL;
		t->slot = true;
		*tail = t;
		tail = &t->wnext;
	}
	return out;
}

/* Issue tiles that got a slot: into self's round, or through an inbox of
 * their device (run_tile issues a tile that holds a slot at once). */
static void slot_dispatch(struct sched *s, struct worker *self,
			  struct pypto_tile *list)
{
	while (list) {
		struct pypto_tile *t = list;

		list = t->wnext;
		t->wnext = NULL;
		if (self)
			round_add_tile(self, t);
		else
			make_ready(s, NULL, t);
	}
}

/* Transfer tile t is ready: into w's round if its device has a slot for
 * it (or it holds one: a re-issue), else into the device's queue. */
static void xfer_issue(struct worker *w, struct pypto_tile *t)
{
	struct sched *s = w->s;
	struct devq *q = &s->dq[t->device];
	struct pypto_tile *list;

	if (t->slot ||
	    (!atomic_load_explicit(&q->nwait, memory_order_seq_cst) &&
	     slot_try(s, q))) {
		t->slot = true;
		round_add_tile(w, t);
		return;
	}
	atomic_fetch_add_explicit(&s->waits, 1, memory_order_relaxed);
	pthread_mutex_lock(&q->lock);
	atomic_fetch_add_explicit(&q->nwait, 1, memory_order_seq_cst);
	t->wnext = NULL;
	if (q->tail)
		q->tail->wnext = t;
	else
		q->head = t;
	q->tail = t;
	/* Slots freed since slot_try failed (their releaser saw no waiter). */
	list = slot_drain(s, q);
	pthread_mutex_unlock(&q->lock);
	slot_dispatch(s, w, list);
}

/* t completed for good: its slot goes to the first waiting tile, if any. */
static void slot_release(struct sched *s, struct pypto_tile *t)
{
	struct devq *q = &s->dq[t->device];
	struct pypto_tile *list;

	if (!t->slot)
		return;
	t->slot = false;
	atomic_fetch_sub_explicit(&q->used, 1, memory_order_seq_cst);
	if (!atomic_load_explicit(&q->nwait, memory_order_seq_cst))
		return;
	pthread_mutex_lock(&q->lock);
	list = slot_drain(s, q);
	pthread_mutex_unlock(&q->lock);
	slot_dispatch(s, cur_worker, list);
}

/*
 * A rank the run uses is gone (libhcomm's PEER_LOST event, or its word
 * when a transfer failed first): record it once.  Then the static
 * analysis of what is left: a transfer tile that has not completed and
 * has no live rank to go to (no mirror, or every mirror lost) can never
 * run, nor can anything after it, so the run fails now, naming it.  The
 * others are re-placed as they are issued (round_add_tile) or as their
 * attempt in flight fails (xfer_tile_done).
 */
static void note_lost(struct sched *s, int rank, const char *why)
{
	uint64_t bit = 1ULL << (rank % 64);
	bool fresh = false;
	uint32_t i;

	if (!s->lost || rank < 0 || (uint32_t)rank >= s->nranks ||
	    !bit_test(s->uses, s->nranks, rank))
		return;
	pthread_mutex_lock(&s->r->lev_lock);
	if (!(atomic_load_explicit(&s->lost[rank / 64],
				   memory_order_relaxed) & bit)) {
		fresh = true;
		if (!atomic_load_explicit(&s->peer_lost,
					  memory_order_relaxed)) {
			snprintf(s->lost_why, sizeof(s->lost_why), "%s", why);
			s->lost_first = rank;
		}
		atomic_fetch_or_explicit(&s->lost[rank / 64], bit,
					 memory_order_release);
		atomic_fetch_add_explicit(&s->nlost, 1, memory_order_relaxed);
		atomic_store_explicit(&s->peer_lost, true,
				      memory_order_release);
	}
	pthread_mutex_unlock(&s->r->lev_lock);
	for (i = 0; fresh && i < s->g->n; i++) {
		struct pypto_tile *t = &s->g->tiles[i];

		if (t->kind != PYPTO_TRANSFER ||
		    atomic_load_explicit(&t->xdone, memory_order_acquire) ||
		    live_rank(s, tile_rank(s, t)) >= 0)
			continue;
		fail_stranded(s, t, tile_rank(s, t));
		break;
	}
}

static void fail_stranded(struct sched *s, const struct pypto_tile *t,
			  int rank)
{
	sched_fail(s, pypto__fail(PYPTO_ERR_IO,
				  "transfer tile %s cannot run: rank %d was lost (%s) and no live mirror holds its data (pypto_xport_hcomm_mirror)",
				  t->name, rank, lost_why(s, rank)));
}

/* The last descriptor of transfer tile t completed (any thread). */
static void xfer_tile_done(struct sched *s, struct pypto_tile *t)
{
	uint64_t now = pypto__now_ns();
	bool failed = atomic_load_explicit(&t->xfer_failed,
					   memory_order_acquire);
	int rk = atomic_load_explicit(&t->issued_rank, memory_order_relaxed);

	atomic_fetch_add_explicit(&s->xfer_ns, now - t->t_issue_ns,
				  memory_order_relaxed);
	if (s->cfg->profile) {
		struct pypto_evbuf *eb = pypto__ev_thread_buf(s->r);
		struct pypto_event e = {
			.t0_ns = t->t_issue_ns, .t1_ns = now,
			.bytes = t->bytes, .tile = tile_id(s, t),
			.worker = t->issue_worker,
			.stage = PYPTO_STAGE_TRANSFER,
			.attempt = (uint8_t)(t->attempt > 255 ? 255 : t->attempt),
			.device = t->device,
			.flags = (atomic_load_explicit(&t->delayed,
						       memory_order_relaxed) ?
				  PYPTO_EVF_DELAYED : 0) |
				 (rk != tile_rank(s, t) ?
				  PYPTO_EVF_REPLACED : 0),
		};

		if (eb)
			pypto__ev_record(s->r, eb, &e);
	}
	if (!failed) {
		atomic_store_explicit(&t->xdone, 1, memory_order_release);
		atomic_fetch_add_explicit(&s->xfer_bytes, t->bytes,
					  memory_order_relaxed);
		if (atomic_load_explicit(&t->delayed, memory_order_relaxed))
			atomic_fetch_add_explicit(&s->delayed, 1,
						  memory_order_relaxed);
		/* After the event's end: the slot outlives the interval. */
		slot_release(s, t);
		tile_done(s, cur_worker, t);
		return;
	}
	/*
	 * A lost rank: issuing to it again cannot help.  A live mirror
	 * takes the tile (re-placed, not a retry); without one the run
	 * ends here.
	 */
	if (!rank_lost(s, rk) && s->comm &&
	    hcomm_comm_peer_lost(s->comm, rk) == 1)
		note_lost(s, rk, "libhcomm reports it lost");
	if (rank_lost(s, rk)) {
		if (live_rank(s, tile_rank(s, t)) < 0) {
			sched_fail(s, pypto__fail(PYPTO_ERR_IO,
						  "transfer tile %s failed and is not issued again: rank %d was lost (%s) and no live mirror holds its data",
						  t->name, rk,
						  lost_why(s, rk)));
			return;
		}
		t->attempt++;
		atomic_store_explicit(&t->delayed, 0, memory_order_relaxed);
		make_ready(s, cur_worker, t);
		return;
	}
	if (t->attempt >= s->cfg->max_retries) {
		int st = atomic_load_explicit(&t->last_status,
					      memory_order_relaxed);

		sched_fail(s, pypto__fail(PYPTO_ERR_IO,
					  "transfer tile %s failed %u times, last: %s",
					  t->name, t->attempt + 1,
					  hcomm_strerror(st)));
		return;
	}
	t->attempt++;
	/* it failed: issued again, no longer one a failover delayed */
	atomic_store_explicit(&t->delayed, 0, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->retries, 1, memory_order_relaxed);
	/* Issue it again, in the slot it holds; its consumers keep waiting. */
	make_ready(s, cur_worker, t);
}

static void xfer_cb(struct hcomm_request *req, void *arg)
{
	struct round *rd = arg;
	struct sched *s = rd->s;
	uint32_t i = (uint32_t)(req - rd->hr);
	struct pypto_tile *t = rd->tile[i];
	bool bad = req->status != 0;

	if (!bad && pypto__xport_inject(s->x, &rd->d[i]))
		bad = true;
	if (bad) {
		atomic_fetch_add_explicit(&s->failures, 1,
					  memory_order_relaxed);
		atomic_store_explicit(&t->last_status,
				      req->status ? req->status : -HCOMM_ERR_IO,
				      memory_order_relaxed);
		atomic_store_explicit(&t->xfer_failed, 1,
				      memory_order_release);
	}
	if (atomic_fetch_sub_explicit(&t->xfer_pending, 1,
				      memory_order_acq_rel) == 1 &&
	    !atomic_load_explicit(&s->finished, memory_order_acquire))
		xfer_tile_done(s, t);
	/*
	 * The last callback of the round: back to its owner, who frees it
	 * once every request reads done (the transport stores done after
	 * this returns: req must stay valid until then).
	 */
	if (atomic_fetch_sub_explicit(&rd->left, 1, memory_order_acq_rel) == 1)
		hcomm_mpsc_push(&rd->owner->retired, &rd->node);
	/* Last access to the run: pypto_run() waits for this to reach 0. */
	atomic_fetch_sub_explicit(&s->inflight, 1, memory_order_release);
}

/* ---- allreduce tiles ---------------------------------------------------- */

/* ", lost: rank 2, rank 3" for the ranks libhcomm reports lost, or "". */
static void lost_ranks(struct hcomm_comm *comm, char *buf, size_t len)
{
	int r, n = hcomm_comm_size(comm), me = hcomm_comm_rank(comm);
	size_t pos = 0;

	buf[0] = '\0';
	for (r = 0; r < n && pos + 16 < len; r++)
		if (r != me && hcomm_comm_peer_lost(comm, r) == 1)
			pos += (size_t)snprintf(buf + pos, len - pos,
						"%s rank %d",
						pos ? "," : ", lost:", r);
}

/*
 * op's allreduce completed with status st (any thread: libhcomm's
 * collective thread, or the worker that completes a one-rank allreduce):
 * record it, then release its consumers or fail the run.
 */
static void ar_complete(struct sched *s, struct worker *self,
			struct ar_op *op, int st)
{
	struct pypto_tile *t = op->t;
	uint64_t now = pypto__now_ns();
	char lost[64];

	atomic_fetch_add_explicit(&s->ar_ns, now - op->t_issue_ns,
				  memory_order_relaxed);
	if (s->cfg->profile) {
		struct pypto_evbuf *eb = pypto__ev_thread_buf(s->r);
		struct pypto_event e = {
			.t0_ns = op->t_issue_ns, .t1_ns = now,
			.bytes = t->bytes, .tile = tile_id(s, t),
			.worker = op->issue_worker,
			.stage = PYPTO_STAGE_COLLECTIVE,
			.device = t->device,
		};

		if (eb)
			pypto__ev_record(s->r, eb, &e);
	}
	if (st) {
		lost[0] = '\0';
		if (s->comm)
			lost_ranks(s->comm, lost, sizeof(lost));
		sched_fail(s, pypto__fail(PYPTO_ERR_IO, "allreduce tile %s "
					  "failed: %s%s (libhcomm: %s)",
					  t->name, hcomm_strerror(st), lost,
					  hcomm_errmsg()));
		return;
	}
	atomic_fetch_add_explicit(&s->ar_done, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->ar_bytes, t->bytes,
				  memory_order_relaxed);
	tile_done(s, self, t);
}

/* libhcomm completed op's request: on its collective thread. */
static void ar_cb(struct hcomm_request *req, void *arg)
{
	struct ar_op *op = arg;
	struct sched *s = op->s;

	if (!atomic_load_explicit(&s->finished, memory_order_acquire))
		ar_complete(s, NULL, op, req->status);
	/* Last access to the run: pypto_run() waits for this to reach 0. */
	atomic_fetch_sub_explicit(&s->inflight, 1, memory_order_release);
}

/*
 * Issue op (under ar_lock, so in seq order): to libhcomm, or as an
 * allreduce over one rank (the copy now, then a worker completes it).
 * false when the run failed instead.
 */
static bool ar_issue(struct sched *s, struct worker *self, struct ar_op *op)
{
	const struct pypto_coll *c = op->t->coll;
	int rc;

	op->t_issue_ns = pypto__now_ns();
	op->issue_worker = self ? (uint16_t)self->id : PYPTO_NO_WORKER;
	atomic_store_explicit(&op->state, AR_ISSUED, memory_order_relaxed);
	if (!s->comm) {
		if (c->send != c->recv)
			memmove(c->recv, c->send, (size_t)op->t->bytes);
		queue_tile(s, self, op->t);
		return true;
	}
	memset(&op->req, 0, sizeof(op->req));
	op->req.cb = ar_cb;
	op->req.cb_arg = op;
	/* Before the issue: the callback may run before the call returns. */
	atomic_fetch_add_explicit(&s->inflight, 1, memory_order_relaxed);
	rc = hcomm_allreduce_nb(s->comm, c->send, c->recv, c->count, c->dt,
				c->op, &op->req);
	if (rc < 0) {
		atomic_fetch_sub_explicit(&s->inflight, 1,
					  memory_order_release);
		sched_fail(s, pypto__fail(PYPTO_ERR_IO, "allreduce tile %s: "
					  "hcomm_allreduce_nb: %s (%s)",
					  op->t->name, hcomm_strerror(rc),
					  hcomm_errmsg()));
		return false;
	}
	op->on_hcomm = true;
	return true;
}

/*
 * Allreduce tile t is ready: issue it and every ready one behind it, in
 * seq order; one whose predecessor was not issued yet waits, marked
 * ready, for the thread that issues that one.  A failed run issues no
 * more collectives.
 */
static void ar_ready(struct sched *s, struct worker *self,
		     struct pypto_tile *t)
{
	struct ar_op *op;

	pthread_mutex_lock(&s->ar_lock);
	atomic_store_explicit(&s->ar[t->coll->seq].state, AR_READY,
			      memory_order_relaxed);
	while (s->ar_next < s->nar &&
	       !atomic_load_explicit(&s->finished, memory_order_acquire)) {
		op = &s->ar[s->ar_next];
		if (atomic_load_explicit(&op->state, memory_order_relaxed) !=
		    AR_READY || !ar_issue(s, self, op))
			break;
		s->ar_next++;
	}
	pthread_mutex_unlock(&s->ar_lock);
}

/* A worker took allreduce tile t: a root to issue, or one over one rank
 * that was issued (its copy made) to complete. */
static void ar_run(struct worker *w, struct pypto_tile *t)
{
	struct ar_op *op = &w->s->ar[t->coll->seq];

	if (atomic_load_explicit(&op->state, memory_order_relaxed) ==
	    AR_ISSUED)
		ar_complete(w->s, w, op, 0);
	else
		ar_ready(w->s, w, t);
}

/*
 * Before the workers start: the run's allreduces, and over libhcomm its
 * collective state.  libhcomm's first collective of a communicator
 * creates its staging window, a collective call that waits for every
 * rank: a 0-element hcomm_allreduce() does that here (later runs find it
 * made and move nothing; one after a failed collective fails at once),
 * so that no issue waits for the other ranks.
 */
static int ar_setup(struct sched *s)
{
	struct pypto_graph *g = s->g;
	uint32_t i;
	int rc;

	s->nar = g->nar;
	if (!s->nar)
		return 0;
	s->ar = calloc(s->nar, sizeof(*s->ar));
	if (!s->ar)
		return pypto__fail(PYPTO_ERR_NOMEM, "%u allreduce tiles",
				   s->nar);
	for (i = 0; i < g->n; i++) {
		struct pypto_tile *t = &g->tiles[i];

		if (t->kind != PYPTO_ALLREDUCE)
			continue;
		s->ar[t->coll->seq].s = s;
		s->ar[t->coll->seq].t = t;
	}
	rc = pthread_mutex_init(&s->ar_lock, NULL);
	if (rc)
		return pypto__fail(PYPTO_ERR_SYS, "pthread_mutex_init: %s",
				   strerror(rc));
	s->ar_lock_init = true;
	if (!s->comm)
		return 0;
	rc = hcomm_allreduce(s->comm, NULL, NULL, 0, HCOMM_UINT8, HCOMM_SUM);
	if (rc < 0)
		return pypto__fail(PYPTO_ERR_IO, "allreduce tiles: the "
				   "communicator's collectives: %s (%s)",
				   hcomm_strerror(rc), hcomm_errmsg());
	return 0;
}

/*
 * After wait_inflight(): every callback returned; libhcomm stores done
 * after that.  Wait for it, so the requests are ours again (and the
 * communicator has nothing in flight for pypto_run's run_end).
 */
static void ar_wait_done(struct sched *s)
{
	struct timespec ts = { 0, 50000 };
	uint32_t i;

	for (i = 0; i < s->nar; i++) {
		struct ar_op *op = &s->ar[i];

		if (!op->on_hcomm)
			continue;
		while (!__atomic_load_n(&op->req.done, __ATOMIC_ACQUIRE))
			nanosleep(&ts, NULL);
		op->on_hcomm = false;
	}
}

/* ---- workers ------------------------------------------------------------ */

/* The stretch of tiles run back to back ends: its time to the counters. */
static void burst_close(struct worker *w)
{
	uint64_t d;

	if (!w->burst_kind)
		return;
	d = pypto__now_ns() - w->burst_t0;
	w->busy_ns += d;
	if (w->burst_kind == PYPTO_COMPUTE)
		w->compute_ns += d;
	else
		w->host_ns += d;
	w->burst_kind = 0;
}

static bool work_visible(struct worker *w);

/*
 * A worker that found no work watches for some (or the run's end) for up
 * to s->spin_ns before it parks: a short run ends, or the next ready tile
 * comes, sooner than a futex wake-up would bring the worker back (and a
 * run cannot return before its parked workers woke and left).  It only
 * reads; true: there is something, look again.
 */
static bool idle_spin(struct worker *w)
{
	struct sched *s = w->s;
	uint64_t end;
	uint32_t k;

	if (!s->spin_ns)
		return false;
	end = pypto__now_ns() + s->spin_ns;
	for (k = 1;; k++) {
		if (atomic_load_explicit(&s->finished, memory_order_acquire) ||
		    work_visible(w))
			return true;
		if (k & 63) {
			__builtin_ia32_pause();
			continue;
		}
		if (pypto__now_ns() >= end)
			return false;
		sched_yield();
	}
}

static void run_tile(struct worker *w, struct pypto_tile *t)
{
	struct sched *s = w->s;
	struct pypto_exec ex = {
		.tile = tile_id(s, t), .worker = w->id, .device = t->device,
	};
	uint64_t t0, t1;
	int rc;

	if (t->kind == PYPTO_TRANSFER) {
		burst_close(w);
		xfer_issue(w, t);
		return;
	}
	if (t->kind == PYPTO_ALLREDUCE) {
		burst_close(w);
		ar_run(w, t);
		return;
	}
	/* The round so far goes out before this worker is busy. */
	if (w->round && w->round->n) {
		burst_close(w);
		round_flush(w);
	}
	if (t->kind == PYPTO_COMPUTE)
		w->n_compute++;
	else
		w->n_host++;
	if (!s->cfg->profile) {
		/*
		 * No clock read per tile (one costs about as much as the
		 * rest of the scheduler's work for a tile): tiles run back
		 * to back are timed as one stretch, which includes
		 * releasing and taking each.
		 */
		if (w->burst_kind != (int)t->kind) {
			burst_close(w);
			w->burst_t0 = pypto__now_ns();
			w->burst_kind = (int)t->kind;
		}
		rc = t->fn(t->arg, &ex);
		goto done;
	}
	t0 = pypto__now_ns();
	rc = t->fn(t->arg, &ex);
	t1 = pypto__now_ns();
	w->busy_ns += t1 - t0;
	if (t->kind == PYPTO_COMPUTE)
		w->compute_ns += t1 - t0;
	else
		w->host_ns += t1 - t0;
	if (w->eb) {
		struct pypto_event e = {
			.t0_ns = t0, .t1_ns = t1, .tile = ex.tile,
			.worker = (uint16_t)w->id,
			.stage = t->kind == PYPTO_COMPUTE ?
				 PYPTO_STAGE_COMPUTE : PYPTO_STAGE_PREFETCH,
			.device = t->device,
		};

		pypto__ev_record(s->r, w->eb, &e);
	}
done:
	if (rc) {
		sched_fail(s, pypto__fail(PYPTO_ERR_TASK,
					  "tile %s returned %d", t->name, rc));
		return;
	}
	tile_done(s, w, t);
}

static void drain_inbox(struct worker *w)
{
	struct hcomm_mpsc_node *n;

	while ((n = hcomm_mpsc_pop(&w->inbox))) {
		struct pypto_tile *t = (struct pypto_tile *)(void *)
			((char *)n - offsetof(struct pypto_tile, qnode));

		if (pypto_deque_push(&w->dq, tile_id(w->s, t)))
			sched_fail(w->s, pypto__fail(PYPTO_ERR_NOMEM,
						     "deque of worker %u",
						     w->id));
	}
}

/* Steal one tile: own device's workers first, then anyone. */
static bool steal(struct worker *w, uintptr_t *v)
{
	struct sched *s = w->s;
	uint32_t k, tries;

	if (s->nw == 1)
		return false;
	for (tries = 0; tries < 2 * s->nw; tries++) {
		struct worker *victim;
		int rc;

		if (tries < s->nw / s->ndev) {
			k = (uint32_t)(xorshift(&w->rng) %
				       dev_nworkers(s, w->device));
			victim = &s->w[w->device + k * s->ndev];
		} else {
			victim = &s->w[xorshift(&w->rng) % s->nw];
		}
		if (victim == w)
			continue;
		w->steal_attempts++;
		do {
			rc = pypto_deque_steal(&victim->dq, v);
		} while (rc < 0);
		if (rc > 0) {
			w->steals++;
			return true;
		}
	}
	return false;
}

/* Anything visible anywhere?  (A sleeping worker's last look.) */
static bool work_visible(struct worker *w)
{
	struct sched *s = w->s;
	uint32_t i;

	if (w->next || !hcomm_mpsc_empty(&w->inbox) ||
	    (w->round && w->round->n))
		return true;
	for (i = 0; i < s->nw; i++)
		if (pypto_deque_size(&s->w[i].dq))
			return true;
	return false;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct sched *s = w->s;
	/* A run started by a tile (worker 0 is the caller) nests. */
	struct worker *outer = cur_worker;
	uintptr_t v;

	cur_worker = w;
	w->eb = s->cfg->profile ? pypto__ev_thread_buf(s->r) : NULL;
	for (;;) {
		uint32_t key;

		if (atomic_load_explicit(&s->finished, memory_order_acquire))
			break;
		/* First, so that tiles handed to this worker can be stolen
		 * while it runs a long chain of next tiles. */
		drain_inbox(w);
		if (w->next) {
			struct pypto_tile *t = w->next;

			w->next = NULL;
			run_tile(w, t);
			continue;
		}
		if (pypto_deque_take(&w->dq, &v)) {
			run_tile(w, &s->g->tiles[v]);
			continue;
		}
		burst_close(w);
		round_flush(w);
		/*
		 * A batch the transport refused fails its descriptors here,
		 * and a failed transfer tile is issued again inline: into a
		 * new round of this worker, which must go out too.
		 */
		if (w->round && w->round->n)
			continue;
		if (steal(w, &v)) {
			run_tile(w, &s->g->tiles[v]);
			continue;
		}
		if (idle_spin(w))
			continue;
		atomic_store_explicit(&w->idle, true, memory_order_relaxed);
		key = ec_prepare(&s->ec);
		if (atomic_load_explicit(&s->finished, memory_order_acquire) ||
		    work_visible(w)) {
			ec_cancel(&s->ec);
		} else {
			w->parks++;
			ec_wait(&s->ec, key);
		}
		atomic_store_explicit(&w->idle, false, memory_order_relaxed);
	}
	burst_close(w);
	round_flush(w);
	cur_worker = outer;
	return NULL;
}

/* ---- link events ------------------------------------------------------- */

/*
 * A run over libhcomm listens to its communicator's link events while it
 * lasts (hcomm_comm_event_listen; the callback runs on libhcomm's event
 * thread).  Events about the target rank are kept in r->lev.  A link-down
 * marks the transfer tiles in flight: the transport fails over and
 * replays their descriptors exactly once (Documentation/failover.rst), so
 * they complete late, not failed, and are not issued again (that would
 * write twice); the mark shows them in the diagnosis and the timeline.  A
 * lost rank stops the re-issues: a failed tile then fails the run.
 */
static void sched_on_event(struct hcomm_comm *c, const struct hcomm_event *ev,
			   void *arg)
{
	struct sched *s = arg;
	struct pypto_run *r = s->r;
	struct pypto_link_event *le;
	uint32_t i, n = 0;

	(void)c;
	if (ev->time_ns < r->t0_ns ||
	    (ev->peer != s->x->target && !bit_test(s->uses, s->nranks,
						   ev->peer)))
		return;
	if (ev->type == HCOMM_EVENT_LINK_DOWN) {
		for (i = 0; i < s->g->n; i++) {
			struct pypto_tile *t = &s->g->tiles[i];

			if (t->kind == PYPTO_TRANSFER &&
			    atomic_load_explicit(&t->issued_rank,
						 memory_order_relaxed) ==
			    ev->peer &&
			    atomic_load_explicit(&t->xfer_pending,
						 memory_order_relaxed)) {
				atomic_store_explicit(&t->delayed, 1,
						      memory_order_relaxed);
				n++;
			}
		}
	}
	if (ev->type == HCOMM_EVENT_PEER_LOST)
		note_lost(s, ev->peer, ev->why);
	pthread_mutex_lock(&r->lev_lock);
	r->lev_seen++;
	if (r->nlev < PYPTO_LINK_EVENTS_MAX) {
		le = &r->lev[r->nlev++];
		memset(le, 0, sizeof(*le));
		le->t_ns = ev->time_ns - r->t0_ns;
		le->type = ev->type;
		le->peer = ev->peer;
		le->xport = ev->xport;
		le->err = ev->err;
		le->tiles_in_flight = n;
		snprintf(le->why, sizeof(le->why), "%s", ev->why);
	}
	pthread_mutex_unlock(&r->lev_lock);
}

/* After the listener is gone: the link figures of the stats. */
static void link_stats(struct sched *s, struct pypto_stats *st)
{
	struct pypto_run *r = s->r;
	uint64_t down = 0;
	bool have_down = false;
	uint32_t i;

	st->link_events = r->lev_seen;
	st->tiles_delayed = atomic_load(&s->delayed);
	st->peer_lost = atomic_load(&s->peer_lost);
	st->ranks_lost = atomic_load(&s->nlost);
	st->tiles_replaced = atomic_load(&s->replaced);
	for (i = 0; i < r->nlev; i++) {
		const struct pypto_link_event *le = &r->lev[i];

		if (le->type == HCOMM_EVENT_LINK_DOWN) {
			if (!have_down)		/* the first of a failover */
				down = le->t_ns;
			have_down = true;
		} else if (le->type == HCOMM_EVENT_FAILED_OVER) {
			st->failovers++;
			if (have_down && le->t_ns >= down)
				st->failover_stall_ns += le->t_ns - down;
			have_down = false;
		}
	}
}

PYPTO_EXPORT unsigned int pypto_run_link_events(const struct pypto_run *r,
						const struct pypto_link_event **ev)
{
	if (ev)
		*ev = r ? r->lev : NULL;
	return r ? r->nlev : 0;
}

/* ---- pypto_run ---------------------------------------------------------- */

static void collect_stats(struct sched *s, struct pypto_stats *st)
{
	uint32_t i;

	st->workers = s->nw;
	st->devices = s->ndev;
	st->tiles = s->g->n;
	for (i = 0; i < s->nw; i++) {
		struct worker *w = &s->w[i];

		st->tiles_compute += w->n_compute;
		st->tiles_host += w->n_host;
		st->tiles_transfer += w->n_transfer;
		st->steals += w->steals;
		st->steal_attempts += w->steal_attempts;
		st->parks += w->parks;
		st->rounds += w->rounds;
		st->descs += w->descs;
		st->compute_ns += w->compute_ns;
		st->host_ns += w->host_ns;
		s->r->worker_busy_ns[i] = w->busy_ns;
	}
	st->xfer_ns = atomic_load(&s->xfer_ns);
	st->xfer_bytes = atomic_load(&s->xfer_bytes);
	st->xfer_retries = atomic_load(&s->retries);
	st->xfer_failures = atomic_load(&s->failures);
	st->xfer_cap = s->cap;
	st->xfer_waits = atomic_load(&s->waits);
	st->tiles_allreduce = atomic_load(&s->ar_done);
	st->allreduce_ns = atomic_load(&s->ar_ns);
	st->allreduce_bytes = atomic_load(&s->ar_bytes);
}

/* Every transport callback has finished with the run. */
static void wait_inflight(struct sched *s)
{
	struct timespec ts = { 0, 50000 };

	while (atomic_load_explicit(&s->inflight, memory_order_acquire))
		nanosleep(&ts, NULL);
}

static void worker_job(void *arg, uint32_t idx)
{
	struct sched *s = arg;

	worker_main(&s->w[idx + 1]);
}

/*
 * Worker 0 is the calling thread (it would only wait otherwise); workers
 * 1 .. nw-1 are threads of the pool (pool.c), lent to this run.
 */
static int run_workers(struct sched *s)
{
	struct pypto__team team;
	int rc = 0, err;

	err = pypto__team_start(&team, s->nw - 1, worker_job, s);
	if (err) {
		rc = pypto__fail(PYPTO_ERR_SYS,
				 "starting worker %u of %u: %s", team.n + 1,
				 s->nw, strerror(-err));
		sched_fail(s, rc);
	}
	worker_main(&s->w[0]);
	pypto__team_join(&team);
	return rc;
}

/* What pypto_add_allreduce could not know: the communicator's size. */
static int check_allreduce(const struct pypto_tile *t, struct pypto_xport *x)
{
	struct hcomm_comm *comm = x && x->ops->comm ? x->ops->comm(x) : NULL;
	size_t n = comm ? (size_t)hcomm_comm_size(comm) : 1;

	/* libhcomm's limit (every collective's, whatever its kind) */
	if (n && t->coll->count > SIZE_MAX / hcomm_dtype_size(t->coll->dt) / n)
		return pypto__fail(PYPTO_ERR_INVAL, "allreduce tile %s: %zu "
				   "elements of %s are too many for %zu ranks",
				   t->name, t->coll->count,
				   hcomm_dtype_name(t->coll->dt), n);
	return 0;
}

static int check_graph(struct pypto_graph *g, struct pypto_xport *x)
{
	uint32_t i;
	int rc;

	for (i = 0; i < g->n; i++) {
		if (g->tiles[i].kind == PYPTO_ALLREDUCE) {
			rc = check_allreduce(&g->tiles[i], x);
			if (rc)
				return rc;
			continue;
		}
		if (g->tiles[i].kind != PYPTO_TRANSFER)
			continue;
		if (!x)
			return pypto__fail(PYPTO_ERR_INVAL,
					   "tile %s is a transfer but no transport was given",
					   g->tiles[i].name);
		if (x->no_window)
			return pypto__fail(PYPTO_ERR_INVAL,
					   "tile %s is a transfer but the transport has no window (collectives only)",
					   g->tiles[i].name);
		if (g->tiles[i].ndesc == 0)
			return pypto__fail(PYPTO_ERR_INVAL,
					   "transfer tile %s has no rows",
					   g->tiles[i].name);
		if (x->nranks && g->tiles[i].rank >= x->nranks)
			return pypto__fail(PYPTO_ERR_INVAL,
					   "transfer tile %s names rank %d, outside 0..%d",
					   g->tiles[i].name, g->tiles[i].rank,
					   x->nranks - 1);
	}
	return 0;
}

/* Mark rank and its chain of mirrors in set (n ranks); cycle-safe. */
static void mark_chain(const struct pypto_xport *x, uint64_t *set,
		       uint32_t n, int rank)
{
	unsigned int hops;

	for (hops = 0; hops <= PYPTO_MIRRORS_MAX && rank >= 0 &&
	     (uint32_t)rank < n && !bit_test(set, n, rank); hops++) {
		set[rank / 64] |= 1ULL << (rank % 64);
		rank = pypto__xport_mirror(x, rank);
	}
}

/*
 * A run over libhcomm: the ranks its transfers may reach and the lost
 * set.  A rank libhcomm already knows lost counts as lost from the start
 * (its tiles go to a mirror at once, or the run fails before anything
 * runs).
 */
static int ranks_setup(struct sched *s)
{
	const struct pypto_graph *g = s->g;
	uint32_t words, i;

	s->nranks = (uint32_t)s->x->nranks;
	s->lost_first = -1;
	words = (s->nranks + 63) / 64;
	s->uses = calloc(words, sizeof(*s->uses));
	s->lost = calloc(words, sizeof(*s->lost));
	if (!s->uses || !s->lost)
		return pypto__fail(PYPTO_ERR_NOMEM, "rank sets of %u ranks",
				   s->nranks);
	mark_chain(s->x, s->uses, s->nranks, s->x->target);
	for (i = 0; g->nxfer && i < g->n; i++)
		if (g->tiles[i].kind == PYPTO_TRANSFER)
			mark_chain(s->x, s->uses, s->nranks,
				   tile_rank(s, &g->tiles[i]));
	for (i = 0; i < s->nranks; i++)
		if (bit_test(s->uses, s->nranks, (int)i) &&
		    (int)i != hcomm_comm_rank(s->comm) &&
		    hcomm_comm_peer_lost(s->comm, (int)i) == 1)
			note_lost(s, (int)i, "lost before the run");
	return 0;
}

PYPTO_EXPORT int pypto_graph_loss_plan(struct pypto_graph *g,
				       const struct pypto_xport *x, int rank,
				       struct pypto_loss_plan *p)
{
	struct hcomm_comm *comm = x && x->ops->comm ?
				  x->ops->comm((struct pypto_xport *)x) : NULL;
	uint32_t nr = comm ? (uint32_t)x->nranks : 0, i, head = 0, tail = 0;
	uint32_t *queue = NULL;
	uint64_t *lost = NULL;
	uint8_t *mark = NULL;
	int rc = 0;

	if (!g || !p)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_graph_loss_plan: "
				   "NULL argument");
	if (rank < 0 || (nr && (uint32_t)rank >= nr))
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_graph_loss_plan: "
				   "rank %d outside 0..%d", rank,
				   nr ? (int)nr - 1 : INT_MAX);
	memset(p, 0, sizeof(*p));
	p->mirror = -1;
	p->first_stranded = -1;
	if (g->n) {
		queue = malloc(sizeof(*queue) * g->n);
		mark = calloc(g->n, 1);
	}
	if (nr)
		lost = calloc((nr + 63) / 64, sizeof(*lost));
	if ((g->n && (!queue || !mark)) || (nr && !lost)) {
		rc = pypto__fail(PYPTO_ERR_NOMEM, "pypto_graph_loss_plan");
		goto out;
	}
	if (nr) {
		for (i = 0; i < nr; i++)
			if ((int)i == rank ||
			    ((int)i != hcomm_comm_rank(comm) &&
			     hcomm_comm_peer_lost(comm, (int)i) == 1))
				lost[i / 64] |= 1ULL << (i % 64);
		for (i = 0; i < g->n; i++) {
			const struct pypto_tile *t = &g->tiles[i];
			int rk, to;

			if (t->kind != PYPTO_TRANSFER)
				continue;
			rk = tile_rank_of(x, t);
			if (rk != rank)
				continue;
			p->transfers++;
			to = live_rank_of(x, (const _Atomic uint64_t *)lost, nr,
					  rk);
			if (to >= 0) {
				p->replaced++;
				p->mirror = to;
				continue;
			}
			if (p->first_stranded < 0)
				p->first_stranded = (int32_t)i;
			mark[i] = 1;
			queue[tail++] = i;
		}
	} else {
		for (i = 0; i < g->n; i++)
			p->transfers += g->tiles[i].kind == PYPTO_TRANSFER &&
					(x ? tile_rank_of(x, &g->tiles[i]) :
					 g->tiles[i].rank) == rank;
	}
	/* what depends on a stranded tile, through any path */
	while (head < tail) {
		const struct pypto_tile *t = &g->tiles[queue[head++]];

		for (i = 0; i < t->nconsumers; i++)
			if (!mark[t->consumers[i]]) {
				mark[t->consumers[i]] = 1;
				queue[tail++] = t->consumers[i];
			}
	}
	p->stranded = tail;
out:
	free(queue);
	free(mark);
	free(lost);
	return rc;
}

/*
 * After wait_inflight() (every callback finished touching the run) and the
 * workers' end: free w's retired rounds, waiting for the transport's done
 * stores that follow their last callbacks.
 */
static void round_reclaim_all(struct worker *w)
{
	struct timespec ts = { 0, 50000 };

	round_reclaim(w);
	while (w->pend || !hcomm_mpsc_empty(&w->retired)) {
		nanosleep(&ts, NULL);
		round_reclaim(w);
	}
	free(w->spare);
	w->spare = NULL;
}

static void sched_free(struct sched *s)
{
	uint32_t i;

	if (s->w) {
		for (i = 0; i < s->nw; i++) {
			/* Never submitted: nobody else holds it. */
			free(s->w[i].round);
			round_reclaim_all(&s->w[i]);
			pypto_deque_destroy(&s->w[i].dq);
		}
	}
	free(s->w);
	free(s->dev_rr);
	for (i = 0; i < s->ndq; i++)
		pthread_mutex_destroy(&s->dq[i].lock);
	free(s->dq);
	ar_wait_done(s);
	free(s->ar);
	if (s->ar_lock_init)
		pthread_mutex_destroy(&s->ar_lock);
	free(s->uses);
	free((void *)s->lost);
}

PYPTO_EXPORT int pypto_run(struct pypto_graph *g, const struct pypto_config *ucfg,
			   struct pypto_xport *x, struct pypto_run **out)
{
	struct pypto_config cfg;
	struct pypto_run *r;
	struct sched s;
	const char *trace;
	uint64_t busy0 = 0, busy1 = 0;
	uint32_t lanes = 0;
	bool ran = false, began = false, have_busy, clean;
	uint32_t ndone;
	uint32_t i, rr = 0;
	int rc;

	if (out)
		*out = NULL;
	if (!g)
		return pypto__fail(PYPTO_ERR_INVAL, "graph is NULL");
	if (ucfg) {
		cfg = *ucfg;
	} else {
		pypto_config_default(&cfg);
		/* The graph's tile size unless PYPTO_TILE_SIZE says otherwise. */
		if (g->wl_tile_size)
			cfg.tile_size = g->wl_tile_size;
		rc = pypto_config_from_env(&cfg);
		if (rc)
			return rc;
	}
	if (!cfg.workers || cfg.workers > 1024 || !cfg.devices ||
	    cfg.devices > cfg.workers || !cfg.batch_max ||
	    cfg.batch_max > 65536 || cfg.prefetch_depth > 64)
		return pypto__fail(PYPTO_ERR_INVAL,
				   "config: workers %u (1..1024), devices %u (1..workers), batch_max %u (1..65536), prefetch_depth %u (0..64)",
				   cfg.workers, cfg.devices, cfg.batch_max,
				   cfg.prefetch_depth);
	/*
	 * A graph is cut before it runs: a scheduler cannot cut it again, so
	 * a configuration naming another tile size than the graph's own
	 * (pypto_graph_set_workload(), set by the GEMM builder) is a mistake.
	 */
	if (g->wl_tile_size && cfg.tile_size != g->wl_tile_size)
		return pypto__fail(PYPTO_ERR_INVAL,
				   "config: tile_size %u, but the graph was cut into tiles of %u (a run cannot cut it again: run it with tile_size %u or build it again)",
				   cfg.tile_size, g->wl_tile_size, g->wl_tile_size);
	rc = check_graph(g, x);
	if (rc)
		return rc;
	rc = pypto__graph_prepare(g, cfg.devices);
	if (rc)
		return rc;

	r = calloc(1, sizeof(*r));
	if (!r)
		return pypto__fail(PYPTO_ERR_NOMEM, "run");
	pthread_mutex_init(&r->lev_lock, NULL);
	r->g = g;
	r->cfg = cfg;
	r->xport_name = pypto_xport_name(x);
	r->worker_busy_ns = calloc(cfg.workers, sizeof(uint64_t));
	memset(&s, 0, sizeof(s));
	s.g = g;
	s.r = r;
	s.x = x;
	s.cfg = &r->cfg;
	s.nw = cfg.workers;
	s.ndev = cfg.devices;
	s.cap = cfg.double_buffering ? cfg.prefetch_depth + 1 : 1;
	s.w = aligned_alloc(PYPTO_CACHELINE, sizeof(*s.w) * s.nw);
	s.dev_rr = calloc(s.ndev, sizeof(*s.dev_rr));
	s.dq = aligned_alloc(PYPTO_CACHELINE, sizeof(*s.dq) * s.ndev);
	if (!r->worker_busy_ns || !s.w || !s.dev_rr || !s.dq) {
		free(s.w);
		s.w = NULL;
		rc = pypto__fail(PYPTO_ERR_NOMEM, "workers");
		goto out;
	}
	memset(s.w, 0, sizeof(*s.w) * s.nw);
	rc = idle_spin_ns(s.nw, &s.spin_ns);
	if (rc) {
		free(s.w);
		s.w = NULL;
		goto out;
	}
	for (i = 0; i < s.nw; i++) {
		struct worker *w = &s.w[i];

		w->s = &s;
		w->id = i;
		w->device = (int32_t)(i % s.ndev);
		w->rng = (cfg.seed ? cfg.seed : 1) * 0x9e3779b97f4a7c15ULL +
			 i + 1;
		hcomm_mpsc_init(&w->inbox);
		hcomm_mpsc_init(&w->retired);
		if (pypto_deque_init(&w->dq, 8)) {
			while (i--)
				pypto_deque_destroy(&s.w[i].dq);
			free(s.w);
			s.w = NULL;
			rc = pypto__fail(PYPTO_ERR_NOMEM, "deques");
			goto out;
		}
	}
	memset(s.dq, 0, sizeof(*s.dq) * s.ndev);
	for (s.ndq = 0; s.ndq < s.ndev; s.ndq++) {
		rc = pthread_mutex_init(&s.dq[s.ndq].lock, NULL);
		if (rc) {
			rc = pypto__fail(PYPTO_ERR_SYS, "pthread_mutex_init: %s",
					 strerror(rc));
			goto out;
		}
	}
	/* Reset the runtime fields (unless the last run left them so) and
	 * seed the roots, spread per device. */
	clean = g->rt_clean;
	g->rt_clean = false;
	for (i = 0; !clean && i < g->n; i++) {
		struct pypto_tile *t = &g->tiles[i];

		atomic_store(&t->input_deps, t->ndeps);
		atomic_store(&t->xfer_pending, 0);
		atomic_store(&t->xfer_failed, 0);
		t->attempt = 0;
		t->t_issue_ns = 0;
		t->slot = false;
		t->wnext = NULL;
		atomic_store(&t->delayed, 0);
		atomic_store(&t->xdone, 0);
		atomic_store(&t->replaced, 0);
		atomic_store(&t->issued_rank, -1);
	}
	s.comm = x && x->ops->comm ? x->ops->comm(x) : NULL;
	rc = ar_setup(&s);
	if (rc)
		goto out;
	if (s.comm && x->nranks > 0) {
		rc = ranks_setup(&s);
		if (rc)
			goto out;
	}
	if (x && x->ops->run_begin) {
		rc = x->ops->run_begin(x);
		if (rc)
			goto out;
		began = true;
	}
	r->t0_ns = pypto__now_ns();
	if (s.comm) {
		rc = hcomm_comm_event_listen(s.comm, sched_on_event, &s);
		if (rc < 0) {
			rc = pypto__fail(PYPTO_ERR_IO, "hcomm_comm_event_listen: %s (%s)",
					 hcomm_strerror(rc), hcomm_errmsg());
			goto out;
		}
		s.listen_id = rc;
		rc = 0;
	}
	for (i = 0; i < g->nroots; i++) {
		struct pypto_tile *t = &g->tiles[g->roots[i]];
		uint32_t per, k;

		per = (s.nw - (uint32_t)t->device + s.ndev - 1) / s.ndev;
		k = (uint32_t)t->device + (rr++ % per) * s.ndev;
		if (pypto_deque_push(&s.w[k].dq, g->roots[i])) {
			rc = pypto__fail(PYPTO_ERR_NOMEM, "deque");
			goto out;
		}
	}
	if (!g->n)
		atomic_store(&s.finished, true);
	ran = true;
	have_busy = x && x->ops->busy && !x->ops->busy(x, &busy0, &lanes);
	if (g->run_hook)
		g->run_hook(g, true);
	rc = run_workers(&s);
	wait_inflight(&s);
	ar_wait_done(&s);
	if (s.listen_id) {	/* returns once its callback is not running */
		hcomm_comm_event_unlisten(s.comm, s.listen_id);
		s.listen_id = 0;
	}
	if (g->run_hook)
		g->run_hook(g, false);
	r->st.wall_ns = pypto__now_ns() - r->t0_ns;
	if (have_busy && !x->ops->busy(x, &busy1, &lanes) && lanes &&
	    busy1 >= busy0 && r->st.wall_ns) {
		r->st.engine_known = 1;
		r->st.engine_lanes = lanes;
		r->st.engine_busy_ns = busy1 - busy0;
		r->st.engine_util = (double)(busy1 - busy0) /
				    ((double)lanes * (double)r->st.wall_ns);
	}
	if (!rc && atomic_load(&s.status))
		rc = pypto__fail(-atomic_load(&s.status), "%s", s.errmsg);
	ndone = atomic_load(&s.ndone_ext);
	for (i = 0; i < s.nw; i++)
		ndone += s.w[i].ndone;
	if (!rc && ndone != g->n)
		rc = pypto__fail(PYPTO_ERR_INVAL,
				 "run ended with %u of %u tiles done", ndone,
				 g->n);
	/* Every tile ran: each input count was put back when it became
	 * ready, and only transfer and allreduce tiles touch the rest. */
	g->rt_clean = !rc && !g->nxfer && !g->nar;
	collect_stats(&s, &r->st);
	link_stats(&s, &r->st);
	r->st.analysis = g->analysis;
	if (pypto__run_finish_events(r) && !rc)
		rc = pypto__fail(PYPTO_ERR_NOMEM, "events");
	r->status = rc;
	trace = getenv("PYPTO_TRACE");
	if (trace && *trace)
		pypto_run_write_trace(r, trace);
out:
	if (s.listen_id)
		hcomm_comm_event_unlisten(s.comm, s.listen_id);
	if (began && x->ops->run_end)
		x->ops->run_end(x);
	sched_free(&s);
	if (!ran) {
		/* Failed before starting: no record to hand out. */
		pypto_run_free(r);
		return rc;
	}
	if (out)
		*out = r;
	else
		pypto_run_free(r);
	return rc;
}

PYPTO_EXPORT const struct pypto_stats *pypto_run_stats(const struct pypto_run *r)
{
	return r ? &r->st : NULL;
}

PYPTO_EXPORT void pypto_run_free(struct pypto_run *r)
{
	if (!r)
		return;
	pypto__run_free_events(r);
	pthread_mutex_destroy(&r->lev_lock);
	free(r->worker_busy_ns);
	free(r);
}
