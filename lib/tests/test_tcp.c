/* SPDX-License-Identifier: MIT */
/*
 * Tests of the "tcp" transport on this host (no module needed): CRC32C
 * (both implementations against the RFC 3720 vectors), then worlds of 2
 * or 4 forked ranks on 127.0.0.1 with HCOMM_TRANSPORT=tcp, meeting at an
 * abstract unix socket: put/get by size with checksums and unaligned
 * offsets over 1 and 4 lanes (striping checked by the data), a
 * put_signal ring, batches, callbacks in each mode, fence and flush
 * ordering, argument errors and timeouts, a peer stopped (timeout) and
 * a peer killed mid-stream, a hostile client, and the resources destroy
 * gives back.  TAP on stdout, then "tcp: N passed, N failed".
 *
 * Ranks record their checks in a shared mapping; the parent prints them
 * once the world has exited.  Every wait is bounded (alarm() in each
 * rank, poll() timeouts, the transport's own timeout).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <json.h>

#include "hcomm_comm_int.h"
#include "hcomm_crc32c.h"
#include "tap.h"
#include "tcp_wire.h"

#define KiB		(1ULL << 10)
#define MiB		(1ULL << 20)
#define GiB		(1ULL << 30)
#define NSIG_TCP	4096
#define RANK_ALARM	180	/* seconds a rank may run at most */
#define IO_MS		10000	/* a pipe message or a socket answer */

/* ------------------------------------------------------------------ */
/* helpers                                                             */
/* ------------------------------------------------------------------ */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* len bytes of the pattern of seed (byte i depends on seed and i). */
static void fill(void *p, size_t len, uint64_t seed)
{
	unsigned char *b = p;
	unsigned int k;
	uint64_t w;
	size_t i = 0;

	while (i < len) {
		w = splitmix(seed * 1000003 + i / 8);
		for (k = (unsigned int)(i % 8); k < 8 && i < len; k++, i++)
			b[i] = (unsigned char)(w >> (8 * k));
	}
}

static void *xmap(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Threads of this process, not counting io_uring's workers (iou-wrk-N). */
static int count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	char path[300], name[64];
	FILE *f;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;	/* gone meanwhile */
		if (!fgets(name, sizeof(name), f) || strncmp(name, "iou-", 4))
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/* ------------------------------------------------------------------ */
/* results shared by the ranks                                         */
/* ------------------------------------------------------------------ */

#define RES_MAX		512
struct res {
	int pass;
	int rank;
	char what[200];
};

struct shm {
	int nres;
	struct res res[RES_MAX];
	char addr[4][64];	/* a rank's listener, for the hostile client */
};

static struct shm *shm;
static int me = -1, np;
static struct hcomm_comm *comm;
static int p2c[4][2], c2p[2];	/* parent -> rank, ranks -> parent */

/* In a rank: one TAP line the parent prints later. */
static __attribute__((format(printf, 2, 3)))
int check(int cond, const char *fmt, ...)
{
	int i = __atomic_fetch_add(&shm->nres, 1, __ATOMIC_RELAXED);
	va_list ap;

	if (i >= RES_MAX)
		return cond;
	shm->res[i].pass = !!cond;
	shm->res[i].rank = me;
	va_start(ap, fmt);
	vsnprintf(shm->res[i].what, sizeof(shm->res[i].what), fmt, ap);
	va_end(ap);
	return cond;
}

/* A failed call: its code and message as one check. */
static int check_ok(long ret, const char *what)
{
	if (ret >= 0)
		return 1;
	return check(0, "%s: %s (%s)", what, hcomm_strerror((int)ret),
		     hcomm_errmsg());
}

static void print_results(void)
{
	int i, n = shm->nres < RES_MAX ? shm->nres : RES_MAX;

	for (i = 0; i < n; i++)
		ok(shm->res[i].pass, "rank %d: %s", shm->res[i].rank,
		   shm->res[i].what);
	shm->nres = 0;
}

/* One byte to the parent / from the parent (bounded). */
static void tell_parent(char c)
{
	(void)!write(c2p[1], &c, 1);
}

static int read_byte(int fd, int ms, char *c)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	if (poll(&pfd, 1, ms) != 1)
		return -1;
	return read(fd, c, 1) == 1 ? 0 : -1;
}

static int wait_parent(void)
{
	char c;

	return read_byte(p2c[me][0], IO_MS, &c);
}

/* ------------------------------------------------------------------ */
/* worlds of forked ranks                                              */
/* ------------------------------------------------------------------ */

typedef int (*rank_fn)(void);

struct world {
	const char *name;
	int n;
	rank_fn fn;
	const char *env[8];	/* "NAME=VALUE", NULL-terminated */
};

static void rank_env(const struct world *w, int r, const char *root)
{
	char v[16];
	int i;

	snprintf(v, sizeof(v), "%d", r);
	setenv("HCOMM_RANK", v, 1);
	snprintf(v, sizeof(v), "%d", w->n);
	setenv("HCOMM_WORLD_SIZE", v, 1);
	setenv("HCOMM_ROOT_ADDR", root, 1);
	setenv("HCOMM_TRANSPORT", "tcp", 1);
	for (i = 0; w->env[i]; i++)
		putenv((char *)w->env[i]);
}

static void *nothing(void *arg)
{
	return arg;
}

/*
 * Fork w->n ranks; their pids into pid[].  A rank first starts and joins
 * a thread, so that a sanitizer's own thread exists before it counts.
 */
static void world_start(const struct world *w, pid_t *pid)
{
	static int seq;
	char root[64];
	pthread_t t;
	int r;

	snprintf(root, sizeof(root), "hcomm-tcp-test-%d-%d", (int)getpid(),
		 seq++);
	for (r = 0; r < w->n; r++) {
		fflush(stdout);
		pid[r] = fork();
		if (pid[r] == 0) {
			me = r;
			np = w->n;
			alarm(RANK_ALARM);
			rank_env(w, r, root);
			if (!pthread_create(&t, NULL, nothing, NULL))
				pthread_join(t, NULL);
			r = w->fn();
			leak_check();
			_exit(r);
		}
	}
}

/* Exit status of pid: its code, or 100 + signal. */
static int reap(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 100 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Reap every rank (except skip), print the checks and one line. */
static void world_end(const struct world *w, const pid_t *pid, int skip)
{
	char st[64] = "";
	int r, s, bad = 0;

	for (r = 0; r < w->n; r++) {
		s = r == skip ? 0 : reap(pid[r]);
		bad |= s != 0;
		snprintf(st + strlen(st), sizeof(st) - strlen(st), " %d", s);
	}
	print_results();
	ok(!bad, "%s: every rank exited 0 (exit%s)", w->name, st);
}

static void world_run(const struct world *w)
{
	pid_t pid[4];

	world_start(w, pid);
	world_end(w, pid, -1);
}

/* In a rank: the communicator, checked to be tcp. */
static int up(void)
{
	int ret = hcomm_comm_init(&comm, NULL);

	if (!check_ok(ret, "hcomm_comm_init"))
		return -1;
	if (strcmp(hcomm_comm_transport(comm), "tcp")) {
		check(0, "transport is %s", hcomm_comm_transport(comm));
		return -1;
	}
	return 0;
}

static struct hcomm_win *win_make(void *base, size_t len)
{
	struct hcomm_win *w = NULL;

	if (!check_ok(hcomm_win_create(comm, base, len, &w),
		      "hcomm_win_create"))
		return NULL;
	return w;
}

/* The rank's end: win_free, destroy; 0 when both went well. */
static int down(struct hcomm_win *w, int ret)
{
	if (w && !check_ok(hcomm_win_free(w), "hcomm_win_free"))
		ret = 1;
	if (!check_ok(hcomm_comm_destroy(comm), "hcomm_comm_destroy"))
		ret = 1;
	return ret;
}

/* ------------------------------------------------------------------ */
/* CRC32C                                                              */
/* ------------------------------------------------------------------ */

static void test_crc32c(void)
{
	static const struct { const char *name; uint32_t want; } v[] = {
		{ "32 zero bytes", 0x8a9136aa },
		{ "32 bytes 0xff", 0x62a8ab43 },
		{ "32 bytes 0 .. 31", 0x46dd794e },
		{ "32 bytes 31 .. 0", 0x113fdb5c },
	};
	unsigned char b[32], *big = malloc((1 << 20) + 64);
	uint32_t (*impl[2])(uint32_t, const void *, size_t) = {
		hcomm__crc32c_sw, hcomm__crc32c_hw,
	};
	const char *iname[2] = { "table", "sse4.2" };
	uint32_t a, c;
	int i, k, bad;

	if (!big) {
		ok(0, "crc32c: malloc");
		return;
	}
	for (k = 0; k < 2; k++) {
		if (k == 1 && !hcomm__crc32c_hw_ok()) {
			skip("crc32c %s: the CPU has no SSE4.2", iname[k]);
			continue;
		}
		ok(impl[k](0, "123456789", 9) == 0xe3069283,
		   "crc32c %s: \"123456789\" is 0xe3069283", iname[k]);
		for (i = 0; i < 4; i++) {
			if (i == 0)
				memset(b, 0, 32);
			else if (i == 1)
				memset(b, 0xff, 32);
			for (c = 0; i >= 2 && c < 32; c++)
				b[c] = (unsigned char)(i == 2 ? c : 31 - c);
			ok(impl[k](0, b, 32) == v[i].want,
			   "crc32c %s: RFC 3720 %s is %#x", iname[k], v[i].name,
			   v[i].want);
		}
	}
	fill(big, (1 << 20) + 64, 7);
	for (i = 0, bad = 0; i < 64; i++) {
		size_t off = (size_t)i, len = (1 << 20) - (size_t)i * 4099;

		a = hcomm__crc32c_sw(0, big + off, len);
		c = hcomm__crc32c_hw(0, big + off, len);
		bad += a != c || hcomm__crc32c(0, big + off, len) != a;
		/* running form: two pieces give the CRC of the whole */
		c = hcomm__crc32c(hcomm__crc32c(0, big + off, (size_t)i * 13),
				  big + off + (size_t)i * 13,
				  len - (size_t)i * 13);
		bad += a != c;
	}
	ok(!bad, "crc32c: table, instruction and the running form agree on "
	   "64 unaligned buffers (%d differences)", bad);
	for (i = 0, bad = 0; i <= 13000; i++)
		bad += hcomm__crc32c_sw(0, big + i % 8, (size_t)i) !=
		       hcomm__crc32c(0, big + i % 8, (size_t)i);
	ok(!bad, "crc32c: table and instruction agree on every length 0 .. "
	   "13000 (%d differences)", bad);
	free(big);
}

/* ------------------------------------------------------------------ */
/* put and get by size                                                 */
/* ------------------------------------------------------------------ */

#define PG_WIN		(64 * MiB + 8 * KiB)
#define PG_SEED_WIN	1

static const uint64_t pg_sizes[] = {
	1, 7, 4096, 65537, MiB + 3, 2 * MiB, 16 * MiB + 5, 64 * MiB,
};
#define PG_N	(sizeof(pg_sizes) / sizeof(pg_sizes[0]))

static uint64_t pg_off(unsigned int i)
{
	return pg_sizes[i] == 64 * MiB ? 4099 : 13 + 977 * i;
}

/*
 * With HCOMM_STATS_DIR: this rank's published file shows the traffic
 * (the service thread updates it as the counters change: looked at for
 * at most IO_MS).
 */
static void stats_file_check(void)
{
	const char *dir = getenv("HCOMM_STATS_DIR");
	struct hcomm_stats_file f;
	char path[512];
	int64_t end = now_ms() + IO_MS;
	FILE *fp;
	int n = 0;

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/hcomm-%d-%d-0.stats", dir,
		 (int)getpid(), me);
	do {
		fp = fopen(path, "r");
		n = fp ? (int)fread(&f, sizeof(f), 1, fp) : 0;
		if (fp)
			fclose(fp);
	} while ((!n || !f.st.net_ops_sent) && now_ms() < end &&
		 !sched_yield());
	check(n && f.magic == HCOMM_STATS_MAGIC && f.st.net_ops_sent &&
	      f.st.net_bytes_sent, "HCOMM_STATS_DIR: %s shows %llu ops, "
	      "%llu bytes sent", path, n ? (unsigned long long)f.st.net_ops_sent
	      : 0ULL, n ? (unsigned long long)f.st.net_bytes_sent : 0ULL);
}

/* Rank 0 puts and gets each size into rank 1, which checks its window. */
static int rank_putget(void)
{
	int fds0 = count_dir("/proc/self/fd");
	int thr0 = count_threads();
	unsigned char *win_mem = NULL, *shadow = NULL, *src = NULL, *dst = NULL;
	struct hcomm_comm_stats st;
	struct hcomm_win *w = NULL;
	uint64_t total = 0, len, off;
	unsigned int i;
	int ret = 1;

	win_mem = xmap(PG_WIN);
	src = xmap(PG_WIN);
	dst = xmap(64 * MiB);
	shadow = me == 1 ? xmap(PG_WIN) : NULL;
	if (!win_mem || !src || !dst || (me == 1 && !shadow) || up())
		return 1;
	fill(win_mem, PG_WIN, PG_SEED_WIN + (uint64_t)me);
	if (shadow)
		memcpy(shadow, win_mem, PG_WIN);
	w = win_make(win_mem, PG_WIN);
	if (!w)
		goto out;
	for (i = 0; i < PG_N; i++) {
		len = pg_sizes[i];
		off = pg_off(i);
		if (me == 0) {
			fill(src, len, 100 + i);
			memset(dst, 0, len);
			check_ok(hcomm_put(w, 1, off, src, len), "hcomm_put");
			check_ok(hcomm_get(w, 1, off, dst, len), "hcomm_get");
			check(!memcmp(src, dst, len), "put then get of %llu "
			      "bytes at offset %llu: same bytes",
			      (unsigned long long)len,
			      (unsigned long long)off);
			total += len;
		}
		check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
		if (me == 1) {
			fill(shadow + off, len, 100 + i);
			check(!memcmp(shadow, win_mem, PG_WIN), "window after "
			      "a put of %llu bytes at %llu: the range landed, "
			      "nothing else changed", (unsigned long long)len,
			      (unsigned long long)off);
		}
		check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	}
	/* a get of bytes nobody wrote: rank 1's own pattern */
	if (me == 0) {
		check_ok(hcomm_get(w, 1, PG_WIN - 3 * KiB, dst, 3 * KiB),
			 "hcomm_get");
		fill(src, PG_WIN, PG_SEED_WIN + 1);
		check(!memcmp(dst, src + PG_WIN - 3 * KiB, 3 * KiB),
		      "get of the untouched end of rank 1's window");
		stats_file_check();
		hcomm_comm_get_stats(comm, &st);
		check(st.net_ops_sent >= 2 * PG_N &&
		      st.net_bytes_sent >= total && !st.net_crc_errors &&
		      !st.net_refused && !st.net_conn_lost,
		      "stats: %llu ops %llu bytes sent, no CRC error, refusal "
		      "or lost connection", (unsigned long long)st.net_ops_sent,
		      (unsigned long long)st.net_bytes_sent);
	}
	ret = 0;
out:
	ret = down(w, ret);
	check(count_dir("/proc/self/fd") == fds0 &&
	      count_threads() == thr0,
	      "destroy gave back every descriptor and thread (%d fds, %d "
	      "threads)", count_dir("/proc/self/fd"),
	      count_threads());
	return ret;
}

/*
 * Both ranks at once: 256 non-blocking puts of 64 KiB + 1 into each
 * other's window (acks ride on the other direction's frames).
 */
#define BI_N		256
#define BI_LEN		(64 * KiB + 1)
static int rank_bidir(void)
{
	struct hcomm_request *req = calloc(BI_N, sizeof(*req));
	unsigned char *mem = xmap(BI_N * BI_LEN), *src = xmap(BI_N * BI_LEN);
	unsigned char *want = xmap(BI_N * BI_LEN);
	struct hcomm_win *w = NULL;
	int i, bad = 0, ret = 1;

	if (!req || !mem || !src || !want || up())
		return 1;
	w = win_make(mem, BI_N * BI_LEN);
	if (!w)
		goto out;
	fill(src, BI_N * BI_LEN, 50 + (uint64_t)me);
	for (i = 0; i < BI_N; i++)
		check_ok(hcomm_put_nb(w, 1 - me, (uint64_t)i * BI_LEN,
				      src + (size_t)i * BI_LEN, BI_LEN,
				      &req[i]), "hcomm_put_nb");
	for (i = 0; i < BI_N; i++)
		bad += hcomm_wait(&req[i]) != 0 || req[i].bytes != BI_LEN;
	check(!bad, "%d puts of %llu bytes both ways: every request 0 with "
	      "its byte count (%d bad)", BI_N, (unsigned long long)BI_LEN, bad);
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	fill(want, BI_N * BI_LEN, 50 + (uint64_t)(1 - me));
	check(!memcmp(mem, want, BI_N * BI_LEN), "the other rank's %d puts "
	      "landed", BI_N);
	ret = 0;
out:
	free(req);
	return down(w, ret);
}

/*
 * Rank 0 keeps S_N puts of 3 MiB + 7 (several segments each, every one
 * its own bytes and offset) in flight to rank 1, then as many gets of
 * them: segments queued behind full sockets.  Rank 1 finds every put.
 */
#define S_N		24
#define S_LEN		(3 * MiB + 7)
static int rank_stream(void)
{
	size_t win_len = (size_t)S_N * S_LEN;
	unsigned char *mem = xmap(win_len), *src = xmap(win_len);
	unsigned char *dst = xmap(win_len);
	struct hcomm_request req[S_N];
	struct hcomm_win *w = NULL;
	int i, bad = 0, ret = 1;

	if (!mem || !src || !dst || up())
		return 1;
	w = win_make(mem, win_len);
	if (!w)
		goto out;
	fill(src, win_len, 600);
	memset(req, 0, sizeof(req));
	for (i = 0; me == 0 && i < S_N; i++)
		check_ok(hcomm_put_nb(w, 1, (uint64_t)i * S_LEN,
				      src + (size_t)i * S_LEN, S_LEN, &req[i]),
			 "hcomm_put_nb");
	for (i = 0; me == 0 && i < S_N; i++)
		bad += hcomm_wait(&req[i]) != 0;
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	if (me == 1)
		check(!memcmp(mem, src, win_len), "%d puts of %llu bytes in "
		      "flight at once: every byte landed", S_N,
		      (unsigned long long)S_LEN);
	memset(req, 0, sizeof(req));
	for (i = 0; me == 0 && i < S_N; i++)
		check_ok(hcomm_get_nb(w, 1, (uint64_t)i * S_LEN,
				      dst + (size_t)i * S_LEN, S_LEN, &req[i]),
			 "hcomm_get_nb");
	for (i = 0; me == 0 && i < S_N; i++)
		bad += hcomm_wait(&req[i]) != 0;
	if (me == 0)
		check(!bad && !memcmp(dst, src, win_len), "%d puts and %d gets "
		      "of %llu bytes in flight: all 0 (%d not), the gets read "
		      "the puts", S_N, S_N, (unsigned long long)S_LEN, bad);
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	ret = 0;
out:
	return down(w, ret);
}

/* ------------------------------------------------------------------ */
/* put_signal ring                                                     */
/* ------------------------------------------------------------------ */

#define RING_SLOTS	8
#define RING_SLOT	(MiB + 64 * KiB)
#define RING_MSGS	160
#define SIG_DATA	3
#define SIG_CREDIT	4000

static const uint64_t ring_sizes[] = {
	8, 4097, 65539, 256 * KiB, MiB + 5, 1, 0, 3 * 64 * KiB,
};

/*
 * Rank 0 sends RING_MSGS messages through RING_SLOTS slots of rank 1's
 * window, each a put_signal of SIG_DATA; rank 1 waits for the signal,
 * checks the message (its payload landed before its signal) and gives
 * the slot back with a payload-less put_signal of SIG_CREDIT.
 */
static int rank_ring(void)
{
	unsigned char *mem = xmap(RING_SLOTS * RING_SLOT);
	unsigned char *buf = xmap(RING_SLOT), *want = xmap(RING_SLOT);
	struct hcomm_win *w = NULL;
	int i, bad = 0, ret = 1;
	int64_t v;
	uint64_t len;

	if (!mem || !buf || !want || up())
		return 1;
	w = win_make(mem, RING_SLOTS * RING_SLOT);
	if (!w)
		goto out;
	check(hcomm_signal_count(comm) == NSIG_TCP, "%u signals",
	      hcomm_signal_count(comm));
	for (i = 0; i < RING_MSGS && bad < 3; i++) {
		len = ring_sizes[i % 8];
		if (me == 0) {
			if (i >= RING_SLOTS &&
			    hcomm_signal_wait(comm, SIG_CREDIT,
					      (uint64_t)(i - RING_SLOTS + 1),
					      IO_MS) < 0) {
				bad += check(0, "credit %d: %s", i,
					     hcomm_errmsg()) == 0;
				break;
			}
			fill(buf, len, 1000 + (uint64_t)i);
			if (hcomm_put_signal(w, 1, (uint64_t)(i % RING_SLOTS) *
					     RING_SLOT, buf, len, SIG_DATA, 1))
				bad += !check_ok(-HCOMM_ERR_IO, "put_signal");
			continue;
		}
		v = hcomm_signal_wait(comm, SIG_DATA, (uint64_t)i + 1, IO_MS);
		if (v < 0) {
			bad += !check(0, "message %d: %s", i, hcomm_errmsg());
			break;
		}
		fill(want, len, 1000 + (uint64_t)i);
		if (memcmp(mem + (size_t)(i % RING_SLOTS) * RING_SLOT, want,
			   len))
			bad += check(0, "message %d (%llu bytes): the signal "
				     "came before the data", i,
				     (unsigned long long)len) == 0;
		if (hcomm_put_signal(w, 0, 0, NULL, 0, SIG_CREDIT, 1))
			bad += check_ok(-HCOMM_ERR_IO, "credit") == 0;
	}
	check(!bad, "%d messages of 0 .. 1 MiB through an %d-slot ring: "
	      "every payload before its signal", RING_MSGS, RING_SLOTS);
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	if (me == 1)
		check(hcomm_signal_read(comm, SIG_DATA) == RING_MSGS,
		      "signal %d reads %d", SIG_DATA, RING_MSGS);
	ret = 0;
out:
	return down(w, ret);
}

/* ------------------------------------------------------------------ */
/* batches, 4 ranks                                                    */
/* ------------------------------------------------------------------ */

#define B_N		300
#define B_LEN		(3 * KiB + 1)
#define B_REGION	((uint64_t)B_N * B_LEN)	/* puts land here */
#define B_SIG		7

/*
 * Every rank: B_N descriptors with requests - puts to me+1, gets of
 * me+2's untouched region, put_signals to me+3 - then a blocking batch
 * of puts to me+1 over the same offsets; each checks what it got and,
 * after a barrier, what landed in its window.
 */
static int rank_batch(void)
{
	size_t win_len = 3 * B_REGION;
	unsigned char *mem = xmap(win_len), *src = xmap(B_REGION);
	unsigned char *got = xmap(B_REGION), *want = xmap(win_len);
	struct hcomm_xfer_desc *d = calloc(B_N, sizeof(*d));
	struct hcomm_request *req = calloc(B_N, sizeof(*req));
	struct hcomm_win *w = NULL;
	int i, bad = 0, ret = 1, t1 = (me + 1) % np, t2 = (me + 2) % np;
	int t3 = (me + 3) % np, nsig = 0;

	if (!mem || !src || !got || !want || !d || !req || up())
		return 1;
	fill(mem, win_len, 70 + (uint64_t)me);
	w = win_make(mem, win_len);
	if (!w)
		goto out;
	fill(src, B_REGION, 80 + (uint64_t)me);
	for (i = 0; i < B_N; i++) {
		d[i].local = (uintptr_t)(src + (size_t)i * B_LEN);
		d[i].len = B_LEN;
		switch (i % 3) {
		case 0:
			d[i].op = HCOMM_OP_PUT;
			d[i].target = t1;
			d[i].target_off = (uint64_t)i * B_LEN;
			break;
		case 1:
			d[i].op = HCOMM_OP_GET;
			d[i].target = t2;
			d[i].target_off = 2 * B_REGION + (uint64_t)i * B_LEN;
			d[i].local = (uintptr_t)(got + (size_t)i * B_LEN);
			break;
		default:
			d[i].op = HCOMM_OP_PUT_SIGNAL;
			d[i].target = t3;
			d[i].target_off = B_REGION + (uint64_t)i * B_LEN;
			d[i].sig = B_SIG;
			d[i].value = 1;
			nsig++;
		}
	}
	check_ok(hcomm_batch(w, d, B_N, req), "hcomm_batch");
	for (i = 0; i < B_N; i++)
		bad += hcomm_wait(&req[i]) != 0 || req[i].bytes != B_LEN;
	check(!bad, "batch of %d with requests: all done, status 0 (%d bad)",
	      B_N, bad);
	fill(want, win_len, 70 + (uint64_t)t2);
	for (i = 1, bad = 0; i < B_N; i += 3)
		bad += memcmp(got + (size_t)i * B_LEN, want + 2 * B_REGION +
			      (size_t)i * B_LEN, B_LEN) != 0;
	check(!bad, "batch gets from rank %d: its bytes (%d wrong)", t2, bad);
	/* blocking: the puts again with other data, in groups of 64 */
	fill(src, B_REGION, 90 + (uint64_t)me);
	for (i = 0; i < B_N; i++)
		d[i].local = (uintptr_t)(src + (size_t)i * B_LEN);
	for (i = 0; i < B_N; i++)
		if (d[i].op == HCOMM_OP_GET)
			d[i].op = HCOMM_OP_PUT;	/* into 2 * B_REGION of t2 */
	check_ok(hcomm_batch(w, d, B_N, NULL), "blocking hcomm_batch");
	check_ok(hcomm_signal_wait(comm, B_SIG, 2 * (uint64_t)nsig, IO_MS),
		 "hcomm_signal_wait");
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	/* what landed here: from me-1 (puts), me-3 (put_signals), me-2 */
	memcpy(want, mem, win_len);
	fill(src, B_REGION, 90 + (uint64_t)((me + np - 1) % np));
	for (i = 0; i < B_N; i += 3)
		memcpy(want + (size_t)i * B_LEN, src + (size_t)i * B_LEN,
		       B_LEN);
	fill(src, B_REGION, 90 + (uint64_t)((me + np - 2) % np));
	for (i = 1; i < B_N; i += 3)
		memcpy(want + 2 * B_REGION + (size_t)i * B_LEN,
		       src + (size_t)i * B_LEN, B_LEN);
	fill(src, B_REGION, 90 + (uint64_t)((me + np - 3) % np));
	for (i = 2; i < B_N; i += 3)
		memcpy(want + B_REGION + (size_t)i * B_LEN,
		       src + (size_t)i * B_LEN, B_LEN);
	for (i = 0, bad = 0; i < B_N; i++) {
		size_t o = (size_t)(i % 3 == 0 ? 0 : i % 3 == 1 ? 2 : 1) *
			   B_REGION + (size_t)i * B_LEN;

		bad += memcmp(mem + o, want + o, B_LEN) != 0;
	}
	check(!bad, "what the other ranks' batches put here (%d wrong)", bad);
	ret = 0;
out:
	free(d);
	free(req);
	return down(w, ret);
}

/* ------------------------------------------------------------------ */
/* callbacks                                                           */
/* ------------------------------------------------------------------ */

#define CB_N		300

struct cb_rec {
	int calls;
	int bad;
	pid_t tid;
};

static void cb_count(struct hcomm_request *req, void *arg)
{
	struct cb_rec *r = arg;

	__atomic_fetch_add(&r->calls, 1, __ATOMIC_RELAXED);
	if (req->status || req->done || req->bytes != 4096)
		__atomic_fetch_add(&r->bad, 1, __ATOMIC_RELAXED);
	if (syscall(SYS_gettid) != r->tid)
		__atomic_store_n(&r->tid, 0, __ATOMIC_RELAXED);
}

static int rank_callbacks(void)
{
	static const char *const name[] = { "INLINE", "THREAD",
					    "THREAD_LOCKED" };
	struct hcomm_request *req = calloc(CB_N, sizeof(*req));
	unsigned char *mem = xmap(CB_N * 4096), *src = xmap(4096);
	struct hcomm_win *w = NULL;
	struct cb_rec rec;
	int mode, i, notdone, ret = 1;

	if (!req || !mem || !src || up())
		return 1;
	w = win_make(mem, CB_N * 4096);
	if (!w)
		goto out;
	for (mode = HCOMM_CB_INLINE; me == 0 && mode <= HCOMM_CB_THREAD_LOCKED;
	     mode++) {
		if (!check_ok(hcomm_comm_set_cb_mode(comm, mode),
			      "hcomm_comm_set_cb_mode"))
			break;
		memset(&rec, 0, sizeof(rec));
		rec.tid = (pid_t)syscall(SYS_gettid);
		memset(req, 0, CB_N * sizeof(*req));
		for (i = 0; i < CB_N; i++) {
			req[i].cb = cb_count;
			req[i].cb_arg = &rec;
			check_ok(hcomm_put_nb(w, 1, (uint64_t)i * 4096, src,
					      4096, &req[i]), "hcomm_put_nb");
		}
		check_ok(hcomm_flush(comm), "hcomm_flush");
		for (i = 0, notdone = 0; i < CB_N; i++)
			notdone += !__atomic_load_n(&req[i].done,
						    __ATOMIC_ACQUIRE);
		check(rec.calls == CB_N && !rec.bad && !notdone &&
		      (mode == HCOMM_CB_INLINE) == (rec.tid != 0),
		      "HCOMM_CB_%s: %d callbacks of %d, %d bad, %d not done "
		      "after flush, run %s", name[mode], rec.calls, CB_N,
		      rec.bad, notdone, rec.tid ? "on this thread" :
		      "elsewhere");
	}
	check_ok(hcomm_comm_set_cb_mode(comm, HCOMM_CB_INLINE),
		 "hcomm_comm_set_cb_mode");
	ret = 0;
out:
	free(req);
	return down(w, ret);
}

/* ------------------------------------------------------------------ */
/* fence and flush                                                     */
/* ------------------------------------------------------------------ */

#define F_BIG		(8 * MiB + 3)
#define F_ROUNDS	12
#define SIG_F		9

/*
 * Rank 0: a non-blocking put of 8 MiB (striped over the lanes), a fence,
 * then a put_signal of 8 bytes; rank 1 waits for the signal and finds the
 * big put complete.  Then 100 put_nb and a flush: every one done.
 */
static int rank_fence(void)
{
	unsigned char *mem = xmap(F_BIG + 4096), *src = xmap(F_BIG);
	struct hcomm_request req, many[100];
	struct hcomm_win *w = NULL;
	int i, bad = 0, notdone = 0, ret = 1;
	uint64_t flag = 1;

	if (!mem || !src || up())
		return 1;
	w = win_make(mem, F_BIG + 4096);
	if (!w)
		goto out;
	for (i = 0; i < F_ROUNDS; i++) {
		if (me == 0) {
			fill(src, F_BIG, 300 + (uint64_t)i);
			memset(&req, 0, sizeof(req));
			check_ok(hcomm_put_nb(w, 1, 0, src, F_BIG, &req),
				 "hcomm_put_nb");
			check_ok(hcomm_fence(comm), "hcomm_fence");
			check_ok(hcomm_put_signal(w, 1, F_BIG, &flag, 8, SIG_F,
						  1), "hcomm_put_signal");
			hcomm_wait(&req);
		} else {
			if (hcomm_signal_wait(comm, SIG_F, (uint64_t)i + 1,
					      IO_MS) < 0) {
				bad++;
				break;
			}
			fill(src, F_BIG, 300 + (uint64_t)i);
			bad += memcmp(mem, src, F_BIG) != 0;
		}
		check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	}
	if (me == 1)
		check(!bad, "%d rounds of put 8 MiB, fence, put_signal: the "
		      "big put had landed at the signal (%d rounds not)",
		      F_ROUNDS, bad);
	if (me == 0) {
		memset(many, 0, sizeof(many));
		for (i = 0; i < 100; i++)
			check_ok(hcomm_put_nb(w, 1, (uint64_t)i * 1000, src,
					      1000, &many[i]), "hcomm_put_nb");
		check_ok(hcomm_flush(comm), "hcomm_flush");
		for (i = 0; i < 100; i++)
			notdone += !__atomic_load_n(&many[i].done,
						    __ATOMIC_ACQUIRE);
		check(!notdone, "flush: 100 put_nb all done (%d not)", notdone);
	}
	ret = 0;
out:
	return down(w, ret);
}

/*
 * A transport's internal operations (a failover's replay) are applied in
 * the order they were posted, whatever the lanes: rank 0 posts, without
 * waiting, puts of shrinking length over the same bytes (each of its own
 * byte value), a get of them and a put_signal; with 4 lanes, an order
 * kept per lane only lets a short put land before a long earlier one,
 * which then overwrites it.
 */
#define O_ROUNDS	20
#define O_PUTS		24
#define O_LEN		(240 * KiB)	/* under two stripes: one chunk */
#define SIG_O		11

struct o_req {
	struct hcomm_request req;
	int done;
	int err;
};

static void o_done(struct hcomm_request *req, void *arg)
{
	struct o_req *o = arg;

	o->err = hcomm__req_priv(req)->err ? hcomm__req_priv(req)->err :
		 req->status ? EIO : 0;
	__atomic_store_n(&o->done, 1, __ATOMIC_RELEASE);
}

/* The byte at i after puts 0 .. O_PUTS - 1 (put j: its first len(j)). */
static uint64_t o_len(int j)
{
	return O_LEN - (uint64_t)j * (O_LEN / O_PUTS) + (uint64_t)j % 3;
}

static unsigned char o_want(uint64_t i, int round)
{
	int j;

	for (j = O_PUTS - 1; j >= 0; j--)
		if (i < o_len(j))
			return (unsigned char)(round * O_PUTS + j + 1);
	return 0;
}

static int o_post(struct hcomm_win *w, struct o_req *o, uint32_t op,
		  uint64_t len, void *local, uint64_t value)
{
	struct hcomm_xfer_desc d;

	memset(&d, 0, sizeof(d));
	d.op = op;
	d.target = 1;
	d.target_off = 0;
	d.local = (uintptr_t)local;
	d.len = len;
	d.sig = SIG_O;
	d.value = value;
	memset(o, 0, sizeof(*o));
	o->req.cb = o_done;
	o->req.cb_arg = o;
	return hcomm__post_internal(comm, w, HCOMM_XP_TCP, &d, &o->req);
}

static int rank_ordered(void)
{
	unsigned char *mem = xmap(O_LEN), *src = xmap(O_PUTS * O_LEN);
	unsigned char *back = xmap(O_LEN), *want = xmap(O_LEN);
	struct o_req o[O_PUTS + 2];
	struct hcomm_win *w = NULL;
	int r, j, bad = 0, bad_get = 0, failed = 0, ret = 1;
	uint64_t i, one = 1;

	if (!mem || !src || !back || !want || up())
		return 1;
	w = win_make(mem, O_LEN);
	if (!w)
		goto out;
	for (r = 0; r < O_ROUNDS; r++) {
		for (i = 0; i < O_LEN; i++)
			want[i] = o_want(i, r);
		if (me == 0) {
			for (j = 0; j < O_PUTS; j++) {
				memset(src + (size_t)j * O_LEN,
				       r * O_PUTS + j + 1, o_len(j));
				failed += o_post(w, &o[j], HCOMM_OP_PUT,
						 o_len(j),
						 src + (size_t)j * O_LEN, 0) != 0;
			}
			failed += o_post(w, &o[O_PUTS], HCOMM_OP_GET, O_LEN,
					 back, 0) != 0;
			failed += o_post(w, &o[O_PUTS + 1],
					 HCOMM_OP_PUT_SIGNAL, 8,
					 src + (size_t)(O_PUTS - 1) * O_LEN,
					 one) != 0;
			for (j = 0; j < O_PUTS + 2; j++) {
				while (!__atomic_load_n(&o[j].done,
							__ATOMIC_ACQUIRE))
					if (!hcomm_progress(comm))
						usleep(100);
				failed += o[j].err != 0;
			}
			bad_get += memcmp(back, want, O_LEN) != 0;
		} else {
			if (hcomm_signal_wait(comm, SIG_O, (uint64_t)r + 1,
					      IO_MS) < 0) {
				bad++;
				break;
			}
			/* the put_signal wrote 8 bytes of the last value */
			bad += memcmp(mem, want, O_LEN) != 0;
		}
		check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	}
	if (me == 0)
		check(!failed && !bad_get, "%d rounds of %d internal puts "
		      "over the same bytes, a get, a put_signal, 4 lanes: "
		      "none failed (%d), the get read the last put of every "
		      "byte (%d rounds not)", O_ROUNDS, O_PUTS, failed,
		      bad_get);
	else
		check(!bad, "internal operations applied in the order posted: "
		      "at each signal every byte held its last put (%d "
		      "rounds not)", bad);
	ret = 0;
out:
	return down(w, ret);
}

/* ------------------------------------------------------------------ */
/* errors                                                              */
/* ------------------------------------------------------------------ */

static int rank_errors(void)
{
	unsigned char *mem = xmap(64 * KiB), buf[64];
	struct hcomm_request req;
	struct hcomm_win *w = NULL;
	int64_t t0, v;
	int ret = 1;

	if (!mem || up())
		return 1;
	w = win_make(mem, 64 * KiB);
	if (!w)
		goto out;
	if (me == 0) {
		check(hcomm_put(w, 1, 64 * KiB - 1, buf, 2) == -HCOMM_ERR_INVAL,
		      "put past the end of the window: HCOMM_ERR_INVAL (%s)",
		      hcomm_errmsg());
		check(hcomm_get(w, 1, UINT64_MAX - 1, buf, 4) ==
		      -HCOMM_ERR_INVAL, "get at offset 2^64 - 2: "
		      "HCOMM_ERR_INVAL");
		check(hcomm_put(w, 2, 0, buf, 1) == -HCOMM_ERR_INVAL &&
		      hcomm_put(w, -1, 0, buf, 1) == -HCOMM_ERR_INVAL,
		      "put to rank 2 and -1 of 2: HCOMM_ERR_INVAL");
		memset(&req, 0, sizeof(req));
		check(hcomm_put_signal_nb(w, 1, 0, buf, 8, NSIG_TCP, 1, &req) ==
		      -HCOMM_ERR_INVAL && req.done &&
		      req.status == -HCOMM_ERR_INVAL,
		      "put_signal of signal %d: HCOMM_ERR_INVAL, the request "
		      "done with it", NSIG_TCP);
		check(hcomm_get(w, 1, 0, NULL, 8) == -HCOMM_ERR_INVAL,
		      "get into NULL: HCOMM_ERR_INVAL");
		check(!hcomm_put(w, 0, 100, "self", 4) && !memcmp(mem + 100,
		      "self", 4) && !hcomm_get(w, 0, 100, buf, 4) &&
		      !memcmp(buf, "self", 4), "put and get on this rank");
	}
	t0 = now_ms();
	v = hcomm_signal_wait(comm, 11, 1, 100);
	t0 = now_ms() - t0;
	check(v == -HCOMM_ERR_TIMEOUT && t0 >= 100 && t0 < 3000,
	      "signal_wait for a signal nobody sends: HCOMM_ERR_TIMEOUT after "
	      "%lld ms (100 asked)", (long long)t0);
	check(hcomm_signal_wait(comm, NSIG_TCP, 1, 0) == -HCOMM_ERR_INVAL &&
	      hcomm_signal_read(comm, NSIG_TCP) == 0,
	      "signal %d: HCOMM_ERR_INVAL, reads 0", NSIG_TCP);
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	ret = 0;
out:
	return down(w, ret);
}

/*
 * hcomm_signal_wait_any() (hcomm__signal_wait_any(), what the collectives
 * wait with): rank 0 waits for either of two signals and rank 1 moves
 * the second only; a wait for the first alone would sleep out its 20 s.
 */
static int rank_wait_any(void)
{
	unsigned char *mem = xmap(64 * KiB);
	struct hcomm_win *w = NULL;
	uint32_t sig[5] = { 21, 22, 23, 24, NSIG_TCP };
	uint64_t val[5] = { 1, 1, 1, 1, 1 };
	int64_t t0;
	int ret = 1, i;

	if (!mem || up())
		return 1;
	w = win_make(mem, 64 * KiB);
	if (!w)
		goto out;
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	if (me == 1) {
		usleep(50000);	/* rank 0 asleep by then */
		check_ok(hcomm_put_signal(w, 0, 0, NULL, 0, 22, 1),
			 "put_signal to signal 22");
	} else {
		t0 = now_ms();
		i = hcomm_signal_wait_any(comm, sig, val, 2, 20000);
		t0 = now_ms() - t0;
		check(i == 1 && hcomm_signal_read(comm, 21) == 0,
		      "wait for signal 21 or 22, 22 moved: index %d after "
		      "%lld ms (of 20000), 21 still 0", i, (long long)t0);
		i = hcomm_signal_wait_any(comm, sig + 2, val + 2, 2, 100);
		check(i == -HCOMM_ERR_TIMEOUT && hcomm_errno() == ETIME &&
		      strstr(hcomm_errmsg(), "none of 2 signals"),
		      "neither of 23 and 24 moved: "
		      "HCOMM_ERR_TIMEOUT after 100 ms (%d)", i);
		check(hcomm_signal_wait_any(NULL, sig, val, 1, 0) ==
		      -HCOMM_ERR_INVAL &&
		      hcomm_signal_wait_any(comm, NULL, val, 1, 0) ==
		      -HCOMM_ERR_INVAL &&
		      hcomm_signal_wait_any(comm, sig, NULL, 1, 0) ==
		      -HCOMM_ERR_INVAL, "NULL comm, sig or value: "
		      "HCOMM_ERR_INVAL");
		check(hcomm_signal_wait_any(comm, sig, val, -1, 0) ==
		      -HCOMM_ERR_INVAL, "-1 signals: HCOMM_ERR_INVAL");
		sig[0] = 22;
		check(hcomm__signal_wait_any(comm, sig, val, 2, 0) == 0,
		      "both there (22 and 22): the lowest index, 0");
		check(hcomm__signal_wait_any(comm, sig + 3, val, 2, 0) ==
		      -HCOMM_ERR_INVAL, "signal %d of %d: HCOMM_ERR_INVAL",
		      NSIG_TCP, NSIG_TCP);
		check(hcomm__signal_wait_any(comm, sig, val, 0, 0) ==
		      -HCOMM_ERR_INVAL &&
		      hcomm__signal_wait_any(comm, sig, val, 5, 0) ==
		      -HCOMM_ERR_INVAL, "0 or 5 signals: HCOMM_ERR_INVAL");
	}
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	ret = 0;
out:
	return down(w, ret);
}

/*
 * Rank 0 sends without payload CRC32C, rank 1 with: each checks what
 * carries one, and the data is the same both ways.
 */
static int rank_digest_mixed(void)
{
	if (me == 0)
		setenv("HCOMM_TCP_DIGEST", "none", 1);
	else
		setenv("HCOMM_TCP_DIGEST", "crc32c", 1);
	return rank_putget();
}

/* hcomm_comm_init of one rank with an environment that must fail. */
static int rank_bad_env(void)
{
	struct hcomm_comm *c;
	int ret = hcomm_comm_init(&c, NULL);
	const char *var = getenv("HCOMM_SPIN_US") ? "HCOMM_SPIN_US" :
			  getenv("HCOMM_CB_SPIN_US") ? "HCOMM_CB_SPIN_US" :
			  getenv("HCOMM_TCP_ZC_THRESHOLD") ?
			  "HCOMM_TCP_ZC_THRESHOLD" :
			  getenv("HCOMM_TCP_DIGEST") ? "HCOMM_TCP_DIGEST" :
			  "HCOMM_TRANSPORT";

	check(ret == -HCOMM_ERR_INVAL && strstr(hcomm_errmsg(), var),
	      "%s=%s: hcomm_comm_init fails with HCOMM_ERR_INVAL naming it "
	      "(%s)", var, getenv(var), hcomm_errmsg());
	if (!ret)
		hcomm_comm_destroy(c);
	return 0;
}

/* ------------------------------------------------------------------ */
/* socket buffers                                                      */
/* ------------------------------------------------------------------ */

/* Field i (from 0) of a /proc/sys file of numbers (0: unreadable). */
static uint64_t sb_sysctl(const char *path, int i)
{
	unsigned long long v[3];
	FILE *f = fopen(path, "re");
	int n;

	if (!f)
		return 0;
	n = fscanf(f, "%llu %llu %llu", &v[0], &v[1], &v[2]);
	fclose(f);
	return n > i ? v[i] : 0;
}

static char sb_env_s[64], sb_env_r[64];
static uint64_t sb_snd, sb_rcv;	/* asked for: twice the autotuning max */

#define SB_LEN		(4 * MiB + 3)

/*
 * HCOMM_SEND_BUF_SIZE / HCOMM_RECV_BUF_SIZE above what autotuning reaches
 * are given in full to root (SO_*BUFFORCE; net.core.[rw]mem_max caps
 * SO_SNDBUF/SO_RCVBUF, and used to cap them silently), to others up to
 * that cap: some connected TCP socket of the rank reports at least that
 * (the kernel doubles a size for its bookkeeping).  A put and a get of
 * 4 MiB + 3 bytes then move the same bytes.
 */
static int rank_sockbuf(void)
{
	uint64_t want_s = sb_snd, want_r = sb_rcv, cap;
	unsigned char *win_mem, *src, *dst;
	struct hcomm_win *w;
	int fd, n = 0, s, r, t, ret = 0;
	socklen_t len;

	if (geteuid()) {
		cap = 2 * sb_sysctl("/proc/sys/net/core/wmem_max", 0);
		want_s = want_s < cap ? want_s : cap;
		cap = 2 * sb_sysctl("/proc/sys/net/core/rmem_max", 0);
		want_r = want_r < cap ? want_r : cap;
	}
	win_mem = xmap(SB_LEN);
	src = xmap(SB_LEN);
	dst = xmap(SB_LEN);
	if (!win_mem || !src || !dst || up())
		return 1;
	for (fd = 0; fd < 1024; fd++) {
		len = sizeof(t);
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &len) ||
		    t != SOCK_STREAM)
			continue;
		len = sizeof(s);
		if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &s, &len))
			continue;
		len = sizeof(r);
		if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &r, &len))
			continue;
		if ((uint64_t)s >= want_s && (uint64_t)r >= want_r)
			n++;
	}
	check(n >= 1, "HCOMM_SEND_BUF_SIZE=%llu HCOMM_RECV_BUF_SIZE=%llu "
	      "(twice net.ipv4.tcp_[wr]mem's max): %d connection(s) with "
	      "buffers of at least %llu / %llu", (unsigned long long)sb_snd,
	      (unsigned long long)sb_rcv, n, (unsigned long long)want_s,
	      (unsigned long long)want_r);
	w = win_make(win_mem, SB_LEN);
	if (!w)
		return down(NULL, 1);
	if (me == 0) {
		fill(src, SB_LEN, 7);
		check_ok(hcomm_put(w, 1, 0, src, SB_LEN), "hcomm_put");
		check_ok(hcomm_get(w, 1, 0, dst, SB_LEN), "hcomm_get");
		check(!memcmp(src, dst, SB_LEN), "put then get of %llu bytes "
		      "over them: same bytes", (unsigned long long)SB_LEN);
	}
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	if (me == 1) {
		fill(src, SB_LEN, 7);
		check(!memcmp(src, win_mem, SB_LEN), "the put landed whole");
	}
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	return down(w, ret);
}

/* ------------------------------------------------------------------ */
/* a peer stopped: the operation times out                             */
/* ------------------------------------------------------------------ */
/* link events: a recorder                                              */
/* ------------------------------------------------------------------ */

static struct {
	pthread_mutex_t lock;
	struct hcomm_event ev[8];
	int n;
	int destroy_rc;		/* what hcomm_comm_destroy said inside */
	int gap;
} evr = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void ev_rec(struct hcomm_comm *c, const struct hcomm_event *ev,
		   void *arg)
{
	/* must be refused here: it would join this thread */
	int rc = arg ? hcomm_comm_destroy(c) : 0;

	pthread_mutex_lock(&evr.lock);
	if (evr.n < 8)
		evr.ev[evr.n] = *ev;
	if (ev->seq != (uint64_t)evr.n + 1)
		evr.gap = 1;
	if (arg)
		evr.destroy_rc = rc;
	evr.n++;
	pthread_mutex_unlock(&evr.lock);
}

/* A listener (hcomm_comm_event_listen): counts, keeps the last event. */
static struct {
	pthread_mutex_t lock;
	int n;
	uint64_t seq;
	uint32_t type;
} lsr = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void ls_rec(struct hcomm_comm *c, const struct hcomm_event *ev,
		   void *arg)
{
	(void)c;
	(void)arg;
	pthread_mutex_lock(&lsr.lock);
	lsr.n++;
	lsr.seq = ev->seq;
	lsr.type = ev->type;
	pthread_mutex_unlock(&lsr.lock);
}

static void ls_never(struct hcomm_comm *c, const struct hcomm_event *ev,
		     void *arg)
{
	(void)c;
	(void)ev;
	(*(int *)arg)++;
}

/* Wait up to ms for event number k (0-based); 1 and *out when there. */
static int ev_get(int k, int ms, struct hcomm_event *out)
{
	int64_t end = now_ms() + ms;
	int got;

	for (;;) {
		pthread_mutex_lock(&evr.lock);
		got = evr.n > k && k < 8;
		if (got)
			*out = evr.ev[k];
		pthread_mutex_unlock(&evr.lock);
		if (got || now_ms() >= end)
			return got;
		usleep(2000);
	}
}

/* ------------------------------------------------------------------ */

#define ST_WIN		(16 * MiB)

/*
 * Rank 0, after its lanes were idle for longer than HCOMM_TIMEOUT_MS: a
 * put of 16 MiB (more than the sockets hold, so its sendmsg stays out)
 * to rank 1, which the parent stopped, completes once the parent resumes
 * it 500 ms later (the clock of a connection starts with its work, not
 * at its last activity).
 */
static void stall_after_idle(struct hcomm_win *w)
{
	unsigned char *buf = xmap(ST_WIN);
	struct hcomm_request req;
	int64_t t0;
	int r;

	hcomm_signal_wait(comm, 13, 1, 1700);	/* idle, 1.7 s */
	if (!buf || wait_parent()) {
		check(0, "no word from the parent");
		return;
	}
	memset(&req, 0, sizeof(req));
	t0 = now_ms();
	check_ok(hcomm_put_nb(w, 1, 0, buf, ST_WIN, &req), "hcomm_put_nb");
	tell_parent('p');	/* stalls rank 1 for 500 ms */
	r = hcomm_wait(&req);
	t0 = now_ms() - t0;
	check(!r && t0 >= 400, "a put to a rank stalled for 500 ms after "
	      "1.7 s of idle lanes completes (HCOMM_TIMEOUT_MS 1500) after "
	      "%lld ms: %s", (long long)t0, hcomm_strerror(r));
}

static int rank_stopped(void)
{
	unsigned char *mem = xmap(ST_WIN), buf[4096];
	struct hcomm_win *w = NULL;
	int64_t t0;
	int ret = 1, r;

	if (!mem || up())
		return 1;
	w = win_make(mem, ST_WIN);
	if (!w)
		goto out;
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	if (me == 0)
		stall_after_idle(w);
	else
		tell_parent('r');	/* stopped, resumed 500 ms later */
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	if (me == 1) {
		tell_parent('1');	/* the parent stops and resumes us */
	} else if (!wait_parent()) {
		t0 = now_ms();
		r = hcomm_put(w, 1, 0, buf, sizeof(buf));
		t0 = now_ms() - t0;
		check(r == -HCOMM_ERR_TIMEOUT &&
		      strstr(hcomm_errmsg(), "rank 1"), "put to a stopped "
		      "rank: HCOMM_ERR_TIMEOUT naming rank 1 after %lld ms "
		      "(HCOMM_TIMEOUT_MS 1500): %s", (long long)t0,
		      hcomm_errmsg());
		check(t0 >= 1400 && t0 < 6000, "the timeout took %lld ms",
		      (long long)t0);
		{
			struct hcomm_event ev = { 0 };
			int got;

			/* raised before any callback: it waited for this */
			check_ok(hcomm_comm_set_event_cb(comm, ev_rec, NULL),
				 "hcomm_comm_set_event_cb");
			got = ev_get(0, 5000, &ev);
			check(got &&
			      ev.type == HCOMM_EVENT_LINK_DOWN &&
			      ev.peer == 1 && ev.xport == HCOMM_XPORT_TCP &&
			      ev.err == HCOMM_ERR_TIMEOUT && ev.seq == 1 &&
			      ev.silent_ns >= 1400000000ULL &&
			      ev.size == sizeof(ev), "a stopped peer: one "
			      "link-down event (tcp, HCOMM_ERR_TIMEOUT, silent "
			      "%.0f ms), delivered once a callback was set: "
			      "type %u peer %d: %s", ev.silent_ns / 1e6,
			      ev.type, ev.peer, ev.why);
			got = ev_get(1, 200, &ev);
			check(!got, "only one event (a second: type %u, %s)",
			      ev.type, got ? ev.why : "");
			check_ok(hcomm_comm_set_event_cb(comm, NULL, NULL),
				 "hcomm_comm_set_event_cb(NULL)");
		}
		t0 = now_ms();
		r = hcomm_put(w, 1, 0, buf, 8);
		t0 = now_ms() - t0;
		check(r < 0 && t0 < 1000, "the next put fails at once (%s, "
		      "%lld ms)", hcomm_strerror(r), (long long)t0);
		tell_parent('0');	/* resume rank 1 */
	} else {
		check(0, "no word from the parent");
	}
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier after the resume");
	ret = 0;
out:
	return down(w, ret);
}

static void test_stopped(void)
{
	const struct world wd = {
		"stopped peer", 2, rank_stopped,
		{ "HCOMM_TIMEOUT_MS=1500", "HCOMM_COLL_TIMEOUT_MS=inf", NULL },
	};
	pid_t pid[2];
	char c;
	int st;

	const struct timespec stall = { 0, 500000000 };

	world_start(&wd, pid);
	/* a short stall: its length is the scenario, not a synchronisation */
	if (!read_byte(c2p[0], 60000, &c) && c == 'r') {
		kill(pid[1], SIGSTOP);
		waitpid(pid[1], &st, WUNTRACED);
		(void)!write(p2c[0][1], "g", 1);
		if (!read_byte(c2p[0], 60000, &c) && c == 'p')
			nanosleep(&stall, NULL);
		else
			ok(0, "stopped peer: no put from rank 0");
	} else {
		ok(0, "stopped peer: rank 1 never got ready");
	}
	kill(pid[1], SIGCONT);
	/* a long one: the timeout */
	if (!read_byte(c2p[0], 60000, &c) && c == '1') {
		kill(pid[1], SIGSTOP);
		waitpid(pid[1], &st, WUNTRACED);
		(void)!write(p2c[0][1], "g", 1);
		if (read_byte(c2p[0], 60000, &c))
			ok(0, "stopped peer: rank 0 said nothing");
	} else {
		ok(0, "stopped peer: rank 1 never got ready");
	}
	kill(pid[1], SIGCONT);
	world_end(&wd, pid, -1);
}

/* ------------------------------------------------------------------ */
/* a peer killed mid-stream                                            */
/* ------------------------------------------------------------------ */

#define K_QD		8
#define K_LEN		(256 * KiB)

static int rank_killed(void)
{
	int thr0 = count_threads();
	unsigned char *mem = xmap(K_QD * K_LEN), *src = xmap(K_LEN);
	struct hcomm_request req[K_QD];
	struct hcomm_win *w = NULL;
	int64_t t0 = 0, t1;
	long n = 0, j;
	int r, first = 0, ls_id = 0, never = 0;
	char c;

	if (!mem || !src || up())
		return 1;
	w = win_make(mem, K_QD * K_LEN);
	if (!w)
		return down(NULL, 1);
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	if (me == 1) {
		read_byte(p2c[1][0], RANK_ALARM * 1000, &c);	/* killed */
		return 1;
	}
	check(hcomm_comm_set_event_cb(NULL, ev_rec, NULL) == -HCOMM_ERR_INVAL,
	      "hcomm_comm_set_event_cb(NULL comm): HCOMM_ERR_INVAL");
	check_ok(hcomm_comm_set_event_cb(comm, ev_rec, comm),
		 "hcomm_comm_set_event_cb");
	/*
	 * Listeners (what libpypto uses): one that stays, and seven that
	 * fill the table and are removed before the kill, so never called.
	 */
	{
		int id[8], k, full;

		check(hcomm_comm_event_listen(NULL, ls_rec, NULL) ==
		      -HCOMM_ERR_INVAL && hcomm_comm_event_listen(comm, NULL,
		      NULL) == -HCOMM_ERR_INVAL &&
		      hcomm_comm_event_unlisten(comm, 0) == -HCOMM_ERR_INVAL &&
		      hcomm_comm_event_unlisten(comm, 12345) ==
		      -HCOMM_ERR_INVAL, "hcomm_comm_event_listen/unlisten: "
		      "HCOMM_ERR_INVAL for NULL, id 0 and an unknown id");
		id[0] = hcomm_comm_event_listen(comm, ls_rec, NULL);
		for (k = 1; k < 8; k++)
			id[k] = hcomm_comm_event_listen(comm, ls_never,
							&never);
		full = hcomm_comm_event_listen(comm, ls_never, &never);
		check(id[0] >= 1 && id[7] == id[0] + 7 &&
		      full == -HCOMM_ERR_LIMIT, "8 listeners (ids %d..%d), "
		      "a ninth: HCOMM_ERR_LIMIT (%d)", id[0], id[7], full);
		for (k = 1; k < 8; k++)
			check_ok(hcomm_comm_event_unlisten(comm, id[k]),
				 "hcomm_comm_event_unlisten");
		check(hcomm_comm_event_unlisten(comm, id[1]) ==
		      -HCOMM_ERR_INVAL, "a second unlisten of the same id: "
		      "HCOMM_ERR_INVAL");
		ls_id = id[0];
		check(hcomm_comm_peer_lost(comm, 1) == 0 &&
		      hcomm_comm_peer_lost(comm, 0) == -HCOMM_ERR_INVAL &&
		      hcomm_comm_peer_lost(comm, 2) == -HCOMM_ERR_INVAL &&
		      hcomm_comm_peer_lost(NULL, 1) == -HCOMM_ERR_INVAL,
		      "hcomm_comm_peer_lost: 0 for a live peer, "
		      "HCOMM_ERR_INVAL for this rank, no rank, NULL");
	}
	memset(req, 0, sizeof(req));
	for (t1 = now_ms(); now_ms() - t1 < 30000; n++) {
		j = n % K_QD;
		if (n >= K_QD && (r = hcomm_wait(&req[j]))) {
			first = r;
			break;
		}
		if (n == 64) {
			tell_parent('k');	/* kill rank 1 now */
			t0 = now_ms();
		}
		memset(&req[j], 0, sizeof(req[j]));
		r = hcomm_put_nb(w, 1, (uint64_t)j * K_LEN, src, K_LEN,
				 &req[j]);
		if (r) {
			first = r;
			break;
		}
	}
	t1 = now_ms() - t0;
	check(first == -HCOMM_ERR_IO && t0 && t1 < 10000,
	      "streaming to a rank that is killed: HCOMM_ERR_IO %lld ms after "
	      "the kill was asked (%s)", (long long)t1, hcomm_strerror(first));
	check(hcomm_comm_peer_lost(comm, 1) == 1, "hcomm_comm_peer_lost: 1 "
	      "as soon as a request to the killed rank failed");
	r = hcomm_put(w, 1, 0, src, 64);
	check(r == -HCOMM_ERR_IO && strstr(hcomm_errmsg(), "rank 1"),
	      "a put after that: HCOMM_ERR_IO naming rank 1 (%s)",
	      hcomm_errmsg());
	{
		struct hcomm_event ev = { 0 };
		int got = ev_get(0, 5000, &ev);

		check(got && ev.type == HCOMM_EVENT_PEER_LOST &&
		      ev.peer == 1 && ev.xport == HCOMM_XPORT_TCP &&
		      ev.err == HCOMM_ERR_IO && !ev.silent_ns,
		      "a killed peer: a peer-lost event (tcp, HCOMM_ERR_IO): "
		      "type %u peer %d xport %d: %s", ev.type, ev.peer,
		      ev.xport, ev.why);
		int drc, n, gap;

		pthread_mutex_lock(&evr.lock);
		drc = evr.destroy_rc;
		n = evr.n;
		gap = evr.gap;
		pthread_mutex_unlock(&evr.lock);
		check(drc == -HCOMM_ERR_INVAL, "hcomm_comm_destroy from the "
		      "event callback: HCOMM_ERR_INVAL (%d)", drc);
		check(!gap && n == 1, "%d events, gap %d", n, gap);
		pthread_mutex_lock(&lsr.lock);
		n = lsr.n;
		gap = lsr.seq == ev.seq && lsr.type == ev.type;
		pthread_mutex_unlock(&lsr.lock);
		check(n == 1 && gap && !never, "the listener saw that event "
		      "too (%d events, same: %d), the removed ones none (%d)",
		      n, gap, never);
		check_ok(hcomm_comm_event_unlisten(comm, ls_id),
			 "hcomm_comm_event_unlisten");
	}
	for (j = 0; j < K_QD && n > j; j++)
		hcomm_wait(&req[j]);
	t0 = now_ms();
	r = hcomm_win_free(w);
	r = hcomm_comm_destroy(comm);
	t0 = now_ms() - t0;
	check(t0 < 10000, "win_free and destroy returned after %lld ms (%s)",
	      (long long)t0, hcomm_strerror(r));
	check(count_threads() == thr0, "no thread left (%d, "
	      "%d before)", count_threads(), thr0);
	return 0;
}

static void test_killed(void)
{
	const struct world wd = {
		"killed peer", 2, rank_killed,
		{ "HCOMM_TIMEOUT_MS=5000", "HCOMM_NUM_QPS=2", NULL },
	};
	pid_t pid[2];
	char c;

	world_start(&wd, pid);
	if (read_byte(c2p[0], 60000, &c) || c != 'k')
		ok(0, "killed peer: no word from rank 0");
	kill(pid[1], SIGKILL);
	ok(reap(pid[1]) == 100 + SIGKILL, "killed peer: rank 1 was killed");
	world_end(&wd, pid, 1);
}

/* ------------------------------------------------------------------ */
/* a hostile client                                                    */
/* ------------------------------------------------------------------ */

#define H_WIN		(4 * MiB)

static int h_connect(const char *addr)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char ip[64];
	const char *colon = strrchr(addr, ':');
	int fd;

	if (!colon || colon - addr >= (long)sizeof(ip))
		return -1;
	memcpy(ip, addr, (size_t)(colon - addr));
	ip[colon - addr] = 0;
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Read n bytes within ms: 0, or -1 (EOF, error, time). */
static int h_read(int fd, void *p, size_t n, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int64_t end = now_ms() + ms;
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

/* 1 when the server closed fd within ms (EOF or reset, no more data). */
static int h_closed(int fd, int ms)
{
	unsigned char b[256];
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int64_t end = now_ms() + ms;
	ssize_t r;

	for (;;) {
		if (poll(&pfd, 1, (int)(end - now_ms())) != 1)
			return 0;
		r = recv(fd, b, sizeof(b), 0);
		if (r <= 0)
			return 1;
	}
}

/* A connection past the hello as rank 0, lane 0: its fd or -1. */
static int h_guest(const char *addr, uint64_t nonce)
{
	unsigned char b[32];
	int fd = h_connect(addr);

	if (fd < 0)
		return -1;
	wire_hello(b, nonce, 0, 1, 0, 1);
	if (send(fd, b, 32, MSG_NOSIGNAL) != 32 || h_read(fd, b, 32, IO_MS) ||
	    memcmp(b, "HCTH", 4)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Send raw bytes on a new connection; 1 if the server then closed it. */
static int h_raw(const char *addr, const void *p, size_t n, int ms)
{
	int fd = h_connect(addr), c;

	if (fd < 0)
		return 0;
	if (n && send(fd, p, n, MSG_NOSIGNAL) != (ssize_t)n) {
		close(fd);
		return 0;
	}
	c = h_closed(fd, ms);
	close(fd);
	return c;
}

/* A frame (header + payload) on a guest connection; 1 if then closed. */
static int h_frame(const char *addr, uint64_t nonce, const unsigned char *h,
		   size_t hlen, const void *payload, size_t plen)
{
	int fd = h_guest(addr, nonce), c;

	if (fd < 0)
		return 0;
	if (send(fd, h, hlen, MSG_NOSIGNAL) != (ssize_t)hlen ||
	    (plen && send(fd, payload, plen, MSG_NOSIGNAL) != (ssize_t)plen)) {
		close(fd);
		return 0;
	}
	if (hlen < 64)
		shutdown(fd, SHUT_WR);	/* truncated: then the end */
	c = h_closed(fd, IO_MS);
	close(fd);
	return c;
}

static void h_attacks(struct hcomm_win *w, const char *addr)
{
	uint64_t nonce = hcomm__boot_nonce(comm->boot);
	uint32_t id = (uint32_t)w->peers[1].x[HCOMM_XP_TCP].key;
	unsigned char junk[64], b[64], hello[32], pay[4096];
	int fd;

	fill(junk, sizeof(junk), 99);
	check(h_raw(addr, junk, sizeof(junk), IO_MS), "garbage instead of a "
	      "hello: closed");
	wire_hello(hello, nonce + 1, 0, 1, 0, 1);
	check(h_raw(addr, hello, 32, IO_MS), "hello with a wrong nonce: "
	      "closed");
	wire_hello(hello, nonce, 5, 1, 0, 1);
	check(h_raw(addr, hello, 32, IO_MS), "hello from rank 5 of 2: closed");
	wire_hello(hello, nonce, 0, 1, 0, 2);
	check(h_raw(addr, hello, 32, IO_MS), "hello of protocol version 2: "
	      "closed");
	/* past the hello: bad frames */
	fill(pay, sizeof(pay), 5);
	wire_frame(b, 1, 1, 1000, 4096, id, ~hcomm__crc32c(0, pay, 4096));
	check(h_frame(addr, nonce, b, 64, pay, 4096), "put with a bad payload "
	      "CRC: closed");
	wire_frame(b, 1, 1, H_WIN - 10, 100, id, hcomm__crc32c(0, pay, 100));
	check(h_frame(addr, nonce, b, 64, pay, 100), "put past the end of the "
	      "window: closed");
	wire_frame(b, 1, 1, 0, 100, 0xdead, hcomm__crc32c(0, pay, 100));
	check(h_frame(addr, nonce, b, 64, pay, 100), "put into an unknown "
	      "window: closed");
	/* inside the window, but longer than a segment (1 MiB) may be */
	wire_frame(b, 1, 1, 0, MiB + 1, id, 0);
	check(h_frame(addr, nonce, b, 64, NULL, 0), "put of a 1 MiB + 1 byte "
	      "segment: closed at its header");
	wire_frame(b, 9, 1, 0, 0, id, 0);
	check(h_frame(addr, nonce, b, 64, NULL, 0), "frame of op 9: closed");
	wire_frame(b, 1, 5, 0, 100, id, hcomm__crc32c(0, pay, 100));
	check(h_frame(addr, nonce, b, 64, pay, 100), "put with sequence 5 "
	      "first: closed");
	wire_frame(b, 1, 1, 0, 100, id, hcomm__crc32c(0, pay, 100));
	b[10] ^= 1;		/* the header CRC no longer matches */
	check(h_frame(addr, nonce, b, 64, pay, 100), "header with a bad CRC: "
	      "closed");
	wire_frame(b, 1, 1, 0, 100, id, hcomm__crc32c(0, pay, 100));
	check(h_frame(addr, nonce, b, 40, NULL, 0), "truncated header: "
	      "closed");
	/* a good put from a guest is applied and acknowledged */
	fill(pay, 100, 6);
	fd = h_guest(addr, nonce);
	wire_frame(b, 1, 1, 2000, 100, id, hcomm__crc32c(0, pay, 100));
	check(fd >= 0 && send(fd, b, 64, MSG_NOSIGNAL) == 64 &&
	      send(fd, pay, 100, MSG_NOSIGNAL) == 100 &&
	      !h_read(fd, b, 64, IO_MS) && b[4] == 4 && b[16] == 1,
	      "a correct put from a guest connection: acknowledged");
	if (fd >= 0)
		close(fd);
	/* a client that never says hello is dropped after HCOMM_TIMEOUT_MS */
	check(h_raw(addr, NULL, 0, 6000), "no hello: closed after the "
	      "timeout");
}

static int rank_hostile(void)
{
	unsigned char *mem = xmap(H_WIN), *want = xmap(H_WIN), buf[4096];
	struct hcomm_peer_xport_stats *t;
	struct hcomm_peer_stats ps;
	struct hcomm_comm_stats st;
	struct hcomm_win *w = NULL;
	char addr[2][64], mine[64];
	int ret = 1, pr;

	if (!mem || !want || up())
		return 1;
	fill(mem, H_WIN, 40);
	w = win_make(mem, H_WIN);
	if (!w)
		goto out;
	snprintf(mine, sizeof(mine), "%s", hcomm__tcp_listen_addr(comm));
	check_ok(hcomm_boot_allgather(comm, mine, addr, 64), "hcomm_allgather");
	if (me == 0) {
		h_attacks(w, addr[1]);
		/* the job goes on */
		fill(buf, sizeof(buf), 41);
		check(!hcomm_put(w, 1, 8192, buf, sizeof(buf)) &&
		      !hcomm_get(w, 1, 8192, want, sizeof(buf)) &&
		      !memcmp(want, buf, sizeof(buf)), "rank 0 and 1 still "
		      "put and get");
	}
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	if (me == 1) {
		fill(want, H_WIN, 40);
		fill(want + 2000, 100, 6);
		fill(want + 8192, 4096, 41);
		/* [1000, 5096) took the bad-CRC put: undefined */
		memcpy(want + 1000, mem + 1000, 4096);
		check(!memcmp(mem, want, H_WIN), "the window outside the "
		      "targeted ranges is unchanged");
		hcomm_comm_get_stats(comm, &st);
		check(st.net_refused == 11 && st.net_crc_errors == 1 &&
		      st.net_conn_lost == 9,
		      "counted: %llu refused (11), %llu CRC errors (1), %llu "
		      "connections lost (9)",
		      (unsigned long long)st.net_refused,
		      (unsigned long long)st.net_crc_errors,
		      (unsigned long long)st.net_conn_lost);
		/* the guests said they were rank 0: its counters */
		ps.size = sizeof(ps);
		t = &ps.xp[HCOMM_XPORT_TCP];
		pr = hcomm_comm_peer_stats(comm, 0, &ps);
		check(!pr && t->crc_errors == 1 && t->refused == 6 &&
		      t->conn_lost == 9, "peer 0: %llu CRC errors (1), %llu "
		      "frames refused (6), %llu connections lost (9)",
		      (unsigned long long)t->crc_errors,
		      (unsigned long long)t->refused,
		      (unsigned long long)t->conn_lost);
	}
	ret = 0;
out:
	return down(w, ret);
}

/* ------------------------------------------------------------------ */
/* per-peer counters and the peers file                                */
/* ------------------------------------------------------------------ */

#define PP_PUT		100000ULL	/* 3 puts of it from 0 to 1 */
#define PP_PUT2		70001ULL	/* 1 put from 0 to 2 */
#define PP_GET		4096ULL		/* 1 get by 0 from 1 */
#define PP_WIN		(4 * MiB)

/* HCOMM_STATS_DIR=<a directory of this run>, set by main(). */
static char pp_env[96];

/* What rank me should count towards peer (the traffic above). */
static void pp_want(int peer, struct hcomm_peer_xport_stats *w)
{
	memset(w, 0, sizeof(*w));
	w->in_use = 1;
	if (me == 0 && peer == 1) {
		w->bytes_sent = 3 * PP_PUT;
		w->ops_sent = 4;
		w->bytes_recv = PP_GET;
	} else if (me == 0 && peer == 2) {
		w->bytes_sent = PP_PUT2;
		w->ops_sent = 1;
	} else if (me == 1 && peer == 0) {
		w->bytes_recv = 3 * PP_PUT;
		w->ops_recv = 4;
		w->bytes_sent = PP_GET;
	} else if (me == 2 && peer == 0) {
		w->bytes_recv = PP_PUT2;
		w->ops_recv = 1;
	}
}

static uint64_t js_u64(json_object *o, const char *k)
{
	json_object *v;

	return json_object_object_get_ex(o, k, &v) ?
	       (uint64_t)json_object_get_int64(v) : UINT64_MAX;
}

/*
 * The peers file parses and says what pp_want() says (rewritten once a
 * second: looked at for up to 5 s); 1 when it does.
 */
static int pp_file_ok(const char *path, char *why, size_t len)
{
	struct hcomm_peer_xport_stats w;
	json_object *o, *t, *a, *e, *x;
	int i, n, good = 0;

	snprintf(why, len, "unreadable");
	o = json_object_from_file(path);
	if (!o)
		return 0;
	if (js_u64(o, "version") != HCOMM_PEERS_JSON_VERSION ||
	    js_u64(o, "pid") != (uint64_t)getpid() ||
	    js_u64(o, "rank") != (uint64_t)me ||
	    !json_object_object_get_ex(o, "table", &t) ||
	    !json_object_object_get_ex(t, "peers", &a) ||
	    json_object_array_length(a) != (size_t)np - 1 ||
	    !json_object_object_get_ex(o, "counters", &a) ||
	    json_object_array_length(a) != (size_t)np - 1) {
		snprintf(why, len, "version, pid, rank or the arrays wrong");
		goto out;
	}
	n = (int)json_object_array_length(a);
	for (i = 0; i < n; i++) {
		e = json_object_array_get_idx(a, i);
		pp_want((int)js_u64(e, "peer"), &w);
		if (!json_object_object_get_ex(e, "tcp", &x) ||
		    json_object_object_get_ex(e, "kernel", NULL) ||
		    js_u64(x, "bytes_sent") != w.bytes_sent ||
		    js_u64(x, "bytes_recv") != w.bytes_recv ||
		    js_u64(x, "ops_sent") != w.ops_sent ||
		    js_u64(x, "ops_recv") != w.ops_recv ||
		    js_u64(x, "crc_errors") || js_u64(x, "conn_lost")) {
			snprintf(why, len, "peer %d: %s",
				 (int)js_u64(e, "peer"),
				 json_object_to_json_string(x));
			goto out;
		}
	}
	good = 1;
out:
	json_object_put(o);
	return good;
}

/*
 * hcomm_info --peers DIR (built next to this program) prints rank 0's
 * table and counters towards peer 1; skipped when it is not built.
 */
static void pp_info_check(const char *dir)
{
	char exe[512], cmd[1200], out[8192];
	size_t n = 0, got;
	ssize_t l;
	FILE *p;
	int st;

	l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (l <= 0)
		return;
	exe[l] = 0;
	*strrchr(exe, '/') = 0;
	snprintf(cmd, sizeof(cmd), "%s/hcomm_info", exe);
	if (access(cmd, X_OK)) {
		check(1, "hcomm_info --peers: # SKIP not built");
		return;
	}
	snprintf(cmd, sizeof(cmd), "%s/hcomm_info --peers %s", exe, dir);
	p = popen(cmd, "r");
	if (!p) {
		check(0, "popen %s", cmd);
		return;
	}
	while (n < sizeof(out) - 1 &&
	       (got = fread(out + n, 1, sizeof(out) - 1 - n, p)))
		n += got;
	out[n] = 0;
	st = pclose(p);
	snprintf(cmd, sizeof(cmd), "hcomm-%d-0-0.peers.json: pid %d, rank 0 "
		 "of 3, transports tcp\n  peer 1\n    links:  kernel -, "
		 "rdma -, tcp not probed\n    route:  [0, inf) tcp (forced by "
		 "HCOMM_TRANSPORT=tcp)\n    tcp     sent 300000 B in 4 ops, "
		 "received 4096 B in 0 ops; 0 CRC errors, 0 refused, 0 "
		 "connections lost, ", (int)getpid(), (int)getpid());
	check(st == 0 && strstr(out, cmd) &&
	      strstr(out, "-1-0.peers.json: pid ") &&
	      strstr(out, "-2-0.peers.json: pid "), "hcomm_info --peers %s: "
	      "every rank's table, rank 0's counters towards peer 1 (exit "
	      "%d)%s%s", dir, st, st == 0 && strstr(out, cmd) ? "" : ":\n",
	      st == 0 && strstr(out, cmd) ? "" : out);
}

/*
 * 3 ranks, 1 lane (an operation is one frame), HCOMM_STATS_DIR: rank 0
 * puts 3 x PP_PUT to rank 1, PP_PUT2 to rank 2 and gets PP_GET from rank
 * 1; every rank's per-peer counters and peers file say exactly that.
 */
static int rank_peers(void)
{
	const char *dir = getenv("HCOMM_STATS_DIR");
	struct hcomm_peer_stats ps;
	struct hcomm_peer_xport_stats w;
	unsigned char *mem = xmap(PP_WIN), *buf = xmap(PP_WIN);
	struct hcomm_win *win = NULL;
	char path[512], why[400];
	struct stat sb;
	int64_t end;
	int ret = 1, r, i, good;

	if (!mem || !buf || up())
		return 1;
	/* arguments */
	ps.size = sizeof(ps);
	check(hcomm_comm_peer_stats(NULL, 1, &ps) == -HCOMM_ERR_INVAL &&
	      strstr(hcomm_errmsg(), "comm is NULL"), "peer_stats(NULL "
	      "comm): HCOMM_ERR_INVAL (%s)", hcomm_errmsg());
	check(hcomm_comm_peer_stats(comm, 1, NULL) == -HCOMM_ERR_INVAL &&
	      strstr(hcomm_errmsg(), "st is NULL"), "peer_stats(NULL st): "
	      "HCOMM_ERR_INVAL (%s)", hcomm_errmsg());
	check(hcomm_comm_peer_stats(comm, me, &ps) == -HCOMM_ERR_INVAL &&
	      strstr(hcomm_errmsg(), "this rank"), "peer_stats(self): "
	      "HCOMM_ERR_INVAL (%s)", hcomm_errmsg());
	check(hcomm_comm_peer_stats(comm, np, &ps) == -HCOMM_ERR_INVAL &&
	      hcomm_comm_peer_stats(comm, -1, &ps) == -HCOMM_ERR_INVAL &&
	      strstr(hcomm_errmsg(), "no such rank"), "peer_stats(-1), "
	      "(%d): HCOMM_ERR_INVAL (%s)", np, hcomm_errmsg());
	ps.size = 8;
	check(hcomm_comm_peer_stats(comm, (me + 1) % np, &ps) ==
	      -HCOMM_ERR_INVAL && strstr(hcomm_errmsg(), "st->size 8"),
	      "peer_stats with st->size 8: HCOMM_ERR_INVAL (%s)",
	      hcomm_errmsg());
	/* before any traffic: zero, one range over tcp */
	r = (me + 1) % np;
	memset(&ps, 0xa5, sizeof(ps));
	ps.size = sizeof(ps);
	i = hcomm_comm_peer_stats(comm, r, &ps);
	check(!i && ps.size == sizeof(ps) &&
	      ps.version == HCOMM_PEER_STATS_VERSION &&
	      ps.peer == r && ps.nranges == 1 &&
	      ps.range[0].upto == UINT64_MAX &&
	      ps.range[0].xport == HCOMM_XPORT_TCP &&
	      strstr(ps.why, "HCOMM_TRANSPORT") &&
	      ps.xp[HCOMM_XPORT_TCP].in_use &&
	      !ps.xp[HCOMM_XPORT_KERNEL].in_use &&
	      !ps.xp[HCOMM_XPORT_RDMA].in_use &&
	      !ps.xp[HCOMM_XPORT_TCP].bytes_sent &&
	      !ps.xp[HCOMM_XPORT_TCP].ops_recv && !ps.reserved[0],
	      "peer_stats before traffic: version %u, size %u, peer %d, "
	      "%u range [0, inf) tcp (%s), counters 0", ps.version, ps.size,
	      ps.peer, ps.nranges, ps.why);
	fill(mem, PP_WIN, 70 + (uint64_t)me);
	win = win_make(mem, PP_WIN);
	if (!win)
		goto out;
	if (me == 0) {
		fill(buf, PP_WIN, 71);
		for (i = 0; i < 3; i++)
			check_ok(hcomm_put(win, 1, (uint64_t)i * PP_PUT,
					   buf + i * PP_PUT, PP_PUT),
				 "hcomm_put");
		check_ok(hcomm_put(win, 2, 0, buf, PP_PUT2), "hcomm_put");
		check_ok(hcomm_get(win, 1, MiB, buf + 2 * MiB, PP_GET),
			 "hcomm_get");
		check_ok(hcomm_flush(comm), "hcomm_flush");
	}
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	for (r = 0; r < np; r++) {
		struct hcomm_peer_xport_stats *t = &ps.xp[HCOMM_XPORT_TCP];

		if (r == me)
			continue;
		pp_want(r, &w);
		ps.size = sizeof(ps);
		i = hcomm_comm_peer_stats(comm, r, &ps);
		check(!i && t->bytes_sent == w.bytes_sent &&
		      t->bytes_recv == w.bytes_recv &&
		      t->ops_sent == w.ops_sent && t->ops_recv == w.ops_recv &&
		      !t->crc_errors && !t->refused && !t->conn_lost &&
		      !t->wc_errors, "peer %d: %llu/%llu bytes sent/received "
		      "(%llu/%llu), %llu/%llu ops (%llu/%llu), no error", r,
		      (unsigned long long)t->bytes_sent,
		      (unsigned long long)t->bytes_recv,
		      (unsigned long long)w.bytes_sent,
		      (unsigned long long)w.bytes_recv,
		      (unsigned long long)t->ops_sent,
		      (unsigned long long)t->ops_recv,
		      (unsigned long long)w.ops_sent,
		      (unsigned long long)w.ops_recv);
	}
	/* the peers file */
	snprintf(path, sizeof(path), "%s/hcomm-%d-%d-0.peers.json", dir,
		 (int)getpid(), me);
	check(!stat(path, &sb) && (sb.st_mode & 0777) == 0600, "%s: mode "
	      "0600", path);
	end = now_ms() + 5000;
	while (!(good = pp_file_ok(path, why, sizeof(why))) && now_ms() < end)
		usleep(50000);
	check(good, "the peers file holds the same numbers (%s)",
	      good ? "yes" : why);
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	if (me == 0)
		pp_info_check(dir);
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	ret = 0;
out:
	ret = down(win, ret);
	check(stat(path, &sb) && errno == ENOENT, "destroy removed %s", path);
	snprintf(path, sizeof(path), "%s/hcomm-%d-%d-0.peers.json.tmp", dir,
		 (int)getpid(), me);
	check(stat(path, &sb) && errno == ENOENT, "no temporary file left");
	return ret;
}

/* ------------------------------------------------------------------ */
/* 4 ranks, every pair                                                 */
/* ------------------------------------------------------------------ */

#define A_LEN		(MiB + 4097)

static int rank_all(void)
{
	size_t win_len = 4 * A_LEN;
	unsigned char *mem = xmap(win_len), *src = xmap(A_LEN);
	unsigned char *got = xmap(A_LEN), *want = xmap(A_LEN);
	struct hcomm_win *w = NULL;
	int r, bad = 0, ret = 1;

	if (!mem || !src || !got || !want || up())
		return 1;
	w = win_make(mem, win_len);
	if (!w)
		goto out;
	fill(src, A_LEN, 500 + (uint64_t)me);
	for (r = 0; r < np; r++)
		check_ok(hcomm_put(w, r, (uint64_t)me * A_LEN, src, A_LEN),
			 "hcomm_put");
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	for (r = 0; r < np; r++) {
		fill(want, A_LEN, 500 + (uint64_t)r);
		bad += memcmp(mem + (size_t)r * A_LEN, want, A_LEN) != 0;
		check_ok(hcomm_get(w, r, (uint64_t)((r + 1) % np) * A_LEN, got,
				   A_LEN), "hcomm_get");
		fill(want, A_LEN, 500 + (uint64_t)((r + 1) % np));
		bad += memcmp(got, want, A_LEN) != 0;
	}
	check(!bad, "%d ranks: puts of %llu bytes to every rank landed, gets "
	      "from every rank right (%d wrong)", np,
	      (unsigned long long)A_LEN, bad);
	check_ok(hcomm_boot_barrier(comm), "hcomm_barrier");
	ret = 0;
out:
	return down(w, ret);
}

/* ------------------------------------------------------------------ */

/*
 * Both ranks on ::1 through a rank table's addresses ("addr ::1"); run
 * when this host has IPv6 loopback.
 */
static void test_ipv6(void)
{
	static char env[64];
	const struct world wd = {
		"every pair over IPv6 (rank table addr ::1), 2 lanes", 2,
		rank_all, { env, "HCOMM_NUM_QPS=2", NULL },
	};
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6 };
	char path[] = "/tmp/hcomm-tcp-test-XXXXXX";
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	FILE *f;

	sa.sin6_addr = in6addr_loopback;
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (fd >= 0)
			close(fd);
		skip("IPv6: no ::1 here");
		return;
	}
	close(fd);
	fd = mkstemp(path);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		ok(0, "IPv6: rank table %s", path);
		return;
	}
	fprintf(f, "world_size 2\nrank 0 host localhost addr ::1\n"
		"rank 1 host localhost addr ::1\n");
	fclose(f);
	snprintf(env, sizeof(env), "HCOMM_RANK_TABLE=%s", path);
	world_run(&wd);
	unlink(path);
}

/* argv: run only the worlds whose names contain one of them. */
static int wanted(const char *name, int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++)
		if (strstr(name, argv[i]))
			return 1;
	return argc < 2;
}

int main(int argc, char **argv)
{
	static const struct world worlds[] = {
		{ "put/get, 1 lane, HCOMM_STATS_DIR", 2, rank_putget,
		  { "HCOMM_NUM_QPS=1", "HCOMM_STATS_DIR=/tmp" } },
		{ "put/get, 4 lanes", 2, rank_putget, { "HCOMM_NUM_QPS=4" } },
		{ "put/get, 4 lanes, SENDMSG_ZC from 16K", 2, rank_putget,
		  { "HCOMM_NUM_QPS=4", "HCOMM_TCP_ZC_THRESHOLD=16K" } },
		{ "both ways at once, 2 lanes", 2, rank_bidir,
		  { "HCOMM_NUM_QPS=2" } },
		{ "stream of 3 MiB puts and gets, 1 lane", 2, rank_stream,
		  { "HCOMM_NUM_QPS=1" } },
		{ "stream of 3 MiB puts and gets, 2 lanes, SENDMSG_ZC from 64K",
		  2, rank_stream,
		  { "HCOMM_NUM_QPS=2", "HCOMM_TCP_ZC_THRESHOLD=64K" } },
		{ "stream of 3 MiB puts and gets, 1 lane, SENDMSG_ZC from 4K",
		  2, rank_stream,
		  { "HCOMM_NUM_QPS=1", "HCOMM_TCP_ZC_THRESHOLD=4K" } },
		{ "put_signal ring, 1 lane", 2, rank_ring,
		  { "HCOMM_NUM_QPS=1" } },
		{ "put_signal ring, 4 lanes", 2, rank_ring,
		  { "HCOMM_NUM_QPS=4" } },
		{ "batches, 4 ranks, 1 lane", 4, rank_batch,
		  { "HCOMM_NUM_QPS=1", "HCOMM_QUEUE_DEPTH=16" } },
		{ "batches, 4 ranks, 3 lanes", 4, rank_batch,
		  { "HCOMM_NUM_QPS=3" } },
		{ "callbacks", 2, rank_callbacks, { "HCOMM_NUM_QPS=2" } },
		{ "fence and flush, 4 lanes", 2, rank_fence,
		  { "HCOMM_NUM_QPS=4" } },
		{ "internal operations in order, 4 lanes", 2, rank_ordered,
		  { "HCOMM_NUM_QPS=4" } },
		{ "errors", 2, rank_errors, { NULL } },
		{ "waiting for either of two signals", 2, rank_wait_any,
		  { NULL } },
		{ "HCOMM_TRANSPORT=bogus", 1, rank_bad_env,
		  { "HCOMM_TRANSPORT=bogus" } },
		{ "HCOMM_TCP_ZC_THRESHOLD=lots", 1, rank_bad_env,
		  { "HCOMM_TCP_ZC_THRESHOLD=lots" } },
		{ "HCOMM_TCP_DIGEST=md5", 1, rank_bad_env,
		  { "HCOMM_TCP_DIGEST=md5" } },
		{ "HCOMM_SPIN_US=soon", 1, rank_bad_env,
		  { "HCOMM_SPIN_US=soon" } },
		{ "HCOMM_SPIN_US=60000001", 1, rank_bad_env,
		  { "HCOMM_SPIN_US=60000001" } },
		{ "put_signal ring, HCOMM_SPIN_US=0 (no polling)", 2,
		  rank_ring, { "HCOMM_NUM_QPS=1", "HCOMM_SPIN_US=0" } },
		{ "callbacks, HCOMM_SPIN_US=2000000 (polling)", 2,
		  rank_callbacks, { "HCOMM_NUM_QPS=2", "HCOMM_SPIN_US=2000000" } },
		{ "HCOMM_CB_SPIN_US=-1", 1, rank_bad_env,
		  { "HCOMM_CB_SPIN_US=-1" } },
		{ "HCOMM_CB_SPIN_US=60000001", 1, rank_bad_env,
		  { "HCOMM_CB_SPIN_US=60000001" } },
		{ "callbacks, HCOMM_CB_SPIN_US=0 (the dispatcher never polls)",
		  2, rank_callbacks, { "HCOMM_NUM_QPS=2", "HCOMM_CB_SPIN_US=0" } },
		{ "callbacks, HCOMM_CB_SPIN_US=5000000 (it polls for seconds)",
		  2, rank_callbacks,
		  { "HCOMM_NUM_QPS=2", "HCOMM_CB_SPIN_US=5000000" } },
		{ "put/get, 2 lanes, HCOMM_TCP_DIGEST=none", 2, rank_putget,
		  { "HCOMM_NUM_QPS=2", "HCOMM_TCP_DIGEST=none" } },
		{ "stream of 3 MiB puts and gets, HCOMM_TCP_DIGEST=none", 2,
		  rank_stream, { "HCOMM_NUM_QPS=1", "HCOMM_TCP_DIGEST=none" } },
		{ "put/get, digest on one rank only", 2, rank_digest_mixed,
		  { "HCOMM_NUM_QPS=1" } },
		{ "hostile client", 2, rank_hostile,
		  { "HCOMM_TIMEOUT_MS=1500", "HCOMM_COLL_TIMEOUT_MS=30000" } },
		{ "4 ranks, every pair, 2 lanes", 4, rank_all,
		  { "HCOMM_NUM_QPS=2" } },
		{ "per-peer counters, 3 ranks, HCOMM_STATS_DIR", 3, rank_peers,
		  { "HCOMM_NUM_QPS=1", pp_env } },
		{ "socket buffers above autotuning", 2, rank_sockbuf,
		  { "HCOMM_NUM_QPS=1", sb_env_s, sb_env_r } },
	};
	char pp_dir[64];
	unsigned int i;
	int r;

	signal(SIGPIPE, SIG_IGN);
	shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED || pipe2(c2p, O_CLOEXEC))
		return 2;
	for (r = 0; r < 4; r++)
		if (pipe2(p2c[r], O_CLOEXEC))
			return 2;
	unsetenv("HCOMM_RANK_TABLE");
	unsetenv("HCOMM_STATS_DIR");
	snprintf(pp_dir, sizeof(pp_dir), "/tmp/hcomm-test-tcp-XXXXXX");
	if (!mkdtemp(pp_dir))
		return 2;
	snprintf(pp_env, sizeof(pp_env), "HCOMM_STATS_DIR=%s", pp_dir);
	sb_snd = 2 * sb_sysctl("/proc/sys/net/ipv4/tcp_wmem", 2);
	sb_rcv = 2 * sb_sysctl("/proc/sys/net/ipv4/tcp_rmem", 2);
	if (!sb_snd || sb_snd > GiB)
		sb_snd = 64 * MiB;
	if (!sb_rcv || sb_rcv > GiB)
		sb_rcv = 64 * MiB;
	snprintf(sb_env_s, sizeof(sb_env_s), "HCOMM_SEND_BUF_SIZE=%llu",
		 (unsigned long long)sb_snd);
	snprintf(sb_env_r, sizeof(sb_env_r), "HCOMM_RECV_BUF_SIZE=%llu",
		 (unsigned long long)sb_rcv);
	if (wanted("crc32c", argc, argv))
		test_crc32c();
	for (i = 0; i < sizeof(worlds) / sizeof(worlds[0]); i++)
		if (wanted(worlds[i].name, argc, argv))
			world_run(&worlds[i]);
	if (wanted("IPv6", argc, argv))
		test_ipv6();
	if (wanted("stopped peer", argc, argv))
		test_stopped();
	if (wanted("killed peer", argc, argv))
		test_killed();
	ok(!rmdir(pp_dir), "%s: empty at the end", pp_dir);
	return tap_done("tcp");
}
