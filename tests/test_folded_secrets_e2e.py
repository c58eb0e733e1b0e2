"""Secrets in folded spellings, and private hosts in IPv6 spellings: attacks through the real bot and the real proxy.

A hostile worker (the scripted model) prints the bot's own API key base64-encoded (alone and inside an encoded line),
JSON-escaped and in hexadecimal, and a Telegram token with a zero-width space in it, percent-escaped, JSON-escaped and split over lines (the key
folded over several too); nothing of them may reach the model.
The browser's egress proxy, told to allow every host, must still refuse a 6to4 address that carries a private IPv4
address, and a site-local one.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shlex
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from agents.sandbox.egress_proxy import EgressProxy
from tests.conftest import USER_ID, BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, spare
from tests.support.tasks import ended, start_task

KEY = "sk-ant-api03-Own-Key-Of-The-Bot-7781-abcdefghijkl"
TELEGRAM_SHAPED = "987654321:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawX"


@pytest.mark.skipif(shutil.which("bwrap") is None or not sys.platform.startswith("linux"), reason="needs bwrap")
@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
@pytest.mark.settings(anthropic_api_key=KEY)
async def test_the_bots_key_and_a_token_in_folded_spellings_are_masked(bot: BotHarness) -> None:
    spellings = {
        "base64": base64.b64encode(KEY.encode()).decode(),
        "base64 of a line": base64.b64encode(f"ANTHROPIC_API_KEY={KEY}\n".encode()).decode(),
        "json": json.dumps({"key": KEY}, ensure_ascii=True).replace("-", "\\u002d"),
        "zero-width": TELEGRAM_SHAPED[:14] + "\u200b" + TELEGRAM_SHAPED[14:],
        "percent": TELEGRAM_SHAPED.replace(":", "%3A"),
        "json token": TELEGRAM_SHAPED.replace(":", "\\u003a"),
        "split over two lines": TELEGRAM_SHAPED[:20] + "\n" + TELEGRAM_SHAPED[20:],
        "key folded over lines": "\n".join(KEY[i : i + 12] for i in range(0, len(KEY), 12)),
        "hex, as xxd -p prints it": "\n".join(textwrap.wrap(KEY.encode().hex(), 60)),
        "hex, upper case": KEY.encode().hex().upper(),
    }
    model = RoleScript()
    bot.claude.handler = model
    model.add("orchestrator", start_task("calc", "Print the values."), claude_says.text("Started."))
    model.add(
        "code",
        *[
            claude_says.tool_use("run_command", {"command": f"printf '%s\\n' {shlex.quote(value)}"})
            for value in spellings.values()
        ],
        claude_says.text("Done."),
    )
    bot.say("print them in calc")
    await ended(bot, 1, timeout=90)
    last = model.requests["code"][-1]["messages"]
    results = [
        json.dumps(b["content"])
        for m in last
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert len(results) == len(spellings), results
    for (name, value), result in zip(spellings.items(), results, strict=True):
        shown = json.loads(result)
        for part in value.split("\n"):
            assert part not in shown, f"{name}: {part!r} of {value!r} reached the model: {shown!r}"
        assert "«masked»" in shown, f"{name}: {shown!r}"


async def _connect_through(proxy: EgressProxy, target: str) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(proxy.socket_path))
    writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    await writer.drain()
    async with asyncio.timeout(20):
        answer = await reader.read(4096)
    writer.close()
    return answer


@pytest.mark.parametrize(
    "target",
    [
        "[2002:7f00:1::]:8080",  # 6to4 of 127.0.0.1
        "[2002:a9fe:a9fe::]:80",  # 6to4 of 169.254.169.254 (cloud metadata)
        "[2002:c0a8:104::]:443",  # 6to4 of 192.168.1.4
        "[fec0::1]:80",  # site-local
    ],
)
async def test_the_proxy_refuses_ipv6_spellings_of_private_space(tmp_path: Path, target: str) -> None:
    proxy = EgressProxy(tmp_path)
    proxy.allow_all()
    await proxy.start()
    try:
        answer = await _connect_through(proxy, target)
    finally:
        await proxy.close()
    assert answer.startswith(b"HTTP/1.1 403") and b"no public address" in answer, answer


# ---- what the chat shows is masked, not only what the Markdown source says ------------------------------------------
GITHUB_SHAPED = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz"  # a classic GitHub token's shape


def everything_shown(bot: BotHarness) -> list[str]:
    """Every text the chat showed: each message in each of its versions, and its buttons' labels."""
    messages = bot.tg.messages(USER_ID)
    return [v.text or "" for m in messages for v in m.history] + [
        str(b.get("text", "")) for m in messages for b in m.buttons
    ]


@pytest.mark.untested_calc
@pytest.mark.settings(anthropic_api_key=KEY)
async def test_an_answer_whose_markdown_renders_to_the_key_shows_it_masked(bot: BotHarness) -> None:
    """The filter reads the Markdown source; rendering joins what the source keeps apart: a backslash before each
    `-` of the bot's key, or emphasis inside it."""
    model = RoleScript()
    bot.claude.handler = model
    escaped, emphasised = KEY.replace("-", "\\-"), KEY[:14] + "**" + KEY[14:20] + "**" + KEY[20:]
    model.add("orchestrator", claude_says.text(f"The key is {escaped} and {emphasised} there."))
    bot.say("what is your key")
    await bot.tg.await_for(lambda: any("there" in t for t in everything_shown(bot)), timeout=30)
    shown = everything_shown(bot)
    assert not any(KEY in t for t in shown), shown


@pytest.mark.untested_calc
async def test_a_workers_question_shows_no_token_in_its_text_or_its_buttons(bot: BotHarness) -> None:
    """A worker's question is text the bot did not write: escaped for Markdown (`ghp\\_…`), which hid a token from
    the mask applied after; its options are button labels, which the mask never read."""
    bot.runtime.secrets.add([TELEGRAM_SHAPED])
    model = RoleScript()
    bot.claude.handler = model
    model.add("orchestrator", start_task("calc", "Ask."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("ask_user", {"question": f"Push with {GITHUB_SHAPED} ?", "options": [TELEGRAM_SHAPED]}),
        spare(claude_says.text("Done."), why="the test ends at the question"),
    )
    bot.say("ask me in calc")
    await bot.tg.await_for(lambda: any("asks you" in t for t in everything_shown(bot)), timeout=60)
    shown = everything_shown(bot)
    assert not any(GITHUB_SHAPED in t or TELEGRAM_SHAPED in t for t in shown), shown
