/* SPDX-License-Identifier: MIT */
/*
 * libhcomm: the userspace registration cache of local buffers.
 *
 * A put's source and a get's destination may be any memory of the
 * process; the kernel names memory only by region key.  This cache maps
 * page ranges to regions of the communicator's context:
 *
 *  - entries are page-aligned, disjoint and sorted by address (binary
 *    search); a lookup hits when one entry covers the buffer, has the
 *    access needed, and the generation slot of its region still reads the
 *    value REG_MEM returned: the region exists and maps the same pages.
 *    A hit takes the mutex and costs no system call;
 *  - a miss registers the buffer's pages merged with the entries they
 *    overlap (so a big buffer used piecewise ends up as one entry), with
 *    LOCAL_WRITE | REMOTE_READ, or REMOTE_READ alone when the memory is
 *    read-only (EFAULT) and the operation only reads it; the entries it
 *    replaces are deregistered after the new registration exists, so the
 *    kernel finds the pages still pinned (a kernel cache hit);
 *  - a stale entry (generation changed) is registered again the same way;
 *    when nothing changed for it, REG_MEM is a kernel cache hit;
 *  - bounds: at most max_entries entries, and beyond limit_bytes covered
 *    the least recently used entries nobody uses are deregistered (the
 *    kernel keeps them pinned within the context's cache_limit);
 *  - an entry in use by an operation in flight (reference count) is never
 *    deregistered: replaced or stale entries wait on a dead list until
 *    their last operation completed, so a key is never revoked under a
 *    transfer that has not reached the kernel yet.
 *
 * Registration talks to the device fd directly (ioctl) because the
 * generation REG_MEM returns must be kept.  Never called with a transport
 * lock held that completion needs; the reference drop is lock-free.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "hcomm_comm_int.h"

enum { ENT_FREE, ENT_LIVE, ENT_DEAD };

/*
 * struct hcomm_rcache - the cache; everything below @lock is protected by
 * it except the entries' @refs.
 * @idx:  live entries sorted by start, @nlive of them.
 * @ents: storage: live entries, dead ones waiting for refs 0, free slots.
 */
struct hcomm_rcache {
	pthread_mutex_t lock;
	int fd;
	const uint64_t *gen;
	uintptr_t page;
	uint64_t limit;
	uint64_t max_region;
	unsigned int max_live;
	unsigned int nslots;
	unsigned int nlive;
	unsigned int ndead;
	uint64_t bytes;
	uint64_t tick;
	struct hcomm_rc_ent **idx;
	struct hcomm_rc_ent *ents;
	struct hcomm_rcache_stats st;
	struct hcomm_comm_stats *pub;	/* published copy, or NULL */
};

/* Lock held: copy the counters to the published page (relaxed stores). */
static void rc_publish(struct hcomm_rcache *rc)
{
	struct hcomm_comm_stats *p = rc->pub;

	if (!p)
		return;
	__atomic_store_n(&p->rcache_hits, rc->st.hits, __ATOMIC_RELAXED);
	__atomic_store_n(&p->rcache_misses, rc->st.misses, __ATOMIC_RELAXED);
	__atomic_store_n(&p->rcache_stale, rc->st.stale, __ATOMIC_RELAXED);
	__atomic_store_n(&p->rcache_evictions, rc->st.evictions,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&p->rcache_entries, rc->nlive, __ATOMIC_RELAXED);
	__atomic_store_n(&p->rcache_bytes, rc->bytes, __ATOMIC_RELAXED);
	__atomic_store_n(&p->rcache_dead, rc->ndead, __ATOMIC_RELAXED);
}

void hcomm__rcache_publish(struct hcomm_rcache *rc,
			   struct hcomm_comm_stats *pub)
{
	pthread_mutex_lock(&rc->lock);
	rc->pub = pub;
	rc_publish(rc);
	pthread_mutex_unlock(&rc->lock);
}

static int ent_refs(const struct hcomm_rc_ent *e)
{
	return __atomic_load_n(&e->refs, __ATOMIC_ACQUIRE);
}

static int ent_valid(const struct hcomm_rcache *rc,
		     const struct hcomm_rc_ent *e)
{
	return __atomic_load_n(&rc->gen[e->region % HCOMM_GEN_SLOTS],
			       __ATOMIC_ACQUIRE) == e->gen;
}

/* REG_MEM [start, end) into e; 0 or -errno. */
static int rc_reg(struct hcomm_rcache *rc, struct hcomm_rc_ent *e,
		  uintptr_t start, uintptr_t end, unsigned int access)
{
	struct hcomm_reg_mem arg = {
		.addr = start,
		.len = end - start,
		.access = access,
	};

	if (ioctl(rc->fd, HCOMM_CMD_REG_MEM, &arg) < 0)
		return -errno;
	e->start = start;
	e->end = end;
	e->key = arg.key;
	e->gen = arg.generation;
	e->region = arg.region;
	e->access = access;
	return 0;
}

static void rc_dereg(struct hcomm_rcache *rc, struct hcomm_rc_ent *e)
{
	struct hcomm_dereg arg = { .region = e->region };

	/* Only ENOENT is possible, and then the region is gone anyway. */
	(void)ioctl(rc->fd, HCOMM_CMD_DEREG, &arg);
	e->state = ENT_FREE;
}

/* Deregister dead entries whose last operation completed. */
static void rc_sweep(struct hcomm_rcache *rc)
{
	unsigned int i;

	for (i = 0; i < rc->nslots && rc->ndead; i++) {
		struct hcomm_rc_ent *e = &rc->ents[i];

		if (e->state == ENT_DEAD && !ent_refs(e)) {
			rc_dereg(rc, e);
			rc->ndead--;
		}
	}
}

/* Take idx[i .. i + n) out of the index: deregister now or when unused. */
static void rc_retire(struct hcomm_rcache *rc, unsigned int i, unsigned int n)
{
	unsigned int k;

	for (k = i; k < i + n; k++) {
		struct hcomm_rc_ent *e = rc->idx[k];

		rc->bytes -= e->end - e->start;
		if (ent_refs(e)) {
			e->state = ENT_DEAD;
			rc->ndead++;
		} else {
			rc_dereg(rc, e);
		}
	}
	memmove(&rc->idx[i], &rc->idx[i + n],
		(rc->nlive - i - n) * sizeof(rc->idx[0]));
	rc->nlive -= n;
}

/* Last index whose entry starts at or below addr, or -1. */
static int rc_find(const struct hcomm_rcache *rc, uintptr_t addr)
{
	int lo = 0, hi = (int)rc->nlive - 1, ans = -1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;

		if (rc->idx[mid]->start <= addr) {
			ans = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return ans;
}

/*
 * Deregister least recently used unused entries (never @keep) while the
 * cache holds more than it may; all of them when @all.
 */
static void rc_evict(struct hcomm_rcache *rc, const struct hcomm_rc_ent *keep,
		     int all)
{
	while (all || rc->nlive > rc->max_live || rc->bytes > rc->limit) {
		unsigned int i, victim = rc->nlive;

		for (i = 0; i < rc->nlive; i++) {
			const struct hcomm_rc_ent *e = rc->idx[i];

			if (e == keep || ent_refs(e))
				continue;
			if (victim == rc->nlive || e->last < rc->idx[victim]->last)
				victim = i;
		}
		if (victim == rc->nlive)
			return;
		rc_retire(rc, victim, 1);
		rc->st.evictions++;
	}
}

static struct hcomm_rc_ent *rc_slot(struct hcomm_rcache *rc)
{
	unsigned int i, pass;

	for (pass = 0; pass < 3; pass++) {
		for (i = 0; i < rc->nslots; i++)
			if (rc->ents[i].state == ENT_FREE)
				return &rc->ents[i];
		if (pass == 0)
			rc_sweep(rc);
		else
			rc_evict(rc, NULL, 1);
	}
	return NULL;
}

/*
 * Register [start, end), with write access when the memory allows; on
 * EFAULT retry read-only when only reads are needed.
 */
static int rc_reg_any(struct hcomm_rcache *rc, struct hcomm_rc_ent *e,
		      uintptr_t start, uintptr_t end, int write)
{
	int ret = rc_reg(rc, e, start, end, HCOMM_ACCESS_LOCAL_WRITE |
					   HCOMM_ACCESS_REMOTE_READ);

	if (ret == -EFAULT && !write)
		ret = rc_reg(rc, e, start, end, HCOMM_ACCESS_REMOTE_READ);
	return ret;
}

int hcomm__reg_mem_code(int fd, int err)
{
	struct hcomm_info info = { 0 };
	int code = hcomm__err_code(HCOMM_CMD_REG_MEM, err);

	/* ENOMEM is the memlock limit only when there is one. */
	if (code == HCOMM_ERR_MMAP && !ioctl(fd, HCOMM_CMD_GET_INFO, &info) &&
	    info.memlock_limit == ~0ULL)
		code = HCOMM_ERR_NOMEM;
	return code;
}

static int rc_fail(struct hcomm_rcache *rc, int err, const void *addr,
		   size_t len)
{
	return hcomm__fail(hcomm__reg_mem_code(rc->fd, err), err,
			   "registering local buffer %p (%zu bytes)", addr,
			   len);
}

/*
 * The miss path, lock held: register the pages of [a, a + len) merged
 * with the entries they overlap, replace those entries, insert.
 */
static int rc_miss(struct hcomm_rcache *rc, uintptr_t a, size_t len,
		   int write, struct hcomm_rc_ent **out)
{
	uintptr_t ps = a & ~(rc->page - 1);
	uintptr_t pe = (a + len + rc->page - 1) & ~(rc->page - 1);
	uintptr_t us = ps, ue = pe;
	struct hcomm_rc_ent *e;
	unsigned int j0, j1;
	int f, ret = 0, tries;

	if (pe < a || pe - ps > rc->max_region)
		return hcomm__fail(HCOMM_ERR_LIMIT, E2BIG,
				   "local buffer %p (%zu bytes) larger than the "
				   "module's max_region_size (%llu)",
				   (void *)a, len,
				   (unsigned long long)rc->max_region);
	e = rc_slot(rc);
	if (!e)
		return hcomm__fail(HCOMM_ERR_BUSY, EBUSY,
				   "registration cache: every entry is in use "
				   "by operations in flight");

	for (tries = 0; tries < 2; tries++) {
		/* The overlapping entries: idx[j0 .. j1). */
		f = rc_find(rc, ps);
		j0 = (f >= 0 && rc->idx[f]->end > ps) ? (unsigned int)f :
							 (unsigned int)(f + 1);
		for (j1 = j0; j1 < rc->nlive && rc->idx[j1]->start < pe; j1++)
			;
		us = ps;
		ue = pe;
		if (j1 > j0) {
			if (rc->idx[j0]->start < us)
				us = rc->idx[j0]->start;
			if (rc->idx[j1 - 1]->end > ue)
				ue = rc->idx[j1 - 1]->end;
		}
		ret = -EINVAL;
		if (ue - us <= rc->max_region && (us != ps || ue != pe))
			ret = rc_reg_any(rc, e, us, ue, write);
		if (ret) {
			/* Unmerged: part of an old range may be gone. */
			us = ps;
			ue = pe;
			ret = rc_reg_any(rc, e, ps, pe, write);
		}
		if (ret != -ENOMEM || !rc->nlive)
			break;
		/* Over RLIMIT_MEMLOCK: give back what nobody uses, retry. */
		rc_evict(rc, NULL, 1);
		rc_sweep(rc);
	}
	if (ret)
		return rc_fail(rc, -ret, (void *)a, len);
	/* Everything overlapping the new range goes (after REG_MEM). */
	f = rc_find(rc, us);
	j0 = (f >= 0 && rc->idx[f]->end > us) ? (unsigned int)f :
						 (unsigned int)(f + 1);
	for (j1 = j0; j1 < rc->nlive && rc->idx[j1]->start < ue; j1++)
		;
	if (j1 > j0)
		rc_retire(rc, j0, j1 - j0);
	memmove(&rc->idx[j0 + 1], &rc->idx[j0],
		(rc->nlive - j0) * sizeof(rc->idx[0]));
	rc->idx[j0] = e;
	rc->nlive++;
	rc->bytes += e->end - e->start;
	e->state = ENT_LIVE;
	e->last = ++rc->tick;
	__atomic_store_n(&e->refs, 1, __ATOMIC_RELAXED);
	rc_evict(rc, e, 0);
	*out = e;
	return 0;
}

int hcomm__rcache_get(struct hcomm_rcache *rc, const void *addr, size_t len,
		      int write, struct hcomm_rc_ent **entp, uint64_t *key,
		      uint64_t *off)
{
	uintptr_t a = (uintptr_t)addr;
	struct hcomm_rc_ent *e = NULL;
	int f, ret;

	if (!len || a + len < a)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "local buffer %p (%zu bytes)", addr, len);
	pthread_mutex_lock(&rc->lock);
	f = rc_find(rc, a);
	if (f >= 0) {
		e = rc->idx[f];
		if (a + len > e->end ||
		    (write && !(e->access & HCOMM_ACCESS_LOCAL_WRITE)))
			e = NULL;
		else if (!ent_valid(rc, e)) {
			rc->st.stale++;
			e = NULL;
		}
	}
	if (e) {
		rc->st.hits++;
		e->last = ++rc->tick;
		__atomic_add_fetch(&e->refs, 1, __ATOMIC_RELAXED);
	} else {
		ret = rc_miss(rc, a, len, write, &e);
		if (ret) {
			rc_publish(rc);
			pthread_mutex_unlock(&rc->lock);
			return ret;
		}
		rc->st.misses++;
	}
	*key = e->key;
	*off = a - e->start;
	*entp = e;
	rc_publish(rc);
	pthread_mutex_unlock(&rc->lock);
	return 0;
}

void hcomm__rcache_put(struct hcomm_rc_ent *e)
{
	if (e)
		__atomic_sub_fetch(&e->refs, 1, __ATOMIC_RELEASE);
}

void hcomm__rcache_stats(struct hcomm_rcache *rc,
			 struct hcomm_rcache_stats *st)
{
	pthread_mutex_lock(&rc->lock);
	*st = rc->st;
	st->entries = rc->nlive;
	st->bytes = rc->bytes;
	st->dead = rc->ndead;
	pthread_mutex_unlock(&rc->lock);
}

int hcomm__rcache_create(int fd, const uint64_t *gen, uint64_t limit_bytes,
			 unsigned int max_entries, uint64_t max_region,
			 struct hcomm_rcache **out)
{
	struct hcomm_rcache *rc;
	long page = sysconf(_SC_PAGESIZE);

	*out = NULL;
	if (!max_entries || !gen || fd < 0)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm__rcache_create");
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "registration cache");
	rc->nslots = 2 * max_entries;
	rc->idx = calloc(rc->nslots, sizeof(*rc->idx));
	rc->ents = calloc(rc->nslots, sizeof(*rc->ents));
	if (!rc->idx || !rc->ents) {
		free(rc->idx);
		free(rc->ents);
		free(rc);
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "registration cache");
	}
	pthread_mutex_init(&rc->lock, NULL);
	rc->fd = fd;
	rc->gen = gen;
	rc->page = page > 0 ? (uintptr_t)page : 4096;
	rc->limit = limit_bytes;
	rc->max_region = max_region ? max_region : UINT64_MAX;
	rc->max_live = max_entries;
	*out = rc;
	return 0;
}

void hcomm__rcache_destroy(struct hcomm_rcache *rc)
{
	unsigned int i;

	if (!rc)
		return;
	for (i = 0; i < rc->nslots; i++)
		if (rc->ents[i].state != ENT_FREE)
			rc_dereg(rc, &rc->ents[i]);
	pthread_mutex_destroy(&rc->lock);
	free(rc->idx);
	free(rc->ents);
	free(rc);
}
