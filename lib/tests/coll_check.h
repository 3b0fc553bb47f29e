/* SPDX-License-Identifier: MIT */
/*
 * The checks of the collectives, shared by tests/test_coll.c (forked ranks
 * on one host) and tests/vm/hcomm_vm_test.c (case "coll": ranks in VMs,
 * over the kernel path, rdma and tcp).  Public API only.  The includer
 * defines comm, me, np and COLL_CHECK(cond, fmt, ...) first.
 *
 * Values are small integers (floats: multiples of 12 for avg, halves
 * otherwise), so that every sum, product, maximum, minimum and average is
 * exact in every type whatever order the ring combines them in: results
 * must match bit for bit.  Integers wrap (and avg truncates toward zero)
 * as Documentation/collectives.rst says.
 */
#ifndef HCOMM_COLL_CHECK_H
#define HCOMM_COLL_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hcomm.h"

#define COLL_MAX_RANKS	4

/* ------------------------------------------------------------------ */
/* values                                                              */
/* ------------------------------------------------------------------ */

static const enum hcomm_dtype dts[] = {
	HCOMM_FP32, HCOMM_FP64, HCOMM_FP16, HCOMM_BF16, HCOMM_INT8,
	HCOMM_INT32, HCOMM_INT64, HCOMM_UINT8, HCOMM_UINT32, HCOMM_UINT64,
};
static const enum hcomm_redop ops[] = {
	HCOMM_SUM, HCOMM_PROD, HCOMM_MAX, HCOMM_MIN, HCOMM_AVG,
};

static int is_float(enum hcomm_dtype dt)
{
	return dt == HCOMM_FP32 || dt == HCOMM_FP64 || dt == HCOMM_FP16 ||
	       dt == HCOMM_BF16;
}

static int is_signed(enum hcomm_dtype dt)
{
	return dt == HCOMM_INT8 || dt == HCOMM_INT32 || dt == HCOMM_INT64;
}

/*
 * Rank r's element i: products stay within +-2^4 of 1 (factors 1, 2,
 * -1, 0.5 for floats; 1, 2, -1 or 3 for integers), sums of 4 ranks
 * within bf16's 8 bits; a float average's sum is a multiple of 12, so
 * dividing by 1 to 4 ranks is exact too.
 */
static double value(enum hcomm_dtype dt, enum hcomm_redop op, int r,
		    size_t i)
{
	uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ULL ^
		     (uint64_t)(r + 1) * 0xbf58476d1ce4e5b9ULL;

	h ^= h >> 31;
	if (op == HCOMM_PROD) {
		static const double ff[] = { 1, 2, -1, 0.5 };
		static const double fi[] = { 1, 2, -1, 3 };
		static const double fu[] = { 1, 2, 3, 1 };

		if (is_float(dt))
			return ff[h % 4];
		return is_signed(dt) ? fi[h % 4] : fu[h % 4];
	}
	if (is_float(dt) && op == HCOMM_AVG)	/* sums divide by 1 .. 4 */
		return (double)((int64_t)(h % 17) - 8) * 12.0;
	if (is_float(dt))
		return (double)((int64_t)(h % 33) - 16) / 2.0;
	if (is_signed(dt))
		return (double)((int64_t)(h % 201) - 100);
	return (double)(h % 200);
}

/*
 * The fp16 bits of v, which is exact in fp16 and a normal number or 0
 * (written here, not the library's conversion under test).
 */
static uint16_t fp16_exact(double v)
{
	uint16_t sign = v < 0 ? 0x8000 : 0;
	double f;
	int e;

	if (v == 0)
		return sign;
	f = frexp(fabs(v), &e);		/* v = f * 2^e, f in [0.5, 1) */
	return (uint16_t)(sign | (uint16_t)(e - 1 + 15) << 10 |
			  (uint16_t)((f * 2 - 1) * 1024));
}

/* bf16 is the upper half of the fp32 (exact: the lower half is 0). */
static uint16_t bf16_exact(double v)
{
	float f = (float)v;
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return (uint16_t)(u >> 16);
}

/* Store v (exact in dt) as element i of buf (any alignment). */
static void put_elem(enum hcomm_dtype dt, void *buf, size_t i, double v)
{
	union {
		float f;
		double d;
		uint16_t h;
		int8_t i8;
		int32_t i32;
		int64_t i64;
		uint8_t u8;
		uint32_t u32;
		uint64_t u64;
	} e;

	switch (dt) {
	case HCOMM_FP32: e.f = (float)v; break;
	case HCOMM_FP64: e.d = v; break;
	case HCOMM_FP16: e.h = fp16_exact(v); break;
	case HCOMM_BF16: e.h = bf16_exact(v); break;
	case HCOMM_INT8: e.i8 = (int8_t)(int64_t)v; break;
	case HCOMM_INT32: e.i32 = (int32_t)(int64_t)v; break;
	case HCOMM_INT64: e.i64 = (int64_t)v; break;
	case HCOMM_UINT8: e.u8 = (uint8_t)(uint64_t)v; break;
	case HCOMM_UINT32: e.u32 = (uint32_t)(uint64_t)v; break;
	case HCOMM_UINT64: e.u64 = (uint64_t)v; break;
	default: return;
	}
	memcpy((char *)buf + i * hcomm_dtype_size(dt), &e,
	       hcomm_dtype_size(dt));
}

/*
 * The expected element i over ranks 0 .. n - 1, stored into ref.
 * Floats: the exact result (sum, product, max, min of exactly
 * representable values stay exact here), the average divided once in
 * the type's precision.  Integers: wrapping arithmetic in uint64_t, then
 * truncated to the type (signed average: the wrapped sum, divided
 * toward zero).
 */
static void expect(enum hcomm_dtype dt, enum hcomm_redop op, int n,
		   size_t i, void *ref)
{
	double d = 0, v;
	uint64_t u = op == HCOMM_PROD ? 1 : 0;
	int r;

	for (r = 0; r < n; r++) {
		v = value(dt, op, r, i);
		if (is_float(dt)) {
			if (r == 0)
				d = v;
			else if (op == HCOMM_SUM || op == HCOMM_AVG)
				d += v;
			else if (op == HCOMM_PROD)
				d *= v;
			else if (op == HCOMM_MAX)
				d = v > d ? v : d;
			else
				d = v < d ? v : d;
			continue;
		}
		{
			uint64_t x = (uint64_t)(int64_t)v;

			if (r == 0)
				u = x;
			else if (op == HCOMM_SUM || op == HCOMM_AVG)
				u += x;
			else if (op == HCOMM_PROD)
				u *= x;
			else if (is_signed(dt) ? (int64_t)x > (int64_t)u :
				 x > u)
				u = op == HCOMM_MAX ? x : u;
			else
				u = op == HCOMM_MIN ? x : u;
		}
	}
	if (is_float(dt)) {
		if (op == HCOMM_AVG)
			d /= n;		/* exact: a multiple of 12 */
		put_elem(dt, ref, i, d);
		return;
	}
	/* wrap to the type's width first, then (avg) divide toward zero */
	switch (dt) {
	case HCOMM_INT8: {
		int8_t s = (int8_t)u;

		((int8_t *)ref)[i] = op == HCOMM_AVG ? (int8_t)(s / n) : s;
		break;
	}
	case HCOMM_INT32: {
		int32_t s = (int32_t)u;

		((int32_t *)ref)[i] = op == HCOMM_AVG ? s / n : s;
		break;
	}
	case HCOMM_INT64: {
		int64_t s = (int64_t)u;

		((int64_t *)ref)[i] = op == HCOMM_AVG ? s / n : s;
		break;
	}
	case HCOMM_UINT8: {
		uint8_t s = (uint8_t)u;

		((uint8_t *)ref)[i] = op == HCOMM_AVG ? (uint8_t)(s / n) : s;
		break;
	}
	case HCOMM_UINT32: {
		uint32_t s = (uint32_t)u;

		((uint32_t *)ref)[i] = op == HCOMM_AVG ? s / (uint32_t)n : s;
		break;
	}
	default: {
		((uint64_t *)ref)[i] = op == HCOMM_AVG ? u / (uint64_t)n : u;
		break;
	}
	}
}

static void fill_rank(enum hcomm_dtype dt, enum hcomm_redop op, int r,
		      void *buf, size_t count)
{
	size_t i;

	for (i = 0; i < count; i++)
		put_elem(dt, buf, i, value(dt, op, r, i));
}

static void fill_ref(enum hcomm_dtype dt, enum hcomm_redop op, int n,
		     void *ref, size_t count)
{
	size_t i;

	for (i = 0; i < count; i++)
		expect(dt, op, n, i, ref);
}

/* ------------------------------------------------------------------ */
/* the checks                                                          */
/* ------------------------------------------------------------------ */

static const size_t counts[] = { 0, 1, 7, 1000, 20011 };

/*
 * HCOMM_COLL_TEST_QUICK=1: allreduce of 4 types only (fp32, fp16, int8,
 * uint64: one of each kind), allgather up to 20011 bytes, alltoall of
 * int64 up to 1000 elements, for slow test beds.
 */
static int coll_quick(void)
{
	const char *q = getenv("HCOMM_COLL_TEST_QUICK");

	return q && strcmp(q, "0");
}

/* First differing element, or -1. */
static long first_diff(const void *a, const void *b, size_t count,
		       size_t es)
{
	size_t i;

	for (i = 0; i < count; i++)
		if (memcmp((const char *)a + i * es, (const char *)b + i * es,
			   es))
			return (long)i;
	return -1;
}

static void coll_t_allreduce(void)
{
	size_t ci, di, oi, n, es, big = 20011 * 8 + 64;
	char *in = malloc(big), *out = malloc(big), *ref = malloc(big);
	int inplace, ret;
	long bad, moved;

	for (di = 0; di < sizeof(dts) / sizeof(dts[0]); di++)
	for (oi = 0; oi < sizeof(ops) / sizeof(ops[0]); oi++)
	for (ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
	for (inplace = 0; inplace < 2; inplace++) {
		enum hcomm_dtype dt = dts[di];
		enum hcomm_redop op = ops[oi];

		if (coll_quick() && dt != HCOMM_FP32 && dt != HCOMM_FP16 &&
		    dt != HCOMM_INT8 && dt != HCOMM_UINT64)
			continue;

		n = counts[ci];
		es = hcomm_dtype_size(dt);
		/* odd addresses: in + 1 byte, out + 3 */
		fill_rank(dt, op, me, in + 1, n);
		fill_ref(dt, op, np, ref, n);
		if (inplace) {
			ret = hcomm_allreduce(comm, in + 1, in + 1, n, dt,
					      op);
			bad = first_diff(in + 1, ref, n, es);
			moved = -1;
		} else {
			memset(out, 0x5a, big);
			ret = hcomm_allreduce(comm, in + 1, out + 3, n, dt,
					      op);
			bad = first_diff(out + 3, ref, n, es);
			/* the ring reads send itself: it stays as it was */
			fill_rank(dt, op, me, out, n);
			moved = first_diff(in + 1, out, n, es);
		}
		COLL_CHECK(!ret && bad < 0 && moved < 0, "allreduce %d ranks %s "
		      "%s count %zu %s: ret %d, first wrong element %ld, "
		      "first changed in send %ld", np,
		      hcomm_dtype_name(dt), hcomm_redop_name(op), n,
		      inplace ? "in place" : "out of place", ret, bad, moved);
	}
	free(in);
	free(out);
	free(ref);
}

static void coll_t_reduce_scatter(void)
{
	size_t ci, di, oi, n, es, big = 20011 * 8 * COLL_MAX_RANKS + 64;
	char *in = malloc(big), *out = malloc(big), *ref = malloc(big);
	long bad, moved;
	int ret, inplace;

	for (di = 0; di < sizeof(dts) / sizeof(dts[0]); di += 3)
	for (oi = 0; oi < sizeof(ops) / sizeof(ops[0]); oi++)
	for (ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
	for (inplace = 0; inplace < 2; inplace++) {
		enum hcomm_dtype dt = dts[di];
		enum hcomm_redop op = ops[oi];

		n = counts[ci];
		es = hcomm_dtype_size(dt);
		fill_rank(dt, op, me, in, n * (size_t)np);
		fill_ref(dt, op, np, ref, n * (size_t)np);
		memset(out, 0x5a, big);
		moved = -1;
		if (inplace) {	/* recv == send: segment r at its start */
			ret = hcomm_reduce_scatter(comm, in, in, n, dt, op);
			bad = first_diff(in, ref + (size_t)me * n * es, n, es);
		} else {
			ret = hcomm_reduce_scatter(comm, in, out, n, dt, op);
			bad = first_diff(out, ref + (size_t)me * n * es, n,
					 es);
			fill_rank(dt, op, me, out, n * (size_t)np);
			moved = first_diff(in, out, n * (size_t)np, es);
		}
		COLL_CHECK(!ret && bad < 0 && moved < 0, "reduce_scatter %d "
		      "ranks %s %s %zu per rank %s: ret %d, first wrong "
		      "element %ld, first changed in send %ld", np,
		      hcomm_dtype_name(dt), hcomm_redop_name(op), n,
		      inplace ? "in place" : "out of place", ret, bad, moved);
	}
	free(in);
	free(out);
	free(ref);
}

/*
 * broadcast from every root (fp64 and int32), then reduce to every root
 * (fp64 sum, int32 max); the other ranks' buffers start as garbage.
 */
static void coll_t_rooted(void)
{
	size_t ci, n, es, big = 20011 * 8 + 64;
	char *in = malloc(big), *out = malloc(big), *ref = malloc(big);
	enum hcomm_redop op;
	enum hcomm_dtype dt;
	int root, ret, k, red;
	long bad, moved;

	for (red = 0; red < 2; red++)
	for (root = 0; root < np; root++)
	for (k = 0; k < 2; k++)
	for (ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
		n = counts[ci];
		dt = k ? HCOMM_INT32 : HCOMM_FP64;
		op = k ? HCOMM_MAX : HCOMM_SUM;
		es = hcomm_dtype_size(dt);
		if (!red) {
			/* root's values of "rank 7" */
			if (me == root)
				fill_rank(dt, HCOMM_SUM, 7, out, n);
			else
				memset(out, 0x5a, n * es);
			fill_rank(dt, HCOMM_SUM, 7, ref, n);
			ret = hcomm_broadcast(comm, out, n, dt, root);
			bad = first_diff(out, ref, n, es);
			COLL_CHECK(!ret && bad < 0, "broadcast %d ranks from "
				   "root %d %s count %zu: ret %d, first wrong "
				   "element %ld", np, root,
				   hcomm_dtype_name(dt), n, ret, bad);
			continue;
		}
		fill_rank(dt, op, me, in, n);
		fill_ref(dt, op, np, ref, n);
		memset(out, 0x5a, n * es);
		ret = hcomm_reduce(comm, in, me == root ? out : NULL, n, dt,
				   op, root);
		bad = me == root ? first_diff(out, ref, n, es) : -1;
		fill_rank(dt, op, me, ref, n);	/* send stays as it was */
		moved = first_diff(in, ref, n, es);
		COLL_CHECK(!ret && bad < 0 && moved < 0, "reduce %d ranks to "
			   "root %d %s %s count %zu: ret %d, first wrong "
			   "element %ld, first changed in send %ld", np,
			   root, hcomm_dtype_name(dt), hcomm_redop_name(op), n,
			   ret, bad, moved);
	}
	free(in);
	free(out);
	free(ref);
}

/*
 * Full-size chunks with short tails, again and again: the staging slots'
 * messages complete in any order (a short put lands before a long one),
 * so this is where a ring that took its data signal for a sequence number
 * read a slot too early.  Run with the default chunk (256 KiB) and slots.
 * Buffers at odd byte addresses.
 */
static void coll_t_tails(void)
{
	const size_t ce = 65536;	/* floats in a 256 KiB chunk */
	size_t cs[3], n, k, es = sizeof(float);
	char *in, *out, *ref;
	int rep, ret, bad_runs = 0, err = 0;
	char why[160] = "";
	long bad = -1;

	cs[0] = (size_t)np * (ce + 100);
	cs[1] = (size_t)np * 2 * ce + 3;
	cs[2] = (size_t)np * (ce / 2 + 1);
	for (k = 0; k < 3; k++) {
		n = cs[k];
		in = malloc(n * es + 1);
		out = malloc(n * es + 1);
		ref = malloc(n * es);
		fill_rank(HCOMM_FP32, HCOMM_SUM, me, in + 1, n);
		fill_ref(HCOMM_FP32, HCOMM_SUM, np, ref, n);
		bad_runs = 0;
		for (rep = 0; rep < 6; rep++) {
			memset(out, 0x5a, n * es + 1);
			ret = hcomm_allreduce(comm, in + 1, out + 1, n,
					      HCOMM_FP32, HCOMM_SUM);
			bad = first_diff(out + 1, ref, n, es);
			bad_runs += ret || bad >= 0;
			if (ret && !err) {
				err = ret;
				snprintf(why, sizeof(why), "%s",
					 hcomm_errmsg());
			}
		}
		COLL_CHECK(!bad_runs, "allreduce %d ranks of %zu floats in "
			   "256 KiB chunks with short tails, 6 times, odd "
			   "addresses: %d runs wrong (last: first wrong element "
			   "%ld; first error %d %s)", np, n, bad_runs, bad, err,
			   why);
		free(in);
		free(out);
		free(ref);
	}
}

/*
 * hcomm_comm_probe() between collectives: the probe's ping-pong uses
 * signals of its own, not the collectives' (whose counts would then run
 * ahead of the messages).
 */
static void coll_t_probe(void)
{
	size_t n = 20011, es = sizeof(int32_t);
	char *in = malloc(n * es), *out = malloc(n * es), *ref = malloc(n * es);
	int ret, pr, k, bad_runs = 0;

	fill_rank(HCOMM_INT32, HCOMM_SUM, me, in, n);
	fill_ref(HCOMM_INT32, HCOMM_SUM, np, ref, n);
	ret = hcomm_allreduce(comm, in, out, n, HCOMM_INT32, HCOMM_SUM);
	bad_runs += ret || first_diff(out, ref, n, es) >= 0;
	pr = hcomm_comm_probe(comm);
	for (k = 0; k < 3; k++) {
		memset(out, 0x5a, n * es);
		ret = hcomm_allreduce(comm, in, out, n, HCOMM_INT32,
				      HCOMM_SUM);
		bad_runs += ret || first_diff(out, ref, n, es) >= 0;
	}
	COLL_CHECK(!pr && !bad_runs, "allreduce %d ranks, hcomm_comm_probe "
		   "(%d), 3 allreduces more: %d of 4 wrong", np, pr, bad_runs);
	free(in);
	free(out);
	free(ref);
}

/* A value like a gradient's: about N(0, 1/3), from rank r and index i. */
static float coll_real(int r, size_t i)
{
	uint64_t h = (i + 11) * 0x9e3779b97f4a7c15ULL ^
		     (uint64_t)(r + 5) * 0xd1b54a32d192ed03ULL;
	double u = 0;
	int k;

	for (k = 0; k < 4; k++) {
		h ^= h >> 29;
		h *= 0xbf58476d1ce4e5b9ULL;
		u += (double)(h >> 11) / 9007199254740992.0 - 0.5;
	}
	return (float)u;
}

/* FNV-1a of len bytes: equal results on every rank compare equal. */
static uint64_t coll_fnv(const void *p, size_t len)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

/*
 * The fp16-compressed allreduce (the communicator made with
 * HCOMM_FP16_COMPRESS=1 and HCOMM_COMP_THRESHOLD=4096): fp32 sums and
 * averages of realistic values at or above the threshold stay within the
 * documented error, max |result - exact| / sum |x| <= (n + 1) * 2^-11,
 * every rank gets the same bits; below the threshold fp32 goes over the
 * wire (error at fp32's level); a sum of 40000 per rank, beyond fp16's
 * range, comes out right (the values are divided by n before they are
 * rounded); an input of 70000 (beyond fp16 itself) becomes +inf.
 */
static void coll_t_compress(void)
{
	static const size_t ns[] = { 1000, 1024, 100003 };
	size_t n, i, ci, k;
	float *in, *out;
	double e, emax, esum, tol, ref, mag;
	uint64_t h, hmax, hmin;
	int ret, oi;

	for (ci = 0; ci < sizeof(ns) / sizeof(ns[0]); ci++)
	for (oi = 0; oi < 2; oi++) {
		enum hcomm_redop op = oi ? HCOMM_AVG : HCOMM_SUM;
		int comp = np > 1 && ns[ci] * sizeof(float) >= 4096;

		n = ns[ci];
		in = malloc(n * sizeof(*in));
		out = malloc(n * sizeof(*out));
		for (i = 0; i < n; i++)
			in[i] = coll_real(me, i);
		ret = hcomm_allreduce(comm, in, out, n, HCOMM_FP32, op);
		emax = esum = 0;
		for (i = 0; i < n; i++) {
			ref = mag = 0;
			for (k = 0; k < (size_t)np; k++) {
				ref += coll_real((int)k, i);
				mag += fabs(coll_real((int)k, i));
			}
			if (op == HCOMM_AVG) {
				ref /= np;
				mag /= np;
			}
			e = fabs((double)out[i] - ref) / (mag > 0 ? mag : 1);
			emax = e > emax ? e : emax;
			esum += e;
		}
		tol = comp ? (np + 1) / 2048.0 : (np + 1) / 8388608.0 * 2;
		COLL_CHECK(!ret && emax <= tol, "fp16 compression %d ranks %s "
			   "of %zu floats (%s): max error %.2e of sum |x|, mean "
			   "%.2e, bound %.2e", np, hcomm_redop_name(op), n,
			   comp ? "fp16 on the wire" : "fp32 on the wire",
			   emax, esum / (double)n, tol);
		h = coll_fnv(out, n * sizeof(*out));
		ret = hcomm_allreduce(comm, &h, &hmax, 1, HCOMM_UINT64,
				      HCOMM_MAX);
		ret = ret ? ret : hcomm_allreduce(comm, &h, &hmin, 1,
						  HCOMM_UINT64, HCOMM_MIN);
		COLL_CHECK(!ret && hmax == hmin, "fp16 compression %d ranks "
			   "%s of %zu floats: the same bits on every rank",
			   np, hcomm_redop_name(op), n);
		free(in);
		free(out);
	}
	n = 4096;
	in = malloc(n * sizeof(*in));
	out = malloc(n * sizeof(*out));
	for (i = 0; i < n; i++)
		in[i] = i == 7 ? 70000.0f : 40000.0f;
	ret = hcomm_allreduce(comm, in, out, n, HCOMM_FP32, HCOMM_SUM);
	for (i = 0, k = 0; i < n; i++)
		if (i != 7 && out[i] != 40000.0f * (float)np)
			k++;
	COLL_CHECK(!ret && !k && (np == 1 || isinf(out[7])),
		   "fp16 compression %d ranks sum of 40000 per rank (beyond "
		   "fp16's 65504): right (%zu wrong); an input of 70000: "
		   "%g", np, k, (double)out[7]);
	free(in);
	free(out);
}

/* Bad arguments fail before anything moves; the ring stays usable. */
static void coll_t_errors(void)
{
	float a[4] = { 1, 2, 3, 4 }, b[4];
	int ret;

	ret = hcomm_allreduce(comm, a, b, 4, (enum hcomm_dtype)0, HCOMM_SUM);
	COLL_CHECK(ret == -HCOMM_ERR_INVAL, "allreduce, data type 0: "
	      "HCOMM_ERR_INVAL (%d)", ret);
	ret = hcomm_allreduce(comm, a, b, 4, HCOMM_FP32, (enum hcomm_redop)99);
	COLL_CHECK(ret == -HCOMM_ERR_INVAL, "allreduce, operation 99: "
	      "HCOMM_ERR_INVAL (%d)", ret);
	ret = hcomm_allreduce(comm, NULL, b, 4, HCOMM_FP32, HCOMM_SUM);
	COLL_CHECK(ret == -HCOMM_ERR_INVAL, "allreduce, NULL send: "
	      "HCOMM_ERR_INVAL (%d)", ret);
	ret = hcomm_allreduce(comm, a, b, SIZE_MAX / 2, HCOMM_FP32, HCOMM_SUM);
	COLL_CHECK(ret == -HCOMM_ERR_INVAL, "allreduce, SIZE_MAX / 2 elements: "
	      "HCOMM_ERR_INVAL (%d)", ret);
	ret = hcomm_broadcast(comm, a, 4, HCOMM_FP32, np);
	COLL_CHECK(ret == -HCOMM_ERR_INVAL, "broadcast, root %d of %d: "
	      "HCOMM_ERR_INVAL (%d)", np, np, ret);
	ret = hcomm_reduce(comm, a, b, 4, HCOMM_FP32, HCOMM_SUM, -1);
	COLL_CHECK(ret == -HCOMM_ERR_INVAL, "reduce, root -1: HCOMM_ERR_INVAL "
	      "(%d)", ret);
	ret = hcomm_comm_set_fp16_compress(comm, 2, 0);
	COLL_CHECK(ret == -HCOMM_ERR_INVAL, "set_fp16_compress, enable 2: "
		   "HCOMM_ERR_INVAL (%d)", ret);
	ret = hcomm_comm_set_fp16_compress(comm, 1, (1ULL << 30) + 1);
	COLL_CHECK(ret == -HCOMM_ERR_INVAL, "set_fp16_compress, threshold "
		   "1 GiB + 1: HCOMM_ERR_INVAL (%d)", ret);
	ret = hcomm_allreduce(NULL, a, b, 4, HCOMM_FP32, HCOMM_SUM);
	COLL_CHECK(ret == -HCOMM_ERR_INVAL, "allreduce, NULL communicator: "
	      "HCOMM_ERR_INVAL (%d)", ret);
	ret = hcomm_allreduce(comm, a, b, 4, HCOMM_FP32, HCOMM_SUM);
	COLL_CHECK(!ret && b[0] == (float)np && b[3] == 4.0f * (float)np,
	      "after the bad calls an allreduce works (%d, %g %g)", ret,
	      (double)b[0], (double)b[3]);
}

/* Byte i of rank r's allgather block (never 0x5a for a fresh buffer). */
static unsigned char ag_byte(int r, size_t i)
{
	return (unsigned char)(r * 37 + i * 11 + (i >> 8) + 1) | 0x80;
}

/*
 * The data-path allgather: counts in bytes with odd lengths, rank r's
 * block at recv + r * len, in place (send = recv + rank * len) and out of
 * place at odd addresses; then barriers in a row.
 */
static void coll_t_allgather(void)
{
	static const size_t lens[] = { 0, 1, 7, 1000, 20011, 300001 };
	size_t li, len, i, big = 300001 * COLL_MAX_RANKS + 64;
	unsigned char *in = malloc(big), *out = malloc(big);
	long bad;
	int inplace, ret, r;

	for (li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
	for (inplace = 0; inplace < 2; inplace++) {
		len = lens[li];
		if (coll_quick() && (len > 20011 || (inplace && len > 7)))
			continue;
		memset(out, 0x5a, big);
		for (i = 0; i < len; i++)
			in[1 + i] = ag_byte(me, i);
		if (inplace) {
			memcpy(out + 3 + (size_t)me * len, in + 1, len);
			ret = hcomm_allgather(comm, out + 3 + (size_t)me * len,
					      out + 3, len);
		} else {
			ret = hcomm_allgather(comm, in + 1, out + 3, len);
		}
		bad = -1;
		for (r = 0; r < np && bad < 0; r++)
			for (i = 0; i < len && bad < 0; i++)
				if (out[3 + (size_t)r * len + i] != ag_byte(r, i))
					bad = (long)((size_t)r * len + i);
		if (out[3 + (size_t)np * len] != 0x5a)
			bad = (long)((size_t)np * len);
		COLL_CHECK(!ret && bad < 0, "allgather %d ranks bytes %zu %s: "
			   "ret %d, first wrong byte %ld", np, len,
			   inplace ? "in place" : "out of place", ret, bad);
	}
	for (i = 0, ret = 0; i < 50 && !ret; i++)
		ret = hcomm_barrier(comm);
	COLL_CHECK(!ret, "barrier %d ranks, 50 in a row: %d", np, ret);
	ret = hcomm_allgather(comm, NULL, out, 4);
	COLL_CHECK(ret == -HCOMM_ERR_INVAL, "allgather, NULL send: "
		   "HCOMM_ERR_INVAL (%d)", ret);
	free(in);
	free(out);
}

/* Completion order of the non-blocking collectives' callbacks. */
struct nb_log {
	int order[16];
	int n;
	struct hcomm_comm *comm;
	struct hcomm_request chained;
	float chained_in, chained_out;
	int busy_ret, chain_ret, flush_ret, wait_ret, destroy_ret;
};

static struct hcomm_request nb_req[8];

static void nb_cb_idx(struct hcomm_request *req, void *arg)
{
	struct nb_log *l = arg;

	l->order[l->n++] = (int)(req - nb_req);
	if (req != &nb_req[6])
		return;
	/*
	 * From a collective's callback: blocking no, non-blocking yes (the
	 * last one issued: the callers issue nothing until it is done, so
	 * every rank has this one in the same place of its order).
	 */
	l->busy_ret = hcomm_barrier(l->comm);
	l->chained_in = 1.0f;
	l->chain_ret = hcomm_allreduce_nb(l->comm, &l->chained_in,
					  &l->chained_out, 1, HCOMM_FP32,
					  HCOMM_SUM, &l->chained);
	/* it runs on this thread, after this callback: no waiting here */
	l->flush_ret = hcomm_flush(l->comm);
	l->wait_ret = l->chain_ret ? 0 : hcomm_wait(&l->chained);
	l->destroy_ret = hcomm_comm_destroy(l->comm);
}

/*
 * Non-blocking collectives: eight kinds in flight at once, each
 * completing with the data right; callbacks in issue order, on the
 * library's thread, which progresses them while the caller does not
 * call the library at all; a blocking collective queued behind them; a
 * non-blocking one issued from a callback; bad arguments refused at
 * issue.
 */
static void coll_t_nb(void)
{
	size_t n = 20011, i, es = 4;
	int32_t *a = malloc(n * es), *ar = malloc(n * es);
	int32_t *rs_in = malloc(n * es * COLL_MAX_RANKS), *rs = malloc(n * es);
	int32_t *bc = malloc(n * es), *red = malloc(n * es);
	unsigned char *ag = malloc(1000 * COLL_MAX_RANKS), mine[1000];
	float *big = malloc(250000 * sizeof(float));
	float *bigr = malloc(250000 * sizeof(float));
	int32_t blk[4], blkr[4];
	struct nb_log log = { .comm = comm };
	long bad = -1;
	int ret, j, t;

	for (i = 0; i < n; i++) {
		a[i] = (int32_t)(i * 3 + (size_t)me);
		bc[i] = me == 0 ? (int32_t)(i ^ 0x5555) : -1;
		red[i] = -1;
	}
	for (i = 0; i < n * (size_t)np; i++)
		rs_in[i] = (int32_t)(i + (size_t)me * 7);
	for (i = 0; i < sizeof(mine); i++)
		mine[i] = ag_byte(me, i);
	for (j = 0; j < 8; j++) {
		memset(&nb_req[j], 0, sizeof(nb_req[j]));
		nb_req[j].cb = nb_cb_idx;
		nb_req[j].cb_arg = &log;
	}
	ret = hcomm_allreduce_nb(comm, a, ar, n, HCOMM_INT32, HCOMM_SUM,
				 &nb_req[0]);
	ret = ret ? ret : hcomm_reduce_scatter_nb(comm, rs_in, rs, n,
						  HCOMM_INT32, HCOMM_SUM,
						  &nb_req[1]);
	ret = ret ? ret : hcomm_broadcast_nb(comm, bc, n, HCOMM_INT32, 0,
					     &nb_req[2]);
	ret = ret ? ret : hcomm_reduce_nb(comm, a, red, n, HCOMM_INT32,
					  HCOMM_MAX, np - 1, &nb_req[3]);
	ret = ret ? ret : hcomm_allgather_nb(comm, mine, ag, sizeof(mine),
					     &nb_req[4]);
	ret = ret ? ret : hcomm_barrier_nb(comm, &nb_req[5]);
	for (i = 0; i < 4; i++)
		blk[i] = (int32_t)(me * 10 + (int)i);
	/* a blocking one behind them, then a non-blocking one behind it */
	ret = ret ? ret : hcomm_allreduce(comm, blk, blkr, 4, HCOMM_INT32,
					  HCOMM_MAX);
	for (i = 0; i < 250000; i++)
		big[i] = (float)((i & 1023) + (size_t)me);
	ret = ret ? ret : hcomm_allreduce_nb(comm, big, bigr, 250000,
					     HCOMM_FP32, HCOMM_MAX,
					     &nb_req[6]);
	COLL_CHECK(!ret, "non-blocking %d ranks: seven issued and a blocking "
		   "one between them: %d (%s)", np, ret,
		   ret ? hcomm_errmsg() : "");
	/* the blocking one ran after the first six: they are done */
	for (j = 0, t = 0; j < 6; j++)
		t += __atomic_load_n(&nb_req[j].done, __ATOMIC_ACQUIRE);
	COLL_CHECK(t == 6 && blkr[0] == (np - 1) * 10 && blkr[3] ==
		   (np - 1) * 10 + 3, "non-blocking %d ranks: the blocking "
		   "allreduce behind six ran after them (%d done) and is "
		   "right (%d %d)", np, t, blkr[0], blkr[3]);
	/* the caller computes; the library's thread moves the data */
	for (t = 0; t < 60000 && !__atomic_load_n(&nb_req[6].done,
						  __ATOMIC_ACQUIRE); t++)
		usleep(500);
	COLL_CHECK(__atomic_load_n(&nb_req[6].done, __ATOMIC_ACQUIRE),
		   "non-blocking %d ranks: a 1 MB allreduce completes while "
		   "the caller does not call the library (%.1f s)", np,
		   t * 0.0005);
	ret = 0;
	for (j = 0; j < 7; j++) {
		int r2 = hcomm_wait(&nb_req[j]);

		ret = ret ? ret : r2;
	}
	COLL_CHECK(!ret && log.n >= 7, "non-blocking %d ranks: every request "
		   "completes with 0 (%d), %d callbacks", np, ret, log.n);
	for (j = 0, t = 1; j < 7 && j < log.n; j++)
		t &= log.order[j] == j;
	COLL_CHECK(t, "non-blocking %d ranks: callbacks in issue order", np);
	COLL_CHECK(!log.flush_ret && log.wait_ret == -HCOMM_ERR_BUSY &&
		   log.destroy_ret == -HCOMM_ERR_INVAL, "non-blocking %d ranks: "
		   "from a collective's callback, with one queued: hcomm_flush "
		   "waits for the rest only (%d), hcomm_wait for it "
		   "HCOMM_ERR_BUSY (%d), hcomm_comm_destroy HCOMM_ERR_INVAL (%d)",
		   np, log.flush_ret, log.wait_ret, log.destroy_ret);
	/* (the message's arguments are read before the condition's) */
	ret = log.chain_ret ? log.chain_ret : hcomm_wait(&log.chained);
	COLL_CHECK(log.busy_ret == -HCOMM_ERR_BUSY && !ret &&
		   log.chained_out == (float)np,
		   "non-blocking %d ranks: from a callback a blocking "
		   "collective is refused (%d) and a non-blocking one works "
		   "(%d, %g)", np, log.busy_ret, ret,
		   (double)log.chained_out);
	for (i = 0; i < n && bad < 0; i++)
		if (ar[i] != (int32_t)(i * 3 * (size_t)np) +
			     np * (np - 1) / 2 ||
		    bc[i] != (int32_t)(i ^ 0x5555) ||
		    (me == np - 1 && red[i] != (int32_t)(i * 3) + np - 1))
			bad = (long)i;
	for (i = 0; i < n && bad < 0; i++)
		if (rs[i] != (int32_t)((size_t)me * n + i) * np +
			     7 * np * (np - 1) / 2)
			bad = (long)(n + i);
	for (i = 0; i < sizeof(mine) * (size_t)np && bad < 0; i++)
		if (ag[i] != ag_byte((int)(i / sizeof(mine)),
				     i % sizeof(mine)))
			bad = (long)(2 * n + i);
	for (i = 0; i < 250000 && bad < 0; i++)
		if (bigr[i] != (float)((i & 1023) + (size_t)np - 1))
			bad = (long)(3 * n + i);
	COLL_CHECK(bad < 0, "non-blocking %d ranks: allreduce, reduce_scatter, "
		   "broadcast, reduce, allgather, allreduce of 1 MB: every "
		   "element right (first wrong %ld)", np, bad);
	ret = hcomm_allreduce_nb(comm, a, ar, n, HCOMM_INT32, HCOMM_SUM, NULL);
	COLL_CHECK(ret == -HCOMM_ERR_INVAL, "non-blocking, no request: "
		   "HCOMM_ERR_INVAL (%d)", ret);
	memset(&nb_req[0], 0, sizeof(nb_req[0]));
	ret = hcomm_allreduce_nb(comm, a, ar, n, (enum hcomm_dtype)77,
				 HCOMM_SUM, &nb_req[0]);
	COLL_CHECK(ret == -HCOMM_ERR_INVAL && !nb_req[0].done,
		   "non-blocking, data type 77: HCOMM_ERR_INVAL (%d), the "
		   "request untouched", ret);
	free(a);
	free(ar);
	free(rs_in);
	free(rs);
	free(bc);
	free(red);
	free(ag);
	free(big);
	free(bigr);
}

/* Element i of rank r's block for rank d (distinct for every triple). */
static int64_t a2a_val(int r, int d, size_t i)
{
	return (int64_t)((uint64_t)r << 40 | (uint64_t)d << 32 | i) ^ 0x5a5a;
}

/*
 * Alltoall: int64 and uint8 blocks of odd counts, in place and out of
 * place at odd addresses; block d of rank r carries (r, d, i).
 */
static void coll_t_alltoall(void)
{
	static const size_t cnts[] = { 0, 1, 7, 1000, 40011 };
	size_t ci, i, cnt, es, big = 40011 * 8 * COLL_MAX_RANKS + 64;
	char *in = malloc(big), *out = malloc(big);
	int inplace, ret, d, u8;
	long bad;

	for (u8 = 0; u8 < 2; u8++)
	for (ci = 0; ci < sizeof(cnts) / sizeof(cnts[0]); ci++)
	for (inplace = 0; inplace < 2; inplace++) {
		enum hcomm_dtype dt = u8 ? HCOMM_UINT8 : HCOMM_INT64;
		char *src = in + 1, *dst = inplace ? in + 1 : out + 3;

		cnt = cnts[ci];
		if (coll_quick() && (u8 || cnt > 1000))
			continue;
		es = hcomm_dtype_size(dt);
		memset(out, 0x5a, big);
		for (d = 0; d < np; d++)
			for (i = 0; i < cnt; i++) {
				int64_t v = a2a_val(me, d, i);

				if (u8)
					src[(size_t)d * cnt + i] = (char)(v ^ (v >> 32));
				else
					memcpy(src + ((size_t)d * cnt + i) * 8, &v, 8);
			}
		ret = hcomm_alltoall(comm, src, dst, cnt, dt);
		bad = -1;
		for (d = 0; d < np && bad < 0; d++)
			for (i = 0; i < cnt && bad < 0; i++) {
				int64_t v = a2a_val(d, me, i), got = 0;

				if (u8) {
					if (dst[(size_t)d * cnt + i] !=
					    (char)(v ^ (v >> 32)))
						bad = (long)((size_t)d * cnt + i);
					continue;
				}
				memcpy(&got, dst + ((size_t)d * cnt + i) * 8, 8);
				if (got != v)
					bad = (long)((size_t)d * cnt + i);
			}
		if (!inplace && out[3 + (size_t)np * cnt * es] != 0x5a)
			bad = (long)((size_t)np * cnt);
		COLL_CHECK(!ret && bad < 0, "alltoall %d ranks %s count %zu %s: "
			   "ret %d, first wrong element %ld", np,
			   hcomm_dtype_name(dt), cnt,
			   inplace ? "in place" : "out of place", ret, bad);
	}
	ret = hcomm_alltoall(comm, in, out, 4, (enum hcomm_dtype)0);
	COLL_CHECK(ret == -HCOMM_ERR_INVAL, "alltoall, data type 0: "
		   "HCOMM_ERR_INVAL (%d)", ret);
	free(in);
	free(out);
}

#endif /* HCOMM_COLL_CHECK_H */
