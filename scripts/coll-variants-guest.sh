#!/bin/bash
# SPDX-License-Identifier: MIT
#
# hcomm_coll_perf alone (no mpirun) on the VMs of the network test bed,
# COLL_PER_VM ranks in each (default 1), once per setting, all in one boot:
#
#   scripts/netvm.sh run --n 2 \
#       --env "COLL_ARGS=-t allreduce -b 1M -e 64M -f 4 -n 3" \
#       --env "COLL_VARIANTS=HCOMM_COLL_SLOTS=4 HCOMM_COLL_CHUNK=256K;HCOMM_TCP_DIGEST=none" \
#       -- bash scripts/coll-variants-guest.sh
#
# COLL_ARGS: hcomm_coll_perf's arguments (default: a broadcast from 1 to
# 16 MiB); COLL_VARIANTS: settings separated by ';', each a list of
# VAR=value for every rank (default: one run with none); COLL_XP: the
# transport (HCOMM_TRANSPORT, default tcp; auto with COLL_PER_VM=2 and
# HCOMM_KO, the module, which is then loaded: the kernel inside each VM,
# rdma and tcp across); COLL_PERF=1: rank 0's VM records each run with
# "perf record -a" and leaves the report of the last in
# $NETVM_RUN/out/perf-vm1.txt.  Settings compared in one boot
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
per=${COLL_PER_VM:-1}
case $per in
''|*[!0-9]*|0) echo "coll-variants: COLL_PER_VM=$per: 1 or more" >&2; exit 2 ;;
esac
if [ -n "${HCOMM_KO:-}" ] && [ ! -e /dev/hcomm ]; then
	insmod "$HCOMM_KO" && chmod 0666 /dev/hcomm ||
		{ echo "coll-variants: insmod $HCOMM_KO failed" >&2; exit 2; }
fi
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
	pids=()
	for ((j = per - 1; j >= 0; j--)); do
		run=("$bench")
		[ "$j" = 0 ] && run=("${pre[@]}" "$bench")
		# shellcheck disable=SC2086 # $v and $args are word lists
		env $v HCOMM_RANK=$(((VM_ID - 1) * per + j)) \
			HCOMM_WORLD_SIZE=$((NVM * per)) \
			HCOMM_ROOT_ADDR="$(ip_of 1):$((25200 + i))" \
			HCOMM_JOB_ID="coll-variant-$i" \
			HCOMM_TRANSPORT="${COLL_XP:-tcp}" \
			timeout 900 "${run[@]}" $args \
			> "/tmp/coll.out.$j" 2> "/tmp/coll.err.$j" &
		pids+=($!)
	done
	rc=0
	for p in "${pids[@]}"; do
		wait "$p" || rc=1
	done
	mv /tmp/coll.out.0 /tmp/coll.out
	cat /tmp/coll.err.* > /tmp/coll.err
	rm -f /tmp/coll.out.* /tmp/coll.err.*
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
