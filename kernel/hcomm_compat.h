/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernels hcomm builds against (6.1 .. 6.12).
 *
 * Decided by feature probes in Kbuild (HCOMM_HAVE_*), not by version
 * numbers, because distributions backport.  Nothing else in hcomm may test
 * the kernel version.
 */
#ifndef _HCOMM_COMPAT_H
#define _HCOMM_COMPAT_H

#ifdef HCOMM_HAVE_IO_URING_CMD_H
#include <linux/io_uring/cmd.h>		/* 6.7+ */
#else
#include <linux/io_uring.h>
#endif

/*
 * The SQE payload of a passthrough command: 6.1 points at it directly
 * (ioucmd->cmd); later kernels keep the SQE and provide io_uring_sqe_cmd().
 */
static inline const void *hcomm_uring_payload(const struct io_uring_cmd *c)
{
#ifdef HCOMM_HAVE_IO_URING_SQE_CMD
	return io_uring_sqe_cmd(c->sqe);
#else
	return c->cmd;
#endif
}

/*
 * May a command that would sleep answer -EAGAIN to IO_URING_F_NONBLOCK?
 * io_uring then reissues it from io-wq and the payload is read again.
 * 6.1 points ioucmd->cmd at a private copy of the SQE before the reissue.
 * Kernels with io_uring_sqe_cmd() up to at least 6.12.118 copy the SQE on
 * -EAGAIN but leave ioucmd->sqe on the ring slot, which userspace may
 * already have refilled: there the command runs inline (it may block; the
 * submitter is in process context) rather than read a reused slot.
 */
static inline bool hcomm_uring_can_punt(void)
{
#ifdef HCOMM_HAVE_IO_URING_SQE_CMD
	return false;
#else
	return true;
#endif
}

#endif /* _HCOMM_COMPAT_H */
