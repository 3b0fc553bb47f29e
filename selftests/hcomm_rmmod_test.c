// SPDX-License-Identifier: GPL-2.0
/*
 * hcomm module lifetime: an open /dev/hcomm pins the module (rmmod with
 * O_NONBLOCK fails), after the last close it unloads and takes its debugfs
 * directory with it, and finit_module() of $HCOMM_KO brings it back with
 * the same parameters.  Needs HCOMM_KO; run last (run_tests.sh does).
 */
#include <glob.h>
#include <sys/syscall.h>

#include "kselftest_harness.h"
#include "hcomm_util.h"

#define MODNAME "hcomm"

static int delete_module(const char *name, unsigned int flags)
{
	return syscall(__NR_delete_module, name, flags);
}

static int finit_module(int fd, const char *params, int flags)
{
	return syscall(__NR_finit_module, fd, params, flags);
}

static bool path_exists(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0;
}

/* Poll up to ms for path to (dis)appear. */
static bool wait_path(const char *p, bool present, int ms)
{
	for (; ms > 0; ms -= 50) {
		if (path_exists(p) == present)
			return true;
		hc_sleep_ms(50);
	}
	return path_exists(p) == present;
}

static bool has_holders(void)
{
	glob_t g;
	bool ret;

	if (glob("/sys/module/" MODNAME "/holders/*", 0, NULL, &g))
		return false;
	ret = g.gl_pathc > 0;
	globfree(&g);
	return ret;
}

/* "max_region_size=N max_regions=M" from sysfs, to reload identically. */
static void current_params(char *buf, size_t len)
{
	static const char * const names[] = { "max_region_size",
					      "max_regions" };
	size_t i, off = 0;

	buf[0] = '\0';
	for (i = 0; i < ARRAY_SIZE(names); i++) {
		uint64_t v;

		if (hcomm_param(names[i], &v))
			continue;
		off += snprintf(buf + off, len - off, "%s%s=%llu",
				off ? " " : "", names[i],
				(unsigned long long)v);
		if (off >= len)
			break;
	}
}

TEST(rmmod_busy_then_reload)
{
	const char *ko = getenv("HCOMM_KO");
	struct hcomm_stats s;
	struct hcomm_info info;
	char params[256];
	int fd, kofd, ret, i;

	if (!ko || !*ko)
		SKIP(return, "HCOMM_KO not set: not unloading the module");
	if (!path_exists("/sys/module/" MODNAME))
		SKIP(return, "module %s not loaded", MODNAME);
	if (has_holders())
		SKIP(return, "other modules depend on %s (hcomm_kunit?)",
		     MODNAME);
	kofd = open(ko, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, kofd) TH_LOG("open HCOMM_KO=%s: %s", ko, strerror(errno));

	/* nothing open: every gauge is 0 */
	ASSERT_EQ(0, hcomm_stats_read(&s));
	ASSERT_EQ(0, s.contexts);
	ASSERT_EQ(0, s.regions);
	ASSERT_EQ(0, s.pinned_pages);
	current_params(params, sizeof(params));
	TH_LOG("reload parameters: \"%s\"", params);

	/* an open fd, even with a region, pins the module */
	fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	{
		char *buf = map_anon(PG);
		struct hcomm_reg_mem a;

		ASSERT_NE(NULL, buf);
		touch(buf, PG);
		ASSERT_EQ(0, hc_reg_mem(fd, NULL, buf, PG,
					HCOMM_ACCESS_LOCAL_WRITE, &a));
	}
	ret = delete_module(MODNAME, O_NONBLOCK);
	ASSERT_EQ(-1, ret) TH_LOG("the module unloaded under an open fd");
	ASSERT_TRUE(errno == EWOULDBLOCK || errno == EBUSY)
		TH_LOG("delete_module: %s", strerror(errno));
	ASSERT_TRUE(path_exists("/sys/module/" MODNAME));
	ASSERT_EQ(0, hcomm_stats_read(&s));
	ASSERT_EQ(1, s.contexts);
	ASSERT_EQ(1, s.regions);

	/* last close: the module goes (release may finish a little later) */
	close(fd);
	for (i = 0; i < 100; i++) {
		ret = delete_module(MODNAME, O_NONBLOCK);
		if (ret == 0 || (errno != EWOULDBLOCK && errno != EBUSY))
			break;
		hc_sleep_ms(50);
	}
	ASSERT_EQ(0, ret) TH_LOG("delete_module after close: %s",
				 strerror(errno));
	ASSERT_TRUE(wait_path("/sys/module/" MODNAME, false, 5000));
	ASSERT_FALSE(path_exists(HCOMM_DEBUGFS))
		TH_LOG("%s left behind", HCOMM_DEBUGFS);
	ASSERT_FALSE(path_exists(HCOMM_STATS));
	ASSERT_TRUE(wait_path(HCOMM_DEV, false, 5000))
		TH_LOG("%s still there after unload", HCOMM_DEV);

	/* reload: device, debugfs and parameters are back */
	ret = finit_module(kofd, params, 0);
	ASSERT_EQ(0, ret) TH_LOG("finit_module(%s, \"%s\"): %s", ko, params,
				 strerror(errno));
	close(kofd);
	ASSERT_TRUE(wait_path(HCOMM_DEV, true, 5000))
		TH_LOG("%s did not reappear", HCOMM_DEV);
	ASSERT_TRUE(path_exists(HCOMM_STATS));
	ASSERT_EQ(0, hcomm_stats_read(&s));
	ASSERT_EQ(0, s.contexts);
	ASSERT_EQ(0, s.regions);
	ASSERT_EQ(0, s.pinned_pages);
	ASSERT_EQ(0, s.memlock_pages);
	ASSERT_EQ(0, s.dmabuf_regions);
	{
		char again[256];

		current_params(again, sizeof(again));
		ASSERT_STREQ(params, again);
	}

	fd = open(HCOMM_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, hc_info(fd, NULL, &info));
	ASSERT_EQ(HCOMM_ABI_VERSION, info.abi_version);
	close(fd);
}

TEST_HARNESS_MAIN
