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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hcomm_comm_int.h"
#include "hcomm_boot.h"
#include "hcomm_reduce.h"

#define COLL_CHUNK_DEF	(256 * 1024)
#define COLL_SLOTS_DEF	4
#define COLL_POLL_MS	1		/* a wait's slice between checks */

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
 * @broken: an earlier collective failed (its message in @why): the ring
 *        is out of step for good.
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
};

enum { K_ALLREDUCE = 1, K_REDUCE_SCATTER, K_BCAST, K_REDUCE };

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
	float *acc;		/* fp16-compressed allreduce: buf is the fp16
				 * wire copy, acc the fp32 sums (else NULL) */
	size_t *ovf;		/* and where its overflows are counted */
	int n, r, pos;		/* pos: place in a chain (bcast, reduce) */
	uint64_t nsend, nrecv;	/* messages this rank sends, receives */
	uint64_t rs_msgs;	/* messages of the reduce-scatter half */
};

static size_t seg_off(const struct plan *p, int k)
{
	if (p->kind == K_REDUCE_SCATTER)
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
	if (!k->broken) {
		k->broken = 1;
		snprintf(k->why, sizeof(k->why), "%s", what);
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

/* The collective state, made by the first collective (collective). */
static int coll_get(struct hcomm_comm *c, struct hcomm_coll **out)
{
	struct hcomm_coll *k = c->coll;
	uint64_t chunk = COLL_CHUNK_DEF, slots = COLL_SLOTS_DEF;
	uint32_t nsig;
	int ret;

	if (k) {
		*out = k;
		if (k->broken)
			return hcomm__fail(HCOMM_ERR_IO, EIO, "an earlier "
					   "collective failed, the ring is out "
					   "of step: %s", k->why);
		return 0;
	}
	/* 64 .. 64 MiB and 1 .. 64 (hcomm_config.c) */
	ret = hcomm__config_env("HCOMM_COLL_CHUNK", &chunk);
	if (ret >= 0)
		ret = hcomm__config_env("HCOMM_COLL_SLOTS", &slots);
	if (ret < 0)
		return ret;
	chunk = (chunk + 63) & ~63ULL;
	nsig = hcomm_signal_count(c);
	if (nsig < slots + 3 + 64)
		return hcomm__fail(HCOMM_ERR_NOTSUP, ENOSYS, "collectives: "
				   "%u signals, %llu needed", nsig,
				   (unsigned long long)slots + 3 + 64);
	k = calloc(1, sizeof(*k));
	if (!k)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "collectives");
	k->chunk = chunk;
	k->slots = (unsigned int)slots;
	k->log = getenv("HCOMM_LOG") && strcmp(getenv("HCOMM_LOG"), "0");
	/* the probe has the last two (hcomm_comm.c: probe_pair) */
	k->sig_cred = nsig - 3;
	k->sig_data = nsig - 3 - (uint32_t)slots;
	k->len = (size_t)chunk * slots;
	k->sreq = calloc(slots, sizeof(*k->sreq));
	k->creq = calloc(slots, sizeof(*k->creq));
	k->sid = calloc(slots, sizeof(*k->sid));
	k->rx0 = calloc(slots, sizeof(*k->rx0));
	k->mem = mmap(NULL, k->len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (k->mem == MAP_FAILED)
		k->mem = NULL;
	if (!k->sreq || !k->creq || !k->sid || !k->rx0 || !k->mem) {
		ret = hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "collectives: "
				  "%zu bytes of staging", k->len);
		goto fail;
	}
	for (ret = 0; ret < (int)slots; ret++)
		k->sreq[ret].done = k->creq[ret].done = 1;
	/*
	 * The counts start from the signals' values now: the neighbours
	 * send nothing before every rank is past the window's creation.
	 */
	for (ret = 0; ret < (int)slots; ret++)
		k->rx0[ret] = hcomm_signal_read(c, k->sig_data + (uint32_t)ret);
	k->cred0 = hcomm_signal_read(c, k->sig_cred);
	ret = hcomm_win_create(c, k->mem, k->len, &k->win);
	if (ret)
		goto fail;
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
		goto fail;
	}
	c->coll = k;
	*out = k;
	if (k->log && c->rank == 0)
		fprintf(stderr, "hcomm coll: %d ranks, ring pipelines, %u slots "
			"of %zu bytes (HCOMM_COLL_SLOTS, HCOMM_COLL_CHUNK); fp16 "
			"compression of fp32 sum/avg allreduces %s%llu bytes "
			"(HCOMM_FP16_COMPRESS, HCOMM_COMP_THRESHOLD)\n", c->size,
			k->slots, k->chunk, c->cfg.enable_fp16_compress ?
			"from " : "off; would be from ",
			(unsigned long long)c->cfg.comp_threshold);
	return 0;
fail:
	if (k->mem)
		munmap(k->mem, k->len);
	free(k->sreq);
	free(k->creq);
	free(k->sid);
	free(k->rx0);
	free(k);
	return ret;
}

/* After hcomm_comm_destroy freed the windows: the staging memory. */
void hcomm__coll_free(struct hcomm_comm *c)
{
	struct hcomm_coll *k = c->coll;

	if (!k)
		return;
	munmap(k->mem, k->len);
	free(k->sreq);
	free(k->creq);
	free(k->sid);
	free(k->rx0);
	free(k);
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
	size_t off, len;
	int ret;

	msg_span(p, m, 0, &off, &len);
	ret = ring_put(k, &k->sreq[slot], right, (uint64_t)slot * k->chunk,
		       len ? p->buf + off * p->es : NULL, len * p->es,
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
		ret = hcomm__reduce(p->dt, p->op, dst, data, len);
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
	if (m < p->rs_msgs) {
		ret = hcomm__reduce(p->dt, p->op, dst, data, len);
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
	uint64_t ms = 0, mr = 0, tx0 = k->tx, want;
	uint64_t last = hcomm__now_ns(), cred;
	unsigned int rs;
	int64_t tmo = hcomm__boot_timeout(c->boot);	/* ms, < 0: none */
	char what[160];
	unsigned int i;
	int ret = 0, moved;

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
		if (mr < p->nrecv) {
			rs = (unsigned int)(k->rx % k->slots);
			want = k->rx0[rs] + k->rx / k->slots + 1;
			(void)hcomm_signal_wait(c, k->sig_data + rs, want,
						COLL_POLL_MS);
		} else {
			want = k->cred0 + k->tx + 1 - k->slots;
			(void)hcomm_signal_wait(c, k->sig_cred, want,
						COLL_POLL_MS);
		}
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
	uint16_t *wire = malloc(count * sizeof(*wire));
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
	free(wire);
	if (ovf && k->log)
		fprintf(stderr, "hcomm coll: rank %d: fp16-compressed "
			"allreduce of %zu floats: %zu values beyond fp16's "
			"range became +-inf\n", c->rank, count, ovf);
	return ret;
}

HCOMM_EXPORT int hcomm_allreduce(struct hcomm_comm *c, const void *send,
				 void *recv, size_t count, enum hcomm_dtype dt,
				 enum hcomm_redop op)
{
	struct hcomm_coll *k;
	struct plan p;
	int ret = check_args(c, "hcomm_allreduce", dt, op ? (int)op : -1, 0,
			     send, recv, count);

	if (ret)
		return ret;
	ret = coll_get(c, &k);
	if (ret)
		return ret;
	if (c->size > 1 && dt == HCOMM_FP32 &&
	    (op == HCOMM_SUM || op == HCOMM_AVG) &&
	    c->cfg.enable_fp16_compress &&
	    count * sizeof(float) >= c->cfg.comp_threshold)
		return allreduce_fp16(c, k, send, recv, count, op);
	if (send != recv && count)
		memmove(recv, send, count * hcomm_dtype_size(dt));
	if (c->size == 1 || !count)
		return 0;
	plan_init(&p, c, k, K_ALLREDUCE, dt, op, recv, count);
	ring_plan(&p);
	return ring_run(c, k, &p);
}

HCOMM_EXPORT int hcomm_reduce_scatter(struct hcomm_comm *c, const void *send,
				      void *recv, size_t recvcount,
				      enum hcomm_dtype dt, enum hcomm_redop op)
{
	struct hcomm_coll *k;
	struct plan p;
	size_t es = hcomm_dtype_size(dt);
	char *acc;
	int ret = check_args(c, "hcomm_reduce_scatter", dt, op ? (int)op : -1,
			     0, send, recv, recvcount);

	if (ret)
		return ret;
	ret = coll_get(c, &k);
	if (ret)
		return ret;
	if (!recvcount)
		return 0;
	if (c->size == 1) {
		memmove(recv, send, recvcount * es);
		return 0;
	}
	acc = malloc(recvcount * es * (size_t)c->size);
	if (!acc)
		return coll_nomem(k, "hcomm_reduce_scatter",
				  recvcount * es * (size_t)c->size);
	memcpy(acc, send, recvcount * es * (size_t)c->size);
	plan_init(&p, c, k, K_REDUCE_SCATTER, dt, op, acc,
		  recvcount * (size_t)c->size);
	p.nch = (recvcount + p.ce - 1) / p.ce;
	p.rs_msgs = (uint64_t)(p.n - 1) * p.nch;
	p.nsend = p.nrecv = p.rs_msgs;
	ret = ring_run(c, k, &p);
	if (!ret)
		memmove(recv, acc + (size_t)c->rank * recvcount * es,
			recvcount * es);
	free(acc);
	return ret;
}

HCOMM_EXPORT int hcomm_broadcast(struct hcomm_comm *c, void *buf,
				 size_t count, enum hcomm_dtype dt, int root)
{
	struct hcomm_coll *k;
	struct plan p;
	int ret = check_args(c, "hcomm_broadcast", dt, 0, root, buf, buf,
			     count);

	if (ret)
		return ret;
	ret = coll_get(c, &k);
	if (ret || c->size == 1 || !count)
		return ret;
	plan_init(&p, c, k, K_BCAST, dt, 0, buf, count);
	p.pos = mod(c->rank - root, c->size);
	p.nch = (count + p.ce - 1) / p.ce;
	p.nsend = p.pos == p.n - 1 ? 0 : p.nch;
	p.nrecv = p.pos == 0 ? 0 : p.nch;
	return ring_run(c, k, &p);
}

HCOMM_EXPORT int hcomm_reduce(struct hcomm_comm *c, const void *send,
			      void *recv, size_t count, enum hcomm_dtype dt,
			      enum hcomm_redop op, int root)
{
	struct hcomm_coll *k;
	struct plan p;
	size_t es = hcomm_dtype_size(dt);
	char *acc;
	int ret, me_root;

	ret = check_args(c, "hcomm_reduce", dt, op ? (int)op : -1, root, send,
			 c && c->rank == root ? recv : send, count);
	if (ret)
		return ret;
	me_root = c->rank == root;
	ret = coll_get(c, &k);
	if (ret || !count)
		return ret;
	if (c->size == 1) {
		memmove(recv, send, count * es);
		return 0;
	}
	acc = me_root ? recv : malloc(count * es);
	if (!acc)
		return coll_nomem(k, "hcomm_reduce", count * es);
	if (acc != send)
		memmove(acc, send, count * es);
	plan_init(&p, c, k, K_REDUCE, dt, op, acc, count);
	p.pos = mod(c->rank - root - 1, c->size);
	p.nch = (count + p.ce - 1) / p.ce;
	p.nsend = p.pos == p.n - 1 ? 0 : p.nch;
	p.nrecv = p.pos == 0 ? 0 : p.nch;
	ret = ring_run(c, k, &p);
	if (!me_root)
		free(acc);
	return ret;
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
