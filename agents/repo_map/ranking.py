"""Which files and definitions of a repository matter for a request: the ranking behind the repo map.

The request is read for file names (`cli.py`, `src/flask/cli.py`, `shop.billing`), code names (`HTTPAdapter`,
`res.sendFile`, `#private`) and plain words (stemmed: "retries" meets `retry-timing.js` and `max_retries`).
Every file gets a personalization weight from those: named files most, then files defining a named identifier
(exact case before any case; `res.sendFile` means `sendFile` whose owner is `res`), then words of the file name,
then a BM25-style score of the request's words against the words of the file's identifiers, then recent changes.

Files are nodes of a graph: an edge runs from a file to each file defining an identifier it uses (weighted like
aider's repo map: √uses, ×10 for identifiers the request names and for long specific names, ×0.1 for `_private`
names and for names defined in more than five files), plus edges for resolved imports, and a weaker edge back
(a file's users are relevant to changing it). Personalized PageRank over that graph spreads the request's weight
to the code it depends on and the code that uses it; a definition's rank is the share of rank flowing to it.

Why one module over 500 lines: reading the request, weighting the files and ranking the graph are one computation
whose weights only make sense side by side.

Why one module over 500 lines: reading the request, weighting the files and ranking the graph are one computation
whose weights only make sense side by side.

PageRank is our own power iteration over numpy arrays (numpy already comes with whisper) rather than networkx: it is
the only graph algorithm we need, a sparse product per step keeps a dense 2,000-file graph under a second, and it keeps
another large dependency out of the worker's path.

Source comes before tests, fixtures, docs, examples and CI config (`.github/…`) unless the request is about tests;
a test file follows the module it tests. Ties are broken by personalization, then by folder depth, never by name
alone before relevance.

Why one module over 400 lines: the graph, the PageRank, the request terms and the per-file caps are one ranking and
are tuned together.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections import defaultdict
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from agents.repo_map.outline import SOURCE_EXTENSIONS, file_extension, stemmed_words
from agents.repo_map.symbols import Symbol

DISTINCT_MATCH_LIMIT = 12  # a word matching more files than this says nothing about which file is meant
SYMBOLS_SHOWN_PER_FILE = 12  # definitions listed under one file, the request's matches first
SYMBOL_RANKED_FILES = 300  # files whose definitions are ranked (no map shows more)
WORD_MATCHED_FILES = 60  # files whose definitions are matched word by word against the request
UBIQUITOUS_NAME_FILES = 25  # a name defined in more files than this (run, __init__) links nothing
DAMPING = 0.85
DIRECT_SHARE = 1.0  # weight of a file's own personalization in its final score, beside its PageRank
BACK_EDGE = 0.3  # weight of the reverse of a use edge
ITERATIONS = 40

_WORDS = re.compile(r"[\w@~#][\w./@~#-]*")
_IDENTIFIERS = re.compile(r"#?[A-Za-z_$][A-Za-z0-9_$]*")
_DOTTED = re.compile(r"\b([A-Za-z_$][\w$]*)\.(#?[A-Za-z_$][\w$]*)(?:\(\))?")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "not",
        "no",
        "nor",
        "if",
        "then",
        "else",
        "when",
        "while",
        "for",
        "from",
        "into",
        "onto",
        "with",
        "without",
        "within",
        "of",
        "on",
        "in",
        "at",
        "to",
        "by",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "doesn",
        "don",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "where",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "how",
        "it",
        "its",
        "it's",
        "they",
        "them",
        "their",
        "we",
        "our",
        "you",
        "your",
        "he",
        "she",
        "his",
        "her",
        "i",
        "me",
        "my",
        "mine",
        "all",
        "any",
        "some",
        "each",
        "every",
        "more",
        "most",
        "less",
        "least",
        "other",
        "such",
        "only",
        "own",
        "same",
        "so",
        "than",
        "too",
        "very",
        "just",
        "also",
        "again",
        "still",
        "yet",
        "now",
        "new",
        "old",
        "fix",
        "fixes",
        "fixed",
        "bug",
        "bugs",
        "add",
        "adds",
        "make",
        "makes",
        "use",
        "uses",
        "using",
        "get",
        "set",
        "run",
        "please",
        "file",
        "files",
        "code",
        "function",
        "functions",
        "class",
        "classes",
        "method",
        "methods",
        "test",
        "tests",
        "error",
        "errors",
        "issue",
        "issues",
        "change",
        "changes",
        "update",
        "updates",
        "thing",
        "things",
        "way",
        "need",
        "needs",
        "want",
        "wants",
        "see",
        "look",
        "find",
        "show",
        "work",
        "works",
        "working",
        "broken",
        "wrong",
        "right",
        "py",
        "js",
        "ts",
        "tsx",
        "jsx",
        "md",
        "txt",
        "dot",
        "slash",
        "line",
        "lines",
        "folder",
        "dir",
        "directory",
        "project",
        "repo",
        "repository",
        "workspace",
    ]
)
_TEST_WORDS = frozenset(
    {
        "test",
        "tests",
        "testing",
        "pytest",
        "unittest",
        "spec",
        "specs",
        "coverage",
        "fixture",
        "fixtures",
        "flaky",
        "jest",
        "mocha",
        "vitest",
    }
)
_GENERIC_STEMS = frozenset({"__init__", "__main__", "index", "init"})

# How much a kind of file counts next to source code.
SOURCE, TEST, FIXTURE, DOCS, EXAMPLE, META, DATA = "source", "test", "fixture", "docs", "example", "meta", "data"
_CLASS_WEIGHT = {SOURCE: 1.0, TEST: 0.25, FIXTURE: 0.08, DOCS: 0.15, EXAMPLE: 0.12, META: 0.04, DATA: 0.3}
_CODE_CLASSES = frozenset({SOURCE, TEST, EXAMPLE})
_CLASS_WEIGHT_FOR_TESTS = {**_CLASS_WEIGHT, TEST: 1.0, FIXTURE: 0.4, SOURCE: 0.8}
_FIXTURE_DIRS = frozenset(
    {
        "fixtures",
        "fixture",
        "testdata",
        "test_data",
        "__fixtures__",
        "__snapshots__",
        "static",
        "templates",
        "test_apps",
        "mocks",
        "__mocks__",
    }
)
_TEST_DIRS = frozenset({"test", "tests", "__tests__", "spec", "specs", "testing"})
_DOCS_DIRS = frozenset({"docs", "doc", "documentation", "man"})
_EXAMPLE_DIRS = frozenset(
    {
        "examples",
        "example",
        "playground",
        "playgrounds",
        "demo",
        "demos",
        "samples",
        "bench",
        "benchmarks",
        "benchmark",
        "scripts",
        "tutorial",
    }
)
_DOC_EXTENSIONS = frozenset({"md", "rst", "txt", "adoc"})
_TEST_NAME = re.compile(r"^(?:test_(?P<a>.+)|(?P<b>.+?)_test|(?P<c>.+?)\.(?:test|spec))$")


def file_class(path: str) -> str:
    """source | test | fixture | docs | example | meta | data, from the path alone."""
    parts = path.lower().split("/")
    folders, name = parts[:-1], parts[-1]
    if any(part.startswith(".") for part in folders) or name.startswith("."):
        return META
    stem = name.rsplit(".", 1)[0] if "." in name else name
    if any(part in _FIXTURE_DIRS for part in folders[1:]) or any(part in ("fixtures", "testdata") for part in folders):
        return FIXTURE
    if any(part in _TEST_DIRS for part in folders) or _TEST_NAME.match(stem) or stem in ("conftest", "test"):
        return TEST
    if any(part in _DOCS_DIRS for part in folders) or file_extension(name) in _DOC_EXTENSIONS:
        return DOCS
    if any(part in _EXAMPLE_DIRS for part in folders):
        return EXAMPLE
    if file_extension(name) not in SOURCE_EXTENSIONS:
        return DATA
    return SOURCE


def tested_module(path: str) -> str | None:
    """The module stem a test file is about: test_cli.py → cli, res.sendFile.js under test/ → res.sendfile."""
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower()
    match = _TEST_NAME.match(stem)
    if match:
        return match.group("a") or match.group("b") or match.group("c")
    return stem if file_class(path) == TEST else None


def module_keys(path: str) -> list[str]:
    """The names an import can use for a file: suffixes of its path without extension.

    'src/pkg/calc.py' → ['src/pkg/calc', 'pkg/calc', 'calc']; a package's `__init__.py` answers to its folder,
    an `index.js` to both itself and its folder.
    """
    folder, _, name = path.rpartition("/")
    stem = name.rsplit(".", 1)[0] if file_extension(name) in SOURCE_EXTENSIONS else name
    keys: list[str] = []
    parts = folder.split("/") if folder else []
    if stem != "__init__":
        full = parts + [stem]
        keys += ["/".join(full[i:]) for i in range(len(full))]
    if stem in ("__init__", "index") and parts:
        keys += ["/".join(parts[i:]) for i in range(len(parts))]
    return keys


class PathIndex:
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

    def mentioned(self, text: str, code_names: AbstractSet[str] = frozenset()) -> dict[str, int]:
        """Files the text names → strength (0 strongest): by path, file name, dotted/slashed module path, bare stem.

        A dotted word that is a code name (`res.sendFile`) is not read as a module path.
        """
        strength: dict[str, int] = {}

        def note(paths: list[str], score: int) -> None:
            if len(paths) > DISTINCT_MATCH_LIMIT and score > 0:
                return
            for path in paths:
                strength[path] = min(score, strength.get(path, score))

        for raw in _WORDS.findall(text):
            token = raw.rstrip(".,:;!?/-()").lower()
            token = token.removeprefix("./")
            if not token:
                continue
            note(self.by_path.get(token, []), 0)
            note(self.by_name.get(token, []), 1)
            if raw.rstrip(".,:;!?()") in code_names:
                continue
            key = token.rsplit(".", 1)[0] if file_extension(token) in SOURCE_EXTENSIONS else token
            key = key.replace(".", "/").strip("/")
            if "/" in key:
                note(self.by_key.get(key, []), 1)
            elif len(key) >= 3 and key not in _STOPWORDS and key not in _GENERIC_STEMS:
                note(list(dict.fromkeys(self.by_key.get(key, []) + self.by_stem.get(key, []))), 2)
        return strength

    def resolve(self, target: str) -> list[str]:
        """The files an import target can mean, when it is specific enough to say."""
        paths = self.by_key.get(target.lower(), [])
        return paths if len(paths) <= 3 else []


# --- the request -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """What a request text says, for ranking."""

    text: str
    identifiers: tuple[str, ...]  # code-like names, as written (`HTTPAdapter`, `sendFile`, `#private`, `res`)
    dotted: tuple[tuple[str, str], ...]  # (owner, name) of `Class.method` / `res.sendFile`
    terms: tuple[str, ...]  # stemmed words
    about_tests: bool

    @classmethod
    def parse(cls, text: str) -> Request:
        dotted = tuple(
            dict.fromkeys(
                (m.group(1), m.group(2))
                for m in _DOTTED.finditer(text)
                if file_extension(m.group(0)) not in SOURCE_EXTENSIONS | {"md", "txt", "json"}
            )
        )
        identifiers = tuple(
            dict.fromkeys(
                word
                for word in _IDENTIFIERS.findall(text)
                if len(word.lstrip("#")) >= 3 and word.lower() not in _STOPWORDS
            )
        )
        terms: dict[str, None] = {}
        for word in _IDENTIFIERS.findall(text):
            if word.lower() in _STOPWORDS:
                continue
            for stem in stemmed_words(word.lstrip("#")):
                if stem not in _STOPWORDS and len(stem) >= 3:
                    terms.setdefault(stem, None)
        lowered = {w.lower() for w in _IDENTIFIERS.findall(text)}
        return cls(text, identifiers, dotted, tuple(terms), bool(lowered & _TEST_WORDS))


# --- ranking ---------------------------------------------------------------------------------------------------------


@dataclass
class FileTerms:
    """What ranking needs of one indexed file besides its symbols (references and words, as stored: JSON).
    `rank_files` empties `references` once it has read them."""

    path: str
    references: str = "{}"
    words: str = "{}"


@dataclass
class Ranking:
    files: list[str]  # every file, most relevant first
    entries: list[tuple[str, Symbol | None]]  # files (None) and definitions, best first, per-file cap applied
    scores: dict[str, float] = field(default_factory=dict)


def pagerank(
    edges: dict[str, dict[str, float]], nodes: list[str], personalization: dict[str, float]
) -> dict[str, float]:
    """Personalized PageRank by power iteration over `edges` and their reverses (weighted BACK_EDGE); the rank of
    dangling nodes returns to the personalization.

    The edges are gathered into flat typed arrays (no Python int or float per edge), and their reverses are never
    stored: each step runs the edges once forwards and once backwards (sympy: ~140k edges, which as Python lists
    doubled for the reverses held ~25 MB at the map's peak). `edges` is emptied once read (the caller's biggest
    structure, ~10 MB on sympy, is not held beside the arrays)."""
    count = len(nodes)
    position = {node: i for i, node in enumerate(nodes)}
    # 32-bit positions: half the bytes of the two biggest arrays (no repository has 2**31 files)
    sources, targets, weights = array("i"), array("i"), array("d")
    for source, outgoing in edges.items():
        if source not in position:  # a partial index read while a build stores: rows and symbols from two moments
            continue
        at = position[source]
        for target, weight in outgoing.items():
            if weight > 0 and target in position:
                sources.append(at)
                targets.append(position[target])
                weights.append(weight)
    edges.clear()
    # Imported here, not at the top: starting the bot, a runner or a CLI command draws no map yet. And only now, with
    # the edges let go: the import's own objects (~7 MB) take their place instead of adding to the peak.
    import numpy as np

    src = np.frombuffer(sources, dtype=np.int32) if sources else np.zeros(0, dtype=np.int32)
    dst = np.frombuffer(targets, dtype=np.int32) if targets else np.zeros(0, dtype=np.int32)
    weight_of = np.frombuffer(weights, dtype=float) if weights else np.zeros(0)
    # a file's users matter to a change of it: every edge also runs back, weaker
    out = np.bincount(src, weights=weight_of, minlength=count) + np.bincount(
        dst, weights=BACK_EDGE * weight_of, minlength=count
    )
    # The per-edge arrays are computed into buffers of their own (the same arithmetic, in the same order, as
    # `weight / out[src]` and `BACK_EDGE * weight / out[dst]`): on sympy each temporary is ~1 MB at the map's peak.
    share = np.divide(weight_of, out[src])
    back_share = np.multiply(weight_of, BACK_EDGE)
    np.divide(back_share, out[dst], out=back_share)
    del weights, weight_of  # read into the shares: not held through the iterations
    teleport = np.array([personalization.get(node, 0.0) for node in nodes], dtype=float)
    teleport = teleport / teleport.sum() if teleport.sum() > 0 else np.full(count, 1.0 / count)
    dangling = out == 0
    rank = teleport.copy()
    along = np.empty(len(share))  # each step's products per edge, in one buffer rather than two fresh arrays
    for _ in range(ITERATIONS):
        np.multiply(rank.take(src), share, out=along)
        flow = np.bincount(dst, weights=along, minlength=count)
        np.multiply(rank.take(dst), back_share, out=along)
        flow += np.bincount(src, weights=along, minlength=count)
        fresh = DAMPING * flow + (1 - DAMPING + DAMPING * rank[dangling].sum()) * teleport
        converged = np.abs(fresh - rank).sum() < 1e-9
        rank = fresh
        if converged:
            break
    return dict(zip(nodes, rank.tolist(), strict=True))


def word_keys(request_text: str) -> list[str]:
    """The strings a file's words (as stored: a JSON object) contain when they hold a word of the request."""
    return _word_keys(Request.parse(request_text).terms)


def _word_keys(terms: Iterable[str]) -> list[str]:
    return [f'"{term}":' for term in terms]  # a JSON object holds a word as `"word":`


def rank_files(
    paths: list[str],
    symbols: dict[str, list[Symbol]],
    terms: list[FileTerms],
    imports: list[tuple[str, str]],
    request_text: str,
    recent: Sequence[str] = (),
) -> Ranking:
    """Every file and definition, most relevant to `request_text` first (see the module docstring).

    `terms` (their references) and `imports` are emptied as they are read: the caller hands them over.

    Why one long function: the signals (named paths, dotted names, terms, imports, recent files) feed one
    personalisation vector and one PageRank; split apart, each part would need all of its locals.
    """
    if not paths:
        return Ranking([], [])
    request = Request.parse(request_text)
    index = PathIndex(paths)
    dotted_names = {f"{owner}.{name}" for owner, name in request.dotted}
    named = index.mentioned(request_text, dotted_names)
    class_weight = _CLASS_WEIGHT_FOR_TESTS if request.about_tests else _CLASS_WEIGHT
    kind = {p: file_class(p) for p in paths}
    weight_of = {p: class_weight[kind[p]] for p in paths}
    # A file the request names is wanted whatever its kind; a bare word ("config") counts as naming a test, doc or
    # fixture only when it names no source file.
    bare_source = any(strength == 2 and kind[p] == SOURCE for p, strength in named.items())
    for path, strength in named.items():
        if strength <= 1 or not bare_source:
            weight_of[path] = 1.0

    # Definitions: name → files defining it (a tuple: most names have one file, and a set of one is 4× the size).
    defining: dict[str, list[str]] = defaultdict(list)
    for path, file_symbols in symbols.items():
        for symbol in file_symbols:
            files = defining[symbol.name]
            if not files or files[-1] != path:  # a file's symbols come together
                files.append(path)
    defined_in = {name: tuple(files) for name, files in defining.items()}
    del defining
    wanted = set(request.identifiers)
    wanted_lower = {w.lower() for w in wanted}

    personal: dict[str, float] = defaultdict(float)
    for path, strength in named.items():
        personal[path] += (100.0, 60.0, 25.0)[min(strength, 2)]
    exact_match: dict[str, set[str]] = defaultdict(set)  # path → names of the request it defines (for display)
    for path, file_symbols in symbols.items():
        for symbol in file_symbols:
            name = symbol.name
            if name in wanted or name.lower() in wanted_lower:
                spread = len(defined_in[name])
                if spread > DISTINCT_MATCH_LIMIT:
                    continue
                exact = name in wanted
                owner_match = any(name == n and (symbol.parent or "").split(".")[-1] == o for o, n in request.dotted)
                name_score = (40.0 if owner_match else 0.0) + (20.0 if exact else 6.0) * min(
                    1.0, len(name) / 8
                ) / spread
                personal[path] += name_score
                exact_match[path].add(name)

    # Words: file-name words, then BM25-style over the words of each file's identifiers.
    query = set(request.terms)
    idf: dict[str, float] = {}
    if query:
        for path in paths:
            folder, _, name = path.rpartition("/")
            hits_name = query.intersection(stemmed_words(name.rsplit(".", 1)[0] if "." in name[1:] else name))
            hits_folder = query.intersection(w for part in folder.split("/") for w in stemmed_words(part))
            if hits_name or hits_folder:
                personal[path] += 6.0 * len(hits_name) + 1.5 * len(hits_folder)
        frequencies: dict[str, dict[str, int]] = {}
        document_frequency: dict[str, int] = defaultdict(int)
        keys = _word_keys(query)  # decode only the files whose words hold one
        for row in terms:
            if not row.words or not any(key in row.words for key in keys):
                continue
            words = json.loads(row.words)
            found = {t: words[t] for t in query if t in words}
            if found:
                frequencies[row.path] = found
                for term in found:
                    document_frequency[term] += 1
        total = len(paths)
        idf = {term: math.log(1 + total / count) for term, count in document_frequency.items()}
        for path, found in frequencies.items():
            word_score = 0.0
            for term, uses in found.items():
                word_score += idf[term] * uses / (uses + 2.0)
            personal[path] += 2.0 * word_score
    for position, path in enumerate(recent):
        personal[path] += 1.0 / (1 + position)
    personal = {p: w * weight_of[p] for p, w in personal.items() if p in weight_of and w > 0}

    # The graph: who uses whose definitions, and imports (users → definers; pagerank adds the weaker edges back).
    # Imports first resolved to the files they mean (most targets name no indexed file: `module/Name`), so the rows
    # are let go before the references' edges grow (sympy: ~46k rows, ~5 MB, held through the ranking's peak
    # otherwise); their edges are still added after the references' ones, in the same order (the same sums).
    resolved = [(path, definer) for path, target in imports for definer in index.resolve(target) if definer != path]
    imports.clear()
    edges: dict[str, dict[str, float]] = defaultdict(dict)
    # user → (names used, their weights): two flat lists per user rather than a tuple per use (sympy: ~90k uses)
    uses_of: dict[str, tuple[list[str], array[float]]] = {}
    name_weight: dict[str, float] = {}  # per defined name, once (a repository references them ~10x as often)
    # each defined name as one string: the names a file's references decode to are not kept (sympy: ~90k strings)
    one_name: dict[str, str] = {}
    for name, definers in defined_in.items():
        if len(definers) > UBIQUITOUS_NAME_FILES:
            continue
        multiplier = 1.0
        if name in wanted:
            multiplier *= 10
        if len(name) >= 8 and ("_" in name or any(c.isupper() for c in name[1:])):
            multiplier *= 10
        if name.startswith("_"):
            multiplier *= 0.1
        if len(definers) > 5:
            multiplier *= 0.1
        name_weight[name] = multiplier
        one_name[name] = name
    sqrt, defined_here = math.sqrt, name_weight.__contains__
    for row in terms:
        user = row.path
        if kind.get(user) not in _CODE_CLASSES:  # prose and data mention names; they do not use them
            continue
        references = json.loads(row.references) if row.references else {}
        row.references = ""  # read once: its text is not held for the rest of the ranking
        targets = edges[user]
        names, weights = uses_of[user] = ([], array("d"))
        for name in filter(defined_here, references):  # most names are defined elsewhere: skipped in C
            weight = name_weight[name] * sqrt(references[name])
            for definer in defined_in[name]:
                if definer != user:
                    targets[definer] = targets.get(definer, 0.0) + weight
            names.append(one_name[name])
            weights.append(weight)
    for path, definer in resolved:
        edges[path][definer] = edges[path].get(definer, 0.0) + 1.0
    del resolved
    del one_name, name_weight, defined_here, index  # the graph is built: let go before PageRank's peak (numpy's import)
    out_of = {user: sum(targets.values()) or 1.0 for user, targets in edges.items()}
    rank = pagerank(edges, paths, personal)  # consumes `edges`: the graph is held once, as arrays, from here on

    # Definition ranks: the share of each user's rank that flows to a definition.
    definition_rank: dict[tuple[str, str], float] = defaultdict(float)
    for user, (names, weights) in uses_of.items():
        out = out_of.get(user, 1.0)
        for name, weight in zip(names, weights):
            for definer in defined_in[name]:
                if definer != user:
                    definition_rank[(definer, name)] += rank[user] * weight / out

    # The request's own evidence counts beside the graph's: a dense graph must not drown a file the request names.
    direct = sum(personal.values()) or 1.0
    score = {p: (rank[p] + DIRECT_SHARE * personal.get(p, 0.0) / direct) * weight_of[p] for p in paths}
    _pair_tests_with_modules(paths, score, kind, request.about_tests)
    order = sorted(paths, key=lambda p: (-score[p], -personal.get(p, 0.0), p.count("/"), p))

    entries: list[tuple[float, int, str, Symbol | None]] = []
    for position, path in enumerate(order):
        file_score = score[path]
        entries.append((file_score, position, path, None))
        if position >= SYMBOL_RANKED_FILES:  # far down the order: the file's name only
            continue
        file_symbols = symbols.get(path, [])
        hits = {s.name: _term_hits(s, idf) for s in file_symbols} if position < WORD_MATCHED_FILES and idf else {}
        chosen = _chosen_symbols(file_symbols, exact_match.get(path, set()), hits, definition_rank, path)
        best = max((definition_rank.get((path, s.name), 0.0) for s in chosen), default=0.0) or 1.0
        best_hit = max(hits.values(), default=0.0) or 1.0
        for rank_in_file, symbol in enumerate(chosen):
            if symbol.name in exact_match.get(path, ()):
                share = 0.95
            elif hits.get(symbol.name):
                share = 0.55 + 0.35 * hits[symbol.name] / best_hit
            else:
                share = 0.1 + 0.4 * definition_rank.get((path, symbol.name), 0.0) / best - 0.005 * rank_in_file
            entries.append((file_score * share, position, path, symbol))
    entries.sort(key=lambda e: (-e[0], e[1]))
    return Ranking(order, [(path, symbol) for _, _, path, symbol in entries], score)


def _term_hits(symbol: Symbol, idf: dict[str, float]) -> float:
    """The request's words a definition's name (counted twice) and signature carry, the rarer the more."""
    words = set(stemmed_words(symbol.name))
    in_signature = {w for name in _IDENTIFIERS.findall(symbol.signature) for w in stemmed_words(name)}
    return sum(2 * idf[w] for w in words if w in idf) + sum(idf[w] for w in in_signature - words if w in idf)


def _chosen_symbols(
    file_symbols: list[Symbol],
    matches: set[str],
    hits: dict[str, float],
    definition_rank: dict[tuple[str, str], float],
    path: str,
) -> list[Symbol]:
    """At most SYMBOLS_SHOWN_PER_FILE definitions of a file: the request's names, then those carrying its words,
    then the most used, public before private."""

    def key(item: tuple[int, Symbol]) -> tuple[int, float, float, int, int]:
        position, symbol = item
        private = symbol.name.startswith(("_", "#")) and not symbol.name.startswith("__")
        return (
            symbol.name not in matches,
            -hits.get(symbol.name, 0),
            -definition_rank.get((path, symbol.name), 0.0),
            private,
            position if symbol.kind != "field" else position + 10_000,
        )

    ranked = sorted(enumerate(file_symbols), key=key)[:SYMBOLS_SHOWN_PER_FILE]
    return [symbol for _, symbol in ranked]


def _pair_tests_with_modules(
    paths: list[str], score: dict[str, float], kind: dict[str, str], about_tests: bool
) -> None:
    """A test file ranks just after the module it tests (closer when the request is about tests)."""
    modules: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        if kind[path] == SOURCE:
            stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower()
            modules[stem].append(path)
    factor = 0.9 if about_tests else 0.3
    for path in paths:
        if kind[path] != TEST:
            continue
        module = tested_module(path)
        candidates = modules.get(module or "", []) or modules.get((module or "").rsplit(".", 1)[0], [])
        if module and candidates:
            paired = max(score[c] for c in candidates) * factor
            score[path] = max(score[path], paired)
