"""A correction turn that changed nothing in the checkout is not tested again: the last verdict stands, said in a
note; any change (a committed file, an untracked one, a gitignored one) runs the tests again."""

from __future__ import annotations

from pathlib import Path

from agents.verify.baseline import BaselineRuns
from agents.verify.checkout_state import checkout_state
from agents.verify.task_tests import UNCHANGED_NOTE, TaskTests
from tests.conftest import git, make_repo

RUN_SH = """\
echo x >> {counter}
test ! -e broken
"""


def commit_turn(tree: Path) -> None:
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "the worker's turn")


def runs(counter: Path) -> int:
    return counter.read_text().count("x") if counter.exists() else 0


async def test_a_check_of_an_unchanged_checkout_runs_nothing_and_any_change_runs_again(tmp_path: Path) -> None:
    counter = tmp_path / "runs"  # outside the repository: the runs never change the checkout themselves
    repo = make_repo(
        tmp_path / "w",
        {
            "run.sh": RUN_SH.format(counter=counter),
            ".agentlab.toml": '[tests]\ncommand = "bash run.sh"\n',
            ".gitignore": "*.log\n",
        },
    )
    commit = git(repo, "rev-parse", "HEAD").strip()
    tree = tmp_path / "tree"
    git(repo, "worktree", "add", "-q", "--detach", str(tree))
    checks = await TaskTests.start(repo, tree, commit, "tidy run.sh", BaselineRuns(tmp_path / "cache"), 60)
    try:
        await checks.baseline
        assert runs(counter) == 1

        (tree / "broken").write_text("the worker's change breaks the suite\n")
        commit_turn(tree)  # as the bot does before each check: only committed content is judged
        first = await checks.check(tree, git(tree, "rev-parse", "HEAD").strip())
        assert first.needs_correction and UNCHANGED_NOTE not in first.notes
        after_first = runs(counter)
        assert after_first >= 2

        again = await checks.check(tree, git(tree, "rev-parse", "HEAD").strip())  # the correction turn changed nothing
        assert runs(counter) == after_first, "the same checkout was tested again"
        assert again.needs_correction and again.broken == first.broken
        assert UNCHANGED_NOTE in again.notes and UNCHANGED_NOTE not in first.notes

        (tree / "debug.log").write_text("a gitignored file the tests could read\n")
        ignored = await checks.check(tree, git(tree, "rev-parse", "HEAD").strip())
        assert runs(counter) > after_first, "a new gitignored file is a change: the tests ran again"
        assert UNCHANGED_NOTE not in ignored.notes

        (tree / "broken").unlink()
        commit_turn(tree)
        fixed = await checks.check(tree, git(tree, "rev-parse", "HEAD").strip())
        assert not fixed.needs_correction and UNCHANGED_NOTE not in fixed.notes
    finally:
        checks.close()


async def test_the_state_tells_contents_of_untracked_and_ignored_files_apart(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "w", {"a.py": "x = 1\n", ".gitignore": "*.log\n"})
    before = await checkout_state(repo)
    assert before is not None and before == await checkout_state(repo)
    (repo / "debug.log").write_text("one\n")
    with_log = await checkout_state(repo)
    assert with_log != before
    (repo / "debug.log").write_text("one, longer\n")
    assert await checkout_state(repo) != with_log
    (repo / "debug.log").unlink()
    assert await checkout_state(repo) == before
    (repo / "a.py").write_text("x = 2\n")
    assert await checkout_state(repo) != before
    assert await checkout_state(tmp_path / "not-a-repository") is None
