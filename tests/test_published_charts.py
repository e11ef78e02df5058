"""Every chart published under docs/ has its records committed beside it and a command that redraws it
(docs/charts.toml, rnnbench.report.site.published); the check itself catches what it is for."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rnnbench.report.site import published

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "docs" / "charts.toml"


def test_every_published_chart_has_its_data_and_command() -> None:
    assert published.load(MANIFEST), "docs/charts.toml lists no chart"
    assert published.problems(MANIFEST, ROOT) == []


def _tree(tmp_path: Path) -> Path:
    """A copy of the manifest and the files it names, under tmp_path (the repository root there)."""
    for chart in published.load(MANIFEST):
        for name in (*chart.data, *chart.outputs):
            src, dst = ROOT / name, tmp_path / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(src, dst) if src.is_dir() else shutil.copy(src, dst)
    shutil.copy(MANIFEST, tmp_path / "docs" / "charts.toml")
    return tmp_path


def test_the_check_finds_a_chart_without_data_and_a_bad_record(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / "docs" / "stray.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    data = root / published.load(MANIFEST)[0].data[0]
    data.write_text(data.read_text() + '{"model": 3}\n')
    found = published.problems(root / "docs" / "charts.toml", root)
    assert any("docs/stray.png" in line and "no entry" in line for line in found), found
    assert any(line.startswith(published.load(MANIFEST)[0].data[0]) for line in found), found


def test_redraw_writes_every_output(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    root = _tree(tmp_path)
    for chart in published.load(MANIFEST):
        for name in chart.outputs:
            path = root / name
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    published.redraw(root / "docs" / "charts.toml", root)
    assert published.problems(root / "docs" / "charts.toml", root) == []
