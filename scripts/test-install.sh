#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# What an administrator installs, checked on the host without touching the
# system: make install into a staging DESTDIR (PREFIX=/usr/local), the
# module into a staged /lib/modules, make dkms_install and a dkms build of
# it against the stock 6.12 headers in private dkms trees.
#
#   scripts/test-install.sh [OUT]     (default build/install-test)
#
# Checks: the files and their modes, sonames and symbol versions (only
# hcomm_* / pypto_* exported, in HCOMM_1.0 / PYTHON_1.0), the ABI header
# under include/hcomm/ (never include/linux/), pkg-config's flags from the
# staged .pc files, the README's C example compiled and linked against the
# staged install and run (2 ranks over tcp on loopback), the seed's
# snippet the same way (against the fake module of lib/tests), the Python package imported from the staged site and
# used, the staged module's vermagic, and the dkms-built module's.  The
# dkms-built module is left as OUT/dkms/hcomm.ko for the stock 6.12 VM
# (scripts/guest-tests.sh part "dkms" loads it).
# Output: TAP, then "install: N passed, N failed".  Exit status 1 when
# anything failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
out=${1:-$repo/build/install-test}
rm -rf "$out"
mkdir -p "$out"
st=$out/stage
pfx=/usr/local
n=0 pass=0 fail=0
ok() { # cond-status description
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"; pass=$((pass + 1))
	else
		echo "not ok $n - $2"; fail=$((fail + 1))
	fi
}
check() { local d=$1; shift; "$@" > "$out/last.log" 2>&1; local rc=$?
	[ $rc = 0 ] || sed 's/^/# /' "$out/last.log" | tail -n 15
	ok $rc "$d"; }

echo "TAP version 13"
check "make install DESTDIR=... PREFIX=$pfx" \
	make -s -C "$repo" install DESTDIR="$st" PREFIX="$pfx"
L=$st$pfx/lib
missing=
for f in lib/libhcomm.so.1.0.0 lib/libhcomm.so.1 lib/libhcomm.so lib/libhcomm.a \
	 lib/libpypto.so.1.0.0 lib/libpypto.so.1 lib/libpypto.so lib/libpypto.a \
	 lib/pkgconfig/hcomm.pc lib/pkgconfig/pypto.pc include/hcomm.h \
	 include/pypto.h include/hcomm/linux/hcomm.h bin/hcomm_info \
	 bin/hcomm_perf_mon bin/pypto_profile bin/pypto_dist \
	 share/man/man3/hcomm_set_qos.3 share/man/man1/hcomm_info.1 \
	 share/doc/hcomm/examples/modprobe.d-hcomm.conf \
	 share/doc/hcomm/examples/60-hcomm.rules; do
	[ -e "$st$pfx/$f" ] || missing="$missing $f"
done
[ -z "$missing" ] || echo "# missing:$missing"
ok "$([ -z "$missing" ]; echo $?)" "every library, header, .pc, tool, man page and example installed"
ok "$([ ! -e "$st$pfx/include/linux/hcomm.h" ]; echo $?)" \
	"the ABI header is include/hcomm/linux/hcomm.h, not include/linux/"
bad=
for b in hcomm_info hcomm_perf_mon pypto_profile pypto_dist; do
	[ -x "$st$pfx/bin/$b" ] || bad="$bad $b"
done
ok "$([ -z "$bad" ]; echo $?)" "tools executable${bad:+ (not:$bad)}"

so_h=$(readelf -dW "$L/libhcomm.so.1.0.0" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
so_p=$(readelf -dW "$L/libpypto.so.1.0.0" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
ok "$([ "$so_h" = libhcomm.so.1 ] && [ "$so_p" = libpypto.so.1 ]; echo $?)" \
	"sonames libhcomm.so.1, libpypto.so.1 ($so_h, $so_p)"
exp_h=$(nm -D --defined-only "$L/libhcomm.so.1" | awk '$2 ~ /[TDBR]/ {print $3}')
exp_p=$(nm -D --defined-only "$L/libpypto.so.1" | awk '$2 ~ /[TDBR]/ {print $3}')
stray=$(printf '%s\n%s\n' "$exp_h" "$exp_p" | grep -vE '^(hcomm_[a-z0-9]|pypto_[a-z0-9])' | grep -v '^$' | head -5)
[ -z "$stray" ] || echo "# exported beyond the API: $stray"
ok "$([ -z "$stray" ] && [ -n "$exp_h" ]; echo $?)" \
	"only hcomm_* and pypto_* exported ($(echo "$exp_h" | wc -l) and $(echo "$exp_p" | wc -l)); internal hcomm__/pypto__ hidden"
vh=$(readelf --dyn-syms -W "$L/libhcomm.so.1" | grep -c ' hcomm_open@@HCOMM_1.0$')
vp=$(readelf --dyn-syms -W "$L/libpypto.so.1" | grep -c ' pypto_run@@PYPTO_1.0$')
ok "$([ "$vh" = 1 ] && [ "$vp" = 1 ]; echo $?)" \
	"symbols versioned: hcomm_open@@HCOMM_1.0, pypto_run@@PYPTO_1.0"

export PKG_CONFIG_PATH=$L/pkgconfig PKG_CONFIG_SYSROOT_DIR=$st
cf=$(pkg-config --cflags hcomm 2>&1)
ok "$(echo "$cf" | grep -q -- "-I$st$pfx/include/hcomm"; echo $?)" \
	"hcomm.pc: --cflags adds include/hcomm for <linux/hcomm.h> ($cf)"

# The README's C example, against the staged install: 2 ranks over tcp on
# loopback, as the README runs it.
awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on' "$repo/README.md" \
	> "$out/hello.c"
# shellcheck disable=SC2046
check "the README's C example builds against the staged install (pkg-config hcomm)" \
	cc -Wall -Werror -o "$out/hello" "$out/hello.c" \
	$(pkg-config --cflags --libs hcomm) -Wl,-rpath-link,"$L"
[ -x "$repo/build/lib/vm/hcomm_vm_launch" ] || make -s -C "$repo/lib/tests/vm" > /dev/null 2>&1
"$repo/build/lib/vm/hcomm_vm_launch" -n 2 -t 60 -e LD_LIBRARY_PATH="$L" \
	-e HCOMM_TRANSPORT=tcp -- "$out/hello" > "$out/hello.out" 2>&1
ok "$([ "$(grep -c '^rank [01]: 3 6 9 12$' "$out/hello.out")" = 2 ]; echo $?)" \
	"and runs: 2 ranks over tcp print 3 6 9 12 ($(tr '\n' ' ' < "$out/hello.out" | cut -c1-120))"

# The seed's snippet as written, and a registration (the fake module).
cat > "$out/seed.c" <<'EOF'
#include <stdio.h>
#include <hcomm.h>

static int seed(struct hcomm_ctx *dev_ctx, void *addr, size_t size)
{
	hcomm_mr_t mr;
	int ret = hcomm_reg_mem(dev_ctx, addr, size, HCOMM_ACCESS_LOCAL_WRITE, &mr);

	if (ret)
		return ret;
	ret = hcomm_set_qos(dev_ctx, &(hcomm_qos_config_t){
		.min_rate = 30, .max_rate = 70, .priority = 2 });
	return ret ? ret : hcomm_dereg(mr);
}

int main(void)
{
	static char buf[8192];
	struct hcomm_ctx *ctx;
	int ret;

	if (hcomm_open(&ctx, 0))
		return 1;
	ret = seed(ctx, buf, sizeof(buf));
	hcomm_close(ctx);
	printf("seed snippet: %d\n", ret);
	return ret ? 1 : 0;
}
EOF
# shellcheck disable=SC2046
check "the seed's snippet builds against the staged install (pkg-config hcomm)" \
	cc -Wall -Werror -o "$out/seed" "$out/seed.c" \
	$(pkg-config --cflags --libs hcomm) -Wl,-rpath-link,"$L"
check "and runs (LD_LIBRARY_PATH to the stage; the fake module of lib/tests)" \
	env LD_LIBRARY_PATH="$L" FAKE_HCOMM=1 HCOMM_DEVICE=/dev/null \
	LD_PRELOAD="$repo/build/lib/fake_hcomm.so" "$out/seed"

pyver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
check "the Python packages from the staged site-packages: import pypto, hcomm; matmul" \
	env PYTHONPATH="$L/python$pyver/dist-packages" LD_LIBRARY_PATH="$L" \
	PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c '
import os, numpy as np, pypto, hcomm
assert os.environ["PYTHONPATH"] in pypto.__file__, pypto.__file__
a = np.arange(6, dtype=np.float32).reshape(2, 3)
assert np.array_equal(pypto.matmul(a, a.T), a @ a.T)
c = hcomm.Config(); c.enable_fp16_compress = True; c.comp_threshold = 1024'

# The module, staged, and through dkms (private trees: nothing of the
# system's dkms state is touched, the signing key included).
kver=$(ls -d /lib/modules/6.12.*/build 2>/dev/null | sort -V | tail -n1 | cut -d/ -f4)
if [ -z "$kver" ]; then
	echo "ok $((n + 1)) - module install # SKIP no 6.12 headers"
	n=$((n + 1)) pass=$((pass + 1))
else
	# the one make check built, else a build of its own
	kout=$repo/build/kmod/$kver
	[ -f "$kout/hcomm.ko" ] || kout=$out/kmod
	check "hcomm.ko for $kver" make -s -C "$repo/kernel" \
		KDIR="/lib/modules/$kver/build" O="$kout"
	check "make -C kernel install into the stage" \
		make -s -C "$repo/kernel" install KVER="$kver" O="$kout" DESTDIR="$st"
	vm=$(modinfo -F vermagic "$st/lib/modules/$kver/updates/hcomm.ko" 2>/dev/null)
	ok "$(case "$vm" in "$kver "*) echo 0 ;; *) echo 1 ;; esac)" \
		"staged /lib/modules/$kver/updates/hcomm.ko, vermagic $vm"
	check "make dkms_install into the stage" \
		make -s -C "$repo" dkms_install DESTDIR="$st"
	if command -v dkms > /dev/null; then
		dk=$out/dkms-tree
		mkdir -p "$dk"
		export mok_signing_key=$out/mok.key mok_certificate=$out/mok.pub
		check "dkms add (private source and dkms trees)" \
			dkms add -m hcomm -v 1.0 --sourcetree "$st/usr/src" \
			--dkmstree "$dk"
		check "dkms build -k $kver" \
			dkms build -m hcomm -v 1.0 -k "$kver" \
			--sourcetree "$st/usr/src" --dkmstree "$dk"
		built=$(find "$dk/hcomm/1.0/$kver" -name 'hcomm.ko*' | head -n1)
		mkdir -p "$out/dkms"
		case $built in
		*.xz) xz -dc "$built" > "$out/dkms/hcomm.ko" ;;
		*.zst) zstd -qdc "$built" > "$out/dkms/hcomm.ko" ;;
		?*) cp "$built" "$out/dkms/hcomm.ko" ;;
		esac
		vm=$(modinfo -F vermagic "$out/dkms/hcomm.ko" 2>/dev/null)
		ok "$(case "$vm" in "$kver "*) echo 0 ;; *) echo 1 ;; esac)" \
			"dkms built ${built#"$dk"/}, vermagic $vm (loaded by the stock 6.12 VM)"
	else
		echo "ok $((n + 1)) - dkms # SKIP dkms not installed"
		n=$((n + 1)) pass=$((pass + 1))
	fi
fi
check "make uninstall from the stage" \
	make -s -C "$repo" uninstall DESTDIR="$st" PREFIX="$pfx"
left=$(find "$st$pfx" -type f -o -type l | head -5)
[ -z "$left" ] || echo "# left behind: $left"
ok "$([ -z "$left" ]; echo $?)" "nothing of make install is left after make uninstall"
echo "1..$n"
echo "install: $pass passed, $fail failed"
[ "$fail" = 0 ]
