"""Python outlines with `ast`: classes, functions and methods with signatures, the module docstring, imports.

The tree is parsed from the file's skeleton (function bodies blanked but for their imports, python_skeleton.py):
the same outline for a fraction of the parsing; a skeleton that does not parse falls back to the whole file."""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Iterator

from agents.repo_map.python_skeleton import skeleton
from agents.repo_map.symbols import Symbol, one_line

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
    """The statement lists under a compound statement that still belong to the enclosing scope (if/try/with/…)."""
    for name in ("body", "orelse", "finalbody"):
        body = getattr(node, name, None)
        if isinstance(body, list):
            yield body
    for handler in getattr(node, "handlers", ()):
        yield handler.body
    for case in getattr(node, "cases", ()):
        yield case.body


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


def python_outline(data: bytes, path: str) -> tuple[str, list[Symbol], list[str]]:
    tree = _parse(data, path)
    if tree is None:  # not valid for this Python: file-level only
        return "", [], []
    doc = ast.get_docstring(tree, clean=True) or ""
    summary = one_line(doc.strip().split("\n", 1)[0], 160) if doc.strip() else ""
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
