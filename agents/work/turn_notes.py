"""What the bot adds to a worker's turns so that it can finish well: the command its work is judged by (first turn),
and in a correction the command that re-runs only the failing tests, what the task changed so far (a diffstat), and
from the second correction on a prompt to step back; the one nudge for acceptance criteria left unverified.

Pure text builders over what the bot already knows (the test environment found at the base commit, the verdict);
the one I/O is the diffstat, read from git.
"""

from __future__ import annotations

import logging
from pathlib import Path

from agents.core.models import Criterion
from agents.core.text import fenced
from agents.git.command import GitError, git_text
from agents.verify.js_test_script import with_files
from agents.verify.suite_env import CONFIG_FILE, TestEnvironment
from agents.verify.suite_run import SUITE_ID
from agents.verify.verdict import Verdict

log = logging.getLogger(__name__)

DIFFSTAT_MAX_CHARS = 3000


def judged_by(environment: TestEnvironment | None, problem: str | None) -> str:
    """The first turn's section naming the command the bot judges the work by, exactly as the bot will run it."""
    head = "\n\n## How your work is judged\n"
    if problem is not None:
        return head + (
            f"The workspace's test configuration cannot be used ({problem}), so the bot cannot run its tests after "
            "you finish. Check your change by hand with run_command and say in your report that the tests could not "
            "run."
        )
    if environment is None:
        return head + (
            "The bot found no tests in this workspace (no pytest files, no npm test script, no "
            f"{CONFIG_FILE} [tests] command), so none judge your change yet. If the task adds tests, write them in the "
            "workspace's own language and test framework, where its conventions put them: the bot finds and runs "
            "them after you finish. Check your change with run_command before you report."
        )
    source = f"its {CONFIG_FILE} [tests] command" if environment.kind == CONFIG_FILE else f"found: {environment.kind}"
    return head + (
        f"After you finish, the bot commits your changes and runs the workspace's tests with this command in your "
        f"worktree ({source}), comparing them with the task's starting point:\n{fenced(environment.command)}\n"
        "Run exactly this command with run_command before your final report and fix what your change broke. "
        "Write new tests in the framework this command runs."
    )


def rerun_command(environment: TestEnvironment | None, verdict: Verdict) -> str | None:
    """The command that re-runs only the tests the correction is about, where the framework can take them (pytest
    ids; a JavaScript framework taking files: their files); None where only the whole suite can run."""
    if environment is None:
        return None
    failing = [t for t in [*verdict.broken, *verdict.targets] if t != SUITE_ID and "::" in t]
    if not failing:
        return None
    if environment.rerunnable:
        return environment.with_ids(failing)
    frameworks = [step for step in environment.script if step.has_framework]
    if len(frameworks) == 1:  # a JavaScript framework that takes test files: the failing tests' files
        narrowed = with_files(frameworks[0], sorted({t.split("::", 1)[0] for t in failing}))
        if narrowed is None:
            return None
        # the package's own programs, as its script finds them
        return (
            narrowed.command
            if narrowed.framework == "node"
            else f'PATH="$PWD/node_modules/.bin:$PATH" {narrowed.command}'
        )

    return None


async def diffstat(worktree: Path, base_commit: str) -> str:
    """What the task changed since its base commit, as `git diff --stat` shows it ('' when git cannot say)."""
    try:
        text = await git_text("diff", "--stat", "--no-color", base_commit, cwd=worktree)
    except GitError as err:
        log.warning("no diffstat in %s: %s", worktree, err)
        return ""
    text = text.strip()
    return text if len(text) <= DIFFSTAT_MAX_CHARS else text[: DIFFSTAT_MAX_CHARS - 1] + "…"


STEP_BACK = (
    "This is not the first correction: the last fix did not work. Before you edit again, step back: list the two or "
    "three most likely causes of these failures, check each against the code and the output above (read, grep, run "
    "one failing test), and only then change what the evidence points to. If your approach is wrong, undo it and take "
    "another."
)


def correction_notes(attempt: int, rerun: str | None, changed: str) -> str:
    """What follows the verdict's correction text: the quick re-run, the diffstat, and from the second attempt on
    the prompt to step back."""
    parts = []
    if rerun:
        parts.append(f"To re-run only the failing tests while you fix them:\n{fenced(rerun)}")
    if changed:
        parts.append(f"What the task has changed so far (against its starting point):\n{fenced(changed)}")
    if attempt >= 2:
        parts.append(STEP_BACK)
    return "\n\n" + "\n\n".join(parts) if parts else ""


def criteria_nudge(unverified: list[Criterion]) -> str:
    """The one extra turn for acceptance criteria the worker finished without verifying."""
    listed = "\n".join(f"{c.idx}. {c.text}" for c in unverified)
    return (
        "You finished, but these acceptance criteria are not verified yet:\n"
        f"{listed}\n"
        "For each: check it (run the tests or a command, read the code) and call verify_criterion with its number and "
        "the evidence; if it does not hold yet, make it hold first. If one cannot hold, say why in your final report."
    )
