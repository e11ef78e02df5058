"""Both HTML outputs render with no network: `asv publish` + the post-publish vendoring step
(benchmarks/offline_html.py), and rnnbench's own report (`rnnbench report --out-dir`).

The browser tests serve the directory on 127.0.0.1, load it in headless Chromium whose host
resolver maps every name but 127.0.0.1 to NOTFOUND, and assert on the DOM after the page's scripts
ran and on every request in Chromium's network log. They skip, saying so, where no Chromium is
installed (`apt-get install chromium`); `make check-html` sets RNNBENCH_REQUIRE_CHROMIUM=1, which
turns that skip into a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("offline_html", ROOT / "benchmarks" / "offline_html.py")
offline_html = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("offline_html", offline_html)  # dataclasses look their module up there
_spec.loader.exec_module(offline_html)

CHROMIUM = offline_html.find_chromium()
REQUIRE = bool(os.environ.get("RNNBENCH_REQUIRE_CHROMIUM"))
NO_CHROMIUM = (
    "no Chromium installed (looked for "
    + ", ".join(offline_html.CHROMIUM_NAMES)
    + "): `apt-get install chromium` to run the offline browser checks"
)


def report(records: Path, out: Path) -> Path:
    """`rnnbench report RECORDS --out-dir OUT` in a fresh process, which must succeed; returns OUT."""
    proc = subprocess.run(
        [sys.executable, "-m", "rnnbench.cli", "report", str(records), "--out-dir", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def _need_chromium() -> str:
    if CHROMIUM is None:
        if REQUIRE:
            pytest.fail(NO_CHROMIUM)
        pytest.skip(NO_CHROMIUM)
    return CHROMIUM


@pytest.fixture
def chromium() -> str:
    return _need_chromium()


def asv_template() -> str:
    import asv

    return (Path(asv.__file__).parent / "www" / "index.html").read_text()


def test_every_cdn_tag_of_asvs_page_is_vendored() -> None:
    """The installed asv's page loads scripts from CDNs; the rewrite leaves none, keeps asv's
    load-failure handler, and every vendored file is the one recorded."""
    page = asv_template()
    assert offline_html.external_tags(page), "asv's page no longer uses a CDN: this step may be unneeded"
    rewritten = offline_html.rewrite(page)
    assert offline_html.external_tags(rewritten) == []
    assert rewritten.count('src="vendor/') == 9 and 'href="vendor/bootstrap-3.1.1.min.css"' in rewritten
    assert 'onerror="js_load_failure()"' in rewritten and "integrity=" not in rewritten
    assert offline_html.rewrite(rewritten) == rewritten  # idempotent
    for name, digest in offline_html.VENDORED.values():
        assert offline_html._sha256(offline_html.VENDOR_DIR / name) == digest, name


def test_an_unknown_external_script_is_refused() -> None:
    page = '<script src="https://cdn.example.invalid/new-lib.js"></script><a href="https://x.invalid/">ok</a>'
    with pytest.raises(offline_html.OfflineHtmlError, match="no vendored copy"):
        offline_html.rewrite(page)
    assert offline_html.external_tags('<a href="https://x.invalid/">a link is not a fetch</a>') == []


def _asv(*args: str, cwd: Path, home: Path) -> None:
    env = {**os.environ, "HOME": str(home)}  # asv keeps its machine file in $HOME
    proc = subprocess.run(
        [sys.executable, "-m", "asv", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f"asv {' '.join(args)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


DEMO_BENCH = """
class OfflineDemo:
    params = [["small", "large"]]
    param_names = ["size"]

    def time_offline_demo_sum(self, size):
        sum(range(100 if size == "small" else 10000))


def track_offline_demo_value():
    return 42.0
"""


@pytest.fixture(scope="module")
def asv_site(tmp_path_factory) -> Path:
    """A real `asv run` + `asv publish` of a two-benchmark suite (the interpreter running pytest as
    asv's existing environment, so nothing is built): asv's own page, not a hand-made one."""
    _need_chromium()  # module scope is set up before the function-scoped chromium fixture
    proj = tmp_path_factory.mktemp("asvproj")
    (proj / "benchmarks").mkdir()
    (proj / "benchmarks" / "__init__.py").write_text("")
    (proj / "benchmarks" / "bench_offline_demo.py").write_text(DEMO_BENCH)
    (proj / "asv.conf.json").write_text(
        json.dumps(
            {
                "version": 1,
                "project": "offline-demo",
                "project_url": "http://127.0.0.1/",
                "repo": ".",
                "branches": ["HEAD"],
                "dvcs": "git",
                "environment_type": "existing",
                "benchmark_dir": "benchmarks",
                "results_dir": "results",
                "html_dir": "html",
                "env_dir": "env",
            }
        )
    )
    git = ["git", "-c", "user.email=t@localhost", "-c", "user.name=t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=proj, check=True)
    subprocess.run(["git", "add", "."], cwd=proj, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "demo"], cwd=proj, check=True)
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=proj, check=True, capture_output=True, text=True
    ).stdout.strip()
    _asv("machine", "--yes", "--machine", "offline-test", cwd=proj, home=proj)
    _asv(
        "run",
        "--quick",
        "--machine",
        "offline-test",
        "--environment",
        f"existing:{sys.executable}",
        "--set-commit-hash",
        sha,
        cwd=proj,
        home=proj,
    )
    _asv("publish", cwd=proj, home=proj)
    return proj / "html"


def test_asv_page_renders_offline_after_vendoring(chromium: str, asv_site: Path) -> None:
    """Control first: as asv publishes it, the page asks CDN hosts for its scripts and, with no
    network, never lists the benchmarks. After the post-publish step every request goes to
    127.0.0.1 and the scripts ran: the benchmark list is in the DOM."""
    before = offline_html.render(asv_site, chromium=chromium)
    assert any("cdn" in u or "jquery.com" in u for u in before.non_local()), before.page_requests
    assert "time_offline_demo_sum" not in before.dom

    offline_html.vendor(asv_site)
    shown = offline_html.check(asv_site, ["time_offline_demo_sum", "track_offline_demo_value"])
    assert shown.non_local() == [] and any(u.endswith("vendor/jquery-3.3.1.min.js") for u in shown.page_requests)
    assert any(urlsplit(u).path == "/index.json" for u in shown.page_requests)  # the page's script fetched its data


def test_rnnbench_report_renders_offline(tmp_path: Path, chromium: str) -> None:
    """rnnbench's report (real records: the 2026-11-25 default run, rnn and lstm rows) is one
    self-contained page: its tables and charts come from 127.0.0.1 only."""
    src = ROOT / "docs" / "results" / "2026-11-25-default-run.jsonl"
    rows = [
        line
        for line in src.read_text().splitlines()
        if line.strip() and json.loads(line).get("model") in ("rnn", "lstm")
    ]
    assert rows
    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(rows) + "\n")
    out = report(records, tmp_path / "report")
    assert offline_html.external_tags((out / "index.html").read_text()) == []
    shown = offline_html.check(out, ["rnnbench report", '<table id="rows">', "torch_loop", "jax_lax_scan"])
    pngs = {p.name for p in out.glob("*.png")}
    assert pngs and all(any(u.endswith("/" + name) for u in shown.page_requests) for name in pngs)


# ---------------------------------------------------------------------------------------------
# the site (`make site`, rnnbench.report.site.build): one folder, every link inside it, rendered offline

RENDER_PROBE = """<!doctype html><html><head><meta charset="utf-8"></head><body><pre id="out">pending</pre><script>
const pages = %s, results = {};
let left = pages.length;
for (const page of pages) {
  const frame = document.createElement("iframe");
  frame.style.width = "1400px"; frame.style.height = "900px";
  frame.onload = () => {
    const d = frame.contentDocument;
    results[page] = {title: d.title,
      images: [...d.images].map(i => [i.getAttribute("src"), i.complete && i.naturalWidth > 0 ? i.naturalWidth : 0]),
      tables: [...d.querySelectorAll("table")].map(t => [t.id, t.rows.length]),
      headings: [...d.querySelectorAll("h1, h2")].map(h => h.textContent),
      width: d.documentElement.scrollWidth};
    if (--left === 0) document.getElementById("out").textContent = JSON.stringify(results);
  };
  frame.src = page;
  document.body.appendChild(frame);
}
</script></body></html>
"""


def _rendered(site: Path, pages: list[str]) -> dict:
    """What Chromium drew of each page (loaded in iframes of a probe page served with the site):
    its images with their decoded width (0: not drawn), its tables' row counts, its headings."""
    import html as html_lib

    (site / "render-probe.html").write_text(RENDER_PROBE % json.dumps(pages))
    shown = offline_html.check(site, ['<pre id="out">{'], page="render-probe.html")
    text = shown.dom.split('<pre id="out">', 1)[1].split("</pre>", 1)[0]
    return json.loads(html_lib.unescape(text))


@pytest.fixture(scope="module")
def site(tmp_path_factory, asv_site: Path) -> Path:
    """`make site`'s build from the committed records, with a real (demo) asv page vendored as
    `make asv-publish` leaves it."""
    from rnnbench.report.site import build as site_mod

    offline_html.vendor(asv_site)
    out = tmp_path_factory.mktemp("site") / "site"
    site_mod.build(ROOT / "docs" / "site.toml", out, asv_html=asv_site, local=None)
    return out


def test_site_links_all_resolve_inside_it(site: Path) -> None:
    from rnnbench.report.site import build as site_mod

    assert site_mod.broken_links(site) == []
    (site / "reports" / "gone.html").write_text('<a href="nowhere/index.html">x</a><img src="missing.png">')
    assert site_mod.broken_links(site) == ["reports/gone.html: nowhere/index.html", "reports/gone.html: missing.png"]
    (site / "reports" / "gone.html").unlink()


def test_site_renders_offline_charts_drawn_tables_filled(chromium: str, site: Path, tmp_path: Path) -> None:
    """Every report page of the site, loaded offline: each chart image decoded (non-zero width),
    the vendor and all-rows tables hold rows, the bug x version page its table; the index links
    each report; the asv page's script listed its benchmarks. Screenshots of the index and the
    first report are not blank (many colours, mostly not white) and are kept in
    RNNBENCH_SCREENSHOTS when that is set."""
    from rnnbench.report.site import build as site_mod

    reports = [f"reports/{r.name}/index.html" for r in site_mod.load(ROOT / "docs" / "site.toml")]
    drawn = _rendered(site, ["index.html", *reports])
    index = drawn["index.html"]
    assert index["headings"][:2] == ["rnnbench results", "Reports"]
    for page in reports:
        got = drawn[page]
        pngs = sorted(p.name for p in (site / page).parent.glob("*.png"))
        assert pngs and sorted(src for src, _ in got["images"]) == pngs, page
        assert all(width > 0 for _, width in got["images"]), (page, got["images"])
        tables = dict(got["tables"])
        assert tables["rows"] > 1, page
        assert got["width"] <= 1400 + 50 or page.endswith("bug-versions/index.html"), (page, got["width"])
    assert dict(drawn["reports/bug-versions/index.html"]["tables"])["versions-table"] > 5
    assert dict(drawn["reports/cpu-realistic/index.html"]["tables"])["anchors"] > 1
    offline_html.check(site, ["time_offline_demo_sum"], page="asv/index.html")

    from PIL import Image

    keep = Path(os.environ.get("RNNBENCH_SCREENSHOTS") or tmp_path)
    keep.mkdir(parents=True, exist_ok=True)
    for page, name in (("index.html", "site-index.png"), (reports[0], "site-report.png")):
        png = offline_html.screenshot(site, page, keep / name)
        image = Image.open(png).convert("RGB")
        small = image.resize((image.width // 4, image.height // 4))
        pixels = [tuple(p) for p in __import__("numpy").asarray(small).reshape(-1, 3).tolist()]
        assert len(set(pixels)) > 50, f"{name}: a page of few colours (blank?)"
        assert sum(p != (255, 255, 255) for p in pixels) / len(pixels) > 0.02, f"{name}: almost all white"
