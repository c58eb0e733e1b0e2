"""Attempts ranked without I/O: each attempt's facts, the pick by the tests, the line that says why, the summary.

The rule: ✔ over ⚠ over ✗; an attempt whose tests the bot ran over one whose tests never ran (its counts would be
nothing seen, not nothing broken); then more tests fixed, fewer broken, a smaller change; the lower attempt number
last. An attempt that changed its own tests (a test file deleted, the test configuration edited: the verdict's
warnings) is ⚠ at best, as a single task's summary is. Only an attempt with a commit can be picked (there is nothing
else to merge). Where two ✔ remain that the tests
cannot tell apart (as many fixed, as many broken), the orchestrator's model compares their two diffs once
(attempts.py asks it; `needs_comparison` says when) and its line says why.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.core.actions import Action, Button, button
from agents.core.models import AttemptGroup, TaskStatus

MARKS = {TaskStatus.COMPLETED: "✔", TaskStatus.UNVERIFIED: "⚠"}  # anything else ended ✗
MARK_ORDER = {"✔": 0, "⚠": 1, "✗": 2}
STATUS_WORDS = {
    TaskStatus.COMPLETED: "done",
    TaskStatus.UNVERIFIED: "unverified",
    TaskStatus.BLOCKED: "blocked",
    TaskStatus.FAILED: "failed",
    TaskStatus.CANCELLED: "cancelled",
    TaskStatus.INTERRUPTED: "interrupted",
}


@dataclass(frozen=True)
class AttemptFacts:
    """What one attempt ended with, as the summary line and the ranking need it."""

    task_id: int
    number: int
    status: TaskStatus
    fixed: int = 0
    broken: int = 0
    files: int = 0
    added: int = 0
    removed: int = 0
    tokens: int = 0
    seconds: float | None = None
    committed: bool = False  # its branch has a commit: something to merge or diff
    tested: bool = False  # the bot ran its tests (fixed and broken are counts it saw)
    touched_tests: bool = False  # it changed its own tests: the verdict's warnings say how
    changed_repository: bool = False  # its worker changed the owner's repository (the bot undid it)

    @property
    def mark(self) -> str:
        """✔ only for a done attempt whose tests the bot saw pass, untouched, and whose worker left the owner's
        repository alone; ⚠ for a done one short of that."""
        mark = MARKS.get(self.status, "✗")
        doubt = self.touched_tests or self.changed_repository or not self.tested
        return "⚠" if mark == "✔" and doubt else mark

    @property
    def passed(self) -> bool:
        """A pass the race may stop at: ✔, with a change to merge."""
        return self.mark == "✔" and self.committed

    @property
    def lines_changed(self) -> int:
        return self.added + self.removed

    def line(self) -> str:
        """`✔ Attempt 2 (#5) done · 1 fixed · 0 broken · 1 file +1 −1 · 12.3k tokens · 0m41s`."""
        change = (
            f"{self.files} file{'s' if self.files != 1 else ''} +{self.added} −{self.removed}"
            if self.committed
            else "no change"
        )
        parts = [
            f"{self.mark} Attempt {self.number} (#{self.task_id}) {STATUS_WORDS.get(self.status, self.status.value)}",
            *([f"{self.fixed} fixed", f"{self.broken} broken"] if self.tested else ["tests not run"]),
            *(["changed its own tests"] if self.touched_tests else []),
            *(["changed the owner's repository (undone)"] if self.changed_repository else []),
            change,
            f"{self.tokens / 1000:.1f}k tokens",
        ]
        if self.seconds is not None:
            whole = int(self.seconds)
            parts.append(f"{whole // 60}m{whole % 60:02d}s")
        return " · ".join(parts)


def rank_key(facts: AttemptFacts) -> tuple[int, int, int, int, int, int]:
    return (
        MARK_ORDER[facts.mark],
        0 if facts.tested else 1,
        -facts.fixed,
        facts.broken,
        facts.lines_changed,
        facts.number,
    )


def ranked(attempts: list[AttemptFacts]) -> list[AttemptFacts]:
    """The attempts that can be picked (a commit to merge), best first."""
    return sorted((a for a in attempts if a.committed), key=rank_key)


def needs_comparison(attempts: list[AttemptFacts]) -> tuple[AttemptFacts, AttemptFacts] | None:
    """The two best when both are ✔ and the tests cannot tell them apart: the model compares their diffs."""
    best = ranked(attempts)
    if len(best) < 2:
        return None
    first, second = best[0], best[1]
    if first.mark == second.mark == "✔" and (first.fixed, first.broken) == (second.fixed, second.broken):
        return first, second
    return None


def pick_by_tests(attempts: list[AttemptFacts]) -> tuple[AttemptFacts | None, str]:
    """The pick by the tests alone, and why in one line (None: no attempt has anything to merge)."""
    best = ranked(attempts)
    if not best:
        return None, "no attempt committed a change, so there is nothing to merge"
    pick = best[0]
    rivals = best[1:]
    if pick.mark != "✔":
        if not pick.tested:
            word = "its tests never ran"
        else:
            word = "needs a look (⚠)" if pick.mark == "⚠" else "failed its tests (✗)"
        return pick, f"no attempt passed its tests; attempt {pick.number} is the best of the rest but {word}"
    passing = [r for r in rivals if r.mark == "✔"]
    if not passing:
        return pick, f"attempt {pick.number} is the only one whose tests pass"
    rival = passing[0]
    if pick.fixed != rival.fixed:
        return pick, f"attempt {pick.number} fixed {pick.fixed} tests, attempt {rival.number} {rival.fixed}"
    if pick.broken != rival.broken:
        return pick, f"attempt {pick.number} broke {pick.broken} tests, attempt {rival.number} {rival.broken}"
    return pick, (
        f"both pass; attempt {pick.number} is the smaller change "
        f"({pick.lines_changed} lines against {rival.lines_changed})"
    )


def render_summary(
    group: AttemptGroup, workspace: str, attempts: list[AttemptFacts], pick: int | None, bases: int = 1
) -> str:
    """The group's one summary: a headline with the pick's mark, a line per attempt, the pick and why. `bases`: how
    many base commits the attempts started from (more than one when the checkout moved between their starts)."""
    chosen = next((a for a in attempts if a.task_id == pick), None)
    mark = chosen.mark if chosen else "✗"
    lines = [f"**{mark} Attempts #{group.id}: {group.size} ways** · `{workspace}`", group.title, ""]
    lines += [a.line() for a in attempts]
    if group.stopped:
        lines += ["", f"⏹ Stopped early: {group.stopped}."]
    if bases > 1:
        lines += ["", f"⚠ The attempts started from {bases} different base commits (the checkout moved meanwhile)."]
    lines.append("")
    if chosen is None:
        lines.append(f"**No pick:** {group.why or 'nothing to merge'}.")
    else:
        lines.append(f"**Pick: attempt {chosen.number} (task #{chosen.task_id})**: {group.why}.")
        lines.append("Merge takes the pick and discards the other attempts; Discard drops them all.")
    return "\n".join(lines)


def summary_buttons(group_id: int, attempts: list[AttemptFacts], pick: int | None) -> list[list[Button]]:
    """Merge (the pick) and Discard (all); a Diff per attempt that has a change."""
    chosen = next((a for a in attempts if a.task_id == pick), None)
    first = [button("✖ Discard all", Action.DISCARD_ATTEMPTS, group_id)]
    if chosen is not None:
        label = f"Merge attempt {chosen.number}" + ("" if chosen.mark == "✔" else f" ({chosen.mark})")
        first.insert(0, button(label, Action.MERGE_ATTEMPTS, group_id))
    diffs = [button(f"Diff {a.number}", Action.DIFF, a.task_id) for a in attempts if a.committed]
    return [first, diffs] if diffs else [first]
