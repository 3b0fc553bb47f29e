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
#include <linux/vmalloc.h>
#include <linux/sizes.h>

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

unsigned int hcomm_max_inline = 4096;
module_param_named(max_inline, hcomm_max_inline, uint, 0644);
MODULE_PARM_DESC(max_inline,
		 "Transfers up to this many bytes complete in the submitting call (default 4096, at most 65536)");

unsigned int hcomm_chunk_size = SZ_256K;
module_param_named(chunk_size, hcomm_chunk_size, uint, 0644);
MODULE_PARM_DESC(chunk_size,
		 "Bytes the engine copies per scheduling step (default 262144)");

unsigned int hcomm_nr_doorbells = 4096;
module_param_named(doorbells, hcomm_nr_doorbells, uint, 0644);
MODULE_PARM_DESC(doorbells,
		 "64-bit doorbells per context (default 4096)");

unsigned long hcomm_cache_limit;
module_param_named(cache_limit, hcomm_cache_limit, ulong, 0644);
MODULE_PARM_DESC(cache_limit,
		 "Bytes of deregistered memory a new context's registration cache keeps pinned (default 0: DEREG unpins; raise per context with SET_CTX)");

unsigned int hcomm_workers;
module_param_named(workers, hcomm_workers, uint, 0444);
MODULE_PARM_DESC(workers,
		 "Transfer engine slots: chunks copied at once, and the most copy threads of one context (default: one per online CPU)");

unsigned int hcomm_qos_user_min_rate;
module_param_named(qos_user_min_rate, hcomm_qos_user_min_rate, uint, 0644);
MODULE_PARM_DESC(qos_user_min_rate,
		 "Percent of the engine all contexts of one user may reserve with SET_QOS min_rate without CAP_SYS_NICE (default 0)");

unsigned int hcomm_qos_user_priority;
module_param_named(qos_user_priority, hcomm_qos_user_priority, uint, 0644);
MODULE_PARM_DESC(qos_user_priority,
		 "Highest SET_QOS priority a context may set without CAP_SYS_NICE (default 0)");

unsigned int hcomm_slot_slow_ms = 20;
module_param_named(slot_slow_ms, hcomm_slot_slow_ms, uint, 0644);
MODULE_PARM_DESC(slot_slow_ms,
		 "A slot out longer than this many ms makes its context slow for a second: it then holds at most its share of the slots (default 20; 0: never; at most 10000)");

struct hcomm_stats hcomm_stats;

LIST_HEAD(hcomm_ctx_list);
DEFINE_MUTEX(hcomm_ctx_list_lock);	/* protects hcomm_ctx_list */

/* Parent of the misc device and the device dma-buf attachments use. */
static struct device *hcomm_dma_dev;

static void hcomm_ctx_free(struct kref *ref)
{
	struct hcomm_ctx *ctx = container_of(ref, struct hcomm_ctx, ref);

	hcomm_db_free(ctx);
	free_page((unsigned long)ctx->gen);
	mmdrop(ctx->mm);
	mutex_destroy(&ctx->cache_lock);
	mutex_destroy(&ctx->db_mutex);
	kfree(ctx);
	atomic64_dec(&hcomm_stats.contexts);
}

/**
 * hcomm_ctx_put() - drop a reference to a context.
 * @ctx: context; freed with the last reference.
 */
void hcomm_ctx_put(struct hcomm_ctx *ctx)
{
	kref_put(&ctx->ref, hcomm_ctx_free);
}

/*
 * The opener's address space is going away: its process has exited.  On
 * kernels without IO_URING_F_CANCEL nothing else ends a parked io_uring
 * command of this context (it keeps the file and the ring alive), so end
 * every pending operation here.
 */
static void hcomm_mm_release(struct mmu_notifier *mn, struct mm_struct *mm)
{
	struct hcomm_ctx *ctx = container_of(mn, struct hcomm_ctx, mn);

	hcomm_ctx_cancel_all(ctx);
}

static const struct mmu_notifier_ops hcomm_mm_ops = {
	.release = hcomm_mm_release,
};

/*
 * Kernels without IO_URING_F_CANCEL: learn of the opener's exit from an mmu
 * notifier on its mm, registered here, in open(), where no hcomm lock is
 * held (mmu_notifier_register() takes mmap_lock, which ->mmap holds while
 * it takes ctx->db_mutex).  mm_take_all_locks() fails with -EINTR while
 * a signal or io_uring task work is pending: the open is restarted.
 */
static int hcomm_ctx_watch_exit(struct hcomm_ctx *ctx)
{
	int ret;

	if (hcomm_uring_can_cancel())
		return 0;
	ret = mmu_notifier_register(&ctx->mn, ctx->mm);
	if (ret == -EINTR)
		return -ERESTARTSYS;
	if (!ret)
		ctx->mn_registered = true;
	return ret;
}

/*
 * Kernels without IO_URING_F_CANCEL: io_uring waits, when a ring is closed
 * or a task cancels its requests (exit, exec), for commands it cannot
 * cancel.  While hcomm has io_uring commands parked, this sweep looks for
 * such commands every HCOMM_SWEEP_MS and ends them (-ECANCELED).
 */
#define HCOMM_SWEEP_MS	50

static void hcomm_sweep_fn(struct work_struct *work);
static DECLARE_DELAYED_WORK(hcomm_sweep_work, hcomm_sweep_fn);
static struct workqueue_struct *hcomm_sweep_wq;

static void hcomm_sweep_fn(struct work_struct *work)
{
	struct hcomm_ctx *ctx;
	unsigned int left = 0;

	mutex_lock(&hcomm_ctx_list_lock);
	list_for_each_entry(ctx, &hcomm_ctx_list, node)
		left += hcomm_ctx_cancel_orphans(ctx);
	mutex_unlock(&hcomm_ctx_list_lock);
	if (left)
		hcomm_sweep_kick();
}

/**
 * hcomm_sweep_kick() - make sure the sweep for orphaned io_uring commands
 * runs soon; called when an io_uring command is parked.
 */
void hcomm_sweep_kick(void)
{
	if (!hcomm_uring_can_cancel())
		queue_delayed_work(hcomm_sweep_wq, &hcomm_sweep_work,
				   msecs_to_jiffies(HCOMM_SWEEP_MS));
}

static int hcomm_open(struct inode *inode, struct file *file)
{
	struct hcomm_ctx *ctx;
	int ret;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT);
	if (!ctx)
		return -ENOMEM;
	ctx->gen = (u64 *)get_zeroed_page(GFP_KERNEL_ACCOUNT);
	if (!ctx->gen) {
		kfree(ctx);
		return -ENOMEM;
	}
	kref_init(&ctx->ref);
	xa_init_flags(&ctx->regions, XA_FLAGS_ALLOC1);
	mutex_init(&ctx->cache_lock);
	spin_lock_init(&ctx->inval_lock);
	ctx->cache_tree = RB_ROOT_CACHED;
	INIT_LIST_HEAD(&ctx->lru);
	ctx->cache_limit = READ_ONCE(hcomm_cache_limit);
	ret = hcomm_ctx_engine_init(ctx);
	if (ret) {
		free_page((unsigned long)ctx->gen);
		mutex_destroy(&ctx->cache_lock);
		mutex_destroy(&ctx->db_mutex);
		kfree(ctx);
		return ret;
	}
	mmgrab(current->mm);
	ctx->mm = current->mm;
	ctx->dev = hcomm_dma_dev;
	ctx->mn.ops = &hcomm_mm_ops;
	ret = hcomm_ctx_watch_exit(ctx);
	if (ret) {
		hcomm_ctx_engine_release(ctx);
		mmdrop(ctx->mm);
		free_page((unsigned long)ctx->gen);
		mutex_destroy(&ctx->cache_lock);
		mutex_destroy(&ctx->db_mutex);
		kfree(ctx);
		return ret;
	}
	ctx->pid = task_tgid_nr(current);
	get_task_comm(ctx->comm, current);
	mutex_lock(&hcomm_ctx_list_lock);
	list_add_tail(&ctx->node, &hcomm_ctx_list);
	mutex_unlock(&hcomm_ctx_list_lock);
	atomic64_inc(&hcomm_stats.contexts);
	file->private_data = ctx;
	return nonseekable_open(inode, file);
}

static int hcomm_release(struct inode *inode, struct file *file)
{
	struct hcomm_ctx *ctx = file->private_data;

	/* No command of this file is running or pending any more. */
	mutex_lock(&hcomm_ctx_list_lock);
	list_del(&ctx->node);
	mutex_unlock(&hcomm_ctx_list_lock);
	if (ctx->mn_registered)
		mmu_notifier_unregister(&ctx->mn, ctx->mm);
	hcomm_ctx_release_regions(ctx);
	hcomm_cache_release(ctx);
	hcomm_ctx_engine_release(ctx);
	hcomm_ctx_put(ctx);
	return 0;
}

static const struct file_operations hcomm_fops = {
	.owner = THIS_MODULE,
	.open = hcomm_open,
	.release = hcomm_release,
	.unlocked_ioctl = hcomm_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.uring_cmd = hcomm_uring_cmd,
	.mmap = hcomm_mmap,
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
	hcomm_max_inline = hcomm_max_inline_now();
	ret = -ENOMEM;
	hcomm_sweep_wq = alloc_workqueue("hcomm_sweep", 0, 0);
	if (!hcomm_sweep_wq)
		goto err_unregister_root;
	ret = hcomm_keys_init();
	if (ret)
		goto err_sweep;
	ret = hcomm_engine_init();
	if (ret)
		goto err_keys;
	hcomm_debugfs_init();
	hcomm_misc.parent = hcomm_dma_dev;
	ret = misc_register(&hcomm_misc);
	if (ret)
		goto err_debugfs;
	return 0;

err_debugfs:
	hcomm_debugfs_exit();
	hcomm_engine_exit();
err_keys:
	hcomm_keys_exit();
err_sweep:
	destroy_workqueue(hcomm_sweep_wq);
err_unregister_root:
	root_device_unregister(hcomm_dma_dev);
	return ret;
}

static void __exit hcomm_exit(void)
{
	misc_deregister(&hcomm_misc);
	cancel_delayed_work_sync(&hcomm_sweep_work);
	destroy_workqueue(hcomm_sweep_wq);
	hcomm_debugfs_exit();
	hcomm_engine_exit();
	hcomm_keys_exit();
	/* kfree_rcu() of the last regions */
	rcu_barrier();
	root_device_unregister(hcomm_dma_dev);
}

module_init(hcomm_init);
module_exit(hcomm_exit);

MODULE_DESCRIPTION("hcomm: memory registration and transfers for heterogeneous compute");
MODULE_VERSION("1.1");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS(DMA_BUF);
