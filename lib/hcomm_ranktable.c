/* SPDX-License-Identifier: MIT */
/*
 * libhcomm: rank tables (text, and JSON in the shape of HCCL's), TCP
 * addresses of the rendezvous, and the host identity that tells which
 * ranks share a kernel.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <json.h>

#include "hcomm_boot.h"

#define MAX_RANKS	1024
#define TABLE_MAX	(4u << 20)	/* bytes of a rank table file */

/* ------------------------------------------------------------------ */
/* TCP addresses                                                      */
/* ------------------------------------------------------------------ */

/* Split "host:port" / "[v6]:port" into host and port; 0 or -1. */
static int split_hostport(const char *s, char *host, size_t hlen,
			  unsigned int *port)
{
	const char *colon, *h = s, *he;
	char *end;
	unsigned long p;

	if (*s == '[') {
		he = strchr(s, ']');
		if (!he || he[1] != ':')
			return -1;
		h = s + 1;
		colon = he + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || memchr(s, ':', colon - s))
			return -1;	/* a bare v6 address needs brackets */
		he = colon;
	}
	if (he == h || (size_t)(he - h) >= hlen)
		return -1;
	if (colon[1] < '0' || colon[1] > '9')
		return -1;
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (errno || *end || p < 1 || p > 65535)
		return -1;
	memcpy(host, h, he - h);
	host[he - h] = 0;
	*port = (unsigned int)p;
	return 0;
}

int hcomm__is_tcp_addr(const char *s)
{
	char host[256];
	unsigned int port;

	if (!s)
		return 0;
	if (!strncmp(s, "tcp:", 4))
		return 1;
	return !split_hostport(s, host, sizeof(host), &port);
}

int hcomm__tcp_addr(const char *s, int passive, struct sockaddr_storage *ss,
		    unsigned int *len)
{
	struct addrinfo hints = { 0 }, *res = NULL;
	char host[256], port[8];
	unsigned int p;
	int ret;

	if (s && !strncmp(s, "tcp:", 4))
		s += 4;
	if (!s || split_hostport(s, host, sizeof(host), &p))
		return hcomm__fail(HCOMM_ERR_INVAL, 0, "TCP address \"%.100s\": "
				   "expected host:port or [v6addr]:port with "
				   "a port in 1 .. 65535", s ? s : "(null)");
	snprintf(port, sizeof(port), "%u", p);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	ret = getaddrinfo(passive && !strcmp(host, "*") ? NULL : host, port,
			  &hints, &res);
	if (ret || !res)
		return hcomm__fail(HCOMM_ERR_INVAL, 0, "TCP address \"%.100s\": "
				   "%s", s, ret ? gai_strerror(ret) :
				   "no address");
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Host identity                                                      */
/* ------------------------------------------------------------------ */

static int read_boot_id(uint8_t id[16])
{
	char buf[64], *p;
	unsigned int i = 0;
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	for (p = buf; *p && i < 32; p++) {
		int v;

		if (*p == '-' || *p == '\n')
			continue;
		if (*p >= '0' && *p <= '9')
			v = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			v = *p - 'a' + 10;
		else
			return -EIO;
		if (i & 1)
			id[i / 2] |= (uint8_t)v;
		else
			id[i / 2] = (uint8_t)(v << 4);
		i++;
	}
	return i == 32 ? 0 : -EIO;
}

/*
 * The host nonce: 8 random bytes in /dev/shm/hcomm-host-nonce, written
 * once per boot (O_EXCL on a temporary name, then link(): the first
 * writer wins and everyone reads the winner's).
 */
static int host_nonce(uint64_t *out)
{
	static const char path[] = "/dev/shm/hcomm-host-nonce";
	char tmp[64];
	uint64_t v = 0;
	int fd, i;

	for (i = 0; i < 3; i++) {
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0) {
			ssize_t n = read(fd, &v, sizeof(v));

			close(fd);
			if (n == sizeof(v) && v) {
				*out = v;
				return 0;
			}
			/* torn or empty: a writer died; replace it */
			if (unlink(path) && errno != ENOENT)
				return -errno;
			continue;
		}
		if (errno != ENOENT)
			return -errno;
		while (getrandom(&v, sizeof(v), 0) != sizeof(v) || !v)
			;
		snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
		if (fd < 0)
			return -errno;
		if (write(fd, &v, sizeof(v)) != sizeof(v)) {
			close(fd);
			unlink(tmp);
			return -EIO;
		}
		close(fd);
		if (!link(tmp, path)) {
			unlink(tmp);
			*out = v;
			return 0;
		}
		unlink(tmp);
		if (errno != EEXIST)
			return -errno;
	}
	return -EAGAIN;
}

int hcomm__host_id(struct hcomm_host_id *id)
{
	int ret;

	memset(id, 0, sizeof(*id));
	ret = read_boot_id(id->boot_id);
	if (ret)
		return hcomm__fail(HCOMM_ERR_IO, -ret, "host id: cannot read "
				   "/proc/sys/kernel/random/boot_id");
	ret = host_nonce(&id->nonce);
	if (ret)
		return hcomm__fail(HCOMM_ERR_IO, -ret, "host id: "
				   "/dev/shm/hcomm-host-nonce");
	return 0;
}

/* ------------------------------------------------------------------ */
/* Rank tables                                                        */
/* ------------------------------------------------------------------ */

/*
 * One rank's entry, while parsing: host and the optional fields.
 * Only the entry of the wanted rank and of rank 0 are kept.
 */
struct entry {
	char host[256];
	char addr[64];
	char dev_ip[64];
	char dev[32];
	int gid;
};

struct table {
	const char *path;
	int want;		/* rank whose entry fills ri, or -1 */
	int size;
	int local;
	int max_rank, max_line;	/* for "rank not below world_size" */
	unsigned char *seen;
	char root[100];
	struct entry e0, mine;
	char me[HOST_NAME_MAX + 1];
};

uint64_t hcomm__fnv1a(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 0xcbf29ce484222325ULL;

	while (n--) {
		h ^= *s++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static int table_fail(const struct table *t, unsigned int line,
		      const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int table_fail(const struct table *t, unsigned int line,
		      const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line)
		return hcomm__fail(HCOMM_ERR_INVAL, 0, "rank table %.128s:%u: "
				   "%s", t->path, line, msg);
	return hcomm__fail(HCOMM_ERR_INVAL, 0, "rank table %.128s: %s",
			   t->path, msg);
}

int hcomm__parse_dec(const char *s, long lo, long hi, int *out)
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

static int is_local_host(const struct table *t, const char *host)
{
	return !strcmp(host, t->me) || !strcmp(host, "localhost") ||
	       !strncmp(host, "127.", 4) || !strcmp(host, "::1");
}

static int copy_field(const struct table *t, unsigned int line, char *dst,
		      size_t cap, const char *src, const char *what)
{
	if (strlen(src) >= cap)
		return table_fail(t, line, "%s longer than %zu bytes", what,
				  cap - 1);
	strcpy(dst, src);
	return 0;
}

/* Record rank r's entry (checked for range and duplicates). */
static int add_rank(struct table *t, unsigned int line, int r,
		    const struct entry *e)
{
	if (r < 0 || r >= MAX_RANKS)
		return table_fail(t, line, "rank %d: not in 0 .. %d", r,
				  MAX_RANKS - 1);
	if (t->seen[r])
		return table_fail(t, line, "rank %d listed twice", r);
	t->seen[r] = 1;
	if (r > t->max_rank) {
		t->max_rank = r;
		t->max_line = line;
	}
	if (!is_local_host(t, e->host))
		t->local = 0;
	if (r == 0)
		t->e0 = *e;
	if (r == t->want)
		t->mine = *e;
	return 0;
}

static int parse_text(struct table *t, char *text)
{
	static const char *const sep = " \t\r\n\v\f";
	char *save_line, *ln;
	unsigned int line = 0;
	int ret;

	for (ln = strtok_r(text, "\n", &save_line); ln;
	     ln = strtok_r(NULL, "\n", &save_line)) {
		char *tok[16], *save, *p;
		int n = 0, v, i;

		line++;
		p = strchr(ln, '#');
		if (p)
			*p = 0;
		for (p = strtok_r(ln, sep, &save); p && n < 16;
		     p = strtok_r(NULL, sep, &save))
			tok[n++] = p;
		if (!n)
			continue;
		if (!strcmp(tok[0], "world_size")) {
			if (n != 2)
				return table_fail(t, line, "expected "
						  "\"world_size N\"");
			if (t->size)
				return table_fail(t, line,
						  "second world_size line");
			if (hcomm__parse_dec(tok[1], 1, MAX_RANKS, &t->size))
				return table_fail(t, line, "world_size "
						  "\"%.32s\": not in 1 .. %d",
						  tok[1], MAX_RANKS);
		} else if (!strcmp(tok[0], "root")) {
			if (n != 2)
				return table_fail(t, line,
						  "expected \"root ADDR\"");
			if (t->root[0])
				return table_fail(t, line, "second root line");
			ret = copy_field(t, line, t->root, sizeof(t->root),
					 tok[1], "root address");
			if (ret)
				return ret;
		} else if (!strcmp(tok[0], "rank")) {
			struct entry e = { .gid = -1 };

			if (n < 4 || strcmp(tok[2], "host") || (n - 4) % 2)
				return table_fail(t, line, "expected \"rank R "
						  "host HOST [addr IP] [dev "
						  "RDMADEV] [gid N] [dev_ip "
						  "IP]\"");
			if (hcomm__parse_dec(tok[1], 0, MAX_RANKS - 1, &v))
				return table_fail(t, line, "rank \"%.32s\": "
						  "not in 0 .. %d", tok[1],
						  MAX_RANKS - 1);
			ret = copy_field(t, line, e.host, sizeof(e.host),
					 tok[3], "host name");
			for (i = 4; !ret && i < n; i += 2) {
				if (!strcmp(tok[i], "addr"))
					ret = copy_field(t, line, e.addr,
							 sizeof(e.addr),
							 tok[i + 1], "addr");
				else if (!strcmp(tok[i], "dev"))
					ret = copy_field(t, line, e.dev,
							 sizeof(e.dev),
							 tok[i + 1], "dev");
				else if (!strcmp(tok[i], "dev_ip"))
					ret = copy_field(t, line, e.dev_ip,
							 sizeof(e.dev_ip),
							 tok[i + 1], "dev_ip");
				else if (!strcmp(tok[i], "gid")) {
					if (hcomm__parse_dec(tok[i + 1], 0, 255,
						      &e.gid))
						ret = table_fail(t, line,
							"gid \"%.32s\": not "
							"in 0 .. 255",
							tok[i + 1]);
				} else {
					ret = table_fail(t, line, "unknown "
						"field \"%.32s\" (addr, dev, "
						"gid, dev_ip)", tok[i]);
				}
			}
			if (!ret)
				ret = add_rank(t, line, v, &e);
			if (ret)
				return ret;
		} else {
			return table_fail(t, line, "unknown keyword \"%.32s\" "
					  "(world_size, root, rank)", tok[0]);
		}
	}
	return 0;
}

/* A JSON member that is a string or an integer, as a string. */
static int json_str(const struct table *t, struct json_object *o,
		    const char *key, char *dst, size_t cap, int required,
		    const char *where)
{
	struct json_object *v;
	const char *s;

	if (!json_object_object_get_ex(o, key, &v) || !v) {
		if (required)
			return table_fail(t, 0, "%s has no \"%s\"", where, key);
		dst[0] = 0;
		return 0;
	}
	if (!json_object_is_type(v, json_type_string) &&
	    !json_object_is_type(v, json_type_int))
		return table_fail(t, 0, "%s: \"%s\" is neither a string nor "
				  "an integer", where, key);
	s = json_object_get_string(v);
	if (strlen(s) >= cap)
		return table_fail(t, 0, "%s: \"%s\" longer than %zu bytes",
				  where, key, cap - 1);
	strcpy(dst, s);
	return 0;
}

static int parse_json(struct table *t, const char *text)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *root = NULL, *list, *devs;
	enum json_tokener_error jerr;
	char where[64], buf[64];
	size_t i, j, ns, nd;
	int ret = 0, r = -1;

	if (!tok)
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "rank table");
	root = json_tokener_parse_ex(tok, text, (int)strlen(text));
	jerr = json_tokener_get_error(tok);
	if (!root || jerr != json_tokener_success) {
		ret = table_fail(t, 0, "not valid JSON: %s (at byte %zu)",
				 json_tokener_error_desc(jerr),
				 json_tokener_get_parse_end(tok));
		goto out;
	}
	if (!json_object_is_type(root, json_type_object)) {
		ret = table_fail(t, 0, "the JSON is not an object");
		goto out;
	}
	ret = json_str(t, root, "root_addr", t->root, sizeof(t->root), 0,
		       "the table");
	if (ret)
		goto out;
	if (json_object_object_get_ex(root, "status", &list) &&
	    json_object_is_type(list, json_type_string) &&
	    strcmp(json_object_get_string(list), "completed")) {
		ret = table_fail(t, 0, "status \"%.32s\": not \"completed\"",
				 json_object_get_string(list));
		goto out;
	}
	if (!json_object_object_get_ex(root, "server_list", &list) ||
	    !json_object_is_type(list, json_type_array)) {
		ret = table_fail(t, 0, "no \"server_list\" array");
		goto out;
	}
	ns = json_object_array_length(list);
	for (i = 0; i < ns; i++) {
		struct json_object *srv = json_object_array_get_idx(list, i);
		char host[256], host_ip[64];

		snprintf(where, sizeof(where), "server_list[%zu]", i);
		if (!json_object_is_type(srv, json_type_object)) {
			ret = table_fail(t, 0, "%s is not an object", where);
			goto out;
		}
		ret = json_str(t, srv, "server_id", host, sizeof(host), 1,
			       where);
		if (!ret)
			ret = json_str(t, srv, "host_ip", host_ip,
				       sizeof(host_ip), 0, where);
		if (ret)
			goto out;
		if (!json_object_object_get_ex(srv, "device", &devs) ||
		    !json_object_is_type(devs, json_type_array)) {
			ret = table_fail(t, 0, "%s has no \"device\" array",
					 where);
			goto out;
		}
		nd = json_object_array_length(devs);
		for (j = 0; j < nd; j++) {
			struct json_object *d = json_object_array_get_idx(devs,
									  j);
			struct entry e = { .gid = -1 };

			snprintf(where, sizeof(where),
				 "server_list[%zu].device[%zu]", i, j);
			if (!json_object_is_type(d, json_type_object)) {
				ret = table_fail(t, 0, "%s is not an object",
						 where);
				goto out;
			}
			strcpy(e.host, host);
			strcpy(e.addr, host_ip);
			ret = json_str(t, d, "rank_id", buf, sizeof(buf), 1,
				       where);
			if (!ret && hcomm__parse_dec(buf, 0, MAX_RANKS - 1, &r))
				ret = table_fail(t, 0, "%s: rank_id \"%.32s\": "
						 "not in 0 .. %d", where, buf,
						 MAX_RANKS - 1);
			if (!ret)
				ret = json_str(t, d, "device_ip", e.dev_ip,
					       sizeof(e.dev_ip), 0, where);
			if (!ret)
				ret = json_str(t, d, "rdma_dev", e.dev,
					       sizeof(e.dev), 0, where);
			if (!ret)
				ret = json_str(t, d, "gid_index", buf,
					       sizeof(buf), 0, where);
			if (!ret && buf[0] && hcomm__parse_dec(buf, 0, 255, &e.gid))
				ret = table_fail(t, 0, "%s: gid_index "
						 "\"%.32s\": not in 0 .. 255",
						 where, buf);
			if (!ret && !e.addr[0] && e.dev_ip[0])
				strcpy(e.addr, e.dev_ip);
			if (!ret)
				ret = add_rank(t, 0, r, &e);
			if (ret)
				goto out;
			t->size++;
		}
	}
	if (!t->size)
		ret = table_fail(t, 0, "no device in server_list");
out:
	if (root)
		json_object_put(root);
	json_tokener_free(tok);
	return ret;
}

/* The whole file, NUL-terminated; NULL after recording the error *err. */
static char *read_table(const char *path, size_t *len, int *err)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*err = hcomm__fail(errno == EACCES || errno == EPERM ?
			    HCOMM_ERR_ACCESS : HCOMM_ERR_INVAL, errno,
			    "rank table %.128s: cannot open", path);
		return NULL;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > TABLE_MAX) {
		*err = hcomm__fail(HCOMM_ERR_INVAL, 0, "rank table %.128s: not a "
			    "regular file of at most %u bytes", path,
			    TABLE_MAX);
		close(fd);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		*err = hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "rank table");
		close(fd);
		return NULL;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += n;
	}
	close(fd);
	if (got != (size_t)st.st_size || memchr(buf, 0, got)) {
		*err = hcomm__fail(HCOMM_ERR_INVAL, 0, "rank table %.128s: short "
			    "read or a NUL byte", path);
		free(buf);
		return NULL;
	}
	buf[got] = 0;
	*len = got;
	return buf;
}

int hcomm__rank_table_parse(const char *path, int rank,
			    struct hcomm_rankinfo *ri)
{
	struct table t;
	char *text, *p;
	size_t len;
	uint64_t h;
	int ret, i;

	if (!path || !*path || !ri)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm__rank_table_parse");
	memset(&t, 0, sizeof(t));
	t.path = path;
	t.want = rank;
	t.local = 1;
	t.max_rank = -1;
	t.e0.gid = t.mine.gid = -1;
	if (gethostname(t.me, sizeof(t.me)))
		t.me[0] = 0;
	t.me[sizeof(t.me) - 1] = 0;
	text = read_table(path, &len, &ret);
	if (!text)
		return ret;
	h = hcomm__fnv1a(text, len);
	t.seen = calloc(MAX_RANKS, 1);
	if (!t.seen) {
		free(text);
		return hcomm__fail(HCOMM_ERR_NOMEM, ENOMEM, "rank table");
	}
	for (p = text; *p == ' ' || *p == '\t' || *p == '\r' || *p == '\n';
	     p++)
		;
	ret = *p == '{' || *p == '[' ? parse_json(&t, p) :
	      parse_text(&t, text);
	if (ret)
		goto out;
	if (!t.size) {
		ret = table_fail(&t, 0, "no world_size line");
		goto out;
	}
	if (t.max_rank >= t.size) {
		ret = table_fail(&t, t.max_line, "rank %d is not below the "
				 "world size %d", t.max_rank, t.size);
		goto out;
	}
	for (i = 0; i < t.size; i++)
		if (!t.seen[i]) {
			ret = table_fail(&t, 0, "no entry for rank %d", i);
			goto out;
		}
	ri->size = t.size;
	ri->launcher = HCOMM_LAUNCH_RANK_TABLE;
	ri->local = t.local;
	/* the contents, not the path: every host has its own copy */
	snprintf(ri->job, sizeof(ri->job), "table-%016llx",
		 (unsigned long long)h);
	ri->tcp_root = 0;
	if (t.root[0]) {
		strcpy(ri->root_addr, t.root);
		ri->tcp_root = hcomm__is_tcp_addr(t.root);
	} else if (!t.local) {
		const char *h0 = t.e0.addr[0] ? t.e0.addr : t.e0.host;
		int n = snprintf(ri->root_addr, sizeof(ri->root_addr),
				 strchr(h0, ':') ? "[%s]:%u" : "%s:%u", h0,
				 hcomm__default_port(ri->job));

		if (n < 0 || (size_t)n >= sizeof(ri->root_addr)) {
			ret = table_fail(&t, 0, "rank 0's host name is too "
					 "long for a root address");
			goto out;
		}
		ri->tcp_root = 1;
	} else {
		ri->root_addr[0] = 0;
	}
	if (rank >= 0 && rank < t.size) {
		const struct entry *e = &t.mine;

		snprintf(ri->host_addr, sizeof(ri->host_addr), "%s",
			 e->addr[0] ? e->addr :
			 strlen(e->host) < sizeof(ri->host_addr) &&
			 !t.local ? e->host : "");
		strcpy(ri->dev_ip, e->dev_ip);
		strcpy(ri->rdma_dev, e->dev);
		ri->gid_index = e->gid;
	}
	ret = 0;
out:
	free(t.seen);
	free(text);
	return ret;
}

unsigned int hcomm__default_port(const char *job)
{
	return 20000 + (unsigned int)(hcomm__fnv1a(job, strlen(job)) % 20000);
}
