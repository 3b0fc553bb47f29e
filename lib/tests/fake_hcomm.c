/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fake_hcomm.h"

struct fake_hcomm fake;

static struct fake_region *find(uint32_t region)
{
	unsigned i;

	for (i = 0; i < FAKE_MAX_REGIONS; i++)
		if (region && fake.regs[i].region == region)
			return &fake.regs[i];
	return NULL;
}

static int reg(uint32_t type, uint32_t access, uint64_t addr, uint64_t len,
	       __u32 *region, __u64 *key)
{
	struct fake_region *r;
	unsigned i;

	if (fake.enomem)
		return -ENOMEM;
	if (!len || (access & ~HCOMM_ACCESS_ALL))
		return -EINVAL;
	for (i = 0; i < FAKE_MAX_REGIONS && fake.regs[i].region; i++)
		;
	if (i == FAKE_MAX_REGIONS)
		return -ENOSPC;
	r = &fake.regs[i];
	*r = (struct fake_region){ ++fake.next_region, type, access, addr, len };
	*region = r->region;
	*key = FAKE_KEY(r->region);
	fake.live++;
	return 0;
}

static int query(struct hcomm_query *q)
{
	struct fake_region *r = find(q->region);
	struct hcomm_extent e = { 0 };

	if (!r)
		return -ENOENT;
	if (q->flags)
		return -EINVAL;
	q->type = r->type;
	q->addr = r->addr;
	q->len = r->len;
	q->key = FAKE_KEY(r->region);
	q->offset = r->addr & 4095;
	q->nr_pages = (q->offset + q->len + 4095) / 4096;
	q->nr_extents = 1;
	q->access = r->access;
	q->state = HCOMM_STATE_ACTIVE;
	e.len = q->nr_pages * 4096;
	if (q->extents && q->max_extents)
		memcpy((void *)(uintptr_t)q->extents, &e, sizeof(e));
	return 0;
}

static int fake_cmd(unsigned long req, void *arg)
{
	struct hcomm_reg_mem *rm = arg;
	struct hcomm_reg_dmabuf *rd = arg;
	struct hcomm_dereg *dr = arg;
	struct hcomm_info *in = arg;
	struct fake_region *r;
	int ret;

	fake.ioctls++;
	switch (req) {
	case HCOMM_CMD_GET_INFO:
		memset(in, 0, sizeof(*in));
		in->abi_version = fake.abi;
		in->features = fake.features;
		in->max_region_size = 1ULL << 30;
		in->page_sizes = (1ULL << 12) | (1ULL << 21);
		in->max_regions = FAKE_MAX_REGIONS;
		in->nr_regions = fake.live;
		in->memlock_limit = fake.memlock;
		return 0;
	case HCOMM_CMD_REG_MEM:
		if (rm->flags || rm->region || rm->key)
			return -EINVAL;
		ret = reg(HCOMM_REGION_HOST, rm->access, rm->addr, rm->len,
			  &rm->region, &rm->key);
		if (ret)
			return ret;
		rm->generation = fake.gen[rm->region % HCOMM_GEN_SLOTS];
		fake.regs_made++;
		return 0;
	case HCOMM_CMD_REG_DMABUF:
		if (rd->fd < 0)
			return -EBADF;
		if (rd->flags || (rd->offset & 4095))
			return -EINVAL;
		return reg(HCOMM_REGION_DMABUF, rd->access, 0, rd->len,
			   &rd->region, &rd->key);
	case HCOMM_CMD_DEREG:
		r = find(dr->region);
		if (!r)
			return -ENOENT;
		fake.gen[r->region % HCOMM_GEN_SLOTS]++;
		r->region = 0;
		fake.live--;
		fake.deregs++;
		return 0;
	case HCOMM_CMD_QUERY:
		return query(arg);
	case HCOMM_CMD_SET_QOS:
		memcpy(&fake.qos, arg, sizeof(fake.qos));
		return -fake.qos_errno;
	}
	return -ENOTTY;
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	int ret;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!fake.on || _IOC_TYPE(req) != HCOMM_IOC_MAGIC)
		return syscall(SYS_ioctl, fd, req, arg);
	ret = fake_cmd(req, arg);
	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	return ret;
}

__attribute__((constructor)) static void fake_from_env(void)
{
	const char *f = getenv("FAKE_HCOMM_FEATURES");

	if (!getenv("FAKE_HCOMM"))
		return;
	fake.on = 1;
	fake.abi = HCOMM_ABI_VERSION;
	fake.memlock = ~0ULL;
	fake.features = f ? strtoull(f, NULL, 0) : HCOMM_FEAT_URING_CMD;
}
