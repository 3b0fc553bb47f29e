#!/bin/bash
# netvm example host script (--host-script): waits until every guest
# command started, then shows the private namespace's links and bridges.
# Runs on the host with RUN, N, NICS and NETVM exported.
#
#   scripts/netvm.sh run --host-script scripts/netvm-examples/host-ns.sh \
#           -- bash scripts/netvm-examples/fail.sh
set -u
for (( t = 0; t < 600; t++ )); do
	n=0
	for f in "$RUN"/started.*; do [ -e "$f" ] && n=$((n + 1)); done
	[ "$n" -ge "$N" ] && break
	sleep 0.5
done
echo "host: $n of $N guests started"
"$NETVM" ns "$RUN" ip -br link
"$NETVM" ns "$RUN" bridge link
