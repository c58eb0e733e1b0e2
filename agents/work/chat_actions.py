"""What a chat does besides the crew's desk (to running work, mostly): the one port the chat adapter goes through.

A press of a button is honoured only as shown (the pressed message carried that very button, as the notifier
recorded when it showed it); a worker's question is answered by an option's button or a reply in words
(questions.py); a worker's network request is decided by the owner's button (agents/sandbox/network_gate.py); a reply
to a task's progress message finds that task (the crew then steers it); a decision on a proposal taken with a button
is kept in the conversation the orchestrator reads; /new starts a fresh conversation; a forum topic seen for the first
time becomes a conversation of its own; a chat the platform moved to a new id (a group upgraded to a supergroup)
takes its conversation and work along; an inbound update delivered again is recognised. What the chat's commands
only read is on the read side, chat_queries.py.

Under either task engine the same object answers: the runtime builds it over the lines that reach running tasks,
which under TASK_ENGINE=temporal forward a network answer to the task's workflow (agents/engine/front.py), so the
chat never needs an executor that runs nothing.
"""

from __future__ import annotations

from agents.core.actions import Action
from agents.core.errors import ToolError
from agents.core.models import Caller, ChatMessage, Delivery, Role, Task
from agents.core.protocols import Notifier
from agents.sandbox.network_gate import CHOICES, NetworkGate
from agents.store.database import Store
from agents.store.delivery import owed
from agents.work.crew import Crew
from agents.work.questions import Questions, split_button_id

DECISION_PREFIX = "[button] "  # how a button's decision on a proposal reads in the conversation's history


class ChatActions:
    """The chat's side: shown buttons, questions, network requests, progress replies, decisions, fresh starts, topics,
    repeated updates."""

    def __init__(
        self, store: Store, notifier: Notifier, crew: Crew, questions: Questions, network: NetworkGate
    ) -> None:
        self.store, self.notifier, self.crew = store, notifier, crew
        self.questions, self.network = questions, network

    async def answer_owed(self, record_id: int, chat_id: int, text: str, reply_to: int | None) -> Delivery:
        """The answer to the message on record as `record_id` (`message_arrived`) put in the outbox, and the message
        taken off the record, in one transaction: from then on the answer is owed (sent, or sent after a restart),
        and a stop or a crash before it goes out never also tells the chat that it was lost."""
        return await self.store.open_turns.told(record_id, owed(chat_id, text, reply_to=reply_to, kind="answer"))

    async def button_shown(self, chat_id: int, message_id: int, data: str) -> bool | None:
        """None: that message never carried that button (a client can send any data); else whether the message is a
        request handed to the owners. A press that comes before its message's send has returned waits for it."""
        await self.notifier.buttons_settled()
        return await self.store.shown_buttons.shown(chat_id, message_id, data)

    @staticmethod
    def answers_network(action: Action) -> bool:
        """Whether the button answers a worker's request for network access (or for an approval-gated call)."""
        return action in CHOICES

    def decide_network(self, caller: Caller, request_id: int, action: Action) -> str:
        """An owner's answer to a network request asked in the caller's chat; what to tell the chat. Whether the
        caller is an owner is the adapter's first check (it answers a member with an alert, changing nothing)."""
        return self.network.decide(caller.chat_id, request_id, CHOICES[action])

    async def answer_option(self, caller: Caller, button_id: int) -> str:
        """An option's button of a worker's question; what to tell the chat."""
        question_id, option = split_button_id(button_id)
        said, to_resume = await self.questions.answer(caller.chat_id, caller.user_id, question_id, option=option)
        return await self._resumed(caller, said, to_resume)

    async def answer_in_words(self, caller: Caller, replied_message_id: int, text: str) -> str | None:
        """A reply in words to the message of a worker's question; what to tell the chat, or None when the replied
        message shows no question."""
        question = await self.questions.question_of_message(caller.chat_id, replied_message_id)
        if question is None or question.id is None:
            return None
        said, to_resume = await self.questions.answer(caller.chat_id, caller.user_id, question.id, text)
        return await self._resumed(caller, said, to_resume)

    async def _resumed(self, caller: Caller, said: str, to_resume: Task | None) -> str:
        """Answered after a restart: the interrupted task goes on with the answer, resumed as the Resume button would
        (refused as it would be: the answer then waits, kept, for a later Resume)."""
        if to_resume is not None:
            try:
                await self.crew.branches.resume(caller, to_resume.stored_id)
            except ToolError as err:
                return f"Thanks: your answer is kept for task #{to_resume.id}, but it cannot go on now: {err}."
        return said

    async def task_of_progress_message(self, caller: Caller, message_id: int) -> Task | None:
        """The task whose progress message this is, in the caller's chat (a reply to it steers the task)."""
        return await self.store.task_by_progress_message(caller.chat_id, message_id)

    async def new_conversation(self, conversation: int) -> None:
        """/new: the orchestrator reads nothing said before (the history stays stored; tasks and proposals stay)."""
        await self.store.start_new_conversation(conversation)

    async def record_decision(self, caller: Caller, text: str) -> None:
        """A decision on a proposal taken with a button: part of the conversation the orchestrator reads."""
        await self.store.add_message(
            ChatMessage(chat_id=caller.chat_id, role=Role.ASSISTANT, content=f"{DECISION_PREFIX}{text}")
        )

    async def update_arrived(self, update_id: int, body: str) -> None:
        """A pushed update kept from its arrival (webhook mode): one a kill catches before its turn is handled at the
        next start (agents/store/incoming_updates.py)."""
        await self.store.incoming_updates.arrived(update_id, body)

    async def kept_updates(self) -> list[str]:
        """The pushed updates kept (JSON), oldest first: handled again at start; those handled before are repeats."""
        return await self.store.incoming_updates.kept()

    async def moved_from(self, chat_id: int, message_id: int) -> int | None:
        """The conversation (a topic that was gone) whose message the bot posted as `message_id` in the chat's
        general topic instead; a press on it or a reply to it belongs there."""
        return await self.store.conversations.moved_from(chat_id, message_id)

    async def topic_conversation(self, chat_id: int, thread_id: int, name: str) -> int:
        """The conversation key of a forum topic; one seen for the first time is recorded (a name learnt later fills an
        empty one) and binds itself to the workspace of its name, if there is one."""
        key = await self.store.conversations.topic(chat_id, thread_id, name)
        place = await self.store.conversations.place(key)
        await self.crew.binding.auto_bind(key, place.topic_name)
        return key

    async def chat_moved(self, old: int, new: int) -> dict[str, int]:
        """The platform moved a chat to a new id for good (Telegram's service message: a group upgraded to a
        supergroup): its conversation, work and schedules go on there (agents/store/chat_moves.py). How many rows of
        each table moved; idempotent."""
        return await self.store.chat_moves.move(old, new)

    async def first_time(self, event_keys: list[str]) -> bool:
        """Records an inbound update by its keys; False when it was seen before (delivered again: act on it once)."""
        return await self.store.seen_events.first_time(event_keys)

    async def message_arrived(self, chat_id: int, kind: str, asked: str) -> int:
        """A message on its way to an answer, on record until `message_done`: one a stop or a crash cuts short is
        told at the next start (agents/store/open_turns.py). Its record's id."""
        return await self.store.open_turns.begin(chat_id, kind, asked)

    async def message_done(self, record_id: int) -> None:
        await self.store.open_turns.end(record_id)
