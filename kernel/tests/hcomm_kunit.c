// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suites for the pure logic of hcomm.ko: VAT->PAT extent building
 * and lookup, user range checks, and key generation.
 *
 * Built as hcomm_kunit.ko on kernels with CONFIG_KUNIT; needs hcomm.ko
 * loaded first (it uses hcomm's EXPORT_SYMBOL_IF_KUNIT functions).
 */
#include <kunit/test.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/sort.h>

#include "../hcomm.h"

#define P(n)	((u64)(n) << PAGE_SHIFT)

static void hcomm_vat_free_action(void *vat)
{
	hcomm_vat_free(vat);
}

static struct hcomm_vat *hcomm_test_vat(struct kunit *test)
{
	struct hcomm_vat *vat = kunit_kzalloc(test, sizeof(*vat), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, vat);
	hcomm_vat_init(vat);
	KUNIT_ASSERT_EQ(test, 0,
			kunit_add_action_or_reset(test, hcomm_vat_free_action,
						  vat));
	return vat;
}

/* Physically contiguous pages, appended one at a time, form one extent. */
static void hcomm_vat_coalesce_contiguous(struct kunit *test)
{
	struct hcomm_vat *vat = hcomm_test_vat(test);
	int i;

	/* A 2 MiB huge page seen as 512 base pages. */
	for (i = 0; i < 512; i++)
		KUNIT_ASSERT_EQ(test, 0, hcomm_vat_append(vat, P(0x40000 + i), 1));
	KUNIT_EXPECT_EQ(test, vat->nr, 1);
	KUNIT_EXPECT_EQ(test, vat->npages, 512);
	KUNIT_EXPECT_EQ(test, vat->ext[0].addr, P(0x40000));
	KUNIT_EXPECT_EQ(test, vat->ext[0].npages, 512);
}

/* Gaps, backward jumps and repeated pages each start a new extent. */
static void hcomm_vat_split_discontiguous(struct kunit *test)
{
	struct hcomm_vat *vat = hcomm_test_vat(test);

	KUNIT_ASSERT_EQ(test, 0, hcomm_vat_append(vat, P(100), 2));
	KUNIT_ASSERT_EQ(test, 0, hcomm_vat_append(vat, P(103), 1)); /* gap */
	KUNIT_ASSERT_EQ(test, 0, hcomm_vat_append(vat, P(50), 1));  /* back */
	KUNIT_ASSERT_EQ(test, 0, hcomm_vat_append(vat, P(50), 1));  /* same */
	KUNIT_ASSERT_EQ(test, 0, hcomm_vat_append(vat, P(51), 3));  /* joins */
	KUNIT_EXPECT_EQ(test, vat->nr, 4);
	KUNIT_EXPECT_EQ(test, vat->npages, 8);
	KUNIT_EXPECT_EQ(test, vat->ext[0].pgoff, 0);
	KUNIT_EXPECT_EQ(test, vat->ext[1].pgoff, 2);
	KUNIT_EXPECT_EQ(test, vat->ext[2].pgoff, 3);
	KUNIT_EXPECT_EQ(test, vat->ext[3].pgoff, 4);
	KUNIT_EXPECT_EQ(test, vat->ext[3].npages, 4);
	KUNIT_EXPECT_EQ(test, vat->ext[3].addr, P(50));
}

static void hcomm_vat_bad_append(struct kunit *test)
{
	struct hcomm_vat *vat = hcomm_test_vat(test);

	KUNIT_EXPECT_EQ(test, -EINVAL, hcomm_vat_append(vat, P(1), 0));
	KUNIT_EXPECT_EQ(test, -EINVAL, hcomm_vat_append(vat, P(1) + 1, 1));
	KUNIT_EXPECT_EQ(test, -EOVERFLOW,
			hcomm_vat_append(vat, U64_MAX & PAGE_MASK, 2));
	KUNIT_EXPECT_EQ(test, -EOVERFLOW,
			hcomm_vat_append(vat, 0, U64_MAX >> 1));
	KUNIT_EXPECT_EQ(test, vat->nr, 0);
	KUNIT_EXPECT_EQ(test, vat->npages, 0);
}

/* Every page of a fragmented table resolves to the extent holding it. */
static void hcomm_vat_lookup_every_page(struct kunit *test)
{
	struct hcomm_vat *vat = hcomm_test_vat(test);
	const struct hcomm_vat_extent *e;
	u64 pg, i, want = 0;

	/* Extents of 1, 2, 3, ... pages separated by physical gaps. */
	for (i = 1; i <= 40; i++) {
		KUNIT_ASSERT_EQ(test, 0, hcomm_vat_append(vat, P(i * 1000), i));
		want += i;
	}
	KUNIT_ASSERT_EQ(test, vat->nr, 40);
	KUNIT_ASSERT_EQ(test, vat->npages, want);
	for (pg = 0; pg < want; pg++) {
		e = hcomm_vat_lookup(vat, pg);
		KUNIT_ASSERT_NOT_NULL(test, e);
		KUNIT_EXPECT_LE(test, e->pgoff, pg);
		KUNIT_EXPECT_LT(test, pg, e->pgoff + e->npages);
	}
	KUNIT_EXPECT_NULL(test, hcomm_vat_lookup(vat, want));
	KUNIT_EXPECT_NULL(test, hcomm_vat_lookup(vat, U64_MAX));
}

static void hcomm_vat_lookup_empty(struct kunit *test)
{
	struct hcomm_vat *vat = hcomm_test_vat(test);

	KUNIT_EXPECT_NULL(test, hcomm_vat_lookup(vat, 0));
}

/* Growth past the initial capacity keeps earlier extents intact. */
static void hcomm_vat_grows(struct kunit *test)
{
	struct hcomm_vat *vat = hcomm_test_vat(test);
	u64 i;

	for (i = 0; i < 5000; i++)
		KUNIT_ASSERT_EQ(test, 0, hcomm_vat_append(vat, P(2 * i), 1));
	KUNIT_EXPECT_EQ(test, vat->nr, 5000);
	KUNIT_EXPECT_GE(test, vat->cap, vat->nr);
	for (i = 0; i < 5000; i++) {
		KUNIT_EXPECT_EQ(test, vat->ext[i].addr, P(2 * i));
		KUNIT_EXPECT_PTR_EQ(test, hcomm_vat_lookup(vat, i), &vat->ext[i]);
	}
}

struct hcomm_range_case {
	const char *name;
	u64 addr, len, max;
	int ret;
	u64 first, npages;
	u32 offset;
};

static const struct hcomm_range_case hcomm_range_cases[] = {
	{ "one byte", 0x1000, 1, ~0ULL, 0, 0x1000, 1, 0 },
	{ "last byte of a page", 0x1fff, 1, ~0ULL, 0, 0x1000, 1, 0xfff },
	{ "two bytes across a page", 0x1fff, 2, ~0ULL, 0, 0x1000, 2, 0xfff },
	{ "aligned page", 0x2000, 0x1000, ~0ULL, 0, 0x2000, 1, 0 },
	{ "page plus one", 0x2000, 0x1001, ~0ULL, 0, 0x2000, 2, 0 },
	{ "unaligned both ends", 0x2001, 0x2000, ~0ULL, 0, 0x2000, 3, 1 },
	{ "zero length", 0x1000, 0, ~0ULL, -EINVAL },
	{ "wraps", ~0ULL - 10, 20, ~0ULL, -EOVERFLOW },
	{ "ends at top page", ~0ULL & PAGE_MASK, 0x1000, ~0ULL, -EOVERFLOW },
	{ "huge length", 0x1000, ~0ULL, ~0ULL, -EOVERFLOW },
	{ "above max", 0x1000, 0x2001, 0x2000, -E2BIG },
	{ "at max", 0x1000, 0x2000, 0x2000, 0, 0x1000, 2, 0 },
};

static void hcomm_range_desc(const struct hcomm_range_case *c, char *desc)
{
	strscpy(desc, c->name, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(hcomm_range, hcomm_range_cases, hcomm_range_desc);

static void hcomm_range_check_cases(struct kunit *test)
{
	const struct hcomm_range_case *c = test->param_value;
	u64 first = 0, npages = 0;
	u32 offset = 0;
	int ret;

	ret = hcomm_range_check(c->addr, c->len, c->max, &first, &npages,
				&offset);
	KUNIT_ASSERT_EQ(test, ret, c->ret);
	if (ret)
		return;
	KUNIT_EXPECT_EQ(test, first, c->first);
	KUNIT_EXPECT_EQ(test, npages, c->npages);
	KUNIT_EXPECT_EQ(test, offset, c->offset);
}

static int hcomm_u64_cmp(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/* Keys are non-zero and, over many draws, distinct and spread over 64 bits. */
static void hcomm_key_unique(struct kunit *test)
{
	const int n = 100000;
	u64 *keys, or_bits = 0, and_bits = ~0ULL;
	int i;

	keys = kunit_kmalloc_array(test, n, sizeof(*keys), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, keys);
	for (i = 0; i < n; i++) {
		keys[i] = hcomm_key_new();
		KUNIT_ASSERT_NE(test, keys[i], 0);
		or_bits |= keys[i];
		and_bits &= keys[i];
	}
	sort(keys, n, sizeof(*keys), hcomm_u64_cmp, NULL);
	for (i = 1; i < n; i++)
		KUNIT_ASSERT_NE(test, keys[i], keys[i - 1]);
	KUNIT_EXPECT_EQ(test, or_bits, ~0ULL);
	KUNIT_EXPECT_EQ(test, and_bits, 0);
}

static struct kunit_case hcomm_vat_cases[] = {
	KUNIT_CASE(hcomm_vat_coalesce_contiguous),
	KUNIT_CASE(hcomm_vat_split_discontiguous),
	KUNIT_CASE(hcomm_vat_bad_append),
	KUNIT_CASE(hcomm_vat_lookup_every_page),
	KUNIT_CASE(hcomm_vat_lookup_empty),
	KUNIT_CASE(hcomm_vat_grows),
	{}
};

static struct kunit_suite hcomm_vat_suite = {
	.name = "hcomm_vat",
	.test_cases = hcomm_vat_cases,
};

static struct kunit_case hcomm_range_test_cases[] = {
	KUNIT_CASE_PARAM(hcomm_range_check_cases, hcomm_range_gen_params),
	{}
};

static struct kunit_suite hcomm_range_suite = {
	.name = "hcomm_range",
	.test_cases = hcomm_range_test_cases,
};

static struct kunit_case hcomm_key_cases[] = {
	KUNIT_CASE(hcomm_key_unique),
	{}
};

static struct kunit_suite hcomm_key_suite = {
	.name = "hcomm_key",
	.test_cases = hcomm_key_cases,
};

kunit_test_suites(&hcomm_vat_suite, &hcomm_range_suite, &hcomm_key_suite);

MODULE_DESCRIPTION("KUnit tests for hcomm");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);
