// SPDX-License-Identifier: GPL-2.0
/*
 * hcomm.ko: the /dev/hcomm misc device, its contexts and module parameters.
 *
 * Each open() of /dev/hcomm is a context (struct hcomm_ctx) owned by the
 * opening process; the last close releases everything it registered.  The
 * device node is created last on load and removed first on unload, so no
 * context can exist while the module is half set up.
 */
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/miscdevice.h>
#include <linux/device.h>
#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/slab.h>
#include <linux/sched/mm.h>

#include "hcomm.h"
#include "hcomm_compat.h"

unsigned long hcomm_max_region_size = 1UL << 36;
module_param_named(max_region_size, hcomm_max_region_size, ulong, 0644);
MODULE_PARM_DESC(max_region_size,
		 "Largest region one registration may cover, in bytes (default 64 GiB)");

unsigned int hcomm_max_regions = 65536;
module_param_named(max_regions, hcomm_max_regions, uint, 0644);
MODULE_PARM_DESC(max_regions,
		 "Regions one context (open file) may hold (default 65536)");

struct hcomm_stats hcomm_stats;

/* Parent of the misc device and the device dma-buf attachments use. */
static struct device *hcomm_dma_dev;

static int hcomm_open(struct inode *inode, struct file *file)
{
	struct hcomm_ctx *ctx;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT);
	if (!ctx)
		return -ENOMEM;
	xa_init_flags(&ctx->regions, XA_FLAGS_ALLOC1);
	mmgrab(current->mm);
	ctx->mm = current->mm;
	ctx->dev = hcomm_dma_dev;
	file->private_data = ctx;
	atomic64_inc(&hcomm_stats.contexts);
	return nonseekable_open(inode, file);
}

static int hcomm_release(struct inode *inode, struct file *file)
{
	struct hcomm_ctx *ctx = file->private_data;

	hcomm_ctx_release_regions(ctx);
	mmdrop(ctx->mm);
	kfree(ctx);
	atomic64_dec(&hcomm_stats.contexts);
	return 0;
}

static const struct file_operations hcomm_fops = {
	.owner = THIS_MODULE,
	.open = hcomm_open,
	.release = hcomm_release,
	.unlocked_ioctl = hcomm_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.uring_cmd = hcomm_uring_cmd,
};

static struct miscdevice hcomm_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "hcomm",
	.fops = &hcomm_fops,
	.mode = 0666,
};

static int __init hcomm_init(void)
{
	int ret;

	hcomm_dma_dev = root_device_register("hcomm");
	if (IS_ERR(hcomm_dma_dev))
		return PTR_ERR(hcomm_dma_dev);
	ret = dma_coerce_mask_and_coherent(hcomm_dma_dev, DMA_BIT_MASK(64));
	if (ret)
		goto err_unregister_root;
	hcomm_debugfs_init();
	hcomm_misc.parent = hcomm_dma_dev;
	ret = misc_register(&hcomm_misc);
	if (ret)
		goto err_debugfs;
	return 0;

err_debugfs:
	hcomm_debugfs_exit();
err_unregister_root:
	root_device_unregister(hcomm_dma_dev);
	return ret;
}

static void __exit hcomm_exit(void)
{
	misc_deregister(&hcomm_misc);
	hcomm_debugfs_exit();
	root_device_unregister(hcomm_dma_dev);
}

module_init(hcomm_init);
module_exit(hcomm_exit);

MODULE_DESCRIPTION("hcomm: memory registration and transfers for heterogeneous compute");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS(DMA_BUF);
