"""The shape docs/architecture.md promises, checked on the source: floors of imports with no upward
arrow, one module per mechanism, framework names tested only in the framework layer, models free of
the checking code, and every driver a row of its mechanism's DRIVERS table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from rnnbench import registry

SRC = Path(__file__).resolve().parents[1] / "src" / "rnnbench"
MODELS = Path(__file__).resolve().parents[1] / "models"
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

# Each package of rnnbench may import only from floors below its own (docs/architecture.md).
FLOORS = {
    "rnnbench.status": 0,
    "rnnbench.ops": 0,
    "rnnbench.errors": 0,
    "rnnbench.model": 1,
    "rnnbench.inputs": 1,
    "rnnbench.record_fields": 1,
    "rnnbench.suites": 1,
    "rnnbench.modes": 1,
    "rnnbench.processes": 1,
    "rnnbench.stats": 1,
    "rnnbench.drivers": 2,
    "rnnbench.record": 2,
    "rnnbench.losses": 2,
    "rnnbench.batch": 2,
    "rnnbench.registry": 3,
    "rnnbench.results_file": 3,
    "rnnbench.check": 3,
    "rnnbench.machine": 4,
    "rnnbench.report": 4,
    "rnnbench.rows": 5,
    "rnnbench.planning": 6,
    "rnnbench.fuzz": 7,
    "rnnbench.study": 7,
    "rnnbench.api": 8,
    "rnnbench.cli": 9,
    "rnnbench.__main__": 10,  # `python -m rnnbench`: above the command line it runs
    "rnnbench": 9,
}
# A package split into subpackages has floors inside it, by the same rule: its own modules are its
# floor 0 (what every subpackage shares), and a subpackage imports only from lower ones.
SUBFLOORS = {
    "rnnbench.report": {
        "rnnbench.report": 0,  # the text pieces every view shares: table, labels, marks, escape, ...
        "rnnbench.report.compare": 1,
        "rnnbench.report.charts": 1,
        "rnnbench.report.site": 2,  # the HTML page shows the charts
    },
    "rnnbench.drivers": {
        "rnnbench.drivers": 0,  # base: the types every framework package shares
        "rnnbench.drivers.torch": 1,
        "rnnbench.drivers.jax": 1,  # jax and flax: flax shares jax's layer
        "rnnbench.drivers.torch_xla": 2,  # torch on the XLA device: torch's and jax's layers, torch's loop
    },
    "rnnbench.check": {
        "rnnbench.check": 0,  # the measure every part shares: tolerance (the one policy), compare
        "rnnbench.check.differentiation": 1,  # derivatives computed here: dual numbers, differences, float32 tape
        "rnnbench.check.bugs": 1,  # the known-issues registry and its case predicates
        "rnnbench.check.oracles": 2,  # what a row is judged against: the ladder, its cache, the bars
        "rnnbench.check.verdicts": 3,  # a driver's output against the oracles, the registry applied
    },
}
FRAMEWORK_NAMES = {"torch", "jax", "flax", "torch_xla", "jaxlib"}


def _unit(module: str) -> str:
    """rnnbench.rows.row -> rnnbench.rows (the floor's unit: a top-level module or package)."""
    return ".".join(module.split(".")[:2])


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "rnnbench":
            names = [f"rnnbench.{a.name}" for a in node.names] if node.module == "rnnbench" else [node.module]
            out.update(_unit(n) for n in names)
        elif isinstance(node, ast.Import):
            out.update(_unit(a.name) for a in node.names if a.name.split(".")[0] == "rnnbench")
    return out


def _imported_modules(path: Path) -> set[str]:
    """The rnnbench modules (or packages) `path` imports, by their full names: `from rnnbench.report
    import charts` and `from rnnbench.report.charts.style import X` are rnnbench.report.charts(.style)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "rnnbench":
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "rnnbench")
    return out


def _subunit(module: str) -> str:
    """rnnbench.report.charts.style -> rnnbench.report.charts (its subpackage), rnnbench.report.table
    -> rnnbench.report (the package's own modules); a name inside a module counts as the module."""
    parts = module.split(".")
    return ".".join(parts[:3]) if len(parts) > 2 and SRC.joinpath(*parts[1:3]).is_dir() else ".".join(parts[:2])


SOURCES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_upward_import(path: Path) -> None:
    module = _module_name(path)
    unit = _unit(module)
    assert unit in FLOORS, f"{unit} has no floor in FLOORS: add it (and to docs/architecture.md)"
    upward = [m for m in _imports(path) if m != unit and FLOORS.get(m, 99) >= FLOORS[unit] and unit != "rnnbench"]
    assert not upward, (
        f"{path.relative_to(SRC)} (floor {FLOORS[unit]}) imports from the same or a higher floor: {upward}"
    )
    if unit not in SUBFLOORS:
        return
    floors, here = SUBFLOORS[unit], _subunit(module)
    assert here in floors, f"{here} has no floor in SUBFLOORS[{unit!r}]: add it (and to docs/architecture.md)"
    inner = {_subunit(m) for m in _imported_modules(path) if _unit(m) == unit} - {here}
    upward = sorted(m for m in inner if floors.get(m, 99) >= floors[here])
    assert not upward, (
        f"{path.relative_to(SRC)} ({here}, floor {floors[here]} of {unit}) imports from the same or a higher "
        f"floor of {unit}: {upward}"
    )


# --- the import graph: every import, wherever it stands, and no circle ---
#
# Function-level imports are for load order and cost, never for structure. They stay for
#   1. optional or heavy third-party libraries: the frameworks (torch, jax, flax, torch_xla, jaxlib),
#      matplotlib, PIL, mpmath, ray, markdown_it, ...: a process that never needs one never loads it;
#   2. rnnbench modules that a process must not load yet, with the reason in a `# lazy:` comment
#      (test_function_level_imports_of_rnnbench_say_why): a worker pins its CPUs and sets its threads
#      before anything can start a thread pool; a CLI subcommand loads its machinery only when it runs;
#      a measuring process (`python -m ...`) pins itself first.
# Not to break a circle: the graph below counts function-level imports like top-level ones, so a
# lazy import hides no edge; two modules that need each other are one concept, or share a third.


def _dotted(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the modules of the package at `root` it imports, from every import in it (top
    level, in functions, under `if TYPE_CHECKING:` or `__main__`). `from pkg import name` is an edge
    to pkg.name where that is a module, else to pkg; relative imports resolve against the importer."""
    files = {_dotted(path, root): path for path in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        here = module.split(".") + ([""] if path.name == "__init__.py" else [])  # a package is its own base
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                relative_to = here[: len(here) - node.level] if node.level else []
                base = ".".join([*relative_to, node.module or ""]).strip(".")
                edges.update(f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names)
        graph[module] = {m for m in edges if m in files and m != module}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest circle (a, b, ..., a) through the first module of each group of modules that
    reach each other (Tarjan's strongly connected components): every group is named at once."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set(stack[stack.index(v) :])
            del stack[stack.index(v) :]
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_shortest_circle(min(group), graph, group) for group in groups]


def _shortest_circle(start: str, graph: dict[str, set[str]], group: set[str]) -> list[str]:
    came_from: dict[str, str | None] = {start: None}
    queue = [start]
    for u in queue:  # breadth first: the queue grows as it is read
        for v in sorted(graph[u] & group):
            if v == start:
                path = [u]
                while came_from[path[-1]] is not None:
                    path.append(came_from[path[-1]])
                return path[::-1] + [start]
            if v not in came_from:
                came_from[v] = u
                queue.append(v)
    raise AssertionError(f"{start} is in a group of modules but on no circle")


def test_no_import_circle() -> None:
    """No module of rnnbench imports, through any chain of imports (function-level ones counted),
    a module that imports it: a split whose halves import each other cut one concept in two."""
    graph = import_graph(SRC)
    circles = [" -> ".join(c) for c in import_circles(graph)]
    assert not circles, "import circles (merge the concept, or move the shared part down):\n" + "\n".join(circles)


def test_the_circle_detector_finds_a_circle_however_it_is_imported(tmp_path: Path) -> None:
    """A circle of a top-level `from pkg import module`, a function-level `from pkg.sub import
    module` and a relative `from .. import module`, beside modules that only import into it."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    sources = {
        "__init__.py": "",
        "a.py": "from pkg import b\n",
        "b.py": "def f():\n    from pkg.sub import c\n",
        "sub/__init__.py": "from .c import NAME\n",
        "sub/c.py": "from .. import a\nNAME = 1\n",
        "d.py": "import pkg.a\nfrom pkg.sub import NAME\n",
    }
    for name, text in sources.items():
        (pkg / name).write_text(text)
    graph = import_graph(pkg)
    assert graph["pkg.d"] == {"pkg.a", "pkg.sub"} and graph["pkg.sub"] == {"pkg.sub.c"}
    assert import_circles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]]
    (pkg / "sub" / "c.py").write_text("NAME = 1\n")
    assert import_circles(import_graph(pkg)) == []


LAZY = "# lazy:"


def _unreasoned_lazy_imports(path: Path) -> list[int]:
    """Lines of function-level imports of rnnbench modules with no `# lazy: <reason>` on the line or
    the line above; in a run of imports with no line between, the line above the run counts."""
    text = path.read_text()
    lines = ["", *text.splitlines()]  # lines[n] is line n
    found = set()
    for fn in ast.walk(ast.parse(text)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        imports = [n for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))]
        start_of = {n.end_lineno: n.lineno for n in imports}
        for n in imports:
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""]
            if not (getattr(n, "level", 0) or any(m.split(".")[0] == "rnnbench" for m in names)):
                continue
            above = n.lineno - 1
            while above in start_of:
                above = start_of[above] - 1
            if LAZY not in lines[n.lineno] and LAZY not in lines[above]:
                found.add(n.lineno)
    return sorted(found)


def test_function_level_imports_of_rnnbench_say_why() -> None:
    """An rnnbench module imported in a function waits for a reason of load order (the comment
    above): the comment names it, so that a lazy import kept for no reason is seen and moved up."""
    found = [
        f"{path.relative_to(SRC.parents[1])}:{line}" for path in SOURCES for line in _unreasoned_lazy_imports(path)
    ]
    assert not found, f"function-level imports of rnnbench with no `{LAZY} <reason>` comment: {', '.join(found)}"


def test_the_lazy_import_scanner_wants_a_reason(tmp_path: Path) -> None:
    reason = "    # lazy: the registry imports every driver module: only when a command needs it\n"
    cases = {
        "def f():\n    from rnnbench import registry\n": [2],
        "def f():\n    import rnnbench.rows.row\n": [2],
        "def f():\n    # the registry, later\n    from rnnbench import registry\n": [3],
        "def f():\n" + reason + "    from rnnbench import registry\n    from rnnbench.rows import row\n": [],
        "def f():\n" + reason + "    from rnnbench import registry\n\n    from rnnbench.rows import row\n": [5],
        "def f():\n    from rnnbench import registry  # lazy: only when a command needs it\n": [],
        "def f():\n    def g():\n        from rnnbench import registry\n": [3],
        "def f():\n    import torch\n    from . import sibling\n": [3],
        "from rnnbench import registry\n\n\ndef f():\n    import torch\n": [],
    }
    for source, expected in cases.items():
        path = tmp_path / "case.py"
        path.write_text(source)
        assert _unreasoned_lazy_imports(path) == expected, source


def _top_level(tree: ast.Module) -> tuple[set[str], list[str], list[str]]:
    """(names assigned at module level, functions named `prepare`, names assigned a Framework(...))."""
    assigned, prepares, frameworks = set(), [], []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            assigned.update(names)
            call = node.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "Framework":
                frameworks += names
        elif isinstance(node, ast.FunctionDef) and node.name == "prepare":
            prepares.append(node.name)
    return assigned, prepares, frameworks


FRAMEWORK_LAYER = "_framework.py"  # in each framework package: builds its Framework object(s)


def _framework_of_part(path: Path) -> Path | None:
    """The framework module drivers/<framework>/_framework.py that `path` (drivers/<framework>/_<part>.py)
    is a part of: the one beside it, if it builds a Framework and imports path's module; None if
    not (a framework layer split at a seam stays one layer, in its framework's package)."""
    owner = path.with_name(FRAMEWORK_LAYER)
    if path.name == FRAMEWORK_LAYER or not owner.exists():
        return None
    tree = ast.parse(owner.read_text())
    imported = {
        f"{node.module}.{a.name}" if isinstance(node, ast.ImportFrom) else a.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for a in node.names
    } | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    if _top_level(tree)[2] and f"rnnbench.drivers.{path.parent.name}.{path.stem}" in imported:
        return owner
    return None


def test_the_part_finder_wants_an_owner_that_imports_it(tmp_path: Path) -> None:
    """The rule above is the test: a part no framework module imports is not a part."""
    fw, plain = tmp_path / "fw", tmp_path / "plain"
    fw.mkdir(), plain.mkdir()
    (fw / FRAMEWORK_LAYER).write_text(
        "from rnnbench.drivers.fw import _a\nfrom rnnbench.drivers.fw._c import x\nFW = Framework(name='fw')\n"
    )
    (plain / FRAMEWORK_LAYER).write_text("from rnnbench.drivers.plain import _a\n")
    parts = (fw / "_a.py", fw / "_b.py", fw / "_c.py", plain / "_a.py", tmp_path / "_nowhere.py")
    for path in parts:
        path.write_text("x = 1\n")
    found = {str(path.relative_to(tmp_path)): _framework_of_part(path) for path in parts}
    assert found == {
        "fw/_a.py": fw / FRAMEWORK_LAYER,
        "fw/_b.py": None,
        "fw/_c.py": fw / FRAMEWORK_LAYER,
        "plain/_a.py": None,
        "_nowhere.py": None,
    }


DRIVERS_TYPES = "base.py"  # Prepared, Framework, Driver and the helpers every layer shares
DRIVERS_DIR = SRC / "drivers"


def _framework_packages() -> list[Path]:
    return sorted(p for p in DRIVERS_DIR.iterdir() if p.is_dir() and p.name != "__pycache__")


def test_drivers_package_holds_only_framework_packages() -> None:
    """drivers/ holds base.py (the types) and one package per framework, nothing else: a mechanism
    or a layer module belongs to its framework's package."""
    modules = sorted(p.name for p in DRIVERS_DIR.glob("*.py") if p.name not in ("__init__.py", DRIVERS_TYPES))
    assert not modules, f"drivers/ holds base.py and framework packages only; move into a package: {modules}"
    assert _framework_packages(), "drivers/ holds no framework package"
    for package in _framework_packages():
        nested = [p.name for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"]
        assert not nested, f"drivers/{package.name}/ holds modules, not packages: {nested}"
        assert (package / "__init__.py").exists(), f"drivers/{package.name}/ is not a package (no __init__.py)"


@pytest.mark.parametrize("package", _framework_packages(), ids=lambda p: p.name)
def test_framework_package_holds_its_layer_its_parts_and_its_mechanisms(package: Path) -> None:
    """What a module of a framework package drivers/<framework>/ holds, not how many there are:
    _framework.py builds its Framework object(s); a part (_<part>.py) is imported by it; neither holds
    DRIVERS or prepare. A mechanism module (no underscore) has one `prepare(..., model, case, dtype,
    device)` and a DRIVERS table of its configurations and builds no Framework. Nothing else lives there."""
    where = f"drivers/{package.name}"
    layer = package / FRAMEWORK_LAYER
    assert layer.exists() and _top_level(ast.parse(layer.read_text()))[2], (
        f"{where}/{FRAMEWORK_LAYER} builds the framework's Framework(...) object(s)"
    )
    for path in sorted(package.glob("*.py")):
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text())
        assigned, prepares, frameworks = _top_level(tree)
        if path.name.startswith("_"):
            assert path == layer or _framework_of_part(path) is not None, (
                f"{where}/{path.name}: a private module of a framework package is a part of its layer, "
                f"imported by {where}/{FRAMEWORK_LAYER}"
            )
            assert path == layer or not frameworks, (
                f"{where}/{path.name} builds a Framework {frameworks}: that belongs in {where}/{FRAMEWORK_LAYER}"
            )
            assert "DRIVERS" not in assigned and not prepares, (
                f"{where}/{path.name}: a framework-layer module holds no DRIVERS table or prepare: "
                f"mechanisms go in their own {where}/<mechanism>.py"
            )
            continue
        assert "DRIVERS" in assigned, (
            f"{where}/{path.name} defines no DRIVERS table (configurations are rows, not files)"
        )
        assert len(prepares) == 1, (
            f"{where}/{path.name}: a mechanism module has exactly one prepare, found {len(prepares)}"
        )
        assert not frameworks, (
            f"{where}/{path.name} builds a Framework {frameworks}: that belongs in {where}/{FRAMEWORK_LAYER}"
        )
        prepare = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "prepare")
        params = [a.arg for a in prepare.args.args][-4:]
        assert params == ["model", "case", "dtype", "device"], (
            f"{where}/{path.name}: prepare ends with (model, case, dtype, device), not {params}"
        )


def _framework_string_tests(path: Path) -> list[int]:
    """Lines that use a framework's name as data: compared with (== "torch", in ("jax", "flax")), a
    lookup table keyed by several (a settings key alone is not), or listed in a tuple, list or set
    (a table of frameworks or of their packages, e.g. ("torch", "jax", "jaxlib"))."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        consts: list = []
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                consts += [side] if isinstance(side, ast.Constant) else getattr(side, "elts", [])
        elif isinstance(node, ast.Dict):  # a lookup table by framework (a settings key alone is not)
            keys = [k for k in node.keys if isinstance(k, ast.Constant) and k.value in FRAMEWORK_NAMES]
            consts += keys if len(keys) > 1 else []
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            consts += node.elts
        if any(isinstance(c, ast.Constant) and c.value in FRAMEWORK_NAMES for c in consts):
            lines.append(node.lineno)
    return sorted(set(lines))


def _outside_the_framework_layer() -> list[Path]:
    """Every source of src/ and benchmarks/ but the framework layer (drivers/<framework>/_*.py: its
    _framework.py and parts) and ops.py (one op namespace per framework)."""
    layer = {p for p in DRIVERS_DIR.glob("*/_*.py") if p.name != "__init__.py"} | {SRC / "ops.py"}
    return [p for p in [*SOURCES, *sorted(BENCHMARKS.rglob("*.py"))] if p not in layer]


def test_framework_names_are_data_only_in_the_framework_layer() -> None:
    """A framework fact outside drivers/<framework>/_*.py and ops.py is a place that "add a framework"
    would have to touch: ask the driver's Framework instead."""
    found = [
        f"{path.relative_to(SRC.parents[1])}:{line}"
        for path in _outside_the_framework_layer()
        for line in _framework_string_tests(path)
    ]
    assert not found, f"framework names used as data outside the framework layer: {', '.join(found)}"


def test_the_framework_scanner_finds_each_kind_of_use(tmp_path: Path) -> None:
    """The scanner above is the test: it must see each form a framework table takes."""
    cases = {
        'if f.name == "torch": pass': 1,
        'x = f in ("jax", "flax")': 1,
        'GEMMS = (("torch", 1), ("numpy", 2))': 1,
        'T = {"torch": 1, "jax": 2}': 1,
        'V = ["numpy", "jaxlib"]': 1,
        'S = {"torch_xla"}': 1,
        'settings = {"flax": "linen nn.scan"}': 0,
        'name = "torch"': 0,
        'call("jax")': 0,
    }
    for source, expected in cases.items():
        path = tmp_path / "case.py"
        path.write_text(source + "\n")
        assert len(_framework_string_tests(path)) == expected, source


# A driver name outside drivers/ and the suites module is a table "add a driver" would have to touch.
SUITES_MODULE = SRC / "suites.py"


def _driver_name_literals(path: Path, names: set[str]) -> list[int]:
    """Lines holding a string literal that is exactly a driver's name (in a table, a comparison, a
    default argument); a name inside longer text (a docstring, a message) is not one."""
    tree = ast.parse(path.read_text())
    return sorted({n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in names})


def test_driver_names_are_data_only_in_drivers_and_the_suites_module() -> None:
    """Which drivers a suite, a curated selection or a study means is data in rnnbench.suites; a
    fact of one driver is a field of its row in drivers/. Nowhere else in src/ or benchmarks/."""
    names = set(registry.drivers())
    found = [
        f"{path.relative_to(SRC.parents[1])}:{line}"
        for path in [*SOURCES, *sorted(BENCHMARKS.rglob("*.py"))]
        if DRIVERS_DIR not in path.parents and path != SUITES_MODULE
        for line in _driver_name_literals(path, names)
    ]
    assert not found, f"driver names outside drivers/ and src/rnnbench/suites.py: {', '.join(found)}"


def test_the_driver_name_scanner_finds_each_kind_of_use(tmp_path: Path) -> None:
    names = {"torch_scan_compiled", "jax_loop"}
    cases = {
        'T = ("torch_scan_compiled", "jax_loop")': [1],
        'if d.name == "jax_loop":\n    pass': [1],
        'def f(driver="torch_scan_compiled"): pass': [1],
        'x = {"jax_loop": 1}\ny = 2\nz = "jax_loop"': [1, 3],
        '"""jax_loop in a docstring"""\nmessage = "jax_loop_buffer is another name"': [],
        'name = f"{base}_compiled"': [],
    }
    for source, expected in cases.items():
        path = tmp_path / "case.py"
        path.write_text(source + "\n")
        assert _driver_name_literals(path, names) == expected, source


def test_mechanisms_do_not_test_framework_names() -> None:
    mechanisms = [p for p in DRIVERS_DIR.glob("*/*.py") if not p.name.startswith("_")]
    assert mechanisms
    for path in mechanisms:
        assert not _framework_string_tests(path), str(path.relative_to(DRIVERS_DIR))


def test_models_do_not_import_the_checking_code() -> None:
    for path in MODELS.glob("*.py"):
        imported = _imports(path)
        assert not imported & {
            "rnnbench.check",
            "rnnbench.rows",
            "rnnbench.planning",
            "rnnbench.machine",
            "rnnbench.drivers",
        }, (path.name, imported)


def test_driver_names_are_unchanged() -> None:
    """Records, registry entries, asv history and users' scripts are keyed by these names."""
    assert set(registry.drivers()) >= {
        "flax_lstm_cell",
        "flax_scan",
        "flax_simple_cell",
        "jax_lax_scan",
        "jax_loop",
        "jax_loop_buffer",
        "torch_autocast_loop",
        "torch_autocast_loop_compiled",
        "torch_loop",
        "torch_loop_compiled",
        "torch_loop_index_put",
        "torch_loop_index_put_compiled",
        "torch_loop_setitem",
        "torch_loop_setitem_compiled",
        "torch_nn_lstm",
        "torch_nn_rnn",
        "torch_scan",
        "torch_scan_compiled",
        "torch_scan_compiled_clone_y_only",
        "torch_scan_compiled_default_config",
        "torch_xla_loop",
        "torch_xla_scan",
        "torch_xla_scan_cached",
        "torch_xla_scan_closure",
    }


# --- benchmarks/: the asv suite sits on the runner, beside the CLI and the API, not on them ---

ROOT = SRC.parents[1]
BENCHMARKS = ROOT / "benchmarks"
BENCHMARK_SOURCES = sorted(BENCHMARKS.glob("*.py"))
BENCHMARKS_MAY_IMPORT_BELOW = FLOORS["rnnbench.fuzz"]  # up to run/ and report/ (floor 4)


@pytest.mark.parametrize("path", BENCHMARK_SOURCES, ids=lambda p: p.name)
def test_benchmarks_import_only_up_to_run_and_report(path: Path) -> None:
    above = sorted(m for m in _imports(path) if FLOORS.get(m, 99) >= BENCHMARKS_MAY_IMPORT_BELOW)
    assert not above, (
        f"benchmarks/{path.name} imports {above}: asv classes use run/ and report/, not fuzz, api or the CLI"
    )


# --- size floors: one concept per module, one step per function ---

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
SIZED = SOURCES + BENCHMARK_SOURCES


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", SIZED, ids=_shown)
def test_module_is_at_most_500_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{_shown(path)} has {lines} lines (> {MAX_MODULE_LINES}): split it by concept"


@pytest.mark.parametrize("path", SIZED, ids=_shown)
def test_functions_are_at_most_80_lines(path: Path) -> None:
    long = [
        f"{_shown(path)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


# --- code holds reasons, docs hold numbers: no dates in src/ ---

MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
DATE = re.compile(
    rf"\b20\d\d-\d\d-\d\d\b|\b{MONTHS} \d{{1,2}}(?:st|nd|rd|th)?,? 20\d\d\b|\b\d{{1,2}} {MONTHS},? 20\d\d\b"
    rf"|\b{MONTHS} 20\d\d\b",
    re.IGNORECASE,
)
# A link to a dated results page is where the number went, not a number: docs/results/2026-01-02-x.md.
RESULTS_LINK = re.compile(r"docs/results/20\d\d-\d\d-\d\d[\w.-]*")
DATED_SUFFIXES = {".py", ".toml", ".json", ".txt", ".cfg", ".ini", ".md"}


def _dated_lines(text: str, shown: str) -> list[str]:
    return [
        f"{shown}:{n}: {line.strip()[:100]}"
        for n, line in enumerate(text.splitlines(), 1)
        if DATE.search(RESULTS_LINK.sub("", line))
    ]


def test_the_date_pattern_finds_dates_and_not_links() -> None:
    sample = (
        "# 30 ms on 2026-11-25\n# see docs/results/2026-11-25-bug-versions.md\n# measured Nov 25, 2026\n"
        "# (25 November 2026)\n# in Sept. 2026\n# version 2.13.0, seed 2026, 2026-11 rows, May 5\n"
    )
    assert [line.split(":")[1] for line in _dated_lines(sample, "x.py")] == ["1", "3", "4", "5"]


@pytest.mark.parametrize(
    "path", sorted(p for p in SRC.rglob("*") if p.suffix in DATED_SUFFIXES), ids=lambda p: str(p.relative_to(SRC))
)
def test_no_dates_in_src(path: Path) -> None:
    """A dated measurement belongs on a docs/results/YYYY-MM-DD-*.md page with its data and command;
    the code keeps the one-sentence reason and may link that page."""
    dated = _dated_lines(path.read_text(), _shown(path))
    assert not dated, "dates in src/ (move the measurement to docs/results or docs/measuring.md):\n" + "\n".join(dated)


# --- docs/architecture.md names only what exists ---

ARCHITECTURE = ROOT / "docs" / "architecture.md"
CODE_ROOTS = (SRC, ROOT / "models", BENCHMARKS, ROOT / "tests")
PATH_TOKEN = re.compile(r"^[\w<>*.-]*/[\w<>*./-]*$|^[\w<>*-]+\.(?:py|json|toml|md)$")
# In the floor diagram a name is written like code (snake_case, CamelCase, ALL_CAPS, or with ()),
# so that prose words around it are not taken for names.
FILE_TOKEN = r"[\w<>*./-]+\.(?:py|json|toml|md)\b"
DIAGRAM_NAME = re.compile(r"(?<![\w./-])([A-Za-z_]\w*(?:\.\w+)*)(\(\))?(?![\w/-])")


def _looks_like_code(word: str, called: bool) -> bool:
    """snake_case, dotted, CamelCase, SNAKE_CAPS or called(): a name, checked. A single capitalized
    word (Model, MODELS) could be prose (HOW, Ray): checked only where the tree defines it somewhere,
    so that it is named in the right module."""
    return (
        called
        or "_" in word.strip("_")
        or "." in word
        or bool(re.fullmatch(r"[A-Z][a-z0-9]+[A-Z]\w*", word))
        or bool(re.fullmatch(r"[A-Z][a-z]+|[A-Z]{2,}\d*", word) and word in _DEFINED)
    )


def _defined(path: Path) -> set[str]:
    """Names a module defines: its functions, classes and assignments, their methods and fields
    (Class.attr and attr), and the string constants it reads (environment variables)."""
    names: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            names.update(
                t.id
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(t, ast.Name)
            )
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                attr = []
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    attr = [item.name]
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    attr = [item.target.id]
                elif isinstance(item, ast.Assign):
                    attr = [t.id for t in item.targets if isinstance(t, ast.Name)]
                names.update(attr + [f"{node.name}.{a}" for a in attr])
    names.update(
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and re.fullmatch(r"[A-Z][A-Z0-9_]+", n.value)
    )
    return names


def _code_files() -> dict[Path, set[str]]:
    return {p: _defined(p) for root in CODE_ROOTS for p in sorted(root.rglob("*.py"))}


def _imported(path: Path) -> set[str]:
    return {
        a.asname or a.name
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        for a in node.names
    }


_CODE = _code_files()
_DEFINED = set().union(*_CODE.values())


def _module_path(dotted: str) -> Path | None:
    """rnnbench.rows.row / run.row -> its file (a package: its directory)."""
    parts = dotted.removeprefix("rnnbench.").split(".")
    base = SRC.joinpath(*parts)
    return next((p for p in (base.with_suffix(".py"), base) if p.exists()), None)


def _resolve_dotted(name: str) -> bool:
    """run.row.unavailable_reason: the longest prefix that is a module of rnnbench, the rest defined there."""
    parts = name.removeprefix("rnnbench.").split(".")
    for i in range(len(parts), 0, -1):
        module = _module_path(".".join(parts[:i]))
        if module is not None:
            rest = ".".join(parts[i:])
            files = [module] if module.is_file() else sorted(module.rglob("*.py"))
            return not rest or any(rest in _CODE.get(f, set()) for f in files)
    return name in _DEFINED  # Class.attr


def _resolve_path(token: str, context: Path | None) -> bool:
    pattern = re.sub(r"<[^>]*>", "*", token.rstrip("/"))
    bases = [ROOT, SRC] + ([context] if context else [])
    return any(next(base.glob(pattern), None) is not None for base in bases)


def _resolve_name(name: str, where: list[Path]) -> bool:
    """A name the diagram lists for a module (or package): defined or imported (models/*.py build
    `Model`s) in one of those files, or one of the package's modules."""
    if "." in name:
        return _resolve_dotted(name)
    files = [f for w in where for f in ([w] if w.is_file() else sorted(w.rglob("*.py")))]
    return any(name in _CODE.get(f, set()) | _imported(f) for f in files) or any(f.stem == name for f in files)


def _diagram_problems(lines: list[tuple[int, str]]) -> list[str]:
    problems, where, context = [], [], None
    for number, line in lines:
        body = re.sub(r"^floor \d+", "", line)
        tokens = body.split()
        paths = []
        while tokens and (PATH_TOKEN.match(tokens[0]) or tokens[0] == "..."):
            paths.append(tokens.pop(0))
        if paths:  # a new entry; otherwise the line continues the last entry's description
            where = []
            for token in (t for t in paths if t != "..."):
                if not _resolve_path(token, context):
                    problems.append(f"docs/architecture.md:{number}: {token} does not exist")
                    continue
                pattern = re.sub(r"<[^>]*>", "*", token.rstrip("/"))  # drivers/*/<mechanism>.py: any module
                base = next(b for b in (ROOT, SRC, context) if b and next(b.glob(pattern), None))
                where += sorted(base.glob(pattern))
                if token.endswith("/") and token.startswith("src/"):
                    context = ROOT / token
        description = " ".join(tokens)
        for token in re.findall(r"`([^`]+)`", description):
            problems += _backticked_problems(number, token, context)
        description = re.sub(r"`[^`]+`", "", description)
        for token in re.findall(FILE_TOKEN, description):
            if not _resolve_path(token, context):
                problems.append(f"docs/architecture.md:{number}: {token} does not exist")
        for word, called in DIAGRAM_NAME.findall(re.sub(FILE_TOKEN, "", description)):
            if "/" in word or not _looks_like_code(word, bool(called)):
                continue
            if not _resolve_name(word, where):
                shown = ", ".join(str(w.relative_to(ROOT)) for w in where) or "the tree"
                problems.append(f"docs/architecture.md:{number}: {word} is not defined in {shown}")
    return problems


def _backticked_problems(number: int, token: str, context: Path | None) -> list[str]:
    """`run.row.run_row`, `Job`s, `models/<family>.py`, `MODELS = (...)`, `Framework(...)`, `ok`;
    commands (`rnnbench run`) and expressions are left alone."""
    from rnnbench.status import Status

    token = token.strip()
    if PATH_TOKEN.match(token) or re.fullmatch(r"[\w<>*/.-]+\.(?:py|json|toml|md)", token):
        ok = _resolve_path(token, context)
    elif m := re.fullmatch(r"([A-Za-z_][\w.]*)(?:\(.*\)(?: -> \w+)?| = .*)?", token):
        name = m.group(1)
        ok = (
            _resolve_dotted(name)
            if "." in name
            else name in _DEFINED or _module_path(name) is not None or name in {s.value for s in Status}
        )
    else:
        return []
    return [] if ok else [f"docs/architecture.md:{number}: `{token}` names nothing in the tree"]


def _architecture_problems(text: str) -> list[str]:
    problems, diagram, in_block = [], [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_block = not in_block
        elif in_block:
            diagram.append((number, line))
        else:
            for token in re.findall(r"`([^`]+)`", line):
                problems += _backticked_problems(number, token, None)
    return _diagram_problems(diagram) + problems


def test_architecture_doc_names_only_what_exists() -> None:
    problems = _architecture_problems(ARCHITECTURE.read_text())
    assert not problems, "docs/architecture.md drifted from the tree:\n" + "\n".join(problems)


def test_the_doc_check_finds_missing_and_misplaced_names() -> None:
    sample = "\n".join(
        [
            "```",
            "floor 1  src/rnnbench/model.py     Model, Case, step_inputs (gone), DRIVERS (lives in drivers/)",
            "         src/rnnbench/nowhere.py   a module that is not there",
            "floor 2  src/rnnbench/drivers/     HOW it is run",
            "           base.py                 Prepared, Framework, Driver, see rows/nowhere.py",
            "```",
            "`rows.row.run_row` then `rows.row.no_such_function`, `Driver.prepare`, `drivers/torch/scan.py`,",
            "`drivers/no_such.py`, `NoSuchClass(...)`, `ok`, `rnnbench run`",
        ]
    )
    found = [p.split(": ", 1)[1] for p in _architecture_problems(sample)]
    assert found == [
        "step_inputs is not defined in src/rnnbench/model.py",
        "DRIVERS is not defined in src/rnnbench/model.py",
        "src/rnnbench/nowhere.py does not exist",
        "rows/nowhere.py does not exist",
        "`rows.row.no_such_function` names nothing in the tree",
        "`drivers/no_such.py` names nothing in the tree",
        "`NoSuchClass(...)` names nothing in the tree",
    ], found


# A call that passes more than this many arguments by position makes its reader count: what is the
# fifth argument of check_pair? Past it, an rnnbench function's parameters are keyword-only.
MAX_POSITIONAL = 4


def _rnnbench_bindings(tree: ast.Module, root: Path) -> dict[str, str]:
    """The names a module binds to rnnbench: {name: "module"} for a module imported (import
    rnnbench.x as y, from rnnbench import x), {name: "object"} for a name imported from rnnbench or
    defined at this module's top level."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "rnnbench":
            for alias in node.names:
                dotted = Path(*f"{node.module}.{alias.name}".split("."))
                is_module = (root.parent / dotted).with_suffix(".py").exists() or (root.parent / dotted).is_dir()
                bound[alias.asname or alias.name] = "module" if is_module else "object"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "rnnbench":
                    bound[alias.asname or "rnnbench"] = "module"
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound[node.name] = "object"
    return bound


def _defined_callables(root: Path) -> tuple[set[str], set[str]]:
    """The names of rnnbench's functions and classes (a value such as a foreign function is not
    one), and of those functions that take *args (a varying count by design, as git's arguments)."""
    defined, varargs = set(), set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
                if not isinstance(node, ast.ClassDef) and node.args.vararg is not None:
                    varargs.add(node.name)
    return defined, varargs


def _long_positional_calls(root: Path) -> list[str]:
    """file:line name(n) for each call under `root` (the rnnbench package) that passes more than
    MAX_POSITIONAL arguments by position to a function or class of rnnbench: one its module imports
    from rnnbench (by name or through a module: check.verdicts.judge(...)) or defines at its top level. A
    method called on an instance, or a function handed in as a value (a driver's prepare, a recur),
    is not resolved here: a protocol's calls keep their documented positions."""
    defined, varargs = _defined_callables(root)
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        bound = _rnnbench_bindings(tree, root)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            positional = sum(not isinstance(a, ast.Starred) for a in node.args)
            head, name = node.func, None
            while isinstance(head, ast.Attribute):
                name = name or head.attr
                head = head.value
            if not isinstance(head, ast.Name) or positional <= MAX_POSITIONAL:
                continue
            name = name or head.id
            if bound.get(head.id) == "object" or (bound.get(head.id) == "module" and name != head.id):
                if name in defined and name not in varargs:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {name}({positional})")
    return found


def test_calls_pass_at_most_four_arguments_by_position() -> None:
    """Past four, an rnnbench call names its arguments: f(model, case, dtype=..., device=...)."""
    found = _long_positional_calls(SRC)
    assert not found, f"more than {MAX_POSITIONAL} positional arguments: {', '.join(found)}"


def test_the_positional_scanner_finds_each_kind_of_call(tmp_path: Path) -> None:
    """The scanner above is the test: a call by name, through a module, to a class and to a
    classmethod is found; keywords, *args functions and other libraries' calls are not."""
    package = tmp_path / "rnnbench"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "a.py").write_text(
        "def f(a, b, c, d, e=0): pass\n"
        "def git(repo, *args): pass\n"
        "import ctypes; PRCTL = ctypes.CDLL(None).prctl\n"
        "class C:\n"
        "    def __init__(self, a, b, c, d, e): pass\n"
        "    @classmethod\n"
        "    def of(cls, a, b, c, d, e): pass\n"
        "f(1, 2, 3, 4, 5)\n"  # line 8: its own top-level function
    )
    (package / "b.py").write_text(
        "import os\n"
        "from rnnbench.sub.a import PRCTL, C, f, git\n"
        "from rnnbench.sub import a\n"
        "import rnnbench.sub.a as aa\n"
        "f(1, 2, 3, 4, 5)\n"  # 5: imported by name
        "a.f(1, 2, 3, 4, 5)\n"  # 6: through its module
        "aa.f(1, 2, 3, 4, 5)\n"  # 7
        "C(1, 2, 3, 4, 5)\n"  # 8: a class
        "C.of(1, 2, 3, 4, 5)\n"  # 9: a classmethod
        "f(1, 2, 3, 4, e=5)\n"
        "git('.', 'log', '-1', '--format', '%H', 'HEAD')\n"
        "os.path.join('a', 'b', 'c', 'd', 'e')\n"
        "max(1, 2, 3, 4, 5)\n"
        "PRCTL(1, 2, 3, 4, 5)\n"
        "def g(recur): return recur(1, 2, 3, 4, 5)\n"
    )
    assert _long_positional_calls(package) == [
        "rnnbench/b.py:5 f(5)",
        "rnnbench/b.py:6 f(5)",
        "rnnbench/b.py:7 f(5)",
        "rnnbench/b.py:8 C(5)",
        "rnnbench/b.py:9 of(5)",
        "rnnbench/sub/a.py:8 f(5)",
    ]
