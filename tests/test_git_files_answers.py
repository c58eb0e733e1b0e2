"""Facts a task asks of the owner's repository, answered from the git files or with fewer git processes: the same
answers as git (the reference, run beside them), and git still asked where the files are not plain.

Each check that no process runs uses a strict stand-in for process creation: any process started fails the test,
saying which. Where some git calls are expected, a counting wrapper lets them run and names them.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agents.core.secrets_filter import SecretsFilter
from agents.git.commits import blob_sizes, commit_all
from agents.git.ref_files import branch_exists_from_files, head_branch_from_files
from agents.git.repository import branch_exists, current_branch, ensure_repository, file_at, git_common_dir, toplevel
from agents.git.worktrees import create_task_worktree, remove_worktree_keep_branch
from agents.workspaces.credential_files import mask_credential_files
from tests.support.git_repos import git, make_user_repo, no_git_identity  # noqa: F401  (an autouse fixture)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_user_repo(tmp_path / "demo")


def no_process_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    async def refuse(program: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"no process expected, got {program} {' '.join(map(str, args))[-200:]}")

    monkeypatch.setattr(asyncio, "create_subprocess_exec", refuse)


_EVERY_CALL_GETS = ("--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty")  # what every diff or status gets


def count_git(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The git subcommands run from now on (each still runs)."""
    calls: Counter[str] = Counter()
    spawn = asyncio.create_subprocess_exec

    async def counting(program: Any, *args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        argv = [str(a) for a in args]
        i = 0
        while i < len(argv) and argv[i].startswith("-"):
            i += 2 if argv[i] in ("-c", "-C") else 1
        words = [a for a in argv[i:] if a not in _EVERY_CALL_GETS]
        calls[" ".join(words[:2])] += 1
        return await spawn(program, *args, **kwargs)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", counting)
    return calls


def git_ok(*args: str, cwd: Path) -> bool:
    try:
        git(*args, cwd=cwd)
    except Exception:
        return False
    return True


async def test_branches_are_read_from_loose_and_packed_refs_as_git_sees_them(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git("branch", "loose/one.two", cwd=repo)
    git("branch", "packed-away", cwd=repo)
    git("pack-refs", "--all", cwd=repo)
    git("branch", "still-loose", cwd=repo)
    names = ["main", "loose/one.two", "packed-away", "still-loose", "absent", "loose", "packed"]
    for name in names:
        said = git_ok("show-ref", "--verify", "--quiet", f"refs/heads/{name}", cwd=repo)
        assert branch_exists_from_files(repo, name) is said, name
    (repo / ".git" / "refs" / "heads" / "pointer").write_text("ref: refs/heads/main\n")
    assert branch_exists_from_files(repo, "pointer") is None  # a symbolic ref: git resolves it
    assert branch_exists_from_files(repo, "a..b") is None and branch_exists_from_files(repo, "x.lock") is None
    no_process_allowed(monkeypatch)
    assert await branch_exists(repo, "packed-away") and not await branch_exists(repo, "absent")


async def test_the_current_branch_is_git_s_short_name_and_an_ambiguous_one_is_asked(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert head_branch_from_files(repo) == git("symbolic-ref", "--short", "HEAD", cwd=repo) == "main"
    git("branch", "feature/x", cwd=repo)
    git("worktree", "add", "-q", str(tmp_path / "linked"), "feature/x", cwd=repo)
    assert head_branch_from_files(tmp_path / "linked") == "feature/x"
    git("tag", "main", cwd=repo)  # now `main` is also a tag: git says heads/main
    assert head_branch_from_files(repo) is None
    assert await current_branch(repo) == git("symbolic-ref", "--short", "HEAD", cwd=repo) == "heads/main"
    git("tag", "-d", "main", cwd=repo)
    git("checkout", "-q", "--detach", cwd=repo)
    head = git("rev-parse", "HEAD", cwd=repo)
    assert head_branch_from_files(repo) == head
    no_process_allowed(monkeypatch)
    assert await current_branch(repo) == head


async def test_the_common_git_folder_of_a_main_checkout_needs_no_git(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = (repo / git("rev-parse", "--git-common-dir", cwd=repo)).resolve()
    (repo / "sub").mkdir()
    git("init", "-q", str(repo / "sub" / "nested"), cwd=repo)
    nested = (repo / "sub" / "nested" / git("rev-parse", "--git-common-dir", cwd=repo / "sub" / "nested")).resolve()
    no_process_allowed(monkeypatch)
    assert await git_common_dir(repo) == said == repo.resolve() / ".git"
    assert await git_common_dir(repo / "sub" / "nested") == nested


async def test_a_new_task_worktree_is_added_without_listing_worktrees_and_a_stale_record_still_cleared(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_git(monkeypatch)
    tree = await create_task_worktree(repo, 1, "Fix it", worktrees_dir=tmp_path / "trees")
    assert "worktree list" not in calls and calls["worktree add"] == 1, calls
    assert calls["show-ref --verify"] == 0 and calls["symbolic-ref --short"] == 0, calls
    assert tree.base_branch == "main" and tree.base_commit == git("rev-parse", "main", cwd=repo)
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=tree.path) == tree.branch
    await remove_worktree_keep_branch(tree)
    assert "worktree list" not in calls and not tree.path.exists(), calls
    assert str(tree.path) not in git("worktree", "list", "--porcelain", cwd=repo)

    # a record of a worktree at the same place whose folder is gone, its branch deleted behind git's back
    again = await create_task_worktree(repo, 2, "Again", worktrees_dir=tmp_path / "trees")
    shutil.rmtree(again.path)
    git("update-ref", "-d", f"refs/heads/{again.branch}", cwd=repo)
    calls.clear()
    third = await create_task_worktree(repo, 2, "Again", worktrees_dir=tmp_path / "trees")
    assert third.path == again.path and third.path.is_dir(), calls
    assert calls["worktree list"] == 1 and calls["worktree prune"] == 1 and calls["worktree add"] == 2, calls
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=third.path) == third.branch


async def test_a_commit_reports_what_git_says_with_fewer_questions(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = await create_task_worktree(repo, 1, "Change files", worktrees_dir=tmp_path / "trees")
    (tree.path / "app.py").write_text("VALUE = 2\n")
    (tree.path / "naïve name.txt").write_text("one\ntwo\n")
    (tree.path / "blob.bin").write_bytes(b"\0\1\2binary")
    (tree.path / "README.md").unlink()
    calls = count_git(monkeypatch)
    result = await commit_all(tree, "Change files")
    assert result is not None and result.committed
    assert "diff --cached" not in calls and "rev-parse" not in " ".join(calls), calls  # the status showed changes
    assert calls["diff --raw"] == 1 and calls["commit --no-verify"] == 1, calls
    assert result.sha == git("rev-parse", "HEAD", cwd=tree.path)
    assert result.short_sha == git("rev-parse", "--short", "HEAD", cwd=tree.path)
    span = f"{tree.base_commit}..HEAD"
    stat = subprocess.run(
        ["git", "-c", "core.quotePath=off", "diff", "--stat", span], cwd=tree.path, capture_output=True, text=True
    )
    assert result.diffstat == stat.stdout.rstrip() and "naïve name.txt" in result.diffstat
    assert result.files == sorted(["app.py", "naïve name.txt", "blob.bin", "README.md"])
    assert result.binary == ["blob.bin"]

    # changes staged then undone in the working tree: the status shows them, yet nothing is left to commit
    (tree.path / "extra.txt").write_text("x\n")
    git("add", "extra.txt", cwd=tree.path)
    (tree.path / "extra.txt").unlink()
    calls.clear()
    assert await commit_all(tree, "Nothing") is None
    assert calls["diff --cached"] == 1 and calls["commit --no-verify"] == 0, calls
    assert git("rev-parse", "HEAD", cwd=tree.path) == result.sha


async def test_the_base_commit_is_listed_once_for_all_who_ask(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git("repack", "-a", "-d", "-q", cwd=repo)
    (repo / "docs").mkdir()
    (repo / "docs" / "guide.md").write_text("guide\n")
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "docs", cwd=repo)
    tree = await create_task_worktree(repo, 1, "Read", worktrees_dir=tmp_path / "trees")
    calls = count_git(monkeypatch)
    await mask_credential_files(tree.path, SecretsFilter())
    assert calls["ls-tree -r"] == 1, calls
    calls.clear()
    assert await file_at(repo, tree.base_commit, ".agentlab.toml") is None
    assert await file_at(tree.path, tree.base_commit, "docs/missing.md") is None
    assert not calls, calls  # known absent from the listing
    assert await file_at(repo, tree.base_commit, "docs/guide.md") == "guide\n"
    assert "tree" in (await file_at(repo, tree.base_commit, "docs") or "")  # a folder: git shows it, as before
    assert sum(n for call, n in calls.items() if call.startswith("show ")) == 2, calls

    other = git("rev-parse", "HEAD~1", cwd=repo)
    git("replace", tree.base_commit, other, cwd=repo)  # an id that may stand for other content: git is asked
    calls.clear()
    assert await file_at(repo, tree.base_commit, ".agentlab.toml") is None
    assert sum(n for call, n in calls.items() if call.startswith("show ")) == 1, calls


async def test_the_top_of_a_plain_checkout_is_git_s_answer_without_git(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git("repack", "-a", "-d", "-q", cwd=repo)  # a committed repository as cloned: its commits packed
    link = tmp_path / "link"
    link.symlink_to(repo)
    said = Path(git("rev-parse", "--show-toplevel", cwd=link))
    (repo / "sub").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with monkeypatch.context() as patched:
        no_process_allowed(patched)
        assert await toplevel(link) == said == repo.resolve()  # git answers the real path
        assert await ensure_repository(repo) is False  # a repository with a commit: nothing to do, nothing asked
    assert await toplevel(repo / "sub") == said  # below the top: git is asked
    git("config", "core.worktree", str(elsewhere), cwd=repo)  # the work tree is elsewhere: git is asked
    assert await toplevel(repo) == Path(git("rev-parse", "--show-toplevel", cwd=repo)) == elsewhere.resolve()


async def test_sizes_of_loose_blobs_are_read_from_their_headers_and_packed_ones_asked(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git("repack", "-a", "-d", "-q", cwd=repo)
    packed = git("rev-parse", "HEAD:app.py", cwd=repo)
    (repo / "big.txt").write_text("x" * 70_000)
    (repo / "small.txt").write_text("small\n")
    git("add", "-A", cwd=repo)  # what `git add` writes is loose
    loose = [git("rev-parse", f":{name}", cwd=repo) for name in ("big.txt", "small.txt")]
    said = {name: int(git("cat-file", "-s", name, cwd=repo)) for name in (*loose, packed)}
    with monkeypatch.context() as patched:
        no_process_allowed(patched)
        assert await blob_sizes(repo, loose) == {name: said[name] for name in loose}
    calls = count_git(monkeypatch)
    assert await blob_sizes(repo, [*loose, packed]) == said
    assert sum(calls.values()) == 1 and next(iter(calls)).startswith("cat-file --batch-check"), calls
