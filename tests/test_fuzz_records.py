"""`rnnbench fuzz --out FILE [--resume]`: one record per (body, driver, dtype) outcome and per
ill-conditioned body, written as each is decided; a campaign killed with SIGKILL continues with
--resume, runs only what is missing and prints the summary an uninterrupted campaign prints.

The campaign: seed 9, 36 bodies under one loss (body 33 is ill-conditioned), on a driver with a
planted backward bug (mismatches, shrunk), a driver that segfaults on 3-step bodies (crashes) and
torch_loop; ~10 s on 2 cores."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from rnnbench import record, results_file
from rnnbench.fuzz.campaign import ILL_DRIVER, Campaign, outcome_from_record, shrunk_from_records
from rnnbench.fuzz.grammar import generate, judged_body
from rnnbench.fuzz.outcome import Outcome
from rnnbench.fuzz.summary import FuzzSummary
from rnnbench.status import Status, known

PLUGIN_DIR = Path(__file__).parent / "plugins"
DRIVERS = ("faulty_cut_carry", "faulty_crash_at_length_3", "torch_loop")
SEED, CASES, ILL_BODY = 9, 36, 33
ARGS = (
    "fuzz",
    "--seed",
    str(SEED),
    "--cases",
    str(CASES),
    "--losses",
    "weighted",
    "--drivers",
    ",".join(DRIVERS),
    "--no-second-order",
    "--timeout",
    "60",
)
OUTCOMES = (CASES - 1) * len(DRIVERS) + 1  # every well-conditioned body on every driver, and the ill one once


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "rnnbench.cli", *args]


ENV = {
    **os.environ,
    "RNNBENCH_PLUGINS": "rnnbench_faulty",
    "PYTHONPATH": os.pathsep.join(filter(None, [str(PLUGIN_DIR), os.environ.get("PYTHONPATH")])),
}


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command(*args), capture_output=True, text=True, env=ENV, cwd=cwd, timeout=300)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def counts_table(stdout: str) -> list[str]:
    """The summary's first line and its counts table (driver rows), as printed."""
    out = stdout.splitlines()
    first = next(i for i, line in enumerate(out) if line.startswith("fuzz: "))
    end = next(i for i in range(first + 2, len(out)) if not out[i].split()[:1] or out[i].split()[0] not in DRIVERS)
    return out[first:end]


def computed(stderr: str) -> list[tuple[str, int]]:
    """(driver, case) of every outcome this process decided, from its progress messages."""
    return [(d, int(i) - 1) for d, i in re.findall(r"(\w+): case (\d+)/\d+", stderr)]


def described(stdout: str) -> list[str]:
    """The header line of every outcome the summary describes (failures, known issues, errors)."""
    return [line for line in stdout.splitlines() if line.startswith("== case ")]


def shrunk(records: list[dict]) -> set[tuple[str, int]]:
    return {(r["driver"], r["case"]) for r in records if r.get("minimal")}


def pairs(records: list[dict]) -> set[tuple[str, int]]:
    return {(r["driver"], r["case"]) for r in records}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """One uninterrupted campaign."""
    folder = tmp_path_factory.mktemp("reference")
    proc = run_cli(*ARGS, "--out", "ref.jsonl", cwd=folder)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the planted bug's mismatches and the crashes
    return proc, folder / "ref.jsonl"


def test_uninterrupted_campaign_writes_one_valid_record_per_outcome(reference, tmp_path: Path) -> None:
    proc, path = reference
    records = results_file.load([path])  # validated as every reader validates them
    assert len(records) == OUTCOMES == len({record.row_key(r) for r in records})
    assert all(record.problem(r) is None for r in records)
    by = Counter(r["driver"] for r in records)
    assert by == {**{d: CASES - 1 for d in DRIVERS}, ILL_DRIVER: 1}
    for r in records:
        for name in (
            "model",
            "driver",
            "dtype",
            "status",
            "loss_form",
            "source",
            "body",
            "report",
            "rnnbench_version",
            "schema",
            "machine",
            "timestamp",
            "settings",
            "fingerprint",
        ):
            assert name in r, name
        assert "hvp_status" in r and r["hvp_status"] is None  # --no-second-order
        body = judged_body(SEED, r["case"], ("weighted",))
        assert r["model"] == f"fuzz:{SEED}:{r['case']}" and r["source"] == body.source()
        assert outcome_from_record(r).body == body  # the record alone rebuilds the case
        assert r["settings"]["seed"] == SEED and r["settings"]["losses"] == ["weighted"]
        assert r["fingerprint"] == record.fingerprint(r)
    ill = next(r for r in records if r["driver"] == ILL_DRIVER)
    assert ill["status"] == "ill_conditioned" and ill["case"] == ILL_BODY and "not finite or exceeds" in ill["reason"]
    crashes = [r for r in records if r["status"] == "crash"]
    lengths = [generate(SEED, i).length for i in range(CASES) if i != ILL_BODY]
    assert len(crashes) == lengths.count(3) > 0 and {r["driver"] for r in crashes} == {"faulty_crash_at_length_3"}
    assert all("SIGSEGV" in r["report"] for r in crashes)
    mismatches = [r for r in records if r["status"] in ("grad_mismatch", "missing_grad")]
    assert mismatches and {r["driver"] for r in mismatches} == {"faulty_cut_carry"}
    shrunk = [r for r in records if r.get("minimal")]  # --shrink 1: one per (driver, kind)
    assert sorted(shrunk_from_records(records).values()) == [1] * len(shrunk)
    assert any(r.get("localization_report") for r in shrunk)
    assert f"fuzz: {CASES} bodies x 1 losses" in proc.stdout and "1 cases skipped as ill-conditioned" in proc.stdout

    table = run_cli("table", str(path), cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert f"fuzz:{SEED}:0" in table.stdout and "faulty_cut_carry" in table.stdout and "ill_conditioned" in table.stdout


@pytest.mark.parametrize("workers", ["1", "2"])
def test_killed_campaign_resumes_to_the_uninterrupted_summary(reference, tmp_path: Path, workers: str) -> None:
    """Drivers one after another (--workers 1) or at once: killed, then resumed, the records and
    summary are the uninterrupted run's; one after another, exactly the missing outcomes run again
    (at once, a case one driver finds ill may also be judged ill by another already running)."""
    ref_proc, ref_path = reference
    out = tmp_path / "r.jsonl"
    args = (*ARGS, "--workers", workers)
    with open(tmp_path / "first.out", "w") as so, open(tmp_path / "first.err", "w") as se:
        proc = subprocess.Popen(
            command(*args, "--out", str(out)), stdout=so, stderr=se, env=ENV, cwd=tmp_path, start_new_session=True
        )
        deadline = time.monotonic() + 120
        try:  # kill once the first driver has shrunk a failure and a few more outcomes are in
            while time.monotonic() < deadline and proc.poll() is None:
                text = out.read_text() if out.exists() else ""
                if '"minimal"' in text and text.count("\n") >= 12:
                    break
                time.sleep(0.01)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before = out.read_bytes()
    first = lines(out) if before.endswith(b"\n") else lines(out)[:-1]
    assert 12 <= len(first) < OUTCOMES

    resumed = run_cli(*args, "--out", str(out), "--resume", cwd=tmp_path)
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr
    final = results_file.load([out])
    assert out.read_bytes().startswith(before[: before.rfind(b"\n") + 1])  # what was written stays as it was
    assert len(final) == OUTCOMES and len({record.row_key(r) for r in final}) == OUTCOMES  # each exactly once
    assert {record.row_key(r) for r in final} == {record.row_key(r) for r in lines(ref_path)}
    assert counts_table(resumed.stdout) == counts_table(ref_proc.stdout)
    assert described(resumed.stdout) == described(ref_proc.stdout)
    # done outcomes were not run again: this run decided exactly the missing ones, each once
    again = computed(resumed.stderr)
    missing = [r for r in final if (r["driver"], r["case"]) not in pairs(first)]
    assert {(d, i) for d, i in again if i != ILL_BODY} == {
        (r["driver"], r["case"]) for r in missing if r["driver"] != ILL_DRIVER
    }
    assert len(again) == len(set(again))
    if workers == "1":
        assert len(again) == OUTCOMES - len(first)
        assert sum(i == ILL_BODY for _, i in again) == ((ILL_DRIVER, ILL_BODY) not in pairs(first))
    # kinds shrunk before the kill are not shrunk again: the same bodies carry a minimal one as uninterrupted
    assert shrunk(final) == shrunk(lines(ref_path)) and len(shrunk(final)) == len(shrunk_from_records(final))
    assert f"{len(first)} records already there, not run again" in resumed.stdout


def test_resuming_a_finished_campaign_runs_nothing_and_fails_as_it_did(reference, tmp_path: Path) -> None:
    ref_proc, ref_path = reference
    out = tmp_path / "done.jsonl"
    shutil.copy(ref_path, out)
    before = out.read_bytes()
    proc = run_cli(*ARGS, "--out", str(out), "--resume", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the recorded mismatches and crashes still count
    assert computed(proc.stderr) == [] and out.read_bytes() == before
    assert counts_table(proc.stdout) == counts_table(ref_proc.stdout)
    assert "0 records written now" in proc.stderr


@pytest.mark.parametrize(
    "change, words",
    [
        (("--seed", "10"), "seed 9 -> 10"),
        (("--losses", "weighted,sum_carry"), "losses ['weighted'] -> ['weighted', 'sum_carry']"),
        (("--cases", "4"), "not a row of this run"),
    ],
)
def test_resume_with_other_arguments_is_refused_unchanged(reference, tmp_path: Path, change, words) -> None:
    out = tmp_path / "r.jsonl"
    shutil.copy(reference[1], out)
    before = out.read_bytes()
    args = list(ARGS)
    i = args.index(change[0])
    args[i + 1] = change[1]
    proc = run_cli(*args, "--out", str(out), "--resume", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("rnnbench: error: --resume:") and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert words in proc.stderr
    assert out.read_bytes() == before


def test_existing_file_without_resume_and_resume_without_out_are_refused(reference, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    shutil.copy(reference[1], out)
    before = out.read_bytes()
    proc = run_cli(*ARGS, "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 2 and "already exists" in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert out.read_bytes() == before
    proc = run_cli(*ARGS, "--resume", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.splitlines() == [
        "rnnbench: error: --resume needs --out FILE (the results file to continue)"
    ], proc.stderr
    assert list(tmp_path.iterdir()) == [out]  # nothing written


def test_outcome_record_round_trip() -> None:
    losses = ("weighted", "sum_carry")
    campaign = Campaign(cases=4, seed=3, drivers=("torch_loop", "jax_loop"), dtype="float64", losses=losses)
    body = judged_body(3, 5, losses)
    minimal = judged_body(3, 0, losses)
    outcomes = [
        Outcome(
            5,
            "torch_loop",
            Status.GRAD_MISMATCH,
            None,
            "grad of W differs",
            body,
            minimal,
            "first divergence at step 1",
            "repros/repro_torch_loop.py",
        ),
        Outcome(1, "jax_loop", Status.OK, Status.HVP_MISMATCH, "H v differs", judged_body(3, 1, losses)),
        Outcome(2, "jax_loop", known("some-entry"), None, "known", judged_body(3, 2, losses)),
        Outcome(
            3, "torch_loop", Status.CRASH, report="crash: worker killed by SIGSEGV", body=judged_body(3, 3, losses)
        ),
        Outcome(4, "torch_loop", Status.OK, Status.OK, "", judged_body(3, 4, losses)),
    ]
    records = []
    for o in outcomes:
        rec = json.loads(results_file.dumps(campaign.to_record(o)))  # through the file format
        assert record.problem(rec) is None
        assert rec["model"] == f"fuzz:3:{o.index // 2}" and rec["loss_form"] == o.body.loss
        assert rec["status"] == str(o.status) and rec["hvp_status"] == (
            None if o.hvp_status is None else str(o.hvp_status)
        )
        back = outcome_from_record(rec)
        assert back == o
        assert (back.failed, back.known, back.errored, back.kind) == (o.failed, o.known, o.errored, o.kind)
        records.append(rec)
    ill = json.loads(results_file.dumps(campaign.ill_record(6, "loss 1e+50 is not finite or exceeds 1e+06")))
    assert record.problem(ill) is None and ill["driver"] == ILL_DRIVER and ill["status"] == "ill_conditioned"
    direct = FuzzSummary(
        campaign.drivers,
        4,
        3,
        "float64",
        "cpu",
        losses,
        Counter({"loss 1e+50 is not finite or exceeds 1e+06": 1}),
        sorted(outcomes, key=lambda o: (campaign.drivers.index(o.driver), o.index)),
    )
    assert campaign.summary(records[::-1] + [ill]).format() == direct.format()
    assert shrunk_from_records(records) == Counter({("torch_loop", "grad_mismatch"): 1})
    wanted = campaign.wanted()
    assert len(wanted) == campaign.judged * 3  # per case: its ill-conditioned record, then each driver
    assert (record.row_key(records[0]), records[0]["fingerprint"]) in {(k, fp) for k, fp, _, _ in wanted}
