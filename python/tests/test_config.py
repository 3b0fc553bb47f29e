# SPDX-License-Identifier: MIT
"""Configuration from Python: the seed's snippets as written."""
import pytest

import hcomm
import pypto


def test_seed_pypto_config():
    pypto_config = {'prefetch_depth': 4, 'tile_size': (256, 256),
                    'double_buffering': True}
    c = pypto.resolve_config(pypto_config)
    assert c["prefetch_depth"] == 4
    assert c["tile_size"] == 256
    assert c["double_buffering"] is True


def test_config_defaults_and_env(monkeypatch):
    monkeypatch.delenv("PYPTO_PREFETCH_DEPTH", raising=False)
    assert pypto.resolve_config()["prefetch_depth"] == 2
    monkeypatch.setenv("PYPTO_PREFETCH_DEPTH", "7")
    assert pypto.resolve_config()["prefetch_depth"] == 7
    # the dict overrides the environment
    assert pypto.resolve_config({"prefetch_depth": 3})["prefetch_depth"] == 3
    monkeypatch.setenv("PYPTO_PREFETCH_DEPTH", "lots")
    with pytest.raises(ValueError, match="PYPTO_PREFETCH_DEPTH"):
        pypto.resolve_config()


@pytest.mark.parametrize("bad, exc, text", [
    ({"tile_size": (256, 128)}, ValueError, "square"),
    ({"tile_size": (1, 2, 3)}, ValueError, "square"),
    ({"prefetch": 4}, KeyError, "prefetch"),
    ({"workers": "two"}, TypeError, "workers"),
    ({"workers": 2.5}, TypeError, "workers"),
    ({"workers": -1}, ValueError, "workers"),
    ({"workers": 1 << 40}, ValueError, "workers"),
    ({1: 2}, TypeError, "strings"),
])
def test_config_errors(bad, exc, text):
    with pytest.raises(exc, match=text):
        pypto.resolve_config(bad)
    with pytest.raises(TypeError):
        pypto.resolve_config([("workers", 1)])


def test_seed_hcomm_config(monkeypatch):
    monkeypatch.delenv("HCOMM_COMP_THRESHOLD", raising=False)
    monkeypatch.delenv("HCOMM_FP16_COMPRESS", raising=False)
    hcomm_config = hcomm.Config()
    assert hcomm_config.enable_fp16_compress is False
    assert hcomm_config.comp_threshold == 64 * 1024
    hcomm_config.enable_fp16_compress = True
    hcomm_config.comp_threshold = 1024
    d = hcomm_config.as_dict()
    assert d["enable_fp16_compress"] is True and d["comp_threshold"] == 1024
    with pytest.raises(AttributeError, match="comp_treshold"):
        hcomm_config.comp_treshold = 1024
    with pytest.raises(ValueError):
        hcomm_config.comp_threshold = -1


def test_hcomm_config_env(monkeypatch):
    monkeypatch.setenv("HCOMM_COMP_THRESHOLD", "2K")
    assert hcomm.Config().comp_threshold == 2048
    assert hcomm.Config(env=False).comp_threshold == 64 * 1024
    monkeypatch.setenv("HCOMM_COMP_THRESHOLD", "2Q")
    with pytest.raises(hcomm.InvalidError, match="HCOMM_COMP_THRESHOLD") as e:
        hcomm.Config()
    assert isinstance(e.value, ValueError)
    assert e.value.code == 4   # HCOMM_ERR_INVAL
