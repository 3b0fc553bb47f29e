/* SPDX-License-Identifier: MIT */
/*
 * A fake hcomm.ko behind ioctl() for host tests: linked into a program its
 * ioctl() replaces libc's; as fake_hcomm.so it works under LD_PRELOAD
 * (enabled by FAKE_HCOMM=1; FAKE_HCOMM_FEATURES sets the feature bits).
 * Only hcomm commands are faked, and only while fake.on.
 */
#ifndef FAKE_HCOMM_H
#define FAKE_HCOMM_H

#include <stdint.h>
#include <linux/hcomm.h>

#define FAKE_MAX_REGIONS 8
#define FAKE_KEY(region) (0xfeed0000ULL + (region))

struct fake_region {
	uint32_t region, type, access;
	uint64_t addr, len;
};

struct fake_hcomm {
	int on, abi, enomem, ioctls;
	uint64_t features, memlock;
	uint32_t next_region, live;
	struct fake_region regs[FAKE_MAX_REGIONS];
};

extern struct fake_hcomm fake;

#endif
