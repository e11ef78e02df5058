"""Hand oracles kept on disk: a model's own float64 oracle (Model.oracle) of a large case costs
minutes, and every driver of a row asks for the same one, each in its own worker, in every run.

`cached(model, case, compute)` answers from $XDG_CACHE_HOME/rnnbench/oracles (default
~/.cache/rnnbench/oracles) when the same code has computed the same case before, else computes and
keeps the answer. The key is a hash of everything the answer depends on: the model's name and loss
form, the case's every array (bytes, dtype, shape), its sizes, seed, length and requires-grad
flags, numpy's version, and the source of every module whose functions compute it (the model's
step, loss and oracle, and those their closures hold; losses.py and model.py) and of every module
those import, through any chain, that is not an installed library's (a model's helpers, e.g.
rnnbench_models/_common.py, and a plugin's own modules; rnnbench's own modules even where rnnbench
is installed): an edit to any of them is a new key. A model whose code has no source file (an
interactive definition) is never kept.

Two writers are safe without a lock: a file appears whole or not at all (written aside, then
renamed), and two processes that compute the same key at once write the same answer. An answer
that took less than STORE_AFTER_S to compute is not kept (reading it back would save nothing worth
a file), so the many small cases of tests and the fuzzer leave nothing behind.

An entry is evidence, never authority: it keeps, beside the gradients, its key and a SHA-256 over
the key and every array (name, dtype, shape, bytes), and it is used only once all of it verifies
(the hash, float64 arrays of the shapes of the case's inputs). Anything else (cut short, a flipped
bit, values edited, another shape, unparseable) is said in one line on stderr and computed again,
and the entry replaced whole. The caller learns where the answer came from (`Answer.source`:
"computed", "cache:<key>" or "recomputed:<key>"), and the record names it (`oracle_source`). The
hash is no signature: it catches damage and edits, not a writer who recomputes it (docs/security.md).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import inspect
import json
import os
import sys
import sysconfig
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rnnbench import losses
from rnnbench.check.differentiation.finite_diff import input_value
from rnnbench.model import Case, Model

STORE_AFTER_S = 1.0
COMPUTED = "computed"  # Answer.source (and check.oracles.oracle.Oracle.source) of values computed in this process
FORMAT = 2  # the entry's layout: its gradients, and META holding the key and the content hash
META = "__rnnbench_oracle_cache__"  # the npz member of the entry's key and hash (a name no input has)
# where installed packages and the standard library live: their functions are not followed
_INSTALLED = tuple({sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib", "platstdlib")})
# rnnbench's own packages: their source is in the key even where they are installed, since an
# upgrade of rnnbench that edits a model is new code with no version in the key
_OURS = ("rnnbench", "rnnbench_models")
Grads = dict[str, np.ndarray]


@dataclass(frozen=True)
class Answer:
    """A hand oracle's gradients, float64 by compared input, and where they came from: "computed"
    (no entry was there, or none is kept), "cache:<key>" (an entry that verified) or
    "recomputed:<key>" (an entry that failed verification, computed again and replaced)."""

    grads: Grads
    source: str


class Damaged(Exception):
    """An entry that fails verification; the message says why, in a few words."""


def root() -> Path:
    """$XDG_CACHE_HOME/rnnbench/oracles: the same cache root as rnnbench.machine.caches.cache_root."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rnnbench" / "oracles"


def cached(model: Model, case: Case, compute: Callable[[], Mapping[str, np.ndarray]]) -> Answer:
    """compute() (the hand oracle of `case`), from the cache when the same code computed it before
    and the entry verifies (module docstring)."""
    key = cache_key(model, case)
    if key is None:
        return Answer(dict(compute()), COMPUTED)
    path = root() / f"{key}.npz"
    damaged = ""
    try:
        found = read_entry(path, key, model, case)
    except Damaged as exc:
        damaged = str(exc)
        found = None
    if found is not None:
        return Answer(found, f"cache:{key}")
    started = time.perf_counter()
    grads = {n: np.asarray(g, dtype=np.float64) for n, g in compute().items()}
    if damaged:
        # said where it happens: a worker's record says it too (oracle_source), its stderr may not reach a person
        print(f"rnnbench: oracle cache entry {key} failed verification ({damaged}); recomputed", file=sys.stderr)
        _write(path, key, grads)  # replaced whatever its cost: a bad entry is never left to be read again
        return Answer(grads, f"recomputed:{key}")
    if time.perf_counter() - started >= STORE_AFTER_S:
        _write(path, key, grads)
    return Answer(grads, COMPUTED)


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
    installed packages (a model's helpers), rnnbench's model and loss modules, and every module
    those import (_with_imports): a helper read as a module's attribute or a constant is code too."""
    files = {inspect.getsourcefile(Model): Model.__module__, inspect.getsourcefile(losses): losses.__name__}
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
            if not _ours(file, item.__module__):
                continue  # numpy and the standard library: their versions are in the key or fixed
            files[file] = item.__module__
            todo += [cell.cell_contents for cell in item.__closure__ or () if _filled(cell)]
            names = item.__code__.co_names
            todo += [item.__globals__[n] for n in names if callable(item.__globals__.get(n))]
    return _with_imports({f: m for f, m in files.items() if f})


def _ours(file: str, module: str) -> bool:
    """Whether a module's source is in the key: not an installed library's, or rnnbench's own."""
    return not file.startswith(_INSTALLED) or module.split(".")[0] in _OURS


def _with_imports(files: Mapping[str, str]) -> set[str]:
    """`files` ({source file: module name}) and, through any chain, the source files of the modules
    they import (anywhere in the file: a function's import is code that runs too) that are ours."""
    out, todo = dict(files), list(files.items())
    while todo:
        file, module = todo.pop()
        for name in _imported_names(file, module):
            found = _source_of(name)
            if found is not None and found not in out and _ours(found, name):
                out[found] = name
                todo.append((found, name))
    return set(out)


def _imported_names(file: str, module: str) -> tuple[str, ...]:
    """Every module name an import statement of `file` (the source of `module`) may name: `import
    a.b` names a.b; `from a import b` names a, and a.b where b is a submodule."""
    try:
        stat = os.stat(file)
    except OSError:
        return ()
    return _parsed_imports(file, module, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=1024)
def _parsed_imports(file: str, module: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """_imported_names, parsed once per version of the file (every row's key asks again)."""
    try:
        tree = ast.parse(Path(file).read_bytes(), filename=file)
    except (OSError, SyntaxError, ValueError):
        return ()
    package = module if Path(file).name == "__init__.py" else module.rpartition(".")[0]
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            try:
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            except (ImportError, ValueError):
                continue
            names += [base, *(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")]
    return tuple(names)


def _source_of(name: str) -> str | None:
    """The source file of module `name`, without importing what is not imported already beyond its
    top-level package's location (a lazy `import torch.x` must not import torch here); None where it
    is no module (a function imported by name) or has no source file."""
    module = sys.modules.get(name)
    if module is None:
        top = name.split(".")[0]
        try:
            if top not in sys.modules:
                spec = importlib.util.find_spec(top)
                if spec is None or not spec.origin or not _ours(spec.origin, top):
                    return None  # an installed library that is not loaded: nothing of ours inside
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError, AttributeError):
            return None
        file = spec.origin if spec is not None and spec.has_location else None
    else:
        file = getattr(module, "__file__", None)
    return file if file and file.endswith(".py") and Path(file).is_file() else None


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def content_hash(key: str, grads: Mapping[str, np.ndarray]) -> str:
    """SHA-256 over the key and every array's name, dtype, shape and bytes, in name order."""
    digest = hashlib.sha256(key.encode())
    for name in sorted(grads):
        array = np.ascontiguousarray(grads[name])
        digest.update(f"\0{name}:{array.dtype.str}:{array.shape}\0".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def read_entry(path: Path, key: str, model: Model, case: Case) -> Grads | None:
    """The gradients of the entry at `path` once all of it verifies (module docstring); None where
    there is no entry. Raises Damaged, saying why, for anything else."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: np.array(data[name]) for name in data.files}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        raise Damaged(f"unreadable: {type(exc).__name__}") from None
    try:
        meta = json.loads(str(arrays.pop(META)[()]))
        stored_key, stored_hash, fmt = meta["key"], meta["sha256"], meta["format"]
    except (KeyError, ValueError, TypeError, IndexError):
        raise Damaged("no key and content hash") from None
    if fmt != FORMAT:
        raise Damaged(f"format {fmt!r}, not {FORMAT}")
    if stored_key != key:
        raise Damaged("kept under another key")
    for name, array in arrays.items():
        if array.dtype != np.float64:
            raise Damaged(f"{name} is {array.dtype}, not float64")
        try:
            want = np.shape(input_value(model, case, name))
        except (KeyError, ValueError, IndexError):
            raise Damaged(f"{name} is no input of the case") from None
        if array.shape != want:
            raise Damaged(f"{name} has shape {array.shape}, not {want}")
    if content_hash(key, arrays) != stored_hash:
        raise Damaged("content hash mismatch")
    return arrays


def _write(path: Path, key: str, grads: Mapping[str, np.ndarray]) -> None:
    """The entry, written aside and renamed over `path`: a reader sees the old entry or the new, whole."""
    meta = json.dumps({"format": FORMAT, "key": key, "sha256": content_hash(key, grads)})
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(tmp, **grads, **{META: np.array(meta)})
        os.replace(tmp, path)
    except OSError:  # a full or read-only cache costs the next run a recomputation, never this one
        tmp.unlink(missing_ok=True)
