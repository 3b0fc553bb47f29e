/* SPDX-License-Identifier: MIT */
/*
 * pypto_gemm_bench: libpypto's tiled SGEMM (pack -> transfer -> compute
 * pipeline, pypto_gemm_build) against one big cblas_sgemm, in one run.
 *
 *   pypto_gemm_bench [--size N | --m M --n N --k K] [--tile LIST]
 *                    [--workers N] [--devices N] [--prefetch-depth LIST]
 *                    [--double-buffering on|off|both]
 *                    [--transport hcomm|memcpy] [--reps R] [--json FILE]
 *                    [--trace FILE] [--html FILE] [--quick] [--help]
 *
 * C = A B with A, B random floats in [-1, 1] (M = N = K = 1024 unless
 * told).  The baseline is one cblas_sgemm over the whole matrices with
 * OpenBLAS on --workers threads; its result is the reference.  Then for
 * every tile size x prefetch depth x double buffering on/off the tiled
 * GEMM runs through libpypto with --workers workers and --devices
 * devices, its tiles calling single-threaded BLAS (openblas_set_num_threads
 * (1) around the tiled runs: the workers are the parallelism).  Each run
 * is checked against the reference: max |C - C_ref| must not exceed
 * 1e-6 * K * max(1, max |C_ref|) (about 8 float ulps per term of the
 * largest element), C being poisoned with NaN before each run so that a
 * block never written shows.  A failed check: exit status 1.
 *
 * Transports: "hcomm" (default) is the real one: a single-rank libhcomm
 * communicator (hcomm_comm_init(&comm, NULL)), the device memory a
 * 4 KiB-aligned buffer of pypto_gemm_device_bytes() bytes exposed as a
 * window (hcomm_win_create), pypto_xport_hcomm() on it: every scheduling
 * round of transfers is one io_uring batch into /dev/hcomm.  "memcpy" is
 * libpypto's test double (a host thread copying): it checks the pipeline
 * without the module, its figures say nothing about hcomm.
 *
 * Per configuration: GFLOP/s (median of --reps runs after one warm-up),
 * the ratio to the big call, and from the median run's pypto_run_stats():
 * overlap_eff (the share of transfer time hidden behind work, pypto.h;
 * the seed's 89 % / 93 % ceiling measured something else and is printed
 * as a note, not compared), worker_util, xfer_util, rounds and descriptors per round.  The fastest
 * configuration's pypto_run_diagnose() output closes the table.
 *
 * Exit status: 0 when every run computed the right C, 1 on a failed check
 * or a failed run, 2 on bad usage or a setup that could not be made.
 * Timings never fail the run.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>

#include <cblas.h>
#include <liburing.h>

#include "pypto.h"

#define BENCH_NAME	"pypto_gemm_bench"
#include "bench_util.h"

#define LIST_MAX	16
#define REPS_MAX	MEDIAN_MAX
#define CONFIGS_MAX	(LIST_MAX * LIST_MAX * 2)

/* The seed's figures for the pipeline overlap efficiency. */
#define SEED_OVERLAP	0.89
#define SEED_CEILING	0.93

enum { XP_HCOMM, XP_MEMCPY };

static uint32_t opt_m, opt_n, opt_k;
static uint32_t opt_tiles[LIST_MAX], ntiles;
static uint32_t opt_depths[LIST_MAX], ndepths;
static int opt_dbuf = -1;		/* 0 off, 1 on, 2 both */
static unsigned int opt_workers, opt_devices = 1, opt_reps;
static int opt_xport = XP_HCOMM;
static bool opt_quick;
static const char *opt_json, *opt_trace, *opt_html;

static float *A, *B, *C, *Cref;
static double ref_max;		/* max |C_ref| */
static double tol;

/* ------------------------------------------------------------------ */
/* the reference                                                       */
/* ------------------------------------------------------------------ */

static double flops(void)
{
	return 2.0 * opt_m * opt_n * opt_k;
}

/* Random floats in [-1, 1], reproducible (splitmix of the index). */
static void fill_random(float *p, size_t n, uint64_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (float)((double)(splitmix(seed + i) >> 11) *
			       (2.0 / 9007199254740992.0) - 1.0);
}

static void poison_c(void)
{
	size_t i, n = (size_t)opt_m * opt_n;

	for (i = 0; i < n; i++)
		C[i] = NAN;
}

/* max |C - C_ref| (infinity when an element is NaN). */
static double max_err(void)
{
	size_t i, n = (size_t)opt_m * opt_n;
	double m = 0, e;

	for (i = 0; i < n; i++) {
		e = fabs((double)C[i] - (double)Cref[i]);
		if (!(e <= m))
			m = isnan(e) ? INFINITY : e;
	}
	return m;
}


static double blas_s[REPS_MAX], blas_wall, blas_gflops;

/* One warm-up call, then reps timed ones; the last result is C_ref. */
static void run_blas(void)
{
	unsigned int r;
	size_t i, n = (size_t)opt_m * opt_n;
	double t0;

	openblas_set_num_threads((int)opt_workers);
	for (r = 0; r <= opt_reps; r++) {
		t0 = now();
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans,
			    (int)opt_m, (int)opt_n, (int)opt_k, 1.0f, A,
			    (int)opt_k, B, (int)opt_n, 0.0f, Cref,
			    (int)opt_n);
		if (r)
			blas_s[r - 1] = now() - t0;
	}
	blas_wall = median(blas_s, opt_reps);
	blas_gflops = flops() / blas_wall * 1e-9;
	ref_max = 0;
	for (i = 0; i < n; i++)
		if (fabs(Cref[i]) > ref_max)
			ref_max = fabs(Cref[i]);
	tol = 1e-6 * opt_k * (ref_max > 1 ? ref_max : 1);
}

/* ------------------------------------------------------------------ */
/* the transport                                                       */
/* ------------------------------------------------------------------ */

static struct hcomm_comm *comm;

static const char *herr(int rc)
{
	static char buf[320];

	snprintf(buf, sizeof(buf), "%s%s%s%s", hcomm_strerror(rc),
		 *hcomm_errmsg() ? " (" : "", hcomm_errmsg(),
		 *hcomm_errmsg() ? ")" : "");
	return buf;
}

static const char *perr(int rc)
{
	static char buf[320];

	snprintf(buf, sizeof(buf), "%s%s%s", pypto_strerror(rc),
		 *pypto_errmsg() ? ": " : "", pypto_errmsg());
	return buf;
}

/* Launcher variables of an outer job must not make this more than one
 * rank. */
static void scrub_env(void)
{
	static const char *const vars[] = {
		"HCOMM_RANK", "HCOMM_WORLD_SIZE", "HCOMM_RANK_TABLE",
		"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
		"SLURM_PROCID", "SLURM_NTASKS", "PMI_RANK", "PMI_SIZE",
	};
	size_t i;

	for (i = 0; i < sizeof(vars) / sizeof(*vars); i++)
		unsetenv(vars[i]);
}

static void comm_setup(void)
{
	int rc;

	if (opt_xport != XP_HCOMM)
		return;
	scrub_env();
	rc = hcomm_comm_init(&comm, NULL);
	if (rc)
		die("hcomm_comm_init: %s\n(the hcomm transport needs "
		    "/dev/hcomm, i.e. hcomm.ko loaded; --transport memcpy runs "
		    "the test double without it)", herr(rc));
	if (hcomm_comm_size(comm) != 1)
		die("hcomm_comm_init made a communicator of %d ranks, not one",
		    hcomm_comm_size(comm));
}

/* ------------------------------------------------------------------ */
/* one configuration                                                   */
/* ------------------------------------------------------------------ */

struct conf {
	uint32_t tile, depth;
	int dbuf;
	/* figures */
	uint64_t dev_bytes;
	uint32_t ntiles, nedges;
	double build_s;
	double secs[REPS_MAX];
	double wall, gflops, ratio;
	double err;			/* worst over all runs */
	bool ok;			/* every run right */
	struct pypto_stats st;		/* the median run's */
	bool have_st;
};

/* Everything one configuration holds (the best one's is kept). */
struct live {
	struct pypto_graph *g;
	struct pypto_gemm *gm;
	struct pypto_xport *x;
	struct hcomm_win *win;
	void *dev;
	struct pypto_run *run;		/* the median run's record */
};

static void live_free(struct live *l)
{
	int rc;

	pypto_run_free(l->run);
	pypto_gemm_free(l->gm);
	pypto_graph_destroy(l->g);
	pypto_xport_destroy(l->x);
	if (l->win) {
		rc = hcomm_win_free(l->win);
		if (rc)
			fail("hcomm_win_free: %s", herr(rc));
	}
	free(l->dev);
	memset(l, 0, sizeof(*l));
}

static struct conf confs[CONFIGS_MAX];
static unsigned int nconfs;

static void conf_name(const struct conf *c, char *buf, size_t len)
{
	snprintf(buf, len, "tile %u depth %u dbuf %s", c->tile, c->depth,
		 c->dbuf ? "on" : "off");
}

/*
 * Build and run configuration c: one warm-up run and opt_reps timed ones,
 * each checked.  On success l holds its resources (the median run's
 * record included); on failure they are freed.
 */
static int run_conf(struct conf *c, struct live *l)
{
	struct pypto_gemm_args args = {
		.m = opt_m, .n = opt_n, .k = opt_k,
		.alpha = 1.0f, .beta = 0.0f,
		.a = A, .lda = opt_k, .b = B, .ldb = opt_n,
		.c = C, .ldc = opt_n,
	};
	struct pypto_run *runs[REPS_MAX + 1] = { NULL };
	struct pypto_config cfg;
	unsigned int r, order[REPS_MAX], i, j, mid;
	char name[64];
	double t0, e;
	int rc;

	memset(l, 0, sizeof(*l));
	conf_name(c, name, sizeof(name));
	c->ok = false;
	c->err = NAN;
	c->wall = c->gflops = c->ratio = NAN;
	pypto_config_default(&cfg);
	cfg.workers = opt_workers;
	cfg.devices = opt_devices;
	cfg.prefetch_depth = c->depth;
	cfg.double_buffering = c->dbuf;
	cfg.tile_size = c->tile;
	cfg.profile = 1;		/* the derived figures need events */

	rc = pypto_gemm_device_bytes(&args, &cfg, &c->dev_bytes);
	if (rc) {
		fail("%s: pypto_gemm_device_bytes: %s", name, perr(rc));
		return -1;
	}
	if (posix_memalign(&l->dev, 4096, c->dev_bytes)) {
		l->dev = NULL;
		fail("%s: no memory for %llu device bytes", name,
		     (unsigned long long)c->dev_bytes);
		return -1;
	}
	/* NaN everywhere: a block used before it was written shows. */
	memset(l->dev, 0xff, c->dev_bytes);
	if (opt_xport == XP_HCOMM) {
		rc = hcomm_win_create(comm, l->dev, c->dev_bytes, &l->win);
		if (rc) {
			l->win = NULL;
			fail("%s: hcomm_win_create(%llu bytes): %s", name,
			     (unsigned long long)c->dev_bytes, herr(rc));
			goto err;
		}
		rc = pypto_xport_hcomm(&l->x, comm, l->win, 0, l->dev);
	} else {
		rc = pypto_xport_memcpy(&l->x, l->dev, c->dev_bytes);
	}
	if (rc) {
		l->x = NULL;
		fail("%s: pypto_xport_%s: %s", name,
		     opt_xport == XP_HCOMM ? "hcomm" : "memcpy", perr(rc));
		goto err;
	}

	t0 = now();
	rc = pypto_graph_create(&l->g);
	if (rc) {
		l->g = NULL;
		fail("%s: pypto_graph_create: %s", name, perr(rc));
		goto err;
	}
	pypto_graph_set_workload(l->g, PYPTO_WL_FC, c->tile);
	rc = pypto_gemm_build(l->g, &args, &cfg, l->dev, &l->gm);
	if (rc) {
		l->gm = NULL;
		fail("%s: pypto_gemm_build: %s", name, perr(rc));
		goto err;
	}
	c->build_s = now() - t0;
	c->ntiles = pypto_graph_tiles(l->g);
	c->nedges = pypto_graph_edges(l->g);

	/* The tiles' BLAS single-threaded: the workers are the parallelism. */
	openblas_set_num_threads(1);
	for (r = 0; r <= opt_reps; r++) {
		poison_c();
		t0 = now();
		rc = pypto_run(l->g, &cfg, l->x, &runs[r]);
		e = now() - t0;
		if (rc) {
			fail("%s: pypto_run: %s", name, perr(rc));
			break;
		}
		if (r)
			c->secs[r - 1] = e;
		e = max_err();
		if (isnan(c->err) || !(e <= c->err))
			c->err = e;
		if (!(e <= tol)) {
			fail("%s: wrong result: max |C - C_ref| = %g > %g",
			     name, e, tol);
			rc = -1;
			break;
		}
	}
	openblas_set_num_threads((int)opt_workers);
	if (rc)
		goto err;

	/* The median run (lower middle for an even count) keeps its record. */
	for (i = 0; i < opt_reps; i++)
		order[i] = i;
	for (i = 1; i < opt_reps; i++)
		for (j = i; j > 0 && c->secs[order[j]] < c->secs[order[j - 1]];
		     j--) {
			unsigned int t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	mid = order[(opt_reps - 1) / 2] + 1;
	for (r = 0; r <= opt_reps; r++)
		if (r != mid)
			pypto_run_free(runs[r]);
	l->run = runs[mid];
	if (l->run && pypto_run_stats(l->run)) {
		c->st = *pypto_run_stats(l->run);
		c->have_st = true;
	}
	c->wall = median(c->secs, opt_reps);
	c->gflops = flops() / c->wall * 1e-9;
	c->ratio = c->gflops / blas_gflops;
	c->ok = true;
	return 0;
err:
	for (r = 0; r <= opt_reps; r++)
		pypto_run_free(runs[r]);
	live_free(l);
	return -1;
}

/* ------------------------------------------------------------------ */
/* output                                                              */
/* ------------------------------------------------------------------ */

static double per_round(const struct conf *c)
{
	return c->have_st && c->st.rounds ?
	       (double)c->st.descs / (double)c->st.rounds : NAN;
}

static void print_table(void)
{
	char a[16], b[16], ms[16], gf[16], vd[32];
	unsigned int i;

	printf("\n== tiled SGEMM through libpypto vs one cblas_sgemm "
	       "(GFLOP/s, higher is better)\n");
	printf("  %5s %5s %4s %8s %8s %6s %-13s %7s %6s %6s %6s %7s %9s "
	       "%9s\n", "tile", "depth", "dbuf", "ms", "GFLOP/s", "ratio",
	       "", "overlap", "wutil", "xutil", "rounds", "desc/rd",
	       "steals", "max err");
	for (i = 0; i < nconfs; i++) {
		const struct conf *c = &confs[i];

		fmt_ratio(c->ratio, a, sizeof(a));
		fmt_val(per_round(c), b, sizeof(b));
		fmt_val(c->wall * 1e3, ms, sizeof(ms));
		fmt_val(c->gflops, gf, sizeof(gf));
		printf("  %5u %5u %4s %8s %8s %6s %-13s", c->tile,
		       c->depth, c->dbuf ? "on" : "off", ms, gf, a,
		       verdict(c->ratio, true, vd, sizeof(vd)));
		if (c->have_st)
			printf(" %7.3f %6.3f %6.3f %6llu %7s %9llu",
			       c->st.overlap_eff, c->st.worker_util,
			       c->st.xfer_util,
			       (unsigned long long)c->st.rounds, b,
			       (unsigned long long)c->st.steals);
		else
			printf(" %7s %6s %6s %6s %7s %9s", "-", "-", "-", "-",
			       "-", "-");
		if (isnan(c->err))
			printf(" %9s", "-");
		else
			printf(" %9.2e", c->err);
		printf("%s\n", c->ok ? "" : "  FAILED");
	}
	printf("  baseline: one cblas_sgemm on %u OpenBLAS threads: %.2f ms, "
	       "%.2f GFLOP/s; ratio = pypto / baseline\n", opt_workers,
	       blas_wall * 1e3, blas_gflops);
	printf("  overlap = 1 - exposed / covered transfer time "
	       "(pypto_run_stats()->overlap_eff: the worker time under "
	       "transfers not lost waiting for them)\n"
	       "  note: the seed quotes %.2f (ceiling %.2f) for its own "
	       "pipeline measure, not this one: no ratio is taken\n",
	       SEED_OVERLAP, SEED_CEILING);
	printf("  check: max |C - C_ref| <= %.3g (1e-6 * K * max(1, "
	       "max |C_ref| = %.3g))\n", tol, ref_max);
}

static int write_json(const char *path, double wall, int best,
		      const char *diag, unsigned int diag_mask)
{
	FILE *f = fopen(path, "w");
	unsigned int i;
	char name[64];
	int n = 0;

	if (!f)
		return -errno;
	fprintf(f, "{\n  \"program\": \"" BENCH_NAME "\",\n  \"note\": ");
	json_host(f);
	fprintf(f, "  \"params\": {\"m\": %u, \"n\": %u, \"k\": %u, "
		"\"workers\": %u, \"devices\": %u, \"reps\": %u, "
		"\"quick\": %s, \"tiles\": [", opt_m, opt_n, opt_k,
		opt_workers, opt_devices, opt_reps,
		opt_quick ? "true" : "false");
	for (i = 0; i < ntiles; i++)
		fprintf(f, "%s%u", i ? ", " : "", opt_tiles[i]);
	fprintf(f, "], \"prefetch_depths\": [");
	for (i = 0; i < ndepths; i++)
		fprintf(f, "%s%u", i ? ", " : "", opt_depths[i]);
	fprintf(f, "], \"double_buffering\": \"%s\"},\n",
		opt_dbuf == 2 ? "both" : opt_dbuf ? "on" : "off");
	fprintf(f, "  \"transport\": \"%s\",\n  \"transport_is_test_double\": "
		"%s,\n", opt_xport == XP_HCOMM ? "hcomm" : "memcpy",
		opt_xport == XP_MEMCPY ? "true" : "false");
	fprintf(f, "  \"baseline\": {\"name\": \"cblas_sgemm\", \"threads\": "
		"%u, \"wall_s\": ", opt_workers);
	json_num(f, blas_wall);
	fprintf(f, ", \"gflops\": ");
	json_num(f, blas_gflops);
	fprintf(f, ", \"samples_s\": ");
	json_arr(f, blas_s, opt_reps);
	fprintf(f, "},\n  \"check\": {\"tolerance\": ");
	json_num(f, tol);
	fprintf(f, ", \"max_abs_ref\": ");
	json_num(f, ref_max);
	fprintf(f, "},\n  \"seed_claim\": {\"overlap_eff\": %.2f, "
		"\"ceiling\": %.2f, \"note\": \"the seed's own pipeline "
		"measure; not comparable with overlap_eff (1 - exposed / "
		"covered transfer time), no ratio is taken\"},\n  "
		"\"configs\": [", SEED_OVERLAP, SEED_CEILING);
	for (i = 0; i < nconfs; i++) {
		const struct conf *c = &confs[i];

		fprintf(f, "%s\n    {\"tile\": %u, \"prefetch_depth\": %u, "
			"\"double_buffering\": %s, \"ok\": %s, "
			"\"device_bytes\": %llu, \"graph_tiles\": %u, "
			"\"graph_edges\": %u, \"build_s\": ", i ? "," : "",
			c->tile, c->depth, c->dbuf ? "true" : "false",
			c->ok ? "true" : "false",
			(unsigned long long)c->dev_bytes, c->ntiles, c->nedges);
		json_num(f, c->build_s);
		fprintf(f, ", \"wall_s\": ");
		json_num(f, c->wall);
		fprintf(f, ", \"samples_s\": ");
		json_arr(f, c->secs, c->ok ? opt_reps : 0);
		fprintf(f, ", \"gflops\": ");
		json_num(f, c->gflops);
		fprintf(f, ", \"ratio_vs_blas\": ");
		json_num(f, c->ratio);
		fprintf(f, ", \"max_abs_err\": ");
		json_num(f, c->err);
		if (c->have_st) {
			fprintf(f, ", \"overlap_eff\": ");
			json_num(f, c->st.overlap_eff);
			fprintf(f, ", \"worker_util\": ");
			json_num(f, c->st.worker_util);
			fprintf(f, ", \"xfer_util\": ");
			json_num(f, c->st.xfer_util);
			fprintf(f, ", \"rounds\": %llu, \"descs\": %llu, "
				"\"descs_per_round\": ",
				(unsigned long long)c->st.rounds,
				(unsigned long long)c->st.descs);
			json_num(f, per_round(c));
			fprintf(f, ", \"xfer_bytes\": %llu, \"steals\": %llu, "
				"\"parks\": %llu, \"xfer_retries\": %llu, "
				"\"xfer_cap\": %u, \"xfer_waits\": %llu, "
				"\"tile_cv\": ",
				(unsigned long long)c->st.xfer_bytes,
				(unsigned long long)c->st.steals,
				(unsigned long long)c->st.parks,
				(unsigned long long)c->st.xfer_retries,
				c->st.xfer_cap,
				(unsigned long long)c->st.xfer_waits);
			json_num(f, c->st.tile_cv);
			fprintf(f, ", \"run_wall_ns\": %llu",
				(unsigned long long)c->st.wall_ns);
		}
		fprintf(f, "}");
	}
	fprintf(f, "\n  ],\n  \"best\": ");
	if (best >= 0) {
		fprintf(f, "{\"config\": %d, \"diagnosis_mask\": %u, "
			"\"diagnosis\": ", best, diag_mask);
		json_str(f, diag ? diag : "");
		fprintf(f, "}");
	} else {
		fprintf(f, "null");
	}
	fprintf(f, ",\n  \"wall_s\": %.1f,\n  \"failures\": %d,\n", wall,
		failures);
	fprintf(f, "  \"results\": [");
	for (i = 0; i < nconfs; i++) {
		const struct conf *c = &confs[i];

		snprintf(name, sizeof(name), "gemm_t%u_d%u_db%d", c->tile,
			 c->depth, c->dbuf);
		fprintf(f, "%s\n    {\"name\": ", n++ ? "," : "");
		json_str(f, name);
		fprintf(f, ", \"size\": %u, \"value\": ", opt_m);
		json_num(f, c->gflops);
		fprintf(f, ", \"unit\": \"GFLOP/s\", \"baseline_name\": "
			"\"cblas_sgemm\", \"baseline_value\": ");
		json_num(f, blas_gflops);
		fprintf(f, ", \"ratio\": ");
		json_num(f, c->ratio);
		fprintf(f, ", \"better\": \"higher\"}");
	}
	if (best >= 0 && confs[best].have_st) {
		fprintf(f, "%s\n    {\"name\": \"overlap_eff_best\", \"size\": "
			"%u, \"value\": ", n++ ? "," : "", opt_m);
		json_num(f, confs[best].st.overlap_eff);
		fprintf(f, ", \"unit\": \"\", \"better\": \"higher\", "
			"\"note\": \"1 - exposed / covered transfer time; "
			"the seed quotes %.2f (ceiling %.2f) for a different "
			"measure: no baseline\"}", SEED_OVERLAP, SEED_CEILING);
	}
	fprintf(f, "\n  ]\n}\n");
	if (fclose(f))
		return -errno;
	return 0;
}

/* ------------------------------------------------------------------ */
/* main                                                                */
/* ------------------------------------------------------------------ */

static void usage(FILE *f, int rc)
{
	fprintf(f,
		"usage: " BENCH_NAME " [--size N | --m M --n N --k K] "
		"[--tile LIST] [--workers N]\n"
		"       [--devices N] [--prefetch-depth LIST] "
		"[--double-buffering on|off|both]\n"
		"       [--transport hcomm|memcpy] [--reps R] [--json FILE] "
		"[--trace FILE]\n"
		"       [--html FILE] [--quick] [--help]\n"
		"  --size            M = N = K (default 1024; --quick 512)\n"
		"  --m, --n, --k     the shape one by one\n"
		"  --tile            tile sizes, comma list (default 128,256; "
		"--quick 128)\n"
		"  --workers         pypto workers and OpenBLAS threads of the "
		"big call (default: online CPUs)\n"
		"  --devices         pypto devices (default 1)\n"
		"  --prefetch-depth  comma list (default 1,2,4; --quick 1,2)\n"
		"  --double-buffering  on, off or both (default both)\n"
		"  --transport       hcomm (default: /dev/hcomm) or memcpy "
		"(the test double)\n"
		"  --reps            timed runs per configuration after one "
		"warm-up (default 3; --quick 2)\n"
		"  --json            write every figure to FILE\n"
		"  --trace, --html   the fastest configuration's Chrome trace / "
		"HTML timeline\n"
		"  --quick           M = N = K = 512, one tile size, depths 1 "
		"and 2\n");
	exit(rc);
}

static unsigned int parse_list(const char *opt, const char *s, uint32_t *out,
			       long lo, long hi)
{
	char *dup = strdup(s), *tok, *save = NULL;
	unsigned int n = 0;

	if (!dup)
		die("no memory");
	for (tok = strtok_r(dup, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (n >= LIST_MAX)
			die("%s: at most %d values", opt, LIST_MAX);
		out[n++] = (uint32_t)parse_num(opt, tok, lo, hi);
	}
	free(dup);
	if (!n)
		die("%s: an empty list", opt);
	return n;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "m", required_argument, NULL, 'M' },
		{ "n", required_argument, NULL, 'N' },
		{ "k", required_argument, NULL, 'K' },
		{ "tile", required_argument, NULL, 't' },
		{ "workers", required_argument, NULL, 'w' },
		{ "devices", required_argument, NULL, 'd' },
		{ "prefetch-depth", required_argument, NULL, 'p' },
		{ "double-buffering", required_argument, NULL, 'b' },
		{ "transport", required_argument, NULL, 'x' },
		{ "reps", required_argument, NULL, 'r' },
		{ "json", required_argument, NULL, 'j' },
		{ "trace", required_argument, NULL, 'T' },
		{ "html", required_argument, NULL, 'H' },
		{ "quick", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct live best_l, cur;
	double t_start = now(), best_gf = 0;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int i, j, b, diag_mask = 0;
	int opt, best = -1, rc;
	char *diag = NULL;
	size_t diag_len = 0;
	long size = 0;
	bool json_err = false;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt_long(argc, argv, "s:M:N:K:t:w:d:p:b:x:r:j:T:H:qh",
				  opts, NULL)) != -1) {
		switch (opt) {
		case 's':
			size = parse_num("--size", optarg, 1, 65536);
			break;
		case 'M':
			opt_m = (uint32_t)parse_num("--m", optarg, 1, 65536);
			break;
		case 'N':
			opt_n = (uint32_t)parse_num("--n", optarg, 1, 65536);
			break;
		case 'K':
			opt_k = (uint32_t)parse_num("--k", optarg, 1, 65536);
			break;
		case 't':
			ntiles = parse_list("--tile", optarg, opt_tiles, 8,
					    8192);
			break;
		case 'w':
			opt_workers = (unsigned int)parse_num("--workers",
							      optarg, 1, 1024);
			break;
		case 'd':
			opt_devices = (unsigned int)parse_num("--devices",
							      optarg, 1, 1024);
			break;
		case 'p':
			ndepths = parse_list("--prefetch-depth", optarg,
					     opt_depths, 0, 64);
			break;
		case 'b':
			if (!strcmp(optarg, "on"))
				opt_dbuf = 1;
			else if (!strcmp(optarg, "off"))
				opt_dbuf = 0;
			else if (!strcmp(optarg, "both"))
				opt_dbuf = 2;
			else
				die("--double-buffering: on, off or both, not "
				    "\"%s\"", optarg);
			break;
		case 'x':
			if (!strcmp(optarg, "hcomm"))
				opt_xport = XP_HCOMM;
			else if (!strcmp(optarg, "memcpy"))
				opt_xport = XP_MEMCPY;
			else
				die("--transport: hcomm or memcpy, not \"%s\"",
				    optarg);
			break;
		case 'r':
			opt_reps = (unsigned int)parse_num("--reps", optarg, 1,
							   REPS_MAX);
			break;
		case 'j':
			opt_json = optarg;
			break;
		case 'T':
			opt_trace = optarg;
			break;
		case 'H':
			opt_html = optarg;
			break;
		case 'q':
			opt_quick = true;
			break;
		case 'h':
			usage(stdout, 0);
			break;
		default:
			usage(stderr, 2);
		}
	}
	if (optind != argc) {
		fprintf(stderr, BENCH_NAME ": unexpected argument \"%s\"\n",
			argv[optind]);
		usage(stderr, 2);
	}
	if (!size)
		size = opt_quick ? 512 : 1024;
	if (!opt_m)
		opt_m = (uint32_t)size;
	if (!opt_n)
		opt_n = (uint32_t)size;
	if (!opt_k)
		opt_k = (uint32_t)size;
	if (!ntiles) {
		opt_tiles[ntiles++] = 128;
		if (!opt_quick)
			opt_tiles[ntiles++] = 256;
	}
	if (!ndepths) {
		opt_depths[ndepths++] = 1;
		opt_depths[ndepths++] = 2;
		if (!opt_quick)
			opt_depths[ndepths++] = 4;
	}
	if (opt_dbuf < 0)
		opt_dbuf = 2;
	if (!opt_reps)
		opt_reps = opt_quick ? 2 : 3;
	if (!opt_workers)
		opt_workers = ncpu > 0 ? (unsigned int)(ncpu > 1024 ? 1024 :
							ncpu) : 1;
	if (opt_devices > opt_workers)
		die("--devices: at most --workers (%u): worker w serves device "
		    "w %% devices", opt_workers);

	host_probe();
	A = malloc((size_t)opt_m * opt_k * sizeof(float));
	B = malloc((size_t)opt_k * opt_n * sizeof(float));
	C = malloc((size_t)opt_m * opt_n * sizeof(float));
	Cref = malloc((size_t)opt_m * opt_n * sizeof(float));
	if (!A || !B || !C || !Cref)
		die("no memory for %ux%ux%u matrices", opt_m, opt_n, opt_k);
	fill_random(A, (size_t)opt_m * opt_k, 0x41);
	fill_random(B, (size_t)opt_k * opt_n, 0x42ULL << 40);
	comm_setup();

	print_host();
	printf("C[%u x %u] = A[%u x %u] B[%u x %u], floats in [-1, 1]; "
	       "%u workers, %u device%s; median of %u runs after one "
	       "warm-up\n", opt_m, opt_n, opt_m, opt_k, opt_k, opt_n,
	       opt_workers, opt_devices, opt_devices > 1 ? "s" : "",
	       opt_reps);
	if (opt_xport == XP_HCOMM)
		printf("transport: hcomm (%s, single rank; device memory is a "
		       "window)\n", hcomm_comm_transport(comm) ?
		       hcomm_comm_transport(comm) : "?");
	else
		printf("transport: memcpy -- a TEST DOUBLE (a host thread "
		       "copies): it checks the pipeline, its figures are not "
		       "hcomm's\n");

	run_blas();

	memset(&best_l, 0, sizeof(best_l));
	for (i = 0; i < ntiles; i++)
		for (j = 0; j < ndepths; j++)
			for (b = 0; b < 2; b++) {
				struct conf *c = &confs[nconfs];
				int dbuf = 1 - (int)b;	/* on first */

				if (opt_dbuf != 2 && opt_dbuf != dbuf)
					continue;
				c->tile = opt_tiles[i];
				c->depth = opt_depths[j];
				c->dbuf = dbuf;
				nconfs++;
				fprintf(stderr, "# tile %u depth %u dbuf %s\n",
					c->tile, c->depth, dbuf ? "on" : "off");
				if (run_conf(c, &cur))
					continue;
				if (c->gflops > best_gf) {
					live_free(&best_l);
					best_l = cur;
					best_gf = c->gflops;
					best = (int)(c - confs);
				} else {
					live_free(&cur);
				}
			}

	print_table();
	if (best >= 0 && best_l.run) {
		FILE *ms = open_memstream(&diag, &diag_len);
		char name[64];

		conf_name(&confs[best], name, sizeof(name));
		printf("\n== diagnosis of the fastest configuration (%s)\n",
		       name);
		if (ms) {
			diag_mask = pypto_run_diagnose(best_l.run, ms);
			fclose(ms);
			fputs(diag ? diag : "", stdout);
		} else {
			diag_mask = pypto_run_diagnose(best_l.run, stdout);
		}
		if (confs[best].have_st)
			printf("  overlap efficiency %.3f (1 - exposed / "
			       "covered transfer time: %.3f of %.3f ms "
			       "worker time exposed); note: the seed quotes "
			       "%.2f (ceiling %.2f) for its own measure, not "
			       "a baseline for this one\n",
			       confs[best].st.overlap_eff,
			       confs[best].st.xfer_exposed_ns / 1e6,
			       confs[best].st.xfer_cover_ns / 1e6,
			       SEED_OVERLAP, SEED_CEILING);
		if (opt_trace) {
			rc = pypto_run_write_trace(best_l.run, opt_trace);
			if (rc)
				fail("pypto_run_write_trace(%s): %s",
				     opt_trace, perr(rc));
			else
				printf("trace: %s\n", opt_trace);
		}
		if (opt_html) {
			rc = pypto_run_write_html(best_l.run, opt_html);
			if (rc)
				fail("pypto_run_write_html(%s): %s", opt_html,
				     perr(rc));
			else
				printf("timeline: %s\n", opt_html);
		}
	}

	if (opt_json) {
		rc = write_json(opt_json, now() - t_start, best, diag,
				diag_mask);
		if (rc) {
			fprintf(stderr, BENCH_NAME ": cannot write %s: %s\n",
				opt_json, strerror(-rc));
			json_err = true;
		} else {
			printf("\nJSON: %s\n", opt_json);
		}
	}
	live_free(&best_l);
	free(diag);
	if (comm) {
		rc = hcomm_comm_destroy(comm);
		if (rc)
			fail("hcomm_comm_destroy: %s", herr(rc));
	}
	free(A);
	free(B);
	free(C);
	free(Cref);
	printf(BENCH_NAME ": %s (%.1f s)\n",
	       failures ? "FAILED CHECKS (see above)" :
	       "every run computed the right C", now() - t_start);
	return failures ? 1 : json_err ? 2 : 0;
}
