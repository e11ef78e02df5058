"""Compile caches: off and empty for a cold first call (`sweep`, asv), kept across runs for `rnnbench run`.
Which variables switch a framework's caches is a fact of the framework (Framework.cold_cache_env,
warm_cache_env); this module applies every registered framework's."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from rnnbench import registry
from rnnbench.processes.owned import make_owned
from rnnbench.processes.tmpdirs import run_tmpdir


def cold_cache_env(root: str | None = None) -> dict[str, str]:
    """Environment variables for a cold first call: every registered framework's on-disk compile
    caches off (Framework.cold_cache_env), their cache directories under one fresh temp dir. Set
    before the framework is imported (a fresh process). The temp dir is made under `root`, by
    default in this process's run directory (rnnbench.processes.tmpdirs.run_tmpdir), which goes when
    the process ends, however it ends (after a SIGKILL: when the next rnnbench process starts a
    worker). The temp dir is an owned folder (rnnbench.processes.owned, kind "cold-cache")."""
    fresh = tempfile.mkdtemp(prefix="rnnbench-cold-", dir=root if root is not None else run_tmpdir())
    make_owned(Path(fresh), "cold-cache", "a cold compile cache")  # new and empty: adopted
    env: dict[str, str] = {}
    for framework in registry.frameworks().values():
        env.update(framework.cold_cache_env(fresh))
    return env


def cache_root() -> Path:
    """$XDG_CACHE_HOME/rnnbench (default ~/.cache/rnnbench): what rnnbench keeps across runs."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "rnnbench"


def warm_cache_env() -> dict[str, str]:
    """Environment variables for `rnnbench run`'s workers: every registered framework's on-disk
    compile caches kept across runs under cache_root()/compile (Framework.warm_cache_env), except
    variables the user has set. A repeated run then reuses earlier compiles (its first calls are
    warm; each row records the cache variables it ran with)."""
    env: dict[str, str] = {}
    for framework in registry.frameworks().values():
        env.update(framework.warm_cache_env(str(cache_root() / "compile")))
    return {k: v for k, v in env.items() if k not in os.environ}
