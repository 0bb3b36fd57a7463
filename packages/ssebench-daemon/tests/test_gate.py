from __future__ import annotations

from ssebench.daemon import ACTIONS, ALLOWED
from ssebench.daemon._gate import allowed


def test_the_difficulty_table_is_the_one_of_the_design() -> None:
    assert ALLOWED[0] == set(ACTIONS)
    assert ALLOWED[1] == {"build", "run_poc", "function_test"}
    assert ALLOWED[2] == {"build", "function_test"}
    assert ALLOWED[3] == {"build"}
    assert ALLOWED[4] == set()


def test_the_admin_socket_is_never_gated() -> None:
    assert allowed(None) == set(ACTIONS)


def test_each_level_allows_no_more_than_the_one_below() -> None:
    for level in range(1, 5):
        assert ALLOWED[level] <= ALLOWED[level - 1]
