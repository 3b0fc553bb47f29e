# SPDX-License-Identifier: MIT
"""Loads the C extension: inside the package when installed, else the
build tree's build/python/_pypto (make -C python)."""

try:
    from . import _pypto as ext  # noqa: F401  (installed: pypto/_pypto.*.so)
except ImportError:  # the build tree: PYTHONPATH=python:build/python
    import _pypto as ext  # noqa: F401

__all__ = ["ext"]
