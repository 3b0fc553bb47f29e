#!/bin/bash
# `make fuzz`: selftests/hcomm_fuzz_test with long budgets in a VM of the
# debug kernel (KASAN, lockdep, kmemleak, fault injection built in): the
# uapi fuzzer (FUZZ_OPS commands), the kill -9 tests, and the load test
# for LOAD_SECS (default 300); then rmmod and a kmemleak scan.  Passes only when
# the fuzzer passed (no unexpected errno, no lost completion, no access to
# the victim's memory, gauges back to zero), hcomm.ko unloads, kmemleak
# reports nothing and the console shows no kernel problem (vm-run.sh: 126).
#
#   make fuzz [FUZZ_OPS=1000000] [FUZZ_SEED=N] [FUZZ_THREADS=4] [LOAD_SECS=300]
#
# The debug kernel is built on first use (about 15 minutes, cached like
# make check's).  The console is build/logs/fuzz.log.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
. "$here/lib.sh"

scripts/install-deps.sh
log "the debug kernel (cached in $HCOMM_CACHE)"
kdebug=$(scripts/build-debug-kernel.sh | tail -n1)
[ -f "$kdebug/arch/x86/boot/bzImage" ] || die "no debug kernel at $kdebug"
make -s -C selftests
make -s -C kernel KDIR="$kdebug" O="$repo/build/kmod/debug"
mkdir -p build/logs
guest=build/logs/fuzz-guest.sh
cat > "$guest" <<GUEST
#!/bin/sh
# written by scripts/fuzz.sh
dbg=/sys/kernel/debug
[ -w \$dbg/kmemleak ] && echo clear > \$dbg/kmemleak
insmod $repo/build/kmod/debug/hcomm.ko || exit 1
rc=0
HCOMM_FUZZ_OPS=${FUZZ_OPS:-1000000} HCOMM_FUZZ_THREADS=${FUZZ_THREADS:-4} \\
	HCOMM_LOAD_SECS=${LOAD_SECS:-300} ${FUZZ_SEED:+HCOMM_FUZZ_SEED=$FUZZ_SEED} \\
	$repo/build/selftests/hcomm_fuzz_test || rc=1
rmmod hcomm || { echo "fuzz: rmmod hcomm failed"; rc=1; }
if [ -w \$dbg/kmemleak ]; then
	sleep 6; echo scan > \$dbg/kmemleak; sleep 2; echo scan > \$dbg/kmemleak
	if [ -n "\$(cat \$dbg/kmemleak)" ]; then
		echo "fuzz: kmemleak reports:"; head -n 100 \$dbg/kmemleak; rc=1
	fi
fi
echo "fuzz: exit \$rc"
exit \$rc
GUEST
chmod +x "$guest"
log "fuzzing: ${FUZZ_OPS:-1000000} commands, ${FUZZ_THREADS:-4} threads + a victim process"
rc=0
scripts/vm-run.sh --kernel "$kdebug/arch/x86/boot/bzImage" --kver none \
	--smp 2 --log build/logs/fuzz.log --timeout "${FUZZ_TIMEOUT:-7200}" \
	--live -- "$guest" || rc=$?
case $rc in
0) log "fuzz: passed (console: build/logs/fuzz.log)" ;;
126) log "fuzz: FAILED: a kernel problem on the console (build/logs/fuzz.log)" ;;
*) log "fuzz: FAILED (status $rc; console: build/logs/fuzz.log)" ;;
esac
exit "$rc"
