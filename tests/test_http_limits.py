"""Every HTTP server of the bot (Telegram's webhook, GitHub's webhook, the review page) closes a client that sends
half a request and then nothing, and one whose body never ends: tornado's defaults keep the first an hour and the
second for ever, so a client on the network could hold the bot's connections (and file descriptors) for nothing.
The limits (agents/core/http_limits.py) are made short here, so each server is seen closing such a client."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tornado.httpserver import HTTPServer

from agents.core import http_limits
from agents.core.settings import Settings
from agents.github.webhook import WebhookServer
from telegram_bot.webhook import webhook_server
from tests.conftest import USER_ID, BotHarness, running_bot

HALF_HEADERS = b"POST /x HTTP/1.1\r\nHost: x\r\n"
HALF_BODY = b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
SHORT = 0.5


@pytest.fixture
def short_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_limits, "IDLE_SECONDS", SHORT)
    monkeypatch.setattr(http_limits, "BODY_SECONDS", SHORT)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def closed_by_the_server(port: int, request: bytes, within: float = 10 * SHORT) -> bool:
    """Whether the server ends the connection of a client that sent `request` and then nothing, within `within` s."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    try:
        async with asyncio.timeout(within):
            while await reader.read(4096):  # an error answer may come first: then the end
                pass
        return True
    except TimeoutError:
        return False
    finally:
        writer.close()


@pytest.fixture
async def listening(short_limits: None, tmp_path: Path) -> AsyncIterator[dict[str, tuple[HTTPServer, int]]]:
    """The two webhook servers, built as the bot builds them, listening on ports of their own."""

    async def nothing(*_: object) -> bool:
        return True

    telegram_port, github_port = free_port(), free_port()
    settings = make_settings_for_webhook(tmp_path)
    servers = {
        "telegram": (webhook_server(None, settings), telegram_port),  # type: ignore[arg-type]  # no request is handled
        "github": (WebhookServer(f"127.0.0.1:{github_port}", "k", nothing, nothing)._server, github_port),
    }
    for server, port in servers.values():
        server.listen(port, "127.0.0.1")
    yield servers
    for server, _ in servers.values():
        server.stop()


def make_settings_for_webhook(tmp_path: Path) -> Settings:
    return Settings(
        _env_file=None,
        workspace_path=tmp_path,
        telegram_bot_token="1:x",
        anthropic_api_key="sk-unit",
        allowed_user_ids=str(USER_ID),
        webhook_url="https://bot.example.com",
        webhook_secret_token="s3cret",
    )


@pytest.mark.parametrize("request_sent", [HALF_HEADERS, HALF_BODY], ids=["half-headers", "half-body"])
@pytest.mark.parametrize("server", ["telegram", "github"])
async def test_a_webhook_server_closes_a_client_that_stops_half_way(
    listening: dict[str, tuple[HTTPServer, int]], server: str, request_sent: bytes
) -> None:
    _, port = listening[server]
    assert await closed_by_the_server(port, request_sent), f"the {server} webhook kept a half-sent request open"


@pytest.fixture
async def review_bot(
    short_limits: None, fake_telegram, fake_anthropic, tmp_path: Path, workspace_root: Path, bot_repo: Path
) -> AsyncIterator[BotHarness]:
    port = free_port()
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        review_url=f"http://127.0.0.1:{port}",
        review_listen=f"127.0.0.1:{port}",
    ) as bot:
        yield bot


@pytest.mark.parametrize("request_sent", [HALF_HEADERS, HALF_BODY], ids=["half-headers", "half-body"])
async def test_the_review_page_closes_a_client_that_stops_half_way(review_bot: BotHarness, request_sent: bytes) -> None:
    port = int(review_bot.settings.review.review_listen.rpartition(":")[2])
    assert await closed_by_the_server(port, request_sent), "the review page kept a half-sent request open"
