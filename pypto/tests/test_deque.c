/* SPDX-License-Identifier: MIT */
/*
 * Host test of the work-stealing deque (pypto/deque.h).
 *
 * Single thread: argument checks, LIFO take, FIFO steal, growth from a
 * capacity of 2 to over a million items, growth with wrapped indices,
 * a failed growth (malloc made to fail) leaving the deque unchanged, and
 * a random mix of push/take/steal against a reference model.
 *
 * Concurrent (one owner, 1..3 thieves): every item is consumed exactly
 * once (a per-item counter), and whoever consumes it sees the payload the
 * owner wrote before pushing it (the push/steal release/acquire pairing):
 *  - mixed: the owner pushes 4M items taking some back;
 *  - last item: the deque holds 0..2 items, the owner takes the last one
 *    while thieves steal it;
 *  - growth: deques start at capacity 2 and grow while thieves steal;
 *  - empty: steals of an empty deque return 0, never -1.
 * Lost races (steal returning -1) are only reported.
 *
 * Usage: test_deque [divisor]   (divides the item counts, for sanitizers)
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Route the deque's allocations through a hook that can fail. */
static bool fail_malloc;
static void *test_malloc(size_t n)
{
	return fail_malloc ? NULL : (malloc)(n);
}
#define malloc test_malloc
#include "deque.h"
#undef malloc

#include "tap.h"

#define MAX_THIEVES	3

static unsigned long divisor = 1;

static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Distinct, non-trivial values for single-thread checks. */
static uintptr_t val(uint64_t i)
{
	return (uintptr_t)(i * 0x9e3779b97f4a7c15ULL + 1);
}

static size_t cap_of(struct pypto_deque *q)
{
	return atomic_load_explicit(&q->array, memory_order_relaxed)->mask + 1;
}

static unsigned int retired_of(struct pypto_deque *q)
{
	struct pypto_deque_array *a;
	unsigned int n = 0;

	for (a = q->retired; a; a = a->next)
		n++;
	return n;
}

/* ------------------------------------------------------------------ */
/* Single thread                                                      */
/* ------------------------------------------------------------------ */

static void test_args(void)
{
	struct pypto_deque q;
	uintptr_t v = 77;

	errno = 0;
	ok(pypto_deque_init(&q, 0) == -1 && errno == EINVAL,
	   "init log_cap 0 -> -1 EINVAL");
	errno = 0;
	ok(pypto_deque_init(&q, 31) == -1 && errno == EINVAL,
	   "init log_cap 31 -> -1 EINVAL");
	ok(pypto_deque_init(NULL, 4) == -1, "init NULL -> -1");
	fail_malloc = true;
	errno = 0;
	ok(pypto_deque_init(&q, 4) == -1 && errno == ENOMEM,
	   "init without memory -> -1 ENOMEM");
	fail_malloc = false;
	pypto_deque_destroy(NULL);

	ok(pypto_deque_init(&q, 1) == 0 && cap_of(&q) == 2,
	   "init log_cap 1: capacity 2");
	ok(pypto_deque_size(&q) == 0, "new deque: size 0");
	ok(!pypto_deque_take(&q, &v) && v == 77, "take of empty: false, *v kept");
	ok(pypto_deque_steal(&q, &v) == 0 && v == 77,
	   "steal of empty: 0, *v kept");
	ok(!pypto_deque_take(&q, &v) && pypto_deque_size(&q) == 0,
	   "take of empty again leaves size 0");
	pypto_deque_destroy(&q);
	pypto_deque_destroy(&q);	/* a second destroy is harmless */
	ok(atomic_load(&q.array) == NULL && q.retired == NULL,
	   "destroy clears the arrays");
}

static void test_lifo_fifo_growth(void)
{
	const uint64_t n = (1ULL << 20) + 12345;
	struct pypto_deque q;
	uint64_t i, bad = 0;
	uintptr_t v;
	bool okp = true;

	ok(pypto_deque_init(&q, 1) == 0, "init log_cap 1 for growth");
	for (i = 0; i < n; i++)
		okp &= pypto_deque_push(&q, val(i)) == 0;
	ok(okp, "pushed %llu items from capacity 2", (unsigned long long)n);
	ok(pypto_deque_size(&q) == n, "size %zu == %llu",
	   pypto_deque_size(&q), (unsigned long long)n);
	ok(cap_of(&q) == (1U << 21) && retired_of(&q) == 20,
	   "capacity %zu (2^21), %u retired arrays (20 doublings)",
	   cap_of(&q), retired_of(&q));
	for (i = n; i-- > 0;) {
		if (!pypto_deque_take(&q, &v) || v != val(i))
			bad++;
	}
	ok(bad == 0, "take returned every item in LIFO order (%llu wrong)",
	   (unsigned long long)bad);
	ok(!pypto_deque_take(&q, &v) && pypto_deque_size(&q) == 0,
	   "then empty");

	/* Same deque (already large, top and bottom moved on): FIFO. */
	okp = true;
	for (i = 0; i < n; i++)
		okp &= pypto_deque_push(&q, val(i)) == 0;
	bad = 0;
	for (i = 0; i < n; i++) {
		if (pypto_deque_steal(&q, &v) != 1 || v != val(i))
			bad++;
	}
	ok(okp && bad == 0,
	   "steal returned every item in FIFO order (%llu wrong)",
	   (unsigned long long)bad);
	ok(pypto_deque_steal(&q, &v) == 0 && !pypto_deque_take(&q, &v),
	   "then empty for steal and take");
	ok(retired_of(&q) == 20, "no growth when refilled to the same size");
	pypto_deque_destroy(&q);
}

/* Growth when the live range wraps around the end of the array. */
static void test_wrap_growth(void)
{
	struct pypto_deque q;
	uintptr_t v, got[16];
	unsigned int i, n = 0;
	int r = 0;

	ok(pypto_deque_init(&q, 2) == 0, "init log_cap 2");
	for (i = 0; i < 3; i++)
		r |= pypto_deque_push(&q, 100 + i);
	for (i = 0; i < 2; i++)
		r |= pypto_deque_steal(&q, &v) != 1 || v != 100 + i;
	/* top 2, bottom 3; three more fill indices 3..5 = slots 3,0,1:
	 * full, and the live range 2..5 wraps around the end. */
	for (i = 3; i < 6; i++)
		r |= pypto_deque_push(&q, 100 + i);
	ok(r == 0 && cap_of(&q) == 4 && pypto_deque_size(&q) == 4,
	   "wrapped and full at capacity 4 (size %zu)", pypto_deque_size(&q));
	r = pypto_deque_push(&q, 106);
	ok(r == 0 && cap_of(&q) == 8 && retired_of(&q) == 1 &&
	   pypto_deque_size(&q) == 5,
	   "push into the full wrapped deque grows it to 8");
	/* Steal two (FIFO), take the rest (LIFO). */
	while (n < 2 && pypto_deque_steal(&q, &v) == 1)
		got[n++] = v;
	while (n < 16 && pypto_deque_take(&q, &v))
		got[n++] = v;
	ok(n == 5 && got[0] == 102 && got[1] == 103 && got[2] == 106 &&
	   got[3] == 105 && got[4] == 104,
	   "items kept their order across the wrapped growth (n %u)", n);
	pypto_deque_destroy(&q);
}

/* A growth whose allocation fails pushes nothing and changes nothing. */
static void test_grow_failure(void)
{
	struct pypto_deque q;
	uintptr_t v;
	unsigned int i, n = 0;
	bool order = true;
	int r;

	ok(pypto_deque_init(&q, 2) == 0, "init log_cap 2 for the failure");
	for (i = 0; i < 4; i++)
		pypto_deque_push(&q, 10 + i);
	fail_malloc = true;
	errno = 0;
	r = pypto_deque_push(&q, 99);
	fail_malloc = false;
	ok(r == -1 && errno == ENOMEM, "push needing growth without memory: "
	   "-1 ENOMEM");
	ok(pypto_deque_size(&q) == 4 && cap_of(&q) == 4 && retired_of(&q) == 0,
	   "deque unchanged (size %zu, capacity %zu)", pypto_deque_size(&q),
	   cap_of(&q));
	ok(pypto_deque_push(&q, 14) == 0 && cap_of(&q) == 8,
	   "the next push grows it");
	while (pypto_deque_steal(&q, &v) == 1) {
		order &= v == 10 + n;
		n++;
	}
	ok(n == 5 && order, "items 10..14 in order, 99 absent");
	pypto_deque_destroy(&q);
}

/* Random single-thread mix against a model (a plain array window). */
static void test_model(void)
{
	const uint64_t ops = 2000000 / divisor;
	struct pypto_deque q;
	uintptr_t *model, v;
	uint64_t s = 12345, i, next = 1, lo = 0, hi = 0, bad = 0;
	uint64_t pushes = 0, takes = 0, steals = 0;

	model = calloc(ops + 1, sizeof(*model));
	if (!model || pypto_deque_init(&q, 1)) {
		ok(0, "model test setup");
		free(model);
		return;
	}
	for (i = 0; i < ops; i++) {
		uint64_t r = rnd(&s) % 100;
		/* Phases that favour growing and shrinking in turn. */
		bool grow = (i / 50000) % 2 == 0;

		if (r < (grow ? 60U : 34U)) {
			if (pypto_deque_push(&q, next))
				bad++;
			model[hi++] = next++;
			pushes++;
		} else if (r < (grow ? 80U : 67U)) {
			bool got = pypto_deque_take(&q, &v);

			if (got != (hi > lo) || (got && v != model[--hi]))
				bad++;
			takes += got;
		} else {
			int got = pypto_deque_steal(&q, &v);

			if (got != (hi > lo ? 1 : 0) ||
			    (got == 1 && v != model[lo++]))
				bad++;
			steals += got == 1;
		}
		if (pypto_deque_size(&q) != hi - lo)
			bad++;
	}
	ok(bad == 0, "%llu random ops (%llu push, %llu take, %llu steal, "
	   "capacity %zu) match the model (%llu mismatches)",
	   (unsigned long long)ops, (unsigned long long)pushes,
	   (unsigned long long)takes, (unsigned long long)steals, cap_of(&q),
	   (unsigned long long)bad);
	pypto_deque_destroy(&q);
	free(model);
}

/* ------------------------------------------------------------------ */
/* Concurrent                                                         */
/* ------------------------------------------------------------------ */

/* A short busy delay: gives thieves a window onto the items. */
static void spin(unsigned int n)
{
	while (n--)
		__asm__ __volatile__("" ::: "memory");
}

struct shared {
	/* Thieves steal from *cur (the growth test moves it on). */
	_Atomic(struct pypto_deque *) cur;
	_Atomic int done;
	uint64_t n;			/* items 0..n-1 */
	uint32_t *payload;		/* plain: written before push */
	_Atomic uint32_t *seen;		/* consumptions per item */
	_Atomic uint64_t bad;		/* bad value or payload */
	_Atomic unsigned int running;	/* thieves started */
};

struct thief {
	pthread_t th;
	struct shared *sh;
	uint64_t got, lost, empty;
};

static uint32_t payload_of(uint64_t i)
{
	return (uint32_t)(i * 2654435761U) ^ 0xa5a5a5a5U;
}

/* Item i travels as (i << 1) | 1: never 0, and a torn or stale slot
 * would show as an even or out-of-range value. */
static uintptr_t item(uint64_t i)
{
	return (uintptr_t)(i << 1) | 1;
}

static void consume(struct shared *sh, uintptr_t v)
{
	uint64_t i = v >> 1;

	if (!(v & 1) || i >= sh->n) {
		atomic_fetch_add_explicit(&sh->bad, 1, memory_order_relaxed);
		return;
	}
	/* Plain read: race-free only if push/steal order it after the
	 * owner's write (ThreadSanitizer checks this). */
	if (sh->payload[i] != payload_of(i))
		atomic_fetch_add_explicit(&sh->bad, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sh->seen[i], 1, memory_order_relaxed);
}

static void *thief_main(void *arg)
{
	struct thief *t = arg;
	struct shared *sh = t->sh;
	unsigned int idle = 0;
	uintptr_t v;

	atomic_fetch_add(&sh->running, 1);
	for (;;) {
		/* done read before the steal: an empty steal after it
		 * means nothing more will come. */
		int done = atomic_load_explicit(&sh->done,
						memory_order_acquire);
		struct pypto_deque *q = atomic_load_explicit(&sh->cur,
						memory_order_acquire);
		int r = pypto_deque_steal(q, &v);

		if (r == 1) {
			consume(sh, v);
			t->got++;
			idle = 0;
		} else if (r < 0) {
			t->lost++;
		} else {
			t->empty++;
			if (done)
				break;
			/* 2 cores, up to 4 threads: let the owner run. */
			if (++idle % 64 == 0)
				sched_yield();
		}
	}
	return NULL;
}

static bool shared_init(struct shared *sh, uint64_t n)
{
	memset(sh, 0, sizeof(*sh));
	sh->n = n;
	sh->payload = (malloc)(n * sizeof(*sh->payload));
	sh->seen = calloc(n, sizeof(*sh->seen));
	return sh->payload && sh->seen;
}

static void shared_free(struct shared *sh)
{
	free(sh->payload);
	free((void *)sh->seen);
}

static int start_thieves(struct shared *sh, struct thief *t, unsigned int nt)
{
	unsigned int i;

	for (i = 0; i < nt; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		t[i].sh = sh;
		if (pthread_create(&t[i].th, NULL, thief_main, &t[i])) {
			atomic_store(&sh->done, 1);
			while (i-- > 0)
				pthread_join(t[i].th, NULL);
			return -1;
		}
	}
	/* Let them all be stealing before the owner starts (else on two
	 * cores the owner may be done before a thief ever runs). */
	while (atomic_load(&sh->running) < nt)
		sched_yield();
	return 0;
}

static void join_thieves(struct shared *sh, struct thief *t, unsigned int nt)
{
	unsigned int i;

	atomic_store_explicit(&sh->done, 1, memory_order_release);
	for (i = 0; i < nt; i++)
		pthread_join(t[i].th, NULL);
}

/* Owner side: publish item i (payload first). */
static int owner_push(struct shared *sh, struct pypto_deque *q, uint64_t i)
{
	sh->payload[i] = payload_of(i);
	return pypto_deque_push(q, item(i));
}

static void check(const char *what, unsigned int nt, struct shared *sh,
		  struct thief *t, uint64_t owner_got, uint64_t push_fail)
{
	uint64_t i, zero = 0, multi = 0, stolen = 0, lost = 0, empty = 0;
	unsigned int k;

	for (i = 0; i < sh->n; i++) {
		uint32_t c = atomic_load_explicit(&sh->seen[i],
						  memory_order_relaxed);
		zero += c == 0;
		multi += c > 1;
	}
	for (k = 0; k < nt; k++) {
		stolen += t[k].got;
		lost += t[k].lost;
		empty += t[k].empty;
	}
	ok(push_fail == 0 && zero == 0 && multi == 0 &&
	   atomic_load(&sh->bad) == 0 && owner_got + stolen == sh->n,
	   "%s, %u thie%s: %llu items each consumed once (owner %llu, "
	   "stolen %llu; missing %llu, repeated %llu, bad %llu)",
	   what, nt, nt == 1 ? "f" : "ves", (unsigned long long)sh->n,
	   (unsigned long long)owner_got, (unsigned long long)stolen,
	   (unsigned long long)zero, (unsigned long long)multi,
	   (unsigned long long)atomic_load(&sh->bad));
	printf("# %s, %u thieves: steals lost a race %llu times, found it "
	       "empty %llu times\n", what, nt, (unsigned long long)lost,
	       (unsigned long long)empty);
}

/* Owner pushes n items, taking some back on the way, then drains. */
static void test_mixed(unsigned int nt)
{
	struct pypto_deque q;
	struct shared sh;
	struct thief t[MAX_THIEVES];
	uint64_t i, s = 0x1234567 + nt, owner_got = 0, fail = 0;
	uintptr_t v;

	if (!shared_init(&sh, (4ULL << 20) / divisor) ||
	    pypto_deque_init(&q, 6)) {
		ok(0, "mixed setup");
		shared_free(&sh);
		return;
	}
	atomic_store(&sh.cur, &q);
	if (start_thieves(&sh, t, nt)) {
		ok(0, "mixed: pthread_create");
		goto out;
	}
	for (i = 0; i < sh.n; i++) {
		uint64_t r = rnd(&s);

		fail += owner_push(&sh, &q, i) != 0;
		/* Take one back now and then, a run of them rarely. */
		if (r % 4 == 0 && pypto_deque_take(&q, &v)) {
			consume(&sh, v);
			owner_got++;
		}
		if ((r >> 8) % 1024 == 0) {
			unsigned int k = (r >> 20) % 256;

			while (k-- && pypto_deque_take(&q, &v)) {
				consume(&sh, v);
				owner_got++;
			}
		}
	}
	while (pypto_deque_take(&q, &v)) {
		consume(&sh, v);
		owner_got++;
	}
	join_thieves(&sh, t, nt);
	check("mixed", nt, &sh, t, owner_got, fail);
out:
	pypto_deque_destroy(&q);
	shared_free(&sh);
}

/*
 * The deque holds 0..2 items: the owner's take of the last item races
 * the thieves' steals of it (the CAS on top in take()).
 */
static void test_last_item(unsigned int nt)
{
	struct pypto_deque q;
	struct shared sh;
	struct thief t[MAX_THIEVES];
	uint64_t i = 0, s = 0x7654321 + nt, owner_got = 0, fail = 0;
	uint64_t take_empty = 0, over = 0;
	unsigned int k;
	uintptr_t v;

	if (!shared_init(&sh, (2ULL << 20) / divisor) ||
	    pypto_deque_init(&q, 1)) {
		ok(0, "last-item setup");
		shared_free(&sh);
		return;
	}
	atomic_store(&sh.cur, &q);
	if (start_thieves(&sh, t, nt)) {
		ok(0, "last-item: pthread_create");
		goto out;
	}
	while (i < sh.n) {
		uint64_t r = rnd(&s);
		/* The owner's size over-estimates (top may be stale): at
		 * most 2 items after these pushes. */
		size_t sz = pypto_deque_size(&q);
		unsigned int m = sz == 0 ? 1 + r % 2 : sz == 1 ? 1 : 0;

		while (m-- && i < sh.n) {
			fail += owner_push(&sh, &q, i) != 0;
			i++;
		}
		switch ((r >> 8) % 4) {
		case 0:		/* leave it to the thieves for a while */
			for (k = 0; k < 4096 && pypto_deque_size(&q); k++)
				if (k % 64 == 63)
					sched_yield();
			break;
		case 1:		/* take one */
			spin((r >> 16) % 256);
			if (pypto_deque_take(&q, &v)) {
				consume(&sh, v);
				owner_got++;
			} else {
				take_empty++;
			}
			break;
		default:	/* take all */
			spin((r >> 16) % 256);
			while (pypto_deque_take(&q, &v)) {
				consume(&sh, v);
				owner_got++;
			}
			take_empty++;
			break;
		}
		if (pypto_deque_size(&q) > 2)
			over++;
	}
	while (pypto_deque_take(&q, &v)) {
		consume(&sh, v);
		owner_got++;
	}
	join_thieves(&sh, t, nt);
	check("last item", nt, &sh, t, owner_got, fail);
	ok(over == 0, "last item, %u thieves: never more than 2 items", nt);
	printf("# last item, %u thieves: owner's take found it empty %llu "
	       "times\n", nt, (unsigned long long)take_empty);
out:
	pypto_deque_destroy(&q);
	shared_free(&sh);
}

/*
 * Growth under theft: a series of deques starting at capacity 2; the
 * owner fills each with bursts (so it doubles again and again while the
 * thieves steal from it), then drains it and moves the thieves on.  The
 * drained deques stay alive until the thieves are joined.
 */
static void test_growth(unsigned int nt)
{
	const unsigned int rounds = 128;
	const uint64_t per = (1ULL << 14) / (divisor > 16 ? 16 : divisor);
	struct pypto_deque *qs;
	struct shared sh;
	struct thief t[MAX_THIEVES];
	uint64_t i = 0, s = 0xabcdef + nt, owner_got = 0, fail = 0;
	unsigned int rd, inited = 0, grown = 0, retired = 0;
	uintptr_t v;

	qs = calloc(rounds, sizeof(*qs));
	if (!qs || !shared_init(&sh, rounds * per)) {
		ok(0, "growth setup");
		free(qs);
		shared_free(&sh);
		return;
	}
	for (rd = 0; rd < rounds; rd++) {
		if (pypto_deque_init(&qs[rd], 1))
			break;
		inited++;
	}
	if (inited < rounds) {
		ok(0, "growth: init");
		goto out;
	}
	atomic_store(&sh.cur, &qs[0]);
	if (start_thieves(&sh, t, nt)) {
		ok(0, "growth: pthread_create");
		goto out;
	}
	for (rd = 0; rd < rounds; rd++) {
		struct pypto_deque *q = &qs[rd];
		uint64_t end = (rd + 1) * per;

		atomic_store_explicit(&sh.cur, q, memory_order_release);
		while (i < end) {
			/* Bursts of up to 4096 pushes, then a few takes. */
			uint64_t r = rnd(&s), k = 1 + r % 4096;
			unsigned int tk = (r >> 16) % 8;

			while (k-- && i < end) {
				fail += owner_push(&sh, q, i) != 0;
				i++;
			}
			while (tk-- && pypto_deque_take(q, &v)) {
				consume(&sh, v);
				owner_got++;
			}
		}
		if (cap_of(q) > 2)
			grown++;
		retired += retired_of(q);
		while (pypto_deque_take(q, &v)) {
			consume(&sh, v);
			owner_got++;
		}
	}
	join_thieves(&sh, t, nt);
	check("growth", nt, &sh, t, owner_got, fail);
	ok(grown == rounds, "growth, %u thieves: %u of %u deques grew, %u "
	   "doublings in all", nt, grown, rounds, retired);
out:
	for (rd = 0; rd < inited; rd++)
		pypto_deque_destroy(&qs[rd]);
	free(qs);
	shared_free(&sh);
}

/* Empty deque: steals return 0 (never -1: no CAS is tried) while the
 * owner's takes of nothing move bottom below top and back. */
struct empty_arg {
	struct pypto_deque *q;
	_Atomic int *stop;
	uint64_t zero, other;
};

static void *empty_thief(void *p)
{
	struct empty_arg *a = p;
	uintptr_t v;

	while (!atomic_load_explicit(a->stop, memory_order_relaxed) ||
	       a->zero < 1000) {
		if (pypto_deque_steal(a->q, &v) == 0)
			a->zero++;
		else
			a->other++;
		if (a->zero % 256 == 0)
			sched_yield();
	}
	return NULL;
}

static void test_empty(void)
{
	struct pypto_deque q;
	struct empty_arg a[MAX_THIEVES];
	pthread_t th[MAX_THIEVES];
	_Atomic int stop = 0;
	unsigned int i, started = 0;
	uint64_t takes = 200000 / divisor, tfalse = 0, zero = 0, other = 0;
	uintptr_t v;

	if (pypto_deque_init(&q, 3)) {
		ok(0, "empty setup");
		return;
	}
	for (i = 0; i < MAX_THIEVES; i++) {
		a[i] = (struct empty_arg){ .q = &q, .stop = &stop };
		if (pthread_create(&th[i], NULL, empty_thief, &a[i]))
			break;
		started++;
	}
	for (i = 0; i < takes; i++)
		tfalse += !pypto_deque_take(&q, &v);
	atomic_store(&stop, 1);
	for (i = 0; i < started; i++) {
		pthread_join(th[i], NULL);
		zero += a[i].zero;
		other += a[i].other;
	}
	ok(started == MAX_THIEVES && tfalse == takes && other == 0 &&
	   zero >= 1000ULL * MAX_THIEVES,
	   "empty deque: %llu steals all returned 0, %llu takes all false",
	   (unsigned long long)zero, (unsigned long long)takes);
	ok(pypto_deque_size(&q) == 0, "still empty");
	pypto_deque_destroy(&q);
}

int main(int argc, char **argv)
{
	unsigned int nt;

	if (argc > 1) {
		divisor = strtoul(argv[1], NULL, 0);
		if (divisor < 1 || divisor > 1024) {
			fprintf(stderr, "usage: %s [divisor 1..1024]\n",
				argv[0]);
			return 2;
		}
	}
	test_args();
	test_lifo_fifo_growth();
	test_wrap_growth();
	test_grow_failure();
	test_model();
	for (nt = 1; nt <= MAX_THIEVES; nt++) {
		test_mixed(nt);
		test_last_item(nt);
		test_growth(nt);
	}
	test_empty();
	return tap_done("pypto-deque");
}
