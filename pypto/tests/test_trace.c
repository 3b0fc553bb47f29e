/* SPDX-License-Identifier: MIT */
/*
 * libpypto host test: event recording, derived statistics, diagnosis,
 * Chrome trace and HTML timeline (trace.c, html.c), on runs built by hand
 * so every figure has an exact expected value.
 *
 *   test_trace                      the TAP test ("pypto-trace: ...")
 *   test_trace --html-out F [--trace-out F2]
 *                                   write a synthetic pipeline run's
 *                                   timeline (and trace) for test_html.sh
 *                                   when pypto_profile is not available
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "pypto_int.h"
#include "tap.h"

#define NTHREADS	4
#define PER_THREAD	100000		/* > PYPTO_EV_CHUNK: crosses chunks */

static int nop(void *arg, const struct pypto_exec *ex)
{
	(void)arg;
	(void)ex;
	return 0;
}

static char xbuf[4096];

static int py(const char *dir, const char *script, const char *arg,
	      char *out, size_t len);

static int add_xfer(struct pypto_graph *g, const char *name, int dev,
		    uint64_t bytes)
{
	struct pypto_xfer x = {
		.op = PYPTO_PUT, .rows = 1, .row_bytes = bytes,
		.local = xbuf, .win_off = 0,
	};

	return pypto_add_transfer(g, name, &x, 1, dev);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* A run as pypto_run() would leave it before finishing the events. */
static struct pypto_run *mkrun(struct pypto_graph *g, uint32_t workers,
			       uint32_t devices, uint64_t wall)
{
	struct pypto_run *r = calloc(1, sizeof(*r));

	if (!r)
		abort();
	r->g = g;
	pypto_config_default(&r->cfg);
	r->cfg.workers = workers;
	r->cfg.devices = devices;
	r->xport_name = "test";
	/* Absolute times far from 0 so the relative conversion matters. */
	r->t0_ns = mono_ns() + 1000000000ULL;
	r->st.wall_ns = wall;
	r->st.workers = workers;
	r->st.devices = devices;
	r->st.tiles = g ? g->n : 0;
	return r;
}

static void freerun(struct pypto_run *r)
{
	pypto__run_free_events(r);
	free(r);
}

/* Record one event (times relative to the run) from this thread. */
static void rec(struct pypto_run *r, int stage, uint32_t tile,
		uint16_t worker, int32_t dev, uint64_t t0, uint64_t t1,
		uint64_t bytes, uint8_t attempt)
{
	struct pypto_evbuf *b = pypto__ev_thread_buf(r);
	struct pypto_event e = {
		.t0_ns = r->t0_ns + t0, .t1_ns = r->t0_ns + t1,
		.bytes = bytes, .tile = tile, .worker = worker,
		.stage = (uint8_t)stage, .attempt = attempt, .device = dev,
	};

	if (b)
		pypto__ev_record(r, b, &e);
}

static int near(double a, double b)
{
	return fabs(a - b) <= 1e-12 * (fabs(b) > 1 ? fabs(b) : 1);
}

static unsigned int diag(const struct pypto_run *r, char **text)
{
	size_t len;
	FILE *m = open_memstream(text, &len);
	unsigned int mask;

	if (!m)
		abort();
	mask = pypto_run_diagnose(r, m);
	fclose(m);
	return mask;
}

/* ---- recording from several threads ------------------------------- */

struct thr {
	struct pypto_run *r;
	unsigned int id;
};

static uint64_t mt_t0(unsigned int id, unsigned int i)
{
	/* Scrambled start times with many ties across threads. */
	return ((uint64_t)i * 7919 + id * 13) % 100003;
}

static void *mt_thread(void *arg)
{
	struct thr *t = arg;
	unsigned int i;

	for (i = 0; i < PER_THREAD; i++) {
		uint64_t t0 = mt_t0(t->id, i);

		rec(t->r, PYPTO_STAGE_COMPUTE, i % 8, (uint16_t)t->id, 0, t0,
		    t0 + i % 50, i, 0);
	}
	return NULL;
}

static void test_threads(struct pypto_graph *g, const char *dir, int have_py)
{
	pthread_t th[NTHREADS];
	struct thr ta[NTHREADS];
	struct pypto_run *r = mkrun(g, NTHREADS, 1, 200000);
	const struct pypto_event *ev;
	struct pypto_evbuf *b;
	unsigned char *seen;
	unsigned int i, n, nbuf = 0, dup = 0, miss = 0, bad = 0;
	int sorted = 1, rc;
	char path[512];

	for (i = 0; i < NTHREADS; i++) {
		ta[i].r = r;
		ta[i].id = i;
		if (pthread_create(&th[i], NULL, mt_thread, &ta[i]))
			abort();
	}
	for (i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	for (b = atomic_load(&r->bufs); b; b = b->next)
		nbuf++;
	ok(nbuf == NTHREADS, "one buffer per recording thread (%u)", nbuf);

	rc = pypto__run_finish_events(r);
	n = pypto_run_events(r, &ev);
	ok(rc == 0 && n == NTHREADS * PER_THREAD && r->st.events == n,
	   "finish: %u events kept, %llu recorded (want %u)", n,
	   (unsigned long long)r->st.events, NTHREADS * PER_THREAD);
	ok(atomic_load(&r->bufs) == NULL, "buffers handed over and freed");

	seen = calloc(NTHREADS * PER_THREAD, 1);
	if (!seen)
		abort();
	for (i = 0; i < n; i++) {
		const struct pypto_event *e = &ev[i];
		unsigned int k;

		if (i && (e->t0_ns < ev[i - 1].t0_ns ||
			  (e->t0_ns == ev[i - 1].t0_ns &&
			   e->tile < ev[i - 1].tile)))
			sorted = 0;
		if (e->worker >= NTHREADS || e->bytes >= PER_THREAD) {
			bad++;
			continue;
		}
		k = e->worker * PER_THREAD + (unsigned int)e->bytes;
		/* The times came back relative and intact. */
		if (e->t0_ns != mt_t0(e->worker, (unsigned int)e->bytes) ||
		    e->t1_ns != e->t0_ns + e->bytes % 50 ||
		    e->tile != e->bytes % 8)
			bad++;
		if (seen[k]++)
			dup++;
	}
	for (i = 0; i < NTHREADS * PER_THREAD; i++)
		if (!seen[i])
			miss++;
	free(seen);
	ok(dup == 0 && miss == 0 && bad == 0, "every event present once with "
	   "its data (dup %u, missing %u, wrong %u)", dup, miss, bad);
	ok(sorted, "events sorted by t0, then tile");

	/* The page draws the first 20000 and says so. */
	snprintf(path, sizeof(path), "%s/big.html", dir);
	ok(pypto_run_write_html(r, path) == 0, "html of %u events written", n);
	if (!have_py) {
		ok(1, "big html # SKIP no python3");
	} else {
		char out[4096];

		if (py(dir, "html.py", path, out, sizeof(out)))
			out[0] = 0;
		ok(strncmp(out, "scripts=1 events=20000 drawn=20000 total=400000 ",
			   48) == 0, "big html: 20000 of 400000 drawn (%.*s)",
		   (int)strcspn(out, "\n"), out);
	}
	freerun(r);
}

/*
 * A thread that outlives runs (a transport's completion thread): it
 * records for run A, then for B allocated after A was freed (often at
 * A's address), and it alternates between two live runs C and D without
 * piling up buffers.  (No run gets events after its finish_events.)
 */
static pthread_barrier_t bar;
static struct pypto_run *shared_run[2];


static void *persist_thread(void *arg)
{
	unsigned int i;

	(void)arg;
	for (i = 0; i < 5000; i++)
		rec(shared_run[0], PYPTO_STAGE_TRANSFER, 1, 0, 0, i, i + 1, 1, 0);
	pthread_barrier_wait(&bar);	/* main frees A, makes B */
	pthread_barrier_wait(&bar);
	for (i = 0; i < 7000; i++)
		rec(shared_run[0], PYPTO_STAGE_TRANSFER, 2, 0, 0, i, i + 1, 2, 0);
	pthread_barrier_wait(&bar);	/* main frees B, makes C and D */
	pthread_barrier_wait(&bar);
	for (i = 0; i < 300; i++)
		rec(shared_run[i & 1], PYPTO_STAGE_TRANSFER, 3, 0, 0, i, i + 1,
		    3 + (i & 1), 0);
	pthread_barrier_wait(&bar);
	return NULL;
}

static unsigned int nbufs(struct pypto_run *r)
{
	struct pypto_evbuf *b;
	unsigned int n = 0;

	for (b = atomic_load(&r->bufs); b; b = b->next)
		n++;
	return n;
}

static void test_persistent_thread(struct pypto_graph *g)
{
	struct pypto_run *a, *b, *c, *d;
	const struct pypto_event *ev;
	pthread_t th;
	unsigned int n, i, wrong;

	pthread_barrier_init(&bar, NULL, 2);
	a = shared_run[0] = mkrun(g, 1, 1, 10000);
	if (pthread_create(&th, NULL, persist_thread, NULL))
		abort();
	pthread_barrier_wait(&bar);
	pypto__run_finish_events(a);
	ok(pypto_run_events(a, &ev) == 5000, "run A: 5000 events");
	freerun(a);
	b = shared_run[0] = mkrun(g, 1, 1, 10000);
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar);
	ok(nbufs(b) == 1, "run B%s: the thread got a new buffer",
	   b == a ? " (at A's address)" : "");
	pypto__run_finish_events(b);
	n = pypto_run_events(b, &ev);
	for (i = 0, wrong = 0; i < n; i++)
		wrong += ev[i].bytes != 2;
	ok(n == 7000 && wrong == 0, "run B: its 7000 events only (%u, %u "
	   "foreign)", n, wrong);
	freerun(b);
	c = shared_run[0] = mkrun(g, 1, 1, 10000);
	d = shared_run[1] = mkrun(g, 1, 1, 10000);
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar);
	ok(nbufs(c) == 1 && nbufs(d) == 1, "alternating runs: one buffer "
	   "each (%u, %u)", nbufs(c), nbufs(d));
	pthread_join(th, NULL);
	pypto__run_finish_events(c);
	pypto__run_finish_events(d);
	ok(pypto_run_events(c, &ev) == 150 && ev[0].bytes == 3 &&
	   pypto_run_events(d, &ev) == 150 && ev[0].bytes == 4,
	   "alternating runs: 150 events each, in the right run");
	freerun(c);
	freerun(d);
	pthread_barrier_destroy(&bar);
}

/* ---- derived statistics ------------------------------------------- */

static void test_stats(struct pypto_graph *g)
{
	struct pypto_run *r;
	const struct pypto_event *ev;
	double sd;
	unsigned int n;
	int rc;

	/* transfers [0,10) [5,20), compute [10,30) on device 0; host
	 * prefetch [0,4) on worker 1; 2 workers, wall 40. */
	r = mkrun(g, 2, 1, 40);
	rec(r, PYPTO_STAGE_TRANSFER, 1, 0, 0, 0, 10, 100, 0);
	rec(r, PYPTO_STAGE_TRANSFER, 2, 0, 0, 5, 20, 100, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 10, 30, 0, 0);
	rec(r, PYPTO_STAGE_PREFETCH, 0, 1, 0, 0, 4, 0, 0);
	rc = pypto__run_finish_events(r);
	n = pypto_run_events(r, &ev);
	ok(rc == 0 && n == 4, "timeline 1: 4 events (%u)", n);
	ok(near(r->st.worker_util, 24.0 / 80.0), "worker_util = (20 + 4) / "
	   "(2 x 40) (%g)", r->st.worker_util);
	ok(near(r->st.xfer_util, 20.0 / 40.0), "xfer_util = |[0,10) u [5,20)|"
	   " / 40 (%g)", r->st.xfer_util);
	/*
	 * No edges: each transfer holds up a tile of its own.  Exposed:
	 * [0,4) 1 idle x 1, [4,5) 2 idle x 1, [5,10) 2 x 2, [10,20) 1 x 1 =
	 * 25 of 2 workers x 20 in flight.
	 */
	ok(near(r->st.overlap_eff, 1 - 25.0 / 40.0) &&
	   r->st.xfer_exposed_ns == 25 && r->st.xfer_cover_ns == 40,
	   "overlap_eff = 1 - 25 / 40 (%g)", r->st.overlap_eff);
	ok(near(r->st.tile_mean_ns, 20) && r->st.tile_cv == 0,
	   "one compute tile: mean 20, cv 0 (%g, %g)", r->st.tile_mean_ns,
	   r->st.tile_cv);
	ok(n == 4 && ev[0].t0_ns == 0 && ev[0].tile == 0 && ev[1].tile == 1 &&
	   ev[2].t0_ns == 5 && ev[3].t0_ns == 10,
	   "sorted by t0 then tile, times relative to the run");
	freerun(r);

	/*
	 * Three devices, wall 100.  Device 0: transfer [0,10), compute
	 * [10,20): max(10,10)/20.  Device 1: transfers [0,30) [10,20)
	 * [40,50) (union 40), compute [20,60): max(40,40)/60.  Device 2: a
	 * transfer [0,45) only: counts for xfer_util (45/100), not for the
	 * overlap.  Compute tiles 10 and 40: mean 25, std-dev 15, cv 0.6.
	 */
	r = mkrun(g, 2, 3, 100);
	rec(r, PYPTO_STAGE_TRANSFER, 1, 0, 0, 0, 10, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 10, 20, 0, 0);
	rec(r, PYPTO_STAGE_TRANSFER, 1, 1, 1, 0, 30, 0, 0);
	rec(r, PYPTO_STAGE_TRANSFER, 2, 1, 1, 10, 20, 0, 0);
	rec(r, PYPTO_STAGE_TRANSFER, 2, 1, 1, 40, 50, 0, 1);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 1, 1, 20, 60, 0, 0);
	rec(r, PYPTO_STAGE_TRANSFER, 4, 0, 2, 0, 45, 0, 0);
	pypto__run_finish_events(r);
	ok(near(r->st.xfer_util, 0.45), "xfer_util: busiest device (%g)",
	   r->st.xfer_util);
	/*
	 * A tile's attempts span its first start to its last end: tiles 1
	 * [0,30), 2 [10,50), 4 [0,45) in flight; workers busy [10,20) and
	 * [20,60).  Exposed 2x10 + 10 + 10 + 15 + 5 = 60 of 2 x 50.
	 */
	ok(near(r->st.overlap_eff, 1 - 60.0 / 100.0) &&
	   r->st.xfer_exposed_ns == 60,
	   "overlap_eff over all devices' workers (%g)", r->st.overlap_eff);
	sd = 15;
	ok(near(r->st.tile_mean_ns, 25) && near(r->st.tile_cv, sd / 25),
	   "tile mean 25, cv 0.6 (%g, %g)", r->st.tile_mean_ns,
	   r->st.tile_cv);
	ok(near(r->st.worker_util, 50.0 / 200.0), "worker_util 50 / 200 (%g)",
	   r->st.worker_util);
	freerun(r);

	/* No wall time set: the last event's end stands in. */
	r = mkrun(g, 1, 1, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 0, 30, 0, 0);
	rec(r, PYPTO_STAGE_TRANSFER, 1, 0, 0, 20, 60, 0, 0);
	pypto__run_finish_events(r);
	ok(near(r->st.worker_util, 0.5) && near(r->st.xfer_util, 40.0 / 60),
	   "without wall_ns: the events' end (%g, %g)", r->st.worker_util,
	   r->st.xfer_util);
	freerun(r);

	/* Times before the run's start clamp to 0, an end before its start
	 * to the start. */
	r = mkrun(g, 1, 1, 10);
	{
		struct pypto_evbuf *b = pypto__ev_thread_buf(r);
		struct pypto_event e = {
			.t0_ns = r->t0_ns - 5, .t1_ns = r->t0_ns + 3,
			.tile = 3, .stage = PYPTO_STAGE_COMPUTE,
		};

		pypto__ev_record(r, b, &e);
		e.t0_ns = r->t0_ns + 8;
		e.t1_ns = r->t0_ns + 7;
		pypto__ev_record(r, b, &e);
		pypto__ev_record(r, NULL, &e);	/* no buffer: ignored */
		pypto__ev_record(NULL, b, &e);
	}
	pypto__run_finish_events(r);
	pypto_run_events(r, &ev);
	ok(r->nev == 2 && ev[0].t0_ns == 0 && ev[0].t1_ns == 3 &&
	   ev[1].t0_ns == 8 && ev[1].t1_ns == 8, "odd times clamped");
	freerun(r);

	/* Empty run, NULL arguments. */
	r = mkrun(g, 1, 1, 0);
	ok(pypto__run_finish_events(r) == 0 && r->nev == 0 && !r->ev &&
	   r->st.worker_util == 0 && r->st.events == 0, "no events");
	ok(pypto__run_finish_events(r) == 0, "finish twice");
	freerun(r);
	ok(pypto_run_events(NULL, &ev) == 0 && ev == NULL &&
	   pypto_run_diagnose(NULL, stdout) == 0 &&
	   pypto__run_finish_events(NULL) == -PYPTO_ERR_INVAL &&
	   pypto_run_write_trace(NULL, "/tmp/x") == -PYPTO_ERR_INVAL &&
	   pypto_run_write_html(NULL, "/tmp/x") == -PYPTO_ERR_INVAL &&
	   pypto__ev_thread_buf(NULL) == NULL, "NULL arguments");
	pypto__run_free_events(NULL);
}

/* ---- overlap efficiency -------------------------------------------- */

/*
 * overlap_eff = 1 - exposed / covered: covered is workers x the time with
 * a transfer in flight, exposed the part of it in which a worker was idle
 * while a tile was waiting only for a transfer (at most one worker per
 * such tile).  Three hand-made runs with known answers; the old
 * definition (per device max(union of transfers, union of computes) /
 * span) read 0.5, 1.0 and 0.89 for them: the starved run above the
 * overlapped one.
 */
static void test_overlap(void)
{
	struct pypto_graph *g;
	struct pypto_run *r;
	double a, b, c;
	int x[8], t[8], h, i, k;

	/* A: one worker, transfer and compute alternate: nothing hidden. */
	pypto_graph_create(&g);
	x[0] = add_xfer(g, "x0", 0, 64);
	t[0] = pypto_add_compute(g, "c0", nop, NULL, 0);
	x[1] = add_xfer(g, "x1", 0, 64);
	t[1] = pypto_add_compute(g, "c1", nop, NULL, 0);
	pypto_add_dep(g, x[0], t[0]);
	pypto_add_dep(g, t[0], x[1]);	/* one buffer: reused after c0 */
	pypto_add_dep(g, x[1], t[1]);
	r = mkrun(g, 1, 1, 40);
	rec(r, PYPTO_STAGE_TRANSFER, x[0], 0, 0, 0, 10, 64, 0);
	rec(r, PYPTO_STAGE_COMPUTE, t[0], 0, 0, 10, 20, 0, 0);
	rec(r, PYPTO_STAGE_TRANSFER, x[1], 0, 0, 20, 30, 64, 0);
	rec(r, PYPTO_STAGE_COMPUTE, t[1], 0, 0, 30, 40, 0, 0);
	pypto__run_finish_events(r);
	a = r->st.overlap_eff;
	ok(near(a, 0) && r->st.xfer_exposed_ns == 20 &&
	   r->st.xfer_cover_ns == 20,
	   "alternating transfer and compute on one worker: overlap %g "
	   "(exposed %llu of %llu worker-ns)", a,
	   (unsigned long long)r->st.xfer_exposed_ns,
	   (unsigned long long)r->st.xfer_cover_ns);
	freerun(r);
	pypto_graph_destroy(g);

	/*
	 * B: four workers, five transfers issued at 0 land one every 10 ns
	 * (a deep prefetch queued on a slow engine); one worker at a time
	 * computes, three starve.  Exposed: 3 + 3 + 3 + 2 + 1 tiles-worth
	 * x 10 ns = 120 of 4 x 50.
	 */
	pypto_graph_create(&g);
	h = pypto_add_compute(g, "h", nop, NULL, 0);
	for (i = 0; i < 5; i++) {
		x[i] = add_xfer(g, NULL, 0, 64);
		t[i] = pypto_add_compute(g, NULL, nop, NULL, 0);
		pypto_add_dep(g, x[i], t[i]);
	}
	r = mkrun(g, 4, 1, 60);
	rec(r, PYPTO_STAGE_COMPUTE, h, 3, 0, 0, 10, 0, 0);
	for (i = 0; i < 5; i++) {
		rec(r, PYPTO_STAGE_TRANSFER, x[i], 0, 0, 0, 10 * (i + 1), 64, 0);
		rec(r, PYPTO_STAGE_COMPUTE, t[i], i % 4, 0, 10 * (i + 1),
		    10 * (i + 2), 0, 0);
	}
	pypto__run_finish_events(r);
	b = r->st.overlap_eff;
	ok(near(b, 1 - 120.0 / 200.0) && r->st.xfer_exposed_ns == 120 &&
	   r->st.xfer_cover_ns == 200,
	   "four workers, one fed at a time, deep prefetch: overlap %g (the "
	   "union of computes covers the run: the old figure read 1.0)", b);
	freerun(r);
	pypto_graph_destroy(g);

	/*
	 * C: two workers, four stages of two tiles; stage s + 1's transfers
	 * fly while stage s computes.  Only the first stage's 10 ns are
	 * exposed, on both workers: 20 of 2 x 40.
	 */
	pypto_graph_create(&g);
	for (i = 0; i < 4; i++)
		for (k = 0; k < 2; k++) {
			int xi = add_xfer(g, NULL, 0, 64);
			int ci = pypto_add_compute(g, NULL, nop, NULL, 0);

			pypto_add_dep(g, xi, ci);
		}
	r = mkrun(g, 2, 1, 90);
	for (i = 0; i < 4; i++)
		for (k = 0; k < 2; k++) {
			uint32_t xi = (uint32_t)(4 * i + 2 * k);
			uint64_t x0 = i ? 20 * i - 10 : 0;

			rec(r, PYPTO_STAGE_TRANSFER, xi, k, 0, x0, x0 + 10, 64,
			    0);
			rec(r, PYPTO_STAGE_COMPUTE, xi + 1, k, 0, 10 + 20 * i,
			    30 + 20 * i, 0, 0);
		}
	pypto__run_finish_events(r);
	c = r->st.overlap_eff;
	ok(near(c, 1 - 20.0 / 80.0) && r->st.xfer_exposed_ns == 20 &&
	   r->st.xfer_cover_ns == 80,
	   "two workers, next stage's transfers under this stage's compute: "
	   "overlap %g", c);
	ok(a < b && b < c, "starved < partly fed < overlapped (%g < %g < %g)",
	   a, b, c);
	freerun(r);
	pypto_graph_destroy(g);
}

/* ---- diagnosis ----------------------------------------------------- */

/* The transport's measured busy time, as pypto_run() would set it. */
static void engine(struct pypto_run *r, uint64_t busy, uint32_t lanes)
{
	r->st.engine_known = 1;
	r->st.engine_busy_ns = busy;
	r->st.engine_lanes = lanes;
	r->st.engine_util = (double)busy / ((double)lanes *
					    (double)r->st.wall_ns);
}

static void test_diagnosis(struct pypto_graph *g)
{
	struct pypto_run *r;
	unsigned int m;
	char *t;

	/*
	 * Transfers in flight 95 % of the run, workers fully busy, even
	 * tiles.  In flight is not busy (queueing counts): without the
	 * transport's busy time the rule cannot be evaluated, and says so.
	 */
	r = mkrun(g, 1, 1, 100);
	rec(r, PYPTO_STAGE_TRANSFER, 1, 0, 0, 0, 95, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 0, 50, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 50, 100, 0, 0);
	pypto__run_finish_events(r);
	m = diag(r, &t);
	ok(m == 0 && strstr(t, "COMM_BOUND not evaluated") &&
	   strstr(t, "95.0 %"),
	   "transfers in flight 95 %%, engine busy unknown: no COMM_BOUND, "
	   "the rule is reported as not evaluated: mask %#x", m);
	if (m)
		fputs(t, stdout);
	free(t);
	/* The engine's own busy time: 2 lanes busy 190 of 2 x 100. */
	engine(r, 190, 2);
	m = diag(r, &t);
	ok(m == PYPTO_DIAG_COMM_BOUND && strstr(t, "COMM_BOUND") &&
	   strstr(t, "95.0 %") && strstr(t, "larger tiles / fewer transfers")
	   && strstr(t, "QoS") && !strstr(t, "no bottleneck"),
	   "engine busy 95 %% (measured): comm-bound: mask %#x", m);
	if (m != PYPTO_DIAG_COMM_BOUND)
		fputs(t, stdout);
	free(t);
	ok(pypto_run_diagnose(r, NULL) == m, "mask without a stream");
	/* Busy 50 % with transfers in flight 95 %: queued, not bound. */
	engine(r, 100, 2);
	ok(pypto_run_diagnose(r, NULL) == 0, "engine busy 50 %%, in flight "
	   "95 %%: not comm-bound");
	freerun(r);

	/* Exactly 90 % is not over the threshold. */
	r = mkrun(g, 1, 1, 100);
	rec(r, PYPTO_STAGE_TRANSFER, 1, 0, 0, 0, 90, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 0, 100, 0, 0);
	pypto__run_finish_events(r);
	engine(r, 90, 1);
	ok(pypto_run_diagnose(r, NULL) == 0, "transfer engine busy 90 %%: "
	   "not comm-bound");
	freerun(r);

	/* Two workers each busy half the run. */
	r = mkrun(g, 2, 1, 100);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 0, 50, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 1, 0, 0, 50, 0, 0);
	pypto__run_finish_events(r);
	m = diag(r, &t);
	ok(m == PYPTO_DIAG_UNDERUSED && strstr(t, "UNDERUSED") &&
	   strstr(t, "50.0 %") && strstr(t, "prefetch_depth") &&
	   strstr(t, "double_buffering"), "under-used run: mask %#x", m);
	free(t);
	freerun(r);

	/* Exactly 60 % is not under. */
	r = mkrun(g, 2, 1, 100);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 0, 60, 0, 0);
	rec(r, PYPTO_STAGE_PREFETCH, 0, 1, 0, 0, 60, 0, 0);
	pypto__run_finish_events(r);
	ok(pypto_run_diagnose(r, NULL) == 0 && near(r->st.worker_util, 0.6),
	   "worker utilisation 60 %%: not under-used");
	freerun(r);

	/*
	 * Load imbalance is per worker: worker 0 runs three even tiles,
	 * worker 1 one (busy 30 and 10: mean 20, std-dev 10, cv 0.5), though
	 * every tile takes 10 (tile cv 0).
	 */
	r = mkrun(g, 2, 1, 40);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 0, 10, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 10, 20, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 20, 30, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 1, 0, 0, 10, 0, 0);
	pypto__run_finish_events(r);
	m = diag(r, &t);
	ok((m & PYPTO_DIAG_IMBALANCE) && strstr(t, "IMBALANCE") &&
	   strstr(t, "50.0 %") && near(r->st.worker_cv, 0.5) &&
	   r->st.tile_cv == 0,
	   "even tiles, uneven workers: imbalanced (worker cv %g): mask %#x",
	   r->st.worker_cv, m);
	free(t);
	freerun(r);

	/*
	 * Tiles of 10 and 30 on two workers, 40 each: balanced; the tile
	 * time spread is an observation, not the rule.
	 */
	r = mkrun(g, 2, 1, 40);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 0, 10, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 10, 40, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 1, 0, 0, 30, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 1, 0, 30, 40, 0, 0);
	pypto__run_finish_events(r);
	m = diag(r, &t);
	ok(m == 0 && r->st.worker_cv == 0 && near(r->st.tile_cv, 0.5) &&
	   strstr(t, "cv 0.500") && strstr(t, "no bottleneck"),
	   "uneven tiles, even workers: not imbalanced, tile cv %g listed: "
	   "mask %#x", r->st.tile_cv, m);
	if (m)
		fputs(t, stdout);
	free(t);
	freerun(r);

	/* Healthy: busy workers, even tiles, transfers half the time. */
	r = mkrun(g, 1, 1, 100);
	rec(r, PYPTO_STAGE_TRANSFER, 1, 0, 0, 0, 50, 4096, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 0, 25, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 25, 50, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 50, 75, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 75, 100, 0, 0);
	r->st.rounds = 4;
	r->st.descs = 10;
	r->st.steals = 3;
	r->st.xfer_retries = 2;
	pypto__run_finish_events(r);
	m = diag(r, &t);
	ok(m == 0 && strstr(t, "no bottleneck found") &&
	   strstr(t, "2.5 descriptors per round") && strstr(t, "steals") &&
	   strstr(t, "retries             2") && strstr(t, "overlap"),
	   "healthy run: no rule, the figures listed");
	if (m)
		fputs(t, stdout);
	free(t);
	freerun(r);

	/* All three at once. */
	r = mkrun(g, 2, 1, 100);
	rec(r, PYPTO_STAGE_TRANSFER, 1, 0, 0, 0, 100, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 0, 10, 0, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 3, 1, 0, 0, 40, 0, 0);
	pypto__run_finish_events(r);
	engine(r, 99, 1);
	m = diag(r, &t);
	ok(m == (PYPTO_DIAG_COMM_BOUND | PYPTO_DIAG_UNDERUSED |
		 PYPTO_DIAG_IMBALANCE) && strstr(t, "COMM_BOUND") &&
	   strstr(t, "UNDERUSED") && strstr(t, "IMBALANCE"),
	   "all rules fire: mask %#x", m);
	free(t);
	freerun(r);

	/* No events (profile off): utilisation from the counters only. */
	r = mkrun(g, 2, 1, 100);
	r->st.compute_ns = 150;
	r->st.host_ns = 20;
	pypto__run_finish_events(r);
	m = diag(r, &t);
	ok(m == 0 && strstr(t, "85.0 %") && strstr(t, "from the counters"),
	   "no events: worker utilisation from the counters");
	free(t);
	r->st.compute_ns = 50;
	ok(pypto_run_diagnose(r, NULL) == PYPTO_DIAG_UNDERUSED,
	   "no events, 35 %% busy: under-used");
	freerun(r);
}

/*
 * Link events (what pypto_run() keeps from libhcomm's listener): the
 * diagnosis lists them with the failover's stall and the delayed tiles by
 * name; the Chrome trace has each as an instant marker, the delayed flag
 * on the transfers and the counts in otherData.
 */
static void test_links(struct pypto_graph *g, const char *dir, int have_py)
{
	static const struct { uint64_t t; uint32_t type; int32_t xp; } L[] = {
		{ 100000000ULL, HCOMM_EVENT_LINK_DOWN, HCOMM_XPORT_RDMA },
		{ 256000000ULL, HCOMM_EVENT_FAILED_OVER, HCOMM_XPORT_TCP },
		{ 1500000000ULL, HCOMM_EVENT_RECOVERED, HCOMM_XPORT_RDMA },
	};
	struct pypto_run *r = mkrun(g, 1, 1, 2000000000ULL);
	struct pypto_evbuf *b = pypto__ev_thread_buf(r);
	const struct pypto_link_event *le;
	char path[512], cmd[700], *t, *j;
	unsigned int i, n;

	for (i = 0; i < 3; i++) {
		struct pypto_event e = {
			.t0_ns = r->t0_ns + 90000000ULL * i,
			.t1_ns = r->t0_ns + 90000000ULL * i + 200000000ULL,
			.bytes = 64, .tile = i == 2 ? 4 : i + 1,
			.stage = PYPTO_STAGE_TRANSFER,
			.flags = i < 2 ? PYPTO_EVF_DELAYED : 0,
		};

		if (b)
			pypto__ev_record(r, b, &e);
	}
	for (i = 0; i < 3; i++) {
		r->lev[i].t_ns = L[i].t;
		r->lev[i].type = L[i].type;
		r->lev[i].peer = 1;
		r->lev[i].xport = L[i].xp;
		r->lev[i].tiles_in_flight = i ? 0 : 2;
		snprintf(r->lev[i].why, sizeof(r->lev[i].why), "why %u", i);
	}
	r->nlev = 3;
	r->st.link_events = 3;
	r->st.failovers = 1;
	r->st.failover_stall_ns = 156000000ULL;
	r->st.tiles_delayed = 2;
	pypto__run_finish_events(r);
	n = pypto_run_link_events(r, &le);
	ok(n == 3 && le == r->lev && le[1].type == HCOMM_EVENT_FAILED_OVER &&
	   pypto_run_link_events(NULL, &le) == 0 && !le,
	   "pypto_run_link_events: the run's 3, none for NULL");
	diag(r, &t);
	ok(strstr(t, "link events         3 (libhcomm), 1 failover(s), "
		  "stall 156.000 ms in all, 2 transfer tile(s) delayed") &&
	   strstr(t, "link-down   rank 1, rdma, 2 transfer tile(s) in flight") &&
	   strstr(t, "failed-over rank 1, tcp, stall 156.000 ms: why 1") &&
	   strstr(t, "recovered   rank 1, rdma: why 2") &&
	   strstr(t, "delayed tiles: put a, put b\n"),
	   "diagnosis: the link events, the stall, the delayed tiles by name");
	if (!strstr(t, "delayed tiles: put a, put b\n"))
		fputs(t, stdout);
	free(t);
	snprintf(path, sizeof(path), "%s/links.json", dir);
	ok(pypto_run_write_trace(r, path) == 0, "trace with link events");
	j = NULL;
	{
		FILE *f = fopen(path, "r");
		size_t len = 0;

		if (f) {
			j = calloc(1, 1 << 16);
			len = j ? fread(j, 1, (1 << 16) - 1, f) : 0;
			fclose(f);
		}
		(void)len;
	}
	ok(j && strstr(j, "{\"ph\":\"i\",\"s\":\"g\",\"name\":\"link-down\"") &&
	   strstr(j, "\"failed-over\"") && strstr(j, "\"tiles_in_flight\":2") &&
	   strstr(j, "\"delayed\":1") && strstr(j, "\"delayed\":0") &&
	   strstr(j, "\"failovers\":1,\"failover_stall_ns\":156000000,"
		  "\"tiles_delayed\":2,\"peer_lost\":0"),
	   "trace: link markers, the delayed flags, the counts");
	free(j);
	if (have_py) {
		snprintf(cmd, sizeof(cmd), "python3 -c 'import json,sys; "
			 "d=json.load(open(sys.argv[1])); "
			 "assert sum(e[\"ph\"]==\"i\" for e in d[\"traceEvents\"])==3' %s",
			 path);
		ok(system(cmd) == 0, "the trace with link events is JSON "
		   "(python3 json) with 3 markers");
	}
	freerun(r);
}

static void test_tile_size(struct pypto_graph *g)
{
	static const struct {
		enum pypto_workload wl;
		unsigned int size;
		const char *want;
	} c[] = {
		{ PYPTO_WL_CONV, 128, "convolution workload, tile_size 128: "
		  "inside the recommended 128-256" },
		{ PYPTO_WL_CONV, 256, "inside the recommended 128-256" },
		{ PYPTO_WL_CONV, 64, "tile_size 64: outside the recommended "
		  "128-256" },
		{ PYPTO_WL_FC, 64, "fully connected workload, tile_size 64: "
		  "inside the recommended 64-128" },
		{ PYPTO_WL_FC, 256, "tile_size 256: outside the recommended "
		  "64-128" },
		{ PYPTO_WL_ATTENTION, 48, "attention workload, tile_size 48: "
		  "inside the recommended 32-64" },
		{ PYPTO_WL_ATTENTION, 16, "tile_size 16: outside the "
		  "recommended 32-64" },
		{ PYPTO_WL_GENERIC, 100, "generic workload, tile_size 100: no "
		  "guidance" },
	};
	unsigned int i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct pypto_run *r = mkrun(g, 1, 1, 100);
		char *t;

		pypto_graph_set_workload(g, c[i].wl, c[i].size);
		rec(r, PYPTO_STAGE_COMPUTE, 3, 0, 0, 0, 100, 0, 0);
		pypto__run_finish_events(r);
		diag(r, &t);
		ok(strstr(t, c[i].want) != NULL, "tile size line: %s",
		   c[i].want);
		free(t);
		freerun(r);
	}
	/* Without a size in the graph the configuration's is used. */
	{
		struct pypto_run *r = mkrun(g, 1, 1, 100);
		char *t;

		pypto_graph_set_workload(g, PYPTO_WL_FC, 0);
		r->cfg.tile_size = 96;
		diag(r, &t);
		ok(strstr(t, "tile_size 96: inside the recommended 64-128") !=
		   NULL, "tile size from the configuration");
		free(t);
		freerun(r);
	}
	pypto_graph_set_workload(g, PYPTO_WL_GENERIC, 0);
}

/* ---- Chrome trace and HTML ---------------------------------------- */

static const char trace_py[] =
"import json, sys\n"
"def bad(x):\n"
"    raise ValueError('non-finite number ' + x)\n"
"d = json.load(open(sys.argv[1], encoding='utf-8'), parse_constant=bad)\n"
"ev = d['traceEvents']\n"
"x = {1: 0, 2: 0}\n"
"names = []\n"
"for e in ev:\n"
"    if e['ph'] == 'X':\n"
"        x[e['pid']] += 1\n"
"        assert e['dur'] >= 0 and e['ts'] >= 0\n"
"        for k in ('tile', 'name', 'kind', 'device', 'bytes', 'attempt'):\n"
"            assert k in e['args'], k\n"
"    if e['ph'] == 'M' and e['name'] == 'thread_name':\n"
"        names.append(e['args']['name'])\n"
"s = sum(1 for e in ev if e['ph'] == 's')\n"
"f = sum(1 for e in ev if e['ph'] == 'f')\n"
"odd = [e['args']['name'] for e in ev if e['ph'] == 'X' and\n"
"       e['args']['tile'] == 5][0]\n"
"assert d['displayTimeUnit'] == 'ns'\n"
"lanes = {}\n"
"for e in ev:\n"
"    if e['ph'] == 'X':\n"
"        lanes.setdefault((e['pid'], e['tid']), []).append(e)\n"
"over = 0\n"
"for l in lanes.values():\n"
"    l.sort(key=lambda e: e['ts'])\n"
"    ns = lambda v: round(v * 1000)\n"
"    over += sum(1 for a, b in zip(l, l[1:])\n"
"                if ns(b['ts']) < ns(a['ts']) + ns(a['dur']))\n"
"print('x1=%d x2=%d s=%d f=%d over=%d util=%g' % (x[1], x[2], s, f,\n"
"      over, d['otherData']['worker_util']))\n"
"print('|'.join(names))\n"
"print(json.dumps(odd))\n"
"print([ (e['ts'], e['dur']) for e in ev if e['ph'] == 'X'][0])\n";

static const char html_py[] =
"import json, re, sys\n"
"h = open(sys.argv[1], encoding='utf-8').read()\n"
"tag = '<script type=\"application/json\" id=\"pypto-data\">'\n"
"m = re.search(re.escape(tag) + '(.*?)</script>', h, re.S)\n"
"d = json.loads(m.group(1))\n"
"print('scripts=%d events=%d drawn=%d total=%d edges=%d net=%d' % (\n"
"    h.count(tag), len(d['events']), d['drawn'], d['events_total'],\n"
"    len(d['edges']), h.count('http://') + h.count('https://')))\n"
"print(d['tiles'].get('5', ['?'])[0])\n"
"print(sorted(map(tuple, d['edges'])))\n"
"print(d['diagnosis'].splitlines()[0])\n";

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

/* Run a python helper; its stdout lines into out (newline-separated). */
static int py(const char *dir, const char *script, const char *arg,
	      char *out, size_t len)
{
	char cmd[1024];
	size_t n;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "python3 %s/%s %s", dir, script, arg);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	n = fread(out, 1, len - 1, p);
	out[n] = 0;
	return pclose(p);
}

/*
 * A write that fails half way (RLIMIT_FSIZE: EFBIG) leaves no partial
 * file; a device that refuses the data (/dev/full) is not removed.
 */
static void write_failures(const struct pypto_run *r, const char *dir)
{
	struct rlimit old, lim;
	char path[512];
	struct stat sb;
	int rt, rh;

	snprintf(path, sizeof(path), "%s/cut.json", dir);
	signal(SIGXFSZ, SIG_IGN);
	getrlimit(RLIMIT_FSIZE, &old);
	lim = old;
	lim.rlim_cur = 512;
	setrlimit(RLIMIT_FSIZE, &lim);
	rt = pypto_run_write_trace(r, path);
	ok(rt == -PYPTO_ERR_SYS && strstr(pypto_errmsg(), path) &&
	   access(path, F_OK) != 0,
	   "trace cut short by the file size limit: PYPTO_ERR_SYS, no partial file (%s)",
	   pypto_errmsg());
	snprintf(path, sizeof(path), "%s/cut.html", dir);
	rh = pypto_run_write_html(r, path);
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, SIG_DFL);
	ok(rh == -PYPTO_ERR_SYS && access(path, F_OK) != 0,
	   "html cut short: PYPTO_ERR_SYS, no partial file");
	if (access("/dev/full", W_OK) != 0) {
		ok(1, "writes to /dev/full # SKIP no /dev/full");
		return;
	}
	rt = pypto_run_write_trace(r, "/dev/full");
	ok(rt == -PYPTO_ERR_SYS && strstr(pypto_errmsg(), "No space"),
	   "trace to /dev/full: PYPTO_ERR_SYS (%s)", pypto_errmsg());
	rh = pypto_run_write_html(r, "/dev/full");
	ok(rh == -PYPTO_ERR_SYS && stat("/dev/full", &sb) == 0 &&
	   S_ISCHR(sb.st_mode),
	   "html to /dev/full: PYPTO_ERR_SYS, the device left in place");
}

/*
 * Graph: h0 -> x1 -> c2 -> x3, x1 -> c4, plus tile 5 with a hostile name
 * (quote, backslash, newline, "</script>", a UTF-8 sequence cut short).
 * Events: h0 prefetch on worker 0, x1 on device 0 twice (attempt 0
 * failed, attempt 1), c2 compute worker 1, x3 on device 1, tile 5
 * compute on worker 2, tile 6 a transfer on device 0 that overlaps x1's
 * first attempt (a second row of the device's lane).  c4 has no event:
 * edge x1 -> c4 is left out.
 */
static void test_outputs(const char *dir, int have_py)
{
	struct pypto_graph *g;
	struct pypto_run *r;
	char path[512], out[4096];
	char *html = NULL;
	size_t hl = 0;
	FILE *f;
	int h0, x1, c2, x3, c4, t5, x6, rc;

	if (pypto_graph_create(&g))
		abort();
	h0 = pypto_add_host(g, "pack A0", nop, NULL, 0);
	x1 = add_xfer(g, "put A0", 0, 4096);
	c2 = pypto_add_compute(g, "gemm 0,0", nop, NULL, 0);
	x3 = add_xfer(g, "get C0", 1, 1024);
	c4 = pypto_add_compute(g, "unused", nop, NULL, 0);
	t5 = pypto_add_compute(g, "a\"b\\c\n</script><x>\xc3", nop, NULL, 0);
	x6 = add_xfer(g, "put B0", 0, 2048);
	ok(h0 == 0 && x1 == 1 && c2 == 2 && x3 == 3 && c4 == 4 && t5 == 5 &&
	   x6 == 6,
	   "output graph built");
	pypto_add_dep(g, h0, x1);
	pypto_add_dep(g, x1, c2);
	pypto_add_dep(g, c2, x3);
	pypto_add_dep(g, x1, c4);

	r = mkrun(g, 3, 2, 100000);
	rec(r, PYPTO_STAGE_PREFETCH, 0, 0, 0, 0, 1000, 0, 0);
	rec(r, PYPTO_STAGE_TRANSFER, 1, 0, 0, 1000, 3000, 4096, 0);
	rec(r, PYPTO_STAGE_TRANSFER, 1, 0, 0, 3000, 5500, 4096, 1);
	rec(r, PYPTO_STAGE_COMPUTE, 2, 1, 0, 5500, 9500, 0, 0);
	rec(r, PYPTO_STAGE_TRANSFER, 3, 1, 1, 9500, 10001, 1024, 0);
	rec(r, PYPTO_STAGE_COMPUTE, 5, 2, 1, 1234567, 1234568, 0, 0);
	rec(r, PYPTO_STAGE_TRANSFER, 6, 2, 0, 2000, 4000, 2048, 0);
	r->st.wall_ns = 1300000;
	pypto__run_finish_events(r);

	snprintf(path, sizeof(path), "%s/trace.json", dir);
	rc = pypto_run_write_trace(r, path);
	ok(rc == 0, "trace written (%s)", rc ? pypto_errmsg() : "ok");
	if (!have_py) {
		ok(1, "trace parses # SKIP no python3");
	} else {
		rc = py(dir, "trace.py", path, out, sizeof(out));
		ok(rc == 0 && strncmp(out, "x1=3 x2=4 s=3 f=3 over=0 ", 25) == 0,
		   "trace parses: 3 worker and 4 transfer slices, 3 flows "
		   "(h0->x1, x1->c2, c2->x3; not x1->c4), no overlap in a "
		   "lane");
		ok(strstr(out, "\nworker 0|worker 1|worker 2|device 0 transfers"
			   "|device 0 transfers (row 2)|device 1 transfers\n")
		   != NULL, "lanes named: workers, device transfers and the "
		   "row of the overlapping transfer");
		ok(strstr(out, "\n\"a\\\"b\\\\c\\n</script><x>\\ufffd\"\n") !=
		   NULL, "hostile name escaped, cut UTF-8 replaced");
		ok(strstr(out, "\n(0.0, 1.0)\n") != NULL,
		   "ts/dur in microseconds");
		if (rc)
			fputs(out, stdout);
	}
	ok(pypto_run_write_trace(r, "/nonexistent/dir/t.json") ==
	   -PYPTO_ERR_SYS && strstr(pypto_errmsg(), "/nonexistent/dir"),
	   "unwritable trace path: PYPTO_ERR_SYS naming it");

	snprintf(path, sizeof(path), "%s/timeline.html", dir);
	rc = pypto_run_write_html(r, path);
	ok(rc == 0, "html written (%s)", rc ? pypto_errmsg() : "ok");
	f = fopen(path, "r");
	if (f) {
		char buf[65536];
		size_t n;
		FILE *m = open_memstream(&html, &hl);

		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			fwrite(buf, 1, n, m);
		fclose(m);
		fclose(f);
	}
	ok(html && !strstr(html, "http://") && !strstr(html, "https://") &&
	   !strstr(html, "src=") && !strstr(html, "@import") &&
	   !strstr(html, "url(http"), "html is self-contained (no network "
	   "references)");
	{
		const char *tag = "<script type=\"application/json\" "
				  "id=\"pypto-data\">";
		const char *p = html, *q;
		int count = 0;

		while (p && (p = strstr(p, tag))) {
			count++;
			p += strlen(tag);
		}
		ok(count == 1, "one data element (%d)", count);
		p = html ? strstr(html, tag) : NULL;
		q = p ? strstr(p, "</script>") : NULL;
		ok(q && !memmem(p, q - p, "</", 2) &&
		   strstr(html, "<title>pypto timeline</title>") &&
		   strstr(html, "document.title = 'pypto timeline: ' + drawn") &&
		   strstr(html, "dataset.tiles") &&
		   strstr(html, "'pypto timeline: error'"),
		   "data has no \"</\"; page sets the title and data-tiles");
		ok(html && strstr(html, "<pre id=\"diag\"") &&
		   strstr(html, "pypto diagnosis: 3 workers, 2 devices") &&
		   strstr(html, "pypto diagnosis: 3 workers, 2 devices") <
		   strstr(html, "pypto-data"),
		   "diagnosis rendered in the page");
	}
	if (!have_py) {
		ok(1, "html data parses # SKIP no python3");
	} else {
		rc = py(dir, "html.py", path, out, sizeof(out));
		ok(rc == 0 && strncmp(out, "scripts=1 events=7 drawn=7 total=7 "
				      "edges=3 net=0\n", 48) == 0,
		   "html data parses: 7 events, 3 edges between drawn tiles");
		ok(strstr(out, "\na\"b\\c\n</script><x>\xef\xbf\xbd\n") != NULL,
		   "hostile name survives the round trip");
		ok(strstr(out, "[(0, 1), (1, 2), (2, 3)]") != NULL,
		   "edge list");
		ok(strstr(out, "pypto diagnosis: 3 workers, 2 devices") != NULL,
		   "diagnosis embedded");
		if (rc)
			fputs(out, stdout);
	}
	free(html);
	ok(pypto_run_write_html(r, "/nonexistent/dir/t.html") ==
	   -PYPTO_ERR_SYS, "unwritable html path: PYPTO_ERR_SYS");
	write_failures(r, dir);
	freerun(r);

	/* A run without a graph or events still gives valid files. */
	r = mkrun(NULL, 1, 1, 0);
	pypto__run_finish_events(r);
	snprintf(path, sizeof(path), "%s/empty.html", dir);
	rc = pypto_run_write_html(r, path);
	snprintf(path, sizeof(path), "%s/empty.json", dir);
	rc |= pypto_run_write_trace(r, path);
	ok(rc == 0, "empty run: files written");
	if (have_py) {
		char cmd[1024];

		snprintf(cmd, sizeof(cmd), "python3 -c 'import json,sys; "
			 "json.load(open(sys.argv[1]))' %s", path);
		ok(system(cmd) == 0, "empty trace parses");
	}
	freerun(r);
	pypto_graph_destroy(g);
}

/* ---- demo timeline for test_html.sh --------------------------------- */

/*
 * A pipeline as the tiled GEMM makes it: per block k, host "pack" on a
 * worker, "put" on its device, "gemm" on the worker; gemm k waits for
 * gemm k-4 (same C block); block 5's put fails once and is re-issued.
 */
static int demo(const char *html, const char *trace)
{
	enum { NB = 96, NW = 4, ND = 2 };
	struct pypto_graph *g;
	struct pypto_run *r;
	uint64_t wfree[NW] = { 0 }, gend[NB], wall = 0;
	int k, rc = 0;

	if (pypto_graph_create(&g))
		return 1;
	for (k = 0; k < NB; k++) {
		char n[32];
		int h, x, c;

		snprintf(n, sizeof(n), "pack A%d", k);
		h = pypto_add_host(g, n, nop, NULL, k % ND);
		snprintf(n, sizeof(n), "put A%d", k);
		x = add_xfer(g, n, k % ND, 4096);
		snprintf(n, sizeof(n), "gemm %d,%d", k / 8, k % 8);
		c = pypto_add_compute(g, n, nop, NULL, k % ND);
		if (h < 0 || x < 0 || c < 0)
			return 1;
		pypto_add_dep(g, h, x);
		pypto_add_dep(g, x, c);
		if (k >= NW)
			pypto_add_dep(g, 3 * (k - NW) + 2, c);
	}
	pypto_graph_set_workload(g, PYPTO_WL_FC, 128);
	r = mkrun(g, NW, ND, 0);
	for (k = 0; k < NB; k++) {
		int w = k % NW;
		uint64_t h0 = wfree[w], h1 = h0 + 2000 + (k * 37) % 500;
		uint64_t x0 = h1, x1 = x0 + 3000 + (k * 53) % 1000;
		uint64_t c0, c1;

		rec(r, PYPTO_STAGE_PREFETCH, 3 * k, w, k % ND, h0, h1, 0, 0);
		if (k == 5) {
			rec(r, PYPTO_STAGE_TRANSFER, 3 * k + 1, w, k % ND, x0,
			    x1, 4096, 0);
			x0 = x1;
			x1 = x0 + 3000;
		}
		rec(r, PYPTO_STAGE_TRANSFER, 3 * k + 1, w, k % ND, x0, x1,
		    4096, k == 5);
		c0 = x1 > h1 ? x1 : h1;
		if (k >= NW && gend[k - NW] > c0)
			c0 = gend[k - NW];
		c1 = c0 + 5000 + (k * 71) % 2000;
		rec(r, PYPTO_STAGE_COMPUTE, 3 * k + 2, w, k % ND, c0, c1, 0, 0);
		gend[k] = c1;
		wfree[w] = h1 > c1 ? h1 : c1;
		if (c1 > wall)
			wall = c1;
	}
	r->st.wall_ns = wall;
	r->st.tiles = g->n;
	r->st.tiles_compute = r->st.tiles_transfer = r->st.tiles_host = NB;
	r->st.rounds = NB;
	r->st.descs = NB + 1;
	r->st.xfer_retries = 1;
	r->st.xfer_failures = 1;
	r->xport_name = "synthetic";
	pypto__run_finish_events(r);
	if (html && pypto_run_write_html(r, html)) {
		fprintf(stderr, "test_trace: %s\n", pypto_errmsg());
		rc = 1;
	}
	if (trace && pypto_run_write_trace(r, trace)) {
		fprintf(stderr, "test_trace: %s\n", pypto_errmsg());
		rc = 1;
	}
	freerun(r);
	pypto_graph_destroy(g);
	return rc;
}

int main(int argc, char **argv)
{
	struct pypto_graph *g;
	char dir[] = "/tmp/pypto-trace-XXXXXX", path[512], cmd[600];
	int have_py, i;

	if (argc > 1) {
		const char *html = NULL, *trace = NULL;

		for (i = 1; i < argc; i++) {
			if (!strcmp(argv[i], "--html-out") && i + 1 < argc)
				html = argv[++i];
			else if (!strcmp(argv[i], "--trace-out") && i + 1 < argc)
				trace = argv[++i];
			else {
				fprintf(stderr, "usage: test_trace [--html-out "
					"FILE] [--trace-out FILE]\n");
				return 2;
			}
		}
		return demo(html, trace);
	}

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	have_py = system("python3 -c pass >/dev/null 2>&1") == 0;
	snprintf(path, sizeof(path), "%s/trace.py", dir);
	write_file(path, trace_py);
	snprintf(path, sizeof(path), "%s/html.py", dir);
	write_file(path, html_py);

	/* Tiles 0..7: host, transfers, computes (names for the outputs). */
	if (pypto_graph_create(&g))
		return 1;
	pypto_add_host(g, "pack", nop, NULL, 0);
	add_xfer(g, "put a", 0, 64);
	add_xfer(g, "put b", 0, 64);
	pypto_add_compute(g, "gemm", nop, NULL, 0);
	add_xfer(g, "get", 0, 64);
	for (i = 5; i < 8; i++)
		pypto_add_compute(g, NULL, nop, NULL, 0);

	test_threads(g, dir, have_py);
	test_persistent_thread(g);
	test_stats(g);
	test_overlap();
	test_diagnosis(g);
	test_links(g, dir, have_py);
	test_tile_size(g);
	test_outputs(dir, have_py);
	pypto_graph_destroy(g);

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "test_trace: could not remove %s\n", dir);
	return tap_done("pypto-trace");
}
