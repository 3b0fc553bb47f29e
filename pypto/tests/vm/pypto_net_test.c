/* SPDX-License-Identifier: MIT */
/*
 * libpypto across two hosts (two VMs of the network test bed, one rank
 * each, started by lib/tests/vm/net.sh through hcomm_vm_launch): a tiled
 * SGEMM whose matrices live on another host.  Rank 1 is the memory node:
 * its window holds A and B in block layout and receives C.  Rank 0 is the
 * compute node: its graph gets each step's A and B blocks from rank 1
 * (transfer tiles: hcomm gets, over rdma), multiplies them into its own C
 * blocks (compute tiles: cblas_sgemm) and puts every finished C block
 * back (transfer tiles: puts).  Rank 0 runs the graph again and again
 * while its cutter breaks and restores the RoCE link.
 *
 *   pypto_net_test [--mode cut|kill] [--size N] [--tile T]
 *
 * cut (needs the rank table's rdma over the second NIC and tcp beside
 * it): 1 s into the second run rank 0 puts 100 % loss on eth1 (netem),
 * waits for the failover, streams over tcp for a second, restores the
 * link and waits for the switch back.  Checked: every run returns 0 and
 * its C is right (against one cblas_sgemm); the runs recorded the link
 * events (link-down and failed-over about rank 1), the failover's stall
 * and the transfer tiles it delayed (none issued twice: no retries), the
 * diagnosis and the HTML timeline show them; the application's own event
 * callback saw the same events beside libpypto's listener; rank 1 finds
 * the C of the last run in its window.
 *
 * kill: rank 1 kills itself (SIGKILL) while rank 0's run is under way;
 * the run fails with PYPTO_ERR_IO naming rank 1 within the time limit,
 * and the communicator is destroyed.
 *
 * Exit status 0 passed, 1 failed (the TAP lines say what).
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "hcomm.h"
#include "pypto.h"
#include "tap.h"

#define SIG_DONE	5	/* rank 0 -> 1: the last run's C is in place */
#define SIG_GO		6	/* rank 0 -> 1 (kill): die now */
#define RUNS_MAX	40

static struct hcomm_comm *comm;
static int me;
static uint32_t sz = 512, ts = 64, nb;	/* matrix side, tile, blocks */
static size_t blk;			/* floats per block */

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static void fill(float *p, size_t n, uint64_t seed)
{
	uint64_t rs = seed;
	size_t i;

	for (i = 0; i < n; i++) {
		rs ^= rs << 13;
		rs ^= rs >> 7;
		rs ^= rs << 17;
		p[i] = (float)((int64_t)(rs % 2001) - 1000) / 1000.0f;
	}
}

/* Window layout (floats): A blocks (i,k), B blocks (k,j), C blocks (i,j). */
static uint64_t off_a(uint32_t i, uint32_t k)
{
	return ((uint64_t)i * nb + k) * blk;
}

static uint64_t off_b(uint32_t k, uint32_t j)
{
	return ((uint64_t)nb * nb + (uint64_t)k * nb + j) * blk;
}

static uint64_t off_c(uint32_t i, uint32_t j)
{
	return ((uint64_t)2 * nb * nb + (uint64_t)i * nb + j) * blk;
}

/* Block (bi,bj) of the row-major side x side matrix m into dst. */
static void block_out(const float *m, uint32_t bi, uint32_t bj, float *dst)
{
	uint32_t r;

	for (r = 0; r < ts; r++)
		memcpy(dst + (size_t)r * ts,
		       m + ((size_t)bi * ts + r) * sz + (size_t)bj * ts,
		       ts * sizeof(float));
}

/* Largest |c - ref| over the blocks of c (block layout) against ref. */
static double max_err(const float *c, const float *ref)
{
	float *t = malloc(blk * sizeof(float));
	double err = 0, d;
	uint32_t i, j;
	size_t e;

	if (!t)
		return INFINITY;
	for (i = 0; i < nb; i++)
		for (j = 0; j < nb; j++) {
			block_out(ref, i, j, t);
			for (e = 0; e < blk; e++) {
				d = fabs((double)c[((size_t)i * nb + j) * blk +
						   e] - t[e]);
				if (d > err || d != d)
					err = d != d ? INFINITY : d;
			}
		}
	free(t);
	return err;
}

/* ---- the compute node's graph ------------------------------------- */

struct step {
	float *a, *b, *c;	/* staging set and the C block */
	int first;		/* k == 0: overwrite C */
};

static int comp_fn(void *arg, const struct pypto_exec *ex)
{
	const struct step *s = arg;

	(void)ex;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)ts,
		    (int)ts, (int)ts, 1.0f, s->a, (int)ts, s->b, (int)ts,
		    s->first ? 0.0f : 1.0f, s->c, (int)ts);
	return 0;
}

/*
 * Steps in order over C blocks (i,j), k innermost: get A(i,k) and B(k,j)
 * into staging set s % nsets (after the compute that used it last),
 * compute into C(i,j) (after the block's previous step), and after the
 * last k put C(i,j) into rank 1's window.
 */
static int build(struct pypto_graph *g, float *stage, float *cl,
		 uint32_t nsets, struct step *st)
{
	uint32_t i, j, k, s = 0;
	int *comp = calloc((size_t)nb * nb * nb, sizeof(int));
	char name[48];	/* cut to PYPTO_NAME_MAX by the graph */
	int rc = 0;

	if (!comp)
		return -1;
	for (i = 0; i < nb && rc >= 0; i++)
		for (j = 0; j < nb && rc >= 0; j++)
			for (k = 0; k < nb && rc >= 0; k++, s++) {
				float *a = stage + (size_t)(s % nsets) * 2 * blk;
				struct pypto_xfer x[2] = {
					{ .op = PYPTO_GET, .rows = 1,
					  .row_bytes = blk * sizeof(float),
					  .local = a,
					  .win_off = off_a(i, k) * sizeof(float) },
					{ .op = PYPTO_GET, .rows = 1,
					  .row_bytes = blk * sizeof(float),
					  .local = a + blk,
					  .win_off = off_b(k, j) * sizeof(float) },
				};
				int gt, ct;

				snprintf(name, sizeof(name), "get%u.%u.%u", i, j, k);
				gt = pypto_add_transfer(g, name, x, 2, 0);
				st[s].a = a;
				st[s].b = a + blk;
				st[s].c = cl + ((size_t)i * nb + j) * blk;
				st[s].first = !k;
				snprintf(name, sizeof(name), "mm%u.%u.%u", i, j, k);
				ct = pypto_add_compute(g, name, comp_fn, &st[s], 0);
				comp[s] = ct;
				if (gt < 0 || ct < 0) {
					rc = -1;
					break;
				}
				rc = pypto_add_dep(g, (uint32_t)gt, (uint32_t)ct);
				if (rc >= 0 && s >= nsets)
					rc = pypto_add_dep(g, (uint32_t)comp[s - nsets],
							   (uint32_t)gt);
				if (rc >= 0 && k)
					rc = pypto_add_dep(g, (uint32_t)comp[s - 1],
							   (uint32_t)ct);
				if (rc >= 0 && k == nb - 1) {
					struct pypto_xfer p = {
						.op = PYPTO_PUT, .rows = 1,
						.row_bytes = blk * sizeof(float),
						.local = st[s].c,
						.win_off = off_c(i, j) * sizeof(float),
					};
					int pt;

					snprintf(name, sizeof(name), "put%u.%u", i, j);
					pt = pypto_add_transfer(g, name, &p, 1, 0);
					rc = pt < 0 ? pt :
					     pypto_add_dep(g, (uint32_t)ct, (uint32_t)pt);
				}
			}
	free(comp);
	return rc < 0 ? rc : 0;
}

/* ---- events and the cutter ------------------------------------------ */

static struct {
	pthread_mutex_t lock;
	int n[5];		/* per type, about rank 1 */
} app = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The application's own callback, beside libpypto's listener. */
static void app_ev(struct hcomm_comm *c, const struct hcomm_event *ev,
		   void *arg)
{
	(void)c;
	(void)arg;
	printf("# r0: event %llu %s: peer %d: %s\n",
	       (unsigned long long)ev->seq, hcomm_event_name((int)ev->type),
	       ev->peer, ev->why);
	fflush(stdout);
	pthread_mutex_lock(&app.lock);
	if (ev->peer == 1 && ev->type < 5)
		app.n[ev->type]++;
	pthread_mutex_unlock(&app.lock);
}

static int app_count(int type)
{
	int n;

	pthread_mutex_lock(&app.lock);
	n = app.n[type];
	pthread_mutex_unlock(&app.lock);
	return n;
}

static int wait_count(int type, int n, int ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000ULL;

	while (app_count(type) < n) {
		if (now_ns() > end)
			return 0;
		usleep(5000);
	}
	return 1;
}

static _Atomic int run_no = -1;	/* the run under way, -1: none */
static _Atomic int cut_done, cut_rc;

static int netem(int loss)
{
	char cmd[128];
	int rc;

	snprintf(cmd, sizeof(cmd), "tc qdisc change dev eth1 root netem "
		 "loss %d%%", loss);
	rc = system(cmd);
	if (rc)
		printf("# r0: '%s' failed (%d)\n", cmd, rc);
	return rc;
}

static void *cutter(void *arg)
{
	int rc;

	(void)arg;
	while (run_no < 1)
		usleep(10000);
	usleep(1000000);
	printf("# r0: cutting eth1 (netem loss 100 %%) during run %d\n",
	       (int)run_no);
	fflush(stdout);
	rc = netem(100);
	if (!rc && !wait_count(HCOMM_EVENT_FAILED_OVER, 1, 30000)) {
		printf("# r0: no failed-over event within 30 s of the cut\n");
		rc = -1;
	}
	usleep(1000000);		/* on tcp */
	if (netem(0) && !rc)
		rc = -1;
	printf("# r0: eth1 restored\n");
	if (!rc && !wait_count(HCOMM_EVENT_RECOVERED,
			       app_count(HCOMM_EVENT_FAILED_OVER), 60000)) {
		printf("# r0: not back on rdma within 60 s of the restore\n");
		rc = -1;
	}
	cut_rc = rc;
	cut_done = 1;
	return NULL;
}

/* ---- the two ranks ---------------------------------------------------- */

static int compute_node(struct hcomm_win *w, const char *mode)
{
	uint32_t nsets = 3;
	float *a = malloc((size_t)sz * sz * sizeof(float));
	float *b = malloc((size_t)sz * sz * sizeof(float));
	float *ref = malloc((size_t)sz * sz * sizeof(float));
	float *stage = aligned_alloc(4096, nsets * 2 * blk * sizeof(float));
	float *cl = aligned_alloc(4096, (size_t)nb * nb * blk * sizeof(float));
	struct step *st = calloc((size_t)nb * nb * nb, sizeof(*st));
	struct pypto_config cfg;
	struct pypto_graph *g = NULL;
	struct pypto_xport *x = NULL;
	pthread_t thr;
	int kill_mode = !strcmp(mode, "kill"), cutting = 0, n, rc, runs_ok = 0;
	int saw_down = 0, saw_fo = 0, done_run = -1;
	uint64_t delayed = 0, retries = 0, stall = 0;
	const char *html = "/tmp/pypto-net-failover.html";

	if (!a || !b || !ref || !stage || !cl || !st)
		return ok(0, "memory"), 1;
	fill(a, (size_t)sz * sz, 11);
	fill(b, (size_t)sz * sz, 22);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)sz,
		    (int)sz, (int)sz, 1.0f, a, (int)sz, b, (int)sz, 0.0f, ref,
		    (int)sz);
	pypto_config_default(&cfg);
	cfg.workers = 2;
	cfg.devices = 1;
	cfg.prefetch_depth = nsets - 1;
	cfg.double_buffering = 1;
	cfg.tile_size = ts;
	rc = hcomm_comm_set_event_cb(comm, app_ev, NULL);
	if (!rc)
		rc = pypto_xport_hcomm(&x, comm, w, 1, NULL);
	if (!rc)
		rc = pypto_graph_create(&g);
	if (!rc)
		rc = build(g, stage, cl, nsets, st);
	if (!ok(rc == 0, "r0: graph of %u tiles: %u x %u x %u blocks of %u, "
		"A and B on rank 1 (%s)", g ? pypto_graph_tiles(g) : 0, nb,
		nb, nb, ts, rc ? pypto_errmsg() : "ok"))
		return 1;
	if (!kill_mode) {
		cutting = !pthread_create(&thr, NULL, cutter, NULL);
		ok(cutting, "r0: cutter thread");
	}
	for (n = 0; n < RUNS_MAX; n++) {
		struct pypto_run *r = NULL;
		const struct pypto_stats *s;
		const struct pypto_link_event *le;
		unsigned int nl, i;
		uint64_t t0 = now_ns();
		double err;

		if (kill_mode && n == 0) {
			/* rank 1 dies 1.5 s into this run */
			uint64_t one = 1;

			hcomm_put_signal(w, 1, 0, &one, 0, SIG_GO, 1);
		}
		memset(cl, 0, (size_t)nb * nb * blk * sizeof(float));
		run_no = n;
		rc = pypto_run(g, &cfg, x, &r);
		run_no = -1;
		s = pypto_run_stats(r);
		if (kill_mode) {
			ok(rc == -PYPTO_ERR_IO &&
			   strstr(pypto_errmsg(), "rank 1 was lost") &&
			   s && s->peer_lost && now_ns() - t0 < 90000000000ULL,
			   "r0: rank 1 killed during the run: it fails with "
			   "PYPTO_ERR_IO naming rank 1 after %.1f s (%s): %s",
			   (now_ns() - t0) / 1e9, pypto_strerror(rc),
			   pypto_errmsg());
			if (s)
				printf("# r0: %u link event(s) in the run, %llu "
				       "retries\n", s->link_events,
				       (unsigned long long)s->xfer_retries);
			pypto_run_free(r);
			break;
		}
		err = max_err(cl, ref);
		nl = pypto_run_link_events(r, &le);
		if (!ok(rc == 0 && err < 1e-3 * sz, "r0: run %d: %s, %.2f s, "
			"max error %.2g, %u link event(s)", n,
			rc ? pypto_errmsg() : "ok", (now_ns() - t0) / 1e9,
			err, nl)) {
			pypto_run_free(r);
			break;
		}
		runs_ok++;
		if (n == 0)
			ok(!s->engine_known, "r0: the module's engine busy time "
			   "is not taken for transfers it does not carry (rdma)");
		for (i = 0; i < nl; i++) {
			saw_down |= le[i].type == HCOMM_EVENT_LINK_DOWN &&
				    le[i].peer == 1;
			saw_fo |= le[i].type == HCOMM_EVENT_FAILED_OVER &&
				  le[i].peer == 1;
		}
		delayed += s->tiles_delayed;
		retries += s->xfer_retries;
		stall += s->failover_stall_ns;
		if (nl) {
			char *t = NULL;
			size_t len = 0;
			FILE *m = open_memstream(&t, &len);

			if (m) {
				pypto_run_diagnose(r, m);
				fclose(m);
				printf("# r0: run %d's diagnosis:\n", n);
				for (char *p = t, *e; p && *p; p = e ? e + 1 : NULL) {
					e = strchr(p, '\n');
					printf("#   %.*s\n", e ? (int)(e - p) :
					       (int)strlen(p), p);
				}
				ok(t && strstr(t, "link events"),
				   "r0: run %d's diagnosis lists its link events", n);
				free(t);
			}
			if (s->failovers) {
				ok(pypto_run_write_html(r, html) == 0,
				   "r0: run %d's timeline: %s", n, html);
				pypto_run_write_trace(r, "/tmp/pypto-net-failover.json");
			}
		}
		pypto_run_free(r);
		if (cut_done && done_run < 0)
			done_run = n;
		if (done_run >= 0 && n > done_run)
			break;		/* one whole run after the recovery */
	}
	if (!kill_mode) {
		FILE *f;
		char *buf = NULL;
		size_t got = 0;

		ok(runs_ok >= 3 && done_run >= 0, "r0: %d runs right, the "
		   "cuts done after run %d", runs_ok, done_run);
		if (cutting)
			pthread_join(thr, NULL);
		ok(cut_done && !cut_rc, "r0: cut, failed over, restored, back "
		   "on rdma (%d)", (int)cut_rc);
		ok(saw_down && saw_fo && stall > 0, "r0: the runs recorded "
		   "rank 1's link-down and failed-over (stall %.1f ms)",
		   stall / 1e6);
		ok(delayed > 0 && retries == 0, "r0: %llu transfer tile(s) "
		   "delayed by the failover, none issued again (%llu retries)",
		   (unsigned long long)delayed, (unsigned long long)retries);
		ok(app_count(HCOMM_EVENT_LINK_DOWN) >= 1 &&
		   app_count(HCOMM_EVENT_FAILED_OVER) >= 1 &&
		   app_count(HCOMM_EVENT_RECOVERED) >= 1,
		   "r0: the application's callback saw them too (%d link-down, "
		   "%d failed-over, %d recovered)",
		   app_count(HCOMM_EVENT_LINK_DOWN),
		   app_count(HCOMM_EVENT_FAILED_OVER),
		   app_count(HCOMM_EVENT_RECOVERED));
		f = fopen(html, "r");
		if (f) {
			buf = malloc(8 << 20);
			got = buf ? fread(buf, 1, (8 << 20) - 1, f) : 0;
			fclose(f);
		}
		if (buf)
			buf[got] = 0;
		ok(buf && got > 0 && strstr(buf, "link-down") &&
		   strstr(buf, "delayed tiles"), "r0: the HTML timeline "
		   "shows the link-down and the delayed tiles (%zu bytes)",
		   got);
		free(buf);
		{
			uint64_t one = 1;

			rc = hcomm_put_signal(w, 1, 0, &one, 0, SIG_DONE, 1);
			ok(rc == 0, "r0: told rank 1 the C is in place: %s",
			   hcomm_strerror(rc));
		}
	}
	hcomm_comm_set_event_cb(comm, NULL, NULL);
	pypto_graph_destroy(g);
	pypto_xport_destroy(x);
	free(a);
	free(b);
	free(ref);
	free(stage);
	free(cl);
	free(st);
	return 0;
}

static int memory_node(float *win, const char *mode)
{
	float *a = malloc((size_t)sz * sz * sizeof(float));
	float *b = malloc((size_t)sz * sz * sizeof(float));
	float *ref = malloc((size_t)sz * sz * sizeof(float));
	uint32_t i, j;
	int64_t v;

	if (!a || !b || !ref)
		return ok(0, "memory"), 1;
	fill(a, (size_t)sz * sz, 11);
	fill(b, (size_t)sz * sz, 22);
	for (i = 0; i < nb; i++)
		for (j = 0; j < nb; j++) {
			block_out(a, i, j, win + off_a(i, j));
			block_out(b, i, j, win + off_b(i, j));
		}
	hcomm_boot_barrier(comm);	/* A and B in place before rank 0 starts */
	if (!strcmp(mode, "kill")) {
		v = hcomm_signal_wait(comm, SIG_GO, 1, 120000);
		usleep(1500000);
		printf("# r1: killing myself (%lld)\n", (long long)v);
		fflush(stdout);
		raise(SIGKILL);
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)sz,
		    (int)sz, (int)sz, 1.0f, a, (int)sz, b, (int)sz, 0.0f, ref,
		    (int)sz);
	v = hcomm_signal_wait(comm, SIG_DONE, 1, 400000);
	ok(v >= 1, "r1: rank 0 is done (%lld)", (long long)v);
	{
		double err = max_err(win + off_c(0, 0), ref);

		ok(err < 1e-3 * sz, "r1: the C rank 0 put here is right (max "
		   "error %.2g)", err);
	}
	free(a);
	free(b);
	free(ref);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = "cut";
	struct hcomm_win *w = NULL;
	float *win = NULL;
	size_t len = 0;
	int i, rc;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--mode") && i + 1 < argc)
			mode = argv[++i];
		else if (!strcmp(argv[i], "--size") && i + 1 < argc)
			sz = (uint32_t)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--tile") && i + 1 < argc)
			ts = (uint32_t)atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: pypto_net_test [--mode cut|kill] "
				"[--size N] [--tile T]\n");
			return 2;
		}
	}
	if (strcmp(mode, "cut") && strcmp(mode, "kill")) {
		fprintf(stderr, "pypto_net_test: --mode cut or kill\n");
		return 2;
	}
	if (!ts || !sz || sz % ts || sz / ts > 64) {
		fprintf(stderr, "pypto_net_test: --size a multiple of --tile, "
			"at most 64 tiles\n");
		return 2;
	}
	nb = sz / ts;
	blk = (size_t)ts * ts;
	openblas_set_num_threads(1);
	rc = hcomm_comm_init(&comm, NULL);
	if (!ok(rc == 0, "hcomm_comm_init: %s (%s)", hcomm_strerror(rc),
		hcomm_errmsg()))
		return 1;
	me = hcomm_comm_rank(comm);
	if (hcomm_comm_size(comm) != 2) {
		ok(0, "2 ranks, not %d", hcomm_comm_size(comm));
		return 1;
	}
	if (me == 1) {
		len = 3 * (size_t)nb * nb * blk * sizeof(float);
		win = aligned_alloc(4096, len);
		if (!win)
			return ok(0, "window memory"), 1;
		memset(win, 0, len);
	}
	rc = hcomm_win_create(comm, win, len, &w);
	if (!ok(rc == 0, "r%d: hcomm_win_create of %zu bytes: %s", me, len,
		hcomm_strerror(rc)))
		return 1;
	if (me == 0) {
		hcomm_boot_barrier(comm);
		compute_node(w, mode);
	} else {
		memory_node(win, mode);
	}
	if (!strcmp(mode, "kill")) {
		/* the peer is gone: the collective teardown fails, at once */
		uint64_t t0 = now_ns();

		rc = hcomm_win_free(w);
		i = hcomm_comm_destroy(comm);
		ok(now_ns() - t0 < 30000000000ULL, "r%d: win_free (%s) and "
		   "destroy (%s) without the peer returned after %.1f s", me,
		   hcomm_strerror(rc), hcomm_strerror(i),
		   (now_ns() - t0) / 1e9);
	} else {
		rc = hcomm_win_free(w);
		ok(rc == 0, "r%d: hcomm_win_free: %s", me, hcomm_strerror(rc));
		rc = hcomm_comm_destroy(comm);
		ok(rc == 0, "r%d: hcomm_comm_destroy: %s", me,
		   hcomm_strerror(rc));
	}
	free(win);
	return tap_done(me ? "pypto-net r1" : "pypto-net r0");
}
