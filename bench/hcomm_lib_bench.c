/* SPDX-License-Identifier: MIT */
/*
 * hcomm_lib_bench: libhcomm's communicator against the raw kernel path and
 * against its own alternatives, in one run.
 *
 *   hcomm_lib_bench [--max-size N[K|M|G]] [--time SECS] [--iters N]
 *                   [--qd N] [--samples N] [--json FILE]
 *
 * Two ranks on this host: this process (rank 0, the driver) forks rank 1;
 * both call hcomm_comm_init() with HCOMM_RANK/HCOMM_WORLD_SIZE/
 * HCOMM_ROOT_ADDR set, and expose a window.  Rank 1 also registers the
 * same window memory in a raw /dev/hcomm context of its own and GRANTs it
 * to the same uid, so the raw path writes the very same pages.
 *
 * Figures, each printed as a ratio to its baseline measured in the same run:
 *   put 8 B .. 16 MiB into rank 1: hcomm_put (one at a time) against an
 *     io_uring XFER submitted and reaped by hand (latency), and
 *     hcomm_put_nb with --qd in flight against --qd raw XFERs (bandwidth):
 *     the ratio is the library's overhead;
 *   hcomm_batch of 1000 puts of 64 B against 1000 hcomm_put calls, and
 *     against 1000 raw XFERs in one io_uring_submit;
 *   callback latency, req->t_complete_ns to the callback's first
 *     instruction, median and p99: HCOMM_CB_THREAD (lock-free MPSC queue)
 *     against HCOMM_CB_THREAD_LOCKED (mutex + condvar), one operation at a
 *     time and with --qd in flight;
 *   put_signal ping-pong (8 B + signal each way) against a pipe ping-pong.
 * A table goes to stdout, JSON to --json FILE (default
 * build/logs/lib_bench.json when ./build/logs exists).  Every transfer
 * point is verified (checksum of the destination, guard bytes around it).
 *
 * Exit status: 0 when every operation worked and carried the right data,
 * 1 on a functional error, 2 on bad usage or a failed setup.  Timings never
 * fail.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <linux/futex.h>
#include <sys/wait.h>

#include <liburing.h>
#include <hcomm.h>

#define BENCH_NAME	"hcomm_lib_bench"
#include "bench_util.h"

#define HCOMM_DEV	"/dev/hcomm"
#define DEFAULT_JSON	"build/logs/lib_bench.json"

#define PG		4096ULL
#define PAD		PG
#define BATCH		1000
#define BATCH_LEN	64
#define RING_ENTRIES	1024
#define QD_MAX		64
#define PP_STOP		UINT64_MAX
#define SIG_PP		1
#define PP_OFF		0	/* where pings land in rank 1's window */
#define PONG_OFF	64	/* where pongs land in rank 0's window */

/* 8-byte sources of the ping-pong (the library registers them once). */
static uint64_t pp_src[8] __attribute__((aligned(64)));

static const uint64_t sizes[] = {
	8, 64, 512, 4 * KiB, 64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB,
};
#define NSIZES	(sizeof(sizes) / sizeof(sizes[0]))

static uint64_t opt_max = 16 * MiB;
static double opt_time = 0.2;
static uint64_t opt_iters;
static unsigned int opt_qd = 4;
static unsigned int opt_samples = 2000;
static const char *opt_json;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* "message (errmsg)" for a libhcomm return code. */
static const char *herr(int rc)
{
	static char buf[320];

	snprintf(buf, sizeof(buf), "%s%s%s%s", hcomm_strerror(rc),
		 *hcomm_errmsg() ? " (" : "", hcomm_errmsg(),
		 *hcomm_errmsg() ? ")" : "");
	return buf;
}

/* ------------------------------------------------------------------ */
/* data                                                                */
/* ------------------------------------------------------------------ */

static size_t buf_len(void)
{
	uint64_t n = opt_max > BATCH * BATCH_LEN ? opt_max : BATCH * BATCH_LEN;

	return (size_t)(n + PAD);
}

/* ------------------------------------------------------------------ */
/* rank 0 <-> rank 1 control (SOCK_SEQPACKET)                           */
/* ------------------------------------------------------------------ */

enum {
	OP_POISON = 1,	/* a = bytes from 0 to fill with POISON */
	OP_SUM,		/* a = off, b = len: checksum, guards checked */
	OP_PP_LIB,	/* put_signal ping-pong until PP_STOP */
	OP_PP_PIPE,	/* pipe ping-pong */
	OP_REINIT,	/* a = callback mode: a new communicator and window */
	OP_QUIT,
};

struct hello {
	int64_t status;
	uint64_t raw_key;
	char err[160];
};

/* Both ranks: the communicator and the window. */
static struct {
	int rank;
	int gen;		/* communicators made so far */
	char root[96];
	struct hcomm_comm *comm;
	struct hcomm_win *win;
	unsigned char *wbuf;
	size_t wlen;
	int sock;
	int pipe_in, pipe_out;
} C;

static int comm_up(int cb_mode, char *err, size_t errlen)
{
	int rc;

	char root[128];

	/* A fresh rendezvous name each time: the last one may linger. */
	snprintf(root, sizeof(root), "%s-%d", C.root, C.gen++);
	setenv("HCOMM_RANK", C.rank ? "1" : "0", 1);
	setenv("HCOMM_WORLD_SIZE", "2", 1);
	setenv("HCOMM_ROOT_ADDR", root, 1);
	rc = hcomm_comm_init(&C.comm, NULL);
	if (rc) {
		snprintf(err, errlen, "hcomm_comm_init: %s", herr(rc));
		return rc;
	}
	if (cb_mode != HCOMM_CB_INLINE) {
		rc = hcomm_comm_set_cb_mode(C.comm,
					    (enum hcomm_cb_mode)cb_mode);
		if (rc) {
			snprintf(err, errlen, "hcomm_comm_set_cb_mode(%d): %s",
				 cb_mode, herr(rc));
			return rc;
		}
	}
	rc = hcomm_win_create(C.comm, C.wbuf, C.wlen, &C.win);
	if (rc) {
		snprintf(err, errlen, "hcomm_win_create(%zu bytes): %s",
			 C.wlen, herr(rc));
		return rc;
	}
	return 0;
}

static int comm_down(void)
{
	int rc = hcomm_win_free(C.win), rc2;

	C.win = NULL;
	rc2 = hcomm_comm_destroy(C.comm);
	C.comm = NULL;
	return rc ? rc : rc2;
}

/* ------------------------------------------------------------------ */
/* rank 1                                                              */
/* ------------------------------------------------------------------ */

static int child_setup(struct hello *h)
{
	struct hcomm_reg_mem reg;
	struct hcomm_grant g;
	int fd, rc;

	rc = comm_up(HCOMM_CB_INLINE, h->err, sizeof(h->err));
	if (rc)
		return rc;
	/* The same pages, registered in a raw context for the raw path. */
	fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		snprintf(h->err, sizeof(h->err), "open " HCOMM_DEV);
		return -errno;
	}
	memset(&reg, 0, sizeof(reg));
	reg.addr = (uintptr_t)C.wbuf;
	reg.len = C.wlen;
	reg.access = HCOMM_ACCESS_ALL;
	if (ioctl(fd, HCOMM_CMD_REG_MEM, &reg) < 0) {
		snprintf(h->err, sizeof(h->err), "raw REG_MEM of %zu bytes",
			 C.wlen);
		return -errno;
	}
	memset(&g, 0, sizeof(g));
	g.region = reg.region;
	g.scope = HCOMM_GRANT_SAME_UID;
	g.access = HCOMM_ACCESS_REMOTE_READ | HCOMM_ACCESS_REMOTE_WRITE;
	if (ioctl(fd, HCOMM_CMD_GRANT, &g) < 0) {
		snprintf(h->err, sizeof(h->err), "raw GRANT");
		return -errno;
	}
	h->raw_key = reg.key;
	return 0;	/* fd stays open until exit */
}

static int child_pp_lib(uint64_t *count)
{
	uint64_t base = hcomm_signal_read(C.comm, SIG_PP), k;
	struct reply ready = { 0, 0 };
	int rc;

	if (xsend(C.sock, &ready, sizeof(ready)))
		return -EPIPE;
	*count = 0;
	for (k = 1;; k++) {
		int64_t got = hcomm_signal_wait(C.comm, SIG_PP, base + k,
						10000);
		uint64_t v;

		if (got < 0)
			return (int)got;
		v = __atomic_load_n((uint64_t *)(C.wbuf + PP_OFF),
				    __ATOMIC_ACQUIRE);
		if (v == PP_STOP)
			return 0;
		if (v != k) {
			fprintf(stderr, "# rank 1: ping %llu carried %llu\n",
				(unsigned long long)k, (unsigned long long)v);
			return -EIO;
		}
		pp_src[1] = v;
		rc = hcomm_put_signal(C.win, 0, PONG_OFF, &pp_src[1], 8,
				      SIG_PP, 1);
		if (rc)
			return rc;
		(*count)++;
	}
}

static int child_pp_pipe(uint64_t *count)
{
	uint64_t k, v;

	*count = 0;
	for (k = 1;; k++) {
		if (read(C.pipe_in, &v, 8) != 8)
			return -EIO;
		if (v == PP_STOP)
			return 0;
		if (v != k)
			return -EIO;
		if (write(C.pipe_out, &v, 8) != 8)
			return -EIO;
		(*count)++;
	}
}

static void __attribute__((noreturn)) child_main(void)
{
	struct hello h;
	struct msg m;
	struct reply rp;
	char err[160];

	memset(&h, 0, sizeof(h));
	h.status = child_setup(&h);
	if (xsend(C.sock, &h, sizeof(h)) || h.status)
		_exit(1);
	for (;;) {
		if (xrecv(C.sock, &m, sizeof(m)))
			_exit(1);
		memset(&rp, 0, sizeof(rp));
		switch (m.op) {
		case OP_POISON:
			memset(C.wbuf, POISON, m.a < C.wlen ? m.a : C.wlen);
			break;
		case OP_SUM:
			if (m.a + m.b > C.wlen) {
				rp.status = -ERANGE;
				break;
			}
			rp.val = csum(C.wbuf + m.a, m.b);
			if (!guards_intact(C.wbuf, C.wlen, m.a, m.b))
				rp.status = -EOVERFLOW;
			break;
		case OP_PP_LIB:
			rp.status = child_pp_lib(&rp.val);
			break;
		case OP_PP_PIPE:
			rp.status = child_pp_pipe(&rp.val);
			break;
		case OP_REINIT:
			snprintf(err, sizeof(err), "teardown");
			rp.status = comm_down();
			if (!rp.status)
				rp.status = comm_up((int)m.a, err, sizeof(err));
			if (rp.status)
				fprintf(stderr, "# rank 1: %s\n", err);
			break;
		case OP_QUIT:
			rp.status = comm_down();
			xsend(C.sock, &rp, sizeof(rp));
			_exit(rp.status ? 1 : 0);
		default:
			rp.status = -EINVAL;
		}
		if (xsend(C.sock, &rp, sizeof(rp)))
			_exit(1);
	}
}

/* ------------------------------------------------------------------ */
/* rank 0                                                              */
/* ------------------------------------------------------------------ */

#define REG_LEN		(1024 * 1024)

static struct {
	pid_t child;
	int fd;
	struct io_uring ring;
	unsigned char *src;
	size_t len;
	uint64_t src_key, dst_key;
} S;

static void rpc_send(uint32_t op, uint64_t a, uint64_t b)
{
	struct msg m = { .op = op, .a = a, .b = b };

	if (xsend(C.sock, &m, sizeof(m))) {
		fail("rank 1 is gone (send)");
		exit(1);
	}
}

static struct reply rpc_recv(void)
{
	struct reply rp;

	if (xrecv(C.sock, &rp, sizeof(rp))) {
		fail("rank 1 is gone (recv)");
		exit(1);
	}
	return rp;
}

static struct reply rpc(uint32_t op, uint64_t a, uint64_t b)
{
	rpc_send(op, a, b);
	return rpc_recv();
}

static void remote_poison(size_t off, size_t len)
{
	rpc(OP_POISON, off + len + GUARD, 0);
}

/* rank 1's window [off, off + len) == src [soff, soff + len). */
static int remote_verify(const char *what, size_t soff, size_t off,
			 size_t len)
{
	uint64_t want = csum(S.src + soff, len);
	struct reply rp = rpc(OP_SUM, off, len);
	char sz[32];

	size_str(len, sz, sizeof(sz));
	if (rp.status == -EOVERFLOW) {
		fail("%s %s: bytes outside the destination range changed",
		     what, sz);
		return -1;
	}
	if (rp.status) {
		fail("%s %s: rank 1's checksum: %s", what, sz,
		     strerror((int)-rp.status));
		return -1;
	}
	if (rp.val != want) {
		fail("%s %s: wrong data in rank 1 (checksum %016llx, expected "
		     "%016llx)", what, sz, (unsigned long long)rp.val,
		     (unsigned long long)want);
		return -1;
	}
	return 0;
}

static double us_of(const struct meas *m)
{
	return m->iters ? m->secs / (double)m->iters * 1e6 : NAN;
}

/* ---------------------------------------------------------- put by size */

/* Offsets of the put points: odd-free, as the raw path's. */
#define DST_OFF	0
#define SRC_OFF	0

struct put_ctx {
	size_t len;
	struct hcomm_request reqs[QD_MAX];
	struct hcomm_xfer xs[QD_MAX];
};

static int run_lib_put(void *p, uint64_t n)
{
	struct put_ctx *c = p;
	int rc;

	while (n--) {
		rc = hcomm_put(C.win, 1, DST_OFF, S.src + SRC_OFF, c->len);
		if (rc)
			return rc;
	}
	return 0;
}

/* --qd put_nb in flight: wait for the oldest, reissue it. */
static int run_lib_put_qd(void *p, uint64_t n)
{
	struct put_ctx *c = p;
	uint64_t sub = 0, done = 0;
	int rc, err = 0;

	while (done < sub || (sub < n && !err)) {
		if (sub < n && !err && sub - done < opt_qd) {
			struct hcomm_request *r = &c->reqs[sub % opt_qd];

			memset(r, 0, sizeof(*r));
			rc = hcomm_put_nb(C.win, 1, DST_OFF, S.src + SRC_OFF,
					  c->len, r);
			if (rc) {
				err = rc;
				continue;
			}
			sub++;
			continue;
		}
		rc = hcomm_wait(&c->reqs[done % opt_qd]);
		if (!rc && c->reqs[done % opt_qd].bytes != c->len)
			rc = -HCOMM_ERR_IO;
		if (rc && !err)
			err = rc;
		done++;
	}
	return err;
}

static int run_raw_put(void *p, uint64_t n)
{
	struct put_ctx *c = p;
	int ret;

	while (n--) {
		ret = uring_xfer1(&S.ring, S.fd, &c->xs[0]);
		if (ret)
			return ret;
	}
	return 0;
}

static int run_raw_put_qd(void *p, uint64_t n)
{
	struct put_ctx *c = p;
	unsigned int freel[QD_MAX], nfree = 0, i;
	uint64_t sub = 0, done = 0;
	int err = 0;

	for (i = 0; i < opt_qd; i++)
		freel[nfree++] = i;
	while (done < sub || (sub < n && !err)) {
		struct io_uring_cqe *cqe;
		unsigned int head, seen = 0;
		int ret;

		while (!err && nfree && sub < n) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&S.ring);
			unsigned int slot;

			if (!sqe)
				break;
			slot = freel[--nfree];
			c->xs[slot].done = 0;
			c->xs[slot].engine = 0;
			prep_cmd(sqe, S.fd, HCOMM_CMD_XFER, &c->xs[slot], slot);
			sub++;
		}
		ret = io_uring_submit_and_wait(&S.ring, 1);
		if (ret < 0 && ret != -EINTR)
			return ret;
		io_uring_for_each_cqe(&S.ring, head, cqe) {
			int r = check_xfer_cqe(&S.ring, cqe, c->len);

			if (r && !err)
				err = r;
			freel[nfree++] = (unsigned int)cqe->user_data;
			done++;
			seen++;
		}
		io_uring_cq_advance(&S.ring, seen);
	}
	return err;
}

enum { P_LIB, P_RAW, P_LIB_QD, P_RAW_QD, P_NR };
static const char *const pnames[P_NR] = {
	"hcomm_put", "raw_xfer_uring", "hcomm_put_nb_qd", "raw_xfer_uring_qd",
};
static const run_fn pfns[P_NR] = {
	run_lib_put, run_raw_put, run_lib_put_qd, run_raw_put_qd,
};

static double put_one(int method, size_t len, uint64_t *iters)
{
	static struct put_ctx c;
	struct meas m = { 0, 0, 0 };
	char sz[32];
	int ret, i;

	memset(&c, 0, sizeof(c));
	c.len = len;
	for (i = 0; i < QD_MAX; i++) {
		c.xs[i].src_key = S.src_key;
		c.xs[i].src_off = SRC_OFF;
		c.xs[i].dst_key = S.dst_key;
		c.xs[i].dst_off = DST_OFF;
		c.xs[i].len = len;
	}
	remote_poison(DST_OFF, len);
	ret = measure(pfns[method], &c, &m, opt_time, opt_iters);
	if (ret) {
		fail("%s %s: %s", pnames[method], size_str(len, sz, sizeof(sz)),
		     method == P_LIB || method == P_LIB_QD ? herr(ret) :
		     strerror(-ret));
		return NAN;
	}
	if (remote_verify(pnames[method], SRC_OFF, DST_OFF, len))
		return NAN;
	*iters = m.iters;
	return us_of(&m);
}

static void bench_put(void)
{
	size_t si;

	printf("\n== put into rank 1, by size: libhcomm against the raw "
	       "io_uring XFER (ratio = lib / raw; 1 means no overhead)\n");
	printf("  %7s | %10s %10s %6s | %10s %10s %6s\n", "size",
	       "put us", "raw us", "ratio", "qd MiB/s", "raw MiB/s", "ratio");
	for (si = 0; si < NSIZES && sizes[si] <= opt_max; si++) {
		size_t len = sizes[si];
		double us[P_NR], bw_lib, bw_raw;
		uint64_t it[P_NR];
		char sz[32], v[6][32];
		int mth;

		for (mth = 0; mth < P_NR; mth++)
			us[mth] = put_one(mth, len, &it[mth]);
		bw_lib = (double)len / us[P_LIB_QD] * 1e6 / (double)MiB;
		bw_raw = (double)len / us[P_RAW_QD] * 1e6 / (double)MiB;
		fmt_val(us[P_LIB], v[0], 32);
		fmt_val(us[P_RAW], v[1], 32);
		fmt_ratio(us[P_LIB] / us[P_RAW], v[2], 32);
		fmt_val(bw_lib, v[3], 32);
		fmt_val(bw_raw, v[4], 32);
		fmt_ratio(bw_lib / bw_raw, v[5], 32);
		printf("  %7s | %10s %10s %6s | %10s %10s %6s\n",
		       size_str(len, sz, sizeof(sz)), v[0], v[1], v[2], v[3],
		       v[4], v[5]);
		add_result("put_latency", len, us[P_LIB], "us",
			   "raw_xfer_uring", us[P_RAW], false, "qd1");
		{
			char name[48], base[40];

			snprintf(name, sizeof(name), "put_nb_bw_qd%u", opt_qd);
			snprintf(base, sizeof(base), "raw_xfer_uring_qd%u",
				 opt_qd);
			add_result(name, len, bw_lib, "MiB/s", base, bw_raw,
				   true, "");
		}
	}
}

/* ------------------------------------------------------------ batching */

static struct hcomm_xfer_desc batch_d[BATCH];
static struct hcomm_xfer batch_x[BATCH];

static int run_batch_lib(void *p, uint64_t n)
{
	int rc;

	(void)p;
	while (n--) {
		rc = hcomm_batch(C.win, batch_d, BATCH, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

static int run_single_lib(void *p, uint64_t n)
{
	unsigned int i;
	int rc;

	(void)p;
	while (n--)
		for (i = 0; i < BATCH; i++) {
			rc = hcomm_put(C.win, 1, batch_d[i].target_off,
				       (const void *)(uintptr_t)batch_d[i].local,
				       BATCH_LEN);
			if (rc)
				return rc;
		}
	return 0;
}

static int run_batch_raw(void *p, uint64_t n)
{
	unsigned int i;

	(void)p;
	while (n--) {
		struct io_uring_cqe *cqe;
		unsigned int got = 0, head, seen;
		int ret, err = 0;

		for (i = 0; i < BATCH; i++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&S.ring);

			if (!sqe)
				return -EBUSY;
			batch_x[i].done = 0;
			prep_cmd(sqe, S.fd, HCOMM_CMD_XFER, &batch_x[i], i);
		}
		ret = io_uring_submit(&S.ring);
		if (ret != BATCH)
			return ret < 0 ? ret : -EIO;
		while (got < BATCH) {
			ret = io_uring_wait_cqe(&S.ring, &cqe);
			if (ret)
				return ret;
			seen = 0;
			io_uring_for_each_cqe(&S.ring, head, cqe) {
				int r = check_xfer_cqe(&S.ring, cqe, BATCH_LEN);

				if (r && !err)
					err = r;
				seen++;
			}
			io_uring_cq_advance(&S.ring, seen);
			got += seen;
		}
		if (err)
			return err;
	}
	return 0;
}

/* The same 1000 transfers as one HCOMM_CMD_XFER_BATCH (the module's own
 * ceiling for them: one SQE, one CQE). */
static int run_xbatch_raw(void *p, uint64_t n)
{
	struct hcomm_xfer_batch b = {
		.descs = (uint64_t)(uintptr_t)batch_x,
		.count = BATCH,
	};
	uint64_t big0;
	int res, ret;

	(void)p;
	while (n--) {
		ret = uring_cmd1(&S.ring, S.fd, HCOMM_CMD_XFER_BATCH, &b, &res,
				 &big0);
		if (!ret)
			ret = check_xfer_res(&S.ring, res, big0, BATCH);
		if (ret)
			return ret;
	}
	return 0;
}

static double batch_point(run_fn fn, const char *what, bool lib)
{
	struct meas m;
	int ret;

	remote_poison(0, BATCH * BATCH_LEN);
	ret = measure(fn, NULL, &m, opt_time, opt_iters);
	if (ret) {
		fail("%s: %s", what, lib ? herr(ret) : strerror(-ret));
		return NAN;
	}
	if (remote_verify(what, 0, 0, BATCH * BATCH_LEN))
		return NAN;
	return (double)m.iters * BATCH / m.secs;
}

static void bench_batch(void)
{
	double rb, rs, rr, rx;
	unsigned int i;

	printf("\n== %d puts of %d B: one hcomm_batch against %d hcomm_put "
	       "calls, against %d raw XFERs per io_uring_submit, and against "
	       "one raw XFER_BATCH of them (puts/s; ratio = batch / "
	       "baseline)\n", BATCH, BATCH_LEN, BATCH, BATCH);
	for (i = 0; i < BATCH; i++) {
		memset(&batch_d[i], 0, sizeof(batch_d[i]));
		batch_d[i].op = HCOMM_OP_PUT;
		batch_d[i].target = 1;
		batch_d[i].target_off = (uint64_t)i * BATCH_LEN;
		batch_d[i].local = (uint64_t)(uintptr_t)(S.src +
							 (size_t)i * BATCH_LEN);
		batch_d[i].len = BATCH_LEN;
		memset(&batch_x[i], 0, sizeof(batch_x[i]));
		batch_x[i].src_key = S.src_key;
		batch_x[i].src_off = (uint64_t)i * BATCH_LEN;
		batch_x[i].dst_key = S.dst_key;
		batch_x[i].dst_off = (uint64_t)i * BATCH_LEN;
		batch_x[i].len = BATCH_LEN;
	}
	rb = batch_point(run_batch_lib, "hcomm_batch of 1000", true);
	rs = batch_point(run_single_lib, "1000 x hcomm_put", true);
	rr = batch_point(run_batch_raw, "1000 raw XFERs per submit", false);
	rx = batch_point(run_xbatch_raw, "one raw XFER_BATCH of 1000", false);
	add_result("rate_hcomm_batch1000", BATCH_LEN, rb, "puts/s",
		   "rate_hcomm_put_each", rs, true, "");
	add_result("rate_hcomm_batch1000", BATCH_LEN, rb, "puts/s",
		   "rate_raw_uring_batch1000", rr, true, "");
	add_result("rate_hcomm_batch1000", BATCH_LEN, rb, "puts/s",
		   "rate_raw_xfer_batch1000", rx, true, "");
}

/* ------------------------------------------------------------ callbacks */

static uint64_t *cb_lat;		/* ns, one per sample */
static uint32_t cb_seen;		/* callbacks run (futex word) */
static uint32_t cb_sleeping;		/* the issuer sleeps on cb_seen */

/*
 * The timestamp comes first; only then the count, and a wake-up when the
 * issuing thread sleeps (it sleeps so as not to take a CPU from the
 * library's threads on a small machine).
 */
static void lat_cb(struct hcomm_request *req, void *arg)
{
	uint64_t t = now_ns();
	uint64_t i = (uint64_t)(uintptr_t)arg;

	cb_lat[i] = t >= req->t_complete_ns ? t - req->t_complete_ns :
		    UINT64_MAX;
	__atomic_add_fetch(&cb_seen, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&cb_sleeping, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &cb_seen, FUTEX_WAKE_PRIVATE, 1, NULL,
			NULL, 0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct lat {
	double p50, p99;
	uint64_t bad;
};

/* Wait until cb_seen reaches want (10 s at most: then -ETIMEDOUT). */
static int cb_wait(uint32_t want)
{
	double t0 = now();
	unsigned int spins = 0;
	uint32_t v;

	while ((v = __atomic_load_n(&cb_seen, __ATOMIC_ACQUIRE)) < want) {
		struct timespec ts = { 0, 10000000 };

		if (++spins < 64)
			continue;
		/* Sleep: the library's threads need the CPUs. */
		__atomic_store_n(&cb_sleeping, 1, __ATOMIC_SEQ_CST);
		v = __atomic_load_n(&cb_seen, __ATOMIC_SEQ_CST);
		if (v < want)
			syscall(SYS_futex, &cb_seen, FUTEX_WAIT_PRIVATE, v,
				&ts, NULL, 0);
		__atomic_store_n(&cb_sleeping, 0, __ATOMIC_SEQ_CST);
		if (now() - t0 > 10)
			return -ETIMEDOUT;
	}
	return 0;
}

/*
 * Samples of callback latency: inflight 1 = one put_nb at a time (the
 * dispatcher is idle and must be woken); more = that many kept in flight.
 */
static int cb_measure(unsigned int inflight, struct lat *l)
{
	unsigned int n = opt_samples, i, issued = 0;
	struct hcomm_request *reqs = calloc(n, sizeof(*reqs));
	int rc = 0;

	memset(l, 0, sizeof(*l));
	l->p50 = l->p99 = NAN;
	if (!reqs)
		return -ENOMEM;
	memset(cb_lat, 0, n * sizeof(*cb_lat));
	__atomic_store_n(&cb_seen, 0, __ATOMIC_SEQ_CST);
	while (issued < n && !rc) {
		if (issued - __atomic_load_n(&cb_seen, __ATOMIC_ACQUIRE) <
		    inflight) {
			struct hcomm_request *r = &reqs[issued];

			r->cb = lat_cb;
			r->cb_arg = (void *)(uintptr_t)issued;
			rc = hcomm_put_nb(C.win, 1, (issued % 64) * 64,
					  S.src, 8, r);
			if (!rc)
				issued++;
			continue;
		}
		if (cb_wait(issued - inflight + 1))
			rc = -HCOMM_ERR_TIMEOUT;
	}
	if (!rc && cb_wait(issued))
		rc = -HCOMM_ERR_TIMEOUT;
	/*
	 * cb_seen counts callbacks that ran, but a request is the library's
	 * until its done reads 1, stored after its callback returned: flush
	 * (every callback returned, every done stored) before reading the
	 * requests or freeing them - also after a timeout or a failed issue,
	 * with requests still in flight.
	 */
	if (issued) {
		int frc = hcomm_flush(C.comm);

		if (!rc && frc)
			rc = frc;
	}
	for (i = 0; !rc && i < issued; i++) {
		if (reqs[i].status)
			rc = reqs[i].status;
		if (cb_lat[i] == UINT64_MAX)
			l->bad++;
	}
	if (!rc) {
		qsort(cb_lat, issued, sizeof(*cb_lat), cmp_u64);
		l->p50 = (double)cb_lat[issued / 2];
		l->p99 = (double)cb_lat[(size_t)((double)issued * 0.99)];
	}
	free(reqs);
	return rc;
}

/* A new communicator with callbacks in mode (set before any operation). */
static int cb_reinit(int mode, char *err, size_t errlen)
{
	struct reply rp;
	int rc;

	rpc_send(OP_REINIT, (uint64_t)mode, 0);
	rc = comm_down();
	if (!rc)
		rc = comm_up(mode, err, errlen);
	else
		snprintf(err, errlen, "teardown: %s", herr(rc));
	rp = rpc_recv();
	if (rc) {
		fail("a communicator with callbacks in mode %d: %s", mode, err);
		exit(1);
	}
	if (rp.status) {
		fail("rank 1: a communicator with callbacks in mode %d", mode);
		exit(1);
	}
	return 0;
}

#define CB_ROUNDS	3

static void bench_cb(void)
{
	static const int modes[2] = { HCOMM_CB_THREAD, HCOMM_CB_THREAD_LOCKED };
	static const char *const mname[2] = { "thread (MPSC)",
					       "thread_locked (mutex)" };
	struct lat l[2][2], cur;
	unsigned int inflight[2] = { 1, opt_qd * 4 };
	char err[160], note[32];
	int m, k, round, rc;

	printf("\n== callback latency, req->t_complete_ns to the callback "
	       "(ns; %u samples per round, modes alternating, the round with "
	       "the lowest median counts; ratio = MPSC / mutex, < 1 means the "
	       "lock-free queue is faster)\n", opt_samples);
	cb_lat = calloc(opt_samples, sizeof(*cb_lat));
	for (m = 0; m < 2; m++)
		for (k = 0; k < 2; k++) {
			memset(&l[m][k], 0, sizeof(l[m][k]));
			l[m][k].p50 = l[m][k].p99 = NAN;
		}
	for (round = 0; round < CB_ROUNDS; round++)
		for (m = 0; m < 2; m++) {
			cb_reinit(modes[m], err, sizeof(err));
			for (k = 0; k < 2; k++) {
				rc = cb_measure(inflight[k], &cur);
				if (rc) {
					fail("callback latency, %s, %u in "
					     "flight: %s", mname[m],
					     inflight[k], herr(rc));
					continue;
				}
				if (cur.bad)
					fail("callback latency, %s: %llu "
					     "callbacks ran before "
					     "req->t_complete_ns", mname[m],
					     (unsigned long long)cur.bad);
				if (isnan(l[m][k].p50) || cur.p50 < l[m][k].p50)
					l[m][k] = cur;
			}
		}
	for (m = 0; m < 2; m++)
		printf("  %-22s idle: p50 %8.0f  p99 %8.0f | %2u in flight: "
		       "p50 %8.0f  p99 %8.0f\n", mname[m], l[m][0].p50,
		       l[m][0].p99, inflight[1], l[m][1].p50, l[m][1].p99);
	for (k = 0; k < 2; k++) {
		snprintf(note, sizeof(note), "qd%u", inflight[k]);
		add_result("cb_latency_mpsc_p50", 8, l[0][k].p50, "ns",
			   "cb_latency_mutex_p50", l[1][k].p50, false, note);
		add_result("cb_latency_mpsc_p99", 8, l[0][k].p99, "ns",
			   "cb_latency_mutex_p99", l[1][k].p99, false, note);
	}
	free(cb_lat);
	cb_lat = NULL;
}

/* --------------------------------------------------------- registration */

/*
 * Registering the same buffer again and again, at 1, 16 and 64 MiB: the
 * library's hot-buffer path (hcomm_reg_mem + hcomm_dereg of the same
 * buffer: parked, no system call), the kernel's registration cache (raw
 * REG_MEM + DEREG, a hit from the second on) and a fresh pin each time
 * (HCOMM_REG_NOCACHE); beside them two GET_INFO ioctls, the floor of two
 * system calls into the module.  A hit costs a lookup whatever the size;
 * a pin grows with it.
 */
struct reg_run {
	struct hcomm_ctx *ctx;		/* library path */
	void *buf;
	uint64_t len;
	uint32_t flags;			/* raw path */
	uint64_t fails;
};

static int run_reg_lib(void *p, uint64_t n)
{
	struct reg_run *r = p;
	struct hcomm_mr *mr;
	int ret;

	while (n--) {
		ret = hcomm_reg_mem(r->ctx, r->buf, r->len, HCOMM_ACCESS_ALL,
				    &mr);
		if (!ret)
			ret = hcomm_dereg(mr);
		if (ret)
			return ret;
	}
	return 0;
}

static int run_reg_raw(void *p, uint64_t n)
{
	struct reg_run *r = p;

	while (n--) {
		struct hcomm_reg_mem reg = {
			.addr = (uintptr_t)r->buf, .len = r->len,
			.access = HCOMM_ACCESS_ALL, .flags = r->flags,
		};
		struct hcomm_dereg d;

		if (ioctl(S.fd, HCOMM_CMD_REG_MEM, &reg) < 0)
			return -errno;
		memset(&d, 0, sizeof(d));
		d.region = reg.region;
		if (ioctl(S.fd, HCOMM_CMD_DEREG, &d) < 0)
			return -errno;
	}
	return 0;
}

/* Two system calls into the module that do (almost) nothing. */
static int run_two_ioctls(void *p, uint64_t n)
{
	struct hcomm_info info;

	(void)p;
	while (n--) {
		memset(&info, 0, sizeof(info));
		if (ioctl(S.fd, HCOMM_CMD_GET_INFO, &info) < 0)
			return -errno;
		memset(&info, 0, sizeof(info));
		if (ioctl(S.fd, HCOMM_CMD_GET_INFO, &info) < 0)
			return -errno;
	}
	return 0;
}

#define REG_MAX		(64ULL << 20)

static void bench_reg(void)
{
	static const uint64_t lens[] = { REG_LEN, 16ULL << 20, REG_MAX };
	struct reg_run r = { 0 };
	struct meas m = { 0, 0, 0 };
	double us[3], floor_us = NAN;
	struct hcomm_ctx_opts o = {
		.mask = HCOMM_CTX_CACHE_LIMIT, .cache_limit = 2 * REG_MAX,
	};
	unsigned int i;
	int ret, fd;

	printf("\n== registering one buffer again and again, register + deregister (us; ratio = this / a fresh pin of the same size, < 1 is faster)\n");
	r.buf = mmap(NULL, REG_MAX, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (r.buf == MAP_FAILED) {
		fail("mmap of %llu MiB: %s", REG_MAX >> 20, strerror(errno));
		return;
	}
	ret = hcomm_open(&r.ctx, 0);
	if (ret) {
		fail("hcomm_open: %s (%s)", herr(ret), hcomm_errmsg());
		goto out;
	}
	/* A raw context of its own with the kernel cache on for it. */
	fd = S.fd;
	S.fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	if (S.fd < 0 || ioctl(S.fd, HCOMM_CMD_SET_CTX, &o) < 0) {
		fail("a raw context with cache_limit %llu: %s",
		     (unsigned long long)o.cache_limit, strerror(errno));
		goto close;
	}
	ret = measure(run_two_ioctls, &r, &m, opt_time, opt_iters);
	if (ret)
		fail("GET_INFO: %s", strerror(-ret));
	else
		floor_us = us_of(&m);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		us[0] = us[1] = us[2] = NAN;
		r.len = lens[i];
		r.flags = HCOMM_REG_NOCACHE;
		ret = measure(run_reg_raw, &r, &m, opt_time, opt_iters);
		if (ret)
			fail("REG_MEM NOCACHE + DEREG: %s", strerror(-ret));
		else
			us[0] = us_of(&m);
		r.flags = 0;
		ret = measure(run_reg_raw, &r, &m, opt_time, opt_iters);
		if (ret)
			fail("REG_MEM (kernel cache) + DEREG: %s",
			     strerror(-ret));
		else
			us[1] = us_of(&m);
		ret = measure(run_reg_lib, &r, &m, opt_time, opt_iters);
		if (ret)
			fail("hcomm_reg_mem + hcomm_dereg: %s (%s)", herr(ret),
			     hcomm_errmsg());
		else
			us[2] = us_of(&m);
		add_result("reg_dereg_kernel_cache_hit", r.len, us[1], "us",
			   "reg_dereg_fresh_pin", us[0], false,
			   "raw REG_MEM + DEREG");
		add_result("reg_dereg_library_hot", r.len, us[2], "us",
			   "reg_dereg_fresh_pin", us[0], false,
			   "hcomm_reg_mem + hcomm_dereg, parked");
		add_result("reg_dereg_kernel_cache_hit", r.len, us[1], "us",
			   "two_ioctls_get_info", floor_us, false,
			   "the system-call floor");
	}
close:
	if (S.fd >= 0)
		close(S.fd);
	S.fd = fd;
	hcomm_close(r.ctx);
out:
	munmap(r.buf, REG_MAX);
}

/* ------------------------------------------------------------ ping-pong */

struct pp_ctx {
	uint64_t ctr, base;
};

static int run_pp_lib(void *p, uint64_t n)
{
	struct pp_ctx *c = p;
	int rc;

	while (n--) {
		uint64_t i = ++c->ctr;
		int64_t got;

		pp_src[0] = i;
		rc = hcomm_put_signal(C.win, 1, PP_OFF, &pp_src[0], 8, SIG_PP,
				      1);
		if (rc)
			return rc;
		got = hcomm_signal_wait(C.comm, SIG_PP, c->base + i, 10000);
		if (got < 0)
			return (int)got;
		if (*(volatile uint64_t *)(C.wbuf + PONG_OFF) != i) {
			fprintf(stderr, "# pong %llu carried %llu\n",
				(unsigned long long)i,
				(unsigned long long)*(volatile uint64_t *)
				(C.wbuf + PONG_OFF));
			return -HCOMM_ERR_IO;
		}
	}
	return 0;
}

static int run_pp_pipe(void *p, uint64_t n)
{
	uint64_t *ctr = p;

	while (n--) {
		uint64_t i = ++*ctr, v;

		if (write(C.pipe_out, &i, 8) != 8)
			return -EIO;
		if (read(C.pipe_in, &v, 8) != 8)
			return -EIO;
		if (v != i)
			return -EIO;
	}
	return 0;
}

static void bench_pingpong(void)
{
	struct pp_ctx pc;
	struct reply rp;
	struct meas m;
	double lib = NAN, pipe_us = NAN;
	uint64_t stop = PP_STOP, ctr = 0;
	int rc;

	printf("\n== ping-pong, 8 B each way (us per round trip; ratio = "
	       "put_signal / pipe, < 1 means put_signal is faster)\n");
	memset(&pc, 0, sizeof(pc));
	pc.base = hcomm_signal_read(C.comm, SIG_PP);
	rp = rpc(OP_PP_LIB, 0, 0);	/* rank 1 has read its base */
	rc = measure(run_pp_lib, &pc, &m, opt_time, opt_iters);
	pp_src[0] = stop;
	if (hcomm_put_signal(C.win, 1, PP_OFF, &pp_src[0], 8, SIG_PP, 1) &&
	    !rc)
		rc = -HCOMM_ERR_IO;
	rp = rpc_recv();
	if (!rc && rp.status)
		rc = (int)rp.status;
	if (!rc && rp.val != pc.ctr)
		rc = -HCOMM_ERR_IO;
	if (rc)
		fail("put_signal ping-pong: %s", herr(rc));
	else
		lib = us_of(&m);

	rpc_send(OP_PP_PIPE, 0, 0);
	rc = measure(run_pp_pipe, &ctr, &m, opt_time, opt_iters);
	if (write(C.pipe_out, &stop, 8) != 8 && !rc)
		rc = -EIO;
	rp = rpc_recv();
	if (!rc && rp.status)
		rc = (int)rp.status;
	if (rc)
		fail("pipe ping-pong: %s", strerror(rc < 0 ? -rc : rc));
	else
		pipe_us = us_of(&m);
	add_result("pingpong_put_signal", 8, lib, "us", "pingpong_pipe",
		   pipe_us, false, "");
}

/* ------------------------------------------------------------ output */

static char transport[32];

static void print_rows(int from)
{
	int i;

	for (i = from; i < nresults; i++) {
		const struct result *r = &results[i];
		char sz[32], v[32], bv[32], ra[32], vd[32];

		fmt_val(r->value, v, sizeof(v));
		fmt_val(r->base_value, bv, sizeof(bv));
		fmt_ratio(r->ratio, ra, sizeof(ra));
		printf("  %-22s %7s %10s %-7s vs %-24s %10s  ratio %6s  %-14s %s\n",
		       r->name, size_str(r->size, sz, sizeof(sz)), v, r->unit,
		       r->base, bv, ra,
		       verdict(r->ratio, r->higher_better, vd, sizeof(vd)),
		       r->note);
	}
}

static int write_json(const char *path, double wall)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -errno;
	fprintf(f, "{\n  \"program\": \"hcomm_lib_bench\",\n  \"note\": ");
	json_host(f);
	fprintf(f, "  \"params\": {\"max_size\": %llu, \"target_s\": %g, "
		"\"iters\": %llu, \"rounds\": %d, \"qd\": %u, "
		"\"samples\": %u},\n", (unsigned long long)opt_max, opt_time,
		(unsigned long long)opt_iters, ROUNDS, opt_qd, opt_samples);
	fprintf(f, "  \"transport\": ");
	json_str(f, transport);
	fprintf(f, ",\n  \"wall_s\": %.1f,\n  \"failures\": %d,\n", wall,
		failures);
	json_results(f, "note");
	fprintf(f, "}\n");
	if (fclose(f))
		return -errno;
	return 0;
}

/* ------------------------------------------------------------ setup */

static void raw_setup(void)
{
	struct hcomm_reg_mem reg;
	int ret;

	S.fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	if (S.fd < 0)
		die("open %s: %s", HCOMM_DEV, strerror(errno));
	memset(&reg, 0, sizeof(reg));
	reg.addr = (uintptr_t)S.src;
	reg.len = S.len;
	reg.access = HCOMM_ACCESS_ALL;
	if (ioctl(S.fd, HCOMM_CMD_REG_MEM, &reg) < 0)
		die("raw REG_MEM of the source (%zu bytes): %s", S.len,
		    strerror(errno));
	S.src_key = reg.key;
	ret = io_uring_queue_init(RING_ENTRIES, &S.ring, IORING_SETUP_CQE32);
	if (ret)
		ret = io_uring_queue_init(RING_ENTRIES, &S.ring, 0);
	if (ret)
		die("io_uring_queue_init(%d): %s", RING_ENTRIES,
		    strerror(-ret));
}

static void usage(FILE *f, int rc)
{
	fprintf(f,
		"usage: hcomm_lib_bench [--max-size N[K|M|G]] [--time SECS] "
		"[--iters N]\n"
		"                       [--qd N] [--samples N] [--json FILE]\n"
		"  --max-size  largest put (8 B .. 16M points; default 16M)\n"
		"  --time      seconds per measured point (default 0.2)\n"
		"  --iters     fixed iterations per point instead of --time\n"
		"  --qd        put_nb / raw XFERs kept in flight (1..%d, "
		"default 4)\n"
		"  --samples   callback latency samples per mode (default 2000)\n"
		"  --json      JSON output (default " DEFAULT_JSON
		" when ./build/logs exists)\n", QD_MAX);
	exit(rc);
}

/* Launcher variables of an outer job must not decide our ranks. */
static void scrub_env(void)
{
	static const char *const vars[] = {
		"HCOMM_RANK_TABLE", "OMPI_COMM_WORLD_RANK",
		"OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
		"PMI_RANK", "PMI_SIZE",
	};
	size_t i;

	for (i = 0; i < sizeof(vars) / sizeof(*vars); i++)
		unsetenv(vars[i]);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "max-size", required_argument, NULL, 'm' },
		{ "time", required_argument, NULL, 't' },
		{ "iters", required_argument, NULL, 'i' },
		{ "qd", required_argument, NULL, 'q' },
		{ "samples", required_argument, NULL, 's' },
		{ "json", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct hello h;
	struct rlimit rl;
	struct reply rp;
	int opt, st, rc;
	double t_start = now();
	bool json_explicit = false;
	char err[160];
	uint64_t v;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt_long(argc, argv, "m:t:i:q:s:j:h", opts,
				  NULL)) != -1) {
		switch (opt) {
		case 'm':
			if (parse_size(optarg, &opt_max) || opt_max < 8 ||
			    opt_max > 16 * MiB)
				die("--max-size: 8 .. 16M");
			break;
		case 't':
			opt_time = atof(optarg);
			if (!(opt_time > 0 && opt_time <= 60))
				die("--time: seconds, > 0 and <= 60");
			break;
		case 'i':
			if (parse_size(optarg, &opt_iters) || !opt_iters)
				die("--iters: a positive count");
			break;
		case 'q':
			opt_qd = (unsigned int)atoi(optarg);
			if (opt_qd < 1 || opt_qd > QD_MAX)
				die("--qd: 1 .. %d", QD_MAX);
			break;
		case 's':
			if (parse_size(optarg, &v) || v < 100 || v > 1000000)
				die("--samples: 100 .. 1000000");
			opt_samples = (unsigned int)v;
			break;
		case 'j':
			opt_json = optarg;
			json_explicit = true;
			break;
		case 'h':
			usage(stdout, 0);
			break;
		default:
			usage(stderr, 2);
		}
	}
	if (optind != argc)
		usage(stderr, 2);
	if (!opt_json) {
		struct stat sb;

		if (!stat("build/logs", &sb) && S_ISDIR(sb.st_mode))
			opt_json = DEFAULT_JSON;
	}
	signal(SIGPIPE, SIG_IGN);
	host_probe();
	if (!getrlimit(RLIMIT_MEMLOCK, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_MEMLOCK, &rl);
	}
	if (access(HCOMM_DEV, F_OK))
		die("no %s: is hcomm.ko loaded?", HCOMM_DEV);

	scrub_env();
	snprintf(C.root, sizeof(C.root), "hcomm-lib-bench-%d", (int)getpid());
	C.wlen = buf_len();
	C.wbuf = map_buf(C.wlen);
	S.len = buf_len();
	S.src = map_buf(S.len);
	if (!C.wbuf || !S.src)
		die("cannot map %zu bytes", C.wlen);
	memset(C.wbuf, POISON, C.wlen);
	fill_pattern(S.src, S.len, 0x6c6962686323ULL);
	S.child = fork_peer(&C.sock, &C.pipe_in, &C.pipe_out);
	if (S.child == 0) {
		C.rank = 1;
		child_main();
	}
	C.rank = 0;

	rc = comm_up(HCOMM_CB_INLINE, err, sizeof(err));
	if (rc) {
		kill(S.child, SIGKILL);
		die("rank 0: %s", err);
	}
	raw_setup();
	if (xrecv(C.sock, &h, sizeof(h)))
		die("rank 1 died during its setup");
	if (h.status)
		die("rank 1 setup: %s: %s", h.err,
		    h.status < 0 && h.status > -HCOMM_ERR__MAX ?
		    hcomm_strerror((int)h.status) : strerror((int)-h.status));
	S.dst_key = h.raw_key;

	snprintf(transport, sizeof(transport), "%s",
		 hcomm_comm_transport(C.comm) ? hcomm_comm_transport(C.comm) :
		 "?");
	print_host();
	printf("2 ranks (pids %d, %d), transport %s, %u signals; %.2f s per "
	       "point (best of %d rounds), %u in flight\n", (int)getpid(),
	       (int)S.child, transport,
	       hcomm_signal_count(C.comm), opt_time, ROUNDS, opt_qd);

	bench_put();
	{
		int first = nresults;

		bench_batch();
		print_rows(first);
	}
	{
		int first = nresults;

		bench_pingpong();
		print_rows(first);
	}
	{
		int first = nresults;

		bench_cb();
		print_rows(first);
	}
	{
		int first = nresults;

		bench_reg();
		print_rows(first);
	}

	/* Collective teardown: rank 1 answers once it has done its part. */
	rpc_send(OP_QUIT, 0, 0);
	rc = comm_down();
	rp = rpc_recv();
	if (rc)
		fail("hcomm_win_free/hcomm_comm_destroy: %s", herr(rc));
	if (rp.status)
		fail("rank 1: hcomm_win_free/hcomm_comm_destroy: %s",
		     hcomm_strerror((int)rp.status));
	if (waitpid(S.child, &st, 0) != S.child || !WIFEXITED(st) ||
	    WEXITSTATUS(st))
		fail("rank 1 did not exit cleanly");
	io_uring_queue_exit(&S.ring);
	close(S.fd);

	if (opt_json) {
		int ret = write_json(opt_json, now() - t_start);

		if (ret && json_explicit) {
			fprintf(stderr, "hcomm_lib_bench: cannot write %s: %s\n",
				opt_json, strerror(-ret));
			return 2;
		}
		if (ret)
			fprintf(stderr, "hcomm_lib_bench: note: cannot write "
				"%s: %s (use --json FILE)\n", opt_json,
				strerror(-ret));
		else
			printf("\nJSON: %s\n", opt_json);
	}
	printf("hcomm_lib_bench: %s (%.1f s)\n",
	       failures ? "FUNCTIONAL ERRORS (see above)" :
	       "all operations verified", now() - t_start);
	return failures ? 1 : 0;
}
