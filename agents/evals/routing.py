"""Routing evaluation: send labelled example messages to the real orchestrator and score where each one was routed.

`agentlab eval routing` loads `evals/routing.jsonl` (one case per line), runs every case as a fresh conversation
(its own in-memory store, set up as the case says: pending proposals shown in the chat, research still running,
active tasks, earlier turns, the message replied to) against the configured Anthropic API, three times each, and
prints a confusion table, the misrouted cases and the cases whose routing flipped between runs. Work tools go to a
`RecordingDesk`: it records the call and answers
with a short fake confirmation, so no worker ever starts and nothing is written to any repository. The workspaces
the orchestrator sees are small throw-away folders (calc, group-therapy, portfolio, and `self`).

A case's predicted label is the orchestrator's FIRST work tool call that the desk accepted: start_research →
research, start_task → its worker (code / frontend / test), approve_proposal → approval, reject_proposal → reject,
cancel_task → cancel; no work tool (text, read-only look-ups, list_tasks, get_task…) → clarify when the reply
ends with a question, else direct. A turn that failed without calling a work tool is `error`. A case may also
expect the workspace, the proposal id (approved, rejected or refined), `background` and the cancelled task; the
label and every expectation set must hold for the case to count as correct.

The cases (cases.py), the stand-in desk (desk.py) and the workspaces (workspaces.py) are modules of their own.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic

from agents.chat.orchestrator import Orchestrator
from agents.chat.replying import ReplyTo
from agents.core.errors import ToolError
from agents.core.models import (
    ChatMessage,
    InputMethod,
    Proposal,
    Role,
    Task,
    TaskStatus,
    Usage,
    WorkerKind,
)
from agents.core.settings import Settings
from agents.evals.cases import DEFAULT_CASES, ERROR, EVAL_CHAT_ID, LABELS, OTHER, WORK_TOOLS, Case, classify, load_cases
from agents.evals.desk import RecordingDesk, ToolCall
from agents.evals.workspaces import CANNED_PROPOSALS, make_eval_workspaces
from agents.llm.client import cost_usd, make_client
from agents.runtime import bot_secrets
from agents.store.database import Store
from agents.store.shown import PROPOSAL, remember_shown, shown_as
from agents.workspaces.folders import Workspaces


@dataclass
class CaseResult:
    """What one run of one case produced."""

    case: Case
    predicted: str
    reply: str = ""
    calls: list[ToolCall] = field(default_factory=list)  # work tool calls, in order
    tools_used: list[str] = field(default_factory=list)  # every tool the orchestrator called, in order
    usage: Usage = field(default_factory=Usage)
    api_calls: int = 0
    seconds: float = 0.0
    error: str | None = None
    run: int = 0  # which of the repeated runs of the case
    wrong_details: list[str] = field(default_factory=list)  # expectations beyond the label that did not hold

    @property
    def expected(self) -> str:
        return self.case.label

    @property
    def label_correct(self) -> bool:
        return self.predicted == self.case.label

    @property
    def correct(self) -> bool:
        return self.label_correct and not self.wrong_details


@dataclass
class EvalResult:
    """Every run of every case (case order, then run order), and the totals."""

    results: list[CaseResult]

    @property
    def usage(self) -> Usage:
        total = Usage()
        for r in self.results:
            total = total + r.usage
        return total

    @property
    def api_calls(self) -> int:
        return sum(r.api_calls for r in self.results)


def _resolved(workspaces: Workspaces, name: Any) -> str:
    try:
        return workspaces.resolve(str(name)).name
    except ToolError:
        return f"?{name}"


def check_details(case: Case, calls: list[ToolCall], workspaces: Workspaces) -> list[str]:
    """The case's expectations beyond the label, against the first accepted work call."""
    work = next((c for c in calls if c.ok and (c.name in WORK_TOOLS or c.name == "start_task")), None)
    if work is None:
        return []
    wrong = []
    if case.workspace is not None and work.name in ("start_task", "start_research", "schedule_task"):
        got = _resolved(workspaces, work.input.get("workspace", ""))
        if got != case.workspace:
            wrong.append(f"workspace {got} (expected {case.workspace})")
    if case.proposal_id is not None:
        proposal = work.input.get("picked", work.input.get("proposal_id", work.input.get("refines")))
        if proposal is None or int(proposal) != case.proposal_id:
            wrong.append(f"proposal {proposal} (expected #{case.proposal_id})")
    if case.background is not None and work.name == "start_task":
        background = work.input.get("background")
        if background is not case.background:
            wrong.append(f"background={background} (expected {case.background})")
    if case.task_id is not None and work.name == "cancel_task":
        task = work.input.get("task_id")
        if task is None or int(task) != case.task_id:
            wrong.append(f"task {task} (expected #{case.task_id})")
    return wrong


def _reply_target(case: Case) -> tuple[str, int] | None:
    match = re.fullmatch(r"\s*(proposal|task)\s*#?(\d+)\s*", case.reply_to or "")
    return (match.group(1), int(match.group(2))) if match else None


async def set_up(store: Store, case: Case) -> ReplyTo | None:
    """Put the case's situation into a fresh store; returns the message the user replies to, if any."""
    for workspace in case.pending_workspaces:  # each shown in the chat, as the bot shows proposals
        request, body = CANNED_PROPOSALS[workspace]
        await store.add_message(ChatMessage(chat_id=EVAL_CHAT_ID, role=Role.USER, content=request))
        proposal = await store.add_proposal(
            Proposal(chat_id=EVAL_CHAT_ID, workspace=workspace, request=request, body=body)
        )
        text = f"📋 **Proposal #{proposal.id}** for `{workspace}`.\n\n{body}"
        record = await remember_shown(store, EVAL_CHAT_ID, PROPOSAL, proposal.stored_id, text, 20_000)
        await shown_as(store, record, 900 + proposal.stored_id)
    for active in case.tasks:
        task = await store.add_task(
            Task(
                chat_id=EVAL_CHAT_ID,
                workspace=active.workspace,
                worker=WorkerKind(active.worker),
                title=active.title,
                instructions=active.title,
                status=TaskStatus.IN_PROGRESS,
            )
        )
        await store.update_task(task.stored_id, progress_message_id=800 + task.stored_id)
    if case.researching:
        await store.add_task(
            Task(
                chat_id=EVAL_CHAT_ID,
                workspace=case.researching,
                worker=WorkerKind.RESEARCH,
                title=f"research: improve {case.researching}",
                instructions="improve it",
                status=TaskStatus.IN_PROGRESS,
            )
        )
    for turn in case.history:
        await store.add_message(ChatMessage(chat_id=EVAL_CHAT_ID, role=Role(turn.role), content=turn.text))
    target = _reply_target(case)
    if target is not None:
        kind, number = target
        return ReplyTo(message_id=(900 if kind == "proposal" else 800) + number, text="", from_bot=True)
    return ReplyTo(message_id=700, text=case.reply_to, from_bot=True) if case.reply_to else None


async def run_case(
    settings: Settings,
    client: anthropic.AsyncAnthropic,
    workspaces: Workspaces,
    case: Case,
    run: int = 0,
    *,
    empty: Store | None = None,
) -> CaseResult:
    """One case as a fresh conversation: its own in-memory store set up as the case says, one orchestrator turn.
    `empty`: an empty store to copy that one from (cheaper than migrating a new one for every case)."""
    started = time.monotonic()
    store = await (Store.open_copy(empty) if empty is not None else Store.open(":memory:"))
    desk = RecordingDesk(store, workspaces)
    try:
        reply_to = await set_up(store, case)
        orchestrator = Orchestrator(settings, store, client, workspaces, desk, bot_secrets(settings))
        try:
            reply = await orchestrator.handle(EVAL_CHAT_ID, case.text, InputMethod(case.input), reply_to)
        except Exception as err:  # a crash in one case is that case's result, not the end of the eval
            accepted = [c for c in desk.calls if c.ok]
            predicted = classify([c.name for c in accepted], [c.input for c in accepted]) if accepted else ERROR
            return CaseResult(
                case,
                predicted,
                calls=list(desk.calls),
                seconds=time.monotonic() - started,
                error=f"{type(err).__name__}: {err}",
                run=run,
            )
    finally:
        await store.close()
    accepted = [c for c in desk.calls if c.ok]
    if accepted or reply.ok:
        predicted = classify([c.name for c in accepted], [c.input for c in accepted], reply.text if reply.ok else "")
    else:
        predicted = ERROR
    return CaseResult(
        case,
        predicted,
        reply=reply.text,
        calls=list(desk.calls),
        tools_used=list(reply.tools_used),
        usage=reply.usage,
        api_calls=reply.api_calls,
        seconds=time.monotonic() - started,
        error=None if reply.ok else reply.text,
        run=run,
        wrong_details=check_details(case, desk.calls, workspaces),
    )


def progress_line(result: CaseResult, done: int, total: int) -> str:
    """`[ 3/48] ok    research ← research  (voice) "make group therapy better"` and, when wrong, what it did."""
    mark = "ok  " if result.correct else "MISS"
    text = " ".join(result.case.text.split())
    text = text if len(text) <= 70 else text[:69] + "…"
    width = len(str(total))
    line = (
        f"[{done:>{width}}/{total}] {mark} {result.expected:>8} ← {result.predicted:<8} "
        f'{"(voice) " if result.case.input is InputMethod.VOICE else ""}"{text}"'
    )
    if result.error:
        line += f"  [{result.error[:120]}]"
    elif result.wrong_details:
        line += f"  [{'; '.join(result.wrong_details)}]"
    elif not result.correct:
        line += f"  [tools: {', '.join(result.tools_used) or 'none'}]"
    return line


async def run_eval(
    settings: Settings,
    cases: Sequence[Case],
    concurrency: int = 4,
    *,
    progress: Callable[[str], None] | None = None,
    client: anthropic.AsyncAnthropic | None = None,
    repeats: int = 1,
) -> EvalResult:
    """Run every case `repeats` times against the configured API, at most `concurrency` at once; `progress` gets
    one line per run."""
    own_client = client is None
    client = client or make_client(settings)
    folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="agentlab-routing-eval-"))
    semaphore = asyncio.Semaphore(max(1, concurrency))
    done = 0

    runs = [(case, run) for case in cases for run in range(max(1, repeats))]

    async def one(case: Case, run: int) -> CaseResult:
        nonlocal done
        async with semaphore:
            result = await run_case(settings, client, workspaces, case, run, empty=empty)
        done += 1
        if progress is not None:
            progress(progress_line(result, done, len(runs)))
        return result

    empty: Store | None = None
    try:
        workspaces = await asyncio.to_thread(make_eval_workspaces, folder)
        empty = await Store.open(":memory:")  # migrated once; each case's store is a copy of it
        results = await asyncio.gather(*(one(case, run) for case, run in runs))
    finally:
        if empty is not None:
            await empty.close()
        if own_client:
            await client.close()
        await asyncio.to_thread(shutil.rmtree, folder, True)
    return EvalResult(list(results))


@dataclass(frozen=True)
class LabelScore:
    """Precision and recall of one label (None when there is nothing to divide by)."""

    label: str
    expected: int  # cases with this label
    predicted: int  # cases routed to this label
    correct: int

    @property
    def precision(self) -> float | None:
        return self.correct / self.predicted if self.predicted else None

    @property
    def recall(self) -> float | None:
        return self.correct / self.expected if self.expected else None


@dataclass(frozen=True)
class Score:
    total: int
    correct: int
    labels: dict[str, LabelScore]
    confusion: dict[tuple[str, str], int]  # (expected, predicted) → count

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0


def score(results: Iterable[CaseResult]) -> Score:
    """Confusion counts, per-label precision/recall and overall accuracy."""
    results = list(results)
    confusion = Counter((r.expected, r.predicted) for r in results)
    expected = Counter(r.expected for r in results)
    predicted = Counter(r.predicted for r in results)
    labels = {
        label: LabelScore(label, expected[label], predicted[label], confusion[(label, label)]) for label in LABELS
    }
    return Score(total=len(results), correct=sum(r.correct for r in results), labels=labels, confusion=dict(confusion))


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def confusion_table(results: Iterable[CaseResult]) -> str:
    """Rows = expected label, columns = predicted label, with recall per row, precision per column, and accuracy."""
    s = score(results)
    extra = [p for p in (OTHER, ERROR) if any(pred == p for (_, pred) in s.confusion)]
    columns = [*LABELS, *extra]
    head = "expected \\ predicted"
    first = max(len(head), len("precision"))
    width = max(len(c) for c in columns)
    lines = [f"{head:<{first}} " + " ".join(f"{c:>{width}}" for c in columns) + " │ recall     n"]
    for label in LABELS:
        counts = " ".join(f"{s.confusion.get((label, c), 0):>{width}}" for c in columns)
        ls = s.labels[label]
        lines.append(f"{label:<{first}} {counts} │ {_percent(ls.recall):>6} {ls.expected:>5}")
    precision = " ".join(f"{_percent(s.labels[c].precision) if c in s.labels else '':>{width}}" for c in columns)
    lines.append(f"{'precision':<{first}} {precision} │")
    lines.append(f"accuracy: {s.correct}/{s.total} = {s.accuracy:.1%}")
    return "\n".join(lines)


def misses(results: Iterable[CaseResult]) -> list[str]:
    """One line per misrouted case: its line in the file, expected → predicted, the message and the tools used."""
    out = []
    for r in results:
        if not r.correct:
            what = r.error or "; ".join(r.wrong_details) or f"tools: {', '.join(r.tools_used) or 'none'}"
            out.append(f"line {r.case.line}: {r.expected} → {r.predicted}: {r.case.text!r} ({what[:160]})")
    return out


def flips(results: Iterable[CaseResult]) -> list[str]:
    """One line per case whose runs did not all route the same way (or not all correctly)."""
    runs: dict[int, list[CaseResult]] = {}
    for r in results:
        runs.setdefault(id(r.case), []).append(r)
    out = []
    for group in runs.values():
        outcomes = [f"{r.predicted}{'' if r.correct else '✗'}" for r in group]
        if len(group) > 1 and len(set(outcomes)) > 1:
            case = group[0].case
            out.append(f"line {case.line}: {case.label}: {' / '.join(outcomes)}: {case.text!r}")
    return out


def usage_line(usage: Usage, settings: Settings, api_calls: int) -> str:
    """The tokens spent and their estimated cost from the price table in settings."""
    return (
        f"{api_calls} API calls · tokens: input {usage.input_tokens:,}, output {usage.output_tokens:,}, "
        f"cache write {usage.cache_creation_input_tokens:,}, cache read {usage.cache_read_input_tokens:,} "
        f"· ≈ ${cost_usd(usage, settings):.2f}"
    )


def report(result: EvalResult, settings: Settings) -> str:
    """The whole summary printed at the end: the table, the misses, the usage."""
    parts = [confusion_table(result.results)]
    wrong = misses(result.results)
    if wrong:
        parts.append("misrouted:\n" + "\n".join(f"  {line}" for line in wrong))
    flipped = flips(result.results)
    runs = len({r.run for r in result.results})
    if runs > 1:
        parts.append(
            f"flips ({len(flipped)} of {len({id(r.case) for r in result.results})} cases changed between "
            f"{runs} runs)" + (":\n" + "\n".join(f"  {line}" for line in flipped) if flipped else "")
        )
    parts.append(usage_line(result.usage, settings, result.api_calls))
    return "\n\n".join(parts)


async def main(
    settings: Settings,
    path: Path | str = DEFAULT_CASES,
    limit: int | None = None,
    concurrency: int = 4,
    out: Callable[[str], None] = print,
    repeats: int = 3,
) -> int:
    """`agentlab eval routing`: load, run, print progress and the report; 0 when it ran (whatever the accuracy)."""
    cases = load_cases(path)
    if limit is not None:
        cases = cases[: max(0, limit)]
    plural = "" if len(cases) == 1 else "s"
    out(
        f"Routing eval: {len(cases)} case{plural} from {path}, model {settings.orchestrator.orchestrator_model}, "
        f"{max(1, repeats)} run{'s' if repeats != 1 else ''} each, {max(1, concurrency)} at a time."
    )
    result = await run_eval(settings, cases, concurrency, progress=out, repeats=repeats)
    out("")
    out(report(result, settings))
    return 0
