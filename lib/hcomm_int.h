/* SPDX-License-Identifier: MIT */
/* libhcomm internals; exposed (hidden visibility) for the unit tests. */
#ifndef LIBHCOMM_INT_H
#define LIBHCOMM_INT_H

#include <stdint.h>
#include <time.h>
#include <liburing.h>
#include <sched.h>
#include "hcomm.h"

#define HCOMM_EXPORT	__attribute__((visibility("default")))
#define HCOMM_HIDDEN	__attribute__((visibility("hidden")))

/* Fill sqe with an IORING_OP_URING_CMD for cmd_op carrying arg/size. */
HCOMM_HIDDEN void hcomm__prep_cmd(struct io_uring_sqe *sqe, int fd,
				  uint32_t cmd_op, void *arg, uint32_t size);
/*
 * Positive enum hcomm_err for a positive errno; cmd_op is the HCOMM_CMD_x
 * that failed, or 0 for open() of the device.
 */
HCOMM_HIDDEN int hcomm__err_code(uint32_t cmd_op, int err);
/*
 * Record a failure for hcomm_errno()/hcomm_errmsg() (printf format; ": "
 * and strerror(err) appended when err is not 0); returns -code.
 */
HCOMM_HIDDEN __attribute__((format(printf, 3, 4)))
int hcomm__fail(int code, int err, const char *fmt, ...);
HCOMM_HIDDEN int hcomm__can_spin(void);
struct hcomm_comm;
HCOMM_HIDDEN uint64_t hcomm__spin_ns(const struct hcomm_comm *c,
				     uint64_t def_ns);

/*
 * One variable of hcomm_config_from_env (e.g. "HCOMM_CACHE_LIMIT"),
 * checked the same way: 1 and *out set, 0 when unset (*out unchanged), or
 * -HCOMM_ERR_INVAL with hcomm_errmsg() naming the variable.
 */
HCOMM_HIDDEN int hcomm__config_env(const char *name, uint64_t *out);
/*
 * HCOMM_COLL_TIMEOUT_MS into *out when set: 1 .. 3600000 ms, or "inf"
 * (-1: no limit); unset: *out unchanged.  0, or -HCOMM_ERR_INVAL with
 * hcomm_errmsg() naming the variable.
 */
HCOMM_HIDDEN int hcomm__coll_timeout_from_env(int64_t *out);
HCOMM_HIDDEN int hcomm__us_from_env(const char *name, int64_t *out_ns);

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t hcomm__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The body of a spin loop. */
static inline void hcomm__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/*
 * A spin-wait: hcomm__spin_init() with its budget (hcomm__spin_ns()), then
 * hcomm__spin() once a round until it returns 0 - the budget is spent,
 * time to sleep.  Every `every` rounds (a power of two) it looks at the
 * clock and lets another runnable thread of this CPU go first: what a
 * spinning waiter waits for is often work of this very CPU - soft-RoCE's
 * protocol tasks (kworkers), the tcp transport's service thread, the
 * module's copy workers - which the scheduler leaves queued until the
 * spinner's time slice ends (under emulation a one-vCPU guest's 8-byte
 * rdma round trip took as long as the spin: 1000 us gave 1.5 ms, 2000 us
 * 2 ms).  On a one-CPU thread that spins at all (HCOMM_SPIN_US) it yields
 * every round.  With nothing else runnable sched_yield() returns at once.
 */
struct hcomm_spin {
	uint64_t end;
	unsigned int k;
	unsigned int mask;
};

static inline void hcomm__spin_init(struct hcomm_spin *s, uint64_t now,
				    uint64_t budget_ns, unsigned int every)
{
	s->end = now + budget_ns;
	s->k = 0;
	s->mask = hcomm__can_spin() ? every - 1 : 0;
}

static inline int hcomm__spin(struct hcomm_spin *s)
{
	if (++s->k & s->mask) {
		hcomm__cpu_relax();
		return 1;
	}
	if (hcomm__now_ns() >= s->end)
		return 0;
	sched_yield();
	return 1;
}

/*
 * A sleep in slices that double: the next slice of a wait with left_ns
 * to go (< 0: no limit), *slice_ns or what is left when that is shorter;
 * *slice_ns doubles up to max_ns.  A wait that cannot see every wake-up
 * sleeps so: what comes soon is seen soon, a long wait wakes seldom.
 */
static inline int64_t hcomm__slice(int64_t left_ns, uint64_t *slice_ns,
				   uint64_t max_ns)
{
	if (left_ns >= 0 && (uint64_t)left_ns <= *slice_ns)
		return left_ns;
	left_ns = (int64_t)*slice_ns;
	if (*slice_ns < max_ns)
		*slice_ns *= 2;
	return left_ns;
}

/* A wait's spin budget: budget_ns, or its timeout when shorter (>= 0). */
static inline uint64_t hcomm__spin_cap(uint64_t budget_ns, int64_t timeout_ns)
{
	return timeout_ns >= 0 && (uint64_t)timeout_ns < budget_ns ?
	       (uint64_t)timeout_ns : budget_ns;
}

/*
 * A small number of this thread's own, handed out once per thread in
 * order of first use (0, 1, 2, ...): transports spread threads over
 * their rings or lanes by it.
 */
static inline unsigned int hcomm__thread_index(void)
{
	static unsigned int next;
	static __thread unsigned int idx;	/* index + 1; 0: none yet */

	if (!idx)
		idx = __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
	return idx - 1;
}

#endif /* LIBHCOMM_INT_H */
