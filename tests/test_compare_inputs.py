"""What `rnnbench compare` reads and what it refuses: a record repeated is one run, a side against
itself and sides without a common row are refused, malformed pytest-benchmark JSON and impossible
records are one line and exit 2, and the bootstrap's cost is bounded by construction (a cap on runs
per row, counts drawn in chunks), whatever the length of a history."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rnnbench import record, results_file
from rnnbench.cli import main
from rnnbench.report.compare import stats as compare_stats
from rnnbench.report.compare.evidence import RUNS_CAP
from rnnbench.report.compare.pairs import NOTHING_MEASURED, compare
from test_compare import _record

MACHINE = {"hostname": "history-host", "cpu": "history cpu", "cores": 2, "platform": "Linux"}
ROWS = ("torch_loop", "torch_scan", "jax_lax_scan", "flax_scan")


def timing(rng: np.random.Generator, median_ms: float, spread: float, n: int = record.SAMPLES_KEPT) -> dict:
    """A timing as a record keeps it: n samples log-normally spread by `spread` around median_ms."""
    samples = median_ms * np.exp(rng.normal(0.0, spread, n))
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return {
        "median_ms": float(med),
        "q1_ms": float(q1),
        "q3_ms": float(q3),
        "repeats": n,
        "samples": list(record.kept_samples(list(samples))),
    }


def row(driver: str, rng: np.random.Generator, median_ms: float = 1.0, spread: float = 0.03, **over: Any) -> dict:
    """A timed ok record of one lstm row, as `rnnbench run` writes it (a run_id of its own)."""
    fwd_bwd, fwd = timing(rng, median_ms, spread), timing(rng, median_ms / 3, spread)
    rec = _record(driver, timing=fwd_bwd, fwd=fwd, machine=MACHINE, version="0.1.0+ghistory")
    return {**rec, "run_id": uuid.uuid4().hex[:16], **over}


def history(path: Path, runs: int, rows: tuple[str, ...] = ROWS, seed: int = 0) -> Path:
    """A results file of `runs` runs of a few rows (one record per row and run, each run its own
    run_id): the shape of a history that grows by appending every CI run."""
    rng = np.random.default_rng(seed)
    with path.open("w") as f:
        for _ in range(runs):
            run_id = uuid.uuid4().hex[:16]
            for driver in rows:
                f.write(results_file.dumps(row(driver, rng, run_id=run_id)))
    return path


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(results_file.dumps(r) for r in records))
    return path


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rnnbench: error:"), err
    return err[0]


def test_a_record_repeated_is_one_run(tmp_path: Path, capsys) -> None:
    """One run per side, 12 % apart inside a 25 % spread: noisy. The base repeated five times is
    still one run (five copies would narrow the interval and make it `slower`)."""
    rng = np.random.default_rng(11)
    base = row("torch_loop", rng, 1.0, 0.25)
    new = row("torch_loop", rng, 1.12, 0.25)
    once = write(tmp_path / "once.jsonl", [base])
    five = write(tmp_path / "five.jsonl", [base] * 5)
    newer = write(tmp_path / "new.jsonl", [new] * 5)
    # noisy, the one row: nothing judged (NOTHING_MEASURED), never a failure
    assert main(["compare", str(once), str(newer), "--format", "json"]) == NOTHING_MEASURED
    [alone] = json.loads(capsys.readouterr().out)["rows"]
    assert main(["compare", str(five), str(newer), "--format", "json"]) == NOTHING_MEASURED
    out = json.loads(capsys.readouterr().out)
    [repeated] = out["rows"]
    assert repeated["times"] == alone["times"] and repeated["times"]["fwd_bwd"]["runs"] == [1, 1]
    assert "repeated records counted once (the same run): 4 base, 4 new" in out["header"]
    older = [{k: v for k, v in r.items() if k != "run_id"} for r in (base, new)]  # before run_id: by content
    result = compare([older[0]] * 5, [older[1]] * 3, 0.10, alpha=0.01)
    assert result.pairs[0].times["fwd_bwd"].estimate.runs == (1, 1) and result.repeated == (4, 2)
    # Unlike five runs of their own (five run ids): then the interval is five runs' and narrower.
    distinct = write(tmp_path / "runs.jsonl", [dict(base, run_id=str(i)) for i in range(5)])
    # any verdict (pooling is what is checked here), never bad input
    assert main(["compare", str(distinct), str(newer), "--format", "json"]) in (0, 1, NOTHING_MEASURED)
    [pooled] = json.loads(capsys.readouterr().out)["rows"]
    assert pooled["times"]["fwd_bwd"]["runs"] == [5, 1]


def test_a_side_against_itself_is_refused(tmp_path: Path, capsys) -> None:
    path = history(tmp_path / "h.jsonl", 3)
    assert main(["compare", str(path), str(path)]) == 2
    assert "the same runs" in one_error_line(capsys)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(path.read_bytes())  # the same records in another file
    assert main(["compare", str(path), f"{copy}"]) == 2
    assert "the same runs" in one_error_line(capsys)
    other = history(tmp_path / "other.jsonl", 1, seed=1)  # a run shared by both sides is refused too
    assert main(["compare", f"{path},{other}", str(other)]) == 2
    one_error_line(capsys)
    rerun = [dict(r, run_id="rerun") for r in results_file.load([path])[:4]]  # the same numbers, another run
    assert main(["compare", str(path), str(write(tmp_path / "rerun.jsonl", rerun))]) == 0


def test_sides_without_a_common_row_are_refused_naming_both(tmp_path: Path, capsys) -> None:
    runs = history(tmp_path / "run.jsonl", 2)
    fuzz = write(
        tmp_path / "fuzz.jsonl",
        [{"model": "fuzz:0:0", "driver": "torch_loop", "dtype": "float64", "status": "ok", "case": 0, "body": {}}],
    )
    assert main(["compare", str(runs), str(fuzz), "--across-machines"]) == 2
    line = one_error_line(capsys)
    assert "no row to compare" in line and str(runs) in line and str(fuzz) in line
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    # an empty side is a run that measured nothing (every row skipped), not bad input: its own exit code
    assert main(["compare", str(runs), str(empty), "--across-machines"]) == NOTHING_MEASURED
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rnnbench: measured nothing:"), err
    assert str(runs) in err[0] and str(empty) in err[0] and "has 0" in err[0]


def _bench(**over: Any) -> dict:
    data = [1e-3 * (1 + 0.01 * i) for i in range(20)]
    q1, med, q3 = np.percentile(data, [25, 50, 75])
    bench = {
        "fullname": "tests/test_benchmarks.py::test_fwd_bwd[lstm-torch_loop]",
        "stats": {"median": med, "q1": q1, "q3": q3, "rounds": 20, "data": data},
        "extra_info": {"model": "lstm", "driver": "torch_loop", "status": "ok", "machine": MACHINE},
    }
    return {**bench, **over}


@pytest.mark.parametrize(
    "benchmarks",
    [
        ["not a benchmark"],
        [_bench(stats="fast")],
        [_bench(extra_info=["lstm"])],
        [_bench(stats={"median": "1", "q1": 1, "q3": 1})],
        [_bench(stats={**_bench()["stats"], "data": "1,2"})],
        [_bench(stats={**_bench()["stats"], "data": [1e-3, "x"]})],
        [_bench(stats={**_bench()["stats"], "median": -1.0})],
        [_bench(stats={**_bench()["stats"], "median": float("nan")})],
        [_bench(stats={**_bench()["stats"], "median": 1e300})],
        [_bench(extra_info={**_bench()["extra_info"], "sizes": {"T": "long"}})],
        [_bench(extra_info={**_bench()["extra_info"], "model": "a/b"})],
        [_bench(extra_info={**_bench()["extra_info"], "framework_versions": "2.13"})],
    ],
)
def test_malformed_pytest_benchmark_json_is_one_line_and_exit_2(benchmarks, tmp_path: Path, capsys) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"benchmarks": [_bench()], "datetime": "2026-01-01T00:00:00"}))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"benchmarks": benchmarks}))
    assert main(["compare", str(good), str(bad)]) == 2
    assert str(bad) in one_error_line(capsys)


def test_pytest_benchmark_json_without_rounds_gets_a_hint(tmp_path: Path, capsys) -> None:
    bare = _bench(stats={k: v for k, v in _bench()["stats"].items() if k != "data"})
    paths = []
    for day in (1, 2):
        paths.append(tmp_path / f"{day}.json")
        paths[-1].write_text(json.dumps({"benchmarks": [bare], "datetime": f"2026-01-0{day}T00:00:00"}))
    # two sessions (datetime): two runs of the same numbers; without rounds no interval, so never `same`: noisy,
    # and nothing judged
    assert main(["compare", *map(str, paths)]) == NOTHING_MEASURED
    err = capsys.readouterr().err
    assert "--benchmark-save-data" in err and "no interval" in err


BAD_FIELDS = [
    ("fwd_bwd.median_ms", 0),
    ("fwd_bwd.median_ms", -1.0),
    ("fwd_bwd.q1_ms", 1e308),
    ("fwd.samples", [1.0, float("inf")]),
    ("max_rel_error", float("inf")),  # NaN is schema 1's null there; an infinity is not
    ("fwd_bwd.q3_ms", float("nan")),
    ("model", "lstm/../../x"),
    ("model", "m" * 300),
    ("model", "é" * 150),  # 150 characters, 300 bytes: too long for a chart's file name
    ("model", "lstm\x00"),
    ("driver", "torch_loop\ud800"),
    ("env_label", "torch\ud800"),
]


@pytest.mark.parametrize(("field", "value"), BAD_FIELDS, ids=[f"{f}={str(v)[:12]!r}" for f, v in BAD_FIELDS])
def test_impossible_records_are_refused_naming_file_line_field(field: str, value: Any, tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(0)
    rec = row("torch_loop", rng)
    node = rec
    *parents, leaf = field.split(".")
    for key in parents:
        node = node[key]
    node[leaf] = value
    path = tmp_path / "bad.jsonl"
    good = json.dumps(row("torch_scan", rng))
    path.write_text(good + "\n" + json.dumps(rec) + "\n")  # json.dumps writes NaN and lone surrogates as given
    other = history(tmp_path / "h.jsonl", 1)
    assert main(["compare", str(other), str(path)]) == 2
    line = one_error_line(capsys)
    assert f"{path}:2: " in line and f"'{field.split('.')[0]}" in line, line
    assert main(["table", str(path)]) == 2
    one_error_line(capsys)


class _Counting:
    """A numpy Generator that records the shape of every multinomial draw (the bootstrap's arrays)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.rows: list[int] = []

    def multinomial(self, n: Any, pvals: Any, size: Any = None) -> np.ndarray:
        out = self.rng.multinomial(n, pvals, size=size)
        self.rows.append(out.shape[0])
        return out


def test_the_bootstrap_is_bounded_by_a_cap_on_runs_and_chunks_of_resamples(tmp_path: Path) -> None:
    """A row's runs beyond RUNS_CAP are not pooled (the last ones are), the header says so, and
    the resamples are drawn as counts, CHUNK at a time: the largest array is CHUNK x the samples of
    RUNS_CAP runs, however long the history."""
    long = results_file.load([history(tmp_path / "long.jsonl", RUNS_CAP + 15, rows=ROWS[:2])])
    new = [dict(r, run_id="new") for r in long[:2]]
    result = compare(long, new, 0.10, alpha=0.01)
    assert {p.times["fwd_bwd"].estimate.runs for p in result.pairs} == {(RUNS_CAP, 1)}
    from rnnbench.report.compare.format import header_lines

    header = "\n".join(header_lines(result))
    assert f"at most {RUNS_CAP} per row" in header and f"2 row(s) have more than {RUNS_CAP} runs" in header
    runs = [r["fwd_bwd"]["samples"] for r in long[:: len(ROWS[:2])]][:RUNS_CAP]
    rng = _Counting(0)
    medians = compare_stats._bootstrap_medians(runs, rng, compare_stats.RESAMPLES)
    assert medians.shape == (compare_stats.RESAMPLES,) and np.isfinite(medians).all()
    assert max(rng.rows) == compare_stats.CHUNK < compare_stats.RESAMPLES
    assert len(rng.rows) == (1 + RUNS_CAP) * -(-compare_stats.RESAMPLES // compare_stats.CHUNK)


def test_counted_medians_are_the_medians_of_the_drawn_samples() -> None:
    """The weighted median of counts is np.median of the multiset they describe (odd and even sizes)."""
    rng = np.random.default_rng(3)
    values = np.sort(rng.random(9))
    counts = rng.integers(0, 4, size=(50, 9))
    counts[:, 0] += 1
    expected = [np.median(np.repeat(values, c)) for c in counts]
    assert np.allclose(compare_stats._weighted_quantiles(values, counts), expected)
