# SPDX-License-Identifier: MIT
"""The C extension pypto._pypto, linked against
 - the build tree's libraries with HCOMM_BUILD=<dir> (the top of an hcomm
   checkout that ran make; run path into its build/),
 - those installed under HCOMM_PREFIX=<dir> (make install's PREFIX;
   HCOMM_DESTDIR=<dir> when they are staged there), run path <dir>/lib,
 - else the system's (pkg-config pypto)."""
import os
import subprocess

from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))
top = os.environ.get("HCOMM_BUILD")
prefix = os.environ.get("HCOMM_PREFIX")
inc, libdirs, rpath = [], [], []
if prefix and not top:
    stage = os.environ.get("HCOMM_DESTDIR", "") + prefix
    inc = [os.path.join(stage, "include"),
           os.path.join(stage, "include", "hcomm")]
    libdirs = [os.path.join(stage, "lib")]
    rpath = [os.path.join(prefix, "lib")]
elif top:
    inc = [os.path.join(top, d) for d in ("pypto", "lib", "uapi")]
    libdirs = [os.path.join(top, "build", d) for d in ("pypto", "lib")]
    rpath = libdirs
else:
    try:
        flags = subprocess.run(["pkg-config", "--cflags", "pypto"],
                               check=True, capture_output=True,
                               text=True).stdout.split()
        inc = [f[2:] for f in flags if f.startswith("-I")]
        # hcomm.pc's -I.../include/hcomm, for <linux/hcomm.h>
    except (OSError, subprocess.CalledProcessError):
        pass

setup(ext_modules=[Extension(
    "pypto._pypto", [os.path.relpath(os.path.join(here, "src", "_pypto.c"),
                                     here)],
    include_dirs=inc, library_dirs=libdirs, runtime_library_dirs=rpath,
    libraries=["pypto", "hcomm"])])
