"""The gradient-error heatmap: model x driver cells coloured by the max relative error against the
oracle, non-ok cells labelled with their status (footnotes where a label would not fit)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

import numpy as np

from rnnbench.report.charts.style import Series, pyplot, save_png, series_namer


class HeatmapCells(NamedTuple):
    """The numbers of the gradient-error heatmap: its dtype, row series, column models, and per
    (row, column) index the cell's text ("ok", a status, "n/a", "skipped") and worst error."""

    dtype: str
    series: list[Series]
    models: list[str]
    label: dict[tuple[int, int], str]
    err: np.ndarray
    tolerances: list[float]


def heatmap_cells(records: list[dict]) -> HeatmapCells | None:
    """Worst max relative gradient error per (series, model) over all records of the most common
    dtype (a series is a driver in one env label and, with several machines, on one machine);
    a cell with a failing row shows that row's status instead."""
    dtypes: dict[str, int] = defaultdict(int)
    for r in records:
        dtypes[r["dtype"]] += 1
    if not dtypes:
        return None
    dtype = max(dtypes, key=dtypes.get)
    name = series_namer(records)
    rows = [r for r in records if r["dtype"] == dtype]
    models = sorted({r["model"] for r in rows})
    series = sorted({name(r) for r in rows})
    err = np.full((len(series), len(models)), np.nan)
    label: dict[tuple[int, int], str] = {}
    cells: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for r in rows:
        cells[(series.index(name(r)), models.index(r["model"]))].append(r)
    tols = set()
    for (i, j), recs in cells.items():
        failed = [r for r in recs if r["status"] not in ("ok", "skipped", "unavailable")]
        ok = [r for r in recs if r["status"] == "ok" and r.get("max_rel_error") is not None]
        if failed:  # one failing row makes the cell fail, whatever the others say
            label[(i, j)] = failed[0]["status"]
            errs = [r["max_rel_error"] for r in failed if r.get("max_rel_error") is not None]
            err[i, j] = max(errs) if errs else np.nan
        elif ok:
            label[(i, j)] = "ok"
            err[i, j] = max(max(r["max_rel_error"] for r in ok), 1e-17)
            tols.update(r["tolerance"] for r in ok if r.get("tolerance"))
        else:
            label[(i, j)] = "n/a" if all(r["status"] == "unavailable" for r in recs) else "skipped"
    return HeatmapCells(dtype, series=series, models=models, label=label, err=err, tolerances=sorted(tols))


def cell_notes(label: dict[tuple[int, int], str]) -> dict[str, int]:
    """A footnote number for each registered issue a heatmap cell names (its id is too long for
    the cell: it would spill over its neighbours)."""
    issues = sorted({t for t in label.values() if ":" in t})
    return {t: i + 1 for i, t in enumerate(issues)}


def short_status(status: str, notes: dict[str, int]) -> str:
    """What a heatmap cell says for a status: 'known issue [2]' for 'known_issue:<id>' (the id in
    footnote 2), 'grad\nmismatch' for 'grad_mismatch': short enough for one cell."""
    if status in notes:
        kind = status.split(":", 1)[0].replace("known_issue_fixed", "fixed?").replace("_", " ")
        return f"{kind}\n[{notes[status]}]"
    return status.replace("_", "\n", 1)


def grad_error_heatmap(records: list[dict], out: Path) -> Path | None:
    """Worst max relative gradient error per (series, model) over all records of the most common
    dtype; a cell whose worst row is not ok shows that status instead (heatmap_cells)."""
    from matplotlib.colors import LogNorm

    cells = heatmap_cells(records)
    if cells is None:
        return None
    dtype, series, models, label, err, tols = cells
    longest = max(len(s.label) for s in series)
    notes = cell_notes(label)
    fig, ax = pyplot().subplots(
        figsize=(1.2 * len(models) + 3 + 0.06 * max(longest - 20, 0), 0.5 * len(series) + 2.5 + 0.18 * len(notes)),
        layout="constrained",
    )
    masked = np.ma.masked_invalid(err)
    im = ax.imshow(masked, norm=LogNorm(vmin=1e-9, vmax=1.0), cmap="viridis", aspect="auto")
    ax.set_facecolor("#dddddd")
    for (i, j), text in label.items():
        text = f"{err[i, j]:.0e}" if text == "ok" else short_status(text, notes)
        color = "white" if label[(i, j)] == "ok" and err[i, j] < 1e-4 else "black"
        if label[(i, j)] not in ("ok", "n/a", "skipped"):
            color = "red"
        ax.text(
            j, i, text, ha="center", va="center", fontsize=7, color=color, fontweight="bold" if color == "red" else None
        )
    ax.set_xticks(range(len(models)), models, rotation=35, ha="right")
    ax.set_yticks(range(len(series)), [s.label for s in series])
    cbar = fig.colorbar(im, ax=ax)
    cbar.set_label("worst max relative gradient error vs the float64 oracle")
    for t in tols:
        cbar.ax.axhline(t, color="red", lw=2)
    ax.set_title(
        f"gradient error, {dtype}, worst over all rows\n(red line on the scale: tolerance"
        f" {', '.join(f'{t:g}' for t in tols)}; n/a: driver does not apply)",
        fontsize=10,
    )
    if notes:
        ax.set_xlabel("\n".join(f"[{n}] {status}" for status, n in notes.items()), fontsize=7, loc="left")
    return save_png(fig, out / "grad_error_heatmap.png")
