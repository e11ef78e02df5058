"""Python environments that drivers run in, as data: src/rnnbench/environments.toml, plus the
[environments.<name>] tables of a --config file (`add_definitions`). The main environment is
the running interpreter; each other one is a separate virtual environment driven as a
subprocess, so a driver's result always crosses a process boundary as plain data.

An environment with pinned requirements is created on demand (rnnbench.machine.env_create) with
uv into a cache directory keyed by a hash of its requirements and Python version, and reused while they are
unchanged. rnnbench is installed there as an editable install of this checkout, so every
environment runs the same rnnbench source. Which drivers an environment runs: a default
environment (main, xla) runs the drivers that name it (Driver.environments, the default run's
rows); any other environment, a framework version of the matrix, runs every driver whose
framework's packages its requirements pin (`runs`)."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rnnbench import registry
from rnnbench.errors import InputError
from rnnbench.inputs import read_regular_file
from rnnbench.machine import interpreters

REPO = Path(__file__).resolve().parents[3]
DEFINITIONS = Path(__file__).resolve().parents[1] / "environments.toml"

XLA_PYTHON_VAR = "RNNBENCH_XLA_PYTHON"
"""Overrides where the torch_xla environment's interpreter is (default <repo>/.venv-xla/bin/python)."""

COMPLETE_MARK = ".rnnbench-complete"  # written last: a directory without it is a creation cut short
RECIPE = 2  # how `create` builds an environment; a build by another recipe is rebuilt
# (2: seeded with pip and setuptools, as `python -m venv` is: inductor's C++ builds import setuptools)


@dataclass(frozen=True)
class Environment:
    name: str
    python: str
    create_command: str  # what a user runs to create it
    purpose: str = ""
    variables: Mapping[str, str] = field(default_factory=dict)  # set for its worker processes
    requirements: tuple[str, ...] = ()  # pinned requirements (read from its file where it names one)
    requirements_file: str | None = None
    default: bool = False  # in the default selection
    creatable: bool = True  # False: the running interpreter (main), which rnnbench cannot create
    python_version: str | None = None  # "3.12": built on that Python (None: the running one's)
    constraints: bool = True  # False: pip's configured constraint files do not apply (a release beyond a cap)

    @property
    def prefix(self) -> Path:
        return Path(self.python).parent.parent

    def missing_reason(self) -> str | None:
        if Path(self.python).exists() and (not self.creatable or self.complete()):
            return None
        what = f"{self.purpose} environment" if self.purpose else "environment"
        if self.create_command.startswith("make ") and not (REPO / "Makefile").is_file():
            # an installed rnnbench: no Makefile to run, and the path would point into site-packages
            return f"the {what} '{self.name}' is created from a source checkout of rnnbench (not installed here)"
        return f"run `{self.create_command}` to create the {what} ('{self.name}': {self.python} not found)"

    @property
    def on_demand(self) -> bool:
        """Created by rnnbench itself, into its cache (`rnnbench env create NAME`), where it is
        missing: by a run that names it, and by a Ray task on a node that lacks it."""
        return self.creatable and self.create_command.startswith("rnnbench env create")

    def complete(self) -> bool:
        """Created to the end from today's requirements: by `create` (its mark names them), or by
        hand (an interpreter without create's marks)."""
        try:
            made = json.loads((self.prefix / COMPLETE_MARK).read_text())
        except (OSError, ValueError):
            return not (self.prefix / ".rnnbench-partial").exists()
        # a mark from before lock files has no "lock": built from the same pins, it stands
        return (
            isinstance(made, dict)
            and made.get("requirements") == list(self.requirements)
            and made.get("lock", lock_digest(self.name)) == lock_digest(self.name)
            and made.get("rnnbench_dependencies") == list(rnnbench_dependencies())
            and made.get("recipe") == RECIPE
        )

    def packages(self) -> set[str]:
        """The distribution names its requirements pin, normalized (`jax[cpu]==0.8.2` -> jax)."""
        names = set()
        for line in self.requirements:
            m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
            if m:
                names.add(m.group(1).lower().replace("-", "_"))
        return names


def versioned_packages() -> tuple[str, ...]:
    """The packages whose versions determine a row's result (recorded in its settings and
    fingerprint): every registered framework's (Framework.packages), sorted."""
    return tuple(sorted({p for f in registry.frameworks().values() for p in f.packages}))


DEFINITIONS_VAR = "RNNBENCH_ENVIRONMENTS"
"""JSON of the definitions a --config file added: set by add_definitions, so the run's worker
processes (which judge where a driver runs) know them too."""
_EXTRA: dict[str, dict[str, Any]] = json.loads(os.environ.get(DEFINITIONS_VAR) or "{}")


def load_definitions() -> None:
    """Take the definitions $RNNBENCH_ENVIRONMENTS names now: read at import, and again by a Ray
    task once it has set its run's variables (its worker process imported this module earlier,
    maybe for another run)."""
    _EXTRA.clear()
    _EXTRA.update(json.loads(os.environ.get(DEFINITIONS_VAR) or "{}"))
    package_versions.cache_clear()


@functools.cache
def package_versions(name: str) -> tuple[tuple[str, str], ...]:
    """(package, version) of versioned_packages() installed in environment `name`, read from package
    metadata (nothing is imported; another environment is asked through its interpreter once per
    process). Empty where the environment does not exist."""
    env = environments().get(name)
    if env is None or env.missing_reason():
        return ()
    if name == current():
        found = {}
        for package in versioned_packages():
            try:
                found[package] = importlib.metadata.version(package)
            except importlib.metadata.PackageNotFoundError:
                pass
        return tuple(sorted(found.items()))
    script = (
        "import importlib.metadata as m, json, sys\nout = {}\nfor p in sys.argv[1:]:\n"
        "    try: out[p] = m.version(p)\n    except m.PackageNotFoundError: pass\nprint(json.dumps(out))"
    )
    proc = subprocess.run(
        [env.python, "-c", script, *versioned_packages()], capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0:
        return ()
    return tuple(sorted(json.loads(proc.stdout).items()))


def _prefix_of(python: str) -> Path:
    return Path(python).parent.parent.resolve()


def cache_root() -> Path:
    """Where created environments live: $XDG_CACHE_HOME/rnnbench/envs (default ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rnnbench" / "envs"


@functools.lru_cache(maxsize=1)
def _builtin() -> dict[str, dict[str, Any]]:
    import tomllib

    with open(DEFINITIONS, "rb") as f:
        return tomllib.load(f)


DEFINITION_KEYS = {
    "about": str,
    "requirements": (str, list),
    "lock_with": list,
    "path": str,
    "python_variable": str,
    "variables": dict,
    "default": bool,
    "interpreter": str,
    "create": str,
    "purpose": str,
    "python": str,
    "constraints": bool,
}


def check_definition(name: str, entry: Any, where: str) -> dict[str, Any]:
    """`entry` as an environment definition, or InputError naming `where` (a config file's key)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise InputError(f"{where}: environment name {name!r} must be letters, digits, '.', '_' or '-'")
    if not isinstance(entry, dict):
        raise InputError(f"{where}: environment {name!r} must be a table, got {type(entry).__name__}")
    for key, value in entry.items():
        if key not in DEFINITION_KEYS:
            raise InputError(f"{where}: environment {name!r}: unknown key {key!r}; known: {', '.join(DEFINITION_KEYS)}")
        if not isinstance(value, DEFINITION_KEYS[key]):
            raise InputError(f"{where}: environment {name!r}: {key!r} has the wrong type ({type(value).__name__})")
    reqs = entry.get("requirements")
    if isinstance(reqs, list) and not all(isinstance(r, str) and r.strip() for r in reqs):
        raise InputError(f"{where}: environment {name!r}: requirements must be non-empty strings")
    if isinstance(reqs, str):  # a requirements file: read now (a FIFO or /dev/zero is refused unread)
        read_regular_file(REPO / reqs, f"{where}: environment {name!r}: requirements file")
    if not any(k in entry for k in ("requirements", "path")) and name not in _builtin():
        raise InputError(f"{where}: environment {name!r} needs `requirements` (pins to create it from) or `path`")
    if not all(isinstance(v, str) for v in entry.get("variables", {}).values()):
        raise InputError(f"{where}: environment {name!r}: variables must be strings")
    return entry


def add_definitions(definitions: Mapping[str, Any], where: str) -> list[str]:
    """Add or replace environments from a --config file's [environments.<name>] tables (an empty
    table names a built-in one); returns their names, the run's selection."""
    for name, entry in definitions.items():
        _EXTRA[name] = {**_builtin().get(name, {}), **check_definition(name, entry, where)}
    os.environ[DEFINITIONS_VAR] = json.dumps(_EXTRA)
    package_versions.cache_clear()
    return list(definitions)


@functools.cache
def _requirements_file(path: Path) -> tuple[str, ...]:
    return tuple(l.split("#")[0].strip() for l in path.read_text().splitlines() if l.split("#")[0].strip())


def _requirements(entry: Mapping[str, Any]) -> tuple[tuple[str, ...], str | None]:
    reqs = entry.get("requirements", ())
    if isinstance(reqs, str):
        path = REPO / reqs
        try:
            return _requirements_file(path), str(path)
        except OSError:
            return (), str(path)
    return tuple(reqs), None


@functools.lru_cache(maxsize=1)
def rnnbench_dependencies() -> tuple[str, ...]:
    """rnnbench's own runtime dependencies (pyproject.toml), installed beside every environment's
    pins: a worker needs them whatever the environment pins (ml_dtypes for bfloat16 rows). From
    the checkout's pyproject.toml, or, for rnnbench installed from a wheel (as asv installs it),
    from the installed package's metadata."""
    import tomllib
    from importlib import metadata

    try:
        with open(REPO / "pyproject.toml", "rb") as f:
            return tuple(tomllib.load(f)["project"]["dependencies"])
    except FileNotFoundError:
        return tuple(r for r in metadata.requires("rnnbench") or () if "extra ==" not in r)


LOCKS = REPO / "requirements" / "locks"


def lock_path(name: str) -> Path:
    """Where environment `name`'s lock file is (`rnnbench env lock`, rnnbench.machine.locks): every
    package it installs pinned with its hashes. Where it exists, `create` installs from it alone."""
    return LOCKS / f"{name}.lock"


def lock_digest(name: str) -> str:
    """A short hash of `name`'s lock file ("" without one): part of the environment's identity."""
    try:
        return hashlib.sha256(lock_path(name).read_bytes()).hexdigest()[:16]
    except OSError:
        return ""


def _hash(requirements: tuple[str, ...], lock: str = "", python: str | None = None) -> str:
    version = list(interpreters.major_minor(python)) if python else list(sys.version_info[:2])
    what = [sorted(requirements), list(rnnbench_dependencies()), RECIPE, version]
    return hashlib.sha256(json.dumps(what + ([lock] if lock else [])).encode()).hexdigest()[:10]


def _environment(name: str, entry: Mapping[str, Any]) -> Environment:
    requirements, requirements_file = _requirements(entry)
    creatable = entry.get("interpreter") != "this"
    if "path" in entry:
        python = str(REPO / entry["path"] / "bin" / "python")
    else:
        python = str(
            cache_root() / f"{name}-{_hash(requirements, lock_digest(name), entry.get('python'))}" / "bin" / "python"
        )
    override = os.environ.get(entry["python_variable"]) if entry.get("python_variable") else None
    if override:
        python = override
    command = entry.get("create", f"rnnbench env create {name}")
    return Environment(
        name,
        python=python,
        create_command=command,
        purpose=entry.get("purpose", ""),
        variables=dict(entry.get("variables", {})),
        requirements=requirements,
        requirements_file=requirements_file,
        default=bool(entry.get("default", False)),
        creatable=creatable,
        python_version=entry.get("python"),
        constraints=bool(entry.get("constraints", True)),
    )


def environments() -> dict[str, Environment]:
    envs = {name: _environment(name, entry) for name, entry in {**_builtin(), **_EXTRA}.items()}
    # The running interpreter is the main environment, unless it is another environment's (a run
    # started from the torch_xla one still sends main's rows to main's own interpreter, at its path).
    here = Path(sys.prefix).resolve()
    if not any(env.creatable and Path(env.python).exists() and _prefix_of(env.python) == here for env in envs.values()):
        for name, env in envs.items():
            if not env.creatable:
                envs[name] = Environment(**{**env.__dict__, "python": sys.executable})
    return envs


def get(name: str) -> Environment:
    envs = environments()
    if name not in envs:
        raise KeyError(f"unknown environment {name!r}")
    return envs[name]


def current() -> str:
    """The name of the environment this interpreter belongs to ("main" unless it is another's)."""
    here = Path(sys.prefix).resolve()
    for env in environments().values():
        if env.creatable and Path(env.python).exists() and _prefix_of(env.python) == here:
            return env.name
    return "main"


def default_names() -> list[str]:
    return [name for name, env in environments().items() if env.default]


def runs(driver: Any, env_name: str) -> bool:
    """Whether `driver` has rows in environment `env_name`: an environment that drivers name
    (Driver.environments: main, xla) runs the drivers that name it; any other one every driver
    whose framework's packages it pins."""
    env = environments().get(env_name)
    if env is None:
        return False
    if any(env_name in d.environments for d in registry.drivers().values()):
        return env_name in driver.environments
    return set(driver.framework.packages) - {"numpy"} <= env.packages()


def thread_env(threads: int) -> dict[str, str]:
    """Environment variables that fix thread counts before any framework is imported: the OpenMP /
    BLAS pools, and each registered framework's own (Framework.thread_env)."""
    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    for framework in registry.frameworks().values():
        env.update(framework.thread_env(threads))
    return env
