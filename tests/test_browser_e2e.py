"""The frontend worker's browser, played through the real bot: a frontend task starts `python3 -m
http.server` as a service, opens it in chrome-devtools-mcp's Chromium (inside the task's sandbox and network
namespace), takes a screenshot that reaches the chat, reads a console error the page logs; an outside URL asks the
owner first (allowed once: reached through the task's egress proxy, a local stand-in for the site; another
denied); nothing of the browser or the server is left after the task."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agents.core.models import TaskStatus
from agents.sandbox.egress_proxy import EgressProxy
from agents.tools import browser
from agents.tools.screenshot import find_chromium
from tests.conftest import USER_ID, BotHarness, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.processes import host_pids, host_pids_where
from tests.support.tasks import ended, tool_results

INSTALL, WHY_NOT = browser.find(None, find_chromium())
pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or shutil.which("nsenter") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) or nsenter is not installed: scripts/install-system-deps.sh",
    ),
    pytest.mark.skipif(INSTALL is None, reason=f"no browser for the frontend worker: {WHY_NOT}"),
]

PAGE = (
    "<!doctype html><html><head><title>Shop</title></head><body><h1>Hello shop</h1>"
    "<script>console.error('console-error-77: cart is undefined')</script></body></html>"
)
PORT = 8131


@pytest.fixture
async def asking_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) -> AsyncIterator[BotHarness]:
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        sandbox_network="ask",
        sandbox_network_answer_seconds=30,
        mcp_start_timeout_seconds=60,
    ) as harness:
        yield harness


def use(name: str, **arguments: Any) -> dict:
    return claude_says.tool_use(name, arguments)


def on_the_page(name: str, **arguments: Any):
    """A call of a page tool with the pageId new_page answered (`N: Title (http://localhost:PORT/…)`)."""

    def reply(body: dict) -> dict:
        found = re.findall(rf"(\d+): [^\\]*?http://localhost:{PORT}/", json.dumps(body["messages"]))
        return use(name, pageId=int(found[-1]) if found else 1, **arguments)

    return reply


async def test_a_frontend_task_serves_looks_reads_the_console_and_goes_out_only_when_allowed(
    asking_bot: BotHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One frontend task (one browser: each start costs a node and a Chromium) serves its page, looks at it and
    reads its console; then an outside page: Allow once reaches that host through the task's egress proxy (its name
    resolved, here, to a local stand-in) and an image of another host on it is refused (the model told); another
    outside host asks again, and denied it is not opened."""
    origin = await asyncio.start_server(_origin, "127.0.0.1", 0)
    origin_port = origin.sockets[0].getsockname()[1]

    async def connect(self: EgressProxy, host: str, _port: int):  # noqa: ANN202
        return await asyncio.open_connection("127.0.0.1", origin_port) if host == "reference.example.com" else None

    monkeypatch.setattr(EgressProxy, "_connect", connect)
    bot = asking_bot
    model = RoleScript()
    bot.claude.handler = model
    model.add(
        "orchestrator",
        use(
            "start_task",
            workspace="group-therapy",
            worker="frontend",
            instructions="Build the shop page like the reference.",
            background=True,
        ),
        claude_says.text("Started."),
    )
    model.add(
        "frontend",
        use("write_file", path="index.html", content=PAGE),
        use("run_command", command=f"python3 -m http.server {PORT} --bind 127.0.0.1", background=True),
        use("mcp__browser__new_page", url=f"http://localhost:{PORT}/index.html"),
        on_the_page("mcp__browser__take_screenshot"),
        on_the_page("mcp__browser__list_console_messages"),
        use("mcp__browser__new_page", url="http://reference.example.com/shop"),
        use("mcp__browser__new_page", url="https://second.example.org/shop"),
        claude_says.text("The page is served, checked and compared."),
    )
    bot.say("build the shop page in group-therapy like the reference")
    try:
        first = await _network_question(bot)
        assert "http://reference.example.com/shop" in first.text
        assert "Allowed once, the browser reaches reference.example.com for the rest of the task" in first.text
        assert host_pids(f"{PORT}"), "the service runs while the browser is used"
        bot.tg.press_button(USER_ID, first.message_id, f"net:once:{first.callback_data[0].rsplit(':', 1)[1]}")
        second = await _network_question(bot, after=first.message_id)
        assert "https://second.example.org/shop" in second.text
        bot.tg.press_button(USER_ID, second.message_id, f"net:deny:{second.callback_data[0].rsplit(':', 1)[1]}")
        task = await ended(bot, 1, timeout=120)
    finally:
        origin.close()
    assert task.status is not TaskStatus.FAILED, task.error
    tools = [t["name"] for t in model.requests["frontend"][0]["tools"]]
    assert "mcp__browser__new_page" in tools and "screenshot" in tools and "mcp__browser__unavailable" not in tools
    results = tool_results(model, "frontend")
    opened = next(r for r in results if f"localhost:{PORT}/index.html" in r)
    assert "Error" not in opened, opened
    assert any('"image"' in r and "image/png" in r for r in results), "the screenshot went back to the model"
    console = next(r for r in results if "console-error-77" in r)
    assert "cart is undefined" in console and "[error]" in console, console
    allowed, refused = results[-2:]
    assert "Reference shop (http://reference.example.com/shop)" in allowed, allowed
    assert "refused these hosts" in allowed and "cdn.elsewhere.example" in allowed, "the model is told"
    assert "was not opened" in refused and "denied" in refused and "second.example.org" in refused, refused
    assert "second.example.org" not in allowed
    photos = [m for m in bot.tg.messages(USER_ID) if m.kind == "photo"]
    assert any("mcp__browser__take_screenshot" in (p.caption or "") for p in photos), [p.caption for p in photos]
    shot = next(p for p in photos if "take_screenshot" in (p.caption or ""))
    assert shot.data and shot.data.startswith(b"\x89PNG")
    entry = str(INSTALL.entry)
    await bot.tg.await_for(
        lambda: not host_pids(entry) and not host_pids(str(PORT)) and not _chromium_of_the_task(), timeout=15
    )
    events = [e.detail for e in await bot.runtime.store.task_events(task.id) if e.kind == "network"]
    assert any("second.example.org" in e and "denied by the owner" in e for e in events), events
    assert json.dumps(results).count("asks for network") == 0
    known = browser.known_tools(INSTALL, bot.runtime.settings.paths.data_dir)  # kept by this task's start
    assert known is not None and "new_page" in {t.name for t in known}, "the next frontend task starts nothing"


def _chromium_of_the_task() -> list[int]:
    """Chromium processes started by chrome-devtools-mcp (its --isolated profile is under the sandbox's /tmp)."""
    return host_pids_where(
        lambda args: any(b"chrome-devtools-mcp" in a for a in args) and any(b"chromium" in a for a in args)
    )


async def _origin(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A stand-in for an outside site (tests have no network): one page, whatever is asked."""
    await reader.readuntil(b"\r\n\r\n")
    body = b'<!doctype html><title>Reference shop</title><h1>The reference</h1><img src="http://cdn.elsewhere.example/a.png">'

    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()
    writer.close()


async def _network_question(bot: BotHarness, after: int = 0):
    return await bot.tg.await_for(
        lambda: next(
            (
                m
                for m in bot.tg.messages(USER_ID)
                if "asks for network access" in (m.text or "") and m.callback_data and m.message_id > after
            ),
            None,
        ),
        timeout=120,
    )
