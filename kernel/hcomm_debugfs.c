// SPDX-License-Identifier: GPL-2.0
/*
 * Statistics under /sys/kernel/debug/hcomm/.
 *
 * Read-only views of struct hcomm_stats; nothing here changes state.
 */
#include <linux/debugfs.h>
#include <linux/seq_file.h>

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
	for (i = 0; i < HCOMM_NR_CMDS; i++)
		seq_printf(m, "cmd_%s %lld\n", hcomm_cmd_names[i],
			   (long long)atomic64_read(&s->cmd[i]));
	hcomm_show(m, "cmd_errors", &s->cmd_errors);
	hcomm_show(m, "uring_cmds", &s->uring_cmds);
	hcomm_show(m, "ioctls", &s->ioctls);
	hcomm_show(m, "xfer_inline", &s->xfer_inline);
	hcomm_show(m, "xfer_async", &s->xfer_async);
	hcomm_show(m, "xfer_dma", &s->xfer_dma);
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

/**
 * hcomm_debugfs_init() - create /sys/kernel/debug/hcomm/stats.
 *
 * debugfs failures are not fatal: the module works without statistics.
 */
void hcomm_debugfs_init(void)
{
	hcomm_debugfs_dir = debugfs_create_dir("hcomm", NULL);
	debugfs_create_file("stats", 0444, hcomm_debugfs_dir, NULL,
			    &hcomm_stats_fops);
}

/**
 * hcomm_debugfs_exit() - remove the debugfs directory.
 */
void hcomm_debugfs_exit(void)
{
	debugfs_remove_recursive(hcomm_debugfs_dir);
}
