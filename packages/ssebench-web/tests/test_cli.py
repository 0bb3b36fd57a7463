"""`ssebench web` itself: the URL with its token, the warning off loopback, missing assets."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

SSEBENCH = str(Path(sys.executable).with_name("ssebench"))

pytestmark = pytest.mark.process


def _serve(*options: str) -> tuple[subprocess.Popen[str], str]:
    web = subprocess.Popen(
        [SSEBENCH, "web", "--backend", "docker", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert web.stdout is not None
    for _ in range(3):
        found = re.search(r"http://\S+", web.stdout.readline())
        if found:
            return web, found.group(0)
    web.kill()
    raise AssertionError("ssebench web printed no URL")


def _status(url: str) -> int:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_it_listens_on_loopback_and_prints_a_url_with_a_random_token() -> None:
    web, url = _serve()
    try:
        found = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]{40,})", url)
        assert found, url
        base = url.split("?")[0]
        assert _status(base) == 403
        assert _status(base + "api/runs") == 403
        assert _status(base + "?token=wrong") == 403
        assert _status(url) == 303
    finally:
        web.terminate()
        _, err = web.communicate(timeout=10)
    assert "not on loopback" not in err


def test_listening_elsewhere_warns_that_the_token_gives_a_shell() -> None:
    web, url = _serve("--host", "0.0.0.0")
    web.terminate()
    _, err = web.communicate(timeout=10)
    assert url.startswith("http://0.0.0.0:")
    assert (
        "ssebench web: warning: listening on 0.0.0.0, not on loopback: anyone who can reach "
        "it and has the token gets a shell in the runs" in err
    )


def test_missing_front_end_code_is_one_line_saying_how_to_install_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [SSEBENCH, "web", "--backend", "docker"],
        env={**os.environ, "SSEBENCH_WEB_ASSETS": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith("ssebench web: the web page's front-end code is not installed")
    assert "npm ci" in done.stderr
