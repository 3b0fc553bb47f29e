/* SPDX-License-Identifier: MIT */
/*
 * pypto_profile: run a tiled SGEMM through libpypto and write its profile.
 *
 *   pypto_profile [options] --output FILE [--output FILE2 ...]
 *
 * C = A B (row-major, random A and B in [-1, 1]) is cut into tiles, packed
 * by host tiles, moved by transfer tiles through the transport (libhcomm
 * on /dev/hcomm, or the memcpy test double) into "device" memory and
 * multiplied there by compute tiles on the worker threads.  Each output is
 * written by its extension: .html a self-contained timeline (with
 * --visualize, the seed's `pypto_profile --visualize --output
 * timeline.html`), .json a Chrome trace (Perfetto, chrome://tracing).
 * The diagnosis goes to stdout.  Exit status: 0, 1 when something failed
 * (including --check), 2 on a usage error.
 */
#define _GNU_SOURCE
#include <cblas.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pypto.h"

#define MAX_OUTPUTS	16
#define DIM_MAX		65536

enum out_fmt { OUT_HTML = 1, OUT_TRACE };

struct opts {
	uint32_t m, n, k;
	uint32_t tile;			/* 0: configuration's */
	uint32_t workers, devices, prefetch_depth;
	bool set_workers, set_devices, set_prefetch, no_double_buffering;
	bool memcpy_xport;
	uint64_t inject_every, inject_count;
	bool check, quiet, visualize;
	const char *out[MAX_OUTPUTS];
	unsigned int nout;
	const char *dot, *graph_json;
};

static void usage(FILE *f)
{
	fputs(
"usage: pypto_profile [options] --output FILE [--output FILE2 ...]\n"
"Runs a tiled SGEMM (C = A B) through libpypto and writes its profile.\n"
"\n"
"outputs (each by its extension):\n"
"  --output FILE.html     timeline in one self-contained HTML file (needs\n"
"                         --visualize)\n"
"  --output FILE.json     Chrome trace event file (Perfetto, chrome://tracing)\n"
"  --visualize            allow .html outputs (the timeline)\n"
"  --dot FILE             the tile graph for Graphviz\n"
"  --graph-json FILE      the tile graph as JSON\n"
"\n"
"workload and configuration (defaults: environment PYPTO_*, then these):\n"
"  --m N --n N --k N      matrix sizes (512 each)\n"
"  --tile N               tile side in elements (128)\n"
"  --workers N            worker threads (PYPTO_WORKERS, else online CPUs)\n"
"  --devices N            devices (1)\n"
"  --prefetch-depth N     tiles whose transfers are issued ahead (2)\n"
"  --no-double-buffering  one buffer set per device\n"
"  --transport T          hcomm (default, needs /dev/hcomm) or memcpy (a\n"
"                         host test double, not a transfer engine)\n"
"  --inject-fail N[:C]    fail every N-th transfer descriptor (at most C\n"
"                         times; 0 = unlimited): exercises the retries\n"
"  --check                compare C with one cblas_sgemm; fail when the\n"
"                         max abs error exceeds 1e-3 * K\n"
"  --quiet                no diagnosis or notes on stdout/stderr\n"
"  --help\n"
"\n"
"exit status: 0 ok, 1 failure, 2 usage error\n", f);
}

__attribute__((format(printf, 1, 2), noreturn))
static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("pypto_profile: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n(pypto_profile --help for the options)\n", stderr);
	exit(2);
}

/* A decimal in [lo, hi]; anything else is a usage error naming opt. */
static uint64_t parse_num(const char *opt, const char *s, uint64_t lo,
			  uint64_t hi, const char **rest)
{
	unsigned long long v;
	char *end;

	errno = 0;
	if (!s || *s < '0' || *s > '9')
		usage_error("%s: \"%s\" is not a number", opt, s ? s : "");
	v = strtoull(s, &end, 10);
	if (errno || v < lo || v > hi)
		usage_error("%s: %s is out of range (%" PRIu64 "..%" PRIu64 ")",
			    opt, s, lo, hi);
	if (rest)
		*rest = end;
	else if (*end)
		usage_error("%s: \"%s\" is not a number", opt, s);
	return v;
}

static enum out_fmt out_format(const char *path)
{
	const char *dot = strrchr(path, '.');

	if (dot && strchr(dot, '/'))
		dot = NULL;
	if (dot && (!strcasecmp(dot, ".html") || !strcasecmp(dot, ".htm")))
		return OUT_HTML;
	if (dot && !strcasecmp(dot, ".json"))
		return OUT_TRACE;
	return 0;
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	enum {
		O_M = 256, O_N, O_K, O_TILE, O_WORKERS, O_DEVICES, O_PREFETCH,
		O_NODB, O_TRANSPORT, O_INJECT, O_CHECK, O_QUIET, O_VISUALIZE,
		O_OUTPUT, O_DOT, O_GJSON, O_HELP,
	};
	static const struct option lo[] = {
		{ "m", required_argument, NULL, O_M },
		{ "n", required_argument, NULL, O_N },
		{ "k", required_argument, NULL, O_K },
		{ "tile", required_argument, NULL, O_TILE },
		{ "workers", required_argument, NULL, O_WORKERS },
		{ "devices", required_argument, NULL, O_DEVICES },
		{ "prefetch-depth", required_argument, NULL, O_PREFETCH },
		{ "no-double-buffering", no_argument, NULL, O_NODB },
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "inject-fail", required_argument, NULL, O_INJECT },
		{ "check", no_argument, NULL, O_CHECK },
		{ "quiet", no_argument, NULL, O_QUIET },
		{ "visualize", no_argument, NULL, O_VISUALIZE },
		{ "visualise", no_argument, NULL, O_VISUALIZE },
		{ "output", required_argument, NULL, O_OUTPUT },
		{ "dot", required_argument, NULL, O_DOT },
		{ "graph-json", required_argument, NULL, O_GJSON },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	const char *rest;
	unsigned int i;
	int c;

	memset(o, 0, sizeof(*o));
	o->m = o->n = o->k = 512;
	opterr = 0;
	while ((c = getopt_long_only(argc, argv, ":", lo, NULL)) != -1) {
		switch (c) {
		case O_M:
			o->m = parse_num("--m", optarg, 1, DIM_MAX, NULL);
			break;
		case O_N:
			o->n = parse_num("--n", optarg, 1, DIM_MAX, NULL);
			break;
		case O_K:
			o->k = parse_num("--k", optarg, 1, DIM_MAX, NULL);
			break;
		case O_TILE:
			o->tile = parse_num("--tile", optarg, 1, DIM_MAX, NULL);
			break;
		case O_WORKERS:
			o->workers = parse_num("--workers", optarg, 1, 1024,
					       NULL);
			o->set_workers = true;
			break;
		case O_DEVICES:
			o->devices = parse_num("--devices", optarg, 1, 1024,
					       NULL);
			o->set_devices = true;
			break;
		case O_PREFETCH:
			o->prefetch_depth = parse_num("--prefetch-depth",
						      optarg, 0, 64, NULL);
			o->set_prefetch = true;
			break;
		case O_NODB:
			o->no_double_buffering = true;
			break;
		case O_TRANSPORT:
			if (!strcmp(optarg, "hcomm"))
				o->memcpy_xport = false;
			else if (!strcmp(optarg, "memcpy"))
				o->memcpy_xport = true;
			else
				usage_error("--transport: \"%s\": use hcomm or "
					    "memcpy", optarg);
			break;
		case O_INJECT:
			o->inject_every = parse_num("--inject-fail", optarg, 0,
						    UINT64_MAX, &rest);
			o->inject_count = 0;
			if (*rest == ':')
				o->inject_count = parse_num("--inject-fail",
							    rest + 1, 0,
							    UINT64_MAX, NULL);
			else if (*rest)
				usage_error("--inject-fail: \"%s\": expected "
					    "N or N:COUNT", optarg);
			break;
		case O_CHECK:
			o->check = true;
			break;
		case O_QUIET:
			o->quiet = true;
			break;
		case O_VISUALIZE:
			o->visualize = true;
			break;
		case O_OUTPUT:
			if (o->nout == MAX_OUTPUTS)
				usage_error("--output: at most %d outputs",
					    MAX_OUTPUTS);
			if (!*optarg)
				usage_error("--output: empty file name");
			o->out[o->nout++] = optarg;
			break;
		case O_DOT:
			o->dot = optarg;
			break;
		case O_GJSON:
			o->graph_json = optarg;
			break;
		case O_HELP:
			usage(stdout);
			exit(0);
		case ':':
			usage_error("%s needs an argument", argv[optind - 1]);
		default:
			usage_error("unknown option %s", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument \"%s\"", argv[optind]);
	for (i = 0; i < o->nout; i++) {
		switch (out_format(o->out[i])) {
		case OUT_HTML:
			if (!o->visualize)
				usage_error("--output %s: an HTML timeline "
					    "needs --visualize (pypto_profile "
					    "--visualize --output %s)",
					    o->out[i], o->out[i]);
			break;
		case OUT_TRACE:
			break;
		default:
			usage_error("--output %s: unknown format: use .html "
				    "(with --visualize) for the timeline or "
				    ".json for a Chrome trace", o->out[i]);
		}
	}
}

/* Fixed-seed xorshift64: the same matrices on every run. */
static void fill_random(float *p, uint64_t n, uint64_t *s)
{
	uint64_t i, x = *s;

	for (i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		/* top 24 bits: exact in a float, uniform in [-1, 1] */
		p[i] = (float)((double)(x >> 40) / (double)(1 << 23) - 1.0);
	}
	*s = x;
}

static float *alloc_matrix(uint32_t rows, uint32_t cols, const char *name)
{
	uint64_t n = (uint64_t)rows * cols;
	float *p = NULL;

	if (n > SIZE_MAX / sizeof(float) ||
	    posix_memalign((void **)&p, 64, n * sizeof(float))) {
		fprintf(stderr, "pypto_profile: no memory for %s (%ux%u)\n",
			name, rows, cols);
		return NULL;
	}
	return p;
}

static void pypto_err(const char *what, int rc)
{
	const char *msg = pypto_errmsg();

	fprintf(stderr, "pypto_profile: %s: %s%s%s\n", what,
		pypto_strerror(rc), *msg ? ": " : "", msg);
}

static void hcomm_err(const char *what, int rc)
{
	const char *msg = hcomm_errmsg();

	fprintf(stderr, "pypto_profile: %s: %s%s%s\n", what,
		hcomm_strerror(rc), *msg ? ": " : "", msg);
}

/* Max abs error of C against one cblas_sgemm of the same product. */
static int check_result(const struct opts *o, const float *a,
			const float *b, const float *c)
{
	float *ref = alloc_matrix(o->m, o->n, "the reference");
	double err = 0, lim = 1e-3 * o->k;
	uint64_t i, n = (uint64_t)o->m * o->n, bad = 0;

	if (!ref)
		return 1;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)o->m,
		    (int)o->n, (int)o->k, 1.0f, a, (int)o->k, b, (int)o->n,
		    0.0f, ref, (int)o->n);
	for (i = 0; i < n; i++) {
		double d = fabs((double)c[i] - (double)ref[i]);

		if (isnan(d))
			bad++;
		else if (d > err)
			err = d;
	}
	free(ref);
	printf("check: max abs error %.3g against cblas_sgemm (limit %.3g)"
	       "%s: %s\n", err, lim, bad ? ", NaN in C" : "",
	       err <= lim && !bad ? "ok" : "FAILED");
	return err <= lim && !bad ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct hcomm_comm *comm = NULL;
	struct hcomm_win *win = NULL;
	struct pypto_xport *x = NULL;
	struct pypto_graph *g = NULL;
	struct pypto_gemm *gm = NULL;
	struct pypto_run *run = NULL;
	struct pypto_config cfg;
	struct pypto_gemm_args ga;
	const struct pypto_stats *st;
	float *a = NULL, *b = NULL, *c = NULL;
	void *dev = NULL;
	uint64_t bytes = 0, seed = 0x9e3779b97f4a7c15ULL;
	struct opts o;
	unsigned int i;
	int rc, ret = 1;

	parse_args(argc, argv, &o);

	/* Defaults (tile 128 for the demo), the environment, the options. */
	pypto_config_default(&cfg);
	cfg.tile_size = 128;
	rc = pypto_config_from_env(&cfg);
	if (rc) {
		pypto_err("environment", rc);
		return 2;
	}
	if (o.tile)
		cfg.tile_size = o.tile;
	if (o.set_workers)
		cfg.workers = o.workers;
	if (o.set_devices)
		cfg.devices = o.devices;
	if (o.set_prefetch)
		cfg.prefetch_depth = o.prefetch_depth;
	if (o.no_double_buffering)
		cfg.double_buffering = 0;
	if (cfg.devices > cfg.workers) {
		fprintf(stderr, "pypto_profile: %u devices need at least as "
			"many workers (have %u)\n", cfg.devices, cfg.workers);
		return 2;
	}

	a = alloc_matrix(o.m, o.k, "A");
	b = alloc_matrix(o.k, o.n, "B");
	c = alloc_matrix(o.m, o.n, "C");
	if (!a || !b || !c)
		goto out;
	fill_random(a, (uint64_t)o.m * o.k, &seed);
	fill_random(b, (uint64_t)o.k * o.n, &seed);
	/* Garbage in C: beta = 0 must overwrite it, not accumulate. */
	fill_random(c, (uint64_t)o.m * o.n, &seed);
	ga = (struct pypto_gemm_args){
		.m = o.m, .n = o.n, .k = o.k, .alpha = 1.0f, .beta = 0.0f,
		.a = a, .lda = o.k, .b = b, .ldb = o.n, .c = c, .ldc = o.n,
	};

	rc = pypto_gemm_device_bytes(&ga, &cfg, &bytes);
	if (rc) {
		pypto_err("device memory size", rc);
		goto out;
	}
	if (bytes > SIZE_MAX || posix_memalign(&dev, 4096, bytes)) {
		fprintf(stderr, "pypto_profile: no memory for %" PRIu64
			" bytes of device memory\n", bytes);
		dev = NULL;
		goto out;
	}
	memset(dev, 0, bytes);

	if (o.memcpy_xport) {
		if (!o.quiet)
			fprintf(stderr, "pypto_profile: note: --transport "
				"memcpy is a test double (a host thread "
				"copies with memcpy), not /dev/hcomm: its "
				"transfer times say nothing about the "
				"transfer engine\n");
		rc = pypto_xport_memcpy(&x, dev, bytes);
		if (rc) {
			pypto_err("memcpy transport", rc);
			goto out;
		}
	} else {
		rc = hcomm_comm_init(&comm, NULL);
		if (rc) {
			hcomm_err("hcomm_comm_init", rc);
			fprintf(stderr, "  (--transport memcpy runs the "
				"scheduler over a host test double instead)\n");
			comm = NULL;
			goto out;
		}
		rc = hcomm_win_create(comm, dev, bytes, &win);
		if (rc) {
			hcomm_err("hcomm_win_create", rc);
			win = NULL;
			goto out;
		}
		rc = pypto_xport_hcomm(&x, comm, win, 0, dev);
		if (rc) {
			pypto_err("hcomm transport", rc);
			goto out;
		}
	}
	if (o.inject_every) {
		rc = pypto_xport_inject_failure(x, o.inject_every,
						o.inject_count);
		if (rc) {
			pypto_err("failure injection", rc);
			goto out;
		}
	}

	rc = pypto_graph_create(&g);
	if (rc) {
		pypto_err("graph", rc);
		goto out;
	}
	rc = pypto_gemm_build(g, &ga, &cfg, dev, &gm);
	if (rc) {
		pypto_err("building the tiled SGEMM", rc);
		goto out;
	}
	if (o.dot && (rc = pypto_dump_graph(g, o.dot, PYPTO_DUMP_DOT))) {
		pypto_err("--dot", rc);
		goto out;
	}
	if (o.graph_json &&
	    (rc = pypto_dump_graph(g, o.graph_json, PYPTO_DUMP_JSON))) {
		pypto_err("--graph-json", rc);
		goto out;
	}

	rc = pypto_run(g, &cfg, x, &run);
	if (rc)
		pypto_err("run", rc);
	ret = rc ? 1 : 0;
	if (!run)
		goto out;

	/* Also after a failed run: the profile is how one finds out why. */
	for (i = 0; i < o.nout; i++) {
		int w = out_format(o.out[i]) == OUT_HTML ?
			pypto_run_write_html(run, o.out[i]) :
			pypto_run_write_trace(run, o.out[i]);

		if (w) {
			pypto_err(o.out[i], w);
			ret = 1;
		} else if (!o.quiet) {
			fprintf(stderr, "pypto_profile: wrote %s\n", o.out[i]);
		}
	}
	st = pypto_run_stats(run);
	if (!o.quiet) {
		printf("pypto_profile: sgemm %ux%ux%u, tile %u, %u workers, %u "
		       "device%s, prefetch %u, double buffering %s, transport "
		       "%s: %u tiles in %.3f ms, %.2f GFLOP/s\n", o.m, o.n, o.k,
		       cfg.tile_size, cfg.workers, cfg.devices,
		       cfg.devices == 1 ? "" : "s", cfg.prefetch_depth,
		       cfg.double_buffering ? "on" : "off",
		       pypto_xport_name(x), st->tiles, st->wall_ns / 1e6,
		       st->wall_ns ? 2.0 * o.m * o.n * o.k / st->wall_ns : 0.0);
		pypto_run_diagnose(run, stdout);
	}
	if (!rc && o.check && check_result(&o, a, b, c))
		ret = 1;
out:
	fflush(stdout);
	pypto_gemm_free(gm);
	pypto_run_free(run);
	pypto_graph_destroy(g);
	pypto_xport_destroy(x);
	if (win && (rc = hcomm_win_free(win))) {
		hcomm_err("hcomm_win_free", rc);
		ret = 1;
	}
	if (comm && (rc = hcomm_comm_destroy(comm))) {
		hcomm_err("hcomm_comm_destroy", rc);
		ret = 1;
	}
	free(dev);
	free(a);
	free(b);
	free(c);
	return ret;
}
