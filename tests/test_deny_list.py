"""Credential files are invisible to every file tool; tokens in remote URLs are masked; `.git` is never written."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.core.errors import ToolError
from agents.core.secrets_filter import SecretsFilter
from agents.tools import file_tools
from agents.workspaces.folders import is_secret_file

SHAPES = SecretsFilter()  # the token shapes and URL credentials, no values added
mask_url_credentials = SHAPES.mask

SECRETS = (
    ".env",
    ".env.local",
    ".envrc",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    "server.pem",
    "tls.key",
    "id_rsa",
    "id_ed25519_sk",
    "credentials.json",
    "credentials-prod.json",
)
NOT_SECRETS = (".env.example", "id_rsa.pub", "id_utils.py", "keys.py", "README.md", "credentials.md", "monkey.py")


def test_the_deny_list_names() -> None:
    assert [n for n in SECRETS if not is_secret_file(n)] == []
    assert [n for n in NOT_SECRETS if is_secret_file(n)] == []


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for name in SECRETS + NOT_SECRETS:
        (tmp_path / "sub" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "sub" / name).write_text("TOKEN=ghp_abc123\n")
    return tmp_path


async def test_no_file_tool_shows_or_writes_a_credential_file(root: Path) -> None:
    for name in SECRETS:
        with pytest.raises(ToolError, match="holds secrets"):
            await file_tools.read_file(root, f"sub/{name}", secrets=SHAPES)
        with pytest.raises(ToolError, match="holds secrets"):
            await file_tools.write_file(root, f"sub/{name}", "x")
        with pytest.raises(ToolError, match="holds secrets"):
            await file_tools.edit_file(root, f"sub/{name}", "TOKEN", "X")
    listed = (await file_tools.glob(root, "**/*")).splitlines()
    assert sorted(Path(p).name for p in listed if p.startswith("sub/") and not p.endswith("/")) == sorted(NOT_SECRETS)
    found = (await file_tools.grep(root, "ghp_", secrets=SHAPES)).splitlines()
    assert sorted(Path(line.split(":", 1)[0]).name for line in found) == sorted(NOT_SECRETS)


def test_url_credentials_are_masked() -> None:
    assert (
        mask_url_credentials("url = https://user:tok3n@github.com/a/b.git")
        == "url = https://«masked»@github.com/a/b.git"
    )
    assert (
        mask_url_credentials("https://x0TokenValue123@host/r and http://a:b@h:8080/p")
        == "https://«masked»@host/r and http://«masked»@h:8080/p"
    )
    assert mask_url_credentials("ssh://git@github.com/o/r.git") == "ssh://git@github.com/o/r.git", "a user, no token"
    assert (
        mask_url_credentials("see https://github.com/a/b and mail me@host")
        == "see https://github.com/a/b and mail me@host"
    )


async def test_git_metadata_is_masked_on_read_and_refused_on_write(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text('[remote "origin"]\n\turl = https://me:s3cret@example.com/r.git\n')
    shown = await file_tools.read_file(tmp_path, ".git/config", secrets=SHAPES)
    assert "s3cret" not in shown and "https://«masked»@example.com/r.git" in shown
    grepped = await file_tools.grep(tmp_path, "url", path=".git", secrets=SHAPES)
    assert "s3cret" not in grepped and "«masked»@example.com" in grepped
    for path in (".git/config", ".git/hooks/pre-commit", ".GIT/hooks/x", "sub/.git"):
        with pytest.raises(ToolError, match="git metadata"):
            await file_tools.write_file(tmp_path, path, "x")
    with pytest.raises(ToolError, match="git metadata"):
        await file_tools.edit_file(tmp_path, ".git/config", "url", "x")
