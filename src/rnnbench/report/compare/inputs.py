"""What `rnnbench compare` reads: results files (JSON Lines records, any schema) and
pytest-benchmark JSON files (`pytest --benchmark-json`), both as records; and the selection of a
file's rows by environment (`--environments A,B`: one side each).

A pytest-benchmark entry becomes a record of its test's extra_info (tests/test_benchmarks.py:
model, driver, sizes, dtype, gradient status, versions, machine) with its timing as `fwd_bwd`
(the benchmarked callable is forward + backward), its profile where it has one, and its timed
rounds kept as `samples`, bounded as a record keeps them (rnnbench.record.kept_samples). `trim`
writes a pytest-benchmark JSON with its rounds bounded the same way: the form of the baseline kept
in the repository.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rnnbench import record, results_file
from rnnbench.errors import InputError
from rnnbench.record_fields import finite_number


def read_json(path: Path) -> Any:
    """The file as one JSON document, or None when it is not one (a JSON Lines file of records)."""
    try:
        text = Path(path).read_text()
    except IsADirectoryError:
        raise InputError(f"results file {path} is a directory") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read results file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None


def is_pytest_benchmark(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("benchmarks"), list)


def load(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The records of every file: a pytest-benchmark JSON as records (from_pytest_benchmark), any
    other file as a results file (rnnbench.results_file.load: validated, an incomplete last line skipped
    with a warning)."""
    out: list[dict[str, Any]] = []
    for path in paths:
        doc = read_json(path)
        if is_pytest_benchmark(doc):
            out += from_pytest_benchmark(doc, path)
        else:
            out += results_file.load([path])
    return out


def _dict(value: Any, where: str, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{where}: {name} is {type(value).__name__}, not an object")
    return value


def _ms(stats: dict[str, Any], name: str, where: str) -> float:
    value = stats.get(name)
    if not finite_number(value):  # JSON's integers are unbounded: 10**400 would overflow float()
        raise InputError(f"{where}: no numeric stats.{name}")
    return float(value) * 1e3


def _rounds(stats: dict[str, Any], where: str) -> list[float]:
    """The benchmark's timed rounds in ms (stats.data, seconds), [] where not kept."""
    data = stats.get("data") or []
    if not isinstance(data, list) or not all(finite_number(x) for x in data):
        raise InputError(f"{where}: stats.data is not a list of numbers")
    return [float(x) * 1e3 for x in data]


def _benchmark(bench: Any, where: str) -> dict[str, Any]:
    """One pytest-benchmark entry as a record (unchecked); InputError where its shape is not one."""
    bench = _dict(bench, where, "the benchmark")
    info, stats = _dict(bench.get("extra_info"), where, "extra_info"), _dict(bench.get("stats"), where, "stats")
    if not isinstance(info.get("model"), str) or not isinstance(info.get("driver"), str):
        raise InputError(f"{where}: no extra_info model and driver (not an rnnbench benchmark)")
    data = _rounds(stats, where)
    rounds = stats.get("rounds")
    timing = {
        "median_ms": _ms(stats, "median", where),
        "q1_ms": _ms(stats, "q1", where),
        "q3_ms": _ms(stats, "q3", where),
        "repeats": rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else len(data),
        "samples": list(record.kept_samples(data)),
    }
    versions = _dict(info.get("framework_versions"), where, "extra_info.framework_versions")
    framework = info.get("framework")
    label = f"{framework} {str(versions[framework]).split('+')[0]}" if framework in versions else "main"
    return {
        "model": info["model"],
        "driver": info["driver"],
        "dtype": str(info.get("dtype", "float32")),
        "sizes": dict(_dict(info.get("sizes"), where, "extra_info.sizes")),
        "environment_name": "main",
        "env_label": label,
        "device": "cpu",
        "seed": 0,
        "loss_form": "model",
        # a road's benchmark (tests/test_benchmarks.py::test_road) is a row of its own beside the vjp row of
        # its pair: keyed by its road (rnnbench.modes.ROADS) where a run row is keyed by its mode
        "mode": str(info.get("road") or info.get("mode") or "vjp"),
        "status": str(info.get("status") or "error"),
        "framework": str(framework or "?"),
        "rnnbench_version": str(info.get("rnnbench_version", "?")),
        "machine": dict(_dict(info.get("machine"), where, "extra_info.machine")),
        "fwd_bwd": timing,
        "settings": {"versions": dict(versions), "threads": info.get("threads")},
        "source": "pytest-benchmark",
        "test": str(bench.get("fullname") or bench.get("name") or "?"),
        # where its time went (RNNBENCH_BENCH_PROFILE=1), checked as a record's `profile` is
        **({"profile": info["profile"]} if info.get("profile") is not None else {}),
    }


def from_pytest_benchmark(doc: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """One record per benchmark of a pytest-benchmark JSON document (see the module docstring),
    checked as a results file's records are (InputError naming the benchmark and field). A
    benchmark without a recorded gradient status (its test did not reach the check) is `error`.
    The document's `datetime` is the records' run_id: one pytest session is one run."""
    out = []
    for i, bench in enumerate(doc["benchmarks"]):
        where = f"{path}: benchmarks[{i}]"
        rec = _benchmark(bench, where)
        if isinstance(doc.get("datetime"), str):
            rec["run_id"] = f"pytest-benchmark {doc['datetime']}"
        why = record.problem(rec)
        if why is not None:
            raise InputError(f"{where}: not an rnnbench benchmark ({why})")
        out.append(rec)
    if out and not any(rec["fwd_bwd"]["samples"] for rec in out):
        print(
            f"rnnbench: warning: {path} keeps no timed rounds (stats.data), so its rows get no interval; "
            "pytest --benchmark-json keeps them, --benchmark-save needs --benchmark-save-data",
            file=sys.stderr,
        )
    return out


def matches(rec: dict[str, Any], selector: str) -> bool:
    """Whether a record belongs to the side `selector` names: its environment's name ("main",
    "torch-2.14.1"), or its framework and version with a dash ("torch-2.13.0", from env_label
    "torch 2.13.0": the main environment's torch rows)."""
    label = str(rec.get("env_label") or "").replace(" ", "-")
    return selector in (rec.get("environment_name", "main"), label)


def split_by_environment(records: list[dict[str, Any]], base: str, new: str) -> tuple[list[dict], list[dict]]:
    """The records of `base` and of `new` (matches), each side's environment dropped from the row
    key by the caller. A selector that selects nothing is bad input (names the environments there)."""
    sides = [r for r in records if matches(r, base)], [r for r in records if matches(r, new)]
    for selector, side in zip((base, new), sides):
        if not side:
            there = sorted(
                {r.get("environment_name", "main") for r in records}
                | {str(r.get("env_label") or "").replace(" ", "-") for r in records} - {""}
            )
            raise InputError(f"--environments: no row ran in {selector!r}; the files have {', '.join(there)}")
    return sides


def trim(source: Path, target: Path) -> int:
    """Write `source` (a pytest-benchmark JSON) to `target` with each benchmark's rounds bounded as
    records keep them (kept_samples; stats unchanged): a baseline small enough to commit.
    Returns the number of benchmarks."""
    doc = read_json(source)
    if not is_pytest_benchmark(doc):
        raise InputError(f"{source} is not a pytest-benchmark JSON file")
    from_pytest_benchmark(doc, source)  # checked as compare reads it
    for bench in doc["benchmarks"]:
        stats = bench.get("stats") or {}
        if stats.get("data"):
            stats["data"] = [x / 1e3 for x in record.kept_samples([float(x) * 1e3 for x in stats["data"]])]
    Path(target).write_text(json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n")
    return len(doc["benchmarks"])


if __name__ == "__main__":  # python -m rnnbench.report.compare.inputs trim IN.json OUT.json
    if len(sys.argv) == 4 and sys.argv[1] == "trim":
        print(f"{trim(Path(sys.argv[2]), Path(sys.argv[3]))} benchmarks -> {sys.argv[3]}")
    else:
        sys.exit("usage: python -m rnnbench.report.compare.inputs trim BENCHMARK.json OUT.json")
