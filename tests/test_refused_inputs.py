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
