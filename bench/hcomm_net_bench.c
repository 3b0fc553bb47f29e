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
 */
#define _GNU_SOURCE
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

int main(int argc, char **argv)
{
	uint64_t min = 0, max = 64ULL << 20, budget = 64ULL << 20, len, n;
	unsigned int rtts = 200, i;
	struct hcomm_comm *comm;
	struct hcomm_win *w;
	double *rtt, best, t;
	char *src, *win;
	int ret, me, k, b;

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
		else {
			fprintf(stderr, "usage: hcomm_net_bench [--min BYTES] "
				"[--max BYTES] [--budget BYTES] [--depth N] "
				"[--rtts N]\n");
			return 2;
		}
	}
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
	ret = hcomm_barrier(comm);
	if (ret)
		return die("barrier", ret);
	hcomm_win_free(w);
	hcomm_comm_destroy(comm);
	free(src);
	free(win);
	free(rtt);
	return 0;
}
