#!/bin/bash
# SPDX-License-Identifier: MIT
#
# hcomm_coll_perf on this machine's own CPU (no emulator), as root:
#
#   scripts/coll-native.sh [--rate RATE] [--np N] [--no-mpi] \
#       [-- hcomm_coll_perf arguments]
#
# N ranks (default 2), each in a mount namespace of its own with a
# private /dev/shm, so that libhcomm takes them for N hosts (tcp between
# them, and the ring defaults of a communicator that spans hosts), all in
# a network namespace made for the run, whose loopback stands for the
# link: --rate limits it with tc's tbf (RATE as tc writes it: 2gbit,
# 10gbit; default none, unlimited).  Nothing touches the machine's own
# network; the namespace goes away with the run.
#
# With Open MPI's mpirun (and not --no-mpi) the ranks run under it, its
# tcp btl on that loopback, and hcomm_coll_perf times Open MPI's
# collectives in the same processes (the hcomm/MPI column); without it
# they are started here and the bootstrap meets on 127.0.0.1.
#
# Default arguments: an fp32 allreduce from 1 to 64 MiB by 4, 10
# iterations after 3 warm-ups, checked, with the fp16-compressed one
# beside it (-z 1).  The comparison the emulated VMs cannot make
# (Documentation/collectives.rst, "On the build host"): there every
# floating-point instruction is emulated, here conversions and sums run
# at the CPU's speed and the link is the limit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
bench=${HCOMM_COLL_PERF:-$repo/build/bench/hcomm_coll_perf}

rate=none np=2 mpi=1
while [ $# -gt 0 ]; do
	case $1 in
	--rate) rate=$2; shift 2 ;;
	--np) np=$2; shift 2 ;;
	--no-mpi) mpi=0; shift ;;
	--) shift; break ;;
	*) echo "coll-native: unknown option $1" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || set -- -t allreduce -b 1M -e 64M -f 4 -n 10 -w 3 -c 1 -z 1
case $np in
''|*[!0-9]*) echo "coll-native: --np $np: a number" >&2; exit 2 ;;
esac
if [ "$np" -lt 1 ] || [ "$np" -gt 16 ]; then
	echo "coll-native: --np $np: 1 to 16" >&2
	exit 2
fi
[ -x "$bench" ] || { echo "coll-native: no $bench (make bench)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "coll-native: run as root" >&2; exit 2; }
command -v mpirun > /dev/null || mpi=0

if [ -z "${COLL_NATIVE_NS:-}" ]; then
	# a network namespace of our own, gone when the last process exits
	nompi=()
	[ "$mpi" = 1 ] || nompi=(--no-mpi)
	COLL_NATIVE_NS=1 exec unshare -n "$0" --rate "$rate" --np "$np" \
		"${nompi[@]}" -- "$@"
fi

ip link set lo up || exit 1
if [ "$rate" != none ]; then
	tc qdisc add dev lo root tbf rate "$rate" burst 256k latency 20ms ||
		{ echo "coll-native: tc tbf rate $rate failed" >&2; exit 1; }
fi
tmp=$(mktemp -d /tmp/coll-native.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
# one "host" per rank: a private /dev/shm (libhcomm's host nonce lives
# there), the rest of the file system shared
cat > "$tmp/host.sh" << 'EOF'
#!/bin/sh
exec unshare -m sh -c 'mount -t tmpfs tmpfs /dev/shm && exec "$@"' sh "$@"
EOF
chmod +x "$tmp/host.sh"
export LD_LIBRARY_PATH=$repo/build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export HCOMM_TRANSPORT=${HCOMM_TRANSPORT:-tcp}
echo "# coll-native: $np ranks, one mount namespace each, loopback rate" \
	"$rate, $(nproc) CPUs, $([ "$mpi" = 1 ] && echo "under mpirun" ||
	echo "no mpirun"): $(basename "$bench") $*"
if [ "$mpi" = 1 ]; then
	exec timeout 1800 mpirun --allow-run-as-root --oversubscribe -np "$np" \
		--mca btl tcp,self --mca btl_tcp_if_include lo \
		--mca oob_tcp_if_include lo -x LD_LIBRARY_PATH -x HCOMM_TRANSPORT \
		"$tmp/host.sh" "$bench" "$@"
fi
pids=()
for ((r = np - 1; r >= 0; r--)); do
	HCOMM_RANK=$r HCOMM_WORLD_SIZE=$np HCOMM_JOB_ID=coll-native-$$ \
		HCOMM_ROOT_ADDR=127.0.0.1:25990 \
		timeout 1800 "$tmp/host.sh" "$bench" "$@" \
		> "$tmp/out.$r" 2>&1 &
	pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
	wait "$p" || rc=1
done
cat "$tmp/out.0"
for ((r = 1; r < np; r++)); do
	[ -s "$tmp/out.$r" ] && sed "s/^/rank $r: /" "$tmp/out.$r"
done
exit $rc
