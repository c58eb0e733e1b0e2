"""The masked copies of git metadata a sandbox shows, remembered between specs: a file is read and masked again
whenever it changed or the secret values did, and only then."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from agents.core.secrets_filter import SecretsFilter
from agents.sandbox.git_masks import GitMetadataMasks

TOKEN_URL = "https://x-access-token:ghp_SECRET123@github.com/o/r.git"


class CountingFilter(SecretsFilter):
    """The real filter, counting the texts it is asked to mask."""

    def __init__(self) -> None:
        super().__init__()
        self.masked: list[str] = []

    def without_url_credentials(self, text: str) -> str:
        self.masked.append(text)
        return super().without_url_credentials(text)


def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", TOKEN_URL], check=True)
    return repo / ".git"


def shown(masks: GitMetadataMasks, common: Path) -> dict[str, str]:
    return {str(original.relative_to(common)): copy.read_text() for copy, original in masks.files(common)}


def test_an_unchanged_folder_is_read_once_and_shown_the_same(tmp_path: Path) -> None:
    common = repository(tmp_path)
    secrets = CountingFilter()
    masks = GitMetadataMasks(secrets)
    first = shown(masks, common)
    assert "ghp_SECRET123" not in first["config"] and "https://github.com/o/r.git" in first["config"], first
    read = len(secrets.masked)
    assert read >= 1
    assert shown(masks, common) == first
    assert len(secrets.masked) == read, "an unchanged file was read and masked again"


def test_a_file_changed_since_is_masked_again(tmp_path: Path) -> None:
    common = repository(tmp_path)
    masks = GitMetadataMasks(SecretsFilter())
    assert "ghp_SECRET123" not in shown(masks, common)["config"]
    subprocess.run(
        ["git", "-C", str(common), "remote", "add", "backup", "https://bot:glpat-OTHERTOKEN99@gitlab.com/o/r.git"],
        check=True,
    )
    config = shown(masks, common)["config"]
    assert "glpat-OTHERTOKEN99" not in config and "https://gitlab.com/o/r.git" in config, config


def test_a_file_with_nothing_to_mask_is_masked_once_a_value_is_added(tmp_path: Path) -> None:
    """A value added later (a task's own secret) is masked in a file already looked at and found clean."""
    common = repository(tmp_path)
    (common / "description").write_text("deploy key: hunter2-but-longer-value\n")
    secrets = SecretsFilter()
    masks = GitMetadataMasks(secrets)
    assert "description" not in shown(masks, common)
    secrets.add(["hunter2-but-longer-value"])
    assert "hunter2-but-longer-value" not in shown(masks, common)["description"]


def test_a_copy_removed_meanwhile_is_made_again(tmp_path: Path) -> None:
    common = repository(tmp_path)
    masks = GitMetadataMasks(SecretsFilter())
    [(copy, _)] = [pair for pair in masks.files(common) if pair[1].name == "config"]
    copy.unlink()
    assert "ghp_SECRET123" not in shown(masks, common)["config"]


def test_links_fifos_and_binary_files_are_never_read(tmp_path: Path) -> None:
    common = repository(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text(TOKEN_URL)
    (common / "linked").symlink_to(outside)
    os.mkfifo(common / "pipe")  # opened, it would wait for a writer
    (common / "blob").write_bytes(b"\0" + TOKEN_URL.encode())
    names = set(shown(GitMetadataMasks(SecretsFilter()), common))
    assert names == {"config"}, names
