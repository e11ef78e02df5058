"""What rnnbench prints to a terminal obeys no control sequence a record holds (docs/security.md).

Records whose model, driver, environment and hostname hold a title change (ESC ] 0 ; ... BEL), a
screen clear (ESC [ 2 J), an OSC 8 link, bidi overrides, C1 controls and line breaks that would
print a forged `ok` row go through `rnnbench table` (text, markdown, csv), `rnnbench compare`
(text, markdown) and compare's one-line errors: every such character shows as its escape, and
the table has as many lines as rows."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from rnnbench.cli.main import main
from rnnbench.report import escape

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "docs" / "results" / "2026-11-25-default-run.jsonl"

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
LINK = "\x1b]8;;mailto:a@example.invalid\x1b\\click\x1b]8;;\x1b\\"  # no "/": names may not hold one
BIDI = "\u202e\u2066\u2069\u202a"
C1 = "\x85\x9b31m\x90"
FORGED = "\nlstm  torch_loop  torch 2.13.0  float64  ok"
PAYLOAD = f"{TITLE}{CLEAR}{LINK}{BIDI}{C1}\r\t\x0b\x7f\u2028{FORGED}"
ACTED_ON = ("Cc", "Cf", "Zl", "Zp", "Cs")


def _acted_on(text: str, keep: str = "\n") -> list[str]:
    """The characters of `text` a terminal would act on (besides the line breaks in `keep`)."""
    return [c for c in text if unicodedata.category(c) in ACTED_ON and c not in keep]


CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))]
UNSEEN = CONTROLS + list(BIDI + "\u2028\u2029\u200b\ufeff\U000e0001\ud800")


@pytest.mark.parametrize("char", UNSEEN)
def test_terminal_shows_every_acted_on_character_as_its_escape(char: str) -> None:
    shown = escape.terminal(f"a{char}b")
    assert _acted_on(shown, keep="") == [] and shown.startswith("a\\") and shown.endswith("b")


def test_terminal_keeps_plain_text_and_line_breaks_only_when_asked() -> None:
    assert escape.terminal("lstm torch_loop ümlaut 日本 C:\\dir") == "lstm torch_loop ümlaut 日本 C:\\dir"
    assert escape.terminal(f"a{TITLE}\nb") == "a\\x1b]0;pwned\\x07\\nb"
    assert escape.terminal("a\r\nb\u202e", lines=True) == "a\\r\nb\\u202e"


def _records(tmp_path: Path) -> Path:
    """A real ok row and a grad_mismatch copy whose strings hold PAYLOAD (and another machine's hostname)."""
    ok = next(json.loads(line) for line in RUN.read_text().splitlines() if '"model": "rnn"' in line and '"ok"' in line)
    assert ok["model"] == "rnn" and ok["status"] == "ok"
    bad = dict(ok, status="grad_mismatch", model=f"m{PAYLOAD}", driver=f"d{PAYLOAD}", env_label=f"e{PAYLOAD}")
    bad["machine"] = dict(ok.get("machine") or {}, hostname=f"h{PAYLOAD}")
    bad["report"] = f"first line\nsecond {TITLE}"
    path = tmp_path / "hostile.jsonl"
    path.write_text(json.dumps(ok) + "\n" + json.dumps(bad) + "\n")
    return path


def _forged(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.lstrip("-| ").startswith("lstm")]


@pytest.mark.parametrize("fmt", ["text", "markdown", "csv"])
def test_table_prints_record_strings_visibly(tmp_path: Path, capsys, fmt: str) -> None:
    assert main(["table", str(_records(tmp_path)), "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert _acted_on(out) == [], fmt
    assert _forged(out) == [], fmt  # the break in a name starts no row of its own
    assert "\\x1b]0;pwned\\x07" in out and "\\u202e" in out and "\\x85" in out
    if fmt == "text":  # the failure report keeps its own lines, its controls shown
        assert "first line\nsecond \\x1b]0;pwned\\x07" in out


def test_compare_rows_print_record_strings_visibly(tmp_path: Path, capsys) -> None:
    """Two sides that share the hostile row: its cells and summary lines are shown, escaped."""
    ok = next(json.loads(line) for line in RUN.read_text().splitlines() if '"model": "rnn"' in line and '"ok"' in line)
    base = dict(ok, model=f"m{PAYLOAD}", driver=f"d{PAYLOAD}", env_label=f"e{PAYLOAD}", run_id="a")
    new = dict(base, status="grad_mismatch", run_id="b")
    for name, rec in (("base", base), ("new", new)):
        (tmp_path / f"{name}.jsonl").write_text(json.dumps(rec) + "\n")
    for fmt in ("text", "markdown"):
        code = main(["compare", str(tmp_path / "base.jsonl"), str(tmp_path / "new.jsonl"), "--format", fmt])
        out = capsys.readouterr().out
        assert code == 1 and "REGRESSION" in out, fmt
        assert _acted_on(out) == [] and _forged(out) == [], fmt
        assert "\\x1b[2J" in out and "\\u2066" in out


def test_compare_one_line_error_quotes_records_visibly(tmp_path: Path, capsys) -> None:
    path = _records(tmp_path)
    assert main(["compare", str(path), "--environments", "nowhere,elsewhere"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and _acted_on(err) == []
    assert "\\x1b]0;pwned\\x07" in err


def test_a_progress_line_shows_record_strings_visibly() -> None:
    import io

    from rnnbench.report.progress import Progress

    stream = io.StringIO()
    progress = Progress(1, stream=stream, tty=False)
    progress.done({"model": f"m{PAYLOAD}", "driver": "d", "dtype": "float64", "status": "ok", "env_label": BIDI})
    assert _acted_on(stream.getvalue()) == [] and _forged(stream.getvalue()) == []
