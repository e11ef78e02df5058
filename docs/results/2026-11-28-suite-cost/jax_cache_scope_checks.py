"""Prototype checks (see jax_cache_scope.py): check_recurrence keeping jax's compiled programs on
disk for one check: entries written under the cache root, every jax setting and jax's cache state
back as they were after it, a process's own cache settings left alone."""

from __future__ import annotations

import numpy as np
import pytest

import rnnbench
from rnnbench.api import compile_caches

jax = pytest.importorskip("jax")


def step(ops, params, carry, x):
    (h,) = carry
    h = ops.tanh(params["w"] * h + x)
    return (h,), h


def check(**kwargs):
    return rnnbench.check_recurrence(
        step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),), xs=np.ones((3, 2)), order=1, **kwargs
    )


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "rnnbench" / "compile" / "jax"


def settings() -> dict:
    return {name: getattr(jax.config, name) for name in compile_caches.JAX_SETTINGS}


def test_a_check_on_a_jax_driver_writes_its_programs_and_restores_jax(cache_home):
    before = settings()
    report = check(drivers=["jax_lax_scan"], losses=["weighted"])
    assert report.ok
    assert cache_home.is_dir() and any(cache_home.iterdir()), "no compiled program kept"
    assert settings() == before
    from jax._src import compilation_cache  # jax's own state: uninitialised again, as before the check

    assert compilation_cache._cache is None and not compilation_cache._cache_checked


def test_a_second_process_like_check_reads_the_programs_back_with_the_same_verdicts(cache_home):
    first = check(drivers=["jax_lax_scan"])
    entries = sorted(p.name for p in cache_home.iterdir())
    again = check(drivers=["jax_lax_scan"])
    assert sorted(p.name for p in cache_home.iterdir()) == entries  # read back, nothing new compiled
    assert [(r.loss, r.status, r.max_rel_error) for r in again.results] == [
        (r.loss, r.status, r.max_rel_error) for r in first.results
    ]


def test_a_process_with_its_own_jax_cache_keeps_it(cache_home, tmp_path):
    own = str(tmp_path / "own")
    jax.config.update("jax_compilation_cache_dir", own)
    try:
        with compile_caches.jax_programs_kept(["jax_lax_scan"]) as directory:
            assert directory is None
            assert jax.config.jax_compilation_cache_dir == own
    finally:
        jax.config.update("jax_compilation_cache_dir", None)
    assert not cache_home.exists()


def test_no_jax_driver_leaves_jax_alone(cache_home):
    with compile_caches.jax_programs_kept(["torch_loop"]) as directory:
        assert directory is None
    assert not compile_caches.runs_jax(["torch_loop", "torch_scan"])
    assert compile_caches.runs_jax(["torch_loop", "flax_scan"])
