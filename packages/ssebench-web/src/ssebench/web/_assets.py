"""Where the front-end code the page loads is: ours (static/) and xterm.js (from npm).

xterm.js arrives through npm at set-up (`npm ci` in packages/ssebench-web, run by
scripts/setup.sh) into node_modules/, which is never committed. The setting WEB_ASSETS names another
node_modules folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from ssebench.spec import UserError
from ssebench.spec.settings import WEB_ASSETS

ASSETS_ENV: Final = WEB_ASSETS.name
STATIC: Final = Path(__file__).parent / "static"
PACKAGE_ROOT: Final = Path(__file__).parents[3]
"""packages/ssebench-web in a checkout (the package is installed editable from it)."""

NEEDED: Final = (
    "@xterm/xterm/lib/xterm.js",
    "@xterm/xterm/css/xterm.css",
    "@xterm/addon-fit/lib/addon-fit.js",
)


def node_modules() -> Path:
    """The node_modules folder that holds xterm.js.

    Raises:
        UserError: it is not installed; says how to install it.
    """
    configured = os.environ.get(ASSETS_ENV)
    folder = Path(configured) if configured else PACKAGE_ROOT / "node_modules"
    missing = [name for name in NEEDED if not (folder / name).is_file()]
    if missing:
        raise UserError(
            f"the web page's front-end code is not installed ({folder / missing[0]} is missing): "
            f"run scripts/setup.sh, or `npm ci` in {PACKAGE_ROOT}, or set {ASSETS_ENV} to a "
            "node_modules folder holding @xterm/xterm and @xterm/addon-fit"
        )
    return folder
