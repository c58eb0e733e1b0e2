"""ask_user: a worker's question to whoever started its task, answered by a button or a reply in words.

The question goes to the task's conversation (its topic), addressed to the task's starter, with a button per option;
a reply to it answers in words. Only the starter or an owner may answer (anyone else is told so, and nothing
changes). The progress message says "waiting for your answer" meanwhile. The wait is bounded by construction: it counts
against the worker's time limit like any other work (a question waits ASK_TIMEOUT_SECONDS, or what is left of that
limit if less, and then the tool returns NO_ANSWER), and a task asks ASK_MAX_PER_TASK questions at most, in all its
runs; one more is refused with a sentence telling the worker to decide itself.

Questions are rows (`asked_questions`), so a restart while one waits keeps it answerable: the task is then
`interrupted`, and an answer marks the question `late` and resumes the task, whose resumed first turn carries it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from agents.core.actions import Action, Buttons, button
from agents.core.errors import ToolError
from agents.core.models import Task, TaskEvent, TaskStatus
from agents.core.protocols import Notifier
from agents.core.text import outside_text
from agents.store.database import Store
from agents.store.delivery import send_retried
from agents.store.standing import AskedQuestion, AskedQuestions, QuestionStatus

log = logging.getLogger(__name__)

NO_ANSWER = "no answer: decide yourself and say so in your report"
WAITING = "waiting for your answer"
MAX_OPTIONS = 8  # a button's id carries the question and the option: question id × 10 + option index
MAX_QUESTION_CHARS = 1500
MAX_OPTION_CHARS = 60
POSTING_WAIT_SECONDS = 10.0  # how long a reply waits for the send of a question in its chat to be answered


def _seconds(wait: float) -> str:
    return f"{round(wait):d} s" if wait >= 1 else f"{wait:.1f} s"


def option_button_id(question_id: int, index: int) -> int:
    return question_id * 10 + index


def split_button_id(item_id: int) -> tuple[int, int]:
    return divmod(item_id, 10)


def question_buttons(question: AskedQuestion) -> Buttons:
    return [
        [
            button(
                outside_text(option, markdown=False, one_line=True),
                Action.ASK_OPTION,
                option_button_id(question.id or 0, i),
            )
        ]
        for i, option in enumerate(question.options)
    ]


class Questions:
    """The questions workers ask: posted, waited for (in this process), answered from the chat."""

    def __init__(
        self,
        store: Store,
        notifier: Notifier,
        timeout_seconds: float,
        is_owner: Callable[[int | None], bool],
        max_per_task: int = 5,
    ) -> None:
        self.store, self.notifier, self.timeout_seconds, self.is_owner = store, notifier, timeout_seconds, is_owner
        self.max_per_task = max_per_task
        self.table = AskedQuestions(store)
        self._waiting: dict[int, asyncio.Future[str]] = {}
        # chat id → the questions whose message is being sent there: Telegram shows a message before the bot has
        # its answer (the message's id), so a quick reply to it can arrive before the bot knows what it replies to
        self._posting: dict[int, list[asyncio.Event]] = {}

    async def ask(
        self,
        task: Task,
        question: str,
        options: list[str] | None,
        waiting: Callable[[str], Awaitable[None]],
        time_left: float | None = None,
    ) -> str:
        """Post the question, wait for the answer (ASK_TIMEOUT_SECONDS at most, and no longer than `time_left`, what
        the worker's time limit has left); the answer, or NO_ANSWER. The task's questions past ASK_MAX_PER_TASK are
        refused before anything is posted."""
        text = " ".join(str(question or "").split()) if "\n" not in str(question) else str(question).strip()
        if not text:
            raise ToolError("the question is empty")
        if len(text) > MAX_QUESTION_CHARS:
            raise ToolError(f"the question is {len(text)} characters long; ask it in at most {MAX_QUESTION_CHARS}")
        cleaned = [" ".join(str(o).split())[:MAX_OPTION_CHARS] for o in options or [] if str(o).strip()]
        if len(cleaned) > MAX_OPTIONS:
            raise ToolError(f"at most {MAX_OPTIONS} options (got {len(cleaned)})")
        asked_before = await self.table.count_of_task(task.stored_id)
        if asked_before >= self.max_per_task:
            raise ToolError(
                f"this task has asked {asked_before} questions, the most it may ask (ASK_MAX_PER_TASK): "
                "decide yourself and say so in your report"
            )
        wait = self.timeout_seconds if time_left is None else max(0.0, min(self.timeout_seconds, time_left))
        if wait < min(1.0, self.timeout_seconds):  # the time limit is about to stop the worker: nobody could answer
            raise ToolError("the task's time limit leaves no time to wait for an answer: decide yourself and say so")
        asked = await self.table.add(
            AskedQuestion(
                task_id=task.id,
                chat_id=task.chat_id,
                user_id=task.user_id,
                user_name=task.user_name,
                question=text,
                options=list(dict.fromkeys(cleaned)),
            )
        )
        qid = asked.id or 0
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting[qid] = answer
        await self.store.add_event(TaskEvent(task_id=task.id, kind="question", detail=f"asked: {text[:300]}"))
        try:
            asked.message_id = await self._post(task, asked, qid, wait)
            await waiting(WAITING)
            try:
                async with asyncio.timeout(wait):
                    reply = await asyncio.shield(answer)
            except TimeoutError:
                reply = None
        finally:
            self._waiting.pop(qid, None)
            if not answer.done():
                answer.cancel()
        if reply is None and await self.table.settle(qid, QuestionStatus.TIMED_OUT):
            await self.store.add_event(TaskEvent(task_id=task.id, kind="question", detail="no answer in time"))
            await self._close(asked, f"⌛ No answer in {_seconds(wait)}: the worker decides itself.")
            return NO_ANSWER
        if reply is None:  # answered in the very last moment: the row has it
            row = await self.table.get(qid)
            reply = row.answer if row and row.answer else None
        return f"The user answered: {reply}" if reply else NO_ANSWER

    def _shown(self, q: AskedQuestion, footer: str) -> str:
        who = f"{outside_text(q.user_name)}, " if q.user_name else ""
        return (
            f"❓ {who}**task #{q.task_id}** asks you:\n\n{outside_text(q.question)}\n\n"
            + ("Tap an option, or reply to this message in words. " if q.options else "Reply to this message. ")
            + footer
        )

    async def _close(self, q: AskedQuestion, outcome: str) -> None:
        if q.message_id is None:
            return
        with contextlib.suppress(Exception):  # the buttons go; a failed edit must not hold up the task
            await self.notifier.edit(q.chat_id, q.message_id, self._shown(q, outcome))

    async def _post(self, task: Task, asked: AskedQuestion, qid: int, wait: float) -> int | None:
        """Send the question and keep its message id (None: not delivered); a reply in its chat meanwhile waits
        for this (see `question_of_message`)."""
        posted = asyncio.Event()
        self._posting.setdefault(task.chat_id, []).append(posted)
        try:
            message_id = await send_retried(
                self.notifier,
                task.chat_id,
                self._shown(asked, f"No answer in {_seconds(wait)} and the worker decides itself."),
                buttons=question_buttons(asked) or None,
                reply_to=task.progress_message_id,
            )
            await self.table.set_message(qid, message_id)
            return message_id
        finally:
            posted.set()
            in_chat = self._posting.get(task.chat_id, [])
            if posted in in_chat:
                in_chat.remove(posted)
            if not in_chat:
                self._posting.pop(task.chat_id, None)

    async def question_of_message(self, chat_id: int, message_id: int) -> AskedQuestion | None:
        """The question a message of the chat showed; a question still being sent there is waited for first
        (POSTING_WAIT_SECONDS at most), so a reply that beat Telegram's answer to the bot still answers it."""
        found = await self.table.by_message(chat_id, message_id)
        sending = list(self._posting.get(chat_id, ()))
        if found is None and sending:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POSTING_WAIT_SECONDS):
                    for posted in sending:
                        await posted.wait()
            found = await self.table.by_message(chat_id, message_id)
        return found

    async def answer(
        self, chat_id: int, user_id: int | None, question_id: int, text: str | None = None, option: int | None = None
    ) -> tuple[str, Task | None]:
        """An answer from the chat (an option's button, or words); returns what to tell the chat, and the task to
        resume when the answer came after a restart (the task is interrupted; the caller resumes it)."""
        q = await self.table.get(question_id)
        if q is None or q.chat_id != chat_id:
            return "That question is no longer waiting for an answer.", None
        if user_id != q.user_id and not self.is_owner(user_id):
            who = outside_text(q.user_name) if q.user_name else "the person who started the task"
            return f"Only {who} (who started task #{q.task_id}) or an owner can answer this question.", None
        if option is not None:
            if not 0 <= option < len(q.options):
                return "This button is no longer valid.", None
            text = q.options[option]
        reply = " ".join(str(text or "").split())
        if not reply:
            return "An empty answer answers nothing; reply with words.", None
        waiting = self._waiting.get(question_id)
        task = await self.store.get_task(q.task_id)
        late = waiting is None and task is not None and task.status is TaskStatus.INTERRUPTED
        status = QuestionStatus.LATE if late else QuestionStatus.ANSWERED
        if q.status is not QuestionStatus.OPEN or (waiting is None and not late):
            return "That question is no longer waiting for an answer.", None
        if not await self.table.settle(question_id, status, reply, user_id):
            return "That question is no longer waiting for an answer.", None
        if waiting is not None and not waiting.done():
            waiting.set_result(reply)
        await self.store.add_event(TaskEvent(task_id=q.task_id, kind="question", detail=f"answered: {reply[:300]}"))
        await self._close(q, f"✅ Answered: {outside_text(reply)}")
        if late:
            return f"Thanks: task #{q.task_id} goes on with your answer.", task
        return f"Thanks: task #{q.task_id} has your answer.", None

    async def carried_over(self, task_id: int) -> str:
        """For a resumed task: the answers that came while it was interrupted (given to the worker once), and its
        questions left open are closed (the resumed worker may ask again)."""
        lines = []
        for q in await self.table.of_task(task_id, QuestionStatus.LATE):
            lines.append(f"You asked the user: “{q.question}”; they answered: “{q.answer}”.")
            await self.table.mark(q.id or 0, QuestionStatus.ANSWERED)
        for q in await self.table.of_task(task_id, QuestionStatus.OPEN):
            if await self.table.settle(q.id or 0, QuestionStatus.CLOSED):
                await self._close(q, "The task went on without an answer.")
        return ("\n\n" + "\n".join(lines)) if lines else ""

    async def close_open(self, task_id: int) -> None:
        """The task ended: a question of it still open (asked before a restart) is answerable no more."""
        for q in await self.table.of_task(task_id, QuestionStatus.OPEN):
            if q.id not in self._waiting and await self.table.settle(q.id or 0, QuestionStatus.CLOSED):
                await self._close(q, "The task ended without an answer.")
