# SPDX-License-Identifier: MIT
"""Host tests of the pypto and hcomm packages (no module needed):
make -C python check, or PYTHONPATH=python:build/python pytest python/tests."""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.abspath(os.path.join(here, "..", ".."))
for p in (os.path.join(top, "build", "python"), os.path.join(top, "python")):
    if p not in sys.path:
        sys.path.insert(0, p)


def run_rank_job(n, root, argv=None, **env_extra):
    """Start n ranks of rank_allreduce.py, or of python3 argv (HCOMM_RANK
    0..n-1, rendezvous name root, env_extra on top; None removes a
    variable) and return [(exit status, output)] per rank; pytest.fail if
    the job hangs."""
    import subprocess
    import pytest
    env = dict(os.environ, HCOMM_WORLD_SIZE=str(n), HCOMM_ROOT_ADDR=root,
               HCOMM_TIMEOUT_MS="20000", PYTHONPATH=os.pathsep.join(sys.path))
    for k, v in env_extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    procs = [subprocess.Popen(
        [sys.executable] + (list(argv) if argv else
                            [os.path.join(here, "rank_allreduce.py")]),
        env=dict(env, HCOMM_RANK=str(r)), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True) for r in range(n)]
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("job of %d ranks hung: %s" % (n, argv or "allreduce"))
        outs.append((p.returncode, out))
    return outs
