# SPDX-License-Identifier: MIT
"""pypto: tiled computation scheduled by libpypto, data moved by libhcomm.

    import numpy as np, pypto
    pypto_config = {'prefetch_depth': 4, 'tile_size': (256, 256),
                    'double_buffering': True}
    c = pypto.matmul(a, b, config=pypto_config)

    g = pypto.Graph()
    load = g.host(lambda t: ..., name="load")
    work = g.compute(lambda t: ..., name="work", deps=[load])
    run = g.run(config={'workers': 2})
    print(run.diagnosis["text"]); run.write_timeline("timeline.html")

Built on the C libraries through a small C extension (_pypto): pypto_run
releases the GIL, tile functions written in Python take it back while they
run (numpy releases it again inside its kernels), and numpy arrays are
passed to the libraries in place.  python/README.md has the details.
"""

import threading

from ._ext import ext
from .errors import (PyptoError, DeadlockError, TaskError,  # noqa: F401
                     TransferError, PyptoValueError, PyptoMemoryError,
                     pypto_error)
from . import hcomm  # noqa: F401

__all__ = ["Graph", "Tile", "Run", "matmul", "profile", "allreduce",
           "resolve_config", "PyptoError", "DeadlockError", "TaskError",
           "TransferError", "hcomm", "ANY_DEVICE"]

ANY_DEVICE = ext.PYPTO_ANY_DEVICE

_KINDS = {ext.PYPTO_COMPUTE: "compute", ext.PYPTO_HOST: "host",
          ext.PYPTO_TRANSFER: "transfer", ext.PYPTO_ALLREDUCE: "allreduce"}
_STAGES = {ext.PYPTO_STAGE_PREFETCH: "prefetch",
           ext.PYPTO_STAGE_TRANSFER: "transfer",
           ext.PYPTO_STAGE_COMPUTE: "compute",
           ext.PYPTO_STAGE_COLLECTIVE: "collective"}
_DIAG = {ext.PYPTO_DIAG_COMM_BOUND: "comm_bound",
         ext.PYPTO_DIAG_UNDERUSED: "underused",
         ext.PYPTO_DIAG_IMBALANCE: "imbalance"}


def resolve_config(config=None):
    """The configuration a run uses: libpypto's defaults, then the
    PYPTO_* environment, then config (a dict: workers, devices,
    prefetch_depth, double_buffering, tile_size as n or (n, n),
    batch_max, max_retries, profile, seed).  Unknown keys raise
    KeyError."""
    return ext.config_resolve(config)


class Tile(int):
    """A tile's id in its graph (an int), with its name."""

    def __new__(cls, tid, name):
        t = super().__new__(cls, tid)
        t.name = name
        return t


class Run:
    """The record of one run: stats, diagnosis, events, timelines."""

    def __init__(self, rec):
        self._rec = rec

    @property
    def stats(self):
        """Counters and derived figures (struct pypto_stats) as a dict."""
        return self._rec.stats()

    @property
    def diagnosis(self):
        """{'flags': [...], 'text': ...}: what limited the run
        (comm_bound, underused, imbalance) and the advice, as
        pypto_run_diagnose() prints it."""
        flags, text = self._rec.diagnose()
        return {"flags": [n for b, n in _DIAG.items() if flags & b],
                "text": text}

    def diagnose(self):
        """The diagnosis as text."""
        return self.diagnosis["text"]

    @property
    def events(self):
        """Recorded stages: dicts with t0_ns, t1_ns, stage, tile, worker
        (-1: none), device, bytes."""
        return [{"t0_ns": e[0], "t1_ns": e[1],
                 "stage": _STAGES.get(e[2], str(e[2])), "tile": e[3],
                 "worker": e[4], "device": e[5], "bytes": e[6]}
                for e in self._rec.events()]

    def write_timeline(self, path):
        """A self-contained HTML timeline of the run."""
        rc = self._rec.write(str(path), True)
        if rc:
            raise pypto_error(rc)

    def write_trace(self, path):
        """The Chrome trace (chrome://tracing, Perfetto) of the run."""
        rc = self._rec.write(str(path), False)
        if rc:
            raise pypto_error(rc)


_profile = threading.local()


def _record(run):
    stack = getattr(_profile, "stack", None)
    if stack:
        stack[-1].append(run)
    return run


class Graph:
    """A graph of tiles.  Tile functions are Python callables taking a
    dict {'tile', 'worker', 'device'}; returning None or 0 succeeds,
    anything else or an exception fails the tile (and the run, with
    TaskError whose __cause__ is the exception)."""

    def __init__(self):
        self._g = ext.Graph()
        self._names = []

    def _add(self, kind, fn, name, deps, affinity, cost):
        if not callable(fn):
            raise TypeError("a tile function must be callable, not %s"
                            % type(fn).__name__)
        name = name or getattr(fn, "__name__", "tile")

        def call(tile, worker, device, _fn=fn):
            return _fn({"tile": tile, "worker": worker, "device": device})

        rc = self._g.add_fn(kind, name, call, affinity)
        if rc < 0:
            raise pypto_error(rc)
        t = Tile(rc, name)
        self._names.append(name)
        for d in deps:
            self.dep(d, t)
        if cost is not None:
            rc = self._g.set_cost(t, float(cost))
            if rc:
                raise pypto_error(rc)
        return t

    def compute(self, fn, name=None, deps=(), affinity=ANY_DEVICE,
                cost=None):
        """Add a compute tile; returns its Tile."""
        return self._add(ext.PYPTO_COMPUTE, fn, name, deps, affinity, cost)

    def host(self, fn, name=None, deps=(), affinity=ANY_DEVICE, cost=None):
        """Add a host tile (the pipeline's prefetch stage)."""
        return self._add(ext.PYPTO_HOST, fn, name, deps, affinity, cost)

    def tile(self, name=None, deps=(), kind="compute", **kw):
        """Decorator form: @g.tile(deps=[a]) def b(t): ..."""
        def wrap(fn):
            add = self.host if kind == "host" else self.compute
            return add(fn, name=name or fn.__name__, deps=deps, **kw)
        return wrap

    def _xfer(self, op, array, offset, name, deps, affinity, win_stride,
              rank=None):
        import numpy as np
        a = np.asarray(array)
        if op == ext.PYPTO_GET and not a.flags.writeable:
            raise ValueError("get: the destination array is read-only")
        if a.flags.c_contiguous:
            rows, row_bytes, lstride = 1, a.nbytes, a.nbytes
        elif a.ndim == 2 and a.strides[1] == a.itemsize and \
                a.strides[0] >= a.shape[1] * a.itemsize:
            rows, row_bytes = a.shape[0], a.shape[1] * a.itemsize
            lstride = a.strides[0]
        else:
            raise ValueError("transfer: a C-contiguous array or a 2-D "
                             "block of rows (e.g. m[i:i+b, j:j+b])")
        if row_bytes == 0:
            raise ValueError("transfer: an empty array")
        if offset < 0:
            raise ValueError("transfer: a negative device offset")
        # one flat byte view from the first byte to the last row's end
        span = (rows - 1) * lstride + row_bytes
        flat = np.lib.stride_tricks.as_strided(
            a.reshape(rows, -1).view(np.uint8) if rows > 1 else
            a.reshape(-1).view(np.uint8), shape=(span,), strides=(1,),
            writeable=bool(a.flags.writeable))
        ws = row_bytes if win_stride is None else int(win_stride)
        name = name or ("put" if op == ext.PYPTO_PUT else "get")
        rc = self._g.add_xfer(name, op, flat, rows, row_bytes, lstride,
                              int(offset), ws, affinity,
                              ext.PYPTO_RANK_TARGET if rank is None
                              else int(rank))
        if rc < 0:
            raise pypto_error(rc)
        t = Tile(rc, name)
        for d in deps:
            self.dep(d, t)
        return t

    def put(self, array, offset, name=None, deps=(), affinity=ANY_DEVICE,
            win_stride=None, rank=None):
        """A transfer tile: array (C-contiguous, or a 2-D block of rows)
        into the device memory at byte offset (rows win_stride apart,
        default packed).  The run's device= is the device memory: this
        rank's, or with rank= (a run with comm=) that rank's device
        array."""
        return self._xfer(ext.PYPTO_PUT, array, offset, name, deps,
                          affinity, win_stride, rank)

    def get(self, array, offset, name=None, deps=(), affinity=ANY_DEVICE,
            win_stride=None, rank=None):
        """A transfer tile: device memory at offset (rank's, with
        rank=) into array."""
        return self._xfer(ext.PYPTO_GET, array, offset, name, deps,
                          affinity, win_stride, rank)

    def dep(self, before, after):
        """after runs only once before has finished."""
        rc = self._g.add_dep(int(before), int(after))
        if rc:
            raise pypto_error(rc)

    def __len__(self):
        return self._g.counts()[0]

    @property
    def edges(self):
        return self._g.counts()[1]

    def _deadlock(self, rc, cycle):
        names = [self._g.tile_info(t)["name"] for t in cycle]
        return pypto_error(rc, cycle=cycle, names=names)

    def analyze(self):
        """Validate and analyse: dict with tiles, edges, components,
        levels, max_width, roots, critical_path, total_cost.  A cycle
        raises DeadlockError naming it."""
        rc, an, cycle = self._g.validate()
        if rc == -ext.PYPTO_DEADLOCK:
            raise self._deadlock(rc, cycle)
        if rc:
            raise pypto_error(rc)
        return an

    def info(self, tile):
        """name, kind, affinity, inputs and level of a tile."""
        d = self._g.tile_info(int(tile))
        if d is None:
            raise IndexError("no tile %d" % int(tile))
        d["kind"] = _KINDS.get(d["kind"], d["kind"])
        return d

    def write_dot(self, path):
        rc = self._g.dump(str(path), ext.PYPTO_DUMP_DOT)
        if rc:
            raise pypto_error(rc)

    def write_json(self, path):
        rc = self._g.dump(str(path), ext.PYPTO_DUMP_JSON)
        if rc:
            raise pypto_error(rc)

    def run(self, config=None, device=None, comm=None, mirrors=None):
        """Run to completion on the work-stealing workers (the GIL is
        released while the C scheduler runs).  device: the memory the
        transfer tiles address (a writable C-contiguous numpy array).
        comm (an hcomm.Communicator): device becomes this rank's window
        and the transfers go through libhcomm (/dev/hcomm where the
        module is loaded); creating and freeing the window are collective,
        so every rank of comm makes the same run() calls.  Without comm,
        libpypto's memcpy test transport moves the bytes (one process, no
        module).  mirrors (with comm): {rank: mirror} - mirror's device
        array holds rank's bytes; if rank is lost during the run, its
        transfer tiles that had not completed go to mirror
        (pypto_xport_hcomm_mirror; stats "tiles_replaced").  Returns a
        Run; a failure raises, with the Run as .run."""
        if device is not None:
            import numpy as np
            if not (isinstance(device, np.ndarray) and
                    device.flags.c_contiguous and device.flags.writeable):
                raise ValueError("device: a writable C-contiguous array")
        elif comm is not None:
            raise ValueError("comm: the transfers need a device= array")
        if mirrors is not None and comm is None:
            raise ValueError("mirrors: only with comm=")
        pairs = None if mirrors is None else \
            [(int(k), int(v)) for k, v in dict(mirrors).items()]
        rc, rec, hc = ext.run(self._g, config, device, _comm_cap(comm),
                              pairs)
        run = _record(Run(rec)) if rec is not None else None
        _hcomm_failure(hc, run)
        if rc:
            msg = ext.errmsg()
            cause = self._g.take_exception()
            if rc == -ext.PYPTO_DEADLOCK:
                err = self._deadlock(rc, self._g.validate()[2])
            else:
                err = pypto_error(rc, msg)
            err.run = run
            if cause is not None:
                raise err from cause
            raise err
        return run


def _comm_cap(comm):
    if comm is None:
        return None
    cap = getattr(comm, "_comm", None)
    if cap is None:
        raise ValueError("comm: an open hcomm.Communicator")
    return cap


def _hcomm_failure(hc, run):
    """A libhcomm call around the run (the window) failed: its exception,
    with the Run (if any) as .run."""
    if hc is not None:
        err = hcomm.hcomm_error(*hc)
        err.run = run
        raise err


def _f32(x, what):
    import numpy as np
    a = np.asarray(x)
    if a.ndim != 2:
        raise ValueError("%s: a 2-D array, not %d-D" % (what, a.ndim))
    if a.dtype != np.float32 or not a.flags.c_contiguous:
        a = np.ascontiguousarray(a, dtype=np.float32)
    return a


def matmul(a, b, config=None, out=None, comm=None):
    """C = A @ B in float32 through libpypto's tiled SGEMM: host tiles
    pack the blocks (prefetch), transfer tiles move them to the device
    buffer, compute tiles call OpenBLAS.  config as resolve_config().
    comm (an hcomm.Communicator): the device buffer is this rank's window
    and the transfers go through libhcomm (/dev/hcomm where the module is
    loaded; collective: every rank of comm calls matmul alike); without,
    libpypto's memcpy test transport stands in (no module needed)."""
    import numpy as np
    A = _f32(a, "a")
    B = _f32(b, "b")
    m, k = A.shape
    k2, n = B.shape
    if k != k2:
        raise ValueError("matmul: shapes %s and %s do not match"
                         % (A.shape, B.shape))
    if out is None:
        C = np.zeros((m, n), dtype=np.float32)
    else:
        C = out
        if (C.shape != (m, n) or C.dtype != np.float32 or
                not C.flags.c_contiguous or not C.flags.writeable):
            raise ValueError("out: a writable C-contiguous float32 "
                             "array of shape (%d, %d)" % (m, n))
    rc, rec, hc = ext.gemm(A, B, C, m, n, k, 1.0, 0.0, config,
                           _comm_cap(comm))
    run = _record(Run(rec)) if rec is not None else None
    _hcomm_failure(hc, run)
    if rc:
        err = pypto_error(rc)
        err.run = run
        raise err
    return C


class _Profile:
    def __init__(self):
        self.runs = []

    def __enter__(self):
        if not hasattr(_profile, "stack"):
            _profile.stack = []
        _profile.stack.append(self.runs)
        return self

    def __exit__(self, *exc):
        _profile.stack.pop()
        return False

    @property
    def run(self):
        return self.runs[-1] if self.runs else None


def profile(fn=None, *args, **kw):
    """profile(fn, *args, **kw) -> (result, Run of the last run fn made);
    or, without fn, a context manager whose .runs / .run collect the runs
    made inside it:  with pypto.profile() as p: pypto.matmul(a, b)"""
    if fn is None:
        return _Profile()
    with _Profile() as p:
        result = fn(*args, **kw)
    return result, p.run


def allreduce(array, comm, op="sum", compress=None, out=None):
    """Sum (prod, max, min, avg) array over every rank of comm (an
    hcomm.Communicator) with hcomm_allreduce; in place unless out is
    given.  compress=True sends fp32 as fp16 from comm's comp_threshold
    on (None: the communicator's setting)."""
    return comm.allreduce(array, op=op, compress=compress, out=out)
