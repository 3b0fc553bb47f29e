# SPDX-License-Identifier: MIT
"""hcomm from Python on the host: errors without a module, and a real
allreduce job of 2 and 3 processes over the TCP transport (loopback)."""
import os
import subprocess
import sys

import pytest

import hcomm
import pypto

here = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.skipif(os.path.exists("/dev/hcomm"), reason="module loaded")
def test_no_device(monkeypatch):
    monkeypatch.delenv("HCOMM_DEVICE", raising=False)
    with pytest.raises(hcomm.NoDeviceError) as e:
        hcomm.Context()
    assert "modprobe hcomm" in str(e.value) and e.value.code == 1
    assert isinstance(e.value, hcomm.HcommError)


def test_not_an_hcomm_device(monkeypatch):
    monkeypatch.setenv("HCOMM_DEVICE", "/dev/null")
    with pytest.raises(hcomm.HcommError) as e:
        hcomm.Context()
    assert e.value.code == 13 and "not an hcomm device" in str(e.value)


def test_error_classes():
    assert issubclass(hcomm.TimeoutError, TimeoutError)
    assert issubclass(hcomm.MemlockError, MemoryError)
    assert "ulimit -l" in (hcomm.MemlockError.__doc__ or "")
    assert issubclass(hcomm.AccessError, PermissionError)
    assert hcomm.Config is pypto.hcomm.Config


@pytest.mark.parametrize("n", [2, 3])
def test_allreduce_job(n, tmp_path):
    env = dict(os.environ)
    env.update(HCOMM_WORLD_SIZE=str(n), HCOMM_TRANSPORT="tcp",
               HCOMM_ROOT_ADDR="pypto-test-%d-%d" % (os.getpid(), n),
               HCOMM_TIMEOUT_MS="20000",
               PYTHONPATH=os.pathsep.join(sys.path))
    procs = []
    for r in range(n):
        env["HCOMM_RANK"] = str(r)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(here, "rank_allreduce.py")],
            env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True))
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("allreduce job of %d ranks hung" % n)
        outs.append((p.returncode, out))
    for r, (rc, out) in enumerate(outs):
        assert rc == 0 and "FAIL" not in out, "rank %d:\n%s" % (r, out)
        assert out.count("ok ") >= 30, out
