#!/bin/bash
# netvm example: reach a barrier, then sleep (default 600 s). For testing
# the runner's --timeout and Ctrl-C: no qemu and no namespace holder may be
# left afterwards (pgrep -f qemu-system prints nothing).
#
#   scripts/netvm.sh run --timeout 60 -- bash scripts/netvm-examples/sleep.sh
set -u
. "$NETVM_RUN/lib.sh"
barrier up || exit 1
echo "vm$VM_ID sleeping ${1:-600}s"
sleep "${1:-600}"
