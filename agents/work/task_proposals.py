"""A research task's proposal: stored (superseding the chat's older pending ones for that workspace) and shown with
Approve / Reject; the Temporal engine's front shows a runner's proposals the same way."""

from __future__ import annotations

from agents.core.actions import Action, Button, button
from agents.core.models import ChatMessage, Delivery, Proposal, ProposalStatus, Task
from agents.core.protocols import Outbox
from agents.core.text import quoted
from agents.store.database import Store
from agents.store.delivery import owed
from agents.store.shown import PROPOSAL, remember_shown


def proposal_buttons(proposal_id: int) -> list[list[Button]]:
    return [[button("✅ Approve", Action.APPROVE, proposal_id), button("✖ Reject", Action.REJECT, proposal_id)]]


def scheduled_note(task: Task, before: str = "") -> str:
    """'⏰ Run of schedule #3' for a task a schedule started (its summary says so), else nothing."""
    return f"{before}⏰ Run of schedule #{task.schedule_id}." if task.schedule_id is not None else ""


async def store_proposal(store: Store, task: Task, body: str) -> Proposal:
    """A research task's proposal, stored as its starter's; the older pending proposals the same user asked for in
    the chat for that workspace are superseded (in a group, another member's proposal stays theirs to decide), and so
    is the one the research reworked, whoever asked for it (its starter was allowed to rework it)."""
    for old in await store.pending_proposals(task.chat_id):
        if (
            old.workspace == task.workspace
            and old.id is not None
            and (old.asker == task.user_id or old.id == task.reworks)
        ):
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
