/* SPDX-License-Identifier: MIT */
/*
 * Tests of the reduction and conversion kernels of the collectives
 * (hcomm_reduce.c), with every kernel set this CPU has: each type and
 * operation against scalar references written here (odd counts, buffers
 * at any byte offset, in place, guard bytes), integer wraparound; the
 * fp16 and bf16 conversions over every 16-bit pattern, and from fp32
 * against an ldexp-based rounding and the F16C instruction (every tie
 * and its neighbours, subnormals, the overflow boundary, random
 * patterns); the fused fp16 accumulation; the scaled conversion and its
 * overflow count; the average's division; bad arguments.
 *
 *   test_reduce [--so libhcomm.so.1] [--obj hcomm_reduce.o]
 *
 * --so checks the exports; --obj looks for packed SIMD instructions in
 * the kernels' code (x86-64, objdump).  HCOMM_TEST_EXHAUSTIVE=1 also
 * converts every fp32 bit pattern.  TAP on stdout, then "reduce: N
 * passed, N failed"; exit status 1 on any failure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hcomm_reduce.h"
#include "tap.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))
#define MAXN		4099
#define NDT		HCOMM_DTYPE__MAX
#define NOP		HCOMM_REDOP__MAX

static const size_t counts[] = { 0, 1, 7, 33, 1000, MAXN };

/* ------------------------------------------------------------------ */
/* Helpers                                                            */
/* ------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* splitmix64 */
static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void seed(uint64_t s)
{
	rng_state = s * 0x2545f4914f6cdd1dull + 1;
}

static uint32_t fbits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float bitsf(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static uint64_t dbits(double d)
{
	uint64_t u;

	memcpy(&u, &d, 8);
	return u;
}

static double bitsd(uint64_t u)
{
	double d;

	memcpy(&d, &u, 8);
	return d;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int is_float(int dt)
{
	return dt == HCOMM_FP32 || dt == HCOMM_FP64 || dt == HCOMM_FP16 ||
	       dt == HCOMM_BF16;
}

/* ------------------------------------------------------------------ */
/* Reference fp16 / bf16, by value (double, ldexp), not by bits       */
/* ------------------------------------------------------------------ */

/* fp16 (mbits 10, bias 15) or bf16 (7, 127) bits to their value. */
static double ref_dec(uint16_t h, int mbits, int bias)
{
	int emax = (1 << (15 - mbits)) - 1;
	int e = (h >> mbits) & emax;
	int m = h & ((1 << mbits) - 1);
	double v;

	if (e == emax)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp(m, 1 - bias - mbits);
	else
		v = ldexp(m + (1 << mbits), e - bias - mbits);
	return (h & 0x8000) ? -v : v;
}

static double ref_h2d(uint16_t h)
{
	return ref_dec(h, 10, 15);
}

static double ref_b2d(uint16_t h)
{
	return ref_dec(h, 7, 127);
}

/*
 * a > 0 rounded to p significant bits, but to no finer a step than
 * 2^qmin, ties to even: the floor of the scaled value and its fraction
 * (both exact in double).
 */
static double ref_round(double a, int p, int qmin)
{
	double m, fl, fr;
	int e, q;

	frexp(a, &e);			/* a in [2^(e-1), 2^e) */
	q = e - p;
	if (q < qmin)
		q = qmin;
	m = ldexp(a, -q);
	fl = floor(m);
	fr = m - fl;
	if (fr > 0.5 || (fr == 0.5 && fmod(fl, 2.0) != 0.0))
		fl += 1.0;
	return ldexp(fl, q);
}

/* The bits of a representable r >= 0. */
static uint16_t ref_enc(double r, int mbits, int bias)
{
	int e;

	if (r == 0)
		return 0;
	frexp(r, &e);
	if (e - 1 + bias <= 0)
		return (uint16_t)ldexp(r, bias - 1 + mbits);
	return (uint16_t)((e - 1 + bias) << mbits |
			  (int)(ldexp(r, mbits - e + 1) - ldexp(1, mbits)));
}

/* Correctly rounded fp16 (mbits 10) or bf16 (7) of v; NaN: quiet. */
static uint16_t ref_narrow(double v, int mbits, int bias)
{
	uint16_t sign = signbit(v) ? 0x8000 : 0;
	uint16_t inf = (uint16_t)(0x7fff & ~((1 << mbits) - 1));
	double a = fabs(v), r;

	if (isnan(v))
		return sign | inf | 1 << (mbits - 1);
	if (isinf(v))
		return sign | inf;
	if (a == 0)
		return sign;
	r = ref_round(a, mbits + 1, 1 - bias - mbits);
	if (r >= ldexp(1, bias + 1))
		return sign | inf;
	return sign | ref_enc(r, mbits, bias);
}

static uint16_t ref_d2h(double v)
{
	return ref_narrow(v, 10, 15);
}

static uint16_t ref_d2b(double v)
{
	return ref_narrow(v, 7, 127);
}

/* fp32 to fp16 / bf16: a NaN keeps sign and top payload, made quiet. */
static uint16_t ref_f2h(float f)
{
	uint32_t u = fbits(f);

	if (isnan(f))
		return (u >> 16 & 0x8000) | 0x7e00 | (u >> 13 & 0x3ff);
	return ref_d2h(f);
}

static uint16_t ref_f2b(float f)
{
	uint32_t u = fbits(f);

	if (isnan(f))
		return (uint16_t)(u >> 16) | 0x40;
	return ref_d2b(f);
}

/* The fp32 bits widening must give: the value, or the quiet NaN. */
static uint32_t ref_h2f_bits(uint16_t h)
{
	if ((h & 0x7fff) > 0x7c00)
		return (uint32_t)(h & 0x8000) << 16 | 0x7fc00000 |
		       (uint32_t)(h & 0x3ff) << 13;
	return fbits((float)ref_h2d(h));
}

static uint32_t ref_b2f_bits(uint16_t h)
{
	if ((h & 0x7fff) > 0x7f80)
		return (uint32_t)h << 16 | 0x00400000;
	return fbits((float)ref_b2d(h));
}

static int h_nan(uint16_t h)
{
	return (h & 0x7fff) > 0x7c00;
}

static int b_nan(uint16_t h)
{
	return (h & 0x7fff) > 0x7f80;
}

/* ------------------------------------------------------------------ */
/* Reference reductions, element by element                           */
/* ------------------------------------------------------------------ */

/* IEEE 754-2019 maximum / minimum, spelt out. */
static float ref_maxf(float a, float b, int max)
{
	if (isnan(a))
		return bitsf(fbits(a) | 0x00400000);
	if (isnan(b))
		return bitsf(fbits(b) | 0x00400000);
	if (a == b)			/* +0 above -0 */
		return (!!signbit(a) == max) ? b : a;
	return (a > b) == max ? a : b;
}

static double ref_maxd(double a, double b, int max)
{
	if (isnan(a))
		return bitsd(dbits(a) | 0x0008000000000000ull);
	if (isnan(b))
		return bitsd(dbits(b) | 0x0008000000000000ull);
	if (a == b)
		return (!!signbit(a) == max) ? b : a;
	return (a > b) == max ? a : b;
}

static double ref_fop(int op, double a, double b)
{
	switch (op) {
	case HCOMM_SUM:
	case HCOMM_AVG:
		return a + b;
	case HCOMM_PROD:
		return a * b;
	default:
		if (isnan(a) || isnan(b))
			return NAN;
		return ref_maxd(a, b, op == HCOMM_MAX);
	}
}

static int int_bits(int dt)
{
	return (int)hcomm_dtype_size(dt) * 8;
}

static int int_signed(int dt)
{
	return dt == HCOMM_INT8 || dt == HCOMM_INT32 || dt == HCOMM_INT64;
}

static __int128 ld_int(int dt, const void *p)
{
	int8_t i8;
	int32_t i32;
	int64_t i64;
	uint8_t u8;
	uint32_t u32;
	uint64_t u64;

	switch (dt) {
	case HCOMM_INT8:
		memcpy(&i8, p, 1);
		return i8;
	case HCOMM_INT32:
		memcpy(&i32, p, 4);
		return i32;
	case HCOMM_INT64:
		memcpy(&i64, p, 8);
		return i64;
	case HCOMM_UINT8:
		memcpy(&u8, p, 1);
		return u8;
	case HCOMM_UINT32:
		memcpy(&u32, p, 4);
		return u32;
	default:
		memcpy(&u64, p, 8);
		return u64;
	}
}

/* The low bytes of v (little endian) are the element. */
static void st_int(int dt, void *p, __int128 v)
{
	unsigned __int128 u = (unsigned __int128)v;
	unsigned char *c = p;
	size_t i;

	for (i = 0; i < hcomm_dtype_size(dt); i++, u >>= 8)
		c[i] = (unsigned char)u;
}

/*
 * Integer a op b: the exact value (128 bits hold every sum and product)
 * brought into [min, max] of the type by adding or subtracting 2^bits.
 */
static __int128 ref_iop(int dt, int op, __int128 a, __int128 b)
{
	__int128 span = (__int128)1 << int_bits(dt);
	__int128 lo = int_signed(dt) ? -span / 2 : 0, v;

	switch (op) {
	case HCOMM_MAX:
		return a > b ? a : b;
	case HCOMM_MIN:
		return a < b ? a : b;
	case HCOMM_PROD:
		if (int_bits(dt) == 64) {
			/* the product may not fit 128 signed bits */
			unsigned __int128 p = (unsigned __int128)a *
					      (unsigned __int128)b;

			v = (__int128)(uint64_t)p;
			break;
		}
		v = a * b;
		break;
	default:
		v = a + b;
		break;
	}
	v %= span;		/* in (-span, span) */
	if (v < lo)
		v += span;
	if (v >= lo + span)
		v -= span;
	return v;
}

/* out = a op b for one element of dt. */
static void ref_elem(int dt, int op, const void *a, const void *b, void *out)
{
	uint16_t h, g;
	float f, e;
	double x, y;

	switch (dt) {
	case HCOMM_FP32:
		memcpy(&f, a, 4);
		memcpy(&e, b, 4);
		if (op == HCOMM_SUM || op == HCOMM_AVG)
			f = f + e;
		else if (op == HCOMM_PROD)
			f = f * e;
		else
			f = ref_maxf(f, e, op == HCOMM_MAX);
		memcpy(out, &f, 4);
		break;
	case HCOMM_FP64:
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		if (op == HCOMM_SUM || op == HCOMM_AVG)
			x = x + y;
		else if (op == HCOMM_PROD)
			x = x * y;
		else
			x = ref_maxd(x, y, op == HCOMM_MAX);
		memcpy(out, &x, 8);
		break;
	case HCOMM_FP16:
		/* sum and product of two fp16 are exact in double */
		memcpy(&h, a, 2);
		memcpy(&g, b, 2);
		h = ref_d2h(ref_fop(op, ref_h2d(h), ref_h2d(g)));
		memcpy(out, &h, 2);
		break;
	case HCOMM_BF16:
		/* double rounding through double is harmless (53 >= 2*8+2) */
		memcpy(&h, a, 2);
		memcpy(&g, b, 2);
		h = ref_d2b(ref_fop(op, ref_b2d(h), ref_b2d(g)));
		memcpy(out, &h, 2);
		break;
	default:
		st_int(dt, out, ref_iop(dt, op, ld_int(dt, a), ld_int(dt, b)));
		break;
	}
}

/*
 * Element got matches want: the same bits, or both NaN with got quiet
 * (where want came through double, or both operands were NaN: which
 * NaN a sum returns then depends on the operand order the compiler chose).
 */
static int same_elem(int dt, const void *got, const void *want, int loose)
{
	uint64_t g = 0, w = 0;
	size_t sz = hcomm_dtype_size(dt);

	if (!memcmp(got, want, sz))
		return 1;
	if (!loose || !is_float(dt))
		return 0;
	memcpy(&g, got, sz);
	memcpy(&w, want, sz);
	switch (dt) {
	case HCOMM_FP32:
		return isnan(bitsf((uint32_t)g)) && isnan(bitsf((uint32_t)w)) &&
		       (g & 0x00400000);
	case HCOMM_FP64:
		return isnan(bitsd(g)) && isnan(bitsd(w)) &&
		       (g & 0x0008000000000000ull);
	case HCOMM_FP16:
		return h_nan((uint16_t)g) && h_nan((uint16_t)w) && (g & 0x200);
	default:
		return b_nan((uint16_t)g) && b_nan((uint16_t)w) && (g & 0x40);
	}
}

static int elem_nan(int dt, const void *p)
{
	uint64_t u = 0;

	memcpy(&u, p, hcomm_dtype_size(dt));
	switch (dt) {
	case HCOMM_FP32:
		return isnan(bitsf((uint32_t)u));
	case HCOMM_FP64:
		return isnan(bitsd(u));
	case HCOMM_FP16:
		return h_nan((uint16_t)u);
	case HCOMM_BF16:
		return b_nan((uint16_t)u);
	default:
		return 0;
	}
}

/* ------------------------------------------------------------------ */
/* Test data                                                          */
/* ------------------------------------------------------------------ */

static const uint32_t f32_special[] = {
	0x00000000, 0x80000000, 0x7f800000, 0xff800000,	/* +-0, +-inf */
	0x7fc00000, 0xffc00000, 0x7f800001, 0xff812345,	/* NaNs, sNaN */
	0x7fbfffff, 0x7fc12345, 0x7f7fffff, 0xff7fffff,	/* max finite */
	0x00000001, 0x80000001, 0x007fffff, 0x00800000,	/* subnormals */
	0x3f800000, 0xbf800000, 0x477fe000, 0x477ff000,	/* 65504 65520 */
	0x33000000, 0x33000001, 0x387fffff, 0x38800000,	/* fp16 edges */
	0xc77fe000, 0x477fefff, 0x7f7f8000, 0x7f7f7fff,	/* bf16 edges */
};

static const uint64_t f64_special[] = {
	0x0000000000000000ull, 0x8000000000000000ull,
	0x7ff0000000000000ull, 0xfff0000000000000ull,
	0x7ff8000000000000ull, 0xfff8000000000000ull,
	0x7ff0000000000001ull, 0x7ff4000000000abcull,
	0x7fefffffffffffffull, 0xffefffffffffffffull,
	0x0000000000000001ull, 0x8000000000000001ull,
	0x000fffffffffffffull, 0x0010000000000000ull,
	0x3ff0000000000000ull, 0xbff0000000000000ull,
};

/* A float of moderate size most of the time, else anything. */
static float rnd_f32(void)
{
	uint64_t r = rnd();

	switch (r % 16) {
	case 0:
	case 1:
		return bitsf(f32_special[(r >> 8) % NELEM(f32_special)]);
	case 2:
		return bitsf((uint32_t)(r >> 32));
	default:
		/* sign, exponent -20 .. 20, any mantissa */
		return bitsf((uint32_t)(r >> 63) << 31 |
			     (uint32_t)(107 + (r >> 8) % 41) << 23 |
			     (uint32_t)(r >> 16 & 0x7fffff));
	}
}

static double rnd_f64(void)
{
	uint64_t r = rnd(), m = rnd() & 0x000fffffffffffffull;

	switch (r % 16) {
	case 0:
	case 1:
		return bitsd(f64_special[(r >> 8) % NELEM(f64_special)]);
	case 2:
		return bitsd(rnd());
	default:
		return bitsd((r >> 63) << 63 | (1003 + (r >> 8) % 41) << 52 |
			     m);
	}
}

/* Any 16-bit pattern (all classes), often a small or special one. */
static uint16_t rnd_half(int bf16)
{
	uint64_t r = rnd();
	static const uint16_t hs[] = {
		0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0x7bff,
		0xfbff, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0x5bf8,
	};
	static const uint16_t bs[] = {
		0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x7f7f,
		0xff7f, 0x0001, 0x8001, 0x007f, 0x0080, 0x3f80, 0x7f00,
	};

	switch (r % 8) {
	case 0:
		return bf16 ? bs[(r >> 8) % NELEM(bs)] :
			      hs[(r >> 8) % NELEM(hs)];
	case 1:
	case 2:
		return (uint16_t)(r >> 16);
	default:
		/* sign, a mid exponent, any mantissa */
		if (bf16)
			return (uint16_t)((r >> 63) << 15 |
					  (120 + (r >> 8) % 16) << 7 |
					  (r >> 16 & 0x7f));
		return (uint16_t)((r >> 63) << 15 | (8 + (r >> 8) % 16) << 10 |
				  (r >> 16 & 0x3ff));
	}
}

static void rnd_elem(int dt, void *p)
{
	static const int64_t edges[] = {
		0, 1, -1, 2, INT64_MIN, INT64_MAX, INT32_MIN, INT32_MAX,
		INT8_MIN, INT8_MAX, UINT8_MAX, UINT32_MAX, 0x80, 0x8000000,
	};
	uint64_t r;
	uint16_t h;
	float f;
	double d;

	switch (dt) {
	case HCOMM_FP32:
		f = rnd_f32();
		memcpy(p, &f, 4);
		break;
	case HCOMM_FP64:
		d = rnd_f64();
		memcpy(p, &d, 8);
		break;
	case HCOMM_FP16:
	case HCOMM_BF16:
		h = rnd_half(dt == HCOMM_BF16);
		memcpy(p, &h, 2);
		break;
	default:
		r = rnd();
		if (r % 5 == 0)
			r = (uint64_t)edges[(r >> 8) % NELEM(edges)];
		else if (r % 5 == 1)
			r = (r >> 8) % 7;	/* small: exact products */
		memcpy(p, &r, hcomm_dtype_size(dt));	/* little endian */
		break;
	}
}

/* ------------------------------------------------------------------ */
/* Reductions: every type and operation against the reference         */
/* ------------------------------------------------------------------ */

#define ARENA	((MAXN + 8) * 8 + 64)
#define GUARD_IO	0xa5
#define GUARD_IN	0x5a
#define GUARD_OUT	0x3c
#define NPLACE		6

static unsigned char *io_arena, *in_arena, *ra, *rb, *rw, *out_arena,
	*a_arena;
/* FNV-1a of each case's result, to compare the kernel sets */
static uint64_t result_hash[NDT][NOP][NELEM(counts)][NPLACE];
static int hashed[NDT][NOP][NELEM(counts)][NPLACE];

static uint64_t fnv(const void *p, size_t n)
{
	const unsigned char *c = p;
	uint64_t h = 0xcbf29ce484222325ull;

	while (n--)
		h = (h ^ *c++) * 0x100000001b3ull;
	return h;
}

/* Byte offsets of inout and in: element aligned, then misaligned. */
static int place(size_t sz, int i, size_t *pio, size_t *pin)
{
	static const size_t off[NPLACE][2] = {
		{ 0, 0 }, { 1, 0 }, { 0, 1 }, { 1, 1 }, { 0, 0 }, { 0, 0 },
	};

	if (i < 4) {		/* 0 or 1 element */
		*pio = off[i][0] * sz;
		*pin = off[i][1] * sz;
		return 1;
	}
	if (sz == 1)
		return 0;
	if (i == 4) {		/* 1 and 3 bytes */
		*pio = 1;
		*pin = 3;
	} else {		/* size - 1 and 2 bytes + 1 element */
		*pio = sz - 1;
		*pin = sz + 2;
	}
	return 1;
}

/* One case; 0 or why it failed, in why. */
static int run_case(int isa, int dt, int op, int ci, int pi, char *why,
		    size_t wlen)
{
	size_t sz = hcomm_dtype_size(dt), n = counts[ci], pio, pin, i;
	int loose = dt == HCOMM_FP16 || dt == HCOMM_BF16;
	int rc;

	if (!place(sz, pi, &pio, &pin))
		return 0;
	seed((uint64_t)dt << 40 | (uint64_t)op << 32 | ci << 8 | pi);
	for (i = 0; i < n; i++) {
		rnd_elem(dt, ra + i * sz);
		rnd_elem(dt, rb + i * sz);
		ref_elem(dt, op, ra + i * sz, rb + i * sz, rw + i * sz);
	}
	memset(io_arena, GUARD_IO, ARENA);
	memset(in_arena, GUARD_IN, ARENA);
	memcpy(io_arena + pio, ra, n * sz);
	memcpy(in_arena + pin, rb, n * sz);
	rc = hcomm__reduce(dt, op, io_arena + pio, in_arena + pin, n);
	if (rc) {
		snprintf(why, wlen, "n %zu: returned %d", n, rc);
		return 1;
	}
	for (i = 0; i < n; i++) {
		const unsigned char *g = io_arena + pio + i * sz;
		/* two NaNs: either may come out of a sum or product */
		int nan2 = op != HCOMM_MAX && op != HCOMM_MIN &&
			   elem_nan(dt, ra + i * sz) &&
			   elem_nan(dt, rb + i * sz);

		if (!same_elem(dt, g, rw + i * sz, loose || nan2)) {
			uint64_t gv = 0, av = 0, bv = 0, wv = 0;

			memcpy(&gv, g, sz);
			memcpy(&av, ra + i * sz, sz);
			memcpy(&bv, rb + i * sz, sz);
			memcpy(&wv, rw + i * sz, sz);
			snprintf(why, wlen, "n %zu at +%zu/+%zu: [%zu] %#llx "
				 "op %#llx gave %#llx, want %#llx", n, pio,
				 pin, i, (unsigned long long)av,
				 (unsigned long long)bv,
				 (unsigned long long)gv,
				 (unsigned long long)wv);
			return 1;
		}
	}
	for (i = 0; i < ARENA; i++)
		if ((i < pio || i >= pio + n * sz) && io_arena[i] != GUARD_IO)
			break;
	if (i < ARENA) {
		snprintf(why, wlen, "n %zu at +%zu: wrote byte %zu outside",
			 n, pio, i);
		return 1;
	}
	for (i = 0; i < ARENA; i++)
		if (i < pin || i >= pin + n * sz ? in_arena[i] != GUARD_IN :
		    in_arena[i] != rb[i - pin])
			break;
	if (i < ARENA) {
		snprintf(why, wlen, "n %zu: changed in at byte %zu", n, i);
		return 1;
	}
	if (hashed[dt][op][ci][pi] &&
	    result_hash[dt][op][ci][pi] != fnv(io_arena + pio, n * sz)) {
		snprintf(why, wlen, "n %zu at +%zu/+%zu: other bits than "
			 "the first kernel set gave", n, pio, pin);
		return 1;
	}
	result_hash[dt][op][ci][pi] = fnv(io_arena + pio, n * sz);
	hashed[dt][op][ci][pi] = 1;
	(void)isa;
	/* out of place (hcomm__reduce3): the same bits, inputs untouched */
	memset(out_arena, GUARD_OUT, ARENA);
	memset(a_arena, GUARD_IN, ARENA);
	memcpy(a_arena + pin, ra, n * sz);
	rc = hcomm__reduce3(dt, op, out_arena + pio, a_arena + pin,
			    in_arena + pin, n);
	if (rc) {
		snprintf(why, wlen, "n %zu: reduce3 returned %d", n, rc);
		return 1;
	}
	if (memcmp(out_arena + pio, io_arena + pio, n * sz)) {
		snprintf(why, wlen, "n %zu at +%zu/+%zu: reduce3 gave other "
			 "bits than reduce", n, pio, pin);
		return 1;
	}
	for (i = 0; i < ARENA; i++)
		if ((i < pio || i >= pio + n * sz) &&
		    out_arena[i] != GUARD_OUT)
			break;
	if (i < ARENA) {
		snprintf(why, wlen, "n %zu at +%zu: reduce3 wrote byte %zu "
			 "outside", n, pio, i);
		return 1;
	}
	for (i = 0; i < ARENA; i++)
		if (i < pin || i >= pin + n * sz ?
		    a_arena[i] != GUARD_IN || in_arena[i] != GUARD_IN :
		    a_arena[i] != ra[i - pin] || in_arena[i] != rb[i - pin])
			break;
	if (i < ARENA) {
		snprintf(why, wlen, "n %zu: reduce3 changed an input at byte "
			 "%zu", n, i);
		return 1;
	}
	return 0;
}

static void test_reduce_all(int isa)
{
	const char *in = hcomm__reduce_isa_name(isa);
	char why[256];
	int dt, op, ci, pi, bad;

	for (dt = 1; dt < NDT; dt++) {
		for (op = 1; op < NOP; op++) {
			bad = 0;
			why[0] = 0;
			for (ci = 0; ci < (int)NELEM(counts) && !bad; ci++)
				for (pi = 0; pi < NPLACE && !bad; pi++)
					bad = run_case(isa, dt, op, ci, pi, why,
						       sizeof(why));
			if (bad)
				printf("# %s\n", why);
			ok(!bad, "%s: %s %s, counts 0 .. %d, aligned and "
			   "misaligned, in place and out of place: as the "
			   "reference%s", in,
			   hcomm_dtype_name(dt), hcomm_redop_name(op), MAXN,
			   isa ? ", same bits as generic" : "");
		}
	}
}

/* Wraparound, spelt out. */
static void test_wrap(void)
{
	int8_t i8a[] = { INT8_MAX, INT8_MIN, INT8_MIN, -7, 100 };
	int8_t i8b[] = { 1, -1, -1, 2, 3 };
	int32_t i32a[] = { INT32_MAX, INT32_MIN, 65536, -3 };
	int32_t i32b[] = { 1, -1, 65536, 5 };
	int64_t i64a[] = { INT64_MAX, INT64_MIN, INT64_MIN, 1LL << 62 };
	int64_t i64b[] = { 1, -1, -1, 4 };
	uint8_t u8a[] = { 250, 0, 16, 255 };
	uint8_t u8b[] = { 10, 255, 16, 255 };
	uint32_t u32a[] = { UINT32_MAX, 0, 65536 };
	uint32_t u32b[] = { 2, UINT32_MAX, 65537 };
	uint64_t u64a[] = { UINT64_MAX, 1ULL << 63 };
	uint64_t u64b[] = { 1, 2 };
	int good = 1;

	/* sums */
	good &= !hcomm__reduce(HCOMM_INT8, HCOMM_SUM, i8a, i8b, 2);
	good &= i8a[0] == INT8_MIN && i8a[1] == INT8_MAX;
	good &= !hcomm__reduce(HCOMM_INT32, HCOMM_SUM, i32a, i32b, 2);
	good &= i32a[0] == INT32_MIN && i32a[1] == INT32_MAX;
	good &= !hcomm__reduce(HCOMM_INT64, HCOMM_SUM, i64a, i64b, 2);
	good &= i64a[0] == INT64_MIN && i64a[1] == INT64_MAX;
	good &= !hcomm__reduce(HCOMM_UINT8, HCOMM_SUM, u8a, u8b, 2);
	good &= u8a[0] == 4 && u8a[1] == 255;
	good &= !hcomm__reduce(HCOMM_UINT32, HCOMM_SUM, u32a, u32b, 2);
	good &= u32a[0] == 1 && u32a[1] == UINT32_MAX;
	good &= !hcomm__reduce(HCOMM_UINT64, HCOMM_SUM, u64a, u64b, 1);
	good &= u64a[0] == 0;
	ok(good, "integer sums wrap: INT_MAX + 1 = INT_MIN, INT_MIN - 1 = "
	   "INT_MAX, 250 + 10 = 4 (uint8), UINT_MAX + 2 = 1");

	good = 1;
	good &= !hcomm__reduce(HCOMM_INT8, HCOMM_PROD, i8a + 2, i8b + 2, 3);
	good &= i8a[2] == INT8_MIN && i8a[3] == -14 && i8a[4] == 44;
	good &= !hcomm__reduce(HCOMM_INT32, HCOMM_PROD, i32a + 2, i32b + 2,
			       2);
	good &= i32a[2] == 0 && i32a[3] == -15;
	good &= !hcomm__reduce(HCOMM_INT64, HCOMM_PROD, i64a + 2, i64b + 2,
			       2);
	good &= i64a[2] == INT64_MIN && i64a[3] == 0;
	good &= !hcomm__reduce(HCOMM_UINT8, HCOMM_PROD, u8a + 2, u8b + 2, 2);
	good &= u8a[2] == 0 && u8a[3] == 1;
	good &= !hcomm__reduce(HCOMM_UINT32, HCOMM_PROD, u32a + 2, u32b + 2,
			       1);
	good &= u32a[2] == 65536;
	good &= !hcomm__reduce(HCOMM_UINT64, HCOMM_PROD, u64a + 1, u64b + 1,
			       1);
	good &= u64a[1] == 0;
	ok(good, "integer products wrap: INT8_MIN * -1 = INT8_MIN, 100 * 3 "
	   "= 44 (int8), 65536^2 = 0 (int32), 2^63 * 2 = 0 (uint64)");
}

/* IEEE special cases, spelt out. */
static void test_float_specials(void)
{
	float a[] = { -0.0f, -0.0f, 0.0f, -0.0f, INFINITY, INFINITY,
		      FLT_MAX, 1.0f, NAN, 2.0f };
	float b[] = { -0.0f, 0.0f, -0.0f, 0.0f, -INFINITY, 1.0f,
		      FLT_MAX, NAN, 3.0f, -INFINITY };
	float c[NELEM(a)], d[NELEM(a)];
	uint16_t h[] = { 0x7bff, 0x8000, 0x0001, 0x7e00, 0x0200 };
	uint16_t g[] = { 0x7bff, 0x8000, 0x8001, 0x3c00, 0x0200 };
	uint32_t sn = 0x7f800001;
	int good = 1;

	memcpy(c, a, sizeof(a));
	good &= !hcomm__reduce(HCOMM_FP32, HCOMM_SUM, c, b, NELEM(a));
	good &= fbits(c[0]) == 0x80000000 && fbits(c[1]) == 0 &&
		fbits(c[2]) == 0 && isnan(c[4]) && c[5] == INFINITY &&
		c[6] == INFINITY && isnan(c[7]) && isnan(c[8]) &&
		c[9] == -INFINITY;
	memcpy(c, a, sizeof(a));
	good &= !hcomm__reduce(HCOMM_FP32, HCOMM_MAX, c, b, NELEM(a));
	memcpy(d, a, sizeof(a));
	good &= !hcomm__reduce(HCOMM_FP32, HCOMM_MIN, d, b, NELEM(a));
	good &= fbits(c[1]) == 0 && fbits(c[2]) == 0 && fbits(c[3]) == 0;
	good &= fbits(d[1]) == 0x80000000 && fbits(d[2]) == 0x80000000 &&
		fbits(d[3]) == 0x80000000;
	good &= isnan(c[7]) && isnan(c[8]) && isnan(d[7]) && isnan(d[8]);
	/* a signalling NaN comes out quiet */
	memcpy(c, &sn, 4);
	c[1] = 1.0f;
	good &= !hcomm__reduce(HCOMM_FP32, HCOMM_MAX, c, b + 5, 1);
	good &= fbits(c[0]) == 0x7fc00001;
	ok(good, "fp32: -0 + -0 = -0, -0 + 0 = 0, inf - inf NaN, max(-0, 0) "
	   "= 0, min(0, -0) = -0, max with a NaN is a NaN, an sNaN comes "
	   "out quiet, FLT_MAX + FLT_MAX = inf");

	good = !hcomm__reduce(HCOMM_FP16, HCOMM_SUM, h, g, NELEM(h));
	/* 65504 + 65504 -> inf; -0 + -0 = -0; 2^-24 - 2^-24 = +0 */
	good &= h[0] == 0x7c00 && h[1] == 0x8000 && h[2] == 0x0000;
	good &= h[3] == 0x7e00 && h[4] == 0x0400;	/* subnormal sum */
	ok(good, "fp16: 65504 + 65504 = inf, -0 + -0 = -0, 2^-24 - 2^-24 = "
	   "+0, NaN + 1 = NaN, two subnormals add up to the least normal");
}

/* ------------------------------------------------------------------ */
/* Conversions                                                        */
/* ------------------------------------------------------------------ */

#if defined(__x86_64__)
__attribute__((target("avx,f16c")))
static void hw_f2h(uint16_t *dst, const float *src, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

static int have_f16c(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("f16c");
}
#else
static void hw_f2h(uint16_t *dst, const float *src, size_t n)
{
	(void)dst;
	(void)src;
	(void)n;
}

static int have_f16c(void)
{
	return 0;
}
#endif

/* Every 16-bit pattern widened, and back. */
static void test_widen_all(const char *in, int bf16)
{
	static uint16_t h[65536], back[65536];
	static float f[65536];
	const char *t = bf16 ? "bf16" : "fp16";
	unsigned int i, bad = 0, badrt = 0;

	for (i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	if (bf16) {
		hcomm__bf16_to_fp32(f, h, 65536);
		hcomm__fp32_to_bf16(back, f, 65536);
	} else {
		hcomm__fp16_to_fp32(f, h, 65536);
		hcomm__fp32_to_fp16(back, f, 65536);
	}
	for (i = 0; i < 65536; i++) {
		uint32_t want = bf16 ? ref_b2f_bits(h[i]) : ref_h2f_bits(h[i]);
		int nan = bf16 ? b_nan(h[i]) : h_nan(h[i]);
		uint16_t q = (uint16_t)(h[i] | (bf16 ? 0x40 : 0x200));

		if (fbits(f[i]) != want && bad++ < 3)
			printf("# %s %#06x -> %#010x, want %#010x\n", t, h[i],
			       fbits(f[i]), want);
		if (back[i] != (nan ? q : h[i]) && badrt++ < 3)
			printf("# %s %#06x -> fp32 -> %#06x\n", t, h[i],
			       back[i]);
	}
	ok(!bad, "%s: all 65536 %s patterns widen to their exact fp32 value "
	   "(a NaN: sign and payload kept, made quiet)", in, t);
	ok(!badrt, "%s: all 65536 %s patterns come back from fp32 unchanged "
	   "(a signalling NaN comes back quiet)", in, t);
}

/*
 * fp32 values where narrowing is hard: each fp16 (bf16) value, the fp32
 * midpoint to the next one and the fp32 values either side of it, both
 * signs (every tie at every exponent, the subnormal steps, 65504 | 65520
 * | inf); the specials; random patterns.  Returns how many.
 */
static size_t hard_values(float *v, size_t max, int bf16)
{
	size_t n = 0, i;
	unsigned int h;

	for (h = 0; h < (bf16 ? 0x7f80u : 0x7c00u); h++) {
		double lo = bf16 ? ref_b2d((uint16_t)h) : ref_h2d((uint16_t)h);
		double hi = bf16 ? ref_b2d((uint16_t)(h + 1)) :
				   ref_h2d((uint16_t)(h + 1));
		float mid = (float)((lo + hi) / 2);	/* exact in fp32 */

		if (isinf(hi))		/* the last finite: its half step */
			mid = (float)(lo + (lo - (bf16 ?
				ref_b2d((uint16_t)(h - 1)) :
				ref_h2d((uint16_t)(h - 1)))) / 2);
		if (n + 8 > max)
			break;
		v[n++] = (float)lo;
		v[n++] = mid;
		v[n++] = nextafterf(mid, 0);
		v[n++] = nextafterf(mid, INFINITY);
		v[n++] = -(float)lo;
		v[n++] = -mid;
		v[n++] = -nextafterf(mid, 0);
		v[n++] = -nextafterf(mid, INFINITY);
	}
	for (i = 0; i < NELEM(f32_special) && n < max; i++)
		v[n++] = bitsf(f32_special[i]);
	while (n < max)
		v[n++] = bitsf((uint32_t)rnd());
	return n;
}

#define NHARD	(65536 * 8 + 300000)

/* fp32 -> fp16 / bf16 against the references and the instruction. */
static void test_narrow(const char *in, int bf16)
{
	static float v[NHARD];
	static uint16_t got[NHARD], hw[NHARD];
	const char *t = bf16 ? "bf16" : "fp16";
	size_t n, i, bad = 0, badhw = 0, ovf, want_ovf = 0;

	seed(bf16 ? 77 : 55);
	n = hard_values(v, NHARD, bf16);
	ovf = bf16 ? hcomm__fp32_to_bf16(got, v, n) :
		     hcomm__fp32_to_fp16(got, v, n);
	for (i = 0; i < n; i++) {
		uint16_t want = bf16 ? ref_f2b(v[i]) : ref_f2h(v[i]);

		want_ovf += !isinf(v[i]) && !isnan(v[i]) &&
			    (want & 0x7fff) == (bf16 ? 0x7f80 : 0x7c00);
		if (got[i] != want && bad++ < 3)
			printf("# %s %#010x (%a) -> %#06x, want %#06x\n", t,
			       fbits(v[i]), v[i], got[i], want);
	}
	ok(!bad, "%s: fp32 -> %s rounds to nearest even as the ldexp "
	   "reference over %zu values (every tie and its neighbours, "
	   "subnormals, the overflow edge, NaN payloads, random)", in, t, n);
	ok(ovf == want_ovf, "%s: fp32 -> %s reports %zu finite inputs that "
	   "became inf (want %zu)", in, t, ovf, want_ovf);
	if (bf16)
		return;
	if (!have_f16c()) {
		skip("%s: fp32 -> fp16 against the F16C instruction: this CPU "
		     "has no F16C", in);
		return;
	}
	hw_f2h(hw, v, n);
	for (i = 0; i < n; i++)
		if (hw[i] != got[i] && badhw++ < 3)
			printf("# %#010x -> %#06x, F16C %#06x\n", fbits(v[i]),
			       got[i], hw[i]);
	ok(!badhw, "%s: fp32 -> fp16 gives the F16C instruction's bits over "
	   "the same %zu values", in, n);
}

/* Every fp32 pattern (HCOMM_TEST_EXHAUSTIVE=1), in blocks. */
static void test_narrow_exhaustive(const char *in)
{
	enum { B = 1 << 16 };
	static float v[B];
	static uint16_t got[B], want[B], gotb[B];
	uint64_t base, bad = 0, badb = 0;
	int hw = have_f16c();
	uint32_t i;
	double t0 = now_s();

	for (base = 0; base < (1ull << 32); base += B) {
		for (i = 0; i < B; i++)
			v[i] = bitsf((uint32_t)(base + i));
		hcomm__fp32_to_fp16(got, v, B);
		hcomm__fp32_to_bf16(gotb, v, B);
		if (hw)
			hw_f2h(want, v, B);
		for (i = 0; i < B; i++) {
			if (!hw)
				want[i] = ref_f2h(v[i]);
			if (got[i] != want[i] && bad++ < 3)
				printf("# %#010x -> %#06x, want %#06x\n",
				       fbits(v[i]), got[i], want[i]);
			/* every 16th against the slow reference */
			if (!(i & 15) && gotb[i] != ref_f2b(v[i]) &&
			    badb++ < 3)
				printf("# %#010x -> bf16 %#06x\n",
				       fbits(v[i]), gotb[i]);
		}
	}
	ok(!bad, "%s: all 2^32 fp32 patterns -> fp16 as %s (%.0f s)", in,
	   hw ? "F16C" : "the reference", now_s() - t0);
	ok(!badb, "%s: 2^28 fp32 patterns (every 16th) -> bf16 as the "
	   "reference", in);
}

/* The scaled conversion: fp16 of the fp32 product, and its overflows. */
static void test_scaled(const char *in)
{
	static const float scales[] = {
		1.0f, 0.5f, 0.25f, 1.0f / 3, 1.0f / 6, 1.0f / 7, 2.0f, 3.0f,
		1e-3f, 1024.0f,
	};
	enum { N = 20011 };
	static float v[N];
	static uint16_t got[N];
	size_t i, k, bad = 0, badovf = 0, ovf, want_ovf, total = 0;
	size_t off_near = 0;

	seed(99);
	for (i = 0; i < N; i++) {
		uint64_t r = rnd();

		/* around fp16's range, its overflow edge, and anything */
		if (r % 4 == 0)
			v[i] = bitsf((uint32_t)(r >> 32));
		else if (r % 4 == 1)
			v[i] = (r & 256 ? -1 : 1) *
			       (65504.0f + (float)(r >> 40) / (1 << 20) * 64);
		else
			v[i] = bitsf((uint32_t)(r >> 63) << 31 |
				     (uint32_t)(90 + (r >> 8) % 60) << 23 |
				     (uint32_t)(r >> 16 & 0x7fffff));
	}
	for (k = 0; k < NELEM(scales); k++) {
		/* odd lengths and offsets: the instruction path's tails */
		size_t off = k % 5, n = N - off - k;

		ovf = hcomm__fp32_to_fp16_scaled(got + off, v + off, n,
						 scales[k]);
		want_ovf = 0;
		for (i = off; i < off + n; i++) {
			uint16_t want;

			uint16_t near;

			/* the product rounded to fp32, then to fp16 */
			want = ref_f2h((float)((double)v[i] * scales[k]));
			want_ovf += isfinite(v[i]) && (want & 0x7fff) == 0x7c00;
			if (got[i] != want && bad++ < 3)
				printf("# %a * %a -> %#06x, want %#06x\n", v[i],
				       scales[k], got[i], want);
			/* the fp16 nearest the exact product, or next to it */
			near = isnan(v[i]) ? want :
			       ref_d2h((double)v[i] * scales[k]);
			if (near != want)
				off_near++;
			if (abs((int)near - (int)want) > 1 && bad++ < 3)
				printf("# %a * %a -> %#06x, nearest %#06x\n",
				       v[i], scales[k], want, near);
		}
		total += want_ovf;
		if (ovf != want_ovf && badovf++ < 3)
			printf("# scale %a: %zu overflows reported, want %zu\n",
			       scales[k], ovf, want_ovf);
	}
	ok(!bad, "%s: fp32 * scale -> fp16 is the fp32 product rounded to "
	   "fp16 (10 scales: 1, 1/2, 1/3, 1/7, 2, 1024, ...), at most one "
	   "step from the fp16 nearest the exact product (%zu of %d were "
	   "not that)", in, off_near, (int)NELEM(scales) * N);
	ok(!badovf && total > 1000, "%s: the scaled conversion counts the "
	   "finite inputs that overflowed (%zu in all)", in, total);
}

/* acc op= fp16 wire data, against fp32 arithmetic on the values. */
static void test_fp16_into_fp32(const char *in)
{
	enum { N = 2053 };
	static float acc[N + 1], want[N + 1];
	static uint16_t h[N + 1];
	size_t i, bad;
	float wide;
	int op, rc;

	for (op = 1; op < NOP; op++) {
		seed(1000 + op);
		for (i = 0; i < N; i++) {
			acc[i + 1] = rnd_f32();
			h[i] = rnd_half(0);
			want[i + 1] = acc[i + 1];
			wide = (float)ref_h2d(h[i]);
			ref_elem(HCOMM_FP32, op, &acc[i + 1], &wide,
				 &want[i + 1]);
		}
		/* acc one element in, h at its start: differently aligned */
		rc = hcomm__reduce_fp16_into_fp32(op, acc + 1, h, N);
		for (i = 1, bad = 0; i <= N; i++)
			if (!same_elem(HCOMM_FP32, &acc[i], &want[i], 1) &&
			    bad++ < 3)
				printf("# [%zu] %a (%#06x) -> %a, want %a\n", i,
				       want[i], h[i - 1], acc[i], want[i]);
		ok(!rc && !bad, "%s: fp16 accumulated into fp32 with %s "
		   "matches fp32 arithmetic on the widened values", in,
		   hcomm_redop_name(op));
	}
}

/* ------------------------------------------------------------------ */
/* Average                                                            */
/* ------------------------------------------------------------------ */

/* a / d truncated toward zero, by magnitudes. */
static __int128 ref_idiv(__int128 a, unsigned int d)
{
	return a < 0 ? -(-a / d) : a / d;
}

static void test_avg(const char *in)
{
	static const unsigned int divs[] = { 1, 2, 3, 4, 5, 7, 8, 1000, 65535 };
	enum { N = 1031 };
	static unsigned char buf[N * 8 + 8], src[N * 8];
	unsigned char want[8];
	int dt, rc;
	size_t i, k, bad;

	for (dt = 1; dt < NDT; dt++) {
		size_t sz = hcomm_dtype_size(dt);

		bad = 0;
		rc = 0;
		for (k = 0; k < NELEM(divs); k++) {
			unsigned int d = divs[k];
			size_t off = k % 3;	/* misaligned too */

			seed(2000 + dt * 16 + k);
			for (i = 0; i < N; i++)
				rnd_elem(dt, src + i * sz);
			memcpy(buf + off, src, N * sz);
			rc |= hcomm__reduce_finish_avg(dt, buf + off, N, d);
			for (i = 0; i < N; i++) {
				const void *s = src + i * sz;
				uint16_t h;
				float f;
				double x;

				switch (dt) {
				case HCOMM_FP32:
					memcpy(&f, s, 4);
					f = (float)((double)f / d);
					memcpy(want, &f, 4);
					break;
				case HCOMM_FP64:
					memcpy(&x, s, 8);
					x = x / d;
					memcpy(want, &x, 8);
					break;
				case HCOMM_FP16:
					memcpy(&h, s, 2);
					h = ref_d2h(ref_h2d(h) / d);
					memcpy(want, &h, 2);
					break;
				case HCOMM_BF16:
					memcpy(&h, s, 2);
					h = ref_d2b(ref_b2d(h) / d);
					memcpy(want, &h, 2);
					break;
				default:
					st_int(dt, want,
					       ref_idiv(ld_int(dt, s), d));
					break;
				}
				if (!same_elem(dt, buf + off + i * sz, want,
					       1) && bad++ < 3)
					printf("# %s / %u [%zu]\n",
					       hcomm_dtype_name(dt), d, i);
			}
		}
		ok(!rc && !bad, "%s: avg of %s: the division rounds %s", in,
		   hcomm_dtype_name(dt), is_float(dt) ? "to nearest (once)" :
		   "toward zero");
	}
}

static void test_avg_int(void)
{
	int32_t a[] = { -7, 7, -1, INT32_MIN, 9 };
	int32_t b[] = { 0, 0, 0, 0, -2 };
	int8_t c[] = { -128, 127, -3 };
	uint64_t u[] = { UINT64_MAX, 5 };
	int good;

	good = !hcomm__reduce(HCOMM_INT32, HCOMM_AVG, a, b, 5);
	good &= !hcomm__reduce_finish_avg(HCOMM_INT32, a, 5, 2);
	good &= a[0] == -3 && a[1] == 3 && a[2] == 0 &&
		a[3] == INT32_MIN / 2 && a[4] == 3;
	good &= !hcomm__reduce_finish_avg(HCOMM_INT8, c, 3, 2);
	good &= c[0] == -64 && c[1] == 63 && c[2] == -1;
	good &= !hcomm__reduce_finish_avg(HCOMM_UINT64, u, 2, 2);
	good &= u[0] == UINT64_MAX / 2 && u[1] == 2;
	ok(good, "avg of integers truncates toward zero: (-7 + 0) / 2 = -3, "
	   "7 / 2 = 3, -1 / 2 = 0, -3 / 2 = -1 (int8)");
}

/* ------------------------------------------------------------------ */
/* Arguments, names, exports, generated code                          */
/* ------------------------------------------------------------------ */

static void test_args(void)
{
	static const size_t sizes[NDT] = {
		[HCOMM_FP32] = 4, [HCOMM_FP64] = 8, [HCOMM_FP16] = 2,
		[HCOMM_BF16] = 2, [HCOMM_INT8] = 1, [HCOMM_INT32] = 4,
		[HCOMM_INT64] = 8, [HCOMM_UINT8] = 1, [HCOMM_UINT32] = 4,
		[HCOMM_UINT64] = 8,
	};
	static const char *const names[NDT] = {
		"?", "fp32", "fp64", "fp16", "bf16", "int8", "int32",
		"int64", "uint8", "uint32", "uint64",
	};
	static const char *const ops[NOP] = {
		"?", "sum", "prod", "max", "min", "avg",
	};
	float x[4] = { 1, 2, 3, 4 }, y[4] = { 1, 1, 1, 1 };
	uint16_t h[4] = { 0 };
	int dt, op, good = 1;

	for (dt = -1; dt <= NDT; dt++) {
		size_t want = dt > 0 && dt < NDT ? sizes[dt] : 0;
		const char *nm = dt > 0 && dt < NDT ? names[dt] : "?";

		good &= hcomm_dtype_size(dt) == want;
		good &= !strcmp(hcomm_dtype_name(dt), nm);
	}
	for (op = -1; op <= NOP; op++)
		good &= !strcmp(hcomm_redop_name(op), op > 0 && op < NOP ?
				ops[op] : "?");
	ok(good, "hcomm_dtype_size: 4 8 2 2 1 4 8 1 4 8, 0 for 0, -1 and "
	   "%d; the names, \"?\" for others", NDT);

	good = 1;
	good &= hcomm__reduce(0, HCOMM_SUM, x, y, 4) == -HCOMM_ERR_INVAL;
	good &= hcomm__reduce(NDT, HCOMM_SUM, x, y, 4) == -HCOMM_ERR_INVAL;
	good &= hcomm__reduce(-3, HCOMM_SUM, x, y, 0) == -HCOMM_ERR_INVAL;
	good &= hcomm__reduce(HCOMM_FP32, 0, x, y, 4) == -HCOMM_ERR_INVAL;
	good &= hcomm__reduce(HCOMM_FP32, NOP, x, y, 4) == -HCOMM_ERR_INVAL;
	good &= hcomm__reduce(HCOMM_FP32, HCOMM_SUM, NULL, y, 4) ==
		-HCOMM_ERR_INVAL;
	good &= hcomm__reduce(HCOMM_FP32, HCOMM_SUM, x, NULL, 4) ==
		-HCOMM_ERR_INVAL;
	good &= x[0] == 1 && x[3] == 4;		/* nothing done */
	good &= hcomm__reduce(HCOMM_FP32, HCOMM_SUM, NULL, NULL, 0) == 0;
	good &= hcomm__reduce3(0, HCOMM_SUM, x, y, y, 4) == -HCOMM_ERR_INVAL;
	good &= hcomm__reduce3(HCOMM_FP32, NOP, x, y, y, 4) ==
		-HCOMM_ERR_INVAL;
	good &= hcomm__reduce3(HCOMM_FP32, HCOMM_SUM, NULL, y, y, 4) ==
		-HCOMM_ERR_INVAL;
	good &= hcomm__reduce3(HCOMM_FP32, HCOMM_SUM, x, NULL, y, 4) ==
		-HCOMM_ERR_INVAL;
	good &= hcomm__reduce3(HCOMM_FP32, HCOMM_SUM, x, y, NULL, 4) ==
		-HCOMM_ERR_INVAL;
	good &= x[0] == 1 && x[3] == 4;		/* nothing done */
	good &= hcomm__reduce3(HCOMM_FP16, HCOMM_SUM, NULL, NULL, NULL, 0) ==
		0;
	good &= hcomm__reduce_finish_avg(HCOMM_FP32, x, 4, 0) ==
		-HCOMM_ERR_INVAL;
	good &= hcomm__reduce_finish_avg(0, x, 4, 2) == -HCOMM_ERR_INVAL;
	good &= hcomm__reduce_finish_avg(HCOMM_FP32, NULL, 4, 2) ==
		-HCOMM_ERR_INVAL;
	good &= hcomm__reduce_finish_avg(HCOMM_INT8, NULL, 0, 2) == 0;
	good &= x[0] == 1 && x[3] == 4;
	good &= hcomm__reduce_fp16_into_fp32(0, x, h, 4) == -HCOMM_ERR_INVAL;
	good &= hcomm__reduce_fp16_into_fp32(NOP, x, h, 4) ==
		-HCOMM_ERR_INVAL;
	good &= hcomm__reduce_fp16_into_fp32(HCOMM_SUM, NULL, h, 4) ==
		-HCOMM_ERR_INVAL;
	good &= hcomm__reduce_fp16_into_fp32(HCOMM_SUM, NULL, NULL, 0) == 0;
	good &= x[0] == 1 && x[3] == 4;
	ok(good, "a dtype or op that is none, NULL buffers with a count, a "
	   "divisor of 0: -HCOMM_ERR_INVAL and nothing written; count 0: 0");

	good = hcomm__reduce_set_isa(HCOMM__ISA__MAX) == -HCOMM_ERR_INVAL;
	good &= hcomm__reduce_set_isa(-2) == -HCOMM_ERR_INVAL;
	good &= !strcmp(hcomm__reduce_isa_name(HCOMM__ISA__MAX), "?");
	ok(good, "hcomm__reduce_set_isa refuses a set that is none");
}

static void test_exports(const char *so)
{
	static const char *const pub[] = {
		"hcomm_dtype_size", "hcomm_dtype_name", "hcomm_redop_name",
	};
	static const char *const priv[] = {
		"hcomm__reduce", "hcomm__reduce_finish_avg",
		"hcomm__fp32_to_fp16", "hcomm__fp16_to_fp32",
		"hcomm__fp32_to_fp16_scaled", "hcomm__reduce_fp16_into_fp32",
		"hcomm__bf16_to_fp32", "hcomm__fp32_to_bf16",
		"hcomm__reduce_set_isa", "sum_f32_generic",
	};
	void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	unsigned int i, miss = 0, leak = 0;
	size_t (*size)(enum hcomm_dtype);

	if (!h) {
		ok(0, "dlopen %s: %s", so, dlerror());
		return;
	}
	for (i = 0; i < NELEM(pub); i++)
		if (!dlsym(h, pub[i]) && ++miss)
			printf("# %s not exported\n", pub[i]);
	for (i = 0; i < NELEM(priv); i++)
		if (dlsym(h, priv[i]) && ++leak)
			printf("# %s exported\n", priv[i]);
	*(void **)&size = dlsym(h, "hcomm_dtype_size");
	ok(!miss && size && size(HCOMM_BF16) == 2, "libhcomm.so exports "
	   "hcomm_dtype_size, hcomm_dtype_name, hcomm_redop_name");
	ok(!leak, "libhcomm.so hides the kernels");
	dlclose(h);
}

/*
 * The kernels' code: packed instructions, not scalar ones.  objdump
 * prints the function; one packed instruction of the operation must be
 * in it (the loop's body), whatever the unrolling or scheduling.
 */
static void test_vectorised(const char *obj)
{
	static const struct {
		const char *fn, *insn, *what;
	} want[] = {
		{ "sum_f32_generic", "addps", "%xmm" },
		{ "sum_f64_generic", "addpd", "%xmm" },
		{ "prod_f32_generic", "mulps", "%xmm" },
		{ "sum_u32_generic", "paddd", "%xmm" },
		{ "max_f32_generic", "pcmpgtd", "%xmm" },
		{ "h2f_c_generic", "cvtdq2ps", "%xmm" },
		{ "f2h_c_generic", "cvttps2dq", "%xmm" },
		{ "sum_f32_out_generic", "addps", "%xmm" },
		{ "sum_f32_avx2", "vaddps", "%ymm" },
		{ "sum_f32_out_avx2", "vaddps", "%ymm" },
		{ "sum_f64_avx2", "vaddpd", "%ymm" },
		{ "sum_u64_avx2", "vpaddq", "%ymm" },
		{ "max_f32_avx2", "vpcmpgtd", "%ymm" },
		{ "h2f_f16c", "vcvtph2ps", "%ymm" },
		{ "f2h_f16c", "vcvtps2ph", "%ymm" },
	};
	char cmd[512], line[512];
	unsigned int i;

#if !defined(__x86_64__)
	skip("packed instructions in %s: x86-64 only", obj);
	return;
#endif
	if (system("objdump --version >/dev/null 2>&1")) {
		skip("packed instructions in %s: no objdump", obj);
		return;
	}
	for (i = 0; i < NELEM(want); i++) {
		int lines = 0, hit = 0;
		FILE *f;

		snprintf(cmd, sizeof(cmd), "objdump -d --no-show-raw-insn "
			 "--disassemble=%s '%s' 2>/dev/null", want[i].fn, obj);
		f = popen(cmd, "r");
		if (!f) {
			ok(0, "popen %s", cmd);
			continue;
		}
		while (fgets(line, sizeof(line), f)) {
			char *p = strstr(line, want[i].insn);
			char next = p ? p[strlen(want[i].insn)] : 0;

			lines += !!strchr(line, '\t');
			if ((next == ' ' || next == '\t') &&
			    strstr(line, want[i].what))
				hit++;
		}
		pclose(f);
		ok(hit > 0, "hcomm_reduce.o: %s (%d instructions) has packed "
		   "%s on %s registers", want[i].fn, lines, want[i].insn,
		   want[i].what + 1);
	}
}

/* Throughput of a few kernels, for the log only. */
static void report_speed(const char *in)
{
	enum { N = 1 << 20 };
	float *a = calloc(N, 4), *b = calloc(N, 4);
	uint16_t *h = calloc(N, 2);
	double t, tsum, th2f, tf2h;
	int r, reps = 20;

	if (!a || !b || !h)
		goto out;
	hcomm__reduce(HCOMM_FP32, HCOMM_SUM, a, b, N);	/* fault pages in */
	t = now_s();
	for (r = 0; r < reps; r++)
		hcomm__reduce(HCOMM_FP32, HCOMM_SUM, a, b, N);
	tsum = now_s() - t;
	t = now_s();
	for (r = 0; r < reps; r++)
		hcomm__fp16_to_fp32(a, h, N);
	th2f = now_s() - t;
	t = now_s();
	for (r = 0; r < reps; r++)
		hcomm__fp32_to_fp16(h, a, N);
	tf2h = now_s() - t;
	printf("# %s, 4 MiB of fp32: sum %.1f GB/s (of inout), fp16->fp32 "
	       "%.1f, fp32->fp16 %.1f Gelem/s\n", in,
	       reps * 4.0 * N / tsum / 1e9, reps * (double)N / th2f / 1e9,
	       reps * (double)N / tf2h / 1e9);
out:
	free(a);
	free(b);
	free(h);
}

int main(int argc, char **argv)
{
	const char *ex = getenv("HCOMM_TEST_EXHAUSTIVE");
	const char *so = NULL, *obj = NULL;
	int i, isa, best;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--so"))
			so = argv[i + 1];
		else if (!strcmp(argv[i], "--obj"))
			obj = argv[i + 1];
	}
	io_arena = malloc(ARENA);
	in_arena = malloc(ARENA);
	ra = malloc(ARENA);
	rb = malloc(ARENA);
	rw = malloc(ARENA);
	out_arena = malloc(ARENA);
	a_arena = malloc(ARENA);
	if (!io_arena || !in_arena || !ra || !rb || !rw || !out_arena ||
	    !a_arena) {
		ok(0, "malloc");
		return tap_done("reduce");
	}
	best = hcomm__reduce_isa();
	printf("# kernel set chosen for this CPU: %s\n",
	       hcomm__reduce_isa_name(best));

	for (isa = 0; isa < HCOMM__ISA__MAX; isa++) {
		const char *in = hcomm__reduce_isa_name(isa);

		if (hcomm__reduce_set_isa(isa)) {
			skip("kernel set %s: not on this CPU", in);
			continue;
		}
		test_reduce_all(isa);
		test_widen_all(in, 0);
		test_widen_all(in, 1);
		test_narrow(in, 0);
		test_narrow(in, 1);
		test_scaled(in);
		test_fp16_into_fp32(in);
		test_avg(in);
		if (ex && !strcmp(ex, "1"))
			test_narrow_exhaustive(in);
		report_speed(in);
	}
	hcomm__reduce_set_isa(-1);
	ok(hcomm__reduce_isa() == best, "the CPU's best set is back: %s",
	   hcomm__reduce_isa_name(hcomm__reduce_isa()));
	test_wrap();
	test_float_specials();
	test_avg_int();
	test_args();
	if (so)
		test_exports(so);
	if (obj)
		test_vectorised(obj);
	free(io_arena);
	free(in_arena);
	free(out_arena);
	free(a_arena);
	free(ra);
	free(rb);
	free(rw);
	return tap_done("reduce");
}
