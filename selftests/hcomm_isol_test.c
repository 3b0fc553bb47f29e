// SPDX-License-Identifier: GPL-2.0
/*
 * Isolation between users, counted over many attempts.
 *
 * other_uid_attack: root registers eight regions and hands their keys to a
 * process of uid 65534 (the worst case: the attacker knows every key).
 * Their grants cover every way of not being granted: none, SAME_UID (root
 * only), UID 1234, revoked after an ANY, moved from 65534 to 1234, read
 * granted then revoked, and one key that is dead (its region deregistered
 * and registered again under a new key).  While root keeps revoking and
 * re-granting one region to 1234 and re-registering another, the attacker
 * issues HCOMM_ISOL_ATTEMPTS transfers (default 20000) reading and writing
 * with those keys, keys next to them (+-1..16, one bit flipped, halves
 * swapped) and random keys, and QUERY, GRANT and DEREG of root's region
 * ids in its own context.  None may succeed; the bytes of root's regions
 * and of the attacker's own buffer are checked after the attack.  A
 * control region granted to 65534 for reading shows the attacker's
 * transfers are well-formed: reading it succeeds, writing it is EACCES.
 * HCOMM_ISOL_BREAK=1 grants one region to anyone first: the test must
 * then fail, counting successes and naming the changed region.
 *
 * memlock_many_fds_and_processes: uid 65534 with RLIMIT_MEMLOCK 2 MiB runs
 * four processes of four contexts each (ioctl and io_uring), all racing to
 * register 64 KiB ranges until ENOMEM.  Together they pin exactly 2 MiB,
 * never more (the debugfs gauge is sampled while they hold it), and it all
 * goes back when they exit.
 *
 * Children never ASSERT (see hcomm_util.h): they report over pipes and
 * their exit code.
 */
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>

#include "kselftest_harness.h"
#include "hcomm_fixture.h"

#define NREG		8
#define REG_LEN		(64 * KiB)
#define ACC_ALL		HCOMM_ACCESS_ALL
#define ACC_REMOTE	(HCOMM_ACCESS_REMOTE_READ | HCOMM_ACCESS_REMOTE_WRITE)
#define NOBODY		65534
#define OTHER_UID	1234

/* The regions of the attack, by what their grant is. */
enum {
	R_NONE,		/* never granted */
	R_SAME_UID,	/* SAME_UID: root only */
	R_UID_OTHER,	/* UID 1234 */
	R_REVOKED,	/* ANY, then NONE */
	R_MOVED,	/* UID 65534, then UID 1234 */
	R_READ_REVOKED,	/* UID 65534 READ, then NONE */
	R_FLIPPED,	/* root flips NONE <-> UID 1234 during the attack */
	R_DEAD,		/* key of a deregistered region; root re-registers */
};

static const char *const reg_name[NREG + 2] = {
	"none", "same-uid", "uid-1234", "revoked", "moved", "read-revoked",
	"flipped", "dead", "a neighbour of a key", "a random key",
};

/* What root tells the attacker. */
struct isol_keys {
	uint64_t key[NREG];
	uint32_t region[NREG];
	uint64_t ctl_key;	/* granted to 65534, READ */
	uint64_t attempts;
	uint64_t seed;
};

/* What the attacker reports. */
struct isol_report {
	uint64_t xfers, xfer_ok, ctl_reads, ctl_read_ok, ctl_writes,
		 ctl_write_ok, ids, id_ok, own_corrupt;
	uint64_t errs[5];	/* EACCES, ENOENT, EINVAL, EPERM, other */
	uint64_t live_not_eacces;	/* a live key refused other than EACCES */
	int first_xfer;		/* -1, or the first successful transfer's
				 * key: a region, K_NEAR or K_RANDOM */
	int first_id;		/* -1, or the first region id that worked */
	int stage;			/* 0, or where the attacker failed */
};

#define K_NEAR		NREG		/* a key next to one of root's */
#define K_RANDOM	(NREG + 1)	/* a random key */

static uint64_t xs64(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static uint8_t pat(uint64_t seed, size_t i)
{
	return (uint8_t)((seed * 0x9e3779b97f4a7c15ULL + i * 131) >> 29);
}

static void fill_pat(uint8_t *b, size_t len, uint64_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = pat(seed, i);
}

/* Index of the first byte that differs from the pattern, or -1. */
static long check_pat(const uint8_t *b, size_t len, uint64_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (b[i] != pat(seed, i))
			return (long)i;
	return -1;
}

static int xfer_sync(int fd, struct io_uring *r, uint64_t sk, uint64_t so,
		     uint64_t dk, uint64_t dof, uint64_t len)
{
	struct hcomm_xfer x = { .src_key = sk, .src_off = so, .dst_key = dk,
				.dst_off = dof, .len = len };

	return submit(fd, r, HCOMM_CMD_XFER, &x);
}

static int grant(int fd, struct io_uring *r, uint32_t region, uint32_t scope,
		 uint32_t access, uint32_t uid)
{
	struct hcomm_grant g = { .region = region, .scope = scope,
				 .access = access, .uid = uid };

	return submit(fd, r, HCOMM_CMD_GRANT, &g);
}

static void count_err(struct isol_report *rep, int ret)
{
	switch (ret) {
	case -EACCES:
		rep->errs[0]++;
		break;
	case -ENOENT:
		rep->errs[1]++;
		break;
	case -EINVAL:
		rep->errs[2]++;
		break;
	case -EPERM:
		rep->errs[3]++;
		break;
	default:
		rep->errs[4]++;
	}
}

/* A key near @k: +-1..16, one bit flipped, or the halves swapped. */
static uint64_t near_key(uint64_t k, uint64_t *s)
{
	uint64_t r = xs64(s);

	switch (r % 3) {
	case 0:
		return k + ((r >> 8) & 1 ? 1 : -1) * (1 + (r >> 16) % 16);
	case 1:
		return k ^ (1ULL << ((r >> 8) % 64));
	default:
		return (k << 32) | (k >> 32);
	}
}

/* The attacker, as uid 65534.  Returns through _exit(). */
static void __attribute__((noreturn))
attacker(bool uring, int in_fd, int out_fd)
{
	struct rlimit rl = { 8 * MiB, 8 * MiB };
	struct isol_report rep = { .first_xfer = -1, .first_id = -1 };
	struct hcomm_reg_mem own;
	struct isol_keys k;
	uint8_t *buf, *ctl_copy;
	struct hc_ctx c;
	uint64_t s, i;
	int ret;

#define STAGE(n) do { rep.stage = (n); goto out; } while (0)
	alarm(240);
	if (read(in_fd, &k, sizeof(k)) != sizeof(k))
		STAGE(1);
	if (setrlimit(RLIMIT_MEMLOCK, &rl) || become_nobody())
		STAGE(2);
	if (hc_ctx_open(&c, uring, 0))
		STAGE(3);
	buf = mmap(NULL, REG_LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ctl_copy = malloc(REG_LEN);
	if (buf == MAP_FAILED || !ctl_copy)
		STAGE(4);
	fill_pat(buf, REG_LEN, ~k.seed);
	if (hc_reg_mem(c.fd, c.r, buf, REG_LEN, ACC_ALL, &own))
		STAGE(5);

	s = k.seed | 1;
	for (i = 0; i < k.attempts; i++) {
		uint64_t r = xs64(&s), key, off, len;
		int reg = (int)((r >> 4) % NREG), which = reg;
		bool live = false, wr = r & 1;

		switch ((r >> 1) % 8) {
		case 0: case 1: case 2: case 3:
			key = k.key[reg];
			live = reg != R_DEAD;
			break;
		case 4: case 5:
			key = near_key(k.key[reg], &s);
			which = K_NEAR;
			break;
		case 6:
			key = xs64(&s);
			which = K_RANDOM;
			break;
		default: {
			/* the ids of root's regions, in our own context */
			struct hcomm_query q;

			if (k.region[reg] == own.region)
				continue;
			rep.ids++;
			switch ((r >> 8) % 3) {
			case 0:
				ret = hc_query(c.fd, c.r, k.region[reg], NULL,
					       0, &q);
				break;
			case 1:
				ret = grant(c.fd, c.r, k.region[reg],
					    HCOMM_GRANT_ANY, ACC_REMOTE, 0);
				break;
			default:
				ret = hc_dereg(c.fd, c.r, k.region[reg]);
			}
			if (!ret && !rep.id_ok++)
				rep.first_id = reg;
			count_err(&rep, ret);
			continue;
		}
		}
		if (key == own.key)
			continue;
		off = xs64(&s) % REG_LEN;
		len = 1 + xs64(&s) % (REG_LEN - off);
		rep.xfers++;
		if (wr)
			ret = xfer_sync(c.fd, c.r, own.key, 0, key, off, len);
		else
			ret = xfer_sync(c.fd, c.r, key, off, own.key, 0, len);
		if (!ret) {
			if (!rep.xfer_ok++)
				rep.first_xfer = which;
			continue;
		}
		count_err(&rep, ret);
		if (live && ret != -EACCES)
			rep.live_not_eacces++;

		/* the control, every 16th attempt: granted for reading */
		if (i % 16)
			continue;
		rep.ctl_reads++;
		ret = xfer_sync(c.fd, c.r, k.ctl_key, 0, own.key, 0, REG_LEN);
		if (!ret && check_pat(buf, REG_LEN, k.seed + 100) < 0)
			rep.ctl_read_ok++;
		rep.ctl_writes++;
		ret = xfer_sync(c.fd, c.r, own.key, 0, k.ctl_key, 0, 64);
		if (!ret)
			rep.ctl_write_ok++;
		fill_pat(buf, REG_LEN, ~k.seed);
	}
	/* nothing of root's ever landed in our buffer */
	memcpy(ctl_copy, buf, REG_LEN);
	if (check_pat(ctl_copy, REG_LEN, ~k.seed) >= 0)
		rep.own_corrupt++;
	if (hc_dereg(c.fd, c.r, own.region))
		STAGE(6);
	hc_ctx_close(&c);
out:
	if (write(out_fd, &rep, sizeof(rep)) != sizeof(rep))
		_exit(2);
	_exit(rep.stage ? 1 : 0);
#undef STAGE
}

/* Root, during the attack: flip one grant, re-register another region. */
struct churn {
	int fd;
	struct io_uring *r;
	uint32_t flip_region;
	uint8_t *dead_buf;
	volatile int stop;
	uint64_t flips, reregs;
	int err;
};

static void *churn_fn(void *arg)
{
	struct churn *ch = arg;
	struct hcomm_reg_mem rr;
	uint32_t last = 0;

	while (!ch->stop && !ch->err) {
		if (ch->flips & 1)
			ch->err = grant(ch->fd, ch->r, ch->flip_region,
					HCOMM_GRANT_NONE, 0, 0);
		else
			ch->err = grant(ch->fd, ch->r, ch->flip_region,
					HCOMM_GRANT_UID, ACC_REMOTE, OTHER_UID);
		ch->flips++;
		if (ch->err || ch->flips % 8)
			continue;
		/* a fresh key for the dead region's bytes, then drop it */
		if (last)
			ch->err = hc_dereg(ch->fd, ch->r, last);
		last = 0;
		if (!ch->err)
			ch->err = hc_reg_mem(ch->fd, ch->r, ch->dead_buf,
					     REG_LEN, ACC_ALL, &rr);
		if (!ch->err) {
			last = rr.region;
			ch->reregs++;
		}
	}
	if (last && !ch->err)
		ch->err = hc_dereg(ch->fd, ch->r, last);
	return NULL;
}

TEST_F_TIMEOUT(hcomm, other_uid_attack, 300)
{
	struct hcomm_reg_mem reg[NREG], ctl;
	struct isol_report rep;
	struct isol_keys k = { 0 };
	int in[2], out[2], ret, i;
	struct churn ch = { 0 };
	struct hcomm_stats s0;
	uint8_t *buf[NREG], *ctl_buf;
	pthread_t th;
	pid_t pid;

	k.attempts = env_u64("HCOMM_ISOL_ATTEMPTS", 20000);
	k.seed = env_u64("HCOMM_ISOL_SEED", 0);
	if (!k.seed)
		k.seed = (uint64_t)getpid() << 20 ^ (uint64_t)time(NULL);
	TH_LOG("seed %llu (HCOMM_ISOL_SEED), %llu attempts by uid %d",
	       (unsigned long long)k.seed, (unsigned long long)k.attempts,
	       NOBODY);
	ASSERT_EQ(0, geteuid()) TH_LOG("needs root (setuid)");
	ASSERT_STATS(s0);

	for (i = 0; i < NREG; i++) {
		buf[i] = map_anon(REG_LEN);
		ASSERT_NE(NULL, buf[i]);
		fill_pat(buf[i], REG_LEN, k.seed + i);
		ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, buf[i], REG_LEN,
					ACC_ALL, &reg[i]));
		k.key[i] = reg[i].key;
		k.region[i] = reg[i].region;
	}
	ctl_buf = map_anon(REG_LEN);
	ASSERT_NE(NULL, ctl_buf);
	fill_pat(ctl_buf, REG_LEN, k.seed + 100);
	ASSERT_EQ(0, hc_reg_mem(self->fd, self->r, ctl_buf, REG_LEN, ACC_ALL,
				&ctl));
	ASSERT_EQ(0, grant(self->fd, self->r, ctl.region, HCOMM_GRANT_UID,
			   HCOMM_ACCESS_REMOTE_READ, NOBODY));
	k.ctl_key = ctl.key;

#define G(reg_, scope, acc, uid) \
	ASSERT_EQ(0, grant(self->fd, self->r, reg[reg_].region, scope, acc, uid))
	G(R_SAME_UID, HCOMM_GRANT_SAME_UID, ACC_REMOTE, 0);
	G(R_UID_OTHER, HCOMM_GRANT_UID, ACC_REMOTE, OTHER_UID);
	G(R_REVOKED, HCOMM_GRANT_ANY, ACC_REMOTE, 0);
	G(R_REVOKED, HCOMM_GRANT_NONE, 0, 0);
	G(R_MOVED, HCOMM_GRANT_UID, ACC_REMOTE, NOBODY);
	G(R_MOVED, HCOMM_GRANT_UID, ACC_REMOTE, OTHER_UID);
	G(R_READ_REVOKED, HCOMM_GRANT_UID, HCOMM_ACCESS_REMOTE_READ, NOBODY);
	G(R_READ_REVOKED, HCOMM_GRANT_NONE, 0, 0);
	/* checking the check: one region open to anyone must be caught */
	if (env_u64("HCOMM_ISOL_BREAK", 0))
		G(R_NONE, HCOMM_GRANT_ANY, ACC_REMOTE, 0);
#undef G
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, reg[R_DEAD].region));

	ASSERT_EQ(0, pipe2(in, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(out, O_CLOEXEC));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (self->r)
			io_uring_queue_exit(self->r);
		close(self->fd);
		close(in[1]);
		close(out[0]);
		attacker(variant->uring, in[0], out[1]);
	}
	close(in[0]);
	close(out[1]);

	ch.fd = self->fd;
	ch.r = NULL;	/* the fixture's ring belongs to this thread */
	ch.flip_region = reg[R_FLIPPED].region;
	ch.dead_buf = buf[R_DEAD];
	ASSERT_EQ(0, pthread_create(&th, NULL, churn_fn, &ch));
	ASSERT_EQ(sizeof(k), write(in[1], &k, sizeof(k)));
	memset(&rep, 0, sizeof(rep));
	ret = read(out[0], &rep, sizeof(rep));
	ch.stop = 1;
	pthread_join(th, NULL);
	EXPECT_EQ(0, wait_child(pid));
	ASSERT_EQ(sizeof(rep), ret) TH_LOG("the attacker sent no report");
	ASSERT_EQ(0, rep.stage) TH_LOG("the attacker failed at setup step %d",
				       rep.stage);
	ASSERT_EQ(0, ch.err) TH_LOG("root's grant/re-register churn: %d",
				    ch.err);

	TH_LOG("uid %d: %llu transfers, %llu succeeded (EACCES %llu, ENOENT "
	       "%llu, EINVAL %llu, EPERM %llu, other %llu); %llu commands on "
	       "root's region ids, %llu succeeded; root flipped a grant %llu "
	       "times and re-registered %llu times meanwhile", NOBODY,
	       (unsigned long long)rep.xfers,
	       (unsigned long long)rep.xfer_ok,
	       (unsigned long long)rep.errs[0],
	       (unsigned long long)rep.errs[1],
	       (unsigned long long)rep.errs[2],
	       (unsigned long long)rep.errs[3],
	       (unsigned long long)rep.errs[4], (unsigned long long)rep.ids,
	       (unsigned long long)rep.id_ok, (unsigned long long)ch.flips,
	       (unsigned long long)ch.reregs);
	TH_LOG("control (granted READ to %d): %llu of %llu reads succeeded "
	       "with the right bytes, %llu of %llu writes succeeded", NOBODY,
	       (unsigned long long)rep.ctl_read_ok,
	       (unsigned long long)rep.ctl_reads,
	       (unsigned long long)rep.ctl_write_ok,
	       (unsigned long long)rep.ctl_writes);

	EXPECT_EQ(0, rep.xfer_ok) TH_LOG("the first successful transfer "
					 "named %s%s",
					 rep.first_xfer >= 0 &&
					 rep.first_xfer < NREG ?
					 "the key of region " : "",
					 rep.first_xfer >= 0 ?
					 reg_name[rep.first_xfer] : "?");
	EXPECT_EQ(0, rep.id_ok) TH_LOG("a command on root's region id of "
				       "region %s succeeded in the attacker's "
				       "context", rep.first_id >= 0 ?
				       reg_name[rep.first_id] : "?");
	EXPECT_EQ(0, rep.live_not_eacces)
		TH_LOG("a live key was refused other than with EACCES");
	EXPECT_EQ(0, rep.own_corrupt);
	EXPECT_LT(k.attempts / 2, rep.xfers);
	EXPECT_LT(0, rep.ctl_reads);
	EXPECT_EQ(rep.ctl_reads, rep.ctl_read_ok);
	EXPECT_EQ(0, rep.ctl_write_ok);
	EXPECT_LT(0, ch.flips);

	for (i = 0; i < NREG; i++) {
		long at = check_pat(buf[i], REG_LEN, k.seed + i);

		EXPECT_EQ(-1, at) TH_LOG("region %s changed at byte %ld",
					 reg_name[i], at);
		if (i != R_DEAD)
			EXPECT_EQ(0, hc_dereg(self->fd, self->r,
					      reg[i].region));
		munmap(buf[i], REG_LEN);
	}
	EXPECT_EQ(-1, check_pat(ctl_buf, REG_LEN, k.seed + 100));
	EXPECT_EQ(0, hc_dereg(self->fd, self->r, ctl.region));
	munmap(ctl_buf, REG_LEN);
	close(in[1]);
	close(out[0]);
}

/* ------------------------------------------------------------------ */
/* memlock: one user's budget across many fds and processes            */
/* ------------------------------------------------------------------ */

#define ML_LIMIT	(2 * MiB)
#define ML_PROCS	4
#define ML_FDS		4
#define ML_CHUNK	(64 * KiB)

/*
 * One process of the user: ML_FDS contexts, one thread each, racing to
 * register ML_CHUNK ranges of its own buffer (which alone could take the
 * whole budget) until ENOMEM.  Reports how many it got, then holds them
 * until the parent closes @hold.
 */
/* One process's report: written with one write() (atomic in a pipe). */
struct ml_rep {
	uint64_t got;
	int err;
};

struct ml_thread {
	struct hc_ctx c;
	uint8_t *buf;
	int go_fd;
	uint64_t got;
	int err;
};

static void *ml_thread_fn(void *arg)
{
	struct ml_thread *t = arg;
	uint64_t off;
	char b;
	int ret;

	if (read(t->go_fd, &b, 1) != 1) {
		t->err = -EPIPE;
		return NULL;
	}
	for (off = 0; off + ML_CHUNK <= ML_LIMIT; off += ML_CHUNK) {
		ret = hc_reg_mem(t->c.fd, t->c.r, t->buf + off, ML_CHUNK,
				 ACC_ALL, NULL);
		if (ret == -ENOMEM)
			break;
		if (ret) {
			t->err = ret;
			break;
		}
		t->got += ML_CHUNK;
	}
	return NULL;
}

/* A setup failure is reported too: the parent never waits for nothing. */
static void __attribute__((noreturn)) ml_fail(int rep_fd, int err)
{
	struct ml_rep rep = { .got = 0, .err = err };

	if (write(rep_fd, &rep, sizeof(rep)) != sizeof(rep))
		_exit(5);
	_exit(3);
}

static void __attribute__((noreturn))
ml_process(int go_fd, int rep_fd, int hold_fd)
{
	struct ml_thread t[ML_FDS];
	struct ml_rep rep = { 0 };
	pthread_t th[ML_FDS];
	int i, ret;
	char b;

	alarm(120);
	for (i = 0; i < ML_FDS; i++) {
		t[i].go_fd = go_fd;
		t[i].got = 0;
		t[i].err = 0;
		t[i].buf = map_anon(ML_LIMIT);
		if (!t[i].buf)
			ml_fail(rep_fd, -ENOMEM);
		ret = hc_ctx_open(&t[i].c, i & 1, 0);
		if (ret)
			ml_fail(rep_fd, ret);
		touch(t[i].buf, ML_LIMIT);
	}
	for (i = 0; i < ML_FDS; i++)
		if (pthread_create(&th[i], NULL, ml_thread_fn, &t[i]))
			ml_fail(rep_fd, -EAGAIN);
	for (i = 0; i < ML_FDS; i++) {
		pthread_join(th[i], NULL);
		rep.got += t[i].got;
		if (t[i].err && !rep.err)
			rep.err = t[i].err;
	}
	if (write(rep_fd, &rep, sizeof(rep)) != sizeof(rep))
		_exit(5);
	/* hold every range until the parent has looked at the gauges */
	if (read(hold_fd, &b, 1) < 0)
		_exit(6);
	_exit(0);
}

TEST(memlock_many_fds_and_processes)
{
	int go[2], rep[2], hold[2], i, err;
	uint64_t total = 0;
	struct hcomm_stats s0, s1, s2;
	pid_t pid[ML_PROCS], user;

	ASSERT_EQ(0, geteuid()) TH_LOG("needs root (setuid)");
	ASSERT_STATS(s0);
	ASSERT_EQ(0, pipe2(go, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(rep, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(hold, O_CLOEXEC));

	/* one child becomes the user; its processes share one budget */
	user = fork();
	ASSERT_LE(0, user);
	if (user == 0) {
		struct rlimit rl = { ML_LIMIT, ML_LIMIT };

		close(go[1]);
		close(rep[0]);
		close(hold[1]);
		if (setrlimit(RLIMIT_MEMLOCK, &rl) || become_nobody())
			_exit(2);
		for (i = 0; i < ML_PROCS; i++) {
			pid[i] = fork();
			if (pid[i] < 0)
				_exit(7);
			if (pid[i] == 0)
				ml_process(go[0], rep[1], hold[0]);
		}
		close(go[0]);
		close(rep[1]);
		close(hold[0]);
		err = 0;
		for (i = 0; i < ML_PROCS; i++) {
			int st = wait_child(pid[i]);

			if (st && !err)
				err = st;
		}
		_exit(err);
	}
	close(go[0]);
	close(rep[1]);
	close(hold[0]);

	/* let every thread of every process go at once */
	hc_sleep_ms(500);
	{
		char gobuf[ML_PROCS * ML_FDS];

		memset(gobuf, 'g', sizeof(gobuf));
		ASSERT_EQ(sizeof(gobuf), write(go[1], gobuf, sizeof(gobuf)));
	}
	for (i = 0; i < ML_PROCS; i++) {
		struct pollfd p = { .fd = rep[0], .events = POLLIN };
		struct ml_rep mr;

		ASSERT_EQ(1, poll(&p, 1, 60000))
			TH_LOG("%d of %d processes reported within 60 s", i,
			       ML_PROCS);
		ASSERT_EQ(sizeof(mr), read(rep[0], &mr, sizeof(mr)));
		EXPECT_EQ(0, mr.err) TH_LOG("a context got %d (%s) instead of "
					    "ENOMEM", mr.err,
					    strerror(-mr.err));
		total += mr.got;
	}
	ASSERT_STATS(s1);
	TH_LOG("uid %d, RLIMIT_MEMLOCK %lu KiB, %d processes x %d contexts: "
	       "%llu KiB registered; memlock gauge %llu KiB above the start",
	       NOBODY, ML_LIMIT / KiB, ML_PROCS, ML_FDS,
	       (unsigned long long)(total / KiB),
	       (unsigned long long)((s1.memlock_pages - s0.memlock_pages) *
				    PG / KiB));
	EXPECT_EQ(ML_LIMIT, total);
	EXPECT_EQ(ML_LIMIT / PG, s1.memlock_pages - s0.memlock_pages);

	close(hold[1]);		/* release them all */
	EXPECT_EQ(0, wait_child(user));
	close(go[1]);
	close(rep[0]);
	ASSERT_EQ(0, hcomm_gauges_wait(&s0, &s2, 10000))
		hcomm_gauges_dump(stderr, "after the user's processes exited",
				  &s0, &s2);
}

TEST_HARNESS_MAIN
