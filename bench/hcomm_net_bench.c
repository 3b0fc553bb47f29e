// SPDX-License-Identifier: MIT
/*
 * hcomm_net_bench: libhcomm between two ranks (usually on two hosts), put
 * bandwidth by size and the 8-byte latency, over whatever transport the
 * communicator uses (HCOMM_TRANSPORT=rdma|tcp forces one).  Rank 0 puts
 * into rank 1's window; rank 1 only answers the latency pings.
 *
 *   HCOMM_RANK=r HCOMM_WORLD_SIZE=2 HCOMM_ROOT_ADDR=host:port \
 *       hcomm_net_bench [--min BYTES] [--max BYTES] [--budget BYTES]
 *                       [--depth N] [--rtts N]
 *
 * Prints, on rank 0, one line per size "put SIZE MBps DEPTH" (10^6 bytes
 * per second, the best of 3 rounds, each moving about --budget bytes
 * (64 MiB; 1 to 500 puts) with DEPTH puts in flight: depth_of()),
 * "lat8 US" (half the
 * median round trip of an 8-byte put_signal_nb answered by one, each
 * request waited for after the answer) and "lat8b US" (the same with
 * blocking hcomm_put_signal(), which returns at the RC ack).  Rank 1 waits in a barrier meanwhile,
 * with the collective timeout raised to 10 minutes: at 64 MiB over rxe a
 * round alone takes seconds, and a rank that left the barrier after the
 * default 30 s would free the window under rank 0's writes (they then
 * fail with a remote access error).  scripts/net-bench-guest.sh runs it beside ib_write_bw,
 * ib_write_lat and iperf3 and prints the ratios.
 *
 * --failover N --cut CMD --restore CMD: instead, the RoCE -> TCP
 * failover (a communicator with rdma and tcp): rank 0 streams 64 KiB
 * puts and N times runs CMD to cut its RoCE link and, once failed over,
 * the restore command; it prints per cut "failover cut K stall_ms S
 * longest_wait_ms G back_ms B", their medians and maxima, "failover
 * spurious S" (failovers that no cut caused: a keep-alive that fires on a
 * live link; the next cut waits until the link is back on rdma; each
 * cut's figures are of the first events after it) and "failover MBps
 * rdma_before X tcp Y rdma_after Z" (scripts/failover-bench-guest.sh).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <hcomm.h>

#define DEPTH_MAX	1024
/*
 * Puts in flight: --depth, or by default 16, or as many as make 4 MiB
 * (what a TCP stream such as iperf3 keeps in its socket buffer), at most
 * 256.  scripts/net-bench-guest.sh gives ib_write_bw the same -t.
 */
#define WINDOW		(4u << 20)
static unsigned int depth_fixed;

static unsigned int depth_of(uint64_t len)
{
	uint64_t d = WINDOW / len;

	if (depth_fixed)
		return depth_fixed;
	return d < 16 ? 16 : d > 256 ? 256 : (unsigned int)d;
}

/* the seed's 256 KiB row among them */
static const uint64_t sizes[] = {
	8, 64, 512, 4 << 10, 32 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20,
	16 << 20, 64 << 20,
};
#define SIG_PING 1
#define SIG_PONG 2

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int die(const char *what, int ret)
{
	fprintf(stderr, "hcomm_net_bench: %s: %s (%s)\n", what,
		hcomm_strerror(ret), hcomm_errmsg());
	return 1;
}

/*
 * rtts 8-byte ping-pongs (signals counted from base); rank 0 stores each
 * round trip in rtt[].  blocking: hcomm_put_signal(), else _nb and the
 * request waited for after the answer.  0 or a negated hcomm_err.
 */
static int pingpong(struct hcomm_comm *comm, struct hcomm_win *w,
		    const char *src, double *rtt, int rtts, int me,
		    int blocking, uint64_t base)
{
	struct hcomm_request req;
	uint32_t mine = me ? SIG_PONG : SIG_PING;
	uint32_t theirs = me ? SIG_PING : SIG_PONG;
	int i, ret = 0, peer = !me;
	double t;

	memset(&req, 0, sizeof(req));
	for (i = 0; i < rtts && !ret; i++) {
		t = now_s();
		if (me && hcomm_signal_wait(comm, theirs, base + i + 1,
					    30000) < 0)
			return -hcomm_errno();
		/* rank 1: its previous answer's request, done by now */
		if (me && i && !blocking && (ret = hcomm_wait(&req)))
			return ret;
		if (blocking) {
			ret = hcomm_put_signal(w, peer, 0, src, 8, mine, 1);
		} else {
			memset(&req, 0, sizeof(req));
			ret = hcomm_put_signal_nb(w, peer, 0, src, 8, mine, 1,
						  &req);
		}
		if (ret)
			return ret;
		if (!me && hcomm_signal_wait(comm, theirs, base + i + 1,
					     30000) < 0)
			return -hcomm_errno();
		if (!me && !blocking)
			ret = hcomm_wait(&req);
		if (!me)
			rtt[i] = now_s() - t;
	}
	if (me && rtts && !blocking && !ret)
		ret = hcomm_wait(&req);
	return ret;
}

/* n puts of len bytes, depth in flight; seconds, or < 0. */
static double put_round(struct hcomm_win *w, const char *src, uint64_t len,
			uint64_t n)
{
	unsigned int depth = depth_of(len);
	static struct hcomm_request req[DEPTH_MAX];
	uint64_t i;
	double t0 = now_s();

	memset(req, 0, sizeof(req));
	for (i = 0; i < n; i++) {
		struct hcomm_request *r = &req[i % depth];

		if (i >= depth && hcomm_wait(r))
			return -1;
		memset(r, 0, sizeof(*r));
		if (hcomm_put_nb(w, 1, 0, src, len, r))
			return -1;
	}
	for (i = n > depth ? n - depth : 0; i < n; i++)
		if (hcomm_wait(&req[i % depth]))
			return -1;
	return now_s() - t0;
}

/* ------------------------------------------------------------------ */
/* --failover N: stall, bandwidth and time back to rdma per link cut   */
/* ------------------------------------------------------------------ */

#define FO_LEN		(64u << 10)
#define FO_DEPTH	16

/* The link events, counted by type (event thread; read with atomics). */
static struct {
	pthread_mutex_t lock;
	int n[5];
	uint64_t t[5][64];
	uint64_t silent[5][64];
} fo_ev = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void fo_event(struct hcomm_comm *c, const struct hcomm_event *ev,
		     void *arg)
{
	(void)c;
	(void)arg;
	if (ev->type >= 5)
		return;
	pthread_mutex_lock(&fo_ev.lock);
	if (fo_ev.n[ev->type] < 64) {
		fo_ev.t[ev->type][fo_ev.n[ev->type]] = ev->time_ns;
		fo_ev.silent[ev->type][fo_ev.n[ev->type]] = ev->silent_ns;
	}
	fo_ev.n[ev->type]++;
	pthread_mutex_unlock(&fo_ev.lock);
}

static int fo_count(int type)
{
	int n;

	pthread_mutex_lock(&fo_ev.lock);
	n = fo_ev.n[type];
	pthread_mutex_unlock(&fo_ev.lock);
	return n;
}

static uint64_t ns_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* A command run on a thread of its own (the stream goes on meanwhile). */
struct fo_cmd {
	pthread_t thr;
	const char *cmd;
	int rc;
	int done;
};

static void *fo_cmd_main(void *arg)
{
	struct fo_cmd *k = arg;

	k->rc = system(k->cmd);
	__atomic_store_n(&k->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static int fo_cmd_start(struct fo_cmd *k, const char *cmd)
{
	k->cmd = cmd;
	k->rc = 0;
	k->done = 0;
	return pthread_create(&k->thr, NULL, fo_cmd_main, k);
}

/* Joined: the command's status (0: it ran and exited 0). */
static int fo_cmd_join(struct fo_cmd *k)
{
	pthread_join(k->thr, NULL);
	return k->rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Rank 0 streams FO_LEN-byte puts (FO_DEPTH in flight) into rank 1 and,
 * cuts times: after 2 s runs cut_cmd (its RoCE link dies), streams 2 s
 * past FAILED_OVER, runs restore_cmd, streams 2 s past RECOVERED.  Per
 * cut: the stall (FAILED_OVER's silent_ns: the link's last progress to
 * the switch), the longest wait for one completion, the time from the
 * restore to RECOVERED; bandwidth on rdma before the cuts, on tcp and on
 * rdma again after (bytes completed over the time in each state).  Rank
 * 1 waits in a barrier (its ends of the failovers run on their own).
 * Returns 0, 1 when a cut did not fail over or come back.
 */
static int failover_bench(struct hcomm_comm *comm, struct hcomm_win *w,
			  const char *src, int me, int cuts,
			  const char *cut_cmd, const char *restore_cmd)
{
	static struct hcomm_request req[FO_DEPTH];
	uint64_t t_state, t_last, gap[64] = { 0 }, dur[3] = { 0 };
	uint64_t bytes[3] = { 0 }, back[64] = { 0 }, stall[64], t_restore = 0;
	uint64_t n, t_next, sorted[64];
	struct fo_cmd cmd;
	int state = 0, cut = 0, step = 0, ret, j, k, running = 0;
	int fo_base = 0, rec_base = 0, nfo;

	if (me) {
		ret = hcomm_boot_barrier(comm);
		return ret ? die("barrier", ret) : 0;
	}
	if (cuts < 1 || cuts > 64)
		return 2;
	memset(req, 0, sizeof(req));
	t_state = t_last = ns_now();
	t_next = t_state + 2000000000ULL;
	/* step: 0 streaming before the cut, 1 cut (waiting for the switch),
	 * 2 on tcp, 3 restored (waiting to be back), 4 back on rdma */
	for (n = 0;; n++) {
		struct hcomm_request *r = &req[n % FO_DEPTH];
		uint64_t t;

		if (n >= FO_DEPTH) {
			ret = hcomm_wait(r);
			if (ret)
				return die("put during the failover", ret);
			t = ns_now();
			if (step >= 1 && step <= 3 && t - t_last > gap[cut])
				gap[cut] = t - t_last;
			t_last = t;
			bytes[state] += FO_LEN;
		}
		t = ns_now();
		if (running && __atomic_load_n(&cmd.done, __ATOMIC_ACQUIRE)) {
			running = 0;
			if (fo_cmd_join(&cmd))
				return die(step <= 2 ? "the cut command" :
					   "the restore command",
					   -HCOMM_ERR_IO);
		}
		if (step == 0 && t >= t_next &&
		    fo_count(HCOMM_EVENT_FAILED_OVER) >
		    fo_count(HCOMM_EVENT_RECOVERED)) {
			/* a failover no cut caused: cut once back on rdma */
			t_next = t + 100000000ULL;
		} else if (step == 0 && t >= t_next) {
			fprintf(stderr, "hcomm_net_bench: cut %d: %s\n",
				cut + 1, cut_cmd);
			/* this cut's events are the first ones after these */
			fo_base = fo_count(HCOMM_EVENT_FAILED_OVER);
			if (fo_cmd_start(&cmd, cut_cmd))
				return die("pthread_create", -HCOMM_ERR_LIMIT);
			running = 1;
			step = 1;
			t_next = t + 30000000000ULL;
		} else if (step == 1 &&
			   fo_count(HCOMM_EVENT_FAILED_OVER) > fo_base) {
			pthread_mutex_lock(&fo_ev.lock);
			stall[cut] = fo_base < 64 ?
				fo_ev.silent[HCOMM_EVENT_FAILED_OVER][fo_base] :
				0;
			pthread_mutex_unlock(&fo_ev.lock);
			dur[state] += t - t_state;
			t_state = t;
			state = 1;
			step = 2;
			t_next = t + 2000000000ULL;
		} else if (step == 2 && t >= t_next && !running) {
			t_restore = ns_now();
			rec_base = fo_count(HCOMM_EVENT_RECOVERED);
			if (fo_cmd_start(&cmd, restore_cmd))
				return die("pthread_create", -HCOMM_ERR_LIMIT);
			running = 1;
			step = 3;
			t_next = t + 60000000000ULL;
		} else if (step == 3 &&
			   fo_count(HCOMM_EVENT_RECOVERED) > rec_base) {
			pthread_mutex_lock(&fo_ev.lock);
			back[cut] = rec_base < 64 ?
				fo_ev.t[HCOMM_EVENT_RECOVERED][rec_base] -
				t_restore : 0;
			pthread_mutex_unlock(&fo_ev.lock);
			dur[state] += t - t_state;
			t_state = t;
			state = 2;
			step = 4;
			t_next = t + 2000000000ULL;
		} else if (step == 4 && t >= t_next && !running) {
			if (++cut == cuts)
				break;
			step = 0;
			t_next = t;
		} else if ((step == 1 || step == 3) && t >= t_next) {
			fprintf(stderr, "hcomm_net_bench: cut %d: no %s in "
				"time\n", cut + 1, step == 1 ? "failover" :
				"recovery");
			return 1;
		}
		memset(r, 0, sizeof(*r));
		ret = hcomm_put_nb(w, 1, 0, src, FO_LEN, r);
		if (ret)
			return die("put_nb during the failover", ret);
	}
	dur[state] += ns_now() - t_state;
	if (running && fo_cmd_join(&cmd))
		return die("the restore command", -HCOMM_ERR_IO);
	for (j = 0; j < FO_DEPTH; j++)
		if (hcomm_wait(&req[j]))
			return die("put", -hcomm_errno());
	nfo = fo_count(HCOMM_EVENT_FAILED_OVER);
	for (k = 0; k < cuts; k++)
		printf("failover cut %d stall_ms %.1f longest_wait_ms %.1f "
		       "back_ms %.1f\n", k + 1, stall[k] / 1e6, gap[k] / 1e6,
		       back[k] / 1e6);
	memcpy(sorted, stall, sizeof(stall[0]) * cuts);
	qsort(sorted, cuts, sizeof(sorted[0]), cmp_u64);
	printf("failover stall_ms median %.1f max %.1f (%d cuts)\n",
	       sorted[cuts / 2] / 1e6, sorted[cuts - 1] / 1e6, cuts);
	memcpy(sorted, gap, sizeof(gap[0]) * cuts);
	qsort(sorted, cuts, sizeof(sorted[0]), cmp_u64);
	printf("failover longest_wait_ms median %.1f max %.1f\n",
	       sorted[cuts / 2] / 1e6, sorted[cuts - 1] / 1e6);
	memcpy(sorted, back, sizeof(back[0]) * cuts);
	qsort(sorted, cuts, sizeof(sorted[0]), cmp_u64);
	printf("failover back_ms median %.1f max %.1f\n",
	       sorted[cuts / 2] / 1e6, sorted[cuts - 1] / 1e6);
	/* a detector that fires on a live link reads here */
	printf("failover spurious %d (failovers no cut caused, of %d)\n",
	       nfo - cuts, nfo);
	printf("failover MBps rdma_before %.2f tcp %.2f rdma_after %.2f\n",
	       dur[0] ? bytes[0] * 1e3 / dur[0] : 0,
	       dur[1] ? bytes[1] * 1e3 / dur[1] : 0,
	       dur[2] ? bytes[2] * 1e3 / dur[2] : 0);
	fflush(stdout);
	ret = hcomm_boot_barrier(comm);
	return ret ? die("barrier", ret) : 0;
}

int main(int argc, char **argv)
{
	uint64_t min = 0, max = 64ULL << 20, budget = 64ULL << 20, len, n;
	unsigned int rtts = 200, i;
	struct hcomm_comm *comm;
	struct hcomm_win *w;
	double *rtt, best, t;
	char *src, *win;
	int ret, me, k, b, cuts = 0;
	const char *cut_cmd = NULL, *restore_cmd = NULL;

	for (k = 1; k < argc; k++) {
		if (!strcmp(argv[k], "--min") && k + 1 < argc)
			min = strtoull(argv[++k], NULL, 0);
		else if (!strcmp(argv[k], "--max") && k + 1 < argc)
			max = strtoull(argv[++k], NULL, 0);
		else if (!strcmp(argv[k], "--budget") && k + 1 < argc)
			budget = strtoull(argv[++k], NULL, 0);
		else if (!strcmp(argv[k], "--depth") && k + 1 < argc)
			depth_fixed = (unsigned int)strtoul(argv[++k], NULL,
							    0);
		else if (!strcmp(argv[k], "--rtts") && k + 1 < argc)
			rtts = (unsigned int)strtoul(argv[++k], NULL, 0);
		else if (!strcmp(argv[k], "--failover") && k + 1 < argc)
			cuts = atoi(argv[++k]);
		else if (!strcmp(argv[k], "--cut") && k + 1 < argc)
			cut_cmd = argv[++k];
		else if (!strcmp(argv[k], "--restore") && k + 1 < argc)
			restore_cmd = argv[++k];
		else {
			fprintf(stderr, "usage: hcomm_net_bench [--min BYTES] "
				"[--max BYTES] [--budget BYTES] [--depth N] "
				"[--rtts N] [--failover CUTS --cut CMD "
				"--restore CMD]\n");
			return 2;
		}
	}
	if (cuts && (!cut_cmd || !restore_cmd || cuts > 64)) {
		fprintf(stderr, "hcomm_net_bench: --failover needs 1 .. 64 "
			"cuts, --cut and --restore\n");
		return 2;
	}
	if (cuts)
		max = FO_LEN;
	if (!rtts || max < 8 || !budget || depth_fixed > DEPTH_MAX)
		return 2;
	ret = hcomm_comm_init(&comm, NULL);
	if (ret)
		return die("hcomm_comm_init", ret);
	me = hcomm_comm_rank(comm);
	if (hcomm_comm_size(comm) != 2) {
		fprintf(stderr, "hcomm_net_bench: needs 2 ranks\n");
		return 2;
	}
	src = malloc(max);
	win = calloc(1, max);
	rtt = calloc(rtts, sizeof(*rtt));
	if (!src || !win || !rtt)
		return 2;
	memset(src, 0x5a, max);
	ret = hcomm_win_create(comm, win, max, &w);
	if (ret)
		return die("hcomm_win_create", ret);
	if (!me) {
		printf("transport %s\n", hcomm_comm_transport(comm));
		hcomm_comm_print_peers(comm, stdout, 0);
	}
	if (cuts) {
		ret = hcomm_comm_set_event_cb(comm, fo_event, NULL);
		if (!ret)
			ret = hcomm_comm_set_coll_timeout(comm, 600000);
		if (ret)
			return die("failover set-up", ret);
		ret = failover_bench(comm, w, src, me, cuts, cut_cmd,
				     restore_cmd);
		hcomm_win_free(w);
		hcomm_comm_destroy(comm);
		free(src);
		free(win);
		free(rtt);
		return ret;
	}

	/*
	 * Latency: rank 0 pings, rank 1 answers, twice.  "lat8": each side
	 * issues its put_signal non-blocking, waits for the other's signal
	 * and only then for its own request (like ib_write_lat, which polls
	 * for the peer's write, not for its own completion first).
	 * "lat8b": blocking hcomm_put_signal() (it returns at the RC ack),
	 * then the wait.
	 */
	for (b = 0; b < 2; b++) {
		ret = pingpong(comm, w, src, rtt, (int)rtts, me, b,
			       (uint64_t)b * rtts);
		if (ret)
			return die("ping", ret);
		if (!me) {
			qsort(rtt, rtts, sizeof(*rtt), cmp_d);
			printf("%s %.1f\n", b ? "lat8b" : "lat8",
			       rtt[rtts / 2] / 2 * 1e6);
		}
	}

	/* bandwidth: rank 0 puts, rank 1 waits in the barrier */
	ret = hcomm_comm_set_coll_timeout(comm, 600000);
	if (ret)
		return die("hcomm_comm_set_coll_timeout", ret);
	for (i = 0; !me && i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		len = sizes[i];
		if (len > max)
			break;
		if (len < min)
			continue;
		n = budget / len;
		if (n < 1)
			n = 1;
		if (n > 500)
			n = 500;
		best = 0;
		for (k = 0; k < 3; k++) {
			t = put_round(w, src, len, n);
			if (t < 0)
				return die("put", -hcomm_errno());
			if (!best || t < best)
				best = t;
		}
		printf("put %llu %.2f %u\n", (unsigned long long)len,
		       (double)len * n / best / 1e6, depth_of(len));
		fflush(stdout);
	}
	ret = hcomm_boot_barrier(comm);
	if (ret)
		return die("barrier", ret);
	hcomm_win_free(w);
	hcomm_comm_destroy(comm);
	free(src);
	free(win);
	free(rtt);
	return 0;
}
