"""Which Python interpreter builds an environment: the running one, or the one an environment's `python`
key asks for (a framework release can require a newer Python than rnnbench runs on, as jax 0.11 and later
need 3.12). Found on PATH or among pyenv's installs; never downloaded (uv runs with downloads off)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from rnnbench.errors import InputError


def _runs(python: str) -> bool:
    """Whether `python` starts (a pyenv shim for a version pyenv does not select exits 127)."""
    try:
        return subprocess.run([python, "-c", "pass"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def major_minor(version: object) -> tuple[int, int]:
    """(3, 12) of an environment's `python` key "3.12"; InputError for anything else ("3.x", "3",
    "3.12.1", non-ASCII digits): the one parse of the key, before it names an environment's folder."""
    if not isinstance(version, str) or not re.fullmatch(r"3\.\d{1,3}", version, re.ASCII):
        raise InputError(f"environment python {version!r}: give a major.minor version such as '3.12'")
    major, minor = version.split(".")
    return int(major), int(minor)


def find(version: str | None) -> str:
    """The interpreter for a `python` key such as "3.12" (None: the running one), as a path."""
    if version is None:
        return sys.executable
    major_minor(version)
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    on_path = shutil.which(f"python{version}")
    candidates = [on_path] if on_path else []
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted(str(p) for p in pyenv.glob(f"{version}.*/bin/python{version}"))[::-1]
    for python in candidates:
        if _runs(python):
            return python
    raise InputError(f"this environment needs Python {version}, and no python{version} was found on PATH or in {pyenv}")
