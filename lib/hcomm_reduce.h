/* SPDX-License-Identifier: MIT */
/*
 * libhcomm internals: the reduction and conversion kernels of the
 * collectives (hcomm_reduce.c, Documentation/collectives.rst).  Hidden;
 * tests/test_reduce.c reaches them through the static library.
 *
 * Buffers may have any alignment, even for their element type.  in and
 * inout (src and dst) must not overlap, not even as the same buffer.
 * fp16 and bf16 elements are their bits in a uint16_t.  No function keeps
 * state but the kernel set chosen for the CPU once; all are thread-safe
 * and none records an error for hcomm_errmsg().
 */
#ifndef LIBHCOMM_REDUCE_H
#define LIBHCOMM_REDUCE_H

#include <stddef.h>
#include <stdint.h>
#include "hcomm_int.h"

/*
 * inout[i] = inout[i] op in[i] for i < count, elements of type dt.
 * HCOMM_AVG sums here: the division is hcomm__reduce_finish_avg(), once
 * every contribution is in.  fp16 and bf16 are widened to fp32, combined
 * there and rounded once to nearest even.  0, or -HCOMM_ERR_INVAL for a
 * dt or op that is none, or a NULL buffer with a count (count 0 with a
 * valid dt and op is 0, buffers unread).
 */
HCOMM_HIDDEN int hcomm__reduce(enum hcomm_dtype dt, enum hcomm_redop op,
			       void *inout, const void *in, size_t count);
/*
 * out[i] = a[i] op b[i] for i < count: hcomm__reduce() out of place, the
 * same bits as copying a to out and reducing b into it.  out must not
 * overlap a or b.  0, or -HCOMM_ERR_INVAL as hcomm__reduce().
 */
HCOMM_HIDDEN int hcomm__reduce3(enum hcomm_dtype dt, enum hcomm_redop op,
				void *out, const void *a, const void *b,
				size_t count);
/*
 * buf[i] /= divisor (the number of contributions) for i < count: floating
 * point rounded to nearest (fp16 and bf16 divided in fp32, rounded once),
 * integers truncated toward zero.  0, or -HCOMM_ERR_INVAL for a dt that
 * is none, a divisor of 0, or a NULL buf with a count.
 */
HCOMM_HIDDEN int hcomm__reduce_finish_avg(enum hcomm_dtype dt, void *buf,
					  size_t count, unsigned int divisor);

/*
 * Conversions, n elements.  Widening is exact; narrowing rounds to
 * nearest even whatever the rounding mode.  A NaN stays a NaN of the same
 * sign, made quiet, with as much of its payload as fits (as F16C does).
 * The narrowing ones return how many finite inputs became +-inf (values
 * of magnitude 65520 and up for fp16, after the scaling; the largest
 * finite fp16 is 65504): a compressed sum reports them.
 */
HCOMM_HIDDEN void hcomm__fp16_to_fp32(float *dst, const uint16_t *src,
				      size_t n);
HCOMM_HIDDEN size_t hcomm__fp32_to_fp16(uint16_t *dst, const float *src,
					size_t n);
/*
 * dst[i] = fp16(src[i] * scale), the product rounded to fp32 first (as
 * fp32 code computes it), then to fp16: exact, so the fp16 nearest, for a
 * power-of-two scale; else one of the two fp16 values around the exact
 * product, the nearest unless the fp32 product fell on the half-way
 * point.  scale 1 / size pre-divides an average.
 */
HCOMM_HIDDEN size_t hcomm__fp32_to_fp16_scaled(uint16_t *dst,
					       const float *src, size_t n,
					       float scale);
HCOMM_HIDDEN void hcomm__bf16_to_fp32(float *dst, const uint16_t *src,
				      size_t n);
HCOMM_HIDDEN size_t hcomm__fp32_to_bf16(uint16_t *dst, const float *src,
					size_t n);
/*
 * acc[i] = acc[i] op fp32(in[i]) for i < n: fp16 wire data into an fp32
 * accumulator, as hcomm__reduce() does for HCOMM_FP32 (HCOMM_AVG sums).
 * 0 or -HCOMM_ERR_INVAL (op, or NULL buffers with an n).
 */
HCOMM_HIDDEN int hcomm__reduce_fp16_into_fp32(enum hcomm_redop op,
					      float *acc, const uint16_t *in,
					      size_t n);

/*
 * Kernel sets.  GENERIC is portable C vectorised by the compiler for the
 * build's baseline (SSE2 on x86-64: what qemu64 offers); AVX2 is the same
 * C built for AVX2, with F16C instructions for the fp16 conversions
 * (x86-64 only).  The first call picks the best the CPU has; both give
 * the same bits.
 */
enum hcomm__isa {
	HCOMM__ISA_GENERIC = 0,
	HCOMM__ISA_AVX2 = 1,
	HCOMM__ISA__MAX
};

/* The set in use (choosing it on the first call). */
HCOMM_HIDDEN int hcomm__reduce_isa(void);
/*
 * For tests: use set isa from now on, or the CPU's best for -1.  0,
 * -HCOMM_ERR_NOTSUP (this CPU or build lacks it), -HCOMM_ERR_INVAL.
 */
HCOMM_HIDDEN int hcomm__reduce_set_isa(int isa);
/* "generic", "avx2"; "?" for another value. */
HCOMM_HIDDEN const char *hcomm__reduce_isa_name(int isa);

#endif /* LIBHCOMM_REDUCE_H */
