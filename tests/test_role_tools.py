"""What a worker's tools call back into the bot (agents/work/role_tools.py), with an in-memory store and a recording
chat: criteria verified and counted, usage recorded per task. Milliseconds; no bot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agents.core.errors import ToolError
from agents.core.models import Task, WorkerKind
from agents.core.secrets_filter import SecretsFilter
from agents.sandbox.bwrap import NetworkPolicy
from agents.sandbox.network_gate import NetworkGate
from agents.store.database import Store
from agents.work.progress import Progress
from agents.work.role_tools import RoleCallbacks
from tests.scripted import say


class Chat:
    """A Notifier that keeps what it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    async def send(self, chat_id: int, markdown: str, **how: Any) -> int:
        self.sent.append(("send", markdown))
        return len(self.sent)

    async def edit(self, chat_id: int, message_id: int, markdown: str, **how: Any) -> None:
        self.sent.append(("edit", markdown))

    async def send_document(self, chat_id: int, filename: str, data: bytes, caption: str = "") -> None: ...

    async def send_photo(self, chat_id: int, data: bytes, caption: str = "") -> None:
        self.sent.append(("photo", caption))

    async def send_album(self, chat_id: int, pictures: list[tuple[str, bytes]]) -> None:
        self.sent += [("album", caption) for caption, _ in pictures]


async def callbacks(tmp_path: Path) -> tuple[RoleCallbacks, Store, Chat]:
    store = await Store.open(":memory:")
    task = await store.add_task(
        Task(chat_id=5, workspace="calc", worker=WorkerKind.CODE, title="fix", instructions="fix add"),
        criteria=["add adds", "tests pass"],
    )
    chat = Chat()
    progress = Progress(chat, store, task, interval=0.0)
    gate = NetworkGate(NetworkPolicy.OFF, store, chat, 1.0, secrets=SecretsFilter())
    return RoleCallbacks(task, store, chat, progress, gate, None, lambda root: None), store, chat


async def test_verifying_criteria_counts_them_and_a_wrong_number_is_the_models_error(tmp_path: Path) -> None:
    cb, store, chat = await callbacks(tmp_path)
    try:
        assert await cb.verify(2, "pytest: 3 passed") == "criterion 2 verified (1/2)"
        assert cb.progress.criteria == "1/2 criteria verified"
        with pytest.raises(ToolError, match="numbered 1..2"):
            await cb.verify(3, "no such")
        criteria = await store.criteria(cb.task.id)
        assert [(c.idx, c.verified, c.evidence) for c in criteria] == [(1, False, None), (2, True, "pytest: 3 passed")]
    finally:
        await store.close()


async def test_usage_is_recorded_against_the_task_and_its_role(tmp_path: Path) -> None:
    cb, store, _ = await callbacks(tmp_path)
    try:
        await cb.on_usage(say("done", input_tokens=120, output_tokens=7))
        [record] = await store.usage_since(cb.task.created_at.replace(year=2000))
        assert (record.agent, record.task_id, record.input_tokens, record.output_tokens) == (
            "code-worker",
            cb.task.id,
            120,
            7,
        )
    finally:
        await store.close()


class RefusingChat(Chat):
    """A chat that refuses every picture (a caption Telegram finds too long, a chat that blocked the bot)."""

    async def send_photo(self, chat_id: int, data: bytes, caption: str = "") -> None:
        raise RuntimeError("Bad Request: message caption is too long")


async def test_a_screenshot_the_chat_refuses_is_kept_for_the_review_page_and_the_tool_call_succeeds(
    tmp_path: Path,
) -> None:
    cb, store, _ = await callbacks(tmp_path)
    cb.notifier = RefusingChat()
    try:
        await cb.show_pictures([("the page", b"\x89PNG first"), ("after the click", b"\x89PNG second")])
        pictures = await store.reviews.pictures(cb.task.stored_id)
        assert [(caption, png) for _, caption, png in pictures] == [
            ("the page", b"\x89PNG first"),
            ("after the click", b"\x89PNG second"),
        ]
    finally:
        await store.close()
