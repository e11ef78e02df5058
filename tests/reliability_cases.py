"""The reliability matrix: bad input, bad files and refused writes, as data.

Each case is a command line (placeholders: {t} the case's scratch directory, {long} a file name
longer than any file system allows), the files set up before it, and what must happen: the exit
code, words of the one stderr line (exit 2) or of the output (exit 0), and whether every file in
the scratch directory must be byte-for-byte unchanged. tests/test_reliability.py runs every case;
`python tests/reliability_cases.py docs/reliability.md` runs them and writes the table of command,
expected and observed outcome. Fault cases that need processes and signals (tests/test_faults.py),
the library API's checks (tests/test_api_validation.py) and property-based file/config fuzzing
(tests/test_reliability.py) are listed in the document from their own test runs."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# A row decided in the parent (the vendor LSTM layer does not compute an Elman RNN): commands that
# get past every check finish at once, without a worker.
QUICK = ("--models", "rnn", "--drivers", "torch_nn_lstm")


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    exit: int
    words: str = ""  # in the one stderr line (exit 2), else in stdout + stderr
    setup: tuple[str, ...] = ()  # names of SETUPS, applied in order
    unchanged: bool = True  # every file under {t} keeps its bytes
    pipe_closed: bool = False  # run as a process whose stdout reader has gone

    @property
    def command(self) -> str:
        return "rnnbench " + " ".join(a if a and " " not in a else repr(a) for a in self.argv)


@dataclass
class Observed:
    exit: int
    stderr: str
    stdout: str
    changed: list[str]

    @property
    def summary(self) -> str:
        lines = self.stderr.strip().splitlines()
        first = lines[0] if lines else self.stdout.strip().splitlines()[-1] if self.stdout.strip() else ""
        more = f" (+{len(lines) - 1} stderr lines)" if len(lines) > 1 else ""
        changed = f"; changed: {', '.join(self.changed)}" if self.changed else ""
        return f"exit {self.exit}: {first}{more}{changed}"


def _record(**over) -> dict:
    """A complete record of a row that was decided in the parent (see QUICK), as `run` writes it."""
    from rnnbench.cli import options
    from rnnbench.cli.main import parser
    from rnnbench.planning import plan

    (job,) = plan.jobs(options.settings(parser().parse_args(["run", *QUICK])))
    return {**job.identity(), "status": "unavailable", "reason": "vendor layer computes lstm only", **over}


def _lines(*records: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def _write(name: str, text: str | bytes) -> Callable[[Path], None]:
    def setup(t: Path) -> None:
        path = t / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())

    return setup


def _results(t: Path) -> None:
    (t / "r.jsonl").write_text(_lines(_record()))


def _other(t: Path, **over) -> None:
    (t / "r.jsonl").write_text(_lines(_record(**over)))


REC = {"model": "rnn", "driver": "torch_loop", "dtype": "float32", "status": "ok"}
SETUPS: dict[str, Callable[[Path], None]] = {
    "results": _results,
    "notes": _write("notes.txt", "my notes about the run\nsecond line\n"),
    "notes_no_newline": _write("notes.txt", "my notes"),
    "dir": lambda t: (t / "d").mkdir(),
    "file_as_dir": _write("f", "a file\n"),
    "empty": _write("r.jsonl", ""),
    "blank_lines": _write("r.jsonl", "\n\n  \n"),
    "bad_middle": lambda t: (t / "r.jsonl").write_text(_lines(_record()) + "oops\n" + _lines(_record())),
    "bad_middle_complete_tail": lambda t: (t / "r.jsonl").write_text(
        _lines(_record()) + "oops\n" + _lines(_record()).rstrip("\n")
    ),
    "truncated_tail": lambda t: (t / "r.jsonl").write_text(_lines(_record()) + '{"model": "rnn", "dri'),
    "complete_tail_no_newline": lambda t: (t / "r.jsonl").write_text(_lines(_record()).rstrip("\n")),
    "array_line": _write("r.jsonl", "[1, 2, 3]\n"),
    "string_line": _write("r.jsonl", '"a string"\n'),
    "number_line": _write("r.jsonl", "42\n"),
    "empty_object": _write("r.jsonl", "{}\n"),
    "deep_nesting": _write("r.jsonl", "[" * 100000 + "]" * 100000 + "\n"),
    "binary": _write("r.jsonl", bytes(range(256)) + b"\n"),
    "latin1": _write("r.jsonl", '{"model": "caf\xe9"}\n'.encode("latin-1")),
    "bom": _write("r.jsonl", "\ufeff" + json.dumps(REC) + "\n"),
    "nan_literal": _write("r.jsonl", json.dumps({**REC, "max_rel_error": float("nan")}) + "\n"),
    "null_timing": _write("r.jsonl", json.dumps({**REC, "fwd_bwd": None}) + "\n"),
    **{f"missing_{k}": _write("r.jsonl", json.dumps({f: v for f, v in REC.items() if f != k}) + "\n") for k in REC},
    **{
        f"wrong_{k}": _write("r.jsonl", json.dumps({**REC, k: v}) + "\n")
        for k, v in (
            ("status", 5),
            ("model", None),
            ("driver", ["a"]),
            ("dtype", {"x": 1}),
            ("sizes", "T=3"),
            ("seed", "0"),
            ("machine", "host"),
            ("max_rel_error", "small"),
            ("fwd_bwd", {"median_ms": "fast"}),
            ("fwd", [1, 2]),
            ("report", 3),
            ("loss_form", 1),
            ("schema", "2"),
            ("first_call_s", True),
            ("hvp", "ok"),
            ("environment_name", 0),
        )
    },
    "wrong_size_value": _write("r.jsonl", json.dumps({**REC, "sizes": {"T": "64"}}) + "\n"),
    "wrong_hostname": _write("r.jsonl", json.dumps({**REC, "machine": {"hostname": 3}}) + "\n"),
    "other_schema": lambda t: _other(t, schema=1),
    "no_schema": lambda t: (t / "r.jsonl").write_text(_lines({k: v for k, v in _record().items() if k != "schema"})),
    "other_version": lambda t: _other(t, rnnbench_version="0.0.1"),
    "other_settings": lambda t: _other(
        t, status="ok", fingerprint="0" * 16, settings={**_record()["settings"], "threads": 99}
    ),
    "unavailable_other_settings": lambda t: _other(t, fingerprint="0" * 16),
    "config_dir": lambda t: (t / "c.toml").mkdir(),
    "outdir_is_file": _write("o", "a file, not a directory\n"),
    "repro_is_file": _write("repro", "a file\n"),
}


def _config(name: str, text: str) -> Callable[[Path], None]:
    SETUPS[name] = _write("c.toml", text)
    return SETUPS[name]


CONFIG_CASES = [  # (id, TOML text, exit, words)
    ("config_models_int", "models = 5", 2, "key 'models' must be a string or a list of strings, got int 5"),
    ("config_models_list_of_ints", "models = [1, 2]", 2, "key 'models' must be a string or a list of strings"),
    ("config_environments_list", 'environments = ["main"]', 0, "1 unavailable"),
    ("config_environments_unknown", 'environments = ["moon"]', 2, "unknown environment 'moon'"),
    (
        "config_environment_table_not_a_table",
        "environments = { moon = 3 }",
        2,
        "environment 'moon' must be a table, got int",
    ),
    (
        "config_environment_unknown_key",
        '[environments.moon]\nrequirements = ["numpy==2.4.6"]\ncolour = "red"',
        2,
        "environment 'moon': unknown key 'colour'",
    ),
    (
        "config_environment_requirements_int",
        "[environments.moon]\nrequirements = 3",
        2,
        "environment 'moon': 'requirements' has the wrong type (int)",
    ),
    (
        "config_environment_empty_requirement",
        '[environments.moon]\nrequirements = [""]',
        2,
        "requirements must be non-empty strings",
    ),
    (
        "config_environment_nothing_to_create_from",
        '[environments.moon]\nabout = "x"',
        2,
        "environment 'moon' needs `requirements` (pins to create it from) or `path`",
    ),
    (
        "config_environment_bad_name",
        '[environments."a b"]\nrequirements = ["numpy==2.4.6"]',
        2,
        "environment name 'a b' must be letters, digits",
    ),
    ("config_environment_empty_table", "environments = {}", 2, "the [environments] table defines no environment"),
    ("config_environment_builtin_by_name", "[environments.main]", 0, "1 unavailable"),
    ("config_memory_string", 'memory_limit_gb = "2"', 2, "key 'memory_limit_gb' must be a number, got str '2'"),
    ("config_memory_negative", "memory_limit_gb = -1", 2, "key 'memory_limit_gb' must be a finite number > 0"),
    ("config_memory_zero", "memory_limit_gb = 0", 2, "must be a finite number > 0"),
    ("config_memory_nan", "memory_limit_gb = nan", 2, "must be a finite number > 0, got nan"),
    ("config_memory_inf", "memory_limit_gb = inf", 2, "must be a finite number > 0, got inf"),
    ("config_timeout_nan", "timeout = nan", 2, "key 'timeout' must be a finite number > 0, got nan"),
    ("config_timeout_inf", "timeout = inf", 2, "key 'timeout' must be a finite number > 0, got inf"),
    ("config_timeout_string", 'timeout = "600"', 2, "key 'timeout' must be a number"),
    ("config_timeout_huge", "timeout = 1e300", 2, "key 'timeout' must be at most"),
    ("config_budget_negative", "budget = -0.5", 2, "key 'budget' must be a finite number > 0"),
    ("config_budget_bool", "budget = true", 2, "key 'budget' must be a number, got bool"),
    ("config_threads_float", "threads = 1.5", 2, "key 'threads' must be an integer"),
    ("config_threads_huge", "threads = 10000", 2, "key 'threads' must be at most"),
    ("config_threads_string", 'threads = "2"', 2, "key 'threads' must be an integer, got str"),
    ("config_seed_negative", "seed = -1", 2, "key 'seed' must be a finite number >= 0"),
    ("config_seed_float", "seed = 0.5", 2, "key 'seed' must be an integer"),
    ("config_sizes_int", "sizes = 5", 2, "key 'sizes' must be a table"),
    ("config_sizes_string_value", 'sizes = {T = "a"}', 2, "size 'T' must be an integer"),
    ("config_sizes_zero", "sizes = {T = 0}", 2, "size 'T' must be a finite number > 0"),
    ("config_sizes_unused", "sizes = {Q = 3}", 2, "size 'Q' is not used by any selected model"),
    ("config_sizes_string_ok", 'sizes = "T=4"', 0, "1 unavailable"),
    ("config_dtypes_list_ints", "dtypes = [1, 2]", 2, "key 'dtypes' must be a string or a list of strings"),
    ("config_dtypes_unknown", 'dtypes = ["float8"]', 2, "unknown dtype 'float8'"),
    ("config_dtypes_empty_list", "dtypes = []", 2, "names nothing"),
    ("config_order_3", "order = 3", 2, "order must be 1, 2 or auto"),
    ("config_order_string", 'order = "x"', 2, "order must be 1, 2 or auto"),
    ("config_order_float", "order = 1.0", 2, "key 'order' must be a string"),
    ("config_suite_int", "suite = 5", 2, "key 'suite' must be a string"),
    ("config_suite_unknown", 'suite = "nightly"', 2, "unknown suite 'nightly'"),
    ("config_device_list", 'device = ["cpu"]', 2, "key 'device' must be a string"),
    ("config_device_unknown", 'device = "tpu"', 2, "unknown device 'tpu'"),
    ("config_losses_unknown", 'losses = ["nope"]', 2, "unknown loss 'nope'"),
    ("config_losses_table", "losses = {a = 1}", 2, "key 'losses' must be a string or a list of strings"),
    ("config_unknown_key", "modles = 1", 2, "unknown key(s) modles"),
    ("config_nested_table", "[run]\nmodels = 'rnn'", 2, "unknown key(s) run"),
    ("config_invalid_toml", "models = [rnn", 2, "is not valid TOML"),
    ("config_binary", "\x00\x01\x02", 2, "is not valid TOML"),
    ("config_empty", "", 0, "1 unavailable"),
    ("config_datetime", "seed = 1979-05-27", 2, "key 'seed' must be an integer, got date"),
    (
        "config_valid",
        'models = "rnn"\ndrivers = ["torch_nn_lstm"]\nthreads = 1\nbudget = 0.1\ntimeout = 60\n'
        "memory_limit_gb = 8\nseed = 3\norder = 1\nsizes = {T = 4}",
        0,
        "1 unavailable",
    ),
]

CASES: list[Case] = []


def _case(
    id: str,
    argv: str | tuple[str, ...],
    exit: int,
    words: str = "",
    setup: tuple[str, ...] = (),
    unchanged: bool = True,
    pipe_closed: bool = False,
) -> None:
    CASES.append(
        Case(id, tuple(argv.split()) if isinstance(argv, str) else argv, exit, words, setup, unchanged, pipe_closed)
    )


R = ("run", *QUICK)
OUT = ("--out", "{t}/r.jsonl")

# -- run: flags ------------------------------------------------------------------------------------
for name, flag, value, words in [
    ("unknown_model", "--models", "nosuch", "unknown model 'nosuch'"),
    ("unknown_driver", "--drivers", "nosuch", "unknown driver 'nosuch'"),
    ("unknown_environment", "--environments", "moon", "unknown environment 'moon'"),
    ("unknown_dtype", "--dtypes", "float8", "unknown dtype 'float8'"),
    ("unknown_device", "--device", "tpu", "unknown device 'tpu'"),
    ("unknown_suite", "--suite", "nightly", "unknown suite 'nightly'"),
    ("unknown_loss", "--losses", "nope", "unknown loss 'nope'"),
    ("empty_models", "--models", ",", "names nothing"),
    ("empty_drivers", "--drivers", ",", "names nothing"),
    ("empty_dtypes", "--dtypes", ",", "names nothing"),
    ("empty_environments", "--environments", ", ,", "names nothing"),
    ("empty_losses", "--losses", ",", "selects no loss"),
    ("order_3", "--order", "3", "order must be 1, 2 or auto"),
    ("order_word", "--order", "two", "order must be 1, 2 or auto"),
    ("sizes_zero", "--sizes", "T=0", "must be positive"),
    ("sizes_negative", "--sizes", "T=-3", "must be positive"),
    ("sizes_word", "--sizes", "T=abc", "not an integer"),
    ("sizes_float", "--sizes", "T=1.5", "not an integer"),
    ("sizes_unused", "--sizes", "Q=3", "not used by any selected model"),
    ("sizes_no_value", "--sizes", "T", "not KEY=VALUE"),
    ("seed_negative", "--seed", "-1", "--seed must be a finite number >= 0"),
    ("seed_word", "--seed", "abc", "invalid int value"),
    ("threads_zero", "--threads", "0", "--threads must be a finite number > 0"),
    ("threads_negative", "--threads", "-2", "--threads must be a finite number > 0"),
    ("threads_10000", "--threads", "10000", "--threads must be at most"),
    ("threads_float", "--threads", "1.5", "invalid int value"),
    ("budget_zero", "--budget", "0", "--budget must be a finite number > 0"),
    ("budget_negative", "--budget", "-1", "--budget must be a finite number > 0"),
    ("budget_nan", "--budget", "nan", "--budget must be a finite number > 0, got nan"),
    ("budget_inf", "--budget", "inf", "--budget must be a finite number > 0, got inf"),
    ("budget_word", "--budget", "fast", "invalid float value"),
    ("timeout_zero", "--timeout", "0", "--timeout must be a finite number > 0"),
    ("timeout_nan", "--timeout", "nan", "--timeout must be a finite number > 0, got nan"),
    ("timeout_inf", "--timeout", "inf", "--timeout must be a finite number > 0, got inf"),
    ("timeout_minus_inf", "--timeout", "-inf", "--timeout must be a finite number > 0"),
    ("timeout_huge", "--timeout", "1e12", "--timeout must be at most"),
    ("memory_negative", "--memory-limit-gb", "-1", "--memory-limit-gb must be a finite number > 0"),
    ("memory_zero", "--memory-limit-gb", "0", "--memory-limit-gb must be a finite number > 0"),
    ("memory_nan", "--memory-limit-gb", "nan", "--memory-limit-gb must be a finite number > 0, got nan"),
    ("memory_inf", "--memory-limit-gb", "inf", "--memory-limit-gb must be a finite number > 0, got inf"),
    ("shard_zero", "--shard", "0/2", "needs 1 <= I <= N"),
    ("shard_past_end", "--shard", "3/2", "needs 1 <= I <= N"),
    ("shard_zero_parts", "--shard", "1/0", "needs 1 <= I <= N"),
    ("shard_words", "--shard", "a/b", "is not I/N"),
    ("shard_no_slash", "--shard", "1", "is not I/N"),
]:
    given = (f"{flag}={value}",) if value.startswith("-") else (flag, value)  # argparse reads "-1" as a flag
    _case(f"run_{name}", (*R, *OUT, *given), 2, words)
_case("run_unknown_flag", "run --bogus-flag", 2, "unrecognized arguments")
_case("run_unknown_command", "bogus", 2, "invalid choice")
_case("run_flag_without_value", "run --models", 2, "expected one argument")
_case(
    "run_duplicates_run_once",
    (*R, "--models", "rnn,rnn", "--drivers", "torch_nn_lstm,torch_nn_lstm", *OUT),
    0,
    "1 unavailable",
    unchanged=False,
)
_case("run_quick_ok", (*R, *OUT), 0, "1 unavailable", unchanged=False)

# -- run: the results file ---------------------------------------------------------------------------
for name, out, setup, words in [
    ("out_is_directory", "{t}/d", ("dir",), "is a directory"),
    ("out_dev_full", "/dev/full", (), "is not a regular file"),
    ("out_dev_null", "/dev/null", (), "is not a regular file"),
    ("out_long_component", "{t}/{long}.jsonl", (), "File name too long"),
    ("out_long_path", "{t}/" + "/".join(["d" * 200] * 25) + "/r.jsonl", (), "File name too long"),
    ("out_under_a_file", "{t}/f/r.jsonl", ("file_as_dir",), "cannot write results file"),
    ("out_in_proc", "/proc/forbidden/r.jsonl", (), "cannot write results file"),
    ("out_existing_results", "{t}/r.jsonl", ("results",), "already exists"),
    ("out_existing_notes", "{t}/notes.txt", ("notes",), "already exists"),
    ("out_existing_notes_no_newline", "{t}/notes.txt", ("notes_no_newline",), "already exists"),
]:
    _case(f"run_{name}", (*R, "--out", out), 2, words, setup)
_case("run_out_existing_empty_file", (*R, *OUT), 0, "1 unavailable", ("empty",), unchanged=False)
_case("run_out_new_subdirectory", (*R, "--out", "{t}/new/dir/r.jsonl"), 0, "1 unavailable", unchanged=False)

# -- run --resume -------------------------------------------------------------------------------------
RESUME = (*R, "--resume", *OUT)
_case("resume_without_out", (*R, "--resume"), 2, "--resume needs --out FILE")
_case("resume_missing_file", RESUME, 2, "does not exist")
_case("resume_directory", (*R, "--resume", "--out", "{t}/d"), 2, "does not exist", ("dir",))
_case("resume_done", RESUME, 0, "0 rows", ("results",))
_case("resume_empty_file", RESUME, 0, "1 rows", ("empty",), unchanged=False)
_case("resume_blank_lines", RESUME, 0, "1 rows", ("blank_lines",), unchanged=False)
_case("resume_notes", (*R, "--resume", "--out", "{t}/notes.txt"), 2, "notes.txt:1: not a JSON record", ("notes",))
_case(
    "resume_notes_no_newline",
    (*R, "--resume", "--out", "{t}/notes.txt"),
    2,
    "notes.txt:1: not a JSON record",
    ("notes_no_newline",),
)
_case("resume_bad_middle_line", RESUME, 2, "r.jsonl:2: not a JSON record", ("bad_middle",))
_case("resume_bad_middle_complete_tail", RESUME, 2, "r.jsonl:2: not a JSON record", ("bad_middle_complete_tail",))
_case("resume_truncated_tail", RESUME, 0, "0 rows", ("truncated_tail",), unchanged=False)
_case("resume_complete_tail_kept", RESUME, 0, "0 rows", ("complete_tail_no_newline",), unchanged=False)
_case("resume_other_schema", RESUME, 2, "schema 1", ("other_schema",))
_case("resume_no_schema", RESUME, 2, "schema 1", ("no_schema",))
_case("resume_other_version", RESUME, 2, "written by rnnbench 0.0.1", ("other_version",))
_case("resume_other_settings", RESUME, 2, "threads 99 ->", ("other_settings",))
_case("resume_unavailable_reruns", RESUME, 0, "1 rows", ("unavailable_other_settings",), unchanged=False)
_case(
    "resume_other_threads", (*RESUME, "--threads", "1"), 0, "rows", ("results",), unchanged=False
)  # a row recorded as unavailable is decided again: never a conflict
for name in (
    "array_line",
    "string_line",
    "number_line",
    "empty_object",
    "missing_model",
    "missing_status",
    "wrong_status",
    "wrong_sizes",
    "binary",
    "latin1",
    "deep_nesting",
):
    _case(f"resume_{name}", RESUME, 2, "r.jsonl:1:", (name,))

# -- table and report: any file ------------------------------------------------------------------------
for name in [n for n in SETUPS if n.startswith(("missing_", "wrong_"))] + [
    "array_line",
    "string_line",
    "number_line",
    "empty_object",
    "deep_nesting",
    "binary",
    "latin1",
    "bom",
    "bad_middle",
    "bad_middle_complete_tail",
]:
    line = "2" if name.startswith("bad_middle") else "1"
    _case(f"table_{name}", ("table", "{t}/r.jsonl"), 2, f"r.jsonl:{line}:", (name,))
    _case(f"report_{name}", ("report", "{t}/r.jsonl", "--out-dir", "{t}/rep"), 2, f"r.jsonl:{line}:", (name,))
for name, setup, exit, words in [
    ("results", ("results",), 0, "1 rows unavailable"),
    ("truncated_tail", ("truncated_tail",), 0, "incomplete last line skipped"),
    ("complete_tail_no_newline", ("complete_tail_no_newline",), 0, "1 rows unavailable"),
    ("nan_literal", ("nan_literal",), 0, "torch_loop"),
    ("null_timing", ("null_timing",), 0, "torch_loop"),
    ("empty", ("empty",), 0, "model"),
    ("notes", ("notes",), 2, "not a JSON record"),
]:
    path = "{t}/notes.txt" if name == "notes" else "{t}/r.jsonl"
    _case(f"table_{name}", ("table", path), exit, words, setup)
_case("table_missing", "table {t}/none.jsonl", 2, "does not exist")
_case("table_directory", "table {t}/d", 2, "does not exist", ("dir",))
_case("table_no_files", "table", 2, "the following arguments are required")
_case("report_missing", "report {t}/none.jsonl", 2, "does not exist")
_case("report_empty", ("report", "{t}/r.jsonl", "--out-dir", "{t}/rep"), 2, "no records", ("empty",))
_case(
    "report_out_dir_is_file",
    ("report", "{t}/r.jsonl", "--out-dir", "{t}/o"),
    2,
    "cannot create",
    ("results", "outdir_is_file"),
)

# -- run --config -----------------------------------------------------------------------------------
_case("config_missing", (*R, *OUT, "--config", "{t}/none.toml"), 2, "does not exist")
_case("config_directory", (*R, *OUT, "--config", "{t}/c.toml"), 2, "is a directory", ("config_dir",))
for cid, text, exit, words in CONFIG_CASES:
    _config(cid, text)
    _case(cid, (*R, *OUT, "--config", "{t}/c.toml"), exit, words, (cid,), unchanged=exit == 2)

# -- sweep and fuzz flags -------------------------------------------------------------------------------
for name, argv, words in [
    ("sweep_lengths_word", "sweep --lengths a", "--lengths value 'a' is not an integer"),
    ("sweep_lengths_zero", "sweep --lengths 0", "--lengths value 0 must be positive"),
    ("sweep_nothing", "sweep --lengths , --hidden ,", "nothing to sweep"),
    ("sweep_hidden_negative", "sweep --hidden -1", "must be positive"),
    ("sweep_threads_zero", "sweep --threads 0", "--threads must be a finite number > 0"),
    ("sweep_threads_huge", "sweep --threads 10000", "--threads must be at most"),
    ("sweep_budget_nan", "sweep --budget nan", "--budget must be a finite number > 0, got nan"),
    ("sweep_driver_budget_zero", "sweep --driver-budget 0", "--driver-budget must be a finite number > 0"),
    ("sweep_timeout_inf", "sweep --timeout inf", "--timeout must be a finite number > 0, got inf"),
    ("sweep_dtypes_empty", "sweep --dtypes ,", "names nothing"),
    ("sweep_unknown_model", "sweep --models nosuch", "unknown model 'nosuch'"),
    ("sweep_unknown_driver", "sweep --drivers nosuch", "unknown driver 'nosuch'"),
    ("fuzz_cases_zero", "fuzz --cases 0", "--cases must be a finite number > 0"),
    ("fuzz_cases_negative", "fuzz --cases -5", "--cases must be a finite number > 0"),
    ("fuzz_shrink_negative", "fuzz --shrink -1", "--shrink must be a finite number >= 0"),
    ("fuzz_timeout_nan", "fuzz --timeout nan", "--timeout must be a finite number > 0, got nan"),
    ("fuzz_timeout_inf", "fuzz --timeout inf", "--timeout must be a finite number > 0, got inf"),
    ("fuzz_timeout_zero", "fuzz --timeout 0", "--timeout must be a finite number > 0"),
    ("fuzz_dtype_bfloat16", "fuzz --dtypes bfloat16", "unknown fuzzing dtype 'bfloat16'"),
    ("fuzz_dtypes_empty", "fuzz --dtypes ,", "names nothing"),
    ("fuzz_model_loss", "fuzz --losses model", "no model loss of its own"),
    ("fuzz_unknown_loss", "fuzz --losses nope", "unknown loss 'nope'"),
    ("fuzz_unknown_device", "fuzz --device tpu", "unknown device 'tpu'"),
    ("fuzz_unknown_driver", "fuzz --drivers nosuch", "unknown driver 'nosuch'"),
    ("fuzz_empty_drivers", "fuzz --drivers ,", "names nothing"),
]:
    _case(name, argv, 2, words)
_case(
    "fuzz_repro_dir_is_file",
    ("fuzz", "--cases", "1", "--repro-dir", "{t}/repro"),
    2,
    "cannot create",
    ("repro_is_file",),
)

# -- closed pipes: the reader of stdout went away (`rnnbench list | head -1`) ------------------------------
_case("list_closed_pipe", "list", 141, "", pipe_closed=True)
_case("table_closed_pipe", "table {t}/r.jsonl", 141, "", ("results",), pipe_closed=True)
_case("help_closed_pipe", "--help", 141, "", pipe_closed=True)

# -- input classes beyond flags (issue 31): campaign kinds, nested record fields, config size ---------------


def _fuzz_record() -> dict:
    """A fuzz campaign's outcome record, as `rnnbench fuzz` writes it."""
    from rnnbench.fuzz.campaign import Campaign
    from rnnbench.fuzz.outcome import Outcome

    campaign = Campaign(cases=1, seed=0, drivers=("torch_loop",), dtype="float64", device="cpu", losses=("sum",))
    return campaign.to_record(Outcome(0, "torch_loop", "ok", None, "", campaign.body(0), None, "", ""))


def _nested(path: str, value: object) -> Callable[[Path], None]:
    """A timed run record whose field at dotted `path` is `value`."""

    def setup(t: Path) -> None:
        rec = {
            **REC,
            "fwd_bwd": {"median_ms": 1.0, "q1_ms": 0.9, "q3_ms": 1.1},
            "cpu": {"notes": []},
            "roofline": {"fwd_bwd": {"fraction_of_peak": 0.5, "gflops": 1.0}},
            "gemm_peak": {"gflops": 2.0, "threads": 1},
            "environment": {"versions": {"torch": "2.13.0"}},
            "sizes": {"T": 4},
            "hvp": {"status": "ok"},
        }
        node = rec
        *parents, last = path.split(".")
        for key in parents:
            node = node[key]
        node[last] = value
        (t / "r.jsonl").write_text(json.dumps(rec) + "\n")

    return setup


SETUPS["fuzz_results"] = lambda t: (t / "r.jsonl").write_text(_lines(_fuzz_record()))
SETUPS["config_huge"] = _write("c.toml", "# padding\n" * 110000 + 'models = "rnn"\n')
_case("resume_fuzz_campaign_file", RESUME, 2, "holds outcomes of an `rnnbench fuzz` campaign", ("fuzz_results",))
_case(
    "fuzz_resume_run_file",
    ("fuzz", "--cases", "1", "--drivers", "torch_loop", "--resume", *OUT),
    2,
    "holds rows of `rnnbench run`, `sweep` or `versions`",
    ("results",),
)
_case("config_over_size_limit", (*R, *OUT, "--config", "{t}/c.toml"), 2, "bytes, over the", ("config_huge",))
for name, flag, value, words in [
    ("model", "--models", "lsmt", "unknown model 'lsmt' (did you mean 'lstm' or 'lstm2'?)"),
    ("driver", "--drivers", "torch_scna", "unknown driver 'torch_scna' (did you mean 'torch_scan'"),
    ("suite", "--suite", "quik", "unknown suite 'quik' (did you mean 'quick'?)"),
    ("environment", "--environments", "mian", "unknown environment 'mian' (did you mean 'main'?)"),
    ("loss", "--losses", "weigthed", "unknown loss 'weigthed' (did you mean 'weighted'?)"),
]:
    _case(f"run_mistyped_{name}", (*R, *OUT, flag, value), 2, words)
_config("config_mistyped_key", "modles = 'rnn'")
_case(
    "config_mistyped_key",
    (*R, *OUT, "--config", "{t}/c.toml"),
    2,
    "unknown key(s) modles (did you mean 'modes' or 'models'?)",
    ("config_mistyped_key",),
)
for fmt, words in [
    ("markdown", "| model "),
    ("csv", "model,driver,env,dtype,status"),
    ("json", '"driver": "torch_nn_lstm"'),
]:
    _case(f"table_format_{fmt}", ("table", "{t}/r.jsonl", "--format", fmt, "--all"), 0, words, ("results",))
_case("table_format_unknown", ("table", "{t}/r.jsonl", "--format", "html"), 2, "invalid choice: 'html'", ("results",))
for path, value, words in [
    ("roofline.fwd_bwd.fraction_of_peak", "half", "field 'roofline.fwd_bwd.fraction_of_peak' is str, not num"),
    ("roofline.fwd_bwd", 0.5, "field 'roofline.fwd_bwd' is float, not dict"),
    ("cpu.notes", "load", "field 'cpu.notes' is str, not list or null"),
    ("cpu.notes", [1], "field 'cpu.notes.0' is int, not str"),
    ("gemm_peak.gflops", None, "field 'gemm_peak.gflops' is NoneType, not num"),
    ("gemm_peak", {"threads": 1}, "no 'gemm_peak.gflops' field"),
    ("environment.versions.torch", 2.13, "field 'environment.versions.torch' is float, not str"),
    ("environment.versions", ["torch"], "field 'environment.versions' is list, not dict or null"),
    ("sizes.T", None, "field 'sizes.T' is NoneType, not int"),
    ("hvp.status", 1, "field 'hvp.status' is int, not str or null"),
    ("machine", {"hostname": None}, "field 'machine.hostname' is NoneType, not str"),
    ("fwd_bwd.q1_ms", None, "field 'fwd_bwd.q1_ms' is NoneType, not ms"),
    ("fwd", {"median_ms": 1}, "no 'fwd.q1_ms' field"),
    ("timestamp", 5, "field 'timestamp' is int, not str"),
    ("anchor", "yes", "field 'anchor' is str, not bool"),
    ("tolerance", "1e-6", "field 'tolerance' is str, not num or null"),
    ("sweep", {"axis": None}, "field 'sweep.axis' is NoneType, not str"),
]:
    name = f"nested_{path.replace('.', '_')}_{type(value).__name__}"
    SETUPS[name] = _nested(path, value)
    for command in (("table", "{t}/r.jsonl"), ("report", "{t}/r.jsonl", "--out-dir", "{t}/rep")):
        _case(f"{command[0]}_{name}", command, 2, f"r.jsonl:1: not an rnnbench record ({words})", (name,))
    _case(f"resume_{name}", RESUME, 2, f"r.jsonl:1: not an rnnbench record ({words})", (name,))


# -- compare: what it compares is what it says ----------------------------------------------------------
def _timed(run_id: str, **over) -> dict:
    # eleven samples within 0.5 %: two such runs are decided `same` (exit 0), not `noisy` (nothing measured)
    timing = {"median_ms": 1.0, "q1_ms": 0.998, "q3_ms": 1.002, "samples": [1 + 0.001 * i for i in range(-5, 6)]}
    return {**REC, "machine": {"hostname": "h"}, "run_id": run_id, "fwd_bwd": timing, **over}


SETUPS["compare_pair"] = lambda t: [(t / f"{side}.jsonl").write_text(_lines(_timed(side))) for side in ("a", "b")]
SETUPS["compare_nan_median"] = _write(
    "b.jsonl", _lines(_timed("b", fwd_bwd={"median_ms": float("nan"), "q1_ms": 1, "q3_ms": 1}))
)
SETUPS["compare_huge_median"] = _write(
    "b.jsonl", _lines(_timed("b", fwd_bwd={"median_ms": 1e308, "q1_ms": 1, "q3_ms": 1}))
)
SETUPS["compare_slash_model"] = _write("b.jsonl", _lines(_timed("b", model="rnn/../x")))
SETUPS["compare_bad_benchmark"] = _write("b.json", json.dumps({"benchmarks": [{"stats": "fast"}]}))
SETUPS["compare_fuzz"] = _write("f.jsonl", _lines({**REC, "model": "fuzz:0:0", "case": 0, "body": {}}))
C = ("compare", "{t}/a.jsonl")
_case("compare_two_runs", (*C, "{t}/b.jsonl"), 0, "-> exit 0", ("compare_pair",))
_case("compare_self", (*C, "{t}/a.jsonl"), 2, "the same runs", ("compare_pair",))
_case(
    "compare_no_common_row",
    (*C, "{t}/f.jsonl", "--across-machines"),
    2,
    "no row to compare",
    ("compare_pair", "compare_fuzz"),
)
_case("compare_empty_new", (*C, "{t}/r.jsonl", "--across-machines"), 3, "measured nothing", ("compare_pair", "empty"))
_case(
    "compare_nan_median",
    (*C, "{t}/b.jsonl"),
    2,
    "b.jsonl:1: not an rnnbench record (field 'fwd_bwd.median_ms'",
    ("compare_pair", "compare_nan_median"),
)
_case(
    "compare_huge_median",
    (*C, "{t}/b.jsonl"),
    2,
    "is 1e+308, not a time in ms",
    ("compare_pair", "compare_huge_median"),
)
_case(
    "compare_slash_model",
    (*C, "{t}/b.jsonl"),
    2,
    "field 'model' is 'rnn/../x'",
    ("compare_pair", "compare_slash_model"),
)
_case(
    "compare_bad_pytest_benchmark",
    (*C, "{t}/b.json"),
    2,
    "b.json: benchmarks[0]: stats is str",
    ("compare_pair", "compare_bad_benchmark"),
)

# -- processes, streams and outputs (issue: the contract beyond the command line) -------------------
# A matrix of drivers x environments with no row in it; outputs where nothing can be written (a
# sysfs directory refuses new files, to root too).
_case(
    "run_empty_matrix",
    (*R[:1], "--models", "rnn", "--drivers", "torch_xla_loop", "--environments", "main", *OUT),
    2,
    "no selected driver runs in the selected environments",
)
_case("run_out_unwritable_directory", (*R, "--out", "/sys/r.jsonl"), 2, "cannot write results file")
_case(
    "report_out_dir_unwritable", ("report", "{t}/r.jsonl", "--out-dir", "/sys"), 2, "cannot write there", ("results",)
)
_case("fuzz_repro_dir_unwritable", ("fuzz", "--cases", "1", "--repro-dir", "/sys"), 2, "cannot write there")


def snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            out[str(path.relative_to(root))] = path.read_bytes()
    return out


def run_case(case: Case, t: Path) -> Observed:
    """Set up, run the command (in this process, or as a process with a closed stdout pipe),
    and observe the exit code, output and which files changed."""
    for name in case.setup:
        SETUPS[name](t)
    long = "x" * 300
    argv = [a.replace("{t}", str(t)).replace("{long}", long) for a in case.argv]
    before = snapshot(t)
    if case.pipe_closed:
        # Close the read end before the command writes: every write to stdout fails (EPIPE).
        r, w = os.pipe()
        os.close(r)
        proc = subprocess.run(
            [sys.executable, "-m", "rnnbench.cli", *argv], stdout=w, stderr=subprocess.PIPE, text=True, timeout=120
        )
        os.close(w)
        code, out, err = proc.returncode, "", proc.stderr
    else:
        from rnnbench import cli

        out_buf, err_buf = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out_buf), contextlib.redirect_stderr(err_buf):
            try:
                code = cli.main(argv)
            except SystemExit as exc:  # --help
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                code = -1
                traceback.print_exc(file=err_buf)
        out, err = out_buf.getvalue(), err_buf.getvalue()
    after = snapshot(t)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    return Observed(code, err, out, changed)


def problems(case: Case, seen: Observed) -> list[str]:
    """What differs from the case's expectation ([] when it holds)."""
    out = []
    lines = seen.stderr.strip().splitlines()
    if seen.exit != case.exit:
        out.append(f"exit {seen.exit}, expected {case.exit}")
    if "Traceback" in seen.stderr + seen.stdout:
        out.append("a traceback")
    if case.exit == 2:
        if len(lines) != 1 or not lines[0].startswith("rnnbench: error:"):
            out.append(f"{len(lines)} stderr lines, expected one 'rnnbench: error:' line")
        elif case.words not in lines[0]:
            out.append(f"the error line lacks {case.words!r}")
    elif case.exit == 141:
        if len(lines) > 1:
            out.append(f"{len(lines)} stderr lines, expected at most one")
    elif case.words and case.words not in seen.stdout + seen.stderr:
        out.append(f"the output lacks {case.words!r}")
    if case.unchanged and seen.changed:
        out.append(f"changed {', '.join(seen.changed)}")
    return out


def _expected(case: Case) -> str:
    what = {0: "exit 0", 2: "exit 2, one line", 141: "exit 141, no traceback"}.get(case.exit, f"exit {case.exit}")
    words = f": {case.words}" if case.words else ""
    return what + words + ("; files unchanged" if case.unchanged else "")


# Test modules whose cases need processes, signals or the library API: listed in the document
# with the outcome of one pytest run each.
FAULT_MODULES = (
    "tests/test_faults.py",
    "tests/test_isolation.py",
    "tests/test_results_file.py",
    "tests/test_api_validation.py",
    "tests/test_merged_views.py",
    "tests/test_fuzz_records.py",
    "tests/test_reliability.py::test_any_bytes_as_a_results_file",
    "tests/test_reliability.py::test_any_toml_document_as_a_config",
    # input classes beyond flags (issue 31); test_record_fields.py's 750 generated cases are
    # summarised by its base case (docs/reliability.md's class table names the module)
    "tests/test_inputs.py",
    "tests/test_api_inputs.py",
    "tests/test_packaging.py",
    "tests/test_repository_paths.py",
    "tests/test_record_fields.py::test_the_base_records_are_read_whole",
)


def matrix_table() -> tuple[str, int]:
    """Every case run once: the Markdown table and the number of failing cases."""
    import tempfile

    rows, failing = [], 0
    for case in CASES:
        with tempfile.TemporaryDirectory(prefix="rnnbench-reliability-") as tmp:
            seen = run_case(case, Path(tmp))
        bad = problems(case, seen)
        failing += bool(bad)
        cells = [
            case.id,
            f"`{case.command}`",
            _expected(case),
            ("PASS" if not bad else "FAIL: " + "; ".join(bad)) + " — " + seen.summary.replace(tmp, "{t}"),
        ]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "| case | command | expected | observed |\n|---|---|---|---|\n" + "\n".join(rows) + "\n", failing


def fault_table() -> tuple[str, int]:
    """The fault, API and property tests, each with its outcome and duration from one pytest run."""
    import tempfile
    import xml.etree.ElementTree as ET

    with tempfile.TemporaryDirectory(prefix="rnnbench-reliability-") as tmp:
        junit = Path(tmp) / "junit.xml"
        targets = [m for m in FAULT_MODULES if Path(m.split("::")[0]).exists()]
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *targets],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        suite = ET.parse(junit).getroot()
    rows, failing = [], 0
    for case in suite.iter("testcase"):
        outcome = "PASS"
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = (
                    f"{tag.upper()}: {(node.get('message') or '').splitlines()[0][:120] if node.get('message') else ''}"
                )
        failing += outcome.startswith(("FAILURE", "ERROR"))
        module = case.get("classname", "").replace(".", "/") + ".py"
        rows.append(f"| `{module}::{case.get('name')}` | {outcome} | {float(case.get('time', 0)):.1f} s |")
    return "| test | observed | time |\n|---|---|---|\n" + "\n".join(rows) + "\n", failing


def write_document(path: Path) -> int:
    """Fill the generated sections of the document (between its marker comments); returns the
    number of failing cases."""
    import re
    import time

    text = Path(path).read_text()
    matrix, failing = matrix_table()
    faults, failing_faults = fault_table()
    stamp = f"<!-- generated by `python tests/reliability_cases.py {path}` on {time.strftime('%Y-%m-%d')} -->\n"
    for name, table in (("matrix", matrix), ("faults", faults)):
        text = re.sub(
            f"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)",
            lambda m, table=table: m.group(1) + stamp + table + m.group(2),
            text,
            flags=re.S,
        )
    Path(path).write_text(text)
    return failing + failing_faults


if __name__ == "__main__":
    sys.exit(1 if write_document(Path(sys.argv[1])) else 0)
