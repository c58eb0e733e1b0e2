"""The repo map: incremental index of files and symbols, relevance order, token budget, symbol look-up, worker tools."""

from __future__ import annotations

import asyncio
import os
import textwrap
import time
from pathlib import Path

import pytest

from agents.core.errors import ToolError
from agents.core.secrets_filter import SecretsFilter
from agents.core.text import estimate_tokens
from agents.repo_map.maps import RepoMap, repo_map_tools
from agents.repo_map.outline import SYMBOL_LANGUAGES, stemmed_words
from agents.repo_map.ranking import FileTerms, module_keys, rank_files
from agents.store.database import Store
from agents.tools.toolbox import Audit, Toolbox
from tests.conftest import git, make_repo

CALC = '''\
    """Arithmetic helpers."""


    def add(a: int, b: int) -> int:
        return a - b


    def add_many(*values: int, start: int = 0) -> int:
        return sum(values, start)


    async def fetch_rate(currency: str) -> float:
        return 1.0


    class Calculator:
        """Keeps a running total."""

        def __init__(self, total: int = 0) -> None:
            self.total = total

        def push(self, value: int) -> "Calculator":
            self.total = add(self.total, value)
            return self
    '''

SMALL_REPO = {
    "aaa_helpers.py": '"""Unrelated helpers."""\n\ndef shout(text: str) -> str:\n    return text.upper()\n',
    "calc.py": CALC,
    "mmm_report.py": "def report(rows):\n    return len(rows)\n",
    "zz_main.py": "from calc import add\n\n\ndef main() -> None:\n    print(add(2, 3))\n",
    "docs/notes.md": "# Notes\nnothing here\n",
}


FIXED_MTIME_NS = 1_600_000_000 * 10**9


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write the files, all with one old mtime (outside git, "recently changed" means newest mtime)."""
    for name, content in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(content))
        os.utime(target, ns=(FIXED_MTIME_NS, FIXED_MTIME_NS))
    return root


def touch_later(path: Path, content: str) -> None:
    """Rewrite a file and move its mtime clearly forward (coarse file-system clocks must not hide the change)."""
    path.write_text(content)
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 2_000_000_000))


def file_lines(rendered: str) -> list[str]:
    """The file header lines of a map (not the title, symbols or the truncation note)."""
    return [
        line.split(" — ")[0]
        for line in rendered.split("\n")
        if line and not line.startswith((" ", "…", "Repository map of "))
    ]


@pytest.fixture
def small(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "small", SMALL_REPO)


# --- the map ---------------------------------------------------------------------------------------------------------


async def test_named_file_first_with_signatures_then_its_importer(repo_map: RepoMap, small: Path) -> None:
    rendered = await repo_map.render("small", small, "fix the bug in calc.py", 2000)
    lines = rendered.split("\n")
    assert lines[0].startswith("Repository map of small: 5 files")
    assert lines[1] == "calc.py — Arithmetic helpers."
    assert lines[2:8] == [
        "  4: def add(a: int, b: int) -> int",
        "  8: def add_many(*values: int, start: int=0) -> int",
        "  12: async def fetch_rate(currency: str) -> float",
        "  16: class Calculator",
        "    19: def __init__(self, total: int=0) -> None",
        "    22: def push(self, value: int) -> 'Calculator'",
    ]
    # the importer comes next although it sorts last by path; source before docs
    assert file_lines(rendered) == ["calc.py", "zz_main.py", "aaa_helpers.py", "mmm_report.py", "docs/notes.md"]
    assert "docs/notes.md — Notes" in rendered
    assert "more files not shown" not in rendered  # everything fitted


async def test_stem_dotted_module_and_symbol_mentions_find_files(repo_map: RepoMap, tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "pkgrepo",
        {
            "src/shop/__init__.py": "",
            "src/shop/billing.py": "def parse_invoice(text):\n    return text\n",
            "src/shop/cart.py": "from . import billing\n\ndef checkout():\n    return billing.parse_invoice('x')\n",
            "src/shop/zeta.py": "from .billing import parse_invoice\n",
            "src/other.py": "def unrelated():\n    pass\n",
            "src/worker.py": "def parse_config(path: str) -> dict:\n    return {}\n",
        },
    )
    by_stem = file_lines(await repo_map.render("pkg", root, "the billing module rounds wrong", 2000))
    assert by_stem[:3] == ["src/shop/billing.py", "src/shop/cart.py", "src/shop/zeta.py"]
    by_module = file_lines(await repo_map.render("pkg", root, "look at shop.billing please", 2000))
    assert by_module[0] == "src/shop/billing.py"
    by_symbol = file_lines(await repo_map.render("pkg", root, "why does parse_config return nothing?", 2000))
    assert by_symbol[0] == "src/worker.py"


async def test_a_bare_word_names_a_non_source_file_too(repo_map: RepoMap, small: Path) -> None:
    assert file_lines(await repo_map.render("small", small, "tidy up the notes", 2000))[0] == "docs/notes.md"


async def test_files_a_named_file_imports_come_before_unrelated_ones(repo_map: RepoMap, tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "deps",
        {
            "app.py": "from lib.db import connect\n\ndef run():\n    connect()\n",
            "a_first.py": "X = 1\n",
            "lib/__init__.py": "",
            "lib/db.py": "def connect():\n    pass\n",
        },
    )
    order = file_lines(await repo_map.render("deps", root, "app.py crashes at start", 2000))
    assert order[:2] == ["app.py", "lib/db.py"]


async def test_recently_committed_files_come_before_the_rest(repo_map: RepoMap, tmp_path: Path) -> None:
    root = make_repo(tmp_path / "gitrepo", {"a.py": "A = 1\n", "b.py": "B = 1\n", "c.py": "C = 1\n", "d.py": "D = 1\n"})
    (root / "c.py").write_text("C = 2\n")
    git(root, "commit", "-q", "-am", "change c")
    order = file_lines(await repo_map.render("gitrepo", root, "tidy things up", 2000))
    assert order == ["c.py", "a.py", "b.py", "d.py"]
    (root / "d.py").write_text("D = 3\n")  # uncommitted: newest of all
    order = file_lines(await repo_map.render("gitrepo", root, "tidy things up", 2000))
    assert order[:2] == ["d.py", "c.py"]


async def test_tiny_budgets_are_respected_and_say_what_was_left_out(repo_map: RepoMap, small: Path) -> None:
    await repo_map.refresh("small", small)
    for budget in range(0, 400, 7):
        rendered = await repo_map.render("small", small, "fix the bug in calc.py", budget, refresh=False)
        assert estimate_tokens(rendered) <= budget, (budget, rendered)
        shown = file_lines(rendered)
        if len(shown) < 5 and len(rendered) > 0 and budget >= 20:
            assert rendered.endswith(f"… {5 - len(shown)} more files not shown (map truncated at {budget} tokens)")
    tight = await repo_map.render("small", small, "fix the bug in calc.py", 40, refresh=False)
    assert file_lines(tight)[0] == "calc.py"
    assert "more symbols" in tight  # calc.py itself only partly fits: what was cut is said


async def test_empty_workspace(repo_map: RepoMap, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert (
        await repo_map.render("empty", tmp_path / "empty", "anything", 100)
        == "Repository map of empty: no source files found."
    )


# --- the index -------------------------------------------------------------------------------------------------------


async def test_incremental_refresh_parses_only_changed_files(repo_map: RepoMap, store: Store, small: Path) -> None:
    first = await repo_map.refresh("small", small)
    assert (first.files_seen, first.parsed, first.removed) == (5, 5, 0)
    again = await repo_map.refresh("small", small)
    assert (again.files_seen, again.parsed, again.removed) == (5, 0, 0)

    touch_later(small / "mmm_report.py", "def report(rows, *, title: str = '') -> int:\n    return len(rows)\n")
    changed = await repo_map.refresh("small", small)
    assert (changed.parsed, changed.removed) == (1, 0)
    assert (
        await repo_map.find_symbols_by_name("small", "report")
        == "mmm_report.py:1 function def report(rows, *, title: str='') -> int"
    )

    (small / "aaa_helpers.py").unlink()
    (small / "new_module.py").write_text("class Fresh:\n    pass\n")
    after = await repo_map.refresh("small", small)
    assert (after.files_seen, after.parsed, after.removed) == (5, 1, 1)
    assert "no symbols named like 'shout'" in await repo_map.find_symbols_by_name("small", "shout")
    assert (await repo_map.find_symbols_by_name("small", "Fresh")).startswith("new_module.py:1 class class Fresh")
    assert set(await store.repo_index.file_states("small")) == {
        "calc.py",
        "mmm_report.py",
        "zz_main.py",
        "docs/notes.md",
        "new_module.py",
    }


async def test_concurrent_refreshes_do_not_duplicate_rows(repo_map: RepoMap, small: Path) -> None:
    first, second = await asyncio.gather(repo_map.refresh("small", small), repo_map.refresh("small", small))
    assert sorted([first.parsed, second.parsed]) == [0, 5]
    assert len((await repo_map.find_symbols_by_name("small", "add")).split("\n")) == 2


async def test_skips_ignored_folders_binaries_big_files_and_symlinks(
    repo_map: RepoMap, store: Store, tmp_path: Path
) -> None:
    root = write_tree(
        tmp_path / "mixed",
        {
            "keep.py": "def kept():\n    pass\n",
            "node_modules/lib/index.js": "export function hidden() {}\n",
            ".venv/lib/site.py": "def hidden():\n    pass\n",
            "pkg/__pycache__/keep.cpython-311.py": "def hidden():\n    pass\n",
            "broken.py": "def oops(:\n",
        },
    )
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    (root / "data.bin2").write_bytes(b"abc\x00def")
    (root / "huge.py").write_text("x = 1\n" * 200_000)  # 1.2 MB
    (root / "link.py").symlink_to(root / "keep.py")
    stats = await repo_map.refresh("mixed", root)
    assert sorted(await store.repo_index.file_states("mixed")) == ["broken.py", "data.bin2", "keep.py"]
    assert stats.files_seen == 3
    listed = [row["path"] for row in await store.repo_index.file_list("mixed")]
    assert sorted(listed) == ["broken.py", "keep.py"]  # the sniffed binary is remembered, never shown
    rendered = await repo_map.render("mixed", root, "broken.py fails to import", 500)
    assert file_lines(rendered) == ["broken.py", "keep.py"]  # a syntax error still leaves the file in the map
    assert (await repo_map.find_symbols_by_name("mixed", "hidden")).startswith("no symbols")
    assert (await repo_map.refresh("mixed", root)).parsed == 0  # the binary is not re-read


async def test_git_head_is_recorded(repo_map: RepoMap, store: Store, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "withgit", {"a.py": "A = 1\n"})
    await repo_map.refresh("withgit", repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    info = await store.repo_index.info("withgit")
    assert info is not None and info["git_head"] == head and info["root"] == str(repo.resolve())
    plain = write_tree(tmp_path / "nogit", {"a.py": "A = 1\n"})
    await repo_map.refresh("nogit", plain)
    assert (await store.repo_index.info("nogit"))["git_head"] is None


async def test_workspaces_are_kept_apart(repo_map: RepoMap, small: Path, tmp_path: Path) -> None:
    other = write_tree(tmp_path / "other", {"calc.py": "def subtract(a, b):\n    return a - b\n"})
    await repo_map.refresh("small", small)
    await repo_map.refresh("other", other)
    assert "no symbols" in await repo_map.find_symbols_by_name("other", "add")
    assert (await repo_map.find_symbols_by_name("small", "add")).startswith("calc.py:4 function")


async def test_refresh_of_a_missing_folder_is_an_error(repo_map: RepoMap, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="does not exist"):
        await repo_map.refresh("gone", tmp_path / "gone")


def test_module_keys() -> None:
    assert module_keys("src/pkg/calc.py") == ["src/pkg/calc", "pkg/calc", "calc"]
    assert module_keys("src/pkg/__init__.py") == ["src/pkg", "pkg"]
    assert module_keys("web/lib/index.ts") == ["web/lib/index", "lib/index", "index", "web/lib", "lib"]
    assert module_keys("README.md") == ["README.md"]


# --- symbols ---------------------------------------------------------------------------------------------------------


async def test_find_symbols_exact_then_prefix_then_substring(repo_map: RepoMap, small: Path) -> None:
    await repo_map.refresh("small", small)
    lines = (await repo_map.find_symbols_by_name("small", "add")).split("\n")
    assert lines == [
        "calc.py:4 function def add(a: int, b: int) -> int",
        "calc.py:8 function def add_many(*values: int, start: int=0) -> int",
    ]
    assert (await repo_map.find_symbols_by_name("small", "ADD_M")).split("\n") == lines[1:]
    assert (await repo_map.find_symbols_by_name("small", "calcul")).startswith("calc.py:16 class class Calculator")
    substring = await repo_map.find_symbols_by_name("small", "_rate")
    assert substring == "calc.py:12 function async def fetch_rate(currency: str) -> float"
    method = await repo_map.find_symbols_by_name("small", "Calculator.push")
    assert method == "calc.py:22 method def push(self, value: int) -> 'Calculator'  (in Calculator)"
    assert "no symbols" in await repo_map.find_symbols_by_name("small", "Report.push")
    limited = (await repo_map.find_symbols_by_name("small", "a", limit=2)).split("\n")
    assert limited[0].startswith("calc.py:4 ") and limited[-1] == "(more than 2 matches; give a longer name)"
    assert len(limited) == 3
    with pytest.raises(ToolError, match="empty"):
        await repo_map.find_symbols_by_name("small", "  ")


async def test_like_wildcards_in_queries_are_literal(repo_map: RepoMap, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "wild", {"w.py": "def a_b():\n    pass\n\ndef axb():\n    pass\n"})
    await repo_map.refresh("wild", root)
    assert await repo_map.find_symbols_by_name("wild", "a_b") == "w.py:1 function def a_b()"
    assert "no symbols" in await repo_map.find_symbols_by_name("wild", "a%")


@pytest.mark.skipif("typescript" not in SYMBOL_LANGUAGES, reason="tree-sitter grammars not installed")
async def test_javascript_and_typescript_outlines_and_imports(repo_map: RepoMap, tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "web",
        {
            "src/calc.ts": """\
            /** Money maths. */
            export interface Money { cents: number }
            export type Currency = "EUR" | "USD";
            export const RATE = 1.1;
            export const convert = (m: Money, to: Currency): Money => ({ cents: m.cents });
            const hidden = 3;
            export function add(a: Money, b: Money): Money { return a; }
            export default class Ledger extends Base {
              static open(name: string): Ledger { return new Ledger(); }
              total = (): number => 0;
            }
            """,
            "src/view.jsx": "import { add } from './calc';\nexport function View() { return null; }\n",
            "src/a_util.js": "function helper(x) { return x }\nmodule.exports = { helper };\n",
            "src/z_old.js": "const calc = require('./calc');\n",
        },
    )
    rendered = await repo_map.render("web", root, "the total in src/calc.ts is off", 2000)
    lines = rendered.split("\n")
    assert lines[1:11] == [
        "src/calc.ts — Money maths.",
        "  2: export interface Money",
        '  3: export type Currency = "EUR" | "USD"',
        "  4: export const RATE",
        "  5: export const convert = (m: Money, to: Currency): Money =>",
        "  7: export function add(a: Money, b: Money): Money",
        "  8: export default class Ledger extends Base",
        "    9: static open(name: string): Ledger",
        "    10: total = (): number =>",
        "src/view.jsx",
    ]
    assert file_lines(rendered) == ["src/calc.ts", "src/view.jsx", "src/z_old.js", "src/a_util.js"]
    assert "hidden" not in rendered
    assert await repo_map.find_symbols_by_name("web", "helper") == "src/a_util.js:1 function function helper(x)"


# --- tools -----------------------------------------------------------------------------------------------------------


async def test_worker_tools(repo_map: RepoMap, small: Path) -> None:
    tools = repo_map_tools(repo_map, "small", small)
    assert [t.name for t in tools] == ["find_symbols_by_name"]  # text search is the file tools' grep
    assert tools[0].spec()["input_schema"]["required"] == ["query"]
    box = Toolbox(tools, Audit(store=None, agent="code"), SecretsFilter())

    found = await box.call("find_symbols_by_name", {"query": "push"})  # refreshes the index itself
    assert not found.is_error and found.content.startswith("calc.py:22 method def push")
    (small / "later.py").write_text("def pushed_later():\n    pass\n")  # a file the worker just wrote
    found = await box.call("find_symbols_by_name", {"query": "push"})
    assert "later.py:1 function def pushed_later()" in found.content

    empty = await box.call("find_symbols_by_name", {"query": ""})
    assert empty.is_error and "empty" in empty.content


# --- scale -----------------------------------------------------------------------------------------------------------


async def test_two_thousand_file_repository_map_stays_in_budget(repo_map: RepoMap, tmp_path: Path) -> None:
    root = tmp_path / "big"
    for folder in range(20):
        (root / f"pkg{folder:02d}").mkdir(parents=True)
        for n in range(100):
            index = folder * 100 + n
            (root / f"pkg{folder:02d}" / f"mod{index:04d}.py").write_text(
                f"from pkg{folder:02d}.mod{max(index - 1, 0):04d} import work_{max(index - 1, 0)}\n\n"
                f"def work_{index}(items: list[int]) -> int:\n    return len(items)\n\n"
                f"class Job{index}:\n    def run(self, retries: int = 1) -> None:\n        pass\n"
            )
    started = time.monotonic()
    stats = await repo_map.refresh("big", root)
    rendered = await repo_map.render("big", root, "work_1234 in pkg12/mod1234.py is slow", 2000, refresh=False)
    assert time.monotonic() - started < 60
    assert stats.files_seen == 2000 and stats.parsed == 2000
    assert estimate_tokens(rendered) <= 2000
    shown = file_lines(rendered)
    assert shown[:2] == ["pkg12/mod1234.py", "pkg12/mod1235.py"]  # named, then the module importing it
    assert "pkg12/mod1233.py" in shown[:3]  # what it imports
    assert rendered.endswith(f"… {2000 - len(shown)} more files not shown (map truncated at 2000 tokens)")
    assert (await repo_map.refresh("big", root)).parsed == 0


def test_a_partial_index_read_mid_build_still_ranks() -> None:
    """A map rendered while a background build stores (the first task on a cold workspace) reads the file list and the
    references at two moments: a reference from or to a file not in the list is left out, never a KeyError (found by
    bench/repo_map.py --sympy)."""
    symbols = {"a.py": [], "b.py": []}
    terms = [
        FileTerms("a.py", '{"helper": 2}', "{}"),
        FileTerms("late.py", '{"helper": 1}', "{}"),  # stored after the file list was read
    ]
    from agents.repo_map.symbols import Symbol

    symbols["b.py"] = [Symbol("helper", "function", 1, "def helper()", None)]
    ranking = rank_files(["a.py", "b.py"], symbols, terms, [("late.py", "b")], "fix helper")
    assert ranking.files[0] == "b.py" and set(ranking.files) == {"a.py", "b.py"}


@pytest.mark.parametrize(
    ("name", "stems"),
    [
        ("retries", ("retry",)),
        ("reloader", ("reload",)),
        ("ab", ()),
        ("_options", ("option",)),
        ("HTTPAdapter", ("http", "adapt", "httpadapter")),
        ("send_file", ("send", "fil", "sendfile")),
        ("x1_debugger", ("debug", "x1debugger")),
        ("café", ("caf",)),  # words are ASCII letters: a name in another script is split as the expression finds it
        ("foo-bar", ("foo", "bar", "foobar")),
    ],
)
def test_stemmed_words_of_names(name: str, stems: tuple[str, ...]) -> None:
    assert stemmed_words(name) == stems
