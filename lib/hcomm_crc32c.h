/* SPDX-License-Identifier: MIT */
/*
 * libhcomm internals: CRC32C (Castagnoli, polynomial 0x1EDC6F41, reflected,
 * initial value and final xor 0xFFFFFFFF: the iSCSI / ext4 / SCTP one),
 * used by the network transports to check frames (hcomm_crc32c.c).
 *
 * Running form: crc = hcomm__crc32c(0, a, n) gives the CRC of a; then
 * hcomm__crc32c(crc, b, m) is the CRC of a followed by b.  The SSE4.2
 * crc32 instruction is used when the CPU has it (checked once, at the
 * first call), else a slicing-by-8 table.  Thread safe, no allocation.
 */
#ifndef LIBHCOMM_CRC32C_H
#define LIBHCOMM_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include "hcomm_int.h"

/* CRC32C of buf[0 .. len) continuing crc (0 to start). */
HCOMM_HIDDEN uint32_t hcomm__crc32c(uint32_t crc, const void *buf,
				    size_t len);
/* The same with the table only (the fallback; for the unit tests). */
HCOMM_HIDDEN uint32_t hcomm__crc32c_sw(uint32_t crc, const void *buf,
				       size_t len);
/*
 * The same with the crc32 instruction; only where hcomm__crc32c_hw_ok()
 * says 1 (else it is the table's).
 */
HCOMM_HIDDEN uint32_t hcomm__crc32c_hw(uint32_t crc, const void *buf,
				       size_t len);
/* 1 when this CPU runs the SSE4.2 crc32 instruction. */
HCOMM_HIDDEN int hcomm__crc32c_hw_ok(void);

#endif /* LIBHCOMM_CRC32C_H */
