"""Creating an environment of rnnbench.machine.environments with uv: `create` (under a lock, into
an owned folder: rnnbench.processes.owned), pip's package sources as uv flags (`pip_sources`), and
the removal of builds that newer pins superseded. The catalogue itself (which environments exist,
where, from which pins, whether complete) is rnnbench.machine.environments."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from rnnbench.errors import InputError
from rnnbench.machine import interpreters
from rnnbench.machine.environments import (
    COMPLETE_MARK,
    RECIPE,
    REPO,
    Environment,
    cache_root,
    get,
    lock_digest,
    lock_path,
    package_versions,
    rnnbench_dependencies,
)
from rnnbench.processes import owned

ENV_KIND = "environment"  # the owned-folder kind of every environment create() builds


def pip_sources(constraints: bool = True) -> list[str]:
    """pip's configured package sources (find-links, index URLs, constraint files), as uv flags:
    uv reads no pip configuration, and an environment must resolve from the same sources as
    `pip install` on this machine. With extra indexes, uv must be told to take the best version
    across indexes (its default takes a package from the first index that has it at all).
    constraints=False leaves constraint files out: a hashed lock pins every version already, and
    uv's --require-hashes refuses a constraint that is not an exact pin."""
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    values: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        option = key.rpartition(".")[2]
        values.setdefault(option, [])
        for v in value.strip().strip("'\"").split():
            if v not in values[option]:
                values[option].append(v)
    flags: list[str] = []
    for option, flag in (
        ("index-url", "--index-url"),
        ("extra-index-url", "--extra-index-url"),
        ("find-links", "--find-links"),
        ("constraint", "--constraint"),
    ):
        for v in values.get(option, []):
            if flag == "--constraint" and (not constraints or not Path(v).is_file()):
                continue
            flags += [flag, v]
    if values.get("extra-index-url") or values.get("find-links"):
        flags += ["--index-strategy", "unsafe-best-match"]
    return flags


def _uv() -> str | None:
    return shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")


def create(name: str, log: Callable[[str], None] = print) -> Environment:
    """Create environment `name` unless it exists (complete); returns it. Holds a lock on
    <prefix>.lock while it works, so two runs never build one environment at once; a directory a
    creation cut short (no COMPLETE_MARK) is removed and built again. The environment's folder is an
    owned one (rnnbench.processes.owned, ENV_KIND): a `path` that names a folder rnnbench did not
    make (the folder of a user's virtual environments) is refused with InputError, never emptied;
    an empty one is adopted."""
    env = get(name)
    if not env.creatable:
        if env.missing_reason():
            raise InputError(f"environment {name!r} is the interpreter rnnbench runs in; create it with `make venv`")
        return env
    if not env.requirements:
        raise InputError(
            f"environment {name!r} has no requirements to create it from"
            + (f" ({env.requirements_file} is missing)" if env.requirements_file else "")
        )
    uv = _uv()
    if uv is None:
        raise InputError(
            "creating an environment needs uv: `pip install uv` (requirements/dev.txt pins it; `make venv` installs it)"
        )
    prefix = env.prefix
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with open(_lock_path(prefix), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if env.missing_reason() is None:
            return env
        owned.replace_owned(prefix, ENV_KIND, f"environment {name!r}")  # refused before anything is removed
        (prefix / ".rnnbench-partial").touch()  # before uv writes: a build cut short anywhere is partial
        start = time.perf_counter()
        wanted = env.requirements_file or ", ".join(env.requirements)
        log(f"creating environment {name} in {prefix} ({wanted})")
        uv_env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "VIRTUAL_ENV": ""}
        python_found = interpreters.find(env.python_version)
        _run([uv, "venv", "-q", "--seed", "--allow-existing", "--python", python_found, str(prefix)], uv_env)
        python = str(prefix / "bin" / "python")
        reqs = ["-r", env.requirements_file] if env.requirements_file else list(env.requirements)
        locked = lock_path(name).is_file()
        if locked:  # every package pinned with its hashes, rnnbench's dependencies too
            reqs = ["--require-hashes", "-r", str(lock_path(name))]
        else:  # the pins and rnnbench's own dependencies in one resolution (the pins win)
            reqs += list(rnnbench_dependencies())
        # then rnnbench itself: an editable install of this checkout, nothing else changed.
        sources = pip_sources(constraints=not locked and env.constraints)
        _run([uv, "pip", "install", "-q", "--python", python, *sources, *reqs], uv_env)
        _run([uv, "pip", "install", "-q", "--python", python, "--no-deps", "-e", str(REPO)], uv_env)
        (prefix / COMPLETE_MARK).write_text(
            json.dumps(
                {
                    "requirements": list(env.requirements),
                    "lock": lock_digest(name),
                    "rnnbench_dependencies": list(rnnbench_dependencies()),
                    "recipe": RECIPE,
                    "seconds": round(time.perf_counter() - start, 1),
                }
            )
            + "\n"
        )
        (prefix / ".rnnbench-partial").unlink()
        log(f"created environment {name} in {time.perf_counter() - start:.0f} s")
    _remove_superseded(env, log)
    package_versions.cache_clear()
    return get(name)


def remove(name: str, log: Callable[[str], None] = print) -> bool:
    """Remove environment `name`'s folder in rnnbench's cache (under its lock, so never while another
    process builds it); False where there was none. An environment at a path of its own (main, xla)
    is refused with InputError: its folder is the checkout's, made by `make`."""
    env = get(name)
    if env.prefix.parent != cache_root():
        raise InputError(f"environment {name!r} lives at {env.prefix}, outside rnnbench's cache: remove it by hand")
    if not env.prefix.exists():
        return False
    with open(_lock_path(env.prefix), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        owned.remove_owned(env.prefix, ENV_KIND, f"environment {name!r}")
    _lock_path(env.prefix).unlink(missing_ok=True)
    package_versions.cache_clear()
    log(f"removed environment {name} ({env.prefix.name})")
    return True


def size_bytes(path: Path) -> int:
    """The apparent size of the files under `path`, each hardlinked file once (uv links an
    environment's files from its cache, so this is what the environment holds, not what it adds)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def _lock_path(prefix: Path) -> Path:
    """The lock held while `prefix` is built: beside it in rnnbench's cache; for an environment at
    a path of its own (xla's .venv-xla), in the cache too, named by a hash of that path, so a
    checkout gets no stray file."""
    if prefix.parent == cache_root():
        return Path(str(prefix) + ".lock")
    cache_root().mkdir(parents=True, exist_ok=True)
    return cache_root() / f"path-{hashlib.sha256(str(prefix.resolve()).encode()).hexdigest()[:10]}.lock"


def _remove_superseded(env: Environment, log: Callable[[str], None]) -> None:
    """Remove the cached builds of `env` from other pins (<name>-<other hash>): they are never used
    again, and a torch build is gigabytes. A build another process holds the lock of is left, and
    so is a folder of a build's name that rnnbench did not make (no ENV_KIND marker)."""
    if env.prefix.parent != cache_root():
        return
    for old in cache_root().glob(f"{env.name}-*"):
        if old == env.prefix or not re.fullmatch(re.escape(env.name) + r"-[0-9a-f]{10}", old.name):
            continue
        if not owned.is_owned(old, ENV_KIND):
            continue
        with open(_lock_path(old), "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue
            owned.remove_owned(old, ENV_KIND, f"a superseded build of environment {env.name!r}", ignore_errors=True)
            _lock_path(old).unlink(missing_ok=True)
        log(f"removed {old.name}, built from other pins or by an older recipe")


def _run(command: list[str], env: Mapping[str, str]) -> None:
    proc = subprocess.run(command, env=dict(env), capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"`{' '.join(command[:3])} ...` failed (exit {proc.returncode}):\n{tail}")
