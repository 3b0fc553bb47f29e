// SPDX-License-Identifier: GPL-2.0
/*
 * Region keys: 64-bit random names under which regions are published.
 *
 * Owns the global key table.  A key is drawn from get_random_u64(), is
 * never zero, and is unique among live regions; revoking removes it so a
 * later lookup by that key fails.  The table is an rhashtable: lookups
 * take no lock and cost O(1) however many regions exist.
 */
#include <linux/random.h>
#include <linux/spinlock.h>
#include <linux/rhashtable.h>
#include <linux/rcupdate.h>
#include <linux/cred.h>
#include <linux/err.h>
#include <linux/mutex.h>
#include <linux/wait_bit.h>
#include <kunit/visibility.h>

#include "hcomm.h"

/*
 * Keys by value.  Lookups take no lock (RCU; regions are freed after a
 * grace period); the table grows with the number of regions, so a lookup
 * costs the same however many regions users register.
 */
static struct rhashtable hcomm_keys;
static const struct rhashtable_params hcomm_key_params = {
	.key_len = sizeof(u64),
	.key_offset = offsetof(struct hcomm_region, key),
	.head_offset = offsetof(struct hcomm_region, key_node),
	.automatic_shrinking = true,
};

/* Serialises changes of any region's acc_rev (GRANT, revocation). */
static DEFINE_MUTEX(hcomm_revoke_lock);

/**
 * hcomm_keys_init() - create the key table.
 *
 * Return: 0 or -ENOMEM.
 */
int hcomm_keys_init(void)
{
	return rhashtable_init(&hcomm_keys, &hcomm_key_params);
}

/**
 * hcomm_keys_exit() - destroy the (empty) key table.
 */
void hcomm_keys_exit(void)
{
	rhashtable_destroy(&hcomm_keys);
}

/**
 * hcomm_key_new() - draw a fresh non-zero random key.
 *
 * Return: the key; uniqueness is enforced by hcomm_key_publish().
 */
u64 hcomm_key_new(void)
{
	u64 key;

	do {
		key = get_random_u64();
	} while (!key);
	return key;
}
EXPORT_SYMBOL_IF_KUNIT(hcomm_key_new);

/**
 * hcomm_key_publish() - put @r in the key table under a unique key.
 * @r: a region being registered; not yet found by lookups (@r->live).
 *
 * A collision draws again.
 *
 * Return: 0, or -ENOMEM (or -EBUSY) when the table cannot take it.
 */
int hcomm_key_publish(struct hcomm_region *r)
{
	int ret;

	for (;;) {
		ret = rhashtable_lookup_insert_fast(&hcomm_keys, &r->key_node,
						    hcomm_key_params);
		if (ret != -EEXIST)
			break;
		r->key = hcomm_key_new();
	}
	r->key_hashed = !ret;
	return ret;
}

/**
 * hcomm_key_activate() - let lookups by key find @r (registration done).
 * @r: a published region.
 */
void hcomm_key_activate(struct hcomm_region *r)
{
	/* Pairs with the acquire in hcomm_key_lookup(). */
	smp_store_release(&r->live, true);
}

/**
 * hcomm_key_revoke() - remove @r's key from the table.
 * @r: a region; revoking twice, or an unpublished region, is harmless.
 *     Called by the region's owner paths one at a time (DEREG, release).
 */
void hcomm_key_revoke(struct hcomm_region *r)
{
	if (!r->key_hashed)
		return;
	WRITE_ONCE(r->live, false);
	rhashtable_remove_fast(&hcomm_keys, &r->key_node, hcomm_key_params);
	r->key_hashed = false;
}

/*
 * May the caller (context @ctx, current credentials) use @r with @need
 * (HCOMM_ACCESS_REMOTE_READ to read, HCOMM_ACCESS_LOCAL_WRITE to write)?
 * The owner is bound by the region's own access flags; anyone else by the
 * owner's grant and the region's REMOTE_* flags.
 */
static int hcomm_key_allowed(const struct hcomm_region *r,
			     const struct hcomm_ctx *ctx, u32 need, kuid_t euid)
{
	u32 remote = need == HCOMM_ACCESS_LOCAL_WRITE ?
		     HCOMM_ACCESS_REMOTE_WRITE : HCOMM_ACCESS_REMOTE_READ;
	u64 grant = READ_ONCE(r->grant);	/* one word: never torn */

	if (r->ctx == ctx) {
		if (need == HCOMM_ACCESS_LOCAL_WRITE &&
		    !(r->access & HCOMM_ACCESS_LOCAL_WRITE))
			return -EACCES;
		return 0;
	}
	if (!(r->access & remote) || !(hcomm_grant_access(grant) & remote))
		return -EACCES;
	switch (hcomm_grant_scope(grant)) {
	case HCOMM_GRANT_ANY:
		return 0;
	case HCOMM_GRANT_SAME_UID:
	case HCOMM_GRANT_UID:
		return uid_eq(euid, hcomm_grant_uid(grant)) ? 0 : -EACCES;
	default:
		return -EACCES;
	}
}

/**
 * hcomm_key_lookup() - find the region named @key for a transfer.
 * @ctx:  the caller's context.
 * @key:  key from REG_MEM / REG_DMABUF, possibly of another context.
 * @need: HCOMM_ACCESS_REMOTE_READ (source) or HCOMM_ACCESS_LOCAL_WRITE
 *        (destination).
 * @rev:  the region's access revision the check was made against, for
 *        hcomm_region_enter().
 *
 * Return: the region with a reference, ERR_PTR(-ENOENT) when no live
 * region has the key (a revoked key and a guessed one look the same), or
 * ERR_PTR(-EACCES) when the caller may not use it so.
 */
struct hcomm_region *hcomm_key_lookup(struct hcomm_ctx *ctx, u64 key,
				      u32 need, u32 *rev)
{
	struct hcomm_region *r, *found = NULL;
	int ret;

	rcu_read_lock();
	r = rhashtable_lookup(&hcomm_keys, &key, hcomm_key_params);
	/* Pairs with hcomm_key_activate(): a live region is complete. */
	if (r && smp_load_acquire(&r->live) && kref_get_unless_zero(&r->ref))
		found = r;
	rcu_read_unlock();
	if (!found)
		return ERR_PTR(-ENOENT);
	/* The revision first: a GRANT after this is seen at the first chunk. */
	*rev = atomic_read_acquire(&found->acc_rev);
	ret = READ_ONCE(found->revoked) ? -ENOENT :
	      hcomm_key_allowed(found, ctx, need, current_euid());
	if (ret) {
		hcomm_region_put(found);
		return ERR_PTR(ret);
	}
	return found;
}

/*
 * Publish a change of who may use @r and wait until no chunk of another
 * context checked against the old rights is still being copied.  Chunks
 * that count themselves after the bump see the new revision and check
 * again.  hcomm_revoke_lock held: one change at a time, so the parity
 * that drains holds every chunk of the previous revision.
 */
static void hcomm_region_fence(struct hcomm_region *r)
{
	u32 old;

	lockdep_assert_held(&hcomm_revoke_lock);
	old = atomic_fetch_inc(&r->acc_rev);
	/* Pairs with hcomm_region_enter(): bump, then read the counts. */
	smp_mb__after_atomic();
	wait_var_event(&r->foreign[old & 1],
		       !atomic_read(&r->foreign[old & 1]));
}

/**
 * hcomm_grant() - set who besides the owner may use a region's key.
 * @ctx: the owner's context.
 * @arg: validated copy of the user's argument.
 *
 * The grant is published as one word, so a lookup sees the old grant or
 * the new one, never a mix.  A transfer already past its lookup keeps the
 * access it was given (see Documentation/datapath.rst, revocation).
 *
 * Return: 0 or -errno (see uapi/linux/hcomm.h).
 */
int hcomm_grant(struct hcomm_ctx *ctx, struct hcomm_grant *arg)
{
	const u32 remote = HCOMM_ACCESS_REMOTE_READ | HCOMM_ACCESS_REMOTE_WRITE;
	struct hcomm_region *r;
	kuid_t uid = current_euid();

	if (arg->flags || arg->reserved0 || arg->reserved[0] ||
	    arg->reserved[1])
		return -EINVAL;
	if (arg->scope > HCOMM_GRANT_ANY || (arg->access & ~remote))
		return -EINVAL;
	if (arg->scope == HCOMM_GRANT_NONE ? arg->access : !arg->access)
		return -EINVAL;
	if (arg->scope == HCOMM_GRANT_UID) {
		uid = make_kuid(current_user_ns(), arg->uid);
		if (!uid_valid(uid))
			return -EINVAL;
	} else if (arg->uid) {
		return -EINVAL;
	}
	r = hcomm_region_get(ctx, arg->region);
	if (!r)
		return -ENOENT;
	if (arg->access & ~r->access) {
		hcomm_region_put(r);
		return -EINVAL;
	}
	/* scope, access and uid in one store: a reader sees old or new */
	mutex_lock(&hcomm_revoke_lock);
	WRITE_ONCE(r->grant, hcomm_grant_word(arg->scope, arg->access, uid));
	hcomm_region_fence(r);
	mutex_unlock(&hcomm_revoke_lock);
	hcomm_region_put(r);
	return 0;
}

/**
 * hcomm_region_revoke() - no other context may use @r from now on.
 * @r: a region that just left its context's table (key revoked).
 *
 * Returns once every chunk another context was copying under the old
 * rights has landed; their transfers end at the next chunk with -ENOENT.
 */
void hcomm_region_revoke(struct hcomm_region *r)
{
	mutex_lock(&hcomm_revoke_lock);
	WRITE_ONCE(r->revoked, true);
	hcomm_region_fence(r);
	mutex_unlock(&hcomm_revoke_lock);
}

/**
 * hcomm_region_enter() - may a chunk of a transfer of @ctx touch @r now?
 * @r:    source or destination of the transfer.
 * @ctx:  the transfer's context.
 * @euid: the submitter's effective uid.
 * @need: as for hcomm_key_lookup().
 * @rev:  in: the revision last checked; out: the one now held.
 *
 * The owner always may.  For another context the chunk is counted in
 * @r->foreign under the current revision, and the rights are checked
 * again if the revision moved.  A successful enter is paired with
 * hcomm_region_exit() once the chunk landed.
 *
 * Return: 0, -ENOENT (revoked) or -EACCES (no longer granted).
 */
int hcomm_region_enter(struct hcomm_region *r, const struct hcomm_ctx *ctx,
		       kuid_t euid, u32 need, u32 *rev)
{
	u32 now;
	int ret;

	if (r->ctx == ctx)
		return 0;
	for (;;) {
		now = atomic_read(&r->acc_rev);
		atomic_inc(&r->foreign[now & 1]);
		/* Pairs with hcomm_region_fence(): count, then read the rights. */
		smp_mb__after_atomic();
		if (atomic_read(&r->acc_rev) == now)
			break;
		if (atomic_dec_and_test(&r->foreign[now & 1]))
			wake_up_var(&r->foreign[now & 1]);
	}
	if (now != *rev) {
		ret = READ_ONCE(r->revoked) ? -ENOENT :
		      hcomm_key_allowed(r, ctx, need, euid);
		if (ret) {
			hcomm_region_exit(r, ctx, now);
			return ret;
		}
		*rev = now;
	}
	return 0;
}

/**
 * hcomm_region_exit() - a chunk entered with hcomm_region_enter() landed.
 * @r:   the region.
 * @ctx: the transfer's context.
 * @rev: the revision hcomm_region_enter() returned in *rev.
 */
void hcomm_region_exit(struct hcomm_region *r, const struct hcomm_ctx *ctx,
		       u32 rev)
{
	if (r->ctx == ctx)
		return;
	if (atomic_dec_and_test(&r->foreign[rev & 1]))
		wake_up_var(&r->foreign[rev & 1]);
}
