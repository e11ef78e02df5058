"""The one path a string from a record takes into an output: HTML text and attributes (text, href),
markdown (raw HTML off), a markdown table cell, a csv cell and terminal text. Records travel between
people and machines (docs/security.md): whatever a field holds, a page shows it as text, a markdown
table keeps its columns, a spreadsheet reads no formula and a terminal obeys no control sequence."""

from __future__ import annotations

import html
import re
import unicodedata
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


# What a terminal acts on instead of showing: controls (C0 with tab and line breaks, DEL, C1, so ESC
# sequences, OSC 8 links and title changes), format characters (bidi overrides and isolates,
# zero-width ones), the line and paragraph separators (str.splitlines breaks at them, as tabulate
# does) and lone surrogates (cannot be written as UTF-8).
_UNSEEN = ("Cc", "Cf", "Zl", "Zp", "Cs")
_SHOWN = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _visible(char: str) -> str:
    """One unseen character as Python writes it in a string literal: \\x1b, \\u202e, \\U000e0001."""
    code = ord(char)
    if char in _SHOWN:
        return _SHOWN[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def terminal(value: object, lines: bool = False) -> str:
    """`value` as text safe to print: every control, format (bidi), separator or surrogate character
    written visibly as its escape (ESC as `\\x1b`, a line break as `\\n`, U+202E as `\\u202e`), so a
    field can neither move the cursor, retitle the window, link, reorder the line nor start a row
    of its own. lines=True keeps `\\n` as the line break (a record's multi-line report); the
    rest, carriage returns included, is still escaped. Backslashes are left as they are."""
    text = str(value)
    if text.isascii() and text.isprintable():  # the common case (DEL is no printable): unchanged
        return text
    return "".join(_visible(c) if unicodedata.category(c) in _UNSEEN and not (lines and c == "\n") else c for c in text)


_NEWLINES = re.compile(r"\r\n|\r|\n")


def md_cell(value: object) -> str:
    """A markdown table cell on one line whose `|` cannot end it: backslashes and pipes escaped
    (GitHub and markdown-it show `a|b` again), line breaks as spaces, every other character a
    terminal acts on made visible (terminal())."""
    return terminal(_NEWLINES.sub(" ", str(value).replace("\\", "\\\\").replace("|", "\\|")))


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def csv_cell(value: object) -> str:
    """A csv cell a spreadsheet reads as text, not a formula: a leading = + - @ tab or CR gets a
    `'` (OWASP's rule), except a plain number ("-0.5") and the table's "-" for no value; characters
    a terminal acts on made visible (terminal(): the csv is printed, a tab as `\\t`)."""
    cell = str(value)
    if cell[:1] in ("=", "+", "-", "@", "\t", "\r") and cell != "-" and not _NUMBER.fullmatch(cell):
        return "'" + terminal(cell)
    return terminal(cell)
