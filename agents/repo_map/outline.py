"""Outlines of source files: language by file name, symbols with signatures, import targets, a summary line, and the
identifiers a file references (for the definition/reference graph of agents/repo_map/ranking.py).

Python files are outlined with `ast` (classes, functions, methods with signatures, module docstring, imports).
JavaScript / TypeScript are outlined with tree-sitter when `tree-sitter`, `tree-sitter-javascript` and
`tree-sitter-typescript` are installed (their wheels carry the compiled grammars: nothing is downloaded at runtime),
including what JavaScript really defines besides declarations: member assignments (`res.send = function …`,
`exports.x = …`, `module.exports = {…}`, `Foo.prototype.x = …`), class fields and `#private` members. Without the
grammars, and for every other language, a file is indexed at file level (path, size, language) plus its references.

Why one module over 400 lines: the Python (ast) and JS/TS (tree-sitter) outliners produce the same records and share
their helpers.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import logging
import posixpath
import re
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
MAX_REFERENCES_PER_FILE = 400  # distinct identifiers kept per file, most used first


LANGUAGE_BY_EXTENSION: dict[str, str] = {
    "py": "python",
    "pyi": "python",
    "js": "javascript",
    "mjs": "javascript",
    "cjs": "javascript",
    "jsx": "javascript",
    "ts": "typescript",
    "mts": "typescript",
    "cts": "typescript",
    "tsx": "tsx",
    "go": "go",
    "rs": "rust",
    "java": "java",
    "kt": "kotlin",
    "kts": "kotlin",
    "scala": "scala",
    "rb": "ruby",
    "php": "php",
    "cs": "csharp",
    "swift": "swift",
    "m": "objc",
    "dart": "dart",
    "c": "c",
    "h": "c",
    "cc": "cpp",
    "cpp": "cpp",
    "cxx": "cpp",
    "hpp": "cpp",
    "hh": "cpp",
    "lua": "lua",
    "r": "r",
    "jl": "julia",
    "ex": "elixir",
    "exs": "elixir",
    "erl": "erlang",
    "hs": "haskell",
    "sh": "shell",
    "bash": "shell",
    "zsh": "shell",
    "ps1": "powershell",
    "html": "html",
    "htm": "html",
    "css": "css",
    "scss": "scss",
    "sass": "sass",
    "less": "less",
    "vue": "vue",
    "svelte": "svelte",
    "sql": "sql",
    "graphql": "graphql",
    "proto": "protobuf",
    "md": "markdown",
    "rst": "rst",
    "txt": "text",
    "json": "json",
    "yaml": "yaml",
    "yml": "yaml",
    "toml": "toml",
    "ini": "ini",
    "cfg": "ini",
    "xml": "xml",
}
LANGUAGE_BY_NAME: dict[str, str] = {"Makefile": "make", "Dockerfile": "docker", "Justfile": "just"}

# Never opened: their extension says they are not text.
BINARY_EXTENSIONS = frozenset(
    {
        "png",
        "jpg",
        "jpeg",
        "gif",
        "bmp",
        "ico",
        "webp",
        "tif",
        "tiff",
        "psd",
        "heic",
        "avif",
        "mp3",
        "wav",
        "ogg",
        "oga",
        "flac",
        "m4a",
        "aac",
        "opus",
        "mp4",
        "mov",
        "avi",
        "mkv",
        "webm",
        "zip",
        "gz",
        "tgz",
        "bz2",
        "xz",
        "zst",
        "7z",
        "rar",
        "tar",
        "jar",
        "war",
        "whl",
        "egg",
        "pyc",
        "pyo",
        "so",
        "dylib",
        "dll",
        "exe",
        "o",
        "a",
        "lib",
        "bin",
        "class",
        "wasm",
        "pdf",
        "doc",
        "docx",
        "xls",
        "xlsx",
        "ppt",
        "pptx",
        "odt",
        "sqlite",
        "sqlite3",
        "db",
        "ttf",
        "otf",
        "woff",
        "woff2",
        "eot",
        "pt",
        "pth",
        "onnx",
        "npy",
        "npz",
        "pkl",
        "pickle",
        "parquet",
    }
)

SOURCE_EXTENSIONS = frozenset({"py", "pyi", "js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx"})


# --- records ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Symbol:
    """One function, class, method or exported constant of a file."""

    name: str
    kind: str  # function | class | method | field | const | interface | type | enum
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
    content_hash: str = ""
    references: str = "{}"  # JSON: identifier → uses, the most used first (JSON keeps a big refresh small)
    words: str = "{}"  # JSON: stems of the words of the identifiers → uses


@dataclass(frozen=True)
class SameContent:
    """A file whose mtime or size changed but whose bytes did not (a fresh checkout): nothing to re-parse."""

    path: str
    mtime_ns: int
    size: int


def file_extension(name: str) -> str:
    dot = name.rfind(".")
    return name[dot + 1 :].lower() if dot > 0 else ""


def language_for(path: str) -> str | None:
    name = path.rsplit("/", 1)[-1]
    return LANGUAGE_BY_NAME.get(name) or LANGUAGE_BY_EXTENSION.get(file_extension(name))


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def parse_files(
    root: Path, paths: Sequence[str], states: dict[str, tuple[int, int]], known_hashes: dict[str, str] | None = None
) -> list[FileOutline | SameContent | None]:
    """Outline each path (None for a file that vanished or became unreadable since the scan; `SameContent` when its
    bytes hash to `known_hashes[path]`)."""
    known_hashes = known_hashes or {}
    return [_parse_file(root, path, *states[path], known_hashes.get(path)) for path in paths]


def _parse_file(
    root: Path, path: str, mtime_ns: int, size: int, known_hash: str | None = None
) -> FileOutline | SameContent | None:
    try:
        data = (root / path).read_bytes()
    except OSError:
        return None
    digest = content_hash(data)
    if digest == known_hash:
        return SameContent(path, mtime_ns, size)
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return FileOutline(path, mtime_ns, size, BINARY, content_hash=digest)
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
    except Exception:
        log.warning("repo map: could not outline %s; indexed without symbols", path, exc_info=True)
        summary, symbols, imports = "", [], []
    references, words = _references(data, path, symbols)
    return FileOutline(
        path,
        mtime_ns,
        size,
        language,
        summary[:160],
        tuple(symbols[:MAX_SYMBOLS_PER_FILE]),
        tuple(dict.fromkeys(imports))[:MAX_IMPORTS_PER_FILE],
        digest,
        json.dumps(references, separators=(",", ":")),
        json.dumps(words, separators=(",", ":")),
    )


# --- references and words --------------------------------------------------------------------------------------------

_IDENTIFIER = re.compile(rb"[A-Za-z_$][A-Za-z0-9_$]{2,}")
_WORD_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_NOT_REFERENCES = frozenset(
    [
        "False",
        "None",
        "True",
        "and",
        "as",
        "assert",
        "async",
        "await",
        "break",
        "class",
        "continue",
        "def",
        "del",
        "elif",
        "else",
        "except",
        "finally",
        "for",
        "from",
        "global",
        "import",
        "lambda",
        "nonlocal",
        "not",
        "pass",
        "raise",
        "return",
        "try",
        "while",
        "with",
        "yield",
        "self",
        "cls",
        "case",
        "match",
        "var",
        "let",
        "const",
        "function",
        "new",
        "this",
        "typeof",
        "instanceof",
        "void",
        "delete",
        "throw",
        "catch",
        "switch",
        "default",
        "export",
        "extends",
        "super",
        "null",
        "undefined",
        "true",
        "false",
        "static",
        "get",
        "set",
        "public",
        "private",
        "protected",
        "readonly",
        "interface",
        "type",
        "enum",
        "implements",
        "string",
        "number",
        "boolean",
        "any",
        "unknown",
        "never",
        "object",
        "require",
        "module",
        "exports",
        "prototype",
    ]
)


def split_words(name: str) -> list[str]:
    """Lower-case words of an identifier or file name: split on `_`, `-`, `.`, `/` and case ('HTTPAdapter' → http,
    adapter)."""
    return [part.lower() for part in _WORD_PARTS.findall(name)]


_SUFFIXES = (("ies", "y"), ("ing", ""), ("ed", ""), ("er", ""), ("es", ""), ("s", ""))


@functools.lru_cache(maxsize=1 << 16)
def word_stem(word: str) -> str:
    """A crude English stem, the same on both sides of a match: retries → retry, reloader → reload, options → option."""
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: -len(suffix)] + replacement
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":  # debugger → debugg → debug
                word = word[:-1]
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def stemmed_words(name: str) -> list[str]:
    """The stems of the words of a name, plus the whole name lower-cased when it has several words (sendfile)."""
    parts = split_words(name)
    stems = [word_stem(part) for part in parts if len(part) >= 3]
    if len(parts) > 1:
        stems.append(name.lower().replace("_", "").replace("-", ""))
    return stems


def _references(data: bytes, path: str, symbols: list[Symbol]) -> tuple[dict[str, int], dict[str, int]]:
    """The identifiers a file uses besides defining them (most used first, capped), and the words in its identifiers."""
    counts = Counter(m.decode("ascii") for m in _IDENTIFIER.findall(data))
    for name in _NOT_REFERENCES:
        counts.pop(name, None)
    uses = Counter(counts)
    uses.subtract(symbol.name for symbol in symbols)
    references = {name: n for name, n in uses.most_common(MAX_REFERENCES_PER_FILE) if n > 0}
    words: Counter[str] = Counter()
    for name, uses in counts.items():
        for word in stemmed_words(name):
            words[word] += uses
    return references, dict(words.most_common(MAX_REFERENCES_PER_FILE))


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

_SHOWN_DECORATORS = frozenset(
    {
        "property",
        "staticmethod",
        "classmethod",
        "cached_property",
        "abstractmethod",
        "overload",
        "contextmanager",
        "asynccontextmanager",
        "dataclass",
        "setter",
    }
)


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
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
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
        elif kind == "expression_statement" and node.named_children:
            expression = node.named_children[0]
            if expression.type == "assignment_expression":
                self.assignment(expression, start)

    def assignment(self, node: Any, start: int) -> None:
        """`obj.name = function …`, `Foo.prototype.name = …`, `exports.name = …` and `module.exports = …`."""
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is None or right is None:
            return
        if right.type == "assignment_expression":  # exports = module.exports = createApplication
            self.assignment(right, start)
        if left.type != "member_expression":
            return
        owner_node, name_node = left.child_by_field_name("object"), left.child_by_field_name("property")
        if owner_node is None or name_node is None or owner_node.type not in ("identifier", "member_expression"):
            return
        owner, name = self.node_text(owner_node), self.node_text(name_node)
        is_function = right.type in _FUNCTION_VALUES
        signature = self.text(start, self._body_start(right) if is_function else left.end_byte)
        if owner == "module" and name == "exports":
            if right.type == "object":
                self.exported_object(right)
            elif is_function or right.type in _CLASS_DECLARATIONS:
                inner = right.child_by_field_name("name")
                self.add(
                    self.node_text(inner) if inner is not None else "module.exports",
                    "function" if is_function else "class",
                    node,
                    signature,
                )
        elif owner in ("exports", "module.exports"):
            self.add(name, "function" if is_function else "const", node, signature)
        elif owner.endswith(".prototype"):
            self.add(name, "method", node, signature, owner[: -len(".prototype")])
        elif is_function:
            self.add(name, "method", node, signature, owner)

    def exported_object(self, node: Any) -> None:
        """The members of `module.exports = { … }`."""
        for member in node.named_children:
            if member.type == "pair":
                key, value = member.child_by_field_name("key"), member.child_by_field_name("value")
                if key is None or value is None:
                    continue
                is_function = value.type in _FUNCTION_VALUES
                end = self._body_start(value) if is_function else key.end_byte
                self.add(
                    self.node_text(key).strip("'\""),
                    "function" if is_function else "const",
                    member,
                    "module.exports." + self.text(member.start_byte, end),
                )
            elif member.type == "method_definition":
                name = member.child_by_field_name("name")
                if name is not None:
                    self.add(
                        self.node_text(name),
                        "function",
                        member,
                        "module.exports." + self.head(member.start_byte, member),
                    )
            elif member.type == "shorthand_property_identifier":
                self.add(self.node_text(member), "const", member, "module.exports." + self.node_text(member))

    def class_declaration(self, node: Any, start: int, default_name: str | None = None) -> None:
        name_node = node.child_by_field_name("name")
        name = self.node_text(name_node) if name_node is not None else default_name
        if name is None:
            return
        self.add(name, "class", node, self.head(start, node))
        body = node.child_by_field_name("body")
        for member in body.named_children if body is not None else ():
            member_name = member.child_by_field_name("name") or member.child_by_field_name("property")
            if member_name is None:
                continue
            if member.type in _METHODS:
                self.add(self.node_text(member_name), "method", member, self.head(member.start_byte, member), name)
            elif member.type in ("public_field_definition", "field_definition"):
                value = member.child_by_field_name("value")
                if value is not None and value.type in _FUNCTION_VALUES:
                    signature = self.text(member.start_byte, self._body_start(value))
                    self.add(self.node_text(member_name), "method", member, signature, name)
                else:  # a plain field: its declaration without the initial value
                    end = value.start_byte if value is not None else member.end_byte
                    signature = self.text(member.start_byte, end).rstrip().rstrip("=;").rstrip()
                    self.add(self.node_text(member_name), "field", member, signature, name)

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
        target
        for spec in _REQUIRE.findall(data)
        if (target := _script_import_target(spec.decode("utf-8", "replace"), path))
    )
    return summary, outliner.symbols, outliner.imports
