"""Python environments that drivers run in. The main one is this interpreter; others (e.g. the
torch 2.9.0 + torch_xla environment) are separate virtual environments driven as subprocesses, so
a driver's result always crosses a process boundary as plain data."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

REPO = Path(__file__).resolve().parents[3]

XLA_PYTHON_VAR = "RNNBENCH_XLA_PYTHON"
"""Overrides where the torch_xla environment's interpreter is (default <repo>/.venv-xla/bin/python)."""


@dataclass(frozen=True)
class Environment:
    name: str
    python: str
    create_command: str  # what a user runs to create it
    purpose: str = ""
    variables: Mapping[str, str] = field(default_factory=dict)  # set for its worker processes

    def missing_reason(self) -> Optional[str]:
        if Path(self.python).exists():
            return None
        what = f"{self.purpose} environment" if self.purpose else "environment"
        return f"run `{self.create_command}` to create the {what} ('{self.name}': {self.python} not found)"


# The packages whose versions determine a row's result (recorded in its settings and fingerprint).
VERSIONED_PACKAGES = ("torch", "torch_xla", "jax", "jaxlib", "flax", "numpy")


@functools.lru_cache(maxsize=None)
def package_versions(name: str) -> tuple[tuple[str, str], ...]:
    """(package, version) of VERSIONED_PACKAGES installed in environment `name`, read from package
    metadata (nothing is imported; another environment is asked through its interpreter once per
    process). Empty where the environment does not exist."""
    env = environments().get(name)
    if env is None or env.missing_reason():
        return ()
    if name == current():
        found = {}
        for package in VERSIONED_PACKAGES:
            try:
                found[package] = importlib.metadata.version(package)
            except importlib.metadata.PackageNotFoundError:
                pass
        return tuple(sorted(found.items()))
    script = ("import importlib.metadata as m, json, sys\nout = {}\nfor p in sys.argv[1:]:\n"
              "    try: out[p] = m.version(p)\n    except m.PackageNotFoundError: pass\nprint(json.dumps(out))")
    proc = subprocess.run([env.python, "-c", script, *VERSIONED_PACKAGES], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return ()
    return tuple(sorted(json.loads(proc.stdout).items()))


def _prefix_of(python: str) -> Path:
    return Path(python).parent.parent.resolve()


def environments() -> dict[str, Environment]:
    xla_python = os.environ.get(XLA_PYTHON_VAR) or str(REPO / ".venv-xla" / "bin" / "python")
    # The main environment is this interpreter, unless this interpreter is the torch_xla one (a
    # run started from there still sends main's rows to the main environment).
    main_python = sys.executable
    if Path(xla_python).exists() and _prefix_of(xla_python) == Path(sys.prefix).resolve():
        main_python = str(REPO / ".venv" / "bin" / "python")
    return {
        "main": Environment("main", main_python, "make venv"),
        # PJRT_DEVICE=CPU: torch_xla's device is the host CPU (it would otherwise guess, with a warning).
        "xla": Environment("xla", xla_python, "make venv-xla", "torch_xla", {"PJRT_DEVICE": "CPU"}),
    }


def get(name: str) -> Environment:
    envs = environments()
    if name not in envs:
        raise KeyError(f"unknown environment {name!r}")
    return envs[name]


def current() -> str:
    """The name of the environment this interpreter belongs to ("main" unless it is another's)."""
    here = Path(sys.prefix).resolve()
    for env in environments().values():
        if env.name != "main" and Path(env.python).exists() and _prefix_of(env.python) == here:
            return env.name
    return "main"


def thread_env(threads: int) -> dict[str, str]:
    """Environment variables that fix thread counts before any framework is imported: the OpenMP /
    BLAS pools, and each registered framework's own (Framework.thread_env)."""
    from rnnbench import registry

    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    for framework in registry.frameworks().values():
        env.update(framework.thread_env(threads))
    return env
