/* SPDX-License-Identifier: MIT */
/*
 * libpypto: event recording, the statistics derived from the events, the
 * diagnosis and the Chrome trace.
 *
 * Recording: every thread that records (workers, the transport's
 * completion thread) appends to its own buffer, a list of chunks of
 * PYPTO_EV_CHUNK events that only that thread writes, so recording takes
 * no lock and no atomic operation.  The only atomic is the push of a new
 * buffer onto the run's list (once per thread and run).  When the workers
 * have stopped, pypto__run_finish_events() merges the buffers into one
 * array sorted by start time and derives the utilisation figures; no
 * event may be recorded for a run after that.  A thread whose buffer
 * cannot be allocated gets NULL and its events are lost (the caller may
 * count them); an event whose chunk cannot be allocated is dropped and
 * counted (st.events - nev).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pypto_int.h"

/*
 * The diagnosis' rules (the seed's numbers):
 *  - communication-bound: the transfer engine is busy more than 90 % of
 *    the run, by the transport's own busy time (st.engine_util); not
 *    evaluated when the transport could not measure it (a transfer in
 *    flight is not the engine busy: it may be queued),
 *  - compute units under-used: the workers are busy (compute + host
 *    preprocessing) less than 60 % of workers x wall time,
 *  - load imbalance: the population std-dev of the workers' busy times is
 *    more than 15 % of their mean (the spread of the compute tile times
 *    is listed as an observation of its own).
 */
#define PYPTO_DIAG_XFER_UTIL_MAX	0.90
#define PYPTO_DIAG_WORKER_UTIL_MIN	0.60
#define PYPTO_DIAG_TILE_CV_MAX		0.15

/* Flow arrows (dependency edges) in the Chrome trace, at most. */
#define PYPTO_TRACE_FLOWS_MAX		20000

/* Device indices beyond this in an event are ignored by the statistics
 * (a configuration has at most 1024; this only bounds the arrays). */
#define PYPTO_DEV_STATS_MAX		65536

/* ------------------------------------------------------------------ */
/* Recording                                                          */
/* ------------------------------------------------------------------ */

/*
 * A buffer as allocated here: the shared struct plus the identity of the
 * thread that owns it, so a thread that comes back to a run after
 * recording for another one finds its buffer again instead of starting a
 * new one (a completion thread may serve overlapping runs of different
 * graphs).  The owner is the address of a thread-local variable: unique
 * among live threads; a new thread that gets a dead one's address may
 * take over its buffer, which is fine since the dead one no longer writes.
 */
struct evbuf_priv {
	struct pypto_evbuf b;		/* first: the list links these */
	const void *owner;
};

/*
 * The calling thread's cache: the run it last recorded for and its buffer
 * there.  The run is identified by its address and its start time: a run
 * freed and another allocated at the same address has a later t0_ns, so a
 * stale buffer (freed with the old run) is never returned.
 */
static __thread struct {
	const struct pypto_run *run;
	uint64_t t0_ns;
	struct pypto_evbuf *buf;
} t_ev;

struct pypto_evbuf *pypto__ev_thread_buf(struct pypto_run *r)
{
	const void *self = &t_ev;
	struct pypto_evbuf *head, *b;
	struct evbuf_priv *p;

	if (!r)
		return NULL;
	if (t_ev.run == r && t_ev.t0_ns == r->t0_ns && t_ev.buf)
		return t_ev.buf;

	/* The list only grows during a run and a pushed node's next never
	 * changes, so walking a snapshot of it is safe. */
	head = atomic_load_explicit(&r->bufs, memory_order_acquire);
	for (b = head; b; b = b->next) {
		if (((struct evbuf_priv *)b)->owner == self)
			goto found;
	}

	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;	/* the caller drops its events */
	p->owner = self;
	b = &p->b;
	b->next = head;
	while (!atomic_compare_exchange_weak_explicit(&r->bufs, &b->next, b,
						      memory_order_release,
						      memory_order_acquire))
		;
found:
	t_ev.run = r;
	t_ev.t0_ns = r->t0_ns;
	t_ev.buf = b;
	return b;
}

static inline uint64_t rel_ns(uint64_t t, uint64_t t0)
{
	return t > t0 ? t - t0 : 0;
}

/*
 * b->count counts every event offered, b's chunks hold the ones kept: an
 * event that finds its chunk full when no new chunk can be allocated is
 * dropped (b->oom says so) and the difference shows in the statistics.
 */
void pypto__ev_record(struct pypto_run *r, struct pypto_evbuf *b,
				   const struct pypto_event *e)
{
	struct pypto_ev_chunk *c;
	struct pypto_event *d;

	if (!r || !b || !e)
		return;
	b->count++;
	c = b->cur;
	if (!c || c->n >= PYPTO_EV_CHUNK) {
		c = malloc(sizeof(*c));
		if (!c) {
			b->oom = true;
			return;
		}
		c->next = NULL;
		c->n = 0;
		if (b->cur)
			b->cur->next = c;
		else
			b->head = c;
		b->cur = c;
	}
	d = &c->ev[c->n++];
	*d = *e;
	d->t0_ns = rel_ns(e->t0_ns, r->t0_ns);
	d->t1_ns = rel_ns(e->t1_ns, r->t0_ns);
	if (d->t1_ns < d->t0_ns)
		d->t1_ns = d->t0_ns;
}

static void free_bufs(struct pypto_evbuf *b)
{
	while (b) {
		struct pypto_evbuf *next = b->next;
		struct pypto_ev_chunk *c = b->head;

		while (c) {
			struct pypto_ev_chunk *cn = c->next;

			free(c);
			c = cn;
		}
		free((struct evbuf_priv *)b);
		b = next;
	}
}

static int ev_cmp(const void *pa, const void *pb)
{
	const struct pypto_event *a = pa, *b = pb;

#define CMP(f) do { if (a->f != b->f) return a->f < b->f ? -1 : 1; } while (0)
	CMP(t0_ns);
	CMP(tile);
	/* The rest only makes the order total (deterministic output). */
	CMP(t1_ns);
	CMP(stage);
	CMP(attempt);
	CMP(worker);
	CMP(device);
	CMP(bytes);
#undef CMP
	return 0;
}

/* Measure of a union of intervals fed in order of their starts. */
struct ivunion {
	uint64_t s, e, sum;
	bool any;
};

static void iv_add(struct ivunion *u, uint64_t t0, uint64_t t1)
{
	if (!u->any) {
		u->s = t0;
		u->e = t1;
		u->any = true;
	} else if (t0 > u->e) {
		u->sum += u->e - u->s;
		u->s = t0;
		u->e = t1;
	} else if (t1 > u->e) {
		u->e = t1;
	}
}

static uint64_t iv_total(const struct ivunion *u)
{
	return u->any ? u->sum + (u->e - u->s) : 0;
}

/* ---- overlap: a sweep over busy, in-flight and blocked intervals ---- */

enum { SW_BUSY, SW_FLIGHT, SW_BLOCKED, SW_COLL };

struct swpt {
	uint64_t t;
	int8_t d;			/* +1 opens, -1 closes */
	uint8_t what;			/* SW_* */
};

static int swpt_cmp(const void *pa, const void *pb)
{
	const struct swpt *a = pa, *b = pb;

	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	return 0;			/* order within one instant: no effect */
}

struct sweep {
	struct swpt *p;
	size_t n, cap;
};

static int sw_add(struct sweep *sw, uint64_t t0, uint64_t t1, uint8_t what)
{
	if (t1 <= t0)
		return 0;
	if (sw->n + 2 > sw->cap) {
		size_t cap = sw->cap ? 2 * sw->cap : 1024;
		struct swpt *p = realloc(sw->p, cap * sizeof(*p));

		if (!p)
			return -1;
		sw->p = p;
		sw->cap = cap;
	}
	sw->p[sw->n++] = (struct swpt){ t0, 1, what };
	sw->p[sw->n++] = (struct swpt){ t1, -1, what };
	return 0;
}

/*
 * The intervals in which a tile waited only for transfers: a tile that is
 * not a transfer, from the moment its other inputs had finished and its
 * first transfer input was issued until its last transfer input landed
 * (every attempt of a tile counts: a re-issue is still the same wait).  A
 * transfer nothing runs after (no consumer) holds up the end of the run:
 * it counts as a waiting tile of its own while in flight.  Without the
 * graph (or for events of tiles it does not have), every transfer event
 * counts that way.
 */
static int blocked_intervals(const struct pypto_run *r, struct sweep *sw)
{
	const struct pypto_graph *g = r->g;
	uint64_t *first = NULL, *last = NULL, *nt_end = NULL, *x_first = NULL,
		 *x_last = NULL;
	uint32_t i, k, n = g ? g->n : 0;
	int ret = -1;

	if (n) {
		first = malloc(n * sizeof(*first));
		last = calloc(n, sizeof(*last));
		nt_end = calloc(n, sizeof(*nt_end));
		x_first = malloc(n * sizeof(*x_first));
		x_last = calloc(n, sizeof(*x_last));
		if (!first || !last || !nt_end || !x_first || !x_last)
			goto out;
		memset(first, 0xff, n * sizeof(*first));
		memset(x_first, 0xff, n * sizeof(*x_first));
	}
	for (i = 0; i < r->nev; i++) {
		const struct pypto_event *e = &r->ev[i];

		if (e->tile < n) {
			if (e->t0_ns < first[e->tile])
				first[e->tile] = e->t0_ns;
			if (e->t1_ns > last[e->tile])
				last[e->tile] = e->t1_ns;
		} else if (e->stage == PYPTO_STAGE_TRANSFER &&
			   sw_add(sw, e->t0_ns, e->t1_ns, SW_BLOCKED)) {
			goto out;
		}
	}
	for (i = 0; i < n; i++) {
		const struct pypto_tile *p = &g->tiles[i];
		bool xp = p->kind == PYPTO_TRANSFER;

		if (first[i] == UINT64_MAX)
			continue;		/* never ran */
		if (xp && !p->nconsumers &&
		    sw_add(sw, first[i], last[i], SW_BLOCKED))
			goto out;
		for (k = 0; k < p->nconsumers; k++) {
			uint32_t c = p->consumers[k];

			if (c >= n)
				continue;
			if (!xp) {
				if (last[i] > nt_end[c])
					nt_end[c] = last[i];
				continue;
			}
			if (first[i] < x_first[c])
				x_first[c] = first[i];
			if (last[i] > x_last[c])
				x_last[c] = last[i];
		}
	}
	for (i = 0; i < n; i++) {
		uint64_t b0;

		if (g->tiles[i].kind == PYPTO_TRANSFER ||
		    x_first[i] == UINT64_MAX)
			continue;
		b0 = nt_end[i] > x_first[i] ? nt_end[i] : x_first[i];
		if (sw_add(sw, b0, x_last[i], SW_BLOCKED))
			goto out;
	}
	ret = 0;
out:
	free(first);
	free(last);
	free(nt_end);
	free(x_first);
	free(x_last);
	return ret;
}

/*
 * overlap_eff = 1 - exposed / covered, the share of the transfer time
 * the pipeline hid behind work:
 *  covered  workers x the time in which at least one transfer was in
 *           flight (the worker time transfers could hide behind),
 *  exposed  the part of it in which workers sat idle while tiles waited
 *           only for transfers: at each instant min(idle workers, such
 *           tiles), since a waiting tile could have kept one worker busy.
 * 1: no worker ever waited for a transfer; 0: every worker waited for
 * transfers whenever one was in flight (transfer and compute alternate).
 * Idle time with no tile waiting for a transfer (no work at all, or work
 * waiting for compute) is not the transfers' fault and does not count.
 * 0 when the run had no transfer.
 *
 * The same sweep measures the collectives: coll_flight_ns, the time with
 * an allreduce in flight, and coll_overlap_ns, the part of it in which a
 * worker ran a compute or host tile.
 */
static int derive_overlap(struct pypto_run *r, uint32_t workers)
{
	struct pypto_stats *st = &r->st;
	struct sweep sw = { 0 };
	long busy = 0, flight = 0, blocked = 0, coll = 0;
	uint64_t cover = 0, exposed = 0, cflight = 0, coverlap = 0;
	size_t i;

	for (i = 0; i < r->nev; i++) {
		const struct pypto_event *e = &r->ev[i];
		uint8_t what = SW_BUSY;

		if (e->stage == PYPTO_STAGE_TRANSFER)
			what = SW_FLIGHT;
		else if (e->stage == PYPTO_STAGE_COLLECTIVE)
			what = SW_COLL;
		if (sw_add(&sw, e->t0_ns, e->t1_ns, what))
			goto nomem;
	}
	if (blocked_intervals(r, &sw))
		goto nomem;
	if (sw.n)
		qsort(sw.p, sw.n, sizeof(*sw.p), swpt_cmp);
	for (i = 0; i < sw.n; i++) {
		const struct swpt *q = &sw.p[i];
		uint64_t dt = i ? q->t - sw.p[i - 1].t : 0;

		if (dt && flight > 0) {
			long idle = (long)workers - busy;
			long lost = idle < blocked ? idle : blocked;

			cover += (uint64_t)workers * dt;
			if (lost > 0)
				exposed += (uint64_t)lost * dt;
		}
		if (dt && coll > 0) {
			cflight += dt;
			if (busy > 0)
				coverlap += dt;
		}
		if (q->what == SW_BUSY)
			busy += q->d;
		else if (q->what == SW_FLIGHT)
			flight += q->d;
		else if (q->what == SW_COLL)
			coll += q->d;
		else
			blocked += q->d;
	}
	free(sw.p);
	st->xfer_cover_ns = cover;
	st->xfer_exposed_ns = exposed;
	st->overlap_eff = cover ? 1.0 - (double)exposed / (double)cover : 0;
	st->coll_flight_ns = cflight;
	st->coll_overlap_ns = coverlap;
	return 0;
nomem:
	free(sw.p);
	return pypto__fail(PYPTO_ERR_NOMEM, "no memory for the overlap of %u "
			   "events", r->nev);
}

struct devacc {
	struct ivunion xfer;
};

/*
 * The figures in r->st that come from the events (r->ev sorted by t0).
 * The wall time is r->st.wall_ns; when the caller did not set it, the end
 * of the last event stands in.
 */
static int derive_stats(struct pypto_run *r)
{
	struct pypto_stats *st = &r->st;
	uint64_t wall = st->wall_ns, busy = 0, ncomp = 0;
	uint32_t workers = r->cfg.workers ? r->cfg.workers : st->workers;
	double sum = 0, mean, var = 0;
	struct devacc *dev = NULL;
	int32_t maxdev = -1;
	uint32_t i;

	st->worker_util = st->xfer_util = st->overlap_eff = 0;
	st->tile_mean_ns = st->tile_cv = 0;
	st->xfer_cover_ns = st->xfer_exposed_ns = 0;
	st->coll_flight_ns = st->coll_overlap_ns = 0;
	st->worker_cv = 0;
	if (!r->nev)
		return 0;

	for (i = 0; i < r->nev; i++) {
		const struct pypto_event *e = &r->ev[i];
		uint64_t d = e->t1_ns - e->t0_ns;

		if (!st->wall_ns && e->t1_ns > wall)
			wall = e->t1_ns;
		if (e->stage == PYPTO_STAGE_COMPUTE ||
		    e->stage == PYPTO_STAGE_PREFETCH)
			busy += d;
		if (e->stage == PYPTO_STAGE_COMPUTE) {
			sum += (double)d;
			ncomp++;
		}
		if (e->stage == PYPTO_STAGE_TRANSFER &&
		    e->device >= 0 && e->device < PYPTO_DEV_STATS_MAX &&
		    e->device > maxdev)
			maxdev = e->device;
	}

	if (workers && wall)
		st->worker_util = (double)busy /
				  ((double)workers * (double)wall);

	if (ncomp) {
		mean = sum / (double)ncomp;
		for (i = 0; i < r->nev; i++) {
			const struct pypto_event *e = &r->ev[i];
			double d;

			if (e->stage != PYPTO_STAGE_COMPUTE)
				continue;
			d = (double)(e->t1_ns - e->t0_ns) - mean;
			var += d * d;
		}
		var /= (double)ncomp;
		st->tile_mean_ns = mean;
		st->tile_cv = mean > 0 ? sqrt(var) / mean : 0;
	}

	{
		uint64_t *wb = workers <= 65536 ?
			       calloc(workers ? workers : 1, sizeof(*wb)) : NULL;
		double wm = 0, wv = 0;

		if (!wb)
			return pypto__fail(PYPTO_ERR_NOMEM, "no memory for %u "
					   "workers' statistics", workers);
		for (i = 0; i < workers; i++)
			if (r->worker_busy_ns)
				wb[i] = r->worker_busy_ns[i];
		for (i = 0; !r->worker_busy_ns && i < r->nev; i++) {
			const struct pypto_event *e = &r->ev[i];

			if ((e->stage == PYPTO_STAGE_COMPUTE ||
			     e->stage == PYPTO_STAGE_PREFETCH) &&
			    e->worker < workers)
				wb[e->worker] += e->t1_ns - e->t0_ns;
		}
		for (i = 0; i < workers; i++)
			wm += (double)wb[i];
		wm = workers ? wm / workers : 0;
		for (i = 0; i < workers; i++)
			wv += ((double)wb[i] - wm) * ((double)wb[i] - wm);
		wv = workers ? wv / workers : 0;
		st->worker_cv = wm > 0 ? sqrt(wv) / wm : 0;
		free(wb);
	}

	if (maxdev < 0)
		return derive_overlap(r, workers);
	dev = calloc((size_t)maxdev + 1, sizeof(*dev));
	if (!dev)
		return pypto__fail(PYPTO_ERR_NOMEM, "no memory for %d devices' "
				   "statistics", maxdev + 1);
	for (i = 0; i < r->nev; i++) {
		const struct pypto_event *e = &r->ev[i];

		if (e->stage != PYPTO_STAGE_TRANSFER || e->device < 0 ||
		    e->device > maxdev)
			continue;
		/* Sorted by t0: a device's events come in order of start. */
		iv_add(&dev[e->device].xfer, e->t0_ns, e->t1_ns);
	}

	/*
	 * xfer_util: the busiest device's time with at least one transfer in
	 * flight (measure of the union of its transfer intervals) / wall.
	 * In flight is not busy: it includes the time a transfer queued.
	 */
	{
		int32_t d;

		for (d = 0; d <= maxdev; d++) {
			uint64_t xu = iv_total(&dev[d].xfer);

			if (wall && (double)xu / (double)wall > st->xfer_util)
				st->xfer_util = (double)xu / (double)wall;
		}
	}
	free(dev);
	return derive_overlap(r, workers);
}

/*
 * Detaches r's recording buffers (returned) and drops its merged events;
 * this thread's cache must not outlive the buffers.
 */
static struct pypto_evbuf *take_bufs(struct pypto_run *r)
{
	struct pypto_evbuf *bufs;

	bufs = atomic_exchange_explicit(&r->bufs, NULL, memory_order_acquire);
	if (t_ev.run == r) {
		t_ev.run = NULL;
		t_ev.buf = NULL;
	}
	free(r->ev);
	r->ev = NULL;
	r->nev = 0;
	return bufs;
}

/*
 * After the workers (and any thread that records) stopped and were joined,
 * which orders their writes before these reads.
 */
int pypto__run_finish_events(struct pypto_run *r)
{
	struct pypto_evbuf *bufs, *b;
	uint64_t kept = 0, offered = 0;
	uint32_t n = 0;
	int ret = 0;

	if (!r)
		return pypto__fail(PYPTO_ERR_INVAL, "finish events: NULL run");
	bufs = take_bufs(r);
	for (b = bufs; b; b = b->next) {
		struct pypto_ev_chunk *c;

		offered += b->count;
		for (c = b->head; c; c = c->next)
			kept += c->n;
	}
	if (kept > UINT32_MAX) {
		ret = pypto__fail(PYPTO_ERR_LIMIT, "%" PRIu64 " events: more "
				  "than a run can keep", kept);
		goto out;
	}
	if (kept) {
		r->ev = malloc((size_t)kept * sizeof(*r->ev));
		if (!r->ev) {
			ret = pypto__fail(PYPTO_ERR_NOMEM, "no memory for %"
					  PRIu64 " events", kept);
			goto out;
		}
	}
	for (b = kept ? bufs : NULL; b; b = b->next) {
		struct pypto_ev_chunk *c;

		for (c = b->head; c; c = c->next) {
			memcpy(&r->ev[n], c->ev, c->n * sizeof(*c->ev));
			n += c->n;
		}
	}
	r->nev = n;
	if (n > 1)
		qsort(r->ev, n, sizeof(*r->ev), ev_cmp);
out:
	free_bufs(bufs);
	/*
	 * st.events is what the run recorded, r->nev what was kept: they
	 * differ only when memory ran out (the diagnosis says so).
	 */
	r->st.events = offered;
	if (ret)
		return ret;
	return derive_stats(r);
}

void pypto__run_free_events(struct pypto_run *r)
{
	if (!r)
		return;
	/* Buffers of a run that never got to finish_events. */
	free_bufs(take_bufs(r));
}

PYPTO_EXPORT unsigned int pypto_run_events(const struct pypto_run *r,
					   const struct pypto_event **ev)
{
	if (ev)
		*ev = r ? r->ev : NULL;
	return r ? r->nev : 0;
}

/* ------------------------------------------------------------------ */
/* Diagnosis                                                          */
/* ------------------------------------------------------------------ */

static const char *fmt_bytes(char *buf, size_t len, uint64_t b)
{
	if (b >= (1ULL << 30))
		snprintf(buf, len, "%.2f GiB", b / 1073741824.0);
	else if (b >= (1ULL << 20))
		snprintf(buf, len, "%.2f MiB", b / 1048576.0);
	else if (b >= (1ULL << 10))
		snprintf(buf, len, "%.2f KiB", b / 1024.0);
	else
		snprintf(buf, len, "%" PRIu64 " B", b);
	return buf;
}

struct wl_guide {
	const char *name;
	uint32_t lo, hi;		/* 0, 0: no guidance */
};

static struct wl_guide wl_guide(int wl)
{
	switch (wl) {
	case PYPTO_WL_CONV:
		return (struct wl_guide){ "convolution", 128, 256 };
	case PYPTO_WL_FC:
		return (struct wl_guide){ "fully connected", 64, 128 };
	case PYPTO_WL_ATTENTION:
		return (struct wl_guide){ "attention", 32, 64 };
	default:
		return (struct wl_guide){ "generic", 0, 0 };
	}
}

/* Busiest and idlest worker's busy time, from worker_busy_ns when the
 * scheduler filled it, else from the events; false when neither. */
static bool worker_spread(const struct pypto_run *r, uint32_t workers,
			  uint64_t *lo, uint64_t *hi)
{
	uint64_t *busy = r->worker_busy_ns, *own = NULL;
	uint32_t i;

	if (!workers || workers > 65536)
		return false;
	if (!busy) {
		if (!r->nev)
			return false;
		own = busy = calloc(workers, sizeof(*busy));
		if (!own)
			return false;
		for (i = 0; i < r->nev; i++) {
			const struct pypto_event *e = &r->ev[i];

			if ((e->stage == PYPTO_STAGE_COMPUTE ||
			     e->stage == PYPTO_STAGE_PREFETCH) &&
			    e->worker < workers)
				own[e->worker] += e->t1_ns - e->t0_ns;
		}
	}
	*lo = UINT64_MAX;
	*hi = 0;
	for (i = 0; i < workers; i++) {
		if (busy[i] < *lo)
			*lo = busy[i];
		if (busy[i] > *hi)
			*hi = busy[i];
	}
	free(own);
	return true;
}

/* "    <what> tiles: a, b, ...": the first 8 events with flag, of total. */
static void diag_flagged(const struct pypto_run *r, FILE *f, uint8_t flag,
			 const char *what, uint64_t total)
{
	uint32_t i, shown = 0;

	for (i = 0; i < r->nev && shown < 8; i++) {
		const struct pypto_event *e = &r->ev[i];

		if (!(e->flags & flag))
			continue;
		if (!shown)
			fprintf(f, "    %s tiles: ", what);
		fprintf(f, "%s%s", shown ? ", " : "",
			e->tile < r->g->n ? r->g->tiles[e->tile].name : "?");
		shown++;
	}
	if (shown)
		fprintf(f, "%s\n", total > shown ? ", ..." : "");
}

/*
 * The run's link events (libhcomm): when, which link, the stall of each
 * failover, and the transfer tiles it delayed (by name, from the events).
 */

/* The PEER_LOST events the run kept. */
static unsigned int lost_events(const struct pypto_run *r)
{
	unsigned int i, n = 0;

	for (i = 0; i < r->nlev; i++)
		n += r->lev[i].type == HCOMM_EVENT_PEER_LOST;
	return n;
}

static void diag_links(const struct pypto_run *r, FILE *f)
{
	const struct pypto_stats *st = &r->st;
	uint64_t down = 0;
	bool have_down = false;
	uint32_t i;
	char b1[32];

	if (!st->link_events && !st->ranks_lost)
		return;
	fprintf(f, "  link events         %u (libhcomm), %u failover(s), "
		"stall %s in all, %" PRIu64 " transfer tile(s) delayed%s\n",
		st->link_events, st->failovers,
		pypto__fmt_ns(b1, sizeof(b1), (double)st->failover_stall_ns),
		st->tiles_delayed, st->peer_lost ? ", a rank was lost" : "");
	if (st->ranks_lost)
		fprintf(f, "  ranks lost          %u; %" PRIu64 " transfer "
			"tile(s) re-placed on a mirror (transfers completed "
			"before a loss stay done: a put's bytes were at the "
			"lost rank)\n", st->ranks_lost, st->tiles_replaced);
	for (i = 0; i < r->nlev; i++) {
		const struct pypto_link_event *le = &r->lev[i];

		fprintf(f, "    at %-10s %-11s rank %d, %s",
			pypto__fmt_ns(b1, sizeof(b1), (double)le->t_ns),
			hcomm_event_name((int)le->type), le->peer,
			hcomm_xport_name(le->xport));
		if (le->type == HCOMM_EVENT_LINK_DOWN) {
			if (!have_down)	/* as link_stats(): the first */
				down = le->t_ns;
			have_down = true;
			fprintf(f, ", %u transfer tile(s) in flight (delayed: "
				"the transport replays their descriptors "
				"exactly once, not issued again)",
				le->tiles_in_flight);
		} else if (le->type == HCOMM_EVENT_FAILED_OVER && have_down &&
			   le->t_ns >= down) {
			fprintf(f, ", stall %s", pypto__fmt_ns(b1, sizeof(b1),
				(double)(le->t_ns - down)));
			have_down = false;
		} else if (le->type == HCOMM_EVENT_FAILED_OVER) {
			have_down = false;
		} else if (le->type == HCOMM_EVENT_PEER_LOST) {
			fprintf(f, st->tiles_replaced ?
				": its unfinished transfer tiles go to a mirror" :
				": nothing is issued to it again");
		}
		fprintf(f, ": %s\n", le->why);
	}
	if (st->link_events > r->nlev)
		fprintf(f, "    (%u more not kept)\n",
			st->link_events - r->nlev);
	/*
	 * A failed transfer can tell of a loss before libhcomm's PEER_LOST
	 * event comes, and the run can end (its tiles re-placed) before it
	 * does: the loss is still the run's.
	 */
	if (st->ranks_lost && !lost_events(r))
		fprintf(f, "    a rank was lost, seen by a failed transfer "
			"(no PEER_LOST event during the run)%s\n",
			st->tiles_replaced ?
			": its unfinished transfer tiles go to a mirror" :
			": nothing is issued to it again");
	diag_flagged(r, f, PYPTO_EVF_DELAYED, "delayed", st->tiles_delayed);
	diag_flagged(r, f, PYPTO_EVF_REPLACED, "re-placed",
		     st->tiles_replaced);
}

/*
 * The allreduce tiles: how many, their time from issue to completion,
 * the bytes, and how much of the time they were in flight workers ran
 * tiles (the collectives hidden behind work).
 */
static void diag_coll(const struct pypto_run *r, FILE *f)
{
	const struct pypto_stats *st = &r->st;
	char b1[32], b2[32], b3[32];

	if (!r->g || !r->g->nar)
		return;
	fprintf(f, "  allreduces          %" PRIu64 " of %u done, %s from "
		"issue to completion in all, %s contributed\n",
		st->tiles_allreduce, r->g->nar,
		pypto__fmt_ns(b1, sizeof(b1), (double)st->allreduce_ns),
		fmt_bytes(b2, sizeof(b2), st->allreduce_bytes));
	if (!r->nev)
		return;
	fprintf(f, "  allreduce overlap   %.1f %% (%s of the %s with an "
		"allreduce in flight, workers ran tiles)\n",
		st->coll_flight_ns ? 100.0 * (double)st->coll_overlap_ns /
		(double)st->coll_flight_ns : 0.0,
		pypto__fmt_ns(b1, sizeof(b1), (double)st->coll_overlap_ns),
		pypto__fmt_ns(b3, sizeof(b3), (double)st->coll_flight_ns));
}

PYPTO_EXPORT unsigned int pypto_run_diagnose(const struct pypto_run *r,
					     FILE *f)
{
	const struct pypto_stats *st;
	unsigned int mask = 0;
	uint32_t workers, devices, tsize = 0;
	struct wl_guide gd;
	char b1[32], b2[32];
	bool have_ev;
	double util;
	uint64_t lo = 0, hi = 0;

	if (!r)
		return 0;
	st = &r->st;
	workers = r->cfg.workers ? r->cfg.workers : st->workers;
	devices = r->cfg.devices ? r->cfg.devices : st->devices;
	have_ev = r->nev > 0;
	/* Without events only the counters can say how busy the workers
	 * were; the transfer and imbalance rules need the events. */
	util = st->worker_util;
	if (!have_ev && workers && st->wall_ns)
		util = (double)(st->compute_ns + st->host_ns) /
		       ((double)workers * (double)st->wall_ns);

	if (st->wall_ns || have_ev) {
		if (util < PYPTO_DIAG_WORKER_UTIL_MIN)
			mask |= PYPTO_DIAG_UNDERUSED;
		if (st->engine_known &&
		    st->engine_util > PYPTO_DIAG_XFER_UTIL_MAX)
			mask |= PYPTO_DIAG_COMM_BOUND;
		if (have_ev && st->worker_cv > PYPTO_DIAG_TILE_CV_MAX)
			mask |= PYPTO_DIAG_IMBALANCE;
	}
	if (!f)
		return mask;

	fprintf(f, "pypto diagnosis: %u workers, %u device%s, transport %s"
		"%s%s\n", workers, devices, devices == 1 ? "" : "s",
		r->xport_name ? r->xport_name : "none",
		r->status ? ", run failed: " : "",
		r->status ? pypto_strerror(r->status) : "");
	fprintf(f, "  wall time           %s\n",
		pypto__fmt_ns(b1, sizeof(b1), (double)st->wall_ns));
	fprintf(f, "  tiles               %u: %" PRIu64 " compute, %" PRIu64
		" transfer, %" PRIu64 " host", st->tiles, st->tiles_compute,
		st->tiles_transfer, st->tiles_host);
	if (r->g && r->g->nar)
		fprintf(f, ", %" PRIu64 " allreduce", st->tiles_allreduce);
	fputc('\n', f);
	fprintf(f, "  worker utilisation  %.1f %%%s", util * 100,
		have_ev ? "" : " (from the counters)");
	if (worker_spread(r, workers, &lo, &hi) && st->wall_ns)
		fprintf(f, " (per worker %.1f .. %.1f %%)",
			100.0 * (double)lo / (double)st->wall_ns,
			100.0 * (double)hi / (double)st->wall_ns);
	fputc('\n', f);
	if (have_ev)
		fprintf(f, "  worker load         cv %.3f (std-dev / mean of "
			"the workers' busy time)\n", st->worker_cv);
	if (st->engine_known)
		fprintf(f, "  transfer engine     %.1f %% busy (%s over %u "
			"lane%s, the transport's measure)\n",
			st->engine_util * 100,
			pypto__fmt_ns(b1, sizeof(b1),
				      (double)st->engine_busy_ns),
			st->engine_lanes, st->engine_lanes == 1 ? "" : "s");
	else
		fprintf(f, "  transfer engine     busy time not measured by "
			"the transport (hcomm: %s needs root): COMM_BOUND not "
			"evaluated\n", "/sys/kernel/debug/hcomm/stats");
	if (have_ev) {
		fprintf(f, "  transfers in flight %.1f %% of the run (busiest "
			"device; queueing included)\n", st->xfer_util * 100);
		fprintf(f, "  overlap efficiency  %.1f %% (%s of %s worker "
			"time under transfers exposed)\n",
			st->overlap_eff * 100,
			pypto__fmt_ns(b1, sizeof(b1),
				      (double)st->xfer_exposed_ns),
			pypto__fmt_ns(b2, sizeof(b2),
				      (double)st->xfer_cover_ns));
		fprintf(f, "  compute tile time   mean %s, cv %.3f%s\n",
			pypto__fmt_ns(b1, sizeof(b1), st->tile_mean_ns),
			st->tile_cv, st->tile_cv > PYPTO_DIAG_TILE_CV_MAX ?
			" (uneven tiles: an observation, not the imbalance "
			"rule)" : "");
	} else {
		fprintf(f, "  events              none recorded (profile off?):"
			" the transfer and imbalance rules need them\n");
	}
	fprintf(f, "  steals              %" PRIu64 " of %" PRIu64
		" attempts, %" PRIu64 " parks\n", st->steals,
		st->steal_attempts, st->parks);
	fprintf(f, "  transfer rounds     %" PRIu64 ", %.1f descriptors per "
		"round, %s\n", st->rounds,
		st->rounds ? (double)st->descs / (double)st->rounds : 0.0,
		fmt_bytes(b2, sizeof(b2), st->xfer_bytes));
	fprintf(f, "  retries             %" PRIu64 " (%" PRIu64
		" failed descriptors)\n", st->xfer_retries, st->xfer_failures);
	diag_coll(r, f);
	diag_links(r, f);
	if (st->events > r->nev)
		fprintf(f, "  events              %" PRIu64 " recorded, %"
			PRIu64 " dropped (out of memory): figures are partial\n",
			st->events, st->events - r->nev);

	if (mask & PYPTO_DIAG_COMM_BOUND)
		fprintf(f, "COMM_BOUND: the transfer engine is busy %.1f %% of "
			"the run (> %.0f %%): use larger tiles / fewer "
			"transfers, raise prefetch_depth only if compute is "
			"idle, check the QoS share\n", st->engine_util * 100,
			PYPTO_DIAG_XFER_UTIL_MAX * 100);
	if (mask & PYPTO_DIAG_UNDERUSED)
		fprintf(f, "UNDERUSED: worker utilisation %.1f %% (< %.0f %%): "
			"workers wait: raise prefetch_depth (now %u), %s, "
			"more parallel tiles (smaller tile_size) or fewer "
			"workers\n", util * 100,
			PYPTO_DIAG_WORKER_UTIL_MIN * 100,
			r->cfg.prefetch_depth, r->cfg.double_buffering ?
			"double_buffering (already on)" :
			"enable double_buffering");
	if (mask & PYPTO_DIAG_IMBALANCE)
		fprintf(f, "IMBALANCE: the workers' busy time varies by %.1f "
			"%% of its mean (> %.0f %%, per worker %s .. %s): "
			"uneven load: more, smaller tiles (tile_size), spread "
			"the affinities over the devices; if the tiles are "
			"uneven too (cv %.3f), make tile sizes divide the shape "
			"or split the large tiles\n", st->worker_cv * 100,
			PYPTO_DIAG_TILE_CV_MAX * 100,
			pypto__fmt_ns(b1, sizeof(b1), (double)lo),
			pypto__fmt_ns(b2, sizeof(b2), (double)hi),
			st->tile_cv);
	if (!mask)
		fprintf(f, "no bottleneck found\n");

	gd = wl_guide(r->g ? (int)r->g->workload : PYPTO_WL_GENERIC);
	if (r->g)
		tsize = r->g->wl_tile_size;
	if (!tsize)
		tsize = r->cfg.tile_size;
	if (!gd.lo)
		fprintf(f, "tile size: %s workload, tile_size %u: no guidance "
			"(pypto_graph_set_workload() names the workload)\n",
			gd.name, tsize);
	else if (tsize >= gd.lo && tsize <= gd.hi)
		fprintf(f, "tile size: %s workload, tile_size %u: inside the "
			"recommended %u-%u\n", gd.name, tsize, gd.lo, gd.hi);
	else
		fprintf(f, "tile size: %s workload, tile_size %u: outside the "
			"recommended %u-%u (%s)\n", gd.name, tsize, gd.lo,
			gd.hi, tsize < gd.lo ? "larger tiles amortise the "
			"transfers" : "smaller tiles give more parallelism");
	return mask;
}

/* ------------------------------------------------------------------ */
/* Chrome trace                                                       */
/* ------------------------------------------------------------------ */

/* ns as microseconds with 3 decimals: exact, no floating point. */
static void json_us(FILE *f, uint64_t ns)
{
	fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned int)(ns % 1000));
}

static const char *stage_name(unsigned int s)
{
	switch (s) {
	case PYPTO_STAGE_PREFETCH: return "prefetch";
	case PYPTO_STAGE_TRANSFER: return "transfer";
	case PYPTO_STAGE_COMPUTE:  return "compute";
	case PYPTO_STAGE_COLLECTIVE: return "collective";
	default:		   return "unknown";
	}
}

static const char *tile_name(const struct pypto_run *r, uint32_t t,
			     char *buf, size_t len)
{
	if (r->g && t < r->g->n && r->g->tiles[t].name[0])
		return r->g->tiles[t].name;
	snprintf(buf, len, "t%" PRIu32, t);
	return buf;
}

/*
 * Lanes: workers are pid 1 (tid = worker), transfers pid 2 (tid = device:
 * one lane per device), collectives pid 3 (one lane, tid 0: libhcomm
 * runs them one after the other, but several may be in flight, queued
 * behind each other).  Slices on one thread must nest for trace viewers
 * (Perfetto drops the ones that overlap without nesting), and a device has
 * several transfers in flight at once: an event that overlaps the previous
 * ones of its lane goes to an extra row of the lane, a thread of its own
 * (tid = row * 65536 + worker/device, named "... (row N)"), next to it.
 */
#define TRACE_ROWS	256		/* row fits the uint8_t */
#define TRACE_ROW_TID	65536L

struct lane {
	uint64_t *ends;			/* end of the last slice of each row */
	uint32_t n;			/* rows in use */
};

struct lanes {
	uint32_t nw, nd, nc;		/* worker, device, collective lanes */
	struct lane *l;			/* nw + nd + nc */
	uint8_t *row;			/* per event */
};

static uint32_t ev_dev(const struct pypto_event *e)
{
	/* A transfer without a (sane) device goes to lane 0. */
	return e->device >= 0 && e->device < TRACE_ROW_TID ?
	       (uint32_t)e->device : 0;
}

static uint32_t lane_of(const struct lanes *L, const struct pypto_event *e)
{
	if (e->stage == PYPTO_STAGE_COLLECTIVE)
		return L->nw + L->nd;
	return e->stage == PYPTO_STAGE_TRANSFER ? L->nw + ev_dev(e) :
	       e->worker;
}

static void lanes_free(struct lanes *L)
{
	uint32_t i;

	for (i = 0; L->l && i < L->nw + L->nd + L->nc; i++)
		free(L->l[i].ends);
	free(L->l);
	free(L->row);
}

static int lanes_build(const struct pypto_run *r, struct lanes *L)
{
	uint32_t workers = r->cfg.workers ? r->cfg.workers : r->st.workers;
	uint32_t i, k;

	memset(L, 0, sizeof(*L));
	L->nw = workers;
	for (i = 0; i < r->nev; i++) {
		const struct pypto_event *e = &r->ev[i];

		if (e->stage == PYPTO_STAGE_COLLECTIVE) {
			L->nc = 1;
		} else if (e->stage == PYPTO_STAGE_TRANSFER) {
			if (ev_dev(e) + 1 > L->nd)
				L->nd = ev_dev(e) + 1;
		} else if (e->worker + 1U > L->nw) {
			L->nw = e->worker + 1U;
		}
	}
	if (L->nw > TRACE_ROW_TID)	/* workers is at most 1024 */
		L->nw = TRACE_ROW_TID;
	L->l = calloc((size_t)L->nw + L->nd + L->nc, sizeof(*L->l));
	L->row = malloc(r->nev ? r->nev : 1);
	if (!L->l || !L->row)
		goto nomem;
	/* Sorted by t0: first fit keeps every row free of overlaps. */
	for (i = 0; i < r->nev; i++) {
		const struct pypto_event *e = &r->ev[i];
		struct lane *ln = &L->l[lane_of(L, e)];

		if (!ln->ends) {
			ln->ends = calloc(TRACE_ROWS, sizeof(*ln->ends));
			if (!ln->ends)
				goto nomem;
			ln->n = 1;
		}
		for (k = 0; k < ln->n && ln->ends[k] > e->t0_ns; k++)
			;
		if (k == ln->n) {
			if (ln->n < TRACE_ROWS) {
				ln->n++;
			} else {	/* full: the row that ends first */
				uint32_t j;

				for (k = 0, j = 1; j < ln->n; j++)
					if (ln->ends[j] < ln->ends[k])
						k = j;
			}
		}
		if (e->t1_ns > ln->ends[k])
			ln->ends[k] = e->t1_ns;
		L->row[i] = (uint8_t)k;
	}
	return 0;
nomem:
	lanes_free(L);
	return pypto__fail(PYPTO_ERR_NOMEM, "trace: no memory for the lanes "
			   "of %u events", r->nev);
}

static void ev_lane(const struct lanes *L, const struct pypto_run *r,
		    uint32_t i, int *pid, long *tid)
{
	const struct pypto_event *e = &r->ev[i];
	long base = e->stage == PYPTO_STAGE_TRANSFER ? (long)ev_dev(e) :
		    (long)e->worker;

	*pid = e->stage == PYPTO_STAGE_TRANSFER ? 2 : 1;
	if (e->stage == PYPTO_STAGE_COLLECTIVE) {
		base = 0;
		*pid = 3;
	}
	*tid = base + L->row[i] * TRACE_ROW_TID;
}

static void trace_meta(FILE *f, bool *first, int pid, long tid,
		       const char *what, const char *name, long sort)
{
	fprintf(f, "%s\n{\"ph\":\"M\",\"pid\":%d,", *first ? "" : ",", pid);
	if (tid >= 0)
		fprintf(f, "\"tid\":%ld,", tid);
	fprintf(f, "\"name\":\"%s\",\"args\":{\"name\":", what);
	pypto__json_str(f, name, false);
	fputs("}}", f);
	fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%d,", pid);
	if (tid >= 0)
		fprintf(f, "\"tid\":%ld,", tid);
	fprintf(f, "\"name\":\"%s_sort_index\",\"args\":{\"sort_index\":%ld}}",
		tid >= 0 ? "thread" : "process", sort);
	*first = false;
}

/*
 * Flow arrows for dependency edges: from the end of the producer's last
 * event to the start of the consumer's first one, only for edges whose
 * both ends have events.  Flow "s" binds to the slice enclosing its ts on
 * its thread (the producer's, at its middle); "f" with "bp":"e" to the
 * slice enclosing its ts (the consumer's, at its middle).
 */
static void trace_flows(FILE *f, const struct pypto_run *r,
			const struct lanes *L, uint64_t *nflows)
{
	const struct pypto_graph *g = r->g;
	uint32_t *firstev, *lastev, t, i;
	uint64_t id = 0;

	*nflows = 0;
	if (!g || !g->n || !r->nev)
		return;
	firstev = malloc(g->n * sizeof(*firstev));
	lastev = malloc(g->n * sizeof(*lastev));
	if (!firstev || !lastev)
		goto out;	/* flows are optional: a trace without them */
	memset(firstev, 0xff, g->n * sizeof(*firstev));
	memset(lastev, 0xff, g->n * sizeof(*lastev));
	for (i = 0; i < r->nev; i++) {
		t = r->ev[i].tile;
		if (t >= g->n)
			continue;
		if (firstev[t] == UINT32_MAX)
			firstev[t] = i;
		if (lastev[t] == UINT32_MAX ||
		    r->ev[i].t1_ns >= r->ev[lastev[t]].t1_ns)
			lastev[t] = i;
	}
	for (t = 0; t < g->n && id < PYPTO_TRACE_FLOWS_MAX; t++) {
		const struct pypto_tile *tl = &g->tiles[t];

		if (lastev[t] == UINT32_MAX)
			continue;
		for (i = 0; i < tl->nconsumers &&
			    id < PYPTO_TRACE_FLOWS_MAX; i++) {
			uint32_t c = tl->consumers[i];
			const struct pypto_event *a, *b;
			int pid;
			long tid;

			if (c >= g->n || firstev[c] == UINT32_MAX)
				continue;
			a = &r->ev[lastev[t]];
			b = &r->ev[firstev[c]];
			ev_lane(L, r, lastev[t], &pid, &tid);
			fprintf(f, ",\n{\"ph\":\"s\",\"name\":\"dep\","
				"\"cat\":\"dep\",\"id\":%" PRIu64 ",\"pid\":%d,"
				"\"tid\":%ld,\"ts\":", id, pid, tid);
			json_us(f, a->t0_ns + (a->t1_ns - a->t0_ns) / 2);
			ev_lane(L, r, firstev[c], &pid, &tid);
			fprintf(f, "},\n{\"ph\":\"f\",\"bp\":\"e\",\"name\":"
				"\"dep\",\"cat\":\"dep\",\"id\":%" PRIu64
				",\"pid\":%d,\"tid\":%ld,\"ts\":", id, pid,
				tid);
			json_us(f, b->t0_ns + (b->t1_ns - b->t0_ns) / 2);
			fputc('}', f);
			id++;
		}
	}
	*nflows = id;
out:
	free(firstev);
	free(lastev);
}

static void trace_stats(FILE *f, const struct pypto_run *r, uint64_t nflows)
{
	const struct pypto_stats *st = &r->st;

	fputs("\"otherData\":{\"generator\":\"libpypto\",\"transport\":", f);
	pypto__json_str(f, r->xport_name ? r->xport_name : "none", false);
	fprintf(f, ",\"status\":%d,\"wall_ns\":%" PRIu64 ",\"workers\":%u,"
		"\"devices\":%u,\"tiles\":%u,\"tiles_compute\":%" PRIu64
		",\"tiles_transfer\":%" PRIu64 ",\"tiles_host\":%" PRIu64
		",\"steals\":%" PRIu64 ",\"steal_attempts\":%" PRIu64
		",\"parks\":%" PRIu64 ",\"rounds\":%" PRIu64 ",\"descs\":%"
		PRIu64 ",\"xfer_bytes\":%" PRIu64 ",\"xfer_retries\":%" PRIu64
		",\"xfer_failures\":%" PRIu64 ",\"events\":%" PRIu64
		",\"events_kept\":%u,\"flows\":%" PRIu64, r->status,
		st->wall_ns, r->cfg.workers ? r->cfg.workers : st->workers,
		r->cfg.devices ? r->cfg.devices : st->devices, st->tiles,
		st->tiles_compute, st->tiles_transfer, st->tiles_host,
		st->steals, st->steal_attempts, st->parks, st->rounds,
		st->descs, st->xfer_bytes, st->xfer_retries,
		st->xfer_failures, st->events, r->nev, nflows);
	fputs(",\"worker_util\":", f);
	pypto__json_num(f, st->worker_util);
	fputs(",\"xfer_util\":", f);
	pypto__json_num(f, st->xfer_util);
	fputs(",\"overlap_eff\":", f);
	pypto__json_num(f, st->overlap_eff);
	fputs(",\"tile_mean_ns\":", f);
	pypto__json_num(f, st->tile_mean_ns);
	fputs(",\"tile_cv\":", f);
	pypto__json_num(f, st->tile_cv);
	fputs(",\"worker_cv\":", f);
	pypto__json_num(f, st->worker_cv);
	fprintf(f, ",\"xfer_cover_ns\":%" PRIu64 ",\"xfer_exposed_ns\":%"
		PRIu64 ",\"engine_known\":%d,\"engine_busy_ns\":%" PRIu64
		",\"engine_lanes\":%u,\"engine_util\":", st->xfer_cover_ns,
		st->xfer_exposed_ns, st->engine_known, st->engine_busy_ns,
		st->engine_lanes);
	pypto__json_num(f, st->engine_util);
	fprintf(f, ",\"link_events\":%u,\"failovers\":%u,"
		"\"failover_stall_ns\":%" PRIu64 ",\"tiles_delayed\":%"
		PRIu64 ",\"peer_lost\":%d,\"ranks_lost\":%u,"
		"\"tiles_replaced\":%" PRIu64, st->link_events, st->failovers,
		st->failover_stall_ns, st->tiles_delayed, st->peer_lost,
		st->ranks_lost, st->tiles_replaced);
	fprintf(f, ",\"tiles_allreduce\":%" PRIu64 ",\"allreduce_ns\":%"
		PRIu64 ",\"allreduce_bytes\":%" PRIu64 ",\"coll_flight_ns\":%"
		PRIu64 ",\"coll_overlap_ns\":%" PRIu64, st->tiles_allreduce,
		st->allreduce_ns, st->allreduce_bytes, st->coll_flight_ns,
		st->coll_overlap_ns);
	fprintf(f, ",\"diagnosis\":%u}", pypto_run_diagnose(r, NULL));
}

static void lane_names(FILE *f, bool *first, const struct lanes *L)
{
	char buf[64];
	uint32_t i, k;

	trace_meta(f, first, 1, -1, "process_name", "workers", 1);
	trace_meta(f, first, 2, -1, "process_name", "transfers", 2);
	if (L->nc)
		trace_meta(f, first, 3, -1, "process_name", "collectives", 3);
	for (i = 0; i < L->nw + L->nd + L->nc; i++) {
		bool coll = i >= L->nw + L->nd;
		bool xfer = !coll && i >= L->nw;
		long base = xfer ? (long)(i - L->nw) : coll ? 0 : (long)i;
		uint32_t rows = L->l[i].n ? L->l[i].n : 1;

		for (k = 0; k < rows; k++) {
			int len = snprintf(buf, sizeof(buf), coll ?
					   "allreduces" : xfer ?
					   "device %ld transfers" :
					   "worker %ld", base);

			if (k)
				snprintf(buf + len, sizeof(buf) - len,
					 " (row %u)", k + 1);
			trace_meta(f, first, coll ? 3 : xfer ? 2 : 1,
				   base + k * TRACE_ROW_TID, "thread_name",
				   buf, base * TRACE_ROWS + k);
		}
	}
}

static int trace_file(FILE *f, const void *arg)
{
	const struct pypto_run *r = arg;
	struct lanes L;
	uint64_t nflows;
	bool first = true;
	char nb[32];
	uint32_t i;
	int ret;

	ret = lanes_build(r, &L);
	if (ret)
		return ret;
	fputs("{\"traceEvents\":[", f);
	lane_names(f, &first, &L);
	for (i = 0; i < r->nev; i++) {
		const struct pypto_event *e = &r->ev[i];
		const char *name = tile_name(r, e->tile, nb, sizeof(nb));
		int kind = r->g && e->tile < r->g->n ?
			   r->g->tiles[e->tile].kind : 0;
		int pid;
		long tid;

		ev_lane(&L, r, i, &pid, &tid);
		fputs(",\n{\"ph\":\"X\",\"name\":", f);
		pypto__json_str(f, name, false);
		fprintf(f, ",\"cat\":\"%s\",\"pid\":%d,\"tid\":%ld,\"ts\":",
			stage_name(e->stage), pid, tid);
		json_us(f, e->t0_ns);
		fputs(",\"dur\":", f);
		json_us(f, e->t1_ns - e->t0_ns);
		fprintf(f, ",\"args\":{\"tile\":%" PRIu32 ",\"name\":",
			e->tile);
		pypto__json_str(f, name, false);
		fprintf(f, ",\"kind\":\"%s\",\"stage\":\"%s\",\"worker\":%u,"
			"\"device\":%" PRId32 ",\"bytes\":%" PRIu64
			",\"attempt\":%u,\"delayed\":%d,\"replaced\":%d}}",
			pypto__kind_name(kind), stage_name(e->stage),
			e->worker, e->device, e->bytes, e->attempt,
			!!(e->flags & PYPTO_EVF_DELAYED),
			!!(e->flags & PYPTO_EVF_REPLACED));
	}
	/* link events: global instant markers across the timeline */
	for (i = 0; i < r->nlev; i++) {
		const struct pypto_link_event *le = &r->lev[i];

		fputs(",\n{\"ph\":\"i\",\"s\":\"g\",\"name\":", f);
		pypto__json_str(f, hcomm_event_name((int)le->type), false);
		fputs(",\"cat\":\"link\",\"pid\":2,\"tid\":0,\"ts\":", f);
		json_us(f, le->t_ns);
		fprintf(f, ",\"args\":{\"peer\":%d,\"xport\":\"%s\","
			"\"err\":%d,\"tiles_in_flight\":%u,\"why\":",
			le->peer, hcomm_xport_name(le->xport), le->err,
			le->tiles_in_flight);
		pypto__json_str(f, le->why, false);
		fputs("}}", f);
	}
	trace_flows(f, r, &L, &nflows);
	fputs("\n],\"displayTimeUnit\":\"ns\",", f);
	trace_stats(f, r, nflows);
	fputs("}\n", f);
	lanes_free(&L);
	return 0;
}

PYPTO_EXPORT int pypto_run_write_trace(const struct pypto_run *r,
				       const char *path)
{
	if (!r || !path || !*path)
		return pypto__fail(PYPTO_ERR_INVAL, "write trace: %s",
				   r ? "no path" : "NULL run");
	return pypto__write_path(path, "write trace", trace_file, r);
}
