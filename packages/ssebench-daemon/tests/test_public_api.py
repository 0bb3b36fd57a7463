from __future__ import annotations

import ssebench.daemon as daemon


def test_all_is_sorted_the_way_ruff_sorts_it_and_names_only_real_attributes() -> None:
    names = daemon.__all__
    constants = [n for n in names if n.isupper()]
    classes = [n for n in names if n[0].isupper() and not n.isupper()]
    functions = [n for n in names if n[0].islower()]
    assert names == sorted(constants) + sorted(classes) + sorted(functions)
    for name in names:
        assert hasattr(daemon, name), name
