"""The orchestrator: one chat turn = its request (agents/chat/turn_context) + a tool-use loop on the Messages API."""

from __future__ import annotations

import asyncio
import logging
import math
import sys
from dataclasses import dataclass, field, replace
from typing import Any

import anthropic

from agents.chat.refusals import (
    BlockOwners,
    invalid_request_message,
    reason_of,
    refusal_note,
    refused_attachments,
    too_big_note,
)
from agents.chat.replying import ReplyTo, replied_item
from agents.chat.symbol_hints import SymbolHints
from agents.chat.turn_context import TurnContext
from agents.core.models import (
    Attachment,
    Caller,
    ChatMessage,
    InputMethod,
    Role,
    Task,
    Usage,
    WorkerKind,
)
from agents.core.protocols import AnswerStream, MessageModel, WorkDesk
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.core.text import estimate_tokens
from agents.core.user_turns import UserTurns
from agents.llm import prompts
from agents.llm.client import explain_api_error, usage_record
from agents.llm.context_budget import is_prompt_too_long, is_request_too_big
from agents.llm.reasoning import Reasoning
from agents.llm.tool_loop import Ending, Limits, LoopResult, ToolLoop, as_model
from agents.llm.usage import budget_exceeded
from agents.store.database import Store
from agents.tools.tool_sets import orchestrator_tools
from agents.tools.toolbox import Audit, Toolbox
from agents.workspaces.folders import Workspaces

log = logging.getLogger(__name__)


@dataclass
class Reply:
    """What a turn produced for the user."""

    text: str
    ok: bool = True
    api_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    tools_used: list[str] = field(default_factory=list)
    started: list[Task] = field(default_factory=list)  # the tasks the turn's tools started, as stored


MAX_REFUSED_PER_TURN = 8  # attachments dropped (one retry each at most) before the turn gives up
# Past the day's budget a chat turn still answers ("how much did I spend?", "what is running?"): one round of tools,
# then the answer; a long tool loop per message would go on spending what the budget was set to stop
SPENT_ROUNDS = 2
# What the chat's history keeps of the answer to a request whose context is not the chat's (a GitHub mention).
ANSWER_KEPT_OUT = (
    "[Answered where the request came from, and told to this chat; the answer is not kept in this conversation: it "
    "was written from text anyone could have written.]"
)


TOO_BIG = "too big to read together with our conversation"  # why a message's own file was left out


def too_big_reply(summarised: bool) -> str:
    """The turn could not be made to fit, even with the history halved and without the message's files; the
    conversation so far was put behind a note (summarised when `summarised`), so the next message goes through."""
    behind = "summarised our conversation so far" if summarised else "set our conversation so far aside"
    return (
        "Your message with our conversation is more than Claude can read at once (its context window), even with "
        f"the earlier conversation shortened. I've {behind}, so your next message starts afresh from there: send "
        "this one again, shorter or in parts, or /new to start a fresh conversation."
    )


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


def started_before_error(task: Task) -> str:
    """The line a failed turn's reply adds for a task (or research) its tools started before the failure: it goes on,
    and its report comes as any task's does; asking again would start it a second time."""
    kind = "Research" if task.worker is WorkerKind.RESEARCH else "Task"
    return f"{kind} #{task.id} was started before this error and goes on; no need to ask for it again."


class Orchestrator:
    """Answers a chat's messages, one turn at a time (the caller keeps them in order); chats run concurrently."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        client: anthropic.AsyncAnthropic | MessageModel,  # the model seam: the scripted model in unit tests
        workspaces: Workspaces,
        desk: WorkDesk,
        secrets: SecretsFilter,
        hints: SymbolHints | None = None,
        turns: UserTurns | None = None,
    ) -> None:
        """`secrets`: the bot's output filter; every tool result the model reads passes it."""
        self.settings = settings
        self.secrets = secrets
        self.turns = turns or UserTurns()  # start-up and background work waits for the turns in flight
        self.store = store
        self.client = client
        self.workspaces = workspaces
        self.desk = desk
        # what each turn sends the model
        self.context = TurnContext(settings, store, client, workspaces, secrets, hints)

    def _loop(
        self,
        caller: Caller,
        messages: list[dict[str, Any]],
        answer: AnswerStream | None,
        usage_writes: list[asyncio.Task[None]],
    ) -> ToolLoop:
        """The turn's tool loop. Each response's usage is stored by a task put in `usage_writes`, which the turn
        awaits together with its answer's storing (the two reach the store's thread together: one hand-over)."""
        chat_id = caller.chat_id
        toolbox = Toolbox(
            orchestrator_tools(
                self.workspaces,
                self.desk,
                caller,
                self.secrets,
                owner=self.settings.users.is_owner(caller.user_id),
                hidden=self.settings.paths.private_dirs,
            ),
            Audit(self.store, agent="orchestrator", chat_id=chat_id),
            self.secrets,
        )

        async def record(response: anthropic.types.Message) -> None:
            record = usage_record(response, "orchestrator", chat_id, None, caller.user_id)
            usage_writes.append(asyncio.create_task(self.store.record_usage(record)))

        return ToolLoop(
            model=as_model(self.client),
            model_name=self.settings.orchestrator.orchestrator_model,
            system=prompts.ORCHESTRATOR,
            toolbox=toolbox,
            max_output_tokens=self.settings.orchestrator.max_output_tokens,
            tools_on_last_step=False,
            moving_cache=False,
            on_response=record,
            answer=answer,
            messages=messages,
            # the same model and window as the workers': a turn that reads many big files stubs its oldest results
            context_window=self.settings.workers.worker_context_tokens,
            reasoning=Reasoning(
                self.settings.orchestrator.orchestrator_thinking, effort=self.settings.orchestrator.orchestrator_effort
            ),
        )

    async def _drop_refused(
        self, err: anthropic.APIError, messages: list[dict[str, Any]], owners: BlockOwners, current: list[Attachment]
    ) -> tuple[list[Attachment], str] | None:
        """If the API refused a photo or file of the request: mark it refused (in the store and on the object, so
        the next request leaves it out) and return (them, the API's reason); else None."""
        message = invalid_request_message(err)
        refused = refused_attachments(message, messages, owners, current) if message else []
        if not refused or message is None:
            return None
        reason = reason_of(message)
        for attachment in refused:
            attachment.refused = reason
            if attachment.id is not None:
                await self.store.refuse_attachment(attachment.id, reason)
        log.warning("chat %s: the API refused %s: %s", refused[0].chat_id, [a.name for a in refused], reason)
        return refused, reason

    async def _leave_out(self, attachments: list[Attachment]) -> None:
        """The message's own photos and files, too big for the request even with the history made smaller: marked
        refused (in the store too), so neither this turn nor a later one sends them again."""
        for attachment in attachments:
            attachment.refused = TOO_BIG
            if attachment.id is not None:
                await self.store.refuse_attachment(attachment.id, TOO_BIG)
        if attachments:
            log.warning("chat %s: left out as too big: %s", attachments[0].chat_id, [a.name for a in attachments])

    def message_arrived(self, chat_id: int) -> None:
        """Called by the adapter as a message comes in, before it queues for the chat: a turn that is waiting on a
        foreground task stops waiting (the task goes on in the background), so the new message is answered soon.
        Harmless when no turn waits: the next turn's start clears it."""
        self.desk.stop_waiting(chat_id)

    async def handle(
        self,
        chat_id: int,
        text: str,
        input_method: InputMethod = InputMethod.TEXT,
        reply_to: ReplyTo | None = None,
        attachments: list[Attachment] | None = None,
        answer: AnswerStream | None = None,
        *,
        message_id: int | None = None,
        user_id: int | None = None,
        user_name: str | None = None,
        confined_to: str | None = None,
        history_text: str | None = None,
        said: str | None = None,
    ) -> Reply:
        """One turn; with `answer`, the reply streams into it while it is written (tool activity too).
        `message_id` (the request message: a task started now replies under it) and `user_id` (who asked) reach the
        work tools as the turn's `Caller`. The reply names the tasks the turn started (`Reply.started`); a failed turn's
        text names them too (`started_before_error`).
        `confined_to`: a request from outside the chat (a GitHub mention), confined to that workspace (Caller);
        `history_text`: what the chat's history keeps of the request instead of `text` (such a request's context,
        written by anyone, must not reach the chat's later turns, which are not confined); the history keeps no more
        of the answer than that it was given (ANSWER_KEPT_OUT): it was written from that context, and a planted
        instruction the model repeated in it would reach the later turns as the assistant's own words.
        `said`: the user's own words in `text` (all of it when not given), what alone decides a merge, a proposal's
        approval and the other decisions that are the user's (agents/work/own_words.py): a forwarded message is
        someone else's words, and a request from outside the chat is no user's of this chat. A reply to the bot's
        message showing a proposal or a task (`reply_to`) decides that one alone.

        Turns of one chat must not overlap: the caller runs them one at a time, in arrival order (the adapter's
        per-chat lock, taken as a message arrives, before its download or transcription; the routing eval runs its
        cases one by one). There is no second lock here.
        """
        # the proposal or task the message replies to: the words decide that one, not another the model names
        replied = await replied_item(self.store, chat_id, reply_to)
        self.desk.turn_started(chat_id, text if said is None else said, replied)
        caller = Caller(
            chat_id=chat_id, message_id=message_id, user_id=user_id, user_name=user_name, confined_to=confined_to
        )
        try:
            with self.turns.turn():
                reply = await self._turn(
                    caller, text, input_method, reply_to, attachments or [], answer, history_text=history_text
                )
        finally:
            started = self.desk.turn_ended(chat_id)
        if not reply.ok and started:  # "try again" alone would have the user ask for the same work twice
            reply = replace(reply, text=reply.text + "".join(f"\n{started_before_error(t)}" for t in started))
        return replace(reply, started=started)

    async def _turn(
        self,
        caller: Caller,
        text: str,
        input_method: InputMethod,
        reply_to: ReplyTo | None = None,
        attachments: list[Attachment] | None = None,
        answer: AnswerStream | None = None,
        *,
        history_text: str | None = None,
    ) -> Reply:
        """The turn itself: the question stored, the request built and run, the answer stored. Kept in one piece
        because a photo or file the API refuses sends the whole request again without it (rebuilt, with a new
        loop) until it goes through, nothing has been done yet, or too many were dropped."""
        chat_id = caller.chat_id
        attachments = attachments or []
        # The user's words (and photos/files, kept by agents/attachments) are stored first: nothing is lost. The
        # write goes to the store's thread ahead of the request's reads, which do not wait for it (one hand-over);
        # the request is built once it is stored.
        kept = text if history_text is None else history_text
        asked = ChatMessage(
            chat_id=chat_id,
            role=Role.USER,
            content=kept,
            input_method=input_method,
            tokens=estimate_tokens(kept) + sum(a.tokens for a in attachments),
            attachments=attachments,
        )
        storing = asyncio.create_task(self.store.add_message(asked))
        dropped: list[Attachment] = []
        left_out: list[Attachment] = []  # the message's own files that did not fit in the request with it
        # the API found the request too large (bytes) or too long (tokens): the history's files left out, and for
        # too long, the history halved
        without_files = shorter = False
        usage_writes: list[asyncio.Task[None]] = []
        while True:
            owners: BlockOwners = {}
            messages = await self.context.request_messages(
                chat_id,
                asked,
                text,
                input_method,
                reply_to,
                attachments,
                owners,
                caller.user_id,
                owner=self.settings.users.is_owner(caller.user_id),
                stored=storing,
                confined_to=caller.confined_to,
                shorter=shorter,
                without_files=without_files,
            )
            self.secrets.mask_messages(messages)  # the user's own words and files too (a token in a caption, a .env)
            loop = self._loop(caller, messages, answer, usage_writes)
            rounds = self.settings.orchestrator.orchestrator_max_tool_rounds + 1  # the last one answers without tools
            if await budget_exceeded(self.store, self.settings) is not None:
                rounds = min(rounds, SPENT_ROUNDS)  # the day's budget is spent: the chat answers, it does not work on
            try:
                result = await loop.run(Limits(max_steps=rounds, max_seconds=math.inf, max_tokens=sys.maxsize))
                break
            except anthropic.APIError as err:
                log.warning("chat %s: Anthropic API error: %s", chat_id, err)
                refused = await self._drop_refused(err, loop.messages, owners, attachments)
                if refused is not None:
                    dropped += refused[0]
                    if not loop.tools_used and len(dropped) <= MAX_REFUSED_PER_TURN:
                        continue  # the same turn again without them: nothing was done yet
                    text_of_error = refusal_note(*refused) + " Please send your message again."
                elif is_request_too_big(err) and not loop.tools_used:
                    # The estimate said it fits and the API says it does not (a dense script, a PDF's pages, many
                    # files): nothing was done yet, so the turn goes again smaller, then without its own files.
                    too_long = is_prompt_too_long(err)
                    own = [a for a in attachments if not a.refused]
                    if not without_files or (too_long and not shorter):
                        without_files, shorter = True, shorter or too_long
                        continue
                    if own:
                        await self._leave_out(own)
                        left_out += own
                        continue
                    summarised = await self.context.put_behind(chat_id, asked)
                    text_of_error = too_big_reply(summarised)
                else:
                    text_of_error = explain_api_error(err)
                await asyncio.gather(*usage_writes)
                return Reply(
                    text=text_of_error, ok=False, api_calls=loop.api_calls, usage=loop.usage, tools_used=loop.tools_used
                )
        note = refusal_note(dropped, "; ".join(dict.fromkeys(a.refused or "" for a in dropped))) if dropped else ""
        if left_out:
            note = (note + " " if note else "") + too_big_note(left_out)
        reply = Reply(
            text=(note + "\n\n" if note else "") + reply_text(result, loop.tools_used),
            api_calls=loop.api_calls,
            usage=loop.usage,
            tools_used=loop.tools_used,
        )
        kept = reply.text if history_text is None else ANSWER_KEPT_OUT
        await asyncio.gather(
            self.store.add_message(
                ChatMessage(chat_id=chat_id, role=Role.ASSISTANT, content=kept, tokens=estimate_tokens(kept))
            ),
            *usage_writes,
        )
        return reply
