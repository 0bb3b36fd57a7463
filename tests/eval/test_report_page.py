"""The HTML report in a real browser: self-contained, and showing the numbers it computed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .chromium import open_page
from .conftest import recorded_eval

pytestmark = pytest.mark.process  # every test here starts a real process

SSEBENCH = str(Path(sys.executable).with_name("ssebench"))


def report(folder: Path) -> Path:
    subprocess.run([SSEBENCH, "report", str(folder)], check=True, capture_output=True)
    return folder / "report.html"


def test_the_report_page_fetches_nothing_and_shows_its_numbers(
    tmp_path: Path, chromium: str
) -> None:
    folder = recorded_eval(
        tmp_path,
        {
            ("task-a", "reference"): ["passed", "passed", "passed"],
            ("task-a", "dummy"): ["failed", "agent_timeout", "infra_error"],
            ("task-b", "reference"): ["passed", "passed", "stopped"],
            ("task-b", "dummy"): ["failed", "failed", "grader_error"],
        },
    )
    page = report(folder)
    html = page.read_text()

    for needle in ("http:", "https:", "//", "<script", "<link", "@import", " src="):
        assert needle not in html, needle
    # A plot's clip paths refer to elements of the page itself, by fragment.
    assert re.findall(r"url\((?!#)", html) == []
    opened = open_page(chromium, page, tmp_path)

    assert opened.page_requests == []
    assert "reference / none 100.0% (5/5, 95% CI 56.6%-100.0%)" in opened.text
    assert "dummy / none 0.0% (0/4, 95% CI 0.0%-49.0%)" in opened.text
    assert opened.dom.count("<svg") == 3


def test_the_request_check_sees_a_page_that_fetches(tmp_path: Path, chromium: str) -> None:
    page = tmp_path / "fetches.html"
    page.write_text('<html><body>hi<img src="http://127.0.0.1:9/x.png"></body></html>')

    opened = open_page(chromium, page, tmp_path)

    assert opened.page_requests == ["http://127.0.0.1:9/x.png"]
