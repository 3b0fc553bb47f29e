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
