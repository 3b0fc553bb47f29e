/* SPDX-License-Identifier: MIT */
/*
 * libhcomm: who this rank is (launcher variables, rank table) and the
 * bootstrap channel (a star around rank 0: an abstract unix socket when
 * every rank is on one host, else TCP).
 *
 * Wire format (SOCK_STREAM, every integer little-endian): each message is
 * a struct boot_hdr, then hdr.len bytes.
 *   peer -> 0   HELLO  struct boot_hello (with the rank's host id)
 *   0 -> peer   GO     status OK once every rank arrived, with the job
 *                      nonce (8 bytes) and every rank's host id (size x
 *                      struct boot_host); else no payload and why rank 0
 *                      gave up (sent at once to a rank whose hello does
 *                      not match, to the others when rank 0 fails)
 *   peer -> 0   COLL   seq, this rank's block (len bytes)
 *   0 -> peer   COLL   seq, every rank's block (size * len bytes)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <endian.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "hcomm_boot.h"

#define MAX_RANKS	1024
#define BOOT_MAGIC	0x48434254u	/* "HCBT" */
#define BOOT_VERSION	2

/* ------------------------------------------------------------------ */
/* Rank detection                                                     */
/* ------------------------------------------------------------------ */

static int env_int(const char *name, long lo, long hi, int *out)
{
	const char *s = getenv(name);

	if (hcomm__parse_dec(s, lo, hi, out))
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "%s=\"%.64s\": not an integer in %ld .. %ld",
				   name, s, lo, hi);
	return 0;
}

/* ri->job = prefix + s, hashed when it does not fit. */
static void set_job(struct hcomm_rankinfo *ri, const char *prefix,
		    const char *s)
{
	int n = snprintf(ri->job, sizeof(ri->job), "%s%s", prefix, s);

	if (n < 0 || (size_t)n >= sizeof(ri->job))
		snprintf(ri->job, sizeof(ri->job), "%sh%016llx", prefix,
			 (unsigned long long)hcomm__fnv1a(s, strlen(s)));
}

/* The launcher's job id, if any: 1 when found. */
static int launcher_job(struct hcomm_rankinfo *ri)
{
	const char *s, *step;
	char buf[200];

	if ((s = getenv("OMPI_MCA_ess_base_jobid")) && *s)
		set_job(ri, "ompi-", s);
	else if ((s = getenv("OMPI_MCA_orte_ess_jobid")) && *s)
		set_job(ri, "ompi-", s);
	else if ((s = getenv("SLURM_JOB_ID")) && *s) {
		step = getenv("SLURM_STEP_ID");
		snprintf(buf, sizeof(buf), "%.90s%s%.90s", s,
			 step && *step ? "." : "", step ? step : "");
		set_job(ri, "slurm-", buf);
	} else if ((s = getenv("PMI_JOBID")) && *s)
		set_job(ri, "pmi-", s);
	else if ((s = getenv("PMI_KVSNAME")) && *s)
		set_job(ri, "pmi-", s);
	else
		return 0;
	return 1;
}

struct launcher {
	enum hcomm_launcher id;
	const char *rank, *size;
};

static const struct launcher launchers[] = {
	{ HCOMM_LAUNCH_ENV,   "HCOMM_RANK",           "HCOMM_WORLD_SIZE" },
	{ HCOMM_LAUNCH_OMPI,  "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
	{ HCOMM_LAUNCH_SLURM, "SLURM_PROCID",         "SLURM_NTASKS" },
	{ HCOMM_LAUNCH_PMI,   "PMI_RANK",             "PMI_SIZE" },
};

/*
 * How many hosts the launcher spread the ranks over, as far as its
 * variables tell (1 when they do not say): Open MPI's local size against
 * the world size, Slurm's node count.  *what names the variable.
 */
static int launcher_hosts(const struct launcher *l, int size,
			  const char **what)
{
	int local, nodes;

	*what = "";
	if (!l)
		return 1;
	if (l->id == HCOMM_LAUNCH_OMPI &&
	    !hcomm__parse_dec(getenv("OMPI_COMM_WORLD_LOCAL_SIZE"), 1, MAX_RANKS,
		       &local) && local < size) {
		*what = "OMPI_COMM_WORLD_LOCAL_SIZE";
		return (size + local - 1) / local;
	}
	if (l->id == HCOMM_LAUNCH_SLURM) {
		if (!hcomm__parse_dec(getenv("SLURM_STEP_NUM_NODES"), 1, 1 << 20,
			       &nodes) && nodes > 1) {
			*what = "SLURM_STEP_NUM_NODES";
			return nodes;
		}
		if (!hcomm__parse_dec(getenv("SLURM_NNODES"), 1, 1 << 20, &nodes) &&
		    nodes > 1) {
			*what = "SLURM_NNODES";
			return nodes;
		}
	}
	return 1;
}

/*
 * The first host of a Slurm node list ("n[01-04,07],m3" -> "n01"), or
 * -1 when it is not of that form.
 */
static int slurm_first_host(const char *list, char *out, size_t cap)
{
	size_t n = strcspn(list, ",[");
	size_t d;

	if (!n || n >= cap)
		return -1;
	memcpy(out, list, n);
	out[n] = 0;
	if (list[n] != '[')
		return 0;
	d = strspn(list + n + 1, "0123456789");
	if (!d || n + d >= cap)
		return -1;
	memcpy(out + n, list + n + 1, d);
	out[n + d] = 0;
	return 0;
}

/*
 * job: HCOMM_JOB_ID; else the launcher's job id (Open MPI, Slurm, PMI);
 * else, with a rank table, its contents; else, unless HCOMM_ROOT_ADDR
 * names the rendezvous, the parent pid (ranks started by one parent).
 * root_addr: HCOMM_ROOT_ADDR, else the table's root (or rank 0's host
 * when the table names several hosts), else, for a Slurm step over
 * several nodes, its first node at the job's port, else
 * "hcomm-<uid>-<job>".  A launch over several hosts with nothing that
 * names a TCP rendezvous fails at once, saying what to set.
 */
int hcomm__rankinfo_detect(const struct hcomm_config *cfg,
			   struct hcomm_rankinfo *ri)
{
	const struct launcher *l = NULL;
	struct hcomm_rankinfo r;
	const char *table, *addr, *job, *what = "";
	int ret, n, hosts;
	unsigned i;

	if (!ri)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm__rankinfo_detect");
	memset(&r, 0, sizeof(r));
	r.gid_index = -1;
	table = cfg ? cfg->rank_table : getenv("HCOMM_RANK_TABLE");
	if (table && !*table)
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "HCOMM_RANK_TABLE=\"\": empty path");
	for (i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++)
		if (getenv(launchers[i].rank) || getenv(launchers[i].size)) {
			l = &launchers[i];
			break;
		}

	if (table) {
		ret = hcomm__rank_table_parse(table, -1, &r);
		if (ret)
			return ret;
		if (!l || !getenv(l->rank))
			return hcomm__fail(HCOMM_ERR_INVAL, 0,
					   "rank table %.128s: the rank of this "
					   "process is not set (HCOMM_RANK or a "
					   "launcher's variable)", table);
		ret = env_int(l->rank, 0, r.size - 1, &r.rank);
		if (ret)
			return ret;
		if (getenv(l->size)) {
			ret = env_int(l->size, 1, MAX_RANKS, &n);
			if (ret)
				return ret;
			if (n != r.size)
				return hcomm__fail(HCOMM_ERR_INVAL, 0,
						   "%s=%d but rank table %.128s "
						   "has world size %d", l->size,
						   n, table, r.size);
		}
		ret = hcomm__rank_table_parse(table, r.rank, &r);
		if (ret)
			return ret;
	} else if (l) {
		if (!getenv(l->rank) || !getenv(l->size))
			return hcomm__fail(HCOMM_ERR_INVAL, 0,
					   "%s is set but %s is not",
					   getenv(l->rank) ? l->rank : l->size,
					   getenv(l->rank) ? l->size : l->rank);
		ret = env_int(l->size, 1, MAX_RANKS, &r.size);
		if (ret)
			return ret;
		ret = env_int(l->rank, 0, INT_MAX, &r.rank);
		if (ret)
			return ret;
		if (r.rank >= r.size)
			return hcomm__fail(HCOMM_ERR_INVAL, 0,
					   "%s=%d is not below %s=%d", l->rank,
					   r.rank, l->size, r.size);
		r.launcher = l->id;
		r.local = 1;
	} else {
		r.rank = 0;
		r.size = 1;
		r.launcher = HCOMM_LAUNCH_SINGLE;
		r.local = 1;
	}
	hosts = table ? 1 : launcher_hosts(l, r.size, &what);
	if (hosts > 1)
		r.local = 0;

	addr = getenv("HCOMM_ROOT_ADDR");
	if (addr && (!*addr || strlen(addr) >= sizeof(r.root_addr)))
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "HCOMM_ROOT_ADDR=\"%.64s\": empty or longer "
				   "than %zu bytes", addr,
				   sizeof(r.root_addr) - 1);
	job = getenv("HCOMM_JOB_ID");
	if (job) {
		if (!*job || strlen(job) >= sizeof(r.job) - 4)
			return hcomm__fail(HCOMM_ERR_INVAL, 0,
					   "HCOMM_JOB_ID=\"%.64s\": empty or "
					   "longer than %zu bytes", job,
					   sizeof(r.job) - 5);
		snprintf(r.job, sizeof(r.job), "job-%s", job);
	} else if (!launcher_job(&r) && !table) {
		if (addr)
			r.job[0] = 0;
		else
			snprintf(r.job, sizeof(r.job), "ppid-%d",
				 (int)getppid());
	}
	if (addr) {
		strcpy(r.root_addr, addr);
		r.tcp_root = hcomm__is_tcp_addr(addr);
	} else if (!r.root_addr[0] && hosts > 1) {
		const char *list = getenv("SLURM_STEP_NODELIST");
		char first[80];

		if (!list)
			list = getenv("SLURM_JOB_NODELIST");
		if (l->id != HCOMM_LAUNCH_SLURM || !list ||
		    slurm_first_host(list, first, sizeof(first)))
			return hcomm__fail(HCOMM_ERR_INVAL, 0,
					   "the ranks span %d hosts (%s) and "
					   "nothing names a rendezvous they "
					   "all reach: set HCOMM_ROOT_ADDR="
					   "<rank 0's host>:<port> for every "
					   "rank (e.g. mpirun -x "
					   "HCOMM_ROOT_ADDR=node1:29500), or "
					   "use a rank table", hosts, what);
		snprintf(r.root_addr, sizeof(r.root_addr), "%s:%u", first,
			 hcomm__default_port(r.job));
		r.tcp_root = 1;
	} else if (!r.root_addr[0]) {
		n = snprintf(r.root_addr, sizeof(r.root_addr), "hcomm-%u-%s",
			     (unsigned)geteuid(), r.job);
		if (n < 0 || (size_t)n >= sizeof(r.root_addr))
			snprintf(r.root_addr, sizeof(r.root_addr),
				 "hcomm-%u-h%016llx", (unsigned)geteuid(),
				 (unsigned long long)hcomm__fnv1a(r.job,
								 strlen(r.job)));
	}
	if (r.tcp_root && !strncmp(r.root_addr, "tcp:", 4))
		memmove(r.root_addr, r.root_addr + 4,
			strlen(r.root_addr + 4) + 1);
	*ri = r;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Bootstrap channel                                                  */
/* ------------------------------------------------------------------ */

struct boot_hdr {
	uint32_t magic;
	uint16_t type;
	uint16_t status;
	uint32_t seq;
	uint32_t arg;
	uint64_t len;
};

struct boot_host {
	uint8_t boot_id[16];
	uint64_t nonce;
};

struct boot_hello {
	uint32_t version;
	int32_t rank;
	int32_t size;
	uint32_t uid;		/* informational over TCP */
	char job[96];
	struct boot_host host;
};

_Static_assert(sizeof(struct boot_hdr) == 24, "boot_hdr");
_Static_assert(sizeof(struct boot_hello) == 136, "boot_hello");
_Static_assert(sizeof(struct boot_host) == sizeof(struct hcomm_host_id),
	       "boot_host");
_Static_assert(sizeof(((struct boot_hello *)0)->job) ==
	       sizeof(((struct hcomm_rankinfo *)0)->job), "job");

enum { MSG_HELLO = 1, MSG_GO, MSG_COLL };

/* GO status: why rank 0 refused a hello or gave up. */
enum {
	ST_OK = 0,
	ST_VERSION,	/* hello of another protocol version */
	ST_SIZE,	/* another world size */
	ST_JOB,		/* another job */
	ST_RANK,	/* rank out of range */
	ST_DUP,		/* rank already joined */
	ST_TIMEOUT,	/* not every rank arrived in time */
	ST_ABORT,	/* rank 0 failed otherwise */
};

struct hcomm_boot {
	int rank, size;
	int64_t timeout_ms;	/* the current phase's: init, then collectives;
				 * < 0: no limit */
	uint32_t seq;		/* collectives so far */
	int broken;		/* an error left the channel out of step */
	int fd;			/* rank > 0: the connection to rank 0 */
	int *peer;		/* rank 0: peer[r] for r >= 1, else -1 */
	int tcp;		/* the rendezvous is TCP, not a unix socket */
	uint64_t nonce;		/* the job's, from rank 0 */
	struct boot_host *hosts;	/* [size], from rank 0's GO */
	char job[96];
	char name[100];		/* unix: the abstract name; tcp: host:port */
	char addr[104];		/* for messages: "@name" or "host:port" */
	char self_ip[INET6_ADDRSTRLEN];
};

/* Little-endian on the wire (a no-op on x86, the only host so far). */
static void hdr_le(struct boot_hdr *h)
{
	h->magic = htole32(h->magic);
	h->type = htole16(h->type);
	h->status = htole16(h->status);
	h->seq = htole32(h->seq);
	h->arg = htole32(h->arg);
	h->len = htole64(h->len);
}

static void hdr_host(struct boot_hdr *h)
{
	h->magic = le32toh(h->magic);
	h->type = le16toh(h->type);
	h->status = le16toh(h->status);
	h->seq = le32toh(h->seq);
	h->arg = le32toh(h->arg);
	h->len = le64toh(h->len);
}

static void hello_swap(struct boot_hello *m)
{
	m->version = le32toh(m->version);
	m->rank = (int32_t)le32toh((uint32_t)m->rank);
	m->size = (int32_t)le32toh((uint32_t)m->size);
	m->uid = le32toh(m->uid);
	m->host.nonce = le64toh(m->host.nonce);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 0 when fd is ready for ev (or has an error to report), else -errno. */
static int wait_fd(int fd, short ev, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = ev };

	for (;;) {
		int64_t left = deadline - now_ms();
		int n;

		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/* All of buf, or -errno (-ETIMEDOUT, -EPIPE when the peer is gone). */
static int xsend(int fd, const void *buf, size_t len, int64_t deadline)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n >= 0) {
			p += n;
			len -= n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return errno == ECONNRESET ? -EPIPE : -errno;
		n = wait_fd(fd, POLLOUT, deadline);
		if (n)
			return n;
	}
	return 0;
}

/* All of buf, or -errno (-ETIMEDOUT, -EPIPE at EOF). */
static int xrecv(int fd, void *buf, size_t len, int64_t deadline)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);

		if (n > 0) {
			p += n;
			len -= n;
			continue;
		}
		if (!n)
			return -EPIPE;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return errno == ECONNRESET ? -EPIPE : -errno;
		n = wait_fd(fd, POLLIN, deadline);
		if (n)
			return n;
	}
	return 0;
}

static int send_msg(int fd, unsigned type, unsigned status, uint32_t seq,
		    uint32_t arg, const void *data, size_t len,
		    int64_t deadline)
{
	struct boot_hdr h = {
		.magic = BOOT_MAGIC, .type = type, .status = status,
		.seq = seq, .arg = arg, .len = len,
	};
	int ret;

	hdr_le(&h);
	ret = xsend(fd, &h, sizeof(h), deadline);

	if (!ret && len)
		ret = xsend(fd, data, len, deadline);
	return ret;
}

/* An I/O error with rank peer, as an hcomm error. */
static int io_fail(const struct hcomm_boot *b, int err, const char *what,
		   int peer)
{
	err = -err;
	if (err == ETIMEDOUT)
		return hcomm__fail(HCOMM_ERR_TIMEOUT, 0,
				   "bootstrap %s at %s: rank %d did not answer "
				   "within %lld ms", what, b->addr, peer,
				   (long long)b->timeout_ms);
	if (err == EPIPE)
		return hcomm__fail(HCOMM_ERR_IO, 0,
				   "bootstrap %s at %s: rank %d closed the "
				   "connection", what, b->addr, peer);
	return hcomm__fail(hcomm__err_code(0, err), err,
			   "bootstrap %s at %s: rank %d", what, b->addr,
			   peer);
}

static void boot_free(struct hcomm_boot *b)
{
	int r;

	if (b->fd >= 0)
		close(b->fd);
	if (b->peer)
		for (r = 1; r < b->size; r++)
			if (b->peer[r] >= 0)
				close(b->peer[r]);
	free(b->peer);
	free(b->hosts);
	free(b);
}

/* The rendezvous as a socket address: 0 or a negated hcomm_err. */
static int boot_addr(const struct hcomm_boot *b, struct sockaddr_storage *ss,
		     socklen_t *len, int passive)
{
	struct sockaddr_un *sa = (struct sockaddr_un *)ss;
	size_t n = strlen(b->name);
	unsigned int l;
	int ret;

	memset(ss, 0, sizeof(*ss));
	if (b->tcp) {
		ret = hcomm__tcp_addr(b->name, passive, ss, &l);
		*len = l;
		return ret;
	}
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path + 1, b->name, n);	/* sun_path[0] = 0: abstract */
	*len = offsetof(struct sockaddr_un, sun_path) + 1 + n;
	return 0;
}

/* TCP: no Nagle on the channel's small messages. */
static void sock_setup(const struct hcomm_boot *b, int fd)
{
	int one = 1;

	if (b->tcp)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				 sizeof(one));
}

/* Remember this end's IP address of a TCP connection (numeric). */
static void note_self_ip(struct hcomm_boot *b, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	const void *a;

	if (!b->tcp || b->self_ip[0] ||
	    getsockname(fd, (struct sockaddr *)&ss, &len))
		return;
	if (ss.ss_family == AF_INET)
		a = &((struct sockaddr_in *)&ss)->sin_addr;
	else if (ss.ss_family == AF_INET6)
		a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
	else
		return;
	if (!inet_ntop(ss.ss_family, a, b->self_ip, sizeof(b->self_ip)))
		b->self_ip[0] = 0;
}

/*
 * Rank 0: a header without payload, best effort (a peer that cannot take
 * it sees EOF instead).  Queued data is read before the EOF or the
 * ECONNRESET of a close, so the reason arrives.
 */
static void tell(int fd, unsigned type, unsigned status, uint32_t seq,
		 uint32_t arg)
{
	struct boot_hdr h = {
		.magic = BOOT_MAGIC, .type = type, .status = status,
		.seq = seq, .arg = arg,
	};

	hdr_le(&h);
	if (send(fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* nothing more to say */
	}
}

static int same_user(int fd, uid_t *uid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	*uid = (uid_t)-1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) ||
	    len != sizeof(cr))
		return 0;
	*uid = cr.uid;
	return cr.uid == geteuid();
}

/* A connection rank 0 accepted whose hello has not fully arrived. */
struct pending {
	int fd;
	size_t got;
	union {
		unsigned char buf[sizeof(struct boot_hdr) +
				  sizeof(struct boot_hello)];
		struct {
			struct boot_hdr h;
			struct boot_hello hello;
		} msg;
	} u;
};

#define MAX_PENDING	64

static int root_mismatch(struct hcomm_boot *b, unsigned st,
			 const struct boot_hello *hello)
{
	switch (st) {
	case ST_VERSION:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at %s: a rank speaks protocol "
				   "version %u, this one %u", b->addr,
				   hello->version, BOOT_VERSION);
	case ST_SIZE:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at %s: rank %d has world size "
				   "%d, rank 0 %d", b->addr, hello->rank,
				   hello->size, b->size);
	case ST_JOB:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at %s: rank %d is of job "
				   "\"%s\", rank 0 of \"%s\"", b->addr,
				   hello->rank, hello->job, b->job);
	case ST_RANK:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at %s: a peer says it is rank "
				   "%d of %d", b->addr, hello->rank, b->size);
	default:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at %s: rank %d arrived twice",
				   b->addr, hello->rank);
	}
}

/* Check a complete hello: ST_OK, or why it is refused. */
static unsigned check_hello(const struct hcomm_boot *b,
			    struct boot_hello *hello)
{
	hello_swap(hello);
	hello->job[sizeof(hello->job) - 1] = 0;
	if (hello->version != BOOT_VERSION)
		return ST_VERSION;
	if (hello->size != b->size)
		return ST_SIZE;
	if (strcmp(hello->job, b->job))
		return ST_JOB;
	if (hello->rank < 1 || hello->rank >= b->size)
		return ST_RANK;
	if (b->peer[hello->rank] >= 0)
		return ST_DUP;
	return ST_OK;
}

/* Rank 0: GO with the job nonce and every rank's host id, to everyone. */
static int root_go(struct hcomm_boot *b, int64_t deadline)
{
	size_t len = sizeof(uint64_t) + b->size * sizeof(struct boot_host);
	unsigned char *go = malloc(len);
	struct boot_host *h;
	uint64_t v;
	int ret = 0, r;

	if (!go)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "bootstrap");
	v = htole64(b->nonce);
	memcpy(go, &v, sizeof(v));
	h = (struct boot_host *)(go + sizeof(v));
	for (r = 0; r < b->size; r++) {
		memcpy(h[r].boot_id, b->hosts[r].boot_id, sizeof(h->boot_id));
		h[r].nonce = htole64(b->hosts[r].nonce);
	}
	for (r = 1; r < b->size && !ret; r++) {
		ret = send_msg(b->peer[r], MSG_GO, ST_OK, 0, b->size, go, len,
			       deadline);
		if (ret)
			ret = io_fail(b, ret, "init", r);
	}
	free(go);
	return ret;
}

/*
 * Rank 0: listen, and take hellos from every connection as they come
 * (poll), so that a connection that never speaks holds up nobody.
 * Connections of other users, ones that close or send something else
 * than a hello are dropped, a hello of another job is refused (it is told
 * why); any other hello that does not match (version, world size, rank
 * out of range or twice) fails the bootstrap, and everyone is told.
 */
static int root_init(struct hcomm_boot *b, int64_t deadline)
{
	struct pollfd pfd[1 + MAX_PENDING];
	struct pending pend[MAX_PENDING];
	int lfd, joined = 0, others = 0, npend = 0, ret = 0, r, i;
	unsigned st = ST_ABORT;		/* what the others are told on failure */
	struct sockaddr_storage sa;
	socklen_t salen;
	char missing[96];
	int one = 1;

	ret = boot_addr(b, &sa, &salen, 1);
	if (ret)
		return ret;
	b->peer = malloc(b->size * sizeof(*b->peer));
	if (!b->peer)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "bootstrap");
	for (r = 0; r < b->size; r++)
		b->peer[r] = -1;
	lfd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		     0);
	if (lfd < 0)
		return hcomm__fail(hcomm__err_code(0, errno), errno,
				   "bootstrap: socket");
	/* a port in TIME_WAIT from the previous job may be reused */
	if (b->tcp)
		(void)setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one,
				 sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, salen)) {
		ret = errno;
		close(lfd);
		if (ret == EADDRINUSE)
			return hcomm__fail(HCOMM_ERR_BUSY, 0,
					   "bootstrap: rendezvous address %s "
					   "is taken (a rank 0 of this or "
					   "another job listens there; set "
					   "HCOMM_ROOT_ADDR to tell jobs apart)",
					   b->addr);
		return hcomm__fail(hcomm__err_code(0, ret), ret,
				   "bootstrap: bind %s", b->addr);
	}
	if (listen(lfd, SOMAXCONN)) {
		ret = errno;
		close(lfd);
		return hcomm__fail(hcomm__err_code(0, ret), ret,
				   "bootstrap: listen %s", b->addr);
	}

	while (joined < b->size - 1) {
		int64_t left = deadline - now_ms();
		int n, listening = npend < MAX_PENDING;

		if (left <= 0) {
			for (r = 1; r < b->size && b->peer[r] >= 0; r++)
				;
			n = snprintf(missing, sizeof(missing),
				     "first missing: rank %d", r);
			if (others)
				snprintf(missing + n, sizeof(missing) - n,
					 "; %d other connections dropped",
					 others);
			ret = hcomm__fail(HCOMM_ERR_TIMEOUT, 0,
					  "bootstrap at %s: %d of %d ranks "
					  "arrived within %lld ms (%s)", b->addr,
					  joined + 1, b->size,
					  (long long)b->timeout_ms,
					  missing);
			st = ST_TIMEOUT;
			goto out;
		}
		n = 0;
		if (listening)
			pfd[n++] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (i = 0; i < npend; i++)
			pfd[n++] = (struct pollfd){ .fd = pend[i].fd,
						    .events = POLLIN };
		n = poll(pfd, n, left > INT_MAX ? INT_MAX : (int)left);
		if (n < 0 && errno != EINTR) {
			ret = errno;
			ret = hcomm__fail(hcomm__err_code(0, ret), ret,
					  "bootstrap: poll %s", b->addr);
			goto out;
		}
		if (n <= 0)
			continue;

		/* Hellos first (pfd[] follows pend[] until it changes). */
		for (i = npend - 1; i >= 0; i--) {
			struct pending *p = &pend[i];
			unsigned why;
			ssize_t got;

			if (!pfd[listening + i].revents)
				continue;
			got = recv(p->fd, p->u.buf + p->got,
				   sizeof(p->u.buf) - p->got, MSG_DONTWAIT);
			if (got < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (got > 0) {
				p->got += got;
				if (p->got < sizeof(struct boot_hdr) ||
				    (le32toh(p->u.msg.h.magic) == BOOT_MAGIC &&
				     le16toh(p->u.msg.h.type) == MSG_HELLO &&
				     le64toh(p->u.msg.h.len) ==
				     sizeof(struct boot_hello) &&
				     p->got < sizeof(p->u.buf)))
					continue;
			}
			if (got <= 0 ||
			    le32toh(p->u.msg.h.magic) != BOOT_MAGIC ||
			    le16toh(p->u.msg.h.type) != MSG_HELLO ||
			    le64toh(p->u.msg.h.len) !=
			    sizeof(struct boot_hello)) {
				/* closed, or not one of ours: drop it */
				close(p->fd);
				others++;
			} else if ((why = check_hello(b, &p->u.msg.hello)) ==
				   ST_JOB) {
				/* another job's rank on our name: not ours */
				tell(p->fd, MSG_GO, why, 0, b->size);
				close(p->fd);
				others++;
			} else if (why) {
				tell(p->fd, MSG_GO, why, 0, b->size);
				close(p->fd);
				ret = root_mismatch(b, why, &p->u.msg.hello);
				*p = pend[--npend];
				goto out;
			} else {
				b->peer[p->u.msg.hello.rank] = p->fd;
				b->hosts[p->u.msg.hello.rank] =
					p->u.msg.hello.host;
				note_self_ip(b, p->fd);
				joined++;
			}
			*p = pend[--npend];
		}

		if (!listening || !pfd[0].revents)
			continue;
		while (npend < MAX_PENDING) {
			uid_t uid;
			int fd = accept4(lfd, NULL, NULL,
					 SOCK_CLOEXEC | SOCK_NONBLOCK);

			if (fd < 0) {
				if (errno == EAGAIN || errno == EINTR ||
				    errno == ECONNABORTED)
					break;
				ret = errno;
				ret = hcomm__fail(hcomm__err_code(0, ret), ret,
						  "bootstrap: accept %s",
						  b->addr);
				goto out;
			}
			/* Another user's process: not one of ours. */
			if (!b->tcp && !same_user(fd, &uid)) {
				close(fd);
				others++;
				continue;
			}
			sock_setup(b, fd);
			pend[npend].fd = fd;
			pend[npend].got = 0;
			npend++;
		}
	}

	close(lfd);	/* frees the name for the next job */
	return root_go(b, deadline);
out:
	/*
	 * Tell everyone why: the ranks that joined, those whose hello is
	 * still on its way, and those waiting in the backlog (the error
	 * stays what it was: fail() is done).
	 */
	for (r = 1; r < b->size; r++)
		if (b->peer[r] >= 0)
			tell(b->peer[r], MSG_GO, st, 0, joined + 1);
	for (i = 0; i < npend; i++) {
		tell(pend[i].fd, MSG_GO, st, 0, joined + 1);
		close(pend[i].fd);
	}
	for (i = 0; i < b->size; i++) {
		uid_t uid;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0)
			break;
		if (same_user(fd, &uid))
			tell(fd, MSG_GO, st, 0, joined + 1);
		close(fd);
	}
	close(lfd);
	return ret;
}

/*
 * One connection attempt: 0 (b->fd connected), 1 when it is worth
 * retrying (nobody listens yet, the network is not up yet), or a negated
 * hcomm_err.
 */
static int try_connect(struct hcomm_boot *b, const struct sockaddr_storage *sa,
		       socklen_t salen, int64_t deadline)
{
	int err = 0;
	socklen_t el = sizeof(err);

	b->fd = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC |
		       SOCK_NONBLOCK, 0);
	if (b->fd < 0)
		return hcomm__fail(hcomm__err_code(0, errno), errno,
				   "bootstrap: socket");
	if (connect(b->fd, (const struct sockaddr *)sa, salen))
		err = errno;
	if (err == EINPROGRESS) {
		/* TCP: at most 1 s per attempt, then try again */
		int64_t d = now_ms() + 1000;

		err = -wait_fd(b->fd, POLLOUT, d < deadline ? d : deadline);
		if (!err && (getsockopt(b->fd, SOL_SOCKET, SO_ERROR, &err,
					&el) || el != sizeof(err)))
			err = errno;
	}
	if (!err) {
		sock_setup(b, b->fd);
		note_self_ip(b, b->fd);
		return 0;
	}
	close(b->fd);
	b->fd = -1;
	/* Not up yet, its backlog is full, or the network not yet up. */
	if (err == ECONNREFUSED || err == EAGAIN || err == EINTR ||
	    err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH ||
	    err == ECONNRESET)
		return 1;
	return hcomm__fail(hcomm__err_code(0, err), err,
			   "bootstrap: connect %s", b->addr);
}

/* The GO's payload: the job nonce and every rank's host id. */
static int peer_go(struct hcomm_boot *b, const struct boot_hdr *h,
		   int64_t deadline)
{
	size_t len = sizeof(uint64_t) + b->size * sizeof(struct boot_host);
	uint64_t v;
	int ret, r;

	if (h->len != len)
		return hcomm__fail(HCOMM_ERR_INVAL, 0, "bootstrap: %s sent a "
				   "GO of %llu bytes, expected %zu", b->addr,
				   (unsigned long long)h->len, len);
	ret = xrecv(b->fd, &v, sizeof(v), deadline);
	if (!ret)
		ret = xrecv(b->fd, b->hosts, len - sizeof(v), deadline);
	if (ret)
		return io_fail(b, ret, "init", 0);
	b->nonce = le64toh(v);
	for (r = 0; r < b->size; r++)
		b->hosts[r].nonce = le64toh(b->hosts[r].nonce);
	if (!b->nonce)
		return hcomm__fail(HCOMM_ERR_INVAL, 0, "bootstrap: %s sent a "
				   "zero job nonce", b->addr);
	return 0;
}

static int peer_init(struct hcomm_boot *b, int64_t deadline)
{
	struct boot_hello hello = {
		.version = htole32(BOOT_VERSION),
		.rank = (int32_t)htole32((uint32_t)b->rank),
		.size = (int32_t)htole32((uint32_t)b->size),
		.uid = htole32((uint32_t)geteuid()),
	};
	struct sockaddr_storage sa;
	socklen_t salen;
	int64_t pause_ms = 1, left;
	struct boot_hdr h;
	uid_t uid;
	int ret;

	ret = boot_addr(b, &sa, &salen, 0);
	if (ret)
		return ret;
	for (;;) {
		struct timespec ts;

		ret = try_connect(b, &sa, salen, deadline);
		if (ret < 0)
			return ret;
		if (!ret)
			break;
		left = deadline - now_ms();
		if (left <= 0)
			return hcomm__fail(HCOMM_ERR_TIMEOUT, 0,
					   "bootstrap: rank 0 did not come up "
					   "at %s within %lld ms", b->addr,
					   (long long)b->timeout_ms);
		if (pause_ms > left)
			pause_ms = left;
		ts.tv_sec = pause_ms / 1000;
		ts.tv_nsec = (pause_ms % 1000) * 1000000;
		nanosleep(&ts, NULL);
		if (pause_ms < 50)
			pause_ms *= 2;
	}
	if (!b->tcp && !same_user(b->fd, &uid))
		return hcomm__fail(HCOMM_ERR_ACCESS, 0,
				   "bootstrap: rendezvous address %s is held "
				   "by uid %u, not this user", b->addr,
				   (unsigned)uid);
	hello.host = b->hosts[b->rank];
	hello.host.nonce = htole64(hello.host.nonce);
	memcpy(hello.job, b->job, sizeof(hello.job));
	ret = send_msg(b->fd, MSG_HELLO, 0, 0, 0, &hello, sizeof(hello),
		       deadline);
	if (!ret)
		ret = xrecv(b->fd, &h, sizeof(h), deadline);
	hdr_host(&h);
	if (ret == -ETIMEDOUT)
		return hcomm__fail(HCOMM_ERR_TIMEOUT, 0,
				   "bootstrap at %s: not every rank arrived "
				   "within %lld ms", b->addr,
				   (long long)b->timeout_ms);
	if (ret)
		return io_fail(b, ret, "init", 0);
	if (h.magic != BOOT_MAGIC || h.type != MSG_GO ||
	    (h.len && h.status != ST_OK))
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap: %s is not a rank 0 of hcomm "
				   "protocol %u", b->addr, BOOT_VERSION);
	switch (h.status) {
	case ST_OK:
		return peer_go(b, &h, deadline);
	case ST_SIZE:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at %s: rank 0 has world size "
				   "%u, this rank %d", b->addr, h.arg,
				   b->size);
	case ST_JOB:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at %s: rank 0 is of another job "
				   "(this one: \"%s\")", b->addr, b->job);
	case ST_DUP:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at %s: rank %d arrived twice",
				   b->addr, b->rank);
	case ST_VERSION:
	case ST_RANK:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at %s: rank 0 refused rank %d "
				   "of %d (status %u)", b->addr, b->rank,
				   b->size, h.status);
	case ST_TIMEOUT:
		return hcomm__fail(HCOMM_ERR_TIMEOUT, 0,
				   "bootstrap at %s: rank 0 gave up, %u of %d "
				   "ranks arrived within its timeout", b->addr,
				   h.arg, b->size);
	default:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at %s: rank 0 gave up (a rank "
				   "that did not match, or an error of its "
				   "own: see rank 0's message)", b->addr);
	}
}

int hcomm__boot_init(const struct hcomm_rankinfo *ri, uint32_t timeout_ms,
		     struct hcomm_boot **out)
{
	struct hcomm_host_id me;
	struct hcomm_boot *b;
	int64_t deadline;
	size_t n;
	int ret;

	if (out)
		*out = NULL;
	if (!ri || !out)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "hcomm__boot_init");
	if (ri->size < 1 || ri->size > MAX_RANKS || ri->rank < 0 ||
	    ri->rank >= ri->size)
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap: rank %d of %d (at most %d ranks)",
				   ri->rank, ri->size, MAX_RANKS);
	n = strnlen(ri->root_addr, sizeof(ri->root_addr));
	if (ri->size > 1 && (!n || n >= sizeof(ri->root_addr)))
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap: no rendezvous address");
	if (strnlen(ri->job, sizeof(ri->job)) >= sizeof(ri->job))
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap: job name not terminated");
	ret = hcomm__host_id(&me);
	if (ret)
		return ret;
	b = calloc(1, sizeof(*b));
	if (!b)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "bootstrap");
	b->hosts = calloc(ri->size, sizeof(*b->hosts));
	if (!b->hosts) {
		free(b);
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "bootstrap");
	}
	b->rank = ri->rank;
	b->size = ri->size;
	b->timeout_ms = timeout_ms;
	b->fd = -1;
	b->tcp = ri->tcp_root;
	memcpy(b->job, ri->job, sizeof(b->job));
	memcpy(b->name, ri->root_addr, n);
	b->name[n] = 0;
	if (!b->tcp && !strncmp(b->name, "unix:", 5))
		memmove(b->name, b->name + 5, n - 4);
	snprintf(b->addr, sizeof(b->addr), "%s%s", b->tcp ? "" : "@",
		 b->name);
	memcpy(b->hosts[b->rank].boot_id, me.boot_id, sizeof(me.boot_id));
	b->hosts[b->rank].nonce = me.nonce;
	if (!b->rank)
		while (getrandom(&b->nonce, sizeof(b->nonce), 0) !=
		       sizeof(b->nonce) || !b->nonce)
			;

	deadline = now_ms() + timeout_ms;
	ret = 0;
	if (b->size > 1)
		ret = b->rank ? peer_init(b, deadline) : root_init(b, deadline);
	if (ret) {
		boot_free(b);
		return ret;
	}
	*out = b;
	return 0;
}

uint64_t hcomm__boot_nonce(const struct hcomm_boot *b)
{
	return b->nonce;
}

int hcomm__boot_same_hosts(const struct hcomm_boot *b, int r1, int r2)
{
	if (r1 < 0 || r1 >= b->size || r2 < 0 || r2 >= b->size)
		return 0;
	return !memcmp(&b->hosts[r1], &b->hosts[r2], sizeof(b->hosts[r1]));
}

int hcomm__boot_same_host(const struct hcomm_boot *b, int r)
{
	return hcomm__boot_same_hosts(b, r, b->rank);
}

const char *hcomm__boot_self_ip(const struct hcomm_boot *b)
{
	return b->self_ip;
}

int64_t hcomm__boot_timeout(const struct hcomm_boot *b)
{
	return b->timeout_ms;
}

int hcomm__boot_set_timeout(struct hcomm_boot *b, int64_t timeout_ms)
{
	if (!b || timeout_ms == 0 || timeout_ms > HCOMM_COLL_TIMEOUT_MAX)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL, "collective timeout "
				   "%lld ms: use 1 .. %d, or < 0 for none",
				   (long long)timeout_ms, HCOMM_COLL_TIMEOUT_MAX);
	b->timeout_ms = timeout_ms < 0 ? -1 : timeout_ms;
	return 0;
}

/* Rank 0, a collective failed at rank bad: tell ranks from .. on why. */
static void root_coll_abort(struct hcomm_boot *b, int from, int bad,
			    uint32_t seq, int err)
{
	unsigned st = err == -ETIMEDOUT ? ST_TIMEOUT :
		      err == -EPROTO ? ST_SIZE : ST_ABORT;
	int r;

	b->broken = 1;
	for (r = from; r < b->size; r++)
		if (r != bad)
			tell(b->peer[r], MSG_COLL, st, seq, bad);
}

static int coll_fail(struct hcomm_boot *b, int err, int peer)
{
	b->broken = 1;
	return io_fail(b, err, "allgather", peer);
}

static int peer_allgather(struct hcomm_boot *b, const void *send, void *recv,
			  size_t len, uint32_t seq, int64_t deadline)
{
	size_t total = len * b->size;
	struct boot_hdr h;
	int ret;

	ret = send_msg(b->fd, MSG_COLL, 0, seq, 0, send, len, deadline);
	if (!ret)
		ret = xrecv(b->fd, &h, sizeof(h), deadline);
	if (ret)
		return coll_fail(b, ret, 0);
	hdr_host(&h);
	if (h.magic == BOOT_MAGIC && h.type == MSG_COLL && h.seq == seq &&
	    h.status) {
		b->broken = 1;
		if (h.status == ST_TIMEOUT)
			return hcomm__fail(HCOMM_ERR_TIMEOUT, 0,
					   "bootstrap allgather at %s: rank "
					   "0 gave up, rank %u did not answer "
					   "within %lld ms", b->addr, h.arg,
					   (long long)b->timeout_ms);
		if (h.status == ST_SIZE)
			return hcomm__fail(HCOMM_ERR_INVAL, 0,
					   "bootstrap allgather at %s: rank "
					   "0 gave up, rank %u called another "
					   "collective or size", b->addr,
					   h.arg);
		return hcomm__fail(HCOMM_ERR_IO, 0,
				   "bootstrap allgather at %s: rank 0 gave "
				   "up, rank %u failed", b->addr, h.arg);
	}
	if (h.magic != BOOT_MAGIC || h.type != MSG_COLL || h.seq != seq ||
	    h.len != total) {
		b->broken = 1;
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap allgather at %s: rank 0 sent "
				   "collective %u of %llu bytes, this rank "
				   "expected %u of %zu", b->addr, h.seq,
				   (unsigned long long)h.len, seq, total);
	}
	ret = total ? xrecv(b->fd, recv, total, deadline) : 0;
	if (ret)
		return coll_fail(b, ret, 0);
	return 0;
}

/* Star: gather every block in rank order, then send the whole back. */
static int root_allgather(struct hcomm_boot *b, void *recv, size_t len,
			  uint32_t seq, int64_t deadline)
{
	size_t total = len * b->size;
	struct boot_hdr h;
	int ret, r;

	for (r = 1; r < b->size; r++) {
		ret = xrecv(b->peer[r], &h, sizeof(h), deadline);
		if (ret) {
			root_coll_abort(b, 1, r, seq, ret);
			return coll_fail(b, ret, r);
		}
		hdr_host(&h);
		if (h.magic != BOOT_MAGIC || h.type != MSG_COLL ||
		    h.seq != seq || h.len != len) {
			root_coll_abort(b, 1, r, seq, -EPROTO);
			return hcomm__fail(HCOMM_ERR_INVAL, 0,
					   "bootstrap allgather at %s: rank %d "
					   "is at collective %u with %llu "
					   "bytes, rank 0 at %u with %zu",
					   b->addr, r, h.seq,
					   (unsigned long long)h.len, seq, len);
		}
		ret = len ? xrecv(b->peer[r], (char *)recv + (size_t)r * len,
				  len, deadline) : 0;
		if (ret) {
			root_coll_abort(b, 1, r, seq, ret);
			return coll_fail(b, ret, r);
		}
	}
	for (r = 1; r < b->size; r++) {
		ret = send_msg(b->peer[r], MSG_COLL, 0, seq, 0, recv, total,
			       deadline);
		if (ret) {
			/* ranks before r have their result already */
			root_coll_abort(b, r + 1, r, seq, ret);
			return coll_fail(b, ret, r);
		}
	}
	return 0;
}

int hcomm__boot_allgather(struct hcomm_boot *b, const void *send, void *recv,
			  size_t len)
{
	int64_t deadline;
	uint32_t seq;

	if (!b || (len && (!send || !recv)))
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm__boot_allgather");
	if (len > SIZE_MAX / b->size)
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap allgather: %zu bytes times %d "
				   "ranks overflow", len, b->size);
	if (b->broken)
		return hcomm__fail(HCOMM_ERR_IO, 0,
				   "bootstrap at %s: the channel failed "
				   "earlier", b->addr);
	seq = ++b->seq;
	deadline = b->timeout_ms < 0 ? INT64_MAX : now_ms() + b->timeout_ms;
	if (len)
		memmove((char *)recv + (size_t)b->rank * len, send, len);
	if (b->size == 1)
		return 0;
	if (b->rank)
		return peer_allgather(b, send, recv, len, seq, deadline);
	return root_allgather(b, recv, len, seq, deadline);
}

int hcomm__boot_barrier(struct hcomm_boot *b)
{
	return hcomm__boot_allgather(b, NULL, NULL, 0);
}

void hcomm__boot_fini(struct hcomm_boot *b)
{
	if (b)
		boot_free(b);
}
