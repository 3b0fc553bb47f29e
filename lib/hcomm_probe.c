/* SPDX-License-Identifier: MIT */
/*
 * libhcomm: the cost model that picks a transport per peer and message
 * size from probe measurements, the probe budget from the environment,
 * and the decision table (hcomm_probe.h).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hcomm_probe.h"

static const char *const xp_names[HCOMM_XP_MAX] = {
	[HCOMM_XP_KERNEL] = "kernel",
	[HCOMM_XP_RDMA] = "rdma",
	[HCOMM_XP_TCP] = "tcp",
};

const char *hcomm__xp_name(int xp)
{
	return xp >= 0 && xp < HCOMM_XP_MAX ? xp_names[xp] : "none";
}

HCOMM_EXPORT const char *hcomm_xport_name(int xport)
{
	return hcomm__xp_name(xport);
}

int hcomm__xp_id(const char *name)
{
	int i;

	for (i = 0; i < HCOMM_XP_MAX; i++)
		if (name && !strcmp(name, xp_names[i]))
			return i;
	return -1;
}

/* Microseconds per byte of a link. */
static double slope(const struct hcomm_link *l)
{
	return l->bw_mbps > 0 ? 1.0 / l->bw_mbps : INFINITY;
}

/* One range [.., upto) on xp. */
static void route_add(struct hcomm_route *rt, uint64_t upto, int xp)
{
	if (rt->n && rt->xp[rt->n - 1] == xp) {
		rt->upto[rt->n - 1] = upto;
		return;
	}
	rt->upto[rt->n] = upto;
	rt->xp[rt->n] = xp;
	rt->n++;
}

/*
 * The lower envelope of t_i(s) = lat_i + s * slope_i over s >= 0 for the
 * links in cand[]: start with the cheapest at s = 0, then follow the
 * earliest crossing by a line of smaller slope.  A line is never taken
 * twice (slopes only decrease), so there are at most HCOMM_XP_MAX ranges.
 */
static void envelope(const struct hcomm_link *links, const int *cand, int nc,
		     struct hcomm_route *rt)
{
	double s0 = 0;
	uint64_t lo = 0, up;
	int cur = -1, i;

	for (i = 0; i < nc; i++) {
		const struct hcomm_link *l = &links[cand[i]];

		if (cur < 0 || l->lat_us < links[cur].lat_us ||
		    (l->lat_us == links[cur].lat_us &&
		     slope(l) < slope(&links[cur])))
			cur = cand[i];
	}
	for (;;) {
		double best = INFINITY;
		int next = -1;

		for (i = 0; i < nc; i++) {
			const struct hcomm_link *l = &links[cand[i]];
			double sc;

			if (slope(l) >= slope(&links[cur]))
				continue;
			sc = (l->lat_us - links[cur].lat_us) /
			     (slope(&links[cur]) - slope(l));
			if (sc < s0)
				sc = s0;
			if (sc < best || (sc == best && next >= 0 &&
					  slope(l) < slope(&links[next]))) {
				best = sc;
				next = cand[i];
			}
		}
		if (next < 0 || best >= 1.8e19) {
			route_add(rt, UINT64_MAX, cur);
			return;
		}
		up = (uint64_t)ceil(best);
		if (up > lo) {		/* else [lo, up) is empty */
			route_add(rt, up, cur);
			lo = up;
		}
		s0 = best;
		cur = next;
	}
}

void hcomm__route_choose(const struct hcomm_link *links, int forced,
			 struct hcomm_route *rt)
{
	int cand[HCOMM_XP_MAX], nc = 0, nprobed = 0, i;
	const char *dirty = NULL;

	memset(rt, 0, sizeof(*rt));
	if (forced >= 0 && forced < HCOMM_XP_MAX) {
		if (links[forced].usable) {
			route_add(rt, UINT64_MAX, forced);
			snprintf(rt->why, sizeof(rt->why),
				 "forced by HCOMM_TRANSPORT=%s",
				 hcomm__xp_name(forced));
		} else {
			snprintf(rt->why, sizeof(rt->why),
				 "HCOMM_TRANSPORT=%s does not reach this peer",
				 hcomm__xp_name(forced));
		}
		return;
	}
	for (i = 0; i < HCOMM_XP_MAX; i++)
		if (links[i].usable && !links[i].errors)
			cand[nc++] = i;
	if (!nc) {
		for (i = 0; i < HCOMM_XP_MAX; i++)
			if (links[i].usable)
				cand[nc++] = i;
	} else {
		for (i = 0; i < HCOMM_XP_MAX; i++)
			if (links[i].usable && links[i].errors)
				dirty = hcomm__xp_name(i);
	}
	if (!nc) {
		snprintf(rt->why, sizeof(rt->why), "no transport reaches it");
		return;
	}
	for (i = 0; i < nc; i++)
		if (links[cand[i]].probed && links[cand[i]].bw_mbps > 0)
			cand[nprobed++] = cand[i];
	if (!nprobed) {
		/* nothing measured: the preference order (ids ascend) */
		route_add(rt, UINT64_MAX, cand[0]);
		snprintf(rt->why, sizeof(rt->why), nc > 1 ?
			 "not probed: preference order" : "only link");
		return;
	}
	envelope(links, cand, nprobed, rt);
	snprintf(rt->why, sizeof(rt->why), "%s%s%s",
		 nprobed > 1 ? "measured: lowest lat + size/bw" : "only link",
		 dirty ? "; errors on " : "", dirty ? dirty : "");
}

int hcomm__probe_env(struct hcomm_probe_budget *b, int *forced)
{
	const char *p = getenv("HCOMM_PROBE");
	const char *t = getenv("HCOMM_TRANSPORT");

	*b = (struct hcomm_probe_budget){
		.mode = HCOMM_PROBE_QUICK, .rtts = 64,
		.bw_size = 256 << 10, .bw_bytes = 2 << 20,
	};
	if (p && !strcmp(p, "off")) {
		b->mode = HCOMM_PROBE_OFF;
		b->rtts = 0;
		b->bw_bytes = 0;
	} else if (p && !strcmp(p, "full")) {
		b->mode = HCOMM_PROBE_FULL;
		b->rtts = 500;
		b->bw_size = 1 << 20;
		b->bw_bytes = 32 << 20;
	} else if (p && strcmp(p, "quick")) {
		return hcomm__fail(HCOMM_ERR_INVAL, 0, "HCOMM_PROBE=\"%.32s\": "
				   "use off, quick or full", p);
	}
	*forced = -1;
	if (t && strcmp(t, "auto")) {
		*forced = hcomm__xp_id(t);
		if (*forced < 0)
			return hcomm__fail(HCOMM_ERR_INVAL, 0,
					   "HCOMM_TRANSPORT=\"%.32s\": use "
					   "auto, kernel, rdma or tcp", t);
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double hcomm__median(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n & 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* "64K", "1M", "inf": a range bound for people. */
static void fmt_size(char *buf, size_t len, uint64_t v)
{
	if (v == UINT64_MAX)
		snprintf(buf, len, "inf");
	else if (v >= (1ULL << 20) && !(v & ((1ULL << 20) - 1)))
		snprintf(buf, len, "%lluM", (unsigned long long)(v >> 20));
	else if (v >= 1024 && !(v & 1023))
		snprintf(buf, len, "%lluK", (unsigned long long)(v >> 10));
	else
		snprintf(buf, len, "%llu", (unsigned long long)v);
}

void hcomm__route_print(FILE *f, int rank, int peer,
			const struct hcomm_link *links,
			const struct hcomm_route *rt)
{
	char lo[24] = "0", hi[24];
	unsigned int i;
	int x;

	fprintf(f, "rank %d -> %d:", rank, peer);
	for (x = 0; x < HCOMM_XP_MAX; x++) {
		const struct hcomm_link *l = &links[x];

		if (!l->usable)
			fprintf(f, " %s -", hcomm__xp_name(x));
		else if (!l->probed)
			fprintf(f, " %s (not probed)", hcomm__xp_name(x));
		else
			fprintf(f, " %s %.1f us %.1f MB/s %llu err",
				hcomm__xp_name(x), l->lat_us, l->bw_mbps,
				(unsigned long long)l->errors);
		fputc(x + 1 < HCOMM_XP_MAX ? ',' : ';', f);
	}
	if (!rt->n)
		fprintf(f, " none");
	for (i = 0; i < rt->n; i++) {
		fmt_size(hi, sizeof(hi), rt->upto[i]);
		fprintf(f, " [%s, %s) %s", lo, hi, hcomm__xp_name(rt->xp[i]));
		snprintf(lo, sizeof(lo), "%s", hi);
	}
	fprintf(f, " (%s)\n", rt->why);
}

void hcomm__route_json(FILE *f, int peer, const struct hcomm_link *links,
		       const struct hcomm_route *rt)
{
	unsigned int i;
	int x;

	fprintf(f, "{\"peer\": %d, \"links\": {", peer);
	for (x = 0; x < HCOMM_XP_MAX; x++) {
		const struct hcomm_link *l = &links[x];

		fprintf(f, "%s\"%s\": {\"usable\": %s, \"probed\": %s",
			x ? ", " : "", hcomm__xp_name(x),
			l->usable ? "true" : "false",
			l->probed ? "true" : "false");
		if (l->probed)
			fprintf(f, ", \"lat_us\": %.3f, \"bw_mbps\": %.3f, "
				"\"errors\": %llu", l->lat_us, l->bw_mbps,
				(unsigned long long)l->errors);
		fputc('}', f);
	}
	fprintf(f, "}, \"route\": [");
	for (i = 0; i < rt->n; i++) {
		fprintf(f, "%s{\"below\": ", i ? ", " : "");
		if (rt->upto[i] == UINT64_MAX)
			fprintf(f, "null");
		else
			fprintf(f, "%llu", (unsigned long long)rt->upto[i]);
		fprintf(f, ", \"transport\": \"%s\"}",
			hcomm__xp_name(rt->xp[i]));
	}
	/* why is ours: no quotes or backslashes in it */
	fprintf(f, "], \"why\": \"%s\"}", rt->why);
}
