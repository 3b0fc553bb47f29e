/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the benchmarks (hcomm_xfer_bench, hcomm_lib_bench,
 * pypto_sched_bench, pypto_gemm_bench): timing, failure reports, table and
 * JSON formatting, the table of results against baselines, option numbers
 * and medians, the data pattern and its checksum, buffers, io_uring XFER
 * commands, the peer process and its control socket, the measuring loop,
 * and the machine's description.
 *
 * Include it once, after the system headers, liburing.h and
 * linux/hcomm.h, with BENCH_NAME defined as the program's name (the
 * prefix of its messages).
 */
#ifndef HCOMM_BENCH_UTIL_H
#define HCOMM_BENCH_UTIL_H

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench_util.h"
#endif

#define KiB		1024ULL
#define MiB		(1024ULL * KiB)
#define GUARD		8	/* bytes checked on each side of a destination */
#define POISON		0x5a
#define ROUNDS		3	/* measure(): rounds, the fastest counts */

static int failures;	/* functional errors so far (fail()) */

/* What measure() runs: n calls' worth of one operation; 0 or -errno. */
typedef int (*run_fn)(void *ctx, uint64_t n);

struct meas {
	uint64_t iters;
	double secs;
	uint64_t all_iters;	/* every call's, warm-up and rounds: for CPU
				 * time taken around the whole measure() */
};

/* Monotonic time in seconds. */
static inline double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Report a functional error (counted in failures) and go on. */
static inline void fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, BENCH_NAME ": FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	failures++;
}

/* Report a failed setup and exit 2. */
static inline void __attribute__((noreturn)) die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, BENCH_NAME ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* "4 KiB", "16 MiB", "3 B": n in words, into buf. */
static inline const char *size_str(uint64_t n, char *buf, size_t len)
{
	if (n >= MiB && n % MiB == 0)
		snprintf(buf, len, "%llu MiB", (unsigned long long)(n / MiB));
	else if (n >= KiB && n % KiB == 0)
		snprintf(buf, len, "%llu KiB", (unsigned long long)(n / KiB));
	else
		snprintf(buf, len, "%llu B", (unsigned long long)n);
	return buf;
}

/* "3.2x faster" / "1.5x slower" from a ratio value/baseline. */
static inline const char *verdict(double ratio, bool higher_better,
				  char *buf, size_t len)
{
	double f;

	if (isnan(ratio) || ratio <= 0) {
		snprintf(buf, len, "-");
		return buf;
	}
	f = higher_better ? ratio : 1.0 / ratio;
	if (f >= 1.0)
		snprintf(buf, len, "%.2fx faster", f);
	else
		snprintf(buf, len, "%.2fx slower", 1.0 / f);
	return buf;
}

/* A table value with as many decimals as its size wants; "-" for NaN. */
static inline void fmt_val(double v, char *buf, size_t len)
{
	if (isnan(v))
		snprintf(buf, len, "-");
	else if (v >= 100)
		snprintf(buf, len, "%.0f", v);
	else if (v >= 1)
		snprintf(buf, len, "%.2f", v);
	else
		snprintf(buf, len, "%.3f", v);
}

/* A table ratio, two decimals; "-" for NaN. */
static inline void fmt_ratio(double v, char *buf, size_t len)
{
	if (isnan(v))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.2f", v);
}

/* splitmix64: the fill pattern's word for index x. */
static inline uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Fill p with the pattern of seed (whole 64-bit words). */
static inline void fill_pattern(void *p, size_t len, uint64_t seed)
{
	uint64_t *w = p;
	size_t i;

	for (i = 0; i < len / 8; i++)
		w[i] = splitmix(seed + i);
}

/* One step of the checksum. */
static inline uint64_t mix(uint64_t h, uint64_t w)
{
	h ^= w;
	h *= 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 31);
}

/* Position-sensitive 64-bit checksum (four lanes, for speed). */
static inline uint64_t csum(const void *p, size_t len)
{
	const unsigned char *c = p;
	uint64_t h0 = 1, h1 = 2, h2 = 3, h3 = 4, w;
	size_t i = 0;

	for (; i + 32 <= len; i += 32) {
		memcpy(&w, c + i, 8);
		h0 = mix(h0, w);
		memcpy(&w, c + i + 8, 8);
		h1 = mix(h1, w);
		memcpy(&w, c + i + 16, 8);
		h2 = mix(h2, w);
		memcpy(&w, c + i + 24, 8);
		h3 = mix(h3, w);
	}
	for (; i + 8 <= len; i += 8) {
		memcpy(&w, c + i, 8);
		h0 = mix(h0, w);
	}
	if (i < len) {
		w = 0;
		memcpy(&w, c + i, len - i);
		h1 = mix(h1, w);
	}
	return mix(mix(mix(mix(len, h0), h1), h2), h3);
}

/* The GUARD bytes around [off, off + len) of buf (size cap) are POISON. */
static inline bool guards_intact(const unsigned char *buf, size_t cap,
				 size_t off, size_t len)
{
	size_t lo = off >= GUARD ? off - GUARD : 0, hi = off + len + GUARD, i;

	if (hi > cap)
		hi = cap;
	for (i = lo; i < off; i++)
		if (buf[i] != POISON)
			return false;
	for (i = off + len; i < hi; i++)
		if (buf[i] != POISON)
			return false;
	return true;
}

/* Anonymous private mapping of len bytes; NULL on failure. */
static inline void *map_buf(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* The CPU's "model name" from /proc/cpuinfo, or "unknown". */
static inline void cpu_model(char *buf, size_t len)
{
	char line[512];
	FILE *f = fopen("/proc/cpuinfo", "re");

	snprintf(buf, len, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *p;

		if (strncmp(line, "model name", 10))
			continue;
		p = strchr(line, ':');
		if (!p)
			break;
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		p[strcspn(p, "\n")] = '\0';
		snprintf(buf, len, "%s", p);
		break;
	}
	fclose(f);
}

/* An IORING_OP_URING_CMD sqe for the hcomm command cmd_op with arg. */
static inline void prep_cmd(struct io_uring_sqe *sqe, int fd,
			    uint32_t cmd_op, void *arg, uint64_t user_data)
{
	struct hcomm_uring_cmd pl = {
		.addr = (uintptr_t)arg,
		.size = _IOC_SIZE(cmd_op),
	};

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = cmd_op;
	memcpy((char *)sqe + offsetof(struct io_uring_sqe, cmd), &pl,
	       sizeof(pl));
	sqe->user_data = user_data;
}

/*
 * XFER completions on the CQE32 ring whose big_cqe[0] was 0 instead of the
 * byte count: reported (hcomm_xfer_bench), not failed (the data itself is
 * verified).
 */
static uint64_t cqe32_no_count;

/* Check one XFER completion: res 0 and, on CQE32 rings, all bytes done. */
/* An XFER's (or XFER_BATCH's) result @res with count @big0, @len wanted. */
static inline int check_xfer_res(struct io_uring *r, int res, uint64_t big0,
				 uint64_t len)
{
	if (res < 0)
		return res;
	if (res != 0)
		return -EPROTO;
	if (!(r->flags & IORING_SETUP_CQE32) || big0 == len)
		return 0;
	if (big0 == 0) {
		cqe32_no_count++;
		return 0;
	}
	fprintf(stderr, "# XFER CQE: %llu done, %llu expected\n",
		(unsigned long long)big0, (unsigned long long)len);
	return -EIO;
}

static inline int check_xfer_cqe(struct io_uring *r,
				 const struct io_uring_cqe *cqe, uint64_t len)
{
	return check_xfer_res(r, cqe->res, (r->flags & IORING_SETUP_CQE32) ?
			      cqe->big_cqe[0] : 0, len);
}

/*
 * Submit the one SQE prepared on @r and wait for its CQE: *res, and
 * *big0 its big_cqe[0] (0 on a ring without CQE32).
 */
static inline int uring_wait1(struct io_uring *r, int *res, uint64_t *big0)
{
	struct io_uring_cqe *cqe;
	int ret = io_uring_submit_and_wait(r, 1);

	if (ret < 0)
		return ret;
	ret = io_uring_wait_cqe(r, &cqe);
	if (ret)
		return ret;
	*res = cqe->res;
	*big0 = (r->flags & IORING_SETUP_CQE32) ? cqe->big_cqe[0] : 0;
	io_uring_cqe_seen(r, cqe);
	return 0;
}

/* Submit one hcomm command on the ring and wait for it: see uring_wait1. */
static inline int uring_cmd1(struct io_uring *r, int fd, uint32_t cmd,
			     void *arg, int *res, uint64_t *big0)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(r);

	if (!sqe)
		return -EBUSY;
	prep_cmd(sqe, fd, cmd, arg, 1);
	return uring_wait1(r, res, big0);
}

/* Submit one XFER on the ring and wait for its CQE. */
static inline int uring_xfer1(struct io_uring *r, int fd, struct hcomm_xfer *x)
{
	uint64_t big0;
	int res, ret;

	x->done = 0;
	x->engine = 0;
	ret = uring_cmd1(r, fd, HCOMM_CMD_XFER, x, &res, &big0);
	return ret ? ret : check_xfer_res(r, res, big0, x->len);
}

/* Control messages to the peer process and its replies. */
struct msg {
	uint32_t op;
	uint32_t pad;
	uint64_t a, b;
};

struct reply {
	int64_t status;
	uint64_t val;
};

/*
 * The peer process: a SOCK_SEQPACKET control socket and two pipes (the
 * pipe ping-pong baseline) to it, then fork.  Returns the child's pid in
 * the parent and 0 in the child, which dies with its parent; *sock,
 * *pipe_in and *pipe_out are the calling side's ends.
 */
static inline pid_t fork_peer(int *sock, int *pipe_in, int *pipe_out)
{
	int sv[2], p_ab[2], p_ba[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) ||
	    pipe2(p_ab, O_CLOEXEC) || pipe2(p_ba, O_CLOEXEC))
		die("socketpair/pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sv[0]);
		close(p_ab[1]);
		close(p_ba[0]);
		*sock = sv[1];
		*pipe_in = p_ab[0];
		*pipe_out = p_ba[1];
		return 0;
	}
	close(sv[1]);
	close(p_ab[0]);
	close(p_ba[1]);
	*sock = sv[0];
	*pipe_out = p_ab[1];
	*pipe_in = p_ba[0];
	return pid;
}

/* Send one whole message on the control socket: 0 or -1. */
static inline int xsend(int s, const void *p, size_t n)
{
	ssize_t r;

	do
		r = send(s, p, n, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	return r == (ssize_t)n ? 0 : -1;
}

/* Receive one whole message of n bytes: 0 or -1. */
static inline int xrecv(int s, void *p, size_t n)
{
	ssize_t r;

	do
		r = recv(s, p, n, 0);
	while (r < 0 && errno == EINTR);
	return r == (ssize_t)n ? 0 : -1;
}

/*
 * Run fn: one untimed warm-up call, then ROUNDS rounds of opt_time/ROUNDS
 * each (calls of doubling batches); the fastest round counts, being the
 * one the other tenants of a shared machine disturbed least.  With
 * opt_iters (--iters): one round of exactly that many.
 */
static inline int measure(run_fn fn, void *ctx, struct meas *m,
			  double opt_time, uint64_t opt_iters)
{
	double t0, el, slice = opt_time / ROUNDS;
	uint64_t n = 1, tot;
	int ret, round;

	m->iters = 0;
	m->secs = 0;
	m->all_iters = 1;
	ret = fn(ctx, 1);
	if (ret)
		return ret;
	if (opt_iters) {
		t0 = now();
		ret = fn(ctx, opt_iters);
		m->secs = now() - t0;
		m->iters = opt_iters;
		m->all_iters += opt_iters;
		return ret;
	}
	for (round = 0; round < ROUNDS; round++) {
		tot = 0;
		t0 = now();
		do {
			ret = fn(ctx, n);
			if (ret)
				return ret;
			tot += n;
			m->all_iters += n;
			el = now() - t0;
			if (el < slice / 8)
				n *= 2;
		} while (el < slice);
		if (!m->iters ||
		    (double)tot / el > (double)m->iters / m->secs) {
			m->iters = tot;
			m->secs = el;
		}
	}
	return 0;
}

/* A JSON number, or null for NaN and infinities. */
static inline void json_num(FILE *f, double v)
{
	if (isnan(v) || isinf(v))
		fprintf(f, "null");
	else
		fprintf(f, "%.6g", v);
}

/* A JSON string, quoted and escaped. */
static inline void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/* A JSON array of n numbers. */
static inline void json_arr(FILE *f, const double *v, unsigned int n)
{
	unsigned int i;

	fputc('[', f);
	for (i = 0; i < n; i++) {
		if (i)
			fprintf(f, ", ");
		json_num(f, v[i]);
	}
	fputc(']', f);
}

/*
 * One figure of a benchmark against its baseline, as every benchmark here
 * prints and writes it: ratio = value / base_value (NaN when either is
 * missing or the baseline is 0).  note is free text (the engine used, a
 * remark), written under the key the program chooses.
 */
struct result {
	char name[48];
	uint64_t size;
	double value;
	char unit[12];
	char base[40];
	double base_value;
	double ratio;
	bool higher_better;
	char note[48];
};

#define RESULTS_MAX	256
static struct result results[RESULTS_MAX];
static int nresults;

/* Appends a result; NULL (and nothing kept) when the table is full. */
static inline struct result *add_result(const char *name, uint64_t size,
					double value, const char *unit,
					const char *base, double base_value,
					bool higher_better, const char *note)
{
	struct result *r;

	if (nresults >= RESULTS_MAX)
		return NULL;
	r = &results[nresults++];
	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->size = size;
	r->value = value;
	snprintf(r->unit, sizeof(r->unit), "%s", unit);
	snprintf(r->base, sizeof(r->base), "%s", base);
	r->base_value = base_value;
	r->ratio = (isnan(value) || isnan(base_value) || base_value == 0) ?
		   NAN : value / base_value;
	r->higher_better = higher_better;
	snprintf(r->note, sizeof(r->note), "%s", note ? note : "");
	return r;
}

/* "  \"results\": [...]\n": every result; a note goes under note_key. */
static inline void json_results(FILE *f, const char *note_key)
{
	int i;

	fprintf(f, "  \"results\": [");
	for (i = 0; i < nresults; i++) {
		const struct result *r = &results[i];

		fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
		json_str(f, r->name);
		fprintf(f, ", \"size\": %llu, \"value\": ",
			(unsigned long long)r->size);
		json_num(f, r->value);
		fprintf(f, ", \"unit\": ");
		json_str(f, r->unit);
		fprintf(f, ", \"baseline_name\": ");
		json_str(f, r->base);
		fprintf(f, ", \"baseline_value\": ");
		json_num(f, r->base_value);
		fprintf(f, ", \"ratio\": ");
		json_num(f, r->ratio);
		fprintf(f, ", \"better\": \"%s\"",
			r->higher_better ? "higher" : "lower");
		if (r->note[0]) {
			fprintf(f, ", \"%s\": ", note_key);
			json_str(f, r->note);
		}
		fprintf(f, "}");
	}
	fprintf(f, "\n  ]\n");
}

/* An integer option value in [lo, hi]; anything else dies naming opt. */
static inline long parse_num(const char *opt, const char *s, long lo,
			     long hi)
{
	char *e;
	long v;

	errno = 0;
	v = strtol(s, &e, 10);
	if (errno || e == s || *e || v < lo || v > hi)
		die("%s: an integer from %ld to %ld, not \"%s\"", opt, lo, hi,
		    s);
	return v;
}

static inline int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#define MEDIAN_MAX	99	/* most samples median() takes */

/* Median of v[0..n) (v is left as it is); NaN for none. */
static inline double median(const double *v, unsigned int n)
{
	double s[MEDIAN_MAX];

	if (!n)
		return NAN;
	if (n > MEDIAN_MAX)
		die("median of %u samples (at most %d)", n, MEDIAN_MAX);
	memcpy(s, v, n * sizeof(*v));
	qsort(s, n, sizeof(*s), cmp_dbl);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* "64K", "16MiB", "1G", "4096": bytes into *out; 0 or -1. */
static inline int parse_size(const char *s, uint64_t *out)
{
	char *e;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &e, 0);
	if (errno || e == s)
		return -1;
	switch (toupper((unsigned char)*e)) {
	case 'K': v <<= 10; e++; break;
	case 'M': v <<= 20; e++; break;
	case 'G': v <<= 30; e++; break;
	}
	if (*e == 'i')
		e++;
	if (*e == 'B')
		e++;
	if (*e)
		return -1;
	*out = v;
	return 0;
}

/* ------------------------------------------------------------------ */
/* the machine                                                         */
/* ------------------------------------------------------------------ */

static bool emulated;		/* a TCG CPU: only the ratios mean anything */
static char cpu_name[128];
static struct utsname uts;

/* Fill uts, cpu_name and emulated. */
static inline void host_probe(void)
{
	uname(&uts);
	cpu_model(cpu_name, sizeof(cpu_name));
	emulated = strstr(cpu_name, "TCG") != NULL;
}

/* The table's first lines: kernel, CPUs, and how to read the figures. */
static inline void print_host(void)
{
	printf(BENCH_NAME ": kernel %s, %ld CPUs, %s\n", uts.release,
	       sysconf(_SC_NPROCESSORS_ONLN), cpu_name);
	if (emulated)
		printf("NOTE: figures come from an emulated (TCG) CPU: absolute "
		       "values are not hardware figures, only the ratios "
		       "(same run, same CPU) matter.\n");
	else
		printf("NOTE: compare the ratios; absolute values depend on "
		       "this machine.\n");
}

/* The JSON members "note" to "cpus" (after "program"), on f. */
static inline void json_host(FILE *f)
{
	json_str(f, emulated ?
		 "figures come from an emulated (TCG) CPU: absolute values are "
		 "not hardware figures, only the ratios matter" :
		 "compare the ratios: absolute values depend on this machine");
	fprintf(f, ",\n  \"emulated_cpu\": %s,\n  \"cpu\": ",
		emulated ? "true" : "false");
	json_str(f, cpu_name);
	fprintf(f, ",\n  \"kernel\": ");
	json_str(f, uts.release);
	fprintf(f, ",\n  \"cpus\": %ld,\n", sysconf(_SC_NPROCESSORS_ONLN));
}

#endif /* HCOMM_BENCH_UTIL_H */
