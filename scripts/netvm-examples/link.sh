#!/bin/bash
# netvm example, 2 VMs: vm2 has the host cut its own link in both ways and
# checks what it sees.
#   hostctl link 2 0 off: carrier lost, rxe0 port DOWN, ping fails; on: back.
#   hostctl tap 2 0 down: carrier and rxe0 stay up, ping fails; up: back.
#
#   scripts/netvm.sh run -- bash scripts/netvm-examples/link.sh
set -u
. "$NETVM_RUN/lib.sh"

peer=$(ip_of 1)
rc=0
check() { # what expected actual
	if [ "$2" = "$3" ]; then echo "ok   $1: $3"; else echo "FAIL $1: $3 (expected $2)"; rc=1; fi
}
carrier() { cat /sys/class/net/eth0/carrier 2>/dev/null || echo 0; }
port() { rdma link show rxe0/1 | sed -n 's/.* state \([A-Z_]*\) .*/\1/p'; }
pings() { busybox ping -c 2 -W 1 "$peer" > /dev/null 2>&1 && echo yes || echo no; }
# Wait at most 10 s for "$@" to print the wanted value; print the last value.
await() {
	local want=$1 v t
	shift
	for (( t = 0; t < 50; t++ )); do
		v=$("$@")
		[ "$v" = "$want" ] && break
		sleep 0.2
	done
	echo "$v"
}

barrier up || exit 1
if [ "$VM_ID" = 2 ]; then
	check "ping before" yes "$(pings)"
	t0=$(now)
	hostctl link 2 0 off || rc=1
	check "carrier after set_link off" 0 "$(await 0 carrier)"
	echo "     (carrier seen down $(echo "$(now) - $t0" | bc) s after the request)"
	check "rxe0 port after set_link off" DOWN "$(await DOWN port)"
	check "ping while off" no "$(pings)"
	hostctl link 2 0 on || rc=1
	check "carrier after set_link on" 1 "$(await 1 carrier)"
	check "rxe0 port after set_link on" ACTIVE "$(await ACTIVE port)"
	check "ping after on" yes "$(await yes pings)"

	hostctl tap 2 0 down || rc=1
	check "carrier after tap down" 1 "$(carrier)"
	check "rxe0 port after tap down" ACTIVE "$(port)"
	check "ping while tap down" no "$(pings)"
	hostctl tap 2 0 up || rc=1
	check "ping after tap up" yes "$(await yes pings)"

	hostctl link 3 0 off > /dev/null 2>&1 && { echo "FAIL hostctl accepted VM 3"; rc=1; }
fi
barrier end || rc=1
exit "$rc"
