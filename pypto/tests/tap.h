/* SPDX-License-Identifier: MIT */
/*
 * Minimal TAP for the libpypto host tests: ok(cond, fmt, ...) prints
 * "ok N - ..." or "not ok N - ..."; tap_done(name) prints
 * "<name>: N passed, N failed" and returns the exit status.
 */
#ifndef PYPTO_TAP_H
#define PYPTO_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int tap_pass, tap_fail;

__attribute__((format(printf, 2, 3), unused))
static int ok(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d - ", cond ? "ok" : "not ok", tap_pass + tap_fail + 1);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (cond)
		tap_pass++;
	else
		tap_fail++;
	return cond;
}

__attribute__((unused))
static int tap_done(const char *name)
{
	printf("%s: %d passed, %d failed\n", name, tap_pass, tap_fail);
	return tap_fail ? 1 : 0;
}

#endif /* PYPTO_TAP_H */
