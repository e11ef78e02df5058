"""Offline HTML: make `asv publish` output render with no network, and check pages in a headless
browser that cannot reach any host but 127.0.0.1.

asv's page (asv/www/index.html in the installed asv) loads jQuery, flot and its plugins,
stupidtable, blueimp-md5 and Bootstrap from CDNs; with no network its scripts never run and the
page sends the reader to error.html. `vendor` is the post-publish step we own (the installed asv
is left untouched): it copies the files vendored in benchmarks/asv_www_vendor/ (checked against
the sha256 below first) into HTML_DIR/vendor/ and rewrites every CDN tag of HTML_DIR/*.html to
them; an external <script>/<link>/<img> it does not know (a newer asv) is an error, not a page
that silently needs the network.

`check` serves a directory on 127.0.0.1 (python -m http.server), loads a page in headless
Chromium whose host resolver maps every name but 127.0.0.1 to NOTFOUND, dumps the DOM after the
page's scripts ran, reads every request from Chromium's network log, and fails unless the
expected texts are in the DOM and every request the page made (its navigation and everything
whose initiator is the page) went to 127.0.0.1. The browser's own background requests (update
checks and the like, initiated by no page) are listed apart; the resolver rule fails them too.

    python benchmarks/offline_html.py vendor .asv/html
    python benchmarks/offline_html.py check .asv/html --expect Curated.time_fwd_bwd
    python benchmarks/offline_html.py check results/report --expect "All rows"

Exit status: 0 ok, 1 check failed, 2 bad input (no such directory, no Chromium).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import http.server
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

VENDOR_DIR = Path(__file__).resolve().parent / "asv_www_vendor"
VENDOR_SUBDIR = "vendor"  # under the published html dir

# CDN address in asv's page -> (vendored file, its sha256). jQuery, orderBars, md5 and Bootstrap
# are the npm packages' files byte for byte (their sha256 match the page's SRI hashes); flot 0.8.3
# is the npm package's unminified source of the same release (the CDN serves its own minified
# build); stupidtable 1.0.1 is not on npm, so 1.1.3 (same API: $(table).stupidtable(sort_fns)).
# Sources, versions and licences: asv_www_vendor/README.md.
VENDORED = {
    "https://code.jquery.com/jquery-3.3.1.min.js": (
        "jquery-3.3.1.min.js",
        "160a426ff2894252cd7cebbdd6d6b7da8fcd319c65b70468f10b6690c45d02ef",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js": (
        "jquery.flot-0.8.3.js",
        "b7b931f273c38b1277b9c6c1f4e05c4ec09885a487bddaf3279e2d7e49a38e12",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js": (
        "jquery.flot.time-0.8.3.js",
        "a582c832adc7138a6b05aaf61f16ebac274701f1be4afea77e739a1c34b9c41a",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js": (
        "jquery.flot.selection-0.8.3.js",
        "e6c85f6c1ebe4b4da29d8ae238c7c5060283f05f7ef054f6b91817d02c092918",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js": (
        "jquery.flot.categories-0.8.3.js",
        "6e81664b28ea795c734906f4aa15614640a75ac7fbd399a7fb9084040698351a",
    ),
    "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js": (
        "jquery.flot.orderBars-1.0.0.js",
        "39735b4f46f96ff4e082572401f47c55a2767b366fd1d1e821e44a8d830a12bf",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js": (
        "stupidtable-1.1.3.min.js",
        "4642380f28ebe9ed7cac251793b281ef8620c4386205d92788f9b12f5cceb4e0",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js": (
        "md5-2.19.0.min.js",
        "64d7ded388c562e4bde9e58ce205e5fa01b9734fcd434d496eb7b4fbfe9b927d",
    ),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js": (
        "bootstrap-3.1.1.min.js",
        "898d05a17f2cfc5120ddcdba47a885c378c0b466f30f0700e502757e24b403a1",
    ),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css": (
        "bootstrap-3.1.1.min.css",
        "e9503448692b738dd260fbd7f7cabf2e11f09b600fa97e6eb3a56eba5b1a7e9b",
    ),
}

# An opening <script>/<link>/<img>/<iframe>/<source> tag with a src= or href= naming another host
# (http:, https: or protocol-relative). <a href> is navigation, not a fetch, and is left alone.
_EXTERNAL_TAG = re.compile(
    r"<(script|link|img|iframe|source)\b[^>]*?\b(?:src|href)\s*=\s*[\"']((?:https?:)?//[^\"']+)[\"'][^>]*>",
    re.IGNORECASE | re.DOTALL,
)
_ONERROR = re.compile(r"\bonerror\s*=\s*([\"'])(.*?)\1", re.IGNORECASE | re.DOTALL)


class OfflineHtmlError(Exception):
    """The page needs the network, a vendored file changed, or the browser check failed."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def external_tags(html: str) -> list[str]:
    """The URLs of the tags in `html` that would make a browser fetch from another host."""
    return [m.group(2) for m in _EXTERNAL_TAG.finditer(html)]


def _local_tag(match: re.Match) -> str:
    tag, url = match.group(1).lower(), match.group(2)
    if url not in VENDORED:
        raise OfflineHtmlError(
            f"{url}: an external <{tag}> with no vendored copy (add it to benchmarks/asv_www_vendor and VENDORED)"
        )
    src = f"{VENDOR_SUBDIR}/{VENDORED[url][0]}"
    if tag == "link":
        return f'<link rel="stylesheet" href="{src}">'
    onerror = _ONERROR.search(match.group(0))  # keep asv's "script failed to load" handler
    return f'<script src="{src}"' + (f' onerror="{onerror.group(2)}"' if onerror else "") + ">"


def rewrite(html: str) -> str:
    """`html` with every CDN <script>/<link> tag pointing at vendor/ (SRI and CORS attributes
    dropped: the files are checked here, and same-origin). Raises OfflineHtmlError for an
    external tag that is not vendored."""
    return _EXTERNAL_TAG.sub(_local_tag, html)


def vendor(html_dir: Path) -> list[Path]:
    """The post-publish step: copy the vendored files into html_dir/vendor and rewrite every
    html_dir/*.html. Idempotent. Returns the rewritten pages."""
    html_dir = Path(html_dir)
    pages = sorted(html_dir.glob("*.html"))
    if not pages:
        raise OfflineHtmlError(f"{html_dir}: no *.html (run `asv publish` first)")
    out = html_dir / VENDOR_SUBDIR
    out.mkdir(exist_ok=True)
    for name, digest in set(VENDORED.values()):
        src = VENDOR_DIR / name
        if _sha256(src) != digest:
            raise OfflineHtmlError(f"{src}: sha256 differs from the one recorded in VENDORED")
        shutil.copyfile(src, out / name)
    shutil.copytree(VENDOR_DIR / "LICENSES", out / "LICENSES", dirs_exist_ok=True)
    for page in pages:
        text = page.read_text(encoding="utf-8")
        new = rewrite(text)
        if new != text:
            page.write_text(new, encoding="utf-8")
        left = external_tags(new)
        if left:
            raise OfflineHtmlError(f"{page}: still loads {', '.join(left)}")
    return pages


# ---------------------------------------------------------------------------------------------
# the browser check

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Every host name resolves to NOTFOUND except 127.0.0.1: a fetch from any other host fails.
OFFLINE_RESOLVER = "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class Rendered:
    dom: str  # the DOM after the page's scripts ran (--dump-dom)
    url: str  # the page loaded
    page_requests: list[str]  # URLs the page asked for: its navigation and what it initiated
    background: list[str]  # the browser's own requests (updates, accounts, ...): no page initiated them

    def non_local(self) -> list[str]:
        """URLs the page asked for whose host is not 127.0.0.1 (data:/blob: URLs are no requests)."""
        return [
            u
            for u in self.page_requests
            if urlsplit(u).scheme not in ("data", "blob", "about") and urlsplit(u).hostname != "127.0.0.1"
        ]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass


@contextlib.contextmanager
def serve(directory: Path):
    """Serve `directory` on 127.0.0.1 (a free port) in a thread; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _started_requests(netlog: Path) -> list[tuple[str, str]]:
    """(url, initiator) of every URL_REQUEST_START_JOB in a Chromium --log-net-log file (JSON; a log
    cut short by the browser's exit is closed here). The initiator is the origin of the document
    that asked for the URL, or "not an origin" for a navigation and the browser's own requests."""
    text = netlog.read_text(encoding="utf-8", errors="replace").rstrip()
    if not text:
        return []
    try:
        log = json.loads(text)
    except json.JSONDecodeError:
        log = json.loads(text.rstrip(",") + "]}")
    start_job = log.get("constants", {}).get("logEventTypes", {}).get("URL_REQUEST_START_JOB")
    out = []
    for event in log.get("events", []):
        params = event.get("params") or {}
        if event.get("type") == start_job and "url" in params:
            out.append((params["url"], str(params.get("initiator", ""))))
    return out


def render(
    directory: Path, page: str = "", chromium: str | None = None, wait_ms: int = 10000, timeout_s: float = 120.0
) -> Rendered:
    """Load `page` of `directory` from a local server in headless Chromium that can resolve no host
    but 127.0.0.1; return the DOM after `wait_ms` of virtual time and every URL requested."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError("no Chromium found (looked for " + ", ".join(CHROMIUM_NAMES) + ")")
    with serve(Path(directory)) as base, tempfile.TemporaryDirectory(prefix="offline-html-") as tmp:
        netlog = Path(tmp) / "netlog.json"
        url = base + page
        cmd = [
            chromium,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--metrics-recording-only",
            "--disable-breakpad",
            f"--user-data-dir={tmp}/profile",
            f"--host-resolver-rules={OFFLINE_RESOLVER}",
            f"--log-net-log={netlog}",
            f"--virtual-time-budget={wait_ms}",
            "--dump-dom",
            url,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0 or not proc.stdout.strip():
            raise OfflineHtmlError(f"chromium exited {proc.returncode} with no DOM:\n{proc.stderr[-2000:]}")
        origin = base.rstrip("/")
        page_requests, background = [], []
        for req, initiator in _started_requests(netlog) if netlog.exists() else []:
            mine = initiator == origin or req == url
            (page_requests if mine else background).append(req)
        return Rendered(dom=proc.stdout, url=url, page_requests=page_requests, background=background)


def screenshot(
    directory: Path,
    page: str,
    png: Path,
    size: tuple[int, int] = (1400, 2400),
    wait_ms: int = 5000,
    chromium: str | None = None,
    timeout_s: float = 120.0,
) -> Path:
    """A PNG of `page` of `directory` as headless Chromium drew it, with the same offline resolver
    as render() (a page that needs another host shows what it looks like without it)."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError("no Chromium found (looked for " + ", ".join(CHROMIUM_NAMES) + ")")
    Path(png).parent.mkdir(parents=True, exist_ok=True)
    with serve(Path(directory)) as base, tempfile.TemporaryDirectory(prefix="offline-html-") as tmp:
        cmd = [
            chromium,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--hide-scrollbars",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            f"--user-data-dir={tmp}/profile",
            f"--host-resolver-rules={OFFLINE_RESOLVER}",
            f"--window-size={size[0]},{size[1]}",
            f"--virtual-time-budget={wait_ms}",
            f"--screenshot={png}",
            base + page,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0 or not Path(png).is_file():
            raise OfflineHtmlError(f"chromium exited {proc.returncode} with no screenshot:\n{proc.stderr[-2000:]}")
    return Path(png)


def check(directory: Path, expect: list[str], page: str = "", wait_ms: int = 10000) -> Rendered:
    """render() and fail (OfflineHtmlError) unless every `expect` text is in the DOM and every
    request went to 127.0.0.1."""
    shown = render(directory, page, wait_ms=wait_ms)
    problems = [f"not in the rendered DOM: {text!r}" for text in expect if text not in shown.dom]
    problems += [f"the page requested a non-local host: {u}" for u in shown.non_local()]
    if not any(urlsplit(u).hostname == "127.0.0.1" for u in shown.page_requests):
        problems.append("the network log shows no request at all (is --log-net-log supported?)")
    if problems:
        raise OfflineHtmlError(f"{shown.url}:\n  " + "\n  ".join(problems))
    return shown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("vendor", help="post-publish: vendor asv's CDN scripts into HTML_DIR")
    v.add_argument("html_dir", type=Path, nargs="?", default=Path(".asv/html"))
    c = sub.add_parser("check", help="render DIR offline in headless Chromium and check it")
    c.add_argument("directory", type=Path)
    c.add_argument("--page", default="", help="page under DIR (default: the directory index)")
    c.add_argument("--expect", action="append", default=[], help="text the rendered DOM must contain")
    c.add_argument("--wait-ms", type=int, default=10000, help="virtual time for the page's scripts")
    args = parser.parse_args(argv)
    try:
        if args.command == "vendor":
            pages = vendor(args.html_dir)
            print(
                f"vendored {len(set(VENDORED.values()))} files into {args.html_dir / VENDOR_SUBDIR}; "
                f"rewrote {', '.join(p.name for p in pages)}"
            )
            return 0
        if not args.directory.is_dir():
            print(f"error: {args.directory} is not a directory", file=sys.stderr)
            return 2
        if find_chromium() is None:
            print("error: no Chromium installed (apt-get install chromium)", file=sys.stderr)
            return 2
        shown = check(args.directory, args.expect, args.page, args.wait_ms)
        print(
            f"ok: {shown.url} rendered with no network: the page made {len(shown.page_requests)} requests, "
            f"all to 127.0.0.1; the DOM has {', '.join(map(repr, args.expect)) or 'no expected text'} "
            f"({len(shown.background)} requests of the browser's own, e.g. update checks, failed to resolve)"
        )
        return 0
    except OfflineHtmlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
