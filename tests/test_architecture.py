"""The shape docs/architecture.md promises, checked on the source: floors of imports with no upward
arrow, one module per mechanism, framework names tested only in the framework layer, models free of
the checking code, and every driver a row of its mechanism's DRIVERS table."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rnnbench import registry

SRC = Path(__file__).resolve().parents[1] / "src" / "rnnbench"
MODELS = Path(__file__).resolve().parents[1] / "models"
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

# Each package of rnnbench may import only from floors below its own (docs/architecture.md).
FLOORS = {
    "rnnbench.status": 0, "rnnbench.ops": 0, "rnnbench.errors": 0,
    "rnnbench.model": 1,
    "rnnbench.drivers": 2, "rnnbench.record": 2, "rnnbench.losses": 2,
    "rnnbench.registry": 3, "rnnbench.check": 3,
    "rnnbench.run": 4, "rnnbench.report": 4,
    "rnnbench.fuzz": 5, "rnnbench.study": 5,
    "rnnbench.api": 6,
    "rnnbench.cli": 7, "rnnbench": 7,
}
FRAMEWORK_NAMES = {"torch", "jax", "flax", "torch_xla", "jaxlib"}


def _unit(module: str) -> str:
    """rnnbench.run.row -> rnnbench.run (the floor's unit: a top-level module or package)."""
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


SOURCES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_upward_import(path: Path) -> None:
    unit = _unit(_module_name(path))
    assert unit in FLOORS, f"{unit} has no floor in FLOORS: add it (and to docs/architecture.md)"
    upward = [m for m in _imports(path) if m != unit and FLOORS.get(m, 99) >= FLOORS[unit] and unit != "rnnbench"]
    assert not upward, f"{path.relative_to(SRC)} (floor {FLOORS[unit]}) imports from the same or a higher floor: {upward}"


def test_drivers_package_is_one_module_per_mechanism() -> None:
    modules = [p for p in (SRC / "drivers").glob("*.py")]
    assert len(modules) <= 16, sorted(p.name for p in modules)
    mechanisms = [p for p in modules if not p.name.startswith("_") and p.name != "base.py"]
    for path in mechanisms:  # configurations are rows, not files
        tree = ast.parse(path.read_text())
        assigned = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
        assert "DRIVERS" in assigned, f"{path.name} defines no DRIVERS table"


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
    """Every source of src/ and benchmarks/ but the framework layer (drivers/_<framework>.py) and
    ops.py (one op namespace per framework)."""
    layer = {p for p in (SRC / "drivers").glob("_*.py") if p.name != "__init__.py"} | {SRC / "ops.py"}
    return [p for p in [*SOURCES, *sorted(BENCHMARKS.rglob("*.py"))] if p not in layer]


def test_framework_names_are_data_only_in_the_framework_layer() -> None:
    """A framework fact outside drivers/_<framework>.py and ops.py is a place that "add a framework"
    would have to touch: ask the driver's Framework instead."""
    found = [f"{path.relative_to(SRC.parents[1])}:{line}" for path in _outside_the_framework_layer()
             for line in _framework_string_tests(path)]
    assert not found, f"framework names used as data outside the framework layer: {', '.join(found)}"


def test_the_framework_scanner_finds_each_kind_of_use(tmp_path: Path) -> None:
    """The scanner above is the test: it must see each form a framework table takes."""
    cases = {'if f.name == "torch": pass': 1, 'x = f in ("jax", "flax")': 1, 'GEMMS = (("torch", 1), ("numpy", 2))': 1,
             'T = {"torch": 1, "jax": 2}': 1, 'V = ["numpy", "jaxlib"]': 1, 'S = {"torch_xla"}': 1,
             'settings = {"flax": "linen nn.scan"}': 0, 'name = "torch"': 0, 'call("jax")': 0}
    for source, expected in cases.items():
        path = tmp_path / "case.py"
        path.write_text(source + "\n")
        assert len(_framework_string_tests(path)) == expected, source


def test_mechanisms_do_not_test_framework_names() -> None:
    for path in (SRC / "drivers").glob("*.py"):
        if not path.name.startswith("_") and path.name != "base.py":
            assert not _framework_string_tests(path), path.name


def test_models_do_not_import_the_checking_code() -> None:
    for path in MODELS.glob("*.py"):
        imported = _imports(path)
        assert not imported & {"rnnbench.check", "rnnbench.run", "rnnbench.drivers"}, (path.name, imported)


def test_driver_names_are_unchanged() -> None:
    """Records, registry entries, asv history and users' scripts are keyed by these names."""
    assert set(registry.drivers()) >= {
        "flax_lstm_cell", "flax_scan", "flax_simple_cell", "jax_lax_scan", "jax_loop", "jax_loop_buffer",
        "torch_autocast_loop", "torch_autocast_loop_compiled", "torch_loop", "torch_loop_compiled",
        "torch_loop_index_put", "torch_loop_index_put_compiled", "torch_loop_setitem", "torch_loop_setitem_compiled",
        "torch_nn_lstm", "torch_nn_rnn", "torch_scan", "torch_scan_compiled", "torch_scan_compiled_clone_y_only",
        "torch_scan_compiled_default_config", "torch_xla_loop", "torch_xla_scan", "torch_xla_scan_cached",
        "torch_xla_scan_closure",
    }
