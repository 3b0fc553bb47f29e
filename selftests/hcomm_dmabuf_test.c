// SPDX-License-Identifier: GPL-2.0
/*
 * hcomm: REG_DMABUF with udmabuf, vgem and the dma-heap system heap (each
 * skipped with a reason where the kernel lacks it), whole buffers and
 * page-aligned sub-ranges, QUERY, gauges, every bad dma-buf input, and
 * transfers between dma-buf and host regions (data checked through the
 * dma-buf's own mmap).
 * Every test runs through ioctl() and through io_uring passthrough.
 */
#include "kselftest_harness.h"
#include "hcomm_fixture.h"
#include "hcomm_dmabuf.h"
#include "hcomm_xfer.h"
#include <linux/dma-buf.h>

#define ACC_RW	(HCOMM_ACCESS_LOCAL_WRITE | HCOMM_ACCESS_REMOTE_READ)
#define BUF_SZ	(1 * MiB)

/* Register [off, off+len) of dmabuf, check everything, return the region. */
static uint32_t reg_check(struct __test_metadata *_metadata,
			  FIXTURE_DATA(hcomm) *self,
			  const FIXTURE_VARIANT(hcomm) *variant,
			  int dmabuf, uint64_t off, uint64_t len,
			  uint32_t access)
{
	struct hcomm_extent *e = NULL;
	struct hcomm_stats s0, s1;
	struct hcomm_reg_dmabuf a;
	struct hcomm_query q;
	int ret;

	ASSERT_STATS(s0);
	ret = hc_reg_dmabuf(self->fd, self->r, dmabuf, off, len, access, &a);
	ASSERT_EQ(0, ret) TH_LOG("REG_DMABUF off %llu len %llu: %s",
				 (unsigned long long)off,
				 (unsigned long long)len, strerror(-ret));
	ASSERT_STATS(s1);
	ASSERT_NE(0, a.region);
	ASSERT_NE(0, a.key);
	ASSERT_DELTA(s0, s1, regions, 1);
	ASSERT_DELTA(s0, s1, dmabuf_regions, 1);
	ASSERT_DELTA(s0, s1, host_regions, 0);
	ASSERT_DELTA(s0, s1, cmd_reg_dmabuf, 1);
	ASSERT_DELTA(s0, s1, cmd_errors, 0);
	ASSERT_EQ(path_ctr(s0, variant) + 1, path_ctr(s1, variant));

	ret = hc_query_all(self->fd, self->r, a.region, &q, &e);
	ASSERT_EQ(0, ret) TH_LOG("QUERY: %s", strerror(-ret));
	ASSERT_EQ(HCOMM_REGION_DMABUF, q.type);
	ASSERT_EQ(off, q.addr) TH_LOG("QUERY addr of a dma-buf region is the "
				      "offset into the dma-buf");
	ASSERT_EQ(len, q.len);
	ASSERT_EQ(a.key, q.key);
	ASSERT_EQ((len + PG - 1) / PG, q.nr_pages);
	ASSERT_EQ(0, q.offset);
	ASSERT_EQ(access, q.access);
	ASSERT_EQ(HCOMM_STATE_ACTIVE, q.state);
	ASSERT_TRUE(all_zero(&q.reserved, sizeof(q.reserved)));
	check_extents(_metadata, &q, e, PHYS_NONZERO);
	free(e);
	return a.region;
}

static void dmabuf_basic(struct __test_metadata *_metadata,
			 FIXTURE_DATA(hcomm) *self,
			 const FIXTURE_VARIANT(hcomm) *variant,
			 enum dmabuf_provider p)
{
	struct hcomm_stats s0, s1;
	struct hcomm_query q;
	uint32_t reg[4];
	int buf, i;
	off_t size;

	buf = dmabuf_create(p, BUF_SZ);
	if (buf == -ENODEV)
		SKIP(return, "no %s on this kernel", dmabuf_provider_name[p]);
	ASSERT_LE(0, buf) TH_LOG("%s: %s", dmabuf_provider_name[p],
				 strerror(-buf));
	size = dmabuf_size(buf);
	ASSERT_LE((off_t)BUF_SZ, size);
	ASSERT_STATS(s0);

	/* whole buffer */
	reg[0] = reg_check(_metadata, self, variant, buf, 0, size, ACC_RW);
	/* page-aligned sub-range */
	reg[1] = reg_check(_metadata, self, variant, buf, 64 * KiB,
			   128 * KiB, HCOMM_ACCESS_REMOTE_READ);
	/* sub-range with an odd length, ending at the buffer's end */
	reg[2] = reg_check(_metadata, self, variant, buf, size - 4 * PG,
			   3 * PG + 5, HCOMM_ACCESS_ALL);
	/* the last page alone */
	reg[3] = reg_check(_metadata, self, variant, buf, size - PG, PG, 0);

	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, dmabuf_regions, 4);
	ASSERT_DELTA(s0, s1, regions, 4);

	/* the regions hold the dma-buf: closing our fd changes nothing */
	ASSERT_EQ(0, close(buf));
	for (i = 0; i < 4; i++) {
		ASSERT_EQ(0, hc_query(self->fd, self->r, reg[i], NULL, 0, &q));
		ASSERT_EQ(HCOMM_STATE_ACTIVE, q.state);
	}
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, dmabuf_regions, 4);

	for (i = 0; i < 4; i++) {
		ASSERT_EQ(0, hc_dereg(self->fd, self->r, reg[i]));
		ASSERT_EQ(-ENOENT, hc_query(self->fd, self->r, reg[i], NULL, 0,
					    &q));
	}
	ASSERT_STATS(s1);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1))
		hcomm_gauges_dump(stderr, "after DEREG", &s0, &s1);
}

TEST_F(hcomm, dmabuf_udmabuf)
{
	dmabuf_basic(_metadata, self, variant, DMABUF_UDMABUF);
}

TEST_F(hcomm, dmabuf_vgem)
{
	dmabuf_basic(_metadata, self, variant, DMABUF_VGEM);
}

TEST_F(hcomm, dmabuf_heap_system)
{
	dmabuf_basic(_metadata, self, variant, DMABUF_HEAP);
}

/* CPU access to a dma-buf's mmap, bracketed as the dma-buf ABI asks. */
static int dmabuf_sync(int buf, uint64_t flags)
{
	struct dma_buf_sync sync = { .flags = flags };

	return ioctl(buf, DMA_BUF_IOCTL_SYNC, &sync) ? -errno : 0;
}

/*
 * XFER dma-buf -> host and host -> dma-buf, inline and through the engine,
 * at odd offsets and through a region that starts inside the dma-buf; the
 * dma-buf side is read and written through its own mmap.
 */
static void dmabuf_xfer(struct __test_metadata *_metadata,
			FIXTURE_DATA(hcomm) *self,
			const FIXTURE_VARIANT(hcomm) *variant,
			enum dmabuf_provider p)
{
	const uint64_t sub = 64 * KiB;	/* start of the sub-range region */
	const uint64_t lens[] = { 100, 4097, BUF_SZ / 2 + 3 };
	struct hcomm_reg_dmabuf d, ds;
	struct hcomm_reg_mem h;
	struct hcomm_stats s0, s1;
	struct hcomm_xfer x;
	unsigned char *map, *host, *want;
	uint64_t done, bytes = 0;
	int buf, ret;
	size_t i;

	buf = dmabuf_create(p, BUF_SZ);
	if (buf == -ENODEV)
		SKIP(return, "no %s on this kernel", dmabuf_provider_name[p]);
	ASSERT_LE(0, buf) TH_LOG("%s: %s", dmabuf_provider_name[p],
				 strerror(-buf));
	map = mmap(NULL, BUF_SZ, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	ASSERT_NE(MAP_FAILED, map) TH_LOG("mmap of the %s dma-buf: %s",
					  dmabuf_provider_name[p],
					  strerror(errno));
	host = map_anon(BUF_SZ);
	want = malloc(BUF_SZ);
	ASSERT_NE(NULL, host);
	ASSERT_NE(NULL, want);

	ASSERT_EQ(0, dmabuf_sync(buf, DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW));
	hx_fill(map, BUF_SZ, 11);
	ASSERT_EQ(0, dmabuf_sync(buf, DMA_BUF_SYNC_END | DMA_BUF_SYNC_RW));
	hx_fill(host, BUF_SZ, 22);
	ASSERT_EQ(0, hc_reg_dmabuf(self->fd, self->r, buf, 0, BUF_SZ, ACC_RW,
				   &d));
	ASSERT_EQ(0, hc_reg_dmabuf(self->fd, self->r, buf, sub, BUF_SZ - sub,
				   ACC_RW, &ds));
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, host, BUF_SZ, ACC_RW, &h));
	ASSERT_STATS(s0);

	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		uint64_t n = lens[i];

		/* device -> host: dma-buf bytes [3, 3 + n) to host [5, ...) */
		memcpy(want, host, BUF_SZ);
		ASSERT_EQ(0, dmabuf_sync(buf, DMA_BUF_SYNC_START |
					 DMA_BUF_SYNC_READ));
		memcpy(want + 5, map + 3, n);
		ASSERT_EQ(0, dmabuf_sync(buf, DMA_BUF_SYNC_END |
					 DMA_BUF_SYNC_READ));
		hx_xfer_init(&x, d.key, 3, h.key, 5, n, 0);
		ret = hx_xfer(self->fd, self->r, &x, &done);
		ASSERT_EQ(0, ret) TH_LOG("dma-buf -> host, %llu B: %s",
					 (unsigned long long)n, strerror(-ret));
		ASSERT_EQ(SIZE_MAX, hx_first_diff(want, host, BUF_SZ))
			TH_LOG("dma-buf -> host, %llu B: host differs at %zu",
			       (unsigned long long)n,
			       hx_first_diff(want, host, BUF_SZ));

		/* host -> device, into the sub-range region at offset 7 */
		hx_fill(host, BUF_SZ, 33 + i);
		ASSERT_EQ(0, dmabuf_sync(buf, DMA_BUF_SYNC_START |
					 DMA_BUF_SYNC_READ));
		memcpy(want, map, BUF_SZ);
		ASSERT_EQ(0, dmabuf_sync(buf, DMA_BUF_SYNC_END |
					 DMA_BUF_SYNC_READ));
		memcpy(want + sub + 7, host + 1, n);
		hx_xfer_init(&x, h.key, 1, ds.key, 7, n, 0);
		ret = hx_xfer(self->fd, self->r, &x, &done);
		ASSERT_EQ(0, ret) TH_LOG("host -> dma-buf, %llu B: %s",
					 (unsigned long long)n, strerror(-ret));
		ASSERT_EQ(0, dmabuf_sync(buf, DMA_BUF_SYNC_START |
					 DMA_BUF_SYNC_READ));
		ASSERT_EQ(SIZE_MAX, hx_first_diff(want, map, BUF_SZ))
			TH_LOG("host -> dma-buf, %llu B: dma-buf differs at %zu",
			       (unsigned long long)n,
			       hx_first_diff(want, map, BUF_SZ));
		ASSERT_EQ(0, dmabuf_sync(buf, DMA_BUF_SYNC_END |
					 DMA_BUF_SYNC_READ));
		bytes += 2 * n;
	}

	/* dma-buf -> dma-buf (two regions of one buffer, disjoint ranges) */
	ASSERT_EQ(0, dmabuf_sync(buf, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	memcpy(want, map, BUF_SZ);
	ASSERT_EQ(0, dmabuf_sync(buf, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ));
	memmove(want + 9, want + sub + 4096, 8191);
	hx_xfer_init(&x, ds.key, 4096, d.key, 9, 8191, 0);
	ASSERT_EQ(0, hx_xfer(self->fd, self->r, &x, &done));
	bytes += 8191;
	ASSERT_EQ(0, dmabuf_sync(buf, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	ASSERT_EQ(SIZE_MAX, hx_first_diff(want, map, BUF_SZ));
	ASSERT_EQ(0, dmabuf_sync(buf, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ));

	/* beyond the sub-range region's end */
	hx_xfer_init(&x, h.key, 0, ds.key, BUF_SZ - sub - 10, 11, 0);
	ASSERT_EQ(-ERANGE, hx_xfer(self->fd, self->r, &x, &done));

	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cmd_xfer, 2 * ARRAY_SIZE(lens) + 2);
	ASSERT_DELTA(s0, s1, xfer_bytes, bytes);
	ASSERT_DELTA(s0, s1, cmd_errors, 1);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, h.region));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, ds.region));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, d.region));
	munmap(map, BUF_SZ);
	munmap(host, BUF_SZ);
	free(want);
	close(buf);
}

TEST_F(hcomm, dmabuf_xfer_udmabuf)
{
	dmabuf_xfer(_metadata, self, variant, DMABUF_UDMABUF);
}

TEST_F(hcomm, dmabuf_xfer_vgem)
{
	dmabuf_xfer(_metadata, self, variant, DMABUF_VGEM);
}

TEST_F(hcomm, dmabuf_xfer_heap_system)
{
	dmabuf_xfer(_metadata, self, variant, DMABUF_HEAP);
}

/* Host memory and dma-buf regions side by side in one context. */
TEST_F(hcomm, dmabuf_and_host_mixed)
{
	struct hcomm_stats s0, s1;
	struct hcomm_reg_mem h;
	struct hcomm_reg_dmabuf d;
	struct hcomm_info info;
	char *mem = map_anon(4 * PG);
	int buf = dmabuf_any(BUF_SZ, NULL);

	if (buf == -ENODEV)
		SKIP(return, "no dma-buf provider (udmabuf, vgem, dma-heap)");
	ASSERT_LE(0, buf);
	ASSERT_NE(NULL, mem);
	touch(mem, 4 * PG);
	ASSERT_STATS(s0);
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, mem, 4 * PG, ACC_RW, &h));
	ASSERT_EQ(0, hc_reg_dmabuf(self->fd, self->r, buf, 0, BUF_SZ, ACC_RW,
				   &d));
	ASSERT_NE(h.region, d.region);
	ASSERT_NE(h.key, d.key);
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, regions, 2);
	ASSERT_DELTA(s0, s1, host_regions, 1);
	ASSERT_DELTA(s0, s1, dmabuf_regions, 1);
	ASSERT_DELTA(s0, s1, pinned_pages, 4);
	ASSERT_EQ(0, hc_info(self->fd, self->r, &info));
	ASSERT_EQ(2, info.nr_regions);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, d.region));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, h.region));
	close(buf);
	munmap(mem, 4 * PG);
}

static void dmabuf_fails(struct __test_metadata *_metadata,
			 FIXTURE_DATA(hcomm) *self,
			 struct hcomm_reg_dmabuf *a, int err, const char *what)
{
	cmd_fails(_metadata, self, HCOMM_CMD_REG_DMABUF, a, err, what);
}

static void dmabuf_init(struct hcomm_reg_dmabuf *a, int fd, uint64_t off,
			uint64_t len, uint32_t access)
{
	memset(a, 0, sizeof(*a));
	a->fd = fd;
	a->offset = off;
	a->len = len;
	a->access = access;
}

/* fds that are not dma-bufs: EINVAL; fds that are not open: EBADF. */
TEST_F(hcomm, dmabuf_bad_fd)
{
	struct hcomm_reg_dmabuf a;
	int memfd = make_memfd(BUF_SZ, false);
	int closed;

	ASSERT_LE(0, memfd);
	dmabuf_init(&a, memfd, 0, PG, ACC_RW);
	dmabuf_fails(_metadata, self, &a, EINVAL, "memfd");
	dmabuf_init(&a, self->fd, 0, PG, ACC_RW);
	dmabuf_fails(_metadata, self, &a, EINVAL, "/dev/hcomm fd");
	dmabuf_init(&a, 0, 0, PG, ACC_RW);
	if (fcntl(0, F_GETFD) >= 0)
		dmabuf_fails(_metadata, self, &a, EINVAL, "stdin");
	close(memfd);

	closed = make_memfd(PG, false);
	ASSERT_LE(0, closed);
	ASSERT_EQ(0, close(closed));
	dmabuf_init(&a, closed, 0, PG, ACC_RW);
	dmabuf_fails(_metadata, self, &a, EBADF, "closed fd");
	dmabuf_init(&a, -1, 0, PG, ACC_RW);
	dmabuf_fails(_metadata, self, &a, EBADF, "fd -1");
	dmabuf_init(&a, INT_MAX, 0, PG, ACC_RW);
	dmabuf_fails(_metadata, self, &a, EBADF, "fd INT_MAX");
}

/*
 * A dma-buf exported read-only (PRIME without DRM_RDWR) registers for
 * reading only: LOCAL_WRITE or REMOTE_WRITE is EACCES.
 */
TEST_F(hcomm, dmabuf_readonly)
{
	const uint32_t rd = HCOMM_ACCESS_REMOTE_READ;
	struct hcomm_reg_dmabuf a;
	int card = vgem_open(), buf;

	if (card < 0)
		SKIP(return, "no vgem device (%s)", strerror(-card));
	buf = vgem_dmabuf_mode(card, BUF_SZ, true);
	close(card);
	ASSERT_LE(0, buf) TH_LOG("read-only PRIME export: %s", strerror(-buf));
	ASSERT_EQ(O_RDONLY, fcntl(buf, F_GETFL) & O_ACCMODE);
	dmabuf_init(&a, buf, 0, PG, ACC_RW);
	dmabuf_fails(_metadata, self, &a, EACCES, "LOCAL_WRITE, read-only");
	dmabuf_init(&a, buf, 0, PG, HCOMM_ACCESS_ALL);
	dmabuf_fails(_metadata, self, &a, EACCES, "REMOTE_WRITE, read-only");
	ASSERT_EQ(0, hc_reg_dmabuf(self->fd, self->r, buf, 0, PG, rd, &a));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, a.region));
	close(buf);
}

/* A real dma-buf with bad offsets, lengths, access, flags, reserved. */
TEST_F(hcomm, dmabuf_bad_range)
{
	enum dmabuf_provider p;
	struct hcomm_reg_dmabuf a;
	int buf = dmabuf_any(BUF_SZ, &p);
	off_t size;

	if (buf == -ENODEV)
		SKIP(return, "no dma-buf provider (udmabuf, vgem, dma-heap)");
	ASSERT_LE(0, buf);
	size = dmabuf_size(buf);
	ASSERT_LT(0, size);
	TH_LOG("using %s, %lld bytes", dmabuf_provider_name[p],
	       (long long)size);

	dmabuf_init(&a, buf, 0, 0, ACC_RW);
	dmabuf_fails(_metadata, self, &a, EINVAL, "len 0");
	dmabuf_init(&a, buf, 1, PG, ACC_RW);
	dmabuf_fails(_metadata, self, &a, EINVAL, "offset 1");
	dmabuf_init(&a, buf, PG / 2, PG, ACC_RW);
	dmabuf_fails(_metadata, self, &a, EINVAL, "offset 2048");
	dmabuf_init(&a, buf, PG + 8, PG, ACC_RW);
	dmabuf_fails(_metadata, self, &a, EINVAL, "offset 4104");
	dmabuf_init(&a, buf, 0, size + 1, ACC_RW);
	dmabuf_fails(_metadata, self, &a, EINVAL, "len size + 1");
	dmabuf_init(&a, buf, PG, size, ACC_RW);
	dmabuf_fails(_metadata, self, &a, EINVAL, "offset 4096, len size");
	dmabuf_init(&a, buf, size, 1, ACC_RW);
	dmabuf_fails(_metadata, self, &a, EINVAL, "offset size, len 1");
	dmabuf_init(&a, buf, size + PG, PG, ACC_RW);
	dmabuf_fails(_metadata, self, &a, EINVAL, "offset past the end");
	dmabuf_init(&a, buf, 0xfffffffffffff000ULL, 2 * PG, ACC_RW);
	dmabuf_fails(_metadata, self, &a, EINVAL, "offset + len wraps");

	dmabuf_init(&a, buf, 0, PG, 1U << 3);
	dmabuf_fails(_metadata, self, &a, EINVAL, "unknown access bit");
	dmabuf_init(&a, buf, 0, PG, HCOMM_ACCESS_REMOTE_WRITE);
	dmabuf_fails(_metadata, self, &a, EINVAL, "REMOTE_WRITE alone");
	dmabuf_init(&a, buf, 0, PG, ACC_RW);
	a.flags = 1;
	dmabuf_fails(_metadata, self, &a, EINVAL, "flags");
	dmabuf_init(&a, buf, 0, PG, ACC_RW);
	a.reserved[0] = 1;
	dmabuf_fails(_metadata, self, &a, EINVAL, "reserved[0]");
	dmabuf_init(&a, buf, 0, PG, ACC_RW);
	a.reserved[1] = 1;
	dmabuf_fails(_metadata, self, &a, EINVAL, "reserved[1]");

	/* and the same buffer is still fine */
	dmabuf_init(&a, buf, 0, size, ACC_RW);
	ASSERT_EQ(0, submit(self->fd, self->r, HCOMM_CMD_REG_DMABUF, &a));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, a.region));
	close(buf);
}

TEST_HARNESS_MAIN
