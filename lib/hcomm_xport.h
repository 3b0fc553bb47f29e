/* SPDX-License-Identifier: MIT */
/*
 * libhcomm internals: the transport boundary.
 *
 * The communicator (hcomm_comm.c) owns what every transport shares: rank
 * and size, the bootstrap channel, windows and their peer tables, argument
 * checks, the in-flight count, requests and their completion (status,
 * done, callbacks, callback threads).  A transport owns how bytes move:
 * its device or connections, how a descriptor becomes a wire operation,
 * how completions are found, and the signals.  It sees requests only to
 * hand them back through hcomm__complete().
 *
 * Two transports exist: "kernel" (hcomm_xport_kernel.c: /dev/hcomm, every
 * rank on this host) and "tcp" (hcomm_xport_tcp.c: any hosts).  Others
 * plug in behind the same table; nothing transport specific appears in
 * hcomm.h.
 */
#ifndef LIBHCOMM_XPORT_H
#define LIBHCOMM_XPORT_H

#include <stdint.h>
#include "hcomm_int.h"
#include "hcomm_boot.h"
#include "hcomm_probe.h"

struct hcomm_comm;
struct hcomm_win;

/*
 * What a rank publishes about its part of a window; allgathered by
 * hcomm_win_create() so that every rank holds one per peer.
 * @key:  the transport's name for the memory (kernel: the region key).
 * @len:  bytes exposed (0: none, @key is meaningless).
 * @addr: base address in the owner's process (for transports that need
 *        it; the kernel transport addresses by key and offset).
 * @err:  0, or the hcomm_err this rank's win_create failed with: every
 *        rank then fails the collective.
 */
struct hcomm_win_peer {
	uint64_t key;
	uint64_t len;
	uint64_t addr;
	int32_t err;
	uint32_t reserved;
};

/*
 * A rank's part of a window as every transport of the communicator
 * described it (x[id]: the transport of enum hcomm_xp_id; zero for a
 * transport not in use).  A transport reads w->peers[rank].x[its id].
 */
struct hcomm_win_peers {
	struct hcomm_win_peer x[HCOMM_XP_MAX];
};

/*
 * The operations of a transport.  Unless said otherwise, a function
 * returns 0 or a negated hcomm_err after recording it with hcomm__fail(),
 * and may be called from any thread.
 *
 * A communicator may use several transports at once, each for the peers
 * (and message sizes) its route names (hcomm_probe.h); a transport keeps
 * its state in c->xps[@id] and w->xps[@id], and finds a peer's part of a
 * window in w->peers[rank].x[@id].  It may see operations to any rank.
 *
 * @name:       its part of what hcomm_comm_transport() returns.
 * @id:         enum hcomm_xp_id.
 * @probe:      1 when the transport can be set up in this process (cheap,
 *              no state kept), else 0.
 * @init:       set up c->xps[@id] (and c->ctx where there is one); the
 *              communicator's configuration, rank, size and bootstrap are
 *              ready.  The communicator calls it on every rank or on none
 *              when it may talk to other ranks during set-up (the network
 *              transports allgather their addresses); the kernel
 *              transport's is local.
 * @fini:       undo @init; every operation has completed.
 * @win_create: make [base, base + len) (len may be 0) reachable by the
 *              other ranks and describe it in *self (w->xps[@id] is the
 *              transport's).  Not collective.
 * @win_free:   undo @win_create; no operation on @w is in flight anywhere.
 * @post:       issue n checked descriptors of window @w, one per request
 *              of reqs[] (already initialised by the caller: comm, done 0).
 *              Either every descriptor is issued and 0 is returned, or
 *              none is and the error is returned.  Each issued request is
 *              handed to hcomm__complete() exactly once, possibly before
 *              @post returns.  No allocation.
 * @progress:   reap completions without blocking; returns how many.  At
 *              most one thread reaps a given queue at a time; others skip
 *              it.
 * @block:      wait up to timeout_us (< 0: until something happens) for a
 *              completion: of the queue @req went to, or of any queue when
 *              @req is NULL, or for @wake.  Returns completions reaped
 *              (>= 0); it may return 0 early.
 * @wake:       make a @block(NULL) in progress return (callback thread
 *              shutdown).  @wake_enable prepares it (and what @block(NULL)
 *              needs); called before the callback threads start.
 * @fence:      operations issued before complete before any issued after.
 * @flush:      return once the operations this rank issued so far have
 *              completed (c->inflight reached 0).
 * @signal_count, @signal_read, @signal_wait_any: this rank's signals (see
 *              hcomm.h); @signal_read and @signal_count never fail.  Only
 *              the communicator's signal owner (hcomm__signal_owner())
 *              is asked; a transport that receives a signal for this rank
 *              hands it to hcomm__signal_deliver().
 *              @signal_wait_any waits up to timeout_ns (< 0: no limit;
 *              0: only looks) until one of n (1 .. 4) signals sig[i]
 *              (numbers the caller checked) reads at least val[i]; it
 *              returns that i (the lowest), -HCOMM_ERR_TIMEOUT without
 *              recording it, or another negated hcomm_err (recorded).
 *              hcomm_signal_wait() is it with one signal.
 * @signal_add: add v to this rank's signal sig and wake its waiters (the
 *              owner's, for signals another transport received).
 * @signal_apply: (optional) hand over every signal that has arrived and
 *              waits to be applied (an RDMA receive completion nobody
 *              reaped), all of it, waiting for a concurrent reaper: a
 *              put_signal completed at its origin before the call is in
 *              the owner's signal when it returns.  NULL: signals are
 *              applied before their put completes (kernel, tcp).
 * @stats:      add the transport's counters to *st (never fails).
 * @publish:    keep st (in the published file; NULL: stop) up to date.
 * @peer_stats: fill *st (zeroed by the caller) with the counters towards
 *              peer (another rank; never fails).  Cheap enough to call
 *              once a second: it may ask a service thread.
 */
struct hcomm_xport_ops {
	const char *name;
	int id;
	int (*probe)(const struct hcomm_rankinfo *ri);
	int (*init)(struct hcomm_comm *c);
	void (*fini)(struct hcomm_comm *c);
	int (*win_create)(struct hcomm_comm *c, struct hcomm_win *w,
			  void *base, size_t len, struct hcomm_win_peer *self);
	int (*win_free)(struct hcomm_comm *c, struct hcomm_win *w);
	int (*post)(struct hcomm_comm *c, struct hcomm_win *w,
		    const struct hcomm_xfer_desc *d, unsigned int n,
		    struct hcomm_request *reqs);
	int (*progress)(struct hcomm_comm *c);
	int (*block)(struct hcomm_comm *c, struct hcomm_request *req,
		     int64_t timeout_us);
	int (*wake_enable)(struct hcomm_comm *c);
	void (*wake)(struct hcomm_comm *c);
	int (*fence)(struct hcomm_comm *c);
	int (*flush)(struct hcomm_comm *c);
	uint32_t (*signal_count)(const struct hcomm_comm *c);
	uint64_t (*signal_read)(struct hcomm_comm *c, uint32_t sig);
	int (*signal_wait_any)(struct hcomm_comm *c, const uint32_t *sig,
			       const uint64_t *val, int n, int64_t timeout_ns);
	int (*signal_add)(struct hcomm_comm *c, uint32_t sig, uint64_t v);
	void (*signal_apply)(struct hcomm_comm *c);
	void (*stats)(struct hcomm_comm *c, struct hcomm_comm_stats *st);
	void (*publish)(struct hcomm_comm *c, struct hcomm_comm_stats *st);
	void (*peer_stats)(struct hcomm_comm *c, int peer,
			   struct hcomm_peer_xport_stats *st);
};

/* The intra-node transport over /dev/hcomm (hcomm_xport_kernel.c). */
HCOMM_HIDDEN extern const struct hcomm_xport_ops hcomm__xport_kernel;
/* Any ranks, over TCP sockets (hcomm_xport_tcp.c). */
HCOMM_HIDDEN extern const struct hcomm_xport_ops hcomm__xport_tcp;
/* RoCEv2 RC queue pairs over rdma-core (hcomm_xport_rdma.c). */
HCOMM_HIDDEN extern const struct hcomm_xport_ops hcomm__xport_rdma;
/*
 * Stop rdma's failover (destroy): wait for one in progress, start none;
 * a link that fails later fails its operations.
 */
HCOMM_HIDDEN void hcomm__rdma_fo_stop(struct hcomm_comm *c);
/* tcp: a put landed in the failover window; rdma's cm thread looks now. */
HCOMM_HIDDEN void hcomm__rdma_fo_kick(struct hcomm_comm *c);
/*
 * The errno with which a tcp connection to peer closed (0: none did):
 * rdma's failover gives up on a peer that tcp lost too.
 */
HCOMM_HIDDEN int hcomm__tcp_peer_err(const struct hcomm_comm *c, int peer);
/* For the tests: where the tcp transport of c listens, "ip:port" ("" if
 * c uses another transport). */
HCOMM_HIDDEN const char *hcomm__tcp_listen_addr(const struct hcomm_comm *c);

/*
 * A transport received signal sig += v for this rank: 1 when the
 * communicator's signal owner is another transport and got it (the
 * caller keeps nothing), 0 when the caller owns the signals and applies
 * it itself.
 */
HCOMM_HIDDEN int hcomm__signal_deliver(struct hcomm_comm *c, int from_xp,
				       uint32_t sig, uint64_t v);

/*
 * Transports call this once per issued request when it finished: err is
 * 0 or a positive errno, bytes what was moved.  It fills status and bytes;
 * a request without callback is then done.  A request with a callback is
 * queued: on the calling thread's pending list (HCOMM_CB_INLINE) or for
 * the dispatcher thread; it reads done only after its callback returned.
 * No callback runs inside this call.  A transport completes everything it
 * took off its queue in one go, then calls hcomm__run_pending() without
 * holding any of its locks (the callbacks may issue, wait, test, flush).
 */
HCOMM_HIDDEN void hcomm__complete(struct hcomm_comm *c,
				  struct hcomm_request *req, int err,
				  uint64_t bytes);

/*
 * Run the callbacks on this thread's pending list, oldest first, until it
 * is empty (callbacks that wait, test or flush drain it further, nested).
 * Does nothing while this thread is issuing operations (hcomm_comm.c runs
 * them once the issue call is done).  Returns how many callbacks ran.
 */
HCOMM_HIDDEN int hcomm__run_pending(void);

/*
 * Progress (and block when idle) until c->inflight is 0, then, unless
 * called from a callback, until every callback has returned.  The
 * generic @flush of transports whose completion means "landed".
 */
HCOMM_HIDDEN int hcomm__drain(struct hcomm_comm *c);

#endif /* LIBHCOMM_XPORT_H */
