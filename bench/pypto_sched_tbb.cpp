/* SPDX-License-Identifier: MIT */
/*
 * The oneTBB baseline of pypto_sched_bench: the benchmark's DAGs as a
 * tbb::flow::graph of continue_node<continue_msg> joined by make_edge,
 * run in a task_arena of exactly --workers threads (global_control caps
 * the whole process at the same number, so no extra TBB worker joins).
 *
 * The C side sees only the extern "C" functions of pypto_sched_tbb.h.
 *
 * The graph is built once and run several times, as libpypto's is: a
 * continue_node fires after as many continue_msg as it has predecessors
 * and then re-arms, so the same graph can be triggered again.
 */
#include <cstdint>
#include <cstdio>
#include <chrono>
#include <deque>
#include <exception>
#include <memory>
#include <new>

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/version.h>

#include "pypto_sched_tbb.h"

namespace flow = oneapi::tbb::flow;

typedef flow::continue_node<flow::continue_msg> node_t;

struct sbtbb {
	unsigned int workers;
	std::unique_ptr<oneapi::tbb::global_control> gc;
	std::unique_ptr<oneapi::tbb::task_arena> arena;
	/* The graph and its nodes (nodes go before the graph). */
	std::unique_ptr<flow::graph> g;
	std::deque<node_t> nodes;
};

static thread_local char errbuf[256];

static double seconds(std::chrono::steady_clock::time_point t0)
{
	return std::chrono::duration<double>(std::chrono::steady_clock::now() -
					     t0).count();
}

static int seterr(const char *what, const char *why)
{
	std::snprintf(errbuf, sizeof(errbuf), "%s: %s", what, why);
	return -1;
}

static void drop_graph(struct sbtbb *t)
{
	/* Nodes unregister from their graph when destroyed. */
	t->nodes.clear();
	t->g.reset();
}

extern "C" {

const char *sbtbb_errmsg(void)
{
	return errbuf;
}

const char *sbtbb_version(void)
{
	return TBB_runtime_version();
}

struct sbtbb *sbtbb_create(unsigned int workers)
{
	struct sbtbb *t = nullptr;

	try {
		t = new sbtbb;
		t->workers = workers;
		t->gc.reset(new oneapi::tbb::global_control(
			oneapi::tbb::global_control::max_allowed_parallelism,
			workers));
		/* One slot is the calling thread's: workers threads in all. */
		t->arena.reset(new oneapi::tbb::task_arena((int)workers, 1));
		t->arena->initialize();
		return t;
	} catch (const std::exception &e) {
		seterr("oneTBB setup", e.what());
	} catch (...) {
		seterr("oneTBB setup", "unknown exception");
	}
	delete t;
	return nullptr;
}

/*
 * Build the DAG: chain = 0: node 0 -> nodes 1..n-2 -> node n-1 (wide);
 * chain = 1: node i -> node i+1.  Node i calls fn(ctx, i).  The graph is
 * made inside the arena so that its tasks run there.
 */
int sbtbb_build(struct sbtbb *t, int chain, uint32_t n, sbtbb_body_fn fn,
		void *ctx, double *secs)
{
	auto t0 = std::chrono::steady_clock::now();
	int rc = 0;

	if (!t || n < 3)
		return seterr("oneTBB build", "bad arguments");
	drop_graph(t);
	try {
		t->arena->execute([&] {
			t->g.reset(new flow::graph);
			for (uint32_t i = 0; i < n; i++)
				t->nodes.emplace_back(*t->g,
					[fn, ctx, i](const flow::continue_msg &) {
						fn(ctx, i);
						return flow::continue_msg();
					});
			if (chain) {
				for (uint32_t i = 0; i + 1 < n; i++)
					flow::make_edge(t->nodes[i],
							t->nodes[i + 1]);
			} else {
				for (uint32_t i = 1; i + 1 < n; i++) {
					flow::make_edge(t->nodes[0],
							t->nodes[i]);
					flow::make_edge(t->nodes[i],
							t->nodes[n - 1]);
				}
			}
		});
	} catch (const std::bad_alloc &) {
		rc = seterr("oneTBB build", "out of memory");
	} catch (const std::exception &e) {
		rc = seterr("oneTBB build", e.what());
	} catch (...) {
		rc = seterr("oneTBB build", "unknown exception");
	}
	if (rc)
		drop_graph(t);
	*secs = seconds(t0);
	return rc;
}

/* Trigger node 0 and wait until every node ran. */
int sbtbb_run(struct sbtbb *t, double *secs)
{
	std::chrono::steady_clock::time_point t0;

	if (!t || !t->g || t->nodes.empty())
		return seterr("oneTBB run", "no graph");
	try {
		t0 = std::chrono::steady_clock::now();
		t->arena->execute([&] {
			t->nodes.front().try_put(flow::continue_msg());
			t->g->wait_for_all();
		});
		*secs = seconds(t0);
	} catch (const std::exception &e) {
		return seterr("oneTBB run", e.what());
	} catch (...) {
		return seterr("oneTBB run", "unknown exception");
	}
	return 0;
}

void sbtbb_free_graph(struct sbtbb *t)
{
	if (!t)
		return;
	try {
		t->arena->execute([&] { drop_graph(t); });
	} catch (...) {
		/* Destructors do not throw; nothing to report. */
	}
}

void sbtbb_destroy(struct sbtbb *t)
{
	if (!t)
		return;
	sbtbb_free_graph(t);
	t->arena.reset();
	t->gc.reset();
	delete t;
}

} /* extern "C" */
