"""models.yaml: the models a run may use, checked like every file a person writes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ssebench.spec import (
    MODELS_ENV,
    ModelsFile,
    TaskConfigError,
    UserError,
    load_models,
    models_path,
)


def test_the_home_file_is_used_unless_the_environment_names_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MODELS_ENV, raising=False)
    assert models_path(tmp_path) == tmp_path / "models.yaml"
    monkeypatch.setenv(MODELS_ENV, str(tmp_path / "other.yaml"))
    assert models_path(tmp_path) == tmp_path / "other.yaml"


def test_a_models_file_names_each_models_parameters_and_key_variable(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(
        "budget: 2.5\nmodels:\n  m:\n    litellm: {model: openai/m}\n    key_env: M_KEY\n"
        "    budget: 0.5\n"
    )

    models = load_models(path)

    assert models.budget == 2.5
    entry = models.entry("m", str(path))
    assert (entry.litellm, entry.key_env, entry.budget) == ({"model": "openai/m"}, "M_KEY", 0.5)
    assert load_models(tmp_path / "missing.yaml") == ModelsFile()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "models:\n  m:\n    litellm: {model: x}\n    api_key: sk-1\n",
            re.escape("unknown key 'models[...].api_key'"),
        ),
        ("budget: cheap\n", "key 'budget'"),
        ("models: [a]\n", "key 'models'"),
    ],
)
def test_a_malformed_models_file_is_refused_naming_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(text)

    with pytest.raises(TaskConfigError, match=message):
        load_models(path)


def test_an_unknown_model_or_one_without_litellm_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  a: {litellm: {api_base: x}}\n  b: {litellm: {model: y}}\n")
    models = load_models(path)

    with pytest.raises(UserError, match=re.escape("unknown model 'c': models.yaml names a, b")):
        models.entry("c", "models.yaml")
    with pytest.raises(UserError, match=re.escape("model 'a' in models.yaml has no litellm.model")):
        models.entry("a", "models.yaml")
