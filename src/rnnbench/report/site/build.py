"""The published site, built into one folder that needs no network: a results index, one report
page per records set listed in docs/site.toml (and the newest local run, if any), the result
pages of docs/results rendered to HTML with the files they link to, and the asv history page.

    python -m rnnbench.report.site docs/site.toml site/ [--asv-html .asv/html] [--local results]

Every link in the folder resolves inside it (broken_links(), checked after building: a page of
docs/results that links outside docs/results gets that link as plain text with its repository
path); links to other sites are navigation only, never fetched by a page. Without --asv-html the
asv page says how to record the history instead. The folder is rnnbench's own (an owned folder of
kind SITE_KIND, its MARKER: rnnbench.processes.owned): any other non-empty folder is refused, and a
new site replaces the old by a rename once it is whole.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from rnnbench import results_file
from rnnbench.errors import InputError
from rnnbench.processes import owned
from rnnbench.report import escape
from rnnbench.report.site.html import write_report

STYLE = """body { font-family: sans-serif; margin: 1.5em; max-width: 70em; }
table { border-collapse: collapse; font-size: 13px; } td, th { border: 1px solid #ccc; padding: 2px 6px; }
img { max-width: 100%; } code, pre { background: #f4f4f4; } pre { padding: .5em; overflow-x: auto; }
li { margin: .3em 0; } .dim { color: #666; }"""


@dataclass(frozen=True)
class Report:
    name: str  # folder under reports/
    title: str
    records: tuple[str, ...]  # repository-relative JSONL files
    page: str = ""  # the docs/results page that describes them


def load(manifest: Path) -> list[Report]:
    doc = tomllib.loads(manifest.read_text())
    return [Report(e["name"], e["title"], tuple(e["records"]), e.get("page", "")) for e in doc.get("report", [])]


def _page(title: str, body: str, up: str = "") -> str:
    back = f'<p><a href="{escape.text(up)}index.html">&larr; results index</a></p>' if up else ""
    return (
        f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{escape.text(title)}</title>'
        f"<style>{STYLE}</style></head><body>{back}\n{body}\n</body></html>\n"
    )


# The one raw tag a docs/results page keeps with raw HTML off: an anchor others link to (`<a id="asv"></a>`).
_ANCHOR = re.compile(r"&lt;a id=&quot;([\w-]+)&quot;&gt;&lt;/a&gt;")
_LINK = re.compile(r'<a href="([^"]*)">(.*?)</a>', re.DOTALL)
_IMG = re.compile(r'<img src="([^"]*)"')


def _listing(folder: Path) -> None:
    """folder/index.html: a list of the files in `folder` (a linked folder of measurements)."""
    files = sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file())
    items = "".join(f'<li><a href="{escape.href(f)}">{escape.text(str(f))}</a></li>' for f in files)
    (folder / "index.html").write_text(_page(folder.name, f"<h1>{escape.text(folder.name)}</h1><ul>{items}</ul>"))


def render_result_page(src: Path, results: Path, out_dir: Path, rendering: set[Path] | None = None) -> Path:
    """docs/results/D/X.md -> out_dir/D/X.html. A link to another page of docs/results points at its
    HTML; a link to a file under docs/results copies that file beside the page; a link elsewhere
    in the repository becomes plain text naming its path; other sites' links stay links. A linked
    page of docs/results is rendered too (`rendering`: the pages under way, so two pages may link
    each other)."""
    under_way = (rendering if rendering is not None else set()) | {src.resolve()}
    body = _ANCHOR.sub(r'<a id="\1"></a>', escape.markdown(src.read_text()))
    out = out_dir / src.resolve().relative_to(results.resolve()).with_suffix(".html")
    out.parent.mkdir(parents=True, exist_ok=True)
    here = lambda dst: os.path.relpath(dst, out.parent)

    def local(target: str) -> str | None:
        """The page-relative target inside the site, or None when it is outside docs/results."""
        path = unquote(urlsplit(target).path)
        resolved = (src.parent / path).resolve()
        if not resolved.is_relative_to(results.resolve()) or not resolved.exists():
            return None
        rel = resolved.relative_to(results.resolve())
        fragment = f"#{urlsplit(target).fragment}" if urlsplit(target).fragment else ""
        if resolved.suffix == ".md":
            page = out_dir / rel.with_suffix(".html")
            if not page.exists() and resolved not in under_way:
                render_result_page(resolved, results, out_dir, under_way)
            return here(page) + fragment
        dst = out_dir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if resolved.suffix == ".html":  # a page (a report): it comes with the images and pages beside it
            shutil.copytree(resolved.parent, dst.parent, dirs_exist_ok=True)
        elif resolved.is_dir():
            shutil.copytree(resolved, dst, dirs_exist_ok=True)
        else:
            shutil.copyfile(resolved, dst)
        if resolved.is_dir() and not (dst / "index.html").exists():
            _listing(dst)
        return here(dst) + ("/index.html" if resolved.is_dir() else fragment)

    def link(m: re.Match) -> str:
        target, text = m.group(1), m.group(2)
        if urlsplit(target).scheme or target.startswith("#"):
            return m.group(0)
        inside = local(target)
        if inside is None:
            where = (src.parent / unquote(urlsplit(target).path)).resolve()
            root = results.resolve().parent.parent
            shown = where.relative_to(root) if where.is_relative_to(root) else target
            return f'{text} <span class="dim">(in the repository: {escape.text(str(shown))})</span>'
        return f'<a href="{escape.text(inside)}">{text}</a>'

    body = _LINK.sub(link, body)
    body = _IMG.sub(lambda m: f'<img src="{escape.text(local(m.group(1)) or "")}"', body)
    up = os.path.relpath(out_dir.parent, out.parent) + "/"
    out.write_text(_page(src.stem, body, up=up))
    return out


def _asv(out: Path, asv_html: Path | None) -> None:
    """out/asv: a copy of the published asv page (`make asv-publish` vendors its scripts, so it
    renders offline), or a page saying how to get it."""
    target = out / "asv"
    if asv_html is not None and (asv_html / "index.html").is_file():
        shutil.copytree(asv_html, target, dirs_exist_ok=True)
        return
    target.mkdir(parents=True, exist_ok=True)
    (target / "index.html").write_text(
        _page(
            "asv history",
            (
                "<h1>Benchmark history (asv)</h1><p>No asv results in this checkout. <code>make asv-curated</code> "
                "records the curated set at two commits; <code>make site</code> then publishes them here.</p>"
            ),
            up="../",
        )
    )


def latest_local_run(local: Path | None) -> Path | None:
    """The newest results file of `make bench` / `rnnbench run` under `local`, if any."""
    runs = sorted(local.glob("run-*.jsonl"), key=lambda p: p.stat().st_mtime) if local and local.is_dir() else []
    return runs[-1] if runs else None


SITE_KIND = "site"  # every folder build() makes is an owned folder of this kind: the only folders it replaces
MARKER = owned.marker(SITE_KIND)
SITE_FOLDER = "the site"  # what the folder is for, in a refusal


def claim(out: Path) -> None:
    """Refuse (InputError) an `out` that build() must not replace: anything but a missing path, an
    empty folder or a site build() made (its MARKER); nothing is touched."""
    owned.claim(out, SITE_KIND, f"{SITE_FOLDER} (e.g. SITE_DIR=site)")


def build(manifest: Path, out: Path, asv_html: Path | None = None, local: Path | None = None) -> Path:
    """Build the site beside `out` (a temporary folder of its parent) and swap it in by rename, so
    a build that fails or is interrupted leaves the old site whole; return the new index page.
    `out` must pass claim(). Left-overs of killed builds beside it (marked) go first."""
    claim(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for stale in out.parent.glob(f".{out.name}.rnnbench-*"):
        if owned.is_owned(stale, SITE_KIND):  # a name alike that rnnbench did not make is left
            owned.remove_owned(stale, SITE_KIND, SITE_FOLDER)
    new = out.parent / f".{out.name}.rnnbench-new-{os.getpid()}"
    new.mkdir()  # raises where it exists: a folder of this process's name is never adopted
    try:
        owned.make_owned(new, SITE_KIND, SITE_FOLDER)
        _build_into(manifest, new, asv_html, local)
        old = new.with_name(new.name.replace("-new-", "-old-"))
        if out.is_dir():
            out.rename(old)
        new.rename(out)
        owned.remove_owned(old, SITE_KIND, SITE_FOLDER, ignore_errors=True)  # the old site, or the empty folder claimed
    finally:
        owned.remove_owned(new, SITE_KIND, SITE_FOLDER, ignore_errors=True)  # gone once renamed
    return out / "index.html"


def _build_into(manifest: Path, out: Path, asv_html: Path | None, local: Path | None) -> None:
    """The site's pages into the folder `out` (new, empty but for MARKER)."""
    root = manifest.resolve().parent.parent
    results = root / "docs" / "results"
    (out / "results").mkdir(parents=True)
    items = []
    reports = load(manifest)
    run = latest_local_run(local)
    if run is not None:
        reports.append(Report("local-run", f"Your latest run on this machine ({run.name})", (str(run),)))
    for rep in reports:
        records = results_file.load([root / f for f in rep.records])
        (out / "reports" / rep.name).mkdir(parents=True)
        write_report(records, out / "reports" / rep.name)
        about = ""
        if rep.page:
            page = render_result_page(root / rep.page, results, out / "results")
            about = f' (<a href="{escape.href(page.relative_to(out))}">how it was measured</a>)'
        items.append(
            f'<li><a href="reports/{escape.href(rep.name)}/index.html">{escape.text(rep.title)}</a>{about}'
            f' <span class="dim">{len(records)} records</span></li>'
        )
    pages = []
    for md in sorted(results.glob("*.md"), reverse=True):
        page = out / "results" / md.with_suffix(".html").name
        if not page.exists():
            page = render_result_page(md, results, out / "results")
        heads = (line.lstrip("# ").strip() for line in md.read_text().splitlines() if line.startswith("#"))
        heading = next(heads, md.stem)
        pages.append(
            f'<li><a href="{escape.href(page.relative_to(out))}">{escape.text(heading)}</a>'
            f' <span class="dim">{escape.text(md.name)}</span></li>'
        )
    _asv(out, asv_html)
    (out / "index.html").write_text(
        _page(
            "rnnbench results",
            (
                "<h1>rnnbench results</h1>"
                "<p>Gradients checked against float64 oracles; speed only for rows whose gradients agree.</p>"
                f"<h2>Reports</h2><ul>{''.join(items)}</ul>"
                "<h2>Benchmark history</h2>"
                '<ul><li><a href="asv/index.html">asv: the curated set across commits</a></li></ul>'
                f"<h2>Result pages (docs/results)</h2><ul>{''.join(pages)}</ul>"
            ),
        )
    )


_REF = re.compile(r'\b(?:href|src)\s*=\s*["\']([^"\']+)["\']', re.IGNORECASE)


def broken_links(out: Path) -> list[str]:
    """'page: target' for every href/src in out's HTML pages that names a file missing from `out`
    (links with a scheme, in-page anchors and javascript: are not files)."""
    bad = []
    for page in sorted(out.rglob("*.html")):
        for target in _REF.findall(page.read_text(errors="replace")):
            parts = urlsplit(target)
            if parts.scheme or parts.netloc or target.startswith(("#", "javascript:")) or not parts.path:
                continue
            path = (page.parent / unquote(parts.path)).resolve()
            if path.is_dir():
                path = path / "index.html"
            if not path.is_relative_to(out.resolve()) or not path.exists():
                bad.append(f"{page.relative_to(out)}: {target}")
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnbench.report.site", description=__doc__.split("\n\n")[0])
    parser.add_argument("manifest", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--asv-html", type=Path, help="a published asv html directory (asv publish)")
    parser.add_argument("--local", type=Path, default=Path("results"), help="where `rnnbench run` wrote its results")
    args = parser.parse_args(argv)
    try:
        index = build(args.manifest, args.out, args.asv_html, args.local)
    except InputError as exc:
        print(f"rnnbench: error: {exc}", file=sys.stderr)
        return 2
    bad = broken_links(args.out)
    for line in bad:
        print(f"rnnbench: broken link: {line}", file=sys.stderr)
    print(f"rnnbench: site -> {index}")
    return 1 if bad else 0
