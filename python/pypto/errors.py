# SPDX-License-Identifier: MIT
"""Exceptions of pypto and hcomm: each carries the C code and message."""

import builtins

from ._ext import ext


class PyptoError(Exception):
    """A libpypto call failed: .code (enum pypto_err), .message."""

    def __init__(self, code, message):
        self.code = abs(code)
        self.message = message
        super().__init__("%s: %s" % (ext.strerror(self.code), message)
                         if message else ext.strerror(self.code))


class DeadlockError(PyptoError):
    """The graph has a dependency cycle; .cycle lists its tile ids and
    .names their names, in order (the last depends on the first)."""

    def __init__(self, code, message, cycle=(), names=()):
        self.cycle = list(cycle)
        self.names = list(names)
        super().__init__(code, message)

    def __str__(self):
        base = super().__str__()
        if self.names:
            return "%s; cycle: %s -> %s" % (base, " -> ".join(self.names),
                                            self.names[0])
        return base


class TaskError(PyptoError):
    """A tile function failed; the Python exception it raised, if any, is
    this exception's __cause__."""


class TransferError(PyptoError):
    """A transfer or a collective failed after every retry."""


class PyptoValueError(PyptoError, ValueError):
    """PYPTO_ERR_INVAL: a bad argument (also a ValueError)."""


class PyptoMemoryError(PyptoError, MemoryError):
    """PYPTO_ERR_NOMEM (also a MemoryError)."""


def pypto_error(rc, message=None, **kw):
    """The exception for a negative libpypto code."""
    code = abs(rc)
    msg = ext.errmsg() if message is None else message
    if code == ext.PYPTO_DEADLOCK:
        return DeadlockError(code, msg, **kw)
    if code == ext.PYPTO_ERR_TASK:
        return TaskError(code, msg)
    if code == ext.PYPTO_ERR_IO:
        return TransferError(code, msg)
    if code == ext.PYPTO_ERR_INVAL:
        return PyptoValueError(code, msg)
    if code == ext.PYPTO_ERR_NOMEM:
        return PyptoMemoryError(code, msg)
    return PyptoError(code, msg)


class HcommError(Exception):
    """A libhcomm call failed: .code (enum hcomm_err), .errno (the errno
    behind it, 0 when the library found the fault), .message
    (hcomm_errmsg())."""

    def __init__(self, code, errno_, message):
        self.code = abs(code)
        self.errno = errno_
        self.message = message
        text = ext.hc_strerror(self.code)
        super().__init__("%s (%s)" % (message, text) if message else text)


class NoDeviceError(HcommError):
    """HCOMM_ERR_NODEV: no /dev/hcomm (load the module)."""


class MemlockError(HcommError, MemoryError):
    """HCOMM_ERR_MMAP: pinning exceeds RLIMIT_MEMLOCK; raise it with
    ulimit -l (limits.conf memlock) or give the process CAP_IPC_LOCK."""


class AccessError(HcommError, builtins.PermissionError):
    """HCOMM_ERR_ACCESS."""


class AdmissionError(HcommError):
    """HCOMM_ERR_ADMISSION: QoS minimum rates would exceed 100 %."""


class TimeoutError(HcommError, builtins.TimeoutError):
    """HCOMM_ERR_TIMEOUT (also a builtins.TimeoutError)."""


class InvalidError(HcommError, ValueError):
    """HCOMM_ERR_INVAL."""


def hcomm_error(rc, errno_, message):
    """The exception for a negative libhcomm code."""
    code = abs(rc)
    cls = {
        ext.HCOMM_ERR_NODEV: NoDeviceError,
        ext.HCOMM_ERR_MMAP: MemlockError,
        ext.HCOMM_ERR_ACCESS: AccessError,
        ext.HCOMM_ERR_ADMISSION: AdmissionError,
        ext.HCOMM_ERR_TIMEOUT: TimeoutError,
        ext.HCOMM_ERR_INVAL: InvalidError,
    }.get(code, HcommError)
    return cls(code, errno_, message)
