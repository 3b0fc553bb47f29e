#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Run the hcomm selftests and summarise them.
#
#   run_tests.sh [DIR [TEST...]]
#
# DIR holds the test binaries: by default this script's own directory when
# the binaries are next to it (the copy make puts in build/selftests), else
# ../build/selftests relative to it (the copy in selftests/).  TEST names
# (e.g. hcomm_reg_test) restrict the run; hcomm_rmmod_test always runs last
# because it unloads and reloads the module.
#
# Assumes: root, hcomm.ko loaded, debugfs mounted at /sys/kernel/debug.
# HCOMM_KO (path of hcomm.ko) enables the unload/reload test.
# HCOMM_TEST_TIMEOUT bounds each binary (seconds, default 1800): a binary
# still running then has its state and its children's (wait channel, kernel
# stacks) printed, the blocked tasks sent to the console (sysrq w), and is
# killed.
# HCOMM_SELFTEST_EXCLUDE_VARIANT=NAME runs every binary with -V NAME: the
# fixture variant NAME (e.g. ioctl) is left out (the debug kernel runs the
# io_uring variant only; stock 6.12 proves the ioctl front).
# HCOMM_SELFTEST_SKIP="TEST ..." runs every binary with -T TEST for each:
# those tests (by name, in any fixture) are left out.
#
# Output: one TAP stream; each binary's own TAP is nested under "# ", then
# "ok/not ok N selftests: hcomm: NAME".  Last line:
#   selftests: N passed, N failed, N skipped
# Exit status 1 when anything failed, else 0.

set -u

ALL="hcomm_uapi_test hcomm_reg_test hcomm_errors_test hcomm_dmabuf_test
hcomm_proc_test hcomm_xfer_test hcomm_xproc_test hcomm_cache_test
hcomm_qos_test hcomm_race_test hcomm_fuzz_test hcomm_isol_test
hcomm_rmmod_test"
not_run=
# Fault injection exists only in the debug kernel; elsewhere the test is
# not run at all (rather than counted as skipped).
if [ -d /sys/kernel/debug/failslab ]; then
	ALL="hcomm_uapi_test hcomm_reg_test hcomm_errors_test hcomm_fault_test
hcomm_dmabuf_test hcomm_proc_test hcomm_xfer_test hcomm_xproc_test
hcomm_cache_test hcomm_qos_test hcomm_race_test hcomm_fuzz_test hcomm_isol_test
hcomm_rmmod_test"
else
	not_run="# hcomm_fault_test: not run (no failslab: debug kernel only)"
fi

here=$(cd "$(dirname "$0")" && pwd)
if [ $# -ge 1 ]; then
	dir=$1
	shift
elif [ -x "$here/hcomm_reg_test" ]; then
	dir=$here
else
	dir=$here/../build/selftests
fi
dir=$(cd "$dir" 2>/dev/null && pwd) || {
	echo "run_tests.sh: no test directory $dir (make -C selftests first)" >&2
	echo "selftests: 0 passed, 1 failed, 0 skipped"
	exit 1
}

if [ $# -ge 1 ]; then
	want=" $* "
	list=""
	for t in $ALL; do
		case "$want" in *" $t "*) list="$list $t" ;; esac
	done
else
	list=$ALL
fi

timeout_s=${HCOMM_TEST_TIMEOUT:-1800}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hcomm-selftests.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

[ "$(id -u)" -eq 0 ] || echo "# warning: not root; most tests will fail"
[ -e /dev/hcomm ] || echo "# warning: /dev/hcomm missing (module not loaded?)"
[ -r /sys/kernel/debug/hcomm/stats ] ||
	echo "# warning: /sys/kernel/debug/hcomm/stats unreadable (debugfs?)"

# watchdog PID: after $timeout_s seconds, what PID and its children are
# doing (state, wait channel, kernel stack), the kernel's blocked tasks to
# the console (sysrq w), then SIGTERM and, 10 s later, SIGKILL.
descendants() {
	for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		echo "$c"
		descendants "$c"
	done
}
watchdog() {
	sleep "$timeout_s" &
	spid=$!
	trap 'kill $spid 2>/dev/null; exit 0' TERM
	wait "$spid"
	trap - TERM
	kill -0 "$1" 2>/dev/null || exit 0
	pids="$1 $(descendants "$1")"
	echo "timed out after ${timeout_s}s: pid $pids"
	for p in $pids; do
		echo "pid $p: $(tr '\0' ' ' < /proc/"$p"/cmdline 2>/dev/null)"
		grep -E '^(State|Tgid|PPid):' /proc/"$p"/status 2>/dev/null
		echo "wchan $(cat /proc/"$p"/wchan 2>/dev/null)"
		for tk in /proc/"$p"/task/*; do
			echo "task ${tk##*/}: $(cut -d' ' -f3 "$tk"/stat 2>/dev/null)"
			cat "$tk"/stack 2>/dev/null
		done
	done
	[ -w /proc/sysrq-trigger ] && echo w > /proc/sysrq-trigger
	kill -TERM $pids 2>/dev/null
	sleep 10
	kill -KILL $pids 2>/dev/null
}

n=0
for t in $list; do n=$((n + 1)); done
echo "TAP version 13"
[ -n "$not_run" ] && echo "$not_run"
echo "1..$n"

passed=0 failed=0 skipped=0 i=0
for t in $list; do
	i=$((i + 1))
	bin=$dir/$t
	log=$tmp/$t.log
	echo "# selftests: hcomm: $t"
	if [ ! -x "$bin" ]; then
		echo "# $bin: not built"
		echo "not ok $i selftests: hcomm: $t # missing"
		failed=$((failed + 1))
		continue
	fi
	: >"$log"
	rm -f "$tmp/rc"
	t0=$(cut -d' ' -f1 /proc/uptime)
	{
		set --
		[ -n "${HCOMM_SELFTEST_EXCLUDE_VARIANT:-}" ] &&
			set -- -V "$HCOMM_SELFTEST_EXCLUDE_VARIANT"
		for skip in ${HCOMM_SELFTEST_SKIP:-}; do
			set -- "$@" -T "$skip"
		done
		"$bin" "$@" 2>&1 &
		bpid=$!
		watchdog "$bpid" >"$tmp/hang" 2>&1 &
		wpid=$!
		wait "$bpid"
		echo "$?" >"$tmp/rc"
		kill "$wpid" 2>/dev/null
		wait "$wpid" 2>/dev/null
	} | while IFS= read -r line; do
		printf '%s\n' "$line" >>"$log"
		printf '# %s\n' "$line"
	done
	rc=$(cat "$tmp/rc" 2>/dev/null || echo 255)
	hung=0
	if [ -s "$tmp/hang" ]; then
		sed 's/^/# /' "$tmp/hang"
		grep -q '^timed out after' "$tmp/hang" && hung=1
	fi
	rm -f "$tmp/hang"

	# Prefer the harness's own totals; fall back to the result lines.
	tot=$(grep -E '^# Totals: pass:[0-9]+ fail:[0-9]+' "$log" | tail -n 1)
	if [ -n "$tot" ]; then
		p=$(echo "$tot" | sed -E 's/.*Totals: pass:([0-9]+).*/\1/')
		f=$(echo "$tot" | sed -E 's/.* fail:([0-9]+).*/\1/')
		xf=$(echo "$tot" | sed -E 's/.*xfail:([0-9]+).*/\1/')
		xp=$(echo "$tot" | sed -E 's/.*xpass:([0-9]+).*/\1/')
		s=$(echo "$tot" | sed -E 's/.*skip:([0-9]+).*/\1/')
		e=$(echo "$tot" | sed -E 's/.*error:([0-9]+).*/\1/')
		p=$((p + xf))
		f=$((f + xp + e))
	else
		s=$(grep -cE '^ok [0-9]+ .*# SKIP' "$log")
		p=$(grep -E '^ok [0-9]+ ' "$log" | grep -cvE '# SKIP')
		f=$(grep -cE '^not ok [0-9]+ ' "$log")
	fi
	# A crash, a timeout or a bad exit without a counted failure is one.
	if { [ "$hung" = 1 ] || [ "$rc" -ne 0 ]; } && [ "$rc" -ne 4 ] && [ "$f" -eq 0 ]; then
		echo "# $t exited with status $rc"
		[ "$hung" = 1 ] && echo "# $t timed out after ${timeout_s}s"
		f=1
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + s))

	secs=$(echo "$(cut -d' ' -f1 /proc/uptime) $t0" | awk '{printf "%.1f", $1 - $2}')
	echo "# $t: ${secs}s"
	if [ "$f" -gt 0 ]; then
		echo "not ok $i selftests: hcomm: $t # exit=$rc"
	elif [ "$p" -eq 0 ] && [ "$s" -gt 0 ]; then
		echo "ok $i selftests: hcomm: $t # SKIP"
	else
		echo "ok $i selftests: hcomm: $t"
	fi
done

echo "selftests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
