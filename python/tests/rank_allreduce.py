# SPDX-License-Identifier: MIT
"""One rank of test_hcomm.py's allreduce job (run by the test, not by
pytest): HCOMM_RANK, HCOMM_WORLD_SIZE and HCOMM_ROOT_ADDR are set.
Prints one line per check, "ok ..." or "FAIL ...", and exits 0 only if
all passed."""
import os
import sys

import numpy as np

import hcomm
import pypto

fails = 0


def check(cond, what):
    global fails
    print(("ok " if cond else "FAIL ") + what, flush=True)
    fails += 0 if cond else 1


def data(rank, n, dtype, seed):
    rng = np.random.default_rng(seed * 100 + rank)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(-1, 1, n).astype(dtype)
    return rng.integers(-50 if np.dtype(dtype).kind == "i" else 0, 50,
                        n).astype(dtype)


hcomm_config = hcomm.Config()
hcomm_config.enable_fp16_compress = True
hcomm_config.comp_threshold = 1024
with hcomm.Communicator(hcomm_config) as comm:
    r, n = comm.rank, comm.size
    want_xp = os.environ.get("PYPTO_TEST_TRANSPORT", "tcp")
    check(comm.transport == want_xp, "transport %s (want %s)"
          % (comm.transport, want_xp))
    for dt in (np.int32, np.int64, np.uint8, np.float64):
        for op in ("sum", "max", "min"):
            x = data(r, 1001, dt, 1)
            ref = [data(i, 1001, dt, 1) for i in range(n)]
            want = {"sum": np.sum, "max": np.max, "min": np.min}[op](
                np.stack(ref), axis=0).astype(dt)
            got = pypto.allreduce(x, comm, op=op)
            check(got is x, "%s %s in place" % (np.dtype(dt), op))
            ok = (np.array_equal(got, want) if np.dtype(dt).kind != "f"
                  else np.allclose(got, want, rtol=1e-12, atol=1e-12))
            check(ok, "%s %s: %d elements equal the reference"
                  % (np.dtype(dt), op, x.size))
    # fp32, out of place, no compression: fp32 rounding only
    x = data(r, 5000, np.float32, 2)
    exact = np.sum(np.stack([data(i, 5000, np.float32, 2).astype(np.float64)
                             for i in range(n)]), axis=0)
    scale = np.sum(np.abs(np.stack([data(i, 5000, np.float32, 2)
                                    for i in range(n)])), axis=0)
    out = np.empty_like(x)
    comm.allreduce(x, out=out, compress=False)
    err = np.max(np.abs(out - exact) / np.maximum(scale, 1e-30))
    check(err <= n * 2.0 ** -23, "fp32 sum uncompressed: max error %.2e of "
          "sum |x| (bound %.2e)" % (err, n * 2.0 ** -23))
    # the seed's compression: fp16 on the wire from 1024 bytes
    out16 = np.empty_like(x)
    pypto.allreduce(x, comm, compress=True, out=out16)
    err16 = np.max(np.abs(out16 - exact) / np.maximum(scale, 1e-30))
    bound = (n + 1) * 2.0 ** -11
    check(err16 <= bound and not np.array_equal(out16, out),
          "fp32 sum compressed: max error %.2e of sum |x| (bound %.2e), "
          "differs from fp32: fp16 was on the wire" % (err16, bound))
    # every rank got the same bits
    digest = np.frombuffer(out16.tobytes()[:8 * (out16.nbytes // 8)],
                           dtype=np.uint64).sum(dtype=np.uint64)
    d = np.array([digest], dtype=np.uint64)
    comm.allreduce(d, op="max")
    e = np.array([digest], dtype=np.uint64)
    comm.allreduce(e, op="min")
    check(d[0] == e[0] == digest, "compressed result identical on every rank")
    # bad arguments
    try:
        comm.allreduce(np.zeros(4, np.complex64))
        check(False, "complex64 refused")
    except TypeError:
        check(True, "complex64 refused with TypeError")
    try:
        comm.allreduce(np.zeros(4, np.float32), op="xor")
        check(False, "op xor refused")
    except ValueError:
        check(True, "op xor refused with ValueError")
    try:
        comm.allreduce(np.zeros(4, np.float32)[::2])
        check(False, "non-contiguous in place refused")
    except ValueError:
        check(True, "non-contiguous in place refused with ValueError")
sys.exit(1 if fails else 0)
