"""`rnnbench list`: the models and drivers, with each driver's environments and availability here."""

from __future__ import annotations

import argparse

from rnnbench import registry
from rnnbench.run import environments

NAME = "list"
HELP = "models and drivers, with availability here"


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    print("models:")
    for m in registry.models().values():
        sizes = ",".join(f"{k}={v}" for k, v in m.default_sizes.items())
        print(f"  {m.name:<18} {sizes:<22} oracle={m.oracle_kind:<13} {m.summary}")
    print("drivers:")
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
        envs = ",".join(in_envs)
        print(f"  {d.name:<34} [{envs}] {d.summary}" + (f"  (unavailable: {'; '.join(reasons)})" if reasons else ""))
    return 0
