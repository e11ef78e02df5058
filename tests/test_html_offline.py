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
NO_CHROMIUM = ("no Chromium installed (looked for " + ", ".join(offline_html.CHROMIUM_NAMES)
               + "): `apt-get install chromium` to run the offline browser checks")


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
    proc = subprocess.run([sys.executable, "-m", "asv", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"asv {' '.join(args)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


DEMO_BENCH = '''
class OfflineDemo:
    params = [["small", "large"]]
    param_names = ["size"]

    def time_offline_demo_sum(self, size):
        sum(range(100 if size == "small" else 10000))


def track_offline_demo_value():
    return 42.0
'''


@pytest.fixture(scope="module")
def asv_site(tmp_path_factory) -> Path:
    """A real `asv run` + `asv publish` of a two-benchmark suite (the interpreter running pytest as
    asv's existing environment, so nothing is built): asv's own page, not a hand-made one."""
    _need_chromium()  # module scope is set up before the function-scoped chromium fixture
    proj = tmp_path_factory.mktemp("asvproj")
    (proj / "benchmarks").mkdir()
    (proj / "benchmarks" / "__init__.py").write_text("")
    (proj / "benchmarks" / "bench_offline_demo.py").write_text(DEMO_BENCH)
    (proj / "asv.conf.json").write_text(json.dumps({
        "version": 1, "project": "offline-demo", "project_url": "http://127.0.0.1/", "repo": ".",
        "branches": ["HEAD"], "dvcs": "git", "environment_type": "existing", "benchmark_dir": "benchmarks", "results_dir": "results",
        "html_dir": "html", "env_dir": "env"}))
    git = ["git", "-c", "user.email=t@localhost", "-c", "user.name=t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=proj, check=True)
    subprocess.run(["git", "add", "."], cwd=proj, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "demo"], cwd=proj, check=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=proj, check=True, capture_output=True,
                         text=True).stdout.strip()
    _asv("machine", "--yes", "--machine", "offline-test", cwd=proj, home=proj)
    _asv("run", "--quick", "--machine", "offline-test", "--environment", f"existing:{sys.executable}",
         "--set-commit-hash", sha, cwd=proj, home=proj)
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
    rows = [line for line in src.read_text().splitlines()
            if line.strip() and json.loads(line).get("model") in ("rnn", "lstm")]
    assert rows
    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(rows) + "\n")
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "rnnbench.cli", "report", str(records), "--out-dir", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert offline_html.external_tags((out / "index.html").read_text()) == []
    shown = offline_html.check(out, ["rnnbench report", "<table id=\"rows\">", "torch_loop", "jax_lax_scan"])
    pngs = {p.name for p in out.glob("*.png")}
    assert pngs and all(any(u.endswith("/" + name) for u in shown.page_requests) for name in pngs)
