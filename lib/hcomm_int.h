/* SPDX-License-Identifier: MIT */
/* libhcomm internals; exposed (hidden visibility) for the unit tests. */
#ifndef LIBHCOMM_INT_H
#define LIBHCOMM_INT_H

#include <liburing.h>
#include "hcomm.h"

#define HCOMM_EXPORT	__attribute__((visibility("default")))
#define HCOMM_HIDDEN	__attribute__((visibility("hidden")))

/* Fill sqe with an IORING_OP_URING_CMD for cmd_op carrying arg/size. */
HCOMM_HIDDEN void hcomm__prep_cmd(struct io_uring_sqe *sqe, int fd,
				  uint32_t cmd_op, void *arg, uint32_t size);
/*
 * Positive enum hcomm_err for a positive errno; cmd_op is the HCOMM_CMD_x
 * that failed, or 0 for open() of the device.
 */
HCOMM_HIDDEN int hcomm__err_code(uint32_t cmd_op, int err);
/*
 * Record a failure for hcomm_errno()/hcomm_errmsg() (printf format; ": "
 * and strerror(err) appended when err is not 0); returns -code.
 */
HCOMM_HIDDEN __attribute__((format(printf, 3, 4)))
int hcomm__fail(int code, int err, const char *fmt, ...);

/*
 * One variable of hcomm_config_from_env (e.g. "HCOMM_CACHE_LIMIT"),
 * checked the same way: 1 and *out set, 0 when unset (*out unchanged), or
 * -HCOMM_ERR_INVAL with hcomm_errmsg() naming the variable.
 */
HCOMM_HIDDEN int hcomm__config_env(const char *name, uint64_t *out);
/*
 * HCOMM_COLL_TIMEOUT_MS into *out when set: 1 .. 3600000 ms, or "inf"
 * (-1: no limit); unset: *out unchanged.  0, or -HCOMM_ERR_INVAL with
 * hcomm_errmsg() naming the variable.
 */
HCOMM_HIDDEN int hcomm__coll_timeout_from_env(int64_t *out);

#endif /* LIBHCOMM_INT_H */
