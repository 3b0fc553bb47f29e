/* SPDX-License-Identifier: GPL-2.0 */
/*
 * QoS scheduling of the transfer engine: which context's chunk is copied
 * next.  Pure logic over plain structs; the caller (hcomm_xfer.c) holds the
 * engine lock around every call, so nothing here locks, sleeps or
 * allocates, and the KUnit suite can drive it directly.
 *
 * The shares and the virtual-time rules are described at the top of
 * hcomm_qos.c.
 */
#ifndef _HCOMM_QOS_H
#define _HCOMM_QOS_H

#include <linux/bits.h>
#include <linux/types.h>
#include <linux/list.h>

#define HCOMM_QOS_MAX_PRIO	7

/* Shares are kept in parts per million of the engine. */
#define HCOMM_QOS_SCALE		1000000U

/* One charge counts at most this many bytes of virtual time (1 TiB). */
#define HCOMM_QOS_MAX_CHARGE	BIT_ULL(40)

/**
 * struct hcomm_qos_class - the scheduling state of one context.
 * @node:     entry in hcomm_qos_sched.active while @active.
 * @min_rate: percent of the engine guaranteed while the class has work.
 * @max_rate: percent never exceeded while another class has work that is
 *            not itself held at its @max_rate.
 * @priority: 0 .. HCOMM_QOS_MAX_PRIO; breaks ties, higher first.
 * @active:   the class has work queued (is in the active list).
 * @vtime:    virtual finish time: service received divided by the share
 *            it is entitled to, in the scheduler's units.
 * @served:   bytes charged since the class last became active.
 * @share:    target share of the engine in parts per HCOMM_QOS_SCALE;
 *            current while @active and hcomm_qos_sched.shares_valid.
 * @idle_vclock: hcomm_qos_sched.vclock when the class last went idle
 *            (0 for a new class).
 */
struct hcomm_qos_class {
	struct list_head node;
	u32 min_rate;
	u32 max_rate;
	u32 priority;
	bool active;
	u64 vtime;
	u64 served;
	u32 share;
	u64 idle_vclock;
};

/**
 * struct hcomm_qos_sched - the engine-wide scheduler.
 * @active:    classes with work.
 * @nr_active: entries in @active.
 * @vclock:    virtual time of the scheduler (smallest @vtime served last);
 *             a class that becomes active starts here, so idle time earns
 *             no credit.
 * @shares_valid: the cached shares of the active classes are current.
 */
struct hcomm_qos_sched {
	struct list_head active;
	unsigned int nr_active;
	u64 vclock;
	bool shares_valid;
};

void hcomm_qos_sched_init(struct hcomm_qos_sched *s);
void hcomm_qos_class_init(struct hcomm_qos_class *c);
int hcomm_qos_validate(u32 min_rate, u32 max_rate, u32 priority);
void hcomm_qos_set(struct hcomm_qos_sched *s, struct hcomm_qos_class *c,
		   u32 min_rate, u32 max_rate, u32 priority);
void hcomm_qos_activate(struct hcomm_qos_sched *s, struct hcomm_qos_class *c);
void hcomm_qos_deactivate(struct hcomm_qos_sched *s, struct hcomm_qos_class *c);
struct hcomm_qos_class *hcomm_qos_pick(struct hcomm_qos_sched *s);
void hcomm_qos_charge(struct hcomm_qos_sched *s, struct hcomm_qos_class *c,
		      u64 bytes);
u32 hcomm_qos_share(struct hcomm_qos_sched *s, struct hcomm_qos_class *c);

#endif /* _HCOMM_QOS_H */
