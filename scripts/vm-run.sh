#!/bin/bash
# Boot a kernel under qemu (TCG) with the host root shared read-only over 9p,
# run one command inside it and hand back the command's exit status.
#
#   scripts/vm-run.sh --kernel <bzImage> [--kver <modules version|none|auto>]
#                     [--log <file>] [--timeout <s>] [--env VAR=value]...
#                     [--cwd <dir>] [--mem 4G] [--smp 2] [--append <args>]
#                     [--machine q35|pc]
#                     [--live|--live-all] [--no-scan] -- <command> [args...]
#
# --live shows the console from the command's start on while it runs
# (--live-all: from the first boot message); --no-scan skips the kernel scan.
#
# Guest: a tiny busybox initramfs loads the 9p module chain (stock kernels;
# --kver auto takes the version from /boot/vmlinuz-<ver>, anything else means
# everything is built in), mounts the host root at /mnt, mounts proc, sysfs,
# devtmpfs (+devpts, /dev/shm), debugfs, tracefs, configfs and tmpfs /tmp and
# /run inside it, then PID 1 *execs* chroot /mnt into a generated run script
# (so request_module() works). The command runs with cwd = the repo (or
# --cwd), stdin /dev/null, as root; host env vars HCOMM_* and --env are passed.
# Its stdout/stderr go to the serial console (ttyS0 -> --log). A second serial
# port (ttyS1 -> <log>.out, env HCOMM_OUT_TTY in the guest) is a clean channel
# for machine-readable lines that kernel messages cannot interleave with.
#
# Exit status: the command's status; 124 on timeout (qemu killed); 125 when the
# guest never reported one (crash, panic, init failure); 126 when the console
# shows a kernel problem (BUG/WARNING/KASAN/lockdep/kmemleak/hung task/Call
# Trace), even if the command succeeded. The console log is always kept.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib.sh"

usage() { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

kernel= kver=auto log= timeout=900 mem=4G smp=2 append= live=0 live_all=0 scan=1
machine=${HCOMM_VM_MACHINE:-q35}
cwd=$repo
envs=()
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kernel=$2; shift 2 ;;
	--kver) kver=$2; shift 2 ;;
	--log) log=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--env) envs+=("$2"); shift 2 ;;
	--cwd) cwd=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--machine) machine=$2; shift 2 ;;
	--append) append="$append $2"; shift 2 ;;
	--live) live=1; shift ;;
	--live-all) live=1; live_all=1; shift ;;
	--no-scan) scan=0; shift ;;
	--) shift; break ;;
	-h|--help) usage ;;
	*) echo "vm-run: unknown option $1" >&2; usage ;;
	esac
done
[ $# -gt 0 ] || { echo "vm-run: no command given" >&2; usage; }
[ -n "$kernel" ] || { echo "vm-run: --kernel is required" >&2; usage; }
[ -r "$kernel" ] || die "cannot read kernel image $kernel"
kernel=$(realpath "$kernel")

if [ "$kver" = auto ]; then
	kver=none
	case $(basename "$kernel") in
	vmlinuz-*) kver=$(basename "$kernel"); kver=${kver#vmlinuz-} ;;
	esac
fi
if [ "$kver" != none ] && [ ! -d "/lib/modules/$kver" ]; then
	die "no /lib/modules/$kver for kernel $kernel (use --kver none for a kernel with 9p built in)"
fi

mkdir -p "$repo/build/logs"
[ -n "$log" ] || log="$repo/build/logs/vm-$(date +%Y%m%d-%H%M%S)-$$.log"
mkdir -p "$(dirname "$log")"
log=$(realpath "$log")
out="$log.out"

# ---------------------------------------------------------------- initramfs
# /init of the initramfs (busybox sh). Changing it changes the cache key.
read -r -d '' INIT <<'EOF' || true
#!/bin/sh
export PATH=/bin
fail() {
	echo "HCOMM-INIT-FAIL: $*"
	echo o > /proc/sysrq-trigger
	sleep 2
	poweroff -f
}
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
if [ -f /modules.list ]; then
	while read -r m; do
		insmod "/lib/modules/$m" || echo "hcomm-init: insmod $m failed"
	done < /modules.list
fi
run=
keep=
for a in $(cat /proc/cmdline); do
	case $a in
	hcomm_run=*) run=${a#hcomm_run=} ;;
	hcomm_keep=*) keep=${a#hcomm_keep=} ;;
	esac
done
[ -n "$run" ] || fail "no hcomm_run= on the kernel command line"
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot /mnt ||
	fail "cannot mount the host root over 9p"
mount -t devtmpfs devtmpfs /mnt/dev || fail "devtmpfs"
mkdir -p /mnt/dev/pts /mnt/dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /mnt/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /mnt/dev/shm
mount -t proc proc /mnt/proc || fail "proc"
mount -t sysfs sysfs /mnt/sys || fail "sysfs"
mount -t debugfs debugfs /mnt/sys/kernel/debug || echo "hcomm-init: no debugfs"
mount -t tracefs tracefs /mnt/sys/kernel/tracing 2>/dev/null
mount -t configfs configfs /mnt/sys/kernel/config 2>/dev/null
# The guest's /tmp is its own tmpfs; host directories under /tmp that the
# run needs (a clone or cache living there) stay visible through binds.
mkdir -p /hosttmp
mount -o bind /mnt/tmp /hosttmp || fail "bind host /tmp"
mount -t tmpfs -o mode=1777 tmpfs /mnt/tmp || fail "tmpfs /tmp"
for d in $(echo "$keep" | tr ',' ' '); do
	mkdir -p "/mnt/tmp/$d" && mount -o bind "/hosttmp/$d" "/mnt/tmp/$d" ||
		fail "cannot keep host /tmp/$d"
done
mount -t tmpfs -o mode=755 tmpfs /mnt/run || fail "tmpfs /run"
[ -f "/mnt$run" ] || fail "run script $run not visible in the guest"
# A static busybox off 9p: the final poweroff must not fault in pages from
# 9p while the virtio device is being shut down (SIGBUS kills PID 1 on 6.1).
mkdir -p /mnt/run/hcomm && cp /bin/busybox /mnt/run/hcomm/busybox
exec chroot /mnt /bin/sh "$run"
EOF

initramfs_for() { # kver -> prints the path of the (cached) initramfs
	local kv=$1 mods=() m key dst stage i n
	if [ "$kv" != none ]; then
		# -a: several modules (without it the rest are taken as parameters)
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
	dst="$HCOMM_CACHE/initramfs/$kv-$key.cpio.gz"
	if [ -f "$dst" ]; then echo "$dst"; return; fi
	log "building initramfs for $kv"
	mkdir -p "$HCOMM_CACHE/initramfs"
	stage=$(mktemp -d "$HCOMM_CACHE/initramfs/stage.XXXXXX")
	mkdir -p "$stage"/{bin,dev,proc,sys,mnt,lib/modules}
	cp /bin/busybox "$stage/bin/busybox"
	for a in sh mount insmod mkdir cat cp echo sleep poweroff chroot; do
		ln -s busybox "$stage/bin/$a"
	done
	if [ "$(id -u)" = 0 ]; then
		mknod -m 600 "$stage/dev/console" c 5 1
		mknod -m 666 "$stage/dev/null" c 1 3
	else
		log "not root: relying on the kernel's built-in /dev/console"
	fi
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

initrd=$(initramfs_for "$kver")

# A kernel from a build tree (the debug kernel) has no /lib/modules/<ver> on
# the host: prepare one (modules.builtin + depmod, cached) that the guest
# bind-mounts over /lib/modules, so `modprobe <built-in driver>` succeeds there
# as it does on a stock kernel.
modroot=
case $kernel in */arch/x86/boot/bzImage)
	ktree=${kernel%/arch/x86/boot/bzImage}
	if [ -f "$ktree/modules.builtin" ] && [ -f "$ktree/include/config/kernel.release" ]; then
		krel=$(cat "$ktree/include/config/kernel.release")
		mkey=$(cat "$ktree/include/config/kernel.release" "$ktree/modules.builtin" \
			"$ktree/modules.builtin.modinfo" | sha256sum | cut -c1-16)
		modroot=$HCOMM_CACHE/modroot/$krel-$mkey
		if [ ! -d "$modroot" ]; then
			tmp=$(mktemp -d "$HCOMM_CACHE/modroot.XXXXXX")
			mkdir -p "$tmp/lib/modules/$krel"
			cp "$ktree/modules.builtin" "$ktree/modules.builtin.modinfo" \
				"$tmp/lib/modules/$krel/"
			depmod -b "$tmp" "$krel"
			mkdir -p "$HCOMM_CACHE/modroot"
			mv "$tmp" "$modroot" 2>/dev/null || rm -rf "$tmp"
		fi
	fi ;;
esac

# ---------------------------------------------------------------- run script
# It must be visible in the guest at the same path: the build tree is shared
# (the guest's /tmp and /run are its own tmpfs).
mkdir -p "$repo/build/vm"
rundir=$(mktemp -d "$repo/build/vm/run.XXXXXX")
chmod 755 "$rundir"
qpid=
tailpid=
cleanup() {
	[ -n "$tailpid" ] && kill "$tailpid" 2>/dev/null
	[ -n "$qpid" ] && kill -9 "$qpid" 2>/dev/null
	rm -rf "$rundir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
{
	echo '#!/bin/sh'
	echo '# PID 1 of the guest, in the host root (generated by vm-run.sh)'
	echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
	echo 'export HOME=/root TERM=dumb LANG=C.UTF-8 HCOMM_IN_VM=1'
	echo 'export HCOMM_OUT_TTY=/dev/ttyS1'
	for name in $(compgen -e | grep -E '^HCOMM_[A-Za-z0-9_]*$' | grep -vx HCOMM_OUT_TTY); do
		echo "export $name=$(q "${!name}")"
	done
	for e in "${envs[@]}"; do
		echo "export ${e%%=*}=$(q "${e#*=}")"
	done
	echo 'up() { cut -d" " -f1 /proc/uptime; }'
	if [ -n "$modroot" ]; then
		printf '[ -d /lib/modules/%s ] || mount --bind %s /lib/modules\n' \
			"$krel" "$(q "$modroot/lib/modules")"
	fi
	# a host name and loopback, as any machine has (mpirun refuses
	# "(none)" and its PMIx server listens on lo)
	echo 'hostname localhost 2>/dev/null; ip link set lo up 2>/dev/null'
	echo "echo \"HCOMM-START: uptime=\$(up)\""
	printf 'if cd %s; then\n\t(' "$(q "$cwd")"
	for a in "$@"; do printf ' %s' "$(q "$a")"; done
	printf ' ) < /dev/null\n\trc=$?\n'
	printf 'else\n\techo "vm-run: cannot cd to %s in the guest"; rc=125\nfi\n' "$cwd"
	echo 'printf "\nHCOMM-EXIT: %s uptime=%s\n" "$rc" "$(up)"'
	echo 'printf "HCOMM-EXIT: %s\n" "$rc" > /dev/ttyS1 2>/dev/null'
	# busybox poweroff -f is a direct reboot(2): synchronous, and from tmpfs.
	echo '[ -x /run/hcomm/busybox ] && exec /run/hcomm/busybox poweroff -f'
	echo 'echo o > /proc/sysrq-trigger'
	echo 'while :; do sleep 1000; done'
} > "$rundir/run.sh"
chmod 755 "$rundir/run.sh"

# ---------------------------------------------------------------- qemu
cmdline="console=ttyS0 printk.time=1 panic=-1 oops=panic panic_on_warn=0"
# oops=panic: an Oops in a task holding locks would leave the guest hanging
# until --timeout (its failure is then only a time-out); a panic ends it at
# once, with the trace on the console.
# Top-level directories under /tmp to keep visible in the guest.
keep=$(for p in "$repo" "$HCOMM_CACHE" "$cwd"; do
	p=$(readlink -f "$p")
	case $p in /tmp/?*) p=${p#/tmp/}; echo "${p%%/*}" ;; esac
done | sort -u | paste -sd, -)
cmdline="$cmdline transparent_hugepage=madvise hcomm_run=$rundir/run.sh$append"
[ -n "$keep" ] && cmdline="$cmdline hcomm_keep=$keep"
# A kernel that dies before the command starts (the guest never printed
# HCOMM-START; e.g. a stock kernel's Oops in boot-time code patching under
# TCG, seen once) has run nothing of ours: boot again, up to
# HCOMM_VM_BOOT_TRIES (default 3) times in all; each such console is kept
# as <log>.boot-<n>.  A crash after the command started is never retried.
tries=${HCOMM_VM_BOOT_TRIES:-3}
attempt=1
while :; do
	: > "$log"
	: > "$out"
	log "vm: $(basename "$kernel") (modules: $kver) timeout ${timeout}s log $log"
	log "vm: command: $*"
	t0=$(date +%s.%N)
	qemu-system-x86_64 \
		-m "$mem" -smp "$smp" -nographic -no-reboot -monitor none \
		-machine "$machine" -cpu "${HCOMM_VM_CPU:-max,-cx16}" -nic none \
		-kernel "$kernel" -initrd "$initrd" -append "$cmdline" \
		-serial "file:$log" -serial "file:$out" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		< /dev/null > "$log.qemu" 2>&1 &
	qpid=$!
	if [ "$live" = 1 ]; then
		# From the command's start on (--live-all: the whole boot), unbuffered.
		tail -n +1 -F -s 0.2 --pid="$qpid" "$log" 2>/dev/null |
			awk -v all="$live_all" '{ sub(/\r$/, "") }
				all || on || /HCOMM-START/ { on = 1; print; fflush() }' &
		tailpid=$!
	fi
	# Watchdog: poll instead of `timeout` so the trap can always kill qemu.
	# A guest whose console shows a hang (hung task, lockup, RCU stall)
	# has failed whatever happens next: it gets HCOMM_VM_HANG_GRACE
	# seconds (60) to print the rest of the report, then qemu is killed
	# instead of running into --timeout; the scan below reports it (126).
	timed_out=0 hung_at=0 polls=0
	deadline=$(( $(date +%s) + timeout ))
	while kill -0 "$qpid" 2>/dev/null; do
		nowsec=$(date +%s)
		if [ "$nowsec" -ge "$deadline" ]; then
			timed_out=1
			kill -9 "$qpid" 2>/dev/null || true
			break
		fi
		polls=$((polls + 1))
		if [ "$hung_at" = 0 ] && [ $((polls % 25)) = 0 ] &&
		   grep -aqE "$HCOMM_HANG_PAT" "$log" 2>/dev/null; then
			hung_at=$nowsec
			log "vm: the console shows a hang; qemu goes in ${HCOMM_VM_HANG_GRACE}s"
		fi
		if [ "$hung_at" != 0 ] && [ $((nowsec - hung_at)) -ge "$HCOMM_VM_HANG_GRACE" ]; then
			kill -9 "$qpid" 2>/dev/null || true
			break
		fi
		sleep 0.2
	done
	qrc=0
	{ wait "$qpid"; } 2>/dev/null || qrc=$?
	qpid=
	if [ -n "$tailpid" ]; then
		# tail notices qemu's exit by itself and reads the rest first.
		wait "$tailpid" 2>/dev/null || true
		tailpid=
	fi
	wall=$(echo "$(date +%s.%N) - $t0" | bc)

	# Normalise line ends for humans and for the scan.
	tr -d '\r' < "$log" > "$log.tmp" && mv "$log.tmp" "$log"
	tr -d '\r' < "$out" > "$out.tmp" && mv "$out.tmp" "$out"
	[ -s "$log.qemu" ] && sed 's/^/vm: qemu: /' "$log.qemu" >&2
	rm -f "$log.qemu"
	if [ "$timed_out" = 0 ] && ! grep -aq 'HCOMM-START' "$log" &&
	   ! grep -aq 'HCOMM-INIT-FAIL' "$log" && [ "$attempt" -lt "$tries" ]; then
		cp "$log" "$log.boot-$attempt"
		log "vm: the kernel died before the command started (attempt $attempt, console $log.boot-$attempt): booting again"
		grep -aE 'Oops:|Kernel panic|BUG:' "$log" | head -n 3 | sed 's/^/vm:   /' >&2
		attempt=$((attempt + 1))
		continue
	fi
	break
done

marker=$(grep -ahoE '^HCOMM-EXIT: [0-9]+' "$out" | tail -n1 | awk '{print $2}' || true)
[ -n "$marker" ] || marker=$(grep -aoE 'HCOMM-EXIT: [0-9]+' "$log" | tail -n1 | awk '{print $2}' || true)
start=$(grep -aoE 'HCOMM-START: uptime=[0-9.]+' "$log" | head -n1 | sed 's/.*=//' || true)
end=$(grep -aoE 'HCOMM-EXIT: [0-9]+ uptime=[0-9.]+' "$log" | tail -n1 | sed 's/.*=//' || true)

if [ "$timed_out" = 1 ]; then
	rc=124
	log "vm: TIMEOUT after ${timeout}s (qemu killed)"
elif [ -n "$marker" ]; then
	rc=$marker
else
	rc=125
	log "vm: no exit marker: the guest crashed, panicked or never started the command (qemu rc $qrc)"
	grep -a 'HCOMM-INIT-FAIL' "$log" >&2 || true
	tail -n 30 "$log" | sed 's/^/vm: console: /' >&2
fi

if [ "$scan" = 1 ]; then
	# Kernel lines only (printk timestamp), so program output cannot
	# trip it: the patterns are scripts/lib.sh's (netvm.sh uses them too).
	bad=$(hcomm_kernel_problems "$log")
	if [ -n "$bad" ]; then
		log "vm: KERNEL PROBLEM in $log (command status was $rc):"
		printf '%s\n' "$bad" | head -n 40 | sed 's/^/vm:   /' >&2
		rc=126
	fi
fi
log "vm: rc=$rc wall=${wall}s boot-to-command=${start:-?}s guest-uptime-at-exit=${end:-?}s"
exit "$rc"
