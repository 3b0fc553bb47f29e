/* SPDX-License-Identifier: MIT */
/*
 * The collectives (hcomm_allreduce, hcomm_reduce_scatter, hcomm_broadcast,
 * hcomm_reduce) against references computed here: 1 to 4 forked ranks
 * (HCOMM_TRANSPORT=tcp on 127.0.0.1 unless HCOMM_TEST_TRANSPORT names
 * another, e.g. kernel in a VM), every type and operation, counts from 0
 * to several chunks (HCOMM_COLL_CHUNK=4096, 2 slots, so the slots wrap
 * many times), in place and out of place, every root; bad arguments
 * (which leave the ring usable); and a rank that exits in the middle
 * (the others fail, none hangs, every later collective fails at once).
 *
 * The values and references are tests/coll_check.h's (shared with the VM
 * test's case "coll"): results must match bit for bit.
 *
 * Each rank records its checks in shared memory; the parent prints one
 * TAP line per group of checks with how many ranks passed it.
 *
 *   test_coll [WORLD...]   only the worlds whose name contains a WORLD
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/mount.h>
#include <sys/wait.h>

#include "hcomm.h"
#include "tap.h"

#define MAX_RANKS	4
#define MAX_CHECKS	16384
#define RANK_ALARM	300

struct check {
	char what[200];
	int pass, fail;		/* ranks */
};

static struct shared {
	int arrived[MAX_RANKS];
	int overflow;		/* a check past MAX_CHECKS (not recorded) */
	int nchecks;
	struct check c[MAX_CHECKS];
} *sh;

static int me, np;
static struct hcomm_comm *comm;

/* Record one check of this rank (same order on every rank). */
static int nth;

static __attribute__((format(printf, 2, 3)))
void check(int cond, const char *fmt, ...)
{
	struct check *c;
	va_list ap;
	int i = nth++;

	if (i >= MAX_CHECKS) {
		__atomic_store_n(&sh->overflow, 1, __ATOMIC_RELAXED);
		return;
	}
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
			hcomm_errmsg());
	}
	{
		int seen = __atomic_load_n(&sh->nchecks, __ATOMIC_RELAXED);

		while (seen < nth &&
		       !__atomic_compare_exchange_n(&sh->nchecks, &seen, nth,
						    0, __ATOMIC_RELAXED,
						    __ATOMIC_RELAXED))
			;
	}
}

#define COLL_CHECK(cond, ...)	check(cond, __VA_ARGS__)
#include "coll_check.h"

/*
 * The last rank exits in the middle of a stream of allreduces: the
 * others fail (no hang), and every later collective fails at once.
 */
static void t_death(void)
{
	size_t n = 50000;
	float *a = calloc(n, sizeof(*a)), *b = calloc(n, sizeof(*b));
	int i, ret = 0;

	for (i = 0; i < 1000 && !ret; i++) {
		if (me == np - 1 && i == 3)
			_exit(0);
		ret = hcomm_allreduce(comm, a, b, n, HCOMM_FP32, HCOMM_SUM);
	}
	check(ret < 0, "rank %d exits during allreduce %d: the others fail "
	      "(%d: %s)", np - 1, 3, ret, hcomm_errmsg());
	ret = hcomm_allreduce(comm, a, b, 4, HCOMM_FP32, HCOMM_SUM);
	check(ret == -HCOMM_ERR_IO, "the next allreduce fails at once with "
	      "HCOMM_ERR_IO (%d)", ret);
	free(a);
	free(b);
}

/* ------------------------------------------------------------------ */
/* ranks                                                               */
/* ------------------------------------------------------------------ */

typedef void (*test_fn)(void);

static void t_compress(void)
{
	coll_t_compress();
}

static void t_tails(void)
{
	coll_t_tails();
	coll_t_probe();
}

static void t_ring(void)
{
	setenv("HCOMM_ALGO", "ring", 1);
	coll_t_allreduce();
}

static void t_rd(void)
{
	setenv("HCOMM_ALGO", "rd", 1);
	coll_t_allreduce();
}

/* 64 MiB and an odd count: int32 sums, exact, in place and not. */
static void t_big(void)
{
	size_t n = (64u << 20) / 4 + 43, i, bad = 0;
	int32_t *a = malloc(n * 4), *b = malloc(n * 4);
	int ret, inplace;

	for (inplace = 0; inplace < 2; inplace++) {
		for (i = 0; i < n; i++)
			a[i] = (int32_t)(i * 2654435761u) + me;
		ret = hcomm_allreduce(comm, a, inplace ? a : b, n,
				      HCOMM_INT32, HCOMM_SUM);
		for (i = 0, bad = 0; i < n; i++)
			bad += (inplace ? a : b)[i] !=
			       (int32_t)((uint32_t)(int32_t)(i * 2654435761u) *
					 (uint32_t)np + (uint32_t)(np * (np - 1) /
								   2));
		check(!ret && !bad, "allreduce %d ranks int32 sum of %zu "
		      "elements (64 MiB + 172 bytes) %s: ret %d, %zu wrong", np,
		      n, inplace ? "in place" : "out of place", ret, bad);
	}
	free(a);
	free(b);
}

static long minflt(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

/*
 * The collectives' scratch (the fp16 wire copy, reduce_scatter's sums)
 * is kept between calls: after the first call of a size, more calls of
 * it fault no pages in.  A fresh mapping of 32 MiB per call (what
 * malloc gives at that size) faults 8192 pages of 4 KiB each time.
 */
static void t_scratch(void)
{
	size_t n = (64u << 20) / 4 + 512, per = (32u << 20) / 4 / (size_t)np +
		   256, i, bad;
	float *a = malloc(n * 4), *b = malloc(n * 4);
	long f0, faults;
	int ret, k;

	if (!a || !b) {
		check(0, "scratch: no memory for the test's buffers");
		free(a);
		free(b);
		return;
	}
	for (i = 0; i < n; i++)
		a[i] = (float)((i + (size_t)me) % 7);
	memset(b, 0, n * 4);
	ret = hcomm_comm_set_fp16_compress(comm, 1, 0);
	if (!ret)
		ret = hcomm_allreduce(comm, a, b, n, HCOMM_FP32, HCOMM_SUM);
	f0 = minflt();
	for (k = 0; k < 3 && !ret; k++)
		ret = hcomm_allreduce(comm, a, b, n, HCOMM_FP32, HCOMM_SUM);
	faults = minflt() - f0;
	for (i = 0, bad = 0; i < n; i++) {
		float w = 0;
		int r;

		for (r = 0; r < np; r++)
			w += (float)((i + (size_t)r) % 7);
		bad += b[i] != w;	/* small integers: exact in fp16 */
	}
	check(!ret && !bad && faults < 256, "scratch kept: 3 fp16-compressed "
	      "allreduces of %zu floats after the first: ret %d, %zu wrong, "
	      "%ld page faults (fewer than 256)", n, ret, bad, faults);
	(void)hcomm_comm_set_fp16_compress(comm, 0, 0);
	ret = hcomm_reduce_scatter(comm, a, b, per, HCOMM_FP32, HCOMM_SUM);
	f0 = minflt();
	for (k = 0; k < 3 && !ret; k++)
		ret = hcomm_reduce_scatter(comm, a, b, per, HCOMM_FP32,
					   HCOMM_SUM);
	faults = minflt() - f0;
	for (i = 0, bad = 0; i < per; i++) {
		size_t j = (size_t)me * per + i;
		float w = 0;
		int r;

		for (r = 0; r < np; r++)
			w += (float)((j + (size_t)r) % 7);
		bad += b[i] != w;
	}
	check(!ret && !bad && faults < 256, "scratch kept: 3 reduce_scatters "
	      "of %zu floats per rank after the first: ret %d, %zu wrong, "
	      "%ld page faults (fewer than 256)", per, ret, bad, faults);
	free(a);
	free(b);
}

static void t_hd(void)
{
	setenv("HCOMM_ALGO", "hd", 1);
	coll_t_allreduce();
}

/* auto picks the hierarchical allreduce (its HCOMM_LOG line says so) */
static void t_hier(void)
{
	char path[] = "/tmp/hcomm-coll-log.XXXXXX", line[512];
	int fd = mkstemp(path), save = dup(2), hier = 0;
	FILE *f;

	setenv("HCOMM_LOG", "1", 1);
	if (fd >= 0)
		dup2(fd, 2);
	coll_t_allreduce();
	dup2(save, 2);
	close(save);
	f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (f) {
		rewind(f);
		while (fgets(line, sizeof(line), f))
			hier |= strstr(line, ": hierarchical") != NULL;
		fclose(f);
	}
	unlink(path);
	check(me != 0 || hier, "allreduce %d ranks over 2 hosts: auto chose "
	      "the hierarchical algorithm", np);
}

/*
 * Ranks n/2 .. n-1 of a world pretend to be on a second host: a mount
 * namespace each, with the same directory bound on /dev/shm, gives them
 * another host nonce than the others, so the bootstrap sees two hosts.
 * Root only: 1 when done.
 */
static int split_hosts;
static char host2[64];

static int second_host(void)
{
	if (unshare(CLONE_NEWNS) ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount(host2, "/dev/shm", NULL, MS_BIND, NULL))
		return 0;
	return 1;
}

static void t_nb(void)
{
	coll_t_allgather();
	coll_t_nb();
}

/*
 * The barrier really waits: before barrier i every rank writes i into
 * its slot of the shared page after a random delay; after it every slot
 * reads at least i.
 */
static void t_barrier(void)
{
	int i, r, early = 0, ret = 0;

	srand((unsigned int)(me * 7919 + 1));
	for (i = 1; i <= 40 && !ret; i++) {
		usleep((useconds_t)(rand() % 3000));
		__atomic_store_n(&sh->arrived[me], i, __ATOMIC_RELEASE);
		ret = hcomm_barrier(comm);
		for (r = 0; r < np; r++)
			if (__atomic_load_n(&sh->arrived[r], __ATOMIC_ACQUIRE) < i)
				early++;
	}
	check(!ret && !early, "barrier %d ranks: 40 barriers with random "
	      "delays, none returned before every rank entered (%d early, "
	      "ret %d)", np, early, ret);
}

/*
 * The last rank exits with non-blocking collectives queued: the others'
 * requests complete with an error (no hang), and later ones too.
 */
static void t_nb_death(void)
{
	size_t n = 50000;
	float *a = calloc(n, sizeof(*a)), *b = calloc(n, sizeof(*b));
	struct hcomm_request req[16];
	int i, bad = 0, failed = 0;

	/* the ring is set up; then the last rank goes */
	if (hcomm_allreduce(comm, a, b, 1, HCOMM_FP32, HCOMM_SUM))
		bad = 100;
	if (me == np - 1) {
		usleep(200000);
		_exit(0);
	}
	memset(req, 0, sizeof(req));
	for (i = 0; i < 16; i++)
		if (hcomm_allreduce_nb(comm, a, b, n, HCOMM_FP32, HCOMM_SUM,
				       &req[i]))
			bad++;
	for (i = 0; i < 16; i++)
		if (hcomm_wait(&req[i]) < 0)
			failed++;
	check(!bad && failed == 16 && req[0].status < 0 &&
	      req[15].status == -HCOMM_ERR_IO, "rank %d exits with 16 "
	      "non-blocking allreduces queued: every one fails (%d of 16, "
	      "the first %d, the last %d)", np - 1, failed, req[0].status,
	      req[15].status);
	free(a);
	free(b);
}

static int rank_main(test_fn fn, int death)
{
	int ret = hcomm_comm_init(&comm, NULL);

	if (ret) {
		fprintf(stderr, "rank %d: hcomm_comm_init: %s\n", me,
			hcomm_errmsg());
		return 1;
	}
	fn();
	ret = hcomm_comm_destroy(comm);
	if (!death && ret) {
		fprintf(stderr, "rank %d: hcomm_comm_destroy: %s\n", me,
			hcomm_errmsg());
		return 1;
	}
	return 0;
}

/* With arguments: only the worlds whose name contains one of them. */
static int nargs;
static char **args;

static int wanted(const char *name)
{
	int i;

	for (i = 0; i < nargs; i++)
		if (strstr(name, args[i]))
			return 1;
	return !nargs;
}

/*
 * A check's group: its first four words ("allreduce 3 ranks fp16"), when
 * it starts with a collective's name and a rank count; else itself.
 */
static int group_len(const char *w)
{
	int words = 0, i;

	if (!strchr(w, ' ') || strchr(w, ',') < strchr(w, ' '))
		return (int)strlen(w);
	for (i = 0; w[i]; i++)
		if (w[i] == ' ' && ++words == 4)
			return i;
	return i;
}

static int same_group(const struct check *a, const struct check *b)
{
	int n = group_len(a->what);

	return n < (int)strlen(a->what) && n == group_len(b->what) &&
	       !strncmp(a->what, b->what, (size_t)n);
}

/* Run fn on n forked ranks; the checks are recorded from sh->nchecks on. */
static void world(const char *name, int n, test_fn fn, int death)
{
	const char *xp = getenv("HCOMM_TEST_TRANSPORT");
	char root[64], v[16];
	pid_t pid[MAX_RANKS];
	int r, st, bad = 0, first = sh->nchecks, i, j, skipped;

	if (!wanted(name))
		return;

	snprintf(root, sizeof(root), "hcomm-coll-test-%d-%s-%d",
		 (int)getpid(), name, n);
	snprintf(host2, sizeof(host2), "/tmp/hcomm-coll-host2.XXXXXX");
	if (split_hosts && !mkdtemp(host2))
		host2[0] = 0;
	for (r = 0; r < n; r++) {
		fflush(stdout);
		pid[r] = fork();
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
		setenv("HCOMM_TRANSPORT", xp ? xp : "tcp", 1);
		if (fn == t_tails || fn == t_big) {	/* the defaults */
			unsetenv("HCOMM_COLL_CHUNK");
			unsetenv("HCOMM_COLL_SLOTS");
			setenv("HCOMM_NUM_QPS", "4", 1);
		} else {
			setenv("HCOMM_COLL_CHUNK", "4096", 1);
			setenv("HCOMM_COLL_SLOTS", "2", 1);
		}
		if (death)
			setenv("HCOMM_COLL_TIMEOUT_MS", "20000", 1);
		if (split_hosts && r >= n / 2 && !second_host())
			_exit(77);
		if (fn == t_compress) {
			setenv("HCOMM_FP16_COMPRESS", "1", 1);
			setenv("HCOMM_COMP_THRESHOLD", "4096", 1);
		}
		st = rank_main(fn, death);
		leak_check();
		_exit(st);
	}
	for (r = 0, skipped = 0; r < n; r++) {
		while (waitpid(pid[r], &st, 0) < 0 && errno == EINTR)
			;
		if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
			skipped++;
		else if (!WIFEXITED(st) || WEXITSTATUS(st))
			bad++;
	}
	if (split_hosts && host2[0]) {
		char nonce[128];

		snprintf(nonce, sizeof(nonce), "%s/hcomm-host-nonce", host2);
		unlink(nonce);
		rmdir(host2);
	}
	if (skipped) {
		ok(1, "%s, %d ranks # SKIP no second host (a mount namespace "
		   "for /dev/shm needs root)", name, n);
		return;
	}
	for (i = first; i < sh->nchecks; i = j) {
		int bad_at = -1, nrank = sh->c[i].pass + sh->c[i].fail;

		/* one line per group: the checks whose text starts alike */
		j = i;
		do {
			if (bad_at < 0 && (sh->c[j].fail || !sh->c[j].pass))
				bad_at = j;
			j++;
		} while (j < sh->nchecks && same_group(&sh->c[i], &sh->c[j]));
		if (bad_at >= 0)
			ok(0, "%.*s: %d checks, the first wrong: %s (%d of %d "
			   "ranks)", group_len(sh->c[i].what), sh->c[i].what,
			   j - i, sh->c[bad_at].what, sh->c[bad_at].pass,
			   sh->c[bad_at].pass + sh->c[bad_at].fail);
		else if (j - i > 1)
			ok(1, "%.*s: %d checks right on each of %d ranks",
			   group_len(sh->c[i].what), sh->c[i].what, j - i,
			   nrank);
		else
			ok(1, "%s (%d ranks)", sh->c[i].what, nrank);
	}
	ok(!bad, "%s, %d ranks: every rank exited 0 (%d did not)", name, n,
	   bad);
}

int main(int argc, char **argv)
{
	int n;

	nargs = argc - 1;
	args = argv + 1;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	for (n = 1; n <= MAX_RANKS; n++)
		world("allreduce", n, coll_t_allreduce, 0);
	for (n = 2; n <= MAX_RANKS; n += 1)
		world("reduce_scatter", n, coll_t_reduce_scatter, 0);
	for (n = 1; n <= MAX_RANKS; n++)
		world("broadcast and reduce", n, coll_t_rooted, 0);
	for (n = 1; n <= MAX_RANKS; n++)
		world("fp16 compression", n, t_compress, 0);
	for (n = 2; n <= MAX_RANKS; n++)
		world("default chunks over 4 lanes", n, t_tails, 0);
	world("allreduce of 64 MiB", 3, t_big, 0);
	world("scratch kept between collectives", 2, t_scratch, 0);
	for (n = 2; n <= MAX_RANKS; n++)
		world("allreduce, ring forced", n, t_ring, 0);
	for (n = 2; n <= MAX_RANKS; n++)
		world("allreduce, recursive doubling forced", n, t_rd, 0);
	for (n = 2; n <= MAX_RANKS; n++)
		world("allreduce, halving-doubling forced", n, t_hd, 0);
	split_hosts = 1;
	world("allreduce, hierarchical over 2 hosts", 4, t_hier, 0);
	world("allreduce, hierarchical over 2 hosts", 3, t_hier, 0);
	split_hosts = 0;
	for (n = 1; n <= MAX_RANKS; n++)
		world("alltoall", n, coll_t_alltoall, 0);
	for (n = 1; n <= MAX_RANKS; n++)
		world("allgather and non-blocking", n, t_nb, 0);
	for (n = 2; n <= MAX_RANKS; n++)
		world("barrier", n, t_barrier, 0);
	world("bad arguments", 3, coll_t_errors, 0);
	world("a rank exits", 3, t_death, 1);
	world("a rank exits, non-blocking", 3, t_nb_death, 1);
	ok(!sh->overflow, "every check was recorded (at most %d: MAX_CHECKS)",
	   MAX_CHECKS);
	return tap_done(getenv("HCOMM_COLL_TAP_NAME") ?
			getenv("HCOMM_COLL_TAP_NAME") : "coll");
}
