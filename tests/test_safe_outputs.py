"""What rnnbench writes is safe to open, and what it deletes is its own (docs/security.md).

Records whose every string field holds hostile markup (`<img onerror>`, `<script>`, `|`, line
breaks, a spreadsheet formula) are rendered by `rnnbench report` and into a site, and loaded in
headless Chromium: no script ran (the payloads would set document.title or an attribute of the
page's root) and the payloads show as text. Markdown tables keep their columns and csv cells are
no formulas. `make site` replaces only a folder it made, and only once the new site is whole."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from rnnbench.report import escape
from rnnbench.report.site import build as site_mod
from rnnbench.report.table import format_as
from test_html_offline import _need_chromium, offline_html, report

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
SCRIPT = "<script>document.title='pwned'</script>"
IMG = "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','1')\">"
FORMULA = "=cmd|' /C calc'!A0"
MATH = "$\\nosuchcmd{$ $^^$"  # not mathtext to a chart: drawn as written
ATTACK = f"{IMG}{SCRIPT} | ok | {FORMULA}\n@SUM(1) {MATH}"
# model and driver names name chart files: no '/' (record_fields refuses one), the rest as hostile
NAME = f"<img src=x onerror=\"document.title='pwned'\"> | ok |\n=cmd|' -C calc'!A0 {MATH}"


def hostile(value, path: str = ""):
    """`value` with every string leaf replaced by a payload ending in its own dotted path; NaN as
    null (a record may not hold one)."""
    if isinstance(value, dict):
        return {k: hostile(v, f"{path}.{k}" if path else k) for k, v in value.items()}
    if isinstance(value, list):
        return [hostile(v, path) for v in value]
    if isinstance(value, str):
        return f"{NAME if path in ('model', 'driver') else ATTACK} {path}"
    return None if isinstance(value, float) and value != value else value


def _rows(name: str, keep=lambda r: True) -> list[dict]:
    lines = (RESULTS / name).read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip() and keep(json.loads(line))]


def hostile_records() -> list[dict]:
    """The rnn and lstm rows of a real run (timed, failing and unavailable rows), every string hostile."""
    return [hostile(r) for r in _rows("2026-11-25-default-run.jsonl", lambda r: r["model"] in ("rnn", "lstm"))]


def hostile_versions() -> list[dict]:
    """Real `rnnbench versions` rows of one model whose torch 2.11.0 is a hostile version string:
    the bug x version table gets a column named by it."""
    rows = _rows("2026-11-25-bug-versions.jsonl", lambda r: r["model"] == "decay")
    for r in rows:
        versions = (r.get("environment") or {}).get("versions") or {}
        if versions.get("torch") == "2.11.0":
            versions["torch"] = f"2.11.0 {IMG} | ok | {SCRIPT}\n{FORMULA}"
    return rows


def _write(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


# ---------------------------------------------------------------------------------------------
# the escaping functions


def test_one_escaping_path() -> None:
    """No module but report/escape.py escapes HTML or renders markdown itself."""
    others = [
        p.relative_to(ROOT)
        for p in (ROOT / "src" / "rnnbench").rglob("*.py")
        if p.name != "escape.py" and re.search(r"html\.escape\(|MarkdownIt\(|^import html$", p.read_text(), re.M)
    ]
    assert others == []


def test_html_text_and_href() -> None:
    assert escape.text("<a href='x'>\"&") == "&lt;a href=&#x27;x&#x27;&gt;&quot;&amp;"
    assert escape.href("javascript:alert(1)") == "javascript%3Aalert%281%29"
    assert escape.href("bars_a b#c?d.png") == "bars_a%20b%23c%3Fd.png"
    assert escape.href("bars_decay@carry0_grad.png") == "bars_decay@carry0_grad.png"  # names as they were


def test_markdown_raw_html_off() -> None:
    page = escape.markdown(f"{IMG}\n\n[x](javascript:alert(1)) [y](page.html) ![z](z.png)")
    assert "<img src=x" not in page and "&lt;img src=x onerror=" in page
    assert 'href="javascript' not in page and '<a href="page.html">y</a>' in page and '<img src="z.png"' in page
    from_records = escape.markdown("[y](page.html) ![z](http://example.invalid/z.png) <http://example.invalid>", False)
    assert "<a" not in from_records and "<img" not in from_records


def _md_table(markdown: str) -> list[list[str]]:
    """The cells of the first table in `markdown` as markdown-it renders it, row by row."""
    page = escape.markdown(markdown)
    table = page.split("<table>", 1)[1].split("</table>", 1)[0]
    return [
        [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)
    ]


@pytest.mark.parametrize("cell", ["a|b", "a\\|b", "a\\", "x\ny|z", "|", "\r\n|ok|\r"])
def test_a_markdown_cell_holds_its_text_on_one_line(cell: str) -> None:
    md = escape.md_cell(cell)
    assert "\n" not in md and "\r" not in md
    rows = _md_table(f"| h | status |\n|---|---|\n| {md} | grad_mismatch |\n")
    assert rows[1][1] == "grad_mismatch" and len(rows[1]) == 2
    assert rows[1][0].strip() == re.sub(r"\r\n|\r|\n", " ", cell).strip().replace("&", "&amp;")


def _mismatch_rows() -> list[dict]:
    rec = next(r for r in _rows("2026-11-25-default-run.jsonl") if r["model"] == "rnn" and r["status"] == "ok")
    bad = dict(rec, status="grad_mismatch", driver="x | ok | ok", env_label="torch\n| ok |", model=f"{FORMULA} -0.5")
    return [rec, bad]


def test_markdown_table_a_pipe_does_not_shift_the_status_column() -> None:
    rows = _md_table(format_as(_mismatch_rows(), "markdown"))
    status = rows[0].index("status")
    assert all(len(r) == len(rows[0]) for r in rows)
    assert [r[status] for r in rows[1:]] == ["ok", "grad_mismatch"]
    assert [r[rows[0].index("driver")] for r in rows[1:]] == ["flax_scan", "x | ok | ok"]


def test_compare_markdown_a_pipe_does_not_shift_the_verdict() -> None:
    from rnnbench.report.compare.format import as_markdown
    from rnnbench.report.compare.pairs import compare

    ok, bad = _mismatch_rows()
    base = [dict(ok, driver=bad["driver"], env_label=bad["env_label"], model=bad["model"])]
    rows = _md_table(as_markdown(compare(base, [bad], threshold=0.05, alpha=0.05)))
    assert all(len(r) == len(rows[0]) for r in rows) and len(rows) == 2
    assert rows[1][rows[0].index("status")] == "ok -&gt; grad_mismatch"


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"),
        ("+1+1", "'+1+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\\t=1"),  # the csv is printed: a tab or CR shows as its escape (escape.terminal)
        ("\r=1", "'\\r=1"),
        ("-0.5", "-0.5"),
        ("+3", "+3"),
        ("-1e-07", "-1e-07"),
        ("-", "-"),
        ("1.2 [1.1-1.3]", "1.2 [1.1-1.3]"),
        ("torch_loop", "torch_loop"),
        ("", ""),
    ],
)
def test_a_csv_cell_is_never_a_formula(cell: str, written: str) -> None:
    assert escape.csv_cell(cell) == written


def test_csv_table_neutralises_formulas_and_keeps_numbers() -> None:
    rows = list(csv.reader(io.StringIO(format_as(_mismatch_rows(), "csv"))))
    assert rows[2][rows[0].index("model")] == f"'{FORMULA} -0.5"
    assert rows[2][rows[0].index("status")] == "grad_mismatch"
    assert not any(c[:1] in "=+@" for row in rows for c in row if c)
    assert float(rows[1][rows[0].index("max rel err")]) == _mismatch_rows()[0]["max_rel_error"]  # the number, whole


# ---------------------------------------------------------------------------------------------
# hostile records in a real browser


def _inert(directory: Path, page: str, title: str, payloads: list[str]) -> str:
    """Load `page` in headless Chromium: no payload ran (the title is `title`, the root element has
    no data-pwned, no element of a payload exists) and each of `payloads` shows as text."""
    dom = offline_html.render(directory, page).dom
    assert re.search(r"<title>(.*?)</title>", dom, re.S).group(1) == title, page
    assert not re.search(r"<html[^>]*data-pwned", dom), page
    assert '<img src="x"' not in dom and "<script>document" not in dom, page
    for text in payloads:
        assert escape.text(text).replace("&#x27;", "'").replace("&quot;", '"') in dom, (page, text)
    return dom


def test_report_from_hostile_records_runs_no_script(tmp_path: Path) -> None:
    _need_chromium()
    records = _write(tmp_path / "hostile.jsonl", hostile_records())
    out = report(records, tmp_path / "report")
    dom = _inert(out, "index.html", "rnnbench report", [f"{IMG}{SCRIPT} | ok | {FORMULA}", 'onerror="document.title='])
    named = "&lt;img src=x onerror=\"document.title='pwned'\"&gt;"
    assert f"bars_{named}" in dom  # a chart named by the model


def test_site_from_hostile_records_runs_no_script(tmp_path: Path) -> None:
    """A site whose reports hold hostile records (a committed set, a bug x version set with a
    hostile version, the newest local run), and a docs/results page with raw HTML."""
    _need_chromium()
    root = tmp_path / "repo"
    _write(root / "docs" / "results" / "hostile.jsonl", hostile_records())
    _write(root / "docs" / "results" / "versions.jsonl", hostile_versions())
    _write(tmp_path / "results" / f"run-{IMG}.jsonl", hostile_records())
    (root / "docs" / "results" / "page.md").write_text(
        f'# A page\n\n{IMG}\n\n<a id="kept"></a>\n\n[js](javascript:alert(1)) [data](hostile.jsonl)\n'
    )
    (root / "docs" / "site.toml").write_text(
        '[[report]]\nname = "hostile"\ntitle = "hostile"\nrecords = ["docs/results/hostile.jsonl"]\n'
        'page = "docs/results/page.md"\n'
        '[[report]]\nname = "versions"\ntitle = "versions"\nrecords = ["docs/results/versions.jsonl"]\n'
    )
    out = tmp_path / "site"
    site_mod.build(root / "docs" / "site.toml", out, local=tmp_path / "results")
    assert site_mod.broken_links(out) == []
    _inert(out, "index.html", "rnnbench results", [f"run-{IMG}.jsonl"])
    for name in ("hostile", "local-run"):
        _inert(out, f"reports/{name}/index.html", "rnnbench report", [f"{IMG}{SCRIPT} | ok | {FORMULA}"])
    dom = _inert(out, "reports/versions/index.html", "rnnbench report", [f"2.11.0 {IMG} | ok | {SCRIPT}"])
    table = dom.split('<table id="versions-table">', 1)[1].split("</table>", 1)[0]
    widths = {len(re.findall(r"<t[hd][ >]", row)) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)}
    assert len(widths) == 1, widths  # the hostile version's `|` made no column
    page = _inert(out, "results/page.html", "page", [IMG])
    assert '<a id="kept"></a>' in page and "javascript:" not in page.split("[js]")[0].rsplit("<a", 1)[-1]


# ---------------------------------------------------------------------------------------------
# the site folder: only one rnnbench made, replaced whole


def _manifest(tmp_path: Path) -> Path:
    """A manifest of no report (the build is quick: an index and the asv placeholder)."""
    manifest = tmp_path / "repo" / "docs" / "site.toml"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("# no reports\n")
    return manifest


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_folder_rnnbench_did_not_make_is_refused_untouched(tmp_path: Path, capsys) -> None:
    manifest = _manifest(tmp_path)
    docs = tmp_path / "docs"
    (docs / "notes").mkdir(parents=True)
    (docs / "index.md").write_text("tracked\n")
    (docs / "notes" / "draft.txt").write_text("uncommitted\n")
    before = _tree(docs)
    assert site_mod.main([str(manifest), str(docs), "--local", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rnnbench: error: ") and site_mod.MARKER in err
    assert _tree(docs) == before and sorted(p.name for p in tmp_path.iterdir()) == ["docs", "repo"]
    (tmp_path / "file").write_text("x")
    assert site_mod.main([str(manifest), str(tmp_path / "file")]) == 2
    assert (tmp_path / "file").read_text() == "x"


def test_the_site_folder_carries_the_marker_and_is_replaced(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    out = tmp_path / "site"
    out.mkdir()  # an empty folder may be taken
    site_mod.build(manifest, out)
    assert (out / site_mod.MARKER).is_file() and (out / "index.html").is_file()
    (out / "stale.html").write_text("from an older build")
    site_mod.build(manifest, out)
    assert not (out / "stale.html").exists() and (out / site_mod.MARKER).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo", "site"]  # nothing left beside it


def test_a_build_that_fails_leaves_the_old_site(tmp_path: Path, monkeypatch) -> None:
    manifest = _manifest(tmp_path)
    out = tmp_path / "site"
    site_mod.build(manifest, out)
    before = _tree(out)

    def half_then_fail(manifest: Path, into: Path, *args) -> None:
        (into / "index.html").write_text("half a site")
        raise RuntimeError("disk full")

    monkeypatch.setattr(site_mod, "_build_into", half_then_fail)
    with pytest.raises(RuntimeError, match="disk full"):
        site_mod.build(manifest, out)
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo", "site"]


def test_leftovers_of_a_killed_build_are_removed_only_when_marked(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    killed = tmp_path / ".site.rnnbench-new-1"
    killed.mkdir()
    (killed / site_mod.MARKER).write_text("")
    foreign = tmp_path / ".site.rnnbench-mine"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("not rnnbench's")
    site_mod.build(manifest, tmp_path / "site")
    assert not killed.exists() and (foreign / "keep.txt").read_text() == "not rnnbench's"
