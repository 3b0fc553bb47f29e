// SPDX-License-Identifier: GPL-2.0
/*
 * hcomm registration cache: REG_MEM of a range the context already has
 * pinned (a live region, a sub-range of one, or a deregistered range kept
 * in the LRU) is a hit that pins nothing; access compatibility; NOCACHE;
 * the per-context cache_limit (SET_CTX), LRU eviction order; invalidation
 * by munmap, mremap, madvise(MADV_DONTNEED) and fork(), each checked with
 * a transfer that must see the new bytes; the generation page; and
 * everything given back at close.
 * Every test runs through ioctl() and through io_uring passthrough.
 *
 * Buffers are page aligned, a whole number of pages, and THP is turned off
 * on them, so "bytes kept in the cache" (cache_bytes) is exactly the
 * registered length and pinned_pages moves in known steps.  Keeping
 * deregistered ranges is opt-in (module parameter cache_limit, default 0):
 * tests that need the LRU give their context room with SET_CTX first.
 */
#include "kselftest_harness.h"
#include "hcomm_fixture.h"

#define ACC_RW		(HCOMM_ACCESS_LOCAL_WRITE | HCOMM_ACCESS_REMOTE_READ)
#define ACC_RO		HCOMM_ACCESS_REMOTE_READ
#define NP		16		/* pages of a test buffer */
#define SZ		(NP * PG)
#define ROOM		(64 * MiB)	/* cache_limit of tests using the LRU */

/* ------------------------------------------------------------------ */
/* helpers                                                             */
/* ------------------------------------------------------------------ */

static inline uint8_t pat(uint32_t seed, uint64_t i)
{
	uint32_t x = (uint32_t)i * 0x9E3779B1u + seed * 0x85EBCA6Bu;

	x ^= x >> 15;
	x *= 0x2C1B3C6Du;
	x ^= x >> 12;
	return (uint8_t)x;
}

static void fill(void *p, size_t len, uint32_t seed)
{
	uint8_t *b = p;
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = pat(seed, i);
}

/* Wrong bytes of p[0, len) against pat(seed, src_off + i); *first. */
static size_t pat_diff(const void *p, size_t len, uint32_t seed,
		       size_t src_off, size_t *first)
{
	const uint8_t *b = p;
	size_t i, bad = 0;

	*first = ~(size_t)0;
	for (i = 0; i < len; i++) {
		if (b[i] != pat(seed, src_off + i)) {
			if (!bad)
				*first = i;
			bad++;
		}
	}
	return bad;
}

#define ASSERT_PATTERN(p, len, seed, src_off, what) do { \
	size_t __first, __bad = pat_diff((p), (len), (seed), (src_off), \
					 &__first); \
	ASSERT_EQ(0, __bad) TH_LOG("%s: %zu bytes differ from pattern %u, " \
				   "first at %zu", (what), __bad, \
				   (unsigned int)(seed), __first); \
} while (0)

/* SZ-style buffer: page aligned, no THP, every page faulted in. */
static void *map_buf(size_t len)
{
	void *p = map_anon_aligned(len, 2 * MiB);

	if (!p)
		return NULL;
	madvise(p, len, MADV_NOHUGEPAGE);
	memset(p, 0x5a, len);
	return p;
}

static int reg_flags(FIXTURE_DATA(hcomm) *self, const void *addr,
		     uint64_t len, uint32_t access, uint32_t flags,
		     struct hcomm_reg_mem *out)
{
	memset(out, 0, sizeof(*out));
	out->addr = (uintptr_t)addr;
	out->len = len;
	out->access = access;
	out->flags = flags;
	return submit(self->fd, self->r, HCOMM_CMD_REG_MEM, out);
}

static int set_cache_limit(FIXTURE_DATA(hcomm) *self, uint64_t limit)
{
	struct hcomm_ctx_opts o = { .mask = HCOMM_CTX_CACHE_LIMIT,
				    .cache_limit = limit };

	return submit(self->fd, self->r, HCOMM_CMD_SET_CTX, &o);
}

/* Give the fixture's context an LRU of ROOM bytes. */
#define ASSERT_CACHE_ROOM(self) \
	ASSERT_EQ(0, set_cache_limit((self), ROOM)) \
		TH_LOG("SET_CTX cache_limit %lu", ROOM)

static int xfer(FIXTURE_DATA(hcomm) *self, uint64_t sk, uint64_t so,
		uint64_t dk, uint64_t dof, uint64_t len)
{
	struct hcomm_xfer x = { .src_key = sk, .src_off = so, .dst_key = dk,
				.dst_off = dof, .len = len };

	return submit(self->fd, self->r, HCOMM_CMD_XFER, &x);
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

#define ASSERT_STAT_BECOMES(f, want, what) do { \
	struct hcomm_stats __s; \
	int __r = wait_stat(offsetof(struct hcomm_stats, f), (want), 2000, \
			    &__s); \
	ASSERT_EQ(0, __r) TH_LOG("%s: %s is %" PRIu64 ", want %" PRIu64, \
				 (what), #f, __s.f, (uint64_t)(want)); \
} while (0)

#define ASSERT_HIT(r, what) \
	ASSERT_EQ(HCOMM_REG_HIT, (r).cache) \
		TH_LOG("%s: REG_MEM was a miss, expected a cache hit", (what))
#define ASSERT_MISS(r, what) \
	ASSERT_EQ(HCOMM_REG_MISS, (r).cache) \
		TH_LOG("%s: REG_MEM was a hit, expected a miss", (what))

/* Region @a's pages are physically those of region @b at @pgoff pages. */
static void same_pages(struct __test_metadata *_metadata,
		       FIXTURE_DATA(hcomm) *self, uint32_t a, uint32_t b,
		       uint64_t pgoff)
{
	struct hcomm_extent *ea = NULL, *eb = NULL;
	struct hcomm_query qa, qb;
	uint64_t i, p;

	ASSERT_EQ(0, hc_query_all(self->fd, self->r, a, &qa, &ea));
	ASSERT_EQ(0, hc_query_all(self->fd, self->r, b, &qb, &eb));
	/* flatten: physical address of every page, compare */
	for (p = 0; p < qa.nr_pages; p++) {
		uint64_t pa = 0, pb = 0, off;

		off = p * PG;
		for (i = 0; i < qa.nr_extents; i++)
			if (off >= ea[i].offset && off < ea[i].offset + ea[i].len)
				pa = ea[i].phys + (off - ea[i].offset);
		off = (p + pgoff) * PG;
		for (i = 0; i < qb.nr_extents; i++)
			if (off >= eb[i].offset && off < eb[i].offset + eb[i].len)
				pb = eb[i].phys + (off - eb[i].offset);
		ASSERT_NE(0, pa) TH_LOG("no phys for page %llu (root?)",
					(unsigned long long)p);
		ASSERT_EQ(pb, pa)
			TH_LOG("page %llu of region %u is 0x%llx, page %llu of "
			       "region %u is 0x%llx: a hit must share pages",
			       (unsigned long long)p, a, (unsigned long long)pa,
			       (unsigned long long)(p + pgoff), b,
			       (unsigned long long)pb);
	}
	free(ea);
	free(eb);
}

/* A destination region for checking what a source region holds. */
struct sink {
	uint8_t *buf;
	struct hcomm_reg_mem reg;
};

static void sink_open(struct __test_metadata *_metadata,
		      FIXTURE_DATA(hcomm) *self, struct sink *k)
{
	k->buf = map_buf(SZ);
	ASSERT_NE(NULL, k->buf);
	ASSERT_EQ(0, reg_flags(self, k->buf, SZ, HCOMM_ACCESS_LOCAL_WRITE,
			       HCOMM_REG_NOCACHE, &k->reg));
}

/*
 * Copy @len bytes from offset @so of region key @sk into the sink and
 * check that they are pat(seed) of the source buffer from @so.
 */
#define ASSERT_REGION_HOLDS(self, k, sk, so, len, seed, what) do { \
	int __ret; \
	memset((k)->buf, 0, SZ); \
	__ret = xfer((self), (sk), (so), (k)->reg.key, 0, (len)); \
	ASSERT_EQ(0, __ret) TH_LOG("%s: XFER into the sink: %d", (what), \
				   __ret); \
	ASSERT_PATTERN((k)->buf, (len), (seed), (so), (what)); \
} while (0)

/* ------------------------------------------------------------------ */
/* hits and misses                                                     */
/* ------------------------------------------------------------------ */

/*
 * A new context's cache_limit is the module parameter; SET_CTX changes it
 * (GET_INFO shows it).  With the default limit 0, DEREG unpins at once.
 */
TEST_F(hcomm, cache_info)
{
	struct hcomm_stats s0, s1, s2;
	struct hcomm_reg_mem r;
	struct hcomm_info i;
	uint8_t *buf = map_buf(SZ);
	uint64_t limit;

	ASSERT_NE(NULL, buf);
	ASSERT_TRUE(self->info.features & HCOMM_FEAT_REG_CACHE)
		TH_LOG("features 0x%llx lack HCOMM_FEAT_REG_CACHE",
		       (unsigned long long)self->info.features);
	ASSERT_EQ(0, hcomm_param("cache_limit", &limit))
		TH_LOG("cannot read %s/cache_limit", HCOMM_PARAMS);
	ASSERT_EQ(limit, self->info.cache_limit)
		TH_LOG("a new context's cache_limit is the module parameter");
	ASSERT_EQ(0, self->info.cache_bytes);

	if (limit == 0) {
		ASSERT_STATS(s0);
		ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &r));
		ASSERT_MISS(r, "first registration");
		ASSERT_EQ(0, hc_dereg(self->fd, self->r, r.region));
		ASSERT_STATS(s1);
		ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1))
			hcomm_gauges_dump(stderr, "DEREG with cache_limit 0",
					  &s0, &s1);
		ASSERT_DELTA(s0, s1, cache_misses, 1);
	}

	ASSERT_STATS(s0);
	ASSERT_EQ(0, set_cache_limit(self, 3 * SZ + 1));
	ASSERT_STATS(s2);
	ASSERT_DELTA(s0, s2, cmd_set_ctx, 1);
	ASSERT_DELTA(s0, s2, cmd_errors, 0);
	ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
	ASSERT_EQ(3 * SZ + 1, i.cache_limit);
	ASSERT_EQ(0, i.cache_bytes);
	ASSERT_EQ(self->info.max_inline, i.max_inline)
		TH_LOG("SET_CTX of cache_limit alone changed max_inline");
	/* a new context still starts from the module parameter */
	{
		struct hc_ctx c;

		ASSERT_EQ(0, hc_ctx_open(&c, variant->uring, 0));
		ASSERT_EQ(0, hc_info(c.fd, c.r, &i));
		hc_ctx_close(&c);
		ASSERT_EQ(limit, i.cache_limit);
	}
}

/*
 * The same range twice: the second REG_MEM is a hit with its own id and
 * key, the same physical pages, nothing pinned; the LRU gets the range
 * only once the last of the two regions is gone.
 */
TEST_F(hcomm, reg_twice_hit)
{
	uint8_t *buf = map_buf(SZ);
	struct hcomm_stats s0, s1, s2, s3;
	struct hcomm_reg_mem r1, r2;
	struct hcomm_info i;
	struct sink k;

	ASSERT_NE(NULL, buf);
	fill(buf, SZ, 1);
	sink_open(_metadata, self, &k);
	ASSERT_CACHE_ROOM(self);

	ASSERT_STATS(s0);
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &r1));
	ASSERT_MISS(r1, "first registration");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, pinned_pages, NP);
	ASSERT_DELTA(s0, s1, cache_misses, 1);
	ASSERT_DELTA(s0, s1, cache_hits, 0);

	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &r2));
	ASSERT_HIT(r2, "same range again");
	ASSERT_STATS(s2);
	ASSERT_NE(r1.region, r2.region) TH_LOG("a hit is a new region");
	ASSERT_NE(r1.key, r2.key) TH_LOG("a hit has its own key");
	ASSERT_NE(0, r2.key);
	ASSERT_DELTA(s1, s2, pinned_pages, 0);
	ASSERT_DELTA(s1, s2, memlock_pages, 0);
	ASSERT_DELTA(s1, s2, regions, 1);
	ASSERT_DELTA(s1, s2, host_regions, 1);
	ASSERT_DELTA(s1, s2, cache_hits, 1);
	ASSERT_DELTA(s1, s2, cache_misses, 0);
	ASSERT_DELTA(s1, s2, cache_bytes, 0);
	ASSERT_DELTA(s1, s2, cmd_reg_mem, 1);
	same_pages(_metadata, self, r2.region, r1.region, 0);
	ASSERT_REGION_HOLDS(self, &k, r2.key, 0, SZ, 1, "the hit region");

	/* one region still uses the range: nothing goes to the LRU yet */
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r1.region));
	ASSERT_STATS(s3);
	ASSERT_DELTA(s2, s3, pinned_pages, 0);
	ASSERT_DELTA(s2, s3, cache_bytes, 0);
	ASSERT_DELTA(s2, s3, regions, -1);
	ASSERT_REGION_HOLDS(self, &k, r2.key, 5, SZ - 5, 1,
			    "the hit region after its twin's DEREG");

	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r2.region));
	ASSERT_STATS(s3);
	ASSERT_DELTA(s2, s3, pinned_pages, 0);
	ASSERT_DELTA(s2, s3, cache_bytes, SZ);
	ASSERT_DELTA(s2, s3, regions, -2);
	ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
	ASSERT_EQ(SZ, i.cache_bytes);
	ASSERT_EQ(1, i.nr_regions) TH_LOG("only the sink is left");
}

/*
 * Sub-ranges of a live region are hits (also unaligned ones) on the very
 * same pages; a range reaching past it is a miss.
 */
TEST_F(hcomm, subrange_hit)
{
	uint8_t *buf = map_buf(SZ + PG);
	struct hcomm_reg_mem r1, r2, r3, r4;
	struct hcomm_query q;
	struct hcomm_stats s0, s1;
	struct sink k;

	ASSERT_NE(NULL, buf);
	fill(buf, SZ + PG, 2);
	sink_open(_metadata, self, &k);
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &r1));
	ASSERT_MISS(r1, "whole range");

	ASSERT_STATS(s0);
	ASSERT_EQ(0, reg_flags(self, buf + PG, 3 * PG, ACC_RW, 0, &r2));
	ASSERT_HIT(r2, "aligned sub-range");
	ASSERT_EQ(0, reg_flags(self, buf + 5 * PG + 17, 2 * PG + 3, ACC_RW, 0,
			       &r3));
	ASSERT_HIT(r3, "unaligned sub-range");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, pinned_pages, 0);
	ASSERT_DELTA(s0, s1, cache_hits, 2);
	ASSERT_DELTA(s0, s1, cache_misses, 0);
	ASSERT_DELTA(s0, s1, regions, 2);

	ASSERT_EQ(0, hc_query(self->fd, self->r, r3.region, NULL, 0, &q));
	ASSERT_EQ((uintptr_t)(buf + 5 * PG + 17), q.addr);
	ASSERT_EQ(2 * PG + 3, q.len);
	ASSERT_EQ(3, q.nr_pages);
	ASSERT_EQ(17, q.offset);
	ASSERT_EQ(r3.key, q.key);
	same_pages(_metadata, self, r2.region, r1.region, 1);
	same_pages(_metadata, self, r3.region, r1.region, 5);
	/* offsets are relative to each region's own first byte */
	memset(k.buf, 0, SZ);
	ASSERT_EQ(0, xfer(self, r3.key, 0, k.reg.key, 0, 2 * PG + 3));
	ASSERT_PATTERN(k.buf, 2 * PG + 3, 2, 5 * PG + 17,
		       "bytes of the unaligned sub-range");

	/* one page beyond the live region: not covered, a miss */
	ASSERT_STATS(s0);
	ASSERT_EQ(0, reg_flags(self, buf + SZ - PG, 2 * PG, ACC_RW, 0, &r4));
	ASSERT_MISS(r4, "range reaching past the live region");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cache_misses, 1);
	ASSERT_DELTA(s0, s1, cache_hits, 0);
	ASSERT_LE(s0.pinned_pages + 1, s1.pinned_pages);
	ASSERT_GE(s0.pinned_pages + 2, s1.pinned_pages);

	/* the sub-range outlives the region it hit */
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r1.region));
	memset(k.buf, 0, SZ);
	ASSERT_EQ(0, xfer(self, r2.key, 0, k.reg.key, 0, 3 * PG));
	ASSERT_PATTERN(k.buf, 3 * PG, 2, PG, "bytes of the aligned sub-range");
}

/* Read-only under a writable pin hits; writable under a read-only misses. */
TEST_F(hcomm, access_compat)
{
	uint8_t *buf = map_buf(2 * SZ);
	struct hcomm_reg_mem w, ro, z, ro2, w2;
	struct hcomm_stats s0, s1;
	struct sink k;
	int ret;

	ASSERT_NE(NULL, buf);
	fill(buf, 2 * SZ, 3);
	sink_open(_metadata, self, &k);

	/* first half: pinned writable, then read-only registrations */
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &w));
	ASSERT_MISS(w, "writable");
	ASSERT_STATS(s0);
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RO, 0, &ro));
	ASSERT_HIT(ro, "read-only under writable");
	ASSERT_EQ(0, reg_flags(self, buf + PG, PG, 0, 0, &z));
	ASSERT_HIT(z, "access 0 under writable");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, pinned_pages, 0);
	ASSERT_DELTA(s0, s1, cache_hits, 2);
	/* the read-only region is not writable by its owner */
	ret = xfer(self, k.reg.key, 0, ro.key, 0, 10);
	ASSERT_EQ(-EACCES, ret) TH_LOG("XFER into a region without "
				       "LOCAL_WRITE: %d", ret);

	/* second half: pinned read-only, then a writable registration */
	ASSERT_EQ(0, reg_flags(self, buf + SZ, SZ, ACC_RO, 0, &ro2));
	ASSERT_MISS(ro2, "read-only");
	ASSERT_STATS(s0);
	ASSERT_EQ(0, reg_flags(self, buf + SZ, SZ, ACC_RW, 0, &w2));
	ASSERT_MISS(w2, "writable under a read-only pin");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, pinned_pages, NP);
	ASSERT_DELTA(s0, s1, cache_misses, 1);
	ASSERT_DELTA(s0, s1, cache_hits, 0);

	/* the writable one writes the pages userspace sees */
	fill(k.buf, SZ, 4);
	ASSERT_EQ(0, xfer(self, k.reg.key, 0, w2.key, 0, SZ));
	ASSERT_PATTERN(buf + SZ, SZ, 4, 0, "user view after an XFER into "
		       "the writable registration");
	/* and a read-only registration now has a writable pin to share */
	ASSERT_STATS(s0);
	ASSERT_EQ(0, reg_flags(self, buf + SZ + PG, PG, ACC_RO, 0, &ro));
	ASSERT_HIT(ro, "read-only inside both pins");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, pinned_pages, 0);
}

/*
 * DEREG keeps the pinned range (cache_bytes up, pinned_pages unchanged);
 * the next REG_MEM of it is a hit on the same pages (cache_bytes down).
 */
TEST_F(hcomm, dereg_then_reg_lru_hit)
{
	uint8_t *buf = map_buf(SZ);
	struct hcomm_stats s0, s1, s2;
	struct hcomm_reg_mem r1, r2, r3;
	struct hcomm_info i;
	struct sink k;

	ASSERT_NE(NULL, buf);
	fill(buf, SZ, 5);
	sink_open(_metadata, self, &k);
	ASSERT_CACHE_ROOM(self);
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &r1));
	ASSERT_MISS(r1, "first");
	/* a reference region on the same pages, registered without cache */
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, HCOMM_REG_NOCACHE, &r3));

	ASSERT_STATS(s0);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r1.region));
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cache_bytes, SZ);
	ASSERT_DELTA(s0, s1, pinned_pages, 0);
	ASSERT_DELTA(s0, s1, regions, -1);
	ASSERT_DELTA(s0, s1, cache_evictions, 0);
	ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
	ASSERT_EQ(SZ, i.cache_bytes);

	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &r2));
	ASSERT_HIT(r2, "registration of a range in the LRU");
	ASSERT_STATS(s2);
	ASSERT_NE(r1.key, r2.key) TH_LOG("a key never comes back");
	ASSERT_DELTA(s1, s2, cache_bytes, -(int64_t)SZ);
	ASSERT_DELTA(s1, s2, pinned_pages, 0);
	ASSERT_DELTA(s1, s2, cache_hits, 1);
	ASSERT_DELTA(s1, s2, cache_misses, 0);
	ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
	ASSERT_EQ(0, i.cache_bytes);
	same_pages(_metadata, self, r2.region, r3.region, 0);
	ASSERT_REGION_HOLDS(self, &k, r2.key, 0, SZ, 5, "LRU hit");
	/* the old key stays dead */
	ASSERT_EQ(-ENOENT, xfer(self, r1.key, 0, k.reg.key, 0, 1));
}

/*
 * NOCACHE always pins afresh and never feeds the cache: not kept after
 * DEREG, and not found by a later registration either.
 */
TEST_F(hcomm, nocache_always_misses)
{
	uint8_t *buf = map_buf(SZ);
	struct hcomm_reg_mem n1, n2, c1, n3, c2;
	struct hcomm_stats s0, s1, s2;
	struct sink k;

	ASSERT_NE(NULL, buf);
	fill(buf, SZ, 6);
	sink_open(_metadata, self, &k);
	ASSERT_CACHE_ROOM(self);

	ASSERT_STATS(s0);
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, HCOMM_REG_NOCACHE, &n1));
	ASSERT_MISS(n1, "NOCACHE");
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, HCOMM_REG_NOCACHE, &n2));
	ASSERT_MISS(n2, "NOCACHE twice");
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &c1));
	ASSERT_MISS(c1, "cached registration over live NOCACHE regions");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, pinned_pages, 3 * NP);
	ASSERT_DELTA(s0, s1, cache_misses, 3);
	ASSERT_DELTA(s0, s1, cache_hits, 0);
	ASSERT_REGION_HOLDS(self, &k, n2.key, 0, SZ, 6, "NOCACHE region");

	ASSERT_EQ(0, hc_dereg(self->fd, self->r, n1.region));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, n2.region));
	ASSERT_STATS(s2);
	ASSERT_DELTA(s1, s2, pinned_pages, -2 * (int64_t)NP);
	ASSERT_DELTA(s1, s2, cache_bytes, 0);

	/* a live cached region does not serve NOCACHE either */
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, HCOMM_REG_NOCACHE, &n3));
	ASSERT_MISS(n3, "NOCACHE over a live cached region");
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, n3.region));
	/* the cached region goes to the LRU ... */
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, c1.region));
	ASSERT_STATS(s1);
	ASSERT_DELTA(s2, s1, cache_bytes, SZ);
	ASSERT_DELTA(s2, s1, pinned_pages, 0);
	/* ... and NOCACHE does not take it from there */
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, HCOMM_REG_NOCACHE, &n3));
	ASSERT_MISS(n3, "NOCACHE with the range in the LRU");
	ASSERT_STATS(s2);
	ASSERT_DELTA(s1, s2, pinned_pages, NP);
	ASSERT_DELTA(s1, s2, cache_bytes, 0);
	ASSERT_DELTA(s1, s2, cache_hits, 0);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, n3.region));
	ASSERT_STATS(s2);
	ASSERT_DELTA(s1, s2, pinned_pages, 0);
	ASSERT_DELTA(s1, s2, cache_bytes, 0);
	/* the LRU entry is still there for a normal registration */
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &c2));
	ASSERT_HIT(c2, "normal registration after the NOCACHE ones");

	/* an unknown REG_MEM flag */
	{
		struct hcomm_reg_mem bad = { .addr = (uintptr_t)buf, .len = SZ,
					     .access = ACC_RW, .flags = 1U << 1 };

		cmd_fails(_metadata, self, HCOMM_CMD_REG_MEM, &bad, EINVAL,
			  "REG_MEM flags bit 1");
	}
}

/*
 * cache_limit 0 keeps nothing: the last DEREG of a range unpins it, while
 * live regions are still shared.  Lowering the limit evicts what the LRU
 * holds at once (cache_evictions).
 */
TEST_F(hcomm, limit_zero_keeps_nothing)
{
	uint8_t *buf = map_buf(SZ);
	struct hcomm_reg_mem r1, r2, r3;
	struct hcomm_stats s0, s1, s2;
	struct hcomm_info i;

	ASSERT_NE(NULL, buf);
	ASSERT_STATS(s0);
	ASSERT_EQ(0, set_cache_limit(self, 0));
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cmd_set_ctx, 1);
	ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
	ASSERT_EQ(0, i.cache_limit);

	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &r1));
	ASSERT_MISS(r1, "first");
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &r2));
	ASSERT_HIT(r2, "live regions are shared whatever the limit");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, pinned_pages, NP);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r1.region));
	ASSERT_STATS(s2);
	ASSERT_DELTA(s1, s2, pinned_pages, 0);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r2.region));
	ASSERT_STATS(s2);
	ASSERT_DELTA(s0, s2, pinned_pages, 0);
	ASSERT_DELTA(s0, s2, memlock_pages, 0);
	ASSERT_DELTA(s0, s2, cache_bytes, 0);
	ASSERT_DELTA(s0, s2, regions, 0);

	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &r3));
	ASSERT_MISS(r3, "after a DEREG with cache_limit 0");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s2, s1, pinned_pages, NP);

	/* a roomy limit: DEREG keeps it; lowering to 0 evicts it */
	ASSERT_EQ(0, set_cache_limit(self, 4 * SZ));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r3.region));
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cache_bytes, SZ);
	ASSERT_DELTA(s0, s1, pinned_pages, NP);
	ASSERT_EQ(0, set_cache_limit(self, 0));
	ASSERT_STATS(s2);
	ASSERT_DELTA(s0, s2, cache_bytes, 0);
	ASSERT_DELTA(s0, s2, pinned_pages, 0);
	ASSERT_DELTA(s1, s2, cache_evictions, 1);
	ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
	ASSERT_EQ(0, i.cache_bytes);
}

/*
 * LRU order: limit between one and two buffers; register A and B,
 * deregister A then B: A (the older) is evicted, B stays and hits.
 */
TEST_F(hcomm, lru_evicts_oldest)
{
	uint8_t *a = map_buf(SZ), *b = map_buf(SZ);
	struct hcomm_reg_mem ra, rb, ra2, rb2;
	struct hcomm_stats s0, s1, s2;
	struct hcomm_info i;

	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, set_cache_limit(self, SZ + SZ / 2));
	ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
	ASSERT_EQ(SZ + SZ / 2, i.cache_limit);

	ASSERT_STATS(s0);
	ASSERT_EQ(0, reg_flags(self, a, SZ, ACC_RW, 0, &ra));
	ASSERT_EQ(0, reg_flags(self, b, SZ, ACC_RW, 0, &rb));
	ASSERT_MISS(ra, "A");
	ASSERT_MISS(rb, "B");
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, ra.region));
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cache_bytes, SZ);
	ASSERT_DELTA(s0, s1, cache_evictions, 0);
	ASSERT_DELTA(s0, s1, pinned_pages, 2 * NP);

	ASSERT_EQ(0, hc_dereg(self->fd, self->r, rb.region));
	ASSERT_STATS(s2);
	ASSERT_DELTA(s1, s2, cache_evictions, 1);
	ASSERT_DELTA(s0, s2, cache_bytes, SZ);
	ASSERT_DELTA(s0, s2, pinned_pages, NP);

	ASSERT_EQ(0, reg_flags(self, b, SZ, ACC_RW, 0, &rb2));
	ASSERT_HIT(rb2, "B, the newer entry, was kept");
	ASSERT_EQ(0, reg_flags(self, a, SZ, ACC_RW, 0, &ra2));
	ASSERT_MISS(ra2, "A, the older entry, was evicted");
	ASSERT_STATS(s1);
	ASSERT_DELTA(s2, s1, cache_hits, 1);
	ASSERT_DELTA(s2, s1, cache_misses, 1);
	ASSERT_DELTA(s0, s1, cache_bytes, 0);
	ASSERT_DELTA(s0, s1, pinned_pages, 2 * NP);
}

TEST_F(hcomm, set_ctx_errors)
{
	struct hcomm_ctx_opts o;
	struct hcomm_info i;

	memset(&o, 0, sizeof(o));
	o.mask = 1U << 2;
	cmd_fails(_metadata, self, HCOMM_CMD_SET_CTX, &o, EINVAL,
		  "unknown mask bit");
	memset(&o, 0, sizeof(o));
	o.mask = HCOMM_CTX_CACHE_LIMIT;
	o.reserved[0] = 1;
	cmd_fails(_metadata, self, HCOMM_CMD_SET_CTX, &o, EINVAL,
		  "reserved[0]");
	memset(&o, 0, sizeof(o));
	o.mask = HCOMM_CTX_CACHE_LIMIT;
	o.reserved[1] = 1;
	cmd_fails(_metadata, self, HCOMM_CMD_SET_CTX, &o, EINVAL,
		  "reserved[1]");
	/* the refused calls changed nothing */
	ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
	ASSERT_EQ(self->info.cache_limit, i.cache_limit);
	/* cache_limit is ignored without its mask bit */
	memset(&o, 0, sizeof(o));
	o.cache_limit = 12345;
	ASSERT_EQ(0, submit(self->fd, self->r, HCOMM_CMD_SET_CTX, &o));
	ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
	ASSERT_EQ(self->info.cache_limit, i.cache_limit);
}

/* ------------------------------------------------------------------ */
/* invalidation                                                        */
/* ------------------------------------------------------------------ */

enum change { CH_MUNMAP, CH_MREMAP, CH_DONTNEED, CH_FORK, CH_TRUNCATE };

static const char * const change_name[] = {
	[CH_MUNMAP] = "munmap+mmap(MAP_FIXED)",
	[CH_MREMAP] = "mremap away and back",
	[CH_DONTNEED] = "madvise(MADV_DONTNEED)",
	[CH_FORK] = "fork()",
	[CH_TRUNCATE] = "ftruncate to 0 and back of a shared memfd mapping",
};

/*
 * CH_TRUNCATE's buffer: SZ bytes of a memfd (shmem), MAP_SHARED, every
 * page faulted in; the fd in *fd.
 */
static void *map_memfd(size_t len, int *fd)
{
	void *p;

	*fd = memfd_create("hcomm-cache", MFD_CLOEXEC);
	if (*fd < 0)
		return NULL;
	p = ftruncate(*fd, (off_t)len) ? MAP_FAILED :
	    mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (p == MAP_FAILED) {
		close(*fd);
		*fd = -1;
		return NULL;
	}
	memset(p, 0x5a, len);
	return p;
}

static void do_change(struct __test_metadata *_metadata, uint8_t *buf,
		      enum change ch, int mfd)
{
	void *p, *tmp;
	pid_t pid;

	switch (ch) {
	case CH_TRUNCATE:
		/* the file's pages go; the mapping then shows new zeroes */
		ASSERT_EQ(0, ftruncate(mfd, 0));
		ASSERT_EQ(0, ftruncate(mfd, SZ));
		ASSERT_TRUE(all_zero(buf, SZ))
			TH_LOG("the truncated file's pages are still mapped");
		break;
	case CH_MUNMAP:
		ASSERT_EQ(0, munmap(buf, SZ));
		p = mmap(buf, SZ, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		ASSERT_EQ((void *)buf, p);
		madvise(buf, SZ, MADV_NOHUGEPAGE);
		ASSERT_TRUE(all_zero(buf, SZ)) TH_LOG("fresh anonymous memory");
		break;
	case CH_MREMAP:
		tmp = mmap(NULL, SZ, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
			   -1, 0);
		ASSERT_NE(MAP_FAILED, tmp);
		p = mremap(buf, SZ, SZ, MREMAP_MAYMOVE | MREMAP_FIXED, tmp);
		ASSERT_EQ(tmp, p) TH_LOG("mremap away: %s", strerror(errno));
		ASSERT_PATTERN(tmp, SZ, 1, 0, "moved mapping");
		p = mremap(tmp, SZ, SZ, MREMAP_MAYMOVE | MREMAP_FIXED, buf);
		ASSERT_EQ((void *)buf, p) TH_LOG("mremap back: %s",
						 strerror(errno));
		break;
	case CH_DONTNEED:
		ASSERT_EQ(0, madvise(buf, SZ, MADV_DONTNEED));
		ASSERT_TRUE(all_zero(buf, SZ))
			TH_LOG("MADV_DONTNEED did not drop the pages");
		break;
	case CH_FORK:
		pid = fork();
		ASSERT_LE(0, pid);
		if (pid == 0) {
			size_t first;

			_exit(pat_diff(buf, SZ, 1, 0, &first) ? 1 : 0);
		}
		ASSERT_EQ(0, wait_child(pid))
			TH_LOG("the child did not see pattern 1");
		break;
	}
}

/*
 * Pattern 1, REG_MEM, [DEREG: the range sits in the LRU], the change,
 * pattern 2 at the same address, REG_MEM again: a miss, and a transfer
 * from it carries pattern 2.  With @live the first region stays: its
 * generation slot moves, it keeps its old pages (pattern 1 where they
 * were not dropped), and after its DEREG those stale pages are not kept.
 */
static void invalidation(struct __test_metadata *_metadata,
			 FIXTURE_DATA(hcomm) *self, enum change ch, bool live)
{
	int mfd = -1;
	uint8_t *buf = ch == CH_TRUNCATE ? map_memfd(SZ, &mfd) : map_buf(SZ);
	struct hcomm_stats s0, s1, s2;
	struct hcomm_reg_mem r1, r2;
	const uint64_t *gen = NULL;
	struct sink k;
	char what[96];

	snprintf(what, sizeof(what), "%s of a %s range", change_name[ch],
		 live ? "live" : "cached");
	ASSERT_NE(NULL, buf);
	fill(buf, SZ, 1);
	sink_open(_metadata, self, &k);
	ASSERT_CACHE_ROOM(self);
	if (live) {
		gen = mmap(NULL, PG, PROT_READ, MAP_SHARED, self->fd,
			   HCOMM_MMAP_GENERATION);
		ASSERT_NE(MAP_FAILED, gen) TH_LOG("mmap generation page: %s",
						  strerror(errno));
	}

	ASSERT_STATS(s0);
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &r1));
	ASSERT_MISS(r1, what);
	if (live) {
		ASSERT_EQ(r1.generation, gen[r1.region % HCOMM_GEN_SLOTS]);
	} else {
		ASSERT_EQ(0, hc_dereg(self->fd, self->r, r1.region));
		ASSERT_STATS(s1);
		ASSERT_DELTA(s0, s1, cache_bytes, SZ);
		ASSERT_DELTA(s0, s1, pinned_pages, NP);
	}

	do_change(_metadata, buf, ch, mfd);
	ASSERT_STATS(s1);
	ASSERT_LE(s0.cache_invalidations + 1, s1.cache_invalidations)
		TH_LOG("%s: cache_invalidations did not move", what);
	if (live) {
		ASSERT_NE(r1.generation, gen[r1.region % HCOMM_GEN_SLOTS])
			TH_LOG("%s: the generation slot did not change", what);
	}

	fill(buf, SZ, 2);
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &r2));
	ASSERT_MISS(r2, what);
	ASSERT_STATS(s2);
	ASSERT_DELTA(s1, s2, cache_misses, 1);
	ASSERT_DELTA(s1, s2, cache_hits, 0);
	ASSERT_REGION_HOLDS(self, &k, r2.key, 0, SZ, 2, what);
	if (live) {
		ASSERT_EQ(r2.generation, gen[r2.region % HCOMM_GEN_SLOTS]);
	}
	/* the stale range is no longer kept in the cache */
	ASSERT_STAT_BECOMES(cache_bytes, s0.cache_bytes, what);
	ASSERT_STAT_BECOMES(pinned_pages, s0.pinned_pages + (live ? 2 : 1) * NP,
			    what);

	if (live) {
		/* like an MR, the live region keeps what it pinned */
		if (ch == CH_MUNMAP || ch == CH_DONTNEED ||
		    ch == CH_TRUNCATE) {
			uint8_t *b3 = map_buf(SZ);
			struct hcomm_reg_mem r3;

			ASSERT_REGION_HOLDS(self, &k, r1.key, 0, SZ, 1,
					    "the live region's own pages");
			/*
			 * and a transfer into it writes those pages, never
			 * the ones the process maps at that address now
			 */
			ASSERT_NE(NULL, b3);
			fill(b3, SZ, 3);
			ASSERT_EQ(0, reg_flags(self, b3, SZ, ACC_RW,
					       HCOMM_REG_NOCACHE, &r3));
			ASSERT_EQ(0, xfer(self, r3.key, 0, r1.key, 0, SZ));
			ASSERT_REGION_HOLDS(self, &k, r1.key, 0, SZ, 3,
					    "the live region after an XFER");
			ASSERT_PATTERN(buf, SZ, 2, 0, "the process's view "
				       "after an XFER into the live region");
			ASSERT_EQ(0, hc_dereg(self->fd, self->r, r3.region));
			munmap(b3, SZ);
		}
		ASSERT_EQ(0, hc_dereg(self->fd, self->r, r1.region));
		ASSERT_STAT_BECOMES(pinned_pages, s0.pinned_pages + NP,
				    "DEREG of the invalidated live region");
		ASSERT_STAT_BECOMES(cache_bytes, s0.cache_bytes,
				    "DEREG of the invalidated live region");
		munmap((void *)gen, PG);
	}
	/* the fresh registration is cacheable as usual */
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r2.region));
	ASSERT_STATS(s2);
	ASSERT_DELTA(s0, s2, cache_bytes, SZ);
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &r1));
	ASSERT_HIT(r1, "re-registration of the fresh range");
	ASSERT_REGION_HOLDS(self, &k, r1.key, 0, SZ, 2, "fresh range, hit");
	if (mfd >= 0)
		close(mfd);
}

TEST_F(hcomm, inval_munmap)
{
	invalidation(_metadata, self, CH_MUNMAP, false);
}

TEST_F(hcomm, inval_mremap)
{
	invalidation(_metadata, self, CH_MREMAP, false);
}

TEST_F(hcomm, inval_madv_dontneed)
{
	invalidation(_metadata, self, CH_DONTNEED, false);
}

TEST_F(hcomm, inval_fork)
{
	invalidation(_metadata, self, CH_FORK, false);
}

TEST_F(hcomm, inval_truncate)
{
	invalidation(_metadata, self, CH_TRUNCATE, false);
}

TEST_F(hcomm, inval_live_truncate)
{
	invalidation(_metadata, self, CH_TRUNCATE, true);
}

TEST_F(hcomm, inval_live_munmap)
{
	invalidation(_metadata, self, CH_MUNMAP, true);
}

TEST_F(hcomm, inval_live_madv_dontneed)
{
	invalidation(_metadata, self, CH_DONTNEED, true);
}

/*
 * The generation page: read-only (PROT_WRITE refused), a region's slot
 * equals reg.generation, does not move while nothing happens to the
 * region's pages (writes, transfers, other registrations elsewhere,
 * unrelated munmap), and moves at DEREG.
 */
TEST_F(hcomm, generation_page)
{
	uint8_t *buf = map_buf(SZ), *other = map_buf(SZ), *junk = map_buf(SZ);
	struct hcomm_reg_mem r, r2, ro;
	struct hcomm_stats s0, s1;
	const uint64_t *gen;
	struct sink k;
	uint32_t slot;
	void *p;

	ASSERT_NE(NULL, buf);
	ASSERT_NE(NULL, other);
	ASSERT_NE(NULL, junk);
	p = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd,
		 HCOMM_MMAP_GENERATION);
	ASSERT_EQ(MAP_FAILED, p) TH_LOG("the generation page mapped writable");
	ASSERT_TRUE(errno == EPERM || errno == EACCES)
		TH_LOG("PROT_WRITE: %s, want EPERM or EACCES", strerror(errno));
	gen = mmap(NULL, PG, PROT_READ, MAP_SHARED, self->fd,
		   HCOMM_MMAP_GENERATION);
	ASSERT_NE(MAP_FAILED, gen) TH_LOG("mmap generation: %s",
					  strerror(errno));

	fill(buf, SZ, 7);
	sink_open(_metadata, self, &k);
	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &r));
	slot = r.region % HCOMM_GEN_SLOTS;
	ASSERT_EQ(r.generation, gen[slot]);

	/* nothing that touches the mapping of buf */
	ASSERT_STATS(s0);
	fill(buf, SZ, 8);
	fill(k.buf, SZ, 9);
	ASSERT_EQ(0, xfer(self, k.reg.key, 3, r.key, 5, SZ - 10));
	ASSERT_PATTERN(buf + 5, SZ - 10, 9, 3, "user view of the XFER");
	ASSERT_REGION_HOLDS(self, &k, r.key, 0, 5, 8, "untouched head");
	ASSERT_EQ(0, reg_flags(self, other, SZ, ACC_RW, 0, &ro));
	munmap(junk, SZ);
	hc_sleep_ms(20);
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cache_invalidations, 0);
	if (ro.region % HCOMM_GEN_SLOTS != slot) {
		ASSERT_EQ(r.generation, gen[slot])
			TH_LOG("slot moved though nothing happened to region "
			       "%u", r.region);
	}

	ASSERT_EQ(0, reg_flags(self, buf, SZ, ACC_RW, 0, &r2));
	ASSERT_HIT(r2, "REG_MEM when nothing changed");
	ASSERT_EQ(r2.generation, gen[r2.region % HCOMM_GEN_SLOTS]);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r2.region));
	if (r2.region % HCOMM_GEN_SLOTS != slot) {
		ASSERT_EQ(r.generation, gen[slot]);
	}

	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r.region));
	ASSERT_NE(r.generation, gen[slot])
		TH_LOG("slot %u still reads the generation of the "
		       "deregistered region", slot);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, ro.region));
	munmap((void *)gen, PG);
}

/* ------------------------------------------------------------------ */
/* release                                                             */
/* ------------------------------------------------------------------ */

/*
 * A context holding live regions, shared (hit) regions and LRU entries:
 * close gives back every pin and every cached byte.
 */
TEST_F(hcomm, close_releases_everything)
{
	uint8_t *a = map_buf(SZ), *b = map_buf(2 * SZ);
	struct hcomm_reg_mem r1, r2, r3, r4;
	struct hcomm_stats s0, s1, s2;
	struct hc_ctx c;

	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_STATS(s0);
	ASSERT_EQ(0, hc_ctx_open(&c, variant->uring, 0));
	{
		struct hcomm_ctx_opts o = { .mask = HCOMM_CTX_CACHE_LIMIT,
					    .cache_limit = ROOM };

		ASSERT_EQ(0, submit(c.fd, c.r, HCOMM_CMD_SET_CTX, &o));
	}
	ASSERT_EQ(0, hc_reg_mem(c.fd, c.r, a, SZ, ACC_RW, &r1));
	ASSERT_EQ(0, hc_reg_mem(c.fd, c.r, a + PG, PG, ACC_RO, &r2));
	ASSERT_HIT(r2, "sub-range");
	ASSERT_EQ(0, hc_reg_mem(c.fd, c.r, b, 2 * SZ, ACC_RW, &r3));
	ASSERT_EQ(0, hc_reg_mem(c.fd, c.r, b + SZ, SZ, ACC_RW, &r4));
	ASSERT_HIT(r4, "second half");
	ASSERT_EQ(0, hc_dereg(c.fd, c.r, r3.region));
	ASSERT_EQ(0, hc_dereg(c.fd, c.r, r4.region));
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cache_bytes, 2 * SZ);
	ASSERT_DELTA(s0, s1, pinned_pages, 3 * NP);
	ASSERT_DELTA(s0, s1, regions, 2);
	hc_ctx_close(&c);
	ASSERT_EQ(0, hcomm_gauges_wait(&s0, &s2, 5000))
		hcomm_gauges_dump(stderr, "after close", &s0, &s2);
	ASSERT_DELTA(s1, s2, cache_hits, 0);
}

TEST_HARNESS_MAIN
