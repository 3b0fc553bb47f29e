/* SPDX-License-Identifier: MIT */
/*
 * The tcp transport's hello and frame header, built by hand for tests
 * that play a hostile or broken peer (test_tcp, vm/hcomm_vm_garbage):
 * the layout of Documentation/transports.rst, "The tcp transport".
 */
#ifndef HCOMM_TESTS_TCP_WIRE_H
#define HCOMM_TESTS_TCP_WIRE_H

#include <stdint.h>
#include <string.h>

#include "hcomm_crc32c.h"

static inline void le32(unsigned char *b, uint32_t v)
{
	memcpy(b, &v, 4);	/* x86: little-endian */
}

static inline void le64(unsigned char *b, uint64_t v)
{
	memcpy(b, &v, 8);
}

/* A 32-byte hello from rank from to rank to. */
static inline void wire_hello(unsigned char *b, uint64_t nonce, int from,
			      int to, uint32_t lane, uint16_t version)
{
	memset(b, 0, 32);
	le32(b, 0x48544348u);
	memcpy(b + 4, &version, 2);
	le64(b + 8, nonce);
	le32(b + 16, (uint32_t)from);
	le32(b + 20, (uint32_t)to);
	le32(b + 24, lane);
	le32(b + 28, hcomm__crc32c(0, b, 28));
}

/* A 64-byte frame header (no flags, no signal). */
static inline void wire_frame(unsigned char *b, uint8_t op, uint64_t seq,
			      uint64_t off, uint64_t len, uint32_t win,
			      uint32_t dcrc)
{
	memset(b, 0, 64);
	le32(b, 0x46544348u);
	b[4] = op;
	le64(b + 8, seq);
	le64(b + 24, off);
	le64(b + 32, len);
	le32(b + 48, win);
	le32(b + 56, dcrc);
	le32(b + 60, hcomm__crc32c(0, b, 60));
}

#endif
