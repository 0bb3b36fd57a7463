"""scripts/test.sh's closing table: every tier's time, and the slowest tests.

A real pytest run makes the junit file each tier leaves; the report must name every
tier with its time, and refuse (exit 1, naming it) a tier whose time is missing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "scripts" / "tier_report.py"
TIERS = ("unit", "process", "docker", "integrity", "k8s", "chaos")

pytestmark = pytest.mark.process


def _run_report(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPORT), str(folder), "--expect", ",".join(TIERS)],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def tier_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six tiers' files, each made of one real pytest run's junit output."""
    folder = tmp_path_factory.mktemp("tiers")
    junit = folder / "made.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"--junitxml={junit}", str(ROOT / "tests/repo/test_settings.py")],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert cases, "the pytest run left no test case"
    properties = [{p.get("name"): p.get("value") for p in c.iter("property")} for c in cases]
    assert {p["tier"] for p in properties} == {"unit"}, f"each case names its tier: {properties}"
    assert all(float(p["started"]) <= float(p["ended"]) for p in properties), properties
    for number, tier in enumerate(TIERS, start=1):
        # The report reads each case's tier, start and end: here the tier spans number*61 s.
        tree = ET.parse(junit)
        for case in tree.getroot().iter("testcase"):
            for prop in case.iter("property"):
                value = {"tier": tier, "started": "1000.5", "ended": f"{1000.75 + number * 61}"}
                prop.set("value", value.get(prop.get("name") or "", prop.get("value") or ""))
        tree.write(folder / f"{tier}.xml")
        (folder / f"{tier}.wall").write_text(f"{number * 62}\n")
    junit.unlink()
    return folder


def test_the_report_gives_every_tier_its_wall_time_and_the_slowest_tests(
    tier_folder: Path,
) -> None:
    done = _run_report(tier_folder)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.strip()}
    for number, tier in enumerate(TIERS, start=1):
        minutes, seconds = divmod(number * 61, 60)
        assert tier in rows, f"no row for the {tier} tier:\n{done.stdout}"
        assert rows[tier][3] == f"{minutes}m{seconds:02d}s", rows[tier]
    assert "pytest runs (wall, with start-up and collection): chaos 6m12s" in done.stdout
    assert "slowest tests" in done.stdout
    assert "tests.repo.test_settings::test_" in done.stdout


def test_a_tier_whose_time_is_missing_fails_the_report_and_is_named(
    tier_folder: Path, tmp_path: Path
) -> None:
    folder = shutil.copytree(tier_folder, tmp_path / "tiers")
    k8s = (folder / "k8s.xml").read_text()
    (folder / "k8s.xml").write_text(k8s.replace('name="started"', 'name="no-start"'))
    (folder / "chaos.xml").unlink()
    (folder / "chaos.wall").unlink()
    done = _run_report(folder)
    assert done.returncode == 1
    assert "no time for k8s, chaos" in done.stderr


def test_a_tier_in_two_runs_gets_the_time_its_tests_took_in_each_added_up(
    tier_folder: Path, tmp_path: Path
) -> None:
    folder = shutil.copytree(tier_folder, tmp_path / "tiers")
    # The unit tier's cases again in a second run, 100 s long, an hour after the first.
    later = (folder / "unit.xml").read_text()
    later = later.replace('"1000.5"', '"4600.5"').replace('"1061.75"', '"4700.5"')
    (folder / "alone.xml").write_text(later)
    done = _run_report(folder)
    assert done.returncode == 0, done.stderr
    unit = next(line.split() for line in done.stdout.splitlines() if line.startswith("unit "))
    assert unit[3] == "2m41s", unit  # 61.25 s and 100 s, not the hour between
