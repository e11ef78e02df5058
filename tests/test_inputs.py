"""Input classes that do not come from flags, each refused by one validator with one line and exit 2
(or, for a cache, measured again): config paths that are not regular files of bounded size, plugins
that fail, results files of another campaign kind, caches of another shape.

The cases whose old behaviour hangs or eats memory (a FIFO or /dev/zero as --config) run as
processes under a timeout and an address-space limit; the rest are rows of the reliability matrix
(tests/reliability_cases.py)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rnnbench.machine import roofline

QUICK = ["run", "--models", "rnn", "--drivers", "torch_nn_lstm"]


def _limit_memory() -> None:  # a reader of /dev/zero fails here instead of filling the machine
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def _rnnbench(*argv: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rnnbench.cli", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env},
        preexec_fn=_limit_memory,
    )


def _one_line_exit_2(proc: subprocess.CompletedProcess, words: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("rnnbench: error:"), proc.stderr
    assert words in lines[0], lines[0]


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory", "socket"])
def test_a_config_that_is_not_a_regular_file_is_refused_unread(kind: str, tmp_path: Path) -> None:
    import socket

    path = tmp_path / "c.toml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        path = Path("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    else:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
    out = tmp_path / "r.jsonl"
    proc = _rnnbench(*QUICK, "--out", str(out), "--config", str(path), timeout=60)
    _one_line_exit_2(proc, "is a directory" if kind == "directory" else "is not a regular file")
    assert not out.exists()


def test_a_config_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    from rnnbench import inputs

    path = tmp_path / "c.toml"
    path.write_text("# padding\n" * (inputs.MAX_BYTES // 10 + 1) + 'models = "rnn"\n')
    proc = _rnnbench(*QUICK, "--out", str(tmp_path / "r.jsonl"), "--config", str(path))
    _one_line_exit_2(proc, "bytes, over the")


def test_a_requirements_file_of_a_config_environment_must_be_a_regular_file(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[environments.moon]\nrequirements = "/dev/zero"\n')
    proc = _rnnbench(*QUICK, "--out", str(tmp_path / "r.jsonl"), "--config", str(config), timeout=60)
    _one_line_exit_2(proc, "environment 'moon': requirements file /dev/zero is not a regular file")


PLUGINS = {
    "raises": "raise RuntimeError('the plugin is broken')\n",
    "syntax": "def (:\n",
    "imports_missing": "import nosuchmodule_rnnbench\n",
    "model_twice": """
        from rnnbench_models.rnn import MODELS as _RNN
        MODELS = (_RNN[0],)  # a model name the package defines already
    """,
    "driver_twice": """
        from rnnbench.drivers.torch.loop import DRIVERS as _LOOP
        DRIVERS = (_LOOP[0],)
    """,
    "model_string": "MODELS = ['my_lstm']\n",  # a name where the Model belongs
    "drivers_not_a_list": "from rnnbench.drivers.torch.loop import DRIVERS as _LOOP\nDRIVERS = _LOOP[0]\n",
}
PLUGIN_WORDS = {
    "raises": "plugin module 'p_raises' named in RNNBENCH_PLUGINS raised RuntimeError at import (",
    "syntax": "plugin module 'p_syntax' named in RNNBENCH_PLUGINS raised SyntaxError at import",
    "imports_missing": "cannot import plugin module 'p_imports_missing' named in RNNBENCH_PLUGINS",
    "model_twice": "model name 'rnn' is defined in rnnbench_models.rnn and p_model_twice",
    "driver_twice": "driver name 'torch_loop' is defined in rnnbench.drivers.torch.loop and p_driver_twice",
    "model_string": "p_model_string.MODELS holds str 'my_lstm'; it must be a list of rnnbench.model.Model",
    "drivers_not_a_list": "p_drivers_not_a_list.DRIVERS is Driver ",
}


@pytest.mark.parametrize("name", sorted(PLUGINS))
@pytest.mark.parametrize("command", ["list", "run"])
def test_a_failing_plugin_is_named_in_one_line(name: str, command: str, tmp_path: Path) -> None:
    (tmp_path / f"p_{name}.py").write_text(textwrap.dedent(PLUGINS[name]))
    argv = ["list"] if command == "list" else [*QUICK, "--out", str(tmp_path / "r.jsonl")]
    proc = _rnnbench(
        *argv,
        RNNBENCH_PLUGINS=f"p_{name}",
        PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    )
    _one_line_exit_2(proc, PLUGIN_WORDS[name])
    assert not (tmp_path / "r.jsonl").exists()


def _fake_measurement(calls: list):
    def measure(request: dict, python: str, timeout_s: float) -> dict:
        calls.append(request)
        return {
            "by_framework": {"numpy": {"x".join(map(str, s)): 5.0 for s in request["shapes"]}},
            "errors": {},
            "others_on_cpus": 0.0,
        }

    return measure


RECENT = {"measured_epoch": 1e12}  # not stale: only its shape can send it to be measured again
ENTRY_SHAPES = {  # an entry of the peak cache as another version or a hand edit may leave it
    "rates_a_list": {"by_framework": {"numpy": [1, 2]}, **RECENT},
    "rate_a_string": {"by_framework": {"numpy": {"256x256x256": "fast"}}, **RECENT},
    "rate_null": {"by_framework": {"numpy": {"256x256x256": None}}, **RECENT},
    "shape_not_mxkxn": {"by_framework": {"numpy": {"big": 5.0}}, **RECENT},
    "by_framework_null": {"by_framework": None, **RECENT},
    "epoch_a_string": {"by_framework": {"numpy": {"256x256x256": 5.0}}, "measured_epoch": "yesterday"},
    "others_a_string": {"by_framework": {"numpy": {"256x256x256": 5.0}}, "others_on_cpus": "many", **RECENT},
    "errors_a_list": {"by_framework": {"numpy": {"256x256x256": 5.0}}, "errors": [1], **RECENT},
    "entry_a_list": [1, 2, 3],
}
FILE_SHAPES = {"entries_a_list": {"entries": [1]}, "top_a_list": [1, 2], "not_json": "{", "a_number": 3}


@pytest.mark.parametrize("shape", [*ENTRY_SHAPES, *FILE_SHAPES])
def test_a_peak_cache_of_another_shape_is_measured_again(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls: list = []
    monkeypatch.setattr(roofline, "_measure_in_worker", _fake_measurement(calls))
    roofline.peak_for("float32", 1, sizes=[], cpus=[0])  # a well-formed entry, to learn its key
    path = roofline.peak_cache_path()
    cache = json.loads(path.read_text())
    if shape in ENTRY_SHAPES:
        (key,) = cache["entries"]
        cache["entries"][key] = ENTRY_SHAPES[shape]
        path.write_text(json.dumps(cache))
    else:
        path.write_text(FILE_SHAPES[shape] if isinstance(FILE_SHAPES[shape], str) else json.dumps(FILE_SHAPES[shape]))
    peak = roofline.peak_for("float32", 1, sizes=[], cpus=[0])
    assert len(calls) == 2 and len(calls[1]["shapes"]) == len(roofline.PEAK_SQUARE)  # every shape again
    assert peak["gflops"] == 5.0
    (entry,) = json.loads(path.read_text())["entries"].values()
    assert set(entry["by_framework"]["numpy"].values()) == {5.0}  # rewritten in its own shape
