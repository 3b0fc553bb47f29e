// SPDX-License-Identifier: GPL-2.0
/*
 * hcomm uapi checks that need no module and no device: struct layouts
 * (naturally aligned, sizes frozen for ABI version 1), command numbers,
 * the io_uring payload fitting a 64-byte SQE, and the selftests' own
 * parsers (debugfs stats).  Runs on the build host: make -C selftests
 * host-check.
 */
#include "kselftest_harness.h"
#include "hcomm_util.h"

#define OFF(t, f)	offsetof(struct t, f)

TEST(struct_sizes)
{
	ASSERT_EQ(16, sizeof(struct hcomm_uring_cmd));
	ASSERT_EQ(88, sizeof(struct hcomm_info));
	ASSERT_EQ(56, sizeof(struct hcomm_reg_mem));
	ASSERT_EQ(56, sizeof(struct hcomm_reg_dmabuf));
	ASSERT_EQ(24, sizeof(struct hcomm_dereg));
	ASSERT_EQ(24, sizeof(struct hcomm_extent));
	ASSERT_EQ(88, sizeof(struct hcomm_query));
	/* every struct is a multiple of 8: no tail padding differences */
	ASSERT_EQ(0, sizeof(struct hcomm_info) % 8);
	ASSERT_EQ(0, sizeof(struct hcomm_query) % 8);
}

TEST(field_offsets)
{
	ASSERT_EQ(0, OFF(hcomm_uring_cmd, addr));
	ASSERT_EQ(8, OFF(hcomm_uring_cmd, size));
	ASSERT_EQ(12, OFF(hcomm_uring_cmd, flags));

	ASSERT_EQ(0, OFF(hcomm_info, abi_version));
	ASSERT_EQ(8, OFF(hcomm_info, features));
	ASSERT_EQ(16, OFF(hcomm_info, max_region_size));
	ASSERT_EQ(24, OFF(hcomm_info, page_sizes));
	ASSERT_EQ(32, OFF(hcomm_info, max_regions));
	ASSERT_EQ(36, OFF(hcomm_info, nr_regions));
	ASSERT_EQ(40, OFF(hcomm_info, memlock_limit));
	ASSERT_EQ(48, OFF(hcomm_info, pinned_bytes));
	ASSERT_EQ(56, OFF(hcomm_info, max_inline));
	ASSERT_EQ(60, OFF(hcomm_info, chunk_size));
	ASSERT_EQ(64, OFF(hcomm_info, nr_doorbells));
	ASSERT_EQ(68, OFF(hcomm_info, reserved0));
	ASSERT_EQ(72, OFF(hcomm_info, cache_limit));
	ASSERT_EQ(80, OFF(hcomm_info, cache_bytes));

	ASSERT_EQ(0, OFF(hcomm_reg_mem, addr));
	ASSERT_EQ(8, OFF(hcomm_reg_mem, len));
	ASSERT_EQ(16, OFF(hcomm_reg_mem, access));
	ASSERT_EQ(20, OFF(hcomm_reg_mem, flags));
	ASSERT_EQ(24, OFF(hcomm_reg_mem, region));
	ASSERT_EQ(28, OFF(hcomm_reg_mem, cache));
	ASSERT_EQ(32, OFF(hcomm_reg_mem, key));
	ASSERT_EQ(40, OFF(hcomm_reg_mem, generation));
	ASSERT_EQ(48, OFF(hcomm_reg_mem, reserved));

	ASSERT_EQ(0, OFF(hcomm_reg_dmabuf, fd));
	ASSERT_EQ(4, OFF(hcomm_reg_dmabuf, access));
	ASSERT_EQ(8, OFF(hcomm_reg_dmabuf, offset));
	ASSERT_EQ(16, OFF(hcomm_reg_dmabuf, len));
	ASSERT_EQ(24, OFF(hcomm_reg_dmabuf, flags));
	ASSERT_EQ(28, OFF(hcomm_reg_dmabuf, region));
	ASSERT_EQ(32, OFF(hcomm_reg_dmabuf, key));
	ASSERT_EQ(40, OFF(hcomm_reg_dmabuf, reserved));

	ASSERT_EQ(96, sizeof(struct hcomm_xfer));
	ASSERT_EQ(0, OFF(hcomm_xfer, src_key));
	ASSERT_EQ(8, OFF(hcomm_xfer, src_off));
	ASSERT_EQ(16, OFF(hcomm_xfer, dst_key));
	ASSERT_EQ(24, OFF(hcomm_xfer, dst_off));
	ASSERT_EQ(32, OFF(hcomm_xfer, len));
	ASSERT_EQ(40, OFF(hcomm_xfer, tag));
	ASSERT_EQ(48, OFF(hcomm_xfer, flags));
	ASSERT_EQ(52, OFF(hcomm_xfer, db_index));
	ASSERT_EQ(56, OFF(hcomm_xfer, db_value));
	ASSERT_EQ(64, OFF(hcomm_xfer, done));
	ASSERT_EQ(72, OFF(hcomm_xfer, engine));
	ASSERT_EQ(80, OFF(hcomm_xfer, reserved));
	ASSERT_EQ(32, sizeof(struct hcomm_cancel));
	ASSERT_EQ(12, OFF(hcomm_cancel, count));
	ASSERT_EQ(32, sizeof(struct hcomm_fence));
	ASSERT_EQ(56, sizeof(struct hcomm_db_wait));
	ASSERT_EQ(8, OFF(hcomm_db_wait, value));
	ASSERT_EQ(24, OFF(hcomm_db_wait, timeout_ns));
	ASSERT_EQ(32, OFF(hcomm_db_wait, current_value));
	ASSERT_EQ(40, sizeof(struct hcomm_grant));
	ASSERT_EQ(12, OFF(hcomm_grant, uid));
	ASSERT_EQ(32, sizeof(struct hcomm_qos));
	ASSERT_EQ(8, OFF(hcomm_qos, priority));
	ASSERT_EQ(32, sizeof(struct hcomm_ctx_opts));
	ASSERT_EQ(8, OFF(hcomm_ctx_opts, cache_limit));
	ASSERT_EQ(40, sizeof(struct hcomm_xfer_batch));
	ASSERT_EQ(8, OFF(hcomm_xfer_batch, count));
	ASSERT_EQ(16, OFF(hcomm_xfer_batch, done));
	ASSERT_EQ(24, OFF(hcomm_xfer_batch, reserved));
	ASSERT_EQ(96, sizeof(struct hcomm_db_wait_any));
	ASSERT_EQ(4, OFF(hcomm_db_wait_any, flags));
	ASSERT_EQ(8, OFF(hcomm_db_wait_any, tag));
	ASSERT_EQ(16, OFF(hcomm_db_wait_any, timeout_ns));
	ASSERT_EQ(24, OFF(hcomm_db_wait_any, index));
	ASSERT_EQ(40, OFF(hcomm_db_wait_any, value));
	ASSERT_EQ(72, OFF(hcomm_db_wait_any, ready));
	ASSERT_EQ(76, OFF(hcomm_db_wait_any, reserved0));
	ASSERT_EQ(80, OFF(hcomm_db_wait_any, reserved));

	ASSERT_EQ(0, OFF(hcomm_dereg, region));
	ASSERT_EQ(4, OFF(hcomm_dereg, flags));
	ASSERT_EQ(8, OFF(hcomm_dereg, reserved));

	ASSERT_EQ(0, OFF(hcomm_extent, offset));
	ASSERT_EQ(8, OFF(hcomm_extent, len));
	ASSERT_EQ(16, OFF(hcomm_extent, phys));

	ASSERT_EQ(0, OFF(hcomm_query, region));
	ASSERT_EQ(4, OFF(hcomm_query, flags));
	ASSERT_EQ(8, OFF(hcomm_query, extents));
	ASSERT_EQ(16, OFF(hcomm_query, max_extents));
	ASSERT_EQ(20, OFF(hcomm_query, type));
	ASSERT_EQ(24, OFF(hcomm_query, addr));
	ASSERT_EQ(32, OFF(hcomm_query, len));
	ASSERT_EQ(40, OFF(hcomm_query, key));
	ASSERT_EQ(48, OFF(hcomm_query, nr_pages));
	ASSERT_EQ(56, OFF(hcomm_query, nr_extents));
	ASSERT_EQ(60, OFF(hcomm_query, offset));
	ASSERT_EQ(64, OFF(hcomm_query, access));
	ASSERT_EQ(68, OFF(hcomm_query, state));
	ASSERT_EQ(72, OFF(hcomm_query, first_extent));
	ASSERT_EQ(80, OFF(hcomm_query, reserved));
}

TEST(command_numbers)
{
	static const struct { unsigned int cmd, nr; size_t size; } c[] = {
		{ HCOMM_CMD_GET_INFO, 0, sizeof(struct hcomm_info) },
		{ HCOMM_CMD_REG_MEM, 1, sizeof(struct hcomm_reg_mem) },
		{ HCOMM_CMD_REG_DMABUF, 2, sizeof(struct hcomm_reg_dmabuf) },
		{ HCOMM_CMD_DEREG, 3, sizeof(struct hcomm_dereg) },
		{ HCOMM_CMD_QUERY, 4, sizeof(struct hcomm_query) },
	};
	size_t i, j;

	for (i = 0; i < ARRAY_SIZE(c); i++) {
		ASSERT_EQ(HCOMM_IOC_MAGIC, _IOC_TYPE(c[i].cmd));
		ASSERT_EQ(c[i].nr, _IOC_NR(c[i].cmd));
		ASSERT_EQ(c[i].size, _IOC_SIZE(c[i].cmd));
		ASSERT_EQ(_IOC_READ | _IOC_WRITE, _IOC_DIR(c[i].cmd));
		for (j = 0; j < i; j++)
			ASSERT_NE(c[j].cmd, c[i].cmd);
	}
	/* the wrong-size numbers the tests build really differ */
	ASSERT_NE(HCOMM_CMD_REG_MEM,
		  _IOWR(HCOMM_IOC_MAGIC, 1, char[sizeof(struct hcomm_reg_mem) - 8]));
	ASSERT_EQ(HCOMM_CMD_REG_MEM,
		  _IOWR(HCOMM_IOC_MAGIC, 1, char[sizeof(struct hcomm_reg_mem)]));
}

TEST(uring_payload_fits_sqe)
{
	/* sqe->cmd starts at byte 48 of a 64-byte SQE: 16 bytes */
	ASSERT_EQ(64, sizeof(struct io_uring_sqe));
	ASSERT_EQ(48, offsetof(struct io_uring_sqe, cmd));
	ASSERT_GE(sizeof(struct io_uring_sqe) - offsetof(struct io_uring_sqe, cmd),
		  sizeof(struct hcomm_uring_cmd));
	ASSERT_EQ(8, offsetof(struct io_uring_sqe, cmd_op));
}

TEST(feature_and_access_bits)
{
	ASSERT_EQ(1, HCOMM_FEAT_URING_CMD);
	ASSERT_EQ(2, HCOMM_FEAT_DMABUF);
	ASSERT_EQ(4, HCOMM_FEAT_DMABUF_MOVE_NOTIFY);
	ASSERT_EQ(8, HCOMM_FEAT_HUGE_EXTENTS);
	ASSERT_EQ(16, HCOMM_FEAT_XFER);
	ASSERT_EQ(32, HCOMM_FEAT_REG_CACHE);
	ASSERT_EQ(128, HCOMM_FEAT_XFER_BATCH);
	ASSERT_EQ(256, HCOMM_FEAT_DB_WAIT_ANY);
	ASSERT_EQ(4, HCOMM_DB_WAIT_ANY_MAX);
	ASSERT_EQ(4096, HCOMM_BATCH_MAX);
	ASSERT_EQ(512, HCOMM_GEN_SLOTS);
	ASSERT_EQ(0x10000000ULL, HCOMM_MMAP_GENERATION);
	ASSERT_EQ(7, HCOMM_ACCESS_ALL);
	ASSERT_EQ(1, HCOMM_ABI_VERSION);
}

TEST(stats_parser)
{
	char good[4096];
	struct hcomm_stats s, t;
	size_t i, n = 0;

	/* every field the module prints, each with its own value, plus one
	 * unknown line that must be ignored */
	for (i = 0; i < ARRAY_SIZE(hcomm_stat_fields); i++)
		n += snprintf(good + n, sizeof(good) - n, "%s %zu\n",
			      hcomm_stat_fields[i].name, 100 + i);
	n += snprintf(good + n, sizeof(good) - n, "something_new 42\n");
	ASSERT_GT(sizeof(good), n);

	ASSERT_EQ(0, hcomm_stats_parse(good, &s));
	for (i = 0; i < ARRAY_SIZE(hcomm_stat_fields); i++)
		ASSERT_EQ(100 + i, hcomm_stat_get(&s, i))
			TH_LOG("field %zu", i);
	t = s;
	t.ioctls++;		/* a counter: gauges still equal */
	t.xfer_bytes++;
	ASSERT_TRUE(hcomm_gauges_equal(&s, &t));
	t.memlock_pages++;
	ASSERT_FALSE(hcomm_gauges_equal(&s, &t));
	t = s;
	t.waits_pending++;
	ASSERT_FALSE(hcomm_gauges_equal(&s, &t));
	ASSERT_EQ(-ENOENT, hcomm_stats_parse("contexts 0\n", &s));
	ASSERT_EQ(-EINVAL, hcomm_stats_parse("contexts\n", &s));
}

TEST(span_pages_math)
{
	ASSERT_EQ(1, span_pages(0, 1));
	ASSERT_EQ(1, span_pages(4095, 1));
	ASSERT_EQ(2, span_pages(4095, 2));
	ASSERT_EQ(1, span_pages(0, 4096));
	ASSERT_EQ(2, span_pages(1, 4096));
	ASSERT_EQ(16384, span_pages(0, 64 * MiB));
}

TEST_HARNESS_MAIN
