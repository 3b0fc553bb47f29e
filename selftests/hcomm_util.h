/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared helpers for the hcomm selftests.  Include after kselftest_harness.h.
 *
 * Every helper that asserts takes "struct __test_metadata *_metadata" so the
 * harness macros work inside it.  Helpers used in forked children never
 * assert (an ASSERT in a grandchild would longjmp into the harness and run
 * the fixture teardown there); they return 0 or -errno instead.
 */
#ifndef HCOMM_SELFTEST_UTIL_H
#define HCOMM_SELFTEST_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <liburing.h>
#include <linux/hcomm.h>

#define HC_UNUSED __attribute__((unused))

#define HCOMM_DEV	"/dev/hcomm"
#define HCOMM_DEBUGFS	"/sys/kernel/debug/hcomm"
#define HCOMM_STATS	HCOMM_DEBUGFS "/stats"
#define HCOMM_PARAMS	"/sys/module/hcomm/parameters"

#define PG		4096UL
#define KiB		1024UL
#define MiB		(1024UL * 1024)
#define GiB		(1024UL * 1024 * 1024)

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#endif

/* ------------------------------------------------------------------ */
/* debugfs statistics                                                  */
/* ------------------------------------------------------------------ */

struct hcomm_stats {
	/* gauges: all 0 when no context is open ("workers" only then) */
	uint64_t contexts;
	uint64_t regions;
	uint64_t host_regions;
	uint64_t dmabuf_regions;
	uint64_t pinned_pages;
	uint64_t memlock_pages;
	uint64_t xfers_active;
	uint64_t waits_pending;
	uint64_t umems;
	uint64_t cache_bytes;
	uint64_t workers;
	/* cumulative counters */
	uint64_t cmd_get_info;
	uint64_t cmd_reg_mem;
	uint64_t cmd_reg_dmabuf;
	uint64_t cmd_dereg;
	uint64_t cmd_query;
	uint64_t cmd_xfer;
	uint64_t cmd_cancel;
	uint64_t cmd_fence;
	uint64_t cmd_db_wait;
	uint64_t cmd_grant;
	uint64_t cmd_set_qos;
	uint64_t cmd_set_ctx;
	uint64_t cmd_xfer_batch;
	uint64_t cmd_db_wait_any;
	uint64_t cmd_errors;
	uint64_t uring_cmds;
	uint64_t ioctls;
	uint64_t xfer_inline;
	uint64_t xfer_async;
	uint64_t xfer_bytes;
	uint64_t xfer_chunks;
	uint64_t xfer_cancelled;
	uint64_t xfer_failed;
	uint64_t db_signals;
	uint64_t db_wakeups;
	uint64_t cache_hits;
	uint64_t cache_misses;
	uint64_t cache_evictions;
	uint64_t cache_invalidations;
	uint64_t engine_busy_ns;
};

#define HC_STAT(n, g) { #n, offsetof(struct hcomm_stats, n), g }
static const struct {
	const char *name;
	size_t off;
	bool gauge;
} hcomm_stat_fields[] = {
	HC_STAT(contexts, true),
	HC_STAT(regions, true),
	HC_STAT(host_regions, true),
	HC_STAT(dmabuf_regions, true),
	HC_STAT(pinned_pages, true),
	HC_STAT(memlock_pages, true),
	HC_STAT(xfers_active, true),
	HC_STAT(waits_pending, true),
	HC_STAT(umems, true),
	HC_STAT(cache_bytes, true),
	HC_STAT(workers, true),
	HC_STAT(cmd_get_info, false),
	HC_STAT(cmd_reg_mem, false),
	HC_STAT(cmd_reg_dmabuf, false),
	HC_STAT(cmd_dereg, false),
	HC_STAT(cmd_query, false),
	HC_STAT(cmd_xfer, false),
	HC_STAT(cmd_cancel, false),
	HC_STAT(cmd_fence, false),
	HC_STAT(cmd_db_wait, false),
	HC_STAT(cmd_grant, false),
	HC_STAT(cmd_set_qos, false),
	HC_STAT(cmd_set_ctx, false),
	HC_STAT(cmd_xfer_batch, false),
	HC_STAT(cmd_db_wait_any, false),
	HC_STAT(cmd_errors, false),
	HC_STAT(uring_cmds, false),
	HC_STAT(ioctls, false),
	HC_STAT(xfer_inline, false),
	HC_STAT(xfer_async, false),
	HC_STAT(xfer_bytes, false),
	HC_STAT(xfer_chunks, false),
	HC_STAT(xfer_cancelled, false),
	HC_STAT(xfer_failed, false),
	HC_STAT(db_signals, false),
	HC_STAT(db_wakeups, false),
	HC_STAT(cache_hits, false),
	HC_STAT(cache_misses, false),
	HC_STAT(cache_evictions, false),
	HC_STAT(cache_invalidations, false),
	HC_STAT(engine_busy_ns, false),
};
#undef HC_STAT

static HC_UNUSED uint64_t *hcomm_stat_ptr(struct hcomm_stats *s, size_t i)
{
	return (uint64_t *)((char *)s + hcomm_stat_fields[i].off);
}

static HC_UNUSED uint64_t hcomm_stat_get(const struct hcomm_stats *s, size_t i)
{
	return *(const uint64_t *)((const char *)s + hcomm_stat_fields[i].off);
}

/*
 * Parse "name value" lines (a trailing ':' on the name is tolerated).
 * Unknown names are ignored.  Returns 0 when every known field was seen,
 * -ENOENT when one is missing, -EINVAL on a line that does not parse.
 */
static HC_UNUSED int hcomm_stats_parse(const char *text, struct hcomm_stats *s)
{
	bool seen[ARRAY_SIZE(hcomm_stat_fields)] = { false };
	const char *p = text;
	size_t i;

	memset(s, 0, sizeof(*s));
	while (*p) {
		char name[64], line[256];
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		unsigned long long v;
		size_t nlen;

		if (n >= sizeof(line))
			return -EINVAL;
		memcpy(line, p, n);
		line[n] = '\0';
		p += n + (nl ? 1 : 0);
		if (line[strspn(line, " \t")] == '\0')
			continue;
		if (sscanf(line, "%63s %llu", name, &v) != 2)
			return -EINVAL;
		nlen = strlen(name);
		if (nlen && name[nlen - 1] == ':')
			name[nlen - 1] = '\0';
		for (i = 0; i < ARRAY_SIZE(hcomm_stat_fields); i++) {
			if (!strcmp(name, hcomm_stat_fields[i].name)) {
				*hcomm_stat_ptr(s, i) = v;
				seen[i] = true;
			}
		}
	}
	for (i = 0; i < ARRAY_SIZE(hcomm_stat_fields); i++)
		if (!seen[i])
			return -ENOENT;
	return 0;
}

static HC_UNUSED int hcomm_stats_read(struct hcomm_stats *s)
{
	char buf[4096];
	ssize_t n, tot = 0;
	int fd = open(HCOMM_STATS, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf + tot, sizeof(buf) - 1 - tot)) > 0)
		tot += n;
	close(fd);
	if (n < 0)
		return -EIO;
	buf[tot] = '\0';
	return hcomm_stats_parse(buf, s);
}

static HC_UNUSED bool hcomm_gauges_equal(const struct hcomm_stats *a,
					 const struct hcomm_stats *b)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(hcomm_stat_fields); i++) {
		if (!hcomm_stat_fields[i].gauge)
			continue;
		/*
		 * A context keeps its copy threads until it is closed, and how
		 * many it started depends on its history: "workers" is
		 * compared only against a state with no context open.
		 */
		if (hcomm_stat_fields[i].off == offsetof(struct hcomm_stats,
							 workers) &&
		    a->contexts)
			continue;
		if (hcomm_stat_get(a, i) != hcomm_stat_get(b, i))
			return false;
	}
	return true;
}

/* True when n bytes at p are all zero (works for a word or an array). */
static HC_UNUSED bool all_zero(const void *p, size_t n)
{
	const unsigned char *c = p;

	while (n--)
		if (*c++)
			return false;
	return true;
}

static HC_UNUSED void hc_sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * Poll the gauges until they equal *want (the last file release can be
 * deferred: io_uring, delayed fput), at most timeout_ms.  0 when equal.
 */
static HC_UNUSED int hcomm_gauges_wait(const struct hcomm_stats *want,
				       struct hcomm_stats *now, int timeout_ms)
{
	int waited = 0, ret;

	for (;;) {
		ret = hcomm_stats_read(now);
		if (ret)
			return ret;
		if (hcomm_gauges_equal(want, now))
			return 0;
		if (waited >= timeout_ms)
			return 1;
		hc_sleep_ms(20);
		waited += 20;
	}
}

static HC_UNUSED void hcomm_gauges_dump(FILE *f, const char *what,
					const struct hcomm_stats *want,
					const struct hcomm_stats *now)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(hcomm_stat_fields); i++) {
		if (!hcomm_stat_fields[i].gauge)
			continue;
		fprintf(f, "# %s: %-16s expected %" PRIu64 " now %" PRIu64 "%s\n",
			what, hcomm_stat_fields[i].name, hcomm_stat_get(want, i),
			hcomm_stat_get(now, i),
			hcomm_stat_get(want, i) != hcomm_stat_get(now, i) ?
			"  <-- differs" : "");
	}
}

/* EXPECT that the debugfs gauges come back to *want within 5 s. */
#define EXPECT_GAUGES(want) do { \
	struct hcomm_stats __now; \
	int __r = hcomm_gauges_wait((want), &__now, 5000); \
	if (__r > 0) \
		hcomm_gauges_dump(stderr, "gauge", (want), &__now); \
	EXPECT_EQ(0, __r) TH_LOG("debugfs gauges not back to the baseline " \
				 "(stats read: %d)", __r); \
} while (0)

#define ASSERT_GAUGES(want) do { \
	struct hcomm_stats __now; \
	int __r = hcomm_gauges_wait((want), &__now, 5000); \
	if (__r > 0) \
		hcomm_gauges_dump(stderr, "gauge", (want), &__now); \
	ASSERT_EQ(0, __r) TH_LOG("debugfs gauges differ from the expected " \
				 "values (stats read: %d)", __r); \
} while (0)

/* ASSERT that stats field f moved by exactly d between snapshots a and b. */
#define ASSERT_DELTA(a, b, f, d) \
	ASSERT_EQ((uint64_t)(a).f + (uint64_t)(d), (uint64_t)(b).f) \
		TH_LOG("stats %s: before %" PRIu64 " after %" PRIu64 \
		       ", expected a change of %lld", #f, (uint64_t)(a).f, \
		       (uint64_t)(b).f, (long long)(d))

#define EXPECT_DELTA(a, b, f, d) \
	EXPECT_EQ((uint64_t)(a).f + (uint64_t)(d), (uint64_t)(b).f) \
		TH_LOG("stats %s: before %" PRIu64 " after %" PRIu64 \
		       ", expected a change of %lld", #f, (uint64_t)(a).f, \
		       (uint64_t)(b).f, (long long)(d))

#define ASSERT_STATS(s) \
	ASSERT_EQ(0, hcomm_stats_read(&(s))) \
		TH_LOG("cannot read %s (debugfs mounted? module loaded?)", \
		       HCOMM_STATS)

/* ------------------------------------------------------------------ */
/* sysfs parameters                                                    */
/* ------------------------------------------------------------------ */

static HC_UNUSED int read_u64_file(const char *path, uint64_t *v)
{
	char buf[64];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	errno = 0;
	*v = strtoull(buf, NULL, 0);
	return errno ? -errno : 0;
}

static HC_UNUSED int hcomm_param(const char *name, uint64_t *v)
{
	char path[256];

	snprintf(path, sizeof(path), HCOMM_PARAMS "/%s", name);
	return read_u64_file(path, v);
}

static HC_UNUSED int hcomm_param_set(const char *name, uint64_t v)
{
	char path[256], buf[32];
	int fd, len, ok;

	snprintf(path, sizeof(path), HCOMM_PARAMS "/%s", name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	ok = write(fd, buf, len) == len;
	close(fd);
	return ok ? 0 : -EIO;
}

/* A test's knob from the environment (strtoull, base 0), or @dflt. */
static HC_UNUSED uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *s = getenv(name);

	return s && *s ? strtoull(s, NULL, 0) : dflt;
}

/* ------------------------------------------------------------------ */
/* command submission: ioctl or io_uring passthrough                   */
/* ------------------------------------------------------------------ */

/*
 * Results below this are transport failures of the io_uring path itself
 * (no SQE, submit failed, CQE mismatch), never kernel errnos.
 */
#define HC_XPORT_ERR	(-100000)

/*
 * Fill sqe (from ring) as an IORING_OP_URING_CMD of cmd_op on fd whose
 * payload names size bytes at addr with flags: the whole SQE is cleared
 * first (both halves on an SQE128 ring).
 */
static HC_UNUSED void hc_sqe_cmd(struct io_uring *ring,
				 struct io_uring_sqe *sqe, int fd,
				 uint32_t cmd_op, uint64_t addr, uint32_t size,
				 uint32_t flags)
{
	struct hcomm_uring_cmd pl = { .addr = addr, .size = size,
				      .flags = flags };

	memset(sqe, 0, (ring->flags & IORING_SETUP_SQE128) ?
			2 * sizeof(*sqe) : sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = cmd_op;
	memcpy((char *)sqe + offsetof(struct io_uring_sqe, cmd), &pl,
	       sizeof(pl));
}

static HC_UNUSED int hcomm_uring_raw(struct io_uring *ring, int fd,
				     uint32_t cmd_op, uint64_t addr,
				     uint32_t size, uint32_t flags)
{
	static __thread uint64_t seq;	/* a ring is one thread's */
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int ret;

	sqe = io_uring_get_sqe(ring);
	if (!sqe) {
		fprintf(stderr, "# io_uring: no free SQE\n");
		return HC_XPORT_ERR - 1;
	}
	hc_sqe_cmd(ring, sqe, fd, cmd_op, addr, size, flags);
	sqe->user_data = ++seq;

	ret = io_uring_submit_and_wait(ring, 1);
	if (ret != 1) {
		fprintf(stderr, "# io_uring_submit_and_wait: %d\n", ret);
		return HC_XPORT_ERR - 2;
	}
	ret = io_uring_wait_cqe(ring, &cqe);
	if (ret) {
		fprintf(stderr, "# io_uring_wait_cqe: %d\n", ret);
		return HC_XPORT_ERR - 3;
	}
	if (cqe->user_data != seq) {
		fprintf(stderr, "# io_uring: CQE user_data %llu, want %llu\n",
			(unsigned long long)cqe->user_data,
			(unsigned long long)seq);
		io_uring_cqe_seen(ring, cqe);
		return HC_XPORT_ERR - 4;
	}
	ret = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return ret;
}

/*
 * Issue command cmd with argument arg through ioctl() (ring == NULL) or
 * an IORING_OP_URING_CMD SQE filled by hand.  Returns 0 or -errno.
 */
static HC_UNUSED int submit(int fd, struct io_uring *ring, unsigned int cmd,
			    void *arg)
{
	if (!ring)
		return ioctl(fd, cmd, arg) < 0 ? -errno : 0;
	return hcomm_uring_raw(ring, fd, cmd, (uintptr_t)arg, _IOC_SIZE(cmd),
			       0);
}

static HC_UNUSED int hc_reg_mem(int fd, struct io_uring *r, const void *addr,
				uint64_t len, uint32_t access,
				struct hcomm_reg_mem *out)
{
	struct hcomm_reg_mem tmp, *a = out ? out : &tmp;

	memset(a, 0, sizeof(*a));
	a->addr = (uintptr_t)addr;
	a->len = len;
	a->access = access;
	return submit(fd, r, HCOMM_CMD_REG_MEM, a);
}

static HC_UNUSED int hc_reg_dmabuf(int fd, struct io_uring *r, int dmabuf,
				   uint64_t off, uint64_t len, uint32_t access,
				   struct hcomm_reg_dmabuf *out)
{
	struct hcomm_reg_dmabuf tmp, *a = out ? out : &tmp;

	memset(a, 0, sizeof(*a));
	a->fd = dmabuf;
	a->offset = off;
	a->len = len;
	a->access = access;
	return submit(fd, r, HCOMM_CMD_REG_DMABUF, a);
}

static HC_UNUSED int hc_dereg(int fd, struct io_uring *r, uint32_t region)
{
	struct hcomm_dereg d = { .region = region };

	return submit(fd, r, HCOMM_CMD_DEREG, &d);
}

static HC_UNUSED int hc_query(int fd, struct io_uring *r, uint32_t region,
			      struct hcomm_extent *ext, uint32_t max,
			      struct hcomm_query *q)
{
	memset(q, 0, sizeof(*q));
	q->region = region;
	q->extents = (uintptr_t)ext;
	q->max_extents = max;
	return submit(fd, r, HCOMM_CMD_QUERY, q);
}

static HC_UNUSED int hc_info(int fd, struct io_uring *r, struct hcomm_info *i)
{
	memset(i, 0, sizeof(*i));
	return submit(fd, r, HCOMM_CMD_GET_INFO, i);
}

/*
 * QUERY a region and all of its extents: a first call with no array learns
 * nr_extents, the second fills a malloc()ed array (caller frees).
 */
static HC_UNUSED int hc_query_all(int fd, struct io_uring *r, uint32_t region,
				  struct hcomm_query *q,
				  struct hcomm_extent **ext)
{
	uint32_t n;
	int ret;

	*ext = NULL;
	ret = hc_query(fd, r, region, NULL, 0, q);
	if (ret)
		return ret;
	n = q->nr_extents;
	*ext = calloc(n + 1, sizeof(**ext));
	if (!*ext)
		return -ENOMEM;
	ret = hc_query(fd, r, region, *ext, n, q);
	if (!ret && q->nr_extents != n)
		return -ESTALE;
	return ret;
}

/* A /dev/hcomm context, optionally with its own ring. */
struct hc_ctx {
	int fd;
	struct io_uring ring;
	struct io_uring *r;
};

static HC_UNUSED int hc_ctx_open(struct hc_ctx *c, bool uring,
				 unsigned int ring_flags)
{
	int ret;

	c->r = NULL;
	c->fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	if (c->fd < 0)
		return -errno;
	if (uring) {
		ret = io_uring_queue_init(64, &c->ring, ring_flags);
		if (ret) {
			close(c->fd);
			c->fd = -1;
			return ret;
		}
		c->r = &c->ring;
	}
	return 0;
}

static HC_UNUSED int hc_ctx_ring(struct hc_ctx *c, bool uring)
{
	int ret;

	c->r = NULL;
	if (!uring)
		return 0;
	ret = io_uring_queue_init(64, &c->ring, 0);
	if (!ret)
		c->r = &c->ring;
	return ret;
}

static HC_UNUSED void hc_ctx_close(struct hc_ctx *c)
{
	if (c->r)
		io_uring_queue_exit(c->r);
	c->r = NULL;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* ------------------------------------------------------------------ */
/* memory                                                              */
/* ------------------------------------------------------------------ */

static HC_UNUSED void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* mmap len bytes aligned to align (a power of two); unmaps the slack. */
static HC_UNUSED void *map_anon_aligned(size_t len, size_t align)
{
	size_t span = len + align;
	char *p = mmap(NULL, span, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *a;

	if (p == MAP_FAILED)
		return NULL;
	a = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
	if (a > p)
		munmap(p, a - p);
	if (p + span > a + len)
		munmap(a + len, p + span - (a + len));
	return a;
}

static HC_UNUSED void touch(void *p, size_t len)
{
	volatile char *c = p;
	size_t i;

	for (i = 0; i < len; i += PG)
		c[i] = (char)(i / PG + 1);
	if (len)
		c[len - 1] = 1;
}

static HC_UNUSED uint64_t span_pages(uint64_t addr, uint64_t len)
{
	return ((addr + len + PG - 1) / PG) - (addr / PG);
}

/* PFN of the page at vaddr from /proc/self/pagemap; 0 if not present. */
static HC_UNUSED int pagemap_pfn(uintptr_t vaddr, uint64_t *pfn)
{
	static int fd = -1;
	static pid_t owner;
	uint64_t e;
	ssize_t n;

	if (fd >= 0 && owner != getpid()) {	/* opened by our parent */
		close(fd);
		fd = -1;
	}
	owner = getpid();
	if (fd < 0)
		fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = pread(fd, &e, sizeof(e), (off_t)(vaddr / PG * sizeof(e)));
	if (n != sizeof(e))
		return -EIO;
	*pfn = (e >> 63) & 1 ? e & ((1ULL << 55) - 1) : 0;
	return 0;
}

/* AnonHugePages (kB) of the VMA holding addr, from /proc/self/smaps. */
static HC_UNUSED long smaps_anon_huge_kb(uintptr_t addr)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	bool in = false;
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		long v;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			if (in)
				break;
			in = addr >= lo && addr < hi;
			continue;
		}
		if (in && sscanf(line, "AnonHugePages: %ld kB", &v) == 1) {
			kb = v;
			break;
		}
	}
	fclose(f);
	return kb;
}

/* ------------------------------------------------------------------ */
/* extents                                                             */
/* ------------------------------------------------------------------ */

enum hc_phys { PHYS_ANY, PHYS_NONZERO, PHYS_ZERO, PHYS_PAGEMAP };

/*
 * Check the extent list of a region: page-aligned, contiguous offsets from
 * 0, lengths multiples of 4 KiB that sum to nr_pages * 4 KiB.  With
 * PHYS_PAGEMAP (host regions, root) each extent's phys must be the PFN of
 * its first page and every page inside must be physically contiguous.
 */
static HC_UNUSED void check_extents(struct __test_metadata *_metadata,
				    const struct hcomm_query *q,
				    const struct hcomm_extent *e,
				    enum hc_phys phys)
{
	uint64_t off = 0, i;
	uintptr_t first_page = (uintptr_t)(q->addr & ~(PG - 1));

	ASSERT_LE(1, q->nr_extents) TH_LOG("a region has at least one extent");
	ASSERT_GE(q->nr_pages, (uint64_t)q->nr_extents)
		TH_LOG("more extents (%u) than pages (%llu)", q->nr_extents,
		       (unsigned long long)q->nr_pages);
	for (i = 0; i < q->nr_extents; i++) {
		ASSERT_EQ(off, e[i].offset)
			TH_LOG("extent %llu: offset 0x%llx, expected 0x%llx "
			       "(extents must tile the region in order)",
			       (unsigned long long)i,
			       (unsigned long long)e[i].offset,
			       (unsigned long long)off);
		ASSERT_EQ(0, e[i].offset % PG);
		ASSERT_NE(0, e[i].len) TH_LOG("extent %llu is empty",
					     (unsigned long long)i);
		ASSERT_EQ(0, e[i].len % PG)
			TH_LOG("extent %llu: len 0x%llx not a multiple of 4096",
			       (unsigned long long)i,
			       (unsigned long long)e[i].len);
		switch (phys) {
		case PHYS_ANY:
			break;
		case PHYS_ZERO:
			ASSERT_EQ(0, e[i].phys)
				TH_LOG("extent %llu: phys 0x%llx leaked to a "
				       "caller without CAP_SYS_ADMIN",
				       (unsigned long long)i,
				       (unsigned long long)e[i].phys);
			break;
		case PHYS_NONZERO:
			ASSERT_NE(0, e[i].phys)
				TH_LOG("extent %llu: phys 0 for CAP_SYS_ADMIN",
				       (unsigned long long)i);
			break;
		case PHYS_PAGEMAP: {
			uint64_t pfn0, pfn, p;

			ASSERT_NE(0, e[i].phys)
				TH_LOG("extent %llu: phys 0 for CAP_SYS_ADMIN",
				       (unsigned long long)i);
			ASSERT_EQ(0, e[i].phys % PG);
			ASSERT_EQ(0, pagemap_pfn(first_page + e[i].offset,
						 &pfn0));
			ASSERT_NE(0, pfn0) TH_LOG("pagemap shows no PFN "
						  "(not root?)");
			ASSERT_EQ(pfn0 * PG, e[i].phys)
				TH_LOG("extent %llu: phys 0x%llx, pagemap PFN "
				       "0x%llx", (unsigned long long)i,
				       (unsigned long long)e[i].phys,
				       (unsigned long long)pfn0);
			for (p = 1; p < e[i].len / PG; p++) {
				ASSERT_EQ(0, pagemap_pfn(first_page + e[i].offset
							 + p * PG, &pfn));
				ASSERT_EQ(pfn0 + p, pfn)
					TH_LOG("extent %llu page %llu is not "
					       "physically contiguous",
					       (unsigned long long)i,
					       (unsigned long long)p);
			}
			break;
		}
		}
		off += e[i].len;
	}
	ASSERT_EQ(q->nr_pages * PG, off)
		TH_LOG("extents cover 0x%llx bytes, region spans %llu pages",
		       (unsigned long long)off,
		       (unsigned long long)q->nr_pages);
}

/* ------------------------------------------------------------------ */
/* children                                                            */
/* ------------------------------------------------------------------ */

/* In a forked child: report a failed check on stderr and _exit(code). */
#define CHILD_CHECK(cond, code) do { \
	if (!(cond)) { \
		fprintf(stderr, "# child %d: %s:%d: check failed: %s " \
			"(errno %d)\n", getpid(), __FILE__, __LINE__, #cond, \
			errno); \
		_exit(code); \
	} \
} while (0)

/* Wait for pid; return its exit code, or 128 + signal. */
static HC_UNUSED int wait_child(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return -1;
}

/* Become uid/gid 65534 ("nobody"): drops every capability. */
static HC_UNUSED int become_nobody(void)
{
	if (setgroups(0, NULL))
		return -errno;
	if (setgid(65534) || setuid(65534))
		return -errno;
	return 0;
}

#endif /* HCOMM_SELFTEST_UTIL_H */
