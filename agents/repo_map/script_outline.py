"""JavaScript / TypeScript outlines with tree-sitter, when `tree-sitter`, `tree-sitter-javascript` and
`tree-sitter-typescript` are installed (their wheels carry the compiled grammars): declarations plus what JavaScript
really defines besides them (member assignments, `module.exports = {…}`, prototype methods, class fields)."""

from __future__ import annotations

import importlib.util
import logging
import posixpath
import re
import threading
from typing import TYPE_CHECKING, Any

from agents.repo_map.symbols import Symbol, one_line

if TYPE_CHECKING:
    import tree_sitter
else:
    tree_sitter = None  # imported with the grammars (_grammar)

log = logging.getLogger(__name__)

# Optional: symbol outlines for JavaScript / TypeScript. The grammars load on first use (a parse process of a
# Python-only repository never loads them: less memory per process); an incompatible build leaves files file-level.
TS_LANGUAGES: frozenset[str] = (
    frozenset({"javascript", "typescript", "tsx"})
    if all(
        importlib.util.find_spec(name) for name in ("tree_sitter", "tree_sitter_javascript", "tree_sitter_typescript")
    )
    else frozenset()
)
# The compiled grammars, loaded once per process: a pure function of the installed tree-sitter packages
_grammars: dict[str, Any] | None = None
_grammars_lock = threading.Lock()


def _grammar(language: str) -> Any:
    """The tree-sitter Language of `language`, loading the grammars once; None when they cannot load."""
    global _grammars, tree_sitter
    with _grammars_lock:
        if _grammars is None:
            try:
                import tree_sitter as ts
                import tree_sitter_javascript
                import tree_sitter_typescript

                tree_sitter = ts
                _grammars = {
                    "javascript": tree_sitter.Language(tree_sitter_javascript.language()),
                    "typescript": tree_sitter.Language(tree_sitter_typescript.language_typescript()),
                    "tsx": tree_sitter.Language(tree_sitter_typescript.language_tsx()),
                }
            except Exception:  # noqa: BLE001 - an incompatible build: file-level only
                log.warning("repo map: tree-sitter grammars do not load; JS/TS files indexed at file level")
                _grammars = {}
    return _grammars.get(language)


_TS_LOCAL = threading.local()  # each thread's parsers (`_ts_parser`): made from the grammars, nothing else
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
        grammar = _grammar(language)
        parsers[language] = tree_sitter.Parser(grammar) if grammar is not None else None
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
        self.symbols.append(Symbol(name, kind, node.start_point[0] + 1, one_line(signature), parent))

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
        return int(body.start_byte if body is not None else function.end_byte)

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


def script_outline(data: bytes, path: str, language: str) -> tuple[str, list[Symbol], list[str]]:
    parser = _ts_parser(language)
    if parser is None:
        return "", [], []
    tree = parser.parse(data)
    outliner = _ScriptOutliner(data, path)
    summary = ""
    children = tree.root_node.named_children
    if children and children[0].type == "comment":
        comment = outliner.node_text(children[0])
        for line in comment.splitlines():
            line = line.strip().lstrip("/*!").strip()
            line = line[:-2].rstrip() if line.endswith("*/") else line
            if line:
                summary = one_line(line, 160)
                break
    for child in children:
        outliner.statement(child, child.start_byte, False)
    outliner.imports.extend(
        target
        for spec in _REQUIRE.findall(data)
        if (target := _script_import_target(spec.decode("utf-8", "replace"), path))
    )
    return summary, outliner.symbols, outliner.imports
