/* SPDX-License-Identifier: MIT */
/*
 * test_rdma: the rdma transport with forked ranks on one RDMA device
 * (soft-RoCE inside a VM: lib/tests/vm/rdma_tests.sh sets one up).
 *
 *   test_rdma [-n RANKS] [-t SECS] [-e VAR=VALUE]... [CASE...]
 *
 * Each case runs in RANKS forked processes with HCOMM_RANK,
 * HCOMM_WORLD_SIZE, HCOMM_ROOT_ADDR=<ip>:<port> (ip: HCOMM_RDMA_TEST_IP,
 * default 10.99.0.1) and HCOMM_TRANSPORT=rdma, plus every -e; a case that
 * takes longer than SECS (default 240) is killed and fails.  TAP output;
 * rank lines start with "rN:".  Without an RDMA device everything is
 * skipped.  Cases: xfer signal batch cb threads fence errors cache inline
 * reject dmabuf kill (the default), perf, cut (two VMs, -r).  -r RANK runs
 * one rank of a world whose other ranks run elsewhere.
 *
 * Links the static library for two hidden helpers of hcomm_xport_rdma.c.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "hcomm.h"
#include "tap.h"
#include "../tools/dmabuf_util.h"

/* hcomm_xport_rdma.c (hidden) */
int hcomm__rdma_info(struct hcomm_comm *c, char *buf, size_t len);
int hcomm__rdma_peer_counters(struct hcomm_comm *c, int r, uint64_t *out);

#define WIN_SIZE	(40u << 20)
#define MAX_RANKS	16

static int g_rank, g_size;
static struct hcomm_comm *g_comm;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define say(...) do {						\
	printf("r%d: ", g_rank);				\
	printf(__VA_ARGS__);					\
	putchar('\n');						\
	fflush(stdout);						\
} while (0)

/* In a rank: fail the case (exit status 1) saying where. */
#define CHECK(cond, ...) do {					\
	if (!(cond)) {						\
		printf("r%d: FAIL %s:%d: ", g_rank, __FILE__,	\
		       __LINE__);				\
		printf(__VA_ARGS__);				\
		printf(" [%s]\n", hcomm_errmsg());		\
		fflush(stdout);					\
		return 1;					\
	}							\
} while (0)

/* Deterministic bytes of (seed, i). */
static void fill(void *p, size_t len, uint64_t seed)
{
	uint8_t *b = p;
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
	size_t i;

	for (i = 0; i < len; i++) {
		if (!(i & 7)) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		b[i] = (uint8_t)(x >> ((i & 7) * 8));
	}
}

/* Offset of the first byte of p that differs from fill(seed), or -1. */
static long check(const void *p, size_t len, uint64_t seed)
{
	uint8_t *want = malloc(len ? len : 1);
	long bad = -1;
	size_t i;

	if (!want)
		return 0;
	fill(want, len, seed);
	if (memcmp(want, p, len))
		for (i = 0; i < len; i++)
			if (want[i] != ((const uint8_t *)p)[i]) {
				bad = (long)i;
				break;
			}
	free(want);
	return bad;
}

static uint64_t seed_of(int rank, size_t size, int k)
{
	return ((uint64_t)rank << 48) ^ ((uint64_t)size << 8) ^ (uint64_t)k;
}

static void *win_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* ------------------------------------------------------------------ */
/* cases (run in every rank)                                           */
/* ------------------------------------------------------------------ */

static const size_t sizes[] = {
	1, 7, 8, 63, 64, 255, 256, 399, 400, 401, 4095, 4096, 4097, 16383,
	16384, 16385, 65536, 100000, 262143, 262144, 262145, (1 << 20) + 3,
	4 << 20, 16 << 20,
};
#define NSIZES	(sizeof(sizes) / sizeof(sizes[0]))

/*
 * hcomm_comm_peer_stats() towards every other rank: rdma only, its one
 * route, no error; towards `to` exactly sent bytes put, got bytes read
 * and ops operations, towards the others nothing sent (the counters
 * start at init: call it after the first case's traffic only).
 */
static int peer_stats_check(int to, uint64_t sent, uint64_t got,
			    uint64_t ops)
{
	struct hcomm_peer_stats ps;
	const struct hcomm_peer_xport_stats *x = &ps.xp[HCOMM_XPORT_RDMA];
	int r, ret;

	for (r = 0; r < g_size; r++) {
		if (r == g_rank)
			continue;
		ps.size = sizeof(ps);
		ret = hcomm_comm_peer_stats(g_comm, r, &ps);
		CHECK(!ret && ps.version == HCOMM_PEER_STATS_VERSION &&
		      ps.peer == r, "hcomm_comm_peer_stats(%d): %d", r, ret);
		CHECK(x->in_use && !ps.xp[HCOMM_XPORT_TCP].in_use &&
		      !ps.xp[HCOMM_XPORT_KERNEL].in_use && ps.nranges == 1 &&
		      ps.range[0].xport == HCOMM_XPORT_RDMA,
		      "peer %d: rdma alone, one range (%u, %s)", r,
		      ps.nranges, ps.why);
		CHECK(!x->wc_errors && !x->conn_lost && !x->wc_status[5],
		      "peer %d: %llu WC errors", r,
		      (unsigned long long)x->wc_errors);
		CHECK(x->bytes_sent == (r == to ? sent : 0) &&
		      x->bytes_recv == (r == to ? got : 0) &&
		      x->ops_sent == (r == to ? ops : 0),
		      "peer %d: %llu B put, %llu B read, %llu ops (want "
		      "%llu, %llu, %llu)", r,
		      (unsigned long long)x->bytes_sent,
		      (unsigned long long)x->bytes_recv,
		      (unsigned long long)x->ops_sent,
		      (unsigned long long)(r == to ? sent : 0),
		      (unsigned long long)(r == to ? got : 0),
		      (unsigned long long)(r == to ? ops : 0));
	}
	return 0;
}

/*
 * put to the next rank, get back, by size, unaligned on both sides;
 * local buffers from the heap (bounce/registration), from the window
 * itself (its MR) and from a read-only mapping (put only).
 */
static int case_xfer(void)
{
	int to = (g_rank + 1) % g_size, from = (g_rank + g_size - 1) % g_size;
	struct hcomm_win *w;
	char *base = win_alloc(WIN_SIZE), *src, *dst, *ro;
	uint64_t moved = 0, nops = 0;
	unsigned int i, kind;
	long bad;
	int ret;

	CHECK(base, "window memory");
	src = malloc((16u << 20) + 64);
	dst = malloc((16u << 20) + 64);
	CHECK(src && dst, "buffers");
	ret = hcomm_win_create(g_comm, base, WIN_SIZE, &w);
	CHECK(!ret, "hcomm_win_create: %d", ret);
	for (kind = 0; kind < 3; kind++) {
		for (i = 0; i < NSIZES; i++) {
			size_t s = sizes[i], off = 13 + s % 7, lo = 5;
			char *from_buf = src + lo;

			if (kind == 1) {
				/* the source inside the window (its MR) */
				if (s > (8u << 20))
					continue;
				from_buf = base + (24u << 20) + lo;
			}
			fill(from_buf, s, seed_of(g_rank, s, kind));
			if (kind == 2) {
				if (s > (1u << 20))
					continue;
				ro = mmap(NULL, s + lo, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
				CHECK(ro != MAP_FAILED, "mmap");
				fill(ro + lo, s, seed_of(g_rank, s, kind));
				CHECK(!mprotect(ro, s + lo, PROT_READ),
				      "mprotect");
				from_buf = ro + lo;
			}
			ret = hcomm_put(w, to, off, from_buf, s);
			CHECK(!ret, "put %zu bytes kind %u: %d", s, kind, ret);
			if (kind == 2)
				munmap(ro, s + lo);
			CHECK(!hcomm_boot_barrier(g_comm), "barrier");
			bad = check(base + off, s, seed_of(from, s, kind));
			CHECK(bad < 0, "put %zu bytes kind %u from rank %d: "
			      "byte %ld differs", s, kind, from, bad);
			CHECK(!hcomm_boot_barrier(g_comm), "barrier");
			memset(dst, 0, s + 2 * lo);
			ret = hcomm_get(w, to, off, dst + lo, s);
			CHECK(!ret, "get %zu bytes: %d", s, ret);
			bad = check(dst + lo, s, seed_of(g_rank, s, kind));
			CHECK(bad < 0, "get %zu bytes kind %u from rank %d: "
			      "byte %ld differs", s, kind, to, bad);
			CHECK(!dst[lo - 1] && !dst[lo + s], "get %zu bytes "
			      "wrote outside its buffer", s);
			CHECK(!hcomm_boot_barrier(g_comm), "barrier");
			moved += s;
			nops += 2;
		}
	}
	say("xfer: %zu sizes x 3 local kinds ok", NSIZES);
	if (peer_stats_check(to, moved, moved, nops))
		return 1;
	say("xfer: per-peer counters: %llu B put and read in %llu ops",
	    (unsigned long long)moved, (unsigned long long)nops);
	CHECK(!hcomm_win_free(w), "win_free");
	munmap(base, WIN_SIZE);
	free(src);
	free(dst);
	return 0;
}

/*
 * put_signal: the target spins on hcomm_signal_read() and checks a
 * round's payload the moment the signal says it arrived.  Values of
 * several pieces (>= 2^18) included; the final value is exact.
 */
static int case_signal(void)
{
	static const size_t ssz[] = { 0, 8, 4096, 70000, 300000, 2 << 20 };
	int to = (g_rank + 1) % g_size, from = (g_rank + g_size - 1) % g_size;
	const int rounds = 40;
	uint64_t want = 0, v, val;
	size_t off[64], o = 0;
	struct hcomm_win *w;
	char *base = win_alloc(WIN_SIZE), *src = malloc(2 << 20);
	int r, ret;
	long bad;

	CHECK(base && src, "memory");
	ret = hcomm_win_create(g_comm, base, WIN_SIZE, &w);
	CHECK(!ret, "hcomm_win_create: %d", ret);
	for (r = 0; r < rounds; r++) {
		off[r] = o;
		o += ssz[r % 6] + 64;
	}
	CHECK(o < WIN_SIZE, "layout");
	CHECK(hcomm_signal_count(g_comm) >= 64, "signal count %u",
	      hcomm_signal_count(g_comm));
	for (r = 0; r < rounds; r++) {
		size_t s = ssz[r % 6];

		val = r % 5 == 4 ? (1ULL << 40) + (1ULL << 20) + r : 1;
		fill(src, s, seed_of(g_rank, s, r));
		ret = hcomm_put_signal(w, to, off[r], src, s, 9, val);
		CHECK(!ret, "put_signal round %d: %d", r, ret);
	}
	for (r = 0; r < rounds; r++) {
		size_t s = ssz[r % 6];
		double t0 = now_s();

		want += r % 5 == 4 ? (1ULL << 40) + (1ULL << 20) + r : 1;
		while ((v = hcomm_signal_read(g_comm, 9)) < want)
			CHECK(now_s() - t0 < 60, "signal 9 at %llu < %llu",
			      (unsigned long long)v, (unsigned long long)want);
		bad = check(base + off[r], s, seed_of(from, s, r));
		CHECK(bad < 0, "round %d (%zu bytes): signal %llu seen but "
		      "byte %ld not there", r, s, (unsigned long long)v, bad);
	}
	CHECK(hcomm_signal_read(g_comm, 9) == want, "signal 9 %llu != %llu",
	      (unsigned long long)hcomm_signal_read(g_comm, 9),
	      (unsigned long long)want);
	/* a sleeping waiter, woken by the completion channel */
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	if (g_rank == 0) {
		v = (uint64_t)hcomm_signal_wait(g_comm, 11, 3, 20000);
		CHECK(v == 3, "signal_wait 11 >= 3 returned %lld",
		      (long long)v);
	} else if (g_rank == 1) {
		usleep(300000);
		for (r = 0; r < 3; r++)
			CHECK(!hcomm_put_signal(w, 0, 0, src, 8, 11, 1),
			      "put_signal");
	}
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	say("signal: %d rounds in order, final %llu, sleeping waiter ok",
	    rounds, (unsigned long long)want);
	CHECK(!hcomm_win_free(w), "win_free");
	munmap(base, WIN_SIZE);
	free(src);
	return 0;
}

/* One batch to every peer: puts, gets, put_signals; with and without reqs. */
static int case_batch(void)
{
	enum { PER = 24 };
	struct hcomm_xfer_desc d[MAX_RANKS * PER];
	struct hcomm_request req[MAX_RANKS * PER];
	char *base = win_alloc(WIN_SIZE), *src = malloc(8 << 20);
	char *dst = calloc(1, 8 << 20);
	struct hcomm_win *w;
	unsigned int n = 0, i, k;
	size_t s, lo;
	int p, ret, pass;
	long bad;

	CHECK(base && src && dst, "memory");
	ret = hcomm_win_create(g_comm, base, WIN_SIZE, &w);
	CHECK(!ret, "hcomm_win_create: %d", ret);
	for (pass = 0; pass < 2; pass++) {
		n = 0;
		lo = 0;
		for (p = 0; p < g_size; p++) {
			for (k = 0; k < PER; k++) {
				s = (k * 7919u) % 40000 + 1;
				if (k == 5)
					s = 300000;
				memset(&d[n], 0, sizeof(d[n]));
				d[n].target = p;
				d[n].target_off = (size_t)g_rank * (2 << 20) +
						  k * 65536 + (k == 5 ? 0 :
						  (size_t)g_rank);
				if (k == 5)
					d[n].target_off = (24u << 20) +
						(size_t)g_rank * 400000;
				d[n].len = s;
				d[n].op = k % 3 == 2 ? HCOMM_OP_PUT_SIGNAL :
							HCOMM_OP_PUT;
				d[n].local = (uintptr_t)(src + lo);
				d[n].sig = 20 + g_rank;
				d[n].value = 1;
				fill(src + lo, s, seed_of(g_rank, s, k + pass));
				lo += s + 3;
				n++;
			}
		}
		ret = hcomm_batch(w, d, n, pass ? NULL : req);
		CHECK(!ret, "batch of %u: %d", n, ret);
		if (!pass)
			for (i = 0; i < n; i++) {
				ret = hcomm_wait(&req[i]);
				CHECK(!ret && req[i].bytes == d[i].len,
				      "request %u: %d, %llu bytes", i, ret,
				      (unsigned long long)req[i].bytes);
			}
		CHECK(!hcomm_boot_barrier(g_comm), "barrier");
		for (p = 0; p < g_size; p++)
			for (k = 0; k < PER; k++) {
				size_t toff = (size_t)p * (2 << 20) +
					      k * 65536 + (size_t)p;

				s = (k * 7919u) % 40000 + 1;
				if (k == 5) {
					s = 300000;
					toff = (24u << 20) + (size_t)p * 400000;
				}
				bad = check(base + toff, s,
					    seed_of(p, s, k + pass));
				CHECK(bad < 0, "pass %d from rank %d item %u: "
				      "byte %ld", pass, p, k, bad);
			}
		CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	}
	/* a batch of gets back from every peer */
	n = 0;
	lo = 0;
	for (p = 0; p < g_size; p++)
		for (i = 0; i < 8; i++) {
			k = i < 5 ? i : i + 1;	/* item 5 went elsewhere */
			s = (k * 7919u) % 40000 + 1;
			memset(&d[n], 0, sizeof(d[n]));
			d[n].op = HCOMM_OP_GET;
			d[n].target = p;
			d[n].target_off = (size_t)g_rank * (2 << 20) +
					  k * 65536 + (size_t)g_rank;
			d[n].len = s;
			d[n].local = (uintptr_t)(dst + lo);
			lo += s + 1;
			n++;
		}
	ret = hcomm_batch(w, d, n, req);
	CHECK(!ret, "batch of gets: %d", ret);
	for (i = 0; i < n; i++)
		CHECK(!hcomm_wait(&req[i]), "get %u", i);
	for (i = 0; i < n; i++) {
		k = i % 8 < 5 ? i % 8 : i % 8 + 1;
		s = (k * 7919u) % 40000 + 1;
		bad = check((void *)(uintptr_t)d[i].local, s,
			    seed_of(g_rank, s, k + 1));
		CHECK(bad < 0, "get %u from rank %d: byte %ld", i,
		      d[i].target, bad);
	}
	/* each peer sent 2 passes x PER/3 signals on 20 + its rank */
	for (p = 0; p < g_size; p++)
		CHECK(hcomm_signal_wait(g_comm, 20 + p, 2 * (PER / 3), 10000) ==
		      2 * (PER / 3), "signal %d", 20 + p);
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	say("batch: %d ranks x %d descriptors, with and without requests, "
	    "and gets ok", g_size, PER);
	CHECK(!hcomm_win_free(w), "win_free");
	munmap(base, WIN_SIZE);
	free(src);
	free(dst);
	return 0;
}

static unsigned int cb_count, cb_bad;

static void cb_fn(struct hcomm_request *req, void *arg)
{
	(void)arg;
	if (req->status || __atomic_load_n(&req->done, __ATOMIC_ACQUIRE))
		__atomic_add_fetch(&cb_bad, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&cb_count, 1, __ATOMIC_RELAXED);
}

/* Several threads issuing to every peer at once (lanes, locks, rings). */
#define TH_N	4
#define TH_ITER	60

struct th_arg {
	struct hcomm_win *w;
	int t;
	int fail;
	char *buf;
};

static size_t th_size(int it)
{
	return it % 10 == 9 ? 300000 : (size_t)(it * 977) % 70000 + 1;
}

static void *th_main(void *arg)
{
	struct th_arg *a = arg;
	struct hcomm_request req[8];
	int it, p, k = 0;

	memset(req, 0, sizeof(req));
	for (it = 0; it < TH_ITER && !a->fail; it++) {
		size_t s = th_size(it);

		fill(a->buf, s, seed_of(g_rank, s, a->t * 1000 + it));
		for (p = 0; p < g_size; p++) {
			struct hcomm_request *r = &req[k++ % 8];

			if (k > 8 && hcomm_wait(r))
				a->fail = 1;
			memset(r, 0, sizeof(*r));
			if (hcomm_put_nb(a->w, p, (size_t)(g_rank * TH_N + a->t)
					 << 20, a->buf, s, r))
				a->fail = 1;
		}
		/* the buffer is refilled next round: wait for the puts */
		for (p = 0; p < 8; p++)
			if (k > p && !req[p].done && hcomm_wait(&req[p]))
				a->fail = 1;
	}
	for (p = 0; p < g_size; p++)
		if (hcomm_put_signal(a->w, p, 0, NULL, 0, 50 + a->t, 1))
			a->fail = 1;
	return NULL;
}

static int case_threads(void)
{
	char *base = win_alloc(WIN_SIZE);
	struct th_arg a[TH_N];
	pthread_t th[TH_N];
	struct hcomm_win *w;
	int t, p, ret;
	long bad;

	CHECK(base, "memory");
	CHECK(g_size * TH_N <= 32, "ranks");
	ret = hcomm_win_create(g_comm, base, WIN_SIZE, &w);
	CHECK(!ret, "hcomm_win_create: %d", ret);
	for (t = 0; t < TH_N; t++) {
		a[t].w = w;
		a[t].t = t;
		a[t].fail = 0;
		a[t].buf = malloc(300000);
		CHECK(a[t].buf, "memory");
		CHECK(!pthread_create(&th[t], NULL, th_main, &a[t]), "thread");
	}
	for (t = 0; t < TH_N; t++) {
		pthread_join(th[t], NULL);
		CHECK(!a[t].fail, "thread %d failed [%s]", t, hcomm_errmsg());
		free(a[t].buf);
	}
	for (t = 0; t < TH_N; t++)
		CHECK(hcomm_signal_wait(g_comm, 50 + t, g_size, 20000) ==
		      g_size, "signal %d", 50 + t);
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	for (p = 0; p < g_size; p++)
		for (t = 0; t < TH_N; t++) {
			size_t s = th_size(TH_ITER - 1);

			bad = check(base + ((size_t)(p * TH_N + t) << 20), s,
				    seed_of(p, s, t * 1000 + TH_ITER - 1));
			CHECK(bad < 0, "rank %d thread %d: byte %ld", p, t,
			      bad);
		}
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	say("threads: %d threads x %d rounds to %d ranks ok", TH_N, TH_ITER,
	    g_size);
	CHECK(!hcomm_win_free(w), "win_free");
	munmap(base, WIN_SIZE);
	return 0;
}

/* Callbacks in every mode; flush waits for them. */
static int case_cb(void)
{
	enum { N = 200 };
	static const int modes[] = { HCOMM_CB_INLINE, HCOMM_CB_THREAD,
				     HCOMM_CB_THREAD_LOCKED };
	struct hcomm_request *req = calloc(N, sizeof(*req));
	char *base = win_alloc(WIN_SIZE), *src = malloc(N * 5000);
	int to = (g_rank + 1) % g_size;
	struct hcomm_win *w;
	unsigned int m, i;
	int ret;

	CHECK(base && src && req, "memory");
	ret = hcomm_win_create(g_comm, base, WIN_SIZE, &w);
	CHECK(!ret, "hcomm_win_create: %d", ret);
	for (m = 0; m < 3; m++) {
		ret = hcomm_comm_set_cb_mode(g_comm, modes[m]);
		CHECK(!ret, "set_cb_mode %d: %d", modes[m], ret);
		cb_count = cb_bad = 0;
		for (i = 0; i < N; i++) {
			size_t s = i % 3 ? 64 : 5000;

			memset(&req[i], 0, sizeof(req[i]));
			req[i].cb = cb_fn;
			fill(src + i * 5000, s, seed_of(g_rank, s, i));
			ret = i % 4 == 3 ?
			      hcomm_get_nb(w, to, i * 5000, src + i * 5000, s,
					   &req[i]) :
			      hcomm_put_nb(w, to, i * 5000, src + i * 5000, s,
					   &req[i]);
			CHECK(!ret, "nb %u: %d", i, ret);
		}
		CHECK(!hcomm_flush(g_comm), "flush");
		CHECK(cb_count == N && !cb_bad, "mode %d: %u callbacks, %u "
		      "bad", modes[m], cb_count, cb_bad);
		for (i = 0; i < N; i++)
			CHECK(req[i].done, "request %u not done", i);
		CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	}
	CHECK(!hcomm_comm_set_cb_mode(g_comm, HCOMM_CB_INLINE), "inline");
	say("cb: %d callbacks in each of 3 modes", N);
	CHECK(!hcomm_win_free(w), "win_free");
	munmap(base, WIN_SIZE);
	free(src);
	free(req);
	return 0;
}

/*
 * fence: a large (striped with HCOMM_NUM_QPS > 1) put, a fence, then a
 * small put over its start: the small one must win.  flush: many _nb
 * puts then flush, all landed.
 */
static int case_fence(void)
{
	int to = (g_rank + 1) % g_size, from = (g_rank + g_size - 1) % g_size;
	struct hcomm_request req[64];
	char *base = win_alloc(WIN_SIZE), *big = malloc(4 << 20);
	struct hcomm_win *w;
	char small[64];
	int k, i, ret;
	long bad;

	CHECK(base && big, "memory");
	ret = hcomm_win_create(g_comm, base, WIN_SIZE, &w);
	CHECK(!ret, "hcomm_win_create: %d", ret);
	for (k = 0; k < 10; k++) {
		memset(big, 'A' + k, 4 << 20);
		memset(small, 'a' + k, sizeof(small));
		memset(&req[0], 0, sizeof(req[0]));
		CHECK(!hcomm_put_nb(w, to, 0, big, 4 << 20, &req[0]), "put");
		CHECK(!hcomm_fence(g_comm), "fence");
		CHECK(!hcomm_put(w, to, 0, small, sizeof(small)), "put");
		CHECK(!hcomm_wait(&req[0]), "wait");
		CHECK(!hcomm_boot_barrier(g_comm), "barrier");
		CHECK(base[0] == 'a' + k && base[63] == 'a' + k &&
		      base[64] == 'A' + k && base[(4 << 20) - 1] == 'A' + k,
		      "round %d: %c %c %c", k, base[0], base[63], base[64]);
		CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	}
	for (i = 0; i < 64; i++) {
		memset(&req[i], 0, sizeof(req[i]));
		fill(big + i * 60000, 60000, seed_of(g_rank, 60000, i));
		CHECK(!hcomm_put_nb(w, to, 8 << 20 | i * 60000,
				    big + i * 60000, 60000, &req[i]), "put");
	}
	CHECK(!hcomm_flush(g_comm), "flush");
	for (i = 0; i < 64; i++)
		CHECK(req[i].done && !req[i].status, "request %d", i);
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	for (i = 0; i < 64; i++) {
		bad = check(base + (8 << 20 | i * 60000), 60000,
			    seed_of(from, 60000, i));
		CHECK(bad < 0, "flush: item %d byte %ld", i, bad);
	}
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	say("fence: 10 rounds ordered; flush: 64 puts landed");
	CHECK(!hcomm_win_free(w), "win_free");
	munmap(base, WIN_SIZE);
	free(big);
	return 0;
}

/* Argument errors, a signal timeout, empty operations. */
static int case_errors(void)
{
	char *base = win_alloc(1 << 20), buf[16] = { 0 };
	struct hcomm_win *w;
	double t0, dt;
	int64_t v;
	int ret;

	CHECK(base, "memory");
	ret = hcomm_win_create(g_comm, base, 1 << 20, &w);
	CHECK(!ret, "hcomm_win_create: %d", ret);
	ret = hcomm_put(w, g_size, 0, buf, 8);
	CHECK(ret == -HCOMM_ERR_INVAL, "put to rank %d: %d", g_size, ret);
	ret = hcomm_put(w, (g_rank + 1) % g_size, (1 << 20) - 4, buf, 8);
	CHECK(ret == -HCOMM_ERR_INVAL, "put past the window: %d", ret);
	ret = hcomm_put_signal(w, (g_rank + 1) % g_size, 0, buf, 8,
			       hcomm_signal_count(g_comm), 1);
	CHECK(ret == -HCOMM_ERR_INVAL, "signal out of range: %d", ret);
	CHECK(!hcomm_put(w, (g_rank + 1) % g_size, 0, buf, 0), "empty put");
	CHECK(!hcomm_get(w, (g_rank + 1) % g_size, 0, buf, 0), "empty get");
	CHECK(!hcomm_put(w, g_rank, 100, "self", 4), "put to self");
	CHECK(!memcmp(base + 100, "self", 4), "put to self landed");
	CHECK(!hcomm_put_signal(w, g_rank, 0, NULL, 0, 30, 5),
	      "signal to self");
	CHECK(hcomm_signal_read(g_comm, 30) == 5, "self signal");
	t0 = now_s();
	v = hcomm_signal_wait(g_comm, 31, 1, 300);
	dt = now_s() - t0;
	CHECK(v == -HCOMM_ERR_TIMEOUT && dt > 0.25 && dt < 3,
	      "signal_wait timeout: %lld after %.3f s", (long long)v, dt);
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	say("errors: INVAL x3, empty ops, self ops, timeout after %.3f s", dt);
	CHECK(!hcomm_win_free(w), "win_free");
	munmap(base, 1 << 20);
	return 0;
}

/*
 * Registration cache: one buffer put 16 times (hits with the module),
 * then unmapped and mapped again at the same address with other bytes:
 * the put must send the new bytes.
 */
static int case_cache(void)
{
	const size_t s = 1 << 20;
	int to = (g_rank + 1) % g_size, from = (g_rank + g_size - 1) % g_size;
	struct hcomm_comm_stats st0, st1;
	char *base = win_alloc(WIN_SIZE), *buf, *again;
	struct hcomm_win *w;
	char info[512];
	int k, ret;
	long bad;

	CHECK(base, "memory");
	ret = hcomm_win_create(g_comm, base, WIN_SIZE, &w);
	CHECK(!ret, "hcomm_win_create: %d", ret);
	buf = mmap(NULL, s, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(buf != MAP_FAILED, "mmap");
	hcomm_comm_get_stats(g_comm, &st0);
	for (k = 0; k < 16; k++) {
		fill(buf, s, seed_of(g_rank, s, k));
		CHECK(!hcomm_put(w, to, 0, buf, s), "put %d", k);
		CHECK(!hcomm_boot_barrier(g_comm), "barrier");
		bad = check(base, s, seed_of(from, s, k));
		CHECK(bad < 0, "put %d: byte %ld", k, bad);
		CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	}
	hcomm_comm_get_stats(g_comm, &st1);
	hcomm__rdma_info(g_comm, info, sizeof(info));
	say("cache: 16 puts of one buffer: %llu hits, %llu misses (%s)",
	    (unsigned long long)(st1.rcache_hits - st0.rcache_hits),
	    (unsigned long long)(st1.rcache_misses - st0.rcache_misses),
	    strstr(info, "cache=module") ? "module" : "per-op");
	if (strstr(info, "cache=module"))
		CHECK(st1.rcache_hits - st0.rcache_hits >= 14, "hits");
	for (k = 0; k < 4; k++) {
		CHECK(!munmap(buf, s), "munmap");
		again = mmap(buf, s, PROT_READ | PROT_WRITE, MAP_PRIVATE |
			     MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		CHECK(again == buf, "mmap at the same address");
		fill(buf, s, seed_of(g_rank, s, 100 + k));
		CHECK(!hcomm_put(w, to, 0, buf, s), "put after remap");
		CHECK(!hcomm_boot_barrier(g_comm), "barrier");
		bad = check(base, s, seed_of(from, s, 100 + k));
		CHECK(bad < 0, "after remap %d: byte %ld (stale "
		      "registration?)", k, bad);
		CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	}
	hcomm_comm_get_stats(g_comm, &st0);
	say("cache: remapped buffer sent its new bytes 4 times (stale %llu)",
	    (unsigned long long)(st0.rcache_stale - st1.rcache_stale));
	munmap(buf, s);
	CHECK(!hcomm_win_free(w), "win_free");
	munmap(base, WIN_SIZE);
	return 0;
}

/* Puts around the inline limit the transport found. */
static int case_inline(void)
{
	int to = (g_rank + 1) % g_size, from = (g_rank + g_size - 1) % g_size;
	char *base = win_alloc(1 << 20), buf[70000], info[512], *p;
	struct hcomm_win *w;
	unsigned int mi = 0, s, k;
	long bad;

	CHECK(base, "memory");
	CHECK(!hcomm_win_create(g_comm, base, 1 << 20, &w), "win_create");
	CHECK(!hcomm__rdma_info(g_comm, info, sizeof(info)), "rdma info");
	p = strstr(info, "max_inline=");
	CHECK(p && sscanf(p, "max_inline=%u", &mi) == 1, "%s", info);
	for (k = 0; k < 6; k++) {
		s = mi + k - 3;
		if (!mi || s > sizeof(buf))
			s = k + 1;
		fill(buf, s, seed_of(g_rank, s, k));
		CHECK(!hcomm_put(w, to, k * 8192, buf, s), "put %u", s);
	}
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	for (k = 0; k < 6; k++) {
		s = mi + k - 3;
		if (!mi || s > sizeof(buf))
			s = k + 1;
		bad = check(base + k * 8192, s, seed_of(from, s, k));
		CHECK(bad < 0, "%u bytes: byte %ld", s, bad);
	}
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	say("inline: max_inline %u, puts of %u .. %u bytes ok", mi, mi - 3,
	    mi + 2);
	CHECK(!hcomm_win_free(w), "win_free");
	munmap(base, 1 << 20);
	return 0;
}

/* The private data of hcomm_xport_rdma.c's connects (struct rx_hello). */
struct hello {
	uint32_t magic;
	uint16_t version;
	uint16_t lane;
	uint64_t nonce;
	int32_t rank;
	int32_t size;
	int32_t to;
	uint32_t code;
};

/* A raw rdma_cm connect to addr carrying h: the rejection's code, or -1. */
static int raw_connect(const char *addr, const struct hello *h, size_t hl)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibv_qp_init_attr qa;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id = NULL;
	struct sockaddr_in sa;
	struct hello got;
	char ip[64];
	int port, code = -1, step;

	if (!ch || sscanf(addr, "%63[^:]:%d", ip, &port) != 2)
		return -2;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	inet_pton(AF_INET, ip, &sa.sin_addr);
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&sa, 2000))
		goto out;
	for (step = 0; step < 4; step++) {
		if (rdma_get_cm_event(ch, &ev))
			goto out;
		switch (ev->event) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			rdma_ack_cm_event(ev);
			if (rdma_resolve_route(id, 2000))
				goto out;
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED:
			rdma_ack_cm_event(ev);
			memset(&qa, 0, sizeof(qa));
			qa.qp_type = IBV_QPT_RC;
			qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
			qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
			if (rdma_create_qp(id, NULL, &qa))
				goto out;
			memset(&cp, 0, sizeof(cp));
			cp.private_data = h;
			cp.private_data_len = (uint8_t)hl;
			cp.retry_count = 3;
			if (rdma_connect(id, &cp))
				goto out;
			break;
		case RDMA_CM_EVENT_REJECTED:
			memset(&got, 0, sizeof(got));
			if (ev->param.conn.private_data &&
			    ev->param.conn.private_data_len >= sizeof(got))
				memcpy(&got, ev->param.conn.private_data,
				       sizeof(got));
			code = got.magic == 0x48435244u ? (int)got.code : 0;
			rdma_ack_cm_event(ev);
			goto out;
		default:
			rdma_ack_cm_event(ev);
			goto out;
		}
	}
out:
	if (id) {
		if (id->qp)
			rdma_destroy_qp(id);
		rdma_destroy_id(id);
	}
	rdma_destroy_event_channel(ch);
	return code;
}

/* Connects that are not of this job, or come too late, are rejected. */
static int case_reject(void)
{
	char info[512], addr[64] = "", *p;
	char all[MAX_RANKS][64];
	struct hello h;
	int code;

	CHECK(!hcomm__rdma_info(g_comm, info, sizeof(info)), "info");
	p = strstr(info, "addr=");
	CHECK(p && sscanf(p, "addr=%63s", addr) == 1, "%s", info);
	CHECK(!hcomm_boot_allgather(g_comm, addr, all, 64), "allgather");
	if (g_rank == 0) {
		memset(&h, 0, sizeof(h));
		h.magic = 0x48435244u;
		h.version = 1;
		h.nonce = 12345;	/* not this job's */
		h.rank = 1;
		h.size = g_size;
		h.to = 1;
		code = raw_connect(all[1], &h, sizeof(h));
		CHECK(code == 2, "wrong nonce: rejection code %d (want 2)",
		      code);
		code = raw_connect(all[1], &h, 4);
		CHECK(code == 1, "short hello: rejection code %d (want 1)",
		      code);
		say("reject: wrong job and garbage refused by rank 1 (%s)",
		    all[1]);
	}
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	return 0;
}

/* A window on a dma-buf mapping: registered where the device can. */
static int case_dmabuf(void)
{
	struct dmabuf_buf b;
	struct hcomm_win *w;
	void *p;
	int ret;
	int32_t mine, all[MAX_RANKS];
	int i;

	memset(&b, 0, sizeof(b));
	ret = access("/dev/udmabuf", F_OK) ? -ENOENT :
	      dmabuf_alloc_udmabuf(&b, 2 << 20);
	mine = ret ? 1 : 0;
	CHECK(!hcomm_boot_allgather(g_comm, &mine, all, sizeof(mine)), "ag");
	for (i = 0; i < g_size; i++)
		if (all[i]) {
			say("dmabuf: no udmabuf here (%d): skipped", ret);
			if (!ret)
				dmabuf_free(&b);
			return 4;
		}
	p = mmap(NULL, 2 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, b.fd, 0);
	CHECK(p != MAP_FAILED, "mmap of the udmabuf");
	ret = hcomm_win_create(g_comm, p, 2 << 20, &w);
	if (ret) {
		CHECK(ret == -HCOMM_ERR_NOTSUP, "win_create on a dma-buf: %d",
		      ret);
		say("dmabuf: refused as documented: %s", hcomm_errmsg());
	} else {
		char buf[4096];
		int to = (g_rank + 1) % g_size;

		fill(buf, sizeof(buf), seed_of(g_rank, 4096, 1));
		CHECK(!hcomm_put(w, to, 4096, buf, sizeof(buf)), "put");
		CHECK(!hcomm_boot_barrier(g_comm), "barrier");
		CHECK(check((char *)p + 4096, 4096,
			    seed_of((g_rank + g_size - 1) % g_size, 4096, 1))
		      < 0, "dma-buf window data");
		CHECK(!hcomm_win_free(w), "win_free");
		say("dmabuf: window registered (plain ibv_reg_mr or "
		    "ibv_reg_dmabuf_mr) and written");
	}
	munmap(p, 2 << 20);
	dmabuf_free(&b);
	return 0;
}

/*
 * A peer killed mid-stream: rank 1 dies (SIGKILL) while rank 0 streams
 * 1 MiB puts to it.  Rank 0 must get an error naming rank 1 within
 * HCOMM_RDMA_KILL_LIMIT seconds (default 15), and destroy must return.
 */
static int case_kill(void)
{
	enum { Q = 16 };
	struct hcomm_request req[Q];
	char *base = win_alloc(WIN_SIZE), *src = malloc(1 << 20);
	struct hcomm_win *w;
	double t0, tk = 0, limit = 15;
	const char *e = getenv("HCOMM_RDMA_KILL_LIMIT");
	int i, ret, err = 0;
	char msg[256] = "";

	if (e)
		limit = atof(e);
	CHECK(base && src, "memory");
	ret = hcomm_win_create(g_comm, base, WIN_SIZE, &w);
	CHECK(!ret, "hcomm_win_create: %d", ret);
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	if (g_rank == 1) {
		usleep(500000);
		say("kill: dying now");
		kill(getpid(), SIGKILL);
	}
	if (g_rank != 0) {
		/* the others see rank 1 go in the bootstrap */
		ret = hcomm_boot_barrier(g_comm);
		say("kill: barrier after the death: %d (%s)", ret,
		    hcomm_errmsg());
		t0 = now_s();
		ret = hcomm_comm_destroy(g_comm);
		g_comm = NULL;
		say("kill: destroy returned %d after %.2f s", ret,
		    now_s() - t0);
		return 0;
	}
	memset(req, 0, sizeof(req));
	memset(src, 7, 1 << 20);
	t0 = now_s();
	for (i = 0; now_s() - t0 < 60; i++) {
		struct hcomm_request *r = &req[i % Q];

		if (i >= Q) {
			ret = hcomm_wait(r);
			if (ret) {
				err = ret;
				tk = now_s();
				snprintf(msg, sizeof(msg), "%s",
					 hcomm_errmsg());
				break;
			}
		}
		memset(r, 0, sizeof(*r));
		ret = hcomm_put_nb(w, 1, (i % 8) << 20, src, 1 << 20, r);
		if (ret) {
			err = ret;
			tk = now_s();
			snprintf(msg, sizeof(msg), "%s", hcomm_errmsg());
			break;
		}
	}
	CHECK(err, "no error within 60 s of streaming to a dead rank");
	say("kill: error %d (%s) after %.2f s: %s", err, hcomm_strerror(err),
	    tk - t0 - 0.5, msg);
	CHECK(err == -HCOMM_ERR_IO, "the error is %d, want HCOMM_ERR_IO",
	      err);
	CHECK(tk - t0 < limit + 0.5, "noticed after %.2f s (limit %.0f)",
	      tk - t0, limit);
	/* the next put fails at once, naming the rank */
	ret = hcomm_put(w, 1, 0, src, 64);
	CHECK(ret == -HCOMM_ERR_IO && strstr(hcomm_errmsg(), "rank 1"),
	      "put to the dead rank: %d (%s)", ret, hcomm_errmsg());
	say("kill: next put: %s", hcomm_errmsg());
	for (i = 0; i < Q; i++)
		if (req[i].cb == NULL && !req[i].done && i < Q)
			(void)hcomm_wait(&req[i]);
	t0 = now_s();
	ret = hcomm_comm_destroy(g_comm);
	g_comm = NULL;
	say("kill: destroy returned %d after %.2f s", ret, now_s() - t0);
	CHECK(now_s() - t0 < 30, "destroy took %.1f s", now_s() - t0);
	return 0;
}

/*
 * A silent peer (two VMs: scripts/netvm.sh cuts rank 1's link when the
 * file HCOMM_RDMA_CUT_READY appears).  Rank 0 streams puts; the QP's
 * retransmissions must give up within HCOMM_RDMA_KILL_LIMIT seconds
 * (default 15) of the last completion, with HCOMM_ERR_IO naming rank 1.
 */
static int case_cut(void)
{
	enum { Q = 8 };
	struct hcomm_request req[Q];
	char *base = win_alloc(WIN_SIZE), *src = malloc(1 << 20);
	const char *ready = getenv("HCOMM_RDMA_CUT_READY");
	const char *e = getenv("HCOMM_RDMA_KILL_LIMIT");
	double t0, last, limit = e ? atof(e) : 15;
	struct hcomm_win *w;
	int i, ret, err = 0, fd;
	char msg[256] = "";

	CHECK(base && src && ready, "memory, HCOMM_RDMA_CUT_READY");
	ret = hcomm_win_create(g_comm, base, WIN_SIZE, &w);
	CHECK(!ret, "hcomm_win_create: %d", ret);
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	if (g_rank == 1) {
		fd = open(ready, O_CREAT | O_WRONLY, 0644);
		CHECK(fd >= 0, "create %s", ready);
		close(fd);
		say("cut: asked for the cut, waiting 40 s");
		sleep(40);
		ret = hcomm_comm_destroy(g_comm);
		g_comm = NULL;
		say("cut: destroy returned %d (%s)", ret, ret ?
		    hcomm_errmsg() : "");
		return 0;
	}
	memset(req, 0, sizeof(req));
	memset(src, 3, 1 << 20);
	t0 = last = now_s();
	for (i = 0; now_s() - t0 < 120; i++) {
		struct hcomm_request *r = &req[i % Q];

		if (i >= Q) {
			ret = hcomm_wait(r);
			if (ret) {
				err = ret;
				snprintf(msg, sizeof(msg), "%s (errno %d)",
					 hcomm_errmsg(), hcomm_errno());
				break;
			}
			last = now_s();
		}
		memset(r, 0, sizeof(*r));
		ret = hcomm_put_nb(w, 1, (i % 8) << 20, src, 64 << 10, r);
		if (ret) {
			err = ret;
			snprintf(msg, sizeof(msg), "%s", hcomm_errmsg());
			break;
		}
	}
	CHECK(err, "no error within 120 s");
	say("cut: error %d %.2f s after the last completion (%d puts of "
	    "64 KiB before): %s", err, now_s() - last, i, msg);
	CHECK(err == -HCOMM_ERR_IO, "error %d, want HCOMM_ERR_IO", err);
	CHECK(now_s() - last < limit, "noticed after %.2f s (limit %.0f)",
	      now_s() - last, limit);
	ret = hcomm_put(w, 1, 0, src, 64);
	CHECK(ret == -HCOMM_ERR_IO && strstr(hcomm_errmsg(), "rank 1"),
	      "put to the cut rank: %d (%s)", ret, hcomm_errmsg());
	say("cut: next put: %s", hcomm_errmsg());
	t0 = now_s();
	ret = hcomm_comm_destroy(g_comm);
	g_comm = NULL;
	say("cut: destroy returned %d after %.2f s", ret, now_s() - t0);
	return 0;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Rank 0 -> 1: put bandwidth by size, 8-byte put latency, ping-pong. */
static int case_perf(void)
{
	enum { Q = 64 };
	static const size_t psz[] = { 8, 64, 1024, 4096, 16384, 65536, 262144,
				      1 << 20, 4 << 20 };
	struct hcomm_request req[Q];
	char *base = win_alloc(WIN_SIZE), *src = malloc(4 << 20);
	struct hcomm_win *w;
	unsigned int i, k, iters;
	double t0, dt;
	int ret;

	CHECK(base && src, "memory");
	memset(src, 1, 4 << 20);
	ret = hcomm_win_create(g_comm, base, WIN_SIZE, &w);
	CHECK(!ret, "hcomm_win_create: %d", ret);
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	if (g_rank == 0 && !getenv("PERF_PP_ONLY")) {
		for (k = 0; k < sizeof(psz) / sizeof(psz[0]); k++) {
			size_t s = psz[k];
			double best = 0;
			int rep;

			iters = (unsigned int)((32u << 20) / s);
			if (iters > 4000)
				iters = 4000;
			if (iters < 16)
				iters = 16;
			for (rep = 0; rep < 3; rep++) {
				memset(req, 0, sizeof(req));
				t0 = now_s();
				for (i = 0; i < iters; i++) {
					struct hcomm_request *r = &req[i % Q];

					if (i >= Q)
						CHECK(!hcomm_wait(r), "wait");
					memset(r, 0, sizeof(*r));
					CHECK(!hcomm_put_nb(w, 1, (i % 8) * s,
							    src, s, r),
					      "put_nb");
				}
				CHECK(!hcomm_flush(g_comm), "flush");
				dt = now_s() - t0;
				if (s * iters / dt > best)
					best = s * iters / dt;
			}
			say("perf: put_bw size=%zu iters=%u "
			    "best_of_3_MB/s=%.2f", s, iters, best / 1e6);
		}
		{
			double lat[400], sum = 0;

			for (i = 0; i < 400; i++) {
				t0 = now_s();
				CHECK(!hcomm_put(w, 1, 0, src, 8), "put");
				lat[i] = now_s() - t0;
				sum += lat[i];
			}
			qsort(lat, 400, sizeof(double), dbl_cmp);
			say("perf: put_lat size=8 avg_us=%.1f median_us=%.1f",
			    sum / 400 * 1e6, lat[200] * 1e6);
		}
	}
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	/*
	 * ping-pong: 0 put_signal -> 1 waits, answers; the half round trip
	 * per iteration (median and average, as ib_write_lat reports).
	 */
	if (g_rank < 2) {
		int peer = 1 - g_rank;
		double lat[300], sum = 0;

		for (i = 1; i <= 300; i++) {
			t0 = now_s();
			if (g_rank == 0) {
				CHECK(!hcomm_put_signal(w, peer, 0, src, 8, 40,
							1), "ps");
				CHECK(hcomm_signal_wait(g_comm, 41, i, 20000) >=
				      (int64_t)i, "wait");
			} else {
				CHECK(hcomm_signal_wait(g_comm, 40, i, 20000) >=
				      (int64_t)i, "wait");
				CHECK(!hcomm_put_signal(w, peer, 0, src, 8, 41,
							1), "ps");
			}
			lat[i - 1] = (now_s() - t0) / 2;
			sum += lat[i - 1];
		}
		qsort(lat, 300, sizeof(double), dbl_cmp);
		if (g_rank == 0)
			say("perf: pingpong size=8 half_rtt median_us=%.1f "
			    "avg_us=%.1f", lat[150] * 1e6, sum / 300 * 1e6);
		/*
		 * The same with put_signal_nb, its request waited for after
		 * the answer came: no acknowledgement on the critical path
		 * (what ib_write_lat measures).
		 */
		sum = 0;
		for (i = 1; i <= 300; i++) {
			struct hcomm_request r;

			memset(&r, 0, sizeof(r));
			t0 = now_s();
			if (g_rank == 0) {
				CHECK(!hcomm_put_signal_nb(w, peer, 0, src, 8,
							   42, 1, &r), "ps");
				CHECK(hcomm_signal_wait(g_comm, 43, i, 20000) >=
				      (int64_t)i, "wait");
			} else {
				CHECK(hcomm_signal_wait(g_comm, 42, i, 20000) >=
				      (int64_t)i, "wait");
				CHECK(!hcomm_put_signal_nb(w, peer, 0, src, 8,
							   43, 1, &r), "ps");
			}
			lat[i - 1] = (now_s() - t0) / 2;
			sum += lat[i - 1];
			CHECK(!hcomm_wait(&r), "wait for the put_signal");
		}
		qsort(lat, 300, sizeof(double), dbl_cmp);
		if (g_rank == 0)
			say("perf: pingpong_nb size=8 half_rtt median_us=%.1f "
			    "avg_us=%.1f", lat[150] * 1e6, sum / 300 * 1e6);
		/*
		 * And with plain 8-byte puts, the receiver polling its window
		 * memory (no signal, no receive completion): the write path
		 * alone, as ib_write_lat.
		 */
		CHECK(!hcomm_boot_barrier(g_comm), "barrier");
		sum = 0;
		for (i = 1; i <= 300; i++) {
			volatile uint64_t *mine = (volatile uint64_t *)
						  (base + 4096);
			uint64_t v = i;
			struct hcomm_request r;
			double t1 = now_s() + 20;

			memset(&r, 0, sizeof(r));
			t0 = now_s();
			if (g_rank == 0) {
				CHECK(!hcomm_put_nb(w, peer, 4096, &v, 8, &r),
				      "put");
				while (*mine < i && now_s() < t1)
					;
			} else {
				while (*mine < i && now_s() < t1)
					;
				CHECK(!hcomm_put_nb(w, peer, 4096, &v, 8, &r),
				      "put");
			}
			CHECK(*mine >= i, "no answer");
			lat[i - 1] = (now_s() - t0) / 2;
			sum += lat[i - 1];
			CHECK(!hcomm_wait(&r), "wait for the put");
		}
		qsort(lat, 300, sizeof(double), dbl_cmp);
		if (g_rank == 0)
			say("perf: pingpong_mem size=8 half_rtt median_us=%.1f "
			    "avg_us=%.1f", lat[150] * 1e6, sum / 300 * 1e6);
	}
	CHECK(!hcomm_boot_barrier(g_comm), "barrier");
	CHECK(!hcomm_win_free(w), "win_free");
	munmap(base, WIN_SIZE);
	free(src);
	return 0;
}

/* ------------------------------------------------------------------ */
/* launcher                                                            */
/* ------------------------------------------------------------------ */

struct tcase {
	const char *name;
	int (*fn)(void);
	int min_ranks;
	int dflt;
};

static const struct tcase cases[] = {
	{ "xfer", case_xfer, 2, 1 },
	{ "signal", case_signal, 2, 1 },
	{ "batch", case_batch, 2, 1 },
	{ "cb", case_cb, 2, 1 },
	{ "threads", case_threads, 2, 1 },
	{ "fence", case_fence, 2, 1 },
	{ "errors", case_errors, 2, 1 },
	{ "cache", case_cache, 2, 1 },
	{ "inline", case_inline, 2, 1 },
	{ "reject", case_reject, 2, 1 },
	{ "dmabuf", case_dmabuf, 2, 1 },
	{ "kill", case_kill, 2, 1 },
	{ "perf", case_perf, 2, 0 },
	{ "cut", case_cut, 2, 0 },
};

/* In the child: init, run, destroy; the exit status. */
static int rank_main(const struct tcase *tc)
{
	char info[512];
	int ret;

	ret = hcomm_comm_init(&g_comm, NULL);
	CHECK(!ret, "hcomm_comm_init: %d", ret);
	CHECK(!strcmp(hcomm_comm_transport(g_comm), "rdma"), "transport %s",
	      hcomm_comm_transport(g_comm));
	if (g_rank == 0 && !hcomm__rdma_info(g_comm, info, sizeof(info)))
		say("%s", info);
	ret = tc->fn();
	if (g_comm) {
		uint64_t cnt[37 + 64];
		int r;

		for (r = 0; !ret && r < g_size; r++)
			if (!hcomm__rdma_peer_counters(g_comm, r, cnt) &&
			    cnt[4])
				say("counters to rank %d: %llu errors",
				    r, (unsigned long long)cnt[4]);
		/* the public per-peer counters are the transport's */
		for (r = 0; !ret && r < g_size; r++) {
			struct hcomm_peer_stats ps = { .size = sizeof(ps) };
			const struct hcomm_peer_xport_stats *x =
				&ps.xp[HCOMM_XPORT_RDMA];
			uint64_t b[37 + 64];
			unsigned int i;
			int bad;

			if (r == g_rank ||
			    hcomm__rdma_peer_counters(g_comm, r, cnt) ||
			    hcomm_comm_peer_stats(g_comm, r, &ps) ||
			    hcomm__rdma_peer_counters(g_comm, r, b))
				continue;
			/* monotonic: before <= public <= after */
			bad = x->bytes_sent < cnt[0] || x->bytes_sent > b[0] ||
			      x->bytes_recv < cnt[1] || x->bytes_recv > b[1] ||
			      x->ops_sent < cnt[2] || x->ops_sent > b[2] ||
			      x->ops_recv < cnt[3] || x->ops_recv > b[3] ||
			      x->wc_errors < cnt[4] || x->wc_errors > b[4];
			for (i = 0; i < HCOMM_PEER_WC_STATUS; i++)
				bad |= x->wc_status[i] < cnt[5 + i] ||
				       x->wc_status[i] > b[5 + i];
			if (bad) {
				say("FAIL hcomm_comm_peer_stats(%d) differs "
				    "from the transport's counters", r);
				ret = 1;
			}
		}
		if (!ret && g_rank == 0 &&
		    !hcomm__rdma_peer_counters(g_comm, 1, cnt))
			say("to rank 1: tx %llu B, rx %llu B, %llu ops, %llu "
			    "signals in, WRs on lanes 0..3: %llu %llu %llu "
			    "%llu", (unsigned long long)cnt[0],
			    (unsigned long long)cnt[1],
			    (unsigned long long)cnt[2],
			    (unsigned long long)cnt[3],
			    (unsigned long long)cnt[37],
			    (unsigned long long)cnt[38],
			    (unsigned long long)cnt[39],
			    (unsigned long long)cnt[40]);
		if (hcomm_comm_destroy(g_comm) && !ret) {
			say("FAIL hcomm_comm_destroy: %s", hcomm_errmsg());
			ret = 1;
		}
	}
	return ret;
}

/* Run tc in n forked ranks; their combined status (0, 4 skip, 1). */
static int run_case(const struct tcase *tc, int n, int secs, char **envs,
		    int nenv, const char *ip)
{
	pid_t pid[MAX_RANKS];
	int st, r, i, left = n, worst = 0, code;
	double t0 = now_s();
	char root[96];

	snprintf(root, sizeof(root), "%s:%d", ip,
		 20000 + (int)((getpid() * 131 + (long)(t0 * 1000)) % 20000));
	fflush(stdout);
	for (r = 0; r < n; r++) {
		pid[r] = fork();
		if (pid[r] < 0)
			return 1;
		if (!pid[r]) {
			char v[32];

			snprintf(v, sizeof(v), "%d", r);
			setenv("HCOMM_RANK", v, 1);
			snprintf(v, sizeof(v), "%d", n);
			setenv("HCOMM_WORLD_SIZE", v, 1);
			setenv("HCOMM_ROOT_ADDR", root, 1);
			setenv("HCOMM_TRANSPORT", "rdma", 1);
			for (i = 0; i < nenv; i++)
				putenv(envs[i]);
			g_rank = r;
			g_size = n;
			alarm(secs + 5);
			_exit(rank_main(tc));
		}
	}
	while (left) {
		pid_t p = waitpid(-1, &st, WNOHANG);

		if (p > 0) {
			left--;
			code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 +
			       WTERMSIG(st);
			for (r = 0; r < n; r++)
				if (pid[r] == p)
					break;
			/* the kill case's victim dies by design */
			if (!strcmp(tc->name, "kill") && r == 1 &&
			    code == 128 + SIGKILL)
				code = 0;
			if (code == 4 && worst == 0)
				worst = 4;
			else if (code && code != 4) {
				printf("# rank %d exited %d\n", r, code);
				worst = 1;
			}
			continue;
		}
		if (now_s() - t0 > secs) {
			printf("# %s: timeout after %d s, killing\n", tc->name,
			       secs);
			for (r = 0; r < n; r++)
				kill(pid[r], SIGKILL);
			while (waitpid(-1, &st, 0) > 0)
				;
			return 1;
		}
		usleep(20000);
	}
	printf("# %s: %.1f s\n", tc->name, now_s() - t0);
	return worst;
}

/*
 * -r RANK: be that one rank of an n-rank world whose other ranks run
 * elsewhere (another VM); HCOMM_ROOT_ADDR and HCOMM_TRANSPORT come from
 * the caller.  Runs the named cases in order; exit status as a case's.
 */
static int run_one(int rank, int n, int ncase, char **names)
{
	unsigned int i;
	int k, ret = 0;
	char v[32];

	snprintf(v, sizeof(v), "%d", rank);
	setenv("HCOMM_RANK", v, 1);
	snprintf(v, sizeof(v), "%d", n);
	setenv("HCOMM_WORLD_SIZE", v, 1);
	g_rank = rank;
	g_size = n;
	for (k = 0; k < ncase && !ret; k++) {
		for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			if (!strcmp(names[k], cases[i].name))
				break;
		if (i == sizeof(cases) / sizeof(cases[0])) {
			fprintf(stderr, "test_rdma: no case %s\n", names[k]);
			return 2;
		}
		ret = rank_main(&cases[i]);
		say("%s: %s", cases[i].name, ret == 0 ? "ok" : ret == 4 ?
		    "skipped" : "FAILED");
	}
	return ret == 4 ? 0 : ret;
}

static int have_rdma(void)
{
	struct ibv_device **l;
	int n = 0;

	l = ibv_get_device_list(&n);
	if (l)
		ibv_free_device_list(l);
	return n > 0;
}

int main(int argc, char **argv)
{
	const char *ip = getenv("HCOMM_RDMA_TEST_IP");
	char *envs[32];
	int nenv = 0, n = 2, secs = 240, opt, i, j, any = 0, ret, one = -1;

	while ((opt = getopt(argc, argv, "n:t:e:r:")) != -1) {
		switch (opt) {
		case 'n':
			n = atoi(optarg);
			break;
		case 'r':
			one = atoi(optarg);
			break;
		case 't':
			secs = atoi(optarg);
			break;
		case 'e':
			if (nenv < 32)
				envs[nenv++] = optarg;
			break;
		default:
			fprintf(stderr, "usage: test_rdma [-n RANKS] [-t SECS] "
				"[-e VAR=VALUE]... [-r RANK] [CASE...]\n");
			return 2;
		}
	}
	if (n < 2 || n > MAX_RANKS)
		n = 2;
	if (!ip)
		ip = "10.99.0.1";
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!have_rdma()) {
		printf("1..0 # SKIP no RDMA device (see lib/tests/vm/"
		       "rdma_tests.sh)\n");
		return 0;
	}
	if (one >= 0)
		return run_one(one, n, argc - optind, argv + optind);
	for (i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++) {
		int want = optind == argc ? cases[i].dflt : 0;

		for (j = optind; j < argc; j++)
			if (!strcmp(argv[j], cases[i].name))
				want = 1;
		if (!want)
			continue;
		any = 1;
		if (n < cases[i].min_ranks) {
			skip("%s needs %d ranks", cases[i].name,
			     cases[i].min_ranks);
			continue;
		}
		ret = run_case(&cases[i], n, secs, envs, nenv, ip);
		if (ret == 4)
			skip("%s (%d ranks)", cases[i].name, n);
		else
			ok(!ret, "%s (%d ranks%s%s)", cases[i].name, n,
			   nenv ? ", " : "", nenv ? envs[0] : "");
	}
	if (!any)
		fprintf(stderr, "test_rdma: no such case\n");
	return tap_done("test_rdma");
}
