/* SPDX-License-Identifier: MIT */
/*
 * hcomm_vm_launch: start N ranks of a program on this host, the way a job
 * launcher would, and collect their exit statuses.
 *
 *   hcomm_vm_launch -n N [-m MODE] [-s RANKS] [-k RANK] [-t SECS]
 *                   [-g SECS] [-e VAR=VALUE]... -- PROGRAM [ARGS...]
 *
 *   -n N      world size
 *   -m MODE   how each rank learns who it is (default env):
 *               env         HCOMM_RANK, HCOMM_WORLD_SIZE, HCOMM_ROOT_ADDR
 *                           (a root address unique to this launch)
 *               table       a rank table file (world_size N, every rank on
 *                           localhost, no root line) in HCOMM_RANK_TABLE,
 *                           plus HCOMM_RANK
 *               table-root  the same with a "root NAME" line
 *               ompi        OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK and
 *                           OMPI_MCA_ess_base_jobid (as mpirun sets them)
 *               slurm       SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_ID,
 *                           SLURM_STEP_ID
 *               pmi         PMI_RANK, PMI_SIZE, PMI_JOBID
 *   -s RANKS  start only these ranks (comma separated; default all): the
 *             others "never arrive"
 *   -k RANK   RANK is meant to die of SIGKILL (a peer-death test: it kills
 *             itself): that death counts as success, any other end of it
 *             (exit 0 included) as a failure; ignored when RANK is not
 *             started here
 *   -t SECS   kill every rank still running after SECS (default 110)
 *   -g SECS   once a rank failed, give the others SECS to finish before
 *             they are killed (default 15)
 *   -e V=X    extra environment for every rank (repeatable)
 *
 * Every launcher variable of the caller's environment (HCOMM_RANK...,
 * OMPI_*, PMIX_*, SLURM_*, PMI_*) is removed first, so an outer job does
 * not leak in.  Each rank also gets HCOMM_VMTEST_RANK and HCOMM_VMTEST_SIZE
 * (what the test should find) and dies with the launcher (PDEATHSIG).
 *
 * Exit status: 0 when every started rank exited 0; 4 when every rank exited
 * 0 or 4 (skip) and at least one 4; 1 otherwise; 2 on bad usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS	64

extern char **environ;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void __attribute__((noreturn)) usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "hcomm_vm_launch: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: hcomm_vm_launch -n N [-m env|table|"
		"table-root|ompi|slurm|pmi] [-s RANKS] [-k RANK] [-t SECS] "
		"[-g SECS] "
		"[-e VAR=VALUE]... -- PROGRAM [ARGS...]\n");
	exit(2);
}

static bool has_prefix(const char *s, const char *p)
{
	return !strncmp(s, p, strlen(p));
}

/* Remove every variable a launcher sets, so only ours are seen. */
static void scrub_env(void)
{
	static const char *const prefixes[] = {
		"OMPI_", "PMIX_", "SLURM_", "PMI_", "HCOMM_RANK=",
		"HCOMM_WORLD_SIZE=", "HCOMM_ROOT_ADDR=", "HCOMM_RANK_TABLE=",
		"HCOMM_VMTEST_RANK=", "HCOMM_VMTEST_SIZE=",
	};
	bool again = true;

	while (again) {
		char **e;

		again = false;
		for (e = environ; e && *e; e++) {
			size_t i;

			for (i = 0; i < sizeof(prefixes) / sizeof(*prefixes); i++) {
				char name[256];
				const char *eq;

				if (!has_prefix(*e, prefixes[i]))
					continue;
				eq = strchr(*e, '=');
				if (!eq || (size_t)(eq - *e) >= sizeof(name))
					continue;
				memcpy(name, *e, (size_t)(eq - *e));
				name[eq - *e] = '\0';
				unsetenv(name);
				again = true;	/* environ changed: rescan */
				break;
			}
			if (again)
				break;
		}
	}
}

static void setenvf(const char *name, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (setenv(name, buf, 1)) {
		perror("setenv");
		_exit(127);
	}
}

int main(int argc, char **argv)
{
	const char *mode = "env", *only = NULL;
	double limit = 110, grace = 15, deadline, kill_at = 0;
	char *extra[64], id[96], table[160] = "";
	int nextra = 0, n = 0, opt, r, started = 0, running = 0, victim = -1;
	pid_t pids[MAX_RANKS];
	int status[MAX_RANKS];
	bool start[MAX_RANKS], done[MAX_RANKS];
	bool any_fail = false, any_skip = false, timed_out = false;
	struct timespec ts;

	while ((opt = getopt(argc, argv, "+n:m:s:k:t:g:e:h")) != -1) {
		switch (opt) {
		case 'n':
			n = atoi(optarg);
			break;
		case 'm':
			mode = optarg;
			break;
		case 's':
			only = optarg;
			break;
		case 'k':
			victim = atoi(optarg);
			break;
		case 't':
			limit = atof(optarg);
			break;
		case 'g':
			grace = atof(optarg);
			break;
		case 'e':
			if (nextra >= 64 || !strchr(optarg, '='))
				usage("-e VAR=VALUE (at most 64)");
			extra[nextra++] = optarg;
			break;
		default:
			usage("bad option");
		}
	}
	if (n < 1 || n > MAX_RANKS)
		usage("-n: 1 .. %d", MAX_RANKS);
	if (optind >= argc)
		usage("no program");
	if (strcmp(mode, "env") && strcmp(mode, "table") &&
	    strcmp(mode, "table-root") && strcmp(mode, "ompi") &&
	    strcmp(mode, "slurm") && strcmp(mode, "pmi"))
		usage("unknown mode %s", mode);
	if (victim >= n)
		usage("-k: rank %d out of range", victim);
	for (r = 0; r < n; r++) {
		start[r] = !only;
		done[r] = false;
		pids[r] = -1;
		status[r] = 0;
	}
	if (only) {
		char *s = strdup(only), *tok, *save = NULL;

		for (tok = strtok_r(s, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			r = atoi(tok);
			if (r < 0 || r >= n)
				usage("-s: rank %d out of range", r);
			start[r] = true;
		}
		free(s);
	}

	setvbuf(stdout, NULL, _IOLBF, 0);
	scrub_env();
	clock_gettime(CLOCK_REALTIME, &ts);
	/* Unique per launch: abstract socket names must not collide. */
	snprintf(id, sizeof(id), "libvm-%d-%lx", (int)getpid(),
		 (unsigned long)(ts.tv_nsec ^ (ts.tv_sec << 20)));

	if (!strncmp(mode, "table", 5)) {
		FILE *f;

		snprintf(table, sizeof(table), "/tmp/hcomm-%s.table", id);
		f = fopen(table, "w");
		if (!f) {
			perror(table);
			return 1;
		}
		fprintf(f, "# rank table written by hcomm_vm_launch\n");
		fprintf(f, "world_size %d\n", n);
		if (!strcmp(mode, "table-root"))
			fprintf(f, "root hcomm-%s-t\n", id);
		for (r = 0; r < n; r++)
			fprintf(f, "rank %d host localhost\n", r);
		if (fclose(f)) {
			perror(table);
			return 1;
		}
	}

	fflush(NULL);
	for (r = 0; r < n; r++) {
		pid_t pid;
		int i;

		if (!start[r])
			continue;
		pid = fork();
		if (pid < 0) {
			perror("fork");
			any_fail = true;
			break;
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			setenvf("HCOMM_VMTEST_RANK", "%d", r);
			setenvf("HCOMM_VMTEST_SIZE", "%d", n);
			if (!strcmp(mode, "env")) {
				setenvf("HCOMM_RANK", "%d", r);
				setenvf("HCOMM_WORLD_SIZE", "%d", n);
				setenvf("HCOMM_ROOT_ADDR", "hcomm-%s", id);
			} else if (!strncmp(mode, "table", 5)) {
				setenvf("HCOMM_RANK_TABLE", "%s", table);
				setenvf("HCOMM_RANK", "%d", r);
			} else if (!strcmp(mode, "ompi")) {
				setenvf("OMPI_COMM_WORLD_RANK", "%d", r);
				setenvf("OMPI_COMM_WORLD_SIZE", "%d", n);
				setenvf("OMPI_COMM_WORLD_LOCAL_RANK", "%d", r);
				setenvf("OMPI_COMM_WORLD_LOCAL_SIZE", "%d", n);
				setenvf("OMPI_MCA_ess_base_jobid", "%lu",
					(unsigned long)getppid() * 65536UL +
					((unsigned long)ts.tv_nsec & 0xffff));
			} else if (!strcmp(mode, "slurm")) {
				setenvf("SLURM_PROCID", "%d", r);
				setenvf("SLURM_NTASKS", "%d", n);
				setenvf("SLURM_JOB_ID", "%d", (int)getppid());
				setenvf("SLURM_STEP_ID", "%lu",
					(unsigned long)ts.tv_nsec & 0xffff);
			} else {
				setenvf("PMI_RANK", "%d", r);
				setenvf("PMI_SIZE", "%d", n);
				setenvf("PMI_JOBID", "%s", id);
			}
			for (i = 0; i < nextra; i++)
				if (putenv(extra[i]))
					_exit(127);
			execv(argv[optind], &argv[optind]);
			fprintf(stderr, "hcomm_vm_launch: exec %s: %s\n",
				argv[optind], strerror(errno));
			_exit(127);
		}
		pids[r] = pid;
		started++;
		running++;
	}

	deadline = now() + limit;
	while (running > 0) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);

		if (pid < 0 && errno != EINTR)
			break;
		if (pid > 0) {
			for (r = 0; r < n; r++)
				if (pids[r] == pid)
					break;
			if (r == n)
				continue;
			done[r] = true;
			status[r] = st;
			running--;
			if (r == victim) {
				/* Only its SIGKILL is what the test meant. */
				if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
					any_fail = true;
			} else if (WIFEXITED(st) && WEXITSTATUS(st) == 4) {
				any_skip = true;
			} else if (!WIFEXITED(st) || WEXITSTATUS(st)) {
				any_fail = true;
				if (!kill_at)
					kill_at = now() + grace;
			}
			continue;
		}
		if (now() > deadline || (kill_at && now() > kill_at)) {
			if (now() > deadline)
				timed_out = true;
			for (r = 0; r < n; r++)
				if (start[r] && !done[r] && pids[r] > 0)
					kill(pids[r], SIGKILL);
			kill_at = 0;
			deadline = now() + 3600;
			any_fail = true;
			continue;
		}
		usleep(10000);
	}

	for (r = 0; r < n; r++) {
		int st = status[r];

		if (!start[r] || pids[r] < 0)
			continue;
		if (!done[r])
			printf("launch: rank %d (pid %d): lost\n", r,
			       (int)pids[r]);
		else if (r == victim && WIFSIGNALED(st) &&
			 WTERMSIG(st) == SIGKILL && !timed_out)
			printf("launch: rank %d (pid %d): killed by SIGKILL, "
			       "as meant (-k)\n", r, (int)pids[r]);
		else if (r == victim && WIFEXITED(st))
			printf("launch: rank %d (pid %d): exit status %d, but "
			       "it was meant to die of SIGKILL (-k)\n", r,
			       (int)pids[r], WEXITSTATUS(st));
		else if (WIFEXITED(st) && WEXITSTATUS(st))
			printf("launch: rank %d (pid %d): exit status %d%s\n",
			       r, (int)pids[r], WEXITSTATUS(st),
			       WEXITSTATUS(st) == 4 ? " (skip)" : "");
		else if (WIFSIGNALED(st))
			printf("launch: rank %d (pid %d): killed by signal %d "
			       "(%s)%s\n", r, (int)pids[r], WTERMSIG(st),
			       strsignal(WTERMSIG(st)),
			       timed_out ? ", after the time limit" : "");
	}
	if (timed_out)
		printf("launch: time limit of %.0f s reached\n", limit);
	if (table[0])
		unlink(table);
	if (!started || any_fail)
		return 1;
	return any_skip ? 4 : 0;
}
