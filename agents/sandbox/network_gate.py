"""Network on request: a worker's `run_command(network=true)` waits for the owner's answer in the chat.

With SANDBOX_NETWORK=ask the command is posted with inline buttons (Allow once · Allow for this task · Deny);
no answer within SANDBOX_NETWORK_ANSWER_SECONDS is a deny. `on` and `off` decide without asking. Every decision
is a task event (`network`), so `/task N` and `/log N` show it.

The owner sees the whole command before any button: in the question as a code block the command cannot
close (`agents.core.text.fenced`), or, when it is too long for one message, as a file sent just before the question,
which then shows none of it (a partial preview is what an attacker would hide the dangerous part behind).
Nothing of it is masked either: the question and its file go out without the output filter (a mask such as
`authorization: «masked»` once swallowed the rest of a line, an upload included), and a line beside the command
says when it holds what looks like a token or password.

The same question, with the same buttons, asks about one call of an MCP tool under its server's `approve` (
`approve_call`): the whole call is shown the same way; SANDBOX_NETWORK never answers it for the owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from secrets import randbelow

from agents.core.actions import Action, Buttons, button
from agents.core.models import Task, TaskEvent
from agents.core.protocols import Notifier
from agents.core.secrets_filter import SecretsFilter
from agents.core.text import keep_head_and_tail, literal_block, outside_text, secret_warning, utf16_len, visible
from agents.sandbox.bwrap import NetworkPolicy
from agents.store.database import Store
from agents.store.delivery import send_retried

log = logging.getLogger(__name__)

ONCE, FOR_TASK, DENY = "once", "task", "deny"
CHOICES = {Action.NET_ONCE: ONCE, Action.NET_TASK: FOR_TASK, Action.NET_DENY: DENY}  # the buttons' answers
# A command longer than this goes as a file: the chat renders to HTML, where each of < > & takes up to 5 characters,
# and a Telegram message holds 4,096; this keeps the question (and its edit) one message with room for the words.
MESSAGE_COMMAND_CHARS = 3000
_EVENT_COMMAND_CHARS = 600  # the task event keeps the head and tail (/log N); the owner saw the whole of it


def fits_in_message(command: str) -> bool:
    """Whether the command fits the question's one message as it is shown there: with its invisible characters made
    visible (six characters each, `literal_block`), counted as Telegram counts (UTF-16 units: an emoji is two), and
    room for each < > & to become an HTML entity. Measured on the text itself, a command of zero-width spaces or
    emoji split the question in two, and the part with the buttons showed only the command's tail."""
    shown = visible(command)
    return utf16_len(shown) + 4 * sum(shown.count(c) for c in "<>&") <= MESSAGE_COMMAND_CHARS


def command_file_name(task_id: int, request_id: int, word: str = "network") -> str:
    return f"task-{task_id}-{word}-request-{request_id}.txt"


def command_shown(command: str, file_name: str, secrets: SecretsFilter, noun: str = "command") -> str:
    """The command as the question shows it: whole, in a code block nothing in it can close, or the file's name;
    never masked, with a warning beside it when it carries what looks like a secret (to `secrets`)."""
    warning = secret_warning(command, secrets, noun)
    if fits_in_message(command):
        return literal_block(command) + warning
    return (
        f"The {noun} is {len(command):,} characters long, too long for a message: it is whole in the file "
        f"**{file_name}** sent just above. Read it there before you allow it.{warning}"
    )


@dataclass(frozen=True)
class Subject:
    """What a question asks the owner about: network for a command (NETWORK), or one call of an MCP tool."""

    tool: str | None = None  # the MCP tool (mcp__server__tool) a call asks to run

    @property
    def icon(self) -> str:
        return "🌐" if self.tool is None else "🔧"

    @property
    def noun(self) -> str:
        return "command" if self.tool is None else "call"

    @property
    def verb(self) -> str:
        return "to run with network access" if self.tool is None else "to make"

    @property
    def question(self) -> str:
        return "asks for network access to run" if self.tool is None else f"asks to call `{self.tool}` with"

    @property
    def short(self) -> str:
        return "asks for network access" if self.tool is None else f"asks to call `{self.tool}`"

    @property
    def closed(self) -> str:
        return "network request" if self.tool is None else f"call of `{self.tool}`"

    @property
    def waiting(self) -> str:
        return f"waiting for you to allow {'network access' if self.tool is None else self.tool}"

    @property
    def allowed(self) -> str:
        return "Network" if self.tool is None else f"{self.tool}"

    @property
    def file_word(self) -> str:
        return "network" if self.tool is None else "tool-call"


NETWORK = Subject()


@dataclass(frozen=True)
class NetworkDecision:
    allowed: bool
    explanation: str  # for the worker when denied, in plain words


@dataclass
class _Pending:
    chat_id: int
    task_id: int
    command: str
    file_name: str
    message_id: int | None
    answer: asyncio.Future[str]
    subject: Subject
    reach: str | None = None  # what an allowed command will reach, said under the command
    cautions: tuple[str, ...] = ()  # what the command line does not show (a service, the task's own programs)
    copies: list[tuple[int, int]] = field(default_factory=list)  # (chat, message) of a question handed to owners

    def asked_in(self, chat_id: int) -> bool:
        return chat_id == self.chat_id or any(chat == chat_id for chat, _ in self.copies)


def request_buttons(request_id: int) -> Buttons:
    return [
        [
            button("✅ Allow once", Action.NET_ONCE, request_id),
            button("✅ Allow for this task", Action.NET_TASK, request_id),
            button("✖ Deny", Action.NET_DENY, request_id),
        ]
    ]


class NetworkGate:
    """Decides whether a task's command may use the network; asks the owner when the policy says so."""

    def __init__(
        self,
        policy: NetworkPolicy,
        store: Store,
        notifier: Notifier,
        answer_seconds: float,
        is_owner: Callable[[int | None], bool] = lambda _user: True,
        *,
        secrets: SecretsFilter,
    ) -> None:
        """`secrets`: the process's output filter; a question warns when the command holds what it would mask."""
        self.policy, self.store, self.notifier, self.answer_seconds = policy, store, notifier, answer_seconds
        self.secrets = secrets
        self.is_owner = is_owner  # a member's task: the question goes to the owners (they alone answer it)
        self._pending: dict[int, _Pending] = {}
        self._allowed_tasks: set[int] = set()
        self._allowed_calls: set[tuple[int, str]] = set()  # (task id, MCP tool) allowed for the rest of the task
        # ids unique across restarts, so a stale button from an earlier run never answers a new question, and across
        # processes: a restarted bot that no longer knows a question passes the press to every runner's task in that
        # chat, and each answers the id it waits on. Counted from a random start, not the clock: two runners started
        # in the same millisecond counted the same ids, and one press answered both questions.
        self._ids = itertools.count(randbelow(10**12))

    async def request(
        self,
        task: Task,
        command: str,
        waiting: Callable[[str], Awaitable[None]] | None = None,
        reach: str | None = None,
        cautions: tuple[str, ...] = (),
    ) -> NetworkDecision:
        """Whether `command` of `task` may run with the network; `waiting(step)` tells the progress message; `reach`
        (egress_rules.Egress.describe) is what the question says the command will be able to reach; `cautions`
        what else the owner must know that the command line does not show (each a sentence, shown as text)."""
        if self.policy is NetworkPolicy.ON:
            return await self._record(task, True, "allowed (SANDBOX_NETWORK=on)", command)
        if self.policy is NetworkPolicy.OFF:
            await self._record(task, False, "denied (SANDBOX_NETWORK=off)", command)
            return NetworkDecision(
                False,
                "Network access is switched off on this bot (SANDBOX_NETWORK=off); the "
                "command was not run. Do the work without the network.",
            )
        if task.id in self._allowed_tasks:
            return await self._record(task, True, "allowed (allowed for this task earlier)", command)
        choice, how = await self._ask(task, command, NETWORK, waiting, reach, cautions)
        if choice == FOR_TASK:
            self._allowed_tasks.add(task.stored_id)
        await self._record(task, choice in (ONCE, FOR_TASK), how, command)
        if choice in (ONCE, FOR_TASK):
            return NetworkDecision(True, how)
        if choice is None:
            return NetworkDecision(
                False,
                f"The owner did not answer the request for network access within "
                f"{self.answer_seconds:g} seconds, so the command was not run. Work without "
                "the network, or say in your report what needs it.",
            )
        return NetworkDecision(
            False,
            "The owner denied network access for this command, so it was not run. Work "
            "without the network, or say in your report what needs it.",
        )

    async def approve_call(
        self, task: Task, tool: str, call: str, waiting: Callable[[str], Awaitable[None]] | None = None
    ) -> NetworkDecision:
        """An MCP tool under its server's `approve`: the owner sees the whole `call` and allows it (once, for this
        task) or not. SANDBOX_NETWORK does not answer for the owner here: every such call is asked."""
        if (task.id, tool) in self._allowed_calls:
            return await self._record(task, True, f"{tool} allowed (allowed for this task earlier)", call)
        choice, how = await self._ask(task, call, Subject(tool), waiting)
        if choice == FOR_TASK:
            self._allowed_calls.add((task.stored_id, tool))
        await self._record(task, choice in (ONCE, FOR_TASK), f"{tool} {how}", call)
        if choice in (ONCE, FOR_TASK):
            return NetworkDecision(True, how)
        if choice is None:
            return NetworkDecision(
                False,
                f"The owner did not answer within {self.answer_seconds:g} seconds, so {tool} was not called. "
                "Do without it, or say in your report what needs it.",
            )
        return NetworkDecision(
            False, f"The owner denied this call of {tool}, so it was not run. Do without it, or say in your report why."
        )

    async def _ask(
        self,
        task: Task,
        text: str,
        subject: Subject,
        waiting: Callable[[str], Awaitable[None]] | None,
        reach: str | None = None,
        cautions: tuple[str, ...] = (),
    ) -> tuple[str | None, str]:
        """Post the question (the whole `text` first as a file when it is too long), wait for a button; returns
        the choice (None: no answer in time) and how it was decided, after the question lost its buttons."""
        request_id = next(self._ids)
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        file_name = command_file_name(task.stored_id, request_id, subject.file_word)
        pending = _Pending(task.chat_id, task.stored_id, text, file_name, None, answer, subject, reach, cautions)
        self._pending[request_id] = pending
        await self.store.add_event(
            TaskEvent(
                task_id=task.id,
                kind="network",
                detail=f"asked the owner: {keep_head_and_tail(text, _EVENT_COMMAND_CHARS, 'command')}",
            )
        )
        try:
            await self._post(task, pending, request_id)
            if waiting is not None:
                await waiting(subject.waiting)
            try:
                async with asyncio.timeout(self.answer_seconds):  # not wait_for: it can swallow a /cancel on 3.11
                    choice = await asyncio.shield(answer)
            except TimeoutError:
                choice = None
        finally:
            self._pending.pop(request_id, None)
            if not answer.done():
                answer.cancel()
        how = {
            ONCE: "allowed once by the owner",
            FOR_TASK: "allowed for this task by the owner",
            DENY: "denied by the owner",
            None: f"no answer in {self.answer_seconds:g} s: denied",
        }[choice]
        await self._close_question(pending, how)
        return choice, how

    async def _post(self, task: Task, pending: _Pending, request_id: int) -> None:
        """Post the question: in the task's conversation, or, for a member's task, where the owners see it."""
        subject = pending.subject
        reach = f"Allowed, it reaches {outside_text(pending.reach)}.\n" if pending.reach else ""
        cautions = "".join(f"⚠️ {outside_text(caution)}\n" for caution in pending.cautions)
        question = (
            f"{subject.icon} **Task #{task.id}** {subject.question}:\n"
            f"{command_shown(pending.command, pending.file_name, self.secrets, subject.noun)}\n"
            f"{cautions}{reach}No answer in {self.answer_seconds:g} s means no."
        )
        if not fits_in_message(pending.command):  # the file first, so the whole command is there before any button
            await self.notifier.send_document(
                task.chat_id,
                pending.file_name,
                pending.command.encode("utf-8", "replace"),
                caption=f"The whole {subject.noun} task #{task.id} asks {subject.verb}.",
                literal=True,
            )
        if self.is_owner(task.user_id):
            pending.message_id = await send_retried(
                self.notifier,
                task.chat_id,
                question,
                buttons=request_buttons(request_id),
                reply_to=task.progress_message_id,
                literal=True,
            )
            return
        who = outside_text(task.user_name) if task.user_name else "a member"
        handed = f"{question}\n(The task is {who}'s; only an owner can answer.)"
        pending.copies = await self.notifier.ask_owners(
            task.chat_id, handed, buttons=request_buttons(request_id), literal=True
        )
        if all(chat != task.chat_id for chat, _ in pending.copies):
            await self.notifier.send(
                task.chat_id,
                f"{subject.icon} Task #{task.id} {subject.short}; I've asked an owner.",
                reply_to=task.progress_message_id,
            )

    def is_asking(self, request_id: int) -> bool:
        """Whether request `request_id` is a question of this gate (answered or not, until its task forgets it)."""
        return request_id in self._pending

    def decide(self, chat_id: int, request_id: int, choice: str) -> str:
        """A button press: answer a waiting request asked in this chat; returns the text for the chat."""
        pending = self._pending.get(request_id)
        if pending is None or not pending.asked_in(chat_id) or pending.answer.done():
            return "That network request is no longer waiting for an answer."
        if choice not in (ONCE, FOR_TASK, DENY):
            return "This button is no longer valid."
        pending.answer.set_result(choice)
        what = pending.subject.allowed
        return {
            ONCE: f"{what} allowed once for task #{pending.task_id}.",
            FOR_TASK: f"{what} allowed for the rest of task #{pending.task_id}.",
            DENY: f"{what} denied for task #{pending.task_id}.",
        }[choice]

    def covers(self, task_id: int) -> bool:
        """Whether every network request of the task is allowed without asking (SANDBOX_NETWORK=on, or the owner
        chose Allow for this task)."""
        return self.policy is NetworkPolicy.ON or task_id in self._allowed_tasks

    def forget(self, task_id: int) -> None:
        """The task ended: its 'allow for this task' ends with it."""
        self._allowed_tasks.discard(task_id)
        self._allowed_calls = {(t, tool) for t, tool in self._allowed_calls if t != task_id}

    async def _close_question(self, pending: _Pending, how: str) -> None:
        asked = [(pending.chat_id, pending.message_id)] if pending.message_id is not None else []
        for chat_id, message_id in asked + pending.copies:
            with contextlib.suppress(Exception):  # the question's buttons go; a failed edit must not hold up the task
                await self.notifier.edit(
                    chat_id,
                    message_id,
                    f"{pending.subject.icon} **Task #{pending.task_id}** {pending.subject.closed}:\n"
                    f"{command_shown(pending.command, pending.file_name, self.secrets, pending.subject.noun)}\n{how}",
                    literal=True,
                )

    async def _record(self, task: Task, allowed: bool, how: str, command: str) -> NetworkDecision:
        shown = command if len(command) <= 200 else command[:200] + "…"
        await self.store.add_event(TaskEvent(task_id=task.id, kind="network", detail=f"{how}: {shown}"))
        log.info("task %s network %s: %s", task.id, how, shown)
        return NetworkDecision(allowed, how)
