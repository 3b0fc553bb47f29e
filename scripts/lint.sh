#!/bin/sh
# Kernel style gate: checkpatch.pl --strict (from Debian's linux-source-6.12)
# and sparse over hcomm.ko.  Exits non-zero on any finding.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
. "$here/lib.sh"

src=$(hcomm_kernel_source)
cd "$top"
files=$(ls kernel/*.c kernel/*.h kernel/tests/*.c uapi/linux/*.h)
rc=0

log "checkpatch --strict: $(echo $files | wc -w) files"
# SPDX and file-path checks assume an in-tree file.
perl "$src/scripts/checkpatch.pl" --no-tree --strict --terse --show-types \
	--ignore FILE_PATH_CHANGES,SPDX_LICENSE_TAG -f $files || rc=1

kver=$(ls -d /lib/modules/*/build 2>/dev/null | sort -V | tail -1)
kver=${kver%/build}
kver=${kver##*/}
log "sparse against $kver"
out=$(make -s -C kernel KDIR="/lib/modules/$kver/build" \
	O="$top/build/lint/$kver" sparse 2>&1) || rc=1
# sparse findings are lines of the form file:line:col: warning/error.
findings=$(printf '%s\n' "$out" | grep -E ':[0-9]+:[0-9]+: (warning|error)' || true)
if [ -n "$findings" ]; then
	printf '%s\n' "$findings"
	rc=1
fi
[ "$rc" -eq 0 ] && log "lint clean"
exit "$rc"
