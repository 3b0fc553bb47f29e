/* SPDX-License-Identifier: MIT */
/*
 * libhcomm internals: who this rank is, and the bootstrap channel the
 * ranks of one host use to meet and exchange small data (hcomm_boot.c).
 */
#ifndef LIBHCOMM_BOOT_H
#define LIBHCOMM_BOOT_H

#include <stddef.h>
#include <stdint.h>
#include "hcomm_int.h"

/**
 * struct hcomm_rankinfo - the result of launcher detection.
 * @rank:      this process's rank, 0 .. size - 1.
 * @size:      number of ranks.
 * @launcher:  where rank and size came from.
 * @job:       job identifier used to derive the rendezvous name ("" if
 *             none): Open MPI's OMPI_MCA_ess_base_jobid, Slurm's
 *             SLURM_JOB_ID.SLURM_STEP_ID, PMI's PMI_JOBID/PMI_KVSNAME,
 *             the rank table's path and mtime, or the parent pid.
 * @root_addr: abstract unix socket name of the rendezvous (without the
 *             leading NUL): HCOMM_ROOT_ADDR, the rank table's "root"
 *             line, or "hcomm-<uid>-<job>".
 * @local:     every rank is on this host (the rank table may say
 *             otherwise; then the kernel transport cannot serve).
 */
struct hcomm_rankinfo {
	int rank;
	int size;
	enum hcomm_launcher launcher;
	char job[96];
	char root_addr[100];
	int local;
};

/*
 * Fill *ri from cfg->rank_table, HCOMM_RANK/HCOMM_WORLD_SIZE/
 * HCOMM_ROOT_ADDR, OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE, SLURM_PROCID/
 * SLURM_NTASKS, PMI_RANK/PMI_SIZE, in that order of precedence; else one
 * rank.  Inconsistent values (rank >= size, size < 1, garbage) give
 * -HCOMM_ERR_INVAL with hcomm_errmsg() naming the variable.
 */
HCOMM_HIDDEN int hcomm__rankinfo_detect(const struct hcomm_config *cfg,
					struct hcomm_rankinfo *ri);

/*
 * Rank table file, text, one item per line, '#' comments:
 *   world_size N
 *   root NAME               (optional: rendezvous socket name)
 *   rank R host HOSTNAME    (one line per rank 0 .. N-1)
 * The rank of this process still comes from the environment
 * (HCOMM_RANK or a launcher's variable).  -HCOMM_ERR_INVAL on any
 * malformed line, a missing or duplicate rank, or a rank >= world_size.
 */
HCOMM_HIDDEN int hcomm__rank_table_parse(const char *path,
					 struct hcomm_rankinfo *ri);

struct hcomm_boot;

/*
 * Meet the other ranks: rank 0 listens on the abstract unix socket
 * ri->root_addr, the others connect (retrying until timeout_ms), and each
 * connection is checked (SO_PEERCRED: same uid; a hello with the job
 * name, rank and size that must match).  -HCOMM_ERR_TIMEOUT when not
 * everyone arrived in time.
 */
HCOMM_HIDDEN int hcomm__boot_init(const struct hcomm_rankinfo *ri,
				  uint32_t timeout_ms, struct hcomm_boot **out);
/* The largest finite collective timeout (one hour, as timeout_ms). */
#define HCOMM_COLL_TIMEOUT_MAX	3600000
/*
 * Limit of each later collective (allgather, barrier): 1 ..
 * HCOMM_COLL_TIMEOUT_MAX ms, or < 0 for none (hcomm__boot_init sets it to
 * its own timeout_ms).  A rank that dies is seen at once (EOF) either
 * way.  0 or above the maximum: -HCOMM_ERR_INVAL, unchanged.
 */
HCOMM_HIDDEN int hcomm__boot_set_timeout(struct hcomm_boot *b,
					 int64_t timeout_ms);
/*
 * recv[r * len .. ] = rank r's send, for every rank (collective).  After
 * any failure (timeout, a rank gone, a mismatch) the channel is out of
 * step for good: every later collective fails at once with
 * -HCOMM_ERR_IO.
 */
HCOMM_HIDDEN int hcomm__boot_allgather(struct hcomm_boot *b, const void *send,
				       void *recv, size_t len);
HCOMM_HIDDEN int hcomm__boot_barrier(struct hcomm_boot *b);
/* Close the channel (not collective; peers see EOF). */
HCOMM_HIDDEN void hcomm__boot_fini(struct hcomm_boot *b);

#endif /* LIBHCOMM_BOOT_H */
