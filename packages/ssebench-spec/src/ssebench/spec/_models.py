"""The model gateway's contract: `models.yaml`, a run's usage, and the `ModelGateway` seam.

`models.yaml` (the home's, or the file `SSEBENCH_MODELS` names) lists each model a
run may use: its LiteLLM parameters and the *name* of the host variable that
holds its provider key (never the key itself). A backend that offers a gateway
(`Backend.gateway`) runs the proxy, opens a key per run and closes it when the
run ends, reporting what the run spent.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Annotated, Any, Final

import msgspec

from ssebench.spec import settings
from ssebench.spec._base import Message, UserInput
from ssebench.spec._codec import load_yaml_file
from ssebench.spec._errors import UserError

MODELS_ENV: Final = settings.MODELS.name
"""Environment variable naming the models file to use instead of `<home>/models.yaml`."""

MODELS_FILE: Final = "models.yaml"
"""The home's models file."""

DEFAULT_BUDGET: Final = 1.0
"""US dollars a run may spend when neither `--budget` nor models.yaml says."""

DEFAULT_RESERVATION: Final = 0.05
"""US dollars held back per call in flight (see `ModelsFile.reservation`)."""


class ModelEntry(UserInput, kw_only=True, frozen=True):
    """One model of models.yaml."""

    litellm: dict[str, Any]
    """LiteLLM's parameters for it (`litellm_params`: `model`, `api_base`, prices ...)."""

    key_env: str | None = None
    """The name of the host variable holding its provider key; None: it needs none."""

    budget: float | None = None
    """US dollars a run with this model may spend; None: the file's `budget`."""

    retries: Annotated[int, msgspec.Meta(ge=0, le=10)] = 2
    """How many more times the gateway tries a call its provider answered 429 or 5xx, or
    that timed out, with backoff (LiteLLM's `num_retries`), before the agent sees it."""

    timeout: Annotated[float, msgspec.Meta(gt=0)] = 600.0
    """Seconds one call to the provider may take."""

    provider_failures: Annotated[int, msgspec.Meta(ge=1, le=100)] = 3
    """A run whose last this many calls failed at the provider (after the retries), and
    which kept under `concurrency`, ends `infra_error` for the provider unless it passed."""

    concurrency: Annotated[int, msgspec.Meta(ge=1, le=256)] = 4
    """Calls of one run in flight at once: more are refused with 429, so an agent cannot
    flood its provider into failures that would look like the provider's."""


class ModelsFile(UserInput, kw_only=True, frozen=True):
    """`models.yaml`."""

    budget: float = DEFAULT_BUDGET
    """US dollars a run may spend by default (`--budget` overrides it)."""

    reservation: float = DEFAULT_RESERVATION
    """US dollars held against a run's budget for each call in flight on a model without
    prices (a priced model's call holds its own worst case; docs/gateway.md)."""

    models: dict[str, ModelEntry] = msgspec.field(default_factory=dict)

    def entry(self, name: str, where: str) -> ModelEntry:
        """The model called `name`.

        Raises:
            UserError: there is none; the message lists the models there are.
        """
        found = self.models.get(name)
        if found is None:
            known = ", ".join(sorted(self.models)) or "none"
            raise UserError(f"unknown model {name!r}: {where} names {known}")
        if "model" not in found.litellm:
            raise UserError(f"model {name!r} in {where} has no litellm.model")
        return found


def models_path(home: Path) -> Path:
    """The models file in force: `SSEBENCH_MODELS`, else `<home>/models.yaml`."""
    explicit = os.environ.get(MODELS_ENV)
    return Path(explicit) if explicit else home / MODELS_FILE


def load_models(path: Path) -> ModelsFile:
    """Read a models file; a missing file lists no models.

    Raises:
        TaskConfigError: the file is not valid YAML or does not match `ModelsFile`.
    """
    if not path.exists():
        return ModelsFile()
    return load_yaml_file(path, ModelsFile)


class ProviderError(Message, kw_only=True, frozen=True):
    """A call the provider failed: answered 429 or 5xx, or did not answer in time (408)."""

    status: int
    provider: str
    """LiteLLM's name for it (`openai`, `anthropic`, ...); empty when unknown."""
    at: str
    """When, ISO 8601 UTC."""


class Usage(Message, kw_only=True, frozen=True):
    """The model calls of a run, as the gateway counted them."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    refused_for_budget: int = 0
    """Calls the gateway refused because the run's budget was used up."""
    refused_for_concurrency: int = 0
    """Calls the gateway refused because the run had its most calls in flight."""
    provider_errors: list[ProviderError] = msgspec.field(default_factory=list)
    """Every call that failed at the provider after the gateway's retries, in order."""
    provider_down: bool = False
    """The run's last `provider_failures` calls (of its model) all failed at the provider."""


class GatewayReport(Message, kw_only=True, frozen=True):
    """What a run's key used, reported when the key is closed."""

    spend: float
    """US dollars, the sum of each call's cost as LiteLLM priced it."""

    usage: Usage


class ModelGateway(ABC):
    """A running model proxy that gives each run its own key.

    A key is a secret: it is returned once, to be given to the run's container,
    and never logged or shown.
    """

    @property
    @abstractmethod
    def base_url(self) -> str:
        """The URL a run that may reach the gateway uses (`SSE_BASE_URL`)."""

    @abstractmethod
    def open_key(self, run_id: str, models: list[str], budget: float | None) -> str:
        """A fresh key for the run, for `models` only, spending at most `budget` dollars.

        Raises:
            BackendError: the gateway cannot be reached.
        """

    @abstractmethod
    def close_key(self, run_id: str) -> GatewayReport | None:
        """Revoke the run's key (safe to repeat) and report what it used; None if it had none.

        Raises:
            BackendError: the gateway cannot be reached.
        """
