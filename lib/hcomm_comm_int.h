/* SPDX-License-Identifier: MIT */
/*
 * libhcomm internals: the communicator's structures, shared by
 * hcomm_comm.c, the transports and the registration cache.
 */
#ifndef LIBHCOMM_COMM_INT_H
#define LIBHCOMM_COMM_INT_H

#include <pthread.h>
#include <stdint.h>
#include "hcomm_int.h"
#include "hcomm_boot.h"
#include "hcomm_mpsc.h"
#include "hcomm_xport.h"

/*
 * struct hcomm_events - the communicator's link events (hcomm_event.c).
 * Everything is protected by @lock.
 * @q, @head, @n: the events not yet delivered, oldest at q[head].
 * @seq:       the last event number given (dropped ones included).
 * @cb, @arg:  the application's callback (NULL: events wait in @q).
 * @thr, @thr_up: the event thread (started by the first callback).
 * @stop:      ask the thread to end; @busy: it runs a callback now.
 * @closed:    destroy began: events are ignored, no callback is set.
 * @log:       HCOMM_LOG: each event on stderr as it is raised.
 */
#define HCOMM_EVQ	64
#define HCOMM_EV_LISTENERS	8
#define HCOMM_EV_CUR_APP	(-1)
struct hcomm_events {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct hcomm_event q[HCOMM_EVQ];
	unsigned int head;
	unsigned int n;
	uint64_t seq;
	hcomm_event_cb cb;
	void *arg;
	/* hcomm_comm_event_listen(): slots with id 0 are free */
	struct {
		hcomm_event_cb cb;
		void *arg;
		int id;
	} ls[HCOMM_EV_LISTENERS];
	int nls;
	int next_id;
	pthread_t thr;
	int thr_up;
	int stop;
	int cur;		/* being called: 0 none, a listener's id, or
				 * HCOMM_EV_CUR_APP */
	int closed;
	int log;
};

/*
 * struct hcomm_comm - one communicator.
 * @cfg, @ri:   configuration and launcher result (read-only after init).
 * @rank, @size: copies of ri.rank, ri.size.
 * @boot:       bootstrap channel (collectives: one thread per rank).
 * @xo, @xps:   the transports in use (xo[id] NULL when not) and their
 *              state, indexed by enum hcomm_xp_id; @nxo how many.
 * @sig_xp:     the transport that owns this rank's signals.
 * @links, @routes: per peer [size]: what each transport offers it
 *              (links[peer * HCOMM_XP_MAX + id]) and the transport of
 *              each message size (read-only after init).
 * @forced:     HCOMM_TRANSPORT's transport, or -1 (auto).
 * @xname:      hcomm_comm_transport(): the names in use, joined by '+'.
 * @ctx:        the /dev/hcomm context (kernel transport), else NULL.
 * @lock:       protects @wins and the callback threads' start and stop.
 * @wins:       windows not yet freed (destroy frees them).
 * @inflight:   operations issued and not yet completed (atomic).
 * @cb_pending: completed operations whose callback has not returned yet
 *              (atomic).
 * @cb_mode:    enum hcomm_cb_mode (atomic loads: read at completion).
 * @threads:    the callback threads run (THREAD or THREAD_LOCKED mode).
 * @prog_stop, @disp_stop: ask the progress / dispatcher thread to end.
 * @q, @ec:     HCOMM_CB_THREAD: the lock-free queue of completed requests
 *              and the event count the dispatcher sleeps on.
 * @ring:       HCOMM_CB_THREAD: the bounded ring in front of @q (request,
 *              callback and its argument in one cache line per slot);
 *              a completion goes to @q instead when the ring is full or
 *              while @q_spill says @q holds some (so that one thread's
 *              completions keep their order).  Made by the first start of
 *              the threads, freed with the communicator.
 * @q_spill:    requests pushed to @q and not yet popped (atomic).
 * @q_cons:     the dispatcher's side of @ring and @q (hcomm_rq_pop(): a
 *              request taken from @q waits there for the ring items that
 *              may come before it); the dispatcher thread only.
 * @lq_*:       HCOMM_CB_THREAD_LOCKED: the same as a mutex+condvar list.
 * @pub, @pub_path: the published statistics file (HCOMM_STATS_DIR), its
 *              mapping and name, or NULL.
 * @peers_path: HCOMM_STATS_DIR's peers file (the decision table and the
 *              per-peer counters, JSON), or NULL.
 * @peers_lock: guards @links and @routes against hcomm_comm_probe() for
 *              the readers outside the issue path (the peers file, the
 *              per-peer counters), and the writer thread's state:
 * @peers_cond, @peers_stop, @peers_thr: the thread that rewrites the
 *              peers file once a second when it changed (it runs while
 *              @peers_path is set);
 * @probing:    hcomm_comm_probe() runs: the routes are in flux;
 * @peers_last: the file's last content (malloc'd), or NULL.
 * @xp_use:     bit id: the transport is (being) set up (xports_init).
 * @fo_win, @fo_mem: the failover window (HCOMM_FO_SLOT bytes per rank,
 *              slot r written by rank r) when the communicator has both
 *              rdma and tcp, else NULL; @fo_mem lives until comm_free.
 */
struct hcomm_comm {
	struct hcomm_config cfg;
	struct hcomm_rankinfo ri;
	int rank;
	int size;
	struct hcomm_boot *boot;
	const struct hcomm_xport_ops *xo[HCOMM_XP_MAX];
	void *xps[HCOMM_XP_MAX];
	int nxo;
	int sig_xp;
	int forced;
	struct hcomm_link *links;
	struct hcomm_route *routes;
	/* per rank: 1 once a PEER_LOST event was raised about it (atomic) */
	uint8_t *lost;
	char xname[32];
	struct hcomm_ctx *ctx;
	int64_t spin_ns;		/* HCOMM_SPIN_US; -1: unset (read-only) */
	int64_t cb_spin_ns;		/* HCOMM_CB_SPIN_US; -1: unset (read-only) */
	struct hcomm_ring *ring;	/* set before the threads start */
	/*
	 * Read at every completion and by the dispatcher before it pops:
	 * kept off the lines the completions write (@inflight, @cb_pending).
	 */
	int cb_mode;
	int threads;
	int prog_stop;
	int disp_stop;

	pthread_mutex_t lock;
	struct hcomm_win *wins;

	uint64_t inflight __attribute__((aligned(64)));
	uint64_t cb_pending __attribute__((aligned(64)));

	pthread_t prog_thr;
	pthread_t disp_thr;
	/* each on lines of its own (the struct is allocated 64-aligned) */
	struct hcomm_mpsc q __attribute__((aligned(64)));
	uint64_t q_spill __attribute__((aligned(64)));
	struct hcomm_rq_cons q_cons __attribute__((aligned(64)));
	struct hcomm_ec ec __attribute__((aligned(64)));
	pthread_mutex_t lq_lock;
	pthread_cond_t lq_cond;
	struct hcomm_request *lq_head;
	struct hcomm_request *lq_tail;
	struct hcomm_stats_file *pub;
	char *pub_path;
	char *peers_path;
	pthread_mutex_t peers_lock;
	pthread_cond_t peers_cond;
	int peers_stop;
	int probing;
	pthread_t peers_thr;
	char *peers_last;
	size_t peers_last_len;
	struct hcomm_events ev;
	uint32_t xp_use;
	int ready;			/* atomic: hcomm_comm_init returned it */
	struct hcomm_request *orph_head;	/* lq_lock: see hcomm__cb_foreign */
	struct hcomm_request *orph_tail;
	struct hcomm_win *fo_win;
	void *fo_mem;
	struct hcomm_coll *coll;	/* the collectives' state, made by the
					 * first (hcomm_coll.c), or NULL */
};

/*
 * The failover window's slot of one rank in another rank's memory: what
 * the writer's receive side applied of the owner's RDMA work requests
 * (HCOMM_FO_LANES counts, one per lane), then the failover's epoch,
 * written by a second put once the first landed; and, from the rank that
 * connects the pair, the epoch it switched back to rdma at (the other
 * end switches back only then).
 */
#define HCOMM_FO_LANES	64
#define HCOMM_FO_SLOT	(8 * (HCOMM_FO_LANES + 2))
#define HCOMM_FO_EPOCH	(8 * HCOMM_FO_LANES)
#define HCOMM_FO_BACK	(8 * HCOMM_FO_LANES + 8)	/* switched back at epoch */

/*
 * struct hcomm_win - one window.
 * @comm:       its communicator.
 * @prev, @next: in comm->wins (comm->lock).
 * @base, @len: this rank's part.
 * @xps:        each transport's (kernel: the region id, 0 for none).
 * @peers:      [comm->size], what every rank published.
 */
struct hcomm_win {
	struct hcomm_comm *comm;
	struct hcomm_win *prev, *next;
	void *base;
	size_t len;
	void *xps[HCOMM_XP_MAX];
	struct hcomm_win_peers *peers;
};

/*
 * The library's view of struct hcomm_request.priv.
 * @comm: the communicator that issued it (set at issue, kept after).
 * @xp:   the transport's while the request is being issued or in flight.
 * @pend: once completed: link in the pending-callback list of the thread
 *        that will run its callback (hcomm_comm.c).
 * @err:  errno behind a failed status (0 otherwise), set at completion.
 * @ring: the transport's queue the request went to (a hint for waiters;
 *        at most HCOMM_NUM_QPS, 64).
 * @xport: the transport it went to (enum hcomm_xp_id).
 * @target: the rank it went to (< 1024), for hcomm_wait()'s message;
 *        0xffff for the library's own requests (a fence);
 *        HCOMM_TGT_INTERNAL for a transport's internal request
 *        (hcomm__post_internal); HCOMM_TGT_COLL for a non-blocking
 *        collective (hcomm_coll.c).
 * @q:    link while queued for the callback dispatcher.
 */
struct hcomm_req_priv {
	struct hcomm_comm *comm;
	union {
		uintptr_t xp;
		struct hcomm_request *pend;
	};
	int32_t err;
	uint8_t ring;
	uint8_t xport;
	uint16_t target;
	union {
		struct hcomm_mpsc_node node;
		struct hcomm_request *next;
	} q;
};

#define HCOMM_TGT_INTERNAL 0xfffe
#define HCOMM_TGT_COLL 0xfffd

/*
 * Issue one checked descriptor d of window w on transport xp for another
 * transport (a failover's replay): req is the caller's (cb and cb_arg
 * set, cb != NULL), counted in c->inflight until it completes.  Its cb
 * runs inside hcomm__complete(), on whatever thread completes it, with
 * status, bytes and priv's err set; it must not block.  0 or a negated
 * hcomm_err (then nothing was issued and cb never runs).  The tcp
 * transport applies the puts and signals of the internal operations to a
 * peer in the order they were posted (lane 0, unstriped; lane 0 down
 * fails them): a failover's replay and its count-then-epoch rely on it.
 * A get's reply reads the window when it is sent, later than a put
 * posted after the get may land: overlap them only after the get is
 * done.
 */
/* hcomm_comm_destroy, once the windows are freed: the collectives' state. */
HCOMM_HIDDEN void hcomm__coll_free(struct hcomm_comm *c);
/*
 * A non-blocking collective's request: hcomm__req_start() makes req the
 * library's (counted in c->inflight; HCOMM_ERR_BUSY when its callback is
 * running); hcomm__complete_here() completes it on the calling thread,
 * running its callback there; hcomm__coll_wait() is hcomm_wait() for it.
 */
HCOMM_HIDDEN int hcomm__req_start(struct hcomm_comm *c,
				  struct hcomm_request *req, uint16_t target);
HCOMM_HIDDEN void hcomm__complete_here(struct hcomm_comm *c,
				       struct hcomm_request *req, int status,
				       int err, uint64_t bytes);
HCOMM_HIDDEN int hcomm__coll_wait(struct hcomm_comm *c,
				  struct hcomm_request *req);
/*
 * How many of c->inflight are queued collectives this thread holds up (it
 * is c's collective thread, or inside one of c's collectives): a drain
 * here must not wait for them (hcomm_coll.c).
 */
HCOMM_HIDDEN uint64_t hcomm__coll_excluded(struct hcomm_comm *c);
/* 1: this thread runs one of c's collectives (or c's collective thread). */
HCOMM_HIDDEN int hcomm__coll_here(struct hcomm_comm *c);
/* One of n (1 .. 4) signals at its value: hcomm_comm.c. */
HCOMM_HIDDEN int hcomm__signal_wait_any(struct hcomm_comm *c,
					const uint32_t *sig,
					const uint64_t *val, int n,
					int timeout_ms);
/* One round of what hcomm_wait() does between its checks. */
HCOMM_HIDDEN int hcomm__progress_once(struct hcomm_comm *c);

HCOMM_HIDDEN int hcomm__post_internal(struct hcomm_comm *c,
				      struct hcomm_win *w, int xp,
				      const struct hcomm_xfer_desc *d,
				      struct hcomm_request *req);
/*
 * This thread is the library's (rdma's failover thread): it runs no
 * application callback.  HCOMM_CB_INLINE callbacks of the requests it
 * completes run on the next application thread that progresses.
 */
HCOMM_HIDDEN void hcomm__cb_foreign(void);

/* Link events (hcomm_event.c). */
HCOMM_HIDDEN void hcomm__events_init(struct hcomm_comm *c);
HCOMM_HIDDEN void hcomm__events_stop(struct hcomm_comm *c);
HCOMM_HIDDEN void hcomm__events_fini(struct hcomm_comm *c);
/*
 * Queue an event of enum hcomm_event_type about peer's link of transport
 * xp (err: an hcomm_err or 0; silent_ns: see struct hcomm_event) for the
 * event thread.  Any thread, any lock of a transport held (it takes only
 * the event lock); ignored once destroy began.
 */
HCOMM_HIDDEN __attribute__((format(printf, 7, 8)))
void hcomm__event(struct hcomm_comm *c, int type, int peer, int xp, int err,
		  uint64_t silent_ns, const char *fmt, ...);
/* 1 on c's event thread (inside an event callback). */
HCOMM_HIDDEN int hcomm__in_event_cb(struct hcomm_comm *c);

_Static_assert(sizeof(struct hcomm_req_priv) <=
	       sizeof(((struct hcomm_request *)0)->priv),
	       "struct hcomm_req_priv must fit in hcomm_request.priv");

static inline struct hcomm_req_priv *hcomm__req_priv(struct hcomm_request *r)
{
	return (struct hcomm_req_priv *)(void *)r->priv;
}

/* ------------------------------------------------------------------ */
/* Registration cache of local buffers (hcomm_rcache.c)               */
/* ------------------------------------------------------------------ */

/*
 * Userspace registration cache: local buffers (the source of a put, the
 * destination of a get) of any memory resolve to a region of the context
 * without a system call while the kernel's generation page says the
 * region is intact.  Entries are page-aligned, disjoint ranges sorted by
 * address; a miss registers the request's pages merged with the entries
 * they overlap.  At most max_entries live entries; beyond limit_bytes
 * registered, least recently used entries nobody uses are deregistered.
 * All functions are thread safe (one mutex; hcomm__rcache_put() is
 * lock-free).
 */
struct hcomm_rcache;

/*
 * struct hcomm_rc_ent - one registration.
 * @start, @end: registered page range [start, end).
 * @key, @region, @gen: REG_MEM's answer.
 * @access:     HCOMM_ACCESS_* registered.
 * @last:       LRU tick of the last hit.
 * @refs:       operations using the key (atomic; incremented under the
 *              lock, decremented anywhere).
 * @state:      free, live or dead (rcache lock).
 */
struct hcomm_rc_ent {
	uintptr_t start;
	uintptr_t end;
	uint64_t key;
	uint64_t gen;
	uint64_t last;
	uint32_t region;
	uint32_t access;
	int refs;
	int state;
};

struct hcomm_rcache_stats {
	uint64_t hits;		/* found valid, no system call */
	uint64_t misses;	/* registered (not found, or too small) */
	uint64_t stale;		/* found, generation changed: registered again */
	uint64_t evictions;	/* deregistered to stay within the bounds */
	uint64_t entries;	/* live entries now */
	uint64_t bytes;		/* bytes they cover now */
	uint64_t dead;		/* replaced or stale entries still in use by
				 * an operation (deregistered once unused) */
};

/*
 * fd: the context's device fd; gen: its mapped generation page;
 * max_region: the module's max_region_size (merges stay below it).
 */
HCOMM_HIDDEN int hcomm__rcache_create(int fd, const uint64_t *gen,
				      uint64_t limit_bytes,
				      unsigned int max_entries,
				      uint64_t max_region,
				      struct hcomm_rcache **out);
/* Deregister everything; no entry may be in use. */
HCOMM_HIDDEN void hcomm__rcache_destroy(struct hcomm_rcache *rc);
/*
 * Resolve [addr, addr + len) (len >= 1) to a region key and the offset of
 * addr in it, registering when needed, and take a reference on the entry
 * (drop it with hcomm__rcache_put() once the kernel is done with the key).
 * write: the kernel will write the buffer (LOCAL_WRITE needed); a buffer
 * only read may be read-only memory.
 */
HCOMM_HIDDEN int hcomm__rcache_get(struct hcomm_rcache *rc, const void *addr,
				   size_t len, int write,
				   struct hcomm_rc_ent **ent, uint64_t *key,
				   uint64_t *off);
HCOMM_HIDDEN void hcomm__rcache_put(struct hcomm_rc_ent *ent);
HCOMM_HIDDEN void hcomm__rcache_stats(struct hcomm_rcache *rc,
				      struct hcomm_rcache_stats *st);
/* Keep *pub (or NULL: stop) up to date with the counters from now on. */
HCOMM_HIDDEN void hcomm__rcache_publish(struct hcomm_rcache *rc,
					struct hcomm_comm_stats *pub);
/*
 * The hcomm_err of a failed HCOMM_CMD_REG_MEM on fd with errno err:
 * HCOMM_ERR_MMAP for ENOMEM only when the caller's memlock is limited.
 */
HCOMM_HIDDEN int hcomm__reg_mem_code(int fd, int err);

#endif /* LIBHCOMM_COMM_INT_H */
