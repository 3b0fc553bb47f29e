/* SPDX-License-Identifier: MIT */
/*
 * libpypto: the tile graph, its static analysis (cycle check, levels,
 * components, critical path), placement onto devices and the DOT/JSON
 * dumps.  Graphs may have millions of tiles, so every walk here is
 * iterative and linear in tiles + edges.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pypto_int.h"

#define TILES_MAX	(1U << 26)
/* Headroom below UINT32_MAX so that counts and sums over edges stay safe
 * in 32 bits wherever the scheduler keeps them. */
#define EDGES_MAX	(1U << 31)
#define NONE		UINT32_MAX

/* ---- building ------------------------------------------------------ */

PYPTO_EXPORT int pypto_graph_create(struct pypto_graph **gp)
{
	struct pypto_graph *g;

	if (!gp)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_graph_create: "
				   "NULL pointer");
	*gp = NULL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return pypto__fail(PYPTO_ERR_NOMEM, "pypto_graph_create");
	*gp = g;
	return 0;
}

PYPTO_EXPORT void pypto_graph_destroy(struct pypto_graph *g)
{
	uint32_t i;

	if (!g)
		return;
	for (i = 0; i < g->n; i++) {
		free(g->tiles[i].consumers);
		free(g->tiles[i].xf);
		free(g->tiles[i].coll);
	}
	free(g->tiles);
	free(g->roots);
	free(g->eset);
	free(g->cycle);
	free(g);
}

static void set_name(struct pypto_tile *t, const char *name, uint32_t id)
{
	size_t len;

	if (!name) {
		snprintf(t->name, sizeof(t->name), "t%u", id);
		return;
	}
	len = strnlen(name, PYPTO_NAME_MAX);
	if (len >= PYPTO_NAME_MAX) {
		len = PYPTO_NAME_MAX - 1;
		/*
		 * Do not split a UTF-8 sequence (the dumps must stay valid
		 * UTF-8): if the first dropped byte continues a sequence,
		 * drop that sequence's lead bytes too (at most 3).
		 */
		while (len > PYPTO_NAME_MAX - 4 &&
		       ((unsigned char)name[len] & 0xc0) == 0x80)
			len--;
		if (((unsigned char)name[len] & 0xc0) == 0x80)
			len = PYPTO_NAME_MAX - 1;	/* not UTF-8 anyway */
	}
	memcpy(t->name, name, len);
	t->name[len] = '\0';
}

static int check_affinity(const char *who, int affinity)
{
	if (affinity < PYPTO_ANY_DEVICE)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: affinity %d (a device "
				   "index or PYPTO_ANY_DEVICE)", who, affinity);
	return 0;
}

/* Append a tile (the caller checked its arguments). */
static int new_tile(struct pypto_graph *g, const char *who, const char *name,
		    int kind, int affinity, struct pypto_tile **tp)
{
	struct pypto_tile *t;

	if (g->n >= TILES_MAX)
		return pypto__fail(PYPTO_ERR_LIMIT, "%s: graph already has %u "
				   "tiles (the limit)", who, g->n);
	if (g->n == g->cap) {
		uint32_t cap = g->cap ? g->cap * 2 : 64;

		if (cap > TILES_MAX)
			cap = TILES_MAX;
		t = realloc(g->tiles, (size_t)cap * sizeof(*t));
		if (!t)
			return pypto__fail(PYPTO_ERR_NOMEM, "%s: %u tiles", who,
					   cap);
		g->tiles = t;
		g->cap = cap;
	}
	t = &g->tiles[g->n];
	memset(t, 0, sizeof(*t));
	t->kind = (uint8_t)kind;
	t->affinity = affinity;
	t->device = -1;
	t->rank = PYPTO_RANK_TARGET;
	t->cost = 1.0;
	set_name(t, name, g->n);
	g->n++;
	g->validated = false;
	g->prepared_ndev = 0;
	g->rt_clean = false;
	*tp = t;
	return 0;
}

static int add_fn(struct pypto_graph *g, const char *who, const char *name,
		  int kind, pypto_fn fn, void *arg, int affinity)
{
	struct pypto_tile *t;
	int ret;

	if (!g)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: graph is NULL", who);
	if (!fn)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: function is NULL",
				   who);
	ret = check_affinity(who, affinity);
	if (ret < 0)
		return ret;
	ret = new_tile(g, who, name, kind, affinity, &t);
	if (ret < 0)
		return ret;
	t->fn = fn;
	t->arg = arg;
	return (int)(g->n - 1);
}

PYPTO_EXPORT int pypto_add_compute(struct pypto_graph *g, const char *name,
				   pypto_fn fn, void *arg, int affinity)
{
	return add_fn(g, "pypto_add_compute", name, PYPTO_COMPUTE, fn, arg,
		      affinity);
}

PYPTO_EXPORT int pypto_add_host(struct pypto_graph *g, const char *name,
				pypto_fn fn, void *arg, int affinity)
{
	return add_fn(g, "pypto_add_host", name, PYPTO_HOST, fn, arg,
		      affinity);
}

/* One pypto_xfer: its ranges must be well formed and not wrap around. */
static int check_xfer(const struct pypto_xfer *x, unsigned int i)
{
	static const char who[] = "pypto_add_transfer";
	uint64_t span, end;

	if (x->op != PYPTO_PUT && x->op != PYPTO_GET)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: xfer[%u]: op %u is "
				   "neither PYPTO_PUT nor PYPTO_GET", who, i,
				   x->op);
	if (!x->rows)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: xfer[%u]: 0 rows",
				   who, i);
	if (!x->row_bytes)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: xfer[%u]: row_bytes "
				   "is 0", who, i);
	if (!x->local)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: xfer[%u]: local is "
				   "NULL", who, i);
	if (x->rows > 1 && x->local_stride < x->row_bytes)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: xfer[%u]: "
				   "local_stride %llu < row_bytes %llu (rows "
				   "overlap)", who, i,
				   (unsigned long long)x->local_stride,
				   (unsigned long long)x->row_bytes);
	if (x->rows > 1 && x->win_stride < x->row_bytes)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: xfer[%u]: "
				   "win_stride %llu < row_bytes %llu (rows "
				   "overlap)", who, i,
				   (unsigned long long)x->win_stride,
				   (unsigned long long)x->row_bytes);
	if (__builtin_mul_overflow((uint64_t)(x->rows - 1), x->win_stride,
				   &span) ||
	    __builtin_add_overflow(span, x->row_bytes, &span) ||
	    __builtin_add_overflow(span, x->win_off, &end))
		return pypto__fail(PYPTO_ERR_INVAL, "%s: xfer[%u]: window "
				   "range overflows (win_off %llu, %u rows of "
				   "%llu, stride %llu)", who, i,
				   (unsigned long long)x->win_off, x->rows,
				   (unsigned long long)x->row_bytes,
				   (unsigned long long)x->win_stride);
	if (__builtin_mul_overflow((uint64_t)(x->rows - 1), x->local_stride,
				   &span) ||
	    __builtin_add_overflow(span, x->row_bytes, &span) ||
	    __builtin_add_overflow(span, (uint64_t)(uintptr_t)x->local,
				   &end) ||
	    end > UINTPTR_MAX)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: xfer[%u]: local "
				   "range overflows (local %p, %u rows of "
				   "%llu, stride %llu)", who, i, x->local,
				   x->rows, (unsigned long long)x->row_bytes,
				   (unsigned long long)x->local_stride);
	return 0;
}

PYPTO_EXPORT int pypto_add_transfer(struct pypto_graph *g, const char *name,
				    const struct pypto_xfer *x, unsigned int n,
				    int affinity)
{
	static const char who[] = "pypto_add_transfer";
	struct pypto_xfer *copy;
	struct pypto_tile *t;
	uint32_t ndesc = 0;
	uint64_t bytes = 0, b;
	unsigned int i;
	int ret;

	if (!g)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: graph is NULL", who);
	if (!x || !n)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: no transfers (x %p, "
				   "n %u)", who, (const void *)x, n);
	ret = check_affinity(who, affinity);
	if (ret < 0)
		return ret;
	for (i = 0; i < n; i++) {
		ret = check_xfer(&x[i], i);
		if (ret < 0)
			return ret;
		if (__builtin_add_overflow(ndesc, x[i].rows, &ndesc))
			return pypto__fail(PYPTO_ERR_LIMIT, "%s: more than %u "
					   "descriptors in one tile", who,
					   UINT32_MAX);
		if (__builtin_mul_overflow((uint64_t)x[i].rows, x[i].row_bytes,
					   &b) ||
		    __builtin_add_overflow(bytes, b, &bytes))
			return pypto__fail(PYPTO_ERR_LIMIT, "%s: total bytes "
					   "of the tile overflow 64 bits", who);
	}
	copy = calloc(n, sizeof(*copy));
	if (!copy)
		return pypto__fail(PYPTO_ERR_NOMEM, "%s: %u transfers", who,
				   n);
	memcpy(copy, x, (size_t)n * sizeof(*copy));
	ret = new_tile(g, who, name, PYPTO_TRANSFER, affinity, &t);
	if (ret < 0) {
		free(copy);
		return ret;
	}
	t->xf = copy;
	t->nxf = n;
	t->ndesc = ndesc;
	t->bytes = bytes;
	return (int)(g->n - 1);
}

/* [p, p + len) lies inside the address space (len > 0). */
static bool range_fits(const void *p, uint64_t len)
{
	uint64_t end;

	return !__builtin_add_overflow((uint64_t)(uintptr_t)p, len - 1, &end) &&
	       end <= UINTPTR_MAX;
}

/* [a, a + len) and [b, b + len) share a byte but do not start together. */
static bool ranges_overlap(const void *a, const void *b, uint64_t len)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return x != y && (x < y ? y - x < len : x - y < len);
}

static int check_allreduce(const void *send, const void *recv, size_t count,
			   enum hcomm_dtype dt, enum hcomm_redop op,
			   uint64_t *bytes)
{
	static const char who[] = "pypto_add_allreduce";
	size_t es = hcomm_dtype_size(dt);

	if (!send || !recv)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: %s is NULL", who,
				   send ? "recv" : "send");
	if (!count)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: 0 elements", who);
	if (!es)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: data type %d is no "
				   "enum hcomm_dtype", who, (int)dt);
	if (op < HCOMM_SUM || op >= HCOMM_REDOP__MAX)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: operation %d is no "
				   "enum hcomm_redop", who, (int)op);
	if (__builtin_mul_overflow((uint64_t)count, (uint64_t)es, bytes) ||
	    *bytes > SIZE_MAX || !range_fits(send, *bytes) ||
	    !range_fits(recv, *bytes))
		return pypto__fail(PYPTO_ERR_INVAL, "%s: %zu elements of %s "
				   "(%zu bytes each) do not fit the address "
				   "space at send %p, recv %p", who, count,
				   hcomm_dtype_name(dt), es, send, recv);
	if (ranges_overlap(send, recv, *bytes))
		return pypto__fail(PYPTO_ERR_INVAL, "%s: send %p and recv %p "
				   "overlap (%llu bytes each): in place is "
				   "send == recv", who, send, recv,
				   (unsigned long long)*bytes);
	return 0;
}

PYPTO_EXPORT int pypto_add_allreduce(struct pypto_graph *g, const char *name,
				     const void *send, void *recv,
				     size_t count, enum hcomm_dtype dt,
				     enum hcomm_redop op, int affinity)
{
	static const char who[] = "pypto_add_allreduce";
	struct pypto_coll *c;
	struct pypto_tile *t;
	uint64_t bytes = 0;
	int ret;

	if (!g)
		return pypto__fail(PYPTO_ERR_INVAL, "%s: graph is NULL", who);
	ret = check_allreduce(send, recv, count, dt, op, &bytes);
	if (ret < 0)
		return ret;
	ret = check_affinity(who, affinity);
	if (ret < 0)
		return ret;
	c = calloc(1, sizeof(*c));
	if (!c)
		return pypto__fail(PYPTO_ERR_NOMEM, "%s", who);
	c->send = send;
	c->recv = recv;
	c->count = count;
	c->dt = dt;
	c->op = op;
	c->seq = g->nar;
	ret = new_tile(g, who, name, PYPTO_ALLREDUCE, affinity, &t);
	if (ret < 0) {
		free(c);
		return ret;
	}
	t->coll = c;
	t->bytes = bytes;
	g->nar++;
	return (int)(g->n - 1);
}

/*
 * Edges already present, so that a repeated pypto_add_dep() is a no-op in
 * O(1) however wide a tile's fan-out: linear probing over 64-bit keys
 * (from << 32 | to), EDGE_EMPTY marking a free slot, load kept <= 1/2.
 */
#define EDGE_EMPTY	UINT64_MAX

static uint64_t edge_hash(uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return key;
}

/* True if key is in the set; *slot is where it is or would go. */
static bool edge_find(const struct pypto_graph *g, uint64_t key,
		      uint64_t *slot)
{
	uint64_t mask = g->ecap - 1, i;

	if (!g->ecap) {
		*slot = 0;
		return false;
	}
	for (i = edge_hash(key) & mask;; i = (i + 1) & mask) {
		if (g->eset[i] == key) {
			*slot = i;
			return true;
		}
		if (g->eset[i] == EDGE_EMPTY) {
			*slot = i;
			return false;
		}
	}
}

static int edge_grow(struct pypto_graph *g)
{
	uint64_t ncap = g->ecap ? g->ecap * 2 : 64, i, j, *ns, *old = g->eset;
	uint64_t ocap = g->ecap;

	ns = malloc(ncap * sizeof(*ns));
	if (!ns)
		return -1;
	for (i = 0; i < ncap; i++)
		ns[i] = EDGE_EMPTY;
	for (i = 0; i < ocap; i++) {
		if (old[i] == EDGE_EMPTY)
			continue;
		for (j = edge_hash(old[i]) & (ncap - 1); ns[j] != EDGE_EMPTY;
		     j = (j + 1) & (ncap - 1))
			;
		ns[j] = old[i];
	}
	g->eset = ns;
	g->ecap = ncap;
	free(old);
	return 0;
}

PYPTO_EXPORT int pypto_add_dep(struct pypto_graph *g, uint32_t from,
			       uint32_t to)
{
	struct pypto_tile *f;
	uint64_t key, slot;

	if (!g)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_add_dep: graph is "
				   "NULL");
	if (from >= g->n || to >= g->n)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_add_dep: %u -> %u: "
				   "tile %u out of range (%u tiles)", from, to,
				   from >= g->n ? from : to, g->n);
	f = &g->tiles[from];
	key = (uint64_t)from << 32 | to;
	if (edge_find(g, key, &slot))
		return 0;
	if (g->nedges >= EDGES_MAX)
		return pypto__fail(PYPTO_ERR_LIMIT, "pypto_add_dep: graph "
				   "already has %u edges (the limit)",
				   g->nedges);
	if (f->nconsumers == f->cap_consumers) {
		uint32_t cap = f->cap_consumers ? f->cap_consumers * 2 : 2;
		uint32_t *c;

		if (cap > EDGES_MAX)
			cap = EDGES_MAX;
		c = realloc(f->consumers, (size_t)cap * sizeof(*c));
		if (!c)
			return pypto__fail(PYPTO_ERR_NOMEM, "pypto_add_dep: "
					   "%u consumers of %s", cap, f->name);
		f->consumers = c;
		f->cap_consumers = cap;
	}
	if ((uint64_t)(g->nedges + 1) * 2 > g->ecap) {
		if (edge_grow(g))
			return pypto__fail(PYPTO_ERR_NOMEM, "pypto_add_dep: "
					   "edge set of %u edges", g->nedges);
		edge_find(g, key, &slot);
	}
	g->eset[slot] = key;
	f->consumers[f->nconsumers++] = to;
	g->tiles[to].ndeps++;
	g->nedges++;
	g->validated = false;
	g->prepared_ndev = 0;
	g->rt_clean = false;
	return 0;
}

PYPTO_EXPORT int pypto_set_cost(struct pypto_graph *g, uint32_t tile,
				double cost)
{
	if (!g || tile >= g->n)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_set_cost: no tile "
				   "%u", tile);
	if (!isfinite(cost) || cost < 0)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_set_cost: tile %s: "
				   "cost %g (finite, >= 0)",
				   g->tiles[tile].name, cost);
	g->tiles[tile].cost = cost;
	g->validated = false;
	g->prepared_ndev = 0;
	g->rt_clean = false;
	return 0;
}

PYPTO_EXPORT int pypto_graph_set_workload(struct pypto_graph *g,
					  enum pypto_workload wl,
					  unsigned int tile_size)
{
	if (!g)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_graph_set_workload: "
				   "graph is NULL");
	if ((unsigned int)wl > PYPTO_WL_ATTENTION)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_graph_set_workload: "
				   "workload %d", (int)wl);
	g->workload = wl;
	g->wl_tile_size = tile_size;
	g->validated = false;
	g->prepared_ndev = 0;
	g->rt_clean = false;
	return 0;
}

/* ---- accessors ----------------------------------------------------- */

PYPTO_EXPORT unsigned int pypto_graph_tiles(const struct pypto_graph *g)
{
	return g ? g->n : 0;
}

PYPTO_EXPORT unsigned int pypto_graph_edges(const struct pypto_graph *g)
{
	return g ? g->nedges : 0;
}

static const struct pypto_tile *get_tile(const struct pypto_graph *g,
					 uint32_t tile, const char *who)
{
	if (!g || tile >= g->n) {
		pypto__fail(PYPTO_ERR_INVAL, "%s: no tile %u (%u tiles)", who,
			    tile, g ? g->n : 0);
		return NULL;
	}
	return &g->tiles[tile];
}

PYPTO_EXPORT const char *pypto_tile_name(const struct pypto_graph *g,
					 uint32_t tile)
{
	const struct pypto_tile *t = get_tile(g, tile, "pypto_tile_name");

	return t ? t->name : NULL;
}

PYPTO_EXPORT int pypto_tile_kind(const struct pypto_graph *g, uint32_t tile)
{
	const struct pypto_tile *t = get_tile(g, tile, "pypto_tile_kind");

	return t ? t->kind : -PYPTO_ERR_INVAL;
}

/* Note: -PYPTO_ERR_INVAL for a bad id equals PYPTO_ANY_DEVICE (-1). */
PYPTO_EXPORT int pypto_tile_affinity(const struct pypto_graph *g,
				     uint32_t tile)
{
	const struct pypto_tile *t = get_tile(g, tile, "pypto_tile_affinity");

	return t ? t->affinity : -PYPTO_ERR_INVAL;
}

PYPTO_EXPORT int pypto_tile_set_rank(struct pypto_graph *g, uint32_t tile,
				     int rank)
{
	struct pypto_tile *t;

	if (!g || tile >= g->n)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_tile_set_rank: no "
				   "tile %u", tile);
	t = &g->tiles[tile];
	if (t->kind != PYPTO_TRANSFER)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_tile_set_rank: "
				   "tile %s is not a transfer", t->name);
	if (rank < PYPTO_RANK_TARGET)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_tile_set_rank: "
				   "tile %s: rank %d (PYPTO_RANK_TARGET or "
				   ">= 0)", t->name, rank);
	t->rank = rank;
	return 0;
}

PYPTO_EXPORT int pypto_tile_rank(const struct pypto_graph *g, uint32_t tile,
				 int *rank)
{
	const struct pypto_tile *t = get_tile(g, tile, "pypto_tile_rank");

	if (!t || !rank || t->kind != PYPTO_TRANSFER)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_tile_rank: tile %u "
				   "%s", tile, !t ? "does not exist" : !rank ?
				   "rank is NULL" : "is not a transfer");
	*rank = t->rank;
	return 0;
}

PYPTO_EXPORT unsigned int pypto_tile_inputs(const struct pypto_graph *g,
					    uint32_t tile)
{
	const struct pypto_tile *t = get_tile(g, tile, "pypto_tile_inputs");

	return t ? t->ndeps : 0;
}

PYPTO_EXPORT unsigned int pypto_tile_consumers(const struct pypto_graph *g,
					       uint32_t tile,
					       const uint32_t **ids)
{
	const struct pypto_tile *t = get_tile(g, tile, "pypto_tile_consumers");

	if (ids)
		*ids = t ? t->consumers : NULL;
	return t ? t->nconsumers : 0;
}

PYPTO_EXPORT int pypto_tile_level(const struct pypto_graph *g, uint32_t tile)
{
	const struct pypto_tile *t = get_tile(g, tile, "pypto_tile_level");

	if (!t)
		return -PYPTO_ERR_INVAL;
	if (!g->validated)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_tile_level: graph "
				   "not validated since its last change");
	return (int)t->level;
}

PYPTO_EXPORT int pypto_tile_component(const struct pypto_graph *g,
				      uint32_t tile)
{
	const struct pypto_tile *t = get_tile(g, tile, "pypto_tile_component");

	if (!t)
		return -PYPTO_ERR_INVAL;
	if (!g->validated)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_tile_component: "
				   "graph not validated since its last change");
	return (int)t->component;
}

PYPTO_EXPORT unsigned int pypto_graph_cycle(const struct pypto_graph *g,
					    uint32_t *ids, unsigned int max)
{
	if (!g)
		return 0;
	if (ids && max)
		memcpy(ids, g->cycle, (size_t)(max < g->ncycle ? max :
					       g->ncycle) * sizeof(*ids));
	return g->ncycle;
}

/* ---- validation ---------------------------------------------------- */

#define MSG_BUDGET	200	/* cycle names in pypto_errmsg() */

/* Append the names of g->cycle, closed ("a -> b -> a"), to msg at pos. */
static void cycle_names(const struct pypto_graph *g, char *msg, size_t size,
			size_t pos)
{
	uint32_t i, len = g->ncycle;
	size_t budget = MSG_BUDGET > pos + 40 ? MSG_BUDGET : pos + 40;

	for (i = 0; i <= len && pos < size; i++) {
		const char *name = g->tiles[g->cycle[i % len]].name;
		size_t need = strlen(name) + (i ? 4 : 0);

		if (pos + need > budget) {
			snprintf(msg + pos, size - pos, " -> ... (%u tiles)",
				 len);
			break;
		}
		pos += (size_t)snprintf(msg + pos, size - pos, "%s%s",
					i ? " -> " : "", name);
	}
}

/*
 * The Kahn sort left the tiles of every cycle, and everything they feed,
 * unsorted (indeg > 0): each of those has an unsorted input, so walking
 * from one to an unsorted input, and so on, must come back to a tile
 * already on the walk.  That loop is the cycle reported.
 */
static int find_cycle(struct pypto_graph *g, const uint32_t *indeg,
		      uint32_t *pred, uint32_t *mark)
{
	uint32_t n = g->n, t, i, x, k, len, lo, *cyc;
	char msg[256];
	size_t pos;

	for (t = 0; t < n; t++)
		pred[t] = mark[t] = NONE;
	for (t = 0; t < n; t++) {
		const struct pypto_tile *tt = &g->tiles[t];

		if (!indeg[t])
			continue;
		for (i = 0; i < tt->nconsumers; i++)
			if (pred[tt->consumers[i]] == NONE)
				pred[tt->consumers[i]] = t;
	}
	for (x = 0; !indeg[x]; x++)
		;
	for (k = 0; mark[x] == NONE; k++) {
		mark[x] = k;
		x = pred[x];
	}
	len = k - mark[x];
	cyc = malloc((size_t)len * sizeof(*cyc));
	if (!cyc)
		return pypto__fail(PYPTO_ERR_NOMEM, "graph has a dependency "
				   "cycle of %u tiles (no memory to list it)",
				   len);
	/* The walk went against the edges: store it the other way round. */
	for (i = len; i-- > 0; x = pred[x])
		cyc[i] = x;
	/* Start at the lowest id, so the report does not depend on where
	 * the walk entered the cycle. */
	for (lo = 0, i = 1; i < len; i++)
		if (cyc[i] < cyc[lo])
			lo = i;
	for (i = 0; i < len; i++)
		pred[i] = cyc[(lo + i) % len];
	memcpy(cyc, pred, (size_t)len * sizeof(*cyc));
	free(g->cycle);
	g->cycle = cyc;
	g->ncycle = len;

	pos = (size_t)snprintf(msg, sizeof(msg), "dependency cycle: ");
	cycle_names(g, msg, sizeof(msg), pos);
	return pypto__fail(PYPTO_DEADLOCK, "%s", msg);
}

/*
 * The allreduce issue order (sched.c): allreduce tiles are issued in id
 * order, each after the one before it, so "a has a lower id than b" acts
 * as an edge a -> b for issuing.  With the edges of the graph that must
 * stay acyclic: no allreduce tile may depend, through any path, on one
 * with a higher id.  In topological order, best[t] is the highest id of
 * an allreduce tile among t's ancestors (NONE: none) and via[t] the input
 * it came through; an allreduce tile below its best is the first tile of
 * a cycle: the path from that ancestor to it, closed by the issue order.
 */
static int check_coll_order(struct pypto_graph *g, const uint32_t *order,
			    uint32_t *best, uint32_t *via)
{
	uint32_t n = g->n, h, i, t, x, len, *cyc;
	char msg[256];
	size_t pos;

	if (g->nar < 2)
		return 0;
	for (t = 0; t < n; t++)
		best[t] = via[t] = NONE;
	for (h = 0; h < n; h++) {
		const struct pypto_tile *tt = &g->tiles[order[h]];
		uint32_t v = best[order[h]];

		t = order[h];
		if (tt->kind == PYPTO_ALLREDUCE) {
			if (v != NONE && v > t)
				goto cycle;
			v = t;
		}
		if (v == NONE)
			continue;
		for (i = 0; i < tt->nconsumers; i++) {
			uint32_t c = tt->consumers[i];

			if (best[c] == NONE || v > best[c]) {
				best[c] = v;
				via[c] = t;
			}
		}
	}
	return 0;
cycle:
	x = best[t];
	for (len = 1, i = t; i != x; i = via[i])
		len++;
	cyc = malloc((size_t)len * sizeof(*cyc));
	if (!cyc)
		return pypto__fail(PYPTO_ERR_NOMEM, "allreduce tile %s depends "
				   "on %s, issued after it (no memory to list "
				   "the path)", g->tiles[t].name,
				   g->tiles[x].name);
	for (h = len, i = t; h-- > 0; i = via[i])
		cyc[h] = i;
	free(g->cycle);
	g->cycle = cyc;
	g->ncycle = len;
	pos = (size_t)snprintf(msg, sizeof(msg), "allreduce tiles are issued "
			       "in id order, but %s (tile %u) depends on %s "
			       "(tile %u): cycle: ", g->tiles[t].name, t,
			       g->tiles[x].name, x);
	cycle_names(g, msg, sizeof(msg), pos);
	return pypto__fail(PYPTO_DEADLOCK, "%s", msg);
}

static uint32_t uf_find(uint32_t *parent, uint32_t x)
{
	while (parent[x] != x) {
		parent[x] = parent[parent[x]];	/* path halving */
		x = parent[x];
	}
	return x;
}

PYPTO_EXPORT int pypto_graph_validate(struct pypto_graph *g,
				      struct pypto_analysis *a)
{
	struct pypto_analysis an;
	uint32_t n, t, i, head, tail, *indeg, *order;
	double *dist;
	int ret = 0;

	if (!g)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_graph_validate: "
				   "graph is NULL");
	if (g->validated) {
		if (a)
			*a = g->analysis;
		return 0;
	}
	n = g->n;
	/* +1: malloc(0) may return NULL for the empty graph. */
	indeg = malloc(((size_t)n + 1) * sizeof(*indeg));
	order = malloc(((size_t)n + 1) * sizeof(*order));
	dist = malloc(((size_t)n + 1) * sizeof(*dist));
	if (!indeg || !order || !dist) {
		ret = pypto__fail(PYPTO_ERR_NOMEM, "pypto_graph_validate: %u "
				  "tiles", n);
		goto out;
	}

	memset(&an, 0, sizeof(an));
	an.tiles = n;
	an.edges = g->nedges;
	tail = 0;
	for (t = 0; t < n; t++) {
		g->tiles[t].level = 0;
		indeg[t] = g->tiles[t].ndeps;
		dist[t] = 0;
		an.total_cost += g->tiles[t].cost;
		if (!indeg[t]) {
			order[tail++] = t;
			an.roots++;
		}
	}
	/* Kahn: a tile is sorted once all its inputs are.  Its level is the
	 * longest path to it, dist the costliest path ending with it. */
	for (head = 0; head < tail; head++) {
		struct pypto_tile *tt = &g->tiles[order[head]];
		double d = dist[order[head]] + tt->cost;

		if (d > an.critical_path)
			an.critical_path = d;
		if (tt->level + 1 > an.levels)
			an.levels = tt->level + 1;
		for (i = 0; i < tt->nconsumers; i++) {
			uint32_t c = tt->consumers[i];

			if (g->tiles[c].level < tt->level + 1)
				g->tiles[c].level = tt->level + 1;
			if (dist[c] < d)
				dist[c] = d;
			if (!--indeg[c])
				order[tail++] = c;
		}
	}
	if (tail < n) {
		ret = find_cycle(g, indeg, order, (uint32_t *)dist);
		goto out;
	}
	/* dist is free from here: its n + 1 doubles hold 2n uint32_t. */
	ret = check_coll_order(g, order, (uint32_t *)dist,
			       (uint32_t *)dist + n);
	if (ret < 0)
		goto out;

	/* Width: indeg is all zero now; count tiles per level in it. */
	for (t = 0; t < n; t++)
		if (++indeg[g->tiles[t].level] > an.max_width)
			an.max_width = indeg[g->tiles[t].level];

	/* Weakly connected components: union-find whose root is always the
	 * lowest id of its set, so numbering by first appearance is dense
	 * and ordered by each component's lowest tile. */
	for (t = 0; t < n; t++)
		order[t] = t;
	for (t = 0; t < n; t++) {
		const struct pypto_tile *tt = &g->tiles[t];

		for (i = 0; i < tt->nconsumers; i++) {
			uint32_t ra = uf_find(order, t);
			uint32_t rb = uf_find(order, tt->consumers[i]);

			if (ra < rb)
				order[rb] = ra;
			else if (rb < ra)
				order[ra] = rb;
		}
	}
	for (t = 0; t < n; t++) {
		uint32_t r = uf_find(order, t);

		if (r == t)
			g->tiles[t].component = an.components++;
		else
			g->tiles[t].component = g->tiles[r].component;
	}

	free(g->cycle);
	g->cycle = NULL;
	g->ncycle = 0;
	g->analysis = an;
	g->validated = true;
	if (a)
		*a = an;
out:
	free(indeg);
	free(order);
	free(dist);
	return ret;
}

/* ---- placement ----------------------------------------------------- */

struct comp_order {
	const uint32_t *size;
};

static int cmp_comp(const void *pa, const void *pb, void *ctx)
{
	const struct comp_order *co = ctx;
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;

	if (co->size[a] != co->size[b])
		return co->size[a] > co->size[b] ? -1 : 1;
	return a < b ? -1 : a > b;
}

int pypto__graph_prepare(struct pypto_graph *g, uint32_t ndev)
{
	uint32_t n, t, i, d, ncomp, nlev, *order = NULL, *first = NULL;
	uint32_t *cnt = NULL, *size = NULL, *any = NULL, *idx = NULL;
	uint32_t *cdev = NULL;
	uint64_t *load = NULL;
	struct comp_order co;
	int ret;

	if (!g)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto__graph_prepare: "
				   "graph is NULL");
	if (!ndev)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto__graph_prepare: 0 "
				   "devices");
	ret = pypto_graph_validate(g, NULL);
	if (ret < 0)
		return ret;
	if (g->prepared_ndev == ndev)
		return 0;
	n = g->n;
	ncomp = g->analysis.components;
	nlev = g->analysis.levels;
	order = malloc(((size_t)n + 1) * sizeof(*order));
	first = malloc(((size_t)n + 1) * sizeof(*first));
	cnt = calloc((size_t)nlev + 1, sizeof(*cnt));
	size = calloc((size_t)ncomp + 1, sizeof(*size));
	any = calloc((size_t)ncomp + 1, sizeof(*any));
	idx = malloc(((size_t)ncomp + 1) * sizeof(*idx));
	cdev = malloc(((size_t)ncomp + 1) * sizeof(*cdev));
	load = calloc(ndev, sizeof(*load));
	if (!order || !first || !cnt || !size || !any || !idx || !cdev ||
	    !load) {
		ret = pypto__fail(PYPTO_ERR_NOMEM, "pypto__graph_prepare: %u "
				  "tiles, %u devices", n, ndev);
		goto out;
	}

	/* Tiles by level is a topological order: every input of a tile is
	 * on a lower level.  Counting sort, stable in id. */
	for (t = 0; t < n; t++)
		cnt[g->tiles[t].level + 1]++;
	for (i = 1; i <= nlev; i++)
		cnt[i] += cnt[i - 1];
	for (t = 0; t < n; t++)
		order[cnt[g->tiles[t].level]++] = t;

	/* First input of each tile: the one with the lowest id. */
	for (t = 0; t < n; t++)
		first[t] = NONE;
	for (t = 0; t < n; t++) {
		const struct pypto_tile *tt = &g->tiles[t];

		for (i = 0; i < tt->nconsumers; i++)
			if (first[tt->consumers[i]] == NONE)
				first[tt->consumers[i]] = t;
	}

	/* Fixed tiles first: they count in the load the components see. */
	for (t = 0; t < n; t++) {
		struct pypto_tile *tt = &g->tiles[t];

		size[tt->component]++;
		if (tt->affinity >= 0) {
			tt->device = (int32_t)((uint32_t)tt->affinity % ndev);
			load[tt->device]++;
		} else {
			tt->device = -1;
			any[tt->component]++;
		}
	}
	/* Largest component first onto the least loaded device. */
	for (i = 0; i < ncomp; i++)
		idx[i] = i;
	co.size = size;
	qsort_r(idx, ncomp, sizeof(*idx), cmp_comp, &co);
	for (i = 0; i < ncomp; i++) {
		uint32_t best = 0;

		for (d = 1; d < ndev; d++)
			if (load[d] < load[best])
				best = d;
		cdev[idx[i]] = best;
		load[best] += any[idx[i]];
	}
	/* Free tiles follow their first input (placed before them), or
	 * their component's device when they have none. */
	for (i = 0; i < n; i++) {
		struct pypto_tile *tt = &g->tiles[order[i]];

		if (tt->affinity >= 0)
			continue;
		if (first[order[i]] != NONE)
			tt->device = g->tiles[first[order[i]]].device;
		else
			tt->device = (int32_t)cdev[tt->component];
	}
	/* The roots, in id order, and the transfer tiles, for every run. */
	free(g->roots);
	g->roots = malloc(((size_t)g->analysis.roots + 1) *
			  sizeof(*g->roots));
	if (!g->roots) {
		ret = pypto__fail(PYPTO_ERR_NOMEM, "pypto__graph_prepare: %u "
				  "roots", g->analysis.roots);
		goto out;
	}
	g->nroots = 0;
	g->nxfer = 0;
	g->nsinks = 0;
	for (t = 0; t < n; t++) {
		if (!g->tiles[t].ndeps)
			g->roots[g->nroots++] = t;
		g->nsinks += !g->tiles[t].nconsumers;
		g->nxfer += g->tiles[t].kind == PYPTO_TRANSFER;
	}
	g->prepared_ndev = ndev;
	ret = 0;
out:
	free(order);
	free(first);
	free(cnt);
	free(size);
	free(any);
	free(idx);
	free(cdev);
	free(load);
	return ret;
}

/* ---- dumps --------------------------------------------------------- */

/* Inside a DOT "string": a newline becomes a label line break, other
 * control characters a blank, bytes that are not UTF-8 a '?'. */
static void put_dot_str(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t len;

	while (*s) {
		if (*s == '"' || *s == '\\') {
			fputc('\\', f);
			fputc(*s++, f);
		} else if (*s == '\n') {
			fputs("\\n", f);
			s++;
		} else if (*s < 0x20 || *s == 0x7f) {
			fputc(' ', f);
			s++;
		} else if ((len = pypto__utf8_len(s)) == 0) {
			fputc('?', f);
			s++;
		} else {
			fwrite(s, 1, len, f);
			s += len;
		}
	}
}

static const char *kind_fill(int kind)
{
	switch (kind) {
	case PYPTO_COMPUTE:
		return "shape=box, fillcolor=\"#9ecae1\"";
	case PYPTO_TRANSFER:
		return "shape=ellipse, fillcolor=\"#fdae6b\"";
	case PYPTO_HOST:
		return "shape=note, fillcolor=\"#a1d99b\"";
	case PYPTO_ALLREDUCE:
		return "shape=hexagon, fillcolor=\"#c5b0d5\"";
	}
	return "shape=box, fillcolor=\"#dddddd\"";
}

static int dump_dot(const struct pypto_graph *g, FILE *f)
{
	uint32_t t, i, *next = NULL;

	/* next[t]: t's successor on the known cycle, NONE off it. */
	if (g->ncycle) {
		next = malloc((size_t)g->n * sizeof(*next));
		if (!next)
			return pypto__fail(PYPTO_ERR_NOMEM, "pypto_dump_graph: "
					   "%u tiles", g->n);
		for (t = 0; t < g->n; t++)
			next[t] = NONE;
		for (i = 0; i < g->ncycle; i++)
			next[g->cycle[i]] = g->cycle[(i + 1) % g->ncycle];
	}
	fputs("digraph pypto {\n", f);
	if (g->ncycle)
		fprintf(f, "\tgraph [label=\"PYPTO_DEADLOCK: cycle of %u "
			"tiles\", labelloc=t, fontcolor=red];\n", g->ncycle);
	fputs("\tnode [style=filled];\n", f);
	for (t = 0; t < g->n; t++) {
		const struct pypto_tile *tt = &g->tiles[t];

		fprintf(f, "\tn%u [label=\"", t);
		put_dot_str(f, tt->name);
		fprintf(f, "\\n%s", pypto__kind_name(tt->kind));
		if (tt->coll)
			fprintf(f, " %s %s x %zu",
				hcomm_redop_name(tt->coll->op),
				hcomm_dtype_name(tt->coll->dt),
				tt->coll->count);
		fprintf(f, "\", %s%s];\n", kind_fill(tt->kind),
			next && next[t] != NONE ? ", color=red, penwidth=2" :
			"");
	}
	for (t = 0; t < g->n; t++) {
		const struct pypto_tile *tt = &g->tiles[t];

		for (i = 0; i < tt->nconsumers; i++)
			fprintf(f, "\tn%u -> n%u%s;\n", t, tt->consumers[i],
				next && next[t] == tt->consumers[i] ?
				" [color=red, penwidth=2]" : "");
	}
	fputs("}\n", f);
	free(next);
	return 0;
}

static void dump_json(const struct pypto_graph *g, FILE *f)
{
	uint32_t t, i;
	bool comma = false;

	fputs("{\"tiles\":[", f);
	for (t = 0; t < g->n; t++) {
		const struct pypto_tile *tt = &g->tiles[t];

		fprintf(f, "%s\n{\"id\":%u,\"name\":", t ? "," : "", t);
		pypto__json_str(f, tt->name, false);
		/* level is only known after a validation: -1 before. */
		fprintf(f, ",\"kind\":\"%s\",\"affinity\":%d,\"device\":%d,"
			"\"level\":%lld,\"inputs\":%u,\"bytes\":%llu",
			pypto__kind_name(tt->kind), tt->affinity, tt->device,
			g->validated ? (long long)tt->level : -1LL, tt->ndeps,
			(unsigned long long)tt->bytes);
		if (tt->coll)
			fprintf(f, ",\"count\":%zu,\"dtype\":\"%s\","
				"\"op\":\"%s\",\"issue\":%u",
				tt->coll->count,
				hcomm_dtype_name(tt->coll->dt),
				hcomm_redop_name(tt->coll->op), tt->coll->seq);
		fputc('}', f);
	}
	fputs("],\n\"edges\":[", f);
	for (t = 0; t < g->n; t++) {
		const struct pypto_tile *tt = &g->tiles[t];

		for (i = 0; i < tt->nconsumers; i++) {
			fprintf(f, "%s[%u,%u]", comma ? "," : "", t,
				tt->consumers[i]);
			comma = true;
		}
	}
	fputs("],\n\"cycle\":[", f);
	for (i = 0; i < g->ncycle; i++)
		fprintf(f, "%s%u", i ? "," : "", g->cycle[i]);
	fputs("]}\n", f);
}

PYPTO_EXPORT int pypto_dump_graph_file(const struct pypto_graph *g, FILE *f,
				       enum pypto_dump_fmt fmt)
{
	int ret = 0;

	if (!g || !f)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_dump_graph: %s is "
				   "NULL", g ? "file" : "graph");
	if (fmt != PYPTO_DUMP_DOT && fmt != PYPTO_DUMP_JSON)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_dump_graph: format "
				   "%d", (int)fmt);
	errno = 0;
	if (fmt == PYPTO_DUMP_DOT)
		ret = dump_dot(g, f);
	else
		dump_json(g, f);
	if (ret < 0)
		return ret;
	/* Flush here: a full disk shows up on the buffered data too. */
	if (fflush(f) != 0 || ferror(f))
		return pypto__fail(PYPTO_ERR_SYS, "pypto_dump_graph: write: %s",
				   strerror(errno ? errno : EIO));
	return 0;
}

struct dump_args {
	const struct pypto_graph *g;
	enum pypto_dump_fmt fmt;
};

static int dump_to(FILE *f, const void *arg)
{
	const struct dump_args *a = arg;

	return pypto_dump_graph_file(a->g, f, a->fmt);
}

PYPTO_EXPORT int pypto_dump_graph(const struct pypto_graph *g,
				  const char *path, enum pypto_dump_fmt fmt)
{
	struct dump_args a = { g, fmt };

	if (!g || !path)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_dump_graph: %s is "
				   "NULL", g ? "path" : "graph");
	if (fmt != PYPTO_DUMP_DOT && fmt != PYPTO_DUMP_JSON)
		return pypto__fail(PYPTO_ERR_INVAL, "pypto_dump_graph: format "
				   "%d", (int)fmt);
	return pypto__write_path(path, "pypto_dump_graph", dump_to, &a);
}
