# SPDX-License-Identifier: MIT
"""hcomm: the same module as pypto.hcomm, under its own name."""
from pypto.hcomm import *  # noqa: F401,F403
from pypto.hcomm import __all__, __doc__  # noqa: F401
