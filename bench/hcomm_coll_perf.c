/* SPDX-License-Identifier: MIT */
/*
 * hcomm_coll_perf: libhcomm's collectives against Open MPI's in the same
 * processes, in the manner of nccl-tests' all_reduce_perf.
 *
 *   mpirun -np N hcomm_coll_perf [-t allreduce|reduce_scatter|broadcast|
 *       reduce|allgather|alltoall|barrier] [-b 8] [-e 64M] [-f 2] [-o sum]
 *       [-d float] [-n iters] [-w warmup] [-c 0|1] [-r root] [-z 0|1]
 *       [-N inflight]
 *
 * Each rank is one MPI process and one libhcomm rank (hcomm_comm_init
 * reads Open MPI's OMPI_COMM_WORLD_* variables).  For every size from -b
 * to -e (bytes, times -f each step) it times -n iterations (after -w
 * untimed ones) of the libhcomm collective, then the same of the MPI one
 * on the same buffers, and prints per size: bytes, count, type, op, the
 * time of one iteration (us, the slowest rank's average), algbw and busbw
 * (GB/s, nccl-tests' definitions: algbw = bytes / time; busbw = algbw *
 * 2 (n - 1) / n for allreduce, (n - 1) / n for reduce_scatter, allgather
 * and alltoall, 1 for broadcast and reduce; the size is the whole buffer:
 * reduce_scatter's send, allgather's receive, alltoall's send) and #wrong for each, and busbw(hcomm) /
 * busbw(MPI).  With -c 1 (the default) each library's result of the last
 * iteration is checked element by element against the exact value (the
 * data are small integers, so every sum is exact); #wrong counts the
 * elements that differ on any rank.  -z 1 (float sum allreduce) also times
 * libhcomm's fp16-compressed allreduce (hcomm_comm_set_fp16_compress
 * from 0 bytes) and prints its time and the share of the uncompressed
 * time it saves (its results are checked against the exact sum within
 * the documented bound, (n + 1) * 2^-11 of the sum of |x|).  Without
 * mpirun (no OMPI_COMM_WORLD_SIZE) it runs libhcomm alone, ranks from
 * HCOMM_RANK and friends.
 *
 * -N k (1 to 16) times the non-blocking forms instead: each iteration
 * issues k collectives on k pairs of buffers (hcomm's _nb calls, MPI's
 * MPI_I* ones) and waits for all of them; the time printed is per
 * collective, so it shows what queueing them gains or costs against
 * -N 0 (the blocking calls, the default).  Every pair is checked.
 * -t barrier times the barrier alone (one row, size 0).
 *
 * Exit status 0 when nothing was wrong, 1 otherwise, 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hcomm.h"

#ifdef HAVE_MPI
#include <mpi.h>
#endif

enum { C_ALLREDUCE, C_REDUCE_SCATTER, C_BCAST, C_REDUCE, C_ALLGATHER,
       C_ALLTOALL, C_BARRIER, C__MAX };
static const char *const cnames[] = {
	"allreduce", "reduce_scatter", "broadcast", "reduce", "allgather",
	"alltoall", "barrier",
};

static struct hcomm_comm *comm;
static int me, np, use_mpi;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	switch (*end) {
	case 'G': case 'g': v <<= 10; /* fall through */
	case 'M': case 'm': v <<= 10; /* fall through */
	case 'K': case 'k': v <<= 10; break;
	default: break;
	}
	return (size_t)v;
}

struct dtype {
	const char *name;
	enum hcomm_dtype dt;
#ifdef HAVE_MPI
	MPI_Datatype mt;
#endif
};

static const struct dtype dtypes[] = {
#ifdef HAVE_MPI
	{ "float", HCOMM_FP32, MPI_FLOAT },
	{ "double", HCOMM_FP64, MPI_DOUBLE },
	{ "int32", HCOMM_INT32, MPI_INT32_T },
	{ "int64", HCOMM_INT64, MPI_INT64_T },
	{ "uint8", HCOMM_UINT8, MPI_UINT8_T },
#else
	{ "float", HCOMM_FP32 },
	{ "double", HCOMM_FP64 },
	{ "int32", HCOMM_INT32 },
	{ "int64", HCOMM_INT64 },
	{ "uint8", HCOMM_UINT8 },
#endif
};

struct redop {
	const char *name;
	enum hcomm_redop op;
#ifdef HAVE_MPI
	MPI_Op mo;
#endif
};

static const struct redop redops[] = {
#ifdef HAVE_MPI
	{ "sum", HCOMM_SUM, MPI_SUM },
	{ "max", HCOMM_MAX, MPI_MAX },
	{ "min", HCOMM_MIN, MPI_MIN },
#else
	{ "sum", HCOMM_SUM },
	{ "max", HCOMM_MAX },
	{ "min", HCOMM_MIN },
#endif
};

/* Rank r's element i: small integers, exact in every type when summed. */
static int64_t val(int r, size_t i)
{
	return (int64_t)((i * 7 + (size_t)r * 3) % 13) + r;
}

static void put_val(enum hcomm_dtype dt, void *b, size_t i, int64_t v)
{
	switch (dt) {
	case HCOMM_FP32: ((float *)b)[i] = (float)v; break;
	case HCOMM_FP64: ((double *)b)[i] = (double)v; break;
	case HCOMM_INT32: ((int32_t *)b)[i] = (int32_t)v; break;
	case HCOMM_INT64: ((int64_t *)b)[i] = v; break;
	default: ((uint8_t *)b)[i] = (uint8_t)v; break;
	}
}

static void fill(enum hcomm_dtype dt, void *b, size_t count, int r)
{
	size_t i;

	for (i = 0; i < count; i++)
		put_val(dt, b, i, val(r, i));
}

/* The exact result of op over the ranks for element i. */
static int64_t want(enum hcomm_redop op, size_t i, int bcast_root)
{
	int64_t v = val(bcast_root >= 0 ? bcast_root : 0, i), x;
	int r;

	if (bcast_root >= 0)
		return v;
	for (r = 1; r < np; r++) {
		x = val(r, i);
		if (op == HCOMM_SUM)
			v += x;
		else if (op == HCOMM_MAX)
			v = x > v ? x : v;
		else
			v = x < v ? x : v;
	}
	return v;
}

/* Elements of b[0 .. count) (global index from first) that are wrong. */
static uint64_t wrong(enum hcomm_dtype dt, enum hcomm_redop op,
		      const void *b, size_t first, size_t count,
		      int bcast_root)
{
	char w[8];
	size_t i, es = hcomm_dtype_size(dt);
	uint64_t bad = 0;

	for (i = 0; i < count; i++) {
		put_val(dt, w, 0, want(op, first + i, bcast_root));
		bad += memcmp((const char *)b + i * es, w, es) != 0;
	}
	return bad;
}

/*
 * Allgather (rank r's block: its elements 0 .. rcount) or alltoall
 * (block s from rank s: its elements me * rcount ..): the wrong ones.
 */
static uint64_t wrong_blocks(enum hcomm_dtype dt, const void *b,
			     size_t rcount, int a2a)
{
	size_t i, es = hcomm_dtype_size(dt);
	uint64_t bad = 0;
	char w[8];
	int r;

	for (r = 0; r < np; r++)
		for (i = 0; i < rcount; i++) {
			put_val(dt, w, 0, val(r, (a2a ? (size_t)me * rcount :
						  0) + i));
			bad += memcmp((const char *)b + ((size_t)r * rcount +
							 i) * es, w, es) != 0;
		}
	return bad;
}

/* The slowest rank's value (hcomm: an allreduce of its own). */
static double max_all(double v)
{
	double out = v;

#ifdef HAVE_MPI
	if (use_mpi) {
		MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		return out;
	}
#endif
	if (hcomm_allreduce(comm, &v, &out, 1, HCOMM_FP64, HCOMM_MAX))
		return -1;
	return out;
}

static uint64_t sum_all(uint64_t v)
{
	uint64_t out = v;

#ifdef HAVE_MPI
	if (use_mpi) {
		MPI_Allreduce(&v, &out, 1, MPI_UINT64_T, MPI_SUM,
			      MPI_COMM_WORLD);
		return out;
	}
#endif
	if (hcomm_allreduce(comm, &v, &out, 1, HCOMM_UINT64, HCOMM_SUM))
		return UINT64_MAX;
	return out;
}

/* One collective of library lib (0 hcomm, 1 MPI). */
static int run1(int lib, int coll, const struct dtype *d,
		const struct redop *o, void *s, void *r, size_t count,
		int root)
{
#ifdef HAVE_MPI
	if (lib) {
		switch (coll) {
		case C_ALLREDUCE:
			return MPI_Allreduce(s, r, (int)count, d->mt, o->mo,
					     MPI_COMM_WORLD);
		case C_REDUCE_SCATTER:
			return MPI_Reduce_scatter_block(s, r, (int)count,
							d->mt, o->mo,
							MPI_COMM_WORLD);
		case C_BCAST:
			return MPI_Bcast(r, (int)count, d->mt, root,
					 MPI_COMM_WORLD);
		case C_ALLGATHER:
			return MPI_Allgather(s, (int)count, d->mt, r,
					     (int)count, d->mt,
					     MPI_COMM_WORLD);
		case C_ALLTOALL:
			return MPI_Alltoall(s, (int)count, d->mt, r,
					    (int)count, d->mt, MPI_COMM_WORLD);
		case C_BARRIER:
			return MPI_Barrier(MPI_COMM_WORLD);
		default:
			return MPI_Reduce(s, r, (int)count, d->mt, o->mo,
					  root, MPI_COMM_WORLD);
		}
	}
#endif
	(void)lib;
	switch (coll) {
	case C_ALLREDUCE:
		return hcomm_allreduce(comm, s, r, count, d->dt, o->op);
	case C_REDUCE_SCATTER:
		return hcomm_reduce_scatter(comm, s, r, count, d->dt, o->op);
	case C_BCAST:
		return hcomm_broadcast(comm, r, count, d->dt, root);
	case C_ALLGATHER:
		return hcomm_allgather(comm, s, r,
				       count * hcomm_dtype_size(d->dt));
	case C_ALLTOALL:
		return hcomm_alltoall(comm, s, r, count, d->dt);
	case C_BARRIER:
		return hcomm_barrier(comm);
	default:
		return hcomm_reduce(comm, s, r, count, d->dt, o->op, root);
	}
}

/* run1's non-blocking form: hq for hcomm, mq (an MPI_Request) for MPI. */
static int start1(int lib, int coll, const struct dtype *d,
		  const struct redop *o, void *s, void *r, size_t count,
		  int root, struct hcomm_request *hq, void *mq)
{
#ifdef HAVE_MPI
	MPI_Request *q = mq;

	if (lib) {
		switch (coll) {
		case C_ALLREDUCE:
			return MPI_Iallreduce(s, r, (int)count, d->mt, o->mo,
					      MPI_COMM_WORLD, q);
		case C_REDUCE_SCATTER:
			return MPI_Ireduce_scatter_block(s, r, (int)count,
							 d->mt, o->mo,
							 MPI_COMM_WORLD, q);
		case C_BCAST:
			return MPI_Ibcast(r, (int)count, d->mt, root,
					  MPI_COMM_WORLD, q);
		case C_ALLGATHER:
			return MPI_Iallgather(s, (int)count, d->mt, r,
					      (int)count, d->mt,
					      MPI_COMM_WORLD, q);
		case C_ALLTOALL:
			return MPI_Ialltoall(s, (int)count, d->mt, r,
					     (int)count, d->mt, MPI_COMM_WORLD,
					     q);
		case C_BARRIER:
			return MPI_Ibarrier(MPI_COMM_WORLD, q);
		default:
			return MPI_Ireduce(s, r, (int)count, d->mt, o->mo,
					   root, MPI_COMM_WORLD, q);
		}
	}
#endif
	(void)lib;
	(void)mq;
	memset(hq, 0, sizeof(*hq));
	switch (coll) {
	case C_ALLREDUCE:
		return hcomm_allreduce_nb(comm, s, r, count, d->dt, o->op, hq);
	case C_REDUCE_SCATTER:
		return hcomm_reduce_scatter_nb(comm, s, r, count, d->dt, o->op,
					       hq);
	case C_BCAST:
		return hcomm_broadcast_nb(comm, r, count, d->dt, root, hq);
	case C_ALLGATHER:
		return hcomm_allgather_nb(comm, s, r,
					  count * hcomm_dtype_size(d->dt), hq);
	case C_ALLTOALL:
		return hcomm_alltoall_nb(comm, s, r, count, d->dt, hq);
	case C_BARRIER:
		return hcomm_barrier_nb(comm, hq);
	default:
		return hcomm_reduce_nb(comm, s, r, count, d->dt, o->op, root,
				       hq);
	}
}

#define MAX_INFLIGHT	16
static int inflight;		/* -N: collectives in flight, 0: blocking */
static struct hcomm_request hqs[MAX_INFLIGHT];
#ifdef HAVE_MPI
static MPI_Request mqs[MAX_INFLIGHT];
#endif

/*
 * One timed round: one blocking collective on the first buffers, or
 * (-N k) k non-blocking ones, one on each pair of buffers, then a wait
 * for all of them.  0 or the first error.
 */
static int round1(int lib, int coll, const struct dtype *d,
		  const struct redop *o, char **s, char **r, size_t count,
		  int root)
{
	int j, ret = 0, w;

	if (!inflight)
		return run1(lib, coll, d, o, s[0], r[0], count, root);
	for (j = 0; j < inflight; j++) {
#ifdef HAVE_MPI
		ret = start1(lib, coll, d, o, s[j], r[j], count, root,
			     &hqs[j], &mqs[j]);
#else
		ret = start1(lib, coll, d, o, s[j], r[j], count, root,
			     &hqs[j], NULL);
#endif
		if (ret)
			break;
	}
#ifdef HAVE_MPI
	if (lib)
		return ret ? ret : MPI_Waitall(j, mqs, MPI_STATUSES_IGNORE);
#endif
	while (j--) {
		w = hcomm_wait(&hqs[j]);
		if (!ret)
			ret = w ? w : hqs[j].status;
	}
	return ret;
}

/*
 * The fp16-compressed float sum allreduce of count elements: the slowest
 * rank's time per iteration; *beyond: elements (any rank) whose error
 * exceeds (n + 1) * 2^-11 of the sum of |x| (here: the sum itself).
 */
static double time_fp16(float *s, float *r, size_t count, int warm,
			int iters, uint64_t *beyond)
{
	double t0, t;
	size_t i;
	int k;

	hcomm_comm_set_fp16_compress(comm, 1, 0);
	fill(HCOMM_FP32, s, count, me);
	for (k = 0; k < warm; k++)
		hcomm_allreduce(comm, s, r, count, HCOMM_FP32, HCOMM_SUM);
	hcomm_boot_barrier(comm);
	t0 = now_s();
	for (k = 0; k < iters; k++)
		if (hcomm_allreduce(comm, s, r, count, HCOMM_FP32, HCOMM_SUM))
			fprintf(stderr, "rank %d: compressed allreduce: %s\n",
				me, hcomm_errmsg());
	t = max_all((now_s() - t0) / iters);
	*beyond = 0;
	for (i = 0; i < count; i++) {
		double w = (double)want(HCOMM_SUM, i, -1);

		/* the values are >= 0: sum |x| is the sum */
		if (fabs((double)r[i] - w) > (np + 1) / 2048.0 * w)
			(*beyond)++;
	}
	*beyond = sum_all(*beyond);
	hcomm_comm_set_fp16_compress(comm, 0, 0);
	return t;
}

static void usage(void)
{
	fprintf(stderr, "usage: hcomm_coll_perf [-t allreduce|reduce_scatter|"
		"broadcast|reduce|allgather|alltoall|barrier] [-b bytes] "
		"[-e bytes] [-f factor] "
		"[-o sum|max|min] [-d float|double|int32|int64|uint8] "
		"[-n iters] [-w warmup] [-c 0|1] [-r root] [-z 0|1 (float sum "
		"allreduce: also fp16-compressed)] [-N 0..16 (non-blocking, "
		"that many in flight)]\n");
}

int main(int argc, char **argv)
{
	size_t minb = 8, maxb = 64 << 20, bytes, count, rcount, es, sbytes;
	int coll = C_ALLREDUCE, iters = 20, warm = 5, check = 1, root = 0;
	int zip = 0;
	double tz = 0;
	uint64_t badz = 0;
	int opt, i, lib, nlib, ret, failed = 0;
	const struct dtype *d = &dtypes[0];
	const struct redop *o = &redops[0];
	unsigned int k, factor = 2;
	double t0, t[2], bw[2], busf;
	uint64_t bad[2];
	char *s[MAX_INFLIGHT], *r[MAX_INFLIGHT];
	int nbuf, j;

	while ((opt = getopt(argc, argv, "t:b:e:f:o:d:n:w:c:r:z:N:h")) != -1) {
		switch (opt) {
		case 't':
			for (coll = 0; coll < C__MAX; coll++)
				if (!strcmp(optarg, cnames[coll]))
					break;
			if (coll == C__MAX) {
				usage();
				return 2;
			}
			break;
		case 'b': minb = parse_size(optarg); break;
		case 'e': maxb = parse_size(optarg); break;
		case 'f': factor = (unsigned int)atoi(optarg); break;
		case 'n': iters = atoi(optarg); break;
		case 'w': warm = atoi(optarg); break;
		case 'c': check = atoi(optarg); break;
		case 'r': root = atoi(optarg); break;
		case 'z': zip = atoi(optarg); break;
		case 'N': inflight = atoi(optarg); break;
		case 'o':
			for (k = 0; k < 3 && strcmp(redops[k].name, optarg);
			     k++)
				;
			if (k == 3) {
				usage();
				return 2;
			}
			o = &redops[k];
			break;
		case 'd':
			for (k = 0; k < 5 && strcmp(dtypes[k].name, optarg);
			     k++)
				;
			if (k == 5) {
				usage();
				return 2;
			}
			d = &dtypes[k];
			break;
		default:
			usage();
			return 2;
		}
	}
	if (coll == C_BARRIER)		/* one row of size 0 */
		minb = maxb = 1;
	if (factor < 2 || iters < 1 || warm < 0 || !minb || minb > maxb ||
	    inflight < 0 || inflight > MAX_INFLIGHT ||
	    (zip && (coll != C_ALLREDUCE || d->dt != HCOMM_FP32 ||
		     o->op != HCOMM_SUM))) {
		usage();
		return 2;
	}
#ifdef HAVE_MPI
	use_mpi = getenv("OMPI_COMM_WORLD_SIZE") != NULL;
	if (use_mpi)
		MPI_Init(&argc, &argv);
#endif
	ret = hcomm_comm_init(&comm, NULL);
	if (ret) {
		fprintf(stderr, "hcomm_coll_perf: hcomm_comm_init: %s\n",
			hcomm_errmsg());
		return 1;
	}
	me = hcomm_comm_rank(comm);
	np = hcomm_comm_size(comm);
	if (root < 0 || root >= np) {
		usage();
		return 2;
	}
	nlib = use_mpi ? 2 : 1;
	es = hcomm_dtype_size(d->dt);
	nbuf = inflight ? inflight : 1;
	for (j = 0; j < nbuf; j++) {
		s[j] = malloc(maxb * (coll == C_REDUCE_SCATTER ? (size_t)np :
				      1) + es);
		r[j] = malloc(maxb + es);
		if (!s[j] || !r[j]) {
			fprintf(stderr, "hcomm_coll_perf: out of memory for "
				"%d pairs of buffers\n", nbuf);
			return 1;
		}
	}
	switch (coll) {
	case C_ALLREDUCE: busf = 2.0 * (np - 1) / np; break;
	case C_REDUCE_SCATTER:
	case C_ALLGATHER:
	case C_ALLTOALL: busf = (double)(np - 1) / np; break;
	case C_BARRIER: busf = 0; break;
	default: busf = 1; break;
	}
	if (me == 0) {
		printf("# hcomm_coll_perf: %s%s, %d ranks, transport %s, %s, %s, "
		       "%d iterations after %d warm-up, check %s%s\n",
		       cnames[coll], inflight ? " (non-blocking)" : "", np,
		       hcomm_comm_transport(comm), d->name,
		       o->name, iters, warm, check ? "on" : "off",
		       use_mpi ? "; Open MPI in the same processes" : "; "
		       "no MPI (not under mpirun)");
		printf("# %12s %12s %6s %5s | %10s %8s %8s %7s | %10s %8s "
		       "%8s %7s | %s%s\n", "size(B)", "count", "type", "op",
		       "hcomm(us)", "algbw", "busbw", "#wrong", "MPI(us)",
		       "algbw", "busbw", "#wrong", "busbw hcomm/MPI",
		       zip ? " | fp16(us) #beyond saved" : "");
		if (inflight)
			printf("# %d in flight: every iteration issues %d and "
			       "waits for all; times are per collective\n",
			       inflight, inflight);
		if (coll == C_BARRIER)
			printf("# barrier: no bytes; the ratio is MPI's time "
			       "over hcomm's\n");
	}
	for (bytes = minb; bytes <= maxb; bytes *= factor) {
		count = coll == C_BARRIER ? 0 : bytes / es;
		if (!count && coll != C_BARRIER)
			continue;
		/* reduce_scatter, allgather, alltoall: bytes is all blocks */
		rcount = coll == C_REDUCE_SCATTER || coll == C_ALLGATHER ||
			 coll == C_ALLTOALL ? count / (size_t)np : count;
		if (!rcount && coll != C_BARRIER)
			continue;
		sbytes = rcount != count ? rcount * (size_t)np * es :
			 count * es;
		for (lib = 0; lib < nlib; lib++) {
			for (j = 0; j < nbuf; j++) {
				fill(d->dt, s[j], sbytes / es, me);
				if (coll == C_BCAST)
					fill(d->dt, r[j], count, me);
			}
			for (i = 0; i < warm; i++)
				round1(lib, coll, d, o, s, r, rcount, root);
			if (lib)
				(void)max_all(0);	/* line up */
			else
				hcomm_boot_barrier(comm);
			t0 = now_s();
			for (i = 0; i < iters; i++) {
				if (round1(lib, coll, d, o, s, r, rcount,
					   root)) {
					fprintf(stderr, "rank %d: %s %s failed:"
						" %s\n", me, lib ? "MPI" :
						"hcomm", cnames[coll],
						lib ? "" : hcomm_errmsg());
					return 1;
				}
			}
			t[lib] = max_all((now_s() - t0) / iters / nbuf);
			bad[lib] = 0;
			for (j = 0; check && coll != C_BARRIER && j < nbuf;
			     j++) {
				if (coll == C_BCAST && !j) {
					/* the root's own values, once more */
					if (me == root)
						fill(d->dt, r[0], count, root);
					else
						memset(r[0], 0xee, count * es);
					run1(lib, coll, d, o, s[0], r[0],
					     count, root);
					bad[lib] += wrong(d->dt, o->op, r[0],
							  0, count, root);
				} else if (coll == C_BCAST) {
					bad[lib] += wrong(d->dt, o->op, r[j],
							  0, count, root);
				} else if (coll == C_ALLGATHER ||
					   coll == C_ALLTOALL) {
					bad[lib] += wrong_blocks(d->dt, r[j],
							rcount,
							coll == C_ALLTOALL);
				} else if (coll == C_REDUCE_SCATTER) {
					bad[lib] += wrong(d->dt, o->op, r[j],
							  (size_t)me * rcount,
							  rcount, -1);
				} else if (coll == C_ALLREDUCE ||
					   me == root) {
					bad[lib] += wrong(d->dt, o->op, r[j],
							  0, count, -1);
				}
			}
			if (check && coll != C_BARRIER)
				bad[lib] = sum_all(bad[lib]);
			bw[lib] = t[lib] > 0 ? (double)sbytes / t[lib] / 1e9 :
				  0;
			failed |= bad[lib] != 0;
		}
		if (zip) {
			tz = time_fp16((float *)(void *)s[0],
				       (float *)(void *)r[0],
				       count, warm, iters, &badz);
			failed |= badz != 0;
		}
		if (me)
			continue;
		printf("  %12zu %12zu %6s %5s | %10.1f %8.3f %8.3f %7llu",
		       sbytes, sbytes / es, d->name, o->name, t[0] * 1e6, bw[0],
		       bw[0] * busf, (unsigned long long)bad[0]);
		if (nlib == 2 && coll == C_BARRIER)
			printf(" | %10.1f %8.3f %8.3f %7llu | %.2f",
			       t[1] * 1e6, 0.0, 0.0, 0ULL,
			       t[0] > 0 ? t[1] / t[0] : 0);
		else if (nlib == 2)
			printf(" | %10.1f %8.3f %8.3f %7llu | %.2f",
			       t[1] * 1e6, bw[1], bw[1] * busf,
			       (unsigned long long)bad[1],
			       bw[1] > 0 ? bw[0] / bw[1] : 0);
		else
			printf(" | %10s %8s %8s %7s | -", "-", "-", "-", "-");
		if (zip)
			printf(" | %10.1f %7llu %5.1f%%", tz * 1e6,
			       (unsigned long long)badz,
			       t[0] > 0 ? 100.0 * (1 - tz / t[0]) : 0);
		printf("\n");
		fflush(stdout);
	}
	if (me == 0)
		printf("# %s\n", failed ? "WRONG RESULTS" : "all results right");
	hcomm_comm_destroy(comm);
#ifdef HAVE_MPI
	if (use_mpi)
		MPI_Finalize();
#endif
	for (j = 0; j < nbuf; j++) {
		free(s[j]);
		free(r[j]);
	}
	return failed;
}
