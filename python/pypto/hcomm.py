# SPDX-License-Identifier: MIT
"""hcomm: libhcomm from Python (also importable as the top-level hcomm).

    import hcomm
    hcomm_config = hcomm.Config()
    hcomm_config.enable_fp16_compress = True
    hcomm_config.comp_threshold = 1024
    with hcomm.Communicator(hcomm_config) as comm:
        comm.allreduce(x)                      # numpy array, in place

    with hcomm.Context() as ctx:               # /dev/hcomm
        ctx.set_qos(min_rate=30, max_rate=70, priority=2)
        with ctx.reg_mem(buf) as mr:           # pinned in place
            print(mr.key)
"""

import warnings

from ._ext import ext
from .errors import (HcommError, NoDeviceError, MemlockError,  # noqa: F401
                     AccessError, AdmissionError, TimeoutError,
                     InvalidError, hcomm_error)

__all__ = ["Config", "Context", "Registration", "QosConfig", "Communicator",
           "HcommError", "NoDeviceError", "MemlockError", "AccessError",
           "AdmissionError", "TimeoutError", "InvalidError",
           "ACCESS_LOCAL_WRITE", "ACCESS_REMOTE_READ", "ACCESS_REMOTE_WRITE"]

ACCESS_LOCAL_WRITE = ext.HCOMM_ACCESS_LOCAL_WRITE
ACCESS_REMOTE_READ = ext.HCOMM_ACCESS_REMOTE_READ
ACCESS_REMOTE_WRITE = ext.HCOMM_ACCESS_REMOTE_WRITE


def _check(res):
    rc, err, msg = res[:3]
    if rc:
        raise hcomm_error(rc, err, msg)
    return res[3] if len(res) > 3 else None


class Config:
    """struct hcomm_config: the defaults, overlaid with the HCOMM_*
    environment (env=False: defaults only).  Fields: send_buf_size,
    recv_buf_size, max_inline, num_qps, queue_depth, cache_limit,
    enable_fp16_compress, comp_threshold, rank_table, timeout_ms.
    Setting an unknown field raises AttributeError."""

    _FIELDS = ("send_buf_size", "recv_buf_size", "max_inline", "num_qps",
               "queue_depth", "cache_limit", "enable_fp16_compress",
               "comp_threshold", "rank_table", "timeout_ms")

    def __init__(self, env=True, **fields):
        object.__setattr__(self, "_d", _check(ext.hc_config_default(env)))
        for k, v in fields.items():
            setattr(self, k, v)

    def __getattr__(self, k):
        try:
            return self._d[k]
        except KeyError:
            raise AttributeError("hcomm.Config has no field %r" % k) from None

    def __setattr__(self, k, v):
        if k not in self._FIELDS:
            raise AttributeError("hcomm.Config has no field %r (%s)"
                                 % (k, ", ".join(self._FIELDS)))
        if k == "enable_fp16_compress":
            v = bool(v)
        elif k == "rank_table":
            v = "" if v is None else str(v)
        elif not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError("hcomm.Config.%s: a non-negative int" % k)
        self._d[k] = v

    def as_dict(self):
        return dict(self._d)

    def __repr__(self):
        return "hcomm.Config(%s)" % ", ".join("%s=%r" % kv
                                             for kv in self._d.items())


class QosConfig:
    """hcomm_qos_config_t: min_rate, max_rate (0 = no cap), priority."""

    def __init__(self, min_rate=0, max_rate=100, priority=0):
        self.min_rate, self.max_rate, self.priority = (min_rate, max_rate,
                                                       priority)


class Registration:
    """A registered (pinned) buffer; deregistered by close() or at the
    end of a with block.  .array is what is registered: the caller's
    array itself, or a copy when it could not be used in place."""

    def __init__(self, ctx, array, mr, key):
        self.ctx, self.array, self._mr, self.key = ctx, array, mr, key

    def close(self):
        if self._mr is not None:
            mr, self._mr = self._mr, None
            _check(ext.hc_dereg(mr))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Context:
    """An open /dev/hcomm (hcomm_open)."""

    def __init__(self, no_uring=False):
        self._ctx = _check(ext.hc_open(1 if no_uring else 0))
        self._regs = []

    def _c(self):
        if self._ctx is None:
            raise ValueError("hcomm.Context is closed")
        return self._ctx

    def info(self):
        """HCOMM_CMD_GET_INFO as a dict."""
        return _check(ext.hc_info(self._c()))

    def set_qos(self, qos=None, min_rate=0, max_rate=100, priority=0):
        """hcomm_set_qos: a QosConfig, or the three values."""
        if qos is not None:
            min_rate, max_rate, priority = (qos.min_rate, qos.max_rate,
                                            qos.priority)
        for v in (min_rate, max_rate, priority):
            if not isinstance(v, int) or v < 0 or v > 0xffffffff:
                raise ValueError("set_qos: min_rate, max_rate, priority "
                                 "are non-negative ints")
        _check(ext.hc_set_qos(self._c(), min_rate, max_rate, priority))

    def reg_mem(self, array, access=ACCESS_LOCAL_WRITE):
        """Pin and register a numpy array (or any buffer).  A C-contiguous
        array (writable when access has LOCAL_WRITE) is registered in
        place; anything else is copied first, with a warning, and the copy
        is Registration.array."""
        import numpy as np
        a = array
        ok = isinstance(a, np.ndarray) and a.flags.c_contiguous and (
            a.flags.writeable or not access & ACCESS_LOCAL_WRITE)
        if isinstance(a, np.ndarray) and not ok:
            why = [w for w, bad in (
                ("C-contiguous", not a.flags.c_contiguous),
                ("writable", access & ACCESS_LOCAL_WRITE and
                 not a.flags.writeable)) if bad]
            warnings.warn("hcomm: the array is not %s: registering a copy"
                          % " and ".join(why), stacklevel=2)
            a = np.array(a, order="C", copy=True)
        mr, key = self._reg(a, access)
        r = Registration(self, a, mr, key)
        self._regs.append(r)
        return r

    def _reg(self, a, access):
        rc, err, msg, mr, key = ext.hc_reg_mem(self._c(), a, access)
        if rc:
            raise hcomm_error(rc, err, msg)
        return mr, key

    def close(self):
        if self._ctx is not None:
            for r in self._regs:
                r._mr = None    # hcomm_close frees them
            ctx, self._ctx = self._ctx, None
            ext.hc_close(ctx)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


_DTYPES = None
_OPS = {"sum": ext.HCOMM_SUM, "prod": ext.HCOMM_PROD, "max": ext.HCOMM_MAX,
        "min": ext.HCOMM_MIN, "avg": ext.HCOMM_AVG}


def _dtype_code(dt):
    global _DTYPES
    import numpy as np
    if _DTYPES is None:
        _DTYPES = {np.dtype(np.float32): ext.HCOMM_FP32,
                   np.dtype(np.float64): ext.HCOMM_FP64,
                   np.dtype(np.float16): ext.HCOMM_FP16,
                   np.dtype(np.int8): ext.HCOMM_INT8,
                   np.dtype(np.int32): ext.HCOMM_INT32,
                   np.dtype(np.int64): ext.HCOMM_INT64,
                   np.dtype(np.uint8): ext.HCOMM_UINT8,
                   np.dtype(np.uint32): ext.HCOMM_UINT32,
                   np.dtype(np.uint64): ext.HCOMM_UINT64}
    try:
        return _DTYPES[np.dtype(dt)]
    except KeyError:
        raise TypeError("allreduce: dtype %s is not supported (float32, "
                        "float64, float16, int8/32/64, uint8/32/64)"
                        % np.dtype(dt)) from None


class Communicator:
    """hcomm_comm_init: this process's rank of a job (HCOMM_RANK /
    HCOMM_WORLD_SIZE / HCOMM_ROOT_ADDR, a rank table, or the variables of
    Open MPI, Slurm, PMI: Documentation/libhcomm.rst)."""

    def __init__(self, config=None):
        cfg = config if config is not None else Config()
        self._comm = _check(ext.hc_comm_init(cfg.as_dict()))
        self.rank, self.size, self.transport = ext.hc_comm_info(self._comm)
        self._threshold = cfg.comp_threshold

    def allreduce(self, array, op="sum", compress=None, out=None):
        """hcomm_allreduce of a numpy array over every rank; in place
        unless out is given (then array is only read).  Returns the
        result array."""
        import numpy as np
        if self._comm is None:
            raise ValueError("hcomm.Communicator is destroyed")
        if op not in _OPS:
            raise ValueError("allreduce: op is one of %s" % ", ".join(_OPS))
        a = np.asarray(array)
        dt = _dtype_code(a.dtype)
        if out is None:
            if not (a.flags.c_contiguous and a.flags.writeable):
                raise ValueError("allreduce in place needs a writable "
                                 "C-contiguous array (or pass out=)")
            out = a
        elif (out.shape != a.shape or out.dtype != a.dtype or
              not out.flags.c_contiguous or not out.flags.writeable):
            raise ValueError("allreduce: out must be a writable "
                             "C-contiguous array like the input")
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        c = -1 if compress is None else (1 if compress else 0)
        _check(ext.hc_allreduce(self._comm, a, out, a.size, dt, _OPS[op], c,
                                self._threshold))
        return out

    def destroy(self):
        if self._comm is not None:
            comm, self._comm = self._comm, None
            _check(ext.hc_comm_destroy(comm))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()
        return False
