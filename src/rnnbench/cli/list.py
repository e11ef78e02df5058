"""`rnnbench list`: the models and drivers, with each driver's environments and availability here."""

from __future__ import annotations

import argparse
import shutil
import textwrap

from rnnbench import registry
from rnnbench.machine import environments

NAME = "list"
HELP = "models and drivers, with availability here"

UNAVAILABLE_MARK = "*"
"""After an environment in a driver's list: the driver cannot run there now (the reason is said
once, under the drivers: not created, or the driver's own reason in this interpreter)."""


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
    envs = environments.environments()
    here = environments.current()
    # Each reason is said once below the drivers, not under every driver it applies to: a missing
    # environment stops every driver of its framework, a missing package every driver of it here.
    missing = {name: env.missing_reason() for name, env in envs.items()}
    not_created: list[str] = []  # environments some driver needs, in definition order
    own: dict[str, list[str]] = {}  # a driver's own reason in this interpreter -> those drivers
    lines.append(f"drivers: [the environments each runs in; {UNAVAILABLE_MARK}: cannot run there now, see below]")
    for d in registry.drivers().values():
        shown = []
        for name in (n for n in envs if environments.runs(d, n)):
            reason = missing[name]
            if reason and name not in not_created:
                not_created.append(name)
            if reason is None and name == here and (own_reason := d.available()):
                own.setdefault(own_reason, []).append(d.name)
                reason = own_reason
            shown.append(name + (UNAVAILABLE_MARK if reason else ""))
        lines += _wrapped(f"  {d.name:<34} [{','.join(shown)}]", d.summary, width, 6)
    if not_created:
        lines.append(f"environments not created here ({UNAVAILABLE_MARK} above; `rnnbench env list` shows every one):")
        for name in sorted(not_created, key=list(envs).index):
            lines += _wrapped(f"  {name:<14}", str(missing[name]), width, 6)
    for reason, names in own.items():
        head = f"unavailable in {here} ({UNAVAILABLE_MARK} above):"
        lines += _wrapped(head, f"{reason}: {', '.join(names)}", width, 6)
    print("\n".join(lines))
    return 0
