/* SPDX-License-Identifier: MIT */
/*
 * hcomm_vm_garbage: hostile clients against a rank's tcp listener across
 * hosts, while the real ranks keep exchanging data.
 *
 *   hcomm_vm_garbage            one rank of 2 (hcomm_vm_launch, one rank
 *                               per VM, HCOMM_TRANSPORT=tcp)
 *   hcomm_vm_garbage --attack ADDR NONCE WIN WINLEN
 *                               the attacker (started by rank 1)
 *
 * Rank 0 is the target: it publishes its listening address (the address
 * and port every rank of the job learns at hcomm_comm_init) and serves a
 * ping-pong of put_signals with rank 1 (lengths 1 .. 64 KiB, every byte
 * checked on both sides).  Rank 1 starts the attacker as a process of its
 * own host (fork + exec of this program), which knows what any rank of the
 * job knows (the job nonce, rank 0's window id and length) and sends on a
 * new connection each:
 *
 *   before a hello:  random bytes; a hello with a wrong job id (nonce)
 *   after a valid hello (a guest connection, claiming rank 1 lane 0):
 *     random bytes; a frame with a bad magic; a header with a bad CRC; a
 *     put whose payload fails its CRC; a put cut off in its payload, then
 *     EOF; a header cut off, then EOF; a length beyond the window; a
 *     length that overflows with the offset; a put straddling the window's
 *     end; a put into an unknown window; a get beyond the window;
 *   and, as the control that its frames are right otherwise, a correct put
 *   that must be acknowledged.
 *
 * The attacker checks that the target closed every bad connection (EOF
 * or reset within IO_MS) and exits with the number of failed checks.
 * Rank 0 then checks its counters (hcomm_comm_get_stats: exactly
 * G_REFUSED more refused, G_CRC CRC errors, G_LOST connections lost), its
 * window (poison everywhere but the ping slots, the correct put and the
 * two ranges the CRC-failed and the cut-off puts named, which are
 * undefined by design), the guard pages around the window, and that every
 * ping arrived intact; rank 1 that its own counters show no error.
 *
 * Linked against libhcomm.a: the nonce, the listening address and the
 * window id come from the library's internals (as in lib/tests/test_tcp.c).
 * Output: lines "rN: ..." / "attacker: ..."; failures start with FAIL.
 * Exit status 0 passed, 1 failed, 3 alarm (HCOMM_VMTEST_ALARM, default
 * 100 s).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "hcomm_comm_int.h"
#include "hcomm_crc32c.h"
#include "tests/tcp_wire.h"

#define KiB		(1ULL << 10)
#define POISON		0xa5
#define GUARD_PG	4096		/* poisoned bytes on each side */
#define G_WIN		(1024 * KiB)	/* each rank's window */
#define G_CTRL_OFF	0		/* rank 1 -> 0: pings sent */
#define G_ATT_OFF	(64 * KiB)	/* the attacker's puts land here */
#define G_GOOD_OFF	(G_ATT_OFF + 100)
#define G_GOOD_LEN	100
#define G_BADCRC_OFF	(G_ATT_OFF + 4096)
#define G_CUT_OFF	(G_ATT_OFF + 16 * KiB)
#define G_PUT_LEN	4096
#define G_PING_OFF	(256 * KiB)
#define G_SLOT		(64 * KiB + 64)
#define G_SLOTS		4
#define G_MIN_PINGS	20
#define SIG_PING	1
#define SIG_PONG	2
#define SIG_END		3
#define IO_MS		10000

/* What the attacks must add to rank 0's counters. */
#define G_REFUSED	10	/* 2 hellos, 8 malformed or out-of-range
				 * frames */
#define G_CRC		1	/* the payload CRC */
#define G_LOST		12	/* every connection past its hello: the
				 * 11 bad ones and the correct one,
				 * closed without BYE */

static struct hcomm_comm *comm;
static int me = -1, fails;
static const char *who = "r?";

static void __attribute__((format(printf, 1, 2))) out(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	n = snprintf(buf, sizeof(buf), "%s: ", who);
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(1, buf, (size_t)n) < 0)
		(void)0;
}

#define FAIL(fmt, ...)	(fails++, out("FAIL %s:%d: " fmt, __FILE__, \
					      __LINE__, ##__VA_ARGS__))
#define CHECK(c, ...)	((c) ? true : (FAIL(__VA_ARGS__), false))

static void on_alarm(int sig)
{
	static const char m[] = "FAIL: alarm: still running after "
				"HCOMM_VMTEST_ALARM seconds; a hang\n";

	(void)sig;
	if (write(1, m, sizeof(m) - 1) < 0)
		(void)0;
	_exit(3);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

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

	for (i = 0; i < len; i++)
		c[i] = (unsigned char)splitmix(seed + i);
}

static void *xmap(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		FAIL("mmap %zu: %s", len, strerror(errno));
		exit(1);
	}
	return p;
}

/* First byte of [p, p + len) that is not POISON, or -1. */
static long not_poison(const unsigned char *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != POISON)
			return (long)i;
	return -1;
}

/* ------------------------------------------------------------------ */
/* the attacker (Documentation/transports.rst, "The tcp transport")    */
/* ------------------------------------------------------------------ */

static const char *att_addr;
static uint64_t att_nonce;

static int h_connect(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	const char *colon = strrchr(att_addr, ':');
	char ip[64];
	int fd;

	if (!colon || colon - att_addr >= (long)sizeof(ip))
		return -1;
	memcpy(ip, att_addr, (size_t)(colon - att_addr));
	ip[colon - att_addr] = 0;
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		out("connect %s: %s", att_addr, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Read n bytes within ms: 0, or -1 (EOF, error, time). */
static int h_read(int fd, void *p, size_t n, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint64_t end = now_ms() + (uint64_t)ms;
	ssize_t r;

	while (n) {
		if (poll(&pfd, 1, (int)(end - now_ms())) != 1)
			return -1;
		r = recv(fd, p, n, 0);
		if (r <= 0)
			return -1;
		p = (char *)p + r;
		n -= (size_t)r;
	}
	return 0;
}

/* 1 when the target closed fd within ms (EOF or reset; acks skipped). */
static int h_closed(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint64_t end = now_ms() + (uint64_t)ms;
	unsigned char b[256];
	ssize_t r;

	for (;;) {
		int left = (int)(end - now_ms());

		if (left <= 0 || poll(&pfd, 1, left) != 1)
			return 0;
		r = recv(fd, b, sizeof(b), 0);
		if (r <= 0)
			return 1;
	}
}

/* A connection past a valid hello (as rank 1, lane 0): fd or -1. */
static int h_guest(void)
{
	unsigned char b[32];
	int fd = h_connect();

	if (fd < 0)
		return -1;
	wire_hello(b, att_nonce, 1, 0, 0, 1);
	if (send(fd, b, 32, MSG_NOSIGNAL) != 32 || h_read(fd, b, 32, IO_MS) ||
	    memcmp(b, "HCTH", 4)) {
		out("no hello reply from %s", att_addr);
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Send p[0 .. n) (after a valid hello when guest), then q[0 .. m); with
 * cut, shut the write side down: the target must close the connection.
 */
static void attack(const char *what, bool guest, const void *p, size_t n,
		   const void *q, size_t m, bool cut)
{
	int fd = guest ? h_guest() : h_connect();
	uint64_t t0 = now_ms();
	int closed;

	if (fd < 0) {
		FAIL("%s: no connection", what);
		return;
	}
	if ((n && send(fd, p, n, MSG_NOSIGNAL) != (ssize_t)n) ||
	    (m && send(fd, q, m, MSG_NOSIGNAL) != (ssize_t)m)) {
		/* A reset while sending: closed by the target all the same. */
		out("%s: send: %s (closed by the target)", what,
		    strerror(errno));
		close(fd);
		return;
	}
	if (cut)
		shutdown(fd, SHUT_WR);
	closed = h_closed(fd, IO_MS);
	close(fd);
	if (CHECK(closed, "%s: the target did not close the connection "
		  "within %d ms", what, IO_MS))
		out("%s: closed by the target after %" PRIu64 " ms", what,
		    now_ms() - t0);
}

static int attacker(int argc, char **argv)
{
	unsigned char junk[256], b[64], hello[32], pay[G_PUT_LEN];
	uint32_t id, crc;
	uint64_t wlen;
	int fd;

	who = "attacker";
	if (argc != 6) {
		FAIL("usage: --attack ADDR NONCE WIN WINLEN");
		return 1;
	}
	att_addr = argv[2];
	att_nonce = strtoull(argv[3], NULL, 0);
	id = (uint32_t)strtoul(argv[4], NULL, 0);
	wlen = strtoull(argv[5], NULL, 0);
	out("target %s, window %#x of %" PRIu64 " bytes", att_addr, id, wlen);
	fill(junk, sizeof(junk), (uint64_t)getpid() * 7919);
	fill(pay, sizeof(pay), 5);
	crc = hcomm__crc32c(0, pay, sizeof(pay));

	/* before the hello */
	attack("random bytes instead of a hello", false, junk, sizeof(junk),
	       NULL, 0, false);
	wire_hello(hello, att_nonce ^ 0x10000, 1, 0, 0, 1);
	attack("a hello with a wrong job id (nonce)", false, hello, 32, NULL,
	       0, false);

	/* after a valid hello */
	attack("random bytes instead of a frame", true, junk, sizeof(junk),
	       NULL, 0, false);
	wire_frame(b, 1, 1, G_GOOD_OFF, G_GOOD_LEN, id, crc);
	le32(b, 0x46544349u);
	le32(b + 60, hcomm__crc32c(0, b, 60));
	attack("a frame with a bad magic", true, b, 64, pay, G_GOOD_LEN,
	       false);
	wire_frame(b, 1, 1, G_GOOD_OFF, G_GOOD_LEN, id,
		   hcomm__crc32c(0, pay, G_GOOD_LEN));
	b[61] ^= 0x40;
	attack("a header with a bad CRC", true, b, 64, pay, G_GOOD_LEN, false);
	wire_frame(b, 1, 1, G_BADCRC_OFF, G_PUT_LEN, id, ~crc);
	attack("a put whose payload fails its CRC", true, b, 64, pay,
	       G_PUT_LEN, false);
	wire_frame(b, 1, 1, G_CUT_OFF, G_PUT_LEN, id, crc);
	attack("a put cut off after half its payload, then EOF", true, b, 64,
	       pay, G_PUT_LEN / 2, true);
	wire_frame(b, 1, 1, G_GOOD_OFF, G_GOOD_LEN, id, crc);
	attack("a header cut off after 40 bytes, then EOF", true, b, 40, NULL,
	       0, true);
	wire_frame(b, 1, 1, 0, wlen + 1, id, crc);
	attack("a put of window length + 1 bytes", true, b, 64, pay,
	       G_PUT_LEN, false);
	wire_frame(b, 1, 1, 16, UINT64_MAX - 7, id, crc);
	attack("a put whose offset + length overflows", true, b, 64, pay,
	       G_PUT_LEN, false);
	wire_frame(b, 1, 1, wlen - 10, 100, id,
		   hcomm__crc32c(0, pay, 100));
	attack("a put straddling the window's end", true, b, 64, pay, 100,
	       false);
	wire_frame(b, 1, 1, G_GOOD_OFF, G_GOOD_LEN, id ^ 0x5a5a0000,
		   hcomm__crc32c(0, pay, G_GOOD_LEN));
	attack("a put into an unknown window", true, b, 64, pay, G_GOOD_LEN,
	       false);
	wire_frame(b, 2, 1, wlen, 1, id, 0);
	attack("a get beyond the window", true, b, 64, NULL, 0, false);

	/* the control: the same kind of frame, correct, is applied */
	fill(pay, G_GOOD_LEN, 6);
	fd = h_guest();
	wire_frame(b, 1, 1, G_GOOD_OFF, G_GOOD_LEN, id,
		   hcomm__crc32c(0, pay, G_GOOD_LEN));
	if (CHECK(fd >= 0 && send(fd, b, 64, MSG_NOSIGNAL) == 64 &&
		  send(fd, pay, G_GOOD_LEN, MSG_NOSIGNAL) == G_GOOD_LEN &&
		  !h_read(fd, b, 64, IO_MS) && b[4] == 4 && b[16] == 1,
		  "a correct put on a guest connection: no ACK of it"))
		out("a correct put on a guest connection: acknowledged");
	if (fd >= 0)
		close(fd);
	out("%d failure(s)", fails);
	return fails ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* the ranks                                                           */
/* ------------------------------------------------------------------ */

static size_t ping_len(int k)
{
	return (size_t)(((uint64_t)k * 7919) % (64 * KiB)) + 1;
}

static uint64_t ping_off(int k)
{
	return G_PING_OFF + (uint64_t)(k % G_SLOTS) * G_SLOT;
}

static pid_t start_attacker(struct hcomm_win *w, const char *addr)
{
	char nonce[32], id[32], len[32];
	pid_t pid;

	snprintf(nonce, sizeof(nonce), "%#" PRIx64,
		 hcomm__boot_nonce(comm->boot));
	snprintf(id, sizeof(id), "%#" PRIx64,
		 w->peers[0].x[HCOMM_XP_TCP].key);
	snprintf(len, sizeof(len), "%zu", hcomm_win_size(w, 0));
	pid = fork();
	if (pid == 0) {
		execl("/proc/self/exe", "hcomm_vm_garbage", "--attack", addr,
		      nonce, id, len, (char *)NULL);
		_exit(127);
	}
	CHECK(pid > 0, "fork: %s", strerror(errno));
	return pid;
}

/* Rank 1: ping-pong with rank 0 while the attacker runs, then END. */
static void rank1(struct hcomm_win *w, unsigned char *win, const char *addr)
{
	unsigned char *src = xmap(G_SLOT), *want = xmap(G_SLOT);
	pid_t pid = start_attacker(w, addr);
	int k, st = 0;
	uint64_t n;
	bool gone = pid <= 0;

	for (k = 0; !gone || k < G_MIN_PINGS; k++) {
		size_t len = ping_len(k);

		fill(src, len, 0x100000 + (uint64_t)k);
		if (!CHECK(!hcomm_put_signal(w, 0, ping_off(k), src, len,
					     SIG_PING, 1),
			   "ping %d: %s", k, hcomm_errmsg()))
			break;
		if (!CHECK(hcomm_signal_wait(comm, SIG_PONG, (uint64_t)k + 1,
					     20000) >= k + 1,
			   "pong %d: %s", k, hcomm_errmsg()))
			break;
		fill(want, len, 0x200000 + (uint64_t)k);
		CHECK(!memcmp(win + GUARD_PG + ping_off(k), want, len),
		      "pong %d (%zu bytes): wrong data", k, len);
		if (!gone && waitpid(pid, &st, WNOHANG) == pid)
			gone = true;
	}
	if (!gone && pid > 0 && waitpid(pid, &st, 0) != pid)
		FAIL("waitpid: %s", strerror(errno));
	CHECK(pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "the attacker ended with status %#x", st);
	out("%d pings while the attacker ran", k);
	CHECK(not_poison(win, GUARD_PG + G_PING_OFF) < 0 &&
	      not_poison(win + GUARD_PG + G_PING_OFF + G_SLOTS * G_SLOT,
			 G_WIN - G_PING_OFF - G_SLOTS * G_SLOT + GUARD_PG) < 0,
	      "rank 1's window or guard pages changed outside the pongs");
	n = (uint64_t)k;
	CHECK(!hcomm_put_signal(w, 0, G_CTRL_OFF, &n, sizeof(n), SIG_END, 1),
	      "end: %s", hcomm_errmsg());
}

/* Rank 0: answer every ping until END; then check what it has. */
static void rank0(struct hcomm_win *w, unsigned char *win)
{
	unsigned char *src = xmap(G_SLOT), *want = xmap(G_WIN);
	unsigned char *wp = win + GUARD_PG;
	uint64_t end = now_ms() + 90000, n;
	int k = 0;

	for (;;) {
		size_t len = ping_len(k);

		if (hcomm_signal_wait(comm, SIG_PING, (uint64_t)k + 1, 100) <
		    k + 1) {
			if (hcomm_signal_read(comm, SIG_END) >= 1 &&
			    hcomm_signal_read(comm, SIG_PING) == (uint64_t)k)
				break;
			if (!CHECK(now_ms() < end, "ping %d never came", k))
				return;
			continue;
		}
		fill(want, len, 0x100000 + (uint64_t)k);
		CHECK(!memcmp(wp + ping_off(k), want, len),
		      "ping %d (%zu bytes): wrong data", k, len);
		fill(src, len, 0x200000 + (uint64_t)k);
		if (!CHECK(!hcomm_put_signal(w, 1, ping_off(k), src, len,
					     SIG_PONG, 1),
			   "pong %d: %s", k, hcomm_errmsg()))
			return;
		k++;
	}
	memcpy(&n, wp + G_CTRL_OFF, sizeof(n));
	CHECK(n == (uint64_t)k, "rank 1 sent %" PRIu64 " pings, %d arrived",
	      n, k);

	/* The window: what it must hold, the undefined ranges skipped. */
	memset(want, POISON, G_WIN);
	memcpy(want + G_CTRL_OFF, &n, sizeof(n));
	fill(want + G_GOOD_OFF, G_GOOD_LEN, 6);
	memcpy(want + G_BADCRC_OFF, wp + G_BADCRC_OFF, G_PUT_LEN);
	memcpy(want + G_CUT_OFF, wp + G_CUT_OFF, G_PUT_LEN);
	memcpy(want + G_PING_OFF, wp + G_PING_OFF, G_SLOTS * G_SLOT);
	if (memcmp(wp, want, G_WIN)) {
		size_t i = 0;

		while (wp[i] == want[i])
			i++;
		FAIL("window byte %zu is 0x%02x, expected 0x%02x", i, wp[i],
		     want[i]);
	}
	CHECK(not_poison(win, GUARD_PG) < 0 &&
	      not_poison(wp + G_WIN, GUARD_PG) < 0,
	      "the guard pages around the window changed");
}

int main(int argc, char **argv)
{
	struct hcomm_comm_stats s0, s1;
	unsigned char *win;
	struct hcomm_win *w = NULL;
	char addr[2][64], mine[64];
	uint64_t t0;
	int rc, secs;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "--attack"))
		return attacker(argc, argv);
	secs = getenv("HCOMM_VMTEST_ALARM") ?
	       atoi(getenv("HCOMM_VMTEST_ALARM")) : 100;
	signal(SIGALRM, on_alarm);
	alarm((unsigned int)(secs > 0 ? secs : 100));

	rc = hcomm_comm_init(&comm, NULL);
	if (rc) {
		FAIL("hcomm_comm_init: %s", hcomm_errmsg());
		return 1;
	}
	me = hcomm_comm_rank(comm);
	who = me ? "r1" : "r0";
	if (hcomm_comm_size(comm) != 2 ||
	    strcmp(hcomm_comm_transport(comm), "tcp")) {
		FAIL("needs 2 ranks over tcp: %d ranks, %s",
		     hcomm_comm_size(comm), hcomm_comm_transport(comm));
		return 1;
	}
	win = xmap(G_WIN + 2 * GUARD_PG);
	memset(win, POISON, G_WIN + 2 * GUARD_PG);
	if (hcomm_win_create(comm, win + GUARD_PG, G_WIN, &w)) {
		FAIL("hcomm_win_create: %s", hcomm_errmsg());
		return 1;
	}
	snprintf(mine, sizeof(mine), "%s", hcomm__tcp_listen_addr(comm));
	if (hcomm_boot_allgather(comm, mine, addr, sizeof(mine))) {
		FAIL("hcomm_allgather: %s", hcomm_errmsg());
		return 1;
	}
	if (me == 0)
		out("listening at %s; rank 1 at %s", addr[0], addr[1]);
	hcomm_comm_get_stats(comm, &s0);
	if (hcomm_boot_barrier(comm))
		FAIL("hcomm_barrier: %s", hcomm_errmsg());

	if (me == 1)
		rank1(w, win, addr[0]);
	else
		rank0(w, win);

	/*
	 * The target counts a connection when its service thread sees it
	 * end, which may come after rank 1's END (another socket): wait for
	 * the counts to be reached (5 s at most), then they must be exact.
	 */
	for (t0 = now_ms(); ; usleep(10000)) {
		hcomm_comm_get_stats(comm, &s1);
		if (me == 1 || now_ms() - t0 > 5000 ||
		    (s1.net_refused - s0.net_refused >= G_REFUSED &&
		     s1.net_crc_errors - s0.net_crc_errors >= G_CRC &&
		     s1.net_conn_lost - s0.net_conn_lost >= G_LOST))
			break;
	}
	out("counters: %" PRIu64 " refused, %" PRIu64 " CRC errors, %" PRIu64
	    " connections lost", s1.net_refused - s0.net_refused,
	    s1.net_crc_errors - s0.net_crc_errors,
	    s1.net_conn_lost - s0.net_conn_lost);
	if (me == 0)
		CHECK(s1.net_refused - s0.net_refused == G_REFUSED &&
		      s1.net_crc_errors - s0.net_crc_errors == G_CRC &&
		      s1.net_conn_lost - s0.net_conn_lost == G_LOST,
		      "expected %d refused, %d CRC errors, %d lost", G_REFUSED,
		      G_CRC, G_LOST);
	else
		CHECK(s1.net_refused == 0 && s1.net_crc_errors == 0 &&
		      s1.net_conn_lost == 0, "rank 1 counted errors");
	if (hcomm_boot_barrier(comm))
		FAIL("hcomm_barrier: %s", hcomm_errmsg());
	if (hcomm_win_free(w))
		FAIL("hcomm_win_free: %s", hcomm_errmsg());
	if (hcomm_comm_destroy(comm))
		FAIL("hcomm_comm_destroy: %s", hcomm_errmsg());
	out("garbage: %s", fails ? "failed" : "passed");
	return fails ? 1 : 0;
}
