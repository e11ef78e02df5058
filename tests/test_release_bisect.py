"""`rnnbench versions --bisect` (rnnbench.planning.release_bisect, release_probe): both edges of an
issue over fake releases with a fake probe (no environment is created), the line that says them,
the environment definitions built for a release, the disk budget, and the command's bad input."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rnnbench.check.bugs import known_issues
from rnnbench.machine import environments
from rnnbench.planning import release_bisect, release_probe
from rnnbench.planning.release_bisect import AFTER, BEFORE, Release, edges

RELEASES = [f"2.{minor}.{patch}" for minor in range(0, 16) for patch in range(2)]  # 2.0.0 ... 2.15.1


def _fake(first: int, last: int, skips: frozenset[int] = frozenset()):
    """A probe over RELEASES: reproduces on positions first..last, cannot decide on `skips`."""
    probed: list[str] = []

    def probe(version: str) -> tuple[bool | None, str]:
        probed.append(version)
        i = RELEASES.index(version)
        return (None if i in skips else first <= i <= last), f"probed {version}"

    return probe, probed


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_both_edges_of_any_range_in_log2_probes_outside_the_measured_range(data) -> None:
    n = len(RELEASES)
    first = data.draw(st.integers(0, n - 1), label="first bad")
    last = data.draw(st.integers(first, n - 1), label="last bad")
    low = data.draw(st.integers(first, last), label="measured low")
    high = data.draw(st.integers(low, last), label="measured high")
    since = data.draw(st.integers(0, low), label="since")
    probe, probed = _fake(first, last)
    result = edges(
        "x",
        package="torch",
        releases=RELEASES,
        measured=[RELEASES[low], RELEASES[high]],
        probe=probe,
        since=RELEASES[since],
    )
    assert not any(low <= RELEASES.index(v) <= high for v in probed)  # the measured range is not probed again
    assert len(probed) == len(set(probed)) == result.probes
    below, above = low - since, n - 1 - high
    assert len(probed) <= math.ceil(math.log2(below + 1)) + math.ceil(math.log2(above + 1))
    if below:
        assert result.lower.exact and result.lower.candidates[result.lower.first_bad] == RELEASES[max(first, since)]
    if above:
        fixed = result.upper.candidates[result.upper.first_bad]
        assert result.upper.exact and fixed == (RELEASES[last + 1] if last + 1 < n else AFTER)


def test_the_line_names_both_edges_the_unaffected_release_and_the_cost() -> None:
    probe, probed = _fake(RELEASES.index("2.10.0"), RELEASES.index("2.14.1"))
    result = edges(
        "torch-inductor-x",
        package="torch",
        releases=RELEASES,
        measured=["2.11.0", "2.13.0"],
        probe=probe,
        since="2.9.0",
    )
    line = release_bisect.format_line(result, seconds=720, peak_bytes=21e9)
    assert line == (
        "torch-inductor-x: reproduces from 2.10.0 through 2.14.1; fixed in 2.15.0; 2.9.1 not affected "
        f"({len(probed)} probes, 12 min, 21 GB peak)"
    )


def test_a_range_open_at_both_ends_says_so() -> None:
    probe, _ = _fake(0, len(RELEASES) - 1)
    result = edges("y", package="torch", releases=RELEASES, measured=["2.11.0"], probe=probe, since="2.9.0")
    assert release_bisect.describe(result) == (
        "y: reproduces from 2.9.0 (the oldest release probed) through 2.15.1; not fixed in any held release"
    )
    result = edges("y", package="torch", releases=RELEASES, measured=["2.9.0", "2.15.1"], probe=probe, since="2.9.0")
    assert result.probes == 0
    assert release_bisect.describe(result) == (
        "y: reproduces from 2.9.0 (the first measured; nothing older probed: --since 2.9.0) through 2.15.1; "
        "no newer release held (2.15.1 is the newest)"
    )


def test_a_since_above_the_measured_start_never_claims_nothing_older_is_held() -> None:
    """--since 2.11.0 over a range measured from 2.9.0: 2.0.0-2.8.1 are held but were not asked for,
    so the line says --since stopped the search, never that no older release is held."""
    probe, probed = _fake(0, len(RELEASES) - 1)
    result = edges("w", package="torch", releases=RELEASES, measured=["2.9.0", "2.15.1"], probe=probe, since="2.11.0")
    assert result.lower is None and not probed
    line = release_bisect.describe(result)
    assert line.startswith("w: reproduces from 2.9.0 (the first measured; nothing older probed: --since 2.11.0) ")
    assert "no held release" not in line
    # --since below the start with no held release between them: that is what the line says
    key = release_bisect.release_key
    held = [v for v in RELEASES if v == "2.9.0" or key(v) >= key("2.10.0")]
    result = edges("w", package="torch", releases=held, measured=["2.9.0"], probe=probe, since="2.5.0")
    assert result.lower is None
    assert release_bisect.describe(result).startswith("w: reproduces from 2.9.0 (no held release from 2.5.0 up to it) ")


def test_a_release_that_cannot_decide_leaves_a_range_naming_it() -> None:
    skip = RELEASES.index("2.14.1")
    probe, probed = _fake(0, RELEASES.index("2.14.0"), skips=frozenset({skip}))
    result = edges("z", package="torch", releases=RELEASES, measured=["2.13.0"], probe=probe, since="2.13.0")
    assert "2.14.1" in probed and not result.upper.exact
    assert release_bisect.describe(result).endswith(
        "through 2.14.0; fixed in one of 2.14.1, 2.15.0 (2.14.1 could not decide)"
    )
    assert result.upper.skipped == ("2.14.1",)


def test_the_sentinels_are_never_probed() -> None:
    probe, probed = _fake(0, len(RELEASES) - 1)
    edges("s", package="torch", releases=RELEASES, measured=["2.5.0"], probe=probe, since="2.0.0")
    assert BEFORE not in probed and AFTER not in probed and probed


def test_index_versions_oldest_first_without_local_builds() -> None:
    text = "torch (2.15.0)\nAvailable versions: 2.15.0, 2.13.0+cpu, 2.13.0, 2.9.1, 2.10.0\n  INSTALLED: 2.13.0+cpu\n"
    assert release_bisect.parse_index_versions(text) == ["2.9.1", "2.10.0", "2.13.0", "2.15.0"]
    assert release_bisect.parse_index_versions("ERROR: No matching distribution found for nosuch") == []


@pytest.mark.parametrize("issue", known_issues.registry(), ids=lambda i: i.id)
def test_every_registered_issue_has_measured_releases_its_spec_claims(issue) -> None:
    for package, spec in issue.versions.items():
        measured = release_bisect.measured_releases(issue, package, [])
        assert measured and all(known_issues.version_matches(v, spec) for v in measured), (issue.id, spec)


def test_a_release_environment_moves_the_lockstep_pins_and_frees_other_frameworks() -> None:
    template = environments.get("jax-0.12.0.1")
    name, spec = release_probe.release_spec("jax", Release("0.11.1", "3.12"), template, {})
    assert name == "jax-0.11.1"
    assert spec["requirements"] == ["jax[cpu]==0.11.1", "jaxlib==0.11.1", "flax", "numpy==2.4.6"]
    assert spec["python"] == "3.12" and spec["constraints"] is False
    environments.check_definition(name, spec, "test")  # the same form as an environments.toml entry
    name, spec = release_probe.release_spec(
        "torch", Release("2.9.1"), environments.get("torch-2.15.0"), {"torch-2.9.1": 1}
    )
    assert name == "bisect-torch-2.9.1" and spec["requirements"] == ["torch==2.9.1", "numpy==2.4.6"]
    assert "python" not in spec


def test_an_existing_environment_pinning_the_release_is_reused(monkeypatch) -> None:
    monkeypatch.setattr(environments, "_EXTRA", dict(environments._EXTRA))  # add_definitions' additions go
    monkeypatch.setenv(environments.DEFINITIONS_VAR, os.environ.get(environments.DEFINITIONS_VAR, "{}"))
    probe = release_probe.ReleaseProbe(
        issue="torch-inductor-scan-aliasing-saved-output-carry",
        package="torch",
        releases={"2.10.0": Release("2.10.0"), "2.9.1": Release("2.9.1")},
        run_jobs=lambda jobs: [],
        budget_bytes=1,
        made=OrderedDict(),
    )
    assert probe.environment_for("2.10.0") == "torch-2.10.0"  # environments.toml's entry
    name = probe.environment_for("2.9.1")
    assert name == "torch-2.9.1" and environments.get(name).requirements == ("torch==2.9.1", "numpy==2.4.6")


def test_the_disk_budget_removes_the_oldest_made_environment_first(monkeypatch) -> None:
    removed: list[str] = []
    monkeypatch.setattr(release_probe.env_create, "remove", lambda name, log=print: removed.append(name) or True)
    made = OrderedDict([("torch-2.9.0", 5), ("torch-2.9.1", 6)])
    probe = release_probe.ReleaseProbe(
        issue="torch-inductor-scan-aliasing-saved-output-carry",
        package="torch",
        releases={},
        run_jobs=lambda jobs: [],
        budget_bytes=12,
        made=made,
    )
    probe._make_room()  # 11 held + 6 (the largest made) > 12: the oldest goes
    assert removed == ["torch-2.9.0"] and list(made) == ["torch-2.9.1"]
    release_probe.remove_made(made)
    assert removed == ["torch-2.9.0", "torch-2.9.1"] and not made


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--bisect", "nosuch"], "unknown issue 'nosuch'"),
        (["--bisect", "torch-inductor-index-put-expanded-self,nosuch"], "unknown issue 'nosuch'"),
        (["--bisect", "torch-inductor-index-put-expanded-self", "--disk-budget", "0"], "--disk-budget"),
        (["--bisect", "torch-inductor-index-put-expanded-self", "--resume", "--out", "x.jsonl"], "neither --from"),
    ],
)
def test_bisect_bad_input_is_one_line_exit_2(argv: list[str], words: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rnnbench.cli", "versions", *argv], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_an_issue_without_held_releases_is_one_line_exit_2(monkeypatch, capsys) -> None:
    from rnnbench.cli.main import main

    monkeypatch.setattr(release_bisect, "held_releases", lambda package, pythons: [])
    assert main(["versions", "--bisect", "torch-inductor-index-put-expanded-self"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    issue = "torch-inductor-index-put-expanded-self"
    assert err == [f"rnnbench: error: --bisect {issue}: the package index holds no release of torch, nothing to bisect"]


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("RNNBENCH_BISECT_RELEASES") != "1",
    reason="downloads two CUDA torch builds (gigabytes each) and probes them: RNNBENCH_BISECT_RELEASES=1 runs it",
)
def test_bisect_creates_probes_and_removes_a_release_environment(tmp_path) -> None:
    """The upper edge of the index-put entry above 2.13.0: creates the CUDA torch builds it probes
    (gigabytes each), finds the fix in 2.14.0, and removes what it made. Opt-in (docs/testing.md#tiers): 10 GB
    of downloads and two inductor probes would be a third of CI's time on a fresh machine; the search is tested
    above on fake releases, and the real run is recorded in docs/results/2026-12-07-bug-versions-bisect.md."""
    out = tmp_path / "bisect.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "rnnbench.cli", "versions", "--bisect", "torch-inductor-index-put-expanded-self"]
        + ["--since", "2.11.0", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=3600,
        env={**os.environ},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # measured 2026-12-07 (docs/results/2026-12-07-bug-versions-bisect.md): 2.14.1 right, then 2.14.0 right
    # the registry's range starts at 2.9.0 (the bisect of 2026-12-07), below --since: only the upper edge is probed
    want = "torch-inductor-index-put-expanded-self: reproduces from 2.9.0 "
    assert want in proc.stdout and "through 2.13.0; fixed in 2.14.0 (2 probes," in proc.stdout, proc.stdout
    assert out.stat().st_size > 0
