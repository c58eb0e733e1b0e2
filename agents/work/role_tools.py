"""What a worker's tools call back into the bot: pictures to the chat, criteria verified, usage, the network question.

One `RoleCallbacks` per task, made by `WorkerMaker.make` (task_workers.py) and handed to
`tools.tool_sets.worker_tools`; each method is what one tool of the role needs from the bot's side (the store, the
chat, the progress message, the gate).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic

from agents.core.errors import ToolError
from agents.core.models import Task
from agents.core.protocols import Notifier
from agents.llm.client import usage_record
from agents.llm.tool_loop import RunClock
from agents.sandbox.bwrap import NetworkPolicy, SandboxSpec
from agents.sandbox.network_gate import NetworkDecision, NetworkGate
from agents.store.database import Store
from agents.tools.mcp_client import Gate
from agents.tools.mcp_config import McpServerConfig, tool_name
from agents.tools.mcp_tasks import Gates
from agents.tools.screenshot import on_loopback, screenshot_tool_result
from agents.tools.toolbox import ToolResult
from agents.work.progress import Progress
from agents.work.questions import Questions

log = logging.getLogger(__name__)


@dataclass
class RoleCallbacks:
    task: Task
    store: Store
    notifier: Notifier
    progress: Progress
    network: NetworkGate
    chromium: str | None  # the browser's executable (find_chromium), None where there is none
    sandbox_of: Callable[[Path], SandboxSpec | None]  # the task's sandbox for a root (its worktree)
    questions: Questions | None = None  # ask_user's questions to the task's starter
    clock: RunClock | None = None  # the worker's run: a question waits no longer than its time limit has left

    async def ask_user(self, question: str, options: list[str] | None = None) -> str:
        """ask_user: the question to whoever started the task; the progress message says it waits. The wait counts
        against the worker's time limit like any other work (ASK_TIMEOUT_SECONDS, or what is left of the limit if
        less), and a task asks ASK_MAX_PER_TASK questions at most: asking again and again never outlives the task."""
        if self.questions is None:
            raise ToolError("nobody can be asked here: decide yourself and say so in your report")
        left = self.clock.seconds_left() if self.clock is not None else None
        return await self.questions.ask(
            self.task, question, options, lambda step: self.progress.update(step, force=True), left
        )

    async def screenshot(self, root: Path, target: str) -> ToolResult:
        """The frontend worker's screenshot: taken in the task's sandbox; each picture also goes to the chat."""
        confined = self.sandbox_of(root)
        if confined is not None and self.network.policy is NetworkPolicy.ON and not on_loopback(target):
            confined = confined.with_network(True)  # a page of the task's own services: its network namespace
        result, pictures = await screenshot_tool_result(self.chromium, root, target, confined)
        await self.show_pictures(pictures)
        return result

    async def verify(self, index: int, evidence: str) -> str:
        """An acceptance criterion verified with evidence; the progress message counts them."""
        task_id = self.task.stored_id
        if not await self.store.verify_criterion(task_id, int(index), str(evidence)[:2000]):
            count = len(await self.store.criteria(task_id))
            raise ToolError(f"there is no criterion {index}; the criteria are numbered 1..{count}")
        criteria = await self.store.criteria(task_id)
        done = sum(c.verified for c in criteria)
        self.progress.criteria_verified(done, len(criteria))
        await self.progress.update(f"verified criterion {index}")
        return f"criterion {index} verified ({done}/{len(criteria)})"

    async def on_usage(self, response: anthropic.types.Message) -> None:
        task = self.task
        agent = f"{task.worker.value}-worker"
        await self.store.record_usage(usage_record(response, agent, task.chat_id, task.id, task.user_id))

    async def ask_network(self, command: str, cautions: tuple[str, ...] = ()) -> NetworkDecision:
        """run_command(network=true): the owner is asked (the progress message says so while it waits); the question
        names what the command will reach (the task's sandbox's egress) and the `cautions` the command line does
        not show."""
        spec = self.sandbox_of(Path(self.task.worktree or "."))  # the worker's own sandbox, whatever the root
        reach = spec.egress.describe() if spec is not None else None
        return await self.network.request(
            self.task, command, lambda step: self.progress.update(step, force=True), reach, cautions
        )

    async def pictures(self, pictures: list[tuple[str, bytes]]) -> None:
        """Images an MCP tool returned (the browser's screenshots): each also goes to the chat."""
        await self.show_pictures(pictures)

    async def show_pictures(self, pictures: list[tuple[str, bytes]]) -> None:
        """Each picture is kept with the task for its review page, and goes to the chat. Kept first: a picture the
        chat could not take (Telegram refused or was unreachable) is still on the review page, and a failed send
        only costs the chat that picture, never the tool call that made it."""
        for caption, png in pictures:
            await self.store.reviews.add_picture(self.task.stored_id, caption, png)
            try:
                await self.notifier.send_photo(self.task.chat_id, png, caption=f"Task #{self.task.id}: {caption}")
            except Exception as err:  # Telegram-agnostic: any refusal or outage of the chat
                log.warning("task #%s: a picture not shown in the chat: %s", self.task.id, err)

    def mcp_gate(self, config: McpServerConfig) -> Gate:
        """Before each call of `config`'s tools: one that `asks` (under its `approve`; every tool of a server whose
        `approve` names a tool it lacks) waits for the owner's Allow."""

        async def gate(tool: str, arguments: dict[str, Any], asks: bool) -> None:
            if not asks:
                return
            name = tool_name(config.name, tool)
            call = f"{name} {json.dumps(arguments, indent=2, ensure_ascii=False)}"
            decision = await self.network.approve_call(
                self.task, name, call, lambda step: self.progress.update(step, force=True)
            )
            if not decision.allowed:
                raise ToolError(decision.explanation)

        return gate

    def mcp_gates(self) -> Gates:
        """Approvals of MCP_CONFIG's tools, and the browser's outside URLs asked like a network command."""
        return Gates(self.mcp_gate, self.ask_network, lambda: self.network.covers(self.task.stored_id))
