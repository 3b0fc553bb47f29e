#!/bin/bash
# SPDX-License-Identifier: MIT
#
# libhcomm under Open MPI's mpirun across two hosts: run in both VMs of the
# network test bed, as root:
#
#   scripts/netvm.sh run --n 2 [--env HCOMM_KO=<hcomm.ko>] \
#           -- bash lib/tests/vm/mpi.sh [CASE...]
#
# vm1 starts its own sshd (a host key, a config and an authorized key made
# for this run; nothing of the host's /etc/ssh is used) on 10.77.0.1:2222.
# vm2 runs mpirun with --mca plm_rsh_agent "ssh -F <its own config>", so
# Open MPI starts its orted on vm1 over ssh and the ranks on both VMs;
# oob_tcp_if_include and btl_tcp_if_include keep Open MPI on 10.77.0.0/24.
# Four mpiruns of build/lib/vm/hcomm_vm_test (rank 0 on vm2, mpirun's
# host, where HCOMM_ROOT_ADDR points): basic --expect ompi on 2 ranks;
# putget and signal on 2 ranks with HCOMM_TRANSPORT=rdma, then =tcp; on 4
# ranks (2 per VM) basic, route (same-host pairs through the kernel
# alone), putget, signal, and basic with a rank table naming both hosts.
# The 4-rank cases need hcomm.ko in both VMs ($HCOMM_KO, loaded here) and
# are skipped without it.  CASE...: only these (names as in the output).
#
# HCOMM_MPI_TIMEOUT: seconds per mpirun (150), HCOMM_VMTEST_ALARM: per
# hcomm_vm_test (120), HCOMM_LIBVM_DIR: the test programs (build/lib/vm).
#
# HCOMM_MPI_COLL_PERF="ARGS" adds two cases, coll-perf-rdma and
# coll-perf-tcp: build/bench/hcomm_coll_perf ARGS on 2 ranks (one per VM)
# with HCOMM_TRANSPORT=rdma, then tcp, beside Open MPI's collectives over
# its tcp btl in the same processes (HCOMM_MPI_COLL_TIMEOUT seconds each,
# 900); ok when every result was right.  Their tables are kept as
# coll-perf-rdma.log and coll-perf-tcp.log in the log directory.
# HCOMM_MPI_COLL_XPS: the transports (default "rdma tcp");
# HCOMM_MPI_COLL_ENV: "VAR=value ..." for every rank of them.
# HCOMM_MPI_COLL_MPI_RDMA, HCOMM_MPI_COLL_MPI_TCP: more mpirun arguments
# for that transport's run (e.g. Open MPI's UCX over rxe0 for rdma:
# "--mca pml ucx --mca pml_ucx_devices any -x UCX_NET_DEVICES=rxe0:1").
#
# Output: TAP from each VM, then "mpi: N passed, N failed, N skipped"
# (vm2: the mpirun cases; vm1: its sshd checks; a harness adds the lines
# up like those of net.sh).  Exit status 1 when a test failed in this VM.
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
dir=${HCOMM_LIBVM_DIR:-$repo/build/lib/vm}
prog=$dir/hcomm_vm_test
case_timeout=${HCOMM_MPI_TIMEOUT:-150}
export HCOMM_VMTEST_ALARM=${HCOMM_VMTEST_ALARM:-120}

want=
for a in "$@"; do
	case $a in
	-h|--help) sed -n '3,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "mpi.sh: unknown option $a" >&2; exit 2 ;;
	*) want="$want $a" ;;
	esac
done
. "$NETVM_RUN/lib.sh" || exit 2

port=2222                       # vm1's sshd
subnet=10.77.0.0/24             # eth0 of the test bed: Open MPI stays there
share=$NETVM_RUN/mpi            # both VMs: public keys, known_hosts, counts
out=$NETVM_RUN/out              # kept in the log directory

now() { date +%s.%N; }
since() { echo "$(now) $1" | awk '{printf "%.1f", $1 - $2}'; }
t_all=$(now)
passed=0 failed=0 skipped=0 i=0
ok() { i=$((i + 1)); passed=$((passed + 1)); echo "ok $i $*"; }
notok() { i=$((i + 1)); failed=$((failed + 1)); echo "not ok $i $*"; }
skip() { i=$((i + 1)); skipped=$((skipped + 1)); echo "ok $i $1 # SKIP $2"; }
summary() {
	echo "# mpi: vm$VM_ID: $(since "$t_all") s in all"
	echo "mpi: $passed passed, $failed failed, $skipped skipped"
	[ "$failed" -eq 0 ]
	exit
}

if [ "$NVM" != 2 ]; then
	echo "1..1"
	notok "mpi-setup # needs 2 VMs (netvm.sh run --n 2), not $NVM"
	summary
fi
# Own names for the two kernels (their UTS names, not the host's): Open
# MPI and the output below tell the VMs apart by them.
hostname "mpi-vm$VM_ID"
priv=$(mktemp -d /tmp/hcomm-mpi.XXXXXX) || exit 1   # this VM's tmpfs
chmod 700 "$priv"
mkdir -p "$share" "$out"
if [ -n "${HCOMM_KO:-}" ] && [ ! -e /dev/hcomm ]; then
	insmod "$HCOMM_KO" && chmod 0666 /dev/hcomm ||
		echo "# warning: insmod $HCOMM_KO failed"
fi
[ -c /dev/hcomm ] && : > "$share/hcomm.vm$VM_ID"

# ------------------------------------------------------------------ vm1
if [ "$VM_ID" = 1 ]; then
	echo "TAP version 13"
	echo "1..3"
	log=$out/mpi-sshd-vm1.log
	sshd_pid=
	trap '[ -n "$sshd_pid" ] && kill "$sshd_pid" 2>/dev/null; rm -rf "$priv"' EXIT
	ssh-keygen -q -t ed25519 -N '' -C mpi-vm1 -f "$priv/host_key" ||
		echo "# ssh-keygen of the host key failed"
	# known_hosts for vm2: this run's host key, nothing else
	printf '[%s]:%s %s\n' "$(ip_of 1)" "$port" \
		"$(cut -d' ' -f1,2 "$priv/host_key.pub")" > "$share/.known_hosts" &&
		mv "$share/.known_hosts" "$share/known_hosts"
	barrier mpi-keys 120 || { notok "sshd-up # vm2 never came"; summary; }
	cp "$share/client.pub" "$priv/authorized_keys"
	# privilege separation directory (the guest's own /run)
	mkdir -p /run/sshd && chmod 755 /run/sshd
	mkdir -p "$priv/home"
	cat > "$priv/sshd_config" <<-EOF
	# this run's sshd (lib/tests/vm/mpi.sh): root by key only, no PAM
	Port $port
	ListenAddress $(ip_of 1)
	PidFile $priv/sshd.pid
	AuthorizedKeysFile $priv/authorized_keys
	AllowUsers root
	PermitRootLogin prohibit-password
	PubkeyAuthentication yes
	PasswordAuthentication no
	KbdInteractiveAuthentication no
	HostbasedAuthentication no
	UsePAM no
	StrictModes no
	UseDNS no
	PrintMotd no
	PrintLastLog no
	PermitTTY no
	X11Forwarding no
	AllowAgentForwarding no
	AllowTcpForwarding no
	PermitTunnel no
	# not the host's /root: its .bashrc (pyenv) is slow under TCG and
	# complains about the read-only /root in every session
	SetEnv HOME=$priv/home
	MaxStartups 20:30:60
	LogLevel VERBOSE
	EOF
	/usr/sbin/sshd -D -e -f "$priv/sshd_config" -h "$priv/host_key" \
		>> "$log" 2>&1 < /dev/null &
	sshd_pid=$!
	up=0
	for (( t = 0; t < 150; t++ )); do
		ss -ltnH "sport = :$port" 2>/dev/null | grep -q . && { up=1; break; }
		kill -0 "$sshd_pid" 2>/dev/null || break
		sleep 0.2
	done
	if [ "$up" = 1 ]; then
		echo up > "$share/sshd"
		ok "sshd-up # $(ip_of 1):$port, pid $sshd_pid, at $(since "$t_all")s"
	else
		echo down > "$share/sshd"
		notok "sshd-up # sshd did not listen on :$port within 30 s"
		sed 's/^/# sshd: /' "$log"
	fi
	barrier mpi-sshd 120 || echo "# warning: vm2 did not reach mpi-sshd"
	# vm2 runs its cases; wait for it (bounded: the cases' own timeouts)
	wait_s=1500
	[ -n "${HCOMM_MPI_COLL_PERF:-}" ] &&
		wait_s=$((wait_s + 2 * ${HCOMM_MPI_COLL_TIMEOUT:-900}))
	barrier mpi-done "$wait_s" || echo "# warning: vm2 did not finish"
	sleep 1         # the last session's close reaches the log
	made=$(cat "$share/ssh-count" 2>/dev/null || echo '?')
	acc=$(grep -c 'Accepted publickey for root' "$log" 2>/dev/null)
	if [ "$up" = 1 ] && [ "$made" = "$acc" ] && [ "$acc" -gt 0 ]; then
		ok "sshd-sessions # $acc accepted, vm2 opened $made"
	else
		notok "sshd-sessions # $acc accepted, vm2 opened $made"
		grep -avE '^(Accepted|Received disconnect|Disconnected from|Connection from|Close session|Starting session|User child|Transferred)' \
			"$log" | head -n 20 | sed 's/^/# sshd: /'
	fi
	# Every orted and rank must be gone once mpirun returned on vm2.
	left=$(pgrep -a -x 'orted|hcomm_vm_test' 2>/dev/null || true)
	if [ -z "$left" ]; then
		ok "no-leftovers # no orted or hcomm_vm_test left on vm1"
	else
		notok "no-leftovers # still running on vm1:"
		printf '%s\n' "$left" | sed 's/^/#   /'
	fi
	kill "$sshd_pid" 2>/dev/null
	wait "$sshd_pid" 2>/dev/null
	sshd_pid=
	summary
fi

# ------------------------------------------------------------------ vm2
# Each run is one mpirun from here over both VMs (mpirun's host first:
# Open MPI 4.1 puts rank 0 on mpirun's own host whatever the order of
# --host, so HCOMM_ROOT_ADDR names vm2).  The first run starts
# hcomm_vm_test itself; in the others every rank runs a small shell loop:
# it prints "placement RANK HOST", then runs hcomm_vm_test once per case
# (each with its own rendezvous port) and prints "result CASE RANK
# STATUS", so that one mpirun serves several cases (a 2-host mpirun costs
# 8-15 s here, mostly Open MPI's start-up under TCG).
#
# run | ranks per VM | -x for every rank | cases: NAME=hcomm_vm_test args,
# separated by ';' ("-": the run is one case, basic --expect ompi;
# @ROUTE: route --expect measured, then every same-host pair must go
# through the kernel alone and no other pair through it; @TABLE: with
# HCOMM_RANK_TABLE naming both hosts instead of HCOMM_ROOT_ADDR; VAR=value
# words first: that case's own environment).  HCOMM_PROBE=off but in the
# route case: the 4-rank probe at init took 5-10 s of each case.
RUNS="
ompi-basic-2|1|HCOMM_VMTEST_TRANSPORT=rdma+tcp|-
rdma-2|1|HCOMM_TRANSPORT=rdma|rdma-putget-2=putget --max 1M;rdma-signal-2=signal
tcp-2|1|HCOMM_TRANSPORT=tcp|tcp-putget-2=putget --max 1M;tcp-signal-2=signal
mix-4|2|HCOMM_VMTEST_TRANSPORT=kernel+rdma+tcp|ompi-basic-4=HCOMM_PROBE=off basic --expect ompi;ompi-route-4=@ROUTE;ompi-putget-4=HCOMM_PROBE=off putget --max 256K;ompi-signal-4=HCOMM_PROBE=off signal;table-hosts-4=@TABLE HCOMM_PROBE=off basic --expect table
"
# the names of a run's cases
cases_of() { # run-line
	local name ppn env cases c
	IFS='|' read -r name ppn env cases <<< "$1"
	if [ "$cases" = - ]; then echo "$name"; return; fi
	IFS=';' read -ra c <<< "$cases"
	printf '%s\n' "${c[@]%%=*}"
}
selected() {
	[ -z "$want" ] && return 0
	case " $want " in *" $1 "*) return 0 ;; esac
	return 1
}
collperf=${HCOMM_MPI_COLL_PERF:-}
n=1     # ssh-direct
collxps=${HCOMM_MPI_COLL_XPS:-rdma tcp}
# shellcheck disable=SC2086
[ -n "$collperf" ] && set -- $collxps && n=$((n + $#))
while read -r line; do
	[ -n "$line" ] || continue
	for c in $(cases_of "$line"); do selected "$c" && n=$((n + 1)); done
done <<< "$RUNS"
echo "TAP version 13"
echo "1..$n"
trap 'rm -rf "$priv"' EXIT
ssh_count=0
count_ssh() { ssh_count=$((ssh_count + 1)); echo "$ssh_count" > "$share/ssh-count"; }
echo 0 > "$share/ssh-count"

ssh-keygen -q -t ed25519 -N '' -C mpi-vm2 -f "$priv/id" ||
	echo "# ssh-keygen of the client key failed"
cp "$priv/id.pub" "$share/.client.pub" && mv "$share/.client.pub" "$share/client.pub"
barrier mpi-keys 120 || { notok "ssh-direct # vm1 never came"; summary; }
cp "$share/known_hosts" "$priv/known_hosts"
# -F: only this file, neither /etc/ssh/ssh_config nor ~/.ssh/config.
# curve25519-sha256: OpenSSH 9's default sntrup761x25519 key exchange
# took 5-8 s per connection under TCG, this one 2-3 s.
cat > "$priv/ssh_config" <<SSHCONF
Host *
	Port $port
	User root
	IdentityFile $priv/id
	IdentitiesOnly yes
	UserKnownHostsFile $priv/known_hosts
	GlobalKnownHostsFile /dev/null
	StrictHostKeyChecking yes
	CheckHostIP no
	BatchMode yes
	KexAlgorithms curve25519-sha256
	ConnectTimeout 30
	ServerAliveInterval 15
	ServerAliveCountMax 8
	ControlMaster no
	ControlPath none
	ForwardAgent no
	ForwardX11 no
	LogLevel ERROR
SSHCONF
# The agent's first word must exist on every host: the orted on vm1
# checks plm_rsh_agent too (a script in vm2's private /tmp made it fail
# with "plm_rsh_agent ... a path that could not be found").
agent="ssh -F $priv/ssh_config"
barrier mpi-sshd 120 || echo "# warning: vm1 did not reach mpi-sshd"
echo "# $(since "$t_all")s: vm1's sshd is up"
sshd_up=0
[ "$(cat "$share/sshd" 2>/dev/null)" = up ] && sshd_up=1
have_ko=0
[ -e "$share/hcomm.vm1" ] && [ -e "$share/hcomm.vm2" ] && have_ko=1

# The agent by hand first: a failure here explains every mpirun failure.
t=$(now)
count_ssh
# shellcheck disable=SC2086 # the agent is a command line
r=$(timeout -k 5 60 $agent "$(ip_of 1)" uname -n 2>&1 < /dev/null)
rc=$?
if [ "$rc" = 0 ] && [ "$r" = mpi-vm1 ]; then
	ok "ssh-direct # $agent $(ip_of 1) uname -n: $r ($(since "$t")s)"
else
	notok "ssh-direct # exit $rc: $r"
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The rank table of table-hosts-4: both hosts, each rank's address, in the
# placement Open MPI makes (ranks 0, 1 on mpirun's host).  In the run
# directory: the ranks on vm1 read the same file.
table=$share/ranks.txt
{
	echo "world_size 4"
	echo "rank 0 host mpi-vm2 addr $(ip_of 2)"
	echo "rank 1 host mpi-vm2 addr $(ip_of 2)"
	echo "rank 2 host mpi-vm1 addr $(ip_of 1)"
	echo "rank 3 host mpi-vm1 addr $(ip_of 1)"
} > "$table"

# Each rank: placement, then the cases "name|root address|args" in turn.
# shellcheck disable=SC2016 # expanded by each rank's bash
rank_loop='prog=$1 table=$2; shift 2
r=$OMPI_COMM_WORLD_RANK
echo "placement $r $(uname -n)"
for spec; do
	IFS="|" read -r name addr args <<< "$spec"
	set -- $args
	vars=("HCOMM_ROOT_ADDR=$addr")
	while [ $# -gt 0 ]; do
		case $1 in
		@ROUTE) shift; set -- route --expect measured "$@" ;;
		@TABLE) shift; vars=("HCOMM_RANK_TABLE=$table") ;;
		*=*) vars+=("$1"); shift ;;
		*) break ;;
		esac
	done
	t0=$(date +%s%N)
	env "${vars[@]}" "$prog" "$@"
	rc=$?
	echo "result $name $r $rc $((($(date +%s%N) - t0) / 1000000))ms"
done
exit 0'

# check_route OUTPUT: the placement lines and the decision table lines
# "rank A -> B: LINKS; RANGES (why)": every pair on one host must use the
# kernel alone, every pair across hosts must not use it.
check_route() {
	awk '
	/placement [0-9]+ / {
		for (f = 1; f < NF; f++)
			if ($f == "placement")
				host[$(f + 1)] = $(f + 2)
		next
	}
	/rank [0-9]+ -> [0-9]+:/ {
		match($0, /rank [0-9]+ -> [0-9]+:/)
		line = substr($0, RSTART + 5)
		split(line, w, /[ :]+/)
		p = w[1] " " w[3]
		rng = line
		sub(/^[^;]*;/, "", rng)
		sub(/\([^()]*\)$/, "", rng)
		pairs[p] = rng
		links[p] = line
		next
	}
	END {
		bad = 0; same = 0; cross = 0
		for (p in pairs) {
			split(p, ab, " ")
			if (!(ab[1] in host) || !(ab[2] in host)) {
				print "# no placement for pair " p; bad++; continue
			}
			r = pairs[p]
			if (host[ab[1]] == host[ab[2]]) {
				same++
				if (r !~ /kernel/ || r ~ /rdma|tcp/) {
					print "# same host, not the kernel alone: " links[p]
					bad++
				}
			} else {
				cross++
				if (r ~ /kernel/ || links[p] !~ /kernel -/) {
					print "# across hosts, kernel usable: " links[p]
					bad++
				}
			}
		}
		if (same != 4 || cross != 8) {
			printf "# %d same-host and %d cross-host pairs in the " \
			       "tables, expected 4 and 8\n", same, cross
			bad++
		}
		if (!bad)
			printf "# route: %d same-host pairs through the kernel " \
			       "alone, %d cross-host pairs not\n", same, cross
		exit bad ? 1 : 0
	}' "$1"
}

# check_placement OUTPUT PPN: PPN ranks on each VM.
check_placement() {
	local a b
	a=$(grep -c 'placement [0-9]* mpi-vm1$' "$1")
	b=$(grep -c 'placement [0-9]* mpi-vm2$' "$1")
	echo "# placement: $b ranks on mpi-vm2, $a on mpi-vm1"
	[ "$a" = "$2" ] && [ "$b" = "$2" ]
}

# results OUTPUT CASE...: per case one line "CASE NRES NBAD NSKIP
# RANK=STATUS (MS), ..." from the "result" lines (one awk: every process
# costs here, under TCG over 9p)
results() {
	local f=$1
	shift
	awk -v cases="$*" '
	$1 == "result" { n[$2]++; bad[$2] += $4 != 0; sk[$2] += $4 == 4
		res[$2, $3] = $3 "=" $4 " (" $5 ")" }
	END {
		k = split(cases, c, " ")
		for (i = 1; i <= k; i++) {
			s = ""
			for (r = 0; r < 64; r++)
				if ((c[i], r) in res)
					s = s (s == "" ? "" : ", ") res[c[i], r]
			printf "%s %d %d %d %s\n", c[i], n[c[i]], bad[c[i]], sk[c[i]], s == "" ? "none" : s
		}
	}' "$f"
}

mpi_common=(mpirun --allow-run-as-root
	--mca plm_rsh_agent "$agent"
	--mca oob_tcp_if_include "$subnet"
	--mca btl_tcp_if_include "$subnet"
	--bind-to none)
k=0
while read -r line; do
	[ -n "$line" ] || continue
	IFS='|' read -r run ppn env cases <<< "$line"
	k=$((k + 1))
	np=$((2 * ppn))
	mine=()
	for c in $(cases_of "$line"); do selected "$c" && mine+=("$c"); done
	[ ${#mine[@]} -gt 0 ] || continue
	why=
	[ "$sshd_up" = 1 ] || why="vm1's sshd is not up"
	[ "$ppn" -gt 1 ] && [ "$have_ko" = 0 ] &&
		why="hcomm.ko is not loaded in both VMs (--env HCOMM_KO=...)"
	if [ -n "$why" ]; then
		for c in "${mine[@]}"; do skip "$c" "$why"; done
		continue
	fi
	xs=(-x "HCOMM_VMTEST_ALARM=$HCOMM_VMTEST_ALARM")
	for e in $env; do xs+=(-x "$e"); done
	hosts=$(ip_of 2):$ppn,$(ip_of 1):$ppn
	if [ "$cases" = - ]; then
		# the plain form: mpirun starts hcomm_vm_test itself
		xs+=(-x "HCOMM_ROOT_ADDR=$(ip_of 2):$((25000 + 10 * k))")
		cmd=("$prog" basic --expect ompi)
		echo "# run $run: mpirun -np $np --host $hosts ${xs[*]} ${cmd[*]}"
	else
		specs=() j=0
		IFS=';' read -ra cs <<< "$cases"
		for c in "${cs[@]}"; do
			j=$((j + 1))
			selected "${c%%=*}" || continue
			specs+=("${c%%=*}|$(ip_of 2):$((25000 + 10 * k + j))|${c#*=}")
		done
		cmd=(bash -c "$rank_loop" "$prog" "$prog" "$table" "${specs[@]}")
		echo "# run $run: mpirun -np $np --host $hosts ${xs[*]} bash -c LOOP, cases:"
		printf '#   %s\n' "${specs[@]}"
	fi
	t=$(now)
	count_ssh
	timeout -k 10 "$case_timeout" "${mpi_common[@]}" -np "$np" --host "$hosts" \
		"${xs[@]}" "${cmd[@]}" > "$priv/out" 2>&1 < /dev/null
	rc=$?
	secs=$(since "$t")
	sed 's/^/# /' "$priv/out"
	cp "$priv/out" "$out/mpi-$run.log"
	echo "# run $run: mpirun exit $rc after ${secs}s"
	if [ "$cases" = - ]; then
		case $rc in
		0) ok "$run # ${secs}s" ;;
		124|137) notok "$run # timed out after ${case_timeout}s" ;;
		*) notok "$run # mpirun exit $rc (${secs}s)" ;;
		esac
		continue
	fi
	placed=1
	check_placement "$priv/out" "$ppn" || placed=0
	# a file, not <(...): the guest has no /dev/fd
	results "$priv/out" "${mine[@]}" > "$priv/res"
	while read -r c nres nbad nskip res; do
		note="rank=status $res"
		if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
			notok "$c # mpirun timed out after ${case_timeout}s; $note"
		elif [ "$placed" = 0 ]; then
			notok "$c # wrong placement; $note"
		elif [ "$nres" != "$np" ]; then
			notok "$c # $nres of $np ranks reported (mpirun exit $rc); $note"
		elif [ "$nskip" = "$np" ]; then
			skip "$c" "$note"
		elif [ "$nbad" != 0 ]; then
			notok "$c # $note"
		elif [ "$c" = ompi-route-4 ] && ! check_route "$priv/out"; then
			notok "$c # the decision tables do not match the placement"
		else
			ok "$c # $note"
		fi
	done < "$priv/res"
done <<< "$RUNS"

# The collectives' benchmark across the two VMs, one rank on each.
bench=$repo/build/bench/hcomm_coll_perf
j=0
collenv=()
for e in ${HCOMM_MPI_COLL_ENV:-}; do collenv+=(-x "$e"); done
for xp in $collxps; do
	[ -n "$collperf" ] || break
	j=$((j + 1))
	c=coll-perf-$xp
	if [ "$sshd_up" != 1 ] || [ ! -x "$bench" ]; then
		skip "$c" "no sshd on vm1 or no $bench"
		continue
	fi
	hosts=$(ip_of 2):1,$(ip_of 1):1
	t=$(now)
	count_ssh
	case $xp in
	rdma) mpix=${HCOMM_MPI_COLL_MPI_RDMA:-} ;;
	tcp) mpix=${HCOMM_MPI_COLL_MPI_TCP:-} ;;
	*) mpix= ;;
	esac
	echo "# $c: mpirun -np 2 --host $hosts $mpix -x HCOMM_TRANSPORT=$xp ${collenv[*]} $bench $collperf"
	# shellcheck disable=SC2086 # ARGS are words
	timeout -k 10 "${HCOMM_MPI_COLL_TIMEOUT:-900}" "${mpi_common[@]}" $mpix \
		-np 2 --host "$hosts" -x "HCOMM_TRANSPORT=$xp" "${collenv[@]}" \
		-x "HCOMM_ROOT_ADDR=$(ip_of 2):$((26000 + j))" \
		"$bench" $collperf > "$priv/out" 2>&1 < /dev/null
	rc=$?
	sed 's/^/# /' "$priv/out"
	cp "$priv/out" "$out/$c.log"
	case $rc in
	0) ok "$c # all results right ($(since "$t")s)" ;;
	124|137) notok "$c # timed out after ${HCOMM_MPI_COLL_TIMEOUT:-900}s" ;;
	*) notok "$c # exit $rc ($(since "$t")s)" ;;
	esac
done

barrier mpi-done 120 || echo "# warning: vm1 did not reach mpi-done"
summary
