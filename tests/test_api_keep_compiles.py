"""check_recurrence keeps jax's compiled programs on disk for the length of one check
(Framework.keep_compiles; drivers/jax/_framework.py keep_jax_compiles): entries written under the cache root
and read back by the next check with the same verdicts, jax's settings and its cache state as they
were after the check, a process's own cache directory left alone."""

from __future__ import annotations

import numpy as np
import pytest

import rnnbench

jax = pytest.importorskip("jax")
from jax._src import compilation_cache as jax_cache  # noqa: E402  (jax's own once-per-process state)

from rnnbench.drivers.jax._framework import JAX_CACHE_SETTINGS, keep_jax_compiles  # noqa: E402


def step(ops, params, carry, x):
    (h,) = carry
    h = ops.tanh(params["w"] * h + x)
    return (h,), h


def check(**kwargs):
    return rnnbench.check_recurrence(
        step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),), xs=np.ones((3, 2)), order=1, **kwargs
    )


@pytest.fixture
def kept_dir(tmp_path, monkeypatch):
    """Where check_recurrence keeps jax's programs with XDG_CACHE_HOME at tmp_path."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "rnnbench" / "compile" / "jax"


def settings() -> dict:
    return {name: getattr(jax.config, name) for name in JAX_CACHE_SETTINGS}


def test_a_check_keeps_its_jax_programs_and_leaves_jax_as_it_was(kept_dir):
    before = settings()
    first = check(drivers=["jax_lax_scan"])
    entries = sorted(p.name for p in kept_dir.iterdir())
    assert entries, "no compiled program kept"
    assert settings() == before
    assert jax_cache._cache is None and not jax_cache._cache_checked  # uninitialised, as before
    again = check(drivers=["jax_lax_scan"])
    assert sorted(p.name for p in kept_dir.iterdir()) == entries  # no entry added: the same programs
    assert [(r.loss, r.status, r.max_rel_error) for r in again.results] == [
        (r.loss, r.status, r.max_rel_error) for r in first.results
    ]


def test_a_process_with_its_own_jax_cache_directory_keeps_it(kept_dir, tmp_path):
    own = str(tmp_path / "own")
    jax.config.update("jax_compilation_cache_dir", own)
    try:
        with keep_jax_compiles(str(kept_dir.parent)) as directory:
            assert directory is None
            assert jax.config.jax_compilation_cache_dir == own
    finally:
        jax.config.update("jax_compilation_cache_dir", None)
    assert not kept_dir.exists()


def test_a_check_without_jax_drivers_writes_no_jax_cache(kept_dir):
    assert check(drivers=["torch_loop"], losses=["weighted"]).ok
    assert not kept_dir.exists()
