// SPDX-License-Identifier: GPL-2.0
/*
 * QoS scheduler of the transfer engine: start-time fair queueing of chunks
 * among the contexts (classes) that have work.
 *
 * Target shares.  Each active class has a weight, its min_rate, or 1 when
 * its min_rate is 0.  The engine is divided among the active classes as
 *
 *	share(c) = clamp(L * weight(c), min_rate(c), max_rate(c))
 *
 * with the one level L at which the shares add up to 100 %.  That is
 * water-filling: shares proportional to weight; a class whose proportional
 * share exceeds its max_rate is held at its max_rate and the excess goes to
 * the others in proportion to their weight, repeatedly.  Because the caller
 * admits contexts only while the min_rates add up to at most 100 %, no class
 * gets less than its min_rate.  That floor matters only when the min_rates
 * plus one per class without a min_rate exceed 100 %; then every class with
 * a min_rate gets exactly it and the classes without one split the rest
 * equally.  No share is below one part per million, so no class stops
 * completely (a min_rate of 100 next to another class gets 99.9999 %).
 *
 * Every class held at its max_rate.  When the max_rates of the active
 * classes add up to less than 100 %, no level L fills the engine.  The
 * engine does not idle: the shares are then the max_rates scaled up to add
 * up to 100 % (a single active class gets 100 %).  This is the only case in
 * which a class is served beyond its max_rate, and it happens only while
 * every other class with work is itself served beyond its max_rate: a
 * class's max_rate is never exceeded while another class that could use
 * more of the engine within its own max_rate is waiting.
 *
 * Virtual time.  hcomm_qos_charge() advances the class's vtime by the bytes
 * served divided by its share (bytes * HCOMM_QOS_SCALE / share), so a
 * class's vtime grows by one unit per byte of engine service while it gets
 * exactly its share.  hcomm_qos_pick() returns the active class with the
 * smallest vtime; ties go to the higher priority, then to the class that
 * became active first.  The scheduler's vclock is the vtime of the class
 * picked last; a class that becomes active starts at max(its vtime, vclock),
 * so idle time earns no credit while service it received beyond its share
 * just before it went idle is still owed.  Over any interval in which a set
 * of classes stays active, each class's service differs from its share of
 * the total by at most about one chunk per class.
 *
 * Virtual times are compared as differences, so the u64 counters may wrap
 * around.  An idle class's vtime is measured from the vclock at which it
 * went idle, so a long idle time cannot make it look ahead of vclock by
 * more than it was owed.
 *
 * The shares depend only on the active set and the classes' parameters, so
 * they are recomputed lazily, once after either changes: O(active classes)
 * per call, no allocation, no sleeping.  The caller serialises all calls.
 */
#include <linux/kernel.h>
#include <linux/errno.h>
#include <linux/math64.h>
#include <linux/minmax.h>
#include <linux/bug.h>
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

/*
 * Every class with a min_rate gets exactly it; the classes without one
 * split what is left equally.  Used when L <= 1 % per unit of weight.
 */
static void hcomm_qos_fill_floor(struct hcomm_qos_sched *s, u32 sum_min,
				 u32 nr_zero)
{
	struct hcomm_qos_class *c;
	u32 rest = 0;

	if (sum_min < 100 && nr_zero)
		rest = (100 - sum_min) * HCOMM_QOS_PCT / nr_zero;
	list_for_each_entry(c, &s->active, node)
		c->share = c->min_rate ? c->min_rate * HCOMM_QOS_PCT : rest;
}

/* Every class at its max_rate, scaled up to fill the engine. */
static void hcomm_qos_fill_caps(struct hcomm_qos_sched *s, u32 sum_max)
{
	struct hcomm_qos_class *c;

	list_for_each_entry(c, &s->active, node)
		c->share = c->max_rate * HCOMM_QOS_SCALE / sum_max;
}

/*
 * Proportional to weight, capping at max_rate and handing the excess to
 * the uncapped classes until no uncapped class exceeds its max_rate.  Only
 * called when the max_rates add up to more than 100 %, so at least one
 * class stays uncapped.
 */
static void hcomm_qos_fill_weighted(struct hcomm_qos_sched *s)
{
	struct hcomm_qos_class *c;
	u64 rest = HCOMM_QOS_SCALE, wsum = 0;
	bool capped;

	list_for_each_entry(c, &s->active, node) {
		c->share = 0;		/* 0: not capped (yet) */
		wsum += hcomm_qos_weight(c);
	}
	do {
		capped = false;
		list_for_each_entry(c, &s->active, node) {
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
	list_for_each_entry(c, &s->active, node)
		if (!c->share && wsum)
			c->share = div64_u64(rest * hcomm_qos_weight(c), wsum);
}

static void hcomm_qos_recompute(struct hcomm_qos_sched *s)
{
	struct hcomm_qos_class *c;
	u32 sum_min = 0, sum_max = 0, nr_zero = 0;

	s->shares_valid = true;
	if (!s->nr_active)
		return;
	list_for_each_entry(c, &s->active, node) {
		sum_min += c->min_rate;
		sum_max += c->max_rate;
		if (!c->min_rate)
			nr_zero++;
	}
	if (sum_min + nr_zero >= 100)
		hcomm_qos_fill_floor(s, sum_min, nr_zero);
	else if (sum_max <= 100)
		hcomm_qos_fill_caps(s, sum_max);
	else
		hcomm_qos_fill_weighted(s);
	list_for_each_entry(c, &s->active, node)
		c->share = max(c->share, 1U);
}

static void hcomm_qos_update(struct hcomm_qos_sched *s)
{
	if (!s->shares_valid)
		hcomm_qos_recompute(s);
}

/**
 * hcomm_qos_sched_init() - prepare an idle scheduler.
 * @s: scheduler to initialise.
 */
void hcomm_qos_sched_init(struct hcomm_qos_sched *s)
{
	INIT_LIST_HEAD(&s->active);
	s->nr_active = 0;
	s->vclock = 0;
	s->shares_valid = true;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_sched_init);

/**
 * hcomm_qos_class_init() - prepare an inactive class with the defaults.
 * @c: class to initialise.
 *
 * The defaults are min_rate 0, max_rate 100, priority 0.
 */
void hcomm_qos_class_init(struct hcomm_qos_class *c)
{
	INIT_LIST_HEAD(&c->node);
	c->min_rate = 0;
	c->max_rate = 100;
	c->priority = 0;
	c->active = false;
	c->vtime = 0;
	c->served = 0;
	c->share = HCOMM_QOS_SCALE;
	c->idle_vclock = 0;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_class_init);

/**
 * hcomm_qos_validate() - check the parameters of a SET_QOS request.
 * @min_rate: guaranteed percent, 0 .. 100.
 * @max_rate: percent limit, 1 .. 100 and at least @min_rate.
 * @priority: 0 .. HCOMM_QOS_MAX_PRIO.
 *
 * Admission (the min_rates of all contexts adding up to at most 100) is
 * the caller's business.
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
 * hcomm_qos_set() - change the parameters of a class.
 * @s:        scheduler the class belongs to.
 * @c:        class to change, active or not.
 * @min_rate: see hcomm_qos_validate().
 * @max_rate: see hcomm_qos_validate().
 * @priority: see hcomm_qos_validate().
 *
 * The caller has validated the parameters; invalid ones are refused with
 * a warning and the class is left unchanged.  An active class keeps its
 * virtual time; its new share applies from the next charge on.
 */
void hcomm_qos_set(struct hcomm_qos_sched *s, struct hcomm_qos_class *c,
		   u32 min_rate, u32 max_rate, u32 priority)
{
	if (WARN_ON_ONCE(hcomm_qos_validate(min_rate, max_rate, priority)))
		return;
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
 * The class starts at the later of its own virtual time and the
 * scheduler's, so it gets no credit for the time it was idle, and its
 * served byte count restarts at 0.
 */
void hcomm_qos_activate(struct hcomm_qos_sched *s, struct hcomm_qos_class *c)
{
	u64 owed, idle;

	if (c->active)
		return;
	/*
	 * max(vtime, vclock), both taken relative to the vclock at which the
	 * class went idle: what it was owed then, less the virtual time that
	 * has passed since.
	 */
	owed = c->vtime - c->idle_vclock;
	if ((s64)owed < 0)
		owed = 0;
	idle = s->vclock - c->idle_vclock;
	c->vtime = s->vclock + (owed > idle ? owed - idle : 0);
	c->served = 0;
	c->active = true;
	list_add_tail(&c->node, &s->active);
	s->nr_active++;
	s->shares_valid = false;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_activate);

/**
 * hcomm_qos_deactivate() - a class has no more work.
 * @s: scheduler.
 * @c: class; nothing happens if it is not active.
 *
 * The class keeps its virtual time, so service it received beyond its
 * share is still owed if it becomes active again soon.
 */
void hcomm_qos_deactivate(struct hcomm_qos_sched *s, struct hcomm_qos_class *c)
{
	if (!c->active)
		return;
	list_del_init(&c->node);
	c->active = false;
	c->idle_vclock = s->vclock;
	s->nr_active--;
	s->shares_valid = false;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_deactivate);

/**
 * hcomm_qos_pick() - choose the class whose chunk is served next.
 * @s: scheduler.
 *
 * The active class with the smallest virtual time; on a tie the one with
 * the higher priority, then the one that became active first.  The
 * scheduler's virtual time moves to the chosen class's.
 *
 * Return: the class, still active, or NULL when no class is active.
 */
struct hcomm_qos_class *hcomm_qos_pick(struct hcomm_qos_sched *s)
{
	struct hcomm_qos_class *c, *best = NULL;

	list_for_each_entry(c, &s->active, node) {
		if (!best || hcomm_qos_before(c->vtime, best->vtime) ||
		    (c->vtime == best->vtime && c->priority > best->priority))
			best = c;
	}
	if (best && hcomm_qos_before(s->vclock, best->vtime))
		s->vclock = best->vtime;
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
 * Advances the class's virtual time by @bytes divided by its share, and
 * its served count by @bytes.  A class that is no longer active is charged
 * at the share it had when it was last active.
 */
void hcomm_qos_charge(struct hcomm_qos_sched *s, struct hcomm_qos_class *c,
		      u64 bytes)
{
	u64 v = min(bytes, HCOMM_QOS_MAX_CHARGE);

	if (c->active)
		hcomm_qos_update(s);
	/* At most 2^40 * 10^6 < 2^60: no overflow. */
	c->vtime += div_u64(v * HCOMM_QOS_SCALE, max(c->share, 1U));
	c->served += bytes;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_charge);

/**
 * hcomm_qos_share() - the share of the engine a class is entitled to now.
 * @s: scheduler.
 * @c: class.
 *
 * Return: the class's target share in percent, rounded to the nearest;
 * 0 when the class is not active.
 */
u32 hcomm_qos_share(struct hcomm_qos_sched *s, struct hcomm_qos_class *c)
{
	if (!c->active)
		return 0;
	hcomm_qos_update(s);
	return (c->share + HCOMM_QOS_PCT / 2) / HCOMM_QOS_PCT;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_qos_share);
