"""Hand oracles kept on disk: a model's own float64 oracle (Model.oracle) of a large case costs
minutes, and every driver of a row asks for the same one, each in its own worker, in every run.

`cached(model, case, compute)` answers from $XDG_CACHE_HOME/rnnbench/oracles (default
~/.cache/rnnbench/oracles) when the same code has computed the same case before, else computes and
keeps the answer. The key is a hash of everything the answer depends on: the model's name and loss
form, the case's every array (bytes, dtype, shape), its sizes, seed, length and requires-grad
flags, numpy's version, and the source of every module whose functions compute it (the model's
step, loss and oracle, and those their closures hold; losses.py and model.py): an edit to any of
them is a new key. A model whose code has no source file (an interactive definition) is never kept.

Two writers are safe without a lock: a file appears whole or not at all (written aside, then
renamed), and two processes that compute the same key at once write the same answer. An answer
that took less than STORE_AFTER_S to compute is not kept (reading it back would save nothing worth
a file), so the many small cases of tests and the fuzzer leave nothing behind.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np

from rnnbench import losses
from rnnbench.model import Case, Model

STORE_AFTER_S = 1.0
# where installed packages and the standard library live: their functions are not followed
_INSTALLED = tuple({sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib", "platstdlib")})
Grads = dict[str, np.ndarray]


def root() -> Path:
    """$XDG_CACHE_HOME/rnnbench/oracles: the same cache root as rnnbench.machine.caches.cache_root."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rnnbench" / "oracles"


def cached(model: Model, case: Case, compute: Callable[[], Mapping[str, np.ndarray]]) -> Grads:
    """compute() (the hand oracle of `case`), from the cache when the same code computed it before."""
    key = cache_key(model, case)
    if key is None:
        return dict(compute())
    path = root() / f"{key}.npz"
    found = _read(path)
    if found is not None:
        return found
    started = time.perf_counter()
    grads = {n: np.asarray(g, dtype=np.float64) for n, g in compute().items()}
    if time.perf_counter() - started >= STORE_AFTER_S:
        _write(path, grads)
    return grads


def cache_key(model: Model, case: Case) -> str | None:
    """The hash of everything the hand oracle's answer depends on (module docstring); None where a
    function's module has no source file to hash."""
    digest = hashlib.sha256()
    head = {
        "model": model.name,
        "loss": case.loss,
        "sizes": dict(sorted(case.sizes.items())),
        "seed": case.seed,
        "length": case.length,
        "carry0_requires_grad": list(case.carry0_requires_grad),
        "xs_requires_grad": case.xs_requires_grad,
        "numpy": np.__version__,
    }
    digest.update(json.dumps(head, sort_keys=True, default=str).encode())
    for name, array in _arrays(case):
        array = np.ascontiguousarray(array)
        digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        digest.update(array.tobytes())
    sources = _module_files(model)
    if sources is None:
        return None
    for file in sorted(sources):
        digest.update(Path(file).read_bytes())
    return digest.hexdigest()


def _arrays(case: Case) -> Iterator[tuple[str, np.ndarray]]:
    for name in sorted(case.params):
        yield f"params.{name}", np.asarray(case.params[name])
    for i, leaf in enumerate(case.carry0):
        yield f"carry0.{i}", np.asarray(leaf)
    if case.xs is not None:
        yield "xs", np.asarray(case.xs)
    for name in sorted(case.consts):
        yield f"consts.{name}", np.asarray(case.consts[name])


def _module_files(model: Model) -> set[str] | None:
    """The source files of the modules whose functions compute the model's oracle: its step, loss,
    oracle, forward, prologue and cotangent_consts, the functions and models their closures hold
    (a loss form's oracle wraps the model's own), the functions they call by global name outside
    installed packages (a model's helpers), and rnnbench's model and loss modules."""
    files = {inspect.getsourcefile(Model), inspect.getsourcefile(losses)}
    seen: set[int] = set()
    todo: list = [model]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, Model):
            todo += [getattr(item, a) for a in ("step", "loss", "oracle", "forward", "prologue", "cotangent_consts")]
        elif isinstance(item, functools.partial):
            todo += [item.func, *item.args, *item.keywords.values()]
        elif callable(item) and hasattr(item, "__code__"):
            module = sys.modules.get(item.__module__)
            file = getattr(module, "__file__", None)
            if not file or not Path(file).is_file():
                return None
            if file.startswith(_INSTALLED):
                continue  # numpy and the standard library: their versions are in the key or fixed
            files.add(file)
            todo += [cell.cell_contents for cell in item.__closure__ or () if _filled(cell)]
            names = item.__code__.co_names
            todo += [item.__globals__[n] for n in names if callable(item.__globals__.get(n))]
    return {f for f in files if f}


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _read(path: Path) -> Grads | None:
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: np.array(data[name]) for name in data.files}
    except (OSError, ValueError, KeyError):  # absent, or not a whole npz: computed again
        return None


def _write(path: Path, grads: Mapping[str, np.ndarray]) -> None:
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(tmp, **grads)
        os.replace(tmp, path)
    except OSError:  # a full or read-only cache costs the next run a recomputation, never this one
        tmp.unlink(missing_ok=True)
