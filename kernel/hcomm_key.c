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
