"""The accounts the bot acts with: Telegram's token (getMe), Anthropic's key and models (a free `count_tokens`),
GitHub's token and webhook, and who may use the bot (ALLOWED_USER_IDS).
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import stat
from pathlib import Path

import anthropic
import httpx2

from agents.core.settings import Settings
from agents.core.tls import client_tls
from agents.doctor.checks import Check, Level
from agents.workspaces.folders import Workspaces

NETWORK_TIMEOUT_SECONDS = 5.0


DEFAULT_ANTHROPIC_URL = "https://api.anthropic.com"


async def check_telegram(settings: Settings, timeout: float = NETWORK_TIMEOUT_SECONDS) -> Check:
    """getMe at TELEGRAM_API_BASE_URL/bot<token>/getMe: the token is accepted and names the bot."""
    token = settings.telegram.telegram_bot_token.get_secret_value()
    root = settings.telegram.telegram_api_base_url

    def hide(text: str) -> str:
        return text.replace(token, "<token>") if token else text

    try:
        async with httpx2.AsyncClient(timeout=timeout, verify=client_tls()) as client:
            async with asyncio.timeout(timeout + 1):
                response = await client.get(f"{root}/bot{token}/getMe")
    except (TimeoutError, httpx2.TimeoutException):
        return Check(
            Level.fail,
            "Telegram",
            f"no answer from {root} within {timeout:g} s",
            "check the network (or TELEGRAM_API_BASE_URL if you run a local Bot API server)",
        )
    except (httpx2.HTTPError, OSError, ValueError) as err:
        return Check(
            Level.fail,
            "Telegram",
            hide(f"cannot reach {root}: {type(err).__name__}: {err}"),
            "check the network and TELEGRAM_API_BASE_URL",
        )
    try:
        body = response.json()
    except ValueError:
        body = {}
    if response.status_code in (401, 404) or (isinstance(body, dict) and body.get("error_code") in (401, 404)):
        description = body.get("description") if isinstance(body, dict) else None
        return Check(
            Level.fail,
            "Telegram",
            f"token rejected ({response.status_code} {description or 'Unauthorized'})",
            "copy the token from @BotFather (/mybots → API Token) into TELEGRAM_BOT_TOKEN",
        )
    if response.status_code != 200 or not isinstance(body, dict) or not body.get("ok"):
        description = body.get("description") if isinstance(body, dict) else response.text[:200]
        return Check(
            Level.fail,
            "Telegram",
            hide(f"getMe failed: HTTP {response.status_code} {description}"),
            "check TELEGRAM_API_BASE_URL and TELEGRAM_BOT_TOKEN",
        )
    me = body.get("result") or {}
    return Check(
        Level.ok, "Telegram", f"token accepted, the bot is @{me.get('username', '?')} (id {me.get('id', '?')})"
    )


async def check_anthropic(settings: Settings, timeout: float = NETWORK_TIMEOUT_SECONDS) -> Check:
    """A free `count_tokens` call per configured model: the key is accepted and the models exist."""
    base = settings.anthropic.anthropic_base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_ANTHROPIC_URL
    client = anthropic.AsyncAnthropic(
        api_key=settings.anthropic.anthropic_api_key.get_secret_value(),
        base_url=settings.anthropic.anthropic_base_url,
        max_retries=0,
        timeout=timeout,
        http_client=anthropic.DefaultAsyncHttpxClient(verify=client_tls()),
    )
    models = list(dict.fromkeys([settings.orchestrator.orchestrator_model, settings.workers.worker_model]))
    model = models[0]
    try:
        for model in models:
            async with asyncio.timeout(timeout + 1):
                await client.messages.count_tokens(model=model, messages=[{"role": "user", "content": "ping"}])
    except anthropic.AuthenticationError:
        return Check(
            Level.fail,
            "Anthropic",
            "API key rejected (401 authentication_error)",
            "create a key at console.anthropic.com → API keys and put it in ANTHROPIC_API_KEY",
        )
    except anthropic.PermissionDeniedError as err:
        return Check(
            Level.fail,
            "Anthropic",
            f"the key may not use the API (403: {_api_message(err)})",
            "check the key's workspace and permissions at console.anthropic.com",
        )
    except anthropic.NotFoundError as err:
        return Check(
            Level.fail,
            "Anthropic",
            f"model {model!r} not found (404: {_api_message(err)})",
            "set ORCHESTRATOR_MODEL / WORKER_MODEL to a model your key can use (or fix ANTHROPIC_BASE_URL)",
        )
    except (TimeoutError, anthropic.APITimeoutError):
        return Check(
            Level.fail,
            "Anthropic",
            f"no answer from {base} within {timeout:g} s",
            "check the network (or ANTHROPIC_BASE_URL)",
        )
    except anthropic.APIConnectionError as err:
        return Check(Level.fail, "Anthropic", f"cannot reach {base}: {err}", "check the network and ANTHROPIC_BASE_URL")
    except anthropic.APIStatusError as err:
        if err.status_code == 429 or err.status_code >= 500:
            return Check(
                Level.warn,
                "Anthropic",
                f"the API answered {err.status_code} ({_api_message(err)})",
                "a temporary condition (rate limit or overload): run doctor again in a minute",
            )
        return Check(
            Level.fail,
            "Anthropic",
            f"count_tokens failed: {err.status_code} {_api_message(err)}",
            "check ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL and the model names",
        )
    finally:
        await client.close()
    return Check(Level.ok, "Anthropic", f"API key accepted; model{'s' if len(models) > 1 else ''} {', '.join(models)}")


def _api_message(err: anthropic.APIStatusError) -> str:
    body = err.body
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(err.message)


async def check_github(settings: Settings) -> list[Check] | None:
    """GITHUB_TOKEN accepted, and able to push to each workspace's GitHub repository; GITHUB_USERS allowed; the
    webhook's address free to listen on. Nothing when GITHUB_TOKEN is unset (no GitHub features)."""
    from agents.github.api import GitHubClient, GitHubUnavailable
    from agents.github.repository import github_repository

    if settings.github.github_token is None:
        return [Check(Level.ok, "GitHub", "off (GITHUB_TOKEN unset: no issues, mentions or pull requests)")]
    client = GitHubClient(settings.github.github_token.get_secret_value(), settings.github.github_api_url)
    checks: list[Check] = []
    try:
        try:
            login = await client.user()
        except GitHubUnavailable as err:
            if err.status is None:
                fix = f"check the network and GITHUB_API_URL ({settings.github.github_api_url})"
            elif err.status == 401:
                fix = "GitHub refuses the token: make a new one (README: GitHub) and set GITHUB_TOKEN"
            else:
                fix = "check the token's permissions and GitHub's status (a 403 can be a rate limit: wait an hour)"
            return [Check(Level.fail, "GitHub", f"GITHUB_TOKEN: {err}", fix)]
        checks.append(Check(Level.ok, "GitHub", f"GITHUB_TOKEN accepted (acting as {login})"))
        for ws in Workspaces(settings.paths.workspace_path, settings.paths.bot_repository).all():
            repo = await github_repository(ws.path, settings.github.github_web_url)
            if repo is None:
                continue
            try:
                data = await client.repository(repo.full_name)
            except GitHubUnavailable as err:
                checks.append(
                    Check(
                        Level.warn,
                        "GitHub",
                        f"{ws.name}: {repo.full_name}: {err}",
                        "give the token access to this repository (contents, pull requests, issues: read and write)",
                    )
                )
                continue
            if not (data.get("permissions") or {}).get("push", True):
                checks.append(
                    Check(
                        Level.warn,
                        "GitHub",
                        f"{ws.name}: the token cannot push to {repo.full_name}",
                        "give it contents: read and write",
                    )
                )
            else:
                checks.append(
                    Check(
                        Level.ok,
                        "GitHub",
                        f"{ws.name} → {repo.full_name} (default branch {data.get('default_branch')})",
                    )
                )
    finally:
        await client.close()
    if not settings.github.github_users:
        checks.append(Check(Level.ok, "GitHub", "mentions: nobody's (GITHUB_USERS unset: a mention starts no work)"))
    strangers = [
        login for login, uid in settings.github.github_users.items() if uid not in settings.users.allowed_user_ids
    ]
    if strangers:
        checks.append(
            Check(
                Level.warn,
                "GitHub",
                f"GITHUB_USERS names users who are not in ALLOWED_USER_IDS: {', '.join(strangers)}",
                "their mentions are ignored; add their Telegram ids to ALLOWED_USER_IDS",
            )
        )
    if not settings.github.github_webhook_listen:
        off = "off (GITHUB_WEBHOOK_LISTEN unset: no webhook; a pull request's checks are polled)"
        checks.append(Check(Level.ok, "GitHub webhook", off))
    else:
        host, _, port = settings.github.github_webhook_listen.rpartition(":")
        try:
            with socket.socket(socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((host.strip("[]"), int(port)))
            checks.append(
                Check(
                    Level.ok,
                    "GitHub webhook",
                    f"POST /github on {settings.github.github_webhook_listen}: point the repository's webhook at "
                    "https://<your host>/github (JSON, the secret, events: issues, issue comments, pull request "
                    "reviews, check suites)",
                )
            )
        except OSError as err:
            checks.append(
                Check(
                    Level.warn,
                    "GitHub webhook",
                    f"cannot listen on {settings.github.github_webhook_listen}: {err.strerror or err}",
                    "free the port (is the bot already running?) or change GITHUB_WEBHOOK_LISTEN",
                )
            )
    return checks


def check_access(settings: Settings) -> Check:
    """ALLOWED_USER_IDS: who may use the bot; empty is a bot that refuses everyone."""
    if not settings.users.allowed_user_ids:
        return Check(
            Level.fail,
            "ALLOWED_USER_IDS",
            "empty: nobody may use the bot (every message is refused)",
            "add your id: ALLOWED_USER_IDS=<your Telegram user id> in .env (message @userinfobot to learn it, or "
            "message this bot: its log names every refused id)",
        )
    count = len(settings.users.allowed_user_ids)
    return Check(Level.ok, "ALLOWED_USER_IDS", f"{count} user{'s' if count > 1 else ''} may use the bot")


def check_env_file(path: Path) -> Check | None:
    """The .env the settings come from holds the bot's token and API key: readable by its owner alone."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # no .env here: the settings come from the environment
    if mode & 0o077:
        return Check(
            Level.warn,
            ".env",
            f"{path.resolve()} holds the bot's keys and other users of this machine may read it (mode "
            f"{stat.S_IMODE(mode):04o})",
            f"chmod 600 {path}",
        )
    return Check(Level.ok, ".env", "readable by its owner alone")


_TOKEN_SHAPE = re.compile(r"^\d+:[A-Za-z0-9_-]+$")


def token_looks_valid(token: str) -> bool:
    """A Telegram bot token's shape, `<bot id>:<secret>` (checked before asking Telegram)."""
    return bool(_TOKEN_SHAPE.match(token.strip()))
