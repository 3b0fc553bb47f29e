/* SPDX-License-Identifier: MIT */
/*
 * hcomm_info: describe the hcomm device, in the manner of ibv_devinfo.
 *
 *   hcomm_info [--json] [-v] [--stats PATH] [--contexts PATH] [--sysfs DIR]
 *   hcomm_info --peers [--json] [DIR|FILE]
 *
 * Prints the module's version (sysfs), the ABI version, features and
 * limits from HCOMM_CMD_GET_INFO, the caller's memlock limits, the module
 * parameters, whether commands go through io_uring, and what is registered
 * now: the global gauges of /sys/kernel/debug/hcomm/stats and the table of
 * open contexts of /sys/kernel/debug/hcomm/contexts (both read before
 * hcomm_info opens its own context; both optional: debugfs needs root).
 *
 * --peers prints, without the device, the decision table and per-peer
 * counters of running communicators from the "hcomm-*.peers.json" files
 * libhcomm writes under HCOMM_STATS_DIR (hcomm.h).
 *
 * Exit status 0; 1 when the device cannot be opened (the message says why,
 * e.g. that the module must be loaded); 2 for a bad command line.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <json.h>

#include "hcomm.h"

#define PROG		"hcomm_info"
#include "tools_util.h"
#define CONTEXTS_PATH	DEBUGFS_DIR "/hcomm/contexts"

/* A one-line sysfs value, trailing blanks removed; NULL if unreadable. */
static char *read_value(const char *dir, const char *name)
{
	char *path, *buf;
	size_t n;
	int ret;

	if (asprintf(&path, "%s/%s", dir, name) < 0)
		die(1, "out of memory");
	ret = read_file(path, &buf);
	free(path);
	if (ret)
		return NULL;
	n = strlen(buf);
	while (n && isspace((unsigned char)buf[n - 1]))
		buf[--n] = 0;
	return buf;
}

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;
	unsigned long long x;

	if (!s || !isdigit((unsigned char)*s))
		return false;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || *end)
		return false;
	*v = x;
	return true;
}

/* ------------------------------------------------------------------ */
/* JSON                                                                */
/* ------------------------------------------------------------------ */

static void json_str_or_null(const char *s)
{
	if (s)
		json_str(stdout, s);
	else
		fputs("null", stdout);
}

/* An integer when the text is one, else a string (null for NULL). */
static void json_val(const char *s)
{
	uint64_t u;
	int64_t v;

	if (!s)
		fputs("null", stdout);
	else if (parse_u64(s, &u))
		printf("%" PRIu64, u);
	else if (parse_i64(s, &v))
		printf("%" PRId64, v);
	else
		json_str(stdout, s);
}

/* ------------------------------------------------------------------ */
/* debugfs: stats ("name value") and contexts (header + rows)          */
/* ------------------------------------------------------------------ */

struct ctab {
	char *buf;
	int ncols;
	char *col[MAX_COLS];
	int nrows, cap;
	char *(*rows)[MAX_COLS];
	int err;		/* -errno of reading, -EINVAL: no header */
};

static int ctab_col(const struct ctab *t, const char *name)
{
	return col_index(t->col, t->ncols, name);
}

/* ctab_walk() row: one more row. */
static void ctab_add_row(void *arg, char **v)
{
	struct ctab *t = arg;

	if (t->nrows == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 16;
		t->rows = xrealloc(t->rows, t->cap * sizeof(*t->rows));
	}
	memcpy(t->rows[t->nrows], v, sizeof(t->rows[0]));
	t->nrows++;
}

/* Parse buf (taken over); 0 or -EINVAL (no header). */
static int ctab_parse(struct ctab *t, char *buf)
{
	t->buf = buf;
	return ctab_walk(buf, t->col, &t->ncols, ctab_add_row, t);
}

/* ------------------------------------------------------------------ */
/* Formatting                                                          */
/* ------------------------------------------------------------------ */

static const char *fmt_bytes(uint64_t v, char *buf, size_t len)
{
	static const char *const unit[] = { "KiB", "MiB", "GiB", "TiB",
					    "PiB", "EiB" };
	int u = -1;

	while (u < 5 && v >= (1024ULL << (10 * (u + 1))))
		u++;
	if (u < 0)
		snprintf(buf, len, "%" PRIu64 " B", v);
	else if (!(v & ((1ULL << (10 * (u + 1))) - 1)))
		snprintf(buf, len, "%" PRIu64 " %s", v >> (10 * (u + 1)),
			 unit[u]);
	else
		snprintf(buf, len, "%.1f %s",
			 (double)v / (double)(1ULL << (10 * (u + 1))),
			 unit[u]);
	return buf;
}

/* NULL: a reserved bit, never set */
static const char *const feat_names[] = {
	"URING_CMD", "DMABUF", "DMABUF_MOVE_NOTIFY", "HUGE_EXTENTS", "XFER",
	"REG_CACHE", NULL, "XFER_BATCH",
};
#define NR_FEATS ((int)(sizeof(feat_names) / sizeof(feat_names[0])))

/* The feature bits this tool has a name for. */
static uint64_t feat_known(void)
{
	uint64_t m = 0;
	int f;

	for (f = 0; f < NR_FEATS; f++)
		if (feat_names[f])
			m |= 1ULL << f;
	return m;
}

_Static_assert(HCOMM_FEAT_URING_CMD == 1ULL << 0 &&
	       HCOMM_FEAT_DMABUF == 1ULL << 1 &&
	       HCOMM_FEAT_DMABUF_MOVE_NOTIFY == 1ULL << 2 &&
	       HCOMM_FEAT_HUGE_EXTENTS == 1ULL << 3 &&
	       HCOMM_FEAT_XFER == 1ULL << 4 &&
	       HCOMM_FEAT_REG_CACHE == 1ULL << 5 &&
	       HCOMM_FEAT_XFER_BATCH == 1ULL << 7, "feature bits");

/* ------------------------------------------------------------------ */
/* Gathering                                                           */
/* ------------------------------------------------------------------ */

static struct {
	bool json, verbose;
	const char *stats, *contexts, *sysfs;
	const char *lib_stats;	/* HCOMM_STATS_DIR or --lib-stats, or NULL */
	bool default_debugfs;
} opt;

#define MAX_LIB		256
static struct lib_stats libst[MAX_LIB];
static int nlib;		/* or -errno */

/* The communicators' own caches (HCOMM_STATS_DIR), text. */
static void print_lib_text(void)
{
	char b[32];
	int i;

	if (!opt.lib_stats) {
		if (opt.verbose)
			printf("libhcomm communicators: not published (set "
			       "HCOMM_STATS_DIR for the programs and "
			       "hcomm_info, or use --lib-stats)\n");
		return;
	}
	if (nlib < 0) {
		printf("libhcomm communicators (%s): not readable: %s\n",
		       opt.lib_stats, strerror(-nlib));
		return;
	}
	printf("libhcomm communicators (%s): %d\n", opt.lib_stats, nlib);
	for (i = 0; i < nlib; i++) {
		const struct hcomm_stats_file *f = &libst[i].f;

		printf("  pid %d rank %d/%d%s: registration cache %" PRIu64
		       " hits %" PRIu64 " misses %" PRIu64 " stale %" PRIu64
		       " evictions, %" PRIu64 " entries (%s), %" PRIu64
		       " dead\n", f->pid, f->rank, f->world_size,
		       libst[i].alive ? "" : " (exited: stale file)",
		       f->st.rcache_hits, f->st.rcache_misses,
		       f->st.rcache_stale, f->st.rcache_evictions,
		       f->st.rcache_entries,
		       fmt_bytes(f->st.rcache_bytes, b, sizeof(b)),
		       f->st.rcache_dead);
	}
}

/* The same as the JSON value of "libhcomm". */
static void print_lib_json(void)
{
	int i;

	if (!opt.lib_stats) {
		printf("null");
		return;
	}
	printf("{\"dir\":");
	json_str(stdout, opt.lib_stats);
	if (nlib < 0) {
		printf(",\"error\":");
		json_str(stdout, strerror(-nlib));
		printf(",\"communicators\":[]}");
		return;
	}
	printf(",\"error\":null,\"communicators\":[");
	for (i = 0; i < nlib; i++) {
		const struct hcomm_stats_file *f = &libst[i].f;

		printf("%s{\"file\":", i ? "," : "");
		json_str(stdout, libst[i].name);
		printf(",\"pid\":%d,\"rank\":%d,\"world_size\":%d,"
		       "\"alive\":%s,\"rcache_hits\":%" PRIu64
		       ",\"rcache_misses\":%" PRIu64 ",\"rcache_stale\":%" PRIu64
		       ",\"rcache_evictions\":%" PRIu64
		       ",\"rcache_entries\":%" PRIu64 ",\"rcache_bytes\":%" PRIu64
		       ",\"rcache_dead\":%" PRIu64 "}", f->pid, f->rank,
		       f->world_size, libst[i].alive ? "true" : "false",
		       f->st.rcache_hits, f->st.rcache_misses,
		       f->st.rcache_stale, f->st.rcache_evictions,
		       f->st.rcache_entries, f->st.rcache_bytes,
		       f->st.rcache_dead);
	}
	printf("]}");
}

struct param {
	char *name, *value;	/* value NULL: unreadable */
};

struct module_info {
	bool loaded;
	char *version, *srcversion, *refcnt, *taint;
	struct param *params;
	int nparams;
};

static int cmp_param(const void *a, const void *b)
{
	return strcmp(((const struct param *)a)->name,
		      ((const struct param *)b)->name);
}

static void read_module(struct module_info *m)
{
	struct dirent *de;
	struct stat st;
	char *pdir;
	DIR *d;

	memset(m, 0, sizeof(*m));
	m->loaded = !stat(opt.sysfs, &st) && S_ISDIR(st.st_mode);
	if (!m->loaded)
		return;
	m->version = read_value(opt.sysfs, "version");
	m->srcversion = read_value(opt.sysfs, "srcversion");
	m->refcnt = read_value(opt.sysfs, "refcnt");
	m->taint = read_value(opt.sysfs, "taint");
	if (asprintf(&pdir, "%s/parameters", opt.sysfs) < 0)
		die(1, "out of memory");
	d = opendir(pdir);
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		m->params = xrealloc(m->params, (m->nparams + 1) *
				     sizeof(*m->params));
		m->params[m->nparams].name = strdup(de->d_name);
		if (!m->params[m->nparams].name)
			die(1, "out of memory");
		m->params[m->nparams].value = read_value(pdir, de->d_name);
		m->nparams++;
	}
	if (d)
		closedir(d);
	free(pdir);
	if (m->nparams)
		qsort(m->params, m->nparams, sizeof(*m->params), cmp_param);
}

static void free_module(struct module_info *m)
{
	int i;

	for (i = 0; i < m->nparams; i++) {
		free(m->params[i].name);
		free(m->params[i].value);
	}
	free(m->params);
	free(m->version);
	free(m->srcversion);
	free(m->refcnt);
	free(m->taint);
}

/* Why debugfs file path could not be read, as a phrase. */
static const char *debugfs_why(int err, char *buf, size_t len)
{
	struct statfs sfs;

	if (err == -EINVAL)
		return "unexpected format";
	if (err == -EACCES || err == -EPERM)
		snprintf(buf, len, "%s (debugfs is readable by root only)",
			 strerror(-err));
	else if (err == -ENOENT && opt.default_debugfs &&
		 (statfs(DEBUGFS_DIR, &sfs) || sfs.f_type != DEBUGFS_MAGIC_NR))
		snprintf(buf, len, "debugfs is not mounted (mount -t debugfs "
			 "none " DEBUGFS_DIR ")");
	else
		snprintf(buf, len, "%s", strerror(-err));
	return buf;
}

static void read_debugfs(struct stats *s, struct ctab *t)
{
	char *buf;

	memset(s, 0, sizeof(*s));
	memset(t, 0, sizeof(*t));
	s->err = read_file(opt.stats, &buf);
	if (!s->err)
		s->err = stats_parse(s, buf);
	t->err = read_file(opt.contexts, &buf);
	if (!t->err)
		t->err = ctab_parse(t, buf);
}

/* ------------------------------------------------------------------ */
/* Text output                                                         */
/* ------------------------------------------------------------------ */

#define ROW "\t%-20s "

static void print_limit_bytes(const char *name, uint64_t v)
{
	char b[32];

	if (v >= 1024)
		printf(ROW "%" PRIu64 " (%s)\n", name, v,
		       fmt_bytes(v, b, sizeof(b)));
	else
		printf(ROW "%" PRIu64 "\n", name, v);
}

static const char *rlim_str(rlim_t v, char *buf, size_t len)
{
	char b[32];

	if (v == RLIM_INFINITY)
		return "unlimited";
	snprintf(buf, len, "%llu (%s)", (unsigned long long)v,
		 fmt_bytes(v, b, sizeof(b)));
	return buf;
}

static void print_table(const struct ctab *t)
{
	int w[MAX_COLS], i, r;

	for (i = 0; i < t->ncols; i++)
		w[i] = strlen(t->col[i]);
	for (r = 0; r < t->nrows; r++)
		for (i = 0; i < t->ncols; i++)
			if (t->rows[r][i] && (int)strlen(t->rows[r][i]) > w[i])
				w[i] = strlen(t->rows[r][i]);
	printf("\t");
	for (i = 0; i < t->ncols; i++)
		printf("%s%*s", i ? "  " : "", i == ctab_col(t, "comm") ?
		       -w[i] : w[i], t->col[i]);
	printf("\n");
	for (r = 0; r < t->nrows; r++) {
		printf("\t");
		for (i = 0; i < t->ncols; i++) {
			const char *v = t->rows[r][i] ? t->rows[r][i] : "-";

			printf("%s%*s", i ? "  " : "",
			       i == ctab_col(t, "comm") ? -w[i] : w[i], v);
		}
		printf("\n");
	}
}

static void print_text(const char *dev, struct hcomm_ctx *ctx,
		       const struct hcomm_info *in,
		       const struct module_info *m, const struct rlimit *rl,
		       const struct stats *s, const struct ctab *t)
{
	char b1[64], b2[64], why[160];
	uint64_t unknown;
	const char *env;
	size_t i;
	int f, n;

	printf("hcomm device: %s\n", dev);
	if (!m->loaded)
		printf(ROW "unknown (no %s)\n", "module:", opt.sysfs);
	else if (m->version)
		printf(ROW "%s%s%s\n", "module version:", m->version,
		       m->srcversion ? ", srcversion " : "",
		       m->srcversion ? m->srcversion : "");
	else if (m->srcversion)
		printf(ROW "srcversion %s (no version)\n", "module version:",
		       m->srcversion);
	else
		printf(ROW "unknown (neither version nor srcversion in %s)\n",
		       "module version:", opt.sysfs);
	if (opt.verbose && m->refcnt)
		printf(ROW "%s\n", "module refcnt:", m->refcnt);
	if (opt.verbose && m->taint)
		printf(ROW "%s\n", "module taint:",
		       *m->taint ? m->taint : "(none)");
	printf(ROW "%u (libhcomm %d.%d, built for ABI %d)\n", "abi_version:",
	       in->abi_version, HCOMM_LIB_VERSION_MAJOR,
	       HCOMM_LIB_VERSION_MINOR, HCOMM_ABI_VERSION);
	printf(ROW "0x%" PRIx64 "", "features:", (uint64_t)in->features);
	for (f = 0; f < NR_FEATS; f++)
		if ((in->features & (1ULL << f)) && feat_names[f])
			printf(" %s", feat_names[f]);
	unknown = in->features & ~feat_known();
	for (f = 0; f < 64; f++)
		if (unknown & (1ULL << f))
			printf(" bit%d", f);
	if (!in->features)
		printf(" (none)");
	printf("\n");
	if (opt.verbose) {
		printf(ROW, "missing features:");
		for (f = 0, n = 0; f < NR_FEATS; f++)
			if (!(in->features & (1ULL << f)) && feat_names[f])
				printf("%s%s", n++ ? " " : "", feat_names[f]);
		printf("%s\n", n ? "" : "(none)");
	}
	env = getenv("HCOMM_NO_URING");
	if (hcomm_uses_uring(ctx))
		printf(ROW "io_uring passthrough (IORING_OP_URING_CMD)\n",
		       "commands via:");
	else
		printf(ROW "ioctl() (%s)\n", "commands via:",
		       !(in->features & HCOMM_FEAT_URING_CMD) ?
		       "the module lacks URING_CMD" :
		       env && *env && strcmp(env, "0") ? "HCOMM_NO_URING set" :
		       "io_uring not available to this process");
	print_limit_bytes("max_region_size:", in->max_region_size);
	printf(ROW "%u\n", "max_regions:", in->max_regions);
	print_limit_bytes("max_inline:", in->max_inline);
	print_limit_bytes("chunk_size:", in->chunk_size);
	printf(ROW "%u\n", "nr_doorbells:", in->nr_doorbells);
	print_limit_bytes("cache_limit:", in->cache_limit);
	printf(ROW, "page_sizes:");
	for (f = 0, n = 0; f < 64; f++)
		if (in->page_sizes & (1ULL << f))
			printf("%s%s", n++ ? ", " : "",
			       fmt_bytes(1ULL << f, b1, sizeof(b1)));
	printf("%s\n", n ? "" : "(none)");
	if (in->memlock_limit == ~0ULL && rl->rlim_cur != RLIM_INFINITY)
		printf(ROW "unlimited (CAP_IPC_LOCK: RLIMIT_MEMLOCK not "
		       "enforced)\n", "memlock_limit:");
	else if (in->memlock_limit == ~0ULL)
		printf(ROW "unlimited\n", "memlock_limit:");
	else
		print_limit_bytes("memlock_limit:", in->memlock_limit);
	printf(ROW "soft %s, hard %s\n", "RLIMIT_MEMLOCK:",
	       rlim_str(rl->rlim_cur, b1, sizeof(b1)),
	       rlim_str(rl->rlim_max, b2, sizeof(b2)));
	if (opt.verbose) {
		printf(ROW "%u regions, %" PRIu64 " pinned bytes, %" PRIu64
		       " cache bytes\n", "this context:", in->nr_regions,
		       (uint64_t)in->pinned_bytes, (uint64_t)in->cache_bytes);
		printf(ROW "%s\n", "uapi struct size:",
		       sizeof(*in) == 88 ? "88 (hcomm_info)" : "unexpected");
	}

	if (!m->loaded) {
		printf("module parameters: not available (no %s)\n",
		       opt.sysfs);
	} else {
		printf("module parameters (%s/parameters):\n", opt.sysfs);
		for (n = 0; n < m->nparams; n++)
			printf(ROW "%s\n", m->params[n].name,
			       m->params[n].value ? m->params[n].value :
			       "(unreadable)");
		if (!m->nparams)
			printf("\t(none)\n");
	}

	if (s->err) {
		printf("registered: not available (%s: %s)\n", opt.stats,
		       debugfs_why(s->err, why, sizeof(why)));
	} else {
		int64_t v, pages = 0;
		long psz = sysconf(_SC_PAGESIZE);

		printf("registered (%s, before this context opened):\n",
		       opt.stats);
		for (i = 0; i < s->n; i++) {
			if (!opt.verbose && !is_gauge(s->kv[i].name))
				continue;
			printf(ROW "%s", s->kv[i].name, s->kv[i].val);
			if ((!strcmp(s->kv[i].name, "pinned_pages") ||
			     !strcmp(s->kv[i].name, "memlock_pages")) &&
			    parse_i64(s->kv[i].val, &pages) && pages > 0)
				printf(" (%s)", fmt_bytes((uint64_t)pages * psz,
							  b1, sizeof(b1)));
			if (!strcmp(s->kv[i].name, "cache_bytes") &&
			    parse_i64(s->kv[i].val, &v) && v >= 1024)
				printf(" (%s)", fmt_bytes(v, b1, sizeof(b1)));
			printf("\n");
		}
	}

	if (t->err == -ENOENT && !s->err)
		printf("contexts: not provided by this module (no %s)\n",
		       opt.contexts);
	else if (t->err)
		printf("contexts: not available (%s: %s)\n", opt.contexts,
		       debugfs_why(t->err, why, sizeof(why)));
	else if (!t->nrows)
		printf("contexts (%s): none open\n", opt.contexts);
	else {
		printf("contexts (%s):\n", opt.contexts);
		print_table(t);
	}
	print_lib_text();
}

/* ------------------------------------------------------------------ */
/* JSON output                                                         */
/* ------------------------------------------------------------------ */

static void json_rlim(rlim_t v)
{
	if (v == RLIM_INFINITY)
		fputs("\"unlimited\"", stdout);
	else
		printf("%llu", (unsigned long long)v);
}

static void json_debugfs_err(int err)
{
	char why[160];

	json_str(stdout, debugfs_why(err, why, sizeof(why)));
}

static void print_json(const char *dev, struct hcomm_ctx *ctx,
		       const struct hcomm_info *in,
		       const struct module_info *m, const struct rlimit *rl,
		       const struct stats *s, const struct ctab *t)
{
	size_t i;
	int f, n, r, c;

	printf("{\"device\":");
	json_str(stdout, dev);
	printf(",\"library\":{\"version\":\"%d.%d\",\"abi_version\":%d},",
	       HCOMM_LIB_VERSION_MAJOR, HCOMM_LIB_VERSION_MINOR,
	       HCOMM_ABI_VERSION);
	printf("\"module\":{\"sysfs\":");
	json_str(stdout, opt.sysfs);
	printf(",\"loaded\":%s,\"version\":", m->loaded ? "true" : "false");
	json_str_or_null(m->version);
	printf(",\"srcversion\":");
	json_str_or_null(m->srcversion);
	printf(",\"refcnt\":");
	json_val(m->refcnt);
	printf(",\"taint\":");
	json_str_or_null(m->taint);
	printf(",\"parameters\":{");
	for (n = 0; n < m->nparams; n++) {
		printf("%s", n ? "," : "");
		json_str(stdout, m->params[n].name);
		putchar(':');
		json_val(m->params[n].value);
	}
	printf("}},\"abi_version\":%u,\"features\":{\"mask\":%" PRIu64
	       ",\"names\":[", in->abi_version, (uint64_t)in->features);
	for (f = 0, n = 0; f < NR_FEATS; f++)
		if ((in->features & (1ULL << f)) && feat_names[f])
			printf("%s\"%s\"", n++ ? "," : "", feat_names[f]);
	printf("],\"unknown_mask\":%" PRIu64 "},",
	       (uint64_t)(in->features & ~feat_known()));
	printf("\"uring\":%s,\"commands_via\":\"%s\",",
	       hcomm_uses_uring(ctx) ? "true" : "false",
	       hcomm_uses_uring(ctx) ? "io_uring" : "ioctl");
	printf("\"limits\":{\"max_region_size\":%" PRIu64 ",\"max_regions\":%u"
	       ",\"max_inline\":%u,\"chunk_size\":%u,\"nr_doorbells\":%u,"
	       "\"cache_limit\":%" PRIu64 ",\"page_sizes\":[",
	       (uint64_t)in->max_region_size, in->max_regions, in->max_inline,
	       in->chunk_size, in->nr_doorbells, (uint64_t)in->cache_limit);
	for (f = 0, n = 0; f < 64; f++)
		if (in->page_sizes & (1ULL << f))
			printf("%s%llu", n++ ? "," : "", 1ULL << f);
	printf("]},\"context\":{\"nr_regions\":%u,\"pinned_bytes\":%" PRIu64
	       ",\"cache_bytes\":%" PRIu64 "},", in->nr_regions,
	       (uint64_t)in->pinned_bytes, (uint64_t)in->cache_bytes);
	printf("\"memlock\":{\"limit\":");
	if (in->memlock_limit == ~0ULL)
		printf("\"unlimited\"");
	else
		printf("%" PRIu64, (uint64_t)in->memlock_limit);
	printf(",\"rlimit_soft\":");
	json_rlim(rl->rlim_cur);
	printf(",\"rlimit_hard\":");
	json_rlim(rl->rlim_max);
	printf("},\"stats\":{\"file\":");
	json_str(stdout, opt.stats);
	printf(",\"available\":%s,\"error\":", s->err ? "false" : "true");
	if (s->err)
		json_debugfs_err(s->err);
	else
		fputs("null", stdout);
	printf(",\"gauges\":{");
	for (i = 0, n = 0; i < s->n; i++)
		if (is_gauge(s->kv[i].name)) {
			printf("%s", n++ ? "," : "");
			json_str(stdout, s->kv[i].name);
			printf(":%" PRId64, s->kv[i].v);
		}
	printf("},\"counters\":{");
	for (i = 0, n = 0; i < s->n; i++)
		if (!is_gauge(s->kv[i].name)) {
			printf("%s", n++ ? "," : "");
			json_str(stdout, s->kv[i].name);
			printf(":%" PRId64, s->kv[i].v);
		}
	printf("}},\"contexts\":{\"file\":");
	json_str(stdout, opt.contexts);
	printf(",\"available\":%s,\"error\":", t->err ? "false" : "true");
	if (t->err == -ENOENT && !s->err)
		json_str(stdout, "not provided by this module");
	else if (t->err)
		json_debugfs_err(t->err);
	else
		fputs("null", stdout);
	printf(",\"columns\":[");
	for (c = 0; c < t->ncols; c++) {
		printf("%s", c ? "," : "");
		json_str(stdout, t->col[c]);
	}
	printf("],\"rows\":[");
	for (r = 0; r < t->nrows; r++) {
		printf("%s{", r ? "," : "");
		for (c = 0; c < t->ncols; c++) {
			printf("%s", c ? "," : "");
			json_str(stdout, t->col[c]);
			putchar(':');
			json_val(t->rows[r][c]);
		}
		printf("}");
	}
	printf("]},\"libhcomm\":");
	print_lib_json();
	printf("}\n");
}

/* ------------------------------------------------------------------ */
/* --peers: the peers files of running communicators                  */
/* ------------------------------------------------------------------ */

static json_object *jget(json_object *o, const char *k)
{
	json_object *v;

	return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

static uint64_t ju64(json_object *o, const char *k)
{
	json_object *v = jget(o, k);

	return v ? (uint64_t)json_object_get_int64(v) : 0;
}

static double jdbl(json_object *o, const char *k)
{
	json_object *v = jget(o, k);

	return v ? json_object_get_double(v) : 0;
}

static const char *jstr(json_object *o, const char *k)
{
	json_object *v = jget(o, k);

	return v && json_object_is_type(v, json_type_string) ?
	       json_object_get_string(v) : "?";
}

/* "64K", "1M", "inf": a route bound (json null: inf). */
static void size_str(json_object *v, char *buf, size_t len)
{
	uint64_t x;

	if (!v || json_object_is_type(v, json_type_null)) {
		snprintf(buf, len, "inf");
		return;
	}
	x = (uint64_t)json_object_get_int64(v);
	if (x >= (1ULL << 20) && !(x & ((1ULL << 20) - 1)))
		snprintf(buf, len, "%" PRIu64 "M", x >> 20);
	else if (x >= 1024 && !(x & 1023))
		snprintf(buf, len, "%" PRIu64 "K", x >> 10);
	else
		snprintf(buf, len, "%" PRIu64, x);
}

/*
 * Parse and check one peers file: the object, or NULL after a message
 * on stderr naming path.
 */
static json_object *peers_load(const char *path)
{
	enum json_tokener_error jerr;
	json_object *o, *t, *c;
	char *buf;
	int ret;

	ret = read_file(path, &buf);
	if (ret) {
		warn("%s: %s", path, strerror(-ret));
		return NULL;
	}
	o = json_tokener_parse_verbose(buf, &jerr);
	free(buf);
	if (!o) {
		warn("%s: not JSON: %s", path, json_tokener_error_desc(jerr));
		return NULL;
	}
	if (!json_object_is_type(o, json_type_object) || !jget(o, "version")) {
		warn("%s: not a libhcomm peers file (no \"version\")", path);
		goto bad;
	}
	if (ju64(o, "version") != HCOMM_PEERS_JSON_VERSION) {
		warn("%s: version %" PRIu64 ", this " PROG " reads version %d",
		     path, ju64(o, "version"), HCOMM_PEERS_JSON_VERSION);
		goto bad;
	}
	t = jget(o, "table");
	c = jget(o, "counters");
	if (!jget(o, "pid") || !jget(o, "rank") ||
	    !json_object_is_type(jget(t, "peers"), json_type_array) ||
	    !json_object_is_type(c, json_type_array)) {
		warn("%s: malformed: needs \"pid\", \"rank\", "
		     "\"table\": {\"peers\": []} and \"counters\": []", path);
		goto bad;
	}
	return o;
bad:
	json_object_put(o);
	return NULL;
}

/* One transport's counters towards a peer, one line. */
static void peers_print_counters(const char *xp, json_object *x)
{
	struct json_object_iterator it, end;
	int n = 0;

	printf("    %-7s sent %" PRIu64 " B in %" PRIu64 " ops, received %"
	       PRIu64 " B in %" PRIu64 " ops; %" PRIu64 " CRC errors, %"
	       PRIu64 " refused, %" PRIu64 " connections lost, %" PRIu64
	       " retransmits, %" PRIu64 " WC errors", xp,
	       ju64(x, "bytes_sent"), ju64(x, "ops_sent"),
	       ju64(x, "bytes_recv"), ju64(x, "ops_recv"),
	       ju64(x, "crc_errors"), ju64(x, "refused"),
	       ju64(x, "conn_lost"), ju64(x, "retransmits"),
	       ju64(x, "wc_errors"));
	x = jget(x, "wc_status");
	if (x && json_object_is_type(x, json_type_object)) {
		it = json_object_iter_begin(x);
		end = json_object_iter_end(x);
		for (; !json_object_iter_equal(&it, &end);
		     json_object_iter_next(&it)) {
			printf("%s%s %" PRId64, n++ ? ", " : " (",
			       json_object_iter_peek_name(&it),
			       json_object_get_int64(
				       json_object_iter_peek_value(&it)));
		}
	}
	printf("%s\n", n ? ")" : "");
}

/* One communicator's table, text. */
static void peers_print(const char *name, json_object *o)
{
	static const char *const xps[] = { "kernel", "rdma", "tcp" };
	json_object *t = jget(o, "table"), *peers = jget(t, "peers");
	json_object *cnt = jget(o, "counters");
	size_t i, j, k, np = json_object_array_length(peers);
	char lo[24], hi[24];

	printf("%s: pid %" PRIu64 ", rank %" PRIu64 " of %" PRIu64
	       ", transports %s\n", name, ju64(o, "pid"), ju64(o, "rank"),
	       ju64(o, "size"), jstr(t, "transports"));
	for (i = 0; i < np; i++) {
		json_object *p = json_object_array_get_idx(peers, i);
		json_object *links = jget(p, "links"), *rt = jget(p, "route");
		json_object *c = NULL;

		printf("  peer %" PRIu64 "\n    links:  ", ju64(p, "peer"));
		for (j = 0; j < sizeof(xps) / sizeof(xps[0]); j++) {
			json_object *l = jget(links, xps[j]);

			if (!l || !json_object_get_boolean(jget(l, "usable")))
				printf("%s -", xps[j]);
			else if (!json_object_get_boolean(jget(l, "probed")))
				printf("%s not probed", xps[j]);
			else
				printf("%s %.1f us %.1f MB/s %" PRIu64 " err",
				       xps[j], jdbl(l, "lat_us"),
				       jdbl(l, "bw_mbps"), ju64(l, "errors"));
			printf("%s", j + 1 < sizeof(xps) / sizeof(xps[0]) ?
			       ", " : "\n");
		}
		printf("    route: ");
		snprintf(lo, sizeof(lo), "0");
		for (j = 0; rt && j < json_object_array_length(rt); j++) {
			json_object *r = json_object_array_get_idx(rt, j);

			size_str(jget(r, "below"), hi, sizeof(hi));
			printf(" [%s, %s) %s", lo, hi, jstr(r, "transport"));
			snprintf(lo, sizeof(lo), "%s", hi);
		}
		if (!rt || !json_object_array_length(rt))
			printf(" none");
		printf(" (%s)\n", jstr(p, "why"));
		for (k = 0; k < json_object_array_length(cnt); k++) {
			c = json_object_array_get_idx(cnt, k);
			if (ju64(c, "peer") == ju64(p, "peer"))
				break;
			c = NULL;
		}
		for (j = 0; c && j < sizeof(xps) / sizeof(xps[0]); j++)
			if (jget(c, xps[j]))
				peers_print_counters(xps[j], jget(c, xps[j]));
	}
}

static bool pid_alive(json_object *o)
{
	int64_t pid = (int64_t)ju64(o, "pid");

	return pid > 0 && pid <= INT32_MAX &&
	       (!kill((pid_t)pid, 0) || errno == EPERM);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * hcomm_info --peers [DIR|FILE]: every live communicator's peers file of
 * DIR, or FILE.  Exit status 0, or 1 when something could not be read.
 */
static int peers_main(const char *path)
{
	char **names = NULL, *full;
	int n = 0, i, bad = 0, shown = 0;
	struct dirent *de;
	struct stat sb;
	json_object *o;
	DIR *d;

	if (stat(path, &sb)) {
		warn("%s: %s", path, strerror(errno));
		return 1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		o = peers_load(path);
		if (!o)
			return 1;
		if (opt.json)
			printf("%s\n", json_object_to_json_string_ext(o,
					JSON_C_TO_STRING_PLAIN));
		else
			peers_print(path, o);
		json_object_put(o);
		return 0;
	}
	d = opendir(path);
	if (!d) {
		warn("%s: %s", path, strerror(errno));
		return 1;
	}
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (strncmp(de->d_name, "hcomm-", 6) || l < 17 ||
		    strcmp(de->d_name + l - 11, ".peers.json"))
			continue;
		names = xrealloc(names, (n + 1) * sizeof(*names));
		names[n] = strdup(de->d_name);
		if (!names[n++])
			die(1, "out of memory");
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	if (opt.json) {
		printf("{\"dir\":");
		json_str(stdout, path);
		printf(",\"communicators\":[");
	}
	for (i = 0; i < n; i++) {
		if (asprintf(&full, "%s/%s", path, names[i]) < 0)
			die(1, "out of memory");
		o = peers_load(full);
		free(full);
		bad |= !o;
		if (o && pid_alive(o)) {
			if (opt.json)
				printf("%s%s", shown ? "," : "",
				       json_object_to_json_string_ext(o,
					       JSON_C_TO_STRING_PLAIN));
			else
				peers_print(names[i], o);
			shown++;
		}
		json_object_put(o);
		free(names[i]);
	}
	free(names);
	if (opt.json)
		printf("]}\n");
	else if (!shown)
		printf("%s: no running communicator (no live "
		       "hcomm-*.peers.json)\n", path);
	return bad;
}

/* ------------------------------------------------------------------ */
/* Main                                                                */
/* ------------------------------------------------------------------ */

static void usage(void)
{
	printf(
"usage: " PROG " [--json] [-v] [--stats PATH] [--contexts PATH] [--sysfs DIR]\n"
"       " PROG " --peers [--json] [DIR|FILE]\n"
"\n"
"Describes the hcomm device: module version, ABI version, features, limits,\n"
"memlock limits, module parameters, io_uring use, and what is registered\n"
"(debugfs statistics and open contexts; needs root).\n"
"\n"
"  -j, --json           one JSON object\n"
"  -v, --verbose        also counters, missing features, this context\n"
"  -s, --stats PATH     statistics file (default " STATS_PATH ")\n"
"  -C, --contexts PATH  per-context file (default " CONTEXTS_PATH ")\n"
"      --sysfs DIR      module's sysfs directory (default " MODULE_DIR ")\n"
"      --lib-stats DIR  statistics libhcomm communicators publish there\n"
"                       (default: $HCOMM_STATS_DIR)\n"
"  -p, --peers          the decision table and per-peer counters of the\n"
"                       running communicators whose hcomm-*.peers.json are\n"
"                       in DIR (default: --lib-stats, $HCOMM_STATS_DIR), or\n"
"                       of FILE; --json: the files' objects.  No device\n"
"                       needed\n"
"  -h, --help           this text\n"
"\n"
"HCOMM_DEVICE names another device node, HCOMM_NO_URING=1 forces ioctl().\n"
"Exit 1 when the device cannot be opened, 2 on usage errors.\n");
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "stats", required_argument, NULL, 's' },
		{ "contexts", required_argument, NULL, 'C' },
		{ "sysfs", required_argument, NULL, 'S' },
		{ "lib-stats", required_argument, NULL, 'L' },
		{ "peers", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct hcomm_info info;
	struct module_info mod;
	struct hcomm_ctx *ctx;
	struct rlimit rl;
	struct stats st;
	struct ctab ct;
	const char *dev;
	bool peers = false;
	int c, ret;

	while ((c = getopt_long(argc, argv, "jvs:C:ph", lopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			opt.json = true;
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 's':
			opt.stats = optarg;
			break;
		case 'C':
			opt.contexts = optarg;
			break;
		case 'S':
			opt.sysfs = optarg;
			break;
		case 'L':
			opt.lib_stats = optarg;
			break;
		case 'p':
			peers = true;
			break;
		case 'h':
			usage();
			return 0;
		default:
			fprintf(stderr, "Try '" PROG " --help'.\n");
			return 2;
		}
	}
	if (peers) {
		const char *path = optind < argc ? argv[optind++] :
				   opt.lib_stats ? opt.lib_stats :
				   getenv("HCOMM_STATS_DIR");

		if (optind < argc)
			die(2, "unexpected argument '%s' (try --help)",
			    argv[optind]);
		if (!path || !*path)
			die(2, "--peers: name a directory or file (or set "
			    "HCOMM_STATS_DIR)");
		ret = peers_main(path);
		if (fflush(stdout) || ferror(stdout))
			die(1, "write error on stdout: %s", strerror(errno));
		return ret;
	}
	if (optind < argc)
		die(2, "unexpected argument '%s' (try --help)", argv[optind]);
	opt.default_debugfs = !opt.stats && !opt.contexts;
	if (!opt.stats)
		opt.stats = STATS_PATH;
	if (!opt.contexts)
		opt.contexts = CONTEXTS_PATH;
	if (!opt.sysfs)
		opt.sysfs = MODULE_DIR;
	dev = getenv("HCOMM_DEVICE");
	if (!dev || !*dev)
		dev = HCOMM_DEVICE_PATH;

	/* What others have registered: before our own context exists. */
	read_debugfs(&st, &ct);
	if (!opt.lib_stats) {
		opt.lib_stats = getenv("HCOMM_STATS_DIR");
		if (opt.lib_stats && !*opt.lib_stats)
			opt.lib_stats = NULL;
	}
	if (opt.lib_stats)
		nlib = lib_stats_read(opt.lib_stats, libst, MAX_LIB);

	ret = hcomm_open(&ctx, 0);
	if (ret) {
		fprintf(stderr, PROG ": %s\n", hcomm_strerror(ret));
		if (*hcomm_errmsg())
			fprintf(stderr, PROG ": (%s)\n", hcomm_errmsg());
		free(st.buf);
		free(st.kv);
		free(ct.buf);
		free(ct.rows);
		return 1;
	}
	ret = hcomm_get_info(ctx, &info);
	if (ret) {
		fprintf(stderr, PROG ": GET_INFO: %s (%s)\n",
			hcomm_strerror(ret), hcomm_errmsg());
		hcomm_close(ctx);
		free(st.buf);
		free(st.kv);
		free(ct.buf);
		free(ct.rows);
		return 1;
	}
	if (getrlimit(RLIMIT_MEMLOCK, &rl))
		rl.rlim_cur = rl.rlim_max = RLIM_INFINITY;
	read_module(&mod);

	if (opt.json)
		print_json(dev, ctx, &info, &mod, &rl, &st, &ct);
	else
		print_text(dev, ctx, &info, &mod, &rl, &st, &ct);

	hcomm_close(ctx);
	free_module(&mod);
	free(st.buf);
	free(st.kv);
	free(ct.buf);
	free(ct.rows);
	if (fflush(stdout) || ferror(stdout))
		die(1, "write error on stdout: %s", strerror(errno));
	return 0;
}
