/* SPDX-License-Identifier: MIT */
/*
 * libpypto against the real module (run in a VM, as root, hcomm.ko
 * loaded): the tiled SGEMM with its transfers through /dev/hcomm between
 * host buffers and "device" memory (an hcomm window of this process),
 * checked against one big cblas_sgemm, with and without double
 * buffering, prefetch depths 1-8, one and two devices, and with injected
 * transfer failures.  The module's own counters (debugfs) must show every
 * descriptor as one XFER submitted through io_uring, and the bytes.
 *
 *   pypto_vm_test [--quick]
 *
 * TAP, then "pypto-vm: N passed, N failed, N skipped".
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>

#include <cblas.h>

#include "hcomm.h"
#include "pypto.h"
#include "tap.h"

/* One counter of /sys/kernel/debug/hcomm/stats, or -1. */
static long long stat_read(const char *name)
{
	FILE *f = fopen("/sys/kernel/debug/hcomm/stats", "r");
	char key[64];
	long long v, found = -1;

	if (!f)
		return -1;
	while (fscanf(f, "%63s %lld", key, &v) == 2)
		if (!strcmp(key, name))
			found = v;
	fclose(f);
	return found;
}

/* The module's copies: inline ones (a batch's too) and async ones. */
static long long stat_copies(void)
{
	long long i = stat_read("xfer_inline"), a = stat_read("xfer_async");

	return i < 0 || a < 0 ? -1 : i + a;
}

static uint64_t rs = 0x2545f4914f6cdd1dULL;

static void fill(float *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		rs ^= rs << 13;
		rs ^= rs >> 7;
		rs ^= rs << 17;
		p[i] = (float)((int64_t)(rs % 2001) - 1000) / 1000.0f;
	}
}

struct gcase {
	uint32_t m, n, k, tile, devices, depth;
	int db;
	float beta;
	uint64_t inject, inject_max;
	int mode_check;
};

static struct hcomm_comm *comm;

/*
 * Where does a callback of comm run?  1: in this thread (HCOMM_CB_INLINE,
 * libhcomm's default: hcomm_wait runs it), 0: in another one (a threaded
 * mode), -1: the put failed.
 */
static void cb_where(struct hcomm_request *req, void *arg)
{
	(void)req;
	*(pthread_t *)arg = pthread_self();
}

static int callbacks_here(struct hcomm_win *win, void *dev)
{
	struct hcomm_request req;
	pthread_t who;
	int rc;

	memset(&req, 0, sizeof(req));
	memset(&who, 0, sizeof(who));
	req.cb = cb_where;
	req.cb_arg = &who;
	rc = hcomm_put_nb(win, 0, 0, dev, 8, &req);
	if (!rc)
		rc = hcomm_wait(&req);
	if (rc)
		return -1;
	hcomm_flush(comm);
	return pthread_equal(who, pthread_self()) ? 1 : 0;
}

static void run_case(const struct gcase *gc)
{
	uint32_t lda = gc->k + 1, ldb = gc->n + 2, ldc = gc->n + 3, i, j;
	float *a = malloc(sizeof(float) * gc->m * lda);
	float *b = malloc(sizeof(float) * gc->k * ldb);
	float *c = malloc(sizeof(float) * gc->m * ldc);
	float *ref = malloc(sizeof(float) * gc->m * ldc);
	struct pypto_gemm_args ga = {
		.m = gc->m, .n = gc->n, .k = gc->k, .alpha = 1.0f,
		.beta = gc->beta, .a = a, .lda = lda, .b = b, .ldb = ldb,
		.c = c, .ldc = ldc,
	};
	struct pypto_config cfg;
	struct pypto_graph *g = NULL;
	struct pypto_gemm *gm = NULL;
	struct pypto_xport *x = NULL;
	struct pypto_run *r = NULL;
	const struct pypto_stats *st;
	struct hcomm_win *win = NULL;
	long long x0, u0, b0, x1, u1, b1, bt0, bt1, c0, c1;
	uint64_t bytes = 0, moved = 0;
	void *dev = NULL;
	double err = 0;
	int rc;

	fill(a, (size_t)gc->m * lda);
	fill(b, (size_t)gc->k * ldb);
	fill(c, (size_t)gc->m * ldc);
	memcpy(ref, c, sizeof(float) * gc->m * ldc);
	openblas_set_num_threads(2);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)gc->m,
		    (int)gc->n, (int)gc->k, 1.0f, a, (int)lda, b, (int)ldb,
		    gc->beta, ref, (int)ldc);

	pypto_config_default(&cfg);
	cfg.workers = 2;
	cfg.devices = gc->devices;
	cfg.tile_size = gc->tile;
	cfg.prefetch_depth = gc->depth;
	cfg.double_buffering = gc->db;
	cfg.max_retries = 100;
	rc = pypto_gemm_device_bytes(&ga, &cfg, &bytes);
	if (!rc && posix_memalign(&dev, 4096, bytes))
		rc = -1;
	if (!rc) {
		memset(dev, 0, bytes);
		rc = hcomm_win_create(comm, dev, bytes, &win);
		if (rc)
			printf("# hcomm_win_create: %s (%s)\n",
			       hcomm_strerror(rc), hcomm_errmsg());
	}
	if (!rc)
		rc = pypto_xport_hcomm(&x, comm, win, 0, dev);
	if (!rc && gc->mode_check) {
		int here = callbacks_here(win, dev);

		ok(here == 1, "  after pypto_xport_hcomm the communicator "
		   "still runs callbacks in the caller (INLINE): %d", here);
	}
	if (!rc && gc->inject)
		rc = pypto_xport_inject_failure(x, gc->inject,
						 gc->inject_max);
	if (!rc)
		rc = pypto_graph_create(&g);
	if (!rc)
		rc = pypto_gemm_build(g, &ga, &cfg, dev, &gm);
	x0 = stat_read("cmd_xfer");
	bt0 = stat_read("cmd_xfer_batch");
	c0 = stat_copies();
	u0 = stat_read("uring_cmds");
	b0 = stat_read("xfer_bytes");
	if (!rc)
		rc = pypto_run(g, &cfg, x, &r);
	x1 = stat_read("cmd_xfer");
	bt1 = stat_read("cmd_xfer_batch");
	c1 = stat_copies();
	u1 = stat_read("uring_cmds");
	b1 = stat_read("xfer_bytes");
	if (rc == 0 && gc->mode_check) {
		int here = callbacks_here(win, dev);

		ok(here == 1, "  after pypto_run the communicator is back in "
		   "INLINE mode: %d", here);
	}
	for (i = 0; i < gc->m; i++)
		for (j = 0; j < ldc; j++) {
			double d = fabs((double)c[i * ldc + j] - ref[i * ldc + j]);

			if (j >= gc->n)
				d = c[i * ldc + j] != ref[i * ldc + j];
			if (d > err)
				err = d;
		}
	st = pypto_run_stats(r);
	ok(rc == 0 && err < 1e-3 * gc->k && st &&
	   !strcmp(pypto_xport_name(x), "hcomm"),
	   "gemm %ux%ux%u tile %u, %u device(s), double buffering %d, prefetch %u, beta %g%s: rc %d (%s), max err %.2g",
	   gc->m, gc->n, gc->k, gc->tile, gc->devices, gc->db, gc->depth,
	   gc->beta, gc->inject ? ", injected failures" : "", rc,
	   rc ? pypto_errmsg() : "ok", err);
	if (st) {
		const struct pypto_event *ev;
		unsigned int nev = pypto_run_events(r, &ev), e;

		for (e = 0; e < nev; e++)
			if (ev[e].stage == PYPTO_STAGE_TRANSFER)
				moved += ev[e].bytes;
		printf("# %u tiles, %llu rounds, %.1f descriptors per round, %llu retries, overlap %.2f, workers busy %.2f, transfers in flight %.2f\n",
		       st->tiles, (unsigned long long)st->rounds,
		       st->rounds ? (double)st->descs / st->rounds : 0,
		       (unsigned long long)st->xfer_retries, st->overlap_eff,
		       st->worker_util, st->xfer_util);
		if (x0 < 0 || u0 < 0 || bt0 < 0 || c0 < 0) {
			skip("debugfs stats not readable");
		} else {
			long long x = x1 - x0, bt = bt1 - bt0;
			long long inb = (long long)st->descs - x;

			/*
			 * Every descriptor is copied once by the module (its
			 * inline and async copies), the bytes of every
			 * attempt moved, failed ones included; each goes as
			 * one XFER through io_uring or in a run of 4 to 64
			 * small ones carried by one XFER_BATCH (libhcomm's
			 * kernel transport), and each command is one
			 * uring_cmd.
			 */
			ok(c1 - c0 == (long long)st->descs &&
			   inb >= 4 * bt && inb <= 64 * bt &&
			   u1 - u0 >= x + bt &&
			   b1 - b0 == (long long)moved && st->rounds < st->descs,
			   "  module copied %lld of %llu descriptors: %lld XFERs and %lld in %lld XFER_BATCHes (%lld uring_cmds), in %llu batches, %lld bytes for %llu",
			   c1 - c0, (unsigned long long)st->descs, x, inb, bt,
			   u1 - u0, (unsigned long long)st->rounds, b1 - b0,
			   (unsigned long long)moved);
		}
		if (gc->inject)
			ok(st->xfer_retries > 0 && st->xfer_failures > 0,
			   "  %llu failed descriptors, %llu transfer tiles re-issued",
			   (unsigned long long)st->xfer_failures,
			   (unsigned long long)st->xfer_retries);
	}
	pypto_run_free(r);
	pypto_gemm_free(gm);
	pypto_graph_destroy(g);
	pypto_xport_destroy(x);
	if (win)
		hcomm_win_free(win);
	free(dev);
	free(a);
	free(b);
	free(c);
	free(ref);
}

int main(int argc, char **argv)
{
	int quick = argc > 1 && !strcmp(argv[1], "--quick");
	uint32_t n = quick ? 192 : 384, d;
	struct gcase gc;
	int rc;

	rc = hcomm_comm_init(&comm, NULL);
	if (!ok(rc == 0, "hcomm_comm_init (single rank): %s",
		rc ? hcomm_errmsg() : "ok"))
		goto out;
	ok(!strcmp(hcomm_comm_transport(comm), "kernel"),
	   "transport %s", hcomm_comm_transport(comm));

	/* Double buffering with prefetch depths 1-8. */
	for (d = 1; d <= 8; d++) {
		if (quick && d != 1 && d != 2 && d != 8)
			continue;
		gc = (struct gcase){ n, n, n, 64, 1, d, 1, 1.0f, 0, 0, d == 1 };
		run_case(&gc);
	}
	/* One buffer set: transfer and compute alternate. */
	gc = (struct gcase){ n, n, n, 64, 1, 1, 0, 0.0f, 0, 0, 0 };
	run_case(&gc);
	/* Two devices, ragged edges, beta != 0. */
	gc = (struct gcase){ n + 37, n - 21, n + 5, 64, 2, 2, 1, 0.5f, 0, 0, 0 };
	run_case(&gc);
	gc = (struct gcase){ n + 37, n - 21, n + 5, 64, 2, 2, 0, 1.0f, 0, 0, 0 };
	run_case(&gc);
	/* Larger tiles: C loads/stores above max_inline go asynchronous. */
	gc = (struct gcase){ n, n, n, 128, 1, 2, 1, 1.0f, 0, 0, 0 };
	run_case(&gc);
	/*
	 * Injected transfer failures (every n-th descriptor, a bounded
	 * number: a C tile's 64 rows would otherwise fail every attempt):
	 * re-issued, result still right.
	 */
	gc = (struct gcase){ n, n, n, 64, 2, 2, 1, 1.0f, 7, 12, 0 };
	run_case(&gc);
	gc = (struct gcase){ n, n, n, 64, 1, 3, 0, 0.0f, 3, 30, 0 };
	run_case(&gc);
	hcomm_comm_destroy(comm);
out:
	printf("1..%d\npypto-vm: %d passed, %d failed, %d skipped\n",
	       tap_pass + tap_fail + tap_skip, tap_pass, tap_fail, tap_skip);
	return tap_fail ? 1 : 0;
}
