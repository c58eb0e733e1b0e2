"""The confined file tools: read, write, edit, glob, grep."""

from __future__ import annotations

import functools
import stat
from pathlib import Path

import pytest

from agents.core.secrets_filter import SecretsFilter
from agents.tools import file_tools as ft
from agents.tools.file_tools import ToolError
from agents.workspaces.folders import PathOutsideWorkspace

# the reading tools show text, so each takes the process's output filter; an empty one here
read_file = functools.partial(ft.read_file, secrets=SecretsFilter())
grep = functools.partial(ft.grep, secrets=SecretsFilter())


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("".join(f"line {n}\n" for n in range(1, 21)))
    (root / "src" / "main.py").write_text("import pkg\n\ndef main():\n    return 42\n")
    (root / "README.md").write_text("# Title\nhello world\n")
    (tmp_path / "outside.txt").write_text("TOP SECRET\n")
    (tmp_path / "outside_dir").mkdir()
    (tmp_path / "outside_dir" / "s.txt").write_text("TOP SECRET\n")
    return root


def temp_leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith((".tmp", ".agentlab-part"))]


# --- read_file ------------------------------------------------------------------------------------------------------


async def test_read_numbers_lines(ws: Path) -> None:
    out = await read_file(ws, "src/main.py")
    assert out.split("\n") == ["     1\timport pkg", "     2\t", "     3\tdef main():", "     4\t    return 42"]


async def test_read_ranges_are_one_based_inclusive(ws: Path) -> None:
    out = await read_file(ws, "src/pkg/mod.py", start_line=5, end_line=7)
    assert out.split("\n") == ["     5\tline 5", "     6\tline 6", "     7\tline 7"]
    assert (await read_file(ws, "src/pkg/mod.py", start_line=20)).split("\n") == ["    20\tline 20"]
    assert (await read_file(ws, "src/pkg/mod.py", end_line=2)).split("\n") == ["     1\tline 1", "     2\tline 2"]


async def test_read_range_past_end(ws: Path) -> None:
    out = await read_file(ws, "src/pkg/mod.py", start_line=19, end_line=99)
    assert out.split("\n")[:2] == ["    19\tline 19", "    20\tline 20"]
    assert "ends at line 20" in out
    with pytest.raises(ToolError, match="past the end.*20 lines"):
        await read_file(ws, "src/pkg/mod.py", start_line=21)


@pytest.mark.parametrize(("start", "end"), [(0, None), (-3, 4), (5, 4)])
async def test_read_bad_ranges(ws: Path, start: int | None, end: int | None) -> None:
    with pytest.raises(ToolError):
        await read_file(ws, "src/pkg/mod.py", start_line=start, end_line=end)


async def test_read_strips_crlf_and_empty_file(ws: Path) -> None:
    (ws / "dos.txt").write_bytes(b"a\r\nb\r\n")
    assert await read_file(ws, "dos.txt") == "     1\ta\n     2\tb"
    (ws / "empty.txt").write_bytes(b"")
    assert "empty" in await read_file(ws, "empty.txt")


async def test_read_refuses_binary(ws: Path) -> None:
    (ws / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with pytest.raises(ToolError, match="binary"):
        await read_file(ws, "image.png")
    (ws / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    with pytest.raises(ToolError, match="not UTF-8"):
        await read_file(ws, "latin1.txt")


async def test_read_size_cap_returns_head_and_says_how_to_continue(ws: Path) -> None:
    (ws / "big.txt").write_text("".join(f"row {n:05d}\n" for n in range(1, 10_001)))  # 100,000 bytes
    out = await read_file(ws, "big.txt", max_bytes=1_000)
    lines = out.split("\n")
    assert lines[0] == "     1\trow 00001"
    assert lines[99] == "   100\trow 00100"
    assert lines[100].startswith("[truncated")
    assert "start_line=101" in out and "100,000 bytes" in out
    assert len(lines) == 101
    # the suggested continuation works, and a range is capped too
    more = await read_file(ws, "big.txt", start_line=101, max_bytes=1_000)
    assert more.split("\n")[0] == "   101\trow 00101"
    assert "start_line=201" in more


async def test_read_single_huge_line_is_cut(ws: Path) -> None:
    (ws / "min.js").write_text("é" * 5_000)  # 10,000 bytes, no newline, multi-byte characters
    out = await read_file(ws, "min.js", max_bytes=1_001)
    first, note = out.split("\n")
    assert first == "     1\t" + "é" * 500
    assert "cut short" in note


async def test_read_missing_file_lists_nearby_names(ws: Path) -> None:
    with pytest.raises(ToolError) as caught:
        await read_file(ws, "src/mian.py")
    message = str(caught.value)
    assert "No such file" in message and "main.py" in message and "pkg/" in message
    with pytest.raises(ToolError, match="README.md"):
        await read_file(ws, "nothing/here/at/all.txt")


async def test_read_directory_is_an_error(ws: Path) -> None:
    with pytest.raises(ToolError, match="directory"):
        await read_file(ws, "src")


@pytest.mark.parametrize("path", ["../outside.txt", "src/../../outside.txt", "/etc/passwd"])
async def test_read_refuses_outside(ws: Path, path: str) -> None:
    with pytest.raises(PathOutsideWorkspace):
        await read_file(ws, path)


async def test_read_refuses_symlinks_out_but_follows_symlinks_in(ws: Path, tmp_path: Path) -> None:
    (ws / "leak.txt").symlink_to(tmp_path / "outside.txt")
    (ws / "leakdir").symlink_to(tmp_path / "outside_dir")
    (ws / "alias.md").symlink_to(ws / "README.md")
    with pytest.raises(PathOutsideWorkspace):
        await read_file(ws, "leak.txt")
    with pytest.raises(PathOutsideWorkspace):
        await read_file(ws, "leakdir/s.txt")
    assert "hello world" in await read_file(ws, "alias.md")


# --- write_file -----------------------------------------------------------------------------------------------------


async def test_write_creates_parents_and_reports(ws: Path) -> None:
    out = await ft.write_file(ws, "new/deep/dir/file.txt", "héllo\n")
    assert out == "wrote 7 bytes to new/deep/dir/file.txt (created)"
    assert (ws / "new/deep/dir/file.txt").read_text() == "héllo\n"
    assert stat.S_IMODE((ws / "new/deep/dir/file.txt").stat().st_mode) == 0o644
    assert temp_leftovers(ws) == []


async def test_write_overwrites_atomically_keeping_mode(ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("old\n")
    script.chmod(0o755)
    inode_before = script.stat().st_ino
    out = await ft.write_file(ws, "run.sh", "#!/bin/sh\necho new\n")
    assert out == "wrote 19 bytes to run.sh (overwritten)"
    assert script.read_text() == "#!/bin/sh\necho new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert script.stat().st_ino != inode_before  # replaced via rename, never truncated in place
    assert temp_leftovers(ws) == []


async def test_write_failure_leaves_no_temp_file_and_old_content(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = ws / "README.md"

    def broken_rename(src: str, dst: str, **_dir_fds: int) -> None:  # the temporary file's rename over the name
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ft.os, "rename", broken_rename)
    with pytest.raises(ToolError, match="No space left"):
        await ft.write_file(ws, "README.md", "new content")
    assert target.read_text() == "# Title\nhello world\n"
    assert temp_leftovers(ws) == []


async def test_write_writes_through_symlink_inside(ws: Path) -> None:
    (ws / "alias.md").symlink_to(ws / "README.md")
    await ft.write_file(ws, "alias.md", "changed\n")
    assert (ws / "README.md").read_text() == "changed\n"
    assert (ws / "alias.md").is_symlink()


@pytest.mark.parametrize("path", ["../evil.txt", "/tmp/evil.txt", "src/../../evil.txt", "leak.txt", "leakdir/new.txt"])
async def test_write_refuses_outside(ws: Path, tmp_path: Path, path: str) -> None:
    (ws / "leak.txt").symlink_to(tmp_path / "outside.txt")
    (ws / "leakdir").symlink_to(tmp_path / "outside_dir")
    with pytest.raises(PathOutsideWorkspace):
        await ft.write_file(ws, path, "pwned")
    assert (tmp_path / "outside.txt").read_text() == "TOP SECRET\n"
    assert not (tmp_path / "evil.txt").exists()
    assert sorted(p.name for p in (tmp_path / "outside_dir").iterdir()) == ["s.txt"]


async def test_write_to_directory_or_under_a_file_is_an_error(ws: Path) -> None:
    with pytest.raises(ToolError, match="directory"):
        await ft.write_file(ws, "src", "x")
    with pytest.raises(ToolError, match="parent"):
        await ft.write_file(ws, "README.md/child.txt", "x")


# --- edit_file ------------------------------------------------------------------------------------------------------


async def test_edit_replaces_unique_match(ws: Path) -> None:
    out = await ft.edit_file(ws, "src/main.py", "    return 42\n", "    value = 41\n    return value + 1\n")
    assert "edited src/main.py" in out and "line 4" in out
    assert (ws / "src/main.py").read_text() == "import pkg\n\ndef main():\n    value = 41\n    return value + 1\n"
    assert temp_leftovers(ws) == []


async def test_edit_zero_matches_says_so_and_shows_closest_line(ws: Path) -> None:
    before = (ws / "src/main.py").read_text()
    with pytest.raises(ToolError) as caught:
        await ft.edit_file(ws, "src/main.py", "return 43", "return 44")
    message = str(caught.value)
    assert "not found" in message and "line 4" in message and "return 42" in message
    assert (ws / "src/main.py").read_text() == before


async def test_edit_zero_matches_points_at_indentation(ws: Path) -> None:
    with pytest.raises(ToolError, match="Line 3 .*indentation"):
        await ft.edit_file(ws, "src/main.py", "  def main():\n", "def run():\n")


async def test_edit_several_matches_lists_count_and_lines(ws: Path) -> None:
    (ws / "dup.py").write_text("x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n")
    with pytest.raises(ToolError) as caught:
        await ft.edit_file(ws, "dup.py", "x = 1", "x = 9")
    message = str(caught.value)
    assert "3 times" in message and "lines 1, 3, 5" in message
    assert (ws / "dup.py").read_text() == "x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n"
    await ft.edit_file(ws, "dup.py", "x = 1\nz = 3", "x = 9\nz = 3")
    assert (ws / "dup.py").read_text() == "x = 1\ny = 2\nx = 9\nz = 3\nx = 1\n"


async def test_edit_overlapping_matches_count_as_several(ws: Path) -> None:
    (ws / "aaa.txt").write_text("aaa")
    with pytest.raises(ToolError, match="2 times"):
        await ft.edit_file(ws, "aaa.txt", "aa", "b")


async def test_edit_keeps_crlf_files_crlf(ws: Path) -> None:
    (ws / "dos.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await ft.edit_file(ws, "dos.txt", "one\ntwo\n", "uno\ndos\n")
    assert (ws / "dos.txt").read_bytes() == b"uno\r\ndos\r\nthree\r\n"


@pytest.mark.parametrize(("old", "new"), [("", "x"), ("same", "same")])
async def test_edit_rejects_empty_or_identical(ws: Path, old: str, new: str) -> None:
    with pytest.raises(ToolError):
        await ft.edit_file(ws, "README.md", old, new)


async def test_edit_refuses_outside_missing_and_binary(ws: Path, tmp_path: Path) -> None:
    (ws / "leak.txt").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(PathOutsideWorkspace):
        await ft.edit_file(ws, "leak.txt", "TOP", "NOT")
    with pytest.raises(PathOutsideWorkspace):
        await ft.edit_file(ws, "../outside.txt", "TOP", "NOT")
    assert (tmp_path / "outside.txt").read_text() == "TOP SECRET\n"
    with pytest.raises(ToolError, match="No such file"):
        await ft.edit_file(ws, "src/nope.py", "a", "b")
    (ws / "blob.bin").write_bytes(b"ab\x00cd")
    with pytest.raises(ToolError, match="binary"):
        await ft.edit_file(ws, "blob.bin", "ab", "xy")


# --- glob -----------------------------------------------------------------------------------------------------------


@pytest.fixture
def tree(ws: Path) -> Path:
    for rel in (
        "src/pkg/util.py",
        "src/pkg/sub/deep.py",
        "tests/test_main.py",
        "web/app.ts",
        "web/view.tsx",
        ".github/workflows/ci.yml",
        ".git/objects/ab.py",
        "node_modules/lib/index.py",
        ".venv/lib/site.py",
        "src/__pycache__/main.cpython-311.py",
    ):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("print('hello')\n")
    return ws


async def test_glob_double_star_matches_any_depth_and_skips_heavy_dirs(tree: Path) -> None:
    out = await ft.glob(tree, "**/*.py")
    assert out.split("\n") == [
        "src/main.py",
        "src/pkg/mod.py",
        "src/pkg/sub/deep.py",
        "src/pkg/util.py",
        "tests/test_main.py",
    ]


async def test_glob_variants(tree: Path) -> None:
    assert (await ft.glob(tree, "*.md")).split("\n") == ["README.md"]
    assert (await ft.glob(tree, "src/*")).split("\n") == ["src/main.py", "src/pkg/"]
    assert (await ft.glob(tree, "src/**")).split("\n") == [
        "src/main.py",
        "src/pkg/",
        "src/pkg/mod.py",
        "src/pkg/sub/",
        "src/pkg/sub/deep.py",
        "src/pkg/util.py",
    ]
    assert (await ft.glob(tree, "web/*.{ts,tsx}")).split("\n") == ["web/app.ts", "web/view.tsx"]
    assert (await ft.glob(tree, "src/pkg/[mu]*.py")).split("\n") == ["src/pkg/mod.py", "src/pkg/util.py"]
    assert (await ft.glob(tree, "**/ci.yml")).split("\n") == [".github/workflows/ci.yml"]
    assert (await ft.glob(tree, "./src/main.py")) == "src/main.py"
    assert "no files match" in await ft.glob(tree, "**/*.rs")


async def test_glob_explicit_skipped_dir_is_searchable(tree: Path) -> None:
    assert await ft.glob(tree, "node_modules/**/*.py") == "node_modules/lib/index.py"


async def test_glob_cap(ws: Path) -> None:
    for n in range(30):
        (ws / f"f{n:02d}.txt").write_text("x")
    out = await ft.glob(ws, "*.txt", limit=10)
    lines = out.split("\n")
    assert lines[:10] == [f"f{n:02d}.txt" for n in range(10)]
    assert lines[10] == "(20 more; narrow the pattern)"


@pytest.mark.parametrize("pattern", ["../*", "/etc/*", "src/../../*", "~/x"])
async def test_glob_refuses_escapes(ws: Path, pattern: str) -> None:
    with pytest.raises(PathOutsideWorkspace):
        await ft.glob(ws, pattern)


async def test_glob_does_not_descend_symlinks_out(ws: Path, tmp_path: Path) -> None:
    (ws / "leakdir").symlink_to(tmp_path / "outside_dir")
    assert "s.txt" not in await ft.glob(ws, "**/*.txt")
    with pytest.raises(PathOutsideWorkspace):
        await ft.glob(ws, "leakdir/*")


# --- grep -----------------------------------------------------------------------------------------------------------


async def test_grep_finds_lines(tree: Path) -> None:
    out = await grep(tree, r"return \d+")
    assert out == "src/main.py:4:     return 42"
    out = await grep(tree, "HELLO", ignore_case=True)
    assert out.split("\n") == [
        ".github/workflows/ci.yml:1: print('hello')",
        "README.md:2: hello world",
        "src/pkg/sub/deep.py:1: print('hello')",
        "src/pkg/util.py:1: print('hello')",
        "tests/test_main.py:1: print('hello')",
        "web/app.ts:1: print('hello')",
        "web/view.tsx:1: print('hello')",
    ]  # .git, node_modules, .venv and __pycache__ are skipped


async def test_grep_path_and_glob_filters(tree: Path) -> None:
    assert (await grep(tree, "hello", path="src")).split("\n") == [
        "src/pkg/sub/deep.py:1: print('hello')",
        "src/pkg/util.py:1: print('hello')",
    ]
    assert (await grep(tree, "hello", glob="*.tsx")) == "web/view.tsx:1: print('hello')"
    assert (await grep(tree, "hello", glob="src/pkg/*.py")) == "src/pkg/util.py:1: print('hello')"
    assert (await grep(tree, "line 1\\d", path="src/pkg/mod.py")).count("\n") == 9
    assert "no matches" in await grep(tree, "zebra")


async def test_grep_invalid_regex_is_tool_error(ws: Path) -> None:
    with pytest.raises(ToolError, match="invalid regular expression"):
        await grep(ws, "foo(")


async def test_grep_caps_matches_and_trims_long_lines(ws: Path) -> None:
    (ws / "many.txt").write_text("needle\n" * 50)
    out = await grep(ws, "needle", max_matches=10)
    lines = out.split("\n")
    assert len(lines) == 11 and lines[9] == "many.txt:10: needle"
    assert "stopped after 10 matches" in lines[10]
    (ws / "long.txt").write_text("a" * 5_000 + "NEEDLE" + "b" * 5_000 + "\n")
    out = await grep(ws, "NEEDLE", path="long.txt")
    assert "NEEDLE" in out and len(out) < 400 and out.startswith("long.txt:1: …")


async def test_grep_skips_binary_files(ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"needle\x00\x01\x02needle")
    (ws / "text.txt").write_text("needle\n")
    assert await grep(ws, "needle") == "text.txt:1: needle"


async def test_grep_never_reads_outside(ws: Path, tmp_path: Path) -> None:
    (ws / "leak.txt").symlink_to(tmp_path / "outside.txt")
    (ws / "leakdir").symlink_to(tmp_path / "outside_dir")
    assert "no matches" in await grep(ws, "SECRET")
    for path in ("..", "../outside.txt", "leak.txt", "leakdir"):
        with pytest.raises(PathOutsideWorkspace):
            await grep(ws, "SECRET", path=path)


async def test_grep_a_few_thousand_files_is_fast(ws: Path) -> None:
    import time

    for d in range(40):
        folder = ws / "gen" / f"d{d}"
        folder.mkdir(parents=True)
        for f in range(75):
            (folder / f"f{f}.py").write_text("def f():\n    return 1\n" * 20 + ("# MARKER\n" if f == 7 else ""))
    started = time.monotonic()
    out = await grep(ws, "MARKER")
    assert time.monotonic() - started < 5
    assert out.count("\n") == 39 and out.startswith("gen/d0/f7.py:41: # MARKER")


# --- the bot's own folders ------------------------------------------------------------------------------------------


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The bot's own checkout (the workspace `self`) as it runs by default: its data folder (database, every chat's
    attachments) and its task worktrees inside it."""
    root = tmp_path / "agentlab"
    (root / "data" / "attachments" / "42").mkdir(parents=True)
    (root / "data" / "attachments" / "42" / "log.txt").write_text("password: CHAT-42-SECRET\n")
    (root / "data-worktrees" / "task-3").mkdir(parents=True)
    (root / "data-worktrees" / "task-3" / "calc.py").write_text("def add(a, b):\n    return a + b  # TASK-3-SECRET\n")
    (root / "README.md").write_text("# agentlab\n")
    return root


def bots_folders(checkout: Path) -> tuple[Path, Path]:
    return checkout / "data", checkout / "data-worktrees"


async def test_the_bots_own_folders_are_out_of_every_file_tools_reach(checkout: Path) -> None:
    hidden = bots_folders(checkout)
    for path in ("data/attachments/42/log.txt", "data-worktrees/task-3/calc.py", "data", "./data/../data/x"):
        with pytest.raises(ToolError, match="the bot's own data"):
            await read_file(checkout, path, hidden=hidden)
        with pytest.raises(ToolError, match="the bot's own data"):
            await grep(checkout, "SECRET", path=path, hidden=hidden)
    with pytest.raises(ToolError, match="the bot's own data"):
        await ft.glob(checkout, "data/**", hidden=hidden)
    assert await ft.glob(checkout, "**", hidden=hidden) == "README.md"
    assert await ft.glob(checkout, "dat*/**/*", hidden=hidden) == "no files match 'dat*/**/*'"
    assert "no matches" in await grep(checkout, "SECRET", hidden=hidden)
    with pytest.raises(ToolError, match="the bot's own data"):
        await ft.write_file(checkout, "data/attachments/42/log.txt", "x", hidden=hidden)
    with pytest.raises(ToolError, match="the bot's own data"):
        await ft.edit_file(checkout, "data-worktrees/task-3/calc.py", "a + b", "a - b", hidden=hidden)
    assert "CHAT-42-SECRET" in (checkout / "data" / "attachments" / "42" / "log.txt").read_text()
    assert "a + b" in (checkout / "data-worktrees" / "task-3" / "calc.py").read_text()


async def test_a_link_in_the_workspace_into_the_bots_data_leads_nowhere(checkout: Path) -> None:
    hidden = bots_folders(checkout)
    (checkout / "notes").symlink_to(checkout / "data" / "attachments")
    (checkout / "log.txt").symlink_to(checkout / "data" / "attachments" / "42" / "log.txt")
    (checkout / "src").mkdir()
    (checkout / "src" / "tasks").symlink_to(checkout / "data-worktrees", target_is_directory=True)
    for path in ("log.txt", "notes/42/log.txt", "src/tasks/task-3/calc.py"):
        with pytest.raises(ToolError, match="the bot's own data"):
            await read_file(checkout, path, hidden=hidden)
    for path in ("notes", "src/tasks", "log.txt"):
        with pytest.raises(ToolError, match="the bot's own data"):
            await grep(checkout, "SECRET", path=path, hidden=hidden)
    assert "no matches" in await grep(checkout, "SECRET", hidden=hidden)
    assert await ft.glob(checkout, "**", hidden=hidden) == "README.md\nsrc/"
    with pytest.raises(ToolError, match="the bot's own data"):
        await ft.glob(checkout, "notes/**", hidden=hidden)


async def test_a_tasks_own_worktree_in_the_worktrees_folder_keeps_its_tools(checkout: Path) -> None:
    """A task's root lies inside the worktrees folder (and may hold folders named like the bot's): all its own. Its
    tools hide the data folder alone (`TaskWorkers.tools`): the worktrees folder holds the root."""
    hidden = bots_folders(checkout)[:1]
    root = checkout / "data-worktrees" / "task-3"
    (root / "data").mkdir()
    (root / "data" / "fixture.txt").write_text("TASK-3-DATA\n")
    assert "TASK-3-SECRET" in await read_file(root, "calc.py", hidden=hidden)
    assert "TASK-3-DATA" in await read_file(root, "data/fixture.txt", hidden=hidden)
    assert await ft.glob(root, "**", hidden=hidden) == "calc.py\ndata/\ndata/fixture.txt"
    assert await grep(root, "TASK-3", hidden=hidden) == (
        "calc.py:2:     return a + b  # TASK-3-SECRET\ndata/fixture.txt:1: TASK-3-DATA"
    )
    await ft.edit_file(root, "calc.py", "a + b", "a - b", hidden=hidden)
    await ft.write_file(root, "notes.md", "done\n", hidden=hidden)
    assert "a - b" in (root / "calc.py").read_text() and (root / "notes.md").read_text() == "done\n"


@pytest.mark.parametrize("root_is", ["the-data-folder", "a-link-to-it", "the-worktrees-folder"])
async def test_a_root_that_is_one_of_the_bots_own_folders_is_refused_whole(
    checkout: Path, tmp_path: Path, root_is: str
) -> None:
    """A workspace that is the data folder (under WORKSPACE_PATH, or linked there) or the worktrees folder, reached by
    a look-up that hides both: the folders below a root are hidden, so is the root (a workspace that reaches into
    them by a link is left out of the workspaces: test_workspace_folders.py)."""
    hidden = bots_folders(checkout)
    (tmp_path / "logs").symlink_to(checkout / "data")
    root = {
        "the-data-folder": checkout / "data",
        "a-link-to-it": tmp_path / "logs",
        "the-worktrees-folder": checkout / "data-worktrees",
    }[root_is]
    for look_up in (
        lambda: read_file(root, "attachments/42/log.txt", hidden=hidden),
        lambda: read_file(root, "calc.py", hidden=hidden),
        lambda: grep(root, "SECRET", hidden=hidden),
        lambda: ft.glob(root, "**", hidden=hidden),
        lambda: ft.write_file(root, "x.txt", "x", hidden=hidden),
    ):
        with pytest.raises(ToolError, match="the bot's own data"):
            await look_up()
    assert not (root / "x.txt").exists()
