// SPDX-License-Identifier: GPL-2.0
/*
 * Region keys: 64-bit random names under which regions are published.
 *
 * Owns the global key table.  A key is drawn from get_random_u64(), is
 * never zero, and is unique among live regions; revoking removes it so a
 * later lookup by that key fails.  The table lock is a spinlock and is
 * never held across anything that sleeps.
 */
#include <linux/random.h>
#include <linux/spinlock.h>
#include <linux/cred.h>
#include <linux/err.h>
#include <kunit/visibility.h>

#include "hcomm.h"

#define HCOMM_KEY_BITS	12

static DEFINE_HASHTABLE(hcomm_keys, HCOMM_KEY_BITS);
static DEFINE_SPINLOCK(hcomm_keys_lock);	/* protects hcomm_keys */

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

static bool hcomm_key_used(u64 key)
{
	struct hcomm_region *r;

	lockdep_assert_held(&hcomm_keys_lock);
	hash_for_each_possible(hcomm_keys, r, key_node, key)
		if (r->key == key)
			return true;
	return false;
}

/**
 * hcomm_key_publish() - give @r a unique key and make it findable by it.
 * @r: region not yet published.
 *
 * A collision simply draws again.
 */
void hcomm_key_publish(struct hcomm_region *r)
{
	spin_lock(&hcomm_keys_lock);
	while (hcomm_key_used(r->key))
		r->key = hcomm_key_new();
	hash_add(hcomm_keys, &r->key_node, r->key);
	spin_unlock(&hcomm_keys_lock);
}

/**
 * hcomm_key_revoke() - remove @r's key from the table.
 * @r: a published region; revoking twice is harmless.
 */
void hcomm_key_revoke(struct hcomm_region *r)
{
	spin_lock(&hcomm_keys_lock);
	if (!hlist_unhashed(&r->key_node))
		hash_del(&r->key_node);
	spin_unlock(&hcomm_keys_lock);
}

/*
 * May the caller (context @ctx, current credentials) use @r with @need
 * (HCOMM_ACCESS_REMOTE_READ to read, HCOMM_ACCESS_LOCAL_WRITE to write)?
 * The owner is bound by the region's own access flags; anyone else by the
 * owner's grant and the region's REMOTE_* flags.
 */
static int hcomm_key_allowed(const struct hcomm_region *r,
			     const struct hcomm_ctx *ctx, u32 need)
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
		return uid_eq(current_euid(), hcomm_grant_uid(grant)) ?
		       0 : -EACCES;
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
 *
 * Return: the region with a reference, ERR_PTR(-ENOENT) when no live
 * region has the key (a revoked key and a guessed one look the same), or
 * ERR_PTR(-EACCES) when the caller may not use it so.
 */
struct hcomm_region *hcomm_key_lookup(struct hcomm_ctx *ctx, u64 key,
				      u32 need)
{
	struct hcomm_region *r, *found = NULL;
	int ret;

	spin_lock(&hcomm_keys_lock);
	hash_for_each_possible(hcomm_keys, r, key_node, key) {
		if (r->key == key && kref_get_unless_zero(&r->ref)) {
			found = r;
			break;
		}
	}
	spin_unlock(&hcomm_keys_lock);
	if (!found)
		return ERR_PTR(-ENOENT);
	ret = hcomm_key_allowed(found, ctx, need);
	if (ret) {
		hcomm_region_put(found);
		return ERR_PTR(ret);
	}
	return found;
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
	WRITE_ONCE(r->grant, hcomm_grant_word(arg->scope, arg->access, uid));
	hcomm_region_put(r);
	return 0;
}
