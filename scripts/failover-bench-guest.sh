#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The failover benchmark, run in both VMs of a two-NIC test bed:
#
#   scripts/netvm.sh run --n 2 --nics 2 --prenetem -- \
#       bash scripts/failover-bench-guest.sh [CUTS]
#
# build/bench/hcomm_net_bench --failover CUTS (default 5) with rank 0 on
# vm1 and rank 1 on vm2, rdma over each VM's second NIC (rxe1) and tcp
# over the first (the rank table's dev_ip), every size routed to rdma
# (HCOMM_PROBE=off) and the keep-alive at its default (50 ms where tcp
# can take over, Documentation/failover.rst).  Rank 0
# streams 64 KiB puts into rank 1 and cuts its own RoCE NIC CUTS times
# (100 % netem loss on eth1), restoring it once failed over.  vm1 prints
# the stall per cut (median, max), the longest wait for one completion,
# the time back to rdma after each restore, and the bandwidth on rdma,
# on tcp and on rdma again.  Exit status 0 when every cut failed over
# and came back.  FO_BENCH_KA=ms sets another keep-alive timeout (a
# deliberately slow one shows the stall reading grow with it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
bench=${HCOMM_NET_BENCH:-$repo/build/bench/hcomm_net_bench}
. "$NETVM_RUN/lib.sh"
cuts=${1:-5}

if [ "${NETVM_NICS:-1}" -lt 2 ]; then
	echo "failover-bench: needs two NICs per VM (netvm.sh --nics 2 --prenetem)" >&2
	exit 2
fi
table=${TMPDIR:-/tmp}/hcomm-fo-ranks.txt
{
	echo "world_size 2"
	for v in 1 2; do
		echo "rank $((v - 1)) host vm$v addr $(ip_of "$v") dev rxe1" \
			"dev_ip $(ip_of "$v" 1)"
	done
} > "$table"
if [ -n "${FO_BENCH_KA:-}" ]; then
	export HCOMM_KEEPALIVE_TIMEOUT=$FO_BENCH_KA
else
	unset HCOMM_KEEPALIVE_TIMEOUT
fi
barrier fo-start || exit 1
HCOMM_RANK=$((VM_ID - 1)) HCOMM_WORLD_SIZE=2 \
HCOMM_ROOT_ADDR=$(ip_of 1):25101 HCOMM_JOB_ID=fo-bench \
HCOMM_RANK_TABLE=$table HCOMM_PROBE=off \
	timeout 600 "$bench" --failover "$cuts" \
	--cut "tc qdisc change dev eth1 root netem loss 100%" \
	--restore "tc qdisc change dev eth1 root netem loss 0%" \
	> /tmp/fo-bench.out 2> /tmp/fo-bench.err
rc=$?
# HCOMM_LOG's lines of both ranks stay with the run's logs
mkdir -p "$NETVM_RUN/out" && cp /tmp/fo-bench.err "$NETVM_RUN/out/fo-bench-vm$VM_ID.err"
if [ "$VM_ID" = 1 ]; then
	echo "hcomm_net_bench --failover $cuts: two VMs, 64 KiB puts from rank 0, its RoCE NIC cut $cuts times (netem 100 % loss) and restored"
	grep '^failover' /tmp/fo-bench.out
	[ "$rc" = 0 ] || { echo "failover-bench: rank 0 exit $rc"; cat /tmp/fo-bench.err; }
fi
exit "$rc"
