#!/bin/bash
# `make demo`: dependencies, builds (lib, bench and the module for stock
# 6.12), then a stock 6.12 VM that loads hcomm.ko, runs build/lib/hcomm_demo,
# build/bench/hcomm_xfer_bench and build/bench/hcomm_lib_bench, and unloads it.
# The guest's output is shown live; the console is kept in build/logs/demo.log.
# The benchmark's table and JSON come back over the clean serial channel
# (build/logs/demo.log.out): they are saved as build/logs/bench.txt and
# build/logs/bench.json (hcomm_lib_bench's as build/logs/lib_bench.txt and
# build/logs/lib_bench.json), and the tables are printed again at the end.
# Extra arguments go to hcomm_demo; HCOMM_BENCH_ARGS to hcomm_xfer_bench
# (e.g. HCOMM_BENCH_ARGS="--max-size 16M"), HCOMM_LIB_BENCH_ARGS to
# hcomm_lib_bench; HCOMM_BENCH=0 skips both benchmarks.
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
make -s -C bench
make -s -C kernel KDIR="/lib/modules/$v/build" O="$repo/build/kmod/$v"
[ -x build/lib/hcomm_demo ] || die "build/lib/hcomm_demo was not built"
[ -x build/bench/hcomm_xfer_bench ] || die "build/bench/hcomm_xfer_bench was not built"
[ -x build/bench/hcomm_lib_bench ] || die "build/bench/hcomm_lib_bench was not built"

logs=$repo/build/logs
console=$logs/demo.log
mkdir -p "$logs"
rm -f "$logs/bench.json" "$logs/bench.txt" "$logs/lib_bench.json" \
	"$logs/lib_bench.txt"

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
exit "$rc"
