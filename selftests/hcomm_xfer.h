/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the hcomm data-path selftests: XFER, FENCE, CANCEL and
 * DB_WAIT through ioctl() or io_uring, doorbell mappings, data patterns,
 * checksums, and waiting for children or gauges without ever hanging.
 *
 * Include after kselftest_harness.h; this file includes hcomm_util.h.
 *
 * Nothing here asserts: every helper returns 0 / -errno (or a value), so
 * all of them may be used in forked children too (see hcomm_util.h).
 *
 * io_uring rings made by hx_ring_init() have IORING_SETUP_CQE32, so the
 * bytes an XFER copied come back in cqe->big_cqe[0] (struct hx_cqe.done).
 * hx_cmd() and hx_xfer() issue one command and wait for its CQE: use them
 * only while nothing else is in flight on that ring.  With several
 * commands in flight, prepare SQEs with hx_prep_cmd(), io_uring_submit(),
 * and collect the completions with hx_reap().
 */
#ifndef HCOMM_SELFTEST_XFER_H
#define HCOMM_SELFTEST_XFER_H

#include <dirent.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/utsname.h>

#include "hcomm_util.h"

/* hx_cqe.done of a ring without CQE32: the byte count is not reported. */
#define HX_NO_DONE		UINT64_MAX
/* Upper bound for one completion we expect to come (never a threshold). */
#define HX_CQE_TIMEOUT_MS	60000
/* user_data of the SQEs hx_cmd() prepares (tests use small numbers). */
#define HX_UD_CMD		0x4843000000000000ULL

/* One completion, copied out of the CQ ring. */
struct hx_cqe {
	uint64_t user_data;
	int32_t res;
	uint32_t flags;
	uint64_t done;		/* big_cqe[0] on CQE32 rings, else HX_NO_DONE */
};

/* ------------------------------------------------------------------ */
/* time                                                                */
/* ------------------------------------------------------------------ */

static HC_UNUSED int64_t hx_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* True when the running kernel is at least major.minor (uname). */
static HC_UNUSED bool hx_kernel_at_least(int major, int minor)
{
	struct utsname u;
	int ma = 0, mi = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
		return false;
	return ma > major || (ma == major && mi >= minor);
}

/* ------------------------------------------------------------------ */
/* argument structs                                                    */
/* ------------------------------------------------------------------ */

/* A zeroed XFER of len bytes from (src_key, src_off) to (dst_key, dst_off). */
static HC_UNUSED void hx_xfer_init(struct hcomm_xfer *x, uint64_t src_key,
				   uint64_t src_off, uint64_t dst_key,
				   uint64_t dst_off, uint64_t len,
				   uint32_t flags)
{
	memset(x, 0, sizeof(*x));
	x->src_key = src_key;
	x->src_off = src_off;
	x->dst_key = dst_key;
	x->dst_off = dst_off;
	x->len = len;
	x->flags = flags;
}

/* Add a doorbell signal: db_flag is HCOMM_XFER_DB_ADD or HCOMM_XFER_DB_SET. */
static HC_UNUSED void hx_xfer_db(struct hcomm_xfer *x, uint32_t db_flag,
				 uint32_t index, uint64_t value)
{
	x->flags |= db_flag;
	x->db_index = index;
	x->db_value = value;
}

/* A zeroed DB_WAIT: doorbell index >= value, timeout_ns 0 = forever. */
static HC_UNUSED void hx_db_wait_init(struct hcomm_db_wait *w, uint32_t index,
				      uint64_t value, uint64_t tag,
				      uint64_t timeout_ns)
{
	memset(w, 0, sizeof(*w));
	w->index = index;
	w->value = value;
	w->tag = tag;
	w->timeout_ns = timeout_ns;
}

/* ------------------------------------------------------------------ */
/* io_uring                                                            */
/* ------------------------------------------------------------------ */

/*
 * A ring of @entries SQEs (CQ twice that) with IORING_SETUP_CQE32 added to
 * @flags.  Returns 0 or -errno.
 */
static HC_UNUSED int hx_ring_init(struct io_uring *ring, unsigned int entries,
				  unsigned int flags)
{
	struct io_uring_params p;

	memset(&p, 0, sizeof(p));
	p.flags = flags | IORING_SETUP_CQE32;
	return io_uring_queue_init_params(entries, ring, &p);
}

/*
 * Prepare (do not submit) an IORING_OP_URING_CMD SQE for hcomm command
 * @cmd with argument @arg.  @arg must stay valid until the CQE arrives
 * (output fields are written to it).  NULL when the SQ ring is full.
 */
static HC_UNUSED struct io_uring_sqe *hx_prep_cmd(struct io_uring *ring,
						  int fd, unsigned int cmd,
						  void *arg,
						  uint64_t user_data)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	if (!sqe)
		return NULL;
	hc_sqe_cmd(ring, sqe, fd, cmd, (uintptr_t)arg, _IOC_SIZE(cmd), 0);
	sqe->user_data = user_data;
	return sqe;
}

/*
 * Wait at most @timeout_ms for one CQE, copy it to @out and mark it seen.
 * Returns 0, -ETIME when none came in time, or another -errno.
 */
static HC_UNUSED int hx_wait_cqe(struct io_uring *ring, int timeout_ms,
				 struct hx_cqe *out)
{
	int64_t end = hx_now_ms() + timeout_ms;
	struct io_uring_cqe *cqe;
	int ret;

	for (;;) {
		int64_t left = end - hx_now_ms();
		struct __kernel_timespec ts;

		if (left < 0)
			left = 0;
		ts.tv_sec = left / 1000;
		ts.tv_nsec = (left % 1000) * 1000000LL;
		ret = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
		if (ret == -EINTR && left > 0)
			continue;
		if (ret)
			return ret;
		break;
	}
	out->user_data = cqe->user_data;
	out->res = cqe->res;
	out->flags = cqe->flags;
	out->done = (ring->flags & IORING_SETUP_CQE32) ? cqe->big_cqe[0] :
							 HX_NO_DONE;
	io_uring_cqe_seen(ring, cqe);
	return 0;
}

/*
 * Collect up to @n CQEs into @out in the order they were posted, waiting
 * at most @timeout_ms in all.  Returns how many were collected (n unless
 * the time ran out or waiting failed).
 */
static HC_UNUSED unsigned int hx_reap(struct io_uring *ring, unsigned int n,
				      int timeout_ms, struct hx_cqe *out)
{
	int64_t end = hx_now_ms() + timeout_ms;
	unsigned int got = 0;

	while (got < n) {
		int64_t left = end - hx_now_ms();

		if (hx_wait_cqe(ring, left > 0 ? (int)left : 0, &out[got]))
			break;
		got++;
	}
	return got;
}

/* Index of the CQE with @user_data in out[0 .. n-1], or -1. */
static HC_UNUSED int hx_find_cqe(const struct hx_cqe *out, unsigned int n,
				 uint64_t user_data)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (out[i].user_data == user_data)
			return (int)i;
	return -1;
}

/*
 * Issue one command by ioctl() (ring == NULL) or by one uring_cmd on @ring
 * and wait for it.  Returns 0 or -errno; @out (may be NULL) gets the CQE
 * (for ioctl: res only, done HX_NO_DONE).  Values below HC_XPORT_ERR mean
 * the io_uring transport itself failed.  Nothing else may be in flight on
 * @ring.
 */
static HC_UNUSED int hx_cmd(int fd, struct io_uring *ring, unsigned int cmd,
			    void *arg, struct hx_cqe *out)
{
	static uint64_t seq;
	struct hx_cqe tmp, *c = out ? out : &tmp;
	int ret;

	memset(c, 0, sizeof(*c));
	c->done = HX_NO_DONE;
	if (!ring) {
		c->res = ioctl(fd, cmd, arg) < 0 ? -errno : 0;
		return c->res;
	}
	if (!hx_prep_cmd(ring, fd, cmd, arg, HX_UD_CMD + ++seq)) {
		fprintf(stderr, "# io_uring: no free SQE\n");
		return HC_XPORT_ERR - 1;
	}
	ret = io_uring_submit(ring);
	if (ret != 1) {
		fprintf(stderr, "# io_uring_submit: %d\n", ret);
		return HC_XPORT_ERR - 2;
	}
	ret = hx_wait_cqe(ring, HX_CQE_TIMEOUT_MS, c);
	if (ret) {
		fprintf(stderr, "# io_uring: no CQE for command 0x%x: %d\n",
			cmd, ret);
		return HC_XPORT_ERR - 3;
	}
	if (c->user_data != HX_UD_CMD + seq) {
		fprintf(stderr, "# io_uring: CQE user_data 0x%llx, want 0x%llx\n",
			(unsigned long long)c->user_data,
			(unsigned long long)(HX_UD_CMD + seq));
		return HC_XPORT_ERR - 4;
	}
	return c->res;
}

/*
 * XFER and wait for it.  *done (may be NULL) gets the bytes copied: the
 * ioctl's x->done, or big_cqe[0] of a CQE32 ring (HX_NO_DONE otherwise).
 */
static HC_UNUSED int hx_xfer(int fd, struct io_uring *ring,
			     struct hcomm_xfer *x, uint64_t *done)
{
	struct hx_cqe c;
	int ret = hx_cmd(fd, ring, HCOMM_CMD_XFER, x, &c);

	if (done)
		*done = ring ? c.done : x->done;
	return ret;
}

/* CANCEL by tag, or every pending operation with HCOMM_CANCEL_ALL. */
static HC_UNUSED int hx_cancel(int fd, struct io_uring *ring, uint64_t tag,
			       uint32_t flags, uint32_t *count)
{
	struct hcomm_cancel c;
	int ret;

	memset(&c, 0, sizeof(c));
	c.tag = tag;
	c.flags = flags;
	c.count = 0xdeadbeef;	/* must be overwritten */
	ret = hx_cmd(fd, ring, HCOMM_CMD_CANCEL, &c, NULL);
	if (count)
		*count = c.count;
	return ret;
}

static HC_UNUSED int hx_fence(int fd, struct io_uring *ring, uint64_t tag)
{
	struct hcomm_fence f;

	memset(&f, 0, sizeof(f));
	f.tag = tag;
	return hx_cmd(fd, ring, HCOMM_CMD_FENCE, &f, NULL);
}

/* REG_MEM with flags (HCOMM_REG_NOCACHE for exact pinned_pages deltas). */
static HC_UNUSED int hx_reg(int fd, struct io_uring *ring, const void *addr,
			    uint64_t len, uint32_t access, uint32_t flags,
			    struct hcomm_reg_mem *out)
{
	memset(out, 0, sizeof(*out));
	out->addr = (uintptr_t)addr;
	out->len = len;
	out->access = access;
	out->flags = flags;
	return hx_cmd(fd, ring, HCOMM_CMD_REG_MEM, out, NULL);
}

static HC_UNUSED int hx_set_max_inline(int fd, struct io_uring *ring,
				       uint32_t max_inline)
{
	struct hcomm_ctx_opts o;

	memset(&o, 0, sizeof(o));
	o.mask = HCOMM_CTX_MAX_INLINE;
	o.max_inline = max_inline;
	return hx_cmd(fd, ring, HCOMM_CMD_SET_CTX, &o, NULL);
}

/* ------------------------------------------------------------------ */
/* doorbells                                                           */
/* ------------------------------------------------------------------ */

/* Bytes of the whole doorbell array, rounded up to pages. */
static HC_UNUSED size_t hx_db_map_len(uint32_t nr_doorbells)
{
	return ((size_t)nr_doorbells * sizeof(uint64_t) + PG - 1) / PG * PG;
}

/*
 * mmap @len bytes of the doorbells of context @fd (shared, read-write).
 * NULL with errno set on failure.
 */
static HC_UNUSED uint64_t *hx_db_map(int fd, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		       HCOMM_MMAP_DOORBELLS);

	return p == MAP_FAILED ? NULL : p;
}

/* Doorbell @index with acquire ordering: the data it announces is visible. */
static HC_UNUSED uint64_t hx_db_load(const uint64_t *db, uint32_t index)
{
	return __atomic_load_n(&db[index], __ATOMIC_ACQUIRE);
}

/*
 * Spin (yielding) until doorbell @index reads >= @want with an acquire
 * load, at most @timeout_ms.  0, or -ETIME with *last the final value.
 */
static HC_UNUSED int hx_db_spin(const uint64_t *db, uint32_t index,
				uint64_t want, int timeout_ms, uint64_t *last)
{
	int64_t end = hx_now_ms() + timeout_ms;
	uint64_t v;
	unsigned int n = 0;

	for (;;) {
		v = hx_db_load(db, index);
		if (v >= want)
			break;
		if (!(++n & 255) && hx_now_ms() > end)
			break;
		sched_yield();
	}
	if (last)
		*last = v;
	return v >= want ? 0 : -ETIME;
}

/* ------------------------------------------------------------------ */
/* data                                                                */
/* ------------------------------------------------------------------ */

/*
 * Fill @len bytes with a xorshift64 stream seeded by @seed, 8 bytes at a
 * time: every byte depends on its distance from @p, so data copied from
 * the wrong offset never matches.
 */
static HC_UNUSED void hx_fill(void *p, size_t len, uint64_t seed)
{
	uint64_t s = (seed + 1) * 0x9E3779B97F4A7C15ULL | 1;
	unsigned char *c = p;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		memcpy(c + i, &s, 8);
	}
	for (; i < len; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		c[i] = (unsigned char)(s >> 29);
	}
}

/* dst[i] = ~src[i]: a destination that differs from the source everywhere. */
static HC_UNUSED void hx_fill_not(void *dst, const void *src, size_t len)
{
	const unsigned char *s = src;
	unsigned char *d = dst;
	size_t i = 0;
	uint64_t w;

	for (; i + 8 <= len; i += 8) {
		memcpy(&w, s + i, 8);
		w = ~w;
		memcpy(d + i, &w, 8);
	}
	for (; i < len; i++)
		d[i] = (unsigned char)~s[i];
}

/*
 * 64-bit FNV-1a over 8-byte words (any alignment), with a fold after each
 * multiply so that high bits reach the low ones; the length is mixed in.
 * Equal ranges give equal sums wherever they start.
 */
static HC_UNUSED uint64_t hx_csum(const void *p, size_t len)
{
	const uint64_t prime = 0x100000001b3ULL;
	const unsigned char *c = p;
	uint64_t h = 0xcbf29ce484222325ULL, w;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		memcpy(&w, c + i, 8);
		h = (h ^ w) * prime;
		h ^= h >> 32;
	}
	for (; i < len; i++)
		h = (h ^ c[i]) * prime;
	h ^= len;
	return h * prime;
}

/* Offset of the first byte where a and b differ, SIZE_MAX when equal. */
static HC_UNUSED size_t hx_first_diff(const void *a, const void *b, size_t len)
{
	const unsigned char *x = a, *y = b;
	size_t i = 0, blk = 4096;

	while (i < len) {
		size_t n = len - i < blk ? len - i : blk;

		if (memcmp(x + i, y + i, n)) {
			while (x[i] == y[i])
				i++;
			return i;
		}
		i += n;
	}
	return SIZE_MAX;
}

/*
 * A transfer's destination range with guard bytes on both sides:
 * hx_span_prep() makes [dst, dst + len) differ from the source in every
 * byte and saves the guards; hx_span_check() verifies a copied prefix and
 * that the guards were not written.  Only for the caller's own memory:
 * the guards must lie inside its mapping.
 */
struct hx_span {
	const char *src;	/* expected content of the destination */
	char *dst;
	size_t len;
	size_t glo, ghi;	/* guard bytes checked before dst / after len */
	unsigned char *save;	/* their content before the transfer */
};

static HC_UNUSED int hx_span_prep(struct hx_span *s, const void *src,
				  void *dst, size_t len, size_t glo,
				  size_t ghi)
{
	s->src = src;
	s->dst = dst;
	s->len = len;
	s->glo = glo;
	s->ghi = ghi;
	s->save = malloc(glo + ghi + 1);
	if (!s->save)
		return -ENOMEM;
	hx_fill_not(dst, src, len);
	memcpy(s->save, s->dst - glo, glo);
	memcpy(s->save + glo, s->dst + len, ghi);
	return 0;
}

/*
 * True when dst[0, done) equals src[0, done) (checksum, then the first
 * differing byte for the message) and no guard byte changed.  Otherwise
 * false with the reason in @why.
 */
static HC_UNUSED bool hx_span_check(const struct hx_span *s, size_t done,
				    char *why, size_t whylen)
{
	size_t d;

	if (done > s->len) {
		snprintf(why, whylen, "done %zu > len %zu", done, s->len);
		return false;
	}
	if (hx_csum(s->dst, done) != hx_csum(s->src, done)) {
		d = hx_first_diff(s->dst, s->src, done);
		snprintf(why, whylen, "checksum of %zu copied bytes differs "
			 "from the source; first difference at byte %zu of the "
			 "range: 0x%02x, expected 0x%02x", done, d,
			 d < done ? (unsigned char)s->dst[d] : 0,
			 d < done ? (unsigned char)s->src[d] : 0);
		return false;
	}
	d = hx_first_diff(s->dst - s->glo, s->save, s->glo);
	if (d != SIZE_MAX) {
		snprintf(why, whylen, "guard byte %zu before the destination "
			 "was written", s->glo - d);
		return false;
	}
	d = hx_first_diff(s->dst + s->len, s->save + s->glo, s->ghi);
	if (d != SIZE_MAX) {
		snprintf(why, whylen, "guard byte %zu after the destination "
			 "range (len %zu) was written", d, s->len);
		return false;
	}
	return true;
}

static HC_UNUSED void hx_span_free(struct hx_span *s)
{
	free(s->save);
	s->save = NULL;
}

/*
 * An anonymous mapping with a region of it starting @lead bytes in (an odd
 * lead: the region does not start on a page boundary).  The mapping is
 * @lead + @len rounded up to pages, plus one page; every page is touched.
 */
struct hx_buf {
	char *map;
	size_t map_len;
	char *base;		/* first byte of the region: map + lead */
	uint64_t len;		/* region length */
	struct hcomm_reg_mem reg;	/* REG_MEM answer: region, key */
};

static HC_UNUSED int hx_buf_alloc(struct hx_buf *b, size_t lead, uint64_t len)
{
	memset(b, 0, sizeof(*b));
	b->map_len = (lead + len + PG - 1) / PG * PG + PG;
	b->map = map_anon(b->map_len);
	if (!b->map)
		return -ENOMEM;
	touch(b->map, b->map_len);
	b->base = b->map + lead;
	b->len = len;
	return 0;
}

/* Register the region of @b (REG_MEM flags @flags, e.g. NOCACHE). */
static HC_UNUSED int hx_buf_reg(int fd, struct io_uring *ring,
				struct hx_buf *b, uint32_t access,
				uint32_t flags)
{
	return hx_reg(fd, ring, b->base, b->len, access, flags, &b->reg);
}

static HC_UNUSED void hx_buf_free(struct hx_buf *b)
{
	if (b->map)
		munmap(b->map, b->map_len);
	b->map = NULL;
}

/* ------------------------------------------------------------------ */
/* waiting without hanging                                             */
/* ------------------------------------------------------------------ */

#define HX_STAT(f)	offsetof(struct hcomm_stats, f)

/*
 * Poll debugfs until the stats field at offset @off equals @want, at most
 * @timeout_ms.  0 when it does, 1 on timeout, -errno when stats cannot be
 * read; *now holds the last snapshot.
 */
static HC_UNUSED int hx_stat_wait(size_t off, uint64_t want, int timeout_ms,
				  struct hcomm_stats *now)
{
	int64_t end = hx_now_ms() + timeout_ms;
	int ret;

	for (;;) {
		ret = hcomm_stats_read(now);
		if (ret)
			return ret;
		if (*(uint64_t *)((char *)now + off) == want)
			return 0;
		if (hx_now_ms() > end)
			return 1;
		hc_sleep_ms(10);
	}
}

/*
 * Read one byte from pipe @fd within @timeout_ms.  0 when it is @want;
 * -ETIME on timeout, -EPIPE on EOF (the writer died), -EPROTO otherwise.
 */
static HC_UNUSED int hx_pipe_wait(int fd, char want, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;
	int ret;

	do {
		ret = poll(&p, 1, timeout_ms);
	} while (ret < 0 && errno == EINTR);
	if (ret == 0)
		return -ETIME;
	if (ret < 0)
		return -errno;
	ret = read(fd, &c, 1);
	if (ret == 0)
		return -EPIPE;
	if (ret < 0)
		return -errno;
	return c == want ? 0 : -EPROTO;
}

/*
 * Reap child @pid, polling for at most @timeout_ms; if it is still alive
 * then, SIGKILL and reap it and return -ETIMEDOUT.  Otherwise 0 with the
 * wait status in *status.
 */
static HC_UNUSED int hx_wait_child(pid_t pid, int timeout_ms, int *status)
{
	int64_t end = hx_now_ms() + timeout_ms;
	pid_t r;

	for (;;) {
		r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (hx_now_ms() > end)
			break;
		hc_sleep_ms(20);
	}
	/* never block: a child stuck in the kernel may not die at once */
	kill(pid, SIGKILL);
	end = hx_now_ms() + 10000;
	while (waitpid(pid, status, WNOHANG) != pid && hx_now_ms() < end)
		hc_sleep_ms(20);
	return -ETIMEDOUT;
}

/*
 * Threads of this process named "iou-wrk-*": io_uring handed some command
 * to io-wq, so commands of one io_uring_submit() may have reached the
 * module in any order.  0 when every command was issued by the submitting
 * task, in SQE order.
 */
static HC_UNUSED int hx_iowq_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		char path[300], comm[32] = "";
		ssize_t len;
		int fd;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		len = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		if (len > 0 && !strncmp(comm, "iou-wrk", 7))
			n++;
	}
	closedir(d);
	return n;
}

/* "exit N", "signal N" or "?" for a wait status (for messages). */
static HC_UNUSED const char *hx_status_str(int st, char *buf, size_t n)
{
	if (WIFEXITED(st))
		snprintf(buf, n, "exit %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, n, "signal %d", WTERMSIG(st));
	else
		snprintf(buf, n, "status 0x%x", st);
	return buf;
}

#endif /* HCOMM_SELFTEST_XFER_H */
