/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by hcomm_info and hcomm_perf_mon: messages, reading whole
 * files (debugfs, sysfs), strict integers, JSON strings, and parsing of
 * /sys/kernel/debug/hcomm/stats ("name value" lines) and the tokens of
 * /sys/kernel/debug/hcomm/contexts.
 *
 * Include it after defining PROG, the program's name (its messages' prefix).
 */
#ifndef HCOMM_TOOLS_UTIL_H
#define HCOMM_TOOLS_UTIL_H

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PROG
#error "define PROG before including tools_util.h"
#endif

#define DEBUGFS_DIR	"/sys/kernel/debug"
#define STATS_PATH	DEBUGFS_DIR "/hcomm/stats"
#define MODULE_DIR	"/sys/module/hcomm"
#define DEBUGFS_MAGIC_NR 0x64626720
#define MAX_FILE	(1 << 20)	/* read_file() refuses larger files */
#define MAX_COLS	32		/* columns of the contexts table */
#define MAX_TOKS	64		/* tokenize(): tokens of a line */

/* Not every program uses every helper. */
#define TOOLS_UTIL_FN	static __attribute__((unused))

/* "PROG: message" on stderr. */
__attribute__((format(printf, 1, 0)))
TOOLS_UTIL_FN void vmsg(const char *fmt, va_list ap)
{
	fprintf(stderr, PROG ": ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

/* "PROG: message" on stderr. */
__attribute__((format(printf, 1, 2)))
TOOLS_UTIL_FN void warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
}

/* "PROG: message" on stderr, then exit(status). */
__attribute__((format(printf, 2, 3), noreturn))
TOOLS_UTIL_FN void die(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
	exit(status);
}

/* realloc, or die. */
TOOLS_UTIL_FN void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		die(1, "out of memory");
	return p;
}

/* Whole file into a NUL-terminated malloc'd buffer; 0 or -errno. */
TOOLS_UTIL_FN int read_file(const char *path, char **out)
{
	size_t len = 0, cap = 4096;
	char *buf;
	ssize_t n;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = xrealloc(NULL, cap);
	for (;;) {
		if (cap - len < 2) {
			if (cap >= MAX_FILE) {
				err = EFBIG;
				goto fail;
			}
			cap *= 2;
			buf = xrealloc(buf, cap);
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = errno;
			goto fail;
		}
		if (!n)
			break;
		len += n;
	}
	close(fd);
	buf[len] = 0;
	*out = buf;
	return 0;
fail:
	close(fd);
	free(buf);
	return -err;
}

/* Strict decimal (optionally negative) integer: the whole string. */
TOOLS_UTIL_FN bool parse_i64(const char *s, int64_t *v)
{
	char *end;
	long long x;

	if (!s || !*s || isspace((unsigned char)*s))
		return false;
	errno = 0;
	x = strtoll(s, &end, 10);
	if (errno || *end)
		return false;
	*v = x;
	return true;
}

/* s as a JSON string on f; bytes outside ASCII as \u00XX. */
TOOLS_UTIL_FN void json_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	for (; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* ------------------------------------------------------------------ */
/* stats: "name value" lines                                           */
/* ------------------------------------------------------------------ */

struct kv {
	const char *name;
	const char *val;	/* the value's text */
	int64_t v;
};

struct stats {
	char *buf;		/* names point into it */
	struct kv *kv;
	size_t n;
	int err;		/* -errno of reading, or 0 (hcomm_info) */
};

/* Parse buf (taken over); 0, or -EINVAL when no line is "name integer". */
/* Parse buf (taken over); 0, or -EINVAL when no line is "name integer". */
TOOLS_UTIL_FN int stats_parse(struct stats *s, char *buf)
{
	char *line, *save = NULL;
	size_t cap = 0;

	memset(s, 0, sizeof(*s));
	s->buf = buf;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *name, *val, *rest, *sp = NULL;
		int64_t v;

		name = strtok_r(line, " \t\r", &sp);
		val = strtok_r(NULL, " \t\r", &sp);
		rest = strtok_r(NULL, " \t\r", &sp);
		if (!name || !val || rest || name[0] == '#' ||
		    !parse_i64(val, &v))
			continue;
		if (s->n == cap) {
			cap = cap ? cap * 2 : 64;
			s->kv = xrealloc(s->kv, cap * sizeof(*s->kv));
		}
		s->kv[s->n].name = name;
		s->kv[s->n].val = val;
		s->kv[s->n].v = v;
		s->n++;
	}
	return s->n ? 0 : -EINVAL;
}

static const char *const gauge_names[] = {
	"contexts", "regions", "host_regions", "dmabuf_regions",
	"pinned_pages", "memlock_pages", "xfers_active", "waits_pending",
	"umems", "cache_bytes",
};

/* Whether stats line name is a gauge (a level, not a counter). */
TOOLS_UTIL_FN bool is_gauge(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(gauge_names) / sizeof(gauge_names[0]); i++)
		if (!strcmp(name, gauge_names[i]))
			return true;
	return false;
}

/* Split line into whitespace-separated tokens (not terminated yet). */
TOOLS_UTIL_FN int tokenize(char *line, char **start, char **end)
{
	int n = 0;
	char *p = line;

	for (;;) {
		while (*p && isspace((unsigned char)*p))
			p++;
		if (!*p || n == MAX_TOKS)
			return n;
		start[n] = p;
		while (*p && !isspace((unsigned char)*p))
			p++;
		end[n++] = p;
	}
}

/* ------------------------------------------------------------------ */
/* contexts: '#' header naming columns, one line per context           */
/* ------------------------------------------------------------------ */

/* Index of column name among col[0 .. ncols), or -1. */
TOOLS_UTIL_FN int col_index(char *const *col, int ncols, const char *name)
{
	int i;

	for (i = 0; i < ncols; i++)
		if (!strcmp(col[i], name))
			return i;
	return -1;
}

/*
 * Walk the contexts table in buf (cut in place).  The first '#' line names
 * the columns (into col and *ncols, which starts at 0); later ones are
 * comments.  Every other non-blank line is a row: row(arg, v) gets its
 * fields by column, NULL where the line is short.  Columns are found by
 * name, so their order and extra columns do not matter.  A line with more
 * fields than the header has columns is taken to have a comm with blanks
 * in it: the surplus fields are joined into comm.  0, or -EINVAL without
 * a header line (or with a row before it).
 */
TOOLS_UTIL_FN int ctab_walk(char *buf, char **col, int *ncols,
			    void (*row)(void *arg, char **v), void *arg)
{
	char *start[MAX_TOKS], *end[MAX_TOKS], *v[MAX_COLS];
	char *line, *next;
	int comm = -1, i, j, k;

	for (line = buf; line; line = next) {
		char *p = line;
		int n;

		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		while (*p && isspace((unsigned char)*p))
			p++;
		if (!*p)
			continue;
		if (*p == '#') {
			if (*ncols)
				continue;	/* a comment */
			n = tokenize(p + 1, start, end);
			for (i = 0; i < n && i < MAX_COLS; i++) {
				*end[i] = 0;
				col[i] = start[i];
			}
			*ncols = i;
			comm = col_index(col, *ncols, "comm");
			continue;
		}
		if (!*ncols)
			return -EINVAL;
		n = tokenize(p, start, end);
		memset(v, 0, sizeof(v));
		for (i = 0, j = 0; i < *ncols && j < n; i++, j++) {
			k = j;
			if (i == comm && n > *ncols)
				k = j + (n - *ncols);
			*end[k] = 0;
			v[i] = start[j];
			j = k;
		}
		row(arg, v);
	}
	return *ncols ? 0 : -EINVAL;
}

/*
 * The statistics libhcomm communicators publish under HCOMM_STATS_DIR
 * (struct hcomm_stats_file, hcomm.h): one per file "hcomm-*.stats" of
 * dir, checked (magic, version, size); alive: its process still exists.
 * Include hcomm.h first.  Returns how many (0 .. max), or -errno when the
 * directory cannot be read.
 */
#ifdef HCOMM_STATS_MAGIC
#include <dirent.h>
#include <signal.h>

struct lib_stats {
	char name[256];
	bool alive;
	struct hcomm_stats_file f;
};

static int lib_stats_cmp(const void *a, const void *b)
{
	return strcmp(((const struct lib_stats *)a)->name,
		      ((const struct lib_stats *)b)->name);
}

TOOLS_UTIL_FN int lib_stats_read(const char *dir, struct lib_stats *out,
				 int max)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0;

	if (!d)
		return -errno;
	while (n < max && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		char path[4096];
		ssize_t got;
		int fd;

		if (strncmp(de->d_name, "hcomm-", 6) || l < 12 ||
		    strcmp(de->d_name + l - 6, ".stats") ||
		    l >= sizeof(out[n].name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		got = read(fd, &out[n].f, sizeof(out[n].f));
		close(fd);
		if (got != (ssize_t)sizeof(out[n].f) ||
		    out[n].f.magic != HCOMM_STATS_MAGIC ||
		    out[n].f.version != HCOMM_STATS_VERSION ||
		    out[n].f.size != sizeof(out[n].f))
			continue;
		memcpy(out[n].name, de->d_name, l + 1);
		out[n].alive = out[n].f.pid > 0 &&
			       (!kill(out[n].f.pid, 0) || errno == EPERM);
		n++;
	}
	closedir(d);
	qsort(out, (size_t)n, sizeof(*out), lib_stats_cmp);
	return n;
}
#endif

#endif /* HCOMM_TOOLS_UTIL_H */
