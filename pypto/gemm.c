/* SPDX-License-Identifier: MIT */
/*
 * Partition helper: a tiled SGEMM as a pypto graph.
 *
 * C[M,N] = alpha A[M,K] B[K,N] + beta C is cut along M, N and K (the X, Y
 * and Z cuts) into tile x tile blocks.  The pipeline per device:
 *
 *   pack A(i,k), pack B(k,j)     host tiles: block -> contiguous staging
 *   xfer(s)                      put both blocks into buffer set s % nsets
 *   comp(s)                      cblas_sgemm into the device's C(i,j)
 *
 * where s counts the device's steps (its C blocks in order, k innermost).
 * xfer(s) waits for comp(s - nsets), the last user of its buffer set: with
 * one set (no double buffering) transfer and compute alternate; with
 * prefetch_depth + 1 sets the transfers of the next prefetch_depth steps
 * overlap the current compute.  C(i,j) is loaded into the device first
 * (when beta != 0) and read back row by row after its last step.
 *
 * Device memory, per device: its C blocks, then nsets x (A block, B block),
 * every block tile*tile floats.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "pypto_int.h"

struct gemm_op {
	struct pypto_gemm *gm;
	uint32_t i, j, k;		/* block coordinates */
	uint32_t set;			/* buffer set (comp) */
	int32_t dev;
	uint8_t what;			/* OP_PACK_A, OP_PACK_B, OP_COMP */
};

enum { OP_PACK_A, OP_PACK_B, OP_COMP };

struct pypto_gemm {
	struct pypto_gemm_args a;
	uint32_t ts, mt, nt, kt;	/* tile size, tile counts */
	uint32_t ndev, nsets;
	uint64_t blk;			/* floats per block */
	float *stage_a, *stage_b;	/* packed blocks, blk floats each */
	float *dev;			/* device memory as seen here */
	uint64_t *dev_base;		/* float offset of each device */
	uint32_t *dev_nc;		/* C blocks per device */
	struct gemm_op *ops;
	uint32_t nops;
};

static uint32_t dim(uint32_t total, uint32_t ts, uint32_t idx)
{
	uint32_t left = total - idx * ts;

	return left < ts ? left : ts;
}

static uint32_t ceil_div(uint32_t a, uint32_t b)
{
	return a / b + (a % b != 0);
}

static int check_args(const struct pypto_gemm_args *a,
		      const struct pypto_config *cfg)
{
	if (!a || !cfg)
		return pypto__fail(PYPTO_ERR_INVAL, "gemm: NULL argument");
	if (!a->m || !a->n || !a->k)
		return pypto__fail(PYPTO_ERR_INVAL,
				   "gemm: empty shape %ux%ux%u", a->m, a->n,
				   a->k);
	if (!a->a || !a->b || !a->c)
		return pypto__fail(PYPTO_ERR_INVAL, "gemm: NULL matrix");
	if (a->lda < a->k || a->ldb < a->n || a->ldc < a->n)
		return pypto__fail(PYPTO_ERR_INVAL,
				   "gemm: leading dimensions lda %u < k %u, ldb %u or ldc %u < n %u",
				   a->lda, a->k, a->ldb, a->ldc, a->n);
	if (!cfg->tile_size || cfg->tile_size > 65536)
		return pypto__fail(PYPTO_ERR_INVAL,
				   "gemm: tile_size %u outside 1..65536",
				   cfg->tile_size);
	if (!cfg->devices || cfg->prefetch_depth > 64)
		return pypto__fail(PYPTO_ERR_INVAL,
				   "gemm: devices %u, prefetch_depth %u (0..64)",
				   cfg->devices, cfg->prefetch_depth);
	return 0;
}

static uint32_t nsets_of(const struct pypto_config *cfg)
{
	return cfg->double_buffering ? cfg->prefetch_depth + 1 : 1;
}

/* Floats of device memory per device; fills dev_nc when not NULL. */
static int layout(const struct pypto_gemm_args *a,
		  const struct pypto_config *cfg, uint64_t *total_floats,
		  uint64_t *dev_base, uint32_t *dev_nc)
{
	uint32_t ts = cfg->tile_size, d;
	uint64_t blk = (uint64_t)ts * ts, ncblk, off = 0;
	uint32_t mt = ceil_div(a->m, ts), nt = ceil_div(a->n, ts);

	ncblk = (uint64_t)mt * nt;
	for (d = 0; d < cfg->devices; d++) {
		uint64_t nc = ncblk / cfg->devices +
			      (d < ncblk % cfg->devices);
		uint64_t sz;

		if (__builtin_mul_overflow(nc + 2ULL * nsets_of(cfg), blk, &sz) ||
		    __builtin_add_overflow(off, sz, &off))
			return pypto__fail(PYPTO_ERR_LIMIT,
					   "gemm: device memory size overflows");
		if (dev_base)
			dev_base[d] = off - sz;
		if (dev_nc)
			dev_nc[d] = (uint32_t)nc;
	}
	if (off > (UINT64_MAX >> 3))
		return pypto__fail(PYPTO_ERR_LIMIT, "gemm: too large");
	*total_floats = off;
	return 0;
}

PYPTO_EXPORT int pypto_gemm_device_bytes(const struct pypto_gemm_args *args,
					 const struct pypto_config *cfg,
					 uint64_t *bytes)
{
	uint64_t floats;
	int rc;

	if (!bytes)
		return pypto__fail(PYPTO_ERR_INVAL, "gemm: NULL argument");
	rc = check_args(args, cfg);
	if (rc)
		return rc;
	rc = layout(args, cfg, &floats, NULL, NULL);
	if (rc)
		return rc;
	*bytes = floats * sizeof(float);
	return 0;
}

/* Offset (floats) of C block (i,j) and of buffer set `set` on device d. */
static uint64_t c_off(const struct pypto_gemm *gm, uint32_t i, uint32_t j)
{
	uint32_t b = i * gm->nt + j;

	return gm->dev_base[b % gm->ndev] + (uint64_t)(b / gm->ndev) * gm->blk;
}

static uint64_t set_off(const struct pypto_gemm *gm, uint32_t d,
			uint32_t set, int which)
{
	return gm->dev_base[d] +
	       ((uint64_t)gm->dev_nc[d] + 2ULL * set + (uint64_t)which) *
	       gm->blk;
}

static float *stage_a(const struct pypto_gemm *gm, uint32_t i, uint32_t k)
{
	return gm->stage_a + ((uint64_t)i * gm->kt + k) * gm->blk;
}

static float *stage_b(const struct pypto_gemm *gm, uint32_t k, uint32_t j)
{
	return gm->stage_b + ((uint64_t)k * gm->nt + j) * gm->blk;
}

static int gemm_fn(void *arg, const struct pypto_exec *ex)
{
	struct gemm_op *op = arg;
	struct pypto_gemm *gm = op->gm;
	const struct pypto_gemm_args *a = &gm->a;
	uint32_t mh = dim(a->m, gm->ts, op->i), nw = dim(a->n, gm->ts, op->j);
	uint32_t kw = dim(a->k, gm->ts, op->k), r;
	const float *src;
	float *dst;

	(void)ex;
	switch (op->what) {
	case OP_PACK_A:
		src = a->a + (uint64_t)op->i * gm->ts * a->lda +
		      (uint64_t)op->k * gm->ts;
		dst = stage_a(gm, op->i, op->k);
		for (r = 0; r < mh; r++)
			memcpy(dst + (uint64_t)r * kw,
			       src + (uint64_t)r * a->lda, kw * sizeof(float));
		return 0;
	case OP_PACK_B:
		src = a->b + (uint64_t)op->k * gm->ts * a->ldb +
		      (uint64_t)op->j * gm->ts;
		dst = stage_b(gm, op->k, op->j);
		for (r = 0; r < kw; r++)
			memcpy(dst + (uint64_t)r * nw,
			       src + (uint64_t)r * a->ldb, nw * sizeof(float));
		return 0;
	case OP_COMP:
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans,
			    (int)mh, (int)nw, (int)kw, a->alpha,
			    gm->dev + set_off(gm, (uint32_t)op->dev, op->set, 0),
			    (int)kw,
			    gm->dev + set_off(gm, (uint32_t)op->dev, op->set, 1),
			    (int)nw, op->k ? 1.0f : a->beta,
			    gm->dev + c_off(gm, op->i, op->j), (int)nw);
		return 0;
	}
	return -1;
}

PYPTO_EXPORT void pypto_gemm_free(struct pypto_gemm *gm)
{
	if (!gm)
		return;
	free(gm->stage_a);
	free(gm->stage_b);
	free(gm->dev_base);
	free(gm->dev_nc);
	free(gm->ops);
	free(gm);
}

/*
 * The tiles call single-threaded BLAS: the workers are the parallelism.
 * OpenBLAS' thread count is process-wide, so it is set for the run only
 * and the caller's count comes back when the run ends.
 */
static void gemm_run_hook(struct pypto_graph *g, bool begin)
{
	if (begin) {
		g->hook_state = openblas_get_num_threads();
		openblas_set_num_threads(1);
	} else if (g->hook_state > 0) {
		openblas_set_num_threads(g->hook_state);
	}
}

#define TRY(expr)					\
	do {						\
		rc = (expr);				\
		if (rc < 0)				\
			goto fail;			\
	} while (0)

PYPTO_EXPORT int pypto_gemm_build(struct pypto_graph *g,
				  const struct pypto_gemm_args *args,
				  const struct pypto_config *cfg, void *dev,
				  struct pypto_gemm **out)
{
	uint32_t *pack_a = NULL, *pack_b = NULL;
	uint32_t *dev_step = NULL, **set_user = NULL;
	struct pypto_gemm *gm = NULL;
	uint64_t floats, nops;
	uint32_t i, j, k, d, o = 0;
	char name[48];			/* cut to PYPTO_NAME_MAX by add_* */
	int rc;

	if (!out || !g || !dev)
		return pypto__fail(PYPTO_ERR_INVAL, "gemm: NULL argument");
	*out = NULL;
	rc = check_args(args, cfg);
	if (rc)
		return rc;
	gm = calloc(1, sizeof(*gm));
	if (!gm)
		return pypto__fail(PYPTO_ERR_NOMEM, "gemm");
	gm->a = *args;
	gm->ts = cfg->tile_size;
	gm->mt = ceil_div(args->m, gm->ts);
	gm->nt = ceil_div(args->n, gm->ts);
	gm->kt = ceil_div(args->k, gm->ts);
	gm->ndev = cfg->devices;
	gm->nsets = nsets_of(cfg);
	gm->blk = (uint64_t)gm->ts * gm->ts;
	gm->dev = dev;
	gm->dev_base = calloc(gm->ndev, sizeof(*gm->dev_base));
	gm->dev_nc = calloc(gm->ndev, sizeof(*gm->dev_nc));
	if (!gm->dev_base || !gm->dev_nc) {
		rc = pypto__fail(PYPTO_ERR_NOMEM, "gemm");
		goto fail;
	}
	TRY(layout(args, cfg, &floats, gm->dev_base, gm->dev_nc));

	/* One op per pack tile and per step. */
	nops = (uint64_t)gm->mt * gm->kt + (uint64_t)gm->kt * gm->nt +
	       (uint64_t)gm->mt * gm->nt * gm->kt;
	if (nops > (1U << 26)) {
		rc = pypto__fail(PYPTO_ERR_LIMIT,
				 "gemm: %llu tiles; use a larger tile_size",
				 (unsigned long long)nops);
		goto fail;
	}
	gm->ops = calloc(nops, sizeof(*gm->ops));
	gm->stage_a = malloc((uint64_t)gm->mt * gm->kt * gm->blk * sizeof(float));
	gm->stage_b = malloc((uint64_t)gm->kt * gm->nt * gm->blk * sizeof(float));
	pack_a = calloc((uint64_t)gm->mt * gm->kt, sizeof(*pack_a));
	pack_b = calloc((uint64_t)gm->kt * gm->nt, sizeof(*pack_b));
	dev_step = calloc(gm->ndev, sizeof(*dev_step));
	set_user = calloc(gm->ndev, sizeof(*set_user));
	if (!gm->ops || !gm->stage_a || !gm->stage_b || !pack_a || !pack_b ||
	    !dev_step || !set_user) {
		rc = pypto__fail(PYPTO_ERR_NOMEM, "gemm: staging");
		goto fail;
	}
	for (d = 0; d < gm->ndev; d++) {
		set_user[d] = malloc(gm->nsets * sizeof(uint32_t));
		if (!set_user[d]) {
			rc = pypto__fail(PYPTO_ERR_NOMEM, "gemm");
			goto fail;
		}
		memset(set_user[d], 0xff, gm->nsets * sizeof(uint32_t));
	}
	/* Tiles run single-threaded BLAS during the run (gemm_run_hook). */
	g->run_hook = gemm_run_hook;
	pypto_graph_set_workload(g, PYPTO_WL_FC, gm->ts);

	/* Prefetch stage: pack every A and B block once. */
	for (i = 0; i < gm->mt; i++)
		for (k = 0; k < gm->kt; k++) {
			struct gemm_op *op = &gm->ops[o++];

			*op = (struct gemm_op){ .gm = gm, .i = i, .k = k,
						.what = OP_PACK_A, .dev = -1 };
			snprintf(name, sizeof(name), "packA(%u,%u)", i, k);
			TRY(pypto_add_host(g, name, gemm_fn, op,
					   PYPTO_ANY_DEVICE));
			pack_a[i * gm->kt + k] = (uint32_t)rc;
		}
	for (k = 0; k < gm->kt; k++)
		for (j = 0; j < gm->nt; j++) {
			struct gemm_op *op = &gm->ops[o++];

			*op = (struct gemm_op){ .gm = gm, .j = j, .k = k,
						.what = OP_PACK_B, .dev = -1 };
			snprintf(name, sizeof(name), "packB(%u,%u)", k, j);
			TRY(pypto_add_host(g, name, gemm_fn, op,
					   PYPTO_ANY_DEVICE));
			pack_b[k * gm->nt + j] = (uint32_t)rc;
		}

	for (i = 0; i < gm->mt; i++) {
		for (j = 0; j < gm->nt; j++) {
			uint32_t b = i * gm->nt + j;
			uint32_t mh = dim(args->m, gm->ts, i);
			uint32_t nw = dim(args->n, gm->ts, j);
			int32_t cd = (int32_t)(b % gm->ndev);
			struct pypto_xfer cx = {
				.rows = mh,
				.row_bytes = (uint64_t)nw * sizeof(float),
				.local = args->c + (uint64_t)i * gm->ts * args->ldc +
					 (uint64_t)j * gm->ts,
				.local_stride = (uint64_t)args->ldc * sizeof(float),
				.win_off = c_off(gm, i, j) * sizeof(float),
				.win_stride = (uint64_t)nw * sizeof(float),
			};
			int prev = -1;

			if (args->beta != 0.0f) {
				cx.op = PYPTO_PUT;
				snprintf(name, sizeof(name), "loadC(%u,%u)", i, j);
				TRY(pypto_add_transfer(g, name, &cx, 1, cd));
				prev = rc;
			}
			for (k = 0; k < gm->kt; k++) {
				uint32_t s = dev_step[cd]++;
				uint32_t set = s % gm->nsets;
				uint32_t kw = dim(args->k, gm->ts, k);
				struct gemm_op *op = &gm->ops[o++];
				struct pypto_xfer x[2] = {
					{ .op = PYPTO_PUT, .rows = 1,
					  .row_bytes = (uint64_t)mh * kw * sizeof(float),
					  .local = stage_a(gm, i, k),
					  .win_off = set_off(gm, (uint32_t)cd, set, 0) *
						     sizeof(float) },
					{ .op = PYPTO_PUT, .rows = 1,
					  .row_bytes = (uint64_t)kw * nw * sizeof(float),
					  .local = stage_b(gm, k, j),
					  .win_off = set_off(gm, (uint32_t)cd, set, 1) *
						     sizeof(float) },
				};
				int xt, ct;

				snprintf(name, sizeof(name), "xfer(%u,%u,%u)",
					 i, j, k);
				TRY(pypto_add_transfer(g, name, x, 2, cd));
				xt = rc;
				TRY(pypto_add_dep(g, pack_a[i * gm->kt + k], xt));
				TRY(pypto_add_dep(g, pack_b[k * gm->nt + j], xt));
				/* The set's previous user must be done. */
				if (set_user[cd][set] != UINT32_MAX)
					TRY(pypto_add_dep(g, set_user[cd][set], xt));

				*op = (struct gemm_op){ .gm = gm, .i = i, .j = j,
							.k = k, .set = set,
							.dev = cd,
							.what = OP_COMP };
				snprintf(name, sizeof(name), "gemm(%u,%u,%u)",
					 i, j, k);
				TRY(pypto_add_compute(g, name, gemm_fn, op, cd));
				ct = rc;
				pypto_set_cost(g, (uint32_t)ct,
					       2.0 * mh * nw * kw);
				TRY(pypto_add_dep(g, (uint32_t)xt, (uint32_t)ct));
				if (prev >= 0)
					TRY(pypto_add_dep(g, (uint32_t)prev,
							  (uint32_t)ct));
				set_user[cd][set] = (uint32_t)ct;
				prev = ct;
			}
			cx.op = PYPTO_GET;
			snprintf(name, sizeof(name), "storeC(%u,%u)", i, j);
			TRY(pypto_add_transfer(g, name, &cx, 1, cd));
			TRY(pypto_add_dep(g, (uint32_t)prev, (uint32_t)rc));
		}
	}
	gm->nops = o;
	rc = 0;
	*out = gm;
	gm = NULL;
fail:
	if (set_user)
		for (d = 0; d < cfg->devices; d++)
			free(set_user[d]);
	free(set_user);
	free(dev_step);
	free(pack_a);
	free(pack_b);
	pypto_gemm_free(gm);
	return rc < 0 ? rc : 0;
}
