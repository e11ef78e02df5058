"""`rnnbench compare`: planted changes are named exactly (and exit 1), two runs of one tree compare
same or noisy (exit 0), status changes are verdicts of their own, old records without samples,
pytest-benchmark JSON, environments of one file, machines, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rnnbench import record, results_file
from rnnbench.cli import main
from rnnbench.record import SAMPLES_KEPT, kept_samples
from rnnbench.report import ratios
from rnnbench.report.compare.inputs import from_pytest_benchmark, trim
from rnnbench.report.compare.pairs import NOTHING_MEASURED, REGRESSION, compare, status_verdict

DATA = Path(__file__).parent / "data" / "compare"
MACHINE = {"hostname": "planted-host", "cpu": "planted cpu", "cores": 2, "platform": "Linux"}
DRIVERS = ("torch_loop", "torch_scan", "jax_lax_scan", "flax_scan", "torch_nn_lstm", "jax_loop")


def _timing(rng: np.random.Generator, median_ms: float, spread: float, n: int = 64) -> dict:
    """A timing dict as a record keeps it: samples log-normally spread by `spread` around median_ms."""
    samples = median_ms * np.exp(rng.normal(0.0, spread, n))
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return {
        "median_ms": float(med),
        "q1_ms": float(q1),
        "q3_ms": float(q3),
        "min_ms": float(samples.min()),
        "max_ms": float(samples.max()),
        "repeats": n,
        "samples": [float(x) for x in samples],
    }


def _record(
    driver: str,
    status: str = "ok",
    timing: dict | None = None,
    fwd: dict | None = None,
    machine: dict = MACHINE,
    version: str = "0.1.0+gplanted",
    env: str = "main",
    label: str = "torch 2.13.0",
) -> dict:
    rec = {
        "schema": record.SCHEMA,
        "model": "lstm",
        "driver": driver,
        "framework": driver.split("_")[0],
        "dtype": "float32",
        "device": "cpu",
        "sizes": {"T": 16, "B": 4},
        "seed": 0,
        "loss_form": "model",
        "environment_name": env,
        "env_label": label,
        "status": status,
        "machine": dict(machine),
        "rnnbench_version": version,
        "settings": {"threads": 1, "versions": {"torch": label.split()[-1]}},
    }
    if status == "ok":
        rec["fwd_bwd"], rec["fwd"] = timing, fwd
    return rec


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(results_file.dumps(r) for r in records))
    return path


def _planted(tmp_path: Path) -> tuple[Path, Path]:
    """Base and new files of six rows; in the new one torch_loop is 30 % slower, torch_scan 3 %
    slower inside its own (10 %) spread, jax_lax_scan went ok -> grad_mismatch, and the other rows
    are drawn afresh from the base's distributions."""
    rng = np.random.default_rng(7)
    medians = {
        "torch_loop": 1.0,
        "torch_scan": 50.0,
        "jax_lax_scan": 0.2,
        "flax_scan": 0.25,
        "torch_nn_lstm": 0.3,
        "jax_loop": 0.22,
    }
    spread = {"torch_scan": 0.10}
    change = {"torch_loop": 1.30, "torch_scan": 1.03}
    base, new = [], []
    for d in DRIVERS:
        s = spread.get(d, 0.03)
        base.append(_record(d, timing=_timing(rng, medians[d], s), fwd=_timing(rng, medians[d] / 3, s)))
        factor = change.get(d, 1.0)
        status = "grad_mismatch" if d == "jax_lax_scan" else "ok"
        new.append(
            _record(
                d, status, timing=_timing(rng, medians[d] * factor, s), fwd=_timing(rng, medians[d] * factor / 3, s)
            )
        )
    return _write(tmp_path / "base.jsonl", base), _write(tmp_path / "new.jsonl", new)


def test_planted_regressions_are_named_exactly_and_exit_1(tmp_path: Path, capsys) -> None:
    base, new = _planted(tmp_path)
    assert main(["compare", str(base), str(new), "--format", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    verdicts = {row["driver"]: row["verdict"] for row in out["rows"]}
    gating = {d for d, v in verdicts.items() if v in ("slower", "regression")}
    assert gating == {"torch_loop", "jax_lax_scan"}, verdicts
    assert verdicts["torch_loop"] == "slower" and verdicts["jax_lax_scan"] == REGRESSION
    assert verdicts["torch_scan"] in ("same", "noisy")  # 3 % inside a 10 % spread: not a regression
    slow = next(r for r in out["rows"] if r["driver"] == "torch_loop")["times"]["fwd_bwd"]
    # the one ratio direction: a speed-up of new over base, below 1 slower, the interval wholly below 1
    assert slow["hi"] < 1.0 and 1 / 1.4 < slow["speedup"] < 1 / 1.2 and slow["method"] == "bootstrap"
    assert slow["lo"] < slow["speedup"] < slow["hi"] and out["direction"] == ratios.DIRECTION
    assert main(["compare", str(base), str(new)]) == 1
    text = capsys.readouterr().out
    assert "REGRESSION lstm/jax_lax_scan" in text and "ok -> grad_mismatch" in text and "SLOWER lstm/torch_loop" in text
    assert "SLOWER lstm/torch_scan" not in text


def test_markdown_is_a_pasteable_table(tmp_path: Path, capsys) -> None:
    base, new = _planted(tmp_path)
    assert main(["compare", str(base), str(new), "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    assert "| model " in out and "|---" in out and "**" in out


def test_two_runs_of_one_tree_compare_same_or_noisy() -> None:
    """Real records: two runs of one commit, interleaved (`rnnbench compare --commits HEAD HEAD`,
    data/compare/README.md): every row same or noisy, never a failure; here every row that ran is noisy
    (timed under contention), so the gate measured nothing: its own exit code, not 0."""
    base = sorted(DATA.glob("same-tree/base-*.jsonl"))
    new = sorted(DATA.glob("same-tree/new-*.jsonl"))
    assert base and new
    records = results_file.load(base + new)
    assert len({r["rnnbench_version"] for r in records}) == 1  # one tree
    assert all(r.get("fwd_bwd", {}).get("samples") for r in records if r["status"] == "ok")
    result = compare(results_file.load(base), results_file.load(new), threshold=0.10, alpha=0.01)
    timed = [p for p in result.pairs if p.times]
    assert timed and all(p.verdict in ("same", "noisy") for p in result.pairs), [
        (p.key[:2], p.verdict, {q: round(t.estimate.ratio, 3) for q, t in p.times.items()}) for p in result.pairs
    ]
    assert all(p.times["fwd_bwd"].estimate.runs[0] >= 2 for p in timed)  # rounds: process-to-process noise covered
    assert all(p.verdict == "noisy" for p in timed) and not result.judged
    assert result.exit_code == NOTHING_MEASURED


@pytest.mark.parametrize(
    ("base", "new", "verdict"),
    [
        ("ok", "grad_mismatch", "regression"),
        ("ok", "crash", "regression"),
        ("ok", "known_issue:x", "regression"),
        ("known_issue_fixed:x", "known_issue:x", "regression"),
        ("known_issue:x", "ok", "fixed"),
        ("known_issue:x", "known_issue_fixed:x", "known_issue_fixed"),
        ("grad_mismatch", "ok", "fixed"),
        ("grad_mismatch", "crash", "changed"),
        ("ok", "cannot_decide", "changed"),
        ("ok", "unavailable", "unavailable"),
    ],
)
def test_status_changes_are_verdicts(base: str, new: str, verdict: str) -> None:
    assert status_verdict(base, new)[0] == verdict
    assert status_verdict(base, base) is None


def test_fix_of_a_registered_bug_exits_0_and_says_the_registry_must_record_it(tmp_path: Path, capsys) -> None:
    a = _write(tmp_path / "a.jsonl", [_record("torch_scan", "known_issue:torch-scan-drops-carry-cotangent")])
    rng = np.random.default_rng(0)
    b = _write(tmp_path / "b.jsonl", [_record("torch_scan", timing=_timing(rng, 1.0, 0.03))])
    assert main(["compare", str(a), str(b)]) == 0
    assert "registry (known_issues.json) must now record it" in capsys.readouterr().out


def test_rows_on_one_side_only(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(1)
    both = _record("torch_scan", "grad_mismatch")  # a row on both sides: there is something to compare
    a = _write(tmp_path / "a.jsonl", [_record("torch_loop", timing=_timing(rng, 1.0, 0.03)), {**both, "run_id": "a"}])
    b = _write(tmp_path / "b.jsonl", [_record("jax_loop", timing=_timing(rng, 1.0, 0.03)), {**both, "run_id": "b"}])
    assert main(["compare", str(a), str(b), "--format", "json"]) == 0
    verdicts = {r["driver"]: r["verdict"] for r in json.loads(capsys.readouterr().out)["rows"]}
    assert verdicts == {"torch_loop": "only_base", "jax_loop": "only_new", "torch_scan": "same"}


def _without_samples(rec: dict) -> dict:
    for q in ("fwd_bwd", "fwd"):
        if rec.get(q):
            rec[q] = {k: v for k, v in rec[q].items() if k != "samples"}
    rec["schema"] = 2
    return rec


def test_old_records_without_samples_have_no_interval(tmp_path: Path) -> None:
    """Schema-2 records are read; without samples a change is `noisy` unless the interquartile
    ranges are disjoint and the ratio beyond the threshold, and never `same`."""
    base, new = _planted(tmp_path)
    old = [results_file.load([p]) for p in (base, new)]
    result = compare([_without_samples(r) for r in old[0]], [_without_samples(r) for r in old[1]], 0.10, alpha=0.01)
    by_driver = {p.key[1]: p for p in result.pairs}
    assert by_driver["torch_loop"].verdict == "slower"  # 30 % with 3 % spreads: clearly separated
    assert by_driver["torch_loop"].times["fwd_bwd"].estimate.lo is None
    assert all(p.verdict in ("noisy", "regression", "slower") for p in result.pairs)
    assert by_driver["flax_scan"].verdict == "noisy"


def test_two_machines_need_across_machines(tmp_path: Path, capsys) -> None:
    base, _ = _planted(tmp_path)
    other = [dict(r, machine={**MACHINE, "hostname": "other-host"}) for r in results_file.load([base])]
    moved = _write(tmp_path / "other.jsonl", other)
    assert main(["compare", str(base), str(moved)]) == 2
    assert "--across-machines" in capsys.readouterr().err
    assert main(["compare", str(base), str(moved), "--across-machines"]) == 0
    table = capsys.readouterr().out
    lines = [line for line in table.splitlines() if line.startswith("lstm")]
    assert lines and all("across machines" in line for line in lines)


def test_normalize_divides_out_a_uniformly_slower_machine(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(3)
    base = [_record(d, timing=_timing(rng, 1.0, 0.03)) for d in DRIVERS]
    slow = [
        _record(
            d,
            timing=_timing(rng, 2.0 * (1.5 if d == "torch_loop" else 1.0), 0.03),
            machine={**MACHINE, "hostname": "ci"},
        )
        for d in DRIVERS
    ]
    a, b = _write(tmp_path / "a.jsonl", base), _write(tmp_path / "b.jsonl", slow)
    assert main(["compare", str(a), str(b), "--across-machines", "--format", "json"]) == 1
    assert {r["verdict"] for r in json.loads(capsys.readouterr().out)["rows"]} == {"slower"}
    assert main(["compare", str(a), str(b), "--across-machines", "--normalize", "--format", "json"]) == 1
    verdicts = {r["driver"]: r["verdict"] for r in json.loads(capsys.readouterr().out)["rows"]}
    assert [d for d, v in verdicts.items() if v == "slower"] == ["torch_loop"]


def test_environments_of_one_file(tmp_path: Path, capsys) -> None:
    """--environments splits one file: by environment name or framework-version label."""
    rng = np.random.default_rng(4)
    rows = [_record(d, timing=_timing(rng, 1.0, 0.03)) for d in ("torch_loop", "torch_scan")]
    rows += [
        _record(d, timing=_timing(rng, 1.0, 0.03), env="torch-2.14.1", label="torch 2.14.1")
        for d in ("torch_loop", "torch_scan")
    ]
    rows += [_record("jax_loop", timing=_timing(rng, 1.0, 0.03), label="jax 0.10.2")]
    path = _write(tmp_path / "matrix.jsonl", rows)
    assert main(["compare", str(path), "--environments", "torch-2.13.0,torch-2.14.1", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sorted(r["driver"] for r in out["rows"]) == ["torch_loop", "torch_scan"]  # jax rows are neither side
    assert any("torch: 2.13.0 -> 2.14.1" in d for d in out["differences"])
    assert main(["compare", str(path), "--environments", "main,torch-9.9"]) == 2


def test_pytest_benchmark_json_and_its_trimmed_baseline(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(5)
    data = list(1e-3 * np.exp(rng.normal(0, 0.03, 500)))
    q1, med, q3 = np.percentile(data, [25, 50, 75])
    bench = {
        "fullname": "tests/test_benchmarks.py::test_fwd_bwd[lstm-torch_loop]",
        "stats": {"median": med, "q1": q1, "q3": q3, "rounds": 500, "data": data},
        "extra_info": {
            "model": "lstm",
            "driver": "torch_loop",
            "dtype": "float32",
            "sizes": {"T": 16},
            "status": "ok",
            "framework": "torch",
            "framework_versions": {"torch": "2.13.0+cpu"},
            "machine": MACHINE,
            "rnnbench_version": "0.1.0+gabc",
        },
    }
    src = tmp_path / "bench.json"
    src.write_text(json.dumps({"benchmarks": [bench]}))
    [rec] = from_pytest_benchmark(json.loads(src.read_text()), src)
    assert rec["fwd_bwd"]["median_ms"] == pytest.approx(1e3 * med) and len(rec["fwd_bwd"]["samples"]) == SAMPLES_KEPT
    assert rec["env_label"] == "torch 2.13.0"
    assert trim(src, tmp_path / "small.json") == 1
    assert len(json.loads((tmp_path / "small.json").read_text())["benchmarks"][0]["stats"]["data"]) == SAMPLES_KEPT
    broken = dict(bench, extra_info={**bench["extra_info"], "status": "grad_mismatch"})
    (tmp_path / "new.json").write_text(json.dumps({"benchmarks": [broken]}))
    assert main(["compare", str(tmp_path / "small.json"), str(tmp_path / "new.json")]) == 1
    assert "REGRESSION lstm/torch_loop" in capsys.readouterr().out


def test_kept_samples_are_bounded_spread_and_in_order() -> None:
    samples = [float(i) for i in range(1000)]
    kept = kept_samples(samples)
    assert len(kept) == SAMPLES_KEPT and kept[0] == 0.0 and kept[-1] == 999.0 and list(kept) == sorted(kept)
    assert kept_samples([1.0, 2.0]) == (1.0, 2.0)


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "only-one.jsonl"],
        ["compare", "a.jsonl", "b.jsonl", "--threshold", "-5%"],
        ["compare", "a.jsonl", "b.jsonl", "--threshold", "ten"],
        ["compare", "a.jsonl", "b.jsonl", "--alpha", "0.7"],
        ["compare", "a.jsonl", "b.jsonl", "--models", "rnn"],
        ["compare", "--commits", "HEAD", "no-such-commit-xyz"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(6)
    for name in ("a.jsonl", "b.jsonl"):
        _write(tmp_path / name, [_record("torch_loop", timing=_timing(rng, 1.0, 0.03))])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rnnbench: error:")


def test_commits_without_git_on_path_says_so(tmp_path: Path, monkeypatch, capsys) -> None:
    """No git on PATH is said as such, not as "not a git checkout"."""
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no git there
    assert main(["compare", "--commits", "HEAD~1", "HEAD"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["rnnbench: error: --commits needs git, and there is none on PATH"]


def test_commits_run_the_curated_selection_by_default() -> None:
    from rnnbench.planning.commits import run_arguments
    from rnnbench.suites import CURATED

    args = run_arguments({})
    assert args[args.index("--threads") + 1] == "1"
    assert args[args.index("--drivers") + 1].split(",") == list(CURATED.drivers)
    chosen = run_arguments({"suite": "quick", "budget": "0.2"})
    assert args[args.index("--environments") + 1] == "main"
    assert "--drivers" not in chosen and "--models" not in chosen and "--environments" not in chosen
    assert chosen[chosen.index("--budget") + 1] == "0.2"


def test_commits_curated_selection_is_asvs() -> None:
    """The default selection of --commits is asv's Curated set."""
    from rnnbench.suites import CURATED, curated

    assert set(CURATED.drivers) == {d for model in CURATED.models for d in curated(model)}


def test_a_side_may_be_several_files(tmp_path: Path, capsys) -> None:
    """BASE and NEW may each join several results files with commas: their runs of a row are pooled."""
    rng = np.random.default_rng(8)
    files = [
        _write(tmp_path / f"{side}{i}.jsonl", [_record("torch_loop", timing=_timing(rng, 1.0, 0.03))])
        for side in ("a", "b")
        for i in (1, 2)
    ]
    a, b = f"{files[0]},{files[1]}", f"{files[2]},{files[3]}"
    assert main(["compare", a, b, "--format", "json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["rows"]
    assert row["times"]["fwd_bwd"]["runs"] == [2, 2]
