/* SPDX-License-Identifier: MIT */
/*
 * hcomm_tcp_zc: does IORING_OP_SENDMSG_ZC pay over plain IORING_OP_SENDMSG
 * for the TCP transport's frames, and how fast is the transport's put
 * against a plain TCP stream?  Over loopback, in one run:
 *
 *   hcomm_tcp_zc [--max-size N[K|M]] [--time SECS] [--json FILE] [--no-lib]
 *
 * 1. raw: this process sends messages of 4 KiB .. max-size to a forked
 *    receiver over one TCP connection on 127.0.0.1, the way the transport
 *    sends a frame: one sendmsg of { 64-byte header, payload } in flight
 *    at a time through io_uring (MSG_WAITALL), either IORING_OP_SENDMSG or
 *    IORING_OP_SENDMSG_ZC (a payload buffer is reused only after its
 *    notification; 8 buffers rotate).  The receiver recv()s with
 *    MSG_WAITALL.  Printed: GB/s of each and zc/send.
 * 2. stream: the same sizes with blocking send()/recv() of the payload
 *    only (what iperf3 measures): the baseline of 3.
 * 3. lib: two ranks of libhcomm (HCOMM_TRANSPORT=tcp, forked) and
 *    hcomm_put_nb of each size, 4 MiB (8 .. 256 operations) in flight,
 *    into rank 1's window, with HCOMM_TCP_ZC_THRESHOLD off and at 64 KiB;
 *    ratio against 2.  Then the latency of a blocking 8-byte hcomm_put
 *    (median of 2000) against an 8-byte TCP ping-pong (send, recv).
 *
 * Every point's data is checked in rank 1's window.  Timings never fail
 * the run; exit 1 when a transfer fails or leaves wrong bytes, 2 on bad
 * usage or setup.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <liburing.h>
#include <hcomm.h>

#define KiB		1024ULL
#define MiB		(1024ULL * KiB)
#define HDR		64
#define NBUF		8
#define LIB_QD_MAX	256
#define LIB_INFLIGHT	(4 * MiB)	/* bytes kept in flight, >= 8 ops */
#define LAT_N		2000
#define SIZES_MAX	16

static double opt_time = 0.5;
static uint64_t opt_max = 16 * MiB;
static int opt_lib = 1;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void __attribute__((noreturn, format(printf, 1, 2)))
die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "hcomm_tcp_zc: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void *xmap(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap %zu: %s", len, strerror(errno));
	memset(p, 0x5a, len);
	return p;
}

static int xfull(int fd, void *p, size_t n, int rx)
{
	ssize_t r;

	while (n) {
		r = rx ? recv(fd, p, n, MSG_WAITALL) : send(fd, p, n, 0);
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			return -1;
		}
		p = (char *)p + r;
		n -= (size_t)r;
	}
	return 0;
}

/* A connected pair over 127.0.0.1: *a (this side), *b (for the child). */
static void tcp_pair(int *a, int *b)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int l, one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(l, 1) || getsockname(l, (struct sockaddr *)&sa, &sl))
		die("listen: %s", strerror(errno));
	*a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*a < 0 || connect(*a, (struct sockaddr *)&sa, sizeof(sa)))
		die("connect: %s", strerror(errno));
	*b = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (*b < 0)
		die("accept: %s", strerror(errno));
	close(l);
	setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/*
 * The receiver: per phase, a size (8 bytes; 0 ends), whether a header
 * precedes each message, and the message count come first; it receives
 * them and answers one byte.
 */
static int receiver(int fd)
{
	uint64_t m[3], k;
	char *buf = xmap(opt_max + HDR);
	char ack = 1;

	for (;;) {
		if (xfull(fd, m, sizeof(m), 1))
			return 1;
		if (!m[0])
			return 0;
		for (k = 0; m[1] == 2 && k < m[2]; k++)	/* ping-pong */
			if (xfull(fd, buf, m[0], 1) || xfull(fd, buf, m[0], 0))
				return 1;
		if (m[1] == 2)
			continue;
		for (k = 0; k < m[2]; k++)
			if (xfull(fd, buf, m[0] + (m[1] ? HDR : 0), 1))
				return 1;
		if (xfull(fd, &ack, 1, 0))
			return 1;
	}
}

struct zc_state {
	struct io_uring ring;
	int fd;
	char *bufs[NBUF];
	int notif[NBUF];	/* notifications outstanding per buffer */
	char hdr[HDR];
};

/* Wait for CQEs until the send in flight completed; count notifications. */
static void zc_reap(struct zc_state *s, int *busy)
{
	struct io_uring_cqe *cqe;
	uint64_t ud;

	while (*busy) {
		if (io_uring_wait_cqe(&s->ring, &cqe))
			die("io_uring_wait_cqe");
		ud = cqe->user_data;
		if (cqe->flags & IORING_CQE_F_NOTIF) {
			s->notif[ud]--;
		} else {
			if (cqe->res < 0)
				die("sendmsg: %s", strerror(-cqe->res));
			*busy = 0;
		}
		io_uring_cqe_seen(&s->ring, cqe);
	}
}

/* Send n messages of len bytes with a header each; zc: SENDMSG_ZC. */
static void send_msgs(struct zc_state *s, uint64_t len, uint64_t n, int zc)
{
	struct iovec iov[2];
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	uint64_t k;
	int b, busy = 0;

	for (k = 0; k < n; k++) {
		b = (int)(k % NBUF);
		zc_reap(s, &busy);
		while (s->notif[b]) {
			if (io_uring_wait_cqe(&s->ring, &cqe))
				die("io_uring_wait_cqe");
			if (cqe->flags & IORING_CQE_F_NOTIF)
				s->notif[cqe->user_data]--;
			io_uring_cqe_seen(&s->ring, cqe);
		}
		iov[0].iov_base = s->hdr;
		iov[0].iov_len = HDR;
		iov[1].iov_base = s->bufs[b];
		iov[1].iov_len = len;
		sqe = io_uring_get_sqe(&s->ring);
		if (zc) {
			io_uring_prep_sendmsg_zc(sqe, s->fd, &mh, MSG_WAITALL);
			s->notif[b]++;
		} else {
			io_uring_prep_sendmsg(sqe, s->fd, &mh, MSG_WAITALL);
		}
		sqe->user_data = (uint64_t)b;
		busy = 1;
		io_uring_submit(&s->ring);
	}
	zc_reap(s, &busy);
	for (b = 0; b < NBUF; b++)
		while (s->notif[b]) {
			if (io_uring_wait_cqe(&s->ring, &cqe))
				die("io_uring_wait_cqe");
			if (cqe->flags & IORING_CQE_F_NOTIF)
				s->notif[cqe->user_data]--;
			io_uring_cqe_seen(&s->ring, cqe);
		}
}

/* Messages of len bytes that take about opt_time; returns GB/s. */
static double phase(struct zc_state *s, uint64_t len, int mode)
{
	uint64_t n = (uint64_t)(opt_time * 2e9 / (double)len) + 4;
	uint64_t m[3] = { len, mode != 2, n };
	double t0;
	char ack;
	uint64_t k;

	if (n > 200000)
		n = m[2] = 200000;
	t0 = now();
	if (xfull(s->fd, m, sizeof(m), 0))
		die("send: %s", strerror(errno));
	if (mode == 2) {
		for (k = 0; k < n; k++)
			if (xfull(s->fd, s->bufs[k % NBUF], len, 0))
				die("send: %s", strerror(errno));
	} else {
		send_msgs(s, len, n, mode);
	}
	if (xfull(s->fd, &ack, 1, 1))
		die("receiver gone");
	return (double)(len * n) / (now() - t0) / 1e9;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median round trip (us) of 8 bytes there and back. */
static double pingpong(int fd)
{
	static double v[LAT_N];
	uint64_t m[3] = { 8, 2, LAT_N };
	char b[8] = { 0 };
	double t;
	int i;

	if (xfull(fd, m, sizeof(m), 0))
		die("send: %s", strerror(errno));
	for (i = 0; i < LAT_N; i++) {
		t = now();
		if (xfull(fd, b, 8, 0) || xfull(fd, b, 8, 1))
			die("ping-pong: %s", strerror(errno));
		v[i] = (now() - t) * 1e6;
	}
	qsort(v, LAT_N, sizeof(v[0]), cmp_dbl);
	return v[LAT_N / 2];
}

static int sizes(uint64_t *v)
{
	uint64_t len;
	int n = 0;

	for (len = 4 * KiB; len <= opt_max && n < SIZES_MAX; len *= 4)
		v[n++] = len;
	return n;
}

static const char *sz(uint64_t n, char *buf)
{
	if (n >= MiB)
		sprintf(buf, "%llu MiB", (unsigned long long)(n / MiB));
	else
		sprintf(buf, "%llu KiB", (unsigned long long)(n / KiB));
	return buf;
}

static double res[3][SIZES_MAX];	/* send, sendmsg_zc, stream */
static double lib[2][SIZES_MAX + 1];	/* zc off, zc 64 KiB; + latency */
static double pp_us;			/* 8-byte TCP ping-pong, median */

static void run_raw(void)
{
	struct zc_state s = { 0 };
	uint64_t v[SIZES_MAX], end[3] = { 0, 0, 0 };
	int a, b, i, mode, st;
	pid_t pid;

	tcp_pair(&a, &b);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (!pid) {
		close(a);
		_exit(receiver(b));
	}
	close(b);
	s.fd = a;
	if (io_uring_queue_init(64, &s.ring, 0))
		die("io_uring_queue_init");
	for (i = 0; i < NBUF; i++)
		s.bufs[i] = xmap(opt_max);
	for (i = 0; i < sizes(v); i++)
		for (mode = 0; mode < 3; mode++)
			res[mode][i] = phase(&s, v[i], mode);
	pp_us = pingpong(a);
	if (xfull(a, end, sizeof(end), 0))
		die("send: %s", strerror(errno));
	close(a);
	waitpid(pid, &st, 0);
	io_uring_queue_exit(&s.ring);
	for (i = 0; i < NBUF; i++)
		munmap(s.bufs[i], opt_max);
}

/* ------------------------------------------------------------------ */
/* libhcomm over TCP                                                   */
/* ------------------------------------------------------------------ */

/* Rank 0: median us of a blocking 8-byte put, into out. */
static int lib_lat(struct hcomm_win *win, char *src, double *out)
{
	static double v[LAT_N];
	double t;
	int i, ret = 0;

	for (i = 0; i < LAT_N && !ret; i++) {
		t = now();
		ret = hcomm_put(win, 1, 0, src, 8);
		v[i] = (now() - t) * 1e6;
	}
	qsort(v, LAT_N, sizeof(v[0]), cmp_dbl);
	*out = v[LAT_N / 2];
	return ret;
}

/* The bytes of point len: byte i of every put of that size. */
static void pattern(char *p, uint64_t len)
{
	uint64_t i;

	for (i = 0; i < len; i++)
		p[i] = (char)(i * 131 + len);
}

/* Rank 1, after a point: its window holds the point's bytes. */
static int verify(const char *mem, char *want, uint64_t len)
{
	pattern(want, len);
	if (!memcmp(mem, want, len))
		return 0;
	fprintf(stderr, "hcomm_tcp_zc: the puts of %llu bytes left other "
		"bytes in the window\n", (unsigned long long)len);
	return -1;
}

static int lib_rank(int rank, const char *root, const char *zc, double *out)
{
	struct hcomm_request req[LIB_QD_MAX];
	struct hcomm_comm *comm;
	struct hcomm_win *win;
	uint64_t v[SIZES_MAX], k, n;
	char *mem = xmap(opt_max), *src = xmap(opt_max), env[16];
	int i, j, qd, ret, nsz = sizes(v);
	double t0;

	snprintf(env, sizeof(env), "%d", rank);
	setenv("HCOMM_RANK", env, 1);
	setenv("HCOMM_WORLD_SIZE", "2", 1);
	setenv("HCOMM_ROOT_ADDR", root, 1);
	setenv("HCOMM_TRANSPORT", "tcp", 1);
	setenv("HCOMM_TCP_ZC_THRESHOLD", zc, 1);
	ret = hcomm_comm_init(&comm, NULL);
	if (!ret)
		ret = hcomm_win_create(comm, mem, opt_max, &win);
	if (ret) {
		fprintf(stderr, "hcomm_tcp_zc: rank %d: %s (%s)\n", rank,
			hcomm_strerror(ret), hcomm_errmsg());
		return 1;
	}
	for (i = 0; i < nsz && !ret; i++) {
		qd = (int)(LIB_INFLIGHT / v[i]);
		qd = qd < 8 ? 8 : qd > LIB_QD_MAX ? LIB_QD_MAX : qd;
		n = (uint64_t)(opt_time * 2e9 / (double)v[i]) + (uint64_t)qd;
		if (n > 400000)
			n = 400000;
		pattern(src, v[i]);
		ret = hcomm_boot_barrier(comm);
		t0 = now();
		for (k = 0; rank == 0 && k < n && !ret; k++) {
			j = (int)(k % (uint64_t)qd);
			if (k >= (uint64_t)qd)
				ret = hcomm_wait(&req[j]);
			memset(&req[j], 0, sizeof(req[j]));
			if (!ret)
				ret = hcomm_put_nb(win, 1, 0, src, v[i],
						   &req[j]);
		}
		if (rank == 0 && !ret)
			ret = hcomm_flush(comm);
		for (j = 0; rank == 0 && j < qd && !ret; j++)
			ret = req[j].status;
		out[i] = (double)(v[i] * n) / (now() - t0) / 1e9;
		if (!ret)
			ret = hcomm_boot_barrier(comm);
		if (!ret && rank == 1 && verify(mem, src, v[i]))
			ret = -HCOMM_ERR_IO;
	}
	if (!ret)
		ret = hcomm_boot_barrier(comm);
	if (!ret && rank == 0)
		ret = lib_lat(win, src, &out[SIZES_MAX]);
	if (ret)
		fprintf(stderr, "hcomm_tcp_zc: rank %d: put: %s (%s)\n", rank,
			hcomm_strerror(ret), hcomm_errmsg());
	hcomm_win_free(win);
	hcomm_comm_destroy(comm);
	return ret ? 1 : 0;
}

static void run_lib(int which, const char *zc)
{
	double *out = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char root[64];
	pid_t pid[2];
	int r, st, bad = 0;

	if (out == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	snprintf(root, sizeof(root), "hcomm-tcp-zc-%d-%d", (int)getpid(),
		 which);
	for (r = 0; r < 2; r++) {
		fflush(stdout);
		pid[r] = fork();
		if (pid[r] < 0)
			die("fork: %s", strerror(errno));
		if (!pid[r]) {
			alarm(600);
			_exit(lib_rank(r, root, zc, out));
		}
	}
	for (r = 0; r < 2; r++)
		if (waitpid(pid[r], &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			bad = 1;
	if (bad) {
		fprintf(stderr, "hcomm_tcp_zc: the libhcomm ranks failed\n");
		exit(1);
	}
	memcpy(lib[which], out, sizeof(lib[which]));
	munmap(out, 4096);
}

static void print_json(const char *path, const uint64_t *v, int n)
{
	FILE *f = fopen(path, "w");
	int i;

	if (!f)
		die("%s: %s", path, strerror(errno));
	fprintf(f, "{\n  \"bench\": \"hcomm_tcp_zc\",\n  \"points\": [\n");
	for (i = 0; i < n; i++) {
		fprintf(f, "    { \"size\": %llu, \"sendmsg_gbs\": %.3f, "
			"\"sendmsg_zc_gbs\": %.3f, \"stream_gbs\": %.3f",
			(unsigned long long)v[i], res[0][i], res[1][i],
			res[2][i]);
		if (opt_lib)
			fprintf(f, ", \"put_gbs\": %.3f, \"put_zc_gbs\": %.3f",
				lib[0][i], lib[1][i]);
		fprintf(f, " }%s\n", i + 1 < n ? "," : "");
	}
	fprintf(f, "  ],\n  \"pingpong_us\": %.2f", pp_us);
	if (opt_lib)
		fprintf(f, ",\n  \"put8_us\": %.2f", lib[0][SIZES_MAX]);
	fprintf(f, "\n}\n");
	fclose(f);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "max-size", required_argument, NULL, 'm' },
		{ "time", required_argument, NULL, 't' },
		{ "json", required_argument, NULL, 'j' },
		{ "no-lib", no_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	const char *json = NULL;
	uint64_t v[SIZES_MAX];
	char b[32];
	int c, i, n;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (hcomm_parse_size(optarg, &opt_max) ||
			    opt_max < 4 * KiB || opt_max > 256 * MiB)
				die("--max-size: 4K .. 256M");
			break;
		case 't':
			opt_time = atof(optarg);
			if (opt_time <= 0 || opt_time > 60)
				die("--time: 0 .. 60 seconds");
			break;
		case 'j':
			json = optarg;
			break;
		case 'n':
			opt_lib = 0;
			break;
		default:
			die("usage: hcomm_tcp_zc [--max-size N] [--time S] "
			    "[--json FILE] [--no-lib]");
		}
	}
	signal(SIGPIPE, SIG_IGN);
	run_raw();
	if (opt_lib) {
		run_lib(0, "off");
		run_lib(1, "64K");
	}
	n = sizes(v);
	printf("%-8s %9s %9s %7s %9s", "size", "sendmsg", "sendmsg_zc",
	       "zc/send", "stream");
	if (opt_lib)
		printf(" %9s %9s %9s", "put", "put_zc", "put/strm");
	printf("   (GB/s, loopback)\n");
	for (i = 0; i < n; i++) {
		printf("%-8s %9.2f %10.2f %7.2f %9.2f", sz(v[i], b), res[0][i],
		       res[1][i], res[1][i] / res[0][i], res[2][i]);
		if (opt_lib)
			printf(" %9.2f %9.2f %9.2f", lib[0][i], lib[1][i],
			       lib[0][i] / res[2][i]);
		printf("\n");
	}
	printf("8-byte round trip: TCP ping-pong %.1f us", pp_us);
	if (opt_lib)
		printf(", blocking hcomm_put %.1f us (zc off), %.1f us (zc on)",
		       lib[0][SIZES_MAX], lib[1][SIZES_MAX]);
	printf(" (medians of %d)\n", LAT_N);
	if (json)
		print_json(json, v, n);
	return 0;
}
