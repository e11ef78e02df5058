"""Finds models (`MODELS` of every module of `rnnbench_models`) and drivers (`DRIVERS` of every
mechanism module of `rnnbench.drivers`' framework packages: rnnbench.drivers.torch.loop, ...).

Adding a model or a driver is adding a file: the CLI, the tests and the asv benchmarks all read
these lists. Modules named in the environment variable RNNBENCH_PLUGINS (comma-separated import
paths) are scanned too, so users can add their own models and drivers without editing the package;
the variable is inherited by worker processes, so plugin drivers run isolated like any other.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
from functools import cache
from typing import Any

from rnnbench.drivers.base import Driver, Framework
from rnnbench.errors import InputError, unknown
from rnnbench.model import Model


class UnknownName(InputError):
    """An unknown model or driver name (the CLI turns this into a one-line error)."""


def _modules(package: str):
    """Every public module of `package` and of its subpackages (drivers/ holds one per framework), by
    name; private ones (`_x`: a framework layer and its parts) and `base` (the interfaces) are not scanned."""
    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.name == "base":
            continue
        if info.ispkg:
            yield from _modules(f"{package}.{info.name}")
        else:
            yield importlib.import_module(f"{package}.{info.name}")


class PluginError(InputError):
    """A module named in RNNBENCH_PLUGINS that cannot be used: it fails to import, or it defines a
    model or driver under a name already taken. The user's code, not ours: one line, exit 2."""


def _plugin_names() -> list[str]:
    return list(filter(None, (n.strip() for n in os.environ.get("RNNBENCH_PLUGINS", "").split(","))))


def _plugins():
    for name in _plugin_names():
        try:
            yield importlib.import_module(name)
        except ImportError as exc:
            raise PluginError(f"cannot import plugin module {name!r} named in RNNBENCH_PLUGINS: {exc}") from None
        except Exception as exc:  # the plugin's own code raised while it was imported
            where = _plugin_frame(exc, name)
            raise PluginError(
                f"plugin module {name!r} named in RNNBENCH_PLUGINS raised {type(exc).__name__} at "
                f"import{where}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
            ) from None


def _plugin_frame(exc: BaseException, name: str) -> str:
    """' (file:line)' of the innermost frame of `exc`'s traceback in the plugin's own file."""
    import traceback

    origin = getattr(importlib.util.find_spec(name), "origin", None) if _importable(name) else None
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if origin and f.filename == origin]
    return f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _checked_items(what: str, kind: type, items: Any, module) -> list:
    """`items` (a module's MODELS or DRIVERS), each an instance of `kind`: anything else in a plugin
    (a name string, a class, a bare model outside a list) is the plugin's error, one line naming
    the module, the entry and what it should be; in our own modules, it is ours."""
    attr = "MODELS" if what == "model" else "DRIVERS"
    entries = list(items) if isinstance(items, (list, tuple)) else [items]
    bad = next((entry for entry in entries if not isinstance(entry, kind)), None)
    if bad is None and isinstance(items, (list, tuple)):
        return entries
    shown = repr(bad if bad is not None else items)[:80]
    what_is = f"holds {type(bad).__name__} {shown}" if bad is not None else f"is {type(items).__name__} {shown}"
    message = f"{module.__name__}.{attr} {what_is}; it must be a list of {kind.__module__}.{kind.__name__}"
    if module.__name__ in _plugin_names():
        raise PluginError(f"plugin module {module.__name__!r} named in RNNBENCH_PLUGINS: {message}")
    raise RuntimeError(message)


def _register(found: dict, what: str, items, module) -> None:
    """Add `items` (models or drivers of `module`) to `found` by name; a name taken twice is the
    plugin's error when a plugin is involved (PluginError names both modules), else ours."""
    for item in _checked_items(what, Model if what == "model" else Driver, items, module):
        if item.name in found:
            first, _ = found[item.name]
            where = (
                f"in {first.__name__} and {module.__name__}" if first is not module else f"twice in {module.__name__}"
            )
            plugins = _plugin_names()
            if module.__name__ in plugins or first.__name__ in plugins:
                raise PluginError(
                    f"{what} name {item.name!r} is defined {where} (RNNBENCH_PLUGINS="
                    f"{', '.join(plugins)}); rename the plugin's {what}"
                )
            raise RuntimeError(f"{what} name {item.name!r} defined {where}")
        found[item.name] = (module, item)


@cache
def models() -> dict[str, Model]:
    found: dict[str, tuple] = {}
    for module in [*_modules("rnnbench_models"), *_plugins()]:
        _register(found, "model", getattr(module, "MODELS", ()), module)
    return {name: model for name, (_, model) in found.items()}


@cache
def drivers() -> dict[str, Driver]:
    found: dict[str, tuple] = {}
    for module in [*_modules("rnnbench.drivers"), *_plugins()]:
        _register(found, "driver", getattr(module, "DRIVERS", ()), module)
    # by name: listings and run order do not depend on module layout
    return {name: driver for name, (_, driver) in sorted(found.items())}


@cache
def builtin_frameworks() -> frozenset[str]:
    """Names of the frameworks of rnnbench's own drivers (plugins' excluded): the ones its package
    extras install (pyproject.toml: one extra per Framework.family)."""
    return frozenset(d.framework.name for m in _modules("rnnbench.drivers") for d in getattr(m, "DRIVERS", ()))


def frameworks() -> dict[str, Framework]:
    """The frameworks of the registered drivers, by name."""
    return {d.framework.name: d.framework for d in drivers().values()}


def _named(kind: str, name: str, known: dict) -> Any:
    """known[name], or UnknownName naming the closest names and all of them."""
    try:
        return known[name]
    except KeyError:
        raise UnknownName(unknown(kind, name, known, "`rnnbench list`")) from None


def get_model(name: str) -> Model:
    return _named("model", name, models())


def get_driver(name: str) -> Driver:
    return _named("driver", name, drivers())
