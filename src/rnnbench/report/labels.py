"""How every view names one record's row, from the record alone: what it ran on (env_label), the
machine (machine_of: one label for every merged view; several_machines), its loss form and H v verdict,
and what its training step saves for backward."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rnnbench import record


def env_label(rec: dict) -> str:
    """What a row ran on, by its framework's version ("torch 2.13.0", "torch 2.9.0", "jax 0.10.2");
    rows decided without starting their environment (e.g. it does not exist) carry its name.
    Always the record's own: a record without the field is named by its own framework and that
    framework's version in its own environment, else by its environment's name."""
    if rec.get("env_label"):
        return rec["env_label"]
    framework = rec.get("framework")
    version = ((rec.get("environment") or {}).get("versions") or {}).get(framework) if framework else None
    if version and version != "missing":
        return f"{framework} {str(version).split('+')[0]}"
    return rec.get("environment_name", "main")


def machine_of(rec: dict) -> str:
    """The machine a record was written on (its hostname, and its GPU for a row that ran on one:
    two GPUs are two machines; "?" for a record without one): the one label every merged view
    (table, failure reports, HTML page, charts) names a row's machine by."""
    machine = rec.get("machine") or {}
    gpu = record.accelerator_label(machine.get("accelerator") or {})
    return str(machine.get("hostname") or "?") + (f" [{gpu}]" if gpu else "")


def several_machines(records: Iterable[dict[str, Any]]) -> bool:
    """Whether the records come from more than one machine (merged results files): then every
    view names each row's machine and keeps machines apart wherever it groups rows."""
    return len({machine_of(r) for r in records}) > 1


def saved_mb(rec: dict) -> float | None:
    """What the row's training step saves for backward, in MiB (record field step_memory,
    rnnbench.rows.memory); None where it was not measured or the record predates the field."""
    return (rec.get("step_memory") or {}).get("saved_mb")


def dtype_label(rec: dict) -> str:
    """The row's dtype, and the wider one it computed in where its step promotes it ("float32 (ran
    float64)"): its times are not its dtype's."""
    return f"{rec['dtype']} (ran {rec['computed_dtype']})" if rec.get("computed_dtype") else rec["dtype"]


def loss_label(rec: dict) -> str:
    return rec.get("loss_form", "model")


def hvp_label(rec: dict) -> str:
    """The row's second-order verdict: its status, or "-" where order 2 was not asked for."""
    return str((rec.get("hvp") or {}).get("status", "-"))
