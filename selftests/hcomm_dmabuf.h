/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dma-buf providers for the hcomm selftests: udmabuf (memfd backed), vgem
 * (DRM dumb buffer exported with PRIME) and the dma-heap "system" heap.
 * Each returns a dma-buf fd or -errno; -ENODEV means "not on this kernel".
 * None of them asserts, so children may use them.
 */
#ifndef HCOMM_SELFTEST_DMABUF_H
#define HCOMM_SELFTEST_DMABUF_H

#include <glob.h>
#include <linux/dma-heap.h>
#include <linux/udmabuf.h>
#include <drm.h>
#include <drm_mode.h>

#include "hcomm_util.h"

#ifndef F_SEAL_SHRINK
#include <linux/fcntl.h>
#endif

#define UDMABUF_DEV	"/dev/udmabuf"
#define DMA_HEAP_SYSTEM	"/dev/dma_heap/system"

/* A memfd of @size bytes (not a dma-buf). */
static HC_UNUSED int make_memfd(size_t size, bool seal)
{
	int fd = memfd_create("hcomm-selftest", MFD_CLOEXEC |
			      (seal ? MFD_ALLOW_SEALING : 0));

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, size) ||
	    (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK))) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* udmabuf over a sealed memfd; -ENODEV when /dev/udmabuf is absent. */
static HC_UNUSED int udmabuf_create(size_t size)
{
	struct udmabuf_create c;
	int dev, memfd, buf, err;

	dev = open(UDMABUF_DEV, O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return errno == ENOENT ? -ENODEV : -errno;
	memfd = make_memfd(size, true);
	if (memfd < 0) {
		close(dev);
		return memfd;
	}
	memset(&c, 0, sizeof(c));
	c.memfd = memfd;
	c.flags = UDMABUF_FLAGS_CLOEXEC;
	c.offset = 0;
	c.size = size;
	buf = ioctl(dev, UDMABUF_CREATE, &c);
	err = buf < 0 ? -errno : buf;
	close(memfd);		/* the dma-buf holds the pages */
	close(dev);
	return err;
}

/* dma-buf from the dma-heap "system" heap; -ENODEV when absent. */
static HC_UNUSED int dma_heap_create(size_t size)
{
	struct dma_heap_allocation_data d;
	int heap, ret;

	heap = open(DMA_HEAP_SYSTEM, O_RDWR | O_CLOEXEC);
	if (heap < 0)
		return errno == ENOENT ? -ENODEV : -errno;
	memset(&d, 0, sizeof(d));
	d.len = size;
	d.fd_flags = O_RDWR | O_CLOEXEC;
	ret = ioctl(heap, DMA_HEAP_IOCTL_ALLOC, &d) < 0 ? -errno : (int)d.fd;
	close(heap);
	return ret;
}

static HC_UNUSED bool drm_is_vgem(int fd)
{
	struct drm_version v;
	char name[64];

	memset(&v, 0, sizeof(v));
	memset(name, 0, sizeof(name));
	v.name = name;
	v.name_len = sizeof(name) - 1;
	if (ioctl(fd, DRM_IOCTL_VERSION, &v))
		return false;
	return !strcmp(name, "vgem");
}

static HC_UNUSED int vgem_scan(void)
{
	glob_t g;
	size_t i;
	int fd = -ENODEV;

	if (glob("/dev/dri/card*", 0, NULL, &g))
		return -ENODEV;
	for (i = 0; i < g.gl_pathc; i++) {
		int c = open(g.gl_pathv[i], O_RDWR | O_CLOEXEC);

		if (c < 0)
			continue;
		if (drm_is_vgem(c)) {
			fd = c;
			break;
		}
		close(c);
	}
	globfree(&g);
	return fd;
}

/*
 * Open the vgem card: scan /dev/dri/card*, else "modprobe vgem" and poll
 * up to 3 s for devtmpfs to show the node.  -ENODEV when there is none.
 */
static HC_UNUSED int vgem_open(void)
{
	static bool tried_modprobe;
	int fd, i;

	fd = vgem_scan();
	if (fd >= 0 || tried_modprobe)
		return fd;
	tried_modprobe = true;
	if (system("modprobe vgem >/dev/null 2>&1") != 0)
		return -ENODEV;
	for (i = 0; i < 30; i++) {
		fd = vgem_scan();
		if (fd >= 0)
			return fd;
		hc_sleep_ms(100);
	}
	return -ENODEV;
}

/*
 * A vgem dumb buffer of @size bytes (multiple of 4 KiB) as a dma-buf,
 * exported read-write, or read-only (no DRM_RDWR) when @rdonly.
 */
static HC_UNUSED int vgem_dmabuf_mode(int card, size_t size, bool rdonly)
{
	struct drm_mode_create_dumb c;
	struct drm_prime_handle p;
	struct drm_gem_close gc;
	int ret;

	memset(&c, 0, sizeof(c));
	c.width = PG / 4;		/* 32 bpp: one page per row */
	c.height = size / PG;
	c.bpp = 32;
	if (ioctl(card, DRM_IOCTL_MODE_CREATE_DUMB, &c))
		return -errno;
	if (c.size < size)
		return -ENOSPC;
	memset(&p, 0, sizeof(p));
	p.handle = c.handle;
	p.flags = DRM_CLOEXEC | (rdonly ? 0 : DRM_RDWR);
	ret = ioctl(card, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p) ? -errno : p.fd;
	memset(&gc, 0, sizeof(gc));
	gc.handle = c.handle;
	ioctl(card, DRM_IOCTL_GEM_CLOSE, &gc);	/* the dma-buf keeps it */
	return ret;
}

static HC_UNUSED int vgem_dmabuf(int card, size_t size)
{
	return vgem_dmabuf_mode(card, size, false);
}

/* A vgem dma-buf without keeping the card open. */
static HC_UNUSED int vgem_create(size_t size)
{
	int card = vgem_open(), buf;

	if (card < 0)
		return card;
	buf = vgem_dmabuf(card, size);
	close(card);
	return buf;
}

enum dmabuf_provider { DMABUF_UDMABUF, DMABUF_VGEM, DMABUF_HEAP,
		       DMABUF_NR_PROVIDERS };

static const char * const dmabuf_provider_name[] = {
	[DMABUF_UDMABUF] = "udmabuf",
	[DMABUF_VGEM] = "vgem",
	[DMABUF_HEAP] = "dma-heap system",
};

static HC_UNUSED int dmabuf_create(enum dmabuf_provider p, size_t size)
{
	switch (p) {
	case DMABUF_UDMABUF:
		return udmabuf_create(size);
	case DMABUF_VGEM:
		return vgem_create(size);
	case DMABUF_HEAP:
		return dma_heap_create(size);
	default:
		return -EINVAL;
	}
}

/* A dma-buf from whichever provider works; *which says which. */
static HC_UNUSED int dmabuf_any(size_t size, enum dmabuf_provider *which)
{
	int p, fd = -ENODEV;

	for (p = 0; p < DMABUF_NR_PROVIDERS; p++) {
		fd = dmabuf_create(p, size);
		if (fd >= 0) {
			if (which)
				*which = p;
			return fd;
		}
	}
	return fd;
}

static HC_UNUSED off_t dmabuf_size(int fd)
{
	return lseek(fd, 0, SEEK_END);
}

#endif /* HCOMM_SELFTEST_DMABUF_H */
