#!/bin/bash
# SPDX-License-Identifier: MIT
# pypto_dist (make demo's distributed SGEMM) on this machine: 2 ranks of
# libhcomm's tcp transport over loopback, launched by hcomm_vm_launch.
#
#   pypto/tests/test_dist.sh [BUILD_DIR]    (default: build/pypto)
#
# Checks: the job passes its own check of the first rows (--ref-rows),
# rank 0's C saved by --save passes --verify (all of C against OpenBLAS
# with the compression's bound), and --verify fails a C with one element
# moved by 0.5, a C of another size, a missing file and no --ranks.
# Prints TAP; the last line is "pypto-dist: N passed, N failed".
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
bdir=$(realpath "${1:-$repo/build/pypto}")
DIST=$bdir/pypto_dist
LAUNCH=$repo/build/lib/vm/hcomm_vm_launch

TAP_NAME=pypto-dist
. "$repo/lib/tests/tap.sh"

[ -x "$LAUNCH" ] || make -s -C "$repo/lib/tests/vm" > /dev/null 2>&1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

"$LAUNCH" -n 2 -t 120 -e HCOMM_TRANSPORT=tcp -e HCOMM_LOG=0 -- \
	"$DIST" --size 384 --tile 96 --ref-rows 96 --save "$T/C.f32" \
	--out "$T" > "$T/run.out" 2>&1
rc=$?
ok $([ $rc = 0 ] && [ "$(grep -c 'rows 0..95 of C verified against OpenBLAS' "$T/run.out")" = 2 ] &&
	echo 1 || echo 0) "2 tcp ranks: the job checks rows 0..95 of its C" \
	"$(tail -n 20 "$T/run.out")"
ok $([ "$(stat -c %s "$T/C.f32" 2>/dev/null)" = $((384 * 384 * 4)) ] &&
	grep -q 'pypto_dist --verify .* --ranks 2 --size 384 --seed 1' "$T/run.out" &&
	echo 1 || echo 0) "rank 0 saved C (384 x 384 floats) and says how to check it"
"$DIST" --verify "$T/C.f32" --ranks 2 --size 384 > "$T/v.out" 2>&1
ok $([ $? = 0 ] && grep -q '0 out of bounds: ok' "$T/v.out" && echo 1 || echo 0) \
	"--verify: all of the saved C within the bound" "$(cat "$T/v.out")"

# deliberately bad: one element 0.5 off (far outside 3 * 2^-11 * S)
cp "$T/C.f32" "$T/bad.f32"
/usr/bin/python3 - "$T/bad.f32" <<'PY'
import struct, sys
with open(sys.argv[1], 'r+b') as f:
    f.seek(4 * 1234)
    v, = struct.unpack('f', f.read(4))
    f.seek(4 * 1234)
    f.write(struct.pack('f', v + 0.5))
PY
"$DIST" --verify "$T/bad.f32" --ranks 2 --size 384 > "$T/bad.out" 2>&1
ok $([ $? = 1 ] && grep -q '1 out of bounds: FAIL' "$T/bad.out" && echo 1 || echo 0) \
	"--verify fails a C with one element moved by 0.5" "$(cat "$T/bad.out")"
"$DIST" --verify "$T/C.f32" --ranks 2 --size 256 > "$T/size.out" 2>&1
ok $([ $? = 1 ] && grep -q 'not the C of a 256 x 256 run' "$T/size.out" &&
	echo 1 || echo 0) "--verify refuses a C of another size" "$(cat "$T/size.out")"
"$DIST" --verify "$T/none.f32" --ranks 2 --size 384 > "$T/none.out" 2>&1
ok $([ $? = 1 ] && grep -q 'No such file' "$T/none.out" && echo 1 || echo 0) \
	"--verify of a missing file fails with its name" "$(cat "$T/none.out")"
"$DIST" --verify "$T/C.f32" --size 384 > "$T/usage.out" 2>&1
ok $([ $? = 2 ] && grep -q 'usage' "$T/usage.out" && echo 1 || echo 0) \
	"--verify without --ranks is a usage error"
finish
