// SPDX-License-Identifier: GPL-2.0
/*
 * hcomm across processes: region keys handed to another process over a
 * socket, GRANT scopes (none, SAME_UID, UID, ANY, revoke), DEREG making a
 * key indistinguishable from a guessed one, GRANT argument errors,
 * put-with-signal (DB_REMOTE) seen through the owner's mapped doorbells and
 * through a parked DB_WAIT, transfers in both directions at odd offsets,
 * and SIGKILL of either process in the middle of 64 MiB transfers.
 * Every test runs through ioctl() and through io_uring passthrough.
 *
 * Process "A" is the test process itself, with a context it opens after
 * the fork; process "B" is an agent child (agent_main) that opens its own
 * context, registers one region and then executes requests that arrive on
 * a SOCK_SEQPACKET socketpair (keys travel in those requests).  Agents
 * never ASSERT: they reply with return codes and byte counts, and the test
 * process asserts.  Every wait has a timeout (poll, io_uring timeouts,
 * DB_WAIT timeout_ns, alarm in the agents), so a kernel that never
 * completes something fails the test instead of hanging it.  The kill
 * tests make both A and B agents, so that either one can be SIGKILLed.
 */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "kselftest_harness.h"
#include "hcomm_fixture.h"

#define ACC_R		HCOMM_ACCESS_REMOTE_READ
#define ACC_W		HCOMM_ACCESS_REMOTE_WRITE
#define ACC_RW		(ACC_R | ACC_W)

#define MSG_TIMEOUT_MS	30000	/* one agent request */
#define CQE_TIMEOUT_MS	20000	/* one completion */
#define AGENT_ALARM_S	110	/* agents die on their own after this */
#define NOBODY		65534

/* ------------------------------------------------------------------ */
/* data patterns                                                       */
/* ------------------------------------------------------------------ */

/* Byte i of a buffer filled with @seed: no short period, seed-dependent. */
static inline uint8_t pat(uint32_t seed, uint64_t i)
{
	uint32_t x = (uint32_t)i * 0x9E3779B1u + seed * 0x85EBCA6Bu +
		     (uint32_t)(i >> 32);

	x ^= x >> 15;
	x *= 0x2C1B3C6Du;
	x ^= x >> 12;
	return (uint8_t)x;
}

static void fill(uint8_t *buf, uint64_t off, uint64_t len, uint32_t seed)
{
	uint64_t i;

	for (i = off; i < off + len; i++)
		buf[i] = pat(seed, i);
}

/*
 * Compare buf[lo, hi) with what it must hold after copying @len bytes
 * from offset @src_off of a buffer filled with @src_seed to offset
 * @dst_off of this one, which was filled with @seed.  Returns the number
 * of wrong bytes; *first is the first wrong index.
 */
static uint64_t mismatches(const uint8_t *buf, uint64_t lo, uint64_t hi,
			   uint32_t seed, uint32_t src_seed, uint64_t src_off,
			   uint64_t dst_off, uint64_t len, uint64_t *first)
{
	uint64_t j, bad = 0;

	*first = ~0ULL;
	for (j = lo; j < hi; j++) {
		uint8_t want = (j >= dst_off && j - dst_off < len) ?
			pat(src_seed, src_off + (j - dst_off)) : pat(seed, j);

		if (buf[j] != want) {
			if (!bad)
				*first = j;
			bad++;
		}
	}
	return bad;
}

/* The checked window around a copy: a page either side, clipped. */
static void window(uint64_t size, uint64_t dst_off, uint64_t len,
		   uint64_t *lo, uint64_t *hi)
{
	*lo = dst_off > PG ? dst_off - PG : 0;
	*hi = dst_off + len + PG < size ? dst_off + len + PG : size;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* ------------------------------------------------------------------ */
/* commands with timeouts                                              */
/* ------------------------------------------------------------------ */

/* Queue one hcomm command on @ring without waiting for it. */
static int uring_queue(struct io_uring *ring, int fd, unsigned int cmd,
		       void *arg, uint64_t ud)
{
	struct hcomm_uring_cmd pl = { .addr = (uintptr_t)arg,
				      .size = _IOC_SIZE(cmd) };
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	if (!sqe)
		return HC_XPORT_ERR - 1;
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = cmd;
	memcpy((char *)sqe + offsetof(struct io_uring_sqe, cmd), &pl,
	       sizeof(pl));
	sqe->user_data = ud;
	return io_uring_submit(ring) == 1 ? 0 : HC_XPORT_ERR - 2;
}

/* Reap one CQE, waiting at most @ms: 0, or -ETIME when none came. */
static int uring_reap(struct io_uring *ring, int ms, int *res, uint64_t *ud)
{
	struct __kernel_timespec ts = { .tv_sec = ms / 1000,
					.tv_nsec = (long)(ms % 1000) * 1000000L };
	struct io_uring_cqe *cqe;
	int ret;

	ret = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
	if (ret)
		return ret;
	*res = cqe->res;
	*ud = cqe->user_data;
	io_uring_cqe_seen(ring, cqe);
	return 0;
}

#define UD_XFER		0x5846455200000000ULL
#define UD_WAIT		0x5741495400000000ULL

/*
 * One command through ioctl() (ring NULL) or the ring; the ring path waits
 * at most CQE_TIMEOUT_MS for the completion.
 */
static int cmd_timed(int fd, struct io_uring *r, unsigned int cmd, void *arg)
{
	uint64_t ud = 0;
	int ret, res = 0;

	if (!r)
		return ioctl(fd, cmd, arg) < 0 ? -errno : 0;
	ret = uring_queue(r, fd, cmd, arg, UD_XFER);
	if (ret)
		return ret;
	ret = uring_reap(r, CQE_TIMEOUT_MS, &res, &ud);
	if (ret == -ETIME) {
		fprintf(stderr, "# command 0x%x: no CQE within %d ms\n", cmd,
			CQE_TIMEOUT_MS);
		return HC_XPORT_ERR - 10;
	}
	if (ret)
		return HC_XPORT_ERR - 11;
	if (ud != UD_XFER)
		return HC_XPORT_ERR - 12;
	return res;
}

static void xfer_init(struct hcomm_xfer *x, uint64_t sk, uint64_t so,
		      uint64_t dk, uint64_t dof, uint64_t len, uint32_t flags,
		      uint32_t dbi, uint64_t dbv)
{
	memset(x, 0, sizeof(*x));
	x->src_key = sk;
	x->src_off = so;
	x->dst_key = dk;
	x->dst_off = dof;
	x->len = len;
	x->flags = flags;
	x->db_index = dbi;
	x->db_value = dbv;
}

static int hc_xfer(int fd, struct io_uring *r, uint64_t sk, uint64_t so,
		   uint64_t dk, uint64_t dof, uint64_t len, uint32_t flags,
		   uint32_t dbi, uint64_t dbv, struct hcomm_xfer *out)
{
	struct hcomm_xfer tmp, *x = out ? out : &tmp;

	xfer_init(x, sk, so, dk, dof, len, flags, dbi, dbv);
	return cmd_timed(fd, r, HCOMM_CMD_XFER, x);
}

static int hc_grant(int fd, struct io_uring *r, uint32_t region,
		    uint32_t scope, uint32_t access, uint32_t uid)
{
	struct hcomm_grant g = { .region = region, .scope = scope,
				 .access = access, .uid = uid };

	return submit(fd, r, HCOMM_CMD_GRANT, &g);
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

#define WAIT_STAT(f, want, ms, s) \
	wait_stat(offsetof(struct hcomm_stats, f), (want), (ms), (s))

/* Poll (without sleeping) until transfers are in flight; their number. */
static uint64_t wait_xfers_active(uint64_t base, int ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000ULL;
	struct hcomm_stats s;

	do {
		if (hcomm_stats_read(&s))
			return 0;
		if (s.xfers_active > base)
			return s.xfers_active - base;
	} while (now_ns() < end);
	return 0;
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

static uint64_t random_key(void)
{
	uint64_t k = 0;

	while (getrandom(&k, sizeof(k), 0) != sizeof(k) || !k)
		;
	return k;
}

/* ------------------------------------------------------------------ */
/* the agent                                                           */
/* ------------------------------------------------------------------ */

enum {
	OP_HELLO = 1,	/* agent -> test: ret, a0 key, a1 region */
	OP_XFER,	/* a0..a7 as struct hcomm_xfer -> ret, a0 done */
	OP_FILL,	/* a0 off, a1 len, a2 seed */
	OP_CHECK,	/* a0..a6 as mismatches() -> a0 wrong bytes, a1 first */
	OP_GRANT,	/* a0 scope, a1 access, a2 uid -> ret */
	OP_DEREG,	/* -> ret */
	OP_LOOP,	/* a0 peer key, a1 len, a2 depth -> see agent_loop */
	OP_STARTED,	/* agent -> test: the loop's first transfer is done */
	OP_HAMMER,	/* a0 peer key, a1 rounds -> see agent_hammer */
	OP_EXIT,
};

struct msg {
	uint32_t op;
	int32_t ret;
	uint64_t a[8];
};

static int msg_send(int fd, const struct msg *m)
{
	return send(fd, m, sizeof(*m), MSG_NOSIGNAL) == sizeof(*m) ? 0 : -EPIPE;
}

/* 0, -ETIMEDOUT, or -EPIPE when the peer is gone. */
static int msg_recv(int fd, struct msg *m, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;
	int ret;

	do
		ret = poll(&p, 1, ms);
	while (ret < 0 && errno == EINTR);
	if (ret == 0)
		return -ETIMEDOUT;
	if (ret < 0)
		return -errno;
	n = recv(fd, m, sizeof(*m), 0);
	return n == sizeof(*m) ? 0 : -EPIPE;
}

struct agent_cfg {
	bool uring;
	bool nobody;		/* become uid 65534 before opening */
	bool pattern;		/* fill with pat(seed), else memset */
	uint64_t size;
	uint32_t seed;
	uint32_t access;
};

struct agent {
	pid_t pid;
	int sock;
	uint64_t key;
	uint32_t region;
	uint64_t size;
	uint32_t seed;
};

/*
 * OP_HAMMER: @a1 rounds of an 8-byte read from the peer's region (key a0)
 * and an 8-byte write of our own bytes into it, each waited for.
 * Reply: a0 reads done, a1 writes done, a2 EACCES, a3 other results,
 * a4 the last other result.
 */
static void agent_hammer(struct hc_ctx *c, uint64_t own, struct msg *m)
{
	uint64_t peer = m->a[0], rounds = m->a[1], i;
	uint64_t ok[2] = { 0, 0 }, eacces = 0, other = 0;
	int64_t last_other = 0;

	for (i = 0; i < 2 * rounds; i++) {
		bool wr = i & 1;
		struct hcomm_xfer x;
		int res;

		xfer_init(&x, wr ? own : peer, 0, wr ? peer : own, wr ? 64 : 0,
			  8, 0, 0, 0);
		res = cmd_timed(c->fd, c->r, HCOMM_CMD_XFER, &x);
		if (res == 0) {
			ok[wr]++;
		} else if (res == -EACCES) {
			eacces++;
		} else {
			other++;
			last_other = res;
		}
	}
	m->a[0] = ok[0];
	m->a[1] = ok[1];
	m->a[2] = eacces;
	m->a[3] = other;
	m->a[4] = (uint64_t)last_other;
}

/*
 * OP_LOOP: transfers of @len bytes between the peer's region (key a0) and
 * our own, alternating directions, @depth in flight through the ring (one
 * at a time through ioctl), until one is refused with ENOENT (the peer is
 * gone) or 60 s passed.  OP_STARTED goes out after the first success.
 * Reply: a0 ok, a1 ENOENT, a2 ECANCELED, a3 other results, a4 the last
 * other result, a5 transfers completed.
 */
static void agent_loop(int sock, struct hc_ctx *c, uint64_t own, struct msg *m)
{
	uint64_t peer = m->a[0], len = m->a[1], deadline;
	unsigned int depth = m->a[2] ? (unsigned int)m->a[2] : 1, inflight = 0;
	uint64_t ok = 0, enoent = 0, ecanceled = 0, other = 0, total = 0;
	struct hcomm_xfer xs[8];
	int64_t last_other = 0;
	bool stop = false, started = false;
	unsigned int i;

	if (depth > ARRAY_SIZE(xs) || !c->r)
		depth = c->r ? ARRAY_SIZE(xs) : 1;
	deadline = now_ns() + 60ULL * 1000000000ULL;

	for (i = 0; i < depth; i++) {
		if (i & 1)
			xfer_init(&xs[i], own, 0, peer, 0, len, 0, 0, 0);
		else
			xfer_init(&xs[i], peer, 0, own, 0, len, 0, 0, 0);
		if (!c->r)
			break;
		xs[i].flags = HCOMM_XFER_NO_INLINE;
		if (uring_queue(c->r, c->fd, HCOMM_CMD_XFER, &xs[i], i)) {
			other++;
			last_other = HC_XPORT_ERR;
			stop = true;
			break;
		}
		inflight++;
	}

	for (i = 0; c->r ? inflight > 0 : !stop; i++) {
		uint64_t ud = 0;
		int res = 0, ret;

		if (c->r) {
			ret = uring_reap(c->r, CQE_TIMEOUT_MS, &res, &ud);
			if (ret) {
				/* never completed: report it as a hang */
				other++;
				last_other = ret == -ETIME ? -ETIMEDOUT : ret;
				break;
			}
			inflight--;
		} else {
			ud = i & 1;
			xfer_init(&xs[0], ud ? own : peer, 0, ud ? peer : own,
				  0, len, 0, 0, 0);
			res = ioctl(c->fd, HCOMM_CMD_XFER, &xs[0]) < 0 ?
			      -errno : 0;
		}
		total++;
		if (res == 0) {
			ok++;
			if (!started) {
				struct msg s = { .op = OP_STARTED };

				started = true;
				msg_send(sock, &s);
			}
		} else if (res == -ENOENT) {
			enoent++;
			stop = true;
		} else if (res == -ECANCELED) {
			ecanceled++;
		} else {
			other++;
			last_other = res;
			stop = true;
		}
		if (now_ns() > deadline)
			stop = true;
		if (c->r && !stop && ud < depth) {
			xfer_init(&xs[ud], (ud & 1) ? own : peer, 0,
				  (ud & 1) ? peer : own, 0, len,
				  HCOMM_XFER_NO_INLINE, 0, 0);
			if (uring_queue(c->r, c->fd, HCOMM_CMD_XFER, &xs[ud],
					ud)) {
				other++;
				last_other = HC_XPORT_ERR;
				stop = true;
			} else {
				inflight++;
			}
		}
	}
	memset(m, 0, sizeof(*m));
	m->op = OP_LOOP;
	m->a[0] = ok;
	m->a[1] = enoent;
	m->a[2] = ecanceled;
	m->a[3] = other;
	m->a[4] = (uint64_t)last_other;
	m->a[5] = total;
}

static void __attribute__((noreturn))
agent_main(int sock, pid_t parent, const struct agent_cfg *cfg)
{
	struct hcomm_reg_mem reg;
	struct hc_ctx c;
	struct msg m;
	uint8_t *buf;
	int ret;

	alarm(AGENT_ALARM_S);
	memset(&m, 0, sizeof(m));
	m.op = OP_HELLO;
	if (cfg->nobody) {
		struct rlimit rl = { 2 * cfg->size + MiB, 2 * cfg->size + MiB };

		if (setrlimit(RLIMIT_MEMLOCK, &rl) || become_nobody()) {
			m.ret = -1000;
			msg_send(sock, &m);
			_exit(1);
		}
	}
	/* die with the test process (set after the uid change clears it) */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
		_exit(1);
	ret = hc_ctx_open(&c, cfg->uring, 0);
	if (ret) {
		m.ret = -1001;
		msg_send(sock, &m);
		_exit(1);
	}
	buf = map_anon(cfg->size);
	if (!buf) {
		m.ret = -1002;
		msg_send(sock, &m);
		_exit(1);
	}
	if (cfg->pattern)
		fill(buf, 0, cfg->size, cfg->seed);
	else
		memset(buf, (int)cfg->seed, cfg->size);
	ret = hc_reg_mem(c.fd, c.r, buf, cfg->size, cfg->access, &reg);
	m.ret = ret;
	m.a[0] = reg.key;
	m.a[1] = reg.region;
	if (msg_send(sock, &m) || ret)
		_exit(1);

	for (;;) {
		uint64_t first;

		if (msg_recv(sock, &m, -1))
			_exit(0);	/* the test process is gone */
		switch (m.op) {
		case OP_XFER: {
			struct hcomm_xfer x;

			xfer_init(&x, m.a[0], m.a[1], m.a[2], m.a[3], m.a[4],
				  (uint32_t)m.a[5], (uint32_t)m.a[6], m.a[7]);
			m.ret = cmd_timed(c.fd, c.r, HCOMM_CMD_XFER, &x);
			m.a[0] = x.done;
			m.a[1] = x.engine;
			break;
		}
		case OP_FILL:
			if (m.a[0] + m.a[1] > cfg->size) {
				m.ret = -ERANGE;
				break;
			}
			fill(buf, m.a[0], m.a[1], (uint32_t)m.a[2]);
			m.ret = 0;
			break;
		case OP_CHECK:
			if (m.a[0] > m.a[1] || m.a[1] > cfg->size) {
				m.ret = -ERANGE;
				break;
			}
			m.a[0] = mismatches(buf, m.a[0], m.a[1],
					    (uint32_t)m.a[2], (uint32_t)m.a[3],
					    m.a[4], m.a[5], m.a[6], &first);
			m.a[1] = first;
			m.ret = 0;
			break;
		case OP_GRANT:
			m.ret = hc_grant(c.fd, c.r, reg.region,
					 (uint32_t)m.a[0], (uint32_t)m.a[1],
					 (uint32_t)m.a[2]);
			break;
		case OP_DEREG:
			m.ret = hc_dereg(c.fd, c.r, reg.region);
			break;
		case OP_LOOP:
			agent_loop(sock, &c, reg.key, &m);
			m.ret = 0;
			break;
		case OP_HAMMER:
			agent_hammer(&c, reg.key, &m);
			m.ret = 0;
			break;
		case OP_EXIT:
			hc_ctx_close(&c);
			_exit(0);
		default:
			m.ret = -EOPNOTSUPP;
			break;
		}
		if (msg_send(sock, &m))
			_exit(0);
	}
}

/*
 * Fork an agent.  The child first lets go of everything it inherited (the
 * fixture's ring and context, the sockets of other agents), so that only
 * the test process keeps its contexts alive and each agent sees EOF when
 * the test process goes.
 */
static int agent_start(FIXTURE_DATA(hcomm) *self, struct agent *ag,
		       const struct agent_cfg *cfg)
{
	pid_t parent = getpid();
	int sv[2];
	struct msg m;
	int ret;

	memset(ag, 0, sizeof(*ag));
	ag->sock = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -errno;
	ag->pid = fork();
	if (ag->pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -errno;
	}
	if (ag->pid == 0) {
		int s;

		if (self->r)
			io_uring_queue_exit(self->r);
		self->r = NULL;
		s = dup2(sv[1], 3) < 0 ? sv[1] : 3;
		close_range(s + 1, ~0U, 0);
		if (s != 3)
			close_range(3, s - 1, 0);
		agent_main(s, parent, cfg);
	}
	close(sv[1]);
	ag->sock = sv[0];
	ag->size = cfg->size;
	ag->seed = cfg->seed;
	ret = msg_recv(ag->sock, &m, MSG_TIMEOUT_MS);
	if (ret)
		return ret;
	if (m.op != OP_HELLO)
		return -EPROTO;
	if (m.ret)
		return m.ret;
	ag->key = m.a[0];
	ag->region = (uint32_t)m.a[1];
	return 0;
}

/* Send a request and wait for its reply (m is both). */
static int agent_req(struct agent *ag, struct msg *m)
{
	uint32_t op = m->op;
	int ret;

	ret = msg_send(ag->sock, m);
	if (ret)
		return ret;
	do
		ret = msg_recv(ag->sock, m, MSG_TIMEOUT_MS);
	while (!ret && m->op == OP_STARTED && op != OP_STARTED);
	if (!ret && m->op != op)
		return -EPROTO;
	return ret;
}

/* The agent's XFER: its result, or a transport error below -99999. */
static int agent_xfer(struct agent *ag, uint64_t sk, uint64_t so, uint64_t dk,
		      uint64_t dof, uint64_t len, uint32_t flags, uint32_t dbi,
		      uint64_t dbv, uint64_t *done)
{
	struct msg m = { .op = OP_XFER,
			 .a = { sk, so, dk, dof, len, flags, dbi, dbv } };
	int ret = agent_req(ag, &m);

	if (ret)
		return HC_XPORT_ERR - 100 + ret;
	if (done)
		*done = m.a[0];
	return m.ret;
}

static int agent_fill(struct agent *ag, uint64_t off, uint64_t len,
		      uint32_t seed)
{
	struct msg m = { .op = OP_FILL, .a = { off, len, seed } };
	int ret = agent_req(ag, &m);

	return ret ? ret : m.ret;
}

/* Mismatching bytes of the agent's buffer in [lo, hi), or ~0 on error. */
static uint64_t agent_check(struct agent *ag, uint64_t lo, uint64_t hi,
			    uint32_t seed, uint32_t src_seed, uint64_t src_off,
			    uint64_t dst_off, uint64_t len, uint64_t *first)
{
	struct msg m = { .op = OP_CHECK,
			 .a = { lo, hi, seed, src_seed, src_off, dst_off,
				len } };

	*first = ~0ULL;
	if (agent_req(ag, &m) || m.ret)
		return ~0ULL;
	*first = m.a[1];
	return m.a[0];
}

static int agent_grant(struct agent *ag, uint32_t scope, uint32_t access,
		       uint32_t uid)
{
	struct msg m = { .op = OP_GRANT, .a = { scope, access, uid } };
	int ret = agent_req(ag, &m);

	return ret ? ret : m.ret;
}

static int agent_dereg(struct agent *ag)
{
	struct msg m = { .op = OP_DEREG };
	int ret = agent_req(ag, &m);

	return ret ? ret : m.ret;
}

/* Ask the agent to exit and reap it: its exit code, or < 0. */
static int agent_stop(struct agent *ag)
{
	struct msg m = { .op = OP_EXIT };
	int ret;

	if (ag->pid <= 0)
		return 0;
	if (ag->sock >= 0) {
		msg_send(ag->sock, &m);
		close(ag->sock);
		ag->sock = -1;
	}
	ret = wait_child_ms(ag->pid, 20000);
	if (ret == -2) {
		kill(ag->pid, SIGKILL);
		wait_child_ms(ag->pid, 5000);
	}
	ag->pid = 0;
	return ret;
}

/* ------------------------------------------------------------------ */
/* process A: the test process's own context                           */
/* ------------------------------------------------------------------ */

struct side {
	struct hc_ctx c;
	uint8_t *buf;
	uint64_t size;
	uint32_t seed;
	struct hcomm_reg_mem reg;
	struct hcomm_info info;
};

static void side_open(struct __test_metadata *_metadata, struct side *a,
		      bool uring, uint64_t size, uint32_t seed, uint32_t access)
{
	int ret;

	memset(a, 0, sizeof(*a));
	a->c.fd = -1;
	ret = hc_ctx_open(&a->c, uring, 0);
	ASSERT_EQ(0, ret) TH_LOG("A: open %s: %d", HCOMM_DEV, ret);
	ASSERT_EQ(0, hc_info(a->c.fd, a->c.r, &a->info));
	ASSERT_TRUE(a->info.features & HCOMM_FEAT_XFER)
		TH_LOG("features 0x%llx lack HCOMM_FEAT_XFER",
		       (unsigned long long)a->info.features);
	a->buf = map_anon(size);
	ASSERT_NE(NULL, a->buf);
	a->size = size;
	a->seed = seed;
	fill(a->buf, 0, size, seed);
	ret = hc_reg_mem(a->c.fd, a->c.r, a->buf, size, access, &a->reg);
	ASSERT_EQ(0, ret) TH_LOG("A: REG_MEM %llu bytes: %d",
				 (unsigned long long)size, ret);
}

static void side_close(struct side *a)
{
	hc_ctx_close(&a->c);
	if (a->buf)
		munmap(a->buf, a->size);
	a->buf = NULL;
}

/* Assert that A's buffer holds exactly what the described copy leaves. */
#define ASSERT_SIDE_DATA(a, lo, hi, src_seed, src_off, dst_off, len, what) \
do { \
	uint64_t __first, __bad = mismatches((a)->buf, (lo), (hi), \
					     (a)->seed, (src_seed), \
					     (src_off), (dst_off), (len), \
					     &__first); \
	ASSERT_EQ(0, __bad) TH_LOG("%s: %llu wrong bytes in A's region, " \
				   "first at offset %llu", (what), \
				   (unsigned long long)__bad, \
				   (unsigned long long)__first); \
} while (0)

#define ASSERT_AGENT_DATA(ag, lo, hi, src_seed, src_off, dst_off, len, what) \
do { \
	uint64_t __first, __bad = agent_check((ag), (lo), (hi), (ag)->seed, \
					      (src_seed), (src_off), \
					      (dst_off), (len), &__first); \
	ASSERT_EQ(0, __bad) TH_LOG("%s: %llu wrong bytes in B's region " \
				   "(~0: agent gone), first at offset %llu", \
				   (what), (unsigned long long)__bad, \
				   (unsigned long long)__first); \
} while (0)

/* Both whole regions still hold their own pattern. */
#define ASSERT_UNTOUCHED(a, ag, what) do { \
	ASSERT_SIDE_DATA(a, 0, (a)->size, 0, 0, 0, 0, what); \
	ASSERT_AGENT_DATA(ag, 0, (ag)->size, 0, 0, 0, 0, what); \
} while (0)

#define ASSERT_XFER(want, got, what) \
	ASSERT_EQ((want), (got)) TH_LOG("%s: XFER gave %d (%s), expected %d", \
					(what), (got), strerror(-(got)), \
					(want))

static struct agent_cfg small_cfg(const FIXTURE_VARIANT(hcomm) *variant,
				  uint32_t seed)
{
	struct agent_cfg cfg = {
		.uring = variant->uring, .pattern = true, .size = 64 * KiB,
		.seed = seed, .access = HCOMM_ACCESS_ALL,
	};

	return cfg;
}

/* ------------------------------------------------------------------ */
/* access control                                                      */
/* ------------------------------------------------------------------ */

/*
 * No GRANT: B gets EACCES reading from and writing into A's region, and
 * A gets the same for B's; a guessed key is ENOENT in both directions.
 * Nothing is copied.  The owner itself may use its own region.
 */
TEST_F(hcomm, no_grant_eacces)
{
	struct agent_cfg cfg = small_cfg(variant, 2);
	struct hcomm_stats s0, s1;
	struct agent b;
	struct side a;
	uint64_t guess;
	int ret;

	ASSERT_EQ(0, agent_start(self, &b, &cfg));
	side_open(_metadata, &a, variant->uring, 64 * KiB, 1,
		  HCOMM_ACCESS_ALL);
	guess = random_key();
	ASSERT_NE(a.reg.key, guess);
	ASSERT_NE(b.key, guess);

	ASSERT_STATS(s0);
	ret = agent_xfer(&b, a.reg.key, 0, b.key, 0, PG, 0, 0, 0, NULL);
	ASSERT_XFER(-EACCES, ret, "B reads A's region without a grant");
	ret = agent_xfer(&b, b.key, 0, a.reg.key, 0, PG, 0, 0, 0, NULL);
	ASSERT_XFER(-EACCES, ret, "B writes A's region without a grant");
	ret = hc_xfer(a.c.fd, a.c.r, b.key, 1, a.reg.key, 3, 100, 0, 0, 0,
		      NULL);
	ASSERT_XFER(-EACCES, ret, "A reads B's region without a grant");
	ret = hc_xfer(a.c.fd, a.c.r, a.reg.key, 1, b.key, 3, 100, 0, 0, 0,
		      NULL);
	ASSERT_XFER(-EACCES, ret, "A writes B's region without a grant");
	ret = agent_xfer(&b, guess, 0, b.key, 0, PG, 0, 0, 0, NULL);
	ASSERT_XFER(-ENOENT, ret, "B reads from a guessed key");
	ret = agent_xfer(&b, b.key, 0, guess, 0, PG, 0, 0, 0, NULL);
	ASSERT_XFER(-ENOENT, ret, "B writes to a guessed key");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cmd_xfer, 6);
	ASSERT_DELTA(s0, s1, cmd_errors, 6);
	ASSERT_DELTA(s0, s1, xfer_bytes, 0);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1))
		hcomm_gauges_dump(stderr, "after refused XFERs", &s0, &s1);
	ASSERT_UNTOUCHED(&a, &b, "refused transfers");

	/* the owner needs no grant for its own region */
	ret = hc_xfer(a.c.fd, a.c.r, a.reg.key, 5, a.reg.key, 32 * KiB + 7,
		      1000, 0, 0, 0, NULL);
	ASSERT_XFER(0, ret, "A copies inside its own region");
	ASSERT_SIDE_DATA(&a, 0, a.size, a.seed, 5, 32 * KiB + 7, 1000,
			 "A's own copy");
	ret = agent_xfer(&b, b.key, 9, b.key, 40 * KiB + 1, 3000, 0, 0, 0,
			 NULL);
	ASSERT_XFER(0, ret, "B copies inside its own region");
	ASSERT_AGENT_DATA(&b, 0, b.size, b.seed, 9, 40 * KiB + 1, 3000,
			  "B's own copy");

	ASSERT_EQ(0, agent_stop(&b));
	side_close(&a);
}

/*
 * GRANT SAME_UID REMOTE_READ: B (same uid) reads A's region into its own,
 * but writing into A's region stays EACCES; a failed GRANT leaves the
 * grant in force; SAME_UID with REMOTE_WRITE then lets B write.
 */
TEST_F(hcomm, grant_same_uid_read_only)
{
	struct agent_cfg cfg = small_cfg(variant, 2);
	struct hcomm_stats s0, s1;
	struct hcomm_grant g;
	struct agent b;
	struct side a;
	uint64_t done = 0;
	int ret;

	ASSERT_EQ(0, agent_start(self, &b, &cfg));
	side_open(_metadata, &a, variant->uring, 64 * KiB, 1,
		  HCOMM_ACCESS_ALL);

	ASSERT_STATS(s0);
	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region,
			      HCOMM_GRANT_SAME_UID, ACC_R, 0));
	ret = agent_xfer(&b, a.reg.key, 3, b.key, 5, 3000, 0, 0, 0, &done);
	ASSERT_XFER(0, ret, "B reads A's region under SAME_UID READ");
	if (!variant->uring) {
		ASSERT_EQ(3000, done) TH_LOG("done %llu, want 3000",
					     (unsigned long long)done);
	}
	ASSERT_AGENT_DATA(&b, 0, b.size, a.seed, 3, 5, 3000,
			  "B's copy of A's bytes");
	ret = agent_xfer(&b, b.key, 0, a.reg.key, 0, 100, 0, 0, 0, NULL);
	ASSERT_XFER(-EACCES, ret, "B writes A's region under a read grant");
	ASSERT_SIDE_DATA(&a, 0, a.size, 0, 0, 0, 0,
			 "A's region after a refused write");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cmd_grant, 1);
	ASSERT_DELTA(s0, s1, cmd_xfer, 2);
	ASSERT_DELTA(s0, s1, cmd_errors, 1);
	ASSERT_DELTA(s0, s1, xfer_bytes, 3000);

	/* a refused GRANT does not replace the one in force */
	memset(&g, 0, sizeof(g));
	g.region = a.reg.region;
	g.scope = 7;
	g.access = ACC_RW;
	ASSERT_EQ(-EINVAL, submit(a.c.fd, a.c.r, HCOMM_CMD_GRANT, &g));
	ret = agent_xfer(&b, a.reg.key, 100, b.key, 200, 50, 0, 0, 0, NULL);
	ASSERT_XFER(0, ret, "read after a refused GRANT");
	ret = agent_xfer(&b, b.key, 0, a.reg.key, 0, 100, 0, 0, 0, NULL);
	ASSERT_XFER(-EACCES, ret, "write after a refused GRANT");

	/* SAME_UID with both bits: now B may write */
	ASSERT_EQ(0, agent_fill(&b, 0, b.size, b.seed));
	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region,
			      HCOMM_GRANT_SAME_UID, ACC_RW, 0));
	ret = agent_xfer(&b, b.key, 7, a.reg.key, 11, 5000, 0, 0, 0, NULL);
	ASSERT_XFER(0, ret, "B writes A's region under SAME_UID RW");
	ASSERT_SIDE_DATA(&a, 0, a.size, b.seed, 7, 11, 5000,
			 "A's region after B's write");

	ASSERT_EQ(0, agent_stop(&b));
	side_close(&a);
}

/*
 * GRANT ANY read+write: B writes into A's region and A checks every byte;
 * B reads it back; then ANY with REMOTE_READ only replaces the grant and
 * writes are refused again.
 */
TEST_F(hcomm, grant_any_read_write)
{
	struct agent_cfg cfg = small_cfg(variant, 2);
	struct hcomm_stats s0, s1;
	struct agent b;
	struct side a;
	int ret;

	ASSERT_EQ(0, agent_start(self, &b, &cfg));
	side_open(_metadata, &a, variant->uring, 64 * KiB, 1,
		  HCOMM_ACCESS_ALL);
	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region, HCOMM_GRANT_ANY,
			      ACC_RW, 0));

	ASSERT_STATS(s0);
	ret = agent_xfer(&b, b.key, 4097, a.reg.key, 8191, 10001, 0, 0, 0,
			 NULL);
	ASSERT_XFER(0, ret, "B writes A's region under ANY RW");
	ASSERT_SIDE_DATA(&a, 0, a.size, b.seed, 4097, 8191, 10001,
			 "A's region after B's write");
	/* B reads back what it wrote, into another place of its own */
	ret = agent_xfer(&b, a.reg.key, 8191, b.key, 30001, 10001, 0, 0, 0,
			 NULL);
	ASSERT_XFER(0, ret, "B reads A's region under ANY RW");
	ASSERT_AGENT_DATA(&b, 0, b.size, b.seed, 4097, 30001, 10001,
			  "B's read-back");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cmd_xfer, 2);
	ASSERT_DELTA(s0, s1, cmd_errors, 0);
	ASSERT_DELTA(s0, s1, xfer_bytes, 2 * 10001);

	/* the new grant replaces the old one */
	fill(a.buf, 0, a.size, a.seed);
	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region, HCOMM_GRANT_ANY,
			      ACC_R, 0));
	ret = agent_xfer(&b, b.key, 0, a.reg.key, 0, 10, 0, 0, 0, NULL);
	ASSERT_XFER(-EACCES, ret, "write after ANY RW became ANY R");
	ASSERT_SIDE_DATA(&a, 0, a.size, 0, 0, 0, 0, "A after a refused write");
	ret = agent_xfer(&b, a.reg.key, 1, b.key, 2, 10, 0, 0, 0, NULL);
	ASSERT_XFER(0, ret, "read under ANY R");

	ASSERT_EQ(0, agent_stop(&b));
	side_close(&a);
}

/*
 * B runs as uid 65534.  SAME_UID (A is root) refuses it; GRANT_UID 65534
 * lets it in with exactly the bits granted; a grant for another uid does
 * not; ANY does; NONE revokes.
 */
TEST_F(hcomm, grant_uid_other_user)
{
	struct agent_cfg cfg = small_cfg(variant, 2);
	struct agent b;
	struct side a;
	int ret;

	cfg.nobody = true;
	ASSERT_EQ(0, agent_start(self, &b, &cfg))
		TH_LOG("agent as uid %d failed to start", NOBODY);
	side_open(_metadata, &a, variant->uring, 64 * KiB, 1,
		  HCOMM_ACCESS_ALL);
	ASSERT_EQ(0, geteuid()) TH_LOG("the test runs as root");

#define B_READ(want, what) do { \
	ret = agent_xfer(&b, a.reg.key, 11, b.key, 13, 2000, 0, 0, 0, NULL); \
	ASSERT_XFER(want, ret, what); \
} while (0)
#define B_WRITE(want, what) do { \
	ret = agent_xfer(&b, b.key, 17, a.reg.key, 19, 3000, 0, 0, 0, NULL); \
	ASSERT_XFER(want, ret, what); \
} while (0)

	B_READ(-EACCES, "uid 65534, no grant, read");
	B_WRITE(-EACCES, "uid 65534, no grant, write");

	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region,
			      HCOMM_GRANT_SAME_UID, ACC_RW, 0));
	B_READ(-EACCES, "uid 65534 vs SAME_UID (root), read");
	B_WRITE(-EACCES, "uid 65534 vs SAME_UID (root), write");
	ASSERT_UNTOUCHED(&a, &b, "SAME_UID refused for another uid");

	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region, HCOMM_GRANT_UID,
			      ACC_R, NOBODY));
	B_READ(0, "GRANT_UID 65534 READ, read");
	ASSERT_AGENT_DATA(&b, 0, b.size, a.seed, 11, 13, 2000,
			  "B (uid 65534) read A's bytes");
	ASSERT_EQ(0, agent_fill(&b, 0, b.size, b.seed));
	B_WRITE(-EACCES, "GRANT_UID 65534 READ, write");
	ASSERT_SIDE_DATA(&a, 0, a.size, 0, 0, 0, 0, "A after a refused write");

	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region, HCOMM_GRANT_UID,
			      ACC_RW, NOBODY));
	B_WRITE(0, "GRANT_UID 65534 RW, write");
	ASSERT_SIDE_DATA(&a, 0, a.size, b.seed, 17, 19, 3000,
			 "A after uid 65534 wrote");
	fill(a.buf, 0, a.size, a.seed);

	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region, HCOMM_GRANT_UID,
			      ACC_RW, 1234));
	B_READ(-EACCES, "GRANT_UID 1234, caller 65534, read");
	B_WRITE(-EACCES, "GRANT_UID 1234, caller 65534, write");
	ASSERT_UNTOUCHED(&a, &b, "grant for another uid");

	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region, HCOMM_GRANT_ANY,
			      ACC_RW, 0));
	B_READ(0, "ANY RW, read");
	ASSERT_AGENT_DATA(&b, 0, b.size, a.seed, 11, 13, 2000, "ANY read");
	ASSERT_EQ(0, agent_fill(&b, 0, b.size, b.seed));
	B_WRITE(0, "ANY RW, write");
	ASSERT_SIDE_DATA(&a, 0, a.size, b.seed, 17, 19, 3000, "ANY write");
	fill(a.buf, 0, a.size, a.seed);

	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region, HCOMM_GRANT_NONE,
			      0, 0));
	B_READ(-EACCES, "revoked, read");
	B_WRITE(-EACCES, "revoked, write");
	ASSERT_UNTOUCHED(&a, &b, "after the revoke");
#undef B_READ
#undef B_WRITE

	ASSERT_EQ(0, agent_stop(&b));
	side_close(&a);
}

/*
 * A grant changes as one unit.  A flips its region's grant between
 * (ANY, REMOTE_READ) and (UID 1234, REMOTE_READ|REMOTE_WRITE) as fast as
 * it can while B (uid 65534, neither 1234 nor A's uid) reads and writes 8
 * bytes of it in a loop.  Neither grant ever lets B write: a grant whose
 * scope, access and uid were published separately gives (ANY, READ|WRITE)
 * for an instant in both directions of the flip.  B's reads succeed under
 * the first grant and fail under the second, which shows that the flips
 * and B's transfers overlapped.
 */
struct flipper {
	struct side *a;
	volatile int stop;
	uint64_t flips;
	int err;
};

static void *flip_fn(void *arg)
{
	struct flipper *f = arg;

	while (!f->stop && !f->err) {
		bool any = !(f->flips & 1);

		f->err = hc_grant(f->a->c.fd, f->a->c.r, f->a->reg.region,
				  any ? HCOMM_GRANT_UID : HCOMM_GRANT_ANY,
				  any ? ACC_RW : ACC_R, any ? 1234 : 0);
		f->flips++;
	}
	return NULL;
}

TEST_F(hcomm, grant_change_atomic)
{
	struct agent_cfg cfg = small_cfg(variant, 2);
	struct flipper f = { 0 };
	struct msg m = { .op = OP_HAMMER };
	struct agent b;
	struct side a;
	uint64_t rounds;
	pthread_t th;
	int ret;

	cfg.nobody = true;
	ASSERT_EQ(0, agent_start(self, &b, &cfg))
		TH_LOG("agent as uid %d failed to start", NOBODY);
	side_open(_metadata, &a, variant->uring, 64 * KiB, 1,
		  HCOMM_ACCESS_ALL);
	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region, HCOMM_GRANT_ANY,
			      ACC_R, 0));

	f.a = &a;
	ASSERT_EQ(0, pthread_create(&th, NULL, flip_fn, &f));
	m.a[0] = a.reg.key;
	/* the debug kernel (kmemleak in debugfs) is several times slower */
	rounds = access("/sys/kernel/debug/kmemleak", F_OK) ? 20000 : 5000;
	m.a[1] = rounds;
	ret = agent_req(&b, &m);
	f.stop = 1;
	pthread_join(th, NULL);
	ASSERT_EQ(0, ret) TH_LOG("agent: %d", ret);
	ASSERT_EQ(0, f.err) TH_LOG("GRANT failed after %llu flips: %d",
				   (unsigned long long)f.flips, f.err);
	TH_LOG("%llu flips; B: %llu reads, %llu writes done, %llu EACCES",
	       (unsigned long long)f.flips, (unsigned long long)m.a[0],
	       (unsigned long long)m.a[1], (unsigned long long)m.a[2]);
	ASSERT_EQ(0, m.a[3]) TH_LOG("B saw %llu other results, the last %d",
				    (unsigned long long)m.a[3], (int)m.a[4]);
	ASSERT_EQ(0, m.a[1]) TH_LOG("B (uid %d) wrote A's region %llu times "
				    "under a grant that never allowed it",
				    NOBODY, (unsigned long long)m.a[1]);
	ASSERT_SIDE_DATA(&a, 0, a.size, 0, 0, 0, 0, "A after the flips");
	/* the flips overlapped B's transfers: reads both passed and failed */
	ASSERT_LT(0, m.a[0]);
	ASSERT_LT(rounds, m.a[2]);	/* every write and some reads */
	ASSERT_LT(0, f.flips);

	ASSERT_EQ(0, agent_stop(&b));
	side_close(&a);
}

/*
 * GRANT_NONE revokes (EACCES again) and a new grant restores access;
 * after DEREG the key is ENOENT exactly like a guessed key, also after the
 * same memory is registered again (new key, no grant: EACCES), and GRANT
 * of the old id is ENOENT.
 */
TEST_F(hcomm, revoke_then_dereg_enoent)
{
	struct agent_cfg cfg = small_cfg(variant, 2);
	struct hcomm_reg_mem again;
	struct hcomm_stats s0, s1;
	struct agent b;
	struct side a;
	uint64_t guess;
	int ret, guessed_r, guessed_w;

	ASSERT_EQ(0, agent_start(self, &b, &cfg));
	side_open(_metadata, &a, variant->uring, 64 * KiB, 1,
		  HCOMM_ACCESS_ALL);

	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region, HCOMM_GRANT_ANY,
			      ACC_RW, 0));
	ret = agent_xfer(&b, a.reg.key, 0, b.key, 0, 100, 0, 0, 0, NULL);
	ASSERT_XFER(0, ret, "read under ANY RW");
	ASSERT_EQ(0, agent_fill(&b, 0, b.size, b.seed));

	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region, HCOMM_GRANT_NONE,
			      0, 0));
	ret = agent_xfer(&b, a.reg.key, 0, b.key, 0, 100, 0, 0, 0, NULL);
	ASSERT_XFER(-EACCES, ret, "read after GRANT_NONE");
	ret = agent_xfer(&b, b.key, 0, a.reg.key, 0, 100, 0, 0, 0, NULL);
	ASSERT_XFER(-EACCES, ret, "write after GRANT_NONE");
	ASSERT_UNTOUCHED(&a, &b, "after GRANT_NONE");

	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region,
			      HCOMM_GRANT_SAME_UID, ACC_RW, 0));
	ret = agent_xfer(&b, b.key, 1, a.reg.key, 2, 100, 0, 0, 0, NULL);
	ASSERT_XFER(0, ret, "write after a new grant");
	ASSERT_SIDE_DATA(&a, 0, a.size, b.seed, 1, 2, 100, "re-granted write");
	fill(a.buf, 0, a.size, a.seed);

	guess = random_key();
	guessed_r = agent_xfer(&b, guess, 0, b.key, 0, 100, 0, 0, 0, NULL);
	guessed_w = agent_xfer(&b, b.key, 0, guess, 0, 100, 0, 0, 0, NULL);
	ASSERT_EQ(-ENOENT, guessed_r);
	ASSERT_EQ(-ENOENT, guessed_w);

	ASSERT_EQ(0, hc_dereg(a.c.fd, a.c.r, a.reg.region));
	ASSERT_STATS(s0);
	ret = agent_xfer(&b, a.reg.key, 0, b.key, 0, 100, 0, 0, 0, NULL);
	ASSERT_EQ(guessed_r, ret)
		TH_LOG("read from a deregistered key gave %d, a guessed key "
		       "%d: they must be indistinguishable", ret, guessed_r);
	ret = agent_xfer(&b, b.key, 0, a.reg.key, 0, 100, 0, 0, 0, NULL);
	ASSERT_EQ(guessed_w, ret)
		TH_LOG("write to a deregistered key gave %d, a guessed key %d",
		       ret, guessed_w);
	ret = hc_xfer(a.c.fd, a.c.r, a.reg.key, 0, a.reg.key, 200, 10, 0, 0, 0,
		      NULL);
	ASSERT_XFER(-ENOENT, ret, "the owner's own deregistered key");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cmd_errors, 3);
	ASSERT_DELTA(s0, s1, xfer_bytes, 0);
	ASSERT_UNTOUCHED(&a, &b, "after DEREG");

	/* GRANT on the old id: no such region */
	ret = hc_grant(a.c.fd, a.c.r, a.reg.region, HCOMM_GRANT_ANY, ACC_RW, 0);
	ASSERT_EQ(-ENOENT, ret) TH_LOG("GRANT of a deregistered id: %d", ret);

	/* the same memory again: a new key, no grant, old key still dead */
	ASSERT_EQ(0, hc_reg_mem(a.c.fd, a.c.r, a.buf, a.size,
				HCOMM_ACCESS_ALL, &again));
	ASSERT_NE(a.reg.key, again.key) TH_LOG("a key came back to life");
	ret = agent_xfer(&b, a.reg.key, 0, b.key, 0, 100, 0, 0, 0, NULL);
	ASSERT_XFER(-ENOENT, ret, "old key after re-registration");
	ret = agent_xfer(&b, again.key, 0, b.key, 0, 100, 0, 0, 0, NULL);
	ASSERT_XFER(-EACCES, ret, "new key: grants do not carry over");
	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, again.region, HCOMM_GRANT_ANY,
			      ACC_R, 0));
	ret = agent_xfer(&b, again.key, 21, b.key, 23, 100, 0, 0, 0, NULL);
	ASSERT_XFER(0, ret, "new key, granted");
	ASSERT_AGENT_DATA(&b, 0, b.size, a.seed, 21, 23, 100, "new key read");

	ASSERT_EQ(0, agent_stop(&b));
	side_close(&a);
}

/* Every GRANT argument error of the contract, and the unknown region. */
TEST_F(hcomm, grant_errors)
{
	char *buf = map_anon(4 * PG);
	struct hcomm_reg_mem rr, rn;
	struct hcomm_stats s0, s1;
	struct hcomm_grant g;
	static const struct {
		uint32_t scope, access, uid, flags, reserved0;
		uint64_t reserved;
		bool use_rn;
		const char *what;
	} bad[] = {
		{ 4, ACC_R, 0, 0, 0, 0, false, "scope 4" },
		{ 0xffffffffU, ACC_R, 0, 0, 0, 0, false, "scope ~0" },
		{ HCOMM_GRANT_ANY, ACC_W, 0, 0, 0, 0, false,
		  "REMOTE_WRITE on a region without it" },
		{ HCOMM_GRANT_ANY, ACC_RW, 0, 0, 0, 0, false,
		  "READ|WRITE on a read-only region" },
		{ HCOMM_GRANT_SAME_UID, HCOMM_ACCESS_LOCAL_WRITE, 0, 0, 0, 0,
		  false, "LOCAL_WRITE is not a grantable bit" },
		{ HCOMM_GRANT_SAME_UID, ACC_R | HCOMM_ACCESS_LOCAL_WRITE, 0, 0,
		  0, 0, false, "READ|LOCAL_WRITE" },
		{ HCOMM_GRANT_ANY, 1U << 3, 0, 0, 0, 0, false, "unknown bit" },
		{ HCOMM_GRANT_ANY, ACC_R, 0, 0, 0, 0, true,
		  "READ on a region without REMOTE_* bits" },
		{ HCOMM_GRANT_SAME_UID, 0, 0, 0, 0, 0, false,
		  "access 0 with SAME_UID" },
		{ HCOMM_GRANT_UID, 0, NOBODY, 0, 0, 0, false,
		  "access 0 with UID" },
		{ HCOMM_GRANT_ANY, 0, 0, 0, 0, 0, false, "access 0 with ANY" },
		{ HCOMM_GRANT_SAME_UID, ACC_R, NOBODY, 0, 0, 0, false,
		  "uid with SAME_UID" },
		{ HCOMM_GRANT_ANY, ACC_R, NOBODY, 0, 0, 0, false,
		  "uid with ANY" },
		{ HCOMM_GRANT_NONE, 0, NOBODY, 0, 0, 0, false,
		  "uid with NONE" },
		{ HCOMM_GRANT_UID, ACC_R, 0xffffffffU, 0, 0, 0, false,
		  "uid -1 (not mapped)" },
		{ HCOMM_GRANT_ANY, ACC_R, 0, 1, 0, 0, false, "flags 1" },
		{ HCOMM_GRANT_ANY, ACC_R, 0, 0, 1, 0, false, "reserved0" },
		{ HCOMM_GRANT_ANY, ACC_R, 0, 0, 0, 1, false, "reserved[0]" },
		{ HCOMM_GRANT_ANY, ACC_R, 0, 0, 0, 2, false, "reserved[1]" },
	};
	size_t i;

	ASSERT_NE(NULL, buf);
	touch(buf, 4 * PG);
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, 2 * PG,
				HCOMM_ACCESS_LOCAL_WRITE | ACC_R, &rr));
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf + 2 * PG, PG, 0, &rn));

	ASSERT_STATS(s0);
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(&g, 0, sizeof(g));
		g.region = bad[i].use_rn ? rn.region : rr.region;
		g.scope = bad[i].scope;
		g.access = bad[i].access;
		g.uid = bad[i].uid;
		g.flags = bad[i].flags;
		g.reserved0 = bad[i].reserved0;
		if (bad[i].reserved == 1)
			g.reserved[0] = 1;
		else if (bad[i].reserved == 2)
			g.reserved[1] = 1;
		cmd_fails(_metadata, self, HCOMM_CMD_GRANT, &g, EINVAL,
			  bad[i].what);
	}
	memset(&g, 0, sizeof(g));
	g.scope = HCOMM_GRANT_ANY;
	g.access = ACC_R;
	g.region = 0;
	cmd_fails(_metadata, self, HCOMM_CMD_GRANT, &g, ENOENT, "region 0");
	g.region = rr.region + rn.region + 1000;
	cmd_fails(_metadata, self, HCOMM_CMD_GRANT, &g, ENOENT,
		  "region never registered");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cmd_grant, ARRAY_SIZE(bad) + 2);
	ASSERT_DELTA(s0, s1, cmd_errors, ARRAY_SIZE(bad) + 2);

	/* the valid neighbours of those errors */
	ASSERT_EQ(0, hc_grant(self->fd, self->r, rr.region,
			      HCOMM_GRANT_SAME_UID, ACC_R, 0));
	ASSERT_EQ(0, hc_grant(self->fd, self->r, rr.region, HCOMM_GRANT_UID,
			      ACC_R, NOBODY));
	ASSERT_EQ(0, hc_grant(self->fd, self->r, rr.region, HCOMM_GRANT_UID,
			      ACC_R, 0));
	ASSERT_EQ(0, hc_grant(self->fd, self->r, rr.region, HCOMM_GRANT_ANY,
			      ACC_R, 0));
	ASSERT_EQ(0, hc_grant(self->fd, self->r, rr.region, HCOMM_GRANT_NONE,
			      0, 0));
	ASSERT_EQ(0, hc_grant(self->fd, self->r, rn.region, HCOMM_GRANT_NONE,
			      0, 0));
	ASSERT_STATS(s0);
	ASSERT_DELTA(s1, s0, cmd_grant, 6);
	ASSERT_DELTA(s1, s0, cmd_errors, 0);

	/* a deregistered region: ENOENT */
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, rn.region));
	g.region = rn.region;
	g.scope = HCOMM_GRANT_NONE;
	g.access = 0;
	cmd_fails(_metadata, self, HCOMM_CMD_GRANT, &g, ENOENT,
		  "deregistered region");
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, rr.region));
	munmap(buf, 4 * PG);
}

/* ------------------------------------------------------------------ */
/* doorbells                                                           */
/* ------------------------------------------------------------------ */

static uint64_t *map_doorbells(struct side *a, size_t *len)
{
	void *p;

	*len = ((uint64_t)a->info.nr_doorbells * 8 + PG - 1) & ~(PG - 1);
	p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, a->c.fd,
		 HCOMM_MMAP_DOORBELLS);
	return p == MAP_FAILED ? NULL : p;
}

/* Spin (acquire loads) until *db >= want or @ms pass; the last value. */
static uint64_t spin_db(uint64_t *db, uint64_t want, int ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000ULL, v;

	for (;;) {
		v = __atomic_load_n(db, __ATOMIC_ACQUIRE);
		if (v >= want || now_ns() > end)
			return v;
		sched_yield();
	}
}

/* True when every doorbell but @idx is zero. */
static bool others_zero(const uint64_t *db, size_t n, size_t idx)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (i != idx && db[i])
			return false;
	return true;
}

/*
 * Put-with-signal: B writes into A's region with DB_ADD|DB_REMOTE; A spins
 * on its own mapped doorbell and, as soon as it sees the new value with an
 * acquire load, every byte must be there.  Then DB_SET, a pure signal
 * (len 0), and the doorbell argument errors, which touch nothing.
 */
TEST_F(hcomm, put_with_signal)
{
	const uint64_t size = 4 * MiB, len = 2 * MiB + 3, so = 4097,
		       dof = 12345;
	struct agent_cfg cfg = small_cfg(variant, 2);
	struct hcomm_stats s0, s1;
	uint64_t *db, v, done = 0, lo, hi;
	const uint64_t setv = 0xfeedface12345678ULL;
	struct agent b;
	struct side a;
	size_t dblen, nr, idx;
	struct msg m;
	int ret;

	cfg.size = size;
	ASSERT_EQ(0, agent_start(self, &b, &cfg));
	side_open(_metadata, &a, variant->uring, size, 1, HCOMM_ACCESS_ALL);
	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region,
			      HCOMM_GRANT_SAME_UID, ACC_RW, 0));
	db = map_doorbells(&a, &dblen);
	ASSERT_NE(NULL, db) TH_LOG("mmap doorbells (%zu bytes): %s", dblen,
				   strerror(errno));
	nr = a.info.nr_doorbells;
	ASSERT_TRUE(all_zero(db, dblen)) TH_LOG("doorbells start at 0");
	idx = nr > 37 ? 37 : nr - 1;

	/* 1: a multi-chunk write, DB_ADD 1 to A's doorbell */
	ASSERT_STATS(s0);
	m = (struct msg){ .op = OP_XFER,
			  .a = { b.key, so, a.reg.key, dof, len,
				 HCOMM_XFER_DB_ADD | HCOMM_XFER_DB_REMOTE,
				 (uint32_t)idx, 1 } };
	ASSERT_EQ(0, msg_send(b.sock, &m));
	v = spin_db(&db[idx], 1, CQE_TIMEOUT_MS);
	ASSERT_EQ(1, v) TH_LOG("A's doorbell %zu reads %llu, want 1 (never "
			       "signalled?)", idx, (unsigned long long)v);
	/* nothing but the acquire load ordered these reads */
	window(size, dof, len, &lo, &hi);
	ASSERT_SIDE_DATA(&a, lo, hi, b.seed, so, dof, len,
			 "data when the doorbell was seen");
	ASSERT_EQ(0, msg_recv(b.sock, &m, MSG_TIMEOUT_MS));
	ASSERT_EQ(OP_XFER, m.op);
	ASSERT_XFER(0, m.ret, "B's put with signal");
	if (!variant->uring) {
		ASSERT_EQ(len, m.a[0]) TH_LOG("done %llu",
					      (unsigned long long)m.a[0]);
	}
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, db_signals, 1);
	ASSERT_DELTA(s0, s1, cmd_xfer, 1);
	ASSERT_DELTA(s0, s1, xfer_bytes, len);
	ASSERT_TRUE(others_zero(db, nr, idx)) TH_LOG("another doorbell moved");
	ASSERT_EQ(1, __atomic_load_n(&db[idx], __ATOMIC_ACQUIRE));
	fill(a.buf, lo, hi - lo, a.seed);

	/* 2: one byte at an odd offset, DB_SET */
	m = (struct msg){ .op = OP_XFER,
			  .a = { b.key, 3, a.reg.key, size - 5, 1,
				 HCOMM_XFER_DB_SET | HCOMM_XFER_DB_REMOTE,
				 (uint32_t)idx, setv } };
	ASSERT_EQ(0, msg_send(b.sock, &m));
	v = spin_db(&db[idx], setv, CQE_TIMEOUT_MS);
	ASSERT_EQ(setv, v) TH_LOG("DB_SET: doorbell %llx",
				  (unsigned long long)v);
	ASSERT_SIDE_DATA(&a, size - 3 * PG, size, b.seed, 3, size - 5, 1,
			 "one byte put with DB_SET");
	ASSERT_EQ(0, msg_recv(b.sock, &m, MSG_TIMEOUT_MS));
	ASSERT_XFER(0, m.ret, "1-byte put with DB_SET");
	fill(a.buf, size - 3 * PG, 3 * PG, a.seed);

	/* 3: a pure signal: len 0, DB_ADD 5 */
	ASSERT_STATS(s0);
	ret = agent_xfer(&b, b.key, 0, a.reg.key, 0, 0,
			 HCOMM_XFER_DB_ADD | HCOMM_XFER_DB_REMOTE,
			 (uint32_t)idx, 5, &done);
	ASSERT_XFER(0, ret, "pure signal");
	v = spin_db(&db[idx], setv + 5, CQE_TIMEOUT_MS);
	ASSERT_EQ(setv + 5, v);
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, db_signals, 1);
	ASSERT_DELTA(s0, s1, xfer_bytes, 0);
	ASSERT_SIDE_DATA(&a, 0, size, 0, 0, 0, 0, "a pure signal copies nothing");

	/* 4: doorbell errors copy nothing and ring nothing */
	ASSERT_STATS(s0);
	ret = agent_xfer(&b, b.key, 0, a.reg.key, 0, 100,
			 HCOMM_XFER_DB_ADD | HCOMM_XFER_DB_REMOTE,
			 (uint32_t)nr, 1, NULL);
	ASSERT_XFER(-EINVAL, ret, "db_index == nr_doorbells");
	ret = agent_xfer(&b, b.key, 0, a.reg.key, 0, 100,
			 HCOMM_XFER_DB_ADD | HCOMM_XFER_DB_SET |
			 HCOMM_XFER_DB_REMOTE, (uint32_t)idx, 1, NULL);
	ASSERT_XFER(-EINVAL, ret, "DB_ADD with DB_SET");
	ret = agent_xfer(&b, b.key, 0, a.reg.key, 0, 100, 0, (uint32_t)idx, 1,
			 NULL);
	ASSERT_XFER(-EINVAL, ret, "doorbell fields without a DB flag");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cmd_errors, 3);
	ASSERT_DELTA(s0, s1, db_signals, 0);
	ASSERT_DELTA(s0, s1, xfer_bytes, 0);
	ASSERT_EQ(setv + 5, __atomic_load_n(&db[idx], __ATOMIC_ACQUIRE));
	ASSERT_TRUE(others_zero(db, nr, idx));
	ASSERT_SIDE_DATA(&a, 0, size, 0, 0, 0, 0, "after refused signals");

	ASSERT_EQ(0, agent_stop(&b));
	munmap(db, dblen);
	side_close(&a);
}

struct waiter {
	int fd;
	struct hcomm_db_wait w;
	int ret;
};

static void *waiter_fn(void *p)
{
	struct waiter *wt = p;

	wt->ret = ioctl(wt->fd, HCOMM_CMD_DB_WAIT, &wt->w) < 0 ? -errno : 0;
	return NULL;
}

/*
 * A parks in DB_WAIT (ioctl in a thread, or an SQE on its ring) and B's
 * put-with-signal wakes it: the wait completes with 0 (not ETIME), the
 * data is complete, waits_pending goes up while parked and back after.
 * A wait nobody signals ends with ETIME.
 */
TEST_F(hcomm, db_wait_woken_by_peer)
{
	const uint64_t size = 2 * MiB, len = MiB + 1, so = 3, dof = 4099;
	struct agent_cfg cfg = small_cfg(variant, 2);
	struct hcomm_stats s0, s1, sw;
	struct waiter wt;
	pthread_t th;
	uint64_t *db, lo, hi, ud = 0;
	struct agent b;
	struct side a;
	size_t dblen, idx;
	int ret, res = 0;

	cfg.size = size;
	ASSERT_EQ(0, agent_start(self, &b, &cfg));
	side_open(_metadata, &a, variant->uring, size, 1, HCOMM_ACCESS_ALL);
	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region, HCOMM_GRANT_ANY,
			      ACC_RW, 0));
	db = map_doorbells(&a, &dblen);
	ASSERT_NE(NULL, db);
	idx = a.info.nr_doorbells > 100 ? 100 : a.info.nr_doorbells - 1;

	memset(&wt, 0, sizeof(wt));
	wt.fd = a.c.fd;
	wt.w.index = (uint32_t)idx;
	wt.w.value = 1;
	wt.w.tag = 77;
	wt.w.timeout_ns = 30ULL * 1000000000ULL;
	wt.ret = 1;

	ASSERT_STATS(s0);
	if (a.c.r) {
		ASSERT_EQ(0, uring_queue(a.c.r, a.c.fd, HCOMM_CMD_DB_WAIT,
					 &wt.w, UD_WAIT));
	} else {
		ASSERT_EQ(0, pthread_create(&th, NULL, waiter_fn, &wt));
	}
	ret = WAIT_STAT(waits_pending, s0.waits_pending + 1, 5000, &sw);
	if (ret && !a.c.r)
		pthread_detach(th);
	ASSERT_EQ(0, ret) TH_LOG("waits_pending %llu, want %llu: A never parked",
				 (unsigned long long)sw.waits_pending,
				 (unsigned long long)s0.waits_pending + 1);
	if (a.c.r) {
		struct io_uring_cqe *cqe;

		ASSERT_EQ(-EAGAIN, io_uring_peek_cqe(a.c.r, &cqe))
			TH_LOG("DB_WAIT completed before any signal");
	} else {
		ASSERT_EQ(1, wt.ret) TH_LOG("DB_WAIT returned %d early",
					    wt.ret);
	}
	ASSERT_EQ(0, __atomic_load_n(&db[idx], __ATOMIC_ACQUIRE));

	ret = agent_xfer(&b, b.key, so, a.reg.key, dof, len,
			 HCOMM_XFER_DB_ADD | HCOMM_XFER_DB_REMOTE,
			 (uint32_t)idx, 1, NULL);
	ASSERT_XFER(0, ret, "B's put with signal");

	if (a.c.r) {
		ret = uring_reap(a.c.r, CQE_TIMEOUT_MS, &res, &ud);
		ASSERT_EQ(0, ret) TH_LOG("no DB_WAIT CQE after the signal");
		ASSERT_EQ(UD_WAIT, ud);
		ASSERT_EQ(0, res) TH_LOG("DB_WAIT CQE res %d (%s)", res,
					 strerror(-res));
	} else {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += CQE_TIMEOUT_MS / 1000;
		ret = pthread_timedjoin_np(th, NULL, &ts);
		if (ret)
			pthread_detach(th);
		ASSERT_EQ(0, ret) TH_LOG("the DB_WAIT thread never returned");
		ASSERT_EQ(0, wt.ret) TH_LOG("DB_WAIT: %d (%s)", wt.ret,
					    strerror(-wt.ret));
		ASSERT_EQ(1, wt.w.current_value);
	}
	window(size, dof, len, &lo, &hi);
	ASSERT_SIDE_DATA(&a, lo, hi, b.seed, so, dof, len,
			 "data after the woken DB_WAIT");
	ASSERT_EQ(1, __atomic_load_n(&db[idx], __ATOMIC_ACQUIRE));
	ret = WAIT_STAT(waits_pending, s0.waits_pending, 2000, &s1);
	ASSERT_EQ(0, ret) TH_LOG("waits_pending stays up after the wake-up");
	ASSERT_DELTA(s0, s1, cmd_db_wait, 1);
	ASSERT_DELTA(s0, s1, db_signals, 1);
	ASSERT_DELTA(s0, s1, db_wakeups, 1);
	ASSERT_DELTA(s0, s1, xfer_bytes, len);

	/* already satisfied: completes at once */
	memset(&wt.w, 0, sizeof(wt.w));
	wt.w.index = (uint32_t)idx;
	wt.w.value = 1;
	wt.w.timeout_ns = 30ULL * 1000000000ULL;
	ret = cmd_timed(a.c.fd, a.c.r, HCOMM_CMD_DB_WAIT, &wt.w);
	ASSERT_EQ(0, ret) TH_LOG("DB_WAIT for a value already reached: %d",
				 ret);

	/* nobody signals: ETIME, nothing left pending */
	memset(&wt.w, 0, sizeof(wt.w));
	wt.w.index = (uint32_t)idx;
	wt.w.value = 2;
	wt.w.timeout_ns = 100ULL * 1000000ULL;
	ret = cmd_timed(a.c.fd, a.c.r, HCOMM_CMD_DB_WAIT, &wt.w);
	ASSERT_EQ(-ETIME, ret) TH_LOG("unsignalled DB_WAIT: %d", ret);
	ASSERT_EQ(0, WAIT_STAT(waits_pending, s0.waits_pending, 2000, &s1));
	ASSERT_EQ(1, __atomic_load_n(&db[idx], __ATOMIC_ACQUIRE));

	ASSERT_EQ(0, agent_stop(&b));
	munmap(db, dblen);
	side_close(&a);
}

/* ------------------------------------------------------------------ */
/* sizes and directions                                                */
/* ------------------------------------------------------------------ */

/*
 * 1 B, 4097 B and 8 MiB at odd offsets, four ways: B reads A's region,
 * B writes it, A reads B's region, A writes it.  Every byte of a window
 * around the destination is checked (one page either side untouched), and
 * each transfer moves xfer_bytes by exactly its length.
 */
TEST_F_TIMEOUT(hcomm, both_directions_sizes, 300)
{
	const uint64_t size = 9 * MiB;
	static const uint64_t lens[] = { 1, 4097, 8 * MiB };
	struct agent_cfg cfg = small_cfg(variant, 2);
	struct agent b;
	struct side a;
	size_t i;
	int way;

	cfg.size = size;
	ASSERT_EQ(0, agent_start(self, &b, &cfg));
	side_open(_metadata, &a, variant->uring, size, 1, HCOMM_ACCESS_ALL);
	ASSERT_EQ(0, hc_grant(a.c.fd, a.c.r, a.reg.region,
			      HCOMM_GRANT_SAME_UID, ACC_RW, 0));
	ASSERT_EQ(0, agent_grant(&b, HCOMM_GRANT_SAME_UID, ACC_RW, 0));

	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		for (way = 0; way < 4; way++) {
			uint64_t len = lens[i], so = 4093 + 2 * way,
				 dof = 65537 + 4 * way, lo, hi, done = 0;
			struct hcomm_stats s0, s1;
			struct hcomm_xfer x;
			bool b_inits = way < 2, into_a = way & 1 ? b_inits :
							 !b_inits;
			uint64_t sk = into_a ? b.key : a.reg.key;
			uint64_t dk = into_a ? a.reg.key : b.key;
			uint32_t src_seed = into_a ? b.seed : a.seed;
			char what[96];
			int ret;

			snprintf(what, sizeof(what), "%s %s %llu bytes",
				 b_inits ? "B" : "A",
				 (into_a == b_inits) ? "writes into the peer"
						     : "reads from the peer",
				 (unsigned long long)len);
			ASSERT_STATS(s0);
			if (b_inits) {
				ret = agent_xfer(&b, sk, so, dk, dof, len, 0, 0,
						 0, &done);
			} else {
				ret = hc_xfer(a.c.fd, a.c.r, sk, so, dk, dof,
					      len, 0, 0, 0, &x);
				done = x.done;
				if (!a.c.r) {
					ASSERT_TRUE(x.engine >= HCOMM_ENGINE_INLINE &&
						    x.engine <= HCOMM_ENGINE_CPU)
						TH_LOG("engine %u", x.engine);
				}
			}
			ASSERT_XFER(0, ret, what);
			if (!variant->uring) {
				ASSERT_EQ(len, done) TH_LOG("%s: done %llu",
					what, (unsigned long long)done);
			}
			ASSERT_STATS(s1);
			ASSERT_DELTA(s0, s1, cmd_xfer, 1);
			ASSERT_DELTA(s0, s1, xfer_bytes, len);
			ASSERT_EQ(s0.xfer_inline + s0.xfer_async + 1,
				  s1.xfer_inline + s1.xfer_async)
				TH_LOG("%s: counted as inline/async %llu/%llu "
				       "times", what,
				       (unsigned long long)(s1.xfer_inline -
							    s0.xfer_inline),
				       (unsigned long long)(s1.xfer_async -
							    s0.xfer_async));
			if (variant->uring && len <= a.info.max_inline) {
				ASSERT_DELTA(s0, s1, xfer_inline, 1);
			} else if (variant->uring) {
				ASSERT_DELTA(s0, s1, xfer_async, 1);
			}

			window(size, dof, len, &lo, &hi);
			if (into_a) {
				ASSERT_SIDE_DATA(&a, lo, hi, src_seed, so, dof,
						 len, what);
				fill(a.buf, lo, hi - lo, a.seed);
			} else {
				ASSERT_AGENT_DATA(&b, lo, hi, src_seed, so, dof,
						  len, what);
				ASSERT_EQ(0, agent_fill(&b, lo, hi - lo,
							b.seed));
			}
		}
	}
	ASSERT_EQ(0, agent_stop(&b));
	side_close(&a);
}

/* ------------------------------------------------------------------ */
/* SIGKILL in the middle of transfers                                  */
/* ------------------------------------------------------------------ */

/*
 * A and B are both agents with 64 MiB regions; A grants ANY RW and B loops
 * 64 MiB transfers from and to A's region.  Once B has completed one and
 * transfers are in flight, @victim is SIGKILLed.  The survivor must never
 * hang: B (when A died) sees only success, ENOENT or ECANCELED and then
 * ENOENT for good; A (when B died) revokes its grant and keeps working
 * (its own copy lands intact, however late B's ring is torn down).
 * After both are gone
 * every gauge is back at the value it had before the test.
 */
static void kill_mid_transfer(struct __test_metadata *_metadata,
			      FIXTURE_DATA(hcomm) *self,
			      const FIXTURE_VARIANT(hcomm) *variant,
			      bool kill_owner)
{
	const uint64_t size = 64 * MiB;
	struct agent_cfg ca = small_cfg(variant, 1), cb = small_cfg(variant, 2);
	struct agent a, b, *victim, *survivor;
	struct hcomm_stats s0, sw;
	uint64_t first, bad, active;
	struct msg m;
	int ret;

	ca.size = cb.size = size;
	ca.pattern = cb.pattern = false;
	ASSERT_STATS(s0);
	ASSERT_EQ(0, agent_start(self, &a, &ca));
	ASSERT_EQ(0, agent_start(self, &b, &cb));
	ASSERT_EQ(0, agent_grant(&a, HCOMM_GRANT_ANY, ACC_RW, 0));
	victim = kill_owner ? &a : &b;
	survivor = kill_owner ? &b : &a;

	m = (struct msg){ .op = OP_LOOP, .a = { a.key, size, 4 } };
	ASSERT_EQ(0, msg_send(b.sock, &m));
	ret = msg_recv(b.sock, &m, 60000);
	ASSERT_EQ(0, ret) TH_LOG("B's loop never completed a transfer");
	ASSERT_EQ(OP_STARTED, m.op)
		TH_LOG("B's loop ended before a transfer succeeded: ok %llu "
		       "enoent %llu ecanceled %llu other %llu (last %lld)",
		       (unsigned long long)m.a[0], (unsigned long long)m.a[1],
		       (unsigned long long)m.a[2], (unsigned long long)m.a[3],
		       (long long)m.a[4]);
	/* best effort: catch transfers in flight (not asserted) */
	active = wait_xfers_active(s0.xfers_active, 2000);
	ASSERT_EQ(0, kill(victim->pid, SIGKILL));
	TH_LOG("SIGKILL %s with %llu transfers in flight",
	       kill_owner ? "A" : "B", (unsigned long long)active);
	ret = wait_child_ms(victim->pid, 20000);
	ASSERT_EQ(128 + SIGKILL, ret)
		TH_LOG("%s after SIGKILL: %d (-2: still not reaped after 20 s)",
		       kill_owner ? "A" : "B", ret);
	victim->pid = 0;
	close(victim->sock);
	victim->sock = -1;

	if (kill_owner) {
		/* B's loop ends by itself once A's key is gone */
		ret = msg_recv(b.sock, &m, 60000);
		ASSERT_EQ(0, ret) TH_LOG("B hangs after A was killed");
		ASSERT_EQ(OP_LOOP, m.op);
		TH_LOG("B after A's SIGKILL: %llu ok, %llu ENOENT, "
		       "%llu ECANCELED, %llu other", (unsigned long long)m.a[0],
		       (unsigned long long)m.a[1], (unsigned long long)m.a[2],
		       (unsigned long long)m.a[3]);
		ASSERT_EQ(0, m.a[3]) TH_LOG("B got %lld, want 0, -ENOENT or "
					    "-ECANCELED", (long long)m.a[4]);
		ASSERT_LE(1, m.a[0]);
		ASSERT_LE(1, m.a[1]) TH_LOG("A's key still works after A died");
		ret = agent_xfer(&b, a.key, 0, b.key, 0, PG, 0, 0, 0, NULL);
		ASSERT_XFER(-ENOENT, ret, "A's key after A's death");
	}

	/*
	 * B's transfers already in the engine end when B's file is
	 * released: with io_uring, when the ring's exit worker is done,
	 * which may be after B was reaped.  A survivor that must know that
	 * no more of B's bytes land revokes its grant, the barrier of
	 * Documentation/datapath.rst (Revocation): once it returns, no
	 * chunk of B's touches A's region.  (The gauges below still show
	 * that every transfer of B ended.)
	 */
	if (!kill_owner)
		ASSERT_EQ(0, agent_grant(&a, HCOMM_GRANT_NONE, 0, 0));

	/* the survivor's own context is fine */
	ASSERT_EQ(0, agent_fill(survivor, 0, 3 * MiB, 5));
	ASSERT_EQ(0, agent_fill(survivor, 32 * MiB - PG, MiB + 2 * PG, 6));
	ret = agent_xfer(survivor, survivor->key, 7, survivor->key, 32 * MiB + 1,
			 MiB, 0, 0, 0, NULL);
	ASSERT_XFER(0, ret, "the survivor copies inside its own region");
	bad = agent_check(survivor, 32 * MiB - PG, 33 * MiB + PG, 6, 5, 7,
			  32 * MiB + 1, MiB, &first);
	ASSERT_EQ(0, bad) TH_LOG("the survivor's own copy: %llu wrong bytes, "
				 "first at %llu", (unsigned long long)bad,
				 (unsigned long long)first);
	ASSERT_EQ(0, agent_dereg(survivor));
	ASSERT_EQ(0, agent_stop(survivor));

	/* nothing of either process is left */
	ret = hcomm_gauges_wait(&s0, &sw, 10000);
	if (ret > 0)
		hcomm_gauges_dump(stderr, "after both exited", &s0, &sw);
	ASSERT_EQ(0, ret) TH_LOG("gauges not back after the SIGKILL");
}

TEST_F_TIMEOUT(hcomm, kill_peer_mid_transfer, 240)
{
	kill_mid_transfer(_metadata, self, variant, false);
}

TEST_F_TIMEOUT(hcomm, kill_owner_mid_transfer, 240)
{
	kill_mid_transfer(_metadata, self, variant, true);
}

TEST_HARNESS_MAIN
