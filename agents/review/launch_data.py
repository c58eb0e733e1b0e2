"""A Mini App's launch data (`initData`), checked as Telegram documents it: signed with the bot's token, and fresh.

Telegram opens the page with `#tgWebAppData=<query string>` in its URL; the page sends that string with every request
(`Authorization: tma <initData>`). Its `hash` is HMAC-SHA256 under the key HMAC-SHA256("WebAppData", bot token) of the
other fields as sorted `key=value` lines; `auth_date` says when Telegram signed it. Anything else (no hash, a wrong
one, an old date, no user) is refused with the reason, and nothing of it is trusted.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

MAX_LAUNCH_DATA_CHARS = 8192  # Telegram's initData is a few hundred characters


class LaunchDataError(ValueError):
    """Launch data that is not Telegram's, or too old: the reason, for the log and the page's one line."""


@dataclass(frozen=True)
class LaunchUser:
    """Who opened the page, as Telegram signed it."""

    user_id: int
    name: str
    start_param: str  # what a t.me/<bot>/<app>?startapp= link carried ('' for the web_app button)
    signed_at: float


def _secret(bot_token: str) -> bytes:
    return hmac.new(b"WebAppData", bot_token.encode(), hashlib.sha256).digest()


def _check_string(fields: dict[str, str]) -> bytes:
    return "\n".join(f"{k}={v}" for k, v in sorted(fields.items())).encode()


def sign(fields: dict[str, str], bot_token: str) -> str:
    """Launch data for `fields` signed with `bot_token`, as Telegram makes it (tests and the README's tooling)."""
    digest = hmac.new(_secret(bot_token), _check_string(fields), hashlib.sha256).hexdigest()
    return urlencode({**fields, "hash": digest})


def check(init_data: str, bot_token: str, max_age: float, now: float | None = None) -> LaunchUser:
    """The user of launch data signed with `bot_token` no longer than `max_age` seconds ago; LaunchDataError else."""
    if not init_data or len(init_data) > MAX_LAUNCH_DATA_CHARS:
        raise LaunchDataError("no launch data (open the page from the bot's Review button)")
    try:
        pairs = parse_qsl(init_data, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise LaunchDataError("launch data that is not a query string") from None
    fields = dict(pairs)
    if len(fields) != len(pairs):
        raise LaunchDataError("launch data with a field twice")
    given = fields.pop("hash", "")  # every other field is signed, the third-party `signature` (Ed25519) too
    expected = hmac.new(_secret(bot_token), _check_string(fields), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise LaunchDataError("launch data not signed with this bot's token")
    try:
        signed_at = float(int(fields.get("auth_date", "")))
    except ValueError:
        raise LaunchDataError("launch data without a signing date") from None
    age = (time.time() if now is None else now) - signed_at
    if age > max_age:
        raise LaunchDataError("launch data too old: open the page again from the chat")
    if age < -300:  # a clock five minutes ahead of ours is not Telegram's
        raise LaunchDataError("launch data dated in the future")
    try:
        user = json.loads(fields.get("user", ""))
        user_id = int(user["id"])
    except (ValueError, TypeError, KeyError):
        raise LaunchDataError("launch data without a user") from None
    name = str(user.get("username") or user.get("first_name") or user_id)
    return LaunchUser(user_id, name, fields.get("start_param", ""), signed_at)
