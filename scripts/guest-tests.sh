#!/bin/sh
# Runs INSIDE the test VM (as the command of scripts/vm-run.sh), as root.
#
#   scripts/guest-tests.sh <role> [hcomm.ko]      role: stock61 | stock612 | debug
#
# Parts, each ending with one line
#   RESULT <part> passed=N failed=N skipped=N secs=S
# (also written to $HCOMM_OUT_TTY, the clean channel vm-run.sh collects):
#   load       insmod $HCOMM_KO, /dev/hcomm is a character device
#   selftests  build/selftests/run_tests.sh (TAP; its summary line is parsed;
#              stock 6.1 and the debug kernel run the fixtures' io_uring
#              variant only, the debug kernel not the QoS share tests)
#   libvm      lib/tests/vm/run.sh: libhcomm communicators of 2 and 4 ranks
#              against the module (TAP; its "libvm:" line is parsed; every
#              case on stock 6.12, --module on stock 6.1, five cases
#              --quick on the debug kernel)
#   pypto      build/pypto/pypto_vm_test: the tiled SGEMM through libpypto
#              with transfers through the module (TAP; its "pypto-vm:" line
#              is parsed; --quick on the debug kernel)
#   python     stock kernels: pytest of python/tests (the packages against
#              the module: registration, QoS, a 2-rank allreduce)
#   kunit      debug only: insmod hcomm_kunit.ko, KTAP in debugfs kunit/*/results
#   unload     stats gauges back to 0, rmmod hcomm, module gone
#   dkms       stock 6.12: the dkms-built hcomm.ko of scripts/test-install.sh
#              loads, passes hcomm_uapi_test, unloads
#   compat61   debug only: hcomm.ko built with HCOMM_COMPAT_61=1 ($HCOMM_KO_COMPAT61),
#              the code paths of kernels without IO_URING_F_CANCEL (exit
#              notifier, orphan sweep), under lockdep and KASAN: the race
#              selftests and the io_uring xfer fixture, then rmmod
#   kmemleak   debug only: scan after unload; any report is a failure
# Exit status: 0 when every part passed, 1 otherwise.
set -u

role=${1:?usage: guest-tests.sh <stock61|stock612|debug> [hcomm.ko]}
[ $# -ge 2 ] && HCOMM_KO=$2
: "${HCOMM_KO:?set HCOMM_KO or pass the module path}"
repo=$(cd "$(dirname "$0")/.." && pwd)
kodir=$(dirname "$HCOMM_KO")
kunit_ko=${HCOMM_KUNIT_KO:-$kodir/hcomm_kunit.ko}
selftests=${HCOMM_SELFTESTS:-$repo/build/selftests/run_tests.sh}
libvm=${HCOMM_LIBVM:-$repo/lib/tests/vm/run.sh}
dbg=/sys/kernel/debug
failures=0

now() { cut -d' ' -f1 /proc/uptime; }
emit() { # part passed failed skipped t0
	line=$(printf 'RESULT %s passed=%d failed=%d skipped=%d secs=%s' \
		"$1" "$2" "$3" "$4" "$(echo "$(now) $5" | awk '{printf "%.1f", $1 - $2}')")
	echo "$line"
	[ -n "${HCOMM_OUT_TTY:-}" ] && [ -w "${HCOMM_OUT_TTY}" ] &&
		echo "$line" > "$HCOMM_OUT_TTY"
	[ "$3" -eq 0 ] || failures=$((failures + $3))
}
say() { echo "guest-tests[$role]: $*"; }

say "kernel $(uname -r), module $HCOMM_KO"
if [ "$role" = debug ] && [ -w $dbg/kmemleak ]; then
	# Forget what boot left behind; only what happens from here on counts.
	echo clear > $dbg/kmemleak
fi

# ------------------------------------------------------------------ load
t=$(now); p=0; f=0
if [ ! -f "$HCOMM_KO" ]; then
	say "FAIL: $HCOMM_KO does not exist"; f=1
elif ! insmod "$HCOMM_KO"; then
	say "FAIL: insmod $HCOMM_KO"; f=1
else
	i=0
	while [ ! -c /dev/hcomm ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	if [ -c /dev/hcomm ]; then
		p=1; say "/dev/hcomm: $(ls -l /dev/hcomm)"
	else
		say "FAIL: /dev/hcomm is not there after insmod"; f=1
	fi
fi
emit load $p $f 0 "$t"
loaded=$p

# ------------------------------------------------------------------ selftests
t=$(now); p=0; f=0; s=0
if [ "$loaded" != 1 ]; then
	say "selftests not run: the module is not loaded"; f=1
elif [ ! -x "$selftests" ]; then
	say "FAIL: $selftests missing or not executable"; f=1
else
	st_out=/tmp/selftests.out
	# The debug kernel runs the fixtures' io_uring variant only: the
	# ioctl front is the same handlers behind a thinner door, proven on
	# both stock kernels; io_uring adds the punting, parking and task work
	# that lockdep and KASAN must see.
	# Stock 6.1 does the same: the ioctl front has no code of its own
	# that differs between kernels.  The QoS share tests measure the
	# scheduler over seconds of copying, which is the same code on every
	# kernel; the debug kernel runs the engine's cgroup
	# accounting and race tests instead.  Stock 6.12 runs the share
	# tests, stock 6.1 the throttled tenant's slot test (its cgroup
	# code differs).
	case $role in
	debug)
		export HCOMM_SELFTEST_EXCLUDE_VARIANT=ioctl
		export HCOMM_SELFTEST_SKIP="split_default split_max_rate split_min_rate_weights split_per_user throttled_cgroup_isolated" ;;
	stock61)
		export HCOMM_SELFTEST_EXCLUDE_VARIANT=ioctl
		export HCOMM_SELFTEST_SKIP="split_default split_max_rate split_min_rate_weights split_per_user" ;;
	esac
	# Each binary's bound (run_tests.sh dumps what a stuck one and its
	# children were doing, then kills them): the longest took 35 s under
	# KASAN; a hang fails that binary, not the whole VM at its timeout.
	{ HCOMM_TEST_TIMEOUT=${HCOMM_TEST_TIMEOUT:-600} "$selftests" 2>&1
	  echo $? > /tmp/selftests.rc; } | tee "$st_out"
	unset HCOMM_SELFTEST_EXCLUDE_VARIANT HCOMM_SELFTEST_SKIP
	st_rc=$(cat /tmp/selftests.rc)
	summary=$(grep -E '^selftests: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' "$st_out" | tail -n1)
	if [ -z "$summary" ]; then
		say "FAIL: no 'selftests: N passed, N failed, N skipped' line"
		p=$(grep -cE '^ok ' "$st_out"); f=$(grep -cE '^not ok ' "$st_out")
		f=$((f + 1))
	else
		set -- $summary
		p=$2; f=$4; s=$6
		if [ "$st_rc" != 0 ] && [ "$f" -eq 0 ]; then
			say "FAIL: run_tests.sh exited $st_rc"; f=1
		fi
	fi
fi
emit selftests $p $f $s "$t"

# ------------------------------------------------------------------ libvm
t=$(now); p=0; f=0; s=0
if [ "$loaded" != 1 ] || [ ! -c /dev/hcomm ]; then
	say "libvm not run: the module is not loaded"; f=1
elif [ ! -x "$repo/build/lib/vm/hcomm_vm_test" ]; then
	say "FAIL: build/lib/vm/hcomm_vm_test not built (make -C lib/tests/vm on the host)"; f=1
else
	# stock 6.12 runs every case; stock 6.1 and the debug kernel the cases
	# that drive the module differently (run.sh --module): the bootstrap
	# and launcher cases do the same on every kernel.
	lv_args=
	[ "$role" = stock61 ] && lv_args=--module
	# The debug kernel: one case for each way of driving the module that
	# the selftests do not (a communicator's data path with callbacks
	# from threads, several QPs on threads, FENCE ordering, the
	# registration cache, the collectives' put_signal rings of full
	# chunks, batches carried by XFER_BATCH, one of them stopped by a
	# failed descriptor), under KASAN and lockdep.
	[ "$role" = debug ] && lv_args="--quick putget-4 cb-thread-4 threads-qps4-2 fence-2 rcache-1 colltails-3 batch-2 batchgone-2"
	{ "$libvm" $lv_args 2>&1; echo $? > /tmp/libvm.rc; } | tee /tmp/libvm.out
	lv_rc=$(cat /tmp/libvm.rc)
	summary=$(grep -E '^libvm: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' /tmp/libvm.out | tail -n1)
	if [ -z "$summary" ]; then
		say "FAIL: no 'libvm: N passed, N failed, N skipped' line"
		p=$(grep -cE '^ok ' /tmp/libvm.out); f=$(grep -cE '^not ok ' /tmp/libvm.out)
		f=$((f + 1))
	else
		set -- $summary
		p=$2; f=$4; s=$6
		if [ "$lv_rc" != 0 ] && [ "$f" -eq 0 ]; then
			say "FAIL: lib/tests/vm/run.sh exited $lv_rc"; f=1
		fi
	fi
fi
emit libvm $p $f $s "$t"

# ------------------------------------------------------------------ pypto
t=$(now); p=0; f=0; s=0
pyvm=${HCOMM_PYPTO_VM:-$repo/build/pypto/pypto_vm_test}
if [ "$loaded" != 1 ] || [ ! -c /dev/hcomm ]; then
	say "pypto not run: the module is not loaded"; f=1
elif [ ! -x "$pyvm" ]; then
	say "FAIL: $pyvm not built (make -C pypto on the host)"; f=1
else
	py_args=
	[ "$role" = debug ] && py_args=--quick
	{ timeout 900 "$pyvm" $py_args 2>&1; echo $? > /tmp/pypto.rc; } | tee /tmp/pypto.out
	py_rc=$(cat /tmp/pypto.rc)
	summary=$(grep -E '^pypto-vm: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' /tmp/pypto.out | tail -n1)
	if [ -z "$summary" ]; then
		say "FAIL: no 'pypto-vm: N passed, N failed, N skipped' line (exit $py_rc)"
		p=$(grep -cE '^ok ' /tmp/pypto.out); f=$(grep -cE '^not ok ' /tmp/pypto.out)
		f=$((f + 1))
	else
		set -- $summary
		p=$2; f=$4; s=$6
		if [ "$py_rc" != 0 ] && [ "$f" -eq 0 ]; then
			say "FAIL: pypto_vm_test exited $py_rc"; f=1
		fi
	fi
fi
emit pypto $p $f $s "$t"

# ------------------------------------------------------------------ python
# Stock kernels: the Python packages against the module (pytest of
# python/tests/test_device.py; the others run on the host).
if [ "$role" != debug ]; then
	t=$(now); p=0; f=0; s=0
	if [ "$loaded" != 1 ] || [ ! -c /dev/hcomm ]; then
		say "python not run: the module is not loaded"; f=1
	else
		# qemu's TCG computes AVX2 gather addresses wrongly (numpy's
		# AVX2 kernels segfault at an address sign-extended from 32
		# bits): numpy keeps to AVX here (testbed.rst).
		npy_off=
		for fl in avx2:AVX2 fma:FMA3 avx512f:AVX512F; do
			grep -qw "${fl%%:*}" /proc/cpuinfo && npy_off="$npy_off ${fl#*:}"
		done
		export NPY_DISABLE_CPU_FEATURES="${npy_off# }"
		{ timeout 600 make -s -C "$repo/python" check \
		    PYTEST_ARGS=tests/test_device.py 2>&1
		  echo $? > /tmp/python.rc; } | tee /tmp/python.out
		pyt_rc=$(cat /tmp/python.rc)
		summary=$(grep -E '^[0-9]+ (passed|failed)' /tmp/python.out | tail -n1)
		p=$(echo "$summary" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
		f=$(echo "$summary" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
		s=$(echo "$summary" | grep -oE '[0-9]+ skipped' | grep -oE '[0-9]+')
		p=${p:-0} f=${f:-0} s=${s:-0}
		if [ -z "$summary" ] || { [ "$pyt_rc" != 0 ] && [ "$f" -eq 0 ]; }; then
			say "FAIL: pytest exited $pyt_rc${summary:+ ($summary)}"
			f=$((f + 1))
		fi
	fi
	emit python $p $f $s "$t"
fi

# ------------------------------------------------------------------ kunit
if [ "$role" = debug ]; then
	t=$(now); p=0; f=0; s=0
	before=$(ls $dbg/kunit 2>/dev/null)
	if [ ! -d $dbg/kunit ]; then
		say "FAIL: $dbg/kunit missing (kernel without CONFIG_KUNIT_DEBUGFS?)"; f=1
	elif [ ! -f "$kunit_ko" ]; then
		say "FAIL: $kunit_ko does not exist"; f=1
	elif ! insmod "$kunit_ko"; then
		say "FAIL: insmod $kunit_ko"; f=1
	else
		suites=""
		for d in $(ls $dbg/kunit); do
			case " $(echo $before) " in *" $d "*) continue ;; esac
			suites="$suites $d"
		done
		[ -n "$suites" ] || suites=$(cd $dbg/kunit && ls -d hcomm* 2>/dev/null)
		if [ -z "$suites" ]; then
			say "FAIL: hcomm_kunit.ko loaded but registered no suite"; f=1
		fi
		for su in $suites; do
			res=$dbg/kunit/$su/results
			echo "# kunit suite $su"
			cat "$res"
			# Test cases are the first level of indentation inside the
			# suite; deeper lines are parameters of one case.
			set -- $(awk '
				/^[ \t]*(not )?ok [0-9]+/ {
					match($0, /^[ \t]*/); ind = RLENGTH
					lines[NR] = $0; inds[NR] = ind
					if (ind > 0 && (min == 0 || ind < min)) min = ind
				}
				END {
					p = f = s = 0
					for (i in lines) {
						if (inds[i] != min) continue
						l = lines[i]
						if (l ~ /# *SKIP/) s++
						else if (l ~ /^[ \t]*not ok/) f++
						else p++
					}
					print p, f, s
				}' "$res")
			if [ "$1$2$3" = 000 ] && grep -qE '^[ \t]*not ok' "$res"; then
				f=$((f + 1))
			fi
			p=$((p + $1)); f=$((f + $2)); s=$((s + $3))
		done
		rmmod hcomm_kunit 2>/dev/null || say "note: rmmod hcomm_kunit failed"
	fi
	emit kunit $p $f $s "$t"
fi

# ------------------------------------------------------------------ unload
t=$(now); p=0; f=0
if [ "$loaded" = 1 ]; then
	stats=$dbg/hcomm/stats
	if [ -r $stats ]; then
		# One read: every exec from 9p costs a while under TCG.
		nz=0
		while read -r name value; do
			echo "stats: $name $value"
			case " contexts regions host_regions dmabuf_regions pinned_pages memlock_pages " in
			*" $name "*)
				if [ "$value" != 0 ]; then
					say "FAIL: stats gauge $name is $value with no context open"
					nz=$((nz + 1))
				fi ;;
			esac
		done < $stats
		f=$((f + nz))
	else
		say "note: no $stats"
	fi
	if ! rmmod hcomm; then
		say "FAIL: rmmod hcomm"; f=$((f + 1))
	elif [ -e /sys/module/hcomm ] || [ -e /dev/hcomm ]; then
		say "FAIL: hcomm still present after rmmod"; f=$((f + 1))
	fi
	[ $f -eq 0 ] && p=1
else
	f=1
fi
emit unload $p $f 0 "$t"

# ------------------------------------------------------------------ dkms
# Stock 6.12: the hcomm.ko that dkms built from make dkms_install's
# sources (scripts/test-install.sh, on the host) loads, serves the uapi
# selftest and unloads.
if [ "$role" = stock612 ]; then
	t=$(now); p=0; f=0
	dko=${HCOMM_DKMS_KO:-$repo/build/install-test/dkms/hcomm.ko}
	if [ ! -f "$dko" ]; then
		say "FAIL: $dko missing (scripts/test-install.sh builds it)"; f=1
	elif [ -e /sys/module/hcomm ]; then
		say "FAIL: hcomm still loaded"; f=1
	elif ! insmod "$dko"; then
		say "FAIL: insmod $dko"; f=1
	else
		i=0
		while [ ! -c /dev/hcomm ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
		if [ ! -c /dev/hcomm ]; then
			say "FAIL: no /dev/hcomm from the dkms module"; f=1
		elif ! "$repo/build/selftests/hcomm_uapi_test" > /tmp/dkms.out 2>&1; then
			sed 's/^/dkms: /' /tmp/dkms.out | tail -n 20
			say "FAIL: hcomm_uapi_test against the dkms module"; f=1
		else
			say "dkms module: $(grep -E '^# Totals' /tmp/dkms.out)"
		fi
		rmmod hcomm || { say "FAIL: rmmod of the dkms module"; f=$((f + 1)); }
	fi
	[ $f -eq 0 ] && p=1
	emit dkms $p $f 0 "$t"
fi

# ------------------------------------------------------------------ compat61
# Count the top-level TAP lines of one selftest binary's output file.
tap_count() { # file -> "passed failed skipped"
	awk '/^ok [0-9]+ .*# SKIP/ { s++; next } /^ok [0-9]+/ { p++ }
	     /^not ok [0-9]+/ { f++ } END { print p + 0, f + 0, s + 0 }' "$1"
}
if [ "$role" = debug ]; then
	t=$(now); p=0; f=0; s=0
	c61=${HCOMM_KO_COMPAT61:-}
	stdir=$(dirname "$selftests")
	if [ -z "$c61" ] || [ ! -f "$c61" ]; then
		say "FAIL: no compat61 module (HCOMM_KO_COMPAT61=$c61)"; f=1
	elif [ -e /sys/module/hcomm ]; then
		say "FAIL: compat61 not run: hcomm still loaded"; f=1
	elif ! insmod "$c61"; then
		say "FAIL: insmod $c61"; f=1
	else
		for run in "hcomm_race_test" "hcomm_xfer_test -f xuring"; do
			set -- $run
			out=/tmp/compat61-$1.out
			timeout 1200 "$stdir/$1" ${2:-} ${3:-} > "$out" 2>&1
			rc=$?
			sed 's/^/# compat61: /' "$out"
			set -- $(tap_count "$out")
			p=$((p + $1)); f=$((f + $2)); s=$((s + $3))
			[ "$1$2" = 00 ] && f=$((f + 1))
			[ $rc -ne 0 ] && [ "$2" -eq 0 ] && f=$((f + 1))
		done
		grep -E '^(contexts|regions|pinned_pages|waits_pending|xfers_active|workers) ' \
			$dbg/hcomm/stats | while read -r name value; do
			[ "$value" = 0 ] || echo "gauge $name $value"
		done > /tmp/compat61.gauges
		if [ -s /tmp/compat61.gauges ]; then
			say "FAIL: compat61 gauges not 0: $(cat /tmp/compat61.gauges)"
			f=$((f + 1))
		fi
		rmmod hcomm || { say "FAIL: rmmod compat61 hcomm"; f=$((f + 1)); }
	fi
	emit compat61 $p $f $s "$t"
fi

# ------------------------------------------------------------------ kmemleak
if [ "$role" = debug ]; then
	t=$(now); p=0; f=0
	km=$dbg/kmemleak
	if [ ! -w $km ]; then
		say "FAIL: $km missing"; f=1
	else
		# Objects younger than ~5 s are never reported: let them age.
		sleep 6
		echo scan > $km; sleep 2; echo scan > $km
		leaks=$(cat $km)
		if [ -n "$leaks" ]; then
			say "FAIL: kmemleak reports:"
			printf '%s\n' "$leaks" | head -n 200
			f=1
		else
			p=1
		fi
	fi
	emit kmemleak $p $f 0 "$t"
fi

say "done, $failures failure(s)"
[ $failures -eq 0 ]
