from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

import pytest

from ssebench.spec import BACKENDS_GROUP, UnknownBackendError, get_backend

GOOD_BACKEND = """
from ssebench.extensions import Backend

CREATED = []

class GoodBackend(Backend):
    name = "good"
    def __init__(self):
        CREATED.append(self)
    prepare_images = copy_from_image = start = wait = logs = None
    collect_results = stop = cleanup = list_runs = None

GoodBackend.__abstractmethods__ = frozenset()

class NotABackend:
    pass
"""


@pytest.fixture
def plugins(install_distribution: Callable[..., None]) -> Iterator[None]:
    sys.modules.pop("fake_good", None)
    install_distribution(
        name="fake-backends-one",
        entry_points={
            BACKENDS_GROUP: {
                "good": "fake_good:GoodBackend",
                "broken": "fake_broken_module_that_does_not_exist:Backend",
                "wrong-type": "fake_good:NotABackend",
                "twice": "fake_good:GoodBackend",
            }
        },
        modules={"fake_good.py": GOOD_BACKEND},
    )
    install_distribution(
        name="fake-backends-two",
        entry_points={BACKENDS_GROUP: {"twice": "fake_other:Backend"}},
        modules={},
    )
    yield
    sys.modules.pop("fake_good", None)


@pytest.mark.usefixtures("plugins")
def test_a_registered_backend_is_created_without_arguments() -> None:
    import fake_good  # type: ignore[import-not-found]

    backend = get_backend("good")
    assert type(backend).__name__ == "GoodBackend"
    assert [backend] == fake_good.CREATED


@pytest.mark.usefixtures("plugins")
def test_an_unknown_backend_names_the_installed_ones() -> None:
    with pytest.raises(
        UnknownBackendError, match=r"unknown backend 'nope': installed backends are .*good"
    ):
        get_backend("nope")


@pytest.mark.usefixtures("plugins")
def test_a_backend_registered_twice_names_both_distributions() -> None:
    with pytest.raises(UnknownBackendError) as caught:
        get_backend("twice")
    message = str(caught.value)
    assert "registered more than once" in message
    assert "fake-backends-one" in message
    assert "fake-backends-two" in message


@pytest.mark.usefixtures("plugins")
def test_a_backend_that_fails_to_import_names_its_distribution() -> None:
    with pytest.raises(
        UnknownBackendError, match=r"'broken' .*fake-backends-one.* failed to import"
    ):
        get_backend("broken")


@pytest.mark.usefixtures("plugins")
def test_an_entry_that_is_not_a_backend_is_refused() -> None:
    with pytest.raises(UnknownBackendError, match=r"'wrong-type' .*is not a subclass of .*Backend"):
        get_backend("wrong-type")


@pytest.mark.usefixtures("plugins")
def test_only_the_chosen_entry_point_is_imported() -> None:
    with pytest.raises(UnknownBackendError):
        get_backend("nope")
    assert "fake_good" not in sys.modules
