"""A task judged by its tests against its base commit: fixed, broken (introduced), still failing (pre-existing),
flaky; what goes back to the worker (only what it broke, and the tests it was asked about), and the short lines
the chat shows."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agents.verify.test_runner import SUITE_ID, TestOutcome, TestStatus

LIST_LIMIT = 8  # names listed in the chat summary; /task N has them all
DETAIL_CHARS = 3_000
FAILURE_OUTPUT_CHARS = 6_000


@dataclass
class Verdict:
    after: TestOutcome
    base: TestOutcome | None
    fixed: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)  # passed (or absent) at the base, failing now
    still_failing: list[str] = field(default_factory=list)  # failing at the base and now: pre-existing
    targets: list[str] = field(default_factory=list)  # failing tests the task named: its own to fix
    flaky: list[str] = field(default_factory=list)  # failed once, passed on the immediate re-run
    disappeared: list[str] = field(default_factory=list)  # ran at the base, not any more
    notes: list[str] = field(default_factory=list)  # environment and configuration remarks
    warnings: list[str] = field(default_factory=list)  # the task touched its own checks

    @property
    def runnable(self) -> bool:
        return self.after.status in (TestStatus.passed, TestStatus.failed)

    @property
    def introduced_error(self) -> bool:
        """The tests cannot run any more, and they could at the base."""
        return self.after.status is TestStatus.error and (self.base is None or self.base.status is not TestStatus.error)

    @property
    def needs_correction(self) -> bool:
        return bool(self.broken or self.targets) or self.introduced_error

    @property
    def pre_existing(self) -> list[str]:
        return [t for t in self.still_failing if t not in self.targets]

    # ---- what the chat shows ---------------------------------------------------------------------------------------
    def line(self) -> str:
        """`Tests: 41 passed · 1 fixed · 0 broken · 2 failing before (pre-existing) · 12.3 s (pytest)`."""
        after, shown = self.after, f"`{self.after.display or self.after.command or 'tests'}`"
        if after.status is TestStatus.no_tests:
            return "**Tests:** no tests found in this workspace (nothing was verified)"
        if after.status is TestStatus.error:
            also = " (also at the base commit: not this task's doing)" if not self.introduced_error else ""
            return f"**Tests:** could not run: {after.summary}{also} · {shown}"
        passed = sum(1 for s in after.cases.values() if s == "passed")
        parts = [
            f"{passed} passed" if SUITE_ID not in after.cases else f"suite {after.status.value}",
            f"{len(self.fixed)} fixed",
            f"{len(self.broken)} broken",
            f"{len(self.pre_existing)} failing before (pre-existing)",
        ]
        if self.targets:
            parts.append(f"{len(self.targets)} still failing that the task is about")
        if self.flaky:
            parts.append(f"{len(self.flaky)} flaky")
        if self.base is None or self.base.status is TestStatus.error:
            parts.append("no baseline" + (f" ({self.base.summary})" if self.base else ""))
        return f"**Tests:** {' · '.join(parts)} · {after.duration:.1f} s · {shown}"

    def summary_lines(self) -> list[str]:
        lines = [self.line()]
        for label, names in (
            ("Broken", self.broken),
            ("Still failing (task's target)", self.targets),
            ("Fixed", self.fixed),
            ("Flaky (passed on re-run)", self.flaky),
            ("Failing before (pre-existing)", self.pre_existing),
        ):
            if names:
                lines.append(f"{label}: {_names(names)}")
        lines += [f"ℹ {note}" for note in self.notes]
        lines += [f"⚠ {warning}" for warning in self.warnings]
        if self.needs_correction:
            lines += ["Failures:", f"```\n{_tail(self.failure_output(), 1200)}\n```"]
        return lines

    def detail(self) -> str:
        """Every list in full (for the task's events, shown by /task N), bounded."""
        lines = [f"{self.after.status.value}: {self.after.summary} ({self.after.display or self.after.command})"]
        if self.base is not None:
            lines.append(f"base: {self.base.status.value}: {self.base.summary}")
        for label, names in (
            ("broken", self.broken),
            ("target still failing", self.targets),
            ("fixed", self.fixed),
            ("flaky", self.flaky),
            ("pre-existing", self.pre_existing),
            ("disappeared", self.disappeared),
        ):
            if names:
                lines.append(f"{label} ({len(names)}): " + ", ".join(names))
        lines += self.notes + self.warnings
        text = "\n".join(lines)
        return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"

    # ---- what the worker is sent -----------------------------------------------------------------------------------
    def failure_output(self) -> str:
        """The failures of the tests the worker must fix, one block each; the run's failing output otherwise."""
        if self.introduced_error:
            base = f"At the base commit: {self.base.summary}.\n" if self.base else ""
            return f"{base}{self.after.summary}\n{self.after.output}"
        blocks = [f"--- {name}\n{self.after.failures.get(name, '').strip()}" for name in self.broken + self.targets]
        text = "\n".join(blocks)
        return text if len(text) <= FAILURE_OUTPUT_CHARS else text[:FAILURE_OUTPUT_CHARS] + "\n[... trimmed ...]"

    def correction(self, attempt: int, limit: int) -> str:
        mine = self.broken + self.targets
        lines = [
            (
                f"The bot ran the workspace's tests after your changes and they FAILED (correction {attempt} of "
                f"{limit}). Command: {self.after.display or self.after.command}"
            )
        ]
        if self.introduced_error:
            lines.append("The test run itself no longer works; at the task's base commit it did.")
        if self.broken:
            lines.append("Passing at the task's base commit, failing now (yours to fix):\n" + _bullets(self.broken))
        if self.targets:
            lines.append("Tests this task is about, still failing:\n" + _bullets(self.targets))
        if mine or self.introduced_error:
            lines.append(f"Output (trimmed):\n```\n{self.failure_output()}\n```")
        if self.pre_existing:
            lines.append(
                "Failing before your change too (not yours, leave them unless the task is about them):\n"
                + _bullets(self.pre_existing)
            )
        lines.append(
            "Fix the code so these tests pass. Do not weaken, skip or delete tests to get green. "
            "Then reply with a short report."
        )
        return "\n\n".join(lines)


def judge(
    after: TestOutcome, base: TestOutcome | None, instructions: str = "", flaky: set[str] | frozenset[str] = frozenset()
) -> Verdict:
    """Compare the outcomes after the worker with those at the base commit."""
    verdict = Verdict(after=after, base=base)
    before = base.cases if base is not None and base.status is not TestStatus.error else {}
    for name, state in after.cases.items():
        was = before.get(name)
        if state == "failed":
            if name in flaky:
                verdict.flaky.append(name)
            elif was == "failed":
                verdict.still_failing.append(name)
            else:
                verdict.broken.append(name)
        elif state == "passed" and was == "failed":
            verdict.fixed.append(name)
    verdict.targets = [t for t in verdict.still_failing if named_in(t, instructions)]
    verdict.disappeared = [n for n, s in before.items() if s != "skipped" and n not in after.cases and n != SUITE_ID]
    return verdict


def named_in(test_id: str, instructions: str) -> bool:
    """Whether the instructions name this test: its id, its function (`test_add`), or the function it tests
    called as code (`add()` for `test_add`)."""
    if not instructions or test_id == SUITE_ID:
        return False
    function = re.sub(r"\[.*\]$", "", test_id.rsplit("::", 1)[-1])
    if test_id in instructions or re.search(rf"\b{re.escape(function)}\b", instructions):
        return True
    subject = function.removeprefix("test_")
    return (
        subject != function and len(subject) >= 2 and re.search(rf"\b{re.escape(subject)}\(", instructions) is not None
    )


def _names(names: list[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:LIST_LIMIT])
    return shown + (f" and {len(names) - LIST_LIMIT} more (/task N lists all)" if len(names) > LIST_LIMIT else "")


def _bullets(names: list[str], limit: int = 30) -> str:
    text = "\n".join(f"- {n}" for n in names[:limit])
    return text + (f"\n- … and {len(names) - limit} more" if len(names) > limit else "")


def _tail(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]
