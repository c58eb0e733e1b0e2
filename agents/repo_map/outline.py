"""Outlines of source files: language by file name, symbols with signatures, import targets, a summary line, and the
identifiers a file references (for the definition/reference graph of agents/repo_map/ranking.py).

Python files are outlined with `ast` (classes, functions, methods with signatures, module docstring, imports).
JavaScript / TypeScript are outlined with tree-sitter when `tree-sitter`, `tree-sitter-javascript` and
`tree-sitter-typescript` are installed (their wheels carry the compiled grammars: nothing is downloaded at runtime),
including what JavaScript really defines besides declarations: member assignments (`res.send = function …`,
`exports.x = …`, `module.exports = {…}`, `Foo.prototype.x = …`), class fields and `#private` members. Without the
grammars, and for every other language, a file is indexed at file level (path, size, language) plus its references.

The outliners themselves are python_outline.py (ast) and script_outline.py (tree-sitter); this module picks one
per file, and extracts references and words the same way for every language.
"""

from __future__ import annotations

import functools
import json
import logging
import operator
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agents.repo_map.gc_pause import gc_paused
from agents.repo_map.python_outline import python_outline
from agents.repo_map.script_outline import TS_LANGUAGES, script_outline
from agents.repo_map.symbols import Symbol, one_line
from agents.sandbox.safe_paths import FolderReader

try:  # CPython's own blake2b: importing hashlib loads OpenSSL, ~4 MB more in each parse process
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - another Python
    from hashlib import blake2b

log = logging.getLogger(__name__)

# Languages whose files get symbols (the rest are indexed at file level).
SYMBOL_LANGUAGES: frozenset[str] = frozenset({"python", *TS_LANGUAGES})

MAX_FILE_BYTES = 1_000_000
BINARY_SNIFF_BYTES = 8192
BINARY = "binary"  # language recorded for a sniffed binary file: kept so it is not re-read, never shown
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
    "png jpg jpeg gif bmp ico webp tif tiff psd heic avif mp3 wav ogg oga flac m4a aac opus mp4 mov avi "
    "mkv webm zip gz tgz bz2 xz zst 7z rar tar jar war whl egg pyc pyo so dylib dll exe o a lib bin class "
    "wasm pdf doc docx xls xlsx ppt pptx odt sqlite sqlite3 db ttf otf woff woff2 eot pt pth onnx npy npz "
    "pkl pickle parquet".split()
)

SOURCE_EXTENSIONS = frozenset({"py", "pyi", "js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx"})


# --- records ---------------------------------------------------------------------------------------------------------


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
    return blake2b(data, digest_size=16).hexdigest()


def parse_files(
    root: Path, paths: Sequence[str], states: dict[str, tuple[int, int]], known_hashes: dict[str, str] | None = None
) -> list[FileOutline | SameContent | None]:
    """Outline each path (None for a file that vanished or became unreadable since the scan; `SameContent` when its
    bytes hash to `known_hashes[path]`). The cyclic garbage collector is paused meanwhile (see gc_pause.py)."""
    known_hashes = known_hashes or {}
    with gc_paused(), FolderReader(root) as reader:
        return [_parse_file(reader, path, *states[path], known_hashes.get(path)) for path in paths]


def _parse_file(
    reader: FolderReader, path: str, mtime_ns: int, size: int, known_hash: str | None = None
) -> FileOutline | SameContent | None:
    try:
        data = reader.read(path)  # never through a link: a worker may have made a folder of its worktree one
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
            summary, symbols, imports = python_outline(data, path)
        elif language in TS_LANGUAGES:
            summary, symbols, imports = script_outline(data, path, language)
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

_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]{2,}")
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


@functools.lru_cache(maxsize=1 << 12)
def word_stem(word: str) -> str:
    """A crude English stem, the same on both sides of a match: retries → retry, reloader → reload, options → option."""
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: -len(suffix)] + replacement
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":  # debugger → debugg → debug
                word = word[:-1]
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


@functools.lru_cache(maxsize=1 << 13)
def stemmed_words(name: str) -> tuple[str, ...]:
    """The stems of the words of a name, plus the whole name lower-cased when it has several words (sendfile).

    Cached: the same identifiers recur in file after file of a repository. The cache stays small: most of sympy's
    59k distinct names appear in few files, and one four times as big missed a quarter less (62k misses of ~320k
    look-ups rather than 83k), a few hundredths of a second of a build, for ~7 MB more in each parse process."""
    if name.isascii() and name.isalpha() and name.islower():  # one word (a quarter of sympy's names): no expression
        return (word_stem(name),) if len(name) >= 3 else ()
    parts = _WORD_PARTS.findall(name)
    if len(parts) == 1:
        return (word_stem(parts[0].lower()),) if len(parts[0]) >= 3 else ()
    stems = [word_stem(part.lower()) for part in parts if len(part) >= 3]
    if parts:
        stems.append(name.lower().replace("_", "").replace("-", ""))
    return tuple(stems)


def _references(data: bytes, path: str, symbols: list[Symbol]) -> tuple[dict[str, int], dict[str, int]]:
    """The identifiers a file uses besides defining them (most used first, capped), and the words in its identifiers.

    Plain dicts and one sort each rather than Counter arithmetic: this runs over every identifier of a repository."""
    counts = Counter(_IDENTIFIER.findall(data.decode("latin-1")))  # identifiers are ASCII: any 8-bit decoding works
    for name in counts.keys() & _NOT_REFERENCES:  # the fewer of the two is walked
        del counts[name]
    words: dict[str, int] = {}
    get = words.get
    for name, n in counts.items():
        for word in stemmed_words(name):
            words[word] = get(word, 0) + n
    uses = dict(counts)
    for symbol in symbols:
        if symbol.name in uses:
            uses[symbol.name] -= 1
    return _most_used(uses), _most_used(words)


def _most_used(counts: dict[str, int]) -> dict[str, int]:
    """The MAX_REFERENCES_PER_FILE most used names with a positive count, most used first (ties in first-seen order,
    as Counter.most_common)."""
    ranked = sorted(counts.items(), key=_by_count, reverse=True)[:MAX_REFERENCES_PER_FILE]
    return {name: n for name, n in ranked if n > 0}


_by_count = operator.itemgetter(1)


def _markdown_summary(data: bytes) -> str:
    for line in data[:4096].decode("utf-8", errors="replace").splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return one_line(line, 160)
    return ""
