/* SPDX-License-Identifier: MIT */
/* libpypto: error reporting, clock and configuration (PYPTO_* variables). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pypto_int.h"

/* Per thread: a failure on one worker must not overwrite another's detail. */
static __thread char t_msg[256];

int pypto__fail(int err, const char *fmt, ...)
{
	char buf[sizeof(t_msg)];
	va_list ap;

	/*
	 * Format into a local buffer first: callers may wrap the previous
	 * detail ("run: %s", pypto_errmsg()), which would make vsnprintf's
	 * source and destination overlap.
	 */
	va_start(ap, fmt);
	if (vsnprintf(buf, sizeof(buf), fmt, ap) < 0)
		buf[0] = '\0';
	va_end(ap);
	memcpy(t_msg, buf, sizeof(t_msg));
	return -err;
}

void pypto__clear_err(void)
{
	t_msg[0] = '\0';
}

PYPTO_EXPORT const char *pypto_errmsg(void)
{
	return t_msg;
}

static const char *const err_str[PYPTO_ERR__MAX] = {
	[PYPTO_OK]		= "success",
	[PYPTO_ERR_INVAL]	= "invalid argument",
	[PYPTO_ERR_NOMEM]	= "out of memory",
	[PYPTO_DEADLOCK]	= "deadlock: the graph has a dependency cycle",
	[PYPTO_ERR_IO]		= "transfer failed after every retry",
	[PYPTO_ERR_TASK]	= "a compute or host function failed",
	[PYPTO_ERR_SYS]		= "system call failed",
	[PYPTO_ERR_LIMIT]	= "too many tiles, edges or descriptors",
};

PYPTO_EXPORT const char *pypto_strerror(int err)
{
	/* Widen first: -INT_MIN does not fit an int. */
	long long e = err;

	if (e < 0)
		e = -e;
	if (e >= PYPTO_ERR__MAX || !err_str[e])
		return "unknown error";
	return err_str[e];
}

uint64_t pypto__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

#define WORKERS_MAX	1024

PYPTO_EXPORT void pypto_config_default(struct pypto_config *cfg)
{
	long cpus;

	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus < 1)
		cpus = 1;
	if (cpus > WORKERS_MAX)
		cpus = WORKERS_MAX;
	cfg->workers = (uint32_t)cpus;
	cfg->devices = 1;
	cfg->prefetch_depth = 2;
	cfg->double_buffering = 1;
	cfg->tile_size = 256;
	cfg->batch_max = 256;
	cfg->max_retries = 3;
	cfg->profile = 1;
	cfg->seed = 1;
}

/*
 * Decimal digits only (no sign, no blanks, no base prefix), at least one,
 * value in [lo, hi].  Returns 1 if the variable is set and valid, 0 if it
 * is unset, or -PYPTO_ERR_INVAL naming the variable and its value.
 */
static int env_u64(const char *var, uint64_t lo, uint64_t hi, uint64_t *out)
{
	const char *s = getenv(var);
	unsigned long long v;
	const char *why;

	if (!s)
		return 0;
	errno = 0;
	v = strtoull(s, NULL, 10);
	if (!*s)
		why = "empty";
	else if (s[strspn(s, "0123456789")])
		why = "not a decimal number";
	else if (errno == ERANGE)
		why = "overflows";
	else if (v < lo || v > hi)
		why = "out of range";
	else {
		*out = v;
		return 1;
	}
	return pypto__fail(PYPTO_ERR_INVAL, "%s=\"%.64s\": %s (%llu..%llu)",
			   var, s, why, (unsigned long long)lo,
			   (unsigned long long)hi);
}

static int env_u32(const char *var, uint32_t lo, uint32_t hi, uint32_t *field)
{
	uint64_t v;
	int ret = env_u64(var, lo, hi, &v);

	if (ret > 0)
		*field = (uint32_t)v;
	return ret;
}

static int env_bool(const char *var, int *field)
{
	uint64_t v;
	int ret = env_u64(var, 0, 1, &v);

	if (ret > 0)
		*field = (int)v;
	return ret;
}

/*
 * Only variables that are set change their field.  The whole environment
 * is checked before cfg is touched, so a rejected value leaves cfg as it
 * was.  devices must not exceed workers: checked against the workers that
 * result (from PYPTO_WORKERS or cfg) whenever either variable is set.
 */
PYPTO_EXPORT int pypto_config_from_env(struct pypto_config *cfg)
{
	struct pypto_config c;
	int ret, set_w, set_d;

	if (!cfg)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_config_from_env: "
				   "cfg is NULL");
	c = *cfg;
	set_w = env_u32("PYPTO_WORKERS", 1, WORKERS_MAX, &c.workers);
	if (set_w < 0)
		return set_w;
	set_d = env_u32("PYPTO_DEVICES", 1, WORKERS_MAX, &c.devices);
	if (set_d < 0)
		return set_d;
	if ((ret = env_u32("PYPTO_PREFETCH_DEPTH", 0, 64,
			   &c.prefetch_depth)) < 0 ||
	    (ret = env_bool("PYPTO_DOUBLE_BUFFERING",
			    &c.double_buffering)) < 0 ||
	    (ret = env_u32("PYPTO_TILE_SIZE", 1, 65536, &c.tile_size)) < 0 ||
	    (ret = env_u32("PYPTO_BATCH_MAX", 1, 65536, &c.batch_max)) < 0 ||
	    (ret = env_u32("PYPTO_MAX_RETRIES", 0, 100, &c.max_retries)) < 0 ||
	    (ret = env_bool("PYPTO_PROFILE", &c.profile)) < 0 ||
	    (ret = env_u64("PYPTO_SEED", 0, UINT64_MAX, &c.seed)) < 0)
		return ret;
	if ((set_w || set_d) && c.devices > c.workers) {
		if (set_d)
			return pypto__fail(PYPTO_ERR_INVAL,
					   "PYPTO_DEVICES=\"%.64s\": more "
					   "devices than workers (%u%s)",
					   getenv("PYPTO_DEVICES"), c.workers,
					   set_w ? ", PYPTO_WORKERS" : "");
		return pypto__fail(PYPTO_ERR_INVAL,
				   "PYPTO_WORKERS=\"%.64s\": fewer workers "
				   "than devices (%u)", getenv("PYPTO_WORKERS"),
				   c.devices);
	}
	*cfg = c;
	return 0;
}
