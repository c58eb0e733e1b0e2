"""A Python file's skeleton: its source with function bodies blanked but for their imports, for `ast` to parse.

`ast.parse` builds a Python object for every node of a file, and most nodes are in function bodies, of which an
outline uses only the import statements (python_outline.py). The skeleton keeps every line outside function bodies
as it is, keeps each import statement inside one (moved to the body's indentation: an import under a `try:` of the
body is still an import of the file), and blanks everything else, so line numbers stay; a body's first statement
becomes `pass` unless it is an import. Strings and comments are found first (one regular expression), so a `def`,
a bracket or an indentation inside them is never taken for code. The scan is a heuristic over text: when the
skeleton does not parse, the caller parses the whole file (python_outline.py does), so a wrong guess costs time,
never a wrong outline of a valid file. Long simple statements outside function bodies (data tables, `__all__`,
lists of test cases: a statement whose first line goes on over the next ones) are blanked the same way (their first
line becomes `pass`): an outline never reads them, and their nodes were a third of parsing sympy's skeletons.

The scan jumps between the lines that matter, found by regular expressions over the masked text (function headers,
the first line indented no deeper than a header, import statements), rather than deciding line by line in Python:
a line is a statement's start when the brackets before it (counted from the body's first statement) balance and
the line before it does not end with a backslash. (Line by line it was two thirds of parsing sympy.)
"""

from __future__ import annotations

import re

# Strings (triple-quoted first; any prefix is irrelevant to where a string ends) and comments. Each string is an
# unrolled loop (runs of plain characters between escapes or lone quotes) rather than a lazy repeat of one character
# at a time: the same matches, a third faster on sympy's long docstrings.
_STRINGS_AND_COMMENTS = re.compile(
    r'"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""'
    r"|'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''"
    r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
    r"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'"
    r"|#[^\n]*",
    re.DOTALL,
)
_GOES_ON = "\x01"  # starts a masked line that continues a string begun on an earlier line
_BLANKS = " \t\f\r"
_HEADER = re.compile(r"^[ \t\f]*(?:async[ \t\f]+)?def[ \t]", re.M)
_NOT_BLANK = re.compile(r"^[ \t\f\r]*[^ \t\f\r\n]", re.M)
_IMPORT = re.compile(r"\n[ \t\f\r]*(?:import[ \t]|from[ \t.])")  # with the newline before it (as _dedent)
_LINE_END = re.compile("\n(?!" + _GOES_ON + ")")
_IMPORTS = ("import ", "import\t", "from ", "from\t", "from.")
# The end of a line that goes on over the next (it ends inside brackets it opened, or with a backslash): outside
# function bodies, where a long simple statement (a data table, `__all__`, test cases) may start.
_GOES_ON_BELOW = re.compile(r"[(\[{,\\][ \t\f\r]*$", re.M)
# A line's indentation, then whether it starts a statement to keep (an outline reads it, a string may be the module's
# docstring, `match` and `case` head blocks that may hold definitions) or is never a statement's start.
_LINE_START = re.compile(
    r"([ \t\f]*)(?:((?:def|async|class|if|elif|else|for|while|try|except|finally|with|match|case|import|from)\b"
    r"|[A-Za-z]{0,2}''|@)|([)\]}" + _GOES_ON + "]))?"
)
_dedents: dict[int, re.Pattern[str]] = {}  # indent width → its compiled regex: a pure function of the key


def _mask(match: re.Match[str]) -> str:
    text = match.group()
    if text[0] == "#":
        return ""
    lines = text.count("\n")
    return "''" + ("\n" + _GOES_ON) * lines if lines else "''"


def _dedent(indent: int) -> re.Pattern[str]:
    """A line indented at most `indent` characters that holds code (not a string's continuation), with the newline
    before it: an expression that starts with a fixed character is searched for that character first, one that starts
    with `^` is tried at every position."""
    pattern = _dedents.get(indent)
    if pattern is None:
        pattern = _dedents[indent] = re.compile(rf"\n[ \t\f\r]{{0,{indent}}}[^ \t\f\r\n{_GOES_ON}]")
    return pattern


def _balance(text: str, start: int, end: int) -> int:
    """Brackets opened minus closed in text[start:end]."""
    return (
        text.count("(", start, end)
        + text.count("[", start, end)
        + text.count("{", start, end)
        - text.count(")", start, end)
        - text.count("]", start, end)
        - text.count("}", start, end)
    )


class _Scan:
    """The masked text with a cursor that turns positions into line numbers (positions asked for only grow)."""

    def __init__(self, masked: str) -> None:
        self.text = masked
        self.at, self.line = 0, 0

    def line_of(self, position: int) -> int:
        if position < self.at:
            self.at, self.line = 0, 0
        self.line += self.text.count("\n", self.at, position)
        self.at = position
        return self.line

    def statement_end(self, start: int) -> int:
        """The start of the line after the logical line beginning at `start` (brackets, backslashes and multi-line
        strings continue a line), or the text's length."""
        text, depth, line = self.text, 0, start
        while True:
            found = _LINE_END.search(text, line)  # a string's continuation lines are taken in one step
            if found is None:
                return len(text)
            end = found.start()
            depth += _balance(text, line, end)
            last = text.rfind("\n", line, end)  # the segment's last line starts after it; -1: at `line`
            joined = text[last + 1 if last >= 0 else line : end].rstrip(_BLANKS).endswith("\\")
            line = end + 1
            if depth <= 0 and not joined:
                return line

    def is_statement(self, base: int, line: int) -> bool:
        """Whether the line starting at `line` starts a statement, given that the one at `base` does."""
        return _balance(self.text, base, line) == 0 and not self.joined(line)

    def joined(self, line: int) -> bool:
        """Whether the line before the one starting at `line` ends with a backslash (it goes on at `line`)."""
        text = self.text
        before = text[text.rfind("\n", 0, line - 1) + 1 : line - 1] if line > 0 else ""
        return before.rstrip(_BLANKS).endswith("\\")

    def block_end(self, start: int, indent: int) -> int:
        """The start of the first line after the one at `start` that is indented at most `indent` characters and
        starts a statement, given that the one at `start` does (the end of a function's body, of a statement), or the
        text's length. Brackets are counted once, from line to line: a table with lines at column 0 stays linear."""
        text, dedent = self.text, _dedent(indent)
        after = text.find("\n", start) + 1 or len(text)
        depth, counted = 0, start
        while after < len(text):
            found = dedent.search(text, after - 1)  # from the newline before the line at `after`
            if found is None:
                break
            line = found.start() + 1
            depth += _balance(text, counted, line)
            counted = line
            if depth == 0 and not self.joined(line):
                return line
            after = text.find("\n", line) + 1 or len(text)
        return len(text)


def _blank_statements(scan: _Scan, out: list[str], start: int, end: int) -> None:
    """Blank the long simple statements between `start` and `end` of the masked text (outside function bodies, where
    `start` starts a statement) as bodies are blanked: their first line becomes `pass`, the rest empty lines.

    A statement of many lines (a data table) is parsed into many nodes that an outline never reads; one line is a
    few, cheaper to parse than to look at here, so only lines that go on over the next ones are candidates."""
    masked = scan.text
    depth, counted = 0, start  # brackets open at `counted`, counted from `start`
    for found in _GOES_ON_BELOW.finditer(masked, start, end):
        if found.start() < start:
            continue  # in a statement passed already
        at = masked.rfind("\n", 0, found.start()) + 1
        depth += _balance(masked, counted, at)
        counted = at
        line_start = _LINE_START.match(masked, at)
        assert line_start is not None  # every part of it is optional
        if line_start.group(3) or depth or scan.joined(at):
            continue  # a continuation line
        if line_start.group(2):  # kept: its lines go on to where its logical line ends
            start = counted = scan.statement_end(at)
            continue
        indent = line_start.end(1) - at
        stop = scan.block_end(at, indent)  # the statement ends at the next one no deeper than it
        if stop > end:
            return  # it would run into the next function: a wrong guess, left as it is
        line = scan.line_of(at)
        last = scan.line_of(stop) if stop < len(masked) else len(out)
        out[line] = out[line][:indent] + "pass"
        out[line + 1 : last] = [""] * (last - line - 1)
        start = counted = stop


def skeleton(source: str) -> str:
    """The source with function bodies blanked except their imports (line numbers kept); see the module docstring."""
    masked = _STRINGS_AND_COMMENTS.sub(_mask, source)
    original = source.split("\n")
    if masked.count("\n") != len(original) - 1:  # cannot happen for text the expression understood; be safe
        return source
    scan = _Scan(masked)
    out = list(original)
    position = 0
    while True:
        header = _HEADER.search(masked, position)
        gap_end = len(masked) if header is None else header.start()
        if _GOES_ON_BELOW.search(masked, position, gap_end):  # most gaps between functions hold no candidate
            _blank_statements(scan, out, position, gap_end)
        if header is None:
            break
        indent = len(header.group()) - len(header.group().lstrip(_BLANKS))
        body = scan.statement_end(header.start())
        first = _NOT_BLANK.search(masked, body)
        if first is None:
            break
        body_indent = len(first.group()) - 1
        if body_indent <= indent:  # a one-line function (`def f(): return 1`) or no body at all
            position = first.start()
            continue
        start = first.start()
        end = scan.block_end(start, indent)  # the body ends at the first statement indented no deeper than the header
        after_first = masked.find("\n", start) + 1 or end
        # most bodies import nothing: a substring search says so before the line-by-line expression runs
        imports = _IMPORT.finditer(masked, after_first - 1, end) if masked.find("import", after_first, end) >= 0 else ()
        kept = [(start, masked.startswith(_IMPORTS, start + body_indent))]
        kept += [(found.start() + 1, True) for found in imports if scan.is_statement(start, found.start() + 1)]
        first_line = scan.line_of(start)
        prefix = masked[start : start + body_indent]
        edits: list[tuple[int, int, bool]] = []  # (line, last line of the statement + 1, is an import)
        for at, is_import in kept:
            line = scan.line_of(at)
            edits.append((line, scan.line_of(scan.statement_end(at)) if is_import else line + 1, is_import))
        end_line = scan.line_of(end) if end < len(masked) else len(original)
        out[first_line:end_line] = [""] * (end_line - first_line)
        for line, last, is_import in edits:
            if is_import:
                out[line] = prefix + original[line].lstrip(_BLANKS)
                out[line + 1 : last] = original[line + 1 : last]
            else:
                out[line] = prefix + "pass"
        position = end
    return "\n".join(out)
