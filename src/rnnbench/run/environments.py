"""Python environments that drivers run in. The main one is this interpreter; others (e.g. the
torch 2.9.0 + torch_xla environment) are separate virtual environments driven as subprocesses, so
a driver's result always crosses a process boundary as plain data."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Environment:
    name: str
    python: str
    create_command: str  # what a user runs to create it

    def missing_reason(self) -> Optional[str]:
        if Path(self.python).exists():
            return None
        return f"environment '{self.name}' not found ({self.python}): run `{self.create_command}` to create it"


def environments() -> dict[str, Environment]:
    return {
        "main": Environment("main", sys.executable, "make venv"),
    }


def get(name: str) -> Environment:
    envs = environments()
    if name not in envs:
        raise KeyError(f"unknown environment {name!r}")
    return envs[name]


def thread_env(threads: int) -> dict[str, str]:
    """Environment variables that fix thread counts before any framework is imported."""
    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    if threads == 1:
        env["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
    return env
