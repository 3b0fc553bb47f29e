# SPDX-License-Identifier: MIT
"""The C extension pypto._pypto, linked against the installed libpypto and
libhcomm (pkg-config pypto), or the build tree's with HCOMM_BUILD=<dir>
(the top of an hcomm checkout that ran make)."""
import os
import subprocess

from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))
top = os.environ.get("HCOMM_BUILD")
inc, libdirs, rpath = [], [], []
if top:
    inc = [os.path.join(top, d) for d in ("pypto", "lib", "uapi")]
    libdirs = [os.path.join(top, "build", d) for d in ("pypto", "lib")]
    rpath = libdirs
else:
    try:
        flags = subprocess.run(["pkg-config", "--cflags", "pypto"],
                               check=True, capture_output=True,
                               text=True).stdout.split()
        inc = [f[2:] for f in flags if f.startswith("-I")]
    except (OSError, subprocess.CalledProcessError):
        pass

setup(ext_modules=[Extension(
    "pypto._pypto", [os.path.relpath(os.path.join(here, "src", "_pypto.c"),
                                     here)],
    include_dirs=inc, library_dirs=libdirs, runtime_library_dirs=rpath,
    libraries=["pypto", "hcomm"])])
