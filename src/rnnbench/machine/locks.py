"""Lock files: every package an environment installs, pinned with its hashes
(requirements/locks/<name>.lock, `rnnbench env lock NAME...`, `make lock`). The requirements files and
environments.toml's pins are the inputs; `make venv` installs the main environment's lock with pip
(--require-hashes) and `rnnbench env create` another environment's with uv.

A lock is resolved with uv from pip's configured package sources (rnnbench.machine.environments.
pip_sources) for this interpreter's Python version and platform. The main environment's lock also
holds its extras (environments.toml `lock_with`: charts, ray, dev), since `make venv` builds the
environment both README commands need; rnnbench's own dependencies are in every lock."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from rnnbench.errors import InputError
from rnnbench.machine import env_create, environments


def lock_inputs(name: str) -> tuple[list[str], str]:
    """(requirements files relative to the repository, pins given inline as text) of environment
    `name`: its requirements, its `lock_with` files, and rnnbench's own dependencies."""
    env = environments.get(name)
    entry = {**environments._builtin().get(name, {}), **environments._EXTRA.get(name, {})}
    files = [str(Path(env.requirements_file).relative_to(environments.REPO))] if env.requirements_file else []
    files += list(entry.get("lock_with", []))
    inline = [] if env.requirements_file else list(env.requirements)
    if not files and not inline:
        raise InputError(f"environment {name!r} has no requirements to lock")
    return files, "\n".join([*inline, *environments.rnnbench_dependencies()]) + "\n"


def write_lock(name: str, log: Callable[[str], None] = print) -> Path:
    """Resolve environment `name`'s inputs and write its lock file (uv pip compile --generate-hashes)."""
    uv = env_create._uv()
    if uv is None:
        raise InputError("locking needs uv: `pip install uv` (requirements/dev.txt pins it; `make venv` installs it)")
    files, inline = lock_inputs(name)
    out = environments.lock_path(name)
    out.parent.mkdir(parents=True, exist_ok=True)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    command = [
        uv,
        "pip",
        "compile",
        "-q",
        "--generate-hashes",
        "--python-version",
        version,
        "--custom-compile-command",
        f"rnnbench env lock {name}",
        *env_create.pip_sources(),
        *files,
        "-",
        "-o",
        str(out.relative_to(environments.REPO)),
    ]
    proc = subprocess.run(command, input=inline, capture_output=True, text=True, cwd=environments.REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"uv pip compile failed for {name}: {proc.stderr.strip()[-2000:]}")
    pins = sum(1 for line in out.read_text().splitlines() if "==" in line)
    log(
        f"locked {name}: {out.relative_to(environments.REPO)} ({pins} "
        f"packages, from {', '.join(files + ['rnnbench dependencies'])})"
    )
    return out
