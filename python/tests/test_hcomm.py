# SPDX-License-Identifier: MIT
"""hcomm from Python on the host: errors without a module, and a real
allreduce job of 2 and 3 processes over the TCP transport (loopback)."""
import os

import pytest
from conftest import run_rank_job

import hcomm
import pypto



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
def test_allreduce_job(n):
    outs = run_rank_job(n, "pypto-test-%d-%d" % (os.getpid(), n),
                        HCOMM_TRANSPORT="tcp")
    for r, (rc, out) in enumerate(outs):
        assert rc == 0 and "FAIL" not in out, "rank %d:\n%s" % (r, out)
        assert out.count("ok ") >= 30, out


def test_ranks_job():
    """Transfers to several ranks by rank=, mirrors declared, bad ones
    refused (3 ranks over tcp; the lost-rank re-placement itself is
    pypto/tests/test_allreduce.c's "mirror" case)."""
    here = os.path.dirname(os.path.abspath(__file__))
    outs = run_rank_job(3, "pypto-ranks-%d" % os.getpid(),
                        [os.path.join(here, "rank_ranks.py")],
                        HCOMM_TRANSPORT="tcp")
    for r, (rc, out) in enumerate(outs):
        assert rc == 0 and "FAIL" not in out, "rank %d:\n%s" % (r, out)
    assert outs[0][1].count("ok ") == 7, outs[0][1]
