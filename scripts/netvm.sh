#!/bin/bash
# Boot N qemu (TCG) VMs on a private L2 network and run one command in each:
# real TCP and soft-RoCE (rdma_rxe) between separate kernels on this machine.
#
#   scripts/netvm.sh run [--n N] [--nics K] [--kernel <vmlinuz>]
#                        [--kver auto|none|<version>] [--mem MiB] [--smp N]
#                        [--cpu MODEL]
#                        [--mtu BYTES] [--timeout s] [--run DIR]
#                        [--env VAR=value]... [--prenetem]
#                        [--host-script FILE] [--log-dir DIR] [--quiet]
#                        -- <command> [args...]
#   scripts/netvm.sh link RUN VM NIC on|off   qemu set_link (guest: carrier loss)
#   scripts/netvm.sh tap  RUN VM NIC up|down  host-side tap (guest: nothing)
#   scripts/netvm.sh ns   RUN CMD...          CMD inside the run's private netns
#   scripts/netvm.sh kill RUN                 kill the run's processes by PID
#   scripts/netvm.sh pause RUN MS [TIMES]     stop every VM MS ms, TIMES times
#
# run: an `unshare -n` holder process keeps a private network namespace on the
# host with one bridge brJ per NIC index J and one tap device tapI_J per VM I
# and NIC J; qemu runs inside that namespace with -nodefaults, so a guest's
# only NICs are ethJ = 10.(77+J).0.I/24 on brJ. Nothing touches the host's
# own network. Defaults: --n 2, --nics 1, --kernel the newest
# /boot/vmlinuz-6.12.*, --kver auto (modules version from the file name;
# none: the 9p chain is built in), --mem 1024, --smp 1, --cpu qemu64,-cx16 (or
# NETVM_CPU: qemu's -cpu; NETVM_ACCEL: its -accel, tcg), --mtu 1500,
# --timeout 900 (for the whole run), --run /var/tmp/hcomm-net/run.<pid>
# (shared read-write with every guest at the same path: not under /tmp,
# which is private in the guests), --log-dir build/logs/net-<timestamp>.
#
# Guest: the host root read-only over 9p (as scripts/vm-run.sh), /tmp and
# /run its own tmpfs. Before the command: lo and every ethJ up with its
# address, rxeJ on ethJ (rdma_rxe; NETVM_RXE=0 and a warning when the kernel
# has none), with --prenetem a `netem loss 0%` root qdisc on each ethJ. The
# command runs as root with cwd = the repo, stdin /dev/null, output on the
# console, env VM_ID (1..N), NVM, NETVM_NICS, NETVM_RXE, NETVM_RUN, HCOMM_*
# and --env. `. "$NETVM_RUN/lib.sh"` (bash) gives barrier NAME [timeout_s],
# ip_of VM [NIC], now, hostctl link|tap VM NIC on|off|up|down and hostctl
# pause MS [TIMES] (every VM's qemu stopped; served on the host). Files a
# guest writes under $NETVM_RUN/out/ are kept in the log dir with the
# consoles. --host-script runs on the host meanwhile, with RUN,
# N, NICS and NETVM (this script) exported; it is killed when the VMs are done.
#
# Exit status: 0 only when every VM's command exited 0 (and a host script
# that ended by itself exited 0), else the first VM's non-zero status. Per
# VM ("netvm: vmI rc=R (S s)"): the command's status; 124 on timeout; 125
# when the VM never reported one (panic, init failure, or stopped because
# another VM died: the others are then stopped at once); 126 when its
# console shows a kernel problem. 130 on Ctrl-C, 143 on SIGTERM. Every qemu
# and the namespace holder are killed by recorded PID on every exit path.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
self="$here/$(basename "${BASH_SOURCE[0]}")"
. "$here/lib.sh"

usage() { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
say() { echo "netvm: $*" >&2; }

# ------------------------------------------------------------ processes
# Every process a run starts is recorded in $RUN/pid.<name> as "PID START"
# (START: field 22 of /proc/PID/stat), so that a kill never hits a PID the
# system has reused for something else.
proc_start() { # pid -> start time in clock ticks since boot
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	# shellcheck disable=SC2086 # split the fields
	set -- $s
	echo "${20}"
}

record_pid() { # run name pid
	local st
	st=$(proc_start "$3") || st=0
	echo "$3 $st" > "$1/pid.$2"
}

recorded_pid() { # run name -> pid, only when that process is still ours
	local pid st
	read -r pid st 2>/dev/null < "$1/pid.$2" || return 1
	[ "$(proc_start "$pid" 2>/dev/null)" = "$st" ] || return 1
	echo "$pid"
}

# TERM the named processes of a run, KILL those still there after 5 s.
stop_recorded() { # run name...
	local run=$1 name pid pids=() t alive
	shift
	for name; do
		pid=$(recorded_pid "$run" "$name") || continue
		kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
	done
	for (( t = 0; t < 50; t++ )); do
		alive=0
		for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
		[ "$alive" = 1 ] || return 0
		sleep 0.1
	done
	for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
}

stop_host_script() { # run: TERM its process group, KILL it after 5 s
	local pid t
	pid=$(recorded_pid "$1" host) || return 0
	kill -TERM -- "-$pid" 2>/dev/null || true
	for (( t = 0; t < 50; t++ )); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL -- "-$pid" 2>/dev/null || true
}

# ------------------------------------------------------------ host-side verbs
in_ns() { # run cmd...
	local run=$1 holder
	shift
	holder=$(recorded_pid "$run" holder) || die "no live namespace holder for run $run"
	nsenter -t "$holder" -n -- "$@"
}

check_vm_nic() { # run vm nic
	local n nics
	[ -f "$1/conf" ] || die "$1 is not a netvm run directory"
	read -r n nics < "$1/conf"
	[[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] && [ "$2" -le "$n" ] ||
		die "VM must be 1..$n, not '$2'"
	[[ $3 =~ ^[0-9]+$ ]] && [ "$3" -lt "$nics" ] ||
		die "NIC must be 0..$((nics - 1)), not '$3'"
}

# One QMP command on a VM's monitor socket; prints qemu's error on failure.
qmp() { # socket json
	perl -MIO::Socket::UNIX -MIO::Select -e '
		my ($path, $req) = @ARGV;
		my $s = IO::Socket::UNIX->new(Peer => $path)
			or die "cannot connect to $path: $!\n";
		my $sel = IO::Select->new($s);
		my $buf = "";
		my $end = time + 20;
		sub line {
			while ($buf !~ /\n/) {
				die "no answer from qemu\n" if time > $end;
				next unless $sel->can_read(0.5);
				sysread($s, my $r, 65536) or die "qemu closed the monitor\n";
				$buf .= $r;
			}
			$buf =~ s/^(.*?)\r?\n//;
			return $1;
		}
		sub reply {
			for (;;) {
				my $l = line();
				return $l if $l =~ /^\{"(return|error)"/;
			}
		}
		line();                         # the greeting
		print $s qq({"execute": "qmp_capabilities"}\n);
		reply() =~ /^\{"return"/ or die "qmp_capabilities refused\n";
		print $s "$req\n";
		my $r = reply();
		if ($r =~ /^\{"error"/) {
			my ($d) = $r =~ /"desc": *"([^"]*)"/;
			die(($d // $r) . "\n");
		}' "$1" "$2"
}

do_link() { # run vm nic on|off
	local up
	check_vm_nic "$1" "$2" "$3"
	case $4 in on) up=true ;; off) up=false ;; *) die "link: on or off, not '$4'" ;; esac
	qmp "$1/vm$2.qmp" \
		"{\"execute\": \"set_link\", \"arguments\": {\"name\": \"n$2_$3\", \"up\": $up}}"
}

do_tap() { # run vm nic up|down
	check_vm_nic "$1" "$2" "$3"
	case $4 in up|down) ;; *) die "tap: up or down, not '$4'" ;; esac
	in_ns "$1" ip link set "tap$2_$3" "$4"
}

# Stop every VM's qemu (SIGSTOP) for MS milliseconds, then let them run
# (SIGCONT) for as long, TIMES times (default 1): what a loaded host does
# to its guests. Their clocks jump by each pause. Every VM of the run must
# be alive; whatever happens, none is left stopped.
pause_pids() { # run -> the VMs' pids; or fail, the last line naming why
	local f name pid
	for f in "$1"/pid.vm*; do
		[ -e "$f" ] || continue
		name=${f##*/pid.}
		pid=$(recorded_pid "$1" "$name") || { echo "pause: $name is gone"; return 1; }
		echo "$pid"
	done
}

pause_stopped=()   # do_pause: the VMs it has stopped (its traps resume them)
# shellcheck disable=SC2317 # run from do_pause's traps
pause_resume() {
	[ "${#pause_stopped[@]}" = 0 ] || kill -CONT "${pause_stopped[@]}" 2>/dev/null || true
	pause_stopped=()
}
pause_sleep() { sleep "$1" & wait $!; }   # a trapped signal ends the wait

do_pause() { # run ms [times]
	local ms times=${3:-1} i s out
	local -a pids=()
	[[ $2 =~ ^[0-9]{1,5}$ ]] && ms=$((10#$2)) && [ "$ms" -ge 1 ] && [ "$ms" -le 10000 ] ||
		die "pause: milliseconds in 1 .. 10000, not '$2'"
	[[ $times =~ ^[0-9]{1,3}$ ]] && times=$((10#$times)) && [ "$times" -ge 1 ] &&
		[ "$times" -le 100 ] || die "pause: times in 1 .. 100, not '$3'"
	s=$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))
	trap pause_resume EXIT
	trap 'exit 1' INT TERM
	for (( i = 0; i < times; i++ )); do
		[ "$i" = 0 ] || pause_sleep "$s"
		out=$(pause_pids "$1") || die "${out##*$'\n'}"
		[ -n "$out" ] || die "pause: no VM in $1"
		mapfile -t pids <<< "$out"
		pause_stopped=("${pids[@]}")
		kill -STOP "${pids[@]}" || die "pause: SIGSTOP failed"
		pause_sleep "$s"
		kill -CONT "${pids[@]}" || die "pause: SIGCONT failed"
		pause_stopped=()
	done
	trap - EXIT INT TERM
	echo "stopped ${#pids[@]} VMs for $ms ms, $times times"
}

do_kill() { # run
	local f name
	[ -f "$1/conf" ] || die "$1 is not a netvm run directory"
	for f in "$1"/pid.*; do
		[ -e "$f" ] || continue
		name=${f##*/pid.}
		case $name in
		host) stop_host_script "$1" ;;   # it leads its own process group
		*) stop_recorded "$1" "$name" ;;
		esac
	done
}

# ------------------------------------------------------------ initramfs
# /init (busybox sh): load the 9p chain, mount the host root read-only at
# /mnt and the run directory read-write at the same path inside it, then
# exec chroot into the generated $run/guest.sh (PID 1 stays ours, so
# request_module() works).
read -r -d '' INIT <<'EOF' || true
#!/bin/sh
export PATH=/bin
fail() {
	echo "NETVM-INIT-FAIL: $*"
	echo o > /proc/sysrq-trigger
	sleep 2
	poweroff -f
}
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
if [ -f /modules.list ]; then
	while read -r m; do
		insmod "/lib/modules/$m" || echo "netvm-init: insmod $m failed"
	done < /modules.list
fi
run=
keep=
for a in $(cat /proc/cmdline); do
	case $a in
	netvm_run=*) run=${a#netvm_run=} ;;
	netvm_keep=*) keep=${a#netvm_keep=} ;;
	esac
done
[ -n "$run" ] || fail "no netvm_run= on the kernel command line"
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot /mnt ||
	fail "cannot mount the host root over 9p"
mount -t 9p -o trans=virtio,version=9p2000.L,rw,msize=262144 netrun "/mnt$run" ||
	fail "cannot mount the run directory $run over 9p"
mount -t devtmpfs devtmpfs /mnt/dev || fail "devtmpfs"
mkdir -p /mnt/dev/pts /mnt/dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /mnt/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /mnt/dev/shm
mount -t proc proc /mnt/proc || fail "proc"
mount -t sysfs sysfs /mnt/sys || fail "sysfs"
mount -t debugfs debugfs /mnt/sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /mnt/sys/kernel/tracing 2>/dev/null
mount -t configfs configfs /mnt/sys/kernel/config 2>/dev/null
mkdir -p /hosttmp
mount -o bind /mnt/tmp /hosttmp || fail "bind host /tmp"
mount -t tmpfs -o mode=1777 tmpfs /mnt/tmp || fail "tmpfs /tmp"
for d in $(echo "$keep" | tr ',' ' '); do
	mkdir -p "/mnt/tmp/$d" && mount -o bind "/hosttmp/$d" "/mnt/tmp/$d" ||
		fail "cannot keep host /tmp/$d"
done
mount -t tmpfs -o mode=755 tmpfs /mnt/run || fail "tmpfs /run"
[ -f "/mnt$run/guest.sh" ] || fail "$run/guest.sh not visible in the guest"
# A static busybox off 9p for the final poweroff (see scripts/vm-run.sh).
mkdir -p /mnt/run/netvm && cp /bin/busybox /mnt/run/netvm/busybox
exec chroot /mnt /bin/bash "$run/guest.sh"
EOF

initramfs_for() { # kver -> prints the path of the (cached) initramfs
	local kv=$1 mods=() m key dst stage i n
	if [ "$kv" != none ]; then
		mapfile -t mods < <(modprobe -S "$kv" -a --show-depends \
				virtio_pci 9pnet_virtio 9p |
			awk '$1 == "insmod" && !seen[$2]++ { print $2 }')
		[ ${#mods[@]} -gt 0 ] || die "no 9p module chain found for $kv"
	fi
	key=$( {
		echo "$kv"; printf '%s\n' "$INIT"; declare -f initramfs_for
		sha256sum /bin/busybox
		for m in "${mods[@]}"; do stat -L -c '%n %s %Y' "$m"; done
	} | sha256sum | cut -c1-16)
	dst="$HCOMM_CACHE/initramfs/netvm-$kv-$key.cpio.gz"
	if [ -f "$dst" ]; then echo "$dst"; return; fi
	say "building initramfs for $kv"
	mkdir -p "$HCOMM_CACHE/initramfs"
	stage=$(mktemp -d "$HCOMM_CACHE/initramfs/stage.XXXXXX")
	mkdir -p "$stage"/{bin,dev,proc,sys,mnt,lib/modules}
	cp /bin/busybox "$stage/bin/busybox"
	for a in sh mount insmod mkdir cat cp echo sleep poweroff chroot tr; do
		ln -s busybox "$stage/bin/$a"
	done
	mknod -m 600 "$stage/dev/console" c 5 1
	mknod -m 666 "$stage/dev/null" c 1 3
	i=0
	for m in "${mods[@]}"; do
		n=$(printf '%02d-%s' $i "$(basename "$m")")
		case $m in
		*.ko.xz) xz -dc "$m" > "$stage/lib/modules/${n%.xz}"; n=${n%.xz} ;;
		*.ko.zst) zstd -qdc "$m" > "$stage/lib/modules/${n%.zst}"; n=${n%.zst} ;;
		*.ko.gz) gzip -dc "$m" > "$stage/lib/modules/${n%.gz}"; n=${n%.gz} ;;
		*) cp "$m" "$stage/lib/modules/$n" ;;
		esac
		echo "$n" >> "$stage/modules.list"
		i=$((i + 1))
	done
	printf '%s\n' "$INIT" > "$stage/init"
	chmod 755 "$stage/init"
	(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort |
		cpio -o -H newc -R 0:0 --quiet) | gzip -1 > "$stage.cpio.gz"
	mv "$stage.cpio.gz" "$dst"     # atomic: a concurrent run sees all or none
	rm -rf "$stage"
	echo "$dst"
}

# ------------------------------------------------------------ guest files
# $RUN/lib.sh: the helpers guest commands source (bash).
write_guest_lib() { # run
	cat > "$1/lib.sh" <<'EOF'
# Helpers for netvm.sh guest commands: . "$NETVM_RUN/lib.sh" (bash).
# Generated by scripts/netvm.sh; see Documentation/testbed.rst.

now() { date +%s.%N | cut -c1-14; }

# ip_of VM [NIC]: the address of VM's NIC (default 0).
ip_of() { echo "10.$((77 + ${2:-0})).0.$1"; }

# barrier NAME [timeout_s]: wait until all NVM VMs reached NAME (each name
# once per run). 1 on timeout (default 600 s) or when the run is aborted.
barrier() {
	local name=$1 limit=${2:-600} dir n f t0=$SECONDS
	case $name in ''|*/*|.*) echo "barrier: bad name '$name'" >&2; return 2 ;; esac
	dir=$NETVM_RUN/barrier/$name
	mkdir -p "$dir" && : > "$dir/$VM_ID" || return 2
	for (( ; ; )); do
		n=0
		for f in "$dir"/*; do [ -e "$f" ] && n=$((n + 1)); done
		[ "$n" -ge "$NVM" ] && return 0
		if [ -e "$NETVM_RUN/abort" ]; then
			echo "barrier $name: the run was aborted" >&2
			return 1
		fi
		if [ $((SECONDS - t0)) -ge "$limit" ]; then
			echo "barrier $name: timeout after ${limit}s ($n of $NVM VMs)" >&2
			return 1
		fi
		sleep 0.2
	done
}

# hostctl link VM NIC on|off  |  hostctl tap VM NIC up|down
# hostctl pause MS [TIMES]: every VM stopped MS ms (then run as long), TIMES times
# The host performs the verb (scripts/netvm.sh link/tap) and answers; prints
# the host's time and reply; returns the verb's status (124: no answer within
# NETVM_HOSTCTL_TIMEOUT s, default 60). Under load a round trip takes 0.1-5 s:
# time a cut by what the guest sees (carrier), not by this call.
hostctl() {
	local d=$NETVM_RUN/ctl id rc=0 t0=$SECONDS limit=${NETVM_HOSTCTL_TIMEOUT:-60}
	id=$VM_ID.$(date +%s%N).$RANDOM
	printf '%s\n' "$*" > "$d/.req.$id" && mv "$d/.req.$id" "$d/req.$id" || return 2
	while [ ! -e "$d/rep.$id" ]; do
		if [ $((SECONDS - t0)) -ge "$limit" ]; then
			rm -f "$d/req.$id"
			echo "hostctl $*: no answer from the host within ${limit}s" >&2
			return 124
		fi
		sleep 0.05
	done
	{ read -r rc; cat; } < "$d/rep.$id"
	rm -f "$d/rep.$id"
	return "$rc"
}
EOF
}

# $RUN/guest.sh: PID 1 of every guest after the chroot.
write_guest_script() { # run; uses the run options and "$@" = command
	local run=$1 name e a
	shift
	{
		echo '#!/bin/bash'
		echo '# PID 1 of a netvm guest, in the host root (generated by scripts/netvm.sh)'
		echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
		echo 'export HOME=/root TERM=dumb LANG=C.UTF-8 HCOMM_IN_VM=1'
		printf 'export NETVM_RUN=%q NVM=%q NETVM_NICS=%q\n' "$run" "$n_vms" "$nics"
		printf 'netvm_mtu=%q netvm_prenetem=%q netvm_cwd=%q\n' "$mtu" "$prenetem" "$repo"
		for name in $(compgen -e | grep -E '^HCOMM_[A-Za-z0-9_]*$' | grep -vx HCOMM_IN_VM); do
			printf 'export %s=%q\n' "$name" "${!name}"
		done
		for e in "${envs[@]}"; do
			printf 'export %s=%q\n' "${e%%=*}" "${e#*=}"
		done
		cat <<'EOF'
up() { cut -d' ' -f1 /proc/uptime; }
say() { echo "netvm-guest: $*"; }
finish() { # rc: report it (run dir + console + ttyS1), then power off
	echo "$1" > "$NETVM_RUN/.status.$VM_ID" &&
		mv -f "$NETVM_RUN/.status.$VM_ID" "$NETVM_RUN/status.$VM_ID"
	sync
	printf '\nNETVM-EXIT: %s uptime=%s\n' "$1" "$(up)"
	printf 'NETVM-EXIT: %s\n' "$1" > /dev/ttyS1 2>/dev/null
	[ -x /run/netvm/busybox ] && exec /run/netvm/busybox poweroff -f
	echo o > /proc/sysrq-trigger
	while :; do sleep 1000; done
}
mac_of() { printf '52:54:00:%02x:00:%02x' $((77 + $1)) "$VM_ID"; }
dev_of() { # mac -> netdev name
	local f
	for f in /sys/class/net/*/address; do
		[ "$(cat "$f")" = "$1" ] && { f=${f%/address}; echo "${f##*/}"; return 0; }
	done
	return 1
}

VM_ID=
for a in $(cat /proc/cmdline); do
	case $a in netvm_id=*) VM_ID=${a#netvm_id=} ;; esac
done
export VM_ID
[ -n "$VM_ID" ] || { say "no netvm_id= on the kernel command line"; finish 125; }
hostname "vm$VM_ID"
ip link set lo up
modprobe -q virtio_net 2>/dev/null || true

# NIC j is the one with MAC 52:54:00:(77+j):00:VM_ID; name it ethj.
for (( j = 0; j < NETVM_NICS; j++ )); do
	for (( t = 0; t < 100; t++ )); do dev_of "$(mac_of $j)" > /dev/null && break; sleep 0.2; done
	d=$(dev_of "$(mac_of $j)") || { say "NIC $j ($(mac_of $j)) never appeared"; finish 125; }
	[ "$d" = "eth$j" ] || ip link set dev "$d" name "netvm$j"
done
for (( j = 0; j < NETVM_NICS; j++ )); do
	d=$(dev_of "$(mac_of $j)")
	[ "$d" = "eth$j" ] || ip link set dev "$d" name "eth$j"
	ip link set "eth$j" mtu "$netvm_mtu" up
	ip addr add "10.$((77 + j)).0.$VM_ID/24" dev "eth$j"
done
for (( j = 0; j < NETVM_NICS; j++ )); do
	for (( t = 0; t < 100; t++ )); do
		[ "$(cat "/sys/class/net/eth$j/carrier" 2>/dev/null)" = 1 ] && break
		sleep 0.1
	done
done

modprobe -q rdma_rxe 2>/dev/null || true
NETVM_RXE=1
for (( j = 0; j < NETVM_NICS; j++ )); do
	if ! rdma link add "rxe$j" type rxe netdev "eth$j"; then
		say "WARNING: no rxe$j (this kernel has no rdma_rxe?): NETVM_RXE=0"
		NETVM_RXE=0
		break
	fi
done
export NETVM_RXE
if [ "$NETVM_RXE" = 1 ]; then
	for (( j = 0; j < NETVM_NICS; j++ )); do
		for (( t = 0; t < 100; t++ )); do
			rdma link show "rxe$j/1" 2>/dev/null | grep -q 'state ACTIVE' && break
			sleep 0.1
		done
	done
fi
if [ "$netvm_prenetem" = 1 ]; then
	modprobe -q sch_netem 2>/dev/null || true
	for (( j = 0; j < NETVM_NICS; j++ )); do
		tc qdisc add dev "eth$j" root netem loss 0% ||
			say "WARNING: no netem qdisc on eth$j"
	done
fi

: > "$NETVM_RUN/started.$VM_ID"
echo "NETVM-START: vm$VM_ID uptime=$(up) rxe=$NETVM_RXE"
cd "$netvm_cwd" || { say "cannot cd to $netvm_cwd"; finish 125; }
EOF
		printf '('
		for a in "$@"; do printf ' %q' "$a"; done
		printf ' ) < /dev/null\n'
		echo 'finish $?'
	} > "$run/guest.sh"
	chmod 755 "$run/guest.sh"
}

# ------------------------------------------------------------ ctl agent
# Serves the guests' hostctl requests: $RUN/ctl/req.<id> holds "VERB VM NIC
# STATE" (or "pause MS TIMES"); the answer $RUN/ctl/rep.<id> is the status
# on its first line, then the host's time and output. Runs until the runner
# ($$) is gone.
serve_ctl() { # run
	local run=$1 f id verb vm nic state out rc
	while kill -0 $$ 2>/dev/null; do
		for f in "$run"/ctl/req.*; do
			[ -e "$f" ] || continue
			id=${f##*/req.}
			verb='' vm='' nic='' state=''
			read -r verb vm nic state _ < "$f" || true
			rm -f "$f"
			rc=0
			case $verb in
			link) out=$( (do_link "$run" "$vm" "$nic" "$state") 2>&1) || rc=$? ;;
			tap) out=$( (do_tap "$run" "$vm" "$nic" "$state") 2>&1) || rc=$? ;;
			pause) out=$( (do_pause "$run" "$vm" "${nic:-1}") 2>&1) || rc=$? ;;
			*) out="unknown verb '$verb' (link, tap or pause)"; rc=2 ;;
			esac
			[ "$rc" = 0 ] && [ -z "$out" ] && out=ok
			[ "$rc" = 0 ] || out="rc=$rc $out"
			printf '%s\n%s vm%s: %s %s %s %s: %s\n' "$rc" "$(date +%s.%N | cut -c1-14)" \
				"${id%%.*}" "$verb" "$vm" "$nic" "$state" "$out" > "$run/ctl/.rep.$id"
			tail -n +2 "$run/ctl/.rep.$id" >> "$run/ctl.log"
			mv "$run/ctl/.rep.$id" "$run/ctl/rep.$id"
		done
		sleep 0.1
	done
}

# ------------------------------------------------------------ run
# Print a console's kernel problems (scripts/lib.sh, as vm-run.sh does).
kernel_problems() { # console
	hcomm_kernel_problems "$1"
}

# shellcheck disable=SC2317 # run from the EXIT trap
cleanup() {
	local i vms=()
	trap - EXIT
	trap '' INT TERM          # a second Ctrl-C must not stop the cleanup
	[ -n "${run:-}" ] && [ -d "$run" ] || return 0
	for (( i = 1; i <= n_vms; i++ )); do vms+=("vm$i"); done
	stop_recorded "$run" "${vms[@]}" agent
	stop_host_script "$run"
	stop_recorded "$run" holder
	{ wait; } 2>/dev/null || true     # all of them are children of this shell
	save_logs
	if [ "$own_run" = 1 ]; then rm -rf "$run"; fi
}

# shellcheck disable=SC2317
save_logs() {
	local i f
	[ -n "${logdir:-}" ] || return 0
	mkdir -p "$logdir"
	for (( i = 1; i <= n_vms; i++ )); do
		[ -f "$run/vm$i.console" ] && tr -d '\r' < "$run/vm$i.console" > "$logdir/vm$i.console"
	done
	for f in host.log ctl.log; do [ -f "$run/$f" ] && cp "$run/$f" "$logdir/"; done
	[ -d "$run/out" ] && [ -n "$(ls -A "$run/out")" ] && cp -r "$run/out" "$logdir/"
	logdir=
}

start_network() {
	local holder t i j
	unshare -n sleep infinity < /dev/null > /dev/null 2>&1 &
	holder=$!
	record_pid "$run" holder "$holder"
	for (( t = 0; t < 50; t++ )); do
		[ "$(readlink "/proc/$holder/ns/net")" != "$(readlink /proc/self/ns/net)" ] && break
		sleep 0.1
	done
	[ "$t" -lt 50 ] || die "the namespace holder never entered its own netns"
	for (( j = 0; j < nics; j++ )); do
		in_ns "$run" ip link add "br$j" type bridge
		in_ns "$run" ip link set "br$j" mtu "$mtu" up
		for (( i = 1; i <= n_vms; i++ )); do
			in_ns "$run" ip tuntap add dev "tap${i}_$j" mode tap
			in_ns "$run" ip link set "tap${i}_$j" mtu "$mtu" master "br$j" up
		done
	done
}

start_vm() { # i
	local i=$1 j net=() append holder
	for (( j = 0; j < nics; j++ )); do
		net+=(-netdev "tap,id=n${i}_$j,ifname=tap${i}_$j,script=no,downscript=no"
		      -device "virtio-net-pci,netdev=n${i}_$j,mac=$(printf '52:54:00:%02x:00:%02x' $((77 + j)) "$i")")
	done
	append="console=ttyS0 printk.time=1 loglevel=5 panic=-1 oops=panic no_timer_check"
	append="$append netvm_run=$run netvm_id=$i${keep:+ netvm_keep=$keep}"
	holder=$(recorded_pid "$run" holder) || die "the namespace holder is gone"
	nsenter -t "$holder" -n -- qemu-system-x86_64 \
		-M q35 -accel "${NETVM_ACCEL:-tcg}" -cpu "$cpu" -m "${mem}M" -smp "$smp" \
		-nodefaults -display none -no-reboot \
		-kernel "$kernel" -initrd "$initrd" -append "$append" \
		-serial "file:$run/vm$i.console" -serial "file:$run/vm$i.out" \
		-qmp "unix:$run/vm$i.qmp,server=on,wait=off" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		-virtfs "local,path=$run,mount_tag=netrun,security_model=none" \
		"${net[@]}" < /dev/null > "$run/vm$i.qemu" 2>&1 &
	record_pid "$run" "vm$i" $!
	vm_pid[i]=$!
	vm_t0[i]=$EPOCHREALTIME
}

vm_status() { # i -> the status the guest reported, if any
	local s
	s=$(cat "$run/status.$1" 2>/dev/null) ||
		s=$(grep -aoE 'NETVM-EXIT: [0-9]+' "$run/vm$1.out" 2>/dev/null | tail -n1) ||
		s=$(grep -aoE 'NETVM-EXIT: [0-9]+' "$run/vm$1.console" 2>/dev/null | tail -n1) ||
		return 1
	s=${s##* }
	[[ $s =~ ^[0-9]+$ ]] && echo "$s"
}

cmd_run() {
	local kernel='' kver=auto timeout=900 host_script='' quiet=0 i j s
	local -a vm_pid=() vm_t0=() vm_rc=() vm_wall=() vm_why=()
	n_vms=2 nics=1 mem=1024 smp=1 mtu=1500 prenetem=0 run='' logdir='' own_run=0 keep=''
	cpu=${NETVM_CPU:-qemu64,-cx16}
	envs=()
	while [ $# -gt 0 ]; do
		case $1 in
		--n) n_vms=$2; shift 2 ;;
		--nics) nics=$2; shift 2 ;;
		--kernel) kernel=$2; shift 2 ;;
		--kver) kver=$2; shift 2 ;;
		--mem) mem=$2; shift 2 ;;
		--smp) smp=$2; shift 2 ;;
		--cpu) cpu=$2; shift 2 ;;
		--mtu) mtu=$2; shift 2 ;;
		--timeout) timeout=$2; shift 2 ;;
		--run) run=$2; shift 2 ;;
		--env) envs+=("$2"); shift 2 ;;
		--prenetem) prenetem=1; shift ;;
		--host-script) host_script=$2; shift 2 ;;
		--log-dir) logdir=$2; shift 2 ;;
		--quiet) quiet=1; shift ;;
		--) shift; break ;;
		-h|--help) usage ;;
		*) say "unknown option $1"; usage ;;
		esac
	done
	[ $# -gt 0 ] || { say "no guest command given"; usage; }
	[[ $n_vms =~ ^[0-9]+$ ]] && [ "$n_vms" -ge 1 ] && [ "$n_vms" -le 200 ] || die "--n: 1..200"
	[[ $nics =~ ^[0-9]+$ ]] && [ "$nics" -ge 1 ] && [ "$nics" -le 8 ] || die "--nics: 1..8"
	for s in "$mem" "$smp" "$mtu" "$timeout"; do
		[[ $s =~ ^[1-9][0-9]*$ ]] || die "not a positive number: $s"
	done
	for s in "${envs[@]}"; do
		[[ $s =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "--env wants VAR=value, not '$s'"
	done
	[ "$(id -u)" = 0 ] || die "run needs root (network namespace, taps)"
	if [ -n "$host_script" ]; then
		[ -r "$host_script" ] || die "cannot read host script $host_script"
		host_script=$(realpath "$host_script")
	fi

	if [ -z "$kernel" ]; then
		kernel=$(ls /boot/vmlinuz-6.12.* 2>/dev/null | sort -V | tail -n1) || true
		[ -n "$kernel" ] || die "no /boot/vmlinuz-6.12.*: give --kernel"
	fi
	[ -r "$kernel" ] || die "cannot read kernel image $kernel"
	kernel=$(realpath "$kernel")
	if [ "$kver" = auto ]; then
		kver=none
		case $(basename "$kernel") in vmlinuz-*) kver=${kernel##*/vmlinuz-} ;; esac
	fi
	if [ "$kver" != none ] && [ ! -d "/lib/modules/$kver" ]; then
		die "no /lib/modules/$kver for kernel $kernel (use --kver none for a kernel with 9p built in)"
	fi

	# The run directory: read-write in every guest at the same path.
	if [ -z "$run" ]; then
		run=/var/tmp/hcomm-net/run.$$
		own_run=1
		rm -rf "$run"
	fi
	mkdir -p "$run"
	run=$(realpath "$run")
	case $run in
	/tmp|/tmp/*|/run|/run/*|/proc/*|/sys/*|/dev/*)
		die "--run $run: the guests cannot share it (their /tmp and /run are private); use /var/tmp" ;;
	esac
	[ ${#run} -le 90 ] || die "--run $run: path too long for the monitor sockets"
	for f in "$run"/pid.vm* "$run/pid.holder"; do
		[ -e "$f" ] || continue
		s=${f##*/pid.}
		! recorded_pid "$run" "$s" > /dev/null || die "$run is in use by a live run ($s)"
	done
	rm -rf "$run"/barrier "$run"/ctl "$run"/out "$run"/pid.* "$run"/status.* \
		"$run"/.status.* "$run"/started.* "$run"/vm*.* "$run"/abort \
		"$run"/host.log "$run"/ctl.log "$run"/conf
	mkdir -p "$run/barrier" "$run/ctl" "$run/out"
	echo "$n_vms $nics" > "$run/conf"

	[ -n "$logdir" ] || logdir=$repo/build/logs/net-$(date +%Y%m%d-%H%M%S)-$$
	mkdir -p "$logdir"
	logdir=$(realpath "$logdir")
	local logs=$logdir

	# The repo (cwd) or cache under the host's /tmp stays visible (as vm-run.sh).
	keep=$(for p in "$repo" "$HCOMM_CACHE"; do
		p=$(readlink -f "$p")
		case $p in /tmp/?*) p=${p#/tmp/}; echo "${p%%/*}" ;; esac
	done | sort -u | paste -sd, -)

	trap cleanup EXIT
	trap 'say "interrupted: stopping the VMs"; exit 130' INT
	trap 'say "terminated: stopping the VMs"; exit 143' TERM

	initrd=$(initramfs_for "$kver")
	write_guest_lib "$run"
	write_guest_script "$run" "$@"
	start_network
	say "$n_vms VMs x $nics NICs, $(basename "$kernel") (modules: $kver), ${mem} MiB, smp $smp, timeout ${timeout}s"
	say "run dir $run, logs $logs"
	say "command: $*"

	local t0=$EPOCHREALTIME deadline=$((SECONDS + timeout))
	for (( i = 1; i <= n_vms; i++ )); do start_vm "$i"; done
	serve_ctl "$run" < /dev/null > /dev/null 2>&1 &
	record_pid "$run" agent $!
	local host_pid='' host_rc=''
	if [ -n "$host_script" ]; then
		RUN=$run N=$n_vms NICS=$nics NETVM=$self \
			setsid bash "$host_script" < /dev/null > "$run/host.log" 2>&1 &
		host_pid=$!
		record_pid "$run" host "$host_pid"
	fi

	# Watch: reap each qemu; a VM gone without a status stops the others.
	local left=$n_vms aborted=0 timed_out=0 reported hung=0 hang_poll=$SECONDS
	local -a reported_at=()
	while [ "$left" -gt 0 ]; do
		for (( i = 1; i <= n_vms; i++ )); do
			[ -z "${vm_rc[i]:-}" ] || continue
			if kill -0 "${vm_pid[i]}" 2>/dev/null; then
				# Reported but not powered off within 60 s: stop it.
				if [ -e "$run/status.$i" ]; then
					[ -n "${reported_at[i]:-}" ] || reported_at[i]=$SECONDS
					[ $((SECONDS - reported_at[i])) -lt 60 ] ||
						stop_recorded "$run" "vm$i"
				fi
				continue
			fi
			{ wait "${vm_pid[i]}"; } 2>/dev/null || true   # braces: no "Killed" notice
			vm_wall[i]=$(awk -v a="${vm_t0[i]}" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
			left=$((left - 1))
			if reported=$(vm_status "$i"); then
				vm_rc[i]=$reported
			elif [ "$timed_out" = 1 ]; then
				vm_rc[i]=124; vm_why[i]="timeout after ${timeout}s"
			elif [ "$aborted" != 0 ]; then
				vm_rc[i]=125; vm_why[i]="stopped: vm$aborted died"
			else
				vm_rc[i]=125; vm_why[i]="died without reporting a status"
				aborted=$i
				say "vm$i died without reporting a status: stopping the others"
				tr -d '\r' < "$run/vm$i.console" | grep -aE 'NETVM-INIT-FAIL|Kernel panic|BUG:|Oops' |
					head -n 5 | sed 's/^/netvm:   /' >&2 || true
				: > "$run/abort"
				for (( j = 1; j <= n_vms; j++ )); do
					[ -n "${vm_rc[j]:-}" ] || stop_recorded "$run" "vm$j"
				done
			fi
		done
		if [ -n "$host_pid" ] && [ -z "$host_rc" ] && ! kill -0 "$host_pid" 2>/dev/null; then
			host_rc=0
			{ wait "$host_pid"; } 2>/dev/null || host_rc=$?
		fi
		# A console showing a hang (hung task, lockup, RCU stall) has
		# failed the run: the VMs get HCOMM_VM_HANG_GRACE s (60) to
		# print the report, then go as on a timeout; the scan says why.
		if [ "$hung" = 0 ] && [ $((SECONDS - hang_poll)) -ge 10 ]; then
			hang_poll=$SECONDS
			if cat "$run"/vm*.console 2>/dev/null | grep -aqE "$HCOMM_HANG_PAT"; then
				hung=1
				say "a console shows a hang: stopping the VMs in ${HCOMM_VM_HANG_GRACE}s"
				[ $((SECONDS + $HCOMM_VM_HANG_GRACE)) -ge "$deadline" ] ||
					deadline=$((SECONDS + $HCOMM_VM_HANG_GRACE))
			fi
		fi
		if [ "$left" -gt 0 ] && [ "$SECONDS" -ge "$deadline" ] && [ "$timed_out" = 0 ]; then
			timed_out=1
			say "TIMEOUT after ${timeout}s: killing the VMs"
			: > "$run/abort"
			for (( j = 1; j <= n_vms; j++ )); do
				[ -n "${vm_rc[j]:-}" ] || stop_recorded "$run" "vm$j"
			done
		fi
		[ "$left" -eq 0 ] || sleep 0.3
	done
	if [ -n "$host_pid" ] && [ -z "$host_rc" ]; then
		stop_host_script "$run"
		{ wait "$host_pid"; } 2>/dev/null || true
		host_rc=killed
	fi
	stop_recorded "$run" agent holder
	{ wait; } 2>/dev/null || true

	# Report: sections, kernel scan, summary.
	local rc=0 bad started
	for (( i = 1; i <= n_vms; i++ )); do
		tr -d '\r' < "$run/vm$i.console" > "$run/vm$i.console.txt" 2>/dev/null || true
		if [ "$quiet" = 0 ]; then
			echo "----- vm$i"
			sed -n '/NETVM-START:/,/NETVM-EXIT:/p' "$run/vm$i.console.txt"
		fi
		[ -s "$run/vm$i.qemu" ] && sed "s/^/netvm: vm$i qemu: /" "$run/vm$i.qemu" >&2
		sed -n '/NETVM-START:/q; s/^netvm-guest: /netvm: vm'"$i"': /p' "$run/vm$i.console.txt" >&2
		bad=$(kernel_problems "$run/vm$i.console.txt")
		if [ -n "$bad" ]; then
			say "vm$i: KERNEL PROBLEM on its console (command status ${vm_rc[i]}):"
			printf '%s\n' "$bad" | head -n 40 | sed 's/^/netvm:   /' >&2
			[ "${vm_rc[i]}" != 0 ] || vm_rc[i]=126
		fi
		rm -f "$run/vm$i.console.txt"
	done
	if [ -n "$host_script" ]; then
		if [ "$quiet" = 0 ]; then echo "----- host script"; cat "$run/host.log"; fi
		say "host script rc=$host_rc"
		[ "$host_rc" = 0 ] || [ "$host_rc" = killed ] || rc=1
	fi
	for (( i = 1; i <= n_vms; i++ )); do
		started=$(grep -aoE 'NETVM-START: vm[0-9]+ uptime=[0-9.]+' "$run/vm$i.console" |
			sed 's/.*=//' || true)
		say "vm$i rc=${vm_rc[i]} (${vm_wall[i]} s)${vm_why[i]:+: ${vm_why[i]}}${started:+; command started at guest uptime ${started} s}"
		[ "$rc" != 0 ] || [ "${vm_rc[i]}" = 0 ] || rc=${vm_rc[i]}
	done
	say "rc=$rc wall=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')s logs $logs"
	return "$rc"
}

# ------------------------------------------------------------ main
main() {
	local cmd=${1:-}
	[ $# -gt 0 ] && shift
	case $cmd in
	run) cmd_run "$@" ;;
	link) [ $# -eq 4 ] || usage; do_link "$@" ;;
	tap) [ $# -eq 4 ] || usage; do_tap "$@" ;;
	ns) [ $# -ge 2 ] || usage; in_ns "$@" ;;
	kill) [ $# -eq 1 ] || usage; do_kill "$1" ;;
	pause) [ $# -eq 2 ] || [ $# -eq 3 ] || usage; do_pause "$@" ;;
	*) usage ;;
	esac
}

# One line: bash has read the whole file before main runs, so editing this
# script while a run is going cannot change that run.
main "$@"; exit $?
