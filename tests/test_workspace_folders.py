"""Workspace discovery, tolerant name resolution and path confinement."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.core.secrets_filter import SecretsFilter
from agents.git.command import GitIdentity
from agents.tools.file_tools import ToolError, read_file
from agents.workspaces.creation import create_workspace
from agents.workspaces.folders import (
    OwnersOnly,
    PathOutsideWorkspace,
    Workspace,
    WorkspaceNotFound,
    Workspaces,
    confine,
)
from tests.conftest import git, make_repo
from tests.support.sandbox import SECRET_ENV, secret_environment  # noqa: F401  (fixture)


@pytest.fixture
def spaces(tmp_path: Path) -> Workspaces:
    root = tmp_path / "workspaces"
    for name in ("group-therapy", "budget-app", "budget-api", "weather_station", "Notes", ".hidden", "photo-sorter"):
        (root / name).mkdir(parents=True)
    (root / "README.txt").write_text("not a workspace")
    bot = tmp_path / "agentlab-src"
    bot.mkdir()
    return Workspaces(root, bot)


def test_all_lists_folders_sorted_plus_self_skipping_hidden_and_files(spaces: Workspaces) -> None:
    names = [w.name for w in spaces.all()]
    assert names == ["budget-api", "budget-app", "group-therapy", "Notes", "photo-sorter", "self", "weather_station"]
    assert all(w.path.is_absolute() and w.path == w.path.resolve() for w in spaces.all())


def test_all_rescans_each_call(spaces: Workspaces) -> None:
    assert "fresh" not in [w.name for w in spaces.all()]
    (spaces.root / "fresh").mkdir()
    assert "fresh" in [w.name for w in spaces.all()]
    assert spaces.resolve("fresh").name == "fresh"


def test_a_settled_root_is_scanned_once_and_again_when_a_project_comes_or_goes(
    spaces: Workspaces, monkeypatch: pytest.MonkeyPatch
) -> None:
    scans = []
    real_scandir = os.scandir
    monkeypatch.setattr("agents.workspaces.folders.os.scandir", lambda path: scans.append(path) or real_scandir(path))
    long_ago = spaces.root.stat().st_mtime - 60
    os.utime(spaces.root, (long_ago, long_ago))  # settled: a scan of it is kept
    first = spaces.all()
    assert spaces.all() == first and spaces.resolve("notes").name == "Notes" and len(scans) == 1
    (spaces.root / "fresh").mkdir()  # the root's mtime moves
    assert "fresh" in [w.name for w in spaces.all()] and len(scans) == 2
    (spaces.root / "fresh").rmdir()
    assert "fresh" not in [w.name for w in spaces.all()]


def test_without_bot_repository_there_is_no_self(tmp_path: Path) -> None:
    (tmp_path / "alpha").mkdir()
    spaces = Workspaces(tmp_path, None)
    assert [w.name for w in spaces.all()] == ["alpha"]
    with pytest.raises(WorkspaceNotFound, match="BOT_REPOSITORY"):
        spaces.resolve("self")


def test_missing_root_yields_only_self(tmp_path: Path) -> None:
    spaces = Workspaces(tmp_path / "nope", tmp_path)
    assert spaces.all() == [Workspace("self", tmp_path.resolve(), is_self=True)]


@pytest.mark.parametrize(
    ("spoken", "expected"),
    [
        ("group-therapy", "group-therapy"),
        ("group therapy", "group-therapy"),
        ("grouptherapy", "group-therapy"),
        ("Group-Therapy", "group-therapy"),
        ("  GROUP_THERAPY ", "group-therapy"),
        ("group therapy project", "group-therapy"),
        ("the group therapy repo", "group-therapy"),
        ("Group Therapy folder.", "group-therapy"),
        ("groop therapy", "group-therapy"),
        ("group therapie", "group-therapy"),
        ("weather station", "weather_station"),
        ("notes", "Notes"),
        ("photo", "photo-sorter"),
        ("sorter", "photo-sorter"),
        ("budget app", "budget-app"),
        ("budget api", "budget-api"),
        ("self", "self"),
        ("Self", "self"),
        ("yourself", "self"),
        ("your code", "self"),
        ("the bot", "self"),
        ("agentlab", "self"),
    ],
)
def test_resolution_table(spaces: Workspaces, spoken: str, expected: str) -> None:
    workspace = spaces.resolve(spoken)
    assert workspace.name == expected
    if expected == "self":
        assert workspace.path == spaces.bot_repository.resolve()
    else:
        assert workspace.path == (spaces.root / expected).resolve()


@pytest.mark.parametrize("ambiguous", ["budget", "budget project", "budgt ap"])
def test_ambiguous_names_raise_listing_the_candidates(spaces: Workspaces, ambiguous: str) -> None:
    with pytest.raises(WorkspaceNotFound) as caught:
        spaces.resolve(ambiguous)
    message = str(caught.value)
    assert "ambiguous" in message
    assert "budget-app" in message and "budget-api" in message


@pytest.mark.parametrize("unknown", ["spaceship", "quantum compiler", "zz", ""])
def test_unknown_names_raise_listing_available(spaces: Workspaces, unknown: str) -> None:
    with pytest.raises(WorkspaceNotFound) as caught:
        spaces.resolve(unknown)
    message = str(caught.value)
    for name in ("group-therapy", "budget-app", "weather_station", "self"):
        assert name in message
    assert ".hidden" not in message


def test_unknown_name_mentions_closest(spaces: Workspaces) -> None:
    with pytest.raises(WorkspaceNotFound, match="Closest: weather_station"):
        spaces.resolve("weatherbot")


def test_workspace_not_found_is_a_tool_error(spaces: Workspaces) -> None:
    with pytest.raises(ToolError):
        spaces.resolve("spaceship")


@pytest.mark.parametrize("name", ["../", "..", "../etc", "group-therapy/../../x", "/etc", "a/b", ".hidden", "..\\x"])
def test_path_like_and_hidden_names_never_resolve_outside(spaces: Workspaces, name: str) -> None:
    with pytest.raises(WorkspaceNotFound):
        spaces.resolve(name)


def test_resolution_is_deterministic(spaces: Workspaces) -> None:
    results = {spaces.resolve("groop therapy").name for _ in range(20)}
    assert results == {"group-therapy"}


def test_exact_folder_beats_noise_stripped_sibling(tmp_path: Path) -> None:
    for name in ("foo", "foo-project"):
        (tmp_path / name).mkdir()
    spaces = Workspaces(tmp_path, None)
    assert spaces.resolve("foo").name == "foo"
    assert spaces.resolve("foo project").name == "foo-project"


def test_symlinked_project_folder_counts(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere" / "real-project"
    real.mkdir(parents=True)
    root = tmp_path / "root"
    root.mkdir()
    (root / "linked").symlink_to(real)
    spaces = Workspaces(root, None)
    assert spaces.resolve("linked").path == real.resolve()


# --- confine ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (tmp_path / "outside.txt").write_text("secret")
    (tmp_path / "outside_dir").mkdir()
    (tmp_path / "outside_dir" / "s.txt").write_text("secret")
    return root


@pytest.mark.parametrize(
    "relative", ["", ".", "./", "src", "src/pkg/mod.py", "src/../src/pkg", "new/dir/file.txt", "src/./pkg"]
)
def test_confine_accepts_paths_inside(ws: Path, relative: str) -> None:
    target = confine(ws, relative)
    assert target == ws.resolve() or target.is_relative_to(ws.resolve())
    assert target == (ws / relative).resolve()


@pytest.mark.parametrize("relative", ["..", "../outside.txt", "src/../../outside.txt", "src/pkg/../../../x", "../ws2"])
def test_confine_refuses_dotdot_escapes(ws: Path, relative: str) -> None:
    with pytest.raises(PathOutsideWorkspace) as caught:
        confine(ws, relative)
    assert "outside the workspace" in str(caught.value)
    assert relative in str(caught.value)


@pytest.mark.parametrize("relative", ["/etc/passwd", "/", "~/x", "~"])
def test_confine_refuses_absolute_paths(ws: Path, relative: str) -> None:
    with pytest.raises(PathOutsideWorkspace, match="relative to the workspace"):
        confine(ws, relative)


def test_confine_refuses_absolute_path_even_inside_and_suggests_relative(ws: Path) -> None:
    with pytest.raises(PathOutsideWorkspace, match="'src/pkg/mod.py'"):
        confine(ws, str(ws / "src" / "pkg" / "mod.py"))


def test_confine_refuses_symlinked_file_pointing_out(ws: Path, tmp_path: Path) -> None:
    (ws / "leak.txt").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(PathOutsideWorkspace, match="symlink"):
        confine(ws, "leak.txt")


def test_confine_refuses_symlinked_dir_pointing_out(ws: Path, tmp_path: Path) -> None:
    (ws / "src" / "linkdir").symlink_to(tmp_path / "outside_dir")
    for relative in ("src/linkdir", "src/linkdir/s.txt", "src/linkdir/new.txt"):
        with pytest.raises(PathOutsideWorkspace):
            confine(ws, relative)


def test_confine_refuses_dangling_symlink_pointing_out(ws: Path, tmp_path: Path) -> None:
    (ws / "dangling").symlink_to(tmp_path / "does-not-exist-yet")
    with pytest.raises(PathOutsideWorkspace):
        confine(ws, "dangling")


def test_confine_allows_symlink_inside(ws: Path) -> None:
    (ws / "alias.py").symlink_to(ws / "src" / "pkg" / "mod.py")
    (ws / "pkglink").symlink_to(ws / "src" / "pkg")
    assert confine(ws, "alias.py") == (ws / "src" / "pkg" / "mod.py").resolve()
    assert confine(ws, "pkglink/mod.py") == (ws / "src" / "pkg" / "mod.py").resolve()


def test_confine_when_root_itself_is_a_symlink(ws: Path, tmp_path: Path) -> None:
    link_root = tmp_path / "root-link"
    link_root.symlink_to(ws)
    assert confine(link_root, "src/pkg/mod.py") == (ws / "src" / "pkg" / "mod.py").resolve()
    with pytest.raises(PathOutsideWorkspace):
        confine(link_root, "../outside.txt")


def test_confine_refuses_symlink_loop_and_nul(ws: Path) -> None:
    os.symlink("loop_b", ws / "loop_a")
    os.symlink("loop_a", ws / "loop_b")
    try:
        target = confine(ws, "loop_a")
    except PathOutsideWorkspace:
        pass  # Python 3.11 reports the loop
    else:  # newer Pythons leave the loop unresolved inside the root
        assert target.is_relative_to(ws.resolve())
    with pytest.raises(PathOutsideWorkspace):
        confine(ws, "a\x00b")


def test_a_link_after_a_symlink_loop_cannot_lead_outside(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("s")
    (root / "loop").symlink_to(root / "loop")
    (root / "link_out").symlink_to(tmp_path / "outside")
    with pytest.raises(PathOutsideWorkspace):
        confine(root, "loop/../link_out/secret.txt")


def test_path_outside_is_a_tool_error(ws: Path) -> None:
    with pytest.raises(ToolError):
        confine(ws, "../outside.txt")


# --- property: whatever the model sends, confine stays inside ---------------------------------------------------------

_SEGMENTS = st.sampled_from(["..", ".", "", "a", "b", "link_out", "link_in", "loop", "~", "x..y", "..."])


@pytest.fixture(scope="module")
def maze(tmp_path_factory: pytest.TempPathFactory) -> Path:
    top = tmp_path_factory.mktemp("maze")
    root = top / "root"
    (root / "a" / "b").mkdir(parents=True)
    (top / "outside").mkdir()
    (root / "link_out").symlink_to(top / "outside")
    (root / "a" / "link_out").symlink_to(top)
    (root / "a" / "link_in").symlink_to(root / "a" / "b")
    (root / "b").symlink_to(root / "a")
    (root / "loop").symlink_to(root / "loop")
    return root


@settings(max_examples=100, deadline=None)
@given(segments=st.lists(_SEGMENTS, min_size=1, max_size=6), absolute=st.booleans())
def test_confine_never_returns_a_path_outside(maze: Path, segments: list[str], absolute: bool) -> None:
    relative = ("/" if absolute else "") + "/".join(segments)
    try:
        target = confine(maze, relative)
    except PathOutsideWorkspace as err:
        assert str(err)  # always a readable message
        return
    assert not absolute
    base = maze.resolve()
    assert target == base or target.is_relative_to(base)
    assert target == target.resolve() or not target.exists()


def test_self_is_decided_by_folder_not_by_name(tmp_path: Path) -> None:
    bot = tmp_path / "bot"
    (bot / "workspaces" / "calc").mkdir(parents=True)  # WORKSPACE_PATH may live inside the bot's folder
    inside = Workspaces(bot / "workspaces", bot)
    assert [(w.name, w.is_self) for w in inside.all()] == [("calc", False), ("self", True)]
    root = tmp_path / "root"
    (root / "holder" / "agentlab").mkdir(parents=True)
    holder = Workspaces(root, root / "holder" / "agentlab")
    assert {w.name: w.is_self for w in holder.all()} == {"holder": True, "self": True}


def test_a_folder_whose_repository_is_the_bots_is_self(tmp_path: Path) -> None:
    """Git run in a folder with no `.git` of its own inside the bot's checkout works on the bot's repository, whether
    WORKSPACE_PATH lies inside the checkout or a link from outside points into it, and so does git run in a linked
    worktree of the bot's repository; a repository of its own (a submodule's too) is only itself."""
    bot = tmp_path / "bot"
    (bot / ".git").mkdir(parents=True)
    (bot / "docs").mkdir()
    (bot / "workspaces" / "notes").mkdir(parents=True)
    (bot / "workspaces" / "own" / ".git").mkdir(parents=True)
    inside = Workspaces(bot / "workspaces", bot)
    assert {w.name: w.is_self for w in inside.all()} == {"notes": True, "own": False, "self": True}
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "docs").symlink_to(bot / "docs")
    (outside / "calc" / ".git").mkdir(parents=True)
    (bot / ".git" / "worktrees" / "tools").mkdir(parents=True)  # a linked worktree of the bot's repository
    (bot / ".git" / "worktrees" / "tools" / "commondir").write_text("../..\n")
    (outside / "tools").mkdir()
    (outside / "tools" / ".git").write_text(f"gitdir: {bot / '.git' / 'worktrees' / 'tools'}\n")
    (bot / ".git" / "modules" / "lib").mkdir(parents=True)  # a submodule's repository: another one
    (outside / "lib").mkdir()
    (outside / "lib" / ".git").write_text(f"gitdir: {bot / '.git' / 'modules' / 'lib'}\n")
    linked = Workspaces(outside, bot)
    assert {w.name: w.is_self for w in linked.all()} == {
        "calc": False,
        "docs": True,
        "lib": False,
        "self": True,
        "tools": True,
    }


def test_a_folder_that_loses_its_own_repository_is_the_bots_at_once(tmp_path: Path) -> None:
    """The folder list is kept until WORKSPACE_PATH changes; removing a folder's `.git` changes only the folder, and
    git there then works on the bot's repository: the next look-up says so."""
    bot = tmp_path / "bot"
    (bot / ".git").mkdir(parents=True)
    (bot / "workspaces" / "own" / ".git").mkdir(parents=True)
    workspaces = Workspaces(bot / "workspaces", bot)
    os.utime(bot / "workspaces", ns=(0, 0))  # an old folder: its listing is kept
    assert not workspaces.resolve("own").is_self
    (bot / "workspaces" / "own" / ".git").rmdir()
    assert workspaces.resolve("own").is_self
    with pytest.raises(OwnersOnly):
        workspaces.reach("own", owner=False)


async def test_a_workspace_whose_git_init_failed_leaves_no_folder_and_the_name_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Half made, the folder was no repository and took the name: the next try was refused ("already exists").
    root = tmp_path / "workspaces"
    root.mkdir()
    spaces = Workspaces(root, None)
    broken = tmp_path / "broken-bin"
    broken.mkdir()
    (broken / "git").write_text("#!/bin/sh\necho 'fatal: cannot init (the test'\"'\"'s)' >&2\nexit 128\n")
    (broken / "git").chmod(0o755)
    real_path = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"{broken}{os.pathsep}{real_path}")
    with pytest.raises(ToolError, match="git init failed in notes: fatal: cannot init"):
        await create_workspace(spaces, "notes", GitIdentity())
    assert not (root / "notes").exists()
    monkeypatch.setenv("PATH", real_path)
    made = await create_workspace(spaces, "notes", GitIdentity())
    assert made.path == (root / "notes").resolve() and (made.path / ".git").is_dir()


async def test_a_new_workspaces_git_commands_get_none_of_the_bots_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secret_environment: None
) -> None:
    """`git init` of a workspace the chat makes, like every other git command of the bot's, runs without the keys
    the bot may hold in its environment."""
    root = tmp_path / "workspaces"
    root.mkdir()
    recording = tmp_path / "recording-bin"
    recording.mkdir()
    seen = tmp_path / "environments"
    (recording / "git").write_text(
        f'#!/bin/sh\necho "$1 $2" >> {seen}; env >> {seen}\nexec {shutil.which("git")} "$@"\n'
    )
    (recording / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{recording}{os.pathsep}{os.environ['PATH']}")
    await create_workspace(Workspaces(root, None), "notes", GitIdentity())
    recorded = seen.read_text()
    assert "init -q" in recorded, recorded
    assert not any(value in recorded for value in SECRET_ENV.values()), recorded


@pytest.mark.parametrize("named", [None, "", "group therapy", "Group-Therapy", "grouptherapy"])
def test_a_confined_request_reaches_its_own_workspace_by_any_spelling(spaces: Workspaces, named: str | None) -> None:
    assert spaces.confined("group-therapy", named).name == "group-therapy"


@pytest.mark.parametrize("named", ["budget-app", "budget", "self", "no-such-thing", "../group-therapy"])
def test_a_confined_request_is_refused_any_other_workspace_without_learning_which_exist(
    spaces: Workspaces, named: str
) -> None:
    with pytest.raises(ToolError) as refused:
        spaces.confined("group-therapy", named)
    said = str(refused.value)
    assert "works in the workspace group-therapy only" in said
    for other in ("budget", "weather", "Notes", "photo", "self"):
        assert other not in said


def test_a_confined_request_whose_workspace_is_gone_learns_no_other_name(spaces: Workspaces) -> None:
    (spaces.root / "group-therapy").rmdir()
    with pytest.raises(ToolError) as refused:
        spaces.confined("group-therapy", "budget-app")
    assert str(refused.value) == "the workspace group-therapy is gone"


# --- the bot's own folders, `self`'s names and stored names -----------------------------------------------------------


def private_folders(data: Path) -> tuple[Path, Path]:
    """The data folder and the task worktrees beside it, as `PathSettings.private_dirs` has them by default."""
    return data, data.parent / f"{data.name}-worktrees"


@pytest.mark.parametrize("how", ["inside", "linked", "holding"])
def test_the_bots_data_and_worktrees_folders_are_never_a_workspace(tmp_path: Path, how: str) -> None:
    """Every chat's database and task worktrees under WORKSPACE_PATH, or linked there, or inside a folder there,
    would be a workspace any member's look-ups read whole."""
    root = tmp_path / "workspaces"
    (root / "calc").mkdir(parents=True)
    data = {"inside": root / "agentlab-data", "linked": tmp_path / "var" / "data", "holding": root / "app" / "data"}[
        how
    ]
    private = private_folders(data)
    for folder in private:
        folder.mkdir(parents=True)
    if how == "linked":
        (root / "logs").symlink_to(private[0])
        (root / "trees").symlink_to(private[1])
    spaces = Workspaces(root, None, private)
    # a folder holding the data folder stays a workspace (as the bot's checkout holds `data/`): the file tools hide
    # the data folder inside it
    assert [w.name for w in spaces.all()] == (["app", "calc"] if how == "holding" else ["calc"])
    for name in ("agentlab-data", "agentlab-data-worktrees", "logs", "trees"):
        with pytest.raises(WorkspaceNotFound):
            spaces.resolve(name)


async def test_workspaces_inside_the_data_folder_are_workspaces_still(tmp_path: Path) -> None:
    """DATABASE_PATH=/srv/bot/agentlab.db beside WORKSPACE_PATH=/srv/bot/workspaces: the workspaces folder lies in the
    data folder. Its workspaces are listed and read as any (a link out of it into the data folder is not)."""
    data = tmp_path / "bot"
    root = data / "workspaces"
    make_repo(root / "calc", {"calc.py": "def add(a, b):\n    return a + b\n"})
    (data / "agentlab.db").write_text("SECRET-ROW")
    (data / "attachments").mkdir()
    (root / "inbox").symlink_to(data / "attachments")
    spaces = Workspaces(root, None, private_folders(data))
    assert [w.name for w in spaces.all()] == ["calc"]
    calc = spaces.resolve("calc").path
    assert "return a + b" in await read_file(calc, "calc.py", secrets=SecretsFilter(), hidden=private_folders(data))


async def test_create_workspace_never_makes_the_bots_worktrees_folder_a_workspace(tmp_path: Path) -> None:
    """The bot run from the projects folder: its worktrees folder is made later, beside the data folder. Created as a
    workspace, every later task's worktree would land in a workspace."""
    root = tmp_path / "projects"
    (root / "data").mkdir(parents=True)
    spaces = Workspaces(root, None, private_folders(root / "data"))
    for name in ("data-worktrees", "data"):
        with pytest.raises(ToolError, match="the bot's own data folder"):
            await create_workspace(spaces, name, GitIdentity())
    assert sorted(p.name for p in root.iterdir()) == ["data"]


@pytest.mark.parametrize("shape", ["link-to-a-worktrees-git-folder", "git-folder-with-commondir"])
def test_a_git_folder_whose_commondir_is_the_bots_repository_is_self(tmp_path: Path, shape: str) -> None:
    """Git follows a `commondir` in a `.git` folder (or a link to a linked worktree's own git folder) as in a
    worktree's: git there works on the bot's repository, so a task there would commit to the bot's code."""
    bot = make_repo(tmp_path / "agentlab", {"bot.py": "TOKEN = 'x'\n"})
    git(bot, "worktree", "add", "-q", str(tmp_path / "bot-wt"), "-b", "wt")
    folder = tmp_path / "workspaces" / "notes"
    folder.mkdir(parents=True)
    if shape == "link-to-a-worktrees-git-folder":
        (folder / ".git").symlink_to(bot / ".git" / "worktrees" / "bot-wt")
    else:
        (folder / ".git").mkdir()
        (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        (folder / ".git" / "commondir").write_text(f"{bot / '.git'}\n")
    common = git(folder, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()
    assert Path(common).resolve() == (bot / ".git").resolve(), "git there works on the bot's repository"
    assert Workspaces(tmp_path / "workspaces", bot).resolve("notes").is_self


@pytest.mark.parametrize(
    ("new", "taken_for"),
    [("GroupTherapy", "group-therapy"), ("group_therapy", "group-therapy"), ("your-code", "self"), ("the-bot", "self")],
)
async def test_create_workspace_refuses_a_name_taken_for_another_workspace(
    spaces: Workspaces, new: str, taken_for: str
) -> None:
    """Names are matched ignoring case and separators (and `self` by its spoken names): such a new folder would take
    over, or make ambiguous, the names that meant the existing one."""
    with pytest.raises(ToolError, match=f"would be taken for the workspace {taken_for}"):
        await create_workspace(spaces, new, GitIdentity())
    assert not (spaces.root / new.lower()).exists()


@pytest.mark.parametrize("folder", ["Self", "SELF", "s-elf"])
def test_a_folder_named_self_in_any_spelling_never_takes_selfs_name(spaces: Workspaces, folder: str) -> None:
    (spaces.root / folder).mkdir()
    assert folder not in [w.name for w in spaces.all()]
    assert spaces.resolve(folder).is_self and spaces.resolve("self").is_self


async def test_create_workspace_over_a_dangling_link_is_refused_and_makes_nothing_where_it_points(
    tmp_path: Path,
) -> None:
    root = tmp_path / "workspaces"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere" / "projects"
    (root / "notes").symlink_to(elsewhere)
    with pytest.raises(ToolError, match="taken in the workspaces folder"):
        await create_workspace(Workspaces(root, None), "notes", GitIdentity())
    assert not elsewhere.exists() and not elsewhere.parent.exists()


def test_a_stored_name_is_resolved_exactly_never_tolerantly(spaces: Workspaces) -> None:
    """A binding or a task keeps the name it was given; its folder deleted, the tolerant matching would take it for
    another workspace (`budget-app` gone: `budget-api`) or for the bot's own code (`bot`)."""
    assert spaces.stored("group-therapy").name == "group-therapy"
    assert spaces.stored("self").is_self
    (spaces.root / "budget-app").rmdir()
    (spaces.root / "bot").mkdir()
    assert spaces.stored("bot").path == (spaces.root / "bot").resolve()
    (spaces.root / "bot").rmdir()
    for gone in ("budget-app", "bot", "Group-Therapy", "notes"):
        with pytest.raises(WorkspaceNotFound, match=f"the workspace {gone} is gone"):
            spaces.stored(gone)


@pytest.mark.parametrize(
    "name", ["..", "../x", "a/b", ".git", ".hidden", "x" * 64, "ѕelf", "self", " Self ", "a\x00b", "-x"]
)
async def test_create_workspace_refuses_names_that_are_no_plain_folder_name(tmp_path: Path, name: str) -> None:
    root = tmp_path / "workspaces"
    root.mkdir()
    with pytest.raises(ToolError):
        await create_workspace(Workspaces(root, tmp_path / "bot"), name, GitIdentity())
    assert list(root.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["workspaces"]
