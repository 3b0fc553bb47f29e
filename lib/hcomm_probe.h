/* SPDX-License-Identifier: MIT */
/*
 * libhcomm internals: link probing and the choice of a transport per peer
 * and per message size (hcomm_probe.c).
 *
 * For each peer and each transport that can reach it the communicator
 * measures a ping-pong latency, a bandwidth at a large size and the errors
 * seen meanwhile (struct hcomm_link).  The cost of a message of s bytes on
 * a link is t(s) = lat + s / bw (the way UCX ranks transports); the route
 * of a peer is the lower envelope of those lines: a list of size ranges,
 * each with the transport that is cheapest there.  A link that saw errors
 * while it was probed is only used when no clean link reaches the peer.
 */
#ifndef LIBHCOMM_PROBE_H
#define LIBHCOMM_PROBE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "hcomm_int.h"

/* Transports, in the order of preference when nothing was measured. */
enum hcomm_xp_id {
	HCOMM_XP_KERNEL,
	HCOMM_XP_RDMA,
	HCOMM_XP_TCP,
	HCOMM_XP_MAX,
};

/* "kernel", "rdma", "tcp". */
HCOMM_HIDDEN const char *hcomm__xp_name(int xp);
/* The id of a transport name, or -1. */
HCOMM_HIDDEN int hcomm__xp_id(const char *name);

/*
 * struct hcomm_link - what is known of one transport towards one peer.
 * @usable:  the transport reaches the peer (set up and connected).
 * @probed:  @lat_us and @bw_mbps were measured (else unknown).
 * @lat_us:  one-way latency: half the median 8-byte round trip, in us.
 * @bw_mbps: bandwidth at the probe's large size, in MB/s (10^6 B/s).
 * @errors:  errors the transport counted during the probe.
 */
struct hcomm_link {
	int usable;
	int probed;
	double lat_us;
	double bw_mbps;
	uint64_t errors;
};

/* At most one range per transport: the envelope of lines has no more. */
#define HCOMM_ROUTE_MAX	HCOMM_XP_MAX

/*
 * struct hcomm_route - the transport of each message size towards a peer.
 * @n:       ranges in use (0: no transport reaches the peer).
 * @upto[i]: range i covers sizes below upto[i] (and at least upto[i-1]);
 *           the last is UINT64_MAX.
 * @xp[i]:   its transport.
 * @why:     how the choice was made ("measured", "forced by
 *           HCOMM_TRANSPORT", "not probed: preference order", "only
 *           link", "errors on ...").
 */
struct hcomm_route {
	unsigned int n;
	uint64_t upto[HCOMM_ROUTE_MAX];
	int xp[HCOMM_ROUTE_MAX];
	char why[96];
};

/*
 * Choose the route of one peer from its links (indexed by enum
 * hcomm_xp_id).  forced >= 0: that transport for every size if usable
 * (else no range, why says so).  Never fails.
 */
HCOMM_HIDDEN void hcomm__route_choose(const struct hcomm_link *links,
				      int forced, struct hcomm_route *rt);
/* The transport for a message of len bytes (-1 when none). */
static inline int hcomm__route_xp(const struct hcomm_route *rt, uint64_t len)
{
	unsigned int i;

	for (i = 0; i < rt->n; i++)
		if (len < rt->upto[i])
			return rt->xp[i];
	return -1;
}

/*
 * Probe budget, HCOMM_PROBE=off|quick|full (default quick):
 * @rtts round trips of 8 bytes for the latency, @bw_bytes moved (in
 * @bw_size messages) for the bandwidth, per peer and transport.
 */
enum hcomm_probe_mode { HCOMM_PROBE_OFF, HCOMM_PROBE_QUICK, HCOMM_PROBE_FULL };

struct hcomm_probe_budget {
	enum hcomm_probe_mode mode;
	unsigned int rtts;
	uint64_t bw_size;
	uint64_t bw_bytes;
};

/*
 * HCOMM_PROBE and HCOMM_TRANSPORT from the environment: *forced is -1
 * (auto) or a transport id.  0, or -HCOMM_ERR_INVAL naming the variable.
 */
HCOMM_HIDDEN int hcomm__probe_env(struct hcomm_probe_budget *b, int *forced);

/* The median of n doubles (sorts v). */
HCOMM_HIDDEN double hcomm__median(double *v, size_t n);

/*
 * One peer's line of the decision table, text ("rank 0 -> 2: ...") or a
 * JSON object (no trailing newline).
 */
HCOMM_HIDDEN void hcomm__route_print(FILE *f, int rank, int peer,
				     const struct hcomm_link *links,
				     const struct hcomm_route *rt);
HCOMM_HIDDEN void hcomm__route_json(FILE *f, int peer,
				    const struct hcomm_link *links,
				    const struct hcomm_route *rt);

#endif /* LIBHCOMM_PROBE_H */
