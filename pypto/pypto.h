/* SPDX-License-Identifier: MIT */
/*
 * libpypto: tile graphs over libhcomm.
 *
 * A program builds a graph of tiles (compute functions, host preprocessing
 * steps and transfers between registered buffers), validates and analyses
 * it ("partition first"), then runs it on worker threads with work-stealing
 * deques ("schedule second").  Transfers go through a transport: the real
 * one is libhcomm (/dev/hcomm, every scheduling round of transfers is one
 * io_uring batch); a host memcpy transport exists as a test double for the
 * scheduler logic only.
 *
 * Errors: functions return 0 (or a non-negative id/count) on success and a
 * negated enum pypto_err on failure; pypto_errmsg() gives a one-line detail
 * of the calling thread's last failure.
 *
 * Thread safety: a graph is built by one thread; pypto_run() may be called
 * on a graph from one thread at a time; runs of different graphs may
 * overlap.  Compute and host functions run on the workers concurrently.
 */
#ifndef LIBPYPTO_H
#define LIBPYPTO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hcomm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PYPTO_VERSION_MAJOR	1
#define PYPTO_VERSION_MINOR	0

enum pypto_err {
	PYPTO_OK = 0,
	PYPTO_ERR_INVAL,	/* bad argument */
	PYPTO_ERR_NOMEM,
	PYPTO_DEADLOCK,		/* the graph has a dependency cycle (also
				 * one through the allreduce issue order) */
	PYPTO_ERR_IO,		/* a transfer failed after every retry, or
				 * an allreduce failed */
	PYPTO_ERR_TASK,		/* a compute/host function returned non-zero */
	PYPTO_ERR_SYS,		/* a system call failed (thread, file) */
	PYPTO_ERR_LIMIT,	/* too many tiles/edges/descriptors */
	PYPTO_ERR__MAX
};

const char *pypto_strerror(int err);	/* accepts err or -err */
const char *pypto_errmsg(void);		/* "" if none */

/* ------------------------------------------------------------------ */
/* Graph                                                              */
/* ------------------------------------------------------------------ */

struct pypto_graph;

enum pypto_kind {
	PYPTO_COMPUTE = 1,	/* a C function on the tile's device */
	PYPTO_TRANSFER,		/* puts/gets through the transport */
	PYPTO_HOST,		/* host preprocessing (the pipeline's first
				 * stage: decode, pack, stage) */
	PYPTO_ALLREDUCE,	/* hcomm_allreduce_nb() on the run's
				 * communicator, issued in id order */
};

/* What a function learns about where it runs. */
struct pypto_exec {
	uint32_t tile;		/* id */
	uint32_t worker;	/* 0 .. workers-1 */
	int32_t device;		/* the tile's device */
};

/* Compute and host functions: return 0, or non-zero to fail the run. */
typedef int (*pypto_fn)(void *arg, const struct pypto_exec *ex);

enum pypto_xop {
	PYPTO_PUT = 1,		/* local -> window */
	PYPTO_GET,		/* window -> local */
};

/*
 * One transfer of a transfer tile: rows x row_bytes between local memory
 * and the transport's window (rows = 1 for a contiguous range).  Row r is
 * local + r * local_stride and win_off + r * win_stride; each row is one
 * transport descriptor.
 */
struct pypto_xfer {
	uint32_t op;		/* enum pypto_xop */
	uint32_t rows;		/* >= 1 */
	uint64_t row_bytes;	/* >= 1 */
	void *local;
	uint64_t local_stride;	/* >= row_bytes when rows > 1 */
	uint64_t win_off;
	uint64_t win_stride;	/* >= row_bytes when rows > 1 */
};

#define PYPTO_ANY_DEVICE	(-1)
#define PYPTO_NAME_MAX		32	/* with the NUL; longer names are cut */

int pypto_graph_create(struct pypto_graph **g);
void pypto_graph_destroy(struct pypto_graph *g);

/*
 * Add a tile; returns its id (>= 0, ids are dense from 0 in the order
 * added).  name may be NULL ("t<id>").  affinity is a device index or
 * PYPTO_ANY_DEVICE (placed by the static analysis).  The pypto_xfer array
 * is copied.
 */
int pypto_add_compute(struct pypto_graph *g, const char *name, pypto_fn fn,
		      void *arg, int affinity);
int pypto_add_host(struct pypto_graph *g, const char *name, pypto_fn fn,
		   void *arg, int affinity);
int pypto_add_transfer(struct pypto_graph *g, const char *name,
		       const struct pypto_xfer *x, unsigned int n,
		       int affinity);
/*
 * An allreduce tile: recv[i] = op over the ranks of send[i], i < count,
 * elements of type dt, through hcomm_allreduce_nb() on the communicator
 * of the run's transport (pypto_xport_hcomm).  No worker waits for it:
 * the scheduler issues it once its inputs are done and it completes, on
 * libhcomm's collective thread, when the request does; its consumers
 * are released then.  The buffers belong to the tile from its issue to
 * its completion: its inputs write send, its consumers read recv.
 * Returns the tile's id; affinity places it like any tile (its consumers
 * follow its device).  A failed allreduce (a rank lost, the collective
 * timeout: hcomm_comm_set_coll_timeout) fails the run with
 * -PYPTO_ERR_IO naming the tile.
 *
 * Issue order: collectives must be issued in the same order on every
 * rank, so allreduce tiles are issued in the order of their ids (the
 * order they were added), each only after the one before it was
 * issued - whatever order they become ready in.  Ranks that build the
 * same graph therefore issue the same collectives in the same order.
 * A graph in which an allreduce tile depends (through any path) on an
 * allreduce tile with a higher id can never run: validation refuses it
 * with -PYPTO_DEADLOCK (pypto_errmsg() and pypto_graph_cycle() give the
 * path).  pypto_run() of a graph with allreduce tiles is a collective
 * call of the communicator: every rank runs the same graphs in the same
 * order, and nothing else issues collectives on the communicator while
 * it runs.
 *
 * Without libhcomm (the memcpy test double or no transport) the tile is
 * an allreduce over one rank: recv = send (a copy unless send == recv),
 * issued in the same order.
 *
 * -PYPTO_ERR_INVAL, before anything is added, for: send or recv NULL,
 * count 0, dt not an enum hcomm_dtype, op not an enum hcomm_redop,
 * count x the element size or a buffer's end beyond the address space,
 * send and recv overlapping without being equal (send == recv is in
 * place), a bad affinity.  A count that libhcomm refuses for the
 * communicator's size fails pypto_run() before anything runs.
 */
int pypto_add_allreduce(struct pypto_graph *g, const char *name,
			const void *send, void *recv, size_t count,
			enum hcomm_dtype dt, enum hcomm_redop op,
			int affinity);
/* "to" waits for "from": from joins to's inputs, to joins from's
 * output_consumers.  A repeated edge is ignored (returns 0) in O(1), however
 * wide the fan-out. */
int pypto_add_dep(struct pypto_graph *g, uint32_t from, uint32_t to);
/* Optional cost estimate (any unit, default 1) for the critical path. */
int pypto_set_cost(struct pypto_graph *g, uint32_t tile, double cost);

unsigned int pypto_graph_tiles(const struct pypto_graph *g);
unsigned int pypto_graph_edges(const struct pypto_graph *g);
const char *pypto_tile_name(const struct pypto_graph *g, uint32_t tile);
int pypto_tile_kind(const struct pypto_graph *g, uint32_t tile);
/*
 * The affinity given at pypto_add_*() (not the placement).  A bad id also
 * returns -1 (== PYPTO_ANY_DEVICE, with pypto_errmsg() set): check the id
 * against pypto_graph_tiles() when that matters.
 */
int pypto_tile_affinity(const struct pypto_graph *g, uint32_t tile);
/*
 * The rank whose part of the window a transfer tile's transfers move to
 * or from.  PYPTO_RANK_TARGET (every transfer tile's default) is the
 * transport's target (pypto_xport_hcomm's target); a graph may read and
 * write several ranks this way.  pypto_run() refuses a rank outside the
 * communicator (the memcpy double has one memory: any rank is it).
 * -PYPTO_ERR_INVAL for a bad id, a tile that is not a transfer, or a
 * rank below PYPTO_RANK_TARGET.  pypto_tile_rank() stores the rank set.
 */
#define PYPTO_RANK_TARGET	(-1)
int pypto_tile_set_rank(struct pypto_graph *g, uint32_t tile, int rank);
int pypto_tile_rank(const struct pypto_graph *g, uint32_t tile, int *rank);
/* Static input count and consumer list (valid until the graph changes). */
unsigned int pypto_tile_inputs(const struct pypto_graph *g, uint32_t tile);
unsigned int pypto_tile_consumers(const struct pypto_graph *g, uint32_t tile,
				  const uint32_t **ids);

/*
 * What the workload is, for the diagnosis' tile-size guidance.  A
 * tile_size > 0 declares the size the graph was cut into: pypto_run()
 * then refuses a configuration with another tile_size; 0 declares none.
 */
enum pypto_workload {
	PYPTO_WL_GENERIC = 0,
	PYPTO_WL_CONV,		/* convolution: tiles 128-256 */
	PYPTO_WL_FC,		/* fully connected / GEMM: 64-128 */
	PYPTO_WL_ATTENTION,	/* attention: 32-64 */
};
int pypto_graph_set_workload(struct pypto_graph *g, enum pypto_workload wl,
			     unsigned int tile_size);

/* ------------------------------------------------------------------ */
/* Static phase                                                       */
/* ------------------------------------------------------------------ */

struct pypto_analysis {
	uint32_t tiles;
	uint32_t edges;
	uint32_t components;	/* weakly connected: independent subgraphs */
	uint32_t levels;	/* longest path in tiles (0 for empty) */
	uint32_t max_width;	/* most tiles on one level */
	uint32_t roots;		/* tiles with no inputs */
	double critical_path;	/* sum of costs on the costliest path */
	double total_cost;	/* sum of all costs */
};

/*
 * Check the graph: every dependency cycle makes it fail with
 * -PYPTO_DEADLOCK, pypto_errmsg() naming the tiles of one cycle
 * ("a -> b -> c -> a").  On success fills *a (may be NULL) and remembers
 * levels/components for placement.  pypto_run() calls it itself.
 */
int pypto_graph_validate(struct pypto_graph *g, struct pypto_analysis *a);
/* The tiles of the cycle found by the last failed validation, in order;
 * returns how many (may exceed max; 0 when none). */
unsigned int pypto_graph_cycle(const struct pypto_graph *g, uint32_t *ids,
			       unsigned int max);
/* Level (0 = roots) and component of a tile after a validation. */
int pypto_tile_level(const struct pypto_graph *g, uint32_t tile);
int pypto_tile_component(const struct pypto_graph *g, uint32_t tile);

enum pypto_dump_fmt {
	PYPTO_DUMP_DOT = 1,	/* Graphviz; cycle edges/tiles in red */
	PYPTO_DUMP_JSON,	/* {"tiles":[...],"edges":[...],"cycle":[...]} */
};
/* Write the graph (works on an invalid graph too: that is its point). */
int pypto_dump_graph(const struct pypto_graph *g, const char *path,
		     enum pypto_dump_fmt fmt);
int pypto_dump_graph_file(const struct pypto_graph *g, FILE *f,
			  enum pypto_dump_fmt fmt);

/* ------------------------------------------------------------------ */
/* Transports                                                         */
/* ------------------------------------------------------------------ */

struct pypto_xport;

/*
 * libhcomm: transfers move between local memory and rank target's part of
 * win (the target may be this rank: "device" buffers of this process);
 * allreduce tiles go over comm.  win may be NULL for a graph without
 * transfer tiles (pypto_run() refuses transfer tiles then); target still
 * names the rank whose link events the run records.
 * Leaves comm's callback mode alone: pypto_run() switches it to
 * HCOMM_CB_THREAD when a run starts (completions through libhcomm's
 * lock-free queue; the run fails with PYPTO_ERR_IO if comm has operations
 * in flight then) and to HCOMM_CB_INLINE, libhcomm's default, when the run
 * ends.  libhcomm cannot report the mode, so a caller that uses a threaded
 * mode itself sets it again after each run.  local_base, when not NULL, is where this
 * process sees the target's window memory (only for failure injection,
 * which poisons the destination of a failed PUT); NULL otherwise.
 */
int pypto_xport_hcomm(struct pypto_xport **x, struct hcomm_comm *comm,
		      struct hcomm_win *win, int target, void *local_base);
/*
 * Test double for the scheduler logic: a host thread copies with memcpy
 * between local memory and base[0..len) and completes asynchronously.
 * Not a transport for real runs.
 */
int pypto_xport_memcpy(struct pypto_xport **x, void *base, size_t len);
const char *pypto_xport_name(const struct pypto_xport *x);
/*
 * Failure injection: fail every n-th transfer descriptor completion
 * (n = 0 turns it off; at most `count` failures, 0 = unlimited).  A
 * failed descriptor's destination is poisoned, so only a correct re-issue
 * gives a correct result.  Also set by PYPTO_INJECT_XFER_FAIL="n[:count]".
 */
int pypto_xport_inject_failure(struct pypto_xport *x, uint64_t n,
			       uint64_t count);
void pypto_xport_destroy(struct pypto_xport *x);

/*
 * Mirrors (libhcomm transport): rank mirror's part of the window holds
 * the same bytes as rank's at every offset the runs' transfers use (the
 * caller keeps it so: both written alike, or copied).  When rank is lost
 * during a run (libhcomm's PEER_LOST, or hcomm_comm_peer_lost() when a
 * transfer to it fails first), the run re-places rank's transfer tiles
 * that had not completed on mirror - or further along the chain of
 * mirrors, past every lost rank: a get reads the copy, a put writes it -
 * and goes on.  Transfers that completed before the loss stay done (a
 * get's bytes are here; a put's bytes were at the lost rank: see the
 * run's diagnosis).  A lost rank without a live mirror fails the run as
 * soon as the loss is known while any of its transfer tiles has not
 * completed (pypto_graph_loss_plan() tells which beforehand).  One mirror
 * per rank (another call replaces it; mirror = -1 removes it), 16 ranks
 * with a mirror at most.  -PYPTO_ERR_INVAL for a transport that is not
 * libhcomm's, a rank or mirror outside the communicator, rank == mirror;
 * -PYPTO_ERR_LIMIT past 16.
 */
#define PYPTO_MIRRORS_MAX	16
int pypto_xport_hcomm_mirror(struct pypto_xport *x, int rank, int mirror);

/*
 * Static analysis of a rank's loss: what a run of g over x would do if
 * rank were lost before any of its transfers completed, with the
 * mirrors declared now.
 */
struct pypto_loss_plan {
	uint32_t transfers;	/* transfer tiles that move data to or from
				 * rank */
	uint32_t replaced;	/* of them, re-placed on a live mirror (all
				 * or none: one chain of mirrors) */
	int32_t mirror;		/* where they would go, or -1 */
	int32_t first_stranded;	/* the first of them without a live
				 * mirror, or -1 */
	uint32_t stranded;	/* tiles that could not run: those transfer
				 * tiles and every tile that depends on
				 * them, through any path */
	uint32_t reserved;
};
/*
 * Fills *p for rank (0 .. the communicator's size - 1); also counts
 * ranks already lost along the chain of mirrors as lost.  x is the
 * transport the graph would run over (NULL or the memcpy double: no rank
 * is ever lost, every count is 0 but transfers).  -PYPTO_ERR_INVAL for
 * NULL g or p, a rank outside the communicator.
 */
int pypto_graph_loss_plan(struct pypto_graph *g, const struct pypto_xport *x,
			  int rank, struct pypto_loss_plan *p);

/* ------------------------------------------------------------------ */
/* Dynamic phase                                                      */
/* ------------------------------------------------------------------ */

/*
 *  field             variable                 default
 *  workers           PYPTO_WORKERS            online CPUs (1 .. 1024)
 *  devices           PYPTO_DEVICES            1 (1 .. workers); worker w
 *                                             serves device w % devices
 *  prefetch_depth    PYPTO_PREFETCH_DEPTH     2 (0 .. 64): transfer tiles
 *                                             a device runs ahead (the cap)
 *  double_buffering  PYPTO_DOUBLE_BUFFERING   1: a second slot per device
 *                                             (off: cap 1, depth unused)
 *  tile_size         PYPTO_TILE_SIZE          256 (elements per side; what
 *                                             the partition helpers cut)
 *  batch_max         PYPTO_BATCH_MAX          256 descriptors per round
 *  max_retries       PYPTO_MAX_RETRIES        3 re-issues of a transfer
 *  profile           PYPTO_PROFILE            1: record events
 *  seed              PYPTO_SEED               1: victim selection
 * pypto_config_from_env() rejects garbage naming the variable.
 *
 * Worker 0 is the thread that calls pypto_run(); the others are threads
 * of a pool kept across runs (PYPTO_POOL=0, read by every run: threads
 * created and joined by each run instead).  An idle worker polls for
 * PYPTO_SPIN_US (0 .. 1000000; built in 50, none with more workers than
 * CPUs) before it parks.
 *
 * The transfer cap, for every graph: a device has (double_buffering ?
 * prefetch_depth + 1 : 1) slots and a transfer tile is issued only holding
 * one, from issue to its last completion (re-issues included); ready
 * transfer tiles beyond that wait in the device's FIFO queue and each
 * completion hands its slot on.  It bounds tiles in flight, it does not
 * order buffer reuse (that is the graph's edges), and it cannot deadlock.
 * tile_size: a run cannot cut a graph again, so pypto_run() refuses
 * (-PYPTO_ERR_INVAL) a tile_size other than the one the graph declares
 * (pypto_graph_set_workload() with a size, the GEMM builder); with cfg
 * NULL it takes the graph's unless PYPTO_TILE_SIZE is set.  A graph that
 * declares none runs with any.
 */
struct pypto_config {
	uint32_t workers;
	uint32_t devices;
	uint32_t prefetch_depth;
	int double_buffering;
	uint32_t tile_size;
	uint32_t batch_max;
	uint32_t max_retries;
	int profile;
	uint64_t seed;
};

void pypto_config_default(struct pypto_config *cfg);
int pypto_config_from_env(struct pypto_config *cfg);

struct pypto_run;

/* Counters and derived figures of one run. */
struct pypto_stats {
	uint64_t wall_ns;
	uint32_t workers, devices, tiles;
	/* Tiles run, each once (re-issues count in xfer_retries only). */
	uint64_t tiles_compute, tiles_transfer, tiles_host;
	uint64_t steals;		/* tiles taken from another deque */
	uint64_t steal_attempts;
	uint64_t parks;			/* times a worker slept */
	uint64_t rounds;		/* transport batches submitted */
	uint64_t descs;			/* descriptors in them */
	uint64_t xfer_bytes;
	uint64_t xfer_retries;		/* transfer tiles re-issued */
	uint64_t xfer_failures;		/* failed descriptors seen */
	uint64_t compute_ns;		/* sum over compute tiles */
	uint64_t host_ns;		/* sum over host tiles */
	uint64_t xfer_ns;		/* sum over transfer tiles, issue->done */
	/* Derived from the events (0 with profile off): */
	double worker_util;		/* (compute+host busy) / (workers*wall) */
	double xfer_util;		/* max over devices of the time with a
					 * transfer in flight (issued, not
					 * completed: queueing included) /
					 * wall */
	/*
	 * The share of the transfer time hidden behind work:
	 * 1 - xfer_exposed_ns / xfer_cover_ns, where xfer_cover_ns is
	 * workers x the time with a transfer in flight and xfer_exposed_ns
	 * the part of it in which workers sat idle while tiles waited only
	 * for transfers (at each instant min(idle workers, such tiles); a
	 * transfer without consumers holds up the run's end).  1: no worker
	 * ever waited for a transfer; 0: transfer and compute alternate.
	 * Idle time with no tile waiting for a transfer does not count.
	 * 0 when the run had no transfer.
	 */
	double overlap_eff;
	double tile_mean_ns;		/* compute tiles */
	double tile_cv;			/* std-dev / mean of compute tiles */
	uint64_t events;		/* recorded */
	struct pypto_analysis analysis;
	/* Overlap (from the events, see overlap_eff): worker-ns. */
	uint64_t xfer_cover_ns;		/* workers x time with a transfer
					 * in flight */
	uint64_t xfer_exposed_ns;	/* of which a worker sat idle while
					 * a tile waited only for transfers */
	/*
	 * The transport's own busy time over the run (hcomm: the module's
	 * engine_busy_ns in debugfs, root only; the memcpy double: its
	 * copying time), over lanes parallel engines.  engine_known = 0
	 * when the transport could not measure it: the COMM_BOUND rule is
	 * then not evaluated.
	 */
	int engine_known;
	uint32_t engine_lanes;
	uint64_t engine_busy_ns;
	double engine_util;		/* busy / (lanes x wall) */
	/* std-dev / mean of the workers' busy time (compute + host). */
	double worker_cv;
	/*
	 * The transfer cap: transfer tiles a device may have in flight,
	 * (double_buffering ? prefetch_depth + 1 : 1), and how many times a
	 * ready transfer tile waited for one of its device's slots.
	 */
	uint32_t xfer_cap;
	uint64_t xfer_waits;
	/*
	 * Links (a run over libhcomm; pypto_run_link_events() has each
	 * event): events about the ranks the run's transfers reach, the
	 * failovers among them and their stall (each from the link-down to
	 * the failed-over event, summed), the transfer tiles in flight at a
	 * link-down that completed later (delayed by the failover: the
	 * transport replays their descriptors exactly once, libpypto does
	 * not issue them again), and whether one of those ranks was lost.
	 */
	uint32_t link_events;
	uint32_t failovers;
	uint64_t failover_stall_ns;
	uint64_t tiles_delayed;
	int peer_lost;
	/*
	 * Allreduce tiles: how many completed, the sum of their times from
	 * issue to completion, the bytes this rank contributed (count x
	 * element size), and from the events: the time in which at least
	 * one was in flight, and the part of it in which a worker ran a
	 * compute or host tile (the collectives hidden behind work; 0 with
	 * profile off).
	 */
	uint64_t tiles_allreduce;
	uint64_t allreduce_ns;
	uint64_t allreduce_bytes;
	uint64_t coll_flight_ns;
	uint64_t coll_overlap_ns;
	/*
	 * Transfer tiles re-placed on a mirror of a lost rank
	 * (pypto_xport_hcomm_mirror; each counted once), and the ranks the
	 * run uses that were lost during it (peer_lost is 1 when any was).
	 */
	uint64_t tiles_replaced;
	uint32_t ranks_lost;
	uint32_t reserved2;
};

/*
 * Validate, place, and run the graph to completion (blocking).  x may be
 * NULL when the graph has no transfer tiles (allreduce tiles then run as
 * over one rank).  With allreduce tiles over libhcomm the run is a
 * collective call (pypto_add_allreduce); before the workers start it
 * makes sure the communicator's collective state exists (libhcomm's first
 * collective creates its staging window, waiting for every rank), and a
 * failed run returns once its allreduces in flight completed - at the
 * latest after the collective timeout (hcomm_comm_set_coll_timeout).  cfg may be NULL (defaults +
 * environment).  *run (may be NULL) receives the record of the run for
 * stats, diagnosis and traces, also when the run failed after starting;
 * free it with pypto_run_free().  Returns 0 or -PYPTO_DEADLOCK /
 * -PYPTO_ERR_IO / -PYPTO_ERR_TASK / ...  A graph can be run again.
 * With PYPTO_TRACE=<path> set, the Chrome trace is also written there.
 */
int pypto_run(struct pypto_graph *g, const struct pypto_config *cfg,
	      struct pypto_xport *x, struct pypto_run **run);
const struct pypto_stats *pypto_run_stats(const struct pypto_run *r);
void pypto_run_free(struct pypto_run *r);

/* ------------------------------------------------------------------ */
/* Profiling and diagnosis                                            */
/* ------------------------------------------------------------------ */

enum pypto_stage {
	PYPTO_STAGE_PREFETCH = 1,	/* host preprocessing */
	PYPTO_STAGE_TRANSFER,		/* issue -> completion */
	PYPTO_STAGE_COMPUTE,
	PYPTO_STAGE_COLLECTIVE,		/* allreduce: issue -> done */
};

/* pypto_event.worker of a collective issued by a thread of libhcomm (the
 * completion of its last input released it there), not by a worker. */
#define PYPTO_NO_WORKER		0xffff

struct pypto_event {
	uint64_t t0_ns, t1_ns;		/* relative to the run's start */
	uint64_t bytes;			/* transfers, collectives */
	uint32_t tile;
	uint16_t worker;		/* the worker that ran or issued it, or
					 * PYPTO_NO_WORKER */
	uint8_t stage;			/* enum pypto_stage */
	uint8_t attempt;		/* 0, or the retry number */
	int32_t device;
	uint8_t flags;			/* PYPTO_EVF_* */
};

/* A transfer in flight when its link went down (completed by failover). */
#define PYPTO_EVF_DELAYED	(1U << 0)
/* A transfer re-placed on a mirror of its lost rank (this attempt). */
#define PYPTO_EVF_REPLACED	(1U << 1)

/* All events of a run, sorted by t0 (valid until pypto_run_free). */
unsigned int pypto_run_events(const struct pypto_run *r,
			      const struct pypto_event **ev);

/*
 * Link events of a run over libhcomm: pypto_run() listens to its
 * communicator (hcomm_comm_event_listen) while the run lasts and keeps
 * each event about the ranks its transfers reach (32 at most;
 * stats.link_events counts them all).  A LINK_DOWN marks the transfer
 * tiles in flight to that rank then (tiles_in_flight; their events carry
 * PYPTO_EVF_DELAYED unless they failed and were issued again).  Once a
 * rank is lost (the PEER_LOST event, or hcomm_comm_peer_lost() when a
 * transfer fails first) nothing is issued to it again: its transfer
 * tiles go to a mirror (pypto_xport_hcomm_mirror), or the run fails
 * naming the lost rank.
 */
struct pypto_link_event {
	uint64_t t_ns;			/* since the run's start */
	uint32_t type;			/* enum hcomm_event_type */
	int32_t peer;
	int32_t xport;			/* enum hcomm_xport_id of the link */
	int32_t err;			/* hcomm_err behind it, or 0 */
	uint32_t tiles_in_flight;	/* LINK_DOWN */
	uint32_t reserved;
	char why[160];			/* libhcomm's sentence */
};

#define PYPTO_LINK_EVENTS_MAX	32

/* The run's link events in order (valid until pypto_run_free). */
unsigned int pypto_run_link_events(const struct pypto_run *r,
				   const struct pypto_link_event **ev);

/*
 * Print the diagnosis: the seed's rules with the suggested fix and
 * tile-size guidance for the graph's workload.  Returns a mask of
 * PYPTO_DIAG_*:
 *  COMM_BOUND  the transport's measured busy time (st.engine_util) is
 *              above 90 % of the run; when the transport cannot measure
 *              it (hcomm: debugfs is root only) the rule is not evaluated
 *              and the text says so (transfers in flight, xfer_util, are
 *              listed: in flight includes queueing, it is not busy),
 *  UNDERUSED   worker utilisation below 60 %,
 *  IMBALANCE   the std-dev of the workers' busy times above 15 % of their
 *              mean (st.worker_cv); the compute tile time cv (tile_cv) is
 *              listed as an observation of its own.
 */
#define PYPTO_DIAG_COMM_BOUND		(1U << 0)
#define PYPTO_DIAG_UNDERUSED		(1U << 1)
#define PYPTO_DIAG_IMBALANCE		(1U << 2)
unsigned int pypto_run_diagnose(const struct pypto_run *r, FILE *f);
/* Chrome trace event format (Perfetto, chrome://tracing). */
int pypto_run_write_trace(const struct pypto_run *r, const char *path);
/* Self-contained HTML timeline (no network). */
int pypto_run_write_html(const struct pypto_run *r, const char *path);

/* ------------------------------------------------------------------ */
/* Partition helpers                                                  */
/* ------------------------------------------------------------------ */

/*
 * Tiled SGEMM: C[M,N] = alpha * A[M,K] B[K,N] + beta * C, row-major with
 * leading dimensions lda/ldb/ldc, cut into tile x tile blocks along M, N
 * and K (the X/Y/Z cuts).  Builds into g:
 *  - host tiles that pack each A and B block into a contiguous staging
 *    buffer (the prefetch stage),
 *  - transfer tiles that put a step's A and B blocks into a buffer set of
 *    the device (and load/store the C blocks, row by row),
 *  - compute tiles that run cblas_sgemm on the device's blocks,
 * with the C blocks spread round-robin over cfg->devices.  Each device has
 * (double_buffering ? prefetch_depth + 1 : 1) buffer sets, the count of
 * the scheduler's transfer cap; a step's transfer waits for the compute
 * that last used its set.  The graph declares cfg->tile_size
 * (pypto_graph_set_workload): run it with the same tile_size.  The device
 * memory is one buffer (pypto_gemm_device_bytes() long) that the caller
 * allocates and exposes through the transport (an hcomm window).
 * OpenBLAS: the tiles call single-threaded BLAS.  OpenBLAS' thread count
 * is process-wide: pypto_run() of the graph sets it to 1 when the run
 * starts and back to the caller's count when it ends (BLAS calls of other
 * threads during the run are single-threaded too); building the graph
 * changes nothing.
 */
struct pypto_gemm;

struct pypto_gemm_args {
	uint32_t m, n, k;
	float alpha, beta;
	const float *a;
	uint32_t lda;
	const float *b;
	uint32_t ldb;
	float *c;
	uint32_t ldc;
};

/* Device bytes the tiled GEMM needs under cfg. */
int pypto_gemm_device_bytes(const struct pypto_gemm_args *args,
			    const struct pypto_config *cfg, uint64_t *bytes);
/* dev: where this process sees the device memory (compute runs on it). */
int pypto_gemm_build(struct pypto_graph *g, const struct pypto_gemm_args *args,
		     const struct pypto_config *cfg, void *dev,
		     struct pypto_gemm **gm);
/* Valid after the run; frees staging. */
void pypto_gemm_free(struct pypto_gemm *gm);

#ifdef __cplusplus
}
#endif

#endif /* LIBPYPTO_H */
