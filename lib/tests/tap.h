/* SPDX-License-Identifier: MIT */
/*
 * Minimal TAP for the C tests of libhcomm and libpypto: ok(cond, fmt, ...)
 * prints "ok N - ..." or "not ok N - ..." and returns cond; skip(fmt, ...)
 * prints "ok N - # SKIP ..."; tap_done(name) prints the plan "1..N" and
 * "<name>: N passed, N failed" and returns the exit status.  A program
 * whose summary also counts skips prints it from tap_pass, tap_fail and
 * tap_skip itself.
 */
#ifndef HCOMM_TAP_H
#define HCOMM_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_pass, tap_fail, tap_skip;

/*
 * leak_check(): a forked rank that ends with _exit() looks for leaks
 * first in an ASan build (LeakSanitizer runs at exit() only).
 */
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#define leak_check()	__lsan_do_leak_check()
#else
#define leak_check()	do { } while (0)
#endif

__attribute__((format(printf, 2, 3), unused))
static int ok(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d - ", cond ? "ok" : "not ok",
	       tap_pass + tap_fail + tap_skip + 1);
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

__attribute__((format(printf, 1, 2), unused))
static void skip(const char *fmt, ...)
{
	va_list ap;

	printf("ok %d - # SKIP ", tap_pass + tap_fail + tap_skip + 1);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	tap_skip++;
}

__attribute__((unused))
static int tap_done(const char *name)
{
	const char *o = getenv("TAP_NAME");	/* a sanitizer build's name */

	if (o && *o)
		name = o;
	printf("1..%d\n", tap_pass + tap_fail + tap_skip);
	printf("%s: %d passed, %d failed\n", name, tap_pass, tap_fail);
	return tap_fail ? 1 : 0;
}

#endif /* HCOMM_TAP_H */
