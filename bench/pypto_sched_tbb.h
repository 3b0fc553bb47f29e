/* SPDX-License-Identifier: MIT */
/*
 * The oneTBB baseline of pypto_sched_bench (pypto_sched_tbb.cpp), as the
 * C side sees it.  No C++ exception crosses these functions: each returns
 * 0 (or an object) or -1 (NULL) with the reason in sbtbb_errmsg().
 */
#ifndef PYPTO_SCHED_TBB_H
#define PYPTO_SCHED_TBB_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sbtbb;
typedef void (*sbtbb_body_fn)(void *ctx, uint32_t i);

const char *sbtbb_errmsg(void);
const char *sbtbb_version(void);
/* A task arena of exactly workers threads; NULL on failure. */
struct sbtbb *sbtbb_create(unsigned int workers);
/* A wide DAG (chain = 0) or a chain of n tasks running fn(ctx, i). */
int sbtbb_build(struct sbtbb *t, int chain, uint32_t n, sbtbb_body_fn fn,
		void *ctx, double *secs);
int sbtbb_run(struct sbtbb *t, double *secs);
void sbtbb_free_graph(struct sbtbb *t);
void sbtbb_destroy(struct sbtbb *t);

#ifdef __cplusplus
}
#endif

#endif
