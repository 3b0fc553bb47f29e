#!/bin/bash
# netvm example, any N and NICS: every VM pings every other VM on every NIC
# and (with rxe) checks that each rxeJ is ACTIVE.
#
#   scripts/netvm.sh run --n 4 -- bash scripts/netvm-examples/mesh.sh
#   scripts/netvm.sh run --n 4 --nics 2 --mem 512 -- bash scripts/netvm-examples/mesh.sh
set -u
. "$NETVM_RUN/lib.sh"
rc=0
barrier up || exit 1
for (( j = 0; j < NETVM_NICS; j++ )); do
	if [ "$NETVM_RXE" = 1 ]; then
		rdma link show "rxe$j/1" | grep -q 'state ACTIVE' || { echo "rxe$j not ACTIVE"; rc=1; }
	fi
	for (( v = 1; v <= NVM; v++ )); do
		[ "$v" = "$VM_ID" ] && continue
		if out=$(busybox ping -c 3 -i 0.2 -W 2 "$(ip_of "$v" "$j")" 2>&1); then
			echo "vm$VM_ID -> vm$v eth$j: $(echo "$out" | tail -n 1)"
		else
			echo "vm$VM_ID -> vm$v eth$j: FAILED"; echo "$out" | tail -n 2; rc=1
		fi
	done
done
barrier end || rc=1
exit "$rc"
