/* SPDX-License-Identifier: MIT */
/* libpypto internals shared by its source files. */
#ifndef LIBPYPTO_INT_H
#define LIBPYPTO_INT_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "pypto.h"
#include "hcomm_mpsc.h"

#define PYPTO_EXPORT	__attribute__((visibility("default")))
#define PYPTO_CACHELINE	64

/* Record err (positive code) with a printf-style detail; returns -err. */
int pypto__fail(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void pypto__clear_err(void);
uint64_t pypto__now_ns(void);		/* CLOCK_MONOTONIC */

/* ---- the worker pool (pool.c) ------------------------------------ */

/*
 * Threads lent to one run: pypto__team_start() runs fn(arg, 0 .. n-1),
 * each on a thread of the pool (made when the pool has too few; every
 * team makes and joins its own with PYPTO_POOL=0).  0, or -errno when a
 * thread could not be made: then team->n jobs were started.  Either way
 * pypto__team_join() must follow: it returns once every started job has
 * returned, and gives the threads back to the pool.
 */
struct pool_thread;
struct pypto__team {
	_Atomic uint32_t active;	/* futex: jobs not returned */
	uint32_t n;			/* jobs started */
	struct pool_thread *lent;	/* the team's threads (its owner) */
};
int pypto__team_start(struct pypto__team *team, uint32_t n,
		      void (*fn)(void *arg, uint32_t idx), void *arg);
void pypto__team_join(struct pypto__team *team);
uint32_t pypto__pool_idle(void);	/* idle pool threads now */

/* ---- text output (text.c) ----------------------------------------- */

/* Bytes of the valid UTF-8 sequence at p (1 for ASCII), 0 if invalid. */
size_t pypto__utf8_len(const unsigned char *p);
/*
 * s (NULL: "") as a quoted JSON string: control characters as \u00XX,
 * bytes that are not UTF-8 (a name cut inside a sequence) as U+FFFD.
 * html_safe also writes '<', '>' and '&' as \u00XX, so the text is inert
 * inside a <script> element ("</script", "<!--") or any HTML context.
 */
void pypto__json_str(FILE *f, const char *s, bool html_safe);
/* A finite JSON number; NaN and infinities (no JSON form) as 0. */
void pypto__json_num(FILE *f, double v);
const char *pypto__kind_name(int kind);	/* "compute", "transfer", ... */
/* ns in s, ms, us or ns, 3 decimals ("1.234 ms"); returns buf. */
const char *pypto__fmt_ns(char *buf, size_t len, double ns);
/*
 * Creates path and writes it with fn(f, arg) (0 or -PYPTO_ERR_*, with its
 * message set); a failure of fn, of a write or of the close removes the
 * file again when it is a regular one, and the message names path.
 */
int pypto__write_path(const char *path, const char *what,
		      int (*fn)(FILE *f, const void *arg), const void *arg);

/* ---- graph (graph.c) ---------------------------------------------- */

/*
 * What an allreduce tile reduces (static: pypto_add_allreduce checked it).
 * seq is its place in the issue order: the allreduce tiles added before
 * it, so the order of the ids (sched.c issues them in that order).
 */
struct pypto_coll {
	const void *send;
	void *recv;
	size_t count;
	enum hcomm_dtype dt;
	enum hcomm_redop op;
	uint32_t seq;
};

struct pypto_tile {
	/* Runtime (sched.c): reset by every run. */
	_Atomic uint32_t input_deps;	/* unfinished inputs */
	_Atomic uint32_t xfer_pending;	/* descriptors not completed */
	_Atomic uint32_t xfer_failed;	/* a descriptor of this attempt failed */
	uint32_t attempt;		/* re-issues so far */
	_Atomic int last_status;	/* a failed descriptor's status */
	uint64_t t_issue_ns;		/* transfer: when its round went out */
	uint16_t issue_worker;
	_Atomic uint8_t delayed;	/* in flight at a link-down (sched.c) */
	_Atomic uint8_t xdone;		/* transfer: completed (sched.c; read
					 * by the event thread at a loss) */
	_Atomic uint8_t replaced;	/* transfer: issued to a mirror once */
	_Atomic int32_t issued_rank;	/* transfer: where this attempt went
					 * (the issuing worker writes it
					 * before the round goes out) */
	bool slot;			/* transfer: holds one of its device's
					 * slots (sched.c: the cap) */
	struct pypto_tile *wnext;	/* transfer: in its device's queue of
					 * tiles waiting for a slot */
	struct hcomm_mpsc_node qnode;	/* a worker's inbox (sched.c) */

	/* Static (graph.c). */
	uint8_t kind;			/* enum pypto_kind */
	int32_t affinity;		/* as given, or PYPTO_ANY_DEVICE */
	int32_t rank;			/* transfer: PYPTO_RANK_TARGET or a
					 * rank (pypto_tile_set_rank) */
	int32_t device;			/* placement: set by validation */
	uint32_t ndeps;			/* static input count */
	uint32_t *consumers;		/* output_consumers */
	uint32_t nconsumers, cap_consumers;
	uint32_t level, component;
	double cost;
	pypto_fn fn;
	void *arg;
	struct pypto_xfer *xf;		/* transfer tiles */
	uint32_t nxf;
	uint32_t ndesc;			/* sum of rows */
	uint64_t bytes;			/* sum of rows * row_bytes;
					 * allreduce: count * element
					 * size */
	struct pypto_coll *coll;	/* allreduce tiles, owned by the tile */
	char name[PYPTO_NAME_MAX];
};

struct pypto_graph {
	struct pypto_tile *tiles;
	uint32_t n, cap;
	uint32_t nedges;
	uint32_t nar;			/* allreduce tiles */
	uint64_t *eset;			/* open-addressed set of edges */
	uint64_t ecap;			/* slots in eset (power of 2) */
	bool validated;			/* analysis below is current */
	/*
	 * pypto__graph_prepare()'s result is current for this many devices
	 * (0: not prepared since the last change); roots[nroots], the tiles
	 * without inputs, and nxfer, the transfer tiles, come with it.
	 */
	uint32_t prepared_ndev;
	uint32_t *roots, nroots;
	uint32_t nsinks;		/* tiles without consumers */
	uint32_t nxfer;
	/*
	 * The tiles' run-time fields hold their initial values: the last
	 * run of this graph, which had neither transfer nor allreduce
	 * tiles, ran every tile (each tile's input count was put back to
	 * its number of inputs when it became ready), and nothing changed
	 * since.  pypto_run() then skips resetting every tile.
	 */
	bool rt_clean;
	struct pypto_analysis analysis;
	uint32_t *cycle;		/* last cycle found */
	uint32_t ncycle;
	enum pypto_workload workload;
	uint32_t wl_tile_size;
	/*
	 * A partition helper's setting scoped to a run: pypto_run() calls
	 * run_hook(g, true) before the workers start and run_hook(g, false)
	 * after they stopped (the GEMM: OpenBLAS single-threaded for the
	 * run, then the caller's thread count again).  hook_state is the
	 * hook's.
	 */
	void (*run_hook)(struct pypto_graph *g, bool begin);
	int hook_state;
};

/*
 * Validation + placement for ndev devices: tiles with affinity >= 0 get
 * device affinity % ndev; the others are placed by component (largest
 * first onto the least loaded device) and within a component that spans
 * devices, by the device of their first input if any.
 */
int pypto__graph_prepare(struct pypto_graph *g, uint32_t ndev);

/* ---- transports (xport.c) ----------------------------------------- */

struct pypto_xport_ops {
	const char *name;
	/*
	 * Issue n descriptors as one batch; each reqs[i] completes on its
	 * own (status, then reqs[i].cb(&reqs[i], reqs[i].cb_arg), from any
	 * thread).  On failure nothing was issued.
	 */
	int (*submit)(struct pypto_xport *x, const struct hcomm_xfer_desc *d,
		      unsigned int n, struct hcomm_request *reqs);
	void (*destroy)(struct pypto_xport *x);
	/*
	 * Optional: the transport's cumulative busy time (ns spent moving
	 * data, summed over its lanes) and its number of parallel lanes;
	 * 0, or a negative value when it cannot be measured now.  Sampled
	 * at the start and the end of a run.
	 */
	int (*busy)(struct pypto_xport *x, uint64_t *busy_ns, uint32_t *lanes);
	/*
	 * Optional: called by pypto_run() before the first submit (0 or
	 * -PYPTO_ERR_*: the run does not start) and after the last
	 * completion callback of the run returned.
	 */
	int (*run_begin)(struct pypto_xport *x);
	void (*run_end)(struct pypto_xport *x);
	/* Optional: the communicator whose link events concern the run. */
	struct hcomm_comm *(*comm)(struct pypto_xport *x);
};

struct pypto_xport {
	const struct pypto_xport_ops *ops;
	int target;			/* rank the descriptors name */
	void *local_base;		/* window as seen here, or NULL */
	uint64_t win_len;
	bool no_window;			/* hcomm without a window: collectives
					 * only (no transfer tiles) */
	/*
	 * pypto_xport_hcomm_mirror(): mirror[i] holds what mirror_of[i]
	 * holds.  Written by the caller between runs only (like every
	 * setting of the transport); read by the run's threads.
	 */
	int32_t mirror_of[PYPTO_MIRRORS_MAX], mirror[PYPTO_MIRRORS_MAX];
	uint32_t nmirror;
	int32_t nranks;			/* the communicator's size, or 0 */
	/* Failure injection. */
	uint64_t inj_every, inj_max;
	_Atomic uint64_t inj_seen, inj_done;
};

/*
 * Called by the scheduler for each completed descriptor: returns true if
 * the injection wants this completion turned into a failure (and poisoned
 * the destination).
 */
bool pypto__xport_inject(struct pypto_xport *x, const struct hcomm_xfer_desc *d);
/* The mirror of rank (pypto_xport_hcomm_mirror), or -1. */
int pypto__xport_mirror(const struct pypto_xport *x, int rank);
/* Tests: the memcpy double takes ns more per descriptor (a slow engine,
 * one descriptor at a time). */
void pypto__xport_memcpy_delay(struct pypto_xport *x, uint64_t ns);

/* ---- events (trace.c) --------------------------------------------- */

#define PYPTO_EV_CHUNK	4096

struct pypto_ev_chunk {
	struct pypto_ev_chunk *next;
	uint32_t n;
	struct pypto_event ev[PYPTO_EV_CHUNK];
};

/* One per recording thread: only its thread writes (no lock, no atomics
 * on the hot path); the run links buffers with an atomic push. */
struct pypto_evbuf {
	struct pypto_evbuf *next;	/* run's list */
	struct pypto_ev_chunk *head, *cur;
	uint64_t count;
	bool oom;			/* a chunk could not be allocated */
};

struct pypto_run {
	struct pypto_graph *g;		/* the graph (read-only after run) */
	struct pypto_config cfg;
	const char *xport_name;
	uint64_t t0_ns;			/* CLOCK_MONOTONIC at start */
	struct pypto_stats st;
	int status;			/* the run's result */
	_Atomic(struct pypto_evbuf *) bufs;
	/* Filled by pypto__run_finish_events(): */
	struct pypto_event *ev;
	uint32_t nev;
	/* Worker busy ns (compute+host) per worker, for the diagnosis. */
	uint64_t *worker_busy_ns;
	/*
	 * Link events (sched.c): appended by libhcomm's event thread under
	 * lev_lock while the run lasts; read-only once pypto_run() stopped
	 * listening.
	 */
	pthread_mutex_t lev_lock;
	struct pypto_link_event lev[PYPTO_LINK_EVENTS_MAX];
	uint32_t nlev;			/* kept */
	uint32_t lev_seen;		/* all, kept or not */
};

/* Append an event (times absolute CLOCK_MONOTONIC; stored relative). */
void pypto__ev_record(struct pypto_run *r, struct pypto_evbuf *b,
		      const struct pypto_event *e);
/* The calling thread's buffer for run r (created on first use). */
struct pypto_evbuf *pypto__ev_thread_buf(struct pypto_run *r);
/*
 * After the workers stopped: merge the buffers into r->ev sorted by t0,
 * free them, and derive worker_util, xfer_util, overlap_eff, tile_mean_ns,
 * tile_cv, events in r->st.
 */
int pypto__run_finish_events(struct pypto_run *r);
void pypto__run_free_events(struct pypto_run *r);

#endif /* LIBPYPTO_INT_H */
