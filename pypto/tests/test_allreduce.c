/* SPDX-License-Identifier: MIT */
/*
 * libpypto host test of allreduce tiles (pypto_add_allreduce).
 *
 * In this process, without libhcomm:
 *  - bad arguments are refused when the graph is built, and a graph whose
 *    allreduce tiles depend on later ones (against the issue order) by
 *    validation (PYPTO_DEADLOCK, naming the path);
 *  - without a transport and with the memcpy double an allreduce tile is
 *    one over one rank (recv = send), issued in id order whatever order
 *    the tiles become ready in; the dumps, the trace, the timeline and
 *    the diagnosis know the kind.
 *
 * In 2 and 3 forked ranks that form a communicator over tcp on 127.0.0.1
 * (HCOMM_TRANSPORT=tcp, the bootstrap on an abstract unix socket, as
 * lib/tests/test_coll.c does): compute tiles write partial sums, an int32
 * sum and an fp64 max allreduce take them, compute tiles check the
 * results exactly, and long tiles released with the first allreduce run
 * while it is in flight (2 ranks with a window in the transport, 3
 * without: collectives only).  Rank 0's partial tiles are slow, so there the
 * second allreduce is ready long before the first: it must still be
 * issued after it (else the ranks would issue them in different orders).
 * Then 3 ranks of which one _exit()s inside the tile that feeds the
 * allreduce: the others' runs fail with PYPTO_ERR_IO (libhcomm notices
 * the lost rank at once), and the next run fails at once; and 3 ranks of
 * which one is alive but issues its allreduce only after the others'
 * collective timeout: they fail with PYPTO_ERR_IO after the timeout,
 * none hangs.
 *
 * Each rank records its checks in shared memory (the same checks in the
 * same order on every rank); the parent prints one TAP line per check
 * with the ranks that passed it.  Ends with "pypto-allreduce: N passed,
 * M failed".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "pypto.h"
#include "tap.h"

#define MAX_RANKS	3
#define MAX_CHECKS	256
#define RANK_ALARM	120

#define NPART		8		/* partial tiles of the sum */
#define NLONG		3		/* long tiles released with it */
#define LONG_MS		40
#define SLOW_MS		10		/* rank 0's partial tiles */
#define N1		(1U << 21)	/* int32 elements: 8 MiB */
#define N2		4096		/* fp64 elements */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static bool file_has(const char *path, const char *needle)
{
	char *buf = NULL;
	size_t len = 0;
	bool found = false;
	FILE *f = fopen(path, "r");

	if (!f)
		return false;
	if (getdelim(&buf, &len, '\0', f) > 0)
		found = strstr(buf, needle) != NULL;
	free(buf);
	fclose(f);
	return found;
}

/* The run's event of a tile in a stage, NULL if none. */
static const struct pypto_event *event_of(const struct pypto_run *r,
					  uint32_t tile, uint8_t stage)
{
	const struct pypto_event *ev;
	unsigned int i, n = pypto_run_events(r, &ev);

	for (i = 0; i < n; i++)
		if (ev[i].tile == tile && ev[i].stage == stage)
			return &ev[i];
	return NULL;
}

/* ---- tiles ---------------------------------------------------------- */

static int nap_fn(void *arg, const struct pypto_exec *ex)
{
	(void)ex;
	sleep_ms((unsigned int)(uintptr_t)arg);
	return 0;
}

/* A rank's int32 contribution and the sum over n ranks (exact). */
static int32_t val1(int rank, size_t i)
{
	return (int32_t)((rank + 1) * 1000 + (int)(i % 9973));
}

static int32_t sum1(int n, size_t i)
{
	return (int32_t)(1000 * n * (n + 1) / 2 + n * (int)(i % 9973));
}

/* fp64: multiples of 1/4, exact; the max over n ranks is rank n - 1's. */
static double val2(int rank, size_t i)
{
	return (rank + 1) * 0.25 + (double)(i % 1024);
}

struct part {
	int32_t *send;
	size_t lo, hi;
	int rank;
	unsigned int delay_ms;
	bool die;			/* the rank goes away here */
};

/* t_stall: how long the stalling rank's tile sleeps, the timeout. */
#define STALL_MS	4000
#define STALL_TIMEOUT	1000

static int part_fn(void *arg, const struct pypto_exec *ex)
{
	struct part *p = arg;
	size_t i;

	(void)ex;
	if (p->die) {
		sleep_ms(100);	/* the others have issued theirs */
		_exit(0);
	}
	sleep_ms(p->delay_ms);
	for (i = p->lo; i < p->hi; i++)
		p->send[i] = val1(p->rank, i);
	return 0;
}

struct part2 {
	double *buf;
	int rank;
};

static int part2_fn(void *arg, const struct pypto_exec *ex)
{
	struct part2 *p = arg;
	size_t i;

	(void)ex;
	for (i = 0; i < N2; i++)
		p->buf[i] = val2(p->rank, i);
	return 0;
}

/* A consumer: counts the wrong elements of its slice. */
struct post {
	const int32_t *recv1;
	const double *recv2;		/* or the fp64 result */
	size_t lo, hi;
	int n;
	size_t bad;
};

static int post_fn(void *arg, const struct pypto_exec *ex)
{
	struct post *p = arg;
	size_t i;

	(void)ex;
	p->bad = 0;
	for (i = p->lo; i < p->hi; i++) {
		if (p->recv1 && p->recv1[i] != sum1(p->n, i))
			p->bad++;
		if (p->recv2 && p->recv2[i] != val2(p->n - 1, i))
			p->bad++;
	}
	return 0;
}

/* ---- checks of the ranks -------------------------------------------- */

struct check {
	char what[200];
	int pass, fail;			/* ranks */
};

static struct shared {
	int nchecks;
	int mw_pid, mw_stopped;		/* t_mirror's rank 1 */
	struct check c[MAX_CHECKS];
} *sh;

static int me, np, nth;
static struct hcomm_comm *comm;
static struct pypto_xport *xp;
static bool have_win;		/* xp has a window */
static struct hcomm_win *gwin;	/* it */

static __attribute__((format(printf, 2, 3)))
void check(int cond, const char *fmt, ...)
{
	struct check *c;
	va_list ap;
	int i = nth++;

	if (i >= MAX_CHECKS)
		return;
	c = &sh->c[i];
	if (me == 0) {
		va_start(ap, fmt);
		vsnprintf(c->what, sizeof(c->what), fmt, ap);
		va_end(ap);
	}
	__atomic_add_fetch(cond ? &c->pass : &c->fail, 1, __ATOMIC_RELAXED);
	if (!cond) {
		char buf[200];

		va_start(ap, fmt);
		vsnprintf(buf, sizeof(buf), fmt, ap);
		va_end(ap);
		fprintf(stderr, "rank %d: FAILED: %s (%s)\n", me, buf,
			pypto_errmsg());
	}
}

static struct pypto_config rank_cfg(void)
{
	struct pypto_config cfg;

	pypto_config_default(&cfg);
	cfg.workers = 2;
	cfg.devices = 1;
	cfg.profile = 1;
	return cfg;
}

/*
 * The graph of one rank (ids in this order):
 *   part[0..NPART)  compute: send1 slices (slow on rank 0)
 *   part2           compute: send2
 *   ar1             allreduce int32 sum send1 -> recv1, after every part
 *   ar2             allreduce fp64 max, in place on send2, after part2
 *   long[0..NLONG)  compute: LONG_MS each, after every part (not ar1)
 *   post[0..NPART)  compute: check recv1 slices, after ar1
 *   post2           compute: check send2, after ar2
 */
struct world_graph {
	struct pypto_graph *g;
	int32_t *send1, *recv1;
	double *send2;
	struct part part[NPART];
	struct part2 part2;
	struct post post[NPART], post2;
	uint32_t id_part2, id_ar1, id_ar2, id_long[NLONG];
};

/* die_rank exits in its first partial tile; stall_rank sleeps there. */
static int build(struct world_graph *w, int die_rank, int stall_rank)
{
	struct pypto_graph *g;
	uint32_t ids_part[NPART], ids_post[NPART], id_post2;
	size_t per = N1 / NPART;
	int k, id;

	memset(w, 0, sizeof(*w));
	w->send1 = calloc(N1, sizeof(*w->send1));
	w->recv1 = calloc(N1, sizeof(*w->recv1));
	w->send2 = calloc(N2, sizeof(*w->send2));
	if (!w->send1 || !w->recv1 || !w->send2 || pypto_graph_create(&g))
		return -1;
	w->g = g;
	for (k = 0; k < NPART; k++) {
		w->part[k] = (struct part){
			.send = w->send1, .lo = k * per, .hi = (k + 1) * per,
			.rank = me, .delay_ms = me == 0 ? SLOW_MS : 0,
			.die = me == die_rank && k == 0,
		};
		if (me == stall_rank && k == 0)
			w->part[k].delay_ms = STALL_MS;
		ids_part[k] = (uint32_t)pypto_add_compute(g, "part", part_fn,
							  &w->part[k],
							  PYPTO_ANY_DEVICE);
	}
	w->part2 = (struct part2){ .buf = w->send2, .rank = me };
	w->id_part2 = (uint32_t)pypto_add_compute(g, "part2", part2_fn,
						  &w->part2, PYPTO_ANY_DEVICE);
	id = pypto_add_allreduce(g, "ar1 int32 sum", w->send1, w->recv1, N1,
				 HCOMM_INT32, HCOMM_SUM, PYPTO_ANY_DEVICE);
	w->id_ar1 = (uint32_t)id;
	if (id < 0)
		return -1;
	id = pypto_add_allreduce(g, "ar2 fp64 max", w->send2, w->send2, N2,
				 HCOMM_FP64, HCOMM_MAX, PYPTO_ANY_DEVICE);
	w->id_ar2 = (uint32_t)id;
	if (id < 0)
		return -1;
	for (k = 0; k < NLONG; k++)
		w->id_long[k] = (uint32_t)pypto_add_compute(g, "long", nap_fn,
					(void *)(uintptr_t)LONG_MS,
					PYPTO_ANY_DEVICE);
	for (k = 0; k < NPART; k++) {
		w->post[k] = (struct post){
			.recv1 = w->recv1, .lo = k * per, .hi = (k + 1) * per,
			.n = np, .bad = (size_t)-1,
		};
		ids_post[k] = (uint32_t)pypto_add_compute(g, "post", post_fn,
							  &w->post[k],
							  PYPTO_ANY_DEVICE);
	}
	w->post2 = (struct post){ .recv2 = w->send2, .lo = 0, .hi = N2,
				  .n = np, .bad = (size_t)-1 };
	id_post2 = (uint32_t)pypto_add_compute(g, "post2", post_fn, &w->post2,
					       PYPTO_ANY_DEVICE);
	/* ar1 first among each part's consumers: issued, then the longs */
	for (k = 0; k < NPART; k++)
		if (pypto_add_dep(g, ids_part[k], w->id_ar1))
			return -1;
	for (k = 0; k < NPART * NLONG; k++)
		if (pypto_add_dep(g, ids_part[k % NPART],
				  w->id_long[k / NPART]))
			return -1;
	for (k = 0; k < NPART; k++)
		if (pypto_add_dep(g, w->id_ar1, ids_post[k]))
			return -1;
	if (pypto_add_dep(g, w->id_part2, w->id_ar2) ||
	    pypto_add_dep(g, w->id_ar2, id_post2))
		return -1;
	return pypto_graph_validate(g, NULL);
}

static void unbuild(struct world_graph *w)
{
	pypto_graph_destroy(w->g);
	free(w->send1);
	free(w->recv1);
	free(w->send2);
}

static size_t post_bad(const struct world_graph *w)
{
	size_t bad = w->post2.bad;
	int k;

	for (k = 0; k < NPART; k++)
		bad += w->post[k].bad;
	return bad;
}

/* One run of the graph: results, issue order, overlap, stats, trace. */
static void run_sum(struct world_graph *w, int round)
{
	struct pypto_config cfg = rank_cfg();
	const struct pypto_event *e1, *e2, *ep2;
	const struct pypto_event *ev;
	const struct pypto_stats *st;
	struct pypto_run *run = NULL;
	uint64_t best = 0;
	unsigned int i, nev;
	size_t bad = 0, k;
	char path[128];
	int rc;

	memset(w->send1, 0, N1 * sizeof(*w->send1));
	memset(w->recv1, 0, N1 * sizeof(*w->recv1));
	memset(w->send2, 0, N2 * sizeof(*w->send2));
	rc = pypto_run(w->g, &cfg, xp, &run);
	check(rc == 0 && run, "%d ranks, run %d: pypto_run with 2 allreduce "
	      "tiles returns 0 (%d)", np, round, rc);
	for (k = 0; k < N1; k++)
		bad += w->recv1[k] != sum1(np, k);
	for (k = 0; k < N2; k++)
		bad += w->send2[k] != val2(np - 1, k);
	check(!bad && post_bad(w) == 0, "%d ranks, run %d: exact int32 sum "
	      "of %u and fp64 max of %u elements, also as their consumer "
	      "tiles saw them (%zu wrong after the run, %zu in the tiles)",
	      np, round, N1, N2, bad, post_bad(w));
	if (!run) {
		for (i = 0; i < 5; i++)
			check(0, "%d ranks, run %d: no run record", np, round);
		return;
	}
	e1 = event_of(run, w->id_ar1, PYPTO_STAGE_COLLECTIVE);
	e2 = event_of(run, w->id_ar2, PYPTO_STAGE_COLLECTIVE);
	ep2 = event_of(run, w->id_part2, PYPTO_STAGE_COMPUTE);
	check(e1 && e2 && ep2 && e2->t0_ns >= e1->t0_ns &&
	      (me != 0 || ep2->t1_ns < e1->t0_ns),
	      "%d ranks, run %d: ar2 issued after ar1 (at %.3f and %.3f "
	      "ms; rank 0: ar2 ready at %.3f ms, before ar1 was issued)", np,
	      round, e2 ? e2->t0_ns / 1e6 : -1, e1 ? e1->t0_ns / 1e6 : -1,
	      ep2 ? ep2->t1_ns / 1e6 : -1);
	/* some compute tile ran while ar1 was in flight */
	nev = pypto_run_events(run, &ev);
	for (i = 0; e1 && i < nev; i++) {
		uint64_t a, b;

		if (ev[i].stage != PYPTO_STAGE_COMPUTE)
			continue;
		a = ev[i].t0_ns > e1->t0_ns ? ev[i].t0_ns : e1->t0_ns;
		b = ev[i].t1_ns < e1->t1_ns ? ev[i].t1_ns : e1->t1_ns;
		if (b > a && b - a > best)
			best = b - a;
	}
	st = pypto_run_stats(run);
	check(e1 && best > 0 && st->coll_overlap_ns > 0,
	      "%d ranks, run %d: a compute tile ran %.3f ms of ar1's %.3f ms "
	      "in flight (stats: %.3f of %.3f ms with an allreduce in "
	      "flight)", np, round, best / 1e6,
	      e1 ? (e1->t1_ns - e1->t0_ns) / 1e6 : -1,
	      st->coll_overlap_ns / 1e6, st->coll_flight_ns / 1e6);
	check(st->tiles_allreduce == 2 &&
	      st->allreduce_bytes == N1 * 4ULL + N2 * 8ULL &&
	      st->tiles_compute == 2 * NPART + NLONG + 2 &&
	      st->allreduce_ns > 0, "%d ranks, run %d: stats count 2 "
	      "allreduce tiles, %llu bytes, %llu compute tiles", np, round,
	      (unsigned long long)st->allreduce_bytes,
	      (unsigned long long)st->tiles_compute);
	snprintf(path, sizeof(path), "/tmp/pypto-ar-test-%d-%d.json",
		 (int)getpid(), round);
	rc = pypto_run_write_trace(run, path);
	check(!rc && file_has(path, "\"cat\":\"collective\",\"pid\":3") &&
	      file_has(path, "\"kind\":\"allreduce\"") &&
	      file_has(path, "\"tiles_allreduce\":2"), "%d ranks, run %d: "
	      "the Chrome trace has the allreduces in the collectives lane",
	      np, round);
	unlink(path);
	pypto_run_free(run);
}

static void t_sum(void)
{
	struct world_graph w;
	int rc;

	rc = build(&w, -1, -1);
	check(rc == 0, "%d ranks: the graph builds and validates (%d)", np,
	      rc);
	if (rc) {
		unbuild(&w);
		return;
	}
	run_sum(&w, 1);
	run_sum(&w, 2);		/* again: the state is per run */
	unbuild(&w);
	if (!have_win) {	/* a transport without a window */
		struct pypto_xfer x = {
			.op = PYPTO_PUT, .rows = 1, .row_bytes = 8,
			.local = &w,
		};
		struct pypto_graph *g;

		rc = -1;
		if (!pypto_graph_create(&g) &&
		    pypto_add_transfer(g, "put", &x, 1, -1) == 0)
			rc = pypto_run(g, NULL, xp, NULL);
		check(rc == -PYPTO_ERR_INVAL &&
		      strstr(pypto_errmsg(), "no window"), "%d ranks: a "
		      "transfer tile over a transport without a window is "
		      "refused (%d: %s)", np, rc, pypto_errmsg());
		pypto_graph_destroy(g);
	}
}

/* The last rank exits in the tile that feeds ar1. */
static void t_death(void)
{
	struct pypto_config cfg = rank_cfg();
	struct pypto_run *run = NULL;
	struct world_graph w;
	uint64_t t0, t1;
	int rc;

	/* no check() before the run: the last rank never gets past it */
	rc = hcomm_comm_set_coll_timeout(comm, 4000);
	if (rc || build(&w, np - 1, -1)) {
		check(0, "%d ranks, one exits: the graph builds, collective "
		      "timeout 4 s", np);
		unbuild(&w);
		return;
	}
	t0 = now_ns();
	rc = pypto_run(w.g, &cfg, xp, &run);
	t1 = now_ns();
	/* only the survivors get here */
	check(rc == -PYPTO_ERR_IO && strstr(pypto_errmsg(), "allreduce") &&
	      t1 - t0 < 15000000000ULL, "%d ranks, one exits: the others' "
	      "run fails with PYPTO_ERR_IO naming the allreduce in %.3f s "
	      "(%d)", np, (t1 - t0) / 1e9, rc);
	if (me == 0)
		fprintf(stderr, "# rank 0: %s\n", pypto_errmsg());
	check(run && pypto_run_stats(run)->tiles_allreduce == 0 &&
	      event_of(run, w.id_ar1, PYPTO_STAGE_COLLECTIVE),
	      "%d ranks, one exits: the failed run's record has the "
	      "allreduce's event and no completed allreduce", np);
	pypto_run_free(run);
	t0 = now_ns();
	rc = pypto_run(w.g, &cfg, xp, NULL);
	t1 = now_ns();
	check(rc == -PYPTO_ERR_IO && t1 - t0 < 2000000000ULL,
	      "%d ranks, one exits: the next run fails at once (%.3f s, "
	      "%d): the ring is out of step", np, (t1 - t0) / 1e9, rc);
	unbuild(&w);
}

/*
 * The last rank is alive but late: its allreduce is issued after the
 * others' collective timeout.  The others' runs fail with PYPTO_ERR_IO
 * about then (not when the late rank comes), and so does the late one's.
 */
static void t_stall(void)
{
	struct pypto_config cfg = rank_cfg();
	struct world_graph w;
	uint64_t t0, t1;
	bool late = me == np - 1;
	int rc;

	rc = hcomm_comm_set_coll_timeout(comm, STALL_TIMEOUT);
	check(rc == 0 && build(&w, -1, np - 1) == 0, "%d ranks, one late: "
	      "the graph builds, collective timeout %d ms", np,
	      STALL_TIMEOUT);
	t0 = now_ns();
	rc = pypto_run(w.g, &cfg, xp, NULL);
	t1 = now_ns();
	check(rc == -PYPTO_ERR_IO && strstr(pypto_errmsg(), "allreduce") &&
	      (late ? t1 - t0 < 15000000000ULL :
	       t1 - t0 >= STALL_TIMEOUT * 1000000ULL &&
	       t1 - t0 < (STALL_MS - 500) * 1000000ULL),
	      "%d ranks, one late: each run fails with PYPTO_ERR_IO naming "
	      "the allreduce, the punctual ones after the timeout, before "
	      "the late one came (%.3f s, %d)", np, (t1 - t0) / 1e9, rc);
	if (me == 0)
		fprintf(stderr, "# rank 0: %s\n", pypto_errmsg());
	unbuild(&w);
}

/* ---- mirrors: a lost rank's transfers re-placed ---------------------- */

#define MW_CHUNK	16384
#define MW_N		32			/* chunks: gets */
#define MW_KILL		(MW_N * MW_CHUNK)	/* rank 1's flag word */
#define MW_BYTES	(MW_KILL + 4096)
#define MW_SIG		0			/* rank 0 -> 2: done */

static char mwin[MW_BYTES] __attribute__((aligned(4096)));
static bool win_all;		/* every rank has a window (mwin) */

static uint8_t mw_byte(size_t i)
{
	return (uint8_t)(i * 131 + (i >> 9));
}

struct mw_sum {
	const uint8_t *buf;
	size_t off;
	size_t bad;
};

static int mw_sum_fn(void *arg, const struct pypto_exec *ex)
{
	struct mw_sum *m = arg;
	size_t i;

	(void)ex;
	m->bad = 0;
	for (i = 0; i < MW_CHUNK; i++)
		m->bad += m->buf[i] != mw_byte(m->off + i);
	return 0;
}

/* Rank 0's host tiles: until rank 1 has stopped itself (SIGSTOP)... */
static int mw_stopped_fn(void *arg, const struct pypto_exec *ex)
{
	int i;

	(void)arg;
	(void)ex;
	for (i = 0; i < 10000 && !__atomic_load_n(&sh->mw_stopped,
						  __ATOMIC_ACQUIRE); i++)
		sleep_ms(1);
	return __atomic_load_n(&sh->mw_stopped, __ATOMIC_ACQUIRE) ? 0 : 1;
}

/* ... and 200 ms later (the gets to it are in flight meanwhile) kill it. */
static int mw_kill_fn(void *arg, const struct pypto_exec *ex)
{
	(void)arg;
	(void)ex;
	sleep_ms(200);
	return kill(sh->mw_pid, SIGKILL) ? 1 : 0;
}

struct mw_graph {
	struct pypto_graph *g;
	uint8_t *lbuf;
	struct mw_sum sum[MW_N];
	uint64_t one;
	int get[MW_N], flag, stopped, kill;
};

/*
 * Rank 0's graph: MW_N gets of MW_CHUNK bytes, even chunks from rank 1
 * and odd ones from rank 2 (which hold the same bytes), each checked by a
 * compute tile; after the first half a put sets rank 1's flag, it stops
 * itself, and once it has the second half's gets go out, those to rank 1
 * staying in flight until a host tile kills it.
 */
static int mw_build(struct mw_graph *m)
{
	int k, id, rc = 0;

	memset(m, 0, sizeof(*m));
	m->one = 1;
	m->lbuf = aligned_alloc(4096, MW_N * MW_CHUNK);
	if (!m->lbuf || pypto_graph_create(&m->g))
		return -1;
	for (k = 0; k < MW_N && !rc; k++) {
		struct pypto_xfer x = {
			.op = PYPTO_GET, .rows = 1, .row_bytes = MW_CHUNK,
			.local = m->lbuf + (size_t)k * MW_CHUNK,
			.win_off = (uint64_t)k * MW_CHUNK,
		};
		char name[32];

		snprintf(name, sizeof(name), "get%d", k);
		m->get[k] = pypto_add_transfer(m->g, name, &x, 1, -1);
		rc = m->get[k] < 0 ||
		     pypto_tile_set_rank(m->g, m->get[k], k % 2 ? 2 : 1);
		m->sum[k].buf = m->lbuf + (size_t)k * MW_CHUNK;
		m->sum[k].off = (size_t)k * MW_CHUNK;
		snprintf(name, sizeof(name), "sum%d", k);
		id = pypto_add_compute(m->g, name, mw_sum_fn, &m->sum[k], -1);
		rc = rc || id < 0 || pypto_add_dep(m->g, m->get[k], id);
	}
	if (!rc) {
		struct pypto_xfer x = {
			.op = PYPTO_PUT, .rows = 1, .row_bytes = 8,
			.local = &m->one, .win_off = MW_KILL,
		};

		m->flag = pypto_add_transfer(m->g, "flag1", &x, 1, -1);
		m->stopped = pypto_add_host(m->g, "stopped1", mw_stopped_fn,
					    NULL, -1);
		m->kill = pypto_add_host(m->g, "kill1", mw_kill_fn, NULL, -1);
		rc = m->flag < 0 || m->stopped < 0 || m->kill < 0 ||
		     pypto_tile_set_rank(m->g, m->flag, 1) ||
		     pypto_add_dep(m->g, m->flag, m->stopped) ||
		     pypto_add_dep(m->g, m->stopped, m->kill);
	}
	for (k = 0; k < MW_N / 2 && !rc; k++)
		rc = pypto_add_dep(m->g, m->get[k] + 1, m->flag);
	for (k = MW_N / 2; k < MW_N && !rc; k++)
		rc = pypto_add_dep(m->g, m->stopped, m->get[k]);
	return rc ? -1 : 0;
}

static size_t mw_bad(const struct mw_graph *m)
{
	size_t bad = 0;
	int k;

	for (k = 0; k < MW_N; k++)
		bad += m->sum[k].bad;
	return bad;
}

/*
 * The events of a run flagged re-placed (transfer stage); *after_fail:
 * those of a second attempt (the first, in flight to rank 1, failed).
 */
static unsigned int mw_replaced_events(const struct pypto_run *r,
				       unsigned int *after_fail)
{
	const struct pypto_event *ev;
	unsigned int i, n = pypto_run_events(r, &ev), c = 0, a = 0;

	for (i = 0; i < n; i++)
		if (ev[i].stage == PYPTO_STAGE_TRANSFER &&
		    (ev[i].flags & PYPTO_EVF_REPLACED)) {
			c++;
			a += ev[i].attempt > 0;
		}
	if (after_fail)
		*after_fail = a;
	return c;
}

static void mw_rank0(void)
{
	struct pypto_config cfg = rank_cfg();
	struct pypto_loss_plan p;
	struct pypto_xport *mx = NULL;
	struct pypto_run *run = NULL;
	const struct pypto_stats *st;
	struct mw_graph m;
	char *diag = NULL;
	size_t dlen = 0;
	uint64_t t0, t1;
	int rc, r1 = -1, id;
	unsigned int nrep, nfail = 0;
	FILE *f;

	rc = mw_build(&m);
	check(rc == 0, "mirror: rank 0's graph of %u tiles builds (%s)",
	      m.g ? pypto_graph_tiles(m.g) : 0, rc ? pypto_errmsg() : "ok");
	/* arguments */
	check(pypto_xport_hcomm_mirror(xp, 1, 1) == -PYPTO_ERR_INVAL &&
	      pypto_xport_hcomm_mirror(xp, 3, 0) == -PYPTO_ERR_INVAL &&
	      pypto_xport_hcomm_mirror(xp, 1, 3) == -PYPTO_ERR_INVAL &&
	      pypto_xport_hcomm_mirror(xp, -1, 0) == -PYPTO_ERR_INVAL &&
	      pypto_xport_hcomm_mirror(NULL, 1, 2) == -PYPTO_ERR_INVAL &&
	      !pypto_xport_memcpy(&mx, mwin, 64) &&
	      pypto_xport_hcomm_mirror(mx, 1, 2) == -PYPTO_ERR_INVAL,
	      "mirror: refused for rank == mirror, ranks outside 0..2, NULL "
	      "and the memcpy double");
	pypto_xport_destroy(mx);
	check(pypto_tile_set_rank(m.g, m.get[0] + 1, 2) == -PYPTO_ERR_INVAL &&
	      pypto_tile_set_rank(m.g, m.get[0], -2) == -PYPTO_ERR_INVAL &&
	      pypto_tile_set_rank(m.g, 100000, 1) == -PYPTO_ERR_INVAL &&
	      pypto_tile_rank(m.g, m.get[1], &r1) == 0 && r1 == 2 &&
	      pypto_tile_rank(m.g, m.kill, &r1) == -PYPTO_ERR_INVAL &&
	      pypto_graph_loss_plan(m.g, xp, 3, &p) == -PYPTO_ERR_INVAL &&
	      pypto_graph_loss_plan(m.g, xp, 1, NULL) == -PYPTO_ERR_INVAL,
	      "mirror: a rank only for transfer tiles, >= -1; the plan "
	      "refuses rank 3 and NULL");
	{
		struct pypto_graph *g = NULL;
		struct pypto_xfer x = {
			.op = PYPTO_GET, .rows = 1, .row_bytes = 8,
			.local = &m.one,
		};

		rc = -1;
		if (!pypto_graph_create(&g) &&
		    (id = pypto_add_transfer(g, "far", &x, 1, -1)) >= 0 &&
		    !pypto_tile_set_rank(g, id, 5))
			rc = pypto_run(g, &cfg, xp, NULL);
		check(rc == -PYPTO_ERR_INVAL &&
		      strstr(pypto_errmsg(), "names rank 5, outside 0..2"),
		      "mirror: a run refuses a tile naming rank 5 of 3 (%s)",
		      pypto_errmsg());
		pypto_graph_destroy(g);
	}
	/* static analysis, without and with the mirror */
	rc = pypto_graph_loss_plan(m.g, xp, 1, &p);
	check(rc == 0 && p.transfers == MW_N / 2 + 1 && p.replaced == 0 &&
	      p.mirror == -1 && p.first_stranded == m.get[0] &&
	      p.stranded == MW_N + 3 + MW_N / 2,
	      "mirror: without one, losing rank 1 strands its %u transfers "
	      "(first get0) and everything after them: %u tiles", p.transfers,
	      p.stranded);
	rc = pypto_xport_hcomm_mirror(xp, 1, 2) ||
	     pypto_graph_loss_plan(m.g, xp, 1, &p);
	check(rc == 0 && p.transfers == MW_N / 2 + 1 &&
	      p.replaced == p.transfers && p.mirror == 2 &&
	      p.first_stranded == -1 && p.stranded == 0,
	      "mirror: with rank 2 mirroring rank 1, all %u would go to rank "
	      "%d, none stranded", p.replaced, p.mirror);
	/* the run: rank 1 exits half way */
	memset(m.lbuf, 0, MW_N * MW_CHUNK);
	t0 = now_ns();
	rc = pypto_run(m.g, &cfg, xp, &run);
	t1 = now_ns();
	st = pypto_run_stats(run);
	check(rc == 0 && mw_bad(&m) == 0, "mirror: rank 1 lost half way, the "
	      "run completes in %.3f s and all %d chunks hold the right "
	      "bytes (%zu wrong; %s)", (t1 - t0) / 1e9, MW_N, mw_bad(&m),
	      rc ? pypto_errmsg() : "ok");
	nrep = run ? mw_replaced_events(run, &nfail) : 0;
	check(st && st->peer_lost && st->ranks_lost == 1 &&
	      st->tiles_replaced == MW_N / 4 && nrep == MW_N / 4 &&
	      nfail > 0 && st->xfer_retries == 0,
	      "mirror: 1 rank lost, rank 1's %d gets after it re-placed on "
	      "rank 2 (stats %llu, flagged events %u, %u of them after their "
	      "attempt in flight to rank 1 failed), no retry", MW_N / 4,
	      st ? (unsigned long long)st->tiles_replaced : 0ULL, nrep,
	      nfail);
	f = open_memstream(&diag, &dlen);
	if (f && run) {
		pypto_run_diagnose(run, f);
		fclose(f);
	}
	check(diag && strstr(diag, "ranks lost          1; 8 transfer tile(s) "
			     "re-placed on a mirror") &&
	      strstr(diag, "re-placed tiles: get") &&
	      strstr(diag, "its unfinished transfer tiles go to a mirror"),
	      "mirror: the diagnosis names the loss and the re-placed tiles");
	if (diag && (!strstr(diag, "re-placed tiles: get") ||
		     !strstr(diag, "go to a mirror") ||
		     !strstr(diag, "ranks lost          1;")))
		fputs(diag, stderr);
	free(diag);
	pypto_run_free(run);
	/* again: rank 1 is lost from the start, all its tiles go to 2 */
	memset(m.lbuf, 0, MW_N * MW_CHUNK);
	run = NULL;
	rc = pypto_run(m.g, &cfg, xp, &run);
	st = pypto_run_stats(run);
	check(rc == 0 && mw_bad(&m) == 0 && st &&
	      st->tiles_replaced == MW_N / 2 + 1 && st->ranks_lost == 1,
	      "mirror: the next run sends all %d of rank 1's transfers to "
	      "rank 2 (%llu), right bytes (%zu wrong; %s)", MW_N / 2 + 1,
	      st ? (unsigned long long)st->tiles_replaced : 0ULL, mw_bad(&m),
	      rc ? pypto_errmsg() : "ok");
	pypto_run_free(run);
	/* without the mirror the run fails before anything runs */
	rc = pypto_xport_hcomm_mirror(xp, 1, -1);
	t0 = now_ns();
	if (!rc)
		rc = pypto_run(m.g, &cfg, xp, NULL);
	t1 = now_ns();
	check(rc == -PYPTO_ERR_IO && strstr(pypto_errmsg(), "rank 1 was lost") &&
	      strstr(pypto_errmsg(), "no live mirror") &&
	      t1 - t0 < 2000000000ULL, "mirror: without it the run fails at "
	      "once (%.3f s) naming rank 1 and the stranded tile: %s",
	      (t1 - t0) / 1e9, pypto_errmsg());
	rc = hcomm_put_signal(gwin, 2, MW_KILL, &m.one, 8,
			      MW_SIG, 1);
	check(rc == 0, "mirror: rank 2 told to finish (%d)", rc);
	pypto_graph_destroy(m.g);
	free(m.lbuf);
}

/* Ranks 1 and 2 hold the same bytes; rank 1 exits when its flag is set. */
static void t_mirror(void)
{
	volatile uint64_t *flag = (volatile uint64_t *)(mwin + MW_KILL);
	size_t i;
	int k;

	for (i = 0; i < MW_KILL; i++)
		mwin[i] = (char)(me ? mw_byte(i) : 0);
	*flag = 0;
	if (hcomm_barrier(comm)) {
		fprintf(stderr, "rank %d: barrier: %s\n", me, hcomm_errmsg());
		if (me == 0)
			check(0, "mirror: barrier");
		return;
	}
	if (me == 0) {
		mw_rank0();
	} else if (me == 1) {
		/* stopped, the gets to it stay in flight; rank 0 kills it */
		sh->mw_pid = (int)getpid();
		for (k = 0; k < 60000 && !*flag; k++)
			sleep_ms(1);
		__atomic_store_n(&sh->mw_stopped, 1, __ATOMIC_RELEASE);
		raise(SIGSTOP);
		_exit(0);
	} else if (hcomm_signal_wait(comm, MW_SIG, 1, 60000) < 0) {
		fprintf(stderr, "rank 2: rank 0 never said done\n");
	}
}

static char winbuf[4096];

/* broken: fn leaves the communicator failed (its teardown may fail). */
static int rank_main(void (*fn)(void), bool broken)
{
	struct hcomm_win *win = NULL;
	int ret;

	ret = hcomm_comm_init(&comm, NULL);
	if (ret) {
		fprintf(stderr, "rank %d: hcomm_comm_init: %s\n", me,
			hcomm_errmsg());
		return 1;
	}
	/* 2 ranks with a window; 3 without: allreduce tiles need none */
	have_win = np == 2 || win_all;
	ret = have_win ? hcomm_win_create(comm, win_all ? mwin : winbuf,
					  win_all ? sizeof(mwin) :
					  sizeof(winbuf), &win) : 0;
	gwin = win;
	if (!ret)
		ret = pypto_xport_hcomm(&xp, comm, win, me, have_win ?
					(win_all ? mwin : winbuf) : NULL);
	if (!ret && !broken)
		ret = hcomm_comm_set_coll_timeout(comm, 30000);
	if (ret) {
		fprintf(stderr, "rank %d: setup: %s %s\n", me, hcomm_errmsg(),
			pypto_errmsg());
		return 1;
	}
	fn();
	pypto_xport_destroy(xp);
	ret = win ? hcomm_win_free(win) : 0;
	ret = hcomm_comm_destroy(comm) || ret;
	if (ret && !broken) {
		fprintf(stderr, "rank %d: teardown: %s\n", me, hcomm_errmsg());
		return 1;
	}
	return 0;
}

/*
 * Run fn on n forked ranks; survivors: the ranks expected to check,
 * broken: fn leaves the communicator failed.
 */
static void world(const char *name, int n, void (*fn)(void), int survivors,
		  bool broken)
{
	pid_t pid[MAX_RANKS];
	char root[96], v[16];
	int r, st, bad = 0, first = sh->nchecks, i;

	snprintf(root, sizeof(root), "pypto-ar-test-%d-%s-%d", (int)getpid(),
		 name, n);
	for (r = 0; r < n; r++) {
		fflush(stdout);
		pid[r] = fork();
		if (pid[r] < 0) {
			ok(0, "%s, %d ranks: fork: %s", name, n,
			   strerror(errno));
			n = r;
			break;
		}
		if (pid[r])
			continue;
		me = r;
		np = n;
		nth = first;
		alarm(RANK_ALARM);
		snprintf(v, sizeof(v), "%d", r);
		setenv("HCOMM_RANK", v, 1);
		snprintf(v, sizeof(v), "%d", n);
		setenv("HCOMM_WORLD_SIZE", v, 1);
		setenv("HCOMM_ROOT_ADDR", root, 1);
		setenv("HCOMM_TRANSPORT", "tcp", 1);
		unsetenv("PYPTO_TRACE");
		st = rank_main(fn, broken);
		if (r == 0)
			__atomic_store_n(&sh->nchecks, nth, __ATOMIC_RELEASE);
		leak_check();
		_exit(st);
	}
	for (r = 0; r < n; r++) {
		/* t_mirror's rank 1 is killed by rank 0, or here once 0 ended */
		if (win_all && r == 1)
			kill(pid[r], SIGKILL);
		while (waitpid(pid[r], &st, 0) < 0 && errno == EINTR)
			;
		if (win_all && r == 1 && WIFSIGNALED(st) &&
		    WTERMSIG(st) == SIGKILL)
			continue;
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			bad++;
	}
	for (i = first; i < sh->nchecks; i++) {
		struct check *c = &sh->c[i];

		ok(!c->fail && c->pass == survivors, "%s (%d of %d ranks)",
		   c->what, c->pass, survivors);
	}
	ok(sh->nchecks > first, "%s, %d ranks: the checks ran (%d)", name, n,
	   sh->nchecks - first);
	ok(!bad, "%s, %d ranks: every rank exited 0 (%d did not)", name, n,
	   bad);
}

/* ---- in this process: arguments, the issue order, one rank ----------- */

static int32_t abuf[64];

static void t_bad_args(void)
{
	struct {
		const char *what;
		const void *send;
		void *recv;
		size_t count;
		int dt, op, aff;
	} bad[] = {
		{ "send NULL", NULL, abuf, 4, HCOMM_INT32, HCOMM_SUM, -1 },
		{ "recv NULL", abuf, NULL, 4, HCOMM_INT32, HCOMM_SUM, -1 },
		{ "count 0", abuf, abuf, 0, HCOMM_INT32, HCOMM_SUM, -1 },
		{ "count x 4 overflows", abuf, abuf, SIZE_MAX / 2,
		  HCOMM_INT32, HCOMM_SUM, -1 },
		{ "a range past the address space",
		  (void *)(UINTPTR_MAX - 15), abuf, 8, HCOMM_INT32,
		  HCOMM_SUM, -1 },
		{ "dtype 0", abuf, abuf, 4, 0, HCOMM_SUM, -1 },
		{ "dtype HCOMM_DTYPE__MAX", abuf, abuf, 4, HCOMM_DTYPE__MAX,
		  HCOMM_SUM, -1 },
		{ "dtype -1", abuf, abuf, 4, -1, HCOMM_SUM, -1 },
		{ "op 0", abuf, abuf, 4, HCOMM_INT32, 0, -1 },
		{ "op HCOMM_REDOP__MAX", abuf, abuf, 4, HCOMM_INT32,
		  HCOMM_REDOP__MAX, -1 },
		{ "send and recv overlap by 4 bytes", abuf, abuf + 1, 4,
		  HCOMM_INT32, HCOMM_SUM, -1 },
		{ "affinity -2", abuf, abuf + 8, 4, HCOMM_INT32, HCOMM_SUM,
		  -2 },
	};
	struct pypto_graph *g;
	unsigned int i;
	int rc;

	rc = pypto_add_allreduce(NULL, "x", abuf, abuf, 4, HCOMM_INT32,
				 HCOMM_SUM, -1);
	ok(rc == -PYPTO_ERR_INVAL, "allreduce on a NULL graph: "
	   "PYPTO_ERR_INVAL (%d)", rc);
	if (pypto_graph_create(&g))
		return;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rc = pypto_add_allreduce(g, "bad", bad[i].send, bad[i].recv,
					 bad[i].count,
					 (enum hcomm_dtype)bad[i].dt,
					 (enum hcomm_redop)bad[i].op,
					 bad[i].aff);
		ok(rc == -PYPTO_ERR_INVAL && pypto_graph_tiles(g) == 0 &&
		   strstr(pypto_errmsg(), "pypto_add_allreduce"),
		   "refused at build time: %s (%d: %s)", bad[i].what, rc,
		   pypto_errmsg());
	}
	rc = pypto_add_allreduce(g, "in place", abuf, abuf, 64, HCOMM_INT32,
				 HCOMM_SUM, PYPTO_ANY_DEVICE);
	ok(rc == 0 && pypto_tile_kind(g, 0) == PYPTO_ALLREDUCE,
	   "in place (send == recv) is accepted, kind PYPTO_ALLREDUCE (%d)",
	   rc);
	rc = pypto_add_allreduce(g, "disjoint", abuf, abuf + 32, 32,
				 HCOMM_UINT8, HCOMM_AVG, 0);
	ok(rc == 1, "disjoint halves of one buffer are accepted (%d)", rc);
	pypto_graph_destroy(g);
}

static int nop_fn(void *arg, const struct pypto_exec *ex)
{
	(void)arg;
	(void)ex;
	return 0;
}

/* Allreduce tiles may not depend on later ones: validation says so. */
static void t_order_rule(void)
{
	struct pypto_graph *g;
	struct pypto_run *run = NULL;
	uint32_t cyc[8];
	unsigned int n;
	int a, m, b, c, rc;

	if (pypto_graph_create(&g))
		return;
	a = pypto_add_allreduce(g, "first", abuf, abuf, 4, HCOMM_INT32,
				HCOMM_SUM, -1);
	m = pypto_add_compute(g, "middle", nop_fn, NULL, -1);
	b = pypto_add_allreduce(g, "second", abuf + 8, abuf + 8, 4,
				HCOMM_INT32, HCOMM_SUM, -1);
	c = pypto_add_compute(g, "last", nop_fn, NULL, -1);
	pypto_add_dep(g, (uint32_t)a, (uint32_t)m);
	pypto_add_dep(g, (uint32_t)m, (uint32_t)b);
	pypto_add_dep(g, (uint32_t)b, (uint32_t)c);
	rc = pypto_graph_validate(g, NULL);
	ok(rc == 0, "first -> middle -> second (ids in issue order) "
	   "validates (%d)", rc);
	pypto_graph_destroy(g);

	if (pypto_graph_create(&g))
		return;
	a = pypto_add_allreduce(g, "first", abuf, abuf, 4, HCOMM_INT32,
				HCOMM_SUM, -1);
	m = pypto_add_compute(g, "middle", nop_fn, NULL, -1);
	b = pypto_add_allreduce(g, "second", abuf + 8, abuf + 8, 4,
				HCOMM_INT32, HCOMM_SUM, -1);
	pypto_add_dep(g, (uint32_t)b, (uint32_t)m);
	pypto_add_dep(g, (uint32_t)m, (uint32_t)a);
	rc = pypto_graph_validate(g, NULL);
	n = pypto_graph_cycle(g, cyc, 8);
	ok(rc == -PYPTO_DEADLOCK && n == 3 && cyc[0] == (uint32_t)b &&
	   cyc[1] == (uint32_t)m && cyc[2] == (uint32_t)a &&
	   strstr(pypto_errmsg(), "issued in id order") &&
	   strstr(pypto_errmsg(), "second -> middle -> first -> second"),
	   "first waits for second through middle: PYPTO_DEADLOCK, the "
	   "path as the cycle (%d, %u tiles: %s)", rc, n, pypto_errmsg());
	rc = pypto_run(g, NULL, NULL, &run);
	ok(rc == -PYPTO_DEADLOCK && !run, "pypto_run refuses it too (%d)",
	   rc);
	pypto_graph_destroy(g);
}

/*
 * One rank: recv = send, in id order although they become ready in the
 * reverse order; a consumer sees the copy.  x: NULL or the memcpy double.
 */
#define NLOC	4

struct loc_check {
	const int32_t *recv;
	int32_t want;
	int ok;
};

static int loc_check_fn(void *arg, const struct pypto_exec *ex)
{
	struct loc_check *c = arg;
	int i;

	(void)ex;
	c->ok = 1;
	for (i = 0; i < 8; i++)
		c->ok &= c->recv[i] == c->want + i;
	return 0;
}

struct loc_fill {
	int32_t *send;
	int32_t base;
	unsigned int ms;
};

static int loc_fill_fn(void *arg, const struct pypto_exec *ex)
{
	struct loc_fill *f = arg;
	int i;

	(void)ex;
	sleep_ms(f->ms);
	for (i = 0; i < 8; i++)
		f->send[i] = f->base + i;
	return 0;
}

static void t_local(const char *xname, struct pypto_xport *x,
		    uint32_t workers)
{
	int32_t send[NLOC][8], recv[NLOC][8];
	struct loc_fill fill[NLOC];
	struct loc_check chk[NLOC];
	uint32_t ar[NLOC];
	struct pypto_config cfg;
	struct pypto_graph *g;
	struct pypto_run *run = NULL;
	const struct pypto_event *prev = NULL;
	char path[96], *diag = NULL;
	size_t dlen = 0;
	bool order = true, copied = true, seen = true;
	FILE *m;
	int i, rc;

	memset(recv, 0, sizeof(recv));
	if (pypto_graph_create(&g))
		return;
	for (i = 0; i < NLOC; i++) {
		int f, c;

		/* the later the id, the sooner it is ready */
		fill[i] = (struct loc_fill){ send[i], 100 * i,
					     (unsigned int)(NLOC - i) * 15 };
		f = pypto_add_compute(g, "fill", loc_fill_fn, &fill[i], -1);
		/* the last one in place */
		ar[i] = (uint32_t)pypto_add_allreduce(g, "ar", send[i],
						i == NLOC - 1 ? send[i] :
						recv[i], 8, HCOMM_INT32,
						HCOMM_SUM, -1);
		chk[i] = (struct loc_check){ i == NLOC - 1 ? send[i] :
					     recv[i], 100 * i, 0 };
		c = pypto_add_compute(g, "check", loc_check_fn, &chk[i], -1);
		pypto_add_dep(g, (uint32_t)f, ar[i]);
		pypto_add_dep(g, ar[i], (uint32_t)c);
	}
	pypto_config_default(&cfg);
	cfg.workers = workers;
	rc = pypto_run(g, &cfg, x, &run);
	for (i = 0; i < NLOC && run; i++) {
		const struct pypto_event *e;

		e = event_of(run, ar[i], PYPTO_STAGE_COLLECTIVE);
		if (!e)
			seen = false;
		else if (prev && e->t0_ns < prev->t0_ns)
			order = false;
		prev = e ? e : prev;
		copied &= chk[i].ok && (i == NLOC - 1 ||
				       !memcmp(send[i], recv[i], 32));
	}
	ok(rc == 0 && run && seen && copied, "one rank (%s, %u worker%s): "
	   "recv = send, the consumers saw it (%d)", xname, workers,
	   workers == 1 ? "" : "s", rc);
	ok(run && seen && order, "one rank (%s, %u worker%s): issued in id "
	   "order, ready in the reverse one", xname, workers,
	   workers == 1 ? "" : "s");
	ok(run && pypto_run_stats(run)->tiles_allreduce == NLOC &&
	   pypto_run_stats(run)->allreduce_bytes == NLOC * 32,
	   "one rank (%s): stats count %d allreduce tiles, %d bytes", xname,
	   NLOC, NLOC * 32);
	if (!run) {
		pypto_graph_destroy(g);
		return;
	}
	/* diagnosis, trace, timeline, dumps */
	m = open_memstream(&diag, &dlen);
	if (m) {
		pypto_run_diagnose(run, m);
		fclose(m);
	}
	ok(diag && strstr(diag, "4 allreduce") &&
	   strstr(diag, "allreduces          4 of 4 done") &&
	   strstr(diag, "allreduce overlap"), "one rank (%s): the "
	   "diagnosis lists the allreduces", xname);
	free(diag);
	snprintf(path, sizeof(path), "/tmp/pypto-ar-test-%d.html",
		 (int)getpid());
	rc = pypto_run_write_html(run, path);
	ok(!rc && file_has(path, "\"lanes_coll\":1") &&
	   file_has(path, "4 allreduce)"), "one rank (%s): the timeline "
	   "has a collectives lane", xname);
	snprintf(path, sizeof(path), "/tmp/pypto-ar-test-%d.json",
		 (int)getpid());
	rc = pypto_run_write_trace(run, path);
	ok(!rc && file_has(path, "\"name\":\"collectives\"") &&
	   file_has(path, "\"cat\":\"collective\""), "one rank (%s): the "
	   "trace has a collectives lane", xname);
	rc = pypto_dump_graph(g, path, PYPTO_DUMP_JSON);
	ok(!rc && file_has(path, "\"kind\":\"allreduce\"") &&
	   file_has(path, "\"dtype\":\"int32\",\"op\":\"sum\",\"issue\":3"),
	   "one rank (%s): the JSON dump has the kind, type, operation and "
	   "issue position", xname);
	rc = pypto_dump_graph(g, path, PYPTO_DUMP_DOT);
	ok(!rc && file_has(path, "allreduce sum int32 x 8") &&
	   file_has(path, "hexagon"), "one rank (%s): the DOT dump draws "
	   "allreduce tiles", xname);
	unlink(path);
	snprintf(path, sizeof(path), "/tmp/pypto-ar-test-%d.html",
		 (int)getpid());
	unlink(path);
	pypto_run_free(run);
	pypto_graph_destroy(g);
}

int main(void)
{
	static char mem[4096];
	struct pypto_xport *x = NULL;

	signal(SIGPIPE, SIG_IGN);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	unsetenv("PYPTO_TRACE");
	t_bad_args();
	t_order_rule();
	t_local("no transport", NULL, 2);
	t_local("no transport", NULL, 1);
	if (!pypto_xport_memcpy(&x, mem, sizeof(mem))) {
		t_local("memcpy double", x, 2);
		pypto_xport_destroy(x);
	} else {
		ok(0, "pypto_xport_memcpy: %s", pypto_errmsg());
	}
	world("sum", 2, t_sum, 2, false);
	world("sum", 3, t_sum, 3, false);
	world("death", 3, t_death, 2, true);
	world("stall", 3, t_stall, 3, true);
	win_all = true;
	world("mirror", 3, t_mirror, 1, true);
	return tap_done("pypto-allreduce");
}
