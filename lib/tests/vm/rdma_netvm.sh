#!/bin/bash
# SPDX-License-Identifier: MIT
# The rdma transport between two kernels: the guest command of
#
#   scripts/netvm.sh run --n 2 --timeout 1500 \
#       --env RDMA_TEST_BIN=$PWD/build/lib -- bash lib/tests/vm/rdma_netvm.sh
#
# VM I is rank I-1 of a 2-rank world over rxe0 (soft-RoCE on eth0 of the
# bridge), rendezvous at VM 1.  In order: functional cases across the two
# kernels, test_rdma perf and perftest (ib_write_bw, ib_write_lat) between
# the VMs, then a silent peer: once rank 1 is ready, the host takes VM 2's
# tap down (the guest sees nothing: no carrier loss, no port event) and
# rank 0 must get HCOMM_ERR_IO from the QP's retransmission timeout.
# Exit status 1 when any step failed.
set -u
. "$NETVM_RUN/lib.sh"

bin=${RDMA_TEST_BIN:-build/lib}
rank=$((VM_ID - 1))
export HCOMM_ROOT_ADDR=$(ip_of 1):29517 HCOMM_TRANSPORT=rdma
export HCOMM_TIMEOUT_MS=60000 HCOMM_COLL_TIMEOUT_MS=600000
ulimit -l unlimited
rc=0
step() { echo "=== vm$VM_ID: $*"; }

barrier up 120 || exit 1
step "cases across kernels"
timeout 900 "$bin/test_rdma" -n 2 -r $rank xfer signal batch fence cache || rc=1
barrier cases 900 || rc=1

step "perf"
timeout 600 "$bin/test_rdma" -n 2 -r $rank perf || rc=1
barrier perf 600 || rc=1

step "perftest between the VMs"
gid=$(ibv_devinfo -v -d rxe0 | sed -n "s/.*GID\[ *\([0-9]*\)\]:.*ffff:$(ip_of $VM_ID), RoCE v2/\1/p" | head -1)
k=0
for t in "ib_write_bw -s 65536 -n 400" "ib_write_bw -s 1048576 -n 40" \
	 "ib_write_lat -s 8 -n 1000"; do
	k=$((k + 1))
	if [ $VM_ID = 1 ]; then
		timeout 120 $t -d rxe0 -x ${gid:-1} > /tmp/perf.txt 2>&1 &
		sleep 1
		barrier srv$k 60
		wait
	else
		barrier srv$k 60
		sleep 1
		timeout 120 $t -d rxe0 -x ${gid:-1} "$(ip_of 1)" 2>&1 |
			grep -E '^ *[0-9]+ +[0-9]+ ' | sed "s/^/${t%% *}: /"
	fi
done
barrier perftest 300 || rc=1

step "silent peer"
ready=$NETVM_RUN/out/cut-ready
rm -f "$ready"
if [ $VM_ID = 2 ]; then
	(
		for i in $(seq 1200); do [ -e "$ready" ] && break; sleep 0.1; done
		hostctl tap 2 0 down && echo "=== vm2: tap down at $(now)"
	) &
fi
HCOMM_COLL_TIMEOUT_MS=5000 HCOMM_RDMA_CUT_READY=$ready \
	timeout 300 "$bin/test_rdma" -n 2 -r $rank cut || rc=1
if [ $VM_ID = 2 ]; then
	wait
	hostctl tap 2 0 up
fi
barrier end 120 || rc=1
echo "=== vm$VM_ID: $([ $rc = 0 ] && echo PASS || echo FAIL)"
exit $rc
