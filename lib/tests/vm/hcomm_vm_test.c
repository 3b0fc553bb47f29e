/* SPDX-License-Identifier: MIT */
/*
 * hcomm_vm_test: one rank of a libhcomm communicator test.  Started N
 * times by hcomm_vm_launch (or mpirun); every rank runs the same CASE.
 *
 *   hcomm_vm_test CASE [--max SIZE] [--mode inline|thread|locked]
 *                      [--expect LAUNCHER] [--allow-io] [--iters N]
 *                      [--victim RANK]
 *
 * Cases:
 *   basic     launcher detection (--expect env|table|ompi|slurm|pmi),
 *             rank/size, transport, allgather, barrier, windows of
 *             different sizes and an unaligned base, put/get to everyone
 *   putget    put and get of 1 B .. --max (default 16M) at odd offsets,
 *             to every rank including this one; every byte compared, the
 *             bytes around each destination must stay untouched
 *   signal    put_signal + signal_wait in a ring (data checked after each
 *             signal), all-to-all signal sums, a burst of 600 completed
 *             put_signals seen by one signal_read, signal_wait timeout,
 *             200 waits of 1 ms block (voluntary context switches)
 *   batch     hcomm_batch of 256 and 1000 descriptors mixing PUT, GET and
 *             PUT_SIGNAL with requests (per-request checks), and of 256
 *             without requests (blocking)
 *   batchgone a batch with one descriptor to a rank that exited, between
 *             puts and a put_signal into this rank's window: it alone
 *             fails, the others land (signal once); with and without
 *             requests (2 ranks: rank 1 leaves)
 *   cb        non-blocking operations with callbacks in --mode: every
 *             callback exactly once, seeing done = 1, status and bytes;
 *             from one thread, from four threads at once, reusing one
 *             request, after switching the mode, and left in flight for
 *             hcomm_comm_destroy
 *   cbnest    --mode: callbacks that wait for, test and flush later
 *             requests of their own batch (one reap, or one ioctl issue);
 *             done never reads 1 while the callback still runs
 *   colltimeout  HCOMM_COLL_TIMEOUT_MS=500: a barrier with a rank 1.5 s
 *             late times out; afterwards collectives fail at once (IO)
 *             while one-sided operations and signals work.  --forever:
 *             hcomm_comm_set_coll_timeout(-1) waits for the late rank
 *   rcache    the registration cache of local buffers: a put after
 *             munmap + mmap at the same address sends the new bytes;
 *             hcomm_comm_get_stats and the HCOMM_STATS_DIR file agree
 *   fence     put A (large), fence, put B (small, same place): B wins;
 *             put, fence, get sees the put; put, fence, put_signal: the
 *             data is there when the signal is; flush; win_free with
 *             operations outstanding
 *   errors    target out of range, offsets beyond or straddling the end
 *             of a window, overflow, signal out of range, bad batch
 *             descriptors (nothing issued) -> HCOMM_ERR_INVAL; signal_wait
 *             -> HCOMM_ERR_TIMEOUT; the communicator works afterwards
 *   threads   4 threads per rank issuing blocking and non-blocking
 *             operations at once (run with HCOMM_NUM_QPS > 1 too)
 *   timeout   hcomm_comm_init when a rank never arrives: must fail with
 *             HCOMM_ERR_TIMEOUT within HCOMM_TIMEOUT_MS (--allow-io: a
 *             rank that met the root may also see HCOMM_ERR_IO)
 *   killed    --victim V (default the last rank) kills itself with SIGKILL
 *             while the others stream put_nb/get_nb to it: each survivor
 *             gets an error within a bound (tcp, kernel: 3 s; rdma: the
 *             QP's retries), later operations to V fail naming "rank V",
 *             survivors still reach each other, a barrier fails, win_free
 *             and destroy return and give back every fd and thread (run it
 *             under hcomm_vm_launch -k V)
 *   coll      the collectives (allreduce, reduce_scatter, broadcast,
 *             reduce) of every type and operation against exact
 *             references, bad arguments, the fp16-compressed allreduce's
 *             error (tests/coll_check.h)
 *   colltails allreduces of full 256 KiB chunks with short tails (their
 *             puts complete out of order), hcomm_comm_probe() between
 *             collectives
 *   qos       hcomm_set_qos: admission (ADMISSION), ranges, an
 *             unprivileged user (ACCESS), then two tenants (the seed's
 *             { 30, 70, 2 } against the defaults) get 70/30 of the engine
 *             +-10 points (2 ranks, root)
 *
 * Output: lines "rN: ..." (one write each); failures start with "FAIL".
 * HCOMM_VMTEST_TRACE=1 adds a line "rN: phase P after S s" each time the
 * case moves on (a thread polls the phase every millisecond), so that a
 * slow or stuck phase shows in the log.
 * Exit status: 0 passed, 1 failed, 3 alarm (HCOMM_VMTEST_ALARM seconds,
 * default 100), 4 skipped.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hcomm.h>

#define KiB		1024ULL
#define MiB		(1024ULL * KiB)
#define PAD		4096	/* room for odd offsets and guards */
#define GUARD		16	/* bytes checked on each side */
#define POISON		0xa5
#define MAX_FAIL_MSGS	40

static struct hcomm_comm *comm;
static int me = -1, np;
static int fails;
static const char *volatile phase = "start";
static const char *case_name = "?";
static int opt_iters;

/* ------------------------------------------------------------------ */
/* output and checks                                                   */
/* ------------------------------------------------------------------ */

static void vout(const char *pfx, const char *fmt, va_list ap)
{
	char buf[1024];
	int n;

	if (me >= 0)
		n = snprintf(buf, sizeof(buf), "r%d: %s", me, pfx);
	else
		n = snprintf(buf, sizeof(buf), "r%s: %s",
			     getenv("HCOMM_VMTEST_RANK") ?
			     getenv("HCOMM_VMTEST_RANK") : "?", pfx);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(1, buf, (size_t)n) < 0)
		(void)0;
}

static void __attribute__((format(printf, 1, 2))) out(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vout("", fmt, ap);
	va_end(ap);
}

static void __attribute__((format(printf, 3, 4)))
fail_at(const char *file, int line, const char *fmt, ...)
{
	char pfx[160];
	va_list ap;

	fails++;
	if (fails > MAX_FAIL_MSGS) {
		if (fails == MAX_FAIL_MSGS + 1)
			out("FAIL (further failures not shown)");
		return;
	}
	snprintf(pfx, sizeof(pfx), "FAIL [%s/%s] %s:%d: ", case_name,
		 phase, file, line);
	va_start(ap, fmt);
	vout(pfx, fmt, ap);
	va_end(ap);
}

#define FAIL(...)	fail_at(__FILE__, __LINE__, __VA_ARGS__)
#define CHECK(c, ...)	((c) ? true : (FAIL(__VA_ARGS__), false))

static const char *errname(long rc)
{
	static __thread char buf[160];

	if (rc >= 0)
		snprintf(buf, sizeof(buf), "%ld", rc);
	else
		snprintf(buf, sizeof(buf), "%ld (%s)", rc,
			 hcomm_strerror((int)rc));
	return buf;
}

static bool expect_rc(long got, long want, const char *expr,
		      const char *file, int line)
{
	char w[160];

	if (got == want)
		return true;
	snprintf(w, sizeof(w), "%s", errname(want));
	fail_at(file, line, "%s = %s, expected %s%s%s", expr, errname(got), w,
		got < 0 && *hcomm_errmsg() ? "; errmsg: " : "",
		got < 0 ? hcomm_errmsg() : "");
	return false;
}

#define EXPECT(expr, want) expect_rc((long)(expr), (long)(want), #expr, \
				     __FILE__, __LINE__)
#define OK(expr)	EXPECT(expr, 0)
#define INVAL(expr)	EXPECT(expr, -HCOMM_ERR_INVAL)

static void on_alarm(int sig)
{
	char buf[256];
	int n;

	(void)sig;
	n = snprintf(buf, sizeof(buf),
		     "r%d: FAIL [%s/%s]: alarm: still running after the time "
		     "limit (HCOMM_VMTEST_ALARM); a hang\n", me, case_name,
		     phase);
	if (write(1, buf, (size_t)n) < 0)
		(void)0;
	_exit(3);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* HCOMM_VMTEST_TRACE=1: print each phase change with the time it took. */
static void *phase_tracer(void *arg)
{
	const char *last = phase;
	uint64_t t0 = now_ns(), t;
	struct timespec ms = { 0, 1000000 };

	(void)arg;
	for (;;) {
		nanosleep(&ms, NULL);
		if (phase == last)
			continue;
		t = now_ns();
		out("phase %s after %.3f s in %s", phase,
		    (double)(t - t0) / 1e9, last);
		last = phase;
		t0 = t;
	}
	return NULL;
}

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static void *xmap(size_t len)
{
	void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		out("FAIL: mmap of %zu bytes: %s", len, strerror(errno));
		exit(1);
	}
	return p;
}

/* ------------------------------------------------------------------ */
/* data                                                                */
/* ------------------------------------------------------------------ */

static uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static void fill(void *p, size_t len, uint64_t seed)
{
	unsigned char *c = p;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t w = splitmix(seed + i);

		memcpy(c + i, &w, 8);
	}
	for (; i < len; i++)
		c[i] = (unsigned char)splitmix(seed + i);
}

/* Position-sensitive 64-bit checksum, for messages. */
static uint64_t csum(const void *p, size_t len)
{
	const unsigned char *c = p;
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ c[i]) * 0x100000001b3ULL;
	return h;
}

/* Pattern of rank w: the bytes every source of w comes from. */
static size_t pat_len;
static unsigned char *pats[64];

static const unsigned char *pat(int w)
{
	if (!pats[w]) {
		pats[w] = xmap(pat_len);
		fill(pats[w], pat_len, 0x1000ULL * (uint64_t)(w + 1));
	}
	return pats[w];
}

static void pats_init(size_t len)
{
	pat_len = (len + 7) & ~7ULL;
}

/* got == want over len bytes; on a mismatch say where and how much. */
static bool __attribute__((format(printf, 4, 5)))
same_at(const void *got, const void *want, size_t len, const char *fmt, ...)
{
	const unsigned char *g = got, *w = want;
	size_t i, first = 0, bad = 0;
	char what[256];
	va_list ap;

	if (!memcmp(got, want, len))
		return true;
	for (i = 0; i < len; i++)
		if (g[i] != w[i] && !bad++)
			first = i;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	FAIL("%s: %zu of %zu bytes wrong, first at +%zu (0x%02x, expected "
	     "0x%02x); checksum %016" PRIx64 ", expected %016" PRIx64, what,
	     bad, len, first, g[first], w[first], csum(got, len),
	     csum(want, len));
	return false;
}

#define SAME(got, want, len, ...) same_at(got, want, len, __VA_ARGS__)

/* Every byte of [p, p + len) is POISON. */
static bool poisoned(const unsigned char *p, size_t len, const char *what,
		     size_t where)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != POISON) {
			FAIL("%s: byte at %zu changed (0x%02x) outside any "
			     "destination", what, where + i, p[i]);
			return false;
		}
	return true;
}

/* The GUARD bytes on each side of [off, off + len) of buf[cap] intact. */
static bool guards(const unsigned char *buf, size_t cap, size_t off,
		   size_t len, const char *what)
{
	size_t lo = off >= GUARD ? off - GUARD : 0;
	size_t hi = off + len + GUARD < cap ? off + len + GUARD : cap;

	return poisoned(buf + lo, off - lo, what, lo) &&
	       poisoned(buf + off + len, hi - off - len, what, off + len);
}

/* ------------------------------------------------------------------ */
/* communicator                                                        */
/* ------------------------------------------------------------------ */

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : dflt;
}

static void comm_up(void)
{
	int want_rank = env_int("HCOMM_VMTEST_RANK",
				env_int("OMPI_COMM_WORLD_RANK", -1));
	int want_size = env_int("HCOMM_VMTEST_SIZE",
				env_int("OMPI_COMM_WORLD_SIZE", -1));
	int rc;

	phase = "init";
	rc = hcomm_comm_init(&comm, NULL);
	if (rc) {
		FAIL("hcomm_comm_init: %s: %s", errname(rc), hcomm_errmsg());
		exit(1);
	}
	me = hcomm_comm_rank(comm);
	np = hcomm_comm_size(comm);
	if (want_rank >= 0 && !CHECK(me == want_rank, "rank %d, expected %d",
				     me, want_rank))
		exit(1);
	if (want_size >= 0 && !CHECK(np == want_size, "size %d, expected %d",
				     np, want_size))
		exit(1);
	if (np > 64) {
		FAIL("size %d: this test handles at most 64 ranks", np);
		exit(1);
	}
}

static void comm_down(void)
{
	phase = "destroy";
	OK(hcomm_comm_destroy(comm));
	comm = NULL;
}

static void barrier(void)
{
	OK(hcomm_boot_barrier(comm));
}

static struct hcomm_win *win_make(void *base, size_t len)
{
	struct hcomm_win *w = NULL;

	if (!OK(hcomm_win_create(comm, base, len, &w)) || !w) {
		FAIL("no window: cannot go on");
		exit(1);
	}
	CHECK(hcomm_win_size(w, me) == len, "win_size(me) = %zu, passed %zu",
	      hcomm_win_size(w, me), len);
	return w;
}

/* ------------------------------------------------------------------ */
/* basic: launcher, rank, collectives, windows                         */
/* ------------------------------------------------------------------ */

static int launcher_of(const char *s)
{
	if (!strcmp(s, "env"))
		return HCOMM_LAUNCH_ENV;
	if (!strcmp(s, "table"))
		return HCOMM_LAUNCH_RANK_TABLE;
	if (!strcmp(s, "ompi"))
		return HCOMM_LAUNCH_OMPI;
	if (!strcmp(s, "slurm"))
		return HCOMM_LAUNCH_SLURM;
	if (!strcmp(s, "pmi"))
		return HCOMM_LAUNCH_PMI;
	if (!strcmp(s, "single"))
		return HCOMM_LAUNCH_SINGLE;
	return -1;
}

struct hello {
	int32_t rank, size;
	int64_t pid;
	uint64_t magic;
	uint64_t win_len;
};

/* basic: each rank's slot of 4 KiB holds BLEN bytes at BOFF (odd). */
#define BOFF	(GUARD + 1)
#define BLEN	(4096 - 2 * GUARD - 2)

/*
 * route: the decision table (hcomm_comm_print_peers) names, for every
 * peer the kernel does not reach (another host), @expect alone at every
 * size ("measured": whatever the figures chose), every network transport
 * was measured, and the JSON form parses
 * as far as its keys go.  Then a put of 1 MiB to every such peer lands.
 */
static int case_route(const char *expect)
{
	const char *other = !strcmp(expect, "tcp") ? "rdma" : "tcp";
	char *buf = NULL, *line, *save = NULL;
	size_t len = 0;
	int remote = 0;
	FILE *f;

	comm_up();
	phase = "table";
	f = open_memstream(&buf, &len);
	CHECK(f != NULL, "open_memstream");
	if (!f)
		return 1;
	OK(hcomm_comm_print_peers(comm, f, 0));
	OK(hcomm_comm_print_peers(comm, f, 1));
	fclose(f);
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *ranges = strchr(line, ';');

		if (line[0] == '{') {
			CHECK(strstr(line, "\"peers\": [") &&
			      strstr(line, "\"route\""), "JSON: %s", line);
			continue;
		}
		printf("# %s\n", line);
		if (!strstr(line, "kernel -") || !ranges)
			continue;	/* this host's */
		remote++;
		CHECK(!strcmp(expect, "measured") ||
		      (strstr(ranges, expect) && !strstr(ranges, other)),
		      "expected %s at every size: %s", expect, line);
		CHECK(!strstr(line, "not probed"),
		      "a network link was not measured: %s", line);
	}
	free(buf);
	CHECK(remote > 0, "no peer on another host in the table");
	phase = "traffic";
	{
		size_t n = 1 << 20;
		char *src = malloc(n), *dst = calloc(1, n * (size_t)np);
		struct hcomm_win *w = NULL;
		int r;

		CHECK(src && dst, "malloc");
		if (!src || !dst)
			return 1;
		memset(src, 'a' + me, n);
		OK(hcomm_win_create(comm, dst, n * (size_t)np, &w));
		for (r = 0; w && r < np; r++)
			if (r != me)
				OK(hcomm_put(w, r, n * (size_t)me, src, n));
		OK(hcomm_boot_barrier(comm));
		for (r = 0; w && r < np; r++)
			CHECK(r == me || (dst[n * (size_t)r] == 'a' + r &&
				dst[n * (size_t)r + n - 1] == 'a' + r),
			      "bytes from rank %d", r);
		if (w)
			OK(hcomm_win_free(w));
		free(src);
		free(dst);
	}
	comm_down();
	return 0;
}

static int case_basic(const char *expect)
{
	struct hello h, *all;
	unsigned char *big, *bigall, *mem, *base, *dst;
	struct hcomm_win *w;
	size_t len, slot = 4096, biglen = 64 * KiB;
	int want = launcher_of(expect ? expect : "env"), r;
	const char *want_xport = getenv("HCOMM_VMTEST_TRANSPORT");
	uint32_t nsig, i;

	/* what hcomm_comm_transport() must say (net.sh sets it) */
	if (!want_xport || !*want_xport)
		want_xport = "kernel";
	if (want < 0) {
		FAIL("--expect %s: unknown launcher", expect);
		return 1;
	}
	comm_up();
	phase = "identity";
	CHECK((int)hcomm_comm_launcher(comm) == want,
	      "hcomm_comm_launcher() = %d, expected %d (%s)",
	      (int)hcomm_comm_launcher(comm), want, expect ? expect : "env");
	CHECK(hcomm_comm_transport(comm) &&
	      !strcmp(hcomm_comm_transport(comm), want_xport),
	      "transport \"%s\", expected \"%s\"",
	      hcomm_comm_transport(comm) ? hcomm_comm_transport(comm) : "(null)",
	      want_xport);
	/* a context exists whenever the kernel transport is in use */
	CHECK((hcomm_comm_ctx(comm) != NULL) == !!strstr(want_xport, "kernel"),
	      "hcomm_comm_ctx() is %p with transport %s",
	      (void *)hcomm_comm_ctx(comm), want_xport);
	nsig = hcomm_signal_count(comm);
	CHECK(nsig >= 1, "hcomm_signal_count() = %u", nsig);
	for (i = 0; i < nsig && i < 16; i++)
		CHECK(hcomm_signal_read(comm, i) == 0,
		      "fresh signal %u reads %" PRIu64, i,
		      hcomm_signal_read(comm, i));

	phase = "allgather";
	len = slot * (size_t)np + (size_t)me * 3 + 1;
	memset(&h, 0, sizeof(h));
	h.rank = me;
	h.size = np;
	h.pid = getpid();
	h.magic = 0x68636f6d6d766dULL ^ (uint64_t)me;
	h.win_len = len;
	all = calloc((size_t)np, sizeof(*all));
	OK(hcomm_boot_allgather(comm, &h, all, sizeof(h)));
	for (r = 0; r < np; r++)
		CHECK(all[r].rank == r && all[r].size == np &&
		      all[r].magic == (0x68636f6d6d766dULL ^ (uint64_t)r),
		      "allgather slot %d holds rank %d size %d magic %" PRIx64,
		      r, all[r].rank, all[r].size, all[r].magic);
	/* A larger allgather, every byte checked. */
	pats_init(biglen + PAD);
	big = xmap(biglen);
	memcpy(big, pat(me), biglen);
	bigall = xmap(biglen * (size_t)np);
	OK(hcomm_boot_allgather(comm, big, bigall, biglen));
	for (r = 0; r < np; r++)
		SAME(bigall + (size_t)r * biglen, pat(r), biglen,
		     "allgather of %llu bytes, rank %d's part",
		     (unsigned long long)biglen, r);
	phase = "barrier";
	for (i = 0; i < 5; i++)
		barrier();

	/* Windows of different sizes; odd ranks at an odd base address. */
	phase = "window";
	mem = xmap(len + 64);
	base = mem + (me & 1);
	memset(base, POISON, len);
	w = win_make(base, len);
	for (r = 0; r < np; r++)
		CHECK(hcomm_win_size(w, r) == all[r].win_len,
		      "win_size(%d) = %zu, that rank passed %" PRIu64, r,
		      hcomm_win_size(w, r), all[r].win_len);
	barrier();
	phase = "put-all";
	for (r = 0; r < np; r++) {
		int t = (me + r) % np;

		OK(hcomm_put(w, t, (uint64_t)me * slot + BOFF,
			     pat(me) + 1 + t, BLEN));
	}
	barrier();
	for (r = 0; r < np; r++) {
		SAME(base + (size_t)r * slot + BOFF, pat(r) + 1 + me, BLEN,
		     "window slot of rank %d", r);
		guards(base, len, (size_t)r * slot + BOFF, BLEN, "window");
	}
	barrier();
	phase = "get-all";
	dst = xmap(slot * (size_t)np);
	memset(dst, POISON, slot * (size_t)np);
	for (r = 0; r < np; r++) {
		int t = (me + r) % np, wr = (t + 1) % np;

		OK(hcomm_get(w, t, (uint64_t)wr * slot + BOFF,
			     dst + (size_t)t * slot + BOFF, BLEN));
		SAME(dst + (size_t)t * slot + BOFF, pat(wr) + 1 + t, BLEN,
		     "get from rank %d of what rank %d put there", t, wr);
		guards(dst, slot * (size_t)np, (size_t)t * slot + BOFF, BLEN,
		       "get destination");
	}
	barrier();
	phase = "win_free";
	OK(hcomm_win_free(w));
	comm_down();
	free(all);
	return 0;
}

/* ------------------------------------------------------------------ */
/* putget: sizes, offsets, every rank                                  */
/* ------------------------------------------------------------------ */

static const uint64_t pg_sizes[] = {
	1, 3, 8, 63, 4095, 4096, 4097, 65535, 262147, 1 * MiB + 5,
	4 * MiB - 3, 16 * MiB,
};

/* Source offset of rank w's data for target t; odd. */
static size_t pg_soff(int t)
{
	return 1 + 2 * (size_t)(t % 64);
}

/* Where writer w puts into a target's window (its slot); odd. */
static size_t pg_toff(int w, size_t slot, uint64_t len)
{
	return (size_t)w * slot + GUARD + 1 + 2 * (size_t)(len % 7);
}

static int case_putget(uint64_t max)
{
	size_t slot = max + 2 * PAD, wlen, si;
	unsigned char *win, *dst;
	struct hcomm_win *w;
	uint64_t t0;
	int r;

	comm_up();
	wlen = slot * (size_t)np;
	pats_init(max + PAD);
	for (r = 0; r < np; r++)
		pat(r);
	win = xmap(wlen);
	dst = xmap(slot);
	memset(win, POISON, wlen);
	w = win_make(win, wlen);

	for (si = 0; si < sizeof(pg_sizes) / sizeof(*pg_sizes); si++) {
		uint64_t len = pg_sizes[si];
		size_t doff = GUARD + 3 + (len % 5) * 2;

		if (len > max)
			break;
		t0 = now_ns();
		phase = "put";
		barrier();
		for (r = 0; r < np; r++) {
			int t = (me + r) % np;

			OK(hcomm_put(w, t, pg_toff(me, slot, len),
				     pat(me) + pg_soff(t), len));
		}
		barrier();
		phase = "verify-put";
		for (r = 0; r < np; r++) {
			size_t off = pg_toff(r, slot, len);

			SAME(win + off, pat(r) + pg_soff(me), len,
			     "%" PRIu64 " B put by rank %d at offset %zu", len,
			     r, off);
			guards(win, wlen, off, len, "put destination");
		}
		barrier();
		phase = "get";
		for (r = 0; r < np; r++) {
			int t = (me + r) % np;
			int wr = (me + 1) % np;	/* data another rank put */

			memset(dst, POISON, doff + len + GUARD);
			OK(hcomm_get(w, t, pg_toff(wr, slot, len), dst + doff,
				     len));
			SAME(dst + doff, pat(wr) + pg_soff(t), len,
			     "%" PRIu64 " B get from rank %d (put there by "
			     "rank %d)", len, t, wr);
			guards(dst, slot, doff, len, "get destination");
		}
		barrier();
		/* Clean the slots for the next size. */
		phase = "reset";
		for (r = 0; r < np; r++)
			memset(win + pg_toff(r, slot, len), POISON, len);
		out("putget %" PRIu64 " B to %d ranks: %.1f ms", len, np,
		    (double)(now_ns() - t0) / 1e6);
	}
	barrier();
	phase = "win_free";
	OK(hcomm_win_free(w));
	comm_down();
	return 0;
}

/* ------------------------------------------------------------------ */
/* signal: ring, all-to-all sums, timeout                              */
/* ------------------------------------------------------------------ */

#define RING_ROUNDS	12
#define RING_SLOT	(256 * KiB + PAD)
#define SIG_RING	1
#define SIG_A2A		2
#define SIG_NB		3
#define SIG_IDLE	4
#define SIG_BURST	5
#define SIG_ANY		6

static const size_t ring_sizes[] = { 8, 4097, 65539, 256 * KiB, 1, 4096 };

static int case_signal(void)
{
	size_t wlen = RING_SLOT * RING_ROUNDS + 64 * KiB, a2a = RING_SLOT *
		      RING_ROUNDS;
	int next, prev, k, r;
	unsigned char *win;
	struct hcomm_win *w;
	struct hcomm_request reqs[RING_ROUNDS];
	uint64_t t0, base_ring, base_a2a;
	int64_t got;

	comm_up();
	if (!CHECK(hcomm_signal_count(comm) > SIG_ANY,
		   "only %u signals", hcomm_signal_count(comm)))
		return 1;
	pats_init(RING_SLOT);
	for (r = 0; r < np; r++)
		pat(r);
	next = (me + 1) % np;
	prev = (me + np - 1) % np;
	win = xmap(wlen);
	memset(win, POISON, wlen);
	w = win_make(win, wlen);
	base_ring = hcomm_signal_read(comm, SIG_RING);
	base_a2a = hcomm_signal_read(comm, SIG_A2A);
	barrier();

	/* Ring: each round every rank signals the next; value 3 per round. */
	phase = "ring";
	for (k = 0; k < RING_ROUNDS; k++) {
		size_t len = ring_sizes[k % (sizeof(ring_sizes) /
					     sizeof(*ring_sizes))];
		size_t off = (size_t)k * RING_SLOT + GUARD + 1;

		OK(hcomm_put_signal(w, next, off, pat(me) + 1 + (size_t)k,
				    len, SIG_RING, 3));
		got = hcomm_signal_wait(comm, SIG_RING,
					base_ring + 3 * (uint64_t)(k + 1),
					20000);
		if (!CHECK(got >= (int64_t)(base_ring + 3 * (uint64_t)(k + 1)),
			   "round %d: signal_wait = %s", k, errname(got)))
			break;
		SAME(win + off, pat(prev) + 1 + (size_t)k, len,
		     "round %d: %zu B from rank %d after its signal", k, len,
		     prev);
		guards(win, wlen, off, len, "ring destination");
	}
	barrier();
	CHECK(hcomm_signal_read(comm, SIG_RING) ==
	      base_ring + 3 * RING_ROUNDS, "ring signal %" PRIu64
	      ", expected %" PRIu64, hcomm_signal_read(comm, SIG_RING),
	      base_ring + 3 * RING_ROUNDS);

	/* All-to-all: rank r adds r + 1 to everyone's SIG_A2A, 4 times. */
	phase = "all-to-all";
	for (k = 0; k < 4; k++)
		for (r = 0; r < np; r++) {
			int t = (me + r) % np;
			size_t off = a2a + (size_t)me * 1024 + GUARD + 1;

			OK(hcomm_put_signal(w, t, off, pat(me) + 5 + (size_t)k,
					    512, SIG_A2A, (uint64_t)me + 1));
		}
	{
		uint64_t want = base_a2a + 4ULL * (uint64_t)np *
				((uint64_t)np + 1) / 2;

		got = hcomm_signal_wait(comm, SIG_A2A, want, 20000);
		CHECK(got >= (int64_t)want, "all-to-all: signal_wait(%" PRIu64
		      ") = %s", want, errname(got));
		barrier();
		CHECK(hcomm_signal_read(comm, SIG_A2A) == want,
		      "all-to-all signal %" PRIu64 ", expected %" PRIu64,
		      hcomm_signal_read(comm, SIG_A2A), want);
		for (r = 0; r < np; r++)
			SAME(win + a2a + (size_t)r * 1024 + GUARD + 1,
			     pat(r) + 5 + 3, 512, "all-to-all data of rank %d",
			     r);
	}
	barrier();

	/* Non-blocking put_signal to the next rank, several in flight. */
	phase = "put_signal_nb";
	{
		uint64_t base = hcomm_signal_read(comm, SIG_NB), want;
		int n = RING_ROUNDS;

		barrier();
		for (k = 0; k < n; k++) {
			memset(&reqs[k], 0, sizeof(reqs[k]));
			OK(hcomm_put_signal_nb(w, next, (size_t)k * RING_SLOT +
					       GUARD + 1, pat(me) + 2,
					       k % 2 ? 100 * KiB : 64, SIG_NB,
					       1, &reqs[k]));
		}
		for (k = 0; k < n; k++) {
			OK(hcomm_wait(&reqs[k]));
			CHECK(reqs[k].done == 1 && reqs[k].status == 0 &&
			      reqs[k].bytes == (k % 2 ? 100 * KiB : 64),
			      "put_signal_nb %d: done %d status %d bytes %"
			      PRIu64, k, reqs[k].done, reqs[k].status,
			      reqs[k].bytes);
		}
		want = base + (uint64_t)n;
		got = hcomm_signal_wait(comm, SIG_NB, want, 20000);
		CHECK(got >= (int64_t)want, "signal_wait(%" PRIu64 ") = %s",
		      want, errname(got));
		for (k = 0; k < n; k++)
			SAME(win + (size_t)k * RING_SLOT + GUARD + 1,
			     pat(prev) + 2, k % 2 ? 100 * KiB : 64,
			     "put_signal_nb %d from rank %d", k, prev);
	}
	barrier();

	/*
	 * A burst the target does not watch: rank 0 completes BURST
	 * put_signals to rank np / 2 (another host in the 2-host cases)
	 * while that rank sits in a barrier, then the target reads the
	 * signal once.  Completion at the origin plus the barrier must be
	 * enough: one hcomm_signal_read() applies every signal that arrived
	 * (an RDMA receive CQ holds them until reaped; fewer than the SRQ's
	 * 1024 receives, so the senders never wait for the target).
	 */
	phase = "burst";
	{
		enum { BURST = 600 };
		struct hcomm_request *br = NULL;
		int tgt = np / 2;
		uint64_t base = hcomm_signal_read(comm, SIG_BURST), v;

		barrier();
		if (me == 0 && tgt != 0) {
			br = calloc(BURST, sizeof(*br));
			if (!CHECK(br, "calloc"))
				return 1;
			for (k = 0; k < BURST; k++)
				OK(hcomm_put_signal_nb(w, tgt, a2a + 8 *
						       (size_t)(k % 64), pat(me),
						       8, SIG_BURST, 1,
						       &br[k]));
			for (k = 0; k < BURST; k++)
				OK(hcomm_wait(&br[k]));
			free(br);
		}
		barrier();
		if (me == tgt && tgt != 0) {
			v = hcomm_signal_read(comm, SIG_BURST);
			CHECK(v == base + BURST, "%d put_signals from rank 0 "
			      "completed before a barrier; one signal_read "
			      "after it: %" PRIu64 " of them", BURST,
			      v - base);
		}
	}
	barrier();

	/* A value already reached returns at once; one never reached times out. */
	phase = "signal_wait";
	got = hcomm_signal_wait(comm, SIG_RING, 1, 0);
	CHECK(got >= 1, "signal_wait for a reached value, timeout 0: %s",
	      errname(got));
	t0 = now_ns();
	got = hcomm_signal_wait(comm, SIG_IDLE,
				hcomm_signal_read(comm, SIG_IDLE) + 1, 300);
	t0 = now_ns() - t0;
	EXPECT(got, -HCOMM_ERR_TIMEOUT);
	CHECK(t0 >= 250000000ULL && t0 < 10000000000ULL,
	      "signal_wait(timeout 300 ms) returned after %.1f ms",
	      (double)t0 / 1e6);

	/*
	 * Waits of 1 ms, as the collectives wait between their checks,
	 * sleep, on every transport and with several (which sleep in
	 * slices, reaping between them): they block (voluntary context
	 * switches of this thread) at least once every other wait - rdma's
	 * may find an old completion event and return without blocking -
	 * where a poll through the time switches only when preempted or
	 * yielding (0 times in 200 on the old code).
	 */
	phase = "short waits";
	{
		enum { WAITS = 200 };
		uint64_t idle = hcomm_signal_read(comm, SIG_IDLE) + 1, cpu;
		struct rusage ru0, ru1;
		long slept;

		getrusage(RUSAGE_THREAD, &ru0);
		cpu = thread_cpu_ns();
		t0 = now_ns();
		for (k = 0; k < WAITS; k++) {
			got = hcomm_signal_wait(comm, SIG_IDLE, idle, 1);
			if (got != -HCOMM_ERR_TIMEOUT)
				break;
		}
		t0 = now_ns() - t0;
		cpu = thread_cpu_ns() - cpu;
		getrusage(RUSAGE_THREAD, &ru1);
		slept = ru1.ru_nvcsw - ru0.ru_nvcsw;
		EXPECT(got, -HCOMM_ERR_TIMEOUT);
		printf("# rank %d: %d waits of 1 ms on %s: slept %ld times, "
		       "%.1f ms of CPU in %.1f ms\n", me, k,
		       hcomm_comm_transport(comm), slept, (double)cpu / 1e6,
		       (double)t0 / 1e6);
		CHECK(slept * 2 >= k, "%d signal_waits of 1 ms on %s that timed "
		      "out slept %ld times (%.1f ms of this thread's CPU in "
		      "%.1f ms): they poll instead of sleeping", k,
		      hcomm_comm_transport(comm), slept, (double)cpu / 1e6,
		      (double)t0 / 1e6);
	}
	barrier();

	/*
	 * hcomm_signal_wait_any(): an even rank waits for SIG_IDLE (never
	 * moves) or SIG_ANY, which the next rank moves 100 ms later.  It
	 * returns index 1 having slept once for both (a few times at most:
	 * rdma's event channel also wakes for other completions): not in
	 * slices on one signal, looking at the other between them (about 55
	 * in 100 ms, which the kernel transport did before DB_WAIT_ANY, and
	 * still does with HCOMM_NO_WAIT_ANY=1).  With rdma beside another
	 * transport the wait still goes in slices (libhcomm.rst,
	 * Limitations): the count is printed, not checked, there.
	 */
	phase = "wait any";
	if ((me ^ 1) < np) {
		uint32_t sigs[2] = { SIG_IDLE, SIG_ANY };
		uint64_t vals[2] = { hcomm_signal_read(comm, SIG_IDLE) + 1,
				     hcomm_signal_read(comm, SIG_ANY) + 1 };
		const char *xp = hcomm_comm_transport(comm);
		bool sliced = strchr(xp, '+') && strstr(xp, "rdma");
		struct rusage ru0, ru1;
		long slept;
		int i;

		if (me & 1) {
			usleep(100000);
			OK(hcomm_put_signal(w, me ^ 1, 0, NULL, 0, SIG_ANY, 1));
		} else {
			getrusage(RUSAGE_THREAD, &ru0);
			t0 = now_ns();
			i = hcomm_signal_wait_any(comm, sigs, vals, 2, 20000);
			t0 = now_ns() - t0;
			getrusage(RUSAGE_THREAD, &ru1);
			slept = ru1.ru_nvcsw - ru0.ru_nvcsw;
			printf("# rank %d: signal_wait_any on %s: index %d after "
			       "%.1f ms, slept %ld times\n", me, xp, i,
			       (double)t0 / 1e6, slept);
			CHECK(i == 1, "signal_wait_any for SIG_IDLE or SIG_ANY, "
			      "which rank %d moved: %d", me ^ 1, i);
			CHECK(sliced || slept <= 5, "signal_wait_any on %s slept "
			      "%ld times in %.1f ms for one signal: it sleeps "
			      "in slices", xp, slept, (double)t0 / 1e6);
		}
	}
	barrier();
	phase = "win_free";
	OK(hcomm_win_free(w));
	comm_down();
	return 0;
}

/* ------------------------------------------------------------------ */
/* a schedule of mixed operations (batch, cb)                          */
/* ------------------------------------------------------------------ */

/*
 * Operation i of writer w.  Windows: a GET area of M slots (filled with
 * the owner's pattern, only read) and a PUT area of np * M slots (slot
 * (w, i) belongs to writer w's operation i).  Gets land in a local buffer
 * of M slots.
 */
#define SLOT	256

_Static_assert(sizeof(struct hcomm_xfer_desc) == 48,
	       "struct hcomm_xfer_desc is 48 bytes");

struct sop {
	uint32_t op;
	int target;
	uint64_t toff;
	size_t len;
	size_t loff;		/* GET: into getbuf; PUT: into pat(w) */
	uint64_t value;
};

struct sched {
	int M;
	uint32_t sig;
	unsigned char *win, *getbuf;
	size_t winlen;
	struct hcomm_win *w;
	uint64_t sig_before;
};

static void sop_of(const struct sched *s, int w, int i, struct sop *o)
{
	o->op = HCOMM_OP_PUT + (uint32_t)((i + w) % 3);
	o->target = (w + 1 + i) % np;
	o->len = 1 + (size_t)((i * 37 + w * 11) % (SLOT - 2 * GUARD - 8));
	if (o->op == HCOMM_OP_GET) {
		o->toff = (uint64_t)i * SLOT + GUARD + 1;
		o->loff = (size_t)i * SLOT + GUARD + 5;
	} else {
		o->toff = (uint64_t)s->M * SLOT +
			  ((uint64_t)w * (uint64_t)s->M + (uint64_t)i) * SLOT +
			  GUARD + 3;
		o->loff = 2 * (size_t)(i % 512) + 1;
	}
	o->value = o->op == HCOMM_OP_PUT_SIGNAL ? 1 + (uint64_t)(i % 5) : 0;
}

static void sched_init(struct sched *s, int M, uint32_t sig)
{
	memset(s, 0, sizeof(*s));
	s->M = M;
	s->sig = sig;
	s->winlen = (size_t)M * SLOT * (size_t)(np + 1);
	s->win = xmap(s->winlen);
	s->getbuf = xmap((size_t)M * SLOT);
	pats_init((size_t)M * SLOT + 1024 + SLOT);
	s->w = win_make(s->win, s->winlen);
}

/* Reset the window and buffers; then a barrier before anyone issues. */
static void sched_prepare(struct sched *s, uint32_t sig)
{
	s->sig = sig;
	memcpy(s->win, pat(me), (size_t)s->M * SLOT);
	memset(s->win + (size_t)s->M * SLOT, POISON,
	       s->winlen - (size_t)s->M * SLOT);
	memset(s->getbuf, POISON, (size_t)s->M * SLOT);
	s->sig_before = hcomm_signal_read(comm, sig);
}

static void sched_desc(const struct sched *s, int i,
		       struct hcomm_xfer_desc *d)
{
	struct sop o;

	sop_of(s, me, i, &o);
	memset(d, 0, sizeof(*d));
	d->op = o.op;
	d->target = o.target;
	d->target_off = o.toff;
	d->local = o.op == HCOMM_OP_GET ?
		   (uint64_t)(uintptr_t)(s->getbuf + o.loff) :
		   (uint64_t)(uintptr_t)(pat(me) + o.loff);
	d->len = o.len;
	d->sig = s->sig;
	d->value = o.value;
}

/* Issue operation i non-blocking. */
static int sched_issue_nb(const struct sched *s, int i,
			  struct hcomm_request *req)
{
	struct hcomm_xfer_desc d;

	sched_desc(s, i, &d);
	switch (d.op) {
	case HCOMM_OP_PUT:
		return hcomm_put_nb(s->w, d.target, d.target_off,
				    (const void *)(uintptr_t)d.local, d.len,
				    req);
	case HCOMM_OP_GET:
		return hcomm_get_nb(s->w, d.target, d.target_off,
				    (void *)(uintptr_t)d.local, d.len, req);
	default:
		return hcomm_put_signal_nb(s->w, d.target, d.target_off,
					   (const void *)(uintptr_t)d.local,
					   d.len, d.sig, d.value, req);
	}
}

/* After every rank's operations completed and a barrier. */
static void sched_verify(const struct sched *s, int n, const char *what)
{
	uint64_t sigsum = 0, got;
	size_t M = (size_t)s->M;
	int w, i;

	/* What this rank got. */
	for (i = 0; i < n; i++) {
		struct sop o;

		sop_of(s, me, i, &o);
		if (o.op != HCOMM_OP_GET) {
			poisoned(s->getbuf + (size_t)i * SLOT, SLOT, what,
				 (size_t)i * SLOT);
			continue;
		}
		SAME(s->getbuf + o.loff, pat(o.target) + o.toff, o.len,
		     "%s: op %d, GET of %zu B from rank %d", what, i, o.len,
		     o.target);
		guards(s->getbuf, M * SLOT, o.loff, o.len, what);
	}
	/* The GET area is only read. */
	SAME(s->win, pat(me), M * SLOT, "%s: GET area of my window", what);
	/* What the others put here, and nothing else. */
	for (w = 0; w < np; w++)
		for (i = 0; i < s->M; i++) {
			size_t slot = M * SLOT + ((size_t)w * M + (size_t)i) *
				      SLOT;
			struct sop o;

			sop_of(s, w, i, &o);
			if (i >= n || o.target != me || o.op == HCOMM_OP_GET) {
				poisoned(s->win + slot, SLOT, what, slot);
				continue;
			}
			SAME(s->win + o.toff, pat(w) + o.loff, o.len,
			     "%s: op %d of rank %d, %s of %zu B", what, i, w,
			     o.op == HCOMM_OP_PUT ? "PUT" : "PUT_SIGNAL",
			     o.len);
			guards(s->win + slot, SLOT, o.toff - slot, o.len,
			       what);
			sigsum += o.value;
		}
	got = hcomm_signal_read(comm, s->sig) - s->sig_before;
	CHECK(got == sigsum, "%s: signal %u grew by %" PRIu64 ", the "
	      "PUT_SIGNALs to this rank add up to %" PRIu64, what, s->sig,
	      got, sigsum);
}

/* ------------------------------------------------------------------ */
/* batch                                                               */
/* ------------------------------------------------------------------ */

static bool req_ok(const struct hcomm_request *r, uint64_t len, int i,
		   const char *what)
{
	return CHECK(__atomic_load_n(&r->done, __ATOMIC_ACQUIRE) == 1 &&
		     r->status == 0 && r->bytes == len,
		     "%s: request %d: done %d status %s bytes %" PRIu64
		     " (expected %" PRIu64 ")", what, i, r->done,
		     errname(r->status), r->bytes, len);
}

static int case_batch(void)
{
	struct hcomm_xfer_desc *d;
	struct hcomm_request *reqs;
	struct sched s;
	const int M = 1000;
	static const int ns[] = { 256, 1000, 256 };
	int v, i, r;
	uint64_t t0;

	comm_up();
	sched_init(&s, M, 10);
	for (r = 0; r < np; r++)
		pat(r);
	d = calloc((size_t)M, sizeof(*d));
	reqs = calloc((size_t)M, sizeof(*reqs));
	for (v = 0; v < 3; v++) {
		int n = ns[v];
		bool with_reqs = v < 2;
		char what[64];

		snprintf(what, sizeof(what), "batch of %d%s", n,
			 with_reqs ? " with requests" : " (blocking)");
		phase = "prepare";
		sched_prepare(&s, 10 + (uint32_t)v);
		for (i = 0; i < n; i++)
			sched_desc(&s, i, &d[i]);
		memset(reqs, 0, (size_t)n * sizeof(*reqs));
		barrier();
		phase = "batch";
		t0 = now_ns();
		if (!OK(hcomm_batch(s.w, d, (unsigned int)n,
				    with_reqs ? reqs : NULL)))
			with_reqs = false;	/* nothing to wait for */
		for (i = 0; with_reqs && i < n; i++) {
			int rc = hcomm_wait(&reqs[i]);

			CHECK(rc == reqs[i].status, "%s: hcomm_wait = %s but "
			      "status %s", what, errname(rc),
			      errname(reqs[i].status));
			req_ok(&reqs[i], d[i].len, i, what);
		}
		out("%s: %.1f ms", what, (double)(now_ns() - t0) / 1e6);
		barrier();
		phase = "verify";
		sched_verify(&s, n, what);
		barrier();
	}
	phase = "win_free";
	OK(hcomm_win_free(s.w));
	comm_down();
	free(d);
	free(reqs);
	return 0;
}

/*
 * batchgone: a batch whose middle descriptor goes to a rank whose process
 * has exited (its window's region went with it), between puts and a
 * put_signal into this rank's own window: that one fails, every other
 * one lands, each request with its own outcome and the signal exactly
 * once.  Over the kernel transport a run of small transfers is one
 * HCOMM_CMD_XFER_BATCH, which stops at the failed descriptor: the ones
 * after it must still be carried out.  Then the same batch without
 * requests: it fails, and the others land all the same.  2 ranks; rank 1
 * leaves.
 */
#define BG_N		9
#define BG_GONE		4		/* the descriptor to the departed rank */
#define BG_SIG_AT	6		/* a put_signal into our own window */
#define BG_LEN		48
#define BG_SLOT		64
#define SIG_BG		44
#define BG_COLL_MS	3000		/* win_free, destroy without rank 1 */

static void bg_descs(struct hcomm_xfer_desc *d, const unsigned char *src)
{
	int i;

	for (i = 0; i < BG_N; i++) {
		memset(&d[i], 0, sizeof(d[i]));
		d[i].op = i == BG_SIG_AT ? HCOMM_OP_PUT_SIGNAL : HCOMM_OP_PUT;
		d[i].target = i == BG_GONE ? 1 : 0;
		d[i].target_off = BG_SLOT * (uint64_t)i + 3;
		d[i].local = (uintptr_t)(src + 100 * i);
		d[i].len = BG_LEN;
		if (i == BG_SIG_AT) {
			d[i].sig = SIG_BG;
			d[i].value = 5;
		}
	}
}

/* Our window after the batch: every slot but BG_GONE's holds its put. */
static void bg_check(const unsigned char *win, const unsigned char *src,
		     const char *what)
{
	int i;

	for (i = 0; i < BG_N; i++) {
		const unsigned char *slot = win + BG_SLOT * i;

		if (i == BG_GONE) {
			poisoned(slot, BG_SLOT, what, BG_SLOT * (size_t)i);
			continue;
		}
		poisoned(slot, 3, what, BG_SLOT * (size_t)i);
		SAME(slot + 3, src + 100 * i, BG_LEN, "%s: descriptor %d's "
		     "bytes", what, i);
		poisoned(slot + 3 + BG_LEN, BG_SLOT - 3 - BG_LEN, what,
			 BG_SLOT * (size_t)i + 3 + BG_LEN);
	}
	poisoned(win + BG_SLOT * BG_N, 4096 - BG_SLOT * BG_N, what,
		 BG_SLOT * BG_N);
}

static int case_batchgone(void)
{
	struct hcomm_xfer_desc d[BG_N];
	struct hcomm_request reqs[BG_N];
	unsigned char *win, *src;
	const char *what;
	struct hcomm_win *w;
	uint64_t t0, sig0;
	int i, rc;

	comm_up();
	if (np != 2)
		return FAIL("batchgone: 2 ranks, not %d", np), 1;
	win = xmap(4096);
	src = xmap(4096);
	memset(win, POISON, 4096);
	fill(src, 4096, 0x6000);
	w = win_make(win, 4096);
	OK(hcomm_comm_set_coll_timeout(comm, BG_COLL_MS));
	barrier();
	if (me == 1) {
		out("leaving, the window still registered");
		_exit(0);
	}
	/* Rank 1's regions go with its process: until then puts land. */
	phase = "wait-gone";
	t0 = now_ns();
	while (!(rc = hcomm_put(w, 1, 0, src, 8))) {
		if (now_ns() - t0 > 20000000000ULL)
			return FAIL("puts to rank 1 still land 20 s after it "
				    "left"), 1;
		usleep(1000);
	}
	out("a put to the departed rank 1: %s after %.1f ms (%s)",
	    errname(rc), (double)(now_ns() - t0) / 1e6, hcomm_errmsg());

	phase = "batch";
	what = "batch with requests around a failed descriptor";
	bg_descs(d, src);
	memset(reqs, 0, sizeof(reqs));
	sig0 = hcomm_signal_read(comm, SIG_BG);
	OK(hcomm_batch(w, d, BG_N, reqs));
	for (i = 0; i < BG_N; i++) {
		rc = hcomm_wait(&reqs[i]);
		if (i != BG_GONE) {
			req_ok(&reqs[i], BG_LEN, i, what);
			continue;
		}
		CHECK(rc < 0 && reqs[i].status == rc && reqs[i].bytes == 0,
		      "%s: descriptor %d, to the departed rank: %s, status "
		      "%s, bytes %" PRIu64, what, i, errname(rc),
		      errname(reqs[i].status), reqs[i].bytes);
	}
	bg_check(win, src, what);
	CHECK(hcomm_signal_read(comm, SIG_BG) == sig0 + 5, "%s: signal %d "
	      "went from %" PRIu64 " to %" PRIu64 ", expected +5", what,
	      SIG_BG, sig0, hcomm_signal_read(comm, SIG_BG));

	phase = "blocking";
	what = "blocking batch around a failed descriptor";
	memset(win, POISON, 4096);
	rc = hcomm_batch(w, d, BG_N, NULL);
	CHECK(rc < 0, "%s: %s", what, errname(rc));
	bg_check(win, src, what);
	CHECK(hcomm_signal_read(comm, SIG_BG) == sig0 + 10, "%s: signal %d "
	      "at %" PRIu64 ", expected %" PRIu64, what, SIG_BG,
	      hcomm_signal_read(comm, SIG_BG), sig0 + 10);

	phase = "release";
	rc = hcomm_win_free(w);
	out("hcomm_win_free: %s", errname(rc));
	rc = hcomm_comm_destroy(comm);
	comm = NULL;
	out("hcomm_comm_destroy: %s", errname(rc));
	return 0;
}

/* ------------------------------------------------------------------ */
/* cb: callbacks in each mode                                          */
/* ------------------------------------------------------------------ */

struct cbrec {
	atomic_int calls;
	atomic_int bad_done, bad_status, bad_bytes, bad_time, bad_req;
	struct hcomm_request *req;
	uint64_t len;
	pid_t tid;
	uint64_t t_start;
};

static atomic_int cb_total;

static void count_cb(struct hcomm_request *req, void *arg)
{
	struct cbrec *c = arg;
	uint64_t t = now_ns();

	if (atomic_fetch_add(&c->calls, 1) == 0) {
		c->tid = gettid_();
		c->t_start = t;
	}
	/* The request is the library's until the callback returned. */
	if (__atomic_load_n(&req->done, __ATOMIC_ACQUIRE) != 0)
		atomic_fetch_add(&c->bad_done, 1);
	if (req->status != 0)
		atomic_fetch_add(&c->bad_status, 1);
	if (req->bytes != c->len)
		atomic_fetch_add(&c->bad_bytes, 1);
	if (!req->t_complete_ns || req->t_complete_ns > t)
		atomic_fetch_add(&c->bad_time, 1);
	if (req != c->req)
		atomic_fetch_add(&c->bad_req, 1);
	atomic_fetch_add(&cb_total, 1);
}

/* A callback that tries to change the callback mode (must be refused). */
static atomic_int cb_setmode_rc = 1;

static void setmode_cb(struct hcomm_request *req, void *arg)
{
	(void)req;
	atomic_store(&cb_setmode_rc,
		     hcomm_comm_set_cb_mode(comm, (enum hcomm_cb_mode)
					    (intptr_t)arg));
}

/* Wait (at most 20 s) until cb_total reaches want, then 50 ms more. */
static void cb_settle(int want, const char *what)
{
	uint64_t t0 = now_ns();

	while (atomic_load(&cb_total) < want &&
	       now_ns() - t0 < 20000000000ULL) {
		hcomm_progress(comm);
		usleep(1000);
	}
	usleep(50000);
	CHECK(atomic_load(&cb_total) == want, "%s: %d callbacks ran, "
	      "expected %d", what, atomic_load(&cb_total), want);
}

static void cb_check(struct cbrec *c, int n, const char *what, int mode,
		     pid_t main_tid)
{
	int i, bad = 0;

	for (i = 0; i < n; i++) {
		struct cbrec *x = &c[i];
		bool ok = atomic_load(&x->calls) == 1 &&
			  !atomic_load(&x->bad_done) &&
			  !atomic_load(&x->bad_status) &&
			  !atomic_load(&x->bad_bytes) &&
			  !atomic_load(&x->bad_time) &&
			  !atomic_load(&x->bad_req);

		if (!ok && bad++ < 5)
			FAIL("%s: request %d: callback ran %d times; saw done "
			     "!= 0 %d times, a wrong status %d, wrong bytes "
			     "%d (want %" PRIu64 ", req says %" PRIu64 "), "
			     "t_complete_ns unset or later than the callback "
			     "%d, another request %d", what, i,
			     atomic_load(&x->calls), atomic_load(&x->bad_done),
			     atomic_load(&x->bad_status),
			     atomic_load(&x->bad_bytes), x->len,
			     x->req->bytes, atomic_load(&x->bad_time),
			     atomic_load(&x->bad_req));
		if (atomic_load(&x->calls) != 1)
			continue;
		if (mode == HCOMM_CB_INLINE && main_tid && x->tid != main_tid &&
		    bad++ < 5)
			FAIL("%s: request %d: INLINE callback ran in thread "
			     "%d, not in the progressing thread %d", what, i,
			     (int)x->tid, (int)main_tid);
		if (mode != HCOMM_CB_INLINE && x->tid == gettid_() &&
		    bad++ < 5)
			FAIL("%s: request %d: THREAD callback ran in the "
			     "issuing thread", what, i);
	}
	if (bad > 5)
		FAIL("%s: %d requests wrong in all", what, bad);
}

#define CB_THREADS	4
#define CB_PER_THREAD	64
#define CB_MT_SLOT	1024

struct cb_thr {
	int idx;
	struct hcomm_win *w;
	struct cbrec *rec;
	struct hcomm_request *reqs;
	int errors;
};

static void *cb_thread(void *arg)
{
	struct cb_thr *t = arg;
	int target = (me + 1) % np, i, j;

	/* Groups of 8 in flight; each thread waits for its own. */
	for (i = 0; i < CB_PER_THREAD; i += 8) {
		for (j = i; j < i + 8; j++) {
			size_t len = 1 + (size_t)((j * 131 + t->idx * 17) %
						  (CB_MT_SLOT - 64));
			uint64_t off = ((uint64_t)t->idx * CB_PER_THREAD +
					(uint64_t)j) * CB_MT_SLOT + 7;

			t->rec[j].len = len;
			t->rec[j].req = &t->reqs[j];
			t->reqs[j].cb = count_cb;
			t->reqs[j].cb_arg = &t->rec[j];
			if (hcomm_put_nb(t->w, target, off,
					 pat(me) + 1 + (size_t)t->idx +
					 (size_t)j, len, &t->reqs[j]))
				t->errors++;
		}
		for (j = i; j < i + 8; j++)
			if (hcomm_wait(&t->reqs[j]) || t->reqs[j].done != 1)
				t->errors++;
	}
	return NULL;
}

static int case_cb(const char *mode_s)
{
	int mode, i, n, r, base;
	const int M = 300;
	struct sched s;
	struct cbrec *rec;
	struct hcomm_request *reqs;
	pid_t main_tid = gettid_();
	char what[96];

	if (!mode_s || !strcmp(mode_s, "inline"))
		mode = HCOMM_CB_INLINE;
	else if (!strcmp(mode_s, "thread"))
		mode = HCOMM_CB_THREAD;
	else if (!strcmp(mode_s, "locked"))
		mode = HCOMM_CB_THREAD_LOCKED;
	else {
		FAIL("--mode %s: inline, thread or locked", mode_s);
		return 1;
	}
	comm_up();
	phase = "set_cb_mode";
	OK(hcomm_comm_set_cb_mode(comm, (enum hcomm_cb_mode)mode));
	sched_init(&s, M, 20);
	for (r = 0; r < np; r++)
		pat(r);
	rec = calloc((size_t)M, sizeof(*rec));
	reqs = calloc((size_t)M, sizeof(*reqs));

	/* One thread issues the schedule, then waits on every request. */
	phase = "one-thread";
	snprintf(what, sizeof(what), "%s callbacks, %d mixed operations",
		 mode_s ? mode_s : "inline", M);
	sched_prepare(&s, 20);
	barrier();
	atomic_store(&cb_total, 0);
	n = 0;
	for (i = 0; i < M; i++) {
		struct hcomm_xfer_desc d;

		sched_desc(&s, i, &d);
		rec[i].len = d.len;
		rec[i].req = &reqs[i];
		reqs[i].cb = count_cb;
		reqs[i].cb_arg = &rec[i];
		if (OK(sched_issue_nb(&s, i, &reqs[i])))
			n++;
	}
	/* Half by hcomm_test polling, half by hcomm_wait. */
	for (i = 0; i < M; i += 2) {
		uint64_t t0 = now_ns();

		while (!hcomm_test(&reqs[i]) &&
		       now_ns() - t0 < 30000000000ULL)
			;
		CHECK(reqs[i].done == 1, "%s: request %d not done after 30 s "
		      "of hcomm_test", what, i);
	}
	for (i = 1; i < M; i += 2)
		OK(hcomm_wait(&reqs[i]));
	for (i = 0; i < M; i++)
		req_ok(&reqs[i], rec[i].len, i, what);
	cb_settle(n, what);
	cb_check(rec, M, what, mode, main_tid);
	barrier();
	phase = "verify";
	sched_verify(&s, M, what);
	barrier();

	/* Four threads at once, each waiting for its own requests. */
	phase = "threads";
	{
		pthread_t th[CB_THREADS];
		struct cb_thr t[CB_THREADS];
		struct cbrec *mrec = calloc(CB_THREADS * CB_PER_THREAD,
					    sizeof(*mrec));
		struct hcomm_request *mreq = calloc(CB_THREADS * CB_PER_THREAD,
						    sizeof(*mreq));
		struct hcomm_win *w;
		unsigned char *mwin;
		size_t mlen = (size_t)CB_THREADS * CB_PER_THREAD * CB_MT_SLOT;
		int prev = (me + np - 1) % np, errs = 0, j;

		snprintf(what, sizeof(what), "%s callbacks, %d threads x %d "
			 "puts", mode_s ? mode_s : "inline", CB_THREADS,
			 CB_PER_THREAD);
		mwin = xmap(mlen);
		memset(mwin, POISON, mlen);
		w = win_make(mwin, mlen);
		barrier();
		atomic_store(&cb_total, 0);
		for (i = 0; i < CB_THREADS; i++) {
			t[i].idx = i;
			t[i].w = w;
			t[i].rec = mrec + i * CB_PER_THREAD;
			t[i].reqs = mreq + i * CB_PER_THREAD;
			t[i].errors = 0;
			if (pthread_create(&th[i], NULL, cb_thread, &t[i]))
				FAIL("pthread_create");
		}
		for (i = 0; i < CB_THREADS; i++) {
			pthread_join(th[i], NULL);
			errs += t[i].errors;
		}
		CHECK(!errs, "%s: %d operations failed to issue or complete",
		      what, errs);
		cb_settle(CB_THREADS * CB_PER_THREAD, what);
		/* INLINE: any of the waiting threads may run a callback. */
		cb_check(mrec, CB_THREADS * CB_PER_THREAD, what, mode, 0);
		barrier();
		for (i = 0; i < CB_THREADS; i++)
			for (j = 0; j < CB_PER_THREAD; j++) {
				size_t len = 1 + (size_t)((j * 131 + i * 17) %
							  (CB_MT_SLOT - 64));
				size_t off = ((size_t)i * CB_PER_THREAD +
					      (size_t)j) * CB_MT_SLOT + 7;

				SAME(mwin + off, pat(prev) + 1 + (size_t)i +
				     (size_t)j, len, "%s: thread %d put %d",
				     what, i, j);
				guards(mwin, mlen, off, len, what);
			}
		barrier();
		OK(hcomm_win_free(w));
		free(mrec);
		free(mreq);
	}

	/* One request reused: issue, wait for its callback, again. */
	phase = "reuse";
	{
		struct hcomm_request req;
		struct cbrec c;
		int k, target = (me + 1) % np;

		snprintf(what, sizeof(what), "%s callbacks, one request reused",
			 mode_s ? mode_s : "inline");
		atomic_store(&cb_total, 0);
		base = 0;
		for (k = 0; k < 50; k++) {
			uint64_t t0;

			memset(&c, 0, sizeof(c));
			memset(&req, 0, sizeof(req));
			c.len = 100 + (uint64_t)k;
			c.req = &req;
			req.cb = count_cb;
			req.cb_arg = &c;
			if (!OK(hcomm_put_nb(s.w, target,
					     (uint64_t)s.M * SLOT + 64,
					     pat(me) + k, c.len, &req)))
				break;
			OK(hcomm_wait(&req));
			t0 = now_ns();
			while (atomic_load(&cb_total) < base + 1 &&
			       now_ns() - t0 < 10000000000ULL) {
				hcomm_progress(comm);
				sched_yield();
			}
			base++;
			cb_check(&c, 1, what, mode, mode == HCOMM_CB_INLINE ?
				 main_tid : 0);
			if (fails)
				break;
		}
		cb_settle(base, what);
	}
	barrier();

	/*
	 * The mode may change while nothing is in flight: through the other
	 * two and back, with callbacks working after each change; from
	 * inside a callback the change is refused (HCOMM_ERR_BUSY).
	 */
	phase = "switch-mode";
	{
		static const int order[3] = { HCOMM_CB_INLINE, HCOMM_CB_THREAD,
					      HCOMM_CB_THREAD_LOCKED };
		int target = (me + 1) % np, k, j;

		for (k = 1; k <= 3; k++) {
			int to = order[(mode + k) % 3];
			struct hcomm_request rq[20];
			struct cbrec c[20];

			snprintf(what, sizeof(what), "%s callbacks, switched "
				 "to mode %d", mode_s ? mode_s : "inline", to);
			if (!OK(hcomm_comm_set_cb_mode(comm,
						       (enum hcomm_cb_mode)to)))
				break;
			atomic_store(&cb_total, 0);
			memset(rq, 0, sizeof(rq));
			memset(c, 0, sizeof(c));
			for (j = 0; j < 20; j++) {
				c[j].len = 10 + (uint64_t)j;
				c[j].req = &rq[j];
				rq[j].cb = count_cb;
				rq[j].cb_arg = &c[j];
				OK(hcomm_put_nb(s.w, target,
						(uint64_t)s.M * SLOT + 64,
						pat(me), c[j].len, &rq[j]));
			}
			for (j = 0; j < 20; j++)
				OK(hcomm_wait(&rq[j]));
			cb_settle(20, what);
			cb_check(c, 20, what, to, to == HCOMM_CB_INLINE ?
				 main_tid : 0);
		}
		/* From inside a callback: refused. */
		{
			struct hcomm_request rq;
			uint64_t t0 = now_ns();

			memset(&rq, 0, sizeof(rq));
			atomic_store(&cb_setmode_rc, 1);
			rq.cb = setmode_cb;
			rq.cb_arg = (void *)(intptr_t)((mode + 1) % 3);
			OK(hcomm_put_nb(s.w, target, (uint64_t)s.M * SLOT + 64,
					pat(me), 8, &rq));
			OK(hcomm_wait(&rq));
			while (atomic_load(&cb_setmode_rc) == 1 &&
			       now_ns() - t0 < 10000000000ULL)
				usleep(1000);
			EXPECT(atomic_load(&cb_setmode_rc), -HCOMM_ERR_BUSY);
		}
		if (!fails)
			out("callback mode switched through all three and "
			    "back to %s", mode_s ? mode_s : "inline");
	}
	barrier();

	/*
	 * Destroy with operations in flight and the window not freed: the
	 * destroy waits for them (every rank's, before any window goes) and
	 * for their callbacks.
	 */
	phase = "destroy-outstanding";
	snprintf(what, sizeof(what), "%s callbacks, destroy with %d "
		 "operations in flight", mode_s ? mode_s : "inline", M);
	atomic_store(&cb_total, 0);
	memset(rec, 0, (size_t)M * sizeof(*rec));
	memset(reqs, 0, (size_t)M * sizeof(*reqs));
	n = 0;
	for (i = 0; i < M; i++) {
		struct hcomm_xfer_desc d;

		sched_desc(&s, i, &d);
		rec[i].len = d.len;
		rec[i].req = &reqs[i];
		reqs[i].cb = count_cb;
		reqs[i].cb_arg = &rec[i];
		if (OK(sched_issue_nb(&s, i, &reqs[i])))
			n++;
	}
	comm_down();
	CHECK(atomic_load(&cb_total) == n, "%s: %d callbacks had run when "
	      "hcomm_comm_destroy returned, %d operations were issued", what,
	      atomic_load(&cb_total), n);
	for (i = 0; i < M; i++)
		req_ok(&reqs[i], rec[i].len, i, what);
	cb_check(rec, M, what, mode, 0);
	free(rec);
	free(reqs);
	return 0;
}

/* ------------------------------------------------------------------ */
/* fence, flush                                                        */
/* ------------------------------------------------------------------ */

#define FENCE_A		(4 * MiB + 1)
#define FENCE_B		4096
#define SIG_FENCE	30

static int case_fence(void)
{
	size_t wlen = FENCE_A + 2 * PAD;
	unsigned char *win, *bufA, *bufB, *back;
	int target, prev, it, k;
	struct hcomm_request ra, rb, rs, reqs[64];
	struct hcomm_win *w;
	int iters = opt_iters ? opt_iters : 4;

	comm_up();
	target = (me + 1) % np;
	prev = (me + np - 1) % np;
	win = xmap(wlen);
	bufA = xmap(FENCE_A);
	bufB = xmap(FENCE_B);
	back = xmap(FENCE_A);
	memset(win, POISON, wlen);
	w = win_make(win, wlen);
	pats_init(FENCE_A + PAD);

	/* put A (engine), fence, put B (inline) on the same bytes: B wins. */
	for (it = 0; it < iters; it++) {
		uint64_t seed = 0x77770000ULL + (uint64_t)it * 256, sa, sb;

		phase = "put-fence-put";
		fill(bufA, FENCE_A, seed + (uint64_t)me * 2);
		fill(bufB, FENCE_B, seed + (uint64_t)me * 2 + 1);
		memset(&ra, 0, sizeof(ra));
		memset(&rb, 0, sizeof(rb));
		barrier();
		OK(hcomm_put_nb(w, target, 1, bufA, FENCE_A, &ra));
		OK(hcomm_fence(comm));
		OK(hcomm_put_nb(w, target, 1, bufB, FENCE_B, &rb));
		OK(hcomm_wait(&ra));
		OK(hcomm_wait(&rb));
		req_ok(&ra, FENCE_A, 0, "put A");
		req_ok(&rb, FENCE_B, 1, "put B");
		CHECK(ra.t_complete_ns <= rb.t_complete_ns,
		      "iteration %d: put B (after the fence) completed %.3f ms "
		      "before put A", it,
		      (double)(ra.t_complete_ns - rb.t_complete_ns) / 1e6);
		barrier();
		/* What prev put here: its B over the first bytes of its A. */
		fill(bufA, FENCE_A, seed + (uint64_t)prev * 2);
		fill(bufB, FENCE_B, seed + (uint64_t)prev * 2 + 1);
		sa = csum(win + 1 + FENCE_B, FENCE_A - FENCE_B);
		sb = csum(win + 1, FENCE_B);
		if (!SAME(win + 1, bufB, FENCE_B, "iteration %d: the first %d "
			  "bytes must be put B's (issued after the fence)",
			  it, FENCE_B) && !memcmp(win + 1, bufA, FENCE_B))
			FAIL("iteration %d: they are put A's: A landed after B "
			     "although a fence separated them", it);
		SAME(win + 1 + FENCE_B, bufA + FENCE_B, FENCE_A - FENCE_B,
		     "iteration %d: the rest of put A", it);
		guards(win, wlen, 1, FENCE_A, "fence destination");
		(void)sa;
		(void)sb;
		barrier();
	}

	/*
	 * Control (information, not a check): the same without the fence.
	 * When A's data ends up over B's here, the check above was not
	 * vacuous: only the fence kept B last.
	 */
	phase = "control-no-fence";
	{
		int over = 0;

		for (it = 0; it < iters; it++) {
			fill(bufA, FENCE_A, 0x55550000ULL + (uint64_t)it * 4 +
			     (uint64_t)me);
			fill(bufB, FENCE_B, 0x66660000ULL + (uint64_t)it * 4 +
			     (uint64_t)me);
			barrier();
			OK(hcomm_put_nb(w, target, 1, bufA, FENCE_A, &ra));
			OK(hcomm_put_nb(w, target, 1, bufB, FENCE_B, &rb));
			OK(hcomm_wait(&ra));
			OK(hcomm_wait(&rb));
			barrier();
			fill(bufA, FENCE_A, 0x55550000ULL + (uint64_t)it * 4 +
			     (uint64_t)prev);
			if (!memcmp(win + 1, bufA, FENCE_B))
				over++;
			barrier();
		}
		out("control: without a fence, put A (issued first) ended up "
		    "over put B in %d of %d tries", over, iters);
	}

	/* put, fence, get of the same bytes sees the put. */
	phase = "put-fence-get";
	for (it = 0; it < iters; it++) {
		uint64_t seed = 0x88880000ULL + (uint64_t)it * 256 +
				(uint64_t)me;

		fill(bufA, FENCE_A, seed);
		memset(back, POISON, FENCE_A);
		barrier();
		OK(hcomm_put_nb(w, target, 1, bufA, FENCE_A, &ra));
		OK(hcomm_fence(comm));
		OK(hcomm_get_nb(w, target, 1, back, FENCE_A, &rb));
		OK(hcomm_wait(&rb));
		OK(hcomm_wait(&ra));
		SAME(back, bufA, FENCE_A, "iteration %d: get after put and "
		     "fence", it);
		barrier();
	}

	/* put (large), fence, put_signal: the data is there with the signal. */
	phase = "put-fence-signal";
	{
		uint64_t base = hcomm_signal_read(comm, SIG_FENCE);
		int64_t got;

		fill(bufA, FENCE_A, 0x99990000ULL + (uint64_t)me);
		barrier();
		/* no callback: the requests' cb and arg must read NULL */
		memset(&ra, 0, sizeof(ra));
		memset(&rs, 0, sizeof(rs));
		OK(hcomm_put_nb(w, target, 1, bufA, FENCE_A, &ra));
		OK(hcomm_fence(comm));
		OK(hcomm_put_signal_nb(w, target, wlen - 64, bufB, 8,
				       SIG_FENCE, 1, &rs));
		got = hcomm_signal_wait(comm, SIG_FENCE, base + 1, 20000);
		CHECK(got >= (int64_t)base + 1, "signal_wait = %s",
		      errname(got));
		fill(back, FENCE_A, 0x99990000ULL + (uint64_t)prev);
		SAME(win + 1, back, FENCE_A, "put before fence and "
		     "put_signal, read when the signal arrived");
		OK(hcomm_wait(&ra));
		OK(hcomm_wait(&rs));
		barrier();
	}

	/* flush: many in flight, flush, all complete and landed. */
	phase = "flush";
	OK(hcomm_flush(comm));	/* nothing outstanding */
	for (it = 0; it < 2; it++) {
		size_t off = 1;

		fill(bufA, FENCE_A, 0xaaaa0000ULL + (uint64_t)it * 64 +
		     (uint64_t)me);
		barrier();
		for (k = 0; k < 64; k++) {
			size_t len = k % 4 == 3 ? 256 * KiB + (size_t)k :
				     1 + (size_t)k * 97;

			if (off + len > FENCE_A)
				break;
			memset(&reqs[k], 0, sizeof(reqs[k]));
			OK(hcomm_put_nb(w, target, off, bufA + off, len,
					&reqs[k]));
			off += len;
		}
		OK(hcomm_flush(comm));
		{
			int notdone = 0, n = k;

			for (k = 0; k < n; k++)
				if (!__atomic_load_n(&reqs[k].done,
						     __ATOMIC_ACQUIRE))
					notdone++;
			CHECK(!notdone, "flush returned with %d of %d "
			      "requests not done", notdone, n);
			for (k = 0; k < n; k++)
				OK(hcomm_wait(&reqs[k]));
		}
		barrier();
		fill(back, FENCE_A, 0xaaaa0000ULL + (uint64_t)it * 64 +
		     (uint64_t)prev);
		SAME(win + 1, back + 1, off - 1, "flush round %d: data of "
		     "rank %d", it, prev);
		barrier();
	}

	/* win_free waits for operations still in flight on the window. */
	phase = "win_free-outstanding";
	memset(&ra, 0, sizeof(ra));
	barrier();
	OK(hcomm_put_nb(w, target, 1, bufA, FENCE_A, &ra));
	OK(hcomm_win_free(w));
	CHECK(__atomic_load_n(&ra.done, __ATOMIC_ACQUIRE) == 1,
	      "hcomm_win_free returned before the put on it completed");
	comm_down();
	return 0;
}

/* ------------------------------------------------------------------ */
/* errors                                                              */
/* ------------------------------------------------------------------ */

static atomic_int err_cb_calls;

static void err_cb(struct hcomm_request *req, void *arg)
{
	(void)req;
	(void)arg;
	atomic_fetch_add(&err_cb_calls, 1);
}

static int case_errors(void)
{
	size_t mylen, theirs, zlen;
	int peer, i;
	unsigned char *mem, *win, *buf, *zmem;
	struct hcomm_win *w, *wz;
	struct hcomm_request req;
	struct hcomm_xfer_desc d[10];
	uint32_t nsig;
	uint64_t t0;
	int64_t got;

	comm_up();
	mylen = me == 0 ? 8193 : 4097;
	peer = (me + 1) % np;
	nsig = hcomm_signal_count(comm);
	mem = xmap(mylen + 64);
	win = mem + 1;		/* an unaligned window */
	memset(win, POISON, mylen);
	buf = xmap(64 * KiB);
	memset(buf, 0x11, 64 * KiB);
	w = win_make(win, mylen);
	theirs = hcomm_win_size(w, peer);
	CHECK(theirs == (peer == 0 ? 8193 : 4097), "win_size(peer) = %zu",
	      theirs);
	/* A window where every odd rank exposes nothing. */
	zlen = me & 1 ? 0 : 4096;
	zmem = xmap(4096);
	wz = win_make(zmem, zlen);
	barrier();

	phase = "bad-target";
	INVAL(hcomm_put(w, np, 0, buf, 1));
	INVAL(hcomm_put(w, -1, 0, buf, 1));
	INVAL(hcomm_put(w, INT_MAX, 0, buf, 1));
	INVAL(hcomm_get(w, np, 0, buf, 1));
	INVAL(hcomm_get(w, -1, 0, buf, 1));
	INVAL(hcomm_put_signal(w, np, 0, buf, 1, 0, 1));

	phase = "bad-offset";
	INVAL(hcomm_put(w, peer, theirs, buf, 1));
	INVAL(hcomm_put(w, peer, theirs - 1, buf, 2));
	INVAL(hcomm_put(w, peer, 0, buf, theirs + 1));
	INVAL(hcomm_put(w, peer, UINT64_MAX, buf, 1));
	INVAL(hcomm_put(w, peer, 8, buf, SIZE_MAX - 4));
	INVAL(hcomm_put(w, peer, (uint64_t)1 << 63, buf, 1));
	INVAL(hcomm_get(w, peer, theirs, buf, 1));
	INVAL(hcomm_get(w, peer, theirs - 3, buf, 4));
	INVAL(hcomm_get(w, peer, UINT64_MAX - 1, buf, 4));
	INVAL(hcomm_put(w, me, mylen, buf, 1));
	INVAL(hcomm_put_signal(w, peer, theirs, buf, 1, 0, 1));
	for (i = 0; i < np; i++)
		if (i & 1)
			INVAL(hcomm_put(wz, i, 0, buf, 1));

	phase = "bad-signal";
	INVAL(hcomm_put_signal(w, peer, 0, buf, 1, nsig, 1));
	INVAL(hcomm_put_signal(w, peer, 0, buf, 1, UINT32_MAX, 1));
	EXPECT(hcomm_signal_wait(comm, nsig, 1, 10), -HCOMM_ERR_INVAL);

	phase = "bad-nb";
	atomic_store(&err_cb_calls, 0);
	memset(&req, 0, sizeof(req));
	req.cb = err_cb;
	INVAL(hcomm_put_nb(w, np, 0, buf, 1, &req));
	INVAL(hcomm_get_nb(w, peer, theirs, buf, 1, &req));
	INVAL(hcomm_put_signal_nb(w, peer, 0, buf, 1, nsig, 1, &req));
	for (i = 0; i < 20; i++)
		hcomm_progress(comm);
	CHECK(atomic_load(&err_cb_calls) == 0, "a rejected operation ran "
	      "its callback %d times", atomic_load(&err_cb_calls));
	INVAL(hcomm_comm_set_cb_mode(comm, (enum hcomm_cb_mode)99));

	/* A batch with one bad descriptor issues nothing. */
	phase = "bad-batch";
	for (i = 0; i < 10; i++) {
		memset(&d[i], 0, sizeof(d[i]));
		d[i].op = HCOMM_OP_PUT;
		d[i].target = peer;
		d[i].target_off = (uint64_t)i * 100 + 1;
		d[i].local = (uint64_t)(uintptr_t)buf;
		d[i].len = 50;
	}
	d[5].target = np;
	INVAL(hcomm_batch(w, d, 10, NULL));
	d[5].target = peer;
	d[5].target_off = theirs;
	INVAL(hcomm_batch(w, d, 10, NULL));
	d[5].target_off = 501;
	d[5].reserved = 1;
	INVAL(hcomm_batch(w, d, 10, NULL));
	d[5].reserved = 0;
	d[5].op = 0;
	INVAL(hcomm_batch(w, d, 10, NULL));
	d[5].op = 99;
	INVAL(hcomm_batch(w, d, 10, NULL));
	d[5].op = HCOMM_OP_PUT_SIGNAL;
	d[5].sig = nsig;
	INVAL(hcomm_batch(w, d, 10, NULL));
	d[5].op = HCOMM_OP_PUT;
	d[5].sig = 0;
	barrier();
	CHECK(poisoned(win, mylen, "window after rejected batches", 0),
	      "a rejected batch issued descriptors");
	barrier();

	phase = "signal-timeout";
	t0 = now_ns();
	got = hcomm_signal_wait(comm, nsig - 1,
				hcomm_signal_read(comm, nsig - 1) + 1, 200);
	t0 = now_ns() - t0;
	EXPECT(got, -HCOMM_ERR_TIMEOUT);
	CHECK(t0 >= 150000000ULL && t0 < 10000000000ULL,
	      "signal_wait with a 200 ms timeout took %.1f ms",
	      (double)t0 / 1e6);

	/* Still works: the last byte of the peer's window, and a batch. */
	phase = "after-errors";
	OK(hcomm_put(w, peer, theirs - 1, buf, 1));
	OK(hcomm_batch(w, d, 10, NULL));
	barrier();
	CHECK(win[mylen - 1] == 0x11, "last byte of the window: 0x%02x",
	      win[mylen - 1]);
	for (i = 0; i < 10; i++)
		CHECK(win[i * 100 + 1] == 0x11 && win[i * 100 + 50] == 0x11 &&
		      win[i * 100] == POISON && win[i * 100 + 51] == POISON,
		      "batch descriptor %d after the rejected ones", i);
	barrier();
	phase = "win_free";
	OK(hcomm_win_free(wz));
	OK(hcomm_win_free(w));
	comm_down();
	return 0;
}

/* ------------------------------------------------------------------ */
/* threads: concurrent operations of one rank                          */
/* ------------------------------------------------------------------ */

#define TH_N		4
#define TH_SLOT		(64 * KiB + 64)

struct th_arg {
	int idx;
	struct hcomm_win *w;
	int errors;
	char first_error[200];
};

static void th_err(struct th_arg *a, const char *fmt, ...)
{
	va_list ap;

	if (!a->errors++) {
		va_start(ap, fmt);
		vsnprintf(a->first_error, sizeof(a->first_error), fmt, ap);
		va_end(ap);
	}
}

static void *th_main(void *arg)
{
	struct th_arg *a = arg;
	unsigned char *back = xmap(TH_SLOT);
	struct hcomm_request rq[4];
	int it, t, k, rc;

	for (it = 0; it < (opt_iters ? opt_iters : 20); it++) {
		for (t = 0; t < np; t++) {
			size_t len = 1 + (size_t)((it * 7919 + a->idx * 101 +
						   t * 13) % (64 * KiB));
			uint64_t off = ((uint64_t)me * TH_N +
					(uint64_t)a->idx) * TH_SLOT + 5;
			const unsigned char *src = pat(me) + (size_t)(it % 32) +
						   (size_t)a->idx;

			/* Blocking put, then get it back. */
			rc = hcomm_put(a->w, t, off, src, len);
			if (rc)
				th_err(a, "put to %d: %s", t, errname(rc));
			memset(back, 0, len);
			rc = hcomm_get(a->w, t, off, back, len);
			if (rc)
				th_err(a, "get from %d: %s", t, errname(rc));
			if (memcmp(back, src, len))
				th_err(a, "iteration %d: %zu B read back from "
				       "rank %d differ from what this thread "
				       "put", it, len, t);
			/* Four non-blocking ones in flight, then wait. */
			for (k = 0; k < 4; k++) {
				memset(&rq[k], 0, sizeof(rq[k]));
				rc = hcomm_put_nb(a->w, t, off + (uint64_t)k,
						  src + k, len / 2 + 1, &rq[k]);
				if (rc)
					th_err(a, "put_nb: %s", errname(rc));
			}
			for (k = 0; k < 4; k++) {
				rc = hcomm_wait(&rq[k]);
				if (rc || rq[k].bytes != len / 2 + 1)
					th_err(a, "put_nb %d: %s, %" PRIu64
					       " bytes", k, errname(rc),
					       rq[k].bytes);
			}
		}
	}
	munmap(back, TH_SLOT);
	return NULL;
}

static int case_threads(void)
{
	size_t wlen;
	pthread_t th[TH_N];
	struct th_arg a[TH_N];
	unsigned char *win;
	struct hcomm_win *w;
	int i;

	comm_up();
	wlen = (size_t)np * TH_N * TH_SLOT;
	pats_init(TH_SLOT + 1024);
	pat(me);
	win = xmap(wlen);
	w = win_make(win, wlen);
	barrier();
	phase = "threads";
	for (i = 0; i < TH_N; i++) {
		memset(&a[i], 0, sizeof(a[i]));
		a[i].idx = i;
		a[i].w = w;
		if (pthread_create(&th[i], NULL, th_main, &a[i]))
			FAIL("pthread_create");
	}
	for (i = 0; i < TH_N; i++) {
		pthread_join(th[i], NULL);
		CHECK(!a[i].errors, "thread %d: %d errors, first: %s", i,
		      a[i].errors, a[i].first_error);
	}
	barrier();
	phase = "win_free";
	OK(hcomm_win_free(w));
	comm_down();
	return 0;
}

/* ------------------------------------------------------------------ */
/* cbnest: callbacks that wait, test, flush; the request's lifetime    */
/* ------------------------------------------------------------------ */

#define NEST_N		48		/* requests of one batch (one reap) */
#define NEST_LEN	200		/* bytes each: inline, done at submit */
#define NEST_SLOT	256
#define NEST_POLL_NS	5000000000ULL

/*
 * Per request: calls of its callback, whether it returned, and what went
 * wrong inside (a bit per check; printed by the main thread).
 */
struct nest_rec {
	atomic_int calls;
	atomic_int returned;
	atomic_int bad;
};

enum {
	NB_REQ = 1, NB_STATUS = 2, NB_DONE_EARLY = 4, NB_WAIT = 8,
	NB_WAIT_EARLY = 16, NB_TEST = 32, NB_TEST_EARLY = 64, NB_FLUSH = 128,
	NB_FLUSH_EARLY = 256, NB_REISSUE = 512,
};

static struct hcomm_request nest_reqs[NEST_N];
static struct hcomm_win *nest_win;
static struct nest_rec nest_rec[NEST_N];

/*
 * Callback i (i < NEST_N - 1) looks at request i + 1 of the same batch:
 * i % 3 == 0 waits for it, 1 polls hcomm_test on it, 2 flushes.  Whatever
 * it waited for must report complete only after its callback returned.
 */
static void nest_cb(struct hcomm_request *req, void *arg)
{
	int i = (int)(intptr_t)arg, j = i + 1, k, bad = 0;
	uint64_t t0;

	atomic_fetch_add(&nest_rec[i].calls, 1);
	if (req != &nest_reqs[i])
		bad |= NB_REQ;
	if (req->status || req->bytes != NEST_LEN || !req->t_complete_ns)
		bad |= NB_STATUS;
	if (__atomic_load_n(&req->done, __ATOMIC_ACQUIRE))
		bad |= NB_DONE_EARLY;
	/* Its own request is the library's until it returns: refused. */
	if (j == NEST_N &&
	    hcomm_put_nb(nest_win, me, 0, pat(me), NEST_LEN, req) !=
	    -HCOMM_ERR_BUSY)
		bad |= NB_REISSUE;
	if (j < NEST_N) {
		switch (i % 3) {
		case 0:
			if (hcomm_wait(&nest_reqs[j]) ||
			    !__atomic_load_n(&nest_reqs[j].done,
					     __ATOMIC_ACQUIRE))
				bad |= NB_WAIT;
			else if (!atomic_load(&nest_rec[j].returned))
				bad |= NB_WAIT_EARLY;
			break;
		case 1:
			t0 = now_ns();
			while (hcomm_test(&nest_reqs[j]) != 1 &&
			       now_ns() - t0 < NEST_POLL_NS)
				;
			if (!__atomic_load_n(&nest_reqs[j].done,
					     __ATOMIC_ACQUIRE))
				bad |= NB_TEST;
			else if (!atomic_load(&nest_rec[j].returned))
				bad |= NB_TEST_EARLY;
			break;
		default:
			if (hcomm_flush(comm))
				bad |= NB_FLUSH;
			for (k = 0; k < NEST_N; k++)
				if (!nest_reqs[k].t_complete_ns)
					bad |= NB_FLUSH;
			/* Later callbacks are not on this thread's stack. */
			for (k = j; k < NEST_N; k++)
				if (!atomic_load(&nest_rec[k].returned))
					bad |= NB_FLUSH_EARLY;
			break;
		}
	}
	atomic_fetch_or(&nest_rec[i].bad, bad);
	atomic_store(&nest_rec[i].returned, 1);
}

static void nest_check(const unsigned char *win, const char *what)
{
	int i, shown = 0;

	for (i = 0; i < NEST_N; i++) {
		int bad = atomic_load(&nest_rec[i].bad);

		if ((atomic_load(&nest_rec[i].calls) != 1 || bad ||
		     nest_reqs[i].status || nest_reqs[i].done != 1) &&
		    shown++ < 6)
			FAIL("%s: request %d: callback ran %d times, done %d, "
			     "status %d; inside the callback: %s%s%s%s%s%s%s"
			     "%s%s%s", what, i, atomic_load(&nest_rec[i].calls),
			     nest_reqs[i].done, nest_reqs[i].status,
			     bad & NB_REQ ? "wrong request; " : "",
			     bad & NB_STATUS ? "status/bytes/time wrong; " : "",
			     bad & NB_DONE_EARLY ? "done already 1; " : "",
			     bad & NB_WAIT ? "hcomm_wait of the next failed; "
					   : "",
			     bad & NB_WAIT_EARLY ? "hcomm_wait returned before "
				"the next one's callback did; " : "",
			     bad & NB_TEST ? "hcomm_test of the next never 1; "
					   : "",
			     bad & NB_TEST_EARLY ? "hcomm_test said 1 before "
				"the next one's callback returned; " : "",
			     bad & NB_FLUSH ? "hcomm_flush failed or left "
				"requests incomplete; " : "",
			     bad & NB_FLUSH_EARLY ? "hcomm_flush returned "
				"before later callbacks did; " : "",
			     bad & NB_REISSUE ? "re-issuing its own request "
				"was not refused with HCOMM_ERR_BUSY; " : "");
	}
	for (i = 0; i < NEST_N; i++)
		SAME(win + (size_t)i * NEST_SLOT, pat(me) + i, NEST_LEN,
		     "%s: request %d's data", what, i);
}

/* The request's lifetime: done never reads 1 under a running callback. */
struct life {
	struct hcomm_request req;
	atomic_int in_cb;
	atomic_int returned;
	atomic_int done_inside;
};

static void life_cb(struct hcomm_request *req, void *arg)
{
	struct life *l = arg;

	(void)req;
	atomic_store(&l->in_cb, 1);
	usleep(200000);
	if (__atomic_load_n(&l->req.done, __ATOMIC_ACQUIRE))
		atomic_store(&l->done_inside, 1);
	atomic_store(&l->returned, 1);
}

static atomic_int life_stop;

static void *life_progress(void *arg)
{
	(void)arg;
	while (!atomic_load(&life_stop)) {
		hcomm_progress(comm);
		usleep(100);
	}
	return NULL;
}

static int case_cbnest(const char *mode_s)
{
	struct hcomm_xfer_desc d[NEST_N];
	unsigned char *win;
	struct hcomm_win *w;
	struct life *life;
	pthread_t thr;
	int mode, i, round, rounds, ret;
	char what[96];
	uint64_t t0;

	if (!mode_s || !strcmp(mode_s, "inline"))
		mode = HCOMM_CB_INLINE;
	else if (!strcmp(mode_s, "thread"))
		mode = HCOMM_CB_THREAD;
	else if (!strcmp(mode_s, "locked"))
		mode = HCOMM_CB_THREAD_LOCKED;
	else
		return FAIL("--mode %s: inline, thread or locked", mode_s), 1;
	/* A deadlock fails the case quickly instead of using up the run. */
	alarm(30);
	comm_up();
	phase = "set_cb_mode";
	OK(hcomm_comm_set_cb_mode(comm, (enum hcomm_cb_mode)mode));
	pats_init(NEST_N + NEST_LEN);
	win = xmap(NEST_N * NEST_SLOT);
	w = win_make(win, NEST_N * NEST_SLOT);
	nest_win = w;

	/*
	 * Round 0: one hcomm_batch; round 1: NEST_N hcomm_put_nb.  With
	 * io_uring the small puts complete at submission, so the first
	 * progress takes every completion off the ring in one grab; through
	 * ioctl() they complete inside the issuing call.  Round 1 only where
	 * no callback can run before the main thread progresses (INLINE with
	 * io_uring): elsewhere a callback could look at a request not issued
	 * yet.
	 */
	rounds = mode == HCOMM_CB_INLINE &&
		 hcomm_uses_uring(hcomm_comm_ctx(comm)) ? 2 : 1;
	for (round = 0; round < rounds; round++) {
		snprintf(what, sizeof(what), "%s, %s", mode_s ? mode_s :
			 "inline", round ? "put_nb one by one" : "one batch");
		phase = round ? "nest-put_nb" : "nest-batch";
		memset(win, POISON, NEST_N * NEST_SLOT);
		memset(nest_rec, 0, sizeof(nest_rec));
		memset(nest_reqs, 0, sizeof(nest_reqs));
		for (i = 0; i < NEST_N; i++) {
			d[i] = (struct hcomm_xfer_desc) {
				.op = HCOMM_OP_PUT, .target = me,
				.target_off = (uint64_t)i * NEST_SLOT,
				.local = (uintptr_t)(pat(me) + i),
				.len = NEST_LEN,
			};
			nest_reqs[i].cb = nest_cb;
			nest_reqs[i].cb_arg = (void *)(intptr_t)i;
		}
		if (!round) {
			ret = hcomm_batch(w, d, NEST_N, nest_reqs);
			OK(ret);
		} else {
			for (i = 0; i < NEST_N; i++)
				OK(hcomm_put_nb(w, me, d[i].target_off,
						(const void *)(uintptr_t)
						d[i].local, NEST_LEN,
						&nest_reqs[i]));
		}
		usleep(20000);		/* every completion posted */
		OK(hcomm_wait(&nest_reqs[0]));
		for (i = 0; i < NEST_N; i++)
			OK(hcomm_wait(&nest_reqs[i]));
		OK(hcomm_flush(comm));
		nest_check(win, what);
	}

	/*
	 * Lifetime: one thread progresses (and, INLINE, runs the callback),
	 * the main thread polls done without progressing: it must not read 1
	 * while the callback still runs.  Then hcomm_wait from the main
	 * thread while the callback runs elsewhere.
	 */
	phase = "lifetime";
	life = calloc(2, sizeof(*life));
	atomic_store(&life_stop, 0);
	if (pthread_create(&thr, NULL, life_progress, NULL)) {
		FAIL("pthread_create");
		return 1;
	}
	for (i = 0; i < 2; i++) {
		struct life *l = &life[i];

		l->req.cb = life_cb;
		l->req.cb_arg = l;
		OK(hcomm_put_nb(w, me, 0, pat(me), NEST_LEN, &l->req));
		if (i == 0) {
			t0 = now_ns();
			while (!__atomic_load_n(&l->req.done, __ATOMIC_ACQUIRE) &&
			       now_ns() - t0 < NEST_POLL_NS)
				;
		} else {
			/* Let the other thread start the callback first. */
			t0 = now_ns();
			while (!atomic_load(&l->in_cb) &&
			       now_ns() - t0 < NEST_POLL_NS)
				usleep(100);
			OK(hcomm_wait(&l->req));
		}
		CHECK(__atomic_load_n(&l->req.done, __ATOMIC_ACQUIRE) == 1,
		      "lifetime %d: the request never read done", i);
		CHECK(atomic_load(&l->returned) == 1, "lifetime %d: %s "
		      "reported the request done while its callback still ran",
		      i, i ? "hcomm_wait" : "a load of done");
		CHECK(!atomic_load(&l->done_inside), "lifetime %d: done read "
		      "1 inside the callback", i);
	}
	atomic_store(&life_stop, 1);
	pthread_join(thr, NULL);
	OK(hcomm_flush(comm));
	free(life);

	phase = "win_free";
	OK(hcomm_win_free(w));
	comm_down();
	return 0;
}

/* ------------------------------------------------------------------ */
/* colltimeout: the collectives' own limit, and life after a timeout   */
/* ------------------------------------------------------------------ */

/*
 * 2 ranks, HCOMM_TIMEOUT_MS=10000 (init), HCOMM_COLL_TIMEOUT_MS=500.
 * --forever: hcomm_comm_set_coll_timeout(-1), and rank 1 comes to a
 * barrier 1.5 s late: the barrier works.  Else rank 1 is 1.5 s late and
 * both see HCOMM_ERR_TIMEOUT after about 500 ms (the variable, not init's
 * 10 s).  Afterwards the bootstrap collectives fail at once with
 * HCOMM_ERR_IO while put, get, put_signal, signal_wait, flush and fence
 * on the window made before keep working; destroy still frees everything.
 */
static int case_colltimeout(bool forever)
{
	const size_t len = 4096;
	unsigned char *win, *buf;
	struct hcomm_win *w;
	uint64_t t0, el;
	int peer, rc, x = 1, all[2];

	comm_up();
	if (np != 2)
		return FAIL("colltimeout needs 2 ranks, got %d", np), 1;
	peer = 1 - me;
	pats_init(len);
	win = xmap(len);
	buf = xmap(len);
	memset(win, POISON, len);
	w = win_make(win, len);

	INVAL(hcomm_comm_set_coll_timeout(comm, 0));
	INVAL(hcomm_comm_set_coll_timeout(comm, 3600001));
	INVAL(hcomm_comm_set_coll_timeout(NULL, 5));
	if (forever) {
		phase = "forever";
		OK(hcomm_comm_set_coll_timeout(comm, -1));
		if (me == 1)
			usleep(1500000);
		t0 = now_ns();
		OK(hcomm_boot_barrier(comm));
		el = (now_ns() - t0) / 1000000;
		if (me == 0)
			CHECK(el >= 1000, "the barrier returned after %" PRIu64
			      " ms, before rank 1 came", el);
		OK(hcomm_win_free(w));
		comm_down();
		return 0;
	}

	phase = "timeout";
	if (me == 1)
		usleep(1500000);
	t0 = now_ns();
	rc = hcomm_boot_barrier(comm);
	el = (now_ns() - t0) / 1000000;
	EXPECT(rc, -HCOMM_ERR_TIMEOUT);
	if (me == 0)
		CHECK(el >= 400 && el < 1400, "rank 0 gave up after %" PRIu64
		      " ms with HCOMM_COLL_TIMEOUT_MS=500", el);

	phase = "after";
	t0 = now_ns();
	EXPECT(hcomm_boot_barrier(comm), -HCOMM_ERR_IO);
	EXPECT(hcomm_boot_allgather(comm, &x, all, sizeof(x)), -HCOMM_ERR_IO);
	CHECK(strstr(hcomm_errmsg(), "failed earlier"), "errmsg: %s",
	      hcomm_errmsg());
	CHECK((now_ns() - t0) / 1000000 < 200, "failing collectives took "
	      "%" PRIu64 " ms", (now_ns() - t0) / 1000000);
	/* One-sided operations and signals still work: a ping-pong. */
	if (me == 0) {
		OK(hcomm_put_signal(w, peer, 0, pat(0), len, 0, 1));
		CHECK(hcomm_signal_wait(comm, 0, 1, 20000) >= 1,
		      "the pong: %s", hcomm_errmsg());
		SAME(win, pat(1), len, "rank 1's put after the timeout");
	} else {
		CHECK(hcomm_signal_wait(comm, 0, 1, 20000) >= 1,
		      "the ping: %s", hcomm_errmsg());
		SAME(win, pat(0), len, "rank 0's put after the timeout");
		/* Rank 0's window is untouched so far: a get reads poison. */
		memset(buf, 0, len);
		OK(hcomm_get(w, peer, 0, buf, len));
		poisoned(buf, len, "a get of rank 0's window", 0);
		OK(hcomm_put_signal(w, peer, 0, pat(1), len, 0, 1));
	}
	OK(hcomm_fence(comm));
	OK(hcomm_flush(comm));

	phase = "destroy";
	rc = hcomm_comm_destroy(comm);
	CHECK(rc == -HCOMM_ERR_IO, "hcomm_comm_destroy = %s, expected the "
	      "channel's HCOMM_ERR_IO", errname(rc));
	comm = NULL;
	(void)w;
	return 0;
}

/* ------------------------------------------------------------------ */
/* rcache: the communicator's registration cache and its statistics    */
/* ------------------------------------------------------------------ */

/*
 * 1 rank.  A put from a buffer, again (a hit), then the buffer unmapped
 * and new memory mapped at the same address: the next put must send the
 * new bytes (the cache sees the generation change: stale).  The counters
 * of hcomm_comm_get_stats() say so, and the file published under
 * HCOMM_STATS_DIR holds the same numbers.
 */
static int case_rcache(void)
{
	const size_t len = 16 * KiB, wlen = 64 * KiB;
	struct hcomm_comm_stats st, st0;
	struct hcomm_stats_file f;
	const char *dir = getenv("HCOMM_STATS_DIR");
	unsigned char *win, *buf, *again, *want;
	struct hcomm_win *w;
	char path[512];
	FILE *fp;
	size_t got;

	comm_up();
	win = xmap(wlen);
	want = xmap(len);
	w = win_make(win, wlen);
	buf = xmap(len);

	phase = "put";
	OK(hcomm_comm_get_stats(comm, &st0));
	memset(buf, 0x11, len);
	OK(hcomm_put(w, me, 0, buf, len));
	memset(want, 0x11, len);
	SAME(win, want, len, "the first put");
	OK(hcomm_put(w, me, 0, buf, len));
	OK(hcomm_comm_get_stats(comm, &st));
	CHECK(st.rcache_misses == st0.rcache_misses + 1 &&
	      st.rcache_hits == st0.rcache_hits + 1 && st.rcache_entries >= 1 &&
	      st.rcache_bytes >= len, "two puts from one buffer: misses "
	      "%" PRIu64 " -> %" PRIu64 ", hits %" PRIu64 " -> %" PRIu64
	      ", entries %" PRIu64 ", bytes %" PRIu64, st0.rcache_misses,
	      st.rcache_misses, st0.rcache_hits, st.rcache_hits,
	      st.rcache_entries, st.rcache_bytes);

	phase = "remap";
	/* Other pages at the same address, other bytes. */
	CHECK(!munmap(buf, len), "munmap");
	again = mmap(buf, len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (again != buf)
		return FAIL("mmap at %p gave %p: %s", (void *)buf, again,
			    strerror(errno)), 1;
	memset(buf, 0x22, len);
	OK(hcomm_put(w, me, 0, buf, len));
	memset(want, 0x22, len);
	SAME(win, want, len, "the put after munmap + mmap at the same address");
	st0 = st;
	OK(hcomm_comm_get_stats(comm, &st));
	CHECK(st.rcache_stale == st0.rcache_stale + 1 &&
	      st.rcache_hits == st0.rcache_hits, "after the remap: stale %"
	      PRIu64 " -> %" PRIu64 ", hits %" PRIu64 " -> %" PRIu64,
	      st0.rcache_stale, st.rcache_stale, st0.rcache_hits,
	      st.rcache_hits);
	OK(hcomm_get(w, me, 0, buf + 1, 100));
	CHECK(buf[0] == 0x22 && buf[1] == 0x22, "a get into the new pages");

	phase = "published";
	OK(hcomm_comm_get_stats(comm, &st));
	if (!dir) {
		FAIL("HCOMM_STATS_DIR not set: run through run.sh");
	} else {
		snprintf(path, sizeof(path), "%s/hcomm-%d-%d-0.stats", dir,
			 (int)getpid(), me);
		fp = fopen(path, "r");
		got = fp ? fread(&f, 1, sizeof(f), fp) : 0;
		if (fp)
			fclose(fp);
		CHECK(got == sizeof(f) && f.magic == HCOMM_STATS_MAGIC &&
		      f.version == HCOMM_STATS_VERSION && f.size == sizeof(f) &&
		      f.pid == (int32_t)getpid() && f.rank == me &&
		      f.world_size == np, "%s: %zu bytes, magic %#" PRIx64
		      ", pid %d, rank %d", path, got, f.magic, f.pid, f.rank);
		CHECK(!memcmp(&f.st, &st, sizeof(st)), "%s: hits %" PRIu64
		      " misses %" PRIu64 " stale %" PRIu64 " entries %" PRIu64
		      ", the library says %" PRIu64 "/%" PRIu64 "/%" PRIu64
		      "/%" PRIu64, path, f.st.rcache_hits, f.st.rcache_misses,
		      f.st.rcache_stale, f.st.rcache_entries, st.rcache_hits,
		      st.rcache_misses, st.rcache_stale, st.rcache_entries);
	}
	OK(hcomm_win_free(w));
	comm_down();
	if (dir)
		CHECK(access(path, F_OK) && errno == ENOENT,
		      "%s left behind by hcomm_comm_destroy", path);
	return 0;
}

/* ------------------------------------------------------------------ */
/* timeout: a rank never arrives                                       */
/* ------------------------------------------------------------------ */

/* One counter of /sys/kernel/debug/hcomm/stats, or -1. */
static long long stat_read(const char *name)
{
	FILE *f = fopen("/sys/kernel/debug/hcomm/stats", "r");
	char key[64];
	long long v, found = -1;

	if (!f)
		return -1;
	while (fscanf(f, "%63s %lld", key, &v) == 2)
		if (!strcmp(key, name))
			found = v;
	fclose(f);
	return found;
}

/*
 * The library's hot-buffer cache (one process): a deregistered host
 * registration is handed out again without a system call while the
 * generation page vouches for it, and is not once the mapping changed.
 */
static int case_regcache(void)
{
	const size_t len = 1 * MiB;
	struct hcomm_ctx *ctx;
	struct hcomm_mr *a, *b, *c;
	long long r0, r1, d0, d1;
	uint64_t key;
	void *buf, *again;
	int ret;

	if (hcomm_open(&ctx, 0))
		return FAIL("hcomm_open: %s", hcomm_errmsg()), 1;
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(buf != MAP_FAILED, "mmap");
	memset(buf, 1, len);
	r0 = stat_read("cmd_reg_mem");
	d0 = stat_read("cmd_dereg");
	CHECK(r0 >= 0 && d0 >= 0, "debugfs stats readable");
	ret = hcomm_reg_mem(ctx, buf, len, HCOMM_ACCESS_LOCAL_WRITE, &a);
	CHECK(!ret, "first registration: %s", hcomm_errmsg());
	key = a->key;
	CHECK(!hcomm_dereg(a), "dereg");
	ret = hcomm_reg_mem(ctx, buf, len, HCOMM_ACCESS_LOCAL_WRITE, &b);
	CHECK(!ret, "second registration: %s", hcomm_errmsg());
	CHECK(b->key == key, "the parked registration is reused (same key)");
	r1 = stat_read("cmd_reg_mem");
	d1 = stat_read("cmd_dereg");
	CHECK(r1 - r0 == 1, "one REG_MEM for two registrations, saw %lld",
	      r1 - r0);
	CHECK(d1 - d0 == 0, "no DEREG yet, saw %lld", d1 - d0);
	CHECK(!hcomm_dereg(b), "dereg");

	/* New pages at the same address: the parked one must not be used. */
	again = mmap(buf, len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	CHECK(again == buf, "mmap MAP_FIXED");
	memset(buf, 2, len);
	ret = hcomm_reg_mem(ctx, buf, len, HCOMM_ACCESS_LOCAL_WRITE, &c);
	CHECK(!ret, "registration after remap: %s", hcomm_errmsg());
	CHECK(c->key != key, "a fresh registration after the remap");
	CHECK(stat_read("cmd_reg_mem") - r1 == 1, "a REG_MEM after the remap");
	CHECK(stat_read("cmd_dereg") - d1 == 1,
	      "the stale parked registration was deregistered");
	CHECK(!hcomm_dereg(c), "dereg");
	hcomm_close(ctx);
	CHECK(stat_read("regions") == 0, "every region gone after close");
	munmap(buf, len);
	return 0;
}

static int case_timeout(bool allow_io)
{
	const char *tv = getenv("HCOMM_TIMEOUT_MS");
	uint64_t t0, el, tmo = tv ? strtoull(tv, NULL, 10) : 30000;
	int rc;

	phase = "init";
	t0 = now_ns();
	rc = hcomm_comm_init(&comm, NULL);
	el = (now_ns() - t0) / 1000000;
	if (rc == 0) {
		FAIL("hcomm_comm_init succeeded although a rank never arrives "
		     "(rank %d of %d)", hcomm_comm_rank(comm),
		     hcomm_comm_size(comm));
		return 1;
	}
	if (rc == -HCOMM_ERR_TIMEOUT) {
		/*
		 * Only a rank that waited out its own limit: one told that
		 * rank 0 gave up (rank 0's limit, which began when rank 0
		 * started, maybe earlier than this rank under load) may
		 * end sooner.
		 */
		CHECK(el + 100 >= tmo ||
		      strstr(hcomm_errmsg(), "rank 0 gave up"),
		      "HCOMM_ERR_TIMEOUT after %" PRIu64 " ms, before "
		      "HCOMM_TIMEOUT_MS=%" PRIu64 ": %s", el, tmo,
		      hcomm_errmsg());
	} else {
		CHECK(allow_io && rc == -HCOMM_ERR_IO, "hcomm_comm_init = %s "
		      "(%s), expected HCOMM_ERR_TIMEOUT", errname(rc),
		      hcomm_errmsg());
	}
	CHECK(el <= tmo + 5000, "hcomm_comm_init returned after %" PRIu64
	      " ms, HCOMM_TIMEOUT_MS=%" PRIu64, el, tmo);
	out("hcomm_comm_init: %s after %" PRIu64 " ms (HCOMM_TIMEOUT_MS=%"
	    PRIu64 "): %s", errname(rc), el, tmo, hcomm_errmsg());
	return 0;
}

/* ------------------------------------------------------------------ */
/* link events (hcomm_comm_set_event_cb)                               */
/* ------------------------------------------------------------------ */

#define EV_MAX	32
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct hcomm_event ev[EV_MAX];
	int n;
	uint64_t last_seq;
	int gaps;
	int bad;
} evs = { .lock = PTHREAD_MUTEX_INITIALIZER,
	  .cond = PTHREAD_COND_INITIALIZER };

static const char *ev_name(uint32_t t)
{
	return t == HCOMM_EVENT_LINK_DOWN ? "link-down" :
	       t == HCOMM_EVENT_FAILED_OVER ? "failed-over" :
	       t == HCOMM_EVENT_RECOVERED ? "recovered" :
	       t == HCOMM_EVENT_PEER_LOST ? "peer-lost" : "?";
}

static void ev_record(struct hcomm_comm *c, const struct hcomm_event *ev,
		      void *arg)
{
	(void)arg;
	out("event %" PRIu64 " %s: peer %d, transport %d, err %d, silent "
	    "%.1f ms: %s", ev->seq, ev_name(ev->type), ev->peer, ev->xport,
	    ev->err, (double)ev->silent_ns / 1e6, ev->why);
	pthread_mutex_lock(&evs.lock);
	if (c != comm || ev->size != sizeof(*ev))
		evs.bad++;		/* checked by ev_count's callers */
	if (ev->seq != evs.last_seq + 1)
		evs.gaps++;
	evs.last_seq = ev->seq;
	if (evs.n < EV_MAX)
		evs.ev[evs.n] = *ev;
	evs.n++;
	pthread_cond_broadcast(&evs.cond);
	pthread_mutex_unlock(&evs.lock);
}

/*
 * Wait up to ms for an event of type about peer (type 0: any); copy it
 * to *out.  1 when found.
 */
static int ev_wait(uint32_t type, int peer, int ms, struct hcomm_event *out)
{
	struct timespec ts;
	int i, found = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&evs.lock);
	for (;;) {
		for (i = 0; i < evs.n && i < EV_MAX && !found; i++)
			if ((!type || evs.ev[i].type == type) &&
			    evs.ev[i].peer == peer) {
				*out = evs.ev[i];
				found = 1;
			}
		if (found || pthread_cond_timedwait(&evs.cond, &evs.lock, &ts))
			break;
	}
	pthread_mutex_unlock(&evs.lock);
	return found;
}

/*
 * How many events of type about peer were recorded (and a failure when
 * any event came for another communicator, with another size, or after
 * a gap in the sequence numbers).
 */
static int ev_count(uint32_t type, int peer)
{
	int i, n = 0;

	pthread_mutex_lock(&evs.lock);
	CHECK(!evs.bad && !evs.gaps, "events: %d for another communicator "
	      "or of another size, %d gaps in their numbers", evs.bad,
	      evs.gaps);
	for (i = 0; i < evs.n && i < EV_MAX; i++)
		n += evs.ev[i].type == type && evs.ev[i].peer == peer;
	pthread_mutex_unlock(&evs.lock);
	return n;
}

/* Wait up to ms for at least n events of type about peer. */
static bool ev_wait_n(uint32_t type, int peer, int n, int ms)
{
	uint64_t t0 = now_ns();

	while (ev_count(type, peer) < n) {
		if ((now_ns() - t0) / 1000000 > (uint64_t)ms)
			return false;
		usleep(5000);
	}
	return true;
}

/* ------------------------------------------------------------------ */
/* killed: a peer dies of SIGKILL with operations in flight to it      */
/* ------------------------------------------------------------------ */

/*
 * The victim (--victim V, default the last rank; never rank 0, the
 * bootstrap's root) lets every survivor start streaming to it, tells each
 * with a put_signal (SIG_K_NOTE) that it is about to die and kills itself
 * with SIGKILL.  Every survivor keeps K_QD operations in flight to it
 * (put_nb and get_nb of K_SLOT bytes, alternating) until one fails, and
 * must see that within the bound below of the notice (meanwhile a thread
 * waits for a signal of the victim, which never comes: signal_wait ends by
 * its timeout); then a blocking put
 * and get to the victim fail at once with hcomm_errmsg() naming "rank V".
 * The survivors still reach each other (a put_signal ring, data checked;
 * a get reads the poison of an untouched window part), a barrier fails
 * instead of waiting for the dead rank (collective timeout K_COLL_MS), and
 * hcomm_win_free and hcomm_comm_destroy return within the bound and give
 * back every fd and thread the communicator had (with rdma: all but
 * librdmacm's device context, see fds_new()).
 *
 * Bound from the notice to the first failure: the victim's exit (its
 * kernel tearing the process down: HCOMM_VMTEST_EXIT_MS, default
 * K_EXIT_MS = 3 s for a loaded stock VM; the debug kernel under TCG needs
 * about 10 s), plus the detection: tcp (and the kernel inside a VM) learn
 * of the death at once (the dying process's sockets are closed: EOF or a
 * reset one round trip later; its /dev/hcomm regions go away).  rdma has
 * no such event: a soft-RoCE QP gives up after (RX_RETRY_CNT + 1) ack
 * timeouts of 4.096 us << RX_ACK_TIMEOUT (lib/hcomm_xport_rdma.c: 16 and
 * 3 -> 4 x 268 ms = 1.07 s; HCOMM_RDMA_ACK_TIMEOUT / HCOMM_RDMA_RETRY_CNT
 * change them): twice that.  The error must not be HCOMM_ERR_TIMEOUT
 * either: that would be the transport's idle limit (HCOMM_TIMEOUT_MS),
 * not the death seen.
 */
#define K_QD		8
#define K_SLOT		(64 * KiB)
#define K_NOTE_OFF	0		/* the victim's 8-byte notice */
#define K_CTRL_OFF	64		/* 8 B per survivor (victim) */
#define K_RING_OFF	(4 * KiB + 3)
#define K_RING		(64 * KiB + 5)
#define K_PUT_OFF	(72 * KiB)
#define K_GET_OFF	(K_PUT_OFF + K_QD * K_SLOT)
#define K_WIN		(K_GET_OFF + K_QD * K_SLOT + PAD)
#define K_NOTE		0x4b494c4c45442121ULL
#define K_EXIT_MS	3000
#define K_COLL_MS	3000
#define SIG_K_GO	40
#define SIG_K_NOTE	41
#define SIG_K_RING	42

static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* Open fds (not the one counting them) and threads of this process. */
static int count_fds(void)
{
	return count_dir("/proc/self/fd") - 1;
}

static int count_threads(void)
{
	return count_dir("/proc/self/task");
}

/* Mark in seen[] (1024 entries) the fds open now. */
static void fds_seen(bool *seen)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	memset(seen, 0, 1024 * sizeof(*seen));
	while (d && (e = readdir(d))) {
		int fd = atoi(e->d_name);

		if (e->d_name[0] != '.' && fd >= 0 && fd < 1024)
			seen[fd] = true;
	}
	if (d)
		closedir(d);
}

/*
 * The fds open now that were not in before[]: print what they are and
 * return how many are not librdmacm's.  librdmacm opens the verbs context
 * of a device the first time an rdma_cm id binds to it and keeps it (its
 * command fd /dev/infiniband/uverbsN and its async event fd) until the
 * process exits (rdma-core's cma.c: ucma_put_device() frees the PD, not
 * the context): once per process and device, not per communicator.  With
 * @rdma those are allowed, two per device at most.
 */
static int fds_new(const bool *before, bool rdma)
{
	int fd, bad = 0, cmd = 0, ev = 0;
	char path[64], to[256];
	bool now[1024];

	fds_seen(now);
	for (fd = 0; fd < 1024; fd++) {
		bool cached = false;
		ssize_t n;

		if (!now[fd] || before[fd])
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, to, sizeof(to) - 1);
		to[n > 0 ? n : 0] = '\0';
		if (rdma && !strncmp(to, "/dev/infiniband/uverbs", 22))
			cached = ++cmd <= 1;
		else if (rdma && !strcmp(to, "anon_inode:[infinibandevent]"))
			cached = ++ev <= 1;
		if (!cached)
			bad++;
		out("fd %d open after destroy: %s%s", fd, to, cached ?
		    " (librdmacm's device context, kept for the process)" :
		    "");
	}
	return bad;
}

static uint64_t kill_bound_ms(void)
{
	int ack = env_int("HCOMM_RDMA_ACK_TIMEOUT", 16);
	int cnt = env_int("HCOMM_RDMA_RETRY_CNT", 3);
	uint64_t rdma_ms = (uint64_t)(cnt + 1) * 4096ULL * (1ULL << ack) /
			   1000000ULL;
	uint64_t exit_ms = (uint64_t)env_int("HCOMM_VMTEST_EXIT_MS",
					     K_EXIT_MS);

	if (strstr(hcomm_comm_transport(comm), "rdma"))
		return 2 * rdma_ms + exit_ms;
	return exit_ms;
}

/* errmsg names the rank: "rank V" not followed by another digit. */
static bool names_rank(const char *msg, int r)
{
	char want[32];
	const char *p = msg;
	size_t n;

	n = (size_t)snprintf(want, sizeof(want), "rank %d", r);
	while ((p = strstr(p, want))) {
		if (p[n] < '0' || p[n] > '9')
			return true;
		p += n;
	}
	return false;
}

/*
 * A survivor's thread waiting for a signal from the victim, which dies
 * instead of sending it: hcomm_signal_wait() must end by its timeout
 * (K_WAIT_MS), neither hang nor fail otherwise.
 */
#define K_WAIT_MS	2000
#define SIG_K_NEVER	43

struct k_waiter {
	pthread_t thr;
	int64_t rc;
	uint64_t ms;
};

static void *k_wait_main(void *arg)
{
	struct k_waiter *k = arg;
	uint64_t t0 = now_ns();

	k->rc = hcomm_signal_wait(comm, SIG_K_NEVER, 1, K_WAIT_MS);
	k->ms = (now_ns() - t0) / 1000000;
	return NULL;
}

static void killed_victim(struct hcomm_win *w, int victim)
{
	uint64_t note = K_NOTE + (uint64_t)victim;
	int r;

	phase = "victim";
	if (!CHECK(hcomm_signal_wait(comm, SIG_K_GO, (uint64_t)np - 1,
				     30000) >= np - 1,
		   "the survivors never all started: %s", hcomm_errmsg()))
		exit(1);
	for (r = 0; r < np; r++)
		if (r != me && !OK(hcomm_put_signal(w, r, K_NOTE_OFF, &note,
						    sizeof(note), SIG_K_NOTE,
						    1)))
			exit(1);
	out("killing myself (SIGKILL) with %d survivors streaming to me",
	    np - 1);
	raise(SIGKILL);
	FAIL("still alive after SIGKILL");
	exit(1);
}

/* The survivors other than the victim, in order; my index in *pos. */
static int killed_ring(int victim, int *ring, int *pos)
{
	int r, k = 0;

	for (r = 0; r < np; r++) {
		if (r == victim)
			continue;
		if (r == me)
			*pos = k;
		ring[k++] = r;
	}
	return k;
}

static int case_killed(int victim)
{
	int fd0 = count_fds(), th0 = count_threads();
	static bool fds0[1024];
	unsigned char *win, *src, *gbuf, *buf;
	struct hcomm_request req[K_QD];
	bool busy[K_QD] = { false }, isget[K_QD] = { false };
	uint64_t t_note = 0, t_fail, t0, el, bound, deadline;
	char first_msg[256] = "";
	const char *how = "nothing";
	struct hcomm_win *w;
	int first = 0, rc, j, ring[64], pos = 0, nring, fds, th;
	struct k_waiter kw = { .rc = 1 };
	bool rdma;
	long n;

	fds_seen(fds0);
	comm_up();
	if (victim < 0)
		victim = np - 1;
	if (np < 2 || victim < 1 || victim >= np)
		return FAIL("killed: victim %d of %d ranks (1 .. size - 1)",
			    victim, np), 1;
	win = xmap(K_WIN);
	src = xmap(K_SLOT);
	gbuf = xmap(K_QD * K_SLOT);
	buf = xmap(K_RING);
	memset(win, POISON, K_WIN);
	pats_init(K_RING);
	fill(src, K_SLOT, 77);
	w = win_make(win, K_WIN);
	if (getenv("HCOMM_VMTEST_TRANSPORT") &&
	    *getenv("HCOMM_VMTEST_TRANSPORT"))
		CHECK(!strcmp(hcomm_comm_transport(comm),
			      getenv("HCOMM_VMTEST_TRANSPORT")),
		      "transport %s, expected %s", hcomm_comm_transport(comm),
		      getenv("HCOMM_VMTEST_TRANSPORT"));
	OK(hcomm_comm_set_coll_timeout(comm, K_COLL_MS));
	bound = kill_bound_ms();
	rdma = strstr(hcomm_comm_transport(comm), "rdma");
	if (me == 0)
		out("transport %s; victim rank %d; bound %" PRIu64 " ms from "
		    "its notice to the first error", hcomm_comm_transport(comm),
		    victim, bound);
	if (me != victim)
		OK(hcomm_comm_set_event_cb(comm, ev_record, NULL));
	barrier();
	if (me == victim)
		killed_victim(w, victim);

	/* Stream to the victim until an operation fails. */
	phase = "stream";
	if (!CHECK(!pthread_create(&kw.thr, NULL, k_wait_main, &kw),
		   "pthread_create"))
		exit(1);
	memset(req, 0, sizeof(req));
	deadline = now_ns() + 30000000000ULL;
	for (n = 0;; n++) {
		j = (int)(n % K_QD);
		if (busy[j]) {
			busy[j] = false;
			rc = hcomm_wait(&req[j]);
			if (rc) {
				first = rc;
				how = isget[j] ? "a get_nb's wait" :
						 "a put_nb's wait";
				snprintf(first_msg, sizeof(first_msg), "%s",
					 hcomm_errmsg());
				break;
			}
			if (isget[j])
				poisoned(gbuf + (size_t)j * K_SLOT, K_SLOT,
					 "a get of the victim's window", 0);
		}
		if (!t_note && hcomm_signal_read(comm, SIG_K_NOTE) >= 1)
			t_note = now_ns();
		if (now_ns() > deadline) {
			FAIL("no operation to the killed rank %d failed in 30 "
			     "s (%ld issued)", victim, n);
			break;
		}
		memset(&req[j], 0, sizeof(req[j]));
		isget[j] = n & 1;
		if (isget[j])
			rc = hcomm_get_nb(w, victim,
					  K_GET_OFF + (uint64_t)j * K_SLOT,
					  gbuf + (size_t)j * K_SLOT, K_SLOT,
					  &req[j]);
		else
			rc = hcomm_put_nb(w, victim,
					  K_PUT_OFF + (uint64_t)j * K_SLOT,
					  src, K_SLOT, &req[j]);
		if (rc) {
			first = rc;
			how = isget[j] ? "issuing a get_nb" :
					 "issuing a put_nb";
			snprintf(first_msg, sizeof(first_msg), "%s",
				 hcomm_errmsg());
			break;
		}
		busy[j] = true;
		if (n == K_QD && !OK(hcomm_put_signal(w, victim,
						      K_CTRL_OFF + 8 * me,
						      src, 8, SIG_K_GO, 1)))
			break;
	}
	t_fail = now_ns();
	if (!t_note && hcomm_signal_read(comm, SIG_K_NOTE) >= 1)
		t_note = t_fail;
	CHECK(t_note, "the first error (%s) came before the victim's notice",
	      errname(first));
	el = t_note ? (t_fail - t_note) / 1000000 : 0;
	out("first error %ld ms after the notice, %s (%ld operations): %s; "
	    "errmsg: %s", (long)el, how, n, errname(first), first_msg);
	/* hcomm_wait() of a failed request names the rank it went to */
	CHECK(first >= 0 || names_rank(first_msg, victim), "the first "
	      "failed request's errmsg does not name rank %d: %s", victim,
	      first_msg);
	CHECK(first != -HCOMM_ERR_TIMEOUT, "the first error is the idle "
	      "timeout, not the death seen");
	CHECK(first < 0 && el <= bound, "the first error to the killed rank "
	      "%d: %s after %" PRIu64 " ms, bound %" PRIu64 " ms", victim,
	      errname(first), el, bound);
	CHECK(*(uint64_t *)(win + K_NOTE_OFF) == K_NOTE + (uint64_t)victim,
	      "the victim's notice: %#" PRIx64, *(uint64_t *)(win +
							     K_NOTE_OFF));

	/* Whatever was still in flight completes, one way or the other. */
	phase = "drain";
	t0 = now_ns();
	for (j = 0; j < K_QD; j++) {
		if (!busy[j])
			continue;
		rc = hcomm_wait(&req[j]);
		if (!rc && isget[j])
			poisoned(gbuf + (size_t)j * K_SLOT, K_SLOT,
				 "a get of the victim's window", 0);
		CHECK(req[j].done, "request %d not done after hcomm_wait", j);
	}
	el = (now_ns() - t0) / 1000000;
	CHECK(el <= bound, "the operations in flight took %" PRIu64 " ms "
	      "to end, bound %" PRIu64, el, bound);

	pthread_join(kw.thr, NULL);
	CHECK(kw.rc == -HCOMM_ERR_TIMEOUT && kw.ms + 100 >= K_WAIT_MS &&
	      kw.ms <= K_WAIT_MS + bound, "signal_wait for the dead rank's "
	      "signal (timeout %d ms): %s after %" PRIu64 " ms", K_WAIT_MS,
	      errname(kw.rc), kw.ms);

	/* Later operations to the victim fail at once, naming it. */
	phase = "after";
	t0 = now_ns();
	rc = hcomm_put(w, victim, K_PUT_OFF, src, 4096);
	CHECK(rc < 0 && names_rank(hcomm_errmsg(), victim), "hcomm_put to "
	      "the dead rank %d: %s, errmsg \"%s\"", victim, errname(rc),
	      hcomm_errmsg());
	rc = hcomm_get(w, victim, K_GET_OFF, gbuf, 4096);
	CHECK(rc < 0 && names_rank(hcomm_errmsg(), victim), "hcomm_get from "
	      "the dead rank %d: %s, errmsg \"%s\"", victim, errname(rc),
	      hcomm_errmsg());
	rc = hcomm_put_signal(w, victim, K_PUT_OFF, src, 8, SIG_K_GO, 1);
	CHECK(rc < 0 && names_rank(hcomm_errmsg(), victim), "hcomm_put_"
	      "signal to the dead rank %d: %s, errmsg \"%s\"", victim,
	      errname(rc), hcomm_errmsg());
	el = (now_ns() - t0) / 1000000;
	CHECK(el <= bound, "put, get, put_signal to the dead rank took %"
	      PRIu64 " ms, bound %" PRIu64, el, bound);

	/* The survivors still reach each other. */
	phase = "survivors";
	nring = killed_ring(victim, ring, &pos);
	if (nring >= 2) {
		int next = ring[(pos + 1) % nring];
		int prev = ring[(pos + nring - 1) % nring];

		OK(hcomm_put_signal(w, next, K_RING_OFF, pat(me), K_RING,
				    SIG_K_RING, 1));
		CHECK(hcomm_signal_wait(comm, SIG_K_RING, 1, 20000) >= 1,
		      "no put_signal from survivor %d: %s", prev,
		      hcomm_errmsg());
		SAME(win + K_RING_OFF, pat(prev), K_RING, "survivor %d's "
		     "put_signal after the death", prev);
		memset(buf, 0, K_RING);
		OK(hcomm_get(w, prev, K_GET_OFF, buf, K_RING));
		poisoned(buf, K_RING, "a get of a survivor's window", 0);
		OK(hcomm_flush(comm));
	}

	/*
	 * The victim's process died, its host lives: a network transport
	 * that reaches it reports the peer lost (rdma: DISCONNECTED, tcp:
	 * reset or end of stream), not a link failure only.  A rank whose
	 * route to it is the kernel transport (same host) may hear it too,
	 * from the tcp connection every pair also has.
	 */
	phase = "event";
	{
		struct hcomm_peer_stats ps = { .size = sizeof(ps) };
		struct hcomm_event ev;
		int xp = -1;

		if (!hcomm_comm_peer_stats(comm, victim, &ps) && ps.nranges)
			xp = ps.range[ps.nranges - 1].xport;
		if (xp == HCOMM_XPORT_RDMA || xp == HCOMM_XPORT_TCP)
			CHECK(ev_wait(HCOMM_EVENT_PEER_LOST, victim,
				      (int)bound, &ev), "no peer-lost event for "
			      "the killed rank %d within %" PRIu64 " ms",
			      victim, bound);
	}

	/* A collective cannot complete: an error, not a hang. */
	phase = "collective";
	t0 = now_ns();
	rc = hcomm_boot_barrier(comm);
	el = (now_ns() - t0) / 1000000;
	CHECK(rc < 0 && el <= K_COLL_MS + bound, "a barrier with the dead "
	      "rank %d: %s after %" PRIu64 " ms (collective timeout %d ms)",
	      victim, errname(rc), el, K_COLL_MS);
	out("barrier: %s after %" PRIu64 " ms: %s", errname(rc), el,
	    hcomm_errmsg());

	/* Nothing outside the notice and the ring slot was written here. */
	poisoned(win + 8, K_RING_OFF - 8, "survivor's window", 8);
	if (nring < 2)
		poisoned(win + K_RING_OFF, K_RING, "survivor's window",
			 K_RING_OFF);
	poisoned(win + K_RING_OFF + K_RING, K_WIN - K_RING_OFF - K_RING,
		 "survivor's window", K_RING_OFF + K_RING);

	phase = "release";
	t0 = now_ns();
	rc = hcomm_win_free(w);
	out("hcomm_win_free: %s", errname(rc));
	rc = hcomm_comm_destroy(comm);
	comm = NULL;
	el = (now_ns() - t0) / 1000000;
	out("hcomm_comm_destroy: %s after %" PRIu64 " ms", errname(rc), el);
	CHECK(el <= K_COLL_MS + bound, "win_free and destroy took %" PRIu64
	      " ms", el);
	/* The service threads may take a moment to be reaped. */
	for (t0 = now_ns(); now_ns() - t0 < 3000000000ULL; usleep(20000))
		if (count_fds() <= fd0 + (rdma ? 2 : 0) &&
		    count_threads() == th0)
			break;
	fds = count_fds();
	th = count_threads();
	CHECK(th == th0, "after destroy: %d threads, %d before "
	      "hcomm_comm_init", th, th0);
	if (fds != fd0)
		CHECK(!fds_new(fds0, rdma), "after destroy: %d fds, %d before "
		      "hcomm_comm_init (not librdmacm's: above)", fds, fd0);
	return 0;
}

/* ------------------------------------------------------------------ */

static uint64_t parse_size(const char *s)
{
	char *e;
	uint64_t v = strtoull(s, &e, 0);

	switch (*e) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	}
	return v;
}


/* ------------------------------------------------------------------ */
/* linkcut: the RoCE link dies under a stream                          */
/* ------------------------------------------------------------------ */

#define LC_QD		16
#define LC_SLOT		(64 * KiB)
#define LC_WIN		(LC_QD * LC_SLOT + PAD)
#define LC_RUN_NS	1500000000ULL	/* stream this long before the cut */

/* Run a shell command of the test bed; its status. */
static int lc_sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	rc = system(cmd);
	if (rc)
		out("command failed (%d): %s", rc, cmd);
	return rc;
}

#define LC_RXE_RC	"/tmp/hcomm-rxe-delete.rc"

/* The QP's ack timeout in ns: 4.096 us * 2^HCOMM_RDMA_ACK_TIMEOUT (16). */
static uint64_t ack_timeout_ns(void)
{
	return 4096ULL << env_int("HCOMM_RDMA_ACK_TIMEOUT", 16);
}

/*
 * The rdma keep-alive's limit (ms) as the library sets it: the variable,
 * else 50 where a failover takes over, else 2.5 of the QP's ack timeouts,
 * at least 80 and at most 600000 (Documentation/failover.rst, "Why these
 * defaults").
 */
static uint64_t ka_limit_ms(bool failover)
{
	uint64_t ms;

	if (getenv("HCOMM_KEEPALIVE_TIMEOUT") &&
	    *getenv("HCOMM_KEEPALIVE_TIMEOUT"))
		return (uint64_t)env_int("HCOMM_KEEPALIVE_TIMEOUT", 0);
	if (failover)
		return 50;
	ms = ack_timeout_ns() * 5 / 2 / 1000000 + 1;
	return ms < 80 ? 80 : ms > 600000 ? 600000 : ms;
}

/*
 * Cut (on 0) or restore (on 1) this VM's second NIC, the RoCE one.
 * --how rxe removes the RoCE device itself (rdma link delete rxe1), in
 * the background: rxe cannot disassociate a process from the device, so
 * the removal waits until every process has closed it (librdmacm keeps
 * its device context until the process exits).  net.sh checks that the
 * removal ended once the ranks had exited, and creates rxe1 again.
 */
static int lc_link(const char *how, int on)
{
	const char *vm = getenv("VM_ID") ? getenv("VM_ID") : "1";

	if (!strcmp(how, "rxe"))
		return on ? 0 : lc_sh("rm -f " LC_RXE_RC "; : > " LC_RXE_RC
				      ".pending; (timeout -k 5 300 rdma "
				      "link delete rxe1; echo $? > " LC_RXE_RC
				      ") > /dev/null 2>&1 &");
	if (!strcmp(how, "netem"))
		return lc_sh("tc qdisc change dev eth1 root netem loss %s",
			     on ? "0%" : "100%");
	if (!strcmp(how, "link"))
		return lc_sh("bash -c '. \"$NETVM_RUN/lib.sh\" && hostctl "
			     "link %s 1 %s'", vm, on ? "on" : "off");
	if (!strcmp(how, "tap"))
		return lc_sh("bash -c '. \"$NETVM_RUN/lib.sh\" && hostctl "
			     "tap %s 1 %s'", vm, on ? "up" : "down");
	FAIL("linkcut: --how %s (netem, link, tap or rxe)", how);
	return -1;
}

/* The cut, on a thread of its own: the stream goes on meanwhile. */
struct lc_cutter {
	pthread_t thr;
	const char *how;
	uint64_t t_start, t_end;
	int rc;
};

static void *lc_cut_main(void *arg)
{
	struct lc_cutter *k = arg;

	k->t_start = now_ns();
	k->rc = lc_link(k->how, 0);
	__atomic_store_n(&k->t_end, now_ns(), __ATOMIC_RELEASE);
	return NULL;
}

/* After a restore: wait (10 s at most) for rxe1's port to be ACTIVE. */
static void lc_port_active(void)
{
	char st[64] = "";
	int i;

	for (i = 0; i < 200; i++) {
		FILE *f = fopen("/sys/class/infiniband/rxe1/ports/1/state", "r");

		if (f) {
			if (!fgets(st, sizeof(st), f))
				st[0] = 0;
			fclose(f);
		}
		if (strstr(st, "ACTIVE"))
			return;
		usleep(50000);
	}
	out("rxe1's port is not ACTIVE 10 s after the restore: %s", st);
}

/*
 * The communicator of a two-rank case that records link events: the
 * peer's rank, or -1 (failed) when the job does not have 2 ranks.
 */
static int pair_up(const char *cs)
{
	comm_up();
	if (np != 2)
		return FAIL("%s: 2 ranks, not %d", cs, np), -1;
	OK(hcomm_comm_set_event_cb(comm, ev_record, NULL));
	return 1 - me;
}

/* The end of a case that began with pair_up(): free @w, then destroy. */
static void pair_down(struct hcomm_win *w)
{
	phase = "win_free";
	OK(hcomm_win_free(w));
	phase = "destroy";
	OK(hcomm_comm_destroy(comm));
	comm = NULL;
}

/* A restore that takes rxe1's port down and up (not netem, not rxe). */
static bool lc_port_waits(const char *how)
{
	return strcmp(how, "netem") && strcmp(how, "rxe");
}

/*
 * Two ranks, one per VM, rdma over each VM's second NIC (the rank table's
 * dev_ip), the bootstrap over the first.  Both stream put_nb to the other;
 * after LC_RUN_NS rank 0 cuts its RoCE link (--how netem: 100 % loss on
 * its eth1; link: qemu set_link off; tap: the host's tap down).  Every
 * request completes exactly once (hcomm_wait returns), the first failure
 * comes within the keep-alive bound, a LINK_DOWN event names the peer and
 * rdma and no PEER_LOST is raised (the peer lives); the bootstrap still
 * works, later operations fail at once naming the peer, destroy returns.
 */
static int case_linkcut(const char *how)
{
	unsigned char *win, *src;
	struct hcomm_request req[LC_QD];
	bool busy[LC_QD] = { false };
	struct hcomm_event ev;
	struct hcomm_win *w;
	uint64_t t0, t_fail = 0, bound, ka_ms, ok_ops = 0;
	struct lc_cutter cut = { .how = how };
	int peer, j, rc, first = 0, done = 0, cutting = 0;
	long n;

	peer = pair_up("linkcut");
	if (peer < 0)
		return 1;
	/* rdma alone, or with tcp and HCOMM_FAILOVER=0: no failover */
	CHECK(!strcmp(hcomm_comm_transport(comm), "rdma") ||
	      (!strcmp(hcomm_comm_transport(comm), "rdma+tcp") &&
	       getenv("HCOMM_FAILOVER") &&
	       !strcmp(getenv("HCOMM_FAILOVER"), "0")), "transport %s, "
	      "expected rdma (or rdma+tcp with HCOMM_FAILOVER=0)",
	      hcomm_comm_transport(comm));
	ka_ms = ka_limit_ms(false) +
		(uint64_t)env_int("HCOMM_KEEPALIVE_INTERVAL", 10);
	bound = ka_ms + (uint64_t)env_int("HCOMM_VMTEST_CUT_SLACK_MS", 1500);
	win = xmap(LC_WIN);
	src = xmap(LC_SLOT);
	memset(win, POISON, LC_WIN);
	fill(src, LC_SLOT, 0x5100 + (uint64_t)me);
	w = win_make(win, LC_WIN);

	/* The link works: a put lands, checked at the target. */
	phase = "before";
	barrier();
	OK(hcomm_put(w, peer, 1, src, LC_SLOT));
	OK(hcomm_flush(comm));
	barrier();
	fill(src, LC_SLOT, 0x5100 + (uint64_t)peer);
	SAME(win + 1, src, LC_SLOT, "a put before the cut");
	fill(src, LC_SLOT, 0x5100 + (uint64_t)me);
	barrier();

	/*
	 * A live link whose completions nobody reaps for a while (the
	 * application computes) is not dead: put_nb, 300 ms without a
	 * library call, another put_nb, 300 ms, then the waits; and 80
	 * puts at once, then 300 ms (more CQEs than the keep-alive's stash
	 * holds).
	 */
	phase = "unreaped";
	{
		struct timespec nap = { 0, 300000000 };

		memset(req, 0, 2 * sizeof(req[0]));
		OK(hcomm_put_nb(w, peer, 1, src, 4096, &req[0]));
		nanosleep(&nap, NULL);
		OK(hcomm_put_nb(w, peer, 1 + LC_SLOT, src, 4096, &req[1]));
		nanosleep(&nap, NULL);
		OK(hcomm_wait(&req[0]));
		OK(hcomm_wait(&req[1]));
		{
			struct hcomm_request many[80];

			memset(many, 0, sizeof(many));
			for (j = 0; j < 80; j++)
				OK(hcomm_put_nb(w, peer, 1 + (uint64_t)j * 64,
						src, 64, &many[j]));
			nanosleep(&nap, NULL);
			for (j = 0; j < 80; j++)
				OK(hcomm_wait(&many[j]));
		}
		CHECK(!ev_count(HCOMM_EVENT_LINK_DOWN, peer), "a link-down "
		      "while the application did not reap (a live link)");
	}
	barrier();

	phase = "stream";
	memset(req, 0, sizeof(req));
	t0 = now_ns();
	for (n = 0;; n++) {
		j = (int)(n % LC_QD);
		if (busy[j]) {
			busy[j] = false;
			rc = hcomm_wait(&req[j]);
			CHECK(req[j].done == 1, "request %d: done %d after "
			      "hcomm_wait", j, req[j].done);
			if (rc) {
				first = rc;
				t_fail = now_ns();
				break;
			}
			ok_ops++;
		}
		if (me == 0 && !cutting && now_ns() - t0 > LC_RUN_NS &&
		    ok_ops >= 2 * LC_QD) {
			cutting = !pthread_create(&cut.thr, NULL, lc_cut_main,
						  &cut);
			CHECK(cutting, "pthread_create");
			out("cutting (%s) after %" PRIu64 " puts of %d KiB",
			    how, ok_ops, (int)(LC_SLOT >> 10));
		}
		if (now_ns() - t0 > 60000000000ULL) {
			FAIL("no put failed within 60 s (%ld issued)", n);
			break;
		}
		memset(&req[j], 0, sizeof(req[j]));
		rc = hcomm_put_nb(w, peer, 1 + (uint64_t)j * LC_SLOT, src,
				  LC_SLOT, &req[j]);
		if (rc) {
			first = rc;
			t_fail = now_ns();
			break;
		}
		busy[j] = true;
	}
	/* Whatever is in flight completes, each request once. */
	phase = "drain";
	for (j = 0; j < LC_QD; j++) {
		if (!busy[j])
			continue;
		(void)hcomm_wait(&req[j]);
		CHECK(req[j].done == 1, "request %d: done %d after hcomm_wait",
		      j, req[j].done);
		done++;
	}
	CHECK(first < 0, "the stream ended without an error: %s",
	      errname(first));
	CHECK(names_rank(hcomm_errmsg(), peer) || first >= 0, "the failure "
	      "does not name rank %d: %s", peer, hcomm_errmsg());
	if (cutting) {
		pthread_join(cut.thr, NULL);
		CHECK(!cut.rc, "the cut command failed");
	}

	phase = "event";
	if (CHECK(ev_wait(HCOMM_EVENT_LINK_DOWN, peer, 10000, &ev),
		  "no link-down event for rank %d within 10 s", peer)) {
		CHECK(ev.xport == HCOMM_XPORT_RDMA, "link-down of transport "
		      "%d, expected rdma", ev.xport);
		if (me == 0 && cutting) {
			uint64_t det = ev.time_ns > cut.t_start ?
				       (ev.time_ns - cut.t_start) / 1000000 : 0;

			out("the cut command ran %" PRIu64 " ms; the link-down "
			    "event came %" PRIu64 " ms after it started (bound "
			    "%" PRIu64 ")", (cut.t_end - cut.t_start) / 1000000,
			    det, bound);
			CHECK(det <= bound + (cut.t_end - cut.t_start) / 1000000,
			      "link-down %" PRIu64 " ms after the cut began, "
			      "bound %" PRIu64 " ms after it ended", det, bound);
		}
		out("link-down: the link was silent %.1f ms; the first error "
		    "(%s) came %.1f ms after the event", (double)ev.silent_ns /
		    1e6, errname(first), t_fail > ev.time_ns ?
		    (double)(t_fail - ev.time_ns) / 1e6 : 0.0);
		/*
		 * Who noticed: the keep-alive (HCOMM_ERR_TIMEOUT) everywhere,
		 * or, where qemu took the carrier away, the port going down:
		 * its event, or - when a reaper sees them before the cm
		 * thread reads the event - the WRs rxe flushed as the port
		 * went down (silent 0); not the QP's own retries (1.07 s of
		 * silence: HCOMM_ERR_IO, "Retry Exceeded").
		 */
		if (!strcmp(how, "link") && me == 0)
			CHECK(ev.err == HCOMM_ERR_TIMEOUT ||
			      strstr(ev.why, "IBV_EVENT_PORT_ERR") ||
			      (strstr(ev.why, "Flushed") && !ev.silent_ns),
			      "link-down by neither the keep-alive nor the "
			      "port going down: %s", ev.why);
		else
			CHECK(ev.err == HCOMM_ERR_TIMEOUT && ev.silent_ns &&
			      strstr(ev.why, "keep-alive"), "link-down not by "
			      "the keep-alive (err %d): %s", ev.err, ev.why);
		/* a verdict of the keep-alive waited for its whole limit */
		if (ev.err == HCOMM_ERR_TIMEOUT)
			CHECK(ev.silent_ns >= ka_limit_ms(false) * 1000000ULL,
			      "link-down after %.1f ms of silence, below the "
			      "keep-alive's limit of %" PRIu64 " ms",
			      (double)ev.silent_ns / 1e6, ka_limit_ms(false));
	}
	CHECK(!ev_count(HCOMM_EVENT_PEER_LOST, peer), "peer-lost raised for "
	      "rank %d although only its link was cut", peer);

	/* The bootstrap (first NIC) still works; restore the link. */
	phase = "restore";
	if (me == 0 && cutting) {
		CHECK(!lc_link(how, 1), "restoring the link");
		if (lc_port_waits(how))
			lc_port_active();
	}
	barrier();
	phase = "after";
	t0 = now_ns();
	rc = hcomm_put(w, peer, 1, src, 4096);
	CHECK(rc < 0 && names_rank(hcomm_errmsg(), peer), "hcomm_put to the "
	      "cut rank %d: %s, errmsg \"%s\"", peer, errname(rc),
	      hcomm_errmsg());
	CHECK((now_ns() - t0) / 1000000 < 1000, "a put to the failed peer "
	      "took %" PRIu64 " ms", (now_ns() - t0) / 1000000);
	CHECK(!ev_count(HCOMM_EVENT_PEER_LOST, peer), "peer-lost raised");
	pair_down(w);
	out("linkcut (%s): %ld puts issued, %" PRIu64 " completed before the "
	    "failure, %d drained; %s", how, n, ok_ops, done,
	    fails ? "FAILED" : "passed");
	return fails ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* stall: the host stops both VMs; a slow link is not a dead one       */
/* ------------------------------------------------------------------ */

#define ST_PAUSES	3
#define ST_PAUSE_MS	500
#define ST_DONE_SIG	3		/* rank 0's pauses are done */

/* Rank 0 asks the host to stop every VM of the run, ST_PAUSES times. */
struct st_pauser {
	pthread_t thr;
	int rc;
	int done;			/* atomic */
};

static void *st_pause_main(void *arg)
{
	struct st_pauser *k = arg;

	k->rc = lc_sh("bash -c '. \"$NETVM_RUN/lib.sh\" && hostctl pause "
		      "%d %d'", ST_PAUSE_MS, ST_PAUSES);
	__atomic_store_n(&k->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Put n's stamp at both ends of its source slot. */
static void st_stamp(unsigned char *p, uint64_t n)
{
	memcpy(p, &n, sizeof(n));
	memcpy(p + LC_SLOT - sizeof(n), &n, sizeof(n));
}

/*
 * Two ranks, one per VM, rdma over the second NIC with the keep-alive's
 * default limit; both stream put_nb to the other (LC_QD in flight, each
 * from a source slot of its own stamped with the put's number) while the
 * host stops both VMs' qemu (SIGSTOP) for ST_PAUSE_MS, ST_PAUSES times:
 * what a loaded host does to its guests.  The guests' clocks jump past
 * the limit, but the link never stopped carrying what it was given: no
 * put fails, no link event is raised, and the last put to each slot is
 * read back from the peer.  Each stream must have seen ST_PAUSES gaps of
 * 0.8 pause or more (else the pauses did not reach this VM).
 */
static int case_stall(void)
{
	unsigned char *win, *src, *back;
	struct hcomm_request req[LC_QD];
	bool busy[LC_QD] = { false };
	struct st_pauser pz = { .rc = 0 };
	struct hcomm_win *w;
	uint64_t t0, t, prev, gap = 0, ok_ops = 0, t_done = 0;
	uint64_t big = ST_PAUSE_MS * 800000ULL;
	int peer, j, rc = 0, pausing = 0, gaps = 0;
	long n;

	peer = pair_up("stall");
	if (peer < 0)
		return 1;
	win = xmap(LC_WIN);
	src = xmap((size_t)LC_QD * LC_SLOT);
	back = xmap(LC_SLOT);
	memset(win, POISON, LC_WIN);
	for (j = 0; j < LC_QD; j++)
		fill(src + (size_t)j * LC_SLOT, LC_SLOT,
		     0x5700 + (uint64_t)me * LC_QD + (uint64_t)j);
	w = win_make(win, LC_WIN);
	barrier();

	phase = "stream";
	memset(req, 0, sizeof(req));
	t0 = prev = now_ns();
	for (n = 0;; n++) {
		j = (int)(n % LC_QD);
		if (busy[j]) {
			busy[j] = false;
			rc = hcomm_wait(&req[j]);
			if (rc) {
				FAIL("put %ld failed after %" PRIu64 " ok: %s; "
				     "%s", n - LC_QD, ok_ops, errname(rc),
				     hcomm_errmsg());
				break;
			}
			ok_ops++;
		}
		t = now_ns();
		if (t - prev > gap)
			gap = t - prev;
		gaps += t - prev >= big;
		prev = t;
		if (me == 0 && !pausing && ok_ops >= 2 * LC_QD) {
			pausing = !pthread_create(&pz.thr, NULL,
						  st_pause_main, &pz);
			if (!CHECK(pausing, "pthread_create"))
				break;
		}
		/* stream on for a second past the last pause */
		if (!t_done && (me == 0 ? pausing &&
				__atomic_load_n(&pz.done, __ATOMIC_ACQUIRE) :
				hcomm_signal_read(comm, ST_DONE_SIG) > 0)) {
			t_done = t;
			if (me == 0)
				CHECK(!hcomm_put_signal(w, peer, 0, src, 0,
							ST_DONE_SIG, 1),
				      "telling rank %d the pauses are done",
				      peer);
		}
		if (t_done && t - t_done > 1000000000ULL)
			break;
		if (t - t0 > 120000000000ULL) {
			FAIL("the pauses did not end within 120 s");
			break;
		}
		memset(&req[j], 0, sizeof(req[j]));
		st_stamp(src + (size_t)j * LC_SLOT, (uint64_t)n);
		rc = hcomm_put_nb(w, peer, 1 + (uint64_t)j * LC_SLOT,
				  src + (size_t)j * LC_SLOT, LC_SLOT, &req[j]);
		if (rc) {
			FAIL("put_nb %ld failed after %" PRIu64 " ok: %s; %s",
			     n, ok_ops, errname(rc), hcomm_errmsg());
			break;
		}
		busy[j] = true;
	}
	/* rank 1 streams until told: tell it on the way out, too */
	if (me == 0 && !t_done)
		(void)hcomm_put_signal(w, peer, 0, src, 0, ST_DONE_SIG, 1);
	phase = "drain";
	for (j = 0; j < LC_QD; j++)
		if (busy[j])
			CHECK(!hcomm_wait(&req[j]), "request %d: %s", j,
			      hcomm_errmsg());
	if (pausing) {
		pthread_join(pz.thr, NULL);
		CHECK(!pz.rc, "hostctl pause failed");
	}
	OK(hcomm_flush(comm));
	barrier();

	phase = "check";
	out("stall: %" PRIu64 " puts of %d KiB; this rank's stream saw %d "
	    "gaps of %d ms or more, the longest %.0f ms (pauses of %d ms)",
	    ok_ops, (int)(LC_SLOT >> 10), gaps, ST_PAUSE_MS * 8 / 10,
	    (double)gap / 1e6, ST_PAUSE_MS);
	CHECK(gaps >= ST_PAUSES, "%d gaps of %d ms in the stream, not %d: "
	      "the pauses did not reach this VM", gaps, ST_PAUSE_MS * 8 / 10,
	      ST_PAUSES);
	CHECK(!ev_count(HCOMM_EVENT_LINK_DOWN, peer) &&
	      !ev_count(HCOMM_EVENT_PEER_LOST, peer), "a link event for "
	      "rank %d, whose link only stalled with its VMs", peer);
	/* the last put to each slot, read back from the peer's window */
	for (j = 0; !fails && j < LC_QD; j++) {
		OK(hcomm_get(w, peer, 1 + (uint64_t)j * LC_SLOT, back,
			     LC_SLOT));
		SAME(back, src + (size_t)j * LC_SLOT, LC_SLOT,
		     "slot %d: the last put to it", j);
	}
	barrier();
	pair_down(w);
	return fails ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* blip: a short loss costs the QP a retransmission, not the link      */
/* ------------------------------------------------------------------ */

#define BL_BLIPS	3
#define BL_LOSS_MS	20

/*
 * Rank 0's loss switch: one tc reading commands from a pipe (tc -batch),
 * started once, so that switching costs a netlink request and not a
 * process start (which took seconds on a loaded host).  Each switch is
 * followed by a "qdisc show" whose answer says it took effect.
 */
struct bl_tc {
	pid_t pid;
	FILE *cmd;			/* tc's standard input */
	FILE *ans;			/* its standard output, line-buffered */
};

static int bl_tc_start(struct bl_tc *t)
{
	int in[2], outp[2];

	signal(SIGPIPE, SIG_IGN);	/* a tc that died: an error, not a signal */
	if (pipe2(in, O_CLOEXEC))
		return -1;
	if (pipe2(outp, O_CLOEXEC)) {
		close(in[0]);
		close(in[1]);
		return -1;
	}
	t->pid = fork();
	if (t->pid < 0) {
		close(in[0]);
		close(in[1]);
		close(outp[0]);
		close(outp[1]);
		return -1;
	}
	if (!t->pid) {
		dup2(in[0], 0);
		dup2(outp[1], 1);
		close(in[0]);
		close(in[1]);
		close(outp[0]);
		close(outp[1]);
		execlp("stdbuf", "stdbuf", "-oL", "tc", "-batch", "-",
		       (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(outp[1]);
	t->cmd = fdopen(in[1], "w");
	t->ans = fdopen(outp[0], "r");
	if (!t->cmd)
		close(in[1]);
	if (!t->ans)
		close(outp[0]);
	return t->cmd && t->ans ? 0 : -1;
}

/* Rank 0's RoCE NIC drops all it sends (on 1) or nothing (on 0). */
static int bl_loss(struct bl_tc *t, int on)
{
	char line[256];

	fprintf(t->cmd, "qdisc change dev eth1 root netem loss %s\n"
		"qdisc show dev eth1\n", on ? "100%" : "0%");
	if (fflush(t->cmd))
		return -1;
	while (fgets(line, sizeof(line), t->ans))
		if (strstr(line, "qdisc netem"))
			return !strstr(line, "loss 100%") == !on ? 0 : -1;
	return -1;
}

static int bl_tc_stop(struct bl_tc *t)
{
	int st = -1;

	if (t->cmd)
		fclose(t->cmd);
	if (t->ans)
		fclose(t->ans);
	if (t->pid > 0 && waitpid(t->pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Packets the netem qdisc of eth1 dropped so far, -1 if unknown. */
static long bl_dropped(void)
{
	FILE *f = popen("tc -s qdisc show dev eth1", "r");
	char line[256];
	const char *p;
	long d = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (d < 0 && (p = strstr(line, "(dropped ")))
			d = atol(p + 9);
	pclose(f);
	return d;
}

/*
 * Two ranks, one per VM, rdma over the second NIC, the keep-alive at its
 * default.  BL_BLIPS times, rank 0's NIC drops everything it sends for
 * BL_LOSS_MS while one 64 KiB put of rank 0 is on its way (and the
 * acknowledgements of rank 1's keep-alive probes with it).  Nothing sent
 * later shows rank 1 the gap, so the QP sends the put again only when its
 * ack timeout runs out (268 ms by default): the link is silent that long,
 * and alive.  Each put must succeed, take at least the loss, cost netem
 * some dropped packets and read back right, and no PEER_LOST be raised.
 * rdma alone: no LINK_DOWN either (the keep-alive waits out the ack
 * timeout).  rdma+tcp with failover: each loss may cost a failover (its
 * 50 ms limit is below the ack timeout), and the next loss waits until
 * the link is back on rdma (RECOVERED).
 */
static int case_blip(void)
{
	unsigned char *win, *src, *back;
	struct bl_tc tc = { .pid = -1 };
	struct hcomm_request req;
	struct hcomm_win *w;
	struct timespec nap = { 0, 0 };
	uint64_t t, lat, need, lat_max = 0;
	int peer, i, rc, lossy = 0;
	long d0, d1;
	bool fo;

	peer = pair_up("blip");
	if (peer < 0)
		return 1;
	fo = !strcmp(hcomm_comm_transport(comm), "rdma+tcp") &&
	     env_int("HCOMM_FAILOVER", 1);
	CHECK(fo || !strcmp(hcomm_comm_transport(comm), "rdma"), "transport "
	      "%s, expected rdma, or rdma+tcp with failover",
	      hcomm_comm_transport(comm));
	win = xmap(LC_WIN);
	src = xmap(LC_SLOT);
	back = xmap(LC_SLOT);
	memset(win, POISON, LC_WIN);
	fill(src, LC_SLOT, 0x5800 + (uint64_t)me);
	w = win_make(win, LC_WIN);
	if (me == 0)
		CHECK(!bl_tc_start(&tc), "starting tc -batch: %s",
		      strerror(errno));
	barrier();

	phase = "blips";
	need = fo ? BL_LOSS_MS * 1000000ULL : ack_timeout_ns() * 3 / 4;
	for (i = 0; me == 0 && !fails && i < BL_BLIPS; i++) {
		if (fo && !CHECK(ev_wait_n(HCOMM_EVENT_RECOVERED, peer,
					   ev_count(HCOMM_EVENT_FAILED_OVER,
						    peer), 60000),
				 "blip %d: not back on rdma within 60 s", i + 1))
			break;
		st_stamp(src, (uint64_t)i + 1);
		d0 = bl_dropped();
		lossy = 1;
		if (!CHECK(!bl_loss(&tc, 1), "netem loss on eth1"))
			break;
		t = now_ns();
		memset(&req, 0, sizeof(req));
		rc = hcomm_put_nb(w, peer, 1, src, LC_SLOT, &req);
		nap.tv_nsec = BL_LOSS_MS * 1000000L;
		nanosleep(&nap, NULL);
		if (CHECK(!bl_loss(&tc, 0), "netem loss off on eth1"))
			lossy = 0;
		out("blip %d: loss for %.1f ms", i + 1,
		    (double)(now_ns() - t) / 1e6);
		if (!CHECK(!rc, "blip %d: put_nb: %s; %s", i + 1, errname(rc),
			   hcomm_errmsg()) || fails)
			break;
		rc = hcomm_wait(&req);
		lat = now_ns() - t;
		lat_max = lat > lat_max ? lat : lat_max;
		d1 = bl_dropped();
		out("blip %d: the put took %.1f ms; netem dropped %ld packets",
		    i + 1, (double)lat / 1e6, d1 - d0);
		if (!CHECK(!rc, "blip %d: the put failed after %.1f ms: %s; %s",
			   i + 1, (double)lat / 1e6, errname(rc),
			   hcomm_errmsg()))
			break;
		/*
		 * Without a failover only the QP's resend, an ack timeout
		 * after the first send, carries the put: well past the old
		 * 80 ms limit.  With one, the failover's replay does.
		 */
		CHECK(lat >= need && d0 >= 0 && d1 >= d0 + 16, "the put took "
		      "%.1f ms (at least %.1f expected), netem dropped %ld "
		      "packets (a 64 KiB put is 64): the loss missed it",
		      (double)lat / 1e6, (double)need / 1e6, d1 - d0);
		OK(hcomm_get(w, peer, 1, back, LC_SLOT));
		SAME(back, src, LC_SLOT, "blip %d: the put", i + 1);
		nap.tv_nsec = 100000000L;
		nanosleep(&nap, NULL);
	}
	if (me == 0) {
		/* never leave eth1 dropping for the cases after this one */
		if (lossy && bl_loss(&tc, 0))
			(void)lc_link("netem", 1);
		CHECK(!bl_tc_stop(&tc), "tc -batch failed");
		(void)hcomm_put_signal(w, peer, 0, src, 0, ST_DONE_SIG, 1);
		out("blip: %d losses of %d ms, the longest put %.1f ms, "
		    "keep-alive limit %" PRIu64 " ms, %d failovers", BL_BLIPS,
		    BL_LOSS_MS, (double)lat_max / 1e6, ka_limit_ms(fo),
		    ev_count(HCOMM_EVENT_FAILED_OVER, peer));
	} else {
		/* until rank 0 is done, or the link failed after all */
		for (i = 0; i < 120 && !ev_count(HCOMM_EVENT_PEER_LOST, peer) &&
		     (fo || !ev_count(HCOMM_EVENT_LINK_DOWN, peer)); i++)
			if (hcomm_signal_wait(comm, ST_DONE_SIG, 1, 1000) >= 1)
				break;
		CHECK(hcomm_signal_read(comm, ST_DONE_SIG) >= 1,
		      "rank %d did not end its losses (%d s)", peer, i);
	}
	OK(hcomm_flush(comm));
	barrier();

	phase = "check";
	CHECK((fo || !ev_count(HCOMM_EVENT_LINK_DOWN, peer)) &&
	      !ev_count(HCOMM_EVENT_PEER_LOST, peer), "a %s event for "
	      "rank %d, whose link only lost %d ms of packets",
	      ev_count(HCOMM_EVENT_PEER_LOST, peer) ? "peer-lost" :
	      "link-down", peer, BL_LOSS_MS);
	barrier();
	pair_down(w);
	return fails ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* failover: the RoCE link dies under a stream; tcp takes over         */
/* ------------------------------------------------------------------ */

#define FO_SLOTS	8		/* fewer than in flight: slots are
					 * overwritten while earlier puts to
					 * them may still be out */
#define FO_SLOT		(64 * KiB)
#define FO_QD		16
#define FO_SIG		1
#define FO_DONE_SIG	3		/* rank 0's cuts are done */
#define FO_OPS_MIN	1500
#define FO_AFTER_NS	4000000000ULL	/* stream this long past the switch */
#define FO_SETTLE_NS	60000000000ULL	/* all back this long after the cuts */

/* Completions seen per request slot (the callback): exactly once each. */
static unsigned int fo_cbs[FO_QD];

static void fo_cb(struct hcomm_request *r, void *arg)
{
	(void)r;
	__atomic_add_fetch(&fo_cbs[(uintptr_t)arg], 1, __ATOMIC_RELAXED);
}

/*
 * Operation n of rank w: its size, and its signal (0: a plain put).  In
 * the failover case every fourth one (n % 4 == 3) is a "log" put of
 * FO_LOG_SZ bytes at a place of its own (fo_off), never written again:
 * the end state holds each of them, so a put lost or misplaced in a
 * failover or switch-back shows; the others rewrite FO_SLOTS slots.
 */
#define FO_LOG_SZ	256
#define FO_LOG_N	16384
#define FO_LOG_BASE	(FO_SLOTS * FO_SLOT)

static size_t fo_len(uint64_t n)
{
	static const size_t sz[] = { 8, 4 * KiB, 17 * KiB + 3, 64 * KiB,
				     60 * KiB + 5, 200 };

	if (n % 4 == 3)
		return FO_LOG_SZ;
	return sz[n % (sizeof(sz) / sizeof(sz[0]))];
}

static uint64_t fo_off(uint64_t n)
{
	if (n % 4 == 3)
		return FO_LOG_BASE + (n / 4 % FO_LOG_N) * FO_LOG_SZ;
	return (n % FO_SLOTS) * FO_SLOT;
}

static uint64_t fo_sig(uint64_t n)
{
	if (n % 7)
		return 0;
	/* now and then a value of several 18-bit pieces */
	return n % 49 ? 1 : (3ULL << 36) | (5ULL << 18) | 1;
}

/* Its payload: the op number, then bytes only it has. */
static void fo_fill(unsigned char *b, uint64_t n, int w)
{
	size_t len = fo_len(n);

	fill(b, len, 0xf0000000ULL * (uint64_t)(w + 1) + n * 131);
	if (len >= 8)
		memcpy(b, &n, 8);
}

/* The n-th event of type about peer (0: the first), or false. */
static bool ev_nth(uint32_t type, int peer, int n, struct hcomm_event *out)
{
	int i, k = 0;
	bool found = false;

	pthread_mutex_lock(&evs.lock);
	for (i = 0; i < evs.n && i < EV_MAX && !found; i++)
		if (evs.ev[i].type == type && evs.ev[i].peer == peer &&
		    k++ == n) {
			*out = evs.ev[i];
			found = true;
		}
	pthread_mutex_unlock(&evs.lock);
	return found;
}

/* rdma's payload bytes sent to peer so far. */
static uint64_t fo_rdma_sent(int peer)
{
	struct hcomm_peer_stats ps;

	memset(&ps, 0, sizeof(ps));
	ps.size = sizeof(ps);
	if (hcomm_comm_peer_stats(comm, peer, &ps))
		return 0;
	return ps.xp[HCOMM_XPORT_RDMA].bytes_sent;
}

#define FO_CUTS_MAX	16

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Rank 0's cuts, on a thread of their own while both ranks stream. */
struct fo_cutter {
	pthread_t thr;
	const char *how;
	int cuts, failback, peer, rc, done, down;
	uint64_t t_cut[FO_CUTS_MAX], t_restore[FO_CUTS_MAX];
};

static void *fo_cut_main(void *arg)
{
	struct fo_cutter *k = arg;
	int i;

	usleep(LC_RUN_NS / 1000);
	for (i = 0; i < k->cuts && !k->rc; i++) {
		/*
		 * Counted from what came before the cut: a keep-alive false
		 * alarm on a busy machine fails a live link over (and back)
		 * too, and is not this cut's.
		 */
		uint64_t t;
		int nfo;

		if (i)
			usleep(1500000);	/* on rdma again, streaming */
		nfo = ev_count(HCOMM_EVENT_FAILED_OVER, k->peer);
		out("cut %d of %d (%s)", i + 1, k->cuts, k->how);
		k->t_cut[i] = now_ns();
		k->rc = lc_link(k->how, 0);
		out("cut %d: the command took %.1f s", i + 1,
		    (now_ns() - k->t_cut[i]) / 1e9);
		if (!k->rc && !ev_wait_n(HCOMM_EVENT_FAILED_OVER, k->peer,
					 nfo + 1, 30000)) {
			out("FAIL: no failed-over %d within 30 s of the cut",
			    i + 1);
			k->rc = -1;
		}
		out("cut %d: failed over %.1f s after the cut", i + 1,
		    (now_ns() - k->t_cut[i]) / 1e9);
		usleep(1000000);		/* streaming over tcp */
		k->down = 1;
		if (!k->failback && i + 1 == k->cuts)
			break;			/* restored below */
		t = now_ns();
		k->rc = k->rc ? k->rc : lc_link(k->how, 1);
		k->down = 0;
		k->t_restore[i] = now_ns();
		if (lc_port_waits(k->how))
			lc_port_active();
		out("restore %d: the command took %.1f s, the port %.1f s more",
		    i + 1, (k->t_restore[i] - t) / 1e9,
		    (now_ns() - k->t_restore[i]) / 1e9);
		if (!k->rc && k->failback &&
		    !ev_wait_n(HCOMM_EVENT_RECOVERED, k->peer,
			       ev_count(HCOMM_EVENT_FAILED_OVER, k->peer),
			       60000)) {
			out("FAIL: not back on rdma within 60 s of restore %d",
			    i + 1);
			k->rc = -1;
		}
	}
	/* never leave the link cut (a failure above, or no failback) */
	if (k->down && lc_link(k->how, 1) && !k->rc)
		k->rc = -1;
	if (k->down && lc_port_waits(k->how))
		lc_port_active();
	__atomic_store_n(&k->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * Are rank 0's cuts done?  Rank 0 (k: its cutter) learns it from the
 * cutter and tells rank 1 with a zero-length put_signal on FO_DONE_SIG;
 * rank 1 (k NULL) reads that signal.
 */
static int fo_cuts_done(struct hcomm_win *w, int peer, struct fo_cutter *k,
			const void *src)
{
	int rc;

	if (me != 0)
		return hcomm_signal_read(comm, FO_DONE_SIG) > 0;
	if (!k || !__atomic_load_n(&k->done, __ATOMIC_ACQUIRE))
		return 0;
	rc = hcomm_put_signal(w, peer, 0, src, 0, FO_DONE_SIG, 1);
	CHECK(!rc, "telling rank %d the cuts are done: %s", peer,
	      errname(rc));
	return 1;
}

/*
 * Two ranks, one per VM, rdma (over the second NIC) and tcp (over the
 * first) both up, every size routed to rdma (HCOMM_PROBE=off).  Both
 * stream put_nb / put_signal_nb of mixed sizes to FO_SLOTS slots of the
 * other (FO_QD in flight, so a slot is written again while earlier puts
 * to it may be out).  Rank 0 cuts its RoCE NIC (--how netem|link|tap,
 * or removes its RoCE device: rxe) after LC_RUN_NS, --cuts times: after each failover it streams a second
 * over tcp, restores the link and waits until the endpoint is back on
 * rdma (HCOMM_FAILBACK=0: one cut, restored at the end).  Both go on
 * until FO_AFTER_NS after the last switch.  Checked: no operation fails;
 * every request completes once (callback count) and hcomm_wait returns
 * 0; per cut both ranks see LINK_DOWN, then FAILED_OVER (rdma -> tcp),
 * then RECOVERED before the next LINK_DOWN, and rdma carries bytes again
 * in between; no PEER_LOST; every slot holds the last operation issued
 * to it, byte for byte; the signal holds exactly the sum of the values
 * sent (no piece lost or doubled).  Printed per cut: the silence before
 * the link-down, the switch, the stall (FAILED_OVER's silent_ns) and the
 * longest gap between two completions the application saw, the time
 * back to rdma after the restore; bandwidth before the first cut, over
 * tcp and back on rdma.
 */
static int case_failover(const char *how, int cuts)
{
	unsigned char *win, *src;
	struct hcomm_request req[FO_QD];
	uint64_t opn[FO_QD];
	bool busy[FO_QD] = { false };
	struct hcomm_event ev, evf, evr;
	struct hcomm_win *w;
	struct fo_cutter cut = { .how = how };
	uint64_t t0, t_last, n, want, t_end = 0, t_done = 0, rd_mark = 0;
	uint64_t gaps[FO_CUTS_MAX] = { 0 }, bytes[3] = { 0 }, dur[3] = { 0 };
	bool gap_done[FO_CUTS_MAX] = { false };
	bool paired;			/* one failover per cut */
	uint64_t stall[FO_CUTS_MAX], t_ph;
	int peer, j, rc, cutting = 0, s, fb, nfo = 0, nrec = 0, nld, i;
	int ph = 0, ph_now, cut_done = 0;
	uint64_t k64;
	int64_t got;

	comm_up();
	if (np != 2)
		return FAIL("failover: 2 ranks, not %d", np), 1;
	if (cuts < 1 || cuts > FO_CUTS_MAX)
		return FAIL("failover: --cuts %d (1 .. %d)", cuts,
			    FO_CUTS_MAX), 1;
	fb = !getenv("HCOMM_FAILBACK") || strcmp(getenv("HCOMM_FAILBACK"),
						 "0");
	if (!fb && cuts > 1)
		return FAIL("failover: HCOMM_FAILBACK=0 takes one cut"), 1;
	if (!strcmp(how, "rxe") && (fb || cuts != 1))
		return FAIL("failover --how rxe: one cut with HCOMM_FAILBACK=0 "
			    "(the device comes back only after the ranks "
			    "exit)"), 1;
	peer = 1 - me;
	OK(hcomm_comm_set_event_cb(comm, ev_record, NULL));
	CHECK(strstr(hcomm_comm_transport(comm), "rdma") &&
	      strstr(hcomm_comm_transport(comm), "tcp"), "transports %s, "
	      "expected rdma and tcp", hcomm_comm_transport(comm));
	win = xmap(FO_LOG_BASE + FO_LOG_N * FO_LOG_SZ + PAD);
	src = xmap(FO_QD * FO_SLOT);
	memset(win, POISON, FO_LOG_BASE + FO_LOG_N * FO_LOG_SZ + PAD);
	w = win_make(win, FO_LOG_BASE + FO_LOG_N * FO_LOG_SZ + PAD);
	barrier();

	phase = "stream";
	memset(req, 0, sizeof(req));
	t0 = t_last = now_ns();
	cut.cuts = cuts;
	cut.failback = fb;
	cut.peer = peer;
	if (me == 0) {
		cutting = !pthread_create(&cut.thr, NULL, fo_cut_main, &cut);
		CHECK(cutting, "pthread_create");
	}
	t_ph = t0;
	for (n = 0;; n++) {
		j = (int)(n % FO_QD);
		if (busy[j]) {
			uint64_t t;

			busy[j] = false;
			rc = hcomm_wait(&req[j]);
			CHECK(!rc, "operation %" PRIu64 " failed: %s: %s",
			      opn[j], errname(rc), hcomm_errmsg());
			CHECK(fo_cbs[j] == 1, "operation %" PRIu64 ": %u "
			      "completions", opn[j], fo_cbs[j]);
			t = now_ns();
			/*
			 * The longest wait for a completion that spans a
			 * cut's failover (it holds the silence before the
			 * link-down and the switch): those that ended from
			 * the link-down up to the first one after
			 * FAILED_OVER, not the later ones on tcp (a busy
			 * machine's pause there is no part of the stall).
			 */
			nld = ev_count(HCOMM_EVENT_LINK_DOWN, peer);
			if (nld && nld <= FO_CUTS_MAX && !gap_done[nld - 1] &&
			    ev_count(HCOMM_EVENT_RECOVERED, peer) < nld + !fb) {
				if (t - t_last > gaps[nld - 1])
					gaps[nld - 1] = t - t_last;
				gap_done[nld - 1] = ev_count(
					HCOMM_EVENT_FAILED_OVER, peer) >= nld;
			}
			t_last = t;
			bytes[ph] += fo_len(opn[j]);
			if (rc)
				break;
		}
		/* phases: 0 before the first link-down, 1 on tcp, 2 back */
		nld = ev_count(HCOMM_EVENT_LINK_DOWN, peer);
		ph_now = !nld ? 0 : nrec >= nld ? 2 : 1;
		if (ph_now != ph) {
			dur[ph] += now_ns() - t_ph;
			t_ph = now_ns();
			ph = ph_now;
		}
		if (ev_count(HCOMM_EVENT_FAILED_OVER, peer) > nfo)
			nfo++;
		if (ev_count(HCOMM_EVENT_RECOVERED, peer) > nrec) {
			nrec++;
			if (!rd_mark)	/* rdma's bytes at the first recovery */
				rd_mark = fo_rdma_sent(peer);
		}
		/*
		 * The end: FO_AFTER_NS after rank 0's cutter is done (it
		 * tells rank 1 with a put_signal) and every failover so far
		 * came back (with failback).
		 */
		if (!cut_done)
			cut_done = fo_cuts_done(w, peer, cutting ? &cut : NULL,
						src);
		if (!t_end && cut_done && nfo >= cuts &&
		    (!fb || nrec >= nfo))
			t_end = now_ns() + FO_AFTER_NS;
		if (t_end && n >= FO_OPS_MIN && now_ns() > t_end)
			break;
		/*
		 * The cutter bounds each of its steps and reports its own
		 * failures; what is left is checked from the moment it is
		 * done, not from the start: the test bed's commands (a
		 * bash round trip to the host) took 29 s each on one vCPU
		 * of the debug kernel.
		 */
		if (cut_done && !t_done)
			t_done = now_ns();
		if (!t_end && t_done && now_ns() - t_done > FO_SETTLE_NS) {
			FAIL("%d failovers and %d recoveries of %d cuts %d s "
			     "after the cuts were done (%" PRIu64 " issued)",
			     nfo, nrec, cuts, (int)(FO_SETTLE_NS / 1000000000),
			     n);
			break;
		}
		fo_fill(src + (size_t)j * FO_SLOT, n, me);
		memset(&req[j], 0, sizeof(req[j]));
		req[j].cb = fo_cb;
		req[j].cb_arg = (void *)(uintptr_t)j;
		fo_cbs[j] = 0;
		opn[j] = n;
		if (fo_sig(n))
			rc = hcomm_put_signal_nb(w, peer, fo_off(n),
						 src + (size_t)j * FO_SLOT,
						 fo_len(n), FO_SIG, fo_sig(n),
						 &req[j]);
		else
			rc = hcomm_put_nb(w, peer, fo_off(n),
					  src + (size_t)j * FO_SLOT, fo_len(n),
					  &req[j]);
		if (!CHECK(!rc, "issuing operation %" PRIu64 ": %s: %s", n,
			   errname(rc), hcomm_errmsg()))
			break;
		busy[j] = true;
	}
	dur[ph] += now_ns() - t_ph;
	/*
	 * Back on rdma: rdma carried bytes after the recoveries (between
	 * two of them a keep-alive false alarm may leave it none: a link
	 * that flaps is failed over again, which is right).
	 */
	if (fb && nrec)
		CHECK(fo_rdma_sent(peer) > rd_mark, "no rdma traffic to rank "
		      "%d after its recoveries", peer);
	phase = "drain";
	for (j = 0; j < FO_QD; j++) {
		if (!busy[j])
			continue;
		rc = hcomm_wait(&req[j]);
		CHECK(!rc && fo_cbs[j] == 1, "operation %" PRIu64 ": %s, %u "
		      "completions", opn[j], errname(rc), fo_cbs[j]);
	}
	OK(hcomm_flush(comm));
	if (cutting) {
		pthread_join(cut.thr, NULL);
		CHECK(!cut.rc, "the cuts failed");
	}

	phase = "events";
	/*
	 * At least one failover per cut (more: keep-alive false alarms of a
	 * busy machine, failed over and back like the others), every one
	 * recovered (with failback), none lost.
	 */
	nld = ev_count(HCOMM_EVENT_LINK_DOWN, peer);
	CHECK(nld >= cuts && nld <= FO_CUTS_MAX &&
	      ev_count(HCOMM_EVENT_FAILED_OVER, peer) == nld &&
	      ev_count(HCOMM_EVENT_RECOVERED, peer) == (fb ? nld : 0),
	      "%d link-down, %d failed-over, %d recovered for %d cuts",
	      nld, ev_count(HCOMM_EVENT_FAILED_OVER, peer),
	      ev_count(HCOMM_EVENT_RECOVERED, peer), cuts);
	if (nld > cuts)
		out("%d failovers for %d cuts: %d keep-alive false alarm(s) on "
		    "the live link (busy machine), each failed over and back",
		    nld, cuts, nld - cuts);
	paired = nld == cuts;
	cuts = nld < FO_CUTS_MAX ? nld : FO_CUTS_MAX;
	for (i = 0; i < cuts; i++) {
		if (!ev_nth(HCOMM_EVENT_LINK_DOWN, peer, i, &ev) ||
		    !ev_nth(HCOMM_EVENT_FAILED_OVER, peer, i, &evf))
			break;
		CHECK(ev.xport == HCOMM_XPORT_RDMA && evf.xport ==
		      HCOMM_XPORT_TCP && evf.seq > ev.seq, "cut %d: link-down "
		      "on %d (#%" PRIu64 "), failed-over to %d (#%" PRIu64 ")",
		      i + 1, ev.xport, ev.seq, evf.xport, evf.seq);
		stall[i] = evf.silent_ns;
		/*
		 * The stall holds the silence before the link-down, also
		 * when the peer noticed first: the longest wait here (which
		 * ends when the replay completes, before FAILED_OVER) is no
		 * longer, but for the scheduling of this thread (50 ms of
		 * slack).  Not with false alarms: the cuts and the events
		 * do not pair up then.
		 */
		if (paired)
			CHECK(evf.silent_ns + 50000000ULL >= gaps[i],
			      "cut %d: stall %.1f ms, shorter than the longest "
			      "wait for a completion here (%.1f ms)", i + 1,
			      (double)evf.silent_ns / 1e6,
			      (double)gaps[i] / 1e6);
		out("cut %d: link-down after %.1f ms of silence, on tcp %.1f "
		    "ms later: stall %.1f ms; longest wait for a completion "
		    "here %.1f ms", i + 1, (double)ev.silent_ns / 1e6,
		    (double)(evf.time_ns - ev.time_ns) / 1e6,
		    (double)evf.silent_ns / 1e6, (double)gaps[i] / 1e6);
		if (!fb || !ev_nth(HCOMM_EVENT_RECOVERED, peer, i, &evr))
			continue;
		CHECK(evr.seq > evf.seq, "cut %d: recovered (#%" PRIu64 ") "
		      "before failed-over (#%" PRIu64 ")", i + 1, evr.seq,
		      evf.seq);
		if (i + 1 < cuts && ev_nth(HCOMM_EVENT_LINK_DOWN, peer, i + 1,
					   &ev))
			CHECK(ev.seq > evr.seq, "cut %d: the next link-down "
			      "came before the recovery", i + 1);
		if (me == 0 && cut.t_restore[i])
			out("cut %d: back on rdma %.1f ms after the link was "
			    "restored", i + 1, evr.time_ns > cut.t_restore[i] ?
			    (double)(evr.time_ns - cut.t_restore[i]) / 1e6 :
			    0.0);
	}
	if (cuts > 1 && i == cuts) {
		uint64_t gs[FO_CUTS_MAX];

		memcpy(gs, stall, sizeof(gs[0]) * cuts);
		qsort(gs, cuts, sizeof(gs[0]), u64_cmp);
		out("stall over %d cuts: median %.1f ms, max %.1f ms", cuts,
		    (double)gs[cuts / 2] / 1e6, (double)gs[cuts - 1] / 1e6);
		memcpy(gs, gaps, sizeof(gs[0]) * cuts);
		qsort(gs, cuts, sizeof(gs[0]), u64_cmp);
		out("longest wait for a completion over %d cuts: median %.1f "
		    "ms, max %.1f ms", cuts, (double)gs[cuts / 2] / 1e6,
		    (double)gs[cuts - 1] / 1e6);
	}
	CHECK(!ev_count(HCOMM_EVENT_PEER_LOST, peer), "peer-lost raised for "
	      "rank %d although only its link was cut", peer);
	out("bandwidth: %.1f MB/s on rdma before the first cut, %.1f MB/s "
	    "from a link-down to its recovery (tcp), %.1f MB/s on rdma after "
	    "a recovery", dur[0] ? (double)bytes[0] * 1e3 / (double)dur[0] : 0,
	    dur[1] ? (double)bytes[1] * 1e3 / (double)dur[1] : 0,
	    dur[2] ? (double)bytes[2] * 1e3 / (double)dur[2] : 0);

	/* What landed here: every slot its last put, the signal its sum. */
	phase = "verify";
	{
		uint64_t peer_n[2], total;

		/* the peer's operation count, through the bootstrap */
		total = n;
		OK(hcomm_boot_allgather(comm, &total, peer_n, sizeof(total)));
		total = peer_n[peer];
		want = 0;
		for (n = 0; n < total; n++)
			want += fo_sig(n);
		got = hcomm_signal_wait(comm, FO_SIG, want, 20000);
		CHECK(got == (int64_t)want, "signal %d: %" PRId64 ", expected "
		      "%" PRIu64 " (%" PRIu64 " operations of rank %d)",
		      FO_SIG, got, want, total, peer);
		for (s = 0; s < FO_SLOTS; s++) {
			uint64_t k;

			/* the last operation to slot s (log ones go elsewhere) */
			for (k = total; k-- > 0;)
				if (k % 4 != 3 && k % FO_SLOTS == (uint64_t)s)
					break;
			if (k == UINT64_MAX)
				continue;
			fo_fill(src, k, peer);
			SAME(win + (size_t)s * FO_SLOT, src, fo_len(k),
			     "slot %d: operation %" PRIu64 " of rank %d", s, k,
			     peer);
		}
		/* every log put that nothing later overwrote */
		for (k64 = total > 4ULL * FO_LOG_N ? total - 4ULL * FO_LOG_N :
		     0; k64 < total; k64++) {
			if (k64 % 4 != 3)
				continue;
			fo_fill(src, k64, peer);
			if (!SAME(win + fo_off(k64), src, FO_LOG_SZ, "log put %"
				  PRIu64 " of rank %d", k64, peer))
				break;
		}
		n = total;
	}
	barrier();
	CHECK(hcomm_signal_read(comm, FO_SIG) == want, "signal %d moved to "
	      "%" PRIu64 " after the check (%" PRIu64 " expected)", FO_SIG,
	      hcomm_signal_read(comm, FO_SIG), want);

	/* the cutter restored the link (also after a failure) */
	barrier();
	pair_down(w);
	out("failover (%s, %d cut%s): %" PRIu64 " operations of the peer "
	    "checked; %s", how, cuts, cuts > 1 ? "s" : "", n,
	    fails ? "FAILED" : "passed");
	return fails ? 1 : 0;
}

/*
 * failover under other loads (--load batch|get|fence), one cut of rank
 * 0's RoCE NIC, restored once failed over; both ranks run the load on
 * each other until FO_AFTER_NS after the switch back:
 *  - batch: hcomm_batch() of FL_BATCH puts of FL_ELEM bytes (the last a
 *    put_signal), each request counted once by its callback; at the end
 *    the peer's last batch is in place byte for byte and the signal
 *    equals its batch count;
 *  - get:   FO_QD gets in flight of 8 B .. 64 KiB from the peer's
 *    read-only region, each checked byte for byte as it completes (a
 *    replayed read must bring the same bytes);
 *  - fence: 8 put_nb of 4 KiB, hcomm_fence() (0, and every put before
 *    it complete when it returns), then a put_signal; at the end every
 *    slot is the peer's last and the signal its round count.
 * No operation may fail; the events are LINK_DOWN, FAILED_OVER,
 * RECOVERED, no PEER_LOST.
 */
#define FL_BATCH	1000
#define FL_ELEM		512
#define FL_GSRC		(1 * MiB)
#define FL_SIG		2

static unsigned int *fl_cbs;

static void fl_cb(struct hcomm_request *r, void *arg)
{
	(void)r;
	__atomic_add_fetch(&fl_cbs[(uintptr_t)arg], 1, __ATOMIC_RELAXED);
}

static int case_foload(const char *how, const char *load)
{
	const size_t region = FL_BATCH * FL_ELEM;
	unsigned char *win, *src, *gsrc, *chk;
	struct hcomm_request *req;
	struct hcomm_xfer_desc *d;
	struct hcomm_win *w;
	struct fo_cutter cut = { .how = how, .cuts = 1, .failback = 1 };
	uint64_t t_end = 0, t_done = 0, rounds = 0, want, peer_rounds[2];
	uint64_t t_last, gaps = 0;
	unsigned char *pp;
	int peer, rc, i, k, cutting = 0, mode, cut_done = 0;
	int64_t got;

	mode = !strcmp(load, "batch") ? 0 : !strcmp(load, "get") ? 1 :
	       !strcmp(load, "fence") ? 2 : -1;
	comm_up();
	if (np != 2 || mode < 0)
		return FAIL("foload: 2 ranks and --load batch|get|fence, not "
			    "%d and %s", np, load), 1;
	peer = 1 - me;
	cut.peer = peer;
	OK(hcomm_comm_set_event_cb(comm, ev_record, NULL));
	/* [batch region | get source | PAD: fence's signal] */
	win = xmap(region + FL_GSRC + PAD);
	/* a batch's sources, or fence mode's 8 slots */
	src = xmap(region > 8 * FO_SLOT ? region : 8 * FO_SLOT);
	chk = xmap(FO_QD * FO_SLOT);
	req = calloc(FL_BATCH, sizeof(*req));
	d = calloc(FL_BATCH, sizeof(*d));
	fl_cbs = calloc(FL_BATCH, sizeof(*fl_cbs));
	if (!req || !d || !fl_cbs)
		return FAIL("calloc"), 1;
	memset(win, POISON, region + FL_GSRC + PAD);
	gsrc = win + region;
	fill(gsrc, FL_GSRC, 0x6e000 + (uint64_t)me);	/* what gets read */
	pp = xmap(FL_GSRC);				/* the peer's, here */
	fill(pp, FL_GSRC, 0x6e000 + (uint64_t)(1 - me));
	w = win_make(win, region + FL_GSRC + PAD);
	barrier();

	phase = "stream";
	if (me == 0) {
		cutting = !pthread_create(&cut.thr, NULL, fo_cut_main, &cut);
		CHECK(cutting, "pthread_create");
	}
	t_last = now_ns();
	for (rounds = 0;; rounds++) {
		/* the end: FO_AFTER_NS after the cut is done and all is back */
		if (!cut_done)
			cut_done = fo_cuts_done(w, peer, cutting ? &cut : NULL,
						src);
		if (!t_end && cut_done &&
		    ev_count(HCOMM_EVENT_RECOVERED, peer) >=
		    ev_count(HCOMM_EVENT_FAILED_OVER, peer))
			t_end = now_ns() + FO_AFTER_NS;
		if (t_end && now_ns() > t_end)
			break;
		if (cut_done && !t_done)	/* see case_failover() */
			t_done = now_ns();
		if (!t_end && t_done && now_ns() - t_done > FO_SETTLE_NS) {
			FAIL("not back on rdma %d s after the cut was done",
			     (int)(FO_SETTLE_NS / 1000000000));
			break;
		}
		if (mode == 0) {
			fill(src, region, 0xba000000ULL * (uint64_t)(me + 1) +
			     rounds);
			for (i = 0; i < FL_BATCH; i++) {
				memset(&d[i], 0, sizeof(d[i]));
				d[i].op = i + 1 < FL_BATCH ? HCOMM_OP_PUT :
					  HCOMM_OP_PUT_SIGNAL;
				d[i].target = peer;
				d[i].target_off = (uint64_t)i * FL_ELEM;
				d[i].local = (uintptr_t)(src + (size_t)i *
							 FL_ELEM);
				d[i].len = FL_ELEM;
				d[i].sig = FL_SIG;
				d[i].value = 1;
				memset(&req[i], 0, sizeof(req[i]));
				req[i].cb = fl_cb;
				req[i].cb_arg = (void *)(uintptr_t)i;
				fl_cbs[i] = 0;
			}
			rc = hcomm_batch(w, d, FL_BATCH, req);
			if (!CHECK(!rc, "batch %" PRIu64 ": %s: %s", rounds,
				   errname(rc), hcomm_errmsg()))
				break;
			for (i = 0; i < FL_BATCH; i++) {
				rc = hcomm_wait(&req[i]);
				if (!CHECK(!rc && fl_cbs[i] == 1, "batch %"
					   PRIu64 " descriptor %d: %s, %u "
					   "completions", rounds, i,
					   errname(rc), fl_cbs[i]))
					break;
			}
			if (i < FL_BATCH)
				break;
		} else if (mode == 1) {
			uint64_t off[FO_QD];
			size_t len[FO_QD];

			for (k = 0; k < FO_QD; k++) {
				uint64_t n = rounds * FO_QD + (uint64_t)k;

				len[k] = fo_len(n);
				off[k] = (n * 4099) % (FL_GSRC - len[k]);
				memset(chk + (size_t)k * FO_SLOT, 0, len[k]);
				memset(&req[k], 0, sizeof(req[k]));
				req[k].cb = fl_cb;
				req[k].cb_arg = (void *)(uintptr_t)k;
				fl_cbs[k] = 0;
				rc = hcomm_get_nb(w, peer, region + off[k],
						  chk + (size_t)k * FO_SLOT,
						  len[k], &req[k]);
				if (!CHECK(!rc, "get: %s: %s", errname(rc),
					   hcomm_errmsg()))
					break;
			}
			if (k < FO_QD)
				break;
			for (k = 0; k < FO_QD; k++) {
				rc = hcomm_wait(&req[k]);
				CHECK(!rc && fl_cbs[k] == 1, "get %d: %s, %u "
				      "completions", k, errname(rc), fl_cbs[k]);
			}
			/* the peer's region is fill(..., 0x6e000 + peer) */
			{
				for (k = 0; k < FO_QD; k++)
					if (!SAME(chk + (size_t)k * FO_SLOT,
						  pp + off[k], len[k], "get of "
						  "%zu bytes at %" PRIu64 ", "
						  "round %" PRIu64, len[k],
						  off[k], rounds))
						break;
				if (k < FO_QD)
					break;
			}
		} else {
			for (k = 0; k < 8; k++) {
				uint64_t n = rounds * 8 + (uint64_t)k;

				fo_fill(src + (size_t)k * FO_SLOT, n, me);
				memset(&req[k], 0, sizeof(req[k]));
				rc = hcomm_put_nb(w, peer, (uint64_t)k *
						  FO_SLOT, src + (size_t)k *
						  FO_SLOT, fo_len(n), &req[k]);
				if (!CHECK(!rc, "put: %s", errname(rc)))
					break;
			}
			if (k < 8)
				break;
			rc = hcomm_fence(comm);
			CHECK(!rc, "fence in round %" PRIu64 ": %s: %s", rounds,
			      errname(rc), hcomm_errmsg());
			for (k = 0; k < 8; k++)
				CHECK(req[k].done == 1 && !req[k].status,
				      "put %d of round %" PRIu64 " not "
				      "complete (done %d, status %d) after the "
				      "fence", k, rounds, req[k].done,
				      req[k].status);
			rc = hcomm_put_signal(w, peer, region + FL_GSRC, src,
					      8, FL_SIG, 1);
			if (!CHECK(!rc, "put_signal: %s", errname(rc)))
				break;
		}
		if (now_ns() - t_last > gaps)
			gaps = now_ns() - t_last;
		t_last = now_ns();
	}
	OK(hcomm_flush(comm));
	if (cutting) {
		pthread_join(cut.thr, NULL);
		CHECK(!cut.rc, "the cut failed");
	}
	phase = "events";
	/* the cut's failover (and any keep-alive false alarm of a busy
	 * machine), every one back, none lost */
	CHECK(ev_count(HCOMM_EVENT_LINK_DOWN, peer) >= 1 &&
	      ev_count(HCOMM_EVENT_FAILED_OVER, peer) ==
	      ev_count(HCOMM_EVENT_LINK_DOWN, peer) &&
	      ev_count(HCOMM_EVENT_RECOVERED, peer) ==
	      ev_count(HCOMM_EVENT_FAILED_OVER, peer) &&
	      !ev_count(HCOMM_EVENT_PEER_LOST, peer), "events: %d link-down, "
	      "%d failed-over, %d recovered, %d peer-lost",
	      ev_count(HCOMM_EVENT_LINK_DOWN, peer),
	      ev_count(HCOMM_EVENT_FAILED_OVER, peer),
	      ev_count(HCOMM_EVENT_RECOVERED, peer),
	      ev_count(HCOMM_EVENT_PEER_LOST, peer));
	out("foload (%s, %s): %" PRIu64 " rounds, the longest %.1f ms",
	    load, how, rounds, (double)gaps / 1e6);

	phase = "verify";
	OK(hcomm_boot_allgather(comm, &rounds, peer_rounds, sizeof(rounds)));
	if (mode == 0 && peer_rounds[peer]) {
		want = peer_rounds[peer];
		got = hcomm_signal_wait(comm, FL_SIG, want, 20000);
		CHECK(got == (int64_t)want, "signal: %" PRId64 " after %"
		      PRIu64 " batches of rank %d", got, want, peer);
		fill(src, region, 0xba000000ULL * (uint64_t)(peer + 1) +
		     want - 1);
		SAME(win, src, region, "rank %d's last batch", peer);
	} else if (mode == 2 && peer_rounds[peer]) {
		want = peer_rounds[peer];
		got = hcomm_signal_wait(comm, FL_SIG, want, 20000);
		CHECK(got == (int64_t)want, "signal: %" PRId64 " after %"
		      PRIu64 " fenced rounds of rank %d", got, want, peer);
		for (k = 0; k < 8; k++) {
			uint64_t n = (want - 1) * 8 + (uint64_t)k;

			fo_fill(src, n, peer);
			if (!SAME(win + (size_t)k * FO_SLOT, src, fo_len(n),
				  "slot %d of rank %d's last fenced round", k,
				  peer)) {
				uint64_t h, q;

				/* whose bytes: every page's first word */
				for (q = 0; q < fo_len(n); q += 4096) {
					memcpy(&h, win + (size_t)k * FO_SLOT +
					       q, 8);
					out("  slot %d +%" PRIu64 ": %016"
					    PRIx64 "%s", k, q, h,
					    memcmp(win + (size_t)k * FO_SLOT +
						   q, src + q, 8) ? " (wrong)" :
					    "");
				}
			}
		}
	}
	barrier();
	pair_down(w);
	free(req);
	free(d);
	free(fl_cbs);
	munmap(pp, FL_GSRC);
	out("foload (%s, %s): %s", load, how, fails ? "FAILED" : "passed");
	return fails ? 1 : 0;
}

/*
 * failover of one pair in a bigger job (--cuts 1, np >= 3, one rank per
 * VM): every rank streams put_signal_nb to every other rank (its own
 * slots and signal there); rank 0 cuts only its RoCE traffic to rank 1
 * (a prio qdisc on eth1 sends packets for rank 1's address into a netem
 * band with 100 % loss), restores it once failed over and waits until
 * the pair is back on rdma.  Checked: ranks 0 and 1 see exactly one
 * LINK_DOWN, FAILED_OVER and RECOVERED about each other and nothing
 * about anyone else; the other ranks see no event; no operation fails,
 * each completes once; at every rank, every source's signal equals the
 * number of operations it sent there, and its slots hold its last puts.
 */
#define FP_SLOTS	4
#define FP_SLOT		(16 * KiB)
#define FP_RUN_NS	12000000000ULL

static int fp_link(int on, int peer_vm)
{
	if (!on)
		return lc_sh("tc qdisc replace dev eth1 root handle 1: prio "
			     "bands 4 priomap 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 "
			     "&& tc qdisc add dev eth1 parent 1:4 handle 40: "
			     "netem loss 100%% && tc filter add dev eth1 "
			     "parent 1: protocol ip prio 1 u32 match ip dst "
			     "10.78.0.%d/32 flowid 1:4", peer_vm);
	return lc_sh("tc qdisc change dev eth1 parent 1:4 handle 40: netem "
		     "loss 0%%");
}

struct fp_cutter {
	pthread_t thr;
	int rc;
};

static void *fp_cut_main(void *arg)
{
	struct fp_cutter *k = arg;

	int nfo = ev_count(HCOMM_EVENT_FAILED_OVER, 1);

	usleep(LC_RUN_NS / 1000);
	nfo = ev_count(HCOMM_EVENT_FAILED_OVER, 1);
	out("cutting rank 0's RoCE traffic to rank 1 only");
	k->rc = fp_link(0, 2);
	if (!k->rc && !ev_wait_n(HCOMM_EVENT_FAILED_OVER, 1, nfo + 1, 30000)) {
		out("FAIL: no failed-over for rank 1 within 30 s");
		k->rc = -1;
	}
	usleep(1000000);
	/* restored whatever happened above */
	if (fp_link(1, 2) && !k->rc)
		k->rc = -1;
	if (!k->rc && !ev_wait_n(HCOMM_EVENT_RECOVERED, 1,
				 ev_count(HCOMM_EVENT_FAILED_OVER, 1), 30000)) {
		out("FAIL: rank 1 not back on rdma within 30 s of the restore");
		k->rc = -1;
	}
	return NULL;
}

static uint64_t fp_len(uint64_t n)
{
	static const uint64_t sz[] = { 8, 1000, 4 * KiB, 16 * KiB, 9 * KiB + 1 };

	return sz[n % 5];
}

static void fp_fill(unsigned char *b, uint64_t n, int from, int to)
{
	fill(b, fp_len(n), 0xfa000000ULL + n * 977 + (uint64_t)from * 31 +
	     (uint64_t)to);
}

static int case_fopair(void)
{
	unsigned char *win, *src;
	struct hcomm_request req[FO_QD];
	struct hcomm_win *w;
	struct fp_cutter cut = { 0 };
	uint64_t *sent, *all, t0, n;
	int q, peer[FO_QD], j, rc, r, s, k, cutting = 0;
	int64_t got;

	comm_up();
	if (np < 3 || np > 64)
		return FAIL("fopair: 3 .. 64 ranks, not %d", np), 1;
	OK(hcomm_comm_set_event_cb(comm, ev_record, NULL));
	win = xmap((size_t)np * FP_SLOTS * FP_SLOT + PAD);
	src = xmap(FO_QD * FP_SLOT);
	sent = calloc(np, sizeof(*sent));
	all = calloc((size_t)np * np, sizeof(*all));
	if (!sent || !all)
		return FAIL("calloc"), 1;
	memset(win, POISON, (size_t)np * FP_SLOTS * FP_SLOT + PAD);
	w = win_make(win, (size_t)np * FP_SLOTS * FP_SLOT + PAD);
	barrier();
	phase = "stream";
	if (me == 0) {
		cutting = !pthread_create(&cut.thr, NULL, fp_cut_main, &cut);
		CHECK(cutting, "pthread_create");
	}
	memset(req, 0, sizeof(req));
	memset(peer, -1, sizeof(peer));
	t0 = now_ns();
	for (n = 0; now_ns() - t0 < FP_RUN_NS; n++) {
		j = (int)(n % FO_QD);
		if (peer[j] >= 0) {
			rc = hcomm_wait(&req[j]);
			if (!CHECK(!rc && fo_cbs[j] == 1, "an operation to rank "
				   "%d: %s (%s), %u completions", peer[j],
				   errname(rc), hcomm_errmsg(), fo_cbs[j]))
				break;
		}
		/* round robin over the others */
		q = (int)(n % (uint64_t)(np - 1));
		q += q >= me;
		k = (int)(sent[q] % FP_SLOTS);
		fp_fill(src + (size_t)j * FP_SLOT, sent[q], me, q);
		memset(&req[j], 0, sizeof(req[j]));
		req[j].cb = fo_cb;
		req[j].cb_arg = (void *)(uintptr_t)j;
		fo_cbs[j] = 0;
		rc = hcomm_put_signal_nb(w, q, ((uint64_t)me * FP_SLOTS + k) *
					 FP_SLOT, src + (size_t)j * FP_SLOT,
					 fp_len(sent[q]), (uint32_t)me, 1,
					 &req[j]);
		if (!CHECK(!rc, "issuing to rank %d: %s", q, errname(rc)))
			break;
		peer[j] = q;
		sent[q]++;
	}
	for (j = 0; j < FO_QD; j++)
		if (peer[j] >= 0)
			CHECK(!hcomm_wait(&req[j]) && fo_cbs[j] == 1,
			      "draining: an operation to rank %d", peer[j]);
	OK(hcomm_flush(comm));
	if (cutting) {
		pthread_join(cut.thr, NULL);
		CHECK(!cut.rc, "the cut failed");
	}

	phase = "events";
	/* events come on their own thread: let the expected ones arrive */
	if (me <= 1)
		(void)ev_wait_n(HCOMM_EVENT_RECOVERED, 1 - me, 1, 10000);
	/*
	 * The cut pair failed over (at least once) and every failover came
	 * back; other pairs saw none, or - a keep-alive false alarm of four
	 * emulated VMs on a busy 2-CPU host - failed over and came back too.
	 * Nobody lost anybody.
	 */
	for (r = 0; r < np; r++) {
		int want = (me == 0 && r == 1) || (me == 1 && r == 0);
		int nl = ev_count(HCOMM_EVENT_LINK_DOWN, r);

		if (r == me)
			continue;
		if (nl && !want)
			(void)ev_wait_n(HCOMM_EVENT_RECOVERED, r, nl, 10000);
		CHECK(nl >= want && ev_count(HCOMM_EVENT_FAILED_OVER, r) == nl &&
		      ev_count(HCOMM_EVENT_RECOVERED, r) == nl &&
		      !ev_count(HCOMM_EVENT_PEER_LOST, r), "rank %d: %d "
		      "link-down, %d failed-over, %d recovered, %d peer-lost "
		      "(the cut pair: %s)", r, nl,
		      ev_count(HCOMM_EVENT_FAILED_OVER, r),
		      ev_count(HCOMM_EVENT_RECOVERED, r),
		      ev_count(HCOMM_EVENT_PEER_LOST, r), want ? "yes" : "no");
		if (nl && !want)
			out("rank %d: %d failover(s) of an uncut link (keep-alive "
			    "false alarm), failed over and back", r, nl);
	}

	phase = "verify";
	OK(hcomm_boot_allgather(comm, sent, all, (size_t)np * sizeof(*sent)));
	for (s = 0; s < np; s++) {
		uint64_t cnt = all[(size_t)s * np + me];

		if (s == me)
			continue;
		got = hcomm_signal_wait(comm, (uint32_t)s, cnt, 20000);
		CHECK(got == (int64_t)cnt, "signal of rank %d: %" PRId64
		      ", it sent %" PRIu64, s, got, cnt);
		for (k = 0; k < FP_SLOTS && (uint64_t)k < cnt; k++) {
			uint64_t last = cnt - 1 - ((cnt - 1 - k) % FP_SLOTS);

			fp_fill(src, last, s, me);
			SAME(win + ((size_t)s * FP_SLOTS + k) * FP_SLOT, src,
			     fp_len(last), "rank %d's slot %d (its operation %"
			     PRIu64 " here)", s, k, last);
		}
	}
	barrier();
	pair_down(w);
	free(sent);
	free(all);
	out("fopair: %d ranks, %" PRIu64 " operations issued; %s", np, n,
	    fails ? "FAILED" : "passed");
	return fails ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* coll: the collectives against references (tests/coll_check.h)       */
/* ------------------------------------------------------------------ */

static int coll_nchecks;
#define COLL_CHECK(c, ...)	(coll_nchecks++, CHECK(c, __VA_ARGS__))
#include "../coll_check.h"

/*
 * Every type and operation of hcomm_allreduce (by default recursive
 * doubling up to 64 KiB, the ring above;
 * hierarchical when the ranks span hosts with several on one), then reduce_scatter, broadcast and reduce
 * from every root, bad arguments, allgather, barrier, alltoall and the
 * non-blocking forms, with 4 KiB
 * chunks in 2 slots (the ring's slots wrap many times), over whatever
 * transports the ranks' pairs use.
 */
static int case_coll(void)
{
	uint64_t t0;

	setenv("HCOMM_COLL_CHUNK", "4096", 1);
	setenv("HCOMM_COLL_SLOTS", "2", 1);
	comm_up();
	t0 = now_ns();
	phase = "allreduce";
	coll_t_allreduce();
	phase = "reduce_scatter";
	if (np > 1)
		coll_t_reduce_scatter();
	phase = "broadcast and reduce";
	coll_t_rooted();
	phase = "bad arguments";
	coll_t_errors();
	phase = "allgather and barrier";
	coll_t_allgather();
	phase = "alltoall";
	coll_t_alltoall();
	phase = "non-blocking";
	coll_t_nb();
	phase = "fp16 compression";
	OK(hcomm_comm_set_fp16_compress(comm, 1, 4096));
	coll_t_compress();
	out("coll: %d checks of %d ranks over %s in %.1f s, %d failed",
	    coll_nchecks, np, hcomm_comm_transport(comm),
	    (double)(now_ns() - t0) / 1e9, fails);
	comm_down();
	return 0;
}

/*
 * The default chunk (256 KiB) and slots: full chunks with short tails,
 * whose puts complete out of order (inline vs the engine's workers, lanes,
 * stripes), then hcomm_comm_probe() between allreduces.
 */
static int case_colltails(void)
{
	uint64_t t0;

	comm_up();
	t0 = now_ns();
	phase = "tails";
	coll_t_tails();
	phase = "probe between collectives";
	coll_t_probe();
	phase = "alltoall";
	coll_t_alltoall();
	out("colltails: %d checks of %d ranks over %s in %.1f s, %d failed",
	    coll_nchecks, np, hcomm_comm_transport(comm),
	    (double)(now_ns() - t0) / 1e9, fails);
	comm_down();
	return 0;
}

/* ------------------------------------------------------------------ */
/* qos: hcomm_set_qos against the module's scheduler                   */
/* ------------------------------------------------------------------ */

#define QOS_LEN		(4 * MiB)
#define QOS_DEPTH	48	/* puts in flight per tenant */
#define QOS_WARM_MS	500
#define QOS_SAMPLE_MS	10
#define QOS_TOL_PP	10.0	/* percentage points */
#define QOS_NOBODY	65534

struct qos_ctx_sample {
	uint64_t served;	/* engine bytes copied for the context */
	unsigned active;	/* its transfers on the engine */
	double share;		/* the scheduler's share_pct */
};

/*
 * The line of debugfs "contexts" of pid's context (one per rank here);
 * 0 when found.
 */
static int qos_sample(pid_t pid, struct qos_ctx_sample *out)
{
	FILE *f = fopen("/sys/kernel/debug/hcomm/contexts", "r");
	char line[512];
	int found = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long served;
		unsigned active;
		double share;
		int p;

		/* pid comm regions pinned cache xfers_active min max prio
		 * share_pct served_bytes ... */
		if (line[0] == '#' ||
		    sscanf(line, "%d %*s %*u %*u %*u %u %*u %*u %*u %lf %llu",
			   &p, &active, &share, &served) != 4 || p != pid)
			continue;
		out->served = served;
		out->active = active;
		out->share = share;
		found = 0;
	}
	fclose(f);
	return found;
}

static long qos_param(const char *name)
{
	char path[128];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/hcomm/parameters/%s", name);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static int qos_param_set(const char *name, long v)
{
	char path[128];
	FILE *f;
	int ret;

	snprintf(path, sizeof(path), "/sys/module/hcomm/parameters/%s", name);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	ret = fprintf(f, "%ld\n", v) > 0 ? 0 : -EIO;
	return fclose(f) ? -errno : ret;
}

/* Rank 0 alone: admission, range errors, an unprivileged user. */
static void qos_rules(void)
{
	struct hcomm_ctx *a, *b;
	int st, ret;
	pid_t pid;

	phase = "admission";
	if (!OK(hcomm_open(&a, 0)) || !OK(hcomm_open(&b, 0)))
		return;
	OK(hcomm_set_qos(a, &(hcomm_qos_config_t){ .min_rate = 60 }));
	EXPECT(hcomm_set_qos(b, &(hcomm_qos_config_t){ .min_rate = 50 }),
	       -HCOMM_ERR_ADMISSION);
	CHECK(hcomm_errno() == ENOSPC && strstr(hcomm_errmsg(), "min_rate 50"),
	      "ADMISSION: errno %d, \"%s\"", hcomm_errno(), hcomm_errmsg());
	OK(hcomm_set_qos(b, &(hcomm_qos_config_t){ .min_rate = 40 }));
	EXPECT(hcomm_set_qos(b, &(hcomm_qos_config_t){ .min_rate = 41 }),
	       -HCOMM_ERR_ADMISSION);
	/* lowering one's own is always allowed; closing gives it back */
	OK(hcomm_set_qos(a, &(hcomm_qos_config_t){ .min_rate = 10 }));
	OK(hcomm_set_qos(b, &(hcomm_qos_config_t){ .min_rate = 90 }));
	hcomm_close(a);
	EXPECT(hcomm_set_qos(b, &(hcomm_qos_config_t){ .min_rate = 101 }),
	       -HCOMM_ERR_INVAL);
	EXPECT(hcomm_set_qos(b, &(hcomm_qos_config_t){ .min_rate = 80,
						       .max_rate = 70 }),
	       -HCOMM_ERR_INVAL);
	EXPECT(hcomm_set_qos(b, &(hcomm_qos_config_t){ .priority = 8 }),
	       -HCOMM_ERR_INVAL);
	OK(hcomm_set_qos(b, &(hcomm_qos_config_t){ .min_rate = 100,
						   .priority = 7 }));
	hcomm_close(b);

	/* nobody: no guarantee or priority beyond the module's allowance */
	phase = "unprivileged";
	pid = fork();
	if (pid == 0) {
		struct hcomm_ctx *c;
		int code = 0;

		if (setgroups(0, NULL) || setgid(QOS_NOBODY) ||
		    setuid(QOS_NOBODY))
			_exit(10);
		if (hcomm_open(&c, 0))
			_exit(11);
		if (hcomm_set_qos(c, &(hcomm_qos_config_t){ .min_rate = 30 })
		    != -HCOMM_ERR_ACCESS || hcomm_errno() != EPERM ||
		    !strstr(hcomm_errmsg(), "CAP_SYS_NICE") ||
		    !strstr(hcomm_errmsg(), "may reserve 0 %"))
			code = 12;
		else if (hcomm_set_qos(c, &(hcomm_qos_config_t){
				       .priority = 1 }) != -HCOMM_ERR_ACCESS)
			code = 13;
		else if (hcomm_set_qos(c, &(hcomm_qos_config_t){
				       .max_rate = 50 }))
			code = 14;	/* a cap needs no privilege */
		if (code)
			out("nobody: %s", hcomm_errmsg());
		hcomm_close(c);
		_exit(code);
	}
	if (!CHECK(pid > 0, "fork: %s", strerror(errno)))
		return;
	ret = waitpid(pid, &st, 0);
	CHECK(ret == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "as nobody (qos_user_min_rate %ld, qos_user_priority %ld): "
	      "exit %d (10 setuid, 11 open, 12 min_rate not refused with "
	      "ACCESS naming CAP_SYS_NICE and 0 %%, 13 priority not refused, "
	      "14 a cap refused)", qos_param("qos_user_min_rate"),
	      qos_param("qos_user_priority"),
	      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/*
 * qos: rank 0 first checks the rules alone (qos_rules).  Then the two
 * ranks are two tenants of one user: rank 0's context with the seed's
 * { .min_rate = 30, .max_rate = 70, .priority = 2 }, rank 1's with the
 * defaults.  Weights 30 and 1 ask for 96.8 % and 3.2 %; the cap holds
 * rank 0 at 70, so the scheduler gives 70 % and 30 %.  Each rank keeps
 * QOS_DEPTH puts of 4 MiB to the other in flight; rank 0 samples debugfs
 * "contexts" every 10 ms and counts an interval only when both contexts
 * had more queued at its start than the engine served in it (as
 * selftests/hcomm_qos_test.c: a late process drops intervals, it cannot
 * skew shares).  The served bytes must split 70/30 +-10 points, and the
 * last put's bytes must arrive intact.
 */
static int case_qos(void)
{
	struct hcomm_request req[QOS_DEPTH];
	bool issued[QOS_DEPTH] = { false };
	struct qos_ctx_sample prev[2], cur[2];
	uint64_t tenant[2] = { 0, 0 }, counted = 0, t_end, t_go, sum_a, sum_b;
	unsigned workers, intervals = 0, seen = 0, i, n_ok = 0;
	long slow = -1;
	int32_t pids[2], mypid = getpid();
	struct hcomm_win *w;
	uint8_t *src, *dst;
	double want[2] = { 70.0, 30.0 };
	int go = 0, ret;

	if (geteuid()) {
		out("qos: SKIP: needs root (debugfs, module parameters)");
		return 4;
	}
	comm_up();
	if (!CHECK(np == 2, "qos runs with 2 ranks, not %d", np))
		return comm_down(), 1;
	if (me == 0)
		qos_rules();
	barrier();

	phase = "tenants";
	src = aligned_alloc(4096, QOS_LEN);
	dst = aligned_alloc(4096, QOS_LEN);
	if (!CHECK(src && dst, "allocation"))
		exit(1);
	for (i = 0; i < QOS_LEN; i++)
		src[i] = (uint8_t)(i * 7 + me * 13 + 1);
	memset(dst, 0, QOS_LEN);
	w = win_make(dst, QOS_LEN);
	OK(hcomm_boot_allgather(comm, &mypid, pids, sizeof(mypid)));
	if (me == 0) {
		OK(hcomm_set_qos(hcomm_comm_ctx(comm), &(hcomm_qos_config_t){
			.min_rate = 30, .max_rate = 70, .priority = 2 }));
		/* the share arithmetic, not the slow-slot rule (qos.rst) */
		slow = qos_param("slot_slow_ms");
		CHECK(!qos_param_set("slot_slow_ms", 0), "slot_slow_ms=0");
	}
	barrier();
	memset(req, 0, sizeof(req));
	t_go = now_ns();
	t_end = t_go + (uint64_t)(QOS_WARM_MS + 3000) * 1000000ULL;
	/* rank 1 streams a little longer, so rank 0's window is covered */
	if (me == 1)
		t_end += 1000 * 1000000ULL;
	workers = (unsigned)qos_param("workers");
	if (!workers || workers > 64)
		workers = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	for (i = 0; i < QOS_DEPTH; i++)
		if (!OK(hcomm_put_nb(w, 1 - me, 0, src, QOS_LEN, &req[i])))
			goto out;
		else
			issued[i] = true;
	while (now_ns() < t_end) {
		bool busy = true;

		if (me == 0 && now_ns() > t_go + QOS_WARM_MS * 1000000ULL) {
			if (!go) {
				go = qos_sample(pids[0], &prev[0]) == 0 &&
				     qos_sample(pids[1], &prev[1]) == 0;
				CHECK(go, "both contexts in debugfs contexts");
				if (!go)
					break;
				continue;
			}
			usleep(QOS_SAMPLE_MS * 1000);
			if (qos_sample(pids[0], &cur[0]) ||
			    qos_sample(pids[1], &cur[1]))
				break;
			seen++;
			for (i = 0; i < 2; i++) {
				uint64_t q = prev[i].active > 2 * workers + 1 ?
					(uint64_t)(prev[i].active - 2 * workers
						   - 1) * QOS_LEN : 0;

				if (cur[i].served - prev[i].served >= q)
					busy = false;
			}
			if (busy) {
				intervals++;
				for (i = 0; i < 2; i++) {
					tenant[i] += cur[i].served -
						     prev[i].served;
					counted += cur[i].served -
						   prev[i].served;
				}
			}
			memcpy(prev, cur, sizeof(prev));
		}
		/* reissue whatever completed */
		for (i = 0; i < QOS_DEPTH; i++) {
			if (!hcomm_test(&req[i]))
				continue;
			issued[i] = false;
			if (!CHECK(req[i].status == 0, "put: %s",
				   errname(req[i].status)))
				goto out;
			n_ok++;
			memset(&req[i], 0, sizeof(req[i]));
			if (!OK(hcomm_put_nb(w, 1 - me, 0, src, QOS_LEN,
					     &req[i])))
				goto out;
			issued[i] = true;
		}
		if (me == 1)
			usleep(1000);
	}
out:
	for (i = 0; i < QOS_DEPTH; i++)
		if (issued[i])
			hcomm_wait(&req[i]);
	OK(hcomm_flush(comm));
	if (me == 0 && slow >= 0)
		CHECK(!qos_param_set("slot_slow_ms", slow), "slot_slow_ms back");
	barrier();
	/* the data: every put wrote the same bytes; compare them */
	for (i = 0, sum_a = 0, sum_b = 0; i < QOS_LEN; i++) {
		sum_a += (uint8_t)(i * 7 + (1 - me) * 13 + 1) * (i % 251 + 1);
		sum_b += dst[i] * (i % 251 + 1);
	}
	CHECK(sum_a == sum_b, "the peer's bytes: checksum %" PRIu64 ", expected "
	      "%" PRIu64, sum_b, sum_a);
	if (me == 0) {
		out("qos: %u of %u intervals of %d ms with both tenants "
		    "backlogged (%u engine workers), %" PRIu64 " MiB counted; "
		    "%u puts of 4 MiB done here", intervals, seen,
		    QOS_SAMPLE_MS, workers, (uint64_t)(counted / MiB), n_ok);
		for (i = 0; i < 2; i++)
			out("qos: tenant %c (rank %u, %s): %.1f %% of the engine "
			    "(target %.1f; scheduler's share_pct %.1f)",
			    'A' + i, i, i ? "defaults" :
			    "min 30, max 70, priority 2",
			    counted ? 100.0 * (double)tenant[i] /
			    (double)counted : 0, want[i], prev[i].share);
		if (CHECK(counted >= 32 * QOS_LEN, "only %" PRIu64 " MiB "
			  "counted: too little to measure", (uint64_t)(counted / MiB)))
			for (i = 0; i < 2; i++) {
				double sh = 100.0 * (double)tenant[i] /
					    (double)counted;

				CHECK(sh >= want[i] - QOS_TOL_PP &&
				      sh <= want[i] + QOS_TOL_PP,
				      "tenant %c got %.1f %%, target %.1f "
				      "(+-%.0f)", 'A' + i, sh, want[i],
				      QOS_TOL_PP);
			}
	}
	ret = hcomm_win_free(w);
	OK(ret);
	free(src);
	free(dst);
	comm_down();
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = NULL, *expect = NULL, *how = "netem";
	uint64_t max = 16 * MiB;
	bool allow_io = false, forever = false;
	struct rlimit rl;
	int i, ret = 1, secs = env_int("HCOMM_VMTEST_ALARM", 100), victim = -1;
	int cuts = 1;
	const char *load = "batch";

	if (argc < 2) {
		fprintf(stderr, "usage: hcomm_vm_test CASE [--max SIZE] "
			"[--mode inline|thread|locked] [--expect LAUNCHER] "
			"[--allow-io] [--iters N] [--victim RANK] "
			"[--how netem|link|tap|rxe] [--cuts N] "
			"[--load batch|get|fence]\n");
		return 2;
	}
	case_name = argv[1];
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--max") && i + 1 < argc)
			max = parse_size(argv[++i]);
		else if (!strcmp(argv[i], "--mode") && i + 1 < argc)
			mode = argv[++i];
		else if (!strcmp(argv[i], "--expect") && i + 1 < argc)
			expect = argv[++i];
		else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			opt_iters = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--victim") && i + 1 < argc)
			victim = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--load") && i + 1 < argc)
			load = argv[++i];
		else if (!strcmp(argv[i], "--cuts") && i + 1 < argc)
			cuts = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--how") && i + 1 < argc)
			how = argv[++i];
		else if (!strcmp(argv[i], "--allow-io"))
			allow_io = true;
		else if (!strcmp(argv[i], "--forever"))
			forever = true;
		else {
			fprintf(stderr, "hcomm_vm_test: unknown argument %s\n",
				argv[i]);
			return 2;
		}
	}
	signal(SIGALRM, on_alarm);
	alarm((unsigned int)secs);
	if (env_int("HCOMM_VMTEST_TRACE", 0)) {
		pthread_t th;

		if (!pthread_create(&th, NULL, phase_tracer, NULL))
			pthread_detach(th);
	}
	/* Pinned memory counts against RLIMIT_MEMLOCK without CAP_IPC_LOCK. */
	if (!getrlimit(RLIMIT_MEMLOCK, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_MEMLOCK, &rl);
	}

	if (!strcmp(case_name, "basic"))
		ret = case_basic(expect);
	else if (!strcmp(case_name, "route"))
		ret = case_route(expect ? expect : "tcp");
	else if (!strcmp(case_name, "putget"))
		ret = case_putget(max);
	else if (!strcmp(case_name, "signal"))
		ret = case_signal();
	else if (!strcmp(case_name, "batch"))
		ret = case_batch();
	else if (!strcmp(case_name, "batchgone"))
		ret = case_batchgone();
	else if (!strcmp(case_name, "cb"))
		ret = case_cb(mode);
	else if (!strcmp(case_name, "cbnest"))
		ret = case_cbnest(mode);
	else if (!strcmp(case_name, "colltimeout"))
		ret = case_colltimeout(forever);
	else if (!strcmp(case_name, "rcache"))
		ret = case_rcache();
	else if (!strcmp(case_name, "fence"))
		ret = case_fence();
	else if ((!strcmp(case_name, "linkcut") ||
		  !strcmp(case_name, "foload")) && !strcmp(how, "rxe")) {
		FAIL("%s: --how rxe only with failover", case_name);
		ret = 1;
	}
	else if (!strcmp(case_name, "linkcut"))
		ret = case_linkcut(how);
	else if (!strcmp(case_name, "stall"))
		ret = case_stall();
	else if (!strcmp(case_name, "blip"))
		ret = case_blip();
	else if (!strcmp(case_name, "failover"))
		ret = case_failover(how, cuts);
	else if (!strcmp(case_name, "foload"))
		ret = case_foload(how, load);
	else if (!strcmp(case_name, "fopair"))
		ret = case_fopair();
	else if (!strcmp(case_name, "errors"))
		ret = case_errors();
	else if (!strcmp(case_name, "threads"))
		ret = case_threads();
	else if (!strcmp(case_name, "timeout"))
		ret = case_timeout(allow_io);
	else if (!strcmp(case_name, "killed"))
		ret = case_killed(victim);
	else if (!strcmp(case_name, "regcache"))
		ret = case_regcache();
	else if (!strcmp(case_name, "coll"))
		ret = case_coll();
	else if (!strcmp(case_name, "colltails"))
		ret = case_colltails();
	else if (!strcmp(case_name, "qos"))
		ret = case_qos();
	else {
		fprintf(stderr, "hcomm_vm_test: unknown case %s\n", case_name);
		return 2;
	}
	if (fails || ret) {
		out("%s: %d failure(s)", case_name, fails);
		return 1;
	}
	out("%s: passed", case_name);
	return 0;
}
