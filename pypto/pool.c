/* SPDX-License-Identifier: MIT */
/*
 * The worker pool: threads kept across pypto_run() calls.
 *
 * A run needs workers - 1 threads (the calling thread is worker 0).  It
 * borrows them as a team: pypto__team_start() takes free pool threads,
 * creating more when there are too few, hands each its job and wakes it;
 * pypto__team_join() waits until every job returned and gives the threads
 * back.  An idle pool thread sleeps on a futex and costs nothing; starting
 * a run costs one futex wake per thread instead of a pthread_create() and
 * a pthread_join() (tens of microseconds each), which is what a graph that
 * is run many times, or a short one, used to pay.
 *
 * Ownership: a pool thread is either free (on pool.free, under pool.lock)
 * or lent to exactly one team, from team_start, which writes its job
 * fields before it bumps go, until team_join returns it to pool.free,
 * which happens only after the thread's last access to them (it reads
 * its team before it signals that the job is done).
 *
 * PYPTO_POOL=0 makes every team create its threads and join them (the
 * behaviour before the pool; the benchmark compares the two).  A forked
 * child starts with an empty pool: the parent's threads do not exist
 * there.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#include "pypto_int.h"

struct pool_thread {
	pthread_t th;
	_Atomic uint32_t go;		/* futex: bumped to start a job */
	bool pooled;			/* back to the pool after its job */
	/* The job: written by the lender before go is bumped. */
	void (*fn)(void *arg, uint32_t idx);
	void *arg;
	uint32_t idx;
	struct pypto__team *team;
	struct pool_thread *next;	/* pool.free (pool.lock) or team->lent */
};

static struct {
	pthread_mutex_t lock;
	struct pool_thread *free;	/* idle threads (lock) */
	uint32_t nfree;			/* (lock) */
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

/* At most this many idle threads are kept (workers are at most 1024). */
#define POOL_KEEP	1024U

static void futex_wait(_Atomic uint32_t *w, uint32_t v)
{
	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w, int nr)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, nr, NULL, NULL, 0);
}

/* In a forked child the parent's pool threads do not exist: forget them
 * (their records leak, a few hundred bytes each). */
static void pool_atfork_child(void)
{
	pthread_mutex_init(&pool.lock, NULL);
	pool.free = NULL;
	pool.nfree = 0;
}

static void pool_init(void)
{
	pthread_atfork(NULL, NULL, pool_atfork_child);
}

/* Read at every run, so that one process can compare the two. */
static bool pool_enabled(void)
{
	const char *e = getenv("PYPTO_POOL");

	return !(e && !strcmp(e, "0"));
}

static void team_done(struct pypto__team *team)
{
	/*
	 * The joiner may return as soon as active reads 0, and its team
	 * (on its stack) be reused: the wake may then hit an unrelated futex
	 * word, which every futex user here tolerates (they wait in a loop).
	 */
	if (atomic_fetch_sub_explicit(&team->active, 1,
				      memory_order_acq_rel) == 1)
		futex_wake(&team->active, 1);
}

static void *pool_main(void *arg)
{
	struct pool_thread *pt = arg;
	uint32_t seen = 0;

	for (;;) {
		struct pypto__team *team;
		bool pooled;
		uint32_t g;

		while ((g = atomic_load_explicit(&pt->go,
						 memory_order_acquire)) == seen)
			futex_wait(&pt->go, seen);
		seen = g;
		if (!pt->fn) {		/* retired: the pool keeps enough */
			free(pt);
			return NULL;
		}
		pt->fn(pt->arg, pt->idx);
		/*
		 * Nothing of pt is touched after team_done(): a joinable
		 * thread's record is freed by its joiner, a pooled one may
		 * be lent again at once (only go is read, by the wait).
		 */
		team = pt->team;
		pooled = pt->pooled;
		team_done(team);
		if (!pooled)
			return NULL;
	}
	return NULL;
}

/* A new thread, idle; NULL with errno set when it cannot be made. */
static struct pool_thread *pool_new(bool pooled)
{
	struct pool_thread *pt = calloc(1, sizeof(*pt));
	pthread_attr_t at;
	int rc;

	if (!pt)
		return NULL;
	pt->pooled = pooled;
	rc = pthread_attr_init(&at);
	if (!rc && pooled)
		rc = pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (!rc) {
		rc = pthread_create(&pt->th, &at, pool_main, pt);
		pthread_attr_destroy(&at);
	}
	if (rc) {
		free(pt);
		errno = rc;
		return NULL;
	}
	return pt;
}

int pypto__team_start(struct pypto__team *team, uint32_t n,
		      void (*fn)(void *arg, uint32_t idx), void *arg)
{
	struct pool_thread *got = NULL;
	bool pooled = pool_enabled();
	uint32_t i;

	pthread_once(&pool_once, pool_init);
	memset(team, 0, sizeof(*team));
	if (pooled) {
		pthread_mutex_lock(&pool.lock);
		while (pool.free && team->n < n) {
			struct pool_thread *pt = pool.free;

			pool.free = pt->next;
			pool.nfree--;
			pt->next = got;
			got = pt;
			team->n++;
		}
		pthread_mutex_unlock(&pool.lock);
	}
	for (i = 0; i < n; i++) {
		struct pool_thread *pt = got;

		if (pt) {
			got = pt->next;
		} else {
			pt = pool_new(pooled);
			if (!pt) {
				int err = errno;

				/* Return the ones taken and not started. */
				while (got) {
					struct pool_thread *p = got;

					got = p->next;
					pthread_mutex_lock(&pool.lock);
					p->next = pool.free;
					pool.free = p;
					pool.nfree++;
					pthread_mutex_unlock(&pool.lock);
				}
				team->n = i;
				return -err;
			}
		}
		pt->fn = fn;
		pt->arg = arg;
		pt->idx = i;
		pt->team = team;
		pt->next = team->lent;
		team->lent = pt;
		atomic_fetch_add_explicit(&team->active, 1,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&pt->go, 1, memory_order_release);
		futex_wake(&pt->go, 1);
	}
	team->n = n;
	return 0;
}

void pypto__team_join(struct pypto__team *team)
{
	struct pool_thread *pt, *next;
	uint32_t v;

	while ((v = atomic_load_explicit(&team->active,
					 memory_order_acquire)) != 0)
		futex_wait(&team->active, v);
	for (pt = team->lent; pt; pt = next) {
		next = pt->next;
		if (!pt->pooled) {
			pthread_join(pt->th, NULL);
			free(pt);
			continue;
		}
		pthread_mutex_lock(&pool.lock);
		if (pool.nfree < POOL_KEEP) {
			pt->next = pool.free;
			pool.free = pt;
			pool.nfree++;
			pt = NULL;
		}
		pthread_mutex_unlock(&pool.lock);
		if (pt) {
			/* Too many idle: this one ends (it is detached). */
			pt->pooled = false;
			pt->fn = NULL;
			atomic_fetch_add_explicit(&pt->go, 1,
						  memory_order_release);
			futex_wake(&pt->go, 1);
		}
	}
	team->lent = NULL;
	team->n = 0;
}

uint32_t pypto__pool_idle(void)
{
	uint32_t n;

	pthread_mutex_lock(&pool.lock);
	n = pool.nfree;
	pthread_mutex_unlock(&pool.lock);
	return n;
}
