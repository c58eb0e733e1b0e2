"""Python outlines with `ast`: classes, functions and methods with signatures, the module docstring, imports.

`ast` parses the file's headers (its definitions' decorators and headers, its imports, its first statement; found by
python_headers.py), the same outline for a fraction of the parsing. When the scan cannot follow the file, or what it
copied out does not parse into the definitions it found, the tree is parsed from the file's skeleton instead
(function bodies blanked but for their imports, python_skeleton.py); a skeleton that does not parse falls back to the
whole file."""

from __future__ import annotations

import ast
import posixpath
import sys
from collections.abc import Iterator

from agents.repo_map.python_headers import SHOWN_DECORATORS, headers
from agents.repo_map.python_skeleton import skeleton
from agents.repo_map.symbols import Symbol, one_line


def _decorators(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    shown = []
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in SHOWN_DECORATORS:
            shown.append(f"@{name} ")
    return "".join(shown)


def _arguments(args: ast.arguments) -> str:
    """`ast.unparse` of a function's arguments. Most are plain names (sympy: 28k of 34k functions), which it writes
    joined by ", ": that text is made here directly, without an unparser walking the nodes."""
    plain = not (args.posonlyargs or args.kwonlyargs or args.vararg or args.kwarg or args.defaults)
    if plain and all(arg.annotation is None for arg in args.args):
        return ", ".join([arg.arg for arg in args.args])
    return ast.unparse(args)


def _python_signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return one_line(f"{_decorators(node)}{prefix} {node.name}({_arguments(node.args)}){returns}")


def _python_class_signature(node: ast.ClassDef) -> str:
    bases = [ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords]
    return one_line(f"{_decorators(node)}class {node.name}" + (f"({', '.join(bases)})" if bases else ""))


# statements holding other statements in the same scope (the rest hold none: their nodes are not visited)
_COMPOUND = tuple(
    getattr(ast, name)
    for name in ("If", "For", "AsyncFor", "While", "Try", "TryStar", "With", "AsyncWith", "Match")
    if hasattr(ast, name)
)


def _nested_bodies(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement lists under a compound statement that still belong to the enclosing scope (if/try/with/…), in
    the file's order (a `try`'s handlers before its `else`)."""
    body = getattr(node, "body", None)
    if isinstance(body, list):
        yield body
    for handler in getattr(node, "handlers", ()):
        yield handler.body
    for case in getattr(node, "cases", ()):
        yield case.body
    for name in ("orelse", "finalbody"):
        body = getattr(node, name, None)
        if isinstance(body, list):
            yield body


def _parse(data: bytes, path: str) -> ast.Module | None:
    """The file's syntax tree, from its skeleton (python_skeleton.py) when that parses, else from the whole file."""
    try:
        return ast.parse(skeleton(data.decode("utf-8-sig")), filename=path)
    except (SyntaxError, ValueError, UnicodeDecodeError):
        pass
    try:
        return ast.parse(data, filename=path)
    except (SyntaxError, ValueError):
        return None


def _summary(tree: ast.Module) -> str:
    doc = ast.get_docstring(tree, clean=True) or ""
    return one_line(doc.strip().split("\n", 1)[0], 160) if doc.strip() else ""


def _headers_outline(data: bytes, path: str) -> tuple[str, list[Symbol], list[str]] | None:
    """The outline from the file's headers alone (python_headers.py), or None when they cannot tell it."""
    try:
        found = headers(data.decode("utf-8-sig"))
        if found is None:
            return None
        definitions = ast.parse(found.definitions_source, filename=path).body
        statements = ast.parse(found.imports_source, filename=path).body
        opening = ast.parse(found.first_statement, filename=path)
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return None
    parsed = iter(definitions)
    symbols: list[Symbol] = []
    names: list[str] = []  # each definition's dotted name (a class's is its methods' parent)
    for line, is_class, enclosing, name, signature in found.definitions:
        parent = names[enclosing] if enclosing is not None else None
        if not signature:  # read from its header's tree
            node = next(parsed, None)
            if is_class and isinstance(node, ast.ClassDef):
                signature = _python_class_signature(node)
            elif not is_class and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                signature = _python_signature(node)
            else:
                return None  # copied out wrongly: another statement than the scan found
            name = node.name
        names.append(f"{parent}.{name}" if parent else name)
        symbols.append(
            Symbol(name, "class" if is_class else "method" if parent else "function", line, signature, parent)
        )
    if next(parsed, None) is not None:
        return None
    package = posixpath.dirname(path)
    imports: list[str] = []
    nodes = [node for node in statements if isinstance(node, (ast.Import, ast.ImportFrom))]
    # a statement read from the source holds the nodes from its first line to the next one's (`import a; import b`)
    firsts = [statement for statement in found.imports if isinstance(statement, int)] + [sys.maxsize]
    taken = read = 0
    for statement in found.imports:
        if isinstance(statement, int):
            read += 1
            while taken < len(nodes) and nodes[taken].lineno < firsts[read]:
                imports.extend(_python_import_targets(nodes[taken], package))
                taken += 1
        else:
            imports.extend(_import_targets(*statement, package))
    return _summary(opening), symbols, imports


def python_outline(data: bytes, path: str) -> tuple[str, list[Symbol], list[str]]:
    outline = _headers_outline(data, path)
    if outline is not None:
        return outline
    tree = _parse(data, path)
    if tree is None:  # not valid for this Python: file-level only
        return "", [], []
    summary = _summary(tree)
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
            elif isinstance(node, _COMPOUND):
                for nested in _nested_bodies(node):
                    visit(nested, parent, in_function)

    visit(tree.body, None, False)
    return summary, symbols, imports


def _python_import_targets(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    names = [alias.name for alias in node.names]
    if isinstance(node, ast.Import):
        return _import_targets(False, None, 0, names, package)
    return _import_targets(True, node.module, node.level, names, package)


def _import_targets(is_from: bool, module: str | None, level: int, names: list[str], package: str) -> list[str]:
    """What an import statement names, as slash paths: `import a.b` → a/b; `from .m import x` → pkg/m, pkg/m/x."""
    if not is_from:
        return [name.replace(".", "/") for name in names]
    module = (module or "").replace(".", "/")
    if level:
        base = package
        for _ in range(level - 1):
            if not base:
                return []  # climbs above the workspace
            base = posixpath.dirname(base)
        module = posixpath.join(base, module) if module else base
    if not module:
        return [name for name in names if name != "*"]
    return [module] + [f"{module}/{name}" for name in names if name != "*"]
