"""Damaged inputs at every reader (docs/reliability.md): real records, configs and a real
pytest-benchmark JSON, each with random damage (a field removed, given another type, a huge or
non-finite number, a string of control characters), given to `table`, `compare`, `report`,
`run --resume` and `run --config`. The outcome is clean: exit 0 or 1 where the input is fine, one
line and exit 2 where it is not, never an internal error or a traceback, and nothing printed that
a terminal would act on. Bounded and deterministic: a few dozen derandomized examples each."""

from __future__ import annotations

import copy
import json
import unicodedata
import uuid
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reliability_cases import QUICK
from rnnbench import cli

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "docs" / "results" / "2026-11-25-default-run.jsonl"
COST = ROOT / "docs" / "results" / "2026-11-28-default-run-cost" / "warm.jsonl"
BENCHMARK = ROOT / "benchmarks" / "baseline" / "pytest-benchmark.json"

DAMAGED = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,  # the same examples every run: a failure here is reproducible
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _records() -> list[dict[str, Any]]:
    """Real rows of each kind: ok (timed), failing, unavailable, and one decided by its CPU time."""
    rows = [json.loads(line) for line in RUN.read_text().splitlines() if line.strip()]
    picked = [next(r for r in rows if r["status"] == s) for s in ("ok", "unavailable")]
    picked += [next(r for r in rows if r["status"] not in ("ok", "unavailable"))]
    cost = [json.loads(line) for line in COST.read_text().splitlines() if line.strip()]
    picked += [next(r for r in cost if (r.get("timing") or {}).get("clock") == "cpu")]
    return picked


RECORDS = _records()
CONTROL = "\x1b]0;pwned\x07\x1b[2J\u202e\x85\n| ok |\r\t\x00\ud800"

damage_value = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([10**400, -(10**400), 1e308, -1e308, 5e-324, 0, -1, 0.0]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from([CONTROL, "a/b", "x" * 300, "", "NaN"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and indices) into `value`, its own included."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:4]):  # a few samples stand for all
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def damaged(draw, doc: Any, most: int = 3) -> Any:
    """`doc` with 1 to `most` places damaged: removed (a dict key) or replaced by damage_value."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, most))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(damage_value)
    return doc


def _line(rec: Any) -> str:
    try:
        return json.dumps(rec)  # NaN and Infinity as Python writes them: a reader must refuse them
    except (ValueError, TypeError):
        return "{"


results_file = st.lists(
    st.one_of(st.sampled_from(RECORDS).flatmap(damaged), st.sampled_from(RECORDS)), min_size=1, max_size=3
).map(lambda recs: "".join(_line(r) + "\n" for r in recs))


def _clean(code: int, out: str, err: str, codes: tuple[int, ...]) -> None:
    assert code in codes, err
    assert "Traceback" not in err and "internal error" not in err, err
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("rnnbench: error:"), err
    acted_on = [c for c in out + err if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs") and c != "\n"]
    assert acted_on == [], (acted_on[:5], err)


def _main(argv: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _with(rec: dict[str, Any], path: tuple, value: Any) -> dict[str, Any]:
    """A copy of `rec` with the field at `path` set to `value`."""
    rec = copy.deepcopy(rec)
    parent = rec
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return rec


BENCH = json.loads(BENCHMARK.read_text())
CPU_ROW = RECORDS[-1]


# Each @example is damage found once (the random part explores; these keep what it found):
@DAMAGED
@given(text=results_file)
@example(text=_line(_with(RECORDS[0], ("max_rel_error",), 10**400)) + "\n")
@example(text=_line(_with(CPU_ROW, ("fwd_bwd", "ref_cpu_samples"), [0.0] * 64)) + "\n")
@example(text=_line(_with(RECORDS[2], ("model",), CONTROL.replace("\x00", "").replace("\ud800", ""))) + "\n")
def test_damaged_records_at_every_reader(text: str, tmp_path: Path, capsys) -> None:
    """table, compare (against the undamaged rows), report and run --resume on damaged records."""
    path = tmp_path / f"{uuid.uuid4().hex}.jsonl"
    path.write_text(text, errors="surrogatepass")
    base = tmp_path / f"{uuid.uuid4().hex}.jsonl"
    base.write_text("".join(json.dumps(dict(r, run_id="base")) + "\n" for r in RECORDS))
    for argv, codes in (
        (["table", str(path)], (0, 2)),
        (["compare", str(base), str(path)], (0, 1, 2, 3)),  # 3: measured nothing (no row judged on both sides)
        (["compare", str(path), str(base), "--format", "json"], (0, 1, 2, 3)),
        (["report", str(path), "--out-dir", str(tmp_path / "rep")], (0, 2)),
        (["run", *QUICK, "--resume", "--out", str(path)], (0, 1, 2)),
    ):
        before = path.read_bytes()
        code, out, err = _main(argv, capsys)
        _clean(code, out, err, codes)
        if code == 2:
            assert path.read_bytes() == before, argv


@DAMAGED
@given(doc=damaged(BENCH, most=4))
@example(doc=_with(BENCH, ("benchmarks", 0, "stats", "q1"), 10**400))
@example(doc=_with(BENCH, ("benchmarks", 0, "stats", "data"), [10**400]))
def test_damaged_pytest_benchmark_json_at_compare(doc: Any, tmp_path: Path, capsys) -> None:
    path = tmp_path / f"{uuid.uuid4().hex}.json"
    path.write_text(_line(doc), errors="surrogatepass")
    code, out, err = _main(["compare", str(BENCHMARK), str(path)], capsys)
    _clean(code, out, err, (0, 1, 2, 3))


CONFIG = {
    "models": "rnn",
    "drivers": "torch_nn_lstm",
    "sizes": {"T": 4, "H": 8},
    "environments": {"mine": {"requirements": ["torch==2.13.0"], "python": "3.12", "variables": {"A": "1"}}},
}


def _toml(value: Any) -> str:
    """A TOML value as written by hand (strings JSON-quoted: TOML's basic strings are the same)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value or abs(value) == float("inf"):
            return "nan" if value != value else "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml(v)}" for k, v in value.items() if v is not None) + "}"
    return '""'


@DAMAGED
@given(config=damaged(CONFIG, most=3))
@example(config=_with(CONFIG, ("environments", "mine", "python"), "3.x"))
def test_damaged_config_at_run(config: Any, tmp_path: Path, capsys, monkeypatch) -> None:
    """run --config with damaged settings and environment tables: the rows it names are decided at
    once (unavailable), so a config that is fine finishes fast."""
    from rnnbench.machine import environments

    monkeypatch.setattr(environments, "_EXTRA", {})
    monkeypatch.setenv(environments.DEFINITIONS_VAR, "{}")  # add_definitions sets it: restored after
    document = "\n".join(f"{json.dumps(str(k))} = {_toml(v)}" for k, v in config.items() if v is not None)
    path = tmp_path / f"{uuid.uuid4().hex}.toml"
    path.write_text(document, errors="surrogatepass")
    out = tmp_path / f"{uuid.uuid4().hex}.jsonl"
    code, stdout, err = _main(["run", "--config", str(path), *QUICK, "--out", str(out)], capsys)
    _clean(code, stdout, err, (0, 1, 2))
    if code == 2:
        assert not out.exists()
