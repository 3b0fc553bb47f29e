/* SPDX-License-Identifier: MIT */
/*
 * hcomm_perf_mon: sample hcomm.ko's debugfs statistics at a fixed interval
 * and print rates, engine utilisation, gauges and per-context QoS shares.
 *
 *   hcomm_perf_mon [--interval DUR] [--count N] [--duration DUR] [--json]
 *                  [--output FILE] [--stats PATH] [--contexts PATH]
 *                  [--workers N] [--replay A,B,...]
 *
 * Reads /sys/kernel/debug/hcomm/stats ("name value" lines) and, when the
 * module provides it, /sys/kernel/debug/hcomm/contexts (a '#' header naming
 * the columns, then one line per open context).  It never opens /dev/hcomm.
 * Samples are taken on absolute CLOCK_MONOTONIC deadlines, so intervals do
 * not drift.  SIGINT/SIGTERM, --count or --duration end the run with a
 * summary line of totals; exit status 0.  Exit status 1 when the
 * statistics cannot be read (module not loaded, debugfs not mounted, not
 * root), 2 for a bad command line.
 *
 * --replay takes its samples from the listed files instead (a stats file,
 * or a directory holding "stats" and optionally "contexts"), one per
 * interval, without sleeping; each interval then counts as exactly
 * --interval long, which makes the output deterministic for tests.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>
#include <json.h>

#include "hcomm.h"

#define PROG		"hcomm_perf_mon"
#include "tools_util.h"
#define CONTEXTS_NAME	"contexts"
#define WORKERS_PATH	MODULE_DIR "/parameters/workers"
#define NSEC		1000000000LL
#define MAX_TRACKED	1024

/* ------------------------------------------------------------------ */
/* Files                                                               */
/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */
/* stats: "name value" lines                                           */
/* ------------------------------------------------------------------ */

static void stats_free(struct stats *s)
{
	free(s->buf);
	free(s->kv);
	memset(s, 0, sizeof(*s));
}

static bool stats_get(const struct stats *s, const char *name, int64_t *v)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (!strcmp(s->kv[i].name, name)) {
			*v = s->kv[i].v;
			return true;
		}
	return false;
}

/*
 * Growth of counter name from a to b.  A counter that went backwards (the
 * module was reloaded) or is new counts from 0.
 */
static bool counter_delta(const struct stats *a, const struct stats *b,
			  const char *name, int64_t *d)
{
	int64_t va, vb;

	if (!stats_get(b, name, &vb))
		return false;
	if (!stats_get(a, name, &va) || vb < va)
		va = 0;
	*d = vb - va;
	return true;
}

/* ------------------------------------------------------------------ */
/* contexts: '#' header naming columns, one line per context           */
/* ------------------------------------------------------------------ */

struct crow {
	char *v[MAX_COLS];	/* NULL when the line had no such field */
	char key[64];		/* identity across samples */
};

struct ctab {
	char *buf;
	int ncols;
	char *col[MAX_COLS];
	int nrows, cap;
	struct crow *rows;
};

static void ctab_free(struct ctab *t)
{
	free(t->buf);
	free(t->rows);
	memset(t, 0, sizeof(*t));
}

static int ctab_col(const struct ctab *t, const char *name)
{
	return col_index(t->col, t->ncols, name);
}

static const char *crow_str(const struct ctab *t, const struct crow *r,
			    const char *name)
{
	int c = ctab_col(t, name);

	return c < 0 ? NULL : r->v[c];
}

static bool crow_num(const struct ctab *t, const struct crow *r,
		     const char *name, int64_t *v)
{
	return parse_i64(crow_str(t, r, name), v);
}

/* ctab_walk() row: one more row. */
static void ctab_add_row(void *arg, char **v)
{
	struct ctab *t = arg;

	if (t->nrows == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 16;
		t->rows = xrealloc(t->rows, t->cap * sizeof(*t->rows));
	}
	memset(&t->rows[t->nrows], 0, sizeof(t->rows[0]));
	memcpy(t->rows[t->nrows].v, v, sizeof(t->rows[0].v));
	t->nrows++;
}

/*
 * Parse buf (taken over) with ctab_walk(), then give each row its key.
 * 0, or -1 without a header line.
 */
static int ctab_parse(struct ctab *t, char *buf)
{
	int idc, i, j;

	memset(t, 0, sizeof(*t));
	t->buf = buf;
	if (ctab_walk(buf, t->col, &t->ncols, ctab_add_row, t))
		return -1;
	/* Identity: an id column if there is one, else pid and ordinal. */
	idc = ctab_col(t, "id");
	if (idc < 0)
		idc = ctab_col(t, "ctx");
	for (i = 0; i < t->nrows; i++) {
		struct crow *r = &t->rows[i];
		const char *pid = crow_str(t, r, "pid");
		int ord = 0;

		if (idc >= 0 && r->v[idc]) {
			snprintf(r->key, sizeof(r->key), "id:%s", r->v[idc]);
			continue;
		}
		for (j = 0; j < i; j++) {
			const char *q = crow_str(t, &t->rows[j], "pid");

			if (q && pid && !strcmp(q, pid))
				ord++;
		}
		snprintf(r->key, sizeof(r->key), "pid:%s#%d", pid ? pid : "?",
			 ord);
	}
	return 0;
}

static const struct crow *ctab_find(const struct ctab *t, const char *key)
{
	int i;

	for (i = 0; i < t->nrows; i++)
		if (!strcmp(t->rows[i].key, key))
			return &t->rows[i];
	return NULL;
}

/* ------------------------------------------------------------------ */
/* JSON helpers                                                        */
/* ------------------------------------------------------------------ */

/* A column value: a JSON integer when it is one, else a string. */
static void json_val(FILE *f, const char *s)
{
	int64_t v;

	if (!s)
		fputs("null", f);
	else if (parse_i64(s, &v))
		fprintf(f, "%" PRId64, v);
	else
		json_str(f, s);
}

static void json_num(FILE *f, bool ok, const char *fmt, double v)
{
	if (ok)
		fprintf(f, fmt, v);
	else
		fputs("null", f);
}

/* ------------------------------------------------------------------ */
/* Time                                                                */
/* ------------------------------------------------------------------ */

static int64_t ts_ns(const struct timespec *ts)
{
	return ts->tv_sec * NSEC + ts->tv_nsec;
}

static struct timespec ns_ts(int64_t ns)
{
	struct timespec ts = { ns / NSEC, ns % NSEC };

	return ts;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts_ns(&ts);
}

static void iso_time(const struct timespec *ts, char *buf, size_t len)
{
	struct tm tm;
	size_t n;

	gmtime_r(&ts->tv_sec, &tm);
	n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%06ldZ", ts->tv_nsec / 1000);
}

static void clock_time(const struct timespec *ts, char *buf, size_t len)
{
	struct tm tm;
	size_t n;

	localtime_r(&ts->tv_sec, &tm);
	n = strftime(buf, len, "%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%03ld", ts->tv_nsec / 1000000);
}

/*
 * "250us", "100ms", "1s", "1.5s", "2m", "1h"; a bare number is seconds.
 * 0 and -1 on garbage, overflow or zero.
 */
static int parse_duration(const char *s, int64_t *ns)
{
	static const struct { const char *u; int64_t m; } units[] = {
		{ "ns", 1 }, { "us", 1000 }, { "ms", 1000000 },
		{ "s", NSEC }, { "", NSEC }, { "m", 60 * NSEC },
		{ "min", 60 * NSEC }, { "h", 3600 * NSEC },
	};
	unsigned __int128 v;
	uint64_t ip = 0, frac = 0, fdiv = 1;
	const char *p = s;
	int digits = 0;
	size_t i;

	for (; isdigit((unsigned char)*p); p++, digits++) {
		if (ip > (UINT64_MAX - 9) / 10)
			return -1;
		ip = ip * 10 + (*p - '0');
	}
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++, digits++)
			if (fdiv < 1000000000000ULL) {
				frac = frac * 10 + (*p - '0');
				fdiv *= 10;
			}
	}
	if (!digits)
		return -1;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(p, units[i].u))
			break;
	if (i == sizeof(units) / sizeof(units[0]))
		return -1;
	v = (unsigned __int128)ip * units[i].m +
	    (unsigned __int128)frac * units[i].m / fdiv;
	if (!v || v > INT64_MAX)
		return -1;
	*ns = (int64_t)v;
	return 0;
}

static const char *fmt_duration(int64_t ns, char *buf, size_t len)
{
	if (ns % NSEC == 0)
		snprintf(buf, len, "%llds", (long long)(ns / NSEC));
	else if (ns % 1000000 == 0)
		snprintf(buf, len, "%lldms", (long long)(ns / 1000000));
	else if (ns % 1000 == 0)
		snprintf(buf, len, "%lldus", (long long)(ns / 1000));
	else
		snprintf(buf, len, "%lldns", (long long)ns);
	return buf;
}

/* ------------------------------------------------------------------ */
/* Samples                                                             */
/* ------------------------------------------------------------------ */

struct sample {
	struct timespec mono, real;
	struct stats st;
	bool have_ctx;
	struct ctab ctx;
};

static void sample_free(struct sample *s)
{
	if (!s)
		return;
	stats_free(&s->st);
	ctab_free(&s->ctx);
	free(s);
}

static struct {
	const char *stats;
	const char *contexts;
	bool default_paths;
	bool json;
	int64_t interval, duration;
	uint64_t count;
	int workers;
	const char *workers_src;
	char **replay;
	int nreplay;
	FILE *out;
	long page_size;
	const char *lib_stats;	/* HCOMM_STATS_DIR or --lib-stats, or NULL */
} opt;

/*
 * The communicators' own registration caches (HCOMM_STATS_DIR), read at
 * each report, live (also with --replay); deltas against the previous
 * reading of the same file.
 */
#define MAX_LIB		256
static struct lib_stats lib_prev[MAX_LIB], lib_cur[MAX_LIB];
static int nlib_prev, nlib_cur;

static const struct hcomm_comm_stats *lib_before(const struct lib_stats *l)
{
	int i;

	for (i = 0; i < nlib_prev; i++)
		if (!strcmp(lib_prev[i].name, l->name) &&
		    lib_prev[i].f.pid == l->f.pid)
			return &lib_prev[i].f.st;
	return NULL;
}

/*
 * Per peer (when the communicator also writes "<name>.peers.json"): the
 * payload bytes each transport sent and received, read with the stats
 * files; rates against the previous reading of the same file.
 */
struct peer_ctr {
	int peer;
	int xp;				/* index of peer_xps[] */
	uint64_t sent, recv;
};

struct peer_file {
	bool have;			/* the peers file was read */
	int64_t t_ns;			/* when */
	int n;
	struct peer_ctr *c;
};

static const char *const peer_xps[] = { "kernel", "rdma", "tcp" };
static struct peer_file pf_prev[MAX_LIB], pf_cur[MAX_LIB];

static uint64_t pj_u64(json_object *o, const char *k)
{
	json_object *v;

	return json_object_object_get_ex(o, k, &v) ?
	       (uint64_t)json_object_get_int64(v) : 0;
}

/* The peers file next to lib stats file l into *pf (have: it was). */
static void peers_read(const struct lib_stats *l, struct peer_file *pf)
{
	size_t n = strlen(l->name), i, np;
	json_object *o, *a, *e, *x, *v;
	char *path;
	int k;

	memset(pf, 0, sizeof(*pf));
	if (n < 6 || asprintf(&path, "%s/%.*s.peers.json", opt.lib_stats,
			      (int)(n - 6), l->name) < 0)
		return;
	o = json_object_from_file(path);
	free(path);
	if (!o)
		return;
	if (!json_object_object_get_ex(o, "version", &v) ||
	    json_object_get_int(v) != HCOMM_PEERS_JSON_VERSION ||
	    !json_object_object_get_ex(o, "counters", &a) ||
	    !json_object_is_type(a, json_type_array))
		goto out;
	np = json_object_array_length(a);
	pf->c = xrealloc(NULL, (np * 3 + 1) * sizeof(*pf->c));
	for (i = 0; i < np; i++) {
		e = json_object_array_get_idx(a, i);
		for (k = 0; k < 3; k++) {
			if (!json_object_object_get_ex(e, peer_xps[k], &x))
				continue;
			pf->c[pf->n].peer = (int)pj_u64(e, "peer");
			pf->c[pf->n].xp = k;
			pf->c[pf->n].sent = pj_u64(x, "bytes_sent");
			pf->c[pf->n].recv = pj_u64(x, "bytes_recv");
			pf->n++;
		}
	}
	pf->have = true;
	pf->t_ns = now_ns();
out:
	json_object_put(o);
}

/* The previous reading of c's file, or NULL. */
static const struct peer_ctr *peer_before(int li, const struct peer_ctr *c,
					  double *secs)
{
	const struct lib_stats *l = &lib_cur[li];
	int i, j;

	for (i = 0; i < nlib_prev; i++) {
		if (strcmp(lib_prev[i].name, l->name) ||
		    lib_prev[i].f.pid != l->f.pid || !pf_prev[i].have)
			continue;
		for (j = 0; j < pf_prev[i].n; j++)
			if (pf_prev[i].c[j].peer == c->peer &&
			    pf_prev[i].c[j].xp == c->xp) {
				*secs = (pf_cur[li].t_ns - pf_prev[i].t_ns) /
					1e9;
				return *secs > 0 ? &pf_prev[i].c[j] : NULL;
			}
	}
	return NULL;
}

static void lib_sample(void)
{
	int i;

	for (i = 0; i < nlib_prev; i++)
		free(pf_prev[i].c);
	memcpy(lib_prev, lib_cur, sizeof(lib_cur[0]) * (size_t)nlib_cur);
	memcpy(pf_prev, pf_cur, sizeof(pf_cur[0]) * (size_t)nlib_cur);
	nlib_prev = nlib_cur;
	nlib_cur = lib_stats_read(opt.lib_stats, lib_cur, MAX_LIB);
	if (nlib_cur < 0)
		nlib_cur = 0;
	for (i = 0; i < nlib_cur; i++)
		if (lib_cur[i].alive)
			peers_read(&lib_cur[i], &pf_cur[i]);
		else
			memset(&pf_cur[i], 0, sizeof(pf_cur[i]));
}

static void lib_free(void)
{
	int i;

	for (i = 0; i < nlib_prev; i++)
		free(pf_prev[i].c);
	for (i = 0; i < nlib_cur; i++)
		free(pf_cur[i].c);
	nlib_prev = nlib_cur = 0;
}

/* The per-peer lines under communicator li (text). */
static void peers_text(int li)
{
	const struct peer_file *pf = &pf_cur[li];
	const struct peer_ctr *c, *b;
	double secs = 0;
	int i;

	for (i = 0; pf->have && i < pf->n; i++) {
		c = &pf->c[i];
		b = peer_before(li, c, &secs);
		fprintf(opt.out, "    peer %d %-6s", c->peer, peer_xps[c->xp]);
		if (b)
			fprintf(opt.out, " sent %9.1f MB/s recv %9.1f MB/s",
				(double)(c->sent - b->sent) / secs / 1e6,
				(double)(c->recv - b->recv) / secs / 1e6);
		else
			fprintf(opt.out, " sent %9s MB/s recv %9s MB/s", "-",
				"-");
		fprintf(opt.out, "  total %" PRIu64 " / %" PRIu64 " B\n",
			c->sent, c->recv);
	}
}

/* ,"peers":[...] of communicator li, when its peers file was read. */
static void peers_json(FILE *f, int li)
{
	const struct peer_file *pf = &pf_cur[li];
	const struct peer_ctr *c, *b;
	double secs = 0;
	int i;

	if (!pf->have)
		return;
	fprintf(f, ",\"peers\":[");
	for (i = 0; i < pf->n; i++) {
		c = &pf->c[i];
		b = peer_before(li, c, &secs);
		fprintf(f, "%s{\"peer\":%d,\"transport\":\"%s\","
			"\"bytes_sent\":%" PRIu64 ",\"bytes_recv\":%" PRIu64
			",\"sent_mb_per_s\":", i ? "," : "", c->peer,
			peer_xps[c->xp], c->sent, c->recv);
		json_num(f, b, "%.6f",
			 b ? (double)(c->sent - b->sent) / secs / 1e6 : 0);
		fprintf(f, ",\"recv_mb_per_s\":");
		json_num(f, b, "%.6f",
			 b ? (double)(c->recv - b->recv) / secs / 1e6 : 0);
		fputc('}', f);
	}
	fputc(']', f);
}

#define LIB_D(l, b, fld) ((b) ? (int64_t)((l)->f.st.fld - (b)->fld) : \
			  (int64_t)(l)->f.st.fld)

static void lib_text(void)
{
	int i;

	for (i = 0; i < nlib_cur; i++) {
		const struct lib_stats *l = &lib_cur[i];
		const struct hcomm_comm_stats *b = lib_before(l);

		if (!l->alive)
			continue;
		fprintf(opt.out, "  lib pid %d rank %d/%d: c.hit %" PRId64
			" c.miss %" PRId64 " c.stale %" PRId64 " c.evct %"
			PRId64 "  entries %" PRIu64 " (%.1f MiB) dead %" PRIu64
			"\n", l->f.pid, l->f.rank, l->f.world_size,
			LIB_D(l, b, rcache_hits), LIB_D(l, b, rcache_misses),
			LIB_D(l, b, rcache_stale),
			LIB_D(l, b, rcache_evictions), l->f.st.rcache_entries,
			l->f.st.rcache_bytes / 1048576.0, l->f.st.rcache_dead);
		peers_text(i);
	}
}

static void lib_json(FILE *f)
{
	int i, n = 0;

	fprintf(f, ",\"libhcomm\":[");
	for (i = 0; i < nlib_cur; i++) {
		const struct lib_stats *l = &lib_cur[i];
		const struct hcomm_comm_stats *b = lib_before(l);

		if (!l->alive)
			continue;
		fprintf(f, "%s{\"file\":", n++ ? "," : "");
		json_str(f, l->name);
		fprintf(f, ",\"pid\":%d,\"rank\":%d,\"world_size\":%d,"
			"\"rcache_hits_delta\":%" PRId64
			",\"rcache_misses_delta\":%" PRId64
			",\"rcache_stale_delta\":%" PRId64
			",\"rcache_evictions_delta\":%" PRId64
			",\"rcache_entries\":%" PRIu64 ",\"rcache_bytes\":%" PRIu64
			",\"rcache_dead\":%" PRIu64, l->f.pid, l->f.rank,
			l->f.world_size, LIB_D(l, b, rcache_hits),
			LIB_D(l, b, rcache_misses), LIB_D(l, b, rcache_stale),
			LIB_D(l, b, rcache_evictions), l->f.st.rcache_entries,
			l->f.st.rcache_bytes, l->f.st.rcache_dead);
		peers_json(f, i);
		fputc('}', f);
	}
	fputc(']', f);
}

/* Why the default statistics file cannot be read, for the user. */
static void explain_stats_error(int err)
{
	struct statfs sfs;
	struct stat st;

	if (err == EACCES || err == EPERM)
		die(1, "cannot read %s: %s; debugfs is readable by root only: "
		    "run as root", opt.stats, strerror(err));
	if (err == ENOENT && opt.default_paths) {
		if (stat(MODULE_DIR, &st))
			die(1, "hcomm module not loaded (no %s): modprobe hcomm, "
			    "or insmod hcomm.ko", MODULE_DIR);
		if (statfs(DEBUGFS_DIR, &sfs) ||
		    sfs.f_type != DEBUGFS_MAGIC_NR)
			die(1, "debugfs is not mounted on %s: mount -t debugfs "
			    "none %s", DEBUGFS_DIR, DEBUGFS_DIR);
		die(1, "cannot read %s: %s (module loaded and debugfs mounted:"
		    " a kernel without debugfs support?)", opt.stats,
		    strerror(err));
	}
	die(1, "cannot read %s: %s", opt.stats, strerror(err));
}

static int ctx_warned;

/*
 * Read one sample from stats_path/ctx_path.  Returns 0, or -errno of the
 * stats file (-EINVAL: no statistics in it).  The contexts file is
 * optional: its absence is reported once.
 */
static int take_sample(struct sample **out, const char *stats_path,
		       const char *ctx_path)
{
	struct sample *s = calloc(1, sizeof(*s));
	char *buf;
	int ret;

	if (!s)
		die(1, "out of memory");
	ret = read_file(stats_path, &buf);
	clock_gettime(CLOCK_MONOTONIC, &s->mono);
	clock_gettime(CLOCK_REALTIME, &s->real);
	if (ret) {
		free(s);
		return ret;
	}
	if (stats_parse(&s->st, buf)) {
		sample_free(s);
		return -EINVAL;
	}
	if (ctx_path) {
		ret = read_file(ctx_path, &buf);
		if (!ret && ctab_parse(&s->ctx, buf)) {
			ctab_free(&s->ctx);
			ret = -EINVAL;
		}
		s->have_ctx = !ret;
		if (ret && !ctx_warned++)
			warn("%s: %s; per-context QoS shares not shown%s",
			     ctx_path, ret == -EINVAL ? "no column header" :
			     strerror(-ret), ret == -ENOENT ?
			     " (module without per-context statistics)" : "");
	}
	*out = s;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Per-context accounting over the whole run                           */
/* ------------------------------------------------------------------ */

struct tracked {
	char key[64];
	char pid[24], comm[40];
	int64_t base, last;	/* served_bytes at first sight, latest */
};

static struct tracked *tracked;
static int ntracked;

static void track(const struct ctab *t, const struct crow *r, int64_t served,
		  int64_t base)
{
	struct tracked *k;
	const char *s;
	int i;

	for (i = 0; i < ntracked; i++)
		if (!strcmp(tracked[i].key, r->key))
			break;
	if (i == ntracked) {
		if (ntracked == MAX_TRACKED)
			return;
		tracked = xrealloc(tracked, (ntracked + 1) *
				   sizeof(*tracked));
		k = &tracked[ntracked++];
		memset(k, 0, sizeof(*k));
		snprintf(k->key, sizeof(k->key), "%s", r->key);
		s = crow_str(t, r, "pid");
		snprintf(k->pid, sizeof(k->pid), "%s", s ? s : "?");
		s = crow_str(t, r, "comm");
		snprintf(k->comm, sizeof(k->comm), "%s", s ? s : "?");
		k->base = base;
	}
	k = &tracked[i];
	if (served < k->last)		/* another context, same key */
		k->base -= k->last;
	k->last = served;
}

/* ------------------------------------------------------------------ */
/* Reports                                                             */
/* ------------------------------------------------------------------ */

struct rates {
	double secs;
	bool have_bytes, have_xfers, have_chunks, have_util;
	int64_t bytes, inl, async, chunks, hits, misses, evictions, invals;
	int64_t db, errors, busy;
	double util;
};

static void compute(const struct stats *a, const struct stats *b,
		    int64_t elapsed, struct rates *r)
{
	memset(r, 0, sizeof(*r));
	r->secs = elapsed / 1e9;
	r->have_bytes = counter_delta(a, b, "xfer_bytes", &r->bytes);
	r->have_xfers = counter_delta(a, b, "xfer_inline", &r->inl) &
			counter_delta(a, b, "xfer_async", &r->async);
	r->have_chunks = counter_delta(a, b, "xfer_chunks", &r->chunks);
	counter_delta(a, b, "cache_hits", &r->hits);
	counter_delta(a, b, "cache_misses", &r->misses);
	counter_delta(a, b, "cache_evictions", &r->evictions);
	counter_delta(a, b, "cache_invalidations", &r->invals);
	counter_delta(a, b, "db_signals", &r->db);
	counter_delta(a, b, "cmd_errors", &r->errors);
	r->have_util = counter_delta(a, b, "engine_busy_ns", &r->busy) &&
		       opt.workers > 0;
	if (r->have_util)
		r->util = (double)r->busy / ((double)elapsed * opt.workers);
}

static int64_t gauge(const struct stats *s, const char *name)
{
	int64_t v = 0;

	stats_get(s, name, &v);
	return v;
}

static double pinned_mib(const struct stats *s)
{
	return (double)gauge(s, "pinned_pages") * opt.page_size /
	       (1024.0 * 1024.0);
}

/* served_bytes growth of row r of cur since prev; false if unknown. */
static bool ctx_served(const struct sample *prev, const struct sample *cur,
		       const struct crow *r, int64_t *d, int64_t *served)
{
	const struct crow *p;
	int64_t was;

	if (!crow_num(&cur->ctx, r, "served_bytes", served))
		return false;
	if (!prev || !prev->have_ctx)
		return false;
	p = ctab_find(&prev->ctx, r->key);
	if (!p || !crow_num(&prev->ctx, p, "served_bytes", &was) ||
	    was > *served)
		was = 0;		/* opened during the interval */
	*d = *served - was;
	return true;
}

static bool ctx_active(const struct sample *prev, const struct sample *cur,
		       const struct crow *r)
{
	int64_t d, served, act;

	if (ctx_served(prev, cur, r, &d, &served) && d > 0)
		return true;
	return crow_num(&cur->ctx, r, "xfers_active", &act) && act > 0;
}

static void print_header(void)
{
	char ibuf[32], dbuf[32];

	if (opt.json) {
		fprintf(opt.out, "{\"type\":\"start\",\"stats\":");
		json_str(opt.out, opt.stats);
		fprintf(opt.out, ",\"contexts_file\":");
		if (opt.contexts)
			json_str(opt.out, opt.contexts);
		else
			fputs("null", opt.out);
		fprintf(opt.out, ",\"interval_s\":%.9g,\"duration_s\":",
			opt.interval / 1e9);
		json_num(opt.out, opt.duration, "%.9g", opt.duration / 1e9);
		fprintf(opt.out, ",\"count\":");
		json_num(opt.out, opt.count, "%.0f", (double)opt.count);
		fprintf(opt.out, ",\"workers\":%d,\"workers_source\":",
			opt.workers);
		json_str(opt.out, opt.workers_src);
		fprintf(opt.out, ",\"replay\":%s}\n",
			opt.nreplay ? "true" : "false");
		return;
	}
	if (opt.nreplay)
		fprintf(opt.out, "# " PROG ": replay of %d samples from %s, "
			"every %s", opt.nreplay, opt.stats,
			fmt_duration(opt.interval, ibuf, sizeof(ibuf)));
	else
		fprintf(opt.out, "# " PROG ": %s every %s", opt.stats,
			fmt_duration(opt.interval, ibuf, sizeof(ibuf)));
	if (opt.duration)
		fprintf(opt.out, " for %s",
			fmt_duration(opt.duration, dbuf, sizeof(dbuf)));
	if (opt.count)
		fprintf(opt.out, ", %" PRIu64 " samples", opt.count);
	fprintf(opt.out, "; %d engine workers (%s)\n", opt.workers,
		opt.workers_src);
	fprintf(opt.out, "%-12s %9s %8s %8s %8s %8s %6s %6s %6s %6s %6s "
		"%4s %6s %4s %6s %8s %4s\n", "time", "MB/s", "xfer/s",
		"inl/s", "async/s", "chunk/s", "c.hit", "c.miss", "c.evct",
		"c.inv", "dbsig", "err", "util%", "ctx", "regs", "pinMiB",
		"act");
}

static void report_text(const struct sample *prev, const struct sample *cur,
			const struct rates *r)
{
	const struct stats *s = &cur->st;
	char tbuf[32], util[16];
	int i, active = 0;

	clock_time(&cur->real, tbuf, sizeof(tbuf));
	if (r->have_util)
		snprintf(util, sizeof(util), "%.1f", 100 * r->util);
	else
		snprintf(util, sizeof(util), "-");
	fprintf(opt.out, "%-12s %9.1f %8.0f %8.0f %8.0f %8.0f %6" PRId64
		" %6" PRId64 " %6" PRId64 " %6" PRId64 " %6" PRId64 " %4"
		PRId64 " %6s %4" PRId64 " %6" PRId64 " %8.1f %4" PRId64 "\n",
		tbuf, r->bytes / r->secs / 1e6, (r->inl + r->async) / r->secs,
		r->inl / r->secs, r->async / r->secs, r->chunks / r->secs,
		r->hits, r->misses, r->evictions, r->invals, r->db, r->errors,
		util, gauge(s, "contexts"), gauge(s, "regions"),
		pinned_mib(s), gauge(s, "xfers_active"));
	if (opt.lib_stats)
		lib_text();
	if (!cur->have_ctx)
		return;
	for (i = 0; i < cur->ctx.nrows; i++)
		active += ctx_active(prev, cur, &cur->ctx.rows[i]);
	if (active < 2)
		return;
	for (i = 0; i < cur->ctx.nrows; i++) {
		const struct crow *c = &cur->ctx.rows[i];
		const char *pid = crow_str(&cur->ctx, c, "pid");
		const char *comm = crow_str(&cur->ctx, c, "comm");
		const char *share = crow_str(&cur->ctx, c, "share_pct");
		int64_t d, served, mn, mx, pr;

		if (!ctx_active(prev, cur, c))
			continue;
		fprintf(opt.out, "  ctx %s %-16s share %3s%%", pid ? pid : "?",
			comm ? comm : "?", share ? share : "-");
		if (ctx_served(prev, cur, c, &d, &served))
			fprintf(opt.out, " %9.1f MB/s", d / r->secs / 1e6);
		else
			fprintf(opt.out, " %9s MB/s", "-");
		if (crow_num(&cur->ctx, c, "min_rate", &mn) &&
		    crow_num(&cur->ctx, c, "max_rate", &mx) &&
		    crow_num(&cur->ctx, c, "priority", &pr))
			fprintf(opt.out, "  (min %" PRId64 "%% max %" PRId64
				"%% prio %" PRId64 ")", mn, mx, pr);
		fputc('\n', opt.out);
	}
}

static void json_rates(const struct rates *r)
{
	FILE *f = opt.out;

	fprintf(f, "\"rates\":{\"bytes_per_s\":");
	json_num(f, r->have_bytes, "%.3f", r->bytes / r->secs);
	fprintf(f, ",\"mb_per_s\":");
	json_num(f, r->have_bytes, "%.6f", r->bytes / r->secs / 1e6);
	fprintf(f, ",\"xfers_per_s\":");
	json_num(f, r->have_xfers, "%.3f", (r->inl + r->async) / r->secs);
	fprintf(f, ",\"inline_per_s\":");
	json_num(f, r->have_xfers, "%.3f", r->inl / r->secs);
	fprintf(f, ",\"async_per_s\":");
	json_num(f, r->have_xfers, "%.3f", r->async / r->secs);
	fprintf(f, ",\"inline_fraction\":");
	json_num(f, r->have_xfers && r->inl + r->async, "%.6f",
		 (double)r->inl / (double)(r->inl + r->async ?
					   r->inl + r->async : 1));
	fprintf(f, ",\"chunks_per_s\":");
	json_num(f, r->have_chunks, "%.3f", r->chunks / r->secs);
	fprintf(f, ",\"db_signals_per_s\":%.3f},", r->db / r->secs);
	fprintf(f, "\"engine\":{\"workers\":%d,\"busy_ns\":%" PRId64
		",\"util\":", opt.workers, r->busy);
	json_num(f, r->have_util, "%.6f", r->util);
	fprintf(f, "},");
}

static void json_deltas(const struct stats *a, const struct stats *b)
{
	size_t i, n = 0;
	int64_t d;

	fprintf(opt.out, "\"deltas\":{");
	for (i = 0; i < b->n; i++) {
		if (is_gauge(b->kv[i].name) ||
		    !counter_delta(a, b, b->kv[i].name, &d))
			continue;
		fprintf(opt.out, "%s", n++ ? "," : "");
		json_str(opt.out, b->kv[i].name);
		fprintf(opt.out, ":%" PRId64, d);
	}
	fprintf(opt.out, "},");
}

static void json_gauges(const struct stats *s)
{
	size_t i, n = 0;

	fprintf(opt.out, "\"gauges\":{");
	for (i = 0; i < s->n; i++) {
		if (!is_gauge(s->kv[i].name))
			continue;
		fprintf(opt.out, "%s", n++ ? "," : "");
		json_str(opt.out, s->kv[i].name);
		fprintf(opt.out, ":%" PRId64, s->kv[i].v);
	}
	fprintf(opt.out, "%s\"pinned_mib\":%.3f},", n ? "," : "",
		pinned_mib(s));
}

static void report_json(const struct sample *prev, const struct sample *cur,
			const struct rates *r, uint64_t seq)
{
	FILE *f = opt.out;
	char tbuf[64];
	int i, c;

	iso_time(&cur->real, tbuf, sizeof(tbuf));
	fprintf(f, "{\"type\":\"interval\",\"seq\":%" PRIu64 ",\"time\":\"%s\""
		",\"mono_s\":%.6f,\"elapsed_s\":%.6f,", seq, tbuf,
		ts_ns(&cur->mono) / 1e9, r->secs);
	json_rates(r);
	json_deltas(&prev->st, &cur->st);
	json_gauges(&cur->st);
	fprintf(f, "\"contexts_available\":%s,\"contexts\":[",
		cur->have_ctx ? "true" : "false");
	for (i = 0; cur->have_ctx && i < cur->ctx.nrows; i++) {
		const struct crow *row = &cur->ctx.rows[i];
		int64_t d, served;
		bool ok;

		fprintf(f, "%s{", i ? "," : "");
		for (c = 0; c < cur->ctx.ncols; c++) {
			json_str(f, cur->ctx.col[c]);
			fputc(':', f);
			json_val(f, row->v[c]);
			fputc(',', f);
		}
		ok = ctx_served(prev, cur, row, &d, &served);
		fprintf(f, "\"served_delta\":");
		json_num(f, ok, "%.0f", (double)d);
		fprintf(f, ",\"mb_per_s\":");
		json_num(f, ok, "%.6f", ok ? d / r->secs / 1e6 : 0);
		fprintf(f, ",\"active\":%s}",
			ctx_active(prev, cur, row) ? "true" : "false");
	}
	fputc(']', f);
	if (opt.lib_stats)
		lib_json(f);
	fprintf(f, "}\n");
}

static double peak_bps;

static void report(const struct sample *prev, const struct sample *cur,
		   uint64_t seq)
{
	int64_t elapsed = ts_ns(&cur->mono) - ts_ns(&prev->mono);
	struct rates r;
	int i;

	if (elapsed <= 0)
		elapsed = 1;
	compute(&prev->st, &cur->st, elapsed, &r);
	if (r.bytes / r.secs > peak_bps)
		peak_bps = r.bytes / r.secs;
	if (opt.lib_stats)
		lib_sample();
	for (i = 0; cur->have_ctx && i < cur->ctx.nrows; i++) {
		const struct crow *row = &cur->ctx.rows[i];
		int64_t d, served;

		if (ctx_served(prev, cur, row, &d, &served))
			track(&cur->ctx, row, served, served - d);
	}
	if (opt.json)
		report_json(prev, cur, &r, seq);
	else
		report_text(prev, cur, &r);
}

static void summary(const struct sample *first, const struct sample *last,
		    uint64_t intervals, const char *why)
{
	int64_t elapsed = ts_ns(&last->mono) - ts_ns(&first->mono);
	FILE *f = opt.out;
	struct rates r;
	char util[16];
	int i;

	if (elapsed <= 0)
		elapsed = 1;
	compute(&first->st, &last->st, elapsed, &r);
	if (opt.json) {
		char tbuf[64];

		iso_time(&last->real, tbuf, sizeof(tbuf));
		fprintf(f, "{\"type\":\"summary\",\"time\":\"%s\",\"mono_s\":"
			"%.6f,\"elapsed_s\":%.6f,\"intervals\":%" PRIu64
			",\"end\":\"%s\",\"totals\":{\"bytes\":%" PRId64
			",\"xfers\":%" PRId64 ",\"inline\":%" PRId64
			",\"async\":%" PRId64 ",\"chunks\":%" PRId64
			",\"cache_hits\":%" PRId64 ",\"cache_misses\":%" PRId64
			",\"cache_evictions\":%" PRId64
			",\"cache_invalidations\":%" PRId64
			",\"db_signals\":%" PRId64 ",\"errors\":%" PRId64
			"},\"peak_bytes_per_s\":%.3f,", tbuf,
			ts_ns(&last->mono) / 1e9, r.secs, intervals, why,
			r.bytes, r.inl + r.async, r.inl, r.async, r.chunks,
			r.hits, r.misses, r.evictions, r.invals, r.db,
			r.errors, peak_bps);
		json_rates(&r);
		json_deltas(&first->st, &last->st);
		json_gauges(&last->st);
		fprintf(f, "\"contexts\":[");
		for (i = 0; i < ntracked; i++) {
			fprintf(f, "%s{\"pid\":", i ? "," : "");
			json_val(f, tracked[i].pid);
			fprintf(f, ",\"comm\":");
			json_str(f, tracked[i].comm);
			fprintf(f, ",\"served_bytes\":%" PRId64 ",\"mb_per_s\":"
				"%.6f}", tracked[i].last - tracked[i].base,
				(tracked[i].last - tracked[i].base) / r.secs /
				1e6);
		}
		fprintf(f, "]}\n");
		return;
	}
	if (r.have_util)
		snprintf(util, sizeof(util), "%.1f%%", 100 * r.util);
	else
		snprintf(util, sizeof(util), "n/a");
	fprintf(f, "total: %.3f s, %" PRIu64 " intervals (%s): %" PRId64
		" bytes (%.1f MB/s, peak %.1f MB/s), %" PRId64 " xfers (%.0f/s;"
		" %" PRId64 " inline, %" PRId64 " async), %" PRId64 " chunks, "
		"cache %" PRId64 " hits %" PRId64 " misses %" PRId64
		" evictions %" PRId64 " invalidations, %" PRId64
		" db signals, %" PRId64 " errors, engine util %s\n", r.secs,
		intervals, why, r.bytes, r.bytes / r.secs / 1e6, peak_bps / 1e6,
		r.inl + r.async, (r.inl + r.async) / r.secs, r.inl, r.async,
		r.chunks, r.hits, r.misses, r.evictions, r.invals, r.db,
		r.errors, util);
	for (i = 0; i < ntracked; i++)
		fprintf(f, "total: ctx %s %s served %" PRId64
			" bytes (%.1f MB/s)\n", tracked[i].pid,
			tracked[i].comm, tracked[i].last - tracked[i].base,
			(tracked[i].last - tracked[i].base) / r.secs / 1e6);
}

/* ------------------------------------------------------------------ */
/* Main                                                                */
/* ------------------------------------------------------------------ */

static volatile sig_atomic_t stop_sig;

static void on_signal(int sig)
{
	stop_sig = sig;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: " PROG " [--interval DUR] [--count N] [--duration DUR] [--json]\n"
"                      [--output FILE] [--stats PATH] [--contexts PATH]\n"
"                      [--workers N] [--replay A,B,...] [--lib-stats DIR]\n"
"\n"
"Samples hcomm.ko's debugfs statistics and prints, per interval, transfer\n"
"rates, cache and doorbell activity, engine utilisation, gauges and the\n"
"QoS share of each context.  Needs root (debugfs), not /dev/hcomm.\n"
"\n"
"  -i, --interval DUR   sampling interval (default 1s); DUR is a number\n"
"                       with ns, us, ms, s, m or h (bare: seconds)\n"
"  -c, --count N        stop after N intervals\n"
"  -d, --duration DUR   stop after this long\n"
"  -j, --json           one JSON object per line (start, interval...,\n"
"                       summary)\n"
"  -o, --output FILE    write to FILE (truncated, line-buffered)\n"
"  -s, --stats PATH     statistics file (default " STATS_PATH ")\n"
"  -C, --contexts PATH  per-context file (default: \"contexts\" next to\n"
"                       the statistics file)\n"
"  -w, --workers N      engine workers for the utilisation (default:\n"
"                       " WORKERS_PATH ")\n"
"  -r, --replay LIST    read the samples from these files (stats files or\n"
"                       directories with stats and contexts), one per\n"
"                       interval, without waiting\n"
"      --lib-stats DIR  also the registration caches of the libhcomm\n"
"                       communicators publishing there, read live, and\n"
"                       per peer the bytes each transport moved (from\n"
"                       their peers files) (default: $HCOMM_STATS_DIR)\n"
"  -h, --help           this text\n"
"\n"
"Ends on SIGINT/SIGTERM, --count or --duration with a summary of totals\n"
"(exit 0).  Exit 1 when the statistics cannot be read, 2 on usage errors.\n");
}

static uint64_t parse_count(const char *s, const char *what, uint64_t max)
{
	int64_t v;

	if (!parse_i64(s, &v) || v < 1 || (uint64_t)v > max)
		die(2, "invalid %s '%s': expected an integer from 1 to %" PRIu64,
		    what, s, max);
	return v;
}

static void get_duration(const char *s, const char *what, int64_t *ns)
{
	if (parse_duration(s, ns))
		die(2, "invalid %s '%s': expected a positive duration such as "
		    "250us, 100ms, 1s or 1.5s", what, s);
}

static char *dir_file(const char *path, const char *name)
{
	const char *slash = strrchr(path, '/');
	char *s;

	if (!slash) {
		s = strdup(name);
	} else if (asprintf(&s, "%.*s/%s", (int)(slash - path), path,
			    name) < 0) {
		s = NULL;
	}
	if (!s)
		die(1, "out of memory");
	return s;
}

static void workers_from_sysfs(void)
{
	char *buf;
	int64_t v;
	long cpus;

	if (opt.workers) {
		opt.workers_src = "--workers";
		return;
	}
	if (!read_file(WORKERS_PATH, &buf)) {
		buf[strcspn(buf, "\n")] = 0;
		if (parse_i64(buf, &v) && v > 0 && v <= INT_MAX) {
			opt.workers = v;
			opt.workers_src = WORKERS_PATH;
		}
		free(buf);
		if (opt.workers)
			return;
	}
	/* The module's default: one per online CPU, at most 64. */
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	opt.workers = cpus < 1 ? 1 : cpus > 64 ? 64 : cpus;
	opt.workers_src = "online CPUs; module parameter not readable";
}

/* Replay item i: a stats file, or a directory with stats (+ contexts). */
static int replay_sample(struct sample **s, int i)
{
	const char *item = opt.replay[i];
	struct stat st;
	char *sp, *cp;
	int ret;

	if (!stat(item, &st) && S_ISDIR(st.st_mode)) {
		if (asprintf(&sp, "%s/stats", item) < 0 ||
		    asprintf(&cp, "%s/" CONTEXTS_NAME, item) < 0)
			die(1, "out of memory");
		ret = take_sample(s, sp, cp);
		free(sp);
		free(cp);
	} else {
		ret = take_sample(s, item, opt.contexts);
	}
	if (ret)
		die(1, "replay %s: %s", item, ret == -EINVAL ?
		    "no statistics (\"name value\" lines) in it" :
		    strerror(-ret));
	/* Synthetic clock: every interval is exactly --interval long. */
	(*s)->mono = ns_ts((int64_t)i * opt.interval);
	return 0;
}

static void split_replay(char *list)
{
	char *tok, *save = NULL;

	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		opt.replay = xrealloc(opt.replay, (opt.nreplay + 1) *
				      sizeof(*opt.replay));
		opt.replay[opt.nreplay++] = tok;
	}
	if (opt.nreplay < 2)
		die(2, "--replay needs at least two samples, comma-separated");
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		{ "duration", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "output", required_argument, NULL, 'o' },
		{ "stats", required_argument, NULL, 's' },
		{ "contexts", required_argument, NULL, 'C' },
		{ "workers", required_argument, NULL, 'w' },
		{ "replay", required_argument, NULL, 'r' },
		{ "lib-stats", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sample *first = NULL, *prev, *cur = NULL;
	const char *output = NULL, *why = "count";
	char *ctx_alloc = NULL, *replay_list = NULL;
	int64_t start, next, end = 0, deadline = 0;
	uint64_t seq = 0;
	struct sigaction sa;
	int c, status = 0, ret;

	opt.interval = NSEC;
	while ((c = getopt_long(argc, argv, "i:c:d:jo:s:C:w:r:h", lopts,
				NULL)) != -1) {
		switch (c) {
		case 'i':
			get_duration(optarg, "--interval", &opt.interval);
			if (opt.interval > 24 * 3600 * NSEC)
				die(2, "invalid --interval '%s': at most 24h",
				    optarg);
			break;
		case 'c':
			opt.count = parse_count(optarg, "--count", INT64_MAX);
			break;
		case 'd':
			get_duration(optarg, "--duration", &opt.duration);
			break;
		case 'j':
			opt.json = true;
			break;
		case 'o':
			output = optarg;
			break;
		case 's':
			opt.stats = optarg;
			break;
		case 'C':
			opt.contexts = optarg;
			break;
		case 'w':
			opt.workers = parse_count(optarg, "--workers", 4096);
			break;
		case 'r':
			replay_list = optarg;
			break;
		case 'L':
			opt.lib_stats = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try '" PROG " --help'.\n");
			return 2;
		}
	}
	if (optind < argc) {
		die(2, "unexpected argument '%s' (try --help)", argv[optind]);
	}
	if (replay_list)
		split_replay(replay_list);
	if (!opt.lib_stats) {
		opt.lib_stats = getenv("HCOMM_STATS_DIR");
		if (opt.lib_stats && !*opt.lib_stats)
			opt.lib_stats = NULL;
	}
	if (opt.lib_stats)
		lib_sample();	/* the baseline */
	opt.page_size = sysconf(_SC_PAGESIZE);
	opt.default_paths = !opt.stats;
	if (!opt.stats)
		opt.stats = STATS_PATH;
	if (!opt.contexts && !opt.nreplay)
		opt.contexts = ctx_alloc = dir_file(opt.stats, CONTEXTS_NAME);
	workers_from_sysfs();

	/* The baseline sample: fail before touching the output file. */
	if (opt.nreplay) {
		replay_sample(&first, 0);
		opt.stats = opt.replay[0];
	} else {
		ret = take_sample(&first, opt.stats, opt.contexts);
		if (ret == -EINVAL)
			die(1, "%s: no statistics (\"name value\" lines) in it",
			    opt.stats);
		if (ret)
			explain_stats_error(-ret);
	}
	if (output) {
		opt.out = fopen(output, "we");
		if (!opt.out)
			die(1, "cannot write %s: %s", output, strerror(errno));
	} else {
		opt.out = stdout;
	}
	setvbuf(opt.out, NULL, _IOLBF, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;	/* no SA_RESTART: sleeps return */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	print_header();
	prev = first;
	start = ts_ns(&first->mono);
	next = start + opt.interval;
	if (opt.duration)
		end = start + opt.duration;
	for (;;) {
		if (opt.nreplay) {
			if (stop_sig) {
				why = "signal";
				break;
			}
			if (seq + 1 >= (uint64_t)opt.nreplay) {
				why = "replay";
				break;
			}
			replay_sample(&cur, seq + 1);
		} else {
			struct timespec ts;

			deadline = next;
			if (opt.duration && deadline > end)
				deadline = end;
			ts = ns_ts(deadline);
			while (!stop_sig &&
			       clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME,
					       &ts, NULL) == EINTR)
				;
			ret = take_sample(&cur, opt.stats, opt.contexts);
			if (ret) {
				warn("%s: %s (module unloaded?)", opt.stats,
				     ret == -EINVAL ? "no statistics" :
				     strerror(-ret));
				status = 1;
				why = "error";
				break;
			}
			if (stop_sig) {
				/* Counted in the totals, not reported. */
				if (prev != first)
					sample_free(prev);
				prev = cur;
				why = "signal";
				break;
			}
		}
		report(prev, cur, ++seq);
		if (prev != first)
			sample_free(prev);
		prev = cur;
		if (opt.count && seq >= opt.count) {
			why = "count";
			break;
		}
		if (!opt.nreplay) {
			if (opt.duration && deadline >= end) {
				why = "duration";
				break;
			}
			/* Keep to the grid; skip deadlines already missed. */
			next += opt.interval;
			if (next <= now_ns())
				next += ((now_ns() - next) / opt.interval + 1) *
					opt.interval;
		} else if (opt.duration &&
			   (int64_t)(seq + 1) * opt.interval > opt.duration) {
			why = "duration";
			break;
		}
	}
	summary(first, prev, seq, why);
	if (prev != first)
		sample_free(prev);
	sample_free(first);
	free(tracked);
	free(ctx_alloc);
	free(opt.replay);
	lib_free();
	if (fflush(opt.out) || ferror(opt.out)) {
		warn("write error on %s: %s", output ? output : "stdout",
		     strerror(errno));
		status = 1;
	}
	if (opt.out != stdout && fclose(opt.out) && !status) {
		warn("write error on %s: %s", output, strerror(errno));
		status = 1;
	}
	return status;
}
