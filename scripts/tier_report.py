"""Where the minutes of a test run went: the time per tier and the slowest tests.

`scripts/test.sh` runs each tier as a pytest run of its own with `--junitxml=DIR/<tier>.xml`
and writes its wall time, in seconds, to `DIR/<tier>.wall`; a run of a selection the
user chose is one file, `DIR/selection.xml`. Every test carries its tier as the junit
property `tier` (the root conftest.py sets it), so the table also splits a single run.

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
    wall_seconds: float | None = None


@dataclass
class Report:
    tiers: dict[str, TierTimes] = field(default_factory=dict)
    slowest: list[tuple[float, str, str]] = field(default_factory=list)
    """(seconds, tier, test) of every test case read."""


def _tier_of(case: ET.Element, default: str) -> str:
    for prop in case.iter("property"):
        if prop.get("name") == "tier":
            return prop.get("value") or default
    return default


def _test_name(case: ET.Element) -> str:
    return f"{case.get('classname')}::{case.get('name')}"


def read(folder: Path) -> Report:
    """Every `<name>.xml` junit file of `folder` and the `<name>.wall` beside it."""
    report = Report()
    for xml_file in sorted(folder.glob("*.xml")):
        run_name = xml_file.stem
        # Our own pytest runs wrote these files: no untrusted XML here.
        for case in ET.parse(xml_file).getroot().iter("testcase"):  # noqa: S314
            tier = _tier_of(case, run_name)
            times = report.tiers.setdefault(tier, TierTimes())
            seconds = float(case.get("time") or 0.0)
            times.tests += 1
            times.test_seconds += seconds
            if case.find("failure") is not None or case.find("error") is not None:
                times.failed += 1
            report.slowest.append((seconds, tier, _test_name(case)))
        wall = xml_file.with_suffix(".wall")
        if wall.is_file():
            report.tiers.setdefault(run_name, TierTimes()).wall_seconds = float(wall.read_text())
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
        "time per tier (wall: the tier's own pytest run; test time: its tests' setup, call"
        " and teardown added up, more than wall where tests ran in parallel)",
        f"{'tier':<10} {'tests':>6} {'failed':>6} {'wall':>8} {'test time':>10}",
    ]
    for name in order:
        times = report.tiers[name]
        lines.append(
            f"{name:<10} {times.tests:>6} {times.failed:>6} {_clock(times.wall_seconds):>8}"
            f" {_clock(times.test_seconds):>10}"
        )
    walls = [t.wall_seconds for t in report.tiers.values() if t.wall_seconds is not None]
    total = report.tiers.values()
    lines.append(
        f"{'all':<10} {sum(t.tests for t in total):>6} {sum(t.failed for t in total):>6}"
        f" {_clock(sum(walls) if walls else None):>8}"
        f" {_clock(sum(t.test_seconds for t in total)):>10}"
    )
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
            f"tier report: no time for {', '.join(lost)} (each tier's run writes"
            f" {args.folder}/<tier>.xml and <tier>.wall)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
