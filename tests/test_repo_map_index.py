"""The index behind the repo map: git's file list, a task's index seeded from its workspace's, what JavaScript and
TypeScript really define, and the code words symbol hints look up."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from agents.chat.symbol_hints import SymbolHints, code_words
from agents.repo_map.maps import RepoMap
from agents.repo_map.outline import SYMBOL_LANGUAGES
from agents.repo_map.ranking import Request, file_class
from agents.repo_map.script_outline import script_outline
from agents.store.database import Store
from agents.workspaces.folders import Workspaces
from tests.conftest import git, make_repo


async def test_an_unignored_copied_virtualenv_stays_out_of_the_index_and_the_map(
    repo_map: RepoMap, tmp_path: Path
) -> None:
    root = make_repo(
        tmp_path / "requests",
        {
            "src/requests/adapters.py": "class HTTPAdapter:\n    def send(self, request, retries=None):\n        pass\n",
            "src/requests/sessions.py": "from .adapters import HTTPAdapter\n\nclass Session:\n    pass\n",
        },
    )
    venv = root / "venv"
    (venv / "lib/python3.12/site-packages/urllib3/util").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "lib/python3.12/site-packages/urllib3/util/retry.py").write_text(
        "class Retry:\n    def increment(self, retries=None):\n        pass\n\nclass HTTPAdapter:\n    pass\n"
    )
    stats = await repo_map.refresh("requests", root)
    assert stats.files_seen == 2
    rendered = await repo_map.render("requests", root, "fix retries in HTTPAdapter", 2000, refresh=False)
    assert rendered.split("\n")[1] == "src/requests/adapters.py"
    assert "urllib3" not in rendered


async def test_a_task_index_starts_from_the_workspace_index_and_parses_only_what_differs(
    repo_map: RepoMap, store: Store, tmp_path: Path
) -> None:
    files = {f"pkg/mod{n}.py": f"def work_{n}(x):\n    return x\n" for n in range(30)}
    root = make_repo(tmp_path / "ws", files)
    assert (await repo_map.refresh("ws", root)).parsed == 30
    worktree = tmp_path / "task-worktree"
    git(root, "worktree", "add", "-q", str(worktree), "-b", "task")  # every file is new on disk: new mtimes
    (worktree / "pkg/mod3.py").write_text("def work_3(x, y):\n    return x + y\n")
    (worktree / "pkg/extra.py").write_text("def fresh():\n    pass\n")
    seeded = await repo_map.refresh("ws@task-1", worktree, seed_from="ws")
    assert (seeded.files_seen, seeded.parsed) == (31, 2)  # only the changed and the new file
    assert (await repo_map.find_symbols_by_name("ws@task-1", "work_3")).startswith(
        "pkg/mod3.py:1 function def work_3(x, y)"
    )
    assert "no symbols" in await repo_map.find_symbols_by_name("ws", "fresh")  # the workspace's index is untouched
    assert (await repo_map.refresh("ws@task-1", worktree, seed_from="ws")).parsed == 0
    rendered = await repo_map.render("ws@task-1", worktree, "work_3 should add", 500, refresh=False)
    assert rendered.startswith("Repository map of ws: 31 files")
    cold = await repo_map.refresh("cold@task-2", worktree)  # without a seed: everything
    assert cold.parsed == 31


async def test_content_unchanged_after_a_copy_is_not_reparsed(repo_map: RepoMap, tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    (root / "a.py").write_text("def a():\n    pass\n")
    (root / "b.py").write_text("def b():\n    pass\n")
    await repo_map.refresh("plain", root)
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)  # new mtimes, same bytes
    assert (await repo_map.refresh("plain", copy)).parsed == 0


@pytest.mark.skipif("typescript" not in SYMBOL_LANGUAGES, reason="tree-sitter grammars not installed")
def test_javascript_member_assignments_exports_fields_and_private_methods() -> None:
    code = textwrap.dedent("""\
        res.sendFile = function sendFile(path, options, callback) {};
        exports.etag = createETagGenerator({ weak: false });
        exports.normalizeType = function(type) { return type; };
        exports = module.exports = createApplication;
        Router.prototype.route = function route(path) {};
        app.listen = async (port) => {};
        class Ledger {
          count = 0;
          #secret = 1;
          #audit(entry) {}
          static open() {}
        }
        """).encode()
    symbols = [(s.name, s.kind, s.parent, s.signature) for s in script_outline(code, "lib/x.js", "javascript")[1]]
    assert symbols == [
        ("sendFile", "method", "res", "res.sendFile = function sendFile(path, options, callback)"),
        ("etag", "const", None, "exports.etag"),
        ("normalizeType", "function", None, "exports.normalizeType = function(type)"),
        ("route", "method", "Router", "Router.prototype.route = function route(path)"),
        ("listen", "method", "app", "app.listen = async (port) =>"),
        ("Ledger", "class", None, "class Ledger"),
        ("count", "field", "Ledger", "count"),
        ("#secret", "field", "Ledger", "#secret"),
        ("#audit", "method", "Ledger", "#audit(entry)"),
        ("open", "method", "Ledger", "static open()"),
    ]
    exported = script_outline(
        b"module.exports = { parse, format: function (v) {}, stringify(v) {} };\n", "lib/y.js", "javascript"
    )[1]
    assert [(s.name, s.kind) for s in exported] == [
        ("parse", "const"),
        ("format", "function"),
        ("stringify", "function"),
    ]
    typescript = script_outline(
        b"export class Pool {\n  private size: number = 1;\n  #drain(): void {}\n}\n", "src/pool.ts", "typescript"
    )[1]
    assert [(s.name, s.kind, s.signature) for s in typescript] == [
        ("Pool", "class", "export class Pool"),
        ("size", "field", "private size: number"),
        ("#drain", "method", "#drain(): void"),
    ]


def test_code_words_of_a_message() -> None:
    assert code_words("fix retries in HTTPAdapter and JSONProvider") == ["HTTPAdapter", "JSONProvider"]
    assert code_words("res.sendFile ignores maxAge; see lib/response.js") == ["res.sendFile", "maxAge"]
    assert code_words("where is Store.add defined?") == ["Store.add"]
    assert code_words("the #drain method of Pool leaks") == ["#drain"]
    assert code_words("calc.py breaks in parse_config()") == ["parse_config"]


def test_request_reading_and_file_kinds() -> None:
    request = Request.parse("res.sendFile retries on HTTPAdapter errors in the tests")
    assert request.dotted == (("res", "sendFile"),)
    assert {"sendFile", "HTTPAdapter"} <= set(request.identifiers)
    assert {"retry", "sendfile", "httpadapter", "adapt"} <= set(request.terms)
    assert request.about_tests
    assert [
        file_class(p)
        for p in (
            "src/a.py",
            "tests/test_a.py",
            "tests/static/config.json",
            "docs/x.rst",
            ".github/ISSUE_TEMPLATE/config.yml",
            "examples/app.py",
            "lib/a.test.ts",
            "pyproject.toml",
        )
    ] == ["source", "test", "fixture", "docs", "meta", "example", "test", "data"]


@pytest.mark.skipif("javascript" not in SYMBOL_LANGUAGES, reason="tree-sitter grammars not installed")
async def test_hints_take_the_exact_case_and_the_owner_of_a_dotted_name(
    repo_map: RepoMap, store: Store, tmp_path: Path
) -> None:
    root = tmp_path / "ws" / "web"
    root.mkdir(parents=True)
    (root / "response.js").write_text(
        "res.sendFile = function sendFile(p) {};\nfunction sendfile(res, f) {}\napp.sendFile = function other(p) {};\n"
    )
    (root / "adapters.py").write_text("class HTTPAdapter:\n    pass\n\nclass HttpAdapter:\n    pass\n")
    await repo_map.refresh("web", root)
    hints = SymbolHints(repo_map, store, Workspaces(tmp_path / "ws", None))
    assert await hints.hints("does `sendFile` stream?") == [
        "web: response.js:1 method res.sendFile = function sendFile(p)",
        "web: response.js:3 method app.sendFile = function other(p)",
    ]
    assert await hints.hints("res.sendFile is slow") == [
        "web: response.js:1 method res.sendFile = function sendFile(p)"
    ]
    assert await hints.hints("retries in HTTPAdapter") == ["web: adapters.py:1 class class HTTPAdapter"]
    await hints.close()


async def test_files_indexed_before_references_were_kept_are_parsed_again(
    repo_map: RepoMap, store: Store, tmp_path: Path
) -> None:
    root = tmp_path / "old"
    root.mkdir()
    (root / "a.py").write_text("def first():\n    return second()\n")
    (root / "b.py").write_text("def second():\n    pass\n")
    await repo_map.refresh("old", root)
    # what store migration 4 leaves for an index written before it: no hash, no references
    await store.repo_index._write_batch(
        [("UPDATE repo_files SET content_hash = '', refs = '{}', words = '{}' WHERE workspace = ?", [("old",)])]
    )
    assert (await repo_map.refresh("old", root)).parsed == 2
    terms = {path: json.loads(refs) for path, refs, _ in await store.repo_index.file_terms("old")}
    assert terms["a.py"] == {"second": 1}
    assert (await repo_map.refresh("old", root)).parsed == 0
