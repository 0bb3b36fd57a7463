"""The model gateway's run keys, budgets and spend: one SQLite file both sides share.

Standard library only: this file is also copied into the gateway's image, where
the LiteLLM hook (`images/proxy/ssebench_gateway_hook.py`) imports it as
`ssebench_gateway_store`. LiteLLM imports the hook module twice (once as
`custom_auth`, once as a callback), so no state lives in a module: every call
opens the file, and the file also outlives a restart of the proxy.

The runner opens a key for each run (`create_key`) and closes it when the run
ends (`revoke`, which returns what the run spent). The hook admits each call
(`admit`): the key must exist, be open, name the model, and the call's worst
case (`Cost`: its prompt, counted before the call, and as many completion tokens
as it may make) must fit what is left of the budget once every call in flight is
counted at its own worst case. A call that does not fit waits for the calls in
flight; with none in flight, its completion tokens are lowered to fit, and it is
refused when not one token fits. So what is spent never exceeds the budget (as far
as the provider counts as the hook does). When a call returns, its reservation is
replaced by its cost (`settle`); a failed call's is dropped (`release`); one that
was never settled (a stream the client dropped, a call LiteLLM lost) is charged at
its worst case (`charge`, and `revoke` for whatever is left): no reservation
expires silently. A model without prices holds the key's fixed `reservation`
instead, admitted while what is spent and reserved is under the budget. Only a
digest of each key is stored.
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
before its logging) is charged at its worst case."""

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
    network TEXT,
    refused_concurrency INTEGER NOT NULL DEFAULT 0,
    failed_in_a_row INTEGER NOT NULL DEFAULT 0,
    provider_down INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS reservations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    digest TEXT NOT NULL,
    created REAL NOT NULL,
    amount REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS provider_errors (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    digest TEXT NOT NULL,
    status INTEGER NOT NULL,
    provider TEXT NOT NULL,
    at REAL NOT NULL
);
"""

_LATER_COLUMNS: Final = (
    "ALTER TABLE keys ADD COLUMN network TEXT",
    "ALTER TABLE reservations ADD COLUMN amount REAL NOT NULL DEFAULT 0",
    "ALTER TABLE keys ADD COLUMN refused_concurrency INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE keys ADD COLUMN failed_in_a_row INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE keys ADD COLUMN provider_down INTEGER NOT NULL DEFAULT 0",
)
"""Columns a file made by an earlier version lacks."""


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
    refused_concurrency: int = 0
    """Calls refused because the run had its most calls in flight."""
    provider_errors: tuple[tuple[int, str, float], ...] = ()
    """Each call the provider failed (after the gateway's retries): status, provider, when."""
    provider_down: bool = False
    """The run's last calls (as many as its model's `provider_failures`) all failed there."""

    def report(self) -> dict[str, object]:
        """What the run used, shaped as `ssebench.spec.GatewayReport` (both backends read
        it: the Kubernetes one from the gateway pod's admin command)."""
        errors = [
            {
                "status": status,
                "provider": provider,
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at)),
            }
            for status, provider, at in self.provider_errors
        ]
        usage = {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "refused_for_budget": self.refused,
            "refused_for_concurrency": self.refused_concurrency,
            "provider_errors": errors,
            "provider_down": self.provider_down,
        }
        return {"spend": self.spend, "usage": usage}


@dataclass(frozen=True)
class Cost:
    """A call's worst case, in US dollars, before it is made."""

    prompt: float = 0.0
    """What its prompt costs (counted once per completion it asks for)."""
    per_token: float = 0.0
    """What one more completion token costs, over all its completions."""
    max_tokens: int = 0
    """The completion tokens it may make, each completion (asked for, or the model's most)."""

    @property
    def priced(self) -> bool:
        """Whether the model has prices (else the key's fixed reservation stands in)."""
        return self.prompt > 0 or self.per_token > 0

    def worst(self, max_tokens: int) -> float:
        """What the call costs at most with `max_tokens` completion tokens each."""
        return self.prompt + self.per_token * max_tokens


@dataclass(frozen=True)
class Admitted:
    """An admitted call: its reservation and the completion tokens it may make."""

    reservation: int
    max_tokens: int
    """As asked, or lowered so that the call fits the budget."""
    models: tuple[str, ...] = ()
    """The models the key may use."""


@dataclass(frozen=True)
class Refusal:
    """Why a call was not admitted; `budget` marks an exhausted budget."""

    message: str
    budget: bool = False
    concurrency: bool = False
    """The run had its most calls in flight (answered 429, not 401)."""


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
            for alter in _LATER_COLUMNS:
                with contextlib.suppress(sqlite3.OperationalError):  # the column is there
                    connection.execute(alter)
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

    def admit(
        self,
        key: str,
        model: str | None,
        client: str | None = None,
        cost: Cost = Cost(),
        concurrency: int | None = None,
    ) -> Admitted | Refusal | None:
        """Admit one call from the address `client`; None: it must wait for calls in flight.

        A run with `concurrency` calls in flight already is refused another.

        A key bound to a run's network (`bind`) works from that network only, so a
        key that leaked to another run does not work there.
        """
        digest = digest_of(key)
        now = time.time()
        with self._transaction() as db:
            found = _open_key(db, digest, client)
            if isinstance(found, Refusal):
                return found
            models, budget, fixed = found
            if model is not None and model not in models:
                return Refusal(f"ssebench: this run may use only {', '.join(models)}")
            for (expired,) in db.execute(
                "SELECT id FROM reservations WHERE digest = ? AND created < ?",
                (digest, now - RESERVATION_TTL),
            ).fetchall():
                _charge(db, expired)
            spend, in_flight, held = self._held(db, digest)
            if concurrency is not None and in_flight >= concurrency:
                db.execute(
                    "UPDATE keys SET refused_concurrency = refused_concurrency + 1 "
                    "WHERE digest = ?",
                    (digest,),
                )
                return Refusal(
                    f"ssebench: the run has {in_flight} model calls in flight, its most; "
                    "wait for one to end",
                    concurrency=True,
                )
            admitted = _fit(budget, spend, in_flight, held, fixed, cost)
            if isinstance(admitted, Refusal):
                db.execute("UPDATE keys SET refused = refused + 1 WHERE digest = ?", (digest,))
                return admitted
            if admitted is None:
                return None
            tokens, amount = admitted
            cursor = db.execute(
                "INSERT INTO reservations (digest, created, amount) VALUES (?, ?, ?)",
                (digest, now, amount),
            )
            return Admitted(int(cursor.lastrowid or 0), tokens, tuple(models))

    @staticmethod
    def _held(db: sqlite3.Connection, digest: str) -> tuple[float, int, float]:
        """What the key has spent, its calls in flight and what they hold."""
        (spend,) = db.execute("SELECT spend FROM keys WHERE digest = ?", (digest,)).fetchone()
        in_flight, held = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(amount), 0) FROM reservations WHERE digest = ?",
            (digest,),
        ).fetchone()
        return float(spend), int(in_flight), float(held)

    def check(self, key: str, client: str | None = None) -> list[str] | Refusal:
        """The models an open key may use from `client` (no call is admitted), or why not."""
        with self._transaction() as db:
            found = _open_key(db, digest_of(key), client)
        return found if isinstance(found, Refusal) else found[0]

    def settle(
        self, reservation: int, key_digest: str, cost: float, prompt: int, completion: int
    ) -> None:
        """A call returned: replace its reservation by what it cost.

        A reservation already charged (at its worst case) or released is left as it is.
        """
        with self._transaction() as db:
            if not db.execute("DELETE FROM reservations WHERE id = ?", (reservation,)).rowcount:
                return
            db.execute(
                "UPDATE keys SET spend = spend + ?, prompt_tokens = prompt_tokens + ?, "
                "completion_tokens = completion_tokens + ?, calls = calls + 1, "
                "failed_in_a_row = 0, provider_down = 0 WHERE digest = ?",
                (cost, prompt, completion, key_digest),
            )

    def charge(self, reservation: int) -> None:
        """A call that never settled (a stream its client dropped): charge its worst case."""
        with self._transaction() as db:
            _charge(db, reservation)

    def fail(
        self, reservation: int, key_digest: str, status: int, provider: str, down_after: int
    ) -> None:
        """A call failed at the provider after the gateway's retries: drop its reservation,
        record the failure, and mark the provider down after `down_after` in a row."""
        with self._transaction() as db:
            db.execute("DELETE FROM reservations WHERE id = ?", (reservation,))
            db.execute(
                "INSERT INTO provider_errors (digest, status, provider, at) VALUES (?, ?, ?, ?)",
                (key_digest, status, provider, time.time()),
            )
            db.execute(
                "UPDATE keys SET failed_in_a_row = failed_in_a_row + 1, "
                "provider_down = (failed_in_a_row + 1 >= ?) WHERE digest = ?",
                (down_after, key_digest),
            )

    def release(self, reservation: int) -> None:
        """A call failed: drop its reservation (safe to call more than once)."""
        with self._transaction() as db:
            db.execute("DELETE FROM reservations WHERE id = ?", (reservation,))

    def usage(self, run_id: str) -> KeyUsage | None:
        """What the run's key has used so far, or None if the run has no key."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT budget, spend, prompt_tokens, completion_tokens, calls, refused, revoked, "
                "refused_concurrency, provider_down, digest "
                "FROM keys WHERE run_id = ? ORDER BY created DESC LIMIT 1",
                (run_id,),
            ).fetchone()
            if row is None:
                return None
            errors = db.execute(
                "SELECT status, provider, at FROM provider_errors WHERE digest = ? ORDER BY id",
                (row[9],),
            ).fetchall()
        return KeyUsage(
            run_id,
            budget=row[0],
            spend=row[1],
            prompt_tokens=row[2],
            completion_tokens=row[3],
            calls=row[4],
            refused=row[5],
            revoked=bool(row[6]),
            refused_concurrency=row[7],
            provider_errors=tuple((int(e[0]), str(e[1]), float(e[2])) for e in errors),
            provider_down=bool(row[8]),
        )

    def revoke(self, run_id: str, settle_wait: float = SETTLE_WAIT) -> KeyUsage | None:
        """Close every key of the run (safe to repeat) and return what it used.

        LiteLLM settles a call (its callback) just after answering it, so the calls
        still in flight get up to `settle_wait` seconds to be counted; what is still
        unsettled then is charged at its worst case.
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
            for (left,) in db.execute(
                "SELECT id FROM reservations WHERE digest IN "
                "(SELECT digest FROM keys WHERE run_id = ?)",
                (run_id,),
            ).fetchall():
                _charge(db, left)
        return self.usage(run_id)


def _open_key(
    db: sqlite3.Connection, digest: str, client: str | None
) -> tuple[list[str], float | None, float] | Refusal:
    """An open key's models, budget and fixed reservation, if it may be used from
    `client`; else why not."""
    row = db.execute(
        "SELECT models, budget, reservation, revoked, network FROM keys WHERE digest = ?",
        (digest,),
    ).fetchone()
    if row is None or row[3]:
        return Refusal("ssebench: this key is not valid (unknown, or its run has ended)")
    if row[4] is not None and not _inside(client, row[4]):
        return Refusal("ssebench: this key belongs to another run")
    return list(json.loads(row[0])), row[1], float(row[2])


def _charge(db: sqlite3.Connection, reservation: int) -> None:
    """Charge an unsettled reservation at its worst case (nothing if it is gone)."""
    row = db.execute(
        "SELECT digest, amount FROM reservations WHERE id = ?", (reservation,)
    ).fetchone()
    if row is None:
        return
    db.execute("DELETE FROM reservations WHERE id = ?", (reservation,))
    db.execute(
        "UPDATE keys SET spend = spend + ?, calls = calls + 1 WHERE digest = ?", (row[1], row[0])
    )


def _fit(
    budget: float | None, spend: float, in_flight: int, held: float, fixed: float, cost: Cost
) -> tuple[int, float] | Refusal | None:
    """The completion tokens a call may make and what it holds meanwhile; None: it waits
    for the calls in flight; a Refusal: the budget is used up."""
    if not cost.priced:
        # No prices: LiteLLM's cost is all there is, so a fixed reservation stands in.
        if budget is None or spend + held < budget:
            return cost.max_tokens, fixed
        return None if in_flight else _used_up(budget, spend)
    tokens = cost.max_tokens
    if budget is None or spend + held + cost.worst(tokens) <= budget:
        return tokens, cost.worst(tokens)
    if in_flight:
        return None
    left = budget - spend
    fits = int((left - cost.prompt) / cost.per_token) if cost.per_token > 0 else 0
    if fits >= 1 and cost.prompt + cost.per_token * fits <= left:
        return fits, cost.worst(fits)
    return _used_up(budget, spend)


def _used_up(budget: float, spend: float) -> Refusal:
    return Refusal(
        f"ssebench: the run's budget of ${budget:.6g} is used up "
        f"(${spend:.6g} spent); no more model calls",
        budget=True,
    )
