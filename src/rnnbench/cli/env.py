"""`rnnbench env list | create NAME... | remove NAME... | lock NAME...`: the Python environments rows run in."""

from __future__ import annotations

import argparse

from rnnbench.machine import env_create, environments
from rnnbench.planning import plan

NAME = "env"
HELP = "the Python environments rows run in (src/rnnbench/environments.toml): list, create, remove, lock"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=("list", "create", "remove", "lock"),
        help="list: every environment and its state; create: make the named ones; remove: delete the named "
        "ones from rnnbench's cache; lock: pin their packages",
    )
    p.add_argument(
        "names",
        nargs="*",
        help="environments to create (created once, then reused) or lock "
        "(requirements/locks/NAME.lock: every package pinned with its hashes)",
    )


def run(args: argparse.Namespace) -> int:
    envs = environments.environments()
    if args.action == "list":
        for name, env in envs.items():
            state = (
                env.missing_reason()
                and "missing"
                or ", ".join(f"{p} {v}" for p, v in environments.package_versions(name) if p != "numpy")
            )
            print(f"{name:<14} {'default' if env.default else 'matrix':<8} {state}\n{'':<24}{env.python}")
        return 0
    names = plan.names(",".join(args.names), list(envs), "environment", required=True)
    if args.action == "lock":
        # lazy: cli: --help and bad input answer without importing the lock writer
        from rnnbench.machine.locks import write_lock

        for name in names:
            write_lock(name, log=lambda line: print(f"rnnbench: {line}", flush=True))
        return 0
    if args.action == "remove":
        for name in names:
            if not env_create.remove(name, log=lambda line: print(f"rnnbench: {line}", flush=True)):
                print(f"{name}: not created, nothing to remove")
        return 0
    for name in names:
        env = env_create.create(name, log=lambda line: print(f"rnnbench: {line}", flush=True))
        print(f"{name}: {env.python}")
    return 0
