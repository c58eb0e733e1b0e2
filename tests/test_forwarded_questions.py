"""A question a task on a runner asks through the bot (TASK_ENGINE=temporal), answered by an owner's tap: what the
tap is told. The runner's gate and the bot's ChatDesk meet here without a cluster (the desk's NOTIFY activity called
directly)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agents.core.actions import Buttons
from agents.core.models import Task, WorkerKind
from tests.conftest import USER_ID
from tests.support.notifiers import NoChat
from tests.support.tasks import until

pytest.importorskip("temporalio", reason="the Temporal SDK (the optional extra .[temporal]) is missing")

if TYPE_CHECKING:
    from agents.engine.front import ChatDesk
    from agents.engine.payloads import Shown


class BotChat(NoChat):
    """The bot's notifier as ChatDesk sees it: each send gets a message id; any other call fails the test."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, str]] = []
        self._ids = iter(range(100, 10_000))

    async def send(self, chat_id: int, markdown: str, **_options: Any) -> int | None:
        self.sent.append((chat_id, markdown))
        return next(self._ids)

    async def buttons_settled(self) -> None:
        return None


class ThroughDesk(BotChat):
    """A runner's chat (ChatThroughWorkflow) without the cluster: each send is the NotifyCall the runner would send,
    handed to the bot's ChatDesk as its NOTIFY activity would be."""

    def __init__(self, desk: ChatDesk, task_id: int) -> None:
        super().__init__()
        self.desk, self.task_id = desk, task_id

    async def send(self, chat_id: int, markdown: str, **options: Any) -> int | None:
        from agents.engine.payloads import NotifyCall, encode_buttons

        buttons: Buttons | None = options.get("buttons")
        call = NotifyCall(
            self.task_id,
            chat_id,
            "send",
            markdown,
            encode_buttons(buttons),
            options.get("reply_to"),
            literal=options.get("literal", False),
        )
        shown: Shown = await self.desk.notify(call)
        return shown.message_id


async def test_an_owners_allow_of_a_runners_gated_tool_call_is_never_told_as_network(tmp_path: Path) -> None:
    """A runner's question may be a network request or a gated tool call (MCP `approve`), and the bot's side does
    not know which: tapping Allow once on "🔧 Task #1 asks to call `mcp__notes__delete_note` …" was answered
    "Network allowed once for task #1.". The answer names neither, and the runner's call goes ahead."""
    from agents.core.secrets_filter import SecretsFilter
    from agents.core.settings import Settings
    from agents.engine.front import ChatDesk, ForwardedNetworkGate, WorkflowLines
    from agents.inputs.attachments import Attachments
    from agents.sandbox.bwrap import NetworkPolicy
    from agents.sandbox.network_gate import ONCE, NetworkGate
    from agents.store.database import Store

    bot_store = await Store.open(tmp_path / "bot.db")
    runner_store = await Store.open(tmp_path / "runner.db")
    task = await bot_store.add_task(
        Task(chat_id=USER_ID, user_id=USER_ID, workspace="calc", worker=WorkerKind.CODE, title="t", instructions="i")
    )
    await runner_store.mirror_task(task, [])
    settings = Settings(
        _env_file=None,
        telegram_bot_token="t",
        anthropic_api_key="k",
        allowed_user_ids=str(USER_ID),
        workspace_path=tmp_path,
    )
    lines = WorkflowLines(settings)
    chat = BotChat()
    desk = ChatDesk(bot_store, chat, lines, Attachments(tmp_path / "attachments"))
    bot_gate = ForwardedNetworkGate(
        lines, NetworkPolicy.ASK, bot_store, chat, 30, lambda _u: True, secrets=SecretsFilter()
    )
    runner_gate = NetworkGate(
        NetworkPolicy.ASK, runner_store, ThroughDesk(desk, task.stored_id), 30, secrets=SecretsFilter()
    )
    asking = asyncio.create_task(runner_gate.approve_call(task, "mcp__notes__delete_note", '{"id": 4}'))
    await until(lambda: asyncio.sleep(0, result=bool(lines.questions)), timeout=10)
    (request_id,) = lines.questions
    said = bot_gate.decide(USER_ID, request_id, ONCE)
    runner_gate.decide(USER_ID, request_id, ONCE)  # what the poke would do on the runner
    await asyncio.wait_for(asking, 10)
    await asyncio.sleep(0)  # the background poke (no cluster here) settles
    await bot_store.close()
    await runner_store.close()
    assert said == f"Allowed once for task #{task.id}.", f"the owner allowed one tool call and was told: {said!r}"
    assert asking.result().allowed, "the runner's gated call goes ahead"
