"""The record a finished task's review page shows besides its diff, made from its outcome without I/O: the headline,
the verdict line, each test's outcome as the bot judged it (fixed, broken, pre-existing, flaky, …), the criteria and
the worker's report. Only what the bot observed: a test is "passed" only when the run said so."""

from __future__ import annotations

from typing import Any

from agents.verify.suite_run import SUITE_ID
from agents.work.task_outcome import Outcome

TESTS_KEPT = 3000  # test ids in the record; the judged ones (not plain passes) come first, so none of those is lost

# the order a test is named in when it is in more than one list (a flaky fixed test is "flaky": it was seen failing)
JUDGED = ("broken", "target", "unknown", "flaky", "fixed", "pre-existing", "disappeared")


def _plain(markdown_line: str) -> str:
    return markdown_line.replace("**", "").replace("`", "")


def review_record(outcome: Outcome) -> dict[str, Any]:
    """What the page shows of the task's outcome (agents/store/reviews.py keeps it as JSON)."""
    facts, verdict = outcome.facts, outcome.facts.verdict
    tests: dict[str, str] = {}
    tests_line, steps_line, notes = "Tests: not run (the worker did not finish)", "", []
    if verdict is not None:
        lists = {
            "broken": verdict.broken,
            "target": verdict.targets,
            "unknown": verdict.unknown,
            "flaky": verdict.flaky,
            "fixed": verdict.fixed,
            "pre-existing": verdict.pre_existing,
            "disappeared": verdict.disappeared,
        }
        for kind in JUDGED:
            for name in lists[kind]:
                tests.setdefault(name, kind)
        for name, state in verdict.after.cases.items():
            if name != SUITE_ID:
                tests.setdefault(name, state)  # passed / failed / skipped, as the run reported it
        tests_line = _plain(verdict.line())
        steps_line = _plain(verdict.steps_line() or "")
        notes = [*verdict.notes, *verdict.warnings]
    judged = [(n, k) for n, k in tests.items() if k in JUDGED]
    others = [(n, k) for n, k in tests.items() if k not in JUDGED]
    kept = (judged + others)[:TESTS_KEPT]
    last = outcome.last_commit
    return {
        "headline": outcome.headline,
        "status": outcome.status.value,
        "workspace": facts.workspace,
        "report": outcome.report,
        "tests_line": tests_line,
        "steps_line": steps_line,
        "notes": notes,
        "tests": [{"id": n, "outcome": k} for n, k in kept],
        "tests_left_out": len(tests) - len(kept),
        "criteria": [{"idx": c.idx, "text": c.text, "verified": c.verified} for c in facts.criteria],
        "branch": facts.branch,
        "base_branch": facts.base_branch,
        "commit": last.short_sha if last else "",
    }
