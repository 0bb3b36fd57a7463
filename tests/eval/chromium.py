"""Opening a page in headless Chromium with no network at all, and seeing what it asked for.

Chromium runs in a network namespace of its own (`unshare --net`): whatever it
or the page tries, nothing leaves this machine. Its net log says what was
asked: Chromium's own background requests have no initiator ("not an
origin"); a request the page made names the page's origin (`null` for a file).
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--hide-scrollbars",
]


@dataclass(frozen=True)
class Opened:
    """What Chromium made of a page: its DOM, and the URLs the page itself requested."""

    dom: str
    page_requests: list[str]

    @property
    def text(self) -> str:
        """The DOM's text, tags removed, whitespace collapsed."""
        return " ".join(re.sub(r"<[^>]*>", " ", self.dom).split())


def page_requests(net_log: Path) -> list[str]:
    """The URLs of the requests in a Chromium net log that a page made (not Chromium itself)."""
    data = json.loads(net_log.read_text())
    kinds = {number: name for name, number in data["constants"]["logEventTypes"].items()}
    found = []
    for event in data["events"]:
        params = event.get("params") or {}
        if kinds.get(event["type"]) != "URL_REQUEST_START_JOB" or "url" not in params:
            continue
        if params.get("initiator") != "not an origin":
            found.append(str(params["url"]))
    return found


def open_page(chromium: str, page: Path, out: Path, *, screenshot: Path | None = None) -> Opened:
    """Load `page` (a file) in headless Chromium with no network; optionally screenshot it.

    Args:
        chromium: the executable.
        page: the HTML file.
        out: a folder for Chromium's profile and net logs.
        screenshot: where to write a PNG of the page, if wanted.
    """
    url = page.absolute().as_uri()
    base = ["unshare", "--net", chromium, *_FLAGS, f"--user-data-dir={out / 'profile'}"]
    requests: list[str] = []
    dom_log = out / "net-dom.json"
    dumped = subprocess.run(
        [*base, f"--log-net-log={dom_log}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    requests += page_requests(dom_log)
    if screenshot is not None:
        shot_log = out / "net-shot.json"
        subprocess.run(
            [
                *base,
                f"--log-net-log={shot_log}",
                "--window-size=1280,2400",
                f"--screenshot={screenshot}",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=True,
        )
        requests += page_requests(shot_log)
    return Opened(dom=dumped.stdout, page_requests=requests)
