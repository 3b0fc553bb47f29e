/* SPDX-License-Identifier: MIT */
/*
 * libhcomm: CRC32C for the network transports' frames.
 *
 * Two implementations of the same function: the SSE4.2 crc32 instruction,
 * chosen at the first call when __builtin_cpu_supports("sse4.2") says so,
 * and a slicing-by-8 table (8 KiB, built once under pthread_once)
 * everywhere else.  Both are checked against the RFC 3720 vectors by
 * tests/test_tcp.c.
 *
 * The instruction has a latency of 3 cycles and a throughput of 1, so
 * a buffer is done as three interleaved streams A, B, C of n bytes each
 * (n = 4096, then 1024, then 256, as long as 3n bytes are left), then
 * combined.  The raw CRC register is affine in its input: crc(c, X || Y)
 * = shift(crc(c, X)) ^ crc(0, Y) with shift(x) = crc(x, |Y| zero bytes),
 * linear in x; so crc(c, A || B || C) = shift(shift(crc(c, A)) ^ crc(0,
 * B)) ^ crc(0, C), a shift by n bytes being four lookups in shift_tab
 * (4 KiB per n, built once with the instruction).
 */
#include <pthread.h>
#include <string.h>

#include "hcomm_crc32c.h"

#define CRC32C_POLY	0x82F63B78u	/* 0x1EDC6F41 reflected */

/* Written once under tab_once, read-only afterwards. */
static uint32_t tab[8][256];
static pthread_once_t tab_once = PTHREAD_ONCE_INIT;

static void tab_init(void)
{
	uint32_t c;
	int i, j, k;

	for (i = 0; i < 256; i++) {
		c = (uint32_t)i;
		for (j = 0; j < 8; j++)
			c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		tab[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (k = 1; k < 8; k++)
			tab[k][i] = (tab[k - 1][i] >> 8) ^
				    tab[0][tab[k - 1][i] & 0xff];
}

static uint64_t load64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Slicing-by-8 on the raw (not inverted) register; little-endian loads. */
static uint32_t sw_raw(uint32_t c, const unsigned char *p, size_t len)
{
	uint64_t v;

	for (; len && ((uintptr_t)p & 7); len--)
		c = (c >> 8) ^ tab[0][(c ^ *p++) & 0xff];
	for (; len >= 8; len -= 8, p += 8) {
		v = load64(p);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		v = __builtin_bswap64(v);
#endif
		v ^= c;
		c = tab[7][v & 0xff] ^ tab[6][(v >> 8) & 0xff] ^
		    tab[5][(v >> 16) & 0xff] ^ tab[4][(v >> 24) & 0xff] ^
		    tab[3][(v >> 32) & 0xff] ^ tab[2][(v >> 40) & 0xff] ^
		    tab[1][(v >> 48) & 0xff] ^ tab[0][v >> 56];
	}
	while (len--)
		c = (c >> 8) ^ tab[0][(c ^ *p++) & 0xff];
	return c;
}

uint32_t hcomm__crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&tab_once, tab_init);
	return ~sw_raw(~crc, buf, len);
}

#if defined(__x86_64__)
/* Stream lengths of the three-way path, longest first. */
static const size_t hw_block[] = { 4096, 1024, 256 };
#define HW_BLOCKS	(sizeof(hw_block) / sizeof(hw_block[0]))

/* [j][k][b]: shift(b << 8k) by hw_block[j] zeros; written under shift_once. */
static uint32_t shift_tab[HW_BLOCKS][4][256];
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

__attribute__((target("sse4.2")))
static uint32_t hw_zeros(uint32_t c, size_t len)
{
	uint64_t c64 = c;

	for (; len >= 8; len -= 8)
		c64 = __builtin_ia32_crc32di(c64, 0);
	return (uint32_t)c64;
}

static void shift_init(void)
{
	unsigned int j;
	int k, b;

	for (j = 0; j < HW_BLOCKS; j++)
		for (k = 0; k < 4; k++)
			for (b = 0; b < 256; b++)
				shift_tab[j][k][b] = hw_zeros((uint32_t)b <<
							      (8 * k),
							      hw_block[j]);
}

static uint32_t shift(uint32_t c, unsigned int j)
{
	return shift_tab[j][0][c & 0xff] ^ shift_tab[j][1][(c >> 8) & 0xff] ^
	       shift_tab[j][2][(c >> 16) & 0xff] ^ shift_tab[j][3][c >> 24];
}

/* 3 * hw_block[j] bytes at p (8-aligned) onto the raw register c. */
__attribute__((target("sse4.2")))
static uint32_t hw_triple(uint32_t c, const unsigned char *p, unsigned int j)
{
	size_t i, n = hw_block[j];
	uint64_t a = c, b = 0, d = 0;

	for (i = 0; i < n; i += 8) {
		a = __builtin_ia32_crc32di(a, load64(p + i));
		b = __builtin_ia32_crc32di(b, load64(p + n + i));
		d = __builtin_ia32_crc32di(d, load64(p + 2 * n + i));
	}
	return shift(shift((uint32_t)a, j) ^ (uint32_t)b, j) ^ (uint32_t)d;
}

__attribute__((target("sse4.2")))
static uint32_t hw_raw(uint32_t c, const unsigned char *p, size_t len)
{
	uint64_t c64;
	unsigned int j;

	for (; len && ((uintptr_t)p & 7); len--)
		c = __builtin_ia32_crc32qi(c, *p++);
	if (len >= 3 * hw_block[HW_BLOCKS - 1])
		pthread_once(&shift_once, shift_init);
	for (j = 0; j < HW_BLOCKS; j++)
		for (; len >= 3 * hw_block[j]; len -= 3 * hw_block[j],
						p += 3 * hw_block[j])
			c = hw_triple(c, p, j);
	c64 = c;
	for (; len >= 8; len -= 8, p += 8)
		c64 = __builtin_ia32_crc32di(c64, load64(p));
	c = (uint32_t)c64;
	while (len--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}

int hcomm__crc32c_hw_ok(void)
{
	return __builtin_cpu_supports("sse4.2");
}

uint32_t hcomm__crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	if (!hcomm__crc32c_hw_ok())
		return hcomm__crc32c_sw(crc, buf, len);
	return ~hw_raw(~crc, buf, len);
}

/* 0: not decided yet, 1: table, 2: instruction (relaxed: idempotent). */
static int impl;

uint32_t hcomm__crc32c(uint32_t crc, const void *buf, size_t len)
{
	int i = __atomic_load_n(&impl, __ATOMIC_RELAXED);

	if (!i) {
		i = hcomm__crc32c_hw_ok() ? 2 : 1;
		__atomic_store_n(&impl, i, __ATOMIC_RELAXED);
	}
	if (i == 2)
		return ~hw_raw(~crc, buf, len);
	return hcomm__crc32c_sw(crc, buf, len);
}
#else
int hcomm__crc32c_hw_ok(void)
{
	return 0;
}

uint32_t hcomm__crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	return hcomm__crc32c_sw(crc, buf, len);
}

uint32_t hcomm__crc32c(uint32_t crc, const void *buf, size_t len)
{
	return hcomm__crc32c_sw(crc, buf, len);
}
#endif
