// SPDX-License-Identifier: MIT
/*
 * libhcomm: the reduction and conversion kernels of the collectives
 * (hcomm_reduce.h, Documentation/collectives.rst).
 *
 * Every kernel is a counted loop over restrict pointers to an element
 * type of alignment 1, with a branch-free body, so that GCC's vectoriser
 * turns it into packed SIMD (this object is built with -O3: lib/Makefile;
 * "make -C lib reduce-vec" prints the vectoriser's report, and
 * test_reduce looks for packed instructions in the kernels' code).  On
 * x86-64 each kernel is built twice, for the baseline (SSE2) and for
 * AVX2; the fp16 conversions of the AVX2 set use F16C.  The set is chosen
 * once from CPUID; both give the same bits.
 *
 * Signed integers are added and multiplied as unsigned (the same bits in
 * two's complement, without undefined overflow).  Floating-point maximum
 * and minimum compare the bits mapped to ordered integers, which gives
 * IEEE 754-2019 maximum and minimum without a floating-point compare.
 * fp16 and bf16 go through fp32 in blocks: widen both operands, run the
 * fp32 kernel, round once.  fp32 has at least twice their precision
 * plus two bits (24 >= 2 * 11 + 2), so the fp32 result rounded again is
 * the correctly rounded result of the exact operation on two of their
 * values (sum, product, quotient).
 */
#include <stdatomic.h>
#include <string.h>

#include "hcomm_reduce.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HR_X86	1
#else
#define HR_X86	0
#endif

#define HR_INLINE	static inline __attribute__((always_inline))

/* Element types that may sit at any address (and alias anything). */
typedef float f32a __attribute__((aligned(1), may_alias));
typedef double f64a __attribute__((aligned(1), may_alias));
typedef uint8_t u8a __attribute__((may_alias));
typedef int8_t i8a __attribute__((may_alias));
typedef uint16_t u16a __attribute__((aligned(1), may_alias));
typedef uint32_t u32a __attribute__((aligned(1), may_alias));
typedef int32_t i32a __attribute__((aligned(1), may_alias));
typedef uint64_t u64a __attribute__((aligned(1), may_alias));
typedef int64_t i64a __attribute__((aligned(1), may_alias));

/* ------------------------------------------------------------------ */
/* Public helpers                                                     */
/* ------------------------------------------------------------------ */

HCOMM_EXPORT size_t hcomm_dtype_size(enum hcomm_dtype dt)
{
	switch (dt) {
	case HCOMM_INT8:
	case HCOMM_UINT8:
		return 1;
	case HCOMM_FP16:
	case HCOMM_BF16:
		return 2;
	case HCOMM_FP32:
	case HCOMM_INT32:
	case HCOMM_UINT32:
		return 4;
	case HCOMM_FP64:
	case HCOMM_INT64:
	case HCOMM_UINT64:
		return 8;
	default:
		return 0;
	}
}

HCOMM_EXPORT const char *hcomm_dtype_name(enum hcomm_dtype dt)
{
	switch (dt) {
	case HCOMM_FP32:
		return "fp32";
	case HCOMM_FP64:
		return "fp64";
	case HCOMM_FP16:
		return "fp16";
	case HCOMM_BF16:
		return "bf16";
	case HCOMM_INT8:
		return "int8";
	case HCOMM_INT32:
		return "int32";
	case HCOMM_INT64:
		return "int64";
	case HCOMM_UINT8:
		return "uint8";
	case HCOMM_UINT32:
		return "uint32";
	case HCOMM_UINT64:
		return "uint64";
	default:
		return "?";
	}
}

HCOMM_EXPORT const char *hcomm_redop_name(enum hcomm_redop op)
{
	switch (op) {
	case HCOMM_SUM:
		return "sum";
	case HCOMM_PROD:
		return "prod";
	case HCOMM_MAX:
		return "max";
	case HCOMM_MIN:
		return "min";
	case HCOMM_AVG:
		return "avg";
	default:
		return "?";
	}
}

/* ------------------------------------------------------------------ */
/* Element operations                                                 */
/* ------------------------------------------------------------------ */

#define F32_QUIET	0x00400000u
#define F64_QUIET	0x0008000000000000ull

HR_INLINE uint32_t f32_bits(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof(u));
	return u;
}

HR_INLINE float f32_of(uint32_t u)
{
	float x;

	memcpy(&x, &u, sizeof(x));
	return x;
}

/* Bits of a float as an int32 ordered like the values: -0 below +0. */
HR_INLINE int32_t f32_key(uint32_t u)
{
	return (int32_t)(u ^ ((uint32_t)((int32_t)u >> 31) >> 1));
}

HR_INLINE int64_t f64_key(uint64_t u)
{
	return (int64_t)(u ^ ((uint64_t)((int64_t)u >> 63) >> 1));
}

HR_INLINE int f32_nan(uint32_t u)
{
	return (u & 0x7fffffffu) > 0x7f800000u;
}

HR_INLINE int f64_nan(uint64_t u)
{
	return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}

/*
 * IEEE 754-2019 maximum and minimum on the bits: a NaN operand gives
 * itself made quiet (inout's first, as x86 arithmetic does).
 */
HR_INLINE uint32_t f32_max(uint32_t a, uint32_t b)
{
	uint32_t r = f32_key(a) >= f32_key(b) ? a : b;

	r = f32_nan(b) ? b | F32_QUIET : r;
	return f32_nan(a) ? a | F32_QUIET : r;
}

HR_INLINE uint32_t f32_min(uint32_t a, uint32_t b)
{
	uint32_t r = f32_key(a) <= f32_key(b) ? a : b;

	r = f32_nan(b) ? b | F32_QUIET : r;
	return f32_nan(a) ? a | F32_QUIET : r;
}

HR_INLINE uint64_t f64_max(uint64_t a, uint64_t b)
{
	uint64_t r = f64_key(a) >= f64_key(b) ? a : b;

	r = f64_nan(b) ? b | F64_QUIET : r;
	return f64_nan(a) ? a | F64_QUIET : r;
}

HR_INLINE uint64_t f64_min(uint64_t a, uint64_t b)
{
	uint64_t r = f64_key(a) <= f64_key(b) ? a : b;

	r = f64_nan(b) ? b | F64_QUIET : r;
	return f64_nan(a) ? a | F64_QUIET : r;
}

#define OP_ADD(a, b)	((a) + (b))
#define OP_MUL(a, b)	((a) * (b))
#define OP_MAX(a, b)	((a) > (b) ? (a) : (b))
#define OP_MIN(a, b)	((a) < (b) ? (a) : (b))
#define OP_FMAX32(a, b)	f32_max(a, b)
#define OP_FMIN32(a, b)	f32_min(a, b)
#define OP_FMAX64(a, b)	f64_max(a, b)
#define OP_FMIN64(a, b)	f64_min(a, b)

/*
 * fp16 bits (low 16) to fp32 bits.  Subnormals are their mantissa times
 * 2^-24, exact in fp32; a NaN keeps sign and payload and becomes quiet.
 */
HR_INLINE uint32_t h2f_bits(uint32_t h)
{
	uint32_t sign = (h & 0x8000u) << 16;
	uint32_t em = h & 0x7fffu;
	uint32_t nrm = (em << 13) + 0x38000000u;	/* rebias 15 -> 127 */
	uint32_t spc = 0x7f800000u | (em & 0x3ffu) << 13 |
		       (em > 0x7c00u ? F32_QUIET : 0);
	uint32_t sub = f32_bits((float)(int32_t)(em & 0x3ffu) * 0x1p-24f);
	uint32_t r = em >= 0x0400u ? nrm : sub;

	return sign | (em >= 0x7c00u ? spc : r);
}

/*
 * fp32 bits to fp16 bits, to nearest even.  Normal results round on the
 * bits (a carry into the exponent is right, up to infinity); subnormal
 * ones (below 2^-14) scale the value by 2^24, exactly, and round its
 * fraction (truncation and the subtraction are exact, so the rounding
 * mode plays no part).
 */
HR_INLINE uint32_t f2h_bits(uint32_t u)
{
	uint32_t sign = (u >> 16) & 0x8000u;
	uint32_t a = u & 0x7fffffffu;
	uint32_t nrm = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1)) >> 13;
	uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
	float m = f32_of(a < 0x38800000u ? a : 0) * 0x1p24f;
	int32_t ip = (int32_t)m;
	float fr = m - (float)ip;
	uint32_t up = (uint32_t)(fr > 0.5f) |
		      ((uint32_t)(fr == 0.5f) & (uint32_t)ip);
	uint32_t sub = (uint32_t)ip + (up & 1);
	uint32_t r = a >= 0x38800000u ? nrm : sub;

	r = a >= 0x477ff000u ? 0x7c00u : r;	/* 65520 and up: inf */
	return sign | (a > 0x7f800000u ? nan : r);
}

/* 1 when fp32 bits u are finite and fp16 bits h are +-inf. */
HR_INLINE uint32_t f2h_ovf(uint32_t u, uint32_t h)
{
	return ((u & 0x7f800000u) != 0x7f800000u) &
	       ((h & 0x7fffu) == 0x7c00u);
}

HR_INLINE uint32_t b2f_bits(uint32_t b)
{
	return b << 16 | ((b & 0x7fffu) > 0x7f80u ? F32_QUIET : 0);
}

HR_INLINE uint32_t f2b_bits(uint32_t u)
{
	uint32_t rne = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;

	return f32_nan(u) ? (u >> 16) | 0x40u : rne;
}

HR_INLINE uint32_t f2b_ovf(uint32_t u, uint32_t b)
{
	return ((u & 0x7f800000u) != 0x7f800000u) &
	       ((b & 0x7fffu) == 0x7f80u);
}

/* ------------------------------------------------------------------ */
/* Kernels, once per instruction set                                  */
/* ------------------------------------------------------------------ */

typedef void (*hr_fn)(void *restrict io, const void *restrict in,
		      size_t n);
typedef void (*hr_fn3)(void *restrict out, const void *restrict a,
		       const void *restrict b, size_t n);
typedef void (*hr_widen)(void *restrict dst, const void *restrict src,
			 size_t n);
typedef size_t (*hr_narrow)(void *restrict dst, const void *restrict src,
			    size_t n, float scale);

#define HR_ISA_generic
#define HR_ISA_avx2	__attribute__((target("avx2,f16c")))

/* name_isa(io, in, n): io[i] = OP(io[i], in[i]) over elements of T. */
#define HR_KERNEL(isa, name, T, OP)					\
static HR_ISA_##isa void name##_##isa(void *restrict io,		\
				      const void *restrict in, size_t n) \
{									\
	T *restrict a = io;						\
	const T *restrict b = in;					\
	size_t i;							\
									\
	for (i = 0; i < n; i++)						\
		a[i] = OP(a[i], b[i]);					\
}									\
									\
/* name_out_isa(out, a, b, n): out[i] = OP(a[i], b[i]) */		\
static HR_ISA_##isa void name##_out_##isa(void *restrict out,		\
				       const void *restrict x,		\
				       const void *restrict y, size_t n) \
{									\
	T *restrict o = out;						\
	const T *restrict a = x;					\
	const T *restrict b = y;					\
	size_t i;							\
									\
	for (i = 0; i < n; i++)						\
		o[i] = OP(a[i], b[i]);					\
}

/* Portable fp16 conversions, n elements (AVX2 has F16C instead). */
#define HR_CONVERT_F16(isa)						\
static HR_ISA_##isa void h2f_c_##isa(void *restrict dst,		\
				     const void *restrict src, size_t n) \
{									\
	u32a *restrict d = dst;						\
	const u16a *restrict s = src;					\
	size_t i;							\
									\
	for (i = 0; i < n; i++)						\
		d[i] = h2f_bits(s[i]);					\
}									\
									\
static HR_ISA_##isa size_t f2h_c_##isa(void *restrict dst,		\
				       const void *restrict src,	\
				       size_t n, float scale)		\
{									\
	u16a *restrict d = dst;						\
	const f32a *restrict s = src;					\
	size_t i, ovf = 0;						\
									\
	for (i = 0; i < n; i++) {					\
		uint32_t h = f2h_bits(f32_bits(s[i] * scale));		\
									\
		ovf += f2h_ovf(f32_bits(s[i]), h);			\
		d[i] = (uint16_t)h;					\
	}								\
	return ovf;							\
}

/* Portable bf16 conversions, n elements. */
#define HR_CONVERT_BF16(isa)						\
static HR_ISA_##isa void b2f_c_##isa(void *restrict dst,		\
				     const void *restrict src, size_t n) \
{									\
	u32a *restrict d = dst;						\
	const u16a *restrict s = src;					\
	size_t i;							\
									\
	for (i = 0; i < n; i++)						\
		d[i] = b2f_bits(s[i]);					\
}									\
									\
static HR_ISA_##isa size_t f2b_c_##isa(void *restrict dst,		\
				       const void *restrict src,	\
				       size_t n, float scale)		\
{									\
	u16a *restrict d = dst;						\
	const u32a *restrict s = src;					\
	size_t i, ovf = 0;						\
									\
	(void)scale;							\
	for (i = 0; i < n; i++) {					\
		uint32_t b = f2b_bits(s[i]);				\
									\
		ovf += f2b_ovf(s[i], b);				\
		d[i] = (uint16_t)b;					\
	}								\
	return ovf;							\
}

/*
 * Sum and product of signed integers use the unsigned kernels (same
 * bits); uint8 operands promote to int, whose results fit.
 */
#define HR_KERNELS(isa)							\
	HR_KERNEL(isa, sum_f32, f32a, OP_ADD)				\
	HR_KERNEL(isa, prod_f32, f32a, OP_MUL)				\
	HR_KERNEL(isa, max_f32, u32a, OP_FMAX32)			\
	HR_KERNEL(isa, min_f32, u32a, OP_FMIN32)			\
	HR_KERNEL(isa, sum_f64, f64a, OP_ADD)				\
	HR_KERNEL(isa, prod_f64, f64a, OP_MUL)				\
	HR_KERNEL(isa, max_f64, u64a, OP_FMAX64)			\
	HR_KERNEL(isa, min_f64, u64a, OP_FMIN64)			\
	HR_KERNEL(isa, sum_u8, u8a, OP_ADD)				\
	HR_KERNEL(isa, prod_u8, u8a, OP_MUL)				\
	HR_KERNEL(isa, max_u8, u8a, OP_MAX)				\
	HR_KERNEL(isa, min_u8, u8a, OP_MIN)				\
	HR_KERNEL(isa, max_i8, i8a, OP_MAX)				\
	HR_KERNEL(isa, min_i8, i8a, OP_MIN)				\
	HR_KERNEL(isa, sum_u32, u32a, OP_ADD)				\
	HR_KERNEL(isa, prod_u32, u32a, OP_MUL)				\
	HR_KERNEL(isa, max_u32, u32a, OP_MAX)				\
	HR_KERNEL(isa, min_u32, u32a, OP_MIN)				\
	HR_KERNEL(isa, max_i32, i32a, OP_MAX)				\
	HR_KERNEL(isa, min_i32, i32a, OP_MIN)				\
	HR_KERNEL(isa, sum_u64, u64a, OP_ADD)				\
	HR_KERNEL(isa, prod_u64, u64a, OP_MUL)				\
	HR_KERNEL(isa, max_u64, u64a, OP_MAX)				\
	HR_KERNEL(isa, min_u64, u64a, OP_MIN)				\
	HR_KERNEL(isa, max_i64, i64a, OP_MAX)				\
	HR_KERNEL(isa, min_i64, i64a, OP_MIN)				\
	HR_CONVERT_BF16(isa)

/* Operation index of the tables: AVG sums. */
enum { HR_SUM, HR_PROD, HR_MAX, HR_MIN, HR_NOPS };

struct hr_set {
	const char *name;
	hr_fn fn[HCOMM_DTYPE__MAX][HR_NOPS];	/* not fp16, bf16 */
	hr_fn3 fn3[HCOMM_DTYPE__MAX][HR_NOPS];	/* out of place */
	hr_widen h2f, b2f;
	hr_narrow f2h, f2b;
};

#define HR_FNS(isa, t, s)						\
	{ sum_##s##_##isa, prod_##s##_##isa, max_##t##_##isa,		\
	  min_##t##_##isa }
#define HR_FNS3(isa, t, s)						\
	{ sum_##s##_out_##isa, prod_##s##_out_##isa,			\
	  max_##t##_out_##isa, min_##t##_out_##isa }

#define HR_SET(isa, h2f_fn, f2h_fn) {					\
	.name = #isa,							\
	.fn = {								\
		[HCOMM_FP32] = HR_FNS(isa, f32, f32),			\
		[HCOMM_FP64] = HR_FNS(isa, f64, f64),			\
		[HCOMM_INT8] = HR_FNS(isa, i8, u8),			\
		[HCOMM_INT32] = HR_FNS(isa, i32, u32),			\
		[HCOMM_INT64] = HR_FNS(isa, i64, u64),			\
		[HCOMM_UINT8] = HR_FNS(isa, u8, u8),			\
		[HCOMM_UINT32] = HR_FNS(isa, u32, u32),			\
		[HCOMM_UINT64] = HR_FNS(isa, u64, u64),			\
	},								\
	.fn3 = {							\
		[HCOMM_FP32] = HR_FNS3(isa, f32, f32),			\
		[HCOMM_FP64] = HR_FNS3(isa, f64, f64),			\
		[HCOMM_INT8] = HR_FNS3(isa, i8, u8),			\
		[HCOMM_INT32] = HR_FNS3(isa, i32, u32),			\
		[HCOMM_INT64] = HR_FNS3(isa, i64, u64),			\
		[HCOMM_UINT8] = HR_FNS3(isa, u8, u8),			\
		[HCOMM_UINT32] = HR_FNS3(isa, u32, u32),		\
		[HCOMM_UINT64] = HR_FNS3(isa, u64, u64),		\
	},								\
	.h2f = h2f_fn,							\
	.b2f = b2f_c_##isa,						\
	.f2h = f2h_fn,							\
	.f2b = f2b_c_##isa,						\
}

HR_KERNELS(generic)
HR_CONVERT_F16(generic)

static const struct hr_set hr_generic =
	HR_SET(generic, h2f_c_generic, f2h_c_generic);

#if HR_X86
HR_KERNELS(avx2)

/*
 * F16C: 8 elements an instruction; the tail goes through a padded block
 * so that every element takes the same instruction.
 */
static HR_ISA_avx2 void h2f_f16c(void *restrict dst,
				 const void *restrict src, size_t n)
{
	const char *s = src;
	char *d = dst;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		__m128i h = _mm_loadu_si128((const void *)(s + 2 * i));

		_mm256_storeu_ps((void *)(d + 4 * i), _mm256_cvtph_ps(h));
	}
	if (i < n) {
		uint16_t h[8] = { 0 };
		float f[8];
		__m128i hv;

		memcpy(h, s + 2 * i, 2 * (n - i));
		hv = _mm_loadu_si128((void *)h);
		_mm256_storeu_ps(f, _mm256_cvtph_ps(hv));
		memcpy(d + 4 * i, f, 4 * (n - i));
	}
}

/* Lanes of 8 fp32 inputs x that are finite and whose fp16 h is +-inf. */
static HR_ISA_avx2 unsigned int f16c_ovf(__m256 x, __m128i h)
{
	const __m256i e = _mm256_set1_epi32(0x7f800000);
	__m256i xi = _mm256_and_si256(_mm256_castps_si256(x), e);
	__m256i nonfin = _mm256_cmpeq_epi32(xi, e);
	__m128i hi = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
	__m128i inf = _mm_cmpeq_epi16(hi, _mm_set1_epi16(0x7c00));
	__m256i both = _mm256_andnot_si256(nonfin,
					   _mm256_cvtepi16_epi32(inf));

	return (unsigned int)_mm256_movemask_ps(_mm256_castsi256_ps(both));
}

static HR_ISA_avx2 size_t f2h_f16c(void *restrict dst,
				   const void *restrict src, size_t n,
				   float scale)
{
	const __m256 k = _mm256_set1_ps(scale);
	const char *s = src;
	char *d = dst;
	size_t i, ovf = 0;
	unsigned int m;

	for (i = 0; i + 8 <= n; i += 8) {
		__m256 x = _mm256_loadu_ps((const void *)(s + 4 * i));
		__m128i h = _mm256_cvtps_ph(_mm256_mul_ps(x, k),
					    _MM_FROUND_TO_NEAREST_INT);

		_mm_storeu_si128((void *)(d + 2 * i), h);
		m = f16c_ovf(x, h);
		if (m)
			ovf += (size_t)__builtin_popcount(m);
	}
	if (i < n) {
		float f[8] = { 0 };
		uint16_t h[8];
		__m256 x;
		__m128i hv;

		memcpy(f, s + 4 * i, 4 * (n - i));
		x = _mm256_loadu_ps(f);
		hv = _mm256_cvtps_ph(_mm256_mul_ps(x, k),
				     _MM_FROUND_TO_NEAREST_INT);
		_mm_storeu_si128((void *)h, hv);
		memcpy(d + 2 * i, h, 2 * (n - i));
		m = f16c_ovf(x, hv) & ((1u << (n - i)) - 1);
		ovf += (size_t)__builtin_popcount(m);
	}
	return ovf;
}

static const struct hr_set hr_avx2 = HR_SET(avx2, h2f_f16c, f2h_f16c);
#endif

static const struct hr_set *const hr_sets[HCOMM__ISA__MAX] = {
	[HCOMM__ISA_GENERIC] = &hr_generic,
#if HR_X86
	[HCOMM__ISA_AVX2] = &hr_avx2,
#endif
};

static _Atomic int hr_cur = -1;

static int hr_isa_ok(int isa)
{
	if (isa < 0 || isa >= HCOMM__ISA__MAX || !hr_sets[isa])
		return 0;
#if HR_X86
	if (isa == HCOMM__ISA_AVX2) {
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx2") &&
		       __builtin_cpu_supports("f16c");
	}
#endif
	return 1;
}

static int hr_best(void)
{
	int isa;

	for (isa = HCOMM__ISA__MAX - 1; isa > 0; isa--)
		if (hr_isa_ok(isa))
			break;
	return isa;
}

/* The kernel set in use (a race to choose it picks the same one). */
static const struct hr_set *hr(void)
{
	int isa = atomic_load_explicit(&hr_cur, memory_order_relaxed);

	if (isa < 0) {
		isa = hr_best();
		atomic_store_explicit(&hr_cur, isa, memory_order_relaxed);
	}
	return hr_sets[isa];
}

int hcomm__reduce_isa(void)
{
	hr();
	return atomic_load_explicit(&hr_cur, memory_order_relaxed);
}

int hcomm__reduce_set_isa(int isa)
{
	if (isa == -1)
		isa = hr_best();
	else if (isa < 0 || isa >= HCOMM__ISA__MAX)
		return -HCOMM_ERR_INVAL;
	else if (!hr_isa_ok(isa))
		return -HCOMM_ERR_NOTSUP;
	atomic_store_explicit(&hr_cur, isa, memory_order_relaxed);
	return 0;
}

const char *hcomm__reduce_isa_name(int isa)
{
	switch (isa) {
	case HCOMM__ISA_GENERIC:
		return "generic";
	case HCOMM__ISA_AVX2:
		return "avx2";
	default:
		return "?";
	}
}

/* ------------------------------------------------------------------ */
/* Entry points                                                       */
/* ------------------------------------------------------------------ */

/* fp16 and bf16 go through fp32 this many elements at a time. */
#define HR_BLOCK	512

static int hr_op(enum hcomm_redop op)
{
	switch (op) {
	case HCOMM_SUM:
	case HCOMM_AVG:
		return HR_SUM;
	case HCOMM_PROD:
		return HR_PROD;
	case HCOMM_MAX:
		return HR_MAX;
	case HCOMM_MIN:
		return HR_MIN;
	default:
		return -1;
	}
}

/*
 * out = a op b for fp16 (bf16 0) or bf16 (1), through fp32 blocks.  out
 * may be a (in place): each block is widened before it is written.
 */
static void hr_reduce_half(const struct hr_set *s, int bf16, int op,
			   char *out, const char *a, const char *b, size_t n)
{
	float x[HR_BLOCK] __attribute__((aligned(32)));
	float y[HR_BLOCK] __attribute__((aligned(32)));
	hr_widen widen = bf16 ? s->b2f : s->h2f;
	hr_narrow narrow = bf16 ? s->f2b : s->f2h;
	size_t m;

	while (n) {
		m = n < HR_BLOCK ? n : HR_BLOCK;
		widen(x, a, m);
		widen(y, b, m);
		s->fn[HCOMM_FP32][op](x, y, m);
		narrow(out, x, m, 1.0f);
		out += 2 * m;
		a += 2 * m;
		b += 2 * m;
		n -= m;
	}
}

int hcomm__reduce(enum hcomm_dtype dt, enum hcomm_redop op, void *inout,
		  const void *in, size_t count)
{
	const struct hr_set *s;
	int o = hr_op(op);

	if (o < 0 || !hcomm_dtype_size(dt) || (count && (!inout || !in)))
		return -HCOMM_ERR_INVAL;
	if (!count)
		return 0;
	s = hr();
	if (dt == HCOMM_FP16 || dt == HCOMM_BF16)
		hr_reduce_half(s, dt == HCOMM_BF16, o, inout, inout, in,
			       count);
	else
		s->fn[dt][o](inout, in, count);
	return 0;
}

int hcomm__reduce3(enum hcomm_dtype dt, enum hcomm_redop op, void *out,
		   const void *a, const void *b, size_t count)
{
	const struct hr_set *s;
	int o = hr_op(op);

	if (o < 0 || !hcomm_dtype_size(dt) ||
	    (count && (!out || !a || !b)))
		return -HCOMM_ERR_INVAL;
	if (!count)
		return 0;
	s = hr();
	if (dt == HCOMM_FP16 || dt == HCOMM_BF16)
		hr_reduce_half(s, dt == HCOMM_BF16, o, out, a, b, count);
	else
		s->fn3[dt][o](out, a, b, count);
	return 0;
}

int hcomm__reduce_fp16_into_fp32(enum hcomm_redop op, float *acc,
				 const uint16_t *in, size_t n)
{
	float b[HR_BLOCK] __attribute__((aligned(32)));
	const struct hr_set *s;
	const char *src = (const char *)in;
	char *dst = (char *)acc;
	int o = hr_op(op);
	size_t m;

	if (o < 0 || (n && (!acc || !in)))
		return -HCOMM_ERR_INVAL;
	s = hr();
	while (n) {
		m = n < HR_BLOCK ? n : HR_BLOCK;
		s->h2f(b, src, m);
		s->fn[HCOMM_FP32][o](dst, b, m);
		src += 2 * m;
		dst += 4 * m;
		n -= m;
	}
	return 0;
}

void hcomm__fp16_to_fp32(float *dst, const uint16_t *src, size_t n)
{
	hr()->h2f(dst, src, n);
}

size_t hcomm__fp32_to_fp16(uint16_t *dst, const float *src, size_t n)
{
	return hr()->f2h(dst, src, n, 1.0f);
}

size_t hcomm__fp32_to_fp16_scaled(uint16_t *dst, const float *src,
				  size_t n, float scale)
{
	return hr()->f2h(dst, src, n, scale);
}

void hcomm__bf16_to_fp32(float *dst, const uint16_t *src, size_t n)
{
	hr()->b2f(dst, src, n);
}

size_t hcomm__fp32_to_bf16(uint16_t *dst, const float *src, size_t n)
{
	return hr()->f2b(dst, src, n, 1.0f);
}

/* ------------------------------------------------------------------ */
/* Average: the division after the sum                               */
/* ------------------------------------------------------------------ */

static void hr_div_f32(void *restrict buf, size_t n, float d)
{
	f32a *restrict x = buf;
	size_t i;

	for (i = 0; i < n; i++)
		x[i] = x[i] / d;
}

static void hr_div_f64(void *restrict buf, size_t n, double d)
{
	f64a *restrict x = buf;
	size_t i;

	for (i = 0; i < n; i++)
		x[i] = x[i] / d;
}

/* C division truncates toward zero; d < 2^32 fits int64 exactly. */
#define HR_DIV_INT(name, T, W)						\
static void name(void *restrict buf, size_t n, unsigned int d)		\
{									\
	T *restrict x = buf;						\
	size_t i;							\
									\
	for (i = 0; i < n; i++)						\
		x[i] = (W)x[i] / (W)d;					\
}

HR_DIV_INT(hr_div_i8, i8a, int64_t)
HR_DIV_INT(hr_div_i32, i32a, int64_t)
HR_DIV_INT(hr_div_i64, i64a, int64_t)
HR_DIV_INT(hr_div_u8, u8a, uint32_t)
HR_DIV_INT(hr_div_u32, u32a, uint32_t)
HR_DIV_INT(hr_div_u64, u64a, uint64_t)

static void hr_div_half(const struct hr_set *s, int bf16, char *buf,
			size_t n, float d)
{
	float a[HR_BLOCK] __attribute__((aligned(32)));
	hr_widen widen = bf16 ? s->b2f : s->h2f;
	hr_narrow narrow = bf16 ? s->f2b : s->f2h;
	size_t m;

	while (n) {
		m = n < HR_BLOCK ? n : HR_BLOCK;
		widen(a, buf, m);
		hr_div_f32(a, m, d);
		narrow(buf, a, m, 1.0f);
		buf += 2 * m;
		n -= m;
	}
}

int hcomm__reduce_finish_avg(enum hcomm_dtype dt, void *buf, size_t count,
			     unsigned int divisor)
{
	if (!hcomm_dtype_size(dt) || !divisor || (count && !buf))
		return -HCOMM_ERR_INVAL;
	switch (dt) {
	case HCOMM_FP32:
		hr_div_f32(buf, count, (float)divisor);
		break;
	case HCOMM_FP64:
		hr_div_f64(buf, count, (double)divisor);
		break;
	case HCOMM_FP16:
	case HCOMM_BF16:
		hr_div_half(hr(), dt == HCOMM_BF16, buf, count,
			    (float)divisor);
		break;
	case HCOMM_INT8:
		hr_div_i8(buf, count, divisor);
		break;
	case HCOMM_INT32:
		hr_div_i32(buf, count, divisor);
		break;
	case HCOMM_INT64:
		hr_div_i64(buf, count, divisor);
		break;
	case HCOMM_UINT8:
		hr_div_u8(buf, count, divisor);
		break;
	case HCOMM_UINT32:
		hr_div_u32(buf, count, divisor);
		break;
	case HCOMM_UINT64:
		hr_div_u64(buf, count, divisor);
		break;
	default:
		break;
	}
	return 0;
}
