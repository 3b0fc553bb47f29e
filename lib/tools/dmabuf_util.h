/* SPDX-License-Identifier: MIT */
/*
 * dma-buf exporters for tests and demos: udmabuf (memfd pages) or vgem
 * (dumb buffer).  No libhcomm dependency; copy freely.
 */
#ifndef HCOMM_DMABUF_UTIL_H
#define HCOMM_DMABUF_UTIL_H

#include <stddef.h>
#include <stdint.h>

struct dmabuf_buf {
	int fd;			/* the dma-buf */
	int backing_fd;		/* memfd (udmabuf) or DRM fd (vgem) */
	uint32_t handle;	/* vgem GEM handle */
	size_t size;		/* bytes, a page multiple */
	const char *exporter;	/* "udmabuf" or "vgem" */
};

/* memfd (sealed against shrinking) -> UDMABUF_CREATE.  0 or -errno. */
int dmabuf_alloc_udmabuf(struct dmabuf_buf *b, size_t size);
/* Open the first /dev/dri/card* driven by vgem: fd or -errno. */
int dmabuf_open_vgem(void);
/* vgem dumb buffer -> PRIME fd (DRM_CLOEXEC | DRM_RDWR).  0 or -errno. */
int dmabuf_alloc_vgem(struct dmabuf_buf *b, size_t size);
/* udmabuf when /dev/udmabuf exists, else vgem.  0 or -errno. */
int dmabuf_alloc(struct dmabuf_buf *b, size_t size);
/* Release what dmabuf_alloc*() made (also after it failed); idempotent. */
void dmabuf_free(struct dmabuf_buf *b);

#endif /* HCOMM_DMABUF_UTIL_H */
