/* SPDX-License-Identifier: MIT */
/*
 * libhcomm internals: a lock-free multi-producer single-consumer queue
 * (intrusive, Vyukov's algorithm, C11 atomics) and the event count its
 * consumer sleeps on (futex), used to hand completions to the callback
 * dispatcher without a lock.  Header-only: everything is static inline.
 *
 * push() is wait-free for producers; pop() is for the single consumer and
 * may return NULL while a push is half done (retry later: it is not empty).
 *
 *   void hcomm_mpsc_init(struct hcomm_mpsc *q);
 *   void hcomm_mpsc_push(struct hcomm_mpsc *q, struct hcomm_mpsc_node *n);
 *   void hcomm_mpsc_push_list(struct hcomm_mpsc *q,
 *				struct hcomm_mpsc_node *first,
 *				struct hcomm_mpsc_node *last);
 *   struct hcomm_mpsc_node *hcomm_mpsc_pop(struct hcomm_mpsc *q);
 *   int hcomm_mpsc_empty(struct hcomm_mpsc *q);       (consumer only)
 *
 * Event count (consumer waits without missing a push):
 *   void hcomm_ec_init(struct hcomm_ec *ec);
 *   uint32_t hcomm_ec_prepare(struct hcomm_ec *ec);    (consumer, before
 *                                                       re-checking q)
 *   void hcomm_ec_wait(struct hcomm_ec *ec, uint32_t key, int timeout_ms);
 *   void hcomm_ec_notify(struct hcomm_ec *ec);         (producer, after
 *                                                       push; a syscall
 *                                                       only when the
 *                                                       consumer sleeps)
 *
 * The consumer's loop:
 *
 *	for (;;) {
 *		n = hcomm_mpsc_pop(q);
 *		if (n) { handle(n); continue; }
 *		key = hcomm_ec_prepare(ec);
 *		if (!hcomm_mpsc_empty(q))
 *			continue;		(a push landed or is half done)
 *		hcomm_ec_wait(ec, key, timeout_ms);
 *	}
 *
 * A producer: hcomm_mpsc_push(q, n); hcomm_ec_notify(ec);
 *
 * Why no wakeup is lost: prepare() sets the waiter bit with a seq_cst
 * read-modify-write before the consumer re-reads q->head (seq_cst); a
 * producer's push exchanges q->head (seq_cst) before notify()'s seq_cst
 * read-modify-write of the same word.  In the single total order of these
 * operations either the re-check sees the push, or notify() sees the
 * waiter bit (and bumps the key, so a FUTEX_WAIT on the old key returns
 * at once, and wakes the sleeper).
 */
#ifndef LIBHCOMM_MPSC_H
#define LIBHCOMM_MPSC_H

#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#define HCOMM_CACHELINE	64

/* Embed in the item; recover it with container_of-style arithmetic. */
struct hcomm_mpsc_node {
	_Atomic(struct hcomm_mpsc_node *) next;
};

/*
 * head (written by producers) and tail (the consumer's) a cache line
 * apart; padded rather than aligned, so that the structs embedding these
 * need no aligned allocation (on a 64-byte boundary they never share a
 * line, elsewhere they rarely do).
 */
struct hcomm_mpsc {
	/* Producers: the node pushed last. */
	_Atomic(struct hcomm_mpsc_node *) head;
	char pad_head[HCOMM_CACHELINE - sizeof(void *)];
	/* Consumer: the oldest node not yet popped (or the stub). */
	struct hcomm_mpsc_node *tail;
	struct hcomm_mpsc_node stub;
	char pad_tail[HCOMM_CACHELINE - 2 * sizeof(void *)];
};

static inline void hcomm_mpsc_init(struct hcomm_mpsc *q)
{
	atomic_init(&q->stub.next, NULL);
	atomic_init(&q->head, &q->stub);
	q->tail = &q->stub;
}

/* Any thread; wait-free.  n must not be in the queue already. */
static inline void hcomm_mpsc_push(struct hcomm_mpsc *q,
				   struct hcomm_mpsc_node *n)
{
	struct hcomm_mpsc_node *prev;

	atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
	/* seq_cst: pairs with the consumer's re-check, see above. */
	prev = atomic_exchange_explicit(&q->head, n, memory_order_seq_cst);
	/*
	 * Between the exchange and this store the list is broken at prev:
	 * pop() sees no successor yet and returns NULL, empty() says 0.
	 */
	atomic_store_explicit(&prev->next, n, memory_order_release);
}

/*
 * Any thread; wait-free: the nodes first .. last, already linked through
 * their next pointers (last's NULL), in that order, with one exchange.
 */
static inline void hcomm_mpsc_push_list(struct hcomm_mpsc *q,
					struct hcomm_mpsc_node *first,
					struct hcomm_mpsc_node *last)
{
	struct hcomm_mpsc_node *prev;

	atomic_store_explicit(&last->next, NULL, memory_order_relaxed);
	prev = atomic_exchange_explicit(&q->head, last, memory_order_seq_cst);
	/* Publishes the links inside the list too (stored before). */
	atomic_store_explicit(&prev->next, first, memory_order_release);
}

/* Consumer only.  NULL: empty, or a push is half done (then not empty). */
static inline struct hcomm_mpsc_node *hcomm_mpsc_pop(struct hcomm_mpsc *q)
{
	struct hcomm_mpsc_node *tail = q->tail, *head;
	struct hcomm_mpsc_node *next =
		atomic_load_explicit(&tail->next, memory_order_acquire);

	if (tail == &q->stub) {
		if (!next)
			return NULL;
		q->tail = next;
		tail = next;
		next = atomic_load_explicit(&next->next, memory_order_acquire);
	}
	if (next) {
		q->tail = next;
		return tail;
	}
	head = atomic_load_explicit(&q->head, memory_order_seq_cst);
	if (tail != head)
		return NULL;		/* a push after tail is half done */
	/* tail is the last node: put the stub behind it to take it out. */
	hcomm_mpsc_push(q, &q->stub);
	next = atomic_load_explicit(&tail->next, memory_order_acquire);
	if (next) {
		q->tail = next;
		return tail;
	}
	return NULL;			/* a push overtook the stub's */
}

/* Consumer only: 1 if nothing was pushed that pop() has not returned. */
static inline int hcomm_mpsc_empty(struct hcomm_mpsc *q)
{
	return q->tail == &q->stub &&
	       atomic_load_explicit(&q->head, memory_order_seq_cst) ==
	       &q->stub;
}

/*
 * Event count: one 32-bit futex word, bit 0 "the consumer is about to
 * sleep or sleeps", bits 1..31 a counter notify() bumps whenever it sees
 * bit 0 (and then clears it).  A key is the word as prepare() left it.
 */
struct hcomm_ec {
	_Atomic uint32_t word;
	char pad[HCOMM_CACHELINE - sizeof(uint32_t)];
};

#define HCOMM_EC_WAITING	1u

static inline void hcomm_ec_init(struct hcomm_ec *ec)
{
	atomic_init(&ec->word, 0);
}

/* Consumer: announce the wait; re-check the queue, then hcomm_ec_wait(). */
static inline uint32_t hcomm_ec_prepare(struct hcomm_ec *ec)
{
	return atomic_fetch_or_explicit(&ec->word, HCOMM_EC_WAITING,
					memory_order_seq_cst) |
	       HCOMM_EC_WAITING;
}

/*
 * Consumer: sleep until notify() after prepare() returned key, or
 * timeout_ms (< 0: no limit; 0: do not sleep).  Returns at once when a
 * notify() came in between; spurious returns are possible (re-check).
 */
static inline void hcomm_ec_wait(struct hcomm_ec *ec, uint32_t key,
				 int timeout_ms)
{
	struct timespec ts, *tsp = NULL;
	uint32_t expect = key;

	if (timeout_ms > 0) {
		ts.tv_sec = timeout_ms / 1000;
		ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000;
		tsp = &ts;
	}
	if (timeout_ms && atomic_load_explicit(&ec->word,
					       memory_order_acquire) == key)
		syscall(SYS_futex, &ec->word, FUTEX_WAIT_PRIVATE, key, tsp,
			NULL, 0);
	/*
	 * Timed out, interrupted or not slept: take the waiter bit back if
	 * nothing happened since prepare(), so that producers make no
	 * system call for a consumer that is not asleep.
	 */
	atomic_compare_exchange_strong_explicit(&ec->word, &expect,
						key & ~HCOMM_EC_WAITING,
						memory_order_relaxed,
						memory_order_relaxed);
}

/* Producer, after push(): wake the consumer if it waits. */
static inline void hcomm_ec_notify(struct hcomm_ec *ec)
{
	uint32_t old = atomic_load_explicit(&ec->word, memory_order_relaxed);

	/*
	 * The seq_cst RMW that orders the push before the read of the
	 * waiter bit; when the bit is clear it writes the same value.
	 */
	for (;;) {
		uint32_t new = old & HCOMM_EC_WAITING ?
			       (old + 2) & ~HCOMM_EC_WAITING : old;

		if (atomic_compare_exchange_weak_explicit(&ec->word, &old, new,
							  memory_order_seq_cst,
							  memory_order_relaxed))
			break;
	}
	if (old & HCOMM_EC_WAITING)
		syscall(SYS_futex, &ec->word, FUTEX_WAKE_PRIVATE, INT_MAX,
			NULL, NULL, 0);
}

/*
 * A bounded ring of hand-overs in front of the queue, for the consumer's
 * fast path (Vyukov's bounded queue, single consumer): each slot is one
 * cache line holding its sequence number and the item's three words, so
 * that a consumer polling the next slot gets the item with the one cache
 * line that the producer's publication moves, where the linked queue
 * needs the link, then the node, then the item.  Allocate it on a
 * 64-byte boundary (hcomm_ring_new()).
 *
 *   struct hcomm_ring *hcomm_ring_new(void);        (NULL: no memory)
 *   int hcomm_ring_push(struct hcomm_ring *r, const struct hcomm_ring_item *it);
 *                                         (any thread; -1 when full)
 *   int hcomm_ring_pop(struct hcomm_ring *r, struct hcomm_ring_item *it);
 *                                         (consumer; 0 when empty)
 *   int hcomm_ring_empty(struct hcomm_ring *r);      (consumer)
 *
 * A push that finds the ring full fails: the producer then uses the
 * linked queue (which never fails).  Publication is a seq_cst store of the
 * slot's sequence number and empty() a seq_cst load of it, so that the
 * event count's argument (above) holds for the ring too.
 */
#define HCOMM_RING_SLOTS	256	/* a power of two */

struct hcomm_ring_item {
	void *a;
	void (*fn)(void);	/* cast back to its own type to call it */
	void *b;
};

struct hcomm_ring_slot {
	_Atomic uint64_t seq;	/* pos: free for push pos; pos + 1: full */
	struct hcomm_ring_item it;
	char pad[HCOMM_CACHELINE - sizeof(uint64_t) -
		 sizeof(struct hcomm_ring_item)];
};

struct hcomm_ring {
	_Atomic uint64_t enq;			/* producers' next ticket */
	char pad_enq[HCOMM_CACHELINE - sizeof(uint64_t)];
	uint64_t deq;				/* consumer's next slot */
	char pad_deq[HCOMM_CACHELINE - sizeof(uint64_t)];
	struct hcomm_ring_slot slot[HCOMM_RING_SLOTS];
};

_Static_assert(sizeof(struct hcomm_ring_slot) == HCOMM_CACHELINE,
	       "a ring slot is one cache line");

static inline void hcomm_ring_init(struct hcomm_ring *r)
{
	uint64_t i;

	atomic_init(&r->enq, 0);
	r->deq = 0;
	for (i = 0; i < HCOMM_RING_SLOTS; i++)
		atomic_init(&r->slot[i].seq, i);
}

static inline struct hcomm_ring *hcomm_ring_new(void)
{
	void *p;

	if (posix_memalign(&p, HCOMM_CACHELINE, sizeof(struct hcomm_ring)))
		return NULL;
	hcomm_ring_init((struct hcomm_ring *)p);
	return (struct hcomm_ring *)p;
}

/* Any thread: 0, or -1 when every slot is taken. */
static inline int hcomm_ring_push(struct hcomm_ring *r,
				  const struct hcomm_ring_item *it)
{
	uint64_t pos = atomic_load_explicit(&r->enq, memory_order_relaxed);
	struct hcomm_ring_slot *s;
	int64_t dif;

	for (;;) {
		s = &r->slot[pos & (HCOMM_RING_SLOTS - 1)];
		dif = (int64_t)(atomic_load_explicit(&s->seq,
						     memory_order_acquire) -
				pos);
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(
					&r->enq, &pos, pos + 1,
					memory_order_relaxed,
					memory_order_relaxed))
				break;
		} else if (dif < 0) {
			return -1;	/* the consumer has not freed it */
		} else {
			pos = atomic_load_explicit(&r->enq,
						   memory_order_relaxed);
		}
	}
	s->it = *it;
	atomic_store_explicit(&s->seq, pos + 1, memory_order_seq_cst);
	return 0;
}

/* Consumer only: 1 with *it filled, 0 when the next slot is not full. */
static inline int hcomm_ring_pop(struct hcomm_ring *r,
				 struct hcomm_ring_item *it)
{
	struct hcomm_ring_slot *s = &r->slot[r->deq & (HCOMM_RING_SLOTS - 1)];

	if (atomic_load_explicit(&s->seq, memory_order_acquire) !=
	    r->deq + 1)
		return 0;
	*it = s->it;
	atomic_store_explicit(&s->seq, r->deq + HCOMM_RING_SLOTS,
			      memory_order_release);
	r->deq++;
	return 1;
}

/* Consumer only: 1 if the next slot holds nothing (seq_cst load). */
static inline int hcomm_ring_empty(struct hcomm_ring *r)
{
	struct hcomm_ring_slot *s = &r->slot[r->deq & (HCOMM_RING_SLOTS - 1)];

	return atomic_load_explicit(&s->seq, memory_order_seq_cst) !=
	       r->deq + 1;
}

/*
 * The ring in front of a queue, one consumer (hcomm_comm's callback
 * hand-over):
 *
 *   void hcomm_rq_push(struct hcomm_ring *r, struct hcomm_mpsc *q,
 *                      uint64_t *spill, const struct hcomm_ring_item *it,
 *                      struct hcomm_mpsc_node *node);      (any thread)
 *   int hcomm_rq_pop(struct hcomm_rq_cons *k, struct hcomm_ring *r,
 *                    struct hcomm_mpsc *q, uint64_t *spill,
 *                    struct hcomm_ring_item *it,
 *                    struct hcomm_mpsc_node **node);       (consumer)
 *   int hcomm_rq_empty(const struct hcomm_rq_cons *k, struct hcomm_ring *r,
 *                      struct hcomm_mpsc *q);               (consumer)
 *
 * A producer pushes to the ring unless the queue holds some (*spill,
 * counted before the queue's push) or the ring is full; then to the queue.
 * So each producer's items are in order in the ring, then in the queue,
 * and the consumer takes the ring first.  But a ring slot is claimed (a
 * ticket) before it is filled, and the consumer stops at a slot still
 * being filled while later slots may be full: a node of the queue can
 * come after ring items of its producer that the consumer has not taken.
 * So a node taken from the queue is held (@held) until the ring is taken
 * up to @mark, the tickets given out when the node was taken: its
 * producer claimed its earlier slots before it pushed the node, which the
 * queue's pop synchronises with, and claims none after it until the node
 * leaves the spill count, which happens only then.
 *
 * hcomm_rq_pop() gives 1 with *it (from the ring), 2 with *node (from the
 * queue), 0 when both are empty, -1 when the next item is in a slot being
 * filled (poll again; hcomm_rq_empty() says 0 meanwhile).
 */
struct hcomm_rq_cons {
	struct hcomm_mpsc_node *held;	/* taken from the queue, not given */
	uint64_t mark;			/* the ring's tickets when it was */
};

static inline void hcomm_rq_push(struct hcomm_ring *r, struct hcomm_mpsc *q,
				 uint64_t *spill,
				 const struct hcomm_ring_item *it,
				 struct hcomm_mpsc_node *node)
{
	if (__atomic_load_n(spill, __ATOMIC_ACQUIRE) || hcomm_ring_push(r, it)) {
		__atomic_add_fetch(spill, 1, __ATOMIC_RELEASE);
		hcomm_mpsc_push(q, node);
	}
}

static inline int hcomm_rq_pop(struct hcomm_rq_cons *k, struct hcomm_ring *r,
			       struct hcomm_mpsc *q, uint64_t *spill,
			       struct hcomm_ring_item *it,
			       struct hcomm_mpsc_node **node)
{
	if (!k->held) {
		if (hcomm_ring_pop(r, it))
			return 1;
		k->held = hcomm_mpsc_pop(q);
		if (!k->held)
			return 0;
		k->mark = atomic_load_explicit(&r->enq, memory_order_acquire);
	}
	if ((int64_t)(k->mark - r->deq) > 0)
		return hcomm_ring_pop(r, it) ? 1 : -1;
	*node = k->held;
	k->held = NULL;
	__atomic_sub_fetch(spill, 1, __ATOMIC_RELEASE);
	return 2;
}

static inline int hcomm_rq_empty(const struct hcomm_rq_cons *k,
				 struct hcomm_ring *r, struct hcomm_mpsc *q)
{
	return !k->held && hcomm_ring_empty(r) && hcomm_mpsc_empty(q);
}

#endif /* LIBHCOMM_MPSC_H */
