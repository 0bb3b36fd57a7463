"""The gateway's key store (the SQLite file the proxy's hook and the runner share)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from ssebench.backends.docker._gateway_store import (
    KEY_PREFIX,
    Admitted,
    Cost,
    KeyStore,
    Refusal,
    digest_of,
)


@pytest.fixture
def store(tmp_path: Path) -> KeyStore:
    made = KeyStore(tmp_path / "keys.db")
    made.initialize()
    return made


def test_only_a_digest_of_each_key_is_stored(store: KeyStore, tmp_path: Path) -> None:
    key = store.create_key("run-1", ["m"], 1.0, 0.1)

    assert key.startswith(KEY_PREFIX)
    assert key.encode() not in (tmp_path / "keys.db").read_bytes()
    rows = sqlite3.connect(tmp_path / "keys.db").execute("SELECT digest FROM keys").fetchall()
    assert rows == [(digest_of(key),)]


def test_a_key_admits_its_models_only_and_nothing_once_revoked(store: KeyStore) -> None:
    key = store.create_key("run-1", ["m"], 1.0, 0.1)

    assert isinstance(store.admit(key, "m"), Admitted)
    assert isinstance(store.admit(key, "other"), Refusal)
    assert isinstance(store.admit(KEY_PREFIX + "guessed", "m"), Refusal)
    store.revoke("run-1", settle_wait=0)
    refused = store.admit(key, "m")
    assert isinstance(refused, Refusal) and not refused.budget


def test_an_unpriced_model_holds_the_fixed_reservation_and_waits_for_calls_in_flight(
    store: KeyStore,
) -> None:
    key = store.create_key("run-1", ["m"], 0.25, 0.1)

    first, second, third = (store.admit(key, "m") for _ in range(3))
    assert isinstance(first, Admitted) and isinstance(second, Admitted)
    assert isinstance(third, Admitted)
    # 3 x 0.1 in flight >= 0.25: the fourth waits for what the others cost.
    assert store.admit(key, "m") is None
    store.settle(first.reservation, digest_of(key), 0.01, 10, 5)
    store.release(second.reservation)
    assert isinstance(store.admit(key, "m"), Admitted)
    used = store.usage("run-1")
    assert used is not None
    assert (used.spend, used.calls, used.prompt_tokens, used.refused) == (0.01, 1, 10, 0)


def test_a_call_is_admitted_only_if_its_worst_case_fits_what_is_left(store: KeyStore) -> None:
    key = store.create_key("run-1", ["m"], 1.0, 0.05)
    # 0.1 of prompt and up to 100 tokens at 0.003: 0.4 at worst.
    cost = Cost(prompt=0.1, per_token=0.003, max_tokens=100)

    first, second = store.admit(key, "m", cost=cost), store.admit(key, "m", cost=cost)
    assert isinstance(first, Admitted) and isinstance(second, Admitted)
    assert first.max_tokens == second.max_tokens == 100
    # 0.8 held: a third would make 1.2; it waits, however many ask.
    assert store.admit(key, "m", cost=cost) is None
    store.settle(first.reservation, digest_of(key), 0.4, 30, 100)
    store.settle(second.reservation, digest_of(key), 0.4, 30, 100)
    # 0.2 left, nothing in flight: lowered to the 33 tokens that fit.
    third = store.admit(key, "m", cost=cost)
    assert isinstance(third, Admitted) and third.max_tokens == 33
    store.settle(third.reservation, digest_of(key), 0.1 + 0.003 * 33, 30, 33)
    # Not one token fits now: refused for the budget.
    refused = store.admit(key, "m", cost=cost)
    assert isinstance(refused, Refusal) and refused.budget
    used = store.usage("run-1")
    assert used is not None and used.spend <= 1.0 and used.refused == 1


def test_no_reservation_expires_silently(store: KeyStore) -> None:
    key = store.create_key("run-1", ["m"], 1.0, 0.05)
    cost = Cost(prompt=0.01, per_token=0.001, max_tokens=100)  # 0.11 at worst
    dropped, settled, left = (store.admit(key, "m", cost=cost) for _ in range(3))
    assert isinstance(dropped, Admitted) and isinstance(settled, Admitted)
    assert isinstance(left, Admitted)

    store.charge(dropped.reservation)  # a stream its client dropped
    store.settle(dropped.reservation, digest_of(key), 0.02, 10, 10)  # its late callback
    store.settle(settled.reservation, digest_of(key), 0.02, 10, 10)
    used = store.revoke("run-1", settle_wait=0)  # `left` never settled

    assert used is not None
    assert used.spend == pytest.approx(0.11 + 0.02 + 0.11)
    assert used.calls == 3


def test_a_bound_key_works_from_its_run_network_only(store: KeyStore) -> None:
    key = store.create_key("run-1", ["m"], None, 0.1)
    store.bind("run-1", "172.30.0.2/16")

    assert isinstance(store.admit(key, "m", "172.30.5.9"), Admitted)
    assert store.check(key, "172.30.5.9") == ["m"]
    assert isinstance(store.check(key, "172.31.0.2"), Refusal)
    for elsewhere in ("172.31.0.2", None, "not an address"):
        refused = store.admit(key, "m", elsewhere)
        assert isinstance(refused, Refusal) and "another run" in refused.message


def test_revoke_reports_what_the_run_used_and_is_safe_to_repeat(store: KeyStore) -> None:
    key = store.create_key("run-1", ["m"], 1.0, 0.1)
    admitted = store.admit(key, "m")
    assert isinstance(admitted, Admitted)
    store.settle(admitted.reservation, digest_of(key), 0.5, 100, 50)

    first = store.revoke("run-1")
    again = store.revoke("run-1")

    assert first is not None and again is not None
    assert (first.spend, first.completion_tokens, first.revoked) == (0.5, 50, True)
    assert again == first
    assert store.revoke("no-such-run") is None


def test_revoke_waits_for_the_calls_in_flight_to_be_counted(store: KeyStore) -> None:
    key = store.create_key("run-1", ["m"], 1.0, 0.1)
    admitted = store.admit(key, "m")
    assert isinstance(admitted, Admitted)
    # LiteLLM's callback settles a call just after answering it.
    timer = threading.Timer(0.3, store.settle, (admitted.reservation, digest_of(key), 0.2, 10, 5))
    timer.start()

    used = store.revoke("run-1", settle_wait=10)

    timer.join()
    assert used is not None and used.spend == 0.2 and used.calls == 1
