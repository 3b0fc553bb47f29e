#!/bin/bash
# SPDX-License-Identifier: MIT
#
# hcomm_coll_perf alone (no mpirun) on two ranks, one in each VM of the
# network test bed, once per setting, all in one boot:
#
#   scripts/netvm.sh run --n 2 \
#       --env "COLL_ARGS=-t allreduce -b 1M -e 64M -f 4 -n 3" \
#       --env "COLL_VARIANTS=HCOMM_COLL_SLOTS=4 HCOMM_COLL_CHUNK=256K;HCOMM_TCP_DIGEST=none" \
#       -- bash scripts/coll-variants-guest.sh
#
# COLL_ARGS: hcomm_coll_perf's arguments (default: a broadcast from 1 to
# 16 MiB); COLL_VARIANTS: settings separated by ';', each a list of
# VAR=value for both ranks (default: one run with none); COLL_XP: the
# transport (HCOMM_TRANSPORT, default tcp); COLL_PERF=1: rank 0's VM
# records each run with "perf record -a" and leaves the report of the
# last in $NETVM_RUN/out/perf-vm1.txt.  Settings compared in one boot
# run under the same host load, which two separate boots do not
# (Documentation/collectives.rst, "Across hosts").  vm1 prints every
# run's table; the exit status is 1 when any run failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
bench=${HCOMM_COLL_PERF:-$repo/build/bench/hcomm_coll_perf}
. "$NETVM_RUN/lib.sh"
args=${COLL_ARGS:--t broadcast -b 1M -e 16M -f 4 -n 3 -w 1 -c 1}
IFS=';' read -ra variants <<< "${COLL_VARIANTS:-}"
[ ${#variants[@]} -gt 0 ] || variants=("")
pre=()
if [ "$VM_ID" = 1 ] && [ "${COLL_PERF:-0}" = 1 ]; then
	command -v perf > /dev/null || { echo "coll-variants: no perf" >&2; exit 2; }
	pre=(perf record -a -o /tmp/coll-perf.data --)
fi
mkdir -p "$NETVM_RUN/out"
failed=0 i=0
for v in "${variants[@]}"; do
	i=$((i + 1))
	barrier "coll-variant-$i" || exit 1
	# shellcheck disable=SC2086 # $v and $args are word lists
	env $v HCOMM_RANK=$((VM_ID - 1)) HCOMM_WORLD_SIZE=2 \
		HCOMM_ROOT_ADDR="$(ip_of 1):$((25200 + i))" \
		HCOMM_JOB_ID="coll-variant-$i" \
		HCOMM_TRANSPORT="${COLL_XP:-tcp}" \
		timeout 900 "${pre[@]}" "$bench" $args \
		> /tmp/coll.out 2> /tmp/coll.err
	rc=$?
	[ "$rc" = 0 ] || failed=1
	cp /tmp/coll.err "$NETVM_RUN/out/coll-$i-vm$VM_ID.err"
	if [ "$VM_ID" = 1 ]; then
		echo "# setting $i: ${v:-(none)}: exit $rc"
		cat /tmp/coll.out
		[ "$rc" = 0 ] || tail -n 5 /tmp/coll.err
	fi
done
if [ ${#pre[@]} -gt 0 ]; then
	{
		perf report -i /tmp/coll-perf.data --no-children --sort comm,dso --stdio 2> /dev/null | grep -v '^#' | head -n 20
		perf report -i /tmp/coll-perf.data --no-children --sort comm,dso,sym --stdio 2> /dev/null | grep -v '^#' | head -n 60
	} > "$NETVM_RUN/out/perf-vm1.txt"
fi
exit "$failed"
