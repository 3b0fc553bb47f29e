// SPDX-License-Identifier: GPL-2.0
/*
 * hcomm engine QoS: SET_QOS argument errors and the global min_rate
 * budget (ENOSPC, freed when a context closes), through ioctl() and
 * io_uring passthrough; the per-user rules (an unprivileged user gets
 * EPERM for a guarantee or priority above the module's allowance, and the
 * min_rates of one user's contexts together stay within qos_user_min_rate);
 * then the bandwidth split between tenants that saturate the engine with
 * async transfers: default settings (50/50), a max_rate cap (25/75),
 * min_rate weights (87.5/12.5), and one context of root against three of
 * nobody (50/50: files do not buy shares, users do).
 *
 * The split tests fork one worker per context; each opens its context and
 * ring, sets its QoS, and keeps QOS_DEPTH transfers of 4 MiB (NO_INLINE)
 * in flight between two regions of its own until the window ends.  The
 * shares are measured in engine bytes, not wall time: the test process
 * samples debugfs "contexts" (served bytes and transfers on the engine per
 * context) every QOS_SAMPLE_MS and counts an interval only if every tenant
 * was backlogged through all of it, i.e. served less in it than the work
 * it certainly had queued at its start.  A loaded machine (workers late to
 * resubmit, the sampler late) only drops intervals; it cannot skew the
 * shares.  Each tenant's share of the counted bytes must be within +-10
 * percentage points of the target.  Workers never ASSERT; they report
 * through a pipe and the test process asserts.  Every wait has a timeout.
 */
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <dirent.h>
#include <time.h>

#include "kselftest_harness.h"
#include "hcomm_fixture.h"
#include "hcomm_xfer.h"

#define QOS_LEN		(4 * MiB)
#define QOS_DEPTH	48		/* deep: a tenant starved of CPU stays backlogged */
#define QOS_WARM_MS	500
/*
 * Measuring window: 3 s, or 6 s on the debug kernel (kmemleak in
 * debugfs), where the emulated, instrumented CPU copies fewer bytes per
 * interval (a run there counted 167 to 682 intervals of 10 ms in 12 s).
 */
static unsigned int qos_window_ms(void)
{
	static unsigned int ms;

	if (!ms)
		ms = access("/sys/kernel/debug/kmemleak", F_OK) ? 3000 : 6000;
	return ms;
}
#define QOS_WINDOW_MS	qos_window_ms()
#define QOS_SAMPLE_MS	10
#define QOS_MIN_CHUNKS	32		/* counted bytes needed, in 4 MiB (512 chunks) */
#define QOS_MAX_WORKERS	4
#define QOS_NOBODY	65534
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

static int read_param(const char *name, unsigned int *val);
static int write_param(const char *name, unsigned int val);

/*
 * @slow_ms: slot_slow_ms as found; the split tests turn the slow rule off
 * (they check the scheduler's shares: on a loaded machine the rule rightly
 * takes slots from a tenant whose threads wait for a CPU, see
 * Documentation/qos.rst) and the teardown puts it back, with the
 * allowances @umin and @uprio that some tests raise.
 */
FIXTURE(qos) {
	struct hcomm_stats base;
	unsigned int slow_ms, umin, uprio;
};

FIXTURE_SETUP(qos)
{
	ASSERT_STATS(self->base);
	ASSERT_EQ(0, read_param("slot_slow_ms", &self->slow_ms));
	ASSERT_EQ(0, read_param("qos_user_min_rate", &self->umin));
	ASSERT_EQ(0, read_param("qos_user_priority", &self->uprio));
}

FIXTURE_TEARDOWN(qos)
{
	EXPECT_EQ(0, write_param("slot_slow_ms", self->slow_ms));
	EXPECT_EQ(0, write_param("qos_user_min_rate", self->umin));
	EXPECT_EQ(0, write_param("qos_user_priority", self->uprio));
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

/* One worker: its context's QoS, and whom it runs as. */
struct qos_spec {
	struct hcomm_qos q;
	int tenant;		/* index of the tenant it counts for */
	int uid;		/* -1: the test's own (root); else setresuid */
	bool probe_eperm;	/* check that min_rate 1 and priority 1 fail */
};

static int read_param(const char *name, unsigned int *val)
{
	char path[128];
	FILE *f;
	int ret;

	snprintf(path, sizeof(path), "/sys/module/hcomm/parameters/%s", name);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	ret = fscanf(f, "%u", val) == 1 ? 0 : -EINVAL;
	fclose(f);
	return ret;
}

static int write_param(const char *name, unsigned int val)
{
	char path[128];
	FILE *f;
	int ret;

	snprintf(path, sizeof(path), "/sys/module/hcomm/parameters/%s", name);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	ret = fprintf(f, "%u\n", val) > 0 ? 0 : -EIO;
	if (fclose(f))
		ret = -errno;
	return ret;
}

/* Become @uid (and its gid), keeping enough RLIMIT_MEMLOCK to pin. */
static int become(int uid)
{
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };

	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		return -errno;
	if (setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
		return -errno;
	return 0;
}

static void __attribute__((noreturn))
qos_worker(int go_fd, int rep_fd, pid_t parent, const struct qos_spec *sp)
{
	const struct hcomm_qos *q = &sp->q;
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
	/* before PR_SET_PDEATHSIG: a change of credentials clears it */
	if (sp->uid >= 0) {
		ret = become(sp->uid);
		if (ret)
			FAIL(13, ret);
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
		_exit(3);
	ret = hc_ctx_open(&c, true, 0);
	if (ret)
		FAIL(1, ret);
	if (sp->probe_eperm) {
		struct hcomm_qos g = { .min_rate = 1, .max_rate = 100 };
		struct hcomm_qos pr = { .max_rate = 100, .priority = 1 };

		ret = submit(c.fd, NULL, HCOMM_CMD_SET_QOS, &g);
		if (ret != -EPERM)
			FAIL(14, ret);
		ret = submit(c.fd, c.r, HCOMM_CMD_SET_QOS, &pr);
		if (ret != -EPERM)
			FAIL(15, ret);
	}
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
	t1 = t0 + (uint64_t)QOS_WINDOW_MS * 1000000ULL;

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


/* ------------------------------------------------------------------ */
/* shares in engine bytes, over intervals where every tenant was busy   */
/* ------------------------------------------------------------------ */

struct qos_sample {
	uint64_t served[QOS_MAX_WORKERS];	/* bytes the engine copied */
	uint32_t xfers[QOS_MAX_WORKERS];	/* transfers on the engine */
};

/* One line of debugfs "contexts" per context; sum them per worker pid. */
static int qos_sample(const pid_t *pid, int n, struct qos_sample *out)
{
	FILE *f = fopen(HCOMM_DEBUGFS "/contexts", "r");
	char line[512];
	int i;

	memset(out, 0, sizeof(*out));
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		long long served;
		int p, xf;

		if (line[0] == '#' ||
		    sscanf(line, "%d %*s %*d %*d %*u %d %*u %*u %*u %*u %lld",
			   &p, &xf, &served) != 3)
			continue;
		for (i = 0; i < n; i++)
			if (pid[i] == p) {
				out->served[i] += served;
				out->xfers[i] += xf;
			}
	}
	fclose(f);
	return 0;
}

/* Engine workers: chunks of one context that can be in flight at once. */
static unsigned int qos_engine_workers(void)
{
	unsigned int w = 0;

	if (read_param("workers", &w) || !w)
		w = sysconf(_SC_NPROCESSORS_ONLN);
	return w < 1 ? 1 : w > 64 ? 64 : w;
}

/*
 * Bytes a worker certainly still had queued when it showed @xfers
 * transfers on the engine: all but the one being handed out, up to @w
 * whose last chunks are in flight and up to @w landed but not yet ended.
 */
static uint64_t qos_backlog(uint32_t xfers, unsigned int w)
{
	return xfers > 2 * w + 1 ? (uint64_t)(xfers - 2 * w - 1) * QOS_LEN : 0;
}

/*
 * Run one worker per spec; tenant t's share of the engine bytes counted
 * over the intervals in which every worker was backlogged must be
 * @want[t] percent, +-QOS_TOL_PP.
 */
static void qos_split_n(struct __test_metadata *_metadata,
			const struct qos_spec *sp, int n, int ntenants,
			const double *want, const char *name)
{
	struct qos_report rep[QOS_MAX_WORKERS];
	uint64_t start, tenant[QOS_MAX_WORKERS] = {}, counted = 0;
	uint64_t n_ok = 0, wall_bytes[QOS_MAX_WORKERS] = {};
	int go[QOS_MAX_WORKERS][2], rp[QOS_MAX_WORKERS][2];
	unsigned int w = qos_engine_workers(), intervals = 0, seen = 0;
	struct qos_sample prev, cur;
	struct hcomm_stats s0, s1;
	pid_t pid[QOS_MAX_WORKERS];
	struct timespec ts;
	int i, t, ret;

	ASSERT_LE(n, QOS_MAX_WORKERS);
	ASSERT_EQ(0, write_param("slot_slow_ms", 0));
	ASSERT_STATS(s0);
	for (i = 0; i < n; i++) {
		ASSERT_EQ(0, pipe2(go[i], O_CLOEXEC));
		ASSERT_EQ(0, pipe2(rp[i], O_CLOEXEC));
	}
	for (i = 0; i < n; i++) {
		pid_t parent = getpid();

		pid[i] = fork();
		ASSERT_LE(0, pid[i]);
		if (pid[i] == 0) {
			int j;

			for (j = 0; j < n; j++) {
				close(go[j][1]);
				close(rp[j][0]);
				if (j != i) {
					close(go[j][0]);
					close(rp[j][1]);
				}
			}
			qos_worker(go[i][0], rp[i][1], parent, &sp[i]);
		}
	}
	for (i = 0; i < n; i++) {
		close(go[i][0]);
		close(rp[i][1]);
	}

	/* all set up (or one failed) */
	for (i = 0; i < n; i++) {
		ret = read_full(rp[i][0], &rep[i], sizeof(rep[i]), 30000);
		ASSERT_EQ(0, ret) TH_LOG("%s: worker %d never got ready", name,
					 i);
		ASSERT_EQ(0, rep[i].stage)
			TH_LOG("%s: worker %d failed at setup step %d: %d (%s)",
			       name, i, rep[i].stage, rep[i].err,
			       strerror(-rep[i].err));
	}
	start = now_ns() + 100 * 1000000ULL;
	for (i = 0; i < n; i++)
		ASSERT_EQ(sizeof(start), write(go[i][1], &start, sizeof(start)));

	/* sample from the end of the warm-up to the end of the window */
	ts.tv_sec = (start + QOS_WARM_MS * 1000000ULL) / 1000000000ULL;
	ts.tv_nsec = (start + QOS_WARM_MS * 1000000ULL) % 1000000000ULL;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
	ASSERT_EQ(0, qos_sample(pid, n, &prev));
	while (now_ns() < start + (uint64_t)(QOS_WARM_MS + QOS_WINDOW_MS) *
	       1000000ULL) {
		bool busy = true;

		hc_sleep_ms(QOS_SAMPLE_MS);
		ASSERT_EQ(0, qos_sample(pid, n, &cur));
		seen++;
		for (i = 0; i < n; i++)
			if (cur.served[i] - prev.served[i] >=
			    qos_backlog(prev.xfers[i], w))
				busy = false;
		if (busy) {
			intervals++;
			for (i = 0; i < n; i++) {
				tenant[sp[i].tenant] +=
					cur.served[i] - prev.served[i];
				counted += cur.served[i] - prev.served[i];
			}
		}
		prev = cur;
	}

	for (i = 0; i < n; i++) {
		ret = read_full(rp[i][0], &rep[i], sizeof(rep[i]),
				QOS_WARM_MS + QOS_WINDOW_MS + 45000);
		ASSERT_EQ(0, ret) TH_LOG("%s: no report from worker %d", name,
					 i);
		ASSERT_EQ(0, rep[i].stage)
			TH_LOG("%s: worker %d failed at step %d: %d (%s)",
			       name, i, rep[i].stage, rep[i].err,
			       strerror(-rep[i].err));
		n_ok += rep[i].n_ok;
		wall_bytes[sp[i].tenant] += rep[i].bytes;
	}
	for (i = 0; i < n; i++) {
		ret = wait_child_ms(pid[i], 20000);
		ASSERT_EQ(0, ret) TH_LOG("%s: worker %d exit %d", name, i, ret);
		close(go[i][1]);
		close(rp[i][0]);
	}
	ASSERT_STATS(s1);

	for (t = 0; t < ntenants; t++) {
		double share = counted ? 100.0 * tenant[t] / counted : 0;
		uint64_t wall = 0;

		for (i = 0; i < ntenants; i++)
			wall += wall_bytes[i];
		ksft_print_msg("qos %s: tenant %c %.1f%% of %" PRIu64
			       " MiB counted (target %.1f); wall-time "
			       "window %.1f%%\n", name, 'A' + t, share,
			       counted / MiB, want[t],
			       wall ? 100.0 * wall_bytes[t] / wall : 0);
	}
	ksft_print_msg("qos %s: %u of %u intervals of %d ms with every "
		       "worker backlogged (%u engine workers)\n", name,
		       intervals, seen, QOS_SAMPLE_MS, w);

	for (i = 0, ret = n; i < n; i++)
		ret += sp[i].probe_eperm ? 2 : 0;	/* refused ones count */
	ASSERT_DELTA(s0, s1, cmd_set_qos, ret);
	ASSERT_LE(s0.xfer_async + n_ok, s1.xfer_async)
		TH_LOG("%s: fewer async transfers counted than completed", name);
	ASSERT_LE(s0.xfer_bytes + n_ok * QOS_LEN, s1.xfer_bytes);
	ASSERT_DELTA(s0, s1, xfer_inline, 0);
	ASSERT_LT(s0.engine_busy_ns, s1.engine_busy_ns);

	ASSERT_LE(QOS_MIN_CHUNKS * QOS_LEN, counted)
		TH_LOG("%s: only %" PRIu64 " MiB in %u intervals with every "
		       "worker backlogged: too little to measure", name,
		       counted / MiB, intervals);
	for (t = 0; t < ntenants; t++) {
		double share = 100.0 * tenant[t] / counted;

		ASSERT_LT(0, tenant[t]) TH_LOG("%s: tenant %c starved", name,
					       'A' + t);
		ASSERT_LE(fabs(share - want[t]), QOS_TOL_PP)
			TH_LOG("%s: tenant %c got %.1f%% of the engine, "
			       "target %.1f%% (+-%.0f)", name, 'A' + t, share,
			       want[t], QOS_TOL_PP);
	}
}

/* Two workers of the test's uid, A with @qa and B with @qb. */
static void qos_split(struct __test_metadata *_metadata,
		      FIXTURE_DATA(qos) *self, const struct hcomm_qos *qa,
		      const struct hcomm_qos *qb, double want_a,
		      const char *name)
{
	struct qos_spec sp[2] = {
		{ .q = *qa, .tenant = 0, .uid = -1 },
		{ .q = *qb, .tenant = 1, .uid = -1 },
	};
	double want[2] = { want_a, 100.0 - want_a };

	qos_split_n(_metadata, sp, 2, 2, want, name);
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

/*
 * One context of root against three of nobody, all default: the users
 * share the engine 50/50 however many files each opened (per context it
 * would be 25/75).  nobody is refused a min_rate and a priority (EPERM)
 * while the module's allowances are 0.
 */
TEST_F_TIMEOUT(qos, split_per_user, 120)
{
	unsigned int umin = 1, uprio = 1;
	struct qos_spec sp[4] = {
		{ .q = { .max_rate = 100 }, .tenant = 0, .uid = -1 },
		{ .q = { .max_rate = 100 }, .tenant = 1, .uid = QOS_NOBODY },
		{ .q = { .max_rate = 100 }, .tenant = 1, .uid = QOS_NOBODY },
		{ .q = { .max_rate = 100 }, .tenant = 1, .uid = QOS_NOBODY },
	};
	double want[2] = { 50.0, 50.0 };

	ASSERT_EQ(0, geteuid()) TH_LOG("needs root (setresuid)");
	ASSERT_EQ(0, read_param("qos_user_min_rate", &umin));
	ASSERT_EQ(0, read_param("qos_user_priority", &uprio));
	sp[1].probe_eperm = !umin && !uprio;
	qos_split_n(_metadata, sp, 4, 2, want,
		    "root 1 context vs nobody 3 contexts");
}

/*
 * A flooding tenant cannot hold another below its min_rate.  Root's one
 * context asks for exactly 30 % (min_rate 30, max_rate 30); nobody floods
 * the engine from three contexts at priority 7 (qos_user_priority raised
 * to 7 for the test), one of them with min_rate 20 (qos_user_min_rate
 * raised to 20), each 48 transfers of 4 MiB deep.  Root's user must get
 * 30 % +-10 and nobody the remaining 70 %: neither the priority, nor the
 * guarantee, nor the number of files and the depth of the queues buy the
 * flooder root's share.
 */
TEST_F_TIMEOUT(qos, flood_holds_min_rate, 120)
{
	struct qos_spec sp[4] = {
		{ .q = { .min_rate = 30, .max_rate = 30 }, .tenant = 0,
		  .uid = -1 },
		{ .q = { .min_rate = 20, .max_rate = 100, .priority = 7 },
		  .tenant = 1, .uid = QOS_NOBODY },
		{ .q = { .max_rate = 100, .priority = 7 }, .tenant = 1,
		  .uid = QOS_NOBODY },
		{ .q = { .max_rate = 100, .priority = 7 }, .tenant = 1,
		  .uid = QOS_NOBODY },
	};
	double want[2] = { 30.0, 70.0 };

	ASSERT_EQ(0, geteuid()) TH_LOG("needs root (setresuid)");
	/* the teardown restores both */
	ASSERT_EQ(0, write_param("qos_user_min_rate", 20));
	ASSERT_EQ(0, write_param("qos_user_priority", 7));
	qos_split_n(_metadata, sp, 4, 2, want,
		    "root min 30 max 30 vs nobody flooding 3 contexts prio 7");
}

/*
 * The min_rates of one user's contexts together stay within the
 * qos_user_min_rate allowance: with it at 20, nobody may set 15 on one
 * context and 5 on another, not 10; lowering is always allowed, and a
 * closed context gives its part back.  Runs in a child as nobody.
 */
TEST_F_TIMEOUT(qos, user_min_rate_allowance, 60)
{
	unsigned int old = 0;
	pid_t pid;
	int ret;

	ASSERT_EQ(0, geteuid()) TH_LOG("needs root (setresuid)");
	ASSERT_EQ(0, read_param("qos_user_min_rate", &old));
	ASSERT_EQ(0, write_param("qos_user_min_rate", 20));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct hc_ctx c1, c2;

		alarm(30);
		if (become(QOS_NOBODY))
			_exit(10);
		if (hc_ctx_open(&c1, false, 0) || hc_ctx_open(&c2, true, 0))
			_exit(11);
		if (set_qos(c1.fd, c1.r, 21, 100, 0) != -EPERM)
			_exit(12);	/* alone above the allowance */
		if (set_qos(c1.fd, c1.r, 15, 100, 0))
			_exit(13);
		if (set_qos(c2.fd, c2.r, 10, 100, 0) != -EPERM)
			_exit(14);	/* 15 + 10 > 20: per user */
		if (set_qos(c2.fd, c2.r, 5, 100, 0))
			_exit(15);
		if (set_qos(c1.fd, c1.r, 16, 100, 0) != -EPERM)
			_exit(16);
		if (set_qos(c1.fd, c1.r, 10, 100, 0))
			_exit(17);	/* lowering */
		hc_ctx_close(&c1);
		/* c1's 10 is given back when its file is released */
		for (ret = 0; ret < 500; ret++) {
			if (!set_qos(c2.fd, c2.r, 20, 100, 0))
				break;
			hc_sleep_ms(10);
		}
		if (ret == 500)
			_exit(18);
		if (set_qos(c2.fd, c2.r, 0, 100, 0))
			_exit(19);
		hc_ctx_close(&c2);
		_exit(0);
	}
	ret = wait_child_ms(pid, 40000);
	EXPECT_EQ(0, write_param("qos_user_min_rate", old));
	ASSERT_EQ(0, ret) TH_LOG("child as nobody failed at step %d "
				 "(12: one context above the allowance, "
				 "14: the user's contexts together above it, "
				 "18: a closed context's part not given back)",
				 ret);
}

/*
 * Copies are charged to the submitter's cgroup.  A child in a cgroup of
 * its own moves 1 GiB through the engine (the first XFER by ioctl or, on
 * an io_uring ring, from io_uring's non-blocking issue); its context's
 * copy threads ("hcomm-<pid>") must be in that cgroup, and the cgroup's
 * CPU time beyond the child's own must cover the engine's copy time.
 * Unbound kworkers, which copied for everyone before, failed both.
 */
#define CG_ROOT		"/sys/fs/cgroup"
#define CG_BYTES	(1024 * MiB)
#define CG_LEN		(64 * MiB)

struct cg_report {
	int32_t stage;
	int32_t err;
	uint64_t busy_ns;	/* engine copy time, from the stats */
	uint64_t cg_ns;		/* the cgroup's CPU time */
	uint64_t self_ns;	/* the child's own CPU time */
	uint32_t workers;	/* hcomm-<pid> threads found */
	uint32_t in_cg;		/* ... of them in the cgroup */
};

static int cg_usage_ns(const char *cg, uint64_t *ns)
{
	char path[256], line[128];
	unsigned long long us;
	FILE *f;
	int ret = -ENOENT;

	snprintf(path, sizeof(path), "%s/cpu.stat", cg);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "usage_usec %llu", &us) == 1) {
			*ns = us * 1000;
			ret = 0;
			break;
		}
	fclose(f);
	return ret;
}

static uint64_t self_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* Count the threads named hcomm-<pid> and those of them in @cgname. */
static void cg_find_workers(pid_t pid, const char *cgname, uint32_t *found,
			    uint32_t *in_cg)
{
	char want[32], path[300], buf[256];
	struct dirent *de;
	DIR *d = opendir("/proc");

	*found = *in_cg = 0;
	if (!d)
		return;
	snprintf(want, sizeof(want), "hcomm-%d\n", pid);
	while ((de = readdir(d))) {
		int fd;
		ssize_t n;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", de->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		if (strcmp(buf, want))
			continue;
		(*found)++;
		snprintf(path, sizeof(path), "/proc/%s/cgroup", de->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		/* cgroup v2: "0::/<name>\n" */
		if (strstr(buf, cgname))
			(*in_cg)++;
	}
	closedir(d);
}

/*
 * rmdir a cgroup the test's children have left.  Their contexts' copy
 * threads end when the files are released, which an exiting process may
 * leave to a kernel worker (io_uring's ring exit): wait up to 10 s.
 */
static int cg_rmdir(const char *cg)
{
	int i;

	for (i = 0; i < 500; i++) {
		if (!rmdir(cg))
			return 0;
		if (errno != EBUSY)
			return -errno;
		hc_sleep_ms(20);
	}
	return -EBUSY;
}

static void __attribute__((noreturn))
cg_child(int wfd, const char *cg, const char *cgname, bool uring)
{
	struct cg_report rep = { 0 };
	struct hcomm_reg_mem a, b;
	struct hcomm_stats s0, s1;
	struct hcomm_xfer x;
	struct hc_ctx c;
	uint64_t cg0, cg1, t0, t1, done;
	char path[256], pid[32];
	void *src, *dst;
	int fd, ret;

#define CG_FAIL(st, e) do { rep.stage = (st); rep.err = (e); goto out; } while (0)
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		CG_FAIL(1, -errno);
	snprintf(pid, sizeof(pid), "%d", getpid());
	if (write(fd, pid, strlen(pid)) < 0)
		CG_FAIL(2, -errno);
	close(fd);
	if (hc_ctx_open(&c, uring, 0))
		CG_FAIL(3, -errno);
	src = map_anon(CG_LEN);
	dst = map_anon(CG_LEN);
	if (!src || !dst)
		CG_FAIL(4, -ENOMEM);
	hx_fill(src, CG_LEN, 7);
	memset(dst, 0, CG_LEN);
	ret = hx_reg(c.fd, c.r, src, CG_LEN, HCOMM_ACCESS_REMOTE_READ, 0, &a);
	if (ret)
		CG_FAIL(5, ret);
	ret = hx_reg(c.fd, c.r, dst, CG_LEN, HCOMM_ACCESS_LOCAL_WRITE, 0, &b);
	if (ret)
		CG_FAIL(6, ret);
	if (hcomm_stats_read(&s0) || cg_usage_ns(cg, &cg0))
		CG_FAIL(7, -EIO);
	t0 = self_cpu_ns();
	for (uint64_t moved = 0; moved < CG_BYTES; moved += CG_LEN) {
		hx_xfer_init(&x, a.key, 0, b.key, 0, CG_LEN,
			     HCOMM_XFER_NO_INLINE);
		ret = hx_xfer(c.fd, c.r, &x, &done);
		if (ret)
			CG_FAIL(8, ret);
	}
	t1 = self_cpu_ns();
	if (hcomm_stats_read(&s1) || cg_usage_ns(cg, &cg1))
		CG_FAIL(9, -EIO);
	if (memcmp(src, dst, CG_LEN))
		CG_FAIL(10, -EILSEQ);
	cg_find_workers(getpid(), cgname, &rep.workers, &rep.in_cg);
	rep.busy_ns = s1.engine_busy_ns - s0.engine_busy_ns;
	rep.cg_ns = cg1 - cg0;
	rep.self_ns = t1 - t0;
	hc_ctx_close(&c);
out:
	if (write(wfd, &rep, sizeof(rep)) != sizeof(rep))
		_exit(2);
	_exit(0);
#undef CG_FAIL
}

TEST_F_TIMEOUT(qos, copies_charged_to_cgroup, 180)
{
	char cg[128], cgname[64];
	bool mounted = false;
	int mode;

	if (access(CG_ROOT "/cgroup.controllers", F_OK)) {
		if (mount("none", CG_ROOT, "cgroup2", 0, NULL))
			SKIP(return, "no cgroup v2 at " CG_ROOT ": %s",
			     strerror(errno));
		mounted = true;
	}
	snprintf(cgname, sizeof(cgname), "/hcomm-qos-%d", getpid());
	snprintf(cg, sizeof(cg), CG_ROOT "%s", cgname);
	ASSERT_EQ(0, mkdir(cg, 0755)) TH_LOG("mkdir %s: %s", cg, strerror(errno));
	for (mode = 0; mode < 2; mode++) {
		struct cg_report rep = { 0 };
		int p[2];
		pid_t pid;

		ASSERT_EQ(0, pipe(p));
		pid = fork();
		ASSERT_GE(pid, 0);
		if (!pid) {
			close(p[0]);
			cg_child(p[1], cg, cgname, mode);
		}
		close(p[1]);
		EXPECT_EQ(0, read_full(p[0], &rep, sizeof(rep), 150000));
		close(p[0]);
		EXPECT_EQ(0, wait_child_ms(pid, 30000));
		EXPECT_EQ(0, rep.stage) TH_LOG("%s: step %d failed: %d",
					       mode ? "uring" : "ioctl",
					       rep.stage, rep.err);
		if (rep.stage)
			continue;
		TH_LOG("%s: engine copied for %.0f ms; the cgroup ran %.0f ms, %.0f ms of it the submitter's own; %u copy threads, %u in %s",
		       mode ? "uring" : "ioctl", rep.busy_ns / 1e6,
		       rep.cg_ns / 1e6, rep.self_ns / 1e6, rep.workers,
		       rep.in_cg, cgname);
		EXPECT_GE(rep.workers, 1);
		EXPECT_EQ(rep.workers, rep.in_cg);
		EXPECT_GT(rep.busy_ns, 0);
		/* the copies' CPU time is in the cgroup (preemption aside) */
		EXPECT_GE((double)(rep.cg_ns - rep.self_ns),
			  0.7 * (double)rep.busy_ns);
	}
	EXPECT_EQ(0, cg_rmdir(cg)) TH_LOG("rmdir %s", cg);
	if (mounted)
		umount(CG_ROOT);
}

/*
 * A tenant throttled by its cgroup does not take the engine from the
 * others.  Tenant A starts its copy threads in a cgroup with cpu.max 5 ms
 * per 100 ms and moves itself back to the root cgroup, so it keeps its
 * transfers queued while its threads are throttled with a chunk in hand.
 * A stalled chunk marks A slow, and a slow context holds at most its
 * share of the slots and never all of them.  Sampled every 10 ms while
 * both have work, A may hold every slot in at most a tenth of the samples
 * (a stall is seen only once it has lasted 20 ms); without the rule it
 * held them in nine of ten.  B's bandwidth next to A, against B alone,
 * is logged, not checked: it also moves with what A's submitter, running
 * unthrottled, costs the machine (0.26 to 0.72 of alone in runs here).
 */
#define THR_DEPTH	16
#define THR_WARM_MS	1500
#define THR_WINDOW_MS	3000

static int write_str(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, v, strlen(v)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static void __attribute__((noreturn))
thr_tenant(int wfd, const char *cg, unsigned int warm_ms, unsigned int ms)
{
	struct cg_report rep = { 0 };
	struct hcomm_reg_mem a, b;
	struct hcomm_xfer xs[THR_DEPTH];
	unsigned int inflight = 0, i;
	uint64_t t0, t1, bytes = 0;
	bool cancelled = false;
	struct hc_ctx c;
	void *src, *dst;
	int ret;

#define THR_FAIL(st, e) do { rep.stage = (st); rep.err = (e); goto out; } while (0)
	alarm(60);
	if (cg) {
		char path[256], pid[32];
		int fd;

		snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
		fd = open(path, O_WRONLY);
		if (fd < 0)
			THR_FAIL(1, -errno);
		snprintf(pid, sizeof(pid), "%d", getpid());
		if (write(fd, pid, strlen(pid)) < 0)
			THR_FAIL(2, -errno);
		close(fd);
	}
	if (hc_ctx_open(&c, true, 0))
		THR_FAIL(3, -errno);
	src = map_anon(QOS_LEN);
	dst = map_anon(QOS_LEN);
	if (!src || !dst)
		THR_FAIL(4, -ENOMEM);
	memset(src, 0x5a, QOS_LEN);
	memset(dst, 0, QOS_LEN);
	ret = hx_reg(c.fd, NULL, src, QOS_LEN, HCOMM_ACCESS_REMOTE_READ, 0, &a);
	if (ret)
		THR_FAIL(5, ret);
	ret = hx_reg(c.fd, NULL, dst, QOS_LEN, HCOMM_ACCESS_LOCAL_WRITE, 0, &b);
	if (ret)
		THR_FAIL(6, ret);
	if (cg) {
		struct hcomm_xfer x;

		/* start the copy threads here, then leave them behind */
		hx_xfer_init(&x, a.key, 0, b.key, 0, QOS_LEN,
			     HCOMM_XFER_NO_INLINE);
		ret = hx_xfer(c.fd, NULL, &x, NULL);
		if (ret)
			THR_FAIL(12, ret);
		ret = write_str(CG_ROOT "/cgroup.procs", "0");
		if (ret)
			THR_FAIL(13, ret);
	}
	t0 = now_ns() + (uint64_t)warm_ms * 1000000ULL;
	t1 = t0 + (uint64_t)ms * 1000000ULL;
	for (i = 0; i < THR_DEPTH; i++) {
		ret = queue_xfer(&c, &xs[i], a.key, b.key, i);
		if (ret)
			THR_FAIL(7, ret);
		inflight++;
	}
	while (inflight) {
		struct __kernel_timespec to = { .tv_sec = CQE_TIMEOUT_MS / 1000 };
		struct io_uring_cqe *cqe;
		uint64_t now, ud;
		int res;

		ret = io_uring_wait_cqe_timeout(c.r, &cqe, &to);
		if (ret)
			THR_FAIL(8, ret);
		res = cqe->res;
		ud = cqe->user_data;
		io_uring_cqe_seen(c.r, cqe);
		inflight--;
		now = now_ns();
		if (res == 0 && now >= t0 && now <= t1)
			bytes += QOS_LEN;
		else if (res && !(res == -ECANCELED && cancelled))
			THR_FAIL(9, res);
		if (now < t1) {
			ret = queue_xfer(&c, &xs[ud % THR_DEPTH], a.key, b.key,
					 ud);
			if (ret)
				THR_FAIL(10, ret);
			inflight++;
		} else if (!cancelled) {
			struct hcomm_cancel cc = { .flags = HCOMM_CANCEL_ALL };

			cancelled = true;
			ret = submit(c.fd, NULL, HCOMM_CMD_CANCEL, &cc);
			if (ret)
				THR_FAIL(11, ret);
		}
	}
	rep.busy_ns = bytes;
	hc_ctx_close(&c);
out:
	if (write(wfd, &rep, sizeof(rep)) != sizeof(rep))
		_exit(2);
	_exit(0);
#undef THR_FAIL
}

static pid_t thr_start(int *rfd, const char *cg, unsigned int warm_ms,
		       unsigned int ms)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (!pid) {
		close(p[0]);
		thr_tenant(p[1], cg, warm_ms, ms);
	}
	close(p[1]);
	*rfd = p[0];
	return pid;
}

struct thr_ctx_line {
	int xfers;
	unsigned int slots;
	unsigned int slow;
};

/* The debugfs "contexts" line of @pid's context. */
static int thr_ctx_line(pid_t pid, struct thr_ctx_line *out)
{
	FILE *f = fopen(HCOMM_DEBUGFS "/contexts", "r");
	char line[512];
	int ret = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		int p;

		if (line[0] != '#' &&
		    sscanf(line, "%d %*s %*d %*d %*u %d %*u %*u %*u %*u %*d %u %*u %u",
			   &p, &out->xfers, &out->slots, &out->slow) == 4 &&
		    p == pid) {
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

TEST_F_TIMEOUT(qos, throttled_cgroup_isolated, 120)
{
	struct cg_report ra = { 0 }, rb = { 0 }, solo = { 0 };
	unsigned int slots = qos_engine_workers();
	unsigned int n_both = 0, n_all = 0, n_slow = 0;
	unsigned int n_polls = 0, n_noa = 0, n_nob = 0, n_idle = 0;
	char cg[128], path[192];
	bool mounted = false;
	int fa, fb;
	pid_t pa, pb;

	if (access(CG_ROOT "/cgroup.controllers", F_OK)) {
		if (mount("none", CG_ROOT, "cgroup2", 0, NULL))
			SKIP(return, "no cgroup v2 at " CG_ROOT ": %s",
			     strerror(errno));
		mounted = true;
	}
	if (write_str(CG_ROOT "/cgroup.subtree_control", "+cpu"))
		SKIP(goto out_umount, "cannot enable the cpu controller");
	/* the rule under test, at its default */
	ASSERT_EQ(0, write_param("slot_slow_ms", 20));
	snprintf(cg, sizeof(cg), CG_ROOT "/hcomm-thr-%d", getpid());
	ASSERT_EQ(0, mkdir(cg, 0755));
	snprintf(path, sizeof(path), "%s/cpu.max", cg);
	if (write_str(path, "5000 100000")) {
		rmdir(cg);
		SKIP(goto out_umount, "no cpu.max (CONFIG_CFS_BANDWIDTH)");
	}

	/* B alone */
	pb = thr_start(&fb, NULL, 500, THR_WINDOW_MS);
	ASSERT_GT(pb, 0);
	EXPECT_EQ(0, read_full(fb, &solo, sizeof(solo), 60000));
	close(fb);
	EXPECT_EQ(0, wait_child_ms(pb, 30000));

	/* A throttled, B next to it; A runs until B is done */
	pa = thr_start(&fa, cg, 0, THR_WARM_MS + THR_WINDOW_MS + 1000);
	ASSERT_GT(pa, 0);
	pb = thr_start(&fb, NULL, THR_WARM_MS, THR_WINDOW_MS);
	ASSERT_GT(pb, 0);
	/* while both have work: how often does A hold every slot? */
	hc_sleep_ms(THR_WARM_MS);
	for (;;) {
		struct pollfd pf = { .fd = fb, .events = POLLIN };
		struct thr_ctx_line la, lb;
		int r = poll(&pf, 1, 10);

		if (r < 0 && errno == EINTR)
			continue;
		if (r != 0)
			break;
		n_polls++;
		if (thr_ctx_line(pa, &la)) {
			n_noa++;
			continue;
		}
		if (thr_ctx_line(pb, &lb)) {
			n_nob++;
			continue;
		}
		if (!la.xfers || !lb.xfers) {
			if (!n_idle++)
				TH_LOG("first sample with one idle: A xfers %d slots %u, B xfers %d slots %u",
				       la.xfers, la.slots, lb.xfers, lb.slots);
			continue;
		}
		n_both++;
		n_slow += la.slow;
		if (la.slots >= slots)
			n_all++;
	}
	EXPECT_EQ(0, read_full(fb, &rb, sizeof(rb), 60000));
	EXPECT_EQ(0, read_full(fa, &ra, sizeof(ra), 60000));
	close(fa);
	close(fb);
	EXPECT_EQ(0, wait_child_ms(pb, 30000));
	EXPECT_EQ(0, wait_child_ms(pa, 30000));
	EXPECT_EQ(0, solo.stage) TH_LOG("B alone: step %d: %d", solo.stage, solo.err);
	EXPECT_EQ(0, rb.stage) TH_LOG("B: step %d: %d", rb.stage, rb.err);
	EXPECT_EQ(0, ra.stage) TH_LOG("A: step %d: %d", ra.stage, ra.err);
	TH_LOG("B alone %.0f MiB/s; next to A throttled to 5%% CPU: B %.0f MiB/s (%.2f of alone), A %.0f MiB/s",
	       solo.busy_ns / (double)MiB / (THR_WINDOW_MS / 1000.0),
	       rb.busy_ns / (double)MiB / (THR_WINDOW_MS / 1000.0),
	       solo.busy_ns ? (double)rb.busy_ns / solo.busy_ns : 0.0,
	       ra.busy_ns / (double)MiB /
	       ((THR_WARM_MS + THR_WINDOW_MS + 1000) / 1000.0));
	TH_LOG("%u samples (A's context missing in %u, B's in %u), %u with both backlogged: A slow in %u, A held all %u slots in %u",
	       n_polls, n_noa, n_nob, n_both, n_slow, slots, n_all);
	EXPECT_GT(solo.busy_ns, 0);
	EXPECT_GE(n_both, 20);
	if (slots > 1)
		EXPECT_LE(n_all, n_both / 10);
	EXPECT_EQ(0, cg_rmdir(cg)) TH_LOG("rmdir %s", cg);
out_umount:
	if (mounted)
		umount(CG_ROOT);
}

TEST_HARNESS_MAIN
