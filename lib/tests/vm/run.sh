#!/bin/bash
# SPDX-License-Identifier: MIT
#
# libhcomm communicator tests against the real module (run in a VM, as
# root, with hcomm.ko loaded).  Builds nothing: make -C lib/tests/vm first
# (the binaries are in build/lib/vm/, or in $HCOMM_LIBVM_DIR).
#
#   lib/tests/vm/run.sh [--quick] [--module] [--list] [CASE...]
#
# Every case starts 2 to 4 ranks of build/lib/vm/hcomm_vm_test on this host
# through build/lib/vm/hcomm_vm_launch (fork/exec with HCOMM_RANK,
# HCOMM_WORLD_SIZE and a root address of its own, or a rank table, or the
# variables of Open MPI, Slurm or PMI), or through a real mpirun.  --quick
# caps the large transfers (for slow kernels); --module runs only the cases
# that drive the module in a way of their own (data path, callbacks,
# caches, both fronts: MODULE_CASES below), not those of the bootstrap and
# the launchers, which do the same on every kernel; CASE names restrict the
# run.
#
# Output: TAP, each case's output nested under "# ", then the line
#   libvm: N passed, N failed, N skipped
# Exit status 1 when anything failed, else 0.
#
# Bounds: each rank has an alarm (HCOMM_VMTEST_ALARM, 100 s), the launcher
# kills ranks after 110 s (and the others 15 s after one failed), and each
# case is killed after HCOMM_LIBVM_TIMEOUT seconds (120).
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
dir=${HCOMM_LIBVM_DIR:-$repo/build/lib/vm}
prog=$dir/hcomm_vm_test
launch=$dir/hcomm_vm_launch
case_timeout=${HCOMM_LIBVM_TIMEOUT:-120}
export HCOMM_VMTEST_ALARM=${HCOMM_VMTEST_ALARM:-100}

quick=0 list=0 module=0
want=
for a in "$@"; do
	case $a in
	--quick) quick=1 ;;
	--module) module=1 ;;
	--list) list=1 ;;
	-h|--help) sed -n '3,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "run.sh: unknown option $a" >&2; exit 2 ;;
	*) want="$want $a" ;;
	esac
done

# A launcher's variables from an outer job must not leak into a case.
for v in $(env | sed -n 's/^\(\(HCOMM_RANK\|HCOMM_WORLD_SIZE\|HCOMM_ROOT_ADDR\|HCOMM_RANK_TABLE\|OMPI_[A-Za-z0-9_]*\|PMIX_[A-Za-z0-9_]*\|SLURM_[A-Za-z0-9_]*\|PMI_[A-Za-z0-9_]*\)\)=.*/\1/p'); do
	unset "$v"
done

# mpirun's host name and loopback: scripts/vm-run.sh sets them up.

big=16M four=1M
[ "$quick" = 1 ] && big=1M four=256K

# name | launcher options ("mpirun" for the real one) | hcomm_vm_test arguments
CASES="
basic-2|-n 2|basic --expect env
basic-4|-n 4|basic --expect env
putget-2|-n 2|putget --max $big
putget-4|-n 4|putget --max $four
signal-2|-n 2|signal
signal-4|-n 4|signal
batch-2|-n 2|batch
batch-4|-n 4|batch
batch-qd8-2|-n 2 -e HCOMM_QUEUE_DEPTH=8|batch
batch-nobatch-2|-n 2 -e HCOMM_NO_BATCH=1|batch
batchgone-2|-n 2|batchgone
batchgone-nobatch-2|-n 2 -e HCOMM_NO_BATCH=1|batchgone
batchgone-nouring-2|-n 2 -e HCOMM_NO_URING=1|batchgone
cb-inline-2|-n 2|cb --mode inline
cb-thread-2|-n 2|cb --mode thread
cb-locked-2|-n 2|cb --mode locked
cb-thread-4|-n 4|cb --mode thread
cbnest-inline-1|-n 1|cbnest --mode inline
cbnest-thread-1|-n 1|cbnest --mode thread
cbnest-locked-1|-n 1|cbnest --mode locked
cbnest-inline-nouring-1|-n 1 -e HCOMM_NO_URING=1|cbnest --mode inline
cbnest-thread-nouring-1|-n 1 -e HCOMM_NO_URING=1|cbnest --mode thread
cbnest-locked-nouring-1|-n 1 -e HCOMM_NO_URING=1|cbnest --mode locked
fence-2|-n 2|fence
errors-2|-n 2|errors
threads-2|-n 2|threads
threads-qps4-2|-n 2 -e HCOMM_NUM_QPS=4|threads
putget-nouring-2|-n 2 -e HCOMM_NO_URING=1|putget --max $four
batch-nouring-2|-n 2 -e HCOMM_NO_URING=1|batch
cb-thread-nouring-2|-n 2 -e HCOMM_NO_URING=1|cb --mode thread
fence-nouring-2|-n 2 -e HCOMM_NO_URING=1|fence
timeout-root-alone|-n 2 -s 0 -e HCOMM_TIMEOUT_MS=1500|timeout
timeout-peer-alone|-n 2 -s 1 -e HCOMM_TIMEOUT_MS=1500|timeout
timeout-rank2-missing|-n 3 -s 0,1 -e HCOMM_TIMEOUT_MS=1500|timeout --allow-io
colltimeout-2|-n 2 -e HCOMM_TIMEOUT_MS=10000 -e HCOMM_COLL_TIMEOUT_MS=500|colltimeout
collforever-2|-n 2 -e HCOMM_TIMEOUT_MS=10000 -e HCOMM_COLL_TIMEOUT_MS=500|colltimeout --forever
table-2|-n 2 -m table|basic --expect table
table-root-2|-n 2 -m table-root|basic --expect table
env-ompi-2|-n 2 -m ompi|basic --expect ompi
env-slurm-2|-n 2 -m slurm|basic --expect slurm
env-pmi-2|-n 2 -m pmi|basic --expect pmi
mpirun-4|mpirun|basic --expect ompi
regcache-1|-n 1|regcache
rcache-1|-n 1 -e HCOMM_STATS_DIR=/tmp|rcache
rcache-nouring-1|-n 1 -e HCOMM_STATS_DIR=/tmp -e HCOMM_NO_URING=1|rcache
coll-2|-n 2|coll
coll-3|-n 3|coll
colltails-3|-n 3|colltails
qos-2|-n 2|qos
"

# The cases --module keeps: one of each way the library drives the module.
MODULE_CASES="putget-2 putget-4 signal-4 batch-4 cb-thread-4 cbnest-inline-1
cbnest-locked-nouring-1 fence-2 errors-2 threads-qps4-2 putget-nouring-2
batch-nouring-2 batchgone-2 batchgone-nouring-2 fence-nouring-2 regcache-1
rcache-1 rcache-nouring-1
coll-3 colltails-3"

selected() {
	if [ "$module" = 1 ]; then
		case " $(echo $MODULE_CASES) " in *" $1 "*) ;; *) return 1 ;; esac
	fi
	[ -z "$want" ] && return 0
	case " $want " in *" $1 "*) return 0 ;; esac
	return 1
}

n=0
while IFS='|' read -r name lopts args; do
	[ -n "$name" ] || continue
	selected "$name" || continue
	n=$((n + 1))
	[ "$list" = 1 ] && echo "$name: $lopts -- $args"
done <<< "$CASES"
[ "$list" = 1 ] && exit 0

now() { date +%s.%N; }
since() { echo "$(now) $1" | awk '{printf "%.1f", $1 - $2}'; }

echo "TAP version 13"
echo "1..$n"
[ "$(id -u)" -eq 0 ] || echo "# warning: not root"
[ -e /dev/hcomm ] || echo "# warning: /dev/hcomm missing (module not loaded?): every case will fail"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hcomm-libvm.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

passed=0 failed=0 skipped=0 i=0
t_all=$(now)
while IFS='|' read -r name lopts args; do
	[ -n "$name" ] || continue
	selected "$name" || continue
	i=$((i + 1))
	echo "# case $name: ${lopts} -- hcomm_vm_test $args"
	if [ ! -x "$prog" ] || [ ! -x "$launch" ]; then
		echo "# $prog or $launch not built (make -C lib/tests/vm)"
		echo "not ok $i $name # not built"
		failed=$((failed + 1))
		continue
	fi
	t=$(now)
	if [ "$lopts" = mpirun ]; then
		if ! command -v mpirun > /dev/null 2>&1; then
			echo "ok $i $name # SKIP mpirun not installed (openmpi-bin)"
			skipped=$((skipped + 1))
			continue
		fi
		# shellcheck disable=SC2086
		# stdin from /dev/null: mpirun would eat the case list
		{ timeout -k 5 "$case_timeout" mpirun --allow-run-as-root \
			--oversubscribe -np 4 "$prog" $args 2>&1 < /dev/null
		  echo $? > "$tmp/rc"; } | sed -u 's/^/# /'
	else
		# shellcheck disable=SC2086
		{ timeout -k 5 "$case_timeout" "$launch" $lopts -- "$prog" \
			$args 2>&1 < /dev/null
		  echo $? > "$tmp/rc"; } | sed -u 's/^/# /'
	fi
	rc=$(cat "$tmp/rc" 2>/dev/null || echo 255)
	secs=$(since "$t")
	case $rc in
	0) echo "ok $i $name # ${secs}s"; passed=$((passed + 1)) ;;
	4) echo "ok $i $name # SKIP (${secs}s)"; skipped=$((skipped + 1)) ;;
	124|137) echo "not ok $i $name # timed out after ${case_timeout}s"
		failed=$((failed + 1)) ;;
	*) echo "not ok $i $name # exit $rc (${secs}s)"; failed=$((failed + 1)) ;;
	esac
done <<< "$CASES"

# A case that never ran (the list cut short) is a failure, not a pass.
if [ "$i" -lt "$n" ]; then
	echo "# $((n - i)) of $n cases never ran"
	failed=$((failed + n - i))
fi
echo "# libvm: $(since "$t_all") s in all"
echo "libvm: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
