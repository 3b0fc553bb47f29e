#!/bin/bash
# `make demo`: dependencies, builds (lib, pypto, bench and the module for
# stock 6.12), then a stock 6.12 VM running scripts/demo-guest.sh: it loads
# hcomm.ko, runs build/lib/hcomm_demo, build/bench/hcomm_xfer_bench and
# build/bench/hcomm_lib_bench (and libpypto, below), and unloads it.
# The guest's output is shown live; the console is kept in build/logs/demo.log.
# The benchmark's table and JSON come back over the clean serial channel
# (build/logs/demo.log.out): they are saved as build/logs/bench.txt and
# build/logs/bench.json (hcomm_lib_bench's as build/logs/lib_bench.txt and
# build/logs/lib_bench.json), and the tables are printed again at the end.
# Extra arguments go to hcomm_demo; HCOMM_BENCH_ARGS to hcomm_xfer_bench
# (e.g. HCOMM_BENCH_ARGS="--max-size 16M"), HCOMM_LIB_BENCH_ARGS to
# hcomm_lib_bench, HCOMM_COLL_BENCH_ARGS to hcomm_coll_perf (allreduce of
# 2 ranks under mpirun beside Open MPI's, build/logs/coll_perf.txt);
# HCOMM_BENCH=0 skips the benchmarks.
# Then libpypto: build/bench/pypto_sched_bench runs first on this machine
# (scheduler overhead against OpenMP, oneTBB and StarPU; no module needed),
# and build/bench/hcomm_cb_bench (completion-to-callback latency of the
# callback modes, tcp over loopback: build/logs/cb_bench.{txt,json}),
# and in the VM build/pypto/pypto_profile runs a tiled SGEMM through
# /dev/hcomm (checked against cblas_sgemm) and brings back its diagnosis,
# build/logs/timeline.html and build/logs/trace.json, followed by
# build/bench/pypto_gemm_bench (build/logs/pypto_bench.{txt,json}).
# HCOMM_SCHED_BENCH_ARGS, HCOMM_PYPTO_PROFILE_ARGS and HCOMM_PYPTO_BENCH_ARGS
# replace their defaults (--quick; the 1024^3 tile 128 2-device profile;
# --quick); HCOMM_PYPTO=0 skips libpypto.
# First the main workload: scripts/dist-guest.sh in two VMs of
# scripts/netvm.sh runs build/pypto/pypto_dist with 2 ranks in each VM (4 in
# all: the kernel transport inside a VM, rdma or tcp across, as the probe
# chose): a 2048 x 2048 float32 tiled SGEMM split along K, operands moved
# by libpypto's pipeline, partial products summed by FP16-compressed
# allreduce tiles; rank 0's output is shown live, its timeline and trace
# land in build/logs/dist_timeline.html and build/logs/dist_trace.json.
# Rank 0 checks the first block row of C against OpenBLAS in the VM (the
# ratio to that call), and this machine checks all of C, natively, with
# pypto_dist --verify (HCOMM_DIST_ARGS replaces "--size 2048 --tile 256
# --ref-rows 256"; HCOMM_DIST=0 skips it).
# Then the network: two VMs of scripts/netvm.sh run scripts/net-bench-guest.sh
# (hcomm_net_bench over rdma and tcp beside ib_write_bw, ib_write_lat and
# iperf3 on the same devices; build/logs/net_bench.txt), in short form:
# sizes up to HCOMM_NET_BENCH_MAX (4 MiB; 67108864 for the whole table);
# then RoCE -> TCP failover under a stream, the link cut HCOMM_FO_CUTS
# times (3).  HCOMM_NET=0 skips both.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
. "$here/lib.sh"

scripts/install-deps.sh
v=$(ls /boot/vmlinuz-6.12.* 2>/dev/null | sort -V | tail -n1 | sed 's|^/boot/vmlinuz-||')
[ -n "$v" ] || die "no stock 6.12 kernel in /boot (run scripts/install-deps.sh)"
log "building libhcomm, the benchmark and the module for $v"
make -s -C lib
make -s -C pypto
make -s -C bench
make -s -C lib/tests/vm
make -s -C kernel KDIR="/lib/modules/$v/build" O="$repo/build/kmod/$v"
[ -x build/lib/hcomm_demo ] || die "build/lib/hcomm_demo was not built"
[ -x build/bench/hcomm_xfer_bench ] || die "build/bench/hcomm_xfer_bench was not built"
[ -x build/bench/hcomm_lib_bench ] || die "build/bench/hcomm_lib_bench was not built"
[ -x build/bench/hcomm_net_bench ] || die "build/bench/hcomm_net_bench was not built"
[ -x build/bench/hcomm_cb_bench ] || die "build/bench/hcomm_cb_bench was not built"
for p in build/pypto/pypto_profile build/bench/pypto_gemm_bench \
	build/bench/pypto_sched_bench build/pypto/pypto_dist \
	build/lib/vm/hcomm_vm_launch; do
	[ -x "$p" ] || die "$p was not built"
done

logs=$repo/build/logs
console=$logs/demo.log
mkdir -p "$logs"
rm -f "$logs/bench.json" "$logs/bench.txt" "$logs/lib_bench.json" \
	"$logs/lib_bench.txt" "$logs/pypto_profile.txt" "$logs/timeline.html" \
	"$logs/trace.json" "$logs/pypto_bench.txt" "$logs/pypto_bench.json" \
	"$logs/sched_bench.txt" "$logs/sched_bench.json" "$logs/net_bench.txt" \
	"$logs/dist_timeline.html" "$logs/dist_trace.json" "$logs/dist.txt" \
	"$logs/dist_verify.txt" "$logs/cb_bench.txt" "$logs/cb_bench.json"
rc=0

# The main workload, across hosts; rank 0 (vm1) is followed live.
if [ "${HCOMM_DIST:-1}" != 0 ]; then
	dargs=${HCOMM_DIST_ARGS:---size 2048 --tile 256 --ref-rows 256}
	log "the main workload: pypto_dist $dargs, 2 VMs x 2 ranks (a few minutes under emulation)"
	drun=/var/tmp/hcomm-net/run.demo-$$
	rm -rf "$logs/dist"
	# shellcheck disable=SC2086
	scripts/netvm.sh run --n 2 --smp 2 --run "$drun" \
		--kernel "/boot/vmlinuz-$v" --log-dir "$logs/dist" \
		--env "HCOMM_KO=$repo/build/kmod/$v/hcomm.ko" --timeout 1800 \
		-- bash scripts/dist-guest.sh $dargs > "$logs/dist.log" 2>&1 &
	npid=$!
	{
		while [ ! -f "$drun/vm1.console" ] && kill -0 "$npid" 2>/dev/null; do
			sleep 1
		done
		tail -n +1 -F --pid="$npid" "$drun/vm1.console" 2>/dev/null |
			grep -a --line-buffered -vE '^\[ *[0-9]+\.[0-9]+\]|^NETVM|^netvm|^\s*$'
	} &
	tpid=$!
	if wait "$npid"; then
		log "distributed SGEMM: done"
	else
		rc=1
		log "the distributed SGEMM failed (see $logs/dist.log)"
	fi
	wait "$tpid" 2>/dev/null || true
	# all of C, here: the job's --size and --seed, 4 ranks
	dsize=2048 dseed=1
	read -ra da <<< "$dargs"
	for (( i = 0; i + 1 < ${#da[@]}; i++ )); do
		case ${da[i]} in
		--size) dsize=${da[i + 1]} ;;
		--seed) dseed=${da[i + 1]} ;;
		esac
	done
	if [ -s "$logs/dist/out/C.f32" ]; then
		log "checking all of C on this machine: pypto_dist --verify"
		build/pypto/pypto_dist --verify "$logs/dist/out/C.f32" \
			--ranks 4 --size "$dsize" --seed "$dseed" |
			tee "$logs/dist_verify.txt"
		[ "${PIPESTATUS[0]}" = 0 ] || rc=1
	else
		[ "$rc" != 0 ] || { rc=1; log "rank 0 saved no C: not verified"; }
	fi
	awk '/^----- vm1/ { on = 1; next } /^----- / { on = 0 } on' \
		"$logs/dist.log" | sed -n '/^pypto_dist:/,$p' > "$logs/dist.txt"
	for f in timeline.html:dist_timeline.html trace.json:dist_trace.json; do
		[ -s "$logs/dist/out/${f%%:*}" ] &&
			cp "$logs/dist/out/${f%%:*}" "$logs/${f#*:}"
	done
fi

# The scheduler benchmark needs no module: it runs here, on the real CPUs.
if [ "${HCOMM_PYPTO:-1}" != 0 ]; then
	log "pypto_sched_bench ${HCOMM_SCHED_BENCH_ARGS:---quick} (on this machine)"
	# shellcheck disable=SC2086
	build/bench/pypto_sched_bench ${HCOMM_SCHED_BENCH_ARGS:---quick} \
		--json "$logs/sched_bench.json" | tee "$logs/sched_bench.txt" ||
		die "pypto_sched_bench failed"
fi
# Completion-to-callback latency: the tcp transport on loopback, here.
if [ "${HCOMM_BENCH:-1}" != 0 ]; then
	log "hcomm_cb_bench (on this machine)"
	build/bench/hcomm_cb_bench --json "$logs/cb_bench.json" |
		tee "$logs/cb_bench.txt" || die "hcomm_cb_bench failed"
fi

HCOMM_KO=$repo/build/kmod/$v/hcomm.ko scripts/vm-run.sh \
	--kernel "/boot/vmlinuz-$v" --log "$console" --timeout 600 \
	--live -- /bin/sh scripts/demo-guest.sh "$@" || rc=$?

# The section HCOMM-<name> of the clean channel into a file, which is
# removed when nothing came back (status 1).
section() {
	awk -v b="HCOMM-$1-BEGIN" -v e="HCOMM-$1-END" \
		'$0 == e { on = 0 } on { print } $0 == b { on = 1 }' \
		"$console.out" > "$2" 2>/dev/null || true
	[ -s "$2" ] || { rm -f "$2"; return 1; }
}
# show <name> <file> <title>: a program's output, saved and printed again.
show() {
	section "$1" "$2" || return 0
	echo
	echo "=== $3 (also in $2) ==="
	cat "$2"
}
# json <name> <file> <what>: a JSON file that came back, or a note.
json() {
	if section "$1" "$2"; then
		log "$3: $2"
	else
		log "no $3 came back (see $console)"
	fi
}
if [ "${HCOMM_BENCH:-1}" != 0 ]; then
	show BENCH-TXT "$logs/bench.txt" hcomm_xfer_bench
	json BENCH-JSON "$logs/bench.json" "benchmark JSON"
	show LIBBENCH-TXT "$logs/lib_bench.txt" hcomm_lib_bench
	json LIBBENCH-JSON "$logs/lib_bench.json" "library benchmark JSON"
	show COLLBENCH-TXT "$logs/coll_perf.txt" \
		"hcomm_coll_perf: allreduce beside Open MPI's, 2 ranks in the VM"
	if [ -s "$logs/cb_bench.txt" ]; then
		echo
		echo "=== hcomm_cb_bench, run on this machine (also in $logs/cb_bench.txt) ==="
		cat "$logs/cb_bench.txt"
	fi
fi
if [ "${HCOMM_PYPTO:-1}" != 0 ]; then
	show PYPTO-PROFILE-TXT "$logs/pypto_profile.txt" \
		"pypto_profile: tiled SGEMM through /dev/hcomm"
	json PYPTO-HTML "$logs/timeline.html" "timeline (open in a browser)"
	json PYPTO-TRACE "$logs/trace.json" "Chrome trace (Perfetto)"
	show PYPTO-BENCH-TXT "$logs/pypto_bench.txt" pypto_gemm_bench
	json PYPTO-BENCH-JSON "$logs/pypto_bench.json" "pypto_gemm_bench JSON"
	if [ -s "$logs/sched_bench.txt" ]; then
		echo
		echo "=== pypto_sched_bench, run on this machine (also in $logs/sched_bench.txt) ==="
		cat "$logs/sched_bench.txt"
	fi
fi
# netvm_run DIR OUT -- ARGS: scripts/netvm.sh run --log-dir DIR ARGS,
# its output in OUT; a guest that died in rxe or trapped under TCG with no
# hcomm frame (tcg_crash, as make check judges it) runs again, twice at
# most, the crashed run's logs kept as DIR.crashed.N.
netvm_run() {
	local dir=$1 out=$2 try rc
	shift 3
	for try in 1 2 3; do
		rm -rf "$dir"
		scripts/netvm.sh run --log-dir "$dir" "$@" > "$out" 2>&1
		rc=$?
		[ "$try" -lt 3 ] && { [ "$rc" = 125 ] || [ "$rc" = 126 ]; } &&
			tcg_crash "$dir"/vm*.console || return "$rc"
		log "a guest died under TCG with no hcomm frame ($dir.crashed.$try): running it again"
		rm -rf "$dir.crashed.$try"
		mv "$dir" "$dir.crashed.$try"
	done
}
if [ "${HCOMM_NET:-1}" != 0 ]; then
	log "network: two VMs, hcomm_net_bench over rdma and tcp beside perftest and iperf3"
	if netvm_run "$logs/net-bench" "$logs/net_bench.log" -- \
		--n 2 --kernel "/boot/vmlinuz-$v" --timeout 900 \
		--env "HCOMM_NET_BENCH_MAX=${HCOMM_NET_BENCH_MAX:-4194304}" \
		-- bash scripts/net-bench-guest.sh; then
		:
	else
		rc=1
		log "the network benchmark failed (see $logs/net_bench.log)"
	fi
	# vm2's section of the runner's output is the table
	awk '/^----- vm2/ { on = 1; next } /^----- / { on = 0 } on' \
		"$logs/net_bench.log" | sed -n '/^hcomm_net_bench:/,$p' \
		> "$logs/net_bench.txt"
	echo
	echo "=== hcomm_net_bench, two VMs (also in $logs/net_bench.txt) ==="
	cat "$logs/net_bench.txt"
	fo_cuts=${HCOMM_FO_CUTS:-3}
	log "failover: two VMs with two NICs, the RoCE link cut $fo_cuts times under a stream"
	if netvm_run "$logs/failover-bench" "$logs/failover_bench.log" -- \
		--n 2 --nics 2 --prenetem --kernel "/boot/vmlinuz-$v" \
		--timeout 900 -- bash scripts/failover-bench-guest.sh "$fo_cuts"; then
		:
	else
		rc=1
		log "the failover benchmark failed (see $logs/failover_bench.log)"
	fi
	awk '/^----- vm1/ { on = 1; next } /^----- / { on = 0 } on' \
		"$logs/failover_bench.log" | sed -n '/^hcomm_net_bench --failover/,$p' \
		> "$logs/failover_bench.txt"
	echo
	echo "=== hcomm_net_bench --failover, two VMs (also in $logs/failover_bench.txt) ==="
	cat "$logs/failover_bench.txt"
fi
if [ -s "$logs/dist.txt" ]; then
	echo
	echo "=== the main workload: pypto_dist across 2 VMs x 2 ranks (also in $logs/dist.txt) ==="
	# without the kernel's console lines and the progress bar's updates
	grep -avE '^\[ *[0-9]+\.[0-9]+\] |block rows summed' "$logs/dist.txt"
	[ -s "$logs/dist_verify.txt" ] && cat "$logs/dist_verify.txt"
	log "timeline of the distributed run: $logs/dist_timeline.html, trace: $logs/dist_trace.json"
fi
log "results: $logs (bench*.txt/json, timeline.html, trace.json, dist*.*, net_bench.txt)"
exit "$rc"
