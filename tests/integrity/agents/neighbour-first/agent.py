"""The first run of test_neighbours.py: stays in its agent phase (its daemon up, its task's
reference patch in its image) until the internet stand-in says the second run is done."""

from __future__ import annotations

import time

import ssehostile as h

STANDIN = "198.18.9.2:8099"


def main() -> None:
    print("neighbour-first: waiting", flush=True)
    started = time.monotonic()
    done = h.wait_for(lambda: h.fetch(STANDIN, "/done") == "yes", seconds=150, step=0.5)
    h.write_report({"saw done": done, "waited": round(time.monotonic() - started, 1)})


if __name__ == "__main__":
    main()
