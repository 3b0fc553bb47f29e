#!/bin/bash
# In each VM of `make demo`'s distributed run (scripts/netvm.sh run --n 2
# -- bash scripts/dist-guest.sh [pypto_dist args]): load hcomm.ko, start
# this VM's 2 of the 4 ranks of build/pypto/pypto_dist through
# hcomm_vm_launch, all meeting at rank 0 in vm1.  Rank 0 writes
# timeline.html, trace.json and its C (C.f32, for pypto_dist --verify on
# the host) under $NETVM_RUN/out (kept in the log dir).
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$NETVM_RUN/lib.sh"
if [ -n "${HCOMM_KO:-}" ] && [ ! -e /dev/hcomm ]; then
	insmod "$HCOMM_KO" && chmod 0666 /dev/hcomm || {
		echo "dist-guest: insmod $HCOMM_KO failed"; exit 1; }
fi
ppn=2
size=$((NVM * ppn))
ranks=$(seq -s, $(((VM_ID - 1) * ppn)) $((VM_ID * ppn - 1)))
out=$NETVM_RUN/out
mkdir -p "$out"
barrier dist-start 120 || { echo "dist-guest: the other VM never came"; exit 1; }
# OpenBLAS: qemu64 has no AVX; its Prescott kernels are what runs here.
"$repo/build/lib/vm/hcomm_vm_launch" -n "$size" -s "$ranks" -t 1500 \
	-e HCOMM_ROOT_ADDR="$(ip_of 1):23999" -e HCOMM_JOB_ID=demo-dist \
	-e OPENBLAS_CORETYPE=Prescott -- \
	"$repo/build/pypto/pypto_dist" --out "$out" --save "$out/C.f32" "$@" \
	< /dev/null
rc=$?
barrier dist-end 300
exit $rc
