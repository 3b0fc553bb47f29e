#!/bin/bash
# netvm example: vm2 exits 1 after a barrier, the others 0, so the run must
# end non-zero with "netvm: vm2 rc=1".
#
#   scripts/netvm.sh run -- bash scripts/netvm-examples/fail.sh
set -u
. "$NETVM_RUN/lib.sh"
barrier up || exit 1
echo "vm$VM_ID of $NVM: $(ip -br addr show eth0)"
[ "$VM_ID" != 2 ]
