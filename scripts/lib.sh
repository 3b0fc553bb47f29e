# Shared helpers for scripts/*.sh (sourced, not run).

HCOMM_CACHE=${HCOMM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hcomm}
mkdir -p "$HCOMM_CACHE"

log() { printf "[hcomm %d:%02d] %s\n" $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2; }

# A console line that says the guest hangs (hung task, lockup, RCU stall):
# vm-run.sh and netvm.sh stop such a guest HCOMM_VM_HANG_GRACE s (60) later.
HCOMM_HANG_PAT='INFO: task .* blocked for more than|soft lockup|hard LOCKUP|rcu_[a-z]+ (self-)?detected stall|RCU stall'
HCOMM_VM_HANG_GRACE=${HCOMM_VM_HANG_GRACE:-60}

# Kernel problems on a VM console, any of which fails the run (vm-run.sh,
# netvm.sh): lockdep's reports, not the bare word (boot prints "RCU
# lockdep checking is enabled" and every debug-kernel stack has lockdep_*
# frames), the hangs above among them.
HCOMM_PROBLEM_PAT='BUG:|WARNING:|KASAN|possible circular locking|possible recursive locking'
HCOMM_PROBLEM_PAT="$HCOMM_PROBLEM_PAT|inconsistent lock state|INFO: lockdep is turned off|DEBUG_LOCKS_WARN_ON"
HCOMM_PROBLEM_PAT="$HCOMM_PROBLEM_PAT|turning off the locking correctness validator|lockdep: .*too low"
HCOMM_PROBLEM_PAT="$HCOMM_PROBLEM_PAT|kmemleak: .* new suspected memory leaks"
HCOMM_PROBLEM_PAT="$HCOMM_PROBLEM_PAT|INFO: task .* blocked|Call Trace|Kernel panic|Oops|general protection fault"
HCOMM_PROBLEM_PAT="$HCOMM_PROBLEM_PAT|$HCOMM_HANG_PAT|UBSAN:"
# Boot chatter of the debug kernel that merely names these facilities
# (exact lines only: a broad allow could hide "BUG: MAX_LOCKDEP_... too low").
HCOMM_PROBLEM_ALLOW='\] Lock dependency validator: |\] kasan: KernelAddressSanitizer initialized'
HCOMM_PROBLEM_ALLOW="$HCOMM_PROBLEM_ALLOW|\] kmemleak: Kernel memory leak detector initialized"
# Print the problem lines of console $1: kernel lines only (a printk
# timestamp), so that program output cannot trip it.
hcomm_kernel_problems() {
	grep -aE '\[ *[0-9]+\.[0-9]+\] ' "$1" | grep -aE "$HCOMM_PROBLEM_PAT" |
		grep -avE "$HCOMM_PROBLEM_ALLOW" || true
}
die() { echo "[hcomm] error: $*" >&2; exit 1; }

# Extract Debian's linux-source-6.12 once into the cache; print its path.
hcomm_kernel_source() {
	_ver=$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null) ||
		die "linux-source-6.12 is not installed"
	_dir="$HCOMM_CACHE/linux-source-$_ver"
	# One extraction at a time (make check's lint and its background
	# kernel build both get here): the second waits, then reuses it.
	if [ ! -f "$_dir/.hcomm-extracted" ]; then
		(
			flock 8
			[ -f "$_dir/.hcomm-extracted" ] && exit 0
			log "extracting linux-source-6.12 $_ver"
			rm -rf "$_dir" "$_dir.tmp"
			mkdir -p "$_dir.tmp" &&
			tar -C "$_dir.tmp" --strip-components=1 \
				-xf /usr/src/linux-source-6.12.tar.xz &&
			touch "$_dir.tmp/.hcomm-extracted" &&
			mv "$_dir.tmp" "$_dir"
		) 8> "$_dir.lock" || die "could not extract linux-source-6.12"
	fi
	echo "$_dir"
}

# tcg_crash CONSOLE...: 0 when a guest died in a trap whose call trace
# names no hcomm function: an int3 in kernel text being patched (static
# keys flipped while another vCPU runs it: multi-threaded TCG, seen in
# pick_task_fair during the cgroup bandwidth test), or a trace through
# rdma_rxe, virtio_net or the network softirq (the stock kernels' rxe
# under TCG, seen with and without hcomm.ko loaded), or the warning of a
# single-step #DB in kernel mode (exc_debug_kernel: the kernel never sets
# TF there; its comment names QEMU leaking #DB into the guest).
# Or any trap whose register dump shows an EFLAGS with a reserved bit set
# (3, 5, 15, 22-31): no instruction can load one on a real CPU, and every
# rxe crash above had one (the low half of a kernel pointer, 82ac2b02,
# c23bbb02): the emulator corrupted the flags, whatever the call trace.
# Documentation/testbed.rst, "Guest crashes in rxe (and int3 traps)".
tcg_crash() {
	local traces fl
	traces=$(cat "$@" 2>/dev/null | sed -n '/Call Trace:/,/end trace/p')
	[ -n "$traces" ] || return 1
	# a "? fn" line is a stale word on the stack, not a frame
	printf '%s\n' "$traces" | grep -v ' ? ' | grep -qE '\[hcomm\]|hcomm_' &&
		return 1
	# (sourced by sh scripts too: no bash-only syntax in this file;
	# the dump prints EFLAGS as 8 hex digits)
	# shellcheck disable=SC2013
	for fl in $(cat "$@" 2>/dev/null |
		    grep -aoE 'EFLAGS: [0-9a-f]{8}' | sed 's/EFLAGS: //' | sort -u); do
		[ $(( 0x$fl & 0xffc08028 )) != 0 ] && return 0
	done
	cat "$@" 2>/dev/null | grep -aqE 'Oops: int3' && return 0
	cat "$@" 2>/dev/null |
		grep -aqE 'WARNING: CPU: [0-9]+ PID: [0-9]+ at arch/x86/kernel/traps\.c:[0-9]+ exc_debug_kernel' &&
		return 0
	printf '%s\n' "$traces" | grep -qE 'rxe_|virtnet|virtio_net|net_rx_action'
}
