"""A task judged by its tests against its base commit, and the verdict the user merges on:
✔ only for what the bot saw pass, ✗ for tests (or script steps) the task broke or failed to fix, ⚠ unverified
whenever the bot cannot tell (a run that did not start, was interrupted, stopped before the tests, or failed as a
whole before and after; a test green at the base that no longer runs). A test red at the base that no longer runs
(skipped, deselected, removed) is judged as still red. Also what goes back to the worker (what it broke and the
tests it was meant to fix: names, counts, each failure's own text, the output's tail) and the short lines the chat
shows."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from agents.core.text import fenced
from agents.verify.fix_targets import (
    ALL_RED_REASON,
    asks_for_the_red_tests,
    named_in,
    not_ran_reason,
    ran_reason,
    target_reason,
)
from agents.verify.suite_run import SUITE_ID, RunState, StepOutcome, TestOutcome, TestStatus, is_exit_case

__all__ = ["Mark", "Verdict", "judge", "named_in", "ran", "step_key"]

LIST_LIMIT = 8  # names listed in the chat summary; /task N has them all
DETAIL_CHARS = 3_000
FAILURE_OUTPUT_CHARS = 6_000  # every failure's own text together, in a correction
MIN_FAILURE_CHARS = 400  # each failure keeps at least this much when many share FAILURE_OUTPUT_CHARS
OUTPUT_TAIL_CHARS = 1_500  # the end of the run's output, after the failures
UNTRACED = (
    "the bot could not trace at the base commit what it runs, so for a fix task it counts as the task's until it passes"
)
NO_LONGER_RUNS = "it no longer runs (skipped, deselected or removed), so the bot cannot see it pass"


class Mark(str, enum.Enum):
    """The verdict's mark, the first character of a task's summary."""

    done = "✔"  # seen passing: nothing the task broke or was meant to fix fails
    failed = "✗"  # the task broke tests (or a step) or did not fix its target tests
    unverified = "⚠"  # the bot cannot tell


def ran(outcome: TestOutcome | None) -> bool:
    """The run reached its end and reported passes and failures (per test, or as a whole suite)."""
    return (
        outcome is not None
        and outcome.state is RunState.complete
        and outcome.status in (TestStatus.passed, TestStatus.failed)
    )


def shown_command(outcome: TestOutcome) -> str:
    return f"`{outcome.display or outcome.command}`" if (outcome.display or outcome.command) else "the tests"


def why_not_run(outcome: TestOutcome) -> str:
    """One phrase: why this run says nothing about the tests (and the cause, where its output shows one)."""
    cause = f"; {outcome.cause}" if outcome.cause else ""
    if outcome.reason:
        return outcome.reason.strip().rstrip(".") + cause
    if outcome.status is TestStatus.no_tests:
        return "no tests found in this workspace"
    if outcome.timed_out:
        return f"{shown_command(outcome)} timed out"
    if outcome.state is RunState.stopped_before_tests:
        return f"{shown_command(outcome)} stops before any test runs"
    return f"{shown_command(outcome)} did not run the tests ({outcome.summary})"


def step_key(command: str) -> str:
    """How a script step that failed once and passed on its re-run is named among the flaky."""
    return f"step `{command}`"


def _step_name(step: StepOutcome) -> str:
    return f"`{step.command}` ({step.kind})"


@dataclass
class Verdict:
    after: TestOutcome
    base: TestOutcome | None
    fixed: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)  # passed (or absent) at the base, failing now
    still_failing: list[str] = field(default_factory=list)  # failing at the base and now
    targets: list[str] = field(default_factory=list)  # failing at the base, and the task was meant to fix them
    target_reasons: dict[str, str] = field(default_factory=dict)  # target -> why it is the task's
    not_target_reasons: dict[str, str] = field(default_factory=dict)  # a traced pre-existing test -> why not the task's
    unknown: list[str] = field(default_factory=list)  # failing now; the base run cannot say whether before too
    flaky: list[str] = field(default_factory=list)  # failed once, passed on the immediate re-run
    crashed_once: list[str] = field(default_factory=list)  # of `flaky`: a test file that crashed, not on its re-run
    flaky_at_base: list[str] = field(default_factory=list)  # failing now; red in a kept base run, green re-run there
    disappeared: list[str] = field(default_factory=list)  # ran at the base, not any more
    # ran (passed or failed) at the base, skipped or absent now: never seen passing after the task
    no_longer_run: list[str] = field(default_factory=list)
    steps_broken: list[StepOutcome] = field(default_factory=list)  # a lint/build step passing at the base, failing now
    steps_before: list[StepOutcome] = field(default_factory=list)  # failing at the base too
    steps_unknown: list[StepOutcome] = field(default_factory=list)  # failing now, not reached at the base
    unverified: str | None = None  # why the bot cannot tell (one phrase), when it cannot
    notes: list[str] = field(default_factory=list)  # environment and configuration remarks
    warnings: list[str] = field(default_factory=list)  # the task touched its own checks

    @property
    def introduced_error(self) -> bool:
        """The tests do not run to their end any more, and they did at the base (or there is no baseline)."""
        return not ran(self.after) and (self.base is None or ran(self.base))

    @property
    def needs_correction(self) -> bool:
        return bool(self.broken or self.targets or self.steps_broken) or self.introduced_error

    @property
    def mark(self) -> Mark:
        if self.needs_correction:
            return Mark.failed
        return Mark.unverified if self.unverified else Mark.done

    @property
    def pre_existing(self) -> list[str]:
        return [t for t in self.still_failing if t not in self.targets]

    # ---- what the chat shows ---------------------------------------------------------------------------------------
    def line(self) -> str:
        """`Tests: 41 passed · 1 fixed · 0 broken · 2 still failing from before (pre-existing) · 12.3 s (pytest)`."""
        after, shown = self.after, shown_command(self.after)
        if after.status is TestStatus.no_tests and not ran(self.base):
            return "**Tests:** no tests found in this workspace (nothing was verified)"
        if not ran(after):
            also = " (also at the base commit: not this task's doing)" if not self.introduced_error else ""
            return f"**Tests:** did not complete: {why_not_run(after)}{also} · {after.summary} · {shown}"
        passed = sum(1 for s in after.cases.values() if s == "passed")
        parts = [
            f"{passed} passed" if SUITE_ID not in after.cases else f"suite {after.status.value}",
            f"{len(self.fixed)} fixed",
            f"{len(self.broken)} broken",
            f"{len(self.pre_existing)} still failing from before (pre-existing)",
        ]
        if self.targets:
            parts.append(f"{len(self.targets)} still failing that the task is about")
        if self.unknown:
            parts.append(f"{len(self.unknown)} failing, unknown at the base")
        if self.no_longer_run:
            parts.append(f"{len(self.no_longer_run)} no longer run")
        if self.flaky:
            parts.append(f"{len(self.flaky)} flaky")
        if self.flaky_at_base:
            parts.append(f"{len(self.flaky_at_base)} flaky at the base")
        if self.base is None or not ran(self.base):
            parts.append("no baseline" + (f" ({why_not_run(self.base)})" if self.base else ""))
        return f"**Tests:** {' · '.join(parts)} · {after.duration:.1f} s · {shown}"

    def steps_line(self) -> str | None:
        """The script's failing non-test steps (lint, build), compared with the base like tests."""
        parts = [f"{_step_name(s)} broken by the task" for s in self.steps_broken]
        parts += [f"{_step_name(s)} failing before too (pre-existing)" for s in self.steps_before]
        parts += [f"{_step_name(s)} failing, not reached at the base" for s in self.steps_unknown]
        return "**Steps:** " + " · ".join(parts) if parts else None

    def summary_lines(self) -> list[str]:
        lines = [self.line()]
        if steps := self.steps_line():
            lines.append(steps)
        for label, names in (
            ("Broken", self.broken),
            ("Still failing (task's target)", self.targets),
            ("Failing (the base run cannot tell)", self.unknown),
            ("Fixed", self.fixed),
            ("Flaky (passed on re-run)", [n for n in self.flaky if n not in self.crashed_once]),
            ("Flaky (crashed once, passed on re-run)", self.crashed_once),
            ("Flaky at the base (red in the kept base run, green when re-run there)", self.flaky_at_base),
            ("Failing before (pre-existing)", self.pre_existing),
            ("No longer run (ran at the base; skipped or removed now)", self.no_longer_run),
        ):
            if names:
                lines.append(f"{label}: {_names(names)}")
        lines += self.judged_lines()
        lines += [f"ℹ {note}" for note in self.notes]
        lines += [f"⚠ {warning}" for warning in self.warnings]
        if self.needs_correction:
            lines += ["Failures:", fenced(_tail(self.failure_output(), 1200))]
        return lines

    def judged_lines(self) -> list[str]:
        """Why each red test was judged the task's, and why not where a traced re-run showed what it runs."""
        lines = [f"ℹ `{t}` is the task's: {self.target_reasons[t]}" for t in self.targets if t in self.target_reasons]
        lines += [f"ℹ `{t}` judged pre-existing: {why}" for t, why in self.not_target_reasons.items()]
        return lines[:LIST_LIMIT]

    def detail(self) -> str:
        """Every list in full (for the task's events, shown by /task N and get_task), bounded."""
        unverified = f" unverified: {self.unverified}" if self.mark is Mark.unverified else ""
        mark = f"verdict: {self.mark.value}{unverified}"
        lines = [mark, f"{self.after.status.value}: {self.after.summary} ({self.after.display or self.after.command})"]
        if self.base is not None:
            lines.append(f"base: {self.base.status.value}: {self.base.summary}")
        for label, names in (
            ("broken", self.broken),
            ("target still failing", [f"{t} ({self.target_reasons.get(t, 'named')})" for t in self.targets]),
            ("failing, unknown at the base", self.unknown),
            ("fixed", self.fixed),
            ("flaky", [f"{n} (crashed once)" if n in self.crashed_once else n for n in self.flaky]),
            ("flaky at the base", self.flaky_at_base),
            (
                "pre-existing",
                [
                    f"{t} ({self.not_target_reasons[t]})" if t in self.not_target_reasons else t
                    for t in self.pre_existing
                ],
            ),
            ("disappeared", self.disappeared),
            ("no longer run", self.no_longer_run),
        ):
            if names:
                lines.append(f"{label} ({len(names)}): " + ", ".join(names))
        if steps := self.steps_line():
            lines.append(steps.removeprefix("**Steps:** "))
        lines += self.notes + self.warnings
        text = "\n".join(lines)
        return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"

    # ---- what the worker is sent -----------------------------------------------------------------------------------
    def failure_output(self) -> str:
        """Each failure the worker must fix, its own message and traceback lines, in one block each; the run's
        reason and output when the run itself broke."""
        if self.introduced_error:
            base = f"At the base commit: {self.base.summary}.\n" if self.base else ""
            return f"{base}{why_not_run(self.after)}: {self.after.summary}\n{_tail(self.after.output, 3_000)}"
        blocks = [(name, self._failure_text(name)) for name in self.broken + self.targets]
        blocks += [(f"step {_step_name(s)}", s.output.strip()) for s in self.steps_broken]
        share = max(MIN_FAILURE_CHARS, FAILURE_OUTPUT_CHARS // max(1, len(blocks)))
        text = "\n".join(f"--- {name}\n{_head_and_tail(body, share)}" for name, body in blocks)
        return text if len(text) <= FAILURE_OUTPUT_CHARS else text[:FAILURE_OUTPUT_CHARS] + "\n[... trimmed ...]"

    def _failure_text(self, name: str) -> str:
        if name not in self.no_longer_run:
            return self.after.failures.get(name, "").strip()
        at_base = self.base.failures.get(name, "").strip() if self.base is not None else ""
        return f"{NO_LONGER_RUNS}; make it run and pass. At the base commit it failed:\n{at_base}".strip()

    def counts(self) -> str:
        """`3 passed, 1 failed · 1 broken by your change · 1 the task is about · 2 failing before too`."""
        parts = [self.after.summary]
        if ran(self.after):
            parts += [
                f"{len(self.broken)} broken by your change",
                f"{len(self.targets)} the task is about, still failing",
                f"{len(self.pre_existing)} failing before your change too",
            ]
        if self.steps_broken:
            parts.append(f"{len(self.steps_broken)} script step(s) broken")
        return " · ".join(parts)

    def correction(self, attempt: int, limit: int) -> str:
        mine = self.broken + self.targets
        lines = [
            (
                f"The bot ran the workspace's tests after your changes and they FAILED (correction {attempt} of "
                f"{limit}). Command: {self.after.display or self.after.command}\nCounts: {self.counts()}"
            )
        ]
        if self.introduced_error:
            lines.append(f"The test run itself no longer completes ({why_not_run(self.after)}); at the base it did.")
        if self.broken:
            lines.append("Passing at the task's base commit, failing now (yours to fix):\n" + _bullets(self.broken))
        if self.targets:
            targets = [f"{t} ({self.target_reasons[t]})" if t in self.target_reasons else t for t in self.targets]
            lines.append("Failing at the base; this task is meant to fix them (still failing):\n" + _bullets(targets))
        if self.steps_broken:
            steps = [_step_name(s) for s in self.steps_broken]
            lines.append("Steps of the test script passing at the base, failing now:\n" + _bullets(steps))
        if mine or self.steps_broken or self.introduced_error:
            title = "What the run printed" if self.introduced_error else "Each failure (its message and traceback)"
            lines.append(f"{title}:\n{fenced(self.failure_output())}")
        if self.pre_existing:
            lines.append(
                "Failing before your change too (not yours, leave them unless the task is about them):\n"
                + _bullets(self.pre_existing)
            )
        if (mine or self.steps_broken) and self.after.output.strip():
            tail = _tail(self.after.output, OUTPUT_TAIL_CHARS)
            lines.append(f"End of the run's output (every failure, yours or not):\n{fenced(tail)}")
        lines.append(
            "Fix the code so these tests pass. Do not weaken, skip or delete tests to get green. "
            "Then reply with a short report."
        )
        return "\n\n".join(lines)


def judge(
    after: TestOutcome,
    base: TestOutcome | None,
    instructions: str = "",
    flaky: set[str] | frozenset[str] = frozenset(),
    changed: Iterable[str] = (),
    traced: Mapping[str, list[str]] | None = None,
) -> Verdict:
    """Compare the outcomes after the worker with those at the base commit. `changed`: the paths the task changed
    (a base failure whose traceback runs through one is the task's to fix). `traced`: test id -> what a traced re-run
    of a red test ran (`file::function`): a test running a file or function the instructions name, or a file the task
    changed, is the task's however it fails; one with no trace (or an empty one) is the task's too: a fix task is
    never ✔ while a red test the bot could not follow stays red."""
    verdict = Verdict(after=after, base=base)
    before = base.cases if base is not None else {}
    # None: no baseline (every failure counts as the task's); no tests at the base: the same
    base_known = base is None or ran(base) or base.status is TestStatus.no_tests
    if ran(after):
        for name, state in after.cases.items():
            was = before.get(name)
            if state == "failed":
                if name in flaky:
                    verdict.flaky.append(name)
                elif was == "failed":
                    verdict.still_failing.append(name)
                elif base_known or was is not None:
                    verdict.broken.append(name)
                else:
                    verdict.unknown.append(name)
            elif state == "passed" and was == "failed":
                verdict.fixed.append(name)
        if ran(base):
            # a step that failed outside its tests at the base and exits 0 now (no test failing): fixed, not gone
            if "failed" not in after.cases.values():
                verdict.fixed += [n for n in before if is_exit_case(n) and n not in after.cases]
            verdict.disappeared = [
                n
                for n, s in before.items()
                if s != "skipped" and n not in after.cases and n != SUITE_ID and not is_exit_case(n)
            ]
            # skipped, marked xfail, deselected, dropped by a hook, its file deleted: not seen passing, whatever did it
            # (a file that crashed at the base, its id the file's, still runs when its tests report one by one now)
            ran_now = {case.split("::", 1)[0] for case in after.cases if "::" in case}
            verdict.no_longer_run = [
                n
                for n, s in before.items()
                if s in ("passed", "failed")
                and n != SUITE_ID
                and not is_exit_case(n)
                and after.cases.get(n) not in ("passed", "failed")
                and not ("::" not in n and n in ran_now)
            ]
    changed = list(changed)
    # a test red at the base that no longer runs is judged as if still red: the task's to fix when it is about it
    hidden_red = [n for n in verdict.no_longer_run if before.get(n) == "failed"]
    red_at_base = sum(1 for n, s in before.items() if s == "failed" and n != SUITE_ID)
    all_red = asks_for_the_red_tests(instructions, red_at_base)  # "fix the failing tests": every red one is the task's
    for name in verdict.still_failing + hidden_red:
        hidden = name in hidden_red
        texts = [after.failures.get(name, ""), base.failures.get(name, "") if base is not None else ""]
        reason = target_reason(name, instructions, texts, changed) if name != SUITE_ID else None
        if not reason and all_red and name != SUITE_ID:
            reason = ALL_RED_REASON
        if not reason and traced is not None:
            if not traced.get(name):
                reason = UNTRACED
            elif not (reason := ran_reason(instructions, traced[name], changed)) and not hidden:
                verdict.not_target_reasons[name] = not_ran_reason(name, traced[name])
        if reason:
            verdict.targets.append(name)
            verdict.target_reasons[name] = f"{reason}; {NO_LONGER_RUNS}" if hidden else reason
    _judge_steps(verdict, after, base, flaky)
    verdict.unverified = _unverified(verdict, after, base)
    if after.sandbox_problem:
        verdict.notes.append(f"a failure came from the sandbox, not from the code: {after.sandbox_problem}")
    return verdict


def _judge_steps(verdict: Verdict, after: TestOutcome, base: TestOutcome | None, flaky: Iterable[str] = ()) -> None:
    at_base = {s.command: s for s in base.steps} if base is not None else {}
    flaky = set(flaky)
    for step in after.steps:
        if step.passed:
            continue
        if step_key(step.command) in flaky:  # failed once, passed on the re-run
            verdict.flaky.append(step_key(step.command))
            continue
        was = at_base.get(step.command)
        if was is None and base is not None:
            verdict.steps_unknown.append(step)
        elif was is not None and not was.passed:
            verdict.steps_before.append(step)
        else:
            verdict.steps_broken.append(step)


def _unverified(verdict: Verdict, after: TestOutcome, base: TestOutcome | None) -> str | None:
    """Why the bot cannot tell whether the task is good (one phrase), or None when it can."""
    if not ran(after):
        if verdict.introduced_error:
            return None  # the task's doing: ✗, not ⚠
        now = why_not_run(after)
        then = why_not_run(base) if base is not None else None
        if base is None or then == now:
            return f"{now}, at the base and now" if base is not None else now
        if base.status is TestStatus.no_tests:
            return f"{now} (the base commit had no tests)"
        return f"{now} (at the base: {then})"
    if base is not None and not ran(base) and base.status is not TestStatus.no_tests:
        # what the base's tests were is unknown, so a test the task skipped cannot be told from one skipped before
        if skipped := [n for n, s in after.cases.items() if s == "skipped"]:
            return (
                f"{len(skipped)} test(s) are skipped now and the base commit's run did not complete "
                f"({why_not_run(base)}), so the bot cannot tell whether the task skipped them"
            )
    if verdict.unknown and base is not None:  # (no baseline at all: every failure is the task's, never unknown)
        return (
            f"{len(verdict.unknown)} test(s) fail now and at the base {why_not_run(base)}, so the bot cannot "
            "tell whether the task broke them"
        )
    if passed_before := [n for n in verdict.no_longer_run if base is not None and base.cases.get(n) == "passed"]:
        return (
            f"{len(passed_before)} test(s) passing at the base commit no longer run (skipped, deselected or removed "
            "now), so the bot cannot see them pass"
        )
    if SUITE_ID in verdict.still_failing:
        cause = f"; {after.cause}" if after.cause else ""
        return (
            f"{shown_command(after)} fails as a whole at the base and now and names no tests, so the bot cannot "
            f"tell what the task changed{cause}"
        )
    if verdict.steps_unknown:
        names = ", ".join(_step_name(s) for s in verdict.steps_unknown)
        return f"{names} fails now and was not reached at the base"
    return None


def _names(names: list[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:LIST_LIMIT])
    return shown + (f" and {len(names) - LIST_LIMIT} more (/task N lists all)" if len(names) > LIST_LIMIT else "")


def _bullets(names: list[str], limit: int = 30) -> str:
    text = "\n".join(f"- {n}" for n in names[:limit])
    return text + (f"\n- … and {len(names) - limit} more" if len(names) > limit else "")


def _tail(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def _head_and_tail(text: str, limit: int) -> str:
    """A failure's message (its head) and the end of its traceback, within `limit`."""
    if len(text) <= limit:
        return text
    head = limit // 3
    return f"{text[:head]}\n[...]\n{text[-(limit - head) :]}"
