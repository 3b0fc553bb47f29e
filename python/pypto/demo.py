# SPDX-License-Identifier: MIT
"""python3 -m pypto.demo: the distributed tiled SGEMM of `make demo`, from
Python, on the ranks of any hcomm job (no VMs: a rank table, HCOMM_RANK /
HCOMM_WORLD_SIZE / HCOMM_ROOT_ADDR, Open MPI, Slurm or PMI; one process
alone is a job of one rank).

    python3 -m pypto.demo [--size N] [--tile T] [--prefetch D]
                          [--no-compress] [--threshold BYTES] [--seed S]
                          [--timeline FILE]

Every rank builds the same A and B (N x N float32, from --seed), computes
its slice of the K dimension with pypto.matmul (libpypto's tiled SGEMM),
and pypto.allreduce sums the partial products over the communicator,
FP16-compressed on the wire from --threshold bytes on.  Rank 0 prints the
configuration, the transport, the times, GFLOP/s and the ratio to one
numpy (OpenBLAS) product of the whole matrices, the diagnosis of its
run, and checks C against that product element by element:
|C - C_ref| <= (ranks + 1) 2^-11 S + 1e-6 N max(1, |C_ref|), S the sum
over the ranks of |partial C| (the compression's bound, as pypto_dist).
Every rank learns the verdict; the exit status is 0 when it passed.
"""
import argparse
import sys
import time

import numpy as np

import pypto
from pypto import hcomm


def _operands(n, seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    return a, b


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m pypto.demo",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--tile", type=int, default=128)
    ap.add_argument("--prefetch", type=int, default=4)
    ap.add_argument("--no-compress", dest="compress", action="store_false")
    ap.add_argument("--threshold", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeline", default=None,
                    help="rank 0 writes its run's HTML timeline here")
    o = ap.parse_args(argv)
    if o.size < 16 or o.tile < 8:
        ap.error("--size is at least 16 and --tile at least 8")

    cfg = hcomm.Config()
    cfg.enable_fp16_compress = o.compress
    cfg.comp_threshold = o.threshold
    pypto_config = {"prefetch_depth": o.prefetch,
                    "tile_size": (o.tile, o.tile), "double_buffering": True}
    with hcomm.Communicator(cfg) as comm:
        me, np_ = comm.rank, comm.size
        if np_ > o.size:
            print("pypto.demo: %d ranks for K = %d" % (np_, o.size),
                  file=sys.stderr)
            return 2
        n = o.size
        k0, k1 = n * me // np_, n * (me + 1) // np_
        gflop = 2.0 * n ** 3 / 1e9
        if me == 0:
            print("pypto.demo: C = A B, %d x %d float32 (%.2f GFLOP) split "
                  "along K over %d ranks (transport %s), tiles %d, prefetch "
                  "%d, FP16 compression %s" % (
                      n, n, gflop, np_, comm.transport, o.tile, o.prefetch,
                      "from %d bytes" % o.threshold if o.compress else "off"),
                  flush=True)
        a, b = _operands(n, o.seed)
        t0 = time.perf_counter()
        # the device buffer is this rank's window: the transfer tiles go
        # through libhcomm (/dev/hcomm where the module is loaded)
        c, run = pypto.profile(pypto.matmul, a[:, k0:k1], b[k0:k1, :],
                               config=pypto_config, comm=comm)
        t_mm = time.perf_counter() - t0
        partial = np.abs(c)
        t1 = time.perf_counter()
        pypto.allreduce(c, comm, op="sum", compress=o.compress)
        t_ar = time.perf_counter() - t1
        t_run = time.perf_counter() - t0
        # S: the sum over the ranks of |partial C|, uncompressed
        pypto.allreduce(partial, comm, op="sum", compress=False)
        bad = np.zeros(1, dtype=np.uint64)
        if me == 0:
            t2 = time.perf_counter()
            ref = a @ b
            t_ref = time.perf_counter() - t2
            d = np.abs(c.astype(np.float64) - ref)
            tol = ((np_ + 1) * 2.0 ** -11 * partial +
                   1e-6 * n * np.maximum(1, np.abs(ref)))
            bad[0] = np.count_nonzero(~(d <= tol))
            rel = np.max(d / np.maximum(partial, 1e-30))
            st = run.stats
            print("run: %.2f s, %.2f GFLOP/s over %d ranks (matmul of the "
                  "slice %.2f s, allreduce %.2f s)" % (
                      t_run, gflop / t_run, np_, t_mm, t_ar))
            print("  pipeline: overlap efficiency %.2f, worker utilisation "
                  "%.2f" % (st["overlap_eff"], st["worker_util"]))
            print("  one numpy product of the whole matrices on rank 0: "
                  "%.2f s, %.2f GFLOP/s; ratio %.2f (the job's GFLOP/s over "
                  "it)" % (t_ref, gflop / t_ref, t_ref / t_run))
            print("  check: max |C - C_ref| %.3g, max %.3g of sum |partial "
                  "C| (bound %.3g), %d elements out of bounds" % (
                      d.max(), rel, (np_ + 1) * 2.0 ** -11, bad[0]))
            print("\ndiagnosis of rank 0's run:\n" + run.diagnosis["text"])
            if o.timeline:
                run.write_timeline(o.timeline)
                print("timeline: %s" % o.timeline)
        pypto.allreduce(bad, comm, op="sum", compress=False)
        ok = int(bad[0]) == 0
        print("r%d: pypto.demo: %s" % (me, "C verified against numpy" if ok
                                       else "FAIL: %d elements of C out of "
                                       "bounds" % int(bad[0])), flush=True)
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
