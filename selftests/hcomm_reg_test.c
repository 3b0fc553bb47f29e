// SPDX-License-Identifier: GPL-2.0
/*
 * hcomm: GET_INFO, REG_MEM, QUERY, DEREG on host memory, extents (THP,
 * 4 KiB pages, pagemap cross-check, unprivileged phys hiding), region ids
 * and keys, ENOSPC, and multi-GiB ranges that cannot be pinned.
 * Every test runs through ioctl() and through io_uring passthrough.
 */
#include "kselftest_harness.h"
#include "hcomm_fixture.h"

#define ACC_RW	(HCOMM_ACCESS_LOCAL_WRITE | HCOMM_ACCESS_REMOTE_READ)

TEST_F(hcomm, get_info)
{
	struct hcomm_stats s0, s1;
	struct hcomm_info i;
	uint64_t maxsz, maxreg;

	ASSERT_STATS(s0);
	ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
	ASSERT_STATS(s1);

	ASSERT_EQ(HCOMM_ABI_VERSION, i.abi_version);
	ASSERT_EQ(0, i.flags);
	ASSERT_TRUE(i.features & HCOMM_FEAT_URING_CMD)
		TH_LOG("features 0x%llx lack URING_CMD",
		       (unsigned long long)i.features);
	ASSERT_TRUE(i.features & HCOMM_FEAT_DMABUF)
		TH_LOG("features 0x%llx lack DMABUF",
		       (unsigned long long)i.features);
	ASSERT_EQ(0, hcomm_param("max_region_size", &maxsz))
		TH_LOG("cannot read %s/max_region_size", HCOMM_PARAMS);
	ASSERT_EQ(maxsz, i.max_region_size);
	ASSERT_EQ(0, hcomm_param("max_regions", &maxreg))
		TH_LOG("cannot read %s/max_regions", HCOMM_PARAMS);
	ASSERT_EQ(maxreg, (uint64_t)i.max_regions);
	ASSERT_TRUE(i.page_sizes & PG)
		TH_LOG("page_sizes 0x%llx lacks 4 KiB (bit 12)",
		       (unsigned long long)i.page_sizes);
	ASSERT_EQ(0, i.nr_regions);
	ASSERT_EQ(0, i.pinned_bytes);
	/* root holds CAP_IPC_LOCK: no memlock limit applies */
	ASSERT_EQ(~0ULL, i.memlock_limit);
	ASSERT_EQ(0, i.reserved0);
	ASSERT_TRUE(i.max_inline > 0);
	ASSERT_TRUE(i.chunk_size >= 4096);
	ASSERT_TRUE(i.nr_doorbells > 0);

	/* counters: exactly one GET_INFO through exactly one transport */
	ASSERT_DELTA(s0, s1, cmd_get_info, 1);
	ASSERT_EQ(path_ctr(s0, variant) + 1, path_ctr(s1, variant))
		TH_LOG("%s did not count the command", PATH_CTR(variant));
	ASSERT_EQ(other_ctr(s0, variant), other_ctr(s1, variant));
	ASSERT_DELTA(s0, s1, cmd_errors, 0);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1));

	/* nr_regions follows the context */
	{
		char *buf = map_anon(2 * PG);
		struct hcomm_reg_mem a, b;

		ASSERT_NE(NULL, buf);
		touch(buf, 2 * PG);
		ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, PG, ACC_RW, &a));
		ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf + PG, PG, ACC_RW,
					&b));
		ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
		ASSERT_EQ(2, i.nr_regions);
		ASSERT_EQ(0, hc_dereg(self->fd, self->r, a.region));
		ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
		ASSERT_EQ(1, i.nr_regions);
		ASSERT_EQ(0, hc_dereg(self->fd, self->r, b.region));
		ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
		ASSERT_EQ(0, i.nr_regions);
		munmap(buf, 2 * PG);
	}
}

/*
 * Register [addr, addr+len), check the answer, QUERY, the gauges and the
 * counters, DEREG, and check that the id is gone.
 */
static void reg_query_dereg(struct __test_metadata *_metadata,
			    FIXTURE_DATA(hcomm) *self,
			    const FIXTURE_VARIANT(hcomm) *variant,
			    char *addr, uint64_t len, uint32_t access,
			    uint64_t want_pages, uint32_t want_off)
{
	struct hcomm_stats s0, s1, s2;
	struct hcomm_reg_mem r;
	struct hcomm_query q;
	struct hcomm_extent *e = NULL;
	int ret;

	ASSERT_STATS(s0);
	ret = hc_reg_mem(self->fd, self->r, addr, len, access, &r);
	ASSERT_EQ(0, ret) TH_LOG("REG_MEM %p+%llu: %s", addr,
				 (unsigned long long)len, strerror(-ret));
	ASSERT_STATS(s1);
	ASSERT_NE(0, r.region) TH_LOG("region id 0 is reserved");
	ASSERT_NE(0, r.key);
	ASSERT_EQ((uintptr_t)addr, r.addr) TH_LOG("input field clobbered");
	ASSERT_EQ(len, r.len);

	ASSERT_DELTA(s0, s1, regions, 1);
	ASSERT_DELTA(s0, s1, host_regions, 1);
	ASSERT_DELTA(s0, s1, dmabuf_regions, 0);
	ASSERT_DELTA(s0, s1, pinned_pages, want_pages);
	ASSERT_DELTA(s0, s1, contexts, 0);
	ASSERT_DELTA(s0, s1, cmd_reg_mem, 1);
	ASSERT_DELTA(s0, s1, cmd_errors, 0);
	ASSERT_EQ(path_ctr(s0, variant) + 1, path_ctr(s1, variant));

	ret = hc_query_all(self->fd, self->r, r.region, &q, &e);
	ASSERT_EQ(0, ret) TH_LOG("QUERY: %s", strerror(-ret));
	ASSERT_EQ(r.region, q.region);
	ASSERT_EQ(HCOMM_REGION_HOST, q.type);
	ASSERT_EQ((uintptr_t)addr, q.addr);
	ASSERT_EQ(len, q.len);
	ASSERT_EQ(r.key, q.key);
	ASSERT_EQ(want_pages, q.nr_pages);
	ASSERT_EQ(want_off, q.offset);
	ASSERT_EQ(access, q.access);
	ASSERT_EQ(HCOMM_STATE_ACTIVE, q.state);
	ASSERT_TRUE(all_zero(&q.reserved, sizeof(q.reserved)));
	check_extents(_metadata, &q, e, PHYS_PAGEMAP);
	free(e);

	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r.region));
	ASSERT_STATS(s2);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s2))
		hcomm_gauges_dump(stderr, "after DEREG", &s0, &s2);
	ASSERT_DELTA(s1, s2, cmd_dereg, 1);
	ASSERT_EQ(-ENOENT, hc_query(self->fd, self->r, r.region, NULL, 0, &q));
	ASSERT_EQ(-ENOENT, hc_dereg(self->fd, self->r, r.region));
}

TEST_F(hcomm, reg_aligned_4k)
{
	char *buf = map_anon(PG);

	ASSERT_NE(NULL, buf);
	touch(buf, PG);
	reg_query_dereg(_metadata, self, variant, buf, PG, ACC_RW, 1, 0);
	reg_query_dereg(_metadata, self, variant, buf, PG,
			HCOMM_ACCESS_ALL, 1, 0);
	reg_query_dereg(_metadata, self, variant, buf, PG, 0, 1, 0);
	munmap(buf, PG);
}

TEST_F(hcomm, reg_unaligned)
{
	char *buf = map_anon(4 * PG);

	ASSERT_NE(NULL, buf);
	touch(buf, 4 * PG);
	/* odd address, odd length, crosses the page boundary at buf+PG */
	reg_query_dereg(_metadata, self, variant, buf + PG - 7, 13, ACC_RW,
			2, PG - 7);
	/* odd address and length over three pages */
	reg_query_dereg(_metadata, self, variant, buf + 333, 2 * PG + 1,
			HCOMM_ACCESS_REMOTE_READ, 3, 333);
	/* aligned start, odd length: last page partly covered */
	reg_query_dereg(_metadata, self, variant, buf, PG + 1, ACC_RW, 2, 0);
	/* last byte of a page */
	reg_query_dereg(_metadata, self, variant, buf + 4 * PG - 1, 1, ACC_RW,
			1, PG - 1);
	munmap(buf, 4 * PG);
}

TEST_F(hcomm, reg_one_byte)
{
	char *buf = map_anon(PG);

	ASSERT_NE(NULL, buf);
	touch(buf, PG);
	reg_query_dereg(_metadata, self, variant, buf, 1, ACC_RW, 1, 0);
	reg_query_dereg(_metadata, self, variant, buf + 101, 1, ACC_RW, 1, 101);
	munmap(buf, PG);
}

TEST_F_TIMEOUT(hcomm, reg_64mib, 300)
{
	size_t len = 64 * MiB;
	char *buf = map_anon(len);

	ASSERT_NE(NULL, buf);
	if (self->info.max_region_size < len)
		SKIP(return, "max_region_size %llu < 64 MiB",
		     (unsigned long long)self->info.max_region_size);
	touch(buf, len);
	reg_query_dereg(_metadata, self, variant, buf, len, ACC_RW,
			len / PG, 0);
	munmap(buf, len);
}

/*
 * The same pages registered twice are two regions sharing one pin (the
 * registration cache); with HCOMM_REG_NOCACHE they are pinned twice.
 */
TEST_F(hcomm, reg_same_memory_twice)
{
	char *buf = map_anon(4 * PG);
	struct hcomm_stats s0, s1;
	struct hcomm_reg_mem a, b, c;

	ASSERT_NE(NULL, buf);
	touch(buf, 4 * PG);
	ASSERT_STATS(s0);
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, 4 * PG, ACC_RW, &a));
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, 4 * PG, ACC_RW, &b));
	ASSERT_STATS(s1);
	ASSERT_NE(a.region, b.region);
	ASSERT_NE(a.key, b.key);
	ASSERT_EQ(HCOMM_REG_MISS, a.cache);
	ASSERT_EQ(HCOMM_REG_HIT, b.cache);
	ASSERT_DELTA(s0, s1, regions, 2);
	ASSERT_DELTA(s0, s1, pinned_pages, 4);
	ASSERT_DELTA(s0, s1, umems, 1);
	ASSERT_DELTA(s0, s1, cache_hits, 1);
	ASSERT_DELTA(s0, s1, cache_misses, 1);
	memset(&c, 0, sizeof(c));
	c.addr = (uintptr_t)buf;
	c.len = 4 * PG;
	c.access = ACC_RW;
	c.flags = HCOMM_REG_NOCACHE;
	ASSERT_EQ(0, submit(self->fd, self->r, HCOMM_CMD_REG_MEM, &c));
	ASSERT_EQ(HCOMM_REG_MISS, c.cache);
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, pinned_pages, 8);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, c.region));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, a.region));
	/* b survives a's DEREG */
	{
		struct hcomm_query q;

		ASSERT_EQ(0, hc_query(self->fd, self->r, b.region, NULL, 0, &q));
		ASSERT_EQ(b.key, q.key);
	}
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, b.region));
	munmap(buf, 4 * PG);
}

/* QUERY writes min(max_extents, nr_extents) entries and no more. */
TEST_F(hcomm, query_extent_array_bounds)
{
	size_t npg = 64, k;
	char *buf = map_anon(npg * PG);
	struct hcomm_extent e[3];
	struct hcomm_reg_mem r;
	struct hcomm_query q, q0;

	ASSERT_NE(NULL, buf);
	madvise(buf, npg * PG, MADV_NOHUGEPAGE);
	touch(buf, npg * PG);
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, npg * PG, ACC_RW, &r));

	ASSERT_EQ(0, hc_query(self->fd, self->r, r.region, NULL, 0, &q0));
	ASSERT_LE(1, q0.nr_extents);

	/* max_extents 0 with a pointer: nothing written */
	memset(e, 0xa5, sizeof(e));
	ASSERT_EQ(0, hc_query(self->fd, self->r, r.region, e, 0, &q));
	ASSERT_EQ(q0.nr_extents, q.nr_extents);
	for (k = 0; k < sizeof(e); k++)
		ASSERT_EQ(0xa5, ((unsigned char *)e)[k]);

	/* max_extents 1: exactly one written, the next one untouched */
	memset(e, 0xa5, sizeof(e));
	ASSERT_EQ(0, hc_query(self->fd, self->r, r.region, e, 1, &q));
	ASSERT_EQ(q0.nr_extents, q.nr_extents) TH_LOG("nr_extents must be "
						      "the total, not the "
						      "number written");
	ASSERT_EQ(0, e[0].offset);
	ASSERT_NE(0, e[0].len);
	ASSERT_EQ(0, e[0].len % PG);
	for (k = 0; k < sizeof(e[1]); k++)
		ASSERT_EQ(0xa5, ((unsigned char *)&e[1])[k])
			TH_LOG("QUERY wrote past max_extents");

	/* extents == 0 with max_extents > 0: only the header */
	ASSERT_EQ(0, hc_query(self->fd, self->r, r.region, NULL, 8, &q));
	ASSERT_EQ(q0.nr_extents, q.nr_extents);

	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r.region));
	munmap(buf, npg * PG);
}

/*
 * Build npg pages of virtual memory whose neighbours are (almost surely)
 * not physically adjacent: every other page of a touched 2*npg mapping,
 * moved together with mremap().  Gives a region with many extents.
 */
static char *scattered_pages(size_t npg)
{
	char *src = map_anon(2 * npg * PG), *dst;
	size_t i;

	if (!src)
		return NULL;
	madvise(src, 2 * npg * PG, MADV_NOHUGEPAGE);
	touch(src, 2 * npg * PG);
	dst = mmap(NULL, npg * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0);
	if (dst == MAP_FAILED)
		return NULL;
	for (i = 0; i < npg; i++) {
		/* reverse order too, against ascending allocation */
		char *from = src + 2 * (npg - 1 - i) * PG;

		if (mremap(from, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED,
			   dst + i * PG) == MAP_FAILED)
			return NULL;
		dst[i * PG] = (char)i;
	}
	munmap(src, 2 * npg * PG);	/* the odd pages left behind */
	return dst;
}

/* first_extent pages through the table: every window matches one read. */
TEST_F(hcomm, query_extents_paged)
{
	size_t npg = 64;
	char *buf = scattered_pages(npg);
	struct hcomm_extent *all = NULL, win[5];
	struct hcomm_reg_mem r;
	struct hcomm_query q, qa;
	uint32_t n, first, k, step;

	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, npg * PG, ACC_RW, &r));
	ASSERT_EQ(0, hc_query_all(self->fd, self->r, r.region, &qa, &all));
	n = qa.nr_extents;
	TH_LOG("%zu scattered pages -> %u extents", npg, n);
	check_extents(_metadata, &qa, all, PHYS_PAGEMAP);
	ASSERT_LE(2, n) TH_LOG("scattered pages coalesced into one extent?");

	for (step = 1; step <= 4; step += 3) {
		for (first = 0; first < n; first += step) {
			memset(win, 0xa5, sizeof(win));
			memset(&q, 0, sizeof(q));
			q.region = r.region;
			q.extents = (uintptr_t)win;
			q.max_extents = step;
			q.first_extent = first;
			ASSERT_EQ(0, submit(self->fd, self->r, HCOMM_CMD_QUERY,
					    &q));
			ASSERT_EQ(n, q.nr_extents) TH_LOG("nr_extents is the "
							  "total");
			for (k = 0; k < step && first + k < n; k++) {
				ASSERT_EQ(0, memcmp(&all[first + k], &win[k],
						    sizeof(win[k])))
					TH_LOG("extent %u differs when read "
					       "from first_extent %u",
					       first + k, first);
			}
			/* nothing past the last existing extent */
			for (; k < ARRAY_SIZE(win); k++)
				ASSERT_TRUE(((unsigned char *)&win[k])[0] == 0xa5 &&
					    ((unsigned char *)&win[k])[23] == 0xa5)
					TH_LOG("entry %u written past the window "
					       "or past the table", k);
		}
	}

	/* first_extent at or past the end: success, nothing written */
	for (first = n; first <= n + 1; first++) {
		memset(win, 0xa5, sizeof(win));
		memset(&q, 0, sizeof(q));
		q.region = r.region;
		q.extents = (uintptr_t)win;
		q.max_extents = ARRAY_SIZE(win);
		q.first_extent = first;
		ASSERT_EQ(0, submit(self->fd, self->r, HCOMM_CMD_QUERY, &q));
		ASSERT_EQ(n, q.nr_extents);
		ASSERT_EQ(0xa5, ((unsigned char *)win)[0]);
	}
	memset(&q, 0, sizeof(q));
	q.region = r.region;
	q.extents = (uintptr_t)win;
	q.max_extents = 1;
	q.first_extent = ~0ULL;
	ASSERT_EQ(0, submit(self->fd, self->r, HCOMM_CMD_QUERY, &q));

	free(all);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r.region));
	munmap(buf, npg * PG);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * 1000 registrations: ids distinct (among the regions alive together),
 * never 0, keys distinct across all 1000, pinned_pages exact throughout.
 * Runs in batches when max_regions < 1000.
 */
TEST_F_TIMEOUT(hcomm, ids_and_keys_unique_1000, 300)
{
	enum { N = 1000 };
	uint32_t batch = self->info.max_regions < N ? self->info.max_regions : N;
	uint32_t *ids = calloc(N, sizeof(*ids));
	uint32_t *live = calloc(N, sizeof(*live));
	uint64_t *keys = calloc(N, sizeof(*keys));
	char *buf = map_anon(PG);
	struct hcomm_stats s0, s1;
	unsigned int i, done = 0;

	ASSERT_NE(NULL, buf);
	ASSERT_NE(NULL, ids);
	ASSERT_NE(NULL, keys);
	ASSERT_NE(NULL, live);
	ASSERT_LE(1, batch) TH_LOG("max_regions is 0");
	touch(buf, PG);
	ASSERT_STATS(s0);

	while (done < N) {
		unsigned int n = N - done < batch ? N - done : batch;

		for (i = 0; i < n; i++) {
			struct hcomm_reg_mem r;
			int ret = hc_reg_mem(self->fd, self->r,
					     buf + ((done + i) % PG), 1, ACC_RW,
					     &r);

			ASSERT_EQ(0, ret) TH_LOG("registration %u: %s",
						 done + i, strerror(-ret));
			ASSERT_NE(0, r.region);
			ids[done + i] = r.region;
			keys[done + i] = r.key;
		}
		ASSERT_STATS(s1);
		ASSERT_DELTA(s0, s1, regions, n);
		/* one page: the first registration pins it, the rest share */
		ASSERT_DELTA(s0, s1, pinned_pages, 1);

		memcpy(live, ids + done, n * sizeof(*live));
		qsort(live, n, sizeof(*live), cmp_u32);
		for (i = 1; i < n; i++)
			ASSERT_NE(live[i - 1], live[i])
				TH_LOG("region id %u handed out twice", live[i]);

		for (i = 0; i < n; i++)
			ASSERT_EQ(0, hc_dereg(self->fd, self->r, ids[done + i]));
		done += n;
	}
	ASSERT_STATS(s1);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1));

	qsort(keys, N, sizeof(*keys), cmp_u64);
	for (i = 1; i < N; i++)
		ASSERT_NE(keys[i - 1], keys[i]) TH_LOG("key reused");
	for (i = 0; i < N; i++)
		ASSERT_NE(0, keys[i]);
	munmap(buf, PG);
	free(ids);
	free(keys);
	free(live);
}

/* max_regions regions fit, one more gives ENOSPC, after a DEREG one fits. */
TEST_F_TIMEOUT(hcomm, too_many_regions, 300)
{
	/*
	 * Exhausting the default (65536) takes minutes under TCG, so lower
	 * the limit for this test; teardown restores it.
	 */
	uint32_t max = 512, i;
	char *buf = map_anon(PG);
	uint32_t *ids;
	struct hcomm_stats s0, s1;
	struct hcomm_reg_mem r;
	uint64_t old;

	ASSERT_EQ(0, hcomm_param("max_regions", &old));
	ASSERT_EQ(0, hcomm_param_set("max_regions", max));
	self->saved_max_regions = old;
	ASSERT_NE(NULL, buf);
	touch(buf, PG);
	ids = calloc(max + 1, sizeof(*ids));
	ASSERT_NE(NULL, ids);
	for (i = 0; i < max; i++) {
		ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, PG, ACC_RW, &r))
			TH_LOG("registration %u of max_regions %u", i, max);
		ids[i] = r.region;
	}
	ASSERT_STATS(s0);
	ASSERT_EQ(-ENOSPC, hc_reg_mem(self->fd, self->r, buf, PG, ACC_RW, &r));
	ASSERT_STATS(s1);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1))
		hcomm_gauges_dump(stderr, "after ENOSPC", &s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_errors, 1);

	ASSERT_EQ(0, hc_dereg(self->fd, self->r, ids[max / 2]));
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, PG, ACC_RW, &r));
	ids[max / 2] = r.region;
	for (i = 0; i < max; i++)
		ASSERT_EQ(0, hc_dereg(self->fd, self->r, ids[i]));
	free(ids);
	munmap(buf, PG);
}

/* A 2 MiB THP registers as 512 pages in exactly one extent. */
TEST_F_TIMEOUT(hcomm, thp_one_extent, 120)
{
	size_t len = 2 * MiB;
	char enabled[128] = "";
	struct hcomm_extent *e = NULL;
	struct hcomm_reg_mem r;
	struct hcomm_query q;
	uint64_t pfn;
	long kb;
	char *buf;
	FILE *f;

	f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
	if (!f)
		SKIP(return, "kernel without THP support");
	if (!fgets(enabled, sizeof(enabled), f))
		enabled[0] = '\0';
	fclose(f);
	if (strstr(enabled, "[never]"))
		SKIP(return, "THP disabled: %s", enabled);

	buf = map_anon_aligned(len, 2 * MiB);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, madvise(buf, len, MADV_HUGEPAGE));
	touch(buf, len);
	kb = smaps_anon_huge_kb((uintptr_t)buf);
	if (kb < 2048) {
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
		madvise(buf, len, MADV_COLLAPSE);
		kb = smaps_anon_huge_kb((uintptr_t)buf);
	}
	if (kb < 2048)
		SKIP(return, "kernel refused a THP (AnonHugePages %ld kB, "
		     "enabled: %s)", kb, enabled);

	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, len, ACC_RW, &r));
	ASSERT_EQ(0, hc_query_all(self->fd, self->r, r.region, &q, &e));
	ASSERT_EQ(512, q.nr_pages);
	ASSERT_EQ(1, q.nr_extents) TH_LOG("a THP must be one extent, got %u",
					  q.nr_extents);
	ASSERT_EQ(0, q.offset);
	ASSERT_EQ(len, q.len);
	ASSERT_EQ(0, e[0].offset);
	ASSERT_EQ(len, e[0].len);
	ASSERT_EQ(0, pagemap_pfn((uintptr_t)buf, &pfn));
	ASSERT_EQ(pfn * PG, e[0].phys);
	ASSERT_EQ(0, e[0].phys % (2 * MiB)) TH_LOG("THP phys 0x%llx not 2 MiB "
						   "aligned",
						   (unsigned long long)e[0].phys);
	check_extents(_metadata, &q, e, PHYS_PAGEMAP);
	free(e);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r.region));
	munmap(buf, len);
}

/* 4 KiB pages: extents tile the region, phys matches pagemap for root. */
TEST_F_TIMEOUT(hcomm, small_pages_extents_pagemap, 120)
{
	size_t npg = 256, len = npg * PG;
	struct hcomm_extent *e = NULL;
	struct hcomm_reg_mem r;
	struct hcomm_query q;
	char *buf = map_anon_aligned(len, 2 * MiB);

	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, madvise(buf, len, MADV_NOHUGEPAGE));
	/* touch in reverse order: physical pages are less likely in order */
	for (ssize_t i = npg - 1; i >= 0; i--)
		buf[i * PG] = (char)i;
	ASSERT_GE(0, smaps_anon_huge_kb((uintptr_t)buf))
		TH_LOG("MADV_NOHUGEPAGE range got a THP");

	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, len, ACC_RW, &r));
	ASSERT_EQ(0, hc_query_all(self->fd, self->r, r.region, &q, &e));
	ASSERT_EQ(npg, q.nr_pages);
	TH_LOG("%zu small pages -> %u extents", npg, q.nr_extents);
	check_extents(_metadata, &q, e, PHYS_PAGEMAP);
	free(e);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r.region));

	/* unaligned start and end inside the same mapping */
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf + 3 * PG + 5,
				10 * PG, ACC_RW, &r));
	ASSERT_EQ(0, hc_query_all(self->fd, self->r, r.region, &q, &e));
	ASSERT_EQ(11, q.nr_pages);
	ASSERT_EQ(5, q.offset);
	check_extents(_metadata, &q, e, PHYS_PAGEMAP);
	free(e);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r.region));
	munmap(buf, len);
}

/* Without CAP_SYS_ADMIN (uid 65534) every extent's phys reads 0. */
TEST_F(hcomm, extents_phys_hidden_unprivileged)
{
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct rlimit rl = { 64 * MiB, 64 * MiB };
		struct hcomm_extent e[64];
		struct hcomm_reg_mem r;
		struct hcomm_query q;
		struct hc_ctx c;
		char *buf;
		uint32_t k;

		if (self->r)
			io_uring_queue_exit(self->r);
		close(self->fd);
		CHILD_CHECK(setrlimit(RLIMIT_MEMLOCK, &rl) == 0, 2);
		CHILD_CHECK(become_nobody() == 0, 3);
		CHILD_CHECK(hc_ctx_open(&c, variant->uring, 0) == 0, 4);
		buf = map_anon(16 * PG);
		CHILD_CHECK(buf != NULL, 5);
		madvise(buf, 16 * PG, MADV_NOHUGEPAGE);
		touch(buf, 16 * PG);
		CHILD_CHECK(hc_reg_mem(c.fd, c.r, buf, 16 * PG, ACC_RW, &r) == 0,
			    6);
		memset(e, 0xff, sizeof(e));
		CHILD_CHECK(hc_query(c.fd, c.r, r.region, e, 64, &q) == 0, 7);
		CHILD_CHECK(q.nr_pages == 16, 8);
		CHILD_CHECK(q.nr_extents >= 1 && q.nr_extents <= 16, 9);
		for (k = 0; k < q.nr_extents; k++) {
			CHILD_CHECK(e[k].phys == 0, 10);
			CHILD_CHECK(e[k].len && e[k].len % PG == 0, 11);
		}
		CHILD_CHECK(hc_dereg(c.fd, c.r, r.region) == 0, 12);
		hc_ctx_close(&c);
		_exit(0);
	}
	ASSERT_EQ(0, wait_child(pid))
		TH_LOG("unprivileged child failed (exit codes: 3 setuid, "
		       "6 REG_MEM, 10 phys leaked)");
}

/*
 * A huge range of which only the start is accessible: REG_MEM fails with
 * EFAULT and leaves nothing pinned or charged.
 */
TEST_F_TIMEOUT(hcomm, multi_gib_prot_none_efault, 300)
{
	uint64_t len = 4 * GiB, rw;
	struct hcomm_stats s0, s1;
	struct hcomm_reg_mem r;
	char *buf;
	int ret;

	if (self->info.max_region_size < len)
		len = self->info.max_region_size & ~(PG - 1);
	if (len < 4 * PG)
		SKIP(return, "max_region_size too small");
	rw = len / 2 < 64 * MiB ? len / 2 : 64 * MiB;
	TH_LOG("range %llu MiB, accessible prefix %llu MiB",
	       (unsigned long long)(len >> 20), (unsigned long long)(rw >> 20));

	buf = mmap(NULL, len, PROT_NONE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ASSERT_NE(MAP_FAILED, buf);
	ASSERT_EQ(0, mprotect(buf, rw, PROT_READ | PROT_WRITE));
	touch(buf, rw);

	ASSERT_STATS(s0);
	ret = hc_reg_mem(self->fd, self->r, buf, len, ACC_RW, &r);
	ASSERT_EQ(-EFAULT, ret) TH_LOG("got %d (%s)", ret, strerror(-ret));
	ASSERT_EQ(-EFAULT, hc_reg_mem(self->fd, self->r, buf, len,
				      HCOMM_ACCESS_REMOTE_READ, &r));
	ASSERT_STATS(s1);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1))
		hcomm_gauges_dump(stderr, "after EFAULT", &s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_errors, 2);

	/* the accessible prefix alone registers fine */
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, rw, ACC_RW, &r));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r.region));
	munmap(buf, len);
}

/* An unmapped hole in the middle of a range: EFAULT, nothing pinned. */
TEST_F(hcomm, hole_efault)
{
	size_t len = 8 * MiB;
	struct hcomm_stats s0, s1;
	char *buf = map_anon(len);

	ASSERT_NE(NULL, buf);
	touch(buf, len);
	ASSERT_EQ(0, munmap(buf + 4 * MiB, MiB));
	ASSERT_STATS(s0);
	ASSERT_EQ(-EFAULT, hc_reg_mem(self->fd, self->r, buf, len, ACC_RW,
				      NULL));
	/* the hole at the very end and at the very start */
	ASSERT_EQ(-EFAULT, hc_reg_mem(self->fd, self->r, buf, 4 * MiB + 1,
				      ACC_RW, NULL));
	ASSERT_EQ(-EFAULT, hc_reg_mem(self->fd, self->r, buf + 5 * MiB - 1,
				      PG, ACC_RW, NULL));
	ASSERT_STATS(s1);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1))
		hcomm_gauges_dump(stderr, "after EFAULT", &s0, &s1);
	munmap(buf, 4 * MiB);
	munmap(buf + 5 * MiB, 3 * MiB);
}

/* Data written through the mapping is what the pinned pages hold. */
TEST_F(hcomm, pinned_pages_stay_put)
{
	size_t len = 32 * PG;
	struct hcomm_extent *e = NULL, *e2 = NULL;
	struct hcomm_reg_mem r;
	struct hcomm_query q, q2;
	char *buf = map_anon(len);
	uint32_t k;

	ASSERT_NE(NULL, buf);
	madvise(buf, len, MADV_NOHUGEPAGE);
	touch(buf, len);
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, len, ACC_RW, &r));
	ASSERT_EQ(0, hc_query_all(self->fd, self->r, r.region, &q, &e));
	/* writes after registration must not move the pages (no COW) */
	memset(buf, 0x5a, len);
	ASSERT_EQ(0, hc_query_all(self->fd, self->r, r.region, &q2, &e2));
	ASSERT_EQ(q.nr_extents, q2.nr_extents);
	for (k = 0; k < q.nr_extents; k++)
		ASSERT_EQ(e[k].phys, e2[k].phys);
	check_extents(_metadata, &q2, e2, PHYS_PAGEMAP);
	free(e);
	free(e2);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r.region));
	munmap(buf, len);
}

/*
 * A scratch ext2 file system on a loop device, mounted at @dir; false (the
 * test skips) where the kernel has no loop device or ext2/ext4 (the debug
 * kernel) or mkfs is missing.
 */
static bool scratch_fs(const char *dir, const char *img)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd),
		 "mkdir -p %s && truncate -s 32M %s && "
		 "mkfs.ext2 -q -F %s >/dev/null 2>&1 && "
		 "(modprobe loop; modprobe ext4) >/dev/null 2>&1; "
		 "mount -o loop %s %s >/dev/null 2>&1", dir, img, img, img, dir);
	return system(cmd) == 0;
}

/*
 * A writable long-term pin of a MAP_SHARED mapping of a file that writes
 * back (ext2 here) is refused with EOPNOTSUPP on every kernel; the same
 * file read-only, or mapped MAP_PRIVATE, and memfd (shmem) register.
 */
TEST_F(hcomm, file_shared_writable_refused)
{
	const char *dir = "/tmp/hcomm-extfs", *img = "/tmp/hcomm-extfs.img";
	struct hcomm_reg_mem r;
	char path[256];
	void *p, *q, *m;
	int fd, mfd, ret;

	if (!scratch_fs(dir, img))
		SKIP(return, "no loop-mounted ext2 here (loop/ext4 modules, "
			     "mkfs.ext2)");
	snprintf(path, sizeof(path), "%s/f", dir);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, 16 * PG));
	p = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	touch(p, 16 * PG);
	ret = hc_reg_mem(self->fd, self->r, p, 16 * PG, ACC_RW, &r);
	ASSERT_EQ(-EOPNOTSUPP, ret) TH_LOG("writable pin of a shared ext2 "
					   "mapping: %d (%s)", ret,
					   strerror(-ret));
	ret = hc_reg_mem(self->fd, self->r, p, 16 * PG,
			 HCOMM_ACCESS_REMOTE_READ, &r);
	ASSERT_EQ(0, ret) TH_LOG("read-only pin: %s", strerror(-ret));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r.region));
	q = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	ASSERT_NE(MAP_FAILED, q);
	ret = hc_reg_mem(self->fd, self->r, q, 16 * PG, ACC_RW, &r);
	ASSERT_EQ(0, ret) TH_LOG("MAP_PRIVATE: %s", strerror(-ret));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r.region));
	mfd = memfd_create("hcomm", MFD_CLOEXEC);
	ASSERT_LE(0, mfd);
	ASSERT_EQ(0, ftruncate(mfd, 16 * PG));
	m = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	ASSERT_NE(MAP_FAILED, m);
	ret = hc_reg_mem(self->fd, self->r, m, 16 * PG, ACC_RW, &r);
	ASSERT_EQ(0, ret) TH_LOG("memfd: %s", strerror(-ret));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, r.region));
	munmap(m, 16 * PG);
	munmap(q, 16 * PG);
	munmap(p, 16 * PG);
	close(mfd);
	close(fd);
	ret = system("umount /tmp/hcomm-extfs; rm -f /tmp/hcomm-extfs.img");
	(void)ret;
}

TEST_HARNESS_MAIN
