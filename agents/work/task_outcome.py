"""A finished task's outcome, decided without I/O: its status, its headline, and the summary the chat gets.

`decide` takes what the task's run produced (the worker's result, the bot's test verdict, the acceptance criteria,
the commits, the guard's warnings) and returns an `Outcome`; `render` turns that record into the summary's Markdown.
`TaskEnding.change_done` (task_finish.py) gathers the facts, calls both, and does the side effects (status, worktree,
progress message, delivery). Unit tests call these two directly (tests/test_task_outcome.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agents.core.actions import Action, Button, button, review_button
from agents.core.models import Criterion, TaskStatus
from agents.core.text import human_size, quoted, some_of
from agents.git.commits import CommitResult, LeftOut
from agents.verify.verdict import Mark, Verdict, why_not_run
from agents.work.worker import Ending, Limits, WorkerResult

REPORT_LIMIT = 1500  # characters of the worker's report in the summary
FILES_SHOWN = 12
WARNINGS_SHOWN = 10


def trim(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class RunFacts:
    """Everything a task's run produced that its outcome depends on."""

    task_id: int
    workspace: str
    result: WorkerResult
    limits: Limits
    verdict: Verdict | None  # None: the bot's tests did not run (the worker did not finish)
    corrections: int
    criteria: list[Criterion] = field(default_factory=list)
    commits: list[CommitResult] = field(default_factory=list)  # in order; the last one's left_out is current
    branch: str = ""
    base_branch: str = ""
    guard_warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    """What a task ended as: the status stored, the headline (progress message, error field), the summary's parts."""

    status: TaskStatus
    headline: str
    report: str  # the worker's report, trimmed
    last_commit: CommitResult | None
    left_out: list[LeftOut]
    facts: RunFacts

    @property
    def error(self) -> str | None:
        return None if self.status is TaskStatus.COMPLETED else self.headline


def status_and_headline(facts: RunFacts) -> tuple[TaskStatus, str]:
    """The task's status and its headline (first line), by the rules in AGENT_ARCHITECTURE.md, first match wins."""
    n, result, verdict = facts.task_id, facts.result, facts.verdict
    unverified = [c for c in facts.criteria if not c.verified]
    # a worker that did not finish: the first character is still the verdict's mark, ✗ when its tests show it broke
    # something, else ⚠ (whether the task is done the bot cannot tell: the worker stopped before saying so)
    unfinished = Mark.failed if verdict is not None and verdict.mark is Mark.failed else Mark.unverified
    if result.blocked:  # asked a question, refused, ran out of context or was cut off: never "done"
        return TaskStatus.BLOCKED, f"{unfinished.value} Task #{n} blocked: {result.reason(facts.limits)}"
    if result.stop is Ending.STEP_LIMIT:  # out of steps, with its report and the bot's test run: blocked, not failed
        return TaskStatus.BLOCKED, f"{unfinished.value} Task #{n} blocked: {result.reason(facts.limits)}"
    if not result.finished:
        return TaskStatus.FAILED, f"{unfinished.value} Task #{n} stopped: {result.reason(facts.limits)}"
    if verdict is not None and verdict.introduced_error:
        why = why_not_run(verdict.after)
        return TaskStatus.BLOCKED, f"{Mark.failed.value} Task #{n} blocked: the tests no longer run ({why})"
    if verdict is not None and verdict.needs_correction:
        plural = "s" if facts.corrections != 1 else ""
        return (
            TaskStatus.BLOCKED,
            f"{Mark.failed.value} Task #{n} blocked: tests still fail after {facts.corrections} correction{plural}",
        )
    if unverified:
        total = len(facts.criteria)
        return TaskStatus.BLOCKED, f"⚠ Task #{n} not done: {len(unverified)} of {total} acceptance criteria unverified"
    if verdict is not None and verdict.mark is Mark.unverified:  # not "done": the bot cannot tell
        return (
            TaskStatus.UNVERIFIED,
            f"{Mark.unverified.value} Task #{n} needs a look · unverified: {verdict.unverified}",
        )
    return TaskStatus.COMPLETED, f"{Mark.done.value} Task #{n} done"


def decide(facts: RunFacts) -> Outcome:
    status, headline = status_and_headline(facts)
    if status is not TaskStatus.BLOCKED and facts.verdict is not None and facts.verdict.warnings:
        headline += " ⚠ with changes to its own tests (see below)"  # never plainly "done" then
    left_out = facts.commits[-1].left_out if facts.commits else []  # the last commit's word on what is left out
    committed = [commit for commit in facts.commits if commit.committed]
    return Outcome(
        status=status,
        headline=headline,
        report=trim(facts.result.report, REPORT_LIMIT) if facts.result.report else "",
        last_commit=committed[-1] if committed else None,
        left_out=left_out,
        facts=facts,
    )


def render(outcome: Outcome) -> str:
    """The summary message's Markdown: headline, the worker's report, criteria, tests, files, commit, sizes, guard."""
    facts, last = outcome.facts, outcome.last_commit
    lines = [f"**{outcome.headline}** · `{facts.workspace}`", ""]
    if outcome.report:
        lines += ["**Worker's report:**", quoted(outcome.report), ""]  # its words, set apart from the bot's
    if facts.criteria:
        verified = sum(c.verified for c in facts.criteria)
        lines.append(f"**Criteria:** {verified}/{len(facts.criteria)} verified")
        lines += [f"{'✔' if c.verified else '✖'} {c.idx}. {trim(c.text, 150)}" for c in facts.criteria]
    if facts.verdict is None:
        lines.append("**Tests:** not run (the worker did not finish)")
    else:
        lines += facts.verdict.summary_lines()
    lines += _commit_lines(last, facts)
    lines += size_lines(last, outcome.left_out)
    if facts.guard_warnings:
        warnings = facts.guard_warnings
        lines.append("⚠ **The worker changed the owner's repository; the bot undid it:**")
        lines += [f"• {w}" for w in warnings[:WARNINGS_SHOWN]]
        if len(warnings) > WARNINGS_SHOWN:
            lines.append(f"• … and {len(warnings) - WARNINGS_SHOWN} more (see /log)")
    return "\n".join(lines)


def _commit_lines(last: CommitResult | None, facts: RunFacts) -> list[str]:
    if last is None:
        return ["**Files:** nothing changed, no commit"]
    stat = (last.diffstat.splitlines() or [""])[-1].strip()
    files = ", ".join(f"`{f}`" for f in last.files[:FILES_SHOWN]) + (" …" if len(last.files) > FILES_SHOWN else "")
    if not last.files:  # its commits cancel out
        files, stat = "no net change: the branch's files are as at the base commit", ""
    return [
        f"**Files:** {files}" + (f" ({stat})" if stat else ""),
        f"**Commit:** `{last.short_sha}` on branch `{facts.branch}` (base `{facts.base_branch}`)",
    ]


def size_lines(last: CommitResult | None, left_out: list[LeftOut]) -> list[str]:
    """Summary lines naming files left out by the size limits, and large or binary files that were committed."""
    size = human_size
    lines = []
    if left_out:
        lines.append(
            "⚠ **Not committed** (size limits): "
            + some_of([f"`{item.path}` ({size(item.size)}, {item.reason})" for item in left_out], 10)
        )
    if last and last.large:
        lines.append("**Large files committed:** " + ", ".join(f"`{p}` ({size(n)})" for p, n in last.large[:10]))
    if last and last.binary:
        lines.append(
            "**Binary files committed:** "
            + ", ".join(f"`{p}`" for p in last.binary[:10])
            + (" …" if len(last.binary) > 10 else "")
        )
    return lines


MERGE_LABELS = {TaskStatus.COMPLETED: "Merge", TaskStatus.UNVERIFIED: "⚠ Merge unverified"}


def branch_buttons(
    task_id: int, status: TaskStatus = TaskStatus.COMPLETED, pull_request: bool = False, review_url: str | None = None
) -> list[list[Button]]:
    """Merge / Diff / Discard; Merge says what a merge would take: a verified change, an unverified one, or one the
    bot did not finish (blocked, failed). With `pull_request` (the workspace is on GitHub), a row with Open PR; with
    `review_url` (REVIEW_URL), a row with Review (the task's page)."""
    rows = [
        [
            button(MERGE_LABELS.get(status, "Merge anyway"), Action.MERGE, task_id),
            button("Diff", Action.DIFF, task_id),
            button("Discard", Action.DISCARD, task_id),
        ]
    ]
    if pull_request:
        rows.append(pull_request_buttons(task_id)[0])
    if review_url:
        rows.append([review_button(task_id, review_url)])
    return rows


def resume_buttons(task_id: int, diff: bool = False) -> list[list[Button]]:
    """An interrupted task's: Resume / Discard, as a restart's notice offers them; with `diff` (its branch has commits
    beyond its base), Diff between them, to see the work so far."""
    shown = [button("Diff", Action.DIFF, task_id)] if diff else []
    return [[button("▶ Resume", Action.RESUME, task_id), *shown, button("✖ Discard", Action.DISCARD, task_id)]]


def pull_request_buttons(task_id: int) -> list[list[Button]]:
    return [[button("🔀 Open PR", Action.OPEN_PR, task_id)]]
