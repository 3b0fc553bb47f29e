/* SPDX-License-Identifier: MIT */
/* libhcomm: tuning from code or from the HCOMM_* environment variables. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hcomm_int.h"
#include "hcomm_boot.h"

#define KiB	(1ULL << 10)
#define MiB	(1ULL << 20)
#define GiB	(1ULL << 30)

HCOMM_EXPORT void hcomm_config_default(struct hcomm_config *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->send_buf_size = 2 * MiB;
	cfg->recv_buf_size = 2 * MiB;
	cfg->max_inline = 4 * KiB;
	cfg->num_qps = 1;
	cfg->queue_depth = 256;
	cfg->enable_fp16_compress = 0;
	cfg->cache_limit = 64 * MiB;
	cfg->comp_threshold = 64 * KiB;
	cfg->rank_table = NULL;
	cfg->timeout_ms = 30000;
}

/*
 * Profiles (HCOMM_PROFILE), applied before the individual variables, which
 * override any field a profile set:
 *
 *  field            default  latency  bandwidth
 *  send_buf_size    2M       256K     8M
 *  recv_buf_size    2M       256K     8M
 *  max_inline       4K       64K      0
 *  num_qps          1        1        2
 *  queue_depth      256      64       1024
 *  cache_limit      64M      64M      256M
 *
 * latency: small messages dominate and each waits for the last.  A 64K
 * inline threshold (the module's maximum) has the submitting thread copy
 * them itself, so they complete in the submitting call without a hand-off
 * to the engine's workers; a 64-deep single ring keeps the ring's memory
 * small, and one ring means one place to reap completions and one lock,
 * nothing to poll round-robin.
 *
 * bandwidth: large transfers, many in flight.  max_inline 0 keeps the
 * submitting thread from ever copying, so every transfer goes to the
 * engine and issue overlaps with the copies; 1024-deep rings keep the
 * engine busy between reaps, two rings let two threads issue without
 * sharing a ring lock, and a 256M registration cache keeps the large
 * buffers pinned across reuse.
 *
 * send_buf_size and recv_buf_size are set by the profiles for the network
 * transports to come; the kernel transport has no staging buffers and
 * never reads them, so with it they change nothing.  Neither profile
 * touches fp16 compression, its threshold, the rank table or the
 * timeout.
 */
struct profile {
	const char *name;
	uint64_t send_buf_size, recv_buf_size, cache_limit;
	uint32_t max_inline, num_qps, queue_depth;
};

static const struct profile profiles[] = {
	{ "default",	2 * MiB,   2 * MiB,   64 * MiB,  4 * KiB,  1, 256 },
	{ "latency",	256 * KiB, 256 * KiB, 64 * MiB,  64 * KiB, 1, 64 },
	{ "bandwidth",	8 * MiB,   8 * MiB,   256 * MiB, 0,        2, 1024 },
};

/* Digits only, at least one; 0 or -1 (garbage or overflow). */
static int parse_dec(const char *s, const char **end, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = *p - '0';

		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*end = p;
	*out = v;
	return 0;
}

static int size_unit(const char *p, unsigned *shift)
{
	switch (*p) {
	case '\0':
		*shift = 0;
		return 0;
	case 'k': case 'K':
		*shift = 10;
		break;
	case 'm': case 'M':
		*shift = 20;
		break;
	case 'g': case 'G':
		*shift = 30;
		break;
	default:
		return -1;
	}
	p++;
	if (*p == 'i' || *p == 'I')
		p++;
	else if (!*p)
		return 0;
	if (*p != 'b' && *p != 'B')
		return -1;
	return p[1] ? -1 : 0;
}

/* 0, or -1 with *why "not a size" or "too large". */
static int parse_size(const char *s, uint64_t *out, const char **why)
{
	const char *end;
	unsigned shift;
	uint64_t v;

	*why = "not a size (use e.g. 2M, 64K, 4096)";
	if (!s || parse_dec(s, &end, &v)) {
		if (s && *s >= '0' && *s <= '9') {
			/* digits, but more than 64 bits of them */
			for (end = s; *end >= '0' && *end <= '9'; end++)
				;
			if (!size_unit(end, &shift))
				*why = "too large";
		}
		return -1;
	}
	if (size_unit(end, &shift))
		return -1;
	if (shift && v > UINT64_MAX >> shift) {
		*why = "too large";
		return -1;
	}
	*out = v << shift;
	return 0;
}

HCOMM_EXPORT int hcomm_parse_size(const char *s, uint64_t *out)
{
	const char *why;
	uint64_t v;

	if (!s || !out)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm_parse_size");
	if (parse_size(s, &v, &why))
		return hcomm__fail(HCOMM_ERR_INVAL, 0, "\"%.64s\": %s", s, why);
	*out = v;
	return 0;
}

enum kind { SIZE, UINT, BOOL };

struct var {
	const char *name;
	enum kind kind;
	uint64_t min, max;
	size_t off;		/* into struct hcomm_config */
	size_t width;		/* 4 or 8 bytes */
};

#define FIELD(f) offsetof(struct hcomm_config, f), \
		 sizeof(((struct hcomm_config *)0)->f)

static const struct var vars[] = {
	{ "HCOMM_SEND_BUF_SIZE",  SIZE, 4 * KiB, GiB,      FIELD(send_buf_size) },
	{ "HCOMM_RECV_BUF_SIZE",  SIZE, 4 * KiB, GiB,      FIELD(recv_buf_size) },
	{ "HCOMM_MAX_INLINE",     SIZE, 0,       64 * KiB, FIELD(max_inline) },
	{ "HCOMM_NUM_QPS",        UINT, 1,       64,       FIELD(num_qps) },
	{ "HCOMM_QUEUE_DEPTH",    UINT, 8,       32768,    FIELD(queue_depth) },
	{ "HCOMM_CACHE_LIMIT",    SIZE, 0,       64 * GiB, FIELD(cache_limit) },
	{ "HCOMM_FP16_COMPRESS",  BOOL, 0,       1,
	  FIELD(enable_fp16_compress) },
	{ "HCOMM_COMP_THRESHOLD", SIZE, 0,       GiB,      FIELD(comp_threshold) },
	{ "HCOMM_TIMEOUT_MS",     UINT, 1,       3600000,  FIELD(timeout_ms) },
};

static void put_field(struct hcomm_config *cfg, const struct var *v,
		      uint64_t val)
{
	char *p = (char *)cfg + v->off;

	if (v->width == sizeof(uint64_t)) {
		uint64_t x = val;

		memcpy(p, &x, sizeof(x));
	} else {
		uint32_t x = val;	/* range-checked: fits */

		memcpy(p, &x, sizeof(x));
	}
}

/* "64K" for a limit that is a whole number of KiB/MiB/GiB, else digits. */
static const char *fmt_size(char *buf, size_t len, uint64_t v)
{
	static const char unit[] = "GMK";
	unsigned shift = 30, i;

	for (i = 0; i < 3; i++, shift -= 10)
		if (v && !(v & ((1ULL << shift) - 1))) {
			snprintf(buf, len, "%llu%c",
				 (unsigned long long)(v >> shift), unit[i]);
			return buf;
		}
	snprintf(buf, len, "%llu", (unsigned long long)v);
	return buf;
}

static int parse_var(const struct var *v, const char *s, uint64_t *out)
{
	char lo[24], hi[24];
	const char *why, *end;
	uint64_t x = 0;

	switch (v->kind) {
	case SIZE:
		if (parse_size(s, &x, &why))
			return hcomm__fail(HCOMM_ERR_INVAL, 0, "%s=\"%.64s\": %s",
					   v->name, s, why);
		break;
	case BOOL:
		if (strcmp(s, "0") && strcmp(s, "1"))
			return hcomm__fail(HCOMM_ERR_INVAL, 0,
					   "%s=\"%.64s\": use 0 or 1",
					   v->name, s);
		x = s[0] - '0';
		break;
	default:
		if (parse_dec(s, &end, &x) || *end) {
			why = "not a decimal integer";
			if (*s >= '0' && *s <= '9') {
				for (end = s; *end >= '0' && *end <= '9'; end++)
					;
				if (!*end)
					why = "too large";
			}
			return hcomm__fail(HCOMM_ERR_INVAL, 0, "%s=\"%.64s\": %s",
					   v->name, s, why);
		}
		break;
	}
	if (x < v->min || x > v->max) {
		if (v->kind == SIZE) {
			fmt_size(lo, sizeof(lo), v->min);
			fmt_size(hi, sizeof(hi), v->max);
		} else {
			snprintf(lo, sizeof(lo), "%llu",
				 (unsigned long long)v->min);
			snprintf(hi, sizeof(hi), "%llu",
				 (unsigned long long)v->max);
		}
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "%s=\"%.64s\": out of range %s .. %s",
				   v->name, s, lo, hi);
	}
	*out = x;
	return 0;
}

/*
 * Overlay HCOMM_PROFILE, then each variable that is set, on *cfg.  All or
 * nothing: on failure *cfg is unchanged.  HCOMM_RANK_TABLE is kept as the
 * pointer getenv() returns (valid until the variable changes).
 */
HCOMM_EXPORT int hcomm_config_from_env(struct hcomm_config *cfg)
{
	struct hcomm_config c;
	const char *s;
	uint64_t x = 0;
	unsigned i;
	int ret;

	if (!cfg)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_config_from_env");
	c = *cfg;
	s = getenv("HCOMM_PROFILE");
	if (s) {
		const struct profile *p = NULL;

		for (i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++)
			if (!strcmp(s, profiles[i].name))
				p = &profiles[i];
		if (!p)
			return hcomm__fail(HCOMM_ERR_INVAL, 0,
					   "HCOMM_PROFILE=\"%.64s\": use latency, "
					   "bandwidth or default", s);
		c.send_buf_size = p->send_buf_size;
		c.recv_buf_size = p->recv_buf_size;
		c.max_inline = p->max_inline;
		c.num_qps = p->num_qps;
		c.queue_depth = p->queue_depth;
		c.cache_limit = p->cache_limit;
	}
	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		s = getenv(vars[i].name);
		if (!s)
			continue;
		ret = parse_var(&vars[i], s, &x);
		if (ret)
			return ret;
		put_field(&c, &vars[i], x);
	}
	s = getenv("HCOMM_RANK_TABLE");
	if (s) {
		if (!*s)
			return hcomm__fail(HCOMM_ERR_INVAL, 0,
					   "HCOMM_RANK_TABLE=\"\": empty path");
		c.rank_table = s;
	}
	*cfg = c;
	return 0;
}

/* Variables of the library that are no field of struct hcomm_config. */
static const struct var env_only[] = {
	{ "HCOMM_COLL_CHUNK",     SIZE, 64,      64 * MiB, 0, 0 },
	{ "HCOMM_COLL_SLOTS",     UINT, 1,       64,       0, 0 },
	{ "HCOMM_COLL_RD_MAX",    SIZE, 0,       64 * MiB, 0, 0 },
	{ "HCOMM_COLL_HD_MAX",    SIZE, 0,       1ULL << 40, 0, 0 },
};

int hcomm__config_env(const char *name, uint64_t *out)
{
	const char *s = getenv(name);
	const struct var *v = NULL;
	unsigned i;
	int ret;

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (!strcmp(vars[i].name, name))
			v = &vars[i];
	for (i = 0; i < sizeof(env_only) / sizeof(env_only[0]); i++)
		if (!strcmp(env_only[i].name, name))
			v = &env_only[i];
	if (!v)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "no variable %s",
				   name);
	if (!s)
		return 0;
	ret = parse_var(v, s, out);
	return ret ? ret : 1;
}

int hcomm__coll_timeout_from_env(int64_t *out)
{
	static const struct var v = {
		"HCOMM_COLL_TIMEOUT_MS", UINT, 1, HCOMM_COLL_TIMEOUT_MAX, 0, 0
	};
	const char *s = getenv(v.name);
	uint64_t x;
	int ret;

	if (!s)
		return 0;
	if (!strcmp(s, "inf")) {
		*out = -1;
		return 0;
	}
	ret = parse_var(&v, s, &x);
	if (ret) {
		char why[256];

		snprintf(why, sizeof(why), "%s", hcomm_errmsg());
		return hcomm__fail(HCOMM_ERR_INVAL, 0, "%s (or \"inf\": no "
				   "limit)", why);
	}
	*out = (int64_t)x;
	return 0;
}

/*
 * A time in microseconds, 0 .. 60000000, from the variable name (
 * HCOMM_SPIN_US: how long every wait of a communicator polls before it
 * sleeps; HCOMM_CB_SPIN_US: how long the callback dispatcher polls its
 * queue).  *out_ns stays as it is (-1: the built-in spins) when the
 * variable is unset.
 */
int hcomm__us_from_env(const char *name, int64_t *out_ns)
{
	const struct var v = { name, UINT, 0, 60000000, 0, 0 };
	const char *s = getenv(v.name);
	uint64_t x;
	int ret;

	if (!s)
		return 0;
	ret = parse_var(&v, s, &x);
	if (ret)
		return ret;
	*out_ns = (int64_t)x * 1000;
	return 0;
}
