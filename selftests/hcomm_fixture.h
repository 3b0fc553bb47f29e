/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The common fixture: one /dev/hcomm context, driven through ioctl() or
 * through io_uring passthrough (FIXTURE_VARIANT), with the debugfs gauges
 * taken before the open and checked again after the close in teardown.
 */
#ifndef HCOMM_SELFTEST_FIXTURE_H
#define HCOMM_SELFTEST_FIXTURE_H

#include "hcomm_util.h"

/* TCG guests are slow: a more generous default than the harness's 30 s. */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 120

FIXTURE(hcomm) {
	int fd;
	struct io_uring ring;
	struct io_uring *r;		/* NULL: ioctl variant */
	struct hcomm_stats base;	/* before open() */
	struct hcomm_stats open;	/* after open() and one GET_INFO */
	struct hcomm_info info;
	uint64_t saved_max_regions;	/* 0: parameter untouched */
};

FIXTURE_VARIANT(hcomm) {
	bool uring;
};

FIXTURE_VARIANT_ADD(hcomm, ioctl) {
	.uring = false,
};

FIXTURE_VARIANT_ADD(hcomm, uring) {
	.uring = true,
};

FIXTURE_SETUP(hcomm)
{
	self->fd = -1;
	self->r = NULL;
	self->saved_max_regions = 0;
	ASSERT_STATS(self->base);
	self->fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", HCOMM_DEV,
				      strerror(errno));
	if (variant->uring) {
		int ret = io_uring_queue_init(64, &self->ring, 0);

		ASSERT_EQ(0, ret) TH_LOG("io_uring_queue_init: %s",
					 strerror(-ret));
		self->r = &self->ring;
	}
	ASSERT_EQ(0, hc_info(self->fd, self->r, &self->info));
	ASSERT_STATS(self->open);
	ASSERT_DELTA(self->base, self->open, contexts, 1);
}

FIXTURE_TEARDOWN(hcomm)
{
	if (self->r)
		io_uring_queue_exit(self->r);
	self->r = NULL;
	if (self->fd >= 0)
		close(self->fd);
	self->fd = -1;
	if (self->saved_max_regions)
		EXPECT_EQ(0, hcomm_param_set("max_regions",
					     self->saved_max_regions));
	EXPECT_GAUGES(&self->base);
}

/*
 * Submit command @cmd with argument @arg, which must fail with -@err, and
 * check that it counted as one error and changed no gauge.
 */
static HC_UNUSED void cmd_fails(struct __test_metadata *_metadata,
				FIXTURE_DATA(hcomm) *self, unsigned int cmd,
				void *arg, int err, const char *what)
{
	struct hcomm_stats s0, s1;
	int ret;

	ASSERT_STATS(s0);
	ret = submit(self->fd, self->r, cmd, arg);
	ASSERT_EQ(-err, ret) TH_LOG("%s: got %d (%s), want -%s", what, ret,
				    strerror(-ret), strerror(err));
	ASSERT_STATS(s1);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1))
		hcomm_gauges_dump(stderr, what, &s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_errors, 1);
}

/* The counter the variant's transport bumps, and the other one. */
#define PATH_CTR(v)	((v)->uring ? "uring_cmds" : "ioctls")
#define path_ctr(s, v)	((v)->uring ? (s).uring_cmds : (s).ioctls)
#define other_ctr(s, v)	((v)->uring ? (s).ioctls : (s).uring_cmds)

#endif /* HCOMM_SELFTEST_FIXTURE_H */
