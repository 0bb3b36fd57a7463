"""Where the minutes of a test run went: the time per tier and the slowest tests.

`scripts/test.sh` runs the tiers as pytest runs with `--junitxml=DIR/<run>.xml` and writes
each run's wall time, in seconds, to `DIR/<run>.wall`; one run may hold several tiers (the
docker and integrity tiers share one parallel run). Every test carries its tier and its
start and end (epoch seconds) as the junit properties `tier`, `started` and `ended` (the
root conftest.py sets them): a tier's wall time is, in each run that holds some of its
tests, from the first one's start to the last one's end, added up over the runs.

    python scripts/tier_report.py DIR [--expect unit,process,...] [--slowest 20]

With `--expect`, a tier named there that left no time is an error (exit 1): CI must
never print a table that silently lost a tier. Standard library only: it runs after
pytest, with whatever Python is at hand.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

TIERS = ("unit", "process", "docker", "integrity", "k8s", "chaos")
"""In the order scripts/test.sh runs them."""


@dataclass
class TierTimes:
    tests: int = 0
    failed: int = 0
    test_seconds: float = 0.0
    spans: dict[str, tuple[float, float]] = field(default_factory=dict)
    """By pytest run: the tier's first test's start and last test's end in it."""

    @property
    def wall_seconds(self) -> float | None:
        """The time the tier's tests took in each run, added up (None: none was timed)."""
        if not self.spans:
            return None
        return sum(ended - started for started, ended in self.spans.values())


@dataclass
class Report:
    tiers: dict[str, TierTimes] = field(default_factory=dict)
    runs: dict[str, float] = field(default_factory=dict)
    """Each pytest run's wall time, by its name."""
    slowest: list[tuple[float, str, str]] = field(default_factory=list)
    """(seconds, tier, test) of every test case read."""


def _properties(case: ET.Element) -> dict[str, str]:
    return {p.get("name") or "": p.get("value") or "" for p in case.iter("property")}


def _stamp(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _test_name(case: ET.Element) -> str:
    return f"{case.get('classname')}::{case.get('name')}"


def read(folder: Path) -> Report:
    """Every `<run>.xml` junit file of `folder` and the `<run>.wall` beside it."""
    report = Report()
    for xml_file in sorted(folder.glob("*.xml")):
        # Our own pytest runs wrote these files: no untrusted XML here.
        for case in ET.parse(xml_file).getroot().iter("testcase"):  # noqa: S314
            properties = _properties(case)
            tier = properties.get("tier") or xml_file.stem
            times = report.tiers.setdefault(tier, TierTimes())
            seconds = float(case.get("time") or 0.0)
            times.tests += 1
            times.test_seconds += seconds
            if case.find("failure") is not None or case.find("error") is not None:
                times.failed += 1
            started, ended = _stamp(properties.get("started")), _stamp(properties.get("ended"))
            if started is not None and ended is not None:
                first, last = times.spans.get(xml_file.stem, (started, ended))
                times.spans[xml_file.stem] = (min(first, started), max(last, ended))
            report.slowest.append((seconds, tier, _test_name(case)))
        wall = xml_file.with_suffix(".wall")
        if wall.is_file():
            report.runs[xml_file.stem] = float(wall.read_text())
    report.slowest.sort(reverse=True)
    return report


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"


def render(report: Report, slowest: int) -> list[str]:
    order = [t for t in TIERS if t in report.tiers] + sorted(set(report.tiers) - set(TIERS))
    lines = [
        "time per tier (wall: from its first test's start to its last one's end in each run"
        " that holds it; test time: its tests' setup, call and teardown added up, more than"
        " wall where tests ran in parallel; tiers sharing a run overlap)",
        f"{'tier':<10} {'tests':>6} {'failed':>6} {'wall':>8} {'test time':>10}",
    ]
    for name in order:
        times = report.tiers[name]
        lines.append(
            f"{name:<10} {times.tests:>6} {times.failed:>6} {_clock(times.wall_seconds):>8}"
            f" {_clock(times.test_seconds):>10}"
        )
    total = report.tiers.values()
    lines.append(
        f"{'all':<10} {sum(t.tests for t in total):>6} {sum(t.failed for t in total):>6}"
        f" {_clock(sum(report.runs.values()) if report.runs else None):>8}"
        f" {_clock(sum(t.test_seconds for t in total)):>10}"
    )
    if report.runs:
        runs = ", ".join(f"{name} {_clock(wall)}" for name, wall in report.runs.items())
        lines.append(f"pytest runs (wall, with start-up and collection): {runs}")
    lines.append(f"the {slowest} slowest tests (setup, call and teardown):")
    for seconds, tier, name in report.slowest[:slowest]:
        lines.append(f"{seconds:>8.1f} s  {tier:<9} {name}")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--expect", default="", help="comma-separated tiers that must have a time")
    parser.add_argument("--slowest", type=int, default=20)
    args = parser.parse_args(argv)
    report = read(args.folder)
    print("\n".join(render(report, args.slowest)))
    expected = [t for t in args.expect.split(",") if t]
    lost = [t for t in expected if report.tiers.get(t, TierTimes()).wall_seconds is None]
    if lost:
        print(
            f"tier report: no time for {', '.join(lost)} (no test of the tier with its start"
            f" and end in {args.folder}/*.xml)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
