"""The repository's instructions for agents (agents/work/repo_rules.py) and standing notes' bounds
(agents/work/standing.py), on real git repositories and a real store."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.core.errors import ToolError
from agents.core.models import Caller
from agents.core.settings import Settings
from agents.store.database import Store
from agents.store.standing import StandingNote
from agents.work.repo_rules import MAX_IMPORTS, FolderRules, RepoRules, resolve_import
from agents.work.standing import Notes
from agents.workspaces.folders import Workspaces
from tests.conftest import git, make_repo
from tests.support.notifiers import NoChat


def test_an_import_resolves_inside_the_repository_only() -> None:
    assert resolve_import("CLAUDE.md", "docs/style.md") == "docs/style.md"
    assert resolve_import("pkg/CLAUDE.md", "../docs/a.md") == "docs/a.md"
    assert resolve_import("pkg/CLAUDE.md", "../../x.md") is None
    assert resolve_import("CLAUDE.md", "/etc/passwd") is None
    assert resolve_import("CLAUDE.md", "~/.claude/notes.md") is None
    assert resolve_import("CLAUDE.md", "docs/../../x.md") is None


async def test_read_at_the_base_commit_capped_with_the_cut_named_and_cached(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"AGENTS.md": "A" * 3000 + "\n", "pkg/AGENTS.md": "PKG\n", "pkg/m.py": "x\n"})
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "AGENTS.md").write_text("CHANGED AFTER THE BASE\n")
    git(repo, "commit", "-qam", "later")
    rules = RepoRules(max_chars=1000)
    found = await rules.for_task(repo, base, "fix pkg/m.py")
    assert "CHANGED AFTER" not in found.text and "A" * 900 in found.text
    assert "Cut to fit (read them with read_file): AGENTS.md (2,000 of 3,000 characters)" in found.text
    assert "pkg/AGENTS.md" in found.text and found.shown_agents == {"", "pkg"}
    git(repo, "update-ref", "-d", "refs/heads/main")  # the commit is still in the object store; the cache answers
    (repo / ".git" / "objects").rename(repo / ".git" / "objects-gone")
    again = await rules.for_task(repo, base, "fix pkg/m.py")
    assert again.text == found.text, "cached per commit: git was not asked again"


async def test_an_import_of_a_credential_file_is_never_shown_and_dotted_paths_are_found(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "r",
        {
            "CLAUDE.md": "Read @.env and @config/.env.production first.\n",
            ".env": "API_TOKEN=committed-secret-4711\n",
            "config/.env.production": "DB=prod-secret-4712\n",
            ".github/workflows/AGENTS.md": "CI-RULE\n",
            ".github/workflows/ci.yml": "on: push\n",
        },
    )
    found = await RepoRules(10_000).for_task(
        repo, git(repo, "rev-parse", "HEAD").strip(), "fix .github/workflows/ci.yml."
    )
    assert "committed-secret-4711" not in found.text and "prod-secret-4712" not in found.text
    assert "@.env (in CLAUDE.md) is a credential file: never shown." in found.text
    assert "CI-RULE" in found.text, "a path starting with a dot, ending a sentence"


async def test_imports_are_bounded_in_count_and_depth_and_everything_counts_against_the_cap(tmp_path: Path) -> None:
    chain = {f"docs/d{i}.md": f"D{i}-RULE @d{i + 1}.md\n" for i in range(10)}  # imports ten deep
    repo = make_repo(tmp_path / "r", {**chain, "CLAUDE.md": "ROOT @docs/d0.md\n"})
    found = await RepoRules(100_000).for_task(repo, git(repo, "rev-parse", "HEAD").strip(), "tidy")
    assert "D3-RULE" in found.text and "D4-RULE" not in found.text, "imports of imports: MAX_IMPORT_DEPTH deep"
    assert "is imported too deeply" in found.text

    files = {f"more/m{i}.md": f"M{i}-RULE @n{i}.md\n" for i in range(40)}  # forty files, each importing one
    files |= {f"more/n{i}.md": f"N{i}-RULE\n" for i in range(40)}
    files["CLAUDE.md"] = "ROOT " + " ".join(f"@more/m{i}.md" for i in range(40)) + "\n"
    repo = make_repo(tmp_path / "wide", files)
    found = await RepoRules(100_000).for_task(repo, git(repo, "rev-parse", "HEAD").strip(), "tidy")
    shown = sum(f"M{i}-RULE" in found.text for i in range(40)) + sum(f"N{i}-RULE" in found.text for i in range(40))
    assert shown == MAX_IMPORTS, "MAX_IMPORTS followed in all, over every file and depth"
    assert "CLAUDE.md has more @imports than are followed" in found.text

    many = " ".join(f"@{'x' * 300}/{i}.md" for i in range(700))  # long unresolvable names: notes are bounded too
    repo2 = make_repo(tmp_path / "r2", {"CLAUDE.md": "TOP\n" + many, "AGENTS.md": "A-RULE\n" * 10})
    small = await RepoRules(1000).for_task(repo2, git(repo2, "rev-parse", "HEAD").strip(), "tidy")
    body = small.text.split("the root one.\n\n", 1)[1]
    assert len(body) < 1000 + 600, f"{len(body):,} characters past the heading against a cap of 1,000"
    assert "Cut to fit" in body


def test_a_folder_with_its_own_agents_md_is_named_once() -> None:
    rules = FolderRules(["", "web", "web/admin"], {""})
    assert rules.note_for("README.md") is None
    assert "web/admin/AGENTS.md" in (rules.note_for("web/admin/page.html") or "")
    assert rules.note_for("web/admin/other.html") is None
    assert "web/AGENTS.md" in (rules.note_for("web") or "")
    assert rules.note_for("web/x.css") is None


@pytest.fixture
async def notes(tmp_path: Path):
    """Notes of owner 1 and member 2 (two notes each at most, of 40 characters), with workspace `site` and the bot's
    own code as `self`."""
    (tmp_path / "ws" / "site").mkdir(parents=True)
    bot = make_repo(tmp_path / "bot", {"bot.py": "x\n"})
    settings = Settings(
        _env_file=None,
        telegram_bot_token="1:x",
        anthropic_api_key="k",
        allowed_user_ids="1,2",
        owner_user_ids="1",
        workspace_path=tmp_path / "ws",
        bot_repository=bot,
        notes_max_per_user=2,
        note_max_chars=40,
    )
    store = await Store.open(tmp_path / "db.sqlite")
    yield Notes(settings, store, Workspaces(settings.paths.workspace_path, bot), NoChat())
    await store.close()


async def test_notes_are_bounded_and_members_forget_only_their_own(notes: Notes) -> None:
    owner, member = Caller(chat_id=1, user_id=1, user_name="olga"), Caller(chat_id=2, user_id=2, user_name="mia")
    assert "note #1 (in site)" in await notes.remember(owner, "in site we use pnpm", "Site")
    with pytest.raises(ToolError, match="at most 40 characters"):
        await notes.remember(member, "x" * 41)
    await notes.remember(member, "answer me in German")
    await notes.remember(member, "never edit migrations")
    with pytest.raises(ToolError, match="already keeps 2 standing notes"):
        await notes.remember(member, "one more")
    assert [n.id for n in await notes.applying(2, "site")] == [1, 2, 3], "an owner's note applies to a member too"
    assert [n.id for n in await notes.applying(1, "site")] == [1], "a member's note applies to their own requests"
    with pytest.raises(ToolError, match="only its author or an owner"):
        await notes.forget(member, 1)
    assert (await notes.forget(owner, 2)).startswith("Note #2 is forgotten")
    with pytest.raises(ToolError, match="no note #2"):
        await notes.forget(member, 2)


async def test_a_member_asking_for_an_owners_note_about_self_by_number_learns_nothing_of_it(notes: Notes) -> None:
    """An owner's note about the bot's own code is hidden from members (their /notes, their turns): forgetting it by
    number answers a member as a number with no note does, without its author's name."""
    hidden = await notes.table.add(StandingNote(user_id=1, user_name="@boss", workspace="self", text="hooks"))
    owner, member = Caller(chat_id=1, user_id=1), Caller(chat_id=2, user_id=2, user_name="@mia")
    with pytest.raises(ToolError) as probed:
        await notes.forget(member, hidden.id or 0)
    assert str(probed.value) == f"there is no note #{hidden.id}", probed.value
    assert (await notes.forget(owner, hidden.id or 0)).startswith(f"Note #{hidden.id} is forgotten")


async def test_many_nested_instruction_files_are_named_not_all_read(tmp_path: Path) -> None:
    """A monorepo with an AGENTS.md per package and a task naming them all: the files past the cap (or past
    MAX_SECTIONS) are named as not shown, and never read (a read is a git process and the whole file)."""
    files = {f"pkg{i}/AGENTS.md": f"PKG{i}-RULE " + "x" * 2000 + "\n" for i in range(80)}
    files |= {f"pkg{i}/x.py": "x = 1\n" for i in range(80)}
    repo = make_repo(tmp_path / "mono", {**files, "README.md": "# mono\n"})
    rules = RepoRules(4000)
    reads: list[str] = []
    read = rules._read

    async def counted(repo: Path, blob: str) -> str | None:
        reads.append(blob)
        return await read(repo, blob)

    rules._read = counted  # type: ignore[method-assign]  # a spy around the real read: each call counted
    about = "update " + " ".join(f"pkg{i}/x.py" for i in range(80))
    found = await rules.for_task(repo, git(repo, "rev-parse", "HEAD").strip(), about)
    assert len(reads) <= 3, f"{len(reads)} files read to show {len(found.text):,} characters"
    assert "PKG0-RULE" in found.text and "Not shown, for want of room" in found.text and "and 68 more." in found.text
