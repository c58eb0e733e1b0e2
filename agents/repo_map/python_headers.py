"""A Python file's headers: its definitions (decorators and `def`/`class` lines), imports and first statement, found
by scanning the text; a plain one is read from its text, the others are copied out for `ast` to parse.

An outline reads a file's classes, functions and methods with their signatures, its import statements and its
docstring (python_outline.py): a few lines of most files. Parsing the whole file, or even its skeleton
(python_skeleton.py), builds a node for every statement of every class body and module-level block. Here the scan
finds where each definition sits (inside which class, or inside a function, whose definitions are not shown) from
indentation, with the skeleton's scanner: strings and comments masked first, a block's end the first statement
indented no deeper than its header. A header on one line with only names in its brackets (`def f(self, x):`,
`class A(b.C):`, most of them), a decorator that is a dotted name or a call of one, and an import of names on one
line are read with regular expressions, as `ast.unparse` would write them; every other header or import statement
is copied out at column 0, and `ast` parses them together as one small module.

The scan is a heuristic over text, and it says so when it is unsure: `headers` returns None for a file it does not
follow (indentation with tabs or form feeds, lone carriage returns, a decorator not followed by a definition, an
import after a string on its line), and the caller parses the file's skeleton instead. A header copied out wrongly
does not parse, or parses into another kind than the scan found: the caller compares and falls back too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agents.repo_map.python_skeleton import _BLANKS, _GOES_ON, _NOT_BLANK, _STRINGS_AND_COMMENTS, _mask, _Scan
from agents.repo_map.symbols import one_line

# Decorators an outline shows (by the last name of what decorates: `functools.cached_property`, `x.setter`).
SHOWN_DECORATORS = frozenset(
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

# The expressions below start with a fixed character and use possessive repeats (`*+`), so that the regular
# expression engine looks for that character and never backtracks over indentation: searched over a whole file, an
# expression that starts with `^` (tried at every position) or backtracks took ten times as long.
#
# A definition's first line: a decorator, or a `def` / `async def` / `class` header (the newline before it).
_DEFINITION = re.compile(r"\n([ \t\f]*+)(?:@|def[ \t]|class[ \t]|async[ \t])")
_HEADER = re.compile(r"(?:async[ \t]++)?def[ \t]|class[ \t]")
# The keywords an import statement starts with, each searched for alone (a fixed text is found fastest); what comes
# before one on its line says whether it starts a statement there.
_IMPORT_WORDS = (re.compile(r"import[ \t]"), re.compile(r"from[ \t.]"))
_ODD_INDENT = re.compile(r"\n *+[\t\f]")
_STRING_START = re.compile(r"[A-Za-z]{0,2}''")
# Headers whose signature is their text, written as `ast.unparse` would (most of them: sympy's 28k of 34k
# functions), on one line of their own: names, dotted names, commas; no annotation, default or star.
_NAME = r"[A-Za-z_]\w*+"
_DOTTED = rf"{_NAME}(?:[ \t]*+\.[ \t]*+{_NAME})*+"
_PLAIN_DEF = re.compile(
    rf"(async[ \t]++)?def[ \t]++({_NAME})[ \t]*+\([ \t]*+((?:{_NAME}[ \t]*+,[ \t]*+)*+(?:{_NAME}[ \t]*+)?)\)"
    r"[ \t]*+:[ \t\r]*+\n",
    re.ASCII,
)
_PLAIN_CLASS = re.compile(
    rf"class[ \t]++({_NAME})[ \t]*+(?:\([ \t]*+((?:{_DOTTED}[ \t]*+,[ \t]*+)*+(?:{_DOTTED}[ \t]*+)?)\)[ \t]*+)?"
    r":[ \t\r]*+\n",
    re.ASCII,
)
_ALIASES = rf"{_NAME}(?:[ \t]++as[ \t]++{_NAME})?+(?:[ \t]*+,[ \t]*+{_NAME}(?:[ \t]++as[ \t]++{_NAME})?+)*+"
_PLAIN_IMPORT = re.compile(
    rf"import[ \t]++({_DOTTED}(?:[ \t]++as[ \t]++{_NAME})?+(?:[ \t]*+,[ \t]*+{_DOTTED}(?:[ \t]++as[ \t]++{_NAME})?+)*+)"
    r"[ \t\r]*+\n",
    re.ASCII,
)
_PLAIN_FROM = re.compile(
    rf"from[ \t]*+(\.*+)[ \t]*+({_DOTTED})?[ \t]*+import\b[ \t]*+(\*|\([ \t]*+{_ALIASES}[ \t]*+,?[ \t]*+\)|{_ALIASES})"
    r"[ \t\r]*+\n",
    re.ASCII,
)
_AS = re.compile(r"[ \t]++as[ \t]++\w++")
_PLAIN_DECORATOR = re.compile(rf"@[ \t]*+({_DOTTED})[ \t]*+(?:\([^()\n]*+\)[ \t]*+)?\r?\n", re.ASCII)


@dataclass(frozen=True, slots=True)
class Headers:
    """What `headers` found: each definition, and the sources left to parse."""

    # Each definition in file order: (1-based line of its `def`/`class`, is a class, the index of its class here or
    # None, its name, its signature). Name and signature are "" for one to read from `definitions_source`.
    definitions: list[tuple[int, bool, int | None, str, str]]
    definitions_source: str  # those definitions' decorators and headers (body `pass`), at column 0, in file order
    imports: list[Import]  # each import statement in file order
    imports_source: str  # the import statements left to parse, at column 0, in file order
    first_statement: str  # the file's first statement when it starts with a string (the docstring), else ""


def _names(text: str) -> list[str]:
    """The comma-separated (dotted) names of a plain header or import, as `ast` writes each (`as` names dropped): a
    plain text holds no blank but around its commas, dots and brackets."""
    if " as" in text or "\tas" in text:
        text = _AS.sub("", text)
    names = text.replace(" ", "").replace("\t", "").strip("()").split(",")
    if not names[-1]:
        names.pop()  # a trailing comma, or no name at all
    return names


# An import statement: (is `from … import`, the module or None, its level (leading dots), the names imported), or
# for one to read from `imports_source`, its first line there (1-based).
Import = tuple[bool, str | None, int, list[str]] | int


def _body_end(scan: _Scan, indent: int, header_end: int) -> int:
    """Where the body of the definition whose header (indented `indent`) ends at `header_end` ends."""
    body = _NOT_BLANK.search(scan.text, header_end)
    if body is None or body.end() - 1 - body.start() <= indent:
        return header_end  # a one-line definition (`def f(): return 1`), or no body
    return scan.block_end(body.start(), indent)


def headers(source: str) -> Headers | None:
    """The file's headers (see the module docstring), or None when the scan cannot follow the file."""
    lines = source.split("\n")
    text = "\n" + _STRINGS_AND_COMMENTS.sub(_mask, source)  # masked; a newline first, so every line has one before
    if text.count("\n") != len(lines) or _ODD_INDENT.search(text):
        return None
    if "\r" in source and source.count("\r") != source.count("\r\n"):
        return None  # a lone carriage return ends a line for Python, not for this scan
    scan = _Scan(text)

    def row(position: int) -> int:
        """The source's line number (0-based) of a position in `text` (or len(lines) at its end)."""
        return scan.line_of(position) - 1 if position < len(text) else len(lines)

    def copy(start: int, end: int, first: int, last: int, indent: int) -> str:
        """Source lines first..last-1 (text[start:end]), those holding code moved `indent` columns left (a string's
        continuation lines, and lines indented less, inside brackets, as they are)."""
        out = []
        for number, masked in zip(range(first, last), text[start:end].split("\n")):
            line = lines[number]
            out.append(line if masked.startswith(_GOES_ON) or line[:indent].strip(_BLANKS) else line[indent:])
        return "\n".join(out)

    definitions: list[tuple[int, bool, int | None, str, str]] = []
    sources: list[str] = []
    classes: list[tuple[int, int]] = []  # open classes: (where its body ends, its index in `definitions`)
    # The end of a function's body is looked for only when a definition indented deeper than it comes next: it is in
    # the function (not shown, skipped), or after it (in a block the function is followed by). Most functions are
    # followed by one indented no deeper (the next method): there the body has ended already.
    function: tuple[int, int] | None = None  # the last function found: (its indentation, where its header ends)
    position = 0
    while found := _DEFINITION.search(text, position):
        start, indent = found.start() + 1, len(found.group(1))
        if function is not None and indent > function[0]:
            end = _body_end(scan, *function)
            if start < end:
                position = end - 1  # inside the function: what it defines is not shown (its imports are found below)
                function = None
                continue
        function = None
        while classes and classes[-1][0] <= start:
            classes.pop()
        header, shown, plain = start, "", True
        while text.startswith("@", header + indent):  # decorators up to the header they decorate
            decorator = _PLAIN_DECORATOR.match(text, header + indent)
            if decorator is None:
                plain = False
                end = scan.statement_end(header)
            else:
                name = decorator.group(1).rsplit(".", 1)[-1].strip(_BLANKS)
                shown += f"@{name} " if name in SHOWN_DECORATORS else ""
                end = decorator.end()
            after = _NOT_BLANK.search(text, end)
            if after is None or after.end() - 1 - after.start() != indent:
                return None
            header = after.start()
        head = _HEADER.match(text, header + indent)
        if head is None:
            if text.startswith("async", header + indent) and header == start:
                position = start  # `async for` / `async with`: not a definition
                continue
            return None
        is_class = head.group().startswith("class")
        simple = (_PLAIN_CLASS if is_class else _PLAIN_DEF).match(text, header + indent) if plain else None
        header_end = simple.end() if simple is not None else scan.statement_end(header)
        first, line = row(start), row(header)  # (rows are counted forwards: in this order)
        enclosing = classes[-1][1] if classes else None
        if simple is None:
            copied = copy(start, header_end, first, row(header_end), indent)
            if text[header:header_end].rstrip(_BLANKS + "\n").endswith(":"):
                copied += "\n pass"  # the body is on the lines below
            sources.append(copied)
            definitions.append((line + 1, is_class, enclosing, "", ""))
        elif is_class:
            name, bases = simple.group(1), _names(simple.group(2) or "")
            signature = one_line(f"{shown}class {name}" + (f"({', '.join(bases)})" if bases else ""))
            definitions.append((line + 1, True, enclosing, name, signature))
        else:
            name, prefix = simple.group(2), "async def" if simple.group(1) else "def"
            signature = one_line(f"{shown}{prefix} {name}({', '.join(_names(simple.group(3)))})")
            definitions.append((line + 1, False, enclosing, name, signature))
        if is_class:
            classes.append((_body_end(scan, indent, header_end), len(definitions) - 1))
        else:
            function = (indent, header_end)
        position = header_end - 1  # what comes next (from the newline before it)

    definitions_source = "\n".join(sources)
    starts = []  # (where the keyword is, whether it starts its line)
    for word in _IMPORT_WORDS:
        for found in word.finditer(text):
            keyword = found.start()
            before = text[text.rfind("\n", 0, keyword) + 1 : keyword].strip(_BLANKS)
            if not before:
                starts.append((keyword, True))
            elif before[-1] in ":;":  # after a compound statement's colon (`try: import x`), or a `;`
                starts.append((keyword, False))
    imports: list[Import] = []
    sources = []
    source_line = 1
    for keyword, at_line_start in sorted(starts):
        line_start = text.rfind("\n", 0, keyword) + 1
        line, column = scan.line_of(line_start) - 1, keyword - line_start
        if at_line_start:
            if text[text.rfind("\n", 0, line_start - 1) + 1 : line_start - 1].rstrip(_BLANKS).endswith("\\"):
                continue  # `raise E \` then `from e` on the next line: not an import
        elif text[line_start:keyword] != lines[line][:column]:
            return None  # a string before it on its line: its column in the source is not known here
        if simple := _PLAIN_IMPORT.match(text, keyword):
            imports.append((False, None, 0, _names(simple.group(1))))
        elif simple := _PLAIN_FROM.match(text, keyword):
            module = _names(simple.group(2))[0] if simple.group(2) else None
            imports.append((True, module, len(simple.group(1)), _names(simple.group(3))))
        else:  # its last line counted from its first: statements on one line (`import a; import b`) go backwards
            end = scan.statement_end(keyword)
            last = line + text.count("\n", line_start, end) if end < len(text) else len(lines)
            sources.append("\n".join([lines[line][column:], *lines[line + 1 : last]]))
            imports.append(source_line)
            source_line += last - line

    first_statement = ""
    opening = _NOT_BLANK.search(text, 1)
    if opening is not None:
        if opening.end() - 1 != opening.start():
            return None  # the first statement is indented: not a valid file
        if _STRING_START.match(text, opening.start()):
            line = row(opening.start())
            first_statement = "\n".join(lines[line : row(scan.statement_end(opening.start()))])
    return Headers(definitions, definitions_source, imports, "\n".join(sources), first_statement)
