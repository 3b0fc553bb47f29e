# SPDX-License-Identifier: MIT
"""python3 -m pypto.demo, the distributed SGEMM from Python, as a job of 2
processes over the TCP transport on this host (the kernel transport in
the VM: test_device.py)."""
import os
import re

from conftest import run_rank_job

import pypto.demo


def test_demo_two_tcp_ranks(tmp_path):
    tl = str(tmp_path / "timeline.html")
    outs = run_rank_job(2, "pypto-demo-%d" % os.getpid(),
                        argv=["-m", "pypto.demo", "--size", "192", "--tile",
                              "64", "--timeline", tl],
                        HCOMM_TRANSPORT="tcp")
    for r, (rc, out) in enumerate(outs):
        assert rc == 0 and "r%d: pypto.demo: C verified against numpy" % r \
            in out, "rank %d:\n%s" % (r, out)
    out0 = outs[0][1]
    assert "over 2 ranks (transport tcp)" in out0, out0
    assert " 0 elements out of bounds" in out0, out0
    assert "pypto diagnosis:" in out0
    assert os.path.getsize(tl) > 1000


def test_demo_check_reads_bad(monkeypatch, capsys):
    # deliberately wrong: the allreduce adds 0.01 to every element of C;
    # the check must count them out of bounds and the job fail
    real = pypto.allreduce
    calls = []

    def skewed(array, comm, **kw):
        res = real(array, comm, **kw)
        calls.append(array.dtype)
        if len(calls) == 1:
            res += 0.01
        return res

    monkeypatch.setattr(pypto, "allreduce", skewed)
    monkeypatch.setenv("HCOMM_TRANSPORT", "tcp")
    for k in ("HCOMM_RANK", "HCOMM_WORLD_SIZE", "HCOMM_ROOT_ADDR"):
        monkeypatch.delenv(k, raising=False)
    rc = pypto.demo.main(["--size", "96", "--tile", "32"])
    out = capsys.readouterr().out
    m = re.search(r"FAIL: (\d+) elements of C out of bounds", out)
    # most of the 96 x 96: a few large elements tolerate 0.01
    assert rc == 1 and m and int(m.group(1)) > 0.9 * 96 * 96, out
