/* SPDX-License-Identifier: GPL-2.0 */
/*
 * QoS scheduling of the transfer engine: which context's chunk is copied
 * next.  Pure logic over plain structs; the caller (hcomm_xfer.c) holds the
 * engine lock around every call except hcomm_qos_user_alloc() and
 * hcomm_qos_user_free(), so nothing else here locks, sleeps or allocates,
 * and the KUnit suite can drive it directly.
 *
 * Two levels: users (struct hcomm_qos_user, one per uid) share the engine,
 * then the contexts (struct hcomm_qos_class) of one user share that user's
 * part.  The shares and the virtual-time rules are described at the top of
 * hcomm_qos.c and in Documentation/qos.rst.
 */
#ifndef _HCOMM_QOS_H
#define _HCOMM_QOS_H

#include <linux/bits.h>
#include <linux/types.h>
#include <linux/list.h>
#include <linux/uidgid.h>

#define HCOMM_QOS_MAX_PRIO	7

/* Shares are kept in parts per million of the engine. */
#define HCOMM_QOS_SCALE		1000000U

/* One charge counts at most this many bytes of virtual time (1 TiB). */
#define HCOMM_QOS_MAX_CHARGE	BIT_ULL(40)

struct hcomm_qos_user;

/**
 * struct hcomm_qos_class - the scheduling state of one context, or the
 *	top-level entry of one user (hcomm_qos_user.top).
 * @node:     entry in the active list of its level while @active: the
 *            scheduler's for a user's entry or a class of no user, the
 *            user's for a class of a user.
 * @user:     the user the class belongs to (hcomm_qos_attach()); NULL for
 *            a class of no user, which competes at the top level as if it
 *            were a user of its own, and for a user's top-level entry.
 * @group:    this is a user's top-level entry (hcomm_qos_user.top).
 * @min_rate: percent of the engine guaranteed while the class has work.
 *            For a user's entry: the sum over its active classes (at most
 *            100), set when the shares are computed.
 * @max_rate: percent never exceeded while another class has work that is
 *            not itself held at its @max_rate.  For a user's entry: the
 *            sum over its active classes, at most 100.
 * @priority: 0 .. HCOMM_QOS_MAX_PRIO; breaks ties, higher first.  For a
 *            user's entry: the highest of its active classes.
 * @active:   the class has work queued (is in an active list).
 * @vtime:    virtual finish time: service received divided by the share
 *            it is entitled to.  A class of a user counts it on its user's
 *            clock (hcomm_qos_user.vclock), every other entry on the
 *            scheduler's.
 * @served:   bytes charged since the class last became active.
 * @share:    target share of the engine in parts per HCOMM_QOS_SCALE;
 *            current while @active and hcomm_qos_sched.shares_valid.
 * @idle_vclock: the clock of its level when the class last went idle
 *            (0 for a new class).
 * @held:     set and cleared by the caller: the class may not be picked
 *            now (it holds all the engine it may use at once); it stays
 *            active, keeps its share and its virtual time.  A user's entry
 *            is passed over while all its active classes are held.
 */
struct hcomm_qos_class {
	struct list_head node;
	struct hcomm_qos_user *user;
	bool group;
	u32 min_rate;
	u32 max_rate;
	u32 priority;
	bool active;
	u64 vtime;
	u64 served;
	u32 share;
	u64 idle_vclock;
	bool held;
};

/**
 * struct hcomm_qos_user - the contexts of one uid, scheduled as one.
 * @top:     the user's entry in the scheduler's active list; its vtime
 *           measures the service of all the user's classes together.
 * @link:    entry in hcomm_qos_sched.users.
 * @active:  the user's classes with work.
 * @uid:     the user (the opener's effective uid).
 * @refs:    classes attached; the user is freed with the last one.
 * @nr_active: entries in @active.
 * @min_sum: sum of the min_rate of all attached classes, active or not:
 *           what the user has reserved (admission, hcomm_qos_admit()).
 * @vclock:  virtual time among the user's classes.
 */
struct hcomm_qos_user {
	struct hcomm_qos_class top;
	struct list_head link;
	struct list_head active;
	kuid_t uid;
	unsigned int refs;
	unsigned int nr_active;
	u32 min_sum;
	u64 vclock;
};

/**
 * struct hcomm_qos_sched - the engine-wide scheduler.
 * @active:    top-level entries with work: users' entries and classes of
 *             no user.
 * @users:     every user with an attached class.
 * @nr_active: active classes (of all users).
 * @min_sum:   sum of the min_rate of all classes (admission).
 * @vclock:    virtual time of the top level (smallest @vtime served last);
 *             an entry that becomes active starts here, so idle time earns
 *             no credit.
 * @shares_valid: the cached shares of the active entries are current.
 */
struct hcomm_qos_sched {
	struct list_head active;
	struct list_head users;
	unsigned int nr_active;
	u32 min_sum;
	u64 vclock;
	bool shares_valid;
};

void hcomm_qos_sched_init(struct hcomm_qos_sched *s);
void hcomm_qos_class_init(struct hcomm_qos_class *c);
int hcomm_qos_validate(u32 min_rate, u32 max_rate, u32 priority);
void hcomm_qos_set(struct hcomm_qos_sched *s, struct hcomm_qos_class *c,
		   u32 min_rate, u32 max_rate, u32 priority);
int hcomm_qos_admit(struct hcomm_qos_sched *s, struct hcomm_qos_class *c,
		    u32 min_rate, u32 user_limit);
void hcomm_qos_activate(struct hcomm_qos_sched *s, struct hcomm_qos_class *c);
void hcomm_qos_deactivate(struct hcomm_qos_sched *s, struct hcomm_qos_class *c);
struct hcomm_qos_class *hcomm_qos_pick(struct hcomm_qos_sched *s);
void hcomm_qos_charge(struct hcomm_qos_sched *s, struct hcomm_qos_class *c,
		      u64 bytes);
u32 hcomm_qos_share(struct hcomm_qos_sched *s, struct hcomm_qos_class *c);

void hcomm_qos_user_init(struct hcomm_qos_user *u, kuid_t uid);
struct hcomm_qos_user *hcomm_qos_user_alloc(kuid_t uid, gfp_t gfp);
void hcomm_qos_user_free(struct hcomm_qos_user *u);
void hcomm_qos_attach(struct hcomm_qos_sched *s, struct hcomm_qos_class *c,
		      struct hcomm_qos_user **spare);
struct hcomm_qos_user *hcomm_qos_detach(struct hcomm_qos_sched *s,
					struct hcomm_qos_class *c);

#endif /* _HCOMM_QOS_H */
