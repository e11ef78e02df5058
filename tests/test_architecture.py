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

# Each package of rnnbench may import only from floors below its own (docs/architecture.md).
FLOORS = {
    "rnnbench.status": 0, "rnnbench.ops": 0, "rnnbench.errors": 0,
    "rnnbench.model": 1,
    "rnnbench.drivers": 2, "rnnbench.record": 2, "rnnbench.losses": 2,
    "rnnbench.registry": 3, "rnnbench.check": 3,
    "rnnbench.run": 4, "rnnbench.report": 4,
    "rnnbench.fuzz": 5,
    "rnnbench.api": 6,
    "rnnbench.cli": 7, "rnnbench": 7,
}
FRAMEWORK_NAMES = {"torch", "jax", "flax", "torch_xla"}


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


DRIVERS_TYPES = "base.py"  # Prepared, Framework, Driver and the helpers every layer shares


def test_drivers_package_holds_only_mechanisms_and_framework_layers() -> None:
    """What a module of drivers/ holds, not how many there are: a mechanism module (no underscore)
    has one `prepare(..., model, case, dtype, device)` and a DRIVERS table of its configurations and
    builds no Framework; a framework-layer module (underscore) builds its Framework object(s) and
    holds no DRIVERS or prepare; base.py holds the types. Nothing else lives there."""
    drivers = SRC / "drivers"
    subpackages = [p.name for p in drivers.iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert not subpackages, f"drivers/ holds mechanism and framework modules only, not packages: {subpackages}"
    for path in sorted(drivers.glob("*.py")):
        if path.name in ("__init__.py", DRIVERS_TYPES):
            continue
        tree = ast.parse(path.read_text())
        assigned, prepares, frameworks = _top_level(tree)
        if path.name.startswith("_"):
            assert frameworks, f"drivers/{path.name}: a framework-layer module builds its Framework(...) object"
            assert "DRIVERS" not in assigned and not prepares, (
                f"drivers/{path.name}: a framework-layer module holds no DRIVERS table or prepare: "
                "mechanisms go in their own drivers/<framework>_<mechanism>.py")
            continue
        assert "DRIVERS" in assigned, f"drivers/{path.name} defines no DRIVERS table (configurations are rows, not files)"
        assert len(prepares) == 1, f"drivers/{path.name}: a mechanism module has exactly one prepare, found {len(prepares)}"
        assert not frameworks, f"drivers/{path.name} builds a Framework {frameworks}: that belongs in a drivers/_<framework>.py"
        prepare = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "prepare")
        params = [a.arg for a in prepare.args.args][-4:]
        assert params == ["model", "case", "dtype", "device"], (
            f"drivers/{path.name}: prepare ends with (model, case, dtype, device), not {params}")


def _framework_string_tests(path: Path) -> list[int]:
    """Lines comparing something with a framework's name (== "torch", in ("jax", "flax"), dict keyed by them)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        consts: list = []
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                consts += [side] if isinstance(side, ast.Constant) else getattr(side, "elts", [])
        elif isinstance(node, ast.Dict):  # a lookup table by framework (a settings key alone is not)
            keys = [k for k in node.keys if isinstance(k, ast.Constant) and k.value in FRAMEWORK_NAMES]
            consts += keys if len(keys) > 1 else []
        if any(isinstance(c, ast.Constant) and c.value in FRAMEWORK_NAMES for c in consts):
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("path", [p for p in SOURCES if p.parent.name != "drivers"], ids=lambda p: str(p.relative_to(SRC)))
def test_framework_names_are_tested_only_in_the_framework_layer(path: Path) -> None:
    assert not _framework_string_tests(path), (
        f"{path.relative_to(SRC)} lines {_framework_string_tests(path)}: ask the driver's Framework instead")


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


# --- benchmarks/: the asv suite sits on the runner, beside the CLI and the API, not on them ---

ROOT = SRC.parents[1]
BENCHMARKS = ROOT / "benchmarks"
BENCHMARK_SOURCES = sorted(BENCHMARKS.glob("*.py"))
BENCHMARKS_MAY_IMPORT_BELOW = FLOORS["rnnbench.fuzz"]  # up to run/ and report/ (floor 4)


@pytest.mark.parametrize("path", BENCHMARK_SOURCES, ids=lambda p: p.name)
def test_benchmarks_import_only_up_to_run_and_report(path: Path) -> None:
    above = sorted(m for m in _imports(path) if FLOORS.get(m, 99) >= BENCHMARKS_MAY_IMPORT_BELOW)
    assert not above, f"benchmarks/{path.name} imports {above}: asv classes use run/ and report/, not fuzz, api or the CLI"


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
    long = [f"{_shown(path)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


# --- code holds reasons, docs hold numbers: no dates in src/ ---

MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
DATE = re.compile(rf"\b20\d\d-\d\d-\d\d\b|\b{MONTHS} \d{{1,2}}(?:st|nd|rd|th)?,? 20\d\d\b|\b\d{{1,2}} {MONTHS},? 20\d\d\b"
                  rf"|\b{MONTHS} 20\d\d\b", re.IGNORECASE)
# A link to a dated results page is where the number went, not a number: docs/results/2026-01-02-x.md.
RESULTS_LINK = re.compile(r"docs/results/20\d\d-\d\d-\d\d[\w.-]*")
DATED_SUFFIXES = {".py", ".toml", ".json", ".txt", ".cfg", ".ini", ".md"}


def _dated_lines(text: str, shown: str) -> list[str]:
    return [f"{shown}:{n}: {line.strip()[:100]}" for n, line in enumerate(text.splitlines(), 1)
            if DATE.search(RESULTS_LINK.sub("", line))]


def test_the_date_pattern_finds_dates_and_not_links() -> None:
    sample = ("# 30 ms on 2026-11-25\n# see docs/results/2026-11-25-bug-versions.md\n# measured Nov 25, 2026\n"
              "# (25 November 2026)\n# in Sept. 2026\n# version 2.13.0, seed 2026, 2026-11 rows, May 5\n")
    assert [line.split(":")[1] for line in _dated_lines(sample, "x.py")] == ["1", "3", "4", "5"]


@pytest.mark.parametrize("path", sorted(p for p in SRC.rglob("*") if p.suffix in DATED_SUFFIXES),
                         ids=lambda p: str(p.relative_to(SRC)))
def test_no_dates_in_src(path: Path) -> None:
    """A dated measurement belongs on a docs/results/YYYY-MM-DD-*.md page with its data and command;
    the code keeps the one-sentence reason and may link that page."""
    dated = _dated_lines(path.read_text(), _shown(path))
    assert not dated, "dates in src/ (move the measurement to docs/results or docs/measuring.md):\n" + "\n".join(dated)
