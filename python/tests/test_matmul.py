# SPDX-License-Identifier: MIT
"""pypto.matmul against numpy (float64 reference)."""
import numpy as np
import pytest

import pypto


def check(a, b, c):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    k = a.shape[1]
    # fp32 accumulation over k terms of products of values in [-1, 1)
    tol = 4 * k * np.finfo(np.float32).eps * np.abs(a).max() * np.abs(b).max()
    err = np.abs(c - ref).max()
    assert err <= tol, "max error %g > %g" % (err, tol)


@pytest.mark.parametrize("m, k, n, tile", [
    (64, 64, 64, 64), (200, 130, 70, 32), (1, 1, 1, 16), (256, 512, 128, 128),
])
def test_matmul_shapes(m, k, n, tile):
    rng = np.random.default_rng(m * 1000 + n)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c = pypto.matmul(a, b, config={"tile_size": tile})
    assert c.shape == (m, n) and c.dtype == np.float32
    check(a, b, c)


def test_matmul_seed_config_profile():
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (300, 300)).astype(np.float32)
    b = rng.uniform(-1, 1, (300, 300)).astype(np.float32)
    pypto_config = {'prefetch_depth': 4, 'tile_size': (64, 64),
                    'double_buffering': True}
    c, run = pypto.profile(pypto.matmul, a, b, config=pypto_config)
    check(a, b, c)
    st = run.stats
    assert st["tiles_compute"] == 5 * 5 * 5   # ceil(300/64)^3 blocks
    assert st["tiles_transfer"] > 0 and st["xfer_bytes"] > 0
    assert st["xfer_cap"] == 5                # prefetch_depth + 1
    assert 0.0 <= st["overlap_eff"] <= 1.0


def test_matmul_converts_and_out():
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (50, 40))             # float64
    b = np.asfortranarray(rng.uniform(-1, 1, (40, 30)).astype(np.float32))
    out = np.empty((50, 30), dtype=np.float32)
    c = pypto.matmul(a, b.T.T, config={"tile_size": 16}, out=out)
    assert c is out
    check(a.astype(np.float32), np.ascontiguousarray(b), c)


def test_matmul_errors():
    a = np.zeros((4, 5), np.float32)
    with pytest.raises(ValueError, match="shapes"):
        pypto.matmul(a, np.zeros((4, 5), np.float32))
    with pytest.raises(ValueError, match="2-D"):
        pypto.matmul(np.zeros(5, np.float32), a)
    with pytest.raises(ValueError, match="out"):
        pypto.matmul(a, np.zeros((5, 3), np.float32),
                     out=np.zeros((4, 3), np.float64))
    with pytest.raises(KeyError):
        pypto.matmul(a, np.zeros((5, 3), np.float32), config={"bogus": 1})
