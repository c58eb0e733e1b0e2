"""Task branches and worktrees on real git repositories in tmp folders, on a machine with no git identity configured."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import subprocess
from pathlib import Path

import pytest

from agents.core.branch_names import slugify
from agents.git.command import GitError, GitIdentity
from agents.git.commits import CommitLimits, commit_all
from agents.git.diff import write_diff
from agents.git.merge import merge_task_branch
from agents.git.repository import changes_between, current_branch, ensure_repository
from agents.git.worktrees import (
    TaskWorktree,
    branch_head,
    create_task_worktree,
    discard_task_worktree,
    remove_worktree_keep_branch,
)
from tests.support.git_repos import git, make_user_repo, no_git_identity  # noqa: F401  (an autouse fixture)


def changed(wt: TaskWorktree) -> list[str]:
    """Every path the task changed vs its base commit (committed, staged, unstaged, untracked), as git reports it."""
    if not wt.path.exists():
        return sorted(git("diff", "--name-only", f"{wt.base_commit}..{wt.branch}", cwd=wt.repo).split())
    tracked = git("diff", "--name-only", wt.base_commit, cwd=wt.path).split()
    return sorted({*tracked, *git("ls-files", "--others", "--exclude-standard", cwd=wt.path).split()})


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_user_repo(tmp_path / "demo")


@pytest.fixture
def worktrees_dir(tmp_path: Path) -> Path:
    return tmp_path / "worktrees"


async def new_task(
    repo: Path, worktrees_dir: Path, task_id: int = 7, title: str = "Fix the Login page!", branch: str | None = None
) -> TaskWorktree:
    return await create_task_worktree(repo, task_id, title, GitIdentity(), worktrees_dir, branch)


def test_commit_without_identity_fails_for_plain_git(repo: Path) -> None:
    """Guards the fixture: without the bot's identity, git really has none."""
    (repo / "x.txt").write_text("x\n")
    subprocess.run(["git", "add", "x.txt"], cwd=repo, check=True)
    done = subprocess.run(["git", "commit", "-m", "x"], cwd=repo, capture_output=True, text=True)
    assert done.returncode != 0


async def test_non_git_folder_is_initialised_with_a_commit_of_its_files(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "main.py").write_text("print('hi')\n")
    (folder / ".gitignore").write_text("secret.txt\n")
    (folder / "secret.txt").write_text("do not commit\n")

    assert await ensure_repository(folder, GitIdentity()) is True

    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=folder) == "main"
    assert git("log", "--format=%an <%ae>", cwd=folder) == "agentlab <agentlab@localhost>"
    assert set(git("ls-files", cwd=folder).splitlines()) == {".gitignore", "main.py"}
    head = git("rev-parse", "HEAD", cwd=folder)

    assert await ensure_repository(folder, GitIdentity()) is False
    assert git("rev-parse", "HEAD", cwd=folder) == head


async def test_repository_without_commits_gets_an_initial_commit(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git("init", "-q", "-b", "trunk", cwd=empty)

    assert await ensure_repository(empty, GitIdentity()) is False

    assert git("rev-list", "--count", "HEAD", cwd=empty) == "1"
    assert await current_branch(empty) == "trunk"


async def test_existing_repository_is_left_alone(repo: Path) -> None:
    head = git("rev-parse", "HEAD", cwd=repo)
    (repo / "app.py").write_text("VALUE = 2\n")  # the user's uncommitted work
    assert await ensure_repository(repo, GitIdentity()) is False
    assert git("rev-parse", "HEAD", cwd=repo) == head
    assert git("status", "--porcelain", cwd=repo) == "M app.py"


async def test_a_plain_folder_inside_another_repository_becomes_its_own(tmp_path: Path, worktrees_dir: Path) -> None:
    """WORKSPACE_PATH in a home folder kept in git: a project folder with no `.git` of its own is, to git, part of the
    home repository. It becomes a repository of its own, as a folder outside any is: a task there never gets a
    checkout of the home repository (its dotfiles)."""
    home = make_user_repo(tmp_path / "user-home")
    notes = home / "projects" / "notes"
    notes.mkdir(parents=True)
    (notes / "todo.md").write_text("# todo\n")
    assert await ensure_repository(notes, GitIdentity()) is True
    assert git("rev-parse", "--show-toplevel", cwd=notes) == str(notes.resolve())
    wt = await new_task(notes, worktrees_dir)
    assert sorted(p.name for p in wt.path.iterdir() if p.name != ".git") == ["todo.md"]
    assert git("status", "--porcelain", cwd=home) == "?? projects/"  # the home repository is as it was


async def test_a_folder_whose_files_another_repository_tracks_is_refused(tmp_path: Path, worktrees_dir: Path) -> None:
    """A sub-folder of a repository (a link to one, or WORKSPACE_PATH inside one): its files have their history
    there; a repository over them would be a second one. Refused in words; the task never gets the whole
    repository either."""
    outer = make_user_repo(tmp_path / "outer")
    (outer / "docs").mkdir()
    (outer / "docs" / "guide.md").write_text("# guide\n")
    git("add", "-A", cwd=outer)
    git("commit", "-q", "-m", "docs", cwd=outer)
    with pytest.raises(GitError, match="no git repository of its own"):
        await ensure_repository(outer / "docs", GitIdentity())
    assert not (outer / "docs" / ".git").exists()
    with pytest.raises(GitError, match="not one of its own"):
        await new_task(outer / "docs", worktrees_dir)
    assert not worktrees_dir.exists()


async def test_current_branch_and_detached_head(repo: Path) -> None:
    assert await current_branch(repo) == "main"
    sha = git("rev-parse", "HEAD", cwd=repo)
    git("checkout", "-q", "--detach", cwd=repo)
    assert await current_branch(repo) == sha


async def test_task_worktree_is_a_branch_and_the_users_checkout_is_untouched(repo: Path, worktrees_dir: Path) -> None:
    base = git("rev-parse", "HEAD", cwd=repo)

    wt = await new_task(repo, worktrees_dir)

    assert wt.branch == "agentlab/task-7-fix-the-login-page"
    assert wt.path == worktrees_dir / "demo-task-7-fix-the-login-page"
    assert wt.repo == repo
    assert (wt.base_branch, wt.base_commit) == ("main", base)
    assert (wt.path / "app.py").read_text() == "VALUE = 1\n"
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=wt.path) == wt.branch

    (wt.path / "app.py").write_text("VALUE = 42\n")
    (wt.path / "new.py").write_text("NEW = True\n")

    assert (repo / "app.py").read_text() == "VALUE = 1\n"
    assert not (repo / "new.py").exists()
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=repo) == "main"
    assert git("status", "--porcelain", cwd=repo) == ""
    assert changed(wt) == ["app.py", "new.py"]


async def test_changes_between_the_base_and_a_commit_agree_with_git_after_the_bots_and_the_workers_commits(
    repo: Path, worktrees_dir: Path
) -> None:
    wt = await new_task(repo, worktrees_dir)

    def git_says() -> list[tuple[str, str]]:
        text = git("diff", "--name-status", "--no-renames", f"{wt.base_commit}..HEAD", cwd=wt.path)
        return [(line[:1], line.split("\t", 1)[1]) for line in text.splitlines()]

    async def changes() -> list[tuple[str, str]]:
        return await changes_between(wt.path, repo, wt.base_commit, await branch_head(wt))

    assert await changes() == [] == git_says()
    (wt.path / "app.py").write_text("VALUE = 42\n")
    (wt.path / "README.md").unlink()
    (wt.path / "new.py").write_text("NEW = True\n")
    assert await commit_all(wt, "fix", GitIdentity()) is not None
    assert await changes() == git_says() == [("D", "README.md"), ("M", "app.py"), ("A", "new.py")]
    (wt.path / "more.py").write_text("MORE = 1\n")  # the worker commits by itself: HEAD moves past what the bot saw
    git("add", "more.py", cwd=wt.path)
    git("commit", "-qm", "worker", cwd=wt.path)
    assert await changes() == git_says()
    assert ("A", "more.py") in git_says()


async def test_commit_all_then_a_correction_commits_the_newly_changed_file(repo: Path, worktrees_dir: Path) -> None:
    wt = await new_task(repo, worktrees_dir)
    main_head = git("rev-parse", "HEAD", cwd=repo)

    assert await commit_all(wt, "nothing yet", GitIdentity()) is None

    (wt.path / "app.py").write_text("VALUE = 42\n")
    (wt.path / "new.py").write_text("NEW = True\n")
    first = await commit_all(wt, "Task 7: fix login", GitIdentity())

    assert first is not None
    assert first.files == ["app.py", "new.py"]
    assert "app.py" in first.diffstat and "new.py" in first.diffstat and "2 files changed" in first.diffstat
    assert first.sha == git("rev-parse", "HEAD", cwd=wt.path)
    assert first.sha.startswith(first.short_sha) and len(first.short_sha) < len(first.sha)
    assert first.message == "Task 7: fix login"
    assert git("log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", cwd=wt.path) == (
        "agentlab <agentlab@localhost>|agentlab <agentlab@localhost>|Task 7: fix login"
    )
    assert git("status", "--porcelain", cwd=wt.path) == ""
    assert await commit_all(wt, "again", GitIdentity()) is None

    (wt.path / "README.md").write_text("# demo, corrected\n")
    second = await commit_all(wt, "Task 7: correction 1", GitIdentity())

    assert second is not None and second.sha != first.sha
    assert second.files == ["README.md", "app.py", "new.py"]
    assert "README.md" in second.diffstat
    assert git("rev-list", "--count", f"{wt.base_commit}..{wt.branch}", cwd=repo) == "2"
    assert git("rev-parse", "HEAD", cwd=repo) == main_head  # the user's branch did not move
    assert (repo / "README.md").read_text() == "# demo\n"


async def test_commit_uses_the_configured_identity(repo: Path, worktrees_dir: Path) -> None:
    wt = await new_task(repo, worktrees_dir)
    (wt.path / "app.py").write_text("VALUE = 3\n")
    await commit_all(wt, "custom", GitIdentity("Crew Bot", "crew@bots.example"))
    assert git("log", "-1", "--format=%an <%ae>", cwd=wt.path) == "Crew Bot <crew@bots.example>"


async def test_diff_has_commits_and_uncommitted_changes_without_touching_the_index(
    repo: Path, worktrees_dir: Path
) -> None:
    wt = await new_task(repo, worktrees_dir)
    (wt.path / "app.py").write_text("VALUE = 42\n")
    await commit_all(wt, "committed", GitIdentity())
    (wt.path / "draft.py").write_text("DRAFT = 'not yet committed'\n")

    out = io.BytesIO()
    await write_diff(wt, out)  # what the Diff button sends, as a file
    text = out.getvalue().decode()

    assert "+VALUE = 42" in text and "-VALUE = 1" in text
    assert "# uncommitted changes" in text
    assert text.index("+VALUE = 42") < text.index("+DRAFT = 'not yet committed'")
    assert git("status", "--porcelain", cwd=wt.path) == "?? draft.py"  # still untracked: real index untouched
    assert changed(wt) == ["app.py", "draft.py"]


async def test_merge_into_the_base_branch(repo: Path, worktrees_dir: Path) -> None:
    wt = await new_task(repo, worktrees_dir)
    (wt.path / "app.py").write_text("VALUE = 42\n")
    (wt.path / "new.py").write_text("NEW = True\n")
    await commit_all(wt, "Task 7", GitIdentity())

    result = await merge_task_branch(wt)

    assert result.ok, result.message
    assert result.conflicts == []
    assert result.sha == git("rev-parse", "HEAD", cwd=repo)
    assert (repo / "app.py").read_text() == "VALUE = 42\n" and (repo / "new.py").exists()
    assert len(git("log", "-1", "--format=%P", cwd=repo).split()) == 2  # --no-ff: a real merge commit
    assert git("log", "-1", "--format=%cn <%ce>", cwd=repo) == "agentlab <agentlab@localhost>"
    assert git("status", "--porcelain", cwd=repo) == ""

    again = await merge_task_branch(wt)
    assert again.ok and "already merged" in again.message and again.sha == result.sha


async def test_merge_conflict_is_reported_and_aborted(repo: Path, worktrees_dir: Path) -> None:
    wt = await new_task(repo, worktrees_dir)
    (wt.path / "app.py").write_text("VALUE = 'task'\n")
    await commit_all(wt, "Task 7", GitIdentity())
    (repo / "app.py").write_text("VALUE = 'user'\n")
    git("commit", "-q", "-am", "user's change", cwd=repo)
    user_head = git("rev-parse", "HEAD", cwd=repo)

    result = await merge_task_branch(wt)

    assert not result.ok
    assert result.conflicts == ["app.py"]
    assert "conflict" in result.message and "app.py" in result.message and "nothing was merged" in result.message
    assert result.sha is None
    assert git("rev-parse", "HEAD", cwd=repo) == user_head
    assert git("status", "--porcelain", cwd=repo) == ""
    assert (repo / "app.py").read_text() == "VALUE = 'user'\n"
    assert not (repo / ".git" / "MERGE_HEAD").exists()


async def test_merge_refused_when_checkout_has_uncommitted_changes(repo: Path, worktrees_dir: Path) -> None:
    wt = await new_task(repo, worktrees_dir)
    (wt.path / "new.py").write_text("NEW = True\n")
    await commit_all(wt, "Task 7", GitIdentity())
    (repo / "app.py").write_text("VALUE = 'work in progress'\n")
    head = git("rev-parse", "HEAD", cwd=repo)

    result = await merge_task_branch(wt)

    assert not result.ok
    assert "uncommitted" in result.message and "app.py" in result.message
    assert git("rev-parse", "HEAD", cwd=repo) == head
    assert (repo / "app.py").read_text() == "VALUE = 'work in progress'\n"
    assert not (repo / "new.py").exists()


async def test_untracked_files_do_not_block_a_merge(repo: Path, worktrees_dir: Path) -> None:
    wt = await new_task(repo, worktrees_dir)
    (wt.path / "new.py").write_text("NEW = True\n")
    await commit_all(wt, "Task 7", GitIdentity())
    (repo / "notes.txt").write_text("the user's scratch file\n")

    result = await merge_task_branch(wt)

    assert result.ok, result.message
    assert (repo / "notes.txt").read_text() == "the user's scratch file\n"


async def test_merge_refused_when_checkout_is_on_another_branch(repo: Path, worktrees_dir: Path) -> None:
    wt = await new_task(repo, worktrees_dir)
    (wt.path / "new.py").write_text("NEW = True\n")
    await commit_all(wt, "Task 7", GitIdentity())
    git("checkout", "-q", "-b", "feature", cwd=repo)

    result = await merge_task_branch(wt)

    assert not result.ok
    assert "feature" in result.message and "main" in result.message
    assert git("rev-parse", "main", cwd=repo) == wt.base_commit
    assert not (repo / "new.py").exists()


async def test_discard_removes_worktree_and_branch(repo: Path, worktrees_dir: Path) -> None:
    wt = await new_task(repo, worktrees_dir)
    (wt.path / "junk.py").write_text("uncommitted junk\n")

    await discard_task_worktree(wt)

    assert not wt.path.exists()
    assert git("branch", "--list", wt.branch, cwd=repo) == ""
    assert git("worktree", "list", "--porcelain", cwd=repo).count("worktree ") == 1
    assert git("config", "--local", "--list", cwd=repo).count("agentlab") == 0
    await discard_task_worktree(wt)  # a second discard is harmless


async def test_resume_reuses_the_existing_branch_and_worktree(repo: Path, worktrees_dir: Path) -> None:
    wt = await new_task(repo, worktrees_dir)
    (wt.path / "new.py").write_text("NEW = True\n")
    await commit_all(wt, "Task 7", GitIdentity())
    (repo / "README.md").write_text("# moved on\n")
    git("commit", "-q", "-am", "user keeps working", cwd=repo)

    same_dir = await new_task(repo, worktrees_dir, title="a different title after restart", branch=wt.branch)
    assert same_dir == wt

    await remove_worktree_keep_branch(wt)
    assert not wt.path.exists()
    assert git("branch", "--list", wt.branch, cwd=repo).strip() == wt.branch
    out = io.BytesIO()
    await write_diff(wt, out)
    assert b"+NEW = True" in out.getvalue()  # Diff button still works from the branch
    assert changed(wt) == ["new.py"]

    resumed = await new_task(repo, worktrees_dir, branch=wt.branch)
    assert resumed == wt  # same branch, path, and the original base (not the user's newer commit)
    assert (resumed.path / "new.py").read_text() == "NEW = True\n"
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=resumed.path) == wt.branch


async def test_worktree_directory_deleted_by_hand_is_recreated(repo: Path, worktrees_dir: Path) -> None:
    wt = await new_task(repo, worktrees_dir)
    subprocess.run(["rm", "-rf", str(wt.path)], check=True)

    resumed = await new_task(repo, worktrees_dir, branch=wt.branch)

    assert resumed.path == wt.path and (resumed.path / "app.py").exists()


async def test_a_leftover_branch_of_the_same_task_number_is_never_reused(repo: Path, worktrees_dir: Path) -> None:
    old = await new_task(repo, worktrees_dir)  # e.g. from a database that was since deleted
    (old.path / "old.py").write_text("OLD = 1\n")
    await commit_all(old, "old task 7", GitIdentity())

    fresh = await new_task(repo, worktrees_dir)

    assert fresh.branch == old.branch + "-2" and fresh.path != old.path
    assert not (fresh.path / "old.py").exists()


async def test_parallel_tasks_get_separate_worktrees(repo: Path, worktrees_dir: Path) -> None:
    a, b = await asyncio.gather(new_task(repo, worktrees_dir, 1, "one"), new_task(repo, worktrees_dir, 2, "two"))
    assert (a.branch, b.branch) == ("agentlab/task-1-one", "agentlab/task-2-two")
    assert a.path != b.path and a.path.is_dir() and b.path.is_dir()


async def test_slug_and_errors(tmp_path: Path) -> None:
    assert slugify("  Ünïcode?? only!! ") == "n-code-only"
    assert slugify("!!!") == "task"
    assert len(slugify("x" * 200)) == 40
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(GitError, match="not a git repository"):
        await create_task_worktree(plain, 1, "t", GitIdentity(), tmp_path / "wt")


async def test_debris_is_never_committed(repo: Path, worktrees_dir: Path, tmp_path: Path) -> None:
    wt = await new_task(repo, worktrees_dir)
    venv = tmp_path / "venv"
    venv.mkdir()
    (wt.path / ".venv").symlink_to(venv, target_is_directory=True)
    for debris in (
        "__pycache__/app.cpython-311.pyc",
        "pkg/__pycache__/m.pyc",
        "node_modules/x/index.js",
        ".pytest_cache/v/cache",
    ):
        (wt.path / debris).parent.mkdir(parents=True, exist_ok=True)
        (wt.path / debris).write_text("x")
    (wt.path / "pkg" / "real.py").write_text("REAL = 1\n")

    commit = await commit_all(wt, "work", GitIdentity())

    assert commit is not None and commit.files == ["pkg/real.py"]


async def test_commit_excludes_any_number_of_files(repo: Path, worktrees_dir: Path) -> None:
    """100,000 small files left out by the task limit once pushed one exclude pathspec each onto git's
    command line (OSError E2BIG: "internal error", the fix lost); the exclusions now go through git's standard input.
    Fewer files with long paths make the same command line too long, faster: what counts is the bytes of the paths."""
    wt = await new_task(repo, worktrees_dir)
    (wt.path / "app.py").write_text("VALUE = 2\n")  # the real fix: the smallest change, admitted first
    # 1,700 files, each at a path of about 1,800 characters (eight nested folders of 200-character names): one
    # exclude pathspec each is ~3 MB, past ARG_MAX (2 MB here) like 100,000 short names was
    junk = wt.path.joinpath("junk", *(f"folder-{level}-" + "d" * 191 for level in range(8)))
    junk.mkdir(parents=True)
    payload = b"x" * 1000
    stem = "file-with-a-long-name-" + "n" * 170
    for i in range(1_700):
        with open(junk / f"{stem}-{i:05d}.txt", "wb") as out:
            out.write(payload)
    result = await commit_all(wt, "fix", limits=CommitLimits(max_task_bytes=50_000))
    assert result is not None and result.committed
    assert "app.py" in result.files
    assert len(result.left_out) > 1_600
    excludes = sum(len(f":(exclude){item.path}") + 1 for item in result.left_out)
    assert excludes > os.sysconf("SC_ARG_MAX"), "one pathspec per left-out file must not fit on a command line"
    assert git("show", f"{result.sha}:app.py", cwd=wt.path) == "VALUE = 2"


@pytest.mark.parametrize("removal", ["keep the branch", "discard"])
async def test_removing_a_worktree_never_deletes_through_a_link_swapped_in_meanwhile(
    repo: Path, worktrees_dir: Path, tmp_path: Path, removal: str
) -> None:
    """A process of the task still running while the bot removes its worktree swaps a folder of it for a link out of
    it, again and again: nothing outside the worktree may be deleted (git's own recursive removal looks at an entry,
    then opens and deletes by name, and so followed the link between the two)."""
    import ctypes
    import threading

    outside = tmp_path / "next-door"
    outside.mkdir()
    for i in range(200):
        (outside / f"keep-{i}.txt").write_text("the neighbour's\n")
    wt = await new_task(repo, worktrees_dir)
    (wt.path / "real").mkdir()
    for i in range(200):  # a long walk of the folder: a wide window for the swap
        (wt.path / "real" / f"keep-{i}.txt").write_text("the task's own\n")
    (wt.path / "link").symlink_to(outside)
    libc = ctypes.CDLL(None, use_errno=True)
    stop = threading.Event()

    def swap() -> None:  # what a service of the task does: one atomic exchange of the two names at a time
        while not stop.is_set():
            libc.renameat2(-100, bytes(wt.path / "real"), -100, bytes(wt.path / "link"), 2)  # RENAME_EXCHANGE

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        with contextlib.suppress(GitError):  # the removal may fail while the names change under it; never harm
            if removal == "discard":
                await discard_task_worktree(wt)
            else:
                await remove_worktree_keep_branch(wt)
    finally:
        stop.set()
        swapper.join()
    left = sorted(p.name for p in outside.iterdir())
    assert len(left) == 200, f"deleted outside the worktree: {200 - len(left)} files"


async def test_the_bots_own_agentlab_names_are_never_committed_nor_what_a_folder_of_them_holds(
    repo: Path, worktrees_dir: Path
) -> None:
    wt = await new_task(repo, worktrees_dir)
    (wt.path / ".agentlab-notes").write_text("a file of the bot's\n")
    (wt.path / ".agentlab-fake" / "objects").mkdir(parents=True)
    (wt.path / ".agentlab-fake" / "config").write_text('[filter "evil"]\n\tclean = "touch /tmp/x; cat"\n')
    (wt.path / "real.txt").write_text("the task's change\n")
    result = await commit_all(wt, "task", GitIdentity())
    assert result is not None and result.files == ["real.txt"], result
