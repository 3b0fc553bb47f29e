// SPDX-License-Identifier: GPL-2.0
/*
 * QoS scheduler of the transfer engine: start-time fair queueing of chunks,
 * on two levels.  The users (uid) with work share the engine first; the
 * contexts (classes) of one user then share that user's part.  A class
 * that was never attached to a user (hcomm_qos_attach()) competes at the
 * top level as a user of its own.
 *
 * Target shares.  Each active entry of a level has a weight, its min_rate,
 * or 1 when its min_rate is 0.  A level's part T of the engine (all of it
 * at the top, the user's share inside a user) is divided among its active
 * entries as
 *
 *	share(c) = clamp(L * weight(c), min_rate(c), max_rate(c))
 *
 * with the one level L at which the shares add up to T.  That is
 * water-filling: shares proportional to weight; an entry whose proportional
 * share exceeds its max_rate is held at its max_rate and the excess goes to
 * the others in proportion to their weight, repeatedly.  min_rate and
 * max_rate are always percent of the whole engine, at both levels.
 *
 * A user's top-level entry has, as min_rate, the sum of the min_rates of its
 * active classes; as max_rate the sum of their max_rates; both at most 100;
 * as priority the highest of theirs.  So a user with N default classes
 * weighs as much as a user with one: opening more files buys no more of
 * the engine, and a min_rate still guarantees its class its part because
 * the user's share covers the sum of its classes' min_rates.
 *
 * Because the caller admits min_rates only while they add up to at most
 * 100 % (hcomm_qos_admit()), no class gets less than its min_rate.  That
 * floor matters only when the min_rates plus one per entry without a
 * min_rate exceed T; then every entry with a min_rate gets exactly it and
 * the entries without one split the rest equally.  No share is below one
 * part per million, so no class stops completely (a min_rate of 100 next to
 * another user gets 99.9999 %).
 *
 * Every entry held at its max_rate.  When the max_rates of a level's active
 * entries add up to less than T, no level L fills it.  The engine does not
 * idle: the shares are then the max_rates scaled up to add up to T (a
 * single active class gets all of it).  This is the only case in which a
 * class is served beyond its max_rate, and it happens only while every
 * other class with work is itself served beyond its max_rate.
 *
 * Virtual time.  hcomm_qos_charge() advances the class's vtime by the bytes
 * served divided by its share (bytes * HCOMM_QOS_SCALE / share), and its
 * user's vtime by the bytes divided by the user's share.  hcomm_qos_pick()
 * takes the active top-level entry with the smallest vtime (ties go to the
 * higher priority, then to the entry that became active first); if that is
 * a user, the user's active class with the smallest vtime on the user's
 * own clock.  The vclock of a level is the vtime of the entry picked last;
 * an entry that becomes active starts at max(its vtime, vclock), so idle
 * time earns no credit while service it received beyond its share just
 * before it went idle is still owed.  The user's debt is on the user, not
 * on a class: closing a context and opening another does not wipe it out.
 * Over any interval in which a set of classes stays active, each user's
 * and each class's service differs from its share of the total by at most
 * about one chunk per class.
 *
 * A class the caller marks held (hcomm_qos_class.held: the engine gives no
 * context more slots than its share of them) is passed over by the pick
 * but stays active with its share and virtual time: it is not charged for
 * the wait, so it is picked first once it lets go, and the entries that
 * were picked meanwhile did not take its share away.
 *
 * Virtual times are compared as differences, so the u64 counters may wrap
 * around.  An idle entry's vtime is measured from the vclock at which it
 * went idle, so a long idle time cannot make it look ahead of vclock by
 * more than it was owed.
 *
 * The shares depend only on the active sets and the classes' parameters,
 * so they are recomputed lazily, once after either changes: O(active
 * classes) per call, no allocation, no sleeping.  The caller serialises all
 * calls but hcomm_qos_user_alloc() and hcomm_qos_user_free().
 *
 * Admission.  The min_rates of all classes add up to at most 100, and the
 * min_rates of the classes of one user to at most the caller's limit for
 * that user (hcomm_qos_admit()).
 */
#include <linux/kernel.h>
#include <linux/errno.h>
#include <linux/math64.h>
#include <linux/minmax.h>
#include <linux/bug.h>
#include <linux/slab.h>
#include <kunit/visibility.h>

#include "hcomm_qos.h"

/* Parts per HCOMM_QOS_SCALE in one percent. */
#define HCOMM_QOS_PCT	(HCOMM_QOS_SCALE / 100)

/* Is virtual time @a earlier than @b (wrap-safe)? */
static bool hcomm_qos_before(u64 a, u64 b)
{
	return (s64)(a - b) < 0;
}

static u32 hcomm_qos_weight(const struct hcomm_qos_class *c)
{
	return c->min_rate ? c->min_rate : 1;
}

static struct hcomm_qos_user *hcomm_qos_group(struct hcomm_qos_class *t)
{
	return container_of(t, struct hcomm_qos_user, top);
}

/*
 * Every entry with a min_rate gets exactly it; the entries without one
 * split what is left of @total equally.  Used when L <= 1 % per unit of
 * weight.  Should the min_rates exceed @total (never after admission),
 * they are scaled down to fill it.
 */
static void hcomm_qos_fill_floor(struct list_head *list, u64 total,
				 u32 sum_min, u32 nr_zero)
{
	u64 mins = (u64)sum_min * HCOMM_QOS_PCT, rest = 0;
	struct hcomm_qos_class *c;

	if (mins > total) {
		list_for_each_entry(c, list, node)
			c->share = div_u64(c->min_rate * total, sum_min);
		return;
	}
	if (nr_zero)
		rest = div_u64(total - mins, nr_zero);
	list_for_each_entry(c, list, node)
		c->share = c->min_rate ? c->min_rate * HCOMM_QOS_PCT : rest;
}

/* Every entry at its max_rate, scaled up to fill @total. */
static void hcomm_qos_fill_caps(struct list_head *list, u64 total,
				u32 sum_max)
{
	struct hcomm_qos_class *c;

	list_for_each_entry(c, list, node)
		c->share = div_u64(c->max_rate * total, sum_max);
}

/*
 * Proportional to weight, capping at max_rate and handing the excess to
 * the uncapped entries until no uncapped entry exceeds its max_rate.  Only
 * called when the max_rates add up to more than @total, so at least one
 * entry stays uncapped.
 */
static void hcomm_qos_fill_weighted(struct list_head *list, u64 total)
{
	struct hcomm_qos_class *c;
	u64 rest = total, wsum = 0;
	bool capped;

	list_for_each_entry(c, list, node) {
		c->share = 0;		/* 0: not capped (yet) */
		wsum += hcomm_qos_weight(c);
	}
	do {
		capped = false;
		list_for_each_entry(c, list, node) {
			u64 cap = (u64)c->max_rate * HCOMM_QOS_PCT;

			if (c->share || !wsum)
				continue;
			/* rest * w / wsum > cap, without dividing */
			if (rest * hcomm_qos_weight(c) > cap * wsum) {
				c->share = cap;
				rest -= cap;
				wsum -= hcomm_qos_weight(c);
				capped = true;
			}
		}
	} while (capped);
	list_for_each_entry(c, list, node)
		if (!c->share && wsum)
			c->share = div64_u64(rest * hcomm_qos_weight(c), wsum);
}

/* Divide @total parts per million among the active entries of @list. */
static void hcomm_qos_fill(struct list_head *list, u64 total)
{
	u32 sum_min = 0, sum_max = 0, nr_zero = 0;
	struct hcomm_qos_class *c;

	list_for_each_entry(c, list, node) {
		sum_min += c->min_rate;
		sum_max += c->max_rate;
		if (!c->min_rate)
			nr_zero++;
	}
	if ((u64)(sum_min + nr_zero) * HCOMM_QOS_PCT >= total)
		hcomm_qos_fill_floor(list, total, sum_min, nr_zero);
	else if ((u64)sum_max * HCOMM_QOS_PCT <= total)
		hcomm_qos_fill_caps(list, total, sum_max);
	else
		hcomm_qos_fill_weighted(list, total);
	list_for_each_entry(c, list, node)
		c->share = max(c->share, 1U);
}

/* A user's top-level parameters: those of its active classes together. */
static void hcomm_qos_aggregate(struct hcomm_qos_user *u)
{
	u32 sum_min = 0, sum_max = 0, prio = 0;
	struct hcomm_qos_class *c;

	list_for_each_entry(c, &u->active, node) {
		sum_min += c->min_rate;
		sum_max += c->max_rate;
		prio = max(prio, c->priority);
	}
	u->top.min_rate = min(sum_min, 100U);
	u->top.max_rate = clamp(sum_max, 1U, 100U);
	u->top.priority = prio;
}

static void hcomm_qos_recompute(struct hcomm_qos_sched *s)
{
	struct hcomm_qos_class *t;

	s->shares_valid = true;
	list_for_each_entry(t, &s->active, node)
		if (t->group)
			hcomm_qos_aggregate(hcomm_qos_group(t));
	hcomm_qos_fill(&s->active, HCOMM_QOS_SCALE);
	list_for_each_entry(t, &s->active, node)
		if (t->group)
			hcomm_qos_fill(&hcomm_qos_group(t)->active, t->share);
}

static void hcomm_qos_update(struct hcomm_qos_sched *s)
{
	if (!s->shares_valid)
		hcomm_qos_recompute(s);
}

/* Enter the active @list of a level whose clock reads @vclock. */
static void hcomm_qos_enter(struct list_head *list, u64 vclock,
			    struct hcomm_qos_class *c)
{
	u64 owed, idle;

	/*
	 * max(vtime, vclock), both taken relative to the vclock at which the
	 * entry went idle: what it was owed then, less the virtual time that
	 * has passed since.
	 */
	owed = c->vtime - c->idle_vclock;
	if ((s64)owed < 0)
		owed = 0;
	idle = vclock - c->idle_vclock;
	c->vtime = vclock + (owed > idle ? owed - idle : 0);
	c->served = 0;
	c->active = true;
	list_add_tail(&c->node, list);
}

static void hcomm_qos_leave(struct hcomm_qos_class *c, u64 vclock)
{
	list_del_init(&c->node);
	c->active = false;
	c->idle_vclock = vclock;
}

static struct hcomm_qos_class *hcomm_qos_first(struct list_head *list);

/* May @c be picked now: not held, and a user with a class not held? */
static bool hcomm_qos_pickable(struct hcomm_qos_class *c)
{
	if (c->held)
		return false;
	return !c->group || hcomm_qos_first(&hcomm_qos_group(c)->active);
}

/*
 * The pickable entry of @list with the smallest vtime, then the highest
 * priority.
 */
static struct hcomm_qos_class *hcomm_qos_first(struct list_head *list)
{
	struct hcomm_qos_class *c, *best = NULL;

	list_for_each_entry(c, list, node) {
		if (!hcomm_qos_pickable(c))
			continue;
		if (!best || hcomm_qos_before(c->vtime, best->vtime) ||
		    (c->vtime == best->vtime && c->priority > best->priority))
			best = c;
	}
	return best;
}

/* Add @bytes of service at @c's share to its vtime and served count. */
static void hcomm_qos_account(struct hcomm_qos_class *c, u64 v, u64 bytes)
{
	/* At most 2^40 * 10^6 < 2^60: no overflow. */
	c->vtime += div_u64(v * HCOMM_QOS_SCALE, max(c->share, 1U));
	c->served += bytes;
}

/**
 * hcomm_qos_sched_init() - prepare an idle scheduler.
 * @s: scheduler to initialise.
 */
void hcomm_qos_sched_init(struct hcomm_qos_sched *s)
{
	INIT_LIST_HEAD(&s->active);
	INIT_LIST_HEAD(&s->users);
	s->nr_active = 0;
	s->min_sum = 0;
	s->vclock = 0;
	s->shares_valid = true;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_sched_init);

/**
 * hcomm_qos_class_init() - prepare an inactive class with the defaults.
 * @c: class to initialise.
 *
 * The defaults are min_rate 0, max_rate 100, priority 0.  The class
 * belongs to no user until hcomm_qos_attach().
 */
void hcomm_qos_class_init(struct hcomm_qos_class *c)
{
	INIT_LIST_HEAD(&c->node);
	c->user = NULL;
	c->group = false;
	c->min_rate = 0;
	c->max_rate = 100;
	c->priority = 0;
	c->active = false;
	c->vtime = 0;
	c->served = 0;
	c->share = HCOMM_QOS_SCALE;
	c->idle_vclock = 0;
	c->held = false;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_class_init);

/**
 * hcomm_qos_validate() - check the parameters of a SET_QOS request.
 * @min_rate: guaranteed percent, 0 .. 100.
 * @max_rate: percent limit, 1 .. 100 and at least @min_rate.
 * @priority: 0 .. HCOMM_QOS_MAX_PRIO.
 *
 * Admission (hcomm_qos_admit()) and privilege are the caller's business.
 *
 * Return: 0, or -EINVAL when a parameter is out of range.
 */
int hcomm_qos_validate(u32 min_rate, u32 max_rate, u32 priority)
{
	if (min_rate > 100 || max_rate < 1 || max_rate > 100)
		return -EINVAL;
	if (max_rate < min_rate || priority > HCOMM_QOS_MAX_PRIO)
		return -EINVAL;
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_validate);

/**
 * hcomm_qos_admit() - may @c reserve @min_rate?
 * @s:          scheduler.
 * @c:          class asking; its current min_rate is given back first.
 * @min_rate:   the min_rate it asks for (validated).
 * @user_limit: the most the class's user may have reserved over all its
 *              classes: the administrator's per-user allowance for an
 *              unprivileged caller, 100 for a privileged one.  A class of
 *              no user is its own user.
 *
 * Nothing changes; on success the caller applies the request with
 * hcomm_qos_set(), under the same lock.  Lowering a reservation is always
 * admitted, even while the user is above @user_limit (the allowance may
 * have been lowered since).
 *
 * Return: 0; -ENOSPC when the reservations of all classes would pass 100
 * (checked first: with @user_limit 100 it is the only error); -EPERM when
 * the user's would pass @user_limit.
 */
int hcomm_qos_admit(struct hcomm_qos_sched *s, struct hcomm_qos_class *c,
		    u32 min_rate, u32 user_limit)
{
	u32 mine = c->user ? c->user->min_sum : c->min_rate;

	if (min_rate <= c->min_rate)
		return 0;
	if (s->min_sum - c->min_rate + min_rate > 100)
		return -ENOSPC;
	if (mine - c->min_rate + min_rate > user_limit)
		return -EPERM;
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_admit);

/**
 * hcomm_qos_set() - change the parameters of a class.
 * @s:        scheduler the class belongs to.
 * @c:        class to change, active or not.
 * @min_rate: see hcomm_qos_validate().
 * @max_rate: see hcomm_qos_validate().
 * @priority: see hcomm_qos_validate().
 *
 * The caller has validated the parameters and admitted @min_rate
 * (hcomm_qos_admit()); invalid ones are refused with a warning and the
 * class is left unchanged.  The reservations of the scheduler and of the
 * class's user follow the new min_rate.  An active class keeps its virtual
 * time; its new share applies from the next charge on.
 */
void hcomm_qos_set(struct hcomm_qos_sched *s, struct hcomm_qos_class *c,
		   u32 min_rate, u32 max_rate, u32 priority)
{
	if (WARN_ON_ONCE(hcomm_qos_validate(min_rate, max_rate, priority) ||
			 c->group))
		return;
	s->min_sum += min_rate - c->min_rate;
	if (c->user)
		c->user->min_sum += min_rate - c->min_rate;
	c->min_rate = min_rate;
	c->max_rate = max_rate;
	c->priority = priority;
	if (c->active)
		s->shares_valid = false;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_set);

/**
 * hcomm_qos_activate() - a class has work: let it compete for the engine.
 * @s: scheduler.
 * @c: class; nothing happens if it is already active.
 *
 * The class starts at the later of its own virtual time and its level's
 * clock, so it gets no credit for the time it was idle, and its served
 * byte count restarts at 0.  The first active class of a user makes the
 * user active the same way.
 */
void hcomm_qos_activate(struct hcomm_qos_sched *s, struct hcomm_qos_class *c)
{
	struct hcomm_qos_user *u = c->user;

	if (c->active || WARN_ON_ONCE(c->group))
		return;
	if (u) {
		hcomm_qos_enter(&u->active, u->vclock, c);
		if (!u->nr_active++)
			hcomm_qos_enter(&s->active, s->vclock, &u->top);
	} else {
		hcomm_qos_enter(&s->active, s->vclock, c);
	}
	s->nr_active++;
	s->shares_valid = false;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_activate);

/**
 * hcomm_qos_deactivate() - a class has no more work.
 * @s: scheduler.
 * @c: class; nothing happens if it is not active.
 *
 * The class (and its user, with its last active class) keeps its virtual
 * time, so service it received beyond its share is still owed if it
 * becomes active again soon.
 */
void hcomm_qos_deactivate(struct hcomm_qos_sched *s, struct hcomm_qos_class *c)
{
	struct hcomm_qos_user *u = c->user;

	if (!c->active || WARN_ON_ONCE(c->group))
		return;
	if (u) {
		hcomm_qos_leave(c, u->vclock);
		if (!--u->nr_active)
			hcomm_qos_leave(&u->top, s->vclock);
	} else {
		hcomm_qos_leave(c, s->vclock);
	}
	s->nr_active--;
	s->shares_valid = false;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_deactivate);

/**
 * hcomm_qos_pick() - choose the class whose chunk is served next.
 * @s: scheduler.
 *
 * The active top-level entry with the smallest virtual time; on a tie the
 * one with the higher priority, then the one that became active first.
 * If that is a user, the same rule among the user's active classes on the
 * user's clock.  The clocks move to the chosen entries' virtual times.
 *
 * Classes marked held, and users all of whose active classes are, are
 * passed over.
 *
 * Return: the class, still active, or NULL when no class is active and
 * not held.
 */
struct hcomm_qos_class *hcomm_qos_pick(struct hcomm_qos_sched *s)
{
	struct hcomm_qos_class *best;
	struct hcomm_qos_user *u;

	hcomm_qos_update(s);	/* the users' priorities */
	best = hcomm_qos_first(&s->active);
	if (!best)
		return NULL;
	if (hcomm_qos_before(s->vclock, best->vtime))
		s->vclock = best->vtime;
	if (!best->group)
		return best;
	u = hcomm_qos_group(best);
	best = hcomm_qos_first(&u->active);
	if (WARN_ON_ONCE(!best))
		return NULL;
	if (hcomm_qos_before(u->vclock, best->vtime))
		u->vclock = best->vtime;
	return best;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_pick);

/**
 * hcomm_qos_charge() - account service given to a class.
 * @s:     scheduler.
 * @c:     class that was served, normally the one hcomm_qos_pick() chose.
 * @bytes: bytes served; at most HCOMM_QOS_MAX_CHARGE count towards the
 *         virtual time of one charge.
 *
 * Advances the virtual time of the class, and of its user, by @bytes
 * divided by the share, and the served counts by @bytes.  A class that is
 * no longer active is charged at the share it had when it was last active.
 */
void hcomm_qos_charge(struct hcomm_qos_sched *s, struct hcomm_qos_class *c,
		      u64 bytes)
{
	u64 v = min(bytes, HCOMM_QOS_MAX_CHARGE);

	if (c->active)
		hcomm_qos_update(s);
	hcomm_qos_account(c, v, bytes);
	if (c->user)
		hcomm_qos_account(&c->user->top, v, bytes);
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_charge);

/**
 * hcomm_qos_share() - the share of the engine a class is entitled to now.
 * @s: scheduler.
 * @c: class, or a user's entry (&user->top).
 *
 * Return: the target share in percent of the engine, rounded to the
 * nearest; 0 when the class is not active.
 */
u32 hcomm_qos_share(struct hcomm_qos_sched *s, struct hcomm_qos_class *c)
{
	if (!c->active)
		return 0;
	hcomm_qos_update(s);
	return (c->share + HCOMM_QOS_PCT / 2) / HCOMM_QOS_PCT;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_share);

/**
 * hcomm_qos_user_init() - prepare a user with no class.
 * @u:   user to initialise.
 * @uid: whose it is.
 */
void hcomm_qos_user_init(struct hcomm_qos_user *u, kuid_t uid)
{
	hcomm_qos_class_init(&u->top);
	u->top.group = true;
	INIT_LIST_HEAD(&u->link);
	INIT_LIST_HEAD(&u->active);
	u->uid = uid;
	u->refs = 0;
	u->nr_active = 0;
	u->min_sum = 0;
	u->vclock = 0;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_user_init);

/**
 * hcomm_qos_user_alloc() - a user for hcomm_qos_attach() to use if needed.
 * @uid: whose it is.
 * @gfp: allocation flags.
 *
 * Called without the engine lock, as it may sleep.
 *
 * Return: the user, or NULL.
 */
struct hcomm_qos_user *hcomm_qos_user_alloc(kuid_t uid, gfp_t gfp)
{
	struct hcomm_qos_user *u = kmalloc(sizeof(*u), gfp);

	if (u)
		hcomm_qos_user_init(u, uid);
	return u;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_user_alloc);

/**
 * hcomm_qos_user_free() - free a user hcomm_qos_attach() did not take, or
 *	one hcomm_qos_detach() returned.
 * @u: user, or NULL.
 */
void hcomm_qos_user_free(struct hcomm_qos_user *u)
{
	if (u)
		WARN_ON_ONCE(u->refs || !list_empty(&u->link));
	kfree(u);
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_user_free);

/**
 * hcomm_qos_attach() - make an inactive class one of its user's.
 * @s:     scheduler.
 * @c:     class, inactive and not attached yet.
 * @spare: a user of the class's uid from hcomm_qos_user_alloc() (or
 *         hcomm_qos_user_init()).  If the scheduler has no user of that
 *         uid yet, *@spare becomes it and *@spare is set to NULL; else it
 *         is left for the caller to free.
 *
 * The class's min_rate, if any, is counted in its user's reservations.
 */
void hcomm_qos_attach(struct hcomm_qos_sched *s, struct hcomm_qos_class *c,
		      struct hcomm_qos_user **spare)
{
	struct hcomm_qos_user *u;

	if (WARN_ON_ONCE(c->active || c->user || c->group || !*spare))
		return;
	list_for_each_entry(u, &s->users, link)
		if (uid_eq(u->uid, (*spare)->uid))
			goto found;
	u = *spare;
	*spare = NULL;
	list_add_tail(&u->link, &s->users);
found:
	u->refs++;
	u->min_sum += c->min_rate;
	c->user = u;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_attach);

/**
 * hcomm_qos_detach() - a class leaves the scheduler for good.
 * @s: scheduler.
 * @c: class, active or not, attached or not.
 *
 * The class is deactivated and its min_rate is given back (it becomes 0).
 *
 * Return: its user if this was the user's last class, for the caller to
 * free with hcomm_qos_user_free() after dropping the lock; else NULL.
 */
struct hcomm_qos_user *hcomm_qos_detach(struct hcomm_qos_sched *s,
					struct hcomm_qos_class *c)
{
	struct hcomm_qos_user *u = c->user;

	if (WARN_ON_ONCE(c->group))
		return NULL;
	hcomm_qos_deactivate(s, c);
	s->min_sum -= c->min_rate;
	if (u)
		u->min_sum -= c->min_rate;
	c->min_rate = 0;
	c->user = NULL;
	if (!u || --u->refs)
		return NULL;
	list_del_init(&u->link);
	return u;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_detach);
