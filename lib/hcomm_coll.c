/* SPDX-License-Identifier: MIT */
/*
 * libhcomm: collectives over the data path (Documentation/collectives.rst).
 *
 * Every collective here is a pipeline around the ring of ranks: rank r
 * sends only to its right neighbour (r + 1) and receives only from its
 * left one (r - 1).  A message is one chunk (at most HCOMM_COLL_CHUNK
 * bytes) put into one of HCOMM_COLL_SLOTS slots of the right neighbour's
 * part of the staging window, with a put_signal that adds 1 to that
 * slot's data signal there; the receiver reduces or copies the chunk out
 * of the slot and gives the slot back with a 0-byte put_signal that adds
 * 1 to the sender's credit signal.  The counters only grow, over every
 * collective of the communicator: the m-th message ever sent to the
 * right goes to slot m % slots once the credit signal reads at least
 * m + 1 - slots, and the m-th message from the left has arrived when its
 * slot's signal reads m / slots + 1.  One signal per slot, because the
 * transports complete operations in any order (a short put lands before
 * a long one sent earlier): one count for every slot would say "m
 * arrived" when m + 1 did.  Per slot it is exact, since a slot takes its
 * next message only after its credit.  Credits may land in any order:
 * they are counted, and the receiver consumes in order.  Sends never wait
 * for the receive side to make progress and receiving never waits for a
 * send (sends are queued as they become ready; reusing a request waits
 * only for its own completion), so the ring cannot deadlock with any
 * number of slots >= 1.
 *
 *   allreduce       reduce-scatter then allgather, 2 (n - 1) steps of n
 *                   segments, each cut into chunks (the ring algorithm)
 *   reduce_scatter  the first half: rank r ends with segment r
 *   broadcast       a chain from root to root - 1, chunk by chunk
 *   reduce          a chain from root + 1 to root, reducing on the way
 *
 * Ownership: struct hcomm_coll belongs to the communicator and is used by
 * the one thread that calls the collectives (they are collective calls,
 * like hcomm_barrier: one thread per rank, in the same order everywhere).
 * The staging memory is written by the left neighbour's transport only
 * into slots this rank gave back, and read by this thread only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hcomm_comm_int.h"
#include "hcomm_boot.h"
#include "hcomm_reduce.h"
#include "hcomm_mpsc.h"

#define COLL_CHUNK_DEF	(256 * 1024)
#define COLL_SLOTS_DEF	4
/*
 * The defaults once the ranks span hosts: every slot's credit then takes
 * a network round trip, so the ring keeps more bytes in flight, in chunks
 * large enough to be striped over the pair's tcp connections.  Measured
 * (Documentation/collectives.rst, "Across hosts"): two VMs over tcp,
 * allreduce busbw 1.5 to 1.85x the 256 KiB x 4 ring's from 16 MiB.
 */
#define COLL_CHUNK_NET	(1024 * 1024)
#define COLL_SLOTS_NET	8
#define COLL_RD_MAX_DEF	(64 * 1024)
#define COLL_HD_MAX_DEF	0	/* measured: never ahead of the ring here */
#define COLL_POLL_MS	1		/* a wait's slice between checks */
/*
 * Scratch up to this size stays mapped between collectives: a fresh
 * mapping per call faulted every page in again (an fp16-compressed
 * allreduce of 64 MiB between two ranks took 2.1x the uncompressed
 * one's time on the build host, most of it in page faults; see
 * scratch_get()).  Larger scratch is mapped for the call only.
 */
#define COLL_SCRATCH_KEEP	(256u << 20)

/*
 * struct hcomm_coll - the communicator's collective state (see above).
 * @win, @mem, @len: the staging window, slots * chunk bytes per rank.
 * @chunk, @slots: HCOMM_COLL_CHUNK and HCOMM_COLL_SLOTS.
 * @sig_data, @sig_cred: the signals the collectives own: data signals
 *        sig_data .. sig_data + slots - 1 (one per slot), the credit
 *        signal sig_cred (below the probe's two, the communicator's last:
 *        hcomm_comm.c).
 * @tx: data messages sent to the right so far; @rx: data messages from
 *        the left consumed so far; @cred: credits given back so far;
 * @rx0, @cred0: the data (per slot) and credit signals' values when the
 *        state was made (the counts start there).
 * @sreq, @sid: the sends' requests (slot tx % slots) and the message each
 *        carried; @creq: the credits' requests (cred % slots).
 * @broken: an earlier collective failed (its message in @why, written
 *        before @broken is set, with release): the ring is out of step
 *        for good.  Set by the owner of the state, read by any thread.
 * @qlock, @qcond, @qhead, @qtail, @busy, @stop: the queue of collectives
 *        waiting to run (non-blocking ones, and blocking ones issued
 *        behind them), oldest first, and whether one runs now; all under
 *        @qlock.  Whoever set @busy (the collective thread @thr, or a
 *        caller running a blocking collective itself when nothing was
 *        queued) owns every other field until it clears @busy.
 * @done_ec: bumped after each queued collective completed (waiters).
 * @pc, @pchunk, @poff, @sig_pdata, @sig_pcred: the point-to-point
 *        channels (alltoall, recursive doubling): to every peer
 *        P2P_SLOTS slots of @pchunk bytes at @poff of its staging (its
 *        region for this rank), flow-controlled like the ring, with data
 *        signals sig_pdata + 2 * source + slot and credit signals
 *        sig_pcred + destination.
 * @algo, @rd_max, @hd_max: HCOMM_ALGO, HCOMM_COLL_RD_MAX and
 *        HCOMM_COLL_HD_MAX (see algo_pick()).
 * @loc, @nloc, @lead, @nlead, @multi: the ranks on this rank's host and
 *        the lowest rank of every host, in increasing order; @multi: more
 *        than one host and more than one rank on some (allreduce_hier).
 * @scr, @scr_len: scratch kept between collectives (scratch_get()): used
 *        by the one collective that runs, like the fields above; unmapped
 *        by hcomm__coll_free().
 */
struct hcomm_coll {
	struct hcomm_win *win;
	void *mem;
	size_t len;
	size_t chunk;
	unsigned int slots;
	uint32_t sig_data, sig_cred;
	uint64_t tx, rx, cred;
	uint64_t *rx0, cred0;
	struct hcomm_request *sreq;
	uint64_t *sid;
	struct hcomm_request *creq;
	int broken;
	int log;
	char why[160];
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct coll_op *qhead, *qtail;
	int busy, stop, thr_started;
	uint64_t nqueued;	/* non-blocking ones in the queue (atomic) */
	pthread_t thr;
	struct hcomm_ec done_ec;
	struct pchan *pc;
	size_t pchunk, poff;
	uint32_t sig_pdata, sig_pcred;
	int algo, logged;
	uint64_t rd_max, hd_max;
	int *loc, *lead;
	int nloc, nlead, multi;
	void *scr;
	size_t scr_len;
};

#define P2P_SLOTS	2

/*
 * The channel with one peer (both directions): @tx pieces sent to it,
 * @cred0 the credit signal's value at the start; @rx pieces received
 * from it and @rx0 its data signals' values at the start; @ncred credits
 * given back.  Requests and @sid as in struct hcomm_coll.
 */
struct pchan {
	uint64_t tx, rx, ncred;
	uint64_t cred0, rx0[P2P_SLOTS], sid[P2P_SLOTS];
	struct hcomm_request sreq[P2P_SLOTS], creq[P2P_SLOTS];
};

enum { ALGO_AUTO, ALGO_RING, ALGO_RD, ALGO_HD, ALGO_HIER };
static const char *const algo_names[] = { "auto", "ring", "rd", "hd",
					  "hier" };

enum { K_ALLREDUCE = 1, K_REDUCE_SCATTER, K_BCAST, K_REDUCE, K_ALLGATHER,
       K_BARRIER, K_ALLTOALL };

/*
 * One collective call: its arguments (as the caller passed them), and
 * its request (a non-blocking call's, owned by the library until it is
 * completed) or, for a blocking call queued behind non-blocking ones,
 * the result its caller waits for (@ret, then @done set).
 */
struct coll_op {
	int kind;
	const void *send;
	void *recv;
	size_t count;
	enum hcomm_dtype dt;
	enum hcomm_redop op;
	int root;
	struct hcomm_request *req;
	int ret, done;
	struct coll_op *next;
};

/*
 * One collective's plan on this rank.  @buf is what the messages are
 * sent from and received into (count elements of es bytes); segment k of
 * the ring collectives is [seg_off(k), seg_off(k + 1)), cut into nch
 * chunks of ce elements (the last ones may be short or empty).
 */
struct plan {
	int kind;
	enum hcomm_dtype dt;
	enum hcomm_redop op;
	size_t es, count, ce, nch;
	char *buf;
	const char *src;	/* out of place: the values to reduce, which
				 * the first send of a segment and the first
				 * reduction into it read (then buf); NULL: in
				 * buf already */
	char *rs_out;		/* reduce_scatter: where the last step's
				 * reductions go (recv, for segment r), else
				 * NULL (into buf) */
	float *acc;		/* fp16-compressed allreduce: buf is the fp16
				 * wire copy, acc the fp32 sums (else NULL) */
	size_t *ovf;		/* and where its overflows are counted */
	int n, r, pos;		/* pos: place in a chain (bcast, reduce) */
	uint64_t nsend, nrecv;	/* messages this rank sends, receives */
	uint64_t rs_msgs;	/* messages of the reduce-scatter half */
};

static size_t seg_off(const struct plan *p, int k)
{
	if (p->kind == K_REDUCE_SCATTER || p->kind == K_ALLGATHER)
		return (size_t)k * (p->count / (size_t)p->n);
	return (size_t)((unsigned __int128)p->count * (unsigned int)k /
			(unsigned int)p->n);
}

static int mod(int a, int n)
{
	return ((a % n) + n) % n;
}

/* Elements [*off, *off + *len) of buf that message m (0-based) covers. */
static void msg_span(const struct plan *p, uint64_t m, int recv,
		     size_t *off, size_t *len)
{
	uint64_t step = m / p->nch, j = m % p->nch;
	size_t lo, hi;
	int seg;

	if (p->kind == K_BCAST || p->kind == K_REDUCE) {
		lo = 0;
		hi = p->count;
	} else {
		if (m < p->rs_msgs)	/* reduce-scatter step */
			seg = p->r - (int)step - 1 - recv;
		else			/* allgather step */
			seg = p->r - (int)(step - p->rs_msgs / p->nch) - recv;
		seg = mod(seg, p->n);
		lo = seg_off(p, seg);
		hi = seg_off(p, seg + 1);
	}
	lo += (size_t)j * p->ce;
	if (lo > hi)
		lo = hi;
	*off = lo;
	*len = hi - lo < p->ce ? hi - lo : p->ce;
}

/* Does message m carry values nothing has reduced into yet (from src)? */
static int first_send(const struct plan *p, uint64_t m)
{
	switch (p->kind) {
	case K_REDUCE:
		return p->pos == 0;
	case K_ALLREDUCE:
	case K_REDUCE_SCATTER:
		return m < p->nch;
	default:
		return 0;
	}
}

/* May message m go out once recvd messages were received? */
static int send_ready(const struct plan *p, uint64_t m, uint64_t recvd)
{
	switch (p->kind) {
	case K_BCAST:
	case K_REDUCE:	/* the chain's head, then each after its recv */
		return p->pos == 0 || recvd > m;
	default:	/* the first step's chunks, then each after its recv */
		return m < p->nch || recvd > m - p->nch;
	}
}

static int coll_fail(struct hcomm_coll *k, int code, int err,
		     const char *what)
{
	/* why first: other threads read it once they see broken (acquire) */
	if (!__atomic_load_n(&k->broken, __ATOMIC_RELAXED)) {
		snprintf(k->why, sizeof(k->why), "%s", what);
		__atomic_store_n(&k->broken, 1, __ATOMIC_RELEASE);
	}
	return hcomm__fail(code, err, "%s", what);
}

/*
 * A rank that cannot take part after coll_get (no memory for its
 * scratch) fails like a broken ring: its neighbours go on without it and
 * fail, and no later collective here may count their stale messages.
 */
static int coll_nomem(struct hcomm_coll *k, const char *fn, size_t bytes)
{
	char what[96];

	snprintf(what, sizeof(what), "%s: no memory for %zu bytes of "
		 "scratch", fn, bytes);
	return coll_fail(k, HCOMM_ERR_NOMEM, ENOMEM, what);
}

/*
 * At least bytes of scratch for the running collective, or NULL.
 * Up to COLL_SCRATCH_KEEP it is the state's, grown in steps of 2 MiB and
 * kept, so that a stream of collectives touches the same pages; above,
 * a mapping of its own, which scratch_put() unmaps.
 */
static void *scratch_get(struct hcomm_coll *k, size_t bytes)
{
	size_t len;
	void *p;

	if (!bytes)
		bytes = 1;
	len = (bytes + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	if (bytes <= k->scr_len)
		return k->scr;
	if (bytes > COLL_SCRATCH_KEEP)
		len = bytes;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (bytes > COLL_SCRATCH_KEEP)
		return p;
	if (k->scr)
		munmap(k->scr, k->scr_len);
	k->scr = p;
	k->scr_len = len;
	return p;
}

/* scratch_get()'s p of bytes is no longer used. */
static void scratch_put(struct hcomm_coll *k, void *p, size_t bytes)
{
	if (p && p != k->scr)
		munmap(p, bytes);
}

/* HCOMM_ALGO: ALGO_*, or -1 (recorded). */
static int algo_env(void)
{
	const char *s = getenv("HCOMM_ALGO");
	int i;

	if (!s || !*s)
		return ALGO_AUTO;
	for (i = 0; i < (int)(sizeof(algo_names) / sizeof(algo_names[0])); i++)
		if (!strcmp(s, algo_names[i]))
			return i;
	return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "HCOMM_ALGO=\"%s\": "
			   "auto, ring, rd, hd or hier", s);
}

static void coll_free_mem(struct hcomm_coll *k)
{
	if (k->mem)
		munmap(k->mem, k->len);
	if (k->scr)
		munmap(k->scr, k->scr_len);
	free(k->sreq);
	free(k->creq);
	free(k->sid);
	free(k->rx0);
	free(k->pc);
	free(k->loc);
	free(k->lead);
	free(k);
}

/*
 * Every rank must have the same settings: the staging layout, the
 * signals, and the choice of algorithm (ranks that chose differently
 * would read each other's messages as their own).  Collective over the
 * bootstrap channel; every rank sees the same table and fails alike.
 */
static int coll_same_settings(struct hcomm_comm *c, const struct hcomm_coll *k,
			      uint32_t nsig)
{
	struct coll_settings {
		uint64_t chunk, slots, rd_max, hd_max;
		int32_t algo;
		uint32_t nsig;
	} me = { k->chunk, k->slots, k->rd_max, k->hd_max, k->algo, nsig };
	struct coll_settings *all = calloc((size_t)c->size, sizeof(*all));
	int ret, i;

	if (!all)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "collectives");
	ret = hcomm__boot_allgather(c->boot, &me, all, sizeof(me));
	for (i = 0; !ret && i < c->size; i++)
		if (memcmp(&all[i], &me, sizeof(me)))
			ret = hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "collectives: "
					  "rank %d has HCOMM_COLL_CHUNK %llu, "
					  "HCOMM_COLL_SLOTS %llu, HCOMM_ALGO %s, "
					  "HCOMM_COLL_RD_MAX %llu, "
					  "HCOMM_COLL_HD_MAX %llu, %u signals; "
					  "rank %d %llu, %llu, %s, %llu, %llu, %u: "
					  "they must be the same on every rank",
					  i, (unsigned long long)all[i].chunk,
					  (unsigned long long)all[i].slots,
					  all[i].algo >= 0 && all[i].algo <=
					  ALGO_HIER ? algo_names[all[i].algo] :
					  "?", (unsigned long long)all[i].rd_max,
					  (unsigned long long)all[i].hd_max,
					  all[i].nsig, c->rank,
					  (unsigned long long)me.chunk,
					  (unsigned long long)me.slots,
					  algo_names[me.algo],
					  (unsigned long long)me.rd_max,
					  (unsigned long long)me.hd_max, me.nsig);
	free(all);
	return ret;
}

/* The collective state, made by the first collective (collective). */
static int coll_get(struct hcomm_comm *c, struct hcomm_coll **out)
{
	struct hcomm_coll *k = c->coll;
	uint64_t chunk = COLL_CHUNK_DEF, slots = COLL_SLOTS_DEF;
	uint64_t rd_max = COLL_RD_MAX_DEF, hd_max = COLL_HD_MAX_DEF, need;
	uint32_t nsig, n = (uint32_t)c->size;
	int ret, algo, i, j;

	if (k) {
		*out = k;
		if (__atomic_load_n(&k->broken, __ATOMIC_ACQUIRE))
			return hcomm__fail(HCOMM_ERR_IO, EIO, "an earlier "
					   "collective failed, the ring is out "
					   "of step: %s", k->why);
		return 0;
	}
	for (i = 1; i < (int)n; i++)	/* the same answer on every rank */
		if (!hcomm__boot_same_hosts(c->boot, 0, i)) {
			chunk = COLL_CHUNK_NET;
			slots = COLL_SLOTS_NET;
			break;
		}
	/* 64 .. 64 MiB, 1 .. 64 and 0 .. 64 MiB (hcomm_config.c) */
	ret = hcomm__config_env("HCOMM_COLL_CHUNK", &chunk);
	if (ret >= 0)
		ret = hcomm__config_env("HCOMM_COLL_SLOTS", &slots);
	if (ret >= 0)
		ret = hcomm__config_env("HCOMM_COLL_RD_MAX", &rd_max);
	if (ret >= 0)
		ret = hcomm__config_env("HCOMM_COLL_HD_MAX", &hd_max);
	if (ret < 0)
		return ret;
	algo = algo_env();
	if (algo < 0)
		return algo;
	chunk = (chunk + 63) & ~63ULL;
	nsig = hcomm_signal_count(c);
	need = slots + 3 + 3ULL * n;
	if (nsig < need + 64)
		return hcomm__fail(HCOMM_ERR_NOTSUP, ENOSYS, "collectives: "
				   "%u signals, %llu needed", nsig,
				   (unsigned long long)need + 64);
	k = calloc(1, sizeof(*k));
	if (!k)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "collectives");
	k->chunk = chunk;
	k->slots = (unsigned int)slots;
	k->algo = algo;
	k->rd_max = rd_max;
	k->hd_max = hd_max;
	k->log = getenv("HCOMM_LOG") && strcmp(getenv("HCOMM_LOG"), "0");
	/* the probe has the last two (hcomm_comm.c: probe_pair) */
	k->sig_cred = nsig - 3;
	k->sig_data = nsig - 3 - (uint32_t)slots;
	k->sig_pcred = k->sig_data - n;
	k->sig_pdata = k->sig_pcred - 2 * n;
	k->pchunk = ((chunk / 2) + 63) & ~(size_t)63;
	k->poff = (size_t)chunk * slots;
	k->len = k->poff + (size_t)n * P2P_SLOTS * k->pchunk;
	k->sreq = calloc(slots, sizeof(*k->sreq));
	k->creq = calloc(slots, sizeof(*k->creq));
	k->sid = calloc(slots, sizeof(*k->sid));
	k->rx0 = calloc(slots, sizeof(*k->rx0));
	k->pc = calloc(n, sizeof(*k->pc));
	k->loc = calloc(n, sizeof(*k->loc));
	k->lead = calloc(n, sizeof(*k->lead));
	k->mem = mmap(NULL, k->len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (k->mem == MAP_FAILED)
		k->mem = NULL;
	if (!k->sreq || !k->creq || !k->sid || !k->rx0 || !k->pc ||
	    !k->loc || !k->lead || !k->mem) {
		ret = hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "collectives: "
				  "%zu bytes of staging", k->len);
		coll_free_mem(k);
		return ret;
	}
	for (i = 0; i < (int)slots; i++)
		k->sreq[i].done = k->creq[i].done = 1;
	/* the hosts, as the bootstrap saw them (the same on every rank) */
	for (i = 0; i < (int)n; i++) {
		for (j = 0; j < i; j++)
			if (hcomm__boot_same_hosts(c->boot, i, j))
				break;
		if (j == i)
			k->lead[k->nlead++] = i;
		if (hcomm__boot_same_host(c->boot, i))
			k->loc[k->nloc++] = i;
	}
	k->multi = k->nlead > 1 && k->nlead < (int)n;
	/*
	 * The counts start from the signals' values now: the neighbours
	 * send nothing before every rank is past the window's creation.
	 */
	for (i = 0; i < (int)slots; i++)
		k->rx0[i] = hcomm_signal_read(c, k->sig_data + (uint32_t)i);
	k->cred0 = hcomm_signal_read(c, k->sig_cred);
	for (i = 0; i < (int)n; i++) {
		struct pchan *pc = &k->pc[i];

		pc->cred0 = hcomm_signal_read(c, k->sig_pcred + (uint32_t)i);
		for (j = 0; j < P2P_SLOTS; j++) {
			pc->rx0[j] = hcomm_signal_read(c, k->sig_pdata +
						       (uint32_t)(2 * i + j));
			pc->sreq[j].done = pc->creq[j].done = 1;
		}
	}
	ret = coll_same_settings(c, k, nsig);
	if (!ret)
		ret = hcomm_win_create(c, k->mem, k->len, &k->win);
	if (ret) {
		coll_free_mem(k);
		return ret;
	}
	/* every rank the same chunk and slots (else slots would straddle) */
	for (ret = 0; ret < c->size; ret++)
		if (hcomm_win_size(k->win, ret) != k->len)
			break;
	if (ret < c->size) {
		ret = hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "collectives: rank "
				  "%d's staging is %zu bytes, this rank's %zu: "
				  "HCOMM_COLL_CHUNK and HCOMM_COLL_SLOTS must be "
				  "the same on every rank", ret,
				  hcomm_win_size(k->win, ret), k->len);
		(void)hcomm_win_free(k->win);
		coll_free_mem(k);
		return ret;
	}
	pthread_mutex_init(&k->qlock, NULL);
	pthread_cond_init(&k->qcond, NULL);
	hcomm_ec_init(&k->done_ec);
	c->coll = k;
	*out = k;
	if (k->log && c->rank == 0)
		fprintf(stderr, "hcomm coll: %d ranks; allreduce algorithm %s "
			"(HCOMM_ALGO): recursive doubling up to %llu bytes "
			"(HCOMM_COLL_RD_MAX), halving-doubling up to %llu "
			"(HCOMM_COLL_HD_MAX), ring pipelines above; ring: %u "
			"slots of %zu bytes (HCOMM_COLL_SLOTS, "
			"HCOMM_COLL_CHUNK); point-to-point: %d slots of %zu "
			"bytes per peer; %zu bytes of staging; fp16 "
			"compression of fp32 sum/avg allreduces %s%llu bytes "
			"(HCOMM_FP16_COMPRESS, HCOMM_COMP_THRESHOLD)\n",
			c->size, algo_names[k->algo],
			(unsigned long long)k->rd_max,
			(unsigned long long)k->hd_max, k->slots, k->chunk,
			P2P_SLOTS, k->pchunk, k->len,
			c->cfg.enable_fp16_compress ? "from " :
			"off; would be from ",
			(unsigned long long)c->cfg.comp_threshold);
	return 0;
}

/* After hcomm_comm_destroy freed the windows: the staging memory. */
void hcomm__coll_free(struct hcomm_comm *c)
{
	struct hcomm_coll *k = c->coll;

	if (!k)
		return;
	/* hcomm_flush() let every queued collective complete */
	pthread_mutex_lock(&k->qlock);
	k->stop = 1;
	pthread_cond_broadcast(&k->qcond);
	pthread_mutex_unlock(&k->qlock);
	if (k->thr_started)
		pthread_join(k->thr, NULL);
	pthread_mutex_destroy(&k->qlock);
	pthread_cond_destroy(&k->qcond);
	coll_free_mem(k);
	c->coll = NULL;
}

/* Wait for req (one of ours) if it is out; its status. */
static int req_settle(struct hcomm_request *req)
{
	if (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE))
		return hcomm_wait(req);
	return req->status;
}

/* A request of ours that completed in error: its status, else 0. */
static int req_failed(const struct hcomm_request *req)
{
	if (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE))
		return 0;
	return req->status < 0 ? req->status : 0;
}

/*
 * Reuse req (once its last use is done) for a put_signal of len bytes at
 * src to offset off of rank's staging, adding 1 to signal sig there.
 */
static int ring_put(struct hcomm_coll *k, struct hcomm_request *req,
		    int rank, uint64_t off, const void *src, size_t len,
		    uint32_t sig)
{
	int ret = req_settle(req);

	if (ret < 0)
		return ret;
	memset(req, 0, sizeof(*req));
	ret = hcomm_put_signal_nb(k->win, rank, off, src, len, sig, 1, req);
	if (ret)
		req->done = 1;
	return ret;
}

/* Give the left neighbour its slot back. */
static int credit(struct hcomm_coll *k, int left)
{
	int ret = ring_put(k, &k->creq[k->cred % k->slots], left, 0, NULL, 0,
			   k->sig_cred);

	if (!ret)
		k->cred++;
	return ret;
}

/* Send message m of p (global number k->tx) to the right neighbour. */
static int send_msg(struct hcomm_coll *k, const struct plan *p, uint64_t m,
		    int right)
{
	unsigned int slot = (unsigned int)(k->tx % k->slots);
	const char *base = p->src && first_send(p, m) ? p->src : p->buf;
	size_t off, len;
	int ret;

	msg_span(p, m, 0, &off, &len);
	ret = ring_put(k, &k->sreq[slot], right, (uint64_t)slot * k->chunk,
		       len ? base + off * p->es : NULL, len * p->es,
		       k->sig_data + slot);
	if (!ret)
		k->sid[slot] = k->tx++;
	return ret;
}

/*
 * Message m from the left is in slot (k->rx % slots): fold it into buf.
 * An allgather step overwrites a segment that an earlier reduce-scatter
 * step sent: that send has landed (its data went into the value that
 * came round), its request is waited for all the same.
 */
static int recv_msg(struct hcomm_coll *k, const struct plan *p, uint64_t m,
		    uint64_t tx0)
{
	const char *data = (const char *)k->mem +
			   (k->rx % k->slots) * k->chunk;
	char *dst;
	size_t off, len;
	uint64_t sent;
	int ret;

	msg_span(p, m, 1, &off, &len);
	dst = p->buf + off * p->es;
	if (!len)
		return 0;
	switch (p->kind) {
	case K_BCAST:
		memcpy(dst, data, len * p->es);
		return 0;
	case K_REDUCE:
		ret = p->src ? hcomm__reduce3(p->dt, p->op, dst,
					      p->src + off * p->es, data, len) :
			       hcomm__reduce(p->dt, p->op, dst, data, len);
		if (!ret && p->op == HCOMM_AVG && p->pos == p->n - 1)
			ret = hcomm__reduce_finish_avg(p->dt, dst, len,
						       (unsigned int)p->n);
		return ret;
	}
	if (m < p->rs_msgs && p->acc) {
		/* fp16 on the wire, summed in fp32, sent on as fp16 */
		ret = hcomm__reduce_fp16_into_fp32(HCOMM_SUM, p->acc + off,
						   (const uint16_t *)data, len);
		if (!ret)
			*p->ovf += hcomm__fp32_to_fp16((uint16_t *)dst,
						       p->acc + off, len);
		return ret;
	}
	if (m < p->rs_msgs) {	/* each chunk comes once: src, then buf */
		if (p->rs_out && m + p->nch >= p->rs_msgs)
			dst = p->rs_out + (off - seg_off(p, p->r)) * p->es;
		ret = p->src ? hcomm__reduce3(p->dt, p->op, dst,
					      p->src + off * p->es, data, len) :
			       hcomm__reduce(p->dt, p->op, dst, data, len);
		if (!ret && p->op == HCOMM_AVG && m + p->nch >= p->rs_msgs)
			ret = hcomm__reduce_finish_avg(p->dt, dst, len,
						       (unsigned int)p->n);
		return ret;
	}
	/* the reduce-scatter message that carried this segment's chunk */
	sent = tx0 + (m - p->rs_msgs);
	if (p->rs_msgs && k->sid[sent % k->slots] == sent) {
		ret = req_settle(&k->sreq[sent % k->slots]);
		if (ret < 0)
			return ret;
	}
	memcpy(dst, data, len * p->es);
	return 0;
}

/* Run plan p around the ring: 0 or a negated hcomm_err. */
static int ring_run(struct hcomm_comm *c, struct hcomm_coll *k,
		    const struct plan *p)
{
	int left = mod(c->rank - 1, c->size), right = mod(c->rank + 1,
							  c->size);
	uint64_t ms = 0, mr = 0, tx0 = k->tx, wval[2];
	uint64_t last = hcomm__now_ns(), cred;
	uint32_t wsig[2];
	unsigned int rs;
	int64_t tmo = hcomm__boot_timeout(c->boot);	/* ms, < 0: none */
	char what[160];
	unsigned int i;
	int ret = 0, moved, nw;

	while (ms < p->nsend || mr < p->nrecv) {
		moved = 0;
		cred = hcomm_signal_read(c, k->sig_cred) - k->cred0;
		while (ms < p->nsend && send_ready(p, ms, mr) &&
		       cred + k->slots >= k->tx + 1) {
			ret = send_msg(k, p, ms, right);
			if (ret)
				goto fail;
			ms++;
			moved = 1;
		}
		while (mr < p->nrecv &&
		       (rs = (unsigned int)(k->rx % k->slots),
			hcomm_signal_read(c, k->sig_data + rs) >=
			k->rx0[rs] + k->rx / k->slots + 1)) {
			ret = recv_msg(k, p, mr, tx0);
			if (ret)
				goto fail;
			k->rx++;
			mr++;
			ret = credit(k, left);
			if (ret)
				goto fail;
			moved = 1;
		}
		for (i = 0; i < k->slots; i++) {
			int s1 = req_failed(&k->sreq[i]);
			int s2 = req_failed(&k->creq[i]);

			if (s1 || s2) {
				ret = s1 ? s1 : s2;
				snprintf(what, sizeof(what), "a transfer to "
					 "rank %d failed: %s", s1 ? right : left,
					 hcomm_strerror(ret));
				goto fail_msg;
			}
		}
		if (moved) {
			last = hcomm__now_ns();
			continue;
		}
		if (hcomm_comm_peer_lost(c, left) == 1 ||
		    hcomm_comm_peer_lost(c, right) == 1) {
			snprintf(what, sizeof(what), "rank %d was lost",
				 hcomm_comm_peer_lost(c, left) == 1 ? left :
				 right);
			ret = -HCOMM_ERR_IO;
			goto fail_msg;
		}
		if (tmo >= 0 && hcomm__now_ns() - last >
		    (uint64_t)tmo * 1000000ULL) {
			snprintf(what, sizeof(what), "no progress for %lld ms "
				 "(%llu of %llu messages received from rank "
				 "%d, %llu of %llu sent to rank %d)",
				 (long long)tmo, (unsigned long long)mr,
				 (unsigned long long)p->nrecv, left,
				 (unsigned long long)ms,
				 (unsigned long long)p->nsend, right);
			ret = -HCOMM_ERR_TIMEOUT;
			goto fail_msg;
		}
		(void)hcomm_progress(c);
		/* the next message, and the credit a ready send waits for */
		nw = 0;
		if (mr < p->nrecv) {
			rs = (unsigned int)(k->rx % k->slots);
			wsig[nw] = k->sig_data + rs;
			wval[nw++] = k->rx0[rs] + k->rx / k->slots + 1;
		}
		if (ms < p->nsend && (!nw || send_ready(p, ms, mr))) {
			wsig[nw] = k->sig_cred;
			wval[nw++] = k->cred0 + k->tx + 1 - k->slots;
		}
		(void)hcomm__signal_wait_any(c, wsig, wval, nw, COLL_POLL_MS);
	}
	/* the sends read buf: done before it is the caller's again */
	for (i = 0; i < k->slots; i++) {
		int r1 = req_settle(&k->sreq[i]);
		int r2 = req_settle(&k->creq[i]);

		if (r1 < 0 || r2 < 0) {
			ret = r1 < 0 ? r1 : r2;
			snprintf(what, sizeof(what), "a transfer to rank %d "
				 "failed: %s", r1 < 0 ? right : left,
				 hcomm_strerror(ret));
			goto fail_msg;
		}
	}
	return 0;
fail:
	snprintf(what, sizeof(what), "%s", hcomm_errmsg());
fail_msg:
	for (i = 0; i < k->slots; i++) {
		(void)req_settle(&k->sreq[i]);
		(void)req_settle(&k->creq[i]);
	}
	return coll_fail(k, -ret, EIO, what);
}

/* ------------------------------------------------------------------ */
/* point-to-point channels: alltoall, recursive doubling              */
/* ------------------------------------------------------------------ */

/*
 * How a received piece is folded in: copied, or combined as "lower
 * rank's value op higher rank's value" whichever side this rank is on,
 * so that both ends of an exchange compute the same bits.
 */
enum { RX_COPY, RX_LO, RX_HI };

/* One message of a step: sent from or received into buf. */
struct p2p_msg {
	int peer, mode;
	char *buf;
	size_t len;
	uint64_t pieces, done;	/* of pchunk bytes (at least one) */
};

struct p2p_step {
	struct p2p_msg *snd, *rcv;
	int nsnd, nrcv;
	enum hcomm_dtype dt;
	enum hcomm_redop op;
	size_t es;
	char *tmp;		/* a piece, for RX_HI */
};

static void p2p_msg(struct p2p_msg *m, const struct hcomm_coll *k, int peer,
		    void *buf, size_t len, int mode)
{
	m->peer = peer;
	m->mode = mode;
	m->buf = buf;
	m->len = len;
	m->pieces = len ? (len + k->pchunk - 1) / k->pchunk : 1;
	m->done = 0;
}

/* Send m's next piece if the peer has a slot: 1 sent, 0 not, < 0 error. */
static int p_send(struct hcomm_comm *c, struct hcomm_coll *k,
		  struct p2p_msg *m)
{
	struct pchan *pc = &k->pc[m->peer];
	uint64_t cred = hcomm_signal_read(c, k->sig_pcred +
					  (uint32_t)m->peer) - pc->cred0;
	size_t off = (size_t)m->done * k->pchunk, len = m->len - off;
	unsigned int slot = (unsigned int)(pc->tx % P2P_SLOTS);
	int ret;

	if (cred + P2P_SLOTS < pc->tx + 1)
		return 0;
	if (len > k->pchunk)
		len = k->pchunk;
	ret = ring_put(k, &pc->sreq[slot], m->peer, k->poff +
		       ((uint64_t)c->rank * P2P_SLOTS + slot) * k->pchunk,
		       len ? m->buf + off : NULL, len,
		       k->sig_pdata + (uint32_t)(P2P_SLOTS * c->rank) + slot);
	if (ret)
		return ret;
	pc->sid[slot] = pc->tx++;
	m->done++;
	return 1;
}

/* Take m's next piece if it arrived: 1 taken, 0 not, < 0 error. */
static int p_recv(struct hcomm_comm *c, struct hcomm_coll *k,
		  const struct p2p_step *st, struct p2p_msg *m)
{
	struct pchan *pc = &k->pc[m->peer];
	unsigned int slot = (unsigned int)(pc->rx % P2P_SLOTS);
	uint32_t sig = k->sig_pdata + (uint32_t)(P2P_SLOTS * m->peer) + slot;
	const char *data = (const char *)k->mem + k->poff +
			   ((size_t)m->peer * P2P_SLOTS + slot) * k->pchunk;
	size_t off = (size_t)m->done * k->pchunk, len = m->len - off;
	int ret = 0;

	if (hcomm_signal_read(c, sig) < pc->rx0[slot] + pc->rx / P2P_SLOTS + 1)
		return 0;
	if (len > k->pchunk)
		len = k->pchunk;
	switch (m->mode) {
	case RX_COPY:
		memcpy(m->buf + off, data, len);
		break;
	case RX_LO:
		ret = hcomm__reduce(st->dt, st->op, m->buf + off, data,
				    len / st->es);
		break;
	default:
		memcpy(st->tmp, data, len);
		ret = hcomm__reduce(st->dt, st->op, st->tmp, m->buf + off,
				    len / st->es);
		memcpy(m->buf + off, st->tmp, len);
	}
	if (ret)
		return ret;
	pc->rx++;
	m->done++;
	ret = ring_put(k, &pc->creq[pc->ncred % P2P_SLOTS], m->peer, 0, NULL,
		       0, k->sig_pcred + (uint32_t)c->rank);
	if (!ret)
		pc->ncred++;
	return ret ? ret : 1;
}

/* A failed transfer with one of the step's peers: its status, else 0. */
static int p_failed(const struct hcomm_coll *k, const struct p2p_msg *m,
		    int n, int *peer)
{
	int i, j, s;

	for (i = 0; i < n; i++)
		for (j = 0; j < P2P_SLOTS; j++) {
			s = req_failed(&k->pc[m[i].peer].sreq[j]);
			if (!s)
				s = req_failed(&k->pc[m[i].peer].creq[j]);
			if (s) {
				*peer = m[i].peer;
				return s;
			}
		}
	return 0;
}

/* Run one step: every message sent and received, its sends landed. */
static int p2p_run(struct hcomm_comm *c, struct hcomm_coll *k,
		   struct p2p_step *st)
{
	uint64_t last = hcomm__now_ns();
	int64_t tmo = hcomm__boot_timeout(c->boot);
	struct p2p_msg *w;
	uint64_t wval[2];
	uint32_t wsig[2];
	char what[160];
	int i, j, ret, moved, open, peer = -1, nw;

	for (;;) {
		moved = open = 0;
		w = NULL;
		for (i = 0; i < st->nsnd; i++) {
			struct p2p_msg *m = &st->snd[i];

			while (m->done < m->pieces &&
			       (ret = p_send(c, k, m)) > 0)
				moved = 1;
			if (ret < 0)
				goto fail;
			if (m->done < m->pieces)
				open = 1;
		}
		for (i = 0; i < st->nrcv; i++) {
			struct p2p_msg *m = &st->rcv[i];

			while (m->done < m->pieces &&
			       (ret = p_recv(c, k, st, m)) > 0)
				moved = 1;
			if (ret < 0)
				goto fail;
			if (m->done < m->pieces) {
				open = 1;
				if (!w)
					w = m;
			}
		}
		ret = p_failed(k, st->snd, st->nsnd, &peer);
		if (!ret)
			ret = p_failed(k, st->rcv, st->nrcv, &peer);
		if (ret) {
			snprintf(what, sizeof(what), "a transfer to rank %d "
				 "failed: %s", peer, hcomm_strerror(ret));
			goto fail_msg;
		}
		if (!open)
			break;
		if (moved) {
			last = hcomm__now_ns();
			continue;
		}
		for (i = 0; i < st->nsnd + st->nrcv; i++) {
			peer = i < st->nsnd ? st->snd[i].peer :
			       st->rcv[i - st->nsnd].peer;
			if (hcomm_comm_peer_lost(c, peer) == 1) {
				snprintf(what, sizeof(what), "rank %d was "
					 "lost", peer);
				ret = -HCOMM_ERR_IO;
				goto fail_msg;
			}
		}
		if (tmo >= 0 && hcomm__now_ns() - last >
		    (uint64_t)tmo * 1000000ULL) {
			snprintf(what, sizeof(what), "no progress for %lld ms "
				 "(waiting for rank %d)", (long long)tmo,
				 w ? w->peer : st->snd[0].peer);
			ret = -HCOMM_ERR_TIMEOUT;
			goto fail_msg;
		}
		(void)hcomm_progress(c);
		/* the first open receive's piece, first open send's credit */
		nw = 0;
		if (w) {
			struct pchan *pc = &k->pc[w->peer];
			unsigned int s = (unsigned int)(pc->rx % P2P_SLOTS);

			wsig[nw] = k->sig_pdata + (uint32_t)(P2P_SLOTS *
							     w->peer) + s;
			wval[nw++] = pc->rx0[s] + pc->rx / P2P_SLOTS + 1;
		}
		for (i = 0; i < st->nsnd; i++) {
			struct pchan *pc = &k->pc[st->snd[i].peer];

			if (st->snd[i].done >= st->snd[i].pieces)
				continue;
			wsig[nw] = k->sig_pcred + (uint32_t)st->snd[i].peer;
			wval[nw++] = pc->cred0 + pc->tx + 1 - P2P_SLOTS;
			break;
		}
		if (nw)
			(void)hcomm__signal_wait_any(c, wsig, wval, nw,
						     COLL_POLL_MS);
	}
	/* the sends read their buffers: done before those change */
	for (i = 0; i < st->nsnd; i++)
		for (j = 0; j < P2P_SLOTS; j++) {
			ret = req_settle(&k->pc[st->snd[i].peer].sreq[j]);
			if (ret < 0) {
				snprintf(what, sizeof(what), "a transfer to "
					 "rank %d failed: %s", st->snd[i].peer,
					 hcomm_strerror(ret));
				goto fail_msg;
			}
		}
	return 0;
fail:
	snprintf(what, sizeof(what), "%s", hcomm_errmsg());
fail_msg:
	for (i = 0; i < c->size; i++)
		for (j = 0; j < P2P_SLOTS; j++) {
			(void)req_settle(&k->pc[i].sreq[j]);
			(void)req_settle(&k->pc[i].creq[j]);
		}
	return coll_fail(k, -ret, EIO, what);
}

/*
 * The ranks an allreduce runs over: all of them (@rk NULL), or @n ranks
 * @rk[0 .. n) in increasing order (the hosts' leaders of a hierarchical
 * one), this rank at index @me.
 */
struct grp {
	const int *rk;
	int n, me;
};

static int g_rank(const struct grp *g, int i)
{
	return g->rk ? g->rk[i] : i;
}

/*
 * A group of n members as p = the largest power of two <= n: members 2i
 * and 2i + 1 (i < rem = n - p) fold into 2i + 1 first and unfold last.
 * *v: the member's index among the p (-1 for 2i, which sits out).
 */
static int grp_pow2(const struct grp *g, int *rem, int *v)
{
	int p = 1, r = g->me;

	while (p * 2 <= g->n)
		p *= 2;
	*rem = g->n - p;
	*v = r < 2 * *rem ? (r % 2 ? r / 2 : -1) : r - *rem;
	return p;
}

/* The group index of index v's partner at distance mask among the p. */
static int grp_partner(int v, int mask, int rem)
{
	int pv = v ^ mask;

	return pv < rem ? 2 * pv + 1 : pv + rem;
}

/*
 * The fold (back 0: 2i gives its vector to 2i + 1, which combines it as
 * "2i op 2i + 1") or the unfold (back 1: 2i + 1 gives the result back).
 */
static int grp_fold(struct hcomm_comm *c, struct hcomm_coll *k,
		    struct p2p_step *st, const struct grp *g, int rem,
		    char *buf, size_t bytes, int back)
{
	int r = g->me, giver = back ? r % 2 : r % 2 == 0;

	if (r >= 2 * rem)
		return 0;
	st->nsnd = giver;
	st->nrcv = !giver;
	p2p_msg(st->snd, k, g_rank(g, r ^ 1), buf, bytes, 0);
	p2p_msg(st->rcv, k, g_rank(g, r ^ 1), buf, bytes,
		back ? RX_COPY : RX_HI);
	return p2p_run(c, k, st);
}

/*
 * Recursive doubling allreduce of buf (count elements) over g: log2(p)
 * steps in which partners swap their whole vectors and both combine them
 * as "lower rank op higher rank" (so they hold the same bits).  With n
 * not a power of two, p the largest one below: members 2i and 2i + 1
 * (i < n - p) first fold into 2i + 1, which takes part, and 2i gets the
 * result back at the end.  avg_n: divide by it at the end (HCOMM_AVG;
 * 0: leave the sum).
 */
static int rd_run(struct hcomm_comm *c, struct hcomm_coll *k,
		  const struct coll_op *o, char *buf, const struct grp *g,
		  unsigned int avg_n)
{
	size_t es = hcomm_dtype_size(o->dt), bytes = o->count * es;
	struct p2p_step st = { .dt = o->dt, .op = o->op, .es = es };
	int r = g->me, p, rem, v, mask, pr, ret;
	struct p2p_msg snd, rcv;
	char *snap;

	p = grp_pow2(g, &rem, &v);
	snap = malloc(bytes + k->pchunk);
	if (!snap)
		return coll_nomem(k, "hcomm_allreduce", bytes + k->pchunk);
	st.tmp = snap + bytes;
	st.snd = &snd;
	st.rcv = &rcv;
	ret = grp_fold(c, k, &st, g, rem, buf, bytes, 0);
	for (mask = 1; !ret && v >= 0 && mask < p; mask <<= 1) {
		pr = grp_partner(v, mask, rem);
		memcpy(snap, buf, bytes);
		st.nsnd = st.nrcv = 1;
		p2p_msg(&snd, k, g_rank(g, pr), snap, bytes, 0);
		p2p_msg(&rcv, k, g_rank(g, pr), buf, bytes,
			r < pr ? RX_LO : RX_HI);
		ret = p2p_run(c, k, &st);
	}
	if (!ret && v >= 0 && avg_n && o->op == HCOMM_AVG)
		ret = hcomm__reduce_finish_avg(o->dt, buf, o->count, avg_n);
	if (!ret)
		ret = grp_fold(c, k, &st, g, rem, buf, bytes, 1);
	free(snap);
	return ret;
}

/*
 * Rabenseifner's allreduce over g: a reduce-scatter by recursive halving
 * (at distance 1, 2, 4 ... partners swap halves of their current range;
 * each keeps the half its bit says and combines the partner's copy into
 * it) then an allgather by recursive doubling, the same steps backwards.
 * As many bytes move as in the ring (2 (p - 1) / p of the vector) in
 * 2 log2(p) steps instead of 2 (n - 1).  Each element is combined on one
 * rank and copied to the others.  n not a power of two: the pairs fold
 * first and unfold last, as in rd_run().
 */
static int hd_run(struct hcomm_comm *c, struct hcomm_coll *k,
		  const struct coll_op *o, char *buf, const struct grp *g,
		  unsigned int avg_n)
{
	size_t es = hcomm_dtype_size(o->dt), lo[32], hi[32], mid, l, h;
	struct p2p_step st = { .dt = o->dt, .op = o->op, .es = es };
	int p, rem, v, mask, pr, ret, s, steps = 0;
	struct p2p_msg snd, rcv;

	p = grp_pow2(g, &rem, &v);
	st.tmp = malloc(k->pchunk);
	if (!st.tmp)
		return coll_nomem(k, "hcomm_allreduce", k->pchunk);
	st.snd = &snd;
	st.rcv = &rcv;
	ret = grp_fold(c, k, &st, g, rem, buf, o->count * es, 0);
	l = 0;
	h = o->count;
	st.nsnd = st.nrcv = 1;
	for (mask = 1; !ret && v >= 0 && mask < p; mask <<= 1, steps++) {
		pr = g_rank(g, grp_partner(v, mask, rem));
		mid = l + (h - l) / 2;
		lo[steps] = l;
		hi[steps] = h;
		if (v & mask) {		/* keep [mid, h), send [l, mid) */
			p2p_msg(&snd, k, pr, buf + l * es, (mid - l) * es, 0);
			l = mid;
		} else {
			p2p_msg(&snd, k, pr, buf + mid * es, (h - mid) * es, 0);
			h = mid;
		}
		p2p_msg(&rcv, k, pr, buf + l * es, (h - l) * es,
			c->rank < pr ? RX_LO : RX_HI);
		ret = p2p_run(c, k, &st);
	}
	if (!ret && v >= 0 && avg_n && o->op == HCOMM_AVG)
		ret = hcomm__reduce_finish_avg(o->dt, buf + l * es, h - l,
					       avg_n);
	for (s = steps - 1; !ret && s >= 0; s--) {
		mask = 1 << s;
		pr = g_rank(g, grp_partner(v, mask, rem));
		mid = lo[s] + (hi[s] - lo[s]) / 2;
		p2p_msg(&snd, k, pr, buf + l * es, (h - l) * es, 0);
		if (v & mask)	/* had [mid, hi), gets [lo, mid) */
			p2p_msg(&rcv, k, pr, buf + lo[s] * es,
				(mid - lo[s]) * es, RX_COPY);
		else
			p2p_msg(&rcv, k, pr, buf + mid * es,
				(hi[s] - mid) * es, RX_COPY);
		ret = p2p_run(c, k, &st);
		l = lo[s];
		h = hi[s];
	}
	if (!ret)
		ret = grp_fold(c, k, &st, g, rem, buf, o->count * es, 1);
	free(st.tmp);
	return ret;
}

static int allreduce_rd(struct hcomm_comm *c, struct hcomm_coll *k,
			const struct coll_op *o)
{
	struct grp g = { NULL, c->size, c->rank };

	return rd_run(c, k, o, o->recv, &g, (unsigned int)c->size);
}

static int allreduce_hd(struct hcomm_comm *c, struct hcomm_coll *k,
			const struct coll_op *o)
{
	struct grp g = { NULL, c->size, c->rank };

	return hd_run(c, k, o, o->recv, &g, (unsigned int)c->size);
}

/*
 * Hierarchical allreduce, for jobs over several hosts with several ranks
 * on a host: the ranks of a host fold into its lowest rank (the leader:
 * one after the other, in rank order, over the host's own transport),
 * the leaders allreduce among themselves (recursive doubling up to
 * HCOMM_COLL_RD_MAX, halving-doubling above), and each leader sends the
 * result to its host's ranks.  Only the leaders' step crosses hosts, with
 * one rank per host: the slower links carry the vector once per host
 * instead of once per rank.  k->loc, k->nloc: this host's ranks; k->lead,
 * k->nlead: the leaders (both in increasing order).
 */
static int allreduce_hier(struct hcomm_comm *c, struct hcomm_coll *k,
			  const struct coll_op *o)
{
	size_t es = hcomm_dtype_size(o->dt), bytes = o->count * es;
	struct p2p_step st = { .dt = o->dt, .op = o->op, .es = es };
	struct p2p_msg *m;
	struct grp g = { k->lead, k->nlead, 0 };
	char *buf = o->recv;
	int i, ret = 0;

	if (k->loc[0] != c->rank) {	/* a member: give, then take */
		struct p2p_msg one;

		st.snd = st.rcv = &one;
		st.nsnd = 1;
		p2p_msg(&one, k, k->loc[0], buf, bytes, 0);
		ret = p2p_run(c, k, &st);
		st.nsnd = 0;
		st.nrcv = 1;
		p2p_msg(&one, k, k->loc[0], buf, bytes, RX_COPY);
		return ret ? ret : p2p_run(c, k, &st);
	}
	m = calloc((size_t)k->nloc + 1, sizeof(*m));
	st.tmp = malloc(k->pchunk);
	if (!m || !st.tmp) {
		free(m);
		free(st.tmp);
		return coll_nomem(k, "hcomm_allreduce", k->pchunk);
	}
	st.snd = st.rcv = m;
	st.nrcv = 1;
	for (i = 1; !ret && i < k->nloc; i++) {
		p2p_msg(m, k, k->loc[i], buf, bytes, RX_LO);
		ret = p2p_run(c, k, &st);
	}
	st.nrcv = 0;
	for (i = 0; i < k->nlead; i++)
		if (k->lead[i] == c->rank)
			g.me = i;
	if (!ret && k->nlead > 1)
		ret = bytes <= k->rd_max ?
		      rd_run(c, k, o, buf, &g, 0) :
		      hd_run(c, k, o, buf, &g, 0);
	if (!ret && o->op == HCOMM_AVG)
		ret = hcomm__reduce_finish_avg(o->dt, buf, o->count,
					       (unsigned int)c->size);
	for (i = 1; i < k->nloc; i++)
		p2p_msg(&m[i - 1], k, k->loc[i], buf, bytes, 0);
	st.nsnd = k->nloc - 1;
	if (!ret && st.nsnd)
		ret = p2p_run(c, k, &st);
	free(m);
	free(st.tmp);
	return ret;
}

/* Every pair at once, each over its own channel. */
static int do_alltoall(struct hcomm_comm *c, struct hcomm_coll *k,
		       const struct coll_op *o)
{
	size_t blk = o->count * hcomm_dtype_size(o->dt);
	int n = c->size, r = c->rank, i, ret;
	struct p2p_step st = { .dt = o->dt, .es = 1 };
	const char *src = o->send;
	char *recv = o->recv, *tmp = NULL;

	if (!blk)
		return 0;
	if (src == recv && n > 1) {	/* in place: send from a copy */
		tmp = scratch_get(k, blk * (size_t)n);
		if (!tmp)
			return coll_nomem(k, "hcomm_alltoall",
					  blk * (size_t)n);
		memcpy(tmp, src, blk * (size_t)n);
		src = tmp;
	}
	if (src + (size_t)r * blk != recv + (size_t)r * blk)
		memmove(recv + (size_t)r * blk, src + (size_t)r * blk, blk);
	if (n == 1)
		return 0;
	st.snd = calloc((size_t)n, sizeof(*st.snd));
	st.rcv = calloc((size_t)n, sizeof(*st.rcv));
	if (!st.snd || !st.rcv) {
		free(st.snd);
		free(st.rcv);
		scratch_put(k, tmp, blk * (size_t)n);
		return coll_nomem(k, "hcomm_alltoall",
				  2 * (size_t)n * sizeof(*st.snd));
	}
	/* rank r + i first, as in a pairwise exchange */
	for (i = 1; i < n; i++) {
		int d = (r + i) % n, s = (r - i + n) % n;

		p2p_msg(&st.snd[st.nsnd++], k, d, (char *)src + (size_t)d * blk,
			blk, 0);
		p2p_msg(&st.rcv[st.nrcv++], k, s, recv + (size_t)s * blk, blk,
			RX_COPY);
	}
	ret = p2p_run(c, k, &st);
	free(st.snd);
	free(st.rcv);
	scratch_put(k, tmp, blk * (size_t)n);
	return ret;
}

/* op 0: the collective takes none. */
static int check_args(struct hcomm_comm *c, const char *fn,
		      enum hcomm_dtype dt, int op, int root, const void *a,
		      const void *b, size_t count)
{
	if (!c)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "%s: no "
				   "communicator", fn);
	if (!hcomm_dtype_size(dt))
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "%s: data type %d",
				   fn, (int)dt);
	if (op && (op < HCOMM_SUM || op >= HCOMM_REDOP__MAX))
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "%s: operation %d",
				   fn, op);
	if (root < 0 || root >= c->size)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "%s: root %d of %d "
				   "ranks", fn, root, c->size);
	if (count && (!a || !b))
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "%s: NULL buffer",
				   fn);
	if (count > SIZE_MAX / hcomm_dtype_size(dt) / (size_t)c->size)
		return hcomm__fail(HCOMM_ERR_INVAL, EOVERFLOW, "%s: %zu "
				   "elements", fn, count);
	return 0;
}

/* Fill the parts of p common to every kind. */
static void plan_init(struct plan *p, const struct hcomm_comm *c,
		      const struct hcomm_coll *k, int kind,
		      enum hcomm_dtype dt, enum hcomm_redop op, void *buf,
		      size_t count)
{
	memset(p, 0, sizeof(*p));
	p->kind = kind;
	p->dt = dt;
	p->op = op;
	p->es = hcomm_dtype_size(dt);
	p->count = count;
	p->buf = buf;
	p->n = c->size;
	p->r = c->rank;
	p->ce = k->chunk / p->es;
}

/* The ring allreduce's chunks and messages (buf, count, ce set). */
static void ring_plan(struct plan *p)
{
	size_t most = 0, len;
	int s;

	for (s = 0; s < p->n; s++) {
		len = seg_off(p, s + 1) - seg_off(p, s);
		if (len > most)
			most = len;
	}
	p->nch = most ? (most + p->ce - 1) / p->ce : 1;
	p->rs_msgs = (uint64_t)(p->n - 1) * p->nch;
	p->nsend = p->nrecv = 2 * p->rs_msgs;
}

/*
 * fp32 sum or avg with fp16 on the wire: every rank's value is divided by
 * the number of ranks and rounded to fp16 (the wire copy); the ring's
 * reduce-scatter sums what arrives into fp32 (starting from the rank's
 * own value / n in fp32) and sends each partial sum on rounded to fp16;
 * the allgather carries the fp16 results, which every rank widens into
 * recv (times n for a sum).  Dividing first keeps every partial sum
 * within about the largest |input| of its element (each step's rounding
 * may add 2^-11 of it), so only inputs at or near fp16's limit can
 * overflow: such elements become +-inf and the conversions that did are
 * counted (HCOMM_LOG prints the count; one element may count more than
 * once).
 */
static int allreduce_fp16(struct hcomm_comm *c, struct hcomm_coll *k,
			  const void *send, void *recv, size_t count,
			  enum hcomm_redop op)
{
	float *acc = recv, scale = 1.0f / (float)c->size;
	uint16_t *wire = scratch_get(k, count * sizeof(*wire));
	size_t ovf, i;
	struct plan p;
	int ret;

	if (!wire)
		return coll_nomem(k, "hcomm_allreduce", count * sizeof(*wire));
	ovf = hcomm__fp32_to_fp16_scaled(wire, send, count, scale);
	for (i = 0; i < count; i++)
		acc[i] = ((const float *)send)[i] * scale;
	plan_init(&p, c, k, K_ALLREDUCE, HCOMM_FP16, HCOMM_SUM, wire, count);
	p.acc = acc;
	p.ovf = &ovf;
	ring_plan(&p);
	ret = ring_run(c, k, &p);
	if (!ret) {
		hcomm__fp16_to_fp32(acc, wire, count);
		if (op == HCOMM_SUM)
			for (i = 0; i < count; i++)
				acc[i] *= (float)c->size;
	}
	scratch_put(k, wire, count * sizeof(*wire));
	if (ovf && k->log)
		fprintf(stderr, "hcomm coll: rank %d: fp16-compressed "
			"allreduce of %zu floats: %zu values beyond fp16's "
			"range became +-inf\n", c->rank, count, ovf);
	return ret;
}

/* ------------------------------------------------------------------ */
/* the collectives, and the queue that runs them in order              */
/* ------------------------------------------------------------------ */

/*
 * The allreduce's algorithm: HCOMM_ALGO when it names one, else
 * recursive doubling up to HCOMM_COLL_RD_MAX bytes (log2 n latencies,
 * the whole vector each time), halving-doubling up to HCOMM_COLL_HD_MAX
 * (2 log2 n latencies, the ring's bytes) and the ring above (2 (n - 1)
 * latencies, 2 (n - 1) / n of the vector, pipelined in chunks).  HCOMM_LOG
 * prints each change of choice on rank 0.
 */
static int algo_pick(const struct hcomm_comm *c, struct hcomm_coll *k,
		     size_t bytes)
{
	static const char *const what[] = { "", "ring", "recursive doubling",
					     "halving-doubling",
					     "hierarchical (the hosts' ranks "
					     "fold into a leader; the leaders "
					     "allreduce)" };
	int a = k->algo;

	if (a == ALGO_AUTO && k->multi)
		a = ALGO_HIER;
	else if (a == ALGO_AUTO)
		a = bytes <= k->rd_max ? ALGO_RD :
		    bytes <= k->hd_max ? ALGO_HD : ALGO_RING;
	if (k->log && c->rank == 0 && k->logged != a + 1) {
		fprintf(stderr, "hcomm coll: allreduce of %zu bytes on %d "
			"ranks: %s (HCOMM_ALGO=%s, recursive doubling up to "
			"HCOMM_COLL_RD_MAX=%llu bytes, halving-doubling up to "
			"HCOMM_COLL_HD_MAX=%llu)\n", bytes, c->size, what[a],
			algo_names[k->algo], (unsigned long long)k->rd_max,
			(unsigned long long)k->hd_max);
		k->logged = a + 1;
	}
	return a;
}

/* Are the n bytes at a and at b apart (no byte in common)? */
static int apart(const void *a, const void *b, size_t n)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return x >= y ? x - y >= n : y - x >= n;
}

static int do_allreduce(struct hcomm_comm *c, struct hcomm_coll *k,
			const struct coll_op *o)
{
	size_t bytes = o->count * hcomm_dtype_size(o->dt);
	int algo = ALGO_RING, oop;
	struct plan p;

	if (o->root)	/* the fp16 compression, decided when issued */
		return allreduce_fp16(c, k, o->send, o->recv, o->count, o->op);
	if (c->size > 1 && o->count)
		algo = algo_pick(c, k, bytes);
	/* the ring reads send itself: no copy of it into recv first */
	oop = algo == ALGO_RING && c->size > 1 && o->count &&
	      o->send != o->recv && apart(o->send, o->recv, bytes);
	if (o->send != o->recv && o->count && !oop)
		memmove(o->recv, o->send, bytes);
	if (c->size == 1 || !o->count)
		return 0;
	switch (algo) {
	case ALGO_RD:
		return allreduce_rd(c, k, o);
	case ALGO_HD:
		return allreduce_hd(c, k, o);
	case ALGO_HIER:
		return allreduce_hier(c, k, o);
	}
	plan_init(&p, c, k, K_ALLREDUCE, o->dt, o->op, o->recv, o->count);
	if (oop)
		p.src = o->send;
	ring_plan(&p);
	return ring_run(c, k, &p);
}

static int do_reduce_scatter(struct hcomm_comm *c, struct hcomm_coll *k,
			     const struct coll_op *o)
{
	size_t es = hcomm_dtype_size(o->dt), all = o->count * (size_t)c->size;
	struct plan p;
	char *acc;
	int ret;

	if (!o->count)
		return 0;
	if (c->size == 1) {
		memmove(o->recv, o->send, o->count * es);
		return 0;
	}
	acc = scratch_get(k, all * es);
	if (!acc)
		return coll_nomem(k, "hcomm_reduce_scatter", all * es);
	plan_init(&p, c, k, K_REDUCE_SCATTER, o->dt, o->op, acc, all);
	p.src = o->send;	/* the scratch is apart from it */
	if (apart(o->send, o->recv, all * es))	/* else copied at the end */
		p.rs_out = o->recv;
	p.nch = (o->count + p.ce - 1) / p.ce;
	p.rs_msgs = (uint64_t)(p.n - 1) * p.nch;
	p.nsend = p.nrecv = p.rs_msgs;
	ret = ring_run(c, k, &p);
	if (!ret && !p.rs_out)
		memmove(o->recv, acc + (size_t)c->rank * o->count * es,
			o->count * es);
	scratch_put(k, acc, all * es);
	return ret;
}

static int do_broadcast(struct hcomm_comm *c, struct hcomm_coll *k,
			const struct coll_op *o)
{
	struct plan p;

	if (c->size == 1 || !o->count)
		return 0;
	plan_init(&p, c, k, K_BCAST, o->dt, 0, o->recv, o->count);
	p.pos = mod(c->rank - o->root, c->size);
	p.nch = (o->count + p.ce - 1) / p.ce;
	p.nsend = p.pos == p.n - 1 ? 0 : p.nch;
	p.nrecv = p.pos == 0 ? 0 : p.nch;
	return ring_run(c, k, &p);
}

static int do_reduce(struct hcomm_comm *c, struct hcomm_coll *k,
		     const struct coll_op *o)
{
	size_t es = hcomm_dtype_size(o->dt);
	int me_root = c->rank == o->root, ret, oop, pos, scr = 0;
	struct plan p;
	char *acc;

	if (!o->count)
		return 0;
	if (c->size == 1) {
		memmove(o->recv, o->send, o->count * es);
		return 0;
	}
	/* the chain's head only sends, from send; the others reduce */
	pos = mod(c->rank - o->root - 1, c->size);
	if (me_root) {
		acc = o->recv;
	} else if (pos == 0) {
		acc = (char *)o->send;	/* only read: it receives nothing */
	} else {
		acc = scratch_get(k, o->count * es);
		scr = 1;
	}
	if (!acc)
		return coll_nomem(k, "hcomm_reduce", o->count * es);
	oop = acc != o->send && apart(acc, o->send, o->count * es);
	if (acc != o->send && !oop)
		memmove(acc, o->send, o->count * es);
	plan_init(&p, c, k, K_REDUCE, o->dt, o->op, acc, o->count);
	if (oop)
		p.src = o->send;
	p.pos = pos;
	p.nch = (o->count + p.ce - 1) / p.ce;
	p.nsend = p.pos == p.n - 1 ? 0 : p.nch;
	p.nrecv = p.pos == 0 ? 0 : p.nch;
	ret = ring_run(c, k, &p);
	if (scr)
		scratch_put(k, acc, o->count * es);
	return ret;
}

/*
 * The ring allgather: n - 1 steps, rank r's block going round from r to
 * r - 1.  A barrier is one of 0 bytes: the message of step s leaves a
 * rank only after the one of step s - 1 arrived, so the last arrival
 * says that every rank has entered.
 */
static int do_allgather(struct hcomm_comm *c, struct hcomm_coll *k,
			const struct coll_op *o)
{
	size_t es = hcomm_dtype_size(o->dt);
	char *mine = (char *)o->recv + (size_t)c->rank * o->count * es;
	struct plan p;

	if (o->count && o->send != mine)
		memmove(mine, o->send, o->count * es);
	if (c->size == 1 || (!o->count && o->kind != K_BARRIER))
		return 0;
	plan_init(&p, c, k, K_ALLGATHER, o->dt, 0, o->recv,
		  o->count * (size_t)c->size);
	p.nch = o->count ? (o->count + p.ce - 1) / p.ce : 1;
	p.nsend = p.nrecv = (uint64_t)(p.n - 1) * p.nch;
	return ring_run(c, k, &p);
}

static int coll_exec(struct hcomm_comm *c, struct hcomm_coll *k,
		     const struct coll_op *o)
{
	if (__atomic_load_n(&k->broken, __ATOMIC_ACQUIRE))
		return hcomm__fail(HCOMM_ERR_IO, EIO, "an earlier collective "
				   "failed, the ring is out of step: %s",
				   k->why);
	switch (o->kind) {
	case K_ALLREDUCE:
		return do_allreduce(c, k, o);
	case K_REDUCE_SCATTER:
		return do_reduce_scatter(c, k, o);
	case K_BCAST:
		return do_broadcast(c, k, o);
	case K_REDUCE:
		return do_reduce(c, k, o);
	case K_ALLTOALL:
		return do_alltoall(c, k, o);
	default:
		return do_allgather(c, k, o);
	}
}

/* The bytes this rank contributed (a request's bytes). */
static uint64_t op_bytes(const struct hcomm_comm *c, const struct coll_op *o)
{
	uint64_t b = (uint64_t)o->count * hcomm_dtype_size(o->dt);

	return o->kind == K_REDUCE_SCATTER || o->kind == K_ALLTOALL ?
	       b * (uint64_t)c->size : b;
}

/*
 * This thread's collective state while it is a collective thread, or
 * while it runs a blocking collective itself (callbacks of other
 * requests may run inside: they must not wait for a collective).
 */
static __thread struct hcomm_coll *t_coll_thread;
struct coll_frame {
	const struct hcomm_coll *k;
	struct coll_frame *up;
};
static __thread struct coll_frame *t_coll_top;	/* innermost first */

/* Is this thread k's collective thread, or inside one of k's? */
static int coll_inside(const struct hcomm_coll *k)
{
	const struct coll_frame *f;

	if (!k)
		return 0;
	if (t_coll_thread == k)
		return 1;
	for (f = t_coll_top; f; f = f->up)
		if (f->k == k)
			return 1;
	return 0;
}

static void coll_finish(struct hcomm_comm *c, struct hcomm_coll *k,
			struct coll_op *o, int ret)
{
	if (o->req) {
		hcomm__complete_here(c, o->req, ret, ret ? EIO : 0,
				     ret ? 0 : op_bytes(c, o));
		free(o);
	} else {
		o->ret = ret;
		/* from here on o is its caller's (its stack) */
		__atomic_store_n(&o->done, 1, __ATOMIC_RELEASE);
	}
	hcomm_ec_notify(&k->done_ec);
}

/* The collective thread: runs the queue in order until stopped. */
static void *coll_main(void *arg)
{
	struct hcomm_comm *c = arg;
	struct hcomm_coll *k = c->coll;
	struct coll_op *o;
	int ret;

	hcomm__cb_foreign();	/* inline callbacks it reaps: the app's */
	t_coll_thread = k;
	pthread_mutex_lock(&k->qlock);
	for (;;) {
		/* not while a caller runs one itself (coll_call) */
		while ((!k->qhead || k->busy) && !k->stop)
			pthread_cond_wait(&k->qcond, &k->qlock);
		while (k->busy)		/* stopping: the caller's goes first */
			pthread_cond_wait(&k->qcond, &k->qlock);
		o = k->qhead;
		if (!o)
			break;
		k->qhead = o->next;
		if (!k->qhead)
			k->qtail = NULL;
		if (o->req)
			__atomic_sub_fetch(&k->nqueued, 1, __ATOMIC_RELEASE);
		k->busy = 1;
		pthread_mutex_unlock(&k->qlock);
		ret = coll_exec(c, k, o);
		pthread_mutex_lock(&k->qlock);
		k->busy = 0;
		pthread_mutex_unlock(&k->qlock);
		coll_finish(c, k, o, ret);
		pthread_mutex_lock(&k->qlock);
	}
	pthread_mutex_unlock(&k->qlock);
	return NULL;
}

/* Queue o (qlock held), starting the collective thread the first time. */
static int coll_push(struct hcomm_comm *c, struct hcomm_coll *k,
		     struct coll_op *o)
{
	sigset_t all, old;
	int err;

	if (!k->thr_started) {
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		err = pthread_create(&k->thr, NULL, coll_main, c);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (err)
			return hcomm__fail(err == EAGAIN ? HCOMM_ERR_LIMIT :
					   HCOMM_ERR_NOMEM, err, "starting the "
					   "collective thread");
		k->thr_started = 1;
	}
	o->next = NULL;
	if (k->qtail)
		k->qtail->next = o;
	else
		k->qhead = o;
	k->qtail = o;
	pthread_cond_signal(&k->qcond);
	return 0;
}

/* Wait until done reads 1 (acquire), progressing the communicator. */
static void coll_wait_flag(struct hcomm_comm *c, struct hcomm_coll *k,
			   const int *done)
{
	uint32_t key;

	while (!__atomic_load_n(done, __ATOMIC_ACQUIRE)) {
		(void)hcomm__progress_once(c);
		key = hcomm_ec_prepare(&k->done_ec);
		if (__atomic_load_n(done, __ATOMIC_ACQUIRE))
			break;
		hcomm_ec_wait(&k->done_ec, key, COLL_POLL_MS);
	}
}

/*
 * The queued non-blocking collectives of c that this thread must not wait
 * for (hcomm__drain): all of them on c's collective thread or inside one
 * of c's collectives (the queue cannot move until it returns), else 0.
 */
uint64_t hcomm__coll_excluded(struct hcomm_comm *c)
{
	struct hcomm_coll *k = c->coll;

	if (!coll_inside(k))
		return 0;
	return __atomic_load_n(&k->nqueued, __ATOMIC_ACQUIRE);
}

int hcomm__coll_here(struct hcomm_comm *c)
{
	return coll_inside(c->coll);
}

int hcomm__coll_wait(struct hcomm_comm *c, struct hcomm_request *req)
{
	struct hcomm_coll *k = c->coll;

	if (coll_inside(k) && !__atomic_load_n(&req->done, __ATOMIC_ACQUIRE))
		return hcomm__fail(HCOMM_ERR_BUSY, EBUSY, "hcomm_wait: a "
				   "queued collective, from inside a "
				   "collective (its callback, or a callback run "
				   "while it waits): it could never run");
	coll_wait_flag(c, k, &req->done);
	if (req->status)
		return hcomm__fail(-req->status, hcomm__req_priv(req)->err,
				   "collective failed: %s", k->why);
	return 0;
}

/*
 * A blocking collective: run here when nothing is queued or running,
 * else queue it behind the others and wait for it.
 */
static int coll_call(struct hcomm_comm *c, struct hcomm_coll *k,
		     struct coll_op *o)
{
	struct coll_frame f = { k, t_coll_top };
	int ret;

	/*
	 * A collective's callback runs on the collective thread on every
	 * rank: refused alike everywhere, the ring stays in step.  Another
	 * callback runs inside a collective on some ranks and not on others
	 * (timing): those go on, this one is out of step for good.
	 */
	if (t_coll_thread == k)
		return hcomm__fail(HCOMM_ERR_BUSY, EBUSY, "a blocking "
				   "collective from a collective's callback "
				   "(issue a non-blocking one)");
	if (coll_inside(k))
		return coll_fail(k, HCOMM_ERR_BUSY, EBUSY, "a blocking "
				 "collective from a callback run inside a "
				 "collective (issue a non-blocking one)");
	pthread_mutex_lock(&k->qlock);
	if (!k->qhead && !k->busy) {
		k->busy = 1;
		pthread_mutex_unlock(&k->qlock);
		t_coll_top = &f;
		ret = coll_exec(c, k, o);
		t_coll_top = f.up;
		pthread_mutex_lock(&k->qlock);
		k->busy = 0;
		pthread_cond_broadcast(&k->qcond);
		pthread_mutex_unlock(&k->qlock);
		return ret;
	}
	o->req = NULL;
	o->done = 0;
	ret = coll_push(c, k, o);
	pthread_mutex_unlock(&k->qlock);
	if (ret) {
		char why[160];

		snprintf(why, sizeof(why), "%s", hcomm_errmsg());
		return coll_fail(k, -ret, EAGAIN, why);
	}
	coll_wait_flag(c, k, &o->done);
	if (o->ret)
		return hcomm__fail(-o->ret, EIO, "%s", k->why);
	return 0;
}

/* A non-blocking collective: queue a copy of o for the thread. */
static int coll_post(struct hcomm_comm *c, struct hcomm_coll *k,
		     const struct coll_op *o, struct hcomm_request *req)
{
	struct coll_op *q = malloc(sizeof(*q));
	char why[160];
	int ret;

	/*
	 * Past coll_get, a failure leaves this rank out of step with the
	 * others (they run the collective): the ring breaks.
	 */
	if (!q)
		return coll_nomem(k, "a collective's request", sizeof(*q));
	*q = *o;
	q->req = req;
	ret = hcomm__req_start(c, req, HCOMM_TGT_COLL);
	if (ret) {
		free(q);
		snprintf(why, sizeof(why), "%s", hcomm_errmsg());
		return coll_fail(k, -ret, EBUSY, why);
	}
	pthread_mutex_lock(&k->qlock);
	ret = coll_push(c, k, q);
	if (!ret)
		__atomic_add_fetch(&k->nqueued, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&k->qlock);
	if (ret) {
		free(q);
		snprintf(why, sizeof(why), "%s", hcomm_errmsg());
		ret = coll_fail(k, -ret, EAGAIN, why);
		req->status = ret;
		__atomic_sub_fetch(&c->inflight, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
	}
	return ret;
}

/* Check, make the state, then run (req NULL) or queue (req) o. */
static int coll_issue(struct hcomm_comm *c, const char *fn,
		      struct coll_op *o, struct hcomm_request *req, int nb)
{
	struct hcomm_coll *k = NULL;
	const void *a = o->send, *b = o->recv;
	int ret, op = o->op ? (int)o->op : -1;

	if (o->kind == K_BCAST || o->kind == K_BARRIER ||
	    o->kind == K_ALLGATHER || o->kind == K_ALLTOALL)
		op = 0;
	if (o->kind == K_REDUCE && c && c->rank != o->root)
		b = a;	/* recv is unused off the root */
	if (o->kind == K_BCAST)
		a = b;
	ret = check_args(c, fn, o->dt, op, o->root, a, b, o->count);
	if (!ret && nb && !req)
		ret = hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "%s: no request",
				  fn);
	if (ret)
		return ret;
	ret = coll_get(c, &k);
	if (ret)
		return ret;
	if (o->kind == K_ALLREDUCE)	/* compression as configured now */
		o->root = c->size > 1 && o->dt == HCOMM_FP32 &&
			  (o->op == HCOMM_SUM || o->op == HCOMM_AVG) &&
			  c->cfg.enable_fp16_compress &&
			  o->count * sizeof(float) >= c->cfg.comp_threshold;
	return nb ? coll_post(c, k, o, req) : coll_call(c, k, o);
}

#define OP(kind_, send_, recv_, count_, dt_, op_, root_) \
	(struct coll_op){ .kind = (kind_), .send = (send_), .recv = (recv_), \
			  .count = (count_), .dt = (dt_), .op = (op_), \
			  .root = (root_) }

HCOMM_EXPORT int hcomm_allreduce(struct hcomm_comm *c, const void *send,
				 void *recv, size_t count, enum hcomm_dtype dt,
				 enum hcomm_redop op)
{
	struct coll_op o = OP(K_ALLREDUCE, send, recv, count, dt, op, 0);

	return coll_issue(c, "hcomm_allreduce", &o, NULL, 0);
}

HCOMM_EXPORT int hcomm_allreduce_nb(struct hcomm_comm *c, const void *send,
				    void *recv, size_t count,
				    enum hcomm_dtype dt, enum hcomm_redop op,
				    struct hcomm_request *req)
{
	struct coll_op o = OP(K_ALLREDUCE, send, recv, count, dt, op, 0);

	return coll_issue(c, "hcomm_allreduce_nb", &o, req, 1);
}

HCOMM_EXPORT int hcomm_reduce_scatter(struct hcomm_comm *c, const void *send,
				      void *recv, size_t recvcount,
				      enum hcomm_dtype dt, enum hcomm_redop op)
{
	struct coll_op o = OP(K_REDUCE_SCATTER, send, recv, recvcount, dt, op,
			      0);

	return coll_issue(c, "hcomm_reduce_scatter", &o, NULL, 0);
}

HCOMM_EXPORT int hcomm_reduce_scatter_nb(struct hcomm_comm *c,
					 const void *send, void *recv,
					 size_t recvcount, enum hcomm_dtype dt,
					 enum hcomm_redop op,
					 struct hcomm_request *req)
{
	struct coll_op o = OP(K_REDUCE_SCATTER, send, recv, recvcount, dt, op,
			      0);

	return coll_issue(c, "hcomm_reduce_scatter_nb", &o, req, 1);
}

HCOMM_EXPORT int hcomm_broadcast(struct hcomm_comm *c, void *buf,
				 size_t count, enum hcomm_dtype dt, int root)
{
	struct coll_op o = OP(K_BCAST, buf, buf, count, dt, 0, root);

	return coll_issue(c, "hcomm_broadcast", &o, NULL, 0);
}

HCOMM_EXPORT int hcomm_broadcast_nb(struct hcomm_comm *c, void *buf,
				    size_t count, enum hcomm_dtype dt,
				    int root, struct hcomm_request *req)
{
	struct coll_op o = OP(K_BCAST, buf, buf, count, dt, 0, root);

	return coll_issue(c, "hcomm_broadcast_nb", &o, req, 1);
}

HCOMM_EXPORT int hcomm_reduce(struct hcomm_comm *c, const void *send,
			      void *recv, size_t count, enum hcomm_dtype dt,
			      enum hcomm_redop op, int root)
{
	struct coll_op o = OP(K_REDUCE, send, recv, count, dt, op, root);

	return coll_issue(c, "hcomm_reduce", &o, NULL, 0);
}

HCOMM_EXPORT int hcomm_reduce_nb(struct hcomm_comm *c, const void *send,
				 void *recv, size_t count, enum hcomm_dtype dt,
				 enum hcomm_redop op, int root,
				 struct hcomm_request *req)
{
	struct coll_op o = OP(K_REDUCE, send, recv, count, dt, op, root);

	return coll_issue(c, "hcomm_reduce_nb", &o, req, 1);
}

HCOMM_EXPORT int hcomm_allgather(struct hcomm_comm *c, const void *send,
				 void *recv, size_t len)
{
	struct coll_op o = OP(K_ALLGATHER, send, recv, len, HCOMM_UINT8, 0, 0);

	return coll_issue(c, "hcomm_allgather", &o, NULL, 0);
}

HCOMM_EXPORT int hcomm_allgather_nb(struct hcomm_comm *c, const void *send,
				    void *recv, size_t len,
				    struct hcomm_request *req)
{
	struct coll_op o = OP(K_ALLGATHER, send, recv, len, HCOMM_UINT8, 0, 0);

	return coll_issue(c, "hcomm_allgather_nb", &o, req, 1);
}

HCOMM_EXPORT int hcomm_alltoall(struct hcomm_comm *c, const void *send,
				void *recv, size_t count, enum hcomm_dtype dt)
{
	struct coll_op o = OP(K_ALLTOALL, send, recv, count, dt, 0, 0);

	return coll_issue(c, "hcomm_alltoall", &o, NULL, 0);
}

HCOMM_EXPORT int hcomm_alltoall_nb(struct hcomm_comm *c, const void *send,
				   void *recv, size_t count,
				   enum hcomm_dtype dt,
				   struct hcomm_request *req)
{
	struct coll_op o = OP(K_ALLTOALL, send, recv, count, dt, 0, 0);

	return coll_issue(c, "hcomm_alltoall_nb", &o, req, 1);
}

HCOMM_EXPORT int hcomm_barrier(struct hcomm_comm *c)
{
	struct coll_op o = OP(K_BARRIER, NULL, NULL, 0, HCOMM_UINT8, 0, 0);

	return coll_issue(c, "hcomm_barrier", &o, NULL, 0);
}

HCOMM_EXPORT int hcomm_barrier_nb(struct hcomm_comm *c,
				  struct hcomm_request *req)
{
	struct coll_op o = OP(K_BARRIER, NULL, NULL, 0, HCOMM_UINT8, 0, 0);

	return coll_issue(c, "hcomm_barrier_nb", &o, req, 1);
}

HCOMM_EXPORT int hcomm_comm_set_fp16_compress(struct hcomm_comm *c,
					      int enable, uint64_t threshold)
{
	if (!c || (enable != 0 && enable != 1) || threshold > (1ULL << 30))
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_comm_set_fp16_compress: enable %d, "
				   "threshold %llu (0 or 1, 0 .. 1G)", enable,
				   (unsigned long long)threshold);
	c->cfg.enable_fp16_compress = enable;
	c->cfg.comp_threshold = threshold;
	return 0;
}
