/* SPDX-License-Identifier: MIT */
/*
 * hcomm_cb_bench: how long from a request's completion to its callback,
 * in libhcomm's two threaded callback modes, on this machine (no VM, no
 * module: the tcp transport over loopback).
 *
 *   hcomm_cb_bench [--samples N] [--producers LIST] [--json FILE]
 *
 * For each configuration two ranks are forked (HCOMM_TRANSPORT=tcp);
 * rank 1 only exposes its window.  Rank 0 sets the callback mode, then P
 * threads (each of --producers, default 1,4) each put 8 bytes into rank
 * 1's window with a callback and wait for it (hcomm_wait), one request
 * at a time, --samples requests in all (default 20000).  A thread that
 * waits also reaps completions - its own and the others' - and hands
 * them to the dispatcher: with 4 threads, 4 producers (and the progress
 * thread) feed the dispatcher's queue at once.  The callback records
 * now - req->t_complete_ns (the reaper's clock when it completed the
 * request): the queue, the hand-over between threads and the dispatch.
 *
 * Configurations:
 *   mpsc          HCOMM_CB_THREAD: lock-free MPSC queue, the dispatcher
 *                 polls it HCOMM_CB_SPIN_US (built in: 50 us) before it
 *                 sleeps on an event count;
 *   mpsc-nospin   the same with HCOMM_CB_SPIN_US=0: every hand-over to a
 *                 sleeping dispatcher is a futex wake-up;
 *   mutex         HCOMM_CB_THREAD_LOCKED: a list under a mutex, the
 *                 dispatcher sleeps on a condition variable.
 * Printed: p50 and p99 per configuration and producer count, and the
 * ratios mutex / mpsc and mpsc-nospin / mpsc of the medians (> 1: the
 * lock-free, polling dispatcher is faster).  Timings never fail the run;
 * exit 1 when an operation fails or a callback runs more or less than
 * once, 2 on bad usage or a failed setup.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hcomm.h"
#include "hcomm_comm_int.h"		/* hcomm__req_start, hcomm__complete */

#define PROD_MAX	16
#define NCONF		3

static const char *const conf_name[NCONF] = { "mpsc", "mpsc-nospin",
					       "mutex" };
static unsigned int opt_samples = 20000;
static unsigned int opt_prod[8] = { 1, 4 };
static unsigned int nprod = 2;
static const char *opt_json;

struct result {
	double p50, p99;
	unsigned long long n, bad;
	int rc;
};

/* Shared with the forked processes: [conf][producer index]; tcp and the
 * hand-over alone. */
static struct result (*res)[8];
static struct result (*qres)[8];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "hcomm_cb_bench: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* ---- rank 0's producers --------------------------------------------- */

struct prod {
	pthread_t th;
	struct hcomm_win *win;
	uint64_t *lat;			/* ns per sample; UINT64_MAX: bad */
	unsigned int n, id;
	unsigned int runs;		/* callbacks of the current request */
	int rc;
	char src[8];
};

static void lat_cb(struct hcomm_request *req, void *arg)
{
	uint64_t t = now_ns();
	struct prod *p = arg;
	unsigned int i = p->runs >> 8;	/* sample index in the high bits */

	p->lat[i] = t >= req->t_complete_ns && req->t_complete_ns ?
		    t - req->t_complete_ns : UINT64_MAX;
	p->runs++;
}

static void *prod_main(void *arg)
{
	struct prod *p = arg;
	struct hcomm_request req;
	unsigned int i;

	for (i = 0; i < p->n && !p->rc; i++) {
		memset(&req, 0, sizeof(req));
		req.cb = lat_cb;
		req.cb_arg = p;
		p->runs = i << 8;
		p->rc = hcomm_put_nb(p->win, 1, (uint64_t)p->id * 64, p->src,
				     sizeof(p->src), &req);
		if (!p->rc)
			p->rc = hcomm_wait(&req);
		if (!p->rc && req.status)
			p->rc = req.status;
		/* exactly one callback, before done */
		if (!p->rc && (p->runs & 0xff) != 1)
			p->rc = -HCOMM_ERR_INVAL;
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* p50 and p99 of the samples (sorted in place), the bad ones counted. */
static void summarize(uint64_t *all, unsigned int count, struct result *r)
{
	unsigned int k, n = 0;

	for (k = 0; k < count; k++) {
		if (all[k] == UINT64_MAX)
			r->bad++;
		else
			all[n++] = all[k];
	}
	r->n = n;
	if (n) {
		qsort(all, n, sizeof(*all), cmp_u64);
		r->p50 = (double)all[n / 2];
		r->p99 = (double)all[(size_t)((double)n * 0.99)];
	}
}

static void measure(struct hcomm_win *win, unsigned int np,
		    struct result *r)
{
	struct prod p[PROD_MAX];
	uint64_t *all;
	unsigned int i, per = opt_samples / np;

	memset(r, 0, sizeof(*r));
	all = calloc((size_t)per * np, sizeof(*all));
	if (!all) {
		r->rc = -HCOMM_ERR_NOMEM;
		return;
	}
	for (i = 0; i < np; i++) {
		memset(&p[i], 0, sizeof(p[i]));
		p[i].win = win;
		p[i].n = per;
		p[i].id = i;
		p[i].lat = &all[(size_t)i * per];
		memset(p[i].src, 'a' + (int)i, sizeof(p[i].src));
		if (pthread_create(&p[i].th, NULL, prod_main, &p[i]))
			die("pthread_create");
	}
	for (i = 0; i < np; i++) {
		pthread_join(p[i].th, NULL);
		if (p[i].rc && !r->rc)
			r->rc = p[i].rc;
	}
	summarize(all, per * np, r);
	free(all);
}

/* ---- the floor: a cache line between two threads ------------------- */

static _Atomic uint64_t ping, pong;
#define PP_ROUNDS	200000ULL

static void *pp_main(void *arg)
{
	uint64_t i;

	(void)arg;
	for (i = 1; i <= PP_ROUNDS; i++) {
		while (atomic_load_explicit(&ping, memory_order_acquire) != i)
			__builtin_ia32_pause();
		atomic_store_explicit(&pong, i, memory_order_release);
	}
	return NULL;
}

/*
 * Half the round trip of a value bounced between two spinning threads:
 * what any hand-over between two threads of this machine costs at least
 * (the baseline of the hand-over figures).
 */
static double floor_ns(void)
{
	double best = INFINITY;
	pthread_t t;
	uint64_t i, t0;
	int r;

	for (r = 0; r < 3; r++) {
		atomic_store(&ping, 0);
		atomic_store(&pong, 0);
		if (pthread_create(&t, NULL, pp_main, NULL))
			die("pthread_create");
		t0 = now_ns();
		for (i = 1; i <= PP_ROUNDS; i++) {
			atomic_store_explicit(&ping, i, memory_order_release);
			while (atomic_load_explicit(&pong,
						    memory_order_acquire) != i)
				__builtin_ia32_pause();
		}
		best = fmin(best, (double)(now_ns() - t0) / PP_ROUNDS / 2);
		pthread_join(t, NULL);
	}
	return best;
}

/* ---- the hand-over alone ------------------------------------------ */

/*
 * One rank, no transport: each producer thread starts a request and
 * completes it itself with hcomm__complete() - what a transport's reaper
 * does - then waits (yielding its CPU) until the dispatcher ran the
 * callback.  Nothing else runs, so the figure is the queue, the wake-up
 * or poll of the dispatcher, and the dispatch.
 */
struct qprod {
	pthread_t th;
	struct hcomm_comm *c;
	uint64_t *lat;
	unsigned int n;
	int rc;
};

static void qlat_cb(struct hcomm_request *req, void *arg)
{
	uint64_t t = now_ns();
	uint64_t *slot = arg;

	*slot = t >= req->t_complete_ns && req->t_complete_ns ?
		t - req->t_complete_ns : UINT64_MAX;
}

static void *qprod_main(void *arg)
{
	struct qprod *p = arg;
	struct hcomm_request req;
	unsigned int i, k;

	for (i = 0; i < p->n && !p->rc; i++) {
		memset(&req, 0, sizeof(req));
		req.cb = qlat_cb;
		req.cb_arg = &p->lat[i];
		p->lat[i] = UINT64_MAX;
		p->rc = hcomm__req_start(p->c, &req, 0);
		if (p->rc)
			break;
		hcomm__complete(p->c, &req, 0, 8);
		for (k = 0; !__atomic_load_n(&req.done, __ATOMIC_ACQUIRE);
		     k++) {
			if (k % 64 == 63)
				sched_yield();
			else
				__builtin_ia32_pause();
		}
	}
	return NULL;
}

static int queue_main(int conf)
{
	static const enum hcomm_cb_mode mode[NCONF] = {
		HCOMM_CB_THREAD, HCOMM_CB_THREAD, HCOMM_CB_THREAD_LOCKED
	};
	struct hcomm_comm *c;
	unsigned int i, j;
	char root[64];
	int rc;

	snprintf(root, sizeof(root), "hcomm-cb-bench-q-%d", (int)getpid());
	setenv("HCOMM_RANK", "0", 1);
	setenv("HCOMM_WORLD_SIZE", "1", 1);
	setenv("HCOMM_ROOT_ADDR", root, 1);
	setenv("HCOMM_TRANSPORT", "tcp", 1);
	if (conf == 1)
		setenv("HCOMM_CB_SPIN_US", "0", 1);
	rc = hcomm_comm_init(&c, NULL);
	if (!rc)
		rc = hcomm_comm_set_cb_mode(c, mode[conf]);
	if (rc) {
		fprintf(stderr, "hcomm_cb_bench: one rank: %s (%s)\n",
			hcomm_strerror(rc), hcomm_errmsg());
		return 2;
	}
	for (i = 0; i < nprod && !rc; i++) {
		unsigned int np = opt_prod[i], per = opt_samples / np;
		struct qprod p[PROD_MAX];
		uint64_t *all = calloc((size_t)per * np, sizeof(*all));
		struct result *r = &qres[conf][i];

		if (!all)
			return 2;
		for (j = 0; j < np; j++) {
			memset(&p[j], 0, sizeof(p[j]));
			p[j].c = c;
			p[j].n = per;
			p[j].lat = &all[(size_t)j * per];
			if (pthread_create(&p[j].th, NULL, qprod_main, &p[j]))
				return 2;
		}
		for (j = 0; j < np; j++) {
			pthread_join(p[j].th, NULL);
			if (p[j].rc && !rc)
				rc = p[j].rc;
		}
		summarize(all, per * np, r);
		free(all);
	}
	if (!rc)
		rc = hcomm_flush(c);
	if (rc)
		fprintf(stderr, "hcomm_cb_bench: hand-over, %s: %s (%s)\n",
			conf_name[conf], hcomm_strerror(rc), hcomm_errmsg());
	hcomm_comm_destroy(c);
	return rc ? 1 : 0;
}

static void run_queue(int conf)
{
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (!pid) {
		alarm(600);
		_exit(queue_main(conf));
	}
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "hcomm_cb_bench: hand-over, %s failed\n",
			conf_name[conf]);
		exit(WIFEXITED(st) && WEXITSTATUS(st) == 2 ? 2 : 1);
	}
}

static double opt_floor;

static void print_table(const char *title, struct result (*r)[8],
			bool with_floor)
{
	unsigned int i;
	int k;

	printf("\n== %s\n", title);
	printf("  %-12s %9s %10s %10s\n", "mode", "producers", "p50 ns",
	       "p99 ns");
	for (k = 0; k < NCONF; k++)
		for (i = 0; i < nprod; i++)
			printf("  %-12s %9u %10.0f %10.0f\n", conf_name[k],
			       opt_prod[i], r[k][i].p50, r[k][i].p99);
	printf("  ratio of the p50s (> 1: mpsc, the lock-free queue with a polling dispatcher, is faster)\n");
	for (i = 0; i < nprod; i++)
		printf("  %u producer%s: mutex / mpsc %.1f   mpsc-nospin / mpsc %.1f\n",
		       opt_prod[i], opt_prod[i] > 1 ? "s" : " ",
		       r[2][i].p50 / r[0][i].p50, r[1][i].p50 / r[0][i].p50);
	for (i = 0; with_floor && i < nprod; i++)
		printf("  %u producer%s: mpsc p50 / the floor (%.0f ns) %.2f\n",
		       opt_prod[i], opt_prod[i] > 1 ? "s" : " ", opt_floor,
		       r[0][i].p50 / opt_floor);
}

static int rank_main(int rank, int conf, const char *root)
{
	static const enum hcomm_cb_mode mode[NCONF] = {
		HCOMM_CB_THREAD, HCOMM_CB_THREAD, HCOMM_CB_THREAD_LOCKED
	};
	struct hcomm_comm *comm;
	struct hcomm_win *win;
	char *mem, env[16];
	unsigned int i;
	int rc;

	snprintf(env, sizeof(env), "%d", rank);
	setenv("HCOMM_RANK", env, 1);
	setenv("HCOMM_WORLD_SIZE", "2", 1);
	setenv("HCOMM_ROOT_ADDR", root, 1);
	setenv("HCOMM_TRANSPORT", "tcp", 1);
	if (conf == 1)
		setenv("HCOMM_CB_SPIN_US", "0", 1);
	mem = mmap(NULL, 4096 * 4, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return 2;
	rc = hcomm_comm_init(&comm, NULL);
	if (!rc)
		rc = hcomm_win_create(comm, mem, 4096 * 4, &win);
	if (rc) {
		fprintf(stderr, "hcomm_cb_bench: rank %d: %s (%s)\n", rank,
			hcomm_strerror(rc), hcomm_errmsg());
		return 2;
	}
	if (rank == 0) {
		rc = hcomm_comm_set_cb_mode(comm, mode[conf]);
		for (i = 0; !rc && i < nprod; i++) {
			measure(win, opt_prod[i], &res[conf][i]);
			rc = res[conf][i].rc;
		}
		if (!rc)
			rc = hcomm_flush(comm);
		if (rc)
			fprintf(stderr, "hcomm_cb_bench: %s: %s (%s)\n",
				conf_name[conf], hcomm_strerror(rc),
				hcomm_errmsg());
	}
	/* rank 1 checks what the last puts of each producer left */
	if (hcomm_boot_barrier(comm) && !rc)
		rc = -HCOMM_ERR_IO;
	for (i = 0; rank == 1 && !rc && i < opt_prod[nprod - 1]; i++) {
		char want[8];

		memset(want, 'a' + (int)i, sizeof(want));
		if (memcmp(mem + i * 64, want, sizeof(want))) {
			fprintf(stderr, "hcomm_cb_bench: producer %u's bytes are not in rank 1's window\n",
				i);
			rc = -HCOMM_ERR_IO;
		}
	}
	hcomm_win_free(win);
	hcomm_comm_destroy(comm);
	return rc ? 1 : 0;
}

static void run_conf(int conf)
{
	char root[64];
	pid_t pid[2];
	int r, st, bad = 0;

	snprintf(root, sizeof(root), "hcomm-cb-bench-%d-%d", (int)getpid(),
		 conf);
	for (r = 0; r < 2; r++) {
		fflush(stdout);
		pid[r] = fork();
		if (pid[r] < 0)
			die("fork: %s", strerror(errno));
		if (!pid[r]) {
			alarm(600);
			_exit(rank_main(r, conf, root));
		}
	}
	for (r = 0; r < 2; r++)
		if (waitpid(pid[r], &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			bad = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	if (bad) {
		fprintf(stderr, "hcomm_cb_bench: %s: the ranks failed\n",
			conf_name[conf]);
		exit(bad == 2 ? 2 : 1);
	}
}

static void parse_prod(const char *s)
{
	char *dup = strdup(s), *tok, *save = NULL;

	nprod = 0;
	for (tok = strtok_r(dup, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *end;
		unsigned long v = strtoul(tok, &end, 10);

		if (*end || !v || v > PROD_MAX || nprod == 8)
			die("--producers: 1..%d, at most 8 of them: \"%s\"",
			    PROD_MAX, s);
		opt_prod[nprod++] = (unsigned int)v;
	}
	free(dup);
	if (!nprod)
		die("--producers: an empty list");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "samples", required_argument, NULL, 's' },
		{ "producers", required_argument, NULL, 'p' },
		{ "json", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	FILE *f;
	int c, k;
	unsigned int i;

	while ((c = getopt_long(argc, argv, "s:p:j:h", lo, NULL)) != -1) {
		switch (c) {
		case 's':
			opt_samples = (unsigned int)strtoul(optarg, NULL, 10);
			if (opt_samples < 100 || opt_samples > 10000000)
				die("--samples: 100 .. 10000000");
			break;
		case 'p':
			parse_prod(optarg);
			break;
		case 'j':
			opt_json = optarg;
			break;
		default:
			fprintf(c == 'h' ? stdout : stderr,
				"usage: hcomm_cb_bench [--samples N] [--producers LIST] [--json FILE]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	res = mmap(NULL, sizeof(*res) * NCONF * 2, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (res == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	qres = res + NCONF;
	printf("hcomm_cb_bench: completion -> callback, %u samples per point, %ld CPUs\n",
	       opt_samples, sysconf(_SC_NPROCESSORS_ONLN));
	opt_floor = floor_ns();
	printf("floor: a cache line between two spinning threads of this machine, one way: %.0f ns\n",
	       opt_floor);
	for (k = 0; k < NCONF; k++)
		run_queue(k);
	for (k = 0; k < NCONF; k++)
		run_conf(k);
	print_table("the hand-over alone: hcomm__complete() -> callback, one rank, no transport",
		    qres, true);
	print_table("end to end: 8-byte puts over tcp (loopback), 2 ranks; the transport's threads share the CPUs",
		    res, false);
	for (k = 0; k < NCONF; k++)
		for (i = 0; i < nprod; i++)
			if (res[k][i].bad || qres[k][i].bad) {
				printf("  %s, %u producers: %llu callbacks saw no completion time\n",
				       conf_name[k], opt_prod[i],
				       res[k][i].bad + qres[k][i].bad);
				return 1;
			}
	if (!opt_json)
		return 0;
	f = fopen(opt_json, "w");
	if (!f)
		die("%s: %s", opt_json, strerror(errno));
	fprintf(f, "{\n  \"program\": \"hcomm_cb_bench\",\n  \"samples\": %u,\n  \"floor_ns\": %.1f,\n  \"points\": [",
		opt_samples, opt_floor);
	for (k = 0; k < 2 * NCONF; k++)
		for (i = 0; i < nprod; i++)
			fprintf(f, "%s\n    {\"part\": \"%s\", \"mode\": \"%s\", \"producers\": %u, \"p50_ns\": %.0f, \"p99_ns\": %.0f, \"samples\": %llu}",
				k || i ? "," : "",
				k < NCONF ? "tcp" : "handover",
				conf_name[k % NCONF], opt_prod[i],
				res[k][i].p50, res[k][i].p99, res[k][i].n);
	fprintf(f, "\n  ]\n}\n");
	fclose(f);
	return 0;
}
