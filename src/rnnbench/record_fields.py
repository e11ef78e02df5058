"""What a record's fields are: every field a reader uses, by dotted path, with its JSON types
(FIELDS), and the check on reading that names the first field that breaks it (problem)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Every field a reader of records uses (table, report, charts, HTML, --resume, fuzz, versions), by its
# dotted path ("*": every key of a dict or item of a list), with its JSON types: checked on reading, so
# a hand-edited or foreign line is one error naming file:line:field, never a crash in a reader later.
# "!" marks a field that must be present (at the top: in every record; nested: whenever its parent
# is a dict). Fields not listed are carried, not read.
FIELDS: dict[str, str] = {
    "model": "str!",
    "driver": "str!",
    "dtype": "str!",
    "status": "str!",
    "schema": "int",
    "rnnbench_version": "str",
    "fingerprint": "str",
    "timestamp": "str",
    "environment_name": "str",
    "env_label": "str",
    "framework": "str",
    "framework_family": "str",
    "anchor": "bool",
    "device": "str",
    "seed": "int",
    "loss_form": "str",
    "report": "str",
    "reason": "str",
    "raw_status": "str|null",
    "max_rel_error": "num|null",
    "tolerance": "num|null",
    "first_call_s": "num|null",
    "fwd_first_call_s": "num|null",
    "sizes": "dict",
    "sizes.*": "int",
    "settings": "dict",
    "machine": "dict",
    "machine.hostname": "str",
    "machine.cpu": "str|null",
    "machine.cores": "int|null",
    "machine.platform": "str|null",
    "fwd_bwd": "dict|null",
    "fwd_bwd.median_ms": "num!",
    "fwd_bwd.q1_ms": "num!",
    "fwd_bwd.q3_ms": "num!",
    "fwd": "dict|null",
    "fwd.median_ms": "num!",
    "fwd.q1_ms": "num!",
    "fwd.q3_ms": "num!",
    # the timed samples kept per row (schema 3; rnnbench compare's intervals)
    "fwd_bwd.samples": "list",
    "fwd_bwd.samples.*": "num",
    "fwd.samples": "list",
    "fwd.samples.*": "num",
    # a CUDA row's GPU (rnnbench.run.accelerator): two GPUs are two machines
    "machine.accelerator": "dict|null",
    "machine.accelerator.name": "str|null",
    "machine.accelerator.uuid": "str|null",
    "machine.accelerator.jax_device_kind": "str|null",
    "machine.accelerator.index": "int|null",
    "hvp": "dict|null",
    "hvp.status": "str|null",
    "hvp.raw_status": "str|null",
    "hvp.report": "str|null",
    "cpu": "dict",
    "cpu.notes": "list|null",
    "cpu.notes.*": "str",
    "gemm_peak": "dict",
    "gemm_peak.gflops": "num!",
    "gemm_peak.threads": "int",  # a GPU peak has none
    "roofline": "dict",
    "roofline.*": "dict",
    "roofline.*.fraction_of_peak": "num!",
    "roofline.*.gflops": "num",
    # a row's environment (rnnbench.record.environment); a worker's error record once carried its name here
    "environment": "dict|str",
    "environment.versions": "dict|null",
    "environment.versions.*": "str",
    "environment.python": "str|null",
    "memory": "dict|null",
    "memory.peak_rss_mb": "num|null",
    "memory.method": "str|null",
    "sweep": "dict",
    "sweep.axis": "str!",
    "node": "dict",  # the Ray node a row ran on (--executor ray; rnnbench.run.executors)
    # fuzz records (rnnbench.fuzz.campaign.Campaign)
    "case": "int",
    "body": "dict",
    "minimal": "dict|null",
    "hvp_status": "str|null",
    "source": "str",
    "minimal_source": "str",
    "localization_report": "str",
    "repro": "str",
}
_KINDS: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "num": (int, float),
    "bool": (bool,),
    "dict": (dict,),
    "list": (list,),
    "null": (type(None),),
}
TIMING_FIELDS = ("median_ms", "q1_ms", "q3_ms")
_MISSING = object()


def _is(value: Any, kinds: list[str]) -> bool:
    """Whether `value` has one of the JSON `kinds` (a bool is never a number)."""
    return any(isinstance(value, _KINDS[k]) and not (k in ("int", "num") and isinstance(value, bool)) for k in kinds)


def _at(value: Any, parts: list[str], prefix: str, required: bool) -> Iterable[tuple[str, Any]]:
    """(concrete dotted path, value or _MISSING) of every field `parts` names under `value`; nothing
    under a parent that is not a container (null, or of another type: its own check names it)."""
    if not parts:
        yield prefix, value
        return
    head, rest = parts[0], parts[1:]
    if isinstance(value, dict):
        items = list(value.items()) if head == "*" else [(head, value.get(head, _MISSING))]
    elif isinstance(value, list) and head == "*":
        items = list(enumerate(value))
    else:
        return
    for key, child in items:
        path = f"{prefix}.{key}" if prefix else str(key)
        if child is _MISSING:
            if required and not rest:
                yield path, _MISSING
            continue
        yield from _at(child, rest, path, required)


def problem(rec: Any) -> str | None:
    """Why `rec` is not a record this version can read (naming the field), or None."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    for path, spec in FIELDS.items():
        kinds = spec.rstrip("!").split("|")
        for where, value in _at(rec, path.split("."), "", spec.endswith("!")):
            if value is _MISSING:
                return f"no {where!r} field"
            if not _is(value, kinds):
                return f"field {where!r} is {type(value).__name__}, not {' or '.join(kinds)}"
    return None
