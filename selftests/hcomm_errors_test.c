// SPDX-License-Identifier: GPL-2.0
/*
 * hcomm: every bad input of the contract with its exact errno, through
 * ioctl() and io_uring passthrough; then io_uring specifics (payload size
 * and flags, SQE128 rings, batches).  After each test the debugfs gauges
 * must be back where they were.
 */
#include "kselftest_harness.h"
#include "hcomm_fixture.h"

#define ACC_RW	(HCOMM_ACCESS_LOCAL_WRITE | HCOMM_ACCESS_REMOTE_READ)

/*
 * Submit a REG_MEM that must fail with -err, and check that it counted as
 * one error and changed no gauge.
 */
static void reg_mem_fails(struct __test_metadata *_metadata,
			  FIXTURE_DATA(hcomm) *self,
			  struct hcomm_reg_mem *a, int err, const char *what)
{
	cmd_fails(_metadata, self, HCOMM_CMD_REG_MEM, a, err, what);
}

static void reg_mem_init(struct hcomm_reg_mem *a, void *addr, uint64_t len,
			 uint32_t access)
{
	memset(a, 0, sizeof(*a));
	a->addr = (uintptr_t)addr;
	a->len = len;
	a->access = access;
}

TEST_F(hcomm, reg_mem_bad_args)
{
	char *buf = map_anon(2 * PG);
	uint64_t max = self->info.max_region_size;
	struct hcomm_reg_mem a;
	static const uint32_t bad_access[] = {
		1U << 3, 1U << 4, 1U << 31, HCOMM_ACCESS_ALL | (1U << 3),
		0xffffffffU,
	};
	size_t i;

	ASSERT_NE(NULL, buf);
	touch(buf, 2 * PG);

	reg_mem_init(&a, buf, 0, ACC_RW);
	reg_mem_fails(_metadata, self, &a, EINVAL, "len 0");
	reg_mem_init(&a, buf, 0, 0);
	reg_mem_fails(_metadata, self, &a, EINVAL, "len 0, access 0");

	/* addr + len wraps; len itself is small */
	reg_mem_init(&a, (void *)(uintptr_t)0xfffffffffffff000ULL, 0x2000,
		     ACC_RW);
	reg_mem_fails(_metadata, self, &a, EOVERFLOW, "addr+len overflow");
	reg_mem_init(&a, (void *)(uintptr_t)~0ULL, 2, ACC_RW);
	reg_mem_fails(_metadata, self, &a, EOVERFLOW, "addr ~0, len 2");

	if (max < ~0ULL) {
		reg_mem_init(&a, buf, max + 1, ACC_RW);
		reg_mem_fails(_metadata, self, &a, E2BIG,
			      "len max_region_size + 1");
	}
	if (max < 1ULL << 62) {
		reg_mem_init(&a, buf, 1ULL << 62, ACC_RW);
		reg_mem_fails(_metadata, self, &a, E2BIG, "len 2^62");
	}

	for (i = 0; i < ARRAY_SIZE(bad_access); i++) {
		reg_mem_init(&a, buf, PG, bad_access[i]);
		reg_mem_fails(_metadata, self, &a, EINVAL, "unknown access bit");
	}
	reg_mem_init(&a, buf, PG, HCOMM_ACCESS_REMOTE_WRITE);
	reg_mem_fails(_metadata, self, &a, EINVAL, "REMOTE_WRITE alone");
	reg_mem_init(&a, buf, PG, HCOMM_ACCESS_REMOTE_WRITE |
		     HCOMM_ACCESS_REMOTE_READ);
	reg_mem_fails(_metadata, self, &a, EINVAL,
		      "REMOTE_WRITE|REMOTE_READ without LOCAL_WRITE");

	reg_mem_init(&a, buf, PG, ACC_RW);
	a.flags = 2;
	reg_mem_fails(_metadata, self, &a, EINVAL, "flags 2");
	reg_mem_init(&a, buf, PG, ACC_RW);
	a.flags = 0x80000000U;
	reg_mem_fails(_metadata, self, &a, EINVAL, "flags bit 31");
	reg_mem_init(&a, buf, PG, ACC_RW);
	a.reserved = 1ULL << 63;
	reg_mem_fails(_metadata, self, &a, EINVAL, "reserved");

	/* output fields are not inputs: garbage there is ignored */
	reg_mem_init(&a, buf, PG, ACC_RW);
	a.region = 0xdeadbeef;
	a.key = 0x0123456789abcdefULL;
	ASSERT_EQ(0, submit(self->fd, self->r, HCOMM_CMD_REG_MEM, &a));
	ASSERT_NE(0xdeadbeef, a.region);
	ASSERT_NE(0, a.region);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, a.region));
	munmap(buf, 2 * PG);
}

TEST_F(hcomm, reg_mem_read_only_mapping)
{
	char *buf = map_anon(4 * PG);
	struct hcomm_reg_mem a;
	struct hcomm_query q;

	ASSERT_NE(NULL, buf);
	touch(buf, 4 * PG);
	ASSERT_EQ(0, mprotect(buf, 4 * PG, PROT_READ));

	reg_mem_init(&a, buf, 4 * PG, HCOMM_ACCESS_LOCAL_WRITE);
	reg_mem_fails(_metadata, self, &a, EFAULT, "PROT_READ + LOCAL_WRITE");
	reg_mem_init(&a, buf + 10, 2 * PG, ACC_RW | HCOMM_ACCESS_REMOTE_WRITE);
	reg_mem_fails(_metadata, self, &a, EFAULT, "PROT_READ + ALL");

	/* without LOCAL_WRITE a read-only mapping is fine */
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, 4 * PG,
				HCOMM_ACCESS_REMOTE_READ, &a));
	ASSERT_EQ(0, hc_query(self->fd, self->r, a.region, NULL, 0, &q));
	ASSERT_EQ(HCOMM_ACCESS_REMOTE_READ, q.access);
	ASSERT_EQ(4, q.nr_pages);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, a.region));
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, 4 * PG, 0, &a));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, a.region));

	/* writable first half, read-only second half */
	ASSERT_EQ(0, mprotect(buf, 2 * PG, PROT_READ | PROT_WRITE));
	reg_mem_init(&a, buf, 4 * PG, ACC_RW);
	reg_mem_fails(_metadata, self, &a, EFAULT,
		      "half read-only + LOCAL_WRITE");
	munmap(buf, 4 * PG);
}

TEST_F(hcomm, reg_mem_unmapped)
{
	char *buf = map_anon(4 * PG);
	struct hcomm_reg_mem a;

	ASSERT_NE(NULL, buf);
	touch(buf, 4 * PG);
	ASSERT_EQ(0, munmap(buf + 2 * PG, 2 * PG));

	reg_mem_init(&a, buf + 2 * PG, PG, ACC_RW);
	reg_mem_fails(_metadata, self, &a, EFAULT, "unmapped page");
	reg_mem_init(&a, buf + 2 * PG, PG, HCOMM_ACCESS_REMOTE_READ);
	reg_mem_fails(_metadata, self, &a, EFAULT, "unmapped page, read-only");
	reg_mem_init(&a, buf + PG, PG + 1, ACC_RW);
	reg_mem_fails(_metadata, self, &a, EFAULT, "mapped then unmapped");
	reg_mem_init(&a, NULL, PG, ACC_RW);
	reg_mem_fails(_metadata, self, &a, EFAULT, "address 0");
	/* a kernel address is never user memory */
	reg_mem_init(&a, (void *)(uintptr_t)0xffff888000000000ULL, PG,
		     ACC_RW);
	reg_mem_fails(_metadata, self, &a, EFAULT, "kernel address");
	munmap(buf, 2 * PG);
}

TEST_F(hcomm, dereg_query_unknown_id)
{
	static const uint32_t ids[] = { 0, 1, 2, 4096, 0x7fffffff, 0xffffffff };
	struct hcomm_stats s0, s1;
	struct hcomm_query q;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(ids); i++) {
		ASSERT_STATS(s0);
		ASSERT_EQ(-ENOENT, hc_dereg(self->fd, self->r, ids[i]))
			TH_LOG("DEREG id %u", ids[i]);
		ASSERT_EQ(-ENOENT, hc_query(self->fd, self->r, ids[i], NULL, 0,
					    &q))
			TH_LOG("QUERY id %u", ids[i]);
		ASSERT_STATS(s1);
		ASSERT_DELTA(s0, s1, cmd_errors, 2);
		ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1));
	}
}

/* Region ids belong to their context: another context's id is ENOENT. */
TEST_F(hcomm, region_id_is_per_context)
{
	char *buf = map_anon(PG);
	struct hcomm_reg_mem a;
	struct hcomm_query q;
	struct hc_ctx c;

	ASSERT_NE(NULL, buf);
	touch(buf, PG);
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, PG, ACC_RW, &a));
	ASSERT_EQ(0, hc_ctx_open(&c, variant->uring, 0));
	ASSERT_EQ(-ENOENT, hc_query(c.fd, c.r, a.region, NULL, 0, &q));
	ASSERT_EQ(-ENOENT, hc_dereg(c.fd, c.r, a.region));
	hc_ctx_close(&c);
	/* still there in its own context */
	ASSERT_EQ(0, hc_query(self->fd, self->r, a.region, NULL, 0, &q));
	ASSERT_EQ(a.key, q.key);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, a.region));
	munmap(buf, PG);
}

/* Non-zero flags/reserved on DEREG and QUERY: EINVAL, region untouched. */
TEST_F(hcomm, dereg_query_bad_flags)
{
	char *buf = map_anon(PG);
	struct hcomm_stats s0, s1;
	struct hcomm_reg_mem a;
	struct hcomm_dereg d;
	struct hcomm_query q;
	int k, nq;

	ASSERT_NE(NULL, buf);
	touch(buf, PG);
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, PG, ACC_RW, &a));
	ASSERT_STATS(s0);

	for (k = 0; k < 3; k++) {
		memset(&d, 0, sizeof(d));
		d.region = a.region;
		if (k == 0)
			d.flags = 1;
		else
			d.reserved[k - 1] = 1;
		ASSERT_EQ(-EINVAL, submit(self->fd, self->r, HCOMM_CMD_DEREG, &d))
			TH_LOG("DEREG with %s set", k ? "reserved" : "flags");
	}
	/* QUERY: flags, then each byte of reserved (one word or more) */
	nq = 1 + sizeof(q.reserved);
	for (k = 0; k < nq; k++) {
		memset(&q, 0, sizeof(q));
		q.region = a.region;
		if (k == 0)
			q.flags = 0x100;
		else
			((unsigned char *)&q.reserved)[k - 1] = 0x80;
		ASSERT_EQ(-EINVAL, submit(self->fd, self->r, HCOMM_CMD_QUERY, &q))
			TH_LOG("QUERY with %s set (byte %d)",
			       k ? "reserved" : "flags", k - 1);
	}
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cmd_errors, 3 + nq);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1));

	/* the region survived every rejected DEREG */
	ASSERT_EQ(0, hc_query(self->fd, self->r, a.region, NULL, 0, &q));
	ASSERT_EQ(a.key, q.key);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, a.region));
	munmap(buf, PG);
}

TEST_F(hcomm, query_bad_extent_pointer)
{
	char *buf = map_anon(PG);
	char *ro = mmap(NULL, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct hcomm_reg_mem a;
	struct hcomm_query q;

	ASSERT_NE(NULL, buf);
	ASSERT_NE(MAP_FAILED, ro);
	touch(buf, PG);
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, PG, ACC_RW, &a));
	ASSERT_EQ(-EFAULT, hc_query(self->fd, self->r, a.region,
				    (struct hcomm_extent *)16, 1, &q));
	ASSERT_EQ(-EFAULT, hc_query(self->fd, self->r, a.region,
				    (struct hcomm_extent *)ro, 1, &q))
		TH_LOG("extents in a read-only mapping");
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, a.region));
	munmap(buf, PG);
	munmap(ro, PG);
}

TEST_F(hcomm, get_info_bad_flags)
{
	struct hcomm_info i;

	memset(&i, 0, sizeof(i));
	i.flags = 1;
	ASSERT_EQ(-EINVAL, submit(self->fd, self->r, HCOMM_CMD_GET_INFO, &i));
	memset(&i, 0, sizeof(i));
	i.reserved0 = 1;
	ASSERT_EQ(-EINVAL, submit(self->fd, self->r, HCOMM_CMD_GET_INFO, &i));
	/* output fields carry no input meaning */
	memset(&i, 0xff, sizeof(i));
	i.flags = 0;
	i.reserved0 = 0;
	ASSERT_EQ(0, submit(self->fd, self->r, HCOMM_CMD_GET_INFO, &i));
	ASSERT_EQ(HCOMM_ABI_VERSION, i.abi_version);
	ASSERT_EQ(0, i.nr_regions);
}

/* Wrong size or direction for a known nr: EINVAL.  Unknown: ENOTTY. */
TEST_F(hcomm, bad_command_numbers)
{
	static const struct { unsigned int nr; size_t size; } known[] = {
		{ 0x00, sizeof(struct hcomm_info) },
		{ 0x01, sizeof(struct hcomm_reg_mem) },
		{ 0x02, sizeof(struct hcomm_reg_dmabuf) },
		{ 0x03, sizeof(struct hcomm_dereg) },
		{ 0x04, sizeof(struct hcomm_query) },
		{ 0x05, sizeof(struct hcomm_xfer) },
		{ 0x06, sizeof(struct hcomm_cancel) },
		{ 0x07, sizeof(struct hcomm_fence) },
		{ 0x08, sizeof(struct hcomm_db_wait) },
		{ 0x09, sizeof(struct hcomm_grant) },
		{ 0x0a, sizeof(struct hcomm_qos) },
		{ 0x0b, sizeof(struct hcomm_ctx_opts) },
		{ 0x0c, sizeof(struct hcomm_xfer_batch) },
		{ 0x0d, sizeof(struct hcomm_db_wait_any) },
	};
	/* big enough for any size tried; zeroed so only the size is wrong */
	uint64_t arg[64];
	unsigned int cmd;
	size_t i;

#define SIZED(nr, n)	_IOWR(HCOMM_IOC_MAGIC, nr, char[n])
	for (i = 0; i < ARRAY_SIZE(known); i++) {
		unsigned int nr = known[i].nr;
		size_t sz = known[i].size;
		const unsigned int bad[] = {
			(unsigned int)SIZED(nr, 8),
			(unsigned int)_IOC(_IOC_READ | _IOC_WRITE,
					   HCOMM_IOC_MAGIC, nr, sz - 8),
			(unsigned int)_IOC(_IOC_READ | _IOC_WRITE,
					   HCOMM_IOC_MAGIC, nr, sz + 8),
			(unsigned int)_IOC(_IOC_READ | _IOC_WRITE,
					   HCOMM_IOC_MAGIC, nr, sz + 256),
			(unsigned int)_IOC(_IOC_READ, HCOMM_IOC_MAGIC, nr, sz),
			(unsigned int)_IOC(_IOC_WRITE, HCOMM_IOC_MAGIC, nr, sz),
			(unsigned int)_IOC(_IOC_NONE, HCOMM_IOC_MAGIC, nr, 0),
		};
		size_t k;

		for (k = 0; k < ARRAY_SIZE(bad); k++) {
			int ret;

			memset(arg, 0, sizeof(arg));
			ret = submit(self->fd, self->r, bad[k], arg);
			ASSERT_EQ(-EINVAL, ret)
				TH_LOG("cmd 0x%08x (nr %u size %u dir %u): %d",
				       bad[k], nr, _IOC_SIZE(bad[k]),
				       _IOC_DIR(bad[k]), ret);
		}
	}

	/* unknown nr with hcomm's magic */
	{
		const unsigned int nrs[] = { 0x0e, 0x0f, 0x10, 0x7f, 0xff };

		for (i = 0; i < ARRAY_SIZE(nrs); i++) {
			memset(arg, 0, sizeof(arg));
			cmd = SIZED(nrs[i], 16);
			ASSERT_EQ(-ENOTTY, submit(self->fd, self->r, cmd, arg))
				TH_LOG("nr 0x%x", nrs[i]);
			cmd = _IOWR(HCOMM_IOC_MAGIC, nrs[i],
				    struct hcomm_query);
			ASSERT_EQ(-ENOTTY, submit(self->fd, self->r, cmd, arg))
				TH_LOG("nr 0x%x, query-sized", nrs[i]);
		}
	}
	/* a known nr and size under another magic */
	memset(arg, 0, sizeof(arg));
	cmd = _IOWR(HCOMM_IOC_MAGIC + 1, 0x00, struct hcomm_info);
	ASSERT_EQ(-ENOTTY, submit(self->fd, self->r, cmd, arg));
	cmd = _IOWR('T', 0x01, struct hcomm_reg_mem);
	ASSERT_EQ(-ENOTTY, submit(self->fd, self->r, cmd, arg));
#undef SIZED
}

/* A NULL or wild argument pointer: EFAULT for every command. */
TEST_F(hcomm, bad_arg_pointer)
{
	static const unsigned int cmds[] = {
		HCOMM_CMD_GET_INFO, HCOMM_CMD_REG_MEM, HCOMM_CMD_REG_DMABUF,
		HCOMM_CMD_DEREG, HCOMM_CMD_QUERY, HCOMM_CMD_XFER,
		HCOMM_CMD_CANCEL, HCOMM_CMD_FENCE, HCOMM_CMD_DB_WAIT,
		HCOMM_CMD_GRANT, HCOMM_CMD_SET_QOS, HCOMM_CMD_SET_CTX,
		HCOMM_CMD_XFER_BATCH, HCOMM_CMD_DB_WAIT_ANY,
	};
	struct hcomm_stats s0, s1;
	size_t i;

	ASSERT_STATS(s0);
	for (i = 0; i < ARRAY_SIZE(cmds); i++) {
		ASSERT_EQ(-EFAULT, submit(self->fd, self->r, cmds[i], NULL))
			TH_LOG("cmd nr %u with a NULL argument",
			       _IOC_NR(cmds[i]));
		ASSERT_EQ(-EFAULT, submit(self->fd, self->r, cmds[i],
					  (void *)(uintptr_t)0x10))
			TH_LOG("cmd nr %u with argument 0x10",
			       _IOC_NR(cmds[i]));
	}
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cmd_errors, 2 * ARRAY_SIZE(cmds));
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1));
}

/* The argument struct in a read-only mapping: the output copy faults. */
TEST_F(hcomm, read_only_arg)
{
	struct hcomm_info *i = mmap(NULL, PG, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct hcomm_reg_mem *a;
	char *buf = map_anon(PG);
	struct hcomm_stats s0, s1;

	ASSERT_NE(MAP_FAILED, i);
	ASSERT_NE(NULL, buf);
	touch(buf, PG);
	memset(i, 0, PG);
	a = (struct hcomm_reg_mem *)(i + 1);
	a->addr = (uintptr_t)buf;
	a->len = PG;
	a->access = ACC_RW;
	ASSERT_EQ(0, mprotect(i, PG, PROT_READ));
	ASSERT_STATS(s0);
	ASSERT_EQ(-EFAULT, submit(self->fd, self->r, HCOMM_CMD_GET_INFO, i));
	/* a REG_MEM whose answer cannot be written must not leak a region */
	ASSERT_EQ(-EFAULT, submit(self->fd, self->r, HCOMM_CMD_REG_MEM, a));
	ASSERT_STATS(s1);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1))
		hcomm_gauges_dump(stderr, "after read-only REG_MEM", &s0, &s1);
	munmap(i, PG);
	munmap(buf, PG);
}

/* ------------------------------------------------------------------ */
/* io_uring only                                                       */
/* ------------------------------------------------------------------ */

FIXTURE(uring) {
	int fd;
	struct io_uring ring;
	bool have_ring;
	struct hcomm_stats base;
};

FIXTURE_SETUP(uring)
{
	int ret;

	self->fd = -1;
	self->have_ring = false;
	ASSERT_STATS(self->base);
	self->fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", HCOMM_DEV,
				      strerror(errno));
	ret = io_uring_queue_init(64, &self->ring, 0);
	ASSERT_EQ(0, ret) TH_LOG("io_uring_queue_init: %s", strerror(-ret));
	self->have_ring = true;
}

FIXTURE_TEARDOWN(uring)
{
	if (self->have_ring)
		io_uring_queue_exit(&self->ring);
	if (self->fd >= 0)
		close(self->fd);
	EXPECT_GAUGES(&self->base);
}

TEST_F(uring, payload_size_mismatch)
{
	static const unsigned int cmds[] = {
		HCOMM_CMD_GET_INFO, HCOMM_CMD_REG_MEM, HCOMM_CMD_REG_DMABUF,
		HCOMM_CMD_DEREG, HCOMM_CMD_QUERY,
	};
	uint64_t arg[64];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cmds); i++) {
		uint32_t sz = _IOC_SIZE(cmds[i]);
		const uint32_t bad[] = { 0, 1, sz - 1, sz + 1, sz + 8, 256,
					 0xffffffffU };
		size_t k;

		for (k = 0; k < ARRAY_SIZE(bad); k++) {
			int ret;

			memset(arg, 0, sizeof(arg));
			ret = hcomm_uring_raw(&self->ring, self->fd, cmds[i],
					      (uintptr_t)arg, bad[k], 0);
			ASSERT_EQ(-EINVAL, ret)
				TH_LOG("nr %u, payload size %u (want %u): %d",
				       _IOC_NR(cmds[i]), bad[k], sz, ret);
		}
	}
}

TEST_F(uring, payload_flags)
{
	static const uint32_t flags[] = { 1, 2, 0x80000000U, 0xffffffffU };
	struct hcomm_info info;
	size_t k;

	for (k = 0; k < ARRAY_SIZE(flags); k++) {
		memset(&info, 0, sizeof(info));
		ASSERT_EQ(-EINVAL, hcomm_uring_raw(&self->ring, self->fd,
						   HCOMM_CMD_GET_INFO,
						   (uintptr_t)&info,
						   sizeof(info), flags[k]))
			TH_LOG("payload flags 0x%x", flags[k]);
		ASSERT_EQ(0, info.abi_version) TH_LOG("output written anyway");
	}
	/* the same command with flags 0 works */
	ASSERT_EQ(0, hcomm_uring_raw(&self->ring, self->fd, HCOMM_CMD_GET_INFO,
				     (uintptr_t)&info, sizeof(info), 0));
	ASSERT_EQ(HCOMM_ABI_VERSION, info.abi_version);
}

/* A ring created with IORING_SETUP_SQE128: the extra 64 bytes are ignored. */
TEST_F(uring, sqe128_ring)
{
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct hcomm_uring_cmd pl;
	struct hcomm_info info;
	struct hcomm_reg_mem a;
	struct hcomm_query q;
	char *buf = map_anon(PG);
	int ret;

	ASSERT_NE(NULL, buf);
	touch(buf, PG);
	ret = io_uring_queue_init(8, &ring, IORING_SETUP_SQE128);
	if (ret == -EINVAL)
		SKIP(return, "kernel has no IORING_SETUP_SQE128");
	ASSERT_EQ(0, ret);

	/* GET_INFO with garbage in the second half of the SQE */
	sqe = io_uring_get_sqe(&ring);
	ASSERT_NE(NULL, sqe);
	memset(sqe, 0, 64);
	memset((char *)sqe + 64, 0xa5, 64);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = self->fd;
	sqe->cmd_op = HCOMM_CMD_GET_INFO;
	memset(&info, 0, sizeof(info));
	pl = (struct hcomm_uring_cmd){ (uintptr_t)&info, sizeof(info), 0 };
	memcpy((char *)sqe + offsetof(struct io_uring_sqe, cmd), &pl,
	       sizeof(pl));
	sqe->user_data = 77;
	ASSERT_EQ(1, io_uring_submit_and_wait(&ring, 1));
	ASSERT_EQ(0, io_uring_wait_cqe(&ring, &cqe));
	ASSERT_EQ(77, cqe->user_data);
	ASSERT_EQ(0, cqe->res);
	io_uring_cqe_seen(&ring, cqe);
	ASSERT_EQ(HCOMM_ABI_VERSION, info.abi_version);

	ASSERT_EQ(0, hc_reg_mem(self->fd, &ring, buf, PG, ACC_RW, &a));
	ASSERT_EQ(0, hc_query(self->fd, &ring, a.region, NULL, 0, &q));
	ASSERT_EQ(a.key, q.key);
	ASSERT_EQ(1, q.nr_pages);
	ASSERT_EQ(0, hc_dereg(self->fd, &ring, a.region));
	ASSERT_EQ(-ENOTTY, submit(self->fd, &ring,
				  _IOWR(HCOMM_IOC_MAGIC, 0x40, char[16]),
				  &info));
	io_uring_queue_exit(&ring);
	munmap(buf, PG);
}

/* Many commands in flight at once complete independently and correctly. */
TEST_F(uring, batch_of_commands)
{
	enum { N = 48 };
	struct hcomm_reg_mem a[N];
	struct hcomm_dereg d[N];
	struct hcomm_uring_cmd pl;
	struct hcomm_stats s0, s1;
	struct io_uring_cqe *cqe;
	struct io_uring ring;
	char *buf = map_anon(N * PG);
	bool seen[N] = { false };
	int i, ret;

	ASSERT_NE(NULL, buf);
	touch(buf, N * PG);
	ASSERT_EQ(0, io_uring_queue_init(2 * N, &ring, 0));
	ASSERT_STATS(s0);

	for (i = 0; i < N; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

		ASSERT_NE(NULL, sqe);
		memset(&a[i], 0, sizeof(a[i]));
		a[i].addr = (uintptr_t)(buf + i * PG + i);
		a[i].len = PG - i;
		a[i].access = ACC_RW;
		/* every fourth one is invalid: unknown flag set */
		if (i % 4 == 3)
			a[i].flags = 2;
		memset(sqe, 0, sizeof(*sqe));
		sqe->opcode = IORING_OP_URING_CMD;
		sqe->fd = self->fd;
		sqe->cmd_op = HCOMM_CMD_REG_MEM;
		pl = (struct hcomm_uring_cmd){ (uintptr_t)&a[i], sizeof(a[i]),
					       0 };
		memcpy((char *)sqe + offsetof(struct io_uring_sqe, cmd), &pl,
		       sizeof(pl));
		sqe->user_data = i;
	}
	ASSERT_EQ(N, io_uring_submit_and_wait(&ring, N));
	for (i = 0; i < N; i++) {
		ASSERT_EQ(0, io_uring_wait_cqe(&ring, &cqe));
		ASSERT_GT(N, cqe->user_data);
		ASSERT_FALSE(seen[cqe->user_data]);
		seen[cqe->user_data] = true;
		ret = cqe->res;
		ASSERT_EQ(cqe->user_data % 4 == 3 ? -EINVAL : 0, ret)
			TH_LOG("SQE %llu", (unsigned long long)cqe->user_data);
		io_uring_cqe_seen(&ring, cqe);
	}
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, regions, N - N / 4);
	ASSERT_DELTA(s0, s1, pinned_pages, N - N / 4);
	ASSERT_DELTA(s0, s1, uring_cmds, N);
	ASSERT_DELTA(s0, s1, cmd_errors, N / 4);

	for (i = 0; i < N; i++) {
		struct hcomm_query q;

		if (i % 4 == 3)
			continue;
		ASSERT_EQ(0, hc_query(self->fd, &ring, a[i].region, NULL, 0, &q));
		ASSERT_EQ(a[i].addr, q.addr);
		ASSERT_EQ(a[i].len, q.len);
		ASSERT_EQ(a[i].key, q.key);
		ASSERT_EQ((uint32_t)i, q.offset);
	}

	/* and all DEREGs in one batch */
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < N; i++) {
		struct io_uring_sqe *sqe;

		if (i % 4 == 3)
			continue;
		sqe = io_uring_get_sqe(&ring);
		ASSERT_NE(NULL, sqe);
		memset(&d[i], 0, sizeof(d[i]));
		d[i].region = a[i].region;
		memset(sqe, 0, sizeof(*sqe));
		sqe->opcode = IORING_OP_URING_CMD;
		sqe->fd = self->fd;
		sqe->cmd_op = HCOMM_CMD_DEREG;
		pl = (struct hcomm_uring_cmd){ (uintptr_t)&d[i], sizeof(d[i]),
					       0 };
		memcpy((char *)sqe + offsetof(struct io_uring_sqe, cmd), &pl,
		       sizeof(pl));
		sqe->user_data = i;
	}
	ASSERT_EQ(N - N / 4, io_uring_submit_and_wait(&ring, N - N / 4));
	for (i = 0; i < N - N / 4; i++) {
		ASSERT_EQ(0, io_uring_wait_cqe(&ring, &cqe));
		ASSERT_EQ(0, cqe->res) TH_LOG("DEREG SQE %llu",
					      (unsigned long long)cqe->user_data);
		io_uring_cqe_seen(&ring, cqe);
	}
	ASSERT_STATS(s1);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1));
	io_uring_queue_exit(&ring);
	munmap(buf, N * PG);
}

TEST_HARNESS_MAIN
