/* SPDX-License-Identifier: MIT */
/*
 * pypto_sched_bench: libpypto's scheduler against OpenMP tasks (libgomp),
 * a oneTBB flow graph and StarPU, with the same number of worker threads,
 * in one run.
 *
 *   pypto_sched_bench [--workers N] [--width W] [--chain N] [--reps R]
 *                     [--sizes LIST] [--point-time SECS] [--max-tasks N]
 *                     [--systems LIST] [--json FILE] [--quick] [--help]
 *
 * Two figures, each printed as pypto / baseline from the same run:
 *
 *  1. Scheduler overhead per empty task (ns), for two DAGs: "wide", one
 *     source -> W independent tasks -> one sink, and "chain", N tasks each
 *     waiting for the one before.  libpypto's graph is built once
 *     (pypto_add_compute + pypto_add_dep, reported separately) and
 *     pypto_run() alone is timed, with profiling off; the same again with
 *     profiling on gives the cost of leaving it on.  oneTBB's flow graph is
 *     likewise built once and timed per run.  OpenMP and StarPU create
 *     their tasks while they run, so their figure includes the creation:
 *     the table also sets pypto's build + run against it.
 *
 *  2. Efficiency against task size: a wide DAG of tasks that each spin for
 *     1 us .. 1 ms (a calibrated busy loop on a volatile counter), enough
 *     of them for --point-time seconds of work (at most --max-tasks);
 *     efficiency = (tasks * task time / workers) / wall, the task time
 *     measured alone on the main thread just before each system's block
 *     starts its runtime (the fastest of 5 batches: a shared machine's
 *     speed drifts).  A
 *     static OpenMP loop over the same tasks (no DAG, no scheduler
 *     decisions) is the machine's ceiling.
 *
 * Every task increments its own counter (atomically, so a task run twice
 * shows as 2) and checks that its inputs ran before it; after every run
 * each counter must be exactly 1.  A wrong count or order is a failure:
 * exit status 1.  Timings never fail the run.  Exit status 2: bad usage or
 * a setup that could not be made.
 *
 * Each measurement is repeated --reps times (after one untimed warm-up
 * for the overhead DAGs); the median counts.  The systems run one after
 * the other, each set up before and torn down after its block, so that no
 * idle runtime (StarPU's workers poll) competes with the one measured.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>

#include <omp.h>
#include <starpu.h>
#include <liburing.h>

#include "pypto.h"

#define BENCH_NAME	"pypto_sched_bench"
#include "bench_util.h"
#include "pypto_sched_tbb.h"

#define REPS_MAX	MEDIAN_MAX
#define SIZES_MAX	16
#define WORKERS_MAX	1024

/* ------------------------------------------------------------------ */
/* options                                                             */
/* ------------------------------------------------------------------ */

static unsigned int opt_workers;
static long opt_width = -1, opt_chain = -1, opt_reps = -1, opt_max_tasks = -1;
static double opt_point = -1;
static bool opt_quick;
static const char *opt_json;
static double opt_sizes_us[SIZES_MAX];
static unsigned int nsizes;

static const double default_sizes_us[] = { 1, 5, 10, 50, 100, 500, 1000 };

/* ------------------------------------------------------------------ */
/* the work                                                            */
/* ------------------------------------------------------------------ */

enum { DAG_WIDE, DAG_CHAIN, DAG_NR };
static const char *const dag_name[DAG_NR] = { "wide", "chain" };

/*
 * One DAG: tasks 0 .. n-1.  Wide: 0 is the source, n-1 the sink, the
 * others depend on the source and the sink on all of them.  Chain: task i
 * depends on task i-1.
 */
struct dag {
	int kind;
	uint32_t n;
	uint64_t spin;		/* busy-loop iterations per task (0: empty) */
	uint32_t *ctr;		/* how often each task ran */
	uint64_t bad_order;	/* atomic: tasks that ran before an input */
	uint64_t bad_id;	/* atomic: calls with an id >= n */
	void *priv;		/* the system's graph or task array */
	double build_s;		/* NAN: creation is part of the run */
	/* libpypto's counters of the last run */
	uint64_t steals, parks, events;
};

/* The busy loop: a volatile counter, so every iteration is executed. */
static void __attribute__((noinline)) spin(uint64_t n)
{
	volatile uint64_t c;

	for (c = 0; c < n; c++)
		;
}

/*
 * What every task of every system does: check its inputs ran, spin,
 * count itself.  The sink of a wide DAG checks all of the middle tasks (a
 * scan of W counters, well under a nanosecond per task).
 */
static void task_body(struct dag *d, uint32_t i)
{
	uint32_t j;

	if (i >= d->n) {
		__atomic_fetch_add(&d->bad_id, 1, __ATOMIC_RELAXED);
		return;
	}
	if (d->kind == DAG_CHAIN) {
		if (i && __atomic_load_n(&d->ctr[i - 1], __ATOMIC_ACQUIRE) != 1)
			__atomic_fetch_add(&d->bad_order, 1, __ATOMIC_RELAXED);
	} else if (i == d->n - 1) {
		for (j = 1; j < i; j++)
			if (__atomic_load_n(&d->ctr[j], __ATOMIC_ACQUIRE) != 1) {
				__atomic_fetch_add(&d->bad_order, 1,
						   __ATOMIC_RELAXED);
				break;
			}
	} else if (i) {
		if (__atomic_load_n(&d->ctr[0], __ATOMIC_ACQUIRE) != 1)
			__atomic_fetch_add(&d->bad_order, 1, __ATOMIC_RELAXED);
	}
	if (d->spin)
		spin(d->spin);
	__atomic_fetch_add(&d->ctr[i], 1, __ATOMIC_RELEASE);
}

static void dag_reset(struct dag *d)
{
	memset(d->ctr, 0, (size_t)d->n * sizeof(*d->ctr));
	d->bad_order = 0;
	d->bad_id = 0;
}

/* Every task exactly once, in order: 0, or -1 after fail(). */
static int dag_check(const struct dag *d, const char *sys)
{
	uint32_t i, missing = 0, twice = 0, first = UINT32_MAX;

	for (i = 0; i < d->n; i++) {
		if (d->ctr[i] == 1)
			continue;
		if (first == UINT32_MAX)
			first = i;
		if (d->ctr[i] == 0)
			missing++;
		else
			twice++;
	}
	if (missing || twice) {
		fail("%s, %s DAG of %u tasks: %u never ran, %u ran more than "
		     "once (first: task %u ran %u times)", sys,
		     dag_name[d->kind], d->n, missing, twice, first,
		     d->ctr[first]);
		return -1;
	}
	if (d->bad_order || d->bad_id) {
		fail("%s, %s DAG of %u tasks: %llu tasks ran before one of "
		     "their inputs, %llu calls with a bad task id", sys,
		     dag_name[d->kind], d->n,
		     (unsigned long long)d->bad_order,
		     (unsigned long long)d->bad_id);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* the systems                                                         */
/* ------------------------------------------------------------------ */

struct sys {
	const char *name;
	int (*setup)(void);
	void (*teardown)(void);
	int (*build)(struct dag *d);	/* sets d->build_s */
	int (*run)(struct dag *d, double *secs);
	void (*unbuild)(struct dag *d);
};

/* ---------------------------------------------------------- libpypto */

static int pypto_profile_on;

static int py_task(void *arg, const struct pypto_exec *ex)
{
	task_body(arg, ex->tile);
	return 0;
}

static int py_fail(const char *what, int rc)
{
	fail("libpypto: %s: %s%s%s", what, pypto_strerror(rc),
	     *pypto_errmsg() ? ": " : "", pypto_errmsg());
	return -1;
}

static int py_setup(void)
{
	return 0;
}

static void py_teardown(void)
{
}

static int py_build(struct dag *d)
{
	struct pypto_graph *g;
	double t0 = now();
	uint32_t i;
	int rc;

	rc = pypto_graph_create(&g);
	if (rc)
		return py_fail("pypto_graph_create", rc);
	for (i = 0; i < d->n; i++) {
		rc = pypto_add_compute(g, NULL, py_task, d, PYPTO_ANY_DEVICE);
		if (rc < 0) {
			py_fail("pypto_add_compute", rc);
			goto err;
		}
		/* py_task takes the tile id for the task's index. */
		if ((uint32_t)rc != i) {
			fail("libpypto: pypto_add_compute returned id %d for "
			     "the tile added as number %u", rc, i);
			goto err;
		}
	}
	for (i = 1; i < d->n; i++) {
		if (d->kind == DAG_CHAIN)
			rc = pypto_add_dep(g, i - 1, i);
		else if (i < d->n - 1) {
			rc = pypto_add_dep(g, 0, i);
			if (!rc)
				rc = pypto_add_dep(g, i, d->n - 1);
		}
		if (rc < 0) {
			py_fail("pypto_add_dep", rc);
			goto err;
		}
	}
	d->build_s = now() - t0;
	d->priv = g;
	return 0;
err:
	pypto_graph_destroy(g);
	return -1;
}

static int py_run(struct dag *d, double *secs)
{
	struct pypto_config cfg;
	struct pypto_run *run = NULL;
	const struct pypto_stats *st;
	double t0;
	int rc;

	pypto_config_default(&cfg);
	cfg.workers = opt_workers;
	cfg.profile = pypto_profile_on;
	t0 = now();
	rc = pypto_run(d->priv, &cfg, NULL, &run);
	*secs = now() - t0;
	if (rc) {
		py_fail("pypto_run", rc);
		pypto_run_free(run);
		return -1;
	}
	st = run ? pypto_run_stats(run) : NULL;
	if (st) {
		d->steals = st->steals;
		d->parks = st->parks;
		d->events = st->events;
		if (st->workers != opt_workers) {
			fail("libpypto ran on %u workers, %u asked for",
			     st->workers, opt_workers);
			rc = -1;
		}
	}
	pypto_run_free(run);
	return rc ? -1 : 0;
}

static void py_unbuild(struct dag *d)
{
	pypto_graph_destroy(d->priv);
	d->priv = NULL;
}

/* ------------------------------------------------- OpenMP (libgomp) */

static int omp_setup(void)
{
	int team = 0;

	omp_set_dynamic(0);
	/* Start the thread pool (not part of any figure), check its size. */
#pragma omp parallel num_threads(opt_workers)
	{
#pragma omp single
		team = omp_get_num_threads();
	}
	if (team != (int)opt_workers) {
		fail("OpenMP made a team of %d threads, %u asked for "
		     "(OMP_THREAD_LIMIT?)", team, opt_workers);
		return -1;
	}
	return 0;
}

static void omp_teardown(void)
{
}

static int omp_build(struct dag *d)
{
	d->build_s = NAN;	/* tasks are created while it runs */
	return 0;
}

static int omp_run(struct dag *d, double *secs)
{
	uint32_t n = d->n, i;
	double t0 = now();

	if (d->kind == DAG_WIDE) {
#pragma omp parallel num_threads(opt_workers) shared(d) private(i)
#pragma omp single
		{
			task_body(d, 0);
			for (i = 1; i < n - 1; i++) {
#pragma omp task firstprivate(i) shared(d)
				task_body(d, i);
			}
#pragma omp taskwait
			task_body(d, n - 1);
		}
	} else {
		/* What the chain's tasks depend on (only its address). */
		static char token __attribute__((unused));

#pragma omp parallel num_threads(opt_workers) shared(d) private(i)
#pragma omp single
		{
			for (i = 0; i < n; i++) {
#pragma omp task firstprivate(i) shared(d) depend(inout: token)
				task_body(d, i);
			}
#pragma omp taskwait
		}
	}
	*secs = now() - t0;
	return 0;
}

static void omp_unbuild(struct dag *d)
{
	(void)d;
}

/*
 * The ceiling of the efficiency curve: the same tasks as a static loop
 * (each thread takes one contiguous share), no DAG and no scheduling.
 */
static int static_run(struct dag *d, double *secs)
{
	uint32_t n = d->n;
	double t0 = now();
	int64_t i;

	task_body(d, 0);
#pragma omp parallel for num_threads(opt_workers) schedule(static)
	for (i = 1; i < (int64_t)n - 1; i++)
		task_body(d, (uint32_t)i);
	task_body(d, n - 1);
	*secs = now() - t0;
	return 0;
}

/* ------------------------------------------------------------ oneTBB */

static struct sbtbb *tbb;

static void tbb_body(void *ctx, uint32_t i)
{
	task_body(ctx, i);
}

static int tbb_setup(void)
{
	tbb = sbtbb_create(opt_workers);
	if (!tbb) {
		fail("%s", sbtbb_errmsg());
		return -1;
	}
	return 0;
}

static void tbb_teardown(void)
{
	sbtbb_destroy(tbb);
	tbb = NULL;
}

static int tbb_build(struct dag *d)
{
	if (sbtbb_build(tbb, d->kind == DAG_CHAIN, d->n, tbb_body, d,
			&d->build_s)) {
		fail("%s", sbtbb_errmsg());
		return -1;
	}
	return 0;
}

static int tbb_run(struct dag *d, double *secs)
{
	(void)d;
	if (sbtbb_run(tbb, secs)) {
		fail("%s", sbtbb_errmsg());
		return -1;
	}
	return 0;
}

static void tbb_unbuild(struct dag *d)
{
	(void)d;
	sbtbb_free_graph(tbb);
}

/* ------------------------------------------------------------ StarPU */

static struct dag *sp_dag;	/* the DAG being run (one at a time) */
static char sp_home[64];	/* our STARPU_HOME, removed at the end */
static char sp_sched[64];

static void sp_task(void *buffers[], void *arg)
{
	(void)buffers;
	task_body(sp_dag, (uint32_t)(uintptr_t)arg);
}

/* No perfmodel: nothing to calibrate, no history files. */
static struct starpu_codelet sp_cl = {
	.where = STARPU_CPU,
	.cpu_funcs = { sp_task },
	.nbuffers = 0,
	.name = "pypto_sched_bench",
};

static int rm_entry(const char *path, const struct stat *sb, int type,
		    struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	remove(path);
	return 0;
}

static int sp_setup(void)
{
	struct starpu_conf conf;
	struct starpu_sched_policy *pol;
	const char *home = getenv("HOME");
	int rc;

	if (opt_workers > STARPU_MAXCPUS) {
		fail("StarPU: this StarPU is built for at most %d CPU "
		     "workers, %u asked for (use --workers or leave StarPU "
		     "out with --systems)", STARPU_MAXCPUS, opt_workers);
		return -1;
	}
	setenv("STARPU_SILENT", "1", 1);
	/*
	 * StarPU keeps sampling files under $STARPU_HOME or $HOME; where
	 * that is not writable (a VM with a read-only root) it gets a
	 * private directory, removed at the end.
	 */
	if (!getenv("STARPU_HOME") && (!home || access(home, W_OK))) {
		snprintf(sp_home, sizeof(sp_home), "/tmp/pypto_sched_bench.XXXXXX");
		if (!mkdtemp(sp_home)) {
			fail("StarPU: mkdtemp %s: %s", sp_home, strerror(errno));
			sp_home[0] = '\0';
			return -1;
		}
		setenv("STARPU_HOME", sp_home, 1);
	}
	starpu_conf_init(&conf);
	conf.precedence_over_environment_variables = 1;
	conf.ncpus = (int)opt_workers;
	conf.ncuda = 0;
	conf.nopencl = 0;
	conf.nmic = 0;
	conf.nmpi_ms = 0;
	conf.calibrate = 0;
	conf.bus_calibrate = 0;
	rc = starpu_init(&conf);
	if (rc) {
		fail("StarPU: starpu_init: %s", strerror(-rc));
		return -1;
	}
	if (starpu_cpu_worker_get_count() != opt_workers) {
		fail("StarPU started %u CPU workers, %u asked for",
		     starpu_cpu_worker_get_count(), opt_workers);
		starpu_shutdown();
		return -1;
	}
	pol = starpu_sched_ctx_get_sched_policy(0);
	snprintf(sp_sched, sizeof(sp_sched), "%s",
		 pol && pol->policy_name ? pol->policy_name : "?");
	return 0;
}

static void sp_teardown(void)
{
	starpu_shutdown();
	if (sp_home[0]) {
		nftw(sp_home, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		sp_home[0] = '\0';
	}
}

static int sp_build(struct dag *d)
{
	d->build_s = NAN;	/* tasks are created while it runs */
	d->priv = calloc(d->n, sizeof(struct starpu_task *));
	if (!d->priv) {
		fail("StarPU: no memory for %u task pointers", d->n);
		return -1;
	}
	return 0;
}

static struct starpu_task *sp_task_new(uint32_t i)
{
	struct starpu_task *t = starpu_task_create();

	if (!t)
		return NULL;
	t->cl = &sp_cl;
	t->cl_arg = (void *)(uintptr_t)i;
	/* Kept until we destroy it: later tasks declare deps on it. */
	t->destroy = 0;
	return t;
}

static int sp_run(struct dag *d, double *secs)
{
	struct starpu_task **t = d->priv;
	uint32_t n = d->n, i, made = 0;
	double t0;
	int rc = 0;

	sp_dag = d;
	t0 = now();
	for (i = 0; i < n; i++) {
		t[i] = sp_task_new(i);
		if (!t[i]) {
			rc = -ENOMEM;
			break;
		}
		made++;
		if (d->kind == DAG_CHAIN) {
			if (i)
				starpu_task_declare_deps_array(t[i], 1,
							       &t[i - 1]);
		} else if (i == n - 1) {
			starpu_task_declare_deps_array(t[i], n - 2, &t[1]);
		} else if (i) {
			starpu_task_declare_deps_array(t[i], 1, &t[0]);
		}
		rc = starpu_task_submit(t[i]);
		if (rc)
			break;
	}
	starpu_task_wait_for_all();
	*secs = now() - t0;
	for (i = 0; i < made; i++)
		starpu_task_destroy(t[i]);
	if (rc) {
		fail("StarPU: task %u: %s", i, strerror(-rc));
		return -1;
	}
	return 0;
}

static void sp_unbuild(struct dag *d)
{
	free(d->priv);
	d->priv = NULL;
}

/* ------------------------------------------------------------------ */

enum { S_PYPTO, S_PYPTO_PROF, S_PYPTO_NOPOOL, S_OMP, S_TBB, S_STARPU,
       S_STATIC, S_NR };

static const struct sys systems[S_NR] = {
	[S_PYPTO] = { "pypto", py_setup, py_teardown, py_build, py_run,
		      py_unbuild },
	[S_PYPTO_PROF] = { "pypto+profile", py_setup, py_teardown, py_build,
			   py_run, py_unbuild },
	/* PYPTO_POOL=0: threads made and joined by every run */
	[S_PYPTO_NOPOOL] = { "pypto-nopool", py_setup, py_teardown, py_build,
			     py_run, py_unbuild },
	[S_OMP] = { "omp", omp_setup, omp_teardown, omp_build, omp_run,
		    omp_unbuild },
	[S_TBB] = { "tbb", tbb_setup, tbb_teardown, tbb_build, tbb_run,
		    tbb_unbuild },
	[S_STARPU] = { "starpu", sp_setup, sp_teardown, sp_build, sp_run,
		       sp_unbuild },
	[S_STATIC] = { "static", omp_setup, omp_teardown, omp_build,
		       static_run, omp_unbuild },
};

/* --systems names the four; pypto+profile goes with pypto, static with
 * omp. */
static bool enabled[S_NR];
static bool systems_explicit;	/* --systems given */
static char skip_note[160];	/* a system left out of the default set */

/* ------------------------------------------------------------------ */
/* measuring                                                           */
/* ------------------------------------------------------------------ */


static uint32_t *counters;	/* sized for the largest DAG */
static unsigned int reps;

/*
 * Build d on system s, optionally one untimed run, then reps timed runs
 * (secs[]), each one checked.  0, or -1 after fail().
 */
static int run_dag(int s, struct dag *d, bool warm, double *secs)
{
	const struct sys *sy = &systems[s];
	unsigned int r;
	double el;
	int rc;

	double bs[REPS_MAX];
	unsigned int nb = 0;

	d->ctr = counters;
	rc = 0;
	/*
	 * The build time is the median of reps builds, like the run time (a
	 * single build is at the mercy of the heap: the first system
	 * measured paid its first page faults, 6x the next one's build time
	 * in --quick).  Then the runs, on one more graph: a graph built once
	 * and run many times.
	 */
	for (r = warm ? 0 : reps; r <= reps; r++) {
		d->priv = NULL;
		d->build_s = NAN;
		if (sy->build(d))
			return -1;
		if (!isnan(d->build_s))
			bs[nb++] = d->build_s;
		if (r < reps)		/* the last one is run */
			sy->unbuild(d);
	}
	for (r = warm ? 0 : 1; r <= reps && !rc; r++) {
		dag_reset(d);
		rc = sy->run(d, &el);
		if (!rc)
			rc = dag_check(d, sy->name);
		if (r)
			secs[r - 1] = el;
	}
	sy->unbuild(d);
	d->build_s = nb ? median(bs, nb) : NAN;
	return rc;
}

/* Overhead per empty task: [dag][system]. */
struct ovh {
	uint32_t tasks;
	double run_ns, build_ns;		/* per task; NAN: none */
	double samples[REPS_MAX];		/* per task, each run */
	uint64_t steals, parks, events;
	bool done;
};

static struct ovh ovh[DAG_NR][S_NR];
static uint32_t dag_tasks[DAG_NR];

static void measure_overhead(int s)
{
	int k;

	for (k = 0; k < DAG_NR; k++) {
		struct ovh *o = &ovh[k][s];
		struct dag d = { .kind = k, .n = dag_tasks[k] };
		double secs[REPS_MAX];
		unsigned int r;

		pypto_profile_on = s == S_PYPTO_PROF;
		o->tasks = d.n;
		o->run_ns = o->build_ns = NAN;
		if (run_dag(s, &d, true, secs))
			continue;
		for (r = 0; r < reps; r++)
			o->samples[r] = secs[r] * 1e9 / d.n;
		o->run_ns = median(o->samples, reps);
		o->build_ns = d.build_s * 1e9 / d.n;
		o->steals = d.steals;
		o->parks = d.parks;
		o->events = d.events;
		o->done = true;
	}
}

/* Efficiency curve points. */
struct point {
	double size_ns;		/* nominal task time */
	double task_ns;		/* measured, one task alone, at the start */
	double task_ns_sys[S_NR];	/* measured again before each system's
					 * block (the CPU's speed drifts on a
					 * shared machine) */
	uint64_t spin;		/* iterations */
	uint32_t tasks;		/* middle tasks of the wide DAG */
	double eff[S_NR];	/* median */
	double wall_s[S_NR];	/* median */
	double samples[S_NR][REPS_MAX];
};

static struct point points[SIZES_MAX];
static double ns_per_iter;

/*
 * ns per spin iteration: the fastest of several timed loops (a slower one
 * was interrupted), on the main thread before any runtime starts.
 */
static void calibrate(void)
{
	uint64_t n = 1 << 20;
	double best = INFINITY, t0, el;
	int i;

	spin(n);
	/* Grow the loop to ~20 ms so the clock's resolution does not show. */
	for (;;) {
		t0 = now();
		spin(n);
		el = now() - t0;
		if (el > 0.02 || n > (1ULL << 40))
			break;
		n *= 2;
	}
	for (i = 0; i < 5; i++) {
		t0 = now();
		spin(n);
		el = now() - t0;
		if (el < best)
			best = el;
	}
	ns_per_iter = best * 1e9 / (double)n;
}

/*
 * The actual time of one task of p's size, alone on the main thread: the
 * fastest of 5 batches of ~4 ms (the others were disturbed: the ideal
 * time of the efficiency is the undisturbed one).
 */
static double measure_task(const struct point *p)
{
	double v[5], t0;
	uint64_t k, j;
	int i;

	k = (uint64_t)(4e6 / p->size_ns) + 1;
	for (i = 0; i < 5; i++) {
		t0 = now();
		for (j = 0; j < k; j++)
			spin(p->spin);
		v[i] = (now() - t0) * 1e9 / (double)k;
	}
	qsort(v, 5, sizeof(*v), cmp_dbl);
	return v[0];
}

static void measure_curve(int s)
{
	unsigned int i, r;

	for (i = 0; i < nsizes; i++) {
		struct point *p = &points[i];
		struct dag d = { .kind = DAG_WIDE, .n = p->tasks + 2,
				 .spin = p->spin };
		double secs[REPS_MAX], ideal;

		pypto_profile_on = 0;
		p->eff[s] = p->wall_s[s] = NAN;
		if (run_dag(s, &d, false, secs))
			continue;
		ideal = (double)p->tasks * p->task_ns_sys[s] * 1e-9 /
			opt_workers;
		for (r = 0; r < reps; r++)
			p->samples[s][r] = ideal / secs[r];
		p->wall_s[s] = median(secs, reps);
		p->eff[s] = ideal / p->wall_s[s];
	}
}

/* ------------------------------------------------------------------ */
/* results                                                             */
/* ------------------------------------------------------------------ */

static double total_ns(const struct ovh *o)
{
	return isnan(o->build_ns) ? o->run_ns : o->run_ns + o->build_ns;
}

static const int baselines[] = { S_OMP, S_TBB, S_STARPU };
#define NBASE	(int)(sizeof(baselines) / sizeof(baselines[0]))

static void collect_results(void)
{
	char name[48], note[48];
	int k, b;
	unsigned int i;

	for (k = 0; k < DAG_NR; k++) {
		const struct ovh *py = &ovh[k][S_PYPTO];

		for (b = 0; b < NBASE; b++) {
			const struct ovh *o = &ovh[k][baselines[b]];
			int s = baselines[b];

			if (!enabled[s])
				continue;
			snprintf(name, sizeof(name), "overhead_%s_run",
				 dag_name[k]);
			add_result(name, py->tasks, py->run_ns, "ns/task",
				   systems[s].name, o->run_ns, false,
				   s == S_TBB ? "both run only" :
				   "baseline creates tasks in its run");
			snprintf(name, sizeof(name), "overhead_%s_build_run",
				 dag_name[k]);
			add_result(name, py->tasks, total_ns(py), "ns/task",
				   systems[s].name, total_ns(o), false,
				   "graph building included");
		}
		if (enabled[S_PYPTO_PROF]) {
			snprintf(name, sizeof(name), "overhead_%s_profile_on",
				 dag_name[k]);
			add_result(name, py->tasks, ovh[k][S_PYPTO_PROF].run_ns,
				   "ns/task", "pypto (profile off)", py->run_ns,
				   false, "cost of profile = 1");
		}
		if (enabled[S_PYPTO_NOPOOL]) {
			snprintf(name, sizeof(name), "overhead_%s_pool",
				 dag_name[k]);
			add_result(name, py->tasks, py->run_ns, "ns/task",
				   "pypto-nopool (PYPTO_POOL=0)",
				   ovh[k][S_PYPTO_NOPOOL].run_ns, false,
				   "threads kept across runs vs made per run");
		}
	}
	for (i = 0; i < nsizes; i++) {
		const struct point *p = &points[i];

		snprintf(name, sizeof(name), "efficiency_%gus",
			 p->size_ns / 1000);
		snprintf(note, sizeof(note), "%u tasks of %.0f ns", p->tasks,
			 p->task_ns);
		for (b = 0; b < NBASE; b++) {
			int s = baselines[b];

			if (enabled[s])
				add_result(name, p->size_ns, p->eff[S_PYPTO],
					   "", systems[s].name, p->eff[s],
					   true, note);
		}
		if (enabled[S_STATIC])
			add_result(name, p->size_ns, p->eff[S_PYPTO], "",
				   "static (ceiling)", p->eff[S_STATIC], true,
				   note);
	}
}

/* ------------------------------------------------------------------ */
/* output                                                              */
/* ------------------------------------------------------------------ */

static char ver[S_NR][48];
static double block_s[S_NR];	/* how long each system's block took */

static void print_overhead(void)
{
	char a[16], b[16], c[16], vd[32];
	int k, s, bi;

	printf("\n== scheduler overhead per empty task (ns per task, median "
	       "of %u runs; lower is better)\n", reps);
	printf("  %-15s", "system");
	for (k = 0; k < DAG_NR; k++)
		printf(" | %-5s %8u tasks:  run   build   total", dag_name[k],
		       dag_tasks[k]);
	printf("\n");
	for (s = 0; s < S_STATIC; s++) {
		if (!enabled[s])
			continue;
		printf("  %-15s", systems[s].name);
		for (k = 0; k < DAG_NR; k++) {
			const struct ovh *o = &ovh[k][s];

			fmt_val(o->run_ns, a, sizeof(a));
			fmt_val(o->build_ns, b, sizeof(b));
			fmt_val(total_ns(o), c, sizeof(c));
			printf(" | %20s %7s %7s %7s", "", a, b, c);
		}
		printf("\n");
	}
	if (enabled[S_OMP] || enabled[S_STARPU])
		printf("  (omp and starpu create their tasks while they run: "
		       "their run column includes it)\n");
	printf("\n  ratio pypto / baseline (< 1: pypto needs less time per "
	       "task)\n");
	for (k = 0; k < DAG_NR; k++) {
		const struct ovh *py = &ovh[k][S_PYPTO];

		for (bi = 0; bi < NBASE; bi++) {
			int sb = baselines[bi];
			const struct ovh *o = &ovh[k][sb];
			double r1 = py->run_ns / o->run_ns;
			double r2 = total_ns(py) / total_ns(o);

			if (!enabled[sb])
				continue;
			fmt_ratio(r1, a, sizeof(a));
			fmt_ratio(r2, b, sizeof(b));
			printf("  %-5s vs %-6s  run %6s  %-14s", dag_name[k],
			       systems[sb].name, a,
			       verdict(r1, false, vd, sizeof(vd)));
			printf("  build+run %6s  %s\n", b,
			       verdict(r2, false, vd, sizeof(vd)));
		}
	}
	if (enabled[S_PYPTO_PROF]) {
		printf("\n  profiling on (profile = 1) / off:");
		for (k = 0; k < DAG_NR; k++) {
			fmt_ratio(ovh[k][S_PYPTO_PROF].run_ns /
				  ovh[k][S_PYPTO].run_ns, a, sizeof(a));
			printf("  %s %s (%llu events)", dag_name[k], a,
			       (unsigned long long)ovh[k][S_PYPTO_PROF].events);
		}
		printf("\n");
	}
	if (enabled[S_PYPTO_NOPOOL]) {
		printf("  threads kept across runs (the pool) / made per run "
		       "(PYPTO_POOL=0):");
		for (k = 0; k < DAG_NR; k++) {
			fmt_ratio(ovh[k][S_PYPTO].run_ns /
				  ovh[k][S_PYPTO_NOPOOL].run_ns, a, sizeof(a));
			printf("  %s %s", dag_name[k], a);
		}
		printf("\n");
	}
	if (enabled[S_PYPTO])
		printf("  libpypto, last run: wide %llu steals %llu parks; "
		       "chain %llu steals %llu parks\n",
		       (unsigned long long)ovh[DAG_WIDE][S_PYPTO].steals,
		       (unsigned long long)ovh[DAG_WIDE][S_PYPTO].parks,
		       (unsigned long long)ovh[DAG_CHAIN][S_PYPTO].steals,
		       (unsigned long long)ovh[DAG_CHAIN][S_PYPTO].parks);
}

static const int curve_sys[] = { S_STATIC, S_PYPTO, S_OMP, S_TBB, S_STARPU };
#define NCURVE	(int)(sizeof(curve_sys) / sizeof(curve_sys[0]))

static void print_curve(void)
{
	char a[16];
	unsigned int i;
	int c, b;

	printf("\n== efficiency vs task size (wide DAG, %u workers; "
	       "efficiency = tasks * task time / workers / wall, 1 is "
	       "perfect; higher is better)\n", opt_workers);
	printf("  %8s %9s %8s", "task", "measured", "tasks");
	for (c = 0; c < NCURVE; c++)
		if (enabled[curve_sys[c]])
			printf(" %7s", systems[curve_sys[c]].name);
	printf("   pypto/:");
	for (b = 0; b < NBASE; b++)
		if (enabled[baselines[b]])
			printf(" %6s", systems[baselines[b]].name);
	printf("\n");
	for (i = 0; i < nsizes; i++) {
		const struct point *p = &points[i];
		char sz[16];

		if (p->size_ns >= 1e6)
			snprintf(sz, sizeof(sz), "%g ms", p->size_ns / 1e6);
		else
			snprintf(sz, sizeof(sz), "%g us", p->size_ns / 1e3);
		printf("  %8s %6.2f us %8u", sz, p->task_ns / 1e3, p->tasks);
		for (c = 0; c < NCURVE; c++)
			if (enabled[curve_sys[c]]) {
				fmt_ratio(p->eff[curve_sys[c]], a, sizeof(a));
				printf(" %7s", a);
			}
		printf("          ");
		for (b = 0; b < NBASE; b++)
			if (enabled[baselines[b]]) {
				fmt_ratio(p->eff[S_PYPTO] /
					  p->eff[baselines[b]], a, sizeof(a));
				printf(" %6s", a);
			}
		printf("\n");
	}
	if (enabled[S_STATIC])
		printf("  (static: the same tasks as an OpenMP static loop, no "
		       "DAG: what this machine allows)\n");
}

static int write_json(const char *path, double wall)
{
	FILE *f = fopen(path, "w");
	unsigned int i;
	int k, s, n;

	if (!f)
		return -errno;
	fprintf(f, "{\n  \"program\": \"" BENCH_NAME "\",\n  \"note\": ");
	json_host(f);
	fprintf(f, "  \"params\": {\"workers\": %u, \"width\": %u, "
		"\"chain\": %u, \"reps\": %u, \"point_s\": %g, "
		"\"max_tasks\": %ld, \"quick\": %s},\n", opt_workers,
		dag_tasks[DAG_WIDE] - 2, dag_tasks[DAG_CHAIN], reps, opt_point,
		opt_max_tasks, opt_quick ? "true" : "false");
	fprintf(f, "  \"versions\": {");
	for (s = 0, n = 0; s < S_NR; s++) {
		if (!ver[s][0])
			continue;
		fprintf(f, "%s\"%s\": ", n++ ? ", " : "", systems[s].name);
		json_str(f, ver[s]);
	}
	fprintf(f, "},\n  \"starpu_sched\": ");
	json_str(f, sp_sched[0] ? sp_sched : "");
	fprintf(f, ",\n  \"skipped\": ");
	json_str(f, skip_note);
	fprintf(f, ",\n  \"overhead\": {");
	for (k = 0; k < DAG_NR; k++) {
		fprintf(f, "%s\n    \"%s\": {\"tasks\": %u, \"unit\": "
			"\"ns/task\", \"systems\": {", k ? "," : "",
			dag_name[k], dag_tasks[k]);
		for (s = 0, n = 0; s < S_STATIC; s++) {
			const struct ovh *o = &ovh[k][s];

			if (!enabled[s])
				continue;
			fprintf(f, "%s\n      \"%s\": {\"run\": ",
				n++ ? "," : "", systems[s].name);
			json_num(f, o->run_ns);
			fprintf(f, ", \"build\": ");
			json_num(f, o->build_ns);
			fprintf(f, ", \"total\": ");
			json_num(f, total_ns(o));
			fprintf(f, ", \"run_samples\": ");
			json_arr(f, o->samples, o->done ? reps : 0);
			fprintf(f, ", \"creation_in_run\": %s",
				s == S_OMP || s == S_STARPU ? "true" : "false");
			if (s == S_PYPTO || s == S_PYPTO_PROF ||
			    s == S_PYPTO_NOPOOL)
				fprintf(f, ", \"steals\": %llu, \"parks\": "
					"%llu, \"events\": %llu",
					(unsigned long long)o->steals,
					(unsigned long long)o->parks,
					(unsigned long long)o->events);
			fprintf(f, "}");
		}
		fprintf(f, "}}");
	}
	fprintf(f, "\n  },\n  \"efficiency\": {\n    \"workers\": %u,\n"
		"    \"spin_ns_per_iter\": ", opt_workers);
	json_num(f, ns_per_iter);
	fprintf(f, ",\n    \"points\": [");
	for (i = 0; i < nsizes; i++) {
		const struct point *p = &points[i];

		fprintf(f, "%s\n      {\"task_ns\": %g, \"task_ns_measured\": ",
			i ? "," : "", p->size_ns);
		json_num(f, p->task_ns);
		fprintf(f, ", \"tasks\": %u, \"efficiency\": {", p->tasks);
		for (k = 0, n = 0; k < NCURVE; k++) {
			s = curve_sys[k];
			if (!enabled[s])
				continue;
			fprintf(f, "%s\"%s\": ", n++ ? ", " : "",
				systems[s].name);
			json_num(f, p->eff[s]);
		}
		fprintf(f, "}, \"task_ns_measured_before\": {");
		for (k = 0, n = 0; k < NCURVE; k++) {
			s = curve_sys[k];
			if (!enabled[s])
				continue;
			fprintf(f, "%s\"%s\": ", n++ ? ", " : "",
				systems[s].name);
			json_num(f, p->task_ns_sys[s]);
		}
		fprintf(f, "}, \"wall_s\": {");
		for (k = 0, n = 0; k < NCURVE; k++) {
			s = curve_sys[k];
			if (!enabled[s])
				continue;
			fprintf(f, "%s\"%s\": ", n++ ? ", " : "",
				systems[s].name);
			json_num(f, p->wall_s[s]);
		}
		fprintf(f, "}, \"efficiency_samples\": {");
		for (k = 0, n = 0; k < NCURVE; k++) {
			s = curve_sys[k];
			if (!enabled[s])
				continue;
			fprintf(f, "%s\"%s\": ", n++ ? ", " : "",
				systems[s].name);
			json_arr(f, p->samples[s], isnan(p->eff[s]) ? 0 : reps);
		}
		fprintf(f, "}}");
	}
	fprintf(f, "\n    ]\n  },\n  \"block_s\": {");
	for (s = 0, n = 0; s < S_NR; s++) {
		if (!enabled[s])
			continue;
		fprintf(f, "%s\"%s\": %.2f", n++ ? ", " : "", systems[s].name,
			block_s[s]);
	}
	fprintf(f, "},\n  \"wall_s\": %.1f,\n  \"failures\": %d,\n", wall,
		failures);
	json_results(f, "note");
	fprintf(f, "}\n");
	if (fclose(f))
		return -errno;
	return 0;
}

/* ------------------------------------------------------------------ */
/* main                                                                */
/* ------------------------------------------------------------------ */

static void usage(FILE *f, int rc)
{
	fprintf(f,
		"usage: " BENCH_NAME " [--workers N] [--width W] [--chain N] "
		"[--reps R]\n"
		"       [--sizes LIST] [--point-time SECS] [--max-tasks N]\n"
		"       [--systems LIST] [--json FILE] [--quick] [--help]\n"
		"  --workers     worker threads of every system (default: "
		"online CPUs)\n"
		"  --width       independent tasks of the wide DAG (default "
		"100000; --quick 10000)\n"
		"  --chain       tasks of the chain (default 20000; --quick "
		"2000)\n"
		"  --reps        runs per measurement, the median counts "
		"(1..%d, default 3)\n"
		"  --sizes       task sizes of the efficiency curve in us "
		"(default 1,5,10,50,100,500,1000)\n"
		"  --point-time  seconds of work per curve point (default 0.3; "
		"--quick 0.03)\n"
		"  --max-tasks   most tasks per curve point (default 200000; "
		"--quick 10000)\n"
		"  --systems     comma list of pypto,omp,tbb,starpu (default "
		"all)\n"
		"  --json        write every figure to FILE\n"
		"  --quick       a small run (under a minute on 2 slow cores)\n",
		REPS_MAX);
	exit(rc);
}

static void parse_sizes(const char *s)
{
	char *dup = strdup(s), *tok, *save = NULL, *e;

	if (!dup)
		die("no memory");
	nsizes = 0;
	for (tok = strtok_r(dup, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		double v;

		errno = 0;
		v = strtod(tok, &e);
		if (errno || e == tok || *e || !(v >= 0.1 && v <= 1e6))
			die("--sizes: task sizes in microseconds (0.1 .. "
			    "1000000), comma separated, not \"%s\"", tok);
		if (nsizes >= SIZES_MAX)
			die("--sizes: at most %d sizes", SIZES_MAX);
		opt_sizes_us[nsizes++] = v;
	}
	free(dup);
	if (!nsizes)
		die("--sizes: an empty list");
}

static void parse_systems(const char *s)
{
	char *dup = strdup(s), *tok, *save = NULL;

	if (!dup)
		die("no memory");
	memset(enabled, 0, sizeof(enabled));
	for (tok = strtok_r(dup, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "pypto"))
			enabled[S_PYPTO] = enabled[S_PYPTO_PROF] =
				enabled[S_PYPTO_NOPOOL] = true;
		else if (!strcmp(tok, "omp"))
			enabled[S_OMP] = enabled[S_STATIC] = true;
		else if (!strcmp(tok, "tbb"))
			enabled[S_TBB] = true;
		else if (!strcmp(tok, "starpu"))
			enabled[S_STARPU] = true;
		else
			die("--systems: pypto, omp, tbb or starpu, not \"%s\"",
			    tok);
	}
	free(dup);
}

/* Run one system's block: set up, overhead, curve, tear down. */
static void run_block(int s, bool overhead, bool curve)
{
	double t0 = now();
	unsigned int i;

	if (!enabled[s])
		return;
	fprintf(stderr, "# %s ...\n", systems[s].name);
	/*
	 * The task times for this system's curve, before its runtime
	 * starts: StarPU's idle workers poll and would slow the loop down.
	 */
	if (curve)
		for (i = 0; i < nsizes; i++)
			points[i].task_ns_sys[s] = measure_task(&points[i]);
	if (!systems[s].setup()) {
		if (overhead)
			measure_overhead(s);
		if (curve)
			measure_curve(s);
		systems[s].teardown();
	}
	block_s[s] = now() - t0;
	fprintf(stderr, "# %s: %.1f s\n", systems[s].name, block_s[s]);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "workers", required_argument, NULL, 'w' },
		{ "width", required_argument, NULL, 'W' },
		{ "chain", required_argument, NULL, 'c' },
		{ "reps", required_argument, NULL, 'r' },
		{ "sizes", required_argument, NULL, 's' },
		{ "point-time", required_argument, NULL, 'p' },
		{ "max-tasks", required_argument, NULL, 'm' },
		{ "systems", required_argument, NULL, 'S' },
		{ "json", required_argument, NULL, 'j' },
		{ "quick", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	double t_start = now();
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int i;
	uint32_t maxn;
	char *e;
	int opt, sp_maj = 0, sp_min = 0, sp_rel = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	/*
	 * One heap behaviour for every system: glibc's dynamic mmap and trim
	 * thresholds made the builds of whichever system ran first 2-3x
	 * slower than the same builds later (its large arrays mmapped and
	 * faulted in afresh each time).  Fixed thresholds keep freed memory
	 * in the heap for all of them alike.
	 */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	for (i = 0; i < S_NR; i++)
		enabled[i] = true;
	while ((opt = getopt_long(argc, argv, "w:W:c:r:s:p:m:S:j:qh", opts,
				  NULL)) != -1) {
		switch (opt) {
		case 'w':
			opt_workers = (unsigned int)parse_num("--workers",
						optarg, 1, WORKERS_MAX);
			break;
		case 'W':
			opt_width = parse_num("--width", optarg, 1, 10000000);
			break;
		case 'c':
			opt_chain = parse_num("--chain", optarg, 2, 10000000);
			break;
		case 'r':
			opt_reps = parse_num("--reps", optarg, 1, REPS_MAX);
			break;
		case 's':
			parse_sizes(optarg);
			break;
		case 'p':
			errno = 0;
			opt_point = strtod(optarg, &e);
			if (errno || e == optarg || *e ||
			    !(opt_point >= 0.001 && opt_point <= 60))
				die("--point-time: seconds, 0.001 .. 60, not "
				    "\"%s\"", optarg);
			break;
		case 'm':
			opt_max_tasks = parse_num("--max-tasks", optarg, 1,
						    10000000);
			break;
		case 'S':
			parse_systems(optarg);
			systems_explicit = true;
			break;
		case 'j':
			opt_json = optarg;
			break;
		case 'q':
			opt_quick = true;
			break;
		case 'h':
			usage(stdout, 0);
			break;
		default:
			usage(stderr, 2);
		}
	}
	if (optind != argc) {
		fprintf(stderr, BENCH_NAME ": unexpected argument \"%s\"\n",
			argv[optind]);
		usage(stderr, 2);
	}
	if (!opt_workers)
		opt_workers = ncpu > 0 ? (unsigned int)(ncpu > WORKERS_MAX ?
					 WORKERS_MAX : ncpu) : 1;
	if (opt_width < 0)
		opt_width = opt_quick ? 10000 : 100000;
	if (opt_chain < 0)
		opt_chain = opt_quick ? 2000 : 20000;
	if (opt_reps < 0)
		opt_reps = 3;
	if (opt_point < 0)
		opt_point = opt_quick ? 0.03 : 0.3;
	if (opt_max_tasks < 0)
		opt_max_tasks = opt_quick ? 10000 : 200000;
	if (!nsizes) {
		nsizes = sizeof(default_sizes_us) / sizeof(*default_sizes_us);
		memcpy(opt_sizes_us, default_sizes_us, sizeof(default_sizes_us));
	}
	reps = (unsigned int)opt_reps;
	dag_tasks[DAG_WIDE] = (uint32_t)opt_width + 2;
	dag_tasks[DAG_CHAIN] = (uint32_t)opt_chain;

	host_probe();
	print_host();

	calibrate();
	maxn = dag_tasks[DAG_WIDE] > dag_tasks[DAG_CHAIN] ?
	       dag_tasks[DAG_WIDE] : dag_tasks[DAG_CHAIN];
	for (i = 0; i < nsizes; i++) {
		struct point *p = &points[i];
		double n;

		p->size_ns = opt_sizes_us[i] * 1000;
		p->spin = (uint64_t)llround(p->size_ns / ns_per_iter);
		if (!p->spin)
			p->spin = 1;
		p->task_ns = measure_task(p);
		n = opt_point * opt_workers * 1e9 / p->task_ns;
		if (n > (double)opt_max_tasks)
			n = (double)opt_max_tasks;
		if (n < 8.0 * opt_workers)
			n = 8.0 * opt_workers;
		p->tasks = (uint32_t)n;
		if (p->tasks + 2 > maxn)
			maxn = p->tasks + 2;
	}
	counters = calloc(maxn, sizeof(*counters));
	if (!counters)
		die("no memory for %u counters", maxn);

	snprintf(ver[S_PYPTO], sizeof(ver[0]), "libpypto %d.%d",
		 PYPTO_VERSION_MAJOR, PYPTO_VERSION_MINOR);
	snprintf(ver[S_OMP], sizeof(ver[0]), "OpenMP %d (libgomp)", _OPENMP);
	snprintf(ver[S_TBB], sizeof(ver[0]), "oneTBB %s", sbtbb_version());
	starpu_get_version(&sp_maj, &sp_min, &sp_rel);
	snprintf(ver[S_STARPU], sizeof(ver[0]), "StarPU %d.%d.%d", sp_maj,
		 sp_min, sp_rel);
	/*
	 * A StarPU built for fewer CPU workers cannot be measured: left out
	 * of the default set with a note, a failure when asked for by name.
	 */
	if (enabled[S_STARPU] && !systems_explicit &&
	    opt_workers > STARPU_MAXCPUS) {
		enabled[S_STARPU] = false;
		snprintf(skip_note, sizeof(skip_note), "StarPU left out: "
			 "built for at most %d CPU workers, %u workers asked "
			 "for", STARPU_MAXCPUS, opt_workers);
		printf("NOTE: %s\n", skip_note);
	}
	printf("%u worker threads in every system; median of %u runs; "
	       "spin loop %.3f ns/iteration\n", opt_workers, reps,
	       ns_per_iter);
	for (i = 0; i < S_NR; i++)
		if (enabled[i] && ver[i][0])
			printf("  %-8s %s\n", systems[i].name, ver[i]);
	if (ncpu > 0 && opt_workers > (unsigned int)ncpu)
		printf("NOTE: %u workers on %ld online CPUs: oversubscribed\n",
		       opt_workers, ncpu);

	run_block(S_PYPTO, true, true);
	run_block(S_PYPTO_PROF, true, false);
	/* Read by pypto_run() at every run (no other thread reads the
	 * environment now). */
	setenv("PYPTO_POOL", "0", 1);
	run_block(S_PYPTO_NOPOOL, true, false);
	unsetenv("PYPTO_POOL");
	run_block(S_OMP, true, true);
	run_block(S_STATIC, false, true);
	run_block(S_TBB, true, true);
	run_block(S_STARPU, true, true);
	if (enabled[S_STARPU] && sp_sched[0])
		printf("  (StarPU scheduler: %s)\n", sp_sched);

	collect_results();
	print_overhead();
	print_curve();

	if (opt_json) {
		int ret = write_json(opt_json, now() - t_start);

		if (ret) {
			fprintf(stderr, BENCH_NAME ": cannot write %s: %s\n",
				opt_json, strerror(-ret));
			return 2;
		}
		printf("\nJSON: %s\n", opt_json);
	}
	free(counters);
	printf(BENCH_NAME ": %s (%.1f s)\n",
	       failures ? "FAILED CHECKS (see above)" :
	       "every task ran exactly once, in order", now() - t_start);
	return failures ? 1 : 0;
}
