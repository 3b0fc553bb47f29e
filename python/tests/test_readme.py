# SPDX-License-Identifier: MIT
"""The README's Python example runs as written (so it cannot rot)."""
import os
import re
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
readme = os.path.join(here, "..", "..", "README.md")


def test_readme_python_example(tmp_path):
    text = open(readme, encoding="utf-8").read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README.md has no python example"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    for code in blocks:
        p = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path),
                           env=env, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "timeline.html").stat().st_size > 1000
