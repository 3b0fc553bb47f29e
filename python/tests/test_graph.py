# SPDX-License-Identifier: MIT
"""Graphs of Python tiles: analysis, deadlock, runs, errors, profiles."""
import json
import threading

import numpy as np
import pytest

import pypto


def diamond(log):
    g = pypto.Graph()
    lock = threading.Lock()

    def mark(name):
        def fn(t):
            with lock:
                log.append(name)
        fn.__name__ = name
        return fn

    a = g.host(mark("a"))
    b = g.compute(mark("b"), deps=[a], cost=2.0)
    c = g.compute(mark("c"), deps=[a], cost=5.0)
    d = g.compute(mark("d"), deps=[b, c])
    return g, (a, b, c, d)


def test_analysis():
    g, (a, b, c, d) = diamond([])
    assert len(g) == 4 and g.edges == 4
    an = g.analyze()
    assert an["tiles"] == 4 and an["edges"] == 4
    assert an["levels"] == 3 and an["max_width"] == 2
    assert an["roots"] == 1 and an["components"] == 1
    assert g.info(d)["inputs"] == 2 and g.info(d)["level"] == 2
    assert g.info(a)["kind"] == "host" and g.info(b)["kind"] == "compute"
    assert a.name == "a" and int(d) == 3
    with pytest.raises(IndexError):
        g.info(99)


def test_order_and_data():
    for _ in range(20):
        log = []
        g, _t = diamond(log)
        run = g.run(config={"workers": 2})
        assert log[0] == "a" and log[-1] == "d"
        assert sorted(log[1:3]) == ["b", "c"]
        st = run.stats
        assert st["tiles"] == 4 and st["tiles_compute"] == 3
        assert st["tiles_host"] == 1


def test_numpy_tiles_sum():
    # 16 blocks summed by tiles, then one reduction tile: checked exactly
    x = np.arange(16 * 1000, dtype=np.int64).reshape(16, 1000)
    part = np.zeros(16, dtype=np.int64)
    total = []
    g = pypto.Graph()
    blocks = [g.compute(lambda t, i=i: part.__setitem__(i, x[i].sum()),
                        name="blk%d" % i) for i in range(16)]
    g.compute(lambda t: total.append(int(part.sum())), name="sum",
              deps=blocks)
    g.run()
    assert total == [int(x.sum())]


def test_deadlock_names_the_cycle():
    g = pypto.Graph()
    a = g.compute(lambda t: None, name="load")
    b = g.compute(lambda t: None, name="mul", deps=[a])
    c = g.compute(lambda t: None, name="store", deps=[b])
    g.dep(c, a)
    with pytest.raises(pypto.DeadlockError) as e:
        g.analyze()
    assert sorted(e.value.cycle) == [0, 1, 2]
    assert set(e.value.names) == {"load", "mul", "store"}
    assert "cycle:" in str(e.value)
    with pytest.raises(pypto.DeadlockError):
        g.run()


def test_tile_exception_propagates():
    g = pypto.Graph()
    ran = []
    a = g.compute(lambda t: ran.append("a"), name="a")

    def boom(t):
        raise ZeroDivisionError("tile b failed")
    b = g.compute(boom, name="b", deps=[a])
    g.compute(lambda t: ran.append("c"), name="c", deps=[b])
    with pytest.raises(pypto.TaskError) as e:
        g.run()
    assert isinstance(e.value.__cause__, ZeroDivisionError)
    assert "c" not in ran
    assert e.value.run is not None


def test_nonzero_return_fails():
    for bad in (3, 1 << 80, "x"):
        g = pypto.Graph()
        g.compute(lambda t, v=bad: v, name="bad")
        with pytest.raises(pypto.TaskError):
            g.run()
    g = pypto.Graph()
    g.compute(lambda t: 0, name="zero")
    g.run()


def test_bad_dependency():
    g = pypto.Graph()
    a = g.compute(lambda t: None)
    with pytest.raises(pypto.PyptoValueError):
        g.dep(a, 42)
    with pytest.raises(TypeError):
        g.compute("not callable")


def test_run_again_and_worker_info():
    seen = set()
    lock = threading.Lock()
    g = pypto.Graph()

    def fn(t):
        with lock:
            seen.add((t["tile"], t["worker"] >= 0, t["device"] >= 0))
    for i in range(8):
        g.compute(fn, name="t%d" % i)
    g.run({"workers": 2})
    g.run({"workers": 1})
    assert {s[0] for s in seen} == set(range(8))
    assert all(s[1] and s[2] for s in seen)


def test_profile_timeline_trace_dumps(tmp_path):
    g, _t = diamond([])
    with pypto.profile() as p:
        g.run()
    run = p.run
    assert run is not None and len(p.runs) == 1
    ev = run.events
    assert len(ev) >= 4 and {e["stage"] for e in ev} >= {"compute",
                                                          "prefetch"}
    assert all(e["t1_ns"] >= e["t0_ns"] for e in ev)
    d = run.diagnosis
    assert isinstance(d["flags"], list) and d["text"] == run.diagnose()
    assert d["text"].strip()
    run.write_timeline(tmp_path / "timeline.html")
    html = (tmp_path / "timeline.html").read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "</html>" in html
    run.write_trace(tmp_path / "trace.json")
    tr = json.loads((tmp_path / "trace.json").read_text())
    assert tr["traceEvents"]
    g.write_json(tmp_path / "g.json")
    gj = json.loads((tmp_path / "g.json").read_text())
    assert len(gj["tiles"]) == 4 and len(gj["edges"]) == 4
    g.write_dot(tmp_path / "g.dot")
    assert "digraph" in (tmp_path / "g.dot").read_text()
    with pytest.raises(pypto.PyptoError):
        run.write_trace(tmp_path / "no" / "such" / "dir.json")


def test_profile_function_form():
    g, _t = diamond([])
    res, run = pypto.profile(g.run)
    assert res is run and run.stats["tiles"] == 4


def staged_pipeline(comm=None):
    """Blocks of a matrix staged into device memory (double-buffered by
    the graph's edges), scaled there by compute tiles, staged back; over
    comm's window when given.  Returns the Run."""
    rng = np.random.default_rng(5)
    m = rng.standard_normal((96, 80)).astype(np.float32)
    out = np.zeros_like(m)
    b = 16                                   # 6 x 5 blocks of 16 x 16
    blk = b * b * 4
    dev = np.zeros(2 * blk, dtype=np.uint8)  # two block slots
    g = pypto.Graph()
    last = [None, None]                      # last tile using each slot
    n = 0
    for i in range(0, 96, b):
        for j in range(0, 80, b):
            slot = n % 2
            off = slot * blk
            deps = [last[slot]] if last[slot] is not None else []
            ld = g.put(m[i:i + b, j:j + b], off, name="ld%d" % n, deps=deps)

            def scale(t, off=off):
                v = dev[off:off + blk].view(np.float32)
                v *= 2.0
            c = g.compute(scale, name="x2_%d" % n, deps=[ld])
            last[slot] = g.get(out[i:i + b, j:j + b], off, name="st%d" % n,
                               deps=[c])
            n += 1
    run = g.run({"workers": 2, "prefetch_depth": 1}, device=dev, comm=comm)
    assert np.array_equal(out, 2 * m)
    st = run.stats
    assert st["tiles_transfer"] == 2 * n and st["tiles_compute"] == n
    assert st["xfer_bytes"] == 2 * n * blk
    return run


def one_rank_comm(monkeypatch, transport):
    """A communicator of this process alone (no launcher variables)."""
    for k in ("HCOMM_RANK", "HCOMM_WORLD_SIZE", "HCOMM_ROOT_ADDR",
              "HCOMM_RANK_TABLE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID",
              "PMI_RANK"):
        monkeypatch.delenv(k, raising=False)
    if transport:
        monkeypatch.setenv("HCOMM_TRANSPORT", transport)
    else:
        monkeypatch.delenv("HCOMM_TRANSPORT", raising=False)
    return pypto.hcomm.Communicator()


def test_declared_transfers_pipeline():
    run = staged_pipeline()
    assert "memcpy" in run.diagnosis["text"]


def test_declared_transfers_through_hcomm(monkeypatch):
    # the device array is the rank's window: puts and gets through
    # libhcomm (its tcp transport here; /dev/hcomm in test_device.py)
    with one_rank_comm(monkeypatch, "tcp") as comm:
        run = staged_pipeline(comm)
        assert "transport hcomm" in run.diagnosis["text"]
        with pytest.raises(ValueError, match="device="):
            pypto.Graph().run(comm=comm)
    with pytest.raises(ValueError, match="open hcomm.Communicator"):
        staged_pipeline(comm)            # destroyed


def test_transfer_errors():
    g = pypto.Graph()
    a = np.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match="block of rows"):
        g.put(a[:, ::2], 0)
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        g.get(ro, 0)
    with pytest.raises(ValueError, match="negative"):
        g.put(a, -1)
    g.put(a, 1 << 20)            # beyond the device: the run fails
    with pytest.raises(pypto.PyptoError):
        g.run(device=np.zeros(64, np.uint8))
    with pytest.raises(ValueError, match="device"):
        g.run(device=np.zeros(64, np.uint8)[::2])
