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

/*
 * gen: a generation page as the module keeps it: REG_MEM returns
 * gen[region % HCOMM_GEN_SLOTS], DEREG bumps it; a test bumps a slot to
 * play munmap.  regs_made/deregs count successful REG_MEMs and DEREGs.
 * SET_QOS only records its argument (the scheduler's rules are tested
 * against the module, in the VM).
 */
struct fake_hcomm {
	int on, abi, enomem, ioctls;
	int qos_errno;			/* SET_QOS fails with it when set */
	struct hcomm_qos qos;		/* the last SET_QOS argument */
	uint64_t features, memlock;
	uint32_t next_region, live;
	uint32_t regs_made, deregs;
	struct fake_region regs[FAKE_MAX_REGIONS];
	uint64_t gen[HCOMM_GEN_SLOTS];
};

extern struct fake_hcomm fake;

#endif
