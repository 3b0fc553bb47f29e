#!/bin/bash
# `make demo`: dependencies, builds (lib + the module for stock 6.12), then a
# stock 6.12 VM that loads hcomm.ko, runs build/lib/hcomm_demo and unloads it.
# The guest's output is shown live; the console is kept in build/logs/demo.log.
# Extra arguments go to hcomm_demo.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
. "$here/lib.sh"

scripts/install-deps.sh
v=$(ls /boot/vmlinuz-6.12.* 2>/dev/null | sort -V | tail -n1 | sed 's|^/boot/vmlinuz-||')
[ -n "$v" ] || die "no stock 6.12 kernel in /boot (run scripts/install-deps.sh)"
log "building libhcomm and the module for $v"
make -s -C lib
make -s -C kernel KDIR="/lib/modules/$v/build" O="$repo/build/kmod/$v"
[ -x build/lib/hcomm_demo ] || die "build/lib/hcomm_demo was not built"

quoted=
for a in "$@"; do quoted="$quoted '${a//\'/\'\\\'\'}'"; done
guest="insmod \"\$HCOMM_KO\" || exit 1
echo '--- hcomm_demo ---'
build/lib/hcomm_demo$quoted
rc=\$?
echo \"--- hcomm_demo exited \$rc ---\"
rmmod hcomm || { echo 'rmmod hcomm failed'; rc=1; }
exit \$rc"
HCOMM_KO=$repo/build/kmod/$v/hcomm.ko exec scripts/vm-run.sh \
	--kernel "/boot/vmlinuz-$v" --log build/logs/demo.log --timeout 600 \
	--live -- /bin/sh -c "$guest"
