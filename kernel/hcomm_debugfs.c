// SPDX-License-Identifier: GPL-2.0
/*
 * Statistics under /sys/kernel/debug/hcomm/.
 *
 * Read-only views of struct hcomm_stats; nothing here changes state.
 */
#include <linux/debugfs.h>
#include <linux/seq_file.h>
#include <linux/mutex.h>

#include "hcomm.h"

static struct dentry *hcomm_debugfs_dir;

static const char * const hcomm_cmd_names[HCOMM_NR_CMDS] = {
	[_IOC_NR(HCOMM_CMD_GET_INFO)] = "get_info",
	[_IOC_NR(HCOMM_CMD_REG_MEM)] = "reg_mem",
	[_IOC_NR(HCOMM_CMD_REG_DMABUF)] = "reg_dmabuf",
	[_IOC_NR(HCOMM_CMD_DEREG)] = "dereg",
	[_IOC_NR(HCOMM_CMD_QUERY)] = "query",
	[_IOC_NR(HCOMM_CMD_XFER)] = "xfer",
	[_IOC_NR(HCOMM_CMD_CANCEL)] = "cancel",
	[_IOC_NR(HCOMM_CMD_FENCE)] = "fence",
	[_IOC_NR(HCOMM_CMD_DB_WAIT)] = "db_wait",
	[_IOC_NR(HCOMM_CMD_GRANT)] = "grant",
	[_IOC_NR(HCOMM_CMD_SET_QOS)] = "set_qos",
	[_IOC_NR(HCOMM_CMD_SET_CTX)] = "set_ctx",
	[_IOC_NR(HCOMM_CMD_XFER_BATCH)] = "xfer_batch",
	[_IOC_NR(HCOMM_CMD_DB_WAIT_ANY)] = "db_wait_any",
};

static void hcomm_show(struct seq_file *m, const char *name, atomic64_t *v)
{
	seq_printf(m, "%s %lld\n", name, (long long)atomic64_read(v));
}

static int hcomm_stats_show(struct seq_file *m, void *unused)
{
	struct hcomm_stats *s = &hcomm_stats;
	int i;

	hcomm_show(m, "contexts", &s->contexts);
	hcomm_show(m, "regions", &s->regions);
	hcomm_show(m, "host_regions", &s->host_regions);
	hcomm_show(m, "dmabuf_regions", &s->dmabuf_regions);
	hcomm_show(m, "pinned_pages", &s->pinned_pages);
	hcomm_show(m, "memlock_pages", &s->memlock_pages);
	hcomm_show(m, "xfers_active", &s->xfers_active);
	hcomm_show(m, "waits_pending", &s->waits_pending);
	hcomm_show(m, "umems", &s->umems);
	hcomm_show(m, "cache_bytes", &s->cache_bytes);
	hcomm_show(m, "workers", &s->workers);
	for (i = 0; i < HCOMM_NR_CMDS; i++)
		seq_printf(m, "cmd_%s %lld\n", hcomm_cmd_names[i],
			   (long long)atomic64_read(&s->cmd[i]));
	hcomm_show(m, "cmd_errors", &s->cmd_errors);
	hcomm_show(m, "uring_cmds", &s->uring_cmds);
	hcomm_show(m, "ioctls", &s->ioctls);
	hcomm_show(m, "xfer_inline", &s->xfer_inline);
	hcomm_show(m, "xfer_async", &s->xfer_async);
	hcomm_show(m, "xfer_bytes", &s->xfer_bytes);
	hcomm_show(m, "xfer_chunks", &s->xfer_chunks);
	hcomm_show(m, "xfer_cancelled", &s->xfer_cancelled);
	hcomm_show(m, "xfer_failed", &s->xfer_failed);
	hcomm_show(m, "db_signals", &s->db_signals);
	hcomm_show(m, "db_wakeups", &s->db_wakeups);
	hcomm_show(m, "cache_hits", &s->cache_hits);
	hcomm_show(m, "cache_misses", &s->cache_misses);
	hcomm_show(m, "cache_evictions", &s->cache_evictions);
	hcomm_show(m, "cache_invalidations", &s->cache_invalidations);
	hcomm_show(m, "engine_busy_ns", &s->engine_busy_ns);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(hcomm_stats);

/* One line per open context: who, what it holds, its QoS. */
static int hcomm_contexts_show(struct seq_file *m, void *unused)
{
	struct hcomm_ctx *ctx;

	seq_puts(m, "# pid comm regions pinned_bytes cache_bytes xfers_active min_rate max_rate priority share_pct served_bytes slots workers slow\n");
	mutex_lock(&hcomm_ctx_list_lock);
	list_for_each_entry(ctx, &hcomm_ctx_list, node) {
		struct hcomm_ctx_engine_info e;
		struct hcomm_qos q;
		u64 cache_bytes;
		u32 share;

		hcomm_ctx_qos_info(ctx, &q, &share, &e);
		mutex_lock(&ctx->cache_lock);
		cache_bytes = ctx->cache_bytes;
		mutex_unlock(&ctx->cache_lock);
		seq_printf(m, "%d %s %d %lld %llu %d %u %u %u %u %lld %u %u %d\n",
			   ctx->pid, ctx->comm, atomic_read(&ctx->nr_regions),
			   (long long)atomic64_read(&ctx->pinned_pages) << PAGE_SHIFT,
			   cache_bytes, atomic_read(&ctx->xfers), q.min_rate,
			   q.max_rate, q.priority, share,
			   (long long)atomic64_read(&ctx->served), e.slots,
			   e.workers, e.slow);
	}
	mutex_unlock(&hcomm_ctx_list_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(hcomm_contexts);

/**
 * hcomm_debugfs_init() - create /sys/kernel/debug/hcomm/{stats,contexts}.
 *
 * debugfs failures are not fatal: the module works without statistics.
 */
void hcomm_debugfs_init(void)
{
	hcomm_debugfs_dir = debugfs_create_dir("hcomm", NULL);
	debugfs_create_file("stats", 0444, hcomm_debugfs_dir, NULL,
			    &hcomm_stats_fops);
	debugfs_create_file("contexts", 0400, hcomm_debugfs_dir, NULL,
			    &hcomm_contexts_fops);
}

/**
 * hcomm_debugfs_exit() - remove the debugfs directory.
 */
void hcomm_debugfs_exit(void)
{
	debugfs_remove_recursive(hcomm_debugfs_dir);
}
