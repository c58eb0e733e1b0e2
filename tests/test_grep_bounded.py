"""grep cannot freeze the bot: ripgrep in a killable subprocess, never Python's backtracking `re` on the event loop."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from agents.core.errors import ToolError
from agents.core.models import Caller, TaskStatus
from agents.core.secrets_filter import SecretsFilter
from agents.tools import file_tools
from tests.conftest import USER_ID, make_settings, start_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.sandbox import SECRET_ENV, secret_environment  # noqa: F401  (fixture)

pytestmark = pytest.mark.skipif(
    shutil.which("rg") is None, reason="ripgrep (`rg`) is not installed (apt-get install ripgrep)"
)

EVIL = "(a+)+$"  # catastrophic backtracking in Python's re: ~12 minutes over 31 a's and a '!', hours for a few more
OTHER_USER = 1002


def gated_rg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put an `rg` first on PATH that waits for `gate/release`, then runs the real ripgrep; returns the gate folder."""
    gate = tmp_path / "gate"
    gate.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "rg"
    wrapper.write_text(
        f"#!/bin/sh\necho $$ > {gate}/started\n"
        f'while [ ! -e {gate}/release ]; do sleep 0.05; done\nexec {shutil.which("rg")} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return gate


async def test_catastrophic_pattern_finds_nothing_without_backtracking(tmp_path: Path) -> None:
    (tmp_path / "evil.txt").write_text("a" * 31 + "!\n" + "a" * 200_000 + "!\n")
    (tmp_path / "fine.txt").write_text("aaa\n")
    out = await asyncio.wait_for(
        file_tools.grep(tmp_path, EVIL, secrets=SecretsFilter()), timeout=60
    )  # a hang guard, not a speed claim
    assert out == "fine.txt:1: aaa"
    long_hit = await file_tools.grep(tmp_path, "a!$", secrets=SecretsFilter())
    assert long_hit.startswith("evil.txt:1: ") and "evil.txt:2: …" in long_hit and len(long_hit) < 1000


async def test_ripgrep_gets_none_of_the_bots_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secret_environment: None
) -> None:
    """ripgrep reads the workspace outside the sandbox: without the keys the bot may hold in its environment."""
    recording = tmp_path / "bin"
    recording.mkdir()
    seen = tmp_path / "environment"
    (recording / "rg").write_text(f'#!/bin/sh\nenv > {seen}\nexec {shutil.which("rg")} "$@"\n')
    (recording / "rg").chmod(0o755)
    monkeypatch.setenv("PATH", f"{recording}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "notes.txt").write_text("needle\n")
    assert await file_tools.grep(tmp_path, "needle", secrets=SecretsFilter()) == "notes.txt:1: needle"
    recorded = seen.read_text()
    assert "PATH=" in recorded and not any(value in recorded for value in SECRET_ENV.values()), recorded


async def test_pattern_limits_and_syntax_errors_are_clear(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("x\n")
    with pytest.raises(ToolError, match="limit is 1,000"):
        await file_tools.grep(tmp_path, "a" * 1001, secrets=SecretsFilter())
    with pytest.raises(ToolError, match="look-around"):
        await file_tools.grep(tmp_path, "(?=x)", secrets=SecretsFilter())


async def test_without_ripgrep_grep_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "x.txt").write_text("x\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ToolError, match="ripgrep .* is not installed"):
        await file_tools.grep(tmp_path, "x", secrets=SecretsFilter())


async def test_a_search_past_its_time_is_killed_with_its_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agents.tools import ripgrep

    gate = gated_rg(tmp_path, monkeypatch)
    (tmp_path / "x.txt").write_text("x\n")
    with pytest.raises(ripgrep.GrepTimeout, match="stopped"):
        await ripgrep.collect("x", [tmp_path / "x.txt"], 10, timeout=0.5)
    pid = int((gate / "started").read_text())
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the timed-out rg is still alive")


async def test_other_chats_and_status_are_answered_while_a_worker_greps(
    fake_telegram, fake_anthropic, tmp_path, workspace_root, monkeypatch
) -> None:
    from telegram_bot.app import stop_application

    gate = gated_rg(tmp_path, monkeypatch)
    (workspace_root / "group-therapy" / "evil.txt").write_text("a" * 31 + "!\n" + "a" * 100_000 + "!\n")
    model = RoleScript()
    fake_anthropic.handler = model
    model.add("code", claude_says.tool_use("grep", {"pattern": EVIL}), claude_says.text("Searched."))
    settings = make_settings(
        fake_telegram, fake_anthropic, tmp_path, workspace_root, allowed_user_ids=f"{USER_ID},{OTHER_USER}"
    )
    bot = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        await bot.runtime.crew.races.start_task(
            Caller(chat_id=USER_ID), "group-therapy", "code", "search for the evil pattern", background=True
        )
        await fake_telegram.await_for(lambda: (gate / "started").exists(), timeout=20)
        fake_telegram.send_command(USER_ID, "/status")
        model.add("orchestrator", claude_says.text("Answer for the other chat."))
        fake_telegram.send_text(OTHER_USER, "hello from another chat")
        await fake_telegram.await_for(
            lambda: any("Active tasks" in (m.text or "") for m in fake_telegram.messages(USER_ID))
        )
        await fake_telegram.wait_for_message(OTHER_USER, 1)
        assert len(model.requests["code"]) == 1, "both were answered while the grep was still running"
        assert (await bot.runtime.store.get_task(1)).status is TaskStatus.IN_PROGRESS

        (gate / "release").touch()
        while not (await bot.runtime.store.get_task(1)).status.is_final:
            await asyncio.sleep(0.05)
        tool_result = model.requests["code"][1]["messages"][-1]["content"][0]
        assert "no matches" in str(tool_result["content"])
    finally:
        await stop_application(bot.app)


def test_doctor_names_ripgrep(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from agents.doctor import Level, check_ripgrep

    assert check_ripgrep(None).level is Level.ok
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    missing = check_ripgrep(None)
    assert missing.level is Level.warn and "apt install ripgrep" in missing.fix
