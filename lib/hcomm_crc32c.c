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
 * buffers of 3 * HW_BLOCK bytes and more are done as three interleaved
 * streams A, B, C of HW_BLOCK bytes each, then combined.  The raw CRC
 * register is affine in its input: crc(c, X || Y) = shift(crc(c, X)) ^
 * crc(0, Y) with shift(x) = crc(x, |Y| zero bytes), linear in x; so
 * crc(c, A || B || C) = shift(shift(crc(c, A)) ^ crc(0, B)) ^ crc(0, C),
 * shift by HW_BLOCK bytes being four lookups in shift_tab (4 KiB, built
 * once with the instruction).
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
#define HW_BLOCK	4096

/* shift(b << 8k) by HW_BLOCK zero bytes: written under shift_once. */
static uint32_t shift_tab[4][256];
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
	int k, b;

	for (k = 0; k < 4; k++)
		for (b = 0; b < 256; b++)
			shift_tab[k][b] = hw_zeros((uint32_t)b << (8 * k),
						   HW_BLOCK);
}

static uint32_t shift(uint32_t c)
{
	return shift_tab[0][c & 0xff] ^ shift_tab[1][(c >> 8) & 0xff] ^
	       shift_tab[2][(c >> 16) & 0xff] ^ shift_tab[3][c >> 24];
}

/* 3 * HW_BLOCK bytes at p (8-aligned) onto the raw register c. */
__attribute__((target("sse4.2")))
static uint32_t hw_triple(uint32_t c, const unsigned char *p)
{
	uint64_t a = c, b = 0, d = 0;
	size_t i;

	for (i = 0; i < HW_BLOCK; i += 8) {
		a = __builtin_ia32_crc32di(a, load64(p + i));
		b = __builtin_ia32_crc32di(b, load64(p + HW_BLOCK + i));
		d = __builtin_ia32_crc32di(d, load64(p + 2 * HW_BLOCK + i));
	}
	return shift(shift((uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)d;
}

__attribute__((target("sse4.2")))
static uint32_t hw_raw(uint32_t c, const unsigned char *p, size_t len)
{
	uint64_t c64;

	for (; len && ((uintptr_t)p & 7); len--)
		c = __builtin_ia32_crc32qi(c, *p++);
	if (len >= 3 * HW_BLOCK)
		pthread_once(&shift_once, shift_init);
	for (; len >= 3 * HW_BLOCK; len -= 3 * HW_BLOCK, p += 3 * HW_BLOCK)
		c = hw_triple(c, p);
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
