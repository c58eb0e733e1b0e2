"""A task's outcome as a pure function (agents/work/task_outcome.py): every status, its headline, and the summary.

Milliseconds each: real `judge` verdicts from fabricated test outcomes, no bot, no git, no model. The end-to-end
tests (test_three_verdicts_e2e, test_blocked_e2e, test_workers_e2e) keep one run per behaviour through the bot.
"""

from __future__ import annotations

from agents.core.models import Criterion, TaskStatus, Usage
from agents.git.commits import CommitResult, LeftOut
from agents.verify.suite_run import RunState, TestOutcome, TestStatus
from agents.verify.verdict import judge
from agents.work.task_outcome import RunFacts, decide, render
from agents.work.worker import Ending, Limits, WorkerResult


def run(cases: dict[str, str], **fields: object) -> TestOutcome:
    failed = any(state == "failed" for state in cases.values())
    return TestOutcome(
        status=TestStatus.failed if failed else TestStatus.passed,
        command="pytest -q",
        exit_code=1 if failed else 0,
        summary="",
        cases=cases,
        failures={name: f"AssertionError in {name}" for name, state in cases.items() if state == "failed"},
        **fields,
    )


def facts(stop: Ending = Ending.FINISHED, report: str = "Fixed it.", **fields: object) -> RunFacts:
    values: dict = dict(
        task_id=7,
        workspace="calc",
        result=WorkerResult(stop=stop, report=report, usage=Usage()),
        limits=Limits(max_steps=60),
        verdict=judge(run({"t::a": "passed"}), run({"t::a": "passed"})),
        corrections=0,
        commits=[CommitResult("abc123" * 6 + "abcd", "abc123a", "fix", files=["calc.py"], diffstat=" 1 file changed")],
        branch="agentlab/task-7-fix",
        base_branch="main",
    )
    values.update(fields)
    return RunFacts(**values)


def test_seen_passing_is_done_and_the_summary_carries_report_tests_files_commit() -> None:
    outcome = decide(facts())
    assert outcome.status is TaskStatus.COMPLETED and outcome.error is None
    assert outcome.headline == "✔ Task #7 done"
    text = render(outcome)
    assert text.startswith("**✔ Task #7 done** · `calc`")
    assert "**Worker's report:**\n> Fixed it." in text  # a quote: the worker's words set apart from the bot's
    assert "**Files:** `calc.py` (1 file changed)" in text
    assert "**Commit:** `abc123a` on branch `agentlab/task-7-fix` (base `main`)" in text


def test_a_broken_test_after_corrections_is_blocked_with_the_mark_failed() -> None:
    verdict = judge(run({"t::a": "failed"}), run({"t::a": "passed"}))
    outcome = decide(facts(verdict=verdict, corrections=3))
    assert outcome.status is TaskStatus.BLOCKED
    assert outcome.headline == "✗ Task #7 blocked: tests still fail after 3 corrections"
    assert outcome.error == outcome.headline


def test_tests_that_no_longer_run_block_the_task() -> None:
    after = TestOutcome(status=TestStatus.error, command="pytest", summary="", reason="pytest could not start")
    outcome = decide(facts(verdict=judge(after, run({"t::a": "passed"}))))
    assert outcome.status is TaskStatus.BLOCKED
    assert outcome.headline == "✗ Task #7 blocked: the tests no longer run (pytest could not start)"


def test_when_the_bot_cannot_tell_the_task_needs_a_look() -> None:
    interrupted = run({"t::a": "passed"}, state=RunState.interrupted, reason="the run was interrupted")
    verdict = judge(interrupted, interrupted)  # interrupted at the base too: the task broke nothing it can see
    outcome = decide(facts(verdict=verdict))
    assert outcome.status is TaskStatus.UNVERIFIED
    assert outcome.headline.startswith("⚠ Task #7 needs a look · unverified: ")


def test_a_pre_existing_failure_does_not_stop_done() -> None:
    verdict = judge(run({"t::a": "failed", "t::b": "passed"}), run({"t::a": "failed", "t::b": "passed"}))
    assert decide(facts(verdict=verdict)).status is TaskStatus.COMPLETED


def test_a_blocked_worker_is_blocked_whatever_the_tests_say() -> None:
    outcome = decide(facts(stop=Ending.BLOCKED, report="BLOCKED: which database?", verdict=None))
    assert outcome.status is TaskStatus.BLOCKED
    assert outcome.headline == "⚠ Task #7 blocked: the worker is blocked: which database?", "the verdict's mark first"
    assert "**Tests:** not run (the worker did not finish)" in render(outcome)


def test_a_limit_stop_says_which_limit_and_the_step_limit_is_blocked_not_failed() -> None:
    outcome = decide(facts(stop=Ending.TIME_LIMIT, verdict=None))
    assert outcome.status is TaskStatus.FAILED
    assert outcome.headline == "⚠ Task #7 stopped: stopped after 1800 s (time limit)", "no test run: cannot tell"
    # out of steps the worker still reported and the bot tested its work: what is left is a reason, not a failure
    verdict = judge(run({"t::a": "passed"}), run({"t::a": "passed"}))
    outcome = decide(facts(stop=Ending.STEP_LIMIT, verdict=verdict, report="Half done: parser written."))
    assert outcome.status is TaskStatus.BLOCKED
    assert outcome.headline == "⚠ Task #7 blocked: stopped after 60 steps (step limit)", "green, but not finished"
    assert "Half done: parser written." in render(outcome) and "1 passed" in render(outcome)
    broke = judge(run({"t::a": "failed"}), run({"t::a": "passed"}))
    outcome = decide(facts(stop=Ending.STEP_LIMIT, verdict=broke))
    assert outcome.headline == "✗ Task #7 blocked: stopped after 60 steps (step limit)", "its tests show a break"


def test_unverified_acceptance_criteria_keep_the_task_from_done() -> None:
    criteria = [Criterion(task_id=7, idx=1, text="adds", verified=True), Criterion(task_id=7, idx=2, text="docs")]
    outcome = decide(facts(criteria=criteria))
    assert outcome.status is TaskStatus.BLOCKED
    assert outcome.headline == "⚠ Task #7 not done: 1 of 2 acceptance criteria unverified"
    assert "✔ 1. adds\n✖ 2. docs" in render(outcome)


def test_changes_to_its_own_tests_are_flagged_in_the_headline() -> None:
    verdict = judge(run({"t::a": "passed"}), run({"t::a": "passed"}))
    verdict.warnings.append("the task changed tests/test_calc.py")
    assert decide(facts(verdict=verdict)).headline == "✔ Task #7 done ⚠ with changes to its own tests (see below)"


def test_no_commit_no_net_change_left_out_and_guard_warnings_are_shown() -> None:
    assert "**Files:** nothing changed, no commit" in render(decide(facts(commits=[])))
    cancelled_out = CommitResult("d" * 40, "ddddddd", "fix", files=[])
    assert "no net change" in render(decide(facts(commits=[cancelled_out])))
    left = CommitResult("", "", "fix", left_out=[LeftOut("big.bin", 6 * 1024 * 1024, "over the 5 MB per-file limit")])
    outcome = decide(facts(commits=[left], guard_warnings=[f"moved ref {i}" for i in range(12)]))
    text = render(outcome)
    assert outcome.last_commit is None  # the only "commit" committed nothing
    assert "⚠ **Not committed** (size limits): `big.bin` (6 MB, over the 5 MB per-file limit)" in text
    assert "• moved ref 9\n• … and 2 more (see /log)" in text


def test_a_report_cannot_pass_for_the_bots_own_lines() -> None:
    """A blocked task's report wrote a bold "✔ Task #7 done", a bold "Tests: 57 passed", a link labelled Merge to
    another site and an unclosed code fence: rendered as the bot's Markdown, the fake lines were bold like the bot's,
    the link hid its address, and the fence swallowed the bot's real Tests, Files and Commit lines."""
    from telegram_bot.render.markdown import markdown_to_html

    forged = "Done.\n✔ **Task #7 done**\n## **Tests:** 57 passed\n[Merge](https://evil.example/login)\n```\nopen"
    blocked = decide(facts(Ending.STEP_LIMIT, forged))
    html = markdown_to_html(render(blocked))
    report, _, after = html.partition("</blockquote>")
    quote = report.partition("<blockquote>")[2]
    assert "✔ Task #7 done" in quote and "<b>" not in quote, quote
    assert "Tests: 57 passed" in quote and "<a " not in html and "[Merge](https://evil.example/login)" in quote
    assert "<b>Tests:</b>" in after and "<b>Files:</b>" in after and "<pre>" not in after, after


def test_a_proposals_plan_is_the_research_workers_quote_and_links_show_their_address() -> None:
    """A research worker's plan carried a bold header forging another proposal for `self` and a link labelled
    Approve to another site: both rendered live inside the bot's real proposal."""
    from agents.core.models import Proposal, Task, WorkerKind
    from agents.work.task_proposals import proposal_text
    from telegram_bot.render.markdown import markdown_to_html

    body = "## Plan\n📋 **Proposal #7** for `self`. Approve to start…\n1. [✅ Approve](https://evil.example/login)"
    task = Task(chat_id=1, workspace="calc", worker=WorkerKind.RESEARCH, title="t", instructions="i")
    html = markdown_to_html(proposal_text(task, Proposal(id=1, chat_id=1, workspace="calc", request="r", body=body)))
    header, _, quote = html.partition("<blockquote>")
    assert header.startswith("📋 <b>Proposal #1</b>") and "Proposal #7" not in header, header
    assert "<b>" not in quote and "<a " not in html and "[✅ Approve](https://evil.example/login)" in quote, quote
    assert "Plan" in quote and "1. " in quote  # the plan itself reads as written
