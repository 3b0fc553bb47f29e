/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/udmabuf.h>
#include <drm.h>
#include <drm_mode.h>

#include "dmabuf_util.h"

static void init(struct dmabuf_buf *b, size_t size, const char *exporter)
{
	b->fd = -1;
	b->backing_fd = -1;
	b->handle = 0;
	b->size = size;
	b->exporter = exporter;
}

int dmabuf_alloc_udmabuf(struct dmabuf_buf *b, size_t size)
{
	struct udmabuf_create c = { .flags = UDMABUF_FLAGS_CLOEXEC };
	int dev, err;

	init(b, size, "udmabuf");
	b->backing_fd = memfd_create("hcomm-dmabuf", MFD_ALLOW_SEALING |
							MFD_CLOEXEC);
	if (b->backing_fd < 0)
		return -errno;
	if (ftruncate(b->backing_fd, size) ||
	    fcntl(b->backing_fd, F_ADD_SEALS, F_SEAL_SHRINK))
		goto err;
	dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		goto err;
	c.memfd = b->backing_fd;
	c.size = size;
	b->fd = ioctl(dev, UDMABUF_CREATE, &c);
	err = errno;
	close(dev);
	errno = err;
	if (b->fd < 0)
		goto err;
	return 0;
err:
	err = -errno;
	dmabuf_free(b);
	return err;
}

int dmabuf_open_vgem(void)
{
	char path[32], name[16];
	int i, fd, ret = -ENODEV;

	for (i = 0; i < 64; i++) {
		struct drm_version v = {
			.name = name,
			.name_len = sizeof(name) - 1,
		};

		snprintf(path, sizeof(path), "/dev/dri/card%d", i);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			if (errno != ENOENT)
				ret = -errno;
			continue;
		}
		memset(name, 0, sizeof(name));
		if (!ioctl(fd, DRM_IOCTL_VERSION, &v) &&
		    !strcmp(name, "vgem"))
			return fd;
		close(fd);
	}
	return ret;
}

int dmabuf_alloc_vgem(struct dmabuf_buf *b, size_t size)
{
	struct drm_mode_create_dumb c = { .width = 1024, .bpp = 32 };
	struct drm_prime_handle p = { .flags = DRM_CLOEXEC | DRM_RDWR };
	int err;

	init(b, size, "vgem");
	if (!size || size % 4096)
		return -EINVAL;
	b->backing_fd = dmabuf_open_vgem();
	if (b->backing_fd < 0)
		return b->backing_fd;
	c.height = size / 4096;		/* 1024 px * 4 B = 4 KiB rows */
	if (ioctl(b->backing_fd, DRM_IOCTL_MODE_CREATE_DUMB, &c))
		goto err;
	b->handle = c.handle;
	p.handle = c.handle;
	if (ioctl(b->backing_fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p))
		goto err;
	b->fd = p.fd;
	return 0;
err:
	err = -errno;
	dmabuf_free(b);
	return err;
}

int dmabuf_alloc(struct dmabuf_buf *b, size_t size)
{
	if (!access("/dev/udmabuf", F_OK))
		return dmabuf_alloc_udmabuf(b, size);
	return dmabuf_alloc_vgem(b, size);
}

void dmabuf_free(struct dmabuf_buf *b)
{
	if (b->fd >= 0)
		close(b->fd);
	if (b->handle) {
		struct drm_mode_destroy_dumb d = { .handle = b->handle };

		ioctl(b->backing_fd, DRM_IOCTL_MODE_DESTROY_DUMB, &d);
	}
	if (b->backing_fd >= 0)
		close(b->backing_fd);
	b->fd = -1;
	b->backing_fd = -1;
	b->handle = 0;
}
