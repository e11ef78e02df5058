"""The results file: records (rnnbench.record) appended to a JSON Lines file as each row completes,
so an interrupted run keeps what it finished. The one locked writer (ResultsFile), the validated
reader (load), and what a --resume of a file still has to run (resume_plan)."""

from __future__ import annotations

import fcntl
import json
import math
import os
import stat
import sys
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from rnnbench.errors import InputError
from rnnbench.record import SCHEMA, rnnbench_version, row_key
from rnnbench.record_fields import problem


def _json_safe(value: Any) -> Any:
    """NaN and infinities become null: JSON has no spelling for them, and a bare NaN breaks
    strict readers (jq, browsers, pandas with engine="pyarrow")."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def dumps(record: dict[str, Any]) -> str:
    """One record as one JSON line (no NaN: see _json_safe)."""
    return json.dumps(_json_safe(record), sort_keys=True, allow_nan=False) + "\n"


class WriteFailed(OSError):
    """The machine refused a write (disk full, file size limit, I/O error) in the middle of a run.
    Not bad input: the command stops with one line and exit code 1; records written before stay."""


class ResultsFile:
    """The one writer of a results file, as a context manager.

    Opening takes an exclusive lock on the file itself (flock, released by the kernel when the
    process dies, so a killed run leaves no stale lock); a second writer is refused at once.
    An existing non-empty file is refused unless `resume`; with `resume` it is validated first
    (every line a record) and its records are kept in `existing`. The only repairs, made at the
    first append (so that a refusal after opening changes nothing): an incomplete last line that
    begins like a record is dropped, a complete last record gets its missing newline. Each append
    writes one line, fsynced; a failed write is undone (the file is cut back to where it was).
    Every record it writes carries its `run_id`, one per opening (one per command run): `compare`
    counts a row's runs by it, so a record repeated is one run, not several."""

    def __init__(self, path: Path, resume: bool = False, kind: str = "rows"):
        """kind: the campaign the file holds, "rows" (run, sweep, versions) or "fuzz" (campaign_kind):
        a resumed file of the other kind is refused before anything is written."""
        self.path = Path(path)
        self.resume = resume
        self.kind = kind
        self.existing: list[dict[str, Any]] = []
        self.written = 0
        self.run_id = uuid.uuid4().hex[:16]
        self._fd: int | None = None
        # Repairs wait for the first append: a resume refused after opening leaves the file as it was.
        self._cut: int | None = None  # where an incomplete last line starts
        self._newline = False  # the last record is complete but lacks its newline

    def __enter__(self) -> ResultsFile:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise InputError(f"cannot write results file {self.path}: {exc.strerror}") from None
        if st is not None and not stat.S_ISREG(st.st_mode):  # a directory, a device, a FIFO (would block)
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise InputError(f"results file {self.path} is {kind}; choose another --out")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise InputError(f"cannot write results file {self.path}: {exc.strerror}") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise InputError(
                    f"results file {self.path} is being written by another rnnbench process; "
                    "wait for it to finish or choose another --out"
                ) from None
            size = os.fstat(fd).st_size
            if size and not self.resume:
                raise InputError(
                    f"results file {self.path} already exists ({size} bytes); "
                    "continue it with --resume or choose another --out"
                )
            if size:
                self.existing, self._cut = _read(self.path, complete_tail=True)
                self._newline = self._cut is None and not _ends_with_newline(self.path)
                refuse_other_kind(self.path, self.existing, self.kind)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def append(self, record: dict[str, Any]) -> None:
        """Write one record as one line, fsynced (a killed run loses at most the row it was on)."""
        assert self._fd is not None, "ResultsFile.append outside its with-block"
        if self._cut is not None:
            os.truncate(self._fd, self._cut)
            self._cut = None
            print(
                f"rnnbench: {self.path}: dropped an incomplete last line (a run killed mid-write; its row runs again)",
                file=sys.stderr,
            )
        data = (b"\n" if self._newline else b"") + dumps({**record, "run_id": self.run_id}).encode()
        before = os.fstat(self._fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)
        except OSError as exc:
            try:
                os.truncate(self._fd, before)  # never leave half a record behind
            except OSError:
                pass
            raise WriteFailed(
                exc.errno,
                f"cannot write results file {self.path}: {exc.strerror}; "
                f"the {self.written} record(s) written by this run are kept",
            ) from None
        self._newline = False
        self.written += 1

    def __exit__(self, *exc_info) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


KINDS = {"rows": "rows of `rnnbench run`, `sweep` or `versions`", "fuzz": "outcomes of an `rnnbench fuzz` campaign"}


def campaign_kind(rec: dict[str, Any]) -> str:
    """ "fuzz" for a fuzz campaign's record (rnnbench.fuzz.campaign.Campaign: a generated body, model
    "fuzz:<seed>:<case>"), else "rows": what a resume of one may append to a file of the other would
    break (each kind's resume reads only its own records)."""
    return "fuzz" if "body" in rec or str(rec.get("model", "")).startswith("fuzz:") else "rows"


def refuse_other_kind(path: Path, existing: list[dict[str, Any]], kind: str) -> None:
    """InputError where `existing` (the records of `path`) holds records of another kind than `kind`."""
    other = [rec for rec in existing if campaign_kind(rec) != kind]
    if other:
        theirs = campaign_kind(other[0])
        raise InputError(
            f"--resume: {path} holds {KINDS[theirs]} ({len(other)} record(s)), and this command writes "
            f"{KINDS[kind]}; continue it with the command that wrote it, or choose another --out"
        )


class CorruptRecords(InputError):
    """A results file with a line that is not a record."""


def _read(
    path: Path,
    complete_tail: bool = False,
    warn: Callable[[str], None] = lambda message: print(message, file=sys.stderr),
) -> tuple[list[dict[str, Any]], int | None]:
    """The records of one file, and the byte offset to cut it at when its last line is an
    incomplete write (None: nothing to cut). Every other line must be a record: CorruptRecords
    names the first that is not. complete_tail: the caller may repair, so a truncated tail is
    reported by its offset instead of a warning."""
    try:
        data = Path(path).read_bytes()
    except IsADirectoryError:
        raise InputError(f"results file {path} is a directory") from None
    except OSError as exc:
        raise InputError(f"cannot read results file {path}: {exc.strerror}") from None
    records: list[dict[str, Any]] = []
    lines = data.split(b"\n")
    offset = 0
    cut = None
    for i, raw in enumerate(lines, 1):
        last = i == len(lines)  # the text after the final newline ("" when the file ends with one)
        start, offset = offset, offset + len(raw) + 1
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            if last and raw.startswith(b'{"'):  # a run killed mid-write: the start of a record, not one yet
                if not complete_tail:
                    warn(f"rnnbench: warning: {path}:{i}: incomplete last line skipped")
                cut = start
                continue
            raise CorruptRecords(f"{path}:{i}: not a JSON record; remove the line or use another file") from None
        why = problem(rec)
        if why is not None:
            raise CorruptRecords(f"{path}:{i}: not an rnnbench record ({why})")
        records.append(rec)
    return records, cut


def resume_plan(
    path: Path, existing: list[dict[str, Any]], wanted: Sequence[tuple[tuple, str, dict[str, Any], str]]
) -> list[int]:
    """Which of `wanted` (row key, fingerprint, settings, label) a --resume of `path` still has to
    run: an item is done when the file has a record with its key and fingerprint. A file of another
    schema or rnnbench version, or a decided row recorded with other settings, is refused (the
    message says which and how they differ). Rows recorded as unavailable run again."""
    schemas = sorted({rec.get("schema", 1) for rec in existing} - {SCHEMA})
    if schemas:
        raise InputError(
            f"--resume: {path} holds records of schema {schemas[0]} and this rnnbench writes schema "
            f"{SCHEMA}; start a new results file"
        )
    versions = sorted({rec.get("rnnbench_version", "?") for rec in existing} - {rnnbench_version()})
    if versions:
        raise InputError(
            f"--resume: {path} was written by rnnbench {versions[0]} and this is {rnnbench_version()}; "
            "results of two versions are not one run: start a new results file"
        )
    by_key: dict[tuple, list[dict[str, Any]]] = {}
    for rec in existing:
        by_key.setdefault(row_key(rec), []).append(rec)
    todo, conflicts = [], []
    for i, (key, fp, settings, label) in enumerate(wanted):
        recs = by_key.get(key, [])
        if any(rec.get("fingerprint") == fp for rec in recs):
            continue
        decided = [rec for rec in recs if rec["status"] != "unavailable"]
        if decided:
            conflicts.append((label, _differences(decided[-1].get("settings") or {}, settings)))
        else:
            todo.append(i)
    if conflicts:
        label, diff = conflicts[0]
        raise InputError(
            f"--resume: {len(conflicts)} row(s) of {path} were recorded with other settings (e.g. {label}: "
            f"{diff}); resume with the same settings or choose another --out"
        )
    return todo


def _differences(recorded: dict[str, Any], wanted: dict[str, Any], prefix: str = "") -> str:
    """'threads 1 -> 2, timing.budget_s 0.5 -> 1.0': how two settings dicts differ (first three)."""
    out = []
    for name in sorted(set(recorded) | set(wanted)):
        a, b = recorded.get(name), wanted.get(name)
        if isinstance(a, dict) and isinstance(b, dict):
            inner = _differences(a, b, f"{prefix}{name}.")
            out += [inner] if inner else []
        elif a != b:
            out.append(f"{prefix}{name} {a!r} -> {b!r}")
    return ", ".join(out[:3]) or "same settings, other fingerprint"


def load(paths: Iterable[Path], warn: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Read and validate records; an incomplete last line (a run killed mid-write) is skipped with a
    warning (to stderr, or to `warn`), any other line that is not a record is an error naming the
    file, line and field."""
    extra = {} if warn is None else {"warn": warn}
    return [rec for path in paths for rec in _read(Path(path), **extra)[0]]


def refuse_other_rows(
    path: Path,
    existing: list[dict[str, Any]],
    wanted: Sequence[tuple[tuple, str, dict[str, Any], str]],
    settings: dict[str, Any],
) -> None:
    """For a --resume whose file may hold only rows of `wanted` (as resume_plan takes them; a fuzz
    campaign, whose row keys name its seed and loss forms): refuse a record of any other row,
    naming how its settings differ from `settings` (another --seed, --losses), else its row."""
    keys = {key for key, *_ in wanted}
    other = [rec for rec in existing if row_key(rec) not in keys]
    if not other:
        return
    rec = other[0]
    recorded = rec.get("settings") or {}
    why = _differences(recorded, settings) if recorded != settings else "not a row of this run"
    raise InputError(
        f"--resume: {path} holds {len(other)} record(s) of rows this run does not have (e.g. "
        f"{rec['model']}/{rec['driver']}/{rec['dtype']}/{rec.get('loss_form', 'model')}: {why}); "
        "resume with the same arguments or choose another --out"
    )
