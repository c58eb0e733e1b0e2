"""Settings in groups, read from flat keys: `.env.example` documents exactly the keys the settings read; a key from
the environment, `.env` or code reaches its group with the old priority (code, then the environment, then `.env`);
a bad value is named by its key; a copy takes flat keys; a flat read names the group it moved to."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agents.core.settings import LEAVES, Settings, SettingsError, env_keys, load_settings

REPO = Path(__file__).resolve().parents[1]
REQUIRED = {"TELEGRAM_BOT_TOKEN": "123:abc", "ANTHROPIC_API_KEY": "sk-test", "ALLOWED_USER_IDS": "7"}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No setting of the bot's from the test's own environment, and the required ones set."""
    for key in env_keys():
        monkeypatch.delenv(key, raising=False)
    for key, value in {**REQUIRED, "WORKSPACE_PATH": str(tmp_path)}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def test_env_example_documents_every_key_once_and_nothing_else() -> None:
    documented = re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", (REPO / ".env.example").read_text(), flags=re.MULTILINE)
    assert len(documented) == len(set(documented)), "a key documented twice"
    assert set(documented) == {leaf.name.upper() for leaf in LEAVES}


def test_every_key_lives_in_one_group_and_no_group_is_named_like_a_key() -> None:
    names = [leaf.name for leaf in LEAVES]
    assert len(names) == len(set(names)) == 119
    assert not set(Settings.model_fields) & set(names), "a group named like a key would swallow that key's value"
    assert env_keys() == {name.upper() for name in names} | {"AGENTLAB_LOG_FORMAT"}


def test_flat_keys_reach_their_groups_code_over_environment_over_env_file(env: pytest.MonkeyPatch) -> None:
    Path(".env").write_text("WORKER_MODEL=from-file\nSANDBOX_NETWORK=OFF\nVOICE_PRELOAD=true\nLOG_FORMAT=json\n")
    env.setenv("WORKER_MODEL", "from-environment")
    env.setenv("GITHUB_USERS", "OctoCat=7")
    settings = Settings()
    assert settings.workers.worker_model == "from-environment"
    assert settings.network.sandbox_network == "off" and settings.voice.voice_preload is True
    assert settings.github.github_users == {"octocat": 7} and settings.logs.log_format == "json"
    assert Settings(worker_model="from-code", WHISPER_MODEL="tiny").workers.worker_model == "from-code"
    assert Settings(whisper_model="tiny").voice.whisper_model == "tiny"
    env.setenv("AGENTLAB_LOG_FORMAT", "text")
    assert Settings().logs.log_format == "text", "AGENTLAB_LOG_FORMAT wins over LOG_FORMAT"
    assert Settings(log_format="json").logs.log_format == "json", "a keyword argument wins over the environment"


def test_a_variable_named_like_a_group_is_not_a_setting(env: pytest.MonkeyPatch) -> None:
    """Environment variables such as VOICE or REVIEW are someone else's: they are neither read nor parsed as JSON."""
    for group in Settings.model_fields:
        env.setenv(group.upper(), "{not json")
    Path(".env").write_text("TELEGRAM={}\nSANDBOXING=off\n")
    settings = Settings()
    assert (
        settings.sandboxing.sandbox == "bwrap" and settings.telegram.telegram_bot_token.get_secret_value() == "123:abc"
    )


def test_missing_and_bad_values_are_named_by_their_flat_key(env: pytest.MonkeyPatch) -> None:
    for key in (*REQUIRED, "WORKSPACE_PATH"):
        env.delenv(key)
    with pytest.raises(SettingsError) as missing:
        load_settings()
    assert str(missing.value) == (
        "configuration error: TELEGRAM_BOT_TOKEN: missing (required); ANTHROPIC_API_KEY: missing (required); "
        "ALLOWED_USER_IDS: missing (required); WORKSPACE_PATH: missing (required)"
    )
    with pytest.raises(SettingsError) as bad:
        load_settings(_env_file=None, **REQUIRED, workspace_path="/w", sandbox_network="sometimes", webhook_port=0)
    assert "SANDBOX_NETWORK: Input should be 'ask', 'on' or 'off'" in str(bad.value)
    assert "WEBHOOK_PORT: Input should be greater than or equal to 1" in str(bad.value)


@pytest.mark.parametrize(
    "key",
    [
        "PRICE_INPUT_PER_MTOK",
        "PRICE_OUTPUT_PER_MTOK",
        "PRICE_CACHE_WRITE_PER_MTOK",
        "PRICE_CACHE_READ_PER_MTOK",
        "DAILY_BUDGET_USD",
    ],
)
@pytest.mark.parametrize("value", ["-3", "nan", "inf"])
def test_prices_and_the_budget_are_plain_amounts(env: pytest.MonkeyPatch, key: str, value: str) -> None:
    """A negative price would make the day's cost shrink with every call (the budget never reached); NaN or infinity
    would make every comparison with the budget meaningless."""
    env.setenv(key, value)
    with pytest.raises(SettingsError, match=key):
        load_settings(_env_file=None)


def test_a_copy_takes_flat_keys_and_refuses_unknown_ones(env: pytest.MonkeyPatch) -> None:
    settings = Settings()
    copy = settings.model_copy(update={"worker_model": "m", "sandbox": "off", "log_format": "json"})
    assert (copy.workers.worker_model, copy.sandboxing.sandbox, copy.logs.log_format) == ("m", "off", "json")
    assert (settings.workers.worker_model, settings.sandboxing.sandbox) == ("claude-sonnet-4-6", "bwrap")
    assert copy.workers.worker_max_steps == settings.workers.worker_max_steps
    with pytest.raises(KeyError, match="worker_modle"):
        settings.model_copy(update={"worker_modle": "m"})


def test_a_flat_read_names_the_group_the_key_moved_to(env: pytest.MonkeyPatch) -> None:
    with pytest.raises(AttributeError, match=r"settings\.voice\.whisper_model"):
        getattr(Settings(), "whisper_model")  # noqa: B009 (a flat read, as code written before the groups does)
