"""Every field a reader of records uses is type-checked on reading (rnnbench.record.FIELDS).

Generated from full records as rnnbench writes them (a timed run row with its GEMM peak and
roofline, the same row as a sweep point with a second-order verdict, a fuzz outcome): each leaf and
each container of each record in turn is set to null and to a value of another JSON type. Either the
reading refuses the line (InputError naming file:line and the field's path) or every reader of
records (table, failure reports, contention legend, progress log, the HTML page and its charts,
the bug x version table) takes the record without an exception."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rnnbench import results_file
from rnnbench.errors import InputError

RUN_ROW = Path(__file__).resolve().parents[1] / "docs/results/2026-11-25-default-run-cost/after-warm.jsonl"


def _timed_row() -> dict[str, Any]:
    for line in RUN_ROW.read_text().splitlines():
        rec = json.loads(line)
        if rec["status"] == "ok" and rec.get("roofline") and rec.get("fwd_bwd"):
            return _with_binding(rec)
    raise AssertionError(f"{RUN_ROW} has no timed row")


def _with_binding(rec: dict[str, Any]) -> dict[str, Any]:
    """The row as a run now writes it: with its counts, the ceilings it was held against and its
    binding ceiling (rnnbench.machine.binding), which that older file's rows lack."""
    from rnnbench.machine.binding import binding

    rec = {
        **rec,
        "counts": {"bytes": {"per_step": 2240, "fwd_bwd": 71680}, "dispatch": {"fwd_bwd": {"torch_eager": 213}}},
        "ceilings": {"bandwidth_gbs": {"L1": 99.0}, "levels": {"L1": 49152}, "dispatch_us": {"torch_eager": 3.1}},
    }
    return {**rec, "binding": binding(rec)}


def _sweep_row(rec: dict[str, Any]) -> dict[str, Any]:
    return {
        **{k: v for k, v in rec.items() if k not in ("counts", "ceilings", "binding")},  # a sweep has none
        "sweep": {"axis": "length", "base": dict(rec["sizes"])},
        "driver": "torch_loop",
        "anchor": False,
        "hvp": {"status": "ok", "raw_status": "ok", "report": "fine"},
    }


def _fuzz_row() -> dict[str, Any]:
    from rnnbench.fuzz.campaign import Campaign
    from rnnbench.fuzz.outcome import Outcome

    campaign = Campaign(cases=1, seed=0, drivers=("torch_loop",), dtype="float64", device="cpu", losses=("sum",))
    body = campaign.body(0)
    return campaign.to_record(Outcome(0, "torch_loop", "grad_mismatch", "ok", "report", body, body, "here", "x = 1"))


def _paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every path to a container or leaf (dict keys; a list's first item)."""
    if prefix:
        yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list) and value:
        yield from _paths(value[0], (*prefix, 0))


def _other(value: Any) -> Any:
    """A value of another JSON type."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (dict, list, bool)) or value is None:
        return "x"
    return "1"  # a number


def _set(rec: dict[str, Any], path: tuple, value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(rec))
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


@functools.lru_cache(maxsize=1)
def _probes() -> list:
    from rnnbench.report import bug_table

    return bug_table.probes()


class _Pyplot:
    """matplotlib.pyplot as the charts call it, drawing nothing (its colour maps are the real ones)."""

    @staticmethod
    def get_cmap(name: str) -> Any:
        import matplotlib

        return matplotlib.colormaps[name]

    @staticmethod
    def subplots(nrows: int = 1, ncols: int = 1, squeeze: bool = True, **kwargs: Any) -> tuple[Any, Any]:
        from unittest import mock

        import numpy as np

        if squeeze and nrows * ncols == 1:
            return mock.MagicMock(), mock.MagicMock()
        axes = np.empty(nrows * ncols, dtype=object)
        for i in range(nrows * ncols):  # one by one: numpy would iterate a MagicMock given in a list
            axes[i] = mock.MagicMock()
        return mock.MagicMock(), axes.reshape(nrows, ncols) if not squeeze else axes

    @staticmethod
    def close(fig: Any) -> None:
        pass


# The chart plumbing (rnnbench.report.charts.style) as the stand-in: no figure, no file; `readable_log_y`
# reads the drawn axis' limits, so it goes too.
_PLUMBING = {"pyplot": _Pyplot, "save_png": lambda fig, path: path, "readable_log_y": lambda ax: None}


def _read_everything(records: list[dict[str, Any]], tmp: Path) -> None:
    """Every reader of records, on `records` (each raises only on a reader's bug). The charts' data
    code runs whole; matplotlib itself is a stand-in that takes any call (drawing 750 pages of
    charts would take the test's time without reading a field more)."""
    from unittest import mock

    from rnnbench.report import bug_table
    from rnnbench.report.charts import overview  # noqa: F401 (its modules loaded for the stand-in)
    from rnnbench.report.marks import contention_legend
    from rnnbench.report.progress import Progress
    from rnnbench.report.site.html import write_report
    from rnnbench.report.table import failure_reports, format_table

    format_table(records, include_unavailable=True)
    failure_reports(records)
    contention_legend(records)
    progress = Progress(len(records), stream=open("/dev/null", "w"), tty=False)
    for r in records:
        progress.done(r)
    probes = _probes()  # of the registry alone, not of the records: computed once
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(bug_table, "probes", lambda: probes))
        # The stand-in goes wherever a chart module took the plumbing by name (the charts are split
        # into modules, each importing it), and a real savefig fails the test: were a new module to
        # draw for real, the test would say so instead of silently taking seconds per case.
        for module in [m for name, m in sys.modules.items() if name.startswith("rnnbench.report.")]:
            for name, stand_in in _PLUMBING.items():
                if hasattr(module, name):
                    stack.enter_context(mock.patch.object(module, name, stand_in))
        stack.enter_context(
            mock.patch("matplotlib.figure.Figure.savefig", side_effect=AssertionError("a chart was drawn for real"))
        )
        write_report(records, tmp)
        bug_table.format_table(records)


def _cases() -> list[tuple[str, int, tuple, Any]]:
    base = [_timed_row()]
    base.append(_sweep_row(base[0]))
    base.append(_fuzz_row())
    out = []
    for i, rec in enumerate(base):
        for path in _paths(rec):
            for bad in (None, _other(json.loads(json.dumps(rec))[path[0]] if len(path) == 1 else _get(rec, path))):
                out.append(
                    (f"{['run', 'sweep', 'fuzz'][i]}:{'.'.join(map(str, path))}={json.dumps(bad)[:8]}", i, path, bad)
                )
    return out


def _get(rec: dict[str, Any], path: tuple) -> Any:
    for key in path:
        rec = rec[key]
    return rec


@pytest.fixture(scope="module")
def base_records() -> list[dict[str, Any]]:
    rec = _timed_row()
    return [rec, _sweep_row(rec), _fuzz_row()]


CASES = _cases()


def test_the_base_records_are_read_whole(base_records, tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in base_records))
    loaded = results_file.load([path])
    _read_everything(loaded, tmp_path)
    from rnnbench.report.site.html import write_report

    assert len(list(write_report(loaded, tmp_path).parent.glob("*.png"))) >= 2  # the charts drawn for real


@pytest.mark.parametrize("which, field, value", [(i, p, v) for _, i, p, v in CASES], ids=[c[0] for c in CASES])
def test_a_field_of_another_type_is_refused_on_reading_or_read(
    base_records, which: int, field: tuple, value: Any, tmp_path: Path
) -> None:
    path = tmp_path / "r.jsonl"
    records = [dict(r) for r in base_records]
    records[which] = _set(base_records[which], field, value)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    try:
        loaded = results_file.load([path])
    except InputError as exc:
        message = str(exc)
        assert message.startswith(f"{path}:{which + 1}: "), message
        top = str(field[0])
        assert f"'{top}" in message, f"the message names another field than {field}: {message}"
        return
    _read_everything(loaded, tmp_path)
