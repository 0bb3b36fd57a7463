"""The web application: pages, the JSON API they use, the terminal's WebSocket.

Routes (every one behind the token, see `_access`):

- `/` the runs; `/runs/{id}` one run; `/evals/{id}` an evaluation's report
  (rendered by `ssebench report`'s own code);
- `/api/runs?task=&agent=&model=&outcome=`, `/api/runs/{id}`,
  `/api/runs/{id}/logs?since=N`, `/api/runs/{id}/dialog`,
  `/api/runs/{id}/daemon/capabilities`, `/api/runs/{id}/daemon/diff`, `/api/evals`;
- `/api/runs/{id}/terminal` (WebSocket), only on a backend with `supports_exec`.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Final

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp
from starlette.websockets import WebSocket

from ssebench.spec import Backend, ContainerRole, SSEBenchError, contract
from ssebench.web._access import TokenGate
from ssebench.web._assets import STATIC
from ssebench.web._data import Catalogue, to_json
from ssebench.web._terminal import ROOT_USER, SHELL, refuse_terminal, serve_terminal, user_of

DAEMON_VIEWS: Final = frozenset({"capabilities", "diff"})
"""What the page reads from a running run's daemon (GET, agent-facing, read-only)."""

DAEMON_TIMEOUT: Final = 10.0
EVAL_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
FILTERS: Final = ("task", "agent", "model", "outcome")
_SECURITY_HEADERS: Final = {
    # Everything the pages load is served here; nothing is framed or fetched elsewhere.
    "content-security-policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def _json(data: bytes, status: int = 200) -> Response:
    return Response(data, status_code=status, media_type="application/json")


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)


def _page(name: str) -> FileResponse:
    return FileResponse(STATIC / name, media_type="text/html", headers=_SECURITY_HEADERS)


def create_app(
    backend: Backend[Any],
    results: Path,
    evals: Path,
    token: str,
    node_modules: Path,
    *,
    allow_root_terminal: bool = False,
) -> ASGIApp:
    """The ASGI application, behind the token gate.

    Args:
        backend: the backend the runs are on.
        results: the results folder (`results/`).
        evals: the evaluations' folder (`evals/`).
        token: what every request must carry.
        node_modules: where xterm.js is (see `_assets.node_modules`).
        allow_root_terminal: whether the terminal may run a shell as root (else `model`
            only).
    """
    catalogue = Catalogue(backend, results)

    async def runs_page(request: Request) -> Response:
        return _page("runs.html")

    async def run_page(request: Request) -> Response:
        return _page("run.html")

    async def eval_page(request: Request) -> Response:
        eval_id = request.path_params["eval_id"]
        if EVAL_ID.fullmatch(eval_id) is None:
            return _error(404, f"no evaluation {eval_id!r}")
        from ssebench.runner._report import report_of
        from ssebench.runner._report_html import render_html

        folder = evals / eval_id
        try:
            report = await run_in_threadpool(report_of, folder)
        except (SSEBenchError, OSError) as exc:
            return _error(404, str(exc))
        html = await run_in_threadpool(render_html, report, folder.absolute())
        return HTMLResponse(html, headers=_SECURITY_HEADERS)

    async def api_runs(request: Request) -> Response:
        filters = {key: request.query_params.get(key, "") for key in FILTERS}
        answer = await run_in_threadpool(catalogue.runs, filters)
        return _json(to_json(answer))

    async def api_run(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        answer = await run_in_threadpool(catalogue.run, run_id)
        if answer is None:
            return _error(404, f"no run has the ID {run_id!r}")
        return _json(to_json(answer))

    async def api_logs(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            since = max(0, int(request.query_params.get("since", "0")))
        except ValueError:
            return _error(400, "since takes a line number (0 or more)")
        answer = await run_in_threadpool(catalogue.logs, run_id, since)
        if answer is None:
            return _error(404, f"no run has the ID {run_id!r}")
        return _json(to_json(answer))

    async def api_dialog(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        entries = await run_in_threadpool(catalogue.dialog, run_id)
        if entries is None:
            return _error(404, f"no run directory for the run {run_id!r}")
        return _json(to_json(entries))

    async def api_daemon(request: Request) -> Response:
        run_id, view = request.path_params["run_id"], request.path_params["view"]
        if view not in DAEMON_VIEWS:
            return _error(404, f"the page reads only {', '.join(sorted(DAEMON_VIEWS))}")
        return await run_in_threadpool(_ask_daemon, catalogue, run_id, view)

    async def api_evals(request: Request) -> Response:
        return _json(to_json(await run_in_threadpool(_evals, evals)))

    async def terminal(socket: WebSocket) -> None:
        run_id = socket.path_params["run_id"]
        asked = socket.query_params.get("user")
        user = user_of(asked, allow_root=allow_root_terminal)
        if not backend.supports_exec:
            await socket.close(code=1008)
            return
        if user is None:
            await refuse_terminal(
                socket,
                f"a shell runs as model{', or root' if allow_root_terminal else ''} only, "
                f"not as {asked!r}"
                + ("" if allow_root_terminal else " (root: ssebench web --allow-root-terminal)"),
            )
            return
        info, folder = await run_in_threadpool(catalogue.find, run_id)
        if info is None or info.state != "running" or folder is None:
            await socket.close(code=1008)
            return
        if not (folder / contract.GRADED_MARKER).exists():
            # Integrity rule (docs/integrity.md): no code of model's may start until the
            # run is graded; the shell is model's (or root's, beside the agent's files).
            await refuse_terminal(socket, f"run {run_id} is not graded yet")
            return
        # model's shell is in the agent's container (its own tools; nothing but model
        # ever runs there), root's in the checker.
        container: ContainerRole = "task" if user == ROOT_USER else "agent"
        try:
            argv = backend.exec_argv(
                info.handle, list(SHELL), user=user, tty=True, stdin=True, container=container
            )
        except SSEBenchError:
            await socket.close(code=1011)
            return
        await serve_terminal(socket, argv, folder, run_id)

    routes = [
        Route("/", runs_page),
        Route("/runs/{run_id}", run_page),
        Route("/evals/{eval_id}", eval_page),
        Route("/api/runs", api_runs),
        Route("/api/runs/{run_id}", api_run),
        Route("/api/runs/{run_id}/logs", api_logs),
        Route("/api/runs/{run_id}/dialog", api_dialog),
        Route("/api/runs/{run_id}/daemon/{view}", api_daemon),
        Route("/api/evals", api_evals),
        WebSocketRoute("/api/runs/{run_id}/terminal", terminal),
        Mount("/static", StaticFiles(directory=STATIC)),
        Mount("/vendor", StaticFiles(directory=node_modules / "@xterm")),
    ]
    return TokenGate(Starlette(routes=routes), token)


def _ask_daemon(catalogue: Catalogue, run_id: str, view: str) -> Response:
    """GET `/view` from the run's daemon, through the backend's `endpoint`."""
    info, _ = catalogue.find(run_id)
    if info is None:
        return _error(404, f"no container of the run {run_id!r} exists")
    if info.state != "running":
        return _error(409, f"run {run_id} is not running ({info.state})")
    try:
        url = catalogue.backend.endpoint(info.handle, contract.DAEMON_PORT)
    except SSEBenchError as exc:
        return _error(502, str(exc))
    if not url.startswith(("http://", "https://")):
        return _error(502, f"the backend gave no HTTP URL for the daemon: {url!r}")
    try:
        with urllib.request.urlopen(f"{url}/{view}", timeout=DAEMON_TIMEOUT) as answer:  # noqa: S310 - http(s) only, checked above
            data = answer.read(8 << 20)
    except urllib.error.HTTPError as exc:
        return _error(502, f"the run's daemon answered {exc.code} to /{view}")
    except (OSError, ValueError) as exc:
        return _error(502, f"cannot reach the run's daemon at {url}: {exc}")
    try:
        json.loads(data)
    except ValueError:
        return _error(502, f"the run's daemon sent no JSON for /{view}")
    return _json(data)


def _evals(folder: Path) -> list[str]:
    try:
        names = sorted(
            path.name
            for path in folder.iterdir()
            if (path / "eval.json").is_file() and EVAL_ID.fullmatch(path.name)
        )
    except OSError:
        return []
    return names
