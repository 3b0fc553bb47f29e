// SPDX-License-Identifier: GPL-2.0
/*
 * hcomm data path inside one process: XFER between regions of the same
 * context (sizes 1 B .. 64 MiB at odd offsets, inline and on the engine),
 * doorbells (mmap, DB_ADD/DB_SET, pure signals, DB_WAIT), FENCE, CANCEL,
 * DEREG while a transfer is in flight, the end of a ring or a process with
 * operations pending, and the errors of these commands.
 *
 * Fixture hcomm (hcomm_fixture.h) runs a test through ioctl() and through
 * io_uring; its ring is replaced by an IORING_SETUP_CQE32 one so that the
 * bytes copied come back in big_cqe[0].  Fixture xuring is io_uring only,
 * for what needs several commands in flight: a 1024-entry CQE32 ring and
 * the context's doorbells mapped.
 *
 * Every transfer is checked byte for byte (checksum of the destination
 * against the source, guard bytes around it unchanged) and against the
 * debugfs counters.  Registrations use HCOMM_REG_NOCACHE so that DEREG
 * really unpins and pinned_pages deltas are exact.
 */
#include <pthread.h>

#include "kselftest_harness.h"
#include "hcomm_fixture.h"
#include "hcomm_xfer.h"

#define ACC_W		HCOMM_ACCESS_LOCAL_WRITE
#define NOCACHE		HCOMM_REG_NOCACHE
#define NO_INLINE	HCOMM_XFER_NO_INLINE
#define DB_ADD		HCOMM_XFER_DB_ADD
#define DB_SET		HCOMM_XFER_DB_SET
/* Guard bytes checked on each side of a destination range. */
#define GUARD		4096
/* Bound for things that must happen (never a performance threshold). */
#define SETTLE_MS	30000
#define REAP_MS		120000

#define ULL(x)		((unsigned long long)(x))

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* Wait until the gauges equal *want (transfers, waits ended), into *now. */
#define SETTLE(want, now) do { \
	int __r = hcomm_gauges_wait((want), (now), SETTLE_MS); \
	if (__r > 0) \
		hcomm_gauges_dump(stderr, "settle", (want), (now)); \
	ASSERT_EQ(0, __r) TH_LOG("gauges not back within %d ms after the " \
				 "operations completed: xfers_active %llu " \
				 "(want %llu), waits_pending %llu (want %llu)", \
				 SETTLE_MS, ULL((now)->xfers_active), \
				 ULL((want)->xfers_active), \
				 ULL((now)->waits_pending), \
				 ULL((want)->waits_pending)); \
} while (0)

/*
 * Counter deltas of @nr XFERs, @nr_inline of them inline, @bytes copied in
 * all, issued through one transport together with @other other commands;
 * no error, nothing cancelled or failed.
 */
static void check_xfer_stats(struct __test_metadata *_metadata, bool uring,
			     const struct hcomm_stats *a,
			     const struct hcomm_stats *b, uint64_t nr,
			     uint64_t nr_inline, uint64_t bytes, uint64_t other)
{
	ASSERT_DELTA(*a, *b, cmd_xfer, nr);
	ASSERT_DELTA(*a, *b, xfer_inline, nr_inline);
	ASSERT_DELTA(*a, *b, xfer_async, nr - nr_inline);
	ASSERT_DELTA(*a, *b, xfer_bytes, bytes);
	ASSERT_DELTA(*a, *b, xfer_cancelled, 0);
	ASSERT_DELTA(*a, *b, xfer_failed, 0);
	ASSERT_DELTA(*a, *b, cmd_errors, 0);
	if (uring) {
		ASSERT_DELTA(*a, *b, uring_cmds, nr + other);
		ASSERT_DELTA(*a, *b, ioctls, 0);
	} else {
		ASSERT_DELTA(*a, *b, ioctls, nr + other);
		ASSERT_DELTA(*a, *b, uring_cmds, 0);
	}
}

/* ------------------------------------------------------------------ */
/* fixture hcomm: both transports                                      */
/* ------------------------------------------------------------------ */

/* uring variant: a CQE32 ring of 256 entries instead of the fixture's. */
static void use_cqe32_ring(struct __test_metadata *_metadata,
			   FIXTURE_DATA(hcomm) *self)
{
	int ret;

	if (!self->r)
		return;
	io_uring_queue_exit(self->r);
	self->r = NULL;
	ret = hx_ring_init(&self->ring, 256, 0);
	ASSERT_EQ(0, ret) TH_LOG("io_uring_queue_init(CQE32): %s",
				 strerror(-ret));
	self->r = &self->ring;
}

#define XFER_SETUP() do { \
	if (!(self->info.features & HCOMM_FEAT_XFER)) \
		SKIP(return, "module without HCOMM_FEAT_XFER (features " \
		     "0x%llx)", ULL(self->info.features)); \
	use_cqe32_ring(_metadata, self); \
} while (0)

/* Map the whole doorbell array of the fixture's context. */
static uint64_t *map_doorbells(struct __test_metadata *_metadata,
			       FIXTURE_DATA(hcomm) *self, size_t *len)
{
	uint64_t *db;

	*len = hx_db_map_len(self->info.nr_doorbells);
	db = hx_db_map(self->fd, *len);
	if (!db)
		TH_LOG("mmap of %zu bytes of doorbells (%u): %s", *len,
		       self->info.nr_doorbells, strerror(errno));
	return db;
}

/*
 * Two buffers: a source (access 0: the owner may read it) and a
 * LOCAL_WRITE destination, both starting off a page boundary.
 */
static void two_bufs(struct __test_metadata *_metadata,
		     FIXTURE_DATA(hcomm) *self, struct hx_buf *src,
		     struct hx_buf *dst, uint64_t slen, uint64_t dlen)
{
	ASSERT_EQ(0, hx_buf_alloc(src, 0x123, slen));
	ASSERT_EQ(0, hx_buf_alloc(dst, 0xF01, dlen));
	hx_fill(src->map, src->map_len, 1);
	hx_fill(dst->map, dst->map_len, 2);
	ASSERT_EQ(0, hx_buf_reg(self->fd, self->r, src, 0, NOCACHE));
	ASSERT_EQ(0, hx_buf_reg(self->fd, self->r, dst, ACC_W, NOCACHE));
}

static void free_bufs(struct __test_metadata *_metadata,
		      FIXTURE_DATA(hcomm) *self, struct hx_buf *src,
		      struct hx_buf *dst)
{
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, src->reg.region));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, dst->reg.region));
	hx_buf_free(src);
	hx_buf_free(dst);
}

/* One transfer of a test: offsets in the regions, length, flags. */
struct xf {
	uint64_t soff, doff, len;
	uint32_t flags, db_index;
	uint64_t db_value;
};

/*
 * XFER f from src to dst through the variant's transport and check it end
 * to end: result, bytes reported (ioctl done, CQE32 big_cqe[0]), engine
 * (ioctl), every destination byte and the guards around it, the counters
 * (exactly one inline or async transfer of len bytes, one doorbell signal
 * when asked) and the gauges back where they were.
 */
static void xfer_checked(struct __test_metadata *_metadata,
			 FIXTURE_DATA(hcomm) *self,
			 const FIXTURE_VARIANT(hcomm) *variant,
			 struct hx_buf *src, struct hx_buf *dst,
			 const struct xf *f)
{
	bool inl = f->len <= self->info.max_inline &&
		   !(f->flags & NO_INLINE);
	bool sig = f->flags & (DB_ADD | DB_SET);
	char *d = dst->base + f->doff;
	struct hcomm_stats s0, s1;
	struct hcomm_xfer x;
	struct hx_span sp;
	uint64_t done = 0;
	char why[256];
	bool ok;
	int ret;

	ASSERT_EQ(0, hx_span_prep(&sp, src->base + f->soff, d, f->len,
				  min_sz(GUARD, d - dst->map),
				  min_sz(GUARD, dst->map + dst->map_len -
					 (d + f->len))));
	hx_xfer_init(&x, src->reg.key, f->soff, dst->reg.key, f->doff,
		     f->len, f->flags);
	x.db_index = f->db_index;
	x.db_value = f->db_value;
	x.tag = 0x7a6;

	ASSERT_STATS(s0);
	ret = hx_xfer(self->fd, self->r, &x, &done);
	ASSERT_EQ(0, ret) TH_LOG("XFER of %llu bytes, src_off %llu dst_off "
				 "%llu flags 0x%x: %d (%s), want 0", ULL(f->len),
				 ULL(f->soff), ULL(f->doff), f->flags, ret,
				 strerror(-ret));
	ASSERT_EQ(f->len, done) TH_LOG("%s says %llu bytes copied, want %llu",
				       variant->uring ? "big_cqe[0]" : "done",
				       ULL(done), ULL(f->len));
	if (!variant->uring && inl)
		ASSERT_EQ(HCOMM_ENGINE_INLINE, x.engine)
			TH_LOG("%llu bytes (max_inline %u, flags 0x%x) must be "
			       "copied inline; engine %u", ULL(f->len),
			       self->info.max_inline, f->flags, x.engine);
	if (!variant->uring && !inl)
		ASSERT_EQ(HCOMM_ENGINE_CPU, x.engine)
			TH_LOG("%llu bytes (max_inline %u, flags 0x%x): engine "
			       "%u, want the engine's CPU (2)",
			       ULL(f->len), self->info.max_inline, f->flags,
			       x.engine);
	ok = hx_span_check(&sp, f->len, why, sizeof(why));
	hx_span_free(&sp);
	ASSERT_TRUE(ok) TH_LOG("XFER of %llu bytes, src_off %llu dst_off "
			       "%llu flags 0x%x: %s", ULL(f->len), ULL(f->soff),
			       ULL(f->doff), f->flags, why);

	SETTLE(&s0, &s1);
	check_xfer_stats(_metadata, variant->uring, &s0, &s1, 1, inl, f->len,
			 0);
	ASSERT_DELTA(s0, s1, db_signals, sig ? 1 : 0);
	if (!inl && self->info.chunk_size)
		ASSERT_LE((f->len + self->info.chunk_size - 1) /
			  self->info.chunk_size,
			  s1.xfer_chunks - s0.xfer_chunks)
			TH_LOG("%llu bytes in chunks of %u: xfer_chunks moved "
			       "by %llu", ULL(f->len), self->info.chunk_size,
			       ULL(s1.xfer_chunks - s0.xfer_chunks));
}

/*
 * Each length at odd source and destination offsets inside regions that
 * start off a page boundary.  Lengths up to max_inline go twice: inline,
 * and with NO_INLINE on the engine; longer ones once (always the engine),
 * alternately with and without NO_INLINE.
 */
static void xfer_sizes(struct __test_metadata *_metadata,
		       FIXTURE_DATA(hcomm) *self,
		       const FIXTURE_VARIANT(hcomm) *variant,
		       const uint64_t *sizes, unsigned int n)
{
	uint64_t maxl = 0;
	struct hx_buf src, dst;
	unsigned int i;

	for (i = 0; i < n; i++)
		if (sizes[i] > maxl)
			maxl = sizes[i];
	two_bufs(_metadata, self, &src, &dst, maxl + 3 * PG + 0x77,
		 maxl + 4 * PG + 0x35);

	for (i = 0; i < n; i++) {
		struct xf f = {
			.soff = 1 + 2 * ((i * 389) % 1500),
			.doff = PG + 1 + 2 * ((i * 743) % 1500),
			.len = sizes[i],
		};

		if (f.len <= self->info.max_inline) {
			xfer_checked(_metadata, self, variant, &src, &dst, &f);
			f.soff += 2;
			f.doff += 4;
			f.flags = NO_INLINE;
		} else if (i & 1) {
			f.flags = NO_INLINE;
		}
		xfer_checked(_metadata, self, variant, &src, &dst, &f);
	}
	free_bufs(_metadata, self, &src, &dst);
}

TEST_F(hcomm, xfer_sizes_small)
{
	static const uint64_t sizes[] = { 1, 7, 4095, 4096, 4097, 65537 };

	XFER_SETUP();
	xfer_sizes(_metadata, self, variant, sizes, ARRAY_SIZE(sizes));
}

TEST_F(hcomm, xfer_1mib_plus_3)
{
	static const uint64_t sizes[] = { MiB + 3 };

	XFER_SETUP();
	xfer_sizes(_metadata, self, variant, sizes, ARRAY_SIZE(sizes));
}

TEST_F_TIMEOUT(hcomm, xfer_16mib, 300)
{
	static const uint64_t sizes[] = { 16 * MiB };

	XFER_SETUP();
	xfer_sizes(_metadata, self, variant, sizes, ARRAY_SIZE(sizes));
}

TEST_F_TIMEOUT(hcomm, xfer_64mib, 300)
{
	static const uint64_t sizes[] = { 64 * MiB };

	XFER_SETUP();
	if (self->info.max_region_size < 64 * MiB + 8 * PG)
		SKIP(return, "max_region_size %llu < 64 MiB",
		     ULL(self->info.max_region_size));
	xfer_sizes(_metadata, self, variant, sizes, ARRAY_SIZE(sizes));
}

/*
 * The inline threshold is GET_INFO's max_inline and follows SET_CTX:
 * max_inline bytes are copied inline, one more byte goes to the engine.
 */
TEST_F(hcomm, inline_threshold)
{
	uint32_t mi = self->info.max_inline;
	struct hcomm_ctx_opts o;
	struct hx_buf src, dst;
	struct hcomm_info i;
	uint64_t modmax;
	int ret;

	XFER_SETUP();
	two_bufs(_metadata, self, &src, &dst, 2 * 65536 + PG, 2 * 65536 + PG);

	if (mi)
		xfer_checked(_metadata, self, variant, &src, &dst,
			     &(struct xf){ .soff = 3, .doff = 5, .len = mi });
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 7, .doff = 9, .len = mi + 1 });

	ret = hx_set_max_inline(self->fd, self->r, 64);
	ASSERT_EQ(0, ret) TH_LOG("SET_CTX max_inline 64: %s", strerror(-ret));
	ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
	ASSERT_EQ(64, i.max_inline) TH_LOG("GET_INFO after SET_CTX 64");
	self->info.max_inline = 64;
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 11, .doff = 13, .len = 64 });
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 15, .doff = 17, .len = 65 });

	/* 0: every transfer that copies a byte goes to the engine */
	ASSERT_EQ(0, hx_set_max_inline(self->fd, self->r, 0));
	ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
	ASSERT_EQ(0, i.max_inline);
	self->info.max_inline = 0;
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 19, .doff = 21, .len = 1 });

	/* above the module's parameter, unknown mask bits: EINVAL */
	if (!hcomm_param("max_inline", &modmax)) {
		memset(&o, 0, sizeof(o));
		o.mask = HCOMM_CTX_MAX_INLINE;
		o.max_inline = modmax + 1;
		cmd_fails(_metadata, self, HCOMM_CMD_SET_CTX, &o, EINVAL,
			  "SET_CTX max_inline above the module parameter");
	}
	memset(&o, 0, sizeof(o));
	o.mask = 1U << 7;
	cmd_fails(_metadata, self, HCOMM_CMD_SET_CTX, &o, EINVAL,
		  "SET_CTX with an unknown mask bit");
	ASSERT_EQ(0, hc_info(self->fd, self->r, &i));
	ASSERT_EQ(0, i.max_inline) TH_LOG("a failed SET_CTX changed max_inline");

	ASSERT_EQ(0, hx_set_max_inline(self->fd, self->r, mi));
	self->info.max_inline = mi;
	free_bufs(_metadata, self, &src, &dst);
}

/* done and engine are outputs only: garbage in them is overwritten. */
TEST_F(hcomm, xfer_out_fields_ignored)
{
	static const uint64_t lens[] = { 100, 100000 };
	struct hx_buf src, dst;
	struct hcomm_xfer x;
	struct hx_span sp;
	unsigned int k;
	uint64_t done;
	char why[256];

	XFER_SETUP();
	two_bufs(_metadata, self, &src, &dst, 200000, 200000);
	for (k = 0; k < ARRAY_SIZE(lens); k++) {
		ASSERT_EQ(0, hx_span_prep(&sp, src.base + 1, dst.base + 3,
					  lens[k], 3, 64));
		hx_xfer_init(&x, src.reg.key, 1, dst.reg.key, 3, lens[k], 0);
		x.done = ~0ULL;
		x.engine = 77;
		ASSERT_EQ(0, hx_xfer(self->fd, self->r, &x, &done))
			TH_LOG("garbage in the output fields must be ignored");
		ASSERT_EQ(lens[k], done);
		if (!variant->uring)
			ASSERT_TRUE(x.engine >= HCOMM_ENGINE_INLINE &&
				    x.engine <= HCOMM_ENGINE_CPU)
				TH_LOG("engine %u", x.engine);
		ASSERT_TRUE(hx_span_check(&sp, lens[k], why, sizeof(why)))
			TH_LOG("%s", why);
		hx_span_free(&sp);
	}
	free_bufs(_metadata, self, &src, &dst);
}

/*
 * Source and destination overlapping in one region: content undefined,
 * but the command succeeds and nothing outside the range changes.
 */
TEST_F(hcomm, xfer_overlap)
{
	static const struct { uint64_t soff, doff, len; } c[] = {
		{ 0, 100, 10000 }, { 5000, 4000, 8000 }, { 77, 77, 3000 },
	};
	size_t len = 64 * KiB;
	struct hcomm_stats s0, s1;
	struct hx_buf b;
	struct hcomm_xfer x;
	unsigned int k;
	uint64_t done, bytes = 0, inl = 0;
	char *save;
	size_t d;

	XFER_SETUP();
	ASSERT_EQ(0, hx_buf_alloc(&b, 0x31, len));
	hx_fill(b.map, b.map_len, 5);
	ASSERT_EQ(0, hx_buf_reg(self->fd, self->r, &b, ACC_W, NOCACHE));
	save = malloc(b.map_len);
	ASSERT_NE(NULL, save);

	ASSERT_STATS(s0);
	for (k = 0; k < ARRAY_SIZE(c); k++) {
		uint64_t lo = c[k].doff, hi = c[k].doff + c[k].len;

		memcpy(save, b.map, b.map_len);
		hx_xfer_init(&x, b.reg.key, c[k].soff, b.reg.key, c[k].doff,
			     c[k].len, 0);
		ASSERT_EQ(0, hx_xfer(self->fd, self->r, &x, &done))
			TH_LOG("overlapping XFER %llu -> %llu, %llu bytes",
			       ULL(c[k].soff), ULL(c[k].doff), ULL(c[k].len));
		ASSERT_EQ(c[k].len, done);
		d = hx_first_diff(b.map, save, (b.base - b.map) + lo);
		ASSERT_EQ(SIZE_MAX, d) TH_LOG("byte %zu before the destination "
					      "range changed", d);
		d = hx_first_diff(b.base + hi, save + (b.base - b.map) + hi,
				  b.map_len - (b.base - b.map) - hi);
		ASSERT_EQ(SIZE_MAX, d) TH_LOG("byte %zu after the destination "
					      "range changed", d);
		bytes += c[k].len;
		inl += c[k].len <= self->info.max_inline;
	}
	SETTLE(&s0, &s1);
	check_xfer_stats(_metadata, variant->uring, &s0, &s1, ARRAY_SIZE(c),
			 inl, bytes, 0);
	free(save);
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, b.reg.region));
	hx_buf_free(&b);
}

/*
 * Doorbell mapping: the whole array or a page of it, zero at first, the
 * same memory in every mapping; larger than the array or MAP_PRIVATE is
 * EINVAL; a fork() child does not inherit it.
 */
TEST_F(hcomm, doorbell_mmap)
{
	struct hcomm_stats s0, s1;
	uint64_t *db, *db1;
	size_t full;
	void *p;
	pid_t pid;
	int st;
	char sb[32];

	XFER_SETUP();
	ASSERT_STATS(s0);
	db = map_doorbells(_metadata, self, &full);
	ASSERT_NE(NULL, db);
	ASSERT_TRUE(all_zero(db, (size_t)self->info.nr_doorbells * 8))
		TH_LOG("doorbells must start at zero");
	db1 = hx_db_map(self->fd, PG);
	ASSERT_NE(NULL, db1) TH_LOG("one page of doorbells: %s",
				    strerror(errno));
	__atomic_store_n(&db[3], 42, __ATOMIC_RELEASE);
	ASSERT_EQ(42, hx_db_load(db1, 3))
		TH_LOG("two mappings of the doorbells are not the same memory");
	__atomic_store_n(&db1[3], 0, __ATOMIC_RELEASE);
	ASSERT_EQ(0, hx_db_load(db, 3));

	p = mmap(NULL, full + PG, PROT_READ | PROT_WRITE, MAP_SHARED,
		 self->fd, HCOMM_MMAP_DOORBELLS);
	ASSERT_EQ(MAP_FAILED, p) TH_LOG("a mapping a page beyond the %u "
					"doorbells was accepted",
					self->info.nr_doorbells);
	ASSERT_EQ(EINVAL, errno) TH_LOG("too large: %s, want EINVAL",
					strerror(errno));
	p = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, self->fd,
		 HCOMM_MMAP_DOORBELLS);
	ASSERT_EQ(MAP_FAILED, p) TH_LOG("MAP_PRIVATE doorbells accepted");
	ASSERT_EQ(EINVAL, errno) TH_LOG("MAP_PRIVATE: %s, want EINVAL",
					strerror(errno));

	/* not inherited, and MADV_DOFORK cannot make it so */
	ASSERT_NE(0, madvise(db, full, MADV_DOFORK))
		TH_LOG("madvise(MADV_DOFORK) on the doorbells succeeded");
	ASSERT_EQ(EINVAL, errno);
	/* the child faults on the address */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct rlimit nocore = { 0, 0 };

		setrlimit(RLIMIT_CORE, &nocore);
		signal(SIGSEGV, SIG_DFL);
		if (hx_db_load(db, 0) == 0x5a5a)
			_exit(2);
		_exit(1);
	}
	ASSERT_EQ(0, hx_wait_child(pid, 60000, &st));
	ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV)
		TH_LOG("a fork() child read the doorbells (%s), want SIGSEGV: "
		       "the mapping must not be inherited",
		       hx_status_str(st, sb, sizeof(sb)));

	ASSERT_EQ(0, munmap(db1, PG));
	ASSERT_EQ(0, munmap(db, full));
	ASSERT_STATS(s1);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1))
		hcomm_gauges_dump(stderr, "after mmap", &s0, &s1);
}

/*
 * DB_ADD and DB_SET publish into the caller's doorbells once the data is
 * there; a transfer of 0 bytes is a pure signal; userspace stores are the
 * base the next DB_ADD adds to; the last index works; DB_REMOTE on the
 * caller's own destination signals the caller.
 */
TEST_F(hcomm, doorbell_signal)
{
	uint32_t last = self->info.nr_doorbells - 1, k;
	struct hx_buf src, dst;
	uint64_t *db;
	size_t full;

	XFER_SETUP();
	db = map_doorbells(_metadata, self, &full);
	ASSERT_NE(NULL, db);
	two_bufs(_metadata, self, &src, &dst, 4 * MiB + PG, 4 * MiB + 2 * PG);

	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 1, .doff = 3, .len = 4 * MiB,
				   .flags = NO_INLINE | DB_ADD,
				   .db_index = 5, .db_value = 3 });
	ASSERT_EQ(3, hx_db_load(db, 5)) TH_LOG("DB_ADD 3 on a zero doorbell");
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 5, .doff = 7, .len = MiB + 1,
				   .flags = DB_ADD, .db_index = 5,
				   .db_value = 4 });
	ASSERT_EQ(7, hx_db_load(db, 5)) TH_LOG("DB_ADD 4 on 3");

	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 9, .doff = 11, .len = 100,
				   .flags = DB_SET, .db_index = 6,
				   .db_value = 0xfeedface00000001ULL });
	ASSERT_EQ(0xfeedface00000001ULL, hx_db_load(db, 6));
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 13, .doff = 15, .len = 100,
				   .flags = DB_SET, .db_index = 6,
				   .db_value = 2 });
	ASSERT_EQ(2, hx_db_load(db, 6)) TH_LOG("DB_SET stores, even lower");

	/* pure signals: nothing copied, the doorbell moves */
	__atomic_store_n(&db[7], 100, __ATOMIC_RELEASE);
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 17, .doff = 19, .len = 0,
				   .flags = DB_ADD, .db_index = 7,
				   .db_value = 5 });
	ASSERT_EQ(105, hx_db_load(db, 7))
		TH_LOG("DB_ADD 5 after userspace stored 100");
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 21, .doff = 23, .len = 0,
				   .flags = DB_ADD | NO_INLINE, .db_index = 8,
				   .db_value = 1 });
	ASSERT_EQ(1, hx_db_load(db, 8));
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 25, .doff = 27, .len = 0,
				   .flags = DB_SET, .db_index = last,
				   .db_value = 9 });
	ASSERT_EQ(9, hx_db_load(db, last)) TH_LOG("last doorbell %u", last);

	/* DB_REMOTE: the destination's owner is the caller */
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 29, .doff = 31, .len = 16,
				   .flags = DB_ADD | HCOMM_XFER_DB_REMOTE,
				   .db_index = 14, .db_value = 2 });
	ASSERT_EQ(2, hx_db_load(db, 14));

	for (k = 0; k < self->info.nr_doorbells; k++) {
		if (k == 5 || k == 6 || k == 7 || k == 8 || k == 14 ||
		    k == last)
			continue;
		ASSERT_EQ(0, hx_db_load(db, k)) TH_LOG("doorbell %u touched", k);
	}
	free_bufs(_metadata, self, &src, &dst);
	ASSERT_EQ(0, munmap(db, full));
}

/* ------------------------------------------------------------------ */
/* XFER_BATCH                                                          */
/* ------------------------------------------------------------------ */

#define BATCH_SETUP() do { \
	XFER_SETUP(); \
	if (!(self->info.features & HCOMM_FEAT_XFER_BATCH)) \
		SKIP(return, "module without HCOMM_FEAT_XFER_BATCH"); \
} while (0)

/* XFER_BATCH of @n descriptors; *done from the ioctl or big_cqe[0]. */
static int batch_submit(FIXTURE_DATA(hcomm) *self, const struct hcomm_xfer *d,
			uint32_t n, uint32_t *done)
{
	struct hcomm_xfer_batch b;
	struct hx_cqe c;
	int ret;

	memset(&b, 0, sizeof(b));
	b.descs = (uintptr_t)d;
	b.count = n;
	b.done = 0xdeadbeef;	/* ioctl: must be overwritten */
	c.done = 0xdeadbeef;
	ret = hx_cmd(self->fd, self->r, HCOMM_CMD_XFER_BATCH, &b, &c);
	*done = self->r ? (uint32_t)c.done : b.done;
	return ret;
}

/*
 * @n descriptors of 1 .. @lmax bytes from odd source offsets to
 * destinations one byte apart, every 7th with DB_ADD 1 on doorbell 3;
 * *bytes: their sum.  Applies each to @want (the destination image).
 */
static void batch_build(struct hcomm_xfer *d, uint32_t n, uint32_t lmax,
			const struct hx_buf *src, const struct hx_buf *dst,
			char *want, uint64_t *bytes)
{
	uint64_t doff = 1, len;
	uint32_t i;

	*bytes = 0;
	for (i = 0; i < n; i++) {
		len = lmax ? 1 + (i * 37) % lmax : 0;
		hx_xfer_init(&d[i], src->reg.key, 1 + 2 * ((i * 389) % 1500),
			     dst->reg.key, doff, len, 0);
		if (i % 7 == 3) {
			d[i].flags = DB_ADD;
			d[i].db_index = 3;
			d[i].db_value = 1;
		}
		memcpy(want + doff, src->base + d[i].src_off, len);
		doff += len + 1;
		*bytes += len;
	}
}

/*
 * 1000 small transfers in one command: every byte of the destination
 * region as the transfers in order make it, the doorbell moved once per
 * signalling descriptor, the counters: one command, 1000 inline copies.
 */
TEST_F(hcomm, xfer_batch)
{
	const uint32_t n = 1000;
	uint32_t lmax = self->info.max_inline < 120 ? self->info.max_inline :
						      120;
	struct hcomm_stats s0, s1;
	struct hx_buf src, dst;
	struct hcomm_xfer *d;
	uint64_t bytes, *db;
	uint32_t done, sigs;
	size_t full;
	char *want;
	int ret;

	BATCH_SETUP();
	db = map_doorbells(_metadata, self, &full);
	ASSERT_NE(NULL, db);
	two_bufs(_metadata, self, &src, &dst, 4 * PG, n * 122 + PG);
	d = calloc(n, sizeof(*d));
	want = malloc(dst.len);
	ASSERT_TRUE(d && want);
	memcpy(want, dst.base, dst.len);
	batch_build(d, n, lmax, &src, &dst, want, &bytes);
	sigs = (n + 3) / 7;

	ASSERT_STATS(s0);
	ret = batch_submit(self, d, n, &done);
	ASSERT_EQ(0, ret) TH_LOG("XFER_BATCH of %u: %d (%s)", n, ret,
				 strerror(-ret));
	ASSERT_EQ(n, done);
	ASSERT_EQ(0, memcmp(want, dst.base, dst.len))
		TH_LOG("destination differs from the %u transfers in order", n);
	ASSERT_EQ(sigs, hx_db_load(db, 3));
	SETTLE(&s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_xfer_batch, 1);
	ASSERT_DELTA(s0, s1, cmd_xfer, 0);
	ASSERT_DELTA(s0, s1, xfer_inline, n);
	ASSERT_DELTA(s0, s1, xfer_async, 0);
	ASSERT_DELTA(s0, s1, xfer_bytes, bytes);
	ASSERT_DELTA(s0, s1, db_signals, sigs);
	ASSERT_DELTA(s0, s1, cmd_errors, 0);

	/* a batch of one, the same descriptor twice, a pure signal */
	ASSERT_EQ(0, batch_submit(self, &d[3], 1, &done));
	ASSERT_EQ(1, done);
	d[1] = d[0];
	hx_xfer_init(&d[2], src.reg.key, 0, dst.reg.key, 0, 0, DB_ADD);
	d[2].db_index = 3;
	d[2].db_value = 10;
	ASSERT_EQ(0, batch_submit(self, d, 3, &done));
	ASSERT_EQ(3, done);
	ASSERT_EQ(sigs + 11, hx_db_load(db, 3));
	ASSERT_EQ(0, memcmp(want, dst.base, dst.len));

	free(want);
	free(d);
	free_bufs(_metadata, self, &src, &dst);
	ASSERT_EQ(0, munmap(db, full));
}

/*
 * The batch's own fields, and a descriptor that fails: the ones before
 * it landed, it and the ones after it did nothing, done is its index.
 */
TEST_F(hcomm, xfer_batch_errors)
{
	const uint32_t n = 20;
	uint32_t mi = self->info.max_inline, done, bad;
	struct hcomm_xfer_batch b;
	struct hcomm_stats s0, s1;
	struct hx_buf src, dst;
	struct hcomm_xfer *d;
	uint64_t bytes;
	char *want, *orig;
	int ret, k;

	BATCH_SETUP();
	if (mi < 16)
		SKIP(return, "max_inline %u: no room for the transfers", mi);
	two_bufs(_metadata, self, &src, &dst, 4 * PG, 4 * PG);
	d = calloc(HCOMM_BATCH_MAX + 2, sizeof(*d));
	want = malloc(dst.len);
	orig = malloc(dst.len);
	ASSERT_TRUE(d && want && orig);
	memcpy(orig, dst.base, dst.len);

	ASSERT_STATS(s0);
	/* count 0, above the maximum; descs misaligned, NULL; flags */
	ASSERT_EQ(-EINVAL, batch_submit(self, d, 0, &done));
	ASSERT_EQ(-EINVAL, batch_submit(self, d, HCOMM_BATCH_MAX + 1, &done));
	ASSERT_EQ(-EINVAL, batch_submit(self, (void *)((char *)d + 4), 1,
					&done));
	ASSERT_EQ(-EFAULT, batch_submit(self, NULL, 1, &done));
	ASSERT_EQ(0, done);
	memset(&b, 0, sizeof(b));
	b.descs = (uintptr_t)d;
	b.count = 1;
	b.flags = 1;
	ASSERT_EQ(-EINVAL, hx_cmd(self->fd, self->r, HCOMM_CMD_XFER_BATCH, &b,
				  NULL));
	b.flags = 0;
	b.reserved[1] = 1;
	ASSERT_EQ(-EINVAL, hx_cmd(self->fd, self->r, HCOMM_CMD_XFER_BATCH, &b,
				  NULL));
	ASSERT_EQ(0, memcmp(orig, dst.base, dst.len));

	/* descriptor bad goes wrong in each way; the others are right */
	for (k = 0; k < 9; k++) {
		int want_err = -EINVAL;

		memcpy(dst.base, orig, dst.len);
		memcpy(want, orig, dst.len);
		bad = (uint32_t)(k * 7) % n;
		batch_build(d, n, 16, &src, &dst, want, &bytes);
		/* the image of the ones before bad only */
		memcpy(want + d[bad].dst_off, orig + d[bad].dst_off,
		       dst.len - d[bad].dst_off);
		switch (k) {
		case 0: d[bad].src_key ^= 0x5a5a; want_err = -ENOENT; break;
		case 1: d[bad].len = mi + 1; break;
		case 2: d[bad].tag = 1; break;
		case 3: d[bad].flags |= NO_INLINE; break;
		case 4: d[bad].dst_off = dst.len - d[bad].len + 1;
			want_err = -ERANGE; break;
		case 5: d[bad].reserved0 = 1; break;
		case 6: d[bad].flags = DB_ADD | DB_SET; break;
		case 7: d[bad].flags = DB_ADD;
			d[bad].db_index = self->info.nr_doorbells; break;
		case 8: d[bad].dst_key = src.reg.key;
			want_err = -EACCES; break;
		}
		ret = batch_submit(self, d, n, &done);
		ASSERT_EQ(want_err, ret) TH_LOG("case %d, descriptor %u: %d",
						k, bad, ret);
		ASSERT_EQ(bad, done) TH_LOG("case %d: done %u, want %u", k,
					    done, bad);
		ASSERT_EQ(0, memcmp(want, dst.base, dst.len))
			TH_LOG("case %d: the %u before descriptor %u must have "
			       "landed, nothing after", k, bad, bad);
	}
	SETTLE(&s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_xfer_batch, 15);
	ASSERT_DELTA(s0, s1, cmd_errors, 15);
	ASSERT_DELTA(s0, s1, xfer_async, 0);

	free(orig);
	free(want);
	free(d);
	free_bufs(_metadata, self, &src, &dst);
}

/* A DB_WAIT whose condition already holds completes at once. */
TEST_F(hcomm, db_wait_satisfied)
{
	static const uint64_t values[] = { 0, 3, 5 };
	struct hcomm_stats s0, s1;
	struct hcomm_db_wait w;
	struct hx_buf src, dst;
	unsigned int k;
	uint64_t *db;
	size_t full;
	int ret;

	XFER_SETUP();
	db = map_doorbells(_metadata, self, &full);
	ASSERT_NE(NULL, db);
	two_bufs(_metadata, self, &src, &dst, PG, PG);
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 1, .doff = 1, .len = 8,
				   .flags = DB_SET, .db_index = 9,
				   .db_value = 5 });

	ASSERT_STATS(s0);
	for (k = 0; k < ARRAY_SIZE(values); k++) {
		hx_db_wait_init(&w, 9, values[k], 1, 0);
		ret = hx_cmd(self->fd, self->r, HCOMM_CMD_DB_WAIT, &w, NULL);
		ASSERT_EQ(0, ret) TH_LOG("DB_WAIT for >= %llu on a doorbell at "
					 "5: %d (%s)", ULL(values[k]), ret,
					 strerror(-ret));
		if (!variant->uring)
			ASSERT_EQ(5, w.current_value);
	}
	ASSERT_STATS(s1);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1))
		hcomm_gauges_dump(stderr, "satisfied waits", &s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_db_wait, ARRAY_SIZE(values));
	ASSERT_DELTA(s0, s1, cmd_errors, 0);
	free_bufs(_metadata, self, &src, &dst);
	ASSERT_EQ(0, munmap(db, full));
}

/* timeout_ns: -ETIME, the doorbell and the gauges unchanged. */
TEST_F(hcomm, db_wait_timeout)
{
	struct hcomm_stats s0, s1;
	struct hcomm_db_wait w;
	uint64_t *db;
	size_t full;
	int ret;

	XFER_SETUP();
	db = map_doorbells(_metadata, self, &full);
	ASSERT_NE(NULL, db);
	ASSERT_STATS(s0);
	hx_db_wait_init(&w, 11, 1, 2, 20 * 1000 * 1000);
	ret = hx_cmd(self->fd, self->r, HCOMM_CMD_DB_WAIT, &w, NULL);
	ASSERT_EQ(-ETIME, ret) TH_LOG("DB_WAIT with a 20 ms timeout on a "
				      "doorbell nobody signals: %d (%s)", ret,
				      strerror(-ret));
	if (!variant->uring)
		ASSERT_EQ(0, w.current_value);
	hx_db_wait_init(&w, 12, ~0ULL, 3, 1);
	ret = hx_cmd(self->fd, self->r, HCOMM_CMD_DB_WAIT, &w, NULL);
	ASSERT_EQ(-ETIME, ret) TH_LOG("1 ns timeout: %d", ret);
	SETTLE(&s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_db_wait, 2);
	ASSERT_DELTA(s0, s1, db_signals, 0);
	ASSERT_EQ(0, hx_db_load(db, 11));
	ASSERT_EQ(0, munmap(db, full));
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * A short timeout ends soon after it is due, not at the next timer tick
 * (4 ms with HZ=250): the median of PRECISE_N DB_WAITs of 200 us, each
 * never shorter than its timeout, is at most twice the median of as many
 * nanosleep()s of 200 us in the same run (a high-resolution timer's
 * sleep on this machine, under this load), plus 1 ms.  The wait ends in
 * a work item that the timer queues: one wake-up more than a sleep, which
 * a debug kernel under emulation makes as long as the sleep itself (3.3
 * against 4.8 ms there).
 */
#define PRECISE_N	31
#define PRECISE_NS	200000

TEST_F(hcomm, db_wait_timeout_precise)
{
	int64_t wait[PRECISE_N], sleep[PRECISE_N], t;
	struct timespec ts = { 0, PRECISE_NS };
	struct hcomm_db_wait w;
	int i, ret;

	XFER_SETUP();
	for (i = 0; i < PRECISE_N; i++) {
		hx_db_wait_init(&w, 13, 1, 4, PRECISE_NS);
		t = now_ns();
		ret = hx_cmd(self->fd, self->r, HCOMM_CMD_DB_WAIT, &w, NULL);
		wait[i] = now_ns() - t;
		ASSERT_EQ(-ETIME, ret) TH_LOG("DB_WAIT %d: %d", i, ret);
		ASSERT_LE(PRECISE_NS, wait[i]) TH_LOG("DB_WAIT of %d ns "
						      "ended after %lld ns",
						      PRECISE_NS,
						      (long long)wait[i]);
		t = now_ns();
		ASSERT_EQ(0, nanosleep(&ts, NULL));
		sleep[i] = now_ns() - t;
	}
	qsort(wait, PRECISE_N, sizeof(wait[0]), cmp_i64);
	qsort(sleep, PRECISE_N, sizeof(sleep[0]), cmp_i64);
	TH_LOG("timeout %d us: DB_WAIT median %lld us (%lld .. %lld), "
	       "nanosleep median %lld us", PRECISE_NS / 1000,
	       (long long)wait[PRECISE_N / 2] / 1000,
	       (long long)wait[0] / 1000,
	       (long long)wait[PRECISE_N - 1] / 1000,
	       (long long)sleep[PRECISE_N / 2] / 1000);
	ASSERT_GT(2 * sleep[PRECISE_N / 2] + 1000000, wait[PRECISE_N / 2])
		TH_LOG("a DB_WAIT's timeout of %d us ended %lld us late "
		       "(median), a nanosleep %lld us",
		       PRECISE_NS / 1000,
		       (long long)(wait[PRECISE_N / 2] - PRECISE_NS) / 1000,
		       (long long)(sleep[PRECISE_N / 2] - PRECISE_NS) / 1000);
}

/* A DB_WAIT (or DB_WAIT_ANY: @any) parked through the variant's transport. */
struct waiter {
	pthread_t th;		/* ioctl: the thread blocked in DB_WAIT */
	bool thread;
	bool any;
	int fd;
	int ret;
	uint64_t done;		/* uring: big_cqe[0] of its CQE */
	struct hcomm_db_wait w;
	struct hcomm_db_wait_any a;
};

static unsigned int waiter_cmd(const struct waiter *wt)
{
	return wt->any ? HCOMM_CMD_DB_WAIT_ANY : HCOMM_CMD_DB_WAIT;
}

static void *waiter_thread(void *p)
{
	struct waiter *wt = p;
	void *arg = wt->any ? (void *)&wt->a : (void *)&wt->w;

	wt->ret = ioctl(wt->fd, waiter_cmd(wt), arg) < 0 ? -errno : 0;
	return NULL;
}

/* ioctl: a thread that blocks in DB_WAIT; uring: an SQE, user_data @ud. */
static int waiter_start(FIXTURE_DATA(hcomm) *self, struct waiter *wt,
			uint64_t ud)
{
	wt->fd = self->fd;
	wt->ret = HC_XPORT_ERR;
	wt->done = HX_NO_DONE;
	wt->thread = !self->r;
	if (wt->thread)
		return -pthread_create(&wt->th, NULL, waiter_thread, wt);
	if (!hx_prep_cmd(self->r, self->fd, waiter_cmd(wt),
			 wt->any ? (void *)&wt->a : (void *)&wt->w, ud))
		return -EBUSY;
	return io_uring_submit(self->r) == 1 ? 0 : -EIO;
}

/* ioctl: join the thread (at most 60 s) and return what DB_WAIT gave. */
static int waiter_join(struct waiter *wt)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 60;
	if (pthread_timedjoin_np(wt->th, NULL, &ts))
		return HC_XPORT_ERR - 10;
	return wt->ret;
}

/*
 * Signal doorbell @index by DB_ADD @add with a 64-byte XFER (user_data
 * 100 on the ring) and collect the end of @wt: ioctl joins the thread;
 * uring reaps both CQEs.  Checks both results (wait: @want) and the data.
 */
static void signal_and_finish(struct __test_metadata *_metadata,
			      FIXTURE_DATA(hcomm) *self, struct hx_buf *src,
			      struct hx_buf *dst, uint32_t index,
			      uint64_t add, struct waiter *wt, uint64_t ud,
			      int want)
{
	struct hcomm_xfer x;
	struct hx_span sp;
	struct hx_cqe c[2];
	char why[256];
	int i, ret;

	ASSERT_EQ(0, hx_span_prep(&sp, src->base + 1, dst->base + 65, 64,
				  64, 64));
	hx_xfer_init(&x, src->reg.key, 1, dst->reg.key, 65, 64, DB_ADD);
	x.db_index = index;
	x.db_value = add;
	if (wt->thread) {
		ret = hx_xfer(self->fd, NULL, &x, NULL);
		ASSERT_EQ(0, ret) TH_LOG("signalling XFER: %s", strerror(-ret));
		ret = waiter_join(wt);
		ASSERT_EQ(want, ret) TH_LOG("parked DB_WAIT ended with %d (%s), "
					    "want %d", ret, strerror(-ret),
					    want);
	} else {
		ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_XFER,
					    &x, 100));
		ASSERT_EQ(1, io_uring_submit(self->r));
		ASSERT_EQ(2, hx_reap(self->r, 2, REAP_MS, c))
			TH_LOG("the XFER and the DB_WAIT it satisfies must "
			       "both complete");
		i = hx_find_cqe(c, 2, 100);
		ASSERT_LE(0, i);
		ASSERT_EQ(0, c[i].res) TH_LOG("signalling XFER: %d", c[i].res);
		ASSERT_EQ(64, c[i].done);
		i = hx_find_cqe(c, 2, ud);
		ASSERT_LE(0, i) TH_LOG("no CQE for the DB_WAIT (user_data %llu)",
				       ULL(ud));
		ASSERT_EQ(want, c[i].res) TH_LOG("parked DB_WAIT ended with %d, "
						 "want %d", c[i].res, want);
		wt->done = c[i].done;
	}
	ASSERT_TRUE(hx_span_check(&sp, 64, why, sizeof(why))) TH_LOG("%s", why);
	hx_span_free(&sp);
}

/* No CQE may be pending on the ring (nothing can have completed). */
static void no_cqe(struct __test_metadata *_metadata, struct io_uring *r,
		   const char *what)
{
	struct io_uring_cqe *cqe;

	if (!r)
		return;
	ASSERT_NE(0, io_uring_peek_cqe(r, &cqe))
		TH_LOG("%s: unexpected CQE user_data %llu res %d", what,
		       ULL(cqe->user_data), cqe->res);
}

/*
 * Parked DB_WAITs are woken by XFER signals, each when its value is
 * reached: >= 1 by the first DB_ADD 1, >= 2 only by the second.
 */
TEST_F(hcomm, db_wait_parked)
{
	struct hcomm_stats s0, s1, s;
	struct waiter w1 = {}, w2 = {};
	struct hx_buf src, dst;
	uint64_t *db;
	size_t full;
	int ret;

	XFER_SETUP();
	db = map_doorbells(_metadata, self, &full);
	ASSERT_NE(NULL, db);
	two_bufs(_metadata, self, &src, &dst, PG, PG);
	ASSERT_STATS(s0);

	hx_db_wait_init(&w1.w, 12, 1, 21, 0);
	hx_db_wait_init(&w2.w, 12, 2, 22, 0);
	ASSERT_EQ(0, waiter_start(self, &w1, 1));
	ASSERT_EQ(0, waiter_start(self, &w2, 2));
	ret = hx_stat_wait(HX_STAT(waits_pending), s0.waits_pending + 2,
			   SETTLE_MS, &s);
	ASSERT_EQ(0, ret) TH_LOG("two DB_WAITs on an unsignalled doorbell: "
				 "waits_pending %llu, want %llu",
				 ULL(s.waits_pending),
				 ULL(s0.waits_pending + 2));
	no_cqe(_metadata, self->r, "two DB_WAITs parked");

	signal_and_finish(_metadata, self, &src, &dst, 12, 1, &w1, 1, 0);
	if (!variant->uring)
		ASSERT_EQ(1, w1.w.current_value);
	ret = hx_stat_wait(HX_STAT(waits_pending), s0.waits_pending + 1,
			   SETTLE_MS, &s);
	ASSERT_EQ(0, ret) TH_LOG("the wait for >= 2 must stay parked at 1: "
				 "waits_pending %llu", ULL(s.waits_pending));
	no_cqe(_metadata, self->r, "doorbell at 1, wait for 2");
	if (!variant->uring)
		ASSERT_EQ(EBUSY, pthread_tryjoin_np(w2.th, NULL))
			TH_LOG("the DB_WAIT for >= 2 returned at 1");

	signal_and_finish(_metadata, self, &src, &dst, 12, 1, &w2, 2, 0);
	if (!variant->uring)
		ASSERT_EQ(2, w2.w.current_value);
	ASSERT_EQ(2, hx_db_load(db, 12));

	SETTLE(&s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_db_wait, 2);
	ASSERT_DELTA(s0, s1, db_wakeups, 2);
	ASSERT_DELTA(s0, s1, db_signals, 2);
	check_xfer_stats(_metadata, variant->uring, &s0, &s1, 2,
			 self->info.max_inline >= 64 ? 2 : 0, 128, 2);
	free_bufs(_metadata, self, &src, &dst);
	ASSERT_EQ(0, munmap(db, full));
}

/*
 * CANCEL(@tag) through the variant's transport (user_data 3 on the ring)
 * must end the parked wait @wt (user_data 1) with ECANCELED and count 1;
 * *@done: uring, big_cqe[0] of the wait's CQE.
 */
static void cancel_parked(struct __test_metadata *_metadata,
			  FIXTURE_DATA(hcomm) *self, struct waiter *wt,
			  uint64_t tag, uint64_t *done)
{
	struct hcomm_cancel c;
	struct hx_cqe cq[2];
	int i, ret;

	memset(&c, 0, sizeof(c));
	c.tag = tag;
	c.count = 1000;
	if (wt->thread) {
		ASSERT_EQ(0, ioctl(self->fd, HCOMM_CMD_CANCEL, &c))
			TH_LOG("CANCEL: %s", strerror(errno));
		ret = waiter_join(wt);
		ASSERT_EQ(-ECANCELED, ret) TH_LOG("cancelled wait: %d (%s)",
						  ret, strerror(-ret));
	} else {
		ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd,
					    HCOMM_CMD_CANCEL, &c, 3));
		ASSERT_EQ(1, io_uring_submit(self->r));
		ASSERT_EQ(2, hx_reap(self->r, 2, REAP_MS, cq))
			TH_LOG("CANCEL and the wait it ends must complete");
		i = hx_find_cqe(cq, 2, 3);
		ASSERT_LE(0, i);
		ASSERT_EQ(0, cq[i].res);
		i = hx_find_cqe(cq, 2, 1);
		ASSERT_LE(0, i) TH_LOG("no CQE for the cancelled wait");
		ASSERT_EQ(-ECANCELED, cq[i].res);
		*done = cq[i].done;
	}
	ASSERT_EQ(1, c.count) TH_LOG("CANCEL(tag %llu) count %u, want 1",
				     ULL(tag), c.count);
}

/* CANCEL(tag) ends exactly the parked DB_WAIT with that tag. */
TEST_F(hcomm, db_wait_cancel)
{
	struct hcomm_stats s0, s1, s;
	struct waiter w1 = {}, w2 = {};
	struct hx_buf src, dst;
	uint64_t done = 0;
	uint32_t count;
	uint64_t *db;
	size_t full;
	int ret;

	XFER_SETUP();
	db = map_doorbells(_metadata, self, &full);
	ASSERT_NE(NULL, db);
	two_bufs(_metadata, self, &src, &dst, PG, PG);
	ASSERT_STATS(s0);

	hx_db_wait_init(&w1.w, 13, 1, 31, 0);
	hx_db_wait_init(&w2.w, 13, 1, 32, 0);
	ASSERT_EQ(0, waiter_start(self, &w1, 1));
	ASSERT_EQ(0, waiter_start(self, &w2, 2));
	ret = hx_stat_wait(HX_STAT(waits_pending), s0.waits_pending + 2,
			   SETTLE_MS, &s);
	ASSERT_EQ(0, ret) TH_LOG("waits_pending %llu, want %llu",
				 ULL(s.waits_pending),
				 ULL(s0.waits_pending + 2));

	cancel_parked(_metadata, self, &w1, 31, &done);
	ret = hx_stat_wait(HX_STAT(waits_pending), s0.waits_pending + 1,
			   SETTLE_MS, &s);
	ASSERT_EQ(0, ret) TH_LOG("the DB_WAIT with tag 32 must stay parked: "
				 "waits_pending %llu", ULL(s.waits_pending));
	no_cqe(_metadata, self->r, "tag 32 still parked");

	/* nothing with tag 31 is left */
	ASSERT_EQ(0, hx_cancel(self->fd, self->r, 31, 0, &count));
	ASSERT_EQ(0, count);

	signal_and_finish(_metadata, self, &src, &dst, 13, 1, &w2, 2, 0);

	SETTLE(&s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_cancel, 2);
	ASSERT_DELTA(s0, s1, cmd_db_wait, 2);
	ASSERT_DELTA(s0, s1, xfer_cancelled, 0);
	free_bufs(_metadata, self, &src, &dst);
	ASSERT_EQ(0, munmap(db, full));
}

/*
 * Doorbell arguments: index range, DB_ADD with DB_SET, fields without a
 * flag, DB_WAIT flags and reserved words: EINVAL, nothing signalled.
 */
TEST_F(hcomm, db_bad_args)
{
	uint32_t nr = self->info.nr_doorbells;
	struct hcomm_xfer x0;
	struct hcomm_db_wait w0, w;
	struct hx_buf src, dst;
	uint64_t *db;
	size_t full;
	char *save;

	XFER_SETUP();
	db = map_doorbells(_metadata, self, &full);
	ASSERT_NE(NULL, db);
	two_bufs(_metadata, self, &src, &dst, PG, PG);
	save = malloc(dst.map_len);
	ASSERT_NE(NULL, save);
	memcpy(save, dst.map, dst.map_len);
	hx_xfer_init(&x0, src.reg.key, 1, dst.reg.key, 2, 100, 0);

#define XFER_DB_FAILS(...) do { \
	struct hcomm_xfer __x = x0; \
	__VA_ARGS__; \
	cmd_fails(_metadata, self, HCOMM_CMD_XFER, &__x, EINVAL, \
		  #__VA_ARGS__); \
} while (0)
	XFER_DB_FAILS(__x.flags = DB_ADD, __x.db_index = nr, __x.db_value = 1);
	XFER_DB_FAILS(__x.flags = DB_SET, __x.db_index = UINT32_MAX,
		      __x.db_value = 1);
	XFER_DB_FAILS(__x.flags = DB_ADD | NO_INLINE, __x.db_index = nr,
		      __x.db_value = 1);
	XFER_DB_FAILS(__x.flags = DB_ADD | DB_SET, __x.db_index = 1,
		      __x.db_value = 1);
	XFER_DB_FAILS(__x.db_index = 1);
	XFER_DB_FAILS(__x.db_value = 1);
	XFER_DB_FAILS(__x.len = 0, __x.flags = DB_ADD | DB_SET,
		      __x.db_index = 1, __x.db_value = 1);
#undef XFER_DB_FAILS

	hx_db_wait_init(&w0, 1, 1, 1, 1000);
	w = w0;
	w.index = nr;
	cmd_fails(_metadata, self, HCOMM_CMD_DB_WAIT, &w, EINVAL,
		  "DB_WAIT index nr_doorbells");
	w = w0;
	w.index = UINT32_MAX;
	cmd_fails(_metadata, self, HCOMM_CMD_DB_WAIT, &w, EINVAL,
		  "DB_WAIT index UINT32_MAX");
	w = w0;
	w.flags = 1;
	cmd_fails(_metadata, self, HCOMM_CMD_DB_WAIT, &w, EINVAL,
		  "DB_WAIT flags 1");
	w = w0;
	w.reserved[0] = 1;
	cmd_fails(_metadata, self, HCOMM_CMD_DB_WAIT, &w, EINVAL,
		  "DB_WAIT reserved[0]");
	w = w0;
	w.reserved[1] = 1ULL << 63;
	cmd_fails(_metadata, self, HCOMM_CMD_DB_WAIT, &w, EINVAL,
		  "DB_WAIT reserved[1]");

	ASSERT_TRUE(all_zero(db, (size_t)nr * 8))
		TH_LOG("a rejected command signalled a doorbell");
	ASSERT_EQ(SIZE_MAX, hx_first_diff(dst.map, save, dst.map_len))
		TH_LOG("a rejected XFER wrote the destination");
	free(save);
	free_bufs(_metadata, self, &src, &dst);
	ASSERT_EQ(0, munmap(db, full));
}

/* ------------------------------------------------------------------ */
/* DB_WAIT_ANY                                                         */
/* ------------------------------------------------------------------ */

#define ANY_SETUP() do { \
	XFER_SETUP(); \
	if (!(self->info.features & HCOMM_FEAT_DB_WAIT_ANY)) \
		SKIP(return, "module without HCOMM_FEAT_DB_WAIT_ANY"); \
} while (0)

/* A zeroed DB_WAIT_ANY of @n (index, value) pairs, timeout_ns 0 = forever. */
static void any_init(struct hcomm_db_wait_any *a, unsigned int n,
		     const uint32_t *index, const uint64_t *value,
		     uint64_t tag, uint64_t timeout_ns)
{
	unsigned int i;

	memset(a, 0, sizeof(*a));
	a->count = n;
	for (i = 0; i < n; i++) {
		a->index[i] = index[i];
		a->value[i] = value[i];
	}
	a->tag = tag;
	a->timeout_ns = timeout_ns;
}

/* What the variant reports of a DB_WAIT_ANY's ready bits. */
static uint64_t any_ready(const FIXTURE_VARIANT(hcomm) *variant,
			  const struct hcomm_db_wait_any *a,
			  const struct hx_cqe *c)
{
	return variant->uring ? c->done : a->ready;
}

/*
 * Arguments: count 0 and above HCOMM_DB_WAIT_ANY_MAX, flags and reserved
 * words, an index out of range at any place, a non-zero entry past count:
 * EINVAL, nothing parked, no doorbell written.
 */
TEST_F(hcomm, db_wait_any_bad_args)
{
	uint32_t nr = self->info.nr_doorbells;
	struct hcomm_db_wait_any a0, a;
	uint64_t *db;
	size_t full;

	ANY_SETUP();
	db = map_doorbells(_metadata, self, &full);
	ASSERT_NE(NULL, db);
	any_init(&a0, 2, (uint32_t[]){ 1, 2 }, (uint64_t[]){ 1, 1 }, 1, 1000);

#define ANY_FAILS(...) do { \
	a = a0; \
	__VA_ARGS__; \
	cmd_fails(_metadata, self, HCOMM_CMD_DB_WAIT_ANY, &a, EINVAL, \
		  #__VA_ARGS__); \
} while (0)
	ANY_FAILS(a.count = 0);
	ANY_FAILS(a.count = HCOMM_DB_WAIT_ANY_MAX + 1);
	ANY_FAILS(a.count = UINT32_MAX);
	ANY_FAILS(a.flags = 1);
	ANY_FAILS(a.flags = 1U << 31);
	ANY_FAILS(a.reserved0 = 1);
	ANY_FAILS(a.reserved[0] = 1);
	ANY_FAILS(a.reserved[1] = 1ULL << 63);
	ANY_FAILS(a.index[0] = nr);
	ANY_FAILS(a.index[1] = nr);
	ANY_FAILS(a.index[1] = UINT32_MAX);
	ANY_FAILS(a.count = HCOMM_DB_WAIT_ANY_MAX,
		  a.index[HCOMM_DB_WAIT_ANY_MAX - 1] = nr);
	ANY_FAILS(a.index[2] = 1);
	ANY_FAILS(a.value[2] = 1);
	ANY_FAILS(a.value[HCOMM_DB_WAIT_ANY_MAX - 1] = 1ULL << 63);
	ANY_FAILS(a.count = 1, a.index[1] = 2);
#undef ANY_FAILS
	ASSERT_TRUE(all_zero(db, (size_t)nr * 8))
		TH_LOG("a rejected command wrote a doorbell");
	ASSERT_EQ(0, munmap(db, full));
}

/*
 * A DB_WAIT_ANY whose condition already holds for some of its doorbells
 * completes at once and names exactly those; the same doorbell may appear
 * twice with different values.
 */
TEST_F(hcomm, db_wait_any_satisfied)
{
	struct hcomm_stats s0, s1;
	struct hcomm_db_wait_any a;
	struct hx_buf src, dst;
	struct hx_cqe c;
	uint64_t *db;
	size_t full;
	int ret;

	ANY_SETUP();
	db = map_doorbells(_metadata, self, &full);
	ASSERT_NE(NULL, db);
	two_bufs(_metadata, self, &src, &dst, PG, PG);
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 1, .doff = 1, .len = 8,
				   .flags = DB_SET, .db_index = 21,
				   .db_value = 5 });

	ASSERT_STATS(s0);
	/* 20 >= 1 no, 21 >= 5 yes, 21 >= 6 no, 21 >= 0 yes */
	any_init(&a, 4, (uint32_t[]){ 20, 21, 21, 21 },
		 (uint64_t[]){ 1, 5, 6, 0 }, 1, 0);
	ret = hx_cmd(self->fd, self->r, HCOMM_CMD_DB_WAIT_ANY, &a, &c);
	ASSERT_EQ(0, ret) TH_LOG("DB_WAIT_ANY with doorbell 21 at 5: %d (%s)",
				 ret, strerror(-ret));
	ASSERT_EQ(0xa, any_ready(variant, &a, &c));
	/* one doorbell, as DB_WAIT would */
	any_init(&a, 1, (uint32_t[]){ 21 }, (uint64_t[]){ 4 }, 1, 0);
	ret = hx_cmd(self->fd, self->r, HCOMM_CMD_DB_WAIT_ANY, &a, &c);
	ASSERT_EQ(0, ret);
	ASSERT_EQ(0x1, any_ready(variant, &a, &c));
	ASSERT_STATS(s1);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1))
		hcomm_gauges_dump(stderr, "satisfied waits", &s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_db_wait_any, 2);
	ASSERT_DELTA(s0, s1, cmd_db_wait, 0);
	ASSERT_DELTA(s0, s1, cmd_errors, 0);
	ASSERT_EQ(5, hx_db_load(db, 21));
	ASSERT_EQ(0, hx_db_load(db, 20));
	free_bufs(_metadata, self, &src, &dst);
	ASSERT_EQ(0, munmap(db, full));
}

/* timeout_ns: ETIME with no bit set, the gauges back. */
TEST_F(hcomm, db_wait_any_timeout)
{
	struct hcomm_stats s0, s1;
	struct hcomm_db_wait_any a;
	struct hx_cqe c;
	int ret;

	ANY_SETUP();
	ASSERT_STATS(s0);
	any_init(&a, 3, (uint32_t[]){ 22, 23, 22 }, (uint64_t[]){ 1, 1, 2 },
		 2, 20 * 1000 * 1000);
	ret = hx_cmd(self->fd, self->r, HCOMM_CMD_DB_WAIT_ANY, &a, &c);
	ASSERT_EQ(-ETIME, ret) TH_LOG("DB_WAIT_ANY with a 20 ms timeout on "
				      "doorbells nobody signals: %d (%s)",
				      ret, strerror(-ret));
	ASSERT_EQ(0, any_ready(variant, &a, &c));
	SETTLE(&s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_db_wait_any, 1);
	ASSERT_DELTA(s0, s1, db_signals, 0);
}

/*
 * A parked DB_WAIT_ANY is woken by a signal to any of its doorbells, the
 * first to reach its value: here the second of three, after a signal to
 * the third that does not reach its value leaves it parked.  Then one on
 * the same doorbells is woken by the first.
 */
TEST_F(hcomm, db_wait_any_parked)
{
	struct hcomm_stats s0, s1, s;
	struct waiter w1 = { .any = true }, w2 = { .any = true };
	struct hx_buf src, dst;
	struct hcomm_xfer x;
	struct hx_cqe c;
	uint64_t *db;
	size_t full;
	int ret;

	ANY_SETUP();
	db = map_doorbells(_metadata, self, &full);
	ASSERT_NE(NULL, db);
	two_bufs(_metadata, self, &src, &dst, PG, PG);
	ASSERT_STATS(s0);

	any_init(&w1.a, 3, (uint32_t[]){ 30, 31, 32 },
		 (uint64_t[]){ 1, 1, 2 }, 41, 0);
	ASSERT_EQ(0, waiter_start(self, &w1, 1));
	ret = hx_stat_wait(HX_STAT(waits_pending), s0.waits_pending + 1,
			   SETTLE_MS, &s);
	ASSERT_EQ(0, ret) TH_LOG("DB_WAIT_ANY on unsignalled doorbells did not "
				 "park: waits_pending %llu",
				 ULL(s.waits_pending));

	/* doorbell 32 to 1, short of its 2: still parked */
	hx_xfer_init(&x, src.reg.key, 0, dst.reg.key, 0, 0, DB_ADD);
	x.db_index = 32;
	x.db_value = 1;
	if (w1.thread) {
		ASSERT_EQ(0, hx_xfer(self->fd, NULL, &x, NULL));
	} else {
		ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_XFER,
					    &x, 101));
		ASSERT_EQ(1, io_uring_submit(self->r));
		ASSERT_EQ(1, hx_reap(self->r, 1, REAP_MS, &c));
		ASSERT_EQ(101, c.user_data) TH_LOG("the DB_WAIT_ANY ended "
						   "at doorbell 32 = 1 < 2");
		ASSERT_EQ(0, c.res);
	}
	ret = hx_stat_wait(HX_STAT(waits_pending), s0.waits_pending + 1,
			   SETTLE_MS, &s);
	ASSERT_EQ(0, ret) TH_LOG("waits_pending %llu", ULL(s.waits_pending));
	no_cqe(_metadata, self->r, "doorbell 32 at 1, wait for 2");
	if (w1.thread)
		ASSERT_EQ(EBUSY, pthread_tryjoin_np(w1.th, NULL))
			TH_LOG("DB_WAIT_ANY returned at doorbell 32 = 1 < 2");

	/* doorbell 31 to 1: ends it, with bit 1 only */
	signal_and_finish(_metadata, self, &src, &dst, 31, 1, &w1, 1, 0);
	ASSERT_EQ(0x2, w1.thread ? w1.a.ready : w1.done);

	/* the first of the same doorbells wakes the next */
	any_init(&w2.a, 3, (uint32_t[]){ 30, 31, 32 },
		 (uint64_t[]){ 1, 2, 2 }, 42, 0);
	ASSERT_EQ(0, waiter_start(self, &w2, 2));
	ret = hx_stat_wait(HX_STAT(waits_pending), s0.waits_pending + 1,
			   SETTLE_MS, &s);
	ASSERT_EQ(0, ret) TH_LOG("waits_pending %llu", ULL(s.waits_pending));
	signal_and_finish(_metadata, self, &src, &dst, 30, 1, &w2, 2, 0);
	ASSERT_EQ(0x1, w2.thread ? w2.a.ready : w2.done);
	ASSERT_EQ(1, hx_db_load(db, 30));
	ASSERT_EQ(1, hx_db_load(db, 31));
	ASSERT_EQ(1, hx_db_load(db, 32));

	SETTLE(&s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_db_wait_any, 2);
	ASSERT_DELTA(s0, s1, db_wakeups, 2);
	ASSERT_DELTA(s0, s1, db_signals, 3);
	ASSERT_DELTA(s0, s1, cmd_errors, 0);
	free_bufs(_metadata, self, &src, &dst);
	ASSERT_EQ(0, munmap(db, full));
}

/*
 * CANCEL(tag) ends a parked DB_WAIT_ANY (ECANCELED, no bit set) and leaves
 * a DB_WAIT on one of its doorbells parked.
 */
TEST_F(hcomm, db_wait_any_cancel)
{
	struct hcomm_stats s0, s1, s;
	struct waiter w1 = { .any = true }, w2 = {};
	struct hx_buf src, dst;
	uint64_t done = 0;
	uint64_t *db;
	size_t full;
	int ret;

	ANY_SETUP();
	db = map_doorbells(_metadata, self, &full);
	ASSERT_NE(NULL, db);
	two_bufs(_metadata, self, &src, &dst, PG, PG);
	ASSERT_STATS(s0);

	any_init(&w1.a, 2, (uint32_t[]){ 33, 34 }, (uint64_t[]){ 1, 1 }, 51,
		 0);
	hx_db_wait_init(&w2.w, 34, 1, 52, 0);
	ASSERT_EQ(0, waiter_start(self, &w1, 1));
	ASSERT_EQ(0, waiter_start(self, &w2, 2));
	ret = hx_stat_wait(HX_STAT(waits_pending), s0.waits_pending + 2,
			   SETTLE_MS, &s);
	ASSERT_EQ(0, ret) TH_LOG("waits_pending %llu, want %llu",
				 ULL(s.waits_pending),
				 ULL(s0.waits_pending + 2));

	cancel_parked(_metadata, self, &w1, 51, &done);
	ASSERT_EQ(0, w1.thread ? w1.a.ready : done)
		TH_LOG("a cancelled DB_WAIT_ANY names ready doorbells");
	ret = hx_stat_wait(HX_STAT(waits_pending), s0.waits_pending + 1,
			   SETTLE_MS, &s);
	ASSERT_EQ(0, ret) TH_LOG("the DB_WAIT with tag 52 must stay parked: "
				 "waits_pending %llu", ULL(s.waits_pending));
	signal_and_finish(_metadata, self, &src, &dst, 34, 1, &w2, 2, 0);

	SETTLE(&s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_db_wait_any, 1);
	ASSERT_DELTA(s0, s1, cmd_db_wait, 1);
	ASSERT_DELTA(s0, s1, cmd_cancel, 1);
	free_bufs(_metadata, self, &src, &dst);
	ASSERT_EQ(0, munmap(db, full));
}

/* CANCEL with nothing pending: count 0; bad flags/reserved: EINVAL. */
TEST_F(hcomm, cancel_nothing_pending)
{
	struct hcomm_stats s0, s1;
	struct hcomm_cancel c;
	uint32_t count;

	XFER_SETUP();
	ASSERT_STATS(s0);
	ASSERT_EQ(0, hx_cancel(self->fd, self->r, 5, 0, &count));
	ASSERT_EQ(0, count) TH_LOG("count %u with nothing pending", count);
	ASSERT_EQ(0, hx_cancel(self->fd, self->r, 0x1234, HCOMM_CANCEL_ALL,
			       &count));
	ASSERT_EQ(0, count);
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cmd_cancel, 2);
	ASSERT_DELTA(s0, s1, cmd_errors, 0);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1));

	memset(&c, 0, sizeof(c));
	c.flags = 2;
	cmd_fails(_metadata, self, HCOMM_CMD_CANCEL, &c, EINVAL,
		  "CANCEL flags 2");
	memset(&c, 0, sizeof(c));
	c.flags = 1U << 31;
	cmd_fails(_metadata, self, HCOMM_CMD_CANCEL, &c, EINVAL,
		  "CANCEL flags 1 << 31");
	memset(&c, 0, sizeof(c));
	c.reserved[0] = 1;
	cmd_fails(_metadata, self, HCOMM_CMD_CANCEL, &c, EINVAL,
		  "CANCEL reserved[0]");
	memset(&c, 0, sizeof(c));
	c.reserved[1] = 1;
	cmd_fails(_metadata, self, HCOMM_CMD_CANCEL, &c, EINVAL,
		  "CANCEL reserved[1]");
}

/* FENCE with nothing or only finished transfers before it: 0 at once. */
TEST_F(hcomm, fence_idle)
{
	struct hcomm_stats s0, s1;
	struct hcomm_fence f;
	struct hx_buf src, dst;

	XFER_SETUP();
	ASSERT_STATS(s0);
	ASSERT_EQ(0, hx_fence(self->fd, self->r, 1));
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cmd_fence, 1);
	ASSERT_DELTA(s0, s1, cmd_errors, 0);

	two_bufs(_metadata, self, &src, &dst, 64 * KiB, 64 * KiB);
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 1, .doff = 2, .len = 100 });
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 3, .doff = 4, .len = 50000,
				   .flags = NO_INLINE });
	ASSERT_EQ(0, hx_fence(self->fd, self->r, 2));

	memset(&f, 0, sizeof(f));
	f.flags = 1;
	cmd_fails(_metadata, self, HCOMM_CMD_FENCE, &f, EINVAL, "FENCE flags");
	memset(&f, 0, sizeof(f));
	f.reserved0 = 1;
	cmd_fails(_metadata, self, HCOMM_CMD_FENCE, &f, EINVAL,
		  "FENCE reserved0");
	memset(&f, 0, sizeof(f));
	f.reserved[0] = 1;
	cmd_fails(_metadata, self, HCOMM_CMD_FENCE, &f, EINVAL,
		  "FENCE reserved[0]");
	memset(&f, 0, sizeof(f));
	f.reserved[1] = 1;
	cmd_fails(_metadata, self, HCOMM_CMD_FENCE, &f, EINVAL,
		  "FENCE reserved[1]");
	free_bufs(_metadata, self, &src, &dst);
}

/*
 * XFER errors with exact errnos: unknown or revoked keys ENOENT, ranges
 * beyond a region or wrapping ERANGE, unknown flags and reserved fields
 * EINVAL, a destination without LOCAL_WRITE EACCES.  Each one counts one
 * error, changes no gauge, copies nothing; edge cases that fit succeed.
 */
TEST_F(hcomm, xfer_errors)
{
	struct hx_buf src, dst, ro, none, gone;
	struct hcomm_stats s0, s1;
	struct hcomm_xfer x0;
	unsigned int n = 0;
	char *save;

	XFER_SETUP();
	ASSERT_EQ(0, hx_buf_alloc(&src, 0x33, 3 * PG + 5));
	ASSERT_EQ(0, hx_buf_alloc(&dst, 0x81, 2 * PG + 3));
	ASSERT_EQ(0, hx_buf_alloc(&ro, 7, PG));
	ASSERT_EQ(0, hx_buf_alloc(&none, 9, 100));
	ASSERT_EQ(0, hx_buf_alloc(&gone, 11, 100));
	hx_fill(src.map, src.map_len, 1);
	hx_fill(dst.map, dst.map_len, 2);
	hx_fill(ro.map, ro.map_len, 3);
	ASSERT_EQ(0, hx_buf_reg(self->fd, self->r, &src, 0, NOCACHE));
	ASSERT_EQ(0, hx_buf_reg(self->fd, self->r, &dst, ACC_W, NOCACHE));
	ASSERT_EQ(0, hx_buf_reg(self->fd, self->r, &ro,
				HCOMM_ACCESS_REMOTE_READ, NOCACHE));
	ASSERT_EQ(0, hx_buf_reg(self->fd, self->r, &none, 0, NOCACHE));
	ASSERT_EQ(0, hx_buf_reg(self->fd, self->r, &gone, ACC_W, NOCACHE));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, gone.reg.region));
	save = malloc(dst.map_len);
	ASSERT_NE(NULL, save);
	memcpy(save, dst.map, dst.map_len);
	hx_xfer_init(&x0, src.reg.key, 1, dst.reg.key, 2, 100, 0);

	ASSERT_STATS(s0);
#define XFER_FAILS(err, ...) do { \
	struct hcomm_xfer __x = x0; \
	__VA_ARGS__; \
	cmd_fails(_metadata, self, HCOMM_CMD_XFER, &__x, err, #__VA_ARGS__); \
	n++; \
} while (0)
	XFER_FAILS(ENOENT, __x.src_key = 0);
	XFER_FAILS(ENOENT, __x.dst_key = 0);
	XFER_FAILS(ENOENT, __x.src_key = gone.reg.key);
	XFER_FAILS(ENOENT, __x.dst_key = gone.reg.key);
	XFER_FAILS(ENOENT, __x.src_key = src.reg.key ^ (1ULL << 40));
	XFER_FAILS(ENOENT, __x.dst_key = dst.reg.key ^ 1);

	XFER_FAILS(ERANGE, __x.src_off = src.len, __x.len = 1);
	XFER_FAILS(ERANGE, __x.src_off = src.len - 1, __x.len = 2);
	XFER_FAILS(ERANGE, __x.src_off = 0, __x.dst_off = 0,
		   __x.len = dst.len + 1);
	XFER_FAILS(ERANGE, __x.dst_off = dst.len, __x.len = 1);
	XFER_FAILS(ERANGE, __x.dst_off = dst.len - 50, __x.len = 51);
	XFER_FAILS(ERANGE, __x.src_off = UINT64_MAX, __x.len = 1);
	XFER_FAILS(ERANGE, __x.src_off = UINT64_MAX - 7, __x.len = 16);
	XFER_FAILS(ERANGE, __x.src_off = 1, __x.len = UINT64_MAX);
	XFER_FAILS(ERANGE, __x.dst_off = UINT64_MAX - 99);
	XFER_FAILS(ERANGE, __x.dst_off = 2, __x.len = UINT64_MAX - 1);
	XFER_FAILS(ERANGE, __x.src_off = 1ULL << 63, __x.dst_off = 1ULL << 63);

	XFER_FAILS(EINVAL, __x.flags = 1U << 4);
	XFER_FAILS(EINVAL, __x.flags = 1U << 31);
	XFER_FAILS(EINVAL, __x.flags = ~0U);
	XFER_FAILS(EINVAL, __x.reserved0 = 1);
	XFER_FAILS(EINVAL, __x.reserved[0] = 1);
	XFER_FAILS(EINVAL, __x.reserved[1] = 1ULL << 63);

	XFER_FAILS(EACCES, __x.dst_key = ro.reg.key);
	XFER_FAILS(EACCES, __x.dst_key = none.reg.key, __x.dst_off = 0,
		   __x.len = 50);
#undef XFER_FAILS
	ASSERT_STATS(s1);
	ASSERT_DELTA(s0, s1, cmd_xfer, n);
	ASSERT_DELTA(s0, s1, cmd_errors, n);
	ASSERT_DELTA(s0, s1, xfer_inline, 0);
	ASSERT_DELTA(s0, s1, xfer_async, 0);
	ASSERT_DELTA(s0, s1, xfer_bytes, 0);
	ASSERT_EQ(SIZE_MAX, hx_first_diff(dst.map, save, dst.map_len))
		TH_LOG("a rejected XFER wrote the destination");
	free(save);

	/*
	 * What just fits works: last bytes, a whole region, a REMOTE_READ
	 * region as the source.
	 */
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = src.len - 1, .doff = dst.len - 1,
				   .len = 1 });
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 0, .doff = 0, .len = dst.len });
	xfer_checked(_metadata, self, variant, &ro, &dst,
		     &(struct xf){ .soff = 0, .doff = 1, .len = PG });

	ASSERT_EQ(0, hc_dereg(self->fd, self->r, ro.reg.region));
	ASSERT_EQ(0, hc_dereg(self->fd, self->r, none.reg.region));
	hx_buf_free(&ro);
	hx_buf_free(&none);
	hx_buf_free(&gone);
	free_bufs(_metadata, self, &src, &dst);
}

/* NULL or unmapped argument structs: EFAULT for every data-path command. */
TEST_F(hcomm, xfer_null_arg)
{
	static const unsigned int cmds[] = {
		HCOMM_CMD_XFER, HCOMM_CMD_CANCEL, HCOMM_CMD_FENCE,
		HCOMM_CMD_DB_WAIT,
	};
	char *hole = map_anon(PG);
	unsigned int k;

	XFER_SETUP();
	ASSERT_NE(NULL, hole);
	ASSERT_EQ(0, munmap(hole, PG));
	for (k = 0; k < ARRAY_SIZE(cmds); k++) {
		char what[64];

		snprintf(what, sizeof(what), "command 0x%x, NULL", cmds[k]);
		cmd_fails(_metadata, self, cmds[k], NULL, EFAULT, what);
		snprintf(what, sizeof(what), "command 0x%x, unmapped",
			 cmds[k]);
		cmd_fails(_metadata, self, cmds[k], hole, EFAULT, what);
	}
}

/*
 * The context belongs to the opener's mm: XFER from a fork() child
 * through the inherited fd is EPERM and leaves the parent's data alone.
 */
TEST_F(hcomm, xfer_fork_eperm)
{
	struct hcomm_stats s0, s1;
	struct hx_buf src, dst;
	struct hcomm_xfer x;
	uint64_t before;
	pid_t pid;
	int st, ret;
	char sb[32];

	XFER_SETUP();
	two_bufs(_metadata, self, &src, &dst, 64 * KiB, 64 * KiB);
	/* the child gets neither buffer: no copy-on-write of pinned pages */
	ASSERT_EQ(0, madvise(src.map, src.map_len, MADV_DONTFORK));
	ASSERT_EQ(0, madvise(dst.map, dst.map_len, MADV_DONTFORK));
	hx_xfer_init(&x, src.reg.key, 1, dst.reg.key, 1, 1000, 0);
	before = hx_csum(dst.map, dst.map_len);

	ASSERT_STATS(s0);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct hc_ctx c = { .fd = self->fd };

		CHILD_CHECK(hc_ctx_ring(&c, variant->uring) == 0, 10);
		ret = submit(c.fd, c.r, HCOMM_CMD_XFER, &x);
		if (ret != -EPERM)
			fprintf(stderr, "# child: XFER gave %d\n", ret);
		CHILD_CHECK(ret == -EPERM, 20);
		_exit(0);
	}
	ret = hx_wait_child(pid, 60000, &st);
	ASSERT_EQ(0, ret) TH_LOG("child did not finish");
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
		TH_LOG("child: XFER through the inherited fd was not EPERM "
		       "(%s)", hx_status_str(st, sb, sizeof(sb)));
	ASSERT_STATS(s1);
	ASSERT_TRUE(hcomm_gauges_equal(&s0, &s1))
		hcomm_gauges_dump(stderr, "after the child", &s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_xfer, 1);
	ASSERT_DELTA(s0, s1, cmd_errors, 1);
	ASSERT_DELTA(s0, s1, xfer_bytes, 0);
	ASSERT_EQ(before, hx_csum(dst.map, dst.map_len))
		TH_LOG("the child's rejected XFER changed the destination");

	/* the parent's own XFER works */
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 1, .doff = 1, .len = 1000 });
	xfer_checked(_metadata, self, variant, &src, &dst,
		     &(struct xf){ .soff = 3, .doff = 5, .len = 60000 });
	free_bufs(_metadata, self, &src, &dst);
}

/* ------------------------------------------------------------------ */
/* fixture xuring: io_uring only, several commands in flight           */
/* ------------------------------------------------------------------ */

FIXTURE(xuring) {
	int fd;
	struct io_uring ring;
	struct io_uring *r;
	struct hcomm_stats base;	/* before open() */
	struct hcomm_stats open;	/* context, ring and doorbells set up */
	struct hcomm_info info;
	uint64_t *db;
	size_t db_len;
};

FIXTURE_SETUP(xuring)
{
	int ret;

	self->fd = -1;
	self->r = NULL;
	self->db = NULL;
	ASSERT_STATS(self->base);
	self->fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", HCOMM_DEV,
				      strerror(errno));
	ret = hx_ring_init(&self->ring, 1024, 0);
	ASSERT_EQ(0, ret) TH_LOG("io_uring_queue_init(1024, CQE32): %s",
				 strerror(-ret));
	self->r = &self->ring;
	memset(&self->info, 0, sizeof(self->info));
	ASSERT_EQ(0, hx_cmd(self->fd, self->r, HCOMM_CMD_GET_INFO,
			    &self->info, NULL));
	if (!(self->info.features & HCOMM_FEAT_XFER))
		SKIP(return, "module without HCOMM_FEAT_XFER (features 0x%llx)",
		     ULL(self->info.features));
	self->db_len = hx_db_map_len(self->info.nr_doorbells);
	self->db = hx_db_map(self->fd, self->db_len);
	ASSERT_NE(NULL, self->db) TH_LOG("doorbell mmap: %s", strerror(errno));
	ASSERT_STATS(self->open);
}

FIXTURE_TEARDOWN(xuring)
{
	if (self->db)
		munmap(self->db, self->db_len);
	self->db = NULL;
	if (self->r)
		io_uring_queue_exit(self->r);
	self->r = NULL;
	if (self->fd >= 0)
		close(self->fd);
	self->fd = -1;
	EXPECT_GAUGES(&self->base);
}

/* Register through ioctl: io_uring never sees (or punts) these. */
static void xbufs(struct __test_metadata *_metadata,
		  FIXTURE_DATA(xuring) *self, struct hx_buf *src,
		  struct hx_buf *dst, uint64_t slen, uint64_t dlen)
{
	ASSERT_EQ(0, hx_buf_alloc(src, 0x55, slen));
	ASSERT_EQ(0, hx_buf_alloc(dst, 0x3, dlen));
	hx_fill(src->map, src->map_len, 11);
	hx_fill(dst->map, dst->map_len, 12);
	ASSERT_EQ(0, hx_buf_reg(self->fd, NULL, src, 0, NOCACHE));
	ASSERT_EQ(0, hx_buf_reg(self->fd, NULL, dst, ACC_W, NOCACHE));
}

static void xbufs_free(struct __test_metadata *_metadata,
		       FIXTURE_DATA(xuring) *self, struct hx_buf *src,
		       struct hx_buf *dst)
{
	ASSERT_EQ(0, hc_dereg(self->fd, NULL, src->reg.region));
	ASSERT_EQ(0, hc_dereg(self->fd, NULL, dst->reg.region));
	hx_buf_free(src);
	hx_buf_free(dst);
}

/* Wait until the module took @n more XFERs than *s0 counted. */
#define WAIT_TAKEN(s0, n) do { \
	struct hcomm_stats __s; \
	int __r = hx_stat_wait(HX_STAT(cmd_xfer), (s0).cmd_xfer + (n), \
			       SETTLE_MS, &__s); \
	ASSERT_EQ(0, __r) TH_LOG("the module took %llu of %llu XFERs", \
				 ULL(__s.cmd_xfer - (s0).cmd_xfer), \
				 ULL(n)); \
} while (0)

/*
 * 1000 XFERs (inline and engine, 1 .. 6000 bytes) in one io_uring_submit
 * to distinct destination slices: 1000 CQEs with res 0, each user_data
 * once, big_cqe[0] the length; every slice right, every gap untouched.
 */
TEST_F_TIMEOUT(xuring, batch_1000, 300)
{
	enum { N = 1000, SLOT = 8192, MAXL = 6000 };
	uint64_t soff[N], doff[N], len[N], inl = 0, bytes = 0;
	struct hcomm_stats s0, s1;
	struct hx_buf src, dst;
	struct hcomm_xfer *x = calloc(N, sizeof(*x));
	struct hx_cqe *cq = calloc(N, sizeof(*cq));
	bool seen[N] = { false };
	char *save;
	size_t prev, d;
	unsigned int i, got;

	ASSERT_NE(NULL, x);
	ASSERT_NE(NULL, cq);
	xbufs(_metadata, self, &src, &dst, 64 * KiB + 7, N * SLOT + 100);
	for (i = 0; i < N; i++) {
		uint32_t flags = i % 7 == 3 ? NO_INLINE : 0;

		len[i] = 1 + (uint64_t)(i * 2654435761u) % MAXL;
		soff[i] = ((uint64_t)i * 97) % (64 * KiB - MAXL);
		doff[i] = (uint64_t)i * SLOT + 1 + i % 61;
		hx_fill_not(dst.base + doff[i], src.base + soff[i], len[i]);
		hx_xfer_init(&x[i], src.reg.key, soff[i], dst.reg.key, doff[i],
			     len[i], flags);
		x[i].tag = i;
		inl += len[i] <= self->info.max_inline && !flags;
		bytes += len[i];
	}
	save = malloc(dst.map_len);
	ASSERT_NE(NULL, save);
	memcpy(save, dst.map, dst.map_len);
	for (i = 0; i < N; i++)
		ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_XFER,
					    &x[i], i));

	ASSERT_STATS(s0);
	ASSERT_EQ(N, io_uring_submit(self->r));
	got = hx_reap(self->r, N, REAP_MS, cq);
	ASSERT_EQ(N, got) TH_LOG("%u of %d CQEs within %d ms", got, N,
				 REAP_MS);
	for (i = 0; i < N; i++) {
		uint64_t ud = cq[i].user_data;

		ASSERT_GT(N, ud) TH_LOG("CQE with user_data %llu", ULL(ud));
		ASSERT_FALSE(seen[ud]) TH_LOG("two CQEs for XFER %llu", ULL(ud));
		seen[ud] = true;
		ASSERT_EQ(0, cq[i].res) TH_LOG("XFER %llu (%llu bytes): %d",
					       ULL(ud), ULL(len[ud]),
					       cq[i].res);
		ASSERT_EQ(len[ud], cq[i].done) TH_LOG("XFER %llu: big_cqe[0] "
						      "%llu, want %llu",
						      ULL(ud), ULL(cq[i].done),
						      ULL(len[ud]));
	}
	/* slices in ascending order: compare each, and the gaps with save */
	prev = 0;
	for (i = 0; i < N; i++) {
		size_t at = (dst.base - dst.map) + doff[i];

		ASSERT_EQ(hx_csum(src.base + soff[i], len[i]),
			  hx_csum(dst.base + doff[i], len[i]))
			TH_LOG("slice %u (%llu bytes) differs from its source "
			       "at byte %zu", i, ULL(len[i]),
			       hx_first_diff(dst.base + doff[i],
					     src.base + soff[i], len[i]));
		d = hx_first_diff(dst.map + prev, save + prev, at - prev);
		ASSERT_EQ(SIZE_MAX, d) TH_LOG("gap before slice %u written at "
					      "byte %zu", i, prev + d);
		prev = at + len[i];
	}
	d = hx_first_diff(dst.map + prev, save + prev, dst.map_len - prev);
	ASSERT_EQ(SIZE_MAX, d) TH_LOG("bytes after the last slice written");

	SETTLE(&s0, &s1);
	check_xfer_stats(_metadata, true, &s0, &s1, N, inl, bytes, 0);
	free(save);
	free(x);
	free(cq);
	xbufs_free(_metadata, self, &src, &dst);
}

/*
 * FENCE after engine transfers.  Round 1: 12 XFERs, FENCE, 12 XFERs,
 * FENCE in one io_uring_submit: each FENCE's CQE comes after the CQEs of
 * every XFER submitted before it, with their data in place when it is
 * seen.  (When io_uring handed commands to io-wq their order is not
 * defined: then only completions and data are checked.)  Round 2: the
 * FENCE submitted once the module took the XFERs.
 */
TEST_F_TIMEOUT(xuring, fence_order, 300)
{
	enum { NA = 12, N = 24, UD_F1 = 100, UD_F2 = 101 };
	const uint64_t slot = 640 * KiB;
	struct hcomm_stats s0, s1;
	struct hx_buf src, dst;
	struct hcomm_xfer x[N];
	struct hcomm_fence f1, f2;
	struct hx_span sp[N];
	struct hx_cqe c;
	uint64_t bytes = 0;
	int pos[N], seen = 0, round, nx, k, workers;
	char why[256];
	bool ordered;

	xbufs(_metadata, self, &src, &dst, 8 * MiB, N * slot + 64);
	for (round = 1; round <= 2; round++) {
		nx = round == 1 ? N : NA;
		for (k = 0; k < nx; k++) {
			uint64_t l = 512 * KiB + 2 * k + 1;
			uint64_t so = ((uint64_t)k * 300007 + round) %
				      (8 * MiB - 600 * KiB);
			uint64_t dof = k * slot + 3 + k;

			ASSERT_EQ(0, hx_span_prep(&sp[k], src.base + so,
						  dst.base + dof, l, 3, 64));
			hx_xfer_init(&x[k], src.reg.key, so, dst.reg.key, dof,
				     l, NO_INLINE);
			pos[k] = -1;
			bytes += l;
		}
		memset(&f1, 0, sizeof(f1));
		memset(&f2, 0, sizeof(f2));
		f1.tag = 7;
		f2.tag = 8;

		ASSERT_STATS(s0);
		for (k = 0; k < nx; k++) {
			ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd,
						    HCOMM_CMD_XFER, &x[k], k));
			if (round == 1 && k == NA - 1)
				ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd,
							    HCOMM_CMD_FENCE,
							    &f1, UD_F1));
		}
		if (round == 1) {
			ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd,
						    HCOMM_CMD_FENCE, &f2,
						    UD_F2));
			ASSERT_EQ(N + 2, io_uring_submit(self->r));
			workers = hx_iowq_threads();
			ordered = workers == 0;
			if (!ordered)
				TH_LOG("io_uring used io-wq (%d workers): the "
				       "order of one submit is not defined; "
				       "round 1 checks completions and data",
				       workers);
		} else {
			ASSERT_EQ(NA, io_uring_submit(self->r));
			WAIT_TAKEN(s0, NA);
			ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd,
						    HCOMM_CMD_FENCE, &f2,
						    UD_F2));
			ASSERT_EQ(1, io_uring_submit(self->r));
			ordered = true;
		}

		/* reap one by one: check at each FENCE what came before */
		seen = 0;
		for (k = 0; k < nx + (round == 1 ? 2 : 1); k++) {
			int j, before = 0, ret;

			ret = hx_wait_cqe(self->r, REAP_MS, &c);
			ASSERT_EQ(0, ret) TH_LOG("round %d: CQE %d of %d missing",
						 round, k,
						 nx + (round == 1 ? 2 : 1));
			ASSERT_EQ(0, c.res) TH_LOG("round %d user_data %llu: %d",
						   round, ULL(c.user_data),
						   c.res);
			if (c.user_data < (uint64_t)nx) {
				ASSERT_EQ(-1, pos[c.user_data]);
				pos[c.user_data] = seen++;
				ASSERT_EQ(x[c.user_data].len, c.done);
				continue;
			}
			ASSERT_TRUE(c.user_data == UD_F1 || c.user_data == UD_F2)
				TH_LOG("user_data %llu", ULL(c.user_data));
			/* the XFERs this FENCE covers */
			before = c.user_data == UD_F1 ? NA : nx;
			for (j = 0; j < before && ordered; j++) {
				ASSERT_NE(-1, pos[j])
					TH_LOG("round %d: FENCE %s completed "
					       "before XFER %d", round,
					       c.user_data == UD_F1 ? "1" : "2",
					       j);
				ASSERT_TRUE(hx_span_check(&sp[j], sp[j].len, why,
							  sizeof(why)))
					TH_LOG("XFER %d when its FENCE "
					       "completed: %s", j, why);
			}
		}
		for (k = 0; k < nx; k++) {
			ASSERT_NE(-1, pos[k]) TH_LOG("no CQE for XFER %d", k);
			ASSERT_TRUE(hx_span_check(&sp[k], sp[k].len, why,
						  sizeof(why)))
				TH_LOG("XFER %d: %s", k, why);
			hx_span_free(&sp[k]);
		}
		SETTLE(&s0, &s1);
		check_xfer_stats(_metadata, true, &s0, &s1, nx, 0, bytes,
				 round == 1 ? 2 : 1);
		ASSERT_DELTA(s0, s1, cmd_fence, round == 1 ? 2 : 1);
		bytes = 0;
	}
	xbufs_free(_metadata, self, &src, &dst);
}

/*
 * CANCEL(tag) of a FENCE waiting behind two 16 MiB transfers: the FENCE
 * ends with -ECANCELED when CANCEL found it (count 1), or with 0 after the
 * transfers (count 0); the transfers themselves are not affected.
 */
TEST_F_TIMEOUT(xuring, fence_cancel, 300)
{
	const uint64_t L = 16 * MiB;
	struct hcomm_stats s0, s1;
	struct hx_buf src, dst;
	struct hcomm_xfer x[2];
	struct hcomm_fence f;
	struct hcomm_cancel c;
	struct hx_span sp[2];
	struct hx_cqe cq[4];
	char why[256];
	int k, i, fi;

	xbufs(_metadata, self, &src, &dst, L + 64, 2 * L + 64);
	for (k = 0; k < 2; k++) {
		ASSERT_EQ(0, hx_span_prep(&sp[k], src.base + 1,
					  dst.base + 1 + k * (L + 8), L, 1, 7));
		hx_xfer_init(&x[k], src.reg.key, 1, dst.reg.key,
			     1 + k * (L + 8), L, NO_INLINE);
		x[k].tag = 1;
	}
	memset(&f, 0, sizeof(f));
	f.tag = 9;
	memset(&c, 0, sizeof(c));
	c.tag = 9;
	c.count = 1000;

	ASSERT_STATS(s0);
	for (k = 0; k < 2; k++)
		ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_XFER,
					    &x[k], k));
	ASSERT_EQ(2, io_uring_submit(self->r));
	WAIT_TAKEN(s0, 2);
	ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_FENCE, &f, 2));
	ASSERT_EQ(1, io_uring_submit(self->r));
	{
		struct hcomm_stats s;

		ASSERT_EQ(0, hx_stat_wait(HX_STAT(cmd_fence), s0.cmd_fence + 1,
					  SETTLE_MS, &s));
	}
	ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_CANCEL, &c, 3));
	ASSERT_EQ(1, io_uring_submit(self->r));
	ASSERT_EQ(4, hx_reap(self->r, 4, REAP_MS, cq));

	i = hx_find_cqe(cq, 4, 3);
	ASSERT_LE(0, i);
	ASSERT_EQ(0, cq[i].res);
	fi = hx_find_cqe(cq, 4, 2);
	ASSERT_LE(0, fi);
	ASSERT_TRUE(cq[fi].res == 0 || cq[fi].res == -ECANCELED)
		TH_LOG("FENCE: %d", cq[fi].res);
	ASSERT_EQ(cq[fi].res == -ECANCELED ? 1 : 0, c.count)
		TH_LOG("FENCE ended with %d but CANCEL counted %u", cq[fi].res,
		       c.count);
	for (k = 0; k < 2; k++) {
		i = hx_find_cqe(cq, 4, k);
		ASSERT_LE(0, i);
		ASSERT_EQ(0, cq[i].res) TH_LOG("XFER %d (another tag) was hit "
					       "by the CANCEL: %d", k,
					       cq[i].res);
		ASSERT_EQ(L, cq[i].done);
		if (cq[fi].res == 0)
			ASSERT_LT(i, fi) TH_LOG("FENCE completed before XFER %d",
						k);
		ASSERT_TRUE(hx_span_check(&sp[k], L, why, sizeof(why)))
			TH_LOG("XFER %d: %s", k, why);
		hx_span_free(&sp[k]);
	}
	SETTLE(&s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_xfer, 2);
	ASSERT_DELTA(s0, s1, xfer_async, 2);
	ASSERT_DELTA(s0, s1, xfer_inline, 0);
	ASSERT_DELTA(s0, s1, xfer_bytes, 2 * L);
	ASSERT_DELTA(s0, s1, xfer_cancelled, 0);
	ASSERT_DELTA(s0, s1, uring_cmds, 4);
	ASSERT_DELTA(s0, s1, cmd_cancel, 1);
	ASSERT_DELTA(s0, s1, cmd_fence, 1);
	if (cq[fi].res == 0)
		ASSERT_DELTA(s0, s1, cmd_errors, 0);
	xbufs_free(_metadata, self, &src, &dst);
}

/*
 * Watchdog for an ioctl that should return on its own: if @done is not
 * set within @ms, log @what and CANCEL_ALL the context, so that the test
 * fails with a message instead of hanging until the harness kills it.
 */
struct watchdog {
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done, fired;
	int fd, ms;
	const char *what;
};

static void *watchdog_main(void *p)
{
	struct watchdog *wd = p;
	struct timespec ts;
	uint32_t n = 0;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += wd->ms / 1000;
	pthread_mutex_lock(&wd->lock);
	while (!wd->done && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&wd->cond, &wd->lock, &ts);
	wd->fired = !wd->done;
	pthread_mutex_unlock(&wd->lock);
	if (wd->fired) {
		fprintf(stderr, "# watchdog: %s still blocked after %d ms; "
			"CANCEL_ALL\n", wd->what, wd->ms);
		hx_cancel(wd->fd, NULL, 0, HCOMM_CANCEL_ALL, &n);
	}
	return NULL;
}

static int watchdog_start(struct watchdog *wd, int fd, int ms,
			  const char *what)
{
	memset(wd, 0, sizeof(*wd));
	pthread_mutex_init(&wd->lock, NULL);
	pthread_cond_init(&wd->cond, NULL);
	wd->fd = fd;
	wd->ms = ms;
	wd->what = what;
	return pthread_create(&wd->th, NULL, watchdog_main, wd);
}

/* Stop the watchdog; true when it had to fire. */
static bool watchdog_stop(struct watchdog *wd)
{
	pthread_mutex_lock(&wd->lock);
	wd->done = true;
	pthread_cond_signal(&wd->cond);
	pthread_mutex_unlock(&wd->lock);
	pthread_join(wd->th, NULL);
	return wd->fired;
}

/*
 * A FENCE through ioctl, from the thread that submitted transfers on a
 * ring, waits for them: when it returns their data is in place.  (Their
 * CQEs can only be posted once this thread is back from the ioctl: the
 * FENCE must not wait for those.)
 */
TEST_F(xuring, fence_ioctl_waits_for_ring)
{
	enum { N = 4 };
	const uint64_t L = 8 * MiB + 5;
	struct hcomm_stats s0, s1;
	struct hx_buf src, dst;
	struct hcomm_xfer x[N];
	struct hx_span sp[N];
	struct hx_cqe cq[N];
	struct watchdog wd;
	char why[256];
	bool fired;
	int k, i, ret;

	xbufs(_metadata, self, &src, &dst, L + 64, N * (L + 64));
	for (k = 0; k < N; k++) {
		uint64_t dof = 7 + k * (L + 64);

		ASSERT_EQ(0, hx_span_prep(&sp[k], src.base + 3, dst.base + dof,
					  L, 7, 32));
		hx_xfer_init(&x[k], src.reg.key, 3, dst.reg.key, dof, L,
			     NO_INLINE);
	}
	ASSERT_STATS(s0);
	for (k = 0; k < N; k++)
		ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_XFER,
					    &x[k], k));
	ASSERT_EQ(N, io_uring_submit(self->r));
	WAIT_TAKEN(s0, N);
	ASSERT_EQ(0, watchdog_start(&wd, self->fd, 30000, "ioctl FENCE"));
	ret = hx_fence(self->fd, NULL, 0);
	fired = watchdog_stop(&wd);
	ASSERT_FALSE(fired) TH_LOG("the ioctl FENCE did not return within 30 s "
				   "(then %d): does it wait for CQEs that only "
				   "this blocked thread can post?", ret);
	ASSERT_EQ(0, ret) TH_LOG("ioctl FENCE: %s", strerror(-ret));
	for (k = 0; k < N; k++)
		ASSERT_TRUE(hx_span_check(&sp[k], L, why, sizeof(why)))
			TH_LOG("XFER %d when the ioctl FENCE returned: %s", k,
			       why);
	ASSERT_EQ(N, hx_reap(self->r, N, REAP_MS, cq));
	for (k = 0; k < N; k++) {
		i = hx_find_cqe(cq, N, k);
		ASSERT_LE(0, i);
		ASSERT_EQ(0, cq[i].res);
		ASSERT_EQ(L, cq[i].done);
		hx_span_free(&sp[k]);
	}
	SETTLE(&s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_fence, 1);
	ASSERT_DELTA(s0, s1, ioctls, 1);
	ASSERT_DELTA(s0, s1, uring_cmds, N);
	ASSERT_DELTA(s0, s1, xfer_async, N);
	ASSERT_DELTA(s0, s1, xfer_bytes, N * L);
	ASSERT_DELTA(s0, s1, cmd_errors, 0);
	xbufs_free(_metadata, self, &src, &dst);
}

/*
 * An ioctl DB_WAIT with a timeout, from the thread whose ring transfers
 * complete meanwhile: io_uring's task work for those completions is not
 * a signal, so the wait ends with -ETIME, not -EINTR (it is restarted
 * with the time left), and nothing is lost on the ring.
 */
TEST_F(xuring, ioctl_wait_beside_ring)
{
	enum { N = 4 };
	const uint64_t L = 8 * MiB + 1;
	struct hcomm_stats s0, s1;
	struct hx_buf src, dst;
	struct hcomm_xfer x[N];
	struct hcomm_db_wait w;
	struct hx_span sp[N];
	struct hx_cqe cq[N];
	char why[256];
	int k, i, ret;

	xbufs(_metadata, self, &src, &dst, L + 64, N * (L + 64));
	for (k = 0; k < N; k++) {
		uint64_t dof = 1 + k * (L + 64);

		ASSERT_EQ(0, hx_span_prep(&sp[k], src.base + 1, dst.base + dof,
					  L, 1, 32));
		hx_xfer_init(&x[k], src.reg.key, 1, dst.reg.key, dof, L,
			     NO_INLINE);
	}
	hx_db_wait_init(&w, 50, 1, 6, 3000ULL * 1000 * 1000);
	ASSERT_STATS(s0);
	for (k = 0; k < N; k++)
		ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_XFER,
					    &x[k], k));
	ASSERT_EQ(N, io_uring_submit(self->r));
	ret = hx_cmd(self->fd, NULL, HCOMM_CMD_DB_WAIT, &w, NULL);
	ASSERT_EQ(-ETIME, ret) TH_LOG("ioctl DB_WAIT (3 s timeout) while this "
				      "thread's ring transfers completed: %d "
				      "(%s), want -ETIME", ret, strerror(-ret));
	ASSERT_EQ(0, w.current_value);
	ASSERT_EQ(N, hx_reap(self->r, N, REAP_MS, cq));
	for (k = 0; k < N; k++) {
		i = hx_find_cqe(cq, N, k);
		ASSERT_LE(0, i);
		ASSERT_EQ(0, cq[i].res);
		ASSERT_EQ(L, cq[i].done);
		ASSERT_TRUE(hx_span_check(&sp[k], L, why, sizeof(why)))
			TH_LOG("XFER %d: %s", k, why);
		hx_span_free(&sp[k]);
	}
	SETTLE(&s0, &s1);
	/*
	 * Task work interrupts the wait; the call is restarted with the time
	 * left written back (each restart runs the handler again).
	 */
	ASSERT_LE(s0.cmd_db_wait + 1, s1.cmd_db_wait);
	if (s1.cmd_db_wait - s0.cmd_db_wait > 1)
		ASSERT_GT(3000ULL * 1000 * 1000, w.timeout_ns)
			TH_LOG("restarted wait did not get the time left");
	ASSERT_DELTA(s0, s1, xfer_async, N);
	ASSERT_DELTA(s0, s1, xfer_bytes, N * L);
	ASSERT_DELTA(s0, s1, xfer_cancelled, 0);
	xbufs_free(_metadata, self, &src, &dst);
}

/*
 * Spinning on doorbells with acquire loads: once a doorbell shows its
 * transfer's value, the transfer's data is complete, before its CQE is
 * reaped.  Round 1: DB_SET into one doorbell per transfer; round 2:
 * DB_ADD 1 of four transfers into one doorbell.
 */
TEST_F_TIMEOUT(xuring, doorbell_spin, 300)
{
	enum { N = 4, DB0 = 20, DBSUM = 30 };
	const uint64_t L = 2 * MiB + 1;
	struct hcomm_stats s0, s1;
	struct hx_buf src, dst;
	struct hcomm_xfer x[N];
	struct hx_span sp[N];
	struct hx_cqe cq[N];
	uint64_t last;
	char why[256];
	int round, k, i, ret;

	xbufs(_metadata, self, &src, &dst, L + 64, N * (L + 64));
	ASSERT_STATS(s0);
	for (round = 0; round < 2; round++) {
		for (k = 0; k < N; k++) {
			uint64_t dof = 5 + k * (L + 64);

			ASSERT_EQ(0, hx_span_prep(&sp[k], src.base + 9,
						  dst.base + dof, L, 5, 32));
			hx_xfer_init(&x[k], src.reg.key, 9, dst.reg.key, dof, L,
				     NO_INLINE);
			if (round == 0)
				hx_xfer_db(&x[k], DB_SET, DB0 + k, 1000 + k);
			else
				hx_xfer_db(&x[k], DB_ADD, DBSUM, 1);
			ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd,
						    HCOMM_CMD_XFER, &x[k], k));
		}
		ASSERT_EQ(N, io_uring_submit(self->r));
		if (round == 0) {
			for (k = 0; k < N; k++) {
				ret = hx_db_spin(self->db, DB0 + k, 1000 + k,
						 REAP_MS, &last);
				ASSERT_EQ(0, ret)
					TH_LOG("doorbell %d still %llu, want "
					       "%d", DB0 + k, ULL(last),
					       1000 + k);
				ASSERT_EQ(1000 + k, last);
				ASSERT_TRUE(hx_span_check(&sp[k], L, why,
							  sizeof(why)))
					TH_LOG("XFER %d after its doorbell "
					       "showed %llu: %s", k, ULL(last),
					       why);
			}
		} else {
			ret = hx_db_spin(self->db, DBSUM, N, REAP_MS, &last);
			ASSERT_EQ(0, ret) TH_LOG("doorbell %d at %llu, want %d",
						 DBSUM, ULL(last), N);
			for (k = 0; k < N; k++)
				ASSERT_TRUE(hx_span_check(&sp[k], L, why,
							  sizeof(why)))
					TH_LOG("XFER %d after the shared "
					       "doorbell reached %d: %s", k, N,
					       why);
		}
		ASSERT_EQ(N, hx_reap(self->r, N, REAP_MS, cq));
		for (k = 0; k < N; k++) {
			i = hx_find_cqe(cq, N, k);
			ASSERT_LE(0, i);
			ASSERT_EQ(0, cq[i].res);
			ASSERT_EQ(L, cq[i].done);
			hx_span_free(&sp[k]);
		}
	}
	ASSERT_EQ(N, hx_db_load(self->db, DBSUM));
	ASSERT_EQ(0, hx_db_load(self->db, DB0 - 1));
	ASSERT_EQ(0, hx_db_load(self->db, DB0 + N));
	SETTLE(&s0, &s1);
	check_xfer_stats(_metadata, true, &s0, &s1, 2 * N, 0, 2 * N * L, 0);
	ASSERT_DELTA(s0, s1, db_signals, 2 * N);
	xbufs_free(_metadata, self, &src, &dst);
}

/*
 * Collect the CQEs of @n transfers (user_data 0 .. n-1) among cq[0 .. m-1]
 * that may have been cancelled: res 0 with every byte, or -ECANCELED with
 * a prefix of done < len bytes in place.  Adds the bytes copied and the
 * number cancelled.
 */
static void check_maybe_cancelled(struct __test_metadata *_metadata,
				  const struct hx_cqe *cq, unsigned int m,
				  const struct hcomm_xfer *x,
				  struct hx_span *sp, unsigned int n,
				  uint64_t *bytes, unsigned int *ncanc)
{
	char why[256];
	unsigned int k;
	int i;

	for (k = 0; k < n; k++) {
		i = hx_find_cqe(cq, m, k);
		ASSERT_LE(0, i) TH_LOG("no CQE for XFER %u", k);
		ASSERT_TRUE(cq[i].res == 0 || cq[i].res == -ECANCELED)
			TH_LOG("XFER %u: %d, want 0 or -ECANCELED", k,
			       cq[i].res);
		if (cq[i].res == 0) {
			ASSERT_EQ(x[k].len, cq[i].done)
				TH_LOG("XFER %u completed with big_cqe[0] %llu "
				       "of %llu", k, ULL(cq[i].done),
				       ULL(x[k].len));
		} else {
			ASSERT_GT(x[k].len, cq[i].done)
				TH_LOG("cancelled XFER %u reports all %llu "
				       "bytes", k, ULL(x[k].len));
			(*ncanc)++;
		}
		ASSERT_TRUE(hx_span_check(&sp[k], cq[i].done, why,
					  sizeof(why)))
			TH_LOG("XFER %u (res %d, %llu of %llu bytes): %s", k,
			       cq[i].res, ULL(cq[i].done), ULL(x[k].len), why);
		hx_span_free(&sp[k]);
		*bytes += cq[i].done;
	}
}

/*
 * CANCEL(tag 2) with three 64 MiB transfers queued, two of them tagged 2:
 * those end with -ECANCELED (a copied prefix in place) or 0 if they
 * finished first; the other one completes; count covers what was hit.
 */
TEST_F_TIMEOUT(xuring, cancel_tag_64mib, 300)
{
	enum { N = 3 };
	static const uint64_t tags[N] = { 1, 2, 2 };
	const uint64_t L = 64 * MiB - 16, slot = 64 * MiB;
	struct hcomm_stats s0, s1;
	struct hx_buf src, dst;
	struct hcomm_xfer x[N];
	struct hcomm_cancel c;
	struct hx_span sp[N];
	struct hx_cqe cq[N + 1];
	uint64_t bytes = 0;
	unsigned int ncanc = 0, k;
	uint32_t count;
	int i;

	if (self->info.max_region_size < N * slot + 64)
		SKIP(return, "max_region_size %llu < 192 MiB",
		     ULL(self->info.max_region_size));
	xbufs(_metadata, self, &src, &dst, slot + 64, N * slot + 64);
	for (k = 0; k < N; k++) {
		uint64_t dof = k * slot + 3 + k;

		ASSERT_EQ(0, hx_span_prep(&sp[k], src.base + 5, dst.base + dof,
					  L, 3, 8));
		hx_xfer_init(&x[k], src.reg.key, 5, dst.reg.key, dof, L, 0);
		x[k].tag = tags[k];
	}
	memset(&c, 0, sizeof(c));
	c.tag = 2;
	c.count = 1000;

	ASSERT_STATS(s0);
	for (k = 0; k < N; k++)
		ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_XFER,
					    &x[k], k));
	ASSERT_EQ(N, io_uring_submit(self->r));
	WAIT_TAKEN(s0, N);
	ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_CANCEL, &c,
				    10));
	ASSERT_EQ(1, io_uring_submit(self->r));
	ASSERT_EQ(N + 1, hx_reap(self->r, N + 1, REAP_MS, cq));

	i = hx_find_cqe(cq, N + 1, 10);
	ASSERT_LE(0, i);
	ASSERT_EQ(0, cq[i].res) TH_LOG("CANCEL: %d", cq[i].res);
	i = hx_find_cqe(cq, N + 1, 0);
	ASSERT_LE(0, i);
	ASSERT_EQ(0, cq[i].res) TH_LOG("XFER with tag 1 hit by CANCEL(tag 2)");
	check_maybe_cancelled(_metadata, cq, N + 1, x, sp, N, &bytes, &ncanc);
	ASSERT_GE(2, c.count) TH_LOG("CANCEL(tag 2) counted %u, only 2 carry "
				     "the tag", c.count);
	ASSERT_LE(ncanc, c.count) TH_LOG("%u CQEs -ECANCELED, count %u", ncanc,
					 c.count);
	TH_LOG("CANCEL(tag 2): count %u, %u of 2 ended -ECANCELED", c.count,
	       ncanc);

	ASSERT_EQ(0, hx_cancel(self->fd, self->r, 2, 0, &count));
	ASSERT_EQ(0, count) TH_LOG("nothing with tag 2 is left");
	SETTLE(&s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_xfer, N);
	ASSERT_DELTA(s0, s1, cmd_cancel, 2);
	ASSERT_DELTA(s0, s1, xfer_async, N);
	ASSERT_DELTA(s0, s1, xfer_inline, 0);
	ASSERT_DELTA(s0, s1, xfer_cancelled, ncanc);
	ASSERT_DELTA(s0, s1, xfer_bytes, bytes);
	xbufs_free(_metadata, self, &src, &dst);
}

/*
 * CANCEL_ALL with three 16 MiB transfers, a DB_WAIT nobody signals and a
 * FENCE pending: the DB_WAIT surely ends -ECANCELED, the others end
 * -ECANCELED or 0; the tag is ignored; waits_pending back to its base.
 */
TEST_F_TIMEOUT(xuring, cancel_all, 300)
{
	enum { N = 3, UD_W = 10, UD_F = 11, UD_C = 12 };
	const uint64_t L = 16 * MiB;
	struct hcomm_stats s0, s1, s;
	struct hx_buf src, dst;
	struct hcomm_xfer x[N];
	struct hcomm_db_wait w;
	struct hcomm_fence f;
	struct hcomm_cancel c;
	struct hx_span sp[N];
	struct hx_cqe cq[N + 3];
	uint64_t bytes = 0;
	unsigned int ncanc = 0, k, hit;
	uint32_t count;
	int i, fi;

	xbufs(_metadata, self, &src, &dst, L + 64, N * (L + 64));
	for (k = 0; k < N; k++) {
		uint64_t dof = 1 + k * (L + 64);

		ASSERT_EQ(0, hx_span_prep(&sp[k], src.base + 7, dst.base + dof,
					  L, 1, 32));
		hx_xfer_init(&x[k], src.reg.key, 7, dst.reg.key, dof, L,
			     NO_INLINE);
		x[k].tag = k + 1;
	}
	hx_db_wait_init(&w, 40, 1, 4, 0);
	memset(&f, 0, sizeof(f));
	f.tag = 5;
	memset(&c, 0, sizeof(c));
	c.tag = 0x1234;		/* ignored with CANCEL_ALL */
	c.flags = HCOMM_CANCEL_ALL;
	c.count = 1000;

	ASSERT_STATS(s0);
	for (k = 0; k < N; k++)
		ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_XFER,
					    &x[k], k));
	ASSERT_EQ(N, io_uring_submit(self->r));
	WAIT_TAKEN(s0, N);
	ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_DB_WAIT, &w,
				    UD_W));
	ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_FENCE, &f,
				    UD_F));
	ASSERT_EQ(2, io_uring_submit(self->r));
	ASSERT_EQ(0, hx_stat_wait(HX_STAT(waits_pending), s0.waits_pending + 1,
				  SETTLE_MS, &s))
		TH_LOG("DB_WAIT not parked: waits_pending %llu",
		       ULL(s.waits_pending));
	ASSERT_EQ(0, hx_stat_wait(HX_STAT(cmd_fence), s0.cmd_fence + 1,
				  SETTLE_MS, &s));
	ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_CANCEL, &c,
				    UD_C));
	ASSERT_EQ(1, io_uring_submit(self->r));
	ASSERT_EQ(N + 3, hx_reap(self->r, N + 3, REAP_MS, cq))
		TH_LOG("every operation must complete after CANCEL_ALL");

	i = hx_find_cqe(cq, N + 3, UD_C);
	ASSERT_LE(0, i);
	ASSERT_EQ(0, cq[i].res);
	i = hx_find_cqe(cq, N + 3, UD_W);
	ASSERT_LE(0, i);
	ASSERT_EQ(-ECANCELED, cq[i].res) TH_LOG("unsatisfiable DB_WAIT: %d",
						cq[i].res);
	fi = hx_find_cqe(cq, N + 3, UD_F);
	ASSERT_LE(0, fi);
	ASSERT_TRUE(cq[fi].res == 0 || cq[fi].res == -ECANCELED)
		TH_LOG("FENCE: %d", cq[fi].res);
	check_maybe_cancelled(_metadata, cq, N + 3, x, sp, N, &bytes, &ncanc);
	if (cq[fi].res == 0)
		for (k = 0; k < N; k++)
			ASSERT_LT(hx_find_cqe(cq, N + 3, k), fi)
				TH_LOG("FENCE completed before XFER %u", k);
	hit = 1 + ncanc + (cq[fi].res == -ECANCELED);
	ASSERT_LE(hit, c.count) TH_LOG("%u operations ended -ECANCELED, "
				       "CANCEL_ALL counted %u", hit, c.count);
	ASSERT_GE(N + 2, c.count) TH_LOG("count %u: only %d were submitted",
					 c.count, N + 2);

	ASSERT_EQ(0, hx_cancel(self->fd, self->r, 0, HCOMM_CANCEL_ALL, &count));
	ASSERT_EQ(0, count);
	SETTLE(&s0, &s1);
	ASSERT_DELTA(s0, s1, cmd_cancel, 2);
	ASSERT_DELTA(s0, s1, cmd_db_wait, 1);
	ASSERT_DELTA(s0, s1, cmd_fence, 1);
	ASSERT_DELTA(s0, s1, xfer_async, N);
	ASSERT_DELTA(s0, s1, xfer_cancelled, ncanc);
	ASSERT_DELTA(s0, s1, xfer_bytes, bytes);
	ASSERT_EQ(0, hx_db_load(self->db, 40));
	xbufs_free(_metadata, self, &src, &dst);
}

/*
 * DEREG of both regions while a 64 MiB transfer runs between them: the
 * DEREGs succeed, the transfer still completes with every byte (its pages
 * stay pinned until it ends), then pinned_pages and regions go back; the
 * old keys are ENOENT.
 */
TEST_F_TIMEOUT(xuring, dereg_in_flight, 300)
{
	const uint64_t L = 64 * MiB;
	struct hcomm_stats s0, s1, s;
	struct hx_buf src, dst, fresh;
	struct hcomm_dereg d[2];
	struct hcomm_xfer x;
	struct hx_span sp;
	struct hx_cqe cq[3];
	char why[256];
	int i, ret;

	xbufs(_metadata, self, &src, &dst, L + 8, L + 8);
	ASSERT_EQ(0, hx_span_prep(&sp, src.base + 1, dst.base + 5, L - 8, 5, 3));
	hx_xfer_init(&x, src.reg.key, 1, dst.reg.key, 5, L - 8, NO_INLINE);
	memset(d, 0, sizeof(d));
	d[0].region = src.reg.region;
	d[1].region = dst.reg.region;

	ASSERT_STATS(s0);
	ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_XFER, &x, 0));
	ASSERT_EQ(1, io_uring_submit(self->r));
	WAIT_TAKEN(s0, 1);
	ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_DEREG, &d[0],
				    1));
	ASSERT_NE(NULL, hx_prep_cmd(self->r, self->fd, HCOMM_CMD_DEREG, &d[1],
				    2));
	ASSERT_EQ(2, io_uring_submit(self->r));
	ASSERT_EQ(3, hx_reap(self->r, 3, REAP_MS, cq));
	for (i = 1; i <= 2; i++) {
		int j = hx_find_cqe(cq, 3, i);

		ASSERT_LE(0, j);
		ASSERT_EQ(0, cq[j].res) TH_LOG("DEREG during the transfer: %d",
					       cq[j].res);
	}
	i = hx_find_cqe(cq, 3, 0);
	ASSERT_LE(0, i);
	ASSERT_EQ(0, cq[i].res) TH_LOG("XFER whose regions were deregistered "
				       "while it ran: %d", cq[i].res);
	ASSERT_EQ(L - 8, cq[i].done);
	ASSERT_TRUE(hx_span_check(&sp, L - 8, why, sizeof(why)))
		TH_LOG("%s", why);
	hx_span_free(&sp);

	/* the context holds nothing any more */
	ret = hcomm_gauges_wait(&self->open, &s1, SETTLE_MS);
	if (ret > 0)
		hcomm_gauges_dump(stderr, "after DEREG", &self->open, &s1);
	ASSERT_EQ(0, ret) TH_LOG("pinned_pages %llu (want %llu), regions %llu "
				 "(want %llu) after the transfer ended",
				 ULL(s1.pinned_pages),
				 ULL(self->open.pinned_pages), ULL(s1.regions),
				 ULL(self->open.regions));
	ASSERT_DELTA(s0, s1, xfer_async, 1);
	ASSERT_DELTA(s0, s1, xfer_bytes, L - 8);
	ASSERT_DELTA(s0, s1, xfer_cancelled, 0);
	ASSERT_DELTA(s0, s1, cmd_dereg, 2);
	ASSERT_DELTA(s0, s1, cmd_errors, 0);

	/* old keys: ENOENT, with a live region on the other side */
	ASSERT_EQ(0, hx_buf_alloc(&fresh, 1, PG));
	ASSERT_EQ(0, hx_buf_reg(self->fd, NULL, &fresh, ACC_W, NOCACHE));
	ASSERT_STATS(s);
	hx_xfer_init(&x, src.reg.key, 0, fresh.reg.key, 0, 16, 0);
	ret = hx_cmd(self->fd, self->r, HCOMM_CMD_XFER, &x, NULL);
	ASSERT_EQ(-ENOENT, ret) TH_LOG("XFER from a deregistered key: %d", ret);
	hx_xfer_init(&x, fresh.reg.key, 0, dst.reg.key, 0, 16, 0);
	ret = hx_cmd(self->fd, self->r, HCOMM_CMD_XFER, &x, NULL);
	ASSERT_EQ(-ENOENT, ret) TH_LOG("XFER to a deregistered key: %d", ret);
	ASSERT_STATS(s1);
	ASSERT_DELTA(s, s1, cmd_errors, 2);
	ASSERT_TRUE(hcomm_gauges_equal(&s, &s1));
	ASSERT_EQ(0, hc_dereg(self->fd, NULL, fresh.reg.region));
	hx_buf_free(&fresh);
	hx_buf_free(&src);
	hx_buf_free(&dst);
}

/* ------------------------------------------------------------------ */
/* the end of a ring or process with operations pending                */
/* ------------------------------------------------------------------ */

enum exit_mode { EXIT_RING, EXIT_PROCESS, EXIT_SIGKILL };

#define EXIT_NX		4
#define EXIT_LEN	(32 * MiB)

/*
 * Child: its own context and ring, a DB_WAIT nobody will satisfy and
 * EXIT_NX transfers of EXIT_LEN on the engine; then, by @mode,
 * io_uring_queue_exit() (reporting 'E') and exit, or exit with the ring
 * still set up, or block in an ioctl DB_WAIT until SIGKILL.
 */
struct exit_wait {
	int fd, c2p;
	struct hcomm_db_wait *w;
};

/* Child thread: report 'R', then block in DB_WAIT until the SIGKILL. */
static void *exit_waiter(void *p)
{
	struct exit_wait *ew = p;

	if (write(ew->c2p, "R", 1) != 1)
		_exit(26);
	ioctl(ew->fd, HCOMM_CMD_DB_WAIT, ew->w);
	fprintf(stderr, "# child: ioctl DB_WAIT returned: %s\n",
		strerror(errno));
	_exit(27);
}

static void exit_child(int c2p, int p2c, enum exit_mode mode)
{
	struct exit_wait ew = { .c2p = c2p };
	struct hcomm_xfer x[EXIT_NX];
	struct hcomm_db_wait w, w2;
	struct io_uring ring;
	struct hx_buf src, dst;
	uint64_t *db;
	int fd, k;
	char go;

	fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	CHILD_CHECK(fd >= 0, 10);
	CHILD_CHECK(hx_ring_init(&ring, 64, 0) == 0, 11);
	db = hx_db_map(fd, PG);
	CHILD_CHECK(db, 12);
	CHILD_CHECK(hx_buf_alloc(&src, 0, EXIT_LEN) == 0, 13);
	CHILD_CHECK(hx_buf_alloc(&dst, 0, EXIT_LEN) == 0, 14);
	CHILD_CHECK(hx_buf_reg(fd, NULL, &src, 0, NOCACHE) == 0, 15);
	CHILD_CHECK(hx_buf_reg(fd, NULL, &dst, ACC_W, NOCACHE) == 0, 16);

	hx_db_wait_init(&w, 0, 1, 1, 0);
	CHILD_CHECK(hx_prep_cmd(&ring, fd, HCOMM_CMD_DB_WAIT, &w, 100), 17);
	for (k = 0; k < EXIT_NX; k++) {
		hx_xfer_init(&x[k], src.reg.key, 0, dst.reg.key, 0, EXIT_LEN,
			     NO_INLINE);
		x[k].tag = 2;
		CHILD_CHECK(hx_prep_cmd(&ring, fd, HCOMM_CMD_XFER, &x[k], k),
			    18);
	}
	CHILD_CHECK(io_uring_submit(&ring) == EXIT_NX + 1, 19);
	if (mode != EXIT_SIGKILL)
		CHILD_CHECK(write(c2p, "R", 1) == 1, 20);

	if (mode == EXIT_SIGKILL) {
		/*
		 * Another thread blocks in an ioctl DB_WAIT (this one gets
		 * the ring's task work); this one waits for SIGKILL.
		 */
		pthread_t th;

		hx_db_wait_init(&w2, 1, 1, 3, 0);
		ew.fd = fd;
		ew.w = &w2;
		CHILD_CHECK(pthread_create(&th, NULL, exit_waiter, &ew) == 0,
			    24);
		CHILD_CHECK(read(p2c, &go, 1) == 1, 25);
		_exit(30);	/* the parent closed the pipe: no SIGKILL */
	}
	CHILD_CHECK(read(p2c, &go, 1) == 1, 21);
	if (mode == EXIT_PROCESS)
		_exit(0);	/* context, ring, regions, doorbells all up */
	io_uring_queue_exit(&ring);
	CHILD_CHECK(write(c2p, "E", 1) == 1, 22);
	CHILD_CHECK(read(p2c, &go, 1) == 1, 23);
	_exit(0);
}

/* On failure with the child alive: kill and reap it, then fail. */
#define ASSERT_CHILD(pid, cond, ...) do { \
	bool __ok = (cond); \
	if (!__ok) { \
		int __st; \
		kill((pid), SIGKILL); \
		hx_wait_child((pid), 10000, &__st); \
	} \
	ASSERT_TRUE(__ok) TH_LOG(__VA_ARGS__); \
} while (0)

static void exit_test(struct __test_metadata *_metadata,
		      FIXTURE_DATA(xuring) *self, enum exit_mode mode)
{
	const uint64_t pages = 2 * EXIT_LEN / PG;
	int nwait = mode == EXIT_SIGKILL ? 2 : 1;
	struct hcomm_stats s, want, now;
	int c2p[2], p2c[2], st, ret;
	pid_t pid;
	char sb[32];

	ASSERT_EQ(0, pipe2(c2p, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(p2c, O_CLOEXEC));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		close(c2p[0]);
		close(p2c[1]);
		close(self->fd);		/* the parent's context */
		close(self->ring.ring_fd);
		exit_child(c2p[1], p2c[0], mode);
		_exit(99);
	}
	close(c2p[1]);
	close(p2c[0]);

	ret = hx_pipe_wait(c2p[0], 'R', REAP_MS);
	ASSERT_CHILD(pid, ret == 0, "child did not get its operations "
		     "submitted: %s", strerror(-ret));
	ret = hx_stat_wait(HX_STAT(waits_pending),
			   self->open.waits_pending + nwait, SETTLE_MS, &s);
	ASSERT_CHILD(pid, ret == 0, "child's DB_WAIT(s) not parked: "
		     "waits_pending %llu, want %llu", ULL(s.waits_pending),
		     ULL(self->open.waits_pending + nwait));
	ASSERT_CHILD(pid, s.contexts == self->open.contexts + 1 &&
		     s.regions == self->open.regions + 2 &&
		     s.pinned_pages == self->open.pinned_pages + pages,
		     "child's context: contexts %llu regions %llu "
		     "pinned_pages %llu, want +1 +2 +%llu",
		     ULL(s.contexts), ULL(s.regions), ULL(s.pinned_pages),
		     ULL(pages));
	TH_LOG("child set up: %llu of %d transfers still active",
	       ULL(s.xfers_active - self->open.xfers_active), EXIT_NX);

	switch (mode) {
	case EXIT_RING:
		ASSERT_CHILD(pid, write(p2c[1], "g", 1) == 1, "pipe");
		ret = hx_pipe_wait(c2p[0], 'E', SETTLE_MS);
		ASSERT_CHILD(pid, ret == 0, "child did not exit its ring: %s",
			     strerror(-ret));
		/* IO_URING_F_CANCEL (6.7+) lets the ring's exit end them */
		if (hx_kernel_at_least(6, 7)) {
			ASSERT_STATS(want);
			want.xfers_active = self->open.xfers_active;
			want.waits_pending = self->open.waits_pending;
			ret = hcomm_gauges_wait(&want, &now, SETTLE_MS);
			if (ret > 0)
				hcomm_gauges_dump(stderr, "ring exited", &want,
						  &now);
			ASSERT_CHILD(pid, ret == 0, "the ring's exit did not "
				     "end its operations while the context "
				     "stays open: xfers_active %llu "
				     "waits_pending %llu", ULL(now.xfers_active),
				     ULL(now.waits_pending));
		} else {
			TH_LOG("kernel before 6.7 (no IO_URING_F_CANCEL): the "
			       "end of the ring alone is not checked");
		}
		ASSERT_CHILD(pid, write(p2c[1], "g", 1) == 1, "pipe");
		break;
	case EXIT_PROCESS:
		ASSERT_CHILD(pid, write(p2c[1], "g", 1) == 1, "pipe");
		break;
	case EXIT_SIGKILL:
		ASSERT_EQ(0, kill(pid, SIGKILL));
		break;
	}

	ret = hx_wait_child(pid, 60000, &st);
	ASSERT_EQ(0, ret) TH_LOG("child did not end within 60 s (%s)",
				 hx_status_str(st, sb, sizeof(sb)));
	if (mode == EXIT_SIGKILL) {
		ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
			TH_LOG("child: %s, want SIGKILL (its ioctl DB_WAIT "
			       "returned?)", hx_status_str(st, sb, sizeof(sb)));
	} else {
		ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
			TH_LOG("child failed: %s",
			       hx_status_str(st, sb, sizeof(sb)));
	}
	close(c2p[0]);
	close(p2c[1]);

	ret = hcomm_gauges_wait(&self->open, &now, 60000);
	if (ret > 0)
		hcomm_gauges_dump(stderr, "child gone", &self->open, &now);
	ASSERT_EQ(0, ret) TH_LOG("after the child's end: xfers_active %llu "
				 "waits_pending %llu regions %llu pinned_pages "
				 "%llu contexts %llu, want the values before "
				 "it", ULL(now.xfers_active),
				 ULL(now.waits_pending), ULL(now.regions),
				 ULL(now.pinned_pages), ULL(now.contexts));
}

/* io_uring_queue_exit() with a DB_WAIT and transfers pending, then exit. */
TEST_F_TIMEOUT(xuring, exit_ring_queue_exit, 300)
{
	exit_test(_metadata, self, EXIT_RING);
}

/* exit(0) with the ring, context, regions and doorbells all still up. */
TEST_F_TIMEOUT(xuring, exit_process_with_ring, 300)
{
	exit_test(_metadata, self, EXIT_PROCESS);
}

/*
 * SIGKILL with a thread blocked in an ioctl DB_WAIT and a ring's
 * operations pending.
 */
TEST_F_TIMEOUT(xuring, exit_sigkill, 300)
{
	exit_test(_metadata, self, EXIT_SIGKILL);
}

TEST_HARNESS_MAIN
