/* SPDX-License-Identifier: MIT */
/*
 * libhcomm: userspace access to hcomm.ko (/dev/hcomm).
 *
 * Every function returns 0 (or a count) on success and a negated
 * enum hcomm_err code on failure; none exits, aborts or prints.
 * The raw errno behind the last failure of the calling thread is
 * hcomm_errno(), a one-line explanation is hcomm_errmsg().
 *
 * Commands go through io_uring (IORING_OP_URING_CMD) when the kernel and
 * the module allow it, else through ioctl(); both give the same results.
 *
 * Threads: a context may be shared by threads.  Its mutex guards the
 * io_uring (commands of one context are serialised on the ring), the list
 * of mrs and the hot-buffer cache (held briefly by hcomm_reg_mem and
 * hcomm_dereg); ioctl() commands themselves run in parallel.  Use one
 * context per thread for parallel registration.  hcomm_close() must not
 * race with other calls on the same context, and an mr must not be used
 * by two threads while one of them deregisters it.
 *
 * Communicators (below): every operation may be called from any thread.
 * A communicator has num_qps rings; a thread uses ring (thread index %
 * num_qps), each ring has its own lock for submission, and completions are
 * reaped by one thread at a time per ring (try-lock).  Every put or get of
 * a non-empty local buffer also takes the registration cache's mutex for
 * its lookup (a hit is no system call, but it is a lock).  Collective calls
 * (init, destroy, barrier, allgather, win_create, win_free) must be made
 * by one thread per rank, in the same order on every rank.
 */
#ifndef LIBHCOMM_H
#define LIBHCOMM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <linux/hcomm.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HCOMM_LIB_VERSION_MAJOR	1
#define HCOMM_LIB_VERSION_MINOR	0

/* Default device node; the environment variable HCOMM_DEVICE overrides it. */
#define HCOMM_DEVICE_PATH	"/dev/hcomm"

/*
 * Error codes, returned negated (-HCOMM_ERR_x).  errno mapping:
 *
 *  HCOMM_ERR_NODEV    ENOENT, ENODEV, ENXIO from open(): the module is not
 *                     loaded (modprobe hcomm / insmod hcomm.ko) or
 *                     HCOMM_DEVICE names no device; ENODEV from a command.
 *  HCOMM_ERR_MMAP     ENOMEM from REG_MEM while RLIMIT_MEMLOCK is finite:
 *                     the pinned pages exceed the memlock limit; raise it
 *                     (ulimit -l, limits.conf "memlock") or give the
 *                     process CAP_IPC_LOCK.
 *  HCOMM_ERR_ACCESS   EACCES, EROFS; EPERM (also: REG_MEM from a process
 *                     other than the one that opened the context, e.g.
 *                     after fork); EFAULT (the buffer is not mapped, or
 *                     mapped read-only while LOCAL_WRITE asked).
 *  HCOMM_ERR_INVAL    EINVAL, EBADF, EOVERFLOW, ERANGE; bad arguments
 *                     caught by the library.
 *  HCOMM_ERR_NOMEM    ENOMEM elsewhere (including REG_MEM with unlimited
 *                     memlock); malloc failure in the library.
 *  HCOMM_ERR_ABI      the module reports another HCOMM_ABI_VERSION; ENOTTY
 *                     from a command (the module does not know it).
 *  HCOMM_ERR_BUSY     EBUSY, EAGAIN, EINTR: retry.
 *  HCOMM_ERR_IO       EIO and any errno not listed here.
 *  HCOMM_ERR_TIMEOUT  ETIMEDOUT, ETIME (alias HCOMM_TIMEOUT).
 *  HCOMM_ERR_NOTSUP   EOPNOTSUPP, ENOSYS; a feature the module lacks
 *                     (e.g. REG_DMABUF without HCOMM_FEAT_DMABUF).
 *  HCOMM_ERR_NOENT    ENOENT from a command: no such region.
 *  HCOMM_ERR_LIMIT    ENOSPC, E2BIG, EDQUOT, EMFILE, ENFILE: too many
 *                     regions (max_regions), region too large
 *                     (max_region_size), or out of file descriptors.
 *  HCOMM_ERR_NOTHCOMM ENOTTY from GET_INFO in hcomm_open(): the file is not
 *                     an hcomm device.
 *  HCOMM_ERR_ADMISSION ENOSPC from hcomm_set_qos(): the min_rate of every
 *                     context on the node together would exceed 100 %.
 */
enum hcomm_err {
	HCOMM_OK = 0,
	HCOMM_ERR_NODEV,
	HCOMM_ERR_MMAP,
	HCOMM_ERR_ACCESS,
	HCOMM_ERR_INVAL,
	HCOMM_ERR_NOMEM,
	HCOMM_ERR_ABI,
	HCOMM_ERR_BUSY,
	HCOMM_ERR_IO,
	HCOMM_ERR_TIMEOUT,
	HCOMM_TIMEOUT = HCOMM_ERR_TIMEOUT,
	HCOMM_ERR_NOTSUP,
	HCOMM_ERR_NOENT,
	HCOMM_ERR_LIMIT,
	HCOMM_ERR_NOTHCOMM,
	HCOMM_ERR_ADMISSION,
	HCOMM_ERR__MAX			/* not a code; one past the last */
};

/* hcomm_open() flags. */
#define HCOMM_OPEN_NO_URING	(1U << 0)	/* use ioctl() only */

struct hcomm_ctx;

/* A registered region.  Read-only for the caller; freed by hcomm_dereg(). */
struct hcomm_mr {
	struct hcomm_ctx *ctx;
	uint32_t region;	/* region id, never 0 */
	uint32_t type;		/* HCOMM_REGION_HOST or HCOMM_REGION_DMABUF */
	uint64_t key;		/* key naming the region */
	void *addr;		/* host: first byte; dma-buf: NULL */
	size_t len;		/* bytes registered */
	uint64_t offset;	/* dma-buf: offset into the dma-buf; host: 0 */
	int dmabuf_fd;		/* dma-buf: fd as passed (not owned); host: -1 */
	unsigned access;	/* HCOMM_ACCESS_* */
};

/* The registration as a handle: hcomm_mr_t mr; hcomm_reg_mem(.., &mr). */
typedef struct hcomm_mr *hcomm_mr_t;

/*
 * Open HCOMM_DEVICE or /dev/hcomm, check HCOMM_CMD_GET_INFO's ABI version,
 * and set up a queue-depth-8 io_uring for commands unless flags has
 * HCOMM_OPEN_NO_URING, the environment has HCOMM_NO_URING=1, or the kernel
 * or module cannot do uring_cmd (then ioctl() is used, silently).
 */
int hcomm_open(struct hcomm_ctx **ctx, unsigned flags);
/* Close the device (the module drops every region) and free remaining mrs. */
void hcomm_close(struct hcomm_ctx *ctx);
/* 1 when commands go through io_uring, 0 when through ioctl(). */
int hcomm_uses_uring(const struct hcomm_ctx *ctx);
/* Device fd (for poll/diagnostics); owned by the context. */
int hcomm_fd(const struct hcomm_ctx *ctx);

/* HCOMM_CMD_GET_INFO, fresh from the module. */
int hcomm_get_info(struct hcomm_ctx *ctx, struct hcomm_info *out);

/* Pin and register [addr, addr + size) of this process; any alignment. */
int hcomm_reg_mem(struct hcomm_ctx *ctx, void *addr, size_t size,
		  unsigned access, struct hcomm_mr **mr);
/* Import [offset, offset + len) of dma-buf fd (offset page aligned). */
int hcomm_reg_dmabuf(struct hcomm_ctx *ctx, int fd, uint64_t offset,
		     size_t len, unsigned access, struct hcomm_mr **mr);
/*
 * Deregister and free mr.  On failure mr is kept (the call may be
 * retried); hcomm_close() frees it in any case.
 *
 * Hot-buffer cache: a host registration may stay registered after
 * hcomm_dereg() (parked, up to HCOMM_CACHE_LIMIT bytes, default 64M, and
 * 64 entries; 0 turns it off; a value that is not a size of 0 .. 64G
 * makes hcomm_open() fail with HCOMM_ERR_INVAL naming the variable)
 * while the kernel's generation page says its address still maps the
 * same pages; hcomm_reg_mem() of exactly the same
 * address, length and access then returns it without a system call (same
 * region id and key).  A registration that would exceed RLIMIT_MEMLOCK
 * first gives parked ones back.  Set HCOMM_CACHE_LIMIT=0 when a key must
 * be revoked at hcomm_dereg() (e.g. after granting it with the raw ABI).
 */
int hcomm_dereg(struct hcomm_mr *mr);
/*
 * HCOMM_CMD_QUERY: fill *q and the first min(max_ext, q->nr_extents)
 * entries of ext (may be NULL when max_ext is 0).
 */
int hcomm_query(struct hcomm_mr *mr, struct hcomm_query *q,
		struct hcomm_extent *ext, unsigned max_ext);

/*
 * The context's share of the module's transfer engine (the copies of
 * asynchronous transfers: puts and gets of a communicator on the kernel
 * transport, which use hcomm_comm_ctx()), in percent of the whole engine.
 * Documentation/qos.rst has the arithmetic (users first, then their
 * contexts; water-filling by weight under the caps).
 *
 *  min_rate  0 .. 100   guaranteed share while the context has work, and
 *                       its weight (0 counts as 1)
 *  max_rate  0 .. 100   cap while others could use more; 0 means 100 (no
 *                       cap), so { .min_rate = 30 } alone is valid
 *  priority  0 .. 7     breaks ties between contexts due at once
 *
 * A new context has { 0, 100, 0 }.  The setting lasts until the next call
 * or hcomm_close().
 */
typedef struct hcomm_qos_config {
	unsigned min_rate;
	unsigned max_rate;
	unsigned priority;
} hcomm_qos_config_t;

/*
 * HCOMM_CMD_SET_QOS.  Errors: HCOMM_ERR_INVAL (NULL, min_rate above
 * max_rate, a value out of range: checked before the module is asked),
 * HCOMM_ERR_ADMISSION (the min_rate of all contexts on the node would sum
 * above 100), HCOMM_ERR_ACCESS (without CAP_SYS_NICE: min_rate, or the
 * min_rate of all the user's contexts together, above the module's
 * qos_user_min_rate, or priority above qos_user_priority; hcomm_errmsg()
 * names the values in force).  On failure the old setting stays.
 */
int hcomm_set_qos(struct hcomm_ctx *ctx, const hcomm_qos_config_t *qos);

/* Message for an hcomm_err code (sign ignored); never NULL or empty. */
const char *hcomm_strerror(int err);
/* errno behind the calling thread's last failure (0: none or local). */
int hcomm_errno(void);
/* One-line detail of the calling thread's last failure ("" if none). */
const char *hcomm_errmsg(void);


/* ------------------------------------------------------------------ */
/* Configuration (hcomm_config.c)                                     */
/* ------------------------------------------------------------------ */

/*
 * Tuning, from code or from the environment.  hcomm_config_default() fills
 * the defaults below; hcomm_config_from_env() overlays the HCOMM_* variables
 * that are set.  Sizes accept a decimal number with an optional K, M or G
 * suffix (powers of 1024, case-insensitive, optional "iB"/"B"): "2M",
 * "64K", "4096".  Anything else (garbage, negative, overflow, out of range)
 * is rejected with HCOMM_ERR_INVAL and hcomm_errmsg() naming the variable.
 *
 *  field                 variable              default  range
 *  send_buf_size         HCOMM_SEND_BUF_SIZE   2M       4K .. 1G
 *  recv_buf_size         HCOMM_RECV_BUF_SIZE   2M       4K .. 1G
 *  max_inline            HCOMM_MAX_INLINE      4K       0 .. 64K (the
 *                                                       module's max_inline
 *                                                       caps it silently)
 *  num_qps               HCOMM_NUM_QPS         1        1 .. 64 (rings)
 *  queue_depth           HCOMM_QUEUE_DEPTH     256      8 .. 32768
 *  cache_limit           HCOMM_CACHE_LIMIT     64M      0 .. 64G
 *  enable_fp16_compress  HCOMM_FP16_COMPRESS   0        0 or 1
 *  comp_threshold        HCOMM_COMP_THRESHOLD  64K      0 .. 1G
 *  rank_table            HCOMM_RANK_TABLE      NULL     a file path
 *  timeout_ms            HCOMM_TIMEOUT_MS      30000    1 .. 3600000 (ms;
 *                                                       init, and the
 *                                                       collectives unless
 *                                                       HCOMM_COLL_TIMEOUT_MS
 *                                                       or hcomm_comm_set_
 *                                                       coll_timeout())
 *
 * Profiles (HCOMM_PROFILE=latency|bandwidth|default) set several fields at
 * once before the individual variables apply; see Documentation/tuning.rst.
 * send_buf_size and recv_buf_size size the network transports' buffers
 * (tcp: the least socket buffers, left to the kernel's autotuning where
 * it reaches them; rdma: the bounce ring per peer); enable_fp16_compress
 * and comp_threshold choose the fp16 compression of fp32 allreduces
 * (hcomm_comm_set_fp16_compress()).  The kernel transport uses none of
 * them.
 */
struct hcomm_config {
	uint64_t send_buf_size;
	uint64_t recv_buf_size;
	uint32_t max_inline;
	uint32_t num_qps;
	uint32_t queue_depth;
	int enable_fp16_compress;
	uint64_t cache_limit;
	uint64_t comp_threshold;
	const char *rank_table;
	uint32_t timeout_ms;
};

void hcomm_config_default(struct hcomm_config *cfg);
int hcomm_config_from_env(struct hcomm_config *cfg);
/* Parse a size as above into *out; 0 or -HCOMM_ERR_INVAL. */
int hcomm_parse_size(const char *s, uint64_t *out);

/* ------------------------------------------------------------------ */
/* Communicator (hcomm_comm.c)                                        */
/* ------------------------------------------------------------------ */

struct hcomm_comm;
struct hcomm_win;

/* Where hcomm_comm_init() found its rank and size. */
enum hcomm_launcher {
	HCOMM_LAUNCH_RANK_TABLE = 1,	/* cfg->rank_table / HCOMM_RANK_TABLE */
	HCOMM_LAUNCH_ENV,		/* HCOMM_RANK, HCOMM_WORLD_SIZE */
	HCOMM_LAUNCH_OMPI,		/* OMPI_COMM_WORLD_RANK/_SIZE */
	HCOMM_LAUNCH_SLURM,		/* SLURM_PROCID, SLURM_NTASKS */
	HCOMM_LAUNCH_PMI,		/* PMI_RANK, PMI_SIZE */
	HCOMM_LAUNCH_SINGLE,		/* nothing set: one rank */
};

/*
 * Create the communicator of this process (collective over all ranks).
 * cfg may be NULL: defaults plus the environment.  Rank and size come from,
 * in this order: the rank table, HCOMM_RANK/HCOMM_WORLD_SIZE, Open MPI's,
 * Slurm's or PMI's variables, else a single rank.  The ranks meet at
 * HCOMM_ROOT_ADDR, the rank table's root, rank 0's host (a table or a
 * Slurm step over several hosts: TCP at the job's port), or an abstract
 * unix socket "hcomm-<euid>-<job>" (job: HCOMM_JOB_ID, the launcher's job
 * id, the rank table's contents, or else the parent's pid); a TCP address
 * is "host:port" or "[v6]:port".  Rank 0 hands out a random job nonce and
 * every rank's host id (boot id and host nonce), so ranks that share a
 * kernel use /dev/hcomm; they then exchange what one-sided operations
 * need (Documentation/libhcomm.rst).  Each phase waits
 * at most cfg->timeout_ms for the others (HCOMM_ERR_TIMEOUT).  With a
 * non-NULL cfg, HCOMM_RANK_TABLE is not read (only cfg->rank_table).
 */
int hcomm_comm_init(struct hcomm_comm **comm, const struct hcomm_config *cfg);
/* Collective: wait for outstanding operations, then tear everything down. */
int hcomm_comm_destroy(struct hcomm_comm *comm);
int hcomm_comm_rank(const struct hcomm_comm *comm);
int hcomm_comm_size(const struct hcomm_comm *comm);
enum hcomm_launcher hcomm_comm_launcher(const struct hcomm_comm *comm);
/* The context (device) the communicator uses. */
struct hcomm_ctx *hcomm_comm_ctx(struct hcomm_comm *comm);
/*
 * The transports in use, joined by '+' in the order kernel, rdma, tcp
 * ("kernel", "rdma+tcp", "kernel+rdma+tcp", ...).  HCOMM_TRANSPORT=
 * kernel|rdma|tcp forces one for every peer; auto (the default) gives
 * each peer its own (hcomm_comm_print_peers()).
 */
const char *hcomm_comm_transport(const struct hcomm_comm *comm);
/*
 * Measure the links to every rank of another host again and choose the
 * transport per peer and message size from the figures (collective; see
 * HCOMM_PROBE in Documentation/transports.rst).  hcomm_comm_init() does it
 * once unless HCOMM_PROBE=off or HCOMM_TRANSPORT names one transport.
 * No other operation of the communicator may be in flight meanwhile (the
 * routes change under it).
 */
int hcomm_comm_probe(struct hcomm_comm *comm);
/*
 * The decision table: per peer, every transport's measured latency,
 * bandwidth and errors, and the transport of each size range; text (one
 * line per peer) or one JSON object.  HCOMM_LOG=info prints the text at
 * init.
 */
int hcomm_comm_print_peers(struct hcomm_comm *comm, FILE *f, int json);
/*
 * Barrier and allgather over the bootstrap channel (the control plane:
 * a star of sockets through rank 0, no transport involved).  The
 * library uses them to set up windows; applications may, to meet or
 * swap a few bytes while the data path is down or not set up yet.
 * hcomm_barrier() and hcomm_allgather() (below, with the collectives)
 * go over the data path.
 *
 * Collective timeout: every collective after hcomm_comm_init (barrier,
 * allgather, win_create, win_free, destroy) waits at most the collective
 * timeout for the other ranks: cfg->timeout_ms, unless
 * HCOMM_COLL_TIMEOUT_MS (read when cfg is NULL: 1 .. 3600000 ms, or
 * "inf") or hcomm_comm_set_coll_timeout() says otherwise.  A rank that
 * exits or crashes is noticed at once, with or without a limit.
 *
 * After a collective failed (HCOMM_ERR_TIMEOUT, a rank gone, a mismatch)
 * the bootstrap channel is out of step for good: every later collective
 * (barrier, allgather, win_create) fails at once with HCOMM_ERR_IO.  The
 * rest keeps working: put, get, put_signal and their _nb forms, batches,
 * progress, test, wait, fence, flush and the signals, on the windows
 * created before; hcomm_win_free() and hcomm_comm_destroy() still release
 * everything of this rank (deregistering its windows: later transfers of
 * other ranks into them fail) and return the collective's error.
 */
int hcomm_boot_barrier(struct hcomm_comm *comm);
/* Every rank's len bytes at send, gathered into recv[size * len]. */
int hcomm_boot_allgather(struct hcomm_comm *comm, const void *send,
			 void *recv, size_t len);
/*
 * Counters of the communicator's registration cache of local buffers
 * (the put sources and get destinations it registered for you).
 */
struct hcomm_comm_stats {
	uint64_t rcache_hits;		/* found valid: no system call */
	uint64_t rcache_misses;		/* registered (not found / too small) */
	uint64_t rcache_stale;		/* found, but the memory changed
					 * (munmap, mremap ...): registered
					 * again */
	uint64_t rcache_evictions;	/* deregistered to stay in bounds */
	uint64_t rcache_entries;	/* registrations kept now */
	uint64_t rcache_bytes;		/* bytes they cover now */
	uint64_t rcache_dead;		/* replaced while an operation used
					 * them: deregistered once unused */
	/* Network transports (tcp), summed over the peers (per peer:
	 * hcomm_comm_peer_stats()); 0 otherwise. */
	uint64_t net_bytes_sent;	/* payload bytes sent (puts, get
					 * replies) */
	uint64_t net_bytes_recv;	/* payload bytes received and applied */
	uint64_t net_ops_sent;		/* requests sent (put, get frames) */
	uint64_t net_ops_recv;		/* requests received and applied */
	uint64_t net_crc_errors;	/* frames whose CRC32C failed */
	uint64_t net_refused;		/* connections refused at the hello,
					 * frames refused (malformed, out of
					 * range): the connection closed */
	uint64_t net_retransmits;	/* TCP retransmits (TCP_INFO
					 * tcpi_total_retrans) */
	uint64_t net_conn_lost;		/* connections closed by an error
					 * (peer gone, bad frame, timeout) */
	uint64_t rdma_wc_errors;	/* rdma: work requests completed in
					 * error (flushed ones included; by
					 * status: transports.rst) */
};
/* Fill *st (never fails for a valid comm). */
int hcomm_comm_get_stats(struct hcomm_comm *comm, struct hcomm_comm_stats *st);

/*
 * With HCOMM_STATS_DIR set when hcomm_comm_init() runs, the communicator
 * publishes its counters for hcomm_info(1) and hcomm_perf_mon(1) in
 * "DIR/hcomm-<pid>-<rank>-<n>.stats" (n: the process's communicators
 * counted from 0; created mode 0600, updated as the
 * counters change, removed by hcomm_comm_destroy; a file whose pid is gone
 * is stale).  The file is this struct; readers check magic, version and
 * size.  A directory that cannot take the file fails hcomm_comm_init()
 * with an error naming HCOMM_STATS_DIR.
 */
#define HCOMM_STATS_MAGIC	0x3153544154534348ULL	/* "HCSTATS1" */
#define HCOMM_STATS_VERSION	1
struct hcomm_stats_file {
	uint64_t magic;
	uint32_t version;
	uint32_t size;			/* sizeof(struct hcomm_stats_file) */
	int32_t pid;
	int32_t rank;
	int32_t world_size;
	uint32_t reserved;
	struct hcomm_comm_stats st;
};

/*
 * Per-peer counters: hcomm_comm_peer_stats(comm, peer, st) fills *st with
 * what each transport counted towards one peer and the route it takes
 * per message size.  Set st->size = sizeof(*st) before the call: the
 * library fills at most that many bytes (so a program built against an
 * older, shorter struct keeps working) and sets size to the bytes it
 * filled and version to HCOMM_PEER_STATS_VERSION.  Fields are only ever
 * appended; the reserved ones read 0.
 */
#define HCOMM_PEER_STATS_VERSION	1
/* Transports, the index of hcomm_peer_stats.xp[] and .range[].xport. */
enum hcomm_xport_id {
	HCOMM_XPORT_KERNEL,
	HCOMM_XPORT_RDMA,
	HCOMM_XPORT_TCP,
};
#define HCOMM_PEER_XPORTS	4	/* room in xp[]: 3 used */
#define HCOMM_PEER_RANGES	4	/* room in range[] */
#define HCOMM_PEER_WC_STATUS	32	/* wc_status[]: ibv_wc_status */

/*
 * What one transport counted towards one peer (all zero for a transport
 * that does not reach it: in_use 0).  Bytes are payload bytes, ops are
 * requests.  See Documentation/transports.rst, "Per-peer counters", for
 * what each transport counts in each field.
 */
struct hcomm_peer_xport_stats {
	uint32_t in_use;		/* 1: set up and reaches the peer */
	uint32_t reserved0;
	uint64_t bytes_sent;		/* payload sent (puts; tcp: get
					 * replies too) */
	uint64_t bytes_recv;		/* payload received (gets; tcp: puts
					 * applied here too) */
	uint64_t ops_sent;		/* requests sent (puts, gets) */
	uint64_t ops_recv;		/* requests received and applied
					 * (tcp), signal pieces (rdma) */
	uint64_t crc_errors;		/* tcp: frames failing CRC32C */
	uint64_t refused;		/* tcp: frames refused (malformed, out
					 * of range): the connection closed */
	uint64_t conn_lost;		/* connections closed by an error */
	uint64_t retransmits;		/* tcp: TCP_INFO tcpi_total_retrans
					 * summed over its connections */
	uint64_t wc_errors;		/* rdma: work requests completed in
					 * error, any status */
	uint64_t wc_status[HCOMM_PEER_WC_STATUS]; /* rdma: the same by
					 * enum ibv_wc_status (index 0,
					 * IBV_WC_SUCCESS, also counts a
					 * status >= 32) */
	uint64_t reserved[8];
};

/* Messages of sizes in [previous upto, upto) go over xport. */
struct hcomm_peer_range {
	uint64_t upto;			/* UINT64_MAX: no upper bound */
	int32_t xport;			/* enum hcomm_xport_id */
	uint32_t reserved;
};

struct hcomm_peer_stats {
	uint32_t size;			/* in: sizeof(struct
					 * hcomm_peer_stats); out: bytes
					 * filled */
	uint32_t version;		/* out: HCOMM_PEER_STATS_VERSION */
	int32_t peer;			/* out: the peer */
	uint32_t nranges;		/* range[] in use (0: unreachable) */
	struct hcomm_peer_range range[HCOMM_PEER_RANGES];
	char why[96];			/* how the route was chosen */
	struct hcomm_peer_xport_stats xp[HCOMM_PEER_XPORTS];
	uint64_t reserved[16];
};

/*
 * Fill *st for peer (0 .. size - 1, not this rank).  HCOMM_ERR_INVAL for
 * a NULL comm or st, st->size below the size of version 1, a peer out of
 * range or this rank.  Not collective; any thread.
 */
int hcomm_comm_peer_stats(struct hcomm_comm *comm, int peer,
			  struct hcomm_peer_stats *st);

/*
 * With HCOMM_STATS_DIR set, each communicator also writes
 * "DIR/hcomm-<pid>-<rank>-<n>.peers.json" (mode 0600, replaced
 * atomically): {"version": 1, "pid", "rank", "size", "table": the object
 * hcomm_comm_print_peers(comm, f, 1) prints, "counters": [{"peer",
 * "kernel"|"rdma"|"tcp": {the fields of struct hcomm_peer_xport_stats}}]}.
 * Written at init, after hcomm_comm_probe() and at most once a second
 * while the counters change; removed by hcomm_comm_destroy().
 */
#define HCOMM_PEERS_JSON_VERSION	1

/*
 * Limit of each later collective of comm, in ms: 1 .. 3600000, or < 0 to
 * wait without limit (0 or more than an hour: HCOMM_ERR_INVAL).  Not
 * collective, but every rank should use the same value: a rank that gives
 * up leaves the others waiting up to their own limit.
 */
int hcomm_comm_set_coll_timeout(struct hcomm_comm *comm, int timeout_ms);

/*
 * Link events (Documentation/failover.rst): what the communicator noticed
 * about its links to a peer, in the order it noticed them.
 *  HCOMM_EVENT_LINK_DOWN   a transport's link to peer failed: a keep-alive
 *                          timeout (no progress of operations or probes for
 *                          HCOMM_KEEPALIVE_TIMEOUT), a completion error, a
 *                          QP or port event, or a closed connection.
 *  HCOMM_EVENT_FAILED_OVER the link (rdma) to peer failed and its
 *                          operations moved to xport (tcp): every one in
 *                          flight completed once, those the peer had not
 *                          applied replayed; silent_ns is the stall (from
 *                          the link's last progress to the switch).
 *  HCOMM_EVENT_RECOVERED   a new link (rdma) to peer is up after a
 *                          failover and carries its operations again
 *                          (HCOMM_FAILBACK=0: never).
 *  HCOMM_EVENT_PEER_LOST   peer's process is gone or no transport reaches
 *                          it any more: its operations fail with err.
 */
enum hcomm_event_type {
	HCOMM_EVENT_LINK_DOWN = 1,
	HCOMM_EVENT_FAILED_OVER = 2,
	HCOMM_EVENT_RECOVERED = 3,
	HCOMM_EVENT_PEER_LOST = 4,
};

/*
 * struct hcomm_event - one event, valid during the callback only.
 * @size:      sizeof(struct hcomm_event) of the library (fields are only
 *             ever appended).
 * @type:      enum hcomm_event_type.
 * @peer:      the other rank.
 * @xport:     the transport whose link it is (enum hcomm_xport_id).
 * @err:       the hcomm_err behind it (0 for none).
 * @time_ns:   when it was noticed (CLOCK_MONOTONIC).
 * @silent_ns: LINK_DOWN after a keep-alive timeout: how long the link had
 *             made no progress; else 0.
 * @seq:       the communicator's event number (1, 2, ...: a gap means
 *             events were dropped: more than 64 waited for delivery).
 * @why:       a sentence for a log.
 */
struct hcomm_event {
	uint32_t size;
	uint32_t type;
	int32_t peer;
	int32_t xport;
	int32_t err;
	uint32_t reserved0;
	uint64_t time_ns;
	uint64_t silent_ns;
	uint64_t seq;
	uint64_t reserved[4];
	char why[160];
};

/*
 * Names for logs: "link-down", "failed-over", "recovered", "peer-lost"
 * ("?" for another type); "kernel", "rdma", "tcp" for an enum
 * hcomm_xport_id ("none" for another value).
 */
const char *hcomm_event_name(int type);
const char *hcomm_xport_name(int xport);

typedef void (*hcomm_event_cb)(struct hcomm_comm *comm,
			       const struct hcomm_event *ev, void *arg);

/*
 * Call cb(comm, ev, arg) for each later event, on a thread of the library
 * (one at a time, in order; cb may issue operations and read counters but
 * must not destroy comm).  Events noticed before the first call (at most
 * 64) are delivered then.  cb NULL: stop; returns once a running callback
 * has returned (unless called from it).  Not collective; any thread.
 * HCOMM_ERR_INVAL for a NULL comm.
 */
int hcomm_comm_set_event_cb(struct hcomm_comm *comm, hcomm_event_cb cb,
			    void *arg);

/*
 * For a library layered on libhcomm (libpypto does it for the length of a
 * run), beside the application's callback above: also call cb(comm, ev,
 * arg) for each later event, on the same thread, in the same order, after
 * the application's callback (the same rules apply to cb).  Events
 * waiting for a first subscriber go to whoever is subscribed when they
 * are delivered.  Returns the listener's id (>= 1) for
 * hcomm_comm_event_unlisten(), HCOMM_ERR_INVAL (NULL comm or cb, a
 * communicator being destroyed), HCOMM_ERR_LIMIT (8 listeners already).
 * Not collective; any thread.
 */
int hcomm_comm_event_listen(struct hcomm_comm *comm, hcomm_event_cb cb,
			    void *arg);
/*
 * Remove listener id; once this returns its callback is not running and
 * is never called again (unless called from that callback).
 * HCOMM_ERR_INVAL for an id that is not listening.
 */
int hcomm_comm_event_unlisten(struct hcomm_comm *comm, int id);

/*
 * 1 once a HCOMM_EVENT_PEER_LOST was raised about peer (its process is
 * gone; set before the transport fails the requests to it, so a
 * completion callback that sees a failure can ask), else 0;
 * HCOMM_ERR_INVAL for a NULL comm, a rank out of range or this rank.
 */
int hcomm_comm_peer_lost(const struct hcomm_comm *comm, int peer);

/*
 * Windows: memory each rank exposes to the others (collective; every rank
 * passes its own base/len, which may differ, len may be 0).  The library
 * registers it, grants the other ranks read and write access, and
 * exchanges the keys.
 */
int hcomm_win_create(struct hcomm_comm *comm, void *base, size_t len,
		     struct hcomm_win **win);
/* Collective; waits for outstanding operations on the window first. */
int hcomm_win_free(struct hcomm_win *win);
/* Bytes rank exposes in win (0 for a rank that passed len 0). */
size_t hcomm_win_size(const struct hcomm_win *win, int rank);

/* ------------------------------------------------------------------ */
/* One-sided operations                                               */
/* ------------------------------------------------------------------ */

/*
 * Local buffers may be any memory of this process: the library registers
 * them through its registration cache (validated against the kernel's
 * generation page, so a hot buffer costs no system call) and keeps the
 * registration until it is invalidated or evicted.  Offsets are bytes
 * into the target rank's part of the window; the target may be this rank.
 *
 * Completion semantics: a blocking call returns when the data has landed
 * in its destination (the kernel copies single-copy between the two
 * address spaces; there is no separate remote completion).
 */
int hcomm_put(struct hcomm_win *win, int target, uint64_t target_off,
	      const void *src, size_t len);
int hcomm_get(struct hcomm_win *win, int target, uint64_t target_off,
	      void *dst, size_t len);
/*
 * put, then add value to signal sig of the target once the data is
 * visible there (acquire loads of the signal see the data).
 */
int hcomm_put_signal(struct hcomm_win *win, int target, uint64_t target_off,
		     const void *src, size_t len, uint32_t sig,
		     uint64_t value);
/*
 * Wait until this rank's signal sig reaches at least value (spins
 * briefly, then sleeps in the kernel); timeout_ms < 0 waits forever.
 * Returns the value seen (>= 0) or -HCOMM_ERR_TIMEOUT.
 */
int64_t hcomm_signal_wait(struct hcomm_comm *comm, uint32_t sig,
			  uint64_t value, int timeout_ms);
/* Signals one hcomm_signal_wait_any() waits for, at most. */
#define HCOMM_SIGNAL_WAIT_ANY_MAX	4
/*
 * Wait until one of n (1 .. HCOMM_SIGNAL_WAIT_ANY_MAX) of this rank's
 * signals, sig[i], reaches at least value[i]: one sleep for all of them.
 * Returns the lowest such i, -HCOMM_ERR_TIMEOUT or another error.
 */
int hcomm_signal_wait_any(struct hcomm_comm *comm, const uint32_t *sig,
			  const uint64_t *value, int n, int timeout_ms);
/* Current value of this rank's signal sig (acquire load; no syscall). */
uint64_t hcomm_signal_read(struct hcomm_comm *comm, uint32_t sig);
/* Number of signals per rank. */
uint32_t hcomm_signal_count(const struct hcomm_comm *comm);
/*
 * Operations issued before it complete before any issued after it (blocks
 * until the kernel's FENCE completed; does not wait for callbacks and does
 * not report earlier operations' errors: see their requests).
 */
int hcomm_fence(struct hcomm_comm *comm);
/*
 * Wait until every operation issued so far by this rank has completed and
 * its callback returned.  Errors are reported through the requests.  From
 * inside a callback it waits for every operation to complete and runs the
 * callbacks queued on this thread, but cannot wait for the callbacks that
 * are running (its own, the ones it is nested in, other threads').
 */
int hcomm_flush(struct hcomm_comm *comm);

/* ------------------------------------------------------------------ */
/* Non-blocking operations, batches, completions                      */
/* ------------------------------------------------------------------ */

struct hcomm_request;
/*
 * Completion callback: req->status, bytes and t_complete_ns are valid
 * (status 0 or a negated hcomm_err); req->done still reads 0.
 */
typedef void (*hcomm_cb_fn)(struct hcomm_request *req, void *arg);

/*
 * Caller-owned request: no allocation on the fast path.  Set cb/cb_arg
 * (or leave cb NULL) before issuing; read status/bytes after completion.
 *
 * Lifetime: from a successful issue the request belongs to the library
 * until done reads 1 (acquire load), which is after its callback has
 * returned; hcomm_test() and hcomm_wait() report completion only then.
 * Until then it must stay valid and must not be issued again, freed or
 * reused - also not by its own callback (issuing it from there fails with
 * HCOMM_ERR_BUSY).  A callback may issue, test and wait for other
 * requests; waiting for or testing its own request returns at once (it
 * has completed as far as the callback can tell).
 */
struct hcomm_request {
	int status;		/* out: 0 or -HCOMM_ERR_x, valid when done
				 * and in the callback */
	int done;		/* out: 1 once complete and the callback
				 * returned (acquire load); the request is
				 * the caller's again from then on */
	uint64_t bytes;		/* out: bytes moved */
	hcomm_cb_fn cb;		/* in: called once on completion, or NULL */
	void *cb_arg;		/* in */
	uint64_t t_complete_ns;	/* out: CLOCK_MONOTONIC when it completed */
	void *priv[4];		/* library use */
};

int hcomm_put_nb(struct hcomm_win *win, int target, uint64_t target_off,
		 const void *src, size_t len, struct hcomm_request *req);
int hcomm_get_nb(struct hcomm_win *win, int target, uint64_t target_off,
		 void *dst, size_t len, struct hcomm_request *req);
int hcomm_put_signal_nb(struct hcomm_win *win, int target,
			uint64_t target_off, const void *src, size_t len,
			uint32_t sig, uint64_t value,
			struct hcomm_request *req);

/* Batch descriptors: fixed size (48 bytes), as the real HComm's. */
enum hcomm_op {
	HCOMM_OP_PUT = 1,
	HCOMM_OP_GET,
	HCOMM_OP_PUT_SIGNAL,
};

struct hcomm_xfer_desc {
	uint32_t op;		/* enum hcomm_op */
	int32_t target;		/* rank */
	uint64_t target_off;	/* into target's part of the window */
	uint64_t local;		/* local address (uintptr_t) */
	uint64_t len;
	uint32_t sig;		/* HCOMM_OP_PUT_SIGNAL */
	uint32_t reserved;	/* must be 0 */
	uint64_t value;		/* HCOMM_OP_PUT_SIGNAL */
};

/*
 * Issue n descriptors with one io_uring_submit per ring (more only when
 * the ring fills).  reqs is NULL (wait for all before returning, issuing
 * in groups of 64; returns the first failure) or an array of n requests
 * (return at once; each completes on its own).  A descriptor that fails
 * validation fails the call before anything is issued.
 */
int hcomm_batch(struct hcomm_win *win, const struct hcomm_xfer_desc *d,
		unsigned int n, struct hcomm_request *reqs);

/*
 * Reap completions: completes every request it took off a ring first,
 * then runs their callbacks in this thread (HCOMM_CB_INLINE) or hands them
 * to the callback thread (HCOMM_CB_THREAD*); a request is done once its
 * callback returned.  Returns the number of completions reaped.
 */
int hcomm_progress(struct hcomm_comm *comm);
/* 1 if req is done (after progressing once), 0 if not. */
int hcomm_test(struct hcomm_request *req);
/* Progress until req is done (its callback returned); returns status. */
int hcomm_wait(struct hcomm_request *req);

/*
 * In every mode the callbacks of the completions one reap (or one issuing
 * call through ioctl()) found run after all of them completed, from a
 * per-thread list that nested hcomm_progress/test/wait/flush drain too: a
 * callback may wait for, test or flush a request completed in the same
 * reap or batch.
 */
enum hcomm_cb_mode {
	HCOMM_CB_INLINE = 0,	/* callbacks run in the thread that progresses */
	HCOMM_CB_THREAD,	/* a library thread progresses; callbacks are
				 * passed to a dispatcher thread through a
				 * lock-free MPSC queue */
	HCOMM_CB_THREAD_LOCKED,	/* as THREAD, but a mutex+condvar queue (for
				 * comparison) */
};
/*
 * The default is HCOMM_CB_INLINE.  May be changed whenever nothing is in
 * flight (HCOMM_ERR_BUSY otherwise, or from inside a callback).  Without
 * io_uring (HCOMM_NO_URING=1) _nb operations complete inside the call.
 */
int hcomm_comm_set_cb_mode(struct hcomm_comm *comm, enum hcomm_cb_mode mode);

/* ------------------------------------------------------------------ */
/* Data types and reductions (hcomm_reduce.c)                         */
/* ------------------------------------------------------------------ */

/*
 * Element types of the reductions (Documentation/collectives.rst).  The
 * values start at 1 (0 is no type, so a zeroed argument is caught) and
 * are part of the ABI: never renumbered; a new type (int16, fp8, ...)
 * takes the next value.
 *  HCOMM_FP32    IEEE 754 binary32 (float)
 *  HCOMM_FP64    IEEE 754 binary64 (double)
 *  HCOMM_FP16    IEEE 754 binary16, its bits in a uint16_t; computed in
 *                fp32 and rounded once to nearest even per element
 *  HCOMM_BF16    bfloat16 (the upper half of a binary32), in a uint16_t;
 *                computed in fp32 and rounded once likewise
 *  HCOMM_INT8, HCOMM_INT32, HCOMM_INT64     two's complement
 *  HCOMM_UINT8, HCOMM_UINT32, HCOMM_UINT64  unsigned
 * Buffers of any type may have any alignment.
 */
enum hcomm_dtype {
	HCOMM_FP32 = 1,
	HCOMM_FP64 = 2,
	HCOMM_FP16 = 3,
	HCOMM_BF16 = 4,
	HCOMM_INT8 = 5,
	HCOMM_INT32 = 6,
	HCOMM_INT64 = 7,
	HCOMM_UINT8 = 8,
	HCOMM_UINT32 = 9,
	HCOMM_UINT64 = 10,
	HCOMM_DTYPE__MAX		/* not a type; one past the last */
};

/*
 * Reduction operations, element by element over the contributions.
 * Values start at 1 and are never renumbered, as above.
 *  HCOMM_SUM   sum; the integer types wrap modulo 2^bits (the signed
 *              ones as two's complement, never undefined behaviour)
 *  HCOMM_PROD  product; integers wrap likewise
 *  HCOMM_MAX   maximum; floating point: IEEE 754-2019 maximum (a NaN if
 *              either is a NaN, and +0 is above -0)
 *  HCOMM_MIN   minimum; floating point: IEEE 754-2019 minimum (a NaN if
 *              either is a NaN, and -0 is below +0)
 *  HCOMM_AVG   the sum divided by the number of contributions:
 *              floating point rounded to nearest; integers truncated
 *              toward zero (C division: -7 / 2 is -3), after the sum
 *              wrapped as HCOMM_SUM does if it overflowed
 * A NaN result is quiet.  Floating-point arithmetic honours the calling
 * thread's rounding mode and flush-to-zero flags (defaults: to nearest,
 * subnormals kept); conversions to fp16 and bf16 always round to nearest
 * even.
 */
enum hcomm_redop {
	HCOMM_SUM = 1,
	HCOMM_PROD = 2,
	HCOMM_MAX = 3,
	HCOMM_MIN = 4,
	HCOMM_AVG = 5,
	HCOMM_REDOP__MAX		/* not an op; one past the last */
};

/* Bytes of one element of dt (1, 2, 4 or 8); 0 for a value that is no type. */
size_t hcomm_dtype_size(enum hcomm_dtype dt);
/*
 * Names for logs: "fp32", "fp64", "fp16", "bf16", "int8", "int32",
 * "int64", "uint8", "uint32", "uint64"; "sum", "prod", "max", "min",
 * "avg"; "?" for a value that is none of them.
 */
const char *hcomm_dtype_name(enum hcomm_dtype dt);
const char *hcomm_redop_name(enum hcomm_redop op);

/* ------------------------------------------------------------------ */
/* Collectives over the data path (hcomm_coll.c)                      */
/* ------------------------------------------------------------------ */

/*
 * Collective calls: every rank calls them in the same order, from one
 * thread at a time, with the same count, dt, op and root
 * (Documentation/collectives.rst).  They move data with put_signal into
 * a staging window that the first of them creates (collectively: the
 * ring's HCOMM_COLL_SLOTS slots of HCOMM_COLL_CHUNK bytes, defaults 4
 * and 256 KiB on one host, 8 and 1 MiB across hosts, then for every peer
 * 2 slots of half a chunk; the same on every rank).  The library owns
 * the communicator's last HCOMM_COLL_SLOTS + 3 + 3 * size signals
 * (hcomm_signal_count() - that .. - 1: the ring's slots and credits, 2
 * slots and a credit per peer, and the two of hcomm_comm_probe()): do not
 * use those.  The allreduce's
 * algorithm (ring, recursive doubling, halving-doubling, hierarchical
 * across hosts) is chosen by size and layout, or forced with HCOMM_ALGO;
 * HCOMM_LOG=1 prints the choice.  Each waits at most the
 * collective timeout (hcomm_comm_set_coll_timeout) without progress.
 * After one failed (a rank lost, a transfer failed, the timeout, no
 * memory for a scratch buffer) the ring is out of step for good: every
 * later one fails at once with HCOMM_ERR_IO.  Bad arguments fail with
 * HCOMM_ERR_INVAL before anything moves; the ring stays usable when
 * every rank passed the same bad arguments (a rank that alone passes bad
 * ones leaves the others waiting until their timeout).
 *
 * Buffers may have any alignment; send == recv means in place (other
 * overlaps are not allowed).  Results are bit for bit the same on every
 * rank.  fp16 and bf16 are combined in fp32 and rounded once at each
 * step of the ring (each rank's partial result is a value of the type).
 */
/*
 * Non-blocking forms (_nb): the same checks as the blocking call, then
 * the collective is queued and the call returns; req completes like a
 * one-sided operation's (hcomm_test, hcomm_wait, its callback; status
 * 0 or the collective's error, bytes this rank's contribution).  The
 * buffers belong to the library until then.  The queue runs on a
 * library thread, in issue order - blocking collectives issued behind
 * non-blocking ones wait their turn - so the compute of the caller
 * overlaps the transfers.  A collective's callback runs on that
 * thread; it may issue non-blocking collectives, not blocking ones
 * (HCOMM_ERR_BUSY, and so does hcomm_wait() for a queued collective
 * there: it could never run; hcomm_flush() and hcomm_fence() there wait
 * for everything but the queued collectives).  A blocking collective
 * from any other callback that runs while a collective waits fails the
 * same way and leaves the ring out of step (the other ranks went on).
 * hcomm_comm_destroy() fails with HCOMM_ERR_INVAL from any callback.
 * hcomm_flush() and hcomm_comm_destroy() wait for the queued ones.
 * Every rank's HCOMM_COLL_CHUNK, HCOMM_COLL_SLOTS, HCOMM_ALGO,
 * HCOMM_COLL_RD_MAX and HCOMM_COLL_HD_MAX are compared at the first
 * collective: HCOMM_ERR_INVAL on every rank when they differ.  The
 * collective timeout bounds the waits for progress; a collective that
 * failed still waits for its own transfers to end, up to the transport's
 * timeout (struct hcomm_config.timeout_ms) more.
 * The first collective of a communicator, blocking or not, creates the
 * staging window before it returns (a wait for every rank).  A failed
 * request's status is the error; hcomm_wait() on it (or hcomm_errmsg()
 * in its callback) gives the collective's message.
 */
/* recv[i] = op over the ranks of send[i], i < count, on every rank. */
int hcomm_allreduce(struct hcomm_comm *comm, const void *send, void *recv,
		    size_t count, enum hcomm_dtype dt, enum hcomm_redop op);
int hcomm_allreduce_nb(struct hcomm_comm *comm, const void *send, void *recv,
		       size_t count, enum hcomm_dtype dt, enum hcomm_redop op,
		       struct hcomm_request *req);
/*
 * send holds size * recvcount elements; rank r's recv gets elements
 * [r * recvcount, (r + 1) * recvcount) of op over the ranks' send.
 */
int hcomm_reduce_scatter(struct hcomm_comm *comm, const void *send,
			 void *recv, size_t recvcount, enum hcomm_dtype dt,
			 enum hcomm_redop op);
int hcomm_reduce_scatter_nb(struct hcomm_comm *comm, const void *send,
			    void *recv, size_t recvcount, enum hcomm_dtype dt,
			    enum hcomm_redop op, struct hcomm_request *req);
/* root's buf (count elements) into every rank's buf. */
int hcomm_broadcast(struct hcomm_comm *comm, void *buf, size_t count,
		    enum hcomm_dtype dt, int root);
int hcomm_broadcast_nb(struct hcomm_comm *comm, void *buf, size_t count,
		       enum hcomm_dtype dt, int root,
		       struct hcomm_request *req);
/* root's recv = op over the ranks' send (recv is unused elsewhere). */
int hcomm_reduce(struct hcomm_comm *comm, const void *send, void *recv,
		 size_t count, enum hcomm_dtype dt, enum hcomm_redop op,
		 int root);
int hcomm_reduce_nb(struct hcomm_comm *comm, const void *send, void *recv,
		    size_t count, enum hcomm_dtype dt, enum hcomm_redop op,
		    int root, struct hcomm_request *req);
/*
 * Every rank's len bytes at send, gathered into recv[size * len] (rank
 * r's at recv + r * len; send == recv + rank * len is in place).
 */
int hcomm_allgather(struct hcomm_comm *comm, const void *send, void *recv,
		    size_t len);
int hcomm_allgather_nb(struct hcomm_comm *comm, const void *send, void *recv,
		       size_t len, struct hcomm_request *req);
/*
 * send holds size blocks of count elements, block j for rank j; recv
 * gets rank i's block for this rank as its block i.  send == recv is in
 * place (the library sends from a copy).
 */
int hcomm_alltoall(struct hcomm_comm *comm, const void *send, void *recv,
		   size_t count, enum hcomm_dtype dt);
int hcomm_alltoall_nb(struct hcomm_comm *comm, const void *send, void *recv,
		      size_t count, enum hcomm_dtype dt,
		      struct hcomm_request *req);
/* Returns once every rank has entered it. */
int hcomm_barrier(struct hcomm_comm *comm);
int hcomm_barrier_nb(struct hcomm_comm *comm, struct hcomm_request *req);
/*
 * FP16 compression of hcomm_allreduce: an HCOMM_FP32 sum or average of at
 * least threshold bytes (on more than one rank) goes over the wire as
 * fp16 - every value divided by the number of ranks and rounded, summed
 * in fp32 at each step, the partial sums rounded to fp16 again - and the
 * result, the same bits on every rank, is widened back (times the number
 * of ranks for a sum).  Error: at most (size + 1) * 2^-11 of the sum of
 * the |values| per element (Documentation/collectives.rst has the
 * measurements).  Dividing first keeps every partial sum within about
 * the largest |input| of its element (each step's rounding may add
 * 2^-11 of it), so only inputs at or near fp16's limit - within about
 * size * 2^-11 of 65504 - can overflow (to +-inf; HCOMM_LOG=1 prints
 * how many conversions did).  The defaults come from
 * struct hcomm_config (enable_fp16_compress, comp_threshold;
 * HCOMM_FP16_COMPRESS, HCOMM_COMP_THRESHOLD); this changes them for the
 * later collectives.  Every rank must make the same change before the
 * same collective.  HCOMM_ERR_INVAL for enable not 0 or 1 or a threshold
 * above 1 GiB.
 */
int hcomm_comm_set_fp16_compress(struct hcomm_comm *comm, int enable,
				 uint64_t threshold);

#ifdef __cplusplus
}
#endif

#endif /* LIBHCOMM_H */
