"""The orchestrator: one chat turn = history + context + a tool-use loop on the Messages API."""

from __future__ import annotations

import asyncio
import logging
import math
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import anthropic

from agents import prompts
from agents.llm import estimate_tokens, explain_api_error, usage_record
from agents.models import ChatMessage, ConversationNote, InputMethod, Role, TaskStatus, Usage
from agents.settings import Settings
from agents.store import Store
from agents.symbol_hints import SymbolHints
from agents.tool_sets import WorkDesk, orchestrator_tools
from agents.tool_loop import AnswerStream, Ending, Limits, LoopResult, ToolLoop, as_model
from agents.toolbox import Audit, Toolbox
from agents.workspaces import Workspaces

log = logging.getLogger(__name__)

EPHEMERAL = {"type": "ephemeral"}
COMPACT_INPUT_CHARS = 200_000  # the newest part of the turns to summarise, if they are longer


@dataclass
class Reply:
    """What a turn produced for the user."""

    text: str
    ok: bool = True
    api_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    tools_used: list[str] = field(default_factory=list)


def history_messages(history: list[ChatMessage]) -> list[dict[str, Any]]:
    """Stored turns as API messages: starts with the user, same-role neighbours merged (a failed turn leaves two users)."""
    messages: list[dict[str, Any]] = []
    for turn in history:
        if not messages and turn.role is not Role.USER:
            continue
        if messages and messages[-1]["role"] == turn.role.value:
            messages[-1]["content"][0]["text"] += "\n\n" + turn.content
        else:
            messages.append({"role": turn.role.value, "content": [{"type": "text", "text": turn.content}]})
    return messages


def reply_text(result: LoopResult, tools_used: list[str]) -> str:
    """What the user reads for each way a turn can end; never a claim that something happened when it did not."""
    text = result.text
    if result.ending is Ending.CUT_OFF:
        return (text + "\n\n" if text else "") + "_(my answer was cut off at the output limit; ask me to go on)_"
    if result.ending is Ending.REFUSED:
        return text or "Claude declined to answer this request."
    if result.ending is Ending.CONTEXT_FULL:
        return "This conversation no longer fits in Claude's context window; /new starts a fresh one."
    if text:
        return text
    if tools_used:
        return f"I used {', '.join(dict.fromkeys(tools_used))} but wrote no answer; ask again if something is missing."
    return "(no answer)"


def _mark_cache(message: dict[str, Any]) -> None:
    message["content"][-1]["cache_control"] = EPHEMERAL


class Orchestrator:
    """Answers one message at a time per chat (a per-chat lock keeps order); other chats run concurrently."""

    def __init__(
        self, settings: Settings, store: Store, client: anthropic.AsyncAnthropic, workspaces: Workspaces, desk: WorkDesk,
        hints: SymbolHints | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.client = client
        self.workspaces = workspaces
        self.desk = desk
        self.hints = hints
        self._locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def context_block(self, chat_id: int, input_method: InputMethod, text: str = "") -> str:
        """The per-turn facts the seed design gives the orchestrator: input method, workspaces, tasks, proposals."""
        lines = [f"input_method: {input_method.value}"]
        if input_method is InputMethod.VOICE:
            lines.append("(this message is a speech transcript: be lenient with misheard words and names)")
        lines.append("workspaces:")
        for ws in self.workspaces.all():
            lines.append(f"- {ws.name}" + (" (this bot's own code)" if ws.name == "self" else ""))
        active = await self.store.list_tasks(
            chat_id, statuses=[TaskStatus.PENDING, TaskStatus.IN_PROGRESS, TaskStatus.INTERRUPTED], limit=20
        )
        lines.append("active tasks:" if active else "active tasks: none")
        for t in active:
            lines.append(f"- #{t.id} [{t.status.value}] {t.worker.value} in {t.workspace}: {t.title}")
        pending = await self.store.pending_proposals(chat_id)
        lines.append("pending proposals:" if pending else "pending proposals: none")
        for p in pending:
            summary = " ".join(p.body.split())[:300]
            lines.append(f"- proposal #{p.id} for {p.workspace} (request: {p.request[:200]}): {summary}")
        definitions = await self.hints.hints(text) if self.hints else []
        if definitions:
            lines.append("definitions of code names in this message (from the repository index):")
            lines += [f"- {d}" for d in definitions]
        return "<context>\n" + "\n".join(lines) + "\n</context>"

    def _fit_for_model(self, text: str) -> str:
        limit = self.settings.max_message_chars
        if len(text) <= limit:
            return text
        return (
            f"{text[:limit]}\n\n[The user's message was {len(text):,} characters long; only the first {limit:,} "
            "are shown here. Say so briefly in your reply.]"
        )

    async def _history(self, chat_id: int) -> list[ChatMessage]:
        """The conversation as the model sees it: a compact note of older turns, then the newest turns in the budget.

        When the unsummarised turns pass the budget, the older ones (all but the newest half-budget) are
        summarised by the model into a note kept in the store; the turns themselves stay stored (/history).
        """
        budget = self.settings.history_token_budget
        note = await self.store.latest_note(chat_id)
        turns = await self.store.messages_after(chat_id, note.up_to_message_id if note else 0)
        if sum(t.tokens for t in turns) > budget:
            keep: list[ChatMessage] = []
            used = 0
            for turn in reversed(turns):
                if keep and used + turn.tokens > budget // 2:
                    break
                keep.append(turn)
                used += turn.tokens
            keep.reverse()
            older = turns[: len(turns) - len(keep)]
            summary = await self._summarise(chat_id, note.summary if note else None, older) if older else None
            if summary:
                note = await self.store.add_note(ConversationNote(chat_id=chat_id, up_to_message_id=older[-1].id,
                                                                  summary=summary))
            turns = keep
        if note is None:
            return turns
        return [ChatMessage(chat_id=chat_id, role=Role.USER, content=f"[Summary of our earlier conversation]\n{note.summary}")] + turns

    async def _summarise(self, chat_id: int, previous: str | None, turns: list[ChatMessage]) -> str | None:
        transcript = "\n\n".join(f"{t.role.value}: {t.content}" for t in turns)[-COMPACT_INPUT_CHARS:]
        if previous:
            transcript = f"(summary so far)\n{previous}\n\n(later turns)\n{transcript}"
        try:
            response = await self.client.messages.create(
                model=self.settings.orchestrator_model, max_tokens=1024, system=prompts.COMPACTOR,
                messages=[{"role": "user", "content": transcript}],
            )
        except anthropic.APIError as err:  # the turn goes on with the newest turns only
            log.warning("chat %s: could not compact the history: %s", chat_id, err)
            return None
        await self.store.record_usage(usage_record(response, "compactor", chat_id, None))
        return "".join(b.text for b in response.content if b.type == "text").strip() or None

    async def handle(self, chat_id: int, text: str, input_method: InputMethod = InputMethod.TEXT,
                     answer: AnswerStream | None = None) -> Reply:
        """One turn; with `answer`, the reply streams into it while it is written (tool activity too)."""
        async with self._locks[chat_id]:
            return await self._turn(chat_id, text, input_method, answer)

    async def _turn(self, chat_id: int, text: str, input_method: InputMethod, answer: AnswerStream | None = None) -> Reply:
        # The user's words are stored first: whatever fails next, nothing is lost.
        await self.store.add_message(
            ChatMessage(chat_id=chat_id, role=Role.USER, content=text, input_method=input_method,
                        tokens=estimate_tokens(text))
        )
        history = await self._history(chat_id)
        messages = history_messages(history[:-1])
        if len(messages) >= 2:  # cache breakpoint at the end of the previous turn's user message
            for m in reversed(messages):
                if m["role"] == "user":
                    _mark_cache(m)
                    break
        current = {"role": "user", "content": [
            {"type": "text", "text": self._fit_for_model(text), "cache_control": EPHEMERAL},
            {"type": "text", "text": await self.context_block(chat_id, input_method, text[:2000])},
        ]}
        if messages and messages[-1]["role"] == "user":
            messages[-1]["content"].extend(current["content"])
        else:
            messages.append(current)

        toolbox = Toolbox(
            orchestrator_tools(self.workspaces, self.desk, chat_id),
            Audit(self.store, agent="orchestrator", chat_id=chat_id),
        )

        async def record(response: anthropic.types.Message) -> None:
            await self.store.record_usage(usage_record(response, "orchestrator", chat_id, None))

        loop = ToolLoop(model=as_model(self.client), model_name=self.settings.orchestrator_model, system=prompts.ORCHESTRATOR,
                        toolbox=toolbox, max_output_tokens=self.settings.max_output_tokens, tools_on_last_step=False,
                        moving_cache=False, on_response=record, answer=answer, messages=messages)
        rounds = self.settings.orchestrator_max_tool_rounds + 1  # the last one answers without tools
        try:
            result = await loop.run(Limits(max_steps=rounds, max_seconds=math.inf, max_tokens=sys.maxsize))
        except anthropic.APIError as err:
            log.warning("chat %s: Anthropic API error: %s", chat_id, err)
            return Reply(text=explain_api_error(err), ok=False, api_calls=loop.api_calls, usage=loop.usage,
                         tools_used=loop.tools_used)
        reply = Reply(text=reply_text(result, loop.tools_used), api_calls=loop.api_calls, usage=loop.usage,
                      tools_used=loop.tools_used)
        await self.store.add_message(
            ChatMessage(chat_id=chat_id, role=Role.ASSISTANT, content=reply.text, tokens=estimate_tokens(reply.text))
        )
        return reply
