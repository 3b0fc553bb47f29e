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
 * @job:       job identifier checked by the rendezvous ("" if none): Open
 *             MPI's OMPI_MCA_ess_base_jobid, Slurm's
 *             SLURM_JOB_ID.SLURM_STEP_ID, PMI's PMI_JOBID/PMI_KVSNAME,
 *             HCOMM_JOB_ID, the rank table's contents, or the parent pid.
 * @root_addr: where the ranks meet: an abstract unix socket name (one
 *             host) or "host:port" / "[v6addr]:port" (TCP, @tcp_root set):
 *             HCOMM_ROOT_ADDR, the rank table's root, Slurm's first node,
 *             or "hcomm-<uid>-<job>".
 * @tcp_root:  @root_addr is a TCP address.
 * @local:     every rank is on this host as far as the launcher or the
 *             rank table can tell (the bootstrap checks it: see
 *             hcomm__boot_same_host()).
 * @host_addr: this rank's host address from the rank table ("" if none):
 *             where its network transports listen.
 * @dev_ip:    the rank table's device address (RDMA: the GID to use), "".
 * @rdma_dev:  the rank table's RDMA device name, "".
 * @gid_index: the rank table's GID index, or -1.
 */
struct hcomm_rankinfo {
	int rank;
	int size;
	enum hcomm_launcher launcher;
	char job[96];
	char root_addr[100];
	int tcp_root;
	int local;
	char host_addr[64];
	char dev_ip[64];
	char rdma_dev[32];
	int gid_index;
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
 * Rank table file: JSON in the shape of HCCL's rank table, or text.
 *
 * Text, one item per line, '#' comments:
 *   world_size N
 *   root ADDR               (optional: the rendezvous, as HCOMM_ROOT_ADDR)
 *   rank R host HOST [addr IP] [dev RDMADEV] [gid N] [dev_ip IP]
 *                           (one line per rank 0 .. N-1)
 * JSON:
 *   { "version": "1.0", "status": "completed", "root_addr": "h:port",
 *     "server_count": "2",
 *     "server_list": [ { "server_id": "node1", "host_ip": "10.0.0.1",
 *       "device": [ { "device_id": "0", "device_ip": "10.0.0.1",
 *                     "rank_id": "0", "rdma_dev": "rxe0",
 *                     "gid_index": "1" } ] } ] }
 * (numbers may be strings or numbers; root_addr, host_ip, rdma_dev and
 * gid_index are optional; world size = number of devices).
 * The rank of this process still comes from the environment
 * (HCOMM_RANK or a launcher's variable); the parse fills the table's
 * entry of rank @rank (or none while @rank is -1).  -HCOMM_ERR_INVAL on
 * any malformed item, a missing or duplicate rank, or a rank >= the world
 * size.  When the table names hosts other than this one and has no root,
 * the root is rank 0's host at the port derived from the job id.
 */
HCOMM_HIDDEN int hcomm__rank_table_parse(const char *path, int rank,
					 struct hcomm_rankinfo *ri);

/* s strictly decimal (no sign, no blanks) in lo .. hi: *out, 0; else -1. */
HCOMM_HIDDEN int hcomm__parse_dec(const char *s, long lo, long hi, int *out);

/* FNV-1a of n bytes (job names, table contents). */
HCOMM_HIDDEN uint64_t hcomm__fnv1a(const void *p, size_t n);
/*
 * The TCP port of a rendezvous nobody named: 20000 + a hash of the job id
 * modulo 20000 (the same at every rank of the job).
 */
HCOMM_HIDDEN unsigned int hcomm__default_port(const char *job);

/*
 * Resolve a TCP address "host:port", "[v6]:port" (passive: host may be
 * "*" for any).  0, or -HCOMM_ERR_INVAL naming what is wrong.
 */
struct sockaddr_storage;
HCOMM_HIDDEN int hcomm__tcp_addr(const char *s, int passive,
				 struct sockaddr_storage *ss,
				 unsigned int *len);
/* 1 when s has the form of a TCP address (host:port, [v6]:port). */
HCOMM_HIDDEN int hcomm__is_tcp_addr(const char *s);

/*
 * Who shares a kernel with whom: the kernel's boot id and a random nonce
 * kept in /dev/shm for the life of the boot (processes that see another
 * /dev/shm, e.g. other containers, count as another host).
 */
struct hcomm_host_id {
	uint8_t boot_id[16];
	uint64_t nonce;
};
HCOMM_HIDDEN int hcomm__host_id(struct hcomm_host_id *id);

struct hcomm_boot;

/*
 * Meet the other ranks: rank 0 listens on ri->root_addr (an abstract unix
 * socket, or TCP when ri->tcp_root), the others connect (retrying until
 * timeout_ms), and each connection is checked (unix: SO_PEERCRED, same
 * uid; always: a hello with the job name, rank and size that must
 * match).  Rank 0 then sends the job nonce, and every rank learns every
 * other's host id.  -HCOMM_ERR_TIMEOUT when not everyone arrived in time,
 * naming the first missing rank (and its host when a table gave it).
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
/* The current limit of each collective (ms), or -1 for none. */
HCOMM_HIDDEN int64_t hcomm__boot_timeout(const struct hcomm_boot *b);
/*
 * recv[r * len .. ] = rank r's send, for every rank (collective).  After
 * any failure (timeout, a rank gone, a mismatch) the channel is out of
 * step for good: every later collective fails at once with
 * -HCOMM_ERR_IO.
 */
HCOMM_HIDDEN int hcomm__boot_allgather(struct hcomm_boot *b, const void *send,
				       void *recv, size_t len);
HCOMM_HIDDEN int hcomm__boot_barrier(struct hcomm_boot *b);
/*
 * The job's nonce: 64 random bits from rank 0, the same at every rank
 * (never 0).  Transports put it into their connection handshakes so
 * that a process of another job (or an earlier run) is refused.
 */
HCOMM_HIDDEN uint64_t hcomm__boot_nonce(const struct hcomm_boot *b);
/* 1 when rank r shares this rank's host (struct hcomm_host_id). */
HCOMM_HIDDEN int hcomm__boot_same_host(const struct hcomm_boot *b, int r);
/* 1 when ranks r1 and r2 share a host. */
HCOMM_HIDDEN int hcomm__boot_same_hosts(const struct hcomm_boot *b, int r1,
					int r2);
/*
 * This rank's IP address on the bootstrap's TCP connection (numeric, no
 * port: the interface that reaches rank 0), or "" over a unix socket.
 * Network transports listen there unless the rank table names one.
 */
HCOMM_HIDDEN const char *hcomm__boot_self_ip(const struct hcomm_boot *b);
/* Close the channel (not collective; peers see EOF). */
HCOMM_HIDDEN void hcomm__boot_fini(struct hcomm_boot *b);

#endif /* LIBHCOMM_BOOT_H */
