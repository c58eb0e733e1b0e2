"""The refs read from git's files without running git: the same answers as git where they answer, git asked otherwise.

Real repositories; git itself is the reference. The guard's use is checked against a worker that moves a ref the
quiet way (rewritten in place, same size, its time put back), after checks that had no reason to ask git.
"""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import pytest

from agents.core.secrets_filter import SecretsFilter
from agents.git.command import GitIdentity
from agents.git.guard import RepositoryGuard
from agents.git.ref_files import (
    checkout_ref_sources,
    head_commit_from_files,
    head_from_files,
    is_loose_commit,
    ref_sources,
)
from agents.git.repository import has_commits, rev_parse, toplevel
from agents.git.worktrees import create_task_worktree
from agents.repo_map.maps import git_head
from tests.support.git_repos import git, make_user_repo, no_git_identity  # noqa: F401  (an autouse fixture)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_user_repo(tmp_path / "demo")


def git_says_head(path: Path) -> str | None:
    done = subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=path, capture_output=True, text=True)
    return done.stdout.strip() or None


async def test_head_from_files_agrees_with_git_on_a_branch_a_packed_ref_a_detached_head_and_a_worktree(
    repo: Path, tmp_path: Path
) -> None:
    head = git_says_head(repo)
    assert head is not None and head_from_files(repo) == head  # a loose branch ref
    (repo / "app.py").write_text("VALUE = 2\n")
    git("commit", "-qam", "second", cwd=repo)
    git("pack-refs", "--all", cwd=repo)
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert head_from_files(repo) == git_says_head(repo) != head  # read from packed-refs
    git("checkout", "-q", "--detach", "HEAD~1", cwd=repo)
    assert head_from_files(repo) == git_says_head(repo) == head  # a commit id in HEAD
    git("checkout", "-q", "main", cwd=repo)
    tree = await create_task_worktree(repo, 3, "look", GitIdentity(), tmp_path / "worktrees")
    assert head_from_files(tree.path) == git_says_head(tree.path) == tree.base_commit  # a linked worktree
    assert await git_head(tree.path) == tree.base_commit


async def test_head_from_files_leaves_to_git_what_is_not_plain(repo: Path, tmp_path: Path) -> None:
    unborn = tmp_path / "unborn"
    unborn.mkdir()
    git("init", "-q", "-b", "main", cwd=unborn)
    assert head_from_files(unborn) is None and await git_head(unborn) is None  # git says: no commit yet
    assert head_from_files(repo / "app.py") is None  # not a checkout's top
    main = repo / ".git" / "refs" / "heads" / "main"
    target = tmp_path / "elsewhere"
    target.write_text(main.read_text())
    main.unlink()
    main.symlink_to(target)
    assert head_from_files(repo) is None  # a link among the refs: git is asked
    assert await git_head(repo) == git_says_head(repo)


def test_ref_sources_see_a_ref_rewritten_in_place_with_its_time_put_back(repo: Path) -> None:
    common = repo / ".git"
    before = ref_sources(common, repo)
    assert before is not None and before == ref_sources(common, repo)
    main = common / "refs" / "heads" / "main"
    info = main.stat()
    first = main.read_text()
    with open(main, "r+") as handle:  # same inode, same size
        handle.write(("0" if first[0] != "0" else "1") + first[1:])
    os.utime(main, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert main.stat().st_size == info.st_size and ref_sources(common, repo) != before
    (common / "reftable").mkdir()
    assert ref_sources(common, repo) is None  # another ref storage: only git can say


def test_checkout_ref_sources_count_a_worktrees_own_refs(repo: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    git("worktree", "add", "-q", "-b", "side", str(tree), cwd=repo)
    before = checkout_ref_sources(tree)
    assert before is not None
    git("update-ref", "refs/bisect/bad", "HEAD", cwd=tree)  # per worktree: kept under the worktree's own git dir
    assert checkout_ref_sources(tree) != before


async def test_the_guard_still_undoes_a_quiet_in_place_move_after_checks_that_did_not_ask_git(
    repo: Path, tmp_path: Path
) -> None:
    git("branch", "feature", cwd=repo)
    main_before = git("rev-parse", "main", cwd=repo)
    tree = await create_task_worktree(repo, 7, "quiet", GitIdentity(), tmp_path / "worktrees")
    guard = await RepositoryGuard.start(tree)
    try:
        assert await guard.check() == [] and await guard.check() == []  # nothing moved: the ref files say so
        (tree.path / "x.txt").write_text("x\n")
        git("add", "x.txt", cwd=tree.path)
        git("commit", "-qm", "the worker's own commit", cwd=tree.path)
        assert await guard.check() == []  # the task's own branch is the worker's to move
        evil = git("commit-tree", "-m", "evil", "HEAD^{tree}", cwd=tree.path)
        main = repo / ".git" / "refs" / "heads" / "main"
        info = main.stat()
        with open(main, "r+") as handle:  # in place: same inode and size; then the old times put back
            handle.write(evil + "\n")
        os.utime(main, ns=(info.st_atime_ns, info.st_mtime_ns))
        warnings = await guard.check()
        assert any("refs/heads/main" in w for w in warnings), warnings
        assert git("rev-parse", "main", cwd=repo) == main_before
        git("pack-refs", "--all", cwd=repo)  # packing moves no ref: no warning
        assert await guard.check() == []
        packed = repo / ".git" / "packed-refs"  # a packed ref edited in place is seen too
        text = packed.read_text()
        packed.write_text(text.replace(f"{main_before} refs/heads/feature", f"{evil} refs/heads/feature"))
        warnings = await guard.check()
        assert any("refs/heads/feature" in w for w in warnings), warnings
        assert git("rev-parse", "feature", cwd=repo) == main_before
    finally:
        guard.close()


async def test_the_credential_history_is_searched_again_when_a_new_tip_appears(repo: Path) -> None:
    from agents.workspaces.credential_files import mask_credential_files

    def add_and_remove_env(value: str) -> None:
        (repo / ".env").write_text(f"TOKEN={value}\n")
        git("add", ".env", cwd=repo)
        git("commit", "-qm", "oops", cwd=repo)
        git("rm", "-q", ".env", cwd=repo)
        git("commit", "-qm", "removed", cwd=repo)

    add_and_remove_env("Hist0ryValue4ref1les")
    assert await mask_credential_files(repo, SecretsFilter()) == 1  # only in the history
    git("branch", "other", "main", cwd=repo)  # a new name for a commit already there: the same history
    assert await mask_credential_files(repo, SecretsFilter()) == 1
    git("checkout", "-q", "-b", "side", cwd=repo)
    add_and_remove_env("An0therValue4ref1les")
    git("checkout", "-q", "main", cwd=repo)
    assert await mask_credential_files(repo, SecretsFilter()) == 2  # a new tip: its history is searched


async def test_the_credential_files_at_head_are_read_again_when_head_moves(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents.workspaces import credential_files

    monkeypatch.setattr(credential_files, "HISTORY_SECONDS", 0.0)  # no history search: HEAD's files only
    (repo / ".env").write_text("TOKEN=AtHeadValue1ref5\n")
    git("add", ".env", cwd=repo)
    git("commit", "-qm", "env", cwd=repo)
    tree = tmp_path / "tree"
    git("worktree", "add", "-q", "-b", "side", str(tree), cwd=repo)
    (tree / ".env").unlink()  # not on disk either: what HEAD holds is all that counts
    assert await credential_files.mask_credential_files(tree, SecretsFilter()) == 1
    git("checkout", "-q", ".env", cwd=tree)
    (tree / ".env").write_text("TOKEN=AtHeadValue1ref5\nOTHER=AtHeadValue2ref5\n")
    git("commit", "-qam", "a second value", cwd=tree)
    (tree / ".env").unlink()
    assert await credential_files.mask_credential_files(tree, SecretsFilter()) == 2  # the new HEAD's files are read


def git_succeeds(*args: str, cwd: Path) -> bool:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True).returncode == 0


async def test_a_commit_read_from_the_files_is_one_git_would_read_and_the_rest_is_asked_of_git(repo: Path) -> None:
    head = git("rev-parse", "HEAD^{commit}", cwd=repo)
    assert head_commit_from_files(repo) == head == await rev_parse(repo, "HEAD")
    tree = git("rev-parse", "HEAD^{tree}", cwd=repo)
    assert not is_loose_commit(repo / ".git", tree)  # a tree is not a commit
    loose = repo / ".git" / "objects" / head[:2] / head[2:]
    stored = loose.read_bytes()
    loose.chmod(0o644)
    loose.write_bytes(zlib.compress(zlib.decompress(stored).replace(b"user's first commit", b"user's other commit")))
    assert not is_loose_commit(repo / ".git", head)  # the content no longer matches its id: git would refuse it
    assert await has_commits(repo) is git_succeeds("rev-parse", "--verify", "-q", "HEAD^{commit}", cwd=repo)
    loose.write_bytes(stored)
    git("gc", "-q", cwd=repo)  # packed: read from the pack's index and the pack (tests/test_pack_index.py)
    assert not loose.exists() and head_commit_from_files(repo) == head
    assert await has_commits(repo) and await rev_parse(repo, "HEAD") == head
    (repo / ".git" / "HEAD").write_text(tree + "\n")  # HEAD naming a tree: no commit, as git says
    assert await has_commits(repo) is False is git_succeeds("rev-parse", "--verify", "-q", "HEAD^{commit}", cwd=repo)


async def test_the_toplevel_kept_for_a_checkout_follows_its_configuration(repo: Path, tmp_path: Path) -> None:
    assert await toplevel(repo) == repo.resolve() == await toplevel(repo)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    git("config", "core.worktree", str(elsewhere), cwd=repo)
    assert await toplevel(repo) == Path(git("rev-parse", "--show-toplevel", cwd=repo)) == elsewhere.resolve()


def test_too_many_loose_refs_are_left_to_git(repo: Path) -> None:
    head = git("rev-parse", "HEAD", cwd=repo)
    assert ref_sources(repo / ".git", repo) is not None
    commands = "".join(f"create refs/tags/t{i:04d} {head}\n" for i in range(1001))
    subprocess.run(["git", "update-ref", "--stdin"], cwd=repo, input=commands, text=True, check=True)
    assert ref_sources(repo / ".git", repo) is None  # reading them all would hold the event loop: git lists them
