/* SPDX-License-Identifier: MIT */
/*
 * Transports of libpypto: libhcomm (the real one) and a host memcpy test
 * double, plus failure injection shared by both.
 *
 * The scheduler hands a transport one batch of descriptors per scheduling
 * round, with a contiguous array of caller-owned hcomm requests whose
 * callbacks report each descriptor's completion from whatever thread the
 * transport completes in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pypto_int.h"

#define POISON_BYTE	0xa5

/* ---- failure injection ---------------------------------------------- */

static int parse_inject(struct pypto_xport *x)
{
	const char *s = getenv("PYPTO_INJECT_XFER_FAIL");
	unsigned long long every, count = 0;
	char *end;

	if (!s || !*s)
		return 0;
	errno = 0;
	every = strtoull(s, &end, 10);
	if (!errno && *end == ':' && end[1] >= '0' && end[1] <= '9')
		count = strtoull(end + 1, &end, 10);
	if (errno || *end || s[0] == '-' || s[0] == '+')
		return pypto__fail(PYPTO_ERR_INVAL,
				   "PYPTO_INJECT_XFER_FAIL=\"%s\": expected N or N:COUNT",
				   s);
	x->inj_every = every;
	x->inj_max = count;
	return 0;
}

PYPTO_EXPORT int pypto_xport_inject_failure(struct pypto_xport *x, uint64_t n,
					    uint64_t count)
{
	if (!x)
		return pypto__fail(PYPTO_ERR_INVAL, "transport is NULL");
	x->inj_every = n;
	x->inj_max = count;
	atomic_store(&x->inj_seen, 0);
	atomic_store(&x->inj_done, 0);
	return 0;
}

bool pypto__xport_inject(struct pypto_xport *x, const struct hcomm_xfer_desc *d)
{
	uint64_t seen, done;
	void *dst = NULL;

	if (!x->inj_every)
		return false;
	seen = atomic_fetch_add_explicit(&x->inj_seen, 1,
					 memory_order_relaxed) + 1;
	if (seen % x->inj_every)
		return false;
	done = atomic_fetch_add_explicit(&x->inj_done, 1, memory_order_relaxed);
	if (x->inj_max && done >= x->inj_max)
		return false;
	/*
	 * Poison what the descriptor wrote, so that a result is only right
	 * if the scheduler really moves the data again.
	 */
	if (d->op == HCOMM_OP_GET)
		dst = (void *)(uintptr_t)d->local;
	else if (x->local_base && d->target_off + d->len <= x->win_len)
		dst = (char *)x->local_base + d->target_off;
	if (dst)
		memset(dst, POISON_BYTE, d->len);
	return true;
}

PYPTO_EXPORT const char *pypto_xport_name(const struct pypto_xport *x)
{
	return x ? x->ops->name : "none";
}

PYPTO_EXPORT void pypto_xport_destroy(struct pypto_xport *x)
{
	if (x)
		x->ops->destroy(x);
}

/* ---- libhcomm --------------------------------------------------------- */

struct xport_hcomm {
	struct pypto_xport base;
	struct hcomm_comm *comm;
	struct hcomm_win *win;
};

static int hx_submit(struct pypto_xport *x, const struct hcomm_xfer_desc *d,
		     unsigned int n, struct hcomm_request *reqs)
{
	struct xport_hcomm *hx = (struct xport_hcomm *)x;
	int rc = hcomm_batch(hx->win, d, n, reqs);

	if (rc < 0)
		return pypto__fail(PYPTO_ERR_IO, "hcomm_batch of %u: %s (%s)",
				   n, hcomm_strerror(rc), hcomm_errmsg());
	return 0;
}

static void hx_destroy(struct pypto_xport *x)
{
	free(x);
}

/*
 * The module's engine: engine_busy_ns of /sys/kernel/debug/hcomm/stats
 * (debugfs: root only; module-wide, so other contexts' copies count too:
 * the engine is shared) over its workers (the module parameter).  A
 * transfer the module completes inline in the submitter is not engine
 * time.
 */
#define HCOMM_STATS_PATH	"/sys/kernel/debug/hcomm/stats"
#define HCOMM_WORKERS_PATH	"/sys/module/hcomm/parameters/workers"

static int hx_busy(struct pypto_xport *x, uint64_t *busy_ns, uint32_t *lanes)
{
	struct xport_hcomm *hx = (struct xport_hcomm *)x;
	unsigned long long v, busy = 0;
	unsigned int w = 0;
	bool found = false;
	char key[64];
	FILE *f;

	/*
	 * The module's engine moves only what the kernel transport carries:
	 * for a target on another host (rdma, tcp) its busy time says
	 * nothing about this run's transfers, so it is unknown.
	 */
	if (hx->comm && x->target != hcomm_comm_rank(hx->comm)) {
		struct hcomm_peer_stats ps;
		uint32_t i;

		memset(&ps, 0, sizeof(ps));
		ps.size = sizeof(ps);
		if (hcomm_comm_peer_stats(hx->comm, x->target, &ps) ||
		    !ps.nranges)
			return -1;
		for (i = 0; i < ps.nranges && i < HCOMM_PEER_RANGES; i++)
			if (ps.range[i].xport != HCOMM_XPORT_KERNEL)
				return -1;
	}
	f = fopen(HCOMM_STATS_PATH, "r");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %llu", key, &v) == 2)
		if (!strcmp(key, "engine_busy_ns")) {
			busy = v;
			found = true;
		}
	fclose(f);
	f = fopen(HCOMM_WORKERS_PATH, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%u", &w) != 1)
		w = 0;
	fclose(f);
	if (!found || !w)
		return -1;
	*busy_ns = busy;
	*lanes = w;
	return 0;
}

/*
 * The scheduler needs completions delivered by libhcomm's threads (the
 * workers never progress the communicator): the mode is switched for the
 * run only.  libhcomm has no call that reads the mode, so the run ends in
 * HCOMM_CB_INLINE, libhcomm's default, whatever the caller had set.
 */
static int hx_run_begin(struct pypto_xport *x)
{
	struct xport_hcomm *hx = (struct xport_hcomm *)x;
	int rc = hcomm_comm_set_cb_mode(hx->comm, HCOMM_CB_THREAD);

	if (rc < 0)
		return pypto__fail(PYPTO_ERR_IO, "hcomm_comm_set_cb_mode(THREAD)"
				   " for the run: %s (%s)", hcomm_strerror(rc),
				   hcomm_errmsg());
	return 0;
}

static void hx_run_end(struct pypto_xport *x)
{
	struct xport_hcomm *hx = (struct xport_hcomm *)x;
	struct timespec ts = { 0, 100000 };
	int i;

	/* The last callback returned; libhcomm may still be accounting it. */
	for (i = 0; i < 10000; i++) {
		if (hcomm_comm_set_cb_mode(hx->comm, HCOMM_CB_INLINE) !=
		    -HCOMM_ERR_BUSY)
			return;
		nanosleep(&ts, NULL);
	}
}

static struct hcomm_comm *hx_comm(struct pypto_xport *x)
{
	return ((struct xport_hcomm *)x)->comm;
}

static const struct pypto_xport_ops hcomm_ops = {
	.name = "hcomm",
	.submit = hx_submit,
	.destroy = hx_destroy,
	.busy = hx_busy,
	.run_begin = hx_run_begin,
	.run_end = hx_run_end,
	.comm = hx_comm,
};

PYPTO_EXPORT int pypto_xport_hcomm(struct pypto_xport **out,
				   struct hcomm_comm *comm,
				   struct hcomm_win *win, int target,
				   void *local_base)
{
	struct xport_hcomm *hx;
	int rc;

	if (!out || !comm)
		return pypto__fail(PYPTO_ERR_INVAL,
				   "pypto_xport_hcomm: NULL argument");
	*out = NULL;
	if (target < 0 || target >= hcomm_comm_size(comm))
		return pypto__fail(PYPTO_ERR_INVAL,
				   "target rank %d outside 0..%d", target,
				   hcomm_comm_size(comm) - 1);
	hx = calloc(1, sizeof(*hx));
	if (!hx)
		return pypto__fail(PYPTO_ERR_NOMEM, "transport");
	hx->base.ops = &hcomm_ops;
	hx->base.target = target;
	hx->base.local_base = local_base;
	hx->base.win_len = win ? hcomm_win_size(win, target) : 0;
	hx->base.no_window = !win;
	hx->base.nranks = hcomm_comm_size(comm);
	hx->comm = comm;
	hx->win = win;
	rc = parse_inject(&hx->base);
	if (rc)
		goto fail;
	*out = &hx->base;
	return 0;
fail:
	free(hx);
	return rc;
}

PYPTO_EXPORT int pypto_xport_hcomm_mirror(struct pypto_xport *x, int rank,
					  int mirror)
{
	uint32_t i;

	if (!x || x->ops != &hcomm_ops)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_xport_hcomm_mirror: "
				   "%s is not libhcomm's transport",
				   x ? x->ops->name : "NULL");
	if (rank < 0 || rank >= x->nranks || mirror < -1 ||
	    mirror >= x->nranks || rank == mirror)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_xport_hcomm_mirror: "
				   "rank %d, mirror %d (ranks 0..%d, mirror -1 "
				   "removes, not the rank itself)", rank, mirror,
				   x->nranks - 1);
	for (i = 0; i < x->nmirror && x->mirror_of[i] != rank; i++)
		;
	if (mirror < 0) {
		if (i < x->nmirror) {
			x->nmirror--;
			x->mirror_of[i] = x->mirror_of[x->nmirror];
			x->mirror[i] = x->mirror[x->nmirror];
		}
		return 0;
	}
	if (i == PYPTO_MIRRORS_MAX)
		return pypto__fail(PYPTO_ERR_LIMIT, "pypto_xport_hcomm_mirror: "
				   "%d ranks have a mirror already",
				   PYPTO_MIRRORS_MAX);
	x->mirror_of[i] = rank;
	x->mirror[i] = mirror;
	if (i == x->nmirror)
		x->nmirror++;
	return 0;
}

int pypto__xport_mirror(const struct pypto_xport *x, int rank)
{
	uint32_t i;

	for (i = 0; x && i < x->nmirror; i++)
		if (x->mirror_of[i] == rank)
			return x->mirror[i];
	return -1;
}

/* ---- memcpy test double ---------------------------------------------- */

struct mc_batch {
	struct hcomm_mpsc_node node;
	unsigned int n;
	struct hcomm_request *reqs;
	struct hcomm_xfer_desc d[];
};

struct xport_memcpy {
	struct pypto_xport base;
	char *mem;
	_Atomic uint64_t busy_ns;	/* time spent copying */
	_Atomic uint64_t delay_ns;	/* tests: a slow engine */
	struct hcomm_mpsc q;
	struct hcomm_ec ec;
	atomic_bool stop;
	pthread_t thread;
};

static void mc_delay(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ULL),
			       (long)(ns % 1000000000ULL) };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Tests: every descriptor takes at least ns more (one slow engine). */
void pypto__xport_memcpy_delay(struct pypto_xport *x, uint64_t ns)
{
	struct xport_memcpy *mx = (struct xport_memcpy *)x;

	atomic_store(&mx->delay_ns, ns);
}

static void mc_run(struct xport_memcpy *mx, struct mc_batch *b)
{
	unsigned int i;

	for (i = 0; i < b->n; i++) {
		const struct hcomm_xfer_desc *d = &b->d[i];
		struct hcomm_request *req = &b->reqs[i];
		uint64_t end, t0 = pypto__now_ns();
		int st = 0;

		if (__builtin_add_overflow(d->target_off, d->len, &end) ||
		    end > mx->base.win_len) {
			st = -HCOMM_ERR_INVAL;
		} else if (d->op == HCOMM_OP_PUT) {
			memcpy(mx->mem + d->target_off,
			       (const void *)(uintptr_t)d->local, d->len);
		} else if (d->op == HCOMM_OP_GET) {
			memcpy((void *)(uintptr_t)d->local,
			       mx->mem + d->target_off, d->len);
		} else {
			st = -HCOMM_ERR_INVAL;
		}
		if (atomic_load(&mx->delay_ns))
			mc_delay(atomic_load(&mx->delay_ns));
		req->status = st;
		req->bytes = st ? 0 : d->len;
		req->t_complete_ns = pypto__now_ns();
		atomic_fetch_add_explicit(&mx->busy_ns,
					  req->t_complete_ns - t0,
					  memory_order_relaxed);
		/*
		 * As libhcomm: the callback first (done still reads 0), then
		 * done; after that store the request is the caller's again
		 * and this thread no longer touches it.
		 */
		if (req->cb)
			req->cb(req, req->cb_arg);
		__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
	}
	free(b);
}

static void *mc_thread(void *arg)
{
	struct xport_memcpy *mx = arg;
	struct hcomm_mpsc_node *node;

	for (;;) {
		uint32_t key;

		while ((node = hcomm_mpsc_pop(&mx->q)))
			mc_run(mx, (struct mc_batch *)node);
		key = hcomm_ec_prepare(&mx->ec);
		if (!hcomm_mpsc_empty(&mx->q)) {
			hcomm_ec_wait(&mx->ec, key, 0);
			continue;
		}
		if (atomic_load(&mx->stop))
			break;
		hcomm_ec_wait(&mx->ec, key, -1);
	}
	return NULL;
}

static int mc_submit(struct pypto_xport *x, const struct hcomm_xfer_desc *d,
		     unsigned int n, struct hcomm_request *reqs)
{
	struct xport_memcpy *mx = (struct xport_memcpy *)x;
	struct mc_batch *b;

	if (!n)
		return 0;
	b = malloc(sizeof(*b) + (size_t)n * sizeof(*d));
	if (!b)
		return pypto__fail(PYPTO_ERR_NOMEM, "memcpy batch of %u", n);
	b->n = n;
	b->reqs = reqs;
	memcpy(b->d, d, (size_t)n * sizeof(*d));
	hcomm_mpsc_push(&mx->q, &b->node);
	hcomm_ec_notify(&mx->ec);
	return 0;
}

static void mc_destroy(struct pypto_xport *x)
{
	struct xport_memcpy *mx = (struct xport_memcpy *)x;

	/* Batches still queued are finished by the thread before it stops. */
	atomic_store(&mx->stop, true);
	hcomm_ec_notify(&mx->ec);
	pthread_join(mx->thread, NULL);
	free(mx);
}

static int mc_busy(struct pypto_xport *x, uint64_t *busy_ns, uint32_t *lanes)
{
	struct xport_memcpy *mx = (struct xport_memcpy *)x;

	*busy_ns = atomic_load_explicit(&mx->busy_ns, memory_order_relaxed);
	*lanes = 1;			/* one copying thread */
	return 0;
}

static const struct pypto_xport_ops memcpy_ops = {
	.name = "memcpy (test double)",
	.submit = mc_submit,
	.destroy = mc_destroy,
	.busy = mc_busy,
};

PYPTO_EXPORT int pypto_xport_memcpy(struct pypto_xport **out, void *base,
				    size_t len)
{
	struct xport_memcpy *mx;
	int rc;

	if (!out || (!base && len))
		return pypto__fail(PYPTO_ERR_INVAL,
				   "pypto_xport_memcpy: NULL argument");
	*out = NULL;
	mx = calloc(1, sizeof(*mx));
	if (!mx)
		return pypto__fail(PYPTO_ERR_NOMEM, "transport");
	mx->base.ops = &memcpy_ops;
	mx->base.local_base = base;
	mx->base.win_len = len;
	mx->mem = base;
	hcomm_mpsc_init(&mx->q);
	hcomm_ec_init(&mx->ec);
	rc = parse_inject(&mx->base);
	if (rc)
		goto fail;
	rc = pthread_create(&mx->thread, NULL, mc_thread, mx);
	if (rc) {
		rc = pypto__fail(PYPTO_ERR_SYS, "pthread_create: %s",
				 strerror(rc));
		goto fail;
	}
	*out = &mx->base;
	return 0;
fail:
	free(mx);
	return rc;
}
