"""Attempts ranked without I/O: the pick by the tests (✔ over ⚠ over ✗, more fixed, fewer broken, a smaller change),
when the model must compare two ✔, the summary's lines and buttons, and the `attempts` argument checked."""

from __future__ import annotations

from typing import Any

import pytest

from agents.core.errors import ToolError
from agents.core.models import AttemptGroup, Task, TaskStatus, WorkerKind
from agents.work.attempt_ranking import (
    AttemptFacts,
    needs_comparison,
    pick_by_tests,
    ranked,
    render_summary,
    summary_buttons,
)
from agents.work.attempts import attempt_brief, attempt_count

DONE, LOOK, BLOCKED = TaskStatus.COMPLETED, TaskStatus.UNVERIFIED, TaskStatus.BLOCKED


def attempt(number: int, status: TaskStatus, fixed: int = 0, broken: int = 0, lines: int = 2, **more) -> AttemptFacts:
    return AttemptFacts(
        task_id=10 + number,
        number=number,
        status=status,
        fixed=fixed,
        broken=broken,
        files=1,
        added=lines // 2,
        removed=lines - lines // 2,
        committed=more.pop("committed", True),
        tested=more.pop("tested", True),
        **more,
    )


def test_a_pass_beats_a_look_beats_a_failure_whatever_else() -> None:
    pick, why = pick_by_tests([attempt(1, BLOCKED, fixed=5), attempt(2, LOOK, fixed=3), attempt(3, DONE, fixed=1)])
    assert pick is not None and pick.number == 3 and why == "attempt 3 is the only one whose tests pass"
    pick, why = pick_by_tests([attempt(1, BLOCKED, fixed=5), attempt(2, LOOK)])
    assert pick is not None and pick.number == 2 and "no attempt passed its tests" in why and "(⚠)" in why


def test_an_attempt_whose_tests_never_ran_says_so_and_ranks_below_one_the_bot_tested() -> None:
    """A blocked attempt the bot never tested has no counts: not "0 broken", which would rank it above a tested
    attempt that broke one."""
    untested, honest = attempt(2, BLOCKED, tested=False), attempt(1, BLOCKED, broken=1)
    assert "tests not run" in untested.line() and "0 broken" not in untested.line()
    pick, why = pick_by_tests([honest, untested])
    assert pick is not None and pick.number == 1, why
    pick, why = pick_by_tests([untested])
    assert pick is not None and why.endswith("its tests never ran") and "failed its tests" not in why


def test_an_attempt_that_changed_its_own_tests_is_a_look_at_best() -> None:
    """A test file deleted or the test configuration edited (the verdict's warnings): ⚠ as a single task's summary
    would be, below a clean pass, and the Merge button says so."""
    touched, clean = attempt(2, DONE, fixed=3, touched_tests=True), attempt(1, DONE, fixed=1)
    assert touched.mark == "⚠" and "changed its own tests" in touched.line()
    pick, _ = pick_by_tests([touched, clean])
    assert pick is not None and pick.number == 1
    pick, _ = pick_by_tests([touched])
    assert pick is not None
    [merge, _] = summary_buttons(7, [touched], pick.task_id)[0]
    assert merge.label == "Merge attempt 2 (⚠)"


def test_among_passes_more_fixed_then_fewer_broken_then_the_smaller_change() -> None:
    pick, why = pick_by_tests([attempt(1, DONE, fixed=1), attempt(2, DONE, fixed=2)])
    assert pick is not None and pick.number == 2 and why == "attempt 2 fixed 2 tests, attempt 1 1"
    pick, why = pick_by_tests([attempt(1, DONE, fixed=2, broken=1), attempt(2, DONE, fixed=2)])
    assert pick is not None and pick.number == 2 and why == "attempt 2 broke 0 tests, attempt 1 1"
    pick, why = pick_by_tests([attempt(1, DONE, lines=40), attempt(2, DONE, lines=4)])
    assert pick is not None and pick.number == 2 and "smaller change (4 lines against 40)" in why


def test_two_passes_the_tests_cannot_tell_apart_go_to_the_model_and_only_they() -> None:
    pair = needs_comparison([attempt(1, DONE, fixed=1, lines=40), attempt(2, DONE, fixed=1, lines=4), attempt(3, LOOK)])
    assert pair is not None and [a.number for a in pair] == [2, 1]
    assert needs_comparison([attempt(1, DONE, fixed=2), attempt(2, DONE, fixed=1)]) is None
    assert needs_comparison([attempt(1, DONE), attempt(2, LOOK)]) is None


def test_an_attempt_with_nothing_committed_is_never_the_pick() -> None:
    pick, why = pick_by_tests([attempt(1, DONE, committed=False), attempt(2, BLOCKED)])
    assert pick is not None and pick.number == 2
    assert pick_by_tests([attempt(1, DONE, committed=False)]) == (
        None,
        "no attempt committed a change, so there is nothing to merge",
    )


def test_the_summary_lists_every_attempt_and_its_buttons_merge_the_pick() -> None:
    attempts = [
        attempt(1, BLOCKED, broken=1, tokens=12_300, seconds=61),
        attempt(2, DONE, fixed=1, tokens=800, seconds=5),
        attempt(3, TaskStatus.CANCELLED, committed=False),
    ]
    group = AttemptGroup(id=4, chat_id=1, size=3, title="Fix add", pick_task_id=12, why="because")
    text = render_summary(group, "calc", attempts, 12)
    lines = text.splitlines()
    assert lines[0] == "**✔ Attempts #4: 3 ways** · `calc`"
    assert "✗ Attempt 1 (#11) blocked · 0 fixed · 1 broken · 1 file +1 −1 · 12.3k tokens · 1m01s" in lines
    assert "✔ Attempt 2 (#12) done · 1 fixed · 0 broken · 1 file +1 −1 · 0.8k tokens · 0m05s" in lines
    assert "✗ Attempt 3 (#13) cancelled · 0 fixed · 0 broken · no change · 0.0k tokens" in lines
    assert "**Pick: attempt 2 (task #12)**: because." in text and "different base commits" not in text
    assert "⚠ The attempts started from 2 different base commits" in render_summary(group, "calc", attempts, 12, 2)
    buttons = summary_buttons(4, attempts, 12)
    assert [[b.data for b in row] for row in buttons] == [
        ["attempts:merge:4", "attempts:discard:4"],
        ["task:diff:11", "task:diff:12"],
    ]
    assert buttons[0][0].label == "Merge attempt 2"


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, 1), (1, 1), (3, 3), ("2", 2), (4.0, 4)],
)
def test_attempts_from_one_to_four(value: object, expected: int) -> None:
    assert attempt_count(value) == expected


@pytest.mark.parametrize(
    ("value", "sentence"),
    [
        (0, "attempts must be from 1 to 4 (got 0); nothing was started"),
        (5, "attempts must be from 1 to 4 (got 5); nothing was started"),
        ("three", "attempts must be a whole number from 1 to 4 (got 'three'); nothing was started"),
        (True, "attempts must be a whole number from 1 to 4 (got True); nothing was started"),
        (2.5, "attempts must be a whole number from 1 to 4 (got 2.5); nothing was started"),
    ],
)
def test_bad_attempts_are_one_sentence(value: object, sentence: str) -> None:
    with pytest.raises(ToolError) as raised:
        attempt_count(value)
    assert str(raised.value) == sentence


def test_only_an_attempt_is_told_its_number() -> None:
    task = Task(chat_id=1, workspace="w", worker=WorkerKind.CODE, title="t", instructions="i")
    assert attempt_brief(task) == ""
    task.attempt, task.attempt_of = 2, 3
    assert attempt_brief(task).startswith("This is attempt 2 of 3:")


def _facts(number: int, status: TaskStatus, **kw: Any) -> AttemptFacts:
    return AttemptFacts(task_id=number, number=number, status=status, committed=True, files=1, added=1, **kw)


def test_a_done_attempt_whose_tests_the_bot_never_ran_is_not_said_to_pass() -> None:
    """A done attempt with no test run the bot saw (no test counts recorded: a path that completes a task without a
    verdict) is ⚠, never ✔: it does not outrank an attempt whose tests the bot ran, and the pick's reason never says
    its tests pass."""
    untested = _facts(1, TaskStatus.COMPLETED, tested=False)
    tested_unverified = _facts(2, TaskStatus.UNVERIFIED, tested=True)
    pick, why = pick_by_tests([untested, tested_unverified])
    assert untested.mark != "✔", untested.line()
    assert "tests pass" not in why, why
    assert pick is not None and pick.number == 2, why


def test_red_never_beats_green_and_touched_tests_never_beat_a_plain_pass() -> None:
    """A ✗ attempt (tests red) never wins over a ✔ one, however small its change or low its number; one that
    changed its own tests is ⚠ below a plain ✔, even fixing more; an attempt with no commit is never picked."""
    red = _facts(1, TaskStatus.BLOCKED, tested=True, fixed=3, broken=0)
    touched = _facts(2, TaskStatus.COMPLETED, tested=True, fixed=5, touched_tests=True)
    green = AttemptFacts(
        task_id=3, number=3, status=TaskStatus.COMPLETED, tested=True, fixed=1, committed=True, files=4, added=400
    )
    nothing = AttemptFacts(task_id=4, number=4, status=TaskStatus.COMPLETED, tested=True, fixed=9, committed=False)
    pick, why = pick_by_tests([red, touched, green, nothing])
    assert pick is green, why
    assert [a.number for a in ranked([red, touched, green, nothing])] == [3, 2, 1]
    group = AttemptGroup(id=1, chat_id=1, size=4, title="t", why=why, pick_task_id=3)
    text = render_summary(group, "calc", [red, touched, green, nothing], 3)
    assert text.startswith("**✔ Attempts #1") and "Pick: attempt 3 (task #3)" in text


def test_an_attempt_whose_worker_changed_the_owners_repository_is_never_a_plain_pass() -> None:
    """An attempt's own summary is never sent, so the race's summary says what the repository guard undid (a `guard`
    event): that attempt is ⚠ at best, its line names it, and a clean ✔ is picked over it."""
    guarded = _facts(1, TaskStatus.COMPLETED, tested=True, fixed=1, changed_repository=True)
    clean = _facts(2, TaskStatus.COMPLETED, tested=True, fixed=1)
    assert guarded.mark == "⚠" and not guarded.passed and clean.passed
    assert "changed the owner's repository (undone)" in guarded.line()
    pick, why = pick_by_tests([guarded, clean])
    assert pick is clean, why
