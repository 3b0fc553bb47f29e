#!/bin/bash
# SPDX-License-Identifier: MIT
# Host tests of hcomm_perf_mon and hcomm_info: no module needed.
#
#   lib/tools/test_tools.sh [BUILD_DIR]      (default: build/lib; run make -C lib)
#
# hcomm_perf_mon runs against fake debugfs files (--stats/--contexts, and
# --replay for exact rates); hcomm_info against a missing device and the
# library's fake device (fake_hcomm.so under LD_PRELOAD, built here when
# missing) with a fake sysfs directory.  Prints TAP; the last line is
# "tools: N passed, N failed"; exit status 1 when a test failed.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
bdir=$(realpath "${1:-$repo/build/lib}")
PM=$bdir/hcomm_perf_mon
INFO=$bdir/hcomm_info
FAKE_SO=$bdir/fake_hcomm.so

TAP_NAME=tools
. "$repo/lib/tests/tap.sh"

for b in "$PM" "$INFO"; do
	if [ ! -x "$b" ]; then
		ok 0 "$(basename "$b") is built" "missing $b: make -C lib"
		finish
	fi
done
have_py=0
command -v python3 >/dev/null && have_py=1

T=$(mktemp -d /tmp/hcomm-tools-test.XXXXXX)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT

# run <cmd...>: sets $rc, $out (stdout), $err (stderr)
run() {
	"$@" >"$T/out" 2>"$T/err"
	rc=$?
	out=$(cat "$T/out")
	err=$(cat "$T/err")
}
has() { case $1 in *"$2"*) return 0 ;; esac; return 1; }
py() { python3 -c "$@" 2>&1; }	# prints nothing on success

# --- fake debugfs files ------------------------------------------------
write_stats() {	# dir bytes inline async chunks hits busy_ns errors db
	mkdir -p "$1"
	cat >"$1/stats" <<EOF
contexts 2
regions 4
host_regions 4
dmabuf_regions 0
pinned_pages 2560
memlock_pages 2560
xfers_active 1
waits_pending 0
umems 4
cache_bytes 0
cmd_get_info 2
cmd_reg_mem 4
cmd_errors $8
uring_cmds 10
ioctls 3
xfer_inline $3
xfer_async $4
xfer_bytes $2
xfer_chunks $5
xfer_cancelled 0
xfer_failed 0
db_signals $9
db_wakeups 5
cache_hits $6
cache_misses 4
cache_evictions 0
cache_invalidations 0
engine_busy_ns $7
EOF
}
HDR="# pid comm regions pinned_bytes cache_bytes xfers_active min_rate max_rate priority share_pct served_bytes"
write_ctx() {	# dir served_a share_a served_b share_b
	cat >"$1/contexts" <<EOF
$HDR
100 benchA 2 5242880 0 1 0 100 0 $3 $2
200 my prog 2 5242880 0 0 20 100 3 $5 $4
EOF
}
write_stats "$T/a" 1000000 100 10 40 3 1000000000 1 5
write_stats "$T/b" 51000000 300 60 240 13 1100000000 3 25
write_ctx "$T/a" 1000 50 2000 50
write_ctx "$T/b" 30001000 60 20002000 40
# Columns reordered, an unknown column added, header comment after it.
mkdir -p "$T/ra" "$T/rb"
cp "$T/a/stats" "$T/ra/stats"
cp "$T/b/stats" "$T/rb/stats"
printf '#served_bytes  share_pct pid  extra comm\n# a comment\n1000 50 100 x benchA\n2000 50 200 y my prog\n' >"$T/ra/contexts"
printf '#served_bytes  share_pct pid  extra comm\n30001000 60 100 x benchA\n20002000 40 200 y my prog\n' >"$T/rb/contexts"
# Without a contexts file (an older module).
mkdir -p "$T/na" "$T/nb"
cp "$T/a/stats" "$T/na/stats"
cp "$T/b/stats" "$T/nb/stats"

echo "# hcomm_perf_mon"

# --- error paths -------------------------------------------------------
if [ -d /sys/module/hcomm ]; then
	skip "perf_mon without the module: exit 1" "hcomm is loaded here"
else
	run "$PM" --count 1
	ok "$([ $rc = 1 ] && has "$err" "module not loaded" &&
	     has "$err" "modprobe hcomm" && echo 1)" \
	   "perf_mon without the module: exit 1 naming modprobe" "rc $rc: $err"
fi
run "$PM" --stats "$T/none" --count 1
ok "$([ $rc = 1 ] && has "$err" "cannot read $T/none" && [ -z "$out" ] &&
     echo 1)" "missing --stats file: exit 1, clear message" "rc $rc: $err"
echo "not statistics" >"$T/garbage"
run "$PM" --stats "$T/garbage" --count 1
ok "$([ $rc = 1 ] && has "$err" "no statistics" && echo 1)" \
   "stats file without statistics: exit 1" "rc $rc: $err"
for d in 100xs 0 -5ms 1.2.3s ms "" 1e3s " 1s" 99999999999999999999s nan; do
	run "$PM" --interval "$d" --stats "$T/a/stats" --count 1
	ok "$([ $rc = 2 ] && has "$err" "invalid --interval '$d'" && echo 1)" \
	   "--interval '$d' rejected with exit 2" "rc $rc: $err"
done
run "$PM" --duration 5parsecs --stats "$T/a/stats"
ok "$([ $rc = 2 ] && has "$err" "invalid --duration" && echo 1)" \
   "--duration garbage rejected with exit 2" "rc $rc: $err"
for c in 0 -1 abc 1x; do
	run "$PM" --count "$c" --stats "$T/a/stats"
	ok "$([ $rc = 2 ] && has "$err" "invalid --count" && echo 1)" \
	   "--count '$c' rejected with exit 2" "rc $rc: $err"
done
run "$PM" --frobnicate
ok "$([ $rc = 2 ] && has "$err" "--help" && echo 1)" \
   "unknown option: exit 2" "rc $rc: $err"
run "$PM" --replay "$T/a"
ok "$([ $rc = 2 ] && echo 1)" "--replay with one sample: exit 2" "rc $rc: $err"
run "$PM" --help
ok "$([ $rc = 0 ] && has "$out" "--interval" && echo 1)" "--help: exit 0"
for d in 250us:250us 100ms:100ms 1s:1s 1.5s:1500ms 2:2s 0.25ms:250us; do
	run "$PM" --replay "$T/a,$T/b" --interval "${d%%:*}" --workers 2
	ok "$([ $rc = 0 ] && has "$out" "every ${d#*:};" && echo 1)" \
	   "--interval ${d%%:*} parsed as ${d#*:}" "rc $rc: $out $err"
done

# --- exact rates from a replay ----------------------------------------
run "$PM" --replay "$T/a,$T/b" --interval 1s --workers 2
line=$(printf '%s\n' "$out" | sed -n 3p)
ok "$([ $rc = 0 ] && [ "$(echo "$line" | awk '{print $2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17}')" = \
     "50.0 250 200 50 200 10 0 0 0 20 2 5.0 2 4 10.0 1" ] && echo 1)" \
   "text: MB/s, xfer/s, inline/async, chunks, cache, db, errors, util, gauges" \
   "rc $rc: $out"
ok "$(has "$out" "ctx 100 benchA" && has "$out" "share  60%      30.0 MB/s" &&
     has "$out" "ctx 200 my prog" && has "$out" "share  40%      20.0 MB/s" &&
     has "$out" "(min 20% max 100% prio 3)" && echo 1)" \
   "text: per-context lines with shares and MB/s (comm with a blank)" "$out"
ok "$([ "$(printf '%s\n' "$out" | head -2 | tail -1 | awk '{print $1, $2}')" = "time MB/s" ] &&
     has "$(printf '%s\n' "$out" | grep '^total: ' | head -1)" \
	 "1.000 s, 1 intervals (replay): 50000000 bytes (50.0 MB/s" &&
     has "$out" "total: ctx 100 benchA served 30000000 bytes (30.0 MB/s)" &&
     echo 1)" "text: header first, summary of totals last" "$out"

if [ $have_py = 1 ]; then
	run "$PM" --replay "$T/a,$T/b" --interval 500ms --workers 2 --json
	ok "$([ $rc = 0 ] && printf '%s\n' "$out" |
	     python3 -m json.tool --json-lines >/dev/null 2>&1 && echo 1)" \
	   "--json: every line parses (python3 -m json.tool --json-lines)"
	r=$(printf '%s\n' "$out" | py '
import json, sys
l = [json.loads(x) for x in sys.stdin]
assert [x["type"] for x in l] == ["start", "interval", "summary"], l
s, i, e = l
assert s["interval_s"] == 0.5 and s["workers"] == 2
assert i["elapsed_s"] == 0.5
r = i["rates"]
assert r["bytes_per_s"] == 100e6 and r["mb_per_s"] == 100, r
assert r["xfers_per_s"] == 500 and r["inline_per_s"] == 400, r
assert r["async_per_s"] == 100 and r["chunks_per_s"] == 400, r
assert r["inline_fraction"] == 0.8 and r["db_signals_per_s"] == 40, r
d = i["deltas"]
assert d["xfer_bytes"] == 50000000 and d["cache_hits"] == 10, d
assert d["cmd_errors"] == 2 and d["cache_misses"] == 0, d
assert "contexts" not in d and "regions" not in d, d
assert i["engine"]["util"] == 0.1 and i["engine"]["busy_ns"] == 1e8
g = i["gauges"]
assert g["contexts"] == 2 and g["pinned_pages"] == 2560, g
assert g["pinned_mib"] == 2560 * __import__("os").sysconf("SC_PAGESIZE") / 2**20
assert i["contexts_available"] is True
c = {x["pid"]: x for x in i["contexts"]}
assert c[100]["comm"] == "benchA" and c[200]["comm"] == "my prog", c
assert c[100]["served_delta"] == 30000000 and c[100]["mb_per_s"] == 60
assert c[200]["mb_per_s"] == 40 and c[200]["share_pct"] == 40, c
assert c[200]["priority"] == 3 and c[100]["active"] is True
assert i["time"].endswith("Z") and "T" in i["time"] and i["mono_s"] == 0.5
t = e["totals"]
assert t["bytes"] == 50000000 and t["xfers"] == 250 and t["async"] == 50, t
assert e["intervals"] == 1 and e["end"] == "replay"
assert e["peak_bytes_per_s"] == 100e6
assert {x["pid"]: x["served_bytes"] for x in e["contexts"]} == \
	{100: 30000000, 200: 20000000}, e["contexts"]
')
	ok "$([ -z "$r" ] && echo 1)" "--json: deltas, rates, util, gauges, contexts, summary exact" "$r"

	run "$PM" --replay "$T/ra,$T/rb" --interval 1s --workers 4 --json
	r=$(printf '%s\n' "$out" | py '
import json, sys
l = [json.loads(x) for x in sys.stdin]
c = {x["pid"]: x for x in l[1]["contexts"]}
assert c[100]["mb_per_s"] == 30 and c[200]["mb_per_s"] == 20, c
assert c[200]["comm"] == "my prog" and c[200]["extra"] == "y", c
assert c[100]["share_pct"] == 60, c
assert l[1]["engine"]["util"] == 0.025, l[1]["engine"]
')
	ok "$([ $rc = 0 ] && [ -z "$r" ] && echo 1)" \
	   "contexts parsed by header names (reordered, extra column, comment)" "$r"

	run "$PM" --replay "$T/na,$T/nb" --workers 2 --json
	r=$(printf '%s\n' "$out" | py '
import json, sys
l = [json.loads(x) for x in sys.stdin]
assert l[1]["contexts_available"] is False and l[1]["contexts"] == []
assert l[1]["rates"]["bytes_per_s"] == 50e6
')
	ok "$([ $rc = 0 ] && [ -z "$r" ] && has "$err" "per-context QoS shares not shown" &&
	     [ "$(printf '%s\n' "$err" | grep -c .)" = 1 ] && echo 1)" \
	   "no contexts file: said once on stderr, carries on" "rc $rc: $r $err"

	run "$PM" --replay "$T/b,$T/a" --workers 2 --json
	r=$(printf '%s\n' "$out" | py '
import json, sys
l = [json.loads(x) for x in sys.stdin]
d = l[1]["deltas"]
assert d["xfer_bytes"] == 1000000 and all(v >= 0 for v in d.values()), d
')
	ok "$([ $rc = 0 ] && [ -z "$r" ] && echo 1)" \
	   "counters that went backwards (module reloaded) count from 0" "$r"

	printf '# pid comm\n' >"$T/emptyctx"
	run "$PM" --replay "$T/a/stats,$T/b/stats,$T/a/stats" --contexts "$T/emptyctx" --workers 1 --json
	r=$(printf '%s\n' "$out" | py '
import json, sys
l = [json.loads(x) for x in sys.stdin]
assert len(l) == 4 and l[3]["intervals"] == 2
assert l[1]["contexts_available"] is True and l[1]["contexts"] == []
assert l[1]["engine"]["util"] == 0.1
')
	ok "$([ $rc = 0 ] && [ -z "$r" ] && echo 1)" \
	   "replay of stats files with --contexts, three samples" "$r"
else
	for i in 1 2 3 4 5 6; do skip "JSON checks" "no python3"; done
fi

# --- live sampling -----------------------------------------------------
mkdir -p "$T/live"
cp "$T/a/stats" "$T/live/stats"
cp "$T/a/contexts" "$T/live/contexts"
t0=$(date +%s%N)
run "$PM" --stats "$T/live/stats" --interval 20ms --count 50 --workers 2 --json
t1=$(date +%s%N)
if [ $have_py = 1 ]; then
	r=$(printf '%s\n' "$out" | py '
import json, sys
l = [json.loads(x) for x in sys.stdin]
iv = [x for x in l if x["type"] == "interval"]
assert len(iv) == 50, len(iv)
e = l[-1]
assert e["type"] == "summary" and e["end"] == "count"
assert 1.0 <= e["elapsed_s"] < 1.3, e["elapsed_s"]
')
else
	r=
fi
ok "$([ $rc = 0 ] && [ -z "$r" ] && [ $(((t1 - t0) / 1000000)) -lt 2500 ] && echo 1)" \
   "--interval 20ms --count 50: 50 intervals on absolute deadlines (~1.0 s)" \
   "rc $rc: $r $((t1 - t0)) ns"

t0=$(date +%s%N)
run "$PM" --stats "$T/live/stats" --interval 200ms --duration 500ms --workers 2
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
ok "$([ $rc = 0 ] && [ "$(printf '%s\n' "$out" | grep -c '^[0-9][0-9]:')" = 3 ] &&
     has "$out" "3 intervals (duration)" && [ $ms -ge 480 ] && [ $ms -lt 1500 ] &&
     echo 1)" "--duration 500ms at 200ms: 3 intervals, ends at 0.5 s" \
   "rc $rc, $ms ms: $out"

# A second program changes the counters while it runs.
cp "$T/a/stats" "$T/live/stats"
"$PM" --stats "$T/live/stats" --interval 1s --count 1 --workers 2 --json \
	>"$T/swap.out" 2>"$T/swap.err" &
p=$!; pids+=($p)
for i in $(seq 100); do [ -s "$T/swap.out" ] && break; sleep 0.02; done
cp "$T/b/stats" "$T/live/stats.new" && mv "$T/live/stats.new" "$T/live/stats"
cp "$T/b/contexts" "$T/live/contexts.new" && mv "$T/live/contexts.new" "$T/live/contexts"
wait $p; rc=$?
if [ $have_py = 1 ]; then
	r=$(py '
import json, sys
l = [json.loads(x) for x in open(sys.argv[1])]
i, e = l[1], l[2]
assert e["totals"]["bytes"] == 50000000 and e["totals"]["xfers"] == 250
assert 0.95 <= i["elapsed_s"] <= 1.6, i["elapsed_s"]
b = i["rates"]["bytes_per_s"]
assert abs(b * i["elapsed_s"] / 50e6 - 1) < 1e-4, b
c = {x["pid"]: x for x in i["contexts"]}
assert c[100]["served_delta"] == 30000000, c
' "$T/swap.out")
else
	r=
fi
ok "$([ $rc = 0 ] && [ -z "$r" ] && echo 1)" \
   "live: counters rewritten between samples give the right deltas and rates" \
   "rc $rc: $r $(cat "$T/swap.err")"

for sig in INT TERM; do
	"$PM" --stats "$T/live/stats" --interval 100ms --workers 2 \
		>"$T/sig.out" 2>"$T/sig.err" &
	p=$!; pids+=($p)
	sleep 0.45
	kill -$sig $p
	wait $p; rc=$?
	out=$(cat "$T/sig.out")
	ok "$([ $rc = 0 ] && has "$out" "intervals (signal)" &&
	     [ "$(printf '%s\n' "$out" | tail -1 | cut -c1-6)" = "total:" ] &&
	     echo 1)" "SIG$sig: exit 0 with the summary line" "rc $rc: $out"
done

echo "stale content that must go" >"$T/o.txt"
"$PM" --stats "$T/live/stats" --interval 100ms --duration 1s --workers 2 \
	--output "$T/o.txt" >"$T/o.stdout" 2>&1 &
p=$!; pids+=($p)
sleep 0.55
mid=$(grep -c '^[0-9][0-9]:' "$T/o.txt")
wait $p; rc=$?
ok "$([ $rc = 0 ] && [ "$mid" -ge 1 ] && ! grep -q stale "$T/o.txt" &&
     [ ! -s "$T/o.stdout" ] && grep -q '^total: ' "$T/o.txt" && echo 1)" \
   "--output: truncated, line-buffered (lines visible while running), nothing on stdout" \
   "rc $rc, $mid lines midway: $(cat "$T/o.txt" "$T/o.stdout")"

run "$PM" --stats "$T/live/stats" --count 1 --output /nonexistent/dir/f
ok "$([ $rc = 1 ] && has "$err" "cannot write /nonexistent/dir/f" && echo 1)" \
   "--output to an unwritable path: exit 1" "rc $rc: $err"

cp "$T/a/stats" "$T/live/vanish"
"$PM" --stats "$T/live/vanish" --interval 100ms --workers 2 \
	>"$T/v.out" 2>"$T/v.err" &
p=$!; pids+=($p)
sleep 0.35
rm -f "$T/live/vanish"
wait $p; rc=$?
ok "$([ $rc = 1 ] && grep -q "module unloaded" "$T/v.err" &&
     grep -q "intervals (error)" "$T/v.out" && echo 1)" \
   "stats file vanishing mid-run: exit 1 after the summary" \
   "rc $rc: $(cat "$T/v.out" "$T/v.err")"

# --- hcomm_info --------------------------------------------------------
echo "# hcomm_info"
run env HCOMM_DEVICE=/nonexistent/hcomm "$INFO"
ok "$([ $rc = 1 ] && has "$err" "modprobe hcomm" &&
     has "$err" "open /nonexistent/hcomm" && [ -z "$out" ] && echo 1)" \
   "missing device: exit 1, library message naming modprobe" "rc $rc: $err"
run env HCOMM_DEVICE=/nonexistent/hcomm "$INFO" --json
ok "$([ $rc = 1 ] && [ -z "$out" ] && echo 1)" "missing device with --json: exit 1, no output"
run "$INFO" --bogus
ok "$([ $rc = 2 ] && echo 1)" "unknown option: exit 2"
run "$INFO" extra
ok "$([ $rc = 2 ] && echo 1)" "stray argument: exit 2"
run "$INFO" --help
ok "$([ $rc = 0 ] && has "$out" "--contexts" && echo 1)" "--help: exit 0"

[ -e "$FAKE_SO" ] || make -s -C "$repo/lib" O="$bdir" "$FAKE_SO" >/dev/null 2>&1
if [ ! -e "$FAKE_SO" ]; then
	for i in 1 2 3 4 5; do skip "hcomm_info on the fake device" "no $FAKE_SO"; done
	finish
fi
S=$T/sys
mkdir -p "$S/parameters"
echo ABCDEF0123456789ABCDEF0 >"$S/srcversion"
echo 0 >"$S/refcnt"
for p in max_inline=4096 chunk_size=262144 workers=2 cache_limit=0 \
	 max_region_size=68719476736 max_regions=65536 doorbells=4096; do
	echo "${p#*=}" >"$S/parameters/${p%%=*}"
done
fake() { env FAKE_HCOMM=1 FAKE_HCOMM_FEATURES=0xbf HCOMM_DEVICE=/dev/null \
	 LD_PRELOAD="$FAKE_SO" "$INFO" --sysfs "$S" "$@"; }

run fake --stats "$T/b/stats" --contexts "$T/b/contexts"
ok "$([ $rc = 0 ] &&
     has "$out" "features:            0xbf URING_CMD DMABUF DMABUF_MOVE_NOTIFY HUGE_EXTENTS XFER REG_CACHE XFER_BATCH" &&
     has "$out" "module version:      srcversion ABCDEF0123456789ABCDEF0 (no version)" &&
     has "$out" "memlock_limit:       unlimited" && has "$out" "RLIMIT_MEMLOCK:      soft" &&
     has "$out" "max_region_size:     1073741824 (1 GiB)" &&
     has "$out" "page_sizes:          4 KiB, 2 MiB" &&
     has "$out" "commands via:" && has "$out" "workers              2" &&
     has "$out" "pinned_pages         2560" &&
     ! has "$out" "xfer_bytes" &&
     printf '%s\n' "$out" | grep -Eq '^	200  my prog +2 +5242880 ' && echo 1)" \
   "text on the fake device: version, features, limits, memlock, parameters, gauges, contexts" \
   "rc $rc: $out $err"
run fake -v --stats "$T/b/stats" --contexts "$T/b/contexts"
ok "$([ $rc = 0 ] && has "$out" "xfer_bytes           51000000" &&
     has "$out" "this context:" && has "$out" "missing features:    (none)" &&
     echo 1)" "-v: counters, this context, missing features" "rc $rc: $out"
echo 1.2.3 >"$S/version"
run fake --stats "$T/na/stats" --contexts "$T/na/contexts"
ok "$([ $rc = 0 ] && has "$out" "module version:      1.2.3, srcversion" &&
     has "$out" "contexts: not provided by this module" && echo 1)" \
   "module version file preferred; contexts file absent said so" "rc $rc: $out"
mv "$S/version" "$S/version.no"; mv "$S/srcversion" "$S/srcversion.no"
run fake --stats "$T/none" --contexts "$T/none2"
ok "$([ $rc = 0 ] && has "$out" "module version:      unknown (neither version nor srcversion" && echo 1)" \
   "module without version and srcversion: said so" "rc $rc: $out"
mv "$S/version.no" "$S/version"; mv "$S/srcversion.no" "$S/srcversion"
run fake --stats "$T/none" --contexts "$T/none2"
ok "$([ $rc = 0 ] && has "$out" "registered: not available ($T/none:" && echo 1)" \
   "statistics unreadable: said so, exit 0" "rc $rc: $out"
if [ $have_py = 1 ]; then
	run fake --json --stats "$T/b/stats" --contexts "$T/b/contexts"
	r=$(printf '%s\n' "$out" | py '
import json, sys
j = json.load(sys.stdin)
assert j["abi_version"] == 1 and j["library"]["abi_version"] == 1
assert j["features"]["mask"] == 0xbf and len(j["features"]["names"]) == 7
assert "DMA_ENGINE" not in j["features"]["names"]
assert j["module"]["srcversion"] == "ABCDEF0123456789ABCDEF0"
assert j["module"]["version"] == "1.2.3"
assert j["module"]["parameters"]["max_region_size"] == 68719476736
assert j["limits"]["max_regions"] == 8 and j["limits"]["page_sizes"] == [4096, 2097152]
assert j["memlock"]["limit"] == "unlimited"
assert j["uring"] in (True, False) and j["commands_via"] in ("io_uring", "ioctl")
assert j["stats"]["available"] and j["stats"]["gauges"]["regions"] == 4
assert j["stats"]["counters"]["xfer_bytes"] == 51000000
assert j["contexts"]["available"] and len(j["contexts"]["rows"]) == 2
assert j["contexts"]["rows"][1]["comm"] == "my prog"
assert j["contexts"]["rows"][1]["served_bytes"] == 20002000
')
	ok "$([ $rc = 0 ] && printf '%s\n' "$out" | python3 -m json.tool >/dev/null 2>&1 &&
	     [ -z "$r" ] && echo 1)" "--json: one object, parses, fields right" "rc $rc: $r"
else
	skip "hcomm_info --json" "no python3"
fi
# --- the communicators' published statistics (HCOMM_STATS_DIR) ---------
echo "# libhcomm statistics files"
le32() { printf "\\x$(printf %02x $(($1 & 255)))\\x$(printf %02x $((($1 >> 8) & 255)))\\x$(printf %02x $((($1 >> 16) & 255)))\\x$(printf %02x $((($1 >> 24) & 255)))"; }
le64() { le32 "$1"; le32 0; }
# stats_file path pid rank size hits misses stale evictions entries bytes dead
stats_file() {
	{ printf 'HCSTATS1'; le32 1; le32 160; le32 "$2"; le32 "$3"; le32 "$4"
	  le32 0; le64 "$5"; le64 "$6"; le64 "$7"; le64 "$8"; le64 "$9"
	  le64 "${10}"; le64 "${11}"; for i in 1 2 3 4 5 6 7 8 9; do le64 0; done
	} >"$1"
}
L=$T/libstats
mkdir -p "$L"
gone=$(sh -c 'echo $$')
stats_file "$L/hcomm-$$-1-0.stats" $$ 1 4 11 3 2 1 2 1048576 0
stats_file "$L/hcomm-$gone-0-0.stats" "$gone" 0 4 5 5 0 0 1 4096 1
printf 'not a stats file' >"$L/hcomm-1-0-0.stats"
ok "$([ "$(stat -c %s "$L/hcomm-$$-1-0.stats")" = 160 ] && echo 1)" \
   "the test's statistics file has the size of struct hcomm_stats_file"
if [ -e "$FAKE_SO" ]; then
	run fake --lib-stats "$L" --stats "$T/b/stats" --contexts "$T/b/contexts"
	ok "$([ $rc = 0 ] && has "$out" "libhcomm communicators ($L): 2" &&
	     has "$out" "pid $$ rank 1/4: registration cache 11 hits 3 misses 2 stale 1 evictions, 2 entries (1 MiB), 0 dead" &&
	     has "$out" "pid $gone rank 0/4 (exited: stale file)" && echo 1)" \
	   "hcomm_info --lib-stats: each communicator's cache counters, stale files marked, others ignored" \
	   "rc $rc: $out"
	HCOMM_STATS_DIR=$L run fake --stats "$T/b/stats" --contexts "$T/b/contexts"
	ok "$([ $rc = 0 ] && has "$out" "libhcomm communicators ($L): 2" && echo 1)" \
	   "hcomm_info reads HCOMM_STATS_DIR" "rc $rc: $out"
	if [ $have_py = 1 ]; then
		run fake --json --lib-stats "$L" --stats "$T/b/stats" --contexts "$T/b/contexts"
		r=$(printf '%s\n' "$out" | py '
import json, sys
j = json.load(sys.stdin)["libhcomm"]
assert j["error"] is None and len(j["communicators"]) == 2
c = [x for x in j["communicators"] if x["alive"]]
assert len(c) == 1 and c[0]["rank"] == 1 and c[0]["world_size"] == 4
assert (c[0]["rcache_hits"], c[0]["rcache_misses"], c[0]["rcache_stale"],
        c[0]["rcache_evictions"], c[0]["rcache_entries"],
        c[0]["rcache_bytes"], c[0]["rcache_dead"]) == (11, 3, 2, 1, 2, 1048576, 0)
')
		ok "$([ $rc = 0 ] && [ -z "$r" ] && echo 1)" \
		   "hcomm_info --json: libhcomm.communicators" "rc $rc: $r"
	else
		skip "hcomm_info --json libhcomm" "no python3"
	fi
else
	for i in 1 2 3; do skip "hcomm_info --lib-stats" "no $FAKE_SO"; done
fi
run "$PM" --replay "$T/a,$T/b" --lib-stats "$L"
ok "$([ $rc = 0 ] && has "$out" "lib pid $$ rank 1/4: c.hit 0 c.miss 0 c.stale 0 c.evct 0  entries 2 (1.0 MiB) dead 0" &&
     ! has "$out" "lib pid $gone " && echo 1)" \
   "hcomm_perf_mon --lib-stats: a line per live communicator" "rc $rc: $out"
if [ $have_py = 1 ]; then
	run "$PM" --json --replay "$T/a,$T/b" --lib-stats "$L"
	r=$(printf '%s\n' "$out" | py '
import json, sys
iv = [json.loads(l) for l in sys.stdin if "\"interval\"" in l]
assert len(iv) == 1
l = iv[0]["libhcomm"]
assert len(l) == 1 and l[0]["rank"] == 1 and l[0]["rcache_entries"] == 2
assert l[0]["rcache_hits_delta"] == 0 and l[0]["rcache_bytes"] == 1048576
')
	ok "$([ $rc = 0 ] && [ -z "$r" ] && echo 1)" \
	   "hcomm_perf_mon --json --lib-stats: libhcomm per interval" "rc $rc: $r"
else
	skip "hcomm_perf_mon --json --lib-stats" "no python3"
fi
# --- the communicators' peers files (HCOMM_STATS_DIR) -------------------
echo "# libhcomm peers files"
# peers_file path pid rank version: rank of 3 with rdma+tcp (as libhcomm
# writes it: hcomm.h, HCOMM_PEERS_JSON_VERSION)
peers_file() {
	cat >"$1" <<EOF
{"version": $4, "pid": $2, "rank": $3, "size": 3, "table": {"rank": $3, "size": 3, "transports": "rdma+tcp", "peers": [{"peer": 1, "links": {"kernel": {"usable": false, "probed": false}, "rdma": {"usable": true, "probed": true, "lat_us": 4.250, "bw_mbps": 2900.500, "errors": 0}, "tcp": {"usable": true, "probed": true, "lat_us": 31.000, "bw_mbps": 1100.000, "errors": 0}}, "route": [{"below": 4096, "transport": "tcp"}, {"below": null, "transport": "rdma"}], "why": "measured"}, {"peer": 2, "links": {"kernel": {"usable": false, "probed": false}, "rdma": {"usable": true, "probed": false}, "tcp": {"usable": true, "probed": false}}, "route": [{"below": null, "transport": "rdma"}], "why": "not probed: preference order"}]}, "counters": [{"peer": 1, "rdma": {"bytes_sent": 1048576, "bytes_recv": 0, "ops_sent": 16, "ops_recv": 0, "crc_errors": 0, "refused": 0, "conn_lost": 1, "retransmits": 0, "wc_errors": 3, "wc_status": {"WR_FLUSH_ERR": 2, "RETRY_EXC_ERR": 1}}, "tcp": {"bytes_sent": 3000, "bytes_recv": 512, "ops_sent": 3, "ops_recv": 1, "crc_errors": 1, "refused": 0, "conn_lost": 0, "retransmits": 7, "wc_errors": 0, "wc_status": {}}}, {"peer": 2, "rdma": {"bytes_sent": 0, "bytes_recv": 0, "ops_sent": 0, "ops_recv": 0, "crc_errors": 0, "refused": 0, "conn_lost": 0, "retransmits": 0, "wc_errors": 0, "wc_status": {}}, "tcp": {"bytes_sent": 0, "bytes_recv": 0, "ops_sent": 0, "ops_recv": 0, "crc_errors": 0, "refused": 0, "conn_lost": 0, "retransmits": 0, "wc_errors": 0, "wc_status": {}}}]}
EOF
}
peers_file "$L/hcomm-$$-1-0.peers.json" $$ 1 1
peers_file "$L/hcomm-$gone-0-0.peers.json" "$gone" 0 1
printf 'x' >"$L/hcomm-$$-1-0.peers.json.tmp"	# a write in progress
run "$INFO" --peers "$L"
ok "$([ $rc = 0 ] && has "$out" "hcomm-$$-1-0.peers.json: pid $$, rank 1 of 3, transports rdma+tcp
  peer 1
    links:  kernel -, rdma 4.2 us 2900.5 MB/s 0 err, tcp 31.0 us 1100.0 MB/s 0 err
    route:  [0, 4K) tcp [4K, inf) rdma (measured)
    rdma    sent 1048576 B in 16 ops, received 0 B in 0 ops; 0 CRC errors, 0 refused, 1 connections lost, 0 retransmits, 3 WC errors (WR_FLUSH_ERR 2, RETRY_EXC_ERR 1)
    tcp     sent 3000 B in 3 ops, received 512 B in 1 ops; 1 CRC errors, 0 refused, 0 connections lost, 7 retransmits, 0 WC errors
  peer 2
    links:  kernel -, rdma not probed, tcp not probed
    route:  [0, inf) rdma (not probed: preference order)" &&
     ! has "$out" "pid $gone" && [ -z "$err" ] && echo 1)" \
   "hcomm_info --peers DIR: the live communicator's table and counters, the exited one's file skipped" \
   "rc $rc: $out $err"
HCOMM_STATS_DIR=$L run "$INFO" --peers
ok "$([ $rc = 0 ] && has "$out" "hcomm-$$-1-0.peers.json: pid $$" && echo 1)" \
   "hcomm_info --peers reads HCOMM_STATS_DIR without the device" "rc $rc: $out $err"
run "$INFO" --peers "$L/hcomm-$gone-0-0.peers.json"
ok "$([ $rc = 0 ] && has "$out" "pid $gone, rank 0 of 3" && echo 1)" \
   "hcomm_info --peers FILE: that file, live or not" "rc $rc: $out $err"
if [ $have_py = 1 ]; then
	run "$INFO" --peers --json "$L"
	r=$(printf '%s\n' "$out" | L="$L" pid=$$ py '
import json, os, sys
j = json.load(sys.stdin)
f = json.load(open(os.environ["L"] + "/hcomm-%s-1-0.peers.json" % os.environ["pid"]))
assert j["dir"] == os.environ["L"] and j["communicators"] == [f]
c = j["communicators"][0]["counters"][0]
assert c["rdma"]["wc_status"] == {"WR_FLUSH_ERR": 2, "RETRY_EXC_ERR": 1}
assert c["tcp"]["retransmits"] == 7
')
	ok "$([ $rc = 0 ] && [ -z "$r" ] && echo 1)" \
	   "hcomm_info --peers --json DIR: the live files' objects, unchanged" "rc $rc: $r"
	run "$INFO" --peers --json "$L/hcomm-$$-1-0.peers.json"
	r=$(printf '%s\n' "$out" | L="$L" pid=$$ py '
import json, os, sys
j = json.load(sys.stdin)
assert j == json.load(open(os.environ["L"] + "/hcomm-%s-1-0.peers.json" % os.environ["pid"]))
')
	ok "$([ $rc = 0 ] && [ -z "$r" ] && echo 1)" \
	   "hcomm_info --peers --json FILE: the object" "rc $rc: $r"
else
	skip "hcomm_info --peers --json DIR" "no python3"
	skip "hcomm_info --peers --json FILE" "no python3"
fi
run "$INFO" --peers "$T/nowhere"
ok "$([ $rc = 1 ] && has "$err" "$T/nowhere: No such file or directory" && echo 1)" \
   "hcomm_info --peers: a missing directory is an error" "rc $rc: $err"
B=$T/badpeers
mkdir -p "$B"
printf '{"version": 1, "pid": ' >"$B/hcomm-$$-0-0.peers.json"
run "$INFO" --peers "$B/hcomm-$$-0-0.peers.json"
ok "$([ $rc = 1 ] && has "$err" "hcomm-$$-0-0.peers.json: not JSON: " && echo 1)" \
   "hcomm_info --peers: malformed JSON is an error" "rc $rc: $err"
run "$INFO" --peers "$B"
ok "$([ $rc = 1 ] && has "$err" "not JSON" && echo 1)" \
   "hcomm_info --peers DIR: a malformed file in it fails the run" "rc $rc: $err"
peers_file "$B/hcomm-$$-0-0.peers.json" $$ 0 2
run "$INFO" --peers "$B/hcomm-$$-0-0.peers.json"
ok "$([ $rc = 1 ] && has "$err" "version 2, this hcomm_info reads version 1" && echo 1)" \
   "hcomm_info --peers: another version is an error" "rc $rc: $err"
printf '{"version": 1, "pid": 1}' >"$B/hcomm-$$-0-0.peers.json"
run "$INFO" --peers "$B/hcomm-$$-0-0.peers.json"
ok "$([ $rc = 1 ] && has "$err" "malformed" && echo 1)" \
   "hcomm_info --peers: a file without table or counters is an error" "rc $rc: $err"
HCOMM_STATS_DIR= run "$INFO" --peers
ok "$([ $rc = 2 ] && has "$err" "--peers: name a directory or file" && echo 1)" \
   "hcomm_info --peers without a path or HCOMM_STATS_DIR: usage error" "rc $rc: $err"
run "$INFO" --peers "$L" extra
ok "$([ $rc = 2 ] && has "$err" "unexpected argument 'extra'" && echo 1)" \
   "hcomm_info --peers with two paths: usage error" "rc $rc: $err"
run "$PM" --replay "$T/a,$T/b" --lib-stats "$L"
ok "$([ $rc = 0 ] && has "$out" "lib pid $$ rank 1/4: c.hit 0" &&
     has "$out" "    peer 1 rdma   sent       0.0 MB/s recv       0.0 MB/s  total 1048576 / 0 B" &&
     has "$out" "    peer 1 tcp    sent       0.0 MB/s recv       0.0 MB/s  total 3000 / 512 B" &&
     has "$out" "    peer 2 tcp    sent" && echo 1)" \
   "hcomm_perf_mon --lib-stats: per-peer lines from the peers file" "rc $rc: $out"
if [ $have_py = 1 ]; then
	run "$PM" --json --replay "$T/a,$T/b,$T/b" --lib-stats "$L"
	r=$(printf '%s\n' "$out" | py '
import json, sys
iv = [json.loads(l) for l in sys.stdin if "\"interval\"" in l]
assert len(iv) == 2
p = iv[1]["libhcomm"][0]["peers"]
assert [(x["peer"], x["transport"], x["bytes_sent"], x["bytes_recv"]) for x in p] == [
    (1, "rdma", 1048576, 0), (1, "tcp", 3000, 512), (2, "rdma", 0, 0), (2, "tcp", 0, 0)]
assert all(x["sent_mb_per_s"] == 0 and x["recv_mb_per_s"] == 0 for x in p)
')
	ok "$([ $rc = 0 ] && [ -z "$r" ] && echo 1)" \
	   "hcomm_perf_mon --json --lib-stats: per-peer bytes and rates" "rc $rc: $r"
else
	skip "hcomm_perf_mon --json per-peer" "no python3"
fi
finish
