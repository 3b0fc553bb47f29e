// SPDX-License-Identifier: GPL-2.0
/*
 * hcomm engine QoS: SET_QOS argument errors and the global min_rate
 * budget (ENOSPC, freed when a context closes), through ioctl() and
 * io_uring passthrough; then the bandwidth split between two processes
 * that both saturate the engine with async transfers: default settings
 * (50/50), a max_rate cap (25/75), and min_rate weights (87.5/12.5).
 *
 * The split tests fork two workers; each opens its own context and ring,
 * sets its QoS, and keeps QOS_DEPTH transfers of 4 MiB (NO_INLINE) in
 * flight between two regions of its own.  Both start at the same absolute
 * CLOCK_MONOTONIC time handed out through a pipe, run a warm-up, then
 * count the bytes of the transfers that complete inside the same window;
 * the share of each must be within +-10 percentage points of the target.
 * Workers never ASSERT; they report through a pipe and the test process
 * asserts.  Every wait has a timeout.
 */
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>

#include "kselftest_harness.h"
#include "hcomm_fixture.h"

#define QOS_LEN		(4 * MiB)
#define QOS_DEPTH	10		/* >= 8 in flight while one is reaped */
#define QOS_WARM_MS	500
#define QOS_WINDOW_MS	3000
#define QOS_TOL_PP	10.0		/* percentage points */
#define CQE_TIMEOUT_MS	20000

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int set_qos(int fd, struct io_uring *r, uint32_t min, uint32_t max,
		   uint32_t prio)
{
	struct hcomm_qos q = { .min_rate = min, .max_rate = max,
			       .priority = prio };

	return submit(fd, r, HCOMM_CMD_SET_QOS, &q);
}

/* Wait until stats field at @off equals @want; 0 when it did. */
static int wait_stat(size_t off, uint64_t want, int ms, struct hcomm_stats *s)
{
	for (;;) {
		int ret = hcomm_stats_read(s);

		if (ret)
			return ret;
		if (*(uint64_t *)((char *)s + off) == want)
			return 0;
		if (ms <= 0)
			return 1;
		hc_sleep_ms(10);
		ms -= 10;
	}
}

/* waitpid with a deadline: exit code, 128 + signal, or -2 on timeout. */
static int wait_child_ms(pid_t pid, int ms)
{
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) :
			       WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
		if (r < 0)
			return -1;
		if (ms <= 0)
			return -2;
		hc_sleep_ms(10);
		ms -= 10;
	}
}

/* Read exactly @len bytes within @ms; 0, -ETIMEDOUT or -EPIPE. */
static int read_full(int fd, void *buf, size_t len, int ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000ULL;
	size_t got = 0;

	while (got < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = now_ns();
		ssize_t n;
		int ret;

		if (now >= end)
			return -ETIMEDOUT;
		ret = poll(&p, 1, (int)((end - now) / 1000000ULL) + 1);
		if (ret < 0 && errno == EINTR)
			continue;
		if (ret <= 0)
			return ret ? -errno : -ETIMEDOUT;
		n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return -EPIPE;
		got += n;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* SET_QOS arguments and the min_rate budget                           */
/* ------------------------------------------------------------------ */

TEST_F(hcomm, set_qos_errors)
{
	static const struct {
		struct hcomm_qos q;
		const char *what;
	} bad[] = {
		{ { .min_rate = 50, .max_rate = 40 }, "min_rate > max_rate" },
		{ { .min_rate = 0, .max_rate = 0 }, "max_rate 0" },
		{ { .min_rate = 0, .max_rate = 101 }, "max_rate 101" },
		{ { .min_rate = 101, .max_rate = 101 }, "min_rate 101" },
		{ { .min_rate = 0, .max_rate = 0xffffffffU }, "max_rate ~0" },
		{ { .max_rate = 100, .priority = 8 }, "priority 8" },
		{ { .max_rate = 100, .priority = 0xffffffffU }, "priority ~0" },
		{ { .max_rate = 100, .flags = 1 }, "flags 1" },
		{ { .max_rate = 100, .flags = 1U << 31 }, "flags bit 31" },
		{ { .max_rate = 100, .reserved = { 1, 0 } }, "reserved[0]" },
		{ { .max_rate = 100, .reserved = { 0, 1 } }, "reserved[1]" },
	};
	static const struct hcomm_qos good[] = {
		{ .min_rate = 0, .max_rate = 100, .priority = 0 },
		{ .min_rate = 0, .max_rate = 1, .priority = 7 },
		{ .min_rate = 10, .max_rate = 10, .priority = 3 },
		{ .min_rate = 100, .max_rate = 100, .priority = 7 },
		{ .min_rate = 0, .max_rate = 100, .priority = 0 },
	};
	struct hcomm_stats s0, s1;
	struct hcomm_qos q;
	size_t i;
	int ret;

	ASSERT_STATS(s0);
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		q = bad[i].q;
		cmd_fails(_metadata, self, HCOMM_CMD_SET_QOS, &q, EINVAL,
			  bad[i].what);
	}
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cmd_set_qos, ARRAY_SIZE(bad));
	ASSERT_DELTA(s0, s1, cmd_errors, ARRAY_SIZE(bad));

	for (i = 0; i < ARRAY_SIZE(good); i++) {
		q = good[i];
		ret = submit(self->fd, self->r, HCOMM_CMD_SET_QOS, &q);
		ASSERT_EQ(0, ret) TH_LOG("SET_QOS min %u max %u prio %u: %d",
					 good[i].min_rate, good[i].max_rate,
					 good[i].priority, ret);
	}
	ASSERT_STATS(s0);
	ASSERT_DELTA(s1, s0, cmd_set_qos, ARRAY_SIZE(good));
	ASSERT_DELTA(s1, s0, cmd_errors, 0);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1));
}

/*
 * The min_rate of all contexts together may not pass 100: the context
 * that would push it over gets ENOSPC and keeps its old setting; a context
 * changing its own min_rate counts only the new value; closing a context
 * gives its min_rate back.
 */
TEST_F(hcomm, min_rate_budget)
{
	struct hcomm_stats s0, s1, sw;
	struct hc_ctx c1, c2, c3;
	int ret;

	ASSERT_EQ(0, hc_ctx_open(&c1, variant->uring, 0));
	ASSERT_EQ(0, hc_ctx_open(&c2, variant->uring, 0));
	ASSERT_EQ(0, hc_ctx_open(&c3, variant->uring, 0));

	ASSERT_EQ(0, set_qos(c1.fd, c1.r, 60, 100, 0));
	ASSERT_STATS(s0);
	ret = set_qos(c2.fd, c2.r, 50, 100, 0);
	ASSERT_EQ(-ENOSPC, ret) TH_LOG("60 + 50 > 100: got %d", ret);
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cmd_errors, 1);
	ASSERT_DELTA(s0, s1, cmd_set_qos, 1);
	ASSERT_EQ(0, set_qos(c2.fd, c2.r, 40, 100, 0))
		TH_LOG("60 + 40 == 100 is allowed");
	ret = set_qos(c3.fd, c3.r, 1, 100, 0);
	ASSERT_EQ(-ENOSPC, ret) TH_LOG("100 + 1: got %d", ret);
	/* the fixture's context too */
	ret = set_qos(self->fd, self->r, 1, 100, 0);
	ASSERT_EQ(-ENOSPC, ret) TH_LOG("100 + 1 (fixture context): got %d",
				       ret);
	/* changing its own value: the old one does not count twice */
	ASSERT_EQ(0, set_qos(c1.fd, c1.r, 60, 80, 5))
		TH_LOG("c1 re-setting 60 counted its old 60 as well");
	ret = set_qos(c1.fd, c1.r, 61, 100, 0);
	ASSERT_EQ(-ENOSPC, ret) TH_LOG("61 + 40: got %d", ret);
	ASSERT_EQ(0, set_qos(c1.fd, c1.r, 30, 100, 0));
	ASSERT_EQ(0, set_qos(c3.fd, c3.r, 30, 100, 0));
	ret = set_qos(c2.fd, c2.r, 41, 100, 0);
	ASSERT_EQ(-ENOSPC, ret) TH_LOG("30 + 41 + 30: got %d", ret);
	/* the refused call left c2 at 40: c3 cannot go past 30 */
	ret = set_qos(c3.fd, c3.r, 31, 100, 0);
	ASSERT_EQ(-ENOSPC, ret) TH_LOG("c2's refused change was applied?");

	/* closing c1 frees its 30 */
	ASSERT_STATS(s0);
	hc_ctx_close(&c1);
	ret = wait_stat(offsetof(struct hcomm_stats, contexts),
			s0.contexts - 1, 5000, &sw);
	ASSERT_EQ(0, ret) TH_LOG("the closed context is still counted");
	ASSERT_EQ(0, set_qos(c3.fd, c3.r, 60, 100, 0))
		TH_LOG("c1's min_rate was not given back at close");
	ret = set_qos(c2.fd, c2.r, 41, 100, 0);
	ASSERT_EQ(-ENOSPC, ret) TH_LOG("60 + 41: got %d", ret);
	ASSERT_EQ(0, set_qos(c2.fd, c2.r, 0, 100, 0));
	ASSERT_EQ(0, set_qos(self->fd, self->r, 40, 100, 0));
	ASSERT_EQ(0, set_qos(self->fd, self->r, 0, 100, 0));

	hc_ctx_close(&c2);
	hc_ctx_close(&c3);
	ret = wait_stat(offsetof(struct hcomm_stats, contexts),
			s0.contexts - 3, 5000, &sw);
	ASSERT_EQ(0, ret);
	/* everything is free again */
	ASSERT_EQ(0, set_qos(self->fd, self->r, 100, 100, 0));
	ASSERT_EQ(0, set_qos(self->fd, self->r, 0, 100, 0));
}

/* ------------------------------------------------------------------ */
/* bandwidth split                                                     */
/* ------------------------------------------------------------------ */

FIXTURE(qos) {
	struct hcomm_stats base;
};

FIXTURE_SETUP(qos)
{
	ASSERT_STATS(self->base);
}

FIXTURE_TEARDOWN(qos)
{
	EXPECT_GAUGES(&self->base);
}

struct qos_report {
	int32_t stage;		/* 0: ok, else the step that failed */
	int32_t err;		/* its errno or CQE result */
	uint64_t bytes;		/* bytes completed inside the window */
	uint64_t n_window;	/* transfers completed inside the window */
	uint64_t n_ok;		/* transfers completed with 0 in all */
	uint64_t n_cancelled;	/* -ECANCELED after the window */
	uint64_t info_max_inline;
};

/* Queue one XFER of QOS_LEN from src to dst without waiting. */
static int queue_xfer(struct hc_ctx *c, struct hcomm_xfer *x, uint64_t sk,
		      uint64_t dk, uint64_t ud)
{
	struct hcomm_uring_cmd pl;
	struct io_uring_sqe *sqe = io_uring_get_sqe(c->r);

	if (!sqe)
		return -EBUSY;
	memset(x, 0, sizeof(*x));
	x->src_key = sk;
	x->dst_key = dk;
	x->len = QOS_LEN;
	x->tag = ud;
	x->flags = HCOMM_XFER_NO_INLINE;
	memset(&pl, 0, sizeof(pl));
	pl.addr = (uintptr_t)x;
	pl.size = sizeof(*x);
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = c->fd;
	sqe->cmd_op = HCOMM_CMD_XFER;
	memcpy((char *)sqe + offsetof(struct io_uring_sqe, cmd), &pl,
	       sizeof(pl));
	sqe->user_data = ud;
	return io_uring_submit(c->r) == 1 ? 0 : -EIO;
}

static void __attribute__((noreturn))
qos_worker(int go_fd, int rep_fd, pid_t parent, const struct hcomm_qos *q)
{
	struct hcomm_xfer xs[QOS_DEPTH];
	struct hcomm_reg_mem rs, rd;
	struct qos_report rep;
	struct hcomm_info info;
	uint64_t start, t0, t1;
	unsigned int inflight = 0, i;
	struct hcomm_qos qq = *q;
	bool cancelled = false;
	struct timespec ts;
	struct hc_ctx c;
	void *src, *dst;
	int ret;

	memset(&rep, 0, sizeof(rep));
#define FAIL(st, e) do { \
	rep.stage = (st); \
	rep.err = (e); \
	if (write(rep_fd, &rep, sizeof(rep)) != sizeof(rep)) \
		_exit(2); \
	_exit(1); \
} while (0)

	alarm(60);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
		_exit(3);
	ret = hc_ctx_open(&c, true, 0);
	if (ret)
		FAIL(1, ret);
	ret = submit(c.fd, NULL, HCOMM_CMD_SET_QOS, &qq);
	if (ret)
		FAIL(2, ret);
	ret = hc_info(c.fd, NULL, &info);
	if (ret)
		FAIL(3, ret);
	rep.info_max_inline = info.max_inline;
	src = map_anon(QOS_LEN);
	dst = map_anon(QOS_LEN);
	if (!src || !dst)
		FAIL(4, -ENOMEM);
	memset(src, 0xa5, QOS_LEN);
	memset(dst, 0, QOS_LEN);
	ret = hc_reg_mem(c.fd, NULL, src, QOS_LEN, HCOMM_ACCESS_REMOTE_READ,
			 &rs);
	if (ret)
		FAIL(5, ret);
	ret = hc_reg_mem(c.fd, NULL, dst, QOS_LEN, HCOMM_ACCESS_LOCAL_WRITE,
			 &rd);
	if (ret)
		FAIL(6, ret);

	/* ready: a zero report; then the start time */
	if (write(rep_fd, &rep, sizeof(rep)) != sizeof(rep))
		_exit(2);
	if (read_full(go_fd, &start, sizeof(start), 30000))
		_exit(4);
	ts.tv_sec = start / 1000000000ULL;
	ts.tv_nsec = start % 1000000000ULL;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
	t0 = start + QOS_WARM_MS * 1000000ULL;
	t1 = t0 + QOS_WINDOW_MS * 1000000ULL;

	for (i = 0; i < QOS_DEPTH; i++) {
		ret = queue_xfer(&c, &xs[i], rs.key, rd.key, i);
		if (ret)
			FAIL(7, ret);
		inflight++;
	}
	while (inflight) {
		struct __kernel_timespec to = { .tv_sec = CQE_TIMEOUT_MS / 1000 };
		struct io_uring_cqe *cqe;
		uint64_t now, ud;
		int res;

		ret = io_uring_wait_cqe_timeout(c.r, &cqe, &to);
		if (ret)
			FAIL(8, ret);
		res = cqe->res;
		ud = cqe->user_data;
		io_uring_cqe_seen(c.r, cqe);
		inflight--;
		now = now_ns();
		if (res == 0) {
			rep.n_ok++;
			if (now >= t0 && now <= t1) {
				rep.n_window++;
				rep.bytes += QOS_LEN;
			}
		} else if (res == -ECANCELED && cancelled) {
			rep.n_cancelled++;
		} else {
			FAIL(9, res);
		}
		if (now < t1) {
			if (ud >= QOS_DEPTH)
				FAIL(10, (int)ud);
			ret = queue_xfer(&c, &xs[ud], rs.key, rd.key, ud);
			if (ret)
				FAIL(11, ret);
			inflight++;
		} else if (!cancelled) {
			struct hcomm_cancel cc = { .flags = HCOMM_CANCEL_ALL };

			cancelled = true;
			ret = submit(c.fd, NULL, HCOMM_CMD_CANCEL, &cc);
			if (ret)
				FAIL(12, ret);
		}
	}
	hc_ctx_close(&c);
	if (write(rep_fd, &rep, sizeof(rep)) != sizeof(rep))
		_exit(2);
	_exit(0);
#undef FAIL
}

/*
 * Run both workers with @qa and @qb; A's share of the window's bytes must
 * be @want_a percent (B's the rest), +-QOS_TOL_PP.
 */
static void qos_split(struct __test_metadata *_metadata,
		      FIXTURE_DATA(qos) *self, const struct hcomm_qos *qa,
		      const struct hcomm_qos *qb, double want_a,
		      const char *name)
{
	const struct hcomm_qos *qs[2] = { qa, qb };
	struct qos_report rep[2];
	struct hcomm_stats s0, s1;
	int go[2][2], rp[2][2];
	pid_t pid[2];
	uint64_t start, total;
	double share_a, share_b;
	int i, ret;

	ASSERT_STATS(s0);
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, pipe2(go[i], O_CLOEXEC));
		ASSERT_EQ(0, pipe2(rp[i], O_CLOEXEC));
	}
	for (i = 0; i < 2; i++) {
		pid_t parent = getpid();

		pid[i] = fork();
		ASSERT_LE(0, pid[i]);
		if (pid[i] == 0) {
			int j;

			for (j = 0; j < 2; j++) {
				close(go[j][1]);
				close(rp[j][0]);
				if (j != i) {
					close(go[j][0]);
					close(rp[j][1]);
				}
			}
			qos_worker(go[i][0], rp[i][1], parent, qs[i]);
		}
	}
	for (i = 0; i < 2; i++) {
		close(go[i][0]);
		close(rp[i][1]);
	}

	/* both set up (or one failed) */
	for (i = 0; i < 2; i++) {
		ret = read_full(rp[i][0], &rep[i], sizeof(rep[i]), 30000);
		ASSERT_EQ(0, ret) TH_LOG("%s: worker %c never got ready", name,
					 'A' + i);
		ASSERT_EQ(0, rep[i].stage)
			TH_LOG("%s: worker %c failed at setup step %d: %d (%s)",
			       name, 'A' + i, rep[i].stage, rep[i].err,
			       strerror(-rep[i].err));
	}
	start = now_ns() + 100 * 1000000ULL;
	for (i = 0; i < 2; i++)
		ASSERT_EQ(sizeof(start), write(go[i][1], &start, sizeof(start)));
	for (i = 0; i < 2; i++) {
		ret = read_full(rp[i][0], &rep[i], sizeof(rep[i]),
				QOS_WARM_MS + QOS_WINDOW_MS + 45000);
		ASSERT_EQ(0, ret) TH_LOG("%s: no report from worker %c", name,
					 'A' + i);
		ASSERT_EQ(0, rep[i].stage)
			TH_LOG("%s: worker %c failed at step %d: %d (%s)",
			       name, 'A' + i, rep[i].stage, rep[i].err,
			       strerror(-rep[i].err));
	}
	for (i = 0; i < 2; i++) {
		ret = wait_child_ms(pid[i], 20000);
		ASSERT_EQ(0, ret) TH_LOG("%s: worker %c exit %d", name,
					 'A' + i, ret);
		close(go[i][1]);
		close(rp[i][0]);
	}
	ASSERT_STATS(s1);

	total = rep[0].bytes + rep[1].bytes;
	ASSERT_NE(0, total) TH_LOG("%s: nothing completed in the window",
				   name);
	share_a = 100.0 * rep[0].bytes / total;
	share_b = 100.0 * rep[1].bytes / total;
	ksft_print_msg("qos %s: A %.1f%% B %.1f%% (target %.1f/%.1f); "
		       "window %d ms: A %" PRIu64 " MiB (%" PRIu64 " xfers), "
		       "B %" PRIu64 " MiB (%" PRIu64 " xfers), %.0f MiB/s\n",
		       name, share_a, share_b, want_a, 100.0 - want_a,
		       QOS_WINDOW_MS, rep[0].bytes / MiB, rep[0].n_window,
		       rep[1].bytes / MiB, rep[1].n_window,
		       (double)total / MiB / (QOS_WINDOW_MS / 1000.0));

	/* both were served during the window, by the async engine */
	ASSERT_LT(0, rep[0].n_window) TH_LOG("%s: A starved", name);
	ASSERT_LT(0, rep[1].n_window) TH_LOG("%s: B starved", name);
	ASSERT_DELTA(s0, s1, cmd_set_qos, 2);
	ASSERT_LE(s0.xfer_async + rep[0].n_ok + rep[1].n_ok, s1.xfer_async)
		TH_LOG("%s: fewer async transfers counted than completed", name);
	ASSERT_LE(s0.xfer_bytes + (rep[0].n_ok + rep[1].n_ok) * QOS_LEN,
		  s1.xfer_bytes);
	ASSERT_DELTA(s0, s1, xfer_inline, 0);
	ASSERT_LT(s0.engine_busy_ns, s1.engine_busy_ns);

	ASSERT_LE(fabs(share_a - want_a), QOS_TOL_PP)
		TH_LOG("%s: A got %.1f%% of the engine, target %.1f%% "
		       "(+-%.0f)", name, share_a, want_a, QOS_TOL_PP);
	ASSERT_LE(fabs(share_b - (100.0 - want_a)), QOS_TOL_PP)
		TH_LOG("%s: B got %.1f%%, target %.1f%%", name, share_b,
		       100.0 - want_a);
}

TEST_F_TIMEOUT(qos, split_default, 120)
{
	struct hcomm_qos a = { .min_rate = 0, .max_rate = 100 };
	struct hcomm_qos b = { .min_rate = 0, .max_rate = 100 };

	qos_split(_metadata, self, &a, &b, 50.0, "defaults");
}

TEST_F_TIMEOUT(qos, split_max_rate, 120)
{
	struct hcomm_qos a = { .min_rate = 0, .max_rate = 25 };
	struct hcomm_qos b = { .min_rate = 0, .max_rate = 100 };

	qos_split(_metadata, self, &a, &b, 25.0, "A max_rate 25");
}

TEST_F_TIMEOUT(qos, split_min_rate_weights, 120)
{
	struct hcomm_qos a = { .min_rate = 70, .max_rate = 100 };
	struct hcomm_qos b = { .min_rate = 10, .max_rate = 100 };

	qos_split(_metadata, self, &a, &b, 87.5, "A min 70, B min 10");
}

TEST_HARNESS_MAIN
