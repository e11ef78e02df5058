"""`rnnbench list`: the models and drivers, with each driver's environments and availability here."""

from __future__ import annotations

import argparse
import shutil
import textwrap

from rnnbench import registry
from rnnbench.machine import environments

NAME = "list"
HELP = "models and drivers, with availability here"


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def _wrapped(head: str, text: str, width: int, indent: int) -> list[str]:
    """`head` then `text`, wrapped to `width` columns, continuation lines indented by `indent`."""
    return textwrap.wrap(
        f"{head} {text}".rstrip(), width=width, subsequent_indent=" " * indent, break_on_hyphens=False
    ) or [head]


def run(args: argparse.Namespace) -> int:
    # The terminal's width ($COLUMNS first), 120 where there is none (a pipe, CI): no line is longer.
    width = max(60, shutil.get_terminal_size((120, 24)).columns)
    lines = ["models:"]
    for m in registry.models().values():
        sizes = ",".join(f"{k}={v}" for k, v in m.default_sizes.items())
        lines += _wrapped(f"  {m.name:<18} {sizes:<22} oracle={m.oracle_kind:<13}", m.summary, width, 6)
    lines.append("drivers:")
    for d in registry.drivers().values():
        reasons = []
        in_envs = [name for name in environments.environments() if environments.runs(d, name)]
        for name in in_envs:
            env = environments.environments().get(name)
            reason = env.missing_reason() if env else f"unknown environment {name}"
            if reason is None and name == environments.current():
                reason = d.available()
            if reason:
                reasons.append(f"{name}: {reason}")
        lines += _wrapped(f"  {d.name:<34} [{','.join(in_envs)}]", d.summary, width, 6)
        if reasons:
            lines += _wrapped("      unavailable:", "; ".join(reasons), width, 8)
    print("\n".join(lines))
    return 0
