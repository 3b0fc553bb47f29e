// SPDX-License-Identifier: GPL-2.0
/*
 * hcomm and processes: RLIMIT_MEMLOCK accounting for an unprivileged
 * caller, cleanup when a process exits without DEREG (host and dma-buf
 * regions), and REG_MEM through an fd inherited across fork() (EPERM).
 * Every test runs through ioctl() and through io_uring passthrough.
 *
 * Children never ASSERT (see hcomm_util.h); they report through their exit
 * code, and talk to the parent over a pair of pipes where the parent must
 * look at the debugfs gauges (uid 65534 cannot read debugfs).
 */
#include "kselftest_harness.h"
#include "hcomm_fixture.h"
#include "hcomm_dmabuf.h"

#define ACC_RW	(HCOMM_ACCESS_LOCAL_WRITE | HCOMM_ACCESS_REMOTE_READ)

struct sync {
	int c2p[2];	/* child -> parent */
	int p2c[2];	/* parent -> child */
};

static int sync_init(struct sync *s)
{
	if (pipe2(s->c2p, O_CLOEXEC))
		return -1;
	if (pipe2(s->p2c, O_CLOEXEC))
		return -1;
	return 0;
}

static void sync_child_side(struct sync *s)
{
	close(s->c2p[0]);
	close(s->p2c[1]);
}

static void sync_parent_side(struct sync *s)
{
	close(s->c2p[1]);
	close(s->p2c[0]);
}

/* Child: tell the parent we reached step @c, wait for its go-ahead. */
static int child_step(struct sync *s, char c)
{
	char go;

	if (write(s->c2p[1], &c, 1) != 1)
		return -1;
	return read(s->p2c[0], &go, 1) == 1 ? 0 : -1;
}

/* Parent: wait for step @c; false when the child died instead. */
static bool parent_wait(struct sync *s, char c)
{
	char got;

	return read(s->c2p[0], &got, 1) == 1 && got == c;
}

static void parent_go(struct sync *s)
{
	char go = 'g';

	if (write(s->p2c[1], &go, 1) != 1)
		perror("parent_go");
}

static void drop_parent_ctx(FIXTURE_DATA(hcomm) *self)
{
	if (self->r)
		io_uring_queue_exit(self->r);
	self->r = NULL;
	close(self->fd);
	self->fd = -1;
}

/*
 * RLIMIT_MEMLOCK 1 MiB, uid 65534 (no CAP_IPC_LOCK): 512 KiB fits, another
 * 1 MiB is ENOMEM with nothing left pinned, DEREG returns the charge.
 */
/*
 * RLIMIT_MEMLOCK is a budget of the user, not of one address space: a
 * second process of the same user cannot pin what the first one already
 * has (otherwise passing the fd on, or exec, would reset the budget).
 */
TEST_F(hcomm, memlock_limit_per_user)
{
	pid_t pid;
	int st;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct rlimit rl = { 1 * MiB, 1 * MiB };
		struct hcomm_reg_mem a;
		struct hc_ctx c;
		pid_t other;
		char *buf;

		drop_parent_ctx(self);
		CHILD_CHECK(setrlimit(RLIMIT_MEMLOCK, &rl) == 0, 10);
		CHILD_CHECK(become_nobody() == 0, 11);
		buf = map_anon(2 * MiB);
		CHILD_CHECK(buf != NULL, 12);
		touch(buf, 2 * MiB);
		CHILD_CHECK(hc_ctx_open(&c, variant->uring, 0) == 0, 13);
		CHILD_CHECK(hc_reg_mem(c.fd, c.r, buf, 768 * KiB, ACC_RW, &a) == 0,
			    14);

		other = fork();
		CHILD_CHECK(other >= 0, 15);
		if (other == 0) {
			struct hc_ctx c2;

			/* Same user, another mm, its own context. */
			CHILD_CHECK(hc_ctx_open(&c2, variant->uring, 0) == 0, 20);
			CHILD_CHECK(hc_reg_mem(c2.fd, c2.r, buf + MiB, 512 * KiB,
					       ACC_RW, NULL) == -ENOMEM, 21);
			CHILD_CHECK(hc_reg_mem(c2.fd, c2.r, buf + MiB, 128 * KiB,
					       ACC_RW, NULL) == 0, 22);
			_exit(0);
		}
		CHILD_CHECK(waitpid(other, &st, 0) == other, 16);
		CHILD_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			    WIFEXITED(st) ? WEXITSTATUS(st) : 17);
		/* The second process's pages went back with its exit. */
		CHILD_CHECK(hc_reg_mem(c.fd, c.r, buf + MiB, 256 * KiB, ACC_RW,
				       NULL) == 0, 18);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	ASSERT_EQ(0, WEXITSTATUS(st)) TH_LOG("child failed at check %d",
					     WEXITSTATUS(st));
}

TEST_F(hcomm, memlock_limit_unprivileged)
{
	const uint64_t half = 512 * KiB, pages_half = half / PG;
	struct hcomm_stats sa, sb, sc, sd;
	struct sync s;
	pid_t pid;
	int st;

	ASSERT_EQ(0, sync_init(&s));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct rlimit rl = { 1 * MiB, 1 * MiB };
		struct hcomm_reg_mem a, b;
		struct hcomm_info i;
		struct hc_ctx c;
		char *buf;
		int ret;

		sync_child_side(&s);
		drop_parent_ctx(self);
		CHILD_CHECK(setrlimit(RLIMIT_MEMLOCK, &rl) == 0, 10);
		CHILD_CHECK(become_nobody() == 0, 11);
		CHILD_CHECK(geteuid() == 65534, 11);
		CHILD_CHECK(hc_ctx_open(&c, variant->uring, 0) == 0, 12);
		CHILD_CHECK(hc_info(c.fd, c.r, &i) == 0, 13);
		CHILD_CHECK(i.memlock_limit == 1 * MiB, 14);
		CHILD_CHECK(i.pinned_bytes == 0, 15);

		buf = map_anon(2 * MiB);
		CHILD_CHECK(buf != NULL, 16);
		madvise(buf, 2 * MiB, MADV_NOHUGEPAGE);
		touch(buf, 2 * MiB);

		ret = hc_reg_mem(c.fd, c.r, buf, half, ACC_RW, &a);
		CHILD_CHECK(ret == 0, 20);
		CHILD_CHECK(hc_info(c.fd, c.r, &i) == 0, 21);
		CHILD_CHECK(i.pinned_bytes == half, 22);
		CHILD_CHECK(child_step(&s, 'A') == 0, 23);

		ret = hc_reg_mem(c.fd, c.r, buf + half, 1 * MiB, ACC_RW, &b);
		if (ret != -ENOMEM)
			fprintf(stderr, "# child: second REG_MEM gave %d\n", ret);
		CHILD_CHECK(ret == -ENOMEM, 30);
		CHILD_CHECK(hc_info(c.fd, c.r, &i) == 0, 31);
		CHILD_CHECK(i.pinned_bytes == half, 32);
		CHILD_CHECK(i.nr_regions == 1, 33);
		CHILD_CHECK(child_step(&s, 'B') == 0, 34);

		CHILD_CHECK(hc_dereg(c.fd, c.r, a.region) == 0, 40);
		CHILD_CHECK(hc_info(c.fd, c.r, &i) == 0, 41);
		CHILD_CHECK(i.pinned_bytes == 0, 42);
		CHILD_CHECK(child_step(&s, 'C') == 0, 43);

		ret = hc_reg_mem(c.fd, c.r, buf + half, half, ACC_RW, &b);
		CHILD_CHECK(ret == 0, 50);
		CHILD_CHECK(hc_info(c.fd, c.r, &i) == 0, 51);
		CHILD_CHECK(i.pinned_bytes == half, 52);
		CHILD_CHECK(child_step(&s, 'D') == 0, 53);
		/* exit holding b: the release path uncharges it */
		_exit(0);
	}
	sync_parent_side(&s);

	/* A: 512 KiB pinned and charged to memlock */
	if (parent_wait(&s, 'A')) {
		EXPECT_EQ(0, hcomm_stats_read(&sa));
		EXPECT_DELTA(self->open, sa, contexts, 1);
		EXPECT_DELTA(self->open, sa, regions, 1);
		EXPECT_DELTA(self->open, sa, pinned_pages, pages_half);
		EXPECT_DELTA(self->open, sa, memlock_pages, pages_half);
		parent_go(&s);
	}
	/* B: the refused 1 MiB left every gauge alone */
	if (parent_wait(&s, 'B')) {
		EXPECT_EQ(0, hcomm_stats_read(&sb));
		EXPECT_TRUE(hcomm_gauges_equal(&sa, &sb))
			hcomm_gauges_dump(stderr, "after ENOMEM", &sa, &sb);
		parent_go(&s);
	}
	/* C: DEREG gave back pins and charge */
	if (parent_wait(&s, 'C')) {
		EXPECT_EQ(0, hcomm_stats_read(&sc));
		EXPECT_DELTA(self->open, sc, contexts, 1);
		EXPECT_DELTA(self->open, sc, regions, 0);
		EXPECT_DELTA(self->open, sc, pinned_pages, 0);
		EXPECT_DELTA(self->open, sc, memlock_pages, 0);
		parent_go(&s);
	}
	/* D: registering again works */
	if (parent_wait(&s, 'D')) {
		EXPECT_EQ(0, hcomm_stats_read(&sd));
		EXPECT_DELTA(self->open, sd, pinned_pages, pages_half);
		EXPECT_DELTA(self->open, sd, memlock_pages, pages_half);
		parent_go(&s);
	}
	close(s.p2c[1]);
	st = wait_child(pid);
	close(s.c2p[0]);
	ASSERT_EQ(0, st) TH_LOG("child failed at check %d (1x setup, 2x first "
				"512 KiB, 3x the 1 MiB over the limit, 4x DEREG, "
				"5x re-register)", st);
	/* the child's exit released its context and the region it held */
	ASSERT_GAUGES(&self->open);
}

/*
 * A process that exits holding regions of every kind: the parent sees the
 * gauges up while it lives and back at the baseline after it is reaped.
 */
TEST_F(hcomm, exit_without_dereg)
{
	struct hcomm_stats sr;
	struct sync s;
	int nr_dmabuf = -1, st;
	pid_t pid;

	ASSERT_EQ(0, sync_init(&s));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct hc_ctx c, c2;
		char *buf, *thp;
		int buf1, buf2, n = 0;
		char nd;

		sync_child_side(&s);
		drop_parent_ctx(self);
		CHILD_CHECK(hc_ctx_open(&c, variant->uring, 0) == 0, 10);
		/* a second context in the same process */
		CHILD_CHECK(hc_ctx_open(&c2, variant->uring, 0) == 0, 11);
		buf = map_anon(4 * MiB);
		CHILD_CHECK(buf != NULL, 12);
		madvise(buf, 2 * MiB, MADV_NOHUGEPAGE);
		touch(buf, 4 * MiB);
		thp = buf + 2 * MiB;	/* whatever the kernel gave us */

		/* host: 1 + 2 + 256 + 512 pages in c, 1 page in c2 */
		CHILD_CHECK(hc_reg_mem(c.fd, c.r, buf, PG, ACC_RW, NULL) == 0, 20);
		CHILD_CHECK(hc_reg_mem(c.fd, c.r, buf + PG - 1, 2, ACC_RW,
				       NULL) == 0, 21);
		CHILD_CHECK(hc_reg_mem(c.fd, c.r, buf + MiB, MiB,
				       HCOMM_ACCESS_REMOTE_READ, NULL) == 0, 22);
		CHILD_CHECK(hc_reg_mem(c.fd, c.r, thp, 2 * MiB, ACC_RW,
				       NULL) == 0, 23);
		CHILD_CHECK(hc_reg_mem(c2.fd, c2.r, buf, PG, ACC_RW,
				       NULL) == 0, 24);

		/* dma-buf: whole buffer and a sub-range, fds then closed */
		buf1 = dmabuf_any(MiB, NULL);
		if (buf1 >= 0) {
			CHILD_CHECK(hc_reg_dmabuf(c.fd, c.r, buf1, 0, MiB,
						  ACC_RW, NULL) == 0, 30);
			CHILD_CHECK(hc_reg_dmabuf(c.fd, c.r, buf1, 64 * KiB,
						  64 * KiB, ACC_RW,
						  NULL) == 0, 31);
			n += 2;
			buf2 = dmabuf_any(MiB, NULL);
			CHILD_CHECK(buf2 >= 0, 32);
			CHILD_CHECK(hc_reg_dmabuf(c2.fd, c2.r, buf2, 0, MiB,
						  0, NULL) == 0, 33);
			n++;
			close(buf1);
			close(buf2);
		}
		nd = (char)n;
		CHILD_CHECK(write(s.c2p[1], &nd, 1) == 1, 40);
		CHILD_CHECK(read(s.p2c[0], &nd, 1) == 1, 41);
		_exit(0);	/* no DEREG, no close, rings still up */
	}
	sync_parent_side(&s);
	{
		char nd;

		if (read(s.c2p[0], &nd, 1) == 1)
			nr_dmabuf = nd;
	}
	if (nr_dmabuf >= 0) {
		EXPECT_EQ(0, hcomm_stats_read(&sr));
		EXPECT_DELTA(self->open, sr, contexts, 2);
		EXPECT_DELTA(self->open, sr, host_regions, 5);
		EXPECT_DELTA(self->open, sr, dmabuf_regions, nr_dmabuf);
		EXPECT_DELTA(self->open, sr, regions, 5 + nr_dmabuf);
		EXPECT_DELTA(self->open, sr, pinned_pages, 1 + 2 + 256 + 512 + 1);
		if (!nr_dmabuf)
			TH_LOG("no dma-buf provider: host regions only");
		parent_go(&s);
	}
	close(s.p2c[1]);
	st = wait_child(pid);
	close(s.c2p[0]);
	ASSERT_EQ(0, st) TH_LOG("child failed at check %d", st);
	ASSERT_LE(0, nr_dmabuf);
	ASSERT_GAUGES(&self->open);
}

/* fork() after open(): the child's REG_MEM on the inherited fd is EPERM. */
TEST_F(hcomm, fork_inherited_fd_eperm)
{
	struct hcomm_stats s0, s1;
	struct hcomm_reg_mem a;
	char *buf = map_anon(4 * PG);
	pid_t pid;

	ASSERT_NE(NULL, buf);
	touch(buf, 4 * PG);
	/* the parent holds a region too: the child must not disturb it */
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf, PG, ACC_RW, &a));
	ASSERT_STATS(s0);

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct hc_ctx c = { .fd = self->fd };
		int ret;

		/* the parent's ring is not ours; make one on the same fd */
		CHILD_CHECK(hc_ctx_ring(&c, variant->uring) == 0, 10);
		touch(buf, 4 * PG);	/* the child's own (COW) copy */
		ret = hc_reg_mem(c.fd, c.r, buf + PG, PG, ACC_RW, NULL);
		if (ret != -EPERM)
			fprintf(stderr, "# child: REG_MEM gave %d\n", ret);
		CHILD_CHECK(ret == -EPERM, 20);
		ret = hc_reg_mem(c.fd, c.r, buf + PG, PG,
				 HCOMM_ACCESS_REMOTE_READ, NULL);
		CHILD_CHECK(ret == -EPERM, 21);
		_exit(0);
	}
	ASSERT_EQ(0, wait_child(pid))
		TH_LOG("child: REG_MEM on the inherited fd was not EPERM");
	ASSERT_STATS(s1);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1))
		hcomm_gauges_dump(stderr, "after the child", &s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_errors, 2);

	/* the parent's context is unharmed */
	{
		struct hcomm_query q;
		struct hcomm_reg_mem b;

		ASSERT_EQ(0, hc_query(self->fd, self->r, a.region, NULL, 0, &q));
		ASSERT_EQ(a.key, q.key);
		ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf + PG, PG, ACC_RW,
					&b));
		ASSERT_EQ(0, hc_dereg(self->fd, self->r, b.region));
	}
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, a.region));
	munmap(buf, 4 * PG);
}

/* A context opened in the child works; the parent's is untouched by it. */
TEST_F(hcomm, child_own_context)
{
	struct hcomm_stats s0;
	pid_t pid;

	ASSERT_STATS(s0);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct hcomm_reg_mem a;
		struct hcomm_info i;
		struct hc_ctx c;
		char *buf = map_anon(PG);

		CHILD_CHECK(buf != NULL, 10);
		touch(buf, PG);
		CHILD_CHECK(hc_ctx_open(&c, variant->uring, 0) == 0, 11);
		CHILD_CHECK(hc_reg_mem(c.fd, c.r, buf, PG, ACC_RW, &a) == 0, 12);
		CHILD_CHECK(hc_info(c.fd, c.r, &i) == 0, 13);
		CHILD_CHECK(i.nr_regions == 1, 14);
		CHILD_CHECK(hc_dereg(c.fd, c.r, a.region) == 0, 15);
		hc_ctx_close(&c);
		_exit(0);
	}
	ASSERT_EQ(0, wait_child(pid));
	ASSERT_GAUGES(&s0);
	{
		struct hcomm_info i;

		ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
		ASSERT_EQ(0, i.nr_regions);
	}
}

TEST_HARNESS_MAIN
