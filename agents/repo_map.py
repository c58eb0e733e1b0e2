"""Repository map: an incremental per-workspace index of files and symbols, and a token-bounded map of it for workers.

Python files are outlined with `ast` (classes, functions, methods with signatures, module docstring, imports).
JavaScript / TypeScript are outlined with tree-sitter when `tree-sitter`, `tree-sitter-javascript` and
`tree-sitter-typescript` are installed (their wheels carry the compiled grammars: nothing is downloaded at runtime);
without them, and for every other language, a file is indexed at file level (path, size, language).

The index lives in the store. `RepoMap.refresh` re-parses only files that are new or whose mtime/size changed and
drops the rows of deleted files. `RepoMap.render` writes the map most-relevant-first for a request and stops at a
token budget (tokens estimated as characters / 4).
"""

from __future__ import annotations

import ast
import asyncio
import logging
import os
import posixpath
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents import git_repo
from agents.file_tools import SKIP_DIRS
from agents.store import Store
from agents.toolbox import Tool, prop
from agents.workspaces import ToolError

log = logging.getLogger(__name__)

try:  # optional: symbol outlines for JavaScript / TypeScript
    import tree_sitter
    import tree_sitter_javascript
    import tree_sitter_typescript

    _TS_LANGUAGES: dict[str, Any] = {
        "javascript": tree_sitter.Language(tree_sitter_javascript.language()),
        "typescript": tree_sitter.Language(tree_sitter_typescript.language_typescript()),
        "tsx": tree_sitter.Language(tree_sitter_typescript.language_tsx()),
    }
except Exception:  # noqa: BLE001 - not installed or an incompatible build: file-level only
    _TS_LANGUAGES = {}

# Languages whose files get symbols (the rest are indexed at file level).
SYMBOL_LANGUAGES: frozenset[str] = frozenset({"python", *_TS_LANGUAGES})

MAX_FILE_BYTES = 1_000_000
BINARY_SNIFF_BYTES = 8192
BINARY = "binary"  # language recorded for a sniffed binary file: kept so it is not re-read, never shown
MAX_SIGNATURE_CHARS = 200
MAX_SYMBOLS_PER_FILE = 500
MAX_IMPORTS_PER_FILE = 300
PARSE_CHUNK = 400  # files parsed per worker-thread hop
GIT_TIMEOUT_S = 10.0
RECENT_FILES = 20
SYMBOLS_SHOWN_PER_FILE = 25  # for files not named in the request
DISTINCT_MATCH_LIMIT = 12  # a word matching more files than this says nothing about which file is meant

LANGUAGE_BY_EXTENSION: dict[str, str] = {
    "py": "python", "pyi": "python",
    "js": "javascript", "mjs": "javascript", "cjs": "javascript", "jsx": "javascript",
    "ts": "typescript", "mts": "typescript", "cts": "typescript", "tsx": "tsx",
    "go": "go", "rs": "rust", "java": "java", "kt": "kotlin", "kts": "kotlin", "scala": "scala",
    "rb": "ruby", "php": "php", "cs": "csharp", "swift": "swift", "m": "objc", "dart": "dart",
    "c": "c", "h": "c", "cc": "cpp", "cpp": "cpp", "cxx": "cpp", "hpp": "cpp", "hh": "cpp",
    "lua": "lua", "r": "r", "jl": "julia", "ex": "elixir", "exs": "elixir", "erl": "erlang", "hs": "haskell",
    "sh": "shell", "bash": "shell", "zsh": "shell", "ps1": "powershell",
    "html": "html", "htm": "html", "css": "css", "scss": "scss", "sass": "sass", "less": "less",
    "vue": "vue", "svelte": "svelte", "sql": "sql", "graphql": "graphql", "proto": "protobuf",
    "md": "markdown", "rst": "rst", "txt": "text",
    "json": "json", "yaml": "yaml", "yml": "yaml", "toml": "toml", "ini": "ini", "cfg": "ini", "xml": "xml",
}
LANGUAGE_BY_NAME: dict[str, str] = {"Makefile": "make", "Dockerfile": "docker", "Justfile": "just"}

# Never opened: their extension says they are not text.
BINARY_EXTENSIONS = frozenset({
    "png", "jpg", "jpeg", "gif", "bmp", "ico", "webp", "tif", "tiff", "psd", "heic", "avif",
    "mp3", "wav", "ogg", "oga", "flac", "m4a", "aac", "opus", "mp4", "mov", "avi", "mkv", "webm",
    "zip", "gz", "tgz", "bz2", "xz", "zst", "7z", "rar", "tar", "jar", "war", "whl", "egg",
    "pyc", "pyo", "so", "dylib", "dll", "exe", "o", "a", "lib", "bin", "class", "wasm",
    "pdf", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "odt", "sqlite", "sqlite3", "db",
    "ttf", "otf", "woff", "woff2", "eot", "pt", "pth", "onnx", "npy", "npz", "pkl", "pickle", "parquet",
})

_SOURCE_EXTENSIONS = frozenset({"py", "pyi", "js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx"})


def estimate_tokens(text: str) -> int:
    """Tokens as the map counts them: characters / 4, rounded up."""
    return -(-len(text) // 4)


# --- records ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Symbol:
    """One function, class, method or exported constant of a file."""

    name: str
    kind: str  # function | class | method | const | interface | type | enum
    line: int
    signature: str
    parent: str | None = None  # enclosing class ("Outer.Inner" when nested)


@dataclass(frozen=True)
class FileOutline:
    """What one parse of one file yields."""

    path: str
    mtime_ns: int
    size: int
    language: str | None
    summary: str = ""
    symbols: tuple[Symbol, ...] = ()
    imports: tuple[str, ...] = ()  # import targets as slash paths without extension ("pkg/calc", "src/lib/util")


@dataclass(frozen=True)
class RefreshStats:
    files_seen: int
    parsed: int
    removed: int
    seconds: float


@dataclass
class _FileRow:
    path: str
    size: int
    language: str | None
    summary: str
    mtime_ns: int


# --- scanning --------------------------------------------------------------------------------------------------------


def _extension(name: str) -> str:
    dot = name.rfind(".")
    return name[dot + 1:].lower() if dot > 0 else ""


def language_for(path: str) -> str | None:
    name = path.rsplit("/", 1)[-1]
    return LANGUAGE_BY_NAME.get(name) or LANGUAGE_BY_EXTENSION.get(_extension(name))


def scan_files(root: Path) -> dict[str, tuple[int, int]]:
    """Relative path → (mtime_ns, size) of each candidate file (no SKIP_DIRS, symlinks, binary extensions, > 1 MB)."""
    found: dict[str, tuple[int, int]] = {}
    stack: list[tuple[str, str]] = [(str(root), "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_symlink():
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in SKIP_DIRS:
                            stack.append((entry.path, f"{prefix}{entry.name}/"))
                        continue
                    if not entry.is_file(follow_symlinks=False) or entry.name == ".git":
                        continue
                    if _extension(entry.name) in BINARY_EXTENSIONS:
                        continue
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if info.st_size <= MAX_FILE_BYTES:
                    found[prefix + entry.name] = (info.st_mtime_ns, info.st_size)
    return found


def parse_files(root: Path, paths: Sequence[str], states: dict[str, tuple[int, int]]) -> list[FileOutline | None]:
    """Outline each path (None for a file that vanished or became unreadable since the scan)."""
    return [_parse_file(root, path, *states[path]) for path in paths]


def _parse_file(root: Path, path: str, mtime_ns: int, size: int) -> FileOutline | None:
    try:
        data = (root / path).read_bytes()
    except OSError:
        return None
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return FileOutline(path, mtime_ns, size, BINARY)
    language = language_for(path)
    try:
        if language == "python":
            summary, symbols, imports = _python_outline(data, path)
        elif language in _TS_LANGUAGES:
            summary, symbols, imports = _script_outline(data, path, language)
        elif language == "markdown":
            summary, symbols, imports = _markdown_summary(data), [], []
        else:
            summary, symbols, imports = "", [], []
    except Exception:  # noqa: BLE001 - one odd file (deep nesting, parser bug) must not stop the refresh
        log.warning("repo map: could not outline %s; indexed without symbols", path, exc_info=True)
        summary, symbols, imports = "", [], []
    return FileOutline(
        path, mtime_ns, size, language, summary[:160],
        tuple(symbols[:MAX_SYMBOLS_PER_FILE]), tuple(dict.fromkeys(imports))[:MAX_IMPORTS_PER_FILE],
    )


def _one_line(text: str, limit: int = MAX_SIGNATURE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _markdown_summary(data: bytes) -> str:
    for line in data[:4096].decode("utf-8", errors="replace").splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return _one_line(line, 160)
    return ""


# --- Python ----------------------------------------------------------------------------------------------------------

_SHOWN_DECORATORS = frozenset({
    "property", "staticmethod", "classmethod", "cached_property", "abstractmethod", "overload",
    "contextmanager", "asynccontextmanager", "dataclass", "setter",
})


def _decorators(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    shown = []
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in _SHOWN_DECORATORS:
            shown.append(f"@{name} ")
    return "".join(shown)


def _python_signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return _one_line(f"{_decorators(node)}{prefix} {node.name}({ast.unparse(node.args)}){returns}")


def _python_class_signature(node: ast.ClassDef) -> str:
    bases = [ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords]
    return _one_line(f"{_decorators(node)}class {node.name}" + (f"({', '.join(bases)})" if bases else ""))


def _nested_bodies(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement lists under a compound statement that still belong to the enclosing scope (if/try/with/…)."""
    for name in ("body", "orelse", "finalbody"):
        body = getattr(node, name, None)
        if isinstance(body, list):
            yield body
    for handler in getattr(node, "handlers", ()):
        yield handler.body
    for case in getattr(node, "cases", ()):
        yield case.body


def _python_outline(data: bytes, path: str) -> tuple[str, list[Symbol], list[str]]:
    try:
        tree = ast.parse(data, filename=path)
    except (SyntaxError, ValueError):  # not valid for this Python: file-level only
        return "", [], []
    doc = ast.get_docstring(tree, clean=True) or ""
    summary = _one_line(doc.strip().split("\n", 1)[0], 160) if doc.strip() else ""
    symbols: list[Symbol] = []
    imports: list[str] = []
    package = posixpath.dirname(path)

    def visit(body: list[ast.stmt], parent: str | None, in_function: bool) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imports.extend(_python_import_targets(node, package))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not in_function:
                    kind = "method" if parent else "function"
                    symbols.append(Symbol(node.name, kind, node.lineno, _python_signature(node), parent))
                visit(node.body, parent, True)  # only for the imports inside
            elif isinstance(node, ast.ClassDef):
                if not in_function:
                    symbols.append(Symbol(node.name, "class", node.lineno, _python_class_signature(node), parent))
                    visit(node.body, f"{parent}.{node.name}" if parent else node.name, False)
                else:
                    visit(node.body, parent, True)
            else:
                for nested in _nested_bodies(node):
                    visit(nested, parent, in_function)

    visit(tree.body, None, False)
    return summary, symbols, imports


def _python_import_targets(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name.replace(".", "/") for alias in node.names]
    module = (node.module or "").replace(".", "/")
    if node.level:
        base = package
        for _ in range(node.level - 1):
            if not base:
                return []  # climbs above the workspace
            base = posixpath.dirname(base)
        module = posixpath.join(base, module) if module else base
    if not module:
        return [alias.name for alias in node.names if alias.name != "*"]
    return [module] + [f"{module}/{alias.name}" for alias in node.names if alias.name != "*"]


# --- JavaScript / TypeScript (tree-sitter) ---------------------------------------------------------------------------

_TS_LOCAL = threading.local()
_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})
_CLASS_DECLARATIONS = frozenset({"class_declaration", "abstract_class_declaration", "class"})
_FUNCTION_DECLARATIONS = frozenset({"function_declaration", "generator_function_declaration", "function_signature"})
_TYPE_DECLARATIONS = {
    "interface_declaration": "interface", "type_alias_declaration": "type", "enum_declaration": "enum",
}
_METHODS = frozenset({"method_definition", "method_signature", "abstract_method_signature"})
_REQUIRE = re.compile(rb"""\brequire\(\s*['"]([^'"\n]+)['"]\s*\)""")
_SCRIPT_EXTENSIONS = (".tsx", ".ts", ".jsx", ".js", ".mjs", ".cjs", ".mts", ".cts", ".d")


def _ts_parser(language: str) -> Any:
    """One parser per thread and language (tree-sitter parsers are not shared across threads)."""
    parsers = getattr(_TS_LOCAL, "parsers", None)
    if parsers is None:
        parsers = _TS_LOCAL.parsers = {}
    if language not in parsers:
        parsers[language] = tree_sitter.Parser(_TS_LANGUAGES[language])
    return parsers[language]


def _script_import_target(spec: str, path: str) -> str | None:
    spec = spec.strip()
    if not spec:
        return None
    for ext in _SCRIPT_EXTENSIONS:
        if spec.endswith(ext):
            spec = spec[: -len(ext)]
            break
    if spec.startswith("."):
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), spec))
        return None if joined.startswith("..") else ("" if joined == "." else joined)
    if spec.startswith(("@/", "~/")):  # the usual alias for the source root
        spec = spec[2:]
    return spec or None


class _ScriptOutliner:
    """Top-level declarations of one JavaScript / TypeScript file, walked from its tree-sitter syntax tree."""

    def __init__(self, data: bytes, path: str) -> None:
        self.data = data
        self.path = path
        self.symbols: list[Symbol] = []
        self.imports: list[str] = []
        self._seen: set[tuple[str | None, str]] = set()

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].decode("utf-8", errors="replace")

    def node_text(self, node: Any) -> str:
        return self.text(node.start_byte, node.end_byte)

    def add(self, name: str, kind: str, node: Any, signature: str, parent: str | None = None) -> None:
        if (parent, name) in self._seen:  # TypeScript overloads: keep the first
            return
        self._seen.add((parent, name))
        signature = signature.rstrip().rstrip(";{").rstrip()
        self.symbols.append(Symbol(name, kind, node.start_point[0] + 1, _one_line(signature), parent))

    def head(self, start: int, node: Any) -> str:
        """The text of a declaration from `start` up to its body (or all of it when it has none)."""
        body = node.child_by_field_name("body")
        return self.text(start, body.start_byte if body is not None else node.end_byte)

    def add_import(self, source: Any) -> None:
        if source is None:
            return
        target = _script_import_target(self.node_text(source).strip("'\"`"), self.path)
        if target:
            self.imports.append(target)

    def statement(self, node: Any, start: int, exported: bool) -> None:
        kind = node.type
        if kind == "import_statement":
            self.add_import(node.child_by_field_name("source"))
        elif kind == "export_statement":
            self.add_import(node.child_by_field_name("source"))
            declaration = node.child_by_field_name("declaration")
            value = node.child_by_field_name("value")
            if declaration is not None:
                self.statement(declaration, node.start_byte, True)
            elif value is not None and value.type in _FUNCTION_VALUES:
                self.add("default", "function", node, self.head(node.start_byte, value))
            elif value is not None and value.type in _CLASS_DECLARATIONS:
                self.class_declaration(value, node.start_byte, default_name="default")
        elif kind in _FUNCTION_DECLARATIONS:
            name = node.child_by_field_name("name")
            if name is not None:
                self.add(self.node_text(name), "function", node, self.head(start, node))
        elif kind in _CLASS_DECLARATIONS:
            self.class_declaration(node, start)
        elif kind in _TYPE_DECLARATIONS:
            name = node.child_by_field_name("name")
            if name is not None:
                whole = kind == "type_alias_declaration"
                signature = self.node_text(node) if whole else self.head(start, node)
                if whole:
                    signature = self.text(start, node.start_byte) + signature
                self.add(self.node_text(name), _TYPE_DECLARATIONS[kind], node, signature)
        elif kind in ("lexical_declaration", "variable_declaration"):
            self.variables(node, start, exported)
        elif kind == "ambient_declaration":
            for child in node.named_children:
                self.statement(child, start, exported)

    def class_declaration(self, node: Any, start: int, default_name: str | None = None) -> None:
        name_node = node.child_by_field_name("name")
        name = self.node_text(name_node) if name_node is not None else default_name
        if name is None:
            return
        self.add(name, "class", node, self.head(start, node))
        body = node.child_by_field_name("body")
        for member in body.named_children if body is not None else ():
            member_name = member.child_by_field_name("name")
            if member_name is None:
                continue
            if member.type in _METHODS:
                self.add(self.node_text(member_name), "method", member, self.head(member.start_byte, member), name)
            elif member.type in ("public_field_definition", "field_definition"):
                value = member.child_by_field_name("value")
                if value is not None and value.type in _FUNCTION_VALUES:
                    signature = self.text(member.start_byte, self._body_start(value))
                    self.add(self.node_text(member_name), "method", member, signature, name)

    @staticmethod
    def _body_start(function: Any) -> int:
        body = function.child_by_field_name("body")
        return body.start_byte if body is not None else function.end_byte

    def variables(self, node: Any, start: int, exported: bool) -> None:
        """`const f = (a) => …` is a function; other constants count only when exported."""
        declarators = [c for c in node.named_children if c.type == "variable_declarator"]
        if not declarators:
            return
        prefix = self.text(start, declarators[0].start_byte)
        for declarator in declarators:
            name = declarator.child_by_field_name("name")
            value = declarator.child_by_field_name("value")
            if name is None or name.type != "identifier":
                continue
            if value is not None and value.type in _FUNCTION_VALUES:
                signature = prefix + self.text(declarator.start_byte, self._body_start(value))
                self.add(self.node_text(name), "function", declarator, signature)
            elif exported:
                type_node = declarator.child_by_field_name("type")
                end = type_node.end_byte if type_node is not None else name.end_byte
                self.add(self.node_text(name), "const", declarator, prefix + self.text(declarator.start_byte, end))


def _script_outline(data: bytes, path: str, language: str) -> tuple[str, list[Symbol], list[str]]:
    tree = _ts_parser(language).parse(data)
    outliner = _ScriptOutliner(data, path)
    summary = ""
    children = tree.root_node.named_children
    if children and children[0].type == "comment":
        comment = outliner.node_text(children[0])
        for line in comment.splitlines():
            line = line.strip().lstrip("/*!").strip()
            line = line[:-2].rstrip() if line.endswith("*/") else line
            if line:
                summary = _one_line(line, 160)
                break
    for child in children:
        outliner.statement(child, child.start_byte, False)
    outliner.imports.extend(
        target for spec in _REQUIRE.findall(data)
        if (target := _script_import_target(spec.decode("utf-8", "replace"), path))
    )
    return summary, outliner.symbols, outliner.imports


# --- relevance -------------------------------------------------------------------------------------------------------

_WORDS = re.compile(r"[\w@~][\w./@~-]*")
_IDENTIFIERS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STOPWORDS = frozenset("""
    a an the and or but not no nor if then else when while for from into onto with without within of on in at to by as
    is are was were be been being has have had do does did doesn don can could should would will shall may might must
    this that these those there here where what which who whom whose why how it its it's they them their we our you your
    he she his her i me my mine all any some each every more most less least other such only own same so than too very
    just also again still yet now new old fix fixes fixed bug bugs add adds make makes use uses using get set run please
    file files code function functions class classes method methods test tests error errors issue issues change changes
    update updates thing things way need needs want wants see look find show work works working broken wrong right
    py js ts tsx jsx md txt dot slash line lines folder dir directory project repo repository workspace
""".split())
_GENERIC_STEMS = frozenset({"__init__", "__main__", "index", "init"})


def module_keys(path: str) -> list[str]:
    """The names an import can use for a file: suffixes of its path without extension.

    'src/pkg/calc.py' → ['src/pkg/calc', 'pkg/calc', 'calc']; a package's `__init__.py` answers to its folder,
    an `index.js` to both itself and its folder.
    """
    folder, _, name = path.rpartition("/")
    stem = name.rsplit(".", 1)[0] if _extension(name) in _SOURCE_EXTENSIONS else name
    keys: list[str] = []
    parts = (folder.split("/") if folder else [])
    if stem != "__init__":
        full = parts + [stem]
        keys += ["/".join(full[i:]) for i in range(len(full))]
    if stem in ("__init__", "index") and parts:
        keys += ["/".join(parts[i:]) for i in range(len(parts))]
    return keys


class _PathIndex:
    """Look-ups from the words of a request to the indexed files (all case-insensitive)."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.by_path: dict[str, list[str]] = {}
        self.by_name: dict[str, list[str]] = {}
        self.by_key: dict[str, list[str]] = {}
        self.by_stem: dict[str, list[str]] = {}  # file name without extension, for every kind of file
        for path in paths:
            name = path.rsplit("/", 1)[-1].lower()
            self.by_path.setdefault(path.lower(), []).append(path)
            self.by_name.setdefault(name, []).append(path)
            self.by_stem.setdefault(name.split(".", 1)[0] if not name.startswith(".") else name, []).append(path)
            for key in module_keys(path):
                self.by_key.setdefault(key.lower(), []).append(path)

    def mentioned(self, text: str) -> list[str]:
        """Files the text names: by path (strongest), file name, dotted/slashed module path, then bare stem."""
        strength: dict[str, int] = {}

        def note(paths: list[str], score: int) -> None:
            if len(paths) > DISTINCT_MATCH_LIMIT and score > 0:
                return
            for path in paths:
                strength[path] = min(score, strength.get(path, score))

        for raw in _WORDS.findall(text):
            token = raw.rstrip(".,:;!?/-").lower()
            if token.startswith("./"):
                token = token[2:]
            if not token:
                continue
            note(self.by_path.get(token, []), 0)
            note(self.by_name.get(token, []), 1)
            key = token.rsplit(".", 1)[0] if _extension(token) in _SOURCE_EXTENSIONS else token
            key = key.replace(".", "/").strip("/")
            if "/" in key:
                note(self.by_key.get(key, []), 1)
            elif len(key) >= 3 and key not in _STOPWORDS and key not in _GENERIC_STEMS:
                note(list(dict.fromkeys(self.by_key.get(key, []) + self.by_stem.get(key, []))), 2)
        return sorted(strength, key=lambda p: (strength[p], p))

    def resolve(self, target: str) -> list[str]:
        """The files an import target can mean, when it is specific enough to say."""
        paths = self.by_key.get(target.lower(), [])
        return paths if len(paths) <= 3 else []


def _identifiers(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for word in _IDENTIFIERS.findall(text):
        if len(word) >= 3 and word.lower() not in _STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)


# --- git -------------------------------------------------------------------------------------------------------------


async def _git(root: Path, *args: str) -> str | None:
    """stdout of a read-only git command in `root`, or None (not a repository, git missing, error, timeout)."""
    try:
        result = await git_repo.run_git(*args, cwd=root, timeout=GIT_TIMEOUT_S)
    except git_repo.GitError:
        return None
    return result.stdout if result.exit_code == 0 else None


async def git_head(root: Path) -> str | None:
    """The commit checked out in `root`, or None (not a git repository, or no commit yet)."""
    out = await _git(root, "rev-parse", "--verify", "-q", "HEAD")
    return (out or "").strip() or None


async def _recently_changed(root: Path, rows: dict[str, _FileRow]) -> list[str]:
    """Uncommitted changes, then files of the last commits; without git, the newest files by mtime."""
    diff = await _git(root, "diff", "--name-only", "--relative", "HEAD")
    log_out = await _git(root, "log", f"-n{RECENT_FILES}", "--name-only", "--relative", "--pretty=format:")
    if diff is None and log_out is None:
        newest = sorted(rows.values(), key=lambda r: (-r.mtime_ns, r.path))[:RECENT_FILES]
        return [r.path for r in newest]
    names = [line.strip() for line in f"{diff or ''}\n{log_out or ''}".splitlines()]
    return list(dict.fromkeys(n for n in names if n in rows))


# --- the map ---------------------------------------------------------------------------------------------------------


@dataclass
class _Layout:
    budget_chars: int
    lines: list[str] = field(default_factory=list)
    used: int = 0

    def fits(self, lines: list[str], reserve: int) -> bool:
        return self.used + sum(len(line) + 1 for line in lines) + reserve <= self.budget_chars

    def add(self, lines: list[str]) -> None:
        self.lines.extend(lines)
        self.used += sum(len(line) + 1 for line in lines)


def _symbol_lines(symbols: list[Symbol]) -> list[str]:
    lines = []
    for symbol in sorted(symbols, key=lambda s: s.line):
        depth = 1 + (symbol.parent.count(".") + 1 if symbol.parent else 0)
        lines.append(f"{'  ' * depth}{symbol.line}: {symbol.signature}")
    return lines


def _truncation_note(files_left: int, budget_tokens: int) -> str:
    return f"… {files_left} more files not shown (map truncated at {budget_tokens} tokens)"


class RepoMap:
    """The code index of every workspace, kept in the store, and the maps written from it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._locks: dict[str, asyncio.Lock] = {}

    def _lock(self, name: str) -> asyncio.Lock:
        return self._locks.setdefault(name, asyncio.Lock())

    async def refresh(self, name: str, root: Path | str) -> RefreshStats:
        """Bring the index of workspace `name` (folder `root`) up to date: parse new and changed files only."""
        started = time.monotonic()
        base = Path(root).resolve()
        if not base.is_dir():
            raise ToolError(f"the workspace folder {str(root)!r} does not exist")
        async with self._lock(name):
            known = await self.store.repo_file_states(name)
            seen = await asyncio.to_thread(scan_files, base)
            changed = sorted(p for p, state in seen.items() if known.get(p) != state)
            removed = [p for p in known if p not in seen]
            head = await git_head(base)
            outlines: list[FileOutline] = []
            for begin in range(0, len(changed), PARSE_CHUNK):
                chunk = changed[begin: begin + PARSE_CHUNK]
                for path, outline in zip(chunk, await asyncio.to_thread(parse_files, base, chunk, seen)):
                    if outline is not None:
                        outlines.append(outline)
                    elif path in known:
                        removed.append(path)  # vanished since the scan
            await self.store.save_repo_index(
                name, str(base), head,
                files=[(o.path, o.mtime_ns, o.size, o.language, head, o.summary) for o in outlines],
                symbols=[(o.path, s.name, s.kind, s.line, s.signature, s.parent) for o in outlines for s in o.symbols],
                imports=[(o.path, target) for o in outlines for target in o.imports],
                drop=list(dict.fromkeys(removed + [p for p in changed if p in known])),
            )
        stats = RefreshStats(len(seen), len(outlines), len(removed), time.monotonic() - started)
        log.log(logging.INFO if stats.parsed or stats.removed else logging.DEBUG,
                "repo map %s: %d files, %d parsed, %d removed in %.2fs",
                name, stats.files_seen, stats.parsed, stats.removed, stats.seconds)
        return stats

    async def render(
        self, name: str, root: Path | str, request_text: str, budget_tokens: int, *, refresh: bool = True
    ) -> str:
        """The map of workspace `name` for `request_text`, most relevant files first, within `budget_tokens`."""
        if refresh:
            await self.refresh(name, root)
        rows = {r["path"]: _FileRow(**r) for r in await self.store.repo_file_list(name)}
        order, primary = await self._ranked(name, Path(root).resolve(), rows, request_text)
        return await self._layout(name, rows, order, primary, max(0, budget_tokens))

    async def _ranked(
        self, name: str, root: Path, rows: dict[str, _FileRow], request: str
    ) -> tuple[list[str], set[str]]:
        """Every file in map order, and the files the request points at (named, or defining a named symbol).

        Order: files named in the request; files defining symbols it names; files importing those; files those
        import; recently changed files; the rest by path.
        """
        index = _PathIndex(rows)
        named = index.mentioned(request)
        identifiers = _identifiers(request)
        defined_in: dict[str, list[str]] = {}
        for path, symbol in await self.store.repo_symbol_files(name, identifiers):
            defined_in.setdefault(symbol, []).append(path)
        by_symbol = [path for word in identifiers  # in the order the request mentions them; distinctive names only
                     if len(defined_in.get(word, ())) <= DISTINCT_MATCH_LIMIT for path in defined_in.get(word, ())]
        primary = list(dict.fromkeys(named + by_symbol))

        rank_of_key: dict[str, int] = {}
        for rank, path in enumerate(primary):
            for key in module_keys(path):
                rank_of_key.setdefault(key, rank)
        importers: dict[str, int] = {}
        for path, target in await self.store.repo_importers(name, list(rank_of_key)):
            rank = rank_of_key.get(target, len(primary))
            importers[path] = min(rank, importers.get(path, rank))
        referencing = sorted(importers, key=lambda p: (importers[p], p))

        dependencies: list[str] = []
        for path, target in await self.store.repo_imports_of(name, primary):
            dependencies.extend(p for p in index.resolve(target) if p != path)

        recent = await _recently_changed(root, rows)
        ordered = dict.fromkeys([*primary, *referencing, *dependencies, *recent])
        ordered.update(dict.fromkeys(sorted(rows)))
        return list(ordered), set(primary)

    async def _layout(self, name: str, rows: dict[str, _FileRow], order: list[str], named: set[str],
                      budget_tokens: int) -> str:
        layout = _Layout(budget_chars=budget_tokens * 4)
        if not order:
            text = f"Repository map of {name}: no source files found."
            return text if estimate_tokens(text) <= budget_tokens else ""
        reserve = len(_truncation_note(len(order), budget_tokens)) + 1
        header = f"Repository map of {name}: {len(order)} files, most relevant first; symbols as `line: signature`."
        shown = 0
        symbols: dict[str, list[Symbol]] = {}
        for position, path in enumerate(order):
            if path not in symbols:  # fetch the next batch of files' symbols
                batch = order[position: position + 200]
                symbols.update({p: [] for p in batch})
                for row in await self.store.repo_symbols_of(name, batch):
                    symbols[row["path"]].append(Symbol(row["name"], row["kind"], row["line"], row["signature"],
                                                       row["parent"]))
            row = rows[path]
            head = path + (f" — {row.summary}" if row.summary else "")
            lines = _symbol_lines(symbols.pop(path))
            limit = len(lines) if path in named else min(len(lines), SYMBOLS_SHOWN_PER_FILE)

            def block(count: int) -> list[str]:  # the file with its first `count` symbol lines
                hidden = len(lines) - count
                return [head, *lines[:count], *([f"  … {hidden} more symbols"] if hidden else [])]

            if position == 0 and layout.fits([header, head], reserve):  # the title never crowds out the first file
                layout.add([header])
            is_last = position == len(order) - 1
            if layout.fits(block(limit), 0 if is_last else reserve):
                layout.add(block(limit))
                shown += 1
                continue
            # Over budget: show as much of this file as fits, then stop.
            count = 0
            while count < limit and layout.fits(block(count + 1), reserve):
                count += 1
            if layout.fits(block(count), reserve):
                layout.add(block(count))
                shown += 1
            elif layout.fits([head], reserve):
                layout.add([head])
                shown += 1
            break
        if shown < len(order):
            note = _truncation_note(len(order) - shown, budget_tokens)
            if layout.used + len(note) <= layout.budget_chars:
                layout.add([note])
        return "\n".join(layout.lines)

    async def find_symbols_by_name(self, name: str, query: str, limit: int = 50) -> str:
        """Symbols whose name equals (first), starts with, then contains `query`, case-insensitive.

        One line each: `path:line kind signature`. `Class.method` narrows to methods of that class.
        """
        query = query.strip()
        if not query:
            raise ToolError("the symbol name is empty; give a function, class or method name (or its beginning)")
        parent: str | None = None
        if "." in query.strip("."):
            parent, _, query = query.strip(".").rpartition(".")
        rows = await self.store.search_repo_symbols(name, query, parent, max(1, limit) + 1)
        if not rows:
            files = await self.store.repo_file_count(name)
            return (f"no symbols named like {query!r} in the index of {name} ({files} files); "
                    "try grep for text, or a shorter name")
        lines = []
        for row in rows[:limit]:
            where = f"  (in {row['parent']})" if row["parent"] else ""
            lines.append(f"{row['path']}:{row['line']} {row['kind']} {row['signature']}{where}")
        if len(rows) > limit:
            lines.append(f"(more than {limit} matches; give a longer name)")
        return "\n".join(lines)


def repo_map_tools(repo_map: RepoMap, name: str, root: Path | str) -> list[Tool]:
    """Workers' look-up tool over the index of one workspace (refreshed before each search); text search is grep."""

    async def find_symbols_by_name(query: str, limit: int = 50) -> str:
        await repo_map.refresh(name, root)
        return await repo_map.find_symbols_by_name(name, query, limit=min(max(int(limit), 1), 200))

    return [
        Tool(
            "find_symbols_by_name",
            "Find functions, classes and methods by name (exact matches first, then names starting with or "
            "containing it; case-insensitive; 'Class.method' narrows to one class). Returns `path:line kind "
            "signature` lines; read the code with read_file from that line.",
            {"query": prop("string", "a symbol name or its beginning, e.g. 'parse_config' or 'Store.add'"),
             "limit": prop("integer", "most lines to return (default 50)")},
            find_symbols_by_name, ["query"],
        ),
    ]
