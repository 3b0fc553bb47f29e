// SPDX-License-Identifier: GPL-2.0
/*
 * hcomm_fuzz_test: a seeded fuzzer of the whole uapi.
 *
 * An attacker process (the test) runs HCOMM_FUZZ_THREADS threads (default
 * 4) while a victim process (a child) runs one more; every thread issues
 * weighted-random commands, through ioctl() and through io_uring
 * passthrough, with random, boundary and adversarial fields: huge lengths,
 * overflowing offsets, unmapped, read-only, PROT_NONE, file-backed and
 * kernel addresses, other contexts' ids and keys, revoked and guessed
 * keys, closed and foreign fds, reserved bits, wrong struct sizes, wrong
 * io_uring payloads.  Between commands the threads unmap, remap, mremap,
 * madvise(DONTNEED) and mprotect memory that is registered or cached,
 * fork (the child must get EPERM for any command on the inherited fd),
 * close and reopen their contexts, and tear io_uring rings down with
 * transfers, fences and waits in flight.
 *
 * What must hold, checked here (the console's KASAN, lockdep, kmemleak and
 * WARNING reports are checked by whoever runs the VM):
 *   - every command ends with 0 or an errno of the documented set, and
 *     every io_uring command posts its completion (none lost in 10 s);
 *   - the victim never grants: no transfer of the attacker that names one
 *     of the victim's keys succeeds, the victim's canary buffers keep
 *     their bytes, and the victim's fd passed over SCM_RIGHTS gives EPERM;
 *   - a fork() child gets EPERM on its parent's context;
 *   - after every fd and ring is closed, the debugfs gauges are back to
 *     what they were before the test.
 *
 * Environment: HCOMM_FUZZ_SEED (default: from the clock; always printed),
 * HCOMM_FUZZ_OPS (commands in all, default 20000), HCOMM_FUZZ_THREADS.
 * HCOMM_FUZZ_BREAK=1 checks the checks: the victim grants its canaries to
 * anyone, and the test must fail (transfers with its keys succeed, its
 * canaries change).
 * Thread t draws from seed + t, so a thread's command stream is the same
 * for the same seed (their interleaving is not).  On a failure the last
 * commands of the failing thread are printed.
 *
 * kill_at_random_points and kill_owner_or_peer: 100 times each, processes
 * busy registering, transferring (alone, or through a region one grants
 * the other) and waiting are SIGKILLed at random points; every command
 * before the kill ends with a documented errno and the gauges come back.
 *
 * load: 64 contexts x 16 engine transfers in flight with registrations
 * and waits for HCOMM_LOAD_SECS; memory and pins flat, gauges back.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "kselftest_harness.h"
#include "hcomm_util.h"
#include "hcomm_dmabuf.h"

/* make fuzz runs millions of commands; run_tests.sh has its own bound */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 7200

#define NCMD		17
#define MAXT		16
#define NBUF		12
#define NREG		48
#define NKEEP		32
#define NLAST		16
#define NCANARY		3
#define CANARY_LEN	(64 * KiB)
#define RING_DEPTH	32
/*
 * How long a completion may take: a transfer may queue behind others of
 * its context capped at max_rate 1 % (SET_QOS), under KASAN and TCG.
 */
#define CQE_WAIT_S	60

enum {
	C_INFO, C_REG, C_DMABUF, C_DEREG, C_QUERY, C_XFER, C_CANCEL, C_FENCE,
	C_WAIT, C_GRANT, C_QOS, C_CTX, C_MMAP, C_BADCMD, C_MAPCHG, C_LIFE,
	C_BATCH,
};

static const char *const cmd_name[NCMD] = {
	"GET_INFO", "REG_MEM", "REG_DMABUF", "DEREG", "QUERY", "XFER",
	"CANCEL", "FENCE", "DB_WAIT", "GRANT", "SET_QOS", "SET_CTX", "mmap",
	"bad-cmd", "map-change", "fork/fd/ring", "XFER_BATCH",
};

/* how often each is drawn (out of the sum) */
static const unsigned int cmd_weight[NCMD] = {
	3, 14, 3, 8, 5, 20, 3, 3, 4, 6, 2, 2, 4, 6, 5, 3, 6,
};

/* errnos a command may end with (besides 0) */
static bool errno_ok(int e)
{
	switch (e) {
	case EINVAL: case EFAULT: case ENOENT: case EACCES: case EPERM:
	case ENOMEM: case EBUSY: case ENOSPC: case ETIME: case ECANCELED:
	case EOVERFLOW: case ENOTTY: case E2BIG: case ERANGE: case EINTR:
	case EAGAIN: case ENODEV: case EBADF: case EOPNOTSUPP: case EEXIST:
	case ENXIO: case ESTALE: case ESRCH: case EMSGSIZE: case ETIMEDOUT:
		return true;
	}
	return false;
}

/* victim <-> attacker, MAP_SHARED */
struct shared {
	_Atomic uint64_t victim_key[NCANARY];
	_Atomic uint64_t victim_scratch_key[NKEEP];
	_Atomic uint64_t attacker_key[NKEEP];
	_Atomic int stop;
	_Atomic int victim_ready;
	_Atomic uint64_t violations;
};

struct region {
	uint32_t id;
	uint64_t key;
	uint64_t len;
	int fd;
	uint32_t access;	/* REG_MEM's; ~0u for a dma-buf */
};

struct thr {
	unsigned int id;
	bool victim;
	uint64_t rng;
	uint64_t ops;
	struct shared *sh;
	int *fds;			/* the process's context pool */
	unsigned int nfds;
	int dmabuf;			/* a udmabuf, or -1 */
	struct io_uring ring;
	bool have_ring;
	unsigned int inflight;		/* SQEs without a CQE yet */
	char *buf[NBUF];
	size_t buf_len[NBUF];
	struct region reg[NREG];
	unsigned int nreg;
	uint64_t revoked[NKEEP];
	unsigned int nrevoked;
	uint64_t count[NCMD], ok[NCMD], err[NCMD];
	char last[NLAST][160];
	unsigned int nlast;
	char lastv[NLAST][160];		/* last[] at the first violation */
	unsigned int nlastv;
	uint64_t vtries, vok;		/* XFERs naming a victim's key */
	int verr[8];			/* their first errnos */
	char why[320];			/* the first violation */
	uint64_t nviol;
};

static uint64_t rnd(struct thr *t)
{
	/* splitmix64 */
	uint64_t z = (t->rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t below(struct thr *t, uint64_t n)
{
	return n ? rnd(t) % n : 0;
}

static bool chance(struct thr *t, unsigned int pct)
{
	return below(t, 100) < pct;
}

/* a length or offset: small, page-ish, boundary or absurd */
static uint64_t fuzz_u64(struct thr *t, uint64_t typical)
{
	static const uint64_t edge[] = {
		0, 1, 2, 7, 8, 63, 64, 4095, 4096, 4097, 65535, 65536,
		1ULL << 20, (1ULL << 31) - 1, 1ULL << 31, 1ULL << 32,
		(1ULL << 63) - 1, 1ULL << 63, ~0ULL, ~0ULL - 4095, ~0ULL - 1,
	};

	switch (below(t, 4)) {
	case 0:
		return edge[below(t, ARRAY_SIZE(edge))];
	case 1:
		return rnd(t);
	default:
		return below(t, typical + 1);
	}
}

static void note(struct thr *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void note(struct thr *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t->last[t->nlast++ % NLAST], sizeof(t->last[0]), fmt, ap);
	va_end(ap);
}

static void violation(struct thr *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void violation(struct thr *t, const char *fmt, ...)
{
	va_list ap;

	if (!t->nviol++) {
		va_start(ap, fmt);
		vsnprintf(t->why, sizeof(t->why), fmt, ap);
		va_end(ap);
		memcpy(t->lastv, t->last, sizeof(t->last));
		t->nlastv = t->nlast;
	}
	atomic_fetch_add(&t->sh->violations, 1);
}

static int pick_fd(struct thr *t)
{
	return __atomic_load_n(&t->fds[below(t, t->nfds)], __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ rings */

static void ring_reap(struct thr *t, bool all)
{
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts = { .tv_sec = CQE_WAIT_S };

	while (t->have_ring && t->inflight) {
		int ret = all ? io_uring_wait_cqe_timeout(&t->ring, &cqe, &ts)
			      : io_uring_peek_cqe(&t->ring, &cqe);

		if (ret == -ETIME) {
			violation(t, "%u io_uring commands without a completion "
				  "after %d s", t->inflight, CQE_WAIT_S);
			return;
		}
		if (ret)
			return;
		if (cqe->res < 0 && !errno_ok(-cqe->res))
			violation(t, "io_uring completion %d (%s) for %llu",
				  cqe->res, strerror(-cqe->res),
				  (unsigned long long)cqe->user_data);
		io_uring_cqe_seen(&t->ring, cqe);
		t->inflight--;
	}
}

static void ring_open(struct thr *t)
{
	unsigned int flags = chance(t, 30) ? IORING_SETUP_SQE128 |
						IORING_SETUP_CQE32 : 0;

	t->have_ring = !io_uring_queue_init(RING_DEPTH, &t->ring, flags);
	t->inflight = 0;
}

/* tear the ring down with whatever is in flight */
static void ring_close(struct thr *t)
{
	if (t->have_ring)
		io_uring_queue_exit(&t->ring);
	t->have_ring = false;
	t->inflight = 0;
}

/*
 * Submit cmd with arg through the ring; wait for its CQE unless async.
 * Returns the result (0 / -errno), or 1 for "submitted, not waited".
 */
static int ring_cmd(struct thr *t, int fd, unsigned int cmd, void *arg,
		    uint32_t size, uint32_t pflags, bool async)
{
	struct __kernel_timespec ts = { .tv_sec = CQE_WAIT_S };
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int ret;

	if (!t->have_ring)
		return -EBADF;
	if (t->inflight >= RING_DEPTH - 2) {
		ring_reap(t, false);
		if (t->inflight >= RING_DEPTH - 2) {	/* mid-flight teardown */
			note(t, "ring full: torn down with %u in flight",
			     t->inflight);
			io_uring_queue_exit(&t->ring);
			ring_open(t);
			if (!t->have_ring)
				return -EBADF;
		}
	}
	sqe = io_uring_get_sqe(&t->ring);
	if (!sqe)
		return -EBUSY;
	hc_sqe_cmd(&t->ring, sqe, fd, cmd, (uintptr_t)arg, size, pflags);
	sqe->user_data = ++t->ops;
	ret = io_uring_submit(&t->ring);
	if (ret != 1)
		return ret < 0 ? ret : -EAGAIN;
	t->inflight++;
	if (async)
		return 1;
	/* the CQE of this SQE; earlier async ones may come first */
	for (;;) {
		ret = io_uring_wait_cqe_timeout(&t->ring, &cqe, &ts);
		if (ret == -ETIME) {
			violation(t, "no completion of a synchronous io_uring "
				  "command 0x%x in %d s", cmd, CQE_WAIT_S);
			return -ETIME;
		}
		if (ret)
			return ret;
		t->inflight--;
		if (cqe->user_data == t->ops) {
			ret = cqe->res;
			io_uring_cqe_seen(&t->ring, cqe);
			return ret;
		}
		if (cqe->res < 0 && !errno_ok(-cqe->res))
			violation(t, "io_uring completion %d (%s)", cqe->res,
				  strerror(-cqe->res));
		io_uring_cqe_seen(&t->ring, cqe);
	}
}

/* ioctl or the ring; async only through the ring */
static int issue(struct thr *t, int fd, unsigned int cmd, void *arg,
		 bool async)
{
	if (async || (t->have_ring && chance(t, 50)))
		return ring_cmd(t, fd, cmd, arg, _IOC_SIZE(cmd), 0, async);
	return ioctl(fd, cmd, arg) < 0 ? -errno : 0;
}

/* ---------------------------------------------------------- memory */

static void buf_make(struct thr *t, unsigned int i)
{
	static const size_t sizes[] = { PG, 3 * PG, 64 * KiB, 256 * KiB,
					 1 * MiB };
	size_t len = sizes[below(t, ARRAY_SIZE(sizes))];
	int prot = PROT_READ | PROT_WRITE, flags = MAP_PRIVATE | MAP_ANONYMOUS;
	int fd = -1;
	void *p;

	switch (i % 6) {
	case 3:			/* read-only */
		prot = PROT_READ;
		break;
	case 4:			/* file-backed, shared */
		fd = memfd_create("hcomm-fuzz", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, (off_t)len)) {
			if (fd >= 0)
				close(fd);
			fd = -1;
		} else {
			flags = MAP_SHARED;
		}
		break;
	case 5:			/* PROT_NONE */
		prot = PROT_NONE;
		break;
	}
	p = mmap(NULL, len, prot, flags, fd, 0);
	if (fd >= 0)
		close(fd);
	if (p == MAP_FAILED) {
		t->buf[i] = NULL;
		t->buf_len[i] = 0;
		return;
	}
	if (prot & PROT_WRITE)
		memset(p, (int)(0x40 + i), len);
	t->buf[i] = p;
	t->buf_len[i] = len;
}

/* an address: mostly inside a buffer, sometimes anything but */
static uint64_t fuzz_addr(struct thr *t, uint64_t *len_hint)
{
	static const uint64_t bad[] = {
		0, 1, 4096, 0xffff888000000000ULL, 0xffffffff81000000ULL,
		0x00007ffffffff000ULL, 0x0000800000000000ULL, ~0ULL - 4095,
	};
	unsigned int i = (unsigned int)below(t, NBUF);

	*len_hint = PG;
	if (chance(t, 12))
		return bad[below(t, ARRAY_SIZE(bad))];
	if (!t->buf[i])
		return (uint64_t)(uintptr_t)t->buf[0];
	*len_hint = t->buf_len[i];
	return (uint64_t)(uintptr_t)t->buf[i] + below(t, t->buf_len[i]);
}

/* Bytes from addr to the end of the buffer holding it (0: in none). */
static uint64_t buf_room(const struct thr *t, uint64_t addr)
{
	unsigned int i;

	for (i = 0; i < NBUF; i++) {
		uint64_t b = (uint64_t)(uintptr_t)t->buf[i];

		if (t->buf[i] && addr >= b && addr - b < t->buf_len[i])
			return t->buf_len[i] - (addr - b);
	}
	return 0;
}

static void map_change(struct thr *t)
{
	unsigned int i = (unsigned int)below(t, NBUF);
	char *p = t->buf[i];
	size_t len = t->buf_len[i];
	void *q;

	if (!p) {
		buf_make(t, i);
		return;
	}
	switch (below(t, 5)) {
	case 0:			/* unmap and map anew (maybe elsewhere) */
		note(t, "munmap buf%u %p+%zu", i, p, len);
		munmap(p, len);
		buf_make(t, i);
		break;
	case 1:			/* move it */
		q = mremap(p, len, len, MREMAP_MAYMOVE);
		note(t, "mremap buf%u %p -> %p", i, p, q);
		if (q != MAP_FAILED)
			t->buf[i] = q;
		break;
	case 2:
		note(t, "madvise DONTNEED buf%u", i);
		madvise(p, len, MADV_DONTNEED);
		break;
	case 3:
		note(t, "mprotect buf%u", i);
		mprotect(p, len, chance(t, 50) ? PROT_READ :
			 PROT_READ | PROT_WRITE);
		break;
	default:		/* grow in place if it can, up to 4 MiB */
		if (len >= 4 * MiB)
			break;
		q = mremap(p, len, len * 2, 0);
		note(t, "mremap grow buf%u: %p", i, q);
		if (q != MAP_FAILED)
			t->buf_len[i] = len * 2;
		break;
	}
}

/* ------------------------------------------------------------ keys */

static void keep_key(struct thr *t, uint64_t key)
{
	_Atomic uint64_t *pub = t->victim ? t->sh->victim_scratch_key :
					    t->sh->attacker_key;

	atomic_store(&pub[below(t, NKEEP)], key);
}

static uint64_t fuzz_key(struct thr *t)
{
	switch (below(t, 8)) {
	case 0: case 1: case 2:
		if (t->nreg)
			return t->reg[below(t, t->nreg)].key;
		return rnd(t);
	case 3:
		return t->nrevoked ? t->revoked[below(t, t->nrevoked)] : 0;
	case 4:			/* the other process's */
		return atomic_load(t->victim ?
			&t->sh->attacker_key[below(t, NKEEP)] :
			&t->sh->victim_scratch_key[below(t, NKEEP)]);
	case 5:			/* the victim's canaries: never granted */
		if (t->victim)	/* it could write its own */
			return rnd(t);
		return atomic_load(&t->sh->victim_key[below(t, NCANARY)]);
	case 6:
		return 0;
	default:
		return rnd(t);
	}
}

/* one of the victim's keys: it never grants, so none may be used */
static bool is_victims(struct thr *t, uint64_t key)
{
	unsigned int i;

	for (i = 0; key && i < NCANARY; i++)
		if (atomic_load(&t->sh->victim_key[i]) == key)
			return true;
	for (i = 0; key && i < NKEEP; i++)
		if (atomic_load(&t->sh->victim_scratch_key[i]) == key)
			return true;
	return false;
}

static uint32_t fuzz_region(struct thr *t)
{
	if (t->nreg && chance(t, 70))
		return t->reg[below(t, t->nreg)].id;
	return (uint32_t)fuzz_u64(t, 64);
}

static void drop_region(struct thr *t, unsigned int i)
{
	if (t->nrevoked < NKEEP)
		t->revoked[t->nrevoked++] = t->reg[i].key;
	else
		t->revoked[below(t, NKEEP)] = t->reg[i].key;
	t->reg[i] = t->reg[--t->nreg];
}

/* a new region of ours (the oldest goes when the list is full) */
static void add_region(struct thr *t, int fd, uint32_t id, uint64_t key,
		       uint64_t len, uint32_t access)
{
	if (t->nreg == NREG) {
		struct hcomm_dereg d = { .region = t->reg[0].id };

		ioctl(t->reg[0].fd, HCOMM_CMD_DEREG, &d);
		drop_region(t, 0);
	}
	t->reg[t->nreg++] = (struct region){ id, key, len, fd, access };
	keep_key(t, key);
}

/* -------------------------------------------------------- commands */

static int do_reg(struct thr *t, int fd)
{
	struct hcomm_reg_mem a = { 0 };
	uint64_t hint, room;
	int ret;

	a.addr = fuzz_addr(t, &hint);
	a.len = chance(t, 80) ? 1 + below(t, hint) : fuzz_u64(t, hint);
	a.access = chance(t, 85) ? (uint32_t)below(t, 8) : (uint32_t)rnd(t);
	/*
	 * A range that runs past its buffer into the next mapping (a
	 * library's data, say) is registered read-only: a writable one let
	 * this process's own transfers overwrite its loader's data (seed
	 * 1883886844068480: the victim died in ld.so), which is its right,
	 * not the module's fault, and ended the run.
	 */
	room = buf_room(t, a.addr);
	if (room && a.len > room)
		a.access &= ~(uint32_t)(HCOMM_ACCESS_LOCAL_WRITE |
					HCOMM_ACCESS_REMOTE_WRITE);
	a.flags = chance(t, 85) ? (uint32_t)below(t, 2) : (uint32_t)rnd(t);
	if (chance(t, 5))
		a.reserved = rnd(t);
	if (chance(t, 5))
		a.region = (uint32_t)rnd(t);
	note(t, "REG_MEM fd %d addr 0x%llx len %llu access 0x%x flags 0x%x",
	     fd, (unsigned long long)a.addr, (unsigned long long)a.len,
	     a.access, a.flags);
	ret = issue(t, fd, HCOMM_CMD_REG_MEM, &a, false);
	if (!ret)
		add_region(t, fd, a.region, a.key, a.len, a.access);
	return ret;
}

static int do_dmabuf(struct thr *t, int fd)
{
	struct hcomm_reg_dmabuf a = { 0 };
	int ret;

	switch (below(t, 5)) {
	case 0: case 1:
		a.fd = t->dmabuf;
		break;
	case 2:
		a.fd = fd;		/* /dev/hcomm itself */
		break;
	case 3:
		a.fd = (int)below(t, 64);
		break;
	default:
		a.fd = (int)rnd(t);
	}
	a.access = (uint32_t)below(t, 8);
	a.offset = chance(t, 70) ? below(t, 4) * PG : fuzz_u64(t, 1 * MiB);
	a.len = chance(t, 70) ? (1 + below(t, 16)) * PG : fuzz_u64(t, 1 * MiB);
	if (chance(t, 5))
		a.flags = (uint32_t)rnd(t);
	if (chance(t, 5))
		a.reserved[below(t, 2)] = rnd(t);
	note(t, "REG_DMABUF fd %d dmabuf %d off %llu len %llu", fd, a.fd,
	     (unsigned long long)a.offset, (unsigned long long)a.len);
	ret = issue(t, fd, HCOMM_CMD_REG_DMABUF, &a, false);
	if (!ret)
		add_region(t, fd, a.region, a.key, a.len, ~0u);
	return ret;
}

static int do_dereg(struct thr *t, int fd)
{
	struct hcomm_dereg a = { 0 };
	unsigned int i = 0;
	bool own = t->nreg && chance(t, 75);
	int ret;

	if (own) {
		i = (unsigned int)below(t, t->nreg);
		a.region = t->reg[i].id;
		fd = t->reg[i].fd;
	} else {
		a.region = fuzz_region(t);
	}
	if (chance(t, 4))
		a.flags = (uint32_t)rnd(t);
	if (chance(t, 4))
		a.reserved[1] = rnd(t);
	note(t, "DEREG fd %d region %u", fd, a.region);
	ret = issue(t, fd, HCOMM_CMD_DEREG, &a, false);
	if (own && (!ret || ret == -ENOENT))
		drop_region(t, i);
	return ret;
}

static int do_query(struct thr *t, int fd)
{
	static struct hcomm_extent ext[8];
	static const struct hcomm_extent ro[8];
	struct hcomm_query a = { 0 };
	unsigned int i;
	uint64_t hint;

	a.region = fuzz_region(t);
	switch (below(t, 5)) {
	case 0:
		a.extents = 0;
		break;
	case 1:
		a.extents = (uintptr_t)ro;	/* read-only: EFAULT */
		break;
	case 2:
		a.extents = fuzz_addr(t, &hint);
		break;
	default:
		a.extents = (uintptr_t)ext;
	}
	a.max_extents = chance(t, 80) ? (uint32_t)below(t, 9) :
					(uint32_t)rnd(t);
	if (a.extents == (uintptr_t)ext && a.max_extents > 8)
		a.max_extents = 8;
	/* inside one of our buffers: never past its end (our own memory) */
	for (i = 0; i < NBUF; i++) {
		uint64_t b = (uintptr_t)t->buf[i];

		if (t->buf[i] && a.extents >= b &&
		    a.extents < b + t->buf_len[i] &&
		    a.max_extents > (b + t->buf_len[i] - a.extents) /
				    sizeof(struct hcomm_extent))
			a.max_extents = (uint32_t)((b + t->buf_len[i] -
						    a.extents) /
						   sizeof(struct hcomm_extent));
	}
	a.first_extent = chance(t, 80) ? below(t, 4) : rnd(t);
	if (chance(t, 4))
		a.flags = (uint32_t)rnd(t);
	if (chance(t, 4))
		a.reserved = rnd(t);
	note(t, "QUERY fd %d region %u extents 0x%llx max %u first %llu", fd,
	     a.region, (unsigned long long)a.extents, a.max_extents,
	     (unsigned long long)a.first_extent);
	return issue(t, fd, HCOMM_CMD_QUERY, &a, false);
}

/*
 * A random transfer descriptor into *a; *canary: it names a key of the
 * victim (then only a missing grant can stop it, when it is well formed).
 */
static void fuzz_xfer_desc(struct thr *t, struct hcomm_xfer *a, bool *canary);

static int do_xfer(struct thr *t, int fd)
{
	struct hcomm_xfer a = { 0 };
	bool async = t->have_ring && chance(t, 35);
	bool canary;
	int ret;

	fuzz_xfer_desc(t, &a, &canary);
	note(t, "XFER fd %d src 0x%llx+%llu dst 0x%llx+%llu len %llu flags "
	     "0x%x db %u%s%s", fd, (unsigned long long)a.src_key,
	     (unsigned long long)a.src_off, (unsigned long long)a.dst_key,
	     (unsigned long long)a.dst_off, (unsigned long long)a.len,
	     a.flags, a.db_index, async && !canary ? " async" : "",
	     canary ? " (victim's key)" : "");
	/* the victim's keys: synchronous, so the outcome is known */
	ret = issue(t, fd, HCOMM_CMD_XFER, &a, async && !canary);
	if (canary) {
		t->vtries++;
		if (!ret)
			t->vok++;
		else if (t->vtries <= 8)
			t->verr[t->vtries - 1] = -ret;
	}
	if (canary && !ret && a.len)
		violation(t, "XFER with a key of the victim (never granted) "
			  "succeeded: src 0x%llx dst 0x%llx len %llu",
			  (unsigned long long)a.src_key,
			  (unsigned long long)a.dst_key,
			  (unsigned long long)a.len);
	return ret == 1 ? 0 : ret;
}

/*
 * XFER_BATCH of 1 .. 16 random descriptors, mostly small enough for the
 * inline path, sometimes with a victim's key; the batch's own fields
 * sometimes wrong.  A descriptor with a victim's key (never granted) must
 * fail: the batch must stop there (done at most its index).
 */
static int do_batch(struct thr *t, int fd)
{
	struct hcomm_xfer d[16];
	struct hcomm_xfer_batch b = { 0 };
	unsigned int n = 1 + (unsigned int)below(t, 16), i, vi = ~0u;
	bool canary;
	int ret;

	bool sane = t->nreg && chance(t, 50);
	struct hcomm_info in = { 0 };
	uint64_t lmax = 256;

	/* the context's inline threshold (SET_CTX moves it at random) */
	if (sane && !ioctl(fd, HCOMM_CMD_GET_INFO, &in) && in.max_inline < lmax)
		lmax = in.max_inline;
	memset(d, 0, sizeof(d));
	for (i = 0; i < n; i++) {
		fuzz_xfer_desc(t, &d[i], &canary);
		if (chance(t, 80))
			d[i].len = below(t, 512);
		if (chance(t, 90))
			d[i].tag = 0;
		if (chance(t, 60))
			d[i].flags &= ~HCOMM_XFER_NO_INLINE;
		if (sane && !canary && chance(t, 95)) {
			/*
			 * In bounds, between two host regions of this
			 * context, the second writable (a few tries).
			 */
			struct region *a = &t->reg[below(t, t->nreg)];
			struct region *b = &t->reg[below(t, t->nreg)];
			unsigned int k;
			uint64_t l;

			for (k = 0; k < 8 && (a->fd != fd || a->access == ~0u); k++)
				a = &t->reg[below(t, t->nreg)];
			for (k = 0; k < 8 && (b->fd != fd || b->access == ~0u ||
					      !(b->access & HCOMM_ACCESS_LOCAL_WRITE)); k++)
				b = &t->reg[below(t, t->nreg)];
			l = a->len < b->len ? a->len : b->len;

			l = below(t, (l < lmax ? l : lmax) + 1);
			memset(&d[i], 0, sizeof(d[i]));
			d[i].src_key = a->key;
			d[i].dst_key = b->key;
			d[i].len = l;
			d[i].src_off = below(t, a->len - l + 1);
			d[i].dst_off = below(t, b->len - l + 1);
			if (chance(t, 20)) {
				d[i].flags = HCOMM_XFER_DB_ADD;
				d[i].db_index = (uint32_t)below(t, 8);
				d[i].db_value = 1;
			}
		}
		if (canary && d[i].len && vi == ~0u)
			vi = i;
	}
	b.descs = (uintptr_t)d;
	b.count = n;
	if (chance(t, 3))
		b.descs = chance(t, 50) ? b.descs + 1 + below(t, 7) : rnd(t);
	if (chance(t, 3))
		b.count = chance(t, 50) ? 0 : (uint32_t)rnd(t);
	if (chance(t, 3))
		b.flags = (uint32_t)rnd(t);
	if (chance(t, 3))
		b.reserved[below(t, 2)] = rnd(t);
	b.done = ~0u;
	note(t, "XFER_BATCH fd %d of %u%s descriptors at 0x%llx, count %u%s",
	     fd, n, sane ? " mostly well-formed" : "",
	     (unsigned long long)b.descs, b.count,
	     vi != ~0u ? " (a victim's key)" : "");
	if (vi != ~0u && b.descs == (uintptr_t)d && b.count == n) {
		/* by ioctl: done says how far it went */
		ret = ioctl(fd, HCOMM_CMD_XFER_BATCH, &b) < 0 ? -errno : 0;
		t->vtries++;
		if (!ret || (b.done != ~0u && b.done > vi)) {
			t->vok++;
			violation(t, "XFER_BATCH passed descriptor %u with a "
				  "key of the victim (never granted): %d, "
				  "done %u", vi, ret, b.done);
		} else if (t->vtries <= 8) {
			t->verr[t->vtries - 1] = -ret;
		}
		return ret;
	}
	return issue(t, fd, HCOMM_CMD_XFER_BATCH, &b, false);
}

static void fuzz_xfer_desc(struct thr *t, struct hcomm_xfer *p, bool *canary)
{
	struct hcomm_xfer a = { 0 };

	a.src_key = fuzz_key(t);
	a.dst_key = fuzz_key(t);
	a.src_off = chance(t, 80) ? below(t, 64 * KiB) : fuzz_u64(t, MiB);
	a.dst_off = chance(t, 80) ? below(t, 64 * KiB) : fuzz_u64(t, MiB);
	a.len = chance(t, 85) ? below(t, 128 * KiB) : fuzz_u64(t, MiB);
	a.tag = below(t, 4);
	a.flags = chance(t, 85) ? (uint32_t)below(t, 16) : (uint32_t)rnd(t);
	a.db_index = chance(t, 85) ? (uint32_t)below(t, 8) : (uint32_t)rnd(t);
	a.db_value = below(t, 4);
	if (chance(t, 4))
		a.reserved0 = (uint32_t)rnd(t);
	if (chance(t, 4))
		a.reserved[below(t, 2)] = rnd(t);
	if (chance(t, 4))
		a.done = rnd(t);
	*canary = !t->victim && (is_victims(t, a.src_key) ||
				 is_victims(t, a.dst_key));
	if (!t->victim && t->nreg && chance(t, 10)) {
		/*
		 * A well-formed transfer between a key of the victim (a
		 * canary, or live, revoked or not) and one of our live
		 * regions, in bounds: only the missing grant can stop it.
		 */
		struct region *r = &t->reg[below(t, t->nreg)];
		uint64_t vk = atomic_load(chance(t, 50) ?
			&t->sh->victim_key[below(t, NCANARY)] :
			&t->sh->victim_scratch_key[below(t, NKEEP)]);

		*canary = vk != 0;
		a.len = 1 + below(t, r->len < 4096 ? r->len : 4096);
		a.src_off = a.dst_off = 0;
		a.flags &= HCOMM_XFER_NO_INLINE;
		a.db_index = 0;
		a.db_value = 0;
		a.done = 0;
		a.reserved0 = 0;
		a.reserved[0] = a.reserved[1] = 0;
		if (chance(t, 50)) {
			a.src_key = vk;
			a.dst_key = r->key;
		} else {
			a.src_key = r->key;
			a.dst_key = vk;
		}
	}
	*p = a;
}

static int do_cancel(struct thr *t, int fd)
{
	struct hcomm_cancel a = { .tag = below(t, 4) };

	a.flags = chance(t, 90) ? (uint32_t)below(t, 2) : (uint32_t)rnd(t);
	if (chance(t, 4))
		a.reserved[0] = rnd(t);
	note(t, "CANCEL fd %d tag %llu flags 0x%x", fd,
	     (unsigned long long)a.tag, a.flags);
	return issue(t, fd, HCOMM_CMD_CANCEL, &a, false);
}

static int do_fence(struct thr *t, int fd)
{
	struct hcomm_fence a = { .tag = below(t, 4) };
	bool async = t->have_ring && chance(t, 60);

	if (chance(t, 5))
		a.flags = (uint32_t)rnd(t);
	if (chance(t, 5))
		a.reserved0 = (uint32_t)rnd(t);
	int ret;

	note(t, "FENCE fd %d%s", fd, async ? " async" : "");
	ret = issue(t, fd, HCOMM_CMD_FENCE, &a, async);
	return ret == 1 ? 0 : ret;
}

/* DB_WAIT_ANY of 0 .. 5 doorbells, entries past count sometimes set. */
static int do_wait_any(struct thr *t, int fd, bool async)
{
	struct hcomm_db_wait_any a = { 0 };
	unsigned int i;
	int ret;

	a.count = chance(t, 90) ? (uint32_t)below(t, HCOMM_DB_WAIT_ANY_MAX + 2) :
				  (uint32_t)rnd(t);
	for (i = 0; i < HCOMM_DB_WAIT_ANY_MAX; i++) {
		if (i >= a.count && !chance(t, 5))
			continue;
		a.index[i] = chance(t, 90) ? (uint32_t)below(t, 8) :
					     (uint32_t)rnd(t);
		a.value[i] = below(t, 3) ? below(t, 4) : rnd(t);
	}
	a.tag = below(t, 4);
	a.timeout_ns = 1 + below(t, async ? 50000000 : 2000000);
	if (chance(t, 4))
		a.flags = (uint32_t)rnd(t);
	if (chance(t, 4))
		a.reserved[1] = rnd(t);
	if (chance(t, 4))
		a.reserved0 = (uint32_t)rnd(t);
	note(t, "DB_WAIT_ANY fd %d count %u index %u,%u,%u,%u timeout %llu%s",
	     fd, a.count, a.index[0], a.index[1], a.index[2], a.index[3],
	     (unsigned long long)a.timeout_ns, async ? " async" : "");
	ret = issue(t, fd, HCOMM_CMD_DB_WAIT_ANY, &a, async);
	return ret == 1 ? 0 : ret;
}

static int do_wait(struct thr *t, int fd)
{
	struct hcomm_db_wait a = { 0 };
	bool async = t->have_ring && chance(t, 50);
	int ret;

	if (chance(t, 40))
		return do_wait_any(t, fd, async);

	a.index = chance(t, 85) ? (uint32_t)below(t, 8) : (uint32_t)rnd(t);
	a.value = below(t, 3) ? below(t, 4) : rnd(t);
	a.tag = below(t, 4);
	/* at most 2 ms, or 50 ms on a ring (forever: do_life's teardown) */
	a.timeout_ns = 1 + below(t, async ? 50000000 : 2000000);
	if (chance(t, 4))
		a.flags = (uint32_t)rnd(t);
	if (chance(t, 4))
		a.reserved[0] = rnd(t);
	note(t, "DB_WAIT fd %d index %u value %llu timeout %llu%s", fd,
	     a.index, (unsigned long long)a.value,
	     (unsigned long long)a.timeout_ns, async ? " async" : "");
	ret = issue(t, fd, HCOMM_CMD_DB_WAIT, &a, async);
	return ret == 1 ? 0 : ret;
}

static int do_grant(struct thr *t, int fd)
{
	struct hcomm_grant a = { 0 };

	a.region = fuzz_region(t);
	a.scope = chance(t, 85) ? (uint32_t)below(t, 4) : (uint32_t)rnd(t);
	a.access = chance(t, 85) ? (uint32_t)below(t, 8) : (uint32_t)rnd(t);
	a.uid = chance(t, 50) ? 0 : (uint32_t)below(t, 70000);
	if (chance(t, 4))
		a.flags = (uint32_t)rnd(t);
	if (chance(t, 4))
		a.reserved[1] = rnd(t);
	if (t->nreg && chance(t, 50)) {	/* well-formed, on a live region */
		struct region *r = &t->reg[below(t, t->nreg)];

		fd = r->fd;
		a.region = r->id;
		a.scope = (uint32_t)below(t, 4);
		a.access = a.scope == HCOMM_GRANT_NONE ? 0 :
			   (uint32_t)(below(t, 3) + 1) << 1;
		a.uid = a.scope == HCOMM_GRANT_UID ? (uint32_t)below(t, 2) : 0;
		a.flags = 0;
		a.reserved[0] = a.reserved[1] = 0;
	}
	if (t->victim)		/* the victim only ever revokes */
		a.scope = HCOMM_GRANT_NONE, a.access = 0, a.uid = 0;
	note(t, "GRANT fd %d region %u scope %u access 0x%x uid %u", fd,
	     a.region, a.scope, a.access, a.uid);
	return issue(t, fd, HCOMM_CMD_GRANT, &a, false);
}

static int do_qos(struct thr *t, int fd)
{
	struct hcomm_qos a = { 0 };

	a.min_rate = chance(t, 80) ? (uint32_t)below(t, 40) : (uint32_t)rnd(t);
	a.max_rate = chance(t, 80) ? (uint32_t)below(t, 102) :
				     (uint32_t)rnd(t);
	a.priority = chance(t, 80) ? (uint32_t)below(t, 9) : (uint32_t)rnd(t);
	if (chance(t, 4))
		a.flags = (uint32_t)rnd(t);
	note(t, "SET_QOS fd %d %u/%u/%u", fd, a.min_rate, a.max_rate,
	     a.priority);
	return issue(t, fd, HCOMM_CMD_SET_QOS, &a, false);
}

static int do_ctx(struct thr *t, int fd)
{
	struct hcomm_ctx_opts a = { 0 };

	a.mask = chance(t, 85) ? (uint32_t)below(t, 4) : (uint32_t)rnd(t);
	a.max_inline = (uint32_t)fuzz_u64(t, 64 * KiB);
	a.cache_limit = fuzz_u64(t, 16 * MiB);
	if (chance(t, 4))
		a.reserved[0] = rnd(t);
	note(t, "SET_CTX fd %d mask 0x%x inline %u cache %llu", fd, a.mask,
	     a.max_inline, (unsigned long long)a.cache_limit);
	return issue(t, fd, HCOMM_CMD_SET_CTX, &a, false);
}

static int do_info(struct thr *t, int fd)
{
	struct hcomm_info a = { 0 };

	if (chance(t, 10))
		a.flags = (uint32_t)rnd(t);
	if (chance(t, 10))
		a.reserved0 = (uint32_t)rnd(t);
	note(t, "GET_INFO fd %d", fd);
	return issue(t, fd, HCOMM_CMD_GET_INFO, &a, false);
}

static int do_mmap(struct thr *t, int fd)
{
	static const off_t offs[] = { 0, 4096, 8192, 1 << 20, -4096 };
	size_t len = chance(t, 80) ? (1 + below(t, 2)) * PG :
				     (size_t)fuzz_u64(t, 64 * KiB);
	off_t off = chance(t, 80) ? HCOMM_MMAP_DOORBELLS :
				    offs[below(t, ARRAY_SIZE(offs))];
	int prot = (int)below(t, 8), flags = chance(t, 85) ? MAP_SHARED :
							     MAP_PRIVATE;
	volatile uint64_t *p;

	note(t, "mmap fd %d len %zu off 0x%llx prot %d flags %d", fd, len,
	     (unsigned long long)off, prot, flags);
	p = mmap(NULL, len, prot, flags, fd, off);
	if (p == MAP_FAILED)
		return -errno;
	if ((prot & PROT_WRITE) && (prot & PROT_READ) && len >= 8)
		p[0] = p[0] + 1;	/* a userspace doorbell store */
	if (chance(t, 20))
		madvise((void *)p, len, MADV_DONTFORK);
	munmap((void *)p, len);
	return 0;
}

/* wrong sizes, numbers, magic; io_uring payloads with bad size or flags */
static int do_badcmd(struct thr *t, int fd)
{
	char arg[256] = { 0 };
	unsigned int nr = (unsigned int)below(t, 16), size, cmd;

	size = chance(t, 50) ? (unsigned int)below(t, 200) :
			       (unsigned int)(8 * below(t, 16));
	switch (below(t, 4)) {
	case 0:
		cmd = _IOC(_IOC_READ | _IOC_WRITE, HCOMM_IOC_MAGIC, nr, size);
		break;
	case 1:
		cmd = _IOC((unsigned int)below(t, 4), HCOMM_IOC_MAGIC, nr,
			   size);
		break;
	case 2:
		cmd = _IOWR(0x42, nr, struct hcomm_xfer);
		break;
	default:
		cmd = (uint32_t)rnd(t);
	}
	if (chance(t, 30))
		memset(arg, (int)rnd(t), sizeof(arg));
	note(t, "bad cmd 0x%x on fd %d", cmd, fd);
	if (t->have_ring && chance(t, 50)) {
		uint64_t addr = chance(t, 80) ? (uintptr_t)arg : rnd(t);

		return ring_cmd(t, fd, cmd, (void *)(uintptr_t)addr,
				chance(t, 70) ? _IOC_SIZE(cmd) :
						(uint32_t)rnd(t),
				chance(t, 80) ? 0 : (uint32_t)rnd(t), false);
	}
	return ioctl(fd, cmd, arg) < 0 ? -errno : 0;
}

/* fork (EPERM in the child), reopen a context, recreate the ring */
static int do_life(struct thr *t, int fd)
{
	struct hcomm_info info = { 0 };
	pid_t pid;
	int st;

	switch (below(t, 3)) {
	case 0:
		note(t, "fork; the child issues GET_INFO on fd %d", fd);
		pid = fork();
		if (pid < 0)
			return -errno;
		if (!pid) {
			int r = ioctl(fd, HCOMM_CMD_GET_INFO, &info);

			/* a closed number is EBADF, a reused one ENOTTY */
			_exit(r < 0 && (errno == EPERM || errno == EBADF ||
					errno == ENOTTY) ? 0 : 1);
		}
		if (waitpid(pid, &st, 0) == pid &&
		    (!WIFEXITED(st) || WEXITSTATUS(st)))
			violation(t, "a fork() child's GET_INFO on its parent's "
				  "context did not fail with EPERM");
		return 0;
	case 1: {
		/*
		 * A new context at the same number (dup2 swaps it in at
		 * once), so that no thread's fd number ever names another
		 * kind of file: the old context closes under the others.
		 */
		int nfd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC), r;
		unsigned int k;

		if (nfd < 0)
			return -errno;
		note(t, "reopen the context at fd %d", fd);
		r = dup3(nfd, fd, O_CLOEXEC) < 0 ? -errno : 0;
		close(nfd);
		/* this thread's regions on it are gone with it */
		for (k = 0; !r && k < t->nreg; )
			if (t->reg[k].fd == fd)
				drop_region(t, k);
			else
				k++;
		return r;
	}
	default:
		/* a wait that never times out, parked, then the teardown */
		if (t->have_ring) {
			struct hcomm_db_wait w = { .index = 0, .value = ~0ULL,
						   .timeout_ns = 0 };

			ring_cmd(t, fd, HCOMM_CMD_DB_WAIT, &w, sizeof(w), 0,
				 true);
		}
		note(t, "ring torn down with %u in flight", t->inflight);
		ring_close(t);
		ring_open(t);
		return 0;
	}
}

static int run_one(struct thr *t, unsigned int c)
{
	int fd = pick_fd(t);

	switch (c) {
	case C_INFO: return do_info(t, fd);
	case C_REG: return do_reg(t, fd);
	case C_DMABUF: return do_dmabuf(t, fd);
	case C_DEREG: return do_dereg(t, fd);
	case C_QUERY: return do_query(t, fd);
	case C_XFER: return do_xfer(t, fd);
	case C_CANCEL: return do_cancel(t, fd);
	case C_FENCE: return do_fence(t, fd);
	case C_WAIT: return do_wait(t, fd);
	case C_GRANT: return do_grant(t, fd);
	case C_QOS: return do_qos(t, fd);
	case C_CTX: return do_ctx(t, fd);
	case C_MMAP: return do_mmap(t, fd);
	case C_BADCMD: return do_badcmd(t, fd);
	case C_MAPCHG: map_change(t); return 0;
	case C_BATCH: return do_batch(t, fd);
	default: return do_life(t, fd);
	}
}

static unsigned int pick_cmd(struct thr *t)
{
	unsigned int sum = 0, c;
	uint64_t x;

	for (c = 0; c < NCMD; c++)
		sum += cmd_weight[c];
	x = below(t, sum);
	for (c = 0; c < NCMD; c++) {
		if (x < cmd_weight[c])
			return c;
		x -= cmd_weight[c];
	}
	return 0;
}

static void fuzz_loop(struct thr *t, uint64_t n)
{
	uint64_t i;
	unsigned int b;

	for (b = 0; b < NBUF; b++)
		buf_make(t, b);
	ring_open(t);
	for (i = 0; i < n && !atomic_load(&t->sh->stop); i++) {
		unsigned int c = pick_cmd(t);
		int ret = run_one(t, c);

		t->count[c]++;
		if (!ret)
			t->ok[c]++;
		else
			t->err[c]++;
		if (ret < 0 && !errno_ok(-ret))
			violation(t, "%s ended with %d (%s): %s", cmd_name[c],
				  ret, strerror(-ret),
				  t->last[(t->nlast - 1) % NLAST]);
		if (t->have_ring && !(i % 8))
			ring_reap(t, false);
		/* progress, from one thread: long runs (make fuzz) show it */
		if (!t->victim && !t->id && n >= 100000 && !((i + 1) % (n / 10)))
			fprintf(stderr, "# fuzz: thread 0 at %llu of %llu "
				"commands\n", (unsigned long long)(i + 1),
				(unsigned long long)n);
	}
	ring_reap(t, true);
	ring_close(t);
	for (b = 0; b < NBUF; b++)
		if (t->buf[b])
			munmap(t->buf[b], t->buf_len[b]);
}

static void *thread_main(void *arg)
{
	struct thr *t = arg;

	fuzz_loop(t, t->ops);
	return NULL;
}

/* the first violation and the commands before it, the last one first */
static void print_last(struct thr *t)
{
	unsigned int k, n = t->nlastv < NLAST ? t->nlastv : NLAST;

	fprintf(stderr, "# %s thread %u: %llu violations; the first: %s\n",
		t->victim ? "victim" : "attacker", t->id,
		(unsigned long long)t->nviol, t->why);
	for (k = 0; k < n; k++)
		fprintf(stderr, "#   command -%u: %s\n", k,
			t->lastv[(t->nlastv - 1 - k) % NLAST]);
}

/* ---------------------------------------------------------- victim */

static int send_fd(int sock, int fd)
{
	char c = 'f', cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &m, 0) == 1 ? 0 : -errno;
}

static int recv_fd(int sock)
{
	char c, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	int fd;

	if (recvmsg(sock, &m, 0) != 1)
		return -1;
	cm = CMSG_FIRSTHDR(&m);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/*
 * @len bytes of anonymous memory between two PROT_NONE pages.  The
 * victim's own fuzzing registers ranges that start in its buffers and may
 * run past their end into whatever the kernel mapped next: a canary right
 * after a buffer would be registered, and written, by its own process (as
 * seen once on 6.1, whose layout put them side by side).  A range that
 * reaches a canary from outside now crosses a guard page: EFAULT.
 */
static void *map_guarded(size_t len)
{
	char *p = mmap(NULL, len + 2 * PG, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	if (mprotect(p + PG, len, PROT_READ | PROT_WRITE)) {
		munmap(p, len + 2 * PG);
		return NULL;
	}
	return p + PG;
}

/*
 * The victim: canary regions it never grants, published keys, its fd
 * sent to the attacker; then it fuzzes too (never granting), and at the
 * end checks its canaries.  Exit 0, or 1 with the reason on stderr.
 */
static int victim_main(struct shared *sh, int sock, uint64_t seed,
		       uint64_t ops)
{
	struct thr *t = calloc(1, sizeof(*t));
	int fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	int ffd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	unsigned char *canary[NCANARY];
	unsigned int i;
	uint64_t n;
	size_t k;

	if (!t || fd < 0 || ffd < 0)
		return 1;
	for (i = 0; i < NCANARY; i++) {
		struct hcomm_reg_mem a = { 0 };

		canary[i] = map_guarded(CANARY_LEN);
		if (!canary[i])
			return 1;
		memset(canary[i], (int)(0xa0 + i), CANARY_LEN);
		a.addr = (uintptr_t)canary[i];
		a.len = CANARY_LEN;
		a.access = HCOMM_ACCESS_ALL;
		if (ioctl(fd, HCOMM_CMD_REG_MEM, &a))
			return 1;
		atomic_store(&sh->victim_key[i], a.key);
		if (env_u64("HCOMM_FUZZ_BREAK", 0)) {
			/* checking the checks: the canaries open to anyone */
			struct hcomm_grant g = { .region = a.region,
				.scope = HCOMM_GRANT_ANY,
				.access = HCOMM_ACCESS_REMOTE_READ |
					  HCOMM_ACCESS_REMOTE_WRITE };

			if (ioctl(fd, HCOMM_CMD_GRANT, &g))
				return 1;
		}
	}
	if (send_fd(sock, fd))
		return 1;
	atomic_store(&sh->victim_ready, 1);
	t->victim = true;
	t->rng = seed ^ 0x5eed5eed5eedULL;
	t->sh = sh;
	t->fds = &ffd;		/* the canaries' context is not fuzzed */
	t->nfds = 1;
	t->dmabuf = udmabuf_create(64 * KiB);
	fuzz_loop(t, ops);
	for (i = 0; i < NCANARY; i++)
		for (k = 0; k < CANARY_LEN; k++)
			if (canary[i][k] != (unsigned char)(0xa0 + i)) {
				fprintf(stderr, "# victim: canary %u byte %zu "
					"is 0x%02x, not 0x%02x: written without "
					"a grant\n", i, k, canary[i][k],
					0xa0 + i);
				return 1;
			}
	if (t->nviol) {
		print_last(t);
		return 1;
	}
	for (i = 0, n = 0; i < NCMD; i++)
		n += t->count[i];
	fprintf(stderr, "# victim: %llu commands, canaries intact\n",
		(unsigned long long)n);
	close(ffd);
	close(fd);
	return 0;
}


TEST(fuzz)
{
	uint64_t seed, ops = env_u64("HCOMM_FUZZ_OPS", 20000);
	unsigned int nt = (unsigned int)env_u64("HCOMM_FUZZ_THREADS", 4);
	struct hcomm_stats before, now;
	struct hcomm_info info = { 0 };
	struct shared *sh;
	struct thr *t;
	pthread_t th[MAXT];
	int fds[4], sv[2], vfd, dmabuf, i, vst;
	uint64_t tot[NCMD] = { 0 }, okc[NCMD] = { 0 }, viol = 0;
	uint64_t vtries = 0, vok = 0;
	pid_t victim;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	seed = env_u64("HCOMM_FUZZ_SEED", (uint64_t)ts.tv_nsec ^
					  ((uint64_t)ts.tv_sec << 20));
	if (nt < 1)
		nt = 1;
	if (nt > MAXT)
		nt = MAXT;
	TH_LOG("seed %llu, %llu commands, %u attacker threads + a victim "
	       "process (HCOMM_FUZZ_SEED=%llu reproduces each thread's "
	       "commands)", (unsigned long long)seed, (unsigned long long)ops,
	       nt, (unsigned long long)seed);
	ASSERT_EQ(0, hcomm_stats_read(&before));

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sh);
	memset(sh, 0, sizeof(*sh));
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
	victim = fork();
	ASSERT_LE(0, victim);
	if (!victim) {
		close(sv[0]);
		_exit(victim_main(sh, sv[1], seed, ops / (nt + 1)));
	}
	close(sv[1]);
	vfd = recv_fd(sv[0]);
	ASSERT_LE(0, vfd) TH_LOG("the victim did not send its fd");
	/* a context received over SCM_RIGHTS is not ours */
	EXPECT_EQ(-1, ioctl(vfd, HCOMM_CMD_GET_INFO, &info));
	EXPECT_EQ(EPERM, errno);
	close(vfd);

	for (i = 0; i < 4; i++) {
		fds[i] = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, fds[i]);
	}
	dmabuf = udmabuf_create(64 * KiB);
	t = calloc(nt, sizeof(*t));
	ASSERT_NE(NULL, t);
	for (i = 0; i < (int)nt; i++) {
		t[i].id = (unsigned int)i;
		t[i].rng = seed + (uint64_t)i;
		t[i].ops = ops / (nt + 1);
		t[i].sh = sh;
		t[i].fds = fds;
		t[i].nfds = 4;
		t[i].dmabuf = dmabuf;
		ASSERT_EQ(0, pthread_create(&th[i], NULL, thread_main, &t[i]));
	}
	for (i = 0; i < (int)nt; i++)
		pthread_join(th[i], NULL);
	atomic_store(&sh->stop, 1);
	vst = wait_child(victim);

	for (i = 0; i < (int)nt; i++) {
		unsigned int c;

		for (c = 0; c < NCMD; c++) {
			tot[c] += t[i].count[c];
			okc[c] += t[i].ok[c];
		}
		if (t[i].nviol)
			print_last(&t[i]);
		viol += t[i].nviol;
		vtries += t[i].vtries;
		vok += t[i].vok;
	}
	for (i = 0; i < NCMD; i++)
		TH_LOG("%-12s %8llu issued, %8llu succeeded", cmd_name[i],
		       (unsigned long long)tot[i], (unsigned long long)okc[i]);
	TH_LOG("transfers naming a key of the victim (never granted): %llu, "
	       "%llu succeeded (first errnos %d %d %d %d)",
	       (unsigned long long)vtries, (unsigned long long)vok,
	       t[0].verr[0], t[0].verr[1], t[0].verr[2], t[0].verr[3]);
	for (i = 0; i < 4; i++)
		close(__atomic_load_n(&fds[i], __ATOMIC_SEQ_CST));
	if (dmabuf >= 0)
		close(dmabuf);
	EXPECT_EQ(0, vst) TH_LOG("the victim failed (its canaries, or a "
				 "violation in its own commands)");
	EXPECT_EQ(0, viol) TH_LOG("%llu violations in the attacker "
				  "(seed %llu)", (unsigned long long)viol,
				  (unsigned long long)seed);
	EXPECT_EQ(0, hcomm_gauges_wait(&before, &now, 10000))
		hcomm_gauges_dump(stderr, "after the fuzz", &before, &now);
	free(t);
	munmap(sh, sizeof(*sh));
}

/* ------------------------------------------------------ kill -9 */

/*
 * A process that registers, transfers (inline and on the engine, through
 * ioctl and io_uring), signals and waits in a loop until it is killed.
 * With a shared key (peer != 0) it transfers from and into that region
 * too; key_out (when not NULL) receives the key of a region it granted
 * to anyone.  Exits 1 when a command ends with an errno outside the
 * documented set, 2 when setup fails.
 */
static int busy_main(uint64_t seed, _Atomic uint64_t *key_out,
		     _Atomic uint64_t *peer)
{
	struct thr t = { .rng = seed };
	const size_t len = 256 * KiB;
	char *a = map_anon(len), *b = map_anon(len);
	int fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	struct hcomm_reg_mem ra = { 0 }, rb = { 0 };
	struct io_uring ring;
	bool have_ring = !io_uring_queue_init(16, &ring, 0);
	unsigned int inflight = 0;

	if (!a || !b || fd < 0)
		return 2;
	memset(a, 0x5a, len);
	ra.addr = (uintptr_t)a;
	ra.len = len;
	ra.access = HCOMM_ACCESS_ALL;
	if (ioctl(fd, HCOMM_CMD_REG_MEM, &ra))
		return 2;
	if (key_out) {
		struct hcomm_grant g = { .region = ra.region,
					 .scope = HCOMM_GRANT_ANY,
					 .access = HCOMM_ACCESS_REMOTE_READ |
						   HCOMM_ACCESS_REMOTE_WRITE };

		if (ioctl(fd, HCOMM_CMD_GRANT, &g))
			return 2;
		atomic_store(key_out, ra.key);
	}
	for (;;) {
		struct hcomm_xfer x = { 0 };
		struct hcomm_db_wait w = { 0 };
		struct hcomm_dereg d = { 0 };
		uint64_t other = peer ? atomic_load(peer) : 0;
		int ret = 0;

		switch (below(&t, 5)) {
		case 0:		/* register, maybe deregister */
			memset(&rb, 0, sizeof(rb));
			rb.addr = (uintptr_t)b + below(&t, len / 2);
			rb.len = 1 + below(&t, len / 2);
			rb.access = HCOMM_ACCESS_LOCAL_WRITE;
			rb.flags = (uint32_t)below(&t, 2);
			ret = ioctl(fd, HCOMM_CMD_REG_MEM, &rb) ? -errno : 0;
			if (!ret && chance(&t, 50)) {
				d.region = rb.region;
				ret = ioctl(fd, HCOMM_CMD_DEREG, &d) ? -errno : 0;
			}
			break;
		case 1: case 2:	/* a transfer, maybe with the peer */
			x.src_key = ra.key;
			x.dst_key = ra.key;
			if (other && chance(&t, 60)) {
				if (chance(&t, 50))
					x.src_key = other;
				else
					x.dst_key = other;
			}
			x.src_off = below(&t, len / 2);
			x.dst_off = below(&t, len / 2);
			x.len = below(&t, len / 2);
			x.flags = HCOMM_XFER_DB_ADD |
				  (chance(&t, 50) ? HCOMM_XFER_NO_INLINE : 0);
			x.db_index = (uint32_t)below(&t, 4);
			x.db_value = 1;
			if (have_ring && chance(&t, 50)) {
				struct io_uring_sqe *sqe;
				struct io_uring_cqe *cqe;

				while (inflight &&
				       !io_uring_peek_cqe(&ring, &cqe)) {
					if (cqe->res < 0 && !errno_ok(-cqe->res))
						return 1;
					io_uring_cqe_seen(&ring, cqe);
					inflight--;
				}
				sqe = io_uring_get_sqe(&ring);
				if (!sqe)
					break;
				hc_sqe_cmd(&ring, sqe, fd, HCOMM_CMD_XFER,
					   (uintptr_t)&x, sizeof(x), 0);
				/* the argument is read at submission */
				if (io_uring_submit(&ring) == 1)
					inflight++;
			} else {
				ret = ioctl(fd, HCOMM_CMD_XFER, &x) ? -errno : 0;
			}
			break;
		case 3:		/* a short wait */
			w.index = (uint32_t)below(&t, 4);
			w.value = below(&t, 1000);
			w.timeout_ns = 1 + below(&t, 1000000);
			ret = ioctl(fd, HCOMM_CMD_DB_WAIT, &w) ? -errno : 0;
			break;
		default:	/* wait for everything in flight */
			if (have_ring && inflight >= 8) {
				struct io_uring_cqe *cqe;

				while (inflight &&
				       !io_uring_wait_cqe(&ring, &cqe)) {
					if (cqe->res < 0 && !errno_ok(-cqe->res))
						return 1;
					io_uring_cqe_seen(&ring, cqe);
					inflight--;
				}
			}
			break;
		}
		if (ret < 0 && !errno_ok(-ret)) {
			fprintf(stderr, "# busy %d: errno %d (%s)\n", getpid(),
				-ret, strerror(-ret));
			return 1;
		}
	}
}

/*
 * kill -9 at random points: 100 times, a process registering,
 * transferring and waiting is killed after 0 to 30 ms; the gauges must
 * come back each time (exit of a context with everything in flight).
 */
TEST(kill_at_random_points)
{
	uint64_t seed = env_u64("HCOMM_FUZZ_SEED", 1);
	struct thr r = { .rng = seed };
	struct hcomm_stats before, now;
	unsigned int i, early = 0;

	ASSERT_EQ(0, hcomm_stats_read(&before));
	for (i = 0; i < 100; i++) {
		pid_t pid = fork();
		int st;

		ASSERT_LE(0, pid);
		if (!pid)
			_exit(busy_main(seed + i, NULL, NULL));
		hc_sleep_ms((unsigned int)below(&r, 31));
		kill(pid, SIGKILL);
		ASSERT_EQ(pid, waitpid(pid, &st, 0));
		/* it must not have ended on its own (an error) */
		if (!WIFSIGNALED(st)) {
			early++;
			TH_LOG("iteration %u: exit status %d before the kill",
			       i, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		}
		ASSERT_EQ(0, hcomm_gauges_wait(&before, &now, 10000))
			hcomm_gauges_dump(stderr, "after a kill", &before, &now);
	}
	EXPECT_EQ(0, early);
}

/*
 * The same with two processes sharing a region: the owner grants it to
 * anyone and both transfer through it; one of them (owner or peer, in
 * turn) is killed at a random point, the other 0 to 20 ms later.  The
 * survivor's commands in between end with a documented errno (never a
 * hang: both are killed in the end), and the gauges come back.
 */
TEST(kill_owner_or_peer)
{
	uint64_t seed = env_u64("HCOMM_FUZZ_SEED", 1);
	struct thr r = { .rng = seed ^ 0xabcdef };
	struct hcomm_stats before, now;
	_Atomic uint64_t *key;
	unsigned int i, early = 0;

	key = mmap(NULL, PG, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, key);
	ASSERT_EQ(0, hcomm_stats_read(&before));
	for (i = 0; i < 100; i++) {
		pid_t owner, peer, first, second;
		int st;

		atomic_store(key, 0);
		owner = fork();
		ASSERT_LE(0, owner);
		if (!owner)
			_exit(busy_main(seed + 2 * i, key, NULL));
		peer = fork();
		ASSERT_LE(0, peer);
		if (!peer)
			_exit(busy_main(seed + 2 * i + 1, NULL, key));
		hc_sleep_ms(5 + (unsigned int)below(&r, 26));
		first = i % 2 ? peer : owner;
		second = i % 2 ? owner : peer;
		kill(first, SIGKILL);
		ASSERT_EQ(first, waitpid(first, &st, 0));
		early += !WIFSIGNALED(st);
		hc_sleep_ms((unsigned int)below(&r, 21));
		kill(second, SIGKILL);
		ASSERT_EQ(second, waitpid(second, &st, 0));
		early += !WIFSIGNALED(st);
		ASSERT_EQ(0, hcomm_gauges_wait(&before, &now, 10000))
			hcomm_gauges_dump(stderr, "after the kills", &before,
					  &now);
	}
	EXPECT_EQ(0, early) TH_LOG("processes that ended before their kill "
				   "(an unexpected errno, or setup)");
	munmap((void *)key, PG);
}

/* ----------------------------------------------------------- load */

#define LOAD_CTX	64
#define LOAD_DEPTH	16
#define LOAD_THREADS	4

struct load_thr {
	unsigned int first;		/* its contexts: first .. first + 15 */
	volatile int *stop;
	uint64_t seed, done, failed, regs, waits;
	int bad;			/* an errno outside the set */
};

static long meminfo_kb(const char *key)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)) &&
		    line[strlen(key)] == ':')
			v = strtol(line + strlen(key) + 1, NULL, 10);
	fclose(f);
	return v;
}

/*
 * 16 contexts, each with its own ring holding LOAD_DEPTH engine transfers
 * in flight (re-submitted as they complete), plus registrations and
 * waits between, until *stop.
 */
static void *load_main(void *arg)
{
	struct load_thr *lt = arg;
	const unsigned int n = LOAD_CTX / LOAD_THREADS;
	const size_t len = 256 * KiB;
	struct thr r = { .rng = lt->seed };
	struct hcomm_xfer *x = calloc((size_t)n * LOAD_DEPTH, sizeof(*x));
	struct io_uring *ring = calloc(n, sizeof(*ring));
	int *fd = calloc(n, sizeof(int));
	char *buf = map_anon(2 * len);
	uint64_t key[LOAD_CTX];
	unsigned int c, k;

	if (!x || !ring || !fd || !buf) {
		lt->bad = ENOMEM;
		return NULL;
	}
	memset(buf, 1, 2 * len);
	for (c = 0; c < n; c++) {
		struct hcomm_reg_mem a = { .addr = (uintptr_t)buf,
					   .len = 2 * len,
					   .access = HCOMM_ACCESS_LOCAL_WRITE };

		fd[c] = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
		if (fd[c] < 0 || io_uring_queue_init(2 * LOAD_DEPTH, &ring[c], 0) ||
		    ioctl(fd[c], HCOMM_CMD_REG_MEM, &a)) {
			lt->bad = errno ? errno : EIO;
			return NULL;
		}
		key[c] = a.key;
	}
	/* fill every ring, then keep it full */
	for (c = 0; c < n; c++)
		for (k = 0; k < LOAD_DEPTH; k++) {
			struct hcomm_xfer *xf = &x[c * LOAD_DEPTH + k];
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring[c]);

			if (!sqe) {
				lt->bad = EBUSY;
				return NULL;
			}
			xf->src_key = key[c];
			xf->dst_key = key[c];
			xf->src_off = 0;
			xf->dst_off = len;
			xf->len = 16 * KiB + below(&r, 48 * KiB);
			xf->flags = HCOMM_XFER_NO_INLINE | HCOMM_XFER_DB_ADD;
			xf->db_index = k;
			xf->db_value = 1;
			hc_sqe_cmd(&ring[c], sqe, fd[c], HCOMM_CMD_XFER,
				   (uintptr_t)xf, sizeof(*xf), 0);
			sqe->user_data = k;
		}
	for (c = 0; c < n; c++)
		io_uring_submit(&ring[c]);
	while (!*lt->stop && !lt->bad) {
		for (c = 0; c < n && !lt->bad; c++) {
			struct io_uring_cqe *cqe;
			unsigned int got = 0;

			while (!io_uring_peek_cqe(&ring[c], &cqe)) {
				struct io_uring_sqe *sqe;

				k = (unsigned int)cqe->user_data;
				if (cqe->res)
					lt->failed++;
				else
					lt->done++;
				if (cqe->res < 0 && !errno_ok(-cqe->res))
					lt->bad = -cqe->res;
				io_uring_cqe_seen(&ring[c], cqe);
				sqe = io_uring_get_sqe(&ring[c]);
				if (!sqe) {
					lt->bad = EBUSY;
					break;
				}
				hc_sqe_cmd(&ring[c], sqe, fd[c], HCOMM_CMD_XFER,
					   (uintptr_t)&x[c * LOAD_DEPTH + k],
					   sizeof(struct hcomm_xfer), 0);
				sqe->user_data = k;
				got++;
			}
			if (got)
				io_uring_submit(&ring[c]);
			if (chance(&r, 5)) {	/* a registration, and back */
				struct hcomm_reg_mem a = {
					.addr = (uintptr_t)buf + below(&r, len),
					.len = 1 + below(&r, len),
					.access = HCOMM_ACCESS_LOCAL_WRITE,
					.flags = (uint32_t)below(&r, 2) };
				struct hcomm_dereg d = { 0 };

				if (!ioctl(fd[c], HCOMM_CMD_REG_MEM, &a)) {
					d.region = a.region;
					ioctl(fd[c], HCOMM_CMD_DEREG, &d);
					lt->regs++;
				}
			}
			if (chance(&r, 5)) {	/* a short wait */
				struct hcomm_db_wait w = {
					.index = (uint32_t)below(&r, LOAD_DEPTH),
					.value = ~0ULL, .timeout_ns = 100000 };

				if (ioctl(fd[c], HCOMM_CMD_DB_WAIT, &w) &&
				    errno != ETIME)
					lt->bad = errno;
				lt->waits++;
			}
		}
	}
	/* the rings go with everything in flight */
	for (c = 0; c < n; c++) {
		io_uring_queue_exit(&ring[c]);
		close(fd[c]);
	}
	munmap(buf, 2 * len);
	free(x);
	free(ring);
	free(fd);
	return NULL;
}

/*
 * Load: 64 contexts x 16 engine transfers in flight, with registrations
 * and waits, for HCOMM_LOAD_SECS (default 20; make fuzz: 300).  Slab
 * memory and the pinned pages are sampled after a warm-up and at the end:
 * they must not grow (beyond 10 % of the slab: caches settle), and every
 * gauge is back after the teardown.
 */
TEST(load)
{
	unsigned int secs = (unsigned int)env_u64("HCOMM_LOAD_SECS", 20), i;
	struct load_thr lt[LOAD_THREADS] = { 0 };
	pthread_t th[LOAD_THREADS];
	struct hcomm_stats before, mid, end, now;
	volatile int stop = 0;
	uint64_t done = 0, failed = 0, regs = 0, waits = 0;
	long slab0, slab1;

	ASSERT_EQ(0, hcomm_stats_read(&before));
	for (i = 0; i < LOAD_THREADS; i++) {
		lt[i].first = i * (LOAD_CTX / LOAD_THREADS);
		lt[i].stop = &stop;
		lt[i].seed = env_u64("HCOMM_FUZZ_SEED", 7) + i;
		ASSERT_EQ(0, pthread_create(&th[i], NULL, load_main, &lt[i]));
	}
	hc_sleep_ms(secs * 200);	/* a fifth: warm-up */
	ASSERT_EQ(0, hcomm_stats_read(&mid));
	slab0 = meminfo_kb("Slab");
	hc_sleep_ms(secs * 800);
	ASSERT_EQ(0, hcomm_stats_read(&end));
	slab1 = meminfo_kb("Slab");
	stop = 1;
	for (i = 0; i < LOAD_THREADS; i++) {
		pthread_join(th[i], NULL);
		done += lt[i].done;
		failed += lt[i].failed;
		regs += lt[i].regs;
		waits += lt[i].waits;
		EXPECT_EQ(0, lt[i].bad) TH_LOG("load thread %u: errno %d (%s)",
					       i, lt[i].bad,
					       strerror(lt[i].bad));
	}
	TH_LOG("%u s: %llu transfers completed (%llu failed), %llu "
	       "registrations, %llu waits; contexts %llu, xfers_active "
	       "%llu -> %llu, pinned pages %llu -> %llu, slab %ld -> %ld kB",
	       secs, (unsigned long long)done, (unsigned long long)failed,
	       (unsigned long long)regs, (unsigned long long)waits,
	       (unsigned long long)end.contexts,
	       (unsigned long long)mid.xfers_active,
	       (unsigned long long)end.xfers_active,
	       (unsigned long long)mid.pinned_pages,
	       (unsigned long long)end.pinned_pages, slab0, slab1);
	EXPECT_EQ(LOAD_CTX + before.contexts, end.contexts);
	EXPECT_GT(done, 0);
	EXPECT_EQ(0, failed);
	/* bounded: the same work in flight, the same pins, no slab growth */
	/* each thread may hold one 256 KiB NOCACHE registration */
	EXPECT_LE(end.pinned_pages, mid.pinned_pages + LOAD_THREADS * 65);
	EXPECT_LE(end.xfers_active, (uint64_t)LOAD_CTX * LOAD_DEPTH);
	EXPECT_LE(slab1, slab0 + slab0 / 10);
	EXPECT_EQ(0, hcomm_gauges_wait(&before, &now, 20000))
		hcomm_gauges_dump(stderr, "after the load", &before, &now);
}

TEST_HARNESS_MAIN
