"""The hand-oracle cache (rnnbench.check.oracles.oracle_cache): an answer read back is the one computed, and
anything the answer depends on (the case's arrays, its seed, the code) is a new key."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from rnnbench import losses, registry
from rnnbench.check.oracles import oracle_cache
from rnnbench.check.oracles.oracle import oracle_grads


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(oracle_cache, "STORE_AFTER_S", 0.0)  # keep even the small cases of a test
    return tmp_path / "rnnbench" / "oracles"


def _lstm(seed: int = 0, form: str = "weighted"):
    model = registry.get_model("lstm")
    return losses.with_loss(
        model, model.make_case(model.sizes_with_defaults({"T": 3, "B": 2, "I": 2, "H": 3}), seed), form
    )


def test_an_answer_read_back_is_the_one_computed(cache: Path) -> None:
    model, case = _lstm()
    fresh = oracle_grads(model, case)
    assert len(list(cache.glob("*.npz"))) == 1
    calls = []
    again = oracle_cache.cached(model, case, lambda: calls.append(1) or {})
    assert calls == [] and again.grads.keys() == fresh.grads.keys()
    assert all(np.array_equal(again.grads[n], fresh.grads[n]) for n in again.grads)
    assert again.source == f"cache:{oracle_cache.cache_key(model, case)}" and fresh.source == "computed"
    assert oracle_grads(model, case).kind == fresh.kind


def test_the_case_and_its_loss_form_are_in_the_key() -> None:
    model, case = _lstm()
    key = oracle_cache.cache_key(model, case)
    assert key == oracle_cache.cache_key(*_lstm())
    assert key != oracle_cache.cache_key(*_lstm(seed=1))
    assert key != oracle_cache.cache_key(*_lstm(form="last_y"))
    nudged = dict(case.params)
    name = sorted(nudged)[0]
    nudged[name] = np.nextafter(nudged[name], np.inf)  # one ulp anywhere is another case
    assert key != oracle_cache.cache_key(model, dataclasses.replace(case, params=nudged))


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


MODULE = """
import numpy as np

def helper(case):
    return {"w": np.ones(2) * SCALE}

def oracle(case):
    return helper(case)

SCALE = 1.0
"""


def test_an_edit_to_the_code_is_a_new_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, case = _lstm()
    source = tmp_path / "oracle_cache_probe.py"
    source.write_text(MODULE)
    monkeypatch.delitem(sys.modules, "oracle_cache_probe", raising=False)
    probe = _import(source, "oracle_cache_probe")
    keys = [oracle_cache.cache_key(dataclasses.replace(model, oracle=probe.oracle), case)]
    source.write_text(MODULE.replace("np.ones(2) * SCALE", "np.ones(2) * SCALE * 2"))  # the helper, called by name
    keys.append(oracle_cache.cache_key(dataclasses.replace(model, oracle=probe.oracle), case))
    assert None not in keys and keys[0] != keys[1]
    scope: dict = {}
    exec("def oracle(case):\n    return {}", scope)  # no source file: never kept
    assert oracle_cache.cache_key(dataclasses.replace(model, oracle=scope["oracle"]), case) is None


def test_a_broken_file_is_computed_again_and_a_quick_answer_is_not_kept(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, case = _lstm()
    key = oracle_cache.cache_key(model, case)
    cache.mkdir(parents=True)
    (cache / f"{key}.npz").write_bytes(b"cut short")
    name = sorted(case.params)[0]
    want = {name: np.arange(float(np.size(case.params[name]))).reshape(np.shape(case.params[name]))}
    assert np.array_equal(oracle_cache.cached(model, case, lambda: want).grads[name], want[name])
    assert np.array_equal(oracle_cache.cached(model, case, lambda: {}).grads[name], want[name])  # rewritten whole
    monkeypatch.setattr(oracle_cache, "STORE_AFTER_S", 60.0)
    other = _lstm(seed=3)
    oracle_cache.cached(*other, lambda: want)
    assert not (cache / f"{oracle_cache.cache_key(*other)}.npz").exists()
    assert not list(cache.glob("*.tmp*"))
