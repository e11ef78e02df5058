"""Prototype (not part of the package): jax's persistent compilation cache on for the length of one
check_recurrence, reset before and after with jax's reset_cache so the process is left as it was.
Run as a script it wraps rnnbench.api._run_drivers with it and runs jax_cache_scope_checks.py (the
checks the package would carry). In the package the jax facts belong in drivers/_jax.py (a
Framework hook check_recurrence applies), not in api/ (tests/test_architecture.py).

    python jax_cache_scope.py
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rnnbench import registry

# jax settings changed for the check, and restored after it.
JAX_SETTINGS = (
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_enable_compilation_cache",
)


def runs_jax(names: Sequence[str]) -> bool:
    """True when a driver of `names` runs on jax's runtime (jax and flax drivers)."""
    return any(registry.get_driver(name).framework.family == "jax" for name in names)


@contextmanager
def jax_programs_kept(names: Sequence[str]) -> Iterator[str | None]:
    """jax's persistent compilation cache on while the drivers of `names` run; yields its directory,
    or None where it was left alone (no jax driver, jax missing, or the process's own cache set)."""
    jax, cache = _jax_and_cache() if runs_jax(names) else (None, None)
    if jax is None or jax.config.jax_compilation_cache_dir is not None:
        yield None
        return
    # lazy: run/ is imported only when a check runs (see rnnbench.api's _run_drivers)
    from rnnbench.run.caches import cache_root

    before = {name: getattr(jax.config, name) for name in JAX_SETTINGS}
    directory = str(cache_root() / "compile" / "jax")
    cache.reset_cache()
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_enable_compilation_cache", True)
    try:
        yield directory
    finally:
        for name, value in before.items():
            jax.config.update(name, value)
        cache.reset_cache()


def _jax_and_cache() -> tuple[Any, Any]:
    """(jax, its compilation_cache module), or (None, None) where jax is not installed."""
    try:
        import jax
        from jax.experimental.compilation_cache import compilation_cache
    except ImportError:
        return None, None
    return jax, compilation_cache


if __name__ == "__main__":
    import os
    import sys

    import pytest

    import rnnbench.api as api

    sys.modules["rnnbench.api.compile_caches"] = sys.modules[__name__]  # what the test file imports
    original = api._run_drivers

    def run_drivers(base, judged, names, *args, **kwargs):
        with jax_programs_kept(names):
            return original(base, judged, names, *args, **kwargs)

    api._run_drivers = run_drivers
    here = os.path.dirname(os.path.abspath(__file__))
    sys.exit(pytest.main([os.path.join(here, "jax_cache_scope_checks.py"), "-q", "-p", "no:cacheprovider"]))
