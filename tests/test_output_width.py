"""Output that fits: `rnnbench list` within the terminal's width ($COLUMNS), 120 columns by default."""

from __future__ import annotations

import pytest

from rnnbench.cli.main import main


@pytest.mark.parametrize("columns", [80, 120])
def test_list_fits_the_terminal(columns: int, monkeypatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "models:" in lines and "drivers:" in lines
    assert max(len(line) for line in lines) <= columns, max(lines, key=len)
    assert any(line.startswith("  torch_loop") and line.split()[0] == "torch_loop" for line in lines)
