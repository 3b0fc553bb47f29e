#!/bin/bash
# SPDX-License-Identifier: MIT
# Renders the HTML timeline in headless Chromium: no module needed.
#
#   pypto/tests/test_html.sh [BUILD_DIR]    (default: build/pypto)
#
# The timeline comes from
#   pypto_profile --transport memcpy --m 256 --n 256 --k 256 --tile 64 \
#                 --visualize --output timeline.html --output trace.json
# (or, when pypto_profile is not built, from test_trace --html-out, a
# synthetic run).  Checks: the page renders one rect per event (its title
# "pypto timeline: N tiles" and data-tiles, N = the X events of the
# Chrome trace), no script error (no "error" title, no console message),
# hovering a tile draws its dependency arrows, and a screenshot, kept as
# BUILD_DIR/timeline.png.  Prints TAP; the last line is
# "pypto-html: N passed, N failed"; exit status 1 when a test failed.
# Without Chromium every check is skipped (and passes).  CHROMIUM=path
# picks the browser.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
bdir=$(realpath "${1:-$repo/build/pypto}")
PROFILE=$bdir/pypto_profile
TT=$bdir/test_trace

TAP_NAME=pypto-html
. "$repo/lib/tests/tap.sh"

browser=${CHROMIUM:-}
if [ -z "$browser" ]; then
	for b in chromium chromium-browser google-chrome; do
		browser=$(command -v "$b" 2>/dev/null) && break
	done
fi
if [ -z "$browser" ] || [ ! -x "$browser" ]; then
	for t in "timeline renders" "no script errors" "hover arrows" \
		 "screenshot"; do
		skip "$t" "chromium is not installed"
	done
	finish
fi
have_py=0
command -v python3 >/dev/null && have_py=1

T=$(mktemp -d /tmp/pypto-html-test.XXXXXX)
trap 'rm -rf "$T"' EXIT

# --- the timeline --------------------------------------------------------
src=
if [ -x "$PROFILE" ]; then
	timeout -k 10 120 "$PROFILE" --transport memcpy --m 256 --n 256 \
		--k 256 --tile 64 --visualize --output "$T/timeline.html" \
		--output "$T/trace.json" >"$T/profile.out" 2>&1
	rc=$?
	ok $([ $rc = 0 ] && [ -s "$T/timeline.html" ] && [ -s "$T/trace.json" ] \
	     && echo 1 || echo 0) \
	   "pypto_profile --transport memcpy wrote timeline.html and trace.json" \
	   "exit $rc: $(tail -5 "$T/profile.out")"
	[ $rc = 0 ] && src="pypto_profile"
	if [ $rc = 0 ]; then
		ok $(grep -q '^pypto diagnosis:' "$T/profile.out" && echo 1 ||
		     echo 0) "pypto_profile printed the diagnosis" \
		   "$(head -5 "$T/profile.out")"
	fi
	# The seed's spelling without --visualize is refused (usage error).
	timeout -k 10 60 "$PROFILE" --transport memcpy --output "$T/x.html" \
		>"$T/novis.out" 2>&1
	rc2=$?
	ok $([ $rc2 = 2 ] && grep -q -- '--visualize' "$T/novis.out" && \
	     [ ! -e "$T/x.html" ] && echo 1 || echo 0) \
	   "an .html output without --visualize is a usage error naming it" \
	   "exit $rc2: $(cat "$T/novis.out")"
fi
if [ -z "$src" ]; then
	if [ -x "$TT" ] && "$TT" --html-out "$T/timeline.html" \
			--trace-out "$T/trace.json" >"$T/tt.out" 2>&1; then
		src="test_trace (synthetic run)"
		echo "# pypto_profile not usable: rendering test_trace's" \
		     "synthetic timeline"
	else
		ok 0 "a timeline to render" \
		   "neither $PROFILE nor $TT produced one (make -C pypto)"
		finish
	fi
fi

# Events in the Chrome trace: one "X" slice per event.
if [ $have_py = 1 ]; then
	# What Perfetto needs besides valid JSON: finite numbers, slices
	# of one thread that do not overlap (they would have to nest), and
	# flow ends that lie inside a slice of their thread.
	read -r nev over unbound < <(python3 -c 'import json, sys
def bad(x):
    raise ValueError("non-finite number " + x)
d = json.load(open(sys.argv[1]), parse_constant=bad)
lanes = {}
for e in d["traceEvents"]:
    if e["ph"] == "X":
        lanes.setdefault((e["pid"], e["tid"]), []).append(e)
over = 0
for l in lanes.values():
    l.sort(key=lambda e: e["ts"])
    ns = lambda v: round(v * 1000)	# exact: 3 decimals of us
    over += sum(1 for a, b in zip(l, l[1:])
                if ns(b["ts"]) < ns(a["ts"]) + ns(a["dur"]))
unbound = 0
for e in d["traceEvents"]:
    if e["ph"] in "sf":
        if not any(x["ts"] <= e["ts"] <= x["ts"] + x["dur"]
                   for x in lanes.get((e["pid"], e["tid"]), [])):
            unbound += 1
print(sum(len(l) for l in lanes.values()), over, unbound)' "$T/trace.json" \
		2>"$T/py.err")
	ok $([ -n "$nev" ] && echo 1 || echo 0) \
	   "trace.json parses ($nev X events)" "$(cat "$T/py.err")"
	ok $([ "${over:-1}" = 0 ] && [ "${unbound:-1}" = 0 ] && echo 1 ||
	     echo 0) \
	   "trace.json: lanes without overlaps, flows inside slices ($over overlaps, $unbound unbound)"
else
	nev=$(grep -o '"ph":"X"' "$T/trace.json" | wc -l)
fi
ok $([ "${nev:-0}" -gt 0 ] && echo 1 || echo 0) "the run has events ($nev)"

net=$(grep -c -E 'https?://' "$T/timeline.html")
ok $([ "$net" = 0 ] && echo 1 || echo 0) \
   "timeline.html is self-contained (no http(s) references)" \
   "$(grep -o -E '.{20}https?://.{20}' "$T/timeline.html" | head -3)"

# An event whose tile has inputs or consumers drawn, and how many arrows
# hovering it must draw.
hover= want_deps=
if [ $have_py = 1 ]; then
	read -r hover want_deps < <(python3 -c 'import json, re, sys
h = open(sys.argv[1], encoding="utf-8").read()
m = re.search("<script type=\"application/json\" id=\"pypto-data\">(.*?)</script>", h, re.S)
d = json.loads(m.group(1))
ins, outs = {}, {}
for a, b in d["edges"]:
    ins.setdefault(b, []).append(a)
    outs.setdefault(a, []).append(b)
best = None
for i, e in enumerate(d["events"]):
    k = len(ins.get(e[2], [])) + len(outs.get(e[2], []))
    if k and (best is None or (ins.get(e[2]) and outs.get(e[2]))):
        best = (i, k)
        if ins.get(e[2]) and outs.get(e[2]):
            break
print("%d %d" % best if best else "")' "$T/timeline.html" 2>"$T/py.err")
fi
url="file://$T/timeline.html"
[ -n "$hover" ] && url="$url#hover=$hover"

# --- render ---------------------------------------------------------------
chrome() {	# chrome <profile-name> <args...>
	local p=$1
	shift
	timeout -k 10 120 "$browser" --headless --no-sandbox --disable-gpu \
		--no-first-run --no-default-browser-check \
		--user-data-dir="$T/profile-$p" "$@"
}

chrome dom --enable-logging=stderr --v=0 --dump-dom "$url" \
	>"$T/dom.html" 2>"$T/chromium.log"
rc=$?
title=$(grep -o '<title>[^<]*</title>' "$T/dom.html" | head -1 |
	sed 's/<[^>]*>//g')
tiles=$(grep -o '<body[^>]*data-tiles="[0-9]*"' "$T/dom.html" |
	sed 's/.*data-tiles="\([0-9]*\)"/\1/')
ok $([ $rc = 0 ] && [ "$title" = "pypto timeline: $nev tiles" ] && \
     [ "$tiles" = "$nev" ] && echo 1 || echo 0) \
   "timeline renders ($src): title \"$title\", data-tiles $tiles, $nev events" \
   "chromium exit $rc; $(grep -A3 'id="error"' "$T/dom.html" | head -c 600)"
ok $(echo "$title" | grep -qi error && echo 0 || echo 1) \
   "no render error in the page" \
   "$(grep -A3 'id="error"' "$T/dom.html" | head -c 600)"
console=$(grep -E 'CONSOLE|Uncaught' "$T/chromium.log")
ok $([ -z "$console" ] && echo 1 || echo 0) \
   "no console message or uncaught exception from the page" "$console"
if [ -n "$hover" ]; then
	deps=$(grep -o '<body[^>]*data-deps="[0-9]*"' "$T/dom.html" |
	       sed 's/.*data-deps="\([0-9]*\)"/\1/')
	ndep=$(grep -o 'class="dep [a-z]*"' "$T/dom.html" | wc -l)
	ok $([ "$deps" = "$want_deps" ] && [ "$ndep" = "$want_deps" ] && \
	     echo 1 || echo 0) \
	   "hovering event $hover draws its $want_deps dependency arrows ($ndep)"
else
	skip "hover arrows" "no python3 to pick a tile"
fi

chrome shot --screenshot="$T/timeline.png" --window-size=1600,900 "$url" \
	>"$T/shot.log" 2>&1
rc=$?
sig=$(head -c 8 "$T/timeline.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')
size=$(stat -c %s "$T/timeline.png" 2>/dev/null || echo 0)
ok $([ $rc = 0 ] && [ "$sig" = 89504e470d0a1a0a ] && [ "$size" -gt 1000 ] \
     && echo 1 || echo 0) "screenshot is a PNG ($size bytes)" \
   "chromium exit $rc, signature $sig; $(tail -3 "$T/shot.log")"
if [ "$sig" = 89504e470d0a1a0a ] && cp "$T/timeline.png" "$bdir/timeline.png"
then
	echo "# screenshot: $bdir/timeline.png"
fi
finish
