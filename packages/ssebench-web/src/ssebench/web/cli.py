"""`ssebench web`: serve the page that watches runs, for the backend chosen as everywhere else."""

from __future__ import annotations

import ipaddress
import sys
import webbrowser
from pathlib import Path
from typing import Annotated, Final

import typer

from ssebench.spec import BACKEND_ENV, DEFAULT_BACKEND, contract

DEFAULT_HOST: Final = "127.0.0.1"

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _fail(message: str) -> None:
    print(f"ssebench web: {message}", file=sys.stderr)
    raise typer.Exit(1)


@app.command(epilog="Exit status: 0 stopped with Ctrl-C; 1 an error; 2 a usage error.")
def web(
    host: Annotated[
        str, typer.Option("--host", help="The address to listen on (loopback by default).")
    ] = DEFAULT_HOST,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="The port; 0 picks a free one.")
    ] = 0,
    open_it: Annotated[bool, typer.Option("--open", help="Open the page in a browser.")] = False,
    results: Annotated[
        Path, typer.Option("--dir", metavar="DIR", help="The results folder.")
    ] = Path(contract.HOST_RESULTS_ROOT),
    evals: Annotated[
        Path, typer.Option("--evals", metavar="DIR", help="The evaluations' folder.")
    ] = Path("evals"),
    backend: Annotated[
        str, typer.Option("--backend", envvar=BACKEND_ENV, help="The platform the runs are on.")
    ] = DEFAULT_BACKEND,
    allow_root_terminal: Annotated[
        bool,
        typer.Option(
            "--allow-root-terminal",
            help="Let the terminal open root shells in graded kept runs (model only without).",
        ),
    ] = False,
) -> None:
    """Serve a web page that lists runs (live and recorded), shows one run's grade, checks,
    output, diff and dialog, an evaluation's report, and a terminal in a running run.

    Prints a URL with a random token: every page, API call and WebSocket needs it.
    """
    import socket

    import uvicorn

    from ssebench.spec import SSEBenchError, get_backend
    from ssebench.web._access import new_token
    from ssebench.web._app import create_app
    from ssebench.web._assets import node_modules

    try:
        chosen = get_backend(backend)
        assets = node_modules()
    except SSEBenchError as exc:
        _fail(str(exc))
    if not _loopback(host):
        print(
            f"ssebench web: warning: listening on {host}, not on loopback: anyone who can "
            "reach it and has the token gets a shell in the runs",
            file=sys.stderr,
        )
    token = new_token()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
        # Listening before the URL is printed: a browser opened on it at once waits, not fails.
        listener.listen(128)
    except OSError as exc:
        _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    bound = listener.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    url = f"http://{shown}:{bound}/?token={token}"
    print(f"ssebench web: serving the {chosen.name} backend's runs at\n    {url}", flush=True)
    application = create_app(
        chosen, results, evals, token, assets, allow_root_terminal=allow_root_terminal
    )
    if open_it:
        webbrowser.open(url)
    config = uvicorn.Config(application, log_level="warning", ws="websockets-sansio")
    server = uvicorn.Server(config)
    server.run(sockets=[listener])
