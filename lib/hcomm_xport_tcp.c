/* SPDX-License-Identifier: MIT */
/*
 * libhcomm: the "tcp" transport - ranks on any hosts, one-sided operations
 * as frames over TCP connections (Documentation/transports.rst has the wire
 * format, the handshake, ordering and error handling).
 *
 * Connections: every pair of ranks has lanes = min(their num_qps) TCP
 * connections; rank i connects to rank j for i < j, lane by lane.  Each
 * rank listens on an ephemeral port of its address (the rank table's, the
 * bootstrap connection's, or 127.0.0.1) for the life of the communicator;
 * a connection starts with a hello (magic, version, job nonce, ranks,
 * lane) answered by the acceptor's.  A connection accepted after setup,
 * or for a lane already up, is a "guest": its frames are served the same
 * way (so a peer could reconnect), but this rank sends nothing on it.
 *
 * Threads and ownership:
 *  - the service thread owns the io_uring, every socket and every
 *    connection's state, the window table, the fences and the counters.
 *    It receives frames and applies them even while the application is
 *    not calling the library (passive target), sends, and finishes
 *    operations.  Nobody else touches what it owns; other threads talk to
 *    it through messages;
 *  - posting threads take an operation and its chunks from the pool (a
 *    mutex), fill them (the CRC of a put's payload is computed there),
 *    push them onto the submission queue (lock-free MPSC) and wake the
 *    service thread through an eventfd when it sleeps.  Control messages
 *    (windows, fences, counters, setup) go the same way, on the caller's
 *    stack, and are waited for on a futex word;
 *  - finished operations go back through the completion queue (MPSC);
 *    @progress pops them (one reaper at a time: a trylock), puts them back
 *    into the pool and hands the requests to hcomm__complete(), then runs
 *    the callbacks; @block sleeps on an event count (futex).
 *
 * An operation of len >= 2 * TX_STRIPE_MIN is striped over the pair's
 * lanes (one chunk per lane); every chunk is one frame with its own
 * sequence number on its connection.  A put (or put_signal) completes when
 * the target acknowledged all its chunks (landed), a get when all its
 * data arrived.  A striped put_signal sends its signal as a frame of its
 * own once every data chunk was acknowledged.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>

#include "hcomm_comm_int.h"
#include "hcomm_crc32c.h"

#define TX_MAGIC	0x46544348u	/* "HCTF": a frame */
#define TX_HELLO_MAGIC	0x48544348u	/* "HCTH": a hello */
#define TX_VERSION	1
#define TX_HDR		64		/* frame header bytes */
#define TX_HELLO	32		/* hello bytes */
#define TX_NSIG		4096		/* signals (the module's default) */
/* receive staging per connection: TX_STAGE_ALL over them, in MIN .. MAX */
#define TX_STAGE_MIN	16384
#define TX_STAGE_MAX	65536
#define TX_STAGE_ALL	(8 << 20)
#define TX_STRIPE_MIN	(256 * 1024)	/* smallest stripe of a large op */
#define TX_BULK		(256 * 1024)	/* a payload's receives: its CRC
					 * is taken while they are cached */
#define TX_IOV		64		/* iovecs of one sendmsg */
#define TX_GATHER	(1024 * 1024)	/* gather no more bytes past this */
#define TX_SEG		TX_GATHER	/* payload bytes per segment */
#define TX_ZREC		32		/* SENDMSG_ZC in flight per conn. */
#define TX_TICK_NS	100000000ULL	/* timeouts are checked this often */
#define TX_GUESTS	64		/* accepted connections beyond lanes */
#define TX_RESP_MAX	4096		/* get replies queued per connection */
#define TX_REAP		64		/* completions per @progress round */
#define TX_SPIN_NS	20000		/* signal_wait spins this long */
#define TX_YIELD_EVERY	64		/* empty @progress calls per yield */
#define TX_POOL_MAX	65536		/* operations (and chunks) at most */
#define TX_BYE_NS	1000000000ULL	/* destroy waits this for its byes */
#define TX_WIN_SLOT	0xfffffu	/* window id: slot + 1 | generation */
#define TX_WIN_GEN	20
#define TX_ZC_DEFAULT	(256 * 1024)	/* HCOMM_TCP_ZC_THRESHOLD unset:
					 * to peers not on loopback */

enum { OP_PUT = 1, OP_GET, OP_GET_RESP, OP_ACK, OP_BYE };
#define F_SIGNAL	1u
#define F_NODIGEST	2u		/* no payload CRC32C: dcrc 0 */

/* user_data tags (low 3 bits of an 8-aligned pointer) */
enum { UD_RX = 1, UD_TX, UD_ZC, UD_ACCEPT, UD_WAKE, UD_IGNORE };
#define UD_MASK		7ULL

/* ------------------------------------------------------------------ */
/* structures                                                          */
/* ------------------------------------------------------------------ */

/* A frame header in host order (the wire form is little-endian). */
struct tx_whdr {
	uint8_t op;
	uint8_t flags;
	uint16_t rsvd;
	uint64_t seq;
	uint64_t ack;
	uint64_t off;
	uint64_t len;
	uint64_t value;
	uint32_t win;
	uint32_t sig;
	uint32_t dcrc;
};

enum { FR_CHUNK = 1, FR_RESP, FR_CTRL, FR_RAW };

/*
 * struct tx_frame - something to send on a connection (service thread).
 * A put chunk or a get reply goes out as segments of at most TX_SEG
 * payload bytes, each a frame on the wire with its own header (a put
 * segment its own sequence number), built - CRC included - when it is
 * gathered, so the kernel copies bytes the CRC just read.
 * @hdr:   the wire bytes of the current segment's header (then @h.ack is
 *         the connection's applied count at that moment).
 * @h:     that header.
 * @data, @len: the current segment's payload.
 * @total: payload bytes of every segment; @sent: of the segments done.
 * @next:  in the connection's send queue, then its ZC queue.
 * @zc_id: the last SENDMSG_ZC that carried bytes of it (0: none).
 * @hlen:  header bytes (TX_HDR; FR_RAW: TX_HELLO).
 * @last:  the current segment is the last.
 */
struct tx_frame {
	unsigned char hdr[TX_HDR];
	struct tx_whdr h;
	const void *data;
	uint64_t len;
	uint64_t total;
	uint64_t sent;
	struct tx_frame *next;
	uint32_t zc_id;
	uint8_t kind;
	uint8_t built;
	uint8_t hlen;
	uint8_t last;
};

struct tx_op;
struct tx_conn;

#define CH_SENT		1u	/* every byte sent (and ZC notified) */
#define CH_DATA		2u	/* get: the reply arrived */

/*
 * struct tx_chunk - one lane's part of an operation (pool entry).  Filled
 * by the poster (@off, @len, @op), owned by the service thread from the
 * submission until the operation finished.
 * @unext: in the connection's unacknowledged queue (sequence order).
 * @gnext: in its queue of gets waiting for their data.
 * @last_seq: the sequence number of its last segment (once built).
 * @got:   a get's bytes arrived so far.
 */
struct tx_chunk {
	struct tx_frame f;
	struct tx_op *op;
	struct tx_conn *conn;
	struct tx_chunk *onext;
	struct tx_chunk *unext;
	struct tx_chunk *gnext;
	uint64_t off;
	uint64_t len;
	uint64_t last_seq;
	uint64_t got;
	uint8_t st;
};

/*
 * A get reply (service thread): the frame, the window slot it reads, the
 * get's sequence number and the window bytes it answers with.
 */
struct tx_resp {
	struct tx_frame f;
	uint32_t slot;
	uint64_t seq;
	const unsigned char *base;
	struct tx_resp *nfree;
};

enum { MSG_XFER = 1, MSG_CTL };

/* What goes through the submission queue. */
struct tx_msg {
	struct hcomm_mpsc_node node;
	int type;
};

/*
 * struct tx_op - one request's operation (pool entry).  The poster fills
 * it; the service thread owns it until it pushed it onto the completion
 * queue; the reaper puts it back into the pool.
 * @pending:  chunks not finished.
 * @phase:    striped put_signal: 1 while its signal frame is out.
 * @dseq:     order of arrival at the service thread (fences).
 * @prev, @next: in the service thread's list of operations in flight;
 *            @next links the pool's free list.
 */
struct tx_op {
	struct tx_msg m;
	struct hcomm_request *req;
	void *local;
	uint64_t off;
	uint64_t len;
	uint64_t value;
	uint64_t dseq;
	uint32_t win;
	uint32_t sig;
	int target;
	int err;
	uint32_t op;
	unsigned int nchunks;
	unsigned int pending;
	int phase;
	int ordered;		/* a transport's internal operation: one
				 * chunk, on lane 0 */
	struct tx_chunk *chunks;
	struct tx_op *prev, *next;
};

enum {
	CTL_WIN_ADD = 1, CTL_WIN_DEL, CTL_FENCE, CTL_STATS, CTL_PUBLISH,
	CTL_PEERS, CTL_LANE, CTL_STOP, CTL_PEER_STATS,
};

/*
 * struct tx_ctl - a control message, on the caller's stack; the caller
 * waits until @done reads 1 (futex), then the message is the caller's.
 */
struct tx_ctl {
	struct tx_msg m;
	int kind;
	int err;
	uint32_t done;
	uint32_t id;
	void *base;
	uint64_t len;
	uint64_t dseq;
	uint64_t deadline;
	struct hcomm_comm_stats *st;
	struct hcomm_peer_xport_stats *ps;
	int fd;
	int peer;
	int lane;
	struct tx_ctl *next;
};

/* One window part of this rank (service thread). */
struct tx_win {
	unsigned char *base;
	uint64_t len;
	uint32_t id;		/* 0: not (or no longer) a window */
	uint32_t gen;
	uint32_t refs;		/* receives into it, replies from it */
};

/* Per-peer counters (service thread; summed by @stats). */
struct tx_pstats {
	uint64_t bytes_sent;
	uint64_t bytes_recv;
	uint64_t ops_sent;
	uint64_t ops_recv;
	uint64_t crc_errors;
	uint64_t refused;
	uint64_t retrans;	/* of connections closed so far */
	uint64_t lost;
};

struct tx_zrec {
	struct tx_conn *k;
	uint32_t id;
	uint8_t done;
};

enum { K_HELLO = 1, K_UP, K_DEAD };
enum { R_HELLO = 1, R_HDR, R_BULK };

/*
 * struct tx_conn - one TCP connection (service thread only).
 * @peer, @lane: its rank and lane; a guest has @lane -1 (@peer -1 while
 *        its hello is outstanding).
 * @busy: its SQEs in flight (one receive, one send at most); @notifs: ZC
 *        notifications outstanding.  A dead connection's fd is closed and
 *        its requests failed once @busy is 0; a guest is freed once both
 *        are.
 * Sending: @sq frames to send (@sq_off bytes of the first are gone), one
 *        sendmsg in flight (@tx_busy); frames sent with SENDMSG_ZC wait in
 *        @zq for their notifications; @next_seq the last sequence number
 *        given out, @acked the highest the peer acknowledged; @uq the
 *        requests sent and not finished, in sequence order (what a
 *        failover would replay), @gq the gets among them waiting for data.
 * Receiving: @applied the peer's last request applied (in order; acked
 *        by the next frame built), staging @buf[@pos .. @len), or a
 *        payload going straight to @dst (@need bytes to come, @crc so far).
 *        @hdr_only: the last frame's payload was large, so the next
 *        receive into @buf takes a header only and its payload goes
 *        straight to its place, not through @buf and a copy; a frame with
 *        a payload under TX_STAGE_MIN goes back to filling @buf.
 */
struct tx_conn {
	struct tx *tx;
	int fd;
	int peer;
	int lane;
	int state;
	int err;
	int busy;
	int notifs;
	int tx_busy;
	int rx_busy;
	int finalized;
	int bye_in;
	int dirty;
	uint64_t t0;
	uint64_t last_io;
	char addr[64];

	struct tx_frame *sq, *sq_tail;
	uint64_t sq_off;
	struct tx_frame *zq, *zq_tail;
	struct iovec iov[TX_IOV];
	struct msghdr mh;
	uint64_t next_seq;
	uint64_t acked;
	uint64_t ack_sent;
	struct tx_chunk *uq, *uq_tail;
	struct tx_chunk *gq, *gq_tail;
	struct tx_frame ctlf;		/* the ack frame */
	int ctl_queued;
	struct tx_frame byef;		/* the bye frame */
	struct tx_frame rawf;		/* the hello reply */
	uint32_t zc_next;		/* next ZC id (from 1) */
	uint32_t zc_low;		/* lowest ZC id not notified */
	struct tx_zrec zrec[TX_ZREC];
	unsigned int nresp;

	uint64_t applied;
	int rx;
	int hdr_only;
	int zc_ok;			/* SENDMSG_ZC may be used */
	unsigned char *buf;
	uint32_t len;
	uint32_t pos;
	struct tx_whdr cur;
	unsigned char *dst;
	uint64_t need;
	uint32_t crc;
	uint32_t cur_slot;		/* window slot + 1 of a put, 0 */
	struct tx_chunk *gch;
	unsigned char hello[TX_HELLO];

	struct tx_conn *next;		/* tx->guests */
	struct tx_conn *dnext;		/* tx->dirty */
};

/*
 * struct tx_peer - another rank.  @nlanes and @addr are set by init before
 * CTL_PEERS and read-only afterwards; the rest is the service thread's.
 */
struct tx_peer {
	unsigned int nlanes;
	char addr[64];
	struct tx_conn **lanes;		/* [tx->lanes] */
	unsigned int rr;		/* next lane of a one-chunk operation */
	int err;			/* why its last lane closed (atomic
					 * reads: hcomm__tcp_peer_err) */
	struct tx_pstats st;
};

/* The operation pool: free lists under @lock. */
struct tx_pool {
	pthread_mutex_t lock;
	struct tx_op *ops;
	struct tx_chunk *chunks;
	unsigned int nops, nchunks;	/* free */
	struct tx_op *op_mem;
	struct tx_chunk *chunk_mem;
};

/* What rank r publishes at init (little-endian integers). */
struct tx_addr {
	char ip[48];
	uint32_t port;
	uint32_t lanes;
	int32_t err;
	uint32_t reserved;
};

struct tx {
	struct hcomm_comm *c;
	int rank;
	int size;
	unsigned int lanes;		/* this rank's num_qps */
	uint64_t zc_min;		/* SENDMSG_ZC from this; 0: never */
	int zc_set;			/* HCOMM_TCP_ZC_THRESHOLD given */
	int nodigest;			/* HCOMM_TCP_DIGEST=none */
	uint64_t timeout_ns;
	uint64_t nonce;
	uint32_t stage;			/* staging bytes per connection */
	int sndbuf, rcvbuf;		/* SO_SNDBUF/SO_RCVBUF; 0: autotuned */
	int buf_capped;			/* atomic: logged that they were */
	int log;

	/* posting side */
	struct hcomm_mpsc subq;
	int evfd;
	int sleeping;			/* the service thread waits (atomic) */
	struct tx_pool pool;

	/* completion side */
	struct hcomm_mpsc doneq;
	pthread_mutex_t reap_lock;	/* the doneq consumer (trylock) */
	uint64_t ndone;			/* ops in doneq (atomic) */
	uint32_t done_seq;		/* futex: bumped at every push */
	uint32_t done_waiters;		/* atomic */
	int wake_pending;		/* atomic: @wake */

	/* signals: written by the service thread and local puts */
	uint64_t *sig;
	uint32_t sig_seq;		/* futex: bumped at every add */
	uint32_t sig_waiters;		/* atomic */

	/* the service thread's */
	pthread_t thr;
	int thr_started;
	uint32_t ready;			/* futex: 1 once the ring is up */
	int ready_err;
	struct io_uring ring;
	int lfd;
	int accept_armed;
	uint64_t evbuf;
	int wake_armed;
	struct tx_peer *peers;
	struct tx_conn *guests;
	unsigned int nguests;
	struct tx_conn *dirty;
	struct tx_win *wins;
	unsigned int nwins;
	struct tx_op *out_head, *out_tail;
	uint64_t dseq;
	struct tx_ctl *fences;
	struct tx_ctl *win_dels;
	struct tx_resp *resp_free;
	struct hcomm_comm_stats *pub;
	int stats_dirty;
	uint64_t refused;		/* hellos refused, rank unknown */
	struct tx_pstats scratch;	/* counted before a rank was known */
	uint64_t stop_at;		/* CTL_STOP: give the byes until then */
	struct tx_ctl *stop;
	uint64_t next_tick;

	char self_ip[48];
	char self_addr[64];
	uint32_t port;
};

/* A failed system call (positive errno err): its hcomm_err, recorded. */
#define sys_fail(err, ...) \
	hcomm__fail(hcomm__err_code(HCOMM_CMD_XFER, (err)), (err), __VA_ARGS__)

static struct tx *tx_of(const struct hcomm_comm *c)
{
	return c->xps[HCOMM_XP_TCP];
}

/*
 * Window memory (and a get's destination) is written by the service
 * thread for remote puts and read for remote gets; the ranks order those
 * accesses by the protocol (acks, signals, barriers over other sockets),
 * which ThreadSanitizer cannot see - as it cannot see the copies the
 * kernel makes for the kernel transport.  Under TSan these accesses are
 * not tracked; everything else is.
 */
#ifdef __SANITIZE_THREAD__
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);

static void win_access_begin(void)
{
	AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
	AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
}

static void win_access_end(void)
{
	AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
	AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
}
#else
static inline void win_access_begin(void)
{
}

static inline void win_access_end(void)
{
}
#endif

/* ------------------------------------------------------------------ */
/* helpers                                                             */
/* ------------------------------------------------------------------ */

/* Sleep while *w reads v, at most timeout_ns (< 0: no limit). */
static void futex_wait(uint32_t *w, uint32_t v, int64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;

	if (timeout_ns >= 0) {
		ts.tv_sec = timeout_ns / 1000000000;
		ts.tv_nsec = timeout_ns % 1000000000;
		tsp = &ts;
	}
	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, tsp, NULL, 0);
}

static void futex_wake(uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void put16(unsigned char *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static void put32(unsigned char *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static void put64(unsigned char *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

static uint16_t get16(const unsigned char *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

/* A stderr line when HCOMM_LOG is set. */
static __attribute__((format(printf, 2, 3)))
void tx_log(const struct tx *tx, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!tx->log)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "hcomm tcp: rank %d: %s\n", tx->rank, line);
}

/* "ip:port" or "[ip]:port". */
static void addr_fmt(char *buf, size_t len, const char *ip, unsigned int port)
{
	snprintf(buf, len, strchr(ip, ':') ? "[%s]:%u" : "%s:%u", ip, port);
}

static void addr_of(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	unsigned int port = 0;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;

		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		port = ntohs(a->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;

		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		port = ntohs(a->sin6_port);
	}
	addr_fmt(buf, len, ip, port);
}

/* ------------------------------------------------------------------ */
/* wire format                                                         */
/* ------------------------------------------------------------------ */

/*
 * Frame header, 64 bytes, little-endian:
 *   0 magic   4 op   5 flags   6 reserved(2)   8 seq   16 ack   24 off
 *   32 len   40 value   48 win   52 sig   56 dcrc   60 hcrc
 * hcrc: CRC32C of bytes 0 .. 59; dcrc: CRC32C of the payload.
 */
static void hdr_encode(unsigned char *b, const struct tx_whdr *h)
{
	put32(b, TX_MAGIC);
	b[4] = h->op;
	b[5] = h->flags;
	put16(b + 6, h->rsvd);
	put64(b + 8, h->seq);
	put64(b + 16, h->ack);
	put64(b + 24, h->off);
	put64(b + 32, h->len);
	put64(b + 40, h->value);
	put32(b + 48, h->win);
	put32(b + 52, h->sig);
	put32(b + 56, h->dcrc);
	put32(b + 60, hcomm__crc32c(0, b, 60));
}

/* 0, or what is wrong with it. */
static const char *hdr_decode(const unsigned char *b, struct tx_whdr *h)
{
	if (get32(b) != TX_MAGIC)
		return "bad magic";
	if (get32(b + 60) != hcomm__crc32c(0, b, 60))
		return "header CRC32C mismatch";
	h->op = b[4];
	h->flags = b[5];
	h->rsvd = get16(b + 6);
	h->seq = get64(b + 8);
	h->ack = get64(b + 16);
	h->off = get64(b + 24);
	h->len = get64(b + 32);
	h->value = get64(b + 40);
	h->win = get32(b + 48);
	h->sig = get32(b + 52);
	h->dcrc = get32(b + 56);
	return NULL;
}

/*
 * Hello, 32 bytes, little-endian:
 *   0 magic   4 version(2)   6 flags(2: 1 = reply)   8 nonce
 *   16 from   20 to   24 lane   28 crc (CRC32C of bytes 0 .. 27)
 */
struct tx_hello {
	uint32_t version;
	uint32_t flags;
	uint64_t nonce;
	int32_t from;
	int32_t to;
	uint32_t lane;
};

static void hello_encode(unsigned char *b, const struct tx_hello *m)
{
	put32(b, TX_HELLO_MAGIC);
	put16(b + 4, (uint16_t)m->version);
	put16(b + 6, (uint16_t)m->flags);
	put64(b + 8, m->nonce);
	put32(b + 16, (uint32_t)m->from);
	put32(b + 20, (uint32_t)m->to);
	put32(b + 24, m->lane);
	put32(b + 28, hcomm__crc32c(0, b, 28));
}

/* 0, or what is wrong with a hello from @from to this rank. */
static const char *hello_check(const struct tx *tx, const unsigned char *b,
			       struct tx_hello *m, unsigned int reply)
{
	if (get32(b) != TX_HELLO_MAGIC)
		return "bad magic";
	if (get32(b + 28) != hcomm__crc32c(0, b, 28))
		return "CRC32C mismatch";
	m->version = get16(b + 4);
	m->flags = get16(b + 6);
	m->nonce = get64(b + 8);
	m->from = (int32_t)get32(b + 16);
	m->to = (int32_t)get32(b + 20);
	m->lane = get32(b + 24);
	if (m->version != TX_VERSION)
		return "protocol version mismatch";
	if (m->flags != reply)
		return "bad flags";
	if (m->nonce != tx->nonce)
		return "job nonce mismatch (another job?)";
	if (m->to != tx->rank)
		return "meant for another rank";
	if (m->from < 0 || m->from >= tx->size || m->from == tx->rank)
		return "bad rank";
	if (m->lane >= tx->lanes)
		return "bad lane";
	return NULL;
}

/* ------------------------------------------------------------------ */
/* operation pool                                                      */
/* ------------------------------------------------------------------ */

static int pool_init(struct tx_pool *p, unsigned int n)
{
	unsigned int i;

	p->op_mem = calloc(n, sizeof(*p->op_mem));
	p->chunk_mem = calloc(n, sizeof(*p->chunk_mem));
	if (!p->op_mem || !p->chunk_mem) {
		free(p->op_mem);
		free(p->chunk_mem);
		p->op_mem = NULL;
		p->chunk_mem = NULL;
		return -1;
	}
	for (i = 0; i < n; i++) {
		p->op_mem[i].next = i + 1 < n ? &p->op_mem[i + 1] : NULL;
		p->chunk_mem[i].onext = i + 1 < n ? &p->chunk_mem[i + 1] : NULL;
	}
	p->ops = p->op_mem;
	p->chunks = p->chunk_mem;
	p->nops = p->nchunks = n;
	pthread_mutex_init(&p->lock, NULL);
	return 0;
}

static void pool_fini(struct tx_pool *p)
{
	if (!p->op_mem)
		return;
	pthread_mutex_destroy(&p->lock);
	free(p->op_mem);
	free(p->chunk_mem);
}

/* An operation with k chunks, or NULL when the pool is short. */
static struct tx_op *pool_get(struct tx_pool *p, unsigned int k)
{
	struct tx_chunk **tail;
	struct tx_op *op = NULL;
	unsigned int i;

	pthread_mutex_lock(&p->lock);
	if (p->nops && p->nchunks >= k) {
		op = p->ops;
		p->ops = op->next;
		p->nops--;
		op->chunks = p->chunks;
		tail = &op->chunks;
		for (i = 0; i < k; i++)
			tail = &(*tail)->onext;
		p->chunks = *tail;
		*tail = NULL;
		p->nchunks -= k;
	}
	pthread_mutex_unlock(&p->lock);
	return op;
}

static void pool_put(struct tx_pool *p, struct tx_op *op)
{
	struct tx_chunk *ch, *last = NULL;
	unsigned int k = 0;

	for (ch = op->chunks; ch; ch = ch->onext) {
		last = ch;
		k++;
	}
	pthread_mutex_lock(&p->lock);
	if (last) {
		last->onext = p->chunks;
		p->chunks = op->chunks;
		p->nchunks += k;
	}
	op->next = p->ops;
	p->ops = op;
	p->nops++;
	pthread_mutex_unlock(&p->lock);
}

/* ------------------------------------------------------------------ */
/* signals                                                             */
/* ------------------------------------------------------------------ */

/*
 * Add value to signal sig (after the payload landed), then wake its
 * waiters.  The waiter's side: announce (sig_waiters), read sig_seq, check
 * the signal, sleep while sig_seq is unchanged; all seq_cst, so either the
 * check sees the add or this sees the waiter.
 */
static void sig_add(struct tx *tx, uint32_t sig, uint64_t value)
{
	/* the communicator's signals may live in another transport */
	if (hcomm__signal_deliver(tx->c, HCOMM_XP_TCP, sig, value))
		return;
	__atomic_add_fetch(&tx->sig[sig], value, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&tx->sig_seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&tx->sig_waiters, __ATOMIC_SEQ_CST))
		futex_wake(&tx->sig_seq);
}

static int tx_signal_add(struct hcomm_comm *c, uint32_t sig, uint64_t v)
{
	if (sig >= TX_NSIG)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "signal %u of %u",
				   sig, TX_NSIG);
	sig_add(tx_of(c), sig, v);
	return 0;
}

static uint32_t tx_signal_count(const struct hcomm_comm *c)
{
	(void)c;
	return TX_NSIG;
}

static uint64_t tx_signal_read(struct hcomm_comm *c, uint32_t sig)
{
	if (sig >= TX_NSIG)
		return 0;
	return __atomic_load_n(&tx_of(c)->sig[sig], __ATOMIC_ACQUIRE);
}

/* The first i < n whose signal reached its value, else -1. */
static int tx_sig_any(struct tx *tx, const uint32_t *sig, const uint64_t *val,
		      int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (__atomic_load_n(&tx->sig[sig[i]], __ATOMIC_SEQ_CST) >=
		    val[i])
			return i;
	return -1;
}

/*
 * Until one of n signals reaches its value: spin for the spin budget,
 * then sleep on the futex sig_seq, which every signal's change bumps (so
 * one sleep serves them all).
 */
static int tx_signal_wait_any(struct hcomm_comm *c, const uint32_t *sig,
			      const uint64_t *val, int n, int64_t timeout_ns)
{
	struct tx *tx = tx_of(c);
	uint64_t start = hcomm__now_ns(), deadline = UINT64_MAX, t;
	struct hcomm_spin spin;
	uint32_t seq;
	int i;

	if (timeout_ns >= 0)
		deadline = start + (uint64_t)timeout_ns;
	hcomm__spin_init(&spin, start, hcomm__spin_cap(hcomm__spin_ns(c,
			 TX_SPIN_NS), timeout_ns), 64);
	do {
		i = tx_sig_any(tx, sig, val, n);
		if (i >= 0)
			return i;
	} while (hcomm__spin(&spin));
	for (;;) {
		t = hcomm__now_ns();
		__atomic_add_fetch(&tx->sig_waiters, 1, __ATOMIC_SEQ_CST);
		seq = __atomic_load_n(&tx->sig_seq, __ATOMIC_SEQ_CST);
		i = tx_sig_any(tx, sig, val, n);
		if (i < 0 && t < deadline)
			futex_wait(&tx->sig_seq, seq, deadline == UINT64_MAX ?
				   -1 : (int64_t)(deadline - t));
		__atomic_sub_fetch(&tx->sig_waiters, 1, __ATOMIC_SEQ_CST);
		if (i < 0)
			i = tx_sig_any(tx, sig, val, n);
		if (i >= 0)
			return i;
		if (t >= deadline)
			return -HCOMM_ERR_TIMEOUT;
	}
}

/* ------------------------------------------------------------------ */
/* completions (any thread)                                            */
/* ------------------------------------------------------------------ */

static struct tx_op *node_op(struct hcomm_mpsc_node *n)
{
	return (struct tx_op *)(void *)n;
}

/*
 * Nothing to reap, again: a thread that spins on @progress (hcomm_wait
 * does for 50 us) must not keep the service thread, which finishes the
 * operations, off a CPU it shares: yield now and then.
 */
static void tx_idle(void)
{
	static __thread unsigned int idle;

	if (!(++idle % TX_YIELD_EVERY))
		sched_yield();
}

/*
 * Pop up to TX_REAP finished operations (one reaper at a time), give them
 * back to the pool, complete their requests, then run the callbacks.
 */
static int tx_progress(struct hcomm_comm *c)
{
	struct tx *tx = tx_of(c);
	struct hcomm_mpsc_node *node;
	struct hcomm_request *req[TX_REAP];
	uint64_t bytes[TX_REAP];
	int err[TX_REAP], n = 0, i;
	struct tx_op *op;

	if (!__atomic_load_n(&tx->ndone, __ATOMIC_ACQUIRE)) {
		tx_idle();
		return 0;
	}
	if (pthread_mutex_trylock(&tx->reap_lock))
		return 0;
	while (n < TX_REAP && (node = hcomm_mpsc_pop(&tx->doneq))) {
		op = node_op(node);
		req[n] = op->req;
		err[n] = op->err;
		bytes[n] = op->err ? 0 : op->len;
		pool_put(&tx->pool, op);
		n++;
	}
	__atomic_sub_fetch(&tx->ndone, (uint64_t)n, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&tx->reap_lock);
	for (i = 0; i < n; i++)
		hcomm__complete(c, req[i], err[i], bytes[i]);
	if (n)
		hcomm__run_pending();
	return n;
}

static int tx_block(struct hcomm_comm *c, struct hcomm_request *req,
		    int64_t timeout_us)
{
	struct tx *tx = tx_of(c);
	uint32_t seq;
	int n;

	n = tx_progress(c);
	if (n)
		return n;
	if (!req && __atomic_exchange_n(&tx->wake_pending, 0, __ATOMIC_ACQ_REL))
		return 0;
	__atomic_add_fetch(&tx->done_waiters, 1, __ATOMIC_SEQ_CST);
	seq = __atomic_load_n(&tx->done_seq, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&tx->ndone, __ATOMIC_SEQ_CST) &&
	    !__atomic_load_n(&tx->wake_pending, __ATOMIC_SEQ_CST))
		futex_wait(&tx->done_seq, seq,
			   timeout_us < 0 ? -1 : timeout_us * 1000);
	__atomic_sub_fetch(&tx->done_waiters, 1, __ATOMIC_SEQ_CST);
	return tx_progress(c);
}

static void done_notify(struct tx *tx)
{
	__atomic_add_fetch(&tx->done_seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&tx->done_waiters, __ATOMIC_SEQ_CST))
		futex_wake(&tx->done_seq);
}

static int tx_wake_enable(struct hcomm_comm *c)
{
	(void)c;
	return 0;
}

static void tx_wake(struct hcomm_comm *c)
{
	struct tx *tx = tx_of(c);

	__atomic_store_n(&tx->wake_pending, 1, __ATOMIC_SEQ_CST);
	done_notify(tx);
}

/* ------------------------------------------------------------------ */
/* the service thread: sending                                         */
/* ------------------------------------------------------------------ */

static __attribute__((format(printf, 4, 5)))
void conn_fail(struct tx *tx, struct tx_conn *k, int err, const char *fmt,
	       ...);
static void chunk_done(struct tx *tx, struct tx_chunk *ch, int err);

/* An SQE, submitting what is queued when the ring is full. */
static struct io_uring_sqe *sqe_get(struct tx *tx)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(&tx->ring)))
		io_uring_submit(&tx->ring);
	return sqe;
}

/* The counters of peer (a connection's; none yet: a scratch copy). */
static struct tx_pstats *pst(struct tx *tx, int peer)
{
	tx->stats_dirty = 1;
	if (peer < 0 || peer >= tx->size)
		return &tx->scratch;
	return &tx->peers[peer].st;
}

/*
 * The lane connections, as slots 0 .. size * lanes - 1 (rank r's lane l
 * at r * lanes + l): the connection, or NULL (none yet, this rank).
 */
static struct tx_conn *lane_slot(const struct tx *tx, unsigned int i)
{
	unsigned int r = i / tx->lanes;

	if ((int)r == tx->rank)
		return NULL;
	return tx->peers[r].lanes[i % tx->lanes];
}

static unsigned int lane_slots(const struct tx *tx)
{
	return (unsigned int)tx->size * tx->lanes;
}

static void conn_dirty(struct tx *tx, struct tx_conn *k)
{
	if (k->dirty)
		return;
	k->dirty = 1;
	k->dnext = tx->dirty;
	tx->dirty = k;
}

/* Work outstanding on k: then it must make progress. */
static int conn_has_work(const struct tx_conn *k)
{
	return k->uq || k->sq || k->rx == R_BULK;
}

/* An idle connection's no-progress clock starts with its work. */
static void conn_work(struct tx_conn *k)
{
	if (!conn_has_work(k))
		k->last_io = hcomm__now_ns();
}

static void sq_add(struct tx *tx, struct tx_conn *k, struct tx_frame *f)
{
	conn_work(k);
	f->next = NULL;
	f->built = 0;
	f->sent = 0;
	f->zc_id = 0;
	if (k->sq_tail)
		k->sq_tail->next = f;
	else
		k->sq = f;
	k->sq_tail = f;
	conn_dirty(tx, k);
}

/* The payload of the next segment of f: f->data, f->len, f->last. */
static void seg_next(struct tx_frame *f, const unsigned char *base)
{
	uint64_t n = f->total - f->sent;

	f->len = n > TX_SEG ? TX_SEG : n;
	f->data = f->len ? base + f->sent : NULL;
	f->last = f->sent + f->len == f->total;
}

/* The next segment of a put chunk (its CRC now), or the get request. */
static void chunk_build(struct tx_conn *k, struct tx_chunk *ch)
{
	struct tx_op *op = ch->op;
	struct tx_whdr *h = &ch->f.h;

	memset(h, 0, sizeof(*h));
	h->seq = ++k->next_seq;
	h->win = op->win;
	h->off = op->off + ch->off + ch->f.sent;
	ch->last_seq = h->seq;
	if (op->op == HCOMM_OP_GET) {
		h->op = OP_GET;
		h->len = ch->len;
		ch->f.data = NULL;
		ch->f.len = 0;
		ch->f.last = 1;
		return;
	}
	seg_next(&ch->f, (const unsigned char *)op->local + ch->off);
	h->op = OP_PUT;
	h->len = ch->f.len;
	if (k->tx->nodigest)
		h->flags = F_NODIGEST;
	else if (ch->f.len)
		h->dcrc = hcomm__crc32c(0, ch->f.data, ch->f.len);
	if (ch->f.last && op->op == HCOMM_OP_PUT_SIGNAL &&
	    (op->nchunks == 1 || op->phase)) {
		h->flags |= F_SIGNAL;
		h->sig = op->sig;
		h->value = op->value;
	}
}

/* The next segment of a get reply: its CRC of the window now. */
static void resp_build(const struct tx *tx, struct tx_resp *r)
{
	struct tx_whdr *h = &r->f.h;

	seg_next(&r->f, r->base);
	memset(h, 0, sizeof(*h));
	h->op = OP_GET_RESP;
	h->seq = r->seq;
	h->off = r->f.sent;
	h->len = r->f.len;
	if (tx->nodigest) {
		h->flags = F_NODIGEST;
		return;
	}
	win_access_begin();
	h->dcrc = r->f.len ? hcomm__crc32c(0, r->f.data, r->f.len) : 0;
	win_access_end();
}

/* Build f's (next segment's) header, with the latest ack, once. */
static void frame_build(struct tx_conn *k, struct tx_frame *f)
{
	if (f->built)
		return;
	f->built = 1;
	if (f->kind == FR_RAW)
		return;
	if (f->kind == FR_CHUNK)
		chunk_build(k, (struct tx_chunk *)(void *)f);
	else if (f->kind == FR_RESP)
		resp_build(k->tx, (struct tx_resp *)(void *)f);
	f->h.ack = k->applied;
	hdr_encode(f->hdr, &f->h);
	k->ack_sent = k->applied;
}

static void resp_free(struct tx *tx, struct tx_conn *k, struct tx_resp *r)
{
	tx->wins[r->slot].refs--;
	k->nresp--;
	r->nfree = tx->resp_free;
	tx->resp_free = r;
}

/* Pop the requests at the head of @uq that have finished, in order. */
static void conn_advance(struct tx *tx, struct tx_conn *k)
{
	struct tx_chunk *ch;

	while ((ch = k->uq) && (ch->st & CH_SENT) &&
	       (ch->op->op == HCOMM_OP_GET ? (ch->st & CH_DATA) :
					     ch->last_seq <= k->acked)) {
		k->uq = ch->unext;
		if (!k->uq)
			k->uq_tail = NULL;
		chunk_done(tx, ch, 0);
	}
}

/* Every byte of f went out (and its ZC notifications came). */
static void frame_sent(struct tx *tx, struct tx_conn *k, struct tx_frame *f)
{
	struct tx_pstats *s = pst(tx, k->peer);

	switch (f->kind) {
	case FR_CHUNK:
		((struct tx_chunk *)(void *)f)->st |= CH_SENT;
		s->ops_sent++;
		s->bytes_sent += f->total;
		conn_advance(tx, k);
		break;
	case FR_RESP:
		s->bytes_sent += f->total;
		resp_free(tx, k, (struct tx_resp *)(void *)f);
		break;
	case FR_CTRL:
		if (f == &k->ctlf)
			k->ctl_queued = 0;
		break;
	}
}

/* Release the ZC-sent frames whose notifications all came. */
static void zq_release(struct tx *tx, struct tx_conn *k)
{
	struct tx_frame *f;

	while ((f = k->zq) && f->zc_id < k->zc_low) {
		k->zq = f->next;
		if (!k->zq)
			k->zq_tail = NULL;
		frame_sent(tx, k, f);
	}
}

static void zq_add(struct tx_conn *k, struct tx_frame *f)
{
	f->next = NULL;
	if (k->zq_tail)
		k->zq_tail->next = f;
	else
		k->zq = f;
	k->zq_tail = f;
}

static void zc_notified(struct tx *tx, struct tx_zrec *z)
{
	struct tx_conn *k = z->k;

	z->done = 1;
	k->notifs--;
	while (k->zc_low < k->zc_next && k->zrec[k->zc_low % TX_ZREC].done) {
		k->zrec[k->zc_low % TX_ZREC].done = 0;
		k->zc_low++;
	}
	if (k->state != K_DEAD) {
		zq_release(tx, k);
		conn_dirty(tx, k);	/* a segment may wait for this */
	}
}

/* Frame bytes on the wire. */
static uint64_t frame_bytes(const struct tx_frame *f)
{
	return f->hlen + f->len;
}

/*
 * Append the unsent part of f (skip bytes gone), or the first room bytes
 * of its payload, to the iovec; returns the bytes.
 */
static uint64_t iov_add(struct tx_conn *k, unsigned int *n,
			struct tx_frame *f, uint64_t skip, uint64_t room)
{
	uint64_t total = 0, len;

	if (skip < f->hlen) {
		k->iov[*n].iov_base = f->hdr + skip;
		k->iov[*n].iov_len = f->hlen - skip;
		total += f->hlen - skip;
		(*n)++;
		skip = 0;
	} else {
		skip -= f->hlen;
	}
	if (f->len > skip) {
		len = f->len - skip;
		if (len > room)
			len = room;	/* the rest in the next sendmsg */
		k->iov[*n].iov_base = (char *)f->data + skip;
		k->iov[*n].iov_len = len;
		total += len;
		(*n)++;
	}
	return total;
}

/* Payload bytes of f's current segment, or of its next one to build. */
static uint64_t frame_seg_len(const struct tx_frame *f)
{
	uint64_t n = f->total - f->sent;

	if (f->built)
		return f->len;
	return n > TX_SEG ? TX_SEG : n;
}

/* 1 when f goes with SENDMSG_ZC (alone). */
static int frame_zc(const struct tx *tx, const struct tx_conn *k,
		    const struct tx_frame *f)
{
	return tx->zc_min && k->zc_ok && frame_seg_len(f) >= tx->zc_min &&
	       k->zc_next - k->zc_low < TX_ZREC;
}

/*
 * A zero-copy send may read f's header (and payload) until its
 * notification: the next segment, which rewrites the header, waits.
 */
static int frame_zc_busy(const struct tx_conn *k, const struct tx_frame *f)
{
	return !f->built && f->zc_id && f->zc_id >= k->zc_low;
}

/* Queue the ack (or bye) frame f of k: a header only. */
static void ctl_frame(struct tx *tx, struct tx_conn *k, struct tx_frame *f,
		      uint8_t op)
{
	memset(&f->h, 0, sizeof(f->h));
	f->h.op = op;
	f->kind = FR_CTRL;
	f->hlen = TX_HDR;
	f->data = NULL;
	f->len = 0;
	f->total = 0;
	f->last = 1;
	sq_add(tx, k, f);
}

/*
 * Start the next sendmsg of k: the frames at the head of its queue,
 * headers built now (so they carry the latest ack), up to TX_IOV iovecs or
 * about TX_GATHER bytes (a larger payload goes in pieces of TX_GATHER, so
 * that the connection shows progress); a frame for SENDMSG_ZC goes alone.
 * With nothing to send but an ack owed, an ack frame.
 */
static void conn_send(struct tx *tx, struct tx_conn *k)
{
	struct io_uring_sqe *sqe;
	struct tx_frame *f;
	uint64_t total = 0, skip = k->sq_off;
	unsigned int n = 0;
	struct tx_zrec *z;
	int zc = 0;

	if (k->state != K_UP || k->tx_busy)
		return;
	if (!k->sq && !k->ctl_queued && k->applied > k->ack_sent) {
		k->ctl_queued = 1;
		ctl_frame(tx, k, &k->ctlf, OP_ACK);
	}
	for (f = k->sq; f && n + 2 <= TX_IOV && total < TX_GATHER;
	     f = f->next) {
		if (frame_zc_busy(k, f))
			break;
		if (frame_zc(tx, k, f)) {
			if (n)
				break;
			zc = 1;
		}
		frame_build(k, f);
		total += iov_add(k, &n, f, skip, TX_GATHER);
		skip = 0;
		if (zc || !f->last)	/* its next segment: next time */
			break;
	}
	if (!n)
		return;
	memset(&k->mh, 0, sizeof(k->mh));
	k->mh.msg_iov = k->iov;
	k->mh.msg_iovlen = n;
	sqe = sqe_get(tx);
	if (zc) {
		z = &k->zrec[k->zc_next % TX_ZREC];
		z->k = k;
		z->id = k->zc_next++;
		z->done = 0;
		io_uring_prep_sendmsg_zc(sqe, k->fd, &k->mh,
					 MSG_WAITALL | MSG_NOSIGNAL);
		io_uring_sqe_set_data64(sqe, (uintptr_t)z | UD_ZC);
	} else {
		io_uring_prep_sendmsg(sqe, k->fd, &k->mh,
				      MSG_WAITALL | MSG_NOSIGNAL);
		io_uring_sqe_set_data64(sqe, (uintptr_t)k | UD_TX);
	}
	k->tx_busy = 1;
	k->busy++;
}

static void conn_check_dead(struct tx *tx, struct tx_conn *k);

/*
 * A sendmsg of k completed with res; zc_id: its ZC id (0: plain).  Fully
 * sent frames leave the queue: to the ZC queue when a ZC send carried some
 * of their bytes, else they are done.
 */
static void conn_sent(struct tx *tx, struct tx_conn *k, int res,
		      uint32_t zc_id)
{
	struct tx_frame *f;
	uint64_t bytes, rem;

	k->tx_busy = 0;
	k->busy--;
	if (k->state == K_DEAD) {
		conn_check_dead(tx, k);
		return;
	}
	if (res < 0) {
		conn_fail(tx, k, -res, "send");	/* k may be gone */
		return;
	}
	k->last_io = hcomm__now_ns();
	for (bytes = (uint64_t)res; bytes && (f = k->sq); ) {
		rem = frame_bytes(f) - k->sq_off;
		if (zc_id)
			f->zc_id = zc_id;
		if (bytes < rem) {
			k->sq_off += bytes;
			break;
		}
		bytes -= rem;
		k->sq_off = 0;
		if (!f->last) {		/* the next segment, rebuilt */
			f->sent += f->len;
			f->built = 0;
			continue;
		}
		k->sq = f->next;
		if (!k->sq)
			k->sq_tail = NULL;
		if (f->zc_id && f->zc_id >= k->zc_low)
			zq_add(k, f);
		else
			frame_sent(tx, k, f);
	}
	conn_dirty(tx, k);
}

/* ------------------------------------------------------------------ */
/* the service thread: operations                                      */
/* ------------------------------------------------------------------ */

static void fences_check(struct tx *tx);

/* The operation finished: hand it to the reapers. */
static void op_finish(struct tx *tx, struct tx_op *op)
{
	if (op->prev)
		op->prev->next = op->next;
	else
		tx->out_head = op->next;
	if (op->next)
		op->next->prev = op->prev;
	else
		tx->out_tail = op->prev;
	hcomm_mpsc_push(&tx->doneq, &op->m.node);
	__atomic_add_fetch(&tx->ndone, 1, __ATOMIC_SEQ_CST);
	done_notify(tx);
	fences_check(tx);
}

/* A live lane of peer p for chunk i (round robin), or NULL. */
static struct tx_conn *peer_lane(struct tx_peer *p, unsigned int i)
{
	struct tx_conn *k;
	unsigned int j;

	for (j = 0; j < p->nlanes; j++) {
		k = p->lanes[(p->rr + i + j) % p->nlanes];
		if (k && k->state == K_UP && !k->bye_in)
			return k;
	}
	return NULL;
}

/*
 * Queue ch on k: in its unacknowledged queue now, on the wire as it is
 * gathered (its sequence numbers, headers and CRCs are made then).
 */
static void chunk_queue(struct tx *tx, struct tx_conn *k, struct tx_chunk *ch)
{
	int put = ch->op->op != HCOMM_OP_GET;

	conn_work(k);
	ch->f.kind = FR_CHUNK;
	ch->f.hlen = TX_HDR;
	ch->f.total = put ? ch->len : 0;
	ch->conn = k;
	ch->st = 0;
	ch->got = 0;
	ch->last_seq = 0;	/* no reply matches it before it is built */
	ch->unext = NULL;
	if (k->uq_tail)
		k->uq_tail->unext = ch;
	else
		k->uq = ch;
	k->uq_tail = ch;
	if (!put) {
		ch->gnext = NULL;
		if (k->gq_tail)
			k->gq_tail->gnext = ch;
		else
			k->gq = ch;
		k->gq_tail = ch;
	}
	sq_add(tx, k, &ch->f);
}

/* Peer p has no lane left: why. */
static int peer_err(const struct tx_peer *p)
{
	return p->err ? p->err : ECONNRESET;
}

/* A new operation from the submission queue. */
static void op_start(struct tx *tx, struct tx_op *op)
{
	struct tx_peer *p = &tx->peers[op->target];
	struct tx_chunk *ch;
	struct tx_conn *k;
	unsigned int i = 0;

	op->dseq = ++tx->dseq;
	op->prev = tx->out_tail;
	op->next = NULL;
	if (tx->out_tail)
		tx->out_tail->next = op;
	else
		tx->out_head = op;
	tx->out_tail = op;
	op->pending = op->nchunks;
	op->phase = 0;
	op->err = 0;
	if (!peer_lane(p, 0)) {
		op->err = peer_err(p);
		op_finish(tx, op);
		return;
	}
	if (op->ordered) {
		/*
		 * One chunk on lane 0: the internal operations to p are
		 * applied there in the order they were posted (puts and
		 * signals; a get's reply reads the window when it is sent).
		 * Lane 0 down fails them: p's failover with it.
		 */
		k = p->lanes[0];
		if (!k || k->state != K_UP || k->bye_in) {
			op->err = peer_err(p);
			op_finish(tx, op);
			return;
		}
		chunk_queue(tx, k, op->chunks);
		return;
	}
	for (ch = op->chunks; ch; ch = ch->onext)
		chunk_queue(tx, peer_lane(p, i++), ch);
	p->rr++;
}

/*
 * Chunk ch finished (err 0) or failed.  The operation finishes with its
 * last chunk; a striped put_signal first sends its signal (with the first
 * chunk, reused), once every data chunk landed.
 */
static void chunk_done(struct tx *tx, struct tx_chunk *ch, int err)
{
	struct tx_op *op = ch->op;
	struct tx_peer *p;
	struct tx_conn *k;

	if (err && !op->err)
		op->err = err;
	if (--op->pending)
		return;
	if (op->op == HCOMM_OP_PUT_SIGNAL && op->nchunks > 1 && !op->phase &&
	    !op->err) {
		p = &tx->peers[op->target];
		k = peer_lane(p, 0);
		if (k) {
			op->phase = 1;
			op->pending = 1;
			ch = op->chunks;
			ch->off = 0;
			ch->len = 0;
			chunk_queue(tx, k, ch);
			return;
		}
		op->err = peer_err(p);
	}
	op_finish(tx, op);
}

/* ------------------------------------------------------------------ */
/* the service thread: connection failure                              */
/* ------------------------------------------------------------------ */

static void conn_free(struct tx *tx, struct tx_conn *k)
{
	struct tx_conn **pp;

	for (pp = &tx->guests; *pp; pp = &(*pp)->next)
		if (*pp == k) {
			*pp = k->next;
			tx->nguests--;
			break;
		}
	/* a guest closed while it waited to send (dirty_kick) */
	for (pp = &tx->dirty; k->dirty && *pp; pp = &(*pp)->dnext)
		if (*pp == k) {
			*pp = k->dnext;
			break;
		}
	free(k->buf);
	free(k);
}

static uint64_t conn_retrans(const struct tx_conn *k)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (k->fd < 0 || getsockopt(k->fd, IPPROTO_TCP, TCP_INFO, &ti, &len))
		return 0;
	return ti.tcpi_total_retrans;
}

/*
 * Once nothing of a dead connection is in flight any more: close it, fail
 * its requests, drop the frames it still held; a guest is freed once its
 * ZC notifications came too.
 */
static void conn_check_dead(struct tx *tx, struct tx_conn *k)
{
	struct tx_frame *f, *next;
	struct tx_chunk *ch;
	int err = k->err;

	if (k->state != K_DEAD || k->busy)
		return;
	if (!k->finalized) {
		k->finalized = 1;
		pst(tx, k->peer)->retrans += conn_retrans(k);
		if (k->fd >= 0)
			close(k->fd);
		k->fd = -1;
		if (k->cur_slot)
			tx->wins[k->cur_slot - 1].refs--;
		k->cur_slot = 0;
		for (f = k->sq; f; f = next) {
			next = f->next;
			if (f->kind == FR_RESP)
				resp_free(tx, k, (struct tx_resp *)(void *)f);
		}
		for (f = k->zq; f; f = next) {
			next = f->next;
			if (f->kind == FR_RESP)
				resp_free(tx, k, (struct tx_resp *)(void *)f);
		}
		k->sq = k->sq_tail = k->zq = k->zq_tail = NULL;
		k->gq = k->gq_tail = NULL;
		while ((ch = k->uq)) {
			k->uq = ch->unext;
			chunk_done(tx, ch, err);
		}
		k->uq_tail = NULL;
	}
	if (!k->notifs && k->lane < 0)
		conn_free(tx, k);
}

/*
 * Close k for err (a positive errno): counted, logged, every request on
 * it fails with err once its SQEs are back.
 */
static void conn_fail(struct tx *tx, struct tx_conn *k, int err,
		      const char *fmt, ...)
{
	struct tx_peer *p = k->peer >= 0 ? &tx->peers[k->peer] : NULL;
	int quiet = err == ECONNRESET && k->bye_in && !k->uq;
	char why[256];
	va_list ap;

	if (k->state == K_DEAD)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (!quiet) {
		pst(tx, k->peer)->lost++;
		tx_log(tx, "connection %s rank %d (%s) lane %d closed: %s: %s",
		       k->lane >= 0 ? "to" : "from guest", k->peer, k->addr,
		       k->lane, why, strerror(err));
	}
	/*
	 * The peer's first lane to fail says what happened to it: a reset
	 * or an end of stream came from its kernel (the host answers, the
	 * process closed or exited: the peer is lost); anything else
	 * (silence, a bad frame or CRC, a local error) is the link's.
	 */
	if (p && k->lane >= 0 && !p->err && !quiet)
		hcomm__event(tx->c, err == ECONNRESET || err == EPIPE ?
			     HCOMM_EVENT_PEER_LOST : HCOMM_EVENT_LINK_DOWN,
			     k->peer, HCOMM_XP_TCP,
			     err == ETIMEDOUT ? HCOMM_ERR_TIMEOUT : HCOMM_ERR_IO,
			     err == ETIMEDOUT ? hcomm__now_ns() - k->last_io : 0,
			     "tcp lane %d to %s: %s: %s", k->lane, k->addr, why,
			     strerror(err));
	if (p && k->lane >= 0)
		__atomic_store_n(&p->err, err, __ATOMIC_RELEASE);
	k->state = K_DEAD;
	k->err = err;
	shutdown(k->fd, SHUT_RDWR);
	conn_check_dead(tx, k);
}

/* ------------------------------------------------------------------ */
/* the service thread: receiving                                       */
/* ------------------------------------------------------------------ */

/* Arm the receive of k for what its state expects. */
static void conn_recv(struct tx *tx, struct tx_conn *k)
{
	struct io_uring_sqe *sqe;

	if (k->state == K_DEAD || k->rx_busy)
		return;
	sqe = sqe_get(tx);
	switch (k->rx) {
	case R_HELLO:
		io_uring_prep_recv(sqe, k->fd, k->hello + k->len,
				   TX_HELLO - k->len, 0);
		break;
	case R_BULK:
		io_uring_prep_recv(sqe, k->fd, k->dst, k->need > TX_BULK ?
				   TX_BULK : k->need, MSG_WAITALL);
		break;
	default:
		if (k->pos) {
			memmove(k->buf, k->buf + k->pos, k->len - k->pos);
			k->len -= k->pos;
			k->pos = 0;
		}
		/* parse() left less than a header in buf */
		io_uring_prep_recv(sqe, k->fd, k->buf + k->len,
				   k->hdr_only ? TX_HDR - k->len :
				   tx->stage - k->len, 0);
		break;
	}
	io_uring_sqe_set_data64(sqe, (uintptr_t)k | UD_RX);
	k->rx_busy = 1;
	k->busy++;
}

static struct tx_win *win_get(struct tx *tx, uint32_t id)
{
	uint32_t s = (id & TX_WIN_SLOT) - 1;

	if (!(id & TX_WIN_SLOT) || s >= tx->nwins || tx->wins[s].id != id)
		return NULL;
	return &tx->wins[s];
}

/* A refused frame: counted, logged, the connection closed. */
#define refuse(tx, k, ...) do {						\
	pst(tx, (k)->peer)->refused++;					\
	conn_fail(tx, k, EPROTO, __VA_ARGS__);				\
} while (0)

/* Check w, off, len of a put or get; the window or NULL (refused). */
static struct tx_win *frame_win(struct tx *tx, struct tx_conn *k,
				const struct tx_whdr *h)
{
	struct tx_win *w = win_get(tx, h->win);

	if (!w) {
		refuse(tx, k, "frame for unknown window %#x", h->win);
		return NULL;
	}
	if (h->off > w->len || h->len > w->len - h->off) {
		refuse(tx, k, "frame of %llu bytes at offset %llu of a "
		       "%llu-byte window", (unsigned long long)h->len,
		       (unsigned long long)h->off, (unsigned long long)w->len);
		return NULL;
	}
	return w;
}

/* Where the payload of a put or get reply goes; 0 or refused (-1). */
static int frame_dest(struct tx *tx, struct tx_conn *k, struct tx_whdr *h)
{
	struct tx_win *w;
	struct tx_chunk *ch;

	switch (h->op) {
	case OP_PUT:
		if ((h->flags & ~(F_SIGNAL | F_NODIGEST)) || h->rsvd ||
		    (h->flags & F_SIGNAL ? h->sig >= TX_NSIG :
					   h->sig || h->value) ||
		    (h->flags & F_NODIGEST && h->dcrc))
			break;
		if (h->seq != k->applied + 1) {
			refuse(tx, k, "sequence %llu after %llu",
			       (unsigned long long)h->seq,
			       (unsigned long long)k->applied);
			return -1;
		}
		if (h->len > TX_SEG) {
			refuse(tx, k, "put segment of %llu bytes (at most %u)",
			       (unsigned long long)h->len, TX_SEG);
			return -1;
		}
		w = frame_win(tx, k, h);
		if (!w)
			return -1;
		k->dst = w->base + h->off;
		k->need = h->len;
		k->cur_slot = (uint32_t)(w - tx->wins) + 1;
		w->refs++;
		return 0;
	case OP_GET:
		if (h->flags || h->rsvd || h->sig || h->value || h->dcrc)
			break;
		if (h->seq != k->applied + 1) {
			refuse(tx, k, "sequence %llu after %llu",
			       (unsigned long long)h->seq,
			       (unsigned long long)k->applied);
			return -1;
		}
		return frame_win(tx, k, h) ? 0 : -1;
	case OP_GET_RESP:
		ch = k->gq;
		if ((h->flags & ~F_NODIGEST) || h->rsvd || h->sig ||
		    h->value || h->win || (h->flags & F_NODIGEST && h->dcrc))
			break;
		if (!ch || ch->last_seq != h->seq || h->len > TX_SEG ||
		    h->off != ch->got || h->len > ch->len - ch->got ||
		    (!h->len && ch->len)) {
			refuse(tx, k, "reply to get %llu: %llu bytes at %llu, "
			       "expected get %llu at %llu",
			       (unsigned long long)h->seq,
			       (unsigned long long)h->len,
			       (unsigned long long)h->off,
			       ch ? (unsigned long long)ch->last_seq : 0ULL,
			       ch ? (unsigned long long)ch->got : 0ULL);
			return -1;
		}
		k->dst = (unsigned char *)ch->op->local + ch->off + h->off;
		k->need = h->len;
		k->gch = ch;
		return 0;
	case OP_ACK:
	case OP_BYE:
		if (h->flags || h->rsvd || h->seq || h->off || h->len ||
		    h->value || h->win || h->sig || h->dcrc)
			break;
		return 0;
	}
	refuse(tx, k, "malformed frame (op %u flags %#x)", h->op, h->flags);
	return -1;
}

/* Header at b: decode and check it, set where its payload goes. */
static int frame_begin(struct tx *tx, struct tx_conn *k,
		       const unsigned char *b)
{
	const char *bad = hdr_decode(b, &k->cur);

	if (bad) {
		refuse(tx, k, "frame header: %s", bad);
		return -1;
	}
	if (k->bye_in) {
		refuse(tx, k, "frame after bye");
		return -1;
	}
	k->dst = NULL;
	k->need = 0;
	k->crc = 0;
	k->gch = NULL;
	return frame_dest(tx, k, &k->cur);
}

/* A GET to serve: queue the reply (its segments made as they go out). */
static int get_reply(struct tx *tx, struct tx_conn *k,
		     const struct tx_whdr *h)
{
	struct tx_win *w = win_get(tx, h->win);
	struct tx_resp *r = tx->resp_free;

	if (k->nresp >= TX_RESP_MAX) {
		refuse(tx, k, "more than %u gets unanswered", TX_RESP_MAX);
		return -1;
	}
	if (r) {
		tx->resp_free = r->nfree;
	} else {
		r = calloc(1, sizeof(*r));
		if (!r) {
			conn_fail(tx, k, ENOMEM, "get reply");
			return -1;
		}
	}
	r->seq = h->seq;
	r->base = w->base + h->off;
	r->f.total = h->len;
	r->f.kind = FR_RESP;
	r->f.hlen = TX_HDR;
	r->slot = (uint32_t)(w - tx->wins);
	w->refs++;
	k->nresp++;
	sq_add(tx, k, &r->f);
	return 0;
}

/* The acknowledgment in a frame: monotonic, for what was sent. */
static int conn_acked(struct tx *tx, struct tx_conn *k, uint64_t ack)
{
	if (ack < k->acked || ack > k->next_seq) {
		refuse(tx, k, "ack %llu (acked %llu, sent %llu)",
		       (unsigned long long)ack, (unsigned long long)k->acked,
		       (unsigned long long)k->next_seq);
		return -1;
	}
	k->acked = ack;
	conn_advance(tx, k);
	return 0;
}

/* The whole frame arrived: check its CRC, then apply it. */
static int frame_end(struct tx *tx, struct tx_conn *k)
{
	struct tx_whdr *h = &k->cur;
	struct tx_pstats *s = pst(tx, k->peer);
	const unsigned char *base = NULL;

	if (k->cur_slot) {
		base = tx->wins[k->cur_slot - 1].base;
		tx->wins[k->cur_slot - 1].refs--;
		k->cur_slot = 0;
	}
	if (!(h->flags & F_NODIGEST) && k->crc != h->dcrc) {
		s->crc_errors++;
		conn_fail(tx, k, EBADMSG, "payload CRC32C mismatch (op %u, "
			  "%llu bytes at offset %llu)", h->op,
			  (unsigned long long)h->len,
			  (unsigned long long)h->off);
		return -1;
	}
	switch (h->op) {
	case OP_PUT:
		/*
		 * Its bytes are seen before any later frame's of this
		 * connection (a failover's count, then its epoch).
		 */
		__atomic_thread_fence(__ATOMIC_RELEASE);
		k->applied = h->seq;
		s->ops_recv++;
		s->bytes_recv += h->len;
		if (h->flags & F_SIGNAL)
			sig_add(tx, h->sig, h->value);
		/* a peer's rdma failover told us something: look now */
		if (base && base == tx->c->fo_mem)
			hcomm__rdma_fo_kick(tx->c);
		conn_dirty(tx, k);
		break;
	case OP_GET:
		k->applied = h->seq;
		s->ops_recv++;
		if (get_reply(tx, k, h))
			return -1;
		break;
	case OP_GET_RESP:
		s->bytes_recv += h->len;
		k->gch->got += h->len;
		if (k->gch->got < k->gch->len)
			break;
		k->gch->st |= CH_DATA;
		k->gq = k->gch->gnext;
		if (!k->gq)
			k->gq_tail = NULL;
		break;
	case OP_BYE:
		k->bye_in = 1;
		break;
	}
	return conn_acked(tx, k, h->ack);
}

static void crc_add(struct tx_conn *k, const unsigned char *p, uint64_t n)
{
	if (!(k->cur.flags & F_NODIGEST))
		k->crc = hcomm__crc32c(k->crc, p, n);
}

/* Frames in the staging buffer; a large payload continues as R_BULK. */
static void parse(struct tx *tx, struct tx_conn *k)
{
	uint64_t take;

	while (k->state == K_UP && k->len - k->pos >= TX_HDR) {
		if (frame_begin(tx, k, k->buf + k->pos))
			return;
		k->pos += TX_HDR;
		k->hdr_only = k->need >= TX_STAGE_MIN;
		take = k->len - k->pos;
		if (take > k->need)
			take = k->need;
		if (take) {
			win_access_begin();
			memcpy(k->dst, k->buf + k->pos, take);
			win_access_end();
			crc_add(k, k->buf + k->pos, take);
			k->dst += take;
			k->need -= take;
			k->pos += (uint32_t)take;
		}
		if (k->need) {
			k->rx = R_BULK;
			break;
		}
		if (frame_end(tx, k))
			return;
	}
	if (k->pos == k->len)
		k->pos = k->len = 0;
}

static void hello_in(struct tx *tx, struct tx_conn *k);

/* What a receive of res bytes (or -errno, 0: EOF) brought to k. */
static void conn_rx(struct tx *tx, struct tx_conn *k, int res)
{
	if (res <= 0) {
		if (!res)
			conn_fail(tx, k, ECONNRESET, "closed by the peer");
		else
			conn_fail(tx, k, -res, "recv");
		return;
	}
	k->last_io = hcomm__now_ns();
	switch (k->rx) {
	case R_HELLO:
		k->len += (uint32_t)res;
		if (k->len == TX_HELLO)
			hello_in(tx, k);
		break;
	case R_BULK:
		win_access_begin();
		crc_add(k, k->dst, (uint64_t)res);
		win_access_end();
		k->dst += res;
		k->need -= (uint64_t)res;
		if (k->need)
			break;
		k->rx = R_HDR;
		if (!frame_end(tx, k))
			parse(tx, k);
		break;
	default:
		k->len += (uint32_t)res;
		parse(tx, k);
		break;
	}
}

/*
 * A receive of k completed.  Its SQE counts in k->busy until the end, so
 * that a failure on the way cannot free k under us; then receive again,
 * or let a dead k go.
 */
static void conn_received(struct tx *tx, struct tx_conn *k, int res)
{
	k->rx_busy = 0;
	if (k->state != K_DEAD)
		conn_rx(tx, k, res);
	k->busy--;
	if (k->state == K_DEAD)
		conn_check_dead(tx, k);
	else
		conn_recv(tx, k);
}

/* ------------------------------------------------------------------ */
/* the service thread: accepting                                       */
/* ------------------------------------------------------------------ */

static void accept_arm(struct tx *tx)
{
	struct io_uring_sqe *sqe;

	if (tx->accept_armed || tx->lfd < 0 || tx->stop)
		return;
	sqe = sqe_get(tx);
	io_uring_prep_accept(sqe, tx->lfd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, (uintptr_t)tx | UD_ACCEPT);
	tx->accept_armed = 1;
}

/*
 * The largest buffer the kernel's autotuning gives a TCP socket: the third
 * field of net.ipv4.tcp_wmem or tcp_rmem (0 if unreadable).
 */
static uint64_t autotune_max(const char *path)
{
	unsigned long long lo, def, max;
	FILE *f = fopen(path, "re");
	int n;

	if (!f)
		return 0;
	n = fscanf(f, "%llu %llu %llu", &lo, &def, &max);
	fclose(f);
	return n == 3 ? max : 0;
}

/*
 * send_buf_size and recv_buf_size are the least socket buffers a
 * connection gets.  A buffer set with SO_SNDBUF/SO_RCVBUF is fixed: it
 * turns the kernel's autotuning off for that socket, and with either set
 * (2M, the default) a 1 MiB put stream between the test bed's VMs ran at
 * half the rate of leaving both to the kernel.  So a size is set only
 * when autotuning cannot reach it (above net.ipv4.tcp_wmem / tcp_rmem's
 * maximum); otherwise the kernel grows the buffer as the path needs.
 * A size set is given in full where the process may (SO_SNDBUFFORCE /
 * SO_RCVBUFFORCE need CAP_NET_ADMIN), else up to net.core.wmem_max /
 * rmem_max (a guest's default is 208K: the 2M asked for used to become
 * that, silently); HCOMM_LOG says so.
 */
static void sock_bufs(struct tx *tx)
{
	const struct hcomm_config *cfg = &tx->c->cfg;

	if (cfg->send_buf_size >
	    autotune_max("/proc/sys/net/ipv4/tcp_wmem"))
		tx->sndbuf = (int)cfg->send_buf_size;
	if (cfg->recv_buf_size >
	    autotune_max("/proc/sys/net/ipv4/tcp_rmem"))
		tx->rcvbuf = (int)cfg->recv_buf_size;
}

static void sock_buf(struct tx *tx, int fd, int force, int opt, int v,
		     const char *name)
{
	socklen_t len = sizeof(int);
	int got = 0;

	if (!v)
		return;
	if (setsockopt(fd, SOL_SOCKET, force, &v, sizeof(v)))
		(void)setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
	if (!getsockopt(fd, SOL_SOCKET, opt, &got, &len) && got < v &&
	    !__atomic_exchange_n(&tx->buf_capped, 1, __ATOMIC_RELAXED))
		tx_log(tx, "%s %d capped at %d (net.core.%s; raise it, or run "
		       "with CAP_NET_ADMIN)", name, v, got / 2,
		       opt == SO_SNDBUF ? "wmem_max" : "rmem_max");
}

static void sock_opts(struct tx *tx, int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	sock_buf(tx, fd, SO_SNDBUFFORCE, SO_SNDBUF, tx->sndbuf,
		 "HCOMM_SEND_BUF_SIZE");
	sock_buf(tx, fd, SO_RCVBUFFORCE, SO_RCVBUF, tx->rcvbuf,
		 "HCOMM_RECV_BUF_SIZE");
}

/* Is fd's peer this host's loopback (127.0.0.0/8, ::1, ::ffff:127.x)? */
static int sock_loopback(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	const struct sockaddr_in6 *a6 = (const void *)&ss;
	const struct sockaddr_in *a4 = (const void *)&ss;

	if (getpeername(fd, (struct sockaddr *)&ss, &len))
		return 0;
	if (ss.ss_family == AF_INET)
		return (ntohl(a4->sin_addr.s_addr) >> 24) == 127;
	if (ss.ss_family != AF_INET6)
		return 0;
	if (IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr))
		return 1;
	return IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr) &&
	       a6->sin6_addr.s6_addr[12] == 127;
}

static struct tx_conn *conn_new(struct tx *tx, int fd, int peer, int lane)
{
	struct tx_conn *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	if (lane >= 0 || peer >= 0) {
		k->buf = malloc(tx->stage);
		if (!k->buf) {
			free(k);
			return NULL;
		}
	}
	k->tx = tx;
	k->fd = fd;
	k->peer = peer;
	k->lane = lane;
	k->state = peer >= 0 ? K_UP : K_HELLO;
	k->rx = peer >= 0 ? R_HDR : R_HELLO;
	k->zc_next = k->zc_low = 1;
	/*
	 * By default no zero copy over loopback: the receiver copies from
	 * the sender's pages anyway and each send adds a notification (it
	 * ran at half the speed there); to a NIC it saves the sender's copy.
	 */
	k->zc_ok = tx->zc_set || !sock_loopback(fd);
	k->t0 = k->last_io = hcomm__now_ns();
	return k;
}

/* A connection came (res: its fd or -errno); 1: accept the next now. */
static int accept_done(struct tx *tx, int res)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct tx_conn *k;

	tx->accept_armed = 0;
	if (res < 0) {
		if (!tx->stop)
			tx_log(tx, "accept: %s", strerror(-res));
		return res == -ECONNABORTED || res == -EINTR;
	}
	k = tx->nguests < TX_GUESTS ? conn_new(tx, res, -1, -1) : NULL;
	if (!k) {
		tx->refused++;
		tx->stats_dirty = 1;
		tx_log(tx, "connection refused: %s", tx->nguests >= TX_GUESTS ?
		       "too many guests" : strerror(ENOMEM));
		close(res);
		return 1;
	}
	if (getpeername(res, (struct sockaddr *)&ss, &sl))
		snprintf(k->addr, sizeof(k->addr), "?");
	else
		addr_of(&ss, k->addr, sizeof(k->addr));
	sock_opts(tx, res);
	k->next = tx->guests;
	tx->guests = k;
	tx->nguests++;
	conn_recv(tx, k);
	return 1;
}

/* Send this rank's hello reply first on k. */
static void hello_reply(struct tx *tx, struct tx_conn *k, uint32_t lane)
{
	struct tx_hello m = {
		.version = TX_VERSION, .flags = 1, .nonce = tx->nonce,
		.from = tx->rank, .to = k->peer, .lane = lane,
	};

	hello_encode(k->rawf.hdr, &m);
	k->rawf.kind = FR_RAW;
	k->rawf.hlen = TX_HELLO;
	k->rawf.data = NULL;
	k->rawf.len = 0;
	k->rawf.total = 0;
	k->rawf.last = 1;
	sq_add(tx, k, &k->rawf);
}

/* A connection in its hello goes (the caller's completion frees it). */
static void conn_drop(struct tx_conn *k, int err)
{
	k->state = K_DEAD;
	k->err = err;
	if (k->fd >= 0)
		shutdown(k->fd, SHUT_RDWR);
}

/*
 * The hello of accepted connection k arrived: refuse it, make it the lane
 * it names (a lower rank's, not up yet), or keep it as a guest.
 */
static void hello_in(struct tx *tx, struct tx_conn *k)
{
	struct tx_hello m;
	const char *bad = hello_check(tx, k->hello, &m, 0);
	struct tx_conn *l, **slot;

	if (bad) {
		tx->refused++;
		tx->stats_dirty = 1;
		tx_log(tx, "refused connection from %s: hello: %s", k->addr,
		       bad);
		conn_drop(k, EPROTO);
		return;
	}
	slot = &tx->peers[m.from].lanes[m.lane];
	l = m.from < tx->rank && !*slot ?
	    conn_new(tx, k->fd, m.from, (int)m.lane) : NULL;
	if (l) {
		memcpy(l->addr, k->addr, sizeof(l->addr));
		*slot = l;
		k->fd = -1;		/* l's now; k goes */
		conn_drop(k, 0);
		hello_reply(tx, l, m.lane);
		conn_recv(tx, l);
		return;
	}
	k->buf = malloc(tx->stage);
	if (!k->buf) {
		tx_log(tx, "guest from %s: %s", k->addr, strerror(ENOMEM));
		conn_drop(k, ENOMEM);
		return;
	}
	k->peer = m.from;
	k->state = K_UP;
	k->rx = R_HDR;
	k->len = 0;
	hello_reply(tx, k, m.lane);
}

/* ------------------------------------------------------------------ */
/* the service thread: control messages                                */
/* ------------------------------------------------------------------ */

static void ctl_done(struct tx_ctl *ctl, int err)
{
	ctl->err = err;
	/* After this store the message is the caller's again. */
	__atomic_store_n(&ctl->done, 1, __ATOMIC_RELEASE);
	futex_wake(&ctl->done);
}

static void ctl_win_add(struct tx *tx, struct tx_ctl *ctl)
{
	struct tx_win *w;
	unsigned int s, n;

	for (s = 0; s < tx->nwins; s++)
		if (!tx->wins[s].id && !tx->wins[s].refs)
			break;
	if (s == tx->nwins) {
		n = tx->nwins ? 2 * tx->nwins : 8;
		if (n > TX_WIN_SLOT) {
			ctl_done(ctl, ENOSPC);
			return;
		}
		w = realloc(tx->wins, n * sizeof(*w));
		if (!w) {
			ctl_done(ctl, ENOMEM);
			return;
		}
		memset(w + tx->nwins, 0, (n - tx->nwins) * sizeof(*w));
		tx->wins = w;
		tx->nwins = n;
	}
	w = &tx->wins[s];
	w->gen = (w->gen + 1) & ((1u << (32 - TX_WIN_GEN)) - 1);
	w->id = (w->gen << TX_WIN_GEN) | (s + 1);
	w->base = ctl->base;
	w->len = ctl->len;
	ctl->id = w->id;
	ctl_done(ctl, 0);
}

/* Pending window removals finish once nothing uses their memory. */
/* Does k use window slot s (a receive into it, a reply from it)? */
static int conn_uses(const struct tx_conn *k, uint32_t s)
{
	const struct tx_frame *f;

	if (k->cur_slot == s + 1)
		return 1;
	for (f = k->sq; f; f = f->next)
		if (f->kind == FR_RESP &&
		    ((const struct tx_resp *)(const void *)f)->slot == s)
			return 1;
	for (f = k->zq; f; f = f->next)
		if (f->kind == FR_RESP &&
		    ((const struct tx_resp *)(const void *)f)->slot == s)
			return 1;
	return 0;
}

/* Close every connection still receiving into or replying from slot s. */
static void win_evict(struct tx *tx, uint32_t s)
{
	struct tx_conn *k, *next;
	unsigned int i;

	for (i = 0; i < lane_slots(tx); i++) {
		k = lane_slot(tx, i);
		if (k && k->state != K_DEAD && conn_uses(k, s))
			conn_fail(tx, k, EPROTO, "window freed while in use");
	}
	for (k = tx->guests; k; k = next) {
		next = k->next;
		if (k->state != K_DEAD && conn_uses(k, s))
			conn_fail(tx, k, EPROTO, "window freed while in use");
	}
}

/*
 * Pending window removals finish once nothing uses their memory.  A reply
 * whose sendmsg is done but not reaped yet still counts: that resolves by
 * itself; what is still there at the deadline (a peer in the middle of a
 * frame, a guest that does not read its replies) is closed.
 */
static void win_dels_check(struct tx *tx)
{
	struct tx_ctl **pp = &tx->win_dels, *ctl;
	uint32_t s;

	while ((ctl = *pp)) {
		s = (ctl->id & TX_WIN_SLOT) - 1;
		if (tx->wins[s].refs) {
			if (!ctl->err && hcomm__now_ns() >= ctl->deadline) {
				ctl->err = 1;	/* evicted once */
				win_evict(tx, s);
			}
			pp = &ctl->next;
			continue;
		}
		*pp = ctl->next;
		ctl_done(ctl, 0);
	}
}

/*
 * Remove a window: new frames for it are refused at once; the caller
 * waits until no receive into it and no reply from it is in flight
 * (win_free met every rank in a barrier first, so only a peer breaking
 * the protocol keeps one beyond the deadline).
 */
static void ctl_win_del(struct tx *tx, struct tx_ctl *ctl)
{
	struct tx_win *w = win_get(tx, ctl->id);

	if (!w) {
		ctl_done(ctl, ENOENT);
		return;
	}
	w->id = 0;
	ctl->err = 0;
	ctl->deadline = hcomm__now_ns() + tx->timeout_ns;
	ctl->next = tx->win_dels;
	tx->win_dels = ctl;
	win_dels_check(tx);
}

/* A fence is done once every operation that arrived before it finished. */
static void fences_check(struct tx *tx)
{
	struct tx_ctl **pp = &tx->fences, *ctl;

	while ((ctl = *pp)) {
		if (tx->out_head && tx->out_head->dseq <= ctl->dseq) {
			pp = &ctl->next;
			continue;
		}
		*pp = ctl->next;
		ctl_done(ctl, 0);
	}
}

static void stats_fill(struct tx *tx, struct hcomm_comm_stats *st,
		       int live)
{
	const struct tx_pstats *s;
	unsigned int l;
	int r;

	st->net_refused += tx->refused;
	for (r = 0; r < tx->size; r++) {
		if (r == tx->rank)
			continue;
		s = &tx->peers[r].st;
		st->net_bytes_sent += s->bytes_sent;
		st->net_bytes_recv += s->bytes_recv;
		st->net_ops_sent += s->ops_sent;
		st->net_ops_recv += s->ops_recv;
		st->net_crc_errors += s->crc_errors;
		st->net_refused += s->refused;
		st->net_retransmits += s->retrans;
		st->net_conn_lost += s->lost;
		for (l = 0; live && l < tx->lanes; l++)
			if (tx->peers[r].lanes[l])
				st->net_retransmits +=
					conn_retrans(tx->peers[r].lanes[l]);
	}
}

/* CTL_PEER_STATS: the counters of one peer, its live lanes' retransmits. */
static void peer_stats_fill(struct tx *tx, int r,
			    struct hcomm_peer_xport_stats *st)
{
	const struct tx_peer *p = &tx->peers[r];
	unsigned int l;

	st->in_use = 1;
	st->bytes_sent = p->st.bytes_sent;
	st->bytes_recv = p->st.bytes_recv;
	st->ops_sent = p->st.ops_sent;
	st->ops_recv = p->st.ops_recv;
	st->crc_errors = p->st.crc_errors;
	st->refused = p->st.refused;
	st->conn_lost = p->st.lost;
	st->retransmits = p->st.retrans;
	for (l = 0; l < tx->lanes; l++)
		if (p->lanes[l])
			st->retransmits += conn_retrans(p->lanes[l]);
}

/*
 * Keep the published file's counters current (plain stores: its readers
 * expect nothing more).
 */
static void stats_publish(struct tx *tx)
{
	struct hcomm_comm_stats st;

	if (!tx->pub || !tx->stats_dirty)
		return;
	tx->stats_dirty = 0;
	memset(&st, 0, sizeof(st));
	stats_fill(tx, &st, 0);
	memcpy(tx->pub, &st, sizeof(st));
}

/* CTL_LANE: the init thread connected lane l of peer p: fd is ours now. */
static void ctl_lane(struct tx *tx, struct tx_ctl *ctl)
{
	struct tx_peer *p = &tx->peers[ctl->peer];
	struct tx_conn *k = conn_new(tx, ctl->fd, ctl->peer, ctl->lane);

	if (!k) {
		close(ctl->fd);
		ctl_done(ctl, ENOMEM);
		return;
	}
	memcpy(k->addr, p->addr, sizeof(k->addr));
	p->lanes[ctl->lane] = k;
	conn_recv(tx, k);
	ctl_done(ctl, 0);
}

/* CTL_STOP: a bye on every lane; the loop ends once they are out. */
static void ctl_stop(struct tx *tx, struct tx_ctl *ctl)
{
	struct tx_conn *k;
	unsigned int i;

	tx->stop = ctl;
	tx->stop_at = hcomm__now_ns() + TX_BYE_NS;
	for (i = 0; i < lane_slots(tx); i++) {
		k = lane_slot(tx, i);
		if (k && k->state == K_UP)
			ctl_frame(tx, k, &k->byef, OP_BYE);
	}
}

static void ctl_run_one(struct tx *tx, struct tx_ctl *ctl)
{
	switch (ctl->kind) {
	case CTL_WIN_ADD:
		ctl_win_add(tx, ctl);
		break;
	case CTL_WIN_DEL:
		ctl_win_del(tx, ctl);
		break;
	case CTL_FENCE:
		ctl->dseq = tx->dseq;
		ctl->next = tx->fences;
		tx->fences = ctl;
		fences_check(tx);
		break;
	case CTL_STATS:
		stats_fill(tx, ctl->st, 1);
		ctl_done(ctl, 0);
		break;
	case CTL_PEER_STATS:
		peer_stats_fill(tx, ctl->peer, ctl->ps);
		ctl_done(ctl, 0);
		break;
	case CTL_PUBLISH:
		tx->pub = ctl->st;
		tx->stats_dirty = 1;
		stats_publish(tx);
		ctl_done(ctl, 0);
		break;
	case CTL_PEERS:
		ctl_done(ctl, 0);
		break;
	case CTL_LANE:
		ctl_lane(tx, ctl);
		break;
	case CTL_STOP:
		ctl_stop(tx, ctl);
		break;
	}
}

/* ------------------------------------------------------------------ */
/* the service thread: the loop                                        */
/* ------------------------------------------------------------------ */

static void subq_drain(struct tx *tx)
{
	struct hcomm_mpsc_node *node;
	struct tx_msg *m;

	while ((node = hcomm_mpsc_pop(&tx->subq))) {
		m = (struct tx_msg *)(void *)node;
		if (m->type == MSG_XFER)
			op_start(tx, (struct tx_op *)(void *)m);
		else
			ctl_run_one(tx, (struct tx_ctl *)(void *)m);
	}
}

static void dirty_kick(struct tx *tx)
{
	struct tx_conn *k;

	while ((k = tx->dirty)) {
		tx->dirty = k->dnext;
		k->dirty = 0;
		conn_send(tx, k);
	}
}

static void conn_tick(struct tx *tx, struct tx_conn *k, uint64_t now)
{
	if (k->state == K_HELLO && now - k->t0 > tx->timeout_ns) {
		tx->refused++;
		tx->stats_dirty = 1;
		tx_log(tx, "refused connection from %s: no hello in %llu ms",
		       k->addr, (unsigned long long)(tx->timeout_ns / 1000000));
		conn_drop(k, ETIMEDOUT);
		conn_check_dead(tx, k);
	} else if (k->state == K_UP && conn_has_work(k) &&
		   now - k->last_io > tx->timeout_ns) {
		conn_fail(tx, k, ETIMEDOUT, "nothing moved for %llu ms",
			  (unsigned long long)(tx->timeout_ns / 1000000));
	}
}

static void tick(struct tx *tx, uint64_t now)
{
	struct tx_conn *k, *next;
	unsigned int i;

	for (i = 0; i < lane_slots(tx); i++) {
		k = lane_slot(tx, i);
		if (k)
			conn_tick(tx, k, now);
	}
	for (k = tx->guests; k; k = next) {
		next = k->next;
		conn_tick(tx, k, now);
	}
	accept_arm(tx);
}

static void cqe_handle(struct tx *tx, const struct io_uring_cqe *cqe)
{
	uint64_t ud = cqe->user_data;
	void *p = (void *)(uintptr_t)(ud & ~UD_MASK);
	struct tx_zrec *z;

	if (ud == LIBURING_UDATA_TIMEOUT)
		return;
	switch (ud & UD_MASK) {
	case UD_RX:
		conn_received(tx, p, cqe->res);
		break;
	case UD_TX:
		conn_sent(tx, p, cqe->res, 0);
		break;
	case UD_ZC:
		z = p;
		if (cqe->flags & IORING_CQE_F_NOTIF) {
			zc_notified(tx, z);
			conn_check_dead(tx, z->k);
			break;
		}
		/* The notification follows only with F_MORE. */
		z->k->notifs++;
		conn_sent(tx, z->k, cqe->res, z->id);
		if (!(cqe->flags & IORING_CQE_F_MORE)) {
			zc_notified(tx, z);
			conn_check_dead(tx, z->k);
		}
		break;
	case UD_ACCEPT:
		/* After an error (EMFILE ...) the next tick tries again. */
		if (accept_done(tx, cqe->res))
			accept_arm(tx);
		break;
	case UD_WAKE:
		tx->wake_armed = 0;
		break;
	}
}

static void wake_arm(struct tx *tx)
{
	struct io_uring_sqe *sqe = sqe_get(tx);

	io_uring_prep_read(sqe, tx->evfd, &tx->evbuf, sizeof(tx->evbuf), 0);
	io_uring_sqe_set_data64(sqe, (uintptr_t)tx | UD_WAKE);
	tx->wake_armed = 1;
}

/* Anything left to send before a stop may end the loop? */
static int stop_pending(struct tx *tx)
{
	struct tx_conn *k;
	unsigned int i;

	for (i = 0; i < lane_slots(tx); i++) {
		k = lane_slot(tx, i);
		if (k && k->state == K_UP && (k->sq || k->tx_busy))
			return 1;
	}
	return 0;
}

/* Wait for CQEs (or a post), up to the next tick; then handle them. */
static void wait_and_reap(struct tx *tx)
{
	struct __kernel_timespec ts;
	struct io_uring_cqe *cqe;
	uint64_t now = hcomm__now_ns(), wait;
	unsigned int head, n = 0;
	int armed;

	wait = tx->next_tick > now ? tx->next_tick - now : 0;
	if (tx->stop && wait > 10000000)
		wait = 10000000;
	ts.tv_sec = (long long)(wait / 1000000000);
	ts.tv_nsec = (long long)(wait % 1000000000);
	__atomic_store_n(&tx->sleeping, 1, __ATOMIC_SEQ_CST);
	armed = hcomm_mpsc_empty(&tx->subq);
	if (armed && wait)
		(void)io_uring_submit_and_wait_timeout(&tx->ring, &cqe, 1, &ts,
						       NULL);
	else
		(void)io_uring_submit_and_get_events(&tx->ring);
	__atomic_store_n(&tx->sleeping, 0, __ATOMIC_SEQ_CST);
	io_uring_for_each_cqe(&tx->ring, head, cqe) {
		cqe_handle(tx, cqe);
		n++;
	}
	io_uring_cq_advance(&tx->ring, n);
}

/* Close k without a word (destroy): nothing of it is in flight. */
static void conn_close(struct tx *tx, struct tx_conn *k)
{
	if (k->state == K_DEAD)
		return;
	k->state = K_DEAD;
	k->err = ESHUTDOWN;
	shutdown(k->fd, SHUT_RDWR);
	conn_check_dead(tx, k);
}

/* Is any SQE (or ZC notification) of ours still out? */
static int anything_out(struct tx *tx)
{
	struct tx_conn *k;
	unsigned int i;

	if (tx->accept_armed || tx->wake_armed || tx->guests)
		return 1;
	for (i = 0; i < lane_slots(tx); i++) {
		k = lane_slot(tx, i);
		if (k && (k->busy || k->notifs))
			return 1;
	}
	return 0;
}

/*
 * Close every connection and take every SQE back (at most TX_BYE_NS), so
 * that no receive can land in memory once destroy returned.
 */
static void teardown(struct tx *tx)
{
	uint64_t one = 1, end = hcomm__now_ns() + TX_BYE_NS;
	struct tx_conn *k, *next;
	unsigned int i;

	for (i = 0; i < lane_slots(tx); i++) {
		k = lane_slot(tx, i);
		if (k)
			conn_close(tx, k);
	}
	for (k = tx->guests; k; k = next) {
		next = k->next;
		conn_close(tx, k);
	}
	if (tx->lfd >= 0)
		shutdown(tx->lfd, SHUT_RDWR);
	if (tx->wake_armed)
		(void)!write(tx->evfd, &one, sizeof(one));
	while (anything_out(tx) && hcomm__now_ns() < end)
		wait_and_reap(tx);
}

static void *tx_main(void *arg)
{
	struct tx *tx = arg;
	struct io_uring_params p;
	static const unsigned int try[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_COOP_TASKRUN,
		0,
	};
	unsigned int i, conns = (unsigned int)tx->size * tx->lanes + TX_GUESTS;
	uint64_t now;
	int ret = -EINVAL;

	for (i = 0; i < sizeof(try) / sizeof(try[0]); i++) {
		memset(&p, 0, sizeof(p));
		p.flags = try[i] | IORING_SETUP_CQSIZE;
		p.cq_entries = 4 * conns + 64;
		ret = io_uring_queue_init_params(256, &tx->ring, &p);
		if (ret != -EINVAL)
			break;
	}
	tx->ready_err = -ret;
	__atomic_store_n(&tx->ready, 1, __ATOMIC_RELEASE);
	futex_wake(&tx->ready);
	if (ret)
		return NULL;
	tx->next_tick = hcomm__now_ns() + TX_TICK_NS;
	accept_arm(tx);
	for (;;) {
		if (!tx->wake_armed)
			wake_arm(tx);
		subq_drain(tx);
		dirty_kick(tx);
		win_dels_check(tx);
		stats_publish(tx);
		now = hcomm__now_ns();
		if (tx->stop && (!stop_pending(tx) || now >= tx->stop_at))
			break;
		if (now >= tx->next_tick) {
			tick(tx, now);
			tx->next_tick = now + TX_TICK_NS;
			dirty_kick(tx);
		}
		wait_and_reap(tx);
	}
	teardown(tx);
	io_uring_queue_exit(&tx->ring);
	ctl_done(tx->stop, 0);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* posting and control (any thread)                                    */
/* ------------------------------------------------------------------ */

/* After a push: wake the service thread if it sleeps. */
static void svc_wake(struct tx *tx)
{
	uint64_t one = 1;

	if (__atomic_exchange_n(&tx->sleeping, 0, __ATOMIC_SEQ_CST))
		(void)!write(tx->evfd, &one, sizeof(one));
}

/* Hand ctl to the service thread and wait until it is done with it. */
static int ctl_run(struct tx *tx, struct tx_ctl *ctl)
{
	ctl->m.type = MSG_CTL;
	ctl->done = 0;
	hcomm_mpsc_push(&tx->subq, &ctl->m.node);
	svc_wake(tx);
	while (!__atomic_load_n(&ctl->done, __ATOMIC_ACQUIRE))
		futex_wait(&ctl->done, 0, TX_TICK_NS);
	return ctl->err;
}

/* Chunks of d: one per lane of its target for a large operation. */
static unsigned int stripes(const struct tx *tx,
			    const struct hcomm_xfer_desc *d)
{
	unsigned int n = tx->peers[d->target].nlanes;
	uint64_t k = d->len / TX_STRIPE_MIN;

	if (n <= 1 || k < 2)
		return 1;
	return k < n ? (unsigned int)k : n;
}

/* Fill op (and its chunks) for d. */
static void op_fill(struct tx_op *op, const struct hcomm_win *w,
		    const struct hcomm_xfer_desc *d, struct hcomm_request *req,
		    unsigned int k)
{
	uint64_t part = (d->len / k) & ~4095ULL, off = 0;
	unsigned char *local = (unsigned char *)(uintptr_t)d->local;
	struct tx_chunk *ch;
	unsigned int i = 0;

	op->m.type = MSG_XFER;
	op->req = req;
	op->local = local;
	op->off = d->target_off;
	op->len = d->len;
	op->value = d->value;
	op->sig = d->sig;
	op->target = d->target;
	op->op = d->op;
	op->win = (uint32_t)w->peers[d->target].x[HCOMM_XP_TCP].key;
	op->nchunks = k;
	for (ch = op->chunks; ch; ch = ch->onext, i++) {
		ch->op = op;
		ch->off = off;
		ch->len = i + 1 == k ? d->len - off : part;
		off += ch->len;
	}
}

/* An operation on this rank's own window part: done at once. */
static void op_local(struct hcomm_comm *c, const struct hcomm_win *w,
		     const struct hcomm_xfer_desc *d,
		     struct hcomm_request *req)
{
	unsigned char *t = (unsigned char *)w->base + d->target_off;
	void *local = (void *)(uintptr_t)d->local;

	if (d->len && d->op == HCOMM_OP_GET)
		memmove(local, t, d->len);
	else if (d->len)
		memmove(t, local, d->len);
	if (d->op == HCOMM_OP_PUT_SIGNAL)
		sig_add(tx_of(c), d->sig, d->value);
	hcomm__complete(c, req, 0, d->len);
}

/*
 * Issue n checked descriptors: never fails.  Operations on this rank and
 * empty ones complete here; the others wait for pool entries (progressing
 * meanwhile) and go to the service thread, woken once at the end.
 */
static int tx_post(struct hcomm_comm *c, struct hcomm_win *w,
		   const struct hcomm_xfer_desc *d, unsigned int n,
		   struct hcomm_request *reqs)
{
	struct tx *tx = tx_of(c);
	struct tx_op *op;
	unsigned int i, k;
	int pushed = 0, ordered;

	for (i = 0; i < n; i++) {
		if (!d[i].len && d[i].op != HCOMM_OP_PUT_SIGNAL) {
			hcomm__complete(c, &reqs[i], 0, 0);
			continue;
		}
		if (d[i].target == c->rank) {
			op_local(c, w, &d[i], &reqs[i]);
			continue;
		}
		ordered = hcomm__req_priv(&reqs[i])->target ==
			  HCOMM_TGT_INTERNAL;
		k = ordered ? 1 : stripes(tx, &d[i]);
		while (!(op = pool_get(&tx->pool, k))) {
			if (pushed)
				svc_wake(tx);
			pushed = 0;
			if (!tx_progress(c))
				tx_block(c, &reqs[i], 200);
		}
		op_fill(op, w, &d[i], &reqs[i], k);
		op->ordered = ordered;
		hcomm_mpsc_push(&tx->subq, &op->m.node);
		pushed = 1;
	}
	if (pushed)
		svc_wake(tx);
	return 0;
}

/* Every operation that reached the service thread before has finished. */
static int tx_fence(struct hcomm_comm *c)
{
	struct tx_ctl ctl = { .kind = CTL_FENCE };

	return ctl_run(tx_of(c), &ctl);
}

static int tx_flush(struct hcomm_comm *c)
{
	return hcomm__drain(c);
}

static void tx_stats(struct hcomm_comm *c, struct hcomm_comm_stats *st)
{
	struct tx_ctl ctl = { .kind = CTL_STATS, .st = st };

	ctl_run(tx_of(c), &ctl);
}

static void tx_publish(struct hcomm_comm *c, struct hcomm_comm_stats *st)
{
	struct tx_ctl ctl = { .kind = CTL_PUBLISH, .st = st };

	ctl_run(tx_of(c), &ctl);
}

static void tx_peer_stats(struct hcomm_comm *c, int peer,
			  struct hcomm_peer_xport_stats *st)
{
	struct tx_ctl ctl = { .kind = CTL_PEER_STATS, .peer = peer,
			      .ps = st };

	ctl_run(tx_of(c), &ctl);
}

/* ------------------------------------------------------------------ */
/* windows                                                             */
/* ------------------------------------------------------------------ */

/* The window's id (slot and generation) names it in every frame. */
static int tx_win_create(struct hcomm_comm *c, struct hcomm_win *w,
			 void *base, size_t len, struct hcomm_win_peer *self)
{
	struct tx_ctl ctl = { .kind = CTL_WIN_ADD, .base = base, .len = len };
	int err;

	memset(self, 0, sizeof(*self));
	self->addr = (uintptr_t)base;
	w->xps[HCOMM_XP_TCP] = NULL;
	if (!len)
		return 0;
	err = ctl_run(tx_of(c), &ctl);
	if (err)
		return sys_fail(err, "hcomm_win_create: window table");
	self->key = ctl.id;
	self->len = len;
	w->xps[HCOMM_XP_TCP] = (void *)(uintptr_t)ctl.id;
	return 0;
}

static int tx_win_free(struct hcomm_comm *c, struct hcomm_win *w)
{
	struct tx_ctl ctl = { .kind = CTL_WIN_DEL };
	int err;

	ctl.id = (uint32_t)(uintptr_t)w->xps[HCOMM_XP_TCP];
	if (!ctl.id)
		return 0;
	err = ctl_run(tx_of(c), &ctl);
	w->xps[HCOMM_XP_TCP] = NULL;
	if (err)
		return hcomm__fail(HCOMM_ERR_INVAL, err, "hcomm_win_free: "
				   "window %#x", ctl.id);
	return 0;
}

/* ------------------------------------------------------------------ */
/* setup                                                               */
/* ------------------------------------------------------------------ */

static int tx_probe(const struct hcomm_rankinfo *ri)
{
	(void)ri;
	return 1;	/* TCP reaches any rank */
}

/* HCOMM_TCP_ZC_THRESHOLD, HCOMM_TCP_DIGEST, HCOMM_LOG. */
static int tx_env(struct tx *tx)
{
	const char *s = getenv("HCOMM_TCP_ZC_THRESHOLD");
	const char *dg = getenv("HCOMM_TCP_DIGEST");
	const char *log = getenv("HCOMM_LOG");
	uint64_t v;

	tx->log = log && *log && strcmp(log, "0");
	if (dg && *dg && strcmp(dg, "crc32c") && strcmp(dg, "none"))
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "HCOMM_TCP_DIGEST=\"%.64s\": not \"crc32c\" "
				   "or \"none\"", dg);
	tx->nodigest = dg && !strcmp(dg, "none");
	tx->zc_min = TX_ZC_DEFAULT;
	if (!s)
		return 0;
	tx->zc_set = 1;
	if (!strcmp(s, "off")) {
		tx->zc_min = 0;
		return 0;
	}
	if (hcomm_parse_size(s, &v) || v > (1ULL << 30))
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "HCOMM_TCP_ZC_THRESHOLD=\"%.64s\": not "
				   "\"off\" or a size of 0 .. 1G", s);
	tx->zc_min = v;
	return 0;
}

static int tx_alloc(struct tx *tx, const struct hcomm_config *cfg)
{
	uint64_t n = (uint64_t)cfg->queue_depth * tx->lanes;
	int r;

	tx->sig = aligned_alloc(64, TX_NSIG * sizeof(*tx->sig));
	tx->peers = calloc(tx->size, sizeof(*tx->peers));
	if (!tx->sig || !tx->peers)
		goto nomem;
	memset(tx->sig, 0, TX_NSIG * sizeof(*tx->sig));
	for (r = 0; r < tx->size; r++) {
		if (r == tx->rank)
			continue;
		tx->peers[r].lanes = calloc(tx->lanes,
					    sizeof(*tx->peers[r].lanes));
		if (!tx->peers[r].lanes)
			goto nomem;
	}
	if (pool_init(&tx->pool, n > TX_POOL_MAX ? TX_POOL_MAX :
				 (unsigned int)n))
		goto nomem;
	return 0;
nomem:
	return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "tcp transport: %d ranks",
			   tx->size);
}

/*
 * Staging bytes per connection: TX_STAGE_ALL over the lanes, within
 * TX_STAGE_MIN .. TX_STAGE_MAX (more frames per receive for few peers,
 * bounded memory for many).
 */
static uint32_t tx_stage(int size, unsigned int lanes)
{
	uint64_t conns = (uint64_t)(size > 1 ? size - 1 : 1) * lanes;
	uint64_t b = TX_STAGE_ALL / conns;

	return b < TX_STAGE_MIN ? TX_STAGE_MIN :
	       b > TX_STAGE_MAX ? TX_STAGE_MAX : (uint32_t)b;
}

/* Where this rank listens: the rank table's, the bootstrap's, loopback. */
static const char *tx_host(const struct hcomm_comm *c)
{
	const char *ip;

	if (c->ri.host_addr[0])
		return c->ri.host_addr;
	ip = hcomm__boot_self_ip(c->boot);
	return ip && *ip ? ip : "127.0.0.1";
}

/* Listen on an ephemeral port of this rank's address. */
static int tx_listen(struct tx *tx)
{
	struct addrinfo hints = {
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	}, *ai;
	const char *host = tx_host(tx->c);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int ret, err;

	ret = getaddrinfo(host, "0", &hints, &ai);
	if (ret)
		return hcomm__fail(HCOMM_ERR_INVAL, 0, "tcp transport: address "
				   "%s: %s", host, gai_strerror(ret));
	tx->lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (tx->lfd >= 0) {
		sock_opts(tx, tx->lfd);
		if (bind(tx->lfd, ai->ai_addr, ai->ai_addrlen) ||
		    listen(tx->lfd, tx->size * (int)tx->lanes + 16) ||
		    getsockname(tx->lfd, (struct sockaddr *)&ss, &sl))
			ret = -1;
	}
	err = errno;
	freeaddrinfo(ai);
	if (tx->lfd < 0 || ret)
		return sys_fail(err, "tcp transport: listening on %s", host);
	addr_of(&ss, tx->self_addr, sizeof(tx->self_addr));
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr,
			  tx->self_ip, sizeof(tx->self_ip));
	else
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr,
			  tx->self_ip, sizeof(tx->self_ip));
	tx->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

/* The service thread, once its ring is up. */
static int tx_start(struct tx *tx)
{
	int ret;

	tx->evfd = eventfd(0, EFD_CLOEXEC);
	if (tx->evfd < 0)
		return sys_fail(errno, "tcp transport: eventfd");
	ret = pthread_create(&tx->thr, NULL, tx_main, tx);
	if (ret)
		return hcomm__fail(ret == EAGAIN ? HCOMM_ERR_LIMIT :
				   HCOMM_ERR_NOMEM, ret, "tcp transport: "
				   "service thread");
	while (!__atomic_load_n(&tx->ready, __ATOMIC_ACQUIRE))
		futex_wait(&tx->ready, 0, TX_TICK_NS);
	if (tx->ready_err) {
		pthread_join(tx->thr, NULL);
		return sys_fail(tx->ready_err, "tcp transport: io_uring");
	}
	tx->thr_started = 1;
	return 0;
}

/* Wait until fd is ready for ev or the deadline (ns) passed: 0 or -1. */
static int fd_wait(int fd, short ev, uint64_t deadline)
{
	struct pollfd pfd = { .fd = fd, .events = ev };
	uint64_t t;
	int ret;

	for (;;) {
		t = hcomm__now_ns();
		if (t >= deadline) {
			errno = ETIMEDOUT;
			return -1;
		}
		ret = poll(&pfd, 1, (int)((deadline - t + 999999) / 1000000));
		if (ret > 0)
			return 0;
		if (ret < 0 && errno != EINTR)
			return -1;
	}
}

/* Send or receive exactly n bytes of blocking fd before the deadline. */
static int fd_full(int fd, void *p, size_t n, int rx, uint64_t deadline)
{
	ssize_t r;

	while (n) {
		if (fd_wait(fd, rx ? POLLIN : POLLOUT, deadline))
			return -1;
		r = rx ? recv(fd, p, n, MSG_DONTWAIT) :
			 send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0) {
			if (!r)
				errno = ECONNRESET;
			return -1;
		}
		p = (char *)p + r;
		n -= (size_t)r;
	}
	return 0;
}

/* Connect to address a (blocking fd, or -1 and errno). */
static int tcp_connect(struct tx *tx, const struct tx_addr *a,
		       uint64_t deadline)
{
	struct addrinfo hints = {
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
	}, *ai;
	char port[16];
	socklen_t sl = sizeof(int);
	int fd, err = 0;

	snprintf(port, sizeof(port), "%u", le32toh(a->port));
	if (getaddrinfo(a->ip, port, &hints, &ai)) {
		errno = EINVAL;
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    0);
	if (fd >= 0) {
		sock_opts(tx, fd);
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) &&
		    (errno != EINPROGRESS || fd_wait(fd, POLLOUT, deadline) ||
		     getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) || err) &&
		    errno != EISCONN) {
			err = err ? err : errno;
			close(fd);
			fd = -1;
			errno = err;
		}
	}
	freeaddrinfo(ai);
	/* Blocking from here: io_uring would hand EAGAIN back otherwise. */
	if (fd >= 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Connect lane l to rank j and exchange hellos; the fd or -hcomm_err. */
static int tx_connect(struct tx *tx, int j, unsigned int l,
		      const struct tx_addr *a, uint64_t deadline)
{
	const char *addr = tx->peers[j].addr;
	struct tx_hello m = {
		.version = TX_VERSION, .nonce = tx->nonce, .from = tx->rank,
		.to = j, .lane = l,
	};
	unsigned char b[TX_HELLO];
	const char *bad;
	int fd, err;

	fd = tcp_connect(tx, a, deadline);
	if (fd < 0) {
		err = errno;
		return sys_fail(err, "tcp transport: rank %d (%s) lane %u: "
				"connect", j, addr, l);
	}
	hello_encode(b, &m);
	if (fd_full(fd, b, sizeof(b), 0, deadline) ||
	    fd_full(fd, b, sizeof(b), 1, deadline)) {
		err = errno;
		close(fd);
		if (err == ECONNRESET)
			return hcomm__fail(HCOMM_ERR_IO, err, "tcp transport: "
					   "rank %d (%s) lane %u refused the "
					   "connection (another job? its "
					   "HCOMM_LOG says why)", j, addr, l);
		return sys_fail(err, "tcp transport: rank %d (%s) lane %u: "
				"hello", j, addr, l);
	}
	bad = hello_check(tx, b, &m, 1);
	if (!bad && (m.from != j || m.lane != l))
		bad = "answered by another rank or lane";
	if (bad) {
		close(fd);
		return hcomm__fail(HCOMM_ERR_IO, EPROTO, "tcp transport: rank "
				   "%d (%s) lane %u: hello reply: %s", j, addr,
				   l, bad);
	}
	return fd;
}

/* Lanes to every higher rank, handed to the service thread. */
static int tx_connect_all(struct tx *tx, const struct tx_addr *all)
{
	uint64_t deadline = hcomm__now_ns() + tx->timeout_ns;
	struct tx_ctl ctl;
	unsigned int l;
	int j, fd, err;

	for (j = tx->rank + 1; j < tx->size; j++)
		for (l = 0; l < tx->peers[j].nlanes; l++) {
			fd = tx_connect(tx, j, l, &all[j], deadline);
			if (fd < 0)
				return fd;
			memset(&ctl, 0, sizeof(ctl));
			ctl.kind = CTL_LANE;
			ctl.fd = fd;
			ctl.peer = j;
			ctl.lane = (int)l;
			err = ctl_run(tx, &ctl);
			if (err)
				return hcomm__fail(HCOMM_ERR_NOMEM, err,
						   "tcp transport: rank %d "
						   "lane %u", j, l);
		}
	return 0;
}

/* After the exchange: every rank's listener, and the lanes per pair. */
static int tx_peers(struct tx *tx, const struct tx_addr *all)
{
	struct tx_ctl ctl = { .kind = CTL_PEERS };
	struct tx_peer *p;
	uint32_t lanes;
	int r, e;

	for (r = 0; r < tx->size; r++) {
		e = (int32_t)le32toh((uint32_t)all[r].err);
		if (e)
			return hcomm__fail(e > 0 && e < HCOMM_ERR__MAX ? e :
					   HCOMM_ERR_IO, 0, "tcp transport: "
					   "rank %d could not listen: %s", r,
					   hcomm_strerror(e));
	}
	for (r = 0; r < tx->size; r++) {
		if (r == tx->rank)
			continue;
		p = &tx->peers[r];
		lanes = le32toh(all[r].lanes);
		p->nlanes = lanes < tx->lanes ? lanes : tx->lanes;
		if (!p->nlanes || !memchr(all[r].ip, 0, sizeof(all[r].ip)))
			return hcomm__fail(HCOMM_ERR_IO, EPROTO, "tcp "
					   "transport: rank %d published a "
					   "bad address", r);
		addr_fmt(p->addr, sizeof(p->addr), all[r].ip,
			 le32toh(all[r].port));
	}
	/* Orders the writes above before the service thread reads them. */
	return ctl_run(tx, &ctl);
}

static void tx_log_peers(struct tx *tx)
{
	const struct tx_pstats *s;
	int r;

	for (r = 0; tx->log && r < tx->size; r++) {
		if (r == tx->rank)
			continue;
		s = &tx->peers[r].st;
		tx_log(tx, "rank %d (%s): sent %llu ops %llu bytes, received "
		       "%llu ops %llu bytes, %llu CRC errors, %llu refused, "
		       "%llu retransmits, %llu connections lost", r,
		       tx->peers[r].addr, (unsigned long long)s->ops_sent,
		       (unsigned long long)s->bytes_sent,
		       (unsigned long long)s->ops_recv,
		       (unsigned long long)s->bytes_recv,
		       (unsigned long long)s->crc_errors,
		       (unsigned long long)s->refused,
		       (unsigned long long)s->retrans,
		       (unsigned long long)s->lost);
	}
}

static void tx_free_conn(struct tx_conn *k)
{
	if (!k)
		return;
	if (k->fd >= 0)
		close(k->fd);
	free(k->buf);
	free(k);
}

static void tx_fini(struct hcomm_comm *c)
{
	struct tx *tx = tx_of(c);
	struct tx_ctl ctl = { .kind = CTL_STOP };
	struct tx_resp *rsp;
	struct tx_conn *k;
	unsigned int l;
	int r;

	if (!tx)
		return;
	if (tx->thr_started) {
		ctl_run(tx, &ctl);
		pthread_join(tx->thr, NULL);
	}
	if (tx->peers)
		tx_log_peers(tx);
	for (r = 0; tx->peers && r < tx->size; r++) {
		for (l = 0; tx->peers[r].lanes && l < tx->lanes; l++)
			tx_free_conn(tx->peers[r].lanes[l]);
		free(tx->peers[r].lanes);
	}
	while ((k = tx->guests)) {
		tx->guests = k->next;
		tx_free_conn(k);
	}
	while ((rsp = tx->resp_free)) {
		tx->resp_free = rsp->nfree;
		free(rsp);
	}
	if (tx->lfd >= 0)
		close(tx->lfd);
	if (tx->evfd >= 0)
		close(tx->evfd);
	pool_fini(&tx->pool);
	pthread_mutex_destroy(&tx->reap_lock);
	free(tx->wins);
	free(tx->peers);
	free(tx->sig);
	free(tx);
	c->xps[HCOMM_XP_TCP] = NULL;
}

/*
 * Collective inside: every rank publishes its listener (or why it has
 * none), connects its lanes to the higher ranks, and learns whether
 * everyone did.
 */
static int tx_init(struct hcomm_comm *c)
{
	struct tx_addr me, *all;
	int32_t mine, *st = NULL;
	struct tx *tx;
	int ret, r, e;

	tx = calloc(1, sizeof(*tx));
	all = calloc(c->size, sizeof(*all));
	if (!tx || !all) {
		free(tx);
		free(all);
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "tcp transport");
	}
	c->xps[HCOMM_XP_TCP] = tx;
	tx->c = c;
	tx->rank = c->rank;
	tx->size = c->size;
	tx->lanes = c->cfg.num_qps;
	tx->timeout_ns = (uint64_t)c->cfg.timeout_ms * 1000000ULL;
	tx->stage = tx_stage(c->size, tx->lanes);
	sock_bufs(tx);
	tx->nonce = hcomm__boot_nonce(c->boot);
	tx->lfd = -1;
	tx->evfd = -1;
	hcomm_mpsc_init(&tx->subq);
	hcomm_mpsc_init(&tx->doneq);
	pthread_mutex_init(&tx->reap_lock, NULL);

	ret = tx_env(tx);
	if (!ret)
		ret = tx_alloc(tx, &c->cfg);
	if (!ret)
		ret = tx_listen(tx);
	if (!ret)
		ret = tx_start(tx);
	memset(&me, 0, sizeof(me));
	snprintf(me.ip, sizeof(me.ip), "%s", tx->self_ip);
	me.port = htole32(tx->port);
	me.lanes = htole32(tx->lanes);
	me.err = (int32_t)htole32((uint32_t)-ret);
	r = hcomm__boot_allgather(c->boot, &me, all, sizeof(me));
	if (!ret)
		ret = r ? r : tx_peers(tx, all);
	if (ret)
		goto err;
	ret = tx_connect_all(tx, all);
	st = calloc(c->size, sizeof(*st));
	if (!st && !ret)
		ret = hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "tcp transport");
	mine = (int32_t)htole32((uint32_t)-ret);
	r = hcomm__boot_allgather(c->boot, &mine, st, sizeof(mine));
	if (!ret && r)
		ret = r;
	for (r = 0; !ret && r < c->size; r++) {
		e = (int)le32toh((uint32_t)st[r]);
		if (e)
			ret = hcomm__fail(HCOMM_ERR_IO, 0, "tcp transport: "
					  "rank %d could not connect its "
					  "lanes: %s", r, hcomm_strerror(e));
	}
	if (ret)
		goto err;
	free(st);
	free(all);
	return 0;
err:
	free(st);
	free(all);
	tx_fini(c);
	return ret;
}

/* Test hook (hcomm_xport.h): this rank's listener, "ip:port", or "". */
const char *hcomm__tcp_listen_addr(const struct hcomm_comm *c)
{
	if (!c || c->xo[HCOMM_XP_TCP] != &hcomm__xport_tcp ||
	    !c->xps[HCOMM_XP_TCP])
		return "";
	return tx_of(c)->self_addr;
}

int hcomm__tcp_peer_err(const struct hcomm_comm *c, int peer)
{
	const struct tx *tx;

	if (!c || !c->xps[HCOMM_XP_TCP] || peer < 0 || peer >= c->size)
		return 0;
	tx = tx_of(c);
	return __atomic_load_n(&tx->peers[peer].err, __ATOMIC_ACQUIRE);
}

const struct hcomm_xport_ops hcomm__xport_tcp = {
	.name = "tcp",
	.id = HCOMM_XP_TCP,
	.probe = tx_probe,
	.init = tx_init,
	.fini = tx_fini,
	.win_create = tx_win_create,
	.win_free = tx_win_free,
	.post = tx_post,
	.progress = tx_progress,
	.block = tx_block,
	.wake_enable = tx_wake_enable,
	.wake = tx_wake,
	.fence = tx_fence,
	.flush = tx_flush,
	.signal_count = tx_signal_count,
	.signal_read = tx_signal_read,
	.signal_wait_any = tx_signal_wait_any,
	.signal_add = tx_signal_add,
	.stats = tx_stats,
	.publish = tx_publish,
	.peer_stats = tx_peer_stats,
};
