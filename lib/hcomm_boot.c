/* SPDX-License-Identifier: MIT */
/*
 * libhcomm: who this rank is (launcher variables, rank table) and the
 * bootstrap channel of the ranks of one host (abstract unix socket, star
 * around rank 0).
 *
 * Wire format (SOCK_STREAM, host byte order: both ends are on one host):
 * every message is a struct boot_hdr, then hdr.len bytes.
 *   peer -> 0   HELLO  struct boot_hello
 *   0 -> peer   GO     no payload; status OK once every rank arrived, else
 *                      why rank 0 gave up (sent at once to a rank whose
 *                      hello does not match, to the others when rank 0
 *                      fails)
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "hcomm_boot.h"

#define MAX_RANKS	1024
#define BOOT_MAGIC	0x48434254u	/* "HCBT" */
#define BOOT_VERSION	1

/* ------------------------------------------------------------------ */
/* Rank detection                                                     */
/* ------------------------------------------------------------------ */

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	while (*s) {
		h ^= (unsigned char)*s++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* Strictly decimal, lo .. hi; 0 or -1. */
static int parse_int(const char *s, long lo, long hi, int *out)
{
	long v = 0;

	if (!s || !*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (*s - '0');
		if (v > hi)
			return -1;
	}
	if (v < lo)
		return -1;
	*out = (int)v;
	return 0;
}

static int env_int(const char *name, long lo, long hi, int *out)
{
	const char *s = getenv(name);

	if (parse_int(s, lo, hi, out))
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
			 (unsigned long long)fnv1a(s));
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

static int host_is_local(const char *host, const char *me)
{
	return !strcmp(host, me) || !strcmp(host, "localhost");
}

static int table_fail(int code, int err, const char *path, unsigned line,
		      const char *what)
{
	if (line)
		return hcomm__fail(code, err, "rank table %.128s:%u: %s",
				   path, line, what);
	return hcomm__fail(code, err, "rank table %.128s: %s", path, what);
}

/*
 * Fills size, root_addr ("" without a root line), local, job (the table's
 * path and mtime) and launcher; rank is -1: it comes from the environment.
 */
int hcomm__rank_table_parse(const char *path, struct hcomm_rankinfo *ri)
{
	static const char *const sep = " \t\r\n\v\f";
	unsigned char *seen = NULL;
	unsigned line = 0, bad_line = 0;
	int size = 0, bad_rank = -1, local = 1, ret, i;
	char me[HOST_NAME_MAX + 1], msg[160], *buf = NULL, *real;
	char root[sizeof(ri->root_addr)] = "";
	size_t cap = 0;
	struct stat st;
	FILE *f;

	if (!path || !*path || !ri)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm__rank_table_parse");
	if (gethostname(me, sizeof(me)))
		me[0] = 0;
	me[sizeof(me) - 1] = 0;
	f = fopen(path, "re");
	if (!f)
		return table_fail(errno == EACCES || errno == EPERM ?
				  HCOMM_ERR_ACCESS : HCOMM_ERR_INVAL, errno,
				  path, 0, "cannot open");
	seen = calloc(MAX_RANKS, 1);
	if (!seen) {
		fclose(f);
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "rank table");
	}
	while (getline(&buf, &cap, f) >= 0) {
		char *tok[5], *save, *p;
		int n = 0, v;

		line++;
		p = strchr(buf, '#');
		if (p)
			*p = 0;
		for (p = strtok_r(buf, sep, &save); p && n < 5;
		     p = strtok_r(NULL, sep, &save))
			tok[n++] = p;
		if (!n)
			continue;
		if (!strcmp(tok[0], "world_size")) {
			if (n != 2) {
				ret = table_fail(HCOMM_ERR_INVAL, 0, path, line,
						 "expected \"world_size N\"");
				goto out;
			}
			if (size) {
				ret = table_fail(HCOMM_ERR_INVAL, 0, path, line,
						 "second world_size line");
				goto out;
			}
			if (parse_int(tok[1], 1, MAX_RANKS, &size)) {
				snprintf(msg, sizeof(msg),
					 "world_size \"%.32s\": not in 1 .. %d",
					 tok[1], MAX_RANKS);
				ret = table_fail(HCOMM_ERR_INVAL, 0, path, line,
						 msg);
				goto out;
			}
		} else if (!strcmp(tok[0], "root")) {
			if (n != 2) {
				ret = table_fail(HCOMM_ERR_INVAL, 0, path, line,
						 "expected \"root NAME\"");
				goto out;
			}
			if (root[0]) {
				ret = table_fail(HCOMM_ERR_INVAL, 0, path, line,
						 "second root line");
				goto out;
			}
			if (strlen(tok[1]) >= sizeof(root)) {
				snprintf(msg, sizeof(msg),
					 "root name longer than %zu bytes",
					 sizeof(root) - 1);
				ret = table_fail(HCOMM_ERR_INVAL, 0, path, line,
						 msg);
				goto out;
			}
			strcpy(root, tok[1]);
		} else if (!strcmp(tok[0], "rank")) {
			if (n != 4 || strcmp(tok[2], "host")) {
				ret = table_fail(HCOMM_ERR_INVAL, 0, path, line,
						 "expected \"rank R host "
						 "HOSTNAME\"");
				goto out;
			}
			if (parse_int(tok[1], 0, MAX_RANKS - 1, &v)) {
				snprintf(msg, sizeof(msg),
					 "rank \"%.32s\": not in 0 .. %d",
					 tok[1], MAX_RANKS - 1);
				ret = table_fail(HCOMM_ERR_INVAL, 0, path, line,
						 msg);
				goto out;
			}
			if (seen[v]) {
				snprintf(msg, sizeof(msg),
					 "rank %d listed twice", v);
				ret = table_fail(HCOMM_ERR_INVAL, 0, path, line,
						 msg);
				goto out;
			}
			if (strlen(tok[3]) > 255) {
				ret = table_fail(HCOMM_ERR_INVAL, 0, path, line,
						 "host name longer than 255 "
						 "bytes");
				goto out;
			}
			seen[v] = 1;
			if (v > bad_rank) {
				bad_rank = v;
				bad_line = line;
			}
			if (!host_is_local(tok[3], me))
				local = 0;
		} else {
			snprintf(msg, sizeof(msg), "unknown keyword \"%.32s\" "
				 "(world_size, root, rank)", tok[0]);
			ret = table_fail(HCOMM_ERR_INVAL, 0, path, line, msg);
			goto out;
		}
	}
	if (ferror(f)) {
		ret = table_fail(HCOMM_ERR_IO, errno, path, 0, "read");
		goto out;
	}
	if (!size) {
		ret = table_fail(HCOMM_ERR_INVAL, 0, path, 0,
				 "no world_size line");
		goto out;
	}
	if (bad_rank >= size) {
		snprintf(msg, sizeof(msg), "rank %d is not below world_size "
			 "%d", bad_rank, size);
		ret = table_fail(HCOMM_ERR_INVAL, 0, path, bad_line, msg);
		goto out;
	}
	for (i = 0; i < size; i++)
		if (!seen[i]) {
			snprintf(msg, sizeof(msg), "no line for rank %d", i);
			ret = table_fail(HCOMM_ERR_INVAL, 0, path, 0, msg);
			goto out;
		}

	ri->rank = -1;
	ri->size = size;
	ri->launcher = HCOMM_LAUNCH_RANK_TABLE;
	ri->local = local;
	strcpy(ri->root_addr, root);
	real = realpath(path, NULL);
	snprintf(ri->job, sizeof(ri->job), "table-%016llx-%lld",
		 (unsigned long long)fnv1a(real ? real : path),
		 fstat(fileno(f), &st) ? 0LL : (long long)st.st_mtime);
	free(real);
	ret = 0;
out:
	free(buf);
	free(seen);
	fclose(f);
	return ret;
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
 * job: the launcher's job id (Open MPI, Slurm, PMI); else, with a rank
 * table, its path and mtime; else, unless HCOMM_ROOT_ADDR names the
 * rendezvous, the parent pid (ranks started by one parent).
 * root_addr: HCOMM_ROOT_ADDR, else the table's root line, else
 * "hcomm-<uid>-<job>".
 */
int hcomm__rankinfo_detect(const struct hcomm_config *cfg,
			   struct hcomm_rankinfo *ri)
{
	const struct launcher *l = NULL;
	struct hcomm_rankinfo r;
	const char *table, *addr;
	unsigned i;
	int ret, n;

	if (!ri)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm__rankinfo_detect");
	memset(&r, 0, sizeof(r));
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
		ret = hcomm__rank_table_parse(table, &r);
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
						   "has world_size %d", l->size,
						   n, table, r.size);
		}
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

	addr = getenv("HCOMM_ROOT_ADDR");
	if (addr && (!*addr || strlen(addr) >= sizeof(r.root_addr)))
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "HCOMM_ROOT_ADDR=\"%.64s\": empty or longer "
				   "than %zu bytes", addr,
				   sizeof(r.root_addr) - 1);
	if (!launcher_job(&r) && !table) {
		if (addr)
			r.job[0] = 0;
		else
			snprintf(r.job, sizeof(r.job), "ppid-%d",
				 (int)getppid());
	}
	if (addr) {
		strcpy(r.root_addr, addr);
	} else if (!r.root_addr[0]) {
		n = snprintf(r.root_addr, sizeof(r.root_addr), "hcomm-%u-%s",
			     (unsigned)geteuid(), r.job);
		if (n < 0 || (size_t)n >= sizeof(r.root_addr))
			snprintf(r.root_addr, sizeof(r.root_addr),
				 "hcomm-%u-h%016llx", (unsigned)geteuid(),
				 (unsigned long long)fnv1a(r.job));
	}
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

struct boot_hello {
	uint32_t version;
	int32_t rank;
	int32_t size;
	uint32_t reserved;
	char job[96];
};

_Static_assert(sizeof(struct boot_hdr) == 24, "boot_hdr");
_Static_assert(sizeof(struct boot_hello) == 112, "boot_hello");
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
	char job[96];
	char addr[100];
};

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
	int ret = xsend(fd, &h, sizeof(h), deadline);

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
				   "bootstrap %s at @%s: rank %d did not answer "
				   "within %lld ms", what, b->addr, peer,
				   (long long)b->timeout_ms);
	if (err == EPIPE)
		return hcomm__fail(HCOMM_ERR_IO, 0,
				   "bootstrap %s at @%s: rank %d closed the "
				   "connection", what, b->addr, peer);
	return hcomm__fail(hcomm__err_code(0, err), err,
			   "bootstrap %s at @%s: rank %d", what, b->addr,
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
	free(b);
}

static socklen_t boot_addr(const struct hcomm_boot *b, struct sockaddr_un *sa)
{
	size_t n = strlen(b->addr);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path + 1, b->addr, n);	/* sun_path[0] = 0: abstract */
	return offsetof(struct sockaddr_un, sun_path) + 1 + n;
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
				   "bootstrap at @%s: a rank speaks protocol "
				   "version %u, this one %u", b->addr,
				   hello->version, BOOT_VERSION);
	case ST_SIZE:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at @%s: rank %d has world size "
				   "%d, rank 0 %d", b->addr, hello->rank,
				   hello->size, b->size);
	case ST_JOB:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at @%s: rank %d is of job "
				   "\"%s\", rank 0 of \"%s\"", b->addr,
				   hello->rank, hello->job, b->job);
	case ST_RANK:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at @%s: a peer says it is rank "
				   "%d of %d", b->addr, hello->rank, b->size);
	default:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at @%s: rank %d arrived twice",
				   b->addr, hello->rank);
	}
}

/* Check a complete hello: ST_OK, or why it is refused. */
static unsigned check_hello(const struct hcomm_boot *b,
			    struct boot_hello *hello)
{
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
	struct sockaddr_un sa;
	socklen_t salen = boot_addr(b, &sa);
	char missing[96];

	b->peer = malloc(b->size * sizeof(*b->peer));
	if (!b->peer)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "bootstrap");
	for (r = 0; r < b->size; r++)
		b->peer[r] = -1;
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (lfd < 0)
		return hcomm__fail(hcomm__err_code(0, errno), errno,
				   "bootstrap: socket");
	if (bind(lfd, (struct sockaddr *)&sa, salen)) {
		ret = errno;
		close(lfd);
		if (ret == EADDRINUSE)
			return hcomm__fail(HCOMM_ERR_BUSY, 0,
					   "bootstrap: rendezvous address @%s "
					   "is taken (a rank 0 of this or "
					   "another job listens there; set "
					   "HCOMM_ROOT_ADDR to tell jobs apart)",
					   b->addr);
		return hcomm__fail(hcomm__err_code(0, ret), ret,
				   "bootstrap: bind @%s", b->addr);
	}
	if (listen(lfd, SOMAXCONN)) {
		ret = errno;
		close(lfd);
		return hcomm__fail(hcomm__err_code(0, ret), ret,
				   "bootstrap: listen @%s", b->addr);
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
					  "bootstrap at @%s: %d of %d ranks "
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
					  "bootstrap: poll @%s", b->addr);
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
				    (p->u.msg.h.magic == BOOT_MAGIC &&
				     p->u.msg.h.type == MSG_HELLO &&
				     p->u.msg.h.len ==
				     sizeof(struct boot_hello) &&
				     p->got < sizeof(p->u.buf)))
					continue;
			}
			if (got <= 0 || p->u.msg.h.magic != BOOT_MAGIC ||
			    p->u.msg.h.type != MSG_HELLO ||
			    p->u.msg.h.len != sizeof(struct boot_hello)) {
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
						  "bootstrap: accept @%s",
						  b->addr);
				goto out;
			}
			/* Another user's process: not one of ours. */
			if (!same_user(fd, &uid)) {
				close(fd);
				others++;
				continue;
			}
			pend[npend].fd = fd;
			pend[npend].got = 0;
			npend++;
		}
	}

	close(lfd);	/* frees the name for the next job */
	for (r = 1; r < b->size; r++) {
		ret = send_msg(b->peer[r], MSG_GO, ST_OK, 0, b->size, NULL, 0,
			       deadline);
		if (ret)
			return io_fail(b, ret, "init", r);
	}
	return 0;
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

static int peer_init(struct hcomm_boot *b, int64_t deadline)
{
	struct boot_hello hello = {
		.version = BOOT_VERSION, .rank = b->rank, .size = b->size,
	};
	struct sockaddr_un sa;
	socklen_t salen = boot_addr(b, &sa);
	int64_t pause_ms = 1, left;
	struct boot_hdr h;
	uid_t uid;
	int ret;

	for (;;) {
		struct timespec ts;

		b->fd = socket(AF_UNIX,
			       SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (b->fd < 0)
			return hcomm__fail(hcomm__err_code(0, errno), errno,
					   "bootstrap: socket");
		if (!connect(b->fd, (struct sockaddr *)&sa, salen))
			break;
		ret = errno;
		close(b->fd);
		b->fd = -1;
		/* Not up yet (ECONNREFUSED), or its backlog is full. */
		if (ret != ECONNREFUSED && ret != EAGAIN && ret != EINTR)
			return hcomm__fail(hcomm__err_code(0, ret), ret,
					   "bootstrap: connect @%s", b->addr);
		left = deadline - now_ms();
		if (left <= 0)
			return hcomm__fail(HCOMM_ERR_TIMEOUT, 0,
					   "bootstrap: rank 0 did not come up "
					   "at @%s within %lld ms", b->addr,
					   (long long)b->timeout_ms);
		if (pause_ms > left)
			pause_ms = left;
		ts.tv_sec = pause_ms / 1000;
		ts.tv_nsec = (pause_ms % 1000) * 1000000;
		nanosleep(&ts, NULL);
		if (pause_ms < 50)
			pause_ms *= 2;
	}
	if (!same_user(b->fd, &uid))
		return hcomm__fail(HCOMM_ERR_ACCESS, 0,
				   "bootstrap: rendezvous address @%s is held "
				   "by uid %u, not this user", b->addr,
				   (unsigned)uid);
	memcpy(hello.job, b->job, sizeof(hello.job));
	ret = send_msg(b->fd, MSG_HELLO, 0, 0, 0, &hello, sizeof(hello),
		       deadline);
	if (!ret)
		ret = xrecv(b->fd, &h, sizeof(h), deadline);
	if (ret == -ETIMEDOUT)
		return hcomm__fail(HCOMM_ERR_TIMEOUT, 0,
				   "bootstrap at @%s: not every rank arrived "
				   "within %lld ms", b->addr,
				   (long long)b->timeout_ms);
	if (ret)
		return io_fail(b, ret, "init", 0);
	if (h.magic != BOOT_MAGIC || h.type != MSG_GO || h.len)
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap: @%s is not a rank 0 of hcomm "
				   "protocol %u", b->addr, BOOT_VERSION);
	switch (h.status) {
	case ST_OK:
		return 0;
	case ST_SIZE:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at @%s: rank 0 has world size "
				   "%u, this rank %d", b->addr, h.arg,
				   b->size);
	case ST_JOB:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at @%s: rank 0 is of another job "
				   "(this one: \"%s\")", b->addr, b->job);
	case ST_DUP:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at @%s: rank %d arrived twice",
				   b->addr, b->rank);
	case ST_VERSION:
	case ST_RANK:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at @%s: rank 0 refused rank %d "
				   "of %d (status %u)", b->addr, b->rank,
				   b->size, h.status);
	case ST_TIMEOUT:
		return hcomm__fail(HCOMM_ERR_TIMEOUT, 0,
				   "bootstrap at @%s: rank 0 gave up, %u of %d "
				   "ranks arrived within its timeout", b->addr,
				   h.arg, b->size);
	default:
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap at @%s: rank 0 gave up (a rank "
				   "that did not match, or an error of its "
				   "own: see rank 0's message)", b->addr);
	}
}

int hcomm__boot_init(const struct hcomm_rankinfo *ri, uint32_t timeout_ms,
		     struct hcomm_boot **out)
{
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
	b = calloc(1, sizeof(*b));
	if (!b)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "bootstrap");
	b->rank = ri->rank;
	b->size = ri->size;
	b->timeout_ms = timeout_ms;
	b->fd = -1;
	memcpy(b->job, ri->job, sizeof(b->job));
	memcpy(b->addr, ri->root_addr, n);
	b->addr[n] = 0;

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
	if (h.magic == BOOT_MAGIC && h.type == MSG_COLL && h.seq == seq &&
	    h.status) {
		b->broken = 1;
		if (h.status == ST_TIMEOUT)
			return hcomm__fail(HCOMM_ERR_TIMEOUT, 0,
					   "bootstrap allgather at @%s: rank "
					   "0 gave up, rank %u did not answer "
					   "within %lld ms", b->addr, h.arg,
					   (long long)b->timeout_ms);
		if (h.status == ST_SIZE)
			return hcomm__fail(HCOMM_ERR_INVAL, 0,
					   "bootstrap allgather at @%s: rank "
					   "0 gave up, rank %u called another "
					   "collective or size", b->addr,
					   h.arg);
		return hcomm__fail(HCOMM_ERR_IO, 0,
				   "bootstrap allgather at @%s: rank 0 gave "
				   "up, rank %u failed", b->addr, h.arg);
	}
	if (h.magic != BOOT_MAGIC || h.type != MSG_COLL || h.seq != seq ||
	    h.len != total) {
		b->broken = 1;
		return hcomm__fail(HCOMM_ERR_INVAL, 0,
				   "bootstrap allgather at @%s: rank 0 sent "
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
		if (h.magic != BOOT_MAGIC || h.type != MSG_COLL ||
		    h.seq != seq || h.len != len) {
			root_coll_abort(b, 1, r, seq, -EPROTO);
			return hcomm__fail(HCOMM_ERR_INVAL, 0,
					   "bootstrap allgather at @%s: rank %d "
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
				   "bootstrap at @%s: the channel failed "
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
