# SPDX-License-Identifier: MIT
# TAP for the shell tests (sourced; bash): ok <0|1> <description> [diag],
# skip <description> <reason> (counted as passed), finish: the plan and
# "$TAP_NAME: N passed, N failed", then exit (status 0 only with no failure).
pass=0 fail=0 n=0
ok() {	# ok <0|1 = passed?> <description> [diagnostics]
	n=$((n + 1))
	if [ "$1" = 1 ]; then
		pass=$((pass + 1)); echo "ok $n - $2"
	else
		fail=$((fail + 1)); echo "not ok $n - $2"
		[ -n "${3:-}" ] && printf '%s\n' "$3" | sed 's/^/#   /'
	fi
}
skip() { n=$((n + 1)); pass=$((pass + 1)); echo "ok $n - $1 # SKIP $2"; }
finish() {
	echo "1..$n"
	echo "${TAP_NAME:?set TAP_NAME before finish}: $pass passed, $fail failed"
	[ "$fail" = 0 ]
	exit
}
