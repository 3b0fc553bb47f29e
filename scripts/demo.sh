#!/bin/bash
# `make demo`: dependencies, builds (lib, pypto, bench and the module for
# stock 6.12), then a stock 6.12 VM that loads hcomm.ko, runs build/lib/hcomm_demo,
# build/bench/hcomm_xfer_bench and build/bench/hcomm_lib_bench, and unloads it.
# The guest's output is shown live; the console is kept in build/logs/demo.log.
# The benchmark's table and JSON come back over the clean serial channel
# (build/logs/demo.log.out): they are saved as build/logs/bench.txt and
# build/logs/bench.json (hcomm_lib_bench's as build/logs/lib_bench.txt and
# build/logs/lib_bench.json), and the tables are printed again at the end.
# Extra arguments go to hcomm_demo; HCOMM_BENCH_ARGS to hcomm_xfer_bench
# (e.g. HCOMM_BENCH_ARGS="--max-size 16M"), HCOMM_LIB_BENCH_ARGS to
# hcomm_lib_bench; HCOMM_BENCH=0 skips both benchmarks.
# Then libpypto: build/bench/pypto_sched_bench runs first on this machine
# (scheduler overhead against OpenMP, oneTBB and StarPU; no module needed),
# and in the VM build/pypto/pypto_profile runs a tiled SGEMM through
# /dev/hcomm (checked against cblas_sgemm) and brings back its diagnosis,
# build/logs/timeline.html and build/logs/trace.json, followed by
# build/bench/pypto_gemm_bench (build/logs/pypto_bench.{txt,json}).
# HCOMM_SCHED_BENCH_ARGS, HCOMM_PYPTO_PROFILE_ARGS and HCOMM_PYPTO_BENCH_ARGS
# replace their defaults (--quick; the 1024^3 tile 128 2-device profile;
# --quick); HCOMM_PYPTO=0 skips libpypto.
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
make -s -C kernel KDIR="/lib/modules/$v/build" O="$repo/build/kmod/$v"
[ -x build/lib/hcomm_demo ] || die "build/lib/hcomm_demo was not built"
[ -x build/bench/hcomm_xfer_bench ] || die "build/bench/hcomm_xfer_bench was not built"
[ -x build/bench/hcomm_lib_bench ] || die "build/bench/hcomm_lib_bench was not built"
for p in build/pypto/pypto_profile build/bench/pypto_gemm_bench \
	build/bench/pypto_sched_bench; do
	[ -x "$p" ] || die "$p was not built"
done

logs=$repo/build/logs
console=$logs/demo.log
mkdir -p "$logs"
rm -f "$logs/bench.json" "$logs/bench.txt" "$logs/lib_bench.json" \
	"$logs/lib_bench.txt" "$logs/pypto_profile.txt" "$logs/timeline.html" \
	"$logs/trace.json" "$logs/pypto_bench.txt" "$logs/pypto_bench.json" \
	"$logs/sched_bench.txt" "$logs/sched_bench.json"

# The scheduler benchmark needs no module: it runs here, on the real CPUs.
if [ "${HCOMM_PYPTO:-1}" != 0 ]; then
	log "pypto_sched_bench ${HCOMM_SCHED_BENCH_ARGS:---quick} (on this machine)"
	# shellcheck disable=SC2086
	build/bench/pypto_sched_bench ${HCOMM_SCHED_BENCH_ARGS:---quick} \
		--json "$logs/sched_bench.json" | tee "$logs/sched_bench.txt" ||
		die "pypto_sched_bench failed"
fi

quoted=
for a in "$@"; do quoted="$quoted '${a//\'/\'\\\'\'}'"; done
# The guest sees the host root read-only: the benchmark writes into its
# own /tmp and the results travel back over $HCOMM_OUT_TTY between markers.
guest="insmod \"\$HCOMM_KO\" || exit 1
echo '--- hcomm_demo ---'
build/lib/hcomm_demo$quoted
rc=\$?
echo \"--- hcomm_demo exited \$rc ---\"
if [ \"\${HCOMM_BENCH:-1}\" != 0 ]; then
	echo '--- hcomm_xfer_bench ---'
	{ build/bench/hcomm_xfer_bench \${HCOMM_BENCH_ARGS:-} \\
		--json /tmp/bench.json 2>&1; echo \$? > /tmp/bench.rc; } |
		tee /tmp/bench.txt
	brc=\$(cat /tmp/bench.rc)
	echo \"--- hcomm_xfer_bench exited \$brc ---\"
	if [ -n \"\${HCOMM_OUT_TTY:-}\" ] && [ -w \"\$HCOMM_OUT_TTY\" ]; then
		{ echo HCOMM-BENCH-TXT-BEGIN; cat /tmp/bench.txt
		  echo HCOMM-BENCH-TXT-END
		  if [ -s /tmp/bench.json ]; then
			echo HCOMM-BENCH-JSON-BEGIN; cat /tmp/bench.json
			echo HCOMM-BENCH-JSON-END
		  fi; } > \"\$HCOMM_OUT_TTY\"
	fi
	[ \"\$rc\" = 0 ] && rc=\$brc
	echo '--- hcomm_lib_bench ---'
	{ build/bench/hcomm_lib_bench \${HCOMM_LIB_BENCH_ARGS:-} \\
		--json /tmp/lib_bench.json 2>&1; echo \$? > /tmp/lib_bench.rc; } |
		tee /tmp/lib_bench.txt
	brc=\$(cat /tmp/lib_bench.rc)
	echo \"--- hcomm_lib_bench exited \$brc ---\"
	if [ -n \"\${HCOMM_OUT_TTY:-}\" ] && [ -w \"\$HCOMM_OUT_TTY\" ]; then
		{ echo HCOMM-LIBBENCH-TXT-BEGIN; cat /tmp/lib_bench.txt
		  echo HCOMM-LIBBENCH-TXT-END
		  if [ -s /tmp/lib_bench.json ]; then
			echo HCOMM-LIBBENCH-JSON-BEGIN; cat /tmp/lib_bench.json
			echo HCOMM-LIBBENCH-JSON-END
		  fi; } > \"\$HCOMM_OUT_TTY\"
	fi
	[ \"\$rc\" = 0 ] && rc=\$brc
fi
if [ \"\${HCOMM_PYPTO:-1}\" != 0 ]; then
	# One file between HCOMM-<name>-BEGIN/-END lines on the clean channel.
	send() {
		[ -s \"\$2\" ] && [ -n \"\${HCOMM_OUT_TTY:-}\" ] &&
			[ -w \"\$HCOMM_OUT_TTY\" ] || return 0
		{ echo \"HCOMM-\$1-BEGIN\"; cat \"\$2\"
		  [ -n \"\$(tail -c1 \"\$2\")\" ] && echo
		  echo \"HCOMM-\$1-END\"; } > \"\$HCOMM_OUT_TTY\"
	}
	echo '--- pypto_profile ---'
	{ build/pypto/pypto_profile \${HCOMM_PYPTO_PROFILE_ARGS:---m 1024 --n 1024 --k 1024 --tile 128 --devices 2 --prefetch-depth 4} \\
		--check --visualize --output /tmp/timeline.html \\
		--output /tmp/trace.json 2>&1; echo \$? > /tmp/prof.rc; } |
		tee /tmp/prof.txt
	brc=\$(cat /tmp/prof.rc)
	echo \"--- pypto_profile exited \$brc ---\"
	send PYPTO-PROFILE /tmp/prof.txt
	send PYPTO-HTML /tmp/timeline.html
	send PYPTO-TRACE /tmp/trace.json
	[ \"\$rc\" = 0 ] && rc=\$brc
	echo '--- pypto_gemm_bench ---'
	{ build/bench/pypto_gemm_bench \${HCOMM_PYPTO_BENCH_ARGS:---quick} \\
		--json /tmp/pypto_bench.json 2>&1; echo \$? > /tmp/pb.rc; } |
		tee /tmp/pypto_bench.txt
	brc=\$(cat /tmp/pb.rc)
	echo \"--- pypto_gemm_bench exited \$brc ---\"
	send PYPTO-BENCH /tmp/pypto_bench.txt
	send PYPTO-BENCH-JSON /tmp/pypto_bench.json
	[ \"\$rc\" = 0 ] && rc=\$brc
fi
rmmod hcomm || { echo 'rmmod hcomm failed'; rc=1; }
exit \$rc"
# The guest script lives in the build tree (visible in the guest).
script=$(mktemp "$repo/build/bench/demo-guest.XXXXXX")
trap 'rm -f "$script"' EXIT
printf '%s\n' "$guest" > "$script"
rc=0
HCOMM_KO=$repo/build/kmod/$v/hcomm.ko scripts/vm-run.sh \
	--kernel "/boot/vmlinuz-$v" --log "$console" --timeout 600 \
	--live -- /bin/sh "${script#"$repo"/}" || rc=$?

# Lines between the markers "HCOMM-<bench>-<what>-BEGIN" and "-END"
# (<bench>: BENCH or LIBBENCH, default BENCH).
between() {
	awk -v b="HCOMM-${2:-BENCH}-$1-BEGIN" -v e="HCOMM-${2:-BENCH}-$1-END" \
		'$0 == e { on = 0 } on { print } $0 == b { on = 1 }' \
		"$console.out" 2>/dev/null
}
if [ "${HCOMM_BENCH:-1}" != 0 ]; then
	between TXT > "$logs/bench.txt"
	between JSON > "$logs/bench.json"
	if [ -s "$logs/bench.txt" ]; then
		echo
		echo "=== hcomm_xfer_bench (also in $logs/bench.txt) ==="
		cat "$logs/bench.txt"
	fi
	if [ -s "$logs/bench.json" ]; then
		log "benchmark JSON: $logs/bench.json"
	else
		rm -f "$logs/bench.json"
		log "no benchmark JSON came back (see $console)"
	fi
	[ -s "$logs/bench.txt" ] || rm -f "$logs/bench.txt"
	between TXT LIBBENCH > "$logs/lib_bench.txt"
	between JSON LIBBENCH > "$logs/lib_bench.json"
	if [ -s "$logs/lib_bench.txt" ]; then
		echo
		echo "=== hcomm_lib_bench (also in $logs/lib_bench.txt) ==="
		cat "$logs/lib_bench.txt"
	fi
	if [ -s "$logs/lib_bench.json" ]; then
		log "library benchmark JSON: $logs/lib_bench.json"
	else
		rm -f "$logs/lib_bench.json"
		log "no library benchmark JSON came back (see $console)"
	fi
	[ -s "$logs/lib_bench.txt" ] || rm -f "$logs/lib_bench.txt"
fi
# Lines between "HCOMM-<name>-BEGIN" and "HCOMM-<name>-END" into a file,
# which is removed when nothing came back.
section() {
	awk -v b="HCOMM-$1-BEGIN" -v e="HCOMM-$1-END" \
		'$0 == e { on = 0 } on { print } $0 == b { on = 1 }' \
		"$console.out" > "$2" 2>/dev/null || true
	[ -s "$2" ] || rm -f "$2"
	[ -s "$2" ]
}
if [ "${HCOMM_PYPTO:-1}" != 0 ]; then
	if section PYPTO-PROFILE "$logs/pypto_profile.txt"; then
		echo
		echo "=== pypto_profile: tiled SGEMM through /dev/hcomm (also in $logs/pypto_profile.txt) ==="
		cat "$logs/pypto_profile.txt"
	fi
	section PYPTO-HTML "$logs/timeline.html" &&
		log "timeline (open in a browser): $logs/timeline.html"
	section PYPTO-TRACE "$logs/trace.json" &&
		log "Chrome trace (Perfetto, chrome://tracing): $logs/trace.json"
	if section PYPTO-BENCH "$logs/pypto_bench.txt"; then
		echo
		echo "=== pypto_gemm_bench (also in $logs/pypto_bench.txt) ==="
		cat "$logs/pypto_bench.txt"
	fi
	section PYPTO-BENCH-JSON "$logs/pypto_bench.json" || true
	if [ -s "$logs/sched_bench.txt" ]; then
		echo
		echo "=== pypto_sched_bench, run on this machine (also in $logs/sched_bench.txt) ==="
		cat "$logs/sched_bench.txt"
	fi
fi
exit "$rc"
