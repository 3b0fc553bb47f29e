/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the libhcomm pieces that need no module: sizes and the
 * configuration from the environment, rank detection, rank tables, the
 * bootstrap channel (forked ranks on a unix socket), the MPSC queue and
 * its event count, descriptor packing.  TAP on stdout, then
 * "units: N passed, N failed"; exit status 1 on any failure.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "hcomm_int.h"
#include "hcomm_boot.h"
#include "hcomm_mpsc.h"
#include "hcomm_probe.h"
#include "tap.h"

#define KiB	(1ULL << 10)
#define MiB	(1ULL << 20)
#define GiB	(1ULL << 30)

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

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Every variable the library reads, cleared between cases. */
static const char *const env_vars[] = {
	"HCOMM_SEND_BUF_SIZE", "HCOMM_RECV_BUF_SIZE", "HCOMM_MAX_INLINE",
	"HCOMM_NUM_QPS", "HCOMM_QUEUE_DEPTH", "HCOMM_CACHE_LIMIT",
	"HCOMM_FP16_COMPRESS", "HCOMM_COMP_THRESHOLD", "HCOMM_RANK_TABLE",
	"HCOMM_TIMEOUT_MS", "HCOMM_COLL_TIMEOUT_MS", "HCOMM_PROFILE", "HCOMM_RANK", "HCOMM_WORLD_SIZE",
	"HCOMM_ROOT_ADDR", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
	"OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "SLURM_PROCID",
	"SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_STEP_ID", "PMI_RANK",
	"PMI_SIZE", "PMI_JOBID", "PMI_KVSNAME", "HCOMM_JOB_ID",
	"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_STEP_NUM_NODES", "SLURM_NNODES",
	"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "HCOMM_PROBE",
	"HCOMM_TRANSPORT",
};

static void clean_env(void)
{
	unsigned i;

	for (i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); i++)
		unsetenv(env_vars[i]);
}

/* ------------------------------------------------------------------ */
/* hcomm_parse_size                                                   */
/* ------------------------------------------------------------------ */

static void test_parse_size(void)
{
	static const struct { const char *s; uint64_t v; } good[] = {
		{ "0", 0 }, { "1", 1 }, { "4096", 4096 }, { "007", 7 },
		{ "1k", KiB }, { "1K", KiB }, { "1KB", KiB }, { "1kb", KiB },
		{ "1KiB", KiB }, { "1kib", KiB }, { "1kIb", KiB },
		{ "64K", 64 * KiB }, { "2m", 2 * MiB }, { "2M", 2 * MiB },
		{ "2MB", 2 * MiB }, { "2MiB", 2 * MiB }, { "3g", 3 * GiB },
		{ "3G", 3 * GiB }, { "3GB", 3 * GiB }, { "3GiB", 3 * GiB },
		{ "0K", 0 }, { "1024M", GiB },
		{ "18446744073709551615", UINT64_MAX },
		{ "18014398509481983K", UINT64_MAX - (KiB - 1) },
		{ "17592186044415M", UINT64_MAX - (MiB - 1) },
		{ "17179869183G", UINT64_MAX - (GiB - 1) },
	};
	static const char *const garbage[] = {
		"", " ", " 1", "1 ", "1\n", "\t1", "+1", "-1", "-0", "0x10",
		"1.5M", "1,5M", "1e3", "M", "K", "B", "KiB", "2X", "2MM",
		"2KK", "2Mi", "2iB", "2KiBB", "2KBB", "2MiBs", "2 M", "2M ",
		"4096B", "4096b", "2T", "2P", "2k1", "1_000", "２", "2\xc2\xa0M",
	};
	static const char *const overflow[] = {
		"18446744073709551616", "99999999999999999999999",
		"18014398509481984K", "17592186044416M", "17179869184G",
		"184467440737095516150", "99999999999999999999999G",
	};
	uint64_t v;
	unsigned i, bad;

	for (i = 0, bad = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = 12345;
		if (hcomm_parse_size(good[i].s, &v) || v != good[i].v) {
			printf("# \"%s\" -> %llu (%s)\n", good[i].s,
			       (unsigned long long)v, hcomm_errmsg());
			bad++;
		}
	}
	ok(!bad, "parse_size: %u valid forms (K/M/G, KB/KiB, any case, "
	   "limits)", i);

	for (i = 0, bad = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
		int ret;

		v = 12345;
		ret = hcomm_parse_size(garbage[i], &v);
		if (ret != -HCOMM_ERR_INVAL || v != 12345 ||
		    !strstr(hcomm_errmsg(), "not a size")) {
			printf("# \"%s\": %d, %llu, \"%s\"\n", garbage[i], ret,
			       (unsigned long long)v, hcomm_errmsg());
			bad++;
		}
	}
	ok(!bad, "parse_size: %u garbage forms rejected as \"not a size\", "
	   "output untouched", i);

	for (i = 0, bad = 0; i < sizeof(overflow) / sizeof(overflow[0]); i++) {
		int ret;

		v = 12345;
		ret = hcomm_parse_size(overflow[i], &v);
		if (ret != -HCOMM_ERR_INVAL || v != 12345 ||
		    !strstr(hcomm_errmsg(), "too large")) {
			printf("# \"%s\": %d, \"%s\"\n", overflow[i], ret,
			       hcomm_errmsg());
			bad++;
		}
	}
	ok(!bad, "parse_size: %u overflows rejected as \"too large\"", i);

	ok(hcomm_parse_size(NULL, &v) == -HCOMM_ERR_INVAL &&
	   hcomm_parse_size("1", NULL) == -HCOMM_ERR_INVAL,
	   "parse_size: NULL arguments rejected");
	hcomm_parse_size("2X", &v);
	ok(!strcmp(hcomm_errmsg(),
		   "\"2X\": not a size (use e.g. 2M, 64K, 4096)"),
	   "parse_size: message shows the string and examples (%s)",
	   hcomm_errmsg());
}

/* ------------------------------------------------------------------ */
/* Configuration                                                      */
/* ------------------------------------------------------------------ */

static int cfg_eq(const struct hcomm_config *a, const struct hcomm_config *b)
{
	return a->send_buf_size == b->send_buf_size &&
	       a->recv_buf_size == b->recv_buf_size &&
	       a->max_inline == b->max_inline && a->num_qps == b->num_qps &&
	       a->queue_depth == b->queue_depth &&
	       a->enable_fp16_compress == b->enable_fp16_compress &&
	       a->cache_limit == b->cache_limit &&
	       a->comp_threshold == b->comp_threshold &&
	       a->rank_table == b->rank_table &&
	       a->timeout_ms == b->timeout_ms;
}

static uint64_t cfg_get(const struct hcomm_config *c, const char *var)
{
	if (!strcmp(var, "HCOMM_SEND_BUF_SIZE"))
		return c->send_buf_size;
	if (!strcmp(var, "HCOMM_RECV_BUF_SIZE"))
		return c->recv_buf_size;
	if (!strcmp(var, "HCOMM_MAX_INLINE"))
		return c->max_inline;
	if (!strcmp(var, "HCOMM_NUM_QPS"))
		return c->num_qps;
	if (!strcmp(var, "HCOMM_QUEUE_DEPTH"))
		return c->queue_depth;
	if (!strcmp(var, "HCOMM_CACHE_LIMIT"))
		return c->cache_limit;
	if (!strcmp(var, "HCOMM_FP16_COMPRESS"))
		return c->enable_fp16_compress;
	if (!strcmp(var, "HCOMM_COMP_THRESHOLD"))
		return c->comp_threshold;
	return c->timeout_ms;
}

static void test_config_default(void)
{
	struct hcomm_config c;

	memset(&c, 0xa5, sizeof(c));
	hcomm_config_default(&c);
	ok(c.send_buf_size == 2 * MiB && c.recv_buf_size == 2 * MiB &&
	   c.max_inline == 4 * KiB && c.num_qps == 1 && c.queue_depth == 256 &&
	   c.enable_fp16_compress == 0 && c.cache_limit == 64 * MiB &&
	   c.comp_threshold == 64 * KiB && !c.rank_table &&
	   c.timeout_ms == 30000, "config: defaults as documented");
	hcomm_config_default(NULL);
	clean_env();
	ok(!hcomm_config_from_env(&c) && c.send_buf_size == 2 * MiB &&
	   c.timeout_ms == 30000 && !c.rank_table,
	   "config: empty environment keeps the defaults");
	ok(hcomm_config_from_env(NULL) == -HCOMM_ERR_INVAL,
	   "config: from_env(NULL) rejected");
}

struct var_case {
	const char *var;
	const char *good[4];
	uint64_t val[4];
	const char *bad[6];
	const char *why[6];
};

static const struct var_case var_cases[] = {
	{ "HCOMM_SEND_BUF_SIZE", { "8M", "4K", "1G", "65536" },
	  { 8 * MiB, 4 * KiB, GiB, 65536 },
	  { "4095", "2G", "1025M", "2X", "-1", "" },
	  { "out of range 4K .. 1G", "out of range", "out of range",
	    "not a size", "not a size", "not a size" } },
	{ "HCOMM_RECV_BUF_SIZE", { "16m", "4096", "1GiB", "3MB" },
	  { 16 * MiB, 4096, GiB, 3 * MiB },
	  { "0", "1073741825", "4k ", "99999999999999999999", NULL },
	  { "out of range 4K .. 1G", "out of range", "not a size",
	    "too large" } },
	{ "HCOMM_MAX_INLINE", { "0", "64K", "100", "1k" },
	  { 0, 64 * KiB, 100, KiB },
	  { "65537", "1M", "64KK", NULL },
	  { "out of range 0 .. 64K", "out of range", "not a size" } },
	{ "HCOMM_NUM_QPS", { "1", "64", "2", "007" }, { 1, 64, 2, 7 },
	  { "0", "65", "4K", "+2", " 2", "99999999999999999999" },
	  { "out of range 1 .. 64", "out of range 1 .. 64",
	    "not a decimal integer", "not a decimal integer",
	    "not a decimal integer", "too large" } },
	{ "HCOMM_QUEUE_DEPTH", { "8", "32768", "1024", NULL },
	  { 8, 32768, 1024 },
	  { "7", "32769", "1k", "0x100", "", NULL },
	  { "out of range 8 .. 32768", "out of range",
	    "not a decimal integer", "not a decimal integer",
	    "not a decimal integer" } },
	{ "HCOMM_CACHE_LIMIT", { "0", "64G", "1g", "512M" },
	  { 0, 64 * GiB, GiB, 512 * MiB },
	  { "68719476737", "65G", "lots", NULL },
	  { "out of range 0 .. 64G", "out of range", "not a size" } },
	{ "HCOMM_FP16_COMPRESS", { "0", "1", NULL }, { 0, 1 },
	  { "2", "yes", "", " 1", "01", NULL },
	  { "use 0 or 1", "use 0 or 1", "use 0 or 1", "use 0 or 1",
	    "use 0 or 1" } },
	{ "HCOMM_COMP_THRESHOLD", { "0", "1G", "4K", NULL },
	  { 0, GiB, 4 * KiB },
	  { "1073741825", "2G", "1.5K", NULL },
	  { "out of range 0 .. 1G", "out of range", "not a size" } },
	{ "HCOMM_TIMEOUT_MS", { "1", "3600000", "500", NULL },
	  { 1, 3600000, 500 },
	  { "0", "3600001", "1s", "-5", "30000000000000000000000", NULL },
	  { "out of range 1 .. 3600000", "out of range",
	    "not a decimal integer", "not a decimal integer", "too large" } },
};

static void test_config_vars(void)
{
	struct hcomm_config def, c, before;
	unsigned i, j, good, bad;
	char expect[128];

	hcomm_config_default(&def);
	for (i = 0; i < sizeof(var_cases) / sizeof(var_cases[0]); i++) {
		const struct var_case *vc = &var_cases[i];

		good = bad = 0;
		for (j = 0; j < 4 && vc->good[j]; j++) {
			clean_env();
			setenv(vc->var, vc->good[j], 1);
			hcomm_config_default(&c);
			if (hcomm_config_from_env(&c) ||
			    cfg_get(&c, vc->var) != vc->val[j]) {
				printf("# %s=%s: %s\n", vc->var, vc->good[j],
				       hcomm_errmsg());
				bad++;
				continue;
			}
			/* the other fields stay at their defaults */
			c.send_buf_size = def.send_buf_size;
			c.recv_buf_size = def.recv_buf_size;
			c.max_inline = def.max_inline;
			c.num_qps = def.num_qps;
			c.queue_depth = def.queue_depth;
			c.enable_fp16_compress = def.enable_fp16_compress;
			c.cache_limit = def.cache_limit;
			c.comp_threshold = def.comp_threshold;
			c.timeout_ms = def.timeout_ms;
			good += cfg_eq(&c, &def);
		}
		ok(!bad && good == j, "config: %s accepts %u values, touches "
		   "nothing else", vc->var, j);

		bad = 0;
		for (j = 0; j < 6 && vc->bad[j]; j++) {
			int ret;

			clean_env();
			setenv(vc->var, vc->bad[j], 1);
			hcomm_config_default(&c);
			before = c;
			ret = hcomm_config_from_env(&c);
			snprintf(expect, sizeof(expect), "%s=\"%s\": ",
				 vc->var, vc->bad[j]);
			if (ret != -HCOMM_ERR_INVAL || !cfg_eq(&c, &before) ||
			    strncmp(hcomm_errmsg(), expect, strlen(expect)) ||
			    !strstr(hcomm_errmsg(), vc->why[j])) {
				printf("# %s=\"%s\": %d \"%s\" (want \"%s\")\n",
				       vc->var, vc->bad[j], ret,
				       hcomm_errmsg(), vc->why[j]);
				bad++;
			}
		}
		ok(!bad, "config: %s rejects %u values, naming the variable "
		   "and why", vc->var, j);
	}

	clean_env();
	setenv("HCOMM_SEND_BUF_SIZE", "2X", 1);
	hcomm_config_default(&c);
	hcomm_config_from_env(&c);
	ok(!strcmp(hcomm_errmsg(), "HCOMM_SEND_BUF_SIZE=\"2X\": not a size "
		   "(use e.g. 2M, 64K, 4096)"),
	   "config: message for HCOMM_SEND_BUF_SIZE=2X (%s)", hcomm_errmsg());

	clean_env();
	setenv("HCOMM_RANK_TABLE", "/some/ranks.txt", 1);
	hcomm_config_default(&c);
	ok(!hcomm_config_from_env(&c) && c.rank_table &&
	   !strcmp(c.rank_table, "/some/ranks.txt"),
	   "config: HCOMM_RANK_TABLE sets rank_table");
	setenv("HCOMM_RANK_TABLE", "", 1);
	hcomm_config_default(&c);
	ok(hcomm_config_from_env(&c) == -HCOMM_ERR_INVAL && !c.rank_table &&
	   strstr(hcomm_errmsg(), "HCOMM_RANK_TABLE"),
	   "config: empty HCOMM_RANK_TABLE rejected");

	/* All or nothing: one bad variable leaves cfg as it was. */
	clean_env();
	setenv("HCOMM_SEND_BUF_SIZE", "8M", 1);
	setenv("HCOMM_QUEUE_DEPTH", "64", 1);
	setenv("HCOMM_TIMEOUT_MS", "0", 1);
	hcomm_config_default(&c);
	before = c;
	ok(hcomm_config_from_env(&c) == -HCOMM_ERR_INVAL &&
	   cfg_eq(&c, &before) && strstr(hcomm_errmsg(), "HCOMM_TIMEOUT_MS"),
	   "config: a bad variable leaves the config unchanged");

	/* Overlay: fields whose variable is unset keep the caller's value. */
	clean_env();
	setenv("HCOMM_NUM_QPS", "3", 1);
	hcomm_config_default(&c);
	c.send_buf_size = 12345;
	c.timeout_ms = 77;
	ok(!hcomm_config_from_env(&c) && c.send_buf_size == 12345 &&
	   c.timeout_ms == 77 && c.num_qps == 3,
	   "config: from_env overlays the caller's values");

	/* Several at once. */
	clean_env();
	setenv("HCOMM_SEND_BUF_SIZE", "1M", 1);
	setenv("HCOMM_RECV_BUF_SIZE", "3M", 1);
	setenv("HCOMM_FP16_COMPRESS", "1", 1);
	setenv("HCOMM_COMP_THRESHOLD", "8K", 1);
	setenv("HCOMM_TIMEOUT_MS", "1500", 1);
	hcomm_config_default(&c);
	ok(!hcomm_config_from_env(&c) && c.send_buf_size == MiB &&
	   c.recv_buf_size == 3 * MiB && c.enable_fp16_compress == 1 &&
	   c.comp_threshold == 8 * KiB && c.timeout_ms == 1500 &&
	   c.num_qps == 1, "config: several variables at once");
	clean_env();
}

/* HCOMM_COLL_TIMEOUT_MS: milliseconds, or "inf"; garbage named. */
static void test_coll_timeout_env(void)
{
	static const struct { const char *s; int64_t v; } good[] = {
		{ "1", 1 }, { "250", 250 }, { "3600000", 3600000 },
		{ "inf", -1 },
	};
	static const char *const bad[] = {
		"", "0", "-1", "abc", "10ms", "3600001", "99999999999999999999",
		" 5", "INF",
	};
	int64_t v;
	unsigned i;
	int okc = 1;

	clean_env();
	v = 42;
	ok(!hcomm__coll_timeout_from_env(&v) && v == 42,
	   "coll timeout: unset leaves the value");
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		setenv("HCOMM_COLL_TIMEOUT_MS", good[i].s, 1);
		v = 42;
		if (hcomm__coll_timeout_from_env(&v) || v != good[i].v) {
			okc = 0;
			printf("# HCOMM_COLL_TIMEOUT_MS=%s gave %lld\n", good[i].s,
			     (long long)v);
		}
	}
	ok(okc, "coll timeout: 1, 250, 3600000 ms and inf (-1) accepted");
	okc = 1;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("HCOMM_COLL_TIMEOUT_MS", bad[i], 1);
		v = 42;
		if (hcomm__coll_timeout_from_env(&v) != -HCOMM_ERR_INVAL ||
		    v != 42 ||
		    !strstr(hcomm_errmsg(), "HCOMM_COLL_TIMEOUT_MS")) {
			okc = 0;
			printf("# HCOMM_COLL_TIMEOUT_MS=\"%s\": v %lld, %s\n", bad[i],
			     (long long)v, hcomm_errmsg());
		}
	}
	ok(okc, "coll timeout: 0, negative, garbage, units, overflow "
	   "rejected naming the variable, value unchanged");
	clean_env();
}

static void test_config_profiles(void)
{
	struct hcomm_config c, def;

	hcomm_config_default(&def);

	clean_env();
	setenv("HCOMM_PROFILE", "latency", 1);
	hcomm_config_default(&c);
	ok(!hcomm_config_from_env(&c) && c.send_buf_size == 256 * KiB &&
	   c.recv_buf_size == 256 * KiB && c.max_inline == 64 * KiB &&
	   c.num_qps == 1 && c.queue_depth == 64 &&
	   c.cache_limit == 64 * MiB && c.timeout_ms == def.timeout_ms &&
	   c.comp_threshold == def.comp_threshold &&
	   c.enable_fp16_compress == 0,
	   "config: HCOMM_PROFILE=latency (256K buffers, 64K inline, one "
	   "64-deep ring)");

	setenv("HCOMM_PROFILE", "bandwidth", 1);
	hcomm_config_default(&c);
	ok(!hcomm_config_from_env(&c) && c.send_buf_size == 8 * MiB &&
	   c.recv_buf_size == 8 * MiB && c.max_inline == 0 &&
	   c.num_qps == 2 && c.queue_depth == 1024 &&
	   c.cache_limit == 256 * MiB && c.timeout_ms == def.timeout_ms,
	   "config: HCOMM_PROFILE=bandwidth (8M buffers, no inline, two "
	   "1024-deep rings, 256M cache)");

	setenv("HCOMM_PROFILE", "default", 1);
	hcomm_config_default(&c);
	c.queue_depth = 99;
	c.timeout_ms = 5;
	ok(!hcomm_config_from_env(&c) && c.queue_depth == 256 &&
	   c.send_buf_size == 2 * MiB && c.timeout_ms == 5,
	   "config: HCOMM_PROFILE=default resets the profile's fields only");

	setenv("HCOMM_PROFILE", "latency", 1);
	setenv("HCOMM_QUEUE_DEPTH", "128", 1);
	setenv("HCOMM_MAX_INLINE", "1K", 1);
	hcomm_config_default(&c);
	ok(!hcomm_config_from_env(&c) && c.queue_depth == 128 &&
	   c.max_inline == KiB && c.send_buf_size == 256 * KiB,
	   "config: variables override the profile");

	clean_env();
	setenv("HCOMM_PROFILE", "fast", 1);
	hcomm_config_default(&c);
	ok(hcomm_config_from_env(&c) == -HCOMM_ERR_INVAL &&
	   cfg_eq(&c, &def) &&
	   strstr(hcomm_errmsg(), "HCOMM_PROFILE=\"fast\"") &&
	   strstr(hcomm_errmsg(), "latency") &&
	   strstr(hcomm_errmsg(), "bandwidth"),
	   "config: unknown profile rejected, naming the choices (%s)",
	   hcomm_errmsg());
	setenv("HCOMM_PROFILE", "Latency", 1);
	ok(hcomm_config_from_env(&c) == -HCOMM_ERR_INVAL,
	   "config: profile names are exact");
	setenv("HCOMM_PROFILE", "", 1);
	ok(hcomm_config_from_env(&c) == -HCOMM_ERR_INVAL,
	   "config: empty profile rejected");
	setenv("HCOMM_PROFILE", "bandwidth", 1);
	setenv("HCOMM_NUM_QPS", "0", 1);
	hcomm_config_default(&c);
	ok(hcomm_config_from_env(&c) == -HCOMM_ERR_INVAL &&
	   cfg_eq(&c, &def), "config: profile not applied when a variable "
	   "is bad");
	clean_env();
}

/* ------------------------------------------------------------------ */
/* Rank tables and rank detection                                     */
/* ------------------------------------------------------------------ */

static char tmpdir[64];
static unsigned tmp_seq;

/* Write text to a fresh file; returns its path (static buffer ring). */
static const char *write_table(const char *text)
{
	static char paths[4][128];
	char *p = paths[tmp_seq % 4];
	FILE *f;

	snprintf(p, sizeof(paths[0]), "%s/table%u", tmpdir, tmp_seq++);
	f = fopen(p, "w");
	if (!f)
		return "/nonexistent";
	fputs(text, f);
	fclose(f);
	return p;
}

static char host[256];

static void test_rank_table(void)
{
	struct hcomm_rankinfo ri;
	char text[1024];
	const char *path;
	int ret;

	snprintf(text, sizeof(text),
		 "# a job of four ranks\n"
		 "\n"
		 "world_size 4   # ranks 0 .. 3\n"
		 "root my-rendezvous\n"
		 "  rank 2 host %s\n"
		 "rank\t0\thost localhost\r\n"
		 "rank 1 host %s # on this node\n"
		 "rank 3 host localhost\n"
		 "   # the end\n", host, host);
	path = write_table(text);
	memset(&ri, 0xa5, sizeof(ri));
	ret = hcomm__rank_table_parse(path, -1, &ri);
	ok(!ret && ri.size == 4 && ri.local == 1 &&
	   ri.launcher == HCOMM_LAUNCH_RANK_TABLE &&
	   !strcmp(ri.root_addr, "my-rendezvous") &&
	   !strncmp(ri.job, "table-", 6),
	   "rank table: comments, blanks, tabs, CRLF, any order (%s)",
	   ret ? hcomm_errmsg() : ri.job);

	path = write_table("world_size 1\nrank 0 host localhost\n");
	ret = hcomm__rank_table_parse(path, -1, &ri);
	ok(!ret && ri.size == 1 && ri.local && !ri.root_addr[0],
	   "rank table: one rank, no root line");

	path = write_table("world_size 3\nrank 0 host localhost\n"
			   "rank 1 host some-other-node.example\n"
			   "rank 2 host localhost\n");
	ret = hcomm__rank_table_parse(path, -1, &ri);
	ok(!ret && ri.size == 3 && ri.local == 0,
	   "rank table: another host's rank makes it not local");

	snprintf(text, sizeof(text), "rank 1 host %s\nrank 0 host %s\n"
		 "world_size 2\n", host, host);
	ret = hcomm__rank_table_parse(write_table(text), -1, &ri);
	ok(!ret && ri.size == 2 && ri.local == 1,
	   "rank table: world_size may come after the ranks; this host's "
	   "name is local");

	{
		static const struct { const char *text, *msg; } bad[] = {
			{ "", "no world_size line" },
			{ "# nothing\n\n", "no world_size line" },
			{ "rank 0 host a\n", "no world_size line" },
			{ "world_size\n", ":1: expected \"world_size N\"" },
			{ "world_size 2 3\n", ":1: expected" },
			{ "world_size 0\n", ":1: world_size \"0\"" },
			{ "world_size 1025\n", ":1: world_size" },
			{ "world_size -1\n", ":1: world_size" },
			{ "world_size x\n", ":1: world_size" },
			{ "world_size 1\nworld_size 1\nrank 0 host a\n",
			  ":2: second world_size" },
			{ "world_size 1\nroot\nrank 0 host a\n",
			  ":2: expected \"root ADDR\"" },
			{ "world_size 1\nroot a b\nrank 0 host a\n",
			  ":2: expected \"root ADDR\"" },
			{ "world_size 1\nroot a\nroot b\nrank 0 host a\n",
			  ":3: second root" },
			{ "world_size 1\nrank 0 host\n",
			  ":2: expected \"rank R host HOST" },
			{ "world_size 1\nrank 0\n", ":2: expected" },
			{ "world_size 1\nrank 0 node a\n", ":2: expected" },
			{ "world_size 1\nrank 0 host a b\n", ":2: expected" },
			{ "world_size 1\nrank x host a\n", ":2: rank \"x\"" },
			{ "world_size 1\nrank -1 host a\n", ":2: rank \"-1\"" },
			{ "world_size 1\nrank 1024 host a\n", ":2: rank" },
			{ "world_size 2\nrank 0 host a\nrank 0 host a\n"
			  "rank 1 host a\n", ":3: rank 0 listed twice" },
			{ "world_size 3\nrank 0 host a\nrank 2 host a\n",
			  "no entry for rank 1" },
			{ "world_size 2\nrank 0 host a\nrank 1 host a\n"
			  "rank 2 host a\n", ":4: rank 2 is not below "
			  "the world size 2" },
			{ "world_size 1\nranks 0 host a\n",
			  ":2: unknown keyword \"ranks\"" },
			{ "world_size 1\nrank 0 host a\nhost a\n",
			  ":3: unknown keyword" },
		};
		unsigned i, n = 0;

		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			path = write_table(bad[i].text);
			ret = hcomm__rank_table_parse(path, -1, &ri);
			if (ret != -HCOMM_ERR_INVAL ||
			    !strstr(hcomm_errmsg(), path) ||
			    !strstr(hcomm_errmsg(), bad[i].msg)) {
				printf("# case %u: %d \"%s\" (want \"%s\")\n",
				       i, ret, hcomm_errmsg(), bad[i].msg);
				n++;
			}
		}
		ok(!n, "rank table: %u malformed tables rejected with path, "
		   "line and reason", i);
	}

	memset(text, 'x', 140);	/* a 108-byte root name */
	memcpy(text, "world_size 1\nrank 0 host a\nroot ", 32);
	strcpy(text + 140, "\n");
	ret = hcomm__rank_table_parse(write_table(text), -1, &ri);
	ok(ret == -HCOMM_ERR_INVAL && strstr(hcomm_errmsg(), "root address"),
	   "rank table: a root name too long for a socket is rejected");

	ret = hcomm__rank_table_parse("/nonexistent/ranks", -1, &ri);
	ok(ret == -HCOMM_ERR_INVAL && strstr(hcomm_errmsg(),
					     "/nonexistent/ranks") &&
	   hcomm_errno() == ENOENT,
	   "rank table: a missing file is rejected (%s)", hcomm_errmsg());
	ok(hcomm__rank_table_parse(NULL, -1, &ri) == -HCOMM_ERR_INVAL &&
	   hcomm__rank_table_parse("", -1, &ri) == -HCOMM_ERR_INVAL,
	   "rank table: no path rejected");
}

/* Rank tables that name hosts: text fields, JSON (HCCL's shape). */
static void test_rank_table_hosts(void)
{
	struct hcomm_rankinfo ri;
	const char *path;
	int ret;

	path = write_table("world_size 2\n"
			   "rank 0 host node-a.example addr 10.77.0.1 dev rxe0 "
			   "gid 1\n"
			   "rank 1 host node-b.example addr 10.77.0.2 dev rxe1 "
			   "gid 3 dev_ip 10.78.0.2\n");
	memset(&ri, 0, sizeof(ri));
	ret = hcomm__rank_table_parse(path, 1, &ri);
	ok(!ret && ri.size == 2 && !ri.local && ri.tcp_root &&
	   !strncmp(ri.root_addr, "10.77.0.1:", 10) &&
	   !strcmp(ri.host_addr, "10.77.0.2") &&
	   !strcmp(ri.rdma_dev, "rxe1") && ri.gid_index == 3 &&
	   !strcmp(ri.dev_ip, "10.78.0.2"),
	   "rank table: hosts, addr, dev, gid, dev_ip; root at rank 0's "
	   "address (%s)", ret ? hcomm_errmsg() : ri.root_addr);
	{
		struct hcomm_rankinfo r2;
		char copy[256];

		/* the same contents elsewhere: the same job and root port */
		snprintf(copy, sizeof(copy), "%s", path);
		path = write_table("world_size 2\n"
			   "rank 0 host node-a.example addr 10.77.0.1 dev rxe0 "
			   "gid 1\n"
			   "rank 1 host node-b.example addr 10.77.0.2 dev rxe1 "
			   "gid 3 dev_ip 10.78.0.2\n");
		memset(&r2, 0, sizeof(r2));
		ret = hcomm__rank_table_parse(path, 0, &r2);
		ok(!ret && !strcmp(r2.job, ri.job) &&
		   !strcmp(r2.root_addr, ri.root_addr) &&
		   !strcmp(r2.host_addr, "10.77.0.1") && r2.gid_index == 1,
		   "rank table: a copy at another path (%s) is the same job "
		   "(%s) and root", copy, r2.job);
	}

	path = write_table("world_size 2\nroot [fd00::1]:4000\n"
			   "rank 0 host a.example\nrank 1 host b.example\n");
	ret = hcomm__rank_table_parse(path, 0, &ri);
	ok(!ret && ri.tcp_root && !strcmp(ri.root_addr, "[fd00::1]:4000") &&
	   !strcmp(ri.host_addr, "a.example") && ri.gid_index == -1,
	   "rank table: a TCP root line; the host name is the address");

	path = write_table(
		"{\n"
		" \"version\": \"1.0\", \"status\": \"completed\",\n"
		" \"server_count\": \"2\",\n"
		" \"server_list\": [\n"
		"  { \"server_id\": \"node-a\", \"host_ip\": \"10.77.0.1\",\n"
		"    \"device\": [\n"
		"     { \"device_id\": \"0\", \"device_ip\": \"10.77.0.1\",\n"
		"       \"rank_id\": \"0\" },\n"
		"     { \"device_id\": \"1\", \"device_ip\": \"10.77.0.1\",\n"
		"       \"rank_id\": \"1\" } ] },\n"
		"  { \"server_id\": \"node-b\",\n"
		"    \"device\": [\n"
		"     { \"device_id\": \"0\", \"device_ip\": \"10.77.0.2\",\n"
		"       \"rank_id\": 2, \"rdma_dev\": \"rxe0\",\n"
		"       \"gid_index\": 1 },\n"
		"     { \"device_id\": \"1\", \"device_ip\": \"10.77.0.2\",\n"
		"       \"rank_id\": \"3\" } ] } ]\n"
		"}\n");
	memset(&ri, 0, sizeof(ri));
	ret = hcomm__rank_table_parse(path, 2, &ri);
	ok(!ret && ri.size == 4 && !ri.local && ri.tcp_root &&
	   !strncmp(ri.root_addr, "10.77.0.1:", 10) &&
	   !strcmp(ri.host_addr, "10.77.0.2") &&
	   !strcmp(ri.dev_ip, "10.77.0.2") && !strcmp(ri.rdma_dev, "rxe0") &&
	   ri.gid_index == 1,
	   "rank table: JSON of HCCL's shape, 2 servers x 2 devices (%s)",
	   ret ? hcomm_errmsg() : ri.root_addr);

	{
		static const struct { const char *text, *msg; } bad[] = {
			{ "{", "not valid JSON" },
			{ "{ \"server_list\": [] ", "not valid JSON" },
			{ "[]", "JSON is not an object" },
			{ "{ \"a\": 1 }", "no \"server_list\" array" },
			{ "{ \"server_list\": {} }", "no \"server_list\"" },
			{ "{ \"server_list\": [] }", "no device" },
			{ "{ \"server_list\": [ 1 ] }",
			  "server_list[0] is not an object" },
			{ "{ \"server_list\": [ {} ] }",
			  "server_list[0] has no \"server_id\"" },
			{ "{ \"server_list\": [ { \"server_id\": \"a\" } ] }",
			  "has no \"device\" array" },
			{ "{ \"server_list\": [ { \"server_id\": \"a\", "
			  "\"device\": [ {} ] } ] }",
			  "device[0] has no \"rank_id\"" },
			{ "{ \"server_list\": [ { \"server_id\": \"a\", "
			  "\"device\": [ { \"rank_id\": \"x\" } ] } ] }",
			  "rank_id \"x\"" },
			{ "{ \"server_list\": [ { \"server_id\": \"a\", "
			  "\"device\": [ { \"rank_id\": [1] } ] } ] }",
			  "neither a string nor an integer" },
			{ "{ \"server_list\": [ { \"server_id\": \"a\", "
			  "\"device\": [ { \"rank_id\": 0 }, "
			  "{ \"rank_id\": 0 } ] } ] }", "rank 0 listed twice" },
			{ "{ \"server_list\": [ { \"server_id\": \"a\", "
			  "\"device\": [ { \"rank_id\": 1 } ] } ] }",
			  "rank 1 is not below the world size 1" },
			{ "{ \"status\": \"initializing\", \"server_list\": "
			  "[ { \"server_id\": \"a\", "
			  "\"device\": [ { \"rank_id\": 0 } ] } ] }",
			  "not \"completed\"" },
			{ "{ \"server_list\": [ { \"server_id\": \"a\", "
			  "\"device\": [ { \"rank_id\": 0, \"gid_index\": 300 "
			  "} ] } ] }", "gid_index \"300\"" },
			{ "world_size 1\nrank 0 host a gid 256\n",
			  ":2: gid \"256\"" },
			{ "world_size 1\nrank 0 host a color red\n",
			  ":2: unknown field \"color\"" },
			{ "world_size 1\nrank 0 host a addr\n", ":2: expected" },
		};
		unsigned i, n = 0;

		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			path = write_table(bad[i].text);
			ret = hcomm__rank_table_parse(path, 0, &ri);
			if (ret != -HCOMM_ERR_INVAL ||
			    !strstr(hcomm_errmsg(), path) ||
			    !strstr(hcomm_errmsg(), bad[i].msg)) {
				printf("# case %u: %d \"%s\" (want \"%s\")\n",
				       i, ret, hcomm_errmsg(), bad[i].msg);
				n++;
			}
		}
		ok(!n, "rank table: %u malformed JSON and host fields "
		   "rejected with path and reason", i);
	}
}

/* TCP rendezvous addresses. */
static void test_tcp_addr(void)
{
	static const char *const yes[] = {
		"127.0.0.1:1", "host:65535", "tcp:node1:29500",
		"[::1]:80", "[fd00::77:1]:4000", "a.b.example:12",
	};
	static const char *const no[] = {
		"hcomm-0-ppid-12", "name", "host:", "host:0", "host:65536",
		"host:12x", ":80", "::1:80", "[::1]80", "[::1]", "host:-1",
		"unix:my-name",
	};
	struct sockaddr_storage ss;
	unsigned int len, i, n = 0;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!hcomm__is_tcp_addr(yes[i]) && ++n)
			printf("# \"%s\" not taken for TCP\n", yes[i]);
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (hcomm__is_tcp_addr(no[i]) && ++n)
			printf("# \"%s\" taken for TCP\n", no[i]);
	ok(!n, "tcp addr: host:port, [v6]:port, tcp: prefix; names, bare "
	   "v6 and bad ports are not TCP");
	ok(!hcomm__tcp_addr("127.0.0.1:4000", 0, &ss, &len) &&
	   ss.ss_family == AF_INET &&
	   ntohs(((struct sockaddr_in *)&ss)->sin_port) == 4000 &&
	   !hcomm__tcp_addr("[::1]:4001", 0, &ss, &len) &&
	   ss.ss_family == AF_INET6 && !hcomm__tcp_addr("*:4002", 1, &ss,
							 &len),
	   "tcp addr: IPv4, IPv6 and the passive wildcard resolve");
	ok(hcomm__tcp_addr("no-such-host.invalid:1", 0, &ss, &len) ==
	   -HCOMM_ERR_INVAL && strstr(hcomm_errmsg(), "no-such-host") &&
	   hcomm__tcp_addr("x:0", 0, &ss, &len) == -HCOMM_ERR_INVAL &&
	   strstr(hcomm_errmsg(), "1 .. 65535"),
	   "tcp addr: unknown hosts and bad ports are errors naming them");
	ok(hcomm__default_port("job-a") >= 20000 &&
	   hcomm__default_port("job-a") < 40000 &&
	   hcomm__default_port("job-a") == hcomm__default_port("job-a"),
	   "tcp addr: the default port is in 20000 .. 39999 and stable");
}

/* Launches over several hosts. */
static void test_detect_hosts(void)
{
	struct hcomm_rankinfo ri;
	int64_t t0;
	int ret;

	clean_env();
	setenv("OMPI_COMM_WORLD_RANK", "1", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
	t0 = now_ms();
	memset(&ri, 0, sizeof(ri));
	ret = hcomm__rankinfo_detect(NULL, &ri);
	ok(ret == -HCOMM_ERR_INVAL && now_ms() - t0 < 1000 &&
	   strstr(hcomm_errmsg(), "span 2 hosts") &&
	   strstr(hcomm_errmsg(), "OMPI_COMM_WORLD_LOCAL_SIZE") &&
	   strstr(hcomm_errmsg(), "HCOMM_ROOT_ADDR"),
	   "detect: Open MPI over 2 hosts without a rendezvous fails at "
	   "once, saying what to set (%s)", hcomm_errmsg());
	setenv("HCOMM_ROOT_ADDR", "10.77.0.1:29500", 1);
	ret = hcomm__rankinfo_detect(NULL, &ri);
	ok(!ret && ri.tcp_root && !ri.local &&
	   !strcmp(ri.root_addr, "10.77.0.1:29500"),
	   "detect: ... and with HCOMM_ROOT_ADDR=host:port meets over TCP");
	setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
	setenv("HCOMM_ROOT_ADDR", "tcp:127.0.0.1:29501", 1);
	ret = hcomm__rankinfo_detect(NULL, &ri);
	ok(!ret && ri.tcp_root && ri.local &&
	   !strcmp(ri.root_addr, "127.0.0.1:29501"),
	   "detect: one host, a tcp: rendezvous (prefix dropped)");

	clean_env();
	setenv("SLURM_PROCID", "3", 1);
	setenv("SLURM_NTASKS", "4", 1);
	setenv("SLURM_JOB_ID", "77", 1);
	setenv("SLURM_STEP_NUM_NODES", "2", 1);
	setenv("SLURM_STEP_NODELIST", "vm[07-08],x", 1);
	ret = hcomm__rankinfo_detect(NULL, &ri);
	ok(!ret && ri.tcp_root && !ri.local &&
	   !strncmp(ri.root_addr, "vm07:", 5) &&
	   atoi(ri.root_addr + 5) == (int)hcomm__default_port(ri.job),
	   "detect: Slurm over 2 nodes meets at the first node (%s)",
	   ri.root_addr);
	setenv("SLURM_STEP_NODELIST", "[1-2]", 1);
	ok(hcomm__rankinfo_detect(NULL, &ri) == -HCOMM_ERR_INVAL &&
	   strstr(hcomm_errmsg(), "SLURM_STEP_NUM_NODES"),
	   "detect: an unreadable Slurm node list is an error");

	clean_env();
	setenv("HCOMM_RANK", "0", 1);
	setenv("HCOMM_WORLD_SIZE", "2", 1);
	setenv("HCOMM_JOB_ID", "train-7", 1);
	ret = hcomm__rankinfo_detect(NULL, &ri);
	ok(!ret && !strcmp(ri.job, "job-train-7") && !ri.tcp_root &&
	   strstr(ri.root_addr, "job-train-7"),
	   "detect: HCOMM_JOB_ID names the job (%s)", ri.root_addr);
	setenv("HCOMM_JOB_ID", "", 1);
	ok(hcomm__rankinfo_detect(NULL, &ri) == -HCOMM_ERR_INVAL &&
	   strstr(hcomm_errmsg(), "HCOMM_JOB_ID"),
	   "detect: an empty HCOMM_JOB_ID is an error");
	clean_env();
}

static int detect(struct hcomm_rankinfo *ri)
{
	memset(ri, 0xa5, sizeof(*ri));
	return hcomm__rankinfo_detect(NULL, ri);
}

static void test_detect(void)
{
	struct hcomm_rankinfo ri;
	struct hcomm_config cfg;
	char want[128], text[1024], longv[200];
	unsigned uid = geteuid();
	const char *path;
	int ret;

	clean_env();
	ret = detect(&ri);
	snprintf(want, sizeof(want), "hcomm-%u-ppid-%d", uid, (int)getppid());
	ok(!ret && ri.rank == 0 && ri.size == 1 &&
	   ri.launcher == HCOMM_LAUNCH_SINGLE && ri.local == 1 &&
	   !strcmp(ri.root_addr, want),
	   "detect: nothing set -> one rank, rendezvous %s", ri.root_addr);

	setenv("HCOMM_RANK", "2", 1);
	setenv("HCOMM_WORLD_SIZE", "4", 1);
	ret = detect(&ri);
	snprintf(text, sizeof(text), "ppid-%d", (int)getppid());
	ok(!ret && ri.rank == 2 && ri.size == 4 &&
	   ri.launcher == HCOMM_LAUNCH_ENV && ri.local &&
	   !strcmp(ri.root_addr, want) && !strcmp(ri.job, text),
	   "detect: HCOMM_RANK/HCOMM_WORLD_SIZE, job from the parent pid");

	clean_env();
	setenv("OMPI_COMM_WORLD_RANK", "3", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
	setenv("OMPI_MCA_ess_base_jobid", "4242", 1);
	ret = detect(&ri);
	snprintf(want, sizeof(want), "hcomm-%u-ompi-4242", uid);
	ok(!ret && ri.rank == 3 && ri.size == 8 &&
	   ri.launcher == HCOMM_LAUNCH_OMPI && !strcmp(ri.job, "ompi-4242") &&
	   !strcmp(ri.root_addr, want),
	   "detect: Open MPI's variables, job from OMPI_MCA_ess_base_jobid "
	   "(%s)", ri.root_addr);
	unsetenv("OMPI_MCA_ess_base_jobid");
	setenv("OMPI_MCA_orte_ess_jobid", "77", 1);
	ret = detect(&ri);
	ok(!ret && !strcmp(ri.job, "ompi-77"),
	   "detect: job from OMPI_MCA_orte_ess_jobid");

	clean_env();
	setenv("SLURM_PROCID", "0", 1);
	setenv("SLURM_NTASKS", "2", 1);
	setenv("SLURM_JOB_ID", "991", 1);
	setenv("SLURM_STEP_ID", "4", 1);
	ret = detect(&ri);
	snprintf(want, sizeof(want), "hcomm-%u-slurm-991.4", uid);
	ok(!ret && ri.rank == 0 && ri.size == 2 &&
	   ri.launcher == HCOMM_LAUNCH_SLURM && !strcmp(ri.root_addr, want),
	   "detect: Slurm's variables, job SLURM_JOB_ID.SLURM_STEP_ID (%s)",
	   ri.root_addr);
	unsetenv("SLURM_STEP_ID");
	ret = detect(&ri);
	ok(!ret && !strcmp(ri.job, "slurm-991"),
	   "detect: Slurm without a step id");

	clean_env();
	setenv("PMI_RANK", "1", 1);
	setenv("PMI_SIZE", "3", 1);
	setenv("PMI_KVSNAME", "kvs_55_0", 1);
	ret = detect(&ri);
	ok(!ret && ri.rank == 1 && ri.size == 3 &&
	   ri.launcher == HCOMM_LAUNCH_PMI && !strcmp(ri.job, "pmi-kvs_55_0"),
	   "detect: PMI's variables, job from PMI_KVSNAME");
	setenv("PMI_JOBID", "j9", 1);
	ret = detect(&ri);
	ok(!ret && !strcmp(ri.job, "pmi-j9"), "detect: PMI_JOBID before "
	   "PMI_KVSNAME");

	/* Precedence: every launcher set at once. */
	clean_env();
	setenv("HCOMM_RANK", "1", 1);
	setenv("HCOMM_WORLD_SIZE", "2", 1);
	setenv("OMPI_COMM_WORLD_RANK", "2", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
	setenv("SLURM_PROCID", "3", 1);
	setenv("SLURM_NTASKS", "4", 1);
	setenv("PMI_RANK", "4", 1);
	setenv("PMI_SIZE", "5", 1);
	setenv("SLURM_JOB_ID", "12", 1);
	setenv("PMI_JOBID", "p", 1);
	setenv("OMPI_MCA_ess_base_jobid", "o", 1);
	{
		int r1, r2, r3, r4;
		int ok1, ok2, ok3, ok4;

		r1 = detect(&ri);
		ok1 = !r1 && ri.launcher == HCOMM_LAUNCH_ENV && ri.rank == 1 &&
		      ri.size == 2 && !strcmp(ri.job, "ompi-o");
		unsetenv("HCOMM_RANK");
		unsetenv("HCOMM_WORLD_SIZE");
		r2 = detect(&ri);
		ok2 = !r2 && ri.launcher == HCOMM_LAUNCH_OMPI && ri.rank == 2 &&
		      ri.size == 3;
		unsetenv("OMPI_COMM_WORLD_RANK");
		unsetenv("OMPI_COMM_WORLD_SIZE");
		unsetenv("OMPI_MCA_ess_base_jobid");
		r3 = detect(&ri);
		ok3 = !r3 && ri.launcher == HCOMM_LAUNCH_SLURM &&
		      ri.rank == 3 && ri.size == 4 &&
		      !strcmp(ri.job, "slurm-12");
		unsetenv("SLURM_PROCID");
		unsetenv("SLURM_NTASKS");
		unsetenv("SLURM_JOB_ID");
		r4 = detect(&ri);
		ok4 = !r4 && ri.launcher == HCOMM_LAUNCH_PMI && ri.rank == 4 &&
		      ri.size == 5 && !strcmp(ri.job, "pmi-p");
		ok(ok1 && ok2 && ok3 && ok4, "detect: precedence HCOMM > "
		   "Open MPI > Slurm > PMI, job ids Open MPI > Slurm > PMI");
	}

	/* HCOMM_ROOT_ADDR */
	clean_env();
	setenv("HCOMM_RANK", "0", 1);
	setenv("HCOMM_WORLD_SIZE", "2", 1);
	setenv("HCOMM_ROOT_ADDR", "my-job", 1);
	ret = detect(&ri);
	ok(!ret && !strcmp(ri.root_addr, "my-job") && !ri.job[0],
	   "detect: HCOMM_ROOT_ADDR names the rendezvous (no job: \"\")");
	setenv("SLURM_JOB_ID", "5", 1);
	ret = detect(&ri);
	ok(!ret && !strcmp(ri.root_addr, "my-job") &&
	   !strcmp(ri.job, "slurm-5"),
	   "detect: HCOMM_ROOT_ADDR with a launcher's job id");
	memset(longv, 'a', 100);
	longv[100] = 0;
	setenv("HCOMM_ROOT_ADDR", longv, 1);
	ret = detect(&ri);
	ok(ret == -HCOMM_ERR_INVAL && strstr(hcomm_errmsg(),
					     "HCOMM_ROOT_ADDR"),
	   "detect: HCOMM_ROOT_ADDR too long rejected");
	setenv("HCOMM_ROOT_ADDR", "", 1);
	ok(detect(&ri) == -HCOMM_ERR_INVAL, "detect: empty HCOMM_ROOT_ADDR "
	   "rejected");

	/* A long job id still gives a name that fits. */
	clean_env();
	memset(longv, 'k', 199);
	longv[199] = 0;
	setenv("PMI_RANK", "0", 1);
	setenv("PMI_SIZE", "2", 1);
	setenv("PMI_KVSNAME", longv, 1);
	ret = detect(&ri);
	ok(!ret && strlen(ri.job) < sizeof(ri.job) &&
	   strlen(ri.root_addr) < sizeof(ri.root_addr) &&
	   !strncmp(ri.root_addr, "hcomm-", 6),
	   "detect: a 199-byte job id is hashed to fit (%s)", ri.root_addr);
	setenv("PMI_KVSNAME", "kvs_1_0", 1);
	setenv("PMI_JOBID", "", 1);
	ret = detect(&ri);
	ok(!ret && !strcmp(ri.job, "pmi-kvs_1_0"),
	   "detect: empty job variables are skipped");

	/* Inconsistent or garbage values. */
	{
		static const struct { const char *env[4], *name; } bad[] = {
			{ { "HCOMM_RANK", "4", "HCOMM_WORLD_SIZE", "4" },
			  "HCOMM_RANK=4 is not below HCOMM_WORLD_SIZE=4" },
			{ { "HCOMM_RANK", "1" }, "HCOMM_WORLD_SIZE" },
			{ { "HCOMM_WORLD_SIZE", "2" }, "HCOMM_RANK" },
			{ { "HCOMM_RANK", "0", "HCOMM_WORLD_SIZE", "0" },
			  "HCOMM_WORLD_SIZE=\"0\"" },
			{ { "HCOMM_RANK", "0", "HCOMM_WORLD_SIZE", "1025" },
			  "HCOMM_WORLD_SIZE=\"1025\"" },
			{ { "HCOMM_RANK", "-1", "HCOMM_WORLD_SIZE", "2" },
			  "HCOMM_RANK=\"-1\"" },
			{ { "HCOMM_RANK", "1x", "HCOMM_WORLD_SIZE", "2" },
			  "HCOMM_RANK=\"1x\"" },
			{ { "HCOMM_RANK", "", "HCOMM_WORLD_SIZE", "2" },
			  "HCOMM_RANK=\"\"" },
			{ { "HCOMM_RANK", "0", "HCOMM_WORLD_SIZE", " 2" },
			  "HCOMM_WORLD_SIZE" },
			{ { "OMPI_COMM_WORLD_RANK", "0",
			    "OMPI_COMM_WORLD_SIZE", "two" },
			  "OMPI_COMM_WORLD_SIZE=\"two\"" },
			{ { "OMPI_COMM_WORLD_RANK", "0" },
			  "OMPI_COMM_WORLD_SIZE" },
			{ { "SLURM_PROCID", "3", "SLURM_NTASKS", "2" },
			  "SLURM_PROCID=3 is not below SLURM_NTASKS=2" },
			{ { "SLURM_NTASKS", "2" }, "SLURM_PROCID" },
			{ { "PMI_RANK", "99999999999", "PMI_SIZE", "2" },
			  "PMI_RANK" },
			{ { "PMI_SIZE", "2" }, "PMI_RANK" },
		};
		unsigned i, n = 0;

		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			clean_env();
			setenv(bad[i].env[0], bad[i].env[1], 1);
			if (bad[i].env[2])
				setenv(bad[i].env[2], bad[i].env[3], 1);
			ret = detect(&ri);
			if (ret != -HCOMM_ERR_INVAL ||
			    !strstr(hcomm_errmsg(), bad[i].name)) {
				printf("# case %u: %d \"%s\"\n", i, ret,
				       hcomm_errmsg());
				n++;
			}
		}
		ok(!n, "detect: %u inconsistent or garbage settings rejected, "
		   "naming the variable", i);
	}

	/* A rank table, with the rank from the environment. */
	clean_env();
	snprintf(text, sizeof(text), "world_size 3\nrank 0 host %s\n"
		 "rank 1 host localhost\nrank 2 host %s\n", host, host);
	path = write_table(text);
	hcomm_config_default(&cfg);
	cfg.rank_table = path;
	setenv("HCOMM_RANK", "2", 1);
	memset(&ri, 0, sizeof(ri));
	ret = hcomm__rankinfo_detect(&cfg, &ri);
	ok(!ret && ri.launcher == HCOMM_LAUNCH_RANK_TABLE && ri.rank == 2 &&
	   ri.size == 3 && ri.local && !strncmp(ri.job, "table-", 6) &&
	   !strncmp(ri.root_addr, "hcomm-", 6) &&
	   strstr(ri.root_addr, ri.job),
	   "detect: rank table (cfg), rank from HCOMM_RANK, job from the "
	   "table (%s)", ri.root_addr);
	setenv("HCOMM_WORLD_SIZE", "4", 1);
	ret = hcomm__rankinfo_detect(&cfg, &ri);
	ok(ret == -HCOMM_ERR_INVAL && strstr(hcomm_errmsg(),
					     "HCOMM_WORLD_SIZE=4") &&
	   strstr(hcomm_errmsg(), "world size 3"),
	   "detect: rank table against another world size rejected (%s)",
	   hcomm_errmsg());
	setenv("HCOMM_WORLD_SIZE", "3", 1);
	setenv("HCOMM_RANK", "3", 1);
	ret = hcomm__rankinfo_detect(&cfg, &ri);
	ok(ret == -HCOMM_ERR_INVAL && strstr(hcomm_errmsg(), "HCOMM_RANK"),
	   "detect: rank beyond the table rejected");
	clean_env();
	ret = hcomm__rankinfo_detect(&cfg, &ri);
	ok(ret == -HCOMM_ERR_INVAL && strstr(hcomm_errmsg(), "HCOMM_RANK"),
	   "detect: rank table without a rank in the environment rejected");
	setenv("SLURM_PROCID", "1", 1);
	setenv("SLURM_NTASKS", "3", 1);
	setenv("SLURM_JOB_ID", "31", 1);
	ret = hcomm__rankinfo_detect(&cfg, &ri);
	ok(!ret && ri.launcher == HCOMM_LAUNCH_RANK_TABLE && ri.rank == 1 &&
	   !strcmp(ri.job, "slurm-31"),
	   "detect: rank table with Slurm's rank and job id");

	clean_env();
	snprintf(text, sizeof(text), "world_size 2\nroot table-root\n"
		 "rank 0 host %s\nrank 1 host elsewhere\n", host);
	setenv("HCOMM_RANK_TABLE", write_table(text), 1);
	setenv("HCOMM_RANK", "0", 1);
	ret = detect(&ri);
	ok(!ret && ri.launcher == HCOMM_LAUNCH_RANK_TABLE && !ri.local &&
	   !strcmp(ri.root_addr, "table-root"),
	   "detect: rank table from HCOMM_RANK_TABLE (cfg NULL), root line, "
	   "a remote host");
	setenv("HCOMM_ROOT_ADDR", "env-root", 1);
	ret = detect(&ri);
	ok(!ret && !strcmp(ri.root_addr, "env-root"),
	   "detect: HCOMM_ROOT_ADDR before the table's root line");
	clean_env();
	cfg.rank_table = "/nonexistent/table";
	setenv("HCOMM_RANK", "0", 1);
	ok(hcomm__rankinfo_detect(&cfg, &ri) == -HCOMM_ERR_INVAL,
	   "detect: a missing rank table fails");
	ok(hcomm__rankinfo_detect(&cfg, NULL) == -HCOMM_ERR_INVAL,
	   "detect: NULL rankinfo rejected");
	clean_env();
}

/* ------------------------------------------------------------------ */
/* MPSC queue and event count                                         */
/* ------------------------------------------------------------------ */

struct item {
	struct hcomm_mpsc_node node;
	uint32_t producer;
	uint32_t seq;
};

#define ITEM(n) ((struct item *)((char *)(n) - offsetof(struct item, node)))

static void test_mpsc_basic(void)
{
	static struct hcomm_mpsc q;
	struct item it[3];
	struct hcomm_mpsc_node *n;
	int i, good = 1, rounds;

	hcomm_mpsc_init(&q);
	ok(hcomm_mpsc_empty(&q) && !hcomm_mpsc_pop(&q),
	   "mpsc: a new queue is empty");
	for (i = 0; i < 3; i++) {
		it[i].seq = i;
		hcomm_mpsc_push(&q, &it[i].node);
	}
	good = !hcomm_mpsc_empty(&q);
	for (i = 0; i < 3; i++) {
		n = hcomm_mpsc_pop(&q);
		good &= n == &it[i].node;
	}
	ok(good && !hcomm_mpsc_pop(&q) && hcomm_mpsc_empty(&q),
	   "mpsc: FIFO order, empty after the last pop");
	/* One at a time: the stub goes in and out every time. */
	for (rounds = 0, good = 1; rounds < 1000; rounds++) {
		hcomm_mpsc_push(&q, &it[rounds % 3].node);
		good &= !hcomm_mpsc_empty(&q);
		good &= hcomm_mpsc_pop(&q) == &it[rounds % 3].node;
		good &= hcomm_mpsc_empty(&q) && !hcomm_mpsc_pop(&q);
	}
	ok(good, "mpsc: 1000 single push/pop rounds through the stub");
}

#define PER_PRODUCER	1000000u

/*
 * Two producer threads of PER_PRODUCER items each and a consumer thread:
 * the linked queue alone, or the ring in front of it as the callback
 * dispatcher uses them (hcomm_comm.c).
 */
struct mpsc_run {
	struct hcomm_mpsc q;
	struct hcomm_ec ec;
	struct hcomm_ring *ring;	/* NULL: the queue alone */
	uint64_t spill;			/* items in q while the ring is used
					 * (__atomic builtins) */
	struct hcomm_rq_cons k;		/* the consumer's side of both */
	struct item *items[2];
	atomic_int start;
	/* consumer's findings */
	uint64_t received, sum, dups, order_err, sleeps, via_ring, via_q;
	int64_t deadline;
	unsigned char *seen[2];
	int64_t next[2];
};

/* Zeroed memory aligned for the queue's cache-line members. */
static void *zalloc_aligned(size_t size)
{
	size_t n = (size + HCOMM_CACHELINE - 1) & ~(size_t)(HCOMM_CACHELINE - 1);
	void *p = aligned_alloc(HCOMM_CACHELINE, n);

	if (p)
		memset(p, 0, n);
	return p;
}

struct prod_arg {
	struct mpsc_run *r;
	unsigned p;
};

/*
 * Item i of producer p, pushed as the dispatcher's producers do: to the
 * ring unless it is full or the queue holds some, else to the queue.
 */
static void *producer(void *arg)
{
	struct mpsc_run *r = ((struct prod_arg *)arg)->r;
	unsigned p = ((struct prod_arg *)arg)->p;
	struct item *it = r->items[p];
	struct hcomm_ring_item ri = { NULL, NULL, NULL };
	uint32_t i;

	while (!atomic_load(&r->start))
		;
	for (i = 0; i < PER_PRODUCER; i++) {
		it[i].producer = p;
		it[i].seq = i;
		ri.a = &it[i];
		if (r->ring)
			hcomm_rq_push(r->ring, &r->q, &r->spill, &ri,
				      &it[i].node);
		else
			hcomm_mpsc_push(&r->q, &it[i].node);
		hcomm_ec_notify(&r->ec);
	}
	return NULL;
}

/* The consumer's check of one item: once each, in its producer's order. */
static void take(struct mpsc_run *r, const struct item *it)
{
	r->received++;
	if (it->producer > 1 || it->seq >= PER_PRODUCER) {
		r->order_err++;
		return;
	}
	if (r->seen[it->producer][it->seq]++)
		r->dups++;
	if ((int64_t)it->seq != r->next[it->producer])
		r->order_err++;
	r->next[it->producer] = (int64_t)it->seq + 1;
	r->sum += ((uint64_t)it->producer << 32) + it->seq + 1;
}

/* 1 when nothing is in the ring (if any) or the queue. */
static int run_empty(struct mpsc_run *r)
{
	return r->ring ? hcomm_rq_empty(&r->k, r->ring, &r->q) :
	       hcomm_mpsc_empty(&r->q);
}

/*
 * The ring first, then the queue, as the dispatcher takes them
 * (hcomm_rq_pop); sleeps on the event count.  With the ring it pauses now
 * and then so that the ring fills and the queue is used too.
 */
static void *consumer(void *arg)
{
	struct mpsc_run *r = arg;
	struct hcomm_ring_item ri;
	struct hcomm_mpsc_node *n = NULL;
	uint32_t key;
	int got;

	atomic_store(&r->start, 1);
	while (r->received < 2ULL * PER_PRODUCER && now_ms() < r->deadline) {
		if (r->ring && r->received % 100000 == 99999)
			usleep(2000);	/* let the ring fill */
		if (r->ring) {
			got = hcomm_rq_pop(&r->k, r->ring, &r->q, &r->spill,
					   &ri, &n);
			if (got == 1) {
				r->via_ring++;
				take(r, ri.a);
				continue;
			}
			if (got == 2) {
				r->via_q++;
				take(r, ITEM(n));
				continue;
			}
			if (got < 0)
				continue;	/* a slot being filled */
		} else if ((n = hcomm_mpsc_pop(&r->q))) {
			r->via_q++;
			take(r, ITEM(n));
			continue;
		}
		key = hcomm_ec_prepare(&r->ec);
		if (!run_empty(r)) {
			sched_yield();	/* a push is half done */
			continue;
		}
		r->sleeps++;
		hcomm_ec_wait(&r->ec, key, 1000);
	}
	return NULL;
}

/*
 * Run the two producers and the consumer; 1 when every item came once, in
 * its producer's order, with the right checksum and nothing left.
 */
static int run_threads(struct mpsc_run *r, int64_t limit_ms, int64_t *ms)
{
	struct prod_arg parg[2];
	pthread_t c, p[2];
	uint64_t expect = 0;
	int64_t t0;
	unsigned i;

	hcomm_mpsc_init(&r->q);
	hcomm_ec_init(&r->ec);
	r->spill = 0;
	r->k.held = NULL;
	for (i = 0; i < 2; i++) {
		r->items[i] = calloc(PER_PRODUCER, sizeof(struct item));
		r->seen[i] = calloc(PER_PRODUCER, 1);
		if (!r->items[i] || !r->seen[i])
			return 0;
	}
	t0 = now_ms();
	r->deadline = t0 + limit_ms;
	for (i = 0; i < 2; i++) {
		parg[i].r = r;
		parg[i].p = i;
		pthread_create(&p[i], NULL, producer, &parg[i]);
	}
	pthread_create(&c, NULL, consumer, r);
	pthread_join(p[0], NULL);
	pthread_join(p[1], NULL);
	pthread_join(c, NULL);
	*ms = now_ms() - t0;
	for (i = 0; i < PER_PRODUCER; i++)
		expect += (uint64_t)i + 1 + ((uint64_t)1 << 32) + i + 1;
	return r->received == 2ULL * PER_PRODUCER && !r->dups &&
	       !r->order_err && r->sum == expect && run_empty(r) &&
	       !hcomm_mpsc_pop(&r->q) && !__atomic_load_n(&r->spill,
							  __ATOMIC_ACQUIRE);
}

static void run_free(struct mpsc_run *r)
{
	unsigned i;

	for (i = 0; i < 2; i++) {
		free(r->items[i]);
		free(r->seen[i]);
	}
	free(r->ring);
	free(r);
}

static void test_mpsc_threads(void)
{
	struct mpsc_run *r = zalloc_aligned(sizeof(*r));
	int64_t ms = 0;
	int good;

	if (!r) {
		ok(0, "mpsc: allocation");
		return;
	}
	good = run_threads(r, 15000, &ms);
	ok(good, "mpsc: 2 producers x %u items, each delivered once in "
	   "per-producer order, checksum matches (%llu received, %llu dups, "
	   "%llu out of order, %llu sleeps, %lld ms)", PER_PRODUCER,
	   (unsigned long long)r->received, (unsigned long long)r->dups,
	   (unsigned long long)r->order_err, (unsigned long long)r->sleeps,
	   (long long)ms);
	run_free(r);
}

/*
 * The bounded ring in front of the queue: full after HCOMM_RING_SLOTS
 * pushes, FIFO, wraps around.
 */
static void test_ring_basic(void)
{
	struct hcomm_ring *r = hcomm_ring_new();
	struct hcomm_ring_item it;
	uintptr_t i;
	int good = 1;

	if (!r) {
		ok(0, "ring: allocation");
		return;
	}
	ok(((uintptr_t)r & (HCOMM_CACHELINE - 1)) == 0 &&
	   hcomm_ring_empty(r) && !hcomm_ring_pop(r, &it),
	   "ring: a new ring is empty, on a cache-line boundary");
	for (i = 0; i < HCOMM_RING_SLOTS; i++) {
		it.a = (void *)(i + 1);
		it.fn = NULL;
		it.b = (void *)(i + 2);
		good &= !hcomm_ring_push(r, &it);
	}
	it.a = NULL;
	ok(good && hcomm_ring_push(r, &it) == -1 && !hcomm_ring_empty(r),
	   "ring: %d pushes fit, the next one fails", HCOMM_RING_SLOTS);
	for (i = 0, good = 1; i < HCOMM_RING_SLOTS; i++)
		good &= hcomm_ring_pop(r, &it) && it.a == (void *)(i + 1) &&
			it.b == (void *)(i + 2);
	ok(good && hcomm_ring_empty(r) && !hcomm_ring_pop(r, &it),
	   "ring: FIFO order, empty after the last pop");
	for (i = 0, good = 1; i < 5 * HCOMM_RING_SLOTS + 3; i++) {
		it.a = (void *)i;
		good &= !hcomm_ring_push(r, &it) && !hcomm_ring_empty(r) &&
			hcomm_ring_pop(r, &it) && it.a == (void *)i &&
			hcomm_ring_empty(r);
	}
	ok(good, "ring: %d single push/pop rounds around the ring",
	   5 * HCOMM_RING_SLOTS + 3);
	free(r);
}

/*
 * What the threads test below caught once in about 10^7 items under TSan
 * (2026-12-07): a producer has claimed ring slot 0 and not filled it yet,
 * while another fills slots 1 .. 255 and spills its next item to the
 * queue.  That item must wait for slot 0 and the 255 items behind it (its
 * producer's earlier ones); taking the queue when the ring's next slot is
 * not full gave it first.
 */
static void test_rq_slot_filling(void)
{
	struct hcomm_ring *r = hcomm_ring_new();
	struct item *items = calloc(HCOMM_RING_SLOTS, sizeof(*items));
	struct item other = { .producer = 0, .seq = 0 };
	struct hcomm_ring_item ri = { NULL, NULL, NULL };
	struct hcomm_rq_cons k = { NULL, 0 };
	struct hcomm_mpsc_node *n = NULL;
	struct hcomm_mpsc q;
	uint64_t spill = 0, pos;
	int got, first, good = 1;
	unsigned int i;

	if (!r || !items) {
		ok(0, "ring + queue: allocation");
		free(r);
		free(items);
		return;
	}
	hcomm_mpsc_init(&q);
	/* what hcomm_ring_push() does before it fills the slot */
	pos = atomic_fetch_add(&r->enq, 1);
	for (i = 0; i < HCOMM_RING_SLOTS; i++) {
		items[i].producer = 1;
		items[i].seq = i;
		ri.a = &items[i];
		hcomm_rq_push(r, &q, &spill, &ri, &items[i].node);
	}
	first = hcomm_rq_pop(&k, r, &q, &spill, &ri, &n);
	good &= first == -1 && !hcomm_rq_empty(&k, r, &q) && spill == 1;
	/* the claimant fills slot 0 */
	r->slot[0].it.a = &other;
	atomic_store(&r->slot[0].seq, pos + 1);
	good &= hcomm_rq_pop(&k, r, &q, &spill, &ri, &n) == 1 &&
		ri.a == &other;
	for (i = 0; good && i + 1 < HCOMM_RING_SLOTS; i++)
		good &= hcomm_rq_pop(&k, r, &q, &spill, &ri, &n) == 1 &&
			ri.a == &items[i];
	got = hcomm_rq_pop(&k, r, &q, &spill, &ri, &n);
	good &= got == 2 && ITEM(n) == &items[HCOMM_RING_SLOTS - 1] &&
		!spill && hcomm_rq_pop(&k, r, &q, &spill, &ri, &n) == 0 &&
		hcomm_rq_empty(&k, r, &q);
	ok(good, "ring + queue: a node spilled behind a slot being filled "
	   "waits for it and the %d items after it (first pop %d: -1 is "
	   "wait; 2 would be the node, out of order)", HCOMM_RING_SLOTS - 1,
	   first);
	free(items);
	free(r);
}

static void test_ring_threads(void)
{
	struct mpsc_run *r = zalloc_aligned(sizeof(*r));
	int64_t ms = 0;
	int good;

	if (!r || !(r->ring = hcomm_ring_new())) {
		ok(0, "ring: allocation");
		free(r);
		return;
	}
	good = run_threads(r, 30000, &ms);
	ok(good && r->via_ring && r->via_q,
	   "ring + queue: 2 producers x %u items, each delivered once in "
	   "per-producer order, checksum matches, both paths used (%llu "
	   "received: %llu by the ring, %llu by the queue; %llu dups, %llu "
	   "out of order, %llu sleeps, %lld ms)", PER_PRODUCER,
	   (unsigned long long)r->received, (unsigned long long)r->via_ring,
	   (unsigned long long)r->via_q, (unsigned long long)r->dups,
	   (unsigned long long)r->order_err, (unsigned long long)r->sleeps,
	   (long long)ms);
	run_free(r);
}

/* A consumer that sleeps once and reports how long it slept. */
struct sleeper {
	struct hcomm_mpsc q;
	struct hcomm_ec ec;
	atomic_int waiting;
	int64_t slept_ms;
	int got;
};

static void *sleeper_fn(void *arg)
{
	struct sleeper *s = arg;
	int64_t t0 = now_ms();

	for (;;) {
		uint32_t key;

		if (hcomm_mpsc_pop(&s->q)) {
			s->got = 1;
			break;
		}
		key = hcomm_ec_prepare(&s->ec);
		if (!hcomm_mpsc_empty(&s->q))
			continue;
		atomic_store(&s->waiting, 1);
		hcomm_ec_wait(&s->ec, key, 5000);
		if (now_ms() - t0 > 5000)
			break;
	}
	s->slept_ms = now_ms() - t0;
	return NULL;
}

static void test_ec_basic(void)
{
	static struct sleeper s;
	struct hcomm_mpsc_node node;
	pthread_t t;
	uint32_t key, w;
	int64_t t0;

	hcomm_ec_init(&s.ec);
	w = atomic_load(&s.ec.word);
	hcomm_ec_notify(&s.ec);
	ok(atomic_load(&s.ec.word) == w,
	   "ec: notify without a waiter changes nothing (no system call)");

	key = hcomm_ec_prepare(&s.ec);
	ok(key & HCOMM_EC_WAITING, "ec: prepare marks the consumer waiting");
	hcomm_ec_notify(&s.ec);
	ok(!(atomic_load(&s.ec.word) & HCOMM_EC_WAITING) &&
	   atomic_load(&s.ec.word) != (key & ~HCOMM_EC_WAITING),
	   "ec: notify after prepare bumps the key and clears the flag");
	t0 = now_ms();
	hcomm_ec_wait(&s.ec, key, 5000);
	ok(now_ms() - t0 < 1000, "ec: wait on a stale key returns at once");

	key = hcomm_ec_prepare(&s.ec);
	t0 = now_ms();
	hcomm_ec_wait(&s.ec, key, 50);
	t0 = now_ms() - t0;
	ok(t0 >= 45 && t0 < 2000 &&
	   !(atomic_load(&s.ec.word) & HCOMM_EC_WAITING),
	   "ec: wait times out (%lld ms) and takes the flag back",
	   (long long)t0);
	key = hcomm_ec_prepare(&s.ec);
	t0 = now_ms();
	hcomm_ec_wait(&s.ec, key, 0);
	ok(now_ms() - t0 < 100, "ec: wait with timeout 0 does not sleep");

	/* A sleeping consumer is woken by a push. */
	hcomm_mpsc_init(&s.q);
	hcomm_ec_init(&s.ec);
	atomic_store(&s.waiting, 0);
	s.got = 0;
	pthread_create(&t, NULL, sleeper_fn, &s);
	while (!atomic_load(&s.waiting))
		sleep_ms(1);
	sleep_ms(50);		/* let it reach FUTEX_WAIT */
	hcomm_mpsc_push(&s.q, &node);
	hcomm_ec_notify(&s.ec);
	pthread_join(t, NULL);
	ok(s.got && s.slept_ms < 2000,
	   "ec: a sleeping consumer is woken by push+notify (after %lld ms)",
	   (long long)s.slept_ms);
}

/*
 * Ping-pong: each side pushes one item and notifies, then sleeps on its
 * own queue until the other answers; a lost wakeup shows as a wait that
 * ran into its 2 s timeout.
 */
#define PINGPONG_ROUNDS	20000

struct side {
	struct hcomm_mpsc q;
	struct hcomm_ec ec;
};

struct pingpong {
	struct side side[2];
	struct item items[2][PINGPONG_ROUNDS];
	atomic_int stalls;
	int bad;
};

static void pp_wait(struct pingpong *pp, int me, uint32_t seq)
{
	struct side *s = &pp->side[me];

	for (;;) {
		struct hcomm_mpsc_node *n = hcomm_mpsc_pop(&s->q);
		uint32_t key;
		int64_t t0;

		if (n) {
			if (ITEM(n)->seq != seq)
				pp->bad = 1;
			return;
		}
		key = hcomm_ec_prepare(&s->ec);
		if (!hcomm_mpsc_empty(&s->q)) {
			sched_yield();
			continue;
		}
		t0 = now_ms();
		hcomm_ec_wait(&s->ec, key, 2000);
		if (now_ms() - t0 >= 1900) {
			atomic_fetch_add(&pp->stalls, 1);
			if (atomic_load(&pp->stalls) > 2)
				return;	/* give up */
		}
	}
}

static void pp_send(struct pingpong *pp, int me, uint32_t seq)
{
	struct side *peer = &pp->side[!me];
	struct item *it = &pp->items[me][seq];

	it->seq = seq;
	hcomm_mpsc_push(&peer->q, &it->node);
	hcomm_ec_notify(&peer->ec);
}

static void *pong_fn(void *arg)
{
	struct pingpong *pp = arg;
	uint32_t i;

	for (i = 0; i < PINGPONG_ROUNDS && atomic_load(&pp->stalls) <= 2;
	     i++) {
		pp_wait(pp, 1, i);
		pp_send(pp, 1, i);
	}
	return NULL;
}

static void test_ec_stress(void)
{
	struct pingpong *pp = zalloc_aligned(sizeof(*pp));
	pthread_t t;
	int64_t t0 = now_ms();
	uint32_t i;

	if (!pp) {
		ok(0, "ec: allocation");
		return;
	}
	for (i = 0; i < 2; i++) {
		hcomm_mpsc_init(&pp->side[i].q);
		hcomm_ec_init(&pp->side[i].ec);
	}
	pthread_create(&t, NULL, pong_fn, pp);
	for (i = 0; i < PINGPONG_ROUNDS && atomic_load(&pp->stalls) <= 2;
	     i++) {
		pp_send(pp, 0, i);
		pp_wait(pp, 0, i);
	}
	pthread_join(t, NULL);
	ok(!atomic_load(&pp->stalls) && !pp->bad && i == PINGPONG_ROUNDS,
	   "ec: %u ping-pong rounds between two sleeping threads, no lost "
	   "wakeup (%lld ms)", i, (long long)(now_ms() - t0));
	free(pp);
}

/* ------------------------------------------------------------------ */
/* Transport choice                                                   */
/* ------------------------------------------------------------------ */

static struct hcomm_link lk(double lat, double bw, uint64_t err)
{
	return (struct hcomm_link){ .usable = 1, .probed = 1, .lat_us = lat,
				    .bw_mbps = bw, .errors = err };
}

static void test_route(void)
{
	struct hcomm_link l[HCOMM_XP_MAX];
	struct hcomm_probe_budget b;
	struct hcomm_route rt;
	double v[5] = { 5, 1, 4, 2, 3 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int forced;

	/* rdma: 1400 us, 10 MB/s; tcp: 900 us, 110 MB/s (rxe under TCG) */
	memset(l, 0, sizeof(l));
	l[HCOMM_XP_RDMA] = lk(1400, 10, 0);
	l[HCOMM_XP_TCP] = lk(900, 110, 0);
	hcomm__route_choose(l, -1, &rt);
	ok(rt.n == 1 && rt.xp[0] == HCOMM_XP_TCP &&
	   rt.upto[0] == UINT64_MAX && hcomm__route_xp(&rt, 8) ==
	   HCOMM_XP_TCP && hcomm__route_xp(&rt, 1 << 26) == HCOMM_XP_TCP,
	   "route: tcp faster at every size is tcp for every size (%s)",
	   rt.why);

	/* tcp throttled by tc: 2000 us, 2 MB/s */
	l[HCOMM_XP_TCP] = lk(2000, 2, 0);
	hcomm__route_choose(l, -1, &rt);
	ok(rt.n == 1 && rt.xp[0] == HCOMM_XP_RDMA,
	   "route: rdma faster at every size is rdma");

	/* crossing: tcp 100 us 100 MB/s, rdma 300 us 1000 MB/s:
	 * 100 + s/100 = 300 + s/1000 at s = 200 / (0.01 - 0.001) = 22222.2 */
	l[HCOMM_XP_TCP] = lk(100, 100, 0);
	l[HCOMM_XP_RDMA] = lk(300, 1000, 0);
	hcomm__route_choose(l, -1, &rt);
	ok(rt.n == 2 && rt.xp[0] == HCOMM_XP_TCP && rt.upto[0] == 22223 &&
	   rt.xp[1] == HCOMM_XP_RDMA && rt.upto[1] == UINT64_MAX &&
	   hcomm__route_xp(&rt, 22222) == HCOMM_XP_TCP &&
	   hcomm__route_xp(&rt, 22223) == HCOMM_XP_RDMA,
	   "route: a crossing at 22222.2 bytes splits the sizes there "
	   "(%llu)", (unsigned long long)rt.upto[0]);

	/* three lines: kernel best small, rdma middle, tcp never */
	l[HCOMM_XP_KERNEL] = lk(10, 50, 0);
	l[HCOMM_XP_TCP] = lk(100, 20, 0);
	hcomm__route_choose(l, -1, &rt);
	ok(rt.n == 2 && rt.xp[0] == HCOMM_XP_KERNEL &&
	   rt.xp[1] == HCOMM_XP_RDMA,
	   "route: a line above the envelope everywhere gets no range");

	/* errors: a dirty link is passed over while a clean one exists */
	memset(l, 0, sizeof(l));
	l[HCOMM_XP_RDMA] = lk(10, 1000, 3);
	l[HCOMM_XP_TCP] = lk(900, 110, 0);
	hcomm__route_choose(l, -1, &rt);
	ok(rt.n == 1 && rt.xp[0] == HCOMM_XP_TCP && strstr(rt.why, "rdma"),
	   "route: a link with probe errors is passed over (%s)", rt.why);
	l[HCOMM_XP_TCP].usable = 0;
	hcomm__route_choose(l, -1, &rt);
	ok(rt.n == 1 && rt.xp[0] == HCOMM_XP_RDMA,
	   "route: ... unless it is the only one");

	/* not probed: preference order kernel, rdma, tcp */
	memset(l, 0, sizeof(l));
	l[HCOMM_XP_TCP].usable = 1;
	l[HCOMM_XP_RDMA].usable = 1;
	hcomm__route_choose(l, -1, &rt);
	ok(rt.n == 1 && rt.xp[0] == HCOMM_XP_RDMA &&
	   strstr(rt.why, "not probed"),
	   "route: without measurements the preference order");
	hcomm__route_choose(l, HCOMM_XP_TCP, &rt);
	ok(rt.n == 1 && rt.xp[0] == HCOMM_XP_TCP &&
	   strstr(rt.why, "HCOMM_TRANSPORT=tcp"),
	   "route: a forced transport for every size");
	hcomm__route_choose(l, HCOMM_XP_KERNEL, &rt);
	ok(rt.n == 0 && hcomm__route_xp(&rt, 1) == -1 &&
	   strstr(rt.why, "does not reach"),
	   "route: a forced transport that does not reach the peer: none");
	memset(l, 0, sizeof(l));
	hcomm__route_choose(l, -1, &rt);
	ok(rt.n == 0 && strstr(rt.why, "no transport"),
	   "route: no usable link: no route");

	/* the table, as text and JSON */
	l[HCOMM_XP_TCP] = lk(100, 100, 0);
	l[HCOMM_XP_RDMA] = lk(300, 1000, 0);
	hcomm__route_choose(l, -1, &rt);
	f = open_memstream(&buf, &len);
	hcomm__route_print(f, 0, 3, l, &rt);
	hcomm__route_json(f, 3, l, &rt);
	fclose(f);
	ok(buf && strstr(buf, "rank 0 -> 3: kernel -, rdma 300.0 us "
			 "1000.0 MB/s 0 err, tcp 100.0 us 100.0 MB/s 0 err; "
			 "[0, 22223) tcp [22223, inf) rdma (measured") &&
	   strstr(buf, "{\"peer\": 3, \"links\": {\"kernel\": {\"usable\": "
		  "false") &&
	   strstr(buf, "\"route\": [{\"below\": 22223, \"transport\": "
		  "\"tcp\"}, {\"below\": null, \"transport\": \"rdma\"}]"),
	   "route: the decision table as text and JSON");
	if (buf && strchr(buf, '\n'))
		printf("# %.*s\n", (int)(strchr(buf, '\n') - buf), buf);
	free(buf);

	ok(hcomm__median(v, 5) == 3 && hcomm__median(v, 4) == 2.5,
	   "route: median of odd and even counts");

	clean_env();
	ok(!hcomm__probe_env(&b, &forced) && b.mode == HCOMM_PROBE_QUICK &&
	   b.rtts == 64 && b.bw_bytes == 2 << 20 && forced == -1,
	   "probe env: quick and auto by default");
	setenv("HCOMM_PROBE", "full", 1);
	setenv("HCOMM_TRANSPORT", "rdma", 1);
	ok(!hcomm__probe_env(&b, &forced) && b.mode == HCOMM_PROBE_FULL &&
	   forced == HCOMM_XP_RDMA, "probe env: full, rdma forced");
	setenv("HCOMM_PROBE", "often", 1);
	ok(hcomm__probe_env(&b, &forced) == -HCOMM_ERR_INVAL &&
	   strstr(hcomm_errmsg(), "HCOMM_PROBE"),
	   "probe env: a bad HCOMM_PROBE names the variable");
	setenv("HCOMM_PROBE", "off", 1);
	setenv("HCOMM_TRANSPORT", "ib", 1);
	ok(hcomm__probe_env(&b, &forced) == -HCOMM_ERR_INVAL &&
	   strstr(hcomm_errmsg(), "HCOMM_TRANSPORT"),
	   "probe env: a bad HCOMM_TRANSPORT names the variable");
	clean_env();
}

/* ------------------------------------------------------------------ */
/* Bootstrap                                                          */
/* ------------------------------------------------------------------ */

static unsigned boot_seq;
static char boot_name[100];

static void new_name(void)
{
	snprintf(boot_name, sizeof(boot_name), "hcomm-units-%d-%u",
		 (int)getpid(), boot_seq++);
}

static void rankinfo(struct hcomm_rankinfo *ri, int rank, int size,
		     const char *job)
{
	memset(ri, 0, sizeof(*ri));
	ri->rank = rank;
	ri->size = size;
	ri->launcher = HCOMM_LAUNCH_ENV;
	ri->local = 1;
	snprintf(ri->job, sizeof(ri->job), "%s", job);
	snprintf(ri->root_addr, sizeof(ri->root_addr), "%s", boot_name);
}

/* Exit codes of a forked rank: 0, an hcomm_err, or one of these. */
enum { X_DATA = 50, X_FD = 51, X_SLOW = 52, X_FAST = 53 };

#define BLOCK		1000
#define BIG_BLOCK	(256 * 1024)

/* Rank body of the allgather/barrier test. */
static int rank_collectives(int rank, int size)
{
	struct hcomm_rankinfo ri;
	struct hcomm_boot *b;
	unsigned char *big, *all;
	unsigned char mine[BLOCK], got[4 * BLOCK];
	int ret, r, i;

	rankinfo(&ri, rank, size, "units");
	ret = hcomm__boot_init(&ri, 5000, &b);
	if (ret)
		return -ret;
	memset(mine, 'A' + rank, sizeof(mine));
	ret = hcomm__boot_allgather(b, mine, got, BLOCK);
	if (ret)
		return -ret;
	for (r = 0; r < size; r++)
		for (i = 0; i < BLOCK; i++)
			if (got[r * BLOCK + i] != 'A' + r)
				return X_DATA;
	for (i = 0; i < 3; i++) {
		ret = hcomm__boot_barrier(b);
		if (ret)
			return -ret;
	}
	/* larger than a socket buffer: partial sends and receives */
	big = malloc(BIG_BLOCK);
	all = malloc((size_t)size * BIG_BLOCK);
	if (!big || !all)
		return HCOMM_ERR_NOMEM;
	for (i = 0; i < BIG_BLOCK; i++)
		big[i] = (unsigned char)(i * 7 + rank);
	ret = hcomm__boot_allgather(b, big, all, BIG_BLOCK);
	if (ret)
		return -ret;
	for (r = 0; r < size; r++)
		for (i = 0; i < BIG_BLOCK; i++)
			if (all[(size_t)r * BIG_BLOCK + i] !=
			    (unsigned char)(i * 7 + r))
				return X_DATA;
	/* in place: send is this rank's block of recv */
	for (r = 0; r < size; r++)
		memset(got + r * BLOCK, r == rank ? 'a' + rank : 0, BLOCK);
	ret = hcomm__boot_allgather(b, got + rank * BLOCK, got, BLOCK);
	if (ret)
		return -ret;
	for (r = 0; r < size; r++)
		if (got[r * BLOCK] != 'a' + r ||
		    got[r * BLOCK + BLOCK - 1] != 'a' + r)
			return X_DATA;
	ret = hcomm__boot_allgather(b, NULL, NULL, 0);
	if (ret)
		return -ret;
	hcomm__boot_fini(b);
	free(big);
	free(all);
	return 0;
}

struct rank_spec {
	int rank, size;
	const char *job;
	uint32_t timeout_ms;
	int stall_ms;		/* after init, before a barrier */
	int foreign;		/* drop to uid 65534 first */
	int64_t coll_ms;	/* 0: keep; else hcomm__boot_set_timeout */
	int64_t min_ms, max_ms;	/* 0: any; else the barrier's bounds */
};

/* Init, then (if that worked) one barrier after stall_ms; the result. */
static int rank_generic(const struct rank_spec *s)
{
	struct hcomm_rankinfo ri;
	struct hcomm_boot *b;
	int fds = count_fds(), ret;
	int64_t t;

	if (s->foreign && (setgid(65534) || setuid(65534)))
		return 60;
	rankinfo(&ri, s->rank, s->size, s->job ? s->job : "units");
	ret = hcomm__boot_init(&ri, s->timeout_ms, &b);
	if (ret)
		return count_fds() == fds ? -ret : X_FD;
	if (s->coll_ms && hcomm__boot_set_timeout(b, s->coll_ms))
		return 61;
	if (s->stall_ms)
		sleep_ms(s->stall_ms);
	t = now_ms();
	ret = hcomm__boot_barrier(b);
	t = now_ms() - t;
	hcomm__boot_fini(b);
	if (count_fds() != fds)
		return X_FD;
	if (s->max_ms && t > s->max_ms)
		return X_SLOW;
	if (s->min_ms && t < s->min_ms)
		return X_FAST;
	return -ret;
}

static pid_t spawn(const struct rank_spec *s)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		alarm(10);
		_exit(s ? rank_generic(s) : 0);
	}
	return pid;
}

static pid_t spawn_collectives(int rank, int size)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		alarm(10);
		_exit(rank_collectives(rank, size));
	}
	return pid;
}

/* Exit status of pid: its code, or 100 + signal. */
static int reap(pid_t pid)
{
	int st;

	if (pid < 0)
		return -1;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 100 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Wait until something listens on boot_name (at most 5 s). */
static int wait_listener(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(boot_name);
	int64_t end = now_ms() + 5000;

	memcpy(sa.sun_path + 1, boot_name, n);
	while (now_ms() < end) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int ret;

		if (fd < 0)
			return -1;
		ret = connect(fd, (struct sockaddr *)&sa,
			      offsetof(struct sockaddr_un, sun_path) + 1 + n);
		close(fd);
		if (!ret)
			return 0;
		sleep_ms(2);
	}
	return -1;
}

#define MANY	150

static int rank_many(int rank, int size)
{
	struct hcomm_rankinfo ri;
	struct hcomm_boot *b;
	int32_t all[MANY], me = rank * 3 + 1;
	int ret, r;

	rankinfo(&ri, rank, size, "units");
	ret = hcomm__boot_init(&ri, 8000, &b);
	if (ret)
		return -ret;
	ret = hcomm__boot_allgather(b, &me, all, sizeof(me));
	if (ret)
		return -ret;
	for (r = 0; r < size; r++)
		if (all[r] != r * 3 + 1)
			return X_DATA;
	ret = hcomm__boot_barrier(b);
	hcomm__boot_fini(b);
	return -ret;
}

static pid_t spawn_many(int rank, int size)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		alarm(10);
		_exit(rank_many(rank, size));
	}
	return pid;
}

/* A rank over TCP: the nonce, host ids and self address agree. */
static int rank_tcp(int rank, int size, const char *addr)
{
	struct hcomm_rankinfo ri;
	struct hcomm_boot *b;
	uint64_t nonce, all[8];
	unsigned char *big, *every;
	int ret, r, i;

	rankinfo(&ri, rank, size, "units-tcp");
	snprintf(ri.root_addr, sizeof(ri.root_addr), "%s", addr);
	ri.tcp_root = 1;
	ret = hcomm__boot_init(&ri, 5000, &b);
	if (ret)
		return -ret;
	nonce = hcomm__boot_nonce(b);
	ret = hcomm__boot_allgather(b, &nonce, all, sizeof(nonce));
	if (ret)
		return -ret;
	for (r = 0; r < size; r++)
		if (!all[r] || all[r] != nonce || !hcomm__boot_same_host(b, r))
			return X_DATA;
	if (hcomm__boot_same_host(b, size) || hcomm__boot_same_host(b, -1))
		return X_DATA;
	if (strcmp(hcomm__boot_self_ip(b), "127.0.0.1"))
		return X_FD;
	big = malloc(BIG_BLOCK);
	every = malloc((size_t)size * BIG_BLOCK);
	if (!big || !every)
		return HCOMM_ERR_NOMEM;
	for (i = 0; i < BIG_BLOCK; i++)
		big[i] = (unsigned char)(i * 13 + rank);
	ret = hcomm__boot_allgather(b, big, every, BIG_BLOCK);
	if (ret)
		return -ret;
	for (r = 0; r < size; r++)
		for (i = 0; i < BIG_BLOCK; i++)
			if (every[(size_t)r * BIG_BLOCK + i] !=
			    (unsigned char)(i * 13 + r))
				return X_DATA;
	ret = hcomm__boot_barrier(b);
	hcomm__boot_fini(b);
	free(big);
	free(every);
	return ret ? -ret : 0;
}

static pid_t spawn_tcp(int rank, int size, const char *addr)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		alarm(10);
		_exit(rank_tcp(rank, size, addr));
	}
	return pid;
}

static void test_boot_tcp(void)
{
	struct hcomm_host_id a, b2;
	struct hcomm_rankinfo ri;
	struct hcomm_boot *b;
	char addr[64];
	int st[4], r, ret;
	int64_t t0;
	pid_t pid[4];

	ok(!hcomm__host_id(&a) && !hcomm__host_id(&b2) &&
	   !memcmp(&a, &b2, sizeof(a)) && a.nonce,
	   "boot tcp: the host id is stable within a boot");

	snprintf(addr, sizeof(addr), "127.0.0.1:%u",
		 20000 + (unsigned int)(getpid() % 20000));
	for (r = 3; r >= 0; r--)
		pid[r] = spawn_tcp(r, 4, addr);
	for (r = 0; r < 4; r++)
		st[r] = reap(pid[r]);
	ok(!st[0] && !st[1] && !st[2] && !st[3],
	   "boot tcp: 4 processes at %s: one job nonce, one host, self "
	   "address 127.0.0.1, 256 KiB allgather, barrier (exit %d %d %d "
	   "%d)", addr, st[0], st[1], st[2], st[3]);

	/* nobody listens: a clear timeout naming the address */
	rankinfo(&ri, 1, 2, "units-tcp");
	snprintf(ri.root_addr, sizeof(ri.root_addr), "127.0.0.1:%u",
		 20000 + (unsigned int)((getpid() + 7) % 20000));
	ri.tcp_root = 1;
	t0 = now_ms();
	ret = hcomm__boot_init(&ri, 300, &b);
	ok(ret == -HCOMM_ERR_TIMEOUT && now_ms() - t0 < 2000 &&
	   strstr(hcomm_errmsg(), ri.root_addr),
	   "boot tcp: no rank 0 at the address: TIMEOUT naming it (%s)",
	   hcomm_errmsg());
	snprintf(ri.root_addr, sizeof(ri.root_addr), "no-such-host.invalid:9");
	ok(hcomm__boot_init(&ri, 300, &b) == -HCOMM_ERR_INVAL &&
	   strstr(hcomm_errmsg(), "no-such-host"),
	   "boot tcp: an unknown host is an error naming it");
}

static void test_boot(void)
{
	pid_t many[MANY];
	struct hcomm_rankinfo ri;
	struct hcomm_boot *b;
	unsigned char blk[8], all[8];
	int st[5], fds, ret, r;
	char msg[256];
	pid_t pid[5];
	int64_t t0;

	/* four ranks: allgather of distinct blocks, barriers, big blocks */
	new_name();
	for (r = 3; r >= 0; r--)	/* rank 0 last: the others retry */
		pid[r] = spawn_collectives(r, 4);
	for (r = 0; r < 4; r++)
		st[r] = reap(pid[r]);
	ok(!st[0] && !st[1] && !st[2] && !st[3],
	   "boot: 4 processes: allgather of distinct blocks (1000 B and "
	   "256 KiB, in place), barriers (exit %d %d %d %d)",
	   st[0], st[1], st[2], st[3]);

	/* many ranks at once: more than the pending hellos rank 0 holds */
	new_name();
	{
		int n = MANY, bad = 0;

		t0 = now_ms();
		for (r = n - 1; r >= 0; r--)
			many[r] = spawn_many(r, n);
		for (r = 0; r < n; r++)
			if (reap(many[r]) && bad++ < 3)
				printf("# rank %d failed\n", r);
		ok(!bad, "boot: %d processes: init, allgather of every rank's "
		   "number, barrier (%lld ms)", n, (long long)(now_ms() - t0));
	}

	/* one rank: no socket */
	new_name();
	rankinfo(&ri, 0, 1, "units");
	fds = count_fds();
	ret = hcomm__boot_init(&ri, 100, &b);
	memcpy(blk, "12345678", 8);
	ok(!ret && count_fds() == fds &&
	   !hcomm__boot_allgather(b, blk, all, 8) &&
	   !memcmp(all, "12345678", 8) && !hcomm__boot_barrier(b),
	   "boot: one rank needs no socket; allgather copies");
	hcomm__boot_fini(b);
	hcomm__boot_fini(NULL);

	/* argument checks */
	rankinfo(&ri, 4, 4, "units");
	ok(hcomm__boot_init(&ri, 100, &b) == -HCOMM_ERR_INVAL && !b,
	   "boot: rank >= size rejected");
	rankinfo(&ri, 0, 1025, "units");
	ok(hcomm__boot_init(&ri, 100, &b) == -HCOMM_ERR_INVAL,
	   "boot: more than 1024 ranks rejected");
	rankinfo(&ri, 1, 2, "units");
	ri.root_addr[0] = 0;
	ok(hcomm__boot_init(&ri, 100, &b) == -HCOMM_ERR_INVAL,
	   "boot: no rendezvous name rejected");

	/* one rank never arrives: TIMEOUT everywhere, quickly */
	new_name();
	t0 = now_ms();
	for (r = 0; r < 3; r++) {
		struct rank_spec s = { .rank = r, .size = 4,
				       .timeout_ms = 300 };

		pid[r] = spawn(&s);
	}
	for (r = 0; r < 3; r++)
		st[r] = reap(pid[r]);
	t0 = now_ms() - t0;
	ok(st[0] == HCOMM_ERR_TIMEOUT && st[1] == HCOMM_ERR_TIMEOUT &&
	   st[2] == HCOMM_ERR_TIMEOUT && t0 < 3000,
	   "boot: rank 3 never arrives: ranks 0-2 fail with TIMEOUT, no fd "
	   "leaked (exit %d %d %d, %lld ms)", st[0], st[1], st[2],
	   (long long)t0);

	/* the same in this process, for the messages and fds */
	new_name();
	rankinfo(&ri, 0, 2, "units");
	fds = count_fds();
	ret = hcomm__boot_init(&ri, 100, &b);
	ok(ret == -HCOMM_ERR_TIMEOUT && count_fds() == fds && !b &&
	   strstr(hcomm_errmsg(), boot_name) &&
	   strstr(hcomm_errmsg(), "1 of 2 ranks"),
	   "boot: rank 0 alone times out, names the rendezvous (%s)",
	   hcomm_errmsg());
	rankinfo(&ri, 1, 2, "units");
	ret = hcomm__boot_init(&ri, 100, &b);
	ok(ret == -HCOMM_ERR_TIMEOUT && count_fds() == fds &&
	   strstr(hcomm_errmsg(), "did not come up"),
	   "boot: rank 1 without a rank 0 times out (%s)", hcomm_errmsg());

	/* a second rank 0 on the same name: BUSY */
	new_name();
	{
		struct rank_spec s0 = { .rank = 0, .size = 2,
					.timeout_ms = 3000 };
		struct rank_spec s1 = { .rank = 1, .size = 2,
					.timeout_ms = 3000 };

		pid[0] = spawn(&s0);
		ret = wait_listener();
		rankinfo(&ri, 0, 2, "units");
		fds = count_fds();
		if (!ret)
			ret = hcomm__boot_init(&ri, 1000, &b);
		ok(ret == -HCOMM_ERR_BUSY && count_fds() == fds &&
		   strstr(hcomm_errmsg(), boot_name),
		   "boot: a second rank 0 on the same name: BUSY, naming "
		   "the address (%s)", hcomm_errmsg());
		pid[1] = spawn(&s1);
		st[0] = reap(pid[0]);
		st[1] = reap(pid[1]);
		ok(!st[0] && !st[1], "boot: the first rank 0 goes on "
		   "undisturbed by a probe (exit %d %d)", st[0], st[1]);
	}
	/* the name is free again once the bootstrap is done */
	{
		struct rank_spec s1 = { .rank = 1, .size = 2,
					.timeout_ms = 3000 };

		pid[1] = spawn(&s1);
		rankinfo(&ri, 0, 2, "units");
		ret = hcomm__boot_init(&ri, 3000, &b);
		ok(!ret && !hcomm__boot_barrier(b) && !reap(pid[1]),
		   "boot: the name can be reused after the bootstrap");
		hcomm__boot_fini(b);
	}

	/* a hello with another world size: INVAL */
	new_name();
	{
		struct rank_spec s[4] = {
			{ .rank = 0, .size = 4, .timeout_ms = 3000 },
			{ .rank = 1, .size = 4, .timeout_ms = 1000 },
			{ .rank = 2, .size = 4, .timeout_ms = 1000 },
			{ .rank = 3, .size = 5, .timeout_ms = 3000 },
		};
		int others;

		for (r = 0; r < 4; r++)
			pid[r] = spawn(&s[r]);
		for (r = 0; r < 4; r++)
			st[r] = reap(pid[r]);
		/*
		 * Ranks 1 and 2 may have joined (INVAL), not (TIMEOUT), or
		 * lost their connection when rank 0 gave up (IO): which one
		 * depends on how the four processes were scheduled.
		 */
		others = (st[1] == HCOMM_ERR_INVAL ||
			  st[1] == HCOMM_ERR_TIMEOUT || st[1] == HCOMM_ERR_IO) &&
			 (st[2] == HCOMM_ERR_INVAL ||
			  st[2] == HCOMM_ERR_TIMEOUT || st[2] == HCOMM_ERR_IO);
		ok(st[0] == HCOMM_ERR_INVAL && st[3] == HCOMM_ERR_INVAL &&
		   others, "boot: a hello with world size 5 among 4: INVAL "
		   "at rank 0 and the sender (exit %d %d %d %d)",
		   st[0], st[1], st[2], st[3]);
	}
	new_name();
	{
		struct rank_spec s = { .rank = 1, .size = 3,
				       .timeout_ms = 3000 };

		pid[0] = spawn(&s);
		rankinfo(&ri, 0, 2, "units");
		fds = count_fds();
		ret = hcomm__boot_init(&ri, 3000, &b);
		st[0] = reap(pid[0]);
		ok(ret == -HCOMM_ERR_INVAL && st[0] == HCOMM_ERR_INVAL &&
		   count_fds() == fds && strstr(hcomm_errmsg(), "world size"),
		   "boot: size mismatch message at rank 0 (%s)",
		   hcomm_errmsg());
	}

	/* another job on the same name: refused, the real rank gets in */
	new_name();
	{
		struct rank_spec o = { .rank = 1, .size = 2, .job = "other",
				       .timeout_ms = 3000 };
		struct rank_spec s0 = { .rank = 0, .size = 2,
					.timeout_ms = 5000 };
		struct rank_spec s1 = { .rank = 1, .size = 2,
					.timeout_ms = 3000 };

		pid[0] = spawn(&s0);
		ret = wait_listener();
		pid[1] = spawn(&o);
		st[1] = reap(pid[1]);
		pid[2] = spawn(&s1);
		st[2] = reap(pid[2]);
		st[0] = reap(pid[0]);
		ok(!ret && st[1] == HCOMM_ERR_INVAL && !st[0] && !st[2],
		   "boot: a hello of another job is refused with INVAL, the "
		   "job's own rank 1 joins (exit %d %d %d)", st[0], st[1],
		   st[2]);
	}
	new_name();
	{
		struct rank_spec o = { .rank = 1, .size = 2, .job = "other",
				       .timeout_ms = 3000 };

		pid[0] = spawn(&o);
		rankinfo(&ri, 0, 2, "units");
		ret = hcomm__boot_init(&ri, 500, &b);
		st[0] = reap(pid[0]);
		ok(ret == -HCOMM_ERR_TIMEOUT && st[0] == HCOMM_ERR_INVAL &&
		   strstr(hcomm_errmsg(), "1 other connections dropped"),
		   "boot: ... and rank 0 waits on for its own (%s)",
		   hcomm_errmsg());
	}

	/* the same rank twice: INVAL */
	new_name();
	{
		struct rank_spec s = { .rank = 1, .size = 3,
				       .timeout_ms = 3000 };

		pid[0] = spawn(&s);
		pid[1] = spawn(&s);
		rankinfo(&ri, 0, 3, "units");
		ret = hcomm__boot_init(&ri, 3000, &b);
		st[0] = reap(pid[0]);
		st[1] = reap(pid[1]);
		ok(ret == -HCOMM_ERR_INVAL && st[0] == HCOMM_ERR_INVAL &&
		   st[1] == HCOMM_ERR_INVAL &&
		   strstr(hcomm_errmsg(), "rank 1 arrived twice"),
		   "boot: rank 1 twice: INVAL everywhere (%s)",
		   hcomm_errmsg());
	}

	/* a rank that stalls after init: the barrier times out */
	new_name();
	{
		struct rank_spec s[3] = {
			{ .rank = 0, .size = 3, .timeout_ms = 500 },
			{ .rank = 1, .size = 3, .timeout_ms = 500 },
			{ .rank = 2, .size = 3, .timeout_ms = 500,
			  .stall_ms = 1500 },
		};

		t0 = now_ms();
		for (r = 0; r < 3; r++)
			pid[r] = spawn(&s[r]);
		for (r = 0; r < 3; r++)
			st[r] = reap(pid[r]);
		t0 = now_ms() - t0;
		ok(st[0] == HCOMM_ERR_TIMEOUT && st[1] == HCOMM_ERR_TIMEOUT &&
		   st[2] != 0 && st[2] != X_FD,
		   "boot: a barrier waits at most the timeout (exit %d %d %d, "
		   "%lld ms)", st[0], st[1], st[2], (long long)t0);
	}

	/*
	 * The collectives' own limit: init may take 5 s, a barrier 300 ms
	 * (it gives up after 300 .. 1300 ms, not after 5 s) ...
	 */
	new_name();
	{
		struct rank_spec s[3] = {
			{ .rank = 0, .size = 3, .timeout_ms = 5000,
			  .coll_ms = 300, .min_ms = 250, .max_ms = 1300 },
			{ .rank = 1, .size = 3, .timeout_ms = 5000,
			  .coll_ms = 300, .min_ms = 250, .max_ms = 1300 },
			{ .rank = 2, .size = 3, .timeout_ms = 5000,
			  .coll_ms = 300, .stall_ms = 2500 },
		};

		for (r = 0; r < 3; r++)
			pid[r] = spawn(&s[r]);
		for (r = 0; r < 3; r++)
			st[r] = reap(pid[r]);
		ok(st[0] == HCOMM_ERR_TIMEOUT && st[1] == HCOMM_ERR_TIMEOUT &&
		   st[2] != 0 && st[2] != X_FD,
		   "boot: a collective timeout of 300 ms with init's 5 s: the "
		   "barrier gives up after 300 ms (exit %d %d %d)", st[0],
		   st[1], st[2]);
	}

	/* ... or without limit: a rank 1.5 s late past init's 500 ms. */
	new_name();
	{
		struct rank_spec s[3] = {
			{ .rank = 0, .size = 3, .timeout_ms = 500,
			  .coll_ms = -1, .min_ms = 1200 },
			{ .rank = 1, .size = 3, .timeout_ms = 500,
			  .coll_ms = -1, .min_ms = 1200 },
			{ .rank = 2, .size = 3, .timeout_ms = 500,
			  .coll_ms = -1, .stall_ms = 1500 },
		};

		for (r = 0; r < 3; r++)
			pid[r] = spawn(&s[r]);
		for (r = 0; r < 3; r++)
			st[r] = reap(pid[r]);
		ok(!st[0] && !st[1] && !st[2],
		   "boot: collective timeout < 0: a barrier waits for a rank "
		   "1.5 s late although init's limit is 500 ms (exit %d %d %d)",
		   st[0], st[1], st[2]);
	}

	/* bad limits are refused and change nothing */
	new_name();
	rankinfo(&ri, 0, 1, "units");
	ret = hcomm__boot_init(&ri, 100, &b);
	ok(!ret && hcomm__boot_set_timeout(b, 0) == -HCOMM_ERR_INVAL &&
	   hcomm__boot_set_timeout(b, 3600001) == -HCOMM_ERR_INVAL &&
	   hcomm__boot_set_timeout(NULL, 5) == -HCOMM_ERR_INVAL &&
	   !hcomm__boot_set_timeout(b, 3600000) &&
	   !hcomm__boot_set_timeout(b, INT64_MIN) && !hcomm__boot_barrier(b),
	   "boot: collective timeout 0 or above an hour: INVAL; < 0 and "
	   "3600000 taken");
	hcomm__boot_fini(b);

	/* a rank that leaves: the others see it */
	new_name();
	{
		struct rank_spec s = { .rank = 1, .size = 2,
				       .timeout_ms = 3000 };
		unsigned char x = 1, y[2];

		pid[0] = spawn(&s);
		rankinfo(&ri, 0, 2, "units");
		ret = hcomm__boot_init(&ri, 3000, &b);
		if (!ret)
			ret = hcomm__boot_barrier(b);
		st[0] = reap(pid[0]);	/* it is gone after one barrier */
		if (!ret)
			ret = hcomm__boot_allgather(b, &x, y, 1);
		snprintf(msg, sizeof(msg), "%s", hcomm_errmsg());
		ok(ret == -HCOMM_ERR_IO && strstr(msg, "closed") &&
		   hcomm__boot_barrier(b) == -HCOMM_ERR_IO &&
		   strstr(hcomm_errmsg(), "failed earlier"),
		   "boot: a rank that left: IO, and the channel stays failed "
		   "(%s)", msg);
		hcomm__boot_fini(b);
	}

	/* another user's process is not let in */
	new_name();
	if (geteuid() == 0) {
		struct rank_spec s0 = { .rank = 0, .size = 2,
					.timeout_ms = 5000 };
		struct rank_spec f = { .rank = 1, .size = 2, .foreign = 1,
				       .timeout_ms = 3000 };
		struct rank_spec s1 = { .rank = 1, .size = 2,
					.timeout_ms = 3000 };

		/* rank 0 listens; the stranger knocks first, then rank 1 */
		pid[0] = spawn(&s0);
		ret = wait_listener();
		pid[1] = spawn(&f);
		st[1] = reap(pid[1]);
		pid[2] = spawn(&s1);
		st[2] = reap(pid[2]);
		st[0] = reap(pid[0]);
		ok(!ret && st[1] == HCOMM_ERR_ACCESS && !st[0] && !st[2],
		   "boot: a process of another uid is refused (SO_PEERCRED), "
		   "the real rank 1 joins (exit %d %d %d)", st[0], st[1],
		   st[2]);
	} else {
		ok(1, "# SKIP boot: another uid needs root to test");
	}
}

/* ------------------------------------------------------------------ */
/* Descriptor packing                                                 */
/* ------------------------------------------------------------------ */

_Static_assert(sizeof(struct hcomm_xfer_desc) == 48, "xfer_desc size");

static void test_packing(void)
{
	struct hcomm_request req;

	ok(sizeof(struct hcomm_xfer_desc) == 48 &&
	   offsetof(struct hcomm_xfer_desc, op) == 0 &&
	   offsetof(struct hcomm_xfer_desc, target) == 4 &&
	   offsetof(struct hcomm_xfer_desc, target_off) == 8 &&
	   offsetof(struct hcomm_xfer_desc, local) == 16 &&
	   offsetof(struct hcomm_xfer_desc, len) == 24 &&
	   offsetof(struct hcomm_xfer_desc, sig) == 32 &&
	   offsetof(struct hcomm_xfer_desc, reserved) == 36 &&
	   offsetof(struct hcomm_xfer_desc, value) == 40 &&
	   _Alignof(struct hcomm_xfer_desc) == 8,
	   "packing: hcomm_xfer_desc is 48 bytes, fields at 0/4/8/16/24/32/"
	   "36/40");
	ok(sizeof(req.priv) == 4 * sizeof(void *) &&
	   offsetof(struct hcomm_request, status) == 0 &&
	   offsetof(struct hcomm_request, done) == 4 &&
	   offsetof(struct hcomm_request, bytes) == 8 &&
	   offsetof(struct hcomm_request, priv) + sizeof(req.priv) ==
	   sizeof(struct hcomm_request) &&
	   (sizeof(void *) != 8 || (sizeof(struct hcomm_request) == 72 &&
				    offsetof(struct hcomm_request, cb) == 16 &&
				    offsetof(struct hcomm_request, priv) == 40)),
	   "packing: hcomm_request as declared, priv is 4 pointers at the "
	   "end (%zu bytes)", sizeof(struct hcomm_request));
	ok(sizeof(struct hcomm_mpsc_node) <= sizeof(req.priv) &&
	   _Alignof(struct hcomm_mpsc_node) <= _Alignof(void *),
	   "packing: an MPSC node fits in hcomm_request.priv");
	/* version 1 of the per-peer counters: later versions only append */
	ok(sizeof(struct hcomm_peer_xport_stats) == 400 &&
	   offsetof(struct hcomm_peer_xport_stats, bytes_sent) == 8 &&
	   offsetof(struct hcomm_peer_xport_stats, retransmits) == 64 &&
	   offsetof(struct hcomm_peer_xport_stats, wc_errors) == 72 &&
	   offsetof(struct hcomm_peer_xport_stats, wc_status) == 80 &&
	   offsetof(struct hcomm_peer_xport_stats, reserved) == 336 &&
	   sizeof(struct hcomm_peer_range) == 16 &&
	   offsetof(struct hcomm_peer_stats, range) == 16 &&
	   offsetof(struct hcomm_peer_stats, why) == 80 &&
	   offsetof(struct hcomm_peer_stats, xp) == 176 &&
	   offsetof(struct hcomm_peer_stats, reserved) == 1776 &&
	   sizeof(struct hcomm_peer_stats) == 1904 &&
	   HCOMM_PEER_STATS_VERSION == 1 && HCOMM_XPORT_KERNEL == 0 &&
	   HCOMM_XPORT_RDMA == 1 && HCOMM_XPORT_TCP == 2,
	   "packing: hcomm_peer_stats version 1 is %zu bytes (xport %zu), "
	   "fields where they were", sizeof(struct hcomm_peer_stats),
	   sizeof(struct hcomm_peer_xport_stats));
}

int main(void)
{
	char tmpl[] = "/tmp/hcomm-units-XXXXXX";
	const char *only = getenv("HCOMM_UNITS_ONLY");
	int queues_only = only && !strcmp(only, "queues");
	int64_t t0 = now_ms();
	char cmd[128];

	setvbuf(stdout, NULL, _IOLBF, 0);
	clean_env();
	if (gethostname(host, sizeof(host)))
		strcpy(host, "localhost");
	host[sizeof(host) - 1] = 0;
	if (!mkdtemp(tmpl)) {
		printf("not ok 1 - mkdtemp: %s\n", strerror(errno));
		printf("units: 0 passed, 1 failed\n");
		return 1;
	}
	snprintf(tmpdir, sizeof(tmpdir), "%s", tmpl);

	/* HCOMM_UNITS_ONLY=queues: the lock-free queues only (under TSan) */
	if (!queues_only) {
		test_parse_size();
		test_config_default();
		test_config_vars();
		test_config_profiles();
		test_coll_timeout_env();
		test_rank_table();
		test_rank_table_hosts();
		test_tcp_addr();
		test_detect();
		test_detect_hosts();
		test_route();
	}
	test_mpsc_basic();
	test_mpsc_threads();
	test_ring_basic();
	test_rq_slot_filling();
	test_ring_threads();
	test_ec_basic();
	test_ec_stress();
	if (!queues_only) {
		test_boot();
		test_boot_tcp();
		test_packing();
	}

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd)) {
		/* leftovers in /tmp only */
	}
	printf("# %lld ms\n", (long long)(now_ms() - t0));
	return tap_done("units");
}
