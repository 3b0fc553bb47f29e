/* SPDX-License-Identifier: MIT */
/*
 * hcomm_demo: open /dev/hcomm, print GET_INFO, register host buffers and
 * dma-bufs of several sizes, check QUERY and print registration rates.
 *
 *   hcomm_demo [--json] [--reps N] [--no-dmabuf] [--require-uring]
 *
 * Exit status 0 when every step worked (dma-buf is skipped, not failed,
 * when the system has no exporter), 1 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "hcomm.h"
#include "dmabuf_util.h"

#define KiB	(1UL << 10)
#define MiB	(1UL << 20)
#define THP_SIZE (2 * MiB)
#define ACCESS	HCOMM_ACCESS_ALL

enum backing { B_ANY, B_4K, B_THP, B_DMABUF };

struct result {
	const char *kind;	/* "host" or the dma-buf exporter */
	const char *name;
	enum backing backing;
	size_t len;
	size_t off;		/* offset of addr in its page */
	uint64_t pages;
	uint32_t extents;
	int reps;
	double usec;		/* mean per REG */
	double gibps;
};

static int json, opt_reps, no_dmabuf, require_uring;
static long page_size;
static struct result results[16];
static int nr_results;
static struct hcomm_ctx *ctx;

__attribute__((format(printf, 1, 2), noreturn))
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "hcomm_demo: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

__attribute__((noreturn))
static void die_hcomm(const char *what, int ret)
{
	die("%s: %s\n  (%s)", what, hcomm_strerror(ret), hcomm_errmsg());
}

__attribute__((format(printf, 1, 2)))
static void say(const char *fmt, ...)
{
	va_list ap;

	if (json)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *feat_names(uint64_t f)
{
	static char buf[128];

	snprintf(buf, sizeof(buf), "%s%s%s%s",
		 f & HCOMM_FEAT_URING_CMD ? " uring_cmd" : "",
		 f & HCOMM_FEAT_DMABUF ? " dmabuf" : "",
		 f & HCOMM_FEAT_DMABUF_MOVE_NOTIFY ? " dmabuf_move_notify" : "",
		 f & HCOMM_FEAT_HUGE_EXTENTS ? " huge_extents" : "");
	return buf[0] ? buf + 1 : "none";
}

static const char *page_size_names(uint64_t m)
{
	static char buf[256];
	size_t n = 0;
	int i;

	for (i = 0; i < 64 && n < sizeof(buf) - 8; i++)
		if (m & (1ULL << i))
			n += snprintf(buf + n, sizeof(buf) - n, "%s%llu%c",
				      n ? " " : "", 1ULL << (i % 10),
				      "BKMGTPE"[i / 10]);
	return n ? buf : "none";
}

/* QUERY a fresh region and check it against what was registered. */
static void check_query(struct hcomm_mr *mr, struct result *r, uint32_t type,
			void *addr)
{
	struct hcomm_extent *ext;
	struct hcomm_query q;
	uint64_t want_pages, sum = 0;
	uint32_t i;
	int ret;

	ret = hcomm_query(mr, &q, NULL, 0);
	if (ret)
		die_hcomm("QUERY", ret);
	ext = calloc(q.nr_extents ? q.nr_extents : 1, sizeof(*ext));
	if (!ext)
		die("out of memory");
	ret = hcomm_query(mr, &q, ext, q.nr_extents);
	if (ret)
		die_hcomm("QUERY", ret);
	want_pages = (r->off + r->len + page_size - 1) / page_size;
	if (q.type != type || q.len != r->len || q.offset != r->off ||
	    q.addr != (uintptr_t)addr || q.key != mr->key ||
	    q.access != ACCESS || q.state != HCOMM_STATE_ACTIVE ||
	    q.nr_pages != want_pages || !q.nr_extents ||
	    q.nr_extents > q.nr_pages)
		die("%s %s: QUERY mismatch: type %u len %llu offset %u "
		    "addr %#llx access %#x state %u pages %llu (want %llu) "
		    "extents %u", r->kind, r->name, q.type,
		    (unsigned long long)q.len, q.offset,
		    (unsigned long long)q.addr, q.access, q.state,
		    (unsigned long long)q.nr_pages,
		    (unsigned long long)want_pages, q.nr_extents);
	for (i = 0; i < q.nr_extents; i++) {
		if (ext[i].offset != sum || !ext[i].len ||
		    ext[i].len % page_size)
			die("%s %s: extent %u: offset %llu len %llu, "
			    "expected offset %llu", r->kind, r->name, i,
			    (unsigned long long)ext[i].offset,
			    (unsigned long long)ext[i].len,
			    (unsigned long long)sum);
		sum += ext[i].len;
	}
	if (sum != q.nr_pages * page_size)
		die("%s %s: extents cover %llu bytes, pages %llu",
		    r->kind, r->name, (unsigned long long)sum,
		    (unsigned long long)q.nr_pages * page_size);
	r->pages = q.nr_pages;
	r->extents = q.nr_extents;
	free(ext);
}

static int reps_for(size_t len)
{
	if (opt_reps)
		return opt_reps;
	return len >= 64 * MiB ? 5 : len >= MiB ? 20 : 200;
}

static void finish(struct result *r, double secs)
{
	r->usec = secs / r->reps * 1e6;
	r->gibps = (double)r->len * r->reps / secs / (1 << 30);
	say("%-8s %-22s %10zu %5zu %7llu %7u %5d %10.1f %8.2f\n", r->kind,
	    r->name, r->len, r->off, (unsigned long long)r->pages,
	    r->extents, r->reps, r->usec, r->gibps);
}

static void run_host(const char *name, size_t len, size_t off,
		     enum backing backing)
{
	struct result *r = &results[nr_results++];
	size_t map_len = (off + len + page_size - 1) / page_size * page_size;
	double secs = 0;
	char *map, *buf;
	int i, ret;

	if (backing == B_THP)
		map_len += THP_SIZE;
	map = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		die("%s: mmap %zu bytes: %s", name, map_len, strerror(errno));
	buf = map;
	if (backing == B_THP) {
		buf = (char *)(((uintptr_t)map + THP_SIZE - 1) &
			       ~(uintptr_t)(THP_SIZE - 1));
		if (madvise(buf, len, MADV_HUGEPAGE))
			die("%s: madvise(MADV_HUGEPAGE): %s (THP disabled?)",
			    name, strerror(errno));
	} else if (backing == B_4K && madvise(buf, map_len, MADV_NOHUGEPAGE)) {
		die("%s: madvise(MADV_NOHUGEPAGE): %s", name, strerror(errno));
	}
	memset(buf, 0x5a, off + len);	/* fault in: time pinning only */

	*r = (struct result){ .kind = "host", .name = name, .len = len,
			      .off = off, .backing = backing,
			      .reps = reps_for(len) };
	for (i = 0; i < r->reps; i++) {
		struct hcomm_mr *mr;
		double t0 = now();

		ret = hcomm_reg_mem(ctx, buf + off, len, ACCESS, &mr);
		secs += now() - t0;
		if (ret)
			die_hcomm(name, ret);
		if (!i)
			check_query(mr, r, HCOMM_REGION_HOST, buf + off);
		ret = hcomm_dereg(mr);
		if (ret)
			die_hcomm("DEREG", ret);
	}
	finish(r, secs);
	if (backing == B_THP && r->extents == r->pages && r->pages > 1)
		say("# %s: one extent per page: THP not in effect (see "
		    "/sys/kernel/mm/transparent_hugepage/enabled) or the "
		    "module does not coalesce huge pages\n", name);
	munmap(map, map_len);
}

static void run_dmabuf(const char *name, size_t len)
{
	struct result *r = &results[nr_results++];
	struct dmabuf_buf b;
	double secs = 0;
	int i, ret;

	ret = dmabuf_alloc(&b, len);
	if (ret)
		die("%s: creating a %s dma-buf of %zu bytes: %s", name,
		    b.exporter, len, strerror(-ret));
	*r = (struct result){ .kind = b.exporter, .name = name, .len = len,
			      .backing = B_DMABUF, .reps = reps_for(len) };
	for (i = 0; i < r->reps; i++) {
		struct hcomm_mr *mr;
		double t0 = now();

		ret = hcomm_reg_dmabuf(ctx, b.fd, 0, len, ACCESS, &mr);
		secs += now() - t0;
		if (ret)
			die_hcomm(name, ret);
		if (!i)
			check_query(mr, r, HCOMM_REGION_DMABUF, NULL);
		ret = hcomm_dereg(mr);
		if (ret)
			die_hcomm("DEREG", ret);
	}
	finish(r, secs);
	dmabuf_free(&b);
}

/* Why no dma-buf exporter can be used, or NULL when one can. */
static const char *dmabuf_unavailable(void)
{
	int fd;

	if (!access("/dev/udmabuf", F_OK))
		return NULL;
	if (geteuid() == 0 &&
	    system("modprobe -q udmabuf >/dev/null 2>&1; "
		   "modprobe -q vgem >/dev/null 2>&1") == -1)
		return "cannot run modprobe";
	if (!access("/dev/udmabuf", F_OK))
		return NULL;
	fd = dmabuf_open_vgem();
	if (fd >= 0) {
		close(fd);
		return NULL;
	}
	return "no /dev/udmabuf and no vgem DRM device "
	       "(CONFIG_UDMABUF / CONFIG_DRM_VGEM)";
}

static double rate_of(enum backing backing)
{
	double v = -1;
	int i;

	for (i = 0; i < nr_results; i++)	/* the largest one */
		if (results[i].backing == backing)
			v = results[i].gibps;
	return v;
}

static void print_json(const char *dev, const struct hcomm_info *in,
		       const char *dmabuf_skip)
{
	double r4k = rate_of(B_4K), thp = rate_of(B_THP), db = rate_of(B_DMABUF);
	int i;

	printf("{\"device\":\"%s\",\"transport\":\"%s\",\n", dev,
	       hcomm_uses_uring(ctx) ? "io_uring" : "ioctl");
	printf(" \"info\":{\"abi_version\":%u,\"features\":%llu,"
	       "\"max_region_size\":%llu,\"page_sizes\":%llu,"
	       "\"max_regions\":%u,\"nr_regions\":%u,\"memlock_limit\":%llu,"
	       "\"pinned_bytes\":%llu},\n", in->abi_version,
	       (unsigned long long)in->features,
	       (unsigned long long)in->max_region_size,
	       (unsigned long long)in->page_sizes, in->max_regions,
	       in->nr_regions, (unsigned long long)in->memlock_limit,
	       (unsigned long long)in->pinned_bytes);
	printf(" \"results\":[");
	for (i = 0; i < nr_results; i++) {
		const struct result *r = &results[i];

		printf("%s\n  {\"kind\":\"%s\",\"name\":\"%s\",\"bytes\":%zu,"
		       "\"offset\":%zu,\"pages\":%llu,\"extents\":%u,"
		       "\"reps\":%d,\"usec_per_reg\":%.3f,\"gibps\":%.4f}",
		       i ? "," : "", r->kind, r->name, r->len, r->off,
		       (unsigned long long)r->pages, r->extents, r->reps,
		       r->usec, r->gibps);
	}
	printf("],\n \"dmabuf_skipped\":");
	if (dmabuf_skip)
		printf("\"%s\",\n", dmabuf_skip);
	else
		printf("null,\n");
	printf(" \"summary\":{\"host_4k_gibps\":%.4f,\"host_thp_gibps\":%.4f,"
	       "\"dmabuf_gibps\":", r4k, thp);
	if (db >= 0)
		printf("%.4f}}\n", db);
	else
		printf("null}}\n");
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hcomm_demo [--json] [--reps N] [--no-dmabuf] "
		   "[--require-uring]\n"
		   "  device: $HCOMM_DEVICE or " HCOMM_DEVICE_PATH
		   "; HCOMM_NO_URING=1 forces ioctl\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "reps", required_argument, NULL, 'r' },
		{ "no-dmabuf", no_argument, NULL, 'D' },
		{ "require-uring", no_argument, NULL, 'U' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *dev = getenv("HCOMM_DEVICE"), *dmabuf_skip = NULL;
	struct hcomm_info info;
	struct rlimit rl;
	double r4k, thp, db;
	int c, ret;

	while ((c = getopt_long(argc, argv, "jr:DUh", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = 1; break;
		case 'r':
			opt_reps = atoi(optarg);
			if (opt_reps < 1)
				die("--reps needs a positive number");
			break;
		case 'D': no_dmabuf = 1; break;
		case 'U': require_uring = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 1;
	}
	if (!dev || !*dev)
		dev = HCOMM_DEVICE_PATH;
	page_size = sysconf(_SC_PAGESIZE);
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* Pinning 64 MiB needs memlock: use the hard limit if allowed. */
	if (!getrlimit(RLIMIT_MEMLOCK, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_MEMLOCK, &rl);
	}

	/*
	 * The demo measures pinning: every registration must reach the
	 * kernel and every DEREG must unpin, so the library's hot-buffer
	 * cache (which would park deregistered buffers) is turned off.
	 */
	setenv("HCOMM_CACHE_LIMIT", "0", 1);
	ret = hcomm_open(&ctx, 0);
	if (ret)
		die_hcomm(dev, ret);
	if (require_uring && !hcomm_uses_uring(ctx))
		die("%s: commands go through ioctl, not io_uring (kernel "
		    "io_uring disabled, HCOMM_NO_URING set, or module lacks "
		    "HCOMM_FEAT_URING_CMD)", dev);
	ret = hcomm_get_info(ctx, &info);
	if (ret)
		die_hcomm("GET_INFO", ret);
	say("hcomm_demo: %s, commands via %s\n", dev,
	    hcomm_uses_uring(ctx) ? "io_uring" : "ioctl");
	say("abi %u, features %#llx (%s)\n", info.abi_version,
	    (unsigned long long)info.features, feat_names(info.features));
	say("max_region_size %llu, max_regions %u, page_sizes %s\n",
	    (unsigned long long)info.max_region_size, info.max_regions,
	    page_size_names(info.page_sizes));
	if (info.memlock_limit == ~0ULL)
		say("memlock unlimited, ");
	else
		say("memlock %llu, ", (unsigned long long)info.memlock_limit);
	say("pinned %llu, regions %u\n\n",
	    (unsigned long long)info.pinned_bytes, info.nr_regions);
	say("%-8s %-22s %10s %5s %7s %7s %5s %10s %8s\n", "kind", "case",
	    "bytes", "off", "pages", "extents", "reps", "us/reg", "GiB/s");

	run_host("1 B", 1, 0, B_ANY);
	run_host("4 KiB", 4 * KiB, 0, B_ANY);
	run_host("4 KiB+1 @ odd offset", 4 * KiB + 1, 1, B_ANY);
	run_host("1 MiB unaligned", MiB, 123, B_ANY);
	run_host("64 MiB 4K pages", 64 * MiB, 0, B_4K);
	run_host("64 MiB THP", 64 * MiB, 0, B_THP);

	if (no_dmabuf)
		dmabuf_skip = "--no-dmabuf";
	else if (!(info.features & HCOMM_FEAT_DMABUF))
		dmabuf_skip = "module lacks HCOMM_FEAT_DMABUF";
	else
		dmabuf_skip = dmabuf_unavailable();
	if (!dmabuf_skip) {
		run_dmabuf("1 MiB dma-buf", MiB);
		run_dmabuf("64 MiB dma-buf", 64 * MiB);
	} else {
		say("dma-buf  skipped: %s\n", dmabuf_skip);
	}

	ret = hcomm_get_info(ctx, &info);
	if (ret)
		die_hcomm("GET_INFO", ret);
	if (info.nr_regions || info.pinned_bytes)
		die("after deregistering everything: %u regions, %llu bytes "
		    "pinned", info.nr_regions,
		    (unsigned long long)info.pinned_bytes);

	r4k = rate_of(B_4K);
	thp = rate_of(B_THP);
	db = rate_of(B_DMABUF);
	if (json) {
		print_json(dev, &info, dmabuf_skip);
	} else {
		printf("\nhost 4K pages: %.2f GiB/s, host THP: %.2f GiB/s, "
		       "dma-buf: ", r4k, thp);
		if (db >= 0)
			printf("%.2f GiB/s\n", db);
		else
			printf("n/a (%s)\n", dmabuf_skip);
	}
	hcomm_close(ctx);
	return 0;
}
