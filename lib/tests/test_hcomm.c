/* SPDX-License-Identifier: MIT */
/*
 * Host unit tests of libhcomm; need no module.  TAP on stdout, then
 * "lib: N passed, N failed".
 * Usage: test_hcomm [libhcomm.so [hcomm_demo fake_hcomm.so]]
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hcomm_comm_int.h"
#include "fake_hcomm.h"
#include "tap.h"

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;	/* the DIR's own fd */
}

static void test_strerror(void)
{
	int i, j, good = 1, distinct = 1;

	for (i = 0; i < HCOMM_ERR__MAX; i++) {
		const char *s = hcomm_strerror(-i);

		if (!s || !*s || s != hcomm_strerror(i)) {
			good = 0;
			printf("# code %d: bad message\n", i);
		}
		for (j = 0; j < i; j++)
			if (!strcmp(s, hcomm_strerror(j))) {
				distinct = 0;
				printf("# codes %d and %d share \"%s\"\n", i, j, s);
			}
	}
	ok(good, "strerror: every code has a message");
	ok(distinct, "strerror: messages are distinct");
	ok(*hcomm_strerror(-HCOMM_ERR__MAX) && *hcomm_strerror(-1000) &&
	   strcmp(hcomm_strerror(1000), hcomm_strerror(HCOMM_ERR_IO)),
	   "strerror: unknown codes get a message of their own");
	ok(strstr(hcomm_strerror(-HCOMM_ERR_MMAP), "ulimit -l") &&
	   strstr(hcomm_strerror(-HCOMM_ERR_MMAP), "RLIMIT_MEMLOCK") &&
	   strstr(hcomm_strerror(-HCOMM_ERR_MMAP), "CAP_IPC_LOCK"),
	   "strerror: MMAP names ulimit -l, RLIMIT_MEMLOCK, CAP_IPC_LOCK");
	ok(strstr(hcomm_strerror(-HCOMM_ERR_NODEV), "modprobe hcomm") &&
	   strstr(hcomm_strerror(-HCOMM_ERR_NODEV), "insmod"),
	   "strerror: NODEV names modprobe hcomm and insmod");
	ok(HCOMM_TIMEOUT == HCOMM_ERR_TIMEOUT, "HCOMM_TIMEOUT alias");
}

static void test_errno_map(void)
{
	static const struct { uint32_t op; int err, code; } t[] = {
		{ 0, 0, HCOMM_OK },
		{ 0, ENOENT, HCOMM_ERR_NODEV },
		{ 0, ENODEV, HCOMM_ERR_NODEV },
		{ 0, ENXIO, HCOMM_ERR_NODEV },
		{ 0, ENOTDIR, HCOMM_ERR_NODEV },
		{ 0, EACCES, HCOMM_ERR_ACCESS },
		{ 0, EPERM, HCOMM_ERR_ACCESS },
		{ 0, EROFS, HCOMM_ERR_ACCESS },
		{ 0, EISDIR, HCOMM_ERR_NOTHCOMM },
		{ 0, EMFILE, HCOMM_ERR_LIMIT },
		{ 0, ENFILE, HCOMM_ERR_LIMIT },
		{ 0, EBUSY, HCOMM_ERR_BUSY },
		{ HCOMM_CMD_GET_INFO, ENOTTY, HCOMM_ERR_NOTHCOMM },
		{ HCOMM_CMD_GET_INFO, EINVAL, HCOMM_ERR_INVAL },
		{ HCOMM_CMD_REG_MEM, ENOMEM, HCOMM_ERR_MMAP },
		{ HCOMM_CMD_REG_MEM, EFAULT, HCOMM_ERR_ACCESS },
		{ HCOMM_CMD_REG_MEM, EPERM, HCOMM_ERR_ACCESS },
		{ HCOMM_CMD_REG_MEM, EINVAL, HCOMM_ERR_INVAL },
		{ HCOMM_CMD_REG_MEM, EOVERFLOW, HCOMM_ERR_INVAL },
		{ HCOMM_CMD_REG_MEM, ENOSPC, HCOMM_ERR_LIMIT },
		{ HCOMM_CMD_REG_MEM, E2BIG, HCOMM_ERR_LIMIT },
		{ HCOMM_CMD_REG_MEM, EINTR, HCOMM_ERR_BUSY },
		{ HCOMM_CMD_REG_MEM, EAGAIN, HCOMM_ERR_BUSY },
		{ HCOMM_CMD_REG_MEM, ENOTTY, HCOMM_ERR_ABI },
		{ HCOMM_CMD_REG_DMABUF, ENOMEM, HCOMM_ERR_NOMEM },
		{ HCOMM_CMD_REG_DMABUF, EBADF, HCOMM_ERR_INVAL },
		{ HCOMM_CMD_REG_DMABUF, EOPNOTSUPP, HCOMM_ERR_NOTSUP },
		{ HCOMM_CMD_REG_DMABUF, ENOSYS, HCOMM_ERR_NOTSUP },
		{ HCOMM_CMD_REG_DMABUF, EIO, HCOMM_ERR_IO },
		{ HCOMM_CMD_DEREG, ENOENT, HCOMM_ERR_NOENT },
		{ HCOMM_CMD_DEREG, EBUSY, HCOMM_ERR_BUSY },
		{ HCOMM_CMD_QUERY, ENOENT, HCOMM_ERR_NOENT },
		{ HCOMM_CMD_QUERY, ENODEV, HCOMM_ERR_NODEV },
		{ HCOMM_CMD_QUERY, ETIMEDOUT, HCOMM_ERR_TIMEOUT },
		{ HCOMM_CMD_QUERY, ETIME, HCOMM_ERR_TIMEOUT },
		{ HCOMM_CMD_QUERY, EHOSTDOWN, HCOMM_ERR_IO },
	};
	unsigned i;
	int bad = 0;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int got = hcomm__err_code(t[i].op, t[i].err);

		if (got != t[i].code) {
			bad++;
			printf("# op %#x %s: got %d want %d\n", t[i].op,
			       strerrorname_np(t[i].err), got, t[i].code);
		}
	}
	ok(!bad, "errno map: %u entries", i);
}

static void test_prep_cmd(void)
{
	unsigned char want[64] = { 0 }, got[64];
	struct io_uring_sqe sqe;
	uint64_t argp, addr;
	char arg[56];
	uint32_t op = HCOMM_CMD_REG_MEM, size = sizeof(arg);
	int32_t fd = 0x1234567;

	memset(&sqe, 0xa5, sizeof(sqe));
	hcomm__prep_cmd(&sqe, fd, op, arg, size);
	memcpy(got, &sqe, sizeof(got));

	/* Offsets from the kernel's struct io_uring_sqe, not from headers. */
	want[0] = 46;				/* IORING_OP_URING_CMD */
	memcpy(want + 4, &fd, 4);		/* fd */
	memcpy(want + 8, &op, 4);		/* cmd_op; __pad1 stays 0 */
	argp = (uintptr_t)arg;
	memcpy(want + 48, &argp, 8);		/* hcomm_uring_cmd.addr */
	memcpy(want + 56, &size, 4);		/* .size; .flags = 0 */
	ok(sizeof(sqe) == 64 && !memcmp(got, want, 64),
	   "prep_cmd: SQE bytes exact");
	ok(IORING_OP_URING_CMD == 46 && sqe.opcode == 46 && sqe.fd == fd &&
	   sqe.cmd_op == op && sqe.off == op, "prep_cmd: opcode, fd, cmd_op");
	memcpy(&addr, sqe.cmd, 8);
	ok(addr == argp && !memcmp(sqe.cmd + 8, &size, 4) &&
	   !sqe.flags && !sqe.user_data && !sqe.uring_cmd_flags,
	   "prep_cmd: payload at sqe->cmd, other fields zero");
}

static void test_uapi_layout(void)
{
	ok(sizeof(struct hcomm_info) == 88 &&
	   sizeof(struct hcomm_reg_mem) == 56 &&
	   sizeof(struct hcomm_reg_dmabuf) == 56 &&
	   sizeof(struct hcomm_dereg) == 24 &&
	   sizeof(struct hcomm_query) == 88 &&
	   sizeof(struct hcomm_extent) == 24 &&
	   sizeof(struct hcomm_uring_cmd) == 16,
	   "uapi: struct sizes (no implicit padding)");
	ok(_IOC_SIZE(HCOMM_CMD_GET_INFO) == sizeof(struct hcomm_info) &&
	   _IOC_SIZE(HCOMM_CMD_REG_MEM) == sizeof(struct hcomm_reg_mem) &&
	   _IOC_SIZE(HCOMM_CMD_REG_DMABUF) == sizeof(struct hcomm_reg_dmabuf) &&
	   _IOC_SIZE(HCOMM_CMD_DEREG) == sizeof(struct hcomm_dereg) &&
	   _IOC_SIZE(HCOMM_CMD_QUERY) == sizeof(struct hcomm_query) &&
	   _IOC_TYPE(HCOMM_CMD_QUERY) == HCOMM_IOC_MAGIC,
	   "uapi: _IOC_SIZE of every command");
}

static int open_with(const char *dev, const char *no_uring, unsigned flags,
		     int *fd_delta)
{
	struct hcomm_ctx *ctx = (struct hcomm_ctx *)1;
	int before, ret;

	setenv("HCOMM_DEVICE", dev, 1);
	if (no_uring)
		setenv("HCOMM_NO_URING", no_uring, 1);
	else
		unsetenv("HCOMM_NO_URING");
	before = count_fds();
	ret = hcomm_open(&ctx, flags);
	*fd_delta = count_fds() - before;
	if (!ret)
		hcomm_close(ctx);
	else if (ctx)
		ret = -9999;	/* must be NULL on failure */
	return ret;
}

static void test_open(void)
{
	int ret, d;

	ret = open_with("/nonexistent", NULL, 0, &d);
	ok(ret == -HCOMM_ERR_NODEV && hcomm_errno() == ENOENT && !d &&
	   strstr(hcomm_errmsg(), "/nonexistent"),
	   "open /nonexistent: -HCOMM_ERR_NODEV (%d, \"%s\")", ret,
	   hcomm_errmsg());
	ok(strstr(hcomm_strerror(ret), "modprobe hcomm") != NULL,
	   "open /nonexistent: message: %s", hcomm_strerror(ret));

	ret = open_with("/dev/null", NULL, 0, &d);
	ok(ret == -HCOMM_ERR_NOTHCOMM && hcomm_errno() == ENOTTY,
	   "open /dev/null: -HCOMM_ERR_NOTHCOMM (%d, \"%s\": %s)", ret,
	   hcomm_errmsg(), hcomm_strerror(ret));
	ok(d == 0, "open /dev/null: no fd leaked (delta %d)", d);
	ret = open_with("/dev/null", "1", HCOMM_OPEN_NO_URING, &d);
	ok(ret == -HCOMM_ERR_NOTHCOMM && !d,
	   "open /dev/null, ioctl only: same error, no fd leaked");

	ret = open_with("/proc", NULL, 0, &d);
	ok(ret == -HCOMM_ERR_NOTHCOMM && !d, "open a directory: %d (%s)",
	   ret, hcomm_errmsg());

	ret = open_with("/dev/null", NULL, 0x80, &d);
	ok(ret == -HCOMM_ERR_INVAL && !d, "open with unknown flags: -INVAL");
	ok(hcomm_open(NULL, 0) == -HCOMM_ERR_INVAL, "open NULL ctx: -INVAL");
	unsetenv("HCOMM_DEVICE");
	unsetenv("HCOMM_NO_URING");
}

static void test_null_args(void)
{
	struct hcomm_info info;
	struct hcomm_query q;
	struct hcomm_mr *mr = (struct hcomm_mr *)1;

	hcomm_close(NULL);
	ok(hcomm_uses_uring(NULL) == 0 && hcomm_fd(NULL) == -1 &&
	   hcomm_get_info(NULL, &info) == -HCOMM_ERR_INVAL &&
	   hcomm_reg_mem(NULL, &info, 1, 0, &mr) == -HCOMM_ERR_INVAL &&
	   hcomm_reg_dmabuf(NULL, 0, 0, 1, 0, &mr) == -HCOMM_ERR_INVAL &&
	   hcomm_dereg(NULL) == -HCOMM_ERR_INVAL &&
	   hcomm_query(NULL, &q, NULL, 0) == -HCOMM_ERR_INVAL,
	   "NULL arguments give -HCOMM_ERR_INVAL");
}

static void *other_thread(void *p)
{
	(void)p;
	setenv("HCOMM_DEVICE", "/nonexistent-thread", 1);
	return (void *)(intptr_t)hcomm_open(&(struct hcomm_ctx *){ NULL }, 0);
}

static void test_thread_local(void)
{
	pthread_t t;
	void *res;

	hcomm_get_info(NULL, NULL);
	pthread_create(&t, NULL, other_thread, NULL);
	pthread_join(t, &res);
	ok((intptr_t)res == -HCOMM_ERR_NODEV && hcomm_errno() == EINVAL &&
	   !strstr(hcomm_errmsg(), "thread"),
	   "hcomm_errno/hcomm_errmsg are per thread");
	unsetenv("HCOMM_DEVICE");
}

static void fake_reset(uint64_t features)
{
	memset(&fake, 0, sizeof(fake));
	fake.on = 1;
	fake.abi = HCOMM_ABI_VERSION;
	fake.features = features;
	fake.memlock = ~0ULL;
	setenv("HCOMM_DEVICE", "/dev/null", 1);
	unsetenv("HCOMM_NO_URING");
}

static void test_fake(void)
{
	struct hcomm_mr *mr, *mr2;
	struct hcomm_ctx *ctx;
	struct hcomm_extent ext[2];
	struct hcomm_query q;
	struct hcomm_info info;
	static char buf[8192];
	int before = count_fds(), ret;

	/* URING_CMD advertised, but /dev/null has no ->uring_cmd. */
	fake_reset(HCOMM_FEAT_URING_CMD);
	ret = hcomm_open(&ctx, 0);
	ok(!ret && ctx && !hcomm_uses_uring(ctx) &&
	   count_fds() == before + 1,
	   "fake: uring_cmd refused by the file -> ioctl, ring fds closed");
	if (ret)
		return;
	ok(!hcomm_get_info(ctx, &info) && info.abi_version == HCOMM_ABI_VERSION
	   && info.max_regions == 8, "fake: get_info");

	ret = hcomm_reg_mem(ctx, buf + 1, 4097, HCOMM_ACCESS_ALL, &mr);
	ok(!ret && mr->ctx == ctx && mr->region == 1 &&
	   mr->key == 0xfeed0001ULL && mr->addr == buf + 1 &&
	   mr->len == 4097 && mr->access == HCOMM_ACCESS_ALL &&
	   mr->type == HCOMM_REGION_HOST && mr->dmabuf_fd == -1,
	   "fake: reg_mem fills the mr (%d)", ret);
	if (ret)
		return;
	ret = hcomm_query(mr, &q, ext, 2);
	ok(!ret && q.region == 1 && q.len == 4097 && q.nr_extents == 1 &&
	   q.extents == (uintptr_t)ext && ext[0].len == q.nr_pages * 4096,
	   "fake: query with extents");
	ok(hcomm_query(mr, &q, NULL, 0) == 0 && !q.extents && !q.max_extents,
	   "fake: query without extents");
	ok(hcomm_query(mr, &q, NULL, 1) == -HCOMM_ERR_INVAL,
	   "fake: query max_ext without array: -INVAL");

	ok(hcomm_reg_dmabuf(ctx, 3, 0, 4096, 0, &mr2) == -HCOMM_ERR_NOTSUP &&
	   !mr2, "fake: reg_dmabuf without HCOMM_FEAT_DMABUF: -NOTSUP");
	ok(hcomm_reg_mem(ctx, buf, 0, 0, &mr2) == -HCOMM_ERR_INVAL &&
	   hcomm_errno() == EINVAL && !mr2, "fake: kernel EINVAL: -INVAL");

	fake.enomem = 1;
	fake.memlock = 65536;
	ret = hcomm_reg_mem(ctx, buf, 8192, 0, &mr2);
	ok(ret == -HCOMM_ERR_MMAP && hcomm_errno() == ENOMEM &&
	   strstr(hcomm_errmsg(), "memlock limit 65536"),
	   "fake: ENOMEM under a memlock limit: -MMAP (%s)", hcomm_errmsg());
	fake.memlock = ~0ULL;
	ok(hcomm_reg_mem(ctx, buf, 8192, 0, &mr2) == -HCOMM_ERR_NOMEM,
	   "fake: ENOMEM with unlimited memlock: -NOMEM");
	fake.enomem = 0;

	ok(!hcomm_dereg(mr) && !fake.live, "fake: dereg");
	ret = hcomm_reg_mem(ctx, buf, 1, 0, &mr);
	mr->region = 99;	/* make the kernel refuse it */
	ok(!ret && hcomm_dereg(mr) == -HCOMM_ERR_NOENT && mr->region == 99,
	   "fake: dereg of unknown region: -NOENT, mr kept");
	ok(!hcomm_reg_mem(ctx, buf, 2, 0, &mr2), "fake: leave an mr registered");
	hcomm_close(ctx);	/* frees both mrs (check with valgrind) */
	ok(count_fds() == before, "fake: close releases every fd");

	fake_reset(HCOMM_FEAT_DMABUF);
	ok(!hcomm_open(&ctx, 0) && !hcomm_uses_uring(ctx) &&
	   !hcomm_reg_dmabuf(ctx, 7, 4096, 8192, HCOMM_ACCESS_REMOTE_READ, &mr)
	   && mr->type == HCOMM_REGION_DMABUF && mr->dmabuf_fd == 7 &&
	   mr->offset == 4096 && mr->len == 8192 && !mr->addr &&
	   !hcomm_dereg(mr), "fake: reg_dmabuf/dereg");
	hcomm_close(ctx);

	fake_reset(HCOMM_FEAT_URING_CMD);
	fake.abi = HCOMM_ABI_VERSION + 1;
	ctx = (struct hcomm_ctx *)1;
	ret = hcomm_open(&ctx, 0);
	ok(ret == -HCOMM_ERR_ABI && !ctx && count_fds() == before &&
	   strstr(hcomm_errmsg(), "ABI version"),
	   "fake: ABI mismatch refused, no fd leaked (%s)", hcomm_errmsg());

	/* A garbage HCOMM_CACHE_LIMIT fails the open, naming it. */
	{
		static const char *const bad[] = { "lots", "64Q", "-1", "",
						   "65G", "1e6" };
		unsigned i;
		int good = 1;

		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			fake_reset(0);
			setenv("HCOMM_CACHE_LIMIT", bad[i], 1);
			ctx = (struct hcomm_ctx *)1;
			ret = hcomm_open(&ctx, 0);
			if (ret != -HCOMM_ERR_INVAL || ctx ||
			    count_fds() != before ||
			    !strstr(hcomm_errmsg(), "HCOMM_CACHE_LIMIT")) {
				good = 0;
				printf("# HCOMM_CACHE_LIMIT=\"%s\": open %d (%s)\n",
				       bad[i], ret, hcomm_errmsg());
				if (!ret)
					hcomm_close(ctx);
			}
		}
		ok(good, "fake: a garbage or out-of-range HCOMM_CACHE_LIMIT "
		   "fails hcomm_open with -INVAL naming it, no fd leaked");
		fake_reset(0);
		setenv("HCOMM_CACHE_LIMIT", "0", 1);
		ret = hcomm_open(&ctx, 0);
		ok(!ret, "fake: HCOMM_CACHE_LIMIT=0 (cache off) is fine");
		if (!ret)
			hcomm_close(ctx);
		unsetenv("HCOMM_CACHE_LIMIT");
	}

	fake.on = 0;
	unsetenv("HCOMM_DEVICE");
}

/* hcomm_set_qos: what the library checks itself, and its error names. */
static void test_set_qos(void)
{
	static const hcomm_qos_config_t bad[] = {
		{ .min_rate = 101, .max_rate = 0 },
		{ .min_rate = 0, .max_rate = 101 },
		{ .min_rate = 71, .max_rate = 70 },
		{ .min_rate = 0, .max_rate = 100, .priority = 8 },
		{ .min_rate = ~0U, .max_rate = ~0U, .priority = ~0U },
	};
	struct hcomm_ctx *ctx;
	unsigned i;
	int ret, n, good = 1;

	fake_reset(0);
	if (hcomm_open(&ctx, 0)) {
		ok(0, "qos: open the fake device");
		return;
	}
	/* the seed's snippet, as written */
	ret = hcomm_set_qos(ctx, &(hcomm_qos_config_t){
		.min_rate = 30, .max_rate = 70, .priority = 2 });
	ok(!ret && fake.qos.min_rate == 30 && fake.qos.max_rate == 70 &&
	   fake.qos.priority == 2 && !fake.qos.flags && !fake.qos.reserved[0]
	   && !fake.qos.reserved[1], "qos: the seed's { 30, 70, 2 } reaches "
	   "SET_QOS as is, flags and reserved zero (%d)", ret);
	ok(!hcomm_set_qos(ctx, &(hcomm_qos_config_t){ .min_rate = 30 }) &&
	   fake.qos.min_rate == 30 && fake.qos.max_rate == 100,
	   "qos: max_rate 0 means no cap (100)");
	n = fake.ioctls;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ret = hcomm_set_qos(ctx, &bad[i]);
		if (ret != -HCOMM_ERR_INVAL || hcomm_errno() != EINVAL ||
		    !strstr(hcomm_errmsg(), "priority <= 7")) {
			good = 0;
			printf("# { %u, %u, %u }: %d (%s)\n", bad[i].min_rate,
			       bad[i].max_rate, bad[i].priority, ret,
			       hcomm_errmsg());
		}
	}
	ok(good && fake.ioctls == n && hcomm_set_qos(ctx, NULL) ==
	   -HCOMM_ERR_INVAL && hcomm_set_qos(NULL, &bad[0]) ==
	   -HCOMM_ERR_INVAL && fake.ioctls == n,
	   "qos: out-of-range values and NULL: -INVAL before any ioctl");

	fake.qos_errno = ENOSPC;
	ret = hcomm_set_qos(ctx, &(hcomm_qos_config_t){ .min_rate = 60 });
	ok(ret == -HCOMM_ERR_ADMISSION && hcomm_errno() == ENOSPC &&
	   strstr(hcomm_errmsg(), "min_rate 60") &&
	   strstr(hcomm_errmsg(), "100 %"),
	   "qos: ENOSPC is -ADMISSION, naming the rate (%s)", hcomm_errmsg());
	fake.qos_errno = EPERM;
	ret = hcomm_set_qos(ctx, &(hcomm_qos_config_t){ .priority = 3 });
	ok(ret == -HCOMM_ERR_ACCESS && hcomm_errno() == EPERM &&
	   strstr(hcomm_errmsg(), "CAP_SYS_NICE") &&
	   strstr(hcomm_errmsg(), "qos_user_min_rate") &&
	   strstr(hcomm_errmsg(), "qos_user_priority"),
	   "qos: EPERM is -ACCESS naming CAP_SYS_NICE and the module's "
	   "allowances (%s)", hcomm_errmsg());
	fake.qos_errno = ENOTTY;
	ok(hcomm_set_qos(ctx, &(hcomm_qos_config_t){ 0 }) == -HCOMM_ERR_ABI,
	   "qos: a module without SET_QOS: -ABI");
	fake.qos_errno = 0;
	hcomm_close(ctx);
	fake.on = 0;
	unsetenv("HCOMM_DEVICE");
}

/* The seed's registration snippet compiles and runs as written. */
static void test_seed_mr(void)
{
	static char buf[4096];
	struct hcomm_ctx *dev_ctx;
	void *addr = buf;
	size_t size = sizeof(buf);
	hcomm_mr_t mr;
	int ret;

	fake_reset(0);
	if (hcomm_open(&dev_ctx, 0)) {
		ok(0, "seed mr: open the fake device");
		return;
	}
	ret = hcomm_reg_mem(dev_ctx, addr, size, HCOMM_ACCESS_LOCAL_WRITE, &mr);
	ok(!ret && mr->addr == buf && mr->len == sizeof(buf) &&
	   !hcomm_dereg(mr), "seed: hcomm_mr_t mr; hcomm_reg_mem(dev_ctx, addr, "
	   "size, HCOMM_ACCESS_LOCAL_WRITE, &mr)");
	hcomm_close(dev_ctx);
	fake.on = 0;
	unsetenv("HCOMM_DEVICE");
}

static void test_exports(const char *so)
{
	static const char *const pub[] = {
		"hcomm_open", "hcomm_close", "hcomm_uses_uring", "hcomm_fd",
		"hcomm_get_info", "hcomm_reg_mem", "hcomm_reg_dmabuf",
		"hcomm_dereg", "hcomm_query", "hcomm_strerror",
		"hcomm_errno", "hcomm_errmsg", "hcomm_comm_set_coll_timeout",
		"hcomm_barrier", "hcomm_comm_get_stats", "hcomm_dtype_size",
		"hcomm_dtype_name", "hcomm_redop_name", "hcomm_allreduce",
		"hcomm_reduce_scatter", "hcomm_broadcast", "hcomm_reduce",
		"hcomm_comm_set_fp16_compress", "hcomm_set_qos",
	};
	static const char *const priv[] = {
		"hcomm__prep_cmd", "hcomm__err_code", "fail", "hcomm_submit",
		"hcomm__run_pending", "hcomm__boot_set_timeout",
		"hcomm__coll_timeout_from_env", "hcomm__config_env",
		"hcomm__rcache_publish", "hcomm__reduce", "hcomm__coll_free",
		"hcomm__fp32_to_fp16",
	};
	void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	unsigned i, miss = 0, leak = 0;

	if (!h) {
		ok(0, "dlopen %s: %s", so, dlerror());
		return;
	}
	for (i = 0; i < sizeof(pub) / sizeof(pub[0]); i++)
		if (!dlsym(h, pub[i]) && ++miss)
			printf("# %s not exported\n", pub[i]);
	for (i = 0; i < sizeof(priv) / sizeof(priv[0]); i++)
		if (dlsym(h, priv[i]) && ++leak)
			printf("# %s exported\n", priv[i]);
	ok(!miss, "shared library exports the public API");
	ok(!leak, "shared library hides internals");
	dlclose(h);
}

/* Run cmd through sh, capture stdout+stderr; exit status or -1. */
static int run(const char *cmd, char *out, size_t len)
{
	FILE *f = popen(cmd, "r");
	size_t n = 0;
	int st;

	out[0] = 0;
	if (!f)
		return -1;
	while (n < len - 1 && fgets(out + n, len - n, f))
		n += strlen(out + n);
	while (fgetc(f) != EOF)
		;
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_demo(const char *demo, const char *fake_so)
{
	static char out[16384], cmd[1024];
	const char *env = "FAKE_HCOMM=1 HCOMM_DEVICE=/dev/null LD_PRELOAD=";
	int st;

	snprintf(cmd, sizeof(cmd), "HCOMM_DEVICE=/nonexistent '%s' 2>&1", demo);
	st = run(cmd, out, sizeof(out));
	ok(st == 1 && strstr(out, "modprobe hcomm"),
	   "demo without device: exit 1 naming modprobe hcomm");

	snprintf(cmd, sizeof(cmd), "%s'%s' '%s' --reps 2 2>&1", env, fake_so,
		 demo);
	st = run(cmd, out, sizeof(out));
	ok(st == 0 && strstr(out, "commands via ioctl") &&
	   strstr(out, "64 MiB THP") &&
	   strstr(out, "host 4K pages: ") && strstr(out, "dma-buf: n/a"),
	   "demo on the fake device: exit 0 with summary (st %d)", st);
	if (st)
		printf("# %s", out);

	snprintf(cmd, sizeof(cmd), "%s'%s' '%s' --reps 1 --json%s", env,
		 fake_so, demo, access("/usr/bin/python3", X_OK) ? "" :
		 " | python3 -c 'import json,sys; json.load(sys.stdin)'");
	st = run(cmd, out, sizeof(out));
	ok(st == 0, "demo --json on the fake device: valid JSON, exit 0");

	snprintf(cmd, sizeof(cmd), "%s'%s' '%s' --require-uring 2>&1", env,
		 fake_so, demo);
	st = run(cmd, out, sizeof(out));
	ok(st == 1 && strstr(out, "not io_uring"),
	   "demo --require-uring without uring: exit 1");
}

/* ------------------------------------------------------------------ */
/* The communicator's registration cache (hcomm_rcache.c) on the fake  */
/* ------------------------------------------------------------------ */

static const struct fake_region *fake_find(uint32_t region)
{
	unsigned i;

	for (i = 0; i < FAKE_MAX_REGIONS; i++)
		if (region && fake.regs[i].region == region)
			return &fake.regs[i];
	return NULL;
}

static void test_rcache(void)
{
	const size_t pg = 4096;
	struct hcomm_rcache_stats st;
	struct hcomm_rc_ent *e1, *e2, *e3;
	struct hcomm_rcache *rc;
	const struct fake_region *r;
	uint64_t key, key2, off;
	uint32_t reg1, regs, deregs;
	unsigned char *b;
	int fd, ret;

	fake_reset(HCOMM_FEAT_REG_CACHE);
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	b = aligned_alloc(pg, 16 * pg);
	if (fd < 0 || !b) {
		ok(0, "rcache: setup");
		return;
	}

	/* A miss registers the buffer's pages; a covered buffer hits. */
	ret = hcomm__rcache_create(fd, fake.gen, 64 * pg, 8, 1 << 30, &rc);
	ok(!ret && !hcomm__rcache_get(rc, b + 100, 200, 0, &e1, &key, &off) &&
	   off == 100 && fake.regs_made == 1 &&
	   (r = fake_find(e1->region)) && r->addr == (uintptr_t)b &&
	   r->len == pg && (r->access & HCOMM_ACCESS_LOCAL_WRITE) &&
	   !hcomm__rcache_get(rc, b + 300, 100, 1, &e2, &key2, &off) &&
	   e2 == e1 && key2 == key && off == 300 && fake.regs_made == 1,
	   "rcache: a miss registers the page, a buffer inside it hits "
	   "(same key, no REG_MEM)");
	hcomm__rcache_put(e1);
	hcomm__rcache_put(e2);
	hcomm__rcache_stats(rc, &st);
	ok(st.hits == 1 && st.misses == 1 && st.entries == 1 &&
	   st.bytes == pg && !st.stale && !st.evictions && !st.dead,
	   "rcache: stats: 1 hit, 1 miss, 1 entry of one page");

	/* munmap + mmap at the same address: the slot moved, register anew. */
	reg1 = e1->region;
	fake.gen[reg1 % HCOMM_GEN_SLOTS] += 2;
	deregs = fake.deregs;
	ok(!hcomm__rcache_get(rc, b + 100, 10, 0, &e1, &key2, &off) &&
	   key2 != key && e1->region != reg1 && fake.regs_made == 2 &&
	   fake.deregs == deregs + 1 && !fake_find(reg1),
	   "rcache: a changed generation is stale: registered again with a "
	   "new key, the old region deregistered");
	hcomm__rcache_put(e1);
	hcomm__rcache_stats(rc, &st);
	ok(st.stale == 1 && st.misses == 2 && st.entries == 1,
	   "rcache: stats count the stale lookup");
	hcomm__rcache_destroy(rc);
	ok(!fake.live, "rcache: destroy deregisters everything");

	/* Merge: a buffer overlapping two entries replaces both. */
	ret = hcomm__rcache_create(fd, fake.gen, 64 * pg, 8, 1 << 30, &rc);
	ok(!ret && !hcomm__rcache_get(rc, b, pg, 0, &e1, &key, &off) &&
	   !hcomm__rcache_get(rc, b + 3 * pg, pg, 0, &e2, &key, &off),
	   "rcache: two disjoint entries");
	hcomm__rcache_put(e1);
	hcomm__rcache_put(e2);
	regs = fake.regs_made;
	deregs = fake.deregs;
	ret = hcomm__rcache_get(rc, b + pg / 2, 3 * pg, 0, &e3, &key, &off);
	hcomm__rcache_stats(rc, &st);
	ok(!ret && fake.regs_made == regs + 1 && fake.deregs == deregs + 2 &&
	   (r = fake_find(e3->region)) && r->addr == (uintptr_t)b &&
	   r->len == 4 * pg && off == pg / 2 && st.entries == 1 &&
	   st.bytes == 4 * pg && fake.live == 1,
	   "rcache: a buffer over both registers their union once (4 pages) "
	   "and deregisters the two");
	hcomm__rcache_put(e3);
	ok(!hcomm__rcache_get(rc, b + 2 * pg, 10, 0, &e1, &key2, &off) &&
	   e1 == e3 && key2 == key && off == 2 * pg &&
	   fake.regs_made == regs + 1, "rcache: the merged entry serves the "
	   "gap between the old ones");
	hcomm__rcache_put(e1);
	hcomm__rcache_destroy(rc);

	/* Dead entries: replaced while in use, kept until unused. */
	ret = hcomm__rcache_create(fd, fake.gen, 64 * pg, 1, 1 << 30, &rc);
	ok(!ret && !hcomm__rcache_get(rc, b, pg, 0, &e1, &key, &off),
	   "rcache (1 entry): an entry held by an operation");
	reg1 = e1->region;
	deregs = fake.deregs;
	ret = hcomm__rcache_get(rc, b, 2 * pg, 0, &e2, &key2, &off);
	hcomm__rcache_stats(rc, &st);
	ok(!ret && e2 != e1 && fake_find(reg1) && fake.deregs == deregs &&
	   st.dead == 1 && st.entries == 1,
	   "rcache: replacing an entry in use keeps its region registered "
	   "(dead, 1)");
	/* its operation completes; a new range needs the dead one's slot */
	hcomm__rcache_put(e1);
	hcomm__rcache_put(e2);
	ret = hcomm__rcache_get(rc, b + 8 * pg, pg, 0, &e3, &key, &off);
	hcomm__rcache_stats(rc, &st);
	ok(!ret && !fake_find(reg1) && !fake_find(e2->region) &&
	   fake_find(e3->region) && st.dead == 0 && st.entries == 1 &&
	   st.evictions == 1 && fake.live == 1,
	   "rcache: once unused, the dead entry is deregistered (swept), and "
	   "the 1-entry bound evicts the idle one");
	hcomm__rcache_put(e3);
	/* a stale entry in use goes dead too */
	reg1 = e3->region;
	ok(!hcomm__rcache_get(rc, b + 8 * pg, 10, 0, &e1, &key, &off) &&
	   e1 == e3, "rcache: hold the entry again");
	fake.gen[reg1 % HCOMM_GEN_SLOTS] += 2;
	ret = hcomm__rcache_get(rc, b + 8 * pg, 10, 0, &e2, &key2, &off);
	hcomm__rcache_stats(rc, &st);
	ok(!ret && e2 != e1 && key2 != key && fake_find(reg1) &&
	   st.dead == 1 && st.stale == 1,
	   "rcache: a stale entry in use stays registered until its "
	   "operation ends");
	hcomm__rcache_put(e1);
	hcomm__rcache_put(e2);
	hcomm__rcache_destroy(rc);
	ok(!fake.live, "rcache: destroy deregisters dead entries too");

	/* Bytes bound: least recently used idle entries go first. */
	ret = hcomm__rcache_create(fd, fake.gen, 2 * pg, 8, 1 << 30, &rc);
	ok(!ret && !hcomm__rcache_get(rc, b, 1, 0, &e1, &key, &off),
	   "rcache (2 pages): p0");
	hcomm__rcache_put(e1);
	reg1 = e1->region;
	ok(!hcomm__rcache_get(rc, b + 2 * pg, 1, 0, &e2, &key, &off),
	   "rcache: p2");
	hcomm__rcache_put(e2);
	ok(!hcomm__rcache_get(rc, b + 4 * pg, 1, 0, &e3, &key, &off),
	   "rcache: p4");
	hcomm__rcache_put(e3);
	hcomm__rcache_stats(rc, &st);
	ok(st.evictions == 1 && st.entries == 2 && st.bytes == 2 * pg &&
	   !fake_find(reg1), "rcache: over 2 pages the oldest (p0) is "
	   "evicted and deregistered");
	/* p2 used again: p4 is now the oldest */
	ok(!hcomm__rcache_get(rc, b + 2 * pg, 1, 0, &e1, &key, &off),
	   "rcache: p2 hit");
	hcomm__rcache_put(e1);
	reg1 = e3->region;
	ok(!hcomm__rcache_get(rc, b + 6 * pg, 1, 0, &e1, &key, &off) &&
	   !fake_find(reg1) && fake_find(e2->region),
	   "rcache: p6 evicts p4, the least recently used, not p2");
	hcomm__rcache_put(e1);
	/* entries in use are never evicted, whatever the bound */
	ok(!hcomm__rcache_get(rc, b + 8 * pg, 1, 0, &e1, &key, &off) &&
	   !hcomm__rcache_get(rc, b + 10 * pg, 1, 0, &e2, &key, &off) &&
	   !hcomm__rcache_get(rc, b + 12 * pg, 1, 0, &e3, &key, &off),
	   "rcache: three entries held at once");
	hcomm__rcache_stats(rc, &st);
	ok(st.entries == 3 && st.bytes == 3 * pg && fake_find(e1->region) &&
	   fake_find(e2->region) && fake_find(e3->region),
	   "rcache: entries in use are not evicted beyond the bound");
	hcomm__rcache_put(e1);
	hcomm__rcache_put(e2);
	hcomm__rcache_put(e3);
	hcomm__rcache_destroy(rc);
	ok(!fake.live, "rcache: nothing left registered");

	free(b);
	close(fd);
	fake.on = 0;
	unsetenv("HCOMM_DEVICE");
}


int main(int argc, char **argv)
{
	test_strerror();
	test_errno_map();
	test_prep_cmd();
	test_uapi_layout();
	test_open();
	test_null_args();
	test_thread_local();
	test_fake();
	test_set_qos();
	test_seed_mr();
	test_rcache();
	if (argc > 1)
		test_exports(argv[1]);
	if (argc > 3)
		test_demo(argv[2], argv[3]);
	return tap_done("lib");
}
