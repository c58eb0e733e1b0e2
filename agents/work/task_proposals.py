"""A research task's proposal: stored (superseding only the one it reworks, or its schedule's last run's) and shown
with Approve / Reject; the Temporal engine's front shows a runner's proposals the same way."""

from __future__ import annotations

import re

from agents.core.actions import Action, Button, button
from agents.core.models import ChatMessage, Delivery, Proposal, ProposalStatus, Task, TaskStatus
from agents.core.protocols import Outbox
from agents.core.text import quoted
from agents.store.database import Store
from agents.store.delivery import owed
from agents.store.shown import PROPOSAL, remember_shown

SCHEDULE_RUNS_LOOKED_AT = 100  # a schedule's last run among the conversation's newest completed tasks


def proposal_buttons(proposal_id: int) -> list[list[Button]]:
    return [[button("✅ Approve", Action.APPROVE, proposal_id), button("✖ Reject", Action.REJECT, proposal_id)]]


def scheduled_note(task: Task, before: str = "") -> str:
    """'⏰ Run of schedule #3' for a task a schedule started (its summary says so), else nothing."""
    return f"{before}⏰ Run of schedule #{task.schedule_id}." if task.schedule_id is not None else ""


async def store_proposal(store: Store, task: Task, body: str) -> Proposal:
    """A research task's proposal, stored as its starter's. It supersedes the proposal the research reworked, whoever
    asked for it (its starter was allowed to, and the user's own words asked for the change: own_words.REWORK), and a
    schedule's run supersedes what its schedule's earlier runs left pending. Nothing else: a pending proposal is the
    user's to decide, and a new research beside it (which the model may start on any message) leaves it pending."""
    replaced = {task.reworks} if task.reworks is not None else set()
    if task.schedule_id is not None:
        replaced |= await _earlier_runs(store, task)
    for old in await store.pending_proposals(task.chat_id):
        if old.workspace == task.workspace and old.id is not None and old.id in replaced:
            await store.decide_proposal(old.id, ProposalStatus.SUPERSEDED)
    return await store.add_proposal(
        Proposal(
            chat_id=task.chat_id,
            workspace=task.workspace,
            request=task.instructions,
            body=body,
            user_id=task.user_id,
            supersedes=task.reworks,
        )
    )


async def _earlier_runs(store: Store, task: Task) -> set[int]:
    """The proposals the earlier runs of `task`'s schedule wrote (a research task's result names its proposal),
    among the conversation's latest completed tasks."""
    done = await store.list_tasks(task.chat_id, [TaskStatus.COMPLETED], limit=SCHEDULE_RUNS_LOOKED_AT)
    runs = [t for t in done if t.schedule_id == task.schedule_id and t.id != task.id]
    return {int(m.group(1)) for t in runs if (m := re.fullmatch(r"proposal #(\d+)", t.result or ""))}


def proposal_text(task: Task, proposal: Proposal) -> str:
    """The proposal as the chat shows it: a header naming it (and the one it replaces), then its body."""
    header = (
        f"📋 **Proposal #{proposal.id}** for `{proposal.workspace}`"
        f"{f', replacing #{proposal.supersedes}' if proposal.supersedes else ''}. Approve to start a code worker on it."
        f"{scheduled_note(task, ' ')}\n\n"
    )
    return header + quoted(proposal.body)  # the research worker's words, set apart from the bot's


async def proposal_shown(store: Store, turn_chars: int, task: Task, proposal: Proposal) -> tuple[ChatMessage, Delivery]:
    """The proposal kept in the chat's history, and its outbox entry (Approve / Reject) to store and send."""
    text = proposal_text(task, proposal)
    record = await remember_shown(store, task.chat_id, PROPOSAL, proposal.id or 0, text, turn_chars)
    return record, owed(task.chat_id, text, proposal_buttons(proposal.id or 0), None, "proposal", task.id, record.id)


async def show_proposal(store: Store, deliveries: Outbox, turn_chars: int, task: Task, proposal: Proposal) -> None:
    """The proposal in the chat with Approve / Reject (through the outbox), kept in the chat's history."""
    record, entry = await proposal_shown(store, turn_chars, task, proposal)
    await deliveries.deliver(  # the record gets the chat message's id once it is sent
        entry.chat_id,
        entry.text,
        buttons=proposal_buttons(proposal.id or 0),
        kind=entry.kind,
        task_id=task.id,
        shown_record=record.id,
    )
