"""Deciding a research task's proposal: Approve starts the code task that implements it (its `## Plan` steps become
the acceptance criteria), Reject closes it. A decision never guesses which proposal: with no number, only the
conversation's one pending proposal (a member's own, in a group), and none while a research task is still writing
one. Members decide the proposals they asked for, owners every one (`Access.decides`)."""

from __future__ import annotations

import re
from typing import Annotated

from agents.core.errors import ToolError
from agents.core.models import Caller, Proposal, ProposalStatus, TaskStatus, WorkerKind
from agents.core.work_tools import Arg, ProposalId, work_tool
from agents.store.database import Store
from agents.work import crew_texts
from agents.work.access import Access
from agents.work.own_words import APPROVE, REJECT, Decision
from agents.work.task_proposals import proposal_buttons
from agents.work.work_starts import WorkStarts, new_task, title_of


def plan_criteria(proposal: str) -> list[str]:
    """The numbered steps of a proposal's `## Plan` section, which become the code task's acceptance criteria."""
    criteria: list[str] = []
    in_plan = False
    for line in proposal.splitlines():
        if line.startswith("#"):
            in_plan = line.lstrip("#").strip().lower().startswith("plan")
            continue
        match = re.match(r"\s*\d+[.)]\s+(.*\S)", line) if in_plan else None
        if match:
            criteria.append(match.group(1))
    return criteria


class ProposalDecisions:
    """Approve and Reject, for the tools and the buttons alike."""

    def __init__(self, store: Store, access: Access, starts: WorkStarts) -> None:
        self.store, self.access, self.starts = store, access, starts

    async def _pick(self, caller: Caller, proposal_id: int | None, doing: Decision) -> Proposal:
        """The proposal a decision is about, if the caller may decide it; never a guess: with no id, only the
        chat's one pending proposal (a member with pending proposals of their own: only theirs)."""
        proposal = await self._pending(caller, proposal_id)
        self.access.decides(caller, proposal, doing.verb)
        await self.access.asked_for(
            caller, doing, f"**proposal #{proposal.id}**", proposal_buttons(proposal_number(proposal))
        )
        return proposal

    async def _pending(self, caller: Caller, proposal_id: int | None) -> Proposal:
        chat_id = caller.chat_id
        if proposal_id is not None:
            proposal = await self.access.chat_proposal(chat_id, proposal_id)
            if proposal.status is not ProposalStatus.PENDING:
                raise ToolError(f"proposal #{proposal_id} is already {proposal.status.value}")
            return proposal
        pending = await self.store.pending_proposals(chat_id)
        pending = [p for p in pending if self.access.may_decide(caller, p)] or pending
        active = await self.store.list_tasks(chat_id, statuses=TaskStatus.active())
        researching = [t for t in active if t.worker is WorkerKind.RESEARCH]
        if researching:
            raise ToolError(crew_texts.still_writing(researching, pending))
        if not pending:
            raise ToolError("there is no pending proposal in this chat")
        if len(pending) > 1:
            raise ToolError(crew_texts.which_proposal(pending))
        return pending[0]

    @work_tool(name="approve_proposal")
    async def approve(
        self,
        caller: Caller,
        proposal_id: ProposalId = None,
        notes: Annotated[
            str | None, Arg("small changes to the proposal the user asked for, e.g. 'call it parse_all' (optional)")
        ] = None,
    ) -> str:
        """Approve a pending proposal and start a code worker on it. No id: the chat's only pending proposal (with
        several pending, the tool lists them instead: ask the user which). Small changes the user asked for with the
        approval go in notes; they reach the code worker with the proposal."""
        proposal = await self._pick(caller, proposal_id, APPROVE)
        number = proposal_number(proposal)
        request = f"approve proposal #{number}: {proposal.request}"
        await self.access.workspace_for(caller, proposal.workspace, request, stored=True)
        await self.access.check_budget()
        instructions = (
            f"Implement this approved proposal in the workspace, exactly as written (the user approved "
            f"it as is).\n\nOriginal request: {proposal.request}\n\n{proposal.body}"
        ) + crew_texts.approval_notes(notes)
        code = new_task(
            caller,
            proposal.workspace,
            WorkerKind.CODE,
            f"proposal #{number}: {title_of(proposal.request, 60)}",
            instructions,
            proposal_id=number,
        )
        task = await self.starts.submit_approved(number, code, plan_criteria(proposal.body))
        if task is None:  # a double tap lands here
            raise ToolError(f"proposal #{number} was already decided")
        return f"Proposal #{number} approved; code task #{task.id} started on {proposal.workspace} in the background."

    @work_tool(name="reject_proposal")
    async def reject(
        self,
        caller: Caller,
        proposal_id: ProposalId = None,
        reason: Annotated[str | None, Arg("why (optional)")] = None,
    ) -> str:
        """Reject a pending proposal. No id: the chat's only pending one."""
        proposal = await self._pick(caller, proposal_id, REJECT)
        number = proposal_number(proposal)
        if not await self.store.decide_proposal(number, ProposalStatus.REJECTED):
            raise ToolError(f"proposal #{number} was already decided")
        return f"Proposal #{number} rejected" + (f" ({reason})." if reason else ".")


def proposal_number(proposal: Proposal) -> int:
    """A stored proposal's number; the store gives every proposal one, so one without is a bug, said loudly."""
    if proposal.id is None:
        raise ValueError("a proposal that was never stored cannot be decided")
    return proposal.id
