/* SPDX-License-Identifier: MIT */
/*
 * libhcomm: the "rdma" transport - RoCEv2 reliable-connected queue pairs
 * through rdma-core (libibverbs for the data path, librdmacm to connect).
 * Documentation/transports.rst ("RDMA") is the user's view; this comment
 * is the implementer's.
 *
 * Connections.  Every rank listens with an rdma_cm id on its address (the
 * rank table's dev_ip or host address, else the bootstrap's own IP, else
 * the IPv4 of the first active RoCE GID) on an ephemeral port and
 * publishes {address, port} with hcomm__boot_allgather().  Rank j connects
 * num_qps RC QPs ("lanes") to every rank i < j; each connect carries a
 * struct rx_hello (magic, version, job nonce, rank, lane, size) in its
 * private data and the accept answers with the acceptor's: a wrong one is
 * rejected (or, seen by the connector, disconnected), and a reject that
 * names another job is final.  Everything else (REJECTED, UNREACHABLE,
 * errors: rdma_cm under emulation rejects about one connect in ten) is
 * retried with a growing, jittered backoff until cfg.timeout_ms.  The
 * init thread runs the rdma_cm event loop until every lane is ESTABLISHED
 * on both ends; then the cm thread takes the channel over (disconnects,
 * late connects, device events).
 *
 * One device per communicator: the one the listening address belongs to.
 * All QPs, CQs, the SRQ and every MR live on its one PD, so a window is
 * registered once (ibv_reg_mr, or ibv_reg_dmabuf_mr for a dma-buf
 * mapping) and published as {rkey, base}.
 *
 * Queues.  Lane l of every peer shares send CQ scq[l] (its own completion
 * channel); all QPs share one SRQ and the receive CQ rcq (one channel).
 * A thread posts on lane (thread index % num_qps), so its operations to a
 * peer stay in order on one QP; a message of stripe_min bytes or more is
 * striped over all lanes.  Every send WR is signaled and owns slot
 * (seq % qd) of its QP's ring conn->wrs[]: seq is the QP's sequence
 * number, peer_seq the operation's number among all this rank's
 * operations to that peer.  RC completes a QP's WRs in order, so the
 * reaper checks that the CQE it sees is the ring's tail: the ring *is*
 * the list of unacknowledged operations of the QP in issue order, and
 * merging the lanes by peer_seq gives the peer's; rx_wr keeps every
 * field a replay needs (below).
 *
 * Locking.
 *  - conn->lock: the posting side of one QP: head, reserved, the bounce
 *    ring's head, and the ring slots from head on.  Never held while
 *    reaping, completing or registering memory.
 *  - scq[l].reap / rcq.reap: taken with trylock; one thread reaps a CQ at
 *    a time, and it alone advances the tails (conn->tail, conn->btail) of
 *    that lane's QPs.  Requests are completed after the lock is dropped.
 *  - mrc.lock: the registration cache (never held with the above).
 *  - rx->fo_lock: fo_stop, fo_busy and each peer's fo_run (the failover
 *    thread's state machine); taken before a peer's fo_lock.
 *  - peer->fo_lock: the peer's parked WRs and its fo moves (fo is read
 *    without it, atomically); never held while reaping or posting.
 *    A poster checks fo under conn->lock, so a failover that took each
 *    lane's lock once after fo left NONE knows nothing more is posted.
 *  - the rdma_cm channel: the init thread until init returns, then the cm
 *    thread alone; fini stops that thread before it destroys anything.
 *
 * put = RDMA WRITE (inline up to max_inline), get = RDMA READ.
 * put_signal = the payload's last WRITE carries the signal as
 * WRITE_WITH_IMM: imm = piece(2) | signal(12) | bits(18), "add bits <<
 * (18 * piece) to the signal".  A value needs up to four pieces; pieces
 * after the first are zero-length WRITE_WITH_IMMs on the same QP.  The
 * target's receive completion for a WRITE_WITH_IMM exists only after its
 * data has been placed, and RC places a QP's messages in order, so when
 * the target's reaper adds the piece (release) every byte of that put and
 * of every earlier one on the QP is visible to an acquire load of the
 * signal.  A striped put_signal cannot rely on one QP's order: its signal
 * pieces are posted on lane 0 once every stripe has completed at the
 * sender (an RC completion means the responder acknowledged, i.e. placed,
 * the data); lane 0 keeps WRs reserved for them so that the reaper never
 * waits for room.  Signals are this rank's memory, updated by its own
 * CPU; hcomm_signal_read() reaps the receive CQ first (ibv_poll_cq, no
 * system call on rxe or mlx5), and a sleeping hcomm_signal_wait() is woken
 * by the receive CQ's completion channel or, when another thread reaped
 * the piece, by sig_evfd.
 *
 * Local buffers (the source of a put, the destination of a get):
 *  - a put of at most max_inline bytes is sent inline (no key);
 *  - a buffer inside the operation's window uses the window's MR;
 *  - up to bounce_max bytes go through the QP's bounce ring (registered
 *    once): a put copies in at issue, a get copies out at completion;
 *  - larger ones are registered.  With /dev/hcomm present the MR is
 *    cached (struct rx_mrc), each entry also registered with the module
 *    only to watch it: the entry is used while its generation slot still
 *    reads what REG_MEM returned, i.e. while the address still maps the
 *    pages the MR pinned (munmap, mremap, MADV_DONTNEED, fork COW all
 *    change it).  Without the module nothing can tell that the memory
 *    behind an address changed (rxe has no IBV_ACCESS_ON_DEMAND), so the
 *    buffer is registered for the operation and deregistered at its
 *    completion.
 *
 * Failover (HCOMM_FAILOVER, on when tcp is set up too; the protocol is in
 * Documentation/failover.rst).  Every write of an operation is posted as
 * WRITE_WITH_IMM (a data part's immediate adds nothing), so the target
 * counts per QP the writes that landed (rx_conn.rcvd) and each WR knows
 * its place in that count (rx_wr.imm_ord).  A failed link (keep-alive,
 * error CQE, QP or port event) moves the peer to ACTIVE: its QPs go to
 * the error state, whoever reaps a failed WR parks it (rx_wr_failed), and
 * the failover thread collects them all, drains the receive CQ, puts its
 * counts into the peer's failover window over tcp and reads the peer's in
 * its own (the peer does the same: its cm thread sees our epoch there),
 * completes what the peer counted and replays the rest over tcp.  Then
 * rx_post forwards the peer's operations to tcp (TCP), the cm thread
 * connects new QPs in the background (HCOMM_FAILBACK), and once they are
 * up the failover thread switches back (BACK, then NONE) after a tcp
 * fence.  A peer whose process is gone is lost, not failed over.
 *
 * Failure without failover.  A CQE with an error fails its request with an
 * errno that maps to HCOMM_ERR_IO (rx_wc_errno) and marks the peer dead:
 * its QPs are moved
 * to the error state, which flushes every other WR of the peer, and each
 * flushed request fails exactly once (its ring slot is consumed once).
 * An rdma_cm DISCONNECTED (the peer's process exited, or its device went
 * away: its kernel sent a DREQ) or a QP async error does the same at
 * once; with failover on, a DISCONNECTED fails the link over instead and
 * tcp decides whether the peer lives.  A dead peer fails new
 * operations at issue, naming it.  How fast a silent peer is noticed is
 * decided by the QP's ack timeout and retry count (set explicitly:
 * RDMA_OPTION_ID_ACK_TIMEOUT, retry_count 1..6 since rxe retries forever
 * with 7): about (retry_cnt + 1) * 4.096 us * 2^ack_timeout.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "hcomm_comm_int.h"

#define RX_MAGIC		0x48435244u	/* "HCRD" */
#define RX_VERSION		1
#define RX_SIGNALS		4096		/* the module's default count */
#define RX_SIG_BITS		12
#define RX_MANT_BITS		18
#define RX_PIECES		4		/* 4 * 18 >= 64 */
#define RX_REAP_BATCH		64
#define RX_CHAIN		32		/* WRs per ibv_post_send */
#define RX_CHUNK		64		/* planned at a time */
#define RX_PART_MAX		(1ULL << 30)	/* bytes per work request, at most */
#define RX_MR_SLOTS		1024		/* cached + per-operation MRs */
#define RX_MR_LIVE		128		/* cached MRs at most */
#define RX_RESOLVE_MS		2000		/* rdma_resolve_addr/route */
#define RX_BACKOFF_MIN_MS	20
#define RX_BACKOFF_MAX_MS	1000
#define RX_WC_STATUS		32		/* counters by ibv_wc_status */
#define RX_IMM_MARK		0u		/* a data part's immediate: signal 0
						 * += 0 (counted, applies nothing) */
#define RX_REC_ATTEMPT_MS	300		/* a reconnect attempt, at most */
#define RX_REC_TRIES_MAX	3		/* its backoff: 20 .. 160 ms */
#define RX_FO_SETTLE_NS		2000000ULL	/* a quiesced QP's receive CQ is
						 * drained until quiet this long */
#define RX_FO_READS		64		/* replayed reads a failover
						 * tracks (then it waits) */
#define RX_RNR_RETRY		7		/* infinite: an SRQ refill is
						 * flow control, not failure */

/* Defaults of the transport's own variables (Documentation/transports.rst) */
#define RX_ACK_TIMEOUT		16		/* 4.096 us * 2^16 = 268 ms */
#define RX_RETRY_CNT		3		/* -> ~1.1 s to RETRY_EXC_ERR */
#define RX_BOUNCE_MAX		(16u << 10)
#define RX_STRIPE_MIN		(256u << 10)
#define RX_SPIN_US		1000		/* signal_wait's polling */
#define RX_KA_INTERVAL_MS	10		/* keep-alive round: probe an idle
						 * link, check a busy one */
#define RX_KA_TIMEOUT_MS	80		/* no progress: the link failed
						 * (detected 80-90 ms after the
						 * last progress); without a
						 * failover at least 2.5 of the
						 * QP's ack timeouts
						 * (rx_ka_default) */
#define RX_KA_TIMEOUT_FO_MS	50		/* the same where a failover to
						 * tcp takes over: a false alarm
						 * costs a failover, not the job */
#define RX_PART_DEFAULT		(64u << 10)	/* bytes per WR: a completion
						 * at least this often */

/* ------------------------------------------------------------------ */
/* structures                                                          */
/* ------------------------------------------------------------------ */

/* Reject codes (struct rx_hello.code). */
enum {
	RX_REJ_NONE = 0,
	RX_REJ_FORMAT,		/* not ours, or another version */
	RX_REJ_JOB,		/* another job (nonce, size) */
	RX_REJ_RANK,		/* rank or lane out of range, or not for us */
	RX_REJ_LATE,		/* after init: reconnection is not supported */
	RX_REJ_LOCAL,		/* the acceptor could not set the QP up */
};

/*
 * Private data of a connect (the connector's), of the accept and of a
 * reject (the acceptor's).  56 bytes fit RDMA_PS_TCP.
 */
struct rx_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t lane;
	uint64_t nonce;
	int32_t rank;		/* the sender */
	int32_t size;
	int32_t to;		/* the rank it means to reach */
	uint32_t code;		/* RX_REJ_* */
};

/* What every rank publishes at init (allgather). */
struct rx_pub {
	uint8_t addr[16];
	uint16_t family;
	uint16_t port;		/* network order */
	int32_t err;		/* hcomm_err of this rank's local setup */
	char dev[32];
	uint32_t fo;		/* bit 0: HCOMM_FAILOVER, 1: HCOMM_FAILBACK */
	uint32_t reserved;
};

enum { CONN_IDLE, CONN_RESOLVING, CONN_CONNECTING, CONN_BACKOFF, CONN_UP };

/*
 * struct rx_wr - one signaled send WR in flight (slot seq % qd of its QP's
 * ring).  Written under conn->lock before the post; read by the lane's
 * reaper once the CQE is seen; free again when the tail passed it.  It
 * keeps what a replay would need: op, remote address and key, local
 * address and length, signal.
 * @req:        the request this WR is a part of.
 * @mr:         registration of the local buffer held by this WR, or NULL.
 * @copy_to:    a get through the bounce ring: where the data goes.
 * @bounce:     the bounce ring bytes of this WR (put: copied in; get:
 *              landing area), or NULL.
 * @bstart, @bend: ring positions before and after its bounce bytes (bend
 *              0: none); the reaper moves btail to bend.
 * @laddr:      the caller's local address of this part.
 * @conn:       the QP's lane it was posted on.
 */
struct rx_wr {
	struct rx_conn *conn;
	struct hcomm_request *req;
	struct rx_mr *mr;
	void *copy_to;
	char *bounce;
	uint64_t bstart;
	uint64_t bend;
	uint64_t seq;
	uint64_t peer_seq;
	uint64_t raddr;
	uint64_t laddr;
	uint64_t value;		/* put_signal: the signal's value */
	uint64_t imm_ord;	/* WRITE_WITH_IMM: the QP's count of them up
				 * to this one (failover: applied when the
				 * target received that many); else 0 */
	struct hcomm_win *win;	/* the operation's window */
	uint32_t rkey;
	uint32_t len;
	uint32_t sig;
	uint32_t imm;		/* host order */
	uint8_t opcode;		/* enum ibv_wr_opcode */
	uint8_t op;		/* HCOMM_OP_* of the request */
	uint8_t defer;		/* a stripe of a striped put_signal */
	uint8_t payload;	/* counts in bytes/ops statistics */
	uint8_t sigimm;		/* its immediate carries a signal piece */
};

struct rx_peer;

/*
 * struct rx_conn - one lane (RC QP) to one peer.
 * @lock:     posting: @head, @reserved, @bhead, ring slots from @head on.
 * @wrs:      [qd] ring of WRs in flight, slot seq % qd.
 * @head:     next sequence number (lock).
 * @tail:     oldest sequence number in flight (atomic; the lane's reaper).
 * @reserved: WRs held for the signals of striped put_signals (lock).
 * @bounce:   this QP's bounce ring (rx->bsize bytes of rx->bounce).
 * @bhead:    ring allocation position (lock); @btail: release position
 *            (atomic; the lane's reaper).  Both only grow.
 * @state:    CONN_* (setup: the cm event loop; atomic reads elsewhere).
 * @id, @qp:  rdma_cm id and its QP (set up by the cm event loop before
 *            the lane is used; destroyed by fini).
 * @retry_ms, @tries: setup backoff of an active conn.
 */
struct rx_conn {
	pthread_mutex_t lock;
	struct rx_peer *peer;
	unsigned int lane;
	struct rx_wr *wrs;
	uint64_t head;
	uint64_t tail;
	unsigned int reserved;
	char *bounce;
	uint64_t bhead;
	uint64_t btail;
	int state;
	int active;
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
	uint64_t retry_ms;
	unsigned int tries;
	int recon;			/* cm thread: a new QP after a failover
					 * (events after setup are its own) */
	uint64_t start_ms;		/* cm loop: when the connect began */
	uint64_t conn_ms;		/* cm loop: when rdma_connect was called */
	uint64_t progress_ns;		/* atomic: last CQE seen (any status) */
	uint64_t busy_ns;		/* atomic: when the ring last went from
					 * empty to busy (lock) */
	uint64_t gap_ns;		/* atomic: smoothed time between CQEs
					 * while busy (the lane's reaper) */
	uint64_t ka_since;		/* cm thread: the lane's progress mark
					 * (rx_lane_since) at its last round */
	uint64_t ka_silent;		/* cm thread: keep-alive time since that
					 * mark (rx_keepalive) */
	uint64_t seen;			/* atomic: seq + 1 of the last CQE
					 * polled (the lane's reaper): WRs
					 * from here on are still out */
	uint64_t imm_posted;		/* WRITE_WITH_IMMs posted (lock) */
	uint64_t rcvd;			/* WRITE_WITH_IMMs of the peer received
					 * on this QP (atomic; rcq.reap) */
	int drained;			/* atomic: @qp reported
					 * IBV_EVENT_QP_LAST_WQE_REACHED (set
					 * by the cm thread, cleared when @qp
					 * is created): every receive
					 * completion of it is in the CQ */
} __attribute__((aligned(64)));

/* Counters of one peer (relaxed atomic adds). */
struct rx_peer_stats {
	uint64_t tx_bytes;		/* put/put_signal payload sent */
	uint64_t rx_bytes;		/* get payload read */
	uint64_t ops;			/* operations completed */
	uint64_t signals_in;		/* signal pieces it delivered here */
	uint64_t errors;		/* failed WRs (any status) */
	uint64_t wc_err[RX_WC_STATUS];	/* by enum ibv_wc_status */
};

/*
 * struct rx_peer - one other rank.
 * @dead:  0, -1 while the failure is being recorded, or the errno the
 *         peer failed with (atomic; set once).  @why is written by the
 *         thread that set -1, before the errno is stored (release).
 */
struct rx_done;

/*
 * Failover states of a peer (rx_peer.fo; Documentation/failover.rst).
 * NONE: rdma carries its operations.  ACTIVE: the link failed and the
 * failover thread owns the peer's rdma work: it collects every work
 * request still out (rx_peer.fo_list), learns over tcp what the peer
 * applied, completes those and replays the rest over tcp; issuers wait.
 * TCP: failed over: its operations go to tcp (forwarded by rdma's post,
 * each holding a token, @fwd, while it does), and the cm thread connects
 * new QPs in the background (@rec_*).  BACK: the new QPs are up; the
 * failover thread waits for the forwarders and for tcp to finish what
 * it has (a tcp fence), then NONE: rdma again (RECOVERED).
 */
enum { RX_FO_NONE, RX_FO_ACTIVE, RX_FO_TCP, RX_FO_BACK };
#define RX_FO_WAIT	(-2)		/* rx_fo_settle: would have waited */

/* The failover's own tcp operations: a flag set by their completion. */
struct rx_flag {
	struct hcomm_request req;
	int done;
	int err;
};

/*
 * struct rx_peer - one other rank.
 * @dead:  0, -1 while the failure is being recorded, or the errno the
 *         peer failed with (atomic; set once).  @why is written by the
 *         thread that set -1, before the errno is stored (release).
 * @fo:    RX_FO_* (atomic; NONE -> ACTIVE by rx_peer_fail, ACTIVE -> TCP
 *         by the failover thread).  @fo_epoch: failovers begun (written
 *         with the NONE -> ACTIVE exchange).  @fo_t0, @fo_silent: when
 *         the link was declared down and the silence before it.
 * @fo_lock: protects @fo_list, @fo_n, @fo_cap: the failed work requests
 *         of the ACTIVE peer, parked by whoever reaped them.
 * @fo_undo: posts refused while a failover collects (their WRs are
 *         parked once the poster holds no lock; atomic).
 * @fo_kids: replayed parts in flight over tcp (atomic).
 * @fo_run:  the failover thread's: 0 not started, 1 running, 2 done
 *         (rx->fo_lock).
 * @fo_told, @fo_told_epoch, @fo_fc, @fo_fe: the failover thread's: the
 *         counts and epoch it told the peer (step 4) and the flags of
 *         those two puts, sources until they land; they are waited for
 *         before the failover ends, however it ends.  A flag is done
 *         (set at init) except while its put is in flight.
 */
struct rx_peer {
	int rank;
	struct rx_conn *conns;		/* [nlanes] */
	struct sockaddr_storage sa;
	char where[64];			/* "addr:port" */
	uint64_t op_seq;		/* atomic */
	int dead;
	int lost;			/* atomic: PEER_LOST raised */
	char why[160];
	struct rx_peer_stats st;
	int fo;
	int fo_run;
	uint64_t fo_epoch;
	uint64_t fo_t0;
	uint64_t fo_silent;
	pthread_mutex_t fo_lock;
	struct rx_done *fo_list;
	size_t fo_n, fo_cap;
	uint64_t fo_deadline;		/* the failover gives up then */
	uint64_t fo_ts[5];		/* its steps' start times (HCOMM_LOG) */
	int fo_drain_ev;		/* step 3 ended by the QPs' events */
	uint64_t fo_told[HCOMM_FO_LANES];
	uint64_t fo_told_epoch;
	struct rx_flag fo_fc, fo_fe;
	unsigned int fo_undo;
	uint64_t fo_kids;
	unsigned int fwd;		/* atomic: posts forwarding to tcp */
	int rec_ready;			/* atomic: every lane's new QP is up */
	int rec_on;			/* atomic: the cm thread reconnects (set
					 * by it, cleared at the switch-back) */
	uint64_t rec_next_ns;		/* cm thread: next attempt */
	uint64_t in_sum;		/* cm thread: the lanes' rcvd at its last
					 * keep-alive round */
	uint64_t in_ns;			/* cm thread: when that sum last moved
					 * (a write of the peer landed) */
};

/* A QP number, its peer and lane (receive completions name the QP). */
struct rx_qpn {
	uint32_t qpn;
	unsigned int lane;
	struct rx_peer *peer;
};

/* The map of every live QP, sorted by number; @old: the replaced one. */
struct rx_qpmap {
	struct rx_qpmap *old;
	size_t n;
	struct rx_qpn e[];
};

/*
 * A send CQ (one per lane) or the receive CQ.
 * @stash, @nstash: CQEs the cm thread polled while the application did
 *         not (keep-alive: a link is known to progress although nobody
 *         reaps); the lane's reaper takes them first, in order (@reap).
 */
struct rx_cq {
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	pthread_mutex_t reap;		/* trylock */
	uint64_t posted;		/* atomic: WRs in flight on it */
	unsigned int finishing;		/* atomic: reaped (tails moved), not
					 * yet finished (rx_finish) */
	int ready;
	unsigned int nstash;
	struct ibv_wc stash[RX_REAP_BATCH];
} __attribute__((aligned(64)));

enum { MR_FREE, MR_LIVE, MR_DEAD, MR_TEMP };

/*
 * struct rx_mr - a registration of local memory: a cached entry (LIVE:
 * findable; DEAD: replaced, deregistered at its last reference) or a
 * per-operation one (TEMP: deregistered at its last reference).
 * @refs:   WRs and issuing calls using it (atomic; taken under the cache
 *          lock, dropped anywhere).
 * @region, @gen: the module's region watching a cached entry, and the
 *          generation REG_MEM returned.
 */
struct rx_mr {
	uintptr_t start;
	uintptr_t end;
	struct ibv_mr *mr;
	uint64_t gen;
	uint64_t last;
	uint32_t region;
	int refs;
	int state;
	int write;
};

/*
 * struct rx_mrc - the registration cache of local buffers; everything is
 * protected by @lock except the entries' @refs.
 * @fd, @gen: the module's context and generation page (fd < 0: no module,
 *            no caching).
 */
struct rx_mrc {
	pthread_mutex_t lock;
	struct hcomm_ctx *ctx;
	int fd;
	const uint64_t *gen;
	struct rx_mr *ents;		/* [RX_MR_SLOTS] */
	unsigned int nlive;
	uint64_t bytes;			/* covered by LIVE entries */
	uint64_t limit;
	uint64_t tick;
	struct hcomm_rcache_stats st;
};

/*
 * struct rx - the transport's state (c->xps[HCOMM_XP_RDMA]).  Set up by
 * rx_init and read-only afterwards except where a field says otherwise.
 */
struct rx {
	struct hcomm_comm *c;
	/* parameters */
	unsigned int nlanes;
	unsigned int qd;
	unsigned int max_inline;
	unsigned int bounce_max;
	uint64_t stripe_min;
	uint64_t spin_ns;		/* signal_wait's polling before sleep */
	int log;			/* HCOMM_LOG: failures on stderr */
	uint64_t bsize;			/* bounce ring bytes per QP */
	uint8_t ack_timeout;
	uint8_t retry_cnt;
	uint64_t part_max;		/* bytes per WR at most */
	uint64_t ka_interval_ns;	/* keep-alive: probe an idle link */
	uint64_t ka_timeout_ns;		/* keep-alive: fail a silent link (0:
					 * off, the QP's retries decide) */
	uint8_t rd_atom;
	uint64_t nonce;
	/* device */
	struct rdma_event_channel *ech;
	struct rdma_cm_id *listen;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	char dev[IBV_SYSFS_NAME_MAX];
	uint8_t port;
	struct sockaddr_storage self_sa;
	char where[64];
	int sgid_index;			/* the GID rdma_cm used, or -1 */
	int gid_type;			/* enum ibv_gid_type of it, or -1 */
	/* queues */
	struct rx_cq *scq;		/* [nlanes] */
	struct rx_cq rcq;
	struct ibv_srq *srq;
	unsigned int srq_depth;
	struct rx_peer *peers;		/* [size]; peers[rank] unused */
	struct rx_qpmap *qpmap;		/* QP number -> peer and lane (atomic
					 * pointer: the cm thread replaces it
					 * when QPs change and frees the old
					 * one once rcq.reap was free) */
	char *bounce;
	size_t bounce_len;
	struct ibv_mr *bounce_mr;
	struct rx_mrc mrc;
	/* signals */
	uint64_t *sigs;			/* [RX_SIGNALS], atomic adds */
	int sig_evfd;
	unsigned int sig_waiters;	/* atomic */
	/* threads */
	int wake_fd;
	int stop_fd;
	int kick_fd;			/* eventfd: a put landed in the failover
					 * window (tcp's service thread writes,
					 * the cm thread reads) */
	pthread_t cm_thr;
	int cm_thr_up;
	int setup;			/* cm loop: 1 while init connects */
	int nup;			/* setup: lanes ESTABLISHED */
	int setup_err;			/* setup: a final failure (hcomm_err) */
	char setup_why[200];
	uint64_t deferred;		/* atomic: striped signals not posted */
	uint64_t port_events;		/* atomic: port errors seen */
	uint64_t refused;		/* atomic: connect requests rejected */
	uint64_t ooo;			/* atomic: completions out of order */
	uint64_t probes;		/* atomic: keep-alive probes posted */
	uint64_t ka_fails;		/* atomic: links failed by keep-alive */
	uint64_t ka_prev_ns;		/* cm thread: its last keep-alive round */
	uint64_t ka_stalls;		/* atomic: rounds that came late (this
					 * process or its machine stood still) */
	struct hcomm_comm_stats *pub;	/* published copy, or NULL */
	/* failover (Documentation/failover.rst) */
	int fo_on;			/* HCOMM_FAILOVER and tcp: writes carry
					 * an immediate, failed links fail over */
	int fb_on;			/* HCOMM_FAILBACK: back to rdma once a
					 * new connection is up */
	uint64_t fo_back;		/* atomic: switch-backs completed */
	int fo_stop;			/* fo_lock: start no more failovers */
	int fo_busy;			/* fo_lock: a failover runs */
	pthread_mutex_t fo_lock;
	pthread_cond_t fo_cond;
	pthread_t fo_thr;
	int fo_thr_up;
	uint64_t fo_count;		/* atomic: failovers completed */
	uint64_t fo_replayed;		/* atomic: WRs replayed over tcp */
	uint64_t fo_applied;		/* atomic: failed WRs the peer had
					 * applied (not replayed) */
};

static struct rx *rx_of(const struct hcomm_comm *c)
{
	return c->xps[HCOMM_XP_RDMA];
}

static uint64_t now_ms(void)
{
	return hcomm__now_ns() / 1000000ULL;
}

/* This thread's lane. */
static unsigned int rx_thread_lane(const struct rx *rx)
{
	return hcomm__thread_index() % rx->nlanes;
}

/* ------------------------------------------------------------------ */
/* errors                                                              */
/* ------------------------------------------------------------------ */

/* "a.b.c.d:port" or "[v6]:port" of ss (port 0: address only). */
static void rx_sa_str(const struct sockaddr_storage *ss, char *buf,
		      size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";
	unsigned int port = 0;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)ss;

		inet_ntop(AF_INET, &s->sin_addr, a, sizeof(a));
		port = ntohs(s->sin_port);
		snprintf(buf, len, port ? "%s:%u" : "%s", a, port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)ss;

		inet_ntop(AF_INET6, &s->sin6_addr, a, sizeof(a));
		port = ntohs(s->sin6_port);
		snprintf(buf, len, port ? "[%s]:%u" : "%s", a, port);
	} else {
		snprintf(buf, len, "(no address)");
	}
}

/* hcomm__fail() naming this rank's device and address. */
static __attribute__((format(printf, 4, 5)))
int rx_fail(const struct rx *rx, int code, int err, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return hcomm__fail(code, err, "rdma rank %d [%s %s]: %s",
			   rx->c->rank, rx->dev[0] ? rx->dev : "-",
			   rx->where[0] ? rx->where : "-", msg);
}

/* hcomm__fail() naming the peer too. */
static __attribute__((format(printf, 5, 6)))
int rx_pfail(const struct rx *rx, const struct rx_peer *p, int code, int err,
	     const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return hcomm__fail(code, err, "rdma rank %d [%s %s] -> rank %d [%s]: "
			   "%s", rx->c->rank, rx->dev[0] ? rx->dev : "-",
			   rx->where, p->rank, p->where, msg);
}

/* hcomm_err of a failed verbs or rdma_cm call with errno err. */
static int rx_code(int err)
{
	return hcomm__err_code(HCOMM_CMD_XFER, err ? err : EIO);
}

/*
 * The errno a failed WR completes its request with: each maps to
 * HCOMM_ERR_IO, and its strerror() is what hcomm_errmsg() shows.
 */
static int rx_wc_errno(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_WR_FLUSH_ERR:
		return ECANCELED;	/* the QP failed earlier */
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return EHOSTUNREACH;	/* the peer stopped answering */
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_REM_OP_ERR:
	case IBV_WC_REM_ABORT_ERR:
		return EREMOTEIO;	/* the peer refused the operation */
	default:
		return EIO;
	}
}

static int rx_peer_dead(const struct rx_peer *p);

/*
 * A lane's last progress (its last CQE, or the moment it became busy if
 * later) in *since; true when it has WRs out (polled ones, reaped or
 * stashed, are no longer out).  What the keep-alive judges a lane by.
 */
static bool rx_lane_since(const struct rx_conn *k, uint64_t *since)
{
	uint64_t t = __atomic_load_n(&k->busy_ns, __ATOMIC_RELAXED);

	*since = __atomic_load_n(&k->progress_ns, __ATOMIC_RELAXED);
	if (t > *since)
		*since = t;
	return __atomic_load_n(&k->head, __ATOMIC_ACQUIRE) !=
	       __atomic_load_n(&k->seen, __ATOMIC_ACQUIRE);
}

/*
 * How long p's lanes with WRs in flight have gone without progress (the
 * longest; 0 when none has WRs out): the silence the keep-alive measures,
 * for a failure something else noticed (the peer's failover, a flushed
 * WR), so that the failover's stall counts from the last progress here.
 */
static uint64_t rx_peer_silent(const struct rx *rx, const struct rx_peer *p)
{
	uint64_t now = hcomm__now_ns(), silent = 0, since;
	unsigned int l;

	for (l = 0; l < rx->nlanes; l++)
		if (p->conns[l].qp && rx_lane_since(&p->conns[l], &since) &&
		    now > since && now - since > silent)
			silent = now - since;
	return silent;
}

/*
 * rx->fo_lock and p->fo_lock held, p not dead, destroy not begun: p's
 * next failover begins (ACTIVE; the failover thread takes it from here).
 */
static void rx_fo_start(struct rx *rx, struct rx_peer *p, uint64_t silent_ns)
{
	p->fo_epoch++;
	p->fo_t0 = hcomm__now_ns();
	p->fo_deadline = p->fo_t0 + (uint64_t)rx->c->cfg.timeout_ms *
			 1000000ULL;
	p->fo_silent = silent_ns;
	__atomic_store_n(&p->fo, RX_FO_ACTIVE, __ATOMIC_RELEASE);
}

/* Can a failed link fail over now (tcp set up, not being destroyed)? */
static int rx_fo_can(const struct rx *rx)
{
	return rx->fo_on &&
	       __atomic_load_n(&rx->c->fo_win, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&rx->fo_stop, __ATOMIC_ACQUIRE);
}

/*
 * Record p's first failure (later ones are ignored) and move its QPs to
 * the error state: every WR still queued on them completes, flushed.
 * The first failure raises a link event: type HCOMM_EVENT_PEER_LOST when
 * the peer's process is known to be gone (an rdma_cm DISCONNECTED with no
 * tcp to judge it, or a failover that tcp ended), else
 * HCOMM_EVENT_LINK_DOWN (silent_ns: how long the link was silent, for a
 * keep-alive timeout).  A PEER_LOST after another failure is still
 * raised once: it is news.
 */
static __attribute__((format(printf, 6, 7)))
void rx_peer_fail(struct rx *rx, struct rx_peer *p, int type, int err,
		  uint64_t silent_ns, const char *fmt, ...)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	int zero = 0, claimed = 0;
	unsigned int l;
	va_list ap;

	/*
	 * A link that fails while tcp reaches the peer fails over (once; the
	 * failover thread takes it from here); a lost peer fails.
	 */
	if (type == HCOMM_EVENT_LINK_DOWN && rx_fo_can(rx) &&
	    !__atomic_load_n(&p->dead, __ATOMIC_ACQUIRE)) {
		if (__atomic_load_n(&p->fo, __ATOMIC_ACQUIRE) != RX_FO_NONE)
			return;
		/* no failover starts once destroy stopped them */
		pthread_mutex_lock(&rx->fo_lock);
		pthread_mutex_lock(&p->fo_lock);
		if (p->fo == RX_FO_NONE && !rx->fo_stop &&
		    !__atomic_load_n(&p->dead, __ATOMIC_ACQUIRE)) {
			va_start(ap, fmt);
			vsnprintf(p->why, sizeof(p->why), fmt, ap);
			va_end(ap);
			rx_fo_start(rx, p, silent_ns ? silent_ns :
					rx_peer_silent(rx, p));
			claimed = 1;
		}
		pthread_mutex_unlock(&p->fo_lock);
		pthread_mutex_unlock(&rx->fo_lock);
		if (!claimed &&
		    __atomic_load_n(&p->fo, __ATOMIC_ACQUIRE) != RX_FO_NONE)
			return;
	}
	if (claimed) {
		hcomm__event(rx->c, type, p->rank, HCOMM_XP_RDMA,
			     rx_code(err ? err : EIO), silent_ns,
			     "rdma: %s (failing over to tcp)", p->why);
		if (rx->log)
			fprintf(stderr, "hcomm rdma: rank %d [%s %s]: link to "
				"rank %d [%s] failed, failing over to tcp: "
				"%s\n", rx->c->rank, rx->dev, rx->where,
				p->rank, p->where, p->why);
		for (l = 0; l < rx->nlanes; l++)
			if (p->conns[l].qp)
				(void)ibv_modify_qp(p->conns[l].qp, &a,
						    IBV_QP_STATE);
		pthread_mutex_lock(&rx->fo_lock);
		pthread_cond_broadcast(&rx->fo_cond);
		pthread_mutex_unlock(&rx->fo_lock);
		return;
	}
	if (type == HCOMM_EVENT_LINK_DOWN &&
	    __atomic_load_n(&p->fo, __ATOMIC_ACQUIRE) != RX_FO_NONE)
		return;		/* its failover's business (or done) */
	if (!__atomic_compare_exchange_n(&p->dead, &zero, -1, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		if (type == HCOMM_EVENT_PEER_LOST &&
		    !__atomic_exchange_n(&p->lost, 1, __ATOMIC_ACQ_REL))
			hcomm__event(rx->c, type, p->rank, HCOMM_XP_RDMA,
				     rx_code(err), 0, "rdma: the peer's "
				     "process is gone (after: %s)",
				     rx_peer_dead(p) ? p->why : "?");
		return;
	}
	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
	if (type == HCOMM_EVENT_PEER_LOST)
		__atomic_store_n(&p->lost, 1, __ATOMIC_RELEASE);
	/* raised while dead reads -1: a later PEER_LOST waits, comes after */
	hcomm__event(rx->c, type, p->rank, HCOMM_XP_RDMA,
		     rx_code(err ? err : EIO), silent_ns, "rdma: %s", p->why);
	__atomic_store_n(&p->dead, err ? err : EIO, __ATOMIC_RELEASE);
	if (rx->log)
		fprintf(stderr, "hcomm rdma: rank %d [%s %s]: rank %d [%s] "
			"failed: %s\n", rx->c->rank, rx->dev, rx->where,
			p->rank, p->where, p->why);
	for (l = 0; l < rx->nlanes; l++)
		if (p->conns[l].qp)
			(void)ibv_modify_qp(p->conns[l].qp, &a, IBV_QP_STATE);
	/* a failover waiting for the peer gives up */
	pthread_mutex_lock(&rx->fo_lock);
	pthread_cond_broadcast(&rx->fo_cond);
	pthread_mutex_unlock(&rx->fo_lock);
}

#define rx_peer_kill(rx, p, err, ...) \
	rx_peer_fail(rx, p, HCOMM_EVENT_LINK_DOWN, err, 0, __VA_ARGS__)

/* The errno p failed with (0: alive); waits out a failure being noted. */
static int rx_peer_dead(const struct rx_peer *p)
{
	int d;

	while ((d = __atomic_load_n(&p->dead, __ATOMIC_ACQUIRE)) < 0)
		hcomm__cpu_relax();
	return d;
}

/* ------------------------------------------------------------------ */
/* local memory: bounce rings, registrations                           */
/* ------------------------------------------------------------------ */

/*
 * conn->lock held.  Reserve len (>= 1) bytes of k's bounce ring: their
 * address, with *start and *end the ring positions around them, or NULL
 * when the ring has no room until earlier WRs of k complete.  A
 * reservation never wraps: the bytes up to the ring's end are skipped.
 */
static char *rx_bounce_alloc(struct rx *rx, struct rx_conn *k, uint32_t len,
			     uint64_t *start, uint64_t *end)
{
	uint64_t need = ((uint64_t)len + 63) & ~63ULL;
	uint64_t pos = k->bhead % rx->bsize, pad = 0;

	if (pos + need > rx->bsize)
		pad = rx->bsize - pos;
	if (k->bhead + pad + need -
	    __atomic_load_n(&k->btail, __ATOMIC_ACQUIRE) > rx->bsize)
		return NULL;
	*start = k->bhead;
	k->bhead += pad + need;
	*end = k->bhead;
	return k->bounce + (pos + pad) % rx->bsize;
}

/* The hcomm_err of a failed registration (ENOMEM under a memlock limit). */
static int rx_reg_code(int err)
{
	struct rlimit rl;

	if (err == ENOMEM && !getrlimit(RLIMIT_MEMLOCK, &rl) &&
	    rl.rlim_cur != RLIM_INFINITY)
		return HCOMM_ERR_MMAP;
	return rx_code(err);
}

/*
 * ibv_reg_mr with local write access when the memory allows it (or write
 * is needed), else read-only (a put from a read-only mapping).
 */
static struct ibv_mr *rx_reg(struct rx *rx, void *addr, size_t len,
			     int write, int *wrote)
{
	struct ibv_mr *mr;

	*wrote = 1;
	mr = ibv_reg_mr(rx->pd, addr, len, IBV_ACCESS_LOCAL_WRITE);
	if (mr || write || (errno != EFAULT && errno != EACCES &&
			    errno != EPERM))
		return mr;
	*wrote = 0;
	return ibv_reg_mr(rx->pd, addr, len, 0);
}

static int rx_gen_valid(const struct rx_mrc *mc, const struct rx_mr *m)
{
	return __atomic_load_n(&mc->gen[m->region % HCOMM_GEN_SLOTS],
			       __ATOMIC_ACQUIRE) == m->gen;
}

/* mrc lock held (or the only user).  Deregister m; its slot is free. */
static void rx_mr_release(struct rx_mrc *mc, struct rx_mr *m)
{
	struct hcomm_dereg d = { .region = m->region };

	if (m->mr)
		(void)ibv_dereg_mr(m->mr);
	if (m->region && mc->fd >= 0)
		(void)ioctl(mc->fd, HCOMM_CMD_DEREG, &d);
	memset(m, 0, sizeof(*m));
}

/* mrc lock held.  A LIVE entry leaves the index; freed now when unused. */
static void rx_mr_retire(struct rx_mrc *mc, struct rx_mr *m)
{
	mc->nlive--;
	mc->bytes -= m->end - m->start;
	m->state = MR_DEAD;
	if (!__atomic_load_n(&m->refs, __ATOMIC_ACQUIRE))
		rx_mr_release(mc, m);
	else
		mc->st.dead++;
}

/* mrc lock held.  Free DEAD entries whose last operation completed. */
static void rx_mr_sweep(struct rx_mrc *mc)
{
	unsigned int i;

	for (i = 0; i < RX_MR_SLOTS && mc->st.dead; i++) {
		struct rx_mr *m = &mc->ents[i];

		if (m->state == MR_DEAD &&
		    !__atomic_load_n(&m->refs, __ATOMIC_ACQUIRE)) {
			rx_mr_release(mc, m);
			mc->st.dead--;
		}
	}
}

/* mrc lock held.  Deregister the least recently used unused LIVE entry. */
static int rx_mr_evict_one(struct rx_mrc *mc)
{
	struct rx_mr *lru = NULL;
	unsigned int i;

	for (i = 0; i < RX_MR_SLOTS; i++) {
		struct rx_mr *m = &mc->ents[i];

		if (m->state == MR_LIVE &&
		    !__atomic_load_n(&m->refs, __ATOMIC_ACQUIRE) &&
		    (!lru || m->last < lru->last))
			lru = m;
	}
	if (!lru)
		return 0;
	rx_mr_retire(mc, lru);
	mc->st.evictions++;
	return 1;
}

static struct rx_mr *rx_mr_slot(struct rx_mrc *mc)
{
	unsigned int i;

	for (i = 0; i < RX_MR_SLOTS; i++)
		if (mc->ents[i].state == MR_FREE)
			return &mc->ents[i];
	return NULL;
}

/*
 * mrc lock held.  Register [start, end) for the cache: the module's
 * region first (its generation says when the address maps other pages),
 * then the MR.  0 or -errno.
 */
static int rx_mr_reg_cached(struct rx *rx, struct rx_mr *m, uintptr_t start,
			    uintptr_t end, int write)
{
	struct rx_mrc *mc = &rx->mrc;
	struct hcomm_reg_mem reg = {
		.addr = start,
		.len = end - start,
		.access = HCOMM_ACCESS_LOCAL_WRITE | HCOMM_ACCESS_REMOTE_READ,
	};
	struct hcomm_dereg d = { 0 };
	int err, wrote;

	if (ioctl(mc->fd, HCOMM_CMD_REG_MEM, &reg) < 0) {
		err = errno;
		if (write || err != EFAULT)
			return -err;
		reg.access = HCOMM_ACCESS_REMOTE_READ;
		if (ioctl(mc->fd, HCOMM_CMD_REG_MEM, &reg) < 0)
			return -errno;
	}
	m->mr = rx_reg(rx, (void *)start, end - start, write, &wrote);
	if (!m->mr) {
		err = errno;
		d.region = reg.region;
		(void)ioctl(mc->fd, HCOMM_CMD_DEREG, &d);
		return -err;
	}
	m->start = start;
	m->end = end;
	m->region = reg.region;
	m->gen = reg.generation;
	m->write = wrote;
	return 0;
}

/*
 * A registration covering [addr, addr + len) (len >= 1) with local write
 * access when write, with one reference for the caller: a cached entry
 * when the module watches memory and the buffer fits the cache, else one
 * for this operation.  0, -EAGAIN when every slot is in use (complete
 * operations and retry), or a negated hcomm_err.
 */
static int rx_mr_get(struct rx *rx, const void *addr, size_t len, int write,
		     struct rx_mr **out)
{
	struct rx_mrc *mc = &rx->mrc;
	uintptr_t a = (uintptr_t)addr, e = a + len, page = 4096;
	uintptr_t start = a & ~(page - 1), end = (e + page - 1) & ~(page - 1);
	struct rx_mr *m;
	unsigned int i;
	int ret, wrote;

	pthread_mutex_lock(&mc->lock);
	if (mc->st.dead)
		rx_mr_sweep(mc);
	if (mc->fd < 0 || end - start > mc->limit)
		goto temp;
	for (i = 0; i < RX_MR_SLOTS; i++) {
		m = &mc->ents[i];
		if (m->state != MR_LIVE || m->start > a || e > m->end ||
		    (write && !m->write))
			continue;
		if (!rx_gen_valid(mc, m)) {
			mc->st.stale++;
			rx_mr_retire(mc, m);
			continue;
		}
		__atomic_add_fetch(&m->refs, 1, __ATOMIC_ACQUIRE);
		m->last = ++mc->tick;
		mc->st.hits++;
		pthread_mutex_unlock(&mc->lock);
		*out = m;
		return 0;
	}
	while ((mc->nlive >= RX_MR_LIVE ||
		mc->bytes + (end - start) > mc->limit) && rx_mr_evict_one(mc))
		;
	m = rx_mr_slot(mc);
	if (!m || mc->nlive >= RX_MR_LIVE ||
	    mc->bytes + (end - start) > mc->limit)
		goto temp;
	ret = rx_mr_reg_cached(rx, m, start, end, write);
	if (ret)
		goto fail;
	m->state = MR_LIVE;
	m->refs = 1;
	m->last = ++mc->tick;
	mc->nlive++;
	mc->bytes += end - start;
	mc->st.misses++;
	pthread_mutex_unlock(&mc->lock);
	*out = m;
	return 0;
temp:
	m = rx_mr_slot(mc);
	if (!m) {
		pthread_mutex_unlock(&mc->lock);
		return -EAGAIN;
	}
	m->mr = rx_reg(rx, (void *)addr, len, write, &wrote);
	if (!m->mr) {
		ret = -errno;
		goto fail;
	}
	m->start = a;
	m->end = e;
	m->write = wrote;
	m->state = MR_TEMP;
	m->refs = 1;
	mc->st.misses++;
	pthread_mutex_unlock(&mc->lock);
	*out = m;
	return 0;
fail:
	pthread_mutex_unlock(&mc->lock);
	return rx_fail(rx, rx_reg_code(-ret), -ret, "registering %zu bytes "
		       "of local memory at %p (ibv_reg_mr%s)", len, addr,
		       mc->fd >= 0 ? " and HCOMM_CMD_REG_MEM" : "");
}

/* Drop one reference; a per-operation registration goes at the last. */
static void rx_mr_put(struct rx *rx, struct rx_mr *m)
{
	int temp;

	if (!m)
		return;
	/*
	 * Read while the reference still pins the slot: once it is dropped
	 * a cached entry may be freed and its slot reused for another
	 * operation's registration.  (A held entry can go from LIVE to
	 * DEAD, never to or from TEMP.)
	 */
	temp = m->state == MR_TEMP;
	if (__atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL))
		return;
	/* LIVE and DEAD entries stay (a DEAD one is swept by the next get). */
	if (!temp)
		return;
	pthread_mutex_lock(&rx->mrc.lock);
	rx_mr_release(&rx->mrc, m);
	pthread_mutex_unlock(&rx->mrc.lock);
}

/*
 * Watch memory through the module when it is there (a context of our
 * own: only its generation page and REG_MEM/DEREG are used).  Without
 * it the cache stays off: every registration is per operation.
 */
static int rx_mrc_init(struct rx *rx)
{
	struct rx_mrc *mc = &rx->mrc;
	void *p;

	pthread_mutex_init(&mc->lock, NULL);
	mc->fd = -1;
	mc->limit = rx->c->cfg.cache_limit;
	mc->ents = calloc(RX_MR_SLOTS, sizeof(*mc->ents));
	if (!mc->ents)
		return rx_fail(rx, HCOMM_ERR_NOMEM, ENOMEM, "registration "
			       "cache");
	if (!mc->limit || getenv("HCOMM_RDMA_NO_MODULE") ||
	    hcomm_open(&mc->ctx, HCOMM_OPEN_NO_URING))
		return 0;
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, hcomm_fd(mc->ctx),
		 HCOMM_MMAP_GENERATION);
	if (p == MAP_FAILED) {
		hcomm_close(mc->ctx);
		mc->ctx = NULL;
		return 0;
	}
	mc->gen = p;
	mc->fd = hcomm_fd(mc->ctx);
	return 0;
}

/* Every operation has completed: deregister everything. */
static void rx_mrc_fini(struct rx *rx)
{
	struct rx_mrc *mc = &rx->mrc;
	unsigned int i;

	for (i = 0; mc->ents && i < RX_MR_SLOTS; i++)
		if (mc->ents[i].state != MR_FREE)
			rx_mr_release(mc, &mc->ents[i]);
	free(mc->ents);
	mc->ents = NULL;
	if (mc->gen)
		munmap((void *)mc->gen, 4096);
	mc->gen = NULL;
	hcomm_close(mc->ctx);
	mc->ctx = NULL;
	mc->fd = -1;
	pthread_mutex_destroy(&mc->lock);
}

/* ------------------------------------------------------------------ */
/* completions                                                         */
/* ------------------------------------------------------------------ */

/*
 * What the reaper keeps of a completed WR to finish it once the CQ lock
 * is dropped (the ring slot may be reused from then on).
 */
struct rx_done {
	struct hcomm_request *req;
	struct rx_mr *mr;
	struct rx_peer *peer;
	struct hcomm_win *win;
	uint64_t raddr;
	uint64_t laddr;
	uint64_t imm_ord;
	uint64_t value;
	uint64_t seq;
	uint64_t peer_seq;
	uint32_t rkey;
	uint32_t sig;
	uint32_t len;
	uint32_t qp_num;
	uint32_t vendor_err;
	int status;			/* enum ibv_wc_status */
	int err;
	unsigned int lane;
	uint32_t imm;
	uint8_t op;
	uint8_t opcode;
	uint8_t defer;
	uint8_t payload;
	uint8_t sigimm;
};

static void rx_finish(struct rx *rx, struct rx_done *d);
static void rx_wr_failed(struct rx *rx, struct rx_peer *p,
			 const struct rx_done *d);
static void rx_signal_post(struct rx *rx, struct rx_peer *p,
			   struct hcomm_request *req, const struct rx_done *d);
static void rx_publish_now(struct rx *rx);

/* The signal pieces of value (>= 1 of them) in imm[]; how many. */
static unsigned int rx_pieces(uint32_t sig, uint64_t value, uint32_t *imm)
{
	const uint64_t mask = (1ULL << RX_MANT_BITS) - 1;
	unsigned int n = 0, k;

	for (k = 0; k < RX_PIECES; k++) {
		uint64_t bits = (value >> (k * RX_MANT_BITS)) & mask;

		if (bits)
			imm[n++] = (uint32_t)k << 30 |
				   sig << RX_MANT_BITS | (uint32_t)bits;
	}
	if (!n)
		imm[n++] = sig << RX_MANT_BITS;
	return n;
}

/*
 * One part (WR) of req finished with err (0 or an errno) after moving
 * bytes.  The part that finishes the last stripe of a striped put_signal
 * posts its signal; the last part completes the request.
 */
static void rx_part_done(struct rx *rx, struct rx_peer *p,
			 struct hcomm_request *req, int err, uint64_t bytes,
			 const struct rx_done *d)
{
	struct hcomm_req_priv *rp = hcomm__req_priv(req);
	int32_t zero = 0;
	uintptr_t left;

	if (err)
		(void)__atomic_compare_exchange_n(&rp->err, &zero, err, 0,
						  __ATOMIC_ACQ_REL,
						  __ATOMIC_ACQUIRE);
	if (bytes)
		__atomic_add_fetch(&req->bytes, bytes, __ATOMIC_RELAXED);
	left = __atomic_sub_fetch(&rp->xp, 1, __ATOMIC_ACQ_REL);
	if (d && d->defer && left == 1) {
		rx_signal_post(rx, p, req, d);
		return;
	}
	if (left)
		return;
	err = __atomic_load_n(&rp->err, __ATOMIC_ACQUIRE);
	bytes = __atomic_load_n(&req->bytes, __ATOMIC_RELAXED);
	if (p)
		__atomic_add_fetch(&p->st.ops, 1, __ATOMIC_RELAXED);
	hcomm__complete(rx->c, req, err, bytes);
}


/* What finishing (or replaying) w needs, copied out of its ring slot. */
static void rx_done_of(struct rx_done *d, const struct rx_wr *w)
{
	memset(d, 0, sizeof(*d));
	d->req = w->req;
	d->mr = w->mr;
	d->peer = w->conn->peer;
	d->win = w->win;
	d->raddr = w->raddr;
	d->laddr = w->laddr;
	d->imm_ord = w->imm_ord;
	d->value = w->value;
	d->seq = w->seq;
	d->peer_seq = w->peer_seq;
	d->rkey = w->rkey;
	d->sig = w->sig;
	d->len = w->len;
	d->imm = w->imm;
	d->op = w->op;
	d->opcode = w->opcode;
	d->defer = w->defer;
	d->payload = w->payload;
	d->sigimm = w->sigimm;
	d->lane = w->conn->lane;
}

/*
 * Reap up to RX_REAP_BATCH CQEs of lane l's send CQ (if no other thread
 * is): copy out what finishing needs, copy bounced get data to the
 * caller, and move each QP's tails (a QP's CQEs come in sequence order;
 * one out of order is counted in rx->ooo).  Then, unlocked, finish them.
 * The callbacks they queued run from the caller (hcomm__run_pending).
 */
/*
 * The lane's reaper (q->reap held): w's CQE was handled, its ring slot
 * (and bounce bytes) are the poster's again; a QP's CQEs come in
 * sequence order, one out of order is counted.
 */
static void rx_slot_retire(struct rx *rx, const struct rx_wr *w)
{
	struct rx_conn *k = w->conn;

	if (w->seq != __atomic_load_n(&k->tail, __ATOMIC_RELAXED))
		__atomic_add_fetch(&rx->ooo, 1, __ATOMIC_RELAXED);
	if (w->bend)
		__atomic_store_n(&k->btail, w->bend, __ATOMIC_RELEASE);
	__atomic_store_n(&k->tail, w->seq + 1, __ATOMIC_RELEASE);
}

/*
 * The lane's reaper (q->reap held) saw a CQE of k at now: progress, and
 * the smoothed gap between completions (1/8 of each new gap, as TCP's
 * SRTT) that stretches the keep-alive timeout of a slow but live link.
 */
static void rx_ka_note(struct rx_conn *k, const struct rx_wr *w,
		       uint64_t now)
{
	uint64_t prev = __atomic_load_n(&k->progress_ns, __ATOMIC_RELAXED);
	uint64_t busy = __atomic_load_n(&k->busy_ns, __ATOMIC_RELAXED);
	uint64_t gap = __atomic_load_n(&k->gap_ns, __ATOMIC_RELAXED);

	if (busy > prev)
		prev = busy;
	if (now > prev)
		gap = gap - gap / 8 + (now - prev) / 8;
	else
		gap -= gap / 8;
	__atomic_store_n(&k->gap_ns, gap, __ATOMIC_RELAXED);
	__atomic_store_n(&k->progress_ns, now, __ATOMIC_RELAXED);
	__atomic_store_n(&k->seen, w->seq + 1, __ATOMIC_RELEASE);
}

static int rx_reap_lane_once(struct rx *rx, unsigned int l, int wait)
{
	struct rx_cq *q = &rx->scq[l];
	struct ibv_wc wc[RX_REAP_BATCH];
	struct rx_done done[RX_REAP_BATCH];
	uint64_t now = 0;
	int n, i, stashed;

	if (wait)
		pthread_mutex_lock(&q->reap);
	else if (pthread_mutex_trylock(&q->reap))
		return 0;
	n = 0;
	if (q->nstash) {	/* what the cm thread polled comes first */
		n = (int)q->nstash;
		memcpy(wc, q->stash, (size_t)n * sizeof(wc[0]));
		__atomic_store_n(&q->nstash, 0, __ATOMIC_RELAXED);
	}
	stashed = n;		/* the cm thread noted their progress */
	i = ibv_poll_cq(q->cq, RX_REAP_BATCH - n, wc + n);
	if (i > 0)
		n += i;
	/*
	 * A failover waits for these to be parked (rx_fo_tell): counted
	 * before their ring slots are retired, so that one that finds the
	 * rings empty then finds them here.
	 */
	if (n)
		__atomic_add_fetch(&q->finishing, n, __ATOMIC_SEQ_CST);
	if (n && rx->ka_timeout_ns)
		now = hcomm__now_ns();
	for (i = 0; i < n; i++) {
		struct rx_wr *w = (struct rx_wr *)(uintptr_t)wc[i].wr_id;
		struct rx_conn *k = w->conn;
		struct rx_done *d = &done[i];

		if (now && i >= stashed)
			rx_ka_note(k, w, now);

		rx_done_of(d, w);
		d->qp_num = wc[i].qp_num;
		d->vendor_err = wc[i].vendor_err;
		d->status = wc[i].status;
		d->err = rx_wc_errno(wc[i].status);
		if (!d->err && w->copy_to)
			memcpy(w->copy_to, w->bounce, w->len);
		rx_slot_retire(rx, w);
	}
	if (n)
		__atomic_sub_fetch(&q->posted, n, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&q->reap);
	for (i = 0; i < n; i++)
		rx_finish(rx, &done[i]);
	if (n)
		__atomic_sub_fetch(&q->finishing, n, __ATOMIC_ACQ_REL);
	if (n && rx->pub)
		rx_publish_now(rx);
	hcomm__run_pending();
	return n;
}

static int rx_reap_lane(struct rx *rx, unsigned int l)
{
	int n, total = 0, rounds = 16;

	do {
		n = rx_reap_lane_once(rx, l, 0);
		total += n;
	} while (n == RX_REAP_BATCH && --rounds);
	return total;
}

static const char *rx_wr_name(uint8_t op)
{
	switch (op) {
	case HCOMM_OP_PUT:
		return "put";
	case HCOMM_OP_GET:
		return "get";
	default:
		return "put_signal";
	}
}

/* A reaped WR, unlocked: counters, the peer's failure, its request. */
static void rx_finish(struct rx *rx, struct rx_done *d)
{
	struct rx_peer *p = d->peer;
	uint64_t bytes = 0;

	rx_mr_put(rx, d->mr);
	if (!d->req) {		/* a keep-alive probe */
		if (d->err)
			rx_peer_kill(rx, p, d->err, "%s (vendor error %#x) on "
				     "lane %u QP %#x: keep-alive probe",
				     ibv_wc_status_str(d->status),
				     d->vendor_err, d->lane, d->qp_num);
		return;
	}
	if (d->err) {
		__atomic_add_fetch(&p->st.errors, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&p->st.wc_err[d->status < RX_WC_STATUS ?
						  d->status : 0], 1,
				   __ATOMIC_RELAXED);
		rx_peer_kill(rx, p, d->err, "%s (vendor error %#x) on lane %u "
			     "QP %#x: %s of %u bytes, seq %llu, op %llu",
			     ibv_wc_status_str(d->status), d->vendor_err,
			     d->lane, d->qp_num, rx_wr_name(d->op), d->len,
			     (unsigned long long)d->seq,
			     (unsigned long long)d->peer_seq);
		d->mr = NULL;
		rx_wr_failed(rx, p, d);
		return;
	} else if (d->payload) {
		bytes = d->len;
		__atomic_add_fetch(d->op == HCOMM_OP_GET ? &p->st.rx_bytes :
				   &p->st.tx_bytes, bytes, __ATOMIC_RELAXED);
	}
	rx_part_done(rx, p, d->req, d->err, bytes, d);
}

static int rx_qpn_cmp(const void *a, const void *b)
{
	const struct rx_qpn *x = a, *y = b;

	return x->qpn < y->qpn ? -1 : x->qpn > y->qpn;
}

/* The peer and lane of our QP number qpn, or NULL. */
static const struct rx_qpn *rx_qpn_find(const struct rx *rx, uint32_t qpn)
{
	struct rx_qpmap *m = __atomic_load_n(&rx->qpmap, __ATOMIC_ACQUIRE);
	struct rx_qpn key = { .qpn = qpn };

	if (!m || !m->n)
		return NULL;
	return bsearch(&key, m->e, m->n, sizeof(key), rx_qpn_cmp);
}

/*
 * rcq.reap held.  Reap up to RX_REAP_BATCH receive completions: apply
 * every signal piece (release: the data it follows is visible to an
 * acquire load of the signal) and give the SRQ its receives back.
 * Returns how many were reaped; *applied counts the pieces.
 */
static int rx_reap_recv_locked(struct rx *rx, int *applied)
{
	struct ibv_wc wc[RX_REAP_BATCH];
	struct ibv_recv_wr wr[RX_REAP_BATCH], *bad;
	struct rx_peer *p;
	int n, i;

	n = ibv_poll_cq(rx->rcq.cq, RX_REAP_BATCH, wc);
	if (n < 0)
		n = 0;
	for (i = 0; i < n; i++) {
		const struct rx_qpn *q;
		uint32_t imm, piece, sig;
		uint64_t v;

		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		if (wc[i].status != IBV_WC_SUCCESS ||
		    wc[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM)
			continue;
		q = rx_qpn_find(rx, wc[i].qp_num);
		p = q ? q->peer : NULL;
		/* what landed of the peer's writes on this QP (failover) */
		if (p)
			__atomic_add_fetch(&p->conns[q->lane].rcvd, 1,
					   __ATOMIC_RELEASE);
		imm = ntohl(wc[i].imm_data);
		piece = imm >> 30;
		sig = (imm >> RX_MANT_BITS) & ((1u << RX_SIG_BITS) - 1);
		v = (uint64_t)(imm & ((1u << RX_MANT_BITS) - 1)) <<
		    (piece * RX_MANT_BITS);
		if (!v)		/* a data part's mark, or a signal += 0 */
			continue;
		/* the communicator's signals may live in another transport */
		if (!hcomm__signal_deliver(rx->c, HCOMM_XP_RDMA, sig, v))
			__atomic_add_fetch(&rx->sigs[sig], v,
					   __ATOMIC_RELEASE);
		(*applied)++;
		if (p)
			__atomic_add_fetch(&p->st.signals_in, 1,
					   __ATOMIC_RELAXED);
	}
	if (n)
		(void)ibv_post_srq_recv(rx->srq, wr, &bad);
	return n;
}

/* Wake the sleeping signal waiters after pieces were applied. */
static void rx_recv_wake(struct rx *rx, int applied)
{
	unsigned int waiters;

	waiters = __atomic_load_n(&rx->sig_waiters, __ATOMIC_ACQUIRE);
	if (applied && waiters) {
		uint64_t v = waiters;

		(void)!write(rx->sig_evfd, &v, sizeof(v));
	}
}

/* One batch of the receive CQ, if no other thread is reaping it. */
static int rx_reap_recv(struct rx *rx)
{
	int n, applied = 0;

	if (!rx->rcq.ready || pthread_mutex_trylock(&rx->rcq.reap))
		return 0;
	n = rx_reap_recv_locked(rx, &applied);
	pthread_mutex_unlock(&rx->rcq.reap);
	rx_recv_wake(rx, applied);
	return n;
}

/*
 * Everything the receive CQ holds now, for hcomm_signal_read(): a signal
 * whose put completed at its origin before this call is applied when it
 * returns.  Waits for a concurrent reaper (it may hold pieces it polled
 * but has not applied yet) instead of skipping, and loops past
 * RX_REAP_BATCH.
 */
static void rx_reap_recv_all(struct rx *rx)
{
	int applied = 0;

	if (!rx->rcq.ready)
		return;
	pthread_mutex_lock(&rx->rcq.reap);
	while (rx_reap_recv_locked(rx, &applied) == RX_REAP_BATCH)
		;
	pthread_mutex_unlock(&rx->rcq.reap);
	rx_recv_wake(rx, applied);
}

/* ------------------------------------------------------------------ */
/* posting                                                             */
/* ------------------------------------------------------------------ */

/*
 * A chain of WRs for one QP, posted with one ibv_post_send.
 * @undo: after a refused post, what the refused WRs need finished.
 */
struct rx_chain {
	struct ibv_send_wr wr[RX_CHAIN];
	struct ibv_sge sge[RX_CHAIN];
	unsigned int n;
	struct rx_done undo[RX_CHAIN];
	unsigned int nundo;
};

/* What one WR does. */
struct rx_spec {
	struct hcomm_request *req;
	struct hcomm_win *win;
	struct rx_mr *mr;		/* a reference is taken for the WR */
	uint64_t laddr;
	uint64_t raddr;
	uint64_t value;
	uint64_t peer_seq;
	uint32_t len;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t sig;
	uint32_t imm;
	uint8_t op;
	uint8_t opcode;
	uint8_t mode;			/* RX_M_* */
	uint8_t defer;
};

enum { RX_M_NOP, RX_M_SELF, RX_M_INLINE, RX_M_KEY, RX_M_BOUNCE, RX_M_FWD };

/* failover (below) */
static int rx_fo_settle(struct rx *rx, struct rx_peer *p, int nowait);
static int rx_fo_told(struct rx *rx, struct rx_peer *p);
static void rx_fwd_put(struct rx_peer *p);
static void rx_replay(struct rx *rx, struct rx_peer *p,
		      const struct rx_done *d, unsigned int units);
static void rx_replay_spec(struct rx *rx, struct rx_peer *p,
			   const struct rx_spec *s);

/* conn->lock held.  Room for wrs more WRs plus res reserved ones? */
static int rx_room(const struct rx *rx, const struct rx_conn *k,
		   unsigned int wrs, unsigned int res)
{
	uint64_t busy = k->head - __atomic_load_n(&k->tail, __ATOMIC_ACQUIRE);

	return busy + k->reserved + wrs + res <= rx->qd;
}

/*
 * conn->lock held, room checked.  Fill k's next ring slot from s and
 * append its WR to ch; false when the bounce ring is full (nothing done).
 */
static int rx_emit(struct rx *rx, struct rx_conn *k, struct rx_chain *ch,
		   const struct rx_spec *s)
{
	struct rx_wr *w = &k->wrs[k->head % rx->qd];
	struct ibv_send_wr *wr = &ch->wr[ch->n];
	struct ibv_sge *sge = &ch->sge[ch->n];
	uint64_t bstart = 0, bend = 0;
	char *buf = NULL;

	if (s->mode == RX_M_BOUNCE) {
		buf = rx_bounce_alloc(rx, k, s->len, &bstart, &bend);
		if (!buf)
			return 0;
		if (s->op != HCOMM_OP_GET)
			memcpy(buf, (const void *)(uintptr_t)s->laddr, s->len);
	}
	memset(w, 0, sizeof(*w));
	w->conn = k;
	w->req = s->req;
	w->win = s->win;
	w->seq = k->head;
	w->peer_seq = s->peer_seq;
	w->raddr = s->raddr;
	w->laddr = s->laddr;
	w->value = s->value;
	w->rkey = s->rkey;
	w->len = s->len;
	w->sig = s->sig;
	w->imm = s->imm;
	w->opcode = s->opcode;
	w->sigimm = s->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	/*
	 * Failover: every write of an operation carries an immediate (a
	 * data part's adds nothing), so the target counts, per QP, what
	 * landed (Documentation/failover.rst).
	 */
	if (rx->fo_on && s->req && s->opcode == IBV_WR_RDMA_WRITE) {
		w->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		w->imm = RX_IMM_MARK;
	}
	if (w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		w->imm_ord = ++k->imm_posted;
	w->op = s->op;
	w->defer = s->defer;
	w->payload = s->len > 0;
	w->bounce = buf;
	w->bstart = bstart;
	w->bend = bend;
	if (buf && s->op == HCOMM_OP_GET)
		w->copy_to = (void *)(uintptr_t)s->laddr;
	if (s->mr) {
		__atomic_add_fetch(&s->mr->refs, 1, __ATOMIC_RELAXED);
		w->mr = s->mr;
	}

	memset(wr, 0, sizeof(*wr));
	wr->wr_id = (uintptr_t)w;
	wr->opcode = w->opcode;
	wr->send_flags = IBV_SEND_SIGNALED;
	wr->wr.rdma.remote_addr = s->raddr;
	wr->wr.rdma.rkey = s->rkey;
	if (w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr->imm_data = htonl(w->imm);
	if (s->len) {
		sge->addr = buf ? (uintptr_t)buf : s->laddr;
		sge->length = s->len;
		sge->lkey = buf ? rx->bounce_mr->lkey : s->lkey;
		wr->sg_list = sge;
		wr->num_sge = 1;
		if (s->mode == RX_M_INLINE)
			wr->send_flags |= IBV_SEND_INLINE;
	}
	if (ch->n)
		ch->wr[ch->n - 1].next = wr;
	ch->n++;
	/* everything before was polled: the silence starts now */
	if (rx->ka_timeout_ns &&
	    k->head == __atomic_load_n(&k->seen, __ATOMIC_ACQUIRE))
		__atomic_store_n(&k->busy_ns, hcomm__now_ns(),
				 __ATOMIC_RELAXED);
	__atomic_store_n(&k->head, k->head + 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&rx->scq[k->lane].posted, 1, __ATOMIC_RELAXED);
	return 1;
}

/*
 * conn->lock held.  Post ch on k.  WRs the provider refused are taken
 * back (head, bounce ring) and left in ch->undo for the caller to finish
 * once unlocked; the peer is then failed.
 */
static void rx_chain_post(struct rx *rx, struct rx_conn *k,
			  struct rx_chain *ch)
{
	struct ibv_send_wr *bad = NULL;
	unsigned int cnt = ch->n, had = ch->nundo;
	struct rx_wr *w;
	uint64_t from, s;
	int ret;

	if (!cnt)
		return;
	ret = ibv_post_send(k->qp, ch->wr, &bad);
	ch->n = 0;
	if (!ret)
		return;
	from = bad ? ((struct rx_wr *)(uintptr_t)bad->wr_id)->seq :
		     k->head - cnt;
	for (s = from; s < k->head; s++) {
		struct rx_done *d = &ch->undo[ch->nundo++];

		w = &k->wrs[s % rx->qd];
		rx_done_of(d, w);
		d->status = IBV_WC_GENERAL_ERR;
		d->err = ret;
		d->imm_ord = 0;		/* never posted: never applied */
		if (w->bend && s == from)
			k->bhead = w->bstart;
		if (w->imm_ord && w->imm_ord <= k->imm_posted)
			k->imm_posted = w->imm_ord - 1;
	}
	if (!had)	/* one per chain with undo entries: rx_chain_undo */
		__atomic_add_fetch(&k->peer->fo_undo, 1, __ATOMIC_ACQ_REL);
	__atomic_sub_fetch(&rx->scq[k->lane].posted, k->head - from,
			   __ATOMIC_RELAXED);
	__atomic_store_n(&k->head, from, __ATOMIC_RELEASE);
}

/* Unlocked: finish what a refused post took back. */
static void rx_chain_undo(struct rx *rx, struct rx_conn *k,
			  struct rx_chain *ch)
{
	unsigned int i;

	if (!ch->nundo)
		return;
	rx_peer_kill(rx, k->peer, ch->undo[0].err, "ibv_post_send on lane %u "
		     "QP %#x: %s", k->lane, k->qp ? k->qp->qp_num : 0,
		     strerror(ch->undo[0].err));
	for (i = 0; i < ch->nundo; i++) {
		rx_mr_put(rx, ch->undo[i].mr);
		ch->undo[i].mr = NULL;
		if (ch->undo[i].req)	/* else a keep-alive probe */
			rx_wr_failed(rx, k->peer, &ch->undo[i]);
	}
	ch->nundo = 0;
	__atomic_sub_fetch(&k->peer->fo_undo, 1, __ATOMIC_ACQ_REL);
}

/*
 * Unlocked: wait a little for lane l to free ring slots or bounce bytes
 * (reap it; sleep on its channel when someone else is reaping).
 */
static int rx_block_lane(struct rx *rx, unsigned int l, int64_t timeout_us);

static int rx_reap_recv(struct rx *rx);

static void rx_make_room(struct rx *rx, unsigned int l)
{
	/*
	 * The receive CQ too: a peer in the same state waits for our SRQ
	 * (RNR) while we wait for it.
	 */
	(void)rx_reap_recv(rx);
	if (!rx_reap_lane(rx, l))
		(void)rx_block_lane(rx, l, 200);
}

/*
 * The signal pieces of a striped put_signal, posted on lane 0 once every
 * stripe has completed (by the thread that finished the last one): the
 * stripes went over several QPs, so only their completions say that the
 * target placed them all.  Lane 0 reserved room for the pieces when the
 * stripes were posted.
 */
static void rx_signal_post(struct rx *rx, struct rx_peer *p,
			   struct hcomm_request *req, const struct rx_done *d)
{
	struct hcomm_req_priv *rp = hcomm__req_priv(req);
	struct rx_conn *k = &p->conns[0];
	struct rx_chain ch;
	struct rx_spec s;
	uint32_t imm[RX_PIECES];
	unsigned int n, j;
	int err;

	n = rx_pieces(d->sig, d->value, imm);
	/* The request now waits for the n pieces (it waited for 1). */
	__atomic_add_fetch(&rp->xp, n - 1, __ATOMIC_ACQ_REL);
	err = __atomic_load_n(&rp->err, __ATOMIC_ACQUIRE);
	ch.n = 0;
	ch.nundo = 0;
	pthread_mutex_lock(&k->lock);
	k->reserved -= n;
	if (!err)
		err = rx_peer_dead(p);
	if (!err && __atomic_load_n(&p->fo, __ATOMIC_ACQUIRE) !=
	    RX_FO_NONE) {
		struct rx_done sd = *d;

		/*
		 * Every stripe has landed (over rdma or tcp): the whole
		 * signal goes over tcp, as the n pieces it stands for.
		 */
		pthread_mutex_unlock(&k->lock);
		__atomic_sub_fetch(&rx->deferred, 1, __ATOMIC_RELEASE);
		sd.len = 0;
		sd.laddr = 0;
		sd.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		sd.sigimm = 2;		/* the whole value, not one piece */
		sd.defer = 0;
		rx_replay(rx, p, &sd, n);
		return;
	}
	if (!err) {
		memset(&s, 0, sizeof(s));
		s.req = req;
		s.win = d->win;
		s.raddr = d->raddr;
		s.rkey = d->rkey;
		s.value = d->value;
		s.sig = d->sig;
		s.peer_seq = d->peer_seq;
		s.op = HCOMM_OP_PUT_SIGNAL;
		s.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		s.mode = RX_M_KEY;
		for (j = 0; j < n; j++) {
			s.imm = imm[j];
			(void)rx_emit(rx, k, &ch, &s);
		}
		rx_chain_post(rx, k, &ch);
	}
	pthread_mutex_unlock(&k->lock);
	__atomic_sub_fetch(&rx->deferred, 1, __ATOMIC_RELEASE);
	if (err) {
		for (j = 0; j < n; j++)
			rx_part_done(rx, p, req, err, 0, NULL);
		return;
	}
	rx_chain_undo(rx, k, &ch);
}

/* A window's registration (w->xps[HCOMM_XP_RDMA]; NULL: an empty part). */
struct rx_win {
	struct ibv_mr *mr;
	int dmabuf;			/* registered as a dma-buf */
};

/*
 * struct rx_plan - one descriptor being issued.
 * @mr:      the local buffer's registration (the issue's own reference),
 *           or NULL.
 * @lanes:   bit l: it has WRs on lane l.
 * @part:    payload bytes per WR; @parts: payload WRs (1 for 0 bytes).
 * @imm, @npieces: a put_signal's signal pieces.
 */
struct rx_plan {
	struct rx_mr *mr;
	uint64_t lanes;
	uint64_t peer_seq;
	uint64_t part;
	uint32_t lkey;
	uint32_t parts;
	uint32_t imm[RX_PIECES];
	uint8_t npieces;
	uint8_t mode;
	uint8_t striped;
	uint8_t tok;			/* RX_M_FWD: a forwarding token held */
};

static int rx_progress(struct hcomm_comm *c);

/*
 * Plan d: how its local buffer is reached and how it is cut.  0, or a
 * negated hcomm_err with nothing held, or (nowait) 1 when its peer is
 * failing over or switching back: nothing held, issue the chunk before
 * it first (its tokens), then plan it again.
 */
static int rx_plan_one(struct rx *rx, struct hcomm_win *w,
		       const struct hcomm_xfer_desc *d, struct rx_plan *pl,
		       unsigned int tl, int nowait)
{
	const struct rx_win *rw = w->xps[HCOMM_XP_RDMA];
	struct rx_peer *p;
	uint64_t part;
	uint32_t j;
	int ret, dead, fo;

	memset(pl, 0, sizeof(*pl));
	if (d->target == rx->c->rank) {
		pl->mode = RX_M_SELF;
		return 0;
	}
	if (!d->len && d->op != HCOMM_OP_PUT_SIGNAL) {
		pl->mode = RX_M_NOP;
		return 0;
	}
	p = &rx->peers[d->target];
	fo = rx_fo_settle(rx, p, nowait);
	if (fo == RX_FO_WAIT)
		return 1;	/* the chunk ends before it */
	dead = rx_peer_dead(p);
	if (dead) {
		if (fo == RX_FO_TCP)
			rx_fwd_put(p);
		return rx_pfail(rx, p, HCOMM_ERR_IO, dead, "%s of %llu bytes: "
				"the peer failed earlier: %s",
				rx_wr_name(d->op), (unsigned long long)d->len,
				p->why);
	}
	if (fo != RX_FO_NONE) {
		pl->mode = RX_M_FWD;
		pl->tok = fo == RX_FO_TCP;
		return 0;
	}
	if (d->op == HCOMM_OP_PUT_SIGNAL)
		pl->npieces = rx_pieces(d->sig, d->value, pl->imm);
	pl->mode = RX_M_KEY;
	if (!d->len) {
		/* a signal alone: a zero-length WRITE_WITH_IMM */
	} else if (d->op != HCOMM_OP_GET && d->len <= rx->max_inline) {
		pl->mode = RX_M_INLINE;
	} else if (rw && d->local >= (uintptr_t)w->base &&
		   d->local + d->len <= (uintptr_t)w->base + w->len) {
		pl->lkey = rw->mr->lkey;
	} else if (d->len <= rx->bounce_max) {
		pl->mode = RX_M_BOUNCE;
	} else {
		while ((ret = rx_mr_get(rx, (const void *)(uintptr_t)d->local,
					d->len, d->op == HCOMM_OP_GET,
					&pl->mr)) == -EAGAIN) {
			if (!rx_progress(rx->c))
				sched_yield();
		}
		if (ret)
			return ret;
		pl->lkey = pl->mr->mr->lkey;
	}
	pl->striped = pl->mode == RX_M_KEY && rx->nlanes > 1 &&
		      d->len >= rx->stripe_min;
	part = d->len;
	if (pl->striped)
		part = ((d->len + rx->nlanes - 1) / rx->nlanes + 4095) &
		       ~4095ULL;
	if (part > rx->part_max)
		part = rx->part_max;
	pl->part = part;
	pl->parts = d->len ? (uint32_t)((d->len + part - 1) / part) : 1;
	if (!pl->striped) {
		pl->lanes = 1ULL << tl;
		return 0;
	}
	pl->lanes = 1;		/* lane 0 keeps room for the signal */
	for (j = 0; j < pl->parts && j < rx->nlanes; j++)
		pl->lanes |= 1ULL << j;
	return 0;
}

/* An operation on this rank's own window: a copy, done now. */
static void rx_self(struct rx *rx, struct hcomm_win *w,
		    const struct hcomm_xfer_desc *d, struct hcomm_request *req)
{
	char *mine = (char *)w->base + d->target_off;
	void *local = (void *)(uintptr_t)d->local;
	unsigned int waiters;

	if (d->len && d->op == HCOMM_OP_GET)
		memmove(local, mine, d->len);
	else if (d->len)
		memmove(mine, local, d->len);
	if (d->op == HCOMM_OP_PUT_SIGNAL &&
	    !hcomm__signal_deliver(rx->c, HCOMM_XP_RDMA, d->sig, d->value)) {
		__atomic_add_fetch(&rx->sigs[d->sig], d->value,
				   __ATOMIC_RELEASE);
		waiters = __atomic_load_n(&rx->sig_waiters, __ATOMIC_ACQUIRE);
		if (waiters) {
			uint64_t v = waiters;

			(void)!write(rx->sig_evfd, &v, sizeof(v));
		}
	}
	hcomm__complete(rx->c, req, 0, d->len);
}

/*
 * conn->lock held.  Append one WR (plus res WRs reserved for a later
 * signal) to ch, posting the chain when it is full and, when k has no
 * room, waiting unlocked for its lane to complete some.  0 (nothing
 * appended, the lock still held) once the peer began to fail over.
 */
static int rx_put_wr(struct rx *rx, struct rx_conn *k, struct rx_chain *ch,
		     const struct rx_spec *s, unsigned int res)
{
	for (;;) {
		/*
		 * A failover collects the lane from here on: not on it; nor
		 * after a refused post (its undo entries come first).
		 */
		if (ch->nundo ||
		    __atomic_load_n(&k->peer->fo, __ATOMIC_ACQUIRE) !=
		    RX_FO_NONE)
			return 0;
		if (ch->n == RX_CHAIN)
			rx_chain_post(rx, k, ch);
		if (rx_room(rx, k, 1, res) && rx_emit(rx, k, ch, s)) {
			k->reserved += res;
			return 1;
		}
		rx_chain_post(rx, k, ch);
		pthread_mutex_unlock(&k->lock);
		rx_chain_undo(rx, k, ch);
		rx_make_room(rx, k->lane);
		pthread_mutex_lock(&k->lock);
	}
}

/*
 * One WR of a plan on lane k: appended to ch (k->lock held, *st NONE),
 * or - once the peer began to fail over - forwarded over tcp when the
 * failover is through (*st: the rx_fo_settle() state, k->lock not held;
 * with RX_FO_TCP the caller gives the token back after its last WR).
 */
static void rx_unit(struct rx *rx, struct rx_conn *k, struct rx_chain *ch,
		    const struct rx_spec *s, unsigned int res, int *st)
{
	while (*st == RX_FO_NONE) {
		if (rx_put_wr(rx, k, ch, s, res))
			return;
		rx_chain_post(rx, k, ch);
		pthread_mutex_unlock(&k->lock);
		rx_chain_undo(rx, k, ch);
		*st = rx_fo_settle(rx, k->peer, 0);
		if (*st == RX_FO_NONE)	/* failed over and back meanwhile */
			pthread_mutex_lock(&k->lock);
	}
	if (res) {		/* rx_signal_post gives them back */
		pthread_mutex_lock(&k->lock);
		k->reserved += res;
		pthread_mutex_unlock(&k->lock);
	}
	rx_replay_spec(rx, k->peer, s);
}

/*
 * Post, in order, the WRs that descriptors i0.. to k's peer have on k's
 * lane, as chains of up to RX_CHAIN WRs.
 */
static void rx_issue_conn(struct rx *rx, struct hcomm_win *w,
			  struct rx_conn *k, const struct hcomm_xfer_desc *d,
			  unsigned int m, struct hcomm_request *reqs,
			  const struct rx_plan *pl, unsigned int i0)
{
	const struct hcomm_win_peer *wp =
		&w->peers[k->peer->rank].x[HCOMM_XP_RDMA];
	struct rx_chain ch;
	struct rx_spec s;
	unsigned int i, q, res, step;
	uint64_t j, off;

	int st = RX_FO_NONE;

	ch.n = 0;
	ch.nundo = 0;
	pthread_mutex_lock(&k->lock);
#define RX_UNIT(sp, r) rx_unit(rx, k, &ch, (sp), (r), &st)
	for (i = i0; i < m; i++) {
		const struct rx_plan *p = &pl[i];
		int sigop = d[i].op == HCOMM_OP_PUT_SIGNAL;

		if (d[i].target != k->peer->rank ||
		    !(p->lanes & (1ULL << k->lane)) ||
		    p->mode == RX_M_NOP || p->mode == RX_M_SELF ||
		    p->mode == RX_M_FWD)
			continue;
		res = p->striped && sigop && !k->lane ? p->npieces : 0;
		step = p->striped ? rx->nlanes : 1;
		memset(&s, 0, sizeof(s));
		s.req = &reqs[i];
		s.win = w;
		s.mr = p->mr;
		s.lkey = p->lkey;
		s.rkey = (uint32_t)wp->key;
		s.value = d[i].value;
		s.sig = d[i].sig;
		s.peer_seq = p->peer_seq;
		s.op = d[i].op;
		s.mode = p->mode;
		s.defer = p->striped && sigop;
		for (j = p->striped ? k->lane : 0; j < p->parts; j += step) {
			off = j * p->part;
			s.laddr = d[i].local + off;
			s.raddr = wp->addr + d[i].target_off + off;
			s.len = (uint32_t)(d[i].len - off < p->part ?
					   d[i].len - off : p->part);
			s.opcode = d[i].op == HCOMM_OP_GET ? IBV_WR_RDMA_READ :
				   IBV_WR_RDMA_WRITE;
			if (sigop && !p->striped && j + 1 == p->parts) {
				s.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
				s.imm = p->imm[0];
			}
			RX_UNIT(&s, res);
			res = 0;
		}
		if (!sigop || p->striped)
			continue;
		/* the rest of the signal: zero-length pieces after it */
		s.mr = NULL;
		s.len = 0;
		s.laddr = 0;
		s.raddr = wp->addr + d[i].target_off;
		s.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		for (q = 1; q < p->npieces; q++) {
			s.imm = p->imm[q];
			RX_UNIT(&s, 0);
		}
	}
#undef RX_UNIT
	if (st != RX_FO_NONE) {
		if (st == RX_FO_TCP)
			rx_fwd_put(k->peer);
		return;
	}
	rx_chain_post(rx, k, &ch);
	pthread_mutex_unlock(&k->lock);
	rx_chain_undo(rx, k, &ch);
}

/* Issue m planned descriptors: peer by peer, lane by lane. */
static void rx_issue(struct rx *rx, struct hcomm_win *w,
		     const struct hcomm_xfer_desc *d, unsigned int m,
		     struct hcomm_request *reqs, struct rx_plan *pl,
		     unsigned int tl)
{
	unsigned int i, j, l;
	uint64_t lanes;

	for (i = 0; i < m; i++) {
		struct hcomm_req_priv *rp = hcomm__req_priv(&reqs[i]);
		uintptr_t left = pl[i].parts;

		if (pl[i].mode == RX_M_NOP) {
			hcomm__complete(rx->c, &reqs[i], 0, 0);
			continue;
		}
		if (pl[i].mode == RX_M_SELF) {
			rx_self(rx, w, &d[i], &reqs[i]);
			continue;
		}
		if (pl[i].mode == RX_M_FWD) {
			/* failed over: the request is tcp's from now on */
			rp->xport = HCOMM_XP_TCP;
			rp->xp = 0;
			if (rx->c->xo[HCOMM_XP_TCP]->post(rx->c, w, &d[i], 1,
							   &reqs[i]))
				hcomm__complete(rx->c, &reqs[i],
						hcomm_errno() ? hcomm_errno() :
						EIO, 0);
			if (pl[i].tok)
				rx_fwd_put(&rx->peers[d[i].target]);
			continue;
		}
		if (d[i].op == HCOMM_OP_PUT_SIGNAL)
			left += pl[i].striped ? 1 : pl[i].npieces - 1u;
		rp->xp = left;
		rp->ring = pl[i].striped ? rx->nlanes : tl;
		pl[i].peer_seq = __atomic_fetch_add(
			&rx->peers[d[i].target].op_seq, 1, __ATOMIC_RELAXED);
		if (pl[i].striped && d[i].op == HCOMM_OP_PUT_SIGNAL)
			__atomic_add_fetch(&rx->deferred, 1, __ATOMIC_RELAXED);
	}
	for (i = 0; i < m; i++) {
		if (pl[i].mode == RX_M_NOP || pl[i].mode == RX_M_SELF ||
		    pl[i].mode == RX_M_FWD)
			continue;
		for (j = 0; j < i; j++)
			if (d[j].target == d[i].target &&
			    pl[j].mode != RX_M_NOP && pl[j].mode != RX_M_SELF &&
			    pl[j].mode != RX_M_FWD)
				break;
		if (j < i)
			continue;	/* this peer was done with j */
		lanes = 0;
		for (j = i; j < m; j++)
			if (d[j].target == d[i].target)
				lanes |= pl[j].lanes;
		for (l = 0; l < rx->nlanes; l++)
			if (lanes & (1ULL << l))
				rx_issue_conn(rx, w,
					      &rx->peers[d[i].target].conns[l],
					      d, m, reqs, pl, i);
	}
	for (i = 0; i < m; i++)
		rx_mr_put(rx, pl[i].mr);
}

/* Is a descriptor before i to i's target planned for its QPs? */
static int rx_same_peer_rdma(const struct hcomm_xfer_desc *d,
			     const struct rx_plan *pl, unsigned int i)
{
	unsigned int j;

	for (j = 0; j < i; j++)
		if (d[j].target == d[i].target && pl[j].mode != RX_M_NOP &&
		    pl[j].mode != RX_M_SELF && pl[j].mode != RX_M_FWD)
			return 1;
	return 0;
}

/*
 * @post: plan RX_CHUNK descriptors at a time (registrations included),
 * then issue them.  A failure while planning the first chunk issues
 * nothing; one in a later chunk fails that chunk's and the later
 * requests as completed ones (the earlier chunks are on the wire).
 */
static int rx_post(struct hcomm_comm *c, struct hcomm_win *w,
		   const struct hcomm_xfer_desc *d, unsigned int n,
		   struct hcomm_request *reqs)
{
	struct rx *rx = rx_of(c);
	struct rx_plan pl[RX_CHUNK];
	unsigned int off, m, i, tl = rx_thread_lane(rx);
	int ret = 0, err;

	for (off = 0; off < n; off += m) {
		m = n - off < RX_CHUNK ? n - off : RX_CHUNK;
		for (i = 0; i < m; i++) {
			ret = rx_plan_one(rx, w, &d[off + i], &pl[i], tl, i > 0);
			if (ret > 0) {
				ret = 0;
				m = i;
				break;
			}
			if (ret)
				break;
			/*
			 * A peer that began to fail over after an earlier
			 * descriptor of this chunk was planned for its QPs:
			 * that one goes first (its WRs are forwarded as it is
			 * issued), this one with the next chunk.
			 */
			if (pl[i].mode == RX_M_FWD && i && rx_same_peer_rdma(
					d + off, pl, i)) {
				if (pl[i].tok)
					rx_fwd_put(&rx->peers[d[off + i].target]);
				m = i;
				break;
			}
		}
		if (ret) {
			while (i--) {
				rx_mr_put(rx, pl[i].mr);
				if (pl[i].tok)
					rx_fwd_put(&rx->peers[d[off + i].target]);
			}
			if (!off)
				return ret;
			err = hcomm_errno() ? hcomm_errno() : EIO;
			for (i = off; i < n; i++)
				hcomm__complete(c, &reqs[i], err, 0);
			return 0;
		}
		rx_issue(rx, w, d + off, m, reqs + off, pl, tl);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* progress, waiting                                                   */
/* ------------------------------------------------------------------ */

static int rx_progress(struct hcomm_comm *c)
{
	struct rx *rx = rx_of(c);
	unsigned int i, l, first = rx_thread_lane(rx);
	int total = rx_reap_recv(rx);

	for (i = 0; i < rx->nlanes; i++) {
		l = (first + i) % rx->nlanes;
		if (__atomic_load_n(&rx->scq[l].posted, __ATOMIC_ACQUIRE))
			total += rx_reap_lane(rx, l);
	}
	return total;
}

/*
 * Take (and acknowledge) an event of q's channel; never blocks.  One per
 * wake-up: a CQ armed once raises one event, and the read that would find
 * the channel empty is a system call of its own (another event left there
 * only makes the next poll return at once).
 */
static void rx_cq_events(struct rx_cq *q)
{
	struct ibv_cq *cq;
	void *ctx;

	if (!ibv_get_cq_event(q->ch, &cq, &ctx))
		ibv_ack_cq_events(cq, 1);
}

static void rx_timeout_ts(int64_t timeout_us, struct timespec *ts)
{
	ts->tv_sec = timeout_us / 1000000;
	ts->tv_nsec = (timeout_us % 1000000) * 1000;
}

/*
 * Reap lane l; when it has nothing, arm its CQ, reap again (a CQE that
 * came before the arm raises no event), then sleep on its completion
 * channel up to timeout_us.
 */
static int rx_block_lane(struct rx *rx, unsigned int l, int64_t timeout_us)
{
	struct rx_cq *q = &rx->scq[l];
	struct pollfd pfd = { .fd = q->ch->fd, .events = POLLIN };
	struct timespec ts;
	int n;

	n = rx_reap_lane(rx, l);
	if (n)
		return n;
	if (ibv_req_notify_cq(q->cq, 0)) {
		sched_yield();
		return 0;
	}
	/*
	 * Armed: a CQE from now on raises an event.  One that came before
	 * may be in the CQ or, polled by the cm thread meanwhile, in the
	 * stash: wait for the reap lock (a trylock could miss both).
	 */
	n = rx_reap_lane_once(rx, l, 1);
	if (n)
		return n;
	rx_timeout_ts(timeout_us, &ts);
	if (ppoll(&pfd, 1, timeout_us < 0 ? NULL : &ts, NULL) > 0)
		rx_cq_events(q);
	return rx_reap_lane(rx, l);
}

/*
 * Any CQ, or a wake-up: arm every CQ, progress once more, then sleep on
 * all the channels (and the wake eventfd once enabled).
 */
static int rx_block_all(struct rx *rx, int64_t timeout_us)
{
	struct pollfd pfd[65 + 2];
	struct timespec ts;
	unsigned int l, n = 0;
	uint64_t v;
	int got;

	got = rx_progress(rx->c);
	if (got)
		return got;
	for (l = 0; l < rx->nlanes; l++) {
		(void)ibv_req_notify_cq(rx->scq[l].cq, 0);
		pfd[n].fd = rx->scq[l].ch->fd;
		pfd[n++].events = POLLIN;
	}
	(void)ibv_req_notify_cq(rx->rcq.cq, 0);
	pfd[n].fd = rx->rcq.ch->fd;
	pfd[n++].events = POLLIN;
	if (rx->wake_fd >= 0) {
		pfd[n].fd = rx->wake_fd;
		pfd[n++].events = POLLIN;
	}
	/* as rx_block_lane: what came before the arming, CQ or stash */
	got = rx_reap_recv(rx);
	for (l = 0; l < rx->nlanes; l++)
		if (__atomic_load_n(&rx->scq[l].posted, __ATOMIC_ACQUIRE))
			got += rx_reap_lane_once(rx, l, 1);
	if (got)
		return got;
	rx_timeout_ts(timeout_us, &ts);
	if (ppoll(pfd, n, timeout_us < 0 ? NULL : &ts, NULL) > 0) {
		for (l = 0; l < rx->nlanes; l++)
			if (pfd[l].revents)
				rx_cq_events(&rx->scq[l]);
		if (pfd[rx->nlanes].revents)
			rx_cq_events(&rx->rcq);
		if (rx->wake_fd >= 0 && pfd[n - 1].revents)
			(void)!read(rx->wake_fd, &v, sizeof(v));
	}
	return rx_progress(rx->c);
}

static int rx_block(struct hcomm_comm *c, struct hcomm_request *req,
		    int64_t timeout_us)
{
	struct rx *rx = rx_of(c);
	uint32_t ring;

	if (req) {
		ring = hcomm__req_priv(req)->ring;
		if (ring < rx->nlanes)
			return rx_block_lane(rx, ring, timeout_us);
	}
	return rx_block_all(rx, timeout_us);
}

static int rx_wake_enable(struct hcomm_comm *c)
{
	struct rx *rx = rx_of(c);

	if (rx->wake_fd >= 0)
		return 0;
	rx->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (rx->wake_fd < 0)
		return rx_fail(rx, rx_code(errno), errno, "eventfd for the "
			       "callback thread");
	return 0;
}

static void rx_wake(struct hcomm_comm *c)
{
	struct rx *rx = rx_of(c);
	uint64_t one = 1;

	if (rx->wake_fd >= 0)
		(void)!write(rx->wake_fd, &one, sizeof(one));
}

/*
 * Every WR posted before the call has completed (each QP's tail passed
 * the head it had), and no striped put_signal still waits to post its
 * signal (this may also wait for ones issued meanwhile by other threads).
 */
static int rx_fence(struct hcomm_comm *c)
{
	struct rx *rx = rx_of(c);
	size_t nk = (size_t)c->size * rx->nlanes, i;
	uint64_t *snap;
	int done;

	snap = calloc(nk, sizeof(*snap));
	if (!snap)
		return rx_fail(rx, HCOMM_ERR_NOMEM, ENOMEM, "hcomm_fence");
	for (i = 0; i < nk; i++) {
		struct rx_peer *p = &rx->peers[i / rx->nlanes];

		if (p->rank != c->rank)
			snap[i] = __atomic_load_n(
				&p->conns[i % rx->nlanes].head,
				__ATOMIC_ACQUIRE);
	}
	for (;;) {
		done = !__atomic_load_n(&rx->deferred, __ATOMIC_ACQUIRE);
		for (i = 0; done && i < nk; i++) {
			struct rx_peer *p = &rx->peers[i / rx->nlanes];

			if (p->rank != c->rank &&
			    __atomic_load_n(&p->conns[i % rx->nlanes].tail,
					    __ATOMIC_ACQUIRE) < snap[i])
				done = 0;
		}
		if (done)
			break;
		if (!rx_progress(c))
			(void)rx_block_all(rx, 1000);
	}
	free(snap);
	hcomm__run_pending();
	return 0;
}

static int rx_flush(struct hcomm_comm *c)
{
	return hcomm__drain(c);
}

/* ------------------------------------------------------------------ */
/* signals                                                             */
/* ------------------------------------------------------------------ */

/* Signal sig += v for another transport: as a WRITE_WITH_IMM's would. */
static int rx_signal_add(struct hcomm_comm *c, uint32_t sig, uint64_t v)
{
	struct rx *rx = rx_of(c);
	unsigned int waiters;

	if (sig >= RX_SIGNALS)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "signal %u of %u",
				   sig, RX_SIGNALS);
	__atomic_add_fetch(&rx->sigs[sig], v, __ATOMIC_RELEASE);
	waiters = __atomic_load_n(&rx->sig_waiters, __ATOMIC_ACQUIRE);
	if (waiters) {
		uint64_t n = waiters;

		(void)!write(rx->sig_evfd, &n, sizeof(n));
	}
	return 0;
}

static uint32_t rx_signal_count(const struct hcomm_comm *c)
{
	(void)c;
	return RX_SIGNALS;
}

static uint64_t rx_signal_read(struct hcomm_comm *c, uint32_t sig)
{
	struct rx *rx = rx_of(c);

	if (sig >= RX_SIGNALS)
		return 0;
	rx_reap_recv_all(rx);
	return __atomic_load_n(&rx->sigs[sig], __ATOMIC_ACQUIRE);
}

static void rx_signal_apply(struct hcomm_comm *c)
{
	rx_reap_recv_all(rx_of(c));
}

/* The first i < n whose signal reached its value, else -1. */
static int rx_sig_any(struct rx *rx, const uint32_t *sig, const uint64_t *val,
		      int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (__atomic_load_n(&rx->sigs[sig[i]], __ATOMIC_ACQUIRE) >=
		    val[i])
			return i;
	return -1;
}

/*
 * Until one of n signals reaches its value: poll the receive CQ for
 * spin_ns, then sleep on its completion channel and on sig_evfd (another
 * thread applied pieces), re-checking after every wake-up and at least
 * every 100 ms.
 */
static int rx_signal_wait_any(struct hcomm_comm *c, const uint32_t *sig,
			      const uint64_t *val, int n, int64_t timeout_ns)
{
	struct rx *rx = rx_of(c);
	uint64_t start = hcomm__now_ns(), deadline = UINT64_MAX, t;
	struct pollfd pfd[2];
	struct timespec ts;
	struct hcomm_spin spin;
	int64_t wait_us;
	int i, armed;

	if (timeout_ns >= 0)
		deadline = start + (uint64_t)timeout_ns;
	hcomm__spin_init(&spin, start, hcomm__spin_cap(rx->spin_ns, timeout_ns),
			 16);
	do {
		(void)rx_reap_recv(rx);
		i = rx_sig_any(rx, sig, val, n);
		if (i >= 0)
			return i;
	} while (hcomm__spin(&spin));
	__atomic_add_fetch(&rx->sig_waiters, 1, __ATOMIC_ACQ_REL);
	for (armed = 0;;) {
		if (armed) {
			(void)rx_reap_recv(rx);
			i = rx_sig_any(rx, sig, val, n);
			if (i >= 0)
				break;
		}
		(void)ibv_req_notify_cq(rx->rcq.cq, 0);
		armed = 1;
		(void)rx_reap_recv(rx);
		i = rx_sig_any(rx, sig, val, n);
		if (i >= 0)
			break;
		t = hcomm__now_ns();
		if (t >= deadline)
			break;
		wait_us = 100000;
		if (deadline != UINT64_MAX && (deadline - t) / 1000 < 100000)
			wait_us = (int64_t)((deadline - t) / 1000) + 1;
		pfd[0].fd = rx->rcq.ch->fd;
		pfd[0].events = POLLIN;
		pfd[1].fd = rx->sig_evfd;
		pfd[1].events = POLLIN;
		rx_timeout_ts(wait_us, &ts);
		if (ppoll(pfd, 2, &ts, NULL) > 0) {
			if (pfd[0].revents)
				rx_cq_events(&rx->rcq);
			if (pfd[1].revents)
				(void)!read(rx->sig_evfd, &t, sizeof(t));
		}
	}
	__atomic_sub_fetch(&rx->sig_waiters, 1, __ATOMIC_RELEASE);
	return i >= 0 ? i : -HCOMM_ERR_TIMEOUT;
}

/* ------------------------------------------------------------------ */
/* windows                                                             */
/* ------------------------------------------------------------------ */

#define RX_WIN_ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ)

/*
 * An open file descriptor of this process on the file with inode ino
 * (the dma-buf a mapping shows), or -1.
 */
static int rx_fd_of_inode(unsigned long ino)
{
	char path[64];
	struct stat st;
	int fd;

	for (fd = 0; fd < 65536; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if (stat(path, &st)) {
			if (errno == ENOENT && fd > 4096)
				break;
			continue;
		}
		if (st.st_ino == ino)
			return fd;
	}
	return -1;
}

/*
 * base is inside a mapping of a dma-buf (ibv_reg_mr cannot pin it: it has
 * no struct pages): register the dma-buf itself, at iova base so that
 * remote addresses stay base + offset.  The dma-buf is found through the
 * mapping's inode among this process's open descriptors (a dma-buf cannot
 * be reopened by path), so its fd must still be open.  0, 1 when base is
 * not in a dma-buf mapping, or a negated hcomm_err.
 */
static int rx_win_dmabuf(struct rx *rx, struct rx_win *rw, void *base,
			 size_t len)
{
	uintptr_t a = (uintptr_t)base, s, e;
	unsigned long long pgoff;
	unsigned long ino = 0;
	char line[512], name[256];
	struct ibv_mr *mr;
	FILE *f;
	int fd, found = 0, err;

	f = fopen("/proc/self/maps", "re");
	if (!f)
		return 1;
	while (fgets(line, sizeof(line), f)) {
		name[0] = 0;
		if (sscanf(line, "%lx-%lx %*s %llx %*s %lu %255s", &s, &e,
			   &pgoff, &ino, name) < 4)
			continue;
		if (a >= s && a < e) {
			found = a + len <= e && !strncmp(name, "/dmabuf:", 8);
			break;
		}
	}
	fclose(f);
	if (!found)
		return 1;
	fd = rx_fd_of_inode(ino);
	if (fd < 0)
		return rx_fail(rx, HCOMM_ERR_INVAL, 0, "hcomm_win_create: "
			       "%zu bytes at %p are a dma-buf mapping (%s) "
			       "whose file descriptor is closed: keep it open "
			       "while the window exists", len, base, name);
	mr = ibv_reg_dmabuf_mr(rx->pd, pgoff * 4096 + (a - s), len, a, fd,
			       RX_WIN_ACCESS);
	err = errno;
	if (!mr) {
		if (err == EOPNOTSUPP || err == ENOSYS ||
		    err == EPROTONOSUPPORT)
			return rx_fail(rx, HCOMM_ERR_NOTSUP, err,
				       "hcomm_win_create: %zu bytes at %p are "
				       "a dma-buf (%s) and device %s cannot "
				       "register dma-bufs (rxe cannot; use "
				       "host memory)", len, base, name,
				       rx->dev);
		return rx_fail(rx, rx_reg_code(err), err, "hcomm_win_create: "
			       "ibv_reg_dmabuf_mr of %zu bytes at %p (%s)",
			       len, base, name);
	}
	rw->mr = mr;
	rw->dmabuf = 1;
	return 0;
}

static int rx_win_create(struct hcomm_comm *c, struct hcomm_win *w,
			 void *base, size_t len, struct hcomm_win_peer *self)
{
	struct rx *rx = rx_of(c);
	struct rx_win *rw;
	int ret, err;

	memset(self, 0, sizeof(*self));
	self->addr = (uintptr_t)base;
	w->xps[HCOMM_XP_RDMA] = NULL;
	if (!len)
		return 0;
	rw = calloc(1, sizeof(*rw));
	if (!rw)
		return rx_fail(rx, HCOMM_ERR_NOMEM, ENOMEM, "hcomm_win_create");
	rw->mr = ibv_reg_mr(rx->pd, base, len, RX_WIN_ACCESS);
	if (!rw->mr) {
		err = errno;
		ret = 1;
		if (err == EFAULT || err == EINVAL || err == EPERM)
			ret = rx_win_dmabuf(rx, rw, base, len);
		if (ret == 1)
			ret = rx_fail(rx, rx_reg_code(err), err,
				      "hcomm_win_create: ibv_reg_mr of %zu "
				      "bytes at %p", len, base);
		if (ret) {
			free(rw);
			return ret;
		}
	}
	self->key = rw->mr->rkey;
	self->len = len;
	w->xps[HCOMM_XP_RDMA] = rw;
	return 0;
}

static int rx_win_free(struct hcomm_comm *c, struct hcomm_win *w)
{
	struct rx *rx = rx_of(c);
	struct rx_win *rw = w->xps[HCOMM_XP_RDMA];
	int err;

	if (!rw)
		return 0;
	err = ibv_dereg_mr(rw->mr);
	w->xps[HCOMM_XP_RDMA] = NULL;
	free(rw);
	if (err)
		return rx_fail(rx, rx_code(err), err, "hcomm_win_free: "
			       "ibv_dereg_mr");
	return 0;
}

/* ------------------------------------------------------------------ */
/* connections                                                         */
/* ------------------------------------------------------------------ */

static const char *rx_rej_str(uint32_t code)
{
	switch (code) {
	case RX_REJ_FORMAT:
		return "not an hcomm connection of this version";
	case RX_REJ_JOB:
		return "another job (job nonce or world size differs)";
	case RX_REJ_RANK:
		return "rank or lane not expected there";
	case RX_REJ_LATE:
		return "the communicator is set up (no reconnection)";
	case RX_REJ_LOCAL:
		return "the acceptor could not set its QP up";
	default:
		return "rejected";
	}
}

static void rx_hello_fill(const struct rx *rx, struct rx_hello *h, int to,
			  unsigned int lane, uint32_t code)
{
	memset(h, 0, sizeof(*h));
	h->magic = RX_MAGIC;
	h->version = RX_VERSION;
	h->lane = (uint16_t)lane;
	h->nonce = rx->nonce;
	h->rank = rx->c->rank;
	h->size = rx->c->size;
	h->to = to;
	h->code = code;
}

static void rx_conn_param(const struct rx *rx, struct rdma_conn_param *cp,
			  const struct rx_hello *h)
{
	memset(cp, 0, sizeof(*cp));
	cp->private_data = h;
	cp->private_data_len = sizeof(*h);
	cp->responder_resources = rx->rd_atom;
	cp->initiator_depth = rx->rd_atom;
	cp->retry_count = rx->retry_cnt;
	cp->rnr_retry_count = RX_RNR_RETRY;
}

/*
 * The QP's ack timeout (rdma_cm would pick one from the path, 17 on
 * RoCE: 0.54 s per try).  An old kernel without the option keeps that.
 */
static void rx_set_timeout(const struct rx *rx, struct rdma_cm_id *id)
{
	uint8_t t = rx->ack_timeout;

	(void)rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
			      &t, sizeof(t));
}

/* Setup: a failure that retrying cannot fix; the connect loop ends. */
static __attribute__((format(printf, 3, 4)))
void rx_setup_fail(struct rx *rx, int code, const char *fmt, ...)
{
	va_list ap;

	if (rx->setup_err)
		return;
	va_start(ap, fmt);
	vsnprintf(rx->setup_why, sizeof(rx->setup_why), fmt, ap);
	va_end(ap);
	rx->setup_err = code;
}

/* Setup: remember the last transient failure for the timeout message. */
static __attribute__((format(printf, 2, 3)))
void rx_setup_note(struct rx *rx, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rx->setup_why, sizeof(rx->setup_why), fmt, ap);
	va_end(ap);
}

/* cm loop; k's events acked.  Destroy k's QP and id. */
static void rx_conn_drop(struct rx *rx, struct rx_conn *k)
{
	if (k->state == CONN_UP)
		rx->nup--;
	if (k->qp)
		rdma_destroy_qp(k->id);
	k->qp = NULL;
	if (k->id)
		rdma_destroy_id(k->id);
	k->id = NULL;
	k->state = CONN_IDLE;
}

/* cm loop.  Drop k and connect again after a growing, jittered delay. */
static void rx_conn_retry(struct rx *rx, struct rx_conn *k)
{
	unsigned int sh = k->tries < 6 ? k->tries : 6;
	uint64_t ms = (uint64_t)RX_BACKOFF_MIN_MS << sh;
	uint64_t x = hcomm__now_ns() ^ ((uint64_t)rx->c->rank << 32) ^ k->lane;

	if (ms > RX_BACKOFF_MAX_MS)
		ms = RX_BACKOFF_MAX_MS;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	ms = ms / 2 + x % (ms / 2 + 1);
	k->tries++;
	rx_conn_drop(rx, k);
	k->state = CONN_BACKOFF;
	k->retry_ms = now_ms() + ms;
}

/* cm loop.  Start (again) an active connect: resolve the address. */
static void rx_conn_start(struct rx *rx, struct rx_conn *k)
{
	struct sockaddr_storage src = rx->self_sa;

	if (src.ss_family == AF_INET)
		((struct sockaddr_in *)&src)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&src)->sin6_port = 0;
	k->start_ms = now_ms();
	if (rdma_create_id(rx->ech, &k->id, k, RDMA_PS_TCP)) {
		k->id = NULL;
		rx_setup_note(rx, "rdma_create_id: %s", strerror(errno));
		rx_conn_retry(rx, k);
		return;
	}
	if (rdma_resolve_addr(k->id, (struct sockaddr *)&src,
			      (struct sockaddr *)&k->peer->sa,
			      RX_RESOLVE_MS)) {
		rx_setup_note(rx, "rdma_resolve_addr %s: %s", k->peer->where,
			      strerror(errno));
		rx_conn_retry(rx, k);
		return;
	}
	k->state = CONN_RESOLVING;
}

/* cm loop.  The RC QP of k on id: lane's send CQ, the shared SRQ. */
static int rx_qp_create(struct rx *rx, struct rx_conn *k,
			struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = rx->scq[k->lane].cq;
	a.recv_cq = rx->rcq.cq;
	a.srq = rx->srq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = rx->qd;
	a.cap.max_send_sge = 1;
	a.cap.max_inline_data = rx->max_inline;
	if (rdma_create_qp(id, rx->pd, &a))
		return -errno;
	__atomic_store_n(&k->drained, 0, __ATOMIC_RELEASE);
	k->qp = id->qp;
	return 0;
}

static int rx_qpmap_build(struct rx *rx);

/*
 * Reconnecting after a failover (cm thread): k is a new connection of a
 * failed-over peer.  Its events after setup are handled here, not as a
 * setup's (whose failures are final) nor as a live link's.
 */
static int rx_reconnecting(const struct rx_conn *k)
{
	return k->recon && __atomic_load_n(&k->peer->fo, __ATOMIC_ACQUIRE) ==
			   RX_FO_TCP;
}

/* The new connection failed: the connector tries again (backoff). */
static void rx_rec_fail(struct rx *rx, struct rx_conn *k, const char *why)
{
	if (rx->log)
		fprintf(stderr, "hcomm rdma: rank %d: reconnecting rank %d lane "
			"%u: %s after %llu ms (state %d)\n", rx->c->rank,
			k->peer->rank, k->lane, why,
			(unsigned long long)(now_ms() - k->start_ms), k->state);
	pthread_mutex_lock(&k->lock);
	/* switching back (BACK) owns the lanes now: hands off */
	if (__atomic_load_n(&k->peer->fo, __ATOMIC_ACQUIRE) != RX_FO_TCP) {
		pthread_mutex_unlock(&k->lock);
		return;
	}
	__atomic_store_n(&k->peer->rec_ready, 0, __ATOMIC_RELEASE);
	/* cheap attempts, often: the link is taken again soon after */
	if (k->tries > RX_REC_TRIES_MAX)
		k->tries = RX_REC_TRIES_MAX;
	if (k->active)
		rx_conn_retry(rx, k);
	else
		rx_conn_drop(rx, k);
	pthread_mutex_unlock(&k->lock);
}

static void rx_rec_addr(struct rx *rx, struct rx_conn *k)
{
	if (k->id->verbs != rx->verbs) {
		rx_rec_fail(rx, k, "another device");
		return;
	}
	rx_set_timeout(rx, k->id);
	if (rdma_resolve_route(k->id, RX_RESOLVE_MS))
		rx_rec_fail(rx, k, "rdma_resolve_route");
}

static void rx_rec_route(struct rx *rx, struct rx_conn *k)
{
	struct rdma_conn_param cp;
	struct rx_hello h;
	int ret;

	pthread_mutex_lock(&k->lock);
	ret = -ECANCELED;
	if (__atomic_load_n(&k->peer->fo, __ATOMIC_ACQUIRE) == RX_FO_TCP) {
		ret = rx_qp_create(rx, k, k->id);
		k->imm_posted = 0;	/* a new QP counts from 0 */
		__atomic_store_n(&k->rcvd, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&k->lock);
	if (!ret)
		ret = rx_qpmap_build(rx);
	if (ret) {
		rx_rec_fail(rx, k, "rdma_create_qp");
		return;
	}
	rx_hello_fill(rx, &h, k->peer->rank, k->lane, RX_REJ_NONE);
	rx_conn_param(rx, &cp, &h);
	k->conn_ms = now_ms();
	if (rdma_connect(k->id, &cp)) {
		rx_rec_fail(rx, k, "rdma_connect");
		return;
	}
	k->state = CONN_CONNECTING;
}

/* A new lane is up; with all of them, the failover thread switches back. */
static void rx_rec_up(struct rx *rx, struct rx_conn *k,
		      const struct rx_hello *h, size_t hl)
{
	struct rx_peer *p = k->peer;
	unsigned int l;

	if (k->active && (hl < sizeof(*h) || h->magic != RX_MAGIC ||
			  h->version != RX_VERSION || h->nonce != rx->nonce ||
			  h->rank != p->rank || h->to != rx->c->rank ||
			  h->lane != k->lane)) {
		(void)rdma_disconnect(k->id);
		rx_rec_fail(rx, k, "a foreign answer");
		return;
	}
	if (rx->log)
		fprintf(stderr, "hcomm rdma: rank %d: rank %d lane %u connected "
			"again (%llu ms)\n", rx->c->rank, p->rank, k->lane,
			(unsigned long long)(now_ms() - k->start_ms));
	k->state = CONN_UP;
	k->tries = 0;
	for (l = 0; l < rx->nlanes; l++)
		if (p->conns[l].state != CONN_UP || !p->conns[l].recon)
			return;
	__atomic_store_n(&p->rec_ready, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&rx->fo_lock);
	pthread_cond_broadcast(&rx->fo_cond);
	pthread_mutex_unlock(&rx->fo_lock);
}

/*
 * cm thread, every tick: a failed-over peer this rank connects to gets
 * new QPs (all lanes; each lane retries on its own with backoff); once
 * switched back, the lanes are ordinary again.
 */
static void rx_rec_tick(struct rx *rx, struct rx_peer *p)
{
	uint64_t now = now_ms();
	unsigned int l;
	int fo = __atomic_load_n(&p->fo, __ATOMIC_ACQUIRE);

	if (fo != RX_FO_TCP || !rx->fb_on ||
	    __atomic_load_n(&p->dead, __ATOMIC_ACQUIRE))
		return;
	if (p->rank < rx->c->rank &&
	    !__atomic_load_n(&p->rec_on, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&p->rec_on, 1, __ATOMIC_RELEASE);
		for (l = 0; l < rx->nlanes; l++) {
			struct rx_conn *k = &p->conns[l];

			pthread_mutex_lock(&k->lock);
			rx_conn_drop(rx, k);
			k->recon = 1;
			k->active = 1;
			k->tries = 0;
			pthread_mutex_unlock(&k->lock);
			rx_conn_start(rx, k);
		}
		return;
	}
	for (l = 0; l < rx->nlanes; l++) {
		struct rx_conn *k = &p->conns[l];

		/* only the lanes this rank connects (the other end waits) */
		if (!__atomic_load_n(&k->recon, __ATOMIC_ACQUIRE) || !k->active)
			continue;
		if (k->state == CONN_BACKOFF && now >= k->retry_ms)
			rx_conn_start(rx, k);
		/*
		 * A connect into a dead link waits for rdma_cm's own retries
		 * (seconds each): start over instead, so that the link is
		 * taken again soon after it returns.  Address and route
		 * resolution have their own limit (RX_RESOLVE_MS): the
		 * neighbour may need an ARP retry once the link is back.
		 */
		else if (k->state == CONN_CONNECTING &&
			 now - k->conn_ms > RX_REC_ATTEMPT_MS)
			rx_rec_fail(rx, k, "no answer to the connect");
	}
}

static void rx_on_addr(struct rx *rx, struct rx_conn *k)
{
	if (k->id->verbs != rx->verbs) {
		rx_setup_fail(rx, HCOMM_ERR_INVAL, "the route to rank %d at %s "
			      "leaves through device %s, not %s", k->peer->rank,
			      k->peer->where, k->id->verbs ?
			      ibv_get_device_name(k->id->verbs->device) : "?",
			      rx->dev);
		return;
	}
	rx_set_timeout(rx, k->id);
	if (rdma_resolve_route(k->id, RX_RESOLVE_MS)) {
		rx_setup_note(rx, "rdma_resolve_route %s: %s", k->peer->where,
			      strerror(errno));
		rx_conn_retry(rx, k);
	}
}

static void rx_on_route(struct rx *rx, struct rx_conn *k)
{
	struct rdma_conn_param cp;
	struct rx_hello h;
	int ret;

	ret = rx_qp_create(rx, k, k->id);
	if (ret) {
		rx_setup_fail(rx, rx_code(-ret), "rdma_create_qp for rank %d "
			      "lane %u (%u WRs, %u bytes inline): %s",
			      k->peer->rank, k->lane, rx->qd, rx->max_inline,
			      strerror(-ret));
		return;
	}
	rx_hello_fill(rx, &h, k->peer->rank, k->lane, RX_REJ_NONE);
	rx_conn_param(rx, &cp, &h);
	if (rdma_connect(k->id, &cp)) {
		rx_setup_note(rx, "rdma_connect %s: %s", k->peer->where,
			      strerror(errno));
		rx_conn_retry(rx, k);
		return;
	}
	k->state = CONN_CONNECTING;
}

/* The acceptor's answer must come from the rank we meant, of this job. */
static void rx_on_established(struct rx *rx, struct rx_conn *k,
			      const struct rx_hello *h, size_t hl)
{
	if (k->active && (hl < sizeof(*h) || h->magic != RX_MAGIC ||
			  h->version != RX_VERSION || h->nonce != rx->nonce ||
			  h->rank != k->peer->rank || h->to != rx->c->rank ||
			  h->lane != k->lane)) {
		(void)rdma_disconnect(k->id);
		rx_setup_fail(rx, HCOMM_ERR_IO, "%s answered lane %u as "
			      "another process (not rank %d of this job)",
			      k->peer->where, k->lane, k->peer->rank);
		return;
	}
	k->state = CONN_UP;
	k->tries = 0;
	rx->nup++;
}

static void rx_on_error(struct rx *rx, struct rx_conn *k,
			enum rdma_cm_event_type type, int status,
			const struct rx_hello *h, size_t hl)
{
	int ours = hl >= sizeof(*h) && h->magic == RX_MAGIC;

	if (!rx->setup && rx_reconnecting(k)) {
		rx_rec_fail(rx, k, rdma_event_str(type));
		return;
	}
	if (!rx->setup) {
		rx_peer_kill(rx, k->peer, ECONNRESET, "lane %u: rdma_cm %s "
			     "(status %d)", k->lane, rdma_event_str(type),
			     status);
		return;
	}
	rx_setup_note(rx, "rank %d lane %u at %s: rdma_cm %s (status %d%s%s)",
		      k->peer->rank, k->lane, k->peer->where,
		      rdma_event_str(type), status, ours ? ": " : "",
		      ours ? rx_rej_str(h->code) : "");
	if (type == RDMA_CM_EVENT_REJECTED && ours &&
	    (h->code == RX_REJ_FORMAT || h->code == RX_REJ_JOB ||
	     h->code == RX_REJ_RANK)) {
		rx_setup_fail(rx, HCOMM_ERR_IO, "rank %d at %s rejected lane "
			      "%u: %s", k->peer->rank, k->peer->where,
			      k->lane, rx_rej_str(h->code));
		return;
	}
	if (k->active)
		rx_conn_retry(rx, k);
	else
		rx_conn_drop(rx, k);	/* the connector tries again */
}

static void rx_on_disconnect(struct rx *rx, struct rx_conn *k)
{
	if (rx->setup) {
		rx_setup_note(rx, "rank %d lane %u disconnected during setup",
			      k->peer->rank, k->lane);
		if (k->active)
			rx_conn_retry(rx, k);
		else
			rx_conn_drop(rx, k);
		return;
	}
	if (rx_reconnecting(k)) {
		rx_rec_fail(rx, k, "disconnected");
		return;
	}
	if (__atomic_load_n(&k->peer->fo, __ATOMIC_ACQUIRE) != RX_FO_NONE) {
		/*
		 * Failed over: tcp is the judge of the peer's life now (an old
		 * QP's connection ends when either side drops it).
		 */
		(void)rdma_disconnect(k->id);
		return;
	}
	/*
	 * Before rdma_disconnect(), which flushes the QP: a flushed WR reaped
	 * first would report a link failure instead of the peer's exit.
	 *
	 * A DREQ comes from the peer's kernel when its process exits, and
	 * also when its RDMA device goes away (rdma link delete, a driver
	 * unbind: its kernel destroys the connection for it).  With tcp up,
	 * the link is failed over and tcp judges the peer's life: a process
	 * that is gone resets its sockets too, and the failover then ends
	 * in PEER_LOST; a peer whose device went away goes on over tcp.
	 * Without tcp to ask (or after the peer already failed without a
	 * failover: then it is news), the peer is lost.
	 */
	if (rx_fo_can(rx) && !__atomic_load_n(&k->peer->dead, __ATOMIC_ACQUIRE))
		rx_peer_fail(rx, k->peer, HCOMM_EVENT_LINK_DOWN, ECONNRESET, 0,
			     "lane %u disconnected (rdma_cm DISCONNECTED: the "
			     "peer's device went away or its process exited)",
			     k->lane);
	else
		rx_peer_fail(rx, k->peer, HCOMM_EVENT_PEER_LOST, ECONNRESET, 0,
			     "lane %u disconnected (rdma_cm DISCONNECTED: the "
			     "peer closed the connection or exited)", k->lane);
	(void)rdma_disconnect(k->id);	/* answer the DREQ */
}

/*
 * A connect request: check its hello; accept it as lane (rank, lane),
 * replacing an earlier attempt of the same lane (the connector retried),
 * or reject it saying why.  Acks ev.
 */
static void rx_on_request(struct rx *rx, struct rdma_cm_event *ev,
			  const struct rx_hello *h, size_t hl)
{
	struct rdma_cm_id *id = ev->id;
	struct rdma_conn_param cp;
	struct rx_conn *k = NULL;
	struct rx_hello r;
	uint32_t code = RX_REJ_NONE;
	int c_rank = rx->c->rank, ret;

	if (hl < sizeof(*h) || h->magic != RX_MAGIC ||
	    h->version != RX_VERSION)
		code = RX_REJ_FORMAT;
	else if (h->nonce != rx->nonce || h->size != rx->c->size)
		code = RX_REJ_JOB;
	else if (h->to != c_rank || h->rank <= c_rank ||
		 h->rank >= rx->c->size || h->lane >= rx->nlanes)
		code = RX_REJ_RANK;
	else if (!rx->setup && !(rx->fb_on &&
				 __atomic_load_n(&rx->peers[h->rank].fo,
						 __ATOMIC_ACQUIRE) == RX_FO_TCP))
		code = RX_REJ_LATE;	/* after a failover: reconnect */
	else if (id->verbs != rx->verbs)
		code = RX_REJ_LOCAL;
	if (!code) {
		k = &rx->peers[h->rank].conns[h->lane];
		pthread_mutex_lock(&k->lock);
		if (!rx->setup && __atomic_load_n(&k->peer->fo,
						  __ATOMIC_ACQUIRE) != RX_FO_TCP) {
			/* switched back meanwhile: not a lane to replace */
			pthread_mutex_unlock(&k->lock);
			k = NULL;
			code = RX_REJ_LATE;
			goto reject;
		}
		if (k->id)
			rx_conn_drop(rx, k);
		if (!rx->setup) {
			k->recon = 1;
			k->imm_posted = 0;
			__atomic_store_n(&k->rcvd, 0, __ATOMIC_RELEASE);
			__atomic_store_n(&k->peer->rec_ready, 0,
					 __ATOMIC_RELEASE);
		}
		id->context = k;
		rx_set_timeout(rx, id);
		ret = rx_qp_create(rx, k, id);
		pthread_mutex_unlock(&k->lock);
		if (!ret && !rx->setup && rx_qpmap_build(rx)) {
			rdma_destroy_qp(id);
			k->qp = NULL;
			ret = -ENOMEM;
		}
		if (ret) {
			code = RX_REJ_LOCAL;
		} else {
			rx_hello_fill(rx, &r, h->rank, h->lane, RX_REJ_NONE);
			rx_conn_param(rx, &cp, &r);
			if (rdma_accept(id, &cp)) {
				code = RX_REJ_LOCAL;
				rdma_destroy_qp(id);
				k->qp = NULL;
			} else {
				k->id = id;
				k->state = CONN_CONNECTING;
			}
		}
	}
reject:
	if (code) {
		rx_hello_fill(rx, &r, hl >= sizeof(*h) ? h->rank : -1, 0, code);
		(void)rdma_reject(id, &r, sizeof(r));
		__atomic_add_fetch(&rx->refused, 1, __ATOMIC_RELAXED);
		if (rx->setup)
			rx_setup_note(rx, "refused a connect request: %s",
				      rx_rej_str(code));
	}
	rdma_ack_cm_event(ev);
	if (code)
		rdma_destroy_id(id);
}

/* cm loop: one event (acked here). */
static void rx_cm_event(struct rx *rx, struct rdma_cm_event *ev)
{
	enum rdma_cm_event_type type = ev->event;
	struct rdma_cm_id *id = ev->id;
	struct rx_conn *k = id ? id->context : NULL;
	int status = ev->status;
	struct rx_hello h;
	size_t hl = 0;
	unsigned int r;

	memset(&h, 0, sizeof(h));
	if ((type == RDMA_CM_EVENT_CONNECT_REQUEST ||
	     type == RDMA_CM_EVENT_ESTABLISHED ||
	     type == RDMA_CM_EVENT_REJECTED) && ev->param.conn.private_data) {
		hl = ev->param.conn.private_data_len;
		memcpy(&h, ev->param.conn.private_data,
		       hl < sizeof(h) ? hl : sizeof(h));
	}
	if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		rx_on_request(rx, ev, &h, hl);
		return;
	}
	rdma_ack_cm_event(ev);
	if (type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
		if (rx->setup)
			rx_setup_fail(rx, HCOMM_ERR_NODEV, "device %s removed",
				      rx->dev);
		for (r = 0; r < (unsigned int)rx->c->size && !rx->setup; r++)
			if ((int)r != rx->c->rank)
				rx_peer_kill(rx, &rx->peers[r], ENODEV,
					     "device %s removed", rx->dev);
		return;
	}
	if (!k || k->id != id)
		return;		/* the listener's, or a replaced attempt */
	switch (type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rx->setup)
			rx_on_addr(rx, k);
		else if (rx_reconnecting(k))
			rx_rec_addr(rx, k);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (rx->setup)
			rx_on_route(rx, k);
		else if (rx_reconnecting(k))
			rx_rec_route(rx, k);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rx->setup)
			rx_on_established(rx, k, &h, hl);
		else if (rx_reconnecting(k))
			rx_rec_up(rx, k, &h, hl);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		rx_on_error(rx, k, type, status, &h, hl);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		rx_on_disconnect(rx, k);
		break;
	default:
		break;		/* TIMEWAIT_EXIT, ADDR_CHANGE ... */
	}
}

static void rx_cm_drain(struct rx *rx)
{
	struct rdma_cm_event *ev;

	while (!rdma_get_cm_event(rx->ech, &ev))
		rx_cm_event(rx, ev);
}

/*
 * Connect every lane: to each lower rank actively, from each higher rank
 * passively, until all are ESTABLISHED or cfg.timeout_ms passed.
 */
static int rx_connect_all(struct rx *rx)
{
	struct hcomm_comm *c = rx->c;
	uint64_t deadline = now_ms() + c->cfg.timeout_ms, t, wake;
	int expected = (c->size - 1) * (int)rx->nlanes, r;
	struct pollfd pfd;
	unsigned int l;

	rx->setup = 1;
	for (r = 0; r < c->rank; r++)
		for (l = 0; l < rx->nlanes; l++) {
			rx->peers[r].conns[l].active = 1;
			rx_conn_start(rx, &rx->peers[r].conns[l]);
		}
	while (rx->nup < expected && !rx->setup_err) {
		t = now_ms();
		if (t >= deadline)
			break;
		wake = deadline;
		for (r = 0; r < c->rank; r++)
			for (l = 0; l < rx->nlanes; l++) {
				struct rx_conn *k = &rx->peers[r].conns[l];

				if (k->state != CONN_BACKOFF)
					continue;
				if (k->retry_ms <= t)
					rx_conn_start(rx, k);
				if (k->state == CONN_BACKOFF &&
				    k->retry_ms < wake)
					wake = k->retry_ms;
			}
		pfd.fd = rx->ech->fd;
		pfd.events = POLLIN;
		t = now_ms();
		(void)poll(&pfd, 1, wake > t ? (int)(wake - t) : 0);
		rx_cm_drain(rx);
	}
	rx->setup = 0;
	if (rx->setup_err)
		return rx_fail(rx, rx->setup_err, 0, "connecting: %s",
			       rx->setup_why);
	if (rx->nup >= expected)
		return 0;
	for (r = 0; r < c->size; r++)
		for (l = 0; r != c->rank && l < rx->nlanes; l++)
			if (rx->peers[r].conns[l].state != CONN_UP)
				return rx_pfail(rx, &rx->peers[r],
						HCOMM_ERR_TIMEOUT, 0, "lane %u "
						"not connected within %u ms "
						"(%s; last: %s)", l,
						c->cfg.timeout_ms,
						r < c->rank ? "this rank "
						"connects" : "that rank "
						"connects", rx->setup_why[0] ?
						rx->setup_why : "nothing");
	return rx_fail(rx, HCOMM_ERR_TIMEOUT, 0, "connecting");
}

/* After setup: the sorted QP number map (none: no per-peer counts). */
static int rx_qpmap_build(struct rx *rx)
{
	size_t n = (size_t)(rx->c->size - 1) * rx->nlanes, i = 0;
	struct rx_qpmap *m, *old;
	unsigned int l;
	int r;

	m = calloc(1, sizeof(*m) + (n ? n : 1) * sizeof(m->e[0]));
	if (!m)
		return -ENOMEM;	/* a QP that is not counted must not be used */
	for (r = 0; r < rx->c->size; r++)
		for (l = 0; r != rx->c->rank && l < rx->nlanes; l++) {
			if (!rx->peers[r].conns[l].qp)
				continue;
			m->e[i].qpn = rx->peers[r].conns[l].qp->qp_num;
			m->e[i].lane = l;
			m->e[i++].peer = &rx->peers[r];
		}
	qsort(m->e, i, sizeof(m->e[0]), rx_qpn_cmp);
	m->n = i;
	old = rx->qpmap;
	__atomic_store_n(&rx->qpmap, m, __ATOMIC_RELEASE);
	/* readers look it up under rcq.reap only: once that is free, no one
	 * holds the old map */
	if (old && rx->rcq.ready) {
		pthread_mutex_lock(&rx->rcq.reap);
		pthread_mutex_unlock(&rx->rcq.reap);
	}
	while (old) {
		struct rx_qpmap *o = old;

		old = o->old;
		free(o);
	}
	return 0;
}

/* The lane a QP belongs to (async events), or NULL. */
static struct rx_conn *rx_conn_of_qp(struct rx *rx, struct ibv_qp *qp)
{
	int r;
	unsigned int l;

	for (r = 0; r < rx->c->size; r++)
		for (l = 0; r != rx->c->rank && l < rx->nlanes; l++)
			if (rx->peers[r].conns[l].qp == qp)
				return &rx->peers[r].conns[l];
	return NULL;
}

/* cm thread: the device's asynchronous events. */
static void rx_async(struct rx *rx)
{
	struct ibv_async_event e;
	struct rx_conn *k;
	int r;

	while (!ibv_get_async_event(rx->verbs, &e)) {
		switch (e.event_type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_PATH_MIG_ERR:
			k = rx_conn_of_qp(rx, e.element.qp);
			if (k)
				rx_peer_kill(rx, k->peer, EIO, "%s on lane %u "
					     "QP %#x",
					     ibv_event_type_str(e.event_type),
					     k->lane, e.element.qp->qp_num);
			break;
		case IBV_EVENT_PORT_ERR:
			__atomic_add_fetch(&rx->port_events, 1,
					   __ATOMIC_RELAXED);
			if (e.element.port_num != rx->port)
				break;
			/* no QP of ours can move a byte: every link is down */
			for (r = 0; r < rx->c->size; r++)
				if (r != rx->c->rank)
					rx_peer_kill(rx, &rx->peers[r], ENETDOWN,
						     "port %u of %s went down "
						     "(IBV_EVENT_PORT_ERR)",
						     rx->port, rx->dev);
			break;
		case IBV_EVENT_QP_LAST_WQE_REACHED:
			/*
			 * A QP of the SRQ in the error state consumes no
			 * more receives: its completions are all in the CQ
			 * (rx_fo_tell's drain).
			 */
			k = rx_conn_of_qp(rx, e.element.qp);
			if (k)
				__atomic_store_n(&k->drained, 1,
						 __ATOMIC_RELEASE);
			break;
		case IBV_EVENT_DEVICE_FATAL:
			for (r = 0; r < rx->c->size; r++)
				if (r != rx->c->rank)
					rx_peer_kill(rx, &rx->peers[r], ENODEV,
						     "device %s: fatal error",
						     rx->dev);
			break;
		default:
			break;
		}
		ibv_ack_async_event(&e);
	}
}

/* ------------------------------------------------------------------ */
/* keep-alive (cm thread)                                              */
/* ------------------------------------------------------------------ */

/*
 * Lane l's send CQ, unless someone reaps it now (then they see the
 * progress): move its CQEs into the stash (the next reaper finishes
 * them, in order), note each QP's progress, finish the keep-alive probes
 * at the head of the stash (no request waits for them, and nobody else
 * might come), and fail the peers whose WRs completed in error.
 */
static void rx_ka_lane(struct rx *rx, unsigned int l, uint64_t now)
{
	struct rx_cq *q = &rx->scq[l];
	struct rx_peer *bad[RX_REAP_BATCH];
	int status[RX_REAP_BATCH];
	unsigned int i, nbad = 0;
	int n;

	if (!__atomic_load_n(&q->posted, __ATOMIC_ACQUIRE) ||
	    pthread_mutex_trylock(&q->reap))
		return;
	n = ibv_poll_cq(q->cq, (int)(RX_REAP_BATCH - q->nstash),
			q->stash + q->nstash);
	for (i = q->nstash; n > 0 && i < q->nstash + (unsigned int)n; i++) {
		struct rx_wr *w = (struct rx_wr *)(uintptr_t)q->stash[i].wr_id;

		rx_ka_note(w->conn, w, now);
		if (q->stash[i].status != IBV_WC_SUCCESS) {
			status[nbad] = q->stash[i].status;
			bad[nbad++] = w->conn->peer;
		}
	}
	if (n > 0)
		__atomic_store_n(&q->nstash, q->nstash + (unsigned int)n,
				 __ATOMIC_RELAXED);
	/* the probes at the head: retired here, as a reaper would */
	for (i = 0; i < q->nstash; i++) {
		struct rx_wr *w = (struct rx_wr *)(uintptr_t)q->stash[i].wr_id;

		if (w->req)
			break;
		rx_slot_retire(rx, w);
	}
	if (i) {
		__atomic_sub_fetch(&q->posted, i, __ATOMIC_RELEASE);
		memmove(q->stash, q->stash + i,
			(q->nstash - i) * sizeof(q->stash[0]));
		__atomic_store_n(&q->nstash, q->nstash - i, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&q->reap);
	for (i = 0; i < nbad; i++)
		rx_peer_kill(rx, bad[i], rx_wc_errno(status[i]),
			     "%s on lane %u (seen by the keep-alive)",
			     ibv_wc_status_str(status[i]), l);
}

/* Post a zero-length RDMA WRITE on p's lane 0 (no request: a probe). */
static void rx_ka_probe(struct rx *rx, struct rx_peer *p)
{
	struct rx_conn *k = &p->conns[0];
	struct rx_chain ch;
	struct rx_spec sp;

	ch.n = 0;
	ch.nundo = 0;
	memset(&sp, 0, sizeof(sp));
	sp.op = HCOMM_OP_PUT;
	sp.opcode = IBV_WR_RDMA_WRITE;
	sp.mode = RX_M_NOP;
	pthread_mutex_lock(&k->lock);
	if (!__atomic_load_n(&p->dead, __ATOMIC_ACQUIRE) &&
	    __atomic_load_n(&p->fo, __ATOMIC_ACQUIRE) == RX_FO_NONE &&
	    rx_room(rx, k, 1, 0) && rx_emit(rx, k, &ch, &sp)) {
		rx_chain_post(rx, k, &ch);
		__atomic_add_fetch(&rx->probes, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&k->lock);
	rx_chain_undo(rx, k, &ch);
}

/*
 * Every ka_interval: a lane with WRs in flight whose last CQE (or the
 * moment it became busy, if later) is more than ka_timeout of keep-alive
 * time ago fails its peer (LINK_DOWN, ETIMEDOUT: its QPs are flushed, so
 * the hardware's own retries never hold the link longer); a peer with
 * nothing in flight for ka_interval gets a probe, which makes its lane 0
 * busy.
 *
 * The verdict is by the time this thread watched: a round that comes
 * more than two intervals after the one before (this process, or the
 * machine under it, stood still: a host that descheduled its VM) counts
 * as two intervals (a quarter of ka_timeout at most, one interval at
 * least), not as silence of the link.  The acknowledgements that answer
 * a stall are still in flight, or in the NIC's queue, when the thread
 * runs again; a dead link still fails after ka_timeout of watched time.
 * The event reports the wall-clock silence.
 */
static void rx_keepalive(struct rx *rx)
{
	uint64_t now = hcomm__now_ns();
	uint64_t credit = 0, cap = 2 * rx->ka_interval_ns;
	unsigned int l;
	int r, probing;

	if (cap > rx->ka_timeout_ns / 4)
		cap = rx->ka_timeout_ns / 4;
	if (cap < rx->ka_interval_ns)
		cap = rx->ka_interval_ns;
	if (rx->ka_prev_ns && now > rx->ka_prev_ns) {
		credit = now - rx->ka_prev_ns;
		if (credit > 2 * rx->ka_interval_ns)
			__atomic_add_fetch(&rx->ka_stalls, 1,
					   __ATOMIC_RELAXED);
		if (credit > cap)
			credit = cap;
	}
	rx->ka_prev_ns = now;

	(void)rx_reap_recv(rx);	/* the SRQ refilled: no RNR for peers */
	/*
	 * hcomm_comm_probe() floods each link on purpose and watches it:
	 * no verdicts and no probes meanwhile.  (On the test bed's 2 Mbit/s
	 * RoCE an idle rank's probe waited 0.5 s for its ack behind the
	 * other rank's data, past the QP's 1.07 s of retries.)
	 */
	probing = __atomic_load_n(&rx->c->probing, __ATOMIC_RELAXED);
	/*
	 * Nor before init returned: the failover window does not exist
	 * yet, and a slow start (a loaded machine) is no dead link.
	 */
	if (!__atomic_load_n(&rx->c->ready, __ATOMIC_ACQUIRE))
		probing = 1;
	for (l = 0; l < rx->nlanes; l++)
		rx_ka_lane(rx, l, now);
	for (r = 0; r < rx->c->size; r++) {
		struct rx_peer *p = &rx->peers[r];
		uint64_t last = 0, silent = 0, limit = rx->ka_timeout_ns, in;
		uint64_t wall = 0;
		uint64_t sum = 0;
		unsigned int bl = 0;
		int busy = 0, hold;

		if (r == rx->c->rank ||
		    __atomic_load_n(&p->dead, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&p->fo, __ATOMIC_ACQUIRE) != RX_FO_NONE)
			continue;
		for (l = 0; l < rx->nlanes; l++) {
			struct rx_conn *k = &p->conns[l];
			uint64_t since, t;
			bool out;

			if (!k->qp)
				continue;
			/*
			 * A full stash: the application reaps nothing and the
			 * CQ may hold more than was seen: no verdict.
			 */
			if (__atomic_load_n(&rx->scq[l].nstash,
					    __ATOMIC_RELAXED) == RX_REAP_BATCH) {
				busy = 1;
				continue;
			}
			out = rx_lane_since(k, &since);
			if (since > last)
				last = since;
			if (!out) {
				k->ka_silent = 0;
				continue;
			}
			busy = 1;
			if (since != k->ka_since) {	/* new progress */
				k->ka_since = since;
				k->ka_silent = now > since ? now - since : 0;
				if (k->ka_silent > credit)
					k->ka_silent = credit;
			} else {
				k->ka_silent += credit;
			}
			if (k->ka_silent > silent) {
				silent = k->ka_silent;
				wall = now > since ? now - since : 0;
				bl = l;
				/* a slow link: 4 of its usual gaps */
				t = 4 * __atomic_load_n(&k->gap_ns,
							__ATOMIC_RELAXED);
				limit = t > rx->ka_timeout_ns ? t :
					rx->ka_timeout_ns;
			}
		}
		/*
		 * The peer's writes still land here (with failover on each
		 * carries an immediate): the link carries traffic, and our
		 * WRs wait on a peer too busy to answer them (on one
		 * emulated CPU the ack of an idle rank's probe, queued
		 * behind the peer's own stream, came after 50 ms).  No
		 * verdict then, for up to 4 limits: a link dead in our
		 * direction alone stalls the peer's WRs, and the peer's
		 * keep-alive fails it over for both of us.
		 */
		for (l = 0; l < rx->nlanes; l++)
			sum += __atomic_load_n(&p->conns[l].rcvd,
					       __ATOMIC_RELAXED);
		/* grown: a write landed; new QPs count from 0 again */
		if (sum > p->in_sum)
			p->in_ns = now;
		p->in_sum = sum;
		in = p->in_ns;
		hold = in && now - in <= limit && silent <= 4 * limit;
		if (busy && silent > limit && !probing && !hold) {
			__atomic_add_fetch(&rx->ka_fails, 1, __ATOMIC_RELAXED);
			rx_peer_fail(rx, p, HCOMM_EVENT_LINK_DOWN, ETIMEDOUT,
				     wall, "keep-alive: lane %u made no "
				     "progress for %llu ms, %llu of them "
				     "watched (limit %llu ms: "
				     "HCOMM_KEEPALIVE_TIMEOUT=%llu, or 4 "
				     "times its usual gap; the peer's last "
				     "write landed %s%lld ms ago)", bl,
				     (unsigned long long)(wall / 1000000),
				     (unsigned long long)(silent / 1000000),
				     (unsigned long long)(limit / 1000000),
				     (unsigned long long)(rx->ka_timeout_ns /
							  1000000),
				     in ? "" : "never: ",
				     in ? (long long)(now - in) / 1000000 : 0);
		} else if (!busy && !probing && last < now &&
			   now - last >= rx->ka_interval_ns) {
			rx_ka_probe(rx, p);
		}
	}
}

/* ------------------------------------------------------------------ */
/* failover (Documentation/failover.rst)                               */
/* ------------------------------------------------------------------ */

static __thread int t_rx_fo;		/* 1 on the failover thread */

/*
 * A WR of p that completed in error (or was never posted): parked for
 * p's failover while it collects, else the part fails.
 */
static void rx_wr_failed(struct rx *rx, struct rx_peer *p,
			 const struct rx_done *d)
{
	struct rx_done *nl;
	int err = d->err ? d->err : EIO;

	if (__atomic_load_n(&p->fo, __ATOMIC_ACQUIRE) == RX_FO_ACTIVE) {
		pthread_mutex_lock(&p->fo_lock);
		if (p->fo == RX_FO_ACTIVE &&
		    !__atomic_load_n(&p->dead, __ATOMIC_ACQUIRE)) {
			if (p->fo_n == p->fo_cap) {
				size_t cap = p->fo_cap ? 2 * p->fo_cap : 256;

				nl = realloc(p->fo_list, cap * sizeof(*nl));
				if (nl) {
					p->fo_list = nl;
					p->fo_cap = cap;
				}
			}
			if (p->fo_n < p->fo_cap) {
				p->fo_list[p->fo_n++] = *d;
				pthread_mutex_unlock(&p->fo_lock);
				return;
			}
			err = ENOMEM;
		}
		pthread_mutex_unlock(&p->fo_lock);
	}
	rx_part_done(rx, p, d->req, err, 0, d);
}

/*
 * The peer's state once no failover or switch-back of it is in progress
 * (issuers wait here, progressing tcp, so that nothing overtakes the
 * replay or the tcp operations before the switch-back): RX_FO_NONE, or
 * RX_FO_TCP with a forwarding token taken (give it back with
 * rx_fwd_put() once the tcp post returned), or -1 when the peer failed.
 * The failover thread itself does not wait (its callbacks may issue):
 * it gets ACTIVE or BACK, no token, and forwards at once.  With nowait
 * (the caller holds tokens: waiting could deadlock a switch-back that
 * waits for them) RX_FO_WAIT instead of waiting.
 */
static int rx_fo_settle(struct rx *rx, struct rx_peer *p, int nowait)
{
	const struct hcomm_xport_ops *t = rx->c->xo[HCOMM_XP_TCP];
	int fo;

	for (;;) {
		if (__atomic_load_n(&p->dead, __ATOMIC_ACQUIRE))
			return -1;
		fo = __atomic_load_n(&p->fo, __ATOMIC_SEQ_CST);
		if (fo == RX_FO_NONE)
			return fo;
		if (fo == RX_FO_TCP) {
			/* Dekker with rx_fo_back: token, then re-read */
			__atomic_add_fetch(&p->fwd, 1, __ATOMIC_SEQ_CST);
			if (__atomic_load_n(&p->fo, __ATOMIC_SEQ_CST) ==
			    RX_FO_TCP)
				return fo;
			__atomic_sub_fetch(&p->fwd, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		if (t_rx_fo)
			return fo;
		if (nowait)
			return RX_FO_WAIT;
		if (!t || !t->progress(rx->c))
			usleep(200);
	}
}

static void rx_fwd_put(struct rx_peer *p)
{
	__atomic_sub_fetch(&p->fwd, 1, __ATOMIC_SEQ_CST);
}

/*
 * A replayed part over tcp: units parts of parent (as rx_part_done
 * counts them) complete with its status.  @d keeps what the parent's
 * last stripe needs to post a striped put_signal's signal.
 */
struct rx_kid {
	struct hcomm_request req;
	struct rx *rx;
	struct rx_peer *p;
	struct hcomm_request *parent;
	struct rx_done d;
	unsigned int units;
};

static void rx_kid_done(struct hcomm_request *req, void *arg)
{
	struct rx_kid *kid = arg;
	struct rx_peer *p = kid->p;
	int err = hcomm__req_priv(req)->err;
	uint64_t bytes = req->bytes;
	unsigned int u;

	if (!err && req->status)
		err = EIO;
	for (u = 0; u < kid->units; u++)
		rx_part_done(kid->rx, p, kid->parent, err, u ? 0 : bytes,
			     &kid->d);
	__atomic_sub_fetch(&p->fo_kids, 1, __ATOMIC_ACQ_REL);
	free(kid);
}

/*
 * Replay d (a part of d->req standing for units of its parts) to p over
 * tcp: a get, a put, or a put_signal (a piece's value, or with sigimm 2
 * the whole value).  Fails the parts when that is impossible.
 */
static void rx_replay(struct rx *rx, struct rx_peer *p,
		      const struct rx_done *d, unsigned int units)
{
	struct hcomm_comm *c = rx->c;
	const struct hcomm_win_peer *wp;
	struct hcomm_xfer_desc x;
	struct rx_kid *kid;
	unsigned int u, piece;
	int err = rx_peer_dead(p);

	kid = err ? NULL : calloc(1, sizeof(*kid));
	if (!kid) {
		for (u = 0; u < units; u++)
			rx_part_done(rx, p, d->req, err ? err : ENOMEM, 0, d);
		return;
	}
	wp = &d->win->peers[p->rank].x[HCOMM_XP_RDMA];
	memset(&x, 0, sizeof(x));
	x.target = p->rank;
	x.target_off = d->raddr - wp->addr;
	x.local = d->laddr;
	x.len = d->len;
	if (d->opcode == IBV_WR_RDMA_READ) {
		x.op = HCOMM_OP_GET;
	} else if (d->sigimm) {
		x.op = HCOMM_OP_PUT_SIGNAL;
		x.sig = d->sig;
		piece = d->imm >> 30;
		x.value = d->sigimm == 2 ? d->value :
			  (uint64_t)(d->imm & ((1u << RX_MANT_BITS) - 1)) <<
			  (piece * RX_MANT_BITS);
	} else {
		x.op = HCOMM_OP_PUT;
	}
	kid->rx = rx;
	kid->p = p;
	kid->parent = d->req;
	kid->d = *d;
	kid->units = units;
	kid->req.cb = rx_kid_done;
	kid->req.cb_arg = kid;
	__atomic_add_fetch(&p->fo_kids, 1, __ATOMIC_ACQ_REL);
	__atomic_add_fetch(&rx->fo_replayed, 1, __ATOMIC_RELAXED);
	if (hcomm__post_internal(c, d->win, HCOMM_XP_TCP, &x, &kid->req)) {
		err = hcomm_errno() ? hcomm_errno() : EIO;
		__atomic_sub_fetch(&p->fo_kids, 1, __ATOMIC_ACQ_REL);
		free(kid);
		for (u = 0; u < units; u++)
			rx_part_done(rx, p, d->req, err, 0, d);
	}
}

/* A WR that was planned but not posted (the peer began to fail over). */
static void rx_replay_spec(struct rx *rx, struct rx_peer *p,
			   const struct rx_spec *s)
{
	struct rx_done d;

	memset(&d, 0, sizeof(d));
	d.req = s->req;
	d.peer = p;
	d.win = s->win;
	d.raddr = s->raddr;
	d.laddr = s->laddr;
	d.value = s->value;
	d.peer_seq = s->peer_seq;
	d.rkey = s->rkey;
	d.sig = s->sig;
	d.len = s->len;
	d.imm = s->imm;
	d.op = s->op;
	d.opcode = s->opcode;
	d.defer = s->defer;
	d.payload = s->len > 0;
	d.sigimm = s->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	rx_replay(rx, p, &d, 1);
}

static void rx_flag_done(struct hcomm_request *req, void *arg)
{
	struct rx_flag *f = arg;
	int err = hcomm__req_priv(req)->err;

	f->err = err ? err : req->status ? EIO : 0;
	__atomic_store_n(&f->done, 1, __ATOMIC_RELEASE);
}

/*
 * Put len bytes at src to offset off of p's failover window (f: set when
 * it landed; src must stay until then).  0, or the errno of a put that
 * was not issued (then f is done with it).
 */
static int rx_fo_put(struct rx *rx, struct rx_peer *p, uint64_t off,
		     const void *src, size_t len, struct rx_flag *f)
{
	struct hcomm_comm *c = rx->c;
	struct hcomm_xfer_desc x;

	memset(&x, 0, sizeof(x));
	x.op = HCOMM_OP_PUT;
	x.target = p->rank;
	x.target_off = off;
	x.local = (uintptr_t)src;
	x.len = len;
	memset(f, 0, sizeof(*f));
	f->req.cb = rx_flag_done;
	f->req.cb_arg = f;
	if (hcomm__post_internal(c, c->fo_win, HCOMM_XP_TCP, &x, &f->req)) {
		f->err = hcomm_errno() ? hcomm_errno() : EIO;
		f->done = 1;
		return f->err;
	}
	return 0;	/* f is the callback's until done */
}

/* Wait until f landed (or failed): its errno. */
static int rx_flag_wait(struct rx *rx, struct rx_flag *f)
{
	const struct hcomm_xport_ops *t = rx->c->xo[HCOMM_XP_TCP];

	while (!__atomic_load_n(&f->done, __ATOMIC_ACQUIRE))
		if (!t->progress(rx->c))
			(void)t->block(rx->c, &f->req, 1000);
	return f->err;
}

/* Parked WRs in the order they were issued (peer_seq, then the QP's). */
static int rx_done_cmp(const void *a, const void *b)
{
	const struct rx_done *x = a, *y = b;

	if (x->peer_seq != y->peer_seq)
		return x->peer_seq < y->peer_seq ? -1 : 1;
	if (x->lane != y->lane)
		return x->lane < y->lane ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Take p's parked WRs (*n of them; free the list). */
static struct rx_done *rx_fo_take(struct rx_peer *p, size_t *n)
{
	struct rx_done *l;

	pthread_mutex_lock(&p->fo_lock);
	l = p->fo_list;
	*n = p->fo_n;
	p->fo_list = NULL;
	p->fo_n = p->fo_cap = 0;
	pthread_mutex_unlock(&p->fo_lock);
	return l;
}

/*
 * The failover gave up (the peer is gone, tcp failed, or destroy began):
 * the peer fails like a lost one, and every parked WR fails.
 */
static void rx_fo_abort(struct rx *rx, struct rx_peer *p, int err,
			const char *what)
{
	struct rx_done *l;
	char link[sizeof(p->why)];
	size_t n, i;

	snprintf(link, sizeof(link), "%s", p->why);
	rx_peer_fail(rx, p, HCOMM_EVENT_PEER_LOST, err, 0, "failover to tcp "
		     "failed: %s: %s (the link: %s)", what, strerror(err),
		     link);
	l = rx_fo_take(p, &n);
	for (i = 0; i < n; i++)
		rx_part_done(rx, p, l[i].req, err, 0, &l[i]);
	free(l);
	(void)rx_fo_told(rx, p);	/* step 4's puts end before this */
}

/* 0, or why p's failover cannot go on (the peer failed, tcp lost it). */
static int rx_fo_broken(struct rx *rx, struct rx_peer *p)
{
	int err = rx_peer_dead(p);

	return err ? err : hcomm__tcp_peer_err(rx->c, p->rank);
}

/*
 * The first half of p's failover (the failover thread):
 *  1. no poster is on p's lanes any more (each lane's lock taken once
 *     after fo became ACTIVE: later posters see it and wait), and the
 *     posts refused meanwhile are parked;
 *  2. every WR of p completed (the QPs are in the error state: flushed)
 *     and whoever reaped it has parked it;
 *  3. the receive CQ is drained once every QP of p reported its last
 *     receive (IBV_EVENT_QP_LAST_WQE_REACHED), or, without that event,
 *     until p's counts stay still for RX_FO_SETTLE_NS: rcvd[] is every
 *     write of p applied here;
 *  4. rcvd[] goes to p's failover window over tcp, then the epoch (in
 *     that order, on one connection; not waited for here).
 * 0, or an errno (then the failover is aborted).
 */
static int rx_fo_tell(struct rx *rx, struct rx_peer *p, const char **what)
{
	struct hcomm_comm *c = rx->c;
	uint64_t quiet, sum, last;
	unsigned int li;
	int err, busy, drained;

	p->fo_ts[0] = hcomm__now_ns();
	/* 1 */
	for (li = 0; li < rx->nlanes; li++) {
		pthread_mutex_lock(&p->conns[li].lock);
		pthread_mutex_unlock(&p->conns[li].lock);
	}
	/* 1, 2 */
	*what = "collecting the QPs' work requests";
	do {
		busy = !!__atomic_load_n(&p->fo_undo, __ATOMIC_ACQUIRE);
		for (li = 0; li < rx->nlanes; li++) {
			struct rx_conn *k = &p->conns[li];
			int empty;

			/*
			 * The ring first, then finishing: a reaper counts
			 * its WRs in finishing before it retires their
			 * slots, so an empty ring read here shows them there.
			 */
			empty = __atomic_load_n(&k->tail, __ATOMIC_SEQ_CST) ==
				__atomic_load_n(&k->head, __ATOMIC_SEQ_CST);
			if (__atomic_load_n(&rx->scq[li].finishing,
					    __ATOMIC_SEQ_CST))
				busy = 1;
			if (empty)
				continue;
			busy = 1;
			if (!rx_reap_lane_once(rx, li, 1))
				(void)rx_block_lane(rx, li, 1000);
		}
		err = rx_peer_dead(p);
		if (!err && busy && hcomm__now_ns() > p->fo_deadline)
			err = ETIMEDOUT;
		if (err)
			return err;
		if (busy)
			sched_yield();
	} while (busy);
	/* 3 */
	p->fo_ts[1] = hcomm__now_ns();
	*what = "draining the receive queue";
	quiet = p->fo_ts[1];
	last = ~0ULL;
	p->fo_drain_ev = 0;
	for (;;) {
		/*
		 * Every QP of p reported its last receive (the event
		 * comes after its completions reached the CQ): one more
		 * reap and the counts are final.  A provider without the
		 * event: until the counts stay still for a while.
		 */
		for (li = 0, drained = 1; li < rx->nlanes; li++)
			if (p->conns[li].qp &&
			    !__atomic_load_n(&p->conns[li].drained,
					     __ATOMIC_ACQUIRE))
				drained = 0;
		rx_reap_recv_all(rx);
		if (drained) {
			p->fo_drain_ev = 1;
			break;
		}
		for (li = 0, sum = 0; li < rx->nlanes; li++)
			sum += __atomic_load_n(&p->conns[li].rcvd,
					       __ATOMIC_ACQUIRE);
		if (sum != last) {
			last = sum;
			quiet = hcomm__now_ns();
		} else if (hcomm__now_ns() - quiet >= RX_FO_SETTLE_NS) {
			break;
		}
		if (hcomm__now_ns() > p->fo_deadline)
			return ETIMEDOUT;
		usleep(200);
	}
	memset(p->fo_told, 0, sizeof(p->fo_told));
	for (li = 0; li < rx->nlanes; li++)
		p->fo_told[li] = __atomic_load_n(&p->conns[li].rcvd,
						 __ATOMIC_ACQUIRE);
	p->fo_told_epoch = p->fo_epoch;
	/*
	 * 4: the counts, then the epoch, without waiting in between: tcp
	 * applies the internal operations to p in the order they were
	 * posted (one connection), so p sees the counts once it sees the
	 * epoch.  Nor does step 5 wait for them to land: nothing of ours
	 * depends on it, and our replay, posted later on that connection,
	 * lands after them.  rx_fo_told() waits before the failover ends.
	 */
	p->fo_ts[2] = hcomm__now_ns();
	*what = "telling the peer what landed";
	err = rx_fo_broken(rx, p);
	if (err)
		return err;
	err = rx_fo_put(rx, p, (uint64_t)c->rank * HCOMM_FO_SLOT, p->fo_told,
			rx->nlanes * sizeof(p->fo_told[0]), &p->fo_fc);
	if (!err)
		err = rx_fo_put(rx, p, (uint64_t)c->rank * HCOMM_FO_SLOT +
				HCOMM_FO_EPOCH, &p->fo_told_epoch,
				sizeof(p->fo_told_epoch), &p->fo_fe);
	p->fo_ts[3] = hcomm__now_ns();
	return err;
}

/*
 * Wait until the puts of step 4 landed (or failed): 0 or the errno.
 * Their flags and sources are p's, so every failover waits here before
 * it ends (or the next one reuses them).
 */
static int rx_fo_told(struct rx *rx, struct rx_peer *p)
{
	int err = rx_flag_wait(rx, &p->fo_fc);

	if (rx_flag_wait(rx, &p->fo_fe) && !err)
		err = p->fo_fe.err;
	return err;
}

/* p's slot of this rank's failover window: word i (acquire). */
static uint64_t rx_fo_slot(const struct rx *rx, const struct rx_peer *p,
			   unsigned int i)
{
	const uint64_t *slot = (const uint64_t *)(const void *)
		((const char *)rx->c->fo_mem +
		 (size_t)p->rank * HCOMM_FO_SLOT);

	return __atomic_load_n(&slot[i], __ATOMIC_ACQUIRE);
}

/* Has p told this rank what landed there (step 5)? */
static int rx_fo_heard(const struct rx *rx, const struct rx_peer *p)
{
	return rx_fo_slot(rx, p, HCOMM_FO_LANES) >= p->fo_epoch;
}

/* Does [a, a + la) overlap [b, b + lb)? */
static int rx_overlap(uint64_t a, uint64_t la, uint64_t b, uint64_t lb)
{
	return la && lb && a < b + lb && b < a + la;
}

/* Wait for p's replays in flight over tcp (0, or why they cannot end). */
static int rx_fo_kids_wait(struct rx *rx, struct rx_peer *p)
{
	const struct hcomm_xport_ops *t = rx->c->xo[HCOMM_XP_TCP];
	int err;

	while (__atomic_load_n(&p->fo_kids, __ATOMIC_ACQUIRE)) {
		err = rx_fo_broken(rx, p);
		if (err)
			return err;
		if (!t->progress(rx->c))
			usleep(100);
	}
	return 0;
}

/*
 * The second half (p told us what landed there):
 *  6. a parked write that p counted is complete; everything else is
 *     replayed over tcp in issue order, without waiting in between: tcp
 *     applies the puts and signals of internal operations to p in the
 *     order they were posted (one connection, unstriped), so a write
 *     that overlaps an earlier one, or a signal piece, lands after it; a
 *     get's reply reads the window only when it is sent, so a write over
 *     an earlier replayed read waits for it; then the replay has landed;
 *  7. p's operations go to tcp from now on (forwarded by rx_post: any
 *     lane, hence only after the replay has landed).
 */
static int rx_fo_finish(struct rx *rx, struct rx_peer *p)
{
	struct hcomm_comm *c = rx->c;
	struct {
		uint64_t addr, len;
	} rd[RX_FO_READS];		/* reads replayed since the last wait */
	struct rx_done *l;
	uint64_t t0;
	size_t n, i, j, nrd = 0, replayed = 0, total = 0;
	int err = 0;

	p->fo_ts[4] = hcomm__now_ns();
	for (;;) {
		l = rx_fo_take(p, &n);
		if (!n) {
			free(l);
			/* the replay lands before p's operations go to tcp */
			err = err ? err : rx_fo_kids_wait(rx, p);
			nrd = 0;
			if (err)
				break;
			/* nothing can be parked after this (steps 1-2) */
			pthread_mutex_lock(&p->fo_lock);
			if (!p->fo_n) {
				__atomic_store_n(&p->fo, RX_FO_TCP,
						 __ATOMIC_SEQ_CST);
				pthread_mutex_unlock(&p->fo_lock);
				break;
			}
			pthread_mutex_unlock(&p->fo_lock);
			continue;
		}
		total += n;
		qsort(l, n, sizeof(*l), rx_done_cmp);
		for (i = 0; i < n; i++) {
			struct rx_done *d = &l[i];

			if (d->imm_ord && d->imm_ord <= rx_fo_slot(rx, p,
								  d->lane)) {
				__atomic_add_fetch(&rx->fo_applied, 1,
						   __ATOMIC_RELAXED);
				if (d->payload)
					__atomic_add_fetch(&p->st.tx_bytes,
							   d->len,
							   __ATOMIC_RELAXED);
				rx_part_done(rx, p, d->req, 0,
					     d->payload ? d->len : 0, d);
				continue;
			}
			/*
			 * A get's reply reads the window when tcp sends it,
			 * so a write over the bytes of an earlier replayed
			 * read waits for that read first.
			 */
			for (j = 0; j < nrd; j++)
				if (d->opcode != IBV_WR_RDMA_READ &&
				    rx_overlap(d->raddr, d->len, rd[j].addr,
					       rd[j].len))
					break;
			if (j < nrd || (d->opcode == IBV_WR_RDMA_READ &&
					nrd == RX_FO_READS)) {
				err = err ? err : rx_fo_kids_wait(rx, p);
				nrd = 0;
			}
			if (d->opcode == IBV_WR_RDMA_READ) {
				rd[nrd].addr = d->raddr;
				rd[nrd++].len = d->len;
			}
			rx_replay(rx, p, d, 1);
			replayed++;
		}
		free(l);
	}
	if (!err)
		err = rx_fo_kids_wait(rx, p);
	if (!err)
		err = rx_fo_told(rx, p);
	if (!err)
		err = rx_fo_broken(rx, p);
	if (err)
		return err;
	__atomic_add_fetch(&rx->fo_count, 1, __ATOMIC_RELAXED);
	t0 = hcomm__now_ns();
	hcomm__event(c, HCOMM_EVENT_FAILED_OVER, p->rank, HCOMM_XP_TCP, 0,
		     t0 - p->fo_t0 + p->fo_silent, "rdma -> tcp: %zu of %zu "
		     "failed work requests replayed, %.1f ms after the link "
		     "was declared down", replayed, total,
		     (double)(t0 - p->fo_t0) / 1e6);
	if (rx->log)
		fprintf(stderr, "hcomm rdma: rank %d: rank %d failed over to "
			"tcp in %.1f ms (%zu of %zu failed WRs replayed; ms: "
			"start %.1f, collect %.1f, drain %.1f%s, tell %.1f, "
			"hear %.1f, replay %.1f)\n", c->rank, p->rank,
			(double)(t0 - p->fo_t0) / 1e6, replayed, total,
			(double)(p->fo_ts[0] - p->fo_t0) / 1e6,
			(double)(p->fo_ts[1] - p->fo_ts[0]) / 1e6,
			(double)(p->fo_ts[2] - p->fo_ts[1]) / 1e6,
			p->fo_drain_ev ? " by event" : "",
			(double)(p->fo_ts[3] - p->fo_ts[2]) / 1e6,
			(double)(p->fo_ts[4] - p->fo_ts[3]) / 1e6,
			(double)(t0 - p->fo_ts[4]) / 1e6);
	return 0;
}

/*
 * Back to rdma (the failover thread): p's new QPs are up.  New
 * operations wait (BACK) while the posts forwarding to tcp finish, the
 * replays complete and tcp finishes everything issued to it before (a
 * tcp fence: no tcp operation of ours is in flight after it), so that no
 * rdma operation overtakes a tcp one; then rdma carries p again.
 */
static void rx_fo_back(struct rx *rx, struct rx_peer *p)
{
	struct hcomm_comm *c = rx->c;
	const struct hcomm_xport_ops *t = c->xo[HCOMM_XP_TCP];
	uint64_t t0 = hcomm__now_ns(), now, epoch = p->fo_epoch;
	struct rx_flag f;
	unsigned int l;
	int err, ok = 1;

	/*
	 * Every lane's new QP must be up, and stays so: the cm thread
	 * replaces a lane only under its lock and only while TCP.
	 */
	for (l = 0; l < rx->nlanes; l++)
		pthread_mutex_lock(&p->conns[l].lock);
	for (l = 0; l < rx->nlanes; l++) {
		struct rx_conn *k = &p->conns[l];

		if (!k->qp || k->state != CONN_UP || !k->recon)
			ok = 0;
	}
	if (ok) {
		pthread_mutex_lock(&p->fo_lock);
		__atomic_store_n(&p->fo, RX_FO_BACK, __ATOMIC_SEQ_CST);
		pthread_mutex_unlock(&p->fo_lock);
	}
	for (l = rx->nlanes; l-- > 0;)
		pthread_mutex_unlock(&p->conns[l].lock);
	if (!ok) {		/* a lane went again: wait for the next */
		__atomic_store_n(&p->rec_ready, 0, __ATOMIC_RELEASE);
		return;
	}
	while (__atomic_load_n(&p->fwd, __ATOMIC_SEQ_CST))
		usleep(50);
	err = rx_fo_kids_wait(rx, p);
	if (!err)
		err = t->fence(c) ? EIO : 0;
	if (err) {
		/* tcp lost the peer meanwhile: it is gone, not back */
		rx_peer_fail(rx, p, HCOMM_EVENT_PEER_LOST, err, 0, "switching "
			     "back to rdma: tcp failed: %s", strerror(err));
		return;
	}
	now = hcomm__now_ns();
	for (l = 0; l < rx->nlanes; l++) {
		struct rx_conn *k = &p->conns[l];

		pthread_mutex_lock(&k->lock);
		__atomic_store_n(&k->seen, k->head, __ATOMIC_RELEASE);
		__atomic_store_n(&k->progress_ns, now, __ATOMIC_RELAXED);
		__atomic_store_n(&k->busy_ns, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&k->gap_ns, 0, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&k->lock);
	}
	__atomic_store_n(&p->rec_ready, 0, __ATOMIC_RELEASE);
	pthread_mutex_lock(&rx->fo_lock);
	p->fo_run = 0;
	pthread_mutex_unlock(&rx->fo_lock);
	for (l = 0; l < rx->nlanes; l++)
		__atomic_store_n(&p->conns[l].recon, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&p->rec_on, 0, __ATOMIC_RELEASE);
	pthread_mutex_lock(&p->fo_lock);
	__atomic_store_n(&p->fo, RX_FO_NONE, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&p->fo_lock);
	/* the connector tells the acceptor that it is back (it waits) */
	if (p->rank < c->rank &&
	    !rx_fo_put(rx, p, (uint64_t)c->rank * HCOMM_FO_SLOT +
		       HCOMM_FO_BACK, &epoch, sizeof(epoch), &f))
		(void)rx_flag_wait(rx, &f);
	__atomic_add_fetch(&rx->fo_back, 1, __ATOMIC_RELAXED);
	hcomm__event(c, HCOMM_EVENT_RECOVERED, p->rank, HCOMM_XP_RDMA, 0, 0,
		     "tcp -> rdma: new QPs up %.1f s after the failover (%s); "
		     "switched back in %.1f ms",
		     (double)(now - p->fo_t0) / 1e9, p->rank < c->rank ?
		     "this rank connected" : "the peer connected",
		     (double)(now - t0) / 1e6);
	if (rx->log)
		fprintf(stderr, "hcomm rdma: rank %d: rank %d back on rdma "
			"(switch %.1f ms)\n", c->rank, p->rank,
			(double)(now - t0) / 1e6);
}

/*
 * The failover thread.  Each peer's failover is a small state machine
 * (fo_run: 0 idle, 1 told the peer and waiting to hear from it, 2 done)
 * so that several failovers go on together: a peer tells us what landed
 * only once its own failover thread reached us, and waiting for one peer
 * while another waits for us would stall both.  Between failovers it
 * switches recovered peers back.  It runs no application callback
 * (hcomm__cb_foreign).
 */
static void *rx_fo_main(void *arg)
{
	struct rx *rx = arg;
	const char *what;
	int r, err, did, waiting;

	t_rx_fo = 1;
	hcomm__cb_foreign();
	pthread_mutex_lock(&rx->fo_lock);
	for (;;) {
		did = 0;
		waiting = 0;
		for (r = 0; r < rx->c->size; r++) {
			struct rx_peer *p = &rx->peers[r];
			int fo = __atomic_load_n(&p->fo, __ATOMIC_ACQUIRE);

			if (r == rx->c->rank)
				continue;
			if (fo == RX_FO_ACTIVE && p->fo_run == 0) {
				p->fo_run = 1;
				rx->fo_busy++;
				pthread_mutex_unlock(&rx->fo_lock);
				err = rx->fo_stop ? ECANCELED :
				      rx_fo_tell(rx, p, &what);
				if (err)
					rx_fo_abort(rx, p, err, rx->fo_stop ?
						    "the communicator is being "
						    "destroyed" : what);
				pthread_mutex_lock(&rx->fo_lock);
				if (err) {
					p->fo_run = 2;
					rx->fo_busy--;
				}
				did = 1;
			} else if (fo == RX_FO_ACTIVE && p->fo_run == 1) {
				err = rx_fo_broken(rx, p);
				if (!err && hcomm__now_ns() > p->fo_deadline)
					err = ETIMEDOUT;
				if (!err && rx->fo_stop)
					err = ECANCELED;
				if (!err && !rx_fo_heard(rx, p)) {
					waiting = 1;
					continue;
				}
				pthread_mutex_unlock(&rx->fo_lock);
				if (!err)
					err = rx_fo_finish(rx, p);
				if (err)
					rx_fo_abort(rx, p, err, "waiting for the "
						    "peer's count of what landed, "
						    "or replaying");
				pthread_mutex_lock(&rx->fo_lock);
				p->fo_run = 2;
				rx->fo_busy--;
				did = 1;
			} else if (fo == RX_FO_TCP && !rx->fo_stop &&
				   __atomic_load_n(&p->rec_ready,
						   __ATOMIC_ACQUIRE) &&
				   !rx_fo_broken(rx, p)) {
				/*
				 * The accepting end goes back once the
				 * connecting end is back (its mark comes over
				 * tcp into memory: polled).
				 */
				if (p->rank > rx->c->rank &&
				    rx_fo_slot(rx, p, HCOMM_FO_BACK / 8) <
				    p->fo_epoch) {
					waiting = 1;
					continue;
				}
				rx->fo_busy++;
				pthread_mutex_unlock(&rx->fo_lock);
				rx_fo_back(rx, p);
				pthread_mutex_lock(&rx->fo_lock);
				rx->fo_busy--;
				did = 1;
			}
		}
		if (did || waiting) {
			pthread_cond_broadcast(&rx->fo_cond);
			if (!did) {
				pthread_mutex_unlock(&rx->fo_lock);
				if (!rx->c->xo[HCOMM_XP_TCP]->progress(rx->c))
					usleep(200);
				pthread_mutex_lock(&rx->fo_lock);
			}
			continue;
		}
		if (rx->fo_stop == 2)
			break;
		pthread_cond_wait(&rx->fo_cond, &rx->fo_lock);
	}
	pthread_mutex_unlock(&rx->fo_lock);
	return NULL;
}

/*
 * cm thread: p, failed over (on tcp, maybe reconnecting), failed a newer
 * link over (epoch e): its new QPs to us died before we switched back.
 * Join that failover: our new QPs go to the error state and we tell it
 * what of them landed here (nothing to replay: we were on tcp).
 */
static void rx_fo_rejoin(struct rx *rx, struct rx_peer *p, uint64_t e)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	unsigned int l;
	int claimed = 0;

	pthread_mutex_lock(&rx->fo_lock);
	pthread_mutex_lock(&p->fo_lock);
	if (p->fo == RX_FO_TCP && !rx->fo_stop &&
	    !__atomic_load_n(&p->dead, __ATOMIC_ACQUIRE)) {
		snprintf(p->why, sizeof(p->why), "rank %d failed its new link "
			 "over to tcp again (failover %llu)", p->rank,
			 (unsigned long long)e);
		p->fo_run = 0;
		__atomic_store_n(&p->rec_ready, 0, __ATOMIC_RELEASE);
		rx_fo_start(rx, p, 0);
		claimed = 1;
	}
	pthread_mutex_unlock(&p->fo_lock);
	if (claimed)
		pthread_cond_broadcast(&rx->fo_cond);
	pthread_mutex_unlock(&rx->fo_lock);
	if (!claimed)
		return;
	for (l = 0; l < rx->nlanes; l++)
		if (p->conns[l].qp)
			(void)ibv_modify_qp(p->conns[l].qp, &a, IBV_QP_STATE);
	__atomic_store_n(&p->rec_on, 0, __ATOMIC_RELEASE);
	for (l = 0; l < rx->nlanes; l++)
		__atomic_store_n(&p->conns[l].recon, 0, __ATOMIC_RELEASE);
}

/*
 * cm thread: a peer that failed its link over first tells us so through
 * our failover window (its epoch): fail the link over here too, so that
 * both ends quiesce their QPs and exchange counts.  Also the background
 * reconnects of failed-over peers.
 */
static void rx_fo_poll(struct rx *rx)
{
	int r, fo;

	if (!rx->c->fo_mem || !rx_fo_can(rx))
		return;
	for (r = 0; r < rx->c->size; r++) {
		struct rx_peer *p = &rx->peers[r];
		uint64_t e;

		if (r == rx->c->rank)
			continue;
		rx_rec_tick(rx, p);
		if (__atomic_load_n(&p->dead, __ATOMIC_ACQUIRE))
			continue;
		e = rx_fo_slot(rx, p, HCOMM_FO_LANES);
		if (e <= p->fo_epoch)
			continue;
		fo = __atomic_load_n(&p->fo, __ATOMIC_ACQUIRE);
		if (fo == RX_FO_NONE)
			rx_peer_kill(rx, p, ECONNABORTED, "rank %d failed the "
				     "link over to tcp (failover %llu)", r,
				     (unsigned long long)e);
		else if (fo == RX_FO_TCP)
			rx_fo_rejoin(rx, p, e);
	}
}

/*
 * tcp's service thread: a put landed in the failover window (a peer's
 * failover telling its epoch or counts): wake the cm thread, which joins
 * the failover (rx_fo_poll) at once instead of at its next round.
 */
void hcomm__rdma_fo_kick(struct hcomm_comm *c)
{
	struct rx *rx = rx_of(c);
	uint64_t one = 1;

	if (rx && rx->kick_fd >= 0)
		(void)!write(rx->kick_fd, &one, sizeof(one));
}

void hcomm__rdma_fo_stop(struct hcomm_comm *c)
{
	struct rx *rx = rx_of(c);

	if (!rx)
		return;
	pthread_mutex_lock(&rx->fo_lock);
	__atomic_store_n(&rx->fo_stop, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&rx->fo_cond);
	while (rx->fo_busy)
		pthread_cond_wait(&rx->fo_cond, &rx->fo_lock);
	pthread_mutex_unlock(&rx->fo_lock);
}

/* After init: disconnects, late connects, device events, keep-alive. */
static void *rx_cm_main(void *arg)
{
	struct rx *rx = arg;
	struct pollfd pfd[4];
	uint64_t kicks, t;
	int rounds = rx->ka_timeout_ns || rx->fo_on, ms = -1;
	uint64_t next = hcomm__now_ns() + rx->ka_interval_ns;

	pfd[0].fd = rx->ech->fd;
	pfd[1].fd = rx->verbs->async_fd;
	pfd[2].fd = rx->stop_fd;
	pfd[3].fd = rx->kick_fd;
	pfd[0].events = pfd[1].events = pfd[2].events = POLLIN;
	pfd[3].events = POLLIN;
	for (;;) {
		/* wake for the next round, not an interval after an event */
		if (rounds) {
			t = hcomm__now_ns();
			ms = t >= next ? 0 :
			     (int)((next - t + 999999) / 1000000);
		}
		if (poll(pfd, 4, ms) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[2].revents)
			break;
		if (pfd[0].revents)
			rx_cm_drain(rx);
		if (pfd[1].revents)
			rx_async(rx);
		/*
		 * A peer's failover wrote its epoch (or its counts) here:
		 * join it now, not at the next keep-alive round.
		 */
		if (pfd[3].revents &&
		    read(rx->kick_fd, &kicks, sizeof(kicks)) > 0)
			rx_fo_poll(rx);
		if (rounds && hcomm__now_ns() >= next) {
			/*
			 * With failover every write takes a receive: a rank
			 * that calls nothing still gives the SRQ its
			 * receives back, all of them, every interval.
			 */
			if (rx->fo_on)
				rx_reap_recv_all(rx);
			rx_fo_poll(rx);
			if (rx->ka_timeout_ns)
				rx_keepalive(rx);
			next = hcomm__now_ns() + rx->ka_interval_ns;
		}
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* setup                                                               */
/* ------------------------------------------------------------------ */

/* A transport variable: unset gives def; else a size in [lo, hi]. */
static int rx_env(const char *name, uint64_t lo, uint64_t hi, uint64_t def,
		  uint64_t *out)
{
	const char *s = getenv(name);
	uint64_t v;

	*out = def;
	if (!s)
		return 0;
	if (hcomm_parse_size(s, &v) || v < lo || v > hi)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "%s=\"%.32s\": not "
				   "a number in %llu .. %llu", name, s,
				   (unsigned long long)lo,
				   (unsigned long long)hi);
	*out = v;
	return 0;
}

/*
 * The keep-alive's default limit, in ms.  Where a failover to tcp takes
 * over, RX_KA_TIMEOUT_FO_MS: a false alarm costs a failover, never data.
 * Where nothing does, a false alarm fails the peer for good, so the limit
 * waits out what the QP recovers by itself: a packet or its acknowledgement
 * lost at the end of a burst is sent again only when the ack timeout T
 * (4.096 us * 2^ack_timeout, 268 ms at 16) runs out, and the resend may be
 * lost too: the third send leaves 2 T after the first.  So 2.5 T, and
 * RX_KA_TIMEOUT_MS at least: 672 ms at the default exponent, 80 ms from
 * HCOMM_RDMA_ACK_TIMEOUT=12 (16.8 ms) down.  T is the one asked of rdma_cm
 * (RDMA_OPTION_ID_ACK_TIMEOUT); a device may stretch it.
 */
static uint64_t rx_ka_default(const struct rx *rx)
{
	uint64_t ms = ((5 * 4096ULL) << rx->ack_timeout) / 2 / 1000000 + 1;

	if (rx->fo_on)
		return RX_KA_TIMEOUT_FO_MS;
	if (ms < RX_KA_TIMEOUT_MS)
		return RX_KA_TIMEOUT_MS;
	return ms < 600000 ? ms : 600000;
}

static int rx_params(struct rx *rx)
{
	const struct hcomm_config *cfg = &rx->c->cfg;
	uint64_t v;
	int ret;

	rx->nlanes = cfg->num_qps;
	rx->qd = cfg->queue_depth;
	rx->max_inline = cfg->max_inline;
	ret = rx_env("HCOMM_RDMA_ACK_TIMEOUT", 1, 31, RX_ACK_TIMEOUT, &v);
	if (ret)
		return ret;
	rx->ack_timeout = (uint8_t)v;
	ret = rx_env("HCOMM_RDMA_RETRY_CNT", 1, 6, RX_RETRY_CNT, &v);
	if (ret)
		return ret;
	rx->retry_cnt = (uint8_t)v;
	ret = rx_env("HCOMM_RDMA_BOUNCE_MAX", 0, 1 << 20, RX_BOUNCE_MAX, &v);
	if (ret)
		return ret;
	rx->bounce_max = (unsigned int)v;
	ret = rx_env("HCOMM_RDMA_STRIPE_MIN", 4096, 1ULL << 30, RX_STRIPE_MIN,
		     &v);
	if (ret)
		return ret;
	rx->stripe_min = v;
	ret = rx_env("HCOMM_RDMA_PART_MAX", 4096, RX_PART_MAX, RX_PART_DEFAULT,
		     &v);
	if (ret)
		return ret;
	rx->part_max = v;
	ret = rx_env("HCOMM_KEEPALIVE_INTERVAL", 1, 10000, RX_KA_INTERVAL_MS,
		     &v);
	if (ret)
		return ret;
	rx->ka_interval_ns = v * 1000000ULL;
	ret = rx_env("HCOMM_FAILOVER", 0, 1, 1, &v);
	if (ret)
		return ret;
	/* every rank plans tcp alike (xports_plan) */
	rx->fo_on = v && (rx->c->xp_use & (1u << HCOMM_XP_TCP));
	ret = rx_env("HCOMM_KEEPALIVE_TIMEOUT", 0, 600000, rx_ka_default(rx),
		     &v);
	if (ret)
		return ret;
	rx->ka_timeout_ns = v * 1000000ULL;
	if (rx->ka_timeout_ns && rx->ka_timeout_ns <= rx->ka_interval_ns)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "HCOMM_KEEPALIVE_"
				   "TIMEOUT=%llu ms must exceed HCOMM_KEEPALIVE_"
				   "INTERVAL=%llu ms (or be 0: off)",
				   (unsigned long long)(rx->ka_timeout_ns /
							1000000),
				   (unsigned long long)(rx->ka_interval_ns /
							1000000));
	ret = rx_env("HCOMM_RDMA_SPIN_US", 0, 1000000, RX_SPIN_US, &v);
	if (ret)
		return ret;
	/* unset: HCOMM_SPIN_US, or none where this thread has one CPU */
	rx->spin_ns = getenv("HCOMM_RDMA_SPIN_US") ? v * 1000 :
		      hcomm__spin_ns(rx->c, v * 1000);
	rx->log = getenv("HCOMM_LOG") && strcmp(getenv("HCOMM_LOG"), "0");
	ret = rx_env("HCOMM_FAILBACK", 0, 1, 1, &v);
	if (ret)
		return ret;
	rx->fb_on = rx->fo_on && v;
	return 0;
}

static int rx_is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr)
			>> 24) == 127;
	if (ss->ss_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(
			&((const struct sockaddr_in6 *)ss)->sin6_addr);
	return 1;
}

/* A numeric address or a host name into ss (port 0). */
static int rx_resolve(const char *host, struct sockaddr_storage *ss)
{
	struct addrinfo hints, *res, *ai;
	int ret;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	ret = getaddrinfo(host, NULL, &hints, &res);
	if (ret)
		return -1;
	for (ai = res; ai; ai = ai->ai_next)
		if (ai->ai_family == AF_INET || ai->ai_family == AF_INET6)
			break;
	if (!ai)
		ai = res;
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(res);
	return ss->ss_family == AF_INET || ss->ss_family == AF_INET6 ? 0 : -1;
}

/* The IP address a RoCE GID carries (IPv4-mapped or global IPv6). */
static int rx_gid_sa(const union ibv_gid *g, struct sockaddr_storage *ss)
{
	static const uint8_t v4pre[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					   0xff, 0xff };
	static const uint8_t zero[16];

	memset(ss, 0, sizeof(*ss));
	if (!memcmp(g->raw, v4pre, 12)) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;

		s->sin_family = AF_INET;
		memcpy(&s->sin_addr, g->raw + 12, 4);
		return 0;
	}
	if (!memcmp(g->raw, zero, 16) || (g->raw[0] == 0xfe &&
					   (g->raw[1] & 0xc0) == 0x80))
		return -1;		/* empty or link-local */
	((struct sockaddr_in6 *)ss)->sin6_family = AF_INET6;
	memcpy(&((struct sockaddr_in6 *)ss)->sin6_addr, g->raw, 16);
	return 0;
}

/*
 * The IP address of the first RoCEv2 GID that carries one on an active
 * port (of the rank table's device, at its GID index, if it names them)
 * into *ss: 1, or 0 when there is none.
 */
static int rx_find_roce(const struct hcomm_rankinfo *ri,
			struct sockaddr_storage *ss)
{
	struct ibv_device **list;
	struct ibv_gid_entry ent;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_context *ctx;
	int n, i, found = 0;
	uint8_t p;
	int g, g0, g1;

	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n && !found; i++) {
		if (ri->rdma_dev[0] &&
		    strcmp(ibv_get_device_name(list[i]), ri->rdma_dev))
			continue;
		ctx = ibv_open_device(list[i]);
		if (!ctx)
			continue;
		if (ibv_query_device(ctx, &da))
			da.phys_port_cnt = 0;
		for (p = 1; p <= da.phys_port_cnt && !found; p++) {
			if (ibv_query_port(ctx, p, &pa) ||
			    pa.state != IBV_PORT_ACTIVE)
				continue;
			g0 = ri->gid_index >= 0 ? ri->gid_index : 0;
			g1 = ri->gid_index >= 0 ? ri->gid_index + 1 :
						  pa.gid_tbl_len;
			for (g = g0; g < g1 && !found; g++)
				if (!ibv_query_gid_ex(ctx, p, g, &ent, 0) &&
				    ent.gid_type == IBV_GID_TYPE_ROCE_V2 &&
				    !rx_gid_sa(&ent.gid, ss))
					found = 1;
		}
		ibv_close_device(ctx);
	}
	if (list)
		ibv_free_device_list(list);
	return found;
}

/* No address given: the first usable RoCEv2 GID's (rx_find_roce). */
static int rx_gid_addr(struct rx *rx, struct sockaddr_storage *ss)
{
	const struct hcomm_rankinfo *ri = &rx->c->ri;

	if (rx_find_roce(ri, ss))
		return 0;
	return rx_fail(rx, HCOMM_ERR_NODEV, 0, "no RDMA device%s%s with an "
		       "active port and a RoCEv2 GID carrying an IP address "
		       "(soft-RoCE: modprobe rdma_rxe; rdma link add rxe0 type "
		       "rxe netdev eth0), and no address given (rank table "
		       "dev_ip/addr, or a TCP bootstrap)",
		       ri->rdma_dev[0] ? " " : "", ri->rdma_dev);
}

/*
 * The listening address: the rank table's dev_ip, its host address, the
 * bootstrap's own IP (loopback ones skipped: no RDMA device has them),
 * else a device GID's.
 */
static int rx_pick_addr(struct rx *rx, struct sockaddr_storage *ss)
{
	const struct hcomm_rankinfo *ri = &rx->c->ri;
	const char *cand[3] = { ri->dev_ip, ri->host_addr,
				hcomm__boot_self_ip(rx->c->boot) };
	static const char *const what[3] = { "the rank table's dev_ip",
		"the rank table's host address", "the bootstrap's address" };
	unsigned int i;

	for (i = 0; i < 3; i++) {
		if (!cand[i] || !cand[i][0])
			continue;
		if (rx_resolve(cand[i], ss))
			return rx_fail(rx, HCOMM_ERR_INVAL, 0, "%s \"%s\" does "
				       "not resolve to an IP address", what[i],
				       cand[i]);
		if (!rx_is_loopback(ss))
			return 0;
	}
	return rx_gid_addr(rx, ss);
}

/* The GID index (and type) of our address on our port, or -1. */
static void rx_find_gid(struct rx *rx)
{
	struct sockaddr_storage g;
	struct ibv_gid_entry ent;
	struct ibv_port_attr pa;
	int i, best = -1, type = -1;

	if (ibv_query_port(rx->verbs, rx->port, &pa))
		return;
	for (i = 0; i < pa.gid_tbl_len; i++) {
		if (ibv_query_gid_ex(rx->verbs, rx->port, i, &ent, 0) ||
		    rx_gid_sa(&ent.gid, &g) || g.ss_family !=
		    rx->self_sa.ss_family)
			continue;
		if (g.ss_family == AF_INET ?
		    memcmp(&((struct sockaddr_in *)&g)->sin_addr,
			   &((struct sockaddr_in *)&rx->self_sa)->sin_addr, 4) :
		    memcmp(&((struct sockaddr_in6 *)&g)->sin6_addr,
			   &((struct sockaddr_in6 *)&rx->self_sa)->sin6_addr,
			   16))
			continue;
		if (best < 0 || ent.gid_type == IBV_GID_TYPE_ROCE_V2) {
			best = i;
			type = (int)ent.gid_type;
		}
	}
	rx->sgid_index = best;
	rx->gid_type = type;
}

/* A CQ with its own completion channel (non-blocking). */
static int rx_cq_init(struct rx *rx, struct rx_cq *q, int cqe)
{
	q->ch = ibv_create_comp_channel(rx->verbs);
	if (!q->ch)
		return rx_fail(rx, rx_code(errno), errno,
			       "ibv_create_comp_channel");
	(void)fcntl(q->ch->fd, F_SETFL,
		    fcntl(q->ch->fd, F_GETFL) | O_NONBLOCK);
	q->cq = ibv_create_cq(rx->verbs, cqe, NULL, q->ch, 0);
	if (!q->cq)
		return rx_fail(rx, rx_code(errno), errno, "ibv_create_cq of %d "
			       "entries", cqe);
	pthread_mutex_init(&q->reap, NULL);
	q->ready = 1;
	return 0;
}

static void rx_cq_fini(struct rx_cq *q)
{
	if (q->cq)
		(void)ibv_destroy_cq(q->cq);
	if (q->ch)
		(void)ibv_destroy_comp_channel(q->ch);
	if (q->ready)
		pthread_mutex_destroy(&q->reap);
	memset(q, 0, sizeof(*q));
}

/* Give the SRQ n receives (zero-length: WRITE_WITH_IMM only). */
static int rx_srq_fill(struct rx *rx, unsigned int n)
{
	struct ibv_recv_wr wr[64], *bad;
	unsigned int i, m;
	int ret;

	while (n) {
		m = n < 64 ? n : 64;
		memset(wr, 0, sizeof(wr));
		for (i = 0; i + 1 < m; i++)
			wr[i].next = &wr[i + 1];
		ret = ibv_post_srq_recv(rx->srq, wr, &bad);
		if (ret)
			return rx_fail(rx, rx_code(ret), ret,
				       "ibv_post_srq_recv");
		n -= m;
	}
	return 0;
}

/* A probe QP of the transport's shape with @inl inline bytes and @sge
 * gather entries; on success *got (if not NULL) is the inline size the
 * device grants. */
static bool rx_try_inline(struct rx *rx, unsigned int inl, unsigned int sge,
			  unsigned int *got)
{
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp;

	memset(&a, 0, sizeof(a));
	a.send_cq = rx->scq[0].cq;
	a.recv_cq = rx->rcq.cq;
	a.srq = rx->srq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = rx->qd;
	a.cap.max_send_sge = sge;
	a.cap.max_inline_data = inl;
	qp = ibv_create_qp(rx->pd, &a);
	if (!qp)
		return false;
	if (got)
		*got = a.cap.max_inline_data;
	(void)ibv_destroy_qp(qp);
	return true;
}

/*
 * An inline size up to cfg.max_inline the device takes.  First guess:
 * what the device grants a QP with as many gather entries as it allows
 * (@max_sge) and no inline data asked for; a QP of the transport's own
 * shape that takes that guess settles it, without a try that fails (rxe
 * logs each failed QP in the kernel's log).  On rxe, which sizes its WQEs
 * by the larger of the two, that is its largest (512 bytes); another
 * device may allow more than it grants there.  Else a binary search for
 * the largest, a probe QP per try.
 */
static void rx_probe_inline(struct rx *rx, unsigned int max_sge)
{
	unsigned int lo = 0, hi = rx->max_inline, want = hi, got = 0;

	if (max_sge > 1 && rx_try_inline(rx, 0, max_sge, &got) && got &&
	    got < hi && rx_try_inline(rx, got, 1, NULL)) {
		rx->max_inline = got;
		return;
	}
	for (;;) {
		if (rx_try_inline(rx, want, 1, NULL))
			lo = want;
		else
			hi = want - 1;
		if (lo >= hi || !want)
			break;
		want = (lo + hi + 1) / 2;
	}
	rx->max_inline = lo;
}

/* Device, queues, memory: everything before the peers are known. */
static int rx_setup_local(struct rx *rx)
{
	struct hcomm_comm *c = rx->c;
	const struct hcomm_rankinfo *ri = &c->ri;
	struct ibv_device_attr da;
	size_t nconn = (size_t)(c->size - 1) * rx->nlanes, i;
	int ret, r, cqe;
	unsigned int l;

	ret = rx_pick_addr(rx, &rx->self_sa);
	if (ret)
		return ret;
	rx_sa_str(&rx->self_sa, rx->where, sizeof(rx->where));
	rx->ech = rdma_create_event_channel();
	if (!rx->ech)
		return rx_fail(rx, rx_code(errno), errno,
			       "rdma_create_event_channel (is rdma_ucm "
			       "loaded?)");
	(void)fcntl(rx->ech->fd, F_SETFL,
		    fcntl(rx->ech->fd, F_GETFL) | O_NONBLOCK);
	if (rdma_create_id(rx->ech, &rx->listen, NULL, RDMA_PS_TCP)) {
		rx->listen = NULL;
		return rx_fail(rx, rx_code(errno), errno, "rdma_create_id");
	}
	if (rdma_bind_addr(rx->listen, (struct sockaddr *)&rx->self_sa))
		return rx_fail(rx, errno == EADDRNOTAVAIL || errno == ENODEV ?
			       HCOMM_ERR_NODEV : rx_code(errno), errno,
			       "rdma_bind_addr: no RDMA device has this "
			       "address");
	rx->verbs = rx->listen->verbs;
	if (!rx->verbs)
		return rx_fail(rx, HCOMM_ERR_NODEV, 0, "the address belongs "
			       "to no RDMA device (rdma link add ... netdev "
			       "<its interface>)");
	rx->port = rx->listen->port_num;
	snprintf(rx->dev, sizeof(rx->dev), "%s",
		 ibv_get_device_name(rx->verbs->device));
	if (ri->rdma_dev[0] && strcmp(ri->rdma_dev, rx->dev))
		return rx_fail(rx, HCOMM_ERR_INVAL, 0, "the rank table names "
			       "device %s, but the address is on %s",
			       ri->rdma_dev, rx->dev);
	rx_find_gid(rx);
	if (ri->gid_index >= 0 && ri->gid_index != rx->sgid_index)
		return rx_fail(rx, HCOMM_ERR_INVAL, 0, "the rank table names "
			       "GID index %d, but the address is GID %d of "
			       "%s port %u", ri->gid_index, rx->sgid_index,
			       rx->dev, rx->port);
	if (rdma_listen(rx->listen, 128))
		return rx_fail(rx, rx_code(errno), errno, "rdma_listen");
	if (rx->self_sa.ss_family == AF_INET)
		((struct sockaddr_in *)&rx->self_sa)->sin_port =
			rdma_get_src_port(rx->listen);
	else
		((struct sockaddr_in6 *)&rx->self_sa)->sin6_port =
			rdma_get_src_port(rx->listen);
	rx_sa_str(&rx->self_sa, rx->where, sizeof(rx->where));

	if (ibv_query_device(rx->verbs, &da))
		return rx_fail(rx, rx_code(errno), errno, "ibv_query_device");
	if (rx->qd > (unsigned int)da.max_qp_wr)
		rx->qd = da.max_qp_wr;
	/* every QP of a lane shares its send CQ: it must hold them all */
	if (c->size > 1 && (size_t)rx->qd * (c->size - 1) + 16 >
	    (size_t)da.max_cqe)
		rx->qd = (unsigned int)((da.max_cqe - 16) / (c->size - 1));
	if (rx->qd < 8)
		return rx_fail(rx, HCOMM_ERR_LIMIT, 0, "%d ranks do not fit "
			       "the device's %d CQ entries", c->size,
			       da.max_cqe);
	rx->rd_atom = (uint8_t)(da.max_qp_rd_atom < da.max_qp_init_rd_atom ?
				da.max_qp_rd_atom : da.max_qp_init_rd_atom);
	if (rx->rd_atom > 16)
		rx->rd_atom = 16;
	rx->srq_depth = rx->qd * 4 < 1024 ? 1024 : rx->qd * 4;
	if (rx->srq_depth > (unsigned int)da.max_srq_wr)
		rx->srq_depth = da.max_srq_wr;
	if (rx->srq_depth + 16 > (unsigned int)da.max_cqe)
		rx->srq_depth = da.max_cqe - 16;

	rx->pd = ibv_alloc_pd(rx->verbs);
	if (!rx->pd)
		return rx_fail(rx, rx_code(errno), errno, "ibv_alloc_pd");
	rx->scq = aligned_alloc(64, sizeof(*rx->scq) * rx->nlanes);
	if (!rx->scq)
		return rx_fail(rx, HCOMM_ERR_NOMEM, ENOMEM, "CQs");
	memset(rx->scq, 0, sizeof(*rx->scq) * rx->nlanes);
	cqe = (int)(rx->qd * (c->size > 1 ? c->size - 1 : 1) + 16);
	for (l = 0; l < rx->nlanes; l++) {
		ret = rx_cq_init(rx, &rx->scq[l], cqe);
		if (ret)
			return ret;
	}
	ret = rx_cq_init(rx, &rx->rcq, (int)rx->srq_depth + 16);
	if (ret)
		return ret;
	{
		struct ibv_srq_init_attr sa;

		memset(&sa, 0, sizeof(sa));
		sa.attr.max_wr = rx->srq_depth;
		sa.attr.max_sge = 1;
		rx->srq = ibv_create_srq(rx->pd, &sa);
		if (!rx->srq)
			return rx_fail(rx, rx_code(errno), errno,
				       "ibv_create_srq of %u receives",
				       rx->srq_depth);
	}
	ret = rx_srq_fill(rx, rx->srq_depth);
	if (ret)
		return ret;
	rx_probe_inline(rx, da.max_sge > 0 ? (unsigned int)da.max_sge : 1);

	/* bounce rings: send_buf_size per peer, split over its lanes */
	rx->bsize = c->cfg.send_buf_size / rx->nlanes;
	if (rx->bsize < (64u << 10))
		rx->bsize = 64u << 10;
	rx->bsize &= ~4095ULL;
	if (rx->bounce_max > rx->bsize / 2)
		rx->bounce_max = (unsigned int)(rx->bsize / 2);
	if (rx->stripe_min <= rx->bounce_max)
		rx->stripe_min = rx->bounce_max + 1;
	rx->bounce_len = nconn * rx->bsize;
	if (rx->bounce_len) {
		if (posix_memalign((void **)&rx->bounce, 4096,
				   rx->bounce_len)) {
			rx->bounce = NULL;
			return rx_fail(rx, HCOMM_ERR_NOMEM, ENOMEM, "%zu bytes "
				       "of bounce rings", rx->bounce_len);
		}
		rx->bounce_mr = ibv_reg_mr(rx->pd, rx->bounce, rx->bounce_len,
					   IBV_ACCESS_LOCAL_WRITE);
		if (!rx->bounce_mr)
			return rx_fail(rx, rx_reg_code(errno), errno,
				       "ibv_reg_mr of %zu bytes of bounce "
				       "rings", rx->bounce_len);
	}

	rx->peers = calloc(c->size, sizeof(*rx->peers));
	if (!rx->peers)
		return rx_fail(rx, HCOMM_ERR_NOMEM, ENOMEM, "peers");
	i = 0;
	for (r = 0; r < c->size; r++) {
		struct rx_peer *p = &rx->peers[r];

		p->rank = r;
		pthread_mutex_init(&p->fo_lock, NULL);
		/* nothing told yet: a failover aborted before step 4 (by
		 * destroy, say) has nothing to wait for in rx_fo_told() */
		p->fo_fc.done = 1;
		p->fo_fe.done = 1;
		if (r == c->rank)
			continue;
		p->conns = aligned_alloc(64, sizeof(*p->conns) * rx->nlanes);
		if (!p->conns)
			return rx_fail(rx, HCOMM_ERR_NOMEM, ENOMEM, "lanes");
		memset(p->conns, 0, sizeof(*p->conns) * rx->nlanes);
		for (l = 0; l < rx->nlanes; l++) {
			struct rx_conn *k = &p->conns[l];

			pthread_mutex_init(&k->lock, NULL);
			k->peer = p;
			k->lane = l;
			k->bounce = rx->bounce + i++ * rx->bsize;
			k->wrs = calloc(rx->qd, sizeof(*k->wrs));
			if (!k->wrs)
				return rx_fail(rx, HCOMM_ERR_NOMEM, ENOMEM,
					       "WR rings");
		}
	}

	rx->sigs = aligned_alloc(64, RX_SIGNALS * sizeof(*rx->sigs));
	if (!rx->sigs)
		return rx_fail(rx, HCOMM_ERR_NOMEM, ENOMEM, "signals");
	memset(rx->sigs, 0, RX_SIGNALS * sizeof(*rx->sigs));
	rx->sig_evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
	rx->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	rx->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (rx->sig_evfd < 0 || rx->stop_fd < 0 || rx->kick_fd < 0)
		return rx_fail(rx, rx_code(errno), errno, "eventfd");
	(void)fcntl(rx->verbs->async_fd, F_SETFL,
		    fcntl(rx->verbs->async_fd, F_GETFL) | O_NONBLOCK);
	return rx_mrc_init(rx);
}

/* HCOMM_LOG: every peer's counters, at destroy. */
static void rx_log_counters(struct rx *rx)
{
	unsigned int i;
	int r;

	for (r = 0; r < rx->c->size; r++) {
		const struct rx_peer_stats *s = &rx->peers[r].st;
		char errs[256] = "";
		size_t n = 0;

		if (r == rx->c->rank)
			continue;
		for (i = 0; i < RX_WC_STATUS && n < sizeof(errs); i++)
			if (s->wc_err[i])
				n += snprintf(errs + n, sizeof(errs) - n,
					      " %s=%llu", ibv_wc_status_str(i),
					      (unsigned long long)s->wc_err[i]);
		fprintf(stderr, "hcomm rdma: rank %d -> rank %d: %llu bytes "
			"put, %llu got, %llu operations, %llu signal pieces "
			"in, %llu failed WRs%s%s\n", rx->c->rank, r,
			(unsigned long long)s->tx_bytes,
			(unsigned long long)s->rx_bytes,
			(unsigned long long)s->ops,
			(unsigned long long)s->signals_in,
			(unsigned long long)s->errors, errs[0] ? ":" : "",
			errs);
	}
	fprintf(stderr, "hcomm rdma: rank %d: keep-alive (limit %llu ms, "
		"every %llu ms): %llu probes, %llu links failed by it, %llu "
		"late rounds\n", rx->c->rank,
		(unsigned long long)(rx->ka_timeout_ns / 1000000),
		(unsigned long long)(rx->ka_interval_ns / 1000000),
		(unsigned long long)__atomic_load_n(&rx->probes,
						    __ATOMIC_RELAXED),
		(unsigned long long)__atomic_load_n(&rx->ka_fails,
						    __ATOMIC_RELAXED),
		(unsigned long long)__atomic_load_n(&rx->ka_stalls,
						    __ATOMIC_RELAXED));
}

static void rx_fini(struct hcomm_comm *c)
{
	struct rx *rx = rx_of(c);
	uint64_t one = 1;
	unsigned int l;
	int r;

	if (!rx)
		return;
	if (rx->fo_thr_up) {
		pthread_mutex_lock(&rx->fo_lock);
		rx->fo_stop = 2;
		pthread_cond_broadcast(&rx->fo_cond);
		pthread_mutex_unlock(&rx->fo_lock);
		pthread_join(rx->fo_thr, NULL);
	}
	if (rx->cm_thr_up) {
		(void)!write(rx->stop_fd, &one, sizeof(one));
		pthread_join(rx->cm_thr, NULL);
	}
	if (rx->log && rx->cm_thr_up)
		rx_log_counters(rx);
	for (r = 0; rx->peers && r < c->size; r++)
		for (l = 0; rx->peers[r].conns && l < rx->nlanes; l++)
			if (rx->peers[r].conns[l].state == CONN_UP)
				(void)rdma_disconnect(rx->peers[r].conns[l].id);
	for (r = 0; rx->peers && r < c->size; r++) {
		struct rx_peer *p = &rx->peers[r];

		for (l = 0; p->conns && l < rx->nlanes; l++) {
			struct rx_conn *k = &p->conns[l];

			k->state = CONN_IDLE;
			rx_conn_drop(rx, k);
			free(k->wrs);
			pthread_mutex_destroy(&k->lock);
		}
		free(p->conns);
		free(p->fo_list);
		pthread_mutex_destroy(&p->fo_lock);
	}
	free(rx->peers);
	while (rx->qpmap) {
		struct rx_qpmap *m = rx->qpmap;

		rx->qpmap = m->old;
		free(m);
	}
	if (rx->srq)
		(void)ibv_destroy_srq(rx->srq);
	for (l = 0; rx->scq && l < rx->nlanes; l++)
		rx_cq_fini(&rx->scq[l]);
	free(rx->scq);
	rx_cq_fini(&rx->rcq);
	if (rx->bounce_mr)
		(void)ibv_dereg_mr(rx->bounce_mr);
	free(rx->bounce);
	if (rx->mrc.ents)
		rx_mrc_fini(rx);
	if (rx->pd)
		(void)ibv_dealloc_pd(rx->pd);
	if (rx->listen)
		rdma_destroy_id(rx->listen);
	if (rx->ech)
		rdma_destroy_event_channel(rx->ech);
	free(rx->sigs);
	if (rx->sig_evfd >= 0)
		close(rx->sig_evfd);
	if (rx->stop_fd >= 0)
		close(rx->stop_fd);
	if (rx->kick_fd >= 0)
		close(rx->kick_fd);
	if (rx->wake_fd >= 0)
		close(rx->wake_fd);
	pthread_cond_destroy(&rx->fo_cond);
	pthread_mutex_destroy(&rx->fo_lock);
	free(rx);
	c->xps[HCOMM_XP_RDMA] = NULL;
}

static int rx_init(struct hcomm_comm *c)
{
	struct rx_pub mine, *all;
	struct rx *rx;
	int ret, local, r;

	rx = calloc(1, sizeof(*rx));
	all = calloc(c->size, sizeof(*all));
	if (!rx || !all) {
		free(rx);
		free(all);
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "rdma transport");
	}
	rx->c = c;
	pthread_mutex_init(&rx->fo_lock, NULL);
	pthread_cond_init(&rx->fo_cond, NULL);
	rx->wake_fd = rx->stop_fd = rx->kick_fd = rx->sig_evfd = -1;
	rx->sgid_index = rx->gid_type = -1;
	rx->nonce = hcomm__boot_nonce(c->boot);
	c->xps[HCOMM_XP_RDMA] = rx;
	local = rx_params(rx);
	if (!local)
		local = rx_setup_local(rx);
	/* Everyone learns everyone's address, or who could not start. */
	memset(&mine, 0, sizeof(mine));
	mine.err = -local;
	if (!local) {
		mine.family = rx->self_sa.ss_family;
		if (mine.family == AF_INET) {
			const struct sockaddr_in *s = (void *)&rx->self_sa;

			memcpy(mine.addr, &s->sin_addr, 4);
			mine.port = s->sin_port;
		} else {
			const struct sockaddr_in6 *s = (void *)&rx->self_sa;

			memcpy(mine.addr, &s->sin6_addr, 16);
			mine.port = s->sin6_port;
		}
		snprintf(mine.dev, sizeof(mine.dev), "%.31s", rx->dev);
		mine.fo = (rx->fo_on ? 1u : 0) | (rx->fb_on ? 2u : 0);
	}
	ret = hcomm__boot_allgather(c->boot, &mine, all, sizeof(mine));
	if (local) {
		ret = local;
		goto err;
	}
	if (ret)
		goto err;
	for (r = 0; r < c->size; r++) {
		struct rx_peer *p = &rx->peers[r];

		if (all[r].err) {
			ret = rx_fail(rx, all[r].err > 0 &&
				      all[r].err < HCOMM_ERR__MAX ? all[r].err :
				      HCOMM_ERR_IO, 0, "rank %d could not set "
				      "up RDMA: %s", r,
				      hcomm_strerror(all[r].err));
			goto err;
		}
		/* failover and switch-back take both ends: all or none */
		if (!(all[r].fo & 1))
			rx->fo_on = 0;
		if (!(all[r].fo & 2))
			rx->fb_on = 0;
		if (r == c->rank)
			continue;
		memset(&p->sa, 0, sizeof(p->sa));
		if (all[r].family == AF_INET) {
			struct sockaddr_in *s = (void *)&p->sa;

			s->sin_family = AF_INET;
			memcpy(&s->sin_addr, all[r].addr, 4);
			s->sin_port = all[r].port;
		} else {
			struct sockaddr_in6 *s = (void *)&p->sa;

			s->sin6_family = AF_INET6;
			memcpy(&s->sin6_addr, all[r].addr, 16);
			s->sin6_port = all[r].port;
		}
		rx_sa_str(&p->sa, p->where, sizeof(p->where));
	}
	ret = rx_connect_all(rx);
	if (ret)
		goto err;
	if (rx_qpmap_build(rx)) {
		ret = rx_fail(rx, HCOMM_ERR_NOMEM, ENOMEM, "QP map");
		goto err;
	}
	ret = pthread_create(&rx->cm_thr, NULL, rx_cm_main, rx);
	if (ret) {
		ret = rx_fail(rx, HCOMM_ERR_LIMIT, ret, "starting the rdma_cm "
			      "thread");
		goto err;
	}
	rx->cm_thr_up = 1;
	if (rx->fo_on) {
		ret = pthread_create(&rx->fo_thr, NULL, rx_fo_main, rx);
		if (ret) {
			ret = rx_fail(rx, HCOMM_ERR_LIMIT, ret, "starting the "
				      "failover thread");
			goto err;
		}
		rx->fo_thr_up = 1;
	}
	free(all);
	return 0;
err:
	free(all);
	rx_fini(c);
	return ret;
}

/*
 * An RDMA device this rank can use: an active port with a RoCEv2 GID that
 * carries an IP address (as rx_gid_addr would pick).  The automatic choice
 * uses it, so a device without an address, a port down or an IB-only HCA
 * leaves the job to tcp instead of failing init.
 */
static int rx_probe(const struct hcomm_rankinfo *ri)
{
	struct sockaddr_storage ss;

	return rx_find_roce(ri, &ss);
}

/* ------------------------------------------------------------------ */
/* statistics                                                          */
/* ------------------------------------------------------------------ */

static void rx_stats_fill(struct rx *rx, struct hcomm_comm_stats *st)
{
	struct rx_mrc *mc = &rx->mrc;
	int r;

	pthread_mutex_lock(&mc->lock);
	st->rcache_hits += mc->st.hits;
	st->rcache_misses += mc->st.misses;
	st->rcache_stale += mc->st.stale;
	st->rcache_evictions += mc->st.evictions;
	st->rcache_entries += mc->nlive;
	st->rcache_bytes += mc->bytes;
	st->rcache_dead += mc->st.dead;
	pthread_mutex_unlock(&mc->lock);
	for (r = 0; r < rx->c->size; r++) {
		const struct rx_peer_stats *s = &rx->peers[r].st;

		if (r == rx->c->rank)
			continue;
		st->net_bytes_sent += __atomic_load_n(&s->tx_bytes,
						      __ATOMIC_RELAXED);
		st->net_bytes_recv += __atomic_load_n(&s->rx_bytes,
						      __ATOMIC_RELAXED);
		st->net_ops_sent += __atomic_load_n(&s->ops, __ATOMIC_RELAXED);
		st->net_ops_recv += __atomic_load_n(&s->signals_in,
						    __ATOMIC_RELAXED);
		st->net_conn_lost += !!__atomic_load_n(&rx->peers[r].dead,
						       __ATOMIC_RELAXED);
		st->rdma_wc_errors += __atomic_load_n(&s->errors,
						      __ATOMIC_RELAXED);
	}
	st->net_refused += __atomic_load_n(&rx->refused, __ATOMIC_RELAXED);
}

static void rx_stats(struct hcomm_comm *c, struct hcomm_comm_stats *st)
{
	rx_stats_fill(rx_of(c), st);
}

/* Copy the counters to the published file (relaxed stores). */
static void rx_publish_now(struct rx *rx)
{
	struct hcomm_comm_stats *pub = __atomic_load_n(&rx->pub,
						       __ATOMIC_ACQUIRE);
	struct hcomm_comm_stats st;
	uint64_t *d, *s;
	size_t i;

	if (!pub)
		return;
	memset(&st, 0, sizeof(st));
	rx_stats_fill(rx, &st);
	d = (uint64_t *)pub;
	s = (uint64_t *)&st;
	for (i = 0; i < sizeof(st) / sizeof(uint64_t); i++)
		__atomic_store_n(&d[i], s[i], __ATOMIC_RELAXED);
}

static void rx_publish(struct hcomm_comm *c, struct hcomm_comm_stats *st)
{
	struct rx *rx = rx_of(c);

	__atomic_store_n(&rx->pub, st, __ATOMIC_RELEASE);
	rx_publish_now(rx);
}

static void rx_peer_stats(struct hcomm_comm *c, int r,
			  struct hcomm_peer_xport_stats *st)
{
	const struct rx_peer *p = &rx_of(c)->peers[r];
	unsigned int i;

	_Static_assert(RX_WC_STATUS == HCOMM_PEER_WC_STATUS,
		       "wc_status[] is indexed like rx_peer_stats.wc_err[]");
	st->in_use = 1;
	st->bytes_sent = __atomic_load_n(&p->st.tx_bytes, __ATOMIC_RELAXED);
	st->bytes_recv = __atomic_load_n(&p->st.rx_bytes, __ATOMIC_RELAXED);
	st->ops_sent = __atomic_load_n(&p->st.ops, __ATOMIC_RELAXED);
	st->ops_recv = __atomic_load_n(&p->st.signals_in, __ATOMIC_RELAXED);
	st->conn_lost = !!__atomic_load_n(&p->dead, __ATOMIC_RELAXED);
	st->wc_errors = __atomic_load_n(&p->st.errors, __ATOMIC_RELAXED);
	for (i = 0; i < RX_WC_STATUS; i++)
		st->wc_status[i] = __atomic_load_n(&p->st.wc_err[i],
						   __ATOMIC_RELAXED);
}

/*
 * For the tests (hidden): what c's rdma transport chose, one line; -1
 * when c uses another transport.
 */
HCOMM_HIDDEN int hcomm__rdma_info(struct hcomm_comm *c, char *buf,
				  size_t len);
HCOMM_HIDDEN int hcomm__rdma_info(struct hcomm_comm *c, char *buf,
				  size_t len)
{
	const struct rx *rx;

	if (!c || c->xo[HCOMM_XP_RDMA] != &hcomm__xport_rdma ||
	    !c->xps[HCOMM_XP_RDMA])
		return -1;
	rx = rx_of(c);
	snprintf(buf, len, "dev=%s port=%u addr=%s gid=%d gid_type=%s "
		 "lanes=%u qd=%u max_inline=%u bounce_max=%u bsize=%llu "
		 "stripe_min=%llu ack_timeout=%u retry_cnt=%u ka_ms=%llu "
		 "rd_atom=%u srq=%u cache=%s ooo=%llu",
		 rx->dev, rx->port, rx->where, rx->sgid_index,
		 rx->gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCEv2" :
		 rx->gid_type == IBV_GID_TYPE_ROCE_V1 ? "RoCEv1" : "?",
		 rx->nlanes, rx->qd, rx->max_inline, rx->bounce_max,
		 (unsigned long long)rx->bsize,
		 (unsigned long long)rx->stripe_min, rx->ack_timeout,
		 rx->retry_cnt,
		 (unsigned long long)(rx->ka_timeout_ns / 1000000),
		 rx->rd_atom, rx->srq_depth,
		 rx->mrc.fd >= 0 ? "module" : "per-op",
		 (unsigned long long)__atomic_load_n(&rx->ooo,
						     __ATOMIC_RELAXED));
	return 0;
}

/*
 * For the tests (hidden): peer r's counters: out[0..4] = tx_bytes,
 * rx_bytes, ops, signals_in, errors; out[5 + s] = WRs failed with
 * ibv_wc_status s (s < 32); out[37 + l] = WRs posted on lane l so far
 * (l < 64).  -1 when r is no peer.
 */
HCOMM_HIDDEN int hcomm__rdma_peer_counters(struct hcomm_comm *c, int r,
					   uint64_t *out);
HCOMM_HIDDEN int hcomm__rdma_peer_counters(struct hcomm_comm *c, int r,
					   uint64_t *out)
{
	const struct rx_peer *p;
	const struct rx *rx;
	unsigned int i;

	if (!c || c->xo[HCOMM_XP_RDMA] != &hcomm__xport_rdma ||
	    !c->xps[HCOMM_XP_RDMA] || r < 0 || r >= c->size ||
	    r == c->rank)
		return -1;
	rx = rx_of(c);
	p = &rx->peers[r];
	memset(out, 0, (37 + 64) * sizeof(*out));
	out[0] = __atomic_load_n(&p->st.tx_bytes, __ATOMIC_RELAXED);
	out[1] = __atomic_load_n(&p->st.rx_bytes, __ATOMIC_RELAXED);
	out[2] = __atomic_load_n(&p->st.ops, __ATOMIC_RELAXED);
	out[3] = __atomic_load_n(&p->st.signals_in, __ATOMIC_RELAXED);
	out[4] = __atomic_load_n(&p->st.errors, __ATOMIC_RELAXED);
	for (i = 0; i < RX_WC_STATUS; i++)
		out[5 + i] = __atomic_load_n(&p->st.wc_err[i],
					     __ATOMIC_RELAXED);
	for (i = 0; i < rx->nlanes; i++)
		out[37 + i] = __atomic_load_n(&p->conns[i].head,
					      __ATOMIC_RELAXED);
	return 0;
}

const struct hcomm_xport_ops hcomm__xport_rdma = {
	.name = "rdma",
	.id = HCOMM_XP_RDMA,
	.probe = rx_probe,
	.init = rx_init,
	.fini = rx_fini,
	.win_create = rx_win_create,
	.win_free = rx_win_free,
	.post = rx_post,
	.progress = rx_progress,
	.block = rx_block,
	.wake_enable = rx_wake_enable,
	.wake = rx_wake,
	.fence = rx_fence,
	.flush = rx_flush,
	.signal_count = rx_signal_count,
	.signal_read = rx_signal_read,
	.signal_wait_any = rx_signal_wait_any,
	.signal_add = rx_signal_add,
	.signal_apply = rx_signal_apply,
	.stats = rx_stats,
	.publish = rx_publish,
	.peer_stats = rx_peer_stats,
};
