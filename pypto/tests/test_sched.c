/* SPDX-License-Identifier: MIT */
/*
 * Host tests of the scheduler: dependency order on wide, chain and random
 * graphs, every tile exactly once, failures, re-runs, transfer tiles and
 * the tiled GEMM checked against one big cblas_sgemm.  Transfers go
 * through the memcpy test double (the real transport needs /dev/hcomm and
 * is tested in the VM: pypto/tests/vm).
 */
#define _GNU_SOURCE
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <inttypes.h>
#include <pthread.h>
#include <dirent.h>
#include <sys/wait.h>

#include <cblas.h>

#include "pypto_int.h"
#include "tap.h"

static _Atomic uint64_t seq;

/*
 * A node takes a ticket from one global sequence when it starts and
 * another when it finishes: a consumer is right only if its start ticket
 * is above every producer's finish ticket (a scheduler that released
 * consumers when their producer started would break that, not the order
 * of starts alone).  The node sleeps a little between the two when told,
 * so that a released-too-early consumer has time to start.
 */
struct node {
	_Atomic uint32_t runs;
	uint64_t at;			/* ticket at start */
	uint64_t end;			/* ticket at finish */
	int32_t device;			/* pypto_exec's */
	int fail;
	uint32_t nap_us;		/* sleep between start and finish */
};

static int node_fn(void *arg, const struct pypto_exec *ex)
{
	struct node *n = arg;

	atomic_fetch_add(&n->runs, 1);
	n->at = atomic_fetch_add(&seq, 1);
	n->device = ex->device;
	if (n->nap_us)
		usleep(n->nap_us);
	n->end = atomic_fetch_add(&seq, 1);
	return n->fail;
}

/* Edge from -> to ran right: to started after from finished. */
static int after(const struct node *from, const struct node *to)
{
	return to->at > from->end;
}

static struct pypto_config cfg_of(uint32_t workers, uint32_t devices)
{
	struct pypto_config c;

	pypto_config_default(&c);
	c.workers = workers;
	c.devices = devices;
	return c;
}

static uint64_t rnd_state = 88172645463325252ULL;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/*
 * 0 to 3 random producers for every tile but the first, always of lower
 * ids (so a DAG), recorded in edges (room for 3 n); returns their count.
 */
static uint32_t random_edges(struct pypto_graph *g, uint32_t n,
			     uint32_t (*edges)[2])
{
	uint32_t i, e, ne = 0;

	for (i = 1; i < n; i++) {
		uint32_t deg = (uint32_t)(rnd() % 4);

		for (e = 0; e < deg; e++) {
			uint32_t from = (uint32_t)(rnd() % i);

			pypto_add_dep(g, from, i);
			edges[ne][0] = from;
			edges[ne][1] = i;
			ne++;
		}
	}
	return ne;
}

/* Random DAG: edges only from lower to higher ids. */

/*
 * Random DAGs in which random tiles fail, many times: the run ends with
 * PYPTO_ERR_TASK, no tile runs twice, no tile downstream of a failed one
 * (transitively) runs, every consumer that ran started after its
 * producers finished, and the graph runs again cleanly once nothing
 * fails.  Under ThreadSanitizer too (make -C pypto sanitize-check).
 */
static void test_random_failures(unsigned int iters)
{
	unsigned int it, bad_rc = 0, twice = 0, downstream = 0, order = 0;
	unsigned int rerun = 0;

	for (it = 0; it < iters; it++) {
		uint32_t n = 200 + (uint32_t)(rnd() % 1800), i, e, k, ne = 0;
		uint32_t workers = 1 + (uint32_t)(rnd() % 6);
		struct pypto_config c = cfg_of(workers, 1);
		struct node *nodes = calloc(n, sizeof(*nodes));
		uint32_t (*edges)[2] = calloc((size_t)n * 3, sizeof(*edges));
		unsigned char *tainted = calloc(n, 1);
		struct pypto_graph *g;
		int rc;

		pypto_graph_create(&g);
		for (i = 0; i < n; i++) {
			nodes[i].nap_us = (rnd() % 50 == 0) ? 100 : 0;
			pypto_add_compute(g, NULL, node_fn, &nodes[i],
					  PYPTO_ANY_DEVICE);
		}
		ne = random_edges(g, n, edges);
		for (k = 1 + (uint32_t)(rnd() % 3); k; k--) {
			i = (uint32_t)(rnd() % n);
			nodes[i].fail = 1 + (int)(rnd() % 5);
			tainted[i] = 2;		/* failed itself */
		}
		/* edges go from lower to higher ids: one pass taints */
		for (e = 0; e < ne; e++)
			if (tainted[edges[e][0]] && !tainted[edges[e][1]])
				tainted[edges[e][1]] = 1;
		/* edges are in increasing consumer order, so repeat once */
		for (e = 0; e < ne; e++)
			if (tainted[edges[e][0]] && !tainted[edges[e][1]])
				tainted[edges[e][1]] = 1;
		rc = pypto_run(g, &c, NULL, NULL);
		bad_rc += rc != -PYPTO_ERR_TASK;
		for (i = 0; i < n; i++) {
			twice += atomic_load(&nodes[i].runs) > 1;
			downstream += tainted[i] == 1 &&
				      atomic_load(&nodes[i].runs) > 0;
		}
		for (e = 0; e < ne; e++)
			if (atomic_load(&nodes[edges[e][1]].runs) &&
			    !after(&nodes[edges[e][0]], &nodes[edges[e][1]]))
				order++;
		/* nothing fails now: every tile exactly once more */
		for (i = 0; i < n; i++) {
			nodes[i].fail = 0;
			atomic_store(&nodes[i].runs, 0);
		}
		rc = pypto_run(g, &c, NULL, NULL);
		for (i = 0; i < n && !rc; i++)
			if (atomic_load(&nodes[i].runs) != 1)
				rc = -1;
		rerun += rc != 0;
		pypto_graph_destroy(g);
		free(nodes);
		free(edges);
		free(tainted);
	}
	ok(!bad_rc && !twice && !downstream && !order && !rerun,
	   "%u random DAGs with failing tiles: %u runs not PYPTO_ERR_TASK, "
	   "%u tiles ran twice, %u downstream of a failure ran, %u started "
	   "before a producer finished, %u clean re-runs wrong", iters,
	   bad_rc, twice, downstream, order, rerun);
}

static void test_random_dag(uint32_t n, uint32_t workers, uint32_t devices)
{
	struct pypto_config c = cfg_of(workers, devices);
	struct node *nodes = calloc(n, sizeof(*nodes));
	uint32_t (*edges)[2] = calloc((size_t)n * 3, sizeof(*edges));
	struct pypto_graph *g;
	struct pypto_run *r = NULL;
	uint32_t i, ne = 0, once = 0, order = 0, placed = 0;
	int rc;

	pypto_graph_create(&g);
	for (i = 0; i < n; i++) {
		/* Some producers take long enough to be caught. */
		nodes[i].nap_us = (i % 97 == 0) ? 200 : 0;
		pypto_add_compute(g, NULL, node_fn, &nodes[i],
				  (rnd() & 3) ? PYPTO_ANY_DEVICE :
				  (int)(rnd() % devices));
	}
	ne = random_edges(g, n, edges);
	rc = pypto_run(g, &c, NULL, &r);
	for (i = 0; i < n; i++) {
		once += atomic_load(&nodes[i].runs) == 1;
		placed += nodes[i].device == g->tiles[i].device;
	}
	for (i = 0; i < ne; i++)
		order += after(&nodes[edges[i][0]], &nodes[edges[i][1]]);
	ok(rc == 0 && once == n && order == ne && placed == n,
	   "random DAG %u tiles %u edges, %u workers %u devices: rc %d, once %u, consumer started after its producer finished %u, device %u",
	   n, ne, workers, devices, rc, once, order, placed);
	ok(r && r->st.tiles_compute == n && r->st.events == n,
	   "  stats: %llu compute tiles, %llu events, %llu steals, %llu parks",
	   r ? (unsigned long long)r->st.tiles_compute : 0,
	   r ? (unsigned long long)r->st.events : 0,
	   r ? (unsigned long long)r->st.steals : 0,
	   r ? (unsigned long long)r->st.parks : 0);
	pypto_run_free(r);
	pypto_graph_destroy(g);
	free(nodes);
	free(edges);
}

static void test_wide_and_chain(uint32_t workers)
{
	struct pypto_config c = cfg_of(workers, 1);
	uint32_t n = 100000, i, once = 0, ordered = 0;
	struct node *nodes = calloc(n + 2, sizeof(*nodes));
	struct pypto_graph *g;
	int rc, src, snk;

	/* 1 -> n -> 1 */
	pypto_graph_create(&g);
	nodes[n].nap_us = 2000;
	src = pypto_add_compute(g, "src", node_fn, &nodes[n], -1);
	snk = pypto_add_compute(g, "sink", node_fn, &nodes[n + 1], -1);
	for (i = 0; i < n; i++) {
		int t;

		nodes[i].nap_us = i == n / 2 ? 2000 : 0;
		t = pypto_add_compute(g, NULL, node_fn, &nodes[i], -1);

		pypto_add_dep(g, (uint32_t)src, (uint32_t)t);
		pypto_add_dep(g, (uint32_t)t, (uint32_t)snk);
	}
	rc = pypto_run(g, &c, NULL, NULL);
	for (i = 0; i < n; i++) {
		once += atomic_load(&nodes[i].runs) == 1;
		ordered += after(&nodes[n], &nodes[i]) &&
			   after(&nodes[i], &nodes[n + 1]);
	}
	ok(rc == 0 && once == n && ordered == n,
	   "wide 1 -> %u -> 1 on %u workers: rc %d, once %u, after the source finished and before the sink started %u",
	   n, workers, rc, once, ordered);
	/* Again: a graph can run twice. */
	for (i = 0; i < n + 2; i++)
		atomic_store(&nodes[i].runs, 0);
	rc = pypto_run(g, &c, NULL, NULL);
	for (once = 0, i = 0; i < n + 2; i++)
		once += atomic_load(&nodes[i].runs) == 1;
	ok(rc == 0 && once == n + 2, "same graph run twice: rc %d, once %u",
	   rc, once);
	pypto_graph_destroy(g);

	/* chain */
	n = 20000;
	memset(nodes, 0, (n + 2) * sizeof(*nodes));
	pypto_graph_create(&g);
	for (i = 0; i < n; i++) {
		nodes[i].nap_us = i % 1000 == 0 ? 500 : 0;
		pypto_add_compute(g, NULL, node_fn, &nodes[i], -1);
		if (i)
			pypto_add_dep(g, i - 1, i);
	}
	rc = pypto_run(g, &c, NULL, NULL);
	/* Nothing else runs: each start is the ticket after the previous
	 * finish. */
	for (ordered = 0, i = 1; i < n; i++)
		ordered += nodes[i].at == nodes[i - 1].end + 1;
	ok(rc == 0 && ordered == n - 1,
	   "chain of %u on %u workers runs in order: rc %d, %u in order", n,
	   workers, rc, ordered);
	pypto_graph_destroy(g);
	free(nodes);
}

/* ---- the worker pool and successors run in place -------------------- */

struct who {
	pid_t tid;
	uint32_t worker;
	uint32_t nap_us;
	_Atomic uint32_t runs;
	uint32_t prev_done;		/* chain: the tile before had run */
	struct who *prev;
};

static int who_fn(void *arg, const struct pypto_exec *ex)
{
	struct who *w = arg;

	w->tid = gettid();
	w->worker = ex->worker;
	w->prev_done = !w->prev || atomic_load(&w->prev->runs) == 1;
	if (w->nap_us)
		usleep(w->nap_us);
	atomic_fetch_add(&w->runs, 1);
	return 0;
}

/*
 * A wide graph of n tiles (no edges) that sleep nap_us each, so that
 * every worker takes some; the distinct threads that ran them in tid[]
 * (at most 64).  Returns pypto_run's result, or -1 when a tile did not
 * run exactly once or worker 0 was not the calling thread.
 */
static int run_wide(struct who *w, uint32_t n, uint32_t workers,
		    uint32_t nap_us, pid_t *tid, uint32_t *ntid)
{
	struct pypto_config c = cfg_of(workers, 1);
	struct pypto_graph *g;
	uint32_t i, j;
	int rc;

	pypto_graph_create(&g);
	for (i = 0; i < n; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].nap_us = nap_us;
		pypto_add_compute(g, NULL, who_fn, &w[i], -1);
	}
	rc = pypto_run(g, &c, NULL, NULL);
	pypto_graph_destroy(g);
	*ntid = 0;
	for (i = 0; i < n; i++) {
		if (atomic_load(&w[i].runs) != 1 ||
		    (w[i].worker == 0) != (w[i].tid == gettid()))
			rc = rc ? rc : -1;
		for (j = 0; j < *ntid; j++)
			if (tid[j] == w[i].tid)
				break;
		if (j == *ntid && *ntid < 64)
			tid[(*ntid)++] = w[i].tid;
	}
	return rc;
}

/* The threads of this process now (at most max). */
static uint32_t task_tids(pid_t *tid, uint32_t max)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	uint32_t n = 0;

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && n < max)
			tid[n++] = (pid_t)atoi(e->d_name);
	if (d)
		closedir(d);
	return n;
}

static uint32_t tids_outside(const pid_t *a, uint32_t n, const pid_t *b,
			     uint32_t nb)
{
	uint32_t i, j, out = 0;

	for (i = 0; i < n; i++) {
		for (j = 0; j < nb && a[i] != b[j]; j++)
			;
		out += j == nb;
	}
	return out;
}

/* A tile that runs a graph of its own (20 tiles on 2 workers). */
static _Atomic uint32_t inner_ok;

static int nest_fn(void *arg, const struct pypto_exec *ex)
{
	struct who w[20];
	pid_t tid[64];
	uint32_t n;

	(void)arg;
	(void)ex;
	if (run_wide(w, 20, 2, 0, tid, &n) == 0)
		atomic_fetch_add(&inner_ok, 1);
	return 0;
}

struct conc {
	struct who w[200];
	pid_t tid[64];
	uint32_t ntid;
	int rc;
};

static void *conc_run(void *arg)
{
	struct conc *c = arg;
	uint32_t r;

	for (r = 0; r < 20 && !c->rc; r++)
		c->rc = run_wide(c->w, 200, 3, r == 19 ? 500 : 0, c->tid,
				 &c->ntid);
	return NULL;
}

static void test_pool(void)
{
	uint32_t n = 20000, i, once, same, bad, n1, n2, ntask, idle, outside;
	struct who *w = calloc(n, sizeof(*w));
	pid_t tid1[64], tid2[64], task[256];
	struct pypto_config c = cfg_of(4, 1);
	struct pypto_run *run = NULL;
	const struct pypto_stats *st;
	struct pypto_graph *g;
	struct conc *cc = calloc(2, sizeof(*cc));
	pthread_t t[2];
	pid_t pid;
	int rc, status;

	/* Worker 0 is the caller; the others are threads of the pool. */
	rc = run_wide(w, 40, 4, 1000, tid1, &n1);
	idle = pypto__pool_idle();
	ok(rc == 0 && n1 >= 2 && n1 <= 4 && idle >= 3,
	   "40 sleeping tiles on 4 workers: rc %d (worker 0 is the calling thread), %u threads ran them, %u idle in the pool after",
	   rc, n1, idle);

	/* More runs make no thread: every tile on a thread there was. */
	ntask = task_tids(task, 256);
	for (outside = 0, bad = 0, i = 0; i < 5; i++) {
		bad += run_wide(w, 40, 4, 1000, tid2, &n2) != 0 || n2 < 2;
		outside += tids_outside(tid2, n2, task, ntask);
	}
	ok(bad == 0 && outside == 0 && task_tids(task, 256) == ntask &&
	   pypto__pool_idle() == idle,
	   "5 more runs: %u failed, %u threads that were not there before, threads %u -> %u, idle %u -> %u",
	   bad, outside, ntask, task_tids(task, 256), idle,
	   pypto__pool_idle());

	/* PYPTO_POOL=0: new threads every run, the pool untouched. */
	setenv("PYPTO_POOL", "0", 1);
	rc = run_wide(w, 40, 4, 1000, tid2, &n2);
	unsetenv("PYPTO_POOL");
	outside = tids_outside(tid2, n2, task, ntask);
	ok(rc == 0 && n2 >= 2 && outside == n2 - 1 &&
	   pypto__pool_idle() == idle,
	   "PYPTO_POOL=0: rc %d, %u of its %u threads new (all but the caller), idle %u",
	   rc, outside, n2, pypto__pool_idle());

	/* A chain stays on one worker: no other is woken or steals. */
	pypto_graph_create(&g);
	for (i = 0; i < n; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].prev = i ? &w[i - 1] : NULL;
		pypto_add_compute(g, NULL, who_fn, &w[i], -1);
		if (i)
			pypto_add_dep(g, i - 1, i);
	}
	rc = pypto_run(g, &c, NULL, &run);
	st = pypto_run_stats(run);
	for (once = 0, same = 0, bad = 0, i = 0; i < n; i++) {
		once += atomic_load(&w[i].runs) == 1;
		same += w[i].worker == w[0].worker;
		bad += !w[i].prev_done;
	}
	/* (the root may be stolen from worker 0's deque; nothing else) */
	ok(rc == 0 && once == n && bad == 0 && same == n && st &&
	   st->steals <= 1,
	   "chain of %u on 4 workers: rc %d, once %u, before its input %u, on the first tile's worker %u, steals %" PRIu64 " (at most the root)",
	   n, rc, once, bad, same, st ? st->steals : 0);
	pypto_run_free(run);
	pypto_graph_destroy(g);

	/* Two runs at once borrow different threads. */
	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, conc_run, &cc[i]);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	same = cc[0].ntid - tids_outside(cc[0].tid, cc[0].ntid, cc[1].tid,
					 cc[1].ntid);
	ok(cc[0].rc == 0 && cc[1].rc == 0 && same == 0 &&
	   cc[0].ntid >= 2 && cc[1].ntid >= 2,
	   "two threads each running 20 graphs of 3 workers at once: rc %d %d, %u and %u threads in their last runs, %u shared",
	   cc[0].rc, cc[1].rc, cc[0].ntid, cc[1].ntid, same);
	free(cc);

	/* Idle workers park at once, or refuse a bad budget by name. */
	setenv("PYPTO_SPIN_US", "0", 1);
	rc = run_wide(w, 40, 4, 1000, tid2, &n2);
	ok(rc == 0, "PYPTO_SPIN_US=0 (idle workers park at once): rc %d", rc);
	setenv("PYPTO_SPIN_US", "1000001", 1);
	rc = run_wide(w, 40, 4, 0, tid2, &n2);
	ok(rc == -PYPTO_ERR_INVAL && strstr(pypto_errmsg(), "PYPTO_SPIN_US"),
	   "PYPTO_SPIN_US=1000001: rc %d (%s)", rc, pypto_errmsg());
	setenv("PYPTO_SPIN_US", "soon", 1);
	rc = run_wide(w, 40, 4, 0, tid2, &n2);
	ok(rc == -PYPTO_ERR_INVAL, "PYPTO_SPIN_US=soon: rc %d", rc);
	unsetenv("PYPTO_SPIN_US");

	/* Runs inside tiles: each on its tile's thread as worker 0. */
	pypto_graph_create(&g);
	for (i = 0; i < 50; i++)
		pypto_add_compute(g, NULL, nest_fn, NULL, -1);
	atomic_store(&inner_ok, 0);
	rc = pypto_run(g, &c, NULL, NULL);
	pypto_graph_destroy(g);
	ok(rc == 0 && atomic_load(&inner_ok) == 50,
	   "50 tiles on 4 workers each running a graph of 20 tiles on 2: rc %d, %u inner runs right",
	   rc, atomic_load(&inner_ok));

	/* A forked child has no pool threads: it makes its own. */
#ifdef __SANITIZE_THREAD__
	/* ThreadSanitizer refuses threads after a multi-threaded fork. */
	skip("a run of 4 workers in a forked child: not under ThreadSanitizer");
	(void)pid;
	(void)status;
	free(w);
	return;
#endif
	pid = fork();
	if (pid == 0)
		_exit(run_wide(w, 40, 4, 1000, tid2, &n2) == 0 && n2 >= 2 ?
		      0 : 1);
	status = -1;
	if (pid > 0)
		waitpid(pid, &status, 0);
	ok(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "a run of 4 workers in a forked child: status %#x", status);
	free(w);
}

static void test_errors(void)
{
	struct pypto_config c = cfg_of(2, 1);
	struct node nodes[8] = { 0 };
	struct pypto_graph *g;
	struct pypto_run *r = NULL;
	struct pypto_xfer x = { .op = PYPTO_PUT, .rows = 1, .row_bytes = 8,
				.local = nodes };
	uint32_t i;
	int rc;

	/* A failing tile stops the run; its consumers never run. */
	pypto_graph_create(&g);
	for (i = 0; i < 8; i++) {
		pypto_add_compute(g, i == 3 ? "bad" : NULL, node_fn, &nodes[i],
				  -1);
		if (i)
			pypto_add_dep(g, i - 1, i);
	}
	nodes[3].fail = 7;
	rc = pypto_run(g, &c, NULL, &r);
	ok(rc == -PYPTO_ERR_TASK && strstr(pypto_errmsg(), "bad") &&
	   atomic_load(&nodes[4].runs) == 0 && r && r->status == rc,
	   "failing tile: rc %d (%s), consumer ran %u times", rc,
	   pypto_errmsg(), atomic_load(&nodes[4].runs));
	pypto_run_free(r);

	/* A cycle is PYPTO_DEADLOCK before anything runs. */
	nodes[3].fail = 0;
	memset(nodes, 0, sizeof(nodes));
	pypto_add_dep(g, 7, 2);
	rc = pypto_run(g, &c, NULL, &r);
	ok(rc == -PYPTO_DEADLOCK && !r && atomic_load(&nodes[0].runs) == 0,
	   "cycle: rc %d (%s), nothing ran", rc, pypto_errmsg());
	pypto_graph_destroy(g);

	/* Transfer tile without a transport. */
	pypto_graph_create(&g);
	pypto_add_transfer(g, "x", &x, 1, -1);
	rc = pypto_run(g, &c, NULL, NULL);
	ok(rc == -PYPTO_ERR_INVAL, "transfer without transport: %d (%s)", rc,
	   pypto_errmsg());
	pypto_graph_destroy(g);

	c.devices = 3;
	pypto_graph_create(&g);
	rc = pypto_run(g, &c, NULL, NULL);
	ok(rc == -PYPTO_ERR_INVAL, "devices > workers: %d (%s)", rc,
	   pypto_errmsg());
	c = cfg_of(2, 1);
	rc = pypto_run(g, &c, NULL, &r);
	ok(rc == 0 && r && r->st.tiles == 0, "empty graph: %d", rc);
	pypto_run_free(r);
	ok(pypto_run(NULL, &c, NULL, NULL) == -PYPTO_ERR_INVAL, "NULL graph");
	pypto_graph_destroy(g);
}

/* Strided scatter/gather through the double, with injected failures. */
static void test_transfers(uint64_t inject)
{
	struct pypto_config c = cfg_of(2, 2);
	enum { ROWS = 64, COLS = 100, LD = 128 };
	uint8_t *host = malloc(ROWS * LD), *back = calloc(ROWS, LD);
	uint8_t *win = calloc(ROWS, COLS);
	struct pypto_xport *x;
	struct pypto_graph *g;
	struct pypto_run *r = NULL;
	uint32_t i, bad = 0;
	int rc, t, u;

	for (i = 0; i < ROWS * LD; i++)
		host[i] = (uint8_t)(i * 7 + 3);
	pypto_xport_memcpy(&x, win, ROWS * COLS);
	/* At most 3 failures: within max_retries even if one tile gets all. */
	if (inject)
		pypto_xport_inject_failure(x, inject, 3);
	c.batch_max = 16;	/* rows span several rounds */
	pypto_graph_create(&g);
	{
		struct pypto_xfer put = {
			.op = PYPTO_PUT, .rows = ROWS, .row_bytes = COLS,
			.local = host, .local_stride = LD, .win_off = 0,
			.win_stride = COLS,
		};
		struct pypto_xfer get = put;

		get.op = PYPTO_GET;
		get.local = back;
		t = pypto_add_transfer(g, "put", &put, 1, 0);
		u = pypto_add_transfer(g, "get", &get, 1, 1);
		pypto_add_dep(g, (uint32_t)t, (uint32_t)u);
	}
	rc = pypto_run(g, &c, x, &r);
	for (i = 0; i < ROWS * LD; i++)
		bad += (i % LD < COLS) ? back[i] != host[i] : back[i] != 0;
	ok(rc == 0 && bad == 0 && r && r->st.rounds >= 8 &&
	   r->st.tiles_transfer == 2 &&
	   r->st.descs == 2 * ROWS + r->st.xfer_retries * ROWS,
	   "strided put then get, 16 rows per round%s: rc %d, %u bad bytes, %llu rounds, %llu descs, %llu retries",
	   inject ? ", every 5th descriptor failing" : "", rc, bad,
	   r ? (unsigned long long)r->st.rounds : 0,
	   r ? (unsigned long long)r->st.descs : 0,
	   r ? (unsigned long long)r->st.xfer_retries : 0);
	if (inject)
		ok(r && r->st.xfer_retries > 0 && r->st.xfer_failures > 0,
		   "  failures seen %llu, tiles re-issued %llu",
		   r ? (unsigned long long)r->st.xfer_failures : 0,
		   r ? (unsigned long long)r->st.xfer_retries : 0);
	pypto_run_free(r);
	pypto_graph_destroy(g);

	/* Out of the window: fails every retry, then the run fails. */
	pypto_graph_create(&g);
	{
		struct pypto_xfer put = { .op = PYPTO_PUT, .rows = 1,
					  .row_bytes = 16, .local = host,
					  .win_off = ROWS * COLS - 8 };

		pypto_add_transfer(g, "beyond", &put, 1, -1);
	}
	pypto_xport_inject_failure(x, 0, 0);
	rc = pypto_run(g, &c, x, &r);
	ok(rc == -PYPTO_ERR_IO && r && r->st.xfer_retries == c.max_retries &&
	   strstr(pypto_errmsg(), "beyond"),
	   "transfer beyond the window: rc %d (%s), %llu retries", rc,
	   pypto_errmsg(), r ? (unsigned long long)r->st.xfer_retries : 0);
	pypto_run_free(r);
	pypto_graph_destroy(g);
	pypto_xport_destroy(x);
	free(host);
	free(back);
	free(win);
}

/*
 * A live run against a slow engine (the memcpy double with a delay per
 * descriptor: one descriptor at a time) and sleeping compute tiles: 8
 * independent transfer -> compute pairs on 2 workers.  Starved: transfers
 * of 4 ms, compute 0.1 ms: the workers wait for the engine most of the
 * run.  Overlapped: transfers of 0.1 ms, compute 4 ms: only the first
 * transfer is waited for.  The figures are compared with each other,
 * never with a time.
 */
struct pair_run {
	double overlap, engine;
	unsigned int mask;
	int rc, known;
};

static struct pair_run run_pairs(uint64_t xfer_ns, uint32_t comp_us)
{
	enum { PAIRS = 8 };
	static uint8_t src[PAIRS][64], win[PAIRS * 64];
	struct node nodes[PAIRS];
	struct pypto_config c = cfg_of(2, 1);
	struct pypto_xport *x = NULL;
	struct pypto_graph *g;
	struct pypto_run *r = NULL;
	struct pair_run out = { 0 };
	uint32_t i;

	memset(nodes, 0, sizeof(nodes));
	pypto_xport_memcpy(&x, win, sizeof(win));
	pypto__xport_memcpy_delay(x, xfer_ns);
	pypto_graph_create(&g);
	for (i = 0; i < PAIRS; i++) {
		struct pypto_xfer xf = { .op = PYPTO_PUT, .rows = 1,
					 .row_bytes = 64, .local = src[i],
					 .win_off = 64 * i };
		int t = pypto_add_transfer(g, NULL, &xf, 1, 0);
		int u;

		nodes[i].nap_us = comp_us;
		u = pypto_add_compute(g, NULL, node_fn, &nodes[i], 0);
		pypto_add_dep(g, (uint32_t)t, (uint32_t)u);
	}
	out.rc = pypto_run(g, &c, x, &r);
	if (r) {
		out.overlap = r->st.overlap_eff;
		out.engine = r->st.engine_util;
		out.known = r->st.engine_known;
		out.mask = pypto_run_diagnose(r, NULL);
	}
	pypto_run_free(r);
	pypto_graph_destroy(g);
	pypto_xport_destroy(x);
	return out;
}

static void test_starved_vs_overlapped(void)
{
	struct pair_run st = run_pairs(4000000, 100);
	struct pair_run ov = run_pairs(100000, 4000);

	ok(st.rc == 0 && ov.rc == 0 && st.known && ov.known,
	   "slow-engine runs: rc %d, %d; the double measures its busy time",
	   st.rc, ov.rc);
	ok(st.overlap < ov.overlap,
	   "starved run's overlap %.3f below the overlapped run's %.3f",
	   st.overlap, ov.overlap);
	ok(st.engine > ov.engine,
	   "engine busy %.3f of the starved run above the overlapped run's "
	   "%.3f (diagnosis masks %#x, %#x)", st.engine, ov.engine, st.mask,
	   ov.mask);
}

/*
 * Most transfer tiles of device dev in flight at one instant, counted from
 * the run's transfer events (issue -> completion, half-open).
 */
static uint32_t max_in_flight(const struct pypto_run *r, int32_t dev)
{
	const struct pypto_event *ev;
	unsigned int n = pypto_run_events(r, &ev), i, j;
	uint32_t best = 0;

	for (i = 0; i < n; i++) {
		uint32_t k = 0;

		if (ev[i].stage != PYPTO_STAGE_TRANSFER || ev[i].device != dev)
			continue;
		for (j = 0; j < n; j++)
			k += ev[j].stage == PYPTO_STAGE_TRANSFER &&
			     ev[j].device == dev && ev[j].t0_ns <= ev[i].t0_ns &&
			     ev[i].t0_ns < ev[j].t1_ns;
		if (k > best)
			best = k;
	}
	return best;
}

static int nop_fn(void *arg, const struct pypto_exec *ex)
{
	(void)arg;
	(void)ex;
	return 0;
}

/*
 * prefetch_depth and double_buffering on a graph that is not the GEMM:
 * one host tile releases PER transfer tiles per device at once (all in
 * one worker's round, so every one of them is ready before the first
 * completion), each feeding a compute tile.  The scheduler keeps at most
 * (double_buffering ? prefetch_depth + 1 : 1) transfer tiles of a device
 * in flight: the count from the events is exactly that per device (the
 * rest waited for completions), whatever the number of devices.  Counts
 * only: the slow engine makes the runs realistic, nothing is timed.
 */
static void test_xfer_cap(uint32_t devices, int db, uint32_t depth)
{
	enum { PER = 12 };
	static uint8_t src[64], win[2 * PER * 64];
	struct pypto_config c = cfg_of(2, devices);
	struct pypto_xport *x = NULL;
	struct pypto_graph *g;
	struct pypto_run *r = NULL;
	uint32_t want = db ? depth + 1 : 1, d, i, got[2] = { 0, 0 }, good = 0;
	int rc, h;

	c.double_buffering = db;
	c.prefetch_depth = depth;
	pypto_xport_memcpy(&x, win, sizeof(win));
	pypto__xport_memcpy_delay(x, 200000);
	pypto_graph_create(&g);
	h = pypto_add_host(g, "release", nop_fn, NULL, 0);
	for (d = 0; d < devices; d++)
		for (i = 0; i < PER; i++) {
			struct pypto_xfer xf = {
				.op = PYPTO_PUT, .rows = 1, .row_bytes = 64,
				.local = src,
				.win_off = 64 * (d * PER + i),
			};
			int t = pypto_add_transfer(g, NULL, &xf, 1, (int)d);
			int u = pypto_add_compute(g, NULL, nop_fn, NULL,
						  (int)d);

			pypto_add_dep(g, (uint32_t)h, (uint32_t)t);
			pypto_add_dep(g, (uint32_t)t, (uint32_t)u);
		}
	rc = pypto_run(g, &c, x, &r);
	for (d = 0; r && d < devices; d++) {
		got[d] = max_in_flight(r, (int32_t)d);
		good += got[d] == want;
	}
	ok(rc == 0 && r && r->st.tiles_transfer == devices * PER &&
	   r->st.tiles_compute == devices * PER && good == devices,
	   "%u device%s, double buffering %d, prefetch %u: at most %u transfer tiles of a device in flight, events show %u and %u: rc %d",
	   devices, devices > 1 ? "s" : "", db, depth, want, got[0], got[1],
	   rc);
	ok(r && r->st.xfer_cap == want &&
	   r->st.xfer_waits == devices * (PER - want),
	   "  stats: cap %u, %llu tiles waited for a slot",
	   r ? r->st.xfer_cap : 0,
	   r ? (unsigned long long)r->st.xfer_waits : 0);
	pypto_run_free(r);
	pypto_graph_destroy(g);
	pypto_xport_destroy(x);
}

/*
 * tile_size: the scheduler cannot cut a graph again, so a run whose
 * configuration names another tile size than the one the graph was cut
 * with (pypto_graph_set_workload(), the GEMM builder) is refused; without
 * a configuration the graph's size is used.
 */
static void test_tile_size(void)
{
	struct pypto_config c = cfg_of(2, 1);
	struct pypto_graph *g;
	int rc;

	pypto_graph_create(&g);
	pypto_add_compute(g, NULL, nop_fn, NULL, PYPTO_ANY_DEVICE);
	c.tile_size = 64;
	rc = pypto_run(g, &c, NULL, NULL);
	ok(rc == 0, "graph without a tile size runs with any tile_size: %d",
	   rc);
	pypto_graph_set_workload(g, PYPTO_WL_FC, 128);
	rc = pypto_run(g, &c, NULL, NULL);
	ok(rc == -PYPTO_ERR_INVAL && strstr(pypto_errmsg(), "tile_size 64") &&
	   strstr(pypto_errmsg(), "128"),
	   "tile_size 64 for a graph cut into 128: %d (%s)", rc,
	   pypto_errmsg());
	c.tile_size = 128;
	rc = pypto_run(g, &c, NULL, NULL);
	ok(rc == 0, "tile_size 128 for a graph cut into 128: %d", rc);
	unsetenv("PYPTO_TILE_SIZE");
	setenv("PYPTO_WORKERS", "2", 1);
	rc = pypto_run(g, NULL, NULL, NULL);
	ok(rc == 0, "no configuration: the graph's tile size: %d", rc);
	setenv("PYPTO_TILE_SIZE", "64", 1);
	rc = pypto_run(g, NULL, NULL, NULL);
	ok(rc == -PYPTO_ERR_INVAL,
	   "PYPTO_TILE_SIZE=64 for a graph cut into 128: %d (%s)", rc,
	   pypto_errmsg());
	unsetenv("PYPTO_TILE_SIZE");
	unsetenv("PYPTO_WORKERS");
	pypto_graph_destroy(g);
}

static void fill(float *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (float)((int64_t)(rnd() % 2001) - 1000) / 1000.0f;
}

static void test_gemm(uint32_t m, uint32_t n, uint32_t k, uint32_t ts,
		      uint32_t devices, int db, uint32_t depth, float beta,
		      uint64_t inject)
{
	struct pypto_config c = cfg_of(2, devices);
	uint32_t lda = k + 3, ldb = n + 1, ldc = n + 5;
	float *a = malloc(sizeof(float) * m * lda);
	float *b = malloc(sizeof(float) * k * ldb);
	float *cc = malloc(sizeof(float) * m * ldc);
	float *ref = malloc(sizeof(float) * m * ldc);
	float *absa = malloc(sizeof(float) * m * lda);
	float *absb = malloc(sizeof(float) * k * ldb);
	float *bound = malloc(sizeof(float) * m * ldc);
	struct pypto_gemm_args ga = {
		.m = m, .n = n, .k = k, .alpha = 1.5f, .beta = beta,
		.a = a, .lda = lda, .b = b, .ldb = ldb, .c = cc, .ldc = ldc,
	};
	struct pypto_gemm *gm = NULL;
	struct pypto_xport *x = NULL;
	struct pypto_graph *g;
	struct pypto_run *r = NULL;
	uint64_t bytes = 0;
	double err = 0, worst = 0;
	uint32_t bad = 0;
	void *dev = NULL;
	uint32_t i, j;
	int rc;

	c.tile_size = ts;
	c.double_buffering = db;
	c.prefetch_depth = depth;
	fill(a, (size_t)m * lda);
	fill(b, (size_t)k * ldb);
	fill(cc, (size_t)m * ldc);
	memcpy(ref, cc, sizeof(float) * m * ldc);
	openblas_set_num_threads(2);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n,
		    (int)k, 1.5f, a, (int)lda, b, (int)ldb, beta, ref,
		    (int)ldc);
	/*
	 * Per element, a sum of k products can be off by about k ulps of
	 * |alpha| |A| |B| + |beta| |C| (Higham's bound for a dot product), in
	 * the reference as in the tiles: the bound is twice that, relative
	 * to each element's own magnitude (an absolute bound scaled by k lets
	 * a wrong small element through).
	 */
	for (i = 0; i < m * lda; i++)
		absa[i] = fabsf(a[i]);
	for (i = 0; i < k * ldb; i++)
		absb[i] = fabsf(b[i]);
	for (i = 0; i < m * ldc; i++)
		bound[i] = fabsf(cc[i]);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n,
		    (int)k, 1.5f, absa, (int)lda, absb, (int)ldb, fabsf(beta),
		    bound, (int)ldc);
	rc = pypto_gemm_device_bytes(&ga, &c, &bytes);
	if (!rc && posix_memalign(&dev, 4096, bytes))
		rc = -1;
	if (!rc)
		rc = pypto_xport_memcpy(&x, dev, bytes);
	if (!rc && inject) {
		/* Bounded: a 48-row C tile would fail every attempt. */
		pypto_xport_inject_failure(x, inject, 15);
		c.max_retries = 100;
	}
	pypto_graph_create(&g);
	if (!rc)
		rc = pypto_gemm_build(g, &ga, &c, dev, &gm);
	if (!rc)
		rc = pypto_run(g, &c, x, &r);
	for (i = 0; i < m; i++)
		for (j = 0; j < ldc; j++) {
			uint64_t at = (uint64_t)i * ldc + j;
			double d = fabs((double)cc[at] - ref[at]);
			double lim = 2.0 * (k + 2) * FLT_EPSILON * bound[at] +
				     FLT_MIN;

			if (j >= n) {	/* outside C: untouched */
				bad += cc[at] != ref[at];
				continue;
			}
			bad += !(d <= lim);
			if (d > err)
				err = d;
			if (d / lim > worst)
				worst = d / lim;
		}
	ok(rc == 0 && bad == 0,
	   "gemm %ux%ux%u tile %u, %u devices, double buffering %d, prefetch %u, beta %g%s: rc %d, %u elements beyond 2(k+2) eps |alpha||A||B|+|beta||C| (max err %.2g, %.2f of the bound), %u tiles, %llu rounds, overlap %.2f",
	   m, n, k, ts, devices, db, depth, beta,
	   inject ? ", injected failures" : "", rc, bad, err, worst,
	   pypto_graph_tiles(g), r ? (unsigned long long)r->st.rounds : 0,
	   r ? r->st.overlap_eff : 0);
	if (inject)
		ok(r && r->st.xfer_retries > 0, "  %llu transfer tiles re-issued",
		   r ? (unsigned long long)r->st.xfer_retries : 0);
	/*
	 * The builder's buffer sets and the scheduler's cap are the same
	 * count: the A/B transfers never exceed it by construction, and the
	 * scheduler counts the C loads and stores in it too.
	 */
	for (i = 0; r && i < devices; i++) {
		uint32_t got = max_in_flight(r, (int32_t)i);

		if (got > (db ? depth + 1 : 1) || !got)
			break;
	}
	ok(r && i == devices,
	   "  at most %u transfer tiles of a device in flight (device 0: %u)",
	   db ? depth + 1 : 1, r ? max_in_flight(r, 0) : 0);
	pypto_run_free(r);
	pypto_gemm_free(gm);
	pypto_graph_destroy(g);
	pypto_xport_destroy(x);
	free(dev);
	free(a);
	free(b);
	free(cc);
	free(ref);
	free(absa);
	free(absb);
	free(bound);
}

/*
 * OpenBLAS' thread count is the process's: the GEMM graph runs its tiles
 * single-threaded only while it runs, and building it changes nothing.
 */
static int blas_threads_seen = -1;

static int blas_probe(void *arg, const struct pypto_exec *ex)
{
	(void)arg;
	(void)ex;
	blas_threads_seen = openblas_get_num_threads();
	return 0;
}

static void test_blas_scope(void)
{
	enum { N = 64 };
	static float a[N * N], b[N * N], cc[N * N];
	struct pypto_config c = cfg_of(2, 1);
	struct pypto_gemm_args ga = {
		.m = N, .n = N, .k = N, .alpha = 1, .beta = 0, .a = a,
		.lda = N, .b = b, .ldb = N, .c = cc, .ldc = N,
	};
	struct pypto_gemm *gm = NULL;
	struct pypto_xport *x = NULL;
	struct pypto_graph *g;
	uint64_t bytes = 0;
	void *dev = NULL;
	int after_build, after_run, rc;

	c.tile_size = 32;
	openblas_set_num_threads(2);
	pypto_gemm_device_bytes(&ga, &c, &bytes);
	if (posix_memalign(&dev, 4096, bytes))
		abort();
	pypto_xport_memcpy(&x, dev, bytes);
	pypto_graph_create(&g);
	rc = pypto_gemm_build(g, &ga, &c, dev, &gm);
	after_build = openblas_get_num_threads();
	pypto_add_compute(g, "probe", blas_probe, NULL, 0);
	if (!rc)
		rc = pypto_run(g, &c, x, NULL);
	after_run = openblas_get_num_threads();
	ok(rc == 0 && after_build == 2 && blas_threads_seen == 1 &&
	   after_run == 2,
	   "OpenBLAS threads: 2 before, %d after the build, %d during the run, %d after it",
	   after_build, blas_threads_seen, after_run);
	pypto_gemm_free(gm);
	pypto_graph_destroy(g);
	pypto_xport_destroy(x);
	free(dev);
}

/*
 * A transport whose submit fails at once (a peer that is already gone:
 * libhcomm refuses the batch before issuing anything).  The scheduler
 * fails the descriptors itself, and a failed transfer tile is issued
 * again inline, into the worker's next round: that round must go out
 * (and fail again) until the retries are spent, not sit unsent while
 * every worker parks.  The run ends with PYPTO_ERR_IO.
 */
static _Atomic unsigned int refused;

static int refuse_submit(struct pypto_xport *x,
			 const struct hcomm_xfer_desc *d, unsigned int n,
			 struct hcomm_request *reqs)
{
	(void)x;
	(void)d;
	(void)reqs;
	atomic_fetch_add(&refused, n);
	return pypto__fail(PYPTO_ERR_IO, "refused (the peer is gone)");
}

static void refuse_destroy(struct pypto_xport *x)
{
	free(x);
}

static const struct pypto_xport_ops refuse_ops = {
	.name = "refusing",
	.submit = refuse_submit,
	.destroy = refuse_destroy,
};

static void on_hang(int sig)
{
	static const char msg[] = "not ok - pypto_run hung with a transport "
				  "that refuses every batch\n";

	(void)sig;
	if (write(1, msg, sizeof(msg) - 1) < 0)
		_exit(3);
	_exit(1);
}

static void test_refused(void)
{
	static char buf[64];
	struct pypto_xport *x = calloc(1, sizeof(*x));
	struct pypto_xfer xf = {
		.op = PYPTO_GET, .rows = 1, .row_bytes = 8, .local = buf,
	};
	struct pypto_config c = cfg_of(2, 1);
	struct node n = { 0 };
	struct pypto_graph *g;
	int rep, rc = 0, t, k;

	if (!x)
		abort();
	x->ops = &refuse_ops;
	x->win_len = sizeof(buf);
	c.max_retries = 3;
	signal(SIGALRM, on_hang);
	for (rep = 0; rep < 200 && !rc; rep++) {
		pypto_graph_create(&g);
		t = pypto_add_transfer(g, "get", &xf, 1, 0);
		k = pypto_add_compute(g, "use", node_fn, &n, 0);
		pypto_add_dep(g, (uint32_t)t, (uint32_t)k);
		atomic_store(&refused, 0);
		alarm(20);
		rc = pypto_run(g, &c, x, NULL) == -PYPTO_ERR_IO &&
		     atomic_load(&refused) == 4 && !atomic_load(&n.runs) ? 0 : 1;
		alarm(0);
		pypto_graph_destroy(g);
	}
	ok(!rc, "a transport refusing every batch: the run fails with "
	   "PYPTO_ERR_IO after 1 + 3 issues, its consumer never runs, no "
	   "hang (%d runs)", rep);
	refuse_destroy(x);
}

int main(int argc, char **argv)
{
	uint32_t d;

	/* --sched: the scheduler alone (the sanitizer builds: no OpenBLAS) */
	if (argc > 1 && !strcmp(argv[1], "--sched")) {
		test_random_dag(5000, 1, 1);
		test_random_dag(5000, 4, 2);
		test_wide_and_chain(4);
		test_pool();
		test_errors();
		test_transfers(5);
		test_random_failures(40);
		return tap_done("pypto-sched");
	}
	test_random_dag(5000, 1, 1);
	test_random_dag(20000, 2, 1);
	test_random_dag(20000, 4, 2);
	test_random_dag(20000, 8, 3);
	test_wide_and_chain(2);
	test_wide_and_chain(4);
	test_pool();
	test_errors();
	test_random_failures(200);
	test_refused();
	test_transfers(0);
	test_transfers(5);
	test_starved_vs_overlapped();
	test_xfer_cap(1, 0, 0);
	test_xfer_cap(1, 0, 4);
	test_xfer_cap(1, 1, 0);
	test_xfer_cap(1, 1, 1);
	test_xfer_cap(1, 1, 2);
	test_xfer_cap(1, 1, 4);
	test_xfer_cap(2, 0, 2);
	test_xfer_cap(2, 1, 2);
	test_tile_size();
	test_blas_scope();
	test_gemm(256, 256, 256, 64, 1, 1, 2, 0.0f, 0);
	test_gemm(200, 130, 170, 64, 2, 1, 2, 1.0f, 0);
	test_gemm(200, 130, 170, 64, 2, 0, 2, 1.0f, 0);
	for (d = 1; d <= 8; d *= 2)
		test_gemm(192, 192, 320, 32, 1, 1, d, 0.5f, 0);
	test_gemm(192, 192, 192, 48, 2, 1, 3, 1.0f, 7);
	test_gemm(1, 1, 1, 16, 1, 1, 1, 1.0f, 0);
	test_gemm(300, 20, 500, 256, 1, 1, 1, 0.0f, 0);
	return tap_done("pypto-sched");
}
