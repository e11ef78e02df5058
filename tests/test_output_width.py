"""Output that fits: `rnnbench list` within the terminal's width ($COLUMNS), 120 columns by default."""

from __future__ import annotations

import pytest

from rnnbench.cli.main import main


@pytest.mark.parametrize("columns", [80, 120])
def test_list_fits_the_terminal(columns: int, tmp_path, monkeypatch, capsys) -> None:
    from rnnbench.machine import environments

    # no environment but main created: the lines that say how to create each (long paths) fit too
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(environments.XLA_PYTHON_VAR, str(tmp_path / "no-xla" / "bin" / "python"))
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "models:" in lines and any(line.startswith("drivers:") for line in lines)
    assert any(line.startswith("environments not created here") for line in lines)
    assert max(len(line) for line in lines) <= columns, max(lines, key=len)
    assert any(line.startswith("  torch_loop") and line.split()[0] == "torch_loop" for line in lines)


def _rows() -> list[dict]:
    from rnnbench.rows.timing import Timing

    steady = [10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 10.0, 10.1]
    base = {"dtype": "float32", "environment_name": "main", "env_label": "torch 2.13.0", "max_rel_error": 3e-7}
    ok = {
        **base,
        "model": "lstm",
        "driver": "torch_scan_compiled_clone_y_only_long_name",
        "status": "ok",
        "fwd_bwd": Timing.of(steady).to_dict(),
        "fwd": Timing.of([s / 3 for s in steady]).to_dict(),
        "first_call_s": 4.2,
        "cpu": {"threads": 1, "notes": ["load"]},
    }
    issue = "torch-inductor-scan-aliasing-saved-output-carry"
    known = {**base, "model": "rnn", "driver": "torch_scan_compiled", "status": f"known_issue:{issue}"}
    return [ok, known]


def test_the_table_fits_columns_and_abbreviates_long_issue_ids(monkeypatch) -> None:
    from rnnbench.report.marks import CONTENDED_MARK
    from rnnbench.report.table import format_table

    monkeypatch.setenv("COLUMNS", "100")
    text = format_table(_rows())
    table = text.splitlines()[: 2 + 2]  # header, rule, two rows
    assert max(len(line) for line in table) <= 100, "\n".join(table)
    assert "known_issue:K1" in text and "K1: torch-inductor-scan-aliasing-saved-output-carry" in text
    assert "left out to fit 100 columns" in text
    assert f"10 {CONTENDED_MARK}" in table[2]  # the median and its mark stay when the spread goes
    monkeypatch.setenv("COLUMNS", "1000")
    wide = format_table(_rows())
    assert "[" in wide.splitlines()[2] and "left out" not in wide  # room: every column, every spread


def test_the_saved_for_backward_column_shows_the_count_and_goes_after_the_first_call_time(monkeypatch) -> None:
    """The step-memory column holds each row's own count ("-" without one) and, as the terminal
    narrows, is left out after the first-call time and before the % peak column."""
    from rnnbench.report.table import format_table

    rows = _rows()
    rows[0]["step_memory"] = {"saved_mb": 1.5, "method": "counted"}
    monkeypatch.setenv("COLUMNS", "1000")
    header, _, ok_line, known_line = format_table(rows).splitlines()[:4]
    assert "saved for bwd MiB" in header and ok_line.split()[-1] == "1.5" and known_line.split()[-1] == "-"
    full = len(header)
    for width in range(full, 40, -1):
        monkeypatch.setenv("COLUMNS", str(width))
        header = format_table(rows).splitlines()[0]
        if "saved for bwd MiB" not in header:
            assert "first call s" not in header and "% peak" in header, (width, header)
            break
    else:
        raise AssertionError("the step-memory column was never left out")
