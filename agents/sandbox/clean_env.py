"""The environment of every process the bot starts: its own, without its secrets (the Telegram token, the API keys,
the GitHub token, anything named like a secret), plus hints that keep tools from paging or prompting.

The bot's secrets may be in its process environment (docker run --env-file, systemd's Environment=): a helper started
outside the sandbox (the speech process, ripgrep, the repository map's parse process, pasta, `git init`) would inherit
them, and so would everything it starts in turn. Here, below the sandbox's other modules, so that each can use it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping

DEFAULT_SECRETS: frozenset[str] = frozenset(
    {"TELEGRAM_BOT_TOKEN", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "GITHUB_TOKEN", "GITHUB_WEBHOOK_SECRET"}
)
SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "CREDENTIAL", "PRIVATE_KEY")
CHILD_ENV_HINTS: Mapping[str, str] = {
    "GIT_TERMINAL_PROMPT": "0",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "CI": "1",
    "NO_COLOR": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}


@functools.lru_cache(maxsize=4096)
def _named_like_a_secret(key: str) -> bool:
    """Whether a variable's name holds one of SECRET_MARKERS. Kept per name: every git call and every command builds
    an environment, and the same few dozen names come back each time."""
    upper = key.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


_DEFAULT_SECRETS_UPPER = frozenset(key.upper() for key in DEFAULT_SECRETS)


def child_env(base: Mapping[str, str] | None = None, secret_keys: Iterable[str] = DEFAULT_SECRETS) -> dict[str, str]:
    """A copy of `base` (default os.environ) without secrets, plus non-interactive hints (no pagers or prompts)."""
    secrets = _DEFAULT_SECRETS_UPPER if secret_keys is DEFAULT_SECRETS else {k.upper() for k in secret_keys}
    source = os.environ if base is None else base
    env = {key: value for key, value in source.items() if not _named_like_a_secret(key) and key.upper() not in secrets}
    env.update(CHILD_ENV_HINTS)
    return env
