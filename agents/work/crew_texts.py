"""What the crew's look-up and decision tools answer the orchestrator with: proposals and tasks as text, and the
answers that refuse to guess (which proposal? the proposal is still being written)."""

from __future__ import annotations

from agents.core.models import Criterion, Proposal, Task, TaskEvent

REPORT_CHARS = 6000  # a worker's report as get_task shows it


def proposal_line(p: Proposal) -> str:
    return f"- proposal #{p.id} for {p.workspace} [{p.status.value}]: {' '.join(p.request.split())[:160]}"


def proposal_text(p: Proposal) -> str:
    """A proposal whole, with what it was for and where it stands."""
    head = f"Proposal #{p.id} for workspace {p.workspace} [{p.status.value}]"
    if p.task_id:
        head += f" (approved as task #{p.task_id})"
    return f"{head}\nRequest: {p.request}\n\n{p.body}"


def which_proposal(pending: list[Proposal]) -> str:
    return (
        "several proposals are pending and no proposal_id was given; ask the user which one they mean:\n"
        + "\n".join(proposal_line(p) for p in pending)
    )


def still_writing(research: list[Task], pending: list[Proposal]) -> str:
    running = ", ".join(f"#{t.id} ({t.workspace})" for t in research)
    text = (
        f"the proposal is still being written: research task {running} has not finished. Tell the user to wait "
        "for it; it is shown with Approve/Reject buttons when ready."
    )
    if pending:
        text += " Already pending (approve one of these only if the user names it):\n" + "\n".join(
            proposal_line(p) for p in pending
        )
    return text


def refine_request(request: str, old: Proposal) -> str:
    """The research worker's instructions for reworking a proposal: the change asked for, and the old proposal whole."""
    return (
        f"{request}\n\nThis reworks proposal #{old.id} (below, whole). Keep what the request does not change, "
        f"and write the complete new proposal (it replaces #{old.id}).\n\n"
        f"--- proposal #{old.id} (original request: {old.request}) ---\n{old.body}\n--- end of proposal #{old.id} ---"
    )


def approval_notes(notes: str | None) -> str:
    notes = (notes or "").strip()
    if not notes:
        return ""
    return (
        "\n\nChanges the user asked for when approving (they take precedence over the proposal where the two "
        f"differ):\n{notes}"
    )


def still_running(task_id: int) -> str:
    return (
        f"Task #{task_id} is still running; it goes on in the background as task #{task_id}: the user sees its "
        "progress and gets the summary when it ends. Tell the user it is still running as task #"
        f"{task_id}; do not say it is done."
    )


def not_ended(task_id: int, status: str) -> str:
    """What the foreground wait answers when it ended but the task did not (the bot is stopping under it)."""
    return (
        f"Task #{task_id} has not ended (status {status}): the bot is stopping, so no summary was sent. After the "
        f"restart it shows as interrupted, and Resume continues it. Do not say it is done."
    )


def _trim(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def task_text(task: Task, criteria: list[Criterion], events: list[TaskEvent], shown: str | None) -> str:
    """One task for the orchestrator: status, the report, tests, files, branch, and the summary the user saw."""
    lines = [f"Task #{task.id} [{task.status.value}] {task.worker.value} worker in {task.workspace}: {task.title}"]
    if task.proposal_id:
        lines.append(f"Implements proposal #{task.proposal_id}.")
    if task.error:
        lines.append(f"Why it ended so: {task.error}")
    tests = [e.detail for e in events if e.kind == "tests"]
    if tests:
        lines.append(f"Tests (bot's own run, last of {len(tests)}): {tests[-1]}")
    if criteria:
        lines.append(f"Criteria: {sum(c.verified for c in criteria)}/{len(criteria)} verified")
        lines += [f"  {'✔' if c.verified else '✖'} {c.idx}. {c.text}" for c in criteria]
    if task.branch:
        lines.append(
            f"Branch: {task.branch} (base {task.base_branch or '?'})"
            + (f", commit {task.commit_sha[:10]}" if task.commit_sha else ", no commit")
        )
    steps = [e.detail for e in events if e.kind == "step"]
    if task.status.is_active and steps:
        lines.append(f"Latest step: {steps[-1]}")
    lines.append(f"Instructions it was given: {_trim(task.instructions, 1500)}")
    lines.append("Worker's report: " + (_trim(task.result, REPORT_CHARS) if task.result else "(none yet)"))
    if shown:
        lines += ["", "The summary the user was shown:", shown]
    return "\n".join(lines)


def research_started(task_id: int | None, workspace: str) -> str:
    """What the orchestrator's start_research tool returns to the model."""
    return (
        f"Research task #{task_id} started on workspace {workspace}. Its proposal will be shown in the chat "
        "with Approve/Reject buttons when ready."
    )


def no_such_task(task_id: int) -> str:
    """A task id that is not one of this chat's (never says whether another chat has it)."""
    return f"there is no task #{task_id} in this chat"


def follow_up(task: Task, request: str) -> str:
    """A follow-up task's instructions: the earlier task's request and report, then the new request."""
    return (
        f"Continue the work of task #{task.id} on its branch (its commits are already there; check the files' "
        f"current state first).\n\nThe earlier request: {_trim(task.instructions, 3000)}\n\nWhat the worker "
        f"reported then: {_trim(task.result or '(none)', 2000)}\n\nThe follow-up request:\n{request}"
    )
