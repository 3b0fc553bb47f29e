# SPDX-License-Identifier: MIT
"""The package installs with the system pip into a venv (no network:
--no-build-isolation, numpy and setuptools from Debian through
--system-site-packages) and works from there, outside the source tree."""
import os
import shutil
import subprocess

import pytest

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.abspath(os.path.join(here, "..", ".."))

SMOKE = r"""
import os, sys
import numpy as np
import pypto, hcomm
assert pypto.__file__.startswith(sys.prefix), pypto.__file__
assert pypto._ext.ext.__file__.startswith(sys.prefix)
a = np.arange(12, dtype=np.float32).reshape(3, 4)
b = np.ones((4, 2), dtype=np.float32)
assert np.array_equal(pypto.matmul(a, b, config={"tile_size": 16}), a @ b)
c = hcomm.Config(); c.enable_fp16_compress = True; c.comp_threshold = 1024
print("installed ok")
"""


@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"),
                    reason="Debian's python3 is the one with numpy")
def test_pip_install_into_venv(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(os.path.join(top, "python"), src,
                    ignore=shutil.ignore_patterns("tests", "__pycache__",
                                                  "build", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv",
                    "--system-site-packages", str(venv)], check=True)
    env = dict(os.environ, HCOMM_BUILD=top)
    env.pop("PYTHONPATH", None)
    p = subprocess.run([str(venv / "bin" / "pip"), "install", "-q",
                        "--no-build-isolation", "--no-index", str(src)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run([str(venv / "bin" / "python"), "-c", SMOKE],
                       env=env, cwd=str(tmp_path), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and "installed ok" in p.stdout, \
        p.stdout + p.stderr
