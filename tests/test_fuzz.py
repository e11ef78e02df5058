"""The loop-body fuzzer: reproducible bodies, no false alarms on correct drivers, planted bugs caught
and shrunk, second-order known issue classified, repro scripts that fail while the bug is there."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from rnnbench_faulty import faulty_loop

from rnnbench import registry
from rnnbench.check.bugs.known_issues import is_known
from rnnbench.cli import main
from rnnbench.fuzz.campaign import Campaign
from rnnbench.fuzz.cases import build
from rnnbench.fuzz.grammar import Body, body_valid, body_wrt, generate, reaching, shrink_candidates, size
from rnnbench.fuzz.report import explain_failure
from rnnbench.fuzz.runner import fuzz, run_driver

CORRECT = ("torch_loop", "jax_loop")


def test_bodies_are_reproducible_and_valid() -> None:
    for i in range(30):
        body = generate(7, i)
        assert body == generate(7, i)
        assert body_valid(body)
        compile(body.source(), "<body>", "exec")
    assert len({generate(7, i) for i in range(30)}) == 30


def test_input_that_cannot_reach_the_loss_is_not_compared() -> None:
    """c0' = c1, c1' = p0, y = p1 with T = 2: c1's initial value goes to c0, which step 1 overwrites
    unread (torch rightly returns None for it); at T = 1 it is the final c0, in the loss."""
    body = Body(
        updates=(("leaf", "c1"), ("leaf", "p0")),
        output=("leaf", "p1"),
        n=1,
        length=2,
        has_xs=False,
        carry_grad=(True, True),
        xs_grad=False,
        data_seed=0,
    )
    assert "carry0.c1" not in reaching(body) and "carry0.c1" not in body_wrt(body)
    assert "carry0.c1" in body_wrt(dataclasses.replace(body, length=1))
    fc = build(body)
    judged = run_driver(fc, registry.get_driver("torch_loop"), "float64", second_order=True)
    assert (judged.status, judged.hvp_status) == ("ok", "ok")


def test_shrink_candidates_are_smaller_and_valid() -> None:
    body = generate(0, 3)
    cands = list(shrink_candidates(body))
    assert cands and all(body_valid(c) for c in cands)
    assert min(size(c) for c in cands) < size(body)


def test_correct_drivers_have_no_false_alarms() -> None:
    summary = fuzz(Campaign(cases=8, seed=11, drivers=CORRECT))
    counts = summary.counts()
    assert not summary.failures and not any(o.errored for o in summary.outcomes), summary.format()
    for name in CORRECT:
        assert counts[name]["tried"] + sum(summary.ill_conditioned.values()) == 8
        assert counts[name]["hvp_agree"] == counts[name]["hvp_tried"] > 0


def test_planted_bug_is_caught_shrunk_and_located(tmp_path) -> None:
    broken = faulty_loop("cut_carry", cut_carry_from=1)
    seen = []
    summary = fuzz(
        Campaign(cases=6, seed=0, drivers=(broken.name,)),
        [broken],
        on_failure=lambda o, fc, d: (
            explain_failure(o, fc, d, dtype="float64", repro_dir=tmp_path, seed=0),
            seen.append(o),
        ),
    )
    assert summary.failures, summary.format()
    out = seen[0]
    assert out.minimal is not None and size(out.minimal) <= size(out.body)
    assert out.minimal.length >= 2  # one step cannot show a cut between steps
    assert f"first divergence at step {out.minimal.length - 2}" in out.localization, out.localization
    assert "no standalone template" in out.repro  # a test driver has no script


def test_torch_scan_second_order_is_the_registered_issue() -> None:
    driver = registry.get_driver("torch_scan")
    statuses = [run_driver(build(generate(0, i)), driver, "float64", second_order=True) for i in range(4)]
    assert all(j.status == "ok" for j in statuses)
    assert any(j.hvp_status is not None and is_known(j.hvp_status) for j in statuses), statuses


def test_repro_script_fails_while_the_bug_is_there_and_passes_on_a_correct_driver(tmp_path) -> None:
    from rnnbench.check.tolerance import hvp_tolerance
    from rnnbench.fuzz.repro import export
    from rnnbench.model import reference_loss

    fc = build(generate(0, 1))  # torch_scan's H v is wrong on this body (the registered issue)
    tol = hvp_tolerance(fc.hvp_oracle().kind, reference_loss(fc.model, fc.case))
    for driver, expected_rc, expected in (
        ("torch_scan", 1, "MISMATCH"),
        ("torch_loop", 0, "OK"),
        ("jax_lax_scan", 0, "OK"),
    ):
        path = export(
            tmp_path / f"{driver}.py",
            fc,
            registry.get_driver(driver),
            second_order=True,
            status="test",
            tolerance=tol.max_rel_error,
            absolute_scale=tol.absolute_scale,
        )
        run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert run.returncode == expected_rc and expected in run.stdout, run.stdout + run.stderr
        assert "rnnbench" not in run.stderr  # standalone: it never imports the suite


def test_cli_fuzz_prints_the_summary(capsys, tmp_path) -> None:
    assert main(["fuzz", "--cases", "2", "--drivers", "torch_loop,jax_loop", "--out", str(tmp_path / "f.jsonl")]) == 0
    out = capsys.readouterr().out
    assert (
        "fuzz: 2 bodies x 4 losses (weighted, sum_carry, mean, last_y; seed 0, float64, cpu)" in out
        and "0 mismatches" in out
    )
    for name in CORRECT:
        assert name in out


def test_cli_fuzz_checks_its_flags_into_one_value_and_leaves_them_as_parsed() -> None:
    """The checked flags (workers filled in, the grammar built) are a value of their own; the parsed
    arguments stay as the user gave them."""
    from rnnbench.cli import fuzz as cli_fuzz
    from rnnbench.cli.main import parser

    args = parser().parse_args(["fuzz", "--drivers", "torch_loop", "--grammar", "edge", "--snap-rate", "0.5"])
    parsed = dict(vars(args))
    checked = cli_fuzz._checked(args)
    assert vars(args) == parsed
    assert args.workers is None and checked.workers >= 1
    assert (checked.grammar.name, checked.grammar.snap_rate) == ("edge", 0.5)
    assert checked.dtypes == ["float64"] and [d.name for d in checked.drivers["float64"]] == ["torch_loop"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        checked.workers = 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["fuzz", "--cases", "0"], "--cases must be a finite number > 0"),
        (["fuzz", "--drivers", "torch_nn_rnn"], "cannot fuzz here"),
        (["fuzz", "--drivers", "nope"], "unknown driver"),
        (["fuzz", "--dtype", "bfloat16"], "unknown fuzzing dtype 'bfloat16'"),
    ],
)
def test_cli_fuzz_bad_input_is_one_line(argv, message, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_committed_repro_still_reproduces_the_registered_bug() -> None:
    """docs/repros/torch_scan_double_backward.py exits 1 while the registry says the installed torch
    has the bug; once torch fixes it the script exits 0 and this test fails, like a strict xfail."""
    from pathlib import Path

    from rnnbench.check.bugs.known_issues import installed_version, version_matches
    from rnnbench.check.bugs.known_issues import registry as known

    entry = next(i for i in known() if i.id == "torch-scan-double-backward-drops-saved-values")
    torch_version = installed_version("torch")
    if torch_version is None or not version_matches(torch_version, entry.versions["torch"]):
        pytest.skip(f"the registry does not claim the bug for torch {torch_version}")
    script = Path(__file__).resolve().parents[1] / "docs" / "repros" / "torch_scan_double_backward.py"
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and "MISMATCH: torch_scan" in run.stdout, run.stdout + run.stderr


def test_cli_fuzz_on_a_missing_gpu_is_one_line(capsys) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert main(["fuzz", "--device", "cuda", "--drivers", "torch_loop"]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot fuzz here: no CUDA device visible to torch" in err and len(err.splitlines()) == 1


def test_committed_repro_is_what_the_exporter_writes(tmp_path) -> None:
    """docs/repros/torch_scan_double_backward.py is generated, not hand-edited: the exporter, given
    the minimal body the fuzzer shrank seed 0's body 1 to, writes it byte for byte."""
    from pathlib import Path

    from rnnbench.check.tolerance import hvp_tolerance
    from rnnbench.fuzz.repro import export
    from rnnbench.model import reference_loss

    minimal = Body(
        updates=(("matvec", ("leaf", "p1")),),
        output=("leaf", "c0"),
        n=1,
        length=1,
        has_xs=False,
        carry_grad=(True,),
        xs_grad=False,
        data_seed=generate(0, 1).data_seed,
    )
    fc = build(minimal)
    tol = hvp_tolerance(fc.hvp_oracle().kind, reference_loss(fc.model, fc.case))
    path = export(
        tmp_path / "repro.py",
        fc,
        registry.get_driver("torch_scan"),
        second_order=True,
        status="known_issue:torch-scan-double-backward-drops-saved-values",
        tolerance=tol.max_rel_error,
        absolute_scale=tol.absolute_scale,
    )
    committed = Path(__file__).resolve().parents[1] / "docs" / "repros" / "torch_scan_double_backward.py"
    assert path.read_text() == committed.read_text()


def test_repro_embeds_the_loss_form(tmp_path) -> None:
    """A body judged under another loss form exports that form's loss, and the script agrees with
    the oracle on a correct driver (exit 0)."""
    import dataclasses
    import subprocess
    import sys

    from rnnbench.fuzz.repro import export

    body = dataclasses.replace(generate(0, 3), loss="sum_carry")
    fc = build(body)
    path = export(
        tmp_path / "repro.py",
        fc,
        registry.get_driver("torch_loop"),
        second_order=False,
        status="ok",
        tolerance=1e-9,
        absolute_scale=0.0,
    )
    text = path.read_text()
    assert "def sum_carry(ops, consts, ys, carry):" in text and "LOSS = sum_carry" in text
    assert subprocess.run([sys.executable, str(path)], capture_output=True).returncode == 0
