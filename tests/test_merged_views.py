"""Merged views of results files from several machines: every row of the console table, every
failure report and known-issue line, every row of the HTML page and every chart series carries its
own record's machine and its own record's env label (a jax or flax row never gets the torch
version), whatever order the files are given in. Records are generated here (no driver runs)."""

from __future__ import annotations

import json
import random
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from rnnbench import results_file
from rnnbench.report.charts import heatmap
from rnnbench.report.charts import overview as charts
from rnnbench.report.site.html import write_report
from rnnbench.report.table import failure_reports, format_table

# Hostnames deliberately not in sorted order; files are later given in yet another order.
HOSTS = ("zulu-box", "alpha-box", "mike-box")
FAILING_HOST, KNOWN_HOST, BUDGET_HOST = "mike-box", "alpha-box", "zulu-box"
# driver -> (framework, family, environment_name, env_label, anchor)
DRIVERS = {
    "torch_loop": ("torch", "torch", "main", "torch 2.13.0", False),
    "torch_scan": ("torch", "torch", "main", "torch 2.13.0", False),
    "torch_nn_rnn": ("torch", "torch", "main", "torch 2.13.0", True),
    "jax_lax_scan": ("jax", "jax", "main", "jax 0.10.2", False),
    "flax_scan": ("flax", "jax", "main", "flax 0.12.8", False),
    "flax_simple_cell": ("flax", "jax", "main", "flax 0.12.8", True),
    "torch_xla_loop": ("torch_xla", "torch", "xla", "torch 2.9.0", False),
}
VERSIONS = {
    "torch": {"torch": "2.13.0+cpu", "numpy": "2.3.0"},
    "jax": {"jax": "0.10.2", "jaxlib": "0.10.2", "numpy": "2.3.0"},
    "flax": {"flax": "0.12.8", "jax": "0.10.2", "jaxlib": "0.10.2"},
    "torch_xla": {"torch": "2.9.0", "torch_xla": "2.9.0", "numpy": "1.26.4"},
}
LENGTHS = (4, 16)
GRAD_REPORT = "!! W_hh: rel err 0.5 at [1, 2] (got 0.1, want 0.2)"
KNOWN_REPORT = (
    "known upstream issue some-bug: inductor refuses it (upstream: not known)\nTraceback (most recent call last):"
)


def _err(host: str, driver: str, model: str) -> float:
    """A max relative error that names its record: "<host>.<driver>e-0<model>" in the table's
    .1e format, so a cell moved to another machine's row is seen."""
    return (1 + HOSTS.index(host) + 0.1 * list(DRIVERS).index(driver)) * 10.0 ** -(6 + ("rnn", "lstm").index(model))


def _rec(
    host: str,
    model: str,
    driver: str,
    status: str = "ok",
    T: int = 4,
    median: float = 1.0,
    sweep: bool = False,
    label: bool = True,
    **extra,
) -> dict:
    framework, family, env_name, env_label, anchor = DRIVERS[driver]
    if status in ("unavailable", "skipped"):  # decided without starting its environment: named by it
        env_label = env_name if env_name != "main" else env_label
    r = {
        "schema": 1,
        "model": model,
        "driver": driver,
        "framework": framework,
        "framework_family": family,
        "environment_name": env_name,
        "env_label": env_label,
        "anchor": anchor,
        "dtype": "float32",
        "device": "cpu",
        "sizes": {"T": T, "H": 8},
        "seed": 0,
        "loss_form": "model",
        "status": status,
        "timestamp": f"2026-11-2{HOSTS.index(host)}T10:00:00+0000",
        "tolerance": 1e-4,
        "max_rel_error": _err(host, driver, model),
        "machine": {"hostname": host, "cpu": f"cpu of {host}", "cores": 2 + HOSTS.index(host), "platform": "Linux"},
        "environment": {"python": "3.11.7", "versions": VERSIONS[framework], "threads": 1},
        **extra,
    }
    if not label:
        del r["env_label"]
    if status == "ok":
        r["fwd_bwd"] = {"median_ms": median, "q1_ms": 0.9 * median, "q3_ms": 1.1 * median, "repeats": 7}
        r["fwd"] = {"median_ms": median / 3, "q1_ms": 0.3 * median, "q3_ms": 0.4 * median, "repeats": 7}
        r["first_call_s"] = 0.5
    if sweep:
        peak = 40.0 + 10 * HOSTS.index(host)
        r["sweep"] = {"axis": "length"}
        r["gemm_peak"] = {"gflops": peak, "threads": 1, "method": "matmul", "by_size": {}}
        if status == "ok":
            r["roofline"] = {"fwd_bwd": {"gflops": 1000 / median, "fraction_of_peak": 1000 / median / peak}}
    return r


def machine_records(host: str) -> list[dict]:
    """One machine's file: a length sweep of rnn (every driver, medians that differ per machine and
    not by a common factor), then lstm rows of a run, in an order that is not the table's order.
    lstm/torch_scan fails on FAILING_HOST only; lstm/torch_loop is a known issue on KNOWN_HOST
    only; the jax_lax_scan lstm row of one machine lacks env_label (an older record); the xla
    environment's driver is unavailable for lstm everywhere and runs past its budget at the
    largest length on BUDGET_HOST (rows labelled "xla", by the environment they never started)."""
    rng = random.Random(host)
    out = [
        _rec(host, "lstm", "flax_scan"),
        _rec(host, "lstm", "jax_lax_scan", label=host != "zulu-box"),
        _rec(host, "lstm", "torch_xla_loop", "unavailable", reason="vendor layer computes rnn only"),
    ]
    if host == FAILING_HOST:
        out.append(_rec(host, "lstm", "torch_scan", "grad_mismatch", report=GRAD_REPORT))
    else:
        out.append(_rec(host, "lstm", "torch_scan"))
    if host == KNOWN_HOST:
        out.append(_rec(host, "lstm", "torch_loop", "known_issue:some-bug", report=KNOWN_REPORT))
    for T in reversed(LENGTHS):
        for driver in reversed(list(DRIVERS)):
            budget = host == BUDGET_HOST and driver == "torch_xla_loop" and T == max(LENGTHS)
            out.append(
                _rec(
                    host,
                    "rnn",
                    driver,
                    "skipped" if budget else "ok",
                    T=T,
                    sweep=True,
                    median=round(rng.uniform(1, 100), 2),
                    **({"reason": "budget: 4 s"} if budget else {}),
                )
            )
    return out


def write_files(tmp_path: Path, hosts: tuple[str, ...] = HOSTS) -> dict[str, Path]:
    paths = {}
    for host in hosts:
        paths[host] = tmp_path / f"{host}.jsonl"
        paths[host].write_text("".join(json.dumps(r) + "\n" for r in machine_records(host)))
    return paths


def expected_env(rec: dict) -> str:
    """The label a row's own record gives it (independent of the code under test)."""
    _, _, env_name, label, _ = DRIVERS[rec["driver"]]
    return env_name if env_name != "main" and rec["status"] in ("unavailable", "skipped") else label


def _identity(rec: dict) -> tuple:
    return (
        rec["machine"]["hostname"],
        rec["model"],
        rec["driver"],
        expected_env(rec),
        rec["sizes"]["T"],
        rec["status"],
        f"{rec['max_rel_error']:.1e}",
    )


@pytest.fixture
def merged(tmp_path: Path) -> list[dict]:
    paths = write_files(tmp_path)
    return results_file.load([paths["mike-box"], paths["zulu-box"], paths["alpha-box"]])


# ---------------------------------------------------------------- console table and failure reports


def table_lines(records: list[dict]) -> list[list[str]]:
    lines = format_table(records).splitlines()
    assert lines[0].split()[0] == "machine"
    return [re.split(r"\s{2,}", line) for line in lines[2:] if not line.startswith(tuple("0123456789"))]


def test_table_rows_carry_their_own_machine_and_env(merged: list[dict]) -> None:
    got = sorted(tuple(cells[:7]) for cells in table_lines(merged))
    want = sorted(
        (m, model, d, env, "float32", st, err)
        for m, model, d, env, _, st, err in map(_identity, merged)
        if st != "unavailable"
    )
    assert got == want
    assert not any(c[3].startswith("torch") and c[2].startswith(("jax", "flax")) for c in table_lines(merged))


def test_failure_reports_name_the_failing_rows_machine(merged: list[dict]) -> None:
    text = failure_reports(merged)
    headers = [line for line in text.splitlines() if line.startswith("== ")]
    assert headers == [
        f"== lstm / torch_scan / torch 2.13.0 / float32 @ {FAILING_HOST}: grad_mismatch",
        f"== rnn / torch_xla_loop / xla / float32 @ {BUDGET_HOST}: skipped",
    ]
    assert f"{headers[0]}\n{GRAD_REPORT}" in text
    known = [line for line in text.splitlines() if line.startswith("known upstream issue some-bug")]
    assert known == [
        f"known upstream issue some-bug: inductor refuses it (upstream: not known) -- 1 row(s): "
        f"lstm/torch_loop@{KNOWN_HOST} (details in the records file)"
    ]
    assert "Traceback" not in text


def test_one_machine_reports_are_unchanged(tmp_path: Path) -> None:
    records = results_file.load([write_files(tmp_path, (FAILING_HOST,))[FAILING_HOST]])
    text = failure_reports(records)
    assert text == f"== lstm / torch_scan / torch 2.13.0 / float32: grad_mismatch\n{GRAD_REPORT}"
    assert format_table(records).splitlines()[0].startswith("model ")
    records = results_file.load([write_files(tmp_path, (KNOWN_HOST,))[KNOWN_HOST]])
    assert failure_reports(records).endswith("-- 1 row(s): lstm/torch_loop (details in the records file)")


# ---------------------------------------------------------------- HTML page


class _Tables(HTMLParser):
    """Each <table id=...> of a page as a list of rows of cell texts (header row first)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.current: list[list[str]] | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.current = self.tables.setdefault(dict(attrs).get("id", f"t{len(self.tables)}"), [])
        elif tag == "tr" and self.current is not None:
            self.current.append([])
        elif tag in ("td", "th") and self.current is not None:
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.current[-1].append("".join(self.cell))
            self.cell = None
        elif tag == "table":
            self.current = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def page_tables(records: list[dict], out: Path) -> tuple[str, dict[str, list[dict[str, str]]]]:
    out.mkdir()
    page = write_report(records, out).read_text()
    parser = _Tables()
    parser.feed(page)
    return page, {name: [dict(zip(rows[0], row)) for row in rows[1:]] for name, rows in parser.tables.items()}


def test_html_rows_carry_their_own_machine_and_env(merged: list[dict], tmp_path: Path) -> None:
    page, tables = page_tables(merged, tmp_path / "report")
    rows = tables["rows"]
    assert len(rows) == len(merged)  # the same row from three machines is three rows
    got = sorted(
        (
            r["machine"],
            r["model"],
            r["driver"],
            r["env"],
            int(r["sizes"].split(",")[0][2:]),
            r["status"],
            r["max rel err"],
        )
        for r in rows
    )
    assert got == sorted(map(_identity, merged))
    by_key = {(r["machine"]["hostname"], r["model"], r["driver"], r["sizes"]["T"]): r for r in merged}
    for row in rows:  # the timing shown is the one measured on that row's machine
        rec = by_key[(row["machine"], row["model"], row["driver"], int(row["sizes"].split(",")[0][2:]))]
        if rec["status"] == "ok":
            assert row["fwd+bwd ms median [IQR] (n)"].startswith(f"{rec['fwd_bwd']['median_ms']:.3g} [")
    for host in HOSTS:  # provenance names every machine with its own CPU
        assert f"machine: {host} (cpu of {host}, {2 + HOSTS.index(host)} cores, Linux)" in page
        assert f"{host}: float32 GEMM peak: {40.0 + 10 * HOSTS.index(host):.1f} GFLOP/s" in page


def test_html_anchor_ratios_stay_on_one_machine(merged: list[dict], tmp_path: Path) -> None:
    _, tables = page_tables(merged, tmp_path / "report")
    ratios = tables["anchors"]
    by_key = {(r["machine"]["hostname"], r["driver"], r["sizes"]["T"]): r for r in merged if "sweep" in r}
    anchor_of = {"torch": "torch_nn_rnn", "jax": "flax_simple_cell"}
    assert len(ratios) == len(HOSTS) * len(LENGTHS) * sum(not a for *_, a in DRIVERS.values()) - 1  # one row skipped
    for row in ratios:
        T = int(row["sizes"].split(",")[0][2:])
        rec = by_key[(row["machine"], row["driver"], T)]
        anchor = anchor_of[rec["framework_family"]]
        assert row["env"] == expected_env(rec)
        assert row["anchor"] == f"{anchor} ({expected_env(by_key[(row['machine'], anchor, T)])})"
        want = by_key[(row["machine"], anchor, T)]["fwd_bwd"]["median_ms"] / rec["fwd_bwd"]["median_ms"]
        assert row["x faster than anchor"] == f"{want:.2f}"  # the one direction: anchor time / driver time


# ---------------------------------------------------------------- charts' data


def test_chart_series_hold_one_machine_and_env_each(merged: list[dict]) -> None:
    series = charts.axis_records(merged, "rnn", "length")
    assert set(series) == {charts.Series(d, DRIVERS[d][3], h) for d in DRIVERS for h in HOSTS}
    name = charts.series_namer(merged)
    for s, rows in series.items():
        assert [r["sizes"]["T"] for r in rows] == list(LENGTHS)
        assert all(name(r) == s and r["machine"]["hostname"] == s.machine and r["driver"] == s.driver for r in rows)
        assert all(r.get("env_label") in (s.env, DRIVERS[s.driver][2]) for r in rows)
        assert s.label == f"{s.driver} ({DRIVERS[s.driver][3]}) @ {s.machine}"
    # the row skipped before its environment started stays on its machine's line of that environment
    xla = series[charts.Series("torch_xla_loop", "torch 2.9.0", BUDGET_HOST)]
    assert [(r["status"], r["env_label"]) for r in xla] == [("ok", "torch 2.9.0"), ("skipped", "xla")]


def test_speedups_are_over_the_same_machines_loop(merged: list[dict]) -> None:
    baselines, ratios = charts.speedups(merged, "rnn")
    assert baselines == {h: charts.Series("torch_loop", "torch 2.13.0", h) for h in HOSTS}
    median = {
        (r["machine"]["hostname"], r["driver"], r["sizes"]["T"]): r["fwd_bwd"]["median_ms"]
        for r in merged
        if "sweep" in r and r["status"] == "ok"
    }
    assert set(ratios) == {charts.Series(d, DRIVERS[d][3], h) for d in DRIVERS if d != "torch_loop" for h in HOSTS}
    for s, by_length in ratios.items():
        for T in LENGTHS:
            if (s.machine, s.driver, T) in median:
                assert by_length[T] == pytest.approx(
                    median[(s.machine, "torch_loop", T)] / median[(s.machine, s.driver, T)]
                )
            else:
                assert (s, T, by_length[T]) == (
                    charts.Series("torch_xla_loop", "torch 2.9.0", BUDGET_HOST),
                    16,
                    "skipped",
                )


def test_heatmap_fails_only_the_failing_machines_cell(merged: list[dict]) -> None:
    cells = heatmap.heatmap_cells(merged)
    assert set(cells.series) == {charts.Series(d, DRIVERS[d][3], h) for d in DRIVERS for h in HOSTS}
    name = charts.series_namer(merged)
    j = cells.models.index("lstm")
    for i, s in enumerate(cells.series):
        text = cells.label.get((i, j))
        if s.driver == "torch_scan":
            assert text == ("grad_mismatch" if s.machine == FAILING_HOST else "ok"), s
        if s.driver == "torch_loop":
            assert text == ("known_issue:some-bug" if s.machine == KNOWN_HOST else None), s
        if s.driver == "torch_xla_loop":
            assert text == "n/a" and cells.label[(i, cells.models.index("rnn"))] == "ok", s
        assert s.env == DRIVERS[s.driver][3]
        rows = [r for r in merged if name(r) == s and r["model"] == "lstm"]
        if text == "ok":
            assert cells.err[i, j] == max(r["max_rel_error"] for r in rows)


def test_report_draws_every_chart(merged: list[dict], tmp_path: Path) -> None:
    page, _ = page_tables(merged, tmp_path / "report")
    pngs = {p.name for p in (tmp_path / "report").glob("*.png")}
    assert {"length_rnn.png", "speedup_rnn.png", "roofline.png", "grad_error_heatmap.png"} <= pngs
    assert all(name in page for name in pngs)


# ---------------------------------------------------------------- file order, duplicates, old records


def _attribution(records: list[dict], out: Path) -> tuple:
    _, tables = page_tables(records, out)
    return (
        sorted(tuple(c) for c in table_lines(records)),
        sorted(failure_reports(records).split("\n\n")),
        sorted(tuple(sorted(r.items())) for r in tables["rows"]),
        sorted(tuple(sorted(r.items())) for r in tables["anchors"]),
        {
            s: [
                (r["machine"]["hostname"], r["sizes"]["T"], r["status"], (r.get("fwd_bwd") or {}).get("median_ms"))
                for r in rows
            ]
            for s, rows in charts.axis_records(records, "rnn", "length").items()
        },
        charts.speedups(records, "rnn"),
    )


def test_file_order_does_not_change_attribution(tmp_path: Path) -> None:
    paths = write_files(tmp_path)
    order = [paths[h] for h in ("mike-box", "zulu-box", "alpha-box")]
    forward = _attribution(results_file.load(order), tmp_path / "a")
    backward = _attribution(results_file.load(order[::-1]), tmp_path / "b")
    assert forward == backward


def test_same_run_given_twice_keeps_both_and_marks_nothing(tmp_path: Path) -> None:
    path = write_files(tmp_path, ("zulu-box",))["zulu-box"]
    once, twice = results_file.load([path]), results_file.load([path, path])
    lines = format_table(twice).splitlines()
    assert not lines[0].startswith("machine") and "@" not in failure_reports(twice)
    row_lines = lambda lines: [line for line in lines[2:] if not line[0].isdigit()]
    assert sorted(row_lines(format_table(once).splitlines()) * 2) == sorted(row_lines(lines))
    assert "2 rows unavailable: vendor layer computes rnn only (drivers: torch_xla_loop)" in lines
    page, tables = page_tables(twice, tmp_path / "report")
    assert len(tables["rows"]) == len(once)  # the page shows a row run twice once, by its latest record
    assert set(charts.axis_records(twice, "rnn", "length")) == {charts.Series(d, DRIVERS[d][3]) for d in DRIVERS}


def test_record_without_env_label_is_named_by_its_own_framework(merged: list[dict]) -> None:
    old = [r for r in merged if "env_label" not in r]
    assert old and all(r["driver"] == "jax_lax_scan" for r in old)
    line = next(c for c in table_lines(merged) if c[0] == "zulu-box" and c[2] == "jax_lax_scan" and c[1] == "lstm")
    assert line[3] == "jax 0.10.2"
    assert charts.series_namer(merged)(old[0]) == charts.Series("jax_lax_scan", "jax 0.10.2", "zulu-box")
