"""Finds models (every module of `rnnbench_models`) and drivers (every module of `rnnbench.drivers`).

Adding a model or a driver is adding a file: the CLI, the tests and the asv benchmarks all read
these lists.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from rnnbench.drivers.base import Driver
from rnnbench.model import Model


class UnknownName(ValueError):
    """An unknown model or driver name (the CLI turns this into a one-line error)."""


def _modules(package: str):
    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if not info.name.startswith("_") and info.name != "base":
            yield importlib.import_module(f"{package}.{info.name}")


@lru_cache(maxsize=None)
def models() -> dict[str, Model]:
    found: dict[str, Model] = {}
    for module in _modules("rnnbench_models"):
        for model in getattr(module, "MODELS", ()):
            if model.name in found:
                raise RuntimeError(f"model name {model.name!r} defined twice")
            found[model.name] = model
    return found


@lru_cache(maxsize=None)
def drivers() -> dict[str, Driver]:
    found: dict[str, Driver] = {}
    for module in _modules("rnnbench.drivers"):
        driver = getattr(module, "DRIVER", None)
        if driver is not None:
            if driver.name in found:
                raise RuntimeError(f"driver name {driver.name!r} defined twice")
            found[driver.name] = driver
    return found


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
