/* SPDX-License-Identifier: MIT */
/* libhcomm: /dev/hcomm through io_uring passthrough or ioctl. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hcomm_int.h"

#define URING_DEPTH	8
#define RING_BROKEN	INT_MIN	/* ring unusable: use ioctl() */

struct hcomm_mr_priv {
	struct hcomm_mr mr;
	struct hcomm_mr_priv *prev, *next;
	uint64_t gen;			/* generation slot value at REG_MEM */
	int parked;			/* deregistered by the caller, kept */
	struct hcomm_mr_priv *lprev, *lnext;	/* park list, newest first */
};

/* Parked registrations kept at most (besides the byte budget). */
#define PARK_MAX	64

struct hcomm_ctx {
	int fd;
	int ring_init;		/* ring must be torn down at close */
	int use_uring;		/* commands go through the ring */
	pthread_mutex_t lock;	/* ring, seq, mrs */
	struct io_uring ring;
	uint64_t seq;
	struct hcomm_mr_priv *mrs;
	struct hcomm_info info;	/* GET_INFO at open */
	/*
	 * Hot-buffer cache: host registrations the caller deregistered stay
	 * registered (parked) while their generation slot says the address
	 * still maps the same pages, so registering them again costs no
	 * system call.  Budget: HCOMM_CACHE_LIMIT bytes (default 64M, 0 off).
	 */
	const uint64_t *gen;		/* generation page, or NULL */
	struct hcomm_mr_priv *park, *park_tail;	/* under lock */
	unsigned int park_n;
	uint64_t park_bytes, park_limit;
};

_Static_assert(sizeof(struct hcomm_uring_cmd) == 16, "uring payload");
_Static_assert(offsetof(struct io_uring_sqe, cmd_op) ==
	       offsetof(struct io_uring_sqe, off), "cmd_op");
_Static_assert(offsetof(struct io_uring_sqe, cmd) == 48, "sqe->cmd");

static __thread int t_errno;
static __thread char t_msg[256];

/*
 * Whether a waiter may spin at all: not when this thread may run on one
 * CPU only.  There the event it waits for - a soft-RoCE task, the tcp
 * service thread, a copy worker, a peer process - can only happen once
 * the waiter gives the CPU up, so every spin is pure delay (the rule of
 * the kernel's optimistic spinning and of Go's runtime).  Asked once per
 * process (the affinity at the first wait).
 */
int hcomm__can_spin(void)
{
	static int can = -1;
	cpu_set_t set;
	int v = __atomic_load_n(&can, __ATOMIC_RELAXED);

	if (v < 0) {
		v = sched_getaffinity(0, sizeof(set), &set) ||
		    CPU_COUNT(&set) > 1;
		__atomic_store_n(&can, v, __ATOMIC_RELAXED);
	}
	return v;
}

/* Record the failure for hcomm_errno()/hcomm_errmsg(); return -code. */
__attribute__((format(printf, 3, 0)))
static int vfail(int code, int err, const char *fmt, va_list ap)
{
	int n = vsnprintf(t_msg, sizeof(t_msg), fmt, ap);

	if (err && n >= 0 && (size_t)n < sizeof(t_msg))
		snprintf(t_msg + n, sizeof(t_msg) - n, ": %s", strerror(err));
	t_errno = err;
	return -code;
}

__attribute__((format(printf, 3, 4)))
static int fail(int code, int err, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = vfail(code, err, fmt, ap);
	va_end(ap);
	return ret;
}

int hcomm__fail(int code, int err, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = vfail(code, err, fmt, ap);
	va_end(ap);
	return ret;
}

static const char *const err_str[HCOMM_ERR__MAX] = {
	[HCOMM_OK]		= "success",
	[HCOMM_ERR_NODEV]	= "hcomm device not found: load the module "
				  "(modprobe hcomm, or insmod hcomm.ko) or set "
				  "HCOMM_DEVICE to the device node",
	[HCOMM_ERR_MMAP]	= "cannot pin memory: RLIMIT_MEMLOCK exceeded; "
				  "raise it (ulimit -l, limits.conf memlock) or "
				  "give the process CAP_IPC_LOCK",
	[HCOMM_ERR_ACCESS]	= "permission denied or bad address: no access "
				  "to the device, the buffer is unmapped or "
				  "read-only while write access was asked, or "
				  "the context belongs to another process",
	[HCOMM_ERR_INVAL]	= "invalid argument",
	[HCOMM_ERR_NOMEM]	= "out of memory",
	[HCOMM_ERR_ABI]		= "ABI mismatch between libhcomm and hcomm.ko: "
				  "update the library or the module",
	[HCOMM_ERR_BUSY]	= "resource busy or interrupted: try again",
	[HCOMM_ERR_IO]		= "I/O error",
	[HCOMM_ERR_TIMEOUT]	= "operation timed out",
	[HCOMM_ERR_NOTSUP]	= "operation not supported by this hcomm.ko",
	[HCOMM_ERR_NOENT]	= "no such region",
	[HCOMM_ERR_LIMIT]	= "limit reached: too many regions (max_regions), "
				  "region too large (max_region_size), or too "
				  "many open files",
	[HCOMM_ERR_NOTHCOMM]	= "not an hcomm device (HCOMM_CMD_GET_INFO "
				  "unknown): check HCOMM_DEVICE",
	[HCOMM_ERR_ADMISSION]	= "QoS admission refused: the min_rate of all "
				  "contexts on this node would exceed 100 %",
};

HCOMM_EXPORT const char *hcomm_strerror(int err)
{
	if (err < 0)
		err = -err;
	if (err >= HCOMM_ERR__MAX)
		return "unknown hcomm error";
	return err_str[err];
}

HCOMM_EXPORT int hcomm_errno(void)
{
	return t_errno;
}

HCOMM_EXPORT const char *hcomm_errmsg(void)
{
	return t_msg;
}

int hcomm__err_code(uint32_t cmd_op, int err)
{
	switch (err) {
	case 0:
		return HCOMM_OK;
	case ENOENT:
		return cmd_op ? HCOMM_ERR_NOENT : HCOMM_ERR_NODEV;
	case ENODEV:
	case ENXIO:
	case ENOTDIR:
		return HCOMM_ERR_NODEV;
	case ENOMEM:
		return cmd_op == HCOMM_CMD_REG_MEM ? HCOMM_ERR_MMAP :
						     HCOMM_ERR_NOMEM;
	case EACCES:
	case EPERM:
	case EROFS:
	case EFAULT:
		return HCOMM_ERR_ACCESS;
	case EINVAL:
	case EBADF:
	case EOVERFLOW:
	case ERANGE:
		return HCOMM_ERR_INVAL;
	case ENOTTY:
		return cmd_op == HCOMM_CMD_GET_INFO ? HCOMM_ERR_NOTHCOMM :
						      HCOMM_ERR_ABI;
	case EISDIR:
		return HCOMM_ERR_NOTHCOMM;
	case EBUSY:
	case EAGAIN:
	case EINTR:
		return HCOMM_ERR_BUSY;
	case ETIMEDOUT:
	case ETIME:
		return HCOMM_ERR_TIMEOUT;
	case EOPNOTSUPP:
	case ENOSYS:
		return HCOMM_ERR_NOTSUP;
	case ENOSPC:
	case E2BIG:
	case EDQUOT:
	case EMFILE:
	case ENFILE:
		return HCOMM_ERR_LIMIT;
	default:
		return HCOMM_ERR_IO;
	}
}

void hcomm__prep_cmd(struct io_uring_sqe *sqe, int fd, uint32_t cmd_op,
		     void *arg, uint32_t size)
{
	struct hcomm_uring_cmd pl = {
		.addr = (uintptr_t)arg,
		.size = size,
	};

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = cmd_op;
	memcpy(sqe->cmd, &pl, sizeof(pl));
}

/* One command on the ring; ctx->lock held.  0, -errno or RING_BROKEN. */
static int ring_cmd(struct hcomm_ctx *ctx, uint32_t op, void *arg,
		    uint32_t size)
{
	struct io_uring_cqe *cqe;
	struct io_uring_sqe *sqe;
	int ret;

	sqe = io_uring_get_sqe(&ctx->ring);
	if (!sqe)
		return RING_BROKEN;
	hcomm__prep_cmd(sqe, ctx->fd, op, arg, size);
	sqe->user_data = ++ctx->seq;
	do
		ret = io_uring_submit_and_wait(&ctx->ring, 1);
	while (ret == -EINTR);
	/*
	 * Not submitted: the SQE (pointing at the caller's arg) stays queued,
	 * so the ring must never be entered again.
	 */
	if (ret != 1)
		return RING_BROKEN;
	do
		ret = io_uring_wait_cqe(&ctx->ring, &cqe);
	while (ret == -EINTR);
	if (ret < 0)
		return RING_BROKEN;
	ret = cqe->user_data == ctx->seq ? cqe->res : -EIO;
	io_uring_cqe_seen(&ctx->ring, cqe);
	return ret;
}

/* Run one command; 0 or -errno. */
static int hcomm_submit(struct hcomm_ctx *ctx, uint32_t op, void *arg,
			uint32_t size)
{
	int ret;

	if (__atomic_load_n(&ctx->use_uring, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&ctx->lock);
		ret = ctx->use_uring ? ring_cmd(ctx, op, arg, size) :
				       RING_BROKEN;
		if (ret == RING_BROKEN)
			__atomic_store_n(&ctx->use_uring, 0, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&ctx->lock);
		if (ret != RING_BROKEN)
			return ret;
	}
	ret = ioctl(ctx->fd, op, arg);
	return ret < 0 ? -errno : 0;
}

/* Use the ring only if a GET_INFO through it gives what ioctl gave. */
static void setup_ring(struct hcomm_ctx *ctx)
{
	struct hcomm_info probe;

	if (io_uring_queue_init(URING_DEPTH, &ctx->ring, 0) < 0)
		return;
	ctx->ring_init = 1;
	ctx->use_uring = 1;
	memset(&probe, 0, sizeof(probe));
	if (hcomm_submit(ctx, HCOMM_CMD_GET_INFO, &probe, sizeof(probe)) ||
	    !ctx->use_uring || probe.abi_version != ctx->info.abi_version) {
		io_uring_queue_exit(&ctx->ring);
		ctx->ring_init = 0;
		ctx->use_uring = 0;
	}
}

/* The hot-buffer cache, when the module has a generation page. */
static void setup_park(struct hcomm_ctx *ctx, uint64_t limit)
{
	void *p;

	if (!limit || !(ctx->info.features & HCOMM_FEAT_REG_CACHE))
		return;
	p = mmap(NULL, HCOMM_GEN_SLOTS * sizeof(uint64_t), PROT_READ,
		 MAP_SHARED, ctx->fd, HCOMM_MMAP_GENERATION);
	if (p == MAP_FAILED)
		return;
	ctx->gen = p;
	ctx->park_limit = limit;
}

static uint64_t gen_read(const struct hcomm_ctx *ctx, uint32_t region)
{
	return __atomic_load_n(&ctx->gen[region % HCOMM_GEN_SLOTS],
			       __ATOMIC_ACQUIRE);
}

/* Take m off the park list.  ctx->lock held. */
static void park_del(struct hcomm_ctx *ctx, struct hcomm_mr_priv *m)
{
	if (m->lprev)
		m->lprev->lnext = m->lnext;
	else
		ctx->park = m->lnext;
	if (m->lnext)
		m->lnext->lprev = m->lprev;
	else
		ctx->park_tail = m->lprev;
	m->lprev = m->lnext = NULL;
	m->parked = 0;
	ctx->park_n--;
	ctx->park_bytes -= m->mr.len;
}

static int env_set(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0");
}

HCOMM_EXPORT int hcomm_open(struct hcomm_ctx **ctxp, unsigned flags)
{
	uint64_t park_limit = 64ULL << 20;
	struct hcomm_ctx *ctx;
	const char *path;
	int ret;

	if (!ctxp)
		return fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_open");
	*ctxp = NULL;
	if (flags & ~HCOMM_OPEN_NO_URING)
		return fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_open: flags %#x",
			    flags);
	/* The hot-buffer cache's budget: garbage is an error, not 0. */
	ret = hcomm__config_env("HCOMM_CACHE_LIMIT", &park_limit);
	if (ret < 0)
		return ret;
	path = getenv("HCOMM_DEVICE");
	if (!path || !*path)
		path = HCOMM_DEVICE_PATH;

	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return fail(HCOMM_ERR_NOMEM, ENOMEM, "hcomm_open");
	pthread_mutex_init(&ctx->lock, NULL);
	ctx->fd = open(path, O_RDWR | O_CLOEXEC);
	if (ctx->fd < 0) {
		ret = fail(hcomm__err_code(0, errno), errno, "open %s", path);
		goto err;
	}
	ret = hcomm_submit(ctx, HCOMM_CMD_GET_INFO, &ctx->info,
			   sizeof(ctx->info));
	if (ret) {
		ret = fail(hcomm__err_code(HCOMM_CMD_GET_INFO, -ret), -ret,
			   "%s: HCOMM_CMD_GET_INFO", path);
		goto err;
	}
	if (ctx->info.abi_version != HCOMM_ABI_VERSION) {
		ret = fail(HCOMM_ERR_ABI, 0,
			   "%s: module ABI version %u, libhcomm needs %u",
			   path, ctx->info.abi_version, HCOMM_ABI_VERSION);
		goto err;
	}
	if (!(flags & HCOMM_OPEN_NO_URING) && !env_set("HCOMM_NO_URING") &&
	    (ctx->info.features & HCOMM_FEAT_URING_CMD))
		setup_ring(ctx);
	setup_park(ctx, park_limit);
	*ctxp = ctx;
	return 0;
err:
	if (ctx->fd >= 0)
		close(ctx->fd);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
	return ret;
}

HCOMM_EXPORT void hcomm_close(struct hcomm_ctx *ctx)
{
	struct hcomm_mr_priv *m, *next;

	if (!ctx)
		return;
	for (m = ctx->mrs; m; m = next) {
		next = m->next;
		free(m);
	}
	if (ctx->ring_init)
		io_uring_queue_exit(&ctx->ring);
	if (ctx->gen)
		munmap((void *)ctx->gen, HCOMM_GEN_SLOTS * sizeof(uint64_t));
	close(ctx->fd);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
}

HCOMM_EXPORT int hcomm_uses_uring(const struct hcomm_ctx *ctx)
{
	return ctx ? __atomic_load_n(&ctx->use_uring, __ATOMIC_ACQUIRE) : 0;
}

HCOMM_EXPORT int hcomm_fd(const struct hcomm_ctx *ctx)
{
	return ctx ? ctx->fd : -1;
}

HCOMM_EXPORT int hcomm_get_info(struct hcomm_ctx *ctx, struct hcomm_info *out)
{
	int ret;

	if (!ctx || !out)
		return fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_get_info");
	memset(out, 0, sizeof(*out));
	ret = hcomm_submit(ctx, HCOMM_CMD_GET_INFO, out, sizeof(*out));
	if (ret)
		return fail(hcomm__err_code(HCOMM_CMD_GET_INFO, -ret), -ret,
			    "HCOMM_CMD_GET_INFO");
	return 0;
}

/* A module parameter of hcomm.ko as text in buf ("?" when unreadable). */
static const char *module_param(const char *name, char *buf, size_t len)
{
	char path[96];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/hcomm/parameters/%s", name);
	f = fopen(path, "re");
	if (!f || !fgets(buf, len, f))
		snprintf(buf, len, "?");
	if (f)
		fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return buf;
}

HCOMM_EXPORT int hcomm_set_qos(struct hcomm_ctx *ctx,
			       const hcomm_qos_config_t *qos)
{
	struct hcomm_qos arg = {};
	char m[24], p[24];
	int ret;

	if (!ctx || !qos)
		return fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_set_qos: %s is NULL",
			    ctx ? "qos" : "ctx");
	arg.min_rate = qos->min_rate;
	arg.max_rate = qos->max_rate ? qos->max_rate : 100;
	arg.priority = qos->priority;
	if (arg.max_rate > 100 || arg.min_rate > arg.max_rate ||
	    arg.priority > 7)
		return fail(HCOMM_ERR_INVAL, EINVAL,
			    "hcomm_set_qos: min_rate %u, max_rate %u, priority "
			    "%u: want 0 <= min_rate <= max_rate <= 100 (max_rate "
			    "0 means 100) and priority <= 7", qos->min_rate,
			    qos->max_rate, qos->priority);
	ret = hcomm_submit(ctx, HCOMM_CMD_SET_QOS, &arg, sizeof(arg));
	switch (-ret) {
	case 0:
		return 0;
	case ENOSPC:
		return fail(HCOMM_ERR_ADMISSION, ENOSPC,
			    "hcomm_set_qos: min_rate %u refused: the min_rate "
			    "of all contexts on this node would exceed 100 %%",
			    arg.min_rate);
	case EPERM:
		return fail(HCOMM_ERR_ACCESS, EPERM,
			    "hcomm_set_qos: min_rate %u, priority %u need "
			    "CAP_SYS_NICE: this user may reserve %s %% over all "
			    "its contexts (qos_user_min_rate) and use priority "
			    "%s (qos_user_priority)", arg.min_rate, arg.priority,
			    module_param("qos_user_min_rate", m, sizeof(m)),
			    module_param("qos_user_priority", p, sizeof(p)));
	default:
		return fail(hcomm__err_code(HCOMM_CMD_SET_QOS, -ret), -ret,
			    "HCOMM_CMD_SET_QOS");
	}
}

static void mr_link(struct hcomm_ctx *ctx, struct hcomm_mr_priv *m)
{
	pthread_mutex_lock(&ctx->lock);
	m->prev = NULL;
	m->next = ctx->mrs;
	if (ctx->mrs)
		ctx->mrs->prev = m;
	ctx->mrs = m;
	pthread_mutex_unlock(&ctx->lock);
}

static void mr_unlink(struct hcomm_ctx *ctx, struct hcomm_mr_priv *m)
{
	pthread_mutex_lock(&ctx->lock);
	if (m->prev)
		m->prev->next = m->next;
	else
		ctx->mrs = m->next;
	if (m->next)
		m->next->prev = m->prev;
	pthread_mutex_unlock(&ctx->lock);
}

static int dereg_now(struct hcomm_mr_priv *m);

/*
 * A parked registration of exactly [addr, addr + size) with this access
 * whose generation slot is unchanged: hand it out again, no system call.
 * Parked entries of that address that went stale are deregistered.
 */
static struct hcomm_mr_priv *park_take(struct hcomm_ctx *ctx, void *addr,
				       size_t size, unsigned int access)
{
	struct hcomm_mr_priv *m, *found = NULL, *stale = NULL;

	if (!ctx->gen)
		return NULL;
	pthread_mutex_lock(&ctx->lock);
	for (m = ctx->park; m; m = m->lnext) {
		if (m->mr.addr != addr || m->mr.len != size ||
		    m->mr.access != access)
			continue;
		park_del(ctx, m);
		if (gen_read(ctx, m->mr.region) == m->gen)
			found = m;
		else
			stale = m;
		break;
	}
	pthread_mutex_unlock(&ctx->lock);
	if (stale)
		dereg_now(stale);
	return found;
}

/*
 * Park m instead of deregistering it; evicts the oldest beyond the
 * budget.  Returns 0 when parked, -1 when m must be deregistered now.
 */
static int park_put(struct hcomm_ctx *ctx, struct hcomm_mr_priv *m)
{
	struct hcomm_mr_priv *evict[PARK_MAX + 1];
	unsigned int n = 0, i;

	if (!ctx->gen || m->mr.type != HCOMM_REGION_HOST ||
	    m->mr.len > ctx->park_limit ||
	    gen_read(ctx, m->mr.region) != m->gen)
		return -1;
	pthread_mutex_lock(&ctx->lock);
	m->parked = 1;
	m->lprev = NULL;
	m->lnext = ctx->park;
	if (ctx->park)
		ctx->park->lprev = m;
	else
		ctx->park_tail = m;
	ctx->park = m;
	ctx->park_n++;
	ctx->park_bytes += m->mr.len;
	while ((ctx->park_bytes > ctx->park_limit || ctx->park_n > PARK_MAX) &&
	       n < PARK_MAX + 1) {
		evict[n] = ctx->park_tail;
		park_del(ctx, evict[n++]);
	}
	pthread_mutex_unlock(&ctx->lock);
	for (i = 0; i < n; i++)
		dereg_now(evict[i]);
	return 0;
}

/* Deregister every parked registration; returns how many there were. */
static unsigned int park_flush(struct hcomm_ctx *ctx)
{
	struct hcomm_mr_priv *m;
	unsigned int n = 0;

	for (;;) {
		pthread_mutex_lock(&ctx->lock);
		m = ctx->park;
		if (m)
			park_del(ctx, m);
		pthread_mutex_unlock(&ctx->lock);
		if (!m)
			return n;
		dereg_now(m);
		n++;
	}
}

HCOMM_EXPORT int hcomm_reg_mem(struct hcomm_ctx *ctx, void *addr, size_t size,
			       unsigned access, struct hcomm_mr **mrp)
{
	struct hcomm_reg_mem arg = {
		.addr = (uintptr_t)addr,
		.len = size,
		.access = access,
	};
	struct hcomm_mr_priv *m;
	struct hcomm_info info;
	int ret, code;

	if (!ctx || !mrp)
		return fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_reg_mem");
	*mrp = NULL;
	m = park_take(ctx, addr, size, access);
	if (m) {
		*mrp = &m->mr;
		return 0;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return fail(HCOMM_ERR_NOMEM, ENOMEM, "hcomm_reg_mem");
	ret = hcomm_submit(ctx, HCOMM_CMD_REG_MEM, &arg, sizeof(arg));
	/* Parked registrations count against memlock: give them back. */
	if (ret == -ENOMEM && park_flush(ctx))
		ret = hcomm_submit(ctx, HCOMM_CMD_REG_MEM, &arg, sizeof(arg));
	if (ret) {
		free(m);
		code = hcomm__err_code(HCOMM_CMD_REG_MEM, -ret);
		if (code != HCOMM_ERR_MMAP)
			return fail(code, -ret, "HCOMM_CMD_REG_MEM %zu bytes at %p",
				    size, addr);
		/* ENOMEM is memlock only when memlock is limited. */
		memset(&info, 0, sizeof(info));
		if (!hcomm_submit(ctx, HCOMM_CMD_GET_INFO, &info, sizeof(info)) &&
		    info.memlock_limit == ~0ULL)
			return fail(HCOMM_ERR_NOMEM, -ret,
				    "HCOMM_CMD_REG_MEM %zu bytes at %p",
				    size, addr);
		return fail(code, -ret, "HCOMM_CMD_REG_MEM %zu bytes at %p "
			    "(memlock limit %llu, pinned %llu)", size, addr,
			    (unsigned long long)info.memlock_limit,
			    (unsigned long long)info.pinned_bytes);
	}
	m->mr = (struct hcomm_mr) {
		.ctx = ctx,
		.region = arg.region,
		.type = HCOMM_REGION_HOST,
		.key = arg.key,
		.addr = addr,
		.len = size,
		.dmabuf_fd = -1,
		.access = access,
	};
	m->gen = arg.generation;
	mr_link(ctx, m);
	*mrp = &m->mr;
	return 0;
}

HCOMM_EXPORT int hcomm_reg_dmabuf(struct hcomm_ctx *ctx, int fd,
				  uint64_t offset, size_t len, unsigned access,
				  struct hcomm_mr **mrp)
{
	struct hcomm_reg_dmabuf arg = {
		.fd = fd,
		.access = access,
		.offset = offset,
		.len = len,
	};
	struct hcomm_mr_priv *m;
	int ret;

	if (!ctx || !mrp)
		return fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_reg_dmabuf");
	*mrp = NULL;
	if (!(ctx->info.features & HCOMM_FEAT_DMABUF))
		return fail(HCOMM_ERR_NOTSUP, 0,
			    "hcomm_reg_dmabuf: module lacks HCOMM_FEAT_DMABUF");
	m = calloc(1, sizeof(*m));
	if (!m)
		return fail(HCOMM_ERR_NOMEM, ENOMEM, "hcomm_reg_dmabuf");
	ret = hcomm_submit(ctx, HCOMM_CMD_REG_DMABUF, &arg, sizeof(arg));
	if (ret) {
		free(m);
		return fail(hcomm__err_code(HCOMM_CMD_REG_DMABUF, -ret), -ret,
			    "HCOMM_CMD_REG_DMABUF fd %d offset %llu len %zu",
			    fd, (unsigned long long)offset, len);
	}
	m->mr = (struct hcomm_mr) {
		.ctx = ctx,
		.region = arg.region,
		.type = HCOMM_REGION_DMABUF,
		.key = arg.key,
		.len = len,
		.offset = offset,
		.dmabuf_fd = fd,
		.access = access,
	};
	mr_link(ctx, m);
	*mrp = &m->mr;
	return 0;
}

static int dereg_now(struct hcomm_mr_priv *m)
{
	struct hcomm_dereg arg = { 0 };
	struct hcomm_mr *mr = &m->mr;
	int ret;

	arg.region = mr->region;
	ret = hcomm_submit(mr->ctx, HCOMM_CMD_DEREG, &arg, sizeof(arg));
	if (ret)
		return fail(hcomm__err_code(HCOMM_CMD_DEREG, -ret), -ret,
			    "HCOMM_CMD_DEREG region %u", mr->region);
	mr_unlink(mr->ctx, m);
	free(m);
	return 0;
}

HCOMM_EXPORT int hcomm_dereg(struct hcomm_mr *mr)
{
	struct hcomm_mr_priv *m = (struct hcomm_mr_priv *)mr;

	if (!mr || m->parked)
		return fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_dereg");
	if (!park_put(mr->ctx, m))
		return 0;
	return dereg_now(m);
}

HCOMM_EXPORT int hcomm_query(struct hcomm_mr *mr, struct hcomm_query *q,
			     struct hcomm_extent *ext, unsigned max_ext)
{
	int ret;

	if (!mr || !q || (max_ext && !ext))
		return fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_query");
	memset(q, 0, sizeof(*q));
	q->region = mr->region;
	q->extents = (uintptr_t)ext;
	q->max_extents = max_ext;
	ret = hcomm_submit(mr->ctx, HCOMM_CMD_QUERY, q, sizeof(*q));
	if (ret)
		return fail(hcomm__err_code(HCOMM_CMD_QUERY, -ret), -ret,
			    "HCOMM_CMD_QUERY region %u", mr->region);
	return 0;
}
