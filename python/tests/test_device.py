# SPDX-License-Identifier: MIT
"""hcomm from Python against the module (run in the VM as root, with
hcomm.ko loaded: scripts/guest-tests.sh part "python"; skipped on a host
without /dev/hcomm)."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from conftest import run_rank_job

import hcomm
import pypto

here = os.path.dirname(os.path.abspath(__file__))
pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/hcomm") or os.geteuid() != 0,
    reason="needs /dev/hcomm (hcomm.ko loaded) and root")


def test_register_in_place(monkeypatch):
    # no hot-buffer cache: the deregistration must reach the module
    monkeypatch.setenv("HCOMM_CACHE_LIMIT", "0")
    with hcomm.Context() as ctx:
        n0 = ctx.info()["nr_regions"]
        a = np.arange(1 << 20, dtype=np.float32)
        with ctx.reg_mem(a) as mr:
            assert mr.array is a and mr.key != 0
            info = ctx.info()
            assert info["nr_regions"] == n0 + 1
            assert info["pinned_bytes"] >= a.nbytes
        assert ctx.info()["nr_regions"] == n0


def test_register_copies_with_warning():
    with hcomm.Context() as ctx:
        a = np.arange(4096, dtype=np.float64)[::2]     # not contiguous
        with pytest.warns(UserWarning, match="C-contiguous"):
            r = ctx.reg_mem(a)
        assert r.array is not a and np.array_equal(r.array, a)
        r.close()
        ro = np.arange(4096, dtype=np.int32)
        ro.flags.writeable = False
        with pytest.warns(UserWarning, match="writable"):
            ctx.reg_mem(ro).close()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            # read-only is fine when nobody writes it
            ctx.reg_mem(ro, access=hcomm.ACCESS_REMOTE_READ).close()


def test_qos_seed_and_admission():
    with hcomm.Context() as a, hcomm.Context() as b:
        a.set_qos(min_rate=30, max_rate=70, priority=2)
        a.set_qos(hcomm.QosConfig(min_rate=60))
        with pytest.raises(hcomm.AdmissionError, match="min_rate 50"):
            b.set_qos(min_rate=50)
        b.set_qos(min_rate=40)
        with pytest.raises(hcomm.InvalidError):
            b.set_qos(min_rate=80, max_rate=70)


MEMLOCK = r"""
import os, resource, sys
import numpy as np
import hcomm
os.setgroups([]); os.setgid(65534); os.setuid(65534)
resource.setrlimit(resource.RLIMIT_MEMLOCK, (65536, 65536))
with hcomm.Context() as ctx:
    try:
        ctx.reg_mem(np.zeros(1 << 20, dtype=np.uint8))
    except hcomm.MemlockError as e:
        print("MemlockError:", e)
        sys.exit(0 if "ulimit -l" in str(e) else 2)
sys.exit(1)
"""


def test_memlock_error_names_ulimit():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.run([sys.executable, "-c", MEMLOCK], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("n", [2])
def test_allreduce_kernel_transport(n):
    outs = run_rank_job(n, "pypto-vm-test-%d" % os.getpid(),
                        PYPTO_TEST_TRANSPORT="kernel", HCOMM_TRANSPORT=None)
    for r, (rc, out) in enumerate(outs):
        assert rc == 0 and "FAIL" not in out, "rank %d:\n%s" % (r, out)
    assert pypto.hcomm is hcomm or pypto.hcomm.Context is hcomm.Context


def test_demo_kernel_transport():
    # python3 -m pypto.demo, 2 ranks over /dev/hcomm (the kernel transport)
    outs = run_rank_job(2, "pypto-vm-demo-%d" % os.getpid(),
                        argv=["-m", "pypto.demo", "--size", "256", "--tile",
                              "64"], HCOMM_TRANSPORT=None)
    for r, (rc, out) in enumerate(outs):
        assert rc == 0 and "r%d: pypto.demo: C verified" % r in out, \
            "rank %d:\n%s" % (r, out)
    assert "over 2 ranks (transport kernel)" in outs[0][1], outs[0][1]


def test_transfers_and_matmul_through_dev_hcomm(monkeypatch):
    # the device buffers are windows of a one-rank communicator over
    # /dev/hcomm: the transfer tiles are the module's transfers
    from test_graph import one_rank_comm, staged_pipeline
    with one_rank_comm(monkeypatch, None) as comm:
        assert comm.transport == "kernel", comm.transport
        run = staged_pipeline(comm)
        assert "transport hcomm" in run.diagnosis["text"]
        rng = np.random.default_rng(3)
        a = rng.standard_normal((200, 150)).astype(np.float32)
        b = rng.standard_normal((150, 120)).astype(np.float32)
        c, run = pypto.profile(pypto.matmul, a, b, comm=comm,
                               config={"tile_size": 64})
        ref = a.astype(np.float64) @ b
        assert np.max(np.abs(c - ref)) <= 1e-4 * np.max(np.abs(ref))
        assert run.stats["tiles_transfer"] > 0
