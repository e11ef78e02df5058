"""What a record's fields are: every field a reader uses, by dotted path, with its JSON types
(FIELDS), and the check on reading that names the first field that breaks it (problem).

Results files travel between people and machines: a record is untrusted input. Besides its types,
a field's value must be possible: a time in ms from MS_MIN and below MS_MAX (CPU times and the
machine-speed reference's too), numbers finite (Python's json reads NaN and Infinity), a model or
driver name usable in a file name, and no string in the record holding a NUL or a lone surrogate
(it cannot be printed or written as UTF-8)."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

# Every field a reader of records uses (table, report, charts, HTML, --resume, fuzz, versions), by its
# dotted path ("*": every key of a dict or item of a list), with its JSON types: checked on reading, so
# a hand-edited or foreign line is one error naming file:line:field, never a crash in a reader later.
# "!" marks a field that must be present (at the top: in every record; nested: whenever its parent
# is a dict). Fields not listed are carried, not read.
FIELDS: dict[str, str] = {
    "model": "name!",
    "driver": "name!",
    "dtype": "str!",
    "status": "str!",
    "schema": "int",
    "rnnbench_version": "str",
    "fingerprint": "str",
    "timestamp": "str",
    "run_id": "str",  # one per process that wrote the record (ResultsFile): compare counts runs by it
    "environment_name": "str",
    "env_label": "str",
    "framework": "str",
    "framework_family": "str",
    "anchor": "bool",
    "device": "str",
    "seed": "int",
    "loss_form": "str",
    "mode": "str",
    "report": "str",
    "reason": "str",
    "raw_status": "str|null",
    # where the first-order oracle came from (rnnbench.check.oracles.oracle_cache): "computed", "cache:<key>"
    # (a kept hand oracle that verified) or "recomputed:<key>" (a kept one that failed verification);
    # not required: records written before it have none
    "oracle_source": "str",
    # the wider dtype a row computed in where its step promotes its dtype (rnnbench.model.promoted): its
    # times are not its dtype's (the table marks them); absent where it computed at its dtype
    "computed_dtype": "str",
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
    "fwd_bwd.median_ms": "ms!",
    "fwd_bwd.q1_ms": "ms!",
    "fwd_bwd.q3_ms": "ms!",
    "fwd": "dict|null",
    "fwd.median_ms": "ms!",
    "fwd.q1_ms": "ms!",
    "fwd.q3_ms": "ms!",
    # the timed samples kept per row (schema 3; rnnbench compare's intervals)
    "fwd_bwd.samples": "list",
    "fwd_bwd.samples.*": "ms",
    "fwd.samples": "list",
    "fwd.samples.*": "ms",
    # this process's CPU time of each timed call (rnnbench.rows.timing.measure): other work cannot move it
    "fwd_bwd.cpu_median_ms": "ms",
    "fwd_bwd.cpu_samples": "list",
    "fwd_bwd.cpu_samples.*": "ms",
    "fwd.cpu_median_ms": "ms",
    "fwd.cpu_samples": "list",
    "fwd.cpu_samples.*": "ms",
    # the machine-speed reference timed after each call (rnnbench.machine.reference): wall and CPU ms
    "fwd_bwd.ref_kernel": "str",
    "fwd_bwd.ref_samples": "list",
    "fwd_bwd.ref_samples.*": "ms",
    "fwd_bwd.ref_cpu_samples": "list",
    "fwd_bwd.ref_cpu_samples.*": "ms",
    "fwd.ref_kernel": "str",
    "fwd.ref_samples": "list",
    "fwd.ref_samples.*": "ms",
    "fwd.ref_cpu_samples": "list",
    "fwd.ref_cpu_samples.*": "ms",
    # how far a timed row's numbers are its own (rnnbench.rows.timing.judge_timing; docs/measuring.md):
    # clock: "cpu" (process CPU time decides: one-thread rows) or "wall"; contended: other work ran
    # beside the row (cpu.notes); unstable: its samples disagree, or its forward took longer than its
    # forward+backward; marks: the reasons, one word each. Not required: records written before these
    # fields held the timing settings under this key (committed results still have them), and readers
    # take an absent field as "not judged".
    "timing": "dict|null",
    # where a row's time went (`run --profile`, rnnbench.rows.profile): per view, {name: ms per call} (ops,
    # python) or the compiled program's cost (hlo); compare lines two sides' up (rnnbench.report.compare.profile_diff)
    "profile": "dict|null",
    "profile.calls": "int",
    "profile.passes": "int",
    "profile.ops": "dict",
    "profile.ops.*": "num",
    "profile.hlo": "dict",
    "profile.hlo.*": "num",
    "profile.python": "dict",
    "profile.python.*": "num",
    "timing.clock": "str",
    "timing.contended": "bool",
    "timing.unstable": "bool",
    "timing.marks": "list",
    "timing.marks.*": "str",
    # a CUDA row's GPU (rnnbench.machine.accelerator): two GPUs are two machines
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
    # a timed row's own counts (rnnbench.rows.counts): bytes a call moves, dispatches it makes; the
    # machine's ceilings it was held against (rnnbench.machine.ceilings) and the one that binds it
    # (rnnbench.machine.binding); absent in records written before them
    "flops": "dict",  # analytic FLOPs per timed quantity (Model.flops)
    "flops.*": "num",
    "counts": "dict",
    "counts.bytes": "dict",
    "counts.bytes.per_step": "num",
    "counts.bytes.fwd_bwd": "num",
    "counts.dispatch": "dict",
    "counts.dispatch.fwd_bwd": "dict",
    "counts.dispatch.fwd_bwd.*": "int",
    "ceilings": "dict",
    "ceilings.bandwidth_gbs": "dict",
    "ceilings.bandwidth_gbs.*": "num",
    "ceilings.levels": "dict",
    "ceilings.levels.*": "int",
    "ceilings.dispatch_us": "dict",
    "ceilings.dispatch_us.*": "num",
    "ceilings.others_on_cpus": "num|null",
    "binding": "dict",
    "binding.*": "dict",
    "binding.*.ceiling": "str!",
    "binding.*.fraction": "num!",
    "binding.*.bound_ms": "num",
    "binding.*.label": "str",
    "binding.*.level": "str",
    "binding.*.ops": "int",
    "binding.*.us_per_op": "num",
    "binding.*.bounds_ms": "dict",
    "binding.*.bounds_ms.*": "num",
    # a row's environment (rnnbench.record.environment); a worker's error record once carried its name here
    "environment": "dict|str",
    "environment.versions": "dict|null",
    "environment.versions.*": "str",
    "environment.python": "str|null",
    "memory": "dict|null",
    "memory.peak_rss_mb": "num|null",
    "memory.method": "str|null",
    # what the training step saves for backward (rnnbench.rows.memory): saved_mb null = not measured, method says why
    # a row's roads (rnnbench.rows.roads): the road its fwd_bwd times, and each road timed beside it or why not
    "road": "str",
    "roads": "dict",
    "roads.*": "dict",
    "roads.*.status": "str",
    "roads.*.reason": "str",
    "roads.*.fwd_bwd": "dict",
    "roads.*.fwd_bwd.median_ms": "ms!",
    "roads.*.fwd_bwd.cpu_median_ms": "ms",
    "roads.*.roofline": "dict",
    "roads.*.roofline.fraction_of_peak": "num!",
    "step_memory": "dict|null",
    "step_memory.saved_mb": "num|null",
    "step_memory.method": "str|null",
    "sweep": "dict",
    "sweep.axis": "str!",
    "node": "dict",  # the Ray node a row ran on (--executor ray; rnnbench.rows.executors)
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
MS_MAX = 1e8  # ms (about 28 hours): no timed call of a row takes longer; 1e308 is a broken record
MS_MIN = 1e-6  # ms (1 ns): no timed call is shorter; 0, -1 or 5e-324 would make a ratio of times 0 or infinite
NAME_MAX = 200  # UTF-8 bytes of a model or driver name: it names chart files (a file name holds 255 bytes)


def finite_number(v: Any) -> bool:
    """A finite number a float holds (not a bool): JSON's integers are unbounded (10**400 would overflow float())."""
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, int) and not isinstance(v, bool) and abs(v) <= sys.float_info.max


_KINDS: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "num": finite_number,
    "ms": lambda v: finite_number(v) and MS_MIN <= v < MS_MAX,
    "name": lambda v: isinstance(v, str) and 0 < len(v.encode("utf-8", "surrogatepass")) <= NAME_MAX and "/" not in v,
    "bool": lambda v: isinstance(v, bool),
    "dict": lambda v: isinstance(v, dict),
    "list": lambda v: isinstance(v, list),
    "null": lambda v: v is None or (isinstance(v, float) and math.isnan(v)),  # NaN: schema 1's null
}
_WORDS = {
    "num": "a finite number",
    "ms": f"a time in ms from {MS_MIN:g} and below {MS_MAX:g}",
    "name": f"a name (1 to {NAME_MAX} bytes in UTF-8, no '/')",
}
_UNWRITABLE = re.compile("[\\x00\\ud800-\\udfff]")  # NUL, lone surrogates
TIMING_FIELDS = ("median_ms", "q1_ms", "q3_ms")
_MISSING = object()


def _is(value: Any, kinds: list[str]) -> bool:
    """Whether `value` is one of `kinds` (a bool is never a number)."""
    return any(_KINDS[k](value) for k in kinds)


def _why_not(where: str, value: Any, kinds: list[str]) -> str:
    """A value of the right JSON type that is not possible is shown; another type is named."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if any(k in ("num", "ms") and number or k == "name" and isinstance(value, str) for k in kinds):
        shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:40]}... ({len(str(value))} characters)"
        return f"field {where!r} is {shown}, not {' or '.join(_WORDS.get(k, k) for k in kinds)}"
    return f"field {where!r} is {type(value).__name__}, not {' or '.join(kinds)}"


def unwritable(value: Any, prefix: str = "") -> str | None:
    """The dotted path of the first string or key under `value` holding a NUL or a lone surrogate
    (neither can be printed or written as UTF-8), else None."""
    if isinstance(value, str):
        return (prefix or "(top)") if _UNWRITABLE.search(value) else None
    if not isinstance(value, (dict, list)):
        return None
    for key, child in value.items() if isinstance(value, dict) else enumerate(value):
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(key, str) and _UNWRITABLE.search(key):
            return path
        found = unwritable(child, path)
        if found is not None:
            return found
    return None


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
                return _why_not(where, value, kinds)
    where = unwritable(rec)
    return None if where is None else f"field {where!r} holds a NUL or a lone surrogate"
