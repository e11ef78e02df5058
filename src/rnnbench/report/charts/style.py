"""What a chart draws and how it looks: records put into series (series_namer: one driver in one
environment and, with records from several machines, on one machine), one record per row
(latest_rows), a look per series, and the figure plumbing every chart shares (pyplot on Agg,
save_png, readable_log_y).

One look per driver, the same in every chart (driver_style): the drivers of suites.CHART_ORDER
(each mechanism, the vendor layers, then asv's append-only list) take the palette in that order,
len(PALETTE) colours with the first marker, then the colours again with the next marker and bar
hatch; any other driver (a plugin's, a study's baseline) takes a slot from a hash of its name, so
it too looks the same in every chart. Two series of one driver in one chart (two environments or
machines) share its colour and differ by marker and hatch (styles). Vendor anchors are told apart
by VENDOR_HATCH on bars and a dashed line, drawn in a colour that shows on the bar's own colour.
"""

from __future__ import annotations

import io
import textwrap
import zlib
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import NamedTuple, TypeVar

import numpy as np

from rnnbench.record import row_key
from rnnbench.report.labels import env_label, machine_of, several_machines
from rnnbench.suites import CHART_ORDER

# tab10 without its grey (a grey series reads as "disabled" beside the grey of gaps and grids),
# plus two darker hues; no black (a black bar hides black hatching).
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#17becf",
    "#393b79",
    "#637939",
)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
BAR_HATCHES = ("", "..", "xx", "oo", "--", "||", "++", "**")  # a bar's repeat class (MARKERS' index)
VENDOR_HATCH = "///"
DPI = 100

K = TypeVar("K", bound=Hashable)


class Style(NamedTuple):
    color: str
    marker: str
    hatch: str  # the bar hatch of the series' repeat class ("" for the first)


def _slot_style(slot: int) -> Style:
    n = len(PALETTE)
    return Style(PALETTE[slot % n], MARKERS[(slot // n) % len(MARKERS)], BAR_HATCHES[(slot // n) % len(BAR_HATCHES)])


def driver_style(driver: str) -> Style:
    """The look of `driver` in every chart: its place in suites.CHART_ORDER, or for a driver not
    named there a slot after those (from the CRC-32 of its name: the same in every process and on
    every machine, unlike hash()), so it never takes a named driver's look."""
    if driver in CHART_ORDER:
        return _slot_style(CHART_ORDER.index(driver))
    n = len(PALETTE)
    start = -(-len(CHART_ORDER) // n) * n  # the first marker class no named driver uses
    return _slot_style(start + zlib.crc32(driver.encode("utf-8", "surrogatepass")) % (n * len(MARKERS) - start))


def styles(keys: Iterable[K]) -> dict[K, Style]:
    """The Style of each key: its driver's (driver_style; a key without a .driver is its own
    driver name). A key whose look another key of the chart already has (a second environment or
    machine of one driver, two unnamed drivers whose slots meet) keeps its colour and takes the
    next free marker and hatch (another colour once its eight are taken), in sorted order, so no
    two keys of one chart look alike."""
    out: dict[K, Style] = {}
    used: set[tuple[str, str]] = set()
    every = [(c, m) for m in range(len(MARKERS)) for c in PALETTE]
    for k in sorted(set(keys), key=str):
        base = driver_style(getattr(k, "driver", str(k)))
        m0 = MARKERS.index(base.marker)
        own = [(base.color, (m0 + i) % len(MARKERS)) for i in range(len(MARKERS))]  # its colour first
        color, m = next((cm for cm in own + every if (cm[0], MARKERS[cm[1]]) not in used), own[0])
        out[k] = Style(color, MARKERS[m], BAR_HATCHES[m % len(BAR_HATCHES)])
        used.add((color, MARKERS[m]))
    return out


def luminance(color: str) -> float:
    """Relative luminance (0 black .. 1 white) of a "#rrggbb" colour."""
    r, g, b = (int(color[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def ink_on(color: str) -> str:
    """Black or white, whichever shows on `color` (hatching and text drawn over a bar)."""
    return "#000000" if luminance(color) > 0.45 else "#ffffff"


def wrap(text: str, width_in: float, fontsize: float = 10) -> str:
    """`text` broken into lines that fit `width_in` inches at `fontsize` points (a title that
    would otherwise run off the figure's edge)."""
    per_line = max(20, int(width_in * 72 / (0.55 * fontsize)))
    return "\n".join(textwrap.fill(part, per_line) for part in text.split("\n"))


class Series(NamedTuple):
    """What one line, bar group or heatmap row holds: one driver's records from one environment
    (named by the records' own env_label) and, with records from several machines, one machine
    ("" when all records come from one)."""

    driver: str
    env: str
    machine: str = ""

    @property
    def label(self) -> str:
        """The legend/axis label: "jax_lax_scan (jax 0.10.2)", "torch_scan (torch 2.9.0) @ host-b"."""
        return f"{self.driver} ({self.env})" + (f" @ {self.machine}" if self.machine else "")


def series_namer(records: list[dict]) -> Callable[[dict], Series]:
    """The series of each of `records`: its own driver, its own env label and, when `records`
    come from several machines, its own machine. A row decided without starting its environment
    (unavailable, or skipped by a sweep's budget, before any worker ran) is labelled by the
    environment's name ("xla"); it joins the series of the rows that ran in that environment on
    its machine when those all ran under one version, and keeps its own label otherwise."""
    by_machine = several_machines(records)
    where = lambda r: (r["driver"], r.get("environment_name", "main"), machine_of(r))
    ran: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for r in records:
        if env_label(r) != r.get("environment_name", "main"):
            ran[where(r)].add(env_label(r))

    def name(rec: dict) -> Series:
        label = env_label(rec)
        versions = ran.get(where(rec), set())
        if label == rec.get("environment_name", "main") and len(versions) == 1:
            label = next(iter(versions))
        return Series(rec["driver"], label, machine_of(rec) if by_machine else "")

    return name


def chart_styles(series_rows: dict[Series, list[dict]]) -> dict:
    """The styles of the series one chart draws (styles: each driver's own look)."""
    return styles(series_rows)


def latest_rows(records: list[dict]) -> list[dict]:
    """One record per row and machine: when a row (record.row_key) was run again on the same machine,
    the latest record by timestamp is kept, in first-seen order; a sweep's record of a row is apart
    from a run's. The same row from two machines is two rows."""
    latest: dict[tuple, dict] = {}
    for r in records:
        k = (machine_of(r), row_key(r), "sweep" in r)
        if k not in latest or r.get("timestamp", "") >= latest[k].get("timestamp", ""):
            latest[k] = r
    return list(latest.values())


def pyplot():
    """matplotlib.pyplot on the Agg backend, imported on first use: tables and pages need no matplotlib.
    Text is drawn as written: a `$` in a record's name is no mathtext (which could fail to parse)."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False
    import matplotlib.pyplot as plt

    return plt


def save_png(fig, path: Path) -> Path:
    """`fig` written to `path` and closed (pyplot keeps every open figure): a PNG with a 256-colour
    palette, as charts have few colours, so the files stay small enough to commit. Returns `path`."""
    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, dpi=DPI, format="png")
    buf.seek(0)
    Image.open(buf).convert("RGB").quantize(256).save(path, optimize=True)
    pyplot().close(fig)
    return path


def readable_log_y(ax) -> None:
    """Label 1-2-5 ticks on a log y axis as plain numbers (call after plotting: uses the limits)."""
    from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter, NullLocator

    lo, hi = ax.get_ylim()
    ticks = [m * 10.0**e for e in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1) for m in (1, 2, 5)]
    ax.yaxis.set_major_locator(FixedLocator([t for t in ticks if lo <= t <= hi]))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())
