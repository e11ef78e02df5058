"""What `rnnbench report` draws, read back from the drawn figures: a row without a speed number is a
labelled gap and never a bar, the vendor layer is marked, no two series in one chart look alike,
heatmap labels stay in their cells, titles stay on the figure; and the report of a default-run
file and of a realistic-suite file has the bar chart of every model in it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from rnnbench import results_file  # noqa: E402
from rnnbench.report.charts import bars, heatmap, style  # noqa: E402
from rnnbench.report.site.html import write_report  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RUN = ROOT / "docs" / "results" / "2026-11-25-default-run.jsonl"
REALISTIC = sorted((ROOT / "docs" / "results" / "2026-11-26-realistic").glob("*.jsonl"))
H100 = sorted((ROOT / "docs" / "results" / "2026-11-26-h100").glob("*.jsonl"))


def _rnn_rows() -> list[dict]:
    return [r for r in results_file.load([DEFAULT_RUN]) if r["model"] == "rnn"]


def _panel(records: list[dict]):
    """Draw the first rnn panel of `records` as bar_chart does; return (axes, its BarRows)."""
    plt = style.pyplot()
    groups = bars.panels(records, "rnn")
    rows, unavailable = bars.bar_rows(next(iter(groups.values())), style.series_namer(records))
    fig, ax = plt.subplots()
    bars.draw_panel(ax, rows, style.styles(b.series for b in rows), title="t", unavailable=unavailable)
    return fig, ax, rows


def _drawn_bars(ax) -> dict[str, float]:
    """y tick label -> where the bar drawn at that tick ends, its median (a log axis starts bars at its
    lower limit); bars only: the axes' bar containers."""
    labels = {round(t): lab.get_text() for t, lab in zip(ax.get_yticks(), ax.get_yticklabels())}
    out = {}
    for container in ax.containers:
        for patch in getattr(container, "patches", []):
            out[labels[round(patch.get_y() + patch.get_height() / 2)]] = patch.get_x() + patch.get_width()  # its end
    return out


def test_a_failed_row_is_a_labelled_gap_never_a_bar() -> None:
    """A failing row whose record still holds times (as a buggy writer might leave them) gets no
    bar: its label is on the axis, its status written in the gap; every timed row gets one bar of
    its median's length."""
    records = _rnn_rows()
    victim = next(r for r in records if r["status"] == "ok" and r.get("fwd_bwd") and not r.get("anchor"))
    bad = copy.deepcopy(victim)
    bad.update(status="grad_mismatch", driver=victim["driver"] + "_broken")
    fig, ax, rows = _panel(records + [bad])
    drawn = _drawn_bars(ax)
    gaps = [b for b in rows if not b.timed]
    assert gaps and any(b.series.driver == bad["driver"] for b in gaps)
    for b in rows:
        label = b.series.label + (" [vendor]" if b.anchor else "")
        if b.timed:
            assert drawn[label] == pytest.approx(b.median_ms)
        else:
            assert label not in drawn, f"{label} ({b.status}) was drawn as a bar"
            assert any(t.get_text().startswith(f"no time: {b.status}") for t in ax.texts), b.status
    assert len(drawn) == sum(b.timed for b in rows)
    # the known issues of the real run are gaps too
    known = {r["status"] for r in records if r["status"].startswith("known_issue")}
    assert {b.status for b in gaps} >= {"grad_mismatch"} | known
    style.pyplot().close(fig)


def test_the_vendor_layer_is_hatched_in_ink_that_shows_and_rows_carry_their_speedup() -> None:
    fig, ax, rows = _panel(_rnn_rows())
    labels = {round(t): lab.get_text() for t, lab in zip(ax.get_yticks(), ax.get_yticklabels())}
    vendor = [
        p
        for c in ax.containers
        for p in getattr(c, "patches", [])
        if labels[round(p.get_y() + p.get_height() / 2)].endswith("[vendor]")
    ]
    assert vendor and all(p.get_hatch() == style.VENDOR_HATCH for p in vendor)
    for p in vendor:  # hatch ink contrasts with the bar: luminance apart by at least half the scale
        face, ink = p.get_facecolor()[:3], p.get_hatchcolor()[:3]
        lum = lambda c: 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
        assert abs(lum(face) - lum(ink)) > 0.45
    assert any("x vendor" in t.get_text() for t in ax.texts)
    style.pyplot().close(fig)


def test_no_two_series_look_alike_however_many() -> None:
    keys = [f"series{i}" for i in range(40)]
    looks = style.styles(keys)
    assert len({(s.color, s.marker) for s in looks.values()}) == 40
    assert "#000000" not in style.PALETTE
    # one driver in two environments: its colour, another marker
    two = style.styles([style.Series("torch_loop", "torch 2.9.0"), style.Series("torch_loop", "torch 2.13.0")])
    assert len({s.color for s in two.values()}) == 1 and len({s.marker for s in two.values()}) == 2


def test_each_driver_has_one_look_in_every_chart() -> None:
    """The named drivers' looks are distinct and do not depend on which other series a chart holds;
    an unnamed (plugin) driver's look is a function of its name and never a named driver's."""
    from rnnbench.suites import CHART_ORDER

    named = {d: style.driver_style(d) for d in CHART_ORDER}
    assert len({(s.color, s.marker) for s in named.values()}) == len(CHART_ORDER)
    alone = style.styles([style.Series("jax_lax_scan", "jax 0.10.2")])
    crowd = style.styles(
        [style.Series(d, "x") for d in reversed(CHART_ORDER)] + [style.Series("jax_lax_scan", "jax 0.10.2")]
    )
    assert alone[style.Series("jax_lax_scan", "jax 0.10.2")] == crowd[style.Series("jax_lax_scan", "jax 0.10.2")]
    plugin = style.driver_style("my_plugin_driver")
    assert plugin == style.driver_style("my_plugin_driver")
    assert (plugin.color, plugin.marker) not in {(s.color, s.marker) for s in named.values()}


def test_heatmap_labels_fit_their_cells_and_titles_stay_on_the_figure(tmp_path: Path) -> None:
    """Every cell label is at most as wide as its cell, in the drawn figure; the roofline's and the
    bar chart's titles end inside the figure."""
    plt = style.pyplot()
    records = results_file.load([DEFAULT_RUN])
    path = heatmap.grad_error_heatmap(records, tmp_path)
    assert path is not None
    cells = heatmap.heatmap_cells(records)
    notes = heatmap.cell_notes(cells.label)
    assert notes, "the default run has known issues: the footnotes are what this test is about"
    fig, ax = plt.subplots(figsize=(1.2 * len(cells.models) + 3, 0.5 * len(cells.series) + 2.5), layout="constrained")
    ax.imshow(cells.err, aspect="auto")
    texts = [
        ax.text(
            j,
            i,
            heatmap.short_status(t, notes) if t != "ok" else f"{cells.err[i, j]:.0e}",
            ha="center",
            va="center",
            fontsize=7,
        )
        for (i, j), t in cells.label.items()
    ]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    cell_px = ax.transData.transform((1, 0))[0] - ax.transData.transform((0, 0))[0]
    assert max(t.get_window_extent(renderer).width for t in texts) <= cell_px
    plt.close(fig)


@pytest.mark.parametrize("source", ["default", "realistic", "h100"])
def test_report_has_the_bar_chart_of_every_model(source: str, tmp_path: Path) -> None:
    files = {"default": [DEFAULT_RUN], "realistic": REALISTIC, "h100": H100}[source]
    if not files:
        pytest.fail(f"no committed {source} records")
    records = results_file.load(files)
    page = write_report(records, tmp_path).read_text()
    timed_models = {r["model"] for r in records if (r.get("settings") or {}).get("time", True) and "sweep" not in r}
    for model in timed_models:
        assert (tmp_path / f"bars_{model}.png").is_file(), model
        assert f'src="bars_{model}.png"' in page
    if source == "realistic":
        assert {f"tgrowth_{m}.png" for m in timed_models} <= {p.name for p in tmp_path.glob("*.png")}
    assert "<table id='anchors'>" in page  # the vendor table is on every page
    anchors = page.split("<table id='anchors'>")[1].split("</table>")[0]
    if source != "h100" or any(r.get("anchor") and r["status"] == "ok" for r in records):
        assert anchors.count("<tr") > 1, "the vendor table is empty although vendor rows ran"


def test_version_table_only_where_several_versions_ran(tmp_path: Path) -> None:
    versions = results_file.load([ROOT / "docs" / "results" / "2026-11-25-bug-versions.jsonl"])
    (tmp_path / "v").mkdir()
    page = write_report(versions, tmp_path / "v").read_text()
    assert 'id="versions-table"' in page and "<strong>reproduces</strong>" in page
    assert 'id="versions-table"' not in write_report(results_file.load(H100), tmp_path).read_text()


def _planted(driver: str, ms: float | None, T: int = 64, status: str = "ok", **extra) -> dict:
    """A record of model rnn at B=4,H=8,T=`T` as a run writes one: timed when `ms` is given."""
    rec = {
        "model": "rnn",
        "driver": driver,
        "dtype": "float32",
        "status": status,
        "framework": "torch",
        "env_label": "torch 2.13.0",
        "sizes": {"B": 4, "H": 8, "T": T},
        "timestamp": "t",
        "first_call_s": 1.5,
        **extra,
    }
    if ms is not None:
        rec["fwd_bwd"] = {"median_ms": ms, "q1_ms": 0.9 * ms, "q3_ms": 1.1 * ms}
    return rec


def _bar_colors(fig) -> dict[str, tuple]:
    """Tick label (series label) -> face colour of its bar, over every panel of `fig`."""
    out = {}
    for ax in fig.axes:
        labels = {round(t): lab.get_text() for t, lab in zip(ax.get_yticks(), ax.get_yticklabels())}
        for c in ax.containers:
            for p in getattr(c, "patches", []):
                out[labels[round(p.get_y() + p.get_height() / 2)]] = p.get_facecolor()
    return out


def test_a_driver_has_its_colour_in_two_charts_with_other_drivers(tmp_path: Path, monkeypatch) -> None:
    """jax_lax_scan drawn beside two different sets of drivers keeps one colour (the README's CPU
    and GPU charts once gave it two)."""
    figs = []
    monkeypatch.setattr(bars, "save_png", lambda fig, path: figs.append(fig) or path)
    one = [_planted("jax_lax_scan", 2.0), _planted("torch_loop", 3.0)]
    two = [_planted("jax_lax_scan", 2.0), _planted("flax_scan", 1.0), _planted("torch_scan_compiled", 4.0)]
    for records in (one, two):
        bars.figure(
            records, {("rnn", *k): rows for k, rows in bars.panels(records, "rnn").items()}, tmp_path / "x", title="t"
        )
    label = style.Series("jax_lax_scan", "torch 2.13.0").label
    first, second = (_bar_colors(f)[label] for f in figs)
    assert first == second
    for f in figs:
        style.pyplot().close(f)


def test_a_driver_missing_from_a_panel_is_a_labelled_gap_with_why(tmp_path: Path, monkeypatch) -> None:
    """At T=1024 two of four drivers have no record: both keep their place, labelled with the reason
    given, and get no bar; the panel's axis runs at most NOTE_ROOM's margin past its longest whisker."""
    figs = []
    monkeypatch.setattr(bars, "save_png", lambda fig, path: figs.append(fig) or path)
    drivers = {"torch_nn_lstm": 1.0, "jax_lax_scan": 1.3, "torch_loop": 8.0, "torch_scan_compiled": 6.0}
    records = [_planted(d, ms, T=256) for d, ms in drivers.items()]
    records += [_planted(d, 10 * drivers[d], T=1024) for d in ("torch_nn_lstm", "jax_lax_scan")]
    groups = {("rnn", *k): rows for k, rows in bars.panels(records, "rnn").items()}
    bars.figure(records, groups, tmp_path / "x", title="t", gap_why={"torch_loop": "run cut before it"})
    (fig,) = figs
    big = next(ax for ax in fig.axes if "T=1024" in ax.get_title())
    texts = [t.get_text() for t in big.texts]
    assert "no record: run cut before it" in texts
    assert "no record: none in these records" in texts  # torch_scan_compiled, no reason given
    assert {lab.get_text() for lab in big.get_yticklabels()} >= {
        style.Series(d, "torch 2.13.0").label for d in ("torch_loop", "torch_scan_compiled")
    }
    assert len(_drawn_bars(big)) == 2
    for ax in (a for a in fig.axes if a.get_visible()):
        longest = max(p.get_x() + p.get_width() for c in ax.containers for p in getattr(c, "patches", []))
        lo, hi = ax.get_xlim()
        assert lo == 0 and longest * 1.1 <= hi <= longest * 1.1 / bars.NOTE_ROOM + 1e-9  # the whisker: 1.1x median
        assert "recommended (fastest correct): torch_nn_lstm" in ax.get_title()
    style.pyplot().close(fig)


def test_a_wide_spread_is_a_log_axis_with_the_ratios_printed() -> None:
    rows = [
        bars.BarRow(style.Series(d, "e"), "ok", False, ms, 0.9 * ms, 1.1 * ms)
        for d, ms in (("jax_loop", 0.2), ("torch_scan", 70.0))
    ]
    log, lo, hi = bars.time_axis(rows)
    assert log and 0.18 / bars.LOG_MARGIN == pytest.approx(lo) and hi == pytest.approx(77.0 * bars.LOG_MARGIN)
    fig, ax = style.pyplot().subplots()
    bars.draw_panel(ax, rows, style.styles(b.series for b in rows), title="t", unavailable=0)
    assert any("0.00286x fastest" in t.get_text() for t in ax.texts)
    assert not bars.time_axis(rows[:1])[0]
    style.pyplot().close(fig)


def test_the_idiomatic_chart_faceted_by_mechanism_with_a_legend_per_style(tmp_path: Path, monkeypatch) -> None:
    """One panel per mechanism: its driver solid, its idiomatic family dashed in the same colour, and
    every line in the panel's legend."""
    from rnnbench.report.charts import growth
    from rnnbench.suites import MECHANISMS

    figs = []
    monkeypatch.setattr(growth, "save_png", lambda fig, path: figs.append(fig) or path)
    records = [
        _planted(name, ms * T / 32, T=T, framework_family="torch")
        for T in (32, 64)
        for name, ms in (("torch_loop", 2.0), (f"idiomatic: {MECHANISMS[0].idiom}", 1.8), ("torch_scan", 9.0))
    ]
    growth.idiomatic_t_growth_chart(records, tmp_path / "x.png")
    (fig,) = figs
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["torch_loop", "torch_scan"]
    lines = {ln.get_label(): ln for ln in panels[0].get_lines() if not ln.get_label().startswith("_")}
    legend = {t.get_text() for t in panels[0].get_legend().get_texts()}
    assert set(lines) <= legend
    own, idiom = lines["torch_loop"], lines[f"idiomatic: {MECHANISMS[0].idiom}"]
    assert own.get_color() == idiom.get_color() and own.get_linestyle() == "-" and idiom.get_linestyle() == "--"
    style.pyplot().close(fig)


def test_every_drawn_chart_has_a_place_on_the_page() -> None:
    """A chart the page's SECTIONS do not name is shown under "Other charts", never dropped (the
    remat-price chart was drawn and left off the page before it had a section)."""
    from rnnbench.report.site import html as page

    charts = [Path(f"{prefix or 'new_kind_'}x.png") for prefix, _ in page.SECTIONS] + [Path("new_kind.png")]
    shown = page.chart_sections(charts)
    for chart in charts:
        assert f'src="{chart.name}"' in shown, chart
    assert shown.count("<img") == len(charts)
    assert 'id="other"' in shown and 'id="remat_price"' in shown
