"""Inputs that used to pass unnoticed or end in an internal error are refused with one line and
exit 2, nothing written (docs/reliability.md): a fuzz plant judged nowhere, a malformed Python
version in an environment entry, impossible CPU times or reference samples in a record, and a
malformed compare threshold."""

from __future__ import annotations

from pathlib import Path

import pytest

from rnnbench.cli.main import main


def _refused(capsys, argv: list[str], *words: str) -> str:
    """main(argv) exits 2 with one line on stderr holding each of `words`; returns the line."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("rnnbench: error: "), err
    assert all(w in err for w in words), err
    return err


# ---------------------------------------------------------------------------------------------
# a planted campaign that plants nothing


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--plant", "grad:jax", "--drivers", "torch_loop"], ("no selected driver", "jax")),
        (["--plant", "hvp:torch", "--drivers", "torch_loop", "--no-second-order"], ("no mode checks H v",)),
        (["--plant", "hvp:torch", "--drivers", "torch_loop", "--dtypes", "float32"], ("float64 only",)),
    ],
)
def test_a_plant_judged_nowhere_is_refused(tmp_path: Path, capsys, flags: list[str], words: tuple[str, ...]) -> None:
    out = tmp_path / "fuzz.jsonl"
    _refused(capsys, ["fuzz", "--cases", "1", "--out", str(out), *flags], "--plant", *words)
    assert not out.exists()


def test_a_plant_judged_somewhere_is_accepted() -> None:
    """An H v plant over float64 and float32: the float64 campaign judges it."""
    from rnnbench.fuzz.campaign import Campaign, check_plant
    from rnnbench.fuzz.grammar import Grammar

    hvp, grad = Grammar("smooth", 0.0, "hvp:torch"), Grammar("smooth", 0.0, "grad:jax")
    dtypes = ("float64", "float32")
    check_plant([Campaign(cases=1, seed=0, drivers=("torch_loop",), dtype=t, grammar=hvp) for t in dtypes])
    check_plant([Campaign(cases=1, seed=0, drivers=("torch_loop", "jax_loop"), grammar=grad)])


# ---------------------------------------------------------------------------------------------
# a malformed Python version in an environment entry


@pytest.mark.parametrize("version", ["3.x", "three", "3.12.1", "3", "\u0663.\u0661\u0662", " 3.12"])
def test_a_malformed_python_version_is_refused(tmp_path: Path, capsys, monkeypatch, version: str) -> None:
    from rnnbench.machine import environments

    monkeypatch.setattr(environments, "_EXTRA", {})
    monkeypatch.setenv(environments.DEFINITIONS_VAR, "{}")  # add_definitions sets it: restored after
    config = tmp_path / "c.toml"
    config.write_text(f'[environments.mine]\nrequirements = ["torch==2.13.0"]\npython = "{version}"\n')
    out = tmp_path / "out.jsonl"
    argv = ["run", "--config", str(config), "--models", "rnn", "--drivers", "torch_loop", "--out", str(out)]
    _refused(capsys, argv, "python", "major.minor")
    assert not out.exists()


def test_a_python_version_is_major_minor() -> None:
    from rnnbench.machine.interpreters import major_minor

    assert major_minor("3.12") == (3, 12) and major_minor("3.9") == (3, 9)


# ---------------------------------------------------------------------------------------------
# impossible CPU times and reference samples in records given to compare

COST = Path(__file__).resolve().parent.parent / "docs" / "results" / "2026-11-28-default-run-cost" / "warm.jsonl"


def _cpu_timed() -> dict:
    """A real one-thread row decided by its CPU time, with CPU reference samples."""
    import json

    for line in COST.read_text().splitlines():
        rec = json.loads(line)
        timed = rec.get("fwd_bwd") or {}
        if rec["status"] == "ok" and (rec.get("timing") or {}).get("clock") == "cpu" and timed.get("ref_cpu_samples"):
            return rec
    raise AssertionError(f"{COST} has no CPU-timed row")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("cpu_samples", -0.5),
        ("cpu_samples", 0.0),
        ("cpu_samples", 1e300),
        ("cpu_samples", 5e-324),
        ("cpu_median_ms", -1.0),
        ("ref_cpu_samples", 0.0),
        ("ref_cpu_samples", -1.0),
        ("ref_cpu_samples", 5e-324),
        ("ref_samples", 5e-324),
    ],
)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_impossible_cpu_times_and_references_are_refused(tmp_path: Path, capsys, field: str, value, fmt: str) -> None:
    import json

    base, new = _cpu_timed(), _cpu_timed()
    base["run_id"], new["run_id"] = "base", "new"
    timed = new["fwd_bwd"]
    timed[field] = [value] * len(timed[field]) if isinstance(timed[field], list) else value
    (tmp_path / "a.jsonl").write_text(json.dumps(base) + "\n")
    (tmp_path / "b.jsonl").write_text(json.dumps(new) + "\n")
    argv = ["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--format", fmt]
    _refused(capsys, argv, "b.jsonl:1", f"fwd_bwd.{field}")


# ---------------------------------------------------------------------------------------------
# compare --threshold


@pytest.mark.parametrize(
    "value", ["abc", "-5%", "nan%", "1e999%", "inf", "1e-300%", "5e-324", "1_0%", "\u0665%", "5%%", "jax_*=nan"]
)
def test_a_malformed_threshold_is_refused(tmp_path: Path, capsys, value: str) -> None:
    _refused(capsys, ["compare", "a.jsonl", "b.jsonl", "--threshold", value], "--threshold")


@pytest.mark.parametrize(
    ("value", "level"), [("10%", 0.1), (" 2.5 %", 0.025), ("0.1", 0.1), ("+5%", 0.05), ("1e1%", 0.1)]
)
def test_a_threshold_is_a_plain_decimal(value: str, level: float) -> None:
    from rnnbench.cli.compare import threshold

    assert threshold(value) == pytest.approx(level)
