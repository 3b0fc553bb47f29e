#!/bin/sh
# Build (or reuse) the debug kernel used by `make check`.
#
# The kernel comes from Debian's linux-source-6.12 with tinyconfig,
# kvm_guest.config and scripts/kconfig/debug.config.  The result is cached
# outside the clone, keyed by the source package version, the config fragment
# and the recipe version below, so a second run is a no-op.  Prints the build directory.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

tarball=/usr/src/linux-source-6.12.tar.xz
frag="$here/kconfig/debug.config"
[ -f "$tarball" ] || die "missing $tarball (run scripts/install-deps.sh)"

srcdir=$(hcomm_kernel_source)
# Bump RECIPE when a change below alters what gets built.
RECIPE=1
key=$( (dpkg-query -W -f='${Version}' linux-source-6.12; echo "recipe $RECIPE"
	cat "$frag") | sha256sum | cut -c1-16)
out="$HCOMM_CACHE/kdebug-$key"

if [ -f "$out/.hcomm-done" ]; then
	echo "$out"
	exit 0
fi

# One builder at a time per key: a second caller waits for the first and
# then reuses its result.
exec 9>"$out.lock"
flock 9
if [ -f "$out/.hcomm-done" ]; then
	echo "$out"
	exit 0
fi

log "building debug kernel in $out (cold: ~15 min on 2 cores)"
rm -rf "$out"
mkdir -p "$out"
mk() { make -s -C "$srcdir" O="$out" ARCH=x86_64 "$@"; }
mk tinyconfig >&2
(cd "$out" && "$srcdir/scripts/kconfig/merge_config.sh" -m .config \
	"$srcdir/kernel/configs/kvm_guest.config" "$frag") >&2
mk olddefconfig >&2
# Refuse to build something other than what the fragment asked for.
grep -v '^#' "$frag" | grep '=' | while IFS= read -r line; do
	grep -qx "$line" "$out/.config" || die "config lost: $line"
done
mk -j"$(nproc)" bzImage modules >&2
mk modules_prepare >&2
touch "$out/.hcomm-done"
echo "$out"
