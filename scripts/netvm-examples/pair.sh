#!/bin/bash
# netvm example, 2 VMs: ping, RDMA write bandwidth over soft-RoCE (rxe0) and
# TCP (iperf3) from vm2 to vm1. Exits 0 when all three worked.
#
#   scripts/netvm.sh run -- bash scripts/netvm-examples/pair.sh
set -u
. "$NETVM_RUN/lib.sh"

# Wait (at most 30 s) until a TCP port listens here.
wait_listen() {
	local t
	for (( t = 0; t < 300; t++ )); do
		ss -ltn | grep -q ":$1 " && return 0
		sleep 0.1
	done
	echo "port $1 never listened" >&2
	return 1
}

server=$(ip_of 1)
rc=0
if [ "$VM_ID" = 1 ]; then
	# Servers first, then the barrier the client waits for.
	timeout 120 ib_write_bw -d rxe0 -x 1 -F -D 3 > /tmp/wbw.log 2>&1 &
	wbw=$!
	wait_listen 18515 || rc=1
	timeout 120 iperf3 -s -1 > /tmp/iperf3.log 2>&1 &
	ipf=$!
	wait_listen 5201 || rc=1
	barrier servers || rc=1
	wait "$wbw" || { echo "ib_write_bw server failed:"; cat /tmp/wbw.log; rc=1; }
	wait "$ipf" || { echo "iperf3 server failed:"; cat /tmp/iperf3.log; rc=1; }
	barrier end || rc=1
else
	barrier servers || exit 1
	echo "== ping $server"
	busybox ping -c 10 -i 0.2 "$server" | tail -n 2 || rc=1
	echo "== ib_write_bw -d rxe0 -x 1 -F -D 3 $server"
	if timeout 120 ib_write_bw -d rxe0 -x 1 -F -D 3 "$server" > /tmp/wbw.log 2>&1; then
		grep -E '^ *#bytes|^ *[0-9]+ +[0-9]+ ' /tmp/wbw.log
	else
		echo "ib_write_bw failed:"; cat /tmp/wbw.log; rc=1
	fi
	echo "== iperf3 -c $server -t 3"
	timeout 120 iperf3 -c "$server" -t 3 -f m > /tmp/iperf3.log 2>&1 || rc=1
	grep -E 'sender|receiver|error' /tmp/iperf3.log || cat /tmp/iperf3.log
	barrier end || rc=1
fi
exit "$rc"
