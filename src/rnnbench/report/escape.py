"""The one path a string from a record takes into an output: HTML text and attributes (text, href),
markdown (raw HTML off), a markdown table cell and a csv cell. Records travel between people and
machines (docs/security.md): whatever a field holds, a page shows it as text, a markdown table
keeps its columns and a spreadsheet reads no formula."""

from __future__ import annotations

import html
import re
from urllib.parse import quote


def text(value: object) -> str:
    """`value` as HTML text or a quoted attribute value (& < > " ' escaped)."""
    return html.escape(str(value), quote=True)


def href(path: object) -> str:
    """A relative path (a file name may hold any character) as a quoted href/src value: `:` `?` `#`
    `%` quoted, so a name is never a javascript: URL, a query or an anchor."""
    return text(quote(str(path), safe="/@,=+"))


def markdown(source: str, links: bool = True) -> str:
    """CommonMark with tables as HTML, raw HTML off (`<img onerror=...>` shows as text; links with
    a javascript: target stay text). links=False: links and images stay text too, for markdown made
    from records (a record must not make the page fetch anything)."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    if not links:
        md.disable(["link", "image", "autolink"])
    return md.render(source)


_NEWLINES = re.compile(r"\r\n|\r|\n")


def md_cell(value: object) -> str:
    """A markdown table cell on one line whose `|` cannot end it: backslashes and pipes escaped
    (GitHub and markdown-it show `a|b` again), line breaks as spaces."""
    return _NEWLINES.sub(" ", str(value).replace("\\", "\\\\").replace("|", "\\|"))


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def csv_cell(value: object) -> str:
    """A csv cell a spreadsheet reads as text, not a formula: a leading = + - @ tab or CR gets a
    `'` (OWASP's rule), except a plain number ("-0.5") and the table's "-" for no value."""
    cell = str(value)
    if cell[:1] in ("=", "+", "-", "@", "\t", "\r") and cell != "-" and not _NUMBER.fullmatch(cell):
        return "'" + cell
    return cell
