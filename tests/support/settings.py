"""Settings for tests that start no bot: no .env read, the four required keys with stand-in values, the given
WORKSPACE_PATH; any other key (or a required one) as a keyword."""

from __future__ import annotations

from pathlib import Path

from agents.core.settings import Settings


def offline_settings(workspace_path: Path | str, **values: object) -> Settings:
    required: dict[str, object] = dict(
        telegram_bot_token="1:x", anthropic_api_key="k", allowed_user_ids="1", workspace_path=workspace_path
    )
    return Settings(_env_file=None, **{**required, **values})
