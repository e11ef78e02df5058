"""How series look in one chart: each gets a colour and a marker (and, for bars, a hatch) from the
set of series in that chart, so that no two of them look alike however many there are.

The first len(PALETTE) series get distinct colours, all with the first marker; the next ones
reuse the colours with the next marker (and the next bar hatch), and so on: the (colour, marker)
pair is unique for up to len(PALETTE) * len(MARKERS) series. Vendor anchors are told apart by
VENDOR_HATCH on bars and a dashed line, drawn in a colour that shows on the bar's own colour.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import NamedTuple, TypeVar

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

K = TypeVar("K", bound=Hashable)


class Style(NamedTuple):
    color: str
    marker: str
    hatch: str  # the bar hatch of the series' repeat class ("" for the first)


def styles(keys: Iterable[K], first: Iterable[K] = ()) -> dict[K, Style]:
    """A distinct Style per key (sorted, so the same set of series gets the same styles); the keys
    in `first` (e.g. vendor anchors, whose bars carry VENDOR_HATCH instead of their repeat class's)
    come first and so get colours of their own."""
    keys, first = set(keys), set(first)
    ordered = sorted(keys & first, key=str) + sorted(keys - first, key=str)
    n = len(PALETTE)
    return {
        k: Style(PALETTE[i % n], MARKERS[(i // n) % len(MARKERS)], BAR_HATCHES[(i // n) % len(BAR_HATCHES)])
        for i, k in enumerate(ordered)
    }


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
    import textwrap

    per_line = max(20, int(width_in * 72 / (0.55 * fontsize)))
    return "\n".join(textwrap.fill(part, per_line) for part in text.split("\n"))
