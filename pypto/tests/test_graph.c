/* SPDX-License-Identifier: MIT */
/*
 * libpypto host test: graph building and its argument checks, cycle
 * detection, the static analysis, placement, the DOT/JSON dumps (checked
 * by Graphviz and Python), configuration from the environment and the
 * error strings.  Uses the internal header to read placements and to fake
 * the tile/edge limits.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "pypto_int.h"
#include "tap.h"

static char tmpdir[] = "/tmp/pypto-graph-XXXXXX";

static int nop(void *arg, const struct pypto_exec *ex)
{
	(void)arg;
	(void)ex;
	return 0;
}

static int streq(const char *got, const char *want, const char *what)
{
	int good = got && !strcmp(got, want);

	ok(good, "%s", what);
	if (!good)
		printf("# got:\n%s\n# want:\n%s\n", got ? got : "(null)",
		       want);
	return good;
}

static int has(const char *s, const char *sub)
{
	return s && strstr(s, sub) != NULL;
}

/* ---- errors ------------------------------------------------------- */

static void *thread_fail(void *arg)
{
	char *seen = arg;

	strcpy(seen, pypto_errmsg());		/* a new thread: empty */
	pypto__fail(PYPTO_ERR_IO, "thread detail");
	strcat(seen, "|");
	strcat(seen, pypto_errmsg());
	return NULL;
}

static void test_errors(void)
{
	const char *s[PYPTO_ERR__MAX];
	char seen[300] = "";
	pthread_t th;
	uint64_t t1, t2;
	int i, j, distinct = 1, named = 1, neg = 1;

	for (i = 0; i < PYPTO_ERR__MAX; i++) {
		s[i] = pypto_strerror(i);
		named &= s[i] && *s[i] && strcmp(s[i], "unknown error");
		neg &= pypto_strerror(-i) == s[i];
		for (j = 0; j < i; j++)
			distinct &= strcmp(s[i], s[j]) != 0;
	}
	ok(named, "strerror names every code");
	ok(distinct, "strerror strings are distinct");
	ok(neg, "strerror(-err) == strerror(err)");
	ok(has(pypto_strerror(-PYPTO_DEADLOCK), "cycle"),
	   "DEADLOCK mentions the cycle: %s", pypto_strerror(PYPTO_DEADLOCK));
	ok(has(pypto_strerror(PYPTO_ERR_INVAL), "invalid"), "INVAL string");
	ok(has(pypto_strerror(PYPTO_ERR_NOMEM), "memory"), "NOMEM string");
	ok(has(pypto_strerror(PYPTO_ERR_LIMIT), "too many"), "LIMIT string");
	ok(!strcmp(pypto_strerror(PYPTO_ERR__MAX), "unknown error") &&
	   !strcmp(pypto_strerror(-PYPTO_ERR__MAX), "unknown error") &&
	   !strcmp(pypto_strerror(1000), "unknown error") &&
	   !strcmp(pypto_strerror(INT_MIN), "unknown error") &&
	   !strcmp(pypto_strerror(INT_MAX), "unknown error"),
	   "strerror: unknown codes (incl. INT_MIN)");

	pypto__clear_err();
	ok(!strcmp(pypto_errmsg(), ""), "errmsg empty after clear");
	ok(pypto__fail(PYPTO_ERR_TASK, "main %d", 7) == -PYPTO_ERR_TASK,
	   "pypto__fail returns -err");
	ok(!strcmp(pypto_errmsg(), "main 7"), "errmsg formatted");
	pypto__fail(PYPTO_ERR_IO, "wrap: %s", pypto_errmsg());
	ok(!strcmp(pypto_errmsg(), "wrap: main 7"),
	   "fail may wrap its own errmsg: %s", pypto_errmsg());
	{
		char big[600];

		memset(big, 'x', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		pypto__fail(PYPTO_ERR_IO, "%s", big);
		ok(strlen(pypto_errmsg()) == 255, "errmsg cut at 255 chars");
	}
	pypto__fail(PYPTO_ERR_IO, "main detail");
	pthread_create(&th, NULL, thread_fail, seen);
	pthread_join(th, NULL);
	ok(!strcmp(seen, "|thread detail"), "errmsg per thread: %s", seen);
	ok(!strcmp(pypto_errmsg(), "main detail"),
	   "another thread's failure leaves ours");

	t1 = pypto__now_ns();
	t2 = pypto__now_ns();
	ok(t1 > 0 && t2 >= t1, "now_ns monotonic");
}

/* ---- configuration ------------------------------------------------- */

static const char *const env_vars[] = {
	"PYPTO_WORKERS", "PYPTO_DEVICES", "PYPTO_PREFETCH_DEPTH",
	"PYPTO_DOUBLE_BUFFERING", "PYPTO_TILE_SIZE", "PYPTO_BATCH_MAX",
	"PYPTO_MAX_RETRIES", "PYPTO_PROFILE", "PYPTO_SEED",
};

static void unset_all(void)
{
	size_t i;

	for (i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); i++)
		unsetenv(env_vars[i]);
}

struct var {
	const char *name;
	uint64_t lo, hi;
	uint64_t (*get)(const struct pypto_config *c);
	void (*set)(struct pypto_config *c, uint64_t v);
};

#define GETTER(f) \
	static uint64_t get_##f(const struct pypto_config *c) \
	{ return (uint64_t)c->f; } \
	static void set_##f(struct pypto_config *c, uint64_t v) \
	{ c->f = v; }
GETTER(workers)
GETTER(devices)
GETTER(prefetch_depth)
GETTER(double_buffering)
GETTER(tile_size)
GETTER(batch_max)
GETTER(max_retries)
GETTER(profile)
GETTER(seed)

static const struct var vars[] = {
	{ "PYPTO_WORKERS", 1, 1024, get_workers, set_workers },
	{ "PYPTO_DEVICES", 1, 1024, get_devices, set_devices },	/* workers 1024 */
	{ "PYPTO_PREFETCH_DEPTH", 0, 64, get_prefetch_depth, set_prefetch_depth },
	{ "PYPTO_DOUBLE_BUFFERING", 0, 1, get_double_buffering, set_double_buffering },
	{ "PYPTO_TILE_SIZE", 1, 65536, get_tile_size, set_tile_size },
	{ "PYPTO_BATCH_MAX", 1, 65536, get_batch_max, set_batch_max },
	{ "PYPTO_MAX_RETRIES", 0, 100, get_max_retries, set_max_retries },
	{ "PYPTO_PROFILE", 0, 1, get_profile, set_profile },
	{ "PYPTO_SEED", 0, UINT64_MAX, get_seed, set_seed },
};

static void base_cfg(struct pypto_config *c)
{
	pypto_config_default(c);
	c->workers = 1024;	/* so PYPTO_DEVICES may take its whole range */
}

static void test_config(void)
{
	struct pypto_config c, before;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t v, k;
	char val[64];

	unset_all();
	memset(&c, 0xa5, sizeof(c));
	pypto_config_default(&c);
	if (cpus < 1)
		cpus = 1;
	if (cpus > 1024)
		cpus = 1024;
	ok(c.workers == (uint32_t)cpus && c.devices == 1 &&
	   c.prefetch_depth == 2 && c.double_buffering == 1 &&
	   c.tile_size == 256 && c.batch_max == 256 && c.max_retries == 3 &&
	   c.profile == 1 && c.seed == 1, "config defaults (workers %u)",
	   c.workers);
	pypto_config_default(NULL);
	ok(pypto_config_from_env(NULL) == -PYPTO_ERR_INVAL,
	   "from_env(NULL) rejected");

	memset(&c, 0x5a, sizeof(c));
	c.devices = 1;
	before = c;
	ok(pypto_config_from_env(&c) == 0 && !memcmp(&c, &before, sizeof(c)),
	   "from_env with nothing set leaves every field alone");

	for (v = 0; v < sizeof(vars) / sizeof(vars[0]); v++) {
		const struct var *x = &vars[v];
		uint64_t good[3] = { x->lo, x->hi, x->lo + (x->hi - x->lo) / 3 };
		char over[32], below[32];
		const char *bad[] = { "", "abc", "12x", "7 ", " 7", "-1", "+1",
				      "0x10", "1.5", "99999999999999999999999",
				      over, below };
		size_t nbad = sizeof(bad) / sizeof(bad[0]);
		int acc = 1, rej = 1, named = 1, kept = 1;

		snprintf(over, sizeof(over), "%llu",
			 (unsigned long long)x->hi + 1);
		if (x->hi == UINT64_MAX)
			snprintf(over, sizeof(over), "18446744073709551616");
		if (x->lo)
			snprintf(below, sizeof(below), "%llu",
				 (unsigned long long)x->lo - 1);
		else
			nbad--;
		for (k = 0; k < 3; k++) {
			snprintf(val, sizeof(val), "%llu",
				 (unsigned long long)good[k]);
			setenv(x->name, val, 1);
			base_cfg(&c);
			before = c;
			if (pypto_config_from_env(&c) != 0 ||
			    x->get(&c) != good[k]) {
				acc = 0;
				continue;
			}
			/* Only that field changed. */
			x->set(&c, x->get(&before));
			acc &= !memcmp(&c, &before, sizeof(c));
		}
		for (k = 0; k < nbad; k++) {
			int r;

			setenv(x->name, bad[k], 1);
			base_cfg(&c);
			before = c;
			pypto__clear_err();
			r = pypto_config_from_env(&c);
			rej &= r == -PYPTO_ERR_INVAL;
			named &= has(pypto_errmsg(), x->name) &&
				 has(pypto_errmsg(), bad[k]);
			kept &= !memcmp(&c, &before, sizeof(c));
			if (r != -PYPTO_ERR_INVAL || !has(pypto_errmsg(),
							  x->name))
				printf("# %s=\"%s\": %d %s\n", x->name,
				       bad[k], r, pypto_errmsg());
		}
		unsetenv(x->name);
		ok(acc, "%s accepts %llu, %llu, %llu and sets only its field",
		   x->name, (unsigned long long)good[0],
		   (unsigned long long)good[1], (unsigned long long)good[2]);
		ok(rej, "%s rejects garbage, sign, blanks, overflow, "
		   "out of range (%s)", x->name, over);
		ok(named, "%s: errmsg names the variable and value", x->name);
		ok(kept, "%s: a rejected value leaves cfg alone", x->name);
	}

	/* devices <= workers, against the workers that result. */
	pypto_config_default(&c);
	c.workers = 8;
	setenv("PYPTO_DEVICES", "4", 1);
	ok(pypto_config_from_env(&c) == 0 && c.devices == 4,
	   "PYPTO_DEVICES=4 with 8 workers");
	setenv("PYPTO_DEVICES", "9", 1);
	pypto_config_default(&c);
	c.workers = 8;
	ok(pypto_config_from_env(&c) == -PYPTO_ERR_INVAL &&
	   has(pypto_errmsg(), "PYPTO_DEVICES") && c.devices == 1,
	   "PYPTO_DEVICES=9 with 8 workers rejected: %s", pypto_errmsg());
	setenv("PYPTO_WORKERS", "16", 1);
	ok(pypto_config_from_env(&c) == 0 && c.workers == 16 &&
	   c.devices == 9, "PYPTO_DEVICES=9 PYPTO_WORKERS=16 accepted");
	setenv("PYPTO_WORKERS", "2", 1);
	setenv("PYPTO_DEVICES", "3", 1);
	pypto_config_default(&c);
	ok(pypto_config_from_env(&c) == -PYPTO_ERR_INVAL &&
	   has(pypto_errmsg(), "PYPTO_DEVICES") && c.devices == 1,
	   "PYPTO_WORKERS=2 PYPTO_DEVICES=3 rejected: %s", pypto_errmsg());
	unsetenv("PYPTO_DEVICES");
	pypto_config_default(&c);
	c.workers = 8;
	c.devices = 4;
	ok(pypto_config_from_env(&c) == -PYPTO_ERR_INVAL &&
	   has(pypto_errmsg(), "PYPTO_WORKERS=\"2\"") && c.workers == 8,
	   "PYPTO_WORKERS=2 below cfg's 4 devices rejected: %s",
	   pypto_errmsg());
	setenv("PYPTO_WORKERS", "3", 1);
	setenv("PYPTO_SEED", "18446744073709551615", 1);
	setenv("PYPTO_PROFILE", "0", 1);
	pypto_config_default(&c);
	ok(pypto_config_from_env(&c) == 0 && c.workers == 3 &&
	   c.seed == UINT64_MAX && c.profile == 0 && c.devices == 1,
	   "several variables at once");
	unset_all();
}

/* ---- building and its checks --------------------------------------- */

static void test_build(void)
{
	struct pypto_graph *g;
	struct pypto_xfer x[2];
	const uint32_t *ids;
	char buf[64], name[64];
	int id, r;

	ok(pypto_graph_create(NULL) == -PYPTO_ERR_INVAL, "create(NULL)");
	ok(pypto_graph_create(&g) == 0 && g, "create");
	pypto_graph_destroy(NULL);

	ok(pypto_add_compute(NULL, "a", nop, NULL, -1) == -PYPTO_ERR_INVAL,
	   "add_compute: NULL graph");
	ok(pypto_add_compute(g, "a", NULL, NULL, -1) == -PYPTO_ERR_INVAL &&
	   has(pypto_errmsg(), "function is NULL"), "add_compute: NULL fn");
	ok(pypto_add_compute(g, "a", nop, NULL, -2) == -PYPTO_ERR_INVAL &&
	   has(pypto_errmsg(), "affinity -2"), "add_compute: affinity -2: %s",
	   pypto_errmsg());
	ok(pypto_add_host(NULL, "h", nop, NULL, -1) == -PYPTO_ERR_INVAL,
	   "add_host: NULL graph");
	ok(pypto_add_host(g, "h", NULL, NULL, 0) == -PYPTO_ERR_INVAL,
	   "add_host: NULL fn");
	ok(pypto_add_host(g, "h", nop, NULL, INT_MIN) == -PYPTO_ERR_INVAL,
	   "add_host: affinity INT_MIN");
	ok(pypto_graph_tiles(g) == 0, "failed adds add no tile");

	/* Transfers. */
	memset(x, 0, sizeof(x));
	x[0] = (struct pypto_xfer){ .op = PYPTO_PUT, .rows = 4,
				    .row_bytes = 16, .local = buf,
				    .local_stride = 16, .win_off = 64,
				    .win_stride = 32 };
	x[1] = x[0];
	ok(pypto_add_transfer(NULL, "x", x, 1, -1) == -PYPTO_ERR_INVAL,
	   "add_transfer: NULL graph");
	ok(pypto_add_transfer(g, "x", NULL, 1, -1) == -PYPTO_ERR_INVAL,
	   "add_transfer: NULL array");
	ok(pypto_add_transfer(g, "x", x, 0, -1) == -PYPTO_ERR_INVAL,
	   "add_transfer: n = 0");
	ok(pypto_add_transfer(g, "x", x, 1, -3) == -PYPTO_ERR_INVAL,
	   "add_transfer: affinity -3");
#define BAD_XFER(field, value, want, err, what) do {			\
		struct pypto_xfer save = x[1];				\
		x[1].field = value;					\
		r = pypto_add_transfer(g, "x", x, 2, -1);		\
		ok(r == -(err) && has(pypto_errmsg(), "xfer[1]") &&	\
		   has(pypto_errmsg(), want), "add_transfer: %s: %s",	\
		   what, pypto_errmsg());				\
		x[1] = save;						\
	} while (0)
	BAD_XFER(op, 0, "op 0", PYPTO_ERR_INVAL, "op 0");
	BAD_XFER(op, 3, "op 3", PYPTO_ERR_INVAL, "op 3");
	BAD_XFER(rows, 0, "0 rows", PYPTO_ERR_INVAL, "0 rows");
	BAD_XFER(row_bytes, 0, "row_bytes", PYPTO_ERR_INVAL, "0 row_bytes");
	BAD_XFER(local, NULL, "local is NULL", PYPTO_ERR_INVAL, "NULL local");
	BAD_XFER(local_stride, 15, "local_stride 15", PYPTO_ERR_INVAL,
		 "local stride < row");
	BAD_XFER(win_stride, 8, "win_stride 8", PYPTO_ERR_INVAL,
		 "window stride < row");
	BAD_XFER(win_off, UINT64_MAX - 100, "window range overflows",
		 PYPTO_ERR_INVAL, "window end overflows (offset)");
	BAD_XFER(win_stride, 1ULL << 63, "window range overflows",
		 PYPTO_ERR_INVAL, "window end overflows (rows * stride)");
	BAD_XFER(local, (void *)(UINTPTR_MAX - 40), "local range overflows",
		 PYPTO_ERR_INVAL, "local end overflows (address)");
	BAD_XFER(local_stride, 1ULL << 63, "local range overflows",
		 PYPTO_ERR_INVAL, "local end overflows (rows * stride)");
	/* rows = 1: strides do not matter. */
	{
		struct pypto_xfer one = { .op = PYPTO_GET, .rows = 1,
					  .row_bytes = 8, .local = buf };
		struct pypto_xfer big[2] = {
			{ .op = PYPTO_PUT, .rows = UINT32_MAX, .row_bytes = 1,
			  .local = (void *)0x1000, .local_stride = 1,
			  .win_stride = 1 },
			{ .op = PYPTO_PUT, .rows = 2, .row_bytes = 1,
			  .local = (void *)0x1000, .local_stride = 1,
			  .win_stride = 1 },
		};
		struct pypto_xfer huge[2] = {
			{ .op = PYPTO_PUT, .rows = 1, .row_bytes = 1ULL << 63,
			  .local = (void *)0x1000 },
			{ .op = PYPTO_GET, .rows = 1, .row_bytes = 1ULL << 63,
			  .local = (void *)0x1000 },
		};

		ok(pypto_add_transfer(g, "x", big, 2, -1) == -PYPTO_ERR_LIMIT &&
		   has(pypto_errmsg(), "descriptors"),
		   "add_transfer: descriptor count overflow: %s",
		   pypto_errmsg());
		ok(pypto_add_transfer(g, "x", huge, 2, -1) ==
		   -PYPTO_ERR_LIMIT && has(pypto_errmsg(), "bytes"),
		   "add_transfer: byte sum overflow: %s", pypto_errmsg());
		ok(pypto_graph_tiles(g) == 0, "no tile from a failed transfer");
		id = pypto_add_transfer(g, "one", &one, 1, 1);
		ok(id == 0 && g->tiles[0].ndesc == 1 &&
		   g->tiles[0].bytes == 8 && g->tiles[0].nxf == 1,
		   "rows = 1 transfer with zero strides");
	}
	id = pypto_add_transfer(g, "xf", x, 2, -1);
	x[0].rows = 99;
	ok(id == 1 && g->tiles[1].ndesc == 8 && g->tiles[1].bytes == 128 &&
	   g->tiles[1].xf[0].rows == 4 && g->tiles[1].xf[1].win_stride == 32,
	   "transfer: ndesc, bytes, the array is copied");
	ok(pypto_tile_kind(g, 1) == PYPTO_TRANSFER &&
	   pypto_tile_affinity(g, 0) == 1 &&
	   pypto_tile_affinity(g, 1) == PYPTO_ANY_DEVICE,
	   "kind and affinity");
	ok(g->tiles[1].device == -1 && g->tiles[1].cost == 1.0,
	   "new tile: device -1, cost 1");

	/* Names. */
	id = pypto_add_compute(g, NULL, nop, NULL, -1);
	ok(id == 2, "tile without a name");
	streq(pypto_tile_name(g, 2), "t2", "NULL name -> t2");
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	id = pypto_add_host(g, name, nop, NULL, -1);
	ok(strlen(pypto_tile_name(g, id)) == PYPTO_NAME_MAX - 1 &&
	   !strncmp(pypto_tile_name(g, id), name, PYPTO_NAME_MAX - 1),
	   "long name cut at %d chars", PYPTO_NAME_MAX - 1);
	memset(name, 'a', 30);
	strcpy(name + 30, "\xc3\xa9z");	/* e-acute straddles the cut */
	id = pypto_add_compute(g, name, nop, NULL, -1);
	ok(strlen(pypto_tile_name(g, id)) == 30,
	   "cut does not split a UTF-8 sequence");
	id = pypto_add_compute(g, "", nop, NULL, -1);
	ok(id == 5 && !strcmp(pypto_tile_name(g, 5), ""), "empty name kept");
	ok(pypto_tile_name(g, 6) == NULL && pypto_tile_name(NULL, 0) == NULL,
	   "tile_name: bad id");
	ok(pypto_tile_kind(g, 6) == -PYPTO_ERR_INVAL &&
	   has(pypto_errmsg(), "no tile 6"), "tile_kind: bad id");
	ok(pypto_tile_inputs(g, 6) == 0 && pypto_tile_inputs(NULL, 0) == 0,
	   "tile_inputs: bad id");
	ids = (const uint32_t *)1;
	ok(pypto_tile_consumers(g, 99, &ids) == 0 && ids == NULL,
	   "tile_consumers: bad id");
	ok(pypto_graph_tiles(NULL) == 0 && pypto_graph_edges(NULL) == 0,
	   "counts of NULL graph");

	/* Dependencies. */
	ok(pypto_add_dep(NULL, 0, 1) == -PYPTO_ERR_INVAL, "add_dep: NULL");
	ok(pypto_add_dep(g, 6, 1) == -PYPTO_ERR_INVAL &&
	   has(pypto_errmsg(), "tile 6 out of range"), "add_dep: bad from");
	ok(pypto_add_dep(g, 1, UINT32_MAX) == -PYPTO_ERR_INVAL,
	   "add_dep: bad to");
	ok(pypto_add_dep(g, 0, 1) == 0 && pypto_add_dep(g, 0, 2) == 0 &&
	   pypto_add_dep(g, 1, 2) == 0, "add_dep");
	ok(pypto_add_dep(g, 0, 1) == 0 && pypto_graph_edges(g) == 3 &&
	   pypto_tile_inputs(g, 1) == 1, "duplicate edge ignored");
	ok(pypto_tile_consumers(g, 0, &ids) == 2 && ids[0] == 1 &&
	   ids[1] == 2 && pypto_tile_inputs(g, 2) == 2,
	   "consumer list and input count");
	ok(pypto_tile_consumers(g, 0, NULL) == 2, "consumers: NULL ids");

	/* Costs, workload. */
	ok(pypto_set_cost(g, 6, 1) == -PYPTO_ERR_INVAL &&
	   pypto_set_cost(NULL, 0, 1) == -PYPTO_ERR_INVAL &&
	   pypto_set_cost(g, 0, -1) == -PYPTO_ERR_INVAL &&
	   pypto_set_cost(g, 0, NAN) == -PYPTO_ERR_INVAL &&
	   pypto_set_cost(g, 0, INFINITY) == -PYPTO_ERR_INVAL,
	   "set_cost rejects bad id, negative, NaN, inf");
	ok(pypto_set_cost(g, 0, 2.5) == 0 && g->tiles[0].cost == 2.5,
	   "set_cost");
	ok(pypto_graph_set_workload(g, (enum pypto_workload)7, 64) ==
	   -PYPTO_ERR_INVAL && pypto_graph_set_workload(NULL, 0, 0) ==
	   -PYPTO_ERR_INVAL, "set_workload rejects bad workload");
	ok(pypto_graph_set_workload(g, PYPTO_WL_FC, 128) == 0 &&
	   g->workload == PYPTO_WL_FC && g->wl_tile_size == 128,
	   "set_workload");

	/* Validation state. */
	ok(pypto_tile_level(g, 0) == -PYPTO_ERR_INVAL &&
	   pypto_tile_component(g, 0) == -PYPTO_ERR_INVAL &&
	   has(pypto_errmsg(), "not validated"),
	   "level/component need a validation");
	ok(pypto_graph_validate(g, NULL) == 0 && g->validated &&
	   pypto_tile_level(g, 2) == 2 && pypto_tile_component(g, 3) == 1,
	   "validated: level and component");
	ok(pypto_tile_level(g, 6) == -PYPTO_ERR_INVAL &&
	   pypto_tile_component(NULL, 0) == -PYPTO_ERR_INVAL,
	   "level/component: bad id");
	pypto_add_dep(g, 0, 1);
	ok(g->validated, "a duplicate edge is no change");
	pypto_add_dep(g, 2, 3);
	ok(!g->validated && pypto_tile_level(g, 3) == -PYPTO_ERR_INVAL,
	   "a new edge clears the validation");
	pypto_graph_validate(g, NULL);
	pypto_set_cost(g, 3, 4);
	ok(!g->validated, "set_cost clears the validation");
	pypto_graph_validate(g, NULL);
	pypto_add_compute(g, "late", nop, NULL, -1);
	ok(!g->validated, "a new tile clears the validation");
	pypto_graph_validate(g, NULL);
	pypto_graph_set_workload(g, PYPTO_WL_CONV, 0);
	ok(!g->validated, "set_workload clears the validation");

	/* Limits, faked through the internals (the real ones need GiBs). */
	{
		uint32_t n = g->n, e = g->nedges;

		g->n = 1U << 26;
		r = pypto_add_compute(g, "over", nop, NULL, -1);
		ok(r == -PYPTO_ERR_LIMIT && has(pypto_errmsg(), "limit"),
		   "tile limit 1<<26: %s", pypto_errmsg());
		r = pypto_add_transfer(g, "over", x, 1, -1);
		ok(r == -PYPTO_ERR_LIMIT, "tile limit: transfer (no leak)");
		g->n = n;
		g->nedges = 1U << 31;
		r = pypto_add_dep(g, 4, 5);
		ok(r == -PYPTO_ERR_LIMIT && has(pypto_errmsg(), "edges"),
		   "edge limit: %s", pypto_errmsg());
		g->nedges = e;
		ok(pypto_graph_tiles(g) == n && g->tiles[4].nconsumers == 0,
		   "limits left the graph as it was");
	}
	pypto_graph_destroy(g);
}

/* ---- cycles -------------------------------------------------------- */

static struct pypto_graph *named_graph(unsigned int n, const char *fmt)
{
	struct pypto_graph *g;
	char name[64];
	unsigned int i;

	pypto_graph_create(&g);
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), fmt, i);
		pypto_add_compute(g, name, nop, NULL, -1);
	}
	return g;
}

static int in_set(uint32_t v, const uint32_t *set, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (set[i] == v)
			return 1;
	return 0;
}

static void test_cycles(void)
{
	static const uint32_t cyc[5] = { 7001, 123, 9876, 4567, 3333 };
	struct pypto_analysis a;
	struct pypto_graph *g;
	uint32_t ids[8], i, j, k, seed = 12345;
	int r;

	g = named_graph(1, "a");
	pypto_add_dep(g, 0, 0);
	ok(pypto_graph_edges(g) == 1 && pypto_tile_inputs(g, 0) == 1,
	   "self dependency accepted");
	pypto__clear_err();
	r = pypto_graph_validate(g, &a);
	ok(r == -PYPTO_DEADLOCK, "self loop: DEADLOCK");
	streq(pypto_errmsg(), "dependency cycle: a -> a", "self loop errmsg");
	ok(pypto_graph_cycle(g, ids, 8) == 1 && ids[0] == 0,
	   "self loop: cycle of one tile");
	ok(pypto__graph_prepare(g, 2) == -PYPTO_DEADLOCK,
	   "prepare reports the cycle too");
	ok(pypto_tile_level(g, 0) == -PYPTO_ERR_INVAL,
	   "no levels after a failed validation");
	pypto_graph_destroy(g);

	g = named_graph(3, "v%u");
	pypto_add_dep(g, 0, 1);
	pypto_add_dep(g, 2, 1);
	pypto_add_dep(g, 1, 2);
	ok(pypto_graph_validate(g, NULL) == -PYPTO_DEADLOCK,
	   "2-cycle: DEADLOCK");
	streq(pypto_errmsg(), "dependency cycle: v1 -> v2 -> v1",
	      "2-cycle errmsg");
	ok(pypto_graph_cycle(g, ids, 8) == 2 && ids[0] == 1 && ids[1] == 2,
	   "2-cycle ids");
	pypto_graph_destroy(g);

	/*
	 * A 5-cycle in a random 10k-tile DAG: forward edges among the other
	 * tiles, edges from tiles 0..9 into the cycle and from the cycle to
	 * tiles 9990..9999, so no other cycle exists.
	 */
	g = named_graph(10000, "n%u");
	for (i = 0; i < 10000; i++) {
		if (in_set(i, cyc, 5))
			continue;
		for (k = 0; k < 3; k++) {
			seed = seed * 1103515245 + 12345;
			j = i + 1 + (seed >> 16) % 50;
			if (j < 10000 && !in_set(j, cyc, 5))
				pypto_add_dep(g, i, j);
		}
	}
	for (k = 0; k < 5; k++) {
		pypto_add_dep(g, k * 2, cyc[k]);
		pypto_add_dep(g, cyc[k], 9990 + k * 2);
		pypto_add_dep(g, cyc[k], cyc[(k + 1) % 5]);
	}
	ok(pypto_graph_validate(g, NULL) == -PYPTO_DEADLOCK,
	   "10k DAG with a 5-cycle: DEADLOCK");
	streq(pypto_errmsg(), "dependency cycle: n123 -> n9876 -> n4567 -> "
	      "n3333 -> n7001 -> n123", "5-cycle named exactly");
	memset(ids, 0xff, sizeof(ids));
	ok(pypto_graph_cycle(g, ids, 8) == 5 && ids[0] == 123 &&
	   ids[1] == 9876 && ids[2] == 4567 && ids[3] == 3333 &&
	   ids[4] == 7001 && ids[5] == UINT32_MAX, "5-cycle ids in order");
	memset(ids, 0xff, sizeof(ids));
	ok(pypto_graph_cycle(g, ids, 2) == 5 && ids[0] == 123 &&
	   ids[1] == 9876 && ids[2] == UINT32_MAX,
	   "graph_cycle: max smaller than the cycle");
	ok(pypto_graph_cycle(g, NULL, 0) == 5 &&
	   pypto_graph_cycle(NULL, ids, 8) == 0, "graph_cycle: count only");
	pypto_graph_destroy(g);

	/* A long cycle: the message is cut and gives the count. */
	g = named_graph(100, "long-tile-name-%03u-abcdefghij");
	for (i = 0; i < 100; i++)
		pypto_add_dep(g, i, (i + 1) % 100);
	ok(pypto_graph_validate(g, NULL) == -PYPTO_DEADLOCK &&
	   !strncmp(pypto_errmsg(), "dependency cycle: "
		    "long-tile-name-000-abcdefghij -> "
		    "long-tile-name-001-abcdefghij -> ", 82) &&
	   has(pypto_errmsg(), " -> ... (100 tiles)") &&
	   strlen(pypto_errmsg()) <= 230,
	   "long cycle: cut with count: %s", pypto_errmsg());
	ok(pypto_graph_cycle(g, NULL, 0) == 100, "long cycle: 100 ids");
	pypto_graph_destroy(g);

	ok(pypto_graph_validate(NULL, NULL) == -PYPTO_ERR_INVAL,
	   "validate(NULL)");
}

/* ---- analysis ------------------------------------------------------ */

static void test_analysis(void)
{
	struct pypto_analysis a;
	struct pypto_graph *g;
	uint32_t i;
	int good, r;

	pypto_graph_create(&g);
	memset(&a, 0xff, sizeof(a));
	r = pypto_graph_validate(g, &a);
	ok(r == 0 && a.tiles == 0 && a.levels == 0 &&
	   a.max_width == 0 && a.components == 0 && a.roots == 0 &&
	   a.critical_path == 0 && a.total_cost == 0, "empty graph");
	ok(pypto__graph_prepare(g, 4) == 0, "prepare empty graph");
	pypto_graph_destroy(g);

	/* Chain of 1000, costs 1..1000. */
	g = named_graph(1000, "c%u");
	for (i = 0; i < 1000; i++) {
		pypto_set_cost(g, i, i + 1);
		if (i)
			pypto_add_dep(g, i - 1, i);
	}
	r = pypto_graph_validate(g, &a);
	ok(r == 0 && a.tiles == 1000 &&
	   a.edges == 999 && a.levels == 1000 && a.max_width == 1 &&
	   a.roots == 1 && a.components == 1 && a.critical_path == 500500 &&
	   a.total_cost == 500500,
	   "chain of 1000: levels %u width %u cp %g", a.levels, a.max_width,
	   a.critical_path);
	ok(pypto_tile_level(g, 999) == 999 && pypto_tile_level(g, 0) == 0,
	   "chain levels");
	memset(&a, 0, sizeof(a));
	r = pypto_graph_validate(g, &a);
	ok(r == 0 && a.levels == 1000,
	   "second validation gives the kept analysis");
	pypto_graph_destroy(g);

	/* Fan 1 -> 10000 -> 1. */
	g = named_graph(10002, "f%u");
	for (i = 1; i <= 10000; i++) {
		pypto_add_dep(g, 0, i);
		pypto_add_dep(g, i, 10001);
	}
	r = pypto_graph_validate(g, &a);
	ok(r == 0 && a.levels == 3 &&
	   a.max_width == 10000 && a.roots == 1 && a.edges == 20000 &&
	   a.components == 1 && a.critical_path == 3 &&
	   a.total_cost == 10002,
	   "fan 1->10000->1: levels %u width %u", a.levels, a.max_width);
	ok(pypto_tile_level(g, 10001) == 2 && pypto_tile_level(g, 5000) == 1,
	   "fan levels");
	pypto_graph_destroy(g);

	/* Two disjoint chains, interleaved ids: 0-2-4 and 1-3-5-6. */
	g = named_graph(7, "d%u");
	pypto_add_dep(g, 0, 2);
	pypto_add_dep(g, 2, 4);
	pypto_add_dep(g, 1, 3);
	pypto_add_dep(g, 3, 5);
	pypto_add_dep(g, 5, 6);
	r = pypto_graph_validate(g, &a);
	ok(r == 0 && a.components == 2 &&
	   a.roots == 2 && a.levels == 4 && a.max_width == 2,
	   "two chains: %u components", a.components);
	ok(pypto_tile_component(g, 0) == 0 && pypto_tile_component(g, 2) == 0 &&
	   pypto_tile_component(g, 4) == 0 && pypto_tile_component(g, 1) == 1 &&
	   pypto_tile_component(g, 3) == 1 && pypto_tile_component(g, 6) == 1,
	   "component of each tile");
	pypto_graph_destroy(g);

	/* Diamond with costs: a(1) -> b(5), c(2) -> d(1). */
	g = named_graph(4, "m%u");
	pypto_add_dep(g, 0, 1);
	pypto_add_dep(g, 0, 2);
	pypto_add_dep(g, 1, 3);
	pypto_add_dep(g, 2, 3);
	pypto_set_cost(g, 1, 5);
	pypto_set_cost(g, 2, 2);
	r = pypto_graph_validate(g, &a);
	ok(r == 0 && a.critical_path == 7 &&
	   a.total_cost == 9 && a.levels == 3 && a.max_width == 2,
	   "diamond: critical path %g", a.critical_path);
	pypto_graph_destroy(g);

	/* A million-tile chain: nothing recursive. */
	pypto_graph_create(&g);
	good = 1;
	for (i = 0; i < 1000000; i++) {
		good &= pypto_add_compute(g, NULL, nop, NULL, -1) == (int)i;
		if (i)
			good &= pypto_add_dep(g, i - 1, i) == 0;
	}
	ok(good, "built a 1M-tile chain");
	r = pypto_graph_validate(g, &a);
	ok(r == 0 && a.levels == 1000000 &&
	   a.max_width == 1 && a.critical_path == 1000000,
	   "1M chain validates: levels %u", a.levels);
	ok(pypto__graph_prepare(g, 3) == 0 &&
	   g->tiles[999999].device == g->tiles[0].device,
	   "1M chain placed on one device");
	pypto_add_dep(g, 999999, 0);
	ok(pypto_graph_validate(g, NULL) == -PYPTO_DEADLOCK &&
	   pypto_graph_cycle(g, NULL, 0) == 1000000 &&
	   has(pypto_errmsg(), "(1000000 tiles)"),
	   "1M-tile cycle found: %.60s...", pypto_errmsg());
	pypto_graph_destroy(g);
}

/* ---- placement ----------------------------------------------------- */

static void chain(struct pypto_graph *g, uint32_t len, uint32_t *first)
{
	uint32_t i;

	*first = pypto_graph_tiles(g);
	for (i = 0; i < len; i++) {
		pypto_add_compute(g, NULL, nop, NULL, -1);
		if (i)
			pypto_add_dep(g, *first + i - 1, *first + i);
	}
}

static int chain_on(struct pypto_graph *g, uint32_t first, uint32_t len,
		    int dev)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		if (g->tiles[first + i].device != dev)
			return 0;
	return 1;
}

static void test_placement(void)
{
	struct pypto_graph *g;
	uint32_t c4, c6, c8, c10, i;
	int good, r0, f, c1, c2, d;

	ok(pypto__graph_prepare(NULL, 1) == -PYPTO_ERR_INVAL,
	   "prepare(NULL)");
	pypto_graph_create(&g);
	ok(pypto__graph_prepare(g, 0) == -PYPTO_ERR_INVAL &&
	   has(pypto_errmsg(), "0 devices"), "prepare: 0 devices");
	for (i = 0; i < 8; i++)
		pypto_add_compute(g, NULL, nop, NULL, (int)i);
	ok(pypto__graph_prepare(g, 3) == 0, "prepare, fixed affinities");
	good = 1;
	for (i = 0; i < 8; i++)
		good &= g->tiles[i].device == (int)(i % 3);
	ok(good, "affinity %% ndev");
	ok(pypto__graph_prepare(g, 1) == 0 && g->tiles[7].device == 0,
	   "placed again for 1 device");
	pypto_graph_destroy(g);

	/* Components by size onto the least loaded device. */
	pypto_graph_create(&g);
	chain(g, 4, &c4);
	chain(g, 6, &c6);
	chain(g, 8, &c8);
	chain(g, 10, &c10);
	ok(pypto__graph_prepare(g, 2) == 0 && g->validated,
	   "prepare validates");
	ok(chain_on(g, c10, 10, 0) && chain_on(g, c8, 8, 1) &&
	   chain_on(g, c6, 6, 1) && chain_on(g, c4, 4, 0),
	   "components 10,8,6,4 -> devices 0,1,1,0");
	ok(pypto__graph_prepare(g, 1) == 0 && chain_on(g, c10, 10, 0) &&
	   chain_on(g, c8, 8, 0), "one device: all on 0");
	ok(pypto__graph_prepare(g, 4) == 0 && chain_on(g, c10, 10, 0) &&
	   chain_on(g, c8, 8, 1) && chain_on(g, c6, 6, 2) &&
	   chain_on(g, c4, 4, 3), "four devices: one component each");
	pypto_graph_destroy(g);

	/* Fixed tiles count in the load. */
	pypto_graph_create(&g);
	for (i = 0; i < 5; i++)
		pypto_add_compute(g, NULL, nop, NULL, 2);
	chain(g, 3, &c4);
	ok(pypto__graph_prepare(g, 2) == 0 && g->tiles[0].device == 0 &&
	   chain_on(g, c4, 3, 1),
	   "a free chain avoids the device loaded by fixed tiles");
	pypto_graph_destroy(g);

	/* Inheritance from the first input. */
	pypto_graph_create(&g);
	r0 = pypto_add_compute(g, "r", nop, NULL, -1);
	f = pypto_add_compute(g, "f", nop, NULL, 1);
	c1 = pypto_add_compute(g, "c1", nop, NULL, -1);
	c2 = pypto_add_compute(g, "c2", nop, NULL, -1);
	d = pypto_add_compute(g, "d", nop, NULL, -1);
	pypto_add_dep(g, f, c1);
	pypto_add_dep(g, f, c2);
	pypto_add_dep(g, r0, c2);
	pypto_add_dep(g, c1, d);
	ok(pypto__graph_prepare(g, 2) == 0, "prepare mixed component");
	ok(g->tiles[f].device == 1 && g->tiles[r0].device == 0,
	   "fixed tile on 1, free root on the component's device 0");
	ok(g->tiles[c1].device == 1 && g->tiles[d].device == 1,
	   "consumers of the fixed tile inherit device 1");
	ok(g->tiles[c2].device == 0, "first input (lowest id) decides");
	pypto_graph_destroy(g);
}

/* ---- dumps --------------------------------------------------------- */

static char *dump_mem(const struct pypto_graph *g, enum pypto_dump_fmt fmt,
		      int *ret)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	*ret = pypto_dump_graph_file(g, f, fmt);
	fclose(f);
	return buf;
}

static int run_cmd(const char *fmt, const char *arg)
{
	char cmd[512];
	int st;

	snprintf(cmd, sizeof(cmd), fmt, arg);
	st = system(cmd);
	return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char dot_small[] =
	"digraph pypto {\n"
	"\tnode [style=filled];\n"
	"\tn0 [label=\"pack\\nhost\", shape=note, fillcolor=\"#a1d99b\"];\n"
	"\tn1 [label=\"load \\\"A\\\"\\ntransfer\", shape=ellipse, "
	"fillcolor=\"#fdae6b\"];\n"
	"\tn2 [label=\"mm\\\\k\\ncompute\", shape=box, "
	"fillcolor=\"#9ecae1\"];\n"
	"\tn3 [label=\"t3\\ncompute\", shape=box, fillcolor=\"#9ecae1\"];\n"
	"\tn4 [label=\"two\\nlines\\ncompute\", shape=box, "
	"fillcolor=\"#9ecae1\"];\n"
	"\tn0 -> n1;\n"
	"\tn0 -> n4;\n"
	"\tn1 -> n2;\n"
	"\tn2 -> n3;\n"
	"}\n";

static const char dot_cycle[] =
	"digraph pypto {\n"
	"\tgraph [label=\"PYPTO_DEADLOCK: cycle of 3 tiles\", labelloc=t, "
	"fontcolor=red];\n"
	"\tnode [style=filled];\n"
	"\tn0 [label=\"a\\ncompute\", shape=box, fillcolor=\"#9ecae1\", "
	"color=red, penwidth=2];\n"
	"\tn1 [label=\"b\\ncompute\", shape=box, fillcolor=\"#9ecae1\", "
	"color=red, penwidth=2];\n"
	"\tn2 [label=\"c\\ncompute\", shape=box, fillcolor=\"#9ecae1\", "
	"color=red, penwidth=2];\n"
	"\tn3 [label=\"d\\ncompute\", shape=box, fillcolor=\"#9ecae1\"];\n"
	"\tn0 -> n1 [color=red, penwidth=2];\n"
	"\tn0 -> n3;\n"
	"\tn1 -> n2 [color=red, penwidth=2];\n"
	"\tn2 -> n0 [color=red, penwidth=2];\n"
	"}\n";

static const char json_cycle[] =
	"{\"tiles\":[\n"
	"{\"id\":0,\"name\":\"a\",\"kind\":\"compute\",\"affinity\":-1,"
	"\"device\":-1,\"level\":-1,\"inputs\":1,\"bytes\":0},\n"
	"{\"id\":1,\"name\":\"b\",\"kind\":\"compute\",\"affinity\":-1,"
	"\"device\":-1,\"level\":-1,\"inputs\":1,\"bytes\":0},\n"
	"{\"id\":2,\"name\":\"c\",\"kind\":\"compute\",\"affinity\":-1,"
	"\"device\":-1,\"level\":-1,\"inputs\":1,\"bytes\":0},\n"
	"{\"id\":3,\"name\":\"d\",\"kind\":\"compute\",\"affinity\":-1,"
	"\"device\":-1,\"level\":-1,\"inputs\":1,\"bytes\":0}],\n"
	"\"edges\":[[0,1],[0,3],[1,2],[2,0]],\n"
	"\"cycle\":[0,1,2]}\n";

static const char json_small[] =
	"{\"tiles\":[\n"
	"{\"id\":0,\"name\":\"q\\\"b\\\\s\\u0001\\ufffd\xc3\xa9\\u000a\","
	"\"kind\":\"host\",\"affinity\":3,\"device\":1,\"level\":0,"
	"\"inputs\":0,\"bytes\":0},\n"
	"{\"id\":1,\"name\":\"x\",\"kind\":\"transfer\",\"affinity\":-1,"
	"\"device\":1,\"level\":1,\"inputs\":1,\"bytes\":96}],\n"
	"\"edges\":[[0,1]],\n"
	"\"cycle\":[]}\n";

static void test_dumps(void)
{
	struct pypto_graph *g;
	struct pypto_xfer xf = { .op = PYPTO_GET, .rows = 3, .row_bytes = 32,
				 .local_stride = 64, .win_stride = 32 };
	char path[256], svg[256], lbuf[256];
	struct stat sb;
	int have_dot, ret;
	char *s;

	have_dot = run_cmd("command -v %s >/dev/null 2>&1", "dot") == 0;
	xf.local = lbuf;

	pypto_graph_create(&g);
	pypto_add_host(g, "pack", nop, NULL, -1);
	pypto_add_transfer(g, "load \"A\"", &xf, 1, -1);
	pypto_add_compute(g, "mm\\k", nop, NULL, -1);
	pypto_add_compute(g, NULL, nop, NULL, -1);
	pypto_add_compute(g, "two\nlines", nop, NULL, -1);
	pypto_add_dep(g, 0, 1);
	pypto_add_dep(g, 1, 2);
	pypto_add_dep(g, 2, 3);
	pypto_add_dep(g, 0, 4);
	s = dump_mem(g, PYPTO_DUMP_DOT, &ret);
	ok(ret == 0, "DOT of a small graph");
	streq(s, dot_small, "DOT text: nodes, shapes, escaping, edges");
	free(s);
	snprintf(path, sizeof(path), "%s/small.dot", tmpdir);
	snprintf(svg, sizeof(svg), "%s/small.svg", tmpdir);
	ok(pypto_dump_graph(g, path, PYPTO_DUMP_DOT) == 0, "DOT to a file");
	if (have_dot) {
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "dot -Tsvg -o %s %s", svg, path);
		ok(run_cmd("%s", cmd) == 0 && access(svg, F_OK) == 0,
		   "dot -Tsvg accepts the DOT");
		unlink(svg);
	} else {
		ok(1, "dot -Tsvg # SKIP graphviz not installed");
	}
	unlink(path);
	snprintf(path, sizeof(path), "%s/small.json", tmpdir);
	ok(pypto_dump_graph(g, path, PYPTO_DUMP_JSON) == 0, "JSON to a file");
	ok(run_cmd("python3 -c 'import json,sys; json.load(open(sys.argv[1]))'"
		   " %s", path) == 0, "python3 parses the JSON");
	unlink(path);

	/* Errors. */
	ok(pypto_dump_graph(NULL, path, PYPTO_DUMP_DOT) == -PYPTO_ERR_INVAL &&
	   pypto_dump_graph(g, NULL, PYPTO_DUMP_DOT) == -PYPTO_ERR_INVAL &&
	   pypto_dump_graph(g, path, 0) == -PYPTO_ERR_INVAL &&
	   pypto_dump_graph(g, path, 3) == -PYPTO_ERR_INVAL &&
	   pypto_dump_graph_file(g, NULL, PYPTO_DUMP_DOT) == -PYPTO_ERR_INVAL &&
	   pypto_dump_graph_file(NULL, stdout, PYPTO_DUMP_DOT) ==
	   -PYPTO_ERR_INVAL, "dump: bad arguments");
	ok(access(path, F_OK) != 0, "bad format creates no file");
	snprintf(path, sizeof(path), "%s/no/such/dir.dot", tmpdir);
	ok(pypto_dump_graph(g, path, PYPTO_DUMP_DOT) == -PYPTO_ERR_SYS &&
	   has(pypto_errmsg(), path) && has(pypto_errmsg(), "No such file"),
	   "dump: missing directory: %s", pypto_errmsg());
	if (access("/dev/full", W_OK) == 0) {
		ok(pypto_dump_graph(g, "/dev/full", PYPTO_DUMP_JSON) ==
		   -PYPTO_ERR_SYS && has(pypto_errmsg(), "/dev/full") &&
		   has(pypto_errmsg(), "No space"),
		   "dump: full disk: %s", pypto_errmsg());
		ok(stat("/dev/full", &sb) == 0 && S_ISCHR(sb.st_mode),
		   "dump: a failed write leaves the device in place");
	} else {
		ok(1, "dump to /dev/full # SKIP no /dev/full");
	}
	pypto_graph_destroy(g);

	/* A cycle in red. */
	pypto_graph_create(&g);
	pypto_add_compute(g, "a", nop, NULL, -1);
	pypto_add_compute(g, "b", nop, NULL, -1);
	pypto_add_compute(g, "c", nop, NULL, -1);
	pypto_add_compute(g, "d", nop, NULL, -1);
	pypto_add_dep(g, 0, 1);
	pypto_add_dep(g, 1, 2);
	pypto_add_dep(g, 2, 0);
	pypto_add_dep(g, 0, 3);
	s = dump_mem(g, PYPTO_DUMP_DOT, &ret);
	ok(ret == 0 && !has(s, "red"), "no red before the cycle is known");
	free(s);
	ok(pypto_graph_validate(g, NULL) == -PYPTO_DEADLOCK, "cycle graph");
	s = dump_mem(g, PYPTO_DUMP_DOT, &ret);
	ok(ret == 0, "DOT of an invalid graph");
	streq(s, dot_cycle, "DOT: cycle tiles and edges red, graph label");
	free(s);
	s = dump_mem(g, PYPTO_DUMP_JSON, &ret);
	ok(ret == 0, "JSON of an invalid graph");
	streq(s, json_cycle, "JSON: tiles, edges, cycle");
	free(s);
	snprintf(path, sizeof(path), "%s/cycle.dot", tmpdir);
	snprintf(svg, sizeof(svg), "%s/cycle.svg", tmpdir);
	pypto_dump_graph(g, path, PYPTO_DUMP_DOT);
	if (have_dot) {
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "dot -Tsvg -o %s %s", svg, path);
		ok(run_cmd("%s", cmd) == 0, "dot -Tsvg accepts the cycle DOT");
		unlink(svg);
	} else {
		ok(1, "dot -Tsvg cycle # SKIP graphviz not installed");
	}
	unlink(path);
	snprintf(path, sizeof(path), "%s/cycle.json", tmpdir);
	pypto_dump_graph(g, path, PYPTO_DUMP_JSON);
	ok(run_cmd("python3 -c 'import json,sys; d=json.load(open(sys.argv[1]));"
		   " assert d[\"cycle\"]==[0,1,2] and len(d[\"tiles\"])==4 and"
		   " d[\"edges\"][3]==[2,0]' %s", path) == 0,
	   "python3: cycle JSON content");
	unlink(path);
	pypto_graph_destroy(g);

	/* JSON escaping, placement and levels after prepare. */
	pypto_graph_create(&g);
	pypto_add_host(g, "q\"b\\s\x01\xff\xc3\xa9\n", nop, NULL, 3);
	pypto_add_transfer(g, "x", &xf, 1, -1);
	pypto_add_dep(g, 0, 1);
	pypto__graph_prepare(g, 2);
	s = dump_mem(g, PYPTO_DUMP_JSON, &ret);
	ok(ret == 0, "JSON with awkward names");
	streq(s, json_small, "JSON escaping, device, level, bytes");
	free(s);
	snprintf(path, sizeof(path), "%s/esc.json", tmpdir);
	pypto_dump_graph(g, path, PYPTO_DUMP_JSON);
	ok(run_cmd("python3 -c 'import json,sys; d=json.load(open(sys.argv[1]));"
		   " assert d[\"tiles\"][0][\"name\"]==\"q\\\"b\\\\s\\x01"
		   "\\ufffd\\xe9\\n\"' %s", path) == 0,
	   "python3 reads the escaped name back");
	unlink(path);
	snprintf(path, sizeof(path), "%s/esc.dot", tmpdir);
	pypto_dump_graph(g, path, PYPTO_DUMP_DOT);
	if (have_dot) {
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "dot -Tsvg -o /dev/null %s", path);
		ok(run_cmd("%s", cmd) == 0, "dot accepts the awkward names");
	} else {
		ok(1, "dot awkward # SKIP graphviz not installed");
	}
	unlink(path);
	pypto_graph_destroy(g);
}

/*
 * One tile feeding 200000 others, then every edge again: the repeats are
 * no-ops (the edge set, not a scan of the fan-out) and the counts and the
 * consumer list stay exact.
 */
static void test_fanout(void)
{
	enum { N = 200000 };
	struct pypto_graph *g;
	const uint32_t *ids;
	uint32_t i, bad = 0;
	int rc = 0;

	if (pypto_graph_create(&g)) {
		ok(0, "fanout: graph_create");
		return;
	}
	for (i = 0; i <= N && rc >= 0; i++)
		rc = pypto_add_compute(g, NULL, nop, NULL, PYPTO_ANY_DEVICE);
	for (i = 1; i <= N && rc >= 0; i++)
		rc = pypto_add_dep(g, 0, i);
	for (i = N; i >= 1 && rc >= 0; i--)
		rc = pypto_add_dep(g, 0, i);
	ok(rc >= 0 && pypto_graph_edges(g) == N,
	   "fanout: %u edges added twice count once", N);
	ok(pypto_tile_consumers(g, 0, &ids) == N, "fanout: %u consumers", N);
	for (i = 0; i < N; i++)
		bad += ids[i] != i + 1 || pypto_tile_inputs(g, i + 1) != 1;
	ok(bad == 0, "fanout: consumer order and input counts (%u wrong)",
	   bad);
	ok(pypto_add_dep(g, N, 0) == 0 && pypto_graph_edges(g) == N + 1 &&
	   pypto_tile_inputs(g, 0) == 1, "fanout: the reverse edge is new");
	pypto_graph_destroy(g);
}

int main(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_errors();
	test_config();
	test_build();
	test_cycles();
	test_analysis();
	test_placement();
	test_dumps();
	test_fanout();
	rmdir(tmpdir);
	return tap_done("pypto-graph");
}
