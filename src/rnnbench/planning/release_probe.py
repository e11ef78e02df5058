"""The probe of `rnnbench versions --bisect` (rnnbench.planning.release_bisect): one release of a
framework as an environment made from data, the issue's probe rows of the bug x version table run
there through the ordinary runner, and the verdict the table gives that release.

An environment for a release is an environments.toml entry that pins exactly that release (reused
as it is: the same folder, created on demand), else a definition of the same form built here
(`release_spec`) and added as a --config file adds one (environments.add_definitions), never
written to the TOML. Environments the probe creates are held within a disk budget (the oldest made
one removed before a creation would pass it) and removed at the end unless kept; the ones that
existed before are never removed."""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rnnbench import registry
from rnnbench.machine import env_create, environments
from rnnbench.planning import bug_versions
from rnnbench.planning.release_bisect import Release, release_key
from rnnbench.report import bug_table


def _pin(requirement: str) -> tuple[str, str | None]:
    """("jax", "0.12.0.1") of "jax[cpu]==0.12.0.1"; (name, None) for an unpinned requirement."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(?:==\s*([^\s;,]+))?", requirement)
    if not m:
        return requirement.strip(), None
    return m.group(1).lower().replace("-", "_"), m.group(3)


def _pinned(env: environments.Environment, package: str) -> str | None:
    return next((v for r in env.requirements if (p := _pin(r))[0] == package and (v := p[1])), None)


def pins(env: environments.Environment, package: str, version: str) -> bool:
    """Whether `env`'s requirements pin `package` at `version` exactly."""
    return any(_pin(r) == (package, version) for r in env.requirements)


def release_spec(
    package: str, release: Release, template: environments.Environment, taken: Mapping[str, Any]
) -> tuple[str, dict[str, Any]]:
    """(name, definition) of an environment for `release` of `package`, from `template` (an
    environment pinning another release of it): the package's pin moved to the release, and so is
    every pin at the template's version of the package (jaxlib with jax), since those are released
    together; any other framework's pin (flax) left to the resolver, which picks one that accepts
    the release; numpy and the rest as the template pins them. No pip constraint files: the release
    is pinned exactly, and a machine-wide cap below it would make it uninstallable rather than
    another release. `taken`: names in use (a clash gets a `bisect-` prefix)."""
    moved = _pinned(template, package)
    frameworks = {p for f in registry.frameworks().values() for p in f.packages} - {"numpy"}
    requirements = []
    for requirement in template.requirements:
        name, version = _pin(requirement)
        if version == moved:
            requirements.append(requirement.replace(f"=={moved}", f"=={release.version}"))
        elif name in frameworks:
            requirements.append(requirement.split("==")[0])
        else:
            requirements.append(requirement)
    name = f"{package}-{release.version}"
    if name in taken:
        name = f"bisect-{name}"
    spec: dict[str, Any] = {
        "about": f"{package} {release.version}, made by `rnnbench versions --bisect` from {template.name}",
        "requirements": requirements,
        "constraints": False,
    }
    if release.python:
        spec["python"] = release.python
    return name, spec


class ReleaseProbe:
    """probe(version) -> (reproduces: True / False / None, evidence) for `issue` (a KnownIssue id) of
    `package`; its rows go to `results` (a results_file.ResultsFile) through `run_jobs`."""

    def __init__(
        self,
        *,
        issue: str,
        package: str,
        releases: Mapping[str, Release],
        run_jobs: Callable[[list], list[dict[str, Any]]],
        budget_bytes: int,
        made: OrderedDict[str, int],
        log: Callable[[str], None] = print,
    ):
        self.issue, self.package, self.releases = issue, package, releases
        self.run_jobs, self.budget_bytes, self.log = run_jobs, budget_bytes, log
        self.made = made  # environments this bisect created -> their size (shared across issues)
        self.peak_bytes = sum(made.values())
        self.probes = [p for p in bug_table.probes() if p.bug == issue]

    def environment_for(self, version: str) -> str:
        """The environment name for `version`: an existing definition pinning it that runs one of the
        issue's probe rows, else a definition built by release_spec and added."""
        envs = environments.environments()
        for name, env in envs.items():
            if (env.on_demand or not env.creatable) and pins(env, self.package, version) and self._jobs(name):
                return name
        templates = [e for e in envs.values() if e.on_demand and _pinned(e, self.package)]
        if not templates:
            raise LookupError(f"no environment in environments.toml pins {self.package} to build a release's from")
        template = max(templates, key=lambda e: release_key(_pinned(e, self.package) or "0"))
        name, spec = release_spec(self.package, self.releases[version], template, envs)
        environments.add_definitions({name: spec}, "versions --bisect")
        return name

    def _jobs(self, environment: str) -> list:
        return bug_versions.probe_jobs(self.probes, [environment])

    def _make_room(self) -> None:
        """Remove the oldest environments this bisect made until one more of the largest size made
        so far fits the budget."""
        estimate = max(self.made.values(), default=0)
        while self.made and sum(self.made.values()) + estimate > self.budget_bytes:
            name, _ = self.made.popitem(last=False)
            env_create.remove(name, log=self.log)

    def __call__(self, version: str) -> tuple[bool | None, dict[str, Any]]:
        start = time.perf_counter()
        try:
            name = self.environment_for(version)
            env = environments.get(name)
            if env.missing_reason():
                self._make_room()
                env_create.create(name, log=self.log)
                self.made[name] = env_create.size_bytes(Path(env.prefix))
                self.peak_bytes = max(self.peak_bytes, sum(self.made.values()))
        except Exception as e:  # an uninstallable release is a skip, as `git bisect skip`
            reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            self.log(f"{self.package} {version}: cannot be installed: {reason}")
            return None, {"environment": None, "skipped": f"cannot be installed: {reason}"}
        records = self.run_jobs(self._jobs(name))
        verdicts = bug_table.outcomes(records).get(self.issue, {}).get((self.package, version), [])
        reproduced = bug_table.reproduced_versions(records).get(self.issue, {}).get(self.package, {}).get(version)
        evidence = {"environment": name, "verdicts": verdicts, "seconds": round(time.perf_counter() - start, 1)}
        self.log(
            f"{self.issue} on {self.package} {version}: "
            + {True: "reproduces", False: "not reproduced", None: "cannot decide"}[reproduced]
            + f" ({', '.join(verdicts) or 'no rows'}; {evidence['seconds']:.0f} s)"
        )
        return reproduced, evidence


def remove_made(made: OrderedDict[str, int], log: Callable[[str], None] = print) -> None:
    """Remove every environment a bisect made (`made`, emptied; the end of a run without
    --keep-environments)."""
    while made:
        name, _ = made.popitem(last=False)
        env_create.remove(name, log=log)
