#!/bin/bash
# SPDX-License-Identifier: MIT
# The rdma transport's tests inside one VM (run as the guest command of
# scripts/vm-run.sh): a dummy netdev with soft-RoCE (rdma_rxe) on it, then
# build/lib/test_rdma with 2 and 4 ranks, HCOMM_NUM_QPS 1 and 4, with and
# without hcomm.ko (the registration cache's two modes), and perftest on the
# same device for a baseline.
#
#   lib/tests/vm/rdma_tests.sh [--bin DIR] [--ko FILE] [--quick] [--perf]
#                              [--only "CASE..."]
#
#   --bin DIR   where test_rdma is (default build/lib)
#   --ko FILE   hcomm.ko to load for the cache-with-module runs (default:
#               build/kmod/$(uname -r)/hcomm.ko when it exists)
#   --quick     2 ranks, 1 and 4 QPs, module mode only
#   --perf      also test_rdma perf and ib_write_bw/ib_write_lat
#   --perf-only only those
#   --only S    only these cases (space separated)
#
# Every step is bounded (timeout); the exit status is 1 when any failed.
# Two processes on ONE rxe device work inside a VM; two rxe devices (veth)
# do not (Documentation/testbed.rst).
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
bin=$repo/build/lib
ko=$repo/build/kmod/$(uname -r)/hcomm.ko
quick=0 perf=0 tests=1 only=
while [ $# -gt 0 ]; do
	case $1 in
	--bin) bin=$2; shift 2 ;;
	--ko) ko=$2; shift 2 ;;
	--quick) quick=1; shift ;;
	--perf) perf=1; shift ;;
	--perf-only) perf=1; tests=0; shift ;;
	--only) only=$2; shift 2 ;;
	*) echo "rdma_tests: unknown option $1" >&2; exit 2 ;;
	esac
done

ip=10.99.0.1
fail=0
step() { echo "=== $*"; }

step "soft-RoCE on a dummy netdev ($ip)"
ip link set lo up
ip link add d0 type dummy && ip addr add $ip/24 dev d0 && ip link set d0 up ||
	{ echo "rdma_tests: no dummy netdev"; exit 1; }
modprobe rdma_rxe || { echo "rdma_tests: no rdma_rxe"; exit 1; }
modprobe rdma_ucm 2>/dev/null
modprobe udmabuf 2>/dev/null
rdma link add rxe0 type rxe netdev d0 || { echo "rdma_tests: rdma link add"; exit 1; }
for i in $(seq 50); do
	ibv_devinfo -d rxe0 2>/dev/null | grep -q PORT_ACTIVE && break
	sleep 0.1
done
ibv_devinfo -d rxe0 | grep -E 'state|active_mtu' | head -2
ulimit -l unlimited

# the perf case keeps rank 1 in a barrier while rank 0 measures
export HCOMM_RDMA_TEST_IP=$ip HCOMM_TIMEOUT_MS=30000 HCOMM_COLL_TIMEOUT_MS=600000

run() { # label, test_rdma args...
	local label=$1 t0 rc
	shift
	step "$label: test_rdma $*"
	t0=$(date +%s)
	timeout 900 "$bin/test_rdma" "$@"
	rc=$?
	echo "=== $label: rc=$rc ($(( $(date +%s) - t0 )) s)"
	[ $rc -eq 0 ] || fail=1
}

# A perftest server and client on rxe0; up to 3 tries (perftest itself is
# flaky under emulation), the client's result line kept.
perf_pair() {
	local try out
	for try in 1 2 3; do
		timeout 60 "$@" >/tmp/perf_srv.txt 2>&1 &
		sleep 1
		out=$(timeout 60 "$@" $ip 2>&1 | grep -E '^ *[0-9]+ +[0-9]+ ')
		wait
		if [ -n "$out" ]; then
			echo "$1: $out"
			return 0
		fi
		echo "$1: try $try failed"
	done
	return 1
}

module=none
if [ -r "$ko" ] && insmod "$ko" 2>/dev/null; then
	module=$ko
fi
echo "=== hcomm.ko: $module"

if [ $tests = 0 ]; then
	:
elif [ $quick = 1 ]; then
	run "2 ranks, 1 QP" -n 2 $only
	run "2 ranks, 4 QPs" -n 2 -e HCOMM_NUM_QPS=4 $only
else
	run "2 ranks, 1 QP" -n 2 $only
	run "2 ranks, 4 QPs" -n 2 -e HCOMM_NUM_QPS=4 $only
	run "4 ranks, 1 QP" -n 4 $only
	run "4 ranks, 4 QPs" -n 4 -e HCOMM_NUM_QPS=4 $only
	run "2 ranks, no module cache, bounce off" -n 2 \
		-e HCOMM_RDMA_NO_MODULE=1 -e HCOMM_RDMA_BOUNCE_MAX=0 \
		${only:-xfer signal batch cache fence}
	run "2 ranks, inline off" -n 2 -e HCOMM_MAX_INLINE=0 \
		${only:-xfer signal inline}
fi

if [ $perf = 1 ]; then
	for mode in default spin20us nomodule bounce0 bounce64k; do
		case $mode in
		default) e= ;;
		spin20us) e="-e HCOMM_RDMA_SPIN_US=20" ;;
		nomodule) e="-e HCOMM_RDMA_NO_MODULE=1 -e HCOMM_RDMA_BOUNCE_MAX=0" ;;
		bounce0) e="-e HCOMM_RDMA_BOUNCE_MAX=0" ;;
		bounce64k) e="-e HCOMM_RDMA_BOUNCE_MAX=64K" ;;
		esac
		run "perf $mode" -n 2 $e perf
	done
	run "perf 4 QPs" -n 2 -e HCOMM_NUM_QPS=4 perf
	step "perftest baseline on rxe0 (1 QP, GID of $ip)"
	gid=$(ibv_devinfo -v -d rxe0 | sed -n "s/.*GID\[ *\([0-9]*\)\]:.*ffff:$ip, RoCE v2/\1/p" | head -1)
	for s in 8 1024 4096 65536 262144 1048576 4194304; do
		n=2000
		[ $s -ge 65536 ] && n=400
		[ $s -ge 1048576 ] && n=40
		perf_pair ib_write_bw -d rxe0 -x ${gid:-1} -s $s -n $n
	done
	perf_pair ib_write_lat -d rxe0 -x ${gid:-1} -s 8 -n 1000
fi

[ "$module" != none ] && rmmod hcomm 2>/dev/null
rdma link del rxe0 2>/dev/null
echo "=== rdma_tests: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
