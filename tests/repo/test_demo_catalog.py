"""The demo dataset's catalog, the default of `ssebench run`, is current with its folders."""

from __future__ import annotations

from pathlib import Path

from ssebench.spec import load_dataset
from ssebench.spec.catalog import LOCK_FILE, MANIFEST_FILE, load_catalog, manifest_of

DEMO = Path(__file__).resolve().parents[2] / "datasets" / "demo"
REPUBLISH = "publish it again: `uv run ssebench dataset publish` (with a local SSEBENCH_REGISTRY)"


def test_the_demo_manifest_lists_every_demo_task_as_its_folder_is_now() -> None:
    catalog = load_catalog(DEMO / MANIFEST_FILE)
    tasks = load_dataset(DEMO)
    current = manifest_of(
        catalog.manifest.dataset, catalog.manifest.version, catalog.manifest.description, tasks
    )

    assert catalog.manifest == current, f"datasets/demo/{MANIFEST_FILE} is out of date: {REPUBLISH}"


def test_the_demo_catalog_pins_no_registry_digest() -> None:
    # Digests belong to one registry's publication; the checkout's catalog works offline.
    assert not (DEMO / LOCK_FILE).exists()
