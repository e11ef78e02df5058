"""The command line's entry point: the top-level parser, the default command, and the one error
boundary that turns every way out into an exit code (main()).

`rnnbench` alone prints the help; flags without a command (`rnnbench --models lstm`) run `run`."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from rnnbench import record, results_file
from rnnbench.cli import bisect, bugs, compare, env, fuzz, options, report, run, sweep, table, versions
from rnnbench.cli import list as list_
from rnnbench.errors import InputError
from rnnbench.processes import parent
from rnnbench.report.escape import terminal

# The subcommands, in the order `rnnbench --help` lists them: each a module with NAME, HELP,
# add_arguments(parser) and run(args) -> exit code.
COMMANDS = (run, list_, versions, env, table, sweep, fuzz, report, compare, bisect, bugs)


class _Version(argparse.Action):
    """--version: the package version, with the commit when rnnbench runs from a git checkout."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"rnnbench {record.rnnbench_version()}", flush=True)
        parser.exit()


DESCRIPTION = """\
Check the gradients of recurrent computations against the oracle ladder (float64 references, exact
dual numbers, finite differences only where a step has no derivative) and time them, across torch,
jax and torch_xla drivers. `rnnbench run` is the default comparison; `rnnbench COMMAND --help` shows
a command's options."""

EPILOG = """\
exit codes: 0 every row ok, unavailable or a registered known issue (known_issue:<id>); 1 some row
failed its check or crashed, a registered known issue no longer reproduces (known_issue_fixed:<id>),
the disk refused a write, or an internal error (one line, the traceback saved to a file); 2 bad
input (one line on stderr, nothing written); 128+N cut short by signal N (130 Ctrl-C, 143 SIGTERM,
129 SIGHUP); 141 stdout's reader went away. `compare`: 1 a status regression or a row decided
slower, 3 measured nothing (no row judged on both sides; docs/ci.md).

Flags without a command run `run` (`rnnbench --models lstm`)."""


def parser() -> options.Parser:
    p = options.Parser(
        prog="rnnbench", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--version", action=_Version, nargs=0, help="print rnnbench's version (and commit) and exit")
    sub = p.add_subparsers(dest="command", parser_class=options.Parser, title="commands", metavar="COMMAND")
    for command in COMMANDS:
        command.add_arguments(sub.add_parser(command.NAME, help=command.HELP))
    return p


def _say(line: str) -> None:
    """One line on stderr, on a line of its own (after a progress bar), whatever stderr's state."""
    try:
        print(line if parent.stderr_at_line_start() else "\n" + line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _new_traceback_file(folder: Path) -> tuple[Path, TextIO]:
    """A file of its own in `folder`, opened for writing: date-time-pid.txt, or date-time-pid_NNN.txt
    where an earlier error of this process in the same second took that name (`x`: never overwritten).
    The names sort in the order they were taken ('.' < '_'), which the pruning of old ones relies on."""
    stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    for n in range(1000):
        path = folder / (f"{stem}.txt" if n == 0 else f"{stem}_{n:03d}.txt")
        try:
            return path, open(path, "x")
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free traceback file name", str(folder / f"{stem}_*.txt"))


def _internal_error(exc: BaseException, argv: list[str]) -> int:
    """One line naming the exception and the file its traceback is saved in (the newest 50 kept);
    where no file can be written, the traceback itself. Exit code 1."""
    text = "".join(traceback.format_exception(exc))
    message = (str(exc).strip().splitlines() or [""])[0][:300]
    what = terminal(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)
    try:
        cache = os.environ.get("XDG_CACHE_HOME", "")
        folder = (Path(cache) if os.path.isabs(cache) else Path.home() / ".cache") / "rnnbench" / "tracebacks"
        folder.mkdir(parents=True, exist_ok=True)
        path, f = _new_traceback_file(folder)
        with f:
            f.write(
                f"rnnbench {' '.join(argv)}\npython {sys.version.split()[0]} on {sys.platform}, "
                f"{time.strftime('%Y-%m-%d %H:%M:%S %z')}\n\n{text}"
            )
        # keep the newest 50: only files of this function's own name (date-time-pid[_NNN].txt) in rnnbench's
        # cache; a folder is never removed here, so no owned-folder marker is needed (rnnbench.processes.owned)
        for old in sorted(folder.glob("[0-9]*-[0-9]*-[0-9]*.txt"))[:-50]:
            old.unlink(missing_ok=True)
    except (OSError, RuntimeError, KeyError) as why:  # no home, read-only cache: print it instead
        _say(f"rnnbench: internal error: {what} (could not save the traceback: {why}; here it is)")
        _say(terminal(text.rstrip(), lines=True))
        return 1
    _say(f"rnnbench: internal error: {what} (full traceback: {path})")
    return 1


def _closed_streams_to_devnull() -> None:
    """A standard stream its starter closed (`rnnbench run >&-`, a daemon or CI step) becomes
    /dev/null: rnnbench then says nothing there and keeps working, and no file it opens (the
    results file) can take descriptor 0, 1 or 2, where a child would write its output into it."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: fd itself when 0..fd-1 are open
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if getattr(sys, name) is None:  # the interpreter found the descriptor closed at start-up
            setattr(sys, name, open(fd, mode, closefd=False))


def _dispatch(argv: list[str]) -> int:
    """Parse `argv` and run its command, inside the parent's signal and stream handling."""
    with parent.handle_signals(), parent.watch_stdout(), parent.track_stderr():
        try:
            args = parser().parse_args(argv)
        except SystemExit:  # --help printed (argparse swallows write errors): was it delivered?
            sys.stdout.flush()
            if parent.stdout_closed():
                raise BrokenPipeError("stdout closed") from None
            raise
        return {command.NAME: command for command in COMMANDS}[args.command].run(args)


# The machine refusing a write (a full disk, a quota, a read-only or failing file system): one line, exit 1.
REFUSED_WRITES = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line's one error boundary. Exit codes: 0 and 1 as the command says (1: a row
    failed); 2 bad input (InputError: one line `rnnbench: error: ...`, nothing written); 1 an
    internal error (any other exception: one line `rnnbench: internal error: <Type>: <message>
    (full traceback: <file>)`, the traceback saved under $XDG_CACHE_HOME/rnnbench/tracebacks or
    ~/.cache/rnnbench/tracebacks); 128+N when cut short by signal N (130 SIGINT, 143 SIGTERM,
    129 SIGHUP: one line saying what is kept and how to continue) and 141 when stdout's reader
    went away (`rnnbench ... | head`). Every way out ends the workers (their process groups) and
    removes the run's temporary files (rnnbench.processes.tmpdirs)."""
    _closed_streams_to_devnull()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:  # a bare call is someone asking what rnnbench does, not for a run of many rows
        argv = ["--help"]
    if argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv = ["run", *argv]
    try:
        return _dispatch(argv)
    except InputError as exc:
        _say(terminal(f"rnnbench: error: {exc}"))  # it may quote a record: one line, nothing a terminal acts on
        return 2
    except (parent.StdoutClosed, BrokenPipeError) as exc:  # watch_stdout's, or a write's
        if not parent.stdout_closed():
            return _internal_error(exc, argv)
        parent.silence_stdout()
        if parent.has_results_file():  # quiet otherwise, as `list | head` should be
            _say(parent.exit_line("output closed"))
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt as exc:  # parent.Interrupted for SIGTERM and SIGHUP too
        signum = getattr(exc, "signum", signal.SIGINT)
        with contextlib.suppress(OSError, ValueError):
            if sys.stdout.isatty():
                print(flush=True)  # off the progress bar's line
        _say(parent.exit_line(f"interrupted by {signal.Signals(signum).name}"))
        return 128 + signum
    except results_file.WriteFailed as exc:  # the machine refused a write (disk full): not a bug of ours
        _say(terminal(f"rnnbench: error: {exc.strerror or exc}"))
        return 1
    except OSError as exc:
        if exc.errno not in REFUSED_WRITES:
            return _internal_error(exc, argv)
        # e.g. report's charts
        _say(terminal(f"rnnbench: error: cannot write {exc.filename or 'a file'}: {exc.strerror}"))
        return 1
    except Exception as exc:
        return _internal_error(exc, argv)
