/* SPDX-License-Identifier: MIT */
/*
 * hcomm_xfer_bench: the hcomm data path against its baselines, in one run.
 *
 *   hcomm_xfer_bench [--max-size N[K|M|G]] [--time SECS] [--iters N]
 *                    [--qd N] [--json FILE] [--baselines-only]
 *
 * Two processes: this one (the sender) forks a receiver; each opens its own
 * /dev/hcomm context.  The receiver registers its buffer, GRANTs REMOTE_READ
 * and REMOTE_WRITE to the same uid and sends the key over a socketpair; the
 * sender XFERs from its own region into the receiver's region by key.
 *
 * Figures, each printed as a ratio to its baseline measured in the same run:
 *   bandwidth 1 KiB .. 64 MiB: io_uring XFER (queue depth --qd) and ioctl
 *     XFER, against memcpy in one process, process_vm_writev into the
 *     receiver, and a two-copy through POSIX shared memory;
 *   unaligned (src_off 3, dst_off 5) against aligned, 1 MiB and 16 MiB;
 *   8-byte XFER round trip (submit + reap) against IORING_OP_NOP on the same
 *     ring; put-with-signal ping-pong (8 B + doorbell) against a pipe;
 *   1000 64-byte XFERs per io_uring_submit against one ioctl each (and
 *     against 1000 NOPs per submit);
 *   REG_MEM + DEREG of 1 MiB hitting the registration cache against
 *     HCOMM_REG_NOCACHE.
 * A table goes to stdout, JSON to --json FILE (default build/logs/bench.json
 * when ./build/logs exists).  Every measured transfer point is verified
 * (checksum of the destination, untouched guard bytes around it).
 *
 * Exit status: 0 when every transfer worked and carried the right data,
 * 1 on a functional error (an XFER or a command failing, wrong data),
 * 2 on bad usage or when the setup itself fails.  Timings never fail.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
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
#include <linux/futex.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include <liburing.h>
#include <linux/hcomm.h>

#define BENCH_NAME	"hcomm_xfer_bench"
#include "bench_util.h"

#define HCOMM_DEV	"/dev/hcomm"
#define STATS_PATH	"/sys/kernel/debug/hcomm/stats"
#define PARAMS_DIR	"/sys/module/hcomm/parameters"
#define DEFAULT_JSON	"build/logs/bench.json"

#define PG		4096ULL
#define PAD		PG	/* slack after each buffer: offsets, guards */
#define UNAL_SRC	3
#define UNAL_DST	5
#define BATCH		1000
#define BATCH_LEN	64
#define RING_ENTRIES	1024
#define QD_MAX		64
#define PP_STOP		UINT64_MAX
#define PP_PONG_OFF	64	/* where pongs land in the sender's pp buffer */
#define SPIN_NS		200000	/* spin this long before sleeping */
#define WAIT_NS		5000000000ULL	/* a peer silent this long is broken */

static const uint64_t sizes[] = {
	1 * KiB, 4 * KiB, 64 * KiB, 256 * KiB,
	1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB,
};
#define NSIZES	(sizeof(sizes) / sizeof(sizes[0]))

/* ------------------------------------------------------------------ */
/* options, results                                                    */
/* ------------------------------------------------------------------ */

static uint64_t opt_max = 64 * MiB;
static double opt_time = 0.25;
static uint64_t opt_iters;
static unsigned int opt_qd = 4;
static const char *opt_json;
static bool opt_baselines_only;

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/* ------------------------------------------------------------------ */
/* buffers                                                             */
/* ------------------------------------------------------------------ */

/* Bytes of the big buffers: the largest transfer, the batch, and PAD. */
static size_t buf_len(void)
{
	uint64_t n = opt_max > 64 * KiB ? opt_max : 64 * KiB;

	return (size_t)(n + PAD);
}

/* ------------------------------------------------------------------ */
/* debugfs stats, module parameters, system                            */
/* ------------------------------------------------------------------ */

#define MAX_STATS 96
struct stats {
	bool ok;
	int n;
	char name[MAX_STATS][64];
	uint64_t v[MAX_STATS];
};

static void stats_read(struct stats *s)
{
	char line[256];
	FILE *f;

	s->ok = false;
	s->n = 0;
	f = fopen(STATS_PATH, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && s->n < MAX_STATS) {
		char nm[64];
		unsigned long long v;
		size_t l;

		if (sscanf(line, "%63s %llu", nm, &v) != 2)
			continue;
		l = strlen(nm);
		if (l && nm[l - 1] == ':')
			nm[l - 1] = '\0';
		memcpy(s->name[s->n], nm, sizeof(nm));
		s->v[s->n++] = v;
	}
	fclose(f);
	s->ok = s->n > 0;
}

static uint64_t stats_get(const struct stats *s, const char *name)
{
	int i;

	for (i = 0; i < s->n; i++)
		if (!strcmp(s->name[i], name))
			return s->v[i];
	return 0;
}

static uint64_t stats_delta(const struct stats *a, const struct stats *b,
			    const char *name)
{
	return stats_get(b, name) - stats_get(a, name);
}

/* Which engine served the transfers between two snapshots. */
static void stats_engine(const struct stats *a, const struct stats *b,
			 char *buf, size_t len)
{
	uint64_t in, as;

	if (!a->ok || !b->ok) {
		snprintf(buf, len, "?");
		return;
	}
	in = stats_delta(a, b, "xfer_inline");
	as = stats_delta(a, b, "xfer_async");
	if (as && in)
		snprintf(buf, len, "inline+workers");
	else if (as)
		snprintf(buf, len, "cpu-workers");
	else if (in)
		snprintf(buf, len, "inline");
	else
		snprintf(buf, len, "?");
}

static long long read_param(const char *name)
{
	char path[256], buf[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), PARAMS_DIR "/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return strtoll(buf, NULL, 0);
}

static const char *engine_name(uint32_t e)
{
	switch (e) {
	case HCOMM_ENGINE_INLINE: return "inline";
	case HCOMM_ENGINE_CPU: return "cpu-workers";
	default: return "?";
	}
}

/* ------------------------------------------------------------------ */
/* io_uring passthrough                                                */
/* ------------------------------------------------------------------ */

/* Wait until doorbell idx >= v: spin SPIN_NS, then DB_WAIT. */
static int db_wait_ge(int fd, volatile uint64_t *db, uint32_t idx, uint64_t v)
{
	double t0 = now(), spin = SPIN_NS * 1e-9;
	unsigned int i;

	for (;;) {
		for (i = 0; i < 256; i++) {
			if (__atomic_load_n(&db[idx], __ATOMIC_ACQUIRE) >= v)
				return 0;
			cpu_relax();
		}
		if (now() - t0 > spin)
			break;
		sched_yield();	/* the peer may share this CPU */
	}
	for (;;) {
		struct hcomm_db_wait w = {
			.index = idx,
			.value = v,
			.timeout_ns = WAIT_NS,
		};

		if (ioctl(fd, HCOMM_CMD_DB_WAIT, &w) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (__atomic_load_n(&db[idx], __ATOMIC_ACQUIRE) >= v)
			return 0;
	}
}

/* ------------------------------------------------------------------ */
/* shared-memory channel of the two-copy baseline                      */
/* ------------------------------------------------------------------ */

struct line32 {
	uint32_t v;
	char pad[60];
};

/*
 * A ring of SHM_SLOTS chunks of SHM_CHUNK bytes: a message is cut into
 * chunks, the sender copies each into a free slot, the receiver copies it
 * out and frees the slot (the two copies overlap, as in MPI-style shared
 * memory transports).
 */
#define SHM_SLOTS	4
#define SHM_CHUNK	(256 * KiB)

struct shm_ctl {
	struct line32 state[SHM_SLOTS];		/* 0 empty, 1 full, 2 quit */
	struct line32 waiters[SHM_SLOTS];
};

static struct shm_ctl *shm_ctl;
static unsigned char *shm_slot[SHM_SLOTS];

static long futex(uint32_t *uaddr, int op, uint32_t val,
		  const struct timespec *ts)
{
	return syscall(SYS_futex, uaddr, op, val, ts, NULL, 0);
}

/* Wait until (*w == v) == eq; spin first, then futex.  0 or -ETIMEDOUT. */
static int word_wait(int slot, uint32_t v, bool eq)
{
	uint32_t *w = &shm_ctl->state[slot].v;
	uint32_t *waiters = &shm_ctl->waiters[slot].v;
	double t0 = now(), spin = SPIN_NS * 1e-9;
	unsigned int i;
	uint32_t c;

	for (;;) {
		for (i = 0; i < 256; i++) {
			c = __atomic_load_n(w, __ATOMIC_ACQUIRE);
			if ((c == v) == eq)
				return 0;
			cpu_relax();
		}
		if (now() - t0 > spin)
			break;
		sched_yield();	/* the peer may share this CPU */
	}
	for (;;) {
		struct timespec ts = { 0, 50000000 };

		__atomic_fetch_add(waiters, 1, __ATOMIC_SEQ_CST);
		c = __atomic_load_n(w, __ATOMIC_SEQ_CST);
		if ((c == v) != eq)
			futex(w, FUTEX_WAIT, c, &ts);
		__atomic_fetch_sub(waiters, 1, __ATOMIC_SEQ_CST);
		c = __atomic_load_n(w, __ATOMIC_ACQUIRE);
		if ((c == v) == eq)
			return 0;
		if (now() - t0 > WAIT_NS * 1e-9)
			return -ETIMEDOUT;
	}
}

static void word_set(int slot, uint32_t v)
{
	__atomic_store_n(&shm_ctl->state[slot].v, v, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&shm_ctl->waiters[slot].v, __ATOMIC_SEQ_CST))
		futex(&shm_ctl->state[slot].v, FUTEX_WAKE, INT_MAX, NULL);
}

/* ------------------------------------------------------------------ */
/* sender <-> receiver protocol (SOCK_SEQPACKET)                       */
/* ------------------------------------------------------------------ */

enum {
	OP_POISON = 1,	/* a = bytes from 0 to fill with POISON */
	OP_SUM,		/* a = off, b = len: checksum, guards checked */
	OP_SHM,		/* a = len, b = dst off: two-copy receive loop */
	OP_PP_HC,	/* a = sender's pong key: doorbell ping-pong */
	OP_PP_PIPE,	/* pipe ping-pong */
	OP_QUIT,
};

struct hello {
	int64_t status;
	int64_t pid;
	uint64_t dst_key;
	uint64_t dst_addr;
	uint64_t dst_len;
	char err[128];
};

/* ------------------------------------------------------------------ */
/* receiver (child)                                                    */
/* ------------------------------------------------------------------ */

static struct {
	int sock, fd;
	int pipe_in, pipe_out;
	unsigned char *dst;
	size_t len;
	uint64_t key;
	uint32_t region;
	volatile uint64_t *db;
	struct io_uring ring;
	bool ring_ok;
} R;

static int child_setup(struct hello *h)
{
	struct hcomm_reg_mem reg;
	struct hcomm_grant g;
	void *db;
	int ret;

	R.len = buf_len();
	R.dst = map_buf(R.len);
	if (!R.dst) {
		snprintf(h->err, sizeof(h->err), "mmap %zu bytes", R.len);
		return -ENOMEM;
	}
	memset(R.dst, POISON, R.len);
	h->dst_addr = (uintptr_t)R.dst;
	h->dst_len = R.len;
	if (opt_baselines_only)
		return 0;

	R.fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	if (R.fd < 0) {
		snprintf(h->err, sizeof(h->err), "open " HCOMM_DEV);
		return -errno;
	}
	memset(&reg, 0, sizeof(reg));
	reg.addr = (uintptr_t)R.dst;
	reg.len = R.len;
	reg.access = HCOMM_ACCESS_ALL;
	if (ioctl(R.fd, HCOMM_CMD_REG_MEM, &reg) < 0) {
		snprintf(h->err, sizeof(h->err), "REG_MEM of %zu bytes", R.len);
		return -errno;
	}
	R.key = reg.key;
	R.region = reg.region;
	memset(&g, 0, sizeof(g));
	g.region = reg.region;
	g.scope = HCOMM_GRANT_SAME_UID;
	g.access = HCOMM_ACCESS_REMOTE_READ | HCOMM_ACCESS_REMOTE_WRITE;
	if (ioctl(R.fd, HCOMM_CMD_GRANT, &g) < 0) {
		snprintf(h->err, sizeof(h->err), "GRANT SAME_UID");
		return -errno;
	}
	db = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED, R.fd,
		  HCOMM_MMAP_DOORBELLS);
	if (db == MAP_FAILED) {
		snprintf(h->err, sizeof(h->err), "mmap of the doorbells");
		return -errno;
	}
	R.db = db;
	ret = io_uring_queue_init(8, &R.ring, 0);
	if (ret) {
		snprintf(h->err, sizeof(h->err), "io_uring_queue_init");
		return ret;
	}
	R.ring_ok = true;
	h->dst_key = R.key;
	return 0;
}

static int child_shm(size_t len, size_t doff, uint64_t *count)
{
	unsigned int seq = 0;
	size_t off = 0;
	int ret;

	*count = 0;
	for (;;) {
		int slot = seq % SHM_SLOTS;
		size_t c = len - off < SHM_CHUNK ? len - off : SHM_CHUNK;

		ret = word_wait(slot, 0, false);
		if (ret)
			return ret;
		if (__atomic_load_n(&shm_ctl->state[slot].v,
				    __ATOMIC_ACQUIRE) == 2) {
			word_set(slot, 0);
			return off ? -EPROTO : 0;
		}
		memcpy(R.dst + doff + off, shm_slot[slot], c);
		word_set(slot, 0);
		seq++;
		off += c;
		if (off == len) {
			off = 0;
			(*count)++;
		}
	}
}

static int child_pp_hc(uint64_t pong_key, uint64_t *count)
{
	uint64_t base = __atomic_load_n(&R.db[0], __ATOMIC_ACQUIRE), k;
	struct reply ready = { 0, 0 };
	struct hcomm_xfer x;
	int ret;

	/* Pings may come once the sender has this (base is read). */
	if (xsend(R.sock, &ready, sizeof(ready)))
		return -EPIPE;
	memset(&x, 0, sizeof(x));
	x.src_key = R.key;
	x.src_off = 0;
	x.dst_key = pong_key;
	x.dst_off = PP_PONG_OFF;
	x.len = 8;
	x.flags = HCOMM_XFER_DB_ADD | HCOMM_XFER_DB_REMOTE;
	x.db_index = 0;
	x.db_value = 1;
	*count = 0;
	for (k = 1;; k++) {
		uint64_t v;

		ret = db_wait_ge(R.fd, R.db, 0, base + k);
		if (ret)
			return ret;
		v = *(volatile uint64_t *)R.dst;
		if (v == PP_STOP)
			return 0;
		if (v != k) {
			fprintf(stderr, "# receiver: ping %llu carried %llu\n",
				(unsigned long long)k, (unsigned long long)v);
			return -EIO;
		}
		ret = uring_xfer1(&R.ring, R.fd, &x);
		if (ret)
			return ret;
		(*count)++;
	}
}

static int child_pp_pipe(uint64_t *count)
{
	uint64_t k, v;

	*count = 0;
	for (k = 1;; k++) {
		if (read(R.pipe_in, &v, 8) != 8)
			return -EIO;
		if (v == PP_STOP)
			return 0;
		if (v != k)
			return -EIO;
		if (write(R.pipe_out, &v, 8) != 8)
			return -EIO;
		(*count)++;
	}
}

static void __attribute__((noreturn)) child_main(void)
{
	struct hello h;
	struct msg m;
	struct reply rp;

	memset(&h, 0, sizeof(h));
	h.pid = getpid();
	h.status = child_setup(&h);
	if (xsend(R.sock, &h, sizeof(h)) || h.status)
		_exit(1);
	for (;;) {
		if (xrecv(R.sock, &m, sizeof(m)))
			_exit(1);
		memset(&rp, 0, sizeof(rp));
		switch (m.op) {
		case OP_POISON:
			memset(R.dst, POISON, m.a < R.len ? m.a : R.len);
			break;
		case OP_SUM:
			if (m.a + m.b > R.len) {
				rp.status = -ERANGE;
				break;
			}
			rp.val = csum(R.dst + m.a, m.b);
			if (!guards_intact(R.dst, R.len, m.a, m.b))
				rp.status = -EOVERFLOW;
			break;
		case OP_SHM:
			rp.status = child_shm(m.a, m.b, &rp.val);
			break;
		case OP_PP_HC:
			rp.status = child_pp_hc(m.a, &rp.val);
			break;
		case OP_PP_PIPE:
			rp.status = child_pp_pipe(&rp.val);
			break;
		case OP_QUIT:
			xsend(R.sock, &rp, sizeof(rp));
			if (R.ring_ok)
				io_uring_queue_exit(&R.ring);
			_exit(0);
		default:
			rp.status = -EINVAL;
		}
		if (xsend(R.sock, &rp, sizeof(rp)))
			_exit(1);
	}
}

/* ------------------------------------------------------------------ */
/* sender (parent)                                                     */
/* ------------------------------------------------------------------ */

static struct {
	int sock, fd;
	int pipe_out, pipe_in;
	pid_t child;
	struct hcomm_info info;
	struct io_uring ring;
	unsigned char *src, *ldst, *pp, *cbuf;
	size_t len;
	uint64_t src_key, pp_key;
	volatile uint64_t *db;
	uint64_t dst_key, dst_addr, dst_len;
} S;

static void rpc_send(uint32_t op, uint64_t a, uint64_t b)
{
	struct msg m = { .op = op, .a = a, .b = b };

	if (xsend(S.sock, &m, sizeof(m))) {
		fail("the receiver process is gone (send)");
		exit(1);
	}
}

static struct reply rpc_recv(void)
{
	struct reply rp;

	if (xrecv(S.sock, &rp, sizeof(rp))) {
		fail("the receiver process is gone (recv)");
		exit(1);
	}
	return rp;
}

static struct reply rpc(uint32_t op, uint64_t a, uint64_t b)
{
	rpc_send(op, a, b);
	return rpc_recv();
}

/* Poison the receiver's buffer up to where a transfer may reach. */
static void remote_poison(size_t doff, size_t len)
{
	rpc(OP_POISON, doff + len + GUARD, 0);
}

/* Destination [doff, doff+len) in the receiver == src [soff, soff+len). */
static int remote_verify(const char *what, size_t soff, size_t doff,
			 size_t len)
{
	uint64_t want = csum(S.src + soff, len);
	struct reply rp = rpc(OP_SUM, doff, len);
	char sz[32];

	size_str(len, sz, sizeof(sz));
	if (rp.status == -EOVERFLOW) {
		fail("%s %s: bytes outside the destination range changed",
		     what, sz);
		return -1;
	}
	if (rp.status) {
		fail("%s %s: receiver checksum: %s", what, sz,
		     strerror((int)-rp.status));
		return -1;
	}
	if (rp.val != want) {
		fail("%s %s: wrong data in the receiver (checksum %016llx, "
		     "expected %016llx)", what, sz,
		     (unsigned long long)rp.val, (unsigned long long)want);
		return -1;
	}
	return 0;
}

static int local_verify(const char *what, size_t soff, size_t doff,
			size_t len)
{
	char sz[32];

	if (memcmp(S.ldst + doff, S.src + soff, len) ||
	    !guards_intact(S.ldst, S.len, doff, len)) {
		fail("%s %s: wrong data", what, size_str(len, sz, sizeof(sz)));
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------- bandwidth */

struct bw_ctx {
	size_t len, soff, doff;
	uint32_t engine;		/* ioctl: last engine reported */
	struct hcomm_xfer xs[QD_MAX];
};

static void xfer_init(struct hcomm_xfer *x, size_t soff, size_t doff,
		      size_t len)
{
	memset(x, 0, sizeof(*x));
	x->src_key = S.src_key;
	x->src_off = soff;
	x->dst_key = S.dst_key;
	x->dst_off = doff;
	x->len = len;
}

static int run_memcpy(void *p, uint64_t n)
{
	struct bw_ctx *c = p;

	while (n--) {
		memcpy(S.ldst + c->doff, S.src + c->soff, c->len);
		__asm__ __volatile__("" ::: "memory");
	}
	return 0;
}

static int run_pvw(void *p, uint64_t n)
{
	struct bw_ctx *c = p;

	while (n--) {
		size_t done = 0;

		while (done < c->len) {
			struct iovec l = {
				.iov_base = S.src + c->soff + done,
				.iov_len = c->len - done,
			};
			struct iovec r = {
				.iov_base = (void *)(uintptr_t)(S.dst_addr +
								c->doff + done),
				.iov_len = c->len - done,
			};
			ssize_t w = process_vm_writev(S.child, &l, 1, &r, 1, 0);

			if (w <= 0)
				return w < 0 ? -errno : -EIO;
			done += (size_t)w;
		}
	}
	return 0;
}

static unsigned int shm_seq;	/* chunks sent in this receive loop */

static int run_shm(void *p, uint64_t n)
{
	struct bw_ctx *c = p;
	int ret, i;

	while (n--) {
		size_t off, k;

		for (off = 0; off < c->len; off += k) {
			int slot = shm_seq % SHM_SLOTS;

			k = c->len - off < SHM_CHUNK ? c->len - off : SHM_CHUNK;
			ret = word_wait(slot, 0, true);
			if (ret)
				return ret;
			memcpy(shm_slot[slot], S.src + c->soff + off, k);
			word_set(slot, 1);
			shm_seq++;
		}
	}
	/* A message is delivered once the receiver has copied it out. */
	for (i = 0; i < SHM_SLOTS; i++) {
		ret = word_wait(i, 0, true);
		if (ret)
			return ret;
	}
	return 0;
}

/* Keep qd transfers in flight; reap with one submit_and_wait per round. */
static int run_uring(void *p, uint64_t n)
{
	struct bw_ctx *c = p;
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
		if (ret < 0 && ret != -EINTR) {
			fprintf(stderr, "# io_uring_submit_and_wait: %s\n",
				strerror(-ret));
			return ret;
		}
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

static int run_ioctl(void *p, uint64_t n)
{
	struct bw_ctx *c = p;
	struct hcomm_xfer *x = &c->xs[0];

	while (n--) {
		x->done = 0;
		x->engine = 0;
		if (ioctl(S.fd, HCOMM_CMD_XFER, x) < 0)
			return -errno;
		if (x->done != c->len) {
			fprintf(stderr, "# ioctl XFER: done %llu of %zu\n",
				(unsigned long long)x->done, c->len);
			return -EIO;
		}
		c->engine = x->engine;
	}
	return 0;
}

enum { M_URING, M_IOCTL, M_MEMCPY, M_PVW, M_SHM, M_NR };
static const char *const mnames[M_NR] = {
	"hcomm_uring", "hcomm_ioctl", "memcpy", "process_vm_writev",
	"shm_two_copy",
};

struct bw_point {
	double mibs[M_NR];
	double cpu[M_NR];		/* CPU ns per KiB moved */
	double mt_mibs, mt_cpu;		/* memcpy on the engine's thread count */
	uint64_t iters[M_NR];
	char engine_uring[24], engine_ioctl[24];
	struct stats before, after;	/* around the uring point */
};

static double mibs_of(const struct meas *m, size_t len)
{
	if (!m->secs)
		return NAN;
	return (double)m->iters * (double)len / m->secs / (double)MiB;
}

/*
 * CPU time spent on a measurement: this process (the sender), the
 * receiver process (it copies out of shared memory in shm_two_copy) and
 * the module's engine (engine_busy_ns in debugfs: its workers' copies,
 * which no process is charged for; the whole module's, and only this
 * program runs).
 */
struct cpu_snap {
	double self, peer;
	uint64_t engine;
};

static double cpu_clock(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts))
		return NAN;
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void cpu_take(struct cpu_snap *c)
{
	static struct stats st;
	clockid_t peer;

	c->self = cpu_clock(CLOCK_PROCESS_CPUTIME_ID);
	c->peer = clock_getcpuclockid(S.child, &peer) ? NAN :
		  cpu_clock(peer);
	stats_read(&st);
	c->engine = st.ok ? stats_get(&st, "engine_busy_ns") : 0;
}

/* CPU ns per KiB moved between two snapshots (NAN: unknown). */
static double cpu_per_kib(const struct cpu_snap *a, const struct cpu_snap *b,
			  uint64_t iters, size_t len)
{
	double ns = (b->self - a->self) + (b->peer - a->peer) +
		    (double)(b->engine - a->engine);

	if (!iters || isnan(ns))
		return NAN;
	return ns / ((double)iters * (double)len / 1024.0);
}

/* measure() with the CPU taken just before and after it. */
static int measure_cpu(run_fn fn, void *ctx, struct meas *m,
		       struct cpu_snap *c0, struct cpu_snap *c1)
{
	int ret;

	cpu_take(c0);
	ret = measure(fn, ctx, m, opt_time, opt_iters);
	cpu_take(c1);
	return ret;
}

/* memcpy on nthreads threads, each its share of the range, n times. */
struct mt_share {
	pthread_t th;
	const unsigned char *src;
	unsigned char *dst;
	size_t len;
	uint64_t n;
};

static void *mt_main(void *arg)
{
	struct mt_share *s = arg;
	uint64_t i;

	for (i = 0; i < s->n; i++) {
		memcpy(s->dst, s->src, s->len);
		__asm__ __volatile__("" ::: "memory");
	}
	return NULL;
}

#define MT_MAX	64
static int mt_threads = 1;

static int run_mtmemcpy(void *p, uint64_t n)
{
	struct bw_ctx *c = p;
	struct mt_share sh[MT_MAX] = { { 0 } };
	size_t per = (c->len / (size_t)mt_threads + 63) & ~(size_t)63;
	int i, k = 0;

	for (i = 0; i < mt_threads; i++) {
		size_t off = (size_t)i * per;

		sh[i].src = S.src + c->soff + off;
		sh[i].dst = S.ldst + c->doff + off;
		sh[i].len = off >= c->len ? 0 :
			    off + per > c->len ? c->len - off : per;
		sh[i].n = n;
		if (i && pthread_create(&sh[i].th, NULL, mt_main, &sh[i]))
			break;
		k = i + 1;
	}
	mt_main(&sh[0]);
	for (i = 1; i < k; i++)
		pthread_join(sh[i].th, NULL);
	return k == mt_threads ? 0 : -EAGAIN;
}

/* The multi-threaded memcpy baseline at len: its MiB/s and CPU cost. */
static void bw_mt(size_t len, struct bw_point *pt)
{
	static struct bw_ctx c;
	struct meas m = { 0, 0, 0 };
	struct cpu_snap c0, c1;
	int ret;

	memset(&c, 0, sizeof(c));
	c.len = len;
	memset(S.ldst, POISON, len + GUARD);
	ret = measure_cpu(run_mtmemcpy, &c, &m, &c0, &c1);
	pt->mt_mibs = pt->mt_cpu = NAN;
	if (ret) {
		fail("memcpy on %d threads: %s", mt_threads,
		     strerror(ret < 0 ? -ret : ret));
		return;
	}
	if (local_verify("memcpy on the engine's threads", 0, 0, len))
		return;
	pt->mt_mibs = mibs_of(&m, len);
	pt->mt_cpu = cpu_per_kib(&c0, &c1, m.all_iters, len);
}

/* Measure one method at one size/offset; NAN on failure (reported). */
static double bw_one(int method, size_t len, size_t soff, size_t doff,
		     struct bw_point *pt)
{
	static struct bw_ctx c;
	struct meas m = { 0, 0, 0 };
	struct cpu_snap c0, c1;
	char sz[32], what[64];
	int ret, i;

	size_str(len, sz, sizeof(sz));
	snprintf(what, sizeof(what), "%s%s", mnames[method],
		 soff || doff ? " (unaligned)" : "");
	memset(&c, 0, sizeof(c));
	c.len = len;
	c.soff = soff;
	c.doff = doff;
	for (i = 0; i < QD_MAX; i++)
		xfer_init(&c.xs[i], soff, doff, len);

	switch (method) {
	case M_MEMCPY:
		memset(S.ldst, POISON, doff + len + GUARD);
		ret = measure_cpu(run_memcpy, &c, &m, &c0, &c1);
		if (!ret && local_verify(what, soff, doff, len))
			return NAN;
		break;
	case M_PVW:
		remote_poison(doff, len);
		ret = measure_cpu(run_pvw, &c, &m, &c0, &c1);
		if (!ret && remote_verify(what, soff, doff, len))
			return NAN;
		break;
	case M_SHM: {
		struct reply rp;

		remote_poison(doff, len);
		for (i = 0; i < SHM_SLOTS; i++)
			shm_ctl->state[i].v = 0;
		shm_seq = 0;
		rpc_send(OP_SHM, len, doff);
		ret = measure_cpu(run_shm, &c, &m, &c0, &c1);
		/* The receiver waits on the next slot: tell it to stop there. */
		word_set(shm_seq % SHM_SLOTS, 2);
		rp = rpc_recv();
		if (!ret && rp.status)
			ret = (int)rp.status;
		if (!ret && remote_verify(what, soff, doff, len))
			return NAN;
		break;
	}
	case M_URING:
		remote_poison(doff, len);
		if (pt)
			stats_read(&pt->before);
		ret = measure_cpu(run_uring, &c, &m, &c0, &c1);
		if (pt) {
			stats_read(&pt->after);
			stats_engine(&pt->before, &pt->after, pt->engine_uring,
				     sizeof(pt->engine_uring));
		}
		if (!ret && remote_verify(what, soff, doff, len))
			return NAN;
		break;
	case M_IOCTL:
		remote_poison(doff, len);
		ret = measure_cpu(run_ioctl, &c, &m, &c0, &c1);
		if (pt)
			snprintf(pt->engine_ioctl, sizeof(pt->engine_ioctl),
				 "%s", engine_name(c.engine));
		if (!ret && remote_verify(what, soff, doff, len))
			return NAN;
		break;
	default:
		return NAN;
	}
	if (ret) {
		fail("%s %s: %s", what, sz, strerror(ret < 0 ? -ret : ret));
		return NAN;
	}
	if (pt) {
		pt->iters[method] = m.iters;
		pt->cpu[method] = cpu_per_kib(&c0, &c1, m.all_iters, len);
	}
	return mibs_of(&m, len);
}

/* ------------------------------------------------------------ latency */

static int run_nop(void *p, uint64_t n)
{
	(void)p;
	while (n--) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&S.ring);
		uint64_t big0;
		int res, ret;

		if (!sqe)
			return -EBUSY;
		io_uring_prep_nop(sqe);
		sqe->user_data = 2;
		ret = uring_wait1(&S.ring, &res, &big0);
		if (ret || res)
			return ret ? ret : res;
	}
	return 0;
}

/*
 * The cheapest hcomm command through io_uring: a CANCEL of a tag nothing
 * carries (its argument copied in, checked, the pending lists looked at
 * under their lock, 0 found): what any command costs before its work.
 */
static int run_cancel_uring(void *p, uint64_t n)
{
	struct hcomm_cancel *a = p;
	uint64_t big0;
	int res, ret;

	while (n--) {
		a->count = 1;
		ret = uring_cmd1(&S.ring, S.fd, HCOMM_CMD_CANCEL, a, &res,
				 &big0);
		if (ret || res)
			return ret ? ret : res;
		if (a->count)
			return -EIO;
	}
	return 0;
}

static int run_xfer1_uring(void *p, uint64_t n)
{
	struct bw_ctx *c = p;
	int ret;

	while (n--) {
		ret = uring_xfer1(&S.ring, S.fd, &c->xs[0]);
		if (ret)
			return ret;
	}
	return 0;
}

struct pp_ctx {
	uint64_t ctr, base;
	struct hcomm_xfer x;
};

/* Ping: 8 B + DB_ADD into the receiver; wait for its pong on our doorbell. */
static int run_pp_hc(void *p, uint64_t n)
{
	struct pp_ctx *c = p;
	volatile uint64_t *pp = (volatile uint64_t *)S.pp;
	int ret;

	while (n--) {
		uint64_t i = ++c->ctr;

		pp[0] = i;
		ret = uring_xfer1(&S.ring, S.fd, &c->x);
		if (ret)
			return ret;
		ret = db_wait_ge(S.fd, S.db, 0, c->base + i);
		if (ret)
			return ret;
		if (pp[PP_PONG_OFF / 8] != i) {
			fprintf(stderr, "# pong %llu carried %llu\n",
				(unsigned long long)i,
				(unsigned long long)pp[PP_PONG_OFF / 8]);
			return -EIO;
		}
	}
	return 0;
}

static int run_pp_pipe(void *p, uint64_t n)
{
	uint64_t *ctr = p;

	while (n--) {
		uint64_t i = ++*ctr, v;

		if (write(S.pipe_out, &i, 8) != 8)
			return -EIO;
		if (read(S.pipe_in, &v, 8) != 8)
			return -EIO;
		if (v != i)
			return -EIO;
	}
	return 0;
}

static double us_of(const struct meas *m, double per)
{
	if (!m->iters)
		return NAN;
	return m->secs / (double)m->iters / per * 1e6;
}

static void bench_latency(void)
{
	static struct bw_ctx c;
	struct stats a, b;
	struct meas m;
	double nop = NAN, xu = NAN, xi = NAN, pph = NAN, ppp = NAN, cc = NAN;
	char eng[24] = "";
	int ret;

	printf("\n== round trips (us per round trip; ratio = hcomm / baseline, "
	       "< 1 means hcomm is faster)\n");
	ret = measure(run_nop, NULL, &m, opt_time, opt_iters);
	if (ret)
		fail("IORING_OP_NOP round trip: %s", strerror(-ret));
	else
		nop = us_of(&m, 1);

	if (!opt_baselines_only) {
		struct hcomm_cancel ca = { .tag = ~0ULL };

		ret = measure(run_cancel_uring, &ca, &m, opt_time, opt_iters);
		if (ret)
			fail("CANCEL round trip (io_uring): %s",
			     strerror(-ret));
		else
			cc = us_of(&m, 1);

		memset(&c, 0, sizeof(c));
		c.len = 8;
		xfer_init(&c.xs[0], 0, 0, 8);
		remote_poison(0, 8);
		stats_read(&a);
		ret = measure(run_xfer1_uring, &c, &m, opt_time, opt_iters);
		stats_read(&b);
		stats_engine(&a, &b, eng, sizeof(eng));
		if (ret)
			fail("8 B XFER round trip (io_uring): %s",
			     strerror(-ret));
		else if (!remote_verify("8 B XFER (io_uring)", 0, 0, 8))
			xu = us_of(&m, 1);

		remote_poison(0, 8);
		ret = measure(run_ioctl, &c, &m, opt_time, opt_iters);
		if (ret)
			fail("8 B XFER (ioctl): %s", strerror(-ret));
		else if (!remote_verify("8 B XFER (ioctl)", 0, 0, 8))
			xi = us_of(&m, 1);
	}
	add_result("rtt_cancel_uring", 0, cc, "us", "rtt_nop_uring", nop,
		   false, "");
	add_result("rtt_xfer8_uring", 8, xu, "us", "rtt_nop_uring", nop,
		   false, eng);
	add_result("rtt_xfer8_ioctl", 8, xi, "us", "rtt_nop_uring", nop,
		   false, opt_baselines_only ? "" : engine_name(c.engine));

	if (!opt_baselines_only) {
		struct pp_ctx pc;
		struct reply rp;

		memset(&pc, 0, sizeof(pc));
		pc.base = __atomic_load_n(&S.db[0], __ATOMIC_ACQUIRE);
		pc.x.src_key = S.pp_key;
		pc.x.src_off = 0;
		pc.x.dst_key = S.dst_key;
		pc.x.dst_off = 0;
		pc.x.len = 8;
		pc.x.flags = HCOMM_XFER_DB_ADD | HCOMM_XFER_DB_REMOTE;
		pc.x.db_index = 0;
		pc.x.db_value = 1;
		/* Its first reply says it has read its doorbell's base. */
		rp = rpc(OP_PP_HC, S.pp_key, 0);
		ret = measure(run_pp_hc, &pc, &m, opt_time, opt_iters);
		/* Stop the receiver: a last ping carrying PP_STOP. */
		((volatile uint64_t *)S.pp)[0] = PP_STOP;
		if (uring_xfer1(&S.ring, S.fd, &pc.x) && !ret)
			ret = -EIO;
		rp = rpc_recv();
		if (!ret && rp.status)
			ret = (int)rp.status;
		if (!ret && rp.val != pc.ctr)
			ret = -EPROTO;
		if (ret)
			fail("doorbell ping-pong: %s", strerror(-ret));
		else
			pph = us_of(&m, 1);
	}
	{
		uint64_t ctr = 0, stop = PP_STOP;
		struct reply rp;

		rpc_send(OP_PP_PIPE, 0, 0);
		ret = measure(run_pp_pipe, &ctr, &m, opt_time, opt_iters);
		if (write(S.pipe_out, &stop, 8) != 8 && !ret)
			ret = -EIO;
		rp = rpc_recv();
		if (!ret && rp.status)
			ret = (int)rp.status;
		if (ret)
			fail("pipe ping-pong: %s", strerror(-ret));
		else
			ppp = us_of(&m, 1);
	}
	add_result("pingpong_put_signal", 8, pph, "us", "pingpong_pipe", ppp,
		   false, opt_baselines_only ? "" : "inline+doorbell");
}

/* ------------------------------------------------------------ batching */

static struct hcomm_xfer batch_x[BATCH];

static int run_batch_uring(void *p, uint64_t n)
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
			batch_x[i].engine = 0;
			prep_cmd(sqe, S.fd, HCOMM_CMD_XFER, &batch_x[i], i);
		}
		ret = io_uring_submit(&S.ring);
		if (ret != BATCH) {
			fprintf(stderr, "# io_uring_submit: %d of %d\n", ret,
				BATCH);
			return ret < 0 ? ret : -EIO;
		}
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

/* io_uring's own ceiling: BATCH NOPs per submit. */
static int run_batch_nop(void *p, uint64_t n)
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
			io_uring_prep_nop(sqe);
			sqe->user_data = i;
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
				if (cqe->res && !err)
					err = cqe->res;
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

static int run_batch_ioctl(void *p, uint64_t n)
{
	unsigned int i;

	(void)p;
	while (n--) {
		for (i = 0; i < BATCH; i++) {
			batch_x[i].done = 0;
			if (ioctl(S.fd, HCOMM_CMD_XFER, &batch_x[i]) < 0)
				return -errno;
			if (batch_x[i].done != BATCH_LEN)
				return -EIO;
		}
	}
	return 0;
}

/*
 * The same BATCH transfers as ONE command: HCOMM_CMD_XFER_BATCH with the
 * descriptor array, through io_uring (one SQE, one CQE; CQE32 rings get
 * the count) or ioctl.
 */
static struct hcomm_xfer_batch batch_cmd;

static int run_batch_cmd_uring(void *p, uint64_t n)
{
	uint64_t big0;
	int res, ret;

	(void)p;
	while (n--) {
		ret = uring_cmd1(&S.ring, S.fd, HCOMM_CMD_XFER_BATCH, &batch_cmd,
				 &res, &big0);
		if (!ret)
			ret = check_xfer_res(&S.ring, res, big0, BATCH);
		if (ret)
			return ret;
	}
	return 0;
}

static int run_batch_cmd_ioctl(void *p, uint64_t n)
{
	(void)p;
	while (n--) {
		batch_cmd.done = 0;
		if (ioctl(S.fd, HCOMM_CMD_XFER_BATCH, &batch_cmd) < 0)
			return -errno;
		if (batch_cmd.done != BATCH)
			return -EIO;
	}
	return 0;
}

/* XFER_BATCH of the BATCH descriptors by @run; NAN when it failed. */
static double batch_cmd_rate(int (*run)(void *, uint64_t), const char *what,
			     char *eng, size_t englen)
{
	struct stats a, b;
	struct meas m;
	int ret;

	memset(&batch_cmd, 0, sizeof(batch_cmd));
	batch_cmd.descs = (uintptr_t)batch_x;
	batch_cmd.count = BATCH;
	remote_poison(0, BATCH * BATCH_LEN);
	stats_read(&a);
	ret = measure(run, NULL, &m, opt_time, opt_iters);
	stats_read(&b);
	if (eng)
		stats_engine(&a, &b, eng, englen);
	if (ret) {
		fail("%s: %s", what, strerror(-ret));
		return NAN;
	}
	if (remote_verify(what, 0, 0, BATCH * BATCH_LEN))
		return NAN;
	return (double)m.iters * BATCH / m.secs;
}

static void bench_batch(void)
{
	struct stats a, b;
	struct meas m;
	double ru = NAN, ri = NAN, rn = NAN, rb, rbi;
	char eng[24] = "";
	unsigned int i;
	int ret;

	printf("\n== submission rate, %d x %d B XFERs per io_uring_submit "
	       "(transfers/s; ratio = batched / baseline; against NOPs it is "
	       "the share of io_uring's own ceiling)\n", BATCH, BATCH_LEN);
	ret = measure(run_batch_nop, NULL, &m, opt_time, opt_iters);
	if (ret)
		fail("batched IORING_OP_NOP: %s", strerror(-ret));
	else
		rn = (double)m.iters * BATCH / m.secs;
	if (opt_baselines_only) {
		add_result("rate_uring_batch1000", BATCH_LEN, NAN, "xfers/s",
			   "rate_ioctl_each", NAN, true, "");
		add_result("rate_uring_batch1000", BATCH_LEN, NAN, "xfers/s",
			   "rate_nop_batch1000", rn, true, "");
		return;
	}
	for (i = 0; i < BATCH; i++)
		xfer_init(&batch_x[i], (size_t)i * BATCH_LEN,
			  (size_t)i * BATCH_LEN, BATCH_LEN);
	remote_poison(0, BATCH * BATCH_LEN);
	stats_read(&a);
	ret = measure(run_batch_uring, NULL, &m, opt_time, opt_iters);
	stats_read(&b);
	stats_engine(&a, &b, eng, sizeof(eng));
	if (ret)
		fail("batched io_uring XFERs: %s", strerror(-ret));
	else if (!remote_verify("batched XFERs", 0, 0, BATCH * BATCH_LEN))
		ru = (double)m.iters * BATCH / m.secs;

	remote_poison(0, BATCH * BATCH_LEN);
	ret = measure(run_batch_ioctl, NULL, &m, opt_time, opt_iters);
	if (ret)
		fail("ioctl XFER per transfer: %s", strerror(-ret));
	else if (!remote_verify("ioctl XFERs", 0, 0, BATCH * BATCH_LEN))
		ri = (double)m.iters * BATCH / m.secs;
	add_result("rate_uring_batch1000", BATCH_LEN, ru, "xfers/s",
		   "rate_ioctl_each", ri, true, eng);
	add_result("rate_uring_batch1000", BATCH_LEN, ru, "xfers/s",
		   "rate_nop_batch1000", rn, true, eng);

	if (!(S.info.features & HCOMM_FEAT_XFER_BATCH)) {
		printf("# the module has no XFER_BATCH\n");
		return;
	}
	rb = batch_cmd_rate(run_batch_cmd_uring, "XFER_BATCH by io_uring",
			    eng, sizeof(eng));
	rbi = batch_cmd_rate(run_batch_cmd_ioctl, "XFER_BATCH by ioctl",
			     NULL, 0);
	add_result("rate_xfer_batch_cmd1000", BATCH_LEN, rb, "xfers/s",
		   "rate_nop_batch1000", rn, true, eng);
	add_result("rate_xfer_batch_cmd1000", BATCH_LEN, rb, "xfers/s",
		   "rate_ioctl_each", ri, true, eng);
	add_result("rate_xfer_batch_ioctl1000", BATCH_LEN, rbi, "xfers/s",
		   "rate_ioctl_each", ri, true, "");
}

/* ------------------------------------------------------ registration */

struct reg_ctx {
	uint32_t flags, want;
	uint64_t mismatches;
};

static int run_reg(void *p, uint64_t n)
{
	struct reg_ctx *c = p;

	while (n--) {
		struct hcomm_reg_mem reg;
		struct hcomm_dereg d;

		memset(&reg, 0, sizeof(reg));
		reg.addr = (uintptr_t)S.cbuf;
		reg.len = MiB;
		reg.access = HCOMM_ACCESS_ALL;
		reg.flags = c->flags;
		if (ioctl(S.fd, HCOMM_CMD_REG_MEM, &reg) < 0)
			return -errno;
		if (reg.cache != c->want)
			c->mismatches++;
		memset(&d, 0, sizeof(d));
		d.region = reg.region;
		if (ioctl(S.fd, HCOMM_CMD_DEREG, &d) < 0)
			return -errno;
	}
	return 0;
}

static void bench_reg(void)
{
	struct reg_ctx fresh = { HCOMM_REG_NOCACHE, HCOMM_REG_MISS, 0 };
	struct reg_ctx hit = { 0, HCOMM_REG_HIT, 0 };
	struct stats a, b;
	struct meas m;
	double vf = NAN, vh = NAN;
	char note[24] = "";
	int ret;

	printf("\n== registration of 1 MiB, REG_MEM + DEREG (us; ratio = hit "
	       "/ fresh, < 1 means the cache is faster)\n");
	if (opt_baselines_only) {
		add_result("reg_dereg_cache_hit", MiB, NAN, "us",
			   "reg_dereg_nocache", NAN, false, "");
		return;
	}
	/* The cache may be off for new contexts (cache_limit 0): turn it on. */
	if (S.info.cache_limit < MiB) {
		struct hcomm_ctx_opts o = {
			.mask = HCOMM_CTX_CACHE_LIMIT,
			.cache_limit = 4 * MiB,
		};

		if (ioctl(S.fd, HCOMM_CMD_SET_CTX, &o) < 0) {
			fail("SET_CTX cache_limit %llu: %s",
			     (unsigned long long)o.cache_limit,
			     strerror(errno));
			add_result("reg_dereg_cache_hit", MiB, NAN, "us",
				   "reg_dereg_nocache", NAN, false, "");
			return;
		}
		printf("  (context cache_limit raised from %llu to %llu bytes "
		       "with SET_CTX)\n",
		       (unsigned long long)S.info.cache_limit,
		       (unsigned long long)o.cache_limit);
	}
	ret = measure(run_reg, &fresh, &m, opt_time, opt_iters);
	if (ret)
		fail("REG_MEM NOCACHE + DEREG: %s", strerror(-ret));
	else
		vf = us_of(&m, 1);
	stats_read(&a);
	/* The first registration pins (miss); measure() warms up with it. */
	hit.mismatches = 0;
	ret = measure(run_reg, &hit, &m, opt_time, opt_iters);
	stats_read(&b);
	if (ret)
		fail("REG_MEM (cached) + DEREG: %s", strerror(-ret));
	else
		vh = us_of(&m, 1);
	if (hit.mismatches > 1 || fresh.mismatches)
		fprintf(stderr, "hcomm_xfer_bench: note: %llu cached "
			"registrations were not hits, %llu NOCACHE ones were "
			"not misses\n",
			(unsigned long long)(hit.mismatches - (hit.mismatches > 0)),
			(unsigned long long)fresh.mismatches);
	if (a.ok && b.ok)
		snprintf(note, sizeof(note), "hits %llu",
			 (unsigned long long)stats_delta(&a, &b, "cache_hits"));
	add_result("reg_dereg_cache_hit", MiB, vh, "us", "reg_dereg_nocache",
		   vf, false, note);
}

/* ------------------------------------------------------------ output */

static void print_rows(int from)
{
	int i;

	for (i = from; i < nresults; i++) {
		const struct result *r = &results[i];
		char sz[32], v[32], bv[32], ra[32], vd[32];

		fmt_val(r->value, v, sizeof(v));
		fmt_val(r->base_value, bv, sizeof(bv));
		fmt_ratio(r->ratio, ra, sizeof(ra));
		printf("  %-22s %7s %10s %-7s vs %-18s %10s  ratio %6s  %-14s %s\n",
		       r->name, size_str(r->size, sz, sizeof(sz)), v, r->unit,
		       r->base, bv, ra,
		       verdict(r->ratio, r->higher_better, vd, sizeof(vd)),
		       r->note);
	}
}

static int write_json(const char *path, const struct stats *s0,
		      const struct stats *s1, double wall)
{
	FILE *f = fopen(path, "w");
	int i;

	if (!f)
		return -errno;
	fprintf(f, "{\n  \"program\": \"hcomm_xfer_bench\",\n  \"note\": ");
	json_host(f);
	fprintf(f, "  \"params\": {\"max_size\": %llu, \"target_s\": %g, "
		"\"iters\": %llu, \"rounds\": %d, \"qd\": %u, "
		"\"baselines_only\": %s},\n",
		(unsigned long long)opt_max, opt_time,
		(unsigned long long)opt_iters, ROUNDS, opt_qd,
		opt_baselines_only ? "true" : "false");
	if (!opt_baselines_only) {
		fprintf(f, "  \"hcomm\": {\"abi_version\": %u, "
			"\"features\": %llu, \"max_inline\": %u, "
			"\"chunk_size\": %u, \"nr_doorbells\": %u, "
			"\"cache_limit\": %llu, \"workers\": %lld, "
			"\"dma_engine\": false},\n",
			S.info.abi_version,
			(unsigned long long)S.info.features,
			S.info.max_inline, S.info.chunk_size,
			S.info.nr_doorbells,
			(unsigned long long)S.info.cache_limit,
			read_param("workers"));
	}
	fprintf(f, "  \"stats_delta\": ");
	if (s0->ok && s1->ok) {
		fprintf(f, "{");
		for (i = 0; i < s1->n; i++) {
			fprintf(f, "%s", i ? ", " : "");
			json_str(f, s1->name[i]);
			fprintf(f, ": %lld", (long long)(s1->v[i] -
				stats_get(s0, s1->name[i])));
		}
		fprintf(f, "},\n");
	} else {
		fprintf(f, "null,\n");
	}
	fprintf(f, "  \"wall_s\": %.1f,\n  \"failures\": %d,\n", wall,
		failures);
	fprintf(f, "  \"cqe32_zero_byte_counts\": %llu,\n",
		(unsigned long long)cqe32_no_count);
	json_results(f, "engine");
	fprintf(f, "}\n");
	if (fclose(f))
		return -errno;
	return 0;
}

/* ------------------------------------------------------------ setup */

static void sender_setup(void)
{
	struct hcomm_reg_mem reg;
	struct hcomm_grant g;
	void *db;

	S.len = buf_len();
	S.src = map_buf(S.len);
	S.ldst = map_buf(S.len);
	S.pp = map_buf(PG);
	S.cbuf = map_buf(MiB);
	if (!S.src || !S.ldst || !S.pp || !S.cbuf)
		die("cannot map the sender's buffers (%llu bytes each)",
		    (unsigned long long)S.len);
	fill_pattern(S.src, S.len, 0x68636f6d6dULL);
	memset(S.ldst, POISON, S.len);
	memset(S.pp, 0, PG);
	memset(S.cbuf, 1, MiB);
	if (opt_baselines_only)
		return;

	S.fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	if (S.fd < 0)
		die("open %s: %s", HCOMM_DEV, strerror(errno));
	memset(&S.info, 0, sizeof(S.info));
	if (ioctl(S.fd, HCOMM_CMD_GET_INFO, &S.info) < 0)
		die("GET_INFO: %s", strerror(errno));

	memset(&reg, 0, sizeof(reg));
	reg.addr = (uintptr_t)S.src;
	reg.len = S.len;
	reg.access = HCOMM_ACCESS_ALL;
	if (ioctl(S.fd, HCOMM_CMD_REG_MEM, &reg) < 0)
		die("REG_MEM of the source (%zu bytes): %s", S.len,
		    strerror(errno));
	S.src_key = reg.key;

	memset(&reg, 0, sizeof(reg));
	reg.addr = (uintptr_t)S.pp;
	reg.len = PG;
	reg.access = HCOMM_ACCESS_ALL;
	if (ioctl(S.fd, HCOMM_CMD_REG_MEM, &reg) < 0)
		die("REG_MEM of the ping-pong page: %s", strerror(errno));
	S.pp_key = reg.key;
	memset(&g, 0, sizeof(g));
	g.region = reg.region;
	g.scope = HCOMM_GRANT_SAME_UID;
	g.access = HCOMM_ACCESS_REMOTE_READ | HCOMM_ACCESS_REMOTE_WRITE;
	if (ioctl(S.fd, HCOMM_CMD_GRANT, &g) < 0)
		die("GRANT of the ping-pong page: %s", strerror(errno));

	db = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED, S.fd,
		  HCOMM_MMAP_DOORBELLS);
	if (db == MAP_FAILED)
		die("mmap of the doorbells: %s", strerror(errno));
	S.db = db;
}

static void ring_setup(void)
{
	int ret = io_uring_queue_init(RING_ENTRIES, &S.ring,
				      IORING_SETUP_CQE32);

	if (ret)
		ret = io_uring_queue_init(RING_ENTRIES, &S.ring, 0);
	if (ret)
		die("io_uring_queue_init(%d): %s", RING_ENTRIES,
		    strerror(-ret));
}

static void shm_setup(void)
{
	size_t slot = SHM_CHUNK;
	char name[64];
	int i;
	void *p;
	int fd;

	snprintf(name, sizeof(name), "/hcomm_xfer_bench.%d", (int)getpid());
	fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		die("shm_open %s: %s", name, strerror(errno));
	shm_unlink(name);
	if (ftruncate(fd, (off_t)(PG + SHM_SLOTS * slot)))
		die("ftruncate of the shared memory: %s", strerror(errno));
	p = mmap(NULL, PG + SHM_SLOTS * slot, PROT_READ | PROT_WRITE,
		 MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		die("mmap of the shared memory: %s", strerror(errno));
	memset(p, 0, PG + SHM_SLOTS * slot);
	shm_ctl = p;
	for (i = 0; i < SHM_SLOTS; i++)
		shm_slot[i] = (unsigned char *)p + PG + (size_t)i * slot;
}

static void usage(FILE *f, int rc)
{
	fprintf(f,
		"usage: hcomm_xfer_bench [--max-size N[K|M|G]] [--time SECS] "
		"[--iters N]\n"
		"                        [--qd N] [--json FILE] "
		"[--baselines-only]\n"
		"  --max-size  largest transfer (1K .. 64M points; default 64M)\n"
		"  --time      seconds per measured point (default 0.25)\n"
		"  --iters     fixed iterations per point instead of --time\n"
		"  --qd        io_uring XFERs kept in flight (1..%d, default 4)\n"
		"  --json      JSON output (default " DEFAULT_JSON
		" when ./build/logs exists)\n"
		"  --baselines-only  no /dev/hcomm: measure the baselines only\n",
		QD_MAX);
	exit(rc);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "max-size", required_argument, NULL, 'm' },
		{ "time", required_argument, NULL, 't' },
		{ "iters", required_argument, NULL, 'i' },
		{ "qd", required_argument, NULL, 'q' },
		{ "json", required_argument, NULL, 'j' },
		{ "baselines-only", no_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bw_point pts[NSIZES];
	struct stats s0, s1;
	struct hello h;
	struct rlimit rl;
	int sock, pipe_in, pipe_out, opt, st, rc;
	double t_start = now();
	bool json_explicit = false;
	size_t si;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt_long(argc, argv, "m:t:i:q:j:bh", opts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			if (parse_size(optarg, &opt_max) || opt_max < KiB ||
			    opt_max > 64 * MiB)
				die("--max-size: 1K .. 64M");
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
		case 'j':
			opt_json = optarg;
			json_explicit = true;
			break;
		case 'b':
			opt_baselines_only = true;
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

	/* Pinned memory is charged to RLIMIT_MEMLOCK without CAP_IPC_LOCK. */
	if (!getrlimit(RLIMIT_MEMLOCK, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_MEMLOCK, &rl);
	}
	if (!opt_baselines_only) {
		struct hcomm_info info;
		int fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);

		if (fd < 0)
			die("open %s: %s (is hcomm.ko loaded? "
			    "--baselines-only runs without it)", HCOMM_DEV,
			    strerror(errno));
		memset(&info, 0, sizeof(info));
		if (ioctl(fd, HCOMM_CMD_GET_INFO, &info) < 0)
			die("GET_INFO: %s", strerror(errno));
		close(fd);
		if (info.abi_version != HCOMM_ABI_VERSION)
			die("module ABI %u, this program speaks %u",
			    info.abi_version, HCOMM_ABI_VERSION);
		if (!(info.features & HCOMM_FEAT_XFER)) {
			fail("the module does not offer XFER "
			     "(HCOMM_FEAT_XFER not in features 0x%llx)",
			     (unsigned long long)info.features);
			return 1;
		}
	}

	shm_setup();
	S.child = fork_peer(&sock, &pipe_in, &pipe_out);
	if (S.child == 0) {
		R.sock = sock;
		R.pipe_in = pipe_in;
		R.pipe_out = pipe_out;
		R.fd = -1;
		child_main();
	}
	S.sock = sock;
	S.pipe_out = pipe_out;
	S.pipe_in = pipe_in;
	S.fd = -1;

	sender_setup();
	ring_setup();
	if (xrecv(S.sock, &h, sizeof(h)))
		die("the receiver process died during its setup");
	if (h.status)
		die("receiver setup: %s: %s", h.err,
		    strerror((int)-h.status));
	S.dst_key = h.dst_key;
	S.dst_addr = h.dst_addr;
	S.dst_len = h.dst_len;

	stats_read(&s0);
	print_host();
	if (!opt_baselines_only)
		printf("hcomm: max_inline %u B, chunk_size %u B, workers %lld, "
		       "copies by the CPU, ring %s; debugfs stats %s\n",
		       S.info.max_inline, S.info.chunk_size,
		       read_param("workers"),
		       (S.ring.flags & IORING_SETUP_CQE32) ? "CQE32" : "plain",
		       s0.ok ? "readable" : "not readable (not root, or no "
		       "debugfs)");
	else
		printf("baselines only: no hcomm figures\n");
	printf("sender pid %d -> receiver pid %d; %.2f s per point (best of "
	       "%d rounds), io_uring queue depth %u\n", (int)getpid(),
	       (int)S.child, opt_time, ROUNDS, opt_qd);

	/* ---- bandwidth */
	printf("\n== bandwidth, sender -> receiver (MiB/s; ratio = hcomm / "
	       "baseline, > 1 means hcomm is faster)\n");
	printf("  %7s %9s %9s %9s %9s %9s | %7s %7s %7s %7s %7s | %s\n",
	       "size", "uring", "ioctl", "memcpy", "pvwritev", "shm2copy",
	       "u/mcpy", "u/pvw", "u/shm", "i/pvw", "i/shm", "engine (uring/ioctl)");
	memset(pts, 0, sizeof(pts));
	for (si = 0; si < NSIZES && sizes[si] <= opt_max; si++) {
		struct bw_point *pt = &pts[si];
		size_t len = sizes[si];
		char v[M_NR][32], r[5][32], sz[32];
		int mth;

		for (mth = 0; mth < M_NR; mth++) {
			bool hc = mth == M_URING || mth == M_IOCTL;

			pt->cpu[mth] = NAN;

			pt->mibs[mth] = (hc && opt_baselines_only) ? NAN :
					bw_one(mth, len, 0, 0, pt);
			fmt_val(pt->mibs[mth], v[mth], sizeof(v[mth]));
		}
		fmt_ratio(pt->mibs[M_URING] / pt->mibs[M_MEMCPY], r[0], 32);
		fmt_ratio(pt->mibs[M_URING] / pt->mibs[M_PVW], r[1], 32);
		fmt_ratio(pt->mibs[M_URING] / pt->mibs[M_SHM], r[2], 32);
		fmt_ratio(pt->mibs[M_IOCTL] / pt->mibs[M_PVW], r[3], 32);
		fmt_ratio(pt->mibs[M_IOCTL] / pt->mibs[M_SHM], r[4], 32);
		printf("  %7s %9s %9s %9s %9s %9s | %7s %7s %7s %7s %7s | %s/%s\n",
		       size_str(len, sz, sizeof(sz)), v[M_URING], v[M_IOCTL],
		       v[M_MEMCPY], v[M_PVW], v[M_SHM], r[0], r[1], r[2], r[3],
		       r[4], pt->engine_uring[0] ? pt->engine_uring : "-",
		       pt->engine_ioctl[0] ? pt->engine_ioctl : "-");
		for (mth = M_MEMCPY; mth <= M_SHM; mth++) {
			char name[48];

			snprintf(name, sizeof(name), "bw_uring_qd%u", opt_qd);
			add_result(name, len, pt->mibs[M_URING], "MiB/s",
				   mnames[mth], pt->mibs[mth], true,
				   pt->engine_uring);
			add_result("bw_ioctl", len, pt->mibs[M_IOCTL], "MiB/s",
				   mnames[mth], pt->mibs[mth], true,
				   pt->engine_ioctl);
		}
	}

	/* ---- CPU spent per byte */
	{
		long long wk = read_param("workers");

		mt_threads = wk < 1 ? 1 : wk > MT_MAX ? MT_MAX : (int)wk;
	}
	printf("\n== CPU spent per KiB moved (ns: sender + receiver + the module's engine_busy_ns, over every call of a point; lower is better), beside memcpy on %d thread%s (the engine's workers)\n",
	       mt_threads, mt_threads > 1 ? "s" : "");
	printf("  %7s %9s %9s %9s %9s %9s | %10s %9s | %7s %7s\n", "size",
	       "uring", "ioctl", "memcpy", "pvwritev", "shm2copy",
	       "mt MiB/s", "mt cpu", "u/mt bw", "u/mt cpu");
	for (si = 0; si < NSIZES && sizes[si] <= opt_max; si++) {
		struct bw_point *pt = &pts[si];
		char v[M_NR][32], sz[32], mb[32], mc[32], r[2][32];
		size_t len = sizes[si];
		int mth;

		bw_mt(len, pt);
		for (mth = 0; mth < M_NR; mth++)
			snprintf(v[mth], sizeof(v[mth]), isnan(pt->cpu[mth]) ?
				 "-" : "%.1f", pt->cpu[mth]);
		fmt_val(pt->mt_mibs, mb, sizeof(mb));
		snprintf(mc, sizeof(mc), isnan(pt->mt_cpu) ? "-" : "%.1f",
			 pt->mt_cpu);
		fmt_ratio(pt->mibs[M_URING] / pt->mt_mibs, r[0], 32);
		fmt_ratio(pt->cpu[M_URING] / pt->mt_cpu, r[1], 32);
		printf("  %7s %9s %9s %9s %9s %9s | %10s %9s | %7s %7s\n",
		       size_str(len, sz, sizeof(sz)), v[M_URING], v[M_IOCTL],
		       v[M_MEMCPY], v[M_PVW], v[M_SHM], mb, mc, r[0], r[1]);
		add_result("cpu_per_kib_uring", len, pt->cpu[M_URING], "ns",
			   "memcpy_threads", pt->mt_cpu, false,
			   "sender+receiver+engine");
		add_result("cpu_per_kib_uring", len, pt->cpu[M_URING], "ns",
			   "memcpy", pt->cpu[M_MEMCPY], false,
			   "sender+receiver+engine");
		add_result("bw_uring_vs_memcpy_threads", len,
			   pt->mibs[M_URING], "MiB/s", "memcpy_threads",
			   pt->mt_mibs, true, "same thread count");
	}

	/* ---- alignment */
	{
		int first = nresults;

		printf("\n== unaligned (src_off %d, dst_off %d) vs aligned "
		       "(MiB/s; ratio = unaligned / aligned)\n",
		       UNAL_SRC, UNAL_DST);
		for (si = 0; si < NSIZES && sizes[si] <= opt_max; si++) {
			size_t len = sizes[si];
			double u;
			char name[48];

			if (len != MiB && len != 16 * MiB)
				continue;
			snprintf(name, sizeof(name), "bw_uring_qd%u_unaligned",
				 opt_qd);
			u = opt_baselines_only ? NAN :
			    bw_one(M_URING, len, UNAL_SRC, UNAL_DST, NULL);
			add_result(name, len, u, "MiB/s", "bw_uring_aligned",
				   pts[si].mibs[M_URING], true,
				   pts[si].engine_uring);
			u = bw_one(M_MEMCPY, len, UNAL_SRC, UNAL_DST, NULL);
			add_result("memcpy_unaligned", len, u, "MiB/s",
				   "memcpy_aligned", pts[si].mibs[M_MEMCPY],
				   true, "");
		}
		print_rows(first);
	}

	/* ---- latency, ping-pong */
	{
		int first = nresults;

		bench_latency();
		print_rows(first);
	}
	{
		int first = nresults;

		bench_batch();
		print_rows(first);
	}
	{
		int first = nresults;

		bench_reg();
		print_rows(first);
	}

	/* ---- stats, teardown */
	stats_read(&s1);
	if (s0.ok && s1.ok) {
		printf("\n== debugfs stats over the run: xfer_inline %llu, "
		       "xfer_async %llu, xfer_chunks %llu, "
		       "xfer_bytes %llu,\n   xfer_failed %llu, db_signals %llu, "
		       "db_wakeups %llu, cache_hits %llu, cache_misses %llu, "
		       "engine_busy_ns %llu\n",
		       (unsigned long long)stats_delta(&s0, &s1, "xfer_inline"),
		       (unsigned long long)stats_delta(&s0, &s1, "xfer_async"),
		       (unsigned long long)stats_delta(&s0, &s1, "xfer_chunks"),
		       (unsigned long long)stats_delta(&s0, &s1, "xfer_bytes"),
		       (unsigned long long)stats_delta(&s0, &s1, "xfer_failed"),
		       (unsigned long long)stats_delta(&s0, &s1, "db_signals"),
		       (unsigned long long)stats_delta(&s0, &s1, "db_wakeups"),
		       (unsigned long long)stats_delta(&s0, &s1, "cache_hits"),
		       (unsigned long long)stats_delta(&s0, &s1, "cache_misses"),
		       (unsigned long long)stats_delta(&s0, &s1,
						       "engine_busy_ns"));
		printf("   engine: %s\n",
		       stats_delta(&s0, &s1, "xfer_async") ?
		       "CPU engine workers for large transfers (no DMA)" :
		       "inline only");
	} else if (!opt_baselines_only) {
		printf("\n(debugfs stats not readable: %s)\n", STATS_PATH);
	}

	if (cqe32_no_count)
		printf("\nnote: %llu io_uring XFER completions carried 0 in "
		       "big_cqe[0] instead of the bytes copied (CQE32 ring); "
		       "their data was verified\n",
		       (unsigned long long)cqe32_no_count);

	rpc(OP_QUIT, 0, 0);
	rc = waitpid(S.child, &st, 0) == S.child && WIFEXITED(st) &&
	     !WEXITSTATUS(st);
	if (!rc)
		fail("the receiver process did not exit cleanly");
	io_uring_queue_exit(&S.ring);

	if (opt_json) {
		int ret = write_json(opt_json, &s0, &s1, now() - t_start);

		if (ret && json_explicit) {
			fprintf(stderr, "hcomm_xfer_bench: cannot write %s: %s\n",
				opt_json, strerror(-ret));
			return 2;
		}
		if (ret)
			fprintf(stderr, "hcomm_xfer_bench: note: cannot write "
				"%s: %s (use --json FILE)\n", opt_json,
				strerror(-ret));
		else
			printf("\nJSON: %s\n", opt_json);
	}
	printf("hcomm_xfer_bench: %s (%.1f s)\n",
	       failures ? "FUNCTIONAL ERRORS (see above)" : "all transfers verified",
	       now() - t_start);
	return failures ? 1 : 0;
}
