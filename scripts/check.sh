#!/bin/bash
# `make check`: dependencies, every build, host unit tests, then one VM boot
# per kernel (stock 6.1, stock 6.12, debug 6.12) running scripts/guest-tests.sh.
# Prints phase timings and a per-part table, and ends with exactly one line
#   N passed, N failed
# (skips are in the table only). Exit status 0 only when nothing failed and
# every VM came back clean (a crash, timeout or kernel warning is a failure).
#
# Environment:
#   HCOMM_ROLES       VMs to boot (default "stock61 stock612 debug")
#   HCOMM_NET         0: leave out the two-VM network tests (default 1)
#   HCOMM_VM_TIMEOUT  seconds per VM (default 1200: the debug VM takes 7-8 minutes)
#   HCOMM_CACHE       cache dir (initramfs images, the debug kernel)
# Logs: build/logs/ (check-*.log for builds, vm-<role>.log for consoles).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
. "$here/lib.sh"

roles=${HCOMM_ROLES:-stock61 stock612 debug}
vm_timeout=${HCOMM_VM_TIMEOUT:-1200}
logs=$repo/build/logs
mkdir -p "$logs"

now() { date +%s.%N; }
since() { echo "$(now) $1" | awk '{printf "%.1f", $1 - $2}'; }

# Rows of the final table: kind|name|passed|failed|skipped|secs|note
rows=()
row() { rows+=("$1|$2|$3|$4|$5|$6|${7:-}"); }

# Run a phase with its output in build/logs/check-<name>.log.
# Records a row; a failed phase counts as one failure.
phase() {
	local name=$1 t rc; shift
	t=$(now)
	printf '[check] %-28s ' "$name" >&2
	"$@" > "$logs/check-$name.log" 2>&1
	rc=$?
	if [ $rc -eq 0 ]; then
		echo "ok ($(since "$t")s)" >&2
		row phase "$name" 0 0 0 "$(since "$t")" ok
	else
		echo "FAILED rc=$rc ($(since "$t")s), log $logs/check-$name.log" >&2
		tail -n 25 "$logs/check-$name.log" | sed 's/^/    /' >&2
		row phase "$name" 0 1 0 "$(since "$t")" "rc=$rc"
	fi
	return $rc
}

latest_kver() { # 6.1 -> newest installed 6.1.x version
	local f
	f=$(ls /boot/vmlinuz-"$1".* 2>/dev/null | sort -V | tail -n1)
	[ -n "$f" ] && basename "$f" | sed 's/^vmlinuz-//'
}

t_all=$(now)

# ------------------------------------------------------------- deps, builds
# The debug kernel (cold: 12-14 minutes of CPU) builds in the background
# while the other packages download and unpack (mostly waiting on the
# network and the disk): the packages its build needs come first.
kdebug=
ok_debug=0 kpid=
case " $roles " in *" debug "*)
	if phase install-deps-kernel scripts/install-deps.sh kernel; then
		# build-debug-kernel.sh locks per cache key: a concurrent
		# caller waits for the running build and reuses it.
		# It runs while the other packages download and unpack and
		# the host builds and lint run; make check waits for it
		# before any test: beside the host tests and the VMs, even at
		# SCHED_IDLE and nice 19, it made them 1.5 to 2 times slower
		# for little gain.
		t_kdebug=$(now)
		scripts/build-debug-kernel.sh \
			> "$logs/kdebug.path" 2> "$logs/check-debug-kernel.log" &
		kpid=$!
	fi
	;;
esac
phase install-deps scripts/install-deps.sh
# Every program the host tests run is built here, on every CPU (the
# sanitizer builds of the libraries' tests included): the test runs
# themselves stay one program at a time.
jobs=$(nproc)
phase build-lib make -C lib -j"$jobs" check-build
phase build-selftests make -C selftests -j"$jobs"
phase build-pypto make -C pypto -j"$jobs" check-build
phase build-python make -C python	# the C extension under pypto/hcomm
phase build-bench make -C bench -j"$jobs"	# its pypto_* programs link libpypto
phase build-libvm make -C lib/tests/vm -j"$jobs"
phase man-pages make -C man check
phase lint scripts/lint.sh

declare -A kver kimage kdir kmod_ok kko
set_role() {
	local r=$1 v
	case $r in
	stock61) v=$(latest_kver 6.1); kver[$r]=$v; kimage[$r]=/boot/vmlinuz-$v; kdir[$r]=/lib/modules/$v/build ;;
	stock612) v=$(latest_kver 6.12); kver[$r]=$v; kimage[$r]=/boot/vmlinuz-$v; kdir[$r]=/lib/modules/$v/build ;;
	debug) kver[$r]=none; kimage[$r]=$kdebug/arch/x86/boot/bzImage; kdir[$r]=$kdebug ;;
	*) die "unknown role $r (stock61, stock612, debug)" ;;
	esac
}
build_kmod() {
	local r=$1 out
	kmod_ok[$r]=0
	if [ "$r" = debug ]; then
		[ "$ok_debug" = 1 ] || { row phase "build-kmod-debug" 0 1 0 0 "no debug kernel"; return; }
		out=$repo/build/kmod/debug
	else
		if [ -z "${kver[$r]}" ] || [ ! -d "${kdir[$r]}" ]; then
			echo "[check] $r: no installed kernel/headers found" >&2
			row phase "build-kmod-$r" 0 1 0 0 "no kernel"
			return
		fi
		out=$repo/build/kmod/${kver[$r]}
	fi
	mkdir -p "$out"
	phase "build-kmod-$r" make -C kernel -j"$jobs" KDIR="${kdir[$r]}" O="$out" && kmod_ok[$r]=1
	kko[$r]=$out/hcomm.ko
	if [ "$r" = debug ]; then
		# The paths of kernels without IO_URING_F_CANCEL, for lockdep.
		phase build-kmod-debug-compat61 env HCOMM_COMPAT_61=1 \
			make -C kernel -j"$jobs" KDIR="${kdir[$r]}" O="$out-compat61"
		export HCOMM_KO_COMPAT61=$out-compat61/hcomm.ko
	fi
}
# The debug kernel, from the background build: wait, then its modules.
debug_ready() {
	if [ -n "$kpid" ]; then
		printf '[check] %-28s ' debug-kernel >&2
		if wait "$kpid"; then
			kdebug=$(tail -n1 "$logs/kdebug.path")
			ok_debug=1
			echo "ok ($(since "$t_kdebug")s since its start)" >&2
			row phase debug-kernel 0 0 0 "$(since "$t_kdebug")" \
				"beside install-deps"
		else
			echo "FAILED ($(since "$t_kdebug")s), log $logs/check-debug-kernel.log" >&2
			tail -n 25 "$logs/check-debug-kernel.log" | sed 's/^/    /' >&2
			row phase debug-kernel 0 1 0 "$(since "$t_kdebug")" failed
		fi
	fi
	set_role debug
	build_kmod debug
}
case " $roles " in *" debug "*) debug_ready ;; esac
for r in $roles; do
	[ "$r" = debug ] && continue
	set_role "$r"
	build_kmod "$r"
done

# ------------------------------------------------------------- host tests
t=$(now)
printf '[check] %-28s ' "host-lib-tests" >&2
make -C lib check > "$logs/check-host-lib-tests.log" 2>&1
rc=$?
sum=$(grep -E '^lib: [0-9]+ passed, [0-9]+ failed' "$logs/check-host-lib-tests.log" | tail -n1)
if [ -n "$sum" ]; then
	set -- $sum
	p=$2 f=$4
	[ $rc -ne 0 ] && [ "$f" -eq 0 ] && f=1
else
	p=0 f=1
fi
# Then each program after test_hcomm prints its own line, in this order
# (make stops at the first that fails: the later ones count one failure):
# units (the module-free pieces), tcp (forked ranks over 127.0.0.1),
# reduce (the collectives' kernels), coll (the collectives), tools,
# coll-tsan (the collectives' threads under ThreadSanitizer), units-tsan
# (the lock-free queues under it), then asan-lib, asan-units, asan-tcp,
# asan-reduce, asan-coll (AddressSanitizer + UBSan).
prev=$sum lines=""
for what in units tcp reduce coll tools coll-tsan units-tsan asan-lib \
	    asan-units asan-tcp asan-reduce asan-coll; do
	wsum=$(grep -E "^$what: [0-9]+ passed, [0-9]+ failed" "$logs/check-host-lib-tests.log" | tail -n1)
	if [ -n "$wsum" ]; then
		set -- $wsum
		p=$((p + $2)) f=$((f + $4))
	elif [ -n "$prev" ]; then
		f=$((f + 1))	# the one before ran, this one did not
	fi
	prev=$wsum
	lines="$lines; ${wsum:-no $what line}"
done
echo "rc=$rc ${sum:-no summary line}$lines ($(since "$t")s)" >&2
[ $rc -ne 0 ] && tail -n 25 "$logs/check-host-lib-tests.log" | sed 's/^/    /' >&2
row test "host/lib" "$p" "$f" 0 "$(since "$t")"

# libpypto's host tests: every test program prints "pypto-<name>: N passed,
# N failed"; a program that printed no line counts as one failure.
t=$(now)
printf '[check] %-28s ' "host-pypto-tests" >&2
make -C pypto check > "$logs/check-host-pypto-tests.log" 2>&1
rc=$?
p=0 f=0 lines=0
while read -r _ np _ nf _; do
	p=$((p + np)) f=$((f + nf)) lines=$((lines + 1))
done < <(grep -E '^pypto-[a-z-]+: [0-9]+ passed, [0-9]+ failed' "$logs/check-host-pypto-tests.log")
want=13	# deque graph trace sched allreduce html dist, tsan: sched deque, asan: sched graph trace deque
[ "$lines" -lt "$want" ] && f=$((f + want - lines))
[ $rc -ne 0 ] && [ "$f" -eq 0 ] && f=1
echo "rc=$rc $p passed, $f failed in $lines programs ($(since "$t")s)" >&2
[ $rc -ne 0 ] && tail -n 25 "$logs/check-host-pypto-tests.log" | sed 's/^/    /' >&2
row test "host/pypto" "$p" "$f" 0 "$(since "$t")"

# The Python packages (pytest; its summary "N passed[, N failed][, N
# skipped]"): no summary at all counts as one failure.
t=$(now)
printf '[check] %-28s ' "host-python-tests" >&2
make -C python check > "$logs/check-host-python-tests.log" 2>&1
rc=$?
sum=$(grep -E '^(=+ )?[0-9]+ (passed|failed)' "$logs/check-host-python-tests.log" | tail -n1)
p=$(echo "$sum" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
f=$(echo "$sum" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
s=$(echo "$sum" | grep -oE '[0-9]+ skipped' | grep -oE '[0-9]+')
e=$(echo "$sum" | grep -oE '[0-9]+ errors?' | grep -oE '[0-9]+')
p=${p:-0} f=$(( ${f:-0} + ${e:-0} )) s=${s:-0}
[ -z "$sum" ] && f=$((f + 1))
[ $rc -ne 0 ] && [ "$f" -eq 0 ] && f=1
echo "rc=$rc $p passed, $f failed, $s skipped ($(since "$t")s)" >&2
[ $rc -ne 0 ] && tail -n 25 "$logs/check-host-python-tests.log" | sed 's/^/    /' >&2
row test "host/python" "$p" "$f" "$s" "$(since "$t")"

# Installation (scripts/test-install.sh): make install into a staging
# DESTDIR, the module staged and built by dkms in private trees; TAP, then
# "install: N passed, N failed".  Its dkms-built module is loaded by the
# stock 6.12 VM (part dkms).
t=$(now)
printf '[check] %-28s ' "host-install-tests" >&2
scripts/test-install.sh > "$logs/check-host-install-tests.log" 2>&1
rc=$?
sum=$(grep -E '^install: [0-9]+ passed, [0-9]+ failed' "$logs/check-host-install-tests.log" | tail -n1)
if [ -n "$sum" ]; then
	set -- $sum
	p=$2 f=$4
else
	p=0 f=1
fi
[ $rc -ne 0 ] && [ "$f" -eq 0 ] && f=1
echo "rc=$rc $p passed, $f failed ($(since "$t")s)" >&2
[ $rc -ne 0 ] && tail -n 25 "$logs/check-host-install-tests.log" | sed 's/^/    /' >&2
row test "host/install" "$p" "$f" 0 "$(since "$t")"

# ------------------------------------------------------------- VMs
expected_parts() {
	if [ "$1" = debug ]; then echo load selftests libvm pypto kunit unload compat61 kmemleak
	elif [ "$1" = stock612 ]; then echo load selftests libvm pypto python unload dkms
	else echo load selftests libvm pypto python unload; fi
}
# Boot role $1's VM and run guest-tests.sh; "rc secs" in vm-<role>.rc.
# Once: a guest that crashed as tcg_crash says, before any test failed,
# runs again; the first console stays as vm-<role>.log.crashed.
run_vm() {
	local r=$1 t rc log=$logs/vm-$1.log try
	t=$(now)
	for try in 1 2; do
		echo "[check] vm-$r: booting ${kimage[$r]} (console $log)" >&2
		HCOMM_KO=${kko[$r]} scripts/vm-run.sh --kernel "${kimage[$r]}" \
			--kver "${kver[$r]}" --log "$log" --timeout "$vm_timeout" \
			-- scripts/guest-tests.sh "$r" 2> "$logs/vm-$r.host.log"
		rc=$?
		[ "$try" = 1 ] && { [ "$rc" = 125 ] || [ "$rc" = 126 ]; } &&
			! grep -aqE '(^|# )not ok ' "$log" &&
			tcg_crash "$log" || break
		mv "$log" "$log.crashed"
		[ -f "$log.out" ] && mv "$log.out" "$log.out.crashed"
		mv "$logs/vm-$r.host.log" "$logs/vm-$r.host.log.crashed"
		echo "[check] vm-$r: the guest died in a trap with no hcomm" \
			"frame (TCG; console in $log.crashed): running it" \
			"again" >&2
		row phase "vm/$r: TCG crash, run again" 0 0 0 "$(since "$t")" \
			"$log.crashed"
	done
	echo "$rc $(since "$t")" > "$logs/vm-$r.rc"
}

# One VM at a time (on 2 cores, two side by side each ran twice as slowly).
# vm_role ROLE: boot it, run guest-tests.sh, and add its rows.
vm_role() {
	local r=$1 log rc secs boot src part_fails part line p f s ps note vf
	rm -f "$logs/vm-$r.rc"
	if [ "${kmod_ok[$r]}" != 1 ]; then
		echo "[check] vm-$r: skipped (module not built)" >&2
		row vm "$r" 0 1 0 0 "not booted: no module"
		return
	fi
	run_vm "$r"
	log=$logs/vm-$r.log
	read -r rc secs < "$logs/vm-$r.rc"
	sed 's/^/    /' "$logs/vm-$r.host.log" >&2
	boot=$(grep -aoE 'boot-to-command=[0-9.?]+' "$logs/vm-$r.host.log" | tail -n1 | sed 's/.*=//')
	src=$log.out
	grep -q '^RESULT ' "$src" 2>/dev/null || src=$log
	part_fails=0
	for part in $(expected_parts "$r"); do
		line=$(grep -aE "^RESULT $part passed=" "$src" | tail -n1)
		if [ -z "$line" ]; then
			row test "$r/$part" 0 1 0 0 "no RESULT line"
			part_fails=$((part_fails + 1))
			continue
		fi
		p=$(echo "$line" | sed -E 's/.* passed=([0-9]+).*/\1/')
		f=$(echo "$line" | sed -E 's/.* failed=([0-9]+).*/\1/')
		s=$(echo "$line" | sed -E 's/.* skipped=([0-9]+).*/\1/')
		ps=$(echo "$line" | sed -nE 's/.* secs=([0-9.]+).*/\1/p')
		row test "$r/$part" "$p" "$f" "$s" "${ps:-?}"
		part_fails=$((part_fails + f))
	done
	case $rc in
	0|1) note="ok"; vf=0 ;;   # 1: guest-tests counted its failures itself
	124) note="TIMEOUT after ${vm_timeout}s"; vf=1 ;;
	125) note="no exit status (crash/panic)"; vf=1 ;;
	126) note="KERNEL WARNING/BUG in console"; vf=1 ;;
	*) note="rc=$rc"; vf=1 ;;
	esac
	if [ "$rc" = 1 ]; then
		note="guest-tests failed"
		# It must have said what failed; if not, count the VM itself.
		[ "$part_fails" -gt 0 ] || vf=1
	fi
	row vm "$r" 0 "$vf" 0 "$secs" "$note; boot ${boot:-?}s"
	echo "[check] vm-$r: rc=$rc, ${secs}s" >&2
}
for r in $roles; do
	[ "$r" = debug ] || vm_role "$r"
done

# ------------------------------------------------------------- network
# Two VMs on the private network of scripts/netvm.sh running
# lib/tests/vm/net.sh: the communicator cases across hosts over tcp and
# rdma; each VM prints "net: N passed, N failed, N skipped" for its ranks.
# Stock 6.12 runs every case.  HCOMM_NET=0 leaves them out.
# The debug kernel (KASAN, lockdep; rdma_rxe built in) runs the 4-rank
# cases with hcomm.ko inside each VM (below, after its VM).  netvm.sh
# fails a VM whose console shows a kernel problem (126).
# net_run ROLE LABEL WHAT COMMAND...: two VMs of ROLE's kernel run COMMAND;
# each prints "WHAT: N passed, N failed, N skipped" (net_env: more --env).
net_run() {
	local r=$1 label=$2 what=$3 t rc p f s lines nv=${net_vms:-2} try keep note
	shift 3
	t=$(now)
	echo "[check] net-$label: $nv VMs of ${kimage[$r]}" >&2
	for try in 1 2 3; do
		scripts/netvm.sh run --n "$nv" --kernel "${kimage[$r]}" \
			--kver "${kver[$r]}" --timeout "$vm_timeout" \
			--log-dir "$logs/net-$label" --env "HCOMM_KO=${kko[$r]}" \
			"${net_env[@]}" "${net_opts[@]}" -- "$@" \
			> "$logs/check-net-$label.log" 2>&1
		rc=$?
		# Up to twice: a guest that died in rxe or trapped as
		# tcg_crash says (not in hcomm) runs again, unless a test had
		# failed before (that failure counts); each such run's logs
		# stay beside as net-LABEL.crashed[.2], and the table says so.
		[ "$try" -lt 3 ] && { [ "$rc" = 125 ] || [ "$rc" = 126 ]; } &&
			! grep -aqE '^not ok ' "$logs/check-net-$label.log" &&
			tcg_crash "$logs/net-$label"/vm*.console || break
		keep=$logs/net-$label.crashed
		[ "$try" = 1 ] || keep=$keep.$try
		rm -rf "$keep"
		mv "$logs/net-$label" "$keep"
		mv "$logs/check-net-$label.log" "$keep.log"
		echo "[check] net-$label: a guest died or trapped under TCG" \
			"with no hcomm frame (logs in $keep): running it" \
			"again" >&2
		row phase "net/$label: TCG crash, run again" 0 0 0 \
			"$(since "$t")" "$keep"
	done
	p=0 f=0 s=0 lines=0
	while read -r _ np _ nf _ ns _; do
		p=$((p + np)) f=$((f + nf)) s=$((s + ns)) lines=$((lines + 1))
	done < <(grep -aE "^$what: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped" "$logs/check-net-$label.log")
	[ "$lines" -lt "$nv" ] && f=$((f + nv - lines))	# a VM that said nothing
	note=
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		case $rc in
		126) note="a kernel problem on a console (KERNEL PROBLEM in check-net-$label.log)" ;;
		125) note="a guest died or timed out" ;;
		*) note="netvm.sh rc $rc" ;;
		esac
	fi
	echo "[check] net-$label: rc=$rc, $p passed, $f failed ($(since "$t")s)" >&2
	[ "$f" = 0 ] || net_failed+=("$logs/check-net-$label.log")
	row test "net/$label-x$nv" "$p" "$f" "$s" "$(since "$t")" "$note"
}
net_one() {	# role label cases...: lib/tests/vm/net.sh
	local r=$1 label=$2
	shift 2
	net_run "$r" "$label" net bash lib/tests/vm/net.sh --quick "$@"
}
net_env=() net_opts=() net_failed=()
if [ "${HCOMM_NET:-1}" = 1 ] && [ "${kmod_ok[stock612]:-0}" = 1 ]; then
	net_one stock612 stock612
	# Open MPI's mpirun across the two VMs (lib/tests/vm/mpi.sh)
	net_run stock612 mpi-stock612 mpi bash lib/tests/vm/mpi.sh
	# Cut the RoCE link under a stream: two NICs per VM (rdma over the
	# second, the bootstrap and tcp over the first), a netem qdisc on
	# each; rdma alone (or HCOMM_FAILOVER=0) fails cleanly, rdma+tcp
	# fails over.
	net_opts=(--nics 2 --prenetem)
	net_one stock612 cut-stock612 cut-netem-2 cut-link-2 cut-tap-2 \
		cut-nofo-2 stall-2 blip-2 blip-fo-2 stall-fo-2 fo-netem-2 \
		fo-link-2 fo-tap-2 fo-nofb-2 fo-batch-2 fo-get-2 fo-fence-2 \
		fo-rxe-2 pypto-fo-2 pypto-lost-2
	# one pair of a 4-rank job loses its link, the others do not
	net_vms=4 net_one stock612 pair-stock612 fo-pair-4
	net_opts=()
fi
# The killed cases: a rank dies with kernel-transport operations of its
# VM neighbour in flight; under KASAN the victim's exit alone takes up to
# 6 s, so the survivors' bound (HCOMM_VMTEST_EXIT_MS) is 10 s there.
# Under KASAN and lockdep on a busy 2-CPU machine, hcomm_comm_init with
# its link probe took 85-91 s and one case 176 s, and one VM's ranks left
# init 6 s after the other's: a barrier (30 s by default), the test's
# alarm (150 s) and the case limit (180 s) then fail a case that is only
# slow.  The limits scale here (the rdma keep-alive's too: 5 s of
# silence, not net.sh's 1 s); HCOMM_VMTEST_TRACE prints each phase's
# time, so a slow phase shows in the log.
net_env=(--env HCOMM_VMTEST_EXIT_MS=10000 --env HCOMM_COLL_TIMEOUT_MS=180000
	--env HCOMM_KEEPALIVE_TIMEOUT=5000
	--env HCOMM_VMTEST_ALARM=420 --env HCOMM_LIBVM_TIMEOUT=480
	--env HCOMM_VMTEST_TRACE=1)
# Only the cases that load hcomm.ko run here (2 ranks per VM: the kernel
# transport inside each VM beside rdma and tcp across): with one rank per
# VM the debug kernel would check rxe and TCP, not hcomm, whose userspace
# ASan and TSan check on the host.  The data path, and a rank killed with
# operations of its VM neighbour in flight (the fence and the other modes
# drive the module as the debug VM's libvm cases do).

# ------------------------------------------------------------- debug kernel
# Last (its kernel and module came before the network suites).
case " $roles " in *" debug "*)
	vm_role debug
	# The link probe is off (HCOMM_PROBE=off): under KASAN it took 24 s
	# of each case's 45, and it is userspace; the order kernel, rdma,
	# tcp still puts the kernel transport inside each VM.
	if [ "${HCOMM_NET:-1}" = 1 ] && [ "${kmod_ok[debug]:-0}" = 1 ]; then
		net_env+=(--env HCOMM_PROBE=off)
		net_one debug debug mix-putget-4 mix-killed-4
	fi
	;;
esac

# ------------------------------------------------------------- report
tp=0 tf=0 ts=0
echo
printf '%-6s %-26s %7s %7s %7s %8s  %s\n' kind name passed failed skipped secs note
printf '%s\n' "------------------------------------------------------------------------------"
for x in "${rows[@]}"; do
	IFS='|' read -r kind name p f s secs note <<< "$x"
	printf '%-6s %-26s %7s %7s %7s %8s  %s\n' "$kind" "$name" "$p" "$f" "$s" "$secs" "$note"
	tp=$((tp + p)); tf=$((tf + f)); ts=$((ts + s))
done
printf '%s\n' "------------------------------------------------------------------------------"
printf '%-33s %7s %7s %7s %8s\n' total "$tp" "$tf" "$ts" "$(since "$t_all")"
echo "logs: $logs"
# The failed tests by name, so that the tail of a CI log says which ones.
if [ "$tf" -gt 0 ]; then
	echo "failed tests (first 30):"
	for x in "$logs"/check-*.log "$logs"/vm-*.log "$logs"/vm-*.log.out; do
		[ -f "$x" ] || continue
		grep -aE '^[[:space:]#]*not ok ' "$x" | sed "s|^|  $(basename "$x"): |"
	done | head -n 30
	# and what they said: a CI log keeps only its tail
	echo "their messages (first 30):"
	for x in "$logs"/check-*.log "$logs"/vm-*.log "$logs"/vm-*.log.out; do
		[ -f "$x" ] || continue
		grep -aE 'FAIL|timed out|alarm|Call Trace|BUG:|WARNING:|Oops|PANIC|detected stall' "$x" |
			grep -avE '^[[:space:]#]*(ok|not ok) |rtc_cmos' |
			cut -c1-300 | sed "s|^|  $(basename "$x"): |"
	done | head -n 30
	# and, for each failed kselftest harness case, what it printed
	# between its RUN and FAIL lines (the seed, the counts, the
	# assertion), the last 12 lines of each
	echo "output of failed harness cases (first 5):"
	for x in "$logs"/vm-*.log; do
		[ -f "$x" ] || continue
		awk -v f="$(basename "$x")" '
			/#  RUN / { n = 0; next }
			/#  +OK / { n = 0; next }
			/#  +FAIL / {
				print "  " f ": " $0
				for (i = (n > 12 ? n - 12 : 0); i < n; i++)
					print "  " f ":   " substr(b[i % 12], 1, 300)
				n = 0; next
			}
			{ b[n % 12] = $0; n++ }' "$x"
	done | awk '/#  +FAIL / { c++ } c <= 5' | head -n 80
	# and, for each failed network suite, how each VM ended and the
	# kernel problem netvm.sh saw on a console (the line before a
	# "Call Trace" says what it was: Oops, RCU stall, lockup, ...)
	if [ "${#net_failed[@]}" -gt 0 ]; then
		echo "network suites that failed, how their VMs ended:"
		for x in "${net_failed[@]}"; do
			grep -aE '^netvm: (vm[0-9]+ rc=|rc=)|KERNEL PROBLEM|^netvm:   |^not ok ' "$x" |
				head -n 40 | cut -c1-300 | sed "s|^|  $(basename "$x"): |"
		done
	fi
	# and the rows that counted them, last: a CI log keeps only its
	# tail, and a VM that timed out or crashed has no "not ok" line
	echo "rows with failures:"
	for x in "${rows[@]}"; do
		IFS='|' read -r kind name p f s secs note <<< "$x"
		[ "$f" != 0 ] && printf '  %s %s: %s failed, %ss %s\n' \
			"$kind" "$name" "$f" "$secs" "$note"
	done
fi
echo "$tp passed, $tf failed"
[ "$tf" -eq 0 ]
