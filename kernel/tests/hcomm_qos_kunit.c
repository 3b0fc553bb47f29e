// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite for the QoS scheduler of the transfer engine (hcomm_qos.c):
 * target shares, the byte split over many simulated chunks, fairness over
 * short windows, tie-breaking, activation and parameter changes; then the
 * user level: users (uid) share the engine by weight before their
 * contexts share the user's part, debt stays with the user, and min_rate
 * admission is per user.
 *
 * Linked into hcomm_kunit.ko (which imports the KUnit test namespace);
 * needs hcomm.ko loaded first.
 */
#include <kunit/test.h>
#include <linux/kernel.h>
#include <linux/math64.h>
#include <linux/sizes.h>
#include <linux/string.h>
#include <linux/uidgid.h>
#include <linux/slab.h>

#include "../hcomm_qos.h"

#define QOS_CHUNK	(256 * 1024ULL)
#define QOS_CHUNKS	100000
#define QOS_NR		4
/* Allowed error of a long-run split, parts per million of the bytes. */
#define QOS_TOL		1000
/* Allowed error of a 100-pick window, in chunks. */
#define QOS_WINDOW	100
#define QOS_WINDOW_TOL	2
#define QOS_PCT		(HCOMM_QOS_SCALE / 100)

struct qos_sim {
	struct hcomm_qos_sched s;
	struct hcomm_qos_class c[QOS_NR];
	unsigned int n;
};

/* @n default classes, none active yet. */
static void qos_sim_init(struct qos_sim *q, unsigned int n)
{
	unsigned int i;

	hcomm_qos_sched_init(&q->s);
	for (i = 0; i < QOS_NR; i++)
		hcomm_qos_class_init(&q->c[i]);
	q->n = n;
}

static void qos_activate_all(struct qos_sim *q)
{
	unsigned int i;

	for (i = 0; i < q->n; i++)
		hcomm_qos_activate(&q->s, &q->c[i]);
}

static int qos_index(struct kunit *test, struct qos_sim *q,
		     struct hcomm_qos_class *c)
{
	KUNIT_ASSERT_NOT_NULL(test, c);
	KUNIT_ASSERT_TRUE(test, c >= &q->c[0] && c < &q->c[q->n]);
	KUNIT_ASSERT_TRUE(test, c->active);
	return c - q->c;
}

/* One chunk: pick, charge; returns the index of the class served. */
static int qos_step(struct kunit *test, struct qos_sim *q, u64 bytes)
{
	struct hcomm_qos_class *c = hcomm_qos_pick(&q->s);
	int i = qos_index(test, q, c);

	hcomm_qos_charge(&q->s, c, bytes);
	return i;
}

/* @chunks chunks of QOS_CHUNK bytes; adds each class's bytes to @bytes. */
static void qos_run(struct kunit *test, struct qos_sim *q,
		    unsigned int chunks, u64 *bytes)
{
	unsigned int k;

	for (k = 0; k < chunks; k++)
		bytes[qos_step(test, q, QOS_CHUNK)] += QOS_CHUNK;
}

/* Each class's part of the bytes, in parts per million. */
static void qos_split(const u64 *bytes, unsigned int n, u32 *ppm)
{
	u64 total = 0;
	unsigned int i;

	for (i = 0; i < n; i++)
		total += bytes[i];
	for (i = 0; i < n; i++)
		ppm[i] = total ? div64_u64(bytes[i] * HCOMM_QOS_SCALE, total) : 0;
}

static void qos_expect_split(struct kunit *test, const u64 *bytes,
			     unsigned int n, const u32 *want)
{
	u32 got[QOS_NR];
	unsigned int i;

	qos_split(bytes, n, got);
	for (i = 0; i < n; i++) {
		KUNIT_EXPECT_LE_MSG(test, got[i], want[i] + QOS_TOL,
				    "class %u: %u ppm, want %u", i, got[i],
				    want[i]);
		KUNIT_EXPECT_GE_MSG(test, got[i] + QOS_TOL, want[i],
				    "class %u: %u ppm, want %u", i, got[i],
				    want[i]);
	}
}

/* ---------------------------------------------------------------- splits */

struct qos_split_case {
	const char *name;
	unsigned int n;
	u32 min[QOS_NR], max[QOS_NR], prio[QOS_NR];
	u32 want[QOS_NR];	/* expected share, ppm */
};

static const struct qos_split_case qos_split_cases[] = {
	{ "two default", 2, { 0, 0 }, { 100, 100 }, { 0, 0 },
	  { 500000, 500000 } },
	{ "two default, different priority", 2, { 0, 0 }, { 100, 100 },
	  { 7, 0 }, { 500000, 500000 } },
	/* weights 60 : 1 */
	{ "min 60 vs default", 2, { 60, 0 }, { 100, 100 }, { 0, 0 },
	  { 983607, 16393 } },
	{ "max 25 vs default", 2, { 0, 0 }, { 25, 100 }, { 0, 0 },
	  { 250000, 750000 } },
	{ "min 30, min 30, default", 3, { 30, 30, 0 }, { 100, 100, 100 },
	  { 0, 0, 0 }, { 491803, 491803, 16393 } },
	/* 50:20:1 caps the first at 55, then 20:1 of 45 caps the second */
	{ "three mixed", 3, { 50, 20, 0 }, { 55, 35, 100 }, { 0, 3, 5 },
	  { 550000, 350000, 100000 } },
	{ "four mixed", 4, { 40, 20, 0, 0 }, { 45, 30, 100, 100 },
	  { 1, 2, 3, 4 }, { 450000, 300000, 125000, 125000 } },
	{ "capped and min vs default", 3, { 10, 0, 0 }, { 10, 40, 100 },
	  { 0, 0, 0 }, { 100000, 400000, 500000 } },
	/* min_rates plus one per default class exceed 100: floors bind */
	{ "min 99 and two default", 3, { 99, 0, 0 }, { 100, 100, 100 },
	  { 0, 0, 0 }, { 990000, 5000, 5000 } },
	{ "min 100 and default", 2, { 100, 0 }, { 100, 100 }, { 0, 0 },
	  { 999999, 1 } },
	/* every class capped: the caps scaled up to fill the engine */
	{ "single class max 20", 1, { 0 }, { 20 }, { 0 }, { 1000000 } },
	{ "max 20 and max 30", 2, { 0, 0 }, { 20, 30 }, { 0, 0 },
	  { 400000, 600000 } },
	{ "caps adding up to 100", 2, { 10, 0 }, { 40, 60 }, { 0, 0 },
	  { 400000, 600000 } },
};

static void qos_split_desc(const struct qos_split_case *c, char *desc)
{
	strscpy(desc, c->name, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(qos_split, qos_split_cases, qos_split_desc);

static void qos_sim_setup(struct qos_sim *q, const struct qos_split_case *p)
{
	unsigned int i;

	qos_sim_init(q, p->n);
	for (i = 0; i < p->n; i++)
		hcomm_qos_set(&q->s, &q->c[i], p->min[i], p->max[i], p->prio[i]);
	qos_activate_all(q);
}

/*
 * 100000 chunks of 256 KiB: the byte split matches the target shares, no
 * class gets less than its min_rate, and none gets more than its max_rate
 * unless every class is at its max_rate.
 */
static void hcomm_qos_split(struct kunit *test)
{
	const struct qos_split_case *p = test->param_value;
	u32 got[QOS_NR], sum_max = 0;
	u64 bytes[QOS_NR] = {};
	struct qos_sim q;
	unsigned int i;

	qos_sim_setup(&q, p);
	for (i = 0; i < p->n; i++) {
		sum_max += p->max[i];
		KUNIT_EXPECT_EQ_MSG(test, hcomm_qos_share(&q.s, &q.c[i]),
				    DIV_ROUND_CLOSEST(p->want[i], QOS_PCT),
				    "class %u", i);
		KUNIT_EXPECT_GE(test, q.c[i].share, 1);
	}
	qos_run(test, &q, QOS_CHUNKS, bytes);
	qos_expect_split(test, bytes, p->n, p->want);

	qos_split(bytes, p->n, got);
	for (i = 0; i < p->n; i++) {
		KUNIT_EXPECT_EQ(test, q.c[i].served, bytes[i]);
		KUNIT_EXPECT_GE_MSG(test, got[i] + QOS_TOL, p->min[i] * QOS_PCT,
				    "class %u below its min_rate", i);
		if (sum_max >= 100)
			KUNIT_EXPECT_LE_MSG(test, got[i],
					    p->max[i] * QOS_PCT + QOS_TOL,
					    "class %u above its max_rate", i);
	}
}

/*
 * Over every window of 100 consecutive picks, each class's chunk count is
 * within QOS_WINDOW_TOL chunks of its share of the window.
 */
static void hcomm_qos_window(struct kunit *test)
{
	const struct qos_split_case *p = test->param_value;
	unsigned int count[QOS_NR] = {}, i, k;
	u8 ring[QOS_WINDOW];
	struct qos_sim q;

	qos_sim_setup(&q, p);
	for (k = 0; k < 20000; k++) {
		i = qos_step(test, &q, QOS_CHUNK);
		if (k >= QOS_WINDOW)
			count[ring[k % QOS_WINDOW]]--;
		ring[k % QOS_WINDOW] = i;
		count[i]++;
		if (k + 1 < QOS_WINDOW)
			continue;
		for (i = 0; i < p->n; i++) {
			u32 want = p->want[i] * QOS_WINDOW;	/* ppm-chunks */
			u32 have = count[i] * HCOMM_QOS_SCALE;
			u32 tol = QOS_WINDOW_TOL * HCOMM_QOS_SCALE;

			KUNIT_ASSERT_LE_MSG(test, have, want + tol,
					    "class %u: %u of %u picks ending at %u",
					    i, count[i], QOS_WINDOW, k);
			KUNIT_ASSERT_GE_MSG(test, have + tol, want,
					    "class %u: %u of %u picks ending at %u",
					    i, count[i], QOS_WINDOW, k);
		}
	}
}

/* ------------------------------------------------------ tie-breaking */

/* Two equal classes: on a tie the higher priority is served first. */
static void hcomm_qos_priority_tie(struct kunit *test)
{
	struct qos_sim q;
	int k;

	qos_sim_init(&q, 2);
	hcomm_qos_set(&q.s, &q.c[1], 0, 100, 5);
	qos_activate_all(&q);	/* the low priority class is first in line */
	for (k = 0; k < 100; k++)
		KUNIT_EXPECT_EQ_MSG(test, qos_step(test, &q, QOS_CHUNK),
				    k % 2 ? 0 : 1, "pick %d", k);

	/* Equal priorities: the class that became active first. */
	qos_sim_init(&q, 2);
	hcomm_qos_set(&q.s, &q.c[0], 0, 100, 3);
	hcomm_qos_set(&q.s, &q.c[1], 0, 100, 3);
	qos_activate_all(&q);
	for (k = 0; k < 100; k++)
		KUNIT_EXPECT_EQ_MSG(test, qos_step(test, &q, QOS_CHUNK),
				    k % 2, "pick %d", k);

	/* Priority only breaks ties: the earlier virtual time wins. */
	qos_sim_init(&q, 2);
	hcomm_qos_set(&q.s, &q.c[1], 0, 100, HCOMM_QOS_MAX_PRIO);
	qos_activate_all(&q);
	hcomm_qos_charge(&q.s, &q.c[1], QOS_CHUNK);
	KUNIT_EXPECT_EQ(test, qos_step(test, &q, QOS_CHUNK), 0);
}

/* --------------------------------------------------------- activation */

/*
 * A class that becomes active after another ran alone gets no credit for
 * its idle time: from its first pick on it gets its share, whether it is
 * new or was active long ago.
 */
static void hcomm_qos_late_activation(struct kunit *test)
{
	static const u32 half[] = { 500000, 500000 };
	unsigned int late, count;
	struct qos_sim q;
	int k;

	for (late = 0; late < 2; late++) {
		u64 bytes[QOS_NR] = {};

		qos_sim_init(&q, 2);
		hcomm_qos_activate(&q.s, &q.c[0]);
		if (late) {
			/* c[1] was active once, then idle */
			hcomm_qos_activate(&q.s, &q.c[1]);
			qos_run(test, &q, 1000, bytes);
			hcomm_qos_deactivate(&q.s, &q.c[1]);
		}
		qos_run(test, &q, 10000, bytes);
		hcomm_qos_activate(&q.s, &q.c[1]);
		KUNIT_EXPECT_EQ(test, q.c[1].served, 0);
		KUNIT_EXPECT_EQ(test, q.c[1].vtime, q.s.vclock);

		count = 0;
		for (k = 0; k < QOS_WINDOW; k++)
			count += qos_step(test, &q, QOS_CHUNK);
		KUNIT_EXPECT_LE_MSG(test, count, QOS_WINDOW / 2 + QOS_WINDOW_TOL,
				    "late class (%s) took %u of %u picks",
				    late ? "stale" : "new", count, QOS_WINDOW);
		KUNIT_EXPECT_GE(test, count, QOS_WINDOW / 2 - QOS_WINDOW_TOL);

		memset(bytes, 0, sizeof(bytes));
		qos_run(test, &q, QOS_CHUNKS, bytes);
		qos_expect_split(test, bytes, 2, half);
	}
}

/*
 * A deactivated class is never picked and has no share; the others split
 * the engine without it.  Reactivated, it shares again from a fresh
 * served count.  With nothing active, nothing is picked.
 */
static void hcomm_qos_deactivate_reactivate(struct kunit *test)
{
	static const u32 half[] = { 500000, 500000 };
	u64 bytes[QOS_NR] = {};
	struct qos_sim q;
	int k;

	qos_sim_init(&q, 2);
	KUNIT_EXPECT_NULL(test, hcomm_qos_pick(&q.s));
	qos_activate_all(&q);
	qos_activate_all(&q);		/* no-op */
	KUNIT_EXPECT_EQ(test, q.s.nr_active, 2);
	qos_run(test, &q, 1000, bytes);

	hcomm_qos_deactivate(&q.s, &q.c[1]);
	hcomm_qos_deactivate(&q.s, &q.c[1]);	/* no-op */
	KUNIT_EXPECT_EQ(test, q.s.nr_active, 1);
	KUNIT_EXPECT_FALSE(test, q.c[1].active);
	KUNIT_EXPECT_EQ(test, hcomm_qos_share(&q.s, &q.c[0]), 100);
	KUNIT_EXPECT_EQ(test, hcomm_qos_share(&q.s, &q.c[1]), 0);
	for (k = 0; k < 1000; k++)
		KUNIT_EXPECT_EQ(test, qos_step(test, &q, QOS_CHUNK), 0);

	hcomm_qos_activate(&q.s, &q.c[1]);
	KUNIT_EXPECT_EQ(test, q.s.nr_active, 2);
	KUNIT_EXPECT_EQ(test, q.c[1].served, 0);
	KUNIT_EXPECT_EQ(test, hcomm_qos_share(&q.s, &q.c[1]), 50);
	memset(bytes, 0, sizeof(bytes));
	qos_run(test, &q, QOS_CHUNKS, bytes);
	qos_expect_split(test, bytes, 2, half);
	KUNIT_EXPECT_EQ(test, q.c[1].served, bytes[1]);

	/* The first class leaving: the second has the engine alone. */
	hcomm_qos_deactivate(&q.s, &q.c[0]);
	for (k = 0; k < 100; k++)
		KUNIT_EXPECT_EQ(test, qos_step(test, &q, QOS_CHUNK), 1);

	hcomm_qos_deactivate(&q.s, &q.c[1]);
	KUNIT_EXPECT_EQ(test, q.s.nr_active, 0);
	KUNIT_EXPECT_NULL(test, hcomm_qos_pick(&q.s));
}

/*
 * Service received beyond the share just before going idle is still owed:
 * going idle and coming back at once does not wipe it out.
 */
static void hcomm_qos_debt_kept(struct kunit *test)
{
	struct qos_sim q;
	int k;

	qos_sim_init(&q, 2);
	qos_activate_all(&q);
	/* One big transfer of 100 chunks for the second class. */
	KUNIT_EXPECT_EQ(test, qos_step(test, &q, QOS_CHUNK), 0);
	KUNIT_EXPECT_EQ(test, qos_step(test, &q, 100 * QOS_CHUNK), 1);
	hcomm_qos_deactivate(&q.s, &q.c[1]);
	hcomm_qos_activate(&q.s, &q.c[1]);
	for (k = 0; k < 99; k++)
		KUNIT_EXPECT_EQ_MSG(test, qos_step(test, &q, QOS_CHUNK), 0,
				    "pick %d", k);
	/* Now even: alternate again. */
	KUNIT_EXPECT_EQ(test, qos_step(test, &q, QOS_CHUNK), 0);
	KUNIT_EXPECT_EQ(test, qos_step(test, &q, QOS_CHUNK), 1);
}

/* ---------------------------------------------------------- parameters */

/* A parameter change of an active class takes effect at once. */
static void hcomm_qos_set_while_active(struct kunit *test)
{
	static const u32 half[] = { 500000, 500000 };
	static const u32 quarter[] = { 250000, 750000 };
	static const u32 min60[] = { 983607, 16393 };
	u64 bytes[QOS_NR] = {};
	struct qos_sim q;

	qos_sim_init(&q, 2);
	qos_activate_all(&q);
	qos_run(test, &q, QOS_CHUNKS, bytes);
	qos_expect_split(test, bytes, 2, half);

	hcomm_qos_set(&q.s, &q.c[0], 0, 25, 0);
	KUNIT_EXPECT_EQ(test, hcomm_qos_share(&q.s, &q.c[0]), 25);
	KUNIT_EXPECT_EQ(test, hcomm_qos_share(&q.s, &q.c[1]), 75);
	memset(bytes, 0, sizeof(bytes));
	qos_run(test, &q, QOS_CHUNKS, bytes);
	qos_expect_split(test, bytes, 2, quarter);

	hcomm_qos_set(&q.s, &q.c[0], 60, 100, 0);
	memset(bytes, 0, sizeof(bytes));
	qos_run(test, &q, QOS_CHUNKS, bytes);
	qos_expect_split(test, bytes, 2, min60);

	/* A change while inactive applies when the class comes back. */
	hcomm_qos_deactivate(&q.s, &q.c[0]);
	hcomm_qos_set(&q.s, &q.c[0], 0, 25, 0);
	KUNIT_EXPECT_EQ(test, hcomm_qos_share(&q.s, &q.c[1]), 100);
	hcomm_qos_activate(&q.s, &q.c[0]);
	memset(bytes, 0, sizeof(bytes));
	qos_run(test, &q, QOS_CHUNKS, bytes);
	qos_expect_split(test, bytes, 2, quarter);
}

/* Fairness is in bytes, not chunks: 4 KiB chunks against 1 MiB ones. */
static void hcomm_qos_chunk_sizes(struct kunit *test)
{
	static const u32 half[] = { 500000, 500000 };
	static const u64 size[] = { SZ_4K, SZ_1M };
	u64 bytes[QOS_NR] = {};
	struct qos_sim q;
	int i, k;

	qos_sim_init(&q, 2);
	qos_activate_all(&q);
	for (k = 0; k < 400000; k++) {
		i = qos_index(test, &q, hcomm_qos_pick(&q.s));
		hcomm_qos_charge(&q.s, &q.c[i], size[i]);
		bytes[i] += size[i];
	}
	qos_expect_split(test, bytes, 2, half);
}

/* A huge charge is clamped and counts in served in full. */
static void hcomm_qos_huge_charge(struct kunit *test)
{
	struct qos_sim q;
	u64 start;

	qos_sim_init(&q, 2);
	qos_activate_all(&q);
	start = q.c[0].vtime;
	hcomm_qos_charge(&q.s, &q.c[0], U64_MAX);
	KUNIT_EXPECT_EQ(test, q.c[0].served, U64_MAX);
	KUNIT_EXPECT_EQ(test, q.c[0].vtime - start,
			HCOMM_QOS_MAX_CHARGE * HCOMM_QOS_SCALE / 500000);
	KUNIT_EXPECT_EQ(test, qos_step(test, &q, QOS_CHUNK), 1);
}

/*
 * Virtual times crossing the top of u64: the split and the activation
 * rules hold as anywhere else.
 */
static void hcomm_qos_wrap(struct kunit *test)
{
	static const u32 half[] = { 500000, 500000 };
	u64 bytes[QOS_NR] = {}, owed;
	struct qos_sim q;
	int k;

	qos_sim_init(&q, 2);
	q.s.vclock = U64_MAX - 1000 * QOS_CHUNK;
	/* New classes start at the clock, wherever it is. */
	qos_activate_all(&q);
	KUNIT_EXPECT_EQ(test, q.c[0].vtime, q.s.vclock);
	KUNIT_EXPECT_EQ(test, q.c[1].vtime, q.s.vclock);
	qos_run(test, &q, QOS_CHUNKS, bytes);
	KUNIT_EXPECT_LT(test, q.s.vclock, U64_MAX / 2);
	qos_expect_split(test, bytes, 2, half);

	/* Idle across the wrap: no credit. */
	qos_sim_init(&q, 2);
	q.s.vclock = U64_MAX - 1000 * QOS_CHUNK;
	qos_activate_all(&q);
	qos_run(test, &q, 10, bytes);
	hcomm_qos_deactivate(&q.s, &q.c[1]);
	qos_run(test, &q, 10000, bytes);
	hcomm_qos_activate(&q.s, &q.c[1]);
	KUNIT_EXPECT_EQ(test, q.c[1].vtime, q.s.vclock);

	/*
	 * Idle for nearly a whole turn of the counter: the clock has wrapped
	 * to below the class's old vtime, which must not read as owed.
	 */
	qos_sim_init(&q, 2);
	q.s.vclock = 1ULL << 62;
	qos_activate_all(&q);
	qos_run(test, &q, 10, bytes);
	hcomm_qos_deactivate(&q.s, &q.c[1]);
	q.s.vclock += U64_MAX - (1ULL << 61);	/* as if c[0] ran that long */
	KUNIT_EXPECT_LT(test, q.s.vclock, q.c[1].vtime);
	hcomm_qos_activate(&q.s, &q.c[1]);
	KUNIT_EXPECT_EQ(test, q.c[1].vtime, q.s.vclock);

	/* Owed service across the wrap: still owed, less the time idle. */
	qos_sim_init(&q, 2);
	q.s.vclock = U64_MAX - 10 * QOS_CHUNK;
	qos_activate_all(&q);
	KUNIT_EXPECT_EQ(test, qos_step(test, &q, QOS_CHUNK), 0);
	KUNIT_EXPECT_EQ(test, qos_step(test, &q, 100 * QOS_CHUNK), 1);
	owed = q.c[1].vtime;
	hcomm_qos_deactivate(&q.s, &q.c[1]);
	for (k = 0; k < 50; k++)
		KUNIT_EXPECT_EQ(test, qos_step(test, &q, QOS_CHUNK), 0);
	hcomm_qos_activate(&q.s, &q.c[1]);
	KUNIT_EXPECT_EQ(test, q.c[1].vtime, owed);
	/*
	 * c[0] went on alone at 1 unit per byte from 2 to 52 chunks past the
	 * start; sharing again at 2 units per byte it catches up with c[1],
	 * 200 chunks past the start, after 74 more and wins the tie.
	 */
	for (k = 0; k < 1000 && qos_step(test, &q, QOS_CHUNK) == 0; k++)
		;
	KUNIT_EXPECT_EQ(test, k, 75);
}

/* ------------------------------------------------------------- users */

#define QOS_USERS	3

/* Classes c[i] attached to users u[uid[i]] (uids 1000 + index). */
struct qos_usim {
	struct hcomm_qos_sched s;
	struct hcomm_qos_user u[QOS_USERS];
	struct hcomm_qos_class c[QOS_NR];
	unsigned int n;
};

static void qos_usim_attach(struct kunit *test, struct qos_usim *q,
			    unsigned int i, unsigned int user)
{
	struct hcomm_qos_user *spare = &q->u[user];

	hcomm_qos_class_init(&q->c[i]);
	if (!list_empty(&spare->link) || spare->refs) {
		/* the user exists: hand a fresh spare that must be left */
		struct hcomm_qos_user other;

		hcomm_qos_user_init(&other, spare->uid);
		spare = &other;
		hcomm_qos_attach(&q->s, &q->c[i], &spare);
		KUNIT_EXPECT_PTR_EQ(test, spare, &other);
	} else {
		hcomm_qos_attach(&q->s, &q->c[i], &spare);
		KUNIT_EXPECT_NULL(test, spare);
	}
	KUNIT_EXPECT_PTR_EQ(test, q->c[i].user, &q->u[user]);
}

/* @n classes; class i belongs to user @user[i]; none active. */
static void qos_usim_init(struct kunit *test, struct qos_usim *q,
			  unsigned int n, const unsigned int *user)
{
	unsigned int i;

	hcomm_qos_sched_init(&q->s);
	for (i = 0; i < QOS_USERS; i++)
		hcomm_qos_user_init(&q->u[i], KUIDT_INIT(1000 + i));
	for (i = 0; i < n; i++)
		qos_usim_attach(test, q, i, user[i]);
	q->n = n;
}

static int qos_uindex(struct kunit *test, struct qos_usim *q,
		      struct hcomm_qos_class *c)
{
	KUNIT_ASSERT_NOT_NULL(test, c);
	KUNIT_ASSERT_TRUE(test, c >= &q->c[0] && c < &q->c[q->n]);
	KUNIT_ASSERT_TRUE(test, c->active);
	return c - q->c;
}

static int qos_ustep(struct kunit *test, struct qos_usim *q, u64 bytes)
{
	struct hcomm_qos_class *c = hcomm_qos_pick(&q->s);
	int i = qos_uindex(test, q, c);

	hcomm_qos_charge(&q->s, c, bytes);
	return i;
}

struct qos_user_case {
	const char *name;
	unsigned int n;
	unsigned int user[QOS_NR];
	u32 min[QOS_NR], max[QOS_NR], prio[QOS_NR];
	u32 want[QOS_NR];	/* expected share of each class, ppm */
};

static const struct qos_user_case qos_user_cases[] = {
	/* the case: 3 files of B buy B no more than 1 of A */
	{ "1 default vs 3 default", 4, { 0, 1, 1, 1 }, { 0, 0, 0, 0 },
	  { 100, 100, 100, 100 }, { 0, 0, 0, 0 },
	  { 500000, 166666, 166666, 166666 } },
	{ "1 vs 3, B with priorities", 4, { 0, 1, 1, 1 }, { 0, 0, 0, 0 },
	  { 100, 100, 100, 100 }, { 0, 7, 7, 7 },
	  { 500000, 166666, 166666, 166666 } },
	{ "2 vs 2", 4, { 0, 0, 1, 1 }, { 0, 0, 0, 0 },
	  { 100, 100, 100, 100 }, { 0, 0, 0, 0 },
	  { 250000, 250000, 250000, 250000 } },
	{ "three users, 1 + 2 + 1", 4, { 0, 1, 1, 2 }, { 0, 0, 0, 0 },
	  { 100, 100, 100, 100 }, { 0, 0, 0, 0 },
	  { 333333, 166666, 166666, 333333 } },
	/* weights 60 : 1 at the user level */
	{ "min 60 vs 3 default", 4, { 0, 1, 1, 1 }, { 60, 0, 0, 0 },
	  { 100, 100, 100, 100 }, { 0, 0, 0, 0 },
	  { 983607, 5464, 5464, 5464 } },
	/* users 60 : 20; inside B 20 : 1 : 1 of 25 % */
	{ "min 60 vs min 20 + 2 default", 4, { 0, 1, 1, 1 }, { 60, 20, 0, 0 },
	  { 100, 100, 100, 100 }, { 0, 0, 0, 0 },
	  { 750000, 227272, 11363, 11363 } },
	/* B's classes capped at 10 each: B at most 30 */
	{ "1 vs 3 capped at 10", 4, { 0, 1, 1, 1 }, { 0, 0, 0, 0 },
	  { 100, 10, 10, 10 }, { 0, 0, 0, 0 },
	  { 700000, 100000, 100000, 100000 } },
	/* inside A: max 25 is of the engine, so A's other class gets 25 */
	{ "A max 25 + default vs B", 3, { 0, 0, 1 }, { 0, 0, 0 },
	  { 25, 100, 100 }, { 0, 0, 0 }, { 250000, 250000, 500000 } },
	/* min_rates of one user together: 30 + 30 vs 1 */
	{ "A 30 + 30 vs default", 3, { 0, 0, 1 }, { 30, 30, 0 },
	  { 100, 100, 100 }, { 0, 0, 0 }, { 491803, 491803, 16393 } },
	/* a single user: its classes share the whole engine */
	{ "one user, 3 classes", 3, { 0, 0, 0 }, { 0, 0, 0 },
	  { 100, 100, 100 }, { 0, 0, 0 }, { 333333, 333333, 333333 } },
	/* a single user: caps scaled up to fill the engine */
	{ "one user, max 20 and 30", 2, { 0, 0 }, { 0, 0 }, { 20, 30 },
	  { 0, 0 }, { 400000, 600000 } },
};

static void qos_user_desc(const struct qos_user_case *c, char *desc)
{
	strscpy(desc, c->name, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(qos_user, qos_user_cases, qos_user_desc);

static void qos_usim_setup(struct kunit *test, struct qos_usim *q,
			   const struct qos_user_case *p)
{
	unsigned int i;

	qos_usim_init(test, q, p->n, p->user);
	for (i = 0; i < p->n; i++) {
		KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q->s, &q->c[i],
						      p->min[i], 100), 0);
		hcomm_qos_set(&q->s, &q->c[i], p->min[i], p->max[i],
			      p->prio[i]);
	}
	for (i = 0; i < p->n; i++)
		hcomm_qos_activate(&q->s, &q->c[i]);
}

/*
 * Users first, then their classes: 100000 chunks split as the two-level
 * shares say, and every window of 100 picks holds each class within 2
 * chunks of its share and each user within 2 chunks of its own.
 */
static void hcomm_qos_users(struct kunit *test)
{
	const struct qos_user_case *p = test->param_value;
	unsigned int count[QOS_NR] = {}, k, i;
	u64 bytes[QOS_NR] = {};
	u8 ring[QOS_WINDOW];
	struct qos_usim q;

	qos_usim_setup(test, &q, p);
	for (i = 0; i < p->n; i++)
		KUNIT_EXPECT_EQ_MSG(test, hcomm_qos_share(&q.s, &q.c[i]),
				    DIV_ROUND_CLOSEST(p->want[i], QOS_PCT),
				    "class %u", i);
	for (k = 0; k < QOS_CHUNKS; k++) {
		i = qos_ustep(test, &q, QOS_CHUNK);
		bytes[i] += QOS_CHUNK;
		if (k >= QOS_WINDOW)
			count[ring[k % QOS_WINDOW]]--;
		ring[k % QOS_WINDOW] = i;
		count[i]++;
		if (k + 1 < QOS_WINDOW || k > 20000)
			continue;
		for (i = 0; i < p->n; i++) {
			u32 want = p->want[i] * QOS_WINDOW;
			u32 have = count[i] * HCOMM_QOS_SCALE;
			u32 tol = QOS_WINDOW_TOL * HCOMM_QOS_SCALE;

			KUNIT_ASSERT_LE_MSG(test, have, want + tol,
					    "class %u: %u of %u picks ending at %u",
					    i, count[i], QOS_WINDOW, k);
			KUNIT_ASSERT_GE_MSG(test, have + tol, want,
					    "class %u: %u of %u picks ending at %u",
					    i, count[i], QOS_WINDOW, k);
		}
	}
	qos_expect_split(test, bytes, p->n, p->want);
	for (i = 0; i < p->n; i++) {
		KUNIT_EXPECT_EQ(test, q.c[i].served, bytes[i]);
		KUNIT_EXPECT_GE_MSG(test, div64_u64(bytes[i] * HCOMM_QOS_SCALE,
						    QOS_CHUNKS * QOS_CHUNK) +
				    QOS_TOL, p->min[i] * QOS_PCT,
				    "class %u below its min_rate", i);
	}
}

/*
 * The case step by step: A alone has the engine; B's three
 * classes arriving one by one never take more than half from A; B's
 * classes leaving one by one give B's remaining ones B's whole half.
 */
static void hcomm_qos_users_churn(struct kunit *test)
{
	static const unsigned int user[] = { 0, 1, 1, 1 };
	unsigned int a, nb, k, i;
	struct qos_usim q;

	qos_usim_init(test, &q, 4, user);
	hcomm_qos_activate(&q.s, &q.c[0]);
	for (k = 0; k < 100; k++)
		KUNIT_EXPECT_EQ(test, qos_ustep(test, &q, QOS_CHUNK), 0);
	for (nb = 1; nb <= 3; nb++) {
		hcomm_qos_activate(&q.s, &q.c[nb]);
		KUNIT_EXPECT_EQ(test, hcomm_qos_share(&q.s, &q.c[0]), 50);
		KUNIT_EXPECT_EQ(test, hcomm_qos_share(&q.s, &q.u[1].top), 50);
		for (a = 0, k = 0; k < 600; k++)
			a += qos_ustep(test, &q, QOS_CHUNK) == 0;
		KUNIT_EXPECT_EQ_MSG(test, a, 300, "%u classes of B", nb);
	}
	for (nb = 3; nb >= 1; nb--) {
		unsigned int cnt[QOS_NR] = {};

		for (k = 0; k < 600; k++)
			cnt[qos_ustep(test, &q, QOS_CHUNK)]++;
		KUNIT_EXPECT_EQ_MSG(test, cnt[0], 300, "%u classes of B", nb);
		for (i = 1; i <= nb; i++)
			KUNIT_EXPECT_EQ_MSG(test, cnt[i], 300 / nb,
					    "class %u of %u", i, nb);
		hcomm_qos_deactivate(&q.s, &q.c[nb]);
	}
	KUNIT_EXPECT_FALSE(test, q.u[1].top.active);
	KUNIT_EXPECT_EQ(test, q.s.nr_active, 1);
	KUNIT_EXPECT_EQ(test, hcomm_qos_share(&q.s, &q.c[0]), 100);
}

/*
 * Service a user received beyond its share stays owed when the class
 * that got it goes away and another class of the same user comes: A
 * gets the next 99 chunks, as if B's class had come straight back.
 */
static void hcomm_qos_users_debt(struct kunit *test)
{
	static const unsigned int user[] = { 0, 1, 1 };
	struct hcomm_qos_user *gone;
	struct qos_usim q;
	int k;

	qos_usim_init(test, &q, 3, user);
	hcomm_qos_activate(&q.s, &q.c[0]);
	hcomm_qos_activate(&q.s, &q.c[1]);
	KUNIT_EXPECT_EQ(test, qos_ustep(test, &q, QOS_CHUNK), 0);
	KUNIT_EXPECT_EQ(test, qos_ustep(test, &q, 100 * QOS_CHUNK), 1);
	gone = hcomm_qos_detach(&q.s, &q.c[1]);
	KUNIT_EXPECT_NULL(test, gone);		/* c[2] still holds B */
	hcomm_qos_activate(&q.s, &q.c[2]);
	for (k = 0; k < 99; k++)
		KUNIT_EXPECT_EQ_MSG(test, qos_ustep(test, &q, QOS_CHUNK), 0,
				    "pick %d", k);
	KUNIT_EXPECT_EQ(test, qos_ustep(test, &q, QOS_CHUNK), 0);
	KUNIT_EXPECT_EQ(test, qos_ustep(test, &q, QOS_CHUNK), 2);
}

/* A user's priority is its highest class's: it wins ties between users. */
static void hcomm_qos_users_priority(struct kunit *test)
{
	static const unsigned int user[] = { 0, 1, 1 };
	struct qos_usim q;
	int k;

	qos_usim_init(test, &q, 3, user);
	hcomm_qos_set(&q.s, &q.c[2], 0, 100, 4);
	hcomm_qos_activate(&q.s, &q.c[0]);
	hcomm_qos_activate(&q.s, &q.c[1]);
	hcomm_qos_activate(&q.s, &q.c[2]);
	KUNIT_EXPECT_EQ(test, q.u[1].top.priority, 0);	/* not yet computed */
	/* ties between A and B go to B; inside B to c[2] */
	KUNIT_EXPECT_EQ(test, qos_ustep(test, &q, QOS_CHUNK), 2);
	KUNIT_EXPECT_EQ(test, q.u[1].top.priority, 4);
	KUNIT_EXPECT_EQ(test, qos_ustep(test, &q, QOS_CHUNK), 0);
	for (k = 0; k < 10; k++)
		qos_ustep(test, &q, QOS_CHUNK);
	hcomm_qos_deactivate(&q.s, &q.c[2]);
	KUNIT_EXPECT_EQ(test, hcomm_qos_share(&q.s, &q.u[1].top), 50);
	KUNIT_EXPECT_EQ(test, q.u[1].top.priority, 0);
}

/*
 * Admission: a user's min_rates together stay within its limit (EPERM),
 * everybody's within 100 (ENOSPC); lowering is always allowed; detaching
 * gives a class's reservation back, and the last class of a user hands
 * the user back to be freed.
 */
static void hcomm_qos_users_admission(struct kunit *test)
{
	static const unsigned int user[] = { 0, 0, 1, 1 };
	struct qos_usim q;

	qos_usim_init(test, &q, 4, user);
	KUNIT_EXPECT_EQ(test, q.u[0].refs, 2);
	KUNIT_EXPECT_EQ(test, q.u[1].refs, 2);

	/* user 0, unprivileged with an allowance of 30 */
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[0], 31, 30), -EPERM);
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[0], 20, 30), 0);
	hcomm_qos_set(&q.s, &q.c[0], 20, 100, 0);
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[1], 11, 30), -EPERM);
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[1], 10, 30), 0);
	hcomm_qos_set(&q.s, &q.c[1], 10, 100, 0);
	KUNIT_EXPECT_EQ(test, q.u[0].min_sum, 30);
	/* re-setting its own value does not count it twice */
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[0], 20, 30), 0);
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[0], 21, 30), -EPERM);
	/* the allowance lowered to 0: lowering is still fine */
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[0], 5, 0), 0);
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[0], 21, 100), 0);

	/* user 1, privileged: only the engine's 100 binds */
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[2], 71, 100), -ENOSPC);
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[2], 70, 100), 0);
	hcomm_qos_set(&q.s, &q.c[2], 70, 100, 0);
	KUNIT_EXPECT_EQ(test, q.s.min_sum, 100);
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[3], 1, 100), -ENOSPC);
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[1], 11, 100), -ENOSPC);

	/* the guarantees hold with everything active */
	hcomm_qos_activate(&q.s, &q.c[0]);
	hcomm_qos_activate(&q.s, &q.c[1]);
	hcomm_qos_activate(&q.s, &q.c[2]);
	hcomm_qos_activate(&q.s, &q.c[3]);
	KUNIT_EXPECT_EQ(test, hcomm_qos_share(&q.s, &q.c[0]), 20);
	KUNIT_EXPECT_EQ(test, hcomm_qos_share(&q.s, &q.c[1]), 10);
	KUNIT_EXPECT_EQ(test, hcomm_qos_share(&q.s, &q.c[2]), 70);
	KUNIT_EXPECT_EQ(test, q.c[3].share, 1);

	/* detaching gives back; the last class returns its user */
	KUNIT_EXPECT_NULL(test, hcomm_qos_detach(&q.s, &q.c[0]));
	KUNIT_EXPECT_EQ(test, q.u[0].min_sum, 10);
	KUNIT_EXPECT_EQ(test, q.s.min_sum, 80);
	KUNIT_EXPECT_EQ(test, q.u[0].refs, 1);
	KUNIT_EXPECT_FALSE(test, q.c[0].active);
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[3], 20, 100), 0);
	KUNIT_EXPECT_PTR_EQ(test, hcomm_qos_detach(&q.s, &q.c[1]), &q.u[0]);
	KUNIT_EXPECT_TRUE(test, list_empty(&q.u[0].link));
	KUNIT_EXPECT_FALSE(test, q.u[0].top.active);
	KUNIT_EXPECT_EQ(test, q.s.min_sum, 70);
	KUNIT_EXPECT_NULL(test, hcomm_qos_detach(&q.s, &q.c[2]));
	KUNIT_EXPECT_PTR_EQ(test, hcomm_qos_detach(&q.s, &q.c[3]), &q.u[1]);
	KUNIT_EXPECT_EQ(test, q.s.min_sum, 0);
	KUNIT_EXPECT_EQ(test, q.s.nr_active, 0);
	KUNIT_EXPECT_TRUE(test, list_empty(&q.s.users));
	KUNIT_EXPECT_NULL(test, hcomm_qos_pick(&q.s));
	/* detaching twice is harmless */
	KUNIT_EXPECT_NULL(test, hcomm_qos_detach(&q.s, &q.c[3]));
}

/* A class of no user is its own user: admission counts its min_rate alone. */
static void hcomm_qos_admit_solo(struct kunit *test)
{
	struct qos_sim q;

	qos_sim_init(&q, 2);
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[0], 10, 5), -EPERM);
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[0], 5, 5), 0);
	hcomm_qos_set(&q.s, &q.c[0], 60, 100, 0);
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[1], 41, 100), -ENOSPC);
	KUNIT_EXPECT_EQ(test, hcomm_qos_admit(&q.s, &q.c[1], 40, 100), 0);
	KUNIT_EXPECT_NULL(test, hcomm_qos_detach(&q.s, &q.c[0]));
	KUNIT_EXPECT_EQ(test, q.s.min_sum, 0);
}

/* An allocated user: attach takes it, the last detach hands it back. */
static void hcomm_qos_users_alloc(struct kunit *test)
{
	struct hcomm_qos_user *spare, *gone;
	struct hcomm_qos_class a, b;
	struct hcomm_qos_sched s;

	hcomm_qos_sched_init(&s);
	hcomm_qos_class_init(&a);
	hcomm_qos_class_init(&b);
	spare = hcomm_qos_user_alloc(KUIDT_INIT(7), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, spare);
	hcomm_qos_attach(&s, &a, &spare);
	KUNIT_EXPECT_NULL(test, spare);
	spare = hcomm_qos_user_alloc(KUIDT_INIT(7), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, spare);
	hcomm_qos_attach(&s, &b, &spare);
	KUNIT_EXPECT_NOT_NULL(test, spare);
	KUNIT_EXPECT_PTR_EQ(test, a.user, b.user);
	hcomm_qos_user_free(spare);
	hcomm_qos_activate(&s, &a);
	KUNIT_EXPECT_NULL(test, hcomm_qos_detach(&s, &a));
	gone = hcomm_qos_detach(&s, &b);
	KUNIT_EXPECT_NOT_NULL(test, gone);
	KUNIT_EXPECT_TRUE(test, list_empty(&s.users));
	hcomm_qos_user_free(gone);
}

/* ---------------------------------------------------------- validation */

struct qos_validate_case {
	const char *name;
	u32 min, max, prio;
	int ret;
};

static const struct qos_validate_case qos_validate_cases[] = {
	{ "defaults", 0, 100, 0, 0 },
	{ "smallest max", 0, 1, 0, 0 },
	{ "min equals max", 50, 50, 3, 0 },
	{ "min 100", 100, 100, HCOMM_QOS_MAX_PRIO, 0 },
	{ "min above 100", 101, 100, 0, -EINVAL },
	{ "min huge", U32_MAX, 100, 0, -EINVAL },
	{ "max 0", 0, 0, 0, -EINVAL },
	{ "max above 100", 0, 101, 0, -EINVAL },
	{ "max huge", 0, U32_MAX, 0, -EINVAL },
	{ "max below min", 60, 59, 0, -EINVAL },
	{ "max 1 below min 2", 2, 1, 0, -EINVAL },
	{ "priority above max", 0, 100, HCOMM_QOS_MAX_PRIO + 1, -EINVAL },
	{ "priority huge", 0, 100, U32_MAX, -EINVAL },
};

static void qos_validate_desc(const struct qos_validate_case *c, char *desc)
{
	strscpy(desc, c->name, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(qos_validate, qos_validate_cases, qos_validate_desc);

static void hcomm_qos_validate_params(struct kunit *test)
{
	const struct qos_validate_case *p = test->param_value;

	KUNIT_EXPECT_EQ(test, hcomm_qos_validate(p->min, p->max, p->prio),
			p->ret);
}

/* Every valid combination passes, every other one within range fails. */
static void hcomm_qos_validate_all(struct kunit *test)
{
	u32 min, max, prio;
	int ret, want;

	for (min = 0; min <= 101; min++)
		for (max = 0; max <= 101; max++)
			for (prio = 0; prio <= HCOMM_QOS_MAX_PRIO + 1; prio++) {
				want = min <= max && max >= 1 && max <= 100 &&
				       prio <= HCOMM_QOS_MAX_PRIO ? 0 : -EINVAL;
				ret = hcomm_qos_validate(min, max, prio);
				if (ret != want)
					KUNIT_FAIL(test, "(%u, %u, %u): %d", min,
						   max, prio, ret);
			}
}

/* A fresh class has the documented defaults. */
static void hcomm_qos_defaults(struct kunit *test)
{
	struct hcomm_qos_class c;

	hcomm_qos_class_init(&c);
	KUNIT_EXPECT_EQ(test, c.min_rate, 0);
	KUNIT_EXPECT_EQ(test, c.max_rate, 100);
	KUNIT_EXPECT_EQ(test, c.priority, 0);
	KUNIT_EXPECT_FALSE(test, c.active);
	KUNIT_EXPECT_EQ(test, c.served, 0);
}

/*
 * A held class is passed over but keeps its share and virtual time: the
 * other class gets every pick meanwhile, and once released the held one is
 * picked until it has caught up, so over the whole run the split is still
 * its share.  A user all of whose classes are held is passed over too;
 * when every class is held nothing is picked.
 */
static void hcomm_qos_held(struct kunit *test)
{
	u64 bytes[QOS_NR] = { 0 };
	u32 ppm[QOS_NR];
	struct qos_usim *u;
	struct qos_sim q;
	int k;

	qos_sim_init(&q, 2);
	qos_activate_all(&q);
	q.c[0].held = true;
	for (k = 0; k < 50; k++)
		KUNIT_EXPECT_EQ(test, qos_step(test, &q, QOS_CHUNK), 1);
	KUNIT_EXPECT_TRUE(test, q.c[0].active);
	KUNIT_EXPECT_EQ(test, hcomm_qos_share(&q.s, &q.c[0]), 50U);
	q.c[0].held = false;
	for (k = 0; k < 50; k++)
		KUNIT_EXPECT_EQ(test, qos_step(test, &q, QOS_CHUNK), 0);
	qos_run(test, &q, 1000, bytes);
	qos_split(bytes, 2, ppm);
	KUNIT_EXPECT_LE(test, abs((int)ppm[0] - 500000), 2000);

	q.c[0].held = true;
	q.c[1].held = true;
	KUNIT_EXPECT_NULL(test, hcomm_qos_pick(&q.s));

	/* users: both classes of user 0 held, user 1 gets every pick */
	u = kunit_kzalloc(test, sizeof(*u), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, u);
	{
		static const unsigned int owner[] = { 0, 0, 1 };
		struct hcomm_qos_class *c;

		qos_usim_init(test, u, 3, owner);
		for (k = 0; k < 3; k++)
			hcomm_qos_activate(&u->s, &u->c[k]);
		u->c[0].held = true;
		u->c[1].held = true;
		for (k = 0; k < 20; k++) {
			c = hcomm_qos_pick(&u->s);
			KUNIT_EXPECT_PTR_EQ(test, c, &u->c[2]);
			hcomm_qos_charge(&u->s, c, QOS_CHUNK);
		}
		u->c[1].held = false;
		c = hcomm_qos_pick(&u->s);
		KUNIT_EXPECT_PTR_EQ(test, c, &u->c[1]);
	}
}

static struct kunit_case hcomm_qos_cases[] = {
	KUNIT_CASE(hcomm_qos_defaults),
	KUNIT_CASE_PARAM(hcomm_qos_validate_params, qos_validate_gen_params),
	KUNIT_CASE(hcomm_qos_validate_all),
	KUNIT_CASE_PARAM(hcomm_qos_split, qos_split_gen_params),
	KUNIT_CASE_PARAM(hcomm_qos_window, qos_split_gen_params),
	KUNIT_CASE(hcomm_qos_priority_tie),
	KUNIT_CASE(hcomm_qos_held),
	KUNIT_CASE(hcomm_qos_late_activation),
	KUNIT_CASE(hcomm_qos_deactivate_reactivate),
	KUNIT_CASE(hcomm_qos_debt_kept),
	KUNIT_CASE(hcomm_qos_set_while_active),
	KUNIT_CASE(hcomm_qos_chunk_sizes),
	KUNIT_CASE(hcomm_qos_huge_charge),
	KUNIT_CASE(hcomm_qos_wrap),
	KUNIT_CASE_PARAM(hcomm_qos_users, qos_user_gen_params),
	KUNIT_CASE(hcomm_qos_users_churn),
	KUNIT_CASE(hcomm_qos_users_debt),
	KUNIT_CASE(hcomm_qos_users_priority),
	KUNIT_CASE(hcomm_qos_users_admission),
	KUNIT_CASE(hcomm_qos_admit_solo),
	KUNIT_CASE(hcomm_qos_users_alloc),
	{}
};

static struct kunit_suite hcomm_qos_suite = {
	.name = "hcomm_qos",
	.test_cases = hcomm_qos_cases,
};

kunit_test_suites(&hcomm_qos_suite);
