/* SPDX-License-Identifier: MIT */
/*
 * libpypto internals: the Chase-Lev work-stealing deque, in the C11 form
 * of Le, Pop, Cohen, Zappa Nardelli, "Correct and Efficient Work-Stealing
 * for Weak Memory Models" (PPoPP 2013), figure 1.  Header-only: every
 * function is static inline.  No locks.
 *
 * One owner thread pushes and takes at the bottom (LIFO: the tile it made
 * ready last is the one whose inputs are hot in its cache); any thread
 * steals at the top (FIFO: the oldest, usually the largest piece of work).
 * The owner uses no read-modify-write except when it takes the last item;
 * a thief uses one CAS.
 *
 *   int pypto_deque_init(struct pypto_deque *q, unsigned int log_cap);
 *	0, or -1 with errno EINVAL (log_cap outside 1..30) / ENOMEM
 *   void pypto_deque_destroy(struct pypto_deque *q);
 *	no thread may use q any more; frees the current and retired arrays
 *   int pypto_deque_push(struct pypto_deque *q, uintptr_t v);   (owner)
 *	0, or -1 with errno ENOMEM when the array had to grow and could not
 *	(v was not pushed, the deque is unchanged)
 *   bool pypto_deque_take(struct pypto_deque *q, uintptr_t *v); (owner)
 *	the item pushed last, or false when empty
 *   int pypto_deque_steal(struct pypto_deque *q, uintptr_t *v); (any)
 *	1: *v is the oldest item; 0: empty; -1: lost a race with another
 *	thief or the owner (not empty a moment ago: the caller may retry)
 *   size_t pypto_deque_size(const struct pypto_deque *q);       (any)
 *	approximate (exact for the owner when no thief runs)
 *
 * Indices are signed 64-bit and only grow (2^63 pushes will not happen):
 * take() computes bottom - 1, which must compare below top on an empty
 * deque (with the paper's size_t, bottom 0 would wrap around).
 *
 * The array grows, never shrinks: when full the owner allocates one twice
 * the size, copies the live items and publishes it with a release store.
 * A thief that loaded the old array pointer may still read from it, so
 * the old array is kept (unchanged from then on) on a retired list that
 * destroy() frees; the retired arrays together are smaller than the
 * current one.
 */
#ifndef LIBPYPTO_DEQUE_H
#define LIBPYPTO_DEQUE_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef PYPTO_CACHELINE
#define PYPTO_CACHELINE	64
#endif

#define PYPTO_DEQUE_LOG_MIN	1U
#define PYPTO_DEQUE_LOG_MAX	30U	/* initial capacity */
#define PYPTO_DEQUE_GROW_MAX	40U	/* growth stops at 2^40 items */

struct pypto_deque_array {
	struct pypto_deque_array *next;	/* retired list (owner only) */
	size_t mask;			/* capacity - 1, capacity 2^n */
	/*
	 * Atomic (accessed relaxed) because a thief may read a slot while
	 * the owner rewrites it after a wrap-around; that thief's CAS then
	 * fails and the value is dropped, but a plain access would still be
	 * a data race.
	 */
	_Atomic uintptr_t slot[];
};

/*
 * top (CASed by thieves and by the owner's last take) and bottom (stored
 * by the owner on every push and take) 64 bytes apart, so that they are
 * never on one cache line.  Padded rather than aligned (as lib/hcomm_mpsc.h)
 * so that the struct needs no aligned allocation; the size is 128 so that
 * consecutive deques in an array do not share a line either.  array sits
 * with bottom: thieves read both, only the owner writes either.
 */
struct pypto_deque {
	_Atomic int64_t top;
	char pad_top[PYPTO_CACHELINE - sizeof(int64_t)];
	_Atomic int64_t bottom;
	_Atomic(struct pypto_deque_array *) array;
	struct pypto_deque_array *retired;	/* owner only */
	char pad_bottom[PYPTO_CACHELINE - sizeof(int64_t) - 2 * sizeof(void *)];
};

_Static_assert(offsetof(struct pypto_deque, bottom) -
	       offsetof(struct pypto_deque, top) >= PYPTO_CACHELINE,
	       "top and bottom must be a cache line apart");
_Static_assert(sizeof(struct pypto_deque) == 2 * PYPTO_CACHELINE,
	       "struct pypto_deque padding");

static inline struct pypto_deque_array *pypto_deque__array_new(size_t cap)
{
	struct pypto_deque_array *a;

	if (cap > (SIZE_MAX - sizeof(*a)) / sizeof(a->slot[0]))
		return NULL;
	a = malloc(sizeof(*a) + cap * sizeof(a->slot[0]));
	if (!a)
		return NULL;
	a->next = NULL;
	a->mask = cap - 1;
	return a;
}

static inline int pypto_deque_init(struct pypto_deque *q, unsigned int log_cap)
{
	struct pypto_deque_array *a;

	if (!q || log_cap < PYPTO_DEQUE_LOG_MIN ||
	    log_cap > PYPTO_DEQUE_LOG_MAX) {
		errno = EINVAL;
		return -1;
	}
	a = pypto_deque__array_new((size_t)1 << log_cap);
	if (!a) {
		errno = ENOMEM;
		return -1;
	}
	/* Plain initialisation: the deque is handed to the other threads
	 * by whatever starts them (pthread_create, a release store). */
	atomic_init(&q->top, 0);
	atomic_init(&q->bottom, 0);
	atomic_init(&q->array, a);
	q->retired = NULL;
	return 0;
}

static inline void pypto_deque_destroy(struct pypto_deque *q)
{
	struct pypto_deque_array *a, *next;

	if (!q)
		return;
	free(atomic_load_explicit(&q->array, memory_order_relaxed));
	atomic_store_explicit(&q->array, NULL, memory_order_relaxed);
	for (a = q->retired; a; a = next) {
		next = a->next;
		free(a);
	}
	q->retired = NULL;
}

/*
 * Owner: replace the full array a by one twice the size holding items
 * t..b-1 at the same indices.  Returns the new array or NULL.
 */
static inline struct pypto_deque_array *
pypto_deque__grow(struct pypto_deque *q, struct pypto_deque_array *a,
		  int64_t t, int64_t b)
{
	struct pypto_deque_array *n;
	int64_t i;

	if (a->mask + 1 >= (size_t)1 << PYPTO_DEQUE_GROW_MAX)
		return NULL;
	n = pypto_deque__array_new((a->mask + 1) * 2);
	if (!n)
		return NULL;
	for (i = t; i < b; i++)
		atomic_store_explicit(&n->slot[i & n->mask],
			atomic_load_explicit(&a->slot[i & a->mask],
					     memory_order_relaxed),
			memory_order_relaxed);
	/*
	 * Release: a thief that loads n (acquire, in steal()) sees the
	 * copies above.  A thief still holding a finds the same values there
	 * (a is never written again, hence retired rather than freed); which
	 * array it reads does not matter, only its CAS on top decides.
	 */
	atomic_store_explicit(&q->array, n, memory_order_release);
	a->next = q->retired;
	q->retired = a;
	return n;
}

static inline int pypto_deque_push(struct pypto_deque *q, uintptr_t v)
{
	struct pypto_deque_array *a;
	int64_t b, t;

	b = atomic_load_explicit(&q->bottom, memory_order_relaxed);
	/*
	 * Acquire (fig. 1, push): pairs with the thieves' CAS on top, so a
	 * thief's read of slot t happens before the owner reuses that slot
	 * after a wrap-around below.
	 */
	t = atomic_load_explicit(&q->top, memory_order_acquire);
	a = atomic_load_explicit(&q->array, memory_order_relaxed);
	if (b - t > (int64_t)a->mask) {
		a = pypto_deque__grow(q, a, t, b);
		if (!a) {
			errno = ENOMEM;
			return -1;
		}
	}
	atomic_store_explicit(&a->slot[b & a->mask], v, memory_order_relaxed);
	/*
	 * Fig. 1 has fence(release) then a relaxed store of bottom; a release
	 * store is the same for the only reader that relies on it (the
	 * thief's acquire load of bottom: it then sees the slot and whatever
	 * the owner wrote before pushing; take()'s later relaxed stores of
	 * bottom continue this store's release sequence, only the owner
	 * writes bottom) and ThreadSanitizer, which ignores fences,
	 * understands it.
	 */
	atomic_store_explicit(&q->bottom, b + 1, memory_order_release);
	return 0;
}

/*
 * gcc >= 12 warns (-Wtsan, an error under -Werror) that ThreadSanitizer
 * does not model the seq_cst fences of take() and steal().  It still
 * checks everything else, and top/bottom are atomics it never reports,
 * so a -fsanitize=thread build silences just that warning for these two.
 */
#if defined(__SANITIZE_THREAD__) && !defined(__clang__) && __GNUC__ >= 12
#define PYPTO_DEQUE_NO_WTSAN
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif

static inline bool pypto_deque_take(struct pypto_deque *q, uintptr_t *v)
{
	struct pypto_deque_array *a;
	int64_t b, t;
	bool got = true;

	b = atomic_load_explicit(&q->bottom, memory_order_relaxed) - 1;
	a = atomic_load_explicit(&q->array, memory_order_relaxed);
	/* Reserve slot b first: thieves that read bottom from now on stop
	 * short of it. */
	atomic_store_explicit(&q->bottom, b, memory_order_relaxed);
	/*
	 * seq_cst fence (fig. 1, take), paired with the one in steal(): the
	 * store of bottom above and the load of top below must not be
	 * reordered (store->load, which even x86 does).  In the total order
	 * of the two fences either the thief reads the new bottom or we read
	 * its incremented top; both missing each other (and both taking
	 * slot b) is impossible.
	 */
	atomic_thread_fence(memory_order_seq_cst);
	t = atomic_load_explicit(&q->top, memory_order_relaxed);
	if (t <= b) {
		*v = atomic_load_explicit(&a->slot[b & a->mask],
					  memory_order_relaxed);
		if (t == b) {
			/*
			 * The last item: thieves may be after it too, race
			 * them with the same CAS on top they use (seq_cst as
			 * in fig. 1; relaxed on failure: we then return
			 * nothing and read nothing more).
			 */
			if (!atomic_compare_exchange_strong_explicit(&q->top,
					&t, t + 1, memory_order_seq_cst,
					memory_order_relaxed))
				got = false;
			/* Empty now either way: top is b + 1. */
			atomic_store_explicit(&q->bottom, b + 1,
					      memory_order_relaxed);
		}
	} else {
		/* Was empty: undo the reservation. */
		got = false;
		atomic_store_explicit(&q->bottom, b + 1, memory_order_relaxed);
	}
	return got;
}

static inline int pypto_deque_steal(struct pypto_deque *q, uintptr_t *v)
{
	struct pypto_deque_array *a;
	uintptr_t x;
	int64_t t, b;

	/* Acquire (fig. 1, steal): see what the thief that advanced top
	 * to t saw (keeps successive steals coherent). */
	t = atomic_load_explicit(&q->top, memory_order_acquire);
	/*
	 * seq_cst fence (fig. 1, steal), paired with take()'s: top must be
	 * read before bottom, and in the fences' total order either take()
	 * sees our top (then our CAS, if we get there, is the one that
	 * loses or wins the last item fairly) or we see its decremented
	 * bottom and stop.
	 */
	atomic_thread_fence(memory_order_seq_cst);
	/* Acquire: pairs with push()'s release store of bottom, so slot t
	 * (and what the owner wrote before pushing it) is visible. */
	b = atomic_load_explicit(&q->bottom, memory_order_acquire);
	if (t >= b)
		return 0;
	/*
	 * Acquire (the paper's consume): the copies made by a grow are
	 * visible.  Loaded after bottom, so it is at least the array slot t
	 * was pushed into, or a newer copy of it.
	 */
	a = atomic_load_explicit(&q->array, memory_order_acquire);
	x = atomic_load_explicit(&a->slot[t & a->mask], memory_order_relaxed);
	/*
	 * One CAS claims item t against other thieves and the owner's last
	 * take (seq_cst as in fig. 1; it also releases our read of slot t to
	 * push()'s acquire load of top before the slot is reused).
	 */
	if (!atomic_compare_exchange_strong_explicit(&q->top, &t, t + 1,
			memory_order_seq_cst, memory_order_relaxed))
		return -1;
	*v = x;
	return 1;
}

#ifdef PYPTO_DEQUE_NO_WTSAN
#pragma GCC diagnostic pop
#undef PYPTO_DEQUE_NO_WTSAN
#endif

static inline size_t pypto_deque_size(const struct pypto_deque *q)
{
	/* Casts: C11 atomic loads take a non-const pointer (until C17's
	 * DR 459 on some compilers); these loads do not write. */
	struct pypto_deque *w = (struct pypto_deque *)q;
	int64_t b = atomic_load_explicit(&w->bottom, memory_order_relaxed);
	int64_t t = atomic_load_explicit(&w->top, memory_order_relaxed);

	/* Negative while a take() of an empty deque is under way. */
	return b > t ? (size_t)(b - t) : 0;
}

#endif /* LIBPYPTO_DEQUE_H */
