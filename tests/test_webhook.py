"""Webhook mode: the real PTB webhook server on loopback, setWebhook recorded by the fake Telegram, the secret enforced."""

from __future__ import annotations

import asyncio
import signal
import socket
from pathlib import Path

import httpx
import pytest
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets
from tornado.web import Application, RequestHandler

from agents.core.settings import Settings, SettingsError, load_settings
from tests.conftest import USER_ID, make_settings
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram
from tests.support.sandbox import PROBE

SECRET = "s3cret_Token-42"
PUBLIC_BASE = "https://bot.example.com/agentlab"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def webhook_settings(tg: FakeTelegram, claude: FakeAnthropic, tmp_path: Path, workspace_root: Path) -> Settings:
    return make_settings(
        tg,
        claude,
        tmp_path,
        workspace_root,
        webhook_url=PUBLIC_BASE + "/",
        webhook_listen="127.0.0.1",
        webhook_port=free_port(),
        webhook_path="/tg/updates/",
        webhook_secret_token=SECRET,
    )


@pytest.fixture
async def webhook_bot(fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path):
    from telegram_bot.app import build_application, stop_application
    from telegram_bot.webhook import start_webhook

    settings = webhook_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    app = build_application(settings)
    app.bot_data.sandbox_probe = PROBE
    await start_webhook(app, settings)
    try:
        yield app, settings
    finally:
        await stop_application(app)  # it stops whichever updater serves: long polling or this webhook


async def test_webhook_registered_with_telegram_and_secret_enforced(
    webhook_bot, fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic
) -> None:
    app, settings = webhook_bot
    registered = fake_telegram.webhook
    assert registered is not None, "setWebhook reached the fake Telegram"
    assert registered["url"] == f"{PUBLIC_BASE}/tg/updates"
    assert registered["secret_token"] == SECRET
    assert "message" in registered["allowed_updates"] and "callback_query" in registered["allowed_updates"]

    local = f"http://127.0.0.1:{settings.telegram.webhook_port}/tg/updates"
    fake_anthropic.script(claude_says.text("Hello over the webhook."))
    forged = fake_telegram.send_text(USER_ID, "forged: delete everything")
    genuine = fake_telegram.send_text(USER_ID, "hi from the webhook")
    async with httpx.AsyncClient(timeout=5) as client:
        missing = await client.post(local, json=forged)
        wrong = await client.post(local, json=forged, headers={SECRET_HEADER: "not-the-secret"})
        accepted = await client.post(local, json=genuine, headers={SECRET_HEADER: SECRET})
    assert (missing.status_code, wrong.status_code) == (403, 403)
    assert accepted.status_code == 200

    [reply] = await fake_telegram.wait_for_message(USER_ID, count=1, timeout=10)
    assert reply.text == "Hello over the webhook."
    assert fake_anthropic.calls == 1, "only the update with the right secret reached Claude"
    words = str(fake_anthropic.requests[0].body["messages"][-1]["content"])
    assert "hi from the webhook" in words and "forged" not in words
    stored = await app.bot_data.runtime.store.all_messages(USER_ID)
    assert [m.content for m in stored][0] == "hi from the webhook"
    assert not any("forged" in m.content for m in stored)


async def test_refused_update_never_reaches_claude(
    webhook_bot, fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic
) -> None:
    _, settings = webhook_bot
    update = fake_telegram.send_text(USER_ID, "no secret here")
    async with httpx.AsyncClient(timeout=5) as client:
        response = await client.post(f"http://127.0.0.1:{settings.telegram.webhook_port}/tg/updates", json=update)
    assert response.status_code == 403
    with pytest.raises(TimeoutError):
        await fake_telegram.wait_for_message(USER_ID, count=1, timeout=0.5)
    assert fake_anthropic.calls == 0
    assert fake_telegram.calls("sendMessage") == []


def test_public_url_joins_base_and_path(fake_telegram, fake_anthropic, tmp_path, workspace_root) -> None:
    from telegram_bot.webhook import public_webhook_url

    settings = webhook_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    assert public_webhook_url(settings) == f"{PUBLIC_BASE}/tg/updates"
    polling = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    assert polling.telegram.webhook_url is None and polling.telegram.webhook_secret_token is None
    with pytest.raises(ValueError):
        public_webhook_url(polling)


# ------------------------------------------------------------------------------------------------- settings


REQUIRED = dict(telegram_bot_token="1:x", anthropic_api_key="k", allowed_user_ids="1", workspace_path="/tmp")


def test_webhook_defaults() -> None:
    settings = Settings(_env_file=None, **REQUIRED)
    assert (
        settings.telegram.webhook_url,
        settings.telegram.webhook_listen,
        settings.telegram.webhook_port,
        settings.telegram.webhook_path,
    ) == (
        None,
        "127.0.0.1",
        8443,
        "telegram",
    )
    assert settings.logs.log_format == "text"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"webhook_url": "https://bot.example.com"}, "WEBHOOK_SECRET_TOKEN: required when WEBHOOK_URL is set"),
        ({"webhook_url": "https://bot.example.com", "webhook_secret_token": "   "}, "WEBHOOK_SECRET_TOKEN: required"),
        (
            {"webhook_url": "http://bot.example.com", "webhook_secret_token": "abc"},
            "WEBHOOK_URL: must be the public https://",
        ),
        ({"webhook_url": "https://x", "webhook_secret_token": "has space"}, "WEBHOOK_SECRET_TOKEN: must be 1-256"),
        ({"webhook_url": "https://x", "webhook_secret_token": "a" * 257}, "WEBHOOK_SECRET_TOKEN: must be 1-256"),
        ({"webhook_path": "a b"}, "WEBHOOK_PATH: must be a URL path"),
        ({"webhook_port": "0"}, "WEBHOOK_PORT"),
    ],
)
def test_webhook_settings_are_validated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, overrides, named) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SettingsError) as raised:
        load_settings(**REQUIRED, **overrides)
    assert named in str(raised.value)
    assert "\n" not in str(raised.value)


def test_webhook_settings_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for key, value in {
        **{k.upper(): v for k, v in REQUIRED.items()},
        "WEBHOOK_URL": "https://bot.example.com/",
        "WEBHOOK_PORT": "9000",
        "WEBHOOK_SECRET_TOKEN": SECRET,
        "AGENTLAB_LOG_FORMAT": "JSON",
    }.items():
        monkeypatch.setenv(key, value)
    settings = load_settings()
    assert settings.telegram.webhook_url == "https://bot.example.com"
    assert settings.telegram.webhook_port == 9000
    assert (
        settings.telegram.webhook_secret_token is not None
        and settings.telegram.webhook_secret_token.get_secret_value() == SECRET
    )
    assert settings.logs.log_format == "json"


async def test_an_oversized_body_is_refused_before_it_is_buffered(
    webhook_bot, fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic
) -> None:
    from telegram_bot.webhook import MAX_BODY_BYTES

    _, settings = webhook_bot
    local = f"http://127.0.0.1:{settings.telegram.webhook_port}/tg/updates"
    update = fake_telegram.send_text(USER_ID, "a padded update")
    update["padding"] = "x" * (MAX_BODY_BYTES + 1)  # a valid update, only too big
    statuses = []
    async with httpx.AsyncClient(timeout=10) as client:
        for headers in ({SECRET_HEADER: SECRET}, {}):
            try:
                statuses.append((await client.post(local, json=update, headers=headers)).status_code)
            except httpx.TransportError:  # the server closed the connection while the body was still coming
                statuses.append("closed")
        fake_anthropic.script(claude_says.text("Small updates still work."))
        small = await client.post(local, json=fake_telegram.send_text(USER_ID, "hi"), headers={SECRET_HEADER: SECRET})
    assert all(s in (400, 413, "closed") for s in statuses), statuses  # 403 would mean it was read whole first
    assert small.status_code == 200
    [reply] = await fake_telegram.wait_for_message(USER_ID, count=1, timeout=10)
    assert reply.text == "Small updates still work."
    assert fake_anthropic.calls == 1 and "padded" not in str(fake_anthropic.requests[0].body["messages"])


class _Sizes(RequestHandler):
    """Says how big the body and the X-Big header it got were."""

    def post(self) -> None:
        self.write({"body": len(self.request.body), "header": len(self.request.headers.get("X-Big", ""))})


async def test_the_webhook_limits_are_its_own_server_s_alone(
    webhook_bot, fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic
) -> None:
    """Another tornado server made after the webhook started keeps tornado's defaults (100 MB bodies, 64 KB headers):
    the webhook's caps are its own server's constructor arguments; the webhook still refuses what is over them."""
    from telegram_bot.webhook import MAX_BODY_BYTES, MAX_HEADER_BYTES

    _, settings = webhook_bot
    other = HTTPServer(Application([("/sizes", _Sizes)]))
    [listening] = bind_sockets(0, "127.0.0.1")
    other.add_sockets([listening])
    big_body, big_header = b"x" * (MAX_BODY_BYTES + 1), "y" * (MAX_HEADER_BYTES + 1)
    update = fake_telegram.send_text(USER_ID, "a padded update")
    update["padding"] = "x" * (MAX_BODY_BYTES + 1)
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            sizes: dict[str, int] | int | str
            try:
                answer = await client.post(
                    f"http://127.0.0.1:{listening.getsockname()[1]}/sizes",
                    content=big_body,
                    headers={"X-Big": big_header},
                )
                sizes = answer.json() if answer.status_code == 200 else answer.status_code
            except httpx.TransportError:  # tornado closes the connection past a limit (the old process-wide caps)
                sizes = "closed"
            try:
                refused: int | str = (
                    await client.post(
                        f"http://127.0.0.1:{settings.telegram.webhook_port}/tg/updates",
                        json=update,
                        headers={SECRET_HEADER: SECRET},
                    )
                ).status_code
            except httpx.TransportError:  # closed while the body was still coming
                refused = "closed"
    finally:
        other.stop()
        await other.close_all_connections()
    assert sizes == {"body": MAX_BODY_BYTES + 1, "header": MAX_HEADER_BYTES + 1}
    assert refused in (400, 413, "closed")
    assert fake_anthropic.calls == 0


async def test_malformed_requests_are_refused_and_reach_nothing(
    webhook_bot, fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic
) -> None:
    """With the right secret still: a body that is not JSON or not an object is 400, a body that is not declared JSON
    403 (as PTB's handler), a GET 405; none reaches Claude, and a good update afterwards is answered."""
    _, settings = webhook_bot
    local = f"http://127.0.0.1:{settings.telegram.webhook_port}/tg/updates"
    json_secret = {SECRET_HEADER: SECRET, "Content-Type": "application/json"}
    async with httpx.AsyncClient(timeout=5) as client:
        statuses = [
            (await client.post(local, content=b'{"update_id": 1, "mess', headers=json_secret)).status_code,
            (await client.post(local, content=b"\xff\xfe", headers=json_secret)).status_code,
            (await client.post(local, json=[1, 2], headers={SECRET_HEADER: SECRET})).status_code,
            (await client.post(local, data={"update_id": "1"}, headers={SECRET_HEADER: SECRET})).status_code,
            (await client.get(local, headers={SECRET_HEADER: SECRET})).status_code,
        ]
        fake_anthropic.script(claude_says.text("Still listening."))
        good = await client.post(local, json=fake_telegram.send_text(USER_ID, "hi"), headers={SECRET_HEADER: SECRET})
    assert statuses == [400, 400, 400, 403, 405]
    assert good.status_code == 200
    [reply] = await fake_telegram.wait_for_message(USER_ID, count=1, timeout=10)
    assert reply.text == "Still listening."
    assert fake_anthropic.calls == 1


@pytest.mark.slow
async def test_the_bot_process_serves_the_webhook_until_sigterm(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path
) -> None:
    """`python -m telegram_bot` with WEBHOOK_URL set (the blocking entry point `make run` uses): it registers the
    webhook, answers an update posted to it, never polls, and on SIGTERM stops its server and exits 0 without
    deleting the webhook (Telegram keeps the updates that arrive meanwhile for the next start)."""
    from tests.support.processes import bot_env, launch

    port = free_port()
    env = bot_env(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    env.update(
        WEBHOOK_URL=PUBLIC_BASE,
        WEBHOOK_LISTEN="127.0.0.1",
        WEBHOOK_PORT=str(port),
        WEBHOOK_PATH="tg/updates",
        WEBHOOK_SECRET_TOKEN=SECRET,
    )
    proc = launch(env, tmp_path, "webhook")
    log = tmp_path / "webhook.log"
    try:
        await fake_telegram.wait_for_request("setWebhook", timeout=60)
        fake_anthropic.script(claude_says.text("Hello from the process."))
        async with httpx.AsyncClient(timeout=5) as client:
            update = fake_telegram.send_text(USER_ID, "hi")
            accepted = await client.post(
                f"http://127.0.0.1:{port}/tg/updates", json=update, headers={SECRET_HEADER: SECRET}
            )
        assert accepted.status_code == 200, log.read_text()[-2000:]
        [reply] = await fake_telegram.wait_for_message(USER_ID, count=1, timeout=30)
        assert reply.text == "Hello from the process."
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 15) == 0, log.read_text()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert fake_telegram.webhook is not None and fake_telegram.webhook["url"] == f"{PUBLIC_BASE}/tg/updates"
    assert fake_telegram.calls("getUpdates") == [] and fake_telegram.calls("deleteWebhook") == []
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient(timeout=5) as client:
            await client.post(f"http://127.0.0.1:{port}/tg/updates", json=update, headers={SECRET_HEADER: SECRET})


async def test_a_moment_of_5xx_at_set_webhook_is_waited_out(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path
) -> None:
    """Telegram answering setWebhook once with 502 at start: tried again (as getMe at start), never a bot that dies
    with its server already listening."""
    from telegram_bot.app import build_application, stop_application
    from telegram_bot.webhook import start_webhook

    settings = webhook_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    app = build_application(settings)
    app.bot_data.sandbox_probe = PROBE
    fake_telegram.fail_next("setWebhook", 502)
    try:
        await asyncio.wait_for(start_webhook(app, settings), timeout=30)
        assert fake_telegram.webhook is not None
    finally:
        await stop_application(app)


async def test_an_update_acknowledged_before_its_turn_is_handled_after_a_kill(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path
) -> None:
    """Telegram forgets an update once the webhook answers 200. A bot busy (its first handler held) that is killed
    before the update's turn loses nothing: the update was kept from its arrival, and the next start handles it
    (once: the first bot, let go after, finds it handled)."""
    from telegram_bot.app import build_application, stop_application
    from telegram_bot.webhook import start_webhook

    settings = webhook_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    first = build_application(settings)
    first.bot_data.sandbox_probe = PROBE
    await start_webhook(first, settings)
    release = asyncio.Event()
    guard = first.handlers[-2][0]
    real_guard = guard.callback

    async def busy(update, context):  # the first bot has not got to this update yet
        await release.wait()
        return await real_guard(update, context)

    guard.callback = busy
    second = None
    try:
        fake_anthropic.script(claude_says.text("Handled after the restart."))
        update = fake_telegram.send_text(USER_ID, "please fix the tests")
        local = f"http://127.0.0.1:{settings.telegram.webhook_port}/tg/updates"
        async with httpx.AsyncClient(timeout=5) as client:
            answer = await client.post(local, json=update, headers={SECRET_HEADER: SECRET})
        assert answer.status_code == 200
        first.bot_data.webhook.stop()  # the first bot is gone (killed) with the update not yet handled
        second = build_application(settings)
        second.bot_data.sandbox_probe = PROBE
        await start_webhook(second, settings)
        await fake_telegram.await_for(
            lambda: any("Handled after the restart." in (m.text or "") for m in fake_telegram.messages(USER_ID)),
            timeout=30,
        )
    finally:
        release.set()
        guard.callback = real_guard
        await asyncio.sleep(0.5)  # the first bot's handler runs: the update is a repeat now, and does nothing
        await stop_application(first)
        if second is not None:
            await stop_application(second)
    answers = [m for m in fake_telegram.messages(USER_ID) if "Handled after the restart." in (m.text or "")]
    assert len(answers) == 1, [m.text for m in fake_telegram.messages(USER_ID)]
