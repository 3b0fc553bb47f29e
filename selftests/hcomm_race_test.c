// SPDX-License-Identifier: GPL-2.0
/*
 * Races and lifetimes of the operations that park in the module (DB_WAIT,
 * FENCE, engine transfers) and of the context itself:
 *
 *   parked_stress          many DB_WAIT, DB_WAIT_ANY and FENCE waiters
 *                          (ioctl threads and io_uring rings on one
 *                          context) with short timeouts on one doorbell
 *                          (DB_WAIT_ANY: it and others nobody signals,
 *                          in any order), a thread signalling
 *                          it, signals to the ioctl waiters and CANCEL_ALL,
 *                          for HCOMM_STRESS_SECS (default 4) seconds: every
 *                          operation ends exactly once (one CQE per SQE,
 *                          a result from the documented set), the gauges
 *                          come back to zero, nothing in the kernel log.
 *   mmap_vs_first_park     the first doorbell mmap of a context racing its
 *                          first parked io_uring command (an ABBA deadlock
 *                          between mmap_lock and the doorbell mutex on
 *                          kernels without IO_URING_F_CANCEL).
 *   ring_close_parked      closing a ring with a DB_WAIT and a
 *                          DB_WAIT_ANY parked (no timeout) ends both
 *                          promptly.
 *   exec_parked            exec() with a DB_WAIT parked on a ring completes.
 *   infinite_timeout_signals  DB_WAIT with timeout_ns = 2^64-1 never ends
 *                          with ETIME: signals with SA_RESTART are
 *                          transparent, without it give EINTR.
 *   uring_reg_not_inline   a long REG_MEM on a ring does not hold up the
 *                          commands submitted after it in the same call.
 *   revoke_barrier_*       DEREG, or a GRANT back to NONE, while another
 *                          process's 256 MiB XFER writes into the region:
 *                          once the call returns the region's bytes no
 *                          longer change, and that XFER ends with ENOENT
 *                          or EACCES.
 *   nocache_generation     a HCOMM_REG_NOCACHE region's generation slot
 *                          changes when its range is unmapped, as the
 *                          uapi promises for every region.
 *   max_inline_param       max_inline raised to 1 MiB at run time through
 *                          the module parameter still gives new contexts
 *                          at most the documented 64 KiB cap.
 *   other_process_eperm    a fork() child and a process that received the
 *                          fd over SCM_RIGHTS get EPERM for every command
 *                          (each with an argument valid for the opener),
 *                          and the opener's regions are untouched.
 *
 * The kernel log is checked by the VM runner (scripts/vm-run.sh): a
 * refcount, KASAN, lockdep or hung-task report fails the whole run.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/socket.h>

#include "kselftest_harness.h"
#include "hcomm_util.h"
#include "hcomm_xfer.h"

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 180

#define ULL(x)		((unsigned long long)(x))
#define SETTLE_MS	30000

/*
 * The debug kernel (kmemleak in debugfs) copies several times more slowly
 * under KASAN and lockdep: smaller sizes and fewer rounds prove the same
 * there (lockdep needs each lock order once, not a lost race).
 */
static bool debug_kernel(void)
{
	return access("/sys/kernel/debug/kmemleak", F_OK) == 0;
}

static int stress_secs(void)
{
	const char *s = getenv("HCOMM_STRESS_SECS");
	int v = s ? atoi(s) : 4;

	return v > 0 && v < 600 ? v : 4;
}

static void on_usr1(int sig)
{
	(void)sig;
}

static void set_usr1(bool restart)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
}

/* Register @len bytes at @p with every access: the key, or 0. */
static uint64_t reg_key(int fd, void *p, size_t len)
{
	struct hcomm_reg_mem r;

	if (hx_reg(fd, NULL, p, len, HCOMM_ACCESS_ALL, HCOMM_REG_NOCACHE, &r))
		return 0;
	return r.key;
}

/* ------------------------------------------------------------------ */
/* parked_stress                                                       */
/* ------------------------------------------------------------------ */

#define NR_IOCTL_WAITERS	4
#define NR_RINGS		2
#define RING_BATCH		16

struct stress {
	int fd;
	uint64_t *db;
	uint64_t src_key, dst_key;
	volatile int stop;
	pthread_t ioctl_th[NR_IOCTL_WAITERS];
	/* results */
	uint64_t ok, etime, ecanceled, eintr, bad, fences;
	uint64_t dup_cqe, lost_cqe;
	int bad_res;
	char err[128];
};

static pthread_mutex_t stress_lock = PTHREAD_MUTEX_INITIALIZER;

static void stress_count(struct stress *st, int res, bool fence)
{
	pthread_mutex_lock(&stress_lock);
	if (fence && (res == 0 || res == -ECANCELED))
		st->fences++;
	else if (res == 0)
		st->ok++;
	else if (res == -ETIME)
		st->etime++;
	else if (res == -ECANCELED)
		st->ecanceled++;
	else if (res == -EINTR)
		st->eintr++;
	else {
		st->bad++;
		st->bad_res = res;
	}
	pthread_mutex_unlock(&stress_lock);
}

static unsigned int rnd(unsigned int *seed, unsigned int n)
{
	*seed = *seed * 1103515245u + 12345u;
	return (*seed >> 8) % n;
}

/*
 * A DB_WAIT_ANY for doorbell 0 >= @want among 1 .. 3 others that nobody
 * signals (doorbells 1 .. 3 >= 1), 0 at a random place; @t as DB_WAIT.
 */
static void stress_any_init(struct hcomm_db_wait_any *a, unsigned int *seed,
			    uint64_t want, uint64_t t)
{
	unsigned int i, at;

	memset(a, 0, sizeof(*a));
	a->count = 2 + rnd(seed, HCOMM_DB_WAIT_ANY_MAX - 1);
	at = rnd(seed, a->count);
	for (i = 0; i < a->count; i++) {
		a->index[i] = i == at ? 0 : 1 + rnd(seed, 3);
		a->value[i] = i == at ? want : 1;
	}
	a->tag = 7;
	a->timeout_ns = t;
}

static void *stress_ioctl_waiter(void *p)
{
	struct stress *st = p;
	unsigned int seed = (unsigned int)(uintptr_t)pthread_self();
	struct hcomm_db_wait_any a;
	struct hcomm_db_wait w;
	unsigned int kind;

	while (!st->stop) {
		uint64_t want = hx_db_load(st->db, 0) + 1 + rnd(&seed, 3);
		/* 0.05 .. 3 ms: about a jiffy, so timeouts race the rest */
		uint64_t t = 50000 + rnd(&seed, 3000000);

		hx_db_wait_init(&w, 0, want, 7, t);
		kind = rnd(&seed, 8);
		if (kind < 3) {
			stress_any_init(&a, &seed, want, t);
			stress_count(st, ioctl(st->fd, HCOMM_CMD_DB_WAIT_ANY,
					       &a) ? -errno : 0, false);
			continue;
		}
		if (kind == 3) {
			struct hcomm_fence f;

			memset(&f, 0, sizeof(f));
			f.tag = 7;
			stress_count(st, ioctl(st->fd, HCOMM_CMD_FENCE, &f) ?
					 -errno : 0, true);
			continue;
		}
		stress_count(st, ioctl(st->fd, HCOMM_CMD_DB_WAIT, &w) ?
				 -errno : 0, false);
	}
	return NULL;
}

static void *stress_ring_waiter(void *p)
{
	struct stress *st = p;
	unsigned int seed = (unsigned int)(uintptr_t)pthread_self() ^ 0x5a5a;
	struct hcomm_db_wait w[RING_BATCH];
	struct hcomm_db_wait_any a[RING_BATCH];
	struct hcomm_fence f;
	bool out[RING_BATCH + 1];
	struct io_uring ring;
	int i, n;

	if (io_uring_queue_init(64, &ring, 0)) {
		snprintf(st->err, sizeof(st->err), "io_uring_queue_init");
		return NULL;
	}
	memset(&f, 0, sizeof(f));
	f.tag = 7;
	while (!st->stop) {
		int pending = 0;

		for (i = 0; i < RING_BATCH; i++) {
			uint64_t want = hx_db_load(st->db, 0) + 1 + rnd(&seed, 3);
			/* a few without a timeout: only signals or CANCEL end them */
			uint64_t t = rnd(&seed, 6) ? 50000 + rnd(&seed, 3000000) : 0;

			if (i % 3 == 1) {
				stress_any_init(&a[i], &seed, want, t);
				if (!hx_prep_cmd(&ring, st->fd,
						 HCOMM_CMD_DB_WAIT_ANY, &a[i], i))
					break;
			} else {
				hx_db_wait_init(&w[i], 0, want, 7, t);
				if (!hx_prep_cmd(&ring, st->fd,
						 HCOMM_CMD_DB_WAIT, &w[i], i))
					break;
			}
			out[i] = true;
			pending++;
		}
		n = i;
		if (hx_prep_cmd(&ring, st->fd, HCOMM_CMD_FENCE, &f, RING_BATCH)) {
			out[RING_BATCH] = true;
			pending++;
		}
		if (io_uring_submit(&ring) < 0)
			break;
		while (pending) {
			struct io_uring_cqe *cqe;
			struct __kernel_timespec ts = { .tv_sec = 20 };
			uint64_t ud;

			if (io_uring_wait_cqe_timeout(&ring, &cqe, &ts)) {
				/* CANCEL_ALL runs every millisecond: 20 s is lost */
				pthread_mutex_lock(&stress_lock);
				st->lost_cqe += pending;
				pthread_mutex_unlock(&stress_lock);
				st->stop = 1;
				goto out;
			}
			ud = cqe->user_data;
			if (ud > RING_BATCH || !out[ud]) {
				pthread_mutex_lock(&stress_lock);
				st->dup_cqe++;
				pthread_mutex_unlock(&stress_lock);
			} else {
				out[ud] = false;
				pending--;
				stress_count(st, cqe->res, ud == RING_BATCH);
			}
			io_uring_cqe_seen(&ring, cqe);
		}
		(void)n;
	}
out:
	io_uring_queue_exit(&ring);
	return NULL;
}

static void *stress_signaller(void *p)
{
	struct stress *st = p;
	struct hcomm_xfer x;
	unsigned int i = 0;

	while (!st->stop) {
		/* alternately a pure signal and a 64-byte copy that signals */
		hx_xfer_init(&x, st->src_key, 0, st->dst_key, 0,
			     (i++ & 1) ? 64 : 0, HCOMM_XFER_DB_ADD);
		x.db_index = 0;
		x.db_value = 1;
		if (ioctl(st->fd, HCOMM_CMD_XFER, &x) && errno != EINTR) {
			snprintf(st->err, sizeof(st->err), "signalling XFER: %s",
				 strerror(errno));
			st->stop = 1;
		}
		usleep(200);
	}
	return NULL;
}

static void *stress_killer(void *p)
{
	struct stress *st = p;
	struct hcomm_cancel c;
	unsigned int i = 0;

	while (!st->stop) {
		pthread_kill(st->ioctl_th[i++ % NR_IOCTL_WAITERS], SIGUSR1);
		if (!(i & 7)) {
			memset(&c, 0, sizeof(c));
			c.flags = HCOMM_CANCEL_ALL;
			ioctl(st->fd, HCOMM_CMD_CANCEL, &c);
		}
		usleep(100);
	}
	return NULL;
}

TEST(parked_stress)
{
	pthread_t rings[NR_RINGS], sig, kill;
	struct hcomm_stats s0, s1;
	struct hcomm_info info;
	struct stress st;
	size_t dblen;
	void *buf;
	int i, ret;

	memset(&st, 0, sizeof(st));
	set_usr1(false);
	ASSERT_STATS(s0);
	st.fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, st.fd);
	ASSERT_EQ(0, hc_info(st.fd, NULL, &info));
	dblen = hx_db_map_len(info.nr_doorbells);
	st.db = hx_db_map(st.fd, dblen);
	ASSERT_NE(NULL, st.db) TH_LOG("mmap doorbells: %s", strerror(errno));
	buf = map_anon(2 * PG);
	ASSERT_NE(NULL, buf);
	touch(buf, 2 * PG);
	st.src_key = reg_key(st.fd, buf, PG);
	st.dst_key = reg_key(st.fd, (char *)buf + PG, PG);
	ASSERT_NE(0, st.src_key);
	ASSERT_NE(0, st.dst_key);

	for (i = 0; i < NR_IOCTL_WAITERS; i++)
		ASSERT_EQ(0, pthread_create(&st.ioctl_th[i], NULL,
					    stress_ioctl_waiter, &st));
	for (i = 0; i < NR_RINGS; i++)
		ASSERT_EQ(0, pthread_create(&rings[i], NULL,
					    stress_ring_waiter, &st));
	ASSERT_EQ(0, pthread_create(&sig, NULL, stress_signaller, &st));
	ASSERT_EQ(0, pthread_create(&kill, NULL, stress_killer, &st));
	for (i = 0; i < stress_secs() * 10 && !st.stop; i++)
		usleep(100000);
	st.stop = 1;
	pthread_join(kill, NULL);
	pthread_join(sig, NULL);
	/* wake anyone still parked without a timeout */
	for (i = 0; i < 3; i++) {
		struct hcomm_cancel c = { .flags = HCOMM_CANCEL_ALL };

		ioctl(st.fd, HCOMM_CMD_CANCEL, &c);
		usleep(100000);
	}
	for (i = 0; i < NR_RINGS; i++)
		pthread_join(rings[i], NULL);
	for (i = 0; i < NR_IOCTL_WAITERS; i++) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 30;
		ret = pthread_timedjoin_np(st.ioctl_th[i], NULL, &ts);
		ASSERT_EQ(0, ret) TH_LOG("ioctl waiter %d never returned", i);
	}
	TH_LOG("ended: %llu ok, %llu ETIME, %llu ECANCELED, %llu EINTR, "
	       "%llu fences; signals %llu",
	       ULL(st.ok), ULL(st.etime), ULL(st.ecanceled), ULL(st.eintr),
	       ULL(st.fences), ULL(hx_db_load(st.db, 0)));
	ASSERT_EQ(0, st.err[0]) TH_LOG("%s", st.err);
	ASSERT_EQ(0, st.bad) TH_LOG("%llu results outside {0, ETIME, "
				    "ECANCELED, EINTR}, e.g. %d",
				    ULL(st.bad), st.bad_res);
	ASSERT_EQ(0, st.dup_cqe) TH_LOG("a CQE for an operation already "
					"completed (completed twice)");
	ASSERT_EQ(0, st.lost_cqe) TH_LOG("operations never completed");
	/* every way of ending was exercised, or the test proves little */
	ASSERT_LT(0, st.ok);
	ASSERT_LT(0, st.etime);
	ASSERT_LT(0, st.ecanceled);

	ASSERT_EQ(0, munmap(st.db, dblen));
	ASSERT_EQ(0, close(st.fd));
	munmap(buf, 2 * PG);
	ret = hcomm_gauges_wait(&s0, &s1, SETTLE_MS);
	if (ret)
		hcomm_gauges_dump(stderr, "after close", &s0, &s1);
	ASSERT_EQ(0, ret) TH_LOG("gauges not back to where they were");
}

/* ------------------------------------------------------------------ */
/* mmap_vs_first_park                                                  */
/* ------------------------------------------------------------------ */

struct race2 {
	int fd;
	size_t dblen;
	struct io_uring ring;
	pthread_barrier_t go;
	int mmap_err, wait_res;
};

static void *race2_mmap(void *p)
{
	struct race2 *r = p;
	void *db;

	pthread_barrier_wait(&r->go);
	db = hx_db_map(r->fd, r->dblen);
	r->mmap_err = db ? 0 : errno;
	if (db)
		munmap(db, r->dblen);
	return NULL;
}

static void *race2_park(void *p)
{
	struct race2 *r = p;
	struct hcomm_db_wait w;
	struct hx_cqe c;

	hx_db_wait_init(&w, 1, 1, 9, 2000000);	/* 2 ms */
	pthread_barrier_wait(&r->go);
	r->wait_res = hx_cmd(r->fd, &r->ring, HCOMM_CMD_DB_WAIT, &w, &c);
	return NULL;
}

TEST(mmap_vs_first_park)
{
	struct hcomm_stats s0, s1;
	struct hcomm_info info;
	int i, ret;

	ASSERT_STATS(s0);
	for (i = 0; i < (debug_kernel() ? 40 : 200); i++) {
		struct race2 r;
		pthread_t a, b;
		struct timespec ts;

		memset(&r, 0, sizeof(r));
		r.fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, r.fd);
		ASSERT_EQ(0, hc_info(r.fd, NULL, &info));
		r.dblen = hx_db_map_len(info.nr_doorbells);
		ASSERT_EQ(0, io_uring_queue_init(8, &r.ring, 0));
		pthread_barrier_init(&r.go, NULL, 2);
		ASSERT_EQ(0, pthread_create(&a, NULL, race2_mmap, &r));
		ASSERT_EQ(0, pthread_create(&b, NULL, race2_park, &r));
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 30;
		ret = pthread_timedjoin_np(a, NULL, &ts);
		ASSERT_EQ(0, ret) TH_LOG("round %d: the first mmap of the "
					 "doorbells never returned "
					 "(deadlock)", i);
		ret = pthread_timedjoin_np(b, NULL, &ts);
		ASSERT_EQ(0, ret) TH_LOG("round %d: the first parked DB_WAIT "
					 "never completed (deadlock)", i);
		ASSERT_EQ(0, r.mmap_err) TH_LOG("mmap: %s",
						strerror(r.mmap_err));
		ASSERT_EQ(-ETIME, r.wait_res);
		io_uring_queue_exit(&r.ring);
		pthread_barrier_destroy(&r.go);
		ASSERT_EQ(0, close(r.fd));
	}
	ret = hcomm_gauges_wait(&s0, &s1, SETTLE_MS);
	ASSERT_EQ(0, ret) TH_LOG("gauges not back to where they were");
}

/* ------------------------------------------------------------------ */
/* ring_close_parked, exec_parked                                      */
/* ------------------------------------------------------------------ */

/* Park a DB_WAIT without timeout (and a FENCE-free ring) on @ring. */
static int park_forever(int fd, struct io_uring *ring, struct hcomm_db_wait *w)
{
	hx_db_wait_init(w, 2, 1, 11, 0);
	if (!hx_prep_cmd(ring, fd, HCOMM_CMD_DB_WAIT, w, 1))
		return -EBUSY;
	return io_uring_submit(ring) == 1 ? 0 : -EIO;
}

TEST(ring_close_parked)
{
	struct hcomm_stats s0, s1, s;
	struct hcomm_db_wait_any a;
	struct hcomm_db_wait w;
	struct io_uring ring;
	int fd, ret;

	ASSERT_STATS(s0);
	fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, io_uring_queue_init(8, &ring, 0));
	ASSERT_EQ(0, park_forever(fd, &ring, &w));
	/* and one on several doorbells: the context's other waiter list */
	memset(&a, 0, sizeof(a));
	a.count = 3;
	a.index[0] = 2;
	a.index[1] = 3;
	a.index[2] = 2;
	a.value[0] = 1;
	a.value[1] = 1;
	a.value[2] = 2;
	ASSERT_NE(NULL, hx_prep_cmd(&ring, fd, HCOMM_CMD_DB_WAIT_ANY, &a, 2));
	ASSERT_EQ(1, io_uring_submit(&ring));
	ret = hx_stat_wait(HX_STAT(waits_pending), s0.waits_pending + 2,
			   SETTLE_MS, &s);
	ASSERT_EQ(0, ret) TH_LOG("the DB_WAIT and the DB_WAIT_ANY did not "
				 "park (waits_pending %llu)",
				 ULL(s.waits_pending - s0.waits_pending));
	io_uring_queue_exit(&ring);
	/* The ring is gone: its wait must end, without closing @fd. */
	ret = hx_stat_wait(HX_STAT(waits_pending), s0.waits_pending,
			   10000, &s);
	ASSERT_EQ(0, ret) TH_LOG("a wait of a closed ring is still "
				 "pending 10 s later (waits_pending %llu)",
				 ULL(s.waits_pending));
	ASSERT_EQ(0, close(fd));
	ret = hcomm_gauges_wait(&s0, &s1, SETTLE_MS);
	if (ret)
		hcomm_gauges_dump(stderr, "after close", &s0, &s1);
	ASSERT_EQ(0, ret) TH_LOG("the context outlived its file and ring");
}

TEST(exec_parked)
{
	struct hcomm_stats s0, s1;
	int st, ret;
	pid_t pid;

	ASSERT_STATS(s0);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct hcomm_db_wait w;
		struct io_uring ring;
		int fd = open(HCOMM_DEV, O_RDWR);	/* inherited by exec */

		if (fd < 0 || io_uring_queue_init(8, &ring, 0) ||
		    park_forever(fd, &ring, &w))
			_exit(3);
		usleep(100000);
		execl("/bin/true", "true", (char *)NULL);
		_exit(4);
	}
	ret = hx_wait_child(pid, 30000, &st);
	if (ret) {
		kill(pid, SIGKILL);
		hx_wait_child(pid, 5000, &st);
	}
	ASSERT_EQ(0, ret) TH_LOG("exec() with a parked io_uring DB_WAIT did "
				 "not finish within 30 s");
	ASSERT_TRUE(WIFEXITED(st));
	ASSERT_EQ(0, WEXITSTATUS(st)) TH_LOG("child: exit %d (3: setup, "
					     "4: exec)", WEXITSTATUS(st));
	ret = hcomm_gauges_wait(&s0, &s1, SETTLE_MS);
	if (ret)
		hcomm_gauges_dump(stderr, "after exit", &s0, &s1);
	ASSERT_EQ(0, ret) TH_LOG("the child's context or wait was not "
				 "released");
}

/* ------------------------------------------------------------------ */
/* infinite_timeout_signals                                            */
/* ------------------------------------------------------------------ */

struct inf {
	int fd;
	int ret;
	volatile int started;
	struct hcomm_db_wait w;
};

static void *inf_waiter(void *p)
{
	struct inf *in = p;

	in->started = 1;
	in->ret = ioctl(in->fd, HCOMM_CMD_DB_WAIT, &in->w) ? -errno : 0;
	return NULL;
}

TEST(infinite_timeout_signals)
{
	struct hcomm_stats s0, s;
	struct hcomm_xfer x;
	struct inf in;
	pthread_t th;
	void *buf;
	uint64_t k1, k2;
	int i, ret;

	ASSERT_STATS(s0);
	memset(&in, 0, sizeof(in));
	in.fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, in.fd);
	buf = map_anon(2 * PG);
	ASSERT_NE(NULL, buf);
	touch(buf, 2 * PG);
	k1 = reg_key(in.fd, buf, PG);
	k2 = reg_key(in.fd, (char *)buf + PG, PG);
	ASSERT_NE(0, k1);
	ASSERT_NE(0, k2);

	/* SA_RESTART: the wait goes on, transparently, through signals */
	set_usr1(true);
	hx_db_wait_init(&in.w, 3, 1, 1, UINT64_MAX);
	ASSERT_EQ(0, pthread_create(&th, NULL, inf_waiter, &in));
	ret = hx_stat_wait(HX_STAT(waits_pending), s0.waits_pending + 1,
			   SETTLE_MS, &s);
	ASSERT_EQ(0, ret);
	for (i = 0; i < 20; i++) {
		pthread_kill(th, SIGUSR1);
		usleep(20000);
	}
	ASSERT_EQ(EBUSY, pthread_tryjoin_np(th, NULL))
		TH_LOG("DB_WAIT with timeout 2^64-1 ns returned %d (%s) after "
		       "SA_RESTART signals", in.ret, strerror(-in.ret));
	hx_xfer_init(&x, k1, 0, k2, 0, 0, HCOMM_XFER_DB_ADD);
	x.db_index = 3;
	x.db_value = 1;
	ASSERT_EQ(0, ioctl(in.fd, HCOMM_CMD_XFER, &x));
	ASSERT_EQ(0, pthread_join(th, NULL));
	ASSERT_EQ(0, in.ret) TH_LOG("%s", strerror(-in.ret));
	ASSERT_EQ(1, in.w.current_value);

	/* no SA_RESTART: EINTR, never ETIME */
	set_usr1(false);
	hx_db_wait_init(&in.w, 3, 2, 1, UINT64_MAX);
	ASSERT_EQ(0, pthread_create(&th, NULL, inf_waiter, &in));
	ret = hx_stat_wait(HX_STAT(waits_pending), s0.waits_pending + 1,
			   SETTLE_MS, &s);
	ASSERT_EQ(0, ret);
	pthread_kill(th, SIGUSR1);
	ASSERT_EQ(0, pthread_join(th, NULL));
	ASSERT_EQ(-EINTR, in.ret) TH_LOG("got %d (%s)", in.ret,
					 strerror(-in.ret));
	ASSERT_EQ(0, close(in.fd));
	munmap(buf, 2 * PG);
}

/* ------------------------------------------------------------------ */
/* uring_reg_not_inline                                                */
/* ------------------------------------------------------------------ */

/*
 * A REG_MEM of 256 MiB, then a GET_INFO, submitted in one call: the
 * GET_INFO completes first (the registration is punted to io-wq, so the
 * ring's submitter does not pin 65536 pages with the ring locked).
 */
TEST(uring_reg_not_inline)
{
	const size_t len = 256 * MiB;
	struct hcomm_reg_mem reg;
	struct hcomm_info info;
	struct hcomm_dereg d;
	struct io_uring ring;
	struct hx_cqe c[2];
	void *buf;
	int fd;

	fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	buf = map_anon(len);
	ASSERT_NE(NULL, buf);
	touch(buf, len);
	ASSERT_EQ(0, hx_ring_init(&ring, 8, 0));
	memset(&reg, 0, sizeof(reg));
	reg.addr = (uintptr_t)buf;
	reg.len = len;
	reg.access = HCOMM_ACCESS_ALL;
	reg.flags = HCOMM_REG_NOCACHE;
	memset(&info, 0, sizeof(info));
	ASSERT_NE(NULL, hx_prep_cmd(&ring, fd, HCOMM_CMD_REG_MEM, &reg, 1));
	ASSERT_NE(NULL, hx_prep_cmd(&ring, fd, HCOMM_CMD_GET_INFO, &info, 2));
	ASSERT_EQ(2, io_uring_submit(&ring));
	ASSERT_EQ(2, hx_reap(&ring, 2, 120000, c));
	ASSERT_EQ(0, c[0].res);
	ASSERT_EQ(0, c[1].res);
	ASSERT_EQ(2, c[0].user_data) TH_LOG("the REG_MEM completed before the "
					    "GET_INFO submitted after it: it "
					    "ran inline in the submission");
	ASSERT_NE(0, reg.key);
	memset(&d, 0, sizeof(d));
	d.region = reg.region;
	ASSERT_EQ(0, ioctl(fd, HCOMM_CMD_DEREG, &d));
	io_uring_queue_exit(&ring);
	ASSERT_EQ(0, close(fd));
	munmap(buf, len);
}

/* ------------------------------------------------------------------ */
/* other_process_eperm                                                 */
/* ------------------------------------------------------------------ */

/*
 * Every command on @fd, an fd of another process's context, with an
 * argument that would succeed for the opener: 0 when each one was EPERM,
 * else 100 + the command's number.
 */
static int try_every_command(int fd, uint32_t region, uint64_t key,
			     void *mem)
{
	union {
		struct hcomm_info info;
		struct hcomm_reg_mem reg;
		struct hcomm_dereg dereg;
		struct hcomm_query q;
		struct hcomm_xfer x;
		struct hcomm_cancel c;
		struct hcomm_fence f;
		struct hcomm_db_wait w;
		struct hcomm_grant g;
		struct hcomm_qos qos;
		struct hcomm_ctx_opts o;
	} a;
	static const unsigned int cmds[] = {
		HCOMM_CMD_GET_INFO, HCOMM_CMD_REG_MEM, HCOMM_CMD_QUERY,
		HCOMM_CMD_XFER, HCOMM_CMD_CANCEL, HCOMM_CMD_FENCE,
		HCOMM_CMD_DB_WAIT, HCOMM_CMD_GRANT, HCOMM_CMD_SET_QOS,
		HCOMM_CMD_SET_CTX, HCOMM_CMD_DEREG,
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(cmds); i++) {
		memset(&a, 0, sizeof(a));
		switch (cmds[i]) {
		case HCOMM_CMD_REG_MEM:
			a.reg.addr = (uintptr_t)mem;
			a.reg.len = PG;
			a.reg.access = HCOMM_ACCESS_ALL;
			break;
		case HCOMM_CMD_QUERY:
			a.q.region = region;
			break;
		case HCOMM_CMD_XFER:
			hx_xfer_init(&a.x, key, 0, key, 64, 64, 0);
			break;
		case HCOMM_CMD_CANCEL:
			a.c.flags = HCOMM_CANCEL_ALL;
			break;
		case HCOMM_CMD_DB_WAIT:
			hx_db_wait_init(&a.w, 0, 0, 0, 0);
			break;
		case HCOMM_CMD_GRANT:
			a.g.region = region;
			a.g.scope = HCOMM_GRANT_ANY;
			a.g.access = HCOMM_ACCESS_REMOTE_READ |
				     HCOMM_ACCESS_REMOTE_WRITE;
			break;
		case HCOMM_CMD_SET_QOS:
			a.qos.priority = 1;
			break;
		case HCOMM_CMD_SET_CTX:
			a.o.mask = HCOMM_CTX_MAX_INLINE;
			a.o.max_inline = 0;
			break;
		case HCOMM_CMD_DEREG:
			a.dereg.region = region;
			break;
		}
		if (ioctl(fd, cmds[i], &a) == 0 || errno != EPERM)
			return 100 + _IOC_NR(cmds[i]);
	}
	if (mmap(NULL, PG, PROT_READ, MAP_SHARED, fd,
		 HCOMM_MMAP_GENERATION) != MAP_FAILED || errno != EPERM)
		return 99;
	return 0;
}

static int send_fd(int sock, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct msghdr m = { 0 };
	struct iovec io = { .iov_base = "f", .iov_len = 1 };
	struct cmsghdr *c;

	memset(cbuf, 0, sizeof(cbuf));
	m.msg_iov = &io;
	m.msg_iovlen = 1;
	m.msg_control = cbuf;
	m.msg_controllen = sizeof(cbuf);
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &m, 0) == 1 ? 0 : -errno;
}

static int recv_fd(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int))], b;
	struct msghdr m = { 0 };
	struct iovec io = { .iov_base = &b, .iov_len = 1 };
	struct cmsghdr *c;
	int fd;

	m.msg_iov = &io;
	m.msg_iovlen = 1;
	m.msg_control = cbuf;
	m.msg_controllen = sizeof(cbuf);
	if (recvmsg(sock, &m, 0) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&m);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

TEST(other_process_eperm)
{
	struct hcomm_reg_mem reg;
	struct hcomm_query q;
	int fd, sv[2], st, pass;
	void *mem;
	pid_t pid;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	/* the receiver exists before the context: it never inherits it */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		void *m = map_anon(PG);
		int rfd;

		close(sv[0]);
		rfd = recv_fd(sv[1]);
		if (rfd < 0 || !m)
			_exit(2);
		/* region id and key come after the fd */
		{
			uint32_t region;
			uint64_t key;

			if (read(sv[1], &region, sizeof(region)) != sizeof(region) ||
			    read(sv[1], &key, sizeof(key)) != sizeof(key))
				_exit(3);
			_exit(try_every_command(rfd, region, key, m));
		}
	}
	close(sv[1]);
	fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	mem = map_anon(4 * PG);
	ASSERT_NE(NULL, mem);
	touch(mem, 4 * PG);
	ASSERT_EQ(0, hx_reg(fd, NULL, mem, PG, HCOMM_ACCESS_ALL, 0, &reg));

	for (pass = 0; pass < 2; pass++) {
		pid_t p = pid;

		if (pass == 0) {
			ASSERT_EQ(0, send_fd(sv[0], fd));
			ASSERT_EQ(sizeof(reg.region),
				  write(sv[0], &reg.region, sizeof(reg.region)));
			ASSERT_EQ(sizeof(reg.key),
				  write(sv[0], &reg.key, sizeof(reg.key)));
		} else {
			p = fork();
			ASSERT_LE(0, p);
			if (p == 0)
				_exit(try_every_command(fd, reg.region, reg.key,
							(char *)mem + PG));
		}
		ASSERT_EQ(0, hx_wait_child(p, 60000, &st));
		ASSERT_TRUE(WIFEXITED(st));
		ASSERT_EQ(0, WEXITSTATUS(st))
			TH_LOG("%s: command nr %d was not refused with EPERM "
			       "(99: mmap; 2, 3: setup)",
			       pass ? "fork() child" : "SCM_RIGHTS receiver",
			       WEXITSTATUS(st) - 100);
	}
	/* the opener's region is still there, with no grant */
	memset(&q, 0, sizeof(q));
	q.region = reg.region;
	ASSERT_EQ(0, ioctl(fd, HCOMM_CMD_QUERY, &q));
	ASSERT_EQ(reg.key, q.key);
	close(sv[0]);
	ASSERT_EQ(0, close(fd));
	munmap(mem, 4 * PG);
}

/* ------------------------------------------------------------------ */
/* nocache_generation                                                  */
/* ------------------------------------------------------------------ */

TEST(nocache_generation)
{
	struct hcomm_reg_mem reg;
	const uint64_t *gen;
	struct hcomm_dereg d;
	uint64_t g0;
	void *buf;
	int fd;

	fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	gen = mmap(NULL, PG, PROT_READ, MAP_SHARED, fd, HCOMM_MMAP_GENERATION);
	ASSERT_NE(MAP_FAILED, gen);
	buf = map_anon(4 * PG);
	ASSERT_NE(NULL, buf);
	touch(buf, 4 * PG);
	ASSERT_EQ(0, hx_reg(fd, NULL, buf, 4 * PG, HCOMM_ACCESS_ALL,
			    HCOMM_REG_NOCACHE, &reg));
	g0 = __atomic_load_n(&gen[reg.region % HCOMM_GEN_SLOTS],
			     __ATOMIC_ACQUIRE);
	ASSERT_EQ(reg.generation, g0);
	ASSERT_EQ(0, munmap(buf, 4 * PG));
	ASSERT_NE(g0, __atomic_load_n(&gen[reg.region % HCOMM_GEN_SLOTS],
				      __ATOMIC_ACQUIRE))
		TH_LOG("munmap of a NOCACHE region's range left its generation "
		       "slot unchanged");
	memset(&d, 0, sizeof(d));
	d.region = reg.region;
	ASSERT_EQ(0, ioctl(fd, HCOMM_CMD_DEREG, &d));
	munmap((void *)gen, PG);
	ASSERT_EQ(0, close(fd));
}

/* ------------------------------------------------------------------ */
/* revoke_barrier_dereg, revoke_barrier_grant                          */
/* ------------------------------------------------------------------ */

/* long enough that the revocation lands mid-transfer */
#define RB_LEN		(debug_kernel() ? 64 * MiB : 256 * MiB)

static uint64_t sum64(const void *p, size_t len)
{
	const uint64_t *q = p;
	uint64_t s = 0;
	size_t i;

	for (i = 0; i < len / 8; i++)
		s = s * 31 + q[i];
	return s;
}

/*
 * Child: its own context, a 256 MiB source of 0xab, one engine XFER into
 * @key; exits with 0 (complete), 1 (ENOENT), 2 (EACCES), 3 (other), 4
 * (setup).
 */
static int rb_child(uint64_t key)
{
	struct hcomm_reg_mem r;
	struct hcomm_xfer x;
	void *src = map_anon(RB_LEN);
	int fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);

	if (fd < 0 || !src)
		return 4;
	memset(src, 0xab, RB_LEN);
	if (hx_reg(fd, NULL, src, RB_LEN, HCOMM_ACCESS_ALL, 0, &r))
		return 4;
	hx_xfer_init(&x, r.key, 0, key, 0, RB_LEN, HCOMM_XFER_NO_INLINE);
	if (!ioctl(fd, HCOMM_CMD_XFER, &x))
		return 0;
	return errno == ENOENT ? 1 : errno == EACCES ? 2 : 3;
}

static void revoke_barrier(struct __test_metadata *_metadata, bool dereg)
{
	int attempt, st;

	for (attempt = 0; attempt < 5; attempt++) {
		struct hcomm_reg_mem reg;
		struct hcomm_grant g;
		struct hcomm_dereg d;
		volatile uint8_t *first;
		uint64_t c1, c2;
		int64_t end;
		uint8_t *buf;
		pid_t pid;
		int fd, ret;

		fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, fd);
		buf = map_anon(RB_LEN);
		ASSERT_NE(NULL, buf);
		memset(buf, 0, RB_LEN);
		ASSERT_EQ(0, hx_reg(fd, NULL, buf, RB_LEN, HCOMM_ACCESS_ALL,
				    HCOMM_REG_NOCACHE, &reg));
		memset(&g, 0, sizeof(g));
		g.region = reg.region;
		g.scope = HCOMM_GRANT_ANY;
		g.access = HCOMM_ACCESS_REMOTE_WRITE | HCOMM_ACCESS_REMOTE_READ;
		ASSERT_EQ(0, ioctl(fd, HCOMM_CMD_GRANT, &g));
		pid = fork();
		ASSERT_LE(0, pid);
		if (pid == 0)
			_exit(rb_child(reg.key));
		/* wait until the child's XFER has started writing */
		first = buf;
		end = hx_now_ms() + 60000;
		while (!*first && hx_now_ms() < end)
			usleep(100);
		ASSERT_NE(0, *first) TH_LOG("the other process's XFER never "
					    "started");
		if (dereg) {
			memset(&d, 0, sizeof(d));
			d.region = reg.region;
			ASSERT_EQ(0, ioctl(fd, HCOMM_CMD_DEREG, &d));
		} else {
			memset(&g, 0, sizeof(g));
			g.region = reg.region;
			g.scope = HCOMM_GRANT_NONE;
			ASSERT_EQ(0, ioctl(fd, HCOMM_CMD_GRANT, &g));
		}
		c1 = sum64(buf, RB_LEN);
		ret = hx_wait_child(pid, 120000, &st);
		ASSERT_EQ(0, ret);
		usleep(100000);
		c2 = sum64(buf, RB_LEN);
		ASSERT_TRUE(WIFEXITED(st));
		if (WEXITSTATUS(st) == 0 && c1 == c2) {
			/* it finished before the revocation: try again */
			TH_LOG("attempt %d: the XFER ended before the %s",
			       attempt, dereg ? "DEREG" : "GRANT");
			close(fd);
			munmap(buf, RB_LEN);
			continue;
		}
		ASSERT_EQ(c1, c2) TH_LOG("the region changed after %s returned",
					 dereg ? "DEREG" : "GRANT NONE");
		ASSERT_EQ(dereg ? 1 : 2, WEXITSTATUS(st))
			TH_LOG("the other process's XFER: exit %d (0 complete, "
			       "1 ENOENT, 2 EACCES, 3 other, 4 setup)",
			       WEXITSTATUS(st));
		if (!dereg) {
			memset(&d, 0, sizeof(d));
			d.region = reg.region;
			ASSERT_EQ(0, ioctl(fd, HCOMM_CMD_DEREG, &d));
		}
		ASSERT_EQ(0, close(fd));
		munmap(buf, RB_LEN);
		return;
	}
	ASSERT_TRUE(false) TH_LOG("5 attempts, the XFER always finished first");
}

TEST(revoke_barrier_dereg)
{
	revoke_barrier(_metadata, true);
}

TEST(revoke_barrier_grant)
{
	revoke_barrier(_metadata, false);
}

/* ------------------------------------------------------------------ */
/* max_inline_param                                                    */
/* ------------------------------------------------------------------ */

TEST(max_inline_param)
{
	struct hcomm_ctx_opts o;
	struct hcomm_info info;
	uint64_t saved = 4096;
	int fd, ret;

	ASSERT_EQ(0, hcomm_param("max_inline", &saved));
	ASSERT_EQ(0, hcomm_param_set("max_inline", 1 * MiB));
	fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	ret = fd < 0 ? -errno : hc_info(fd, NULL, &info);
	hcomm_param_set("max_inline", saved);
	ASSERT_EQ(0, ret);
	ASSERT_EQ(64 * KiB, info.max_inline)
		TH_LOG("max_inline param 1 MiB: a new context got %u, want the "
		       "64 KiB cap", info.max_inline);
	memset(&o, 0, sizeof(o));
	o.mask = HCOMM_CTX_MAX_INLINE;
	o.max_inline = 64 * KiB + 1;
	ASSERT_NE(0, ioctl(fd, HCOMM_CMD_SET_CTX, &o));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_EQ(0, close(fd));
}

TEST_HARNESS_MAIN
