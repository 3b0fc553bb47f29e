// SPDX-License-Identifier: GPL-2.0
/*
 * Fault injection: commands that fail inside the kernel (failslab and
 * fail_page_alloc, limited to this task) must fail cleanly, with every
 * gauge exactly accounting for what did succeed, and nothing left behind
 * once the context closes.  Sites: REG_MEM, REG_DMABUF, the registration
 * cache, XFER (inline and engine, with doorbell signals), and QUERY,
 * GRANT, SET_QOS, SET_CTX, CANCEL, FENCE, DB_WAIT, the doorbell mmap and
 * io_uring rings (other_commands_under_injection).  The debug kernel's
 * kmemleak scan after the run catches anything leaked on those error
 * paths.  usercopy_under_injection fails copies from and to userspace
 * instead (fail_usercopy, where the kernel has it).
 *
 * Needs CONFIG_FAILSLAB, CONFIG_FAIL_PAGE_ALLOC and
 * CONFIG_FAULT_INJECTION_DEBUG_FS (the debug kernel); run_tests.sh runs it
 * only where /sys/kernel/debug/failslab exists.
 */
#include "kselftest_harness.h"
#include "hcomm_util.h"
#include "hcomm_dmabuf.h"

#define DBG	"/sys/kernel/debug/"
#define ROUNDS	400
#define ACC_RW	(HCOMM_ACCESS_LOCAL_WRITE | HCOMM_ACCESS_REMOTE_READ)

struct knob {
	const char *path;
	const char *val;
	bool optional;		/* fail_usercopy: only where configured */
	bool absent;
	char old[32];
};

/*
 * Set in this order and restored in the reverse one: the task filter and
 * silence come before the probability and go after it, so that no other
 * task ever sees an injected failure (with the default verbose 2, each
 * printed a call trace that failed the run's console scan: seen once, in
 * a `sleep` started while the knobs were being set).
 */
static struct knob knobs[] = {
	{ .path = DBG "failslab/task-filter", .val = "Y" },
	{ .path = DBG "failslab/verbose", .val = "0" },
	{ .path = DBG "failslab/space", .val = "0" },
	{ .path = DBG "failslab/times", .val = "-1" },
	{ .path = DBG "failslab/ignore-gfp-wait", .val = "N" },
	{ .path = DBG "failslab/interval", .val = "1" },
	{ .path = DBG "failslab/probability", .val = "25" },
	{ .path = DBG "fail_page_alloc/task-filter", .val = "Y" },
	{ .path = DBG "fail_page_alloc/verbose", .val = "0" },
	{ .path = DBG "fail_page_alloc/space", .val = "0" },
	{ .path = DBG "fail_page_alloc/times", .val = "-1" },
	{ .path = DBG "fail_page_alloc/ignore-gfp-wait", .val = "N" },
	{ .path = DBG "fail_page_alloc/ignore-gfp-highmem", .val = "N" },
	{ .path = DBG "fail_page_alloc/min-order", .val = "0" },
	{ .path = DBG "fail_page_alloc/interval", .val = "1" },
	{ .path = DBG "fail_page_alloc/probability", .val = "25" },
	/* off but for usercopy_under_injection, which turns it on alone */
	{ .path = DBG "fail_usercopy/task-filter", .val = "Y",
	  .optional = true },
	{ .path = DBG "fail_usercopy/verbose", .val = "0", .optional = true },
	{ .path = DBG "fail_usercopy/space", .val = "0", .optional = true },
	{ .path = DBG "fail_usercopy/times", .val = "-1", .optional = true },
	{ .path = DBG "fail_usercopy/interval", .val = "1", .optional = true },
	{ .path = DBG "fail_usercopy/probability", .val = "0",
	  .optional = true },
};

static int put_str(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -EIO;
}

static int get_str(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* Failures are injected only while this task's make-it-fail is 1. */
static void inject(bool on)
{
	/* The write itself may be failed by injection: retry. */
	while (put_str("/proc/thread-self/make-it-fail", on ? "1" : "0"))
		;
}

FIXTURE(fault) {
	int fd;
	struct hcomm_stats base;
	bool saved;
};

/* Save every knob's value; returns the index that failed, or -1. */
static int knobs_save(void)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(knobs); i++) {
		knobs[i].absent = knobs[i].optional &&
				  access(knobs[i].path, F_OK);
		if (!knobs[i].absent &&
		    get_str(knobs[i].path, knobs[i].old, sizeof(knobs[i].old)))
			return i;
	}
	return -1;
}

/*
 * Set every knob to its test value in order, or back to the saved one in
 * the reverse order.
 */
static int knobs_set(bool restore)
{
	unsigned int i, k;

	for (k = 0; k < ARRAY_SIZE(knobs); k++) {
		i = restore ? ARRAY_SIZE(knobs) - 1 - k : k;
		if (!knobs[i].absent && put_str(knobs[i].path, restore ? knobs[i].old : knobs[i].val))
			return i;
	}
	return -1;
}

FIXTURE_SETUP(fault)
{
	int bad;

	self->fd = -1;
	self->saved = false;
	if (access(DBG "failslab", F_OK) || access(DBG "fail_page_alloc", F_OK))
		SKIP(return, "no failslab/fail_page_alloc in this kernel");
	ASSERT_STATS(self->base);
	bad = knobs_save();
	ASSERT_EQ(-1, bad) TH_LOG("cannot read knob %d", bad);
	self->saved = true;
	bad = knobs_set(false);
	ASSERT_EQ(-1, bad) TH_LOG("cannot set knob %d", bad);
	self->fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd);
}

FIXTURE_TEARDOWN(fault)
{
	inject(false);
	if (self->fd >= 0)
		close(self->fd);
	if (self->saved) {
		EXPECT_EQ(-1, knobs_set(true));
		EXPECT_GAUGES(&self->base);
	}
}

TEST_F_TIMEOUT(fault, reg_mem_under_injection, 600)
{
	const size_t area = 4 * MiB;
	char *buf = map_anon(area);
	uint32_t ids[ROUNDS];
	uint64_t npages[ROUNDS], live_pages = 0;
	unsigned int live = 0, ok = 0, failed = 0, i;
	struct hcomm_stats now;

	ASSERT_NE(NULL, buf);
	touch(buf, area);	/* no page faults while injecting */

	for (i = 0; i < ROUNDS; i++) {
		/* Sizes from one byte to ~1 MiB, at odd offsets. */
		uint64_t len = 1 + (uint64_t)(i * 7919) % MiB;
		char *p = buf + (i * 104729) % (area - MiB);
		struct hcomm_reg_mem r;
		int ret;

		/* NOCACHE: overlapping rounds pin their own pages, so the
		 * gauges below are exact (the cache would share them). */
		memset(&r, 0, sizeof(r));
		r.addr = (uintptr_t)p;
		r.len = len;
		r.access = ACC_RW;
		r.flags = HCOMM_REG_NOCACHE;
		inject(true);
		ret = submit(self->fd, NULL, HCOMM_CMD_REG_MEM, &r);
		inject(false);
		if (ret == 0) {
			ok++;
			ids[live] = r.region;
			npages[live] = span_pages((uintptr_t)p, len);
			live_pages += npages[live++];
		} else {
			failed++;
			ASSERT_TRUE(ret == -ENOMEM || ret == -EFAULT)
				TH_LOG("round %u: unexpected %d (%s)", i, ret,
				       strerror(-ret));
		}
		ASSERT_STATS(now);
		ASSERT_EQ(self->base.regions + live, now.regions);
		ASSERT_EQ(self->base.pinned_pages + live_pages,
			  now.pinned_pages) TH_LOG("round %u", i);
		ASSERT_EQ(self->base.memlock_pages + live_pages,
			  now.memlock_pages) TH_LOG("round %u", i);

		/* Every third round, drop the oldest region (no injection). */
		if (live && i % 3 == 2) {
			ASSERT_EQ(0, hc_dereg(self->fd, NULL, ids[0]));
			live_pages -= npages[0];
			live--;
			memmove(ids, ids + 1, live * sizeof(ids[0]));
			memmove(npages, npages + 1, live * sizeof(npages[0]));
		}
	}
	TH_LOG("%u registrations succeeded, %u failed by injection", ok,
	       failed);
	/* Both outcomes must have happened, or the test proved nothing. */
	ASSERT_GT(failed, 0);
	ASSERT_GT(ok, 0);
	munmap(buf, area);
}

TEST_F_TIMEOUT(fault, reg_dmabuf_under_injection, 600)
{
	enum dmabuf_provider which;
	int dbuf = dmabuf_any(MiB, &which);
	unsigned int ok = 0, failed = 0, live = 0, i;
	uint32_t ids[ROUNDS];
	struct hcomm_stats now;

	if (dbuf < 0)
		SKIP(return, "no dma-buf exporter (udmabuf, vgem, dma-heap)");
	for (i = 0; i < ROUNDS / 4; i++) {
		struct hcomm_reg_dmabuf r;
		int ret;

		inject(true);
		ret = hc_reg_dmabuf(self->fd, NULL, dbuf, (i % 16) * PG,
				    PG * (1 + i % 64), ACC_RW, &r);
		inject(false);
		if (ret == 0) {
			ok++;
			ids[live++] = r.region;
		} else {
			failed++;
			ASSERT_EQ(-ENOMEM, ret) TH_LOG("round %u (%s)", i,
						       dmabuf_provider_name[which]);
		}
		ASSERT_STATS(now);
		ASSERT_EQ(self->base.dmabuf_regions + live, now.dmabuf_regions);
	}
	TH_LOG("%s: %u succeeded, %u failed by injection",
	       dmabuf_provider_name[which], ok, failed);
	ASSERT_GT(failed, 0);
	ASSERT_GT(ok, 0);
	for (i = 0; i < live; i++)
		ASSERT_EQ(0, hc_dereg(self->fd, NULL, ids[i]));
	close(dbuf);
}

/*
 * The registration cache under injection: overlapping registrations that
 * share pinned ranges, deregistrations that park ranges in the LRU and
 * evictions, with failing allocations (interval notifiers included).
 * Every call either works or fails with ENOMEM/EFAULT; once everything is
 * deregistered and the cache emptied, nothing stays pinned.
 */
TEST_F_TIMEOUT(fault, cached_reg_under_injection, 600)
{
	const size_t area = 2 * MiB;
	char *buf = map_anon(area);
	unsigned int ok = 0, failed = 0, live = 0, i;
	struct hcomm_ctx_opts o = { .mask = HCOMM_CTX_CACHE_LIMIT,
				    .cache_limit = MiB };
	uint32_t ids[ROUNDS];
	struct hcomm_stats now;

	ASSERT_NE(NULL, buf);
	touch(buf, area);
	ASSERT_EQ(0, submit(self->fd, NULL, HCOMM_CMD_SET_CTX, &o));
	for (i = 0; i < ROUNDS; i++) {
		struct hcomm_reg_mem r;
		int ret;

		memset(&r, 0, sizeof(r));
		r.addr = (uintptr_t)buf + (i % 8) * 64 * KiB + (i % 5);
		r.len = 1 + (i * 4099) % (512 * KiB);
		r.access = i % 2 ? ACC_RW : HCOMM_ACCESS_REMOTE_READ;
		inject(true);
		ret = submit(self->fd, NULL, HCOMM_CMD_REG_MEM, &r);
		inject(false);
		if (ret == 0) {
			ok++;
			ids[live++] = r.region;
		} else {
			failed++;
			ASSERT_TRUE(ret == -ENOMEM || ret == -EFAULT)
				TH_LOG("round %u: unexpected %d (%s)", i, ret,
				       strerror(-ret));
		}
		if (live && i % 2) {
			ASSERT_EQ(0, hc_dereg(self->fd, NULL, ids[0]));
			memmove(ids, ids + 1, --live * sizeof(ids[0]));
		}
		ASSERT_STATS(now);
		ASSERT_EQ(self->base.regions + live, now.regions);
		ASSERT_EQ(now.pinned_pages, now.memlock_pages);
	}
	TH_LOG("%u cached registrations succeeded, %u failed by injection",
	       ok, failed);
	ASSERT_GT(failed, 0);
	ASSERT_GT(ok, 0);
	while (live)
		ASSERT_EQ(0, hc_dereg(self->fd, NULL, ids[--live]));
	o.cache_limit = 0;
	ASSERT_EQ(0, submit(self->fd, NULL, HCOMM_CMD_SET_CTX, &o));
	ASSERT_STATS(now);
	ASSERT_EQ(self->base.pinned_pages, now.pinned_pages);
	ASSERT_EQ(self->base.umems, now.umems);
	ASSERT_EQ(self->base.cache_bytes, now.cache_bytes);
	munmap(buf, area);
}

/*
 * Transfers under injection: inline and engine transfers with doorbell
 * signals (the first one allocates the doorbell array) either complete
 * with every byte in place or fail with ENOMEM having touched nothing in
 * flight; nothing stays active.
 */
TEST_F_TIMEOUT(fault, xfer_under_injection, 600)
{
	const size_t len = 256 * KiB;
	char *src = map_anon(len), *dst = map_anon(len);
	unsigned int ok = 0, failed = 0, i;
	struct hcomm_reg_mem rs, rd;
	struct hcomm_stats now;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	for (i = 0; i < len; i++)
		src[i] = (char)(i * 31 + 7);
	ASSERT_EQ(0, hc_reg_mem(self->fd, NULL, src, len, ACC_RW, &rs));
	ASSERT_EQ(0, hc_reg_mem(self->fd, NULL, dst, len, ACC_RW, &rd));
	for (i = 0; i < ROUNDS / 2; i++) {
		struct hcomm_xfer x;
		uint64_t n = i % 2 ? 100 + i : 64 * KiB + i;
		uint64_t off = (i * 997) % (len - n);
		int ret;

		memset(&x, 0, sizeof(x));
		x.src_key = rs.key;
		x.dst_key = rd.key;
		x.src_off = off;
		x.dst_off = off;
		x.len = n;
		x.flags = HCOMM_XFER_DB_ADD | (i % 3 ? HCOMM_XFER_NO_INLINE : 0);
		x.db_index = i % 64;
		x.db_value = 1;
		memset(dst + off, 0, n);
		inject(true);
		ret = submit(self->fd, NULL, HCOMM_CMD_XFER, &x);
		inject(false);
		if (ret == 0) {
			ok++;
			ASSERT_EQ(n, x.done);
			ASSERT_EQ(0, memcmp(src + off, dst + off, n))
				TH_LOG("round %u: data differs", i);
		} else {
			failed++;
			ASSERT_EQ(-ENOMEM, ret) TH_LOG("round %u: %d (%s)", i,
						       ret, strerror(-ret));
		}
		ASSERT_STATS(now);
		ASSERT_EQ(self->base.xfers_active, now.xfers_active);
	}
	TH_LOG("%u transfers succeeded, %u failed by injection", ok, failed);
	ASSERT_GT(failed, 0);
	ASSERT_GT(ok, 0);
	ASSERT_EQ(0, hc_dereg(self->fd, NULL, rs.region));
	ASSERT_EQ(0, hc_dereg(self->fd, NULL, rd.region));
	munmap(src, len);
	munmap(dst, len);
}

/*
 * The other commands under injection, through ioctl and io_uring: QUERY,
 * GRANT, SET_QOS, SET_CTX, CANCEL, FENCE, DB_WAIT (the first parks the
 * wait machinery) and the doorbell mmap (the first allocates the
 * doorbell pages).  Each either works or fails with ENOMEM (DB_WAIT also
 * with ETIME, its timeout; a ring whose own allocation failed is
 * skipped), and afterwards the context works normally and every gauge is
 * back.
 */
TEST_F_TIMEOUT(fault, other_commands_under_injection, 600)
{
	const size_t len = 64 * KiB;
	char *buf = map_anon(len);
	unsigned int ok[9] = { 0 }, failed[9] = { 0 }, xport = 0, i, k;
	struct hcomm_reg_mem r;
	struct hcomm_info info;
	struct io_uring ring;
	bool have_ring = false;
	static const char *const what[9] = {
		"QUERY", "GRANT", "SET_QOS", "SET_CTX", "CANCEL", "FENCE",
		"DB_WAIT", "mmap", "io_uring ring",
	};

	ASSERT_NE(NULL, buf);
	touch(buf, len);
	ASSERT_EQ(0, hc_reg_mem(self->fd, NULL, buf, len, ACC_RW, &r));
	memset(&info, 0, sizeof(info));
	ASSERT_EQ(0, submit(self->fd, NULL, HCOMM_CMD_GET_INFO, &info));
	for (i = 0; i < ROUNDS / 2; i++) {
		struct hcomm_extent ext[4];
		struct hcomm_query q = { .region = r.region,
					 .extents = (uintptr_t)ext,
					 .max_extents = 4 };
		struct hcomm_grant g = { .region = r.region,
					 .scope = 1 + i % 3,
					 .access = HCOMM_ACCESS_REMOTE_READ };
		struct hcomm_qos qos = { .min_rate = i % 20,
					 .max_rate = 50 + i % 51,
					 .priority = i % 8 };
		struct hcomm_ctx_opts co = { .mask = HCOMM_CTX_CACHE_LIMIT |
						     HCOMM_CTX_MAX_INLINE,
					     .max_inline = info.max_inline >>
							   (i % 3),
					     .cache_limit = (i % 4) * MiB };
		struct hcomm_cancel c = { .tag = i, .flags = i % 2 };
		struct hcomm_fence f = { .tag = i };
		struct hcomm_db_wait w = { .index = i % 8, .value = ~0ULL,
					   .timeout_ns = 100000 };
		void *args[7] = { &q, &g, &qos, &co, &c, &f, &w };
		static const unsigned int cmds[7] = {
			HCOMM_CMD_QUERY, HCOMM_CMD_GRANT, HCOMM_CMD_SET_QOS,
			HCOMM_CMD_SET_CTX, HCOMM_CMD_CANCEL, HCOMM_CMD_FENCE,
			HCOMM_CMD_DB_WAIT,
		};
		void *db;
		int ret;

		/*
		 * A fresh ring every 8 rounds, set up without injection
		 * (io_uring's own allocations fail it nearly always, and
		 * then no command would take the io_uring path).
		 */
		if (i % 8 == 0) {
			if (have_ring)
				io_uring_queue_exit(&ring);
			have_ring = !io_uring_queue_init(8, &ring, 0);
			(have_ring ? ok : failed)[8]++;
		}
		for (k = 0; k < 7; k++) {
			bool uring = have_ring && (i / 2) % 2;

			inject(true);
			ret = submit(self->fd, uring ? &ring : NULL, cmds[k],
				     args[k]);
			inject(false);
			if (!ret || (k == 6 && ret == -ETIME)) {
				ok[k]++;	/* a wait may end by its timeout */
				continue;
			}
			if (uring && ret <= HC_XPORT_ERR) {
				/*
				 * io_uring's own allocation failed (submit
				 * or the request): not hcomm's; the ring is
				 * dropped until the next fresh one.
				 */
				xport++;
				io_uring_queue_exit(&ring);
				have_ring = false;
				continue;
			}
			failed[k]++;
			/*
			 * Through io_uring also -EAGAIN, and -ECANCELED: a
			 * command punted to io-wq is cancelled by io_uring
			 * when no worker can be created.
			 */
			ASSERT_TRUE(ret == -ENOMEM ||
				    (uring && (ret == -EAGAIN ||
					       ret == -ECANCELED)) ||
				    (k == 2 && ret == -ENOSPC))
				TH_LOG("round %u: %s through %s: %d (%s)", i,
				       what[k], uring ? "io_uring" : "ioctl",
				       ret, strerror(-ret));
		}
		inject(true);
		db = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED,
			  self->fd, HCOMM_MMAP_DOORBELLS);
		ret = db == MAP_FAILED ? -errno : 0;
		inject(false);
		if (!ret) {
			ok[7]++;
			*(volatile uint64_t *)db += 1;
			munmap(db, PG);
		} else {
			failed[7]++;
			ASSERT_EQ(-ENOMEM, ret) TH_LOG("round %u: mmap: %s", i,
						       strerror(-ret));
		}
	}
	if (have_ring)
		io_uring_queue_exit(&ring);
	for (k = 0; k < 9; k++)
		TH_LOG("%-14s %3u worked, %3u failed by injection", what[k],
		       ok[k], failed[k]);
	TH_LOG("io_uring submissions failed by injection: %u", xport);
	/* everything works again, and nothing was left behind */
	memset(&info, 0, sizeof(info));
	ASSERT_EQ(0, submit(self->fd, NULL, HCOMM_CMD_GET_INFO, &info));
	ASSERT_EQ(0, hc_dereg(self->fd, NULL, r.region));
	munmap(buf, len);
}

/*
 * fail_usercopy alone (failslab and fail_page_alloc off): every command's
 * copy of its argument in, or of its answer out, may fail.  Each must end
 * with 0 or EFAULT (ETIME for a wait's timeout), through ioctl and
 * io_uring, and a registration whose answer could not be copied out is
 * undone: the gauges count exactly the registrations that returned 0.
 */
TEST_F_TIMEOUT(fault, usercopy_under_injection, 600)
{
	const size_t len = 64 * KiB;
	char *buf;
	unsigned int ok[9] = { 0 }, failed[9] = { 0 }, xport = 0, i, k;
	uint32_t ids[ROUNDS];
	unsigned int live = 0;
	struct hcomm_reg_mem src, dst;
	struct hcomm_stats now;
	struct io_uring ring;
	bool have_ring;
	static const char *const what[9] = {
		"GET_INFO", "REG_MEM", "DEREG", "QUERY", "XFER", "GRANT",
		"SET_QOS", "SET_CTX", "DB_WAIT",
	};

	if (access(DBG "fail_usercopy", F_OK))
		SKIP(return, "no fail_usercopy in this kernel");
	buf = map_anon(4 * len);
	ASSERT_NE(NULL, buf);
	touch(buf, 4 * len);
	ASSERT_EQ(0, hc_reg_mem(self->fd, NULL, buf, len, ACC_RW |
				HCOMM_ACCESS_REMOTE_WRITE, &src));
	ASSERT_EQ(0, hc_reg_mem(self->fd, NULL, buf + len, len, ACC_RW |
				HCOMM_ACCESS_REMOTE_WRITE, &dst));
	ASSERT_EQ(0, io_uring_queue_init(8, &ring, 0));
	have_ring = true;
	/* the teardown puts all three back */
	ASSERT_EQ(0, put_str(DBG "failslab/probability", "0"));
	ASSERT_EQ(0, put_str(DBG "fail_page_alloc/probability", "0"));
	ASSERT_EQ(0, put_str(DBG "fail_usercopy/probability", "25"));

	for (i = 0; i < ROUNDS; i++) {
		bool uring = have_ring && i % 2;
		struct hcomm_info info;
		struct hcomm_reg_mem r = {
			.addr = (uintptr_t)buf + 2 * len + (i % 16) * PG,
			.len = PG + i % 3000, .access = ACC_RW,
			.flags = HCOMM_REG_NOCACHE };
		struct hcomm_dereg d = { 0 };
		struct hcomm_extent ext[4];
		struct hcomm_query q = { .region = src.region,
					 .extents = (uintptr_t)ext,
					 .max_extents = 4 };
		struct hcomm_xfer x = { .src_key = src.key, .src_off = i,
					.dst_key = dst.key, .dst_off = i % 7,
					.len = 1 + i * 13 % 4000 };
		struct hcomm_grant g = { .region = src.region,
					 .scope = 1 + i % 3,
					 .access = HCOMM_ACCESS_REMOTE_READ };
		struct hcomm_qos qos = { .min_rate = i % 20,
					 .max_rate = 50 + i % 51 };
		struct hcomm_ctx_opts co = { .mask = HCOMM_CTX_CACHE_LIMIT,
					     .cache_limit = (i % 4) * MiB };
		struct hcomm_db_wait w = { .index = i % 8, .value = ~0ULL,
					   .timeout_ns = 100000 };
		void *args[9] = { &info, &r, &d, &q, &x, &g, &qos, &co, &w };
		static const unsigned int cmds[9] = {
			HCOMM_CMD_GET_INFO, HCOMM_CMD_REG_MEM, HCOMM_CMD_DEREG,
			HCOMM_CMD_QUERY, HCOMM_CMD_XFER, HCOMM_CMD_GRANT,
			HCOMM_CMD_SET_QOS, HCOMM_CMD_SET_CTX,
			HCOMM_CMD_DB_WAIT,
		};
		int ret;

		memset(&info, 0, sizeof(info));
		for (k = 0; k < 9; k++) {
			if (k == 2) {
				if (!live)
					continue;
				d.region = ids[0];
			}
			inject(true);
			ret = submit(self->fd, uring ? &ring : NULL, cmds[k],
				     args[k]);
			inject(false);
			if (uring && ret <= HC_XPORT_ERR) {
				xport++;	/* io_uring's own copy failed */
				io_uring_queue_exit(&ring);
				have_ring = !io_uring_queue_init(8, &ring, 0);
				uring = have_ring;
				continue;
			}
			if (!ret || (k == 8 && ret == -ETIME)) {
				ok[k]++;
				if (k == 1 && live < ROUNDS)
					ids[live++] = r.region;
				if (k == 2)
					memmove(ids, ids + 1,
						--live * sizeof(ids[0]));
				continue;
			}
			failed[k]++;
			ASSERT_EQ(-EFAULT, ret)
				TH_LOG("round %u: %s through %s: %d (%s)", i,
				       what[k], uring ? "io_uring" : "ioctl",
				       ret, strerror(-ret));
		}
		/* exactly the registrations that said 0 exist */
		ASSERT_STATS(now);
		ASSERT_EQ(self->base.regions + 2 + live, now.regions)
			TH_LOG("round %u: %u registrations returned 0", i,
			       live);
	}
	for (k = 0; k < 9; k++)
		TH_LOG("%-9s %3u worked, %3u failed by injection", what[k],
		       ok[k], failed[k]);
	TH_LOG("io_uring submissions failed by injection: %u", xport);
	ASSERT_GT(failed[1], 0);
	ASSERT_GT(ok[1], 0);
	while (live)
		ASSERT_EQ(0, hc_dereg(self->fd, NULL, ids[--live]));
	if (have_ring)
		io_uring_queue_exit(&ring);
	ASSERT_EQ(0, hc_dereg(self->fd, NULL, src.region));
	ASSERT_EQ(0, hc_dereg(self->fd, NULL, dst.region));
	munmap(buf, 4 * len);
}

TEST_HARNESS_MAIN
