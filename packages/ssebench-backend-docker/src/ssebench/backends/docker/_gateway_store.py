"""The model gateway's run keys, budgets and spend: one SQLite file both sides share.

Standard library only: this file is also copied into the gateway's image, where
the LiteLLM hook (`images/proxy/ssebench_gateway_hook.py`) imports it as
`ssebench_gateway_store`. LiteLLM imports the hook module twice (once as
`custom_auth`, once as a callback), so no state lives in a module: every call
opens the file, and the file also outlives a restart of the proxy.

The runner opens a key for each run (`create_key`) and closes it when the run
ends (`revoke`, which returns what the run spent). The hook admits each call
(`admit`): the key must exist, be open, name the model, and its budget must not
be used up by what was spent plus a reservation for each call still in flight.
When a call returns, its reservation is replaced by its cost (`settle`), or
dropped if it failed (`release`). A call is admitted while
`spend + reservation x calls in flight < budget`, so calls made in parallel can
overshoot the budget by at most one reservation (when no call costs more than
that). Only a digest of each key is stored.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

KEY_PREFIX: Final = "sk-ssebench-"
"""Every run key starts with this."""

RESERVATION_TTL: Final = 900.0
"""Seconds after which a reservation no callback settled (a call LiteLLM dropped
before its logging) stops counting against the budget."""

SETTLE_WAIT: Final = 10.0
"""Seconds `revoke` waits for the calls of a run still in flight to be counted."""

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS keys (
    digest TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    models TEXT NOT NULL,
    budget REAL,
    reservation REAL NOT NULL,
    spend REAL NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    calls INTEGER NOT NULL DEFAULT 0,
    refused INTEGER NOT NULL DEFAULT 0,
    revoked INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    network TEXT
);
CREATE TABLE IF NOT EXISTS reservations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    digest TEXT NOT NULL,
    created REAL NOT NULL
);
"""


def _inside(address: str | None, network: str) -> bool:
    try:
        return address is not None and ipaddress.ip_address(address) in ipaddress.ip_network(
            network, strict=False
        )
    except ValueError:
        return False


def digest_of(key: str) -> str:
    """The stored form of a key: its SHA-256, hex."""
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class KeyUsage:
    """What one run's key has used."""

    run_id: str
    budget: float | None
    spend: float
    prompt_tokens: int
    completion_tokens: int
    calls: int
    refused: int
    """Calls refused because the budget was used up."""
    revoked: bool


@dataclass(frozen=True)
class Refusal:
    """Why a call was not admitted; `budget` marks an exhausted budget."""

    message: str
    budget: bool = False


class KeyStore:
    """The SQLite file of keys and reservations (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._local = threading.local()

    def _connection(self) -> sqlite3.Connection:
        # One connection per thread, kept open: closing the last one checkpoints the
        # WAL and deletes it (fsyncs), which cost a call ~10 ms on a busy disk.
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self._path, timeout=30, isolation_level=None)
            connection.execute("PRAGMA busy_timeout = 30000")
            # With WAL, NORMAL syncs at checkpoints rather than on every commit: a
            # commit survives the proxy's process ending (a restart) all the same.
            connection.execute("PRAGMA synchronous = NORMAL")
            self._local.connection = connection
        return connection

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        connection = self._connection()
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield connection
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def initialize(self) -> None:
        """Create the file and its tables if they are missing."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self._path, timeout=30)
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            connection.executescript(_SCHEMA)
            with contextlib.suppress(sqlite3.OperationalError):  # a file from before `network`
                connection.execute("ALTER TABLE keys ADD COLUMN network TEXT")
        finally:
            connection.close()

    def create_key(
        self, run_id: str, models: Sequence[str], budget: float | None, reservation: float
    ) -> str:
        """A fresh key for a run, allowed `models` and `budget` US dollars (None: no limit)."""
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        with self._transaction() as db:
            db.execute(
                "INSERT INTO keys (digest, run_id, models, budget, reservation, created) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    digest_of(key),
                    run_id,
                    json.dumps(list(models)),
                    budget,
                    reservation,
                    time.time(),
                ),
            )
        return key

    def bind(self, run_id: str, network: str) -> None:
        """Let the run's keys be used only from `network` (a CIDR: the run's own network)."""
        with self._transaction() as db:
            db.execute("UPDATE keys SET network = ? WHERE run_id = ?", (network, run_id))

    def admit(self, key: str, model: str | None, client: str | None = None) -> int | Refusal:
        """Admit one call from the address `client`: the reservation's ID, or why it is refused.

        A key bound to a run's network (`bind`) works from that network only, so a
        key that leaked to another run does not work there.
        """
        digest = digest_of(key)
        now = time.time()
        with self._transaction() as db:
            row = db.execute(
                "SELECT models, budget, reservation, spend, revoked, network FROM keys "
                "WHERE digest = ?",
                (digest,),
            ).fetchone()
            if row is None or row[4]:
                return Refusal("ssebench: this key is not valid (unknown, or its run has ended)")
            if row[5] is not None and not _inside(client, row[5]):
                return Refusal("ssebench: this key belongs to another run")
            models, budget, reservation, spend = json.loads(row[0]), row[1], row[2], row[3]
            if model is not None and model not in models:
                return Refusal(f"ssebench: this run may use only {', '.join(models)}")
            db.execute(
                "DELETE FROM reservations WHERE digest = ? AND created < ?",
                (digest, now - RESERVATION_TTL),
            )
            (in_flight,) = db.execute(
                "SELECT COUNT(*) FROM reservations WHERE digest = ?", (digest,)
            ).fetchone()
            if budget is not None and spend + reservation * in_flight >= budget:
                db.execute("UPDATE keys SET refused = refused + 1 WHERE digest = ?", (digest,))
                return Refusal(
                    f"ssebench: the run's budget of ${budget:.6g} is used up "
                    f"(${spend:.6g} spent); no more model calls",
                    budget=True,
                )
            cursor = db.execute(
                "INSERT INTO reservations (digest, created) VALUES (?, ?)", (digest, now)
            )
            return int(cursor.lastrowid or 0)

    def settle(
        self, reservation: int, key_digest: str, cost: float, prompt: int, completion: int
    ) -> None:
        """A call returned: drop its reservation and add what it cost."""
        with self._transaction() as db:
            db.execute("DELETE FROM reservations WHERE id = ?", (reservation,))
            db.execute(
                "UPDATE keys SET spend = spend + ?, prompt_tokens = prompt_tokens + ?, "
                "completion_tokens = completion_tokens + ?, calls = calls + 1 WHERE digest = ?",
                (cost, prompt, completion, key_digest),
            )

    def release(self, reservation: int) -> None:
        """A call failed: drop its reservation (safe to call more than once)."""
        with self._transaction() as db:
            db.execute("DELETE FROM reservations WHERE id = ?", (reservation,))

    def usage(self, run_id: str) -> KeyUsage | None:
        """What the run's key has used so far, or None if the run has no key."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT budget, spend, prompt_tokens, completion_tokens, calls, refused, revoked "
                "FROM keys WHERE run_id = ? ORDER BY created DESC LIMIT 1",
                (run_id,),
            ).fetchone()
        if row is None:
            return None
        return KeyUsage(run_id, row[0], row[1], row[2], row[3], row[4], row[5], bool(row[6]))

    def revoke(self, run_id: str, settle_wait: float = SETTLE_WAIT) -> KeyUsage | None:
        """Close every key of the run (safe to repeat) and return what it used.

        LiteLLM settles a call (its callback) just after answering it, so the calls
        still in flight get up to `settle_wait` seconds to be counted.
        """
        query = (
            "SELECT COUNT(*) FROM reservations WHERE digest IN "
            "(SELECT digest FROM keys WHERE run_id = ?)"
        )
        with self._transaction() as db:
            db.execute("UPDATE keys SET revoked = 1 WHERE run_id = ?", (run_id,))
        deadline = time.monotonic() + settle_wait
        while time.monotonic() < deadline:
            with self._transaction() as db:
                (in_flight,) = db.execute(query, (run_id,)).fetchone()
            if not in_flight:
                break
            time.sleep(0.05)
        with self._transaction() as db:
            db.execute(
                "DELETE FROM reservations WHERE digest IN "
                "(SELECT digest FROM keys WHERE run_id = ?)",
                (run_id,),
            )
        return self.usage(run_id)
