"""Finds models (`MODELS` of every module of `rnnbench_models`) and drivers (`DRIVERS` of every
mechanism module of `rnnbench.drivers`).

Adding a model or a driver is adding a file: the CLI, the tests and the asv benchmarks all read
these lists. Modules named in the environment variable RNNBENCH_PLUGINS (comma-separated import
paths) are scanned too, so users can add their own models and drivers without editing the package;
the variable is inherited by worker processes, so plugin drivers run isolated like any other.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from functools import lru_cache

from rnnbench.drivers.base import Driver, Framework
from rnnbench.errors import InputError
from rnnbench.model import Model


class UnknownName(InputError):
    """An unknown model or driver name (the CLI turns this into a one-line error)."""


def _modules(package: str):
    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if not info.name.startswith("_") and info.name != "base":
            yield importlib.import_module(f"{package}.{info.name}")


def _plugins():
    for name in filter(None, (n.strip() for n in os.environ.get("RNNBENCH_PLUGINS", "").split(","))):
        try:
            yield importlib.import_module(name)
        except ImportError as exc:
            raise UnknownName(f"cannot import plugin module {name!r} named in RNNBENCH_PLUGINS: {exc}") from None


@lru_cache(maxsize=None)
def models() -> dict[str, Model]:
    found: dict[str, Model] = {}
    for module in [*_modules("rnnbench_models"), *_plugins()]:
        for model in getattr(module, "MODELS", ()):
            if model.name in found:
                raise RuntimeError(f"model name {model.name!r} defined twice")
            found[model.name] = model
    return found


@lru_cache(maxsize=None)
def drivers() -> dict[str, Driver]:
    found: dict[str, Driver] = {}
    for module in [*_modules("rnnbench.drivers"), *_plugins()]:
        for driver in getattr(module, "DRIVERS", ()):
            if driver.name in found:
                raise RuntimeError(f"driver name {driver.name!r} defined twice")
            found[driver.name] = driver
    return dict(sorted(found.items()))  # by name: listings and run order do not depend on module layout


def frameworks() -> dict[str, Framework]:
    """The frameworks of the registered drivers, by name."""
    return {d.framework.name: d.framework for d in drivers().values()}


def get_model(name: str) -> Model:
    try:
        return models()[name]
    except KeyError:
        raise UnknownName(f"unknown model {name!r}; known: {', '.join(models())}") from None


def get_driver(name: str) -> Driver:
    try:
        return drivers()[name]
    except KeyError:
        raise UnknownName(f"unknown driver {name!r}; known: {', '.join(drivers())}") from None
