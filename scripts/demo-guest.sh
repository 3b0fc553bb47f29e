#!/bin/sh
# Runs INSIDE the demo VM (the command of scripts/vm-run.sh, from
# scripts/demo.sh), as root, in the repository (the host root, read-only):
#
#   scripts/demo-guest.sh [hcomm_demo arguments]
#
# Loads $HCOMM_KO, runs hcomm_demo, the benchmarks (hcomm_coll_perf under
# mpirun, 2 ranks) and the libpypto profile, and unloads the module.  Each program's output is shown and
# also sent to $HCOMM_OUT_TTY (the clean channel vm-run.sh keeps as
# <log>.out) between "HCOMM-<name>-BEGIN" and "HCOMM-<name>-END" lines,
# with the files it wrote (JSON, the timeline, the trace); scripts/demo.sh
# takes them out there.  Environment: see scripts/demo.sh.
# Exit status: the first non-zero status of a program, or 1 when the
# module does not load or unload.

# send <name> <file>: the file between the markers (if there is a channel).
send() {
	[ -s "$2" ] && [ -n "${HCOMM_OUT_TTY:-}" ] && [ -w "$HCOMM_OUT_TTY" ] ||
		return 0
	{ echo "HCOMM-$1-BEGIN"; cat "$2"
	  [ -n "$(tail -c1 "$2")" ] && echo
	  echo "HCOMM-$1-END"; } > "$HCOMM_OUT_TTY"
}

# step <name> <program> [args]: runs it, shows its output and sends it as
# <name>-TXT; the first failure becomes the exit status.
rc=0
step() {
	name=$1
	shift
	echo "--- ${1##*/} ---"
	{ "$@" 2>&1; echo $? > "/tmp/$name.rc"; } | tee "/tmp/$name.txt"
	st=$(cat "/tmp/$name.rc")
	echo "--- ${1##*/} exited $st ---"
	send "$name-TXT" "/tmp/$name.txt"
	[ "$rc" = 0 ] && rc=$st
}

insmod "$HCOMM_KO" || exit 1
step DEMO build/lib/hcomm_demo "$@"
if [ "${HCOMM_BENCH:-1}" != 0 ]; then
	# shellcheck disable=SC2086
	step BENCH build/bench/hcomm_xfer_bench ${HCOMM_BENCH_ARGS:-} \
		--json /tmp/bench.json
	send BENCH-JSON /tmp/bench.json
	# shellcheck disable=SC2086
	step LIBBENCH build/bench/hcomm_lib_bench ${HCOMM_LIB_BENCH_ARGS:-} \
		--json /tmp/lib_bench.json
	send LIBBENCH-JSON /tmp/lib_bench.json
fi
if [ "${HCOMM_BENCH:-1}" != 0 ] && command -v mpirun >/dev/null; then
	# The collectives beside Open MPI's, 2 ranks on this host (the kernel
	# transport against its shared memory).
	# shellcheck disable=SC2086
	step COLLBENCH mpirun --allow-run-as-root --oversubscribe -np 2 \
		--mca btl self,vader build/bench/hcomm_coll_perf \
		${HCOMM_COLL_BENCH_ARGS:--b 64K -e 16M -f 4 -n 5 -w 1 -z 1}
fi
if [ "${HCOMM_PYPTO:-1}" != 0 ]; then
	# shellcheck disable=SC2086
	step PYPTO-PROFILE build/pypto/pypto_profile \
		${HCOMM_PYPTO_PROFILE_ARGS:---m 1024 --n 1024 --k 1024 --tile 128 --devices 2 --prefetch-depth 4} \
		--check --visualize --output /tmp/timeline.html \
		--output /tmp/trace.json
	send PYPTO-HTML /tmp/timeline.html
	send PYPTO-TRACE /tmp/trace.json
	# shellcheck disable=SC2086
	step PYPTO-BENCH build/bench/pypto_gemm_bench \
		${HCOMM_PYPTO_BENCH_ARGS:---quick} --json /tmp/pypto_bench.json
	send PYPTO-BENCH-JSON /tmp/pypto_bench.json
fi
rmmod hcomm || { echo 'rmmod hcomm failed'; rc=1; }
exit $rc
