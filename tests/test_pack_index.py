"""A commit read from a pack without running git: the same answer as git where it answers, git asked otherwise.

Real repositories whose objects are packed (as in any clone); git itself is the reference.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agents.git.pack_index import is_packed_commit
from agents.git.ref_files import head_commit_from_files
from agents.git.repository import has_commits, rev_parse
from tests.support.git_repos import git, make_user_repo, no_git_identity  # noqa: F401  (an autouse fixture)


@pytest.fixture
def packed(tmp_path: Path) -> Path:
    repo = make_user_repo(tmp_path / "demo")
    for n in range(12):
        (repo / f"f{n}.txt").write_text(f"{n}\n" * (n + 1))
        git("add", "-A", cwd=repo)
        git("commit", "-q", "-m", f"commit {n}", cwd=repo)
    git("repack", "-a", "-d", "-q", cwd=repo)
    git("prune-packed", cwd=repo)
    return repo


def no_git_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any process started from now on fails the test, naming it."""

    async def refuse(program: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"no process expected, got {program} {' '.join(map(str, args))[-200:]}")

    monkeypatch.setattr(asyncio, "create_subprocess_exec", refuse)


def the_pack(repo: Path) -> tuple[Path, Path]:
    (index,) = (repo / ".git" / "objects" / "pack").glob("*.idx")
    return index, index.with_suffix(".pack")


async def test_every_packed_object_is_told_a_commit_exactly_when_git_says_so(packed: Path) -> None:
    common = packed / ".git"
    assert not list((common / "objects").glob("??/*"))  # all packed
    objects = git("rev-list", "--all", "--objects", cwd=packed).split("\n")
    ids = [line.split(" ", 1)[0] for line in objects if line]
    listed = subprocess.run(
        ["git", "cat-file", "--batch-check=%(objecttype)"],
        cwd=packed,
        input="\n".join(ids) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    for object_id, kind in zip(ids, listed.stdout.split(), strict=True):
        assert is_packed_commit(common, object_id) is (kind == "commit"), (object_id, kind)
    assert sum(is_packed_commit(common, i) for i in ids) == 13
    absent = "0" * 39 + "1"
    assert not is_packed_commit(common, absent) and not is_packed_commit(common, "ff" * 20)
    assert not is_packed_commit(common, "not hex" + "0" * 33)


async def test_head_of_a_packed_repository_is_read_without_git(packed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    head = git("rev-parse", "HEAD^{commit}", cwd=packed)
    assert head_commit_from_files(packed) == head
    no_git_allowed(monkeypatch)
    assert await has_commits(packed) and await rev_parse(packed, "HEAD") == head


async def test_a_pack_that_is_not_its_index_s_is_left_to_git(packed: Path) -> None:
    head = git("rev-parse", "HEAD", cwd=packed)
    _, pack = the_pack(packed)
    data = bytearray(pack.read_bytes())
    data[-1] ^= 0xFF  # its checksum no longer the one the index was made for
    pack.chmod(0o644)
    pack.write_bytes(bytes(data))
    assert not is_packed_commit(packed / ".git", head) and head_commit_from_files(packed) is None


async def test_an_offset_in_the_large_offsets_table_is_followed(packed: Path) -> None:
    """Packs over 2 GiB keep some offsets in a second table; rewrite the index so that HEAD's offset is there."""
    head = git("rev-parse", "HEAD", cwd=packed)
    index, _ = the_pack(packed)
    data = bytearray(index.read_bytes())
    total = int.from_bytes(data[8 + 4 * 255 : 8 + 4 * 256], "big")
    ids = [bytes(data[1032 + 20 * i : 1052 + 20 * i]) for i in range(total)]
    at = ids.index(bytes.fromhex(head))
    offsets = 1032 + total * 24
    slot = offsets + 4 * at
    real = int.from_bytes(data[slot : slot + 4], "big")
    data[slot : slot + 4] = (0x80000000 | 0).to_bytes(4, "big")
    trailer = data[-40:]
    rebuilt = data[: offsets + 4 * total] + real.to_bytes(8, "big") + trailer
    index.chmod(0o644)
    index.write_bytes(bytes(rebuilt))
    assert is_packed_commit(packed / ".git", head)
    index.write_bytes(bytes(rebuilt[: offsets + 4 * total] + trailer))  # the table cut off: not trusted
    assert not is_packed_commit(packed / ".git", head)


async def test_head_on_a_tag_or_a_replaced_commit_is_asked_of_git(packed: Path) -> None:
    head = git("rev-parse", "HEAD", cwd=packed)
    git("tag", "-a", "-m", "a tag object", "v1", cwd=packed)
    git("repack", "-a", "-d", "-q", cwd=packed)
    tag = git("rev-parse", "v1", cwd=packed)
    assert not is_packed_commit(packed / ".git", tag)  # a tag object, though it names a commit
    (packed / ".git" / "HEAD").write_text(tag + "\n")
    assert head_commit_from_files(packed) is None
    assert await has_commits(packed) is True  # git peels the tag to its commit
    (packed / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert head_commit_from_files(packed) == head
    other = git("rev-parse", "HEAD~1", cwd=packed)
    git("replace", head, other, cwd=packed)
    assert head_commit_from_files(packed) is None  # replaced: only git knows what the id stands for
    assert await rev_parse(packed, "HEAD") == head


async def test_a_repository_without_packs_or_with_a_linked_pack_folder_is_left_to_git(
    packed: Path, tmp_path: Path
) -> None:
    head = git("rev-parse", "HEAD", cwd=packed)
    index, pack = the_pack(packed)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.move(index, elsewhere / index.name)
    (index).symlink_to(elsewhere / index.name)
    assert not is_packed_commit(packed / ".git", head)  # an index through a link: not read
    index.unlink()
    assert not is_packed_commit(packed / ".git", head)
    assert pack.exists()
