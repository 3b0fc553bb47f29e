#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The network benchmark, run in both VMs of the test bed:
#
#   scripts/netvm.sh run --n 2 -- bash scripts/net-bench-guest.sh
#
# In one run, on the same two VMs and rxe devices: ib_write_bw (each size
# for 2 s, as many in flight as hcomm puts) and
# ib_write_lat (perftest) over rxe0, iperf3 over TCP, then
# build/bench/hcomm_net_bench with HCOMM_TRANSPORT=rdma and =tcp (rank 0
# on vm2 putting into rank 1 on vm1).  vm2 prints a table of put bandwidth
# by size and 8-byte latency with the ratios hcomm / tool (rdma against
# perftest, tcp against iperf3), the 256 KiB row marked, and the probe's
# own figures.  HCOMM_NET_BENCH_MAX (bytes, default 64 MiB) is the
# largest size of every bandwidth run (make demo's short form: 4 MiB).
# Exit status 0 when every step ran.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
bench=${HCOMM_NET_BENCH:-$repo/build/bench/hcomm_net_bench}
. "$NETVM_RUN/lib.sh"

out=$NETVM_RUN/out
mkdir -p "$out"
server=$(ip_of 1)
rc=0

wait_listen() {
	local t
	for (( t = 0; t < 300; t++ )); do
		ss -ltn | grep -q ":$1 " && return 0
		sleep 0.1
	done
	return 1
}

# hb RUN PORT MAX: rank 0 on vm2, rank 1 on vm1; RUN is the transport
# ("auto": the probe's choice, its decision table printed by rank 0), or
# tcpnd: tcp with HCOMM_TCP_DIGEST=none (no payload CRC32C); *poll: the
# latency only, every wait polling (HCOMM_SPIN_US=1 s) as ib_write_lat
# does, where by default a one-CPU guest's waits sleep at once
hb() {
	local t=$1 dg=crc32c spin=

	[ "$t" = tcpnd ] && t=tcp dg=none
	[ "${t%poll}" != "$t" ] && t=${t%poll} spin=1000000
	HCOMM_RANK=$((VM_ID == 2 ? 0 : 1)) HCOMM_WORLD_SIZE=2 \
	HCOMM_ROOT_ADDR=$(ip_of 2):$2 HCOMM_TRANSPORT=$t HCOMM_JOB_ID=nb-$1 \
	HCOMM_TCP_DIGEST=$dg env ${spin:+HCOMM_SPIN_US=$spin} \
	timeout 300 "$bench" --max "$3"
}
bmax=${HCOMM_NET_BENCH_MAX:-$((64 << 20))}
runs="rdma:25001:$bmax tcp:25002:$bmax
tcpnd:25004:$bmax auto:25003:4096 rdmapoll:25005:8 tcppoll:25006:8"

# ib_write_bw for each size the bench puts, for 2 s each (its
# -a mode runs a fixed count per size, 30 with -n 30: mostly start-up at
# the small sizes, so a weak baseline), as many in flight as hcomm puts
# (bw_depth: 16, or 4 MiB's worth up to 256, the bench's depth_of()).
bw_sizes=
for s in 8 64 512 4096 32768 65536 262144 1048576 4194304 16777216 67108864; do
	[ "$s" -le "$bmax" ] && bw_sizes="$bw_sizes $s"
done
bw_secs=${HCOMM_NET_BENCH_BW_SECS:-2}
# From 16 MiB a count (-D counts too few messages of that size in 2 s)
bw_depth() { local d=$(( (4 << 20) / $1 )); [ "$d" -lt 16 ] && d=16; [ "$d" -gt 256 ] && d=256; echo "$d"; }
bw_len() { if [ "$1" -ge $((16 << 20)) ]; then echo "-n 6"; else echo "-D $bw_secs"; fi; }

if [ "$VM_ID" = 1 ]; then
	for s in $bw_sizes; do
		timeout 120 ib_write_bw -d rxe0 -x 1 -F -s "$s" -t "$(bw_depth "$s")" \
			$(bw_len "$s") --report_gbits > /tmp/wbw.srv 2>&1 &
		wait_listen 18515 || rc=1
		barrier "bw-$s" || rc=1
		wait $! || rc=1
	done
	timeout 120 ib_write_lat -d rxe0 -x 1 -F -s 8 -n 500 \
		> /tmp/wlat.srv 2>&1 &
	wait_listen 18515 || rc=1
	barrier lat || rc=1
	wait $! || rc=1
	timeout 120 iperf3 -s -1 > /tmp/ipf.srv 2>&1 &
	wait_listen 5201 || rc=1
	barrier ipf || rc=1
	wait $! || rc=1
	for r in $runs; do
		IFS=: read -r t port max <<< "$r"
		barrier "hb-$t" || rc=1
		hb "$t" "$port" "$max" > /dev/null || rc=1
	done
	barrier done || rc=1
	exit $rc
fi

: > "$out/ib_write_bw.txt"
for s in $bw_sizes; do
	barrier "bw-$s" || rc=1
	timeout 120 ib_write_bw -d rxe0 -x 1 -F -s "$s" -t "$(bw_depth "$s")" $(bw_len "$s") \
		--report_gbits "$server" >> "$out/ib_write_bw.txt" 2>&1 || rc=1
done
barrier lat || rc=1
timeout 120 ib_write_lat -d rxe0 -x 1 -F -s 8 -n 500 "$server" \
	> "$out/ib_write_lat.txt" 2>&1 || rc=1
barrier ipf || rc=1
timeout 120 iperf3 -c "$server" -t 5 -J > "$out/iperf3.json" 2>&1 || rc=1
for r in $runs; do
	IFS=: read -r t port max <<< "$r"
	barrier "hb-$t" || rc=1
	hb "$t" "$port" "$max" > "$out/hcomm-$t.txt" 2>&1 || rc=1
done
barrier done || rc=1

python3 - "$out" <<'EOF' || rc=1
import json, re, sys
out = sys.argv[1]

def rows(path, pat):
    try:
        return [re.split(r"\s+", l.strip()) for l in open(path)
                if re.match(pat, l)]
    except OSError:
        return []

# ib_write_bw --report_gbits: bytes iterations peak[Gb/s] average[Gb/s] ...
ibw = {int(r[0]): float(r[3]) * 125.0
       for r in rows(out + "/ib_write_bw.txt", r"^\s*\d+\s+\d+\s+[\d.]+")}
# ib_write_lat: bytes iterations t_min t_max t_typical ...
lat = rows(out + "/ib_write_lat.txt", r"^\s*8\s+\d+\s+[\d.]+")
ilat = float(lat[0][4]) if lat else None
try:
    j = json.load(open(out + "/iperf3.json"))
    ipf = j["end"]["sum_received"]["bits_per_second"] / 8e6
except Exception:
    ipf = None
hc = {}
for t in ("rdma", "tcp", "tcpnd", "auto", "rdmapoll", "tcppoll"):
    put = {}
    l8 = l8b = None
    probe = ""
    for l in open(out + "/hcomm-%s.txt" % t, errors="replace"):
        f = l.split()
        if len(f) >= 3 and f[0] == "put":
            put[int(f[1])] = float(f[2])
        elif len(f) == 2 and f[0] == "lat8":
            l8 = float(f[1])
        elif len(f) == 2 and f[0] == "lat8b":
            l8b = float(f[1])
        elif l.startswith("rank 0 -> 1"):
            probe = l.strip()
    hc[t] = (put, l8, probe, l8b)

def ratio(a, b):
    return "%.2f" % (a / b) if a and b else "-"

print("hcomm_net_bench: two VMs, put bandwidth in MB/s (10^6 B/s), "
      "8-byte latency in us")
print("%-10s %10s %12s %6s %10s %10s %6s %10s %6s" %
      ("size", "rdma", "ib_write_bw", "ratio", "tcp", "iperf3", "ratio",
       "tcp-nodg", "ratio"))
for s in sorted(set(hc["rdma"][0]) | set(hc["tcp"][0])):
    r = hc["rdma"][0].get(s)
    t = hc["tcp"][0].get(s)
    n = hc["tcpnd"][0].get(s)
    b = ibw.get(s)
    big = s >= 64 << 10
    mark = "  <- 256 KiB" if s == 256 << 10 else ""
    print("%-10d %10s %12s %6s %10s %10s %6s %10s %6s%s" % (
        s, "%.2f" % r if r else "-", "%.2f" % b if b else "-",
        ratio(r, b), "%.2f" % t if t else "-",
        "%.2f" % ipf if ipf else "-",
        ratio(t, ipf) if big else "-", "%.2f" % n if n else "-",
        ratio(n, ipf) if big else "-", mark))
print("%-10s %10s %12s %6s %10s" % (
    "lat8", "%.1f" % hc["rdma"][1] if hc["rdma"][1] else "-",
    "%.1f" % ilat if ilat else "-",
    ratio(hc["rdma"][1], ilat),
    "%.1f" % hc["tcp"][1] if hc["tcp"][1] else "-"))
print("%-10s %10s %12s %6s %10s" % (
    "lat8 blk", "%.1f" % hc["rdma"][3] if hc["rdma"][3] else "-",
    "%.1f" % ilat if ilat else "-",
    ratio(hc["rdma"][3], ilat),
    "%.1f" % hc["tcp"][3] if hc["tcp"][3] else "-"))
for k, i in (("lat8 poll", 1), ("lat8b poll", 3)):
    v, w = hc["rdmapoll"][i], hc["tcppoll"][i]
    print("%-10s %10s %12s %6s %10s" % (
        k, "%.1f" % v if v else "-", "%.1f" % ilat if ilat else "-",
        ratio(v, ilat), "%.1f" % w if w else "-"))
print("ratio: hcomm / tool (bandwidth: higher is better; latency: lower "
      "is better); tcp against iperf3 from 64 KiB; tcp-nodg: "
      "HCOMM_TCP_DIGEST=none; lat8: half an 8-byte put_signal_nb "
      "ping-pong, lat8 blk: with blocking hcomm_put_signal(); poll: "
      "HCOMM_SPIN_US=1000000, every wait polls as ib_write_lat does "
      "(by default a one-CPU guest's waits sleep at once)")
print("probe (HCOMM_TRANSPORT=auto): " + (hc["auto"][2] or "-"))
print("auto: 8-byte latency %s us" % (
    "%.1f" % hc["auto"][1] if hc["auto"][1] else "-"))
EOF
exit $rc
